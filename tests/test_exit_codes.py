"""Exit codes (README.md, "Exit codes"; tracer/dlltrace/errors.py) and how a traced program ended
(diagnosis/ending.py): every documented code is produced here by the command, and every ending is said in
the run's summary and in `dlltrace report`, never as "every load succeeded".

Without Wine: the codes of dlltrace's own errors, `simulate`'s 0 and 1, and the ending and exit code
`run` takes from a trace's `exit` events (handwritten traces). With Wine (@pytest.mark.wine): a program
that crashes, exits with 1114, is killed, is not a Windows program, runs under a broken WINEPREFIX, gets
Ctrl-C; `dlltrace run` killed (SIGTERM, SIGKILL) and its launcher killed (the job object ends the
program). The Windows program is fixtures/host/endhost.c.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import winetools
from dlltrace import errors
from dlltrace.diagnosis.ending import ending
from dlltrace.render.summary import produce, summarize
from dlltrace.runner import run_exit_code
from dlltrace.trace.launch import run_end_event
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
S1 = ROOT / "fixtures" / "scenarios" / "s1.toml"

# every code of the README table, and the test that produces it (checked against the README below)
TESTED: dict[str, str] = {}


def covers(*codes: str):
    def mark(f):
        for c in codes:
            TESTED[c] = f.__name__
        return f
    return mark


def test_every_code_of_the_readme_table_is_produced_by_a_test():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Exit codes\n")
    section = text[start:text.index("\n## ", start + 1)]
    documented = re.findall(r"^\| ([^|]+?) \| [^|]+ \| ", section, flags=re.M)
    documented = [c for c in documented if c not in ("code", "---")]
    assert documented == ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "130", "137", "128+N", "the program's"]
    assert sorted(documented) == sorted(TESTED), {c: TESTED.get(c) for c in documented}
    # the constants are the table's
    assert (errors.EXIT_OK, errors.EXIT_SIMULATED_FAILURE, errors.EXIT_USAGE, errors.EXIT_BAD_TRACE,
            errors.EXIT_NO_COMMAND, errors.EXIT_OUTPUT, errors.EXIT_NO_WINE, errors.EXIT_UNSUPPORTED,
            errors.EXIT_NOT_RUN, errors.EXIT_INTERNAL, errors.EXIT_NOT_TRACED, errors.EXIT_INTERRUPTED,
            errors.EXIT_KILLED) == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 130, 137)


# --- dlltrace's own codes, no Wine -----------------------------------------------------------------------
OK_SCENARIO = """
[process]
exe = 'C:\\\\app\\\\app.exe'
[[file]]
path = 'C:\\\\app\\\\ok.dll'
[[call]]
op = "LoadLibraryW"
name = "ok.dll"
"""


@covers("0", "1")
def test_simulate_exits_0_when_every_call_succeeds_and_1_when_one_fails(tmp_path, dlltrace_cli):
    ok = tmp_path / "ok.toml"
    ok.write_text(OK_SCENARIO)
    for form in ([], ["--json"]):
        r = dlltrace_cli("simulate", str(ok), *form)
        assert r.returncode == errors.EXIT_OK, r
        r = dlltrace_cli("simulate", str(S1), *form)
        assert r.returncode == errors.EXIT_SIMULATED_FAILURE, r
        assert r.stderr == ""  # not an error of dlltrace's: the report is printed as usual
    assert "1 load simulated, 1 failed" in dlltrace_cli("simulate", str(S1)).stdout
    assert "1 load simulated, 0 failed" in dlltrace_cli("simulate", str(ok)).stdout


@covers("2")
def test_usage_error_is_2(dlltrace_cli, tmp_path):
    assert dlltrace_cli("report").returncode == errors.EXIT_USAGE
    r = dlltrace_cli("simulate", str(tmp_path / "nope.toml"))
    assert r.returncode == errors.EXIT_USAGE and r.stderr.startswith("dlltrace: ") and r.stderr.count("\n") == 1


@covers("3")
def test_unreadable_trace_is_3(dlltrace_cli, tmp_path):
    p = tmp_path / "not.jsonl"
    p.write_text("hello\n")
    r = dlltrace_cli("report", str(p))
    assert r.returncode == errors.EXIT_BAD_TRACE and r.stderr.startswith("dlltrace: ") and r.stdout == ""


@covers("4")
@covers("9")
def test_a_failure_of_dlltraces_own_is_one_line_and_9(tmp_path, monkeypatch, capsys):
    """A bug (an exception dlltrace did not expect) and an install that lacks a module: one line each, exit 9,
    never a traceback; DLLTRACE_DEBUG=1 prints the traceback too."""
    from dlltrace import cli
    from dlltrace.commands import report

    def broken(args):
        raise KeyError("install_driver")

    monkeypatch.setattr(report, "execute", broken)
    assert cli.main(["report", str(ROOT / "fixtures" / "traces" / "s1.jsonl")]) == errors.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("dlltrace: internal error: KeyError: 'install_driver' at ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "please report it" in err

    def lacking(args):
        raise ModuleNotFoundError("No module named 'pefile'", name="pefile")

    monkeypatch.setattr(report, "execute", lacking)
    assert cli.main(["report", str(ROOT / "fixtures" / "traces" / "s1.jsonl")]) == errors.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err == ("dlltrace: this install lacks the module pefile (pip install --force-reinstall dlltrace, or "
                   "pip install pefile)\n"), err
    monkeypatch.setenv("DLLTRACE_DEBUG", "1")
    assert cli.main(["report", str(ROOT / "fixtures" / "traces" / "s1.jsonl")]) == errors.EXIT_INTERNAL
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_no_command_is_4(dlltrace_cli):
    r = dlltrace_cli("run", "--")
    assert r.returncode == errors.EXIT_NO_COMMAND and "no command given" in r.stderr


@covers("5")
@pytest.mark.wine
def test_unwritable_trace_is_5(tmp_path):
    winetools.require("wine")  # past the --wine check, which comes first
    r = winetools.dlltrace("run", "--wine", "-o", str(tmp_path / "no" / "dir" / "t.jsonl"), "--", "x.exe")
    assert r.returncode == errors.EXIT_OUTPUT and r.stderr.startswith("dlltrace: ") and r.stderr.count("\n") == 1


@covers("6")
def test_no_wine_is_6(dlltrace_cli, tmp_path):
    r = dlltrace_cli("run", "--wine", "--", "x.exe", cwd=tmp_path, DLLTRACE_WINE="/no/wine64")
    assert r.returncode == errors.EXIT_NO_WINE and "wine64 is not installed" in r.stderr


@covers("7")
@pytest.mark.wine  # (it reaches find_wine: DLLTRACE_WINE names a program that is not Wine, never run)
def test_unsupported_is_7(dlltrace_cli, tmp_path):
    # an install with no native shim (a py3-none-any wheel's): past the --wine check, no launcher
    r = dlltrace_cli("run", "--wine", "--", "x.exe", cwd=tmp_path, DLLTRACE_WINE="/bin/true",
                     DLLTRACE_BIN=str(tmp_path / "no-bin"))
    assert r.returncode == errors.EXIT_UNSUPPORTED and r.stderr.count("\n") == 1 and "no native shim" in r.stderr
    assert list(tmp_path.iterdir()) == []


# --- the ending and run's code from a trace's facts (handwritten traces) ---------------------------------
HEADER = {"format": "dlltrace-trace", "version": 1, "tool": "dlltrace 0.1.0", "created": None, "platform": "wine"}
PROCESS = {"ev": "process", "seq": 1, "pid": 7, "tid": 1, "t": 0, "ppid": 1, "exe": "C:\\t\\host.exe", "hooks": []}
STATS = {"ev": "stats", "seq": 2, "pid": 7, "tid": 1, "t": 5, "written": 1, "lost": 0, "cut": 0}
PROBE_OK = [{"ev": "load_begin", "seq": 3, "pid": 7, "tid": 1, "t": 1, "api": "LoadLibraryW", "name": "opt.dll",
             "flags": 0, "parent": None, "depth": 0, "ctx": None, "caller": None},
            {"ev": "load_end", "seq": 4, "pid": 7, "tid": 1, "t": 2, "load": 3, "result": None, "error": 126,
             "status": 0xC0000135, "path": None}]


def launcher_exit(code, ended="exited", pid=7):
    return {"ev": "exit", "seq": 0, "pid": pid, "tid": 0, "t": 9, "code": code, "by": "launcher", "ended": ended}


def trace_of(tmp_path, *events, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(e) + "\n" for e in (HEADER, *events)), encoding="utf-8")
    tr = read_trace(p)
    assert tr.warnings == [], tr.warnings
    return tr


def both(tr) -> tuple[str, str]:
    """The run's summary and `dlltrace report`'s text for a trace."""
    return summarize(tr), produce(tr)


CASES = {
    # name: (events, ending kind, run's exit code, words both reports say)
    "exit 0": ([PROCESS, STATS, launcher_exit(0), run_end_event(0, None)], "exited", 0, "every load succeeded"),
    "exit 126": ([PROCESS, STATS, launcher_exit(126), run_end_event(126, None)], "exited", 126,
                 "The program exited with 126; no failed load explains it."),
    "exit 1114": ([PROCESS, STATS, launcher_exit(1114), run_end_event(90, None)], "exited", 90,
                  "The program exited with 1114 (ERROR_DLL_INIT_FAILED: a DLL's initialization routine (DllMain) failed)"),
    "crash": ([PROCESS, launcher_exit(0xC0000005), run_end_event(5, None)], "crashed", 5,
              "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION (an access violation); no failed load explains it."),
    "illegal instruction": ([PROCESS, launcher_exit(0xC000001D), run_end_event(0x1D, None)], "crashed", 0x1D,
                            "0xc000001d STATUS_ILLEGAL_INSTRUCTION (an illegal instruction)"),
    "stack buffer overrun": ([PROCESS, launcher_exit(0xC0000409), run_end_event(9, None)], "crashed", 9,
                             "0xc0000409 STATUS_STACK_BUFFER_OVERRUN (a stack buffer overrun, or a fail-fast exit: "
                             "abort() of a program built with MSVC)"),  # (one pair of parentheses: no nested ones)
    "DLL init failed": ([PROCESS, launcher_exit(0xC0000142), run_end_event(0x42, None)], "crashed", 0x42,
                        "0xc0000142 STATUS_DLL_INIT_FAILED (a DLL's initialization (DllMain) failed)"),
    "killed child": ([PROCESS, launcher_exit(0), run_end_event(0, None)], "killed", errors.EXIT_KILLED,
                     "The program was killed: it ended without exiting"),
    "launcher killed": ([PROCESS, run_end_event(-9, None)], "killed", 128 + 9,
                        "The program was killed with dlltrace's launcher (SIGKILL)"),
    "dlltrace got SIGTERM": ([PROCESS, run_end_event(-9, 15)], "killed", 128 + 15,
                             "The program was ended with dlltrace run, which received SIGTERM"),
    "dlltrace got SIGHUP": ([PROCESS, run_end_event(-9, 1)], "killed", 128 + 1,
                            "The program was ended with dlltrace run, which received SIGHUP"),
    "Ctrl-C": ([PROCESS, STATS, launcher_exit(0xC000013A, "interrupted"), run_end_event(0x3A, 2)], "interrupted", 130,
               "Interrupted: Ctrl-C was passed to the program, which then ended with 0xc000013a STATUS_CONTROL_C_EXIT"),
    "Ctrl-C twice": ([PROCESS, run_end_event(-9, 2)], "interrupted", 130,
                     "Interrupted: Ctrl-C was passed to the program, which did not end on it and was killed"),
    "never ran": ([run_end_event(1, None)], "never_ran", errors.EXIT_NOT_RUN,
                  "The program never ran: Wine exited with 1 before dlltrace's launcher could start it"),
    "not windows": ([launcher_exit(None, "not_windows", pid=0), run_end_event(126, None)], "not_windows",
                    errors.EXIT_NOT_RUN, "The program never ran as a Windows program"),
}


@covers("8", "130", "137", "128+N", "the program's")
@pytest.mark.parametrize("name", CASES)
def test_the_ending_is_said_in_the_summary_and_the_report_and_gives_runs_code(name, tmp_path):
    events, kind, code, words = CASES[name]
    tr = trace_of(tmp_path, *events)
    assert ending(tr).kind == kind
    assert run_exit_code(tr) == code
    for text in both(tr):
        if kind == "exited" and code != 0:  # (the headline, as on Linux: render/outcome.exited_unexplained_words;
            # said once, not again as a line of its own)
            head = "dlltrace ─ t" + words[1:].rstrip(".")
            assert text.startswith(head) and "no failed load explains it" in text.splitlines()[0], text
            assert text.count("no failed load explains it") == 1, text
            continue
        assert words in text, text
        if kind != "exited":
            assert "every load succeeded" not in text, text
            assert text.splitlines()[0].startswith("dlltrace ─ 0 failed loads · "), text


def launcher_warning(message, pid=7):
    return {"ev": "warning", "seq": 0, "pid": pid, "tid": 0, "t": 3, "message": message, "error": 216, "by": "launcher"}


UNTRACED = {
    # name: (the launcher's child_machine, its warning or None, the words of the one line both reports start with)
    "32-bit, no warning": ("x86", None, "the shim was not loaded into this 32-bit process: no 32-bit shim was injected "
                                        "into it; host.exe ran untraced and exited with 3, nothing of its loads is known"),
    "32-bit, warned": ("x86", "could not inject dlltrace_shim32.dll (error 2: the file was not found)",
                       "the shim was not loaded into this 32-bit process: could not inject dlltrace_shim32.dll (error 2: "
                       "the file was not found); host.exe ran untraced and exited with 3"),
    "arm64": ("arm64", None, "dlltrace cannot trace arm64 processes: host.exe is one (unsupported); host.exe ran "
                             "untraced and exited with 3, nothing of its loads is known"),
    "ARM64EC": ("arm64ec", "not injected: an ARM64EC program", "dlltrace cannot trace ARM64EC processes: host.exe is "
                                                               "one (unsupported) (not injected: an ARM64EC program)"),
    "unknown machine": ("unknown", None, "dlltrace cannot trace unknown-machine processes: host.exe is one (unsupported)"),
    "an older launcher": (None, None, "the shim was not loaded into this process: no event of it was written; host.exe "
                                      "ran untraced and exited with 3"),
}


@covers("10")
@pytest.mark.parametrize("name", UNTRACED)
def test_a_run_that_traced_no_load_of_its_process_is_never_success(name, tmp_path):
    """The launcher started the program (its `exit` event has its pid) and no shim `process` event of it is in
    the trace, or the launcher warned that it could not inject: `run` exits 10 whatever the program's own code,
    and the run's summary, the report (text and Markdown) say why in their first line, never "every load
    succeeded (0 loads traced)"."""
    machine, warned, words = UNTRACED[name]
    ex = {**launcher_exit(3, pid=4242), **({"child_machine": machine} if machine else {})}
    events = ([launcher_warning(warned, pid=4242)] if warned else []) + [ex, run_end_event(3, None)]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in ({**HEADER, "command": ["C:\\x\\host.exe", "a"]}, *events)))
    tr = read_trace(p)
    assert tr.warnings == [] and tr.pids == []
    e = ending(tr)
    assert (e.kind, e.code, e.child_machine, e.why) == ("not_traced", 3, machine, warned or "")
    assert run_exit_code(tr) == errors.EXIT_NOT_TRACED == 10
    for text in (*both(tr), produce(tr, "markdown")):
        first = text.splitlines()[0]
        assert words in first, first
        assert "every load succeeded" not in text and "0 loads traced" not in text, text
    (head,) = summarize(tr).splitlines()  # (one line: why it was not traced)
    assert head.startswith(f"dlltrace ─ {words}") and head.endswith(f" · trace saved to {p}"), head
    doc = json.loads(produce(tr, "json"))
    assert doc["ending"]["kind"] == "not_traced" and words in doc["ending"]["text"], doc["ending"]


