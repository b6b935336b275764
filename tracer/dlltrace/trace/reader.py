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

import json
import os
import zlib
from array import array
from bisect import bisect_left
from itertools import accumulate
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence, Union, overload

from dlltrace.trace.pycontext import CONTEXT_KINDS, END_KINDS, PyContexts
from dlltrace.seqs import MadeSequence
from dlltrace.errors import EXIT_BAD_TRACE, EXIT_USAGE, DlltraceError
from dlltrace.model import SLOTS, Owner, PackageLoader
from dlltrace.tracecheck import check_event
from dlltrace.trace.asked import TRIMMED, Asked, AskedFold

from dlltrace.trace.where import FORMAT_NAME, FORMAT_VERSION  # noqa: E402,F401  (the header's: where.py)

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


_ESSENTIAL_OF = {kind: ESSENTIAL + ints for kind, ints in REQUIRED_INT.items()}  # (made once, not per event)


@dataclass
class Header:
    format: str
    version: int
    tool: Optional[str] = None
    created: Optional[str] = None
    platform: Optional[str] = None
    command: tuple[str, ...] = ()  # the command `dlltrace run` ran (the header's `command`), () when not given


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


@dataclass(**SLOTS)
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


LOAD_KINDS = ("load_begin", "load_end", "dll_notify", "probe")  # what Trace.loads() is made of
FILE_PROBE_OPS = ("open", "create", "query")  # the probes that ask about a file (not "section")

# Event kinds a trace has a few of per process: kept parsed. Every other kind (load_begin, load_end,
# probe, dll_notify, file, py_import, ... : the bulk of a trace) is kept as its line's bytes and
# parsed when it is asked for (Events).
KEPT_KINDS = frozenset({"process", "env", "apisets", "warning", "py_env", "py_dists", "py_gpu", "py_exception", "exit", "launch_error",
                        "capped", "spawn", "stats", "adddir", "removedir", "setdlldir", "setdefault", "setenv"})


# what Events.add does more with an event of a kind (its tag): indexed as a py_* event, a `file` event
# (FileIndex), a probe (the probe facts), or not
_OTHER, _PY, _FILE, _PROBE = range(4)
_NO_LOAD = -(1 << 63)  # (Events._probe_loads: a probe without a 64-bit int `load`)

BLOCK = 1 << 16  # bytes of lines compressed together (Events): zlib's window is 32 KB, so bigger gains little
CACHED_BLOCKS = 4  # blocks kept decompressed (a pass over the events, the file facts, the Python events)


class FileIndex:
    """The `file` events of a read trace, gathered in the reader's one pass, so nothing parses them again to
    index them (issue 25): each one's place in its Events, its `path` and `kind` as the checked event has them
    (None where it lacks one, or it is not a string), and what their `pe` objects ask of the DLLs' exports
    (AskedFold) and whether one of them has trimmed export lists. RecordedWorld indexes a trace's files from it
    (a file's PE facts are still built from its event when asked for); the CUDA table takes the paths the trace
    knows from it. The paths are kept as one string once read (a string each held 1.9 MB more on the 19 MB
    bench trace, bench/report_memory.py)."""

    __slots__ = ("pos", "_paths", "_text", "_ends", "_none", "kinds", "trimmed", "_fold", "_asked", "_kind_names")

    def __init__(self) -> None:  # (no reference to its Events: Events holds it, and a cycle would wait for the collector)
        self.pos = array("I")  # (rising: the events are added in file order)
        self._paths: Optional[list[Optional[str]]] = []  # while the trace is read; then _text, _ends, _none
        self._text = ""
        self._ends = array("Q")
        self._none: set[int] = set()
        self.kinds: list[Optional[str]] = []
        self.trimmed = False
        self._fold: Optional[AskedFold] = AskedFold()
        self._asked: Optional[Asked] = None
        self._kind_names: dict[str, str] = {}  # (each kind one string: 20,000 events of a few kinds)

    def add(self, pos: int, obj: dict) -> None:
        path, kind, pe = obj.get("path"), obj.get("kind"), obj.get("pe")
        self.pos.append(pos)
        if self._paths is None:  # (an event added after seal(): the paths as a list again)
            self._paths = [self.path(j) for j in range(len(self.pos) - 1)]
        self._paths.append(path if type(path) is str else None)
        self.kinds.append(self._kind_names.setdefault(kind, kind) if type(kind) is str else None)
        if type(pe) is dict and path and type(path) is str and kind not in ("dir", "nodir", "missing"):
            assert self._fold is not None
            self._fold.add(pe)
            if TRIMMED in pe:
                self.trimmed = True

    def __len__(self) -> int:
        return len(self.pos)

    def seal(self) -> None:
        """Keep the paths as one string and where each ends (None: the indexes in _none): no event comes after."""
        if self._paths is not None:
            self._none = {j for j, p in enumerate(self._paths) if p is None}
            self._ends = array("Q", accumulate(len(p or "") for p in self._paths))
            self._text, self._paths = "".join(p or "" for p in self._paths), None

    def path(self, j: int) -> Optional[str]:
        """The `path` of the j-th file event."""
        self.seal()
        return None if j in self._none else self._text[self._ends[j - 1] if j else 0:self._ends[j]]

    def paths(self) -> list[Optional[str]]:
        """The `path` of each file event, in order."""
        return [self.path(j) for j in range(len(self.pos))]

    def path_at(self, pos: int) -> Optional[str]:
        """The `path` of the file event at this place of the Events."""
        j = bisect_left(self.pos, pos)
        return self.path(j) if j < len(self.pos) and self.pos[j] == pos else None

    def asked(self) -> Asked:
        """What the `pe` objects ask for (AskedFold.result, made once)."""
        if self._asked is None:
            assert self._fold is not None
            self._asked, self._fold = self._fold.result(), None
        return self._asked

    def known_paths(self) -> list[str]:
        """The paths of the file events whose kind says the path is there (not "missing" nor "nodir"), in order."""
        return [p for p, k in zip(self.paths(), self.kinds) if p is not None and k not in ("missing", "nodir")]


