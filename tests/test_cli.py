"""The dlltrace command as a user runs it: output, exit codes, and one-line errors for bad input.

The command runs in this process (the dlltrace_cli fixture: dlltrace.cli.main with argv, output
through capsys); two smoke tests start it as a user does, `python -m dlltrace` and the console
script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlltrace.errors import EXIT_SIMULATED_FAILURE

ROOT = Path(__file__).resolve().parent.parent
S1 = ROOT / "fixtures" / "scenarios" / "s1.toml"


def _child(argv: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tracer"))
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def test_python_dash_m_dlltrace_smoke():
    r = _child([sys.executable, "-m", "dlltrace", "simulate", str(S1), "--json"])
    assert r.returncode == EXIT_SIMULATED_FAILURE, r.stderr  # S1's load fails
    assert json.loads(r.stdout)["error"] == 126
    r = _child([sys.executable, "-m", "dlltrace", "simulate", "--no-such-option"])
    assert r.returncode == 2 and "usage:" in r.stderr


def test_console_script_smoke():
    # the `dlltrace` script pip puts next to the interpreter (pyproject.toml: dlltrace.cli:entry)
    script = Path(sys.executable).parent / ("dlltrace.exe" if os.name == "nt" else "dlltrace")
    assert script.is_file(), f"{script}: the package is not installed in this environment (tools/setup.sh --tests)"
    r = _child([str(script), "--version"])
    assert r.returncode == 0 and r.stdout.startswith("dlltrace "), r.stderr
    r = _child([str(script), "simulate", str(S1)])
    assert r.returncode == EXIT_SIMULATED_FAILURE and "cublas64_12.dll was not found" in r.stdout, r.stderr


def test_simulate_s1_json_acceptance(dlltrace_cli):
    r = dlltrace_cli("simulate", str(S1), "--json")
    assert r.returncode == EXIT_SIMULATED_FAILURE, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["format"], doc["version"], doc["error"]) == ("dlltrace-simulate", 1, 126)
    call = doc["calls"][doc["failed"][0]]
    assert call["leaf"]["name"] == "cublas64_12.dll" and call["leaf"]["cause"] == "not_found"
    assert call["chain"] == ["_ext.cp311-win_amd64.pyd", "cublas64_12.dll"]
    v12 = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.1\\bin"
    [found] = [c for c in call["found_elsewhere"] if c["path"].startswith(v12)]
    assert found["result"] == "found" and "on PATH" in found["rule"] and "does not search" in found["rule"]
    assert "os.add_dll_directory" in call["fixes"][0]["text"] and v12 in call["fixes"][0]["text"]
    assert all(c["result"] == "not_there" for c in call["candidates"])
    assert [c["rule"] for c in call["candidates"]] == ["DLL_LOAD_DIR of _ext.cp311-win_amd64.pyd", "APPLICATION_DIR", "SYSTEM32"]


def test_simulate_json_matches_its_schema(dlltrace_cli):
    import jsonschema

    schema = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "result-v1.json").read_text())
    for s in sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")):
        r = dlltrace_cli("simulate", str(s), "--json")
        doc = json.loads(r.stdout)
        failed = any(c["error"] for c in doc["calls"])
        assert r.returncode == (EXIT_SIMULATED_FAILURE if failed else 0), r.stderr
        jsonschema.validate(doc, schema)


def test_simulate_text_names_leaf_first(dlltrace_cli):
    r = dlltrace_cli("simulate", str(S1))
    assert r.returncode == EXIT_SIMULATED_FAILURE
    lines = [l for l in r.stdout.splitlines() if "✗" in l]
    assert lines[0].strip() == ("✗ cublas64_12.dll was not found — it is needed by _ext.cp311-win_amd64.pyd; "
                                "installed but not searched")
    assert "PATH and the current folder are not searched with these flags." in r.stdout


BAD = {
    "unknown_key.toml": ("[process]\nexe = 'C:\\a\\b.exe'\ncolour = 1\n", "process: unknown key 'colour'"),
    "bad_flags.toml": ("[process]\nexe = 'C:\\a\\b.exe'\n[[call]]\nop = \"LoadLibraryExW\"\nname = \"a.dll\"\nflags = \"0xZZ\"\n",
                       "call[0].flags: must be a number"),
    "bad_bits.toml": ("[process]\nexe = 'C:\\a\\b.exe'\n[[call]]\nop = \"LoadLibraryExW\"\nname = \"a.dll\"\nflags = 0x80000000\n",
                      "call[0].flags: 2147483648 has bits that are not LoadLibraryEx flags"),
    "posix_path.toml": ("[process]\nexe = '/usr/bin/python'\n", "process.exe: '/usr/bin/python' is a POSIX path"),
    "relative.toml": ("[process]\nexe = 'C:\\a\\b.exe'\n[[file]]\npath = 'lib\\a.dll'\n", "file[0].path: 'lib\\\\a.dll' is not an absolute Windows path"),
    "no_exe.toml": ("[process]\ncwd = 'C:\\a'\n", "process: needs `exe`"),
    "bad_op.toml": ("[process]\nexe = 'C:\\a\\b.exe'\n[[call]]\nop = \"LoadLib\"\n", "call[0].op: 'LoadLib' is not a known call"),
    "bad_machine.toml": ("[process]\nexe = 'C:\\a\\b.exe'\nmachine = \"sparc\"\n", "process.machine: 'sparc' is not a machine"),
    "not_toml.toml": ("[process\nexe = 1\n", "not valid TOML"),
    "not_json.json": ("{\"process\": ", "line 1: not valid JSON"),
    "newer.toml": ("version = 2\n[process]\nexe = 'C:\\a\\b.exe'\n", "version: version 2 is not supported"),
    "cause_list.json": ('{"process": {"exe": "C:\\\\a.exe"}, "expect": {"cause": ["not_found"]}}',
                        "expect.cause: ['not_found'] is not a leaf cause"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_simulate_bad_scenario_is_one_line_exit_2(tmp_path, name, dlltrace_cli):
    text, message = BAD[name]
    f = tmp_path / name
    f.write_text(text)
    r = dlltrace_cli("simulate", str(f))
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"dlltrace: {f}: ")
    assert message in lines[0]


def test_simulate_missing_file_exit_2(tmp_path, dlltrace_cli):
    r = dlltrace_cli("simulate", str(tmp_path / "nope.toml"))
    assert (r.returncode, r.stderr.strip()) == (2, f"dlltrace: {tmp_path / 'nope.toml'}: no such file")


def test_simulate_folder_exit_2(tmp_path, dlltrace_cli):
    r = dlltrace_cli("simulate", str(tmp_path))
    assert r.returncode == 2 and "is a folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_no_arguments_prints_usage(dlltrace_cli):
    r = dlltrace_cli()
    assert r.returncode == 2 and "usage:" in r.stderr


def test_version(dlltrace_cli, monkeypatch):
    from dlltrace.trace import launch, where

    monkeypatch.setattr(where, "find_wine", lambda: None)  # (--version looks for wine64; runs nothing)
    r = dlltrace_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("dlltrace ")


def test_example_command_runs(dlltrace_cli):
    r = dlltrace_cli("simulate", "--example")
    assert r.returncode == 0  # (the README's first command: the example fails as its [expect] says)
    assert "cublas64_12.dll was not found" in r.stdout
    # the same file as a scenario: a simulated call failed
    from dlltrace.commands.simulate import EXAMPLE
    assert dlltrace_cli("simulate", str(EXAMPLE)).returncode == EXIT_SIMULATED_FAILURE
    # and an example that did not fail as it says would not be 0
    from dlltrace.commands.simulate import example_code
    assert example_code({"error": 126, "leaf": "other.dll"}, []) == EXIT_SIMULATED_FAILURE


# --- the command line a user expects: help, did you mean, the shorthand only for programs, --version ---

@pytest.fixture
def no_run(monkeypatch):
    """`dlltrace run` replaced by a recorder: the arguments it would have traced, and nothing run."""
    from dlltrace.commands import run

    calls: list = []
    def execute(args):
        cmd = list(args.cmd)
        calls.append((cmd[1:] if cmd[:1] == ["--"] else cmd, args.wine))  # (run drops the "--" itself)
        return 0

    monkeypatch.setattr(run, "execute", execute)
    return calls


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_help_and_help_command(dlltrace_cli):
    r = dlltrace_cli("help")
    assert r.returncode == 0 and r.stdout.startswith("usage: dlltrace")
    assert all(c in r.stdout for c in ("simulate", "report", "run", "help"))
    r = dlltrace_cli("help", "report")
    assert r.returncode == 0 and r.stdout.startswith("usage: dlltrace report") and "--markdown" in r.stdout \
        and "-o FILE, --output FILE" in r.stdout
    r = dlltrace_cli("help", "reprot")
    assert r.returncode == 2 and r.stdout == ""
    assert one_line(r.stderr) == "dlltrace: help: no command 'reprot'; did you mean `dlltrace report`?"


@pytest.mark.parametrize("word, command", [("simulat", "simulate"), ("reprot", "report"), ("Report", "report"),
                                           ("hlep", "help"), ("sim", "simulate")])
def test_a_word_close_to_a_command_is_did_you_mean_not_traced(dlltrace_cli, no_run, word, command):
    r = dlltrace_cli(word, "x")
    assert r.returncode == 2 and no_run == []
    assert one_line(r.stderr) == f"dlltrace: {word}: not a command; did you mean `dlltrace {command}`?"


def test_version_as_a_word_points_to_the_option(dlltrace_cli, no_run):
    r = dlltrace_cli("version")
    assert r.returncode == 2 and no_run == []
    assert one_line(r.stderr) == "dlltrace: version: not a command; did you mean `dlltrace --version`?"


def test_a_word_that_is_neither_a_command_nor_a_program_is_one_line_exit_4(dlltrace_cli, no_run, tmp_path):
    r = dlltrace_cli("qzxwvk-no-such-program", "-c", "1", cwd=tmp_path)
    assert r.returncode == 4 and no_run == []
    line = one_line(r.stderr)
    assert line.startswith("dlltrace: qzxwvk-no-such-program: neither a command (simulate, run, report")
    assert "nor a program found on PATH" in line
    r = dlltrace_cli("./no-such-file.exe", cwd=tmp_path)  # a path that does not exist
    assert r.returncode == 4 and no_run == [] and one_line(r.stderr) == "dlltrace: ./no-such-file.exe: no such file"


def test_the_shorthand_runs_real_programs(dlltrace_cli, no_run, tmp_path):
    sh = shutil.which("sh")
    assert dlltrace_cli("sh", "-c", "true").returncode == 0  # found on PATH
    prog = tmp_path / "prog"
    prog.write_text("")
    assert dlltrace_cli("./prog", "a", cwd=tmp_path).returncode == 0  # a path that exists
    assert no_run == [(["sh", "-c", "true"], False), (["./prog", "a"], False)] and sh


def test_dlltrace_wine_prog_is_the_shorthands_twin(dlltrace_cli, no_run, tmp_path):
    (tmp_path / "host.exe").write_bytes(b"MZ")
    (tmp_path / "notes.txt").write_text("")
    assert dlltrace_cli("--wine", "host.exe", "a", "--b", cwd=tmp_path).returncode == 0
    assert dlltrace_cli("--wine", "--", "./host.exe", cwd=tmp_path).returncode == 0
    assert no_run == [(["host.exe", "a", "--b"], True), (["./host.exe"], True)]
    for argv, says in [(["--wine", "missing.exe"], "--wine missing.exe: no such .exe file"),
                       (["--wine", "notes.txt"], "--wine notes.txt: no such .exe file"),
                       (["--wine"], "--wine needs a program")]:
        r = dlltrace_cli(*argv, cwd=tmp_path)
        assert r.returncode == 4 and one_line(r.stderr).startswith(f"dlltrace: {says}"), r.stderr
    assert len(no_run) == 2
    # `dlltrace run --wine -- PROG` is unchanged: Wine may find a program itself
    assert dlltrace_cli("run", "--wine", "--", "notepad").returncode == 0 and no_run[-1] == (["notepad"], True)


def test_version_says_whether_this_install_can_trace(dlltrace_cli, monkeypatch, tmp_path):
    from dlltrace.trace import launch, where

    monkeypatch.setattr(where, "find_wine", lambda: "/usr/bin/wine64")  # (looked for, never run)
    r = dlltrace_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("dlltrace ")
    have = (launch.BIN / launch.LAUNCHER).is_file() and (launch.BIN / launch.SHIM).is_file()
    if have:  # (the checkout's bin/, built by native/build.sh)
        assert f"shim: {launch.BIN / launch.SHIM} (x64 PE)" in r.stdout
        assert f"launcher: {launch.BIN / launch.LAUNCHER} (x64 PE)" in r.stdout
    # an install without the native files
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(where, "BIN", empty)
    r = dlltrace_cli("--version")
    assert r.returncode == 0 and f"shim: {empty / launch.SHIM} (missing)" in r.stdout
    assert "(`dlltrace run --wine -- PROG.exe`): no: the native launcher and shim are not built; fix: " in r.stdout
    if not have:
        return
    # the machine is read from each file's PE header: an arm64 shim next to an x64 launcher
    import struct

    odd = tmp_path / "odd"
    odd.mkdir()
    shutil.copy(ROOT / "tracer/dlltrace/bin" / launch.LAUNCHER, odd / launch.LAUNCHER)
    data = bytearray((ROOT / "tracer/dlltrace/bin" / launch.SHIM).read_bytes())
    pe_at = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<H", data, pe_at + 4, 0xAA64)
    (odd / launch.SHIM).write_bytes(bytes(data))
    monkeypatch.setattr(where, "BIN", odd)
    r = dlltrace_cli("--version")
    assert f"shim: {odd / launch.SHIM} (arm64 PE)" in r.stdout
    assert "no: the launcher and the shim are built for different machines; fix: " in r.stdout
    # a shim that is not a PE file
    (odd / launch.SHIM).write_bytes(b"not a PE")
    r = dlltrace_cli("--version")
    assert f"shim: {odd / launch.SHIM} (not a usable PE file" in r.stdout
    assert "no: the shim is not a usable PE file (no MZ header); fix: " in r.stdout
    # built, not Windows, no wine64
    shutil.copy(ROOT / "tracer/dlltrace/bin" / launch.SHIM, odd / launch.SHIM)
    monkeypatch.setattr(where, "find_wine", lambda: None)
    monkeypatch.setattr(sys, "platform", "linux")
    r = dlltrace_cli("--version")
    assert "tracing Windows programs under Wine (`dlltrace run --wine -- PROG.exe`): no: wine64 is not installed" in r.stdout
    monkeypatch.setattr(where, "find_wine", lambda: "/usr/bin/wine64")
    r = dlltrace_cli("--version")
    assert "tracing Windows programs under Wine (`dlltrace run --wine -- PROG.exe`): yes" in r.stdout
    assert "wine64: /usr/bin/wine64" in r.stdout


@pytest.mark.wine
def test_dlltrace_wine_prog_traces_under_wine(tmp_path):
    """The shorthand's twin for real: `dlltrace --wine ./host.exe 3` traces the program under Wine and
    exits with its code, like `dlltrace run --wine -- ./host.exe 3`."""
    import winetools

    from dlltrace.trace.reader import read_trace

    winetools.require("wine", "mingw64")
    winetools.ensure_prefix()
    src = tmp_path / "host.c"
    src.write_text("#include <stdlib.h>\nint main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }\n")
    winetools.mingw_compile([src], tmp_path / "host.exe")
    for _ in range(3):  # (Wine itself failing to start the program under load: run again, as traced_run does)
        r = winetools.dlltrace("--wine", "./host.exe", "3", cwd=tmp_path)
        if "the program never ran" not in r.stderr:
            break
    assert r.returncode == 3, r.stderr[-2000:]
    (trace_file,) = tmp_path.glob("dlltrace-host-*")
    trace = read_trace(trace_file)
    assert any(e.get("exe", "").lower().endswith("host.exe") for e in trace.of("process"))


def test_a_command_imports_only_what_it_uses(tmp_path):
    """The parsers (--help) load no command's machinery; --version loads no parser; `report` of a Windows trace
    loads neither static mode (deps, check), nor the Linux side, nor the launcher."""
    def loaded(code: str) -> list[str]:
        r = _child([sys.executable, "-c", "import sys\n" + code + "\nprint(sorted(sys.modules))"])
        assert r.returncode == 0, r.stderr
        return eval(r.stdout.strip().splitlines()[-1])

    heavy = ("pefile", "rich", "elftools", "cffi")
    parsers = loaded("from dlltrace import cli; cli.build_parsers()")
    assert not [m for m in parsers if m.split(".")[0] in heavy]
    assert not [m for m in parsers if m.startswith(("dlltrace.diagnosis", "dlltrace.render", "dlltrace.loader",
                                                    "dlltrace.worlds", "dlltrace.pe"))]
    version = loaded("from dlltrace import cli\nimport contextlib, io\n"
                     "with contextlib.redirect_stdout(io.StringIO()): cli.main(['--version'])")
    assert "dlltrace.commands" not in version and not [m for m in version if m.split(".")[0] in heavy]
    # (start-up, bench/startup.py: --version imports neither a parser nor the stdlib's heavier modules)
    assert not {"argparse", "dataclasses", "typing", "platform", "inspect", "difflib"} & set(version)
    top_help = loaded("from dlltrace import cli\nimport contextlib, io\n"
                      "with contextlib.redirect_stdout(io.StringIO()): cli.main(['help'])")
    assert not [m for m in top_help if m.startswith("dlltrace.commands.")]  # (the commands listed, none built)
    assert not {"dataclasses", "typing", "json"} & set(top_help)
    one_help = loaded("from dlltrace import cli\nimport contextlib, io\n"
                      "with contextlib.redirect_stdout(io.StringIO()): cli.main(['help', 'report'])")
    assert [m for m in one_help if m.startswith("dlltrace.commands.")] == ["dlltrace.commands.report"]
    report = loaded("from dlltrace import cli\nimport contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()): "
                    f"cli.main(['report', {str(ROOT / 'fixtures/traces/s1.jsonl')!r}])")
    assert not [m for m in report if m.startswith(("dlltrace.diagnosis.static", "dlltrace.render.static",
                                                   "dlltrace.loader.linux", "dlltrace.trace.launch", "dlltrace.elf"))]


@pytest.mark.parametrize("argv", [["report", "x.jsonl"], ["--version"]])
def test_ctrl_c_before_main_can_say_it_is_one_line_and_130(monkeypatch, capsys, argv):
    """Ctrl-C while a command's modules are still being imported (before main()'s own handler) is the one line
    `dlltrace: interrupted` and exit 130, as anywhere later, never a traceback."""
    from dlltrace import cli
    from dlltrace.trace import gcpause

    def interrupted(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    freezes = []  # (the command's gc mode and its freeze at exit are the process's: not this test process's)
    monkeypatch.setattr(gcpause, "freeze_after_pauses", lambda on=True: freezes.append(on))
    monkeypatch.setattr(gcpause, "freeze_before_exit", lambda: freezes.append("exit"))
    monkeypatch.setattr(sys, "argv", ["dlltrace", *argv])
    assert cli.entry() == 130
    assert capsys.readouterr().err == "dlltrace: interrupted\n"
    assert freezes == ([] if argv == ["--version"] else [True, "exit"])
