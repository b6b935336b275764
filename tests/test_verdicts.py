"""Which failed load is the failure (dlltrace/diagnosis/verdict.py, docs/verdicts.md): one test per rule, named
after it, on traces written here the way fixtures/traces/handwritten.py writes them (the probes are
the Windows loader's documented search order, not the model's prediction), and the report's forms
(text, Markdown, JSON) for each kind of ending. Also: the model's agreement is said per load, with
each difference named (item 6 of issue 7)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from dlltrace.render import summary as report_mod
from dlltrace.diagnosis import verdict as V
from dlltrace.diagnosis.analysis import analyse
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures" / "traces"))
from handwritten import DLL_NOT_FOUND, NOT_FOUND, SYS32, Writer  # noqa: E402

PY = "C:\\Python312"
SITE = PY + "\\Lib\\site-packages"
LIB = SITE + "\\torch\\lib"
PATH = [PY, PY + "\\Scripts", SYS32, "C:\\Windows"]
MODULES = [f"{SYS32}\\ntdll.dll", f"{SYS32}\\kernel32.dll", f"{SYS32}\\kernelbase.dll", PY + "\\python312.dll"]
LOAD_LIBRARY_SEARCH_SYSTEM32 = 0x800
DEFAULT = 0x1100  # LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
RESULT_SCHEMA = json.loads((ROOT / "tracer/dlltrace/schemas/result-v1.json").read_text())


def writer(command: str = "import app") -> Writer:
    w = Writer(PY + "\\python.exe", "C:\\Users\\me", PATH, MODULES, [PY + "\\python.exe", "-c", command])
    w.py_env("3.12.7", PY, SITE)
    w.file(f"{SYS32}\\kernel32.dll")
    return w


def optional_probe(w: Writer, name: str, ctx=None) -> None:
    """LoadLibraryExW(name, LOAD_LIBRARY_SEARCH_SYSTEM32): System32 only; the DLL is not there."""
    w.load("LoadLibraryExW", name, LOAD_LIBRARY_SEARCH_SYSTEM32, ctx, [(f"{SYS32}\\{name}", NOT_FOUND)], 126, DLL_NOT_FOUND, None)
    w.file(f"{SYS32}\\{name}", kind="missing")


def pyd_missing_dep(w: Writer, folder: str, pyd: str, dep: str, ctx=None, flags: int = DEFAULT,
                    user_dirs: tuple[str, ...] = ()) -> None:
    """An extension whose import `dep` is nowhere: DLL_LOAD_DIR, the app's folder, the
    AddDllDirectory folders (`user_dirs`), System32."""
    path = f"{folder}\\{pyd}"
    probes = [(path, 0), *((f"{d}\\{dep}", NOT_FOUND) for d in (folder, PY, *user_dirs, SYS32))]
    w.load("LoadLibraryExW", path, flags, ctx, probes, 126, DLL_NOT_FOUND, None)
    w.file(path, imports=[dep, "kernel32.dll"])
    for d in (folder, PY, SYS32):
        w.file(f"{d}\\{dep}", kind="missing")


def loaded_ok(w: Writer, path: str, ctx=None, api: str = "LoadLibraryExW", flags: int = DEFAULT) -> None:
    w.load(api, path, flags, ctx, [(path, 0)], 0, 0, path)
    w.file(path, imports=["kernel32.dll"])


def build(tmp_path: Path, w: Writer, exit_code, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    w.write(p, exit_code)
    return p


def verdicts_by_name(path: Path) -> dict[str, list[V.Verdict]]:
    trace = read_trace(path)
    replays = analyse(trace)
    judged = V.judge(trace, replays)
    out: dict[str, list[V.Verdict]] = {}
    for r in replays:
        if V.key(r) in judged:
            out.setdefault(r.load.name.rsplit("\\", 1)[-1], []).append(judged[V.key(r)])
    return out


def produce(path: Path, fmt: str = "text", everything: bool = False):
    out = report_mod.produce(read_trace(path), fmt, everything)
    if fmt == "json":
        rep = json.loads(out)
        jsonschema.validate(rep, RESULT_SCHEMA)
        return rep
    return out


def fates(rep: dict) -> dict[str, tuple[str, str]]:
    return {c["name"].rsplit("\\", 1)[-1]: (c["verdict"]["fate"], c["verdict"]["reason"]) for c in rep["calls"]}


# --- a clean exit: optional probes ---------------------------------------------------------------------
def optional_probes_trace(tmp_path: Path, exit_code=0) -> Path:
    w = writer()
    ctx = w.ev("py_import", module="app._ext")
    loaded_ok(w, SITE + "\\app\\_ext.pyd", ctx)
    optional_probe(w, "nvcuda.dll", ctx)
    optional_probe(w, "dxcore.dll", ctx)
    return build(tmp_path, w, exit_code)


def test_rule_exit_zero(tmp_path):
    p = optional_probes_trace(tmp_path)
    assert {n: [(v.fate, v.reason) for v in vs] for n, vs in verdicts_by_name(p).items()} == {
        "nvcuda.dll": [("went_on", "exit_zero")], "dxcore.dll": [("went_on", "exit_zero")]}
    assert V.rule_exit_zero(0) == V.Verdict("went_on", "exit_zero", exit_code=0)
    assert V.rule_exit_zero(1) is None and V.rule_exit_zero(None) is None


def test_clean_exit_with_optional_probes_is_no_failure_and_the_lost_driver_is_said_first(tmp_path):
    """Exit 0 after probing nvcuda.dll (the NVIDIA driver) and dxcore.dll: no failure, but the answer to "why is
    my GPU not used?" comes first (outcome degraded, issue 22): the driver's load is explained with its fix,
    dxcore.dll is listed apart without one."""
    p = optional_probes_trace(tmp_path)
    text = produce(p)
    lines = text.splitlines()
    assert lines[0] == f"dlltrace ─ the program ran without the NVIDIA driver (on the CPU): nvcuda.dll did not load · {p}"
    assert "  The program went on without the NVIDIA driver: the program exited with 0" in lines
    assert "✗ nvcuda.dll was not found; not installed anywhere dlltrace looked" in lines
    assert "Probed, absent, the program went on (not failures: no fix needed; --all explains them)" in lines
    apart = [l for l in lines if l.startswith("  nvcuda.dll") or l.startswith("  dxcore.dll")]
    assert len(apart) == 1 and apart[0].startswith("  dxcore.dll") and apart[0].endswith("· the program exited with 0")
    fix = lines[lines.index("  Fix") + 1]
    assert "NVIDIA display driver" in fix and "os.add_dll_directory" not in text
    rep = produce(p, "json")
    assert rep["outcome"]["kind"] == "degraded" and rep["outcome"]["lost"] == ["the NVIDIA driver"]
    assert rep["failed"] == [] and rep["error"] == 0 and len(rep["went_on"]) == 2
    assert fates(rep) == {"nvcuda.dll": ("went_on", "exit_zero"), "dxcore.dll": ("went_on", "exit_zero")}
    assert all(c["fixes"] == [] and c["verdict"]["exit_code"] == 0 for c in rep["calls"])
    md = produce(p, "markdown")
    assert md.startswith("**dlltrace:** the program ran without the NVIDIA driver (on the CPU): nvcuda.dll did not load")
    assert "**Did not load:** nvcuda.dll was not found" in md  # (explained, with its fix; dxcore.dll apart)
    assert "The program went on without the NVIDIA driver: the program exited with 0." in md
    assert "Suggested fix: nvcuda.dll comes with the NVIDIA display driver" in md
    assert "- `dxcore.dll`: `LoadLibraryExW`" in md and "- `nvcuda.dll`: `LoadLibraryExW`" not in md
    # --all explains them both
    everything = produce(p, "text", everything=True)
    assert "✗ nvcuda.dll was not found" in everything and "✗ dxcore.dll was not found" in everything


def test_clean_exit_with_a_probe_that_costs_nothing_is_ok(tmp_path):
    """The control: exit 0 after a probe of a library of no accelerator: outcome ok, the probe listed apart."""
    w = writer()
    optional_probe(w, "dxcore.dll")
    p = build(tmp_path, w, 0)
    rep = produce(p, "json")
    assert rep["outcome"]["kind"] == "ok" and rep["outcome"]["text"] is None
    assert produce(p).splitlines()[0] == f"dlltrace ─ 0 failed loads · 1 probed, absent, the program went on · {p}"


def test_the_same_probes_with_a_failed_exit_are_the_failure(tmp_path):
    # the control of the test above: the same loads, exit 1 -- now the last one is the failure
    rep = produce(optional_probes_trace(tmp_path, exit_code=1), "json")
    assert fates(rep) == {"nvcuda.dll": ("went_on", "another_was_fatal"), "dxcore.dll": ("fatal", "nonzero_exit")}
    dx = next(c for c in rep["calls"] if c["name"] == "dxcore.dll")
    assert rep["failed"] == [dx["index"]] and rep["error"] == 126
    nv = next(c for c in rep["calls"] if c["name"] == "nvcuda.dll")
    assert nv["verdict"]["related"]["name"] == "dxcore.dll" and nv["fixes"] == []


# --- torch's loop: a retry that ends well ------------------------------------------------------------------
def torch_loop_trace(tmp_path: Path, exit_code, real_failure: bool) -> Path:
    """torch/__init__.py's loop over torch\\lib\\*.dll: LoadLibraryExW(dll, 0x1100); on 126 its
    folders go on PATH and LoadLibraryW(dll) is tried. Eight DLLs need mkl from a folder only PATH
    holds: the first attempt fails, the retry succeeds. With real_failure, one more DLL's
    dependency is missing everywhere and the retry fails too."""
    mkl = PY + "\\Library\\bin"
    w = writer("import torch")
    ctx = w.ev("py_import", module="torch")
    w.ev("adddir", api="AddDllDirectory", caller=PY + "\\python312.dll", path=LIB, cookie="0x1d2e3f40", ok=True, error=0)
    loaded_ok(w, LIB + "\\c10.dll", ctx)
    names = [f"torch_part{i}.dll" for i in range(8)]
    for name in names:
        dll = f"{LIB}\\{name}"
        w.load("LoadLibraryExW", dll, DEFAULT, ctx,
               [(dll, 0), (f"{LIB}\\mkl_core.dll", NOT_FOUND), (f"{PY}\\mkl_core.dll", NOT_FOUND),
                (f"{LIB}\\mkl_core.dll", NOT_FOUND), (f"{SYS32}\\mkl_core.dll", NOT_FOUND)], 126, DLL_NOT_FOUND, None)
        w.file(dll, imports=["mkl_core.dll", "kernel32.dll"])
    w.ev("setenv", api="SetEnvironmentVariableW", caller=PY + "\\python312.dll", name="PATH",
         value=";".join([LIB, mkl, *PATH]), ok=True, error=0)
    for name in names:
        dll = f"{LIB}\\{name}"
        w.load("LoadLibraryW", dll, 0, ctx, [(dll, 0), (f"{LIB}\\mkl_core.dll", NOT_FOUND), (f"{mkl}\\mkl_core.dll", 0)],
               0, 0, dll)
    w.file(f"{mkl}\\mkl_core.dll", imports=["kernel32.dll"])
    for d in (LIB, PY, SYS32):
        w.file(f"{d}\\mkl_core.dll", kind="missing")
    if real_failure:
        pyd_missing_dep(w, LIB, "caffe2_nvrtc.dll", "nvrtc64_120_0.dll", ctx, user_dirs=(LIB,))
    return build(tmp_path, w, exit_code)


def test_rule_retried_ok(tmp_path):
    # no exit code at all (a child process): the retries still say the program went on
    p = torch_loop_trace(tmp_path, None, real_failure=False)
    by_name = verdicts_by_name(p)
    assert len(by_name) == 8
    for name, (v,) in by_name.items():
        assert (v.fate, v.reason) == ("went_on", "retried_ok"), name
        assert v.related.api == "LoadLibraryW" and v.related.name.endswith("\\" + name)
    text = produce(p)
    assert text.splitlines()[0] == f"dlltrace ─ 0 failed loads · 8 probed, absent, the program went on · {p}"
    assert "then loaded by LoadLibraryW(torch_part3.dll)" in text and "Fix" not in text


def test_torch_loop_with_one_real_failure_counts_one(tmp_path):
    p = torch_loop_trace(tmp_path, 1, real_failure=True)
    text = produce(p)
    assert text.splitlines()[0] == f"dlltrace ─ 1 failed load · 8 probed, absent, the program went on · {p}"
    assert "✗ nvrtc64_120_0.dll was not found — it is needed by caffe2_nvrtc.dll" in text
    assert text.count("\n  Fix\n") == 1
    rep = produce(p, "json")
    got = fates(rep)
    assert got.pop("caffe2_nvrtc.dll") == ("fatal", "nonzero_exit")
    assert set(got.values()) == {("went_on", "retried_ok")} and len(got) == 8
    (fatal,) = [c for c in rep["calls"] if c["index"] in rep["failed"]]
    assert fatal["name"].endswith("caffe2_nvrtc.dll") and fatal["fixes"]
    assert fatal["differences"] == [] and "The model agreed with all 5 probes the loader made for this load." in text


# --- a Python import that raised ----------------------------------------------------------------------------
def import_raised_trace(tmp_path: Path, exception: dict) -> Path:
    """nvcuda.dll probed (optional), then `import app._ext` fails (its dependency is missing), then
    the program's own cleanup probes dxcore.dll, which fails too: the last failed load is not the
    one the program ended on."""
    w = writer()
    optional_probe(w, "nvcuda.dll")
    ctx = w.ev("py_import", module="app._ext")
    pyd_missing_dep(w, SITE + "\\app", "_ext.cp312-win_amd64.pyd", "libfoo.dll", ctx)
    optional_probe(w, "dxcore.dll")
    w.ev("py_exception", **exception)
    return build(tmp_path, w, 1)


IMPORT_ERROR = {"type": "ImportError", "message": "DLL load failed while importing _ext: The specified module could not "
                "be found.", "module": "app._ext", "path": SITE + "\\app\\_ext.cp312-win_amd64.pyd", "winerror": None,
                "causes": []}


def test_rule_python_exception(tmp_path):
    p = import_raised_trace(tmp_path, IMPORT_ERROR)
    by_name = verdicts_by_name(p)
    (ext,) = by_name["_ext.cp312-win_amd64.pyd"]
    assert (ext.fate, ext.reason, ext.exception.type, ext.exception.module) == (
        "fatal", "python_exception", "ImportError", "app._ext")
    for name in ("nvcuda.dll", "dxcore.dll"):
        (v,) = by_name[name]
        assert (v.fate, v.reason, v.related.name) == ("went_on", "another_was_fatal", IMPORT_ERROR["path"])
    text = produce(p)
    assert text.splitlines()[0] == f"dlltrace ─ 1 failed load · 2 probed, absent, the program went on · {p}"
    assert ("  The failure the program hit: the program ended on ImportError: DLL load failed while importing _ext: "
            "The specified module could not be found.") in text
    rep = produce(p, "json")
    (call,) = [c for c in rep["calls"] if c["index"] in rep["failed"]]
    assert call["verdict"]["exception"]["module"] == "app._ext" and call["leaf"]["name"] == "libfoo.dll"


@pytest.mark.parametrize("exception", [
    # torch's OSError names the DLL in its message only
    {"type": "OSError", "message": '[WinError 126] The specified module could not be found. Error loading '
     f'"{SITE}\\app\\_ext.cp312-win_amd64.pyd" or one of its dependencies.', "module": None, "path": None,
     "winerror": 126, "causes": []},
    # an ImportError raised from the OSError: the cause names it
    {"type": "ImportError", "message": "app needs its native part", "module": None, "path": None, "winerror": None,
     "causes": [{"type": "FileNotFoundError", "message": "Could not find module (or one of its dependencies)",
                 "module": None, "path": f"{SITE}\\app\\_ext.cp312-win_amd64.pyd", "winerror": 126}]},
])
def test_the_exception_names_the_load_by_message_or_cause(tmp_path, exception):
    (ext,) = verdicts_by_name(import_raised_trace(tmp_path, exception))["_ext.cp312-win_amd64.pyd"]
    assert (ext.fate, ext.reason) == ("fatal", "python_exception")


def test_rule_message_names_import(tmp_path):
    """psycopg 3.2.3 with its psycopg_binary.libs\\libcrypto-1_1-x64-….dll gone (seen under Wine): `import psycopg`
    tries its implementations in turn and ends on one ImportError of its own, with no name nor path, quoting
    CPython's words for the failed extension load. Before, no load was named: 'no failed load explains it',
    the load 'a missing Python module, not this load', and no leaf, no fix."""
    assert V.rule_message_names_import("x: DLL load failed while importing pq: Module not found.", "psycopg_binary.pq", None)
    assert not V.rule_message_names_import("DLL load failed while importing pq: …", "psycopg_binary._psycopg", None)
    assert V.rule_message_names_import("DLL load failed while importing pq: …", None, "C:\\x\\pq.cp311-win_amd64.pyd")
    assert not V.rule_message_names_import("DLL load failed while importing pq: …", None, "C:\\x\\pq.dll")
    assert not V.rule_message_names_import("No module named 'pq'", "psycopg_binary.pq", None)
    exc = {"type": "ImportError", "message": "no pq wrapper available.\nAttempts made:\n- couldn't import app 'c' "
           "implementation: No module named 'app_c'\n- couldn't import app 'binary' implementation: DLL load failed "
           "while importing _ext: Module not found.\n- couldn't import app 'python' implementation: expected str, "
           "bytes or os.PathLike object, not NoneType", "module": None, "path": None, "winerror": None, "causes": []}
    p = import_raised_trace(tmp_path, exc)
    (ext,) = verdicts_by_name(p)["_ext.cp312-win_amd64.pyd"]
    assert (ext.fate, ext.reason) == ("fatal", "python_exception")
    rep = produce(p, "json")
    assert rep["outcome"]["kind"] != "died_of_other"
    (call,) = [c for c in rep["calls"] if c["index"] in rep["failed"]]
    assert call["leaf"]["name"] == "libfoo.dll"


def test_rule_winerror_of_dlopen(tmp_path):
    """llvmlite 0.43.0 with a 32-bit llvmlite.dll (seen under Wine): ctypes' load fails with 193 and llvmlite raises
    "OSError: Could not find/load shared object file" from ctypes' "[WinError 193] ...", no file named. Before,
    'no failed load explains it', the load 'a missing Python module, not this load'."""
    assert V.rule_winerror_of_dlopen(193, "py_dlopen", 193)
    assert not V.rule_winerror_of_dlopen(193, "py_import", 193)  # (an import's load is named by its module)
    assert not V.rule_winerror_of_dlopen(126, "py_dlopen", 193)
    assert not V.rule_winerror_of_dlopen(None, "py_dlopen", 193)
    w = writer("import app")
    dll = SITE + "\\app\\native.dll"
    ctx = w.ev("py_dlopen", name=dll, mode=None, imports=["app"])
    w.load("LoadLibraryExW", dll, DEFAULT, ctx, [(dll, 0)], 193, 0xC000007B, None)
    w.file(dll, imports=["kernel32.dll"], machine="x86")
    optional_probe(w, "dxcore.dll")
    w.ev("py_exception", type="OSError", message="Could not find/load shared object file", module=None, path=None,
         winerror=None, causes=[{"type": "OSError", "message": "[WinError 193] %1 is not a valid Win32 application",
                                 "module": None, "path": None, "winerror": 193}])
    p = build(tmp_path, w, 1)
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason) for v in by_name["native.dll"]] == [("fatal", "python_exception")]
    assert produce(p, "json")["outcome"]["kind"] != "died_of_other"


def test_a_program_that_went_on_without_a_feature_only_is_not_every_load_succeeded(tmp_path):
    """opencv-python-headless 4.10.0.84 with cv2\\opencv_videoio_ffmpeg4100_64.dll gone (seen under Wine): OpenCV tries
    the plugin by full path, then by name, goes on without FFmpeg (VideoCapture does not open) and exits 0. Its
    only failed load is the fallback: the first line says what the program ran without, and the load is explained
    (before: 'every load succeeded', the text report's first check counting only the loads listed apart)."""
    w = writer("import cv2")
    dll = SITE + "\\cv2\\opencv_videoio_ffmpeg4100_64.dll"
    w.load("LoadLibraryW", dll, 0, None, [(dll, NOT_FOUND)], 126, DLL_NOT_FOUND, None)
    w.file(dll, kind="missing")
    p = build(tmp_path, w, 0)
    rep = produce(p, "json")
    assert (rep["outcome"]["kind"], rep["outcome"]["lost"]) == ("degraded", ["OpenCV's FFmpeg video I/O"])
    text = produce(p)
    assert text.splitlines()[0] == (f"dlltrace ─ the program ran without OpenCV's FFmpeg video I/O: "
                                    f"opencv_videoio_ffmpeg4100_64.dll did not load · {p}")
    assert "✗ opencv_videoio_ffmpeg4100_64.dll was not found" in text
    assert "The program went on without OpenCV's FFmpeg video I/O" in text


def test_an_exception_naming_no_load_is_what_the_program_died_of(tmp_path):
    """A Python exception that names none of the failed loads (numpy's ABI TypeError in an old TensorFlow, an
    error of the program's own): the loads are gone past, context only; no DLL is blamed (issue 22)."""
    exc = {"type": "RuntimeError", "message": "something else", "module": None, "path": None, "winerror": None,
           "causes": []}
    p = import_raised_trace(tmp_path, exc)
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason) for v in by_name["dxcore.dll"]] == [("went_on", "exception_not_a_load")]
    rep = produce(p, "json")
    assert rep["outcome"]["kind"] == "died_of_other" and rep["failed"] == []
    assert rep["outcome"]["exception"] == {"type": "RuntimeError", "message": "something else"}
    text = produce(p)
    assert text.splitlines()[0] == f"dlltrace ─ the program ended with RuntimeError: something else; no failed load explains it · {p}"
    assert "Failed loads, context only: the program went past them, and none is what it ended with" in text
    assert "\n  Fix\n" not in text
    assert "a missing Python module" not in text  # (a RuntimeError: no module is missing)