class Events(MadeSequence[dict]):
    """The events of a read trace, in file order, kept compactly (issue 10 item 7: `report` in at most
    about twice the trace's size): the few events of KEPT_KINDS as dicts, every other one as its line's
    bytes, in blocks of about BLOCK bytes compressed with zlib (level 1: a tenth of the size, 0.1 s
    each way for 20 MB), parsed (a new dict) each time it is asked for; by kind and pid, without
    parsing (`of`, `select`). It reads like the list of dicts it stands for (indexing, iteration, ==).
    `keep_parsed`: every event kept as its dict (no compression, never parsed again): `run`, which replays the
    whole trace it has just read, and so held it all parsed then anyway."""

    def __init__(self, keep_parsed: bool = False) -> None:
        self._keep_all = keep_parsed
        self._blocks: list[bytes] = []  # compressed, sealed
        self._buf = bytearray()         # the block being filled
        self._cache: dict[int, bytes] = {}  # block number -> its bytes (the last CACHED_BLOCKS used)
        self._hot_block = -1  # the block of the last event read, and its bytes
        self._hot: Union[bytes, bytearray] = b""
        self._raw_bytes = 0
        self._kinds = array("I")     # each event's kind, a number: _kind_names[n]
        self._kind_names: list[str] = []
        self._pids: Union[array, list[Any]] = array("I")  # (64 bits, then a list, once a pid does not fit)
        self._at = array("q")       # block << 32 | offset in it, or -1 - index in _kept
        self._len = array("I")      # length of the line (0 for a kept event; 64 bits once one needs it)
        self._kept: list[dict] = []
        self._by_kind: dict[str, array] = {}
        self._kind_info: dict[str, tuple[int, array, bool, int]] = {}  # kind -> its code, _by_kind[kind], kept, tag (add)
        # pid -> the seqs of its py_* events, rising, and their positions (py_event: bisect); a seq
        # out of order (or beyond 64 bits): (pid, seq) -> position in _py_odd. The first of a seq wins.
        self._py_seqs: dict[Any, array] = {}
        self._py_pos: dict[Any, array] = {}
        self._py_odd: dict[tuple[Any, Any], int] = {}
        # pid -> (Win32 path, NTSTATUS, a FILE_PROBE_OPS op) of its probes with a path, each once, in order: its
        # file probes' facts (Trace.probe_facts) and the paths its probes found (Trace.found_probe_paths), let go
        # of once both are taken
        self._probe_facts: dict[Any, dict[tuple[str, int, bool], None]] = {}
        self._probes_taken: set[Any] = set()
        self._found_taken: set[Any] = set()
        self._files = FileIndex()  # the `file` events' paths, kinds and asks, gathered as they are added
        # each probe's `load` (the seq of the load it belongs to), in the order of _by_kind["probe"], so that a pass
        # can attribute a probe to its load without parsing it (select_probes_unparsed); _NO_LOAD: none, or one
        # that is not a 64-bit int (then in _probe_odd, by position)
        self._probe_loads = array("q")
        self._probe_odd: dict[int, Any] = {}
        self._last_pos = -1
        self._last: dict = {}

    def add(self, obj: dict, line: Optional[bytes]) -> None:
        """Append an event: `obj` as parsed, `line` the bytes it was parsed from (None: obj was changed
        after parsing, or is kept as it is)."""
        kind = obj["ev"]
        info = self._kind_info.get(kind)
        if info is None:
            info = self._new_kind(kind)
        code, idx, kept, tag = info
        pos = len(self._kinds)
        self._kinds.append(code)
        pid = obj["pid"]
        try:
            self._pids.append(pid)
        except (OverflowError, TypeError):  # (the reader checked it is an int: one beyond 32 bits, then 64)
            wide = isinstance(self._pids, array) and self._pids.typecode == "I" and type(pid) is int \
                and -(1 << 63) <= pid < (1 << 63)
            self._pids = array("q", self._pids) if wide else list(self._pids)
            self._pids.append(pid)
        if kept:
            self._at.append(-1 - len(self._kept))
            self._len.append(0)
            self._kept.append(obj)
        else:
            data = line if line is not None else json.dumps(obj).encode("ascii")
            n = len(data)
            buf = self._buf
            if buf and len(buf) + n > BLOCK:
                self._blocks.append(zlib.compress(buf, 1))
                buf = self._buf = bytearray()
                self._hot_block = -1
            self._at.append(len(self._blocks) << 32 | len(buf))
            if n >= 1 << 32 and self._len.typecode == "I":  # (a line of 4 GB or more)
                self._len = array("q", self._len)
            self._len.append(n)
            buf += data
            self._raw_bytes += n
        idx.append(pos)
        if tag == _PY:
            self._add_py(pid, obj.get("seq"), pos)
        elif tag == _FILE:
            self._files.add(pos, obj)
        elif tag == _PROBE:
            load = obj.get("load")
            if type(load) is int and _NO_LOAD < load < (1 << 63):
                self._probe_loads.append(load)
            else:
                self._probe_loads.append(_NO_LOAD)
                if load is not None:
                    self._probe_odd[pos] = load
            path = obj.get("path")
            if isinstance(path, str):
                facts = self._probe_facts.get(pid)
                if facts is None:
                    facts = self._probe_facts[pid] = {}
                facts.setdefault((nt_to_win32(path), int(obj.get("status") or 0), obj.get("op") in FILE_PROBE_OPS), None)

    def _new_kind(self, kind: str) -> tuple[int, array, bool, int]:
        """A kind's first event: its code, its index of positions, whether its events are kept parsed, and what
        add does more with them (a tag)."""
        code = len(self._kind_names)
        self._kind_names.append(kind)
        idx = self._by_kind[kind] = array("I")
        tag = _PY if kind.startswith("py_") else _FILE if kind == "file" else _PROBE if kind == "probe" else _OTHER
        info = self._kind_info[kind] = (code, idx, self._keep_all or kind in KEPT_KINDS, tag)
        return info

    def __len__(self) -> int:
        return len(self._kinds)

    def __repr__(self) -> str:
        return f"Events({len(self)} events, {self._raw_bytes:,} bytes of lines in {self.stored_bytes():,})"

    def _get(self, i: int) -> dict:
        at = self._at[i]
        if at < 0:
            return self._kept[-1 - at]
        block, off = at >> 32, at & 0xFFFFFFFF
        if block == self._hot_block:  # (a pass over the events: mostly the block of the one before)
            data = self._hot
        else:
            data = self._buf if block == len(self._blocks) else self._block(block)
            self._hot_block, self._hot = block, data
        # (a line the reader parsed whole, stripped: the scanner alone, no checks)
        return _scan_once(data[off:off + self._len[i]].decode("utf-8"), 0)[0]

    def __iter__(self) -> Iterator[dict]:
        return (self._get(i) for i in range(len(self._kinds)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Events, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def kind(self, i: int) -> str:
        return self._kind_names[self._kinds[i]]

    def pid(self, i: int) -> Any:
        return self._pids[i]

    def of(self, kind: str, pid: Optional[int] = None) -> Iterator[dict]:
        """The events of this kind (of process `pid`), in file order."""
        pids = self._pids
        for i in self._by_kind.get(kind, ()):
            if pid is None or pids[i] == pid:
                yield self._get(i)

    def count_of(self, kinds: Iterable[str], pid: Optional[int] = None) -> int:
        """How many events of these kinds (of process `pid`) there are."""
        if pid is None:
            return sum(len(self._by_kind.get(k, ())) for k in set(kinds))
        pids = self._pids
        return sum(1 for k in set(kinds) for i in self._by_kind.get(k, ()) if pids[i] == pid)

    def select(self, kinds: Iterable[str], pid: Optional[int] = None) -> Iterator[dict]:
        """The events of any of these kinds (of process `pid`), in file order, each parsed once."""
        return (e for _, e in self.select_indexed(kinds, pid))

    def select_indexed(self, kinds: Iterable[str], pid: Optional[int] = None) -> Iterator[tuple[int, dict]]:
        """select's events with each one's position (event(position) parses it again)."""
        wanted = {self._kind_info[k][0] for k in kinds if k in self._kind_info}
        pids = self._pids
        for i, k in enumerate(self._kinds):
            if k in wanted and (pid is None or pids[i] == pid):
                yield i, self._get(i)

    def select_probes_unparsed(self, kinds: Iterable[str], pid: Optional[int] = None) -> Iterator[tuple[int, Optional[dict], Any]]:
        """select_indexed's events of these kinds and the `probe` events (of process `pid`), in file order, as
        (position, the event parsed, None), but a probe not parsed: (position, None, its `load` field, None when it
        has none): a pass that needs only some loads' probes parses those (event(position))."""
        info = self._kind_info
        wanted = {info[k][0] for k in kinds if k in info}
        probe = info["probe"][0] if "probe" in info else -1
        wanted.discard(probe)
        loads, odd = self._probe_loads, self._probe_odd
        pids = self._pids
        j = 0  # (the probe's place in _probe_loads)
        for i, k in enumerate(self._kinds):
            if k == probe:
                if pid is None or pids[i] == pid:
                    load = loads[j]
                    yield i, None, (odd.get(i) if load == _NO_LOAD else load)
                j += 1
            elif k in wanted and (pid is None or pids[i] == pid):
                yield i, self._get(i), None

    def event(self, i: int) -> dict:
        """The event at position i, parsed again."""
        return self._get(i)

    def file_index(self) -> FileIndex:
        """The `file` events' paths, kinds and asks, gathered while the trace was read (FileIndex)."""
        return self._files

    def take_probe_facts(self, pid: Any) -> Optional[list[tuple[str, int]]]:
        """Trace.probe_facts, gathered while the trace was read, once: let go of when given (the
        recorded world is built once per process); None when already given."""
        facts = self._take_probes(pid, self._probes_taken, self._found_taken)
        return None if facts is None else [(path, status) for path, status, file_op in facts if file_op]

    def take_found_paths(self, pid: Any) -> Optional[list[str]]:
        """Trace.found_probe_paths, gathered while the trace was read, once (the CUDA table asks once a report);
        None when already given. The probes' facts are let go of once this and take_probe_facts are given."""
        facts = self._take_probes(pid, self._found_taken, self._probes_taken)
        return None if facts is None else [path for path, status, _ in facts if status < 0x80000000]

    def _take_probes(self, pid: Any, mine: set[Any], other: set[Any]) -> Optional[dict[tuple[str, int, bool], None]]:
        """A process's probe facts for one of their two takers (take_probe_facts, take_found_paths), once (None when
        that one took them already); let go of once both have."""
        if pid in mine:
            return None
        mine.add(pid)
        return self._probe_facts.pop(pid, {}) if pid in other else self._probe_facts.get(pid, {})

    def _add_py(self, pid: Any, seq: Any, pos: int) -> None:
        seqs = self._py_seqs.get(pid)
        if seqs is None:
            seqs = self._py_seqs[pid] = array("q")
            self._py_pos[pid] = array("I")
        if type(seq) is int and -(1 << 63) <= seq < (1 << 63) and (not seqs or seq > seqs[-1]):
            seqs.append(seq)
            self._py_pos[pid].append(pos)
        elif self._py_at(pid, seq) is None:
            self._py_odd[(pid, seq)] = pos

    def _py_at(self, pid: Any, seq: Any) -> Optional[int]:
        seqs = self._py_seqs.get(pid)
        if seqs and type(seq) is int:
            j = bisect_left(seqs, seq)
            if j < len(seqs) and seqs[j] == seq:
                return self._py_pos[pid][j]
        return self._py_odd.get((pid, seq))

    def py_event(self, pid: Any, seq: Any) -> Optional[dict]:
        """The first py_* event of process `pid` with this seq (Trace.context)."""
        i = self._py_at(pid, seq)
        return None if i is None else self._get(i)

    def _block(self, n: int) -> bytes:
        data = self._cache.pop(n, None)
        if data is None:
            data = zlib.decompress(self._blocks[n])
            if len(self._cache) >= CACHED_BLOCKS:
                del self._cache[next(iter(self._cache))]  # (the least recently used)
        self._cache[n] = data
        return data

    def nbytes(self) -> int:
        """The bytes of the bulky events' lines."""
        return self._raw_bytes

    def stored_bytes(self) -> int:
        """The bytes they take here (compressed, but the last block)."""
        return sum(map(len, self._blocks)) + len(self._buf)

    def cached(self, i: int) -> dict:
        """Event i, parsed once for several asks in a row (LazyEvent): the last one parsed is kept.
        Not to be changed by the caller."""
        if self._last_pos != i:
            self._last = self._get(i)
            self._last_pos = i
        return self._last

    def lazy(self, kind: str) -> Iterator["LazyEvent"]:
        """The events of this kind as LazyEvents, in file order: a holder of many (RecordedWorld holds
        every `file` event until it is asked for) holds a reference each, not a parsed event each."""
        for i in self._by_kind.get(kind, ()):
            yield LazyEvent(self, i)


class LazyEvent(Mapping[str, Any]):
    """One event of Events, read only, parsed when a field is asked for (the last one parsed is kept,
    Events.cached)."""

    __slots__ = ("_events", "_pos")

    def __init__(self, events: Events, pos: int):
        self._events = events
        self._pos = pos

    def _d(self) -> dict:
        return self._events.cached(self._pos)

    @property
    def events(self) -> Events:
        return self._events

    @property
    def pos(self) -> int:
        """Its place in `events` (LazyEvent(events, pos) stands for it again)."""
        return self._pos

    def __getitem__(self, k: str) -> Any:
        return self._d()[k]

    def get(self, k: str, default: Any = None) -> Any:
        return self._d().get(k, default)

    def __contains__(self, k: object) -> bool:
        return k in self._d()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._d()))

    def __len__(self) -> int:
        return len(self._d())

    def __eq__(self, other: object) -> bool:
        return dict(self) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LazyEvent({self._d()!r})"


