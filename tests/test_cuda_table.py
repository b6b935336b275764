"""The CUDA stack table (tracer/dlltrace/diagnosis/cuda.py, docs/cuda.md): built from scenario worlds with each kind
of mismatch (asserted as typed fields), from a trace, from the real onnxruntime-gpu / torch / ctranslate2 /
nvidia-cuda-runtime wheels' files, and `dlltrace cuda` on this machine."""

from __future__ import annotations

import importlib.util
import json
import os
import zipfile
from pathlib import Path

import jsonschema

import realwheels
from dlltrace.diagnosis import cuda as C
from dlltrace.diagnosis.cuda import WorldFacts, cuda_table, facts_of_scenario
from dlltrace.render.cuda import cuda_dict, cuda_markdown, cuda_table_of_trace, cuda_text
from dlltrace.diagnosis.scenario import scenario_from_dict
from dlltrace.tracecheck import Validator
from dlltrace.trace.reader import read_trace
from dlltrace.worlds.live import LiveWorld, wine_map
from dlltrace.worlds.world import ProcessState, SystemInfo
from dlltrace.render.cuda import mismatch_text

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "tracer" / "dlltrace" / "schemas" / "cuda-v1.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
CHECKER = Validator.from_path(SCHEMA_PATH)  # the package's own schema checker (tracecheck.py)
REFERENCE = jsonschema.Draft202012Validator(SCHEMA)

TK = r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA"
T118, T121, T124 = TK + r"\v11.8", TK + r"\v12.1", TK + r"\v12.4"
SP = r"C:\venv\Lib\site-packages"
SYS = r"C:\Windows\System32"
EXE = r"C:\Python311\python.exe"

NVCUDA_522 = {"path": SYS + r"\nvcuda.dll", "version": "31.0.15.2206"}   # driver 522.06: CUDA 11.8
NVCUDA_528 = {"path": SYS + r"\nvcuda.dll", "version": "31.0.15.2833"}   # 528.33: below 12.1's 531.14, above 525
NVCUDA_560 = {"path": SYS + r"\nvcuda.dll", "version": "32.0.15.6094"}   # 560.94: CUDA 12.6


def toolkit(root: str, cuda: str) -> list[dict]:
    """A toolkit's cudart and cuBLAS with the file versions NVIDIA writes (cudart: 6.14.11.<major*1000+minor*10>)."""
    major, minor = (int(x) for x in cuda.split("."))
    cudart = "cudart64_110.dll" if major == 11 else f"cudart64_{major}.dll"
    return [{"path": root + "\\bin\\" + cudart, "version": f"6.14.11.{major * 1000 + minor * 10}"},
            {"path": root + f"\\bin\\cublas64_{major}.dll", "version": f"{major}.{minor}.0.1"},
            {"path": root + f"\\bin\\cublasLt64_{major}.dll", "version": f"{major}.{minor}.0.1"}]


def torch_cu121() -> list[dict]:
    return [{"path": SP + r"\torch\lib\cudart64_12.dll", "version": "6.14.11.12010"},
            {"path": SP + r"\torch\lib\cublas64_12.dll", "version": "12.1.3.1"},
            {"path": SP + r"\torch\lib\c10.dll"}]


def ort(major: int) -> list[dict]:
    return [{"path": SP + r"\onnxruntime\capi\onnxruntime_providers_cuda.dll",
             "imports": [f"cublasLt64_{major}.dll", f"cublas64_{major}.dll", "KERNEL32.dll"]},
            {"path": SP + r"\onnxruntime\capi\onnxruntime.dll", "version": "1.20.1.0"}]


def table(files=(), path=(), env=None, folders=(), texts=None):
    s = scenario_from_dict({"process": {"exe": EXE, "path": list(path), "env": dict(env or {})},
                            "file": list(files), "folders": list(folders)})
    facts = facts_of_scenario(s)
    if texts:
        facts = WorldFacts(s.world, s.process, [f.path for f in s.world.all_files()] + list(folders), texts=texts)
    t = cuda_table(facts)
    doc = cuda_dict(t)  # every table is a valid document, for the schema and for the package's own checker
    REFERENCE.validate(doc)
    assert CHECKER.first_error(doc) is None
    return t


def kinds(t) -> list[str]:
    return [m.kind for m in t.mismatches]


def only(t, kind):
    ms = [m for m in t.mismatches if m.kind == kind]
    assert len(ms) == 1, (kind, t.mismatches)
    return ms[0]


# --- the driver table: the numbers of the source ---------------------------------------------------------

def test_driver_table_is_the_release_notes():
    tb = C.driver_table()
    assert tb.toolkit_minimum("12.1", "windows") == "531.14" and tb.toolkit_minimum("12.1", "linux") == "530.30.02"
    assert tb.toolkit_minimum("12.0", "windows") == "527.41" and tb.toolkit_minimum("11.8", "windows") == "520.06"
    assert tb.toolkit_minimum("13.0", "linux") == "580.65.06"
    assert tb.toolkit_minimum("13.0", "windows") == "580"  # N/A in Table 3: the 13.x family minimum of Table 2
    assert tb.family_minimum(12, "windows") == "525" and tb.family_minimum(11, "windows") == "452.39"
    assert tb.supports("522.06", "windows") == ("11.8", 11)
    assert tb.supports("560.94", "windows") == ("12.6", 12)
    assert tb.supports("581.29", "windows")[1] == 13
    assert any("cuda-toolkit-release-notes" in s for s in tb.sources)


def test_version_rules_of_the_files():
    assert C.windows_driver_version("32.0.15.6094") == "560.94"
    assert C.windows_driver_version("31.0.15.2206") == "522.06"
    assert C.cudart_cuda_version("6.14.11.12040") == "12.4"
    assert C.cudart_cuda_version("12.4.127") is None
    assert [C.cuda_major_of_name(n) for n in ("cudart64_110.dll", "cublas64_12.dll", "cublasLt64_13.dll",
                                              "nvrtc64_120_0.dll", "libcublas.so.12", "cufft64_11.dll", "curand64_10.dll")] == \
        [11, 12, 13, 12, 12, 12, None]
    assert C.cudnn_major_of_name("cudnn64_9.dll") == 9 and C.cudnn_major_of_name("libcudnn.so.8.9.7") == 8


# --- one scenario per kind of mismatch ------------------------------------------------------------------------

def test_rule_driver_too_old_for_a_framework_that_bundles_its_cuda():
    t = table([NVCUDA_522, *torch_cu121()], folders=[SP + r"\torch-2.5.1+cu121.dist-info"])
    assert t.driver is not None and (t.driver.version, t.driver.supports) == ("522.06", "11.8")
    fw = t.frameworks[0]
    assert (fw.name, fw.version, fw.cuda, fw.cuda_major) == ("torch", "2.5.1+cu121", "12.1", 12)
    m = only(t, "driver_too_old")
    assert (m.subject, m.needs_cuda, m.driver, m.driver_supports, m.needs_driver, m.bundled) == \
        ("torch 2.5.1+cu121", "12.1", "522.06", "11.8", "531.14", True)
    assert m.fixes[0].action == "update_driver" and m.fixes[0].driver == "531.14" and m.fixes[0].family_driver == "525"
    assert mismatch_text(m).startswith("torch 2.5.1+cu121 bundles CUDA 12.1; your driver 522.06 supports up to "
                                         "CUDA 11.8: update the NVIDIA driver to >= 531.14")


