"""`dlltrace report`: the text, Markdown and JSON forms, --redact, --all, and bad input.

Runs on any OS from the committed traces of fixtures/traces/ (see tests/test_report_cases.py).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from simhelp import handwritten, python_writer

from dlltrace import cli, errors

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"


def report(capsys, path, *extra: str) -> str:
    capsys.readouterr()
    assert cli.main(["report", str(path), *extra]) == 0
    return capsys.readouterr().out


def folder_rows(text: str) -> list[str]:
    """The rows of every 'Where Windows looked' table."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("Where Windows looked for"):
            inside = True
            continue
        if inside and re.match(r"^\s+\d+\s{2}", line):
            rows.append(line)
        elif inside:
            inside = False
    return rows


# --- text ------------------------------------------------------------------------------------------------
def test_first_line_after_the_header_names_the_leaf_and_its_parent(capsys):
    lines = report(capsys, TRACES / "s2.jsonl").splitlines()
    assert lines[0] == f"dlltrace ─ 1 failed load · {TRACES / 's2.jsonl'}"
    assert lines[1] == ""
    assert lines[2] == "✗ cudnn64_7.dll was not found — it is needed by torch_cuda.dll; not installed anywhere dlltrace looked"


@pytest.mark.parametrize("case", ["s1", "s2", "s3", "s8"])
def test_every_folder_row_has_its_rule(case, capsys):
    text = report(capsys, TRACES / f"{case}.jsonl")
    rows = folder_rows(text)
    capsys.readouterr()
    cli.main(["report", str(TRACES / f"{case}.jsonl"), "--json"])
    rep = json.loads(capsys.readouterr().out)
    rules = []
    for c in rep["calls"]:
        node = c["tree"]
        while node and not node.get("cause"):  # the leaf's candidates, per attempt, as the text shows them
            node = next((k for k in node["children"] if k["error"]), None)
        rules += [cand["rule"] for cand in (node or {}).get("candidates", [])]
    assert rows and len(rows) == len(rules)
    for row, rule in zip(rows, rules):
        assert rule and rule in row, (row, rule)
        number, folder, rest = re.match(r"^\s+(\d+)\s{2}(\S.*?)\s{2,}(.*)$", row).groups()
        assert folder and rest.startswith(rule[:20])


def test_path_not_searched_is_said_once_for_0x1100(capsys):
    for case in ("s1", "s6", "s3"):  # s3: a 0x1100 attempt and a standard-order retry that does search PATH
        text = report(capsys, TRACES / f"{case}.jsonl")
        assert text.count("PATH and the current folder are not searched with these flags.") == 1, case
    text = report(capsys, TRACES / "s8.jsonl")  # flags 0x8: PATH is searched, nothing to say
    assert "not searched" not in text and "PATH[1]" in text


def test_markdown_form(capsys):
    md = report(capsys, TRACES / "s1.jsonl", "--markdown")
    assert md.startswith("**dlltrace:** cublas64_12.dll was not found — it is needed by \\_ext.cp311-win_amd64.pyd; installed but not "
                         "searched — WinError 126")
    assert "<details><summary>" in md and md.rstrip().endswith("</details>")
    assert md.index("<details>") < md.index("| # | folder | rule | result |") < md.index("</details>")
    assert '`AddDllDirectory(L"C:\\\\dlltrace-cases\\\\s1\\\\CUDA\\\\v12.1\\\\bin")`' in md  # (the C host: Win32 words)
    assert "Wine 8" in md and "trace format 1" in md


def test_all_includes_successful_loads(capsys):
    without = report(capsys, TRACES / "s2.jsonl")
    with_all = report(capsys, TRACES / "s2.jsonl", "--all")
    assert "c10.dll loaded from" not in without
    assert "✓ c10.dll loaded from C:\\dlltrace-cases\\s2\\venv\\Lib\\site-packages\\torch\\lib\\c10.dll" in with_all
    assert with_all.index("✓ c10.dll") < with_all.index("✗ cudnn64_7.dll")  # in call order
    assert "The model agreed with the one probe the loader made for this load." in with_all  # (not "all 1 probe")
    capsys.readouterr()
    cli.main(["report", str(TRACES / "s2.jsonl"), "--json", "--all"])
    rep = json.loads(capsys.readouterr().out)
    assert [c["real_error"] for c in rep["calls"]] == [0, 126, 126] and rep["failed"] == [1, 2]