@dataclass
class Trace:
    path: str
    header: Header
    events: Sequence[dict]  # a list, or Events (read_trace): compact, parsed on use
    warnings: list[str] = field(default_factory=list)
    checked: bool = False  # every event was checked against the schema (read_trace does it)
    _py_events: Optional[PyContexts] = field(default=None, repr=False, compare=False)
    # the Linux replay of these events (diagnosis/replay_linux.py's LinuxCalls), when it was made while they were
    # recorded (`dlltrace run`: runner.append_linux_facts), so the summary does not make it again
    replayed: Optional[list[Any]] = field(default=None, repr=False, compare=False)

    def of(self, kind: str, pid: Optional[int] = None) -> Iterator[dict]:
        """The events of this kind (of process `pid`), in file order."""
        if isinstance(self.events, Events):
            yield from self.events.of(kind, pid)
            return
        for e in self._kind_index().get(kind, ()):
            if pid is None or e.get("pid") == pid:
                yield e

    def probe_facts(self, pid: Optional[int]) -> list[tuple[str, int]]:
        """What process `pid`'s file probes said (FILE_PROBE_OPS): (Win32 path, NTSTATUS), each pair
        once, in the order first seen (what the recorded world takes from the probes); of a read trace,
        gathered while it was read the first time it is asked for (no pass over its probes), then made
        again from them."""
        if isinstance(self.events, Events) and pid is not None:
            facts = self.events.take_probe_facts(pid)  # (the first time: then let go of)
            if facts is not None:
                return facts
        pairs = ((nt_to_win32(e["path"]), int(e.get("status") or 0)) for e in self.of("probe", pid=pid)
                 if e.get("op") in FILE_PROBE_OPS and isinstance(e.get("path"), str))
        return list(dict.fromkeys(pairs))

    def found_probe_paths(self, pid: Optional[int]) -> list[str]:
        """The Win32 paths process `pid`'s probes (of any op) found (an NTSTATUS of success), in the order first
        seen (what the CUDA table takes from the probes; a path may come again, found with another status or op);
        of a read trace, gathered while it was read the first time it is asked for (no pass over its probes),
        then made again from them."""
        if isinstance(self.events, Events) and pid is not None:
            found = self.events.take_found_paths(pid)
            if found is not None:
                return found
        return list(dict.fromkeys(nt_to_win32(e["path"]) for e in self.of("probe", pid=pid)
                                  if isinstance(e.get("path"), str) and int(e.get("status") or 0) < 0x80000000))

    def file_events(self) -> Iterator[Mapping[str, Any]]:
        """The `file` events (of every process), in file order; of a read trace, as LazyEvents."""
        if isinstance(self.events, Events):
            return self.events.lazy("file")
        return self.of("file")

    def file_index(self) -> Optional[FileIndex]:
        """Of a read trace, its `file` events' paths, kinds and asks, gathered while it was read (FileIndex);
        None for a trace made of a list of events."""
        return self.events.file_index() if isinstance(self.events, Events) else None

    def known_file_paths(self) -> list[str]:
        """The `path` of every `file` event (of every process) whose kind says the path is there (not "missing"
        nor "nodir"), in file order (the CUDA table's known paths)."""
        index = self.file_index()
        if index is not None:
            return index.known_paths()
        return [e["path"] for e in self.of("file") if isinstance(e.get("path"), str)
                and e.get("kind") not in ("missing", "nodir")]

    def select(self, kinds: Iterable[str], pid: Optional[int] = None) -> Iterator[dict]:
        """The events of any of these kinds (of process `pid`), in file order (the bulky ones of a
        read trace parsed one at a time: a pass over a big trace holds one of them at once)."""
        if isinstance(self.events, Events):
            yield from self.events.select(kinds, pid)
            return
        wanted = set(kinds)
        for e in self.events:
            if e.get("ev") in wanted and (pid is None or e.get("pid") == pid):
                yield e

    def count_of(self, kinds: Iterable[str], pid: Optional[int] = None) -> int:
        """How many events of these kinds (of process `pid`) the trace holds."""
        if isinstance(self.events, Events):
            return self.events.count_of(kinds, pid)
        wanted = set(kinds)
        return sum(1 for e in self.events if e.get("ev") in wanted and (pid is None or e.get("pid") == pid))

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

    def owners(self, pid: Optional[int] = None) -> dict[str, tuple[Owner, ...]]:
        """Who owns each native file of the traced Python's environment (its py_dists event: RECORD files and
        conda-meta), by lower-case base name; {} for a trace without one."""
        return owners_index(self.of("py_dists", pid=pid))

    def package_loaders(self, pid: Optional[int] = None) -> tuple[PackageLoader, ...]:
        """The packages of the traced Python's environment that add a DLL folder when imported (py_dists'
        `loaders`: delvewheel's patch in their __init__.py), () for a trace without them."""
        out: list[PackageLoader] = []
        for e in self.of("py_dists", pid=pid):
            for d in e.get("dists") or []:
                site = d.get("site") if isinstance(d, dict) else None
                if not isinstance(site, str):
                    continue
                for lo in d.get("loaders") or []:
                    if not isinstance(lo, dict) or not isinstance(lo.get("package"), str):
                        continue
                    for rel in lo.get("adds") or []:
                        if isinstance(rel, str) and rel and "/" not in rel and "\\" not in rel:
                            sep = "\\" if "\\" in site else "/"
                            out.append(PackageLoader(lo["package"], site.rstrip("/\\") + sep + rel,
                                                     str(lo.get("how") or ""), f"{d.get('name')} {d.get('version')}"))
            break
        return tuple(out)

    def exit_code(self, pid: int) -> Optional[int]:
        e = next(self.of("exit", pid=pid), None)
        return e.get("code") if e else None

    def loads(self, pid: Optional[int] = None) -> list[Load]:
        """Every load (top-level and nested) in begin order, with end and probes attached."""
        by_key: dict[tuple[int, Optional[int]], Load] = {}  # (an event without "load" finds none)
        out: list[Load] = []
        ld: Optional[Load]
        for e in self.select(LOAD_KINDS, pid):
            ev = e.get("ev")
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
        """The Python action a load was made in, if any: the py_* event it carries (`ctx`), or, when that
        event's import had finished before the load (the thread's next event says so), the import still in
        progress, or a py_after context (trace/pycontext.py)."""
        if load.ctx is None:
            return None
        if self._py_events is None:  # indexed once: a scan per load made a report quadratic
            kinds = (*CONTEXT_KINDS, *END_KINDS)
            self._py_events = (PyContexts(self.events.select_indexed(kinds), self.events.event)
                               if isinstance(self.events, Events) else
                               PyContexts(e for e in self.events if e.get("ev") in kinds))
        return self._py_events.live(load.pid, load.ctx, load.caller if isinstance(load.caller, str) else "",
                                    load.name if isinstance(load.name, str) else "")


