"""`dlltrace run`: the acceptance command under Wine, exit codes, bad input (one line, distinct code)."""

from __future__ import annotations

import argparse
import json
import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

import winetools
from dlltrace import errors
from dlltrace.commands import run
from dlltrace import runner
from dlltrace.trace import launch
from dlltrace.trace.reader import read_trace
from test_shim import HOST, shim_env, w  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parent.parent


dlltrace = winetools.dlltrace


@pytest.mark.wine
def test_acceptance_missing_leaf(shim_env, tmp_path):
    host = winetools.drive_c() / "dlltrace-shim/host/loadhost.exe"  # a Linux path: run passes it as Z:\...
    r = dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(host), "load", w("chain", "top.dll"), "0x1100", cwd=tmp_path)
    assert r.returncode == 126, r.stderr
    assert r.stdout.replace("\r\n", "\n") == "load err 126\n"  # the child's stdout, passed through
    assert r.stderr.splitlines()[0] == "dlltrace ─ 1 failed load · trace saved to t.jsonl"  # the report
    assert "✗ leaf.dll was not found — it is needed by mid.dll" in r.stderr
    tr = read_trace(tmp_path / "t.jsonl")
    assert tr.header.tool.startswith("dlltrace ") and tr.header.platform == "wine"
    (load,) = tr.loads()
    assert (load.api, load.flags, load.error) == ("LoadLibraryExW", 0x1100, 126)
    leaf = [p.win_path.lower() for p in load.probes if p.op == "open" and p.win_path.lower().endswith("\\leaf.dll")]
    app_dir = launch.to_wine_path(host.parent).lower()
    assert leaf == [w("chain", "leaf.dll").lower(), app_dir + "\\leaf.dll", "c:\\windows\\system32\\leaf.dll"]


@pytest.mark.wine
def test_crash_exit_status_and_default_trace_name(shim_env, tmp_path):
    r = dlltrace("run", "--wine", "--", HOST, "load", "C:\\nope.dll", "0", "crash", cwd=tmp_path)
    (trace_file,) = tmp_path.glob("dlltrace-loadhost-*")
    assert trace_file.name.endswith(".jsonl.gz")  # compressed by default, the spill (.part) gone
    assert f"trace saved to {trace_file.name}" in r.stderr
    assert r.returncode == 0xC0000005 & 0xFF  # the child's status as wine64 passes it on (low 8 bits)
    assert r.stdout.replace("\r\n", "\n").startswith("load err 126\ncrash\n")  # then winedbg's dump
    tr = read_trace(trace_file)
    assert [ld.error for ld in tr.loads()] == [126]
    assert tr.exit_code(tr.pids[0]) == 0xC0000005
    # the summary names the crash with its full code (README: Exit codes), in its first line and its last
    (head,) = [line for line in r.stderr.splitlines() if line.startswith("dlltrace ─ ")]  # (after Wine's own line)
    assert "the program crashed (0xc0000005 STATUS_ACCESS_VIOLATION)" in head
    assert "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION (an access violation)." in r.stderr.splitlines()


@pytest.mark.wine
def test_command_that_does_not_exist_under_wine(shim_env, tmp_path):
    r = dlltrace("run", "--wine", "-o", "t.jsonl", "--", "C:\\no\\such.exe", cwd=tmp_path)
    assert r.returncode == errors.EXIT_NO_COMMAND
    assert r.stderr.count("\n") == 1 and "C:\\no\\such.exe" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.wine
