"""The recorded world: the facts of a trace file, so a replay never needs the user's disk.

At the end of `dlltrace run`, the replay runs once against the live disk through a
RecordingWorld, which notes every answer (does this file exist, its PE facts, does this
folder exist, where else is a file of this name) and writes them to the trace as `file`
events. `dlltrace report` then replays against a RecordedWorld made from those events,
falling back to what the loader's own probes showed (a successful open means the file
exists, 0xC0000034 means it does not).

Export lists are trimmed at the source (`trim_file_events`, docs/trace-format.md "What a trace
keeps"): a DLL's `exports`, `export_ordinals` and `forwarders` keep only the names and ordinals
that some PE recorded in the same trace imports (or delay-imports), closed under the forwarders
kept (`asked_exports`). For those names the answer is exact; the `pe` object's `trimmed` field
says the list is trimmed (with the DLL's full counts), and the RecordedWorld answers any other
name as exported (`AskedOnly`), so a trimmed list never reads as a DLL lacking an export.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping  # (not typing's: its isinstance is slower, and this module asks it per file event)
from typing import Any, Iterable, Iterator, Optional, Union, cast

from dlltrace import winpath
from dlltrace.model import FileFacts, Owner, PackageLoader, PEFacts
from dlltrace.pe import pe_facts_from_dict, pe_facts_to_dict
from dlltrace.trace.asked import TRIMMED, Asked, AskedFold, _list  # noqa: F401  (defined here before: the reader folds them now)
from dlltrace.trace.reader import Events, FileIndex, LazyEvent
from dlltrace.worlds.gpu import GpuFacts
from dlltrace.worlds.world import SystemInfo, World

NT_SUCCESS_MAX = 0x80000000
STATUS_NOT_FOUND = (0xC0000034, 0xC000003A, 0xC0000033)


def asked_exports(pes: Iterable[Mapping[str, Any]]) -> Asked:
    """The names and ordinals some module of the trace may be bound to, from the `pe` objects of
    its `file` events: an import may be resolved to any file of the trace (a DLL of its name, an API
    set's host, a copy a fix puts in a folder), so a name imported from one DLL is asked of every
    DLL. A kept forwarder's target is bound too (engine._bind): its name (or ordinal) is asked, and
    so on to a fixed point. Keyed on names only, so the same set comes out of a trimmed trace."""
    fold = AskedFold()
    for pe in pes:
        fold.add(pe)
    return fold.result()


def trim_pe(pe: Mapping[str, Any], asked: Asked) -> dict[str, Any]:
    """A `pe` object (pe.pe_facts_to_dict) with `exports`, `export_ordinals` and `forwarders` kept
    only for the asked names and ordinals, and `trimmed` giving the full counts. Every other field
    is kept as it is (the imports are what asks; the rest is a few bytes)."""
    if TRIMMED in pe:
        return dict(pe)
    exports, ordinals = _list(pe, "exports"), _list(pe, "export_ordinals")
    raw_forwarders = pe.get("forwarders")
    forwarders: Mapping[Any, Any] = raw_forwarders if isinstance(raw_forwarders, Mapping) else {}
    out = dict(pe)
    out["exports"] = [n for n in exports if isinstance(n, str) and n in asked.names]
    out["export_ordinals"] = [o for o in ordinals if isinstance(o, int) and o in asked.ordinals]
    out["forwarders"] = {k: v for k, v in forwarders.items() if isinstance(k, str) and asked.wants(k)}
    out[TRIMMED] = {"exports": len(exports), "export_ordinals": len(ordinals), "forwarders": len(forwarders)}
    return out


def trim_file_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events, each `file` event's export lists trimmed to what the trace asks for (asked_exports
    over every `file` event given: pass all of a trace's). Other events are returned as they are."""
    events = list(events)
    pes = [e["pe"] for e in events if e.get("ev") == "file" and isinstance(e.get("pe"), Mapping)]
    asked = asked_exports(pes)
    return [{**e, "pe": trim_pe(e["pe"], asked)} if e.get("ev") == "file" and isinstance(e.get("pe"), Mapping)
            else e for e in events]


class AskedOnly(frozenset):
    """A trimmed export list (names or ordinals): exact for what the trace asks for (`asked`);
    anything else is not known and reads as present, never as a missing export."""

    __slots__ = ("asked",)
    asked: frozenset

    def __new__(cls, kept: Iterable[Any], asked: frozenset) -> "AskedOnly":
        s = super().__new__(cls, kept)
        s.asked = asked
        return s

    def __contains__(self, item: object) -> bool:
        return frozenset.__contains__(self, item) or not self.asked.__contains__(item)

    def __reduce__(self) -> tuple:  # copy and pickle keep `asked`
        return (AskedOnly, (frozenset(self), self.asked))

    def __repr__(self) -> str:
        return f"AskedOnly({sorted(self, key=str)!r}, {len(self.asked)} asked)"


def file_event(path: str, facts: Optional[FileFacts], why: str = "") -> dict[str, Any]:
    e: dict[str, Any] = {"ev": "file", "path": path}
    if facts is None:
        e["kind"] = "missing"
    elif facts.error:
        e["kind"] = facts.error
    elif facts.pe is None:
        e["kind"] = "unknown"
    else:
        e["kind"] = "pe"
        e["pe"] = pe_facts_to_dict(facts.pe)
    if facts is not None and facts.dllmain_fails:
        e["dllmain_fails"] = True
    if facts is not None and facts.size is not None:
        e["size"] = facts.size
    if why:
        e["why"] = why
    return e


def facts_of_event(e: Mapping[str, Any], checked: bool = False, asked: Optional[Asked] = None) -> Optional[FileFacts]:
    """The facts a `file` event records; `checked`: the event came through the trace reader,
    which checked it against the schema (trace.read_trace, tracecheck.py). `asked`: what the
    trace asks for (asked_exports of all its `file` events), for an event whose exports are
    trimmed; without it nothing outside the kept lists is known (every other name reads as present)."""
    kind = e.get("kind")
    path = e.get("path", "")
    if kind == "missing" or kind == "dir" or kind == "nodir":
        return None
    size = e.get("size")
    size = size if type(size) is int and size >= 0 else None  # (absent in older traces)
    if kind in ("not_pe", "access_denied"):
        return FileFacts(path=path, error=kind, size=size)
    if kind == "pe" and isinstance(e.get("pe"), dict):
        try:
            pe = pe_facts_from_dict(e["pe"], checked)
        except (ValueError, TypeError, KeyError):
            return FileFacts(path=path)
        if TRIMMED in e["pe"]:
            a = asked if asked is not None else Asked(frozenset(), frozenset())
            pe = dataclasses.replace(pe, exports=AskedOnly(pe.exports, a.names),
                                     export_ordinals=AskedOnly(pe.export_ordinals, a.ordinals))
        return FileFacts(path=path, pe=pe, dllmain_fails=bool(e.get("dllmain_fails")), size=size)
    return FileFacts(path=path, size=size)


class RecordingWorld:
    """Wraps a world and remembers every answer it gave, to be written into a trace."""

    def __init__(self, inner: World):
        self.inner = inner
        self.system = inner.system
        self.files: dict[str, tuple[str, Optional[FileFacts], str]] = {}
        self.dirs: dict[str, tuple[str, bool]] = {}

    def file(self, path: str) -> Optional[FileFacts]:
        f = self.inner.file(path)
        self.files.setdefault(winpath.key(path), (winpath.normalize(path), f, ""))
        return f

    def is_dir(self, path: str) -> bool:
        d = self.inner.is_dir(path)
        self.dirs.setdefault(winpath.key(path), (winpath.normalize(path), d))
        return d

    def files_named(self, name: str) -> list[str]:
        out = self.inner.files_named(name)
        for p in out:
            self.note(p, "elsewhere")
        return out

    def close_files(self, name: str) -> list[str]:
        out = self.inner.close_files(name)
        for p in out:
            self.note(p, "close_name")
        return out

    def files_in(self, folder: str) -> list[str]:
        out = self.inner.files_in(folder)
        for p in out:
            self.file(p)
        self.dirs.setdefault(winpath.key(folder), (winpath.normalize(folder), True))
        return out

    def note(self, path: str, why: str) -> None:
        """Record a file looked up for another reason (a near miss, a close name)."""
        k = winpath.key(path)
        if k not in self.files:
            self.files[k] = (winpath.normalize(path), self.inner.file(path), why)

    def events(self) -> list[dict[str, Any]]:
        out = [file_event(p, f, why) for p, f, why in self.files.values()]
        out += [{"ev": "file", "path": p, "kind": "dir" if d else "nodir"} for p, d in self.dirs.values()]
        return out


def _add_one(index: dict[str, Union[str, list[str]]], key: str, value: str) -> None:
    """Add a value to the values of a key (a value new to it: the caller knows): a key of one value
    holds the value itself, not a list of one (a big trace's indexes have tens of thousands of keys,
    nearly all of one value)."""
    have = index.get(key)
    if have is None:
        index[key] = value
    elif isinstance(have, str):
        index[key] = [have, value]
    else:
        have.append(value)


def _all(index: dict[str, Union[str, list[str]]], key: str) -> list[str]:
    """The values of a key (_add_one), in the order added."""
    have = index.get(key)
    return [] if have is None else [have] if isinstance(have, str) else list(have)


class RecordedWorld:
    """A World answered from a trace's `file` events and the loader's probes.

    A file's facts are built from its event when asked for, and the last FACTS_KEPT built are kept
    (a big trace records the facts of tens of thousands of DLLs: all of them built at once held
    about 25 MB on the 19 MB bench trace, bench/report_memory.py); the event itself is held (a
    LazyEvent of a read trace: a reference, parsed again when its facts are built again)."""

    FACTS_KEPT = 1024

    def __init__(self, system: SystemInfo, file_events: Union[Iterable[Mapping[str, Any]], Events],
                 probes: Iterable[tuple[str, int]] = (), dirs: Iterable[str] = (), checked: bool = False):
        """`file_events`: the trace's `file` events, or the Events of a read trace (its file events, from what the
        reader gathered of them: FileIndex). `checked`: the file events were checked against the trace schema
        (by read_trace)."""
        self.system = system
        self._checked = checked
        self.owners: dict[str, tuple[Owner, ...]] = {}  # base name -> who lists it (replay.recorded_world: py_dists)
        self._listed: set[str] = set()  # keys of files known only from an owner's record (add_listed)
        self.loaders: tuple[PackageLoader, ...] = ()  # packages that add a DLL folder when imported (py_dists)
        self.gpu: Optional[GpuFacts] = None  # the machine's NVIDIA GPUs and driver (replay.recorded_world: py_gpu)
        # path key -> the file event its facts are built from (of a read trace: the event's place in
        # its Events, made a LazyEvent when needed: an int each, not an object)
        self._events: dict[str, Union[int, Mapping[str, Any]]] = {}
        self._source: Optional[Events] = None
        self._built: OrderedDict[str, Optional[FileFacts]] = OrderedDict()  # the last FACTS_KEPT built
        self._files: dict[str, Optional[FileFacts]] = {}  # facts of no event: a probe's, or none (missing)
        self._init_failed: dict[str, FileFacts] = {}  # the facts of a file whose DllMain failed (mark_init_failed)
        self._dirs: dict[str, bool] = {}
        self._by_name: dict[str, Union[str, list[str]]] = {}  # base name -> the key of each file of that name
        # made once when first needed: "by_shape" (close_files), "by_folder" (files_in), shared by fresh() copies only
        self._shapes: dict[str, Any] = {}
        self._first_path: dict[str, str] = {}  # a path recorded again: as it was first recorded
        self._trimmed = False  # some `pe` object has trimmed export lists
        # what a trimmed trace asks for (asked_exports of all its `file` events), shared by the worlds made of this one
        self._asked: Optional[Asked] = None
        if isinstance(file_events, Events):
            self._index_files(file_events)
        else:
            self._index_events(file_events)
        self._probe_names: dict[str, Union[str, list[str]]] = {}  # as _by_name, for the files only a probe shows
        self._add_process(probes, dirs)

    def _index_events(self, file_events: Iterable[Mapping[str, Any]]) -> None:
        """Index the files of these `file` events (dicts, or LazyEvents: parsed here)."""
        asked = AskedFold()  # (what the trace asks for, folded in as the events are read: once)
        for e in file_events:
            path = e.get("path")
            if not isinstance(path, str) or not path:
                continue
            pe = e.get("pe")
            if isinstance(pe, Mapping) and e.get("kind") not in ("dir", "nodir", "missing"):
                asked.add(pe)
                self._trimmed = self._trimmed or TRIMMED in pe
            if isinstance(e, LazyEvent):
                self._source = e.events
                self._index_file(path, e.get("kind"), e.pos)
            else:
                self._index_file(path, e.get("kind"), e)
        self._asked = asked.result() if self._trimmed else None

    def _index_files(self, events: Events) -> None:
        """Index the files of a read trace's `file` events from what the reader gathered of them (FileIndex: their
        paths, kinds and asks, without parsing them again)."""
        index = events.file_index()
        self._source = events
        self._trimmed = index.trimmed
        for pos, path, kind in zip(index.pos, index.paths(), index.kinds):
            if path:
                self._index_file(path, kind, pos, index)
        asked = index.asked()  # (made once: its fold let go of)
        self._asked = asked if self._trimmed else None

    def _index_file(self, path: str, kind: Any, event: Union[int, Mapping[str, Any]],
                    index: Optional[FileIndex] = None) -> None:
        """Index one `file` event: its path, its kind, and the event its facts are built from (its place in
        the Events of a read trace)."""
        k = winpath.key(path)
        if kind in ("dir", "nodir"):
            self._dirs[k] = kind == "dir"
            return
        if kind == "missing":
            self._files[k] = None
            return
        was = self._events.get(k)
        if was is not None:  # (a path recorded again is indexed once; the path shown is the first)
            first = index.path_at(was) if index is not None and type(was) is int else self._event(k)["path"]  # type: ignore[index]
            self._first_path.setdefault(k, winpath.normalize(first or path))
        else:
            self._name(k)
            self._mark_dirs(path)
        self._events[k] = event  # facts built when asked for (file())
        self._files.pop(k, None)

    def _add_process(self, probes: Iterable[tuple[str, int]], dirs: Iterable[str]) -> None:
        """What a process's own events tell of files and folders: its probes (a successful open: the
        file is there; 0xC0000034: it is not; the first of a path decides) and its AddDllDirectory folders."""
        for path, status in probes:
            k = winpath.key(path)
            if k in self._files or k in self._events:
                continue
            if status < NT_SUCCESS_MAX:
                self._files[k] = FileFacts(path=winpath.normalize(path))
                _add_one(self._probe_names, winpath.basename(k), k)
                self._mark_dirs(path)
            elif status in STATUS_NOT_FOUND:
                self._files.setdefault(k, None)
        for d in dirs:
            self._dirs[winpath.key(d)] = True

    def with_process(self, system: SystemInfo, probes: Iterable[tuple[str, int]] = (),
                     dirs: Iterable[str] = ()) -> "RecordedWorld":
        """The world of one process of the trace, made of this one (a world of the trace's file events
        and no probes nor folders): it shares the index of the file events, which every process of a
        trace has in common (replay.recorded_world makes it once a trace), and adds the process's own."""
        w = self.fresh()
        w.system = system
        w._files, w._dirs = dict(self._files), dict(self._dirs)
        w._listed = set(self._listed)
        w._probe_names = {n: (list(v) if isinstance(v, list) else v) for n, v in self._probe_names.items()}
        w._shapes = {}
        w._add_process(probes, dirs)
        return w

    def add_listed(self, machine: str) -> None:
        """The files the owners' records list that the trace says nothing of (no file event, no probe): there,
        as far as the environment says, with a stand-in's facts of the process's machine (a wheel's DLLs are
        its platform's; their own imports unknown). A copy the loader never looked at -- numpy.libs'
        OpenBLAS, a package's own DLL folder -- is then a copy found elsewhere, not "not installed anywhere"."""
        for owners in self.owners.values():
            for o in owners:
                path = winpath.join(o.root, *[x for x in o.path.replace("\\", "/").split("/") if x])
                k = winpath.key(path)
                if k in self._files or k in self._events:
                    continue
                self._files[k] = FileFacts(path=winpath.normalize(path), pe=PEFacts(machine=machine))
                _add_one(self._probe_names, winpath.basename(k), k)
                self._mark_dirs(path)  # (its folder is there too: os.add_dll_directory of it is a fix to check)
                self._listed.add(k)
                self._shapes.pop("by_folder", None)  # (a file more: files_in's index made again)

    def listed_by(self, path: str) -> Optional[Owner]:
        """The owner whose record lists this file, when the world knows it only from that record (add_listed)."""
        if winpath.key(path) not in self._listed:
            return None
        return next(iter(self.owners_of(path)), None)

    def package_loaders(self) -> tuple[PackageLoader, ...]:
        return self.loaders

    def owners_of(self, name: str) -> tuple[Owner, ...]:
        """The distributions whose RECORD (or conda-meta) lists a file of this base name (worlds.world.owners_of)."""
        return self.owners.get(winpath.basename(name).lower(), ())

    def gpu_facts(self) -> Optional[GpuFacts]:
        """The machine's NVIDIA GPUs and driver, as the traced Python read them (worlds/gpu.py); None: not recorded."""
        return self.gpu

    def fresh(self) -> "RecordedWorld":
        """A world of the same facts, as this one was made: it shares this one's indexes (never changed
        once made) and has its own built facts and DllMain failures (mark_init_failed). A trace's
        process is indexed once, whoever asks for its world (replay.recorded_world)."""
        w = object.__new__(RecordedWorld)
        w.__dict__.update(self.__dict__)
        w._built = OrderedDict()
        w._init_failed = {}
        return w

    def _name(self, k: str) -> None:
        """Index a file's key by its base name (a key not indexed yet)."""
        _add_one(self._by_name, winpath.basename(k), k)

    def _keys_named(self, n: str) -> list[str]:
        return _all(self._by_name, n) + _all(self._probe_names, n)

    def _names(self) -> Iterator[str]:
        """Every base name of a file the world knows of, once."""
        yield from self._by_name
        yield from (n for n in self._probe_names if n not in self._by_name)

    def _event(self, k: str) -> Optional[Mapping[str, Any]]:
        e = self._events.get(k)
        if type(e) is int:
            assert self._source is not None
            return LazyEvent(self._source, e)
        return cast("Optional[Mapping[str, Any]]", e)  # (a string: no typing generic made per call)

    def _path(self, k: str) -> str:
        """A file's path as first recorded (normalised), from its key."""
        first = self._first_path.get(k)
        if first is not None:
            return first
        e = self._event(k)
        if e is not None:
            return winpath.normalize(e["path"])
        f = self._files.get(k)
        return f.path if f is not None else k

    def mark_init_failed(self, path: str, how: str = "", error: Optional[int] = None,
                         status: Optional[int] = None) -> None:
        """The trace shows that this file's DllMain failed: a fact no PE header tells, so the replay
        takes it from the loader's own answer. `how` (FileFacts.dllmain_how): "" it returned FALSE
        (1114), "crashed" the loader caught an exception in it (the load gave `error`, 998 for
        `status` 0xC0000005 under Wine), "exited" the process ended inside it (the load never returned)."""
        f = self.file(path)
        if f is not None and not f.dllmain_fails:
            self._init_failed[winpath.key(path)] = dataclasses.replace(
                f, dllmain_fails=True, dllmain_how=how, dllmain_error=error, dllmain_status=status)

    def _mark_dirs(self, path: str) -> None:
        d = winpath.dirname(path)
        while d and winpath.key(d) not in self._dirs:
            self._dirs[winpath.key(d)] = True
            parent = winpath.dirname(d)
            if parent == d:
                break
            d = parent

    def file(self, path: str) -> Optional[FileFacts]:
        k = winpath.key(path)
        f = self._init_failed.get(k)
        if f is not None:
            return f
        built = self._built
        f = built.get(k)
        if f is not None:
            built.move_to_end(k)
            return f
        e = self._events.get(k)
        if e is not None:
            if type(e) is int:  # (of a read trace: its event parsed, read as a dict, not a LazyEvent per field)
                assert self._source is not None
                e = self._source[e]
            f = facts_of_event(cast("Mapping[str, Any]", e), self._checked, self._asked)
            built[k] = f
            if len(built) > self.FACTS_KEPT:
                built.popitem(last=False)
            return f
        return self._files.get(k)  # (None: missing, or a path the trace says nothing of)

    def records(self, path: str) -> bool:
        """Whether the trace says anything of this file (its facts, or that it is missing)."""
        k = winpath.key(path)
        return k in self._events or k in self._files

    def is_dir(self, path: str) -> bool:
        return self._dirs.get(winpath.key(path), False)

    def files_named(self, name: str) -> list[str]:
        return [self._path(k) for k in self._keys_named(name.lower())]

    def close_files(self, name: str) -> list[str]:
        by_shape = self._shapes.get("by_shape")
        if by_shape is None:  # names by their digit-less shape, built once: no scan per failed load
            by_shape = self._shapes["by_shape"] = {}
            for n in self._names():
                shape = winpath.name_shape(n)
                _add_one(by_shape, n if shape == n else shape, n)  # (a name without digits is its own shape)
        names = _all(by_shape, winpath.name_shape(name))
        return sorted((self._path(k) for n in names if winpath.close_name(n, name) for k in self._keys_named(n)),
                      key=str.lower)

    def files_in(self, folder: str) -> list[str]:
        k = winpath.key(folder)
        prefix = k.rstrip("\\") + "\\" if k else ""  # (a key is normalised: its folder ends at its last \\)
        by_folder = self._shapes.get("by_folder")
        if by_folder is None:  # every key by its folder's (up to its last \\), made once: no scan of them all per call
            by_folder = self._shapes["by_folder"] = {}
            for name in self._names():
                for fk in self._keys_named(name):
                    _add_one(by_folder, fk[:fk.rfind("\\") + 1], fk)
        return sorted((self._path(fk) for fk in set(_all(by_folder, prefix))), key=str.lower)