def test_a_traced_process_whose_launcher_warned_is_not_traced(tmp_path):
    # the shim's process event is there, and the launcher warned it could not inject into the process: untraced
    tr = trace_of(tmp_path, PROCESS, STATS, launcher_warning("injection failed (error 5)"), launcher_exit(0),
                  run_end_event(0, None))
    assert ending(tr).kind == "not_traced" and run_exit_code(tr) == errors.EXIT_NOT_TRACED
    # a warning of another process's does not count; a traced process of the launcher's pid is traced
    tr = trace_of(tmp_path, PROCESS, STATS, launcher_warning("x", pid=8), launcher_exit(0), run_end_event(0, None),
                  name="ok.jsonl")
    assert ending(tr).kind == "exited" and run_exit_code(tr) == 0


def test_a_trace_with_no_traced_process_never_says_every_load_succeeded(tmp_path):
    # no launcher events either (a trace written without dlltrace run, or cut): still no "every load succeeded"
    tr = trace_of(tmp_path, {"ev": "warning", "seq": 1, "pid": 7, "tid": 1, "t": 1, "message": "x"})
    for text in (*both(tr), produce(tr, "markdown")):
        assert "every load succeeded" not in text and text.splitlines()[0].startswith(
            ("dlltrace ─ no process was traced", "**dlltrace:** no process was traced")), text
    from dlltrace.render.diagnosis import diagnoses_lines

    assert diagnoses_lines([]) == ["dlltrace ─ no process was traced: nothing of its loads is known"]