def test_rule_exception_not_a_load(tmp_path):
    w = writer("import app")
    optional_probe(w, "nvcuda.dll")
    w.ev("py_import", module="app.missing")
    w.ev("py_exception", type="ModuleNotFoundError", message="No module named 'app.missing'", module="app.missing",
         path=None, winerror=None, causes=[])
    p = build(tmp_path, w, 1)
    assert [(v.fate, v.reason) for v in verdicts_by_name(p)["nvcuda.dll"]] == [("went_on", "exception_not_a_load")]
    text = produce(p)
    assert text.splitlines()[0] == (f"dlltrace ─ the program ended with ModuleNotFoundError: No module named "
                                    f"'app.missing'; no failed load explains it · {p}")
    assert "a missing Python module, not this load" in text


# --- a non-zero exit, a crash, a load that never returned, no exit at all ---------------------------------
def two_failures(w: Writer) -> None:
    optional_probe(w, "nvcuda.dll")
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")


def test_rule_nonzero_exit(tmp_path):
    w = writer()
    two_failures(w)
    p = build(tmp_path, w, 3)
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason, v.exit_code) for v in by_name["_ext.pyd"]] == [("fatal", "nonzero_exit", 3)]
    assert [(v.fate, v.reason) for v in by_name["nvcuda.dll"]] == [("went_on", "another_was_fatal")]
    text = produce(p)
    assert ("  The failure the program hit: the program exited with 3, and this is the last failed load it did not "
            "load afterwards") in text


