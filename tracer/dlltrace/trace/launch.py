"""Running a program traced: the native launcher (bin/dlltrace_launch64.exe; dlltrace_launch32.exe on a
32-bit Windows: where.launcher_name) starts it with the shim of its machine in place (the launcher reads
the program's machine from its PE header: the x86 shim for a 32-bit program), under wine64 with --wine; the trace file gets a header line first (files.py), then the
shim's events (docs/trace-format.md). What follows the run (reading the trace back, a program that could
not start, the facts a later replay needs, the exit code) is runner.py's, above the replay: this module
only runs the program and writes the file. Plain functions, tested on Linux, except run_traced, which
runs the program.

Light on purpose: `dlltrace run` imports this module, and only it, before the program starts (no reader,
no model, no dataclasses, no ctypes off Windows: from `run`'s start to the launcher's, ~0.02 s of CPU where
the reader and the model once took 0.07-0.1 s; bench/wine_run.py --phases); what follows is imported while
the program runs (commands/run.py import_what_follows)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from dlltrace.errors import EXIT_NO_COMMAND, EXIT_NO_WINE, EXIT_UNSUPPORTED, DlltraceError
from dlltrace.trace.files import default_trace_name, spill_path, start_trace
# the shim and the launcher, and wine64: trace/where.py (where --version looks for them too)
from dlltrace.trace.where import (BIN, DEFAULT_MAX_SIZE, LAUNCHER, LAUNCHER32, MIN_MAX_SIZE, SHIM, SHIM32,  # noqa: F401
                                  WINE_CANDIDATES, bin_dir, find_wine, launcher_name)

if sys.platform == "win32":  # (the launcher's kill-on-close job: winapi.py, ctypes, only where it runs)
    from dlltrace import winapi

BOOTSTRAP = Path(__file__).resolve().parents[1] / "bootstrap"
WINE_CANDIDATES = ("/usr/lib/wine/wine64", "wine64", "wine")
EXIT_LAUNCH_FAILED = 127  # the launcher's code when CreateProcess failed (it also writes launch_error)


def to_wine_path(path: Path) -> str:
    """A Linux path as Wine sees it through the Z: drive (Z: maps /)."""
    return "Z:" + str(Path(path).resolve()).replace("/", "\\")


def wine_command_args(cmd: list[str]) -> list[str]:
    """Arguments that name an existing Linux path (absolute, or ./ ../ relative) become Z:\\ paths, so
    `dlltrace run --wine -- ./host.exe /tmp/a.dll` works; everything else is passed unchanged."""
    out = []
    for a in cmd:
        if (a.startswith("/") or a.startswith("./") or a.startswith("../")) and os.path.exists(a):
            out.append(to_wine_path(Path(a)))
        else:
            out.append(a)
    return out


def holds_a_pipe(fds=(1, 2)) -> bool:
    """Whether our stdout or stderr is a pipe or socket (not a terminal or a file)."""
    for fd in fds:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return True
    return False


def start_wine_services(wine: str, env: dict[str, str]) -> None:
    """Start Wine's service processes with no stdio of ours before the traced program runs.

    The first Wine program on a server starts winedevice.exe and friends, and they inherit its
    stdout/stderr: a pipe they hold stays open after the program ends (for seconds, or for ever under
    a persistent wineserver), so whoever reads our output through a pipe would wait on it. A trivial
    program run first, with /dev/null for stdio, starts them (or finds them running) instead."""
    try:
        subprocess.run([wine, "cmd", "/c", "exit"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                       timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass  # the traced run reports any real problem with wine itself


def wine_services_running(env: Mapping[str, str], proc: Path = Path("/proc")) -> bool:
    """Whether Wine's services (services.exe, which starts winedevice.exe and the others) already run for
    env's prefix (WINEPREFIX, else $HOME/.wine) as this user: then the traced program starts none, and
    start_wine_services (a whole extra Wine program, ~0.1 s on a running wineserver) is not needed. Read
    from /proc: a process named services.exe whose environment names the same prefix. False when unsure."""
    home = env.get("HOME") or os.path.expanduser("~")
    want = os.path.realpath(env.get("WINEPREFIX") or os.path.join(home, ".wine"))
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return False
    uid = os.getuid() if hasattr(os, "getuid") else None
    for pid in pids:
        try:
            if (proc / pid / "comm").read_bytes().strip() != b"services.exe":
                continue
            if uid is not None and (proc / pid).stat().st_uid != uid:
                continue
            theirs = dict(v.split(b"=", 1) for v in (proc / pid / "environ").read_bytes().split(b"\0") if b"=" in v)
        except OSError:
            continue
        prefix = theirs.get(b"WINEPREFIX") or os.path.join(theirs.get(b"HOME", b"/nonexistent"), b".wine")
        if os.path.realpath(os.fsdecode(prefix)) == want:
            return True
    return False


def child_env(base: Mapping[str, str], trace_for_child: str, cmd: list[str], windows: bool,
              max_size: int = 0) -> dict[str, str]:
    env = dict(base)
    env["DLLTRACE_TRACE"] = trace_for_child
    env["DLLTRACE_RUN"] = "1"
    env["DLLTRACE_MAX_SIZE"] = str(max_size)  # (0: no cap; a caller's own value is not inherited)
    if windows and is_python_command(cmd):
        env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    elif is_python_command(cmd):
        # a Windows Python under Wine (--wine): the bootstrap as it sees it (Z:\…, ";"-separated), and of
        # our PYTHONPATH only what is not a Unix path (that one was meant for a Linux Python: this one)
        own = [p for p in env.get("PYTHONPATH", "").split(";") if p and not p.startswith("/")]  # (a Linux "a:b" list is one odd entry: kept, harmless to Windows)
        env["PYTHONPATH"] = ";".join([to_wine_path(BOOTSTRAP), *own])
    return env


def is_python_command(cmd: list[str]) -> bool:
    stem = re.split(r"[\\/]", cmd[0])[-1].lower()
    return bool(re.fullmatch(r"(python|pythonw|py)(\d+(\.\d+)?)?(\.exe)?", stem))


class LauncherRun:
    """A run of the launcher that ended (run_traced): where the writers wrote and how the launcher ended;
    what follows it (reading the trace back, the facts, finish_trace) is runner.finish_launched's. (A plain
    class: the dataclasses module is not imported before the program starts.)"""

    __slots__ = ("spill", "out", "wine", "end", "first")

    def __init__(self, spill: Path, out: Path, wine: bool, end: dict[str, Any], first: str) -> None:
        self.spill = spill  # where the writers appended (spill_path(out))
        self.out = out  # the trace's final name
        self.wine = wine
        self.end = end  # run_end_event: how the launcher ended
        self.first = first  # the command's first word (a failed start's error names it)


def run_traced(cmd: list[str], output: Optional[str], wine_wanted: bool,
               max_size: int = DEFAULT_MAX_SIZE, while_running: Optional[Callable[[], None]] = None) -> LauncherRun:
    """Run `cmd` under the launcher (under wine64 with wine_wanted) into the spill of `output` (default:
    default_trace_name), the header first; the run, not read back (runner.finish_launched reads it, and
    says a program that could not be started). while_running: called once the launcher started
    (run_launcher), e.g. `run` importing what follows the program meanwhile."""
    if wine_wanted:
        wine = find_wine()
        if not wine:
            raise DlltraceError("--wine: wine64 is not installed (e.g. apt-get install wine64)", EXIT_NO_WINE)
        platform_name = "wine"
    elif sys.platform == "win32":
        wine = None
        platform_name = "windows"
    else:  # (Linux's .so loads: the LD_AUDIT recorder, trace/linux.py, which runner.trace_command chooses)
        raise DlltraceError(f"tracing native programs is not supported on {sys.platform}; "
                            "use --wine to trace a Windows program under Wine", EXIT_UNSUPPORTED)
    first = cmd[0]
    if ("/" in first or (os.sep in first)) and not os.path.exists(first) and not (wine and "\\" in first):
        raise DlltraceError(f"command not found: {first}", EXIT_NO_COMMAND)
    if not wine and not ("/" in first or "\\" in first) and not shutil.which(first):
        raise DlltraceError(f"command not found: {first}", EXIT_NO_COMMAND)
    launcher, shim = native_pair(wine is not None)
    if not launcher.is_file() or not shim.is_file():
        raise DlltraceError(f"this install has no native shim ({launcher} missing): install dlltrace's win_amd64 "
                            "wheel, or build it in a checkout (bash native/build.sh)", EXIT_UNSUPPORTED)

    out = Path(output or default_trace_name(cmd))
    spill = spill_path(out)  # the writers append here; compressed into `out` at the end
    start_trace(spill, platform_name, cmd)
    if wine:
        env = child_env(os.environ, to_wine_path(spill), cmd, windows=False, max_size=max_size)
        env.setdefault("WINEDLLOVERRIDES", "mscoree,mshtml=")  # no Mono/Gecko install prompts
        env.setdefault("WINEDEBUG", "-all")
        argv = [wine, str(launcher), *wine_command_args(cmd)]
        if holds_a_pipe() and not wine_services_running(env):
            start_wine_services(wine, env)
    else:
        env = child_env(os.environ, str(spill.resolve()), cmd, windows=True, max_size=max_size)
        argv = [str(launcher), *cmd]
    status, got = run_launcher(argv, env, while_running)
    return LauncherRun(spill, out, bool(wine), run_end_event(status, got), first)


def native_pair(wine: bool) -> tuple[Path, Path]:
    """The launcher `dlltrace run` starts and the shim of its machine: the x64 pair under Wine and on a
    64-bit Windows (x64 or ARM64, which runs x64 programs), the x86 pair on a 32-bit Windows. (The x64
    launcher puts the x86 shim, dlltrace_shim32.dll of the same folder, into 32-bit programs itself.)"""
    name = LAUNCHER if wine else launcher_name(platform.machine())
    return bin_dir() / name, bin_dir() / (SHIM32 if name == LAUNCHER32 else SHIM)


# the machines no dlltrace shim can enter (the launcher's child_machine, docs/trace-format.md)
UNENTERABLE = ("arm64", "arm64ec", "unknown")


def machine_words(machine: Optional[str]) -> str:
    """What a failed start adds about the program's machine: nothing for x86 and x64 (or no file)."""
    if machine not in UNENTERABLE:
        return ""
    what = "a program of an unknown machine" if machine == "unknown" else f"an {machine} program"
    return f"; {what}: no dlltrace shim can enter it"


