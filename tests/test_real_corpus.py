"""The second oracle: REAL Windows wheels (torch, onnxruntime-gpu, ctranslate2, nvidia-cuda-runtime)
unpacked into site-packages layouts on the Wine prefix and loaded under Wine.

Each situation lays out the DLLs it needs (tests/realwheels.py: pinned wheels from pip, cached
outside the repository, members unpacked once and hard-linked), sometimes with a mingw-built
stand-in (a 32-bit copy, a stale copy without the exports, a DllMain returning FALSE, a package's
own extension importing cudart64_12.dll), and runs fixtures/host/loadhost.c's ops twice:
1. under plain wine64 with WINEDEBUG=+loaddll,+module: Wine's log is the truth (which loads fail,
   the error each gives, every "Library X (which is needed by Y) not found", the file each DLL was
   mapped from);
2. under `dlltrace run --wine`, then `dlltrace report --json`: dlltrace's verdict must agree on all
   of those (realwheels.compare says which field differs, Wine's value and dlltrace's).

The run prints `real-binary corpus: N situations, M agree with Wine` once at the end, with the
time taken. In CI (CI=true) nothing skips; locally the corpus skips, saying why, only when a wheel
can neither be found in the cache nor downloaded. DLLTRACE_CORPUS_KEEP=1 keeps the layouts
(C:\\dtc\\<nonce>\\<situation>) on the prefix; DLLTRACE_CORPUS_JOBS (default 2) situations run at a time.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import string
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import realwheels as rw
import winetools
from dlltrace.diagnosis.collect import trim_trace_bytes

JOBS = int(os.environ.get("DLLTRACE_CORPUS_JOBS", "2"))
NONCE = "".join(secrets.choice(string.ascii_lowercase) for _ in range(4))
BASE_UNIX = "dtc"  # C:\dtc\<nonce>\<situation> on the prefix's drive_c
SP = "Lib/site-packages"
TORCH_LIB = ("c10", "fbgemm", "asmjit", "libiomp5md", "uv", "torch_cpu")
CUDART = f"{SP}/nvidia/cuda_runtime/bin/cudart64_12.dll"
ORT = f"{SP}/onnxruntime/capi"
CT2 = f"{SP}/ctranslate2"


def torch_lib(*names: str, without: tuple = ()) -> dict:
    """torch\\lib DLLs of the torch wheel (TORCH_LIB by default), minus `without`."""
    return {f"{SP}/torch/lib/{n}.dll": ("wheel", "torch", f"torch/lib/{n}.dll")
            for n in (names or TORCH_LIB) if n not in without}


def wheel(key: str, member: str, dest: str | None = None) -> dict:
    return {dest or f"{SP}/{member}": ("wheel", key, member)}


def fixture(name: str, dest: str) -> dict:
    return {dest: ("fixture", name)}


def ct2_files() -> dict:
    return {**wheel("ctranslate2", "ctranslate2/ctranslate2.dll"), **wheel("ctranslate2", "ctranslate2/libiomp5md.dll")}


@dataclass(frozen=True)
class Situation:
    name: str
    what: str  # what it checks
    files: dict  # path under the situation folder -> ("wheel", key, member) | ("fixture", name) | ("truncated", key, member, n)
    ops: tuple  # loadhost arguments; {R} = the situation folder, {SP} its site-packages, {T} torch\lib
    loads_fine: bool  # every load succeeds for real: the report must show no failed call
    wine_errors: tuple  # the host's result for each op under Wine (checks the layout is what `what` says)


S = Situation
SITUATIONS = [
    # ---- loads fine for real
    S("torch_cpu_adddir", "torch_cpu.dll (250 MB) with 0x1100 after AddDllDirectory(torch\\lib), as torch's __init__ does",
      torch_lib(), ("adddir", "{T}", "load", "{T}\\torch_cpu.dll", "0x1100"), True, (0, 0)),
    S("c10_full_path", "c10.dll by full path with 0x1100 (MSVC runtime and api-ms-win-crt-* imports only)",
      torch_lib("c10"), ("load", "{T}\\c10.dll", "0x1100"), True, (0,)),
    S("torch_shm_dll_load_dir", "shm.dll -> torch_cpu.dll -> c10/fbgemm/asmjit/libiomp5md/uv, all found through DLL_LOAD_DIR",
      {**torch_lib(), **wheel("torch", "torch/lib/shm.dll")}, ("load", "{T}\\shm.dll", "0x1100"), True, (0,)),
    S("onnxruntime_dll", "onnxruntime.dll with 0x1100 (dxgi, setupapi, dbghelp, MSVCP140_1, api-ms-win-core-path)",
      wheel("onnxruntime", "onnxruntime/capi/onnxruntime.dll"), ("load", "{SP}\\onnxruntime\\capi\\onnxruntime.dll", "0x1100"),
      True, (0,)),
    S("onnxruntime_providers_shared", "onnxruntime_providers_shared.dll with 0x1100",
      wheel("onnxruntime", "onnxruntime/capi/onnxruntime_providers_shared.dll"),
      ("load", "{SP}\\onnxruntime\\capi\\onnxruntime_providers_shared.dll", "0x1100"), True, (0,)),
    S("ctranslate2_dll", "ctranslate2.dll with 0x1100, its own libiomp5md.dll next to it",
      ct2_files(), ("load", "{SP}\\ctranslate2\\ctranslate2.dll", "0x1100"), True, (0,)),
    S("cudart12_full_path", "cudart64_12.dll from the nvidia-cuda-runtime-cu12 wheel by full path (api-ms-win-core-* imports)",
      wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll"),
      ("load", "{SP}\\nvidia\\cuda_runtime\\bin\\cudart64_12.dll", "0"), True, (0,)),
    S("torch_lib_on_path_loadw", "LoadLibraryW(torch_cpu.dll) by bare name with torch\\lib on PATH (the standard order reaches PATH)",
      torch_lib(), ("setenv", "PATH", "C:\\windows\\system32;C:\\windows;{T}", "loadw", "torch_cpu.dll"), True, (0, 0)),
    S("setdlldir_c10", "SetDllDirectoryW(torch\\lib), then LoadLibraryW(c10.dll)",
      torch_lib("c10"), ("setdlldir", "{T}", "loadw", "c10.dll"), True, (0, 0)),
    S("cuda_ext_after_adddir", "a package DLL importing cudart64_12.dll, after AddDllDirectory(site-packages\\nvidia\\cuda_runtime\\bin)",
      {**fixture("usecuda", f"{SP}/mypkg/usecuda.dll"), **wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll")},
      ("adddir", "{SP}\\nvidia\\cuda_runtime\\bin", "load", "{SP}\\mypkg\\usecuda.dll", "0x1100"), True, (0, 0)),
    S("x86_omp_ahead_of_x64", "a 32-bit libiomp5md.dll in the first AddDllDirectory folder searched, the 64-bit one in the next: "
      "fbgemm.dll loads (Wine skips the other machine's image and goes on searching)",
      {**torch_lib("fbgemm", "asmjit"), **fixture("plain32", "x86/libiomp5md.dll"),
       **wheel("torch", "torch/lib/libiomp5md.dll", "omp64/libiomp5md.dll")},
      ("adddir", "{R}\\omp64", "adddir", "{R}\\x86", "load", "{T}\\fbgemm.dll", "0x1100"), True, (0, 0, 0)),
    S("ct2_binds_torch_omp", "torch's libiomp5md.dll loaded first; ctranslate2.dll (its own copy next to it) binds to the loaded one",
      {**torch_lib("libiomp5md"), **ct2_files()},
      ("load", "{T}\\libiomp5md.dll", "0x1100", "load", "{SP}\\ctranslate2\\ctranslate2.dll", "0x1100"), True, (0, 0)),
    # ---- fails, each in its own way
    S("torch_without_libiomp5md", "libiomp5md.dll deleted from torch\\lib: needed by fbgemm.dll and by torch_cpu.dll",
      torch_lib(without=("libiomp5md",)), ("adddir", "{T}", "load", "{T}\\torch_cpu.dll", "0x1100"), False, (0, 126)),
    S("torch_without_asmjit", "asmjit.dll deleted: missing two levels down (torch_cpu.dll -> fbgemm.dll -> asmjit.dll)",
      torch_lib(without=("asmjit",)), ("load", "{T}\\torch_cpu.dll", "0x1100"), False, (126,)),
    S("torch_C_needs_python311", "torch\\_C.pyd -> torch_python.dll -> python311.dll, which no folder searched has (no Python here)",
      {**torch_lib(), **wheel("torch", "torch/lib/torch_python.dll"), **wheel("torch", "torch/lib/shm.dll"),
       **wheel("torch", "torch/_C.cp311-win_amd64.pyd")},
      ("adddir", "{T}", "load", "{SP}\\torch\\_C.cp311-win_amd64.pyd", "0x1100"), False, (0, 126)),
    S("ct2_ext_needs_python311", "ctranslate2\\_ext.pyd: ctranslate2.dll is found next to it, python311.dll is not",
      {**ct2_files(), **wheel("ctranslate2", "ctranslate2/_ext.cp311-win_amd64.pyd")},
      ("load", "{SP}\\ctranslate2\\_ext.cp311-win_amd64.pyd", "0x1100"), False, (126,)),
    S("ort_tensorrt_provider_without_cuda", "onnxruntime_providers_tensorrt.dll: cublas64_13, nvinfer_10, nvonnxparser_10, "
      "cudnn64_9 all missing (the loader goes on after the first); providers_shared found",
      {**wheel("onnxruntime", "onnxruntime/capi/onnxruntime_providers_tensorrt.dll"),
       **wheel("onnxruntime", "onnxruntime/capi/onnxruntime_providers_shared.dll")},
      ("load", "{SP}\\onnxruntime\\capi\\onnxruntime_providers_tensorrt.dll", "0x1100"), False, (126,)),
    S("x86_omp_only_copy_searched", "torch\\lib's libiomp5md.dll is a 32-bit build; the 64-bit one is only on PATH, "
      "which 0x1100 does not search",
      {**torch_lib("fbgemm", "asmjit"), **fixture("plain32", f"{SP}/torch/lib/libiomp5md.dll"),
       **wheel("torch", "torch/lib/libiomp5md.dll", "omp64/libiomp5md.dll")},
      ("setenv", "PATH", "C:\\windows\\system32;C:\\windows;{R}\\omp64", "load", "{T}\\fbgemm.dll", "0x1100"), False, (0, 126)),
    S("x86_c10_full_path", "a 32-bit c10.dll loaded by full path: 193",
      fixture("plain32", f"{SP}/torch/lib/c10.dll"), ("load", "{T}\\c10.dll", "0x1100"), False, (193,)),
    S("stale_asmjit_loaded_first", "a stale mingw asmjit.dll without the exports is loaded first; fbgemm.dll binds to it "
      "(Wine binds the missing imports to stubs) and GetProcAddress of a real asmjit export fails",
      {**torch_lib("fbgemm", "libiomp5md"), **fixture("plain64", "stale/asmjit.dll")},
      ("load", "{R}\\stale\\asmjit.dll", "0", "load", "{T}\\fbgemm.dll", "0x1100",
       "proc", "asmjit.dll", "?finalize@FuncFrame@_abi_1_9@asmjit@@QEAAIXZ"), False, (0, 0, 127)),
    S("cuda_ext_not_searched", "a package DLL importing cudart64_12.dll, which the nvidia wheel put in "
      "site-packages\\nvidia\\cuda_runtime\\bin: not searched with 0x1100",
      {**fixture("usecuda", f"{SP}/mypkg/usecuda.dll"), **wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll")},
      ("load", "{SP}\\mypkg\\usecuda.dll", "0x1100"), False, (126,)),
    S("cuda_bin_on_path_then_loadw", "the nvidia bin folder on PATH: 0x1100 still fails (PATH is not searched); "
      "the retry with LoadLibraryW (torch's pattern) finds cudart64_12.dll on PATH",
      {**fixture("usecuda", f"{SP}/mypkg/usecuda.dll"), **wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll")},
      ("setenv", "PATH", "C:\\windows\\system32;C:\\windows;{SP}\\nvidia\\cuda_runtime\\bin",
       "load", "{SP}\\mypkg\\usecuda.dll", "0x1100", "loadw", "{SP}\\mypkg\\usecuda.dll"), False, (0, 126, 0)),
    S("cudart_loads_nvcuda_at_run_time", "cudaGetDeviceCount: cudart64_12.dll's own LoadLibraryExA(nvcuda.dll, SYSTEM32) fails",
      wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll"),
      ("load", "{SP}\\nvidia\\cuda_runtime\\bin\\cudart64_12.dll", "0", "call", "cudart64_12.dll", "cudaGetDeviceCount"),
      False, (0, 0)),
    S("ct2_gpu_count_loads_nvcuda", "ctranslate2::get_gpu_count(): ctranslate2.dll's statically linked CUDA runtime "
      "loads nvcuda.dll at run time, which is not there",
      ct2_files(), ("load", "{SP}\\ctranslate2\\ctranslate2.dll", "0x1100",
                    "call", "ctranslate2.dll", "?get_gpu_count@ctranslate2@@YAHXZ"), False, (0, 0)),
    S("ort_cuda_provider_at_run_time", "OrtSessionOptionsAppendExecutionProvider_CUDA: onnxruntime.dll loads "
      "onnxruntime_providers_shared.dll (there) and then onnxruntime_providers_cuda.dll (not installed) at run time",
      {**wheel("onnxruntime", "onnxruntime/capi/onnxruntime.dll"),
       **wheel("onnxruntime", "onnxruntime/capi/onnxruntime_providers_shared.dll")},
      ("load", "{SP}\\onnxruntime\\capi\\onnxruntime.dll", "0x1100",
       "call", "onnxruntime.dll", "OrtSessionOptionsAppendExecutionProvider_CUDA"), False, (0, 0)),
    S("dllmain_false_next_to_torch", "a DLL in torch\\lib importing torch's libiomp5md.dll, whose DllMain returns FALSE: 1114",
      {**torch_lib("libiomp5md"), **fixture("ompinitfail", f"{SP}/torch/lib/ompinit.dll")},
      ("load", "{T}\\ompinit.dll", "0x1100"), False, (1114,)),
    S("asmjit_dllmain_false", "torch\\lib's asmjit.dll replaced by a mingw DLL whose DllMain returns FALSE: fbgemm.dll fails with 1114",
      {**torch_lib("fbgemm", "libiomp5md"), **fixture("initfail", f"{SP}/torch/lib/asmjit.dll")},
      ("load", "{T}\\fbgemm.dll", "0x1100"), False, (1114,)),
    S("truncated_c10", "c10.dll cut to its first 64 KB (a broken unpack): torch_cpu.dll cannot load it",
      {**torch_lib(without=("c10",)), f"{SP}/torch/lib/c10.dll": ("truncated", "torch", "torch/lib/c10.dll", 65536)},
      ("load", "{T}\\torch_cpu.dll", "0x1100"), False, (126,)),
    S("default_dirs_without_dll_load_dir", "SetDefaultDllDirectories(DEFAULT_DIRS) then torch_cpu.dll by full path with flags 0: "
      "torch\\lib is not searched for c10.dll and the rest",
      torch_lib(), ("setdefault", "0x1000", "load", "{T}\\torch_cpu.dll", "0"), False, (0, 126)),
    S("dll_load_dir_with_bare_name", "LoadLibraryExW(c10.dll, DLL_LOAD_DIR) with a bare name: 87",
      torch_lib("c10"), ("load", "c10.dll", "0x100"), False, (87,)),
    # ---- failing situations made after real reports, whose first fix tests/test_real_fixes.py applies
    S("torch_omp_in_library_bin", "libiomp5md.dll not in torch\\lib but where pip's intel-openmp puts it, "
      "<prefix>\\Library\\bin, which AddDllDirectory(torch\\lib) + 0x1100 does not search",
      {**torch_lib(without=("libiomp5md",)), **wheel("intel_openmp", rw.IOMP_MEMBER, "Library/bin/libiomp5md.dll")},
      ("adddir", "{T}", "load", "{T}\\torch_cpu.dll", "0x1100"), False, (0, 126)),
    S("cudart_loadlibrary_at_run_time", "a package DLL's own LoadLibraryA(cudart64_12.dll) at run time (flags 0, "
      "the standard order): the nvidia wheel's bin folder is neither on PATH nor next to anything searched",
      {**fixture("loadcuda", f"{SP}/mypkg/loadcuda.dll"), **wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll")},
      ("load", "{SP}\\mypkg\\loadcuda.dll", "0x1100", "callerr", "loadcuda.dll", "loadcuda_now"), False, (0, 126)),
    S("cuda_bin_on_path_0x1100", "the nvidia bin folder on PATH, and a package DLL importing cudart64_12.dll "
      "loaded with 0x1100, which does not search PATH (no retry)",
      {**fixture("usecuda", f"{SP}/mypkg/usecuda.dll"), **wheel("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll")},
      ("setenv", "PATH", "C:\\windows\\system32;C:\\windows;{SP}\\nvidia\\cuda_runtime\\bin",
       "load", "{SP}\\mypkg\\usecuda.dll", "0x1100"), False, (0, 126)),
]

MIN_SITUATIONS, MIN_FINE, MIN_FAILING = 20, 5, 10


# ----------------------------------------------------------------------------- running a situation
@dataclass
class Outcome:
    name: str
    harness: list = field(default_factory=list)  # problems running it (not a verdict)
    diffs: list = field(default_factory=list)  # Wine vs dlltrace
    wine_errors: tuple = ()
    wine: rw.Facts | None = None
    ours: rw.Facts | None = None
    report_failed: list = field(default_factory=list)  # indexes of the report's failed calls
    seconds: dict = field(default_factory=dict)
    # the run itself, for tests/test_real_fixes.py (which applies a fix and runs it again)
    argv: list = field(default_factory=list)  # loadhost's argv as run (Windows paths)
    root_win: str = ""  # the situation's folder, as Windows saw it (C:\\dtc\\<nonce>\\<name>)
    log: rw.WineLog | None = None  # plain Wine's log
    report: dict | None = None  # `dlltrace report --json --all`
    full_report: dict | None = None  # the same, of the run's full trace (every export kept: t.full.jsonl)

    @property
    def agrees(self) -> bool:
        return not self.harness and not self.diffs


def _win(root_win: str, arg: str) -> str:
    return arg.format(R=root_win, SP=root_win + "\\Lib\\site-packages", T=root_win + "\\Lib\\site-packages\\torch\\lib")


def lay_out(sit: Situation, folder: Path, built: dict) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rw.place(built["loadhost"], folder / "loadhost.exe")
    for rel, src in sit.files.items():
        dest = folder / rel
        if src[0] == "wheel":
            rw.place(rw.wheel_member(rw.WHEELS[src[1]], src[2]), dest)
        elif src[0] == "fixture":
            rw.place(built[src[1]], dest)
        elif src[0] == "truncated":
            data = rw.wheel_member(rw.WHEELS[src[1]], src[2]).open("rb").read(src[3])
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        else:
            raise ValueError(src)


ARITY = {"load": 2, "loadw": 1, "loada": 1, "loadgpa": 2, "adddir": 1, "removedir": 0, "setdlldir": 1,
         "setdlldira": 1, "setdefault": 1, "free": 0, "setenv": 2, "pathprepend": 1, "proc": 2, "call": 2,
         "callerr": 2}


def host_ops(argv: list) -> list:
    """[(argv index, op, its first operand)] of every host op (argv[0] is the host), as the host
    frames them with its marks."""
    out, i = [], 1
    while i < len(argv):
        out.append((i, argv[i], argv[i + 1] if ARITY[argv[i]] else None))
        i += 1 + ARITY[argv[i]]
    return out


def host_lines(stdout: str) -> list:
    """The host's result lines; a call's return value is left out (it may be a pointer, e.g. an OrtStatus*)."""
    return [re.sub(r"^call ok ret -?\d+$", "call ok", ln) for ln in stdout.replace("\r\n", "\n").splitlines()]


def run_plain_wine(argv: list):
    """loadhost under plain wine64, its ops framed on stderr among Wine's +loaddll,+module lines."""
    return winetools.run_captured([winetools.wine_binary(), *argv], timeout=300, text=True,
                                  env=winetools.wine_env(WINEDEBUG="+loaddll,+module", LOADHOST_MARKS="1"))