def owners_index(dists_events: Iterable[dict]) -> dict[str, tuple[Owner, ...]]:
    """The owners of the native files the first of these py_dists events lists (one Python's environment: its
    RECORD files and conda-meta), by lower-case base name."""
    out: dict[str, list[Owner]] = {}
    for e in dists_events:
        for kind, key, root_of in (("wheel", "dists", lambda d: d.get("site")),
                                   ("conda", "conda", lambda d: e.get("conda_prefix"))):
            for d in e.get(key) or []:
                if not isinstance(d, dict) or not isinstance(d.get("name"), str):
                    continue
                root = root_of(d)
                files = d.get("files") or []
                # (RECORD's sizes, one a file; absent in older traces, and never in conda's)
                sizes = d.get("sizes") if isinstance(d.get("sizes"), list) and len(d["sizes"]) == len(files) else None
                tags = tuple(t for t in d.get("tags") or [] if isinstance(t, str)) if isinstance(d.get("tags"), list) \
                    else ()
                for i, f in enumerate(files):
                    if isinstance(f, str) and f and isinstance(root, str):
                        base = f.replace("\\", "/").rsplit("/", 1)[-1].lower()
                        size = sizes[i] if sizes is not None else None
                        out.setdefault(base, []).append(Owner(
                            d["name"], str(d.get("version") or ""), f.replace("\\", "/"), root, kind,  # type: ignore[arg-type]
                            size if type(size) is int and size >= 0 else None, tags))
        break  # (the first Python of the process: one environment)
    return {k: tuple(v) for k, v in out.items()}