def test_an_older_trace_without_facts_of_its_ending_is_unchanged(tmp_path):
    # an exit event without `ended` (an older launcher), no stats line: not called killed
    tr = trace_of(tmp_path, PROCESS, {"ev": "exit", "seq": 0, "pid": 7, "tid": 0, "t": 9, "code": 0, "by": "launcher"})
    assert ending(tr).kind == "exited"
    assert summarize(tr).splitlines() == [f"dlltrace ─ every load succeeded (0 loads traced) · trace saved to {tr.path}"]
    # no exit event at all (written without dlltrace run): not known, nothing said
    tr = trace_of(tmp_path, PROCESS, name="u.jsonl")
    assert ending(tr).kind == "unknown" and produce(tr).splitlines()[0].startswith("dlltrace ─ every load succeeded")


def test_a_killed_program_did_not_exit_with_0(tmp_path):
    # Wine gives a killed process exit code 0: its loads are not judged as if it had exited with 0
    tr = trace_of(tmp_path, PROCESS, *PROBE_OK, launcher_exit(0), run_end_event(0, None))
    text = produce(tr)
    assert "the program exited with 0" not in text and "The program was killed" in text, text
    assert text.splitlines()[0].startswith("dlltrace ─ 1 failed load · the program was killed · "), text
    # the same load, and the program exited with 0: went past
    tr = trace_of(tmp_path, PROCESS, *PROBE_OK, STATS, launcher_exit(0), run_end_event(0, None), name="ok.jsonl")
    assert "the program exited with 0" in produce(tr) and "was killed" not in produce(tr)


