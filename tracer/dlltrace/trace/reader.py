"""Reading trace files (format v1, docs/trace-format.md): typed access for the report and the tests.

    trace = read_trace("t.jsonl")
    for load in trace.failed_loads():
        print(load.name, hex(load.flags or 0), load.error, [p.win_path for p in load.probes])

A trace is JSON Lines: a header line, then events from one or more processes (told apart by
"pid"). A truncated or garbled line (a process killed mid-write), an event without the fields
the reader needs, or a field that breaks the schema is a warning naming the file and line (the
line or the field is skipped) and everything else is kept; a file that is not a dlltrace trace,
or a newer format version, raises DlltraceError(EXIT_BAD_TRACE) naming the file and line.
"""

from __future__ import annotations

import contextlib
import gc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, Union, overload

from dlltrace.errors import EXIT_BAD_TRACE, DlltraceError
from dlltrace.tracecheck import check_event

FORMAT_NAME = "dlltrace-trace"
FORMAT_VERSION = 1

# The NTSTATUS with which a process ends when its static imports fail before its entry point,
# and the Win32 error a LoadLibrary of the same tree would give.
STARTUP_STATUS = {0xC0000135: 126, 0xC0000139: 127, 0xC000007B: 193, 0xC0000142: 1114}
STARTUP_STATUS_TEXT = {0xC0000135: "STATUS_DLL_NOT_FOUND", 0xC0000139: "STATUS_ENTRYPOINT_NOT_FOUND",
                       0xC000007B: "STATUS_INVALID_IMAGE_FORMAT", 0xC0000142: "STATUS_DLL_INIT_FAILED"}

# Integer fields the reader relies on, per event kind: an event without them is skipped (with a
# warning); any other field that breaks the schema is dropped from its event (tracecheck.py).
ESSENTIAL = ("pid", "seq")  # every event
REQUIRED_INT = {
    "load_begin": ("tid", "t"),
    "load_end": ("tid", "t", "load"),
    "probe": ("tid", "t", "load", "status"),
}


@dataclass
class Header:
    format: str
    version: int
    tool: Optional[str] = None
    created: Optional[str] = None
    platform: Optional[str] = None


@overload
def nt_to_win32(path: str) -> str: ...
@overload
def nt_to_win32(path: None) -> None: ...
def nt_to_win32(path: Optional[str]) -> Optional[str]:
    r"""`\??\C:\x\a.dll` -> `C:\x\a.dll`; `\??\UNC\srv\s` -> `\\srv\s`; anything else unchanged."""
    if path is None:
        return None
    if path.startswith("\\??\\UNC\\"):
        return "\\\\" + path[8:]
    if path.startswith("\\??\\") or path.startswith("\\\\?\\"):
        return path[4:]
    return path


@dataclass
class Probe:
    """One file-system call the loader made while a load was in flight (NtOpenFile & co)."""
    seq: int
    pid: int
    tid: int
    t: int
    load: int                  # seq of the load_begin it belongs to (same pid)
    op: str                    # "open" | "create" | "query" | "section"
    status: int                # NTSTATUS (unsigned)
    path: Optional[str] = None  # NT path as passed (\??\C:\...); None for "section"
    handle: Optional[str] = None
    file: Optional[str] = None  # "section": the file handle the section was made from

    @property
    def ok(self) -> bool:
        return self.status < 0x80000000

    @property
    def win_path(self) -> Optional[str]:
        return nt_to_win32(self.path)