# the C scanner json.loads itself uses; typeshed does not declare the attribute (it is set in
# JSONDecoder.__init__, by json.scanner.make_scanner)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


_NO_EV = object()  # (obj.get("ev", _NO_EV): an event without "ev", told from one whose "ev" is null)


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
    cmd = obj.get("command")
    command = tuple(c for c in cmd if isinstance(c, str)) if isinstance(cmd, list) else ()
    return Header(format=obj["format"], version=version, tool=obj.get("tool"), created=obj.get("created"),
                  platform=obj.get("platform"), command=command)


from dlltrace.trace.gcpause import freeze_after_pauses, paused_gc  # noqa: E402,F401  (reader's callers use them)


Progress = Callable[[int, int], None]  # (done, total): bytes of the file read, or events replayed

READ_CHUNK = 1 << 20  # bytes read (and, from a gzip trace, decompressed) at a time
GZIP_SLICE = 4 << 10  # compressed bytes given to zlib at a time (damage loses at most what one slice holds)
GZIP_MAGIC = b"\x1f\x8b"


from dlltrace.limits import LIMIT_NAMES, Limits as TraceLimits, limits as trace_limits, parse_limits  # noqa: E402,F401


def _over(path: Union[str, Path], what: str, name: str, value: int) -> DlltraceError:
    return DlltraceError(f"{path}: {what}: not read further (the limit {name}={value:,}; raise it with "
                         f"dlltrace --limit {name}=N)", EXIT_BAD_TRACE)