# What `dlltrace run` does with a signal it receives while the launcher runs: Ctrl-C (the first) is
# passed to the launcher's process group, so the program gets it as from its terminal and the launcher
# records how the program then ended; a second Ctrl-C, SIGTERM or SIGHUP ends the launcher, and the
# job object it holds the program in ends the program (and its children) with it. Either way the
# trace is then finished (the facts appended) and the summary printed.
PASSED_ON = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def die_with_parent() -> Optional[Callable[[], None]]:
    """For the launcher's process, to run before its exec (Linux): SIGKILL when `dlltrace run` dies,
    however it dies (a SIGKILL too); the launcher's end closes the job, which ends the program. Looked up
    here, in the parent: the forked child only calls it (no import between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_launcher(argv: list[str], env: Mapping[str, str],
                 while_running: Optional[Callable[[], None]] = None) -> tuple[int, Optional[int]]:
    """Run the launcher until it ends: its exit status (negative: the signal that ended it) and the
    signal `dlltrace run` received meanwhile (PASSED_ON; the first one, or None). while_running is
    called after the launcher started, before the wait: work that overlaps the program's run (an
    exception there is ignored: it only prepares what follows, which does the same work again)."""
    posix = os.name == "posix"
    got: list[int] = []
    proc: list[subprocess.Popen] = []

    def on_signal(signum: int, frame: Any) -> None:
        got.append(signum)
        if not proc:
            return
        p = proc[0]
        try:
            if signum == signal.SIGINT and got.count(signal.SIGINT) == 1 and got[0] == signal.SIGINT:
                if posix:
                    os.killpg(p.pid, signal.SIGINT)  # the launcher's own session: it, the program, its children
            else:
                p.kill()
        except (ProcessLookupError, PermissionError):
            pass

    old: dict[int, Any] = {}
    try:
        for s in PASSED_ON:
            old[s] = signal.signal(s, on_signal)
    except ValueError:  # not the main thread (a library caller): signals keep their handlers
        pass
    try:
        try:
            p = subprocess.Popen(argv, env=env, start_new_session=posix, preexec_fn=die_with_parent())
        except OSError as e:
            raise DlltraceError(f"cannot start {argv[0]}: {e.strerror or e}", EXIT_NO_COMMAND) from None
        proc.append(p)
        # On Windows the launcher goes in a kill-on-close job of ours (winapi.py), the counterpart of
        # die_with_parent: when `dlltrace run` ends, however, the launcher ends, and its own job ends
        # the program. (Not run on real Windows: tested against a fake API in tests/test_winapi.py.)
        job = None
        if sys.platform == "win32":
            try:
                job = winapi.kill_on_close_job(p.pid) if winapi.available() else None
            except OSError:
                job = None
        if got:  # a signal came while it started
            on_signal(got.pop(), None)
        if while_running is not None:
            try:
                while_running()
            except Exception:  # noqa: BLE001 - (see the docstring)
                pass
        status = p.wait()
        if sys.platform == "win32" and job is not None:
            winapi.close_handle(job)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return status, (got[0] if got else None)


def run_end_event(status: int, got: Optional[int]) -> dict[str, Any]:
    """The `exit` event `dlltrace run` appends for the launcher (docs/trace-format.md, `by` dlltrace)."""
    return {"ev": "exit", "seq": 0, "pid": 0, "tid": 0, "t": 0, "code": None, "by": "dlltrace",
            "launcher_status": status, "signal": got}
