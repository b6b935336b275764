"""The recorded world: the facts of a trace file, so a replay never needs the user's disk.

At the end of `dlltrace run`, the replay runs once against the live disk through a
RecordingWorld, which notes every answer (does this file exist, its PE facts, does this
folder exist, where else is a file of this name) and writes them to the trace as `file`
events. `dlltrace report` then replays against a RecordedWorld made from those events,
falling back to what the loader's own probes showed (a successful open means the file
exists, 0xC0000034 means it does not).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Optional

from dlltrace import winpath
from dlltrace.model import FileFacts
from dlltrace.pe import pe_facts_from_dict, pe_facts_to_dict
from dlltrace.worlds.world import SystemInfo, World

NT_SUCCESS_MAX = 0x80000000
STATUS_NOT_FOUND = (0xC0000034, 0xC000003A, 0xC0000033)


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
    if why:
        e["why"] = why
    return e


def facts_of_event(e: dict[str, Any], checked: bool = False) -> Optional[FileFacts]:
    """The facts a `file` event records; `checked`: the event came through the trace reader,
    which checked it against the schema (trace.read_trace, tracecheck.py)."""
    kind = e.get("kind")
    path = e.get("path", "")
    if kind == "missing" or kind == "dir" or kind == "nodir":
        return None
    if kind in ("not_pe", "access_denied"):
        return FileFacts(path=path, error=kind)
    if kind == "pe" and isinstance(e.get("pe"), dict):
        try:
            return FileFacts(path=path, pe=pe_facts_from_dict(e["pe"], checked), dllmain_fails=bool(e.get("dllmain_fails")))
        except (ValueError, TypeError, KeyError):
            return FileFacts(path=path)
    return FileFacts(path=path)


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


class RecordedWorld:
    """A World answered from a trace's `file` events and the loader's probes."""

    def __init__(self, system: SystemInfo, file_events: Iterable[dict], probes: Iterable[tuple[str, int]] = (),
                 dirs: Iterable[str] = (), checked: bool = False):
        """`checked`: the file events were checked against the trace schema (by read_trace)."""
        self.system = system
        self._checked = checked
        self._files: dict[str, Optional[FileFacts]] = {}
        self._raw: dict[str, dict] = {}  # file events whose facts are not built yet
        self._dirs: dict[str, bool] = {}
        self._by_name: dict[str, list[str]] = {}
        self.unknown: set[str] = set()  # paths the model asked about that the trace says nothing of
        self._by_shape: Optional[dict[str, list[str]]] = None
        for e in file_events:
            path = e.get("path")
            if not isinstance(path, str) or not path:
                continue
            k = winpath.key(path)
            kind = e.get("kind")
            if kind in ("dir", "nodir"):
                self._dirs[k] = kind == "dir"
                continue
            if kind == "missing":
                self._files[k] = None
                continue
            self._raw[k] = e  # PE facts are built on first use (file())
            self._files.pop(k, None)
            self._by_name.setdefault(winpath.basename(k), []).append(winpath.normalize(path))
            self._mark_dirs(path)
        for path, status in probes:
            k = winpath.key(path)
            if k in self._files or k in self._raw:
                continue
            if status < NT_SUCCESS_MAX:
                self._files[k] = FileFacts(path=winpath.normalize(path))
                self._by_name.setdefault(winpath.basename(k), []).append(winpath.normalize(path))
                self._mark_dirs(path)
            elif status in STATUS_NOT_FOUND:
                self._files.setdefault(k, None)
        for d in dirs:
            self._dirs[winpath.key(d)] = True

    def mark_init_failed(self, path: str, how: str = "", error: Optional[int] = None,
                         status: Optional[int] = None) -> None:
        """The trace shows that this file's DllMain failed: a fact no PE header tells, so the replay
        takes it from the loader's own answer. `how` (FileFacts.dllmain_how): "" it returned FALSE
        (1114), "crashed" the loader caught an exception in it (the load gave `error`, 998 for
        `status` 0xC0000005 under Wine), "exited" the process ended inside it (the load never returned)."""
        f = self.file(path)
        if f is not None and not f.dllmain_fails:
            self._files[winpath.key(path)] = dataclasses.replace(f, dllmain_fails=True, dllmain_how=how,
                                                                 dllmain_error=error, dllmain_status=status)

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
        if k in self._raw:
            self._files[k] = facts_of_event(self._raw.pop(k), self._checked)
        if k not in self._files:
            self.unknown.add(winpath.normalize(path))
            return None
        return self._files[k]

    def is_dir(self, path: str) -> bool:
        return self._dirs.get(winpath.key(path), False)

    def files_named(self, name: str) -> list[str]:
        return list(self._by_name.get(name.lower(), ()))

    def close_files(self, name: str) -> list[str]:
        if self._by_shape is None:  # names by their digit-less shape, built once: no scan per failed load
            self._by_shape = {}
            for n in self._by_name:
                self._by_shape.setdefault(winpath.name_shape(n), []).append(n)
        shape = winpath.name_shape(name)
        return sorted((p for n in self._by_shape.get(shape, ()) if winpath.close_name(n, name) for p in self._by_name[n]),
                      key=str.lower)

    def files_in(self, folder: str) -> list[str]:
        k = winpath.key(folder)
        return sorted({p for ps in self._by_name.values() for p in ps if winpath.key(winpath.dirname(p)) == k},
                      key=str.lower)