def test_rule_crash(tmp_path):
    w = writer()
    two_failures(w)
    loaded_ok(w, SITE + "\\app\\other.pyd")  # a later successful load of another module changes nothing
    p = build(tmp_path, w, 0xC0000005)
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason) for v in by_name["_ext.pyd"]] == [("fatal", "crash")]
    assert [(v.fate, v.reason) for v in by_name["nvcuda.dll"]] == [("went_on", "another_was_fatal")]
    assert "the program crashed (0xc0000005 STATUS_ACCESS_VIOLATION), and this is the last failed load" in produce(p)
    assert V.is_crash(0xC0000005) and V.is_crash(0xE06D7363) and V.is_crash(0x80000003)
    assert not V.is_crash(0xFFFFFFFF) and not V.is_crash(1) and not V.is_crash(0) and not V.is_crash(None)


def test_rule_died_in_load(tmp_path):
    w = writer()
    two_failures(w)
    w.ev("load_begin", api="LoadLibraryW", name="C:\\app\\dies.dll", flags=0, parent=None, depth=0, ctx=None,
         caller=PY + "\\python312.dll")
    p = build(tmp_path, w, None)  # killed: no exit event either
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason) for v in by_name["dies.dll"]] == [("fatal", "died_in_load")]
    assert {v.reason for n in ("nvcuda.dll", "_ext.pyd") for v in by_name[n]} == {"another_was_fatal"}
    assert V.rule_died_in_load([]) is None