def test_rule_driver_too_old_for_a_toolkit_and_minor_version_compatibility():
    t = table([NVCUDA_522, *toolkit(T121, "12.1")], env={"CUDA_PATH": T121})
    m = only(t, "driver_too_old")
    assert m.subject.startswith("CUDA 12.1 toolkit") and m.needs_driver == "531.14"
    t = table([NVCUDA_528, *toolkit(T121, "12.1")], env={"CUDA_PATH": T121})
    assert kinds(t) == ["driver_minor_compat"]
    m = t.mismatches[0]
    assert (m.severity, m.driver, m.needs_driver) == ("warning", "528.33", "531.14")


def test_rule_no_driver():
    t = table(torch_cu121(), folders=[SP + r"\torch-2.5.1+cu121.dist-info"])
    assert t.driver is None and t.driver_known
    m = only(t, "no_driver")
    assert (m.severity, m.subject, m.needs_driver) == ("error", "torch 2.5.1+cu121", "531.14")


def test_rule_framework_toolkit_major():
    # onnxruntime-gpu built for CUDA 12 loads cublasLt64_12.dll from PATH; PATH has only CUDA 11.8, 12.4 is installed
    t = table([NVCUDA_560, *toolkit(T118, "11.8"), *toolkit(T124, "12.4"), *ort(12)],
              path=[T118 + r"\bin", SYS], env={"CUDA_PATH": T118, "CUDA_PATH_V12_4": T124},
              folders=[SP + r"\onnxruntime_gpu-1.20.1.dist-info"])
    fw = next(f for f in t.frameworks if f.name == "onnxruntime-gpu")
    assert (fw.cuda_major, fw.cuda_from, fw.needs[:2]) == (12, "imports of onnxruntime_providers_cuda.dll",
                                                             ("cublasLt64_12.dll", "cublas64_12.dll"))
    m = only(t, "framework_toolkit_major")
    assert (m.subject, m.dll, m.have) == ("onnxruntime-gpu 1.20.1", "cublasLt64_12.dll", "CUDA 11.8")
    assert m.fixes[0].action == "path_prepend" and m.fixes[0].folder == T124 + r"\bin"


def test_rule_path_order_two_toolkits_of_one_major():
    t = table([NVCUDA_560, *toolkit(T121, "12.1"), *toolkit(T124, "12.4")],
              path=[T121 + r"\bin", T124 + r"\bin"], env={"CUDA_PATH": T124})
    assert [(tk.version, tk.path_index) for tk in t.toolkits] == [("12.1", 1), ("12.4", 2)]
    m = only(t, "path_order")
    assert (m.needs_cuda, m.have, m.dll) == ("12.4", "CUDA 12.1", "cudart64_12.dll")
    f = m.fixes[0]
    assert (f.action, f.folder, f.ahead_of) == ("reorder_path", T124 + r"\bin", T121 + r"\bin")
    # the newer one first: nothing to say
    t = table([NVCUDA_560, *toolkit(T121, "12.1"), *toolkit(T124, "12.4")],
              path=[T124 + r"\bin", T121 + r"\bin"], env={"CUDA_PATH": T124})
    assert "path_order" not in kinds(t)


def test_rule_cudnn_cuda_major_in_a_toolkit():
    # cuDNN 8 for CUDA 11 (its ops library imports cublasLt64_11.dll) copied into the CUDA 12.4 bin
    t = table([NVCUDA_560, *toolkit(T124, "12.4"),
               {"path": T124 + r"\bin\cudnn64_8.dll", "version": "8.9.7.29"},
               {"path": T124 + r"\bin\cudnn_ops_infer64_8.dll", "version": "8.9.7.29", "imports": ["cublasLt64_11.dll"]}],
              path=[T124 + r"\bin"], env={"CUDA_PATH": T124})
    c = next(c for c in t.cudnns if c.path.endswith("cudnn64_8.dll"))
    assert (c.version, c.major, c.cuda_major, c.cuda_major_from, c.on_path) == ("8.9.7.29", 8, 11, "imports", 1)
    m = only(t, "cudnn_cuda_major")
    assert (m.needs_cuda, m.dll, m.have) == ("12.4", "cudnn64_8.dll", "cuDNN 8.9.7.29 for CUDA 11")


def test_rule_cudnn_cuda_major_for_a_framework_and_cudnn_major_missing():
    cudnn_dir = r"C:\Program Files\NVIDIA\CUDNN\v9.1\bin\11.8"
    vinfo = {SP + r"\onnxruntime\capi\version_info.py": 'use_cuda = True\ncuda_version = "12.4.1"\ncudnn_version = "9"\n'}
    files = [NVCUDA_560, *toolkit(T124, "12.4"), *ort(12),
             {"path": cudnn_dir + r"\cudnn64_9.dll", "version": "9.1.0.70"}]
    t = table(files, path=[T124 + r"\bin", cudnn_dir], env={"CUDA_PATH": T124}, texts=vinfo)
    fw = next(f for f in t.frameworks if f.name == "onnxruntime-gpu")
    assert (fw.cuda, fw.cudnn_major, fw.cuda_from) == ("12.4.1", 9, "onnxruntime/capi/version_info.py")
    c = t.cudnns[0]
    assert (c.major, c.cuda_major, c.cuda_major_from) == (9, 11, "folder")
    m = only(t, "cudnn_cuda_major")
    assert (m.subject, m.dll, m.have) == ("onnxruntime-gpu 1.20.1", "cudnn64_9.dll", "cuDNN 9.1.0.70 for CUDA 11")
    assert m.fixes[0].package == "nvidia-cudnn-cu12"
    # only a cuDNN 8: the cuDNN 9 it needs is missing
    files[-1] = {"path": T124 + r"\bin\cudnn64_8.dll", "version": "8.9.7.29"}
    t = table(files, path=[T124 + r"\bin"], env={"CUDA_PATH": T124}, texts=vinfo)
    m = only(t, "cudnn_major_missing")
    assert (m.dll, m.have, m.fixes[0].cudnn) == ("cudnn64_9.dll", "cuDNN 8", 9)


def test_rule_cuda_major_missing_onnxruntime_for_cuda_13_with_only_cuda_11():
    t = table([NVCUDA_560, *toolkit(T118, "11.8"), *ort(13)], path=[T118 + r"\bin"], env={"CUDA_PATH": T118},
              folders=[SP + r"\onnxruntime_gpu-1.31.1.dist-info"])
    m = only(t, "cuda_major_missing")
    assert (m.subject, m.needs_cuda, m.dll, m.have) == ("onnxruntime-gpu 1.31.1", "13", "cublasLt64_13.dll", "CUDA 11")
    assert [f.action for f in m.fixes] == ["install_cuda", "other_cuda_build"]
    assert m.fixes[0].package == "nvidia-cublas"
    # and the driver (560.94: CUDA 12.6) cannot run CUDA 13 either
    assert only(t, "driver_too_old").needs_driver == "580"


