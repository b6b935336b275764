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
import threading
import time
from pathlib import Path

from dlltrace.errors import EXIT_INTERRUPTED, EXIT_KILLED, EXIT_NO_COMMAND, EXIT_NOT_RUN, EXIT_NOT_TRACED, DlltraceError
from dlltrace.trace.files import GzipAhead, event_lines, finish_trace, is_spill
from dlltrace.trace.where import DEFAULT_MAX_SIZE

TYPE_CHECKING = False  # (typing and dataclasses are not imported before a Linux program starts: trace/linux.py)
if TYPE_CHECKING:
    import subprocess
    from typing import Any, Callable, Iterable, Optional

    from dlltrace.trace.launch import LauncherRun
    from dlltrace.trace.reader import Events, Trace
    from dlltrace.worlds.elf import LiveELFWorld

# (the Windows launcher and facts, the Linux recorder and model, the reader and the ending are imported by the path
# that runs them, and a Linux program is started before the reader is imported: a Linux run imports none of the
# Windows side, 0.4 s of CPU at start-up, and its program starts 0.13 s sooner)


def trace_command(cmd: list[str], output: Optional[str], wine_wanted: bool,
                  max_size: int = DEFAULT_MAX_SIZE, warm: Optional[Callable[[], None]] = None) -> tuple[int, Trace]:
    """Run `cmd` traced into `output` (default: files.default_trace_name); its exit code and the trace,
    with the facts appended. `warm`: what the caller will need after, done while a Linux program runs
    (its imports)."""
    if not uses_launcher(wine_wanted):  # .so loads, with the LD_AUDIT recorder
        return trace_linux_command(cmd, output, max_size, warm)
    from dlltrace.trace import launch

    return finish_launched(launch.run_traced(cmd, output, wine_wanted, max_size))


def uses_launcher(wine_wanted: bool) -> bool:
    """Whether `run` goes through the launcher (run --wine, or on Windows; else Linux's recorder). The
    command (commands/run.py) makes the same choice before importing this module."""
    return wine_wanted or not sys.platform.startswith("linux")


def finish_launched(run: "LauncherRun", use_cache: bool = True) -> tuple[int, "Trace"]:
    """What follows a launcher run (launch.run_traced): the trace read back, the facts appended, the trace
    finished; the exit code and the trace. A program that could not be started is a DlltraceError (the
    trace finished and kept)."""
    from dlltrace.model import ERROR_INTERNAL_ERROR
    from dlltrace.trace.launch import machine_words
    from dlltrace.trace.reader import read_trace

    read = read_trace(run.spill)
    failed_start = next(read.of("launch_error"), None)
    if failed_start is not None:
        err = failed_start.get("error")
        where = finish_trace(run.spill, run.out)
        machine = machine_words(failed_start.get("child_machine"))
        if err == ERROR_INTERNAL_ERROR:  # (NtCreateUserProcess: the new process ended before it was initialised)
            raise DlltraceError(f"could not start {run.first}: its process ended while it was being created "
                                f"({error_text(err)}{machine}); nothing of the program ran"
                                + (" (under Wine most often Wine's own start-up failing: run it again)" if run.wine else "")
                                + f"; trace in {where}", EXIT_NO_COMMAND)
        raise DlltraceError(f"command not found or not startable: {run.first} ({error_text(err)}"
                            f"{machine}); trace in {where}", EXIT_NO_COMMAND)
    trace = append_facts(run.spill, read, wine=run.wine, end=run.end, use_cache=use_cache)
    where = finish_trace(run.spill, run.out)
    trace.path = str(where)  # (the summary says where the trace is)
    return run_exit_code(trace), trace


def error_text(code: Optional[int]) -> str:
    """A Win32 error code with its words (the model's, else on Windows the system's)."""
    from dlltrace.model import ERROR_TEXT

    if code is None:
        return "did not return (the process ended during the load)"
    text = ERROR_TEXT.get(code)
    if not text and sys.platform == "win32":  # Windows' own words for a code the model has none for
        from dlltrace import winapi

        text = winapi.format_message(code) if winapi.available() else None
    return f"{code} {text}" if text else str(code)