def test_rule_cut_by_cap(tmp_path):
    """A load the size cap cut short (its end dropped) is not a load the process died in: unknown, said so;
    a load wholly before the first dropped line keeps its verdict."""
    w = writer()
    two_failures(w)
    w.ev("load_begin", api="LoadLibraryW", name="C:\\app\\cut.dll", flags=0, parent=None, depth=0, ctx=None,
         caller=PY + "\\python312.dll")
    first_t = w.t + 500  # lines were dropped from here on: cut.dll's end among them
    w.ev("capped", max_size=1 << 20, dropped={"load_end": 1, "probe": 7}, dropped_bytes=900, first_t=first_t)
    w.lines[-1]["seq"] = 0
    p = build(tmp_path, w, 1)
    by_name = verdicts_by_name(p)
    assert [(v.fate, v.reason) for v in by_name["cut.dll"]] == [("unknown", "cut_by_cap")]
    assert [(v.fate, v.reason) for v in by_name["_ext.pyd"]] == [("fatal", "nonzero_exit")]
    text = produce(p)
    assert "whether it failed is not known" in text and "The trace reached its size cap of 1 MB" in text
    assert "The trace reached its size cap of 1 MB" in produce(p, "markdown")
    assert "lines of it were dropped: its probes are not compared with the model" in text
    (cut,) = [c for c in produce(p, "json")["calls"] if c["name"].endswith("cut.dll")]
    assert cut["disagreements"] == []  # (its dropped end read as "the model predicted probes the trace lacks")
    rep = produce(p, "json")
    assert rep["capped"]["dropped"] == {"load_end": 1, "probe": 7}
    # without the capped event the same lines read as a process that died inside cut.dll's load
    w.lines = [e for e in w.lines if e.get("ev") not in ("capped", "exit")]
    p2 = build(tmp_path, w, None, name="u.jsonl")
    assert [(v.fate, v.reason) for v in verdicts_by_name(p2)["cut.dll"]] == [("fatal", "died_in_load")]