def test_rule_cuda_major_missing_never_offers_the_build_it_already_is():
    """A CUDA 13 toolkit without cuBLAS (a partial install): the fix is cuBLAS for 13, not "install the
    onnxruntime-gpu build for CUDA 13", which is the build the user has (review)."""
    t13 = TK + r"\v13.0"
    t = table([NVCUDA_560, {"path": t13 + r"\bin\cudart64_13.dll", "version": "6.14.11.13000"}, *ort(13)],
              path=[t13 + r"\bin"], env={"CUDA_PATH": t13}, folders=[SP + r"\onnxruntime_gpu-1.31.1.dist-info"])
    m = only(t, "cuda_major_missing")
    assert (m.dll, m.have) == ("cublasLt64_13.dll", "CUDA 13")
    assert [f.action for f in m.fixes] == ["install_cuda"]


def test_rule_wheel_not_searched():
    wheel = SP + r"\nvidia\cublas\bin"
    t = table([NVCUDA_560, *ort(12), {"path": wheel + r"\cublas64_12.dll"}, {"path": wheel + r"\cublasLt64_12.dll"}],
              path=[SYS], folders=[SP + r"\nvidia_cublas_cu12-12.4.5.8.dist-info"])
    w = t.wheels[0]
    assert (w.name, w.cuda_major, w.searched, w.folder) == ("cublas", 12, False, wheel)
    m = only(t, "wheel_not_searched")
    assert (m.dll, m.found) == ("cublasLt64_12.dll", (wheel,))
    assert [f.action for f in m.fixes] == ["package_mechanism", "path_prepend"]
    # on PATH: searched, no mismatch
    t = table([NVCUDA_560, *ort(12), {"path": wheel + r"\cublas64_12.dll"}, {"path": wheel + r"\cublasLt64_12.dll"}],
              path=[wheel, SYS])
    assert t.wheels[0].searched and "wheel_not_searched" not in kinds(t)


def test_a_consistent_stack_has_no_mismatch():
    t = table([NVCUDA_560, *toolkit(T124, "12.4"), *ort(12), *torch_cu121()],
              path=[T124 + r"\bin", SYS], env={"CUDA_PATH": T124, "CUDA_PATH_V12_4": T124},
              folders=[SP + r"\torch-2.5.1+cu121.dist-info", SP + r"\onnxruntime_gpu-1.20.1.dist-info"])
    assert t.mismatches == ()
    tk = t.toolkits[0]
    assert (tk.version, tk.sources, tk.path_index, tk.cudart.version, tk.cublas.version) == \
        ("12.4", ("CUDA_PATH", "CUDA_PATH_V12_4", "PATH", "default folder"), 1, "12.4", "12.4.0.1")
    text = cuda_text(t)
    assert "No mismatch" in text and "560.94" in text and "cudart64_12.dll 12.4" in text
    assert "| 12.4 |" in cuda_markdown(t)


def test_the_builtin_example_scenario():
    from dlltrace.diagnosis.scenario import load_scenario

    t = cuda_table(facts_of_scenario(load_scenario(ROOT / "fixtures" / "scenarios" / "s1.toml")))
    assert [tk.version for tk in t.toolkits] == ["11.8", "12.1"]
    assert t.driver is None and {m.kind for m in t.mismatches} == {"no_driver"}
    assert all(m.severity == "warning" for m in t.mismatches)  # toolkits alone build without a driver


# --- a trace ---------------------------------------------------------------------------------------------------

