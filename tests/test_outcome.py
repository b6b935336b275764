"""Which failure is the failure (tracer/dlltrace/diagnosis/outcome.py, docs/verdicts.md "Outcomes"): each rule
on its own, then real runs on Linux through `dlltrace run` and the report (a CPU fallback, a Python error that is
not a load, a crash)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dlltrace.diagnosis.outcome import (ProcessOutcome, PyError, feature_of, rule_driver_first, rule_load_class,
                                        rule_outcome)
from dlltrace.render.outcome import died_without_a_gpu_words, outcome_headline

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name, feature", [
    ("cudart64_110.dll", "CUDA"), ("cublasLt64_12.dll", "CUDA"), ("libcudart.so.11.0", "CUDA"), ("libcublas.so.12", "CUDA"),
    ("nvrtc64_120_0.dll", "CUDA"), ("cudnn64_8.dll", "cuDNN"), ("cudnn_ops_infer64_8.dll", "cuDNN"),
    ("libcudnn.so.8", "cuDNN"), ("nvinfer_10.dll", "TensorRT"), ("libnvinfer.so.7", "TensorRT"),
    ("nvcuda.dll", "the NVIDIA driver"), ("libcuda.so.1", "the NVIDIA driver"), ("DirectML.dll", "DirectML"),
    (r"C:\x\torch\lib\cudnn64_9.dll", "cuDNN"), ("/usr/lib/libnccl.so.2", "NCCL"),
    ("opencv_videoio_ffmpeg4100_64.dll", "OpenCV's FFmpeg video I/O"), ("opencv_videoio_ffmpeg.dll", "OpenCV's FFmpeg video I/O"),
    ("opencv_world4100.dll", None),
    ("dxcore.dll", None), ("libfoo.so.1", None), ("pywintypes311.dll", None), ("c10.dll", None), ("", None),
])
def test_feature_of(name, feature):
    assert feature_of(name) == feature


def test_rule_load_class():
    assert rule_load_class("fatal", "python_exception", "x.dll", "cudnn64_8.dll") == "fatal"
    assert rule_load_class("unknown", "no_exit", "x.dll", None) == "fatal"
    assert rule_load_class("went_on", "exit_zero", "libcudart.so.11.0", "libcudart.so.11.0") == "fallback"
    assert rule_load_class("went_on", "another_was_fatal", "a.pyd", "cudnn64_8.dll") == "fallback"  # (its leaf)
    assert rule_load_class("went_on", "retried_ok", "c10.dll", "c10.dll") == "probe"
    assert rule_load_class("went_on", "real_load_succeeded", "x.dll", None) == "probe"
    assert rule_load_class("went_on", "exit_zero", "dxcore.dll", "dxcore.dll") == "noise"


def test_rule_outcome():
    err = PyError("TypeError", "Unable to convert function return value")
    cuda = [("libcudart.so.11.0", "CUDA"), ("libcublas.so.11", "CUDA"), ("libcudnn.so.8", "cuDNN")]
    assert rule_outcome("crashed", 0xC0000005, True, None, []) == ProcessOutcome("crashed", 0xC0000005)
    assert rule_outcome("exited", 1, True, err, cuda).kind == "died_of_load"
    assert rule_outcome("exited", 1, False, err, cuda) == ProcessOutcome("died_of_other", 1, err)
    assert rule_outcome("exited", 0, False, None, cuda) == ProcessOutcome(
        "degraded", 0, None, ("CUDA", "cuDNN"), ("libcudart.so.11.0", "libcudnn.so.8"), missing=3)
    # (why the driver's library was not there is kept when the driver is lost, and only then)
    assert rule_outcome("exited", 0, False, None, cuda, gpu="no_kernel_driver").gpu == ""
    # (but no NVIDIA GPU is the answer whatever was lost: onnxruntime's CUDA provider, libcublasLt.so.12)
    assert rule_outcome("exited", 0, False, None, cuda, gpu="no_gpu").gpu == "no_gpu"
    driver = [*cuda, ("libcuda.so.1", "the NVIDIA driver")]
    assert rule_outcome("exited", 0, False, None, driver, gpu="no_gpu") == ProcessOutcome(
        "degraded", 0, None, ("the NVIDIA driver", "CUDA", "cuDNN"), ("libcuda.so.1", "libcudart.so.11.0", "libcudnn.so.8"),
        missing=4, gpu="no_gpu")
    assert rule_outcome("exited", 0, False, None, []) == ProcessOutcome("ok", 0)
    # (a failure whose own fix says why the driver's library was not there keeps it: torch's .cuda(), no GPU)
    assert rule_outcome("exited", 1, True, err, [], gpu="no_gpu") == ProcessOutcome("died_of_load", 1, err, gpu="no_gpu")
    assert rule_outcome("exited", 3, False, None, cuda) == ProcessOutcome("exited", 3)  # (a code nothing explains)
    assert rule_outcome("killed", None, False, None, cuda).kind == "killed"


def test_rule_driver_first():
    """The NVIDIA driver's fallback first (without it no GPU is used), the others in their order."""
    loads = [("libcudart.so.11.0", "CUDA"), ("libnvinfer.so.7", "TensorRT"), ("libcuda.so.1", "the NVIDIA driver"),
             ("libcudnn.so.8", "cuDNN")]
    assert rule_driver_first(loads) == [loads[2], loads[0], loads[1], loads[3]]
    assert rule_driver_first(loads[:2]) == loads[:2]
    assert rule_driver_first([]) == []


def test_the_degraded_headline_counts_every_library_and_says_no_gpu():
    """"and N more" counts the libraries that did not load, not the features (TensorFlow: 4 libraries, 3 features,
    read "and 2 more"); with no NVIDIA GPU on the machine, that is the answer."""
    o = ProcessOutcome("degraded", 0, None, ("the NVIDIA driver", "CUDA", "TensorRT"),
                       ("libcuda.so.1", "libcudart.so.11.0", "libnvinfer.so.7"), missing=4)
    assert outcome_headline(o) == ("the program ran without the NVIDIA driver, CUDA, TensorRT (on the CPU): "
                                   "libcuda.so.1 and 3 more did not load")
    assert outcome_headline(dataclasses.replace(o, gpu="no_gpu")) == (
        "the program ran on the CPU: this machine has no NVIDIA GPU (libcuda.so.1 and 3 more did not load)")
    assert outcome_headline(dataclasses.replace(o, gpu="no_kernel_driver")) == outcome_headline(o)
    old = ProcessOutcome("degraded", 0, None, ("CUDA",), ("libcudart.so.11.0",))  # (missing 0: one a feature)
    assert outcome_headline(old) == "the program ran without CUDA (on the CPU): libcudart.so.11.0 did not load"


def run_and_report(tmp_path: Path, code: str) -> tuple[subprocess.CompletedProcess, dict, str]:
    return run_command_and_report(tmp_path, [sys.executable, "-c", code])


def run_command_and_report(tmp_path: Path, argv: list[str]) -> tuple[subprocess.CompletedProcess, dict, str]:
    """`dlltrace run` of a command (the Linux recorder), then `report --json` of its trace: (the run, the report,
    the run's stderr: its summary)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", *argv],
                       capture_output=True, text=True, env=env, timeout=300)
    rep = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace), "--json"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert rep.returncode == 0, rep.stderr
    return r, json.loads(rep.stdout), r.stderr


def test_died_without_a_gpu_words():
    """A program that died of the NVIDIA driver's load on a machine with no NVIDIA GPU is told so after "N failed
    loads"; with a GPU (its driver not installed), or when it died of another load, nothing is added."""
    o = ProcessOutcome("died_of_load", 1, PyError("RuntimeError", "Found no NVIDIA driver on your system."), gpu="no_gpu")
    assert died_without_a_gpu_words(o) == ": the program needs an NVIDIA GPU, and this machine has none"
    assert died_without_a_gpu_words(dataclasses.replace(o, gpu="no_kernel_driver")) == ""
    assert died_without_a_gpu_words(dataclasses.replace(o, gpu="")) == ""
    assert died_without_a_gpu_words(dataclasses.replace(o, kind="degraded")) == ""  # (its own headline says it)


def report_with_package(tmp_path: Path, lines: list[str], table: str, name: str, package: str) -> str:
    """The text report of a trace (its lines) in whose elf_system `table` ("packages", "programs") apt had no
    package for `name` when `run` asked (asserted), made as if it had said `package`: a report made elsewhere
    names it from the trace, with sudo unless the run was root's."""
    (i,) = [k for k, x in enumerate(lines) if '"elf_system"' in x]
    system = json.loads(lines[i])
    assert name in system[table] and system[table][name] is None, system[table]
    system[table][name] = package
    lines = [*lines[:i], json.dumps(system), *lines[i + 1:]]
    (tmp_path / "t2.jsonl").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    again = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(tmp_path / "t2.jsonl")], capture_output=True,
                           text=True, env=env, timeout=300)
    sudo = "" if system.get("as_root") else "sudo "
    assert f"  Fix\n    1. {sudo}apt-get install {package}\n       (Debian, Ubuntu" in again.stdout, again.stdout
    return again.stdout


LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux recorder runs here")


@LINUX
def test_a_program_that_dies_of_the_missing_driver_is_told_the_machine_has_no_gpu(tmp_path):
    """The field test's torch 2.14.1+cu130 (a CUDA build, 5.5 GB: too big for CI, so its facts are made here):
    `torch.zeros(1).cuda()` on a machine with no NVIDIA GPU dlopens libcuda.so.1, goes on, then raises
    "RuntimeError: Found no NVIDIA driver on your system" (no chained OSError: the load was made before). The report
    made libcuda.so.1 the failure with the fix 'This machine has no NVIDIA GPU', but its first line said only
    '1 failed load': the answer is in that line now, and the JSON's outcome has the driver state (gpu)."""
    import glob
    r, rep, err = run_and_report(tmp_path, "import ctypes\ntry:\n    ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n"
                                           "    pass\nraise RuntimeError('Found no NVIDIA driver on your system. Please "
                                           "check that you have an NVIDIA GPU and installed a driver from "
                                           "http://www.nvidia.com/Download/index.aspx')\n")
    if rep["outcome"]["kind"] != "died_of_load":
        pytest.skip("this machine has the NVIDIA driver's libcuda.so.1")
    assert r.returncode == 1 and "RuntimeError: Found no NVIDIA driver" in err
    (d,) = [d for d in rep["diagnoses"] if d["outcome"]["kind"] == "died_of_load"]
    assert [f["name"] for f in d["failures"] if f["fate"] == "fatal"] == ["libcuda.so.1"], d["failures"]
    vendors = [open(v).read().strip().lower() for v in glob.glob("/sys/bus/pci/devices/*/vendor")]
    first = next(x for x in err.splitlines() if x.startswith("dlltrace ─"))  # (after the program's traceback)
    if vendors and "0x10de" not in vendors:  # (read here, not by dlltrace's code)
        assert rep["outcome"]["gpu"] == "no_gpu", rep["outcome"]
        assert first.startswith("dlltrace ─ 1 failed load: the program needs an NVIDIA GPU, and this machine has none"), first
        assert "This machine has no NVIDIA GPU (none on its PCI bus)" in err
    else:
        assert rep["outcome"]["gpu"] != "no_gpu" and first.startswith("dlltrace ─ 1 failed load"), first


@LINUX
def test_a_cpu_fallback_is_said_first(tmp_path):
    """A program that tries the CUDA runtime, goes on without it and exits 0 (TensorFlow's dso_loader, onnxruntime's
    CUDA provider): the first line says it ran without CUDA and names the library; its fix is shown."""
    r, rep, err = run_and_report(tmp_path, "import ctypes\ntry:\n    ctypes.CDLL('libcudart.so.11.0')\n"
                                           "except OSError:\n    print('running on the CPU')\n")
    import glob
    assert r.returncode == 0 and r.stdout == "running on the CPU\n"
    assert rep["outcome"]["kind"] == "degraded" and rep["outcome"]["lost_by"] == ["libcudart.so.11.0"]
    first = err.splitlines()[0]
    vendors = [open(v).read().strip().lower() for v in glob.glob("/sys/bus/pci/devices/*/vendor")]
    if vendors and "0x10de" not in vendors:  # (no NVIDIA GPU here, read by this test: that is the answer)
        assert rep["outcome"]["gpu"] == "no_gpu", rep["outcome"]
        assert first.startswith("dlltrace ─ the program ran on the CPU: this machine has no NVIDIA GPU "
                                "(libcudart.so.11.0 did not load)"), first
        assert "This machine has no NVIDIA GPU: installing it would not make the program use one" in err
    else:
        assert first.startswith("dlltrace ─ the program ran without CUDA (on the CPU): libcudart.so.11.0 did not load")
    assert "✗ libcudart.so.11.0 was not found" in err and "pip install nvidia-cuda-runtime-cu11" in err
    (d,) = [d for d in rep["diagnoses"] if d["outcome"]["kind"] == "degraded"]
    (f,) = [f for f in d["failures"] if f["name"] == "libcudart.so.11.0"]
    assert (f["fate"], f["klass"]) == ("went_on", "fallback")