def run_situation(sit: Situation, base: Path, built: dict, work: Path) -> Outcome:
    out = Outcome(sit.name)
    folder = base / sit.name
    t0 = time.monotonic()
    lay_out(sit, folder, built)
    root_win = winetools.to_windows(folder)
    argv = [root_win + "\\loadhost.exe", *(_win(root_win, a) for a in sit.ops)]
    out.argv, out.root_win = argv, root_win
    t1 = time.monotonic()
    # 1. plain Wine, its log
    r = run_plain_wine(argv)
    work.mkdir(parents=True, exist_ok=True)
    (work / "wine.log").write_text(r.stderr)  # kept in pytest's tmp folder for a look after a failure
    log = out.log = rw.parse_wine_log(r.stderr)
    out.wine_errors = tuple(o.err for o in log.ops)
    results = host_lines(r.stdout)
    if [o.index for o in log.ops] != [i for i, _, _ in host_ops(argv)] or any(o.err is None for o in log.ops):
        out.harness.append(f"wine: the host did not finish every op (rc={r.returncode}); stdout {results}; "
                           f"stderr tail: {r.stderr[-1500:]}")
    t2 = time.monotonic()
    # 2. dlltrace run --wine, then report --json. The run keeps every export (t.full.jsonl);
    # t.jsonl is it trimmed as `dlltrace run` trims by default (collect.trim_trace_bytes), and the
    # verdict is read from t.jsonl (tests/test_trace_trim.py compares both reports)
    trace, full = work / "t.jsonl", work / "t.full.jsonl"
    d = winetools.dlltrace("run", "--wine", "-o", str(full), "--", *argv, cwd=work, LOADHOST_MARKS="1",
                           DLLTRACE_KEEP_ALL_EXPORTS="1")
    if "Traceback" in d.stderr or not full.is_file():
        out.harness.append(f"dlltrace run failed (exit {d.returncode}): {d.stderr[-2000:]}")
    else:
        trace.write_bytes(trim_trace_bytes(full.read_bytes()))
        # the default size cap (run --max-size, 1G) keeps a real run whole: nothing dropped
        if b'{"ev":"capped"' in full.read_bytes():
            out.harness.append("the default --max-size cap dropped lines of this real run")
    if host_lines(d.stdout) != results:
        out.harness.append(f"dlltrace run: the host printed {d.stdout.splitlines()}, under plain Wine {results}; "
                           f"stderr tail: {d.stderr[-1500:]}")
    rep = winetools.dlltrace("report", str(trace), "--json", "--all", cwd=work)
    (work / "report.json").write_text(rep.stdout)
    t3 = time.monotonic()
    out.seconds = {"layout": t1 - t0, "wine": t2 - t1, "dlltrace": t3 - t2}
    try:
        report = json.loads(rep.stdout)
    except ValueError:
        out.harness.append(f"dlltrace report --json (exit {rep.returncode}) gave no JSON: {rep.stderr[-2000:]}")
        return out
    out.report = report
    if rep.returncode != 0:
        out.harness.append(f"dlltrace report exited {rep.returncode}: {rep.stderr[-1000:]}")
    rep_full = winetools.dlltrace("report", str(full), "--json", "--all", cwd=work)
    try:
        out.full_report = json.loads(rep_full.stdout)
    except ValueError:
        out.harness.append(f"dlltrace report --json of the full trace (exit {rep_full.returncode}) gave no JSON")
    out.wine = rw.wine_facts(log, argv)
    loads = [op for op in host_ops(argv) if op[1] in rw.LOAD_OPS]
    out.ours, problems = rw.report_facts(report, loads)
    out.ours.trace_paths = rw.trace_host_paths(trace)
    if len(out.ours.trace_paths) != len(loads):
        problems.append(f"the trace has {len(out.ours.trace_paths)} top-level loads by the host, the host made {len(loads)}")
    out.report_failed = list(report.get("failed") or [])
    out.diffs = problems + rw.compare(out.wine, out.ours, root=root_win.lower() + "\\")
    # the layout does what the situation says, by Wine's own account (else a harness problem)
    wine_fine = not out.wine.failed and not any(out.wine_errors)
    if out.wine_errors != sit.wine_errors or wine_fine != sit.loads_fine:
        out.harness.append(f"the situation is not what it says: Wine's host results {out.wine_errors}, expected "
                           f"{sit.wine_errors}; Wine loads everything: {wine_fine}")
    # the verdict: no failure where everything loads; where a host load failed and was not loaded
    # afterwards, the report names a failure the program hit (the host exits with its error)
    if sit.loads_fine and (out.report_failed or report.get("went_on")):
        out.diffs.insert(0, f"the report shows failed calls {out.report_failed} (went on: {report.get('went_on')}) "
                            "where Wine loaded everything")
    unretried = [(i, n) for k, (i, n, e) in enumerate(out.wine.host_errors) if e
                 and not any(not e2 and rw.base(n2) == rw.base(n) for _, n2, e2 in out.wine.host_errors[k + 1:])]
    if not sit.loads_fine and unretried and not out.report_failed:
        out.diffs.insert(0, f"the host's load(s) {unretried} failed and were not loaded afterwards, but the report "
                            "names no failure the program hit")
    return out


