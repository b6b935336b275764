"""`dlltrace run`'s orchestration, above the replay and the diagnosis: run the program traced (the
Windows launcher, trace/launch.py, or Linux's recorder, trace/linux.py), append the facts a later
replay needs (a replay against this machine records what it asks: diagnosis/collect.py on Windows,
diagnosis/replay_linux.py on Linux), finish the trace file (trace/files.py) and take the exit code
from how the program ended (diagnosis/ending.py). trace/ only runs programs and writes files; what
needs the loader model or the diagnosis is here."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from dlltrace.diagnosis import collect
from dlltrace.diagnosis.ending import ending
from dlltrace.diagnosis.replay_linux import replay_linux
from dlltrace.errors import EXIT_INTERRUPTED, EXIT_KILLED, EXIT_NOT_RUN, EXIT_NOT_TRACED
from dlltrace.trace import launch, linux
from dlltrace.trace.files import append_events, finish_trace
from dlltrace.trace.launch import DEFAULT_MAX_SIZE
from dlltrace.trace.reader import Trace, read_trace
from dlltrace.worlds.elf import LiveELFWorld, RecordingELFWorld
from dlltrace.worlds.live import identity_map, wine_map


def trace_command(cmd: list[str], output: Optional[str], wine_wanted: bool,
                  max_size: int = DEFAULT_MAX_SIZE) -> tuple[int, Trace]:
    """Run `cmd` traced into `output` (default: files.default_trace_name); its exit code and the trace,
    with the facts appended."""
    if not uses_launcher(wine_wanted):  # .so loads, with the LD_AUDIT recorder
        return trace_linux_command(cmd, output, max_size)
    return finish_launched(launch.run_traced(cmd, output, wine_wanted, max_size))


def uses_launcher(wine_wanted: bool) -> bool:
    """Whether `run` goes through the launcher (run --wine, or on Windows; else Linux's recorder). The
    command (commands/run.py) makes the same choice before importing this module."""
    return wine_wanted or not sys.platform.startswith("linux")


def finish_launched(run: launch.LauncherRun) -> tuple[int, Trace]:
    """What follows a launcher run (launch.run_traced): the facts appended, the trace finished; the exit
    code and the trace."""
    trace = append_facts(run.spill, run.trace, wine=run.wine, end=run.end)
    where = finish_trace(run.spill, run.out)
    trace.path = str(where)  # (the summary says where the trace is)
    return run_exit_code(trace), trace


def append_facts(out: Path, trace: Trace, wine: bool, end: Optional[dict[str, Any]] = None) -> Trace:
    """Store in the trace the facts a replay needs (PE facts, near misses: diagnosis/collect.py), so that
    `dlltrace report` works from the file alone, after `end` (launch.run_end_event: how the launcher
    ended). A failure here never loses the trace."""
    to_host = wine_map(os.environ.get("WINEPREFIX") or Path.home() / ".wine") if wine else identity_map
    events = ([end] if end is not None else []) + collect.collect_facts(trace, to_host)
    return append_events(out, trace, events, kept_on_failure=1 if end else 0)


def run_exit_code(trace: Trace) -> int:
    """What `dlltrace run` exits with (README, Exit codes): the program's own code when it exited or
    crashed (on Unix its low 8 bits, all a Unix exit status holds: 0xC0000005 gives 5; the summary and
    the trace have the full code), else a code of dlltrace's for how it ended."""
    e = ending(trace)
    if e.signal is not None:
        return EXIT_INTERRUPTED if e.signal == signal.SIGINT else 128 + e.signal
    if e.kind == "interrupted":
        return EXIT_INTERRUPTED
    if e.kind in ("never_ran", "not_windows"):
        return EXIT_NOT_RUN
    if e.kind == "not_traced":  # (it ran, but nothing of it was traced: never success, whatever its own code)
        return EXIT_NOT_TRACED
    if e.kind == "killed":
        st = e.launcher_status
        return 128 - st if st is not None and st < 0 else EXIT_KILLED
    if e.code is not None:
        if os.name == "nt":  # a Windows exit status holds all 32 bits (sys.exit takes a signed one)
            return e.code - (1 << 32) if e.code >= 1 << 31 else e.code
        low = e.code & 0xFF
        # (a crash whose low 8 bits are 0, Wine's 0x80000100, must not read as success)
        return 1 if low == 0 and e.kind == "crashed" else low
    st = e.launcher_status
    return 128 - st if st is not None and st < 0 else (st if st is not None else EXIT_NOT_RUN)


def append_linux_facts(spill: Path) -> None:
    """The facts a report needs, appended after the program ended: the trace is replayed once in the model
    against this machine through a RecordingELFWorld, and every answer it got (each file's ELF facts or
    absence, each folder's existence, ld.so.cache's answers, the machine's ld.so facts, the copies the
    fixes found) becomes an elf_system / elf_file event, so `report` never reads the disk (and works on
    another machine). A failure here costs the facts, never the trace."""
    try:
        rec = RecordingELFWorld(LiveELFWorld())
        replay_linux(list(read_trace(spill).events), world=rec)
        with open(spill, "a", encoding="utf-8") as f:
            for ev in rec.events(os.getpid()):
                f.write(json.dumps(ev, ensure_ascii=True) + "\n")
    except Exception as e:  # (the program's trace is kept whatever happens here)
        print(f"dlltrace: warning: the Linux facts were not appended ({e})", file=sys.stderr)


def trace_linux_command(cmd: list[str], output: Optional[str], max_size: Optional[int] = None) -> tuple[int, Trace]:
    """Run cmd with the recorder into output (trace/linux.py run_recorded), the facts appended
    (append_linux_facts); its exit code (128 + N for a signal N) and the trace read back. max_size is
    accepted for run's signature and not enforced yet."""
    run = linux.run_recorded(cmd, output)
    append_linux_facts(run.spill)
    where = finish_trace(run.spill, run.out)
    if run.interrupted:
        return EXIT_INTERRUPTED, read_trace(where)
    return (128 - run.rc if run.rc < 0 else run.rc), read_trace(where)