def test_rule_cut_by_cap_when_the_light_replay_let_go_of_the_loads_probes(tmp_path):
    """A failed load the cap cut only in a nested load (whose end was dropped): the report's light replay
    keeps the failed load without its probes and nested loads, and its verdict is still cut_by_cap,
    as in a replay that keeps everything (reviewer's case)."""
    from dlltrace.diagnosis.analysis import judged_incidents

    w = writer()
    pyd = "C:\\app\\x.pyd"
    b = w.ev("load_begin", api="LoadLibraryExW", name=pyd, flags=0x1100, parent=None, depth=0, ctx=None,
             caller=PY + "\\python312.dll")
    w.ev("probe", load=b, op="open", path="\\??\\" + pyd, status=NOT_FOUND)
    w.ev("load_begin", api="LoadLibraryW", name="C:\\app\\dep.dll", flags=0, parent=b, depth=1, ctx=None, caller=pyd)
    w.ev("load_end", load=b, result=None, error=126, status=DLL_NOT_FOUND, path=None)
    w.file(pyd, kind="missing")
    w.ev("capped", max_size=1 << 20, dropped={"load_end": 1}, dropped_bytes=100, first_t=w.t + 1000)
    w.lines[-1]["seq"] = 0
    p = build(tmp_path, w, 1)
    for everything in (True, False):
        _, incs = judged_incidents(read_trace(p), everything)
        assert [(i.verdict.fate, i.verdict.reason) for i in incs if i.verdict] == [("unknown", "cut_by_cap")], everything