# ----------------------------------------------------------------------------- the corpus, once a session
class CorpusRuns:
    """What running situations needs (wheels, the shim, the fixture DLLs, the base folder), prepared
    once a session, and each situation's Outcome once it ran: tests/test_real_fixes.py reuses the
    runs (reports, Wine's logs) of the failing situations it applies fixes to, whichever module runs first."""

    def __init__(self, built: dict, base: Path, work: Path, unpack: float):
        self.built, self.base, self.work, self.unpack = built, base, work, unpack
        self.outcomes: dict = {}
        self._lock = threading.Lock()

    def run(self, sits: list) -> dict:
        """{name: Outcome} of sits, running (JOBS at a time) those not run yet this session. Each
        situation's layout is removed once it ran (DLLTRACE_CORPUS_KEEP=1 keeps it)."""
        with self._lock:
            todo = [s for s in sits if s.name not in self.outcomes]

            def one(sit: Situation) -> Outcome:
                try:
                    return run_situation(sit, self.base, self.built, self.work / sit.name)
                finally:
                    if not os.environ.get("DLLTRACE_CORPUS_KEEP"):
                        shutil.rmtree(self.base / sit.name, ignore_errors=True)

            with ThreadPoolExecutor(max_workers=max(1, JOBS)) as ex:
                for o in ex.map(one, todo):
                    self.outcomes[o.name] = o
            return {s.name: self.outcomes[s.name] for s in sits}