def only_successful_trace(tmp_path: Path) -> Path:
    """s2's trace cut before the failing load: one successful load (c10.dll)."""
    lines = (TRACES / "s2.jsonl").read_text(encoding="utf-8").splitlines()
    keep, seen_ok = [], False
    for line in lines:
        e = json.loads(line)
        if e.get("ev") == "load_begin" and seen_ok:
            break
        keep.append(line)
        if e.get("ev") == "load_end":
            assert e["error"] == 0
            seen_ok = True
    p = tmp_path / "ok.jsonl"
    p.write_text("\n".join(keep) + "\n", encoding="utf-8")
    return p


def test_every_load_succeeded_is_one_line(tmp_path, capsys):
    p = only_successful_trace(tmp_path)
    out = report(capsys, p)
    assert out.splitlines() == [f"dlltrace ─ every load succeeded (1 load traced) · {p}"]
    assert report(capsys, p, "--markdown").strip() == "**dlltrace:** every load succeeded (1 load traced)."
    assert "✓ c10.dll loaded" in report(capsys, p, "--all")


# --- redaction ---------------------------------------------------------------------------------------------
def alice_trace(tmp_path: Path) -> Path:
    """s1 as if recorded in C:\\Users\\alice (the home folder holds everything, the cwd too)."""
    text = (TRACES / "s1.jsonl").read_text(encoding="utf-8")
    text = text.replace("C:\\\\dlltrace-cases", "C:\\\\Users\\\\alice\\\\cases")
    assert text.count("alice") > 10
    p = tmp_path / "alice.jsonl"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("form", [[], ["--markdown"], ["--json"], ["--all"]])
def test_redact_removes_the_user_name(tmp_path, capsys, form):
    p = alice_trace(tmp_path)
    plain = report(capsys, p, *form)
    assert "alice" in plain  # the report does show the user's folders...
    red = report(capsys, p, *form, "--redact")
    assert "alice" not in red.lower()  # ...and --redact removes every trace of the name
    assert "C:\\Users\\<user>\\cases" in red or "C:\\\\Users\\\\<user>\\\\cases" in red
    if "--json" in form:
        assert json.loads(red)["calls"][0]["leaf"]["name"] == "cublas64_12.dll"  # still valid JSON


# --- bad input ------------------------------------------------------------------------------------------------
HEADER = '{"format":"dlltrace-trace","version":1,"tool":"dlltrace 0.1.0","created":null,"platform":"wine"}\n'


@pytest.mark.parametrize("content, code, needle", [
    ("hello\n", errors.EXIT_BAD_TRACE, "line 1: not a dlltrace trace"),
    ('{"format":"dlltrace-trace","version":2}\n', errors.EXIT_BAD_TRACE, "line 1: trace format version 2 is newer"),
    ("", errors.EXIT_BAD_TRACE, "line 1: empty file"),
    (HEADER, errors.EXIT_BAD_TRACE, "the trace holds no traced process"),
    (None, errors.EXIT_USAGE, "no such file"),
])
def test_bad_input_is_one_line_with_a_distinct_code(tmp_path, content, code, needle, dlltrace_cli):
    p = tmp_path / "bad.jsonl"
    if content is not None:
        p.write_text(content, encoding="utf-8")
    r = dlltrace_cli("report", p)
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"dlltrace: {p}: ") and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_truncated_last_line_warns_and_reports_the_rest(tmp_path, dlltrace_cli):
    data = (TRACES / "s6.jsonl").read_bytes()
    p = tmp_path / "cut.jsonl"
    p.write_bytes(data[:-40])  # the last file fact, cut mid-line
    n = data[:-40].count(b"\n") + 1
    r = dlltrace_cli("report", p)
    assert r.returncode == errors.EXIT_BAD_TRACE, r.stderr  # damaged: its own code, but still reported
    assert r.stderr == f"dlltrace: warning: {p}: line {n}: truncated last line ignored\n"
    assert "✗ mylib.dll was not found — it is needed by _C.cp38-win_amd64.pyd" in r.stdout
    # (the report says it, for whoever reads it without its stderr: pasted, attached, -o; and --markdown)
    said = f"This trace is damaged (line {n}: truncated last line ignored): this report is of what could be read."
    assert r.stdout.rstrip("\n").endswith("\n\n" + said), r.stdout[-400:]
    md = dlltrace_cli("report", p, "--markdown")
    assert md.returncode == errors.EXIT_BAD_TRACE, md.stderr
    assert md.stdout.rstrip("\n").endswith("\n\n" + said), md.stdout[-400:]  # (its words need no escape in Markdown)