def test_rule_no_exit_is_unknown_and_still_counted(tmp_path):
    w = writer()
    two_failures(w)
    p = build(tmp_path, w, None)
    assert {v.fate for vs in verdicts_by_name(p).values() for v in vs} == {"unknown"}
    text = produce(p)
    assert text.splitlines()[0] == f"dlltrace ─ 2 failed loads · {p}"
    assert "  Whether the program went on is not known: the trace does not say how this process ended" in text
    assert produce(p, "json")["went_on"] == []


def test_rule_could_not_start(tmp_path):
    from test_report import START_TRACE

    p = tmp_path / "start.jsonl"
    p.write_text("\n".join(json.dumps(e) for e in START_TRACE) + "\n", encoding="utf-8")
    rep = produce(p, "json")
    (call,) = rep["calls"]
    assert (call["verdict"]["fate"], call["verdict"]["reason"], call["verdict"]["exit_code"]) == (
        "fatal", "could_not_start", 0xC0000135)
    assert rep["failed"] == [call["index"]]


def test_rule_real_load_succeeded():
    from types import SimpleNamespace

    assert V.rule_real_load_succeeded(SimpleNamespace(failed=False)) == V.Verdict("went_on", "real_load_succeeded")
    assert V.rule_real_load_succeeded(SimpleNamespace(failed=True)) is None


def test_a_retry_that_fails_too_shares_the_failure(tmp_path):
    # torch's two attempts at one DLL, both failing, then exit 1: one failure, both attempts fatal
    w = writer()
    optional_probe(w, "nvcuda.dll")
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")
    p = build(tmp_path, w, 1)
    assert [(v.fate, v.reason) for v in verdicts_by_name(p)["_ext.pyd"]] == [("fatal", "nonzero_exit")] * 2
    rep = produce(p, "json")
    assert len(rep["failed"]) == 2 and len(rep["went_on"]) == 1


def test_fixture_cases_keep_their_failure():
    # every committed case ends non-zero on its failure: each is still *the* failure
    for path in sorted((ROOT / "fixtures" / "traces").glob("s*.jsonl")):
        rep = json.loads(report_mod.produce(read_trace(path), "json"))
        assert rep["failed"] and rep["went_on"] == [], path.name
        assert {c["verdict"]["fate"] for c in rep["calls"]} == {"fatal"}, path.name


# --- item 6: the model's agreement, per load ---------------------------------------------------------
def test_agreement_is_per_load_and_names_each_difference(tmp_path):
    """Two attempts at one DLL: the first agrees with the model; in the second the real loader also
    probed a folder the model does not search, and skipped one it does. The report must not say the
    model agreed with all the probes, and must say where it did not."""
    w = writer()
    folder = SITE + "\\app"
    pyd_missing_dep(w, folder, "_ext.pyd", "libfoo.dll")
    path = f"{folder}\\_ext.pyd"
    odd = "C:\\odd\\libfoo.dll"
    w.load("LoadLibraryExW", path, DEFAULT, None,
           [(path, 0), (f"{folder}\\libfoo.dll", NOT_FOUND), (odd, NOT_FOUND), (f"{SYS32}\\libfoo.dll", NOT_FOUND)],
           126, DLL_NOT_FOUND, None)
    p = build(tmp_path, w, 1)
    text = produce(p)
    assert "The model agreed with all 4 probes the loader made for the first attempt." in text
    assert ("The model and the real loader disagree on attempt 2 (2 differences): please report this with the trace "
            "attached.") in text
    assert f"    - {odd}: the trace saw a probe (not found, 0xc0000034), the model predicted none" in text
    assert f"    - {PY}\\libfoo.dll: the model predicted a probe (expecting not there), the trace saw none" in text
    assert "agreed with all 8" not in text and "agreed with all 7" not in text
    rep = produce(p, "json")
    first, second = rep["calls"]
    assert first["differences"] == [] and first["agreed"] == 4
    assert [(d["kind"], d["path"], d["trace_status"], d["model_result"]) for d in second["differences"]] == [
        ("unexpected_probe", odd, NOT_FOUND, None),
        ("missing_probe", f"{PY}\\libfoo.dll", None, "not_there")]
    assert second["disagreements"] == [d["text"] for d in second["differences"]]