_RUNS: dict = {}  # "runs": the session's CorpusRuns; "skip": why the corpus cannot run here


def corpus_runs(tmp_path_factory) -> CorpusRuns:
    """The session's CorpusRuns (prepared on first use). Skips (fails in CI) without the wheels."""
    if "skip" in _RUNS:
        pytest.skip(_RUNS["skip"])
    if "runs" in _RUNS:
        return _RUNS["runs"]
    winetools.require("wine", "mingw64", "mingw32")
    missing = []
    for w in rw.WHEELS.values():
        try:
            rw.fetch_wheel(w)
        except rw.WheelUnavailable as e:
            missing.append(str(e))
    if missing:
        msg = "real wheels unavailable (no cache in " + str(rw.WHEEL_DIR) + "): " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(msg)
        _RUNS["skip"] = msg
        pytest.skip(msg)
    t0 = time.monotonic()
    for sit in SITUATIONS:  # unpack what the layouts need (once: the members are cached)
        for src in sit.files.values():
            if src[0] in ("wheel", "truncated"):
                rw.wheel_member(rw.WHEELS[src[1]], src[2])
    t_unpack = time.monotonic() - t0
    from test_shim import build_shim  # native/build.sh when the shim is missing or older than its sources

    build_shim()
    built = rw.build_fixtures()
    drive_c = winetools.drive_c()
    _remove_stale(drive_c / BASE_UNIX)
    _RUNS["runs"] = CorpusRuns(built, drive_c / BASE_UNIX / NONCE, tmp_path_factory.mktemp("real-corpus"), t_unpack)
    return _RUNS["runs"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, wine_prefix, summary):
    runs = corpus_runs(tmp_path_factory)
    t0 = time.monotonic()
    result = runs.run(SITUATIONS)
    if not os.environ.get("DLLTRACE_CORPUS_KEEP"):
        try:
            runs.base.rmdir()  # empty once every layout is removed
        except OSError:
            pass
    summary["real-binary corpus"] = summary_line(result, time.monotonic() - t0 + runs.unpack, runs.unpack)
    return result