@LINUX
def test_a_missing_driver_is_said_with_the_machines_gpu(tmp_path):
    """A program that tries the CUDA runtime and the driver's libcuda.so.1, goes on without both and exits 0: the
    driver comes first, and why it is not there is read from this machine (worlds/gpu.py), recorded in the trace
    and said: here, checked against sysfs read by this test, "no NVIDIA GPU" when none is on the PCI bus."""
    import glob
    r, rep, err = run_and_report(tmp_path, "import ctypes\nfor n in ('libcudart.so.11.0', 'libcuda.so.1'):\n"
                                           "    try:\n        ctypes.CDLL(n)\n    except OSError:\n        pass\n")
    if not r.returncode == 0 or "libcuda.so.1" not in rep["outcome"]["lost_by"]:
        pytest.skip("this machine has the NVIDIA driver's libcuda.so.1")
    vendors = [open(v).read().strip().lower() for v in glob.glob("/sys/bus/pci/devices/*/vendor")]
    o = rep["outcome"]
    assert o["lost"][:2] == ["the NVIDIA driver", "CUDA"] and o["missing"] == 2, o
    (d,) = [d for d in rep["diagnoses"] if d["outcome"]["kind"] == "degraded"]
    (f,) = [f for f in d["failures"] if f["name"] == "libcuda.so.1"]
    (fix,) = [x for x in f["fixes"] if x["action"] == "install_driver"]
    first = err.splitlines()[0]
    if vendors and "0x10de" not in vendors:
        assert o["gpu"] == "no_gpu" and fix["value"] == "no_gpu", (o, fix)
        assert first.startswith("dlltrace ─ the program ran on the CPU: this machine has no NVIDIA GPU "
                                "(libcuda.so.1 and 1 more did not load)"), first
        assert "This machine has no NVIDIA GPU (none on its PCI bus)" in err
        assert "This machine has no NVIDIA GPU: installing it would not make the program use one" in err
    else:
        assert o["gpu"] != "no_gpu" and first.startswith("dlltrace ─ the program ran without the NVIDIA driver, CUDA")
    assert err.index("✗ libcuda.so.1 was not found") < err.index("✗ libcudart.so.11.0 was not found")
    trace = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()[1:]]
    (system,) = [e for e in trace if e.get("ev") == "elf_system"]
    assert system["gpu"]["pci_devices"] == len(vendors), system["gpu"]


@LINUX
def test_a_python_error_that_is_not_a_load_blames_no_library(tmp_path):
    """The program goes past a missing CUDA runtime, then dies of a TypeError of its own (numpy 2's ABI error in
    an old TensorFlow reads like this): the TypeError is the answer; the load is context, with no fix."""
    r, rep, err = run_and_report(tmp_path, "import ctypes\ntry:\n    ctypes.CDLL('libcudart.so.11.0')\n"
                                           "except OSError:\n    pass\n"
                                           "raise TypeError('Unable to convert function return value to a Python type!')")
    assert r.returncode == 1 and "TypeError: Unable to convert" in err
    assert rep["outcome"]["kind"] == "died_of_other" and rep["fatal"] is None
    assert rep["outcome"]["exception"]["type"] == "TypeError"
    head = next(line for line in err.splitlines() if line.startswith("dlltrace ─"))
    assert head.startswith("dlltrace ─ the program ended with TypeError: Unable to convert function return value")
    assert "no failed load explains it" in head and "pip install" not in err