@dataclass
class Load:
    """One LoadLibrary* / LdrLoadDll call: its load_begin, its load_end (None if the process died
    first), the probes made while it was the innermost load on its thread, and nested loads."""
    seq: int
    pid: int
    tid: int
    t: int
    api: str
    name: Optional[str]
    flags: Optional[int]
    parent: Optional[int]
    depth: int
    ctx: Optional[int]
    caller: Optional[str]
    end: Optional[dict] = None
    probes: list[Probe] = field(default_factory=list)
    children: list["Load"] = field(default_factory=list)
    # the loader's DLL notifications while this was the innermost load on its thread, in order:
    # ("loaded" | "unloaded", module path)
    notifications: list[tuple[str, str]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def result(self) -> Optional[str]:
        return self.end.get("result") if self.end else None

    @property
    def error(self) -> Optional[int]:
        return self.end.get("error") if self.end else None

    @property
    def status(self) -> Optional[int]:
        return self.end.get("status") if self.end else None

    @property
    def path(self) -> Optional[str]:
        return self.end.get("path") if self.end else None

    @property
    def ok(self) -> bool:
        return self.end is not None and self.end.get("result") is not None

    def all_probes(self) -> list[Probe]:
        """This load's probes and those of its nested loads, in file order."""
        out = list(self.probes)
        for c in self.children:
            out.extend(c.all_probes())
        return sorted(out, key=lambda p: p.seq)


@dataclass
class Trace:
    path: str
    header: Header
    events: list[dict]
    warnings: list[str] = field(default_factory=list)
    checked: bool = False  # every event was checked against the schema (read_trace does it)
    _py_events: Optional[dict] = field(default=None, repr=False, compare=False)

    def of(self, kind: str, pid: Optional[int] = None) -> Iterator[dict]:
        """The events of this kind (of process `pid`), in file order."""
        for e in self._kind_index().get(kind, ()):
            if pid is None or e.get("pid") == pid:
                yield e

    def _kind_index(self) -> dict[str, list[dict]]:
        """kind -> its events in file order, built once (a report asks for a kind many times)."""
        cached = self.__dict__.get("_kind_cache")
        if cached is None or cached[0] != len(self.events):
            index: dict[str, list[dict]] = {}
            for e in self.events:
                kind = e.get("ev")
                if isinstance(kind, str):
                    index.setdefault(kind, []).append(e)
            cached = (len(self.events), index)
            self.__dict__["_kind_cache"] = cached
        return cached[1]

    @property
    def pids(self) -> list[int]:
        """Traced processes, in order of appearance."""
        return list(self._processes())

    def process(self, pid: int) -> Optional[dict]:
        return self._processes().get(pid)

    def _processes(self) -> dict[int, dict]:
        """pid -> its `process` event, found once (the events of a read trace do not change)."""
        cached = self.__dict__.get("_process_index")
        if cached is None or cached[0] != len(self.events):
            index: dict[int, dict] = {}
            for e in self.of("process"):
                index.setdefault(e["pid"], e)
            cached = (len(self.events), index)
            self.__dict__["_process_index"] = cached
        return cached[1]

    def start_status(self, pid: int) -> Optional[int]:
        """The loader status (STARTUP_STATUS) process `pid` ended with before its shim started
        (it has no `process` event): a static import of the program failed. None otherwise."""
        if pid in self._processes():
            return None
        return next((e["code"] for e in self.of("exit", pid=pid) if e.get("code") in STARTUP_STATUS), None)

    def start_failures(self) -> list[int]:
        """The processes with a start_status, in the order of their `exit` events."""
        return list(dict.fromkeys(e["pid"] for e in self.of("exit") if self.start_status(e["pid"]) is not None))

    def env(self, pid: int) -> Optional[dict]:
        return next(self.of("env", pid=pid), None)

    def api_sets(self, pid: int) -> Optional[dict]:
        """The `sets` of process `pid`'s `apisets` event (contract -> host or {host, exceptions}),
        or None when the trace has none for it (an older trace, or a schema of another version)."""
        e = next(self.of("apisets", pid=pid), None)
        sets = e.get("sets") if e else None
        return sets if isinstance(sets, dict) else None

    def exit_code(self, pid: int) -> Optional[int]:
        e = next(self.of("exit", pid=pid), None)
        return e.get("code") if e else None

    def loads(self, pid: Optional[int] = None) -> list[Load]:
        """Every load (top-level and nested) in begin order, with end and probes attached."""
        by_key: dict[tuple[int, Optional[int]], Load] = {}  # (an event without "load" finds none)
        out: list[Load] = []
        ld: Optional[Load]
        for e in self.events:
            ev = e.get("ev")
            if pid is not None and e.get("pid") != pid:
                continue
            if ev == "load_begin":
                ld = Load(seq=e["seq"], pid=e["pid"], tid=e["tid"], t=e["t"], api=e.get("api", ""),
                          name=e.get("name"), flags=e.get("flags"), parent=e.get("parent"),
                          depth=e.get("depth", 0), ctx=e.get("ctx"), caller=e.get("caller"))
                by_key[(ld.pid, ld.seq)] = ld
                out.append(ld)
                if ld.parent is not None and (ld.pid, ld.parent) in by_key:
                    by_key[(ld.pid, ld.parent)].children.append(ld)
            elif ev == "load_end":
                ld = by_key.get((e["pid"], e.get("load")))
                if ld is not None:
                    ld.end = e
            elif ev == "dll_notify":
                ld = by_key.get((e["pid"], e.get("load")))
                if ld is not None and isinstance(e.get("path"), str) and e.get("reason") in ("loaded", "unloaded"):
                    ld.notifications.append((e["reason"], e["path"]))
            elif ev == "probe":
                ld = by_key.get((e["pid"], e.get("load")))
                if ld is not None:
                    ld.probes.append(Probe(seq=e["seq"], pid=e["pid"], tid=e["tid"], t=e["t"], load=e["load"],
                                           op=e.get("op", ""), status=e.get("status", 0), path=e.get("path"),
                                           handle=e.get("handle"), file=e.get("file")))
        return out

    def top_loads(self, pid: Optional[int] = None) -> list[Load]:
        return [ld for ld in self.loads(pid) if ld.parent is None]

    def failed_loads(self, pid: Optional[int] = None) -> list[Load]:
        """Loads that ended in failure, plus loads that never ended (the process died in them)."""
        return [ld for ld in self.loads(pid) if not ld.ok]

    def context(self, load: Load) -> Optional[dict]:
        """The Python event (py_import, py_dlopen, ...) a load is attributed to, if any."""
        if load.ctx is None:
            return None
        if self._py_events is None:  # indexed once: a scan per load made a report quadratic
            self._py_events = {}
            for e in self.events:
                if str(e.get("ev", "")).startswith("py_"):
                    self._py_events.setdefault((e.get("pid"), e.get("seq")), e)
        return self._py_events.get((load.pid, load.ctx))


# the C scanner json.loads itself uses; typeshed does not declare the attribute (it is set in
# JSONDecoder.__init__, by json.scanner.make_scanner)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads_line(text: str) -> Any:
    """json.loads of one line, less its per-call overhead (a trace has 100,000 of them): the C
    scanner on the line without surrounding JSON whitespace, which must end where the line does."""
    s = text.strip(" \t\r\n")
    try:
        obj, end = _scan_once(s, 0)
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(s):
        raise ValueError("extra data after the JSON value")
    return obj


def warning_lines(trace: Trace, limit: int = 10) -> list[str]:
    """The reader's warnings as `dlltrace: warning: ...` lines, at most `limit` of them and then
    one line that counts the rest (a badly damaged file must not bury the report)."""
    out = [f"dlltrace: warning: {w}" for w in trace.warnings[:limit]]
    rest = len(trace.warnings) - limit
    if rest > 0:
        out.append(f"dlltrace: warning: {trace.path}: {rest} more damaged line{'s' if rest != 1 else ''} "
                   f"or field{'s' if rest != 1 else ''} not shown")
    return out


def concatenated(lineno: int) -> str:
    """The error for a second header after events: one trace file appended to another. Its seqs
    restart, so its loads would be read as the first trace's (invented retries, disagreements)."""
    return (f"a second trace header after events: two traces were joined into this file; split it before this "
            f"line (`head -n {lineno - 1}` is the first trace) and report each")


def _bad(path: Union[str, Path], lineno: int, what: str) -> DlltraceError:
    return DlltraceError(f"{path}: line {lineno}: {what}", EXIT_BAD_TRACE)


def parse_header(obj: Any, path: Union[str, Path], lineno: int = 1) -> Header:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise _bad(path, lineno, f"not a dlltrace trace (the first line must be a {FORMAT_NAME!r} header)")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _bad(path, lineno, f"invalid trace format version {version!r}")
    if version > FORMAT_VERSION:
        raise _bad(path, lineno, f"trace format version {version} is newer than this dlltrace reads "
                                 f"({FORMAT_VERSION}); upgrade dlltrace")
    return Header(format=obj["format"], version=version, tool=obj.get("tool"), created=obj.get("created"),
                  platform=obj.get("platform"))


@contextlib.contextmanager
def paused_gc():
    """Pause the cyclic garbage collector while building many small objects (events, loads,
    simulator trees): on a 100,000-event trace collecting as they are made took more than half the
    time. In the command (freeze_after_pauses), what is still alive at the end (the trace, the
    replay) is then frozen (gc.freeze), not left in the youngest generation, where the first
    collection after the pause would scan every one of it (0.2 s a pause on such a trace); sound
    because what dlltrace builds has no reference cycles (tests/test_report.py checks it), so
    reference counting alone frees it. A library caller, whose process lives on, gets the plain
    pause: freezing would also keep any cyclic garbage of its own for ever."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if _FREEZE[0]:
                gc.freeze()
            gc.enable()


_FREEZE = [False]


def freeze_after_pauses(on: bool = True) -> None:
    """For a short-lived process (the `dlltrace` command): paused_gc freezes instead of collecting."""
    _FREEZE[0] = on


def read_trace(path: Union[str, Path]) -> Trace:
    with paused_gc():
        return _read_trace(path)


def _utf8_or_none(line: bytes) -> Optional[str]:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_trace(path: Union[str, Path]) -> Trace:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise DlltraceError(f"{path}: cannot read: {e.strerror or e}", EXIT_BAD_TRACE) from None
    ws = " \t\n\r\x0b\x0c"  # what counts as a blank line (bytes.strip's default)
    # decoded at once when it can be; else line by line, so that one bad line is only that line
    # (None: a line that is not UTF-8)
    lines: Sequence[Optional[str]]
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = [_utf8_or_none(line) for line in data.split(b"\n")]
    # a complete file ends with "\n": the last element is then empty
    complete_end = bool(lines) and lines[-1] == ""
    if complete_end:
        lines = lines[:-1]
    first_line = lines[0] if lines else ""
    if first_line is not None and not first_line.strip(ws):
        raise _bad(path, 1, "empty file, not a dlltrace trace")
    try:
        if first_line is None:
            raise ValueError("not UTF-8")
        first = json.loads(first_line)
    except (ValueError, RecursionError):
        raise _bad(path, 1, "not a dlltrace trace (the first line is not JSON)") from None
    header = parse_header(first, path)
    events: list[dict] = []
    warnings: list[str] = []
    seen: dict[tuple[Any, Any], int] = {}  # (pid, seq) -> index in events of its first event
    seen_lines: set[str] = set()  # the lines of the launcher's events (seq 0)
    copies: list[int] = []  # lines of events that repeat an earlier one exactly
    last = len(lines)
    for i, raw in enumerate(lines[1:], start=2):
        if raw is not None and "\0" in raw:
            # zero bytes: a range a writer reserved and never wrote (it died, or its write failed;
            # docs/trace-format.md, "Several processes, one file"); the line after them is whole
            kept = raw.rsplit("\0", 1)[1]
            warnings.append(f"{path}: line {i}: {len(raw) - len(kept)} bytes of unwritten lines skipped "
                            "(a writer died or its write failed)")
            raw = kept
        if raw is not None and not raw.strip(ws):
            continue
        try:
            if raw is None:
                raise ValueError("not UTF-8")
            obj = _loads_line(raw)
        except (ValueError, RecursionError):  # (RecursionError: absurdly deep nesting)
            if i == last and not complete_end:
                warnings.append(f"{path}: line {i}: truncated last line ignored")
            else:
                warnings.append(f"{path}: line {i}: unreadable line skipped")
            continue
        if not isinstance(obj, dict):
            warnings.append(f"{path}: line {i}: not a JSON object, skipped")
            continue
        if "ev" not in obj:
            if obj.get("format") == FORMAT_NAME:  # another header
                parse_header(obj, path, i)
                if events:  # after events: another trace starts here
                    raise _bad(path, i, concatenated(i))
                continue  # before any event: two writers both found the file empty
            warnings.append(f"{path}: line {i}: no \"ev\" field, skipped")
            continue
        if not isinstance(obj["ev"], str):
            warnings.append(f"{path}: line {i}: event whose \"ev\" is not a string, skipped")
            continue
        problems, usable = check_event(obj, ESSENTIAL + REQUIRED_INT.get(obj["ev"], ()))
        for problem in problems:
            warnings.append(f"{path}: line {i}: {problem}")
        if not usable:
            continue
        if obj["seq"]:
            k = (obj["pid"], obj["seq"])
            first = seen.setdefault(k, len(events))
            if first != len(events) and events[first] == obj:  # the same event twice: a copy, dropped
                copies.append(i)
                continue
        elif obj["ev"] != "file":  # seq 0, the launcher's events: the same line twice is a copy
            if raw in seen_lines:  # (a `file` fact twice is the same fact: kept, harmless)
                copies.append(i)
                continue
            seen_lines.add(raw)
        events.append(obj)
    if copies:
        warnings.append(f"{path}: line {copies[0]}: {len(copies)} event(s) repeat earlier ones exactly (same pid, "
                        f"seq, time and fields): the file holds the same events twice; the copies are ignored")
    return Trace(path=str(path), header=header, events=events, warnings=warnings, checked=True)