def _remove_stale(parent: Path, age: float = 6 * 3600) -> None:
    """Layouts a killed run left behind (other nonces, older than `age`)."""
    if not parent.is_dir():
        return
    for d in parent.iterdir():
        try:
            if d.name != NONCE and time.time() - d.stat().st_mtime > age:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def summary_line(outcomes: dict, seconds: float, unpack: float) -> str:
    """outcomes: every situation the corpus fixture ran (all of them, whatever -k selects)."""
    agree = sum(o.agrees for o in outcomes.values())
    return (f"real-binary corpus: {len(outcomes)} situations, {agree} agree with Wine "
            f"({seconds:.0f} s in all, {unpack:.0f} s of it unpacking wheels; {JOBS} at a time)")


# ----------------------------------------------------------------------------- the tests
def _explain(sit: Situation, o: Outcome) -> str:
    lines = [f"{sit.name}: {sit.what}", f"  ops: {' '.join(sit.ops)}"]
    if o.wine:
        lines.append(f"  wine: failed {o.wine.failed}, missing {sorted(o.wine.missing, key=str)}, "
                     f"broken {sorted(o.wine.broken, key=str)}")
    if o.ours:
        lines.append(f"  dlltrace: failed {o.ours.failed}, missing {sorted(o.ours.missing, key=str)}, "
                     f"broken {sorted(o.ours.broken, key=str)}")
    return "\n".join(lines)


