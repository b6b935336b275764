"""The one overlay world (Windows worlds): another world with some files added or replaced, which is left as
it is. What a fix puts on the disk (a copy, an installed package's files) for its re-run (diagnosis/verify.py),
and the stand-ins of the keep-going walk (loader/walk.py; diagnosis/static.py, verify.also_missing). The Linux
worlds' overlay is worlds/elf.py's OverlayWorld (ld.so's cache too)."""

from __future__ import annotations

from typing import Iterable, Optional

from dlltrace import winpath
from dlltrace.model import FileFacts, Owner, PackageLoader
from dlltrace.worlds.world import SystemInfo, World, listed_by, owners_of, package_loaders


class OverlayWorld:
    """A world with some files added or replaced (a copy, an installed package, a stand-in) over another
    world, which is left as it is; their folders exist. Answers the World protocol; anything else is the
    base world's."""

    def __init__(self, base: World, added: Iterable[FileFacts] = ()):
        self.base = base
        self.system: SystemInfo = base.system
        self.added: dict[str, FileFacts] = {}
        self.removed: set[str] = set()  # keys of files a fix removed (renamed away)
        self._folders: set[str] = set()
        for f in added:
            self.add(f)

    def remove(self, path: str) -> None:
        """The file is gone (a fix renamed or deleted it): no lookup finds it."""
        self.added.pop(winpath.key(path), None)
        self.removed.add(winpath.key(path))

    def add(self, f: FileFacts) -> None:
        self.removed.discard(winpath.key(f.path))
        self.added[winpath.key(f.path)] = f
        folder = winpath.dirname(f.path)
        while folder and winpath.key(folder) not in self._folders:
            self._folders.add(winpath.key(folder))
            parent = winpath.dirname(folder)
            if winpath.same(parent, folder):
                break
            folder = parent

    def file(self, path: str) -> Optional[FileFacts]:
        k = winpath.key(path)
        if k in self.removed:
            return None
        got = self.added.get(k)
        return got if got is not None else self.base.file(path)

    def is_dir(self, path: str) -> bool:
        return winpath.key(path) in self._folders or self.base.is_dir(path)

    def owners_of(self, name: str) -> tuple[Owner, ...]:
        return owners_of(self.base, name)

    def listed_by(self, path: str) -> Optional[Owner]:
        return listed_by(self.base, path)

    def package_loaders(self) -> tuple[PackageLoader, ...]:
        return package_loaders(self.base)

    def files_named(self, name: str) -> list[str]:
        mine = [f.path for f in self.added.values() if winpath.basename(f.path).lower() == name.lower()]
        return [*mine, *(p for p in self.base.files_named(name) if winpath.key(p) not in self.added
                         and winpath.key(p) not in self.removed)]

    def close_files(self, name: str) -> list[str]:
        return [p for p in self.base.close_files(name) if winpath.key(p) not in self.removed]

    def files_in(self, folder: str) -> list[str]:
        mine = [f.path for f in self.added.values() if winpath.same(winpath.dirname(f.path), folder)]
        return [*mine, *(p for p in self.base.files_in(folder) if winpath.key(p) not in self.added
                         and winpath.key(p) not in self.removed)]

    def __getattr__(self, name: str):  # e.g. RecordedWorld.mark_init_failed
        return getattr(self.base, name)