def test_output_through_a_pipe_ends_when_the_program_does(shim_env, tmp_path):
    """On a new persistent wineserver, the first program starts Wine's services, which inherit its
    stdout; `dlltrace run` starts them detached first, so a reader of its piped output gets EOF as
    soon as dlltrace exits (CI once waited 300 s here). Needs a server with no services yet: the
    test prefix's server is restarted for it (no test runs beside it), then set up as before."""
    env = winetools.wine_env(PYTHONPATH=str(ROOT / "tracer"))
    try:
        winetools.restart_server(services=False)  # persistent, no services
        assert not launch.wine_services_running(env)  # (so `run` starts them first, detached)
        host = winetools.drive_c() / "dlltrace-shim/host/loadhost.exe"  # reached as Z:\...
        proc = subprocess.Popen([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", "t.jsonl", "--",
                                 str(host), "load", "C:\\nope.dll", "0"], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=120)  # EOF on both pipes, not just the exit
        finally:
            proc.kill()
        assert proc.returncode == 126, err
        assert out.replace("\r\n", "\n") == "load err 126\n" and "trace saved to t.jsonl" in err
        assert launch.wine_services_running(env)  # (the next piped run needs no extra Wine program)
    finally:
        winetools.restart_server(services=True)  # the services the other tests expect, on no pipe


@pytest.mark.wine
def test_a_program_whose_static_import_fails_is_explained(shim_env, tmp_path, dlltrace_cli):
    """needstop.exe imports top.dll, which needs mid.dll, which needs leaf.dll (nowhere): the process
    ends with STATUS_DLL_NOT_FOUND before its entry point, so its shim never starts. The launcher
    records the child's environment, `run` stores the facts of its import tree, and the report
    replays the static imports: leaf, chain and folders, also from the file alone."""
    import json

    r = dlltrace("run", "--wine", "-o", "t.jsonl", "--", w("chain", "needstop.exe"), cwd=tmp_path)
    assert r.returncode == 0xC0000135 & 0xFF, r.stderr
    assert r.stdout == ""  # main never ran
    assert "✗ leaf.dll was not found — it is needed by mid.dll" in r.stderr
    assert "0xc0000135 STATUS_DLL_NOT_FOUND" in r.stderr and "Traceback" not in r.stderr
    tr = read_trace(tmp_path / "t.jsonl")
    assert tr.warnings == [] and tr.pids == []  # no shim started
    (pid,) = tr.start_failures()
    env = tr.env(pid)
    assert env["exe"].lower() == w("chain", "needstop.exe").lower() and env["modules"] is None
    assert env["cwd"].lower().rstrip("\\") == launch.to_wine_path(tmp_path).lower().rstrip("\\")

    rep = dlltrace_cli("report", "--json", "t.jsonl", cwd=tmp_path, WINEPREFIX=str(tmp_path / "no-such-prefix"))
    assert rep.returncode == 0, rep.stderr
    (call,) = json.loads(rep.stdout)["calls"]
    assert (call["op"], call["error"], call["real_error"]) == ("start", 126, 126)
    assert call["chain"] == ["needstop.exe", "top.dll", "mid.dll", "leaf.dll"]
    assert call["leaf"]["cause"] == "not_found" and call["leaf"]["parent"] == "mid.dll"
    # the process-start order: the program's folder first (not mid.dll's), then the system folders
    cands = [(c["path"].lower(), c["rule"]) for c in call["candidates"]]
    assert cands[0] == (w("chain", "leaf.dll").lower(), "application folder")
    assert cands[1][1] == "System32" and call["disagreements"] == []


def _fake_process(proc: Path, pid: int, comm: str, **environ: str) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items()))


def test_wine_services_running_reads_the_prefix_of_each_services_exe(tmp_path):
    proc, prefix, home = tmp_path / "proc", tmp_path / "prefix", tmp_path / "home"
    proc.mkdir()
    (proc / "self").mkdir()  # (not a pid: skipped)
    assert not launch.wine_services_running({"WINEPREFIX": str(prefix)}, proc)
    _fake_process(proc, 10, "winedevice.exe", WINEPREFIX=str(prefix))  # not services.exe
    _fake_process(proc, 11, "services.exe", WINEPREFIX=str(tmp_path / "another"), HOME=str(home))
    _fake_process(proc, 12, "services.exe", HOME=str(tmp_path / "elsewhere"))
    assert not launch.wine_services_running({"WINEPREFIX": str(prefix)}, proc)
    assert not launch.wine_services_running({"HOME": str(home)}, proc)  # ~/.wine: no services.exe of it
    _fake_process(proc, 13, "services.exe", WINEPREFIX=str(prefix) + "/", HOME=str(home))
    assert launch.wine_services_running({"WINEPREFIX": str(prefix)}, proc)  # (the same folder, spelled otherwise)
    _fake_process(proc, 14, "services.exe", HOME=str(home))  # no WINEPREFIX: $HOME/.wine
    assert launch.wine_services_running({"HOME": str(home)}, proc)
    assert launch.wine_services_running({"WINEPREFIX": str(home / ".wine")}, proc)
    assert not launch.wine_services_running({"WINEPREFIX": str(prefix)}, tmp_path / "no-proc")