@pytest.mark.wine
@pytest.mark.parametrize("sit", SITUATIONS, ids=[s.name for s in SITUATIONS])
def test_situation_agrees_with_wine(sit, corpus):
    o = corpus[sit.name]  # the summary line's "agree" is exactly this test passing (Outcome.agrees)
    if o.harness:
        pytest.fail("harness problem (not a verdict):\n" + "\n".join(o.harness) + "\n" + _explain(sit, o),
                    pytrace=False)
    if o.diffs:
        pytest.fail("dlltrace disagrees with Wine:\n  " + "\n  ".join(o.diffs) + "\n" + _explain(sit, o), pytrace=False)


@pytest.mark.wine
def test_corpus_size_and_summary(corpus, summary):
    fine = [s for s in SITUATIONS if s.loads_fine]
    assert len(SITUATIONS) >= MIN_SITUATIONS and len(fine) >= MIN_FINE and len(SITUATIONS) - len(fine) >= MIN_FAILING
    assert len({s.name for s in SITUATIONS}) == len(SITUATIONS)
    for sit in SITUATIONS:
        o = corpus[sit.name]
        print(f"{o.name}: {'agree' if o.agrees else 'DISAGREE'} (layout {o.seconds.get('layout', 0):.1f} s, "
              f"wine {o.seconds.get('wine', 0):.1f} s, dlltrace {o.seconds.get('dlltrace', 0):.1f} s)")
        if o.wine:
            print(f"    wine: host {o.wine_errors}, failed {o.wine.failed}, missing {sorted(o.wine.missing, key=str)}, "
                  f"broken {sorted(o.wine.broken, key=str)}, {len(o.wine.op_mapped)} files mapped")
        for d in o.harness + o.diffs:
            print(f"    - {d}")
    print(summary["real-binary corpus"])