def _writer():
    spec = importlib.util.spec_from_file_location("handwritten", ROOT / "fixtures" / "traces" / "handwritten.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_of_a_trace(tmp_path):
    hw = _writer()
    w = hw.Writer(EXE, r"C:\work", [T118 + r"\bin", SYS], [], [EXE, "-c", "import torch"])
    w.lines[2]["vars"]["CUDA_PATH"] = T121
    w.py_env("3.11.9", r"C:\Python311", r"C:\Python311\Lib\site-packages")
    site = r"C:\Python311\Lib\site-packages"
    w.file(SYS + r"\nvcuda.dll", version="31.0.15.2206")
    w.file(T118 + r"\bin\cublas64_11.dll", version="11.11.3.6")
    w.file(site + r"\torch\lib\cudart64_12.dll", version="6.14.11.12010")
    w.file(site + r"\torch\lib\c10.dll")
    w.write(tmp_path / "t.jsonl", exit_code=0)
    t = cuda_table_of_trace(read_trace(tmp_path / "t.jsonl"))
    assert t is not None and t.origin == "trace" and t.driver_known
    assert t.driver.version == "522.06" and t.cuda_path == T121
    assert [(tk.version, tk.path_index) for tk in t.toolkits] == [("11.8", 1), ("12.1", None)]
    assert not t.toolkits[1].exists  # CUDA_PATH names it; the trace touched none of its files
    fw = t.frameworks[0]
    assert (fw.name, fw.cuda, fw.cuda_from) == ("torch", "12.1", "cudart64_12.dll in torch/lib")
    assert only(t, "driver_too_old").subject == "torch"


def test_a_trace_that_never_touched_the_driver_does_not_say_there_is_none(tmp_path):
    hw = _writer()
    w = hw.Writer(EXE, r"C:\work", [T121 + r"\bin", SYS], [], [EXE])
    w.file(T121 + r"\bin\cublas64_12.dll", version="12.1.3.1")
    w.write(tmp_path / "t.jsonl", exit_code=0)
    t = cuda_table_of_trace(read_trace(tmp_path / "t.jsonl"))
    assert t is not None and t.driver is None and not t.driver_known and t.mismatches == ()
    assert "not recorded" in cuda_text(t)
    # a trace with nothing of CUDA in it: no table
    w = hw.Writer(EXE, r"C:\work", [SYS], [], [EXE])
    w.write(tmp_path / "u.jsonl", exit_code=0)
    assert cuda_table_of_trace(read_trace(tmp_path / "u.jsonl")) is None


# --- the real wheels: their CUDA read from their files --------------------------------------------------------

def wheel(key: str) -> Path:
    return realwheels.wheel_or_skip(key)


def place_members(key: str, members: list[str], drive_c: Path) -> None:
    """The wheel's members where pip puts them under C:\\venv (hard links to the unpacked cache)."""
    w = realwheels.WHEELS[key]
    wheel(key)
    for m in members:
        dest = drive_c / "venv" / realwheels.install_target(w, m)
        realwheels.place(realwheels.wheel_member(w, m), dest)


def layout_table(tmp_path: Path):
    (tmp_path / "dosdevices").mkdir(exist_ok=True)
    drive_c = tmp_path / "drive_c"
    (drive_c / "Windows" / "System32").mkdir(parents=True, exist_ok=True)
    if not (tmp_path / "dosdevices" / "c:").exists():
        os.symlink(drive_c, tmp_path / "dosdevices" / "c:")
    to_host = wine_map(tmp_path)
    world = LiveWorld(SystemInfo(), to_host=to_host)
    process = ProcessState(exe=r"C:\venv\Scripts\python.exe", path=[SYS])
    t = cuda_table(WorldFacts(world, process, site_packages=[SP], origin="layout", to_host=to_host))
    jsonschema.Draft202012Validator(SCHEMA).validate(cuda_dict(t))
    return t


def test_real_onnxruntime_gpu_wheel_cuda_13_from_version_info_and_from_the_provider_imports(tmp_path):
    path = wheel("onnxruntime")
    with zipfile.ZipFile(path) as z:
        info = z.read("onnxruntime/capi/version_info.py").decode()
    # from version_info.py alone (the provider DLL not there)
    place_members("onnxruntime", ["onnxruntime/capi/version_info.py", "onnxruntime/capi/onnxruntime.dll"], tmp_path / "drive_c")
    t = layout_table(tmp_path)
    fw = next(f for f in t.frameworks if f.name == "onnxruntime-gpu") if any(f.name == "onnxruntime-gpu" for f in t.frameworks) else None
    assert fw is None  # no provider DLL and no dist-info: the CPU package, not onnxruntime-gpu
    place_members("onnxruntime", ["onnxruntime/capi/onnxruntime_providers_cuda.dll"], tmp_path / "drive_c")
    t = layout_table(tmp_path)
    fw = next(f for f in t.frameworks if f.name == "onnxruntime-gpu")
    assert 'cuda_version = "13.0.88"' in info
    assert (fw.cuda, fw.cuda_major, fw.cudnn_major, fw.version) == ("13.0.88", 13, 9, "1.31.1")
    assert fw.cuda_from == "onnxruntime/capi/version_info.py"
    assert fw.needs == ("cublasLt64_13.dll", "cublas64_13.dll", "cudnn64_9.dll")  # the provider's real imports
    # without version_info.py: the major from the provider DLL's imports
    os.unlink(tmp_path / "drive_c" / "venv" / "Lib" / "site-packages" / "onnxruntime" / "capi" / "version_info.py")
    t = layout_table(tmp_path)
    fw = next(f for f in t.frameworks if f.name == "onnxruntime-gpu")
    assert (fw.cuda_major, fw.cuda_from) == (13, "imports of onnxruntime_providers_cuda.dll")
    m = only(t, "cuda_major_missing")
    assert m.dll == "cublasLt64_13.dll" and m.fixes[0].package == "nvidia-cublas"


def test_real_torch_wheel_is_a_cpu_build(tmp_path):
    path = wheel("torch")
    with zipfile.ZipFile(path) as z:
        libs = [n for n in z.namelist() if n.startswith("torch/lib/") and n.endswith(".dll")]
    place_members("torch", ["torch/version.py", *[n for n in libs if "c10" in n or "iomp" in n]], tmp_path / "drive_c")
    fw = next(f for f in layout_table(tmp_path).frameworks if f.name == "torch")
    assert (fw.version, fw.cuda, fw.cpu_build, fw.cuda_from) == ("2.5.1+cpu", None, True, "torch/version.py")
    assert fw.bundles == ()  # no CUDA DLL in the real torch\lib of the PyPI win_amd64 wheel


def test_real_ctranslate2_and_cuda_runtime_wheels(tmp_path):
    place_members("ctranslate2", ["ctranslate2/version.py", "ctranslate2/ctranslate2.dll", "ctranslate2/cudnn64_9.dll"],
                  tmp_path / "drive_c")
    place_members("cudart12", ["nvidia/cuda_runtime/bin/cudart64_12.dll"], tmp_path / "drive_c")
    t = layout_table(tmp_path)
    ct2 = next(f for f in t.frameworks if f.name == "ctranslate2")
    # 4.8.5 imports no CUDA DLL: it loads cublas64_12.dll at run time, by the name in its code
    assert (ct2.version, ct2.cuda_major, ct2.cuda_from) == ("4.8.5", 12, "the cuBLAS name in ctranslate2.dll")
    assert ct2.needs == ("cublas64_12.dll",)
    # the cuDNN 9 it bundles (docs/packages.md 1.1): its file version; it imports only KERNEL32, so no CUDA major
    assert ct2.cudnn_major == 9 and ct2.bundles == ("cudnn64_9.dll",)
    c = t.cudnns[0]
    assert (c.version, c.major, c.cuda_major, c.folder) == ("9.10.2.21", 9, None, SP + r"\ctranslate2")
    w = t.wheels[0]
    assert (w.name, w.files, w.cuda_major, w.searched) == ("cuda_runtime", ("cudart64_12.dll",), 12, False)
    facts = C._Builder(WorldFacts(LiveWorld(SystemInfo(), to_host=wine_map(tmp_path)), ProcessState(exe=EXE)))
    comp = facts._component(w.folder + r"\cudart64_12.dll")
    assert comp.version == "12.4"  # nvidia-cuda-runtime-cu12 12.4.127: file version 6.14.11.12040


# --- the command on this machine ---------------------------------------------------------------------------------

def test_dlltrace_cuda_on_this_machine(dlltrace_cli):
    r = dlltrace_cli("cuda")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("CUDA stack (this machine, linux)")
    have_driver = any(Path(d).is_dir() and any(n.startswith("libcuda.so.") for n in os.listdir(d))
                      for d in C.LiveFacts()._default_system())
    if not have_driver:
        assert "no NVIDIA driver found" in r.stdout
    r = dlltrace_cli("cuda", "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["origin"] == "machine" and (doc["driver"] is None) == (not have_driver)


def test_dlltrace_cuda_of_a_scenario_and_bad_inputs(dlltrace_cli, tmp_path):
    r = dlltrace_cli("cuda", "--scenario", ROOT / "fixtures" / "scenarios" / "s1.toml", "--markdown")
    assert r.returncode == 0 and r.stdout.startswith("### CUDA stack (the scenario, windows)")
    # a stack that does not fit fails (exit 1), its first mismatch and what to install in one line
    r = dlltrace_cli("cuda", "--scenario", ROOT / "fixtures" / "scenarios" / "s2.toml")
    assert r.returncode == 1 and r.stdout.startswith("CUDA stack (the scenario, windows)"), r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dlltrace: the CUDA stack does not fit: 1 mismatch, the "
                                                              "first: torch bundles CUDA 11, and no NVIDIA driver was "
                                                              "found: install an NVIDIA driver >= "), r.stderr
    assert dlltrace_cli("cuda", "--scenario", ROOT / "fixtures" / "scenarios" / "s2.toml", "--json").returncode == 1
    r = dlltrace_cli("cuda", "--scenario", tmp_path / "none.toml")
    assert r.returncode == 2 and r.stderr.startswith("dlltrace: ") and r.stderr.count("\n") == 1
    r = dlltrace_cli("cuda", "--trace", tmp_path / "none.jsonl")
    assert r.returncode == 2 and "no such file" in r.stderr
    (tmp_path / "bad.jsonl").write_text("not a trace\n")
    r = dlltrace_cli("cuda", "--trace", tmp_path / "bad.jsonl")
    assert r.returncode == 3 and r.stderr.startswith("dlltrace: ")
    r = dlltrace_cli("cuda", "--site-packages", tmp_path / "nope")
    assert r.returncode == 2 and "no such folder" in r.stderr


def test_linux_layout_libcuda_toolkit_and_nvidia_wheels(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libcuda.so.550.54.15").write_bytes(b"\x7fELF")
    tk = tmp_path / "usr-local" / "cuda-12.4" / "lib64"
    tk.mkdir(parents=True)
    (tk / "libcudart.so.12.4.127").write_bytes(b"\x7fELF")
    site = tmp_path / "site"
    (site / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cublas" / "lib" / "libcublas.so.12").write_bytes(b"\x7fELF")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("__version__ = '2.4.0+cu124'\ncuda: Optional[str] = '12.4'\n")
    t = cuda_table(C.LiveFacts("linux", env={"CUDA_HOME": str(tk.parent)}, site_packages=[str(site)],
                               system_folders=[str(lib)], toolkit_parents=[str(tmp_path / "usr-local")]))
    assert (t.driver.version, t.driver.supports) == ("550.54.15", "12.4")
    assert [(x.version, x.cudart.version) for x in t.toolkits] == [("12.4", "12.4.127")]
    assert (t.wheels[0].name, t.wheels[0].cuda_major) == ("cublas", 12)
    fw = t.frameworks[0]
    assert (fw.name, fw.version, fw.cuda) == ("torch", "2.4.0+cu124", "12.4")
    assert t.mismatches == ()
    # a soname without the full version: the toolkit's version.json says it
    (tk / "libcudart.so.12.4.127").rename(tk / "libcudart.so.12")
    (tk.parent / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"},\n'
                                            ' "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.4.127"}}')
    t = cuda_table(C.LiveFacts("linux", env={"CUDA_HOME": str(tk.parent)}, site_packages=[str(site)],
                               system_folders=[str(lib)], toolkit_parents=[str(tmp_path / "usr-local")]))
    assert [(x.version, x.cudart.name, x.cudart.version) for x in t.toolkits] == [("12.4", "libcudart.so.12", "12.4.127")]


# --- odd files: no exception, always a valid document -------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_digits = st.lists(st.integers(0, 99999), min_size=1, max_size=4).map(lambda xs: ".".join(map(str, xs)))
_odd = st.one_of(_digits, st.text(max_size=12), st.sampled_from(["None", "", "12.x", "64_", "64_112", "False"]))


@settings(max_examples=150, deadline=None)
@given(nvcuda=_digits, cudart=_digits, tk=st.sampled_from(["0.0", "1.0", "12.4", "99.9"]), ort_cuda=_odd, cudnn=_odd,
       torch_cuda=_odd, tf_cuda=_odd, imp=st.sampled_from(["cublas64_1.dll", "cublas64_999.dll", "cudart64_0.dll", "x.dll"]),
       cudnn_n=st.integers(0, 99), dist=st.sampled_from(["cupy_cuda12x-1", "cupy_cuda117-1", "torch-+cu1", "x-y-z"]))
def test_odd_files_never_raise_and_stay_valid(nvcuda, cudart, tk, ort_cuda, cudnn, torch_cuda, tf_cuda, imp, cudnn_n, dist):
    q = lambda v: v.replace("\\", "").replace("'", "").replace('"', "").replace("\n", "")  # noqa: E731
    texts = {SP + r"\onnxruntime\capi\version_info.py": f'cuda_version = "{q(ort_cuda)}"\ncudnn_version = "{q(cudnn)}"\n',
             SP + r"\torch\version.py": f"__version__ = '2.0'\ncuda = '{q(torch_cuda)}'\n",
             SP + r"\tensorflow\python\platform\build_info.py": f"build_info = {{'cuda_version': '{q(tf_cuda)}'}}\n"}
    root = TK + "\\v" + tk
    table([{"path": SYS + r"\nvcuda.dll", "version": nvcuda},
           {"path": root + r"\bin\cudart64_12.dll", "version": cudart},
           {"path": root + rf"\bin\cudnn64_{cudnn_n}.dll", "version": cudart, "imports": [imp]},
           {"path": SP + r"\onnxruntime\capi\onnxruntime_providers_cuda.dll", "imports": [imp]}],
          path=[root + r"\bin"], env={"CUDA_PATH": root}, folders=[SP + "\\" + dist + ".dist-info"], texts=texts)


def test_report_carries_the_table_of_the_trace():
    """`dlltrace report --json` has the trace's CUDA table (schemas/cuda-v1.json), null for a trace with
    nothing of CUDA; text and Markdown add it only when it names a mismatch."""
    import json as _json

    import jsonschema

    from dlltrace.render.summary import produce
    from dlltrace.trace.reader import read_trace

    root = Path(__file__).resolve().parent.parent
    schema = _json.loads((root / "tracer/dlltrace/schemas/cuda-v1.json").read_text())
    s1 = _json.loads(produce(read_trace(root / "fixtures/traces/s1.jsonl"), "json"))
    assert s1["cuda"] is not None and s1["cuda"]["mismatches"] == []
    jsonschema.validate(s1["cuda"], schema)
    assert _json.loads(produce(read_trace(root / "fixtures/traces/s10.jsonl"), "json"))["cuda"] is None
    assert "CUDA" not in produce(read_trace(root / "fixtures/traces/s10.jsonl"), "text").split("\n")[-1]
    assert "CUDA stack" not in produce(read_trace(root / "fixtures/traces/s1.jsonl"), "text")  # (no mismatch)


def test_report_shows_the_table_when_the_trace_shows_a_mismatch(tmp_path):
    """S1's trace with the nvcuda.dll of a 456.71 driver (CUDA 11.1) in its facts: the CUDA 12.1 toolkit
    it loads cuBLAS from needs a newer driver, said in the text, Markdown and JSON reports."""
    import json as _json

    from dlltrace.render.summary import produce
    from dlltrace.trace.reader import read_trace

    root = Path(__file__).resolve().parent.parent
    lines = (root / "fixtures/traces/s1.jsonl").read_text(encoding="utf-8").splitlines()
    pe = {"machine": "x64", "is_dll": True, "imports": [], "delay_imports": [], "exports": [], "export_ordinals": [],
          "forwarders": {}, "dependent_load_flags": 0, "file_version": "27.21.14.5671"}
    nv = {"ev": "file", "path": "C:\\Windows\\System32\\nvcuda.dll", "kind": "pe", "pe": pe,
          "pid": _json.loads(lines[1])["pid"], "seq": 0, "tid": 0, "t": 0}
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join([*lines, _json.dumps(nv)]) + "\n", encoding="utf-8")
    doc = _json.loads(produce(read_trace(p), "json"))
    kinds = {m["kind"] for m in doc["cuda"]["mismatches"]}
    assert "driver_too_old" in kinds
    text = produce(read_trace(p), "text")
    assert "CUDA stack" in text and "your driver 456.71 supports up to CUDA 11.1" in text
    assert "update the NVIDIA driver to >= 531.14" in produce(read_trace(p), "markdown")


# --- a Linux trace, and the frameworks' build facts a trace records (py_dists texts) ----------------------------

LSITE = "/venv/lib/python3.11/site-packages"


def linux_trace(tmp_path: Path, texts: dict, dists: list, files: list, ld_library_path=None, searched=(),
                gpu=None) -> Path:
    """A Linux trace as `dlltrace run` writes it: the header, ld.so's start (LD_LIBRARY_PATH), the objects it
    opened, the Python's py_env and py_dists (RECORD files, build-facts texts); `gpu`, the machine's GPU facts
    (elf_system's gpu: worlds/gpu.py GpuFacts.as_dict)."""
    pid = 41
    ev = [{"format": "dlltrace-trace", "version": 1, "tool": "dlltrace test", "platform": "linux",
           "command": ["/venv/bin/python", "app.py"]},
          {"ev": "audit_start", "pid": pid, "tid": pid, "seq": 1, "t": 1, "exe": "/usr/bin/python3.11", "ppid": 1,
           "la_version": 2, "ld_library_path": ld_library_path or "", "has_ld_library_path": int(ld_library_path is not None),
           "ld_audit": "x", "ld_preload": "y"},
          {"ev": "py_env", "pid": pid, "tid": pid, "seq": 2, "t": 2, "version": "3.11.7", "implementation": "cpython",
           "executable": "/venv/bin/python", "prefix": "/venv", "base_prefix": "/usr", "exec_prefix": "/venv", "bits": 64,
           "conda": False, "conda_prefix": None, "sys_path": ["/usr/lib/python311.zip", LSITE]},
          {"ev": "py_dists", "pid": pid, "tid": pid, "seq": 3, "t": 3, "conda": [], "conda_prefix": None, "cut": False,
           "dists": [{"name": n, "version": v, "site": LSITE, "files": fs, "loaders": [],
                      **({"texts": texts[n]} if n in texts else {})} for n, v, fs in dists]},
          {"pid": 1, "tid": 0, "seq": 0, "t": 0, "ev": "elf_system",
           "system": {"system_dirs": ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"], "hwcaps": [""],
                      "lib": "lib/x86_64-linux-gnu", "platform": "haswell"}, **({"gpu": gpu} if gpu else {})}]
    ev += [{"ev": "objopen", "pid": pid, "tid": pid, "seq": 10 + i, "t": 10 + i, "path": f, "lmid": 0}
           for i, f in enumerate(files)]
    ev += [{"ev": "objsearch", "pid": pid, "tid": pid, "seq": 100 + i, "t": 100 + i, "name": n, "flag": "LA_SER_ORIG",
            "by": "/venv/bin/python"} for i, n in enumerate(searched)]
    ev.append({"ev": "exit", "pid": pid, "tid": 0, "seq": 0, "t": 0, "code": 0, "by": "dlltrace", "signal": None})
    p = tmp_path / "linux.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in ev))
    return p


def test_rule_of_a_linux_trace_torch_build_facts_wheels_and_driver(tmp_path, dlltrace_cli):
    """`dlltrace cuda --trace` of a Linux trace (it said "the trace holds no traced process", exit 3): torch's CUDA
    read from the torch/version.py py_dists recorded, the nvidia-* wheels from their RECORD files, the driver from
    the libcuda.so.<version> ld.so opened, the folders ld.so was given in LD_LIBRARY_PATH."""
    texts = {"torch": {"torch/version.py": "__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\n"}}
    dists = [("torch", "2.5.1", ["torch/lib/libtorch_cuda.so", "torch/lib/libc10.so"]),
             ("nvidia_cublas_cu12", "12.4.5.8", ["nvidia/cublas/lib/libcublas.so.12", "nvidia/cublas/lib/libcublasLt.so.12"]),
             ("nvidia_cuda_runtime_cu12", "12.4.127", ["nvidia/cuda_runtime/lib/libcudart.so.12"])]
    p = linux_trace(tmp_path, texts, dists, ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"], ld_library_path="")
    t = cuda_table_of_trace(read_trace(p))
    assert t is not None and t.platform == "linux" and t.origin == "trace"
    fw = next(f for f in t.frameworks if f.name == "torch")
    assert (fw.version, fw.cuda, fw.cuda_major, fw.cuda_from) == ("2.5.1+cu124", "12.4", 12, "torch/version.py")
    assert {w.name for w in t.wheels} == {"cublas", "cuda_runtime"}
    assert t.driver is not None and t.driver.version == "550.54.15"
    assert [m for m in t.mismatches if m.severity == "error"] == []
    r = dlltrace_cli("cuda", "--trace", p)
    assert r.returncode == 0 and "torch 2.5.1+cu124" in r.stdout and "torch/version.py" in r.stdout, r
    # a program that never looked for the driver: the trace cannot say there is none (the review's false alarm)
    t = cuda_table_of_trace(read_trace(linux_trace(tmp_path, texts, dists, [])))
    assert t.driver is None and not t.driver_known and not any(m.kind == "no_driver" for m in t.mismatches)
    # one whose ld.so was asked for libcuda.so.1 and opened none: no driver
    t = cuda_table_of_trace(read_trace(linux_trace(tmp_path, texts, dists, [], searched=["libcuda.so.1"])))
    assert t.driver_known and any(m.kind == "no_driver" for m in t.mismatches)
    # the same without the driver and the cuBLAS wheel: exit 1, one line naming what to install
    p = linux_trace(tmp_path, texts, dists[:1], [], searched=["libcuda.so.1"])
    r = dlltrace_cli("cuda", "--trace", p)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r
    assert "install an NVIDIA driver" in r.stderr or "pip install nvidia-cublas-cu12" in r.stderr, r.stderr
    assert "pip install nvidia-cublas-cu12" in r.stdout, r.stdout


def test_a_library_mismatch_on_a_machine_with_no_gpu_says_installing_it_would_not_use_one(tmp_path, dlltrace_cli):
    """The field test (cupy-cuda12x 13.6.0, `cupy.zeros(3)`, on a machine with no NVIDIA device on its PCI bus): the
    table's first mismatch said there is no NVIDIA GPU, and its second offered `pip install nvidia-cublas-cu12` as
    a plain fix, where the report says of each CUDA library that installing it would not make the program use one.
    Now the library's mismatch says so too (text, Markdown, --json's text, the stderr line); with an NVIDIA GPU and
    no kernel driver, it is a fix like any other."""
    texts = {"cupy": {"cupy/.data/_wheel.json": '{"cuda": "12.x", "packaging": "pip"}'}}
    dists = [("cupy_cuda12x", "13.6.0", ["cupy/_core/core.cpython-311-x86_64-linux-gnu.so"])]
    caveat = "(this machine has no NVIDIA GPU: installing them would not make a program use one)"
    no_gpu = {"pci_devices": 9, "nvidia_gpus": [], "kernel_driver": None, "device_nodes": False, "wsl": False}
    p = linux_trace(tmp_path, texts, dists, [], searched=["libcuda.so.1"], gpu=no_gpu)
    t = cuda_table_of_trace(read_trace(p))
    assert [m.kind for m in t.mismatches] == ["no_driver", "cuda_major_missing"] and t.gpu == "no_gpu"
    r = dlltrace_cli("cuda", "--trace", p)
    lines = [x.strip() for x in r.stdout.splitlines() if x.strip().startswith("✗")]
    assert lines[1].endswith("pip install nvidia-cublas-cu12 " + caveat), lines
    assert caveat not in lines[0] and "this machine has no NVIDIA GPU (none on its PCI bus)" in lines[0], lines
    assert caveat in dlltrace_cli("cuda", "--trace", p, "--markdown").stdout
    doc = json.loads(dlltrace_cli("cuda", "--trace", p, "--json").stdout)
    assert doc["mismatches"][1]["text"].endswith(caveat), doc["mismatches"]
    # an NVIDIA GPU without its kernel driver: the CUDA libraries are a fix once the driver is installed
    gpu = dict(no_gpu, nvidia_gpus=["0000:01:00.0"])
    r = dlltrace_cli("cuda", "--trace", linux_trace(tmp_path, texts, dists, [], searched=["libcuda.so.1"], gpu=gpu))
    assert "pip install nvidia-cublas-cu12" in r.stdout and caveat not in r.stdout, r.stdout


def test_rule_build_facts_of_onnxruntime_and_cupy_from_their_own_files(tmp_path):
    """onnxruntime's build_and_package_info.py (cuda_version '12.2', the file every build has) and cupy's
    .data/_wheel.json ("cuda": "12.x") when no distribution name says it."""
    texts = {"onnxruntime_gpu": {"onnxruntime/capi/build_and_package_info.py":
                                 "package_name = 'onnxruntime-gpu'\n__version__ = '1.20.1'\ncuda_version = '12.2'\ncudnn_version = '9.1'\n"},
             "cupy": {"cupy/.data/_wheel.json": '{"cuda": "12.x", "packaging": "pip"}'}}
    dists = [("onnxruntime_gpu", "1.20.1", ["onnxruntime/capi/libonnxruntime_providers_cuda.so"]),
             ("cupy", "13.3.0", ["cupy/_core/core.cpython-311-x86_64-linux-gnu.so"])]
    t = cuda_table_of_trace(read_trace(linux_trace(tmp_path, texts, dists, [])))
    ort = next(f for f in t.frameworks if f.name == "onnxruntime-gpu")
    assert (ort.cuda, ort.cuda_major, ort.cudnn_major, ort.cuda_from) == \
        ("12.2", 12, 9, "onnxruntime/capi/build_and_package_info.py")
    cp = next(f for f in t.frameworks if f.name == "cupy")
    assert (cp.cuda_major, cp.cuda_from, cp.needs) == (12, "cupy/.data/_wheel.json", ("libcublas.so.12",))


def test_the_bootstrap_records_the_build_facts_files(tmp_path):
    """trace/shim.py installed_dists: a distribution's build-facts files (its RECORD lists them) recorded whole."""
    from dlltrace.trace import shim

    site = tmp_path / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "version.py").write_text("cuda = '12.4'\n")
    (site / "torch" / "other.py").write_text("x = 1\n")
    (site / "torch-2.5.1.dist-info").mkdir()
    (site / "torch-2.5.1.dist-info" / "RECORD").write_text(
        "torch/version.py,sha256=x,14\ntorch/other.py,sha256=y,6\ntorch/lib/libc10.so,sha256=z,1\n")
    (d,) = shim.installed_dists([str(site)])["dists"]
    assert d["texts"] == {"torch/version.py": "cuda = '12.4'\n"} and d["files"] == ["torch/lib/libc10.so"]


def test_cuda_of_a_damaged_trace_is_3_as_report_is(tmp_path, dlltrace_cli):
    """`cuda --trace` of a damaged trace (its last line cut) exited 0 where `report` exits 3 (issue 28, item 10):
    the table as far as the trace could be read, the damaged line named on stderr, exit 3."""
    texts = {"torch": {"torch/version.py": "__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\n"}}
    dists = [("torch", "2.5.1", ["torch/lib/libtorch_cuda.so"]),
             ("nvidia_cublas_cu12", "12.4.5.8", ["nvidia/cublas/lib/libcublas.so.12"]),
             ("nvidia_cuda_runtime_cu12", "12.4.127", ["nvidia/cuda_runtime/lib/libcudart.so.12"])]
    p = linux_trace(tmp_path, texts, dists, ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"], ld_library_path="")
    assert dlltrace_cli("cuda", "--trace", p).returncode == 0
    n = p.read_bytes().count(b"\n") + 1
    with open(p, "ab") as f:
        f.write(b'{"ev": "file", "pa')  # a last line cut short: a damaged trace
    assert dlltrace_cli("report", p).returncode == 3
    for fmt in ((), ("--json",), ("--markdown",)):
        r = dlltrace_cli("cuda", "--trace", p, *fmt)
        assert r.returncode == 3, (fmt, r)
        assert r.stderr == f"dlltrace: warning: {p}: line {n}: truncated last line ignored\n", r.stderr
        assert "2.5.1+cu124" in r.stdout  # the table, as far as the trace was read


def test_rule_mismatch_of_the_run():
    """The report shows the CUDA table only for a mismatch about the run (the field test under Wine: every report of
    an environment holding onnxruntime-gpu ended with its cuBLAS 13 ✗, an h5py import's too): a file of it the run
    opened (under its folder, or named as its DLL), or a failed load of it or of CUDA's."""
    from dlltrace.diagnosis.cuda import Mismatch, rule_mismatch_of_the_run as rule

    capi = "C:\\py\\Lib\\site-packages\\onnxruntime\\capi"
    m = Mismatch("cuda_major_missing", "error", "onnxruntime-gpu 1.31.1", needs_cuda="13", dll="cublasLt64_13.dll",
                 found=(capi,))
    h5 = ["C:\\py\\Lib\\site-packages\\h5py\\_errors.cp311-win_amd64.pyd", "C:\\Windows\\System32\\kernel32.dll"]
    assert not rule(m, h5, ["_errors.cp311-win_amd64.pyd", "hdf5.dll"])
    assert rule(m, [*h5, capi + "\\onnxruntime_providers_shared.dll"], [])  # (a file of its folder opened)
    assert rule(m, ["C:\\cuda\\bin\\cublasLt64_13.dll"], [])  # (its DLL, from anywhere)
    assert rule(m, h5, ["C:\\py\\x\\cublasLt64_13.dll"])  # (a failed load of its DLL)
    assert rule(m, h5, ["cudart64_12.dll"])  # (CUDA in play: a failed load of a CUDA library)
    assert not rule(m, ["C:\\py\\Lib\\site-packages\\onnxruntime_extra\\x.dll"], [])  # (another folder, same prefix)


def test_rule_imported_cpu_build():
    """The CPU-only builds of GPU frameworks the program imported (torch 2.13.0+cpu: torch/version.py cuda = None;
    TensorFlow without a cuda_version; paddlepaddle): a submodule's import counts, a CUDA build or a framework the
    program never imported does not."""
    def fw(name, cpu, version="1.0"):
        return C.Framework(name, version, "/site/" + name, None if cpu else "12.1", None if cpu else 12,
                           "torch/version.py" if name == "torch" else "", cpu)

    def table(*fws):
        return C.CudaTable("linux", "trace", None, (), (), (), fws, (), ())

    t = table(fw("torch", True, "2.13.0+cpu"), fw("tensorflow", True), fw("paddle", False), fw("cupy", False))
    assert C.rule_imported_cpu_build(t, ["numpy", "torch.nn"]) == [t.frameworks[0]]
    assert C.rule_imported_cpu_build(t, ["tensorflow", "torch", None]) == list(t.frameworks[:2])
    assert C.rule_imported_cpu_build(t, ["paddle", "cupy", "torchvision"]) == []  # (CUDA builds; another package)
    assert C.rule_imported_cpu_build(table(fw("torch", False)), ["torch"]) == []


def test_the_cpu_onnxruntime_package_is_a_cpu_build():
    """The onnxruntime distribution (not onnxruntime-gpu) has no CUDA execution provider: a CPU build in the table,
    which rule_imported_cpu_build takes when the program imported onnxruntime; onnxruntime-gpu is not one."""
    cpu = table(files=[{"path": SP + r"\onnxruntime\capi\onnxruntime.dll", "version": "1.19.2.0"}],
                folders=[SP + r"\onnxruntime-1.19.2.dist-info"])
    (fw,) = cpu.frameworks
    assert (fw.name, fw.version, fw.cpu_build, fw.cuda) == ("onnxruntime", "1.19.2", True, None), fw
    assert C.rule_imported_cpu_build(cpu, ["onnxruntime.capi._pybind_state"]) == [fw]
    assert cpu.mismatches == ()  # (nothing of it needs CUDA)
    gpu = table(files=ort(12), folders=[SP + r"\onnxruntime_gpu-1.20.1.dist-info"])
    assert [f.name for f in gpu.frameworks] == ["onnxruntime-gpu"]
    assert C.rule_imported_cpu_build(gpu, ["onnxruntime"]) == []


def test_jax_without_a_cuda_plugin_is_a_cpu_build():
    """jaxlib has no CUDA of its own: its CUDA build is a jax-cuda<M>-plugin distribution ('jax[cuda12]'). jax with
    jaxlib alone is a CPU build (taken by rule_imported_cpu_build when the program imported jax); with the plugin it
    is CUDA 12's; no jaxlib, no row."""
    cpu = table(folders=[SP + r"\jax-0.4.35.dist-info", SP + r"\jaxlib-0.4.35.dist-info"])
    (fw,) = cpu.frameworks
    assert (fw.name, fw.version, fw.cpu_build, fw.cuda_from) == ("jax", "0.4.35", True,
                                                                  "no jax-cuda plugin distribution"), fw
    assert C.rule_imported_cpu_build(cpu, ["jax.numpy"]) == [fw]
    gpu = table(folders=[SP + r"\jax-0.4.35.dist-info", SP + r"\jaxlib-0.4.35.dist-info",
                         SP + r"\jax_cuda12_plugin-0.4.35.dist-info", SP + r"\jax_cuda12_pjrt-0.4.35.dist-info"])
    (g,) = gpu.frameworks
    assert (g.cpu_build, g.cuda_major, g.cuda_from) == (False, 12, "the jax-cuda12-plugin distribution"), g
    assert C.rule_imported_cpu_build(gpu, ["jax"]) == []
    assert table(folders=[SP + r"\jax-0.4.35.dist-info"]).frameworks == ()


def test_dist_info_folders_of_a_windows_trace(tmp_path):
    """A Windows trace's frameworks read their distribution and version from the dist-info folders its py_dists lists
    (diagnosis/cuda.py dist_info_folders), as a Linux trace's do. The field test under Wine: tensorflow-intel 2.15.0
    (the Windows CPU-only build: its build_info.py has no cuda_version) was said to be "tensorflow is a CPU-only
    build", with no version and no file it was read from; the onnxruntime CPU package (no CUDA provider) was not seen
    at all, its distribution unknown to the trace's facts."""
    from dlltrace.render.cuda import cpu_build_dict, cpu_build_text, imported_cpu_builds

    hw = _writer()
    site = r"C:\Python311\Lib\site-packages"
    w = hw.Writer(EXE, r"C:\work", [SYS], [], [EXE, "-c", "import tensorflow, onnxruntime"])
    w.py_env("3.11.9", r"C:\Python311", site)
    info = "build_info = collections.OrderedDict([('is_cuda_build', False), ('msvcp_dll_names', 'msvcp140.dll')])\n"
    w.ev("py_dists", conda=[], conda_prefix=None, cut=False, dists=[
        {"name": "tensorflow_intel", "version": "2.15.0", "site": site, "loaders": [],
         "files": ["tensorflow/python/_pywrap_tensorflow_internal.pyd"],
         "texts": {"tensorflow/python/platform/build_info.py": info}},
        {"name": "tensorflow", "version": "2.15.0", "site": site, "files": [], "loaders": []},
        {"name": "onnxruntime", "version": "1.19.2", "site": site, "files": ["onnxruntime/capi/onnxruntime.dll"],
         "loaders": []}])
    w.ev("py_import", module="tensorflow")
    w.ev("py_import", module="onnxruntime")
    w.file(site + r"\onnxruntime\capi\onnxruntime.dll", version="1.19.2.0")
    w.write(tmp_path / "t.jsonl", exit_code=0)
    trace = read_trace(tmp_path / "t.jsonl")
    builds = imported_cpu_builds(trace)
    assert [cpu_build_dict(fw) for fw in builds] == [
        {"framework": "onnxruntime", "version": "1.19.2", "read_from": "its distribution, onnxruntime"},
        {"framework": "tensorflow", "version": "2.15.0", "read_from": "tensorflow/python/platform/build_info.py"}]
    assert "tensorflow 2.15.0 is a CPU-only build (tensorflow/python/platform/build_info.py says it has no CUDA)" \
        in cpu_build_text(builds, trace.header.platform), cpu_build_text(builds, trace.header.platform)