def test_a_crash_after_a_failed_load_names_both(tmp_path):
    tr = trace_of(tmp_path, PROCESS, *PROBE_OK, launcher_exit(0xC0000005), run_end_event(5, None))
    text = summarize(tr)
    assert text.splitlines()[0] == (f"dlltrace ─ 1 failed load · the program crashed (0xc0000005 STATUS_ACCESS_VIOLATION)"
                                    f" · trace saved to {tr.path}")
    assert "the program crashed (0xc0000005 STATUS_ACCESS_VIOLATION), and this is the last failed load" in text
    assert "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION (an access violation)." in text.splitlines()


# --- under Wine -------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def endhost(wine_prefix) -> Path:
    """fixtures/host/endhost.c built with mingw (once per source change), and the shim built."""
    winetools.require("wine", "mingw64")
    from test_shim import build_shim

    build_shim()
    src = ROOT / "fixtures" / "host" / "endhost.c"
    out = winetools.built_once(winetools.CACHE / f"endhost-{winetools.source_key(src)}",
                               lambda d: winetools.mingw_compile([src], d / "endhost.exe", extra=["-municode"]))
    return out / "endhost.exe"


def own_copy(endhost: Path, tmp_path: Path) -> Path:
    """endhost.exe under a name no other process has: its Unix processes are found by it."""
    exe = tmp_path / f"endhost_{uuid.uuid4().hex[:10]}.exe"
    exe.write_bytes(endhost.read_bytes())
    return exe