# ----------------------------------------------------------------------------- the log parser
LOG = r"""
02fc:trace:loaddll:build_module Loaded L"C:\\dtc\\x\\s\\loadhost.exe" at 0000000140000000: native
02fc:trace:loaddll:build_module Loaded L"C:\\windows\\system32\\kernel32.dll" at 000000007B600000: builtin
loadhost: op 1 load
02fc:trace:module:build_import_name found L"ucrtbase.dll" for L"api-ms-win-crt-runtime-l1-1-0.dll"
02fc:trace:loaddll:build_module Loaded L"C:\\dtc\\x\\s\\lib\\c10.dll" at 00000000010A0000: native
02fc:trace:module:open_dll_file L"\\??\\C:\\dtc\\x\\s\\x86\\asmjit.dll" is for arch 14c, continuing search
02fc:trace:loaddll:build_module Loaded L"C:\\dtc\\x\\s\\lib\\asmjit.dll" at 00000000017A0000: native
02fc:warn:module:load_dll Failed to load module L"libiomp5md.dll"; status=c0000135
02fc:err:module:import_dll Library libiomp5md.dll (which is needed by L"C:\\dtc\\x\\s\\lib\\fbgemm.dll") not found
02fc:warn:module:load_dll Failed to load module L"fbgemm.dll"; status=c0000135
02fc:err:module:import_dll Library fbgemm.dll (which is needed by L"C:\\dtc\\x\\s\\lib\\torch_cpu.dll") not found
02fc:warn:module:load_dll Failed to load module L"libiomp5md.dll"; status=c0000135
02fc:err:module:import_dll Library libiomp5md.dll (which is needed by L"C:\\dtc\\x\\s\\lib\\torch_cpu.dll") not found
02fc:warn:module:load_dll Failed to load module L"C:\\dtc\\x\\s\\lib\\torch_cpu.dll"; status=c0000135
loadhost: end 1 err 126 path -
loadhost: op 4 load
02fc:trace:loaddll:build_module Loaded L"C:\\dtc\\x\\s\\cu\\cudart64_12.dll" at 0000000001AC0000: native
loadhost: end 4 err 0 path C:\dtc\x\s\cu\cudart64_12.dll
loadhost: op 7 call
02fc:warn:module:load_dll Failed to load module L"nvcuda.dll"; status=c0000135
loadhost: end 7 err 0 path -
loadhost: op 10 load
02fc:warn:module:load_dll Failed to load module L"libiomp5md.dll"; status=c000007b
02fc:err:module:import_dll Loading library libiomp5md.dll (which is needed by L"C:\\dtc\\x\\s\\lib\\fbgemm.dll") failed (error c000007b).
02fc:warn:module:import_dll No implementation for asmjit.dll.?finalize@FuncFrame@@QEAAIXZ imported from L"C:\\dtc\\x\\s\\lib\\fbgemm.dll", setting to 00000000010A0048
02fc:warn:module:load_dll Failed to load module L"C:\\dtc\\x\\s\\lib\\fbgemm.dll"; status=c0000135
loadhost: end 10 err 126 path -
loadhost: op 13 load
02fc:warn:module:process_attach Initialization of L"ompinit.dll" failed
02fc:trace:module:free_modref  unloading L"C:\\dtc\\x\\s\\lib\\ompinit.dll"
02fc:warn:module:load_dll Failed to load module L"C:\\dtc\\x\\s\\lib\\ompinit.dll"; status=c0000142
loadhost: end 13 err 1114 path -
"""