def test_a_disagreement_on_another_load_does_not_reach_this_one(tmp_path):
    # the probed-absent load disagrees with the model; the failure explained does not
    w = writer()
    w.load("LoadLibraryExW", "nvcuda.dll", LOAD_LIBRARY_SEARCH_SYSTEM32, None,
           [("C:\\Windows\\SysWOW64\\nvcuda.dll", NOT_FOUND), (f"{SYS32}\\nvcuda.dll", NOT_FOUND)], 126, DLL_NOT_FOUND, None)
    w.file(f"{SYS32}\\nvcuda.dll", kind="missing")
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")
    p = build(tmp_path, w, 1)
    text = produce(p)
    assert "The model agreed with all 4 probes the loader made for this load." in text
    assert "The model and the real loader disagree" not in text  # the went-on load is listed apart, not explained
    everything = produce(p, "text", everything=True)
    assert ("  - C:\\Windows\\SysWOW64\\nvcuda.dll: the trace saw a probe (not found, 0xc0000034), the model predicted "
            "none") in everything
    assert everything.count("disagree on this load (1 difference)") == 1


def test_no_probe_is_not_agreement(tmp_path):
    w = writer()
    w.load("LoadLibraryExW", SITE + "\\app\\_ext.pyd", DEFAULT, None, [], 126, DLL_NOT_FOUND, None)
    w.file(SITE + "\\app\\_ext.pyd", kind="missing")
    text = produce(build(tmp_path, w, 1))
    assert "agreed with all" not in text
    # the model expects the loader to open the file; the trace has no probe at all: that is named
    assert "The model and the real loader disagree on this load (1 difference)" in text
    assert "_ext.pyd: the model predicted a probe (expecting not there), the trace saw none" in text


def test_the_exception_outranks_a_load_that_never_returned(tmp_path):
    """A worker thread caught inside a load by the exit does not hide the load the Python exception
    names (review of issue 7: died_in_load used to be asked first)."""
    w = writer()
    optional_probe(w, "nvcuda.dll")
    ctx = w.ev("py_import", module="app._ext")
    pyd_missing_dep(w, SITE + "\\app", "_ext.cp312-win_amd64.pyd", "libfoo.dll", ctx)
    w.ev("load_begin", api="LoadLibraryW", name="C:\\app\\worker.dll", flags=0, parent=None, depth=0, ctx=None,
         caller=PY + "\\python312.dll")
    w.ev("py_exception", **IMPORT_ERROR)
    by_name = verdicts_by_name(build(tmp_path, w, 1))
    assert [(v.fate, v.reason) for v in by_name["_ext.cp312-win_amd64.pyd"]] == [("fatal", "python_exception")]
    assert [(v.fate, v.reason) for v in by_name["worker.dll"]] == [("went_on", "another_was_fatal")]


def test_a_retry_by_another_spelling_is_one_failure(tmp_path):
    """The same DLL by full path, then retried by bare name, both failing: one failed load, one fix
    block (the report grouped by the full name, the verdicts by the file name)."""
    w = writer()
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")
    w.load("LoadLibraryW", "_ext.pyd", 0, None, [(f"{d}\\_ext.pyd", NOT_FOUND) for d in (PY, SYS32)], 126,
           DLL_NOT_FOUND, None)
    p = build(tmp_path, w, 1)
    assert produce(p).splitlines()[0] == f"dlltrace ─ 1 failed load · {p}"
    rep = produce(p, "json")
    assert len(rep["failed"]) == 2 and len({tuple(c["verdict"].items()) for c in rep["calls"]}) == 1


def test_rule_retried_ok_not_by_a_data_file_mapping(tmp_path):
    """Mapping the DLL later as a data file (resources only) is not a successful retry."""
    w = writer()
    pyd_missing_dep(w, SITE + "\\app", "_ext.pyd", "libfoo.dll")
    loaded_ok(w, SITE + "\\app\\_ext.pyd", flags=0x2)  # LOAD_LIBRARY_AS_DATAFILE
    by_name = verdicts_by_name(build(tmp_path, w, 1))
    assert by_name["_ext.pyd"][0].fate == "fatal"


def test_a_load_that_never_returned_has_no_invented_missing_probes(tmp_path):
    """The process died inside the load after two of its probes: the model's later probes are not
    'missing' (the loader never got there)."""
    w = writer()
    begin = w.ev("load_begin", api="LoadLibraryExW", name=SITE + "\\app\\_ext.pyd", flags=DEFAULT, parent=None, depth=0,
                 ctx=None, caller=PY + "\\python312.dll")
    w.ev("probe", load=begin, op="open", path="\\??\\" + SITE + "\\app\\_ext.pyd", status=0, handle="0x40")
    w.ev("probe", load=begin, op="open", path="\\??\\" + SITE + "\\app\\libfoo.dll", status=NOT_FOUND)
    w.file(SITE + "\\app\\_ext.pyd", imports=["libfoo.dll", "kernel32.dll"])
    rep = produce(build(tmp_path, w, 0xC0000005), "json")
    (call,) = rep["calls"]
    assert [d for d in call["differences"] if d["kind"] == "missing_probe"] == []
    assert call["agreed"] == 2