def unix_pids(exe: Path, arg: int = 0) -> list[int]:
    """The Unix processes whose argument `arg` names the program `exe` (Wine shows a program's Windows
    path as its argv[0]: the program itself; arg 1: its launcher)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                argv = (d / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            if len(argv) > arg and argv[arg].endswith(exe.name) and (arg == 0 or "dlltrace_launch64" in argv[0]):
                out.append(int(d.name))
    return out


def wait_for(cond, timeout=60.0, every=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return bool(cond())


class Run:
    """`python -m dlltrace run --wine -o t.jsonl -- EXE ARGS` in the background, output in files."""

    def __init__(self, tmp_path: Path, exe: Path, *args: str, **env: str):
        self.tmp, self.trace = tmp_path, tmp_path / "t.jsonl"
        self.out, self.err = open(tmp_path / "out.txt", "wb"), open(tmp_path / "err.txt", "wb")
        e = winetools.wine_env(PYTHONPATH=str(ROOT / "tracer"), **env)
        self.proc = subprocess.Popen([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(self.trace), "--",
                                      str(exe), *args], cwd=tmp_path, env=e, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.err)

    def stdout(self) -> str:
        return (self.tmp / "out.txt").read_text(errors="replace").replace("\r\n", "\n")

    def finish(self, timeout=120) -> tuple[int, str]:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.out.close()
            self.err.close()
        return rc, (self.tmp / "err.txt").read_text(errors="replace")


def report_text(dlltrace_cli, trace: Path) -> str:
    r = dlltrace_cli("report", str(trace))
    assert r.returncode == 0, r
    return r.stdout


@pytest.mark.wine
def test_a_crash_is_said_with_its_full_code(endhost, tmp_path, dlltrace_cli):
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(endhost), "crash", cwd=tmp_path)
    assert r.returncode == 0xC0000005 & 0xFF  # the program's code, its low 8 bits (README: Exit codes)
    tr = read_trace(tmp_path / "t.jsonl")
    assert tr.exit_code(tr.pids[0]) == 0xC0000005 and ending(tr).kind == "crashed"
    words = "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION (an access violation); no failed load explains it."
    assert words in r.stderr and "every load succeeded" not in r.stderr, r.stderr
    assert "dlltrace ─ 0 failed loads · the program crashed (0xc0000005 STATUS_ACCESS_VIOLATION) · trace saved to t.jsonl" in r.stderr
    assert words in report_text(dlltrace_cli, tmp_path / "t.jsonl")


@pytest.mark.wine
def test_exit_1114_is_named(endhost, tmp_path, dlltrace_cli):
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(endhost), "exit", "1114", cwd=tmp_path)
    assert r.returncode == 1114 & 0xFF == 90
    words = "the program exited with 1114 (ERROR_DLL_INIT_FAILED: a DLL's initialization routine (DllMain) failed)"
    assert r.stderr.startswith("dlltrace ─ " + words) and "every load succeeded" not in r.stderr, r.stderr
    assert report_text(dlltrace_cli, tmp_path / "t.jsonl").startswith("dlltrace ─ " + words)
    tr = read_trace(tmp_path / "t.jsonl")
    assert tr.exit_code(tr.pids[0]) == 1114 and any(tr.of("stats"))


@pytest.mark.wine
def test_a_program_killed_with_sigkill_is_said_killed(endhost, tmp_path, dlltrace_cli):
    exe = own_copy(endhost, tmp_path)
    run = Run(tmp_path, exe, "pid", "loop")
    assert wait_for(lambda: "looping" in run.stdout()), run.stdout()
    (child,) = unix_pids(exe)  # the Windows program's own Unix process
    os.kill(child, signal.SIGKILL)
    rc, err = run.finish()
    assert rc == errors.EXIT_KILLED, err
    assert "the program was killed" in err.splitlines()[0] and "The program was killed: it ended without exiting" in err
    assert "every load succeeded" not in err and "the program exited with 0" not in err
    tr = read_trace(run.trace)
    assert ending(tr).kind == "killed" and any(tr.of("file"))  # the trace was finished
    assert "The program was killed" in report_text(dlltrace_cli, run.trace)


@pytest.mark.wine
def test_a_bad_wineprefix_is_the_program_never_ran(endhost, tmp_path):
    not_a_dir = tmp_path / "prefix-file"
    not_a_dir.write_text("")
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(endhost), cwd=tmp_path, WINEPREFIX=str(not_a_dir))
    assert r.returncode == errors.EXIT_NOT_RUN, r.stderr
    assert "dlltrace ─ 0 failed loads · the program never ran · trace saved to t.jsonl" in r.stderr
    assert "The program never ran: Wine exited with" in r.stderr and "every load succeeded" not in r.stderr
    # the report's text from the file (`dlltrace report` itself still stops first on a trace with no
    # traced process: commands/report.py, exit 3, "the trace holds no traced process")
    assert "The program never ran: Wine exited with" in produce(read_trace(tmp_path / "t.jsonl"))


@pytest.mark.wine
def test_a_shell_script_with_wine_never_ran_as_a_windows_program(wine_prefix, tmp_path):
    from test_shim import build_shim

    build_shim()
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(script), cwd=tmp_path)
    assert r.returncode == errors.EXIT_NOT_RUN, r.stderr
    assert "the program never ran as a Windows program" in r.stderr.splitlines()[0]
    assert "every load succeeded" not in r.stderr
    assert "The program never ran as a Windows program" in produce(read_trace(tmp_path / "t.jsonl"))  # (as above)


@pytest.mark.wine
def test_ctrl_c_is_passed_to_the_program_and_the_trace_is_finished(endhost, tmp_path, dlltrace_cli):
    exe = own_copy(endhost, tmp_path)
    run = Run(tmp_path, exe, "loop")
    assert wait_for(lambda: "looping" in run.stdout()), run.stdout()
    run.proc.send_signal(signal.SIGINT)  # to dlltrace run only, as `kill -INT`
    rc, err = run.finish()
    assert rc == errors.EXIT_INTERRUPTED, err
    assert f"interrupted (Ctrl-C) · trace saved to {run.trace}" in err.splitlines()[0], err
    assert "Interrupted: Ctrl-C was passed to the program, which then ended with" in err
    assert wait_for(lambda: not unix_pids(exe), timeout=10)
    tr = read_trace(run.trace)
    # the launcher outlived the Ctrl-C to record the program's end ("interrupted" when its own Ctrl-C
    # handler ran before it saw the program end: the two race under Wine; dlltrace's `signal` says it)
    (launcher,) = [e for e in tr.of("exit") if e["by"] == "launcher"]
    assert launcher["ended"] in ("interrupted", "exited") and launcher["pid"] == tr.pids[0]
    (mine,) = [e for e in tr.of("exit") if e["by"] == "dlltrace"]
    assert mine["signal"] == signal.SIGINT and mine["launcher_status"] >= 0
    assert any(tr.of("file"))  # the facts were appended
    assert "Interrupted" in report_text(dlltrace_cli, run.trace)


@pytest.mark.wine
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_killing_dlltrace_run_ends_the_program(endhost, tmp_path, how):
    exe = own_copy(endhost, tmp_path)
    run = Run(tmp_path, exe, "loop")
    assert wait_for(lambda: "looping" in run.stdout()), run.stdout()
    assert unix_pids(exe)
    run.proc.send_signal(getattr(signal, how))
    rc, err = run.finish()
    assert wait_for(lambda: not unix_pids(exe), timeout=10), "the program outlived dlltrace run"
    size = run.trace.stat().st_size
    time.sleep(1)
    assert run.trace.stat().st_size == size  # nothing appends to the trace any more
    if how == "SIGTERM":  # dlltrace run ends the launcher, finishes the trace and says so
        assert rc == 128 + 15, err
        assert "The program was ended with dlltrace run, which received SIGTERM" in err
        assert any(read_trace(run.trace).of("file"))
    else:
        assert rc == -signal.SIGKILL


@pytest.mark.wine
def test_the_launcher_killed_ends_the_program_through_its_job(endhost, tmp_path):
    """The program's Unix process is not the launcher's child (Wine starts it apart): only the job object
    the launcher holds it in (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) ends it with the launcher."""
    exe = own_copy(endhost, tmp_path)
    run = Run(tmp_path, exe, "loop")
    assert wait_for(lambda: "looping" in run.stdout()), run.stdout()
    (launcher,) = unix_pids(exe, arg=1)
    (program,) = unix_pids(exe)
    assert Path(f"/proc/{program}/stat").read_text().split()[3] != str(launcher)  # not its Unix parent
    os.kill(launcher, signal.SIGKILL)
    rc, err = run.finish()
    assert wait_for(lambda: not unix_pids(exe), timeout=10), "the program outlived its launcher"
    assert rc == 128 + 9 and "The program was killed with dlltrace's launcher (SIGKILL)" in err, err
    assert not [w for w in read_trace(run.trace).of("warning") if "job" in w.get("message", "")]


@pytest.mark.parametrize("name", CASES)
def test_the_ending_is_in_the_markdown_and_json_reports_too(name, tmp_path, dlltrace_cli):
    """`dlltrace report` on the trace (a never-ran trace has no traced process, and is reported): the
    Markdown says the same words, and the JSON has the ending as a typed fact."""
    events, kind, code, words = CASES[name]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in (HEADER, *events)), encoding="utf-8")
    md = dlltrace_cli("report", str(p), "--markdown")
    assert md.returncode == 0, md.stderr
    assert words in md.stdout, md.stdout
    if kind != "exited":
        assert "every load succeeded" not in md.stdout
    js = dlltrace_cli("report", str(p), "--json")
    assert js.returncode == 0, js.stderr
    end = json.loads(js.stdout)["ending"]
    assert end["kind"] == kind
    assert (words in end["text"]) == (kind != "exited" or code not in (0,)), end


def test_rule_deps_under_an_address_space_limit_is_not_an_internal_error(tmp_path):
    """Issue 28 item 10: under `ulimit -v 1 GiB` the command's worker thread could not reserve its 1 GiB stack
    ("can't start new thread": exit 9, an internal error); it takes a smaller stack (and a recursion limit in
    proportion) and runs."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    d = tmp_path / "pkg"
    d.mkdir()
    (d / "x.txt").write_text("no DLL here\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(d)], capture_output=True, text=True, timeout=120,
                       preexec_fn=limit, env={**__import__("os").environ, "PYTHONPATH": str(root / "tracer")})
    assert r.returncode != 9 and "internal error" not in r.stderr, (r.returncode, r.stderr)