def append_events(out: Path, trace: Trace, events: list[dict[str, Any]], kept_on_failure: int = 0,
                  lines: Optional[bytes] = None) -> Trace:
    """Append `events` to the trace file at `out` (after a line the program's death cut short, on a line
    of their own) and return `trace` with them. A failure to write never loses the trace: it is said on
    stderr, and the trace returned has only the first `kept_on_failure` events added. `lines`: the events
    already checked and written as lines (linux_facts)."""
    from dlltrace.trace.reader import Trace
    from dlltrace.tracecheck import check_event

    try:
        with open(out, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    f.write(b"\n")  # a line the program's death cut short stays a line of its own
            f.write(event_lines(events) if lines is None else lines)  # (a lone surrogate: written as its escape)
    except OSError as e:
        print(f"dlltrace: warning: could not add file facts to {out}: {e.strerror or e}", file=sys.stderr)
        return Trace(path=trace.path, header=trace.header, events=[*trace.events, *events[:kept_on_failure]],
                     warnings=trace.warnings, checked=True)
    if lines is None:
        for ev in events:  # as the reader would check them (they are written to its schema)
            check_event(ev)
    return Trace(path=trace.path, header=trace.header, events=[*trace.events, *events], warnings=trace.warnings,
                 checked=True)


def append_facts(out: Path, trace: Trace, wine: bool, end: Optional[dict[str, Any]] = None,
                 use_cache: bool = True) -> Trace:
    """Store in the trace the facts a replay needs (PE facts, near misses: diagnosis/collect.py), so that
    `dlltrace report` works from the file alone, after `end` (launch.run_end_event: how the launcher
    ended). A failure here never loses the trace. `use_cache`: the PE facts kept between runs may be used
    (worlds/factscache.py; `run --no-cache`: no)."""
    from dlltrace.diagnosis import collect
    from dlltrace.worlds.live import identity_map, wine_map

    to_host = wine_map(os.environ.get("WINEPREFIX") or Path.home() / ".wine") if wine else identity_map
    events = ([end] if end is not None else []) + collect.collect_facts(trace, to_host, use_cache=use_cache)
    events += record_gone_facts(trace, "file", to_host, {e["path"] for e in events if e.get("ev") == "file"})
    return append_events(out, trace, events, kept_on_failure=1 if end else 0)


def run_failed(trace: Trace) -> bool:
    """Whether the program failed: an exit code that is not 0, a signal other than Ctrl-C's (Linux), or a Python
    exception it ended on (py_exception), in any process of the trace."""
    for e in trace.of("exit"):
        code, sig = e.get("code"), e.get("signal")
        if (type(code) is int and code != 0) or (type(sig) is int and sig != signal.SIGINT):
            return True
    return any(True for _ in trace.of("py_exception"))


def record_gone_facts(trace: Trace, ev: str, to_host: Callable[[str], Optional[str]], known: "set[str]",
                      exists: Callable[[str], bool] = os.path.exists) -> list[dict[str, Any]]:
    """After a program that failed (run_failed), the native files of the distributions it imported that their records
    list (outcome.record_files_to_check, of each Python process's py_dists and py_import events, MAX_RECORD_CHECKS
    at most) that are not there now, as file facts (`ev`: "file", a Windows path; "elf_file") of kind "missing",
    MAX_RECORD_GONE at most, but for the paths already `known` (facts appended already): what
    outcome.rule_record_listed_file_gone_after_a_failure reads in the report. A run that did not fail looks at
    nothing."""
    from dlltrace.diagnosis.outcome import (MAX_RECORD_CHECKS, MAX_RECORD_GONE, dist_sites, record_files_to_check,
                                            where_listed)

    if not run_failed(trace):
        return []
    out: list[dict[str, Any]] = []
    checked = 0
    seen = set(known)
    for pid in dict.fromkeys(e.get("pid") for e in trace.of("py_dists")):  # (each Python process, in order)
        if not isinstance(pid, int):
            continue
        files = record_files_to_check(trace.owners(pid), (e.get("module") for e in trace.of("py_import", pid=pid)),
                                      MAX_RECORD_CHECKS - checked, dist_sites(trace.of("py_dists", pid=pid)))
        for o in files:
            checked += 1
            path = where_listed(o)
            if path in seen:
                continue
            seen.add(path)
            host = to_host(path)
            if host is not None and not exists(host):
                out.append({"ev": ev, "pid": pid, "tid": 0, "seq": 0, "t": 0, "path": path, "kind": "missing"})
                if len(out) >= MAX_RECORD_GONE:
                    return out
        if checked >= MAX_RECORD_CHECKS:
            break
    return out


def run_exit_code(trace: Trace) -> int:
    """What `dlltrace run` exits with (README, Exit codes): the program's own code when it exited or
    crashed (on Unix its low 8 bits, all a Unix exit status holds: 0xC0000005 gives 5; the summary and
    the trace have the full code), else a code of dlltrace's for how it ended."""
    from dlltrace.diagnosis.ending import ending

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


def linux_facts(events: Iterable[dict[str, Any]], world: Optional["LiveELFWorld"] = None
                ) -> tuple[list, list[dict[str, Any]], bytes]:
    """A trace's `events` replayed once in the model against this machine (`world`) through a RecordingELFWorld: the
    replay's calls, and every answer it got (each file's ELF facts or absence, each folder's existence,
    ld.so.cache's answers, the machine's ld.so facts, the copies the fixes found) as elf_system / elf_file events,
    checked against the trace's schema, with their lines."""
    from dlltrace.diagnosis.replay_linux import replay_linux
    from dlltrace.tracecheck import check_event
    from dlltrace.worlds.elf import LiveELFWorld, RecordingELFWorld

    rec = RecordingELFWorld(world or LiveELFWorld())
    calls = replay_linux(events, world=rec)
    events = rec.events(os.getpid())
    for ev in events:  # (as the reader would check them: they are written to its schema)
        check_event(ev)
    return calls, events, event_lines(events)


class FactsAhead:
    """linux_facts made of the first `count` events of the trace the worker reads (`source`, its Events: the same
    dicts, no second copy) as they were when the program's Python ended (py_exit: what follows, the interpreter's
    teardown, can take longer than the replay), by LinuxFactsMeanwhile's worker; kept when no later event of that
    trace can change a call (replay_linux.calls_unchanged_after)."""

    __slots__ = ("source", "count", "calls", "facts", "lines")

    def __init__(self, source: object, count: int, made: tuple[list, list[dict[str, Any]], bytes]) -> None:
        self.source, self.count = source, count
        self.calls, self.facts, self.lines = made


def append_linux_facts(spill: Path, world: Optional["LiveELFWorld"] = None, read: Optional[Trace] = None,
                       ahead: Optional[FactsAhead] = None) -> Optional[Trace]:
    """The facts a report needs, appended after the program ended (linux_facts: the trace replayed once in the
    model against this machine, `world`, the one LinuxFactsMeanwhile filled while it ran), so `report` never reads
    the disk (and works on another machine). `ahead`: those facts made before the program ended, used when they
    are the whole trace's (made of the first events of the worker's own read, and no later event can change a call:
    calls_unchanged_after). The trace with them, its replay kept on it (Trace.replayed: what a replay of it in its
    recorded world gives, the summary's); None when they could not be appended (said on stderr: a failure here
    costs the facts, never the trace)."""
    from dlltrace.diagnosis.replay_linux import calls_unchanged_after
    from dlltrace.trace.reader import read_trace

    try:
        # (`read`: the trace read while it was written, LinuxFactsMeanwhile; its events are `ahead`'s first ones)
        same = ahead is not None and read is not None and read.events is ahead.source
        read = read or read_trace(spill)
        from dataclasses import replace

        trace = replace(read, events=list(read.events))
        if ahead is not None and same and calls_unchanged_after(trace.events, ahead.count):
            calls, facts, lines = ahead.calls, ahead.facts, ahead.lines
        else:
            calls, facts, lines = linux_facts(trace.events, world)
        known = {e["path"] for e in facts if e.get("ev") == "elf_file" and isinstance(e.get("path"), str)}
        gone = record_gone_facts(trace, "elf_file", lambda p: p, known)
        if gone:  # (the files of the imported distributions not there after a failure: the report's RECORD rule)
            facts, lines = facts + gone, lines + event_lines(gone)
        out = append_events(spill, trace, facts, lines=lines)
        if len(out.events) < len(trace.events) + 1:  # (not written: append_events said why)
            return None
        out.replayed = calls
        return out
    except Exception as e:  # (the program's trace is kept whatever happens here)
        print(f"dlltrace: warning: the Linux facts were not appended ({e})", file=sys.stderr)
        return None


class GrowingTrace:
    """The spill as the recorder writes it (whole lines, each one O_APPEND write), as a file whose readline gives
    each line once it is whole, waiting for it until `complete` is set (then the rest as it is: read_trace's own
    reading of a last line cut short). `on_line` sees each line; `on_wait`, when set, is called with the place
    after the last whole line each time a wait begins while the program runs."""

    POLL = 0.02  # seconds between looks at the file when it has no whole line more
    ORPHAN = 10.0  # seconds after the program ended with no `complete`: taken as complete (a run that failed after)

    def __init__(self, spill: Path, proc: "subprocess.Popen[bytes]", on_line: Callable[[bytes], None]) -> None:
        self.f = open(spill, "rb")
        self.proc, self.on_line = proc, on_line
        self.complete = threading.Event()
        self.ended_at: Optional[float] = None
        self.on_wait: Optional[Callable[[int], None]] = None

    def readline(self, n: int = -1) -> bytes:
        while True:
            pos = self.f.tell()
            done = self.complete.is_set()
            line = self.f.readline(n)
            if line.endswith(b"\n") or (n >= 0 and len(line) >= n) or done:
                if line:
                    self.on_line(line)
                return line
            self.f.seek(pos)
            if self.proc.poll() is not None:
                self.ended_at = self.ended_at or time.monotonic()
                if time.monotonic() - self.ended_at > self.ORPHAN:
                    self.complete.set()
            elif self.on_wait is not None:
                self.on_wait(pos)
            self.complete.wait(self.POLL)


# how much the worker of LinuxFactsMeanwhile lowers its priority (a nice value, added): +5 takes a third of a core the
# program wants; +10 (a tenth) left it, on a machine with other jobs, with its work still to do when the program
# had ended (30-40 ms more after it, measured with bench/linux_run.py's program)
MEANWHILE_NICE = 5


def lower_thread_priority(by: int = MEANWHILE_NICE) -> bool:
    """Lowers the calling thread's scheduling priority by `by` nice steps (Linux: a nice value is a thread's,
    setpriority(PRIO_PROCESS, tid)), so that the program it runs beside wins a shared core. True when done."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
        return True
    except (AttributeError, OSError):  # (no such call on this system, or not allowed)
        return False


class LinuxFactsMeanwhile:
    """What `run` does while the program runs (trace/linux.py run_recorded's `meanwhile`), on a core the program
    does not use, so that little is left for after it ends, all in one worker thread (_work, at a lower priority):
    import the model (and `warm`: the command's own, the summary's renderer), probe ld.so (LiveELFWorld), read
    the trace as it is written
    (reader.read_trace_from over a GrowingTrace: read_trace's own checks) and the ELF facts of each object the
    program opens (its objopen events), into the world append_linux_facts then asks (LiveELFWorld keeps each
    file's facts by its identity: device, inode, size, time, so a file changed after is read again). Once the
    program's Python has ended (the py_exit of its process, not a child's: the interpreter's teardown that
    follows, 0.2 s for a big import, often outlasts the replay), the worker also makes the facts
    append_linux_facts appends (linux_facts) of the trace so far (`ahead`; made again at a later py_exit of that
    process), kept when nothing that followed changes the replay. Nothing here decides anything: what fails here
    is done again after the program ends (read_trace), where a failure is said."""

    def __init__(self, warm: Optional[Callable[[], None]] = None) -> None:
        self.warm = warm
        self.world: Optional["LiveELFWorld"] = None
        self.growing: Optional[GrowingTrace] = None
        self.thread: Optional[threading.Thread] = None
        self.trace: Optional[Trace] = None
        self.ahead: Optional[FactsAhead] = None
        self._py_ended = False  # a py_exit of the program's process read since the facts were last made ahead
        self.gzip: Optional[GzipAhead] = None  # a compressed trace's spill, compressed as it is read
        self.events: Optional["Events"] = None  # the events of the trace the worker reads, as they are read

    def __call__(self, proc: "subprocess.Popen[bytes]", spill: Path) -> None:
        self.gzip = GzipAhead() if is_spill(spill) else None
        self.growing = GrowingTrace(spill, proc, self._on_line)
        self.growing.on_wait = self._on_wait
        self.thread = threading.Thread(target=self._work, args=(spill,), daemon=True, name="dlltrace-trace-reader")
        self.thread.start()

    def _on_line(self, line: bytes) -> None:
        if self.gzip is not None:
            self.gzip.feed(line)
        if b'"py_exit"' in line and self.growing is not None:  # (the program's own Python: not a child's)
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
            if isinstance(ev, dict) and ev.get("pid") == self.growing.proc.pid:
                self._py_ended = True
        if b'"objopen"' in line and self.world is not None:
            try:
                path = json.loads(line).get("path")
            except ValueError:
                return
            if isinstance(path, str) and path.startswith("/"):
                self.world.file(path)

    def _work(self, spill: Path) -> None:
        """The worker thread: the imports, the world, then the trace read as it grows. It yields to the
        program first (lower_thread_priority): on a machine whose cores the program keeps busy, it takes what
        they leave; the main thread, which does what follows the program's end, keeps its priority."""
        assert self.growing is not None
        lower_thread_priority()
        try:
            from dlltrace.diagnosis import replay_linux  # noqa: F401  (imported now, used after)
            from dlltrace.diagnosis.ending import ending  # noqa: F401
            from dlltrace.trace.reader import Events, read_trace_from
            from dlltrace.worlds.elf import LiveELFWorld

            if self.warm is not None:
                self.warm()
            self.world = LiveELFWorld()
            self.events = Events(keep_parsed=True)  # (run replays all of it: parsed once, kept so)
            self.trace = read_trace_from(spill, self.growing, events=self.events)  # type: ignore[arg-type]
        except BaseException:  # (read again after, where its error is said)
            self.trace = None
        finally:
            self.growing.f.close()

    def _on_wait(self, pos: int) -> None:
        """The worker has read every whole line so far (the `pos` bytes of the spill: the reader has taken each
        line it was given into its Events before it asks for the next) and the program runs: after a py_exit, the
        facts of the events so far are made now. Any failure only leaves them to be made after."""
        if not self._py_ended or self.world is None or self.events is None:
            return
        self._py_ended = False
        self.ahead = None
        try:
            events = list(self.events)
            self.ahead = FactsAhead(self.events, len(events), linux_facts(events, self.world))
        except Exception:  # (made after the program ends instead, where a failure is said)
            self.ahead = None

    def finished(self) -> Optional[Trace]:
        """The trace read while it was written, now that it is complete (the program's end appended); None when
        it was not read (then read_trace reads it)."""
        if self.growing is None or self.thread is None:
            return None
        self.growing.complete.set()
        self.thread.join()
        return self.trace


def trace_linux_command(cmd: list[str], output: Optional[str], max_size: Optional[int] = None,
                        warm: Optional[Callable[[], None]] = None) -> tuple[int, Trace]:
    """Run cmd with the recorder into output (trace/linux.py run_recorded), the facts appended
    (append_linux_facts, begun while it runs: LinuxFactsMeanwhile, which runs `warm` too); its exit code
    (128 + N for a signal N) and the trace, its replay kept on it. max_size is accepted for run's signature
    and not enforced yet."""
    from dlltrace.trace import linux

    meanwhile = LinuxFactsMeanwhile(warm)
    run = linux.run_recorded(cmd, output, meanwhile)
    read = meanwhile.finished()  # (first: the worker sets meanwhile.world, which is read once it has ended)
    trace = append_linux_facts(run.spill, meanwhile.world, read, meanwhile.ahead)
    where = finish_trace(run.spill, run.out, meanwhile.gzip if read is not None else None)
    if trace is None:
        from dlltrace.trace.reader import read_trace

        trace = read_trace(where)
    trace.path = str(where)  # (the summary says where the trace is)
    if run.interrupted:
        return EXIT_INTERRUPTED, trace
    return (128 - run.rc if run.rc < 0 else run.rc), trace
