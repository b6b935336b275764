"""`dlltrace run` on Linux: the command runs with the LD_AUDIT recorder (native/audit/dlltrace_audit.c),
which appends one JSON line per event to the trace (objsearch: every file ld.so tries, with its
la_objsearch flag; objopen: every object mapped, its namespace); the header (platform "linux") is
written first. Exec'd children keep LD_AUDIT (ld.so leaves it in the environment) and forked ones keep
the open recorder: their events carry their own pid. The exit code is the program's.

The text of a failed dlopen comes from an LD_PRELOAD wrapper of dlerror() (dlltrace_preload.c): the
program's own call returns the real text unchanged, and a copy goes to the trace ("dlerror" events).
dlopen itself is not wrapped: glibc searches the DT_RUNPATH/DT_RPATH of dlopen's caller, which a wrapper
would replace by itself. The same library serves the Python bootstrap as its shim (DLLTRACE_SHIM; the
bootstrap folder goes first on PYTHONPATH, as on Windows): py_import / py_dlopen events, and each native
event of a thread carries "ctx", the seq of the Python action running on it. DLLTRACE_NO_PRELOAD=1 leaves
LD_PRELOAD and PYTHONPATH alone (no dlerror events, no Python context). A wrapper that sets PYTHONPATH itself
(`env PYTHONPATH=src python ...`) keeps the Python context: the preload library puts the bootstrap folder
(DLLTRACE_BOOTSTRAP) first again in a Python process whose PYTHONPATH lacks it; `python -E` / `-I` ignore
PYTHONPATH, and run without it.

Not done yet: --max-size is not enforced by the C recorder.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dlltrace.cachedir import trusted_dir
from dlltrace.errors import EXIT_NO_COMMAND, EXIT_UNSUPPORTED, DlltraceError
from dlltrace.trace.faults import fault_events
from dlltrace.trace.files import default_trace_name, spill_path, start_trace
# the recorder's libraries and sources: trace/where.py (where --version looks for them too)
from dlltrace.trace.where import (AUDIT_LIB, NATIVE, PRELOAD_LIB, built_recorder, cache_recorder_dir,  # noqa: F401
                                  package_recorder_dir)

TYPE_CHECKING = False  # (typing and dataclasses are not imported before the program starts: it starts sooner)
if TYPE_CHECKING:
    from typing import Callable, Optional

BOOTSTRAP = Path(__file__).resolve().parents[1] / "bootstrap"


def recorder_dir() -> Path:
    """Where the recorder is: the package's bin/linux, else ~/.cache/dlltrace/linux (built there with gcc
    from native/audit when missing)."""
    built = built_recorder()
    if built is not None:
        return built
    cache = cache_recorder_dir()
    trusted = trusted_dir(cache)  # (made if missing, 0700: the libraries built there are loaded into the program)
    if trusted is None:
        raise DlltraceError(f"the folder the Linux recorder would be built in, {cache}, or one above it, can be written "
                            "by another user: not used (set XDG_CACHE_HOME to a folder of your own, or install dlltrace "
                            "with its recorder built: tools/setup.sh)", EXIT_UNSUPPORTED)
    build_recorder(trusted)
    return trusted


def build_recorder(out: Path) -> None:
    if not (NATIVE / "build.sh").exists():
        raise DlltraceError(f"this install has no Linux recorder (bin/linux) and no source to build it from ({NATIVE})",
                            EXIT_UNSUPPORTED)
    p = subprocess.run(["sh", str(NATIVE / "build.sh"), str(out)], capture_output=True, text=True)
    if p.returncode != 0:
        raise DlltraceError("building the Linux recorder with gcc failed: " + (p.stderr.strip().splitlines() or ["?"])[-1],
                            EXIT_UNSUPPORTED)


def _prepend(var: Optional[str], lib: str) -> str:
    return lib + (":" + var if var else "")


def recorder_env(env: dict[str, str], recorder: Path, trace: Path) -> dict[str, str]:
    """`env` with the recorder in it (what `dlltrace run` gives the program; bench/linux_trace.py too):
    LD_AUDIT, the trace's path and, unless DLLTRACE_NO_PRELOAD=1, the LD_PRELOAD library and the Python
    bootstrap."""
    env["DLLTRACE_TRACE"] = str(trace)
    env["LD_AUDIT"] = _prepend(env.get("LD_AUDIT"), str(recorder / AUDIT_LIB))
    if env.get("DLLTRACE_NO_PRELOAD") != "1":
        env["LD_PRELOAD"] = _prepend(env.get("LD_PRELOAD"), str(recorder / PRELOAD_LIB))
        # the Python context: a traced CPython runs the bootstrap (PYTHONPATH), which binds the preload
        # library as its shim (the same five functions as on Windows) and writes py_* events through it
        env.setdefault("DLLTRACE_SHIM", str(recorder / PRELOAD_LIB))
        env["PYTHONPATH"] = str(BOOTSTRAP) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # (a wrapper that sets PYTHONPATH itself takes the bootstrap off: the preload library puts it first again
        # in each Python process, before CPython reads it)
        env["DLLTRACE_BOOTSTRAP"] = str(BOOTSTRAP)
    return env


class RecordedRun:
    """A program run with the recorder (run_recorded), its `exit` event appended: what finishing the
    trace needs (runner.trace_linux_command appends the facts, then finish_trace)."""

    def __init__(self, rc: int, interrupted: bool, spill: Path, out: Path) -> None:
        self.rc = rc                    # its wait status (negative: the signal that ended it)
        self.interrupted = interrupted  # a Ctrl-C reached it
        self.spill = spill
        self.out = out

    def __repr__(self) -> str:
        return f"RecordedRun(rc={self.rc!r}, interrupted={self.interrupted!r}, spill={self.spill!r}, out={self.out!r})"


def run_recorded(cmd: list[str], output: Optional[str],
                 meanwhile: Optional[Callable[["subprocess.Popen[bytes]", Path], None]] = None) -> RecordedRun:
    """Run cmd with the recorder into the spill of output (default: files.default_trace_name; a name
    ending in .gz is written compressed, through its spill file, as on Windows), the header first and
    how it ended last. A command that cannot be started is a DlltraceError (and leaves no trace).
    `meanwhile(proc, spill)` runs once the program has started, while it runs (what can be done before it ends:
    runner.py's)."""
    first = cmd[0]
    if ("/" in first and not os.path.exists(first)) or ("/" not in first and shutil.which(first) is None):
        raise DlltraceError(f"command not found: {first}", EXIT_NO_COMMAND)
    d = recorder_dir()
    out = Path(output or default_trace_name(cmd))
    spill = spill_path(out)
    start_trace(spill, "linux", cmd)
    env = recorder_env(dict(os.environ), d, spill.resolve())
    faults = Path(tempfile.mkdtemp(prefix="dlltrace-faults-"))  # (where a crashing Python's stack goes: faults.py)
    env["DLLTRACE_FAULTS"] = str(faults)
    try:
        try:
            proc = subprocess.Popen(cmd, env=env)
        except OSError as e:
            if e.errno != errno.ENOEXEC:
                raise
            # an executable text file without "#!": a shell runs it with /bin/sh (execvp does so too)
            proc = subprocess.Popen(["/bin/sh", *cmd], env=env)
    except OSError as e:
        shutil.rmtree(faults, ignore_errors=True)
        try:
            spill.unlink()  # (nothing ran: no trace is left behind)
        except OSError:
            pass
        raise DlltraceError(f"cannot start {first}: {e.strerror or e}", EXIT_NO_COMMAND) from None
    interrupted = False
    try:
        if meanwhile is not None:
            try:
                meanwhile(proc, spill)
            except Exception:  # (what it did is done again after the program ends, where a failure is said)
                pass
        rc = proc.wait()
    except KeyboardInterrupt:  # Ctrl-C reached the program too (same terminal): the trace is finished all the same
        interrupted = True
        rc = proc.wait()
    # how the program ended, as on Windows (docs/trace-format.md `exit`, `by` dlltrace): the report's verdicts
    # use it (a run that exited 0 went past every failed load)
    end = {"ev": "exit", "pid": proc.pid, "tid": 0, "seq": 0, "t": 0, "code": rc if rc >= 0 else None,
           "by": "dlltrace", "signal": -rc if rc < 0 else (2 if interrupted else None)}
    crashes = fault_events(faults)  # (the Python stack of each process that crashed: before its end)
    shutil.rmtree(faults, ignore_errors=True)
    try:
        with open(spill, "a", encoding="utf-8") as f:
            for ev in crashes + [end]:
                f.write(json.dumps(ev) + "\n")
    except OSError:
        pass
    return RecordedRun(rc, interrupted, spill, out)