@covers("9")
def test_an_install_without_pefile_says_so_not_that_every_file_is_corrupt(tmp_path, monkeypatch, capsys):
    """pefile is imported where a PE is parsed (pe._read), inside read_pe_facts' net for malformed input: an install
    lacking it must still be cli's one line and exit 9 (it read every DLL as 'not a valid PE image', exit 0)."""
    from tinype import tiny_dll
    from dlltrace import cli
    from dlltrace.pe import pe_facts_from_bytes

    dll = tmp_path / "a.dll"
    dll.write_bytes(tiny_dll("a.dll"))
    monkeypatch.setitem(sys.modules, "pefile", None)  # (import pefile: ModuleNotFoundError, name 'pefile')
    assert cli.main(["deps", "--no-cache", str(dll)]) == errors.EXIT_INTERNAL
    out = capsys.readouterr()
    assert out.err == ("dlltrace: this install lacks the module pefile (pip install --force-reinstall dlltrace, or "
                       "pip install pefile)\n"), out
    with pytest.raises(ModuleNotFoundError):
        pe_facts_from_bytes(dll.read_bytes())


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device every write to fails with ENOSPC)")
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--markdown"]])
def test_a_stdout_that_cannot_be_written_is_one_line_and_5(fmt):
    """`dlltrace report T > FILE` on a full disk (here /dev/full): the one line `cannot write the output (stdout)`
    and exit 5, the code the README gives an output that cannot be written. (Before: "internal error ... a bug in
    dlltrace", exit 9, for a report bigger than stdout's buffer; a smaller one was lost at exit, exit 120.)"""
    trace = ROOT / "fixtures" / "traces" / "s1.jsonl"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace), *fmt], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == errors.EXIT_OUTPUT, r.stderr
    assert r.stderr == "dlltrace: cannot write the output (stdout): No space left on device\n"