@pytest.mark.parametrize("platform", ["windows", "linux"])
def test_a_trace_cut_before_any_load_is_not_said_to_have_loaded_everything(tmp_path, dlltrace_cli, platform):
    """A trace cut off after its first lines (an upload cut short, a full disk): no load failed in what could be read,
    and that is all that is said: never "every load succeeded" (text and Markdown, Windows and Linux)."""
    if platform == "windows":
        lines = (TRACES / "s6.jsonl").read_bytes().splitlines(keepends=True)
        kept = next(i for i, x in enumerate(lines) if b'"load_begin"' in x)
    else:
        if not sys.platform.startswith("linux"):
            pytest.skip("the Linux recorder runs on Linux")
        made = tmp_path / "whole.jsonl"
        assert dlltrace_cli("run", "-o", made, "--", sys.executable, "-c", "pass").returncode == 0
        lines = made.read_bytes().splitlines(keepends=True)
        kept = next(i for i, x in enumerate(lines) if b'"objsearch"' in x)
    p = tmp_path / "cut.jsonl"
    p.write_bytes(b"".join(lines[:kept]) + lines[kept][:20])
    for fmt in ((), ("--markdown",)):
        r = dlltrace_cli("report", p, *fmt)
        assert r.returncode == errors.EXIT_BAD_TRACE, r.stderr
        first = r.stdout.splitlines()[0]
        assert "every load succeeded" not in r.stdout, r.stdout
        assert "no load failed in what could be read of this damaged trace" in first, r.stdout  # (Linux: a process was
        # traced, its audit_start read: never "no process was traced")
        assert "this report is of what could be read" in r.stdout.rstrip().splitlines()[-1], r.stdout


def _damage(lines: list[str], index: int, **changes) -> None:
    e = json.loads(lines[index])
    for k, v in changes.items():
        if v is ...:
            del e[k]
        else:
            e[k] = v
    lines[index] = json.dumps(e)


def test_damaged_events_are_named_by_line_and_the_rest_is_reported(tmp_path, dlltrace_cli):
    """An event without a field the reader needs is skipped; a field of the wrong type is read as
    absent (never a traceback further on); each is one line naming the file and line; what is
    readable is still reported, and the exit code says the trace was damaged."""
    lines = (TRACES / "s1.jsonl").read_text(encoding="utf-8").splitlines()
    kinds = [json.loads(x).get("ev") for x in lines]
    env, begin = kinds.index("env"), kinds.index("load_begin")
    probes = [i for i, k in enumerate(kinds) if k == "probe"]
    files = [i for i, k in enumerate(kinds) if k == "file"]
    _damage(lines, env, known_dlls=[["kernel32.dll"]], cwd=7)
    _damage(lines, probes[0], load="x")  # unusable: which load is it part of?
    _damage(lines, probes[1], path=12)
    _damage(lines, files[-1], pe={"machine": 64}, why=None)
    lines.insert(begin, json.dumps({"ev": "load_begin", "seq": 999, "pid": 1, "api": "LoadLibraryW", "name": "x.dll"}))
    p = tmp_path / "damaged.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")

    r = dlltrace_cli("report", p)
    assert r.returncode == errors.EXIT_BAD_TRACE and "Traceback" not in r.stderr
    n = {i: i + 1 + (i >= begin) for i in range(len(lines))}  # file line numbers after the insertion
    assert r.stderr.splitlines() == [f"dlltrace: warning: {p}: line {ln}: {what}" for ln, what in [
        (n[env], "env event with an invalid 'cwd' field (must be a string or null), read as absent"),
        (n[env], "env event with an invalid 'known_dlls' field (must be a list or null (items a string)), "
                 "read as absent"),
        (begin + 1, "load_begin event without 'tid' field, skipped"),
        (n[probes[0]], "probe event with a non-integer 'load' field, skipped"),
        (n[probes[1]], "probe event with an invalid 'path' field (must be a string or null), read as absent"),
        (n[files[-1]], "file event with an invalid 'pe' field (must be an object), read as absent"),
        (n[files[-1]], "file event with an invalid 'why' field (must be one of \"elsewhere\", \"close_name\"), "
                       "read as absent"),
    ]]
    assert "✗ cublas64_12.dll was not found" in r.stdout  # S1's verdict, from what could be read