def _names_in_turn_trace(tmp_path: Path, names: list[str], frames: list[int]) -> Path:
    """openslide-python 1.4 without OpenSlide (seen under Wine): ctypes loads of each name in turn, from the
    line of the program given for each (frames), none found; then its ModuleNotFoundError, whose causes name
    every load."""
    w = writer("import openslide")
    causes = []
    for name, line in zip(names, frames):
        ctx = w.ev("py_dlopen", name=name, mode=None, frame={"file": "app.py", "line": line, "function": "<module>"},
                   imports=["openslide", "openslide.lowlevel"])
        probes = [(f"{PY}\\{name}", NOT_FOUND), (f"{SYS32}\\{name}", NOT_FOUND)]
        w.load("LoadLibraryExW", name, 0x1000, ctx, probes, 126, DLL_NOT_FOUND, None)
        for d in (PY, SYS32):
            w.file(f"{d}\\{name}", kind="missing")
        causes.append({"type": "FileNotFoundError", "message": f"Could not find module '{name}' (or one of its "
                       "dependencies). Try using the full path with constructor syntax.", "module": None,
                       "path": None, "winerror": 126})
    w.ev("py_exception", type="ModuleNotFoundError", message="Couldn't locate OpenSlide DLL. Try `pip install "
         "openslide-bin`", module=None, path=None, winerror=None, causes=causes[::-1])
    return build(tmp_path, w, 1)


def test_rule_alternate_name_a_package_ships(tmp_path):
    """The program tries libopenslide-1.dll, then libopenslide-0.dll, from one line: the failure is the name a pip
    package ships (openslide-bin: libopenslide-1.dll), not the last one tried, and its fix installs that package."""
    p = _names_in_turn_trace(tmp_path, ["libopenslide-1.dll", "libopenslide-0.dll"], [1, 1])
    by_name = verdicts_by_name(p)
    ((one,), (zero,)) = by_name["libopenslide-1.dll"], by_name["libopenslide-0.dll"]
    assert (one.fate, one.reason) == ("fatal", "python_exception")
    assert (zero.fate, zero.reason, zero.related.name) == ("went_on", "another_was_fatal", "libopenslide-1.dll")
    rep = produce(p, "json")
    (call,) = [c for c in rep["calls"] if c["index"] in rep["failed"]]
    assert call["leaf"]["name"] == "libopenslide-1.dll"
    assert (call["fixes"][0]["action"], call["fixes"][0]["package"]) == ("install_package", "openslide-bin")


@pytest.mark.parametrize("names, frames, fatal", [
    (["libopenslide-1.dll", "libopenslide-0.dll"], [1, 2], "libopenslide-0.dll"),  # two lines: two actions
    (["libfoo-1.dll", "libfoo-0.dll"], [1, 1], "libfoo-0.dll"),  # no package ships either name: the last one
])
def test_rule_alternate_name_a_package_ships_keeps_the_last_name(tmp_path, names, frames, fatal):
    by_name = verdicts_by_name(_names_in_turn_trace(tmp_path, names, frames))
    assert [n for n, (v,) in by_name.items() if v.fate == "fatal"] == [fatal]


def _pythoncom_trace(dest, exists: bool):
    """pywin32 306's `import pythoncom` (the field test, under Wine): pywintypes tries LoadLibraryExW of the bare
    'pythoncom311.dll' with 0x1100 (87, whatever is installed), then looks for pywin32_system32\\pythoncom311.dll on
    sys.path and raises "No system module 'pythoncom' (pythoncom311.dll)"; the bootstrap names that file (`files`),
    there or not (`exists`)."""
    from simhelp import handwritten, python_writer

    hw = handwritten()
    w, site = python_writer(hw, "import pythoncom")
    w.ev("py_dists", dists=[{"name": "pywin32", "version": "306", "site": site, "loaders": [],
                             "files": ["pywin32_system32/pythoncom311.dll"]}], conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module="pythoncom")
    w.load("LoadLibraryExW", "pythoncom311.dll", 0x1100, ctx, [], 87, 0xC000000D, None)
    path = site + "\\pywin32_system32\\pythoncom311.dll"
    w.ev("py_exception", type="ImportError", message="No system module 'pythoncom' (pythoncom311.dll)", module=None,
         path=None, winerror=None, causes=[], files=[{"path": path, "exists": exists, "size": 9 if exists else None}])
    w.write(dest)
    return dest, path


def test_rule_bare_call_of_a_gone_file(tmp_path, capsys):
    """The 87 of a bare name is not the failure when the file the exception names is its distribution's and gone:
    the report said "invalid parameters: LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (0x100) needs a fully qualified path" and
    "pass a fully qualified path" (pywin32's own code makes that call, healthy or not). Now the program ended on the
    exception, and pywin32's file is not there: reinstall pywin32. With the file there, the load stays the failure."""
    import json

    from dlltrace import cli

    t, path = _pythoncom_trace(tmp_path / "t.jsonl", exists=False)
    cli.main(["report", "--json", str(t)])
    rep = json.loads(capsys.readouterr().out)
    assert rep["outcome"]["kind"] == "died_of_other" and rep["failed"] == [], rep["outcome"]
    f = rep["outcome"]["file"]
    assert (f["path"], f["package"], f["version"], f["listed"]) == (path, "pywin32", "306",
                                                                      "pywin32_system32/pythoncom311.dll"), f
    assert "--force-reinstall --no-deps pywin32==306" in f["fix"], f
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("dlltrace ─ the program ended with ImportError: No system module "
                                           "'pythoncom' (pythoncom311.dll): pythoncom311.dll, a file of pywin32 306, "
                                           "is not there"), text
    assert "fully qualified path" not in text, text
    t, _ = _pythoncom_trace(tmp_path / "t2.jsonl", exists=True)
    cli.main(["report", "--json", str(t)])
    rep = json.loads(capsys.readouterr().out)
    assert rep["outcome"]["kind"] == "died_of_load" and len(rep["failed"]) == 1, rep["outcome"]
