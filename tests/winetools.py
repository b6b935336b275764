"""Wine and mingw for the tests: the only contact with a real Windows loader on this machine.

Locally a test that needs them skips with the reason; in CI (CI=true) a missing tool
is a failure, because .ci/run installs both.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

WINESERVER_CANDIDATES = ("/usr/lib/wine/wineserver64", "wineserver64", "wineserver")
CC64 = "x86_64-w64-mingw32-gcc"
CC32 = "i686-w64-mingw32-gcc"
# What the tests build or unpack (shims, fixture DLLs, unpacked wheels, Wine prefixes, Windows Pythons):
# made on first use, each piece through built_once (a folder made whole or not at all). .ci/run points it
# at a new empty folder on every run, so CI proves a cold start.
CACHE = Path(os.environ.get("DLLTRACE_TEST_CACHE", Path.home() / ".cache" / "dlltrace-tests"))
# One prefix per pytest-xdist worker (tests/run-all.sh runs two: PYTEST_XDIST_WORKER is gw0, gw1): each its own
# wineserver, so a test that restarts the server (test_run.py) or lays out C:\dlltrace-shim anew (test_shim.py)
# cannot pull files or processes from under a test of the other worker.
# (DLLTRACE_WINEPREFIX names another prefix: its worker's copies are beside it, <name>-gw0 ...)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
PREFIX = Path(str(os.environ.get("DLLTRACE_WINEPREFIX", CACHE / "wineprefix")) + (f"-{_WORKER}" if _WORKER else ""))
# What the tests download (pinned wheels and Windows Pythons, PyPI file lists): files that never change,
# kept by name and checked against their pinned sha256 (realwheels.pip_download). The one cache .ci/run keeps.
DOWNLOADS = Path(os.environ.get("DLLTRACE_DOWNLOAD_CACHE", Path.home() / ".cache" / "dlltrace-downloads"))


def source_key(*parts: "Path | str | bytes") -> str:
    """A short hash of files' names and contents (Path) and of other inputs (str, bytes): the name of
    what built_once makes from them, so a change of any of them builds anew."""
    import hashlib

    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            h.update(b"f" + p.name.encode() + b"\0" + p.read_bytes())
        else:
            h.update(b"s" + (p if isinstance(p, bytes) else p.encode()) + b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def locked(what: "Path | str"):
    """An exclusive lock (flock) of the test cache named after `what`, held for the with block, across
    processes: the pytest-xdist workers (tests/run-all.sh) build each cache piece, the shim and a Wine
    prefix once, the other waiting for it rather than building it too."""
    import fcntl
    import hashlib

    locks = CACHE / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(what).encode()).hexdigest()[:16]
    with open(locks / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def built_once(folder: Path, build) -> Path:
    """`folder`, built by build(tmp) into a fresh sibling folder and renamed into place with a stamp: a
    folder with the stamp is whole (a build cut short, by an error or a kill, leaves only a .tmp sibling,
    removed by the next build), and one without it is built again. Another process building the same
    folder waits for the first (locked), then finds it whole; and were it to build it too, that is
    harmless: the first rename wins."""
    stamp = folder / ".complete"
    if stamp.is_file():
        return folder
    with locked(folder.resolve()):
        return _built_once(folder, build)


def _built_once(folder: Path, build) -> Path:
    stamp = folder / ".complete"
    if stamp.is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp", dir=folder.parent))
    try:
        build(tmp)
        (tmp / ".complete").write_text("ok")
        if folder.exists() and not stamp.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a folder of an older layout, never stamped
        try:
            os.replace(tmp, folder)
        except OSError:
            if not stamp.is_file():  # (not another process's whole build in the way)
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _which(cands) -> str | None:
    for c in cands:
        p = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if p:
            return p
    return None


def wine_binary() -> str | None:
    """The wine64 `dlltrace run --wine` uses (dlltrace.trace.launch.find_wine)."""
    from dlltrace.trace.launch import find_wine

    return find_wine()


def wine32_available() -> bool:
    """Whether Wine can run 32-bit programs here (Debian: wine32:i386, its 32-bit DLLs). Then the one test prefix
    serves both: wine64 (wine_binary) starts a 32-bit exe through Wine's 32-bit loader itself
    (/usr/lib/wine/wine on Debian; `wine` names it, `wine64` the 64-bit one)."""
    from dlltrace.trace.where import wine_runs_32bit

    return wine_runs_32bit(wine_binary())


def wineserver_binary() -> str | None:
    return _which(WINESERVER_CANDIDATES)


def require(*tools: str) -> None:
    """Skip (locally) or fail (CI) when a tool is missing. tools: "wine", "wine32", "mingw64", "mingw32"."""
    missing = []
    for t in tools:
        if t == "wine" and not wine_binary():
            missing.append("wine64 (apt-get install wine64)")
        elif t == "wine32" and not wine32_available():
            missing.append("32-bit Wine (dpkg --add-architecture i386; apt-get update; apt-get install wine32:i386)")
        elif t == "mingw64" and not shutil.which(CC64):
            missing.append(f"{CC64} (apt-get install gcc-mingw-w64-x86-64)")
        elif t == "mingw32" and not shutil.which(CC32):
            missing.append(f"{CC32} (apt-get install gcc-mingw-w64-i686-win32)")
        elif t == "wine32" and not os.access(WINE32_LOADER, os.X_OK):
            missing.append("32-bit Wine (dpkg --add-architecture i386; apt-get install wine32:i386)")
    if missing:
        msg = "needs " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI must install it (.ci/run)")
        pytest.skip(msg)


def wine_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        WINEPREFIX=str(PREFIX),
        WINEDLLOVERRIDES="mscoree,mshtml=",
        WINEDEBUG=extra.pop("WINEDEBUG", "-all"),
    )
    env.pop("DISPLAY", None)
    env.update(extra)
    return env


_prefix_ready = False


def ensure_prefix() -> Path:
    """A ready Wine prefix with a persistent wineserver whose service processes (winedevice.exe, ...)
    hold none of our pipes.

    The first Wine program on a new server starts those services, and they inherit its stdout and
    stderr; under a persistent server they never exit, so a pipe they hold never reaches EOF and a
    test reading it hangs (LOADER.md section 7; seen in CI). So: the persistent server first
    (synchronously: wineserver daemonizes once its socket is ready; it needs the prefix folder),
    then one trivial program with no pipes, which starts the services detached from every test."""
    global _prefix_ready
    if _prefix_ready:
        return PREFIX
    with locked(PREFIX.resolve()):  # (one process makes a prefix; another one waits, then finds it ready)
        _ensure_prefix()
    _prefix_ready = True
    return PREFIX


def _ensure_prefix() -> None:
    PREFIX.mkdir(parents=True, exist_ok=True)
    env = wine_env()
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True, check=False)
    # exit status 2 means a server already runs for this prefix: fine
    subprocess.run([wineserver_binary(), "-p"], env=env, timeout=60, **quiet)
    # (a prefix is ready when Wine's own DLLs are in it, not when its registry is: a cold CI run once found a prefix
    # with a system.reg and two files in system32 -- its creation cut short -- and every Wine test then failed with
    # "could not load kernel32.dll"; a partial one is made again)
    kernel32 = PREFIX / "drive_c" / "windows" / "system32" / "kernel32.dll"
    for attempt in range(2):
        if kernel32.exists():
            break
        if attempt:  # (the first try left it partial: the same, once more, after its processes end)
            subprocess.run([wineserver_binary(), "-w"], env=env, timeout=120, **quiet)
        subprocess.run([wine_binary(), "wineboot", "-u" if (PREFIX / "system.reg").exists() else "-i"], env=env,
                       timeout=300, **quiet)
    # (a prefix made before Wine's 32-bit half was installed has no syswow64, and `wineboot -u` alone does not add
    # it: without the prefix's update stamp it installs everything again, the 32-bit half too; measured with Wine 8)
    if wine32_available() and not (PREFIX / "drive_c" / "windows" / "syswow64" / "kernel32.dll").exists():
        (PREFIX / ".update-timestamp").unlink(missing_ok=True)
        subprocess.run([wine_binary(), "wineboot", "-u"], env=env, timeout=300, **quiet)
    subprocess.run([wine_binary(), "cmd", "/c", "exit"], env=env, timeout=120, **quiet)


def restart_server(services: bool = True) -> None:
    """Kill the test prefix's wineserver (and every Wine process of it), start a persistent one
    again and, with `services`, the service processes on no pipe (as ensure_prefix does)."""
    ensure_prefix()
    env = wine_env()
    quiet = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True, check=False)
    subprocess.run([wineserver_binary(), "-k"], timeout=60, **quiet)
    subprocess.run([wineserver_binary(), "-w"], timeout=60, **quiet)
    subprocess.run([wineserver_binary(), "-p"], timeout=60, **quiet)
    if services:
        subprocess.run([wine_binary(), "cmd", "/c", "exit"], timeout=120, **quiet)


def run_captured(argv: list[str], *, env: dict[str, str], cwd: str | Path | None = None,
                 timeout: float = 120, text: bool = True) -> subprocess.CompletedProcess:
    """subprocess.run(argv) with stdout/stderr (text, or bytes) captured through files, not pipes:
    a Wine service process started under argv would keep a pipe open after argv exits (see
    ensure_prefix)."""
    for attempt in range(WINE_START_RETRIES + 1):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            r = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                               timeout=timeout)
            out.seek(0)
            err.seek(0)
            o, e = out.read(), err.read()
        if attempt < WINE_START_RETRIES and any(sig in e for sig in WINE_START_FAILURES):
            WINE_START_RETRIED.append(" ".join(map(str, argv[:2])))
            continue  # Wine could not set up the process at all: not a result of the program, run it again
        if text:
            o, e = o.decode("utf-8", "replace"), e.decode("utf-8", "replace")
        return subprocess.CompletedProcess(r.args, r.returncode, o, e)
    raise AssertionError("unreachable")


# Wine's own start-up failures, before any program code runs: wine64 8.0 sometimes cannot map the shared
# user data page at its fixed address (STATUS_CONFLICTING_ADDRESSES, c0000018: something else was mapped
# there first), or the same in a child the program creates. Such a run says nothing about the program; run_captured
# runs it again (at most twice),
# and counts it in WINE_START_RETRIED.
WINE_START_FAILURES = (b"failed to map the shared user data", b"virtual_alloc_first_teb",
                       # (dlltrace run --wine: the launcher's CreateProcess gave 1359, the child ended before it was
                       # initialised, the same failure in the child: runner.finish_launched says so)
                       b"its process ended while it was being created")
WINE_START_RETRIES = 2
WINE_START_RETRIED: list[str] = []


def drive_c() -> Path:
    return ensure_prefix() / "drive_c"


WINE32_LOADER = "/usr/lib/wine/wine"  # Debian's wine32:i386: the loader wine64 hands a 32-bit program to


def ensure_wow64_prefix() -> Path:
    """The test prefix, with its SysWOW64 (Wine's 32-bit DLLs): a prefix made before 32-bit Wine was installed has
    none, and `wineboot -u` adds it; a 32-bit program there could not start. Returns the prefix's SysWOW64 folder.
    (CI makes the prefix cold, after setup installed wine32: it has SysWOW64 from the start.)"""
    syswow64 = drive_c() / "windows" / "syswow64"
    if not (syswow64 / "kernel32.dll").exists():
        env = wine_env()
        quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, check=False)
        subprocess.run([wine_binary(), "wineboot", "-u"], env=env, timeout=300, **quiet)
    if not (syswow64 / "kernel32.dll").exists():
        msg = f"the Wine prefix {PREFIX} has no SysWOW64 after wineboot -u (is wine32:i386 installed?)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return syswow64


def to_windows(path: Path | str) -> str:
    """A Linux path inside the prefix's drive_c as C:\\...; anything else through Z:."""
    p = Path(path).resolve()
    dc = (PREFIX / "drive_c").resolve()
    try:
        rel = p.relative_to(dc)
        return "C:\\" + str(rel).replace("/", "\\") if str(rel) != "." else "C:\\"
    except ValueError:
        from dlltrace.trace.launch import to_wine_path

        return to_wine_path(p)


def run_wine(args: list[str], *, cwd: str | Path | None = None, timeout: float = 120,
             winedebug: str = "-all", extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a Windows program under wine64; its output (bytes) goes through files (run_captured)."""
    ensure_prefix()
    env = wine_env(WINEDEBUG=winedebug, **(extra_env or {}))
    return run_captured([wine_binary(), *args], env=env, cwd=cwd, timeout=timeout, text=False)


def run_launcher(launcher: Path | str, argv: list[str], trace: Path, *, cwd: str | Path | None = None,
                 extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The dlltrace launcher (x64 or x86) run on argv under wine64, its trace written to `trace`.
    The launcher opens the trace before anything else it does (dlltrace_launch.c, main): no trace and not a
    word printed means its process never reached main, a Wine start-up failure that WINEDEBUG=-all silences
    (seen in cold CI runs, in a worker). Such a run is run again (at most WINE_START_RETRIES times), counted
    in WINE_START_RETRIED like run_captured's; a run that still left no trace fails with what was printed."""
    env = {"DLLTRACE_TRACE": to_windows(trace), **(extra_env or {})}
    for attempt in range(WINE_START_RETRIES + 1):
        r = run_wine([str(launcher), *argv], cwd=cwd, extra_env=env)
        if trace.exists() or r.stdout or r.stderr or attempt == WINE_START_RETRIES:
            break
        WINE_START_RETRIED.append(f"{Path(launcher).name} (no trace, no output, exit {r.returncode})")
    assert trace.exists(), (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    return r


def dlltrace(*argv: str, cwd: str | Path | None = None, timeout: float = 300, **env_extra: str
             ) -> subprocess.CompletedProcess:
    """`python -m dlltrace ARGV` of this checkout, in the test prefix's Wine environment (plus
    env_extra), output captured through files (run_captured)."""
    import sys

    env = wine_env(PYTHONPATH=str(Path(__file__).resolve().parent.parent / "tracer"), **env_extra)
    return run_captured([sys.executable, "-m", "dlltrace", *argv], cwd=cwd, env=env, timeout=timeout)


def mingw_compile(sources: list[Path | str], out: Path | str, *, dll: bool = False, bits: int = 64,
                  extra: list[str] | None = None) -> Path:
    """Compile with mingw; raises with the compiler's message on failure."""
    cc = CC64 if bits == 64 else CC32
    cmd = [cc, "-O1", "-s", *[str(s) for s in sources], "-o", str(out)]
    if dll:
        cmd.insert(1, "-shared")
    cmd += extra or []
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return Path(out)


def traced_run(trace: Path, host: str, args: list[str]) -> Path:
    """`dlltrace run --wine -o TRACE -- HOST ARGS`; run again (twice at most) when Wine itself did not start
    the program ("the program never ran": a harness problem on a busy machine, not a verdict)."""
    for _ in range(3):
        run = dlltrace("run", "--wine", "-o", str(trace), "--", host, *args)
        if "the program never ran" not in run.stderr:
            break
    assert trace.exists() and "the program never ran" not in run.stderr, run.stderr[-2000:]
    return trace