@LINUX
def test_a_crash_is_said_as_a_crash(tmp_path):
    r, rep, _ = run_and_report(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert r.returncode == 128 + 11
    (d,) = [d for d in rep["diagnoses"] if d["end"]["signal"] == 11]
    assert d["outcome"]["kind"] == "crashed"


@LINUX
def test_rule_linux_crash_after_failed_load(tmp_path):
    """A program whose last load fails and which then aborts (Qt's qFatal when its platform plugin does not load)
    crashed of that load: the headline says the crash and the library, where the user's code was (faulthandler's
    stack), and the load is the failure, with its folders; an earlier load the program went past is not."""
    r, rep, err = run_and_report(tmp_path, "import ctypes, os\ntry:\n    ctypes.CDLL('libearlier_gone.so.1')\n"
                                           "except OSError:\n    pass\n"
                                           "def start():\n    try:\n        ctypes.CDLL('libplugin_gone.so.6')\n"
                                           "    except OSError:\n        os.abort()\n\nstart()\n")
    assert r.returncode == 128 + 6
    assert err.splitlines()[0].startswith("dlltrace ─ the program crashed (SIGABRT: it aborted), right after "
                                          "libplugin_gone.so.6 failed to load")
    (d,) = [d for d in rep["diagnoses"] if d["end"]["kind"] == "crashed"]
    assert d["outcome"] == {**d["outcome"], "kind": "crashed", "signal": 6}
    at = d["end"]["crashed_at"]
    assert at["file"] == "<string>" and at["line"] == 10 and at["function"] == "start", d["end"]
    assert d["end"]["fault"] == "Fatal Python error: Aborted"
    fates = {f["name"]: (f["fate"], f["reason"]) for f in d["failures"]}
    assert fates == {"libearlier_gone.so.1": ("went_on", "another_was_fatal"),
                     "libplugin_gone.so.6": ("fatal", "crashed_after")}
    assert "It crashed in your code at <string>:10, in start (Fatal Python error: Aborted)" in err


@LINUX
def test_a_crash_after_loads_went_on_blames_no_load(tmp_path):
    """A load that failed and was followed by one that loaded is not what a later crash was of."""
    r, rep, err = run_and_report(tmp_path, "import ctypes, os\ntry:\n    ctypes.CDLL('libgone_before.so.1')\n"
                                           "except OSError:\n    pass\nctypes.CDLL('libbz2.so.1.0')\nos.abort()\n")
    assert r.returncode == 128 + 6
    assert err.splitlines()[0].startswith("dlltrace ─ the program crashed (SIGABRT: it aborted); no failed load "
                                          "explains it")
    (d,) = [d for d in rep["diagnoses"] if d["end"]["kind"] == "crashed"]
    assert all(f["fate"] != "fatal" for f in d["failures"])


def test_rule_program_said():
    from dlltrace.diagnosis.outcome import rule_program_said

    said = ["UserWarning: Failed to load image Python extension: 'libpng16.so.16: cannot open shared object file'",
            "UserWarning: CUDA initialization: Found no NVIDIA driver on your system.",
            "DeprecationWarning: pkg_resources is deprecated"]
    assert rule_program_said(said, "/v/torchvision/image.so", "libpng16.so.16") == (said[0],)  # (its leaf named)
    assert rule_program_said(said, "libcuda.so.1", "libcuda.so.1") == (said[1],)  # (the driver's words)
    assert rule_program_said(said, "C:\\x\\cudart64_110.dll", None) == (said[1],)  # (CUDA's)
    assert rule_program_said(said, "libgomp.so.1", "libgomp.so.1") == ()


@LINUX
def test_the_programs_own_warnings_are_shown_with_the_load(tmp_path):
    """A warning the program shows about a failed load (torchvision's "Failed to load image Python extension") is
    recorded and said with that load; one a catch_warnings(record=True) block keeps is never shown, nor recorded."""
    r, rep, err = run_and_report(tmp_path, "import ctypes, warnings\ntry:\n    ctypes.CDLL('libpng_gone.so.16')\n"
                                           "except OSError as e:\n"
                                           "    warnings.warn(f\"Failed to load image Python extension: '{e}'\")\n"
                                           "with warnings.catch_warnings(record=True):\n"
                                           "    warnings.warn('libpng_gone.so.16 kept, never shown')\n"
                                           "ctypes.CDLL('libpng_gone.so.16')\n")
    assert r.returncode == 1 and "UserWarning: Failed to load image Python extension" in err  # (still shown)
    (d,) = [d for d in rep["diagnoses"] if d["outcome"]["kind"] == "died_of_load"]
    said = [f["said"] for f in d["failures"]]
    assert said == [["UserWarning: Failed to load image Python extension: 'libpng_gone.so.16: cannot open shared "
                     "object file: No such file or directory'"]] * 2, said
    assert "  the program said: UserWarning: Failed to load image Python extension" in err


def test_rule_linux_variant_probe():
    from dlltrace.diagnosis.replay_linux import LinuxCall
    from dlltrace.diagnosis.verdict_linux import rule_linux_variant_probe

    core = "/q/lib/libQt6Core.so.6"
    avx2 = LinuxCall(1, "/py", "/q/plugins/libqxcb.so.avx2", core, "gone", "gone")
    plain = LinuxCall(1, "/py", "/q/plugins/libqxcb.so", core, "libxcb-icccm.so.4: cannot open", "")
    other = LinuxCall(1, "/py", "/q/plugins/libqxcb.so.avx2", "/q/lib/libother.so", "gone", "gone")
    assert rule_linux_variant_probe(avx2, [avx2, plain])
    assert not rule_linux_variant_probe(plain, [avx2, plain])  # (the plain one is what counts)
    assert not rule_linux_variant_probe(other, [other, plain])  # (another object's call)
    assert not rule_linux_variant_probe(avx2, [plain, avx2])  # (tried after, not before)
    dotted = LinuxCall(1, "/py", "/q/plugins/libqxcb.so.6.8", core, "gone", "gone")
    assert not rule_linux_variant_probe(dotted, [dotted, plain])  # (a version, not a variant suffix)
    # (weasyprint 70's _dlopen: 'libgobject-2.0-0.dll', then 'libgobject-2.0-0' again, which it raises: the
    # .dll is another system's name of the failure, not a variant tried first)
    ffi = "/v/site-packages/_cffi_backend.cpython-311-x86_64-linux-gnu.so"
    dll = LinuxCall(1, "/py", "libgobject-2.0-0.dll", ffi, "gone", "gone")
    again = LinuxCall(1, "/py", "libgobject-2.0-0", ffi, "gone", "gone")
    assert not rule_linux_variant_probe(dll, [dll, again])


def test_rule_opencl_driver_not_loaded():
    """pyopencl 2026.1.4, an .icd naming libnvidia-opencl.so.1, not installed (field test, Debian 12): the wheel's ICD
    loader (auditwheel's libOpenCL-<hash>.so.1.0.0) fails to dlopen it, and the program ends with
    'clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR', which names no library: that load is the one; a failed load
    another object made is not, nor any for another error."""
    from dlltrace.diagnosis.replay_linux import LinuxCall
    from dlltrace.diagnosis.verdict_linux import rule_opencl_driver_not_loaded

    icd = "/v/site-packages/pyopencl/.libs/libOpenCL-5519dec5.so.1.0.0"
    probe = LinuxCall(1, "/py", "libfoo.so.1", "/v/site-packages/other.so", "gone", "gone")
    driver = LinuxCall(1, "/py", "libnvidia-opencl.so.1", icd, "gone", "gone")
    text = "pyopencl._cl.LogicError: clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR"
    assert rule_opencl_driver_not_loaded(text, [probe, driver]) == 1
    assert rule_opencl_driver_not_loaded(text, [driver, probe]) == 0  # (the ICD loader's, wherever it is)
    assert rule_opencl_driver_not_loaded(text, [probe]) is None
    assert rule_opencl_driver_not_loaded("RuntimeError: out of memory", [probe, driver]) is None
    system = LinuxCall(1, "/py", "libpocl.so.2", "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1", "gone", "gone")
    assert rule_opencl_driver_not_loaded("clGetPlatformIDs failed (-1001)", [system]) == 0


def test_rule_exception_names_library_stem():
    """An exception naming a failed library by its stem only (python-magic 0.4.27, libmagic1 not installed:
    ctypes.CDLL('libmagic.so.1') fails, its OSError is caught, ImportError('failed to find libmagic.  Check
    your installation') is raised): that library, the last so named; a stem that is only part of a word, or no
    more than `lib`, names nothing."""
    from dlltrace.diagnosis.verdict_linux import rule_exception_names_library_stem as rule

    magic = "failed to find libmagic.  Check your installation"
    assert rule(magic, ["libnope_optional.so.1", "libmagic.so.1"]) == 1
    assert rule(magic, ["/usr/lib/x86_64-linux-gnu/libmagic.so.1", "libnope_optional.so.1"]) == 0
    assert rule("could not load LIBGL", ["libGL.so.1"]) == 0  # (any case)
    assert rule(magic, ["libmagic_extra.so.1", "libmag.so.1"]) is None  # (part of a word: not its name)
    assert rule("libmagicx is missing", ["libmagic.so.1"]) is None
    assert rule("the lib folder is empty", ["lib.so.1", None]) is None
    # a stem the process loaded by another name: a failed try of it was not what the exception is about
    inflate = "libz returned Z_DATA_ERROR (-3) inflating the stream"
    assert rule(inflate, ["libz.so.99", "libnothere.so.3"]) == 0
    assert rule(inflate, ["libz.so.99", "libnothere.so.3"], ["libz.so.1"]) is None
    assert rule(magic, ["libmagic.so.1"], ["libz.so.1", "/x/libmagic_extra.so"]) == 0
    # else the stem without its `lib`, of three letters or more, the first so named (the field test: pyttsx3 2.99
    # tries libespeak-ng.so.1 and libespeak.so.1, then 'This means you probably do not have eSpeak or eSpeak-ng
    # installed!', and only libespeak-ng1 makes it work; PyOpenGL 3.1.10 tries libOpenGL.so.* and libGL.so.*, then
    # 'Unable to load OpenGL or GL library')
    espeak = "This means you probably do not have eSpeak or eSpeak-ng installed!"
    assert rule(espeak, ["/opt/homebrew/lib/libespeak-ng.1.dylib", "libespeak-ng.so.1", "libespeak.so.1",
                         r"C:\Program Files\eSpeak NG\libespeak-ng.dll"]) == 1
    assert rule("failed to find libmagic; is magic installed?", ["libmagic.so.1", "libmagic.so.2"]) == 1  # (`lib` first)
    gl = "Unable to load OpenGL or GL library"
    assert rule(gl, ["libOpenGL.so.0", "libOpenGL.so.1", "libGL.so.1"]) == 0  # ('GL': too short a word)
    assert rule("no module named ssl", ["libssl.so.1.1"], ["libssl.so.3"]) is None  # (loaded by another name)
    assert rule("the magic number is wrong", ["libmagicx.so.1", "libma.so.1"]) is None
    assert rule("No such file: '/usr/lib/python3.11/x.py'", ["libpython3.11.so.1.0"]) is None  # (a path's part)


def test_rule_soname_of_the_same_library():
    """The failed call the exception names is a name for another system (cairocffi 1.7.1 tries 'libcairo.so.2',
    'libcairo.2.dylib', 'libcairo-2.dll' and its OSError names all three; weasyprint 70 tries 'libpango-1.0-0',
    'pango-1.0', 'libpango-1.0.so.0', ... and names the first): the last failed call of the same process for the
    same library that is a Linux soname is taken, the one a package ships. A soname named stays; another library's
    soname, another process's, or a name with no soname of its library, is not taken."""
    from dlltrace.diagnosis.replay_linux import LinuxCall
    from dlltrace.diagnosis.verdict_linux import rule_soname_of_the_same_library as rule

    def call(name, pid=1):
        return LinuxCall(pid, "/usr/bin/python3", name, "/x/_ctypes.so", f"{name}: cannot open shared object file",
                         f"{name}: cannot open shared object file")

    cairo = [call("libcairo.so.2"), call("libcairo.2.dylib"), call("libcairo-2.dll")]
    assert rule(cairo[2], cairo) is cairo[0]
    assert rule(cairo[0], cairo) is cairo[0]  # (a soname named: itself)
    pango = [call(n) for n in ("libgobject-2.0-0", "libgobject-2.0.so.0", "libpango-1.0-0", "pango-1.0-0", "pango-1.0",
                               "libpango-1.0.so.0", "libpango-1.0.dylib", "libpango-1.0-0.dll")]
    assert rule(pango[2], pango) is pango[5]
    assert rule(pango[0], pango) is pango[1]  # (GObject's own soname, not Pango's)
    other = [call("libcairo.so.2", pid=2), call("libcairo-2.dll"), call("libpixman-1.so.0")]
    assert rule(other[1], other) is other[1]  # (another process's soname; another library's)
    assert rule(other[1], other[1:]) is other[1]


def test_a_long_message_leaves_the_find_library_answer_in_sight():
    """python-mpv 1.0.8's OSError is 200 characters: the headline cuts it to MAX_UNFOUND_MESSAGE when the
    find_library call it died of follows (the field test: the answer came at the end of a 275-character line)."""
    from dlltrace.diagnosis.result import Unfound
    from dlltrace.render.outcome import MAX_UNFOUND_MESSAGE, outcome_headline

    msg = ("Cannot find libmpv in the usual places. Depending on your distro, you may try installing an mpv-devel or "
           "mpv-libs package. If you have libmpv around but this script can't find it, consult the documentation")
    o = ProcessOutcome("died_of_other", 1, PyError("OSError", msg))
    head = outcome_headline(o, Unfound("mpv", "mpv", None, ()))
    assert head.endswith("…: ctypes.util.find_library('mpv') found no such library") and len(head) < 160, head
    cut = head.split("…: ctypes.util")[0]
    assert head.startswith("the program ended with OSError: Cannot find libmpv") and \
        len(cut) <= len("the program ended with ") + MAX_UNFOUND_MESSAGE - 1
    # (at a word's end, not in a word: the message goes on with a space after what is kept)
    assert msg.startswith(cut[len("the program ended with OSError: "):] + " "), cut
    assert outcome_headline(o).endswith("…; no failed load explains it")  # (no find_library: the longer cut)
    # (a message's last full stop is not kept before what follows it: pytesseract's ended ".; no failed load")
    done = ProcessOutcome("died_of_other", 1, PyError("TesseractNotFoundError", "See README file for more information."))
    assert outcome_headline(done) == ("the program ended with TesseractNotFoundError: See README file for more "
                                      "information; no failed load explains it")
    dots = ProcessOutcome("died_of_other", 1, PyError("ValueError", "expected one of a, b, ..."))
    assert outcome_headline(dots).endswith("a, b, ...; no failed load explains it")


def test_rule_exception_is_find_library():
    """The find_library call that found nothing that the exception is about (sounddevice 0.5.6: find_library
    ('portaudio') is None, then OSError('PortAudio library not found')): the last such call whose name the text holds
    as a word, with or without `lib`, in any case; a path-like name (its wheels' copies), a call that found its
    library, and one whose result was not recorded (the program's own tracer) are not taken."""
    from dlltrace.diagnosis.outcome import rule_exception_is_find_library as rule

    def find(name, **result):
        return {"ev": "py_find_library", "name": name, **result}

    sd = [find("portaudio", result=None), find("bin\\libportaudio-2.dll", result=None),
          find("lib/libportaudio.dylib", result=None)]
    assert rule("OSError: PortAudio library not found", sd) is sd[0]
    assert rule("ImportError: failed to find libmagic.  Check your installation", [find("magic", result=None)])
    assert rule("ImportError: Unable to find zbar shared library", [find("zbar", result=None)])
    assert rule("OSError: libusb-1.0 missing", [find("libusb-1.0", result=None)])  # (a name given with its lib)
    assert rule("OSError: PortAudio library not found", [find("portaudio", result="libportaudio.so.2")]) is None
    assert rule("OSError: PortAudio library not found", [find("portaudio")]) is None  # (not recorded)
    assert rule("OSError: PortAudiox library not found", sd) is None  # (part of a word: not its name)
    assert rule("ValueError: bad input", sd) is None
    assert rule("OSError: c", [find("c", result=None)]) is None  # (a one-letter name is no evidence)
    two = [find("portaudio", result=None), find("sndfile", result=None)]
    assert rule("OSError: sndfile and portaudio not found", two) is two[1]  # (the last)
    # a library the program then loaded all the same (its own path, its wheel's copy: find_library found none, the
    # program went past it): not what it died of, whatever the exception says
    mine = [{**find("dlltracefoo", result=None), "seq": 10}]
    later = [{"ev": "objopen", "seq": 12, "path": "/opt/x/libdlltracefoo.so.1"}]
    assert rule("RuntimeError: dlltracefoo: the device is not connected", mine, later) is None
    before = [{"ev": "objopen", "seq": 8, "path": "/opt/x/libdlltracefoo.so.1"}]  # (before the call: no answer to it)
    assert rule("RuntimeError: dlltracefoo: the device is not connected", mine, before) is mine[0]
    other = [{"ev": "objopen", "seq": 12, "path": "/usr/lib/libdlltracefoobar.so.1"}]  # (another library's name)
    assert rule("RuntimeError: dlltracefoo: the device is not connected", mine, other) is mine[0]
    # a function of the library, named after it (python-vlc 3.0.21203: find_library('vlc') is None, ctypes.CDLL(None)
    # opens the program itself, and NameError("no function 'libvlc_new'") follows; the field test)
    vlc = [find("vlc", result=None), find("c", result="libc.so.6")]
    assert rule("NameError: no function 'libvlc_new'", vlc) is vlc[0]
    assert rule("NameError: no function 'vlc_new'", vlc) is vlc[0]
    assert rule("NameError: no function 'libvlcx_new'", vlc) is None and rule("NameError: new_vlc", vlc) is None
    # Windows: pyusb 1.3.1 puts .dll after each name it asks for (find_library there finds NAME and NAME.dll), and
    # its usb.core.NoBackendError names `usb`: the last such call, libusb 0.1's 'usb.dll'
    usb = [find(n + ".dll", result=None) for n in ("usb-1.0", "libusb-1.0", "usb", "openusb", "usb-0.1", "usb",
                                                   "libusb0")]
    assert rule("usb.core.NoBackendError: No backend available", usb) is usb[5]
    assert rule("OSError: could not load libmagic.dll", [find("magic.dll", result=None)])
    assert rule("ValueError: No backend available", usb) is None


def test_rule_unfound_dll_with_a_fix():
    """The find_library call shown on Windows for the one an exception is about: itself when a fix of its name is
    known (a copy this environment holds, a pip package that ships it), else the program's first call for the same
    library (library_key) with one (pyusb 1.3.1: its NoBackendError names `usb`, the last call is libusb 0.1's
    'usb.dll', and libusb-package ships libusb-1.0.dll), else itself."""
    from dlltrace.diagnosis.outcome import rule_unfound_dll_with_a_fix as rule

    def find(name):
        return {"ev": "py_find_library", "name": name, "result": None, "searched": ["C:\\Windows\\system32"]}

    usb = [find(n + ".dll") for n in ("usb-1.0", "libusb-1.0", "usb", "openusb", "usb-0.1", "usb", "libusb0")]
    known = {"libusb-1.0.dll"}.__contains__
    assert rule(usb[5], usb, known) is usb[1]
    assert rule(usb[1], usb, known) is usb[1]  # (a name with a fix: itself)
    assert rule(usb[3], usb, known) is usb[3]  # (openusb: no other name of it)
    assert rule(usb[5], usb, set().__contains__) is usb[5]  # (none with a fix)
    found = [{**usb[1], "result": "C:\\x\\libusb-1.0.dll"}, usb[5]]  # (one that found its file is no answer)
    assert rule(usb[5], found, known) is usb[5]


def pyusb_trace(dest: Path, installed: bool) -> Path:
    """A handwritten Windows trace of pyusb 1.3.1 without libusb (the field test's, tests/test_real_field.py): seven
    find_library calls that find nothing, then usb.core.NoBackendError; `installed`: libusb-package is installed (its
    RECORD lists libusb_package/libusb-1.0.dll), its folder not on PATH."""
    from simhelp import handwritten, python_writer

    hw = handwritten()
    w, site = python_writer(hw, "import usb.core; usb.core.find()")
    dists = [{"name": "pyusb", "version": "1.3.1", "site": site, "files": [], "loaders": []}]
    if installed:
        dists.append({"name": "libusb_package", "version": "1.0.30.0", "site": site, "loaders": [],
                      "files": ["libusb_package/libusb-1.0.dll"]})
    w.ev("py_dists", dists=dists, conda=[], conda_prefix=None, cut=False)
    path = ["C:\\Python311", hw.SYS32, ""]
    frame = {"file": "<string>", "line": 1, "function": "<module>"}
    for n in ("usb-1.0", "libusb-1.0", "usb", "openusb", "usb-0.1", "usb", "libusb0"):
        w.ev("py_find_library", name=n + ".dll", result=None, searched=path, frame=frame, imports=[])
    w.ev("py_exception", type="usb.core.NoBackendError", message="No backend available", module=None, path=None,
         winerror=None)
    w.write(dest)
    return dest


def test_a_windows_program_that_died_of_find_library_is_told_where_it_looked(tmp_path, capsys):
    """pyusb without libusb on Windows (a handwritten trace; the real one runs under Wine in test_real_field): the
    headline names find_library('libusb-1.0.dll') (rule_unfound_dll_with_a_fix), the text says find_library looks in
    the PATH folders only and which, and the fix: with libusb-package installed, its folder put on PATH
    (analysis.find_library_fixes: the copy its RECORD lists); without it, pip install libusb-package, then that folder
    on PATH. The JSON says the same (outcome.find_library), and so does Markdown's first lines."""
    from dlltrace import cli

    site = "C:\\Python311\\Lib\\site-packages"
    folder = site + "\\libusb_package"
    head = ("dlltrace ─ the program ended with usb.core.NoBackendError: No backend available: "
            "ctypes.util.find_library('libusb-1.0.dll') found no such library")
    for installed in (False, True):
        trace = pyusb_trace(tmp_path / f"t{installed}.jsonl", installed)
        cli.main(["report", str(trace)])
        text = capsys.readouterr().out
        assert text.splitlines()[0].startswith(head), text
        assert "It looked in the 3 folders of PATH, and none holds libusb-1.0.dll:" in text, text
        assert "    (an empty entry: the current folder)" in text and f'set "PATH={folder};%PATH%"' in text, text
        assert ("-m pip install libusb-package" in text) == (not installed), text
        cli.main(["report", "--json", str(trace)])
        found = json.loads(capsys.readouterr().out)["outcome"]["find_library"]
        assert (found["name"], found["module"], found["searched"]) == ("libusb-1.0.dll", "", ["C:\\Python311",
                                                                       "C:\\Windows\\System32", ""]), found
        (fix,) = found["fixes"]
        if installed:
            assert (fix["action"], fix["variable"], fix["folder"], found["package"]) == ("set_env", "PATH", folder, None)
        else:
            assert (fix["action"], fix["package"], fix["folder"], found["package"]) == (
                "install_package", "libusb-package", folder, "libusb-package"), fix
            assert [(t["action"], t["folder"]) for t in fix["then"]] == [("set_env", folder)], fix
        cli.main(["report", "--markdown", str(trace)])
        md = capsys.readouterr().out
        assert md.startswith("**dlltrace:** the program ended with usb.core.NoBackendError: No backend available: "
                             "ctypes.util.find_library('libusb-1.0.dll') found no such library"), md
        assert "Suggested fix:" in md and "in each folder of PATH (3 here, none holds it)" in md, md


def test_windows_unfound_lines():
    """What follows the headline of a Windows program that died of a library find_library did not find: that it looks
    in each PATH folder for NAME, then NAME.dll, and nowhere else (not the DLL search), the folders it looked in (an
    empty entry is the current folder), and the fix: the pip package that ships it, then its folder put on PATH, with
    why installing it alone is not enough; with no fix known, where to put the DLL."""
    from dlltrace.diagnosis.result import Unfound
    from dlltrace.model import Fix
    from dlltrace.render.outcome import unfound_lines

    site = "C:\\py\\Lib\\site-packages\\libusb_package"
    step = Fix("env", "set_env", name="libusb-1.0.dll", variable="PATH", folder=site, path=site + "\\libusb-1.0.dll",
               python=False)
    fix = Fix("install", "install_package", name="libusb-1.0.dll", package="libusb-package", folder=site,
              path=site + "\\libusb-1.0.dll", exe="C:\\py\\python.exe", then=(step,))
    u = Unfound("libusb-1.0.dll", "", None, (fix,), ("C:\\Windows\\system32", "", "C:\\tools"))
    text = "\n".join(unfound_lines(u, lambda i, x: ["unused"], windows=True))
    assert "ctypes.util.find_library('libusb-1.0.dll') → None" in text
    assert "find_library looks for libusb-1.0.dll in each folder of PATH, in order, and in no other" in text
    assert "It looked in the 3 folders of PATH, and none holds libusb-1.0.dll:" in text
    assert "    (an empty entry: the current folder)" in text and "ld.so" not in text and "apt" not in text
    assert "    1. C:\\py\\python.exe -m pip install libusb-package" in text, text
    assert f'       then: Before starting the program: in cmd\n             set "PATH={site};%PATH%"' in text, text
    assert "installing it alone is not enough" in text and "unused" not in text
    bare = "\n".join(unfound_lines(Unfound("magic", "magic", None, (), ("C:\\a",)), lambda i, x: [], windows=True))
    assert "find_library looks for magic, then magic.dll, in each folder" in bare
    assert "Put magic.dll (the library's Windows DLL, of this Python's machine) in one of these folders" in bare


def test_rule_unfound_name_with_a_package():
    """The find_library call shown for the one an exception is about, when apt has no package of that name: the
    program's first call for the same library (library_key) that has one (pyusb 1.3.1 without libusb: find_library
    of 'usb-1.0', 'libusb-1.0', 'usb', 'openusb', 'usb-0.1', 'usb', 'libusb0', then usb.core.NoBackendError; the
    text names 'usb', of which Debian has no libusbN; 'usb-1.0' is in libusb-1.0-0; the field test)."""
    from dlltrace.diagnosis.verdict_linux import rule_unfound_name_with_a_package as rule

    def find(name):
        return {"ev": "py_find_library", "name": name, "result": None}

    usb = [find(n) for n in ("usb-1.0", "libusb-1.0", "usb", "openusb", "usb-0.1", "usb", "libusb0")]
    apt = {"libusb-1.0.so": "libusb-1.0-0", "libusb-0.1.so": "libusb-0.1-4"}
    assert rule(usb[5], usb, apt.get) is usb[0]
    assert rule(usb[0], usb, apt.get) is usb[0]  # (a name with a package: itself)
    assert rule(usb[3], usb, apt.get) is usb[3]  # (openusb: no other name of it)
    assert rule(usb[5], usb, {}.get) is usb[5]  # (none with a package)


@LINUX
def test_a_library_find_library_did_not_find_is_the_answer(tmp_path):
    """A program that asks ctypes.util.find_library for a library this machine lacks and raises (sounddevice's
    'PortAudio library not found'): no load was made, and the report says which find_library call found nothing,
    where the program's code was, and what find_library looks in; the find_library calls are in the trace with what
    each returned, the program's own view (sys.gettrace()) unchanged."""
    code = ("import ctypes.util, sys\n"
            "assert ctypes.util.find_library('c')\n"
            "name = ctypes.util.find_library('dlltracenosuch')\n"
            "assert sys.gettrace() is None\n"
            "if name is None:\n"
            "    raise OSError('dlltracenosuch library not found')\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "OSError: dlltracenosuch library not found" in err
    assert rep["outcome"]["kind"] == "died_of_other" and rep["fatal"] is None
    assert rep["outcome"]["find_library"] == {"name": "dlltracenosuch", "module": "", "package": None, "searched": [],
                                              "fixes": []}
    head = next(line for line in err.splitlines() if line.startswith("dlltrace ─"))
    assert head.startswith("dlltrace ─ the program ended with OSError: dlltracenosuch library not found: "
                           "ctypes.util.find_library('dlltracenosuch') found no such library")
    assert "  ctypes.util.find_library('dlltracenosuch') → None" in err and "in your code: <string>:3" in err
    assert "find_library looks for libdlltracenosuch.so.* in ld.so.cache (ldconfig -p)" in err
    assert "apt-file search libdlltracenosuch.so" in err  # (no package has it: how to find the one that does)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    finds = [json.loads(x) for x in lines if '"py_find_library"' in x]
    assert [(e["name"], e["result"]) for e in finds] == [("c", "libc.so.6"), ("dlltracenosuch", None)], finds
    # the package is the one `run` asked this machine's apt for and wrote into the trace (elf_system's packages): a
    # report made elsewhere names it from there
    report_with_package(tmp_path, lines, "packages", "libdlltracenosuch.so", "libdlltracenosuch1")


@LINUX
def test_a_library_loaded_after_find_library_found_none_is_not_blamed(tmp_path):
    """find_library('dlltracefoo') found none, the program loaded its copy by path (a wheel's own, a fallback name),
    then died of an error whose words name the library: the load succeeded, so find_library is not what it died
    of (the report said "found no such library ... No load was made", with a fix to install it)."""
    lib = tmp_path / "libdlltracefoo.so.1"
    import _ctypes  # (any shared object does: the copy is only loaded)

    lib.write_bytes(Path(_ctypes.__file__).read_bytes())
    code = ("import ctypes, ctypes.util\n"
            "name = ctypes.util.find_library('dlltracefoo')\n"
            f"ctypes.CDLL(name or {str(lib)!r})\n"
            "raise RuntimeError('dlltracefoo: the device is not connected')\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "RuntimeError: dlltracefoo: the device is not connected" in err
    assert rep["outcome"]["kind"] == "died_of_other" and rep["outcome"]["find_library"] is None, rep["outcome"]
    assert "no failed load explains it" in err and "found no such library" not in err


@LINUX
def test_a_name_given_to_find_library_with_its_lib_is_said_never_found(tmp_path):
    """On Linux find_library puts `lib` before the name itself: find_library('libusb-1.0') looks for
    liblibusb-1.0.so.* and is None with libusb-1.0.so.0 installed (tried here). The report says so and names the call
    that would find it, never a package to install (it said "find_library looks for libusb-1.0.so.*" and
    "apt-get install libusb-1.0-0", which changes nothing)."""
    code = ("import ctypes.util\n"
            "if ctypes.util.find_library('libdlltracenosuch') is None:\n"
            "    raise OSError('libdlltracenosuch not found')\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "OSError: libdlltracenosuch not found" in err
    assert rep["outcome"]["find_library"] == {"name": "libdlltracenosuch", "module": "", "package": None,
                                              "searched": [], "fixes": []}
    assert "find_library looks for liblibdlltracenosuch.so.*" in err, err
    assert "find_library('dlltracenosuch')" in err and "Install" not in err and "apt" not in err


@LINUX
def test_a_program_with_a_tracer_of_its_own_keeps_it(tmp_path):
    """A program under its own tracer (a debugger, coverage: sys.settrace) keeps it through find_library: the call is
    recorded without what it returned, and no find_library call is blamed; the exception is the answer."""
    code = ("import ctypes.util, sys\n"
            "def mine(frame, event, arg):\n"
            "    return None\n"
            "sys.settrace(mine)\n"
            "name = ctypes.util.find_library('dlltracenosuch')\n"
            "assert sys.gettrace() is mine\n"
            "raise OSError('dlltracenosuch library not found')\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "OSError: dlltracenosuch library not found" in err and "AssertionError" not in err
    assert rep["outcome"]["kind"] == "died_of_other" and rep["outcome"]["find_library"] is None
    assert "no failed load explains it" in err
    finds = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines() if '"py_find_library"' in x]
    assert [e["name"] for e in finds] == ["dlltracenosuch"] and "result" not in finds[0]


def test_rule_exception_is_unstarted_program():
    """The failed start of a program that the exception is about: one the exception or a cause is the OSError of
    (its path: pdf2image's PDFInfoNotInstalledError while handling FileNotFoundError 'pdfinfo'), one its words name
    (pytesseract's "tesseract is not installed", graphviz's "PosixPath('dot')"), or, for a package's own exception
    class, one started by the function it was raised in (its traceback's innermost frame; not one it only passed
    through). A start that worked, one whose error was not
    recorded, a different error, and a builtin exception about something else are not taken."""
    from dlltrace.diagnosis.outcome import rule_exception_is_unstarted_program as rule

    def start(program, error="FileNotFoundError", seq=10):
        e = {"ev": "py_popen", "program": program, "seq": seq}
        if error != "unknown":
            e["error"] = None if error is None else {"type": error, "errno": 2, "filename": program}
        return e

    def exc(type_, message, path=None, causes=()):
        return {"type": type_, "message": message, "path": path, "causes": list(causes)}

    tess = [start("true", None, 5), start("tesseract", seq=10)]
    said = exc("pytesseract.pytesseract.TesseractNotFoundError",
               "tesseract is not installed or it's not in your PATH. See README file for more information.")
    assert rule(said, tess) is tess[1]
    dot = [start("dot")]
    assert rule(exc("graphviz.backend.execute.ExecutableNotFound",
                    "failed to execute PosixPath('dot'), make sure the Graphviz executables are on your systems' PATH"),
                dot) is dot[0]
    pdf = [start("pdfinfo")]  # (its words name poppler, not pdfinfo: the cause's file name does)
    cause = {"type": "FileNotFoundError", "message": "[Errno 2] No such file or directory: 'pdfinfo'", "path": "pdfinfo"}
    assert rule(exc("pdf2image.exceptions.PDFInfoNotInstalledError",
                    "Unable to get page count. Is poppler installed and in PATH?", causes=[cause]), pdf) is pdf[0]
    bare = exc("FileNotFoundError", "[Errno 2] No such file or directory: '/opt/x/bin/tool'", "/opt/x/bin/tool")
    assert rule(bare, [start("/opt/x/bin/tool")])["program"] == "/opt/x/bin/tool"
    assert rule(exc("PermissionError", "[Errno 13] Permission denied: './run.sh'", "./run.sh"),
                [start("./run.sh", "PermissionError")])["program"] == "./run.sh"
    # a package's own class raised by the function that started the program, naming nothing (`raise X from None`)
    own = {**exc("mypkg.errors.ToolMissing", "the converter is missing"),
           "frames": [{"file": "app.py", "line": 3, "function": "<module>"},
                      {"file": "/site/mypkg/conv.py", "line": 40, "function": "convert"}]}
    probe = {**start("ffprobe", seq=10), "caller": {"file": "/site/mypkg/conv.py", "line": 38, "function": "convert"}}
    other = {**start("nvidia-smi", seq=8), "caller": {"file": "/site/gpu/info.py", "line": 9, "function": "query"}}
    assert rule(own, [other, probe]) is probe
    assert rule(own, [probe, {**other, "seq": 12}]) is probe  # (a later failed start elsewhere: not it)
    assert rule(own, [other]) is None  # (a failed start the exception did not pass through)
    assert rule({**own, "frames": []}, [probe]) is None  # (a trace made before `frames`: no such evidence)
    # a failed start the exception only passed through the function of (a probe at a script's top level, caught;
    # the script's own exception raised later in another function): not it
    top = {**start("nvidia-smi", seq=8), "caller": {"file": "app.py", "line": 2, "function": "<module>"}}
    assert rule(own, [top]) is None
    assert rule({**own, "frames": own["frames"][:1]}, [top]) is top  # (raised in <module> itself: it)
    assert rule({**own, "type": "RuntimeError"}, [probe]) is None  # (builtin: the words must name it)
    # subprocess's own FileNotFoundError for a cwd it could not change into (the folder is its file name): the
    # program was never looked for, even when the folder's name or path has the program's name
    cwd = {**start("git"), "error": {"type": "FileNotFoundError", "errno": 2, "filename": "/data/git"}}
    assert rule(exc("FileNotFoundError", "[Errno 2] No such file or directory: '/data/git'", "/data/git"), [cwd]) is None
    assert rule(exc("FileNotFoundError", "[Errno 2] No such file or directory: '/data/git/r'", "/data/git/r"),
                [{**cwd, "error": {**cwd["error"], "filename": "/data/git/r"}}]) is None
    assert rule(said, [start("tesseract", None)]) is None  # (it started)
    assert rule(said, [start("tesseract", "unknown")]) is None  # (not recorded: a tracer of the program's own)
    assert rule(said, [start("tesseract", "OSError")]) is None  # (ENOEXEC and the like: not a missing program)
    assert rule(exc("ValueError", "tesseractx failed"), tess) is None  # (part of a word: not its name)
    two = [start("pdftoppm", seq=10), start("pdfinfo", seq=12)]
    assert rule(exc("RuntimeError", "neither pdftoppm nor pdfinfo"), two) is two[1]  # (the last)


@LINUX
def test_a_program_not_found_is_the_answer(tmp_path):
    """A program that starts a program this machine lacks and raises its own error (pytesseract's way): the report
    says which program was not found, what ran it, where the program's code was, the PATH folders it was looked for
    in (those of the environment it was given), and, with no package known, how to find one; `run` asked this
    machine which package ships it and wrote the answer into the trace (elf_system's programs): a report made
    elsewhere names it from there. The program's own view (sys.gettrace()) is unchanged."""
    code = ("import subprocess, sys\n"
            "class ToolMissing(Exception):\n"
            "    pass\n"
            "try:\n"
            "    subprocess.run(['dlltracenosuchtool', '-v'], env={'PATH': '/nonesuch1:/usr/bin'})\n"
            "except FileNotFoundError:\n"
            "    assert sys.gettrace() is None\n"
            "    raise ToolMissing('dlltracenosuchtool is not installed or not in your PATH')\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "ToolMissing: dlltracenosuchtool is not installed" in err, err
    assert rep["outcome"]["kind"] == "died_of_other" and rep["fatal"] is None
    assert rep["outcome"]["program"] == {"name": "dlltracenosuchtool", "error": "FileNotFoundError",
                                         "searched": ["/nonesuch1", "/usr/bin"], "package": None}, rep["outcome"]
    head = next(line for line in err.splitlines() if line.startswith("dlltrace ─"))
    assert head.startswith("dlltrace ─ the program ended with __main__.ToolMissing: dlltracenosuchtool is not "
                           "installed or not in your PATH: the program 'dlltracenosuchtool' was not found on PATH"), head
    assert "  subprocess ran dlltracenosuchtool -v → FileNotFoundError" in err and "in your code: <string>:5" in err
    assert "looked for in the 2 folders of the PATH it was given, and none holds it:\n    /nonesuch1\n    /usr/bin" in err
    assert "apt-file search --regexp '/bin/dlltracenosuchtool$'" in err  # (no package known: how to find it)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    report_with_package(tmp_path, lines, "programs", "dlltracenosuchtool", "dlltrace-tools")
    # a trace made before py_popen (none of its events, no programs in elf_system) reads as before
    old = [x for x in lines if '"py_popen"' not in x]
    (tmp_path / "t3.jsonl").write_text("\n".join(old) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    before = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(tmp_path / "t3.jsonl"), "--json"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert json.loads(before.stdout)["outcome"]["program"] is None, before.stderr


@LINUX
def test_a_program_not_found_is_the_answer_when_its_package_says_nothing_of_it(tmp_path):
    """A package's own exception raised `from None` by the function that started the program, its words naming
    neither the program nor its file (no cause kept): the start's `caller` is among the functions its traceback
    passed through (py_exception's `frames`), so that start is what it died of; a program it started and went past
    elsewhere is not blamed."""
    code = ("import subprocess\n"
            "class ConverterMissing(Exception):\n"
            "    pass\n"
            "def optional():\n"
            "    try:\n"
            "        subprocess.run(['dlltracenosuchoptional'])\n"
            "    except OSError:\n"
            "        pass\n"
            "def convert():\n"
            "    try:\n"
            "        subprocess.run(['dlltracenosuchconv'])\n"
            "    except FileNotFoundError:\n"
            "        raise ConverterMissing('the converter is missing') from None\n"
            "convert() if optional() is None else None\n")
    r, rep, err = run_and_report(tmp_path, code)
    assert r.returncode == 1 and "ConverterMissing: the converter is missing" in err, err
    assert rep["outcome"]["program"]["name"] == "dlltracenosuchconv", rep["outcome"]
    events = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    (exc,) = [e for e in events if e.get("ev") == "py_exception"]
    assert exc["causes"] == [] and [f["function"] for f in exc["frames"]] == ["<module>", "convert"], exc
    starts = {e["program"]: e["caller"] for e in events if e.get("ev") == "py_popen"}
    assert starts == {"dlltracenosuchoptional": {"file": "<string>", "line": 6, "function": "optional"},
                      "dlltracenosuchconv": {"file": "<string>", "line": 11, "function": "convert"}}, starts


@LINUX
def test_an_undefined_symbol_is_a_missing_export_failure(tmp_path, monkeypatch):
    """ld.so maps every file and then cannot bind a symbol (`undefined symbol: foo`): the load failed, with the
    object and the symbol named, as a 127 on Windows (it read "every load succeeded")."""
    import shutil

    from dlltrace.diagnosis.replay_linux import undefined_symbol

    if shutil.which("gcc") is None:
        pytest.fail("needs gcc -- CI installs it") if os.environ.get("CI") else pytest.skip("needs gcc")
    (tmp_path / "a.c").write_text("int foo(void);\nint bar(void) { return foo(); }\n")
    lib = tmp_path / "libneedsym.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "a.c")], check=True)
    r, rep, err = run_and_report(tmp_path, f"import ctypes; ctypes.CDLL({str(lib)!r})")
    assert r.returncode == 1 and "undefined symbol: foo" in err
    assert rep["outcome"]["kind"] == "died_of_load"
    fatal = rep["failed"][rep["fatal"]]
    assert (fatal["leaf"]["name"], fatal["leaf"]["cause"]) == ("libneedsym.so", "missing_export")
    assert "✗ libneedsym.so needs the symbol foo, which none of the libraries loaded defines" in err
    assert undefined_symbol(f"{lib}: undefined symbol: foo", [str(lib)]) == (str(lib), "foo")
    assert undefined_symbol(f"{lib}: undefined symbol: foo", ["/other/libx.so"]) is None  # (not this call's)
    assert undefined_symbol("libx.so: cannot open shared object file: No such file or directory") is None
    # loaded by its bare name (found on LD_LIBRARY_PATH): the chain is that one object, not "libneedsym.so →
    # libneedsym.so" (seen in a field test)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    r, rep, err = run_and_report(tmp_path, "import ctypes; ctypes.CDLL('libneedsym.so')")
    assert r.returncode == 1 and "undefined symbol: foo" in err
    assert rep["failed"][rep["fatal"]]["chain"] == ["libneedsym.so"] and "chain:" not in err, err


@LINUX
def test_the_load_is_placed_in_the_users_own_code(tmp_path):
    """The bootstrap records, with each import and ctypes call, the innermost frame of the user's own code (not
    the standard library's, not an installed package's): the report says where the user made the load."""
    script = tmp_path / "train.py"
    script.write_text("import ctypes\n\n\ndef load_gpu():\n    try:\n        ctypes.CDLL('libcudart.so.11.0')\n"
                      "    except OSError:\n        pass\n\n\nload_gpu()\nimport json\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", sys.executable, str(script)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"  in your code: {script}:6, in load_gpu" in r.stderr
    import dlltrace

    (f,) = [f for d in dlltrace.diagnose(trace) for f in d.failures if f.name == "libcudart.so.11.0"]
    assert (f.user_code.file, f.user_code.line, f.user_code.function) == (str(script), 6, "load_gpu")
    (js,) = [e for e in dlltrace.read_trace(trace).of("py_import") if e["module"] == "json"]
    assert js["frame"] == {"file": str(script), "line": 12, "function": "<module>"}


def test_library_file_is_not_the_users_code():
    import os as _os

    from dlltrace.trace import shim

    assert shim.library_file(_os.__file__) and shim.library_file("<frozen importlib._bootstrap>")
    assert shim.library_file("/venv/lib/python3.11/site-packages/torch/__init__.py")
    assert not shim.library_file("/home/me/project/train.py") and not shim.library_file("<string>")
    here = shim.user_frame(1)
    assert here is not None and here["file"] == __file__ and here["function"] == "test_library_file_is_not_the_users_code"


def test_rule_exception_names_feature():
    """An exception naming no library but the feature a failed load provides: that load (the last such)."""
    from dlltrace.diagnosis.outcome import rule_exception_names_feature as rule

    cupy = "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is " \
           "insufficient for CUDA runtime version"
    failed = ["libcutensor.so.2", "libcuda.so.1"]
    assert rule(cupy, failed) == 1
    assert rule("RuntimeError: Found no NVIDIA driver on your system.", ["nvcuda.dll", "cudnn64_9.dll"]) == 0
    assert rule("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", ["libcuda.so.1", "libcudnn.so.9"]) == 1
    # the feature's words with no failed library of it, or a library with no words of it: none
    assert rule(cupy, ["libcutensor.so.2"]) is None
    assert rule("TypeError: Unable to convert function return value", failed) is None


def test_unstarted_lines():
    """What follows the headline of a program not found: on Windows the file CreateProcess looked for is the name
    with .exe added only when it has no extension (a package that runs 'tesseract.exe' is told of tesseract.exe,
    not 'tesseract.exe.exe')."""
    from dlltrace.diagnosis.result import Unstarted
    from dlltrace.render.outcome import unstarted_lines

    def lines(program, windows=True, error="FileNotFoundError", searched=("C:\\Windows\\system32",)):
        return "\n".join(unstarted_lines(Unstarted(program, error, (program, "a b.png"), "", None, searched, (), None),
                                         windows=windows))

    assert "looked for tesseract.exe in" in lines("tesseract") and "holds tesseract.exe on PATH" in lines("tesseract")
    assert ".exe.exe" not in lines("tesseract.exe") and "looked for tesseract.exe in" in lines("tesseract.exe")
    assert "looked for tool.cmd in" in lines("tool.cmd")


def test_unstarted_lines_commands_paste_as_they_are():
    """The commands told for a program not found are lines of their own that a shell takes as they are: apt-file's
    Perl regex with the name's metacharacters escaped (g++: '/bin/g++$' matched /bin/g and /bin/gg, never g++), and
    chmod +x of the path quoted; for a name found by the PATH search, no chmod of ./<name>."""
    import shlex
    from dlltrace.diagnosis.result import Unstarted
    from dlltrace.render.outcome import unstarted_lines

    def lines(program, error="FileNotFoundError"):
        return unstarted_lines(Unstarted(program, error, (program,), "", None, ("/usr/bin",), (), None))

    for name in ("g++", "python3.12", "tesseract", "clang++-17"):
        (cmd,) = [x for x in lines(name) if "apt-file" in x]
        words = shlex.split(cmd)
        assert cmd.startswith("    apt-file") and words[:3] == ["apt-file", "search", "--regexp"], cmd
        assert re.search(words[3], f"/usr/bin/{name}") and not re.search(words[3], f"/usr/bin/{name}x"), words
    assert "    apt-file search --regexp '/bin/tesseract$'" in lines("tesseract")
    (chmod,) = [x for x in lines("/opt/my tools/run it", "PermissionError") if "chmod" in x]
    assert shlex.split(chmod) == ["chmod", "+x", "/opt/my tools/run it"], chmod
    assert not any("chmod +x tesseract" in x for x in lines("tesseract", "PermissionError"))


def test_run_asks_the_package_of_the_program_died_of_only():
    """`run` asks this machine (command-not-found's database, apt-file: seconds each) the package of the program the
    process died of not starting, and of no other it started and went past (a probe of nvidia-smi, caught), nor of
    any when it did not end on an exception."""
    from dlltrace.diagnosis.replay_linux import RecordedProcess, note_unstarted_packages

    class World:
        def __init__(self):
            self.asked = []

        def program_package(self, program):
            self.asked.append(program)
            return None

    def start(seq, program):
        return {"ev": "py_popen", "seq": seq, "program": program,
                "error": {"type": "FileNotFoundError", "errno": 2, "filename": program}}

    probes = {3: start(3, "nvidia-smi"), 4: start(4, "lsb_release"), 5: start(5, "dlltracenosuchgit")}
    died = {**probes, 9: {"ev": "py_exception", "seq": 9, "type": "RuntimeError",
                          "message": "dlltracenosuchgit is not installed", "causes": []}}
    for events, asked in ((died, ["dlltracenosuchgit"]), (probes, [])):
        w = World()
        note_unstarted_packages(RecordedProcess(1, python=dict(events)), w)
        assert w.asked == asked, (w.asked, asked)


def test_rule_exception_names_a_missing_file_of_its_distribution():
    """The file of an installed distribution, not there, that the ending exception names (its py_exception `files`):
    xgboost 2.1.3's XGBoostLibraryNotFound lists xgboost\\lib\\xgboost.dll, which its RECORD lists, and candidates
    no record lists (..\\..\\lib\\xgboost.dll, resolved: not its file); the same path in another case and with /; on
    Linux lightgbm 4.5.0's lib_lightgbm.so; a conda package's file by its conda-meta. A file that is there, a name no
    record lists, an exception without files (an older trace) are not taken."""
    from dlltrace.diagnosis.outcome import rule_exception_names_a_missing_file_of_its_distribution as rule
    from dlltrace.model import Owner

    site = "C:\\py\\Lib\\site-packages"
    xgb = Owner("xgboost", "2.1.3", "xgboost/lib/xgboost.dll", site)
    owners = {"xgboost.dll": (xgb,)}

    def files(*paths, exists=False):
        return {"type": "xgboost.libpath.XGBoostLibraryNotFound", "message": "Cannot find XGBoost Library",
                "files": [{"path": p, "exists": exists, "size": None} for p in paths]}

    up = site + "\\xgboost\\..\\..\\lib\\xgboost.dll"  # (C:\py\Lib\lib\xgboost.dll: not the file RECORD lists)
    assert rule(files(up, site + "\\xgboost\\lib\\xgboost.dll"), owners) == (site + "\\xgboost\\lib\\xgboost.dll", xgb)
    assert rule(files("c:/PY/lib/Site-Packages/xgboost/lib/XGBOOST.dll"), owners) == (
        "c:/PY/lib/Site-Packages/xgboost/lib/XGBOOST.dll", xgb)
    assert rule(files(up), owners) is None
    assert rule(files(site + "\\xgboost\\lib\\xgboost.dll", exists=True), owners) is None  # (there: not its cause)
    assert rule(files(site + "\\xgboost\\lib\\other.dll"), owners) is None
    assert rule({"type": "X", "message": "m"}, owners) is None  # (a trace made before `files`)
    assert rule({"files": [None, {"path": 3}, {"exists": False}]}, owners) is None  # (a damaged event)
    linux = Owner("lightgbm", "4.5.0", "lightgbm/lib/lib_lightgbm.so", "/v/lib/python3.11/site-packages")
    lib = "/v/lib/python3.11/site-packages/lightgbm/lib/lib_lightgbm.so"
    assert rule(files("/v/lib/python3.11/site-packages/lightgbm/../lib_lightgbm.so", lib),
                {"lib_lightgbm.so": (linux,)}) == (lib, linux)
    conda = Owner("libxgboost", "2.1.3", "Library/bin/xgboost.dll", "C:\\conda\\envs\\x", "conda")
    assert rule(files("C:\\conda\\envs\\x\\Library\\bin\\xgboost.dll"), {"xgboost.dll": (xgb, conda)}) == (
        "C:\\conda\\envs\\x\\Library\\bin\\xgboost.dll", conda)


def fake_distribution(site: Path, name: str, lib: str, raises: str) -> Path:
    """A distribution `name` 1.0 installed into the folder `site` (a *.dist-info with a RECORD that lists its
    package's lib/`lib`, which is not there) whose __init__.py looks for that file before loading it and raises
    `raises` (an expression of the path list `paths`) when it is not there, as xgboost and lightgbm do."""
    pkg = site / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os\n"
        f"paths = [os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib', {lib!r}),\n"
        f"         os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib', {lib!r})]\n"
        "if not any(os.path.isfile(p) for p in paths):\n"
        f"    raise {raises}\n")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}/lib/{lib},sha256=x,12345\n{name}-1.0.dist-info/RECORD,,\n")
    return pkg / "lib" / lib


@LINUX
def test_a_missing_file_a_package_looks_for_is_the_answer(tmp_path):
    """A package that looks for its own library before loading it and raises when it is not there (no load made):
    the report names the file, the distribution whose RECORD lists it, and its reinstall by the traced Python's own
    pip, in the headline, the text, --json (outcome.file) and the Diagnosis."""
    site = tmp_path / "site-packages"
    gone = fake_distribution(site, "dlltracegone", "libdlltracegone.so",
                             "Exception('Cannot find dlltracegone library file in following paths:\\n' + '\\n'.join(paths))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tracer"), str(site)])}
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", sys.executable, "-c",
                        "import dlltracegone"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "Cannot find dlltracegone library file" in r.stderr, r.stderr[-3000:]
    head = next(line for line in r.stderr.splitlines() if line.startswith("dlltrace ─"))
    assert head.startswith("dlltrace ─ the program ended with Exception: Cannot find dlltracegone library file in "
                           "following paths:") and ": libdlltracegone.so, a file of dlltracegone 1.0, is not there · " \
        "trace saved to" in head, head
    assert (f"  import dlltracegone: the program looked for this file before loading it, and it is not there:\n"
            f"    {gone}\n"
            "  dlltracegone 1.0 installed it (its RECORD lists dlltracegone/lib/libdlltracegone.so): the install is "
            "damaged") in r.stderr, r.stderr[-3000:]
    assert ("  Fix\n    1. libdlltracegone.so belongs to dlltracegone 1.0 (its RECORD lists "
            "dlltracegone/lib/libdlltracegone.so) and is not there: reinstall it:\n"
            f"       {sys.executable} -m pip install --force-reinstall --no-deps dlltracegone==1.0\n") in r.stderr, \
        r.stderr[-3000:]
    rep = json.loads(subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace), "--json"],
                                    capture_output=True, text=True, env=env, timeout=300).stdout)
    assert rep["outcome"]["kind"] == "died_of_other" and rep["outcome"]["file"] == {
        "path": str(gone), "package": "dlltracegone", "version": "1.0", "listed": "dlltracegone/lib/libdlltracegone.so",
        "how": "named", "also": [], "fix": rep["outcome"]["file"]["fix"]}, rep["outcome"]
    assert rep["outcome"]["file"]["fix"].endswith("--force-reinstall --no-deps dlltracegone==1.0"), rep["outcome"]
    from dlltrace.api import diagnose
    (main,) = [d for d in diagnose(str(trace)) if d.gone is not None]
    assert (main.gone.package, main.gone.module, main.gone.fixes[0].exe) == ("dlltracegone", "dlltracegone",
                                                                             sys.executable)
    # the file put back: nothing is said of it (an exception that names no file; with the file still gone, an exception
    # the package raised is said to be for want of it: rule_record_listed_file_gone_after_a_failure)
    gone.parent.mkdir(parents=True, exist_ok=True)
    gone.write_bytes(b"")
    (site / "dlltracegone" / "__init__.py").write_text("raise ValueError('something else')\n")
    r2 = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(tmp_path / "t2.jsonl"), "--",
                         sys.executable, "-c", "import dlltracegone"], capture_output=True, text=True, env=env,
                        timeout=300)
    assert "no failed load explains it" in r2.stderr and "a file of" not in r2.stderr, r2.stderr[-2000:]