def read_trace(path: Union[str, Path], progress: Optional[Progress] = None) -> Trace:
    """Read a trace file, plain JSON Lines or gzip (told by its first two bytes, 1f 8b, whatever its
    name; one gzip member or several): line by line, never the whole file at once. `progress` is
    called now and then with (bytes of the file read, its size)."""
    with paused_gc():
        return _read_trace(path, progress)


def read_trace_from(path: Union[str, Path], f: BinaryIO, events: Optional[Events] = None) -> Trace:
    """read_trace of a plain trace read from `f` by its readline (a file-like object: runner.py's view of a trace
    still being written, its lines read as they come), with the same checks and limits; `path` names it.
    `events`: the Events its events go into, as each line is read (the caller's: Events(keep_parsed=True) keeps
    them parsed), the trace's own."""
    with paused_gc():
        return _read_lines(path, _plain_lines(f, None, 0, path), [], trace_limits().events, events)


def _plain_lines(f: BinaryIO, progress: Optional[Progress], total: int, path: Union[str, Path] = "",
                 limits: Optional[TraceLimits] = None) -> Iterator[bytes]:
    lim = limits or trace_limits()
    done, report_at = 0, READ_CHUNK
    blank = 0
    while True:
        line = f.readline(lim.line_bytes + 1)  # (never more than a line's bound in memory)
        if not line:
            break
        if len(line) > lim.line_bytes:
            raise _over(path, f"a line longer than {lim.line_bytes:,} bytes, about {done:,} bytes in", "line_bytes",
                        lim.line_bytes)
        done += len(line)
        if done > lim.trace_bytes:
            raise _over(path, f"more than {lim.trace_bytes:,} bytes", "trace_bytes", lim.trace_bytes)
        blank = blank + 1 if line.isspace() else 0  # (not line.strip(), without a copy of the line: it is not empty)
        if blank > lim.blank_run:
            raise _over(path, f"more than {lim.blank_run:,} blank lines in a row, about {done:,} bytes in (not a "
                        "trace a writer makes)", "blank_run", lim.blank_run)
        if progress is not None and done >= report_at:
            progress(done, total)
            report_at = done + READ_CHUNK
        yield line