def test_the_process_ends_with_its_output_written_and_its_atexit_functions_run(tmp_path):
    """The `dlltrace` process ends without the interpreter's finalization (cli.end: os._exit once the work is
    done): what it printed is all written, a thread still running is waited for, and the atexit functions run
    (a temporary folder's finalizer removes it)."""
    trace = ROOT / "fixtures" / "traces" / "s1.jsonl"
    code = ("import atexit, sys, tempfile, threading, time\n"
            "from dlltrace import cli\n"
            "tmp = tempfile.TemporaryDirectory()\n"
            "open(tmp.name + '/x', 'w').close()\n"
            "print(tmp.name, file=sys.stderr)\n"
            "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', file=sys.stderr))).start()\n"
            f"sys.argv = ['dlltrace', 'report', {str(trace)!r}, '--json']\n"
            "sys.exit(cli.entry())\n"
            "print('not reached', file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    folder, *said = r.stderr.splitlines()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["failed"] == [0]  # (the whole document written: it parses)
    assert said == ["thread done", "atexit ran"]
    assert not os.path.exists(folder)


def test_a_failed_command_ends_with_its_code_and_one_line(tmp_path):
    """cli.end passes the command's own code through os._exit: a trace that is not one is exit 3, one line."""
    bad = tmp_path / "t.jsonl"
    bad.write_text("not a trace\n")
    r = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(bad)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == errors.EXIT_BAD_TRACE and r.stderr.count("\n") == 1 and r.stderr.startswith("dlltrace: ")


@pytest.mark.skipif(sys.platform == "win32", reason="closes a file descriptor in the child (POSIX)")
@pytest.mark.parametrize("closed, argv, rc", [
    ((1,), ["help"], 0),  # `dlltrace help >&-`: Python's sys.stdout is None (argparse then writes nowhere)
    ((2,), ["help"], 0),  # `2>&-`: sys.stderr is None
    ((1, 2), ["report", "none.jsonl"], errors.EXIT_USAGE),  # the command's own code, nobody to say its line to
])
def test_a_closed_stdout_or_stderr_keeps_the_command_s_code(closed, argv, rc, tmp_path):
    """A stream closed before dlltrace starts (`>&-`, `2>&-`) is None in sys: cli.end flushes what is there,
    never a traceback about None.flush (exit 1) in place of the command's code."""
    def close() -> None:
        for fd in closed:
            os.close(fd)

    r = subprocess.run([sys.executable, "-m", "dlltrace", *argv], preexec_fn=close, cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == rc, r.stderr
    assert "Traceback" not in r.stderr


def test_the_process_ends_with_a_thread_pool_left_open():
    """A ThreadPoolExecutor never shut down (a library's) has idle worker threads that are not daemons: the
    interpreter's exit wakes them (threading._shutdown runs the callbacks concurrent.futures registers) before it
    joins them. cli.end does the same; joining them without it waited forever."""
    trace = ROOT / "fixtures" / "traces" / "s1.jsonl"
    code = ("import sys\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "pool = ThreadPoolExecutor(2)\n"
            "pool.submit(print, 'task ran', file=sys.stderr).result()\n"
            "from dlltrace import cli\n"
            f"sys.argv = ['dlltrace', 'report', {str(trace)!r}, '--json']\n"
            "sys.exit(cli.entry())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "task ran\n", r.stderr
    assert json.loads(r.stdout)["failed"] == [0]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process: POSIX")
def test_ctrl_c_while_the_process_waits_for_a_thread_at_its_end_is_130_without_a_traceback():
    """cli.end waits for the threads still running (as the interpreter's exit does); a Ctrl-C then ends the process
    at once with 130, its output written, never a traceback (the review: KeyboardInterrupt came out of end())."""
    import time

    trace = ROOT / "fixtures" / "traces" / "s1.jsonl"
    code = ("import sys, threading, time\n"
            "def slow():\n"
            "    print('waiting', file=sys.stderr, flush=True)\n"
            "    time.sleep(20)\n"
            "threading.Thread(target=slow).start()\n"
            "from dlltrace import cli\n"
            f"sys.argv = ['dlltrace', 'report', {str(trace)!r}, '--json']\n"
            "sys.exit(cli.entry())\n")
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr.readline() == "waiting\n"
    time.sleep(3)  # (the report made and printed into stdout's buffer: the process is in cli.end, waiting)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err
    assert json.loads(out)["failed"] == [0] and time.monotonic() - t < 15