def test_parse_wine_log():
    log = rw.parse_wine_log(LOG)
    assert log.before == ["C:\\dtc\\x\\s\\loadhost.exe", "C:\\windows\\system32\\kernel32.dll"]
    assert [(o.index, o.op, o.err) for o in log.ops] == [(1, "load", 126), (4, "load", 0), (7, "call", 0),
                                                        (10, "load", 126), (13, "load", 1114)]
    first = log.ops[0]
    assert first.mapped == ["C:\\dtc\\x\\s\\lib\\c10.dll", "C:\\dtc\\x\\s\\lib\\asmjit.dll"]
    assert first.not_found == [("libiomp5md.dll", "C:\\dtc\\x\\s\\lib\\fbgemm.dll"),
                               ("fbgemm.dll", "C:\\dtc\\x\\s\\lib\\torch_cpu.dll"),
                               ("libiomp5md.dll", "C:\\dtc\\x\\s\\lib\\torch_cpu.dll")]
    assert first.apisets == {"api-ms-win-crt-runtime-l1-1-0.dll": "ucrtbase.dll"}
    assert first.arch_skipped == ["C:\\dtc\\x\\s\\x86\\asmjit.dll"]
    assert first.path is None and log.ops[1].path == "C:\\dtc\\x\\s\\cu\\cudart64_12.dll"
    assert log.ops[3].import_failed == [("libiomp5md.dll", "C:\\dtc\\x\\s\\lib\\fbgemm.dll", 0xC000007B)]
    assert log.ops[3].stubs == [("asmjit.dll", "?finalize@FuncFrame@@QEAAIXZ", "C:\\dtc\\x\\s\\lib\\fbgemm.dll")]
    assert log.ops[4].init_failed == ["ompinit.dll"] and log.ops[4].unloaded == ["C:\\dtc\\x\\s\\lib\\ompinit.dll"]

    argv = ["host.exe", "load", "C:\\dtc\\x\\s\\lib\\torch_cpu.dll", "0x1100", "load", "C:\\dtc\\x\\s\\cu\\cudart64_12.dll",
            "0", "call", "cudart64_12.dll", "cudaGetDeviceCount", "load", "C:\\dtc\\x\\s\\lib\\fbgemm.dll", "0x1100",
            "load", "C:\\dtc\\x\\s\\lib\\ompinit.dll", "0x1100"]
    f = rw.wine_facts(log, argv)
    # fbgemm.dll is not missing (its own import is); the call's nvcuda.dll is a run-time load of its own
    assert f.missing == {("libiomp5md.dll", "fbgemm.dll"), ("libiomp5md.dll", "torch_cpu.dll"), ("nvcuda.dll", None)}
    assert f.failed == sorted([("torch_cpu.dll", 126), ("nvcuda.dll", 126), ("fbgemm.dll", 126), ("ompinit.dll", 1114)])
    assert f.broken == {("libiomp5md.dll", "fbgemm.dll", 193), ("ompinit.dll", None, 1114)}
    assert [(i, e) for i, _, e in f.host_errors] == [(1, 126), (4, 0), (10, 126), (13, 1114)]
    assert f.host_paths == [(1, None), (4, "c:\\dtc\\x\\s\\cu\\cudart64_12.dll"), (10, None), (13, None)]
    assert f.mapped["c10.dll"] == {"c:\\dtc\\x\\s\\lib\\c10.dll"} and "kernel32.dll" in f.mapped


def test_compare_names_each_field():
    """compare() says which field differs, with both values; identical facts give nothing."""
    log = rw.parse_wine_log(LOG)
    argv = ["host.exe", "load", "C:\\dtc\\x\\s\\lib\\torch_cpu.dll", "0x1100"]
    w = rw.wine_facts(rw.WineLog(log.before, log.ops[:1]), argv)
    assert rw.compare(w, w, root="c:\\dtc\\x\\s\\") == []
    other = rw.Facts(failed=[], host_errors=[(1, "x", 0)], missing=set(), broken=set(),
                     mapped={"c10.dll": {"c:\\elsewhere\\c10.dll"}}, host_paths=[(1, "c:\\dtc\\x\\s\\lib\\torch_cpu.dll")])
    diffs = rw.compare(w, other, root="c:\\dtc\\x\\s\\")
    fields = [d.split(":")[0] for d in diffs]
    assert fields[:5] == ["failed loads", "host load errors (op index, error)", "missing DLLs (name, needed by)",
                          "module of each successful host load", "c10.dll mapped from"]
    assert any(d.startswith("asmjit.dll mapped from: wine c:\\dtc\\x\\s\\lib\\asmjit.dll") for d in diffs)