def _gzip_lines(f: BinaryIO, path: Union[str, Path], warnings: list[str], progress: Optional[Progress],
                total: int, limits: Optional[TraceLimits] = None) -> Iterator[bytes]:
    """The lines of a gzip trace (members one after another, zero bytes between or after them skipped),
    decompressed a chunk at a time. A stream cut short (a crash while it was written) or damaged is read
    up to where it can be, with a warning; the line it cuts is then the last, unterminated one."""
    lim = limits or trace_limits()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    fresh = True  # no byte of the current member seen yet
    rest = b""
    consumed = 0
    produced = 0
    blank = 0
    damaged = ""
    while not damaged:
        data = f.read(READ_CHUNK)
        if not data:
            break
        consumed += len(data)
        while data:
            if fresh:
                data = data.lstrip(b"\0")  # (padding after the last member)
                if not data:
                    break
            # (fed a small slice at a time: zlib gives nothing of a call that meets damage, so what the
            # slices before it held is kept)
            piece, later = data[:GZIP_SLICE], data[GZIP_SLICE:]
            try:
                out = d.decompress(piece, READ_CHUNK)
            except zlib.error as e:
                damaged = (f"{path}: the compressed trace is damaged about {consumed - len(data):,} bytes in "
                           f"({e}): read up to its last whole event before it")
                break
            fresh = False
            if d.eof:
                data = d.unused_data + later
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                fresh = True
            else:
                data = d.unconsumed_tail + later
            if out:
                produced += len(out)
                if produced > lim.trace_bytes:
                    raise _over(path, f"more than {lim.trace_bytes:,} bytes once inflated", "trace_bytes", lim.trace_bytes)
                if produced > lim.gzip_ratio * consumed + (64 << 20):
                    raise _over(path, f"{consumed:,} compressed bytes inflate to more than {produced:,} (over "
                                f"{lim.gzip_ratio} times): a compression bomb, not a trace", "gzip_ratio", lim.gzip_ratio)
                parts = (rest + out).split(b"\n")
                rest = parts.pop()
                if len(rest) > lim.line_bytes:
                    raise _over(path, f"a line longer than {lim.line_bytes:,} bytes once inflated", "line_bytes",
                                lim.line_bytes)
                for part in parts:
                    blank = blank + 1 if not part.strip() else 0
                    if blank > lim.blank_run:
                        raise _over(path, f"more than {lim.blank_run:,} blank lines in a row (not a trace a writer "
                                    "makes)", "blank_run", lim.blank_run)
                    if len(part) > lim.line_bytes:
                        raise _over(path, f"a line longer than {lim.line_bytes:,} bytes once inflated", "line_bytes",
                                    lim.line_bytes)
                    yield part + b"\n"
        if progress is not None:
            progress(consumed, total)
    if damaged:
        warnings.append(damaged)
    elif not fresh:
        warnings.append(f"{path}: the compressed trace ends before its end (cut short, as by a crash while it "
                        "was written): read up to its last whole event")
    if rest:
        yield rest


def raw_lines(path: Union[str, Path]) -> Iterator[bytes]:
    """The lines of a trace file (plain or gzip, read a chunk at a time) as `data.split(b"\\n")` of its
    whole bytes gives them: without their newline, and an empty last one after a last newline. A gzip
    stream cut short or damaged gives its lines up to there (as read_trace reads it). OSError as it comes."""
    with open(path, "rb") as f:
        compressed = f.peek(2)[:2] == GZIP_MAGIC
        lines = _gzip_lines(f, path, [], None, 0) if compressed else _plain_lines(f, None, 0, path)
        ended = True  # (the data so far ends with a newline, or is empty)
        for line in lines:
            ended = line.endswith(b"\n")
            yield line[:-1] if ended else line
        if ended:
            yield b""


def _read_trace(path: Union[str, Path], progress: Optional[Progress] = None) -> Trace:
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DlltraceError(f"{path}: cannot read: {e.strerror or e}", EXIT_BAD_TRACE) from None
    with f:
        try:
            total = os.fstat(f.fileno()).st_size
            compressed = f.peek(2)[:2] == GZIP_MAGIC
            warnings: list[str] = []
            lines = _gzip_lines(f, path, warnings, progress, total) if compressed else _plain_lines(f, progress, total, path)
            trace = _read_lines(path, lines, warnings, trace_limits().events)
        except OSError as e:
            raise DlltraceError(f"{path}: cannot read: {e.strerror or e}", EXIT_BAD_TRACE) from None
    if progress is not None:
        progress(total, total)
    return trace