def test_a_start_refused_with_permission_denied_is_not_said_to_be_found():
    """subprocess on Linux raises PermissionError for a name when a PATH folder this user may not search refused it
    (EACCES), whether or not the program is anywhere: the words say permission was denied, never that the program
    was found or is not executable."""
    from dlltrace.diagnosis.result import Unstarted
    from dlltrace.render.outcome import unstarted_lines, unstarted_words

    u = Unstarted("tesseract", "PermissionError", ("tesseract",), "", None, ("/opt/locked", "/usr/bin"), (), None)
    assert unstarted_words(u) == "the program 'tesseract' could not be run: permission denied"
    text = "\n".join(unstarted_lines(u))
    assert "was found" not in text and "'tesseract' is not executable" not in text, text
    assert "let this user search\n  each folder of that PATH" in text, text
    assert "a PATH folder, for a name) may not be searched by this user" in text, text


def test_a_conda_package_file_gone_is_reinstalled_into_its_own_environment(tmp_path, capsys):
    """A file a conda package's conda-meta lists, gone (xgboost.dll of libxgboost, in an environment whose prefix has
    a space): the reinstall names that environment by its prefix (`conda install -p PREFIX`), as the shell's active
    environment may be another (base) and the program was run by the environment's own python.exe; the prefix is
    quoted for cmd and PowerShell (a space) and for bash. In the text and the JSON, which validates."""
    import jsonschema

    from dlltrace import cli
    from dlltrace.model import Fix
    from dlltrace.render.fixwords import fix_text
    from simhelp import handwritten, python_writer

    prefix = "C:\\Users\\Jo Doe\\miniconda3\\envs\\ml"
    dll = prefix + "\\Library\\bin\\xgboost.dll"
    h = handwritten()
    w, _ = python_writer(h, "import xgboost", prefix)
    w.ev("py_dists", dists=[], conda=[{"name": "libxgboost", "version": "2.1.3", "files": ["Library/bin/xgboost.dll"]}],
         conda_prefix=prefix, cut=False)
    w.ev("py_exception", type="xgboost.libpath.XGBoostLibraryNotFound", message="Cannot find XGBoost Library in the "
         "candidate path.  List of candidates:\n- " + dll, module=None, path=None, winerror=None, causes=[],
         files=[{"path": dll, "exists": False, "size": None}])
    w.write(tmp_path / "t.jsonl")
    command = f'conda install -p "{prefix}" --force-reinstall libxgboost=2.1.3'
    assert cli.main(["report", str(tmp_path / "t.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "xgboost.dll, a file of libxgboost 2.1.3, is not there" in text and f"\n       {command}\n" in text, text
    assert cli.main(["report", "--json", str(tmp_path / "t.jsonl")]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "result-v1.json").read_text()))
    assert doc["outcome"]["file"]["fix"].endswith(command), doc["outcome"]["file"]
    linux = Fix("reinstall", "install", name="libxgboost.so", package="libxgboost", version="2.1.3",
                bound="lib/libxgboost.so", lacks="conda", folder="/home/jo/mini conda/envs/ml")
    assert fix_text(linux).endswith("conda install -p '/home/jo/mini conda/envs/ml' --force-reinstall libxgboost=2.1.3")


def _through_a_wrapper(tmp_path: Path, code: str, crash: bool = False,
                       check: str = "") -> tuple[subprocess.CompletedProcess, dict, str]:
    """`dlltrace run` of a bash script that starts Python as pyenv's `python3` shim does: subshells that each try to
    load a bash builtin that is not there (pyenv's `enable -f .../pyenv-realpath.dylib realpath`), then exec of the
    real Python in the same process; `check`: Python code the script runs first in a child, whose failure it
    ignores (`|| true`)."""
    shim = tmp_path / "python3"
    shim.write_text("#!/bin/bash\n"
                    "for i in 1 2 3 4; do\n"
                    f"  x=$(enable -f {tmp_path}/libexec/pyenv-realpath.dylib realpath 2>/dev/null; echo $i)\n"
                    "done\n"
                    + (f"{sys.executable} -c {shlex.quote(check)} 2>/dev/null || true\n" if check else "")
                    + f'exec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    return run_command_and_report(tmp_path, [str(shim), "-c", code])


@LINUX
def test_rule_linux_call_while_starting(tmp_path):
    """The failed loads of the subshells a wrapper script ran before it exec'd the program (pyenv's python3 shim and
    its bash's pyenv-realpath.dylib) were gone past: a sys.exit(3) reads "exited with 3; no failed load explains
    it", not "4 failed loads" each bash's; a crash reads "no failed load explains it" with no bash load explained;
    a real failure of the program is still the failure, and so is a crash after the program's own failed load when
    the wrapper first ran a Python check that raised; the four are one line."""
    r, rep, err = _through_a_wrapper(tmp_path, "import sys; sys.exit(3)")
    assert r.returncode == 3
    assert err.splitlines()[0].startswith("dlltrace ─ the program exited with 3; no failed load explains it"), err
    bash = [f for d in rep["diagnoses"] for f in d["failures"] if f["name"].endswith("pyenv-realpath.dylib")]
    assert len(bash) == 4 and {(f["fate"], f["reason"]) for f in bash} == {("went_on", "while_starting")}, bash
    (line,) = [x for x in err.splitlines() if "pyenv-realpath.dylib" in x]
    assert re.search(r"\(bash, pids \d+, \d+, \d+ and 1 more\)", line), line
    r, rep, err = _through_a_wrapper(tmp_path, "import os; os.abort()")
    assert r.returncode == 128 + 6
    assert err.splitlines()[0].startswith("dlltrace ─ the program crashed (SIGABRT: it aborted); no failed load "
                                          "explains it"), err
    assert "✗" not in err, err
    r, rep, err = _through_a_wrapper(tmp_path, "import ctypes, sys\ntry:\n    ctypes.CDLL('libgone_here.so.3')\n"
                                               "except OSError:\n    sys.exit(2)\n")
    assert r.returncode == 2
    fates = {(f["name"], f["fate"]) for d in rep["diagnoses"] for f in d["failures"]}
    assert ("libgone_here.so.3", "unknown") in fates and err.count("✗") == 1, err
    # (a Python check the wrapper runs first and whose exception it ignores is not what the program ended on: the
    # program's abort right after its own failed load is still that load's)
    r, rep, err = _through_a_wrapper(tmp_path, "import ctypes, os\ntry:\n    ctypes.CDLL('libplugin_here.so.2')\n"
                                               "except OSError:\n    os.abort()\n",
                                     check="import ctypes; ctypes.CDLL('libchecked_here.so.1')")
    assert r.returncode == 128 + 6
    assert err.splitlines()[0].startswith("dlltrace ─ the program crashed (SIGABRT: it aborted), right after "
                                          "libplugin_here.so.2 failed to load"), err
    fates = {(f["name"], f["fate"], f["reason"]) for d in rep["diagnoses"] for f in d["failures"]}
    assert {("libplugin_here.so.2", "fatal", "crashed_after"),
            ("libchecked_here.so.1", "went_on", "while_starting")} <= fates, fates


def test_starting_processes():
    """Forked (or spawned: vfork, posix_spawn) by an image of the program's process that then exec'd (or by such a
    child's child): starting; forked by its last image, or of another tree, or a child whose fork is recorded only
    after the exec: the program's."""
    from dlltrace.diagnosis.verdict_linux import starting_processes
    from dlltrace.trace.reader import Header, Trace

    def trace(events):
        return Trace("t.jsonl", Header("dlltrace-trace", 1, platform="linux"), events)

    def ev(kind, pid, **f):
        return {"ev": kind, "pid": pid, **f}
    events = [ev("audit_start", 10, exe="/bin/bash"), ev("fork", 11, ppid=10), ev("fork", 12, ppid=11),
              ev("audit_start", 10, exe="/usr/bin/python3"), ev("fork", 13, ppid=10), ev("fork", 14, ppid=99),
              ev("exit", 10, code=3)]
    assert starting_processes(trace(events)) == {11, 12}
    assert starting_processes(trace(events[:3] + events[4:])) == frozenset()  # (no exec: the wrapper is the program)
    assert starting_processes(trace(events[:-1])) == frozenset()  # (no exit recorded: no program known)
    late = events[:3] + [events[3], ev("fork", 15, ppid=10)] + events[4:]  # (its fork written after the exec)
    assert 15 not in starting_processes(trace(late))
    # (spawned with vfork or posix_spawn, as Python's subprocess does: no fork event, its audit_start names its parent)
    spawned = events[:3] + [ev("audit_start", 16, ppid=10, exe="/usr/bin/python3"),
                            ev("audit_start", 17, ppid=11, exe="/usr/bin/uname")] + events[3:5] + [
        ev("audit_start", 18, ppid=10, exe="/usr/bin/python3"), ev("audit_start", 19, ppid=99)] + events[5:]
    assert starting_processes(trace(spawned)) == {11, 12, 16, 17}


@LINUX
def test_rule_linux_call_while_starting_of_a_spawned_child(tmp_path):
    """A launcher in Python that probes a library in a child it spawns (subprocess: vfork or posix_spawn, no fork
    event, the child's audit_start names its parent) and then becomes the program (os.execv): the child's failed load
    is gone past, while_starting; the program's sys.exit(3) is the headline, not "1 failed load" of the child's."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text("import os, subprocess, sys\n"
                        "probe = 'import ctypes\\ntry:\\n    ctypes.CDLL(\"libprobe_only.so.9\")\\nexcept OSError:\\n    pass'\n"
                        "subprocess.run([sys.executable, '-c', probe], check=True)\n"
                        "os.execv(sys.executable, [sys.executable, '-c', 'import sys; sys.exit(3)'])\n")
    r, rep, err = run_command_and_report(tmp_path, [sys.executable, str(launcher)])
    assert r.returncode == 3, err
    assert err.splitlines()[0].startswith("dlltrace ─ the program exited with 3; no failed load explains it"), err
    probes = [f for d in rep["diagnoses"] for f in d["failures"] if f["name"] == "libprobe_only.so.9"]
    assert [(f["fate"], f["reason"]) for f in probes] == [("went_on", "while_starting")], probes


def python_magic_trace(dest: Path, dists: list) -> Path:
    """A handwritten Windows trace of python-magic 0.4.27 without libmagic (the field test's, tests/test_real_field.py):
    magic/loader.py's find_library calls for each of its names find nothing, and it raises ImportError."""
    from simhelp import handwritten, python_writer

    hw = handwritten()
    w, site = python_writer(hw, "import magic")
    w.ev("py_dists", dists=[{"name": n, "version": v, "site": site, "files": [], "loaders": []} for n, v in dists],
         conda=[], conda_prefix=None, cut=False)
    frame = {"file": site + "\\magic\\loader.py", "line": 30, "function": "_lib_candidates_windows"}
    for n in ("libmagic", "magic1", "magic-1", "cygmagic-1", "libmagic-1", "msys-magic-1"):
        w.ev("py_find_library", name=n, result=None, searched=["C:\\Python311", hw.SYS32], frame=frame, imports=["magic"])
    w.ev("py_exception", type="ImportError", message="failed to find libmagic.  Check your installation", module=None,
         path=None, winerror=None)
    w.write(dest)
    return dest


def test_rule_package_that_replaces_the_module(tmp_path, capsys):
    """python-magic installed, libmagic nowhere: python-magic-bin ships libmagic.dll and its own module magic, which
    loads it from its folder (data/packages.json `replaces`). The fix uninstalls python-magic and installs
    python-magic-bin, with no PATH step (its DLL put on PATH for python-magic was no fix: MagicException, no magic
    database, seen under Wine). Without python-magic installed (another program asking for libmagic), the usual fix:
    pip install python-magic-bin, then its folder on PATH."""
    from dlltrace import cli

    folder = "C:\\Python311\\Lib\\site-packages\\magic\\libmagic"
    trace = python_magic_trace(tmp_path / "t.jsonl", [("python_magic", "0.4.27")])
    cli.main(["report", "--json", str(trace)])
    found = json.loads(capsys.readouterr().out)["outcome"]["find_library"]
    (fix,) = found["fixes"]
    assert (found["name"], fix["action"], fix["package"], fix["replaces"], fix["folder"], fix["then"]) == (
        "libmagic", "install_package", "python-magic-bin", "python-magic", folder, []), found
    assert fix["text"] == (
        f"python-magic-bin ships libmagic.dll (in {folder}) with its own module, which loads it from there, and replaces "
        "python-magic, which installs the same module: C:\\Python311\\python.exe -m pip uninstall -y python-magic, then "
        "C:\\Python311\\python.exe -m pip install python-magic-bin"), fix["text"]
    cli.main(["report", str(trace)])
    text = capsys.readouterr().out
    assert "not enough" not in text and 'set "PATH=' not in text, text
    cli.main(["report", "--markdown", str(trace)])
    md = capsys.readouterr().out
    assert "`C:\\Python311\\python.exe -m pip uninstall -y python-magic`, then " in md and "not enough" not in md, md
    trace = python_magic_trace(tmp_path / "t2.jsonl", [("otherpkg", "1.0")])
    cli.main(["report", "--json", str(trace)])
    (fix,) = json.loads(capsys.readouterr().out)["outcome"]["find_library"]["fixes"]
    assert "replaces" not in fix and [t["action"] for t in fix["then"]] == ["set_env"], fix


def test_rule_record_listed_file_gone_after_a_failure():
    """A native file its distribution's RECORD (or conda-meta) lists, not there when a program that imported the
    distribution's package failed, and no failed load its failure: PyQt5-Qt5 5.15.2's qwindows.dll (under PyQt5/, the
    package the program imported), which Qt looks for itself (the program aborts: 0xC0000409 on Windows, SIGABRT on
    Linux with PySide6's libqxcb.so). Not taken: a run that did not fail, one a failed load explains, a file of a
    distribution the program did not import, a file that is there, one whose name the process loaded from elsewhere
    all the same (Wine's own zlib1.dll for a package's), one of a copy of the package that a site folder
    earlier on sys.path hides (a user site's PyQt5 before the system's), and, when it ended on a Python exception, one
    of a distribution whose package none of the exception's frames is in (the program's own raise)."""
    from dlltrace.diagnosis.outcome import listed_package_folder, listed_top, record_files_to_check
    from dlltrace.diagnosis.outcome import rule_record_listed_file_gone_after_a_failure as rule
    from dlltrace.model import Owner

    site = "C:\\py\\Lib\\site-packages"
    qt = [Owner("PyQt5_Qt5", "5.15.2", f"PyQt5/Qt5/{f}", site) for f in
          ("bin/Qt5Core.dll", "plugins/platforms/qwindows.dll", "plugins/platforms/qminimal.dll")]
    sip = Owner("PyQt5_sip", "12.15.0", "PyQt5/sip.cp311-win_amd64.pyd", site)
    numpy = Owner("numpy", "2.1.3", "numpy.libs/libscipy_openblas64_-c16e4918366c6bc1f1cd71e28ca36fc0.dll", site)
    cffi = Owner("cffi", "1.17.1", "_cffi_backend.cp311-win_amd64.pyd", site)
    omp = Owner("intel-openmp", "2024.2.1", "../../Library/bin/libiomp5md.dll", site)
    owners: dict = {}
    for o in (*qt, sip, numpy, cffi, omp):
        owners.setdefault(o.path.rsplit("/", 1)[-1].lower(), []).append(o)
    owners = {k: tuple(v) for k, v in owners.items()}
    assert [listed_top(o) for o in (qt[0], sip, numpy, cffi, omp)] == ["PyQt5", "PyQt5", "numpy", "_cffi_backend", ""]
    assert listed_package_folder(qt[1]) == site + "\\PyQt5" and listed_package_folder(cffi) == ""
    qwindows = site + "\\PyQt5\\Qt5\\plugins\\platforms\\qwindows.dll"
    blas = site + "\\numpy.libs\\" + numpy.path.split("/")[-1]
    missing = [qwindows, blas]
    imported = ["PyQt5", "PyQt5.sip", "PyQt5.QtCore", "PyQt5.QtGui", "sys"]
    assert {o.dist for o in record_files_to_check(owners, imported)} == {"PyQt5_Qt5", "PyQt5_sip"}
    assert len(record_files_to_check(owners, imported, limit=2)) == 2
    assert record_files_to_check(owners, []) == []
    assert rule("crashed", 0xC0000409, False, owners, imported, missing) == [(qwindows, qt[1])]
    assert rule("exited", 3, False, owners, imported, missing) == [(qwindows, qt[1])]
    assert rule("crashed", 0xC0000409, False, owners, imported, ["c:/PY/lib/site-packages/pyqt5/qt5/plugins/"
                                                                 "platforms/QWINDOWS.dll"]) == [(qwindows, qt[1])]
    assert rule("crashed", 0xC0000409, True, owners, imported, missing) == []  # (a failed load is the failure)
    # a copy of its name loaded from elsewhere all the same (Wine's own System32 one): not this rule's
    assert rule("crashed", 0xC0000409, False, owners, imported, missing,
                loaded=lambda: ["C:\\windows\\system32\\QWINDOWS.DLL"]) == []
    assert rule("crashed", 0xC0000409, False, owners, imported, missing,
                loaded=lambda: ["C:\\windows\\system32\\qminimal.dll"]) == [(qwindows, qt[1])]
    assert rule("ok", 0, False, owners, imported, missing) == []
    assert rule("exited", 0, False, owners, imported, missing) == []
    assert rule("died_of_load", 1, False, owners, imported, missing) == []
    assert rule("crashed", 0xC0000409, False, owners, ["numpy"], [qwindows]) == []  # (PyQt5 not imported)
    assert rule("crashed", 0xC0000409, False, owners, imported, [blas]) == []  # (numpy not imported)
    assert rule("crashed", 0xC0000409, False, owners, imported, []) == []
    # an exception: the file of a distribution whose package its traceback went through, not the program's own raise
    assert rule("died_of_other", 1, False, owners, imported, missing, ["<string>", "C:\\work\\app.py"]) == []
    assert rule("died_of_other", 1, False, owners, imported, missing, []) == []  # (a trace made before `frames`)
    assert rule("died_of_other", 1, False, owners, imported, missing,
                ["C:\\work\\app.py", site + "\\PyQt5\\__init__.py"]) == [(qwindows, qt[1])]
    # Linux (PySide6_Essentials' plugin), and a conda package's file under its environment's site-packages
    lsite = "/v/lib/python3.11/site-packages"
    xcb = Owner("PySide6_Essentials", "6.8.1", "PySide6/Qt/plugins/platforms/libqxcb.so", lsite)
    assert rule("crashed", None, False, {"libqxcb.so": (xcb,)}, ["PySide6.QtWidgets"],
                [lsite + "/PySide6/Qt/plugins/platforms/libqxcb.so"]) == [(lsite + "/PySide6/Qt/plugins/platforms/"
                                                                           "libqxcb.so", xcb)]
    conda = Owner("pyqt", "5.15.9", "Lib/site-packages/PyQt5/QtGui.pyd", "C:\\conda\\envs\\x", "conda")
    lib = Owner("qt-main", "5.15.8", "Library/plugins/platforms/qwindows.dll", "C:\\conda\\envs\\x", "conda")
    assert listed_top(conda) == "PyQt5" and listed_top(lib) == ""
    # PyQt5 in the user site (first on sys.path) and in the system's: the system's copy is not the one imported
    user = "C:\\Users\\me\\AppData\\Roaming\\Python\\Python311\\site-packages"
    mine = Owner("PyQt5_Qt5", "5.15.2", "PyQt5/Qt5/plugins/platforms/qwindows.dll", user)
    hidden = {"qwindows.dll": (qt[1], mine)}
    assert rule("crashed", 0xC0000409, False, hidden, imported, [qwindows], sites=[user, site]) == []
    assert rule("crashed", 0xC0000409, False, hidden, imported, [qwindows], sites=[site, user]) == [(qwindows, qt[1])]
    assert rule("crashed", 0xC0000409, False, hidden, imported, [qwindows]) == [(qwindows, qt[1])]  # (no order known)
    assert [o.root for o in record_files_to_check(hidden, imported, sites=[user, site])] == [user]
    assert rule("crashed", 0xC0000409, False, {"qtgui.pyd": (conda,), "qwindows.dll": (lib,)}, ["PyQt5.QtGui"],
                ["C:\\conda\\envs\\x\\Lib\\site-packages\\PyQt5\\QtGui.pyd",
                 "C:\\conda\\envs\\x\\Library\\plugins\\platforms\\qwindows.dll"]) == [
        ("C:\\conda\\envs\\x\\Lib\\site-packages\\PyQt5\\QtGui.pyd", conda)]


def qt_trace(tmp_path: Path, command: str, imports: list, missing: list, code: int = 0xC0000409) -> Path:
    """A Windows trace of python.exe -c COMMAND with PyQt5 5.15.11, PyQt5-Qt5 5.15.2 and numpy 2.1.3 installed (their
    RECORDs in py_dists), the modules it imported, the files `dlltrace run` found missing, and its exit code."""
    from simhelp import handwritten, python_writer

    h = handwritten()
    w, site = python_writer(h, command, "C:\\py")
    w.ev("py_dists", dists=[
        {"name": "PyQt5", "version": "5.15.11", "site": site, "files": ["PyQt5/QtCore.pyd", "PyQt5/QtGui.pyd"]},
        {"name": "PyQt5_Qt5", "version": "5.15.2", "site": site,
         "files": ["PyQt5/Qt5/bin/Qt5Core.dll", "PyQt5/Qt5/plugins/platforms/qminimal.dll",
                   "PyQt5/Qt5/plugins/platforms/qwindows.dll"]},
        {"name": "numpy", "version": "2.1.3", "site": site,
         "files": ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd"]}],
        conda=[], conda_prefix=None, cut=False)
    for m in imports:
        w.ev("py_import", module=m, frame={"file": "<string>", "line": 1, "function": "<module>"}, imports=[])
    for rel in missing:
        w.file(site + "\\" + rel.replace("/", "\\"), kind="missing")
    w.write(tmp_path / "t.jsonl", exit_code=code)
    return tmp_path / "t.jsonl"


def test_a_platform_plugin_gone_is_the_answer_of_a_crash_no_load_explains(tmp_path, capsys):
    """The report of a Windows trace whose program crashed (0xC0000409: Qt's abort when no platform plugin
    initialises) with no failed load, and whose `file` facts say PyQt5-Qt5's qwindows.dll is missing: the headline,
    the text's lines and fix, Markdown's, --json's outcome.file (valid against result-v1.json) and the Diagnosis
    (api.diagnose) name the file and its distribution, and the reinstall. The same trace without the fact, and one
    whose missing file is numpy's (not imported), say no failed load explains the crash and name no file."""
    import jsonschema

    from dlltrace import cli
    from dlltrace.api import diagnose

    qwindows = "C:\\py\\Lib\\site-packages\\PyQt5\\Qt5\\plugins\\platforms\\qwindows.dll"
    code = "from PyQt5.QtGui import QGuiApplication\napp = QGuiApplication([])"
    t = qt_trace(tmp_path, code, ["PyQt5", "PyQt5.QtCore", "PyQt5.QtGui"], ["PyQt5/Qt5/plugins/platforms/qwindows.dll"])
    assert cli.main(["report", str(t)]) == 0
    text = capsys.readouterr().out
    head = text.splitlines()[0]
    assert head.startswith("dlltrace ─ the program crashed (0xc0000409 STATUS_STACK_BUFFER_OVERRUN): qwindows.dll, a "
                           "file of PyQt5_Qt5 5.15.2, is not there · "), head
    assert ("  No failed load explains the failure, and a file of a distribution the program imported is\n  not there:\n"
            f"    {qwindows}\n  PyQt5_Qt5 5.15.2 installed it (its RECORD lists PyQt5/Qt5/plugins/platforms/"
            "qwindows.dll)") in text, text
    assert "-m pip install --force-reinstall --no-deps PyQt5_Qt5==5.15.2" in text, text
    assert "no failed load explains it" not in text and text.count("the program crashed") == 1, text
    assert cli.main(["report", "--markdown", str(t)]) == 0
    md = capsys.readouterr().out
    assert "qwindows.dll, a file of PyQt5\\_Qt5 5.15.2, is not there" in md or \
        "qwindows.dll, a file of PyQt5_Qt5 5.15.2, is not there" in md, md
    assert "Suggested fix:" in md and "--force-reinstall --no-deps PyQt5_Qt5==5.15.2" in md, md
    assert cli.main(["report", "--json", str(t)]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "result-v1.json").read_text()))
    f = doc["outcome"]["file"]
    assert (doc["outcome"]["kind"], f["path"], f["package"], f["version"], f["listed"], f["how"], f["also"]) == (
        "crashed", qwindows, "PyQt5_Qt5", "5.15.2", "PyQt5/Qt5/plugins/platforms/qwindows.dll", "listed", []), f
    assert doc["outcome"]["text"] == head[len("dlltrace ─ "):].split(" · ")[0], doc["outcome"]
    (d,) = diagnose(str(t))
    assert d.gone is not None and (d.gone.path, d.gone.package, d.gone.how) == (qwindows, "PyQt5_Qt5", "listed")
    assert d.gone.fixes[0].action == "install" and d.gone.fixes[0].version == "5.15.2"
    # no fact of a missing file (a healthy install, or a trace made before): the crash is unexplained
    (tmp_path / "b").mkdir()
    assert cli.main(["report", str(qt_trace(tmp_path / "b", code, ["PyQt5", "PyQt5.QtGui"], []))]) == 0
    text = capsys.readouterr().out
    assert "no failed load explains it" in text and "a file of" not in text, text
    # numpy's file missing, numpy not imported: not blamed
    (tmp_path / "c").mkdir()
    assert cli.main(["report", str(qt_trace(tmp_path / "c", "import sys; sys.exit(3)", ["sys"],
                                            ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd"], code=3))]) == 0
    text = capsys.readouterr().out
    assert "exited with 3" in text and "a file of" not in text and "numpy" not in text, text
    # an exit code, and two files of it missing: the first named, the other listed
    (tmp_path / "d").mkdir()
    t = qt_trace(tmp_path / "d", code, ["PyQt5.QtGui"], ["PyQt5/Qt5/plugins/platforms/qminimal.dll",
                                                         "PyQt5/Qt5/plugins/platforms/qwindows.dll"], code=3)
    assert cli.main(["report", str(t)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("dlltrace ─ the program exited with 3: qminimal.dll, a file of PyQt5_Qt5 5.15.2, is not "
                           "there"), text
    assert f"  Not there either:\n    {qwindows}\n" in text, text
    # several traces (report A B C): the crash's and the exit's answers are the files, each named
    assert cli.main(["report", str(tmp_path / "t.jsonl"), str(t), str(tmp_path / "c" / "t.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "qwindows.dll, a file of PyQt5_Qt5 5.15.2, is not there" in text, text
    assert "qminimal.dll, a file of PyQt5_Qt5 5.15.2, is not there" in text, text
    assert "exited with 3, and no failed load explains it" in text, text


def test_run_looks_for_the_imported_distributions_files_only_after_a_failure(tmp_path):
    """What `dlltrace run` looks at after the program ended (runner.record_gone_facts): nothing after a run that did
    not fail (no file asked about); after one that failed, the native files the RECORDs of the distributions it
    imported list (PyQt5's and PyQt5-Qt5's, not numpy's), each once, and those not there become `file` facts of
    kind missing (but for a path already known)."""
    from dlltrace.runner import record_gone_facts, run_failed
    from dlltrace.trace.reader import read_trace

    site = "C:\\py\\Lib\\site-packages"
    asked: list = []

    def exists(p: str) -> bool:
        asked.append(p)
        return not p.endswith("qwindows.dll")

    ok = read_trace(qt_trace(tmp_path, "import PyQt5.QtGui", ["PyQt5", "PyQt5.QtGui"], [], code=0))
    assert not run_failed(ok) and record_gone_facts(ok, "file", lambda p: p, set(), exists) == [] and asked == []
    (tmp_path / "f").mkdir()
    failed = read_trace(qt_trace(tmp_path / "f", "import PyQt5.QtGui", ["PyQt5", "PyQt5.QtGui"], [], code=0xC0000409))
    facts = record_gone_facts(failed, "file", lambda p: p, set(), exists)
    assert [(e["ev"], e["path"], e["kind"]) for e in facts] == [
        ("file", site + "\\PyQt5\\Qt5\\plugins\\platforms\\qwindows.dll", "missing")], facts
    assert sorted(asked) == sorted(site + "\\PyQt5\\" + p for p in (
        "QtCore.pyd", "QtGui.pyd", "Qt5\\bin\\Qt5Core.dll", "Qt5\\plugins\\platforms\\qminimal.dll",
        "Qt5\\plugins\\platforms\\qwindows.dll")), asked
    assert record_gone_facts(failed, "file", lambda p: p, {facts[0]["path"]}, exists) == []  # (known already)
    assert record_gone_facts(failed, "file", lambda p: None, set(), exists) == []  # (no host path for it)
