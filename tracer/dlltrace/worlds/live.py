"""The live world: facts read from a real disk (the machine itself, or a Wine prefix).

Windows paths are mapped to host paths by a PathMap: on Windows the identity; under
Wine through the prefix's dosdevices (c: -> drive_c, z: -> /). Used at the end of
`dlltrace run` to store in the trace the PE facts a replay needs (so a report never
needs the user's disk), and by tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable, Optional

from dlltrace import winpath
from dlltrace.model import FileFacts, PEError
from dlltrace.pe import read_pe_facts
from dlltrace.worlds.world import SystemInfo

PathMap = Callable[[str], Optional[str]]


def identity_map(path: str) -> Optional[str]:
    return path


def wine_map(prefix: str | os.PathLike) -> PathMap:
    """Map C:\\x\\y to <prefix>/dosdevices/c:/x/y (the drive symlinks Wine keeps)."""
    dosdevices = Path(prefix) / "dosdevices"
    roots: dict[str, Optional[str]] = {}  # drive letter -> the host folder it maps to

    def to_host(path: str) -> Optional[str]:
        p = winpath.normalize(path)
        m = re.match(r"^([A-Za-z]):\\?(.*)$", p)
        if not m:
            return None
        letter = m.group(1).lower()
        if letter not in roots:
            drive = dosdevices / (letter + ":")
            roots[letter] = str(drive.resolve()) if drive.exists() else None
        root = roots[letter]
        if root is None:
            return None
        rest = m.group(2).replace("\\", "/")
        return _case_insensitive(root, rest)

    return to_host


def _case_insensitive(root: str, rest: str) -> str:
    """Find rest under root ignoring case, as Wine does; the literal path when nothing matches."""
    cur = root
    for part in [p for p in rest.split("/") if p]:
        cand = os.path.join(cur, part)
        if not os.path.exists(cand):
            try:
                low = part.lower()
                match = next((e for e in os.listdir(cur) if e.lower() == low), None)
            except OSError:
                match = None
            if match is not None:
                cand = os.path.join(cur, match)
        cur = cand
    return cur


def facts_for(path: str, host: Optional[str]) -> Optional[FileFacts]:
    """FileFacts of the file at host (standing for Windows path `path`), or None if none is there."""
    if host is None or not os.path.isfile(host):
        return None
    if not os.access(host, os.R_OK):
        return FileFacts(path=path, error="access_denied")
    res = read_pe_facts(host)
    if isinstance(res, PEError):
        if res.kind == "unreadable":
            return FileFacts(path=path, error="access_denied")
        return FileFacts(path=path, error="not_pe")
    return FileFacts(path=path, pe=res)


class LiveWorld:
    """A World over a real disk. `places` are the folders files_named() looks in."""

    def __init__(self, system: SystemInfo, to_host: PathMap = identity_map, places: Iterable[str] = ()):
        self.system = system
        self.to_host = to_host
        self.places = list(places)
        self._cache: dict[str, Optional[FileFacts]] = {}
        self._dirs: dict[str, bool] = {}
        self._listed: dict[str, list[str]] = {}

    def file(self, path: str) -> Optional[FileFacts]:
        k = winpath.key(path)
        if k not in self._cache:
            self._cache[k] = facts_for(winpath.normalize(path), self.to_host(path))
        return self._cache[k]

    def is_dir(self, path: str) -> bool:
        k = winpath.key(path)
        if k not in self._dirs:  # (the disk does not change while a finished run is explained)
            host = self.to_host(path)
            self._dirs[k] = os.path.isdir(host) if host else False
        return self._dirs[k]

    def files_named(self, name: str) -> list[str]:
        out = []
        seen = set()
        for folder in self.places:
            p = winpath.join(folder, name)
            if winpath.key(p) in seen:
                continue
            seen.add(winpath.key(p))
            if self.file(p) is not None:
                out.append(p)
        return out

    def close_files(self, name: str) -> list[str]:
        """Files in the places whose names differ from `name` only in their numbers
        (cublas64_11.dll for cublas64_12.dll)."""
        return [winpath.join(folder, e) for folder in self.places for e in self._entries(folder)
                if winpath.close_name(e, name)]

    def _entries(self, folder: str) -> list[str]:
        k = winpath.key(folder)
        if k not in self._listed:
            self._listed[k] = listdir(self.to_host(folder))
        return self._listed[k]

    def files_in(self, folder: str) -> list[str]:
        return [winpath.join(folder, e) for e in self._entries(folder)]


def listdir(host: Optional[str]) -> list[str]:
    """The sorted names in a host folder; none when it is not there or cannot be read."""
    try:
        return sorted(os.listdir(host)) if host else []
    except OSError:
        return []