def _read_lines(path: Union[str, Path], lines: Iterator[bytes], warnings: list[str],
                max_events: int = TraceLimits.events, events: Optional[Events] = None) -> Trace:
    """The trace from its lines (bytes, each with its "\n" but perhaps the last), at most `max_events` events."""
    first_line = next(lines, b"")
    if not first_line.strip():
        raise _bad(path, 1, "empty file, not a dlltrace trace")
    try:
        first = json.loads(first_line.decode("utf-8"))
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        raise _bad(path, 1, "not a dlltrace trace (the first line is not JSON)") from None
    header = parse_header(first, path)
    events = Events() if events is None else events
    seqs: Union[array, list] = array("q")  # each event's seq
    last_seq: dict[Any, int] = {}  # pid -> its highest seq so far
    # (pid, seq) -> position of its first event: built on the first event whose seq is not above its
    # process's highest so far (a copy, or threads' lines out of order), kept up from then on
    seen: Optional[dict[tuple[Any, Any], int]] = None
    seen_lines: set[bytes] = set()  # the lines of the launcher's events (seq 0)
    copies: list[int] = []  # lines of events that repeat an earlier one exactly
    i = 1
    n_events = 0  # (len(events), counted here: a method call per line less)
    essential_of = _ESSENTIAL_OF
    for line in lines:
        i += 1
        if b"\0" in line:
            # zero bytes: a range a writer reserved and never wrote (it died, or its write failed;
            # docs/trace-format.md, "Several processes, one file"); the line after them is whole
            body = line[:-1] if line.endswith(b"\n") else line
            kept = body.rsplit(b"\0", 1)[1]
            warnings.append(f"{path}: line {i}: {len(body) - len(kept)} bytes of unwritten lines skipped "
                            "(a writer died or its write failed)")
            body = kept.strip()
        else:
            body = line.strip()  # (its newline too: no copy of the line without it first)
        if not body:
            continue
        try:  # (_loads_line inline: the line is stripped already, of more than JSON's whitespace)
            text = body.decode("utf-8")
            obj, end = _scan_once(text, 0)
            if end != len(text):
                raise ValueError("extra data after the JSON value")
        except (ValueError, RecursionError, StopIteration):  # (not UTF-8; RecursionError: absurdly deep nesting)
            if not line.endswith(b"\n"):  # (only the last line can lack its newline)
                warnings.append(f"{path}: line {i}: truncated last line ignored")
            else:
                warnings.append(f"{path}: line {i}: unreadable line skipped")
            continue
        if type(obj) is not dict:  # (what the scanner makes of an object is a dict, never a subclass)
            warnings.append(f"{path}: line {i}: not a JSON object, skipped")
            continue
        ev = obj.get("ev", _NO_EV)
        if ev is _NO_EV:
            if obj.get("format") == FORMAT_NAME:  # another header
                parse_header(obj, path, i)
                if n_events:  # after events: another trace starts here
                    raise _bad(path, i, concatenated(i))
                continue  # before any event: two writers both found the file empty
            warnings.append(f"{path}: line {i}: no \"ev\" field, skipped")
            continue
        if type(ev) is not str:
            warnings.append(f"{path}: line {i}: event whose \"ev\" is not a string, skipped")
            continue
        n_fields = len(obj)
        problems, usable = check_event(obj, essential_of.get(ev, ESSENTIAL))
        if problems:
            for problem in problems:
                warnings.append(f"{path}: line {i}: {problem}")
        if not usable:
            continue
        pid, seq = obj["pid"], obj["seq"]
        if seq:
            prev = last_seq.get(pid)
            if prev is None or seq > prev:
                last_seq[pid] = seq
            else:
                if seen is None:
                    seen = {}
                    for j in range(len(events)):
                        seen.setdefault((events.pid(j), seqs[j]), j)
                first = seen.get((pid, seq))
                if first is not None and events[first] == obj:  # the same event twice: a copy, dropped
                    copies.append(i)
                    continue
            if seen is not None:
                seen.setdefault((pid, seq), len(events))
        elif obj["ev"] != "file":  # seq 0, the launcher's events: the same line twice is a copy
            if body in seen_lines:  # (a `file` fact twice is the same fact: kept, harmless)
                copies.append(i)
                continue
            seen_lines.add(body)
        try:
            seqs.append(seq)
        except OverflowError:  # (a seq past 64 bits: a hand-made or mutated trace)
            seqs = list(seqs)
            seqs.append(seq)
        if n_events >= max_events:
            raise _over(path, f"more than {max_events:,} events", "events", max_events)
        events.add(obj, body if len(obj) == n_fields else None)  # (fields the check dropped: written again)
        n_events += 1
    events.file_index().seal()  # (its paths as one string: the trace is read)
    if copies:
        warnings.append(f"{path}: line {copies[0]}: {len(copies)} event(s) repeat earlier ones exactly (same pid, "
                        f"seq, time and fields): the file holds the same events twice; the copies are ignored")
    return Trace(path=str(path), header=header, events=events, warnings=warnings, checked=True)


PythonKind = Literal["", "venv", "conda", "store", "embeddable", "system"]


def python_kind(py: Optional[dict]) -> PythonKind:
    """Which kind of Python a trace's py_env event describes: "conda" (a conda environment), "store" (the
    Microsoft Store's, a packaged app under WindowsApps), "embeddable" (python.org's embeddable zip: a
    python3XY._pth next to it), "venv" (a virtual environment: its prefix is not its base prefix), "system" (a
    full install), "" (no py_env: not Python, or not known). What a fix may ask of it differs: no pip and no
    site-packages in an embeddable Python, no writing into a Store Python's folder."""
    if not py:
        return ""
    exe = str(py.get("executable") or "")
    prefix = str(py.get("prefix") or "")
    if py.get("conda"):
        return "conda"
    if "\\windowsapps\\" in (exe + "\\" + prefix).lower().replace("/", "\\"):
        return "store"
    if isinstance(py.get("pth"), dict):
        return "embeddable"
    if prefix and py.get("base_prefix") and prefix != py.get("base_prefix"):
        return "venv"
    return "system"