def test_run_launcher_calls_while_running_during_the_run(tmp_path):
    """`run` imports what follows the program while it runs (commands/run.py: import_what_follows): the
    callback comes after the launcher started and before its end, once; one that fails changes nothing."""
    flag = tmp_path / "go"
    # the child waits for the callback's file, so a callback called after the child ended would hang it
    wait = [sys.executable, "-c", f"import os,sys,time\nt=time.time()+60\n"
                                  f"while not os.path.exists({str(flag)!r}) and time.time()<t: time.sleep(0.01)\n"
                                  f"sys.exit(3 if os.path.exists({str(flag)!r}) else 5)"]
    seen = []
    status, got = launch.run_launcher(wait, dict(os.environ), lambda: (seen.append(1), flag.write_text("x")))
    assert (status, got, seen) == (3, None, [1])

    def fails():
        raise RuntimeError("not imported")

    assert launch.run_launcher([sys.executable, "-c", "raise SystemExit(4)"], dict(os.environ), fails) == (4, None)


def test_the_launcher_starts_before_the_heavy_imports():
    """What `run --wine` imports before the launcher starts (trace/launch.py and what it imports) holds no
    reader, model, diagnosis, renderer, dataclasses or rich: those are imported while the program runs
    (bench/wine_run.py: ~0.1 s of CPU that once came before the program started)."""
    code = ("import sys\nfrom dlltrace.commands import run\nfrom dlltrace.trace import launch\n"
            "print(sorted(sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(launch.__file__).parents[2])})
    assert r.returncode == 0, r.stderr
    mods = set(eval(r.stdout.strip().splitlines()[-1]))
    assert "dlltrace.trace.launch" in mods
    heavy = {"dlltrace.model", "dlltrace.trace.reader", "dlltrace.trace.redact", "dlltrace.winapi", "dlltrace.runner",
             "dataclasses", "ctypes", "rich", "pefile"}
    assert not heavy & mods
    assert not [m for m in mods if m.startswith(("dlltrace.diagnosis", "dlltrace.render", "dlltrace.loader"))]


def test_a_summary_of_lines_alone_imports_no_rich(tmp_path):
    """`run`'s summary of a run whose loads all succeeded is one line: render/runsummary.py renders it
    without rich (its console is made for a table or a tree only) and without report's CUDA, JSON and
    Markdown renderers."""
    p = tmp_path / "t.jsonl"
    p.write_text(OK_SAMPLE)
    code = ("import sys\nfrom dlltrace.render.runsummary import summarize\nfrom dlltrace.trace.reader import read_trace\n"
            f"print(summarize(read_trace({str(p)!r})))\nprint(sorted(sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(launch.__file__).parents[2])})
    assert r.returncode == 0, r.stderr
    *text, mods = r.stdout.strip().splitlines()
    assert text == [f"dlltrace ─ every load succeeded (1 load traced) · trace saved to {p}"]
    assert not [m for m in eval(mods) if m.split(".")[0] == "rich" or m in (
        "dlltrace.render.cuda", "dlltrace.render.json", "dlltrace.render.markdown", "dlltrace.render.summary")]


def test_holds_a_pipe(tmp_path):
    r, w_ = os.pipe()
    try:
        assert launch.holds_a_pipe((w_,)) and launch.holds_a_pipe((r,))
    finally:
        os.close(r)
        os.close(w_)
    with open(tmp_path / "f", "w") as f:
        assert not launch.holds_a_pipe((f.fileno(),))
    assert not launch.holds_a_pipe((987654,))  # a closed descriptor is not a pipe


@pytest.mark.parametrize("argv, env, code, text", [
    (["run"], {}, errors.EXIT_NO_COMMAND, "no command given"),
    (["run", "--"], {}, errors.EXIT_NO_COMMAND, "no command given"),
    # the --wine check comes first: past it only with wine64 installed
    pytest.param(["run", "--wine", "--", "/no/such/prog.exe"], {}, errors.EXIT_NO_COMMAND,
                 "command not found: /no/such/prog.exe", marks=pytest.mark.wine, id="wine-command-not-found"),
    (["run", "--wine", "--", "x.exe"], {"DLLTRACE_WINE": "/no/wine64"}, errors.EXIT_NO_WINE, "wine64 is not installed"),
    (["run", "--", "no-such-command-xyz"], {}, errors.EXIT_NO_COMMAND, "command not found: no-such-command-xyz"),
])
def test_bad_input_one_line_and_distinct_code(argv, env, code, text, tmp_path, request, dlltrace_cli):
    if request.node.get_closest_marker("wine"):
        winetools.require("wine")
    r = dlltrace_cli(*argv, cwd=tmp_path, **env)
    assert r.returncode == code
    assert r.stderr.startswith("dlltrace: ") and r.stderr.count("\n") == 1 and text in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []  # no trace left behind for input errors


@pytest.mark.wine
def test_unwritable_trace_path(tmp_path):
    winetools.require("wine")  # to get past the --wine check, which comes first
    r = dlltrace("run", "--wine", "-o", str(tmp_path / "no" / "dir" / "t.jsonl"), "--", "x.exe")
    assert r.returncode == errors.EXIT_OUTPUT
    assert r.stderr.count("\n") == 1 and "cannot write the trace file" in r.stderr


def test_default_trace_name_and_wine_args(tmp_path):
    now = datetime.datetime(2026, 11, 29, 16, 23, 1)
    assert launch.default_trace_name(["C:\\Py\\python.exe", "-c", "x"], now) == "dlltrace-python-20261129-162301.jsonl.gz"
    assert launch.default_trace_name(["./my prog.EXE"], now) == "dlltrace-my_prog-20261129-162301.jsonl.gz"
    f = tmp_path / "a.dll"
    f.write_text("")
    assert launch.wine_command_args([str(f), "C:\\x.dll", "/no/such", "0x1100"]) == [
        "Z:" + str(f).replace("/", "\\"), "C:\\x.dll", "/no/such", "0x1100"]
    assert launch.is_python_command(["C:\\Python311\\python.exe"]) and launch.is_python_command(["python3.11"])
    assert not launch.is_python_command(["pythonista.exe"])
    env = launch.child_env({"PYTHONPATH": "X"}, "C:\\t.jsonl", ["python"], windows=True)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(launch.BOOTSTRAP), "X"] and env["DLLTRACE_TRACE"] == "C:\\t.jsonl"
    assert "PYTHONPATH" not in launch.child_env({}, "t", ["host.exe"], windows=True)
    # --wine: a Windows Python sees the bootstrap through Z:, and keeps what of PYTHONPATH is not a Unix path
    wine = launch.child_env({"PYTHONPATH": "/x/tracer;C:\\lib"}, "t", ["python.exe"], windows=False)
    assert wine["PYTHONPATH"].split(";") == [launch.to_wine_path(launch.BOOTSTRAP), "C:\\lib"]
    assert wine["PYTHONPATH"].startswith("Z:\\")
    assert "PYTHONPATH" not in launch.child_env({}, "t", ["host.exe"], windows=False)
    assert (launch.BOOTSTRAP / "sitecustomize.py").is_file()


SAMPLE = """{"format":"dlltrace-trace","version":1,"tool":"dlltrace 0.1.0","created":null,"platform":"wine"}
{"ev":"process","seq":1,"pid":7,"tid":1,"t":0,"ppid":1,"exe":"C:\\\\t\\\\host.exe","hooks":[]}
{"ev":"load_begin","seq":3,"pid":7,"tid":1,"t":1,"api":"LoadLibraryExW","name":"C:\\\\t\\\\top.dll","flags":4352,"parent":null,"depth":0,"ctx":null,"caller":null}
{"ev":"load_end","seq":9,"pid":7,"tid":1,"t":2,"load":3,"result":null,"error":126,"status":3221225781,"path":null}
{"ev":"load_begin","seq":12,"pid":7,"tid":1,"t":5,"api":"LoadLibraryA","name":"dies.dll","flags":0,"parent":null,"depth":0,"ctx":null,"caller":null}
"""

# a run whose one load succeeded (as the shim, the launcher and dlltrace write it)
OK_SAMPLE = r'''{"format":"dlltrace-trace","version":1,"tool":"dlltrace 0.1.0","created":null,"platform":"wine"}
{"ev":"process","seq":1,"pid":1296,"tid":1316,"t":35061755675900,"ppid":1288,"exe":"C:\\dlltrace-shim\\host\\loadhost.exe","cmdline":"C:\\dlltrace-shim\\host\\loadhost.exe load C:\\dlltrace-shim\\lib\\a.dll 0","shim":"Z:\\x\\dlltrace_shim64.dll","shim_version":"0.1.0","via":"launcher","hooks":["LoadLibraryExW","LoadLibraryExA","LoadLibraryW","LoadLibraryA","AddDllDirectory","RemoveDllDirectory","SetDllDirectoryW","SetDllDirectoryA","SetDefaultDllDirectories","FreeLibrary","SetEnvironmentVariableW","SetEnvironmentVariableA","LdrLoadDll","NtOpenFile","NtCreateFile","NtQueryAttributesFile","NtCreateSection","CreateProcessInternalW"]}
{"ev":"load_begin","seq":4,"pid":1296,"tid":1316,"t":35061756238200,"api":"LoadLibraryExW","name":"C:\\dlltrace-shim\\lib\\a.dll","flags":0,"parent":null,"depth":0,"ctx":null,"caller":"C:\\dlltrace-shim\\host\\loadhost.exe"}
{"ev":"probe","seq":5,"pid":1296,"tid":1316,"t":35061756341000,"load":4,"op":"open","path":"\\??\\C:\\dlltrace-shim\\lib\\a.dll","status":0,"handle":"0x44"}
{"ev":"probe","seq":6,"pid":1296,"tid":1316,"t":35061756412300,"load":4,"op":"section","status":0,"handle":"0x48","file":"0x44"}
{"ev":"dll_notify","seq":7,"pid":1296,"tid":1316,"t":35061757870600,"load":4,"reason":"loaded","path":"C:\\dlltrace-shim\\lib\\a.dll","base":"0x3bf6d0000"}
{"ev":"load_end","seq":8,"pid":1296,"tid":1316,"t":35061757888500,"load":4,"result":"0x3bf6d0000","error":0,"status":0,"path":"C:\\dlltrace-shim\\lib\\a.dll"}
{"ev":"stats","seq":9,"pid":1296,"tid":1316,"t":35061758173100,"written":8,"lost":0,"cut":0,"dropped":0}
{"ev":"exit","seq":0,"pid":1296,"tid":0,"t":35061758326400,"code":0,"by":"launcher","ended":"exited","child_machine":"x64"}
{"ev": "exit", "seq": 0, "pid": 0, "tid": 0, "t": 0, "code": null, "by": "dlltrace", "launcher_status": 0, "signal": null}
'''


def test_run_summary_names_every_failed_load_and_the_saved_trace(tmp_path):
    # what `dlltrace run` prints at the end (render.summary.summarize), here for a trace without file
    # facts: the load the process never returned from is the failure; the one it went past is listed
    # apart (docs/verdicts.md)
    from dlltrace.render.summary import summarize

    p = tmp_path / "t.jsonl"
    p.write_text(SAMPLE)
    text = summarize(read_trace(p))
    assert text.splitlines()[0] == f"dlltrace ─ 1 failed load · 1 probed, absent, the program went on · trace saved to {p}"
    assert "LoadLibraryA(dies.dll, 0x0)  → (no return: the process ended)" in text
    assert "The failure the program hit: the process ended inside this load" in text
    (apart,) = [line for line in text.splitlines() if "top.dll" in line]
    assert "LoadLibraryExW(C:\\t\\top.dll, 0x1100)  → 126 · the program went past it; dies.dll was the failure" in apart


def test_file_facts_follow_a_line_cut_short(tmp_path, monkeypatch):
    # the program died mid-write: the facts `run` appends must not be glued to the cut line
    import dlltrace.diagnosis.collect

    cut = SAMPLE.rstrip("\n")[:-20]
    p = tmp_path / "t.jsonl"
    p.write_text(cut)
    fact = {"ev": "file", "path": "C:\\t\\top.dll", "kind": "missing", "pid": 7, "seq": 0, "tid": 0, "t": 0}
    monkeypatch.setattr(dlltrace.diagnosis.collect, "collect_facts", lambda trace, to_host, **kw: [dict(fact)])
    in_memory = runner.append_facts(p, read_trace(p), wine=False)
    again = read_trace(p)
    assert again.events[-1] == fact and in_memory.events == again.events
    assert [w.split(": ", 1)[1] for w in again.warnings] == ["line 5: unreadable line skipped"]


def test_command_parsing():
    parser = argparse.ArgumentParser()
    run.configure_parser(parser)
    a = parser.parse_args(["-o", "x.jsonl", "--wine", "--", "host.exe", "-o", "--wine"])
    assert (a.output, a.wine, run.command_of(a)) == ("x.jsonl", True, ["host.exe", "-o", "--wine"])
    with pytest.raises(errors.DlltraceError) as e:
        run.command_of(parser.parse_args([]))
    assert e.value.exit_code == errors.EXIT_NO_COMMAND


@pytest.mark.parametrize("error, wine, words", [
    (1359, True, "could not start C:\\x\\prog.exe: its process ended while it was being created (1359 An internal "
                 "error occurred.); nothing of the program ran (under Wine most often Wine's own start-up failing: "
                 "run it again); trace in "),
    (1359, False, "could not start C:\\x\\prog.exe: its process ended while it was being created (1359 An internal "
                  "error occurred.); nothing of the program ran; trace in "),
    (2, True, "command not found or not startable: C:\\x\\prog.exe (2 The system cannot find the file specified.); "
              "trace in "),
])
def test_a_program_that_could_not_be_started_is_said_by_its_error(tmp_path, error, wine, words):
    """The launcher's launch_error: CreateProcess's 1359 (the new process ended before it was initialised: under
    Wine its own start-up failure, seen in a cold CI run) is not "not found"; one line, the exit code of a command that could not start, the trace kept."""
    from dlltrace.trace.files import header_line

    spill = tmp_path / "t.jsonl"
    spill.write_text(header_line("windows", ["C:\\x\\prog.exe"]) + json.dumps(
        {"ev": "launch_error", "seq": 1, "pid": 7, "tid": 8, "t": 1, "cmdline": "C:\\x\\prog.exe", "error": error})
        + "\n")
    with pytest.raises(errors.DlltraceError) as e:
        runner.finish_launched(launch.LauncherRun(spill, spill, wine, {}, "C:\\x\\prog.exe"))
    assert str(e.value).startswith(words) and "\n" not in str(e.value), str(e.value)
    assert e.value.exit_code == errors.EXIT_NO_COMMAND and spill.exists()
