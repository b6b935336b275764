"""Worlds: where the simulator gets its facts.

The simulator asks a world whether a file exists, what a PE file imports and exports,
whether a folder exists, and what the system looks like (system folders, KnownDLLs,
API sets). The process state (PATH, DLL directories, loaded modules) is separate: it
changes as calls run. Worlds: VirtualWorld (tests and scenario files), the recorded
world (a trace file) and the live world (the real machine) all answer the same
questions, and the simulator never knows which one it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Protocol

from dlltrace import winpath
from dlltrace.apisets import ApiSetSchema, builtin_schema, schema_from_sets
from dlltrace.model import FileFacts, Owner, PackageLoader, Profile

# KnownDLLs of a stock Windows 10/11 x64 (HKLM\...\Session Manager\KnownDLLs), used when a
# scenario does not list its own.
DEFAULT_KNOWN_DLLS = (
    "advapi32.dll", "clbcatq.dll", "combase.dll", "comdlg32.dll", "coml2.dll", "difxapi.dll",
    "gdi32.dll", "gdiplus.dll", "imagehlp.dll", "imm32.dll", "kernel32.dll", "msctf.dll",
    "msvcrt.dll", "normaliz.dll", "nsi.dll", "ole32.dll", "oleaut32.dll", "psapi.dll",
    "rpcrt4.dll", "sechost.dll", "setupapi.dll", "shcore.dll", "shell32.dll", "shlwapi.dll",
    "user32.dll", "wldap32.dll", "wow64.dll", "wow64cpu.dll", "wow64win.dll", "ws2_32.dll",
    "ntdll.dll", "kernelbase.dll",
)

# Modules every process has loaded before its first LoadLibrary call.
CORE_MODULES = ("ntdll.dll", "kernel32.dll", "kernelbase.dll")

PROFILES = ("windows", "wine")


@dataclass
class SystemInfo:
    """Machine-wide facts."""

    windows: str = "C:\\Windows"
    system32: str = ""
    system16: str = ""
    machine: str = "x64"
    safe_dll_search_mode: bool = True
    known_dlls: tuple[str, ...] = DEFAULT_KNOWN_DLLS  # lower-case base names
    # the API-set schema: a trace's, a scenario's (a dict of contract -> host or {host, exceptions},
    # apisets.parse_sets), or the built-in table when neither gives one
    api_sets: ApiSetSchema = field(default_factory=builtin_schema)
    profile: Profile = "windows"  # docs/wine-profile.md
    cpu_lacks: tuple[str, ...] = ()  # CPU features this machine lacks ("avx"): rules.rule_dllmain_needs_cpu_feature
    version: str = ""

    def __post_init__(self) -> None:
        self.windows = winpath.normalize(self.windows)
        self.system32 = winpath.normalize(self.system32 or winpath.join(self.windows, "System32"))
        self.system16 = winpath.normalize(self.system16 or winpath.join(self.windows, "System"))
        self.known_dlls = tuple(n.lower() for n in self.known_dlls)
        if not isinstance(self.api_sets, ApiSetSchema):
            self.api_sets = schema_from_sets(self.api_sets, "scenario")


class LoadedModule:
    """A module in a process's loaded-module list. (A class with slots, not a dataclass: a big trace's
    replay lists tens of thousands; compared by identity.)"""

    __slots__ = ("path", "refcount", "_origin", "by_call", "deps", "initialized", "name")

    def __init__(self, path: str, refcount: int = 1, origin: str = "", initialized: bool = True, by_call: str = ""):
        self.path = path
        self.refcount = refcount
        self._origin = origin
        self.by_call = by_call  # the words of the call that mapped it (origin: "loaded by <by_call>"), shared with the call
        # the modules its imports bound to (add_dep), a tuple: most modules of a big trace have one or none
        self.deps: tuple[LoadedModule, ...] = ()
        self.initialized = initialized  # its DllMain has run (False: mapped and listed, not attached yet)
        self.name = winpath.basename(path).lower()

    @property
    def origin(self) -> str:
        """What loaded it, in words (for "why this copy")."""
        return f"loaded by {self.by_call}" if self.by_call else self._origin

    def add_dep(self, m: "LoadedModule") -> None:
        self.deps = (*self.deps, m)

    def __repr__(self) -> str:
        return (f"LoadedModule(path={self.path!r}, refcount={self.refcount!r}, origin={self.origin!r}, "
                f"deps=[{len(self.deps)}], initialized={self.initialized!r})")


@dataclass
class ProcessState:
    """The DLL-search state of one process. Calls (AddDllDirectory, loads, ...) change it."""

    exe: str
    cwd: str = ""
    path: list[str] = field(default_factory=list)
    dll_directory: Optional[str] = None  # SetDllDirectoryW: None = never set / NULL, "" = current folder removed
    dll_directories: list[tuple[str, str]] = field(default_factory=list)  # AddDllDirectory (folder, label), in order added
    default_dirs: Optional[int] = None  # SetDefaultDllDirectories
    loaded: list[LoadedModule] = field(default_factory=list)
    machine: str = "x64"
    python: str = ""
    env: dict[str, str] = field(default_factory=dict)
    # a packaged (MSIX / Store) process: the loader's packaged-app search order (rules.rule_packaged_standard_order)
    packaged: bool = False
    package_graph: list[str] = field(default_factory=list)  # its package dependency graph: the folders, in manifest order
    launcher: str = ""  # the venv python.exe that started this process (exe is then the base interpreter), "" = none
    conda_prefix: str = ""  # a conda Python's prefix (its start-up AddDllDirectory folders are in dll_directories)
    # which Python (trace/reader.py python_kind: "venv", "conda", "store", "embeddable", "system"; "" not known) and
    # the site-packages its own pip installs into ("" where it has no pip: an embeddable Python as it comes)
    python_kind: str = ""
    pip_site: str = ""

    def __post_init__(self) -> None:
        self.exe = winpath.normalize(self.exe)
        self.cwd = winpath.normalize(self.cwd) if self.cwd else winpath.dirname(self.exe)
        self._reindex()

    # The loaded-module list, with indexes by base name (first loaded wins) and by path.
    # Change it only through add_loaded / remove_loaded.
    def _reindex(self) -> None:
        self._by_name: dict[str, LoadedModule] = {}
        self._by_path: dict[str, LoadedModule] = {}
        # how many more listed modules share a name / a path (only those listed twice or more): a
        # removal rescans the list only on a tie
        self._name_more: dict[str, int] = {}
        self._path_more: dict[str, int] = {}
        for m in self.loaded:
            self._index(m)

    def _index(self, m: LoadedModule) -> None:
        k = winpath.key(m.path)
        for key, index, more in ((m.name, self._by_name, self._name_more), (k, self._by_path, self._path_more)):
            if key in index:
                more[key] = more.get(key, 0) + 1
            else:
                index[key] = m

    def add_loaded(self, m: LoadedModule) -> None:
        self.loaded.append(m)
        self._index(m)

    def remove_loaded(self, m: LoadedModule) -> None:
        """Take a module out of the list; the indexes fall back to the next-loaded module of the
        same name or path, if any (first loaded wins)."""
        for i in range(len(self.loaded) - 1, -1, -1):  # usually one of the last loaded
            if self.loaded[i] is m:
                del self.loaded[i]
                break
        else:
            return
        k = winpath.key(m.path)
        for key, index, more, same in ((m.name, self._by_name, self._name_more, lambda x: x.name == m.name),
                                       (k, self._by_path, self._path_more, lambda x: winpath.key(x.path) == k)):
            others = more.pop(key, 0)
            if others > 1:
                more[key] = others - 1
            if index.get(key) is m:
                del index[key]
                if others:
                    index[key] = next(x for x in self.loaded if same(x))

    @property
    def app_dir(self) -> str:
        return winpath.dirname(self.exe)

    def find_loaded_by_name(self, name: str) -> Optional[LoadedModule]:
        return self._by_name.get(winpath.basename(name).lower())

    def find_loaded_by_path(self, path: str) -> Optional[LoadedModule]:
        return self._by_path.get(winpath.key(path))

    def copy(self) -> "ProcessState":
        return ProcessState(
            exe=self.exe, cwd=self.cwd, path=list(self.path), dll_directory=self.dll_directory,
            dll_directories=list(self.dll_directories), default_dirs=self.default_dirs,
            loaded=[LoadedModule(m.path, m.refcount, m._origin, by_call=m.by_call) for m in self.iter_loaded()],
            machine=self.machine, python=self.python, env=dict(self.env), packaged=self.packaged,
            package_graph=list(self.package_graph), launcher=self.launcher, conda_prefix=self.conda_prefix,
            python_kind=self.python_kind, pip_site=self.pip_site,
        )

    def iter_loaded(self) -> Iterable[LoadedModule]:
        """The loaded modules, in load order, to read (not to change)."""
        return iter(self.loaded)

    def fork(self) -> "ProcessState":
        """A copy that shares this state's loaded-module list until it changes it (ForkedProcessState):
        O(1), for the model's re-runs of a failed call (diagnosis/verify.py). Valid while this state does
        not change: use it and drop it before the next call."""
        return ForkedProcessState(self)


class ForkedProcessState(ProcessState):
    """A ProcessState over another one's loaded modules, copy on write: a module it finds there is
    cloned the first time (the loader changes refcounts and flags of the modules it binds to), and
    what it adds or removes stays here. The base is never changed."""

    def __init__(self, base: ProcessState):
        self.exe, self.cwd, self.path = base.exe, base.cwd, list(base.path)
        self.dll_directory, self.dll_directories = base.dll_directory, list(base.dll_directories)
        self.default_dirs, self.machine, self.python, self.env = base.default_dirs, base.machine, base.python, dict(base.env)
        self.packaged, self.package_graph = base.packaged, list(base.package_graph)
        self.launcher, self.conda_prefix = base.launcher, base.conda_prefix
        self.python_kind, self.pip_site = base.python_kind, base.pip_site
        self._base = base
        self._clones: dict[int, LoadedModule] = {}  # id(base module) -> its clone
        self._gone: set[int] = set()  # ids of base modules removed here
        self._added: list[LoadedModule] = []

    def _clone(self, m: Optional[LoadedModule]) -> Optional[LoadedModule]:
        if m is None or id(m) in self._gone:
            return None
        c = self._clones.get(id(m))
        if c is None:
            c = LoadedModule(m.path, m.refcount, m._origin, m.initialized, m.by_call)
            self._clones[id(m)] = c  # (first: an import cycle finds it)
            c.deps = tuple(x for d in m.deps if (x := self._clone(d)) is not None)  # the fork's own modules
        return c

    @property
    def loaded(self) -> list[LoadedModule]:  # (a new list: change it through add_loaded / remove_loaded)
        out = [self._clone(m) for m in self._base.loaded]
        return [m for m in out if m is not None] + self._added

    @loaded.setter
    def loaded(self, value: list[LoadedModule]) -> None:
        raise AttributeError("a forked process state's loaded list changes through add_loaded / remove_loaded")

    def iter_loaded(self) -> Iterable[LoadedModule]:
        for m in self._base.iter_loaded():
            if id(m) not in self._gone:
                yield self._clones.get(id(m), m)
        yield from self._added

    def add_loaded(self, m: LoadedModule) -> None:
        self._added.append(m)

    def remove_loaded(self, m: LoadedModule) -> None:
        for i, x in enumerate(self._added):
            if x is m:
                del self._added[i]
                return
        for bid, c in self._clones.items():
            if c is m:
                self._gone.add(bid)
                return
        for b in self._base.iter_loaded():  # a base module read through iter_loaded, never cloned
            if b is m:
                self._gone.add(id(b))
                return

    def _find(self, base_hit: Optional[LoadedModule], same) -> Optional[LoadedModule]:
        hit = self._clone(base_hit)
        if hit is not None:
            return hit
        if base_hit is not None:  # removed here: the next one of the base, then what was added here
            for m in self._base.iter_loaded():
                if id(m) not in self._gone and same(m):
                    return self._clone(m)
        return next((m for m in self._added if same(m)), None)

    def find_loaded_by_name(self, name: str) -> Optional[LoadedModule]:
        n = winpath.basename(name).lower()
        return self._find(self._base.find_loaded_by_name(name), lambda m: m.name == n)

    def find_loaded_by_path(self, path: str) -> Optional[LoadedModule]:
        k = winpath.key(path)
        return self._find(self._base.find_loaded_by_path(path), lambda m: winpath.key(m.path) == k)



class World(Protocol):
    """What the simulator may ask. Paths are absolute Windows paths; comparisons are case-insensitive."""

    system: SystemInfo

    def file(self, path: str) -> Optional[FileFacts]:
        """The file at `path`, or None when there is none (a folder is not a file)."""

    def is_dir(self, path: str) -> bool:
        """Whether a folder exists at `path`."""

    def files_named(self, name: str) -> list[str]:
        """Every known file with this base name, anywhere (for "found elsewhere"). May be incomplete."""

    def close_files(self, name: str) -> list[str]:
        """Files whose names differ from `name` only in their numbers (other versions). May be incomplete."""

    def files_in(self, folder: str) -> list[str]:
        """The files directly in `folder` (torch's loop over torch\\lib\\*.dll)."""


class VirtualWorld:
    """A world held in memory: the files of a scenario or a test."""

    def __init__(self, system: SystemInfo, files: Iterable[FileFacts] = (), folders: Iterable[str] = ()):
        self.system = system
        self._files: dict[str, FileFacts] = {}
        self._dirs: set[str] = set()
        self._by_name: dict[str, list[str]] = {}
        for d in (system.windows, system.system32, system.system16):
            self.add_folder(d)
        for d in folders:
            self.add_folder(d)
        for f in files:
            self.add_file(f)

    def add_folder(self, folder: str) -> None:
        k = winpath.key(folder)
        while k and k not in self._dirs:
            self._dirs.add(k)
            parent = winpath.key(winpath.dirname(k))  # (dirname gives the drive back in upper case)
            if parent == k:
                break
            k = parent

    def add_file(self, facts: FileFacts) -> None:
        k = winpath.key(facts.path)
        if k not in self._files:
            self._by_name.setdefault(winpath.basename(k), []).append(facts.path)
        self._files[k] = facts
        self.add_folder(winpath.dirname(facts.path))

    def file(self, path: str) -> Optional[FileFacts]:
        return self._files.get(winpath.key(path))

    def is_dir(self, path: str) -> bool:
        return winpath.key(path) in self._dirs

    def files_named(self, name: str) -> list[str]:
        return list(self._by_name.get(name.lower(), ()))

    def all_files(self) -> list[FileFacts]:
        return list(self._files.values())

    def files_in(self, folder: str) -> list[str]:
        k = winpath.key(folder)
        return [f.path for f in self._files.values() if winpath.key(winpath.dirname(f.path)) == k]

    def close_files(self, name: str) -> list[str]:
        """Files whose names differ from `name` only in their numbers (other versions)."""
        return sorted((ps[0] for n, ps in self._by_name.items() if ps and winpath.close_name(n, name)), key=str.lower)


def owners_of(world: object, name: str) -> tuple[Owner, ...]:
    """The installed distributions whose record lists a file of this base name (a world that knows them: a
    trace's, from its py_dists event), () for a world that does not."""
    f = getattr(world, "owners_of", None)
    return tuple(f(name)) if callable(f) else ()


def listed_by(world: object, path: str) -> Optional[Owner]:
    """The owner whose record is all the world knows of this file (RecordedWorld.add_listed), else None."""
    f = getattr(world, "listed_by", None)
    return f(path) if callable(f) else None


def owner_of_path(world: object, path: str) -> Optional[Owner]:
    """The installed distribution whose record lists this very file (its RECORD path under its site folder, a
    conda package's under its prefix), where the world knows the records (a trace's py_dists); else None."""
    for o in owners_of(world, winpath.basename(path)):
        if winpath.same(winpath.join(o.root, *[x for x in o.path.replace("\\", "/").split("/") if x]), path):
            return o
    return None


def package_loaders(world: object) -> tuple[PackageLoader, ...]:
    """The packages that add a DLL folder when imported, where the world knows them (a trace's py_dists)."""
    f = getattr(world, "package_loaders", None)
    return tuple(f()) if callable(f) else ()