def test_a_badly_damaged_trace_does_not_bury_the_report(tmp_path, dlltrace_cli):
    lines = (TRACES / "s6.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2:2] = ['{"ev": "probe", "seq": 1, "pid": 1}'] * 25
    p = tmp_path / "many.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = dlltrace_cli("report", p)
    err = r.stderr.splitlines()
    assert r.returncode == errors.EXIT_BAD_TRACE and len(err) == 11
    assert err[-1] == f"dlltrace: warning: {p}: 15 more damaged lines or fields not shown"
    assert "✗ mylib.dll was not found" in r.stdout


def test_redact_hides_machine_names_in_unc_paths():
    from types import SimpleNamespace

    from dlltrace.trace.redact import redact

    empty = SimpleNamespace(events=[])
    text = redact(r"found at \\FILESRV01\share\lib\a.dll, probed \??\UNC\FILESRV01\share\b.dll", empty)
    assert "FILESRV01" not in text and r"\\<machine>\share\lib\a.dll" in text
    as_json = redact(json.dumps({"path": "\\\\FILESRV01\\share\\a.dll"}), empty)
    assert "FILESRV01" not in as_json and json.loads(as_json)["path"] == "\\\\<machine>\\share\\a.dll"
    assert redact(r"C:\Windows\System32 and \??\C:\x", empty) == r"C:\Windows\System32 and \??\C:\x"


def test_reading_and_reporting_build_no_reference_cycles():
    """trace.paused_gc freezes what a report leaves alive instead of letting the collector scan it,
    which is only sound if dlltrace's objects are freed by reference counting alone: nothing of
    ours may end up in cyclic garbage (a recursive closure and an observer holding the simulator
    once kept whole replays alive until the collector ran)."""
    import gc

    from dlltrace.render import summary as report_mod
    from dlltrace.render.scenario import explain_scenario
    from dlltrace.trace.reader import read_trace

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for path in sorted(TRACES.glob("s*.jsonl")):
            tr = read_trace(path)
            for fmt in ("text", "markdown", "json"):
                report_mod.produce(tr, fmt, everything=True)
            del tr
        for scenario in sorted((ROOT / "fixtures" / "scenarios").glob("s*.toml")):
            explain_scenario(str(scenario))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = sorted({type(o).__qualname__ for o in gc.garbage
                       if (getattr(type(o), "__module__", "") or "").startswith("dlltrace")
                       or (callable(o) and (getattr(o, "__module__", "") or "").startswith("dlltrace"))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert ours == []


START_TRACE = [
    {"format": "dlltrace-trace", "version": 1, "tool": "dlltrace 0.1.0", "created": None, "platform": "windows"},
    {"ev": "env", "seq": 1, "pid": 40, "tid": 8, "t": 5, "exe": "C:\\app\\app.exe", "cwd": "C:\\work",
     "vars": {"PATH": "C:\\Windows\\system32;C:\\Windows;C:\\tools"}, "dll_directory": None, "user_dirs": None,
     "default_dirs": None, "known_dlls": ["kernel32.dll"], "safe_dll_search_mode": None,
     "system32": "C:\\Windows\\system32", "windows": "C:\\Windows", "windows_version": "10.0.19045",
     "machine": "x64", "wine": None, "modules": None},
    {"ev": "exit", "seq": 0, "pid": 40, "tid": 0, "t": 9, "code": 0xC0000135, "by": "launcher"},
    {"ev": "file", "pid": 40, "seq": 0, "tid": 0, "t": 0, "path": "C:\\app\\app.exe", "kind": "pe",
     "pe": {"machine": "x64", "is_dll": False, "imports": [{"dll": "engine.dll", "names": ["run"], "ordinals": []}]}},
    {"ev": "file", "pid": 40, "seq": 0, "tid": 0, "t": 0, "path": "C:\\sdk\\bin\\engine.dll", "kind": "pe",
     "why": "elsewhere", "pe": {"machine": "x64", "exports": ["run"]}},
]


def test_a_program_that_could_not_start_is_replayed_from_the_launchers_snapshot(tmp_path, capsys):
    p = tmp_path / "start.jsonl"
    p.write_text("\n".join(json.dumps(e) for e in START_TRACE) + "\n", encoding="utf-8")
    text = report(capsys, p)
    assert "✗ engine.dll was not found — it is needed by app.exe" in text
    assert "app.exe and its static imports  → 0xc0000135 STATUS_DLL_NOT_FOUND (error 126)" in text
    rows = folder_rows(text)
    assert [r.split()[2] for r in rows[:6]] == ["application", "System32", "System", "Windows", "current", "PATH[1]"]
    assert "1. Put C:\\sdk\\bin on PATH (this load searches PATH)" in text
    assert "2. Copy C:\\sdk\\bin\\engine.dll into C:\\app" in text  # (next to app.exe: its application folder)
    assert "os.add_dll_directory" not in text  # no Python code runs before a program's static imports
    assert "The loader's own probes were not seen" in text
    md = report(capsys, p, "--markdown")
    assert md.startswith("**dlltrace:** engine.dll was not found — it is needed by app.exe; installed but not searched — "
                         "`app.exe` could not start")


def test_a_program_that_could_not_start_without_a_snapshot_is_still_a_failure(tmp_path, capsys):
    p = tmp_path / "bare.jsonl"
    p.write_text("\n".join(json.dumps(e) for e in (START_TRACE[0], START_TRACE[2])) + "\n", encoding="utf-8")
    text = report(capsys, p)
    assert text.splitlines()[0] == f"dlltrace ─ 1 failed load · {p}"
    assert "✗ process 40 could not start: 0xc0000135 STATUS_DLL_NOT_FOUND" in text


def test_rule_chain_files_carry_their_owner(tmp_path, capsys):
    """Every file of the failing chain that an installed distribution's RECORD lists says whose it is (issue 23:
    'numpy 2.1.3'), read from the trace's py_dists; a file nobody lists says nothing more."""
    hw = handwritten()
    py = "C:\\Python311"
    w, site = python_writer(hw, "import numpy", py)
    pyd = site + "\\numpy\\_core\\_multiarray_umath.cp311-win_amd64.pyd"
    w.ev("py_dists", dists=[{"name": "numpy", "version": "2.1.3", "site": site, "loaders": [],
                             "files": ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd"]}],
         conda=[], conda_prefix=None, cut=False)
    w.failed_import("numpy._core._multiarray_umath", pyd, "libx-1.dll", [site + "\\numpy\\_core", py, hw.SYS32])
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", str(tmp_path / "t.jsonl")])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "_multiarray_umath.cp311-win_amd64.pyd" in line and "given path" in line)
    assert row.rstrip().endswith("(numpy 2.1.3's)"), row
    assert "libx-1.dll" in out and "(numpy 2.1.3's)" not in next(line for line in out.splitlines()
                                                                   if "libx-1.dll" in line and "✗" in line)


def test_a_reinstall_fix_uses_the_traced_pythons_own_pip(tmp_path, capsys):
    """A DLL its distribution's RECORD lists and that is gone: the fix reinstalls that distribution with the traced
    Python's own pip (`C:\\Python311\\python.exe -m pip ...`), not the first `pip` on PATH, which may install into
    another Python (the field test under Wine: psycopg-binary's libcrypto gone, the fix said `pip install ...`)."""
    hw = handwritten()
    py = "C:\\Python311"
    w, site = python_writer(hw, "import numpy", py)
    pyd = site + "\\numpy\\_core\\_multiarray_umath.cp311-win_amd64.pyd"
    w.ev("py_dists", dists=[{"name": "numpy", "version": "2.1.3", "site": site, "loaders": [],
                             "files": ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd", "numpy.libs/libx-1.dll"]}],
         conda=[], conda_prefix=None, cut=False)
    libs = site + "\\numpy.libs"  # (numpy's delvewheel patch adds it at import numpy; the file is gone from it)
    w.ev("py_add_dll_directory", path=libs)
    w.ev("adddir", api="AddDllDirectory", caller=py + "\\python311.dll", path=libs, cookie="0x1", ok=True, error=0)
    w.failed_import("numpy._core._multiarray_umath", pyd, "libx-1.dll", [site + "\\numpy\\_core", py, libs, hw.SYS32])
    w.file(libs + "\\libx-1.dll", kind="missing")
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", str(tmp_path / "t.jsonl")])
    out = capsys.readouterr().out
    assert ("libx-1.dll belongs to numpy 2.1.3 (its RECORD lists numpy.libs/libx-1.dll) and is not there: reinstall it:"
            in out and "C:\\Python311\\python.exe -m pip install --force-reinstall --no-deps numpy==2.1.3\n" in out), out
    cli.main(["report", "--json", str(tmp_path / "t.jsonl")])
    doc = json.loads(capsys.readouterr().out)
    first = doc["calls"][0]["fixes"][0]
    assert (first["action"], first["package"], first["verified"]) == ("install", "numpy", True), first
    assert "C:\\Python311\\python.exe -m pip install --force-reinstall --no-deps numpy==2.1.3" in first["text"], first


def test_a_reinstall_fix_in_a_venv_uses_the_venvs_python(tmp_path, capsys):
    """A Windows venv: its Scripts\\python.exe starts the base interpreter (C:\\Python311\\python.exe, the traced
    process), which runs in the venv (sys.executable, the py_env event's executable, is the venv's python.exe). The
    fix named the base interpreter, whose pip reinstalls numpy into C:\\Python311's site-packages, not the venv's
    where the DLL is gone; now the venv's python.exe."""
    hw = handwritten()
    base, venv = "C:\\Python311", "C:\\work\\venv"
    site = venv + "\\Lib\\site-packages"
    pyd = site + "\\numpy\\_core\\_multiarray_umath.cp311-win_amd64.pyd"
    w = hw.Writer(base + "\\python.exe", "C:\\work", [base, hw.SYS32], [hw.SYS32 + "\\kernel32.dll", base + "\\python311.dll"],
                  [venv + "\\Scripts\\python.exe", "-c", "import numpy"])
    w.ev("py_env", version="3.11.9", implementation="cpython", executable=venv + "\\Scripts\\python.exe", prefix=venv,
         base_prefix=base, exec_prefix=venv, bits=64, conda=False, conda_prefix=None,
         sys_path=[base + "\\python311.zip", base + "\\DLLs", base + "\\Lib", venv, site])
    w.ev("py_dists", dists=[{"name": "numpy", "version": "2.1.3", "site": site, "loaders": [],
                             "files": ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd", "numpy.libs/libx-1.dll"]}],
         conda=[], conda_prefix=None, cut=False)
    libs = site + "\\numpy.libs"
    w.ev("py_add_dll_directory", path=libs)
    w.ev("adddir", api="AddDllDirectory", caller=base + "\\python311.dll", path=libs, cookie="0x1", ok=True, error=0)
    w.failed_import("numpy._core._multiarray_umath", pyd, "libx-1.dll", [site + "\\numpy\\_core", base, libs, hw.SYS32])
    w.file(libs + "\\libx-1.dll", kind="missing")
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", "--json", str(tmp_path / "t.jsonl")])
    first = json.loads(capsys.readouterr().out)["calls"][0]["fixes"][0]
    assert (first["action"], first["package"], first["verified"]) == ("install", "numpy", True), first
    assert first["text"].endswith("reinstall it:  C:\\work\\venv\\Scripts\\python.exe -m pip install --force-reinstall "
                                  "--no-deps numpy==2.1.3"), first["text"]
