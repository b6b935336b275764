"""The live world: facts read from a real disk (the machine itself, or a Wine prefix).

Windows paths are mapped to host paths by a PathMap: on Windows the identity; under
Wine through the prefix's dosdevices (c: -> drive_c, z: -> /). Used at the end of
`dlltrace run` to store in the trace the PE facts a replay needs (so a report never
needs the user's disk), and by tests.

On Windows, the machine's own facts come from the Windows API (dlltrace.winapi, through
ctypes-windows-sdk): live_system() (the system folders, KnownDLLs and SafeDllSearchMode from the
registry), live_process() (a process's loaded modules; this process's DLL directory, cwd and PATH)
and error_message() (FormatMessage's text for an error the model has no words for). Not run on real
Windows: tests/test_winapi.py runs them against a fake of the API. The traced process's own facts are
the shim's (its `env` event): see dlltrace.winapi for why they are read there.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from dlltrace import winapi, winpath
from dlltrace.errors import EXIT_UNSUPPORTED, DlltraceError
from dlltrace.model import ERROR_TEXT, FileFacts, PEError
from dlltrace.pe import read_pe_facts
from dlltrace.worlds.world import DEFAULT_KNOWN_DLLS, LoadedModule, ProcessState, SystemInfo

if TYPE_CHECKING:
    from dlltrace.worlds.factscache import FactsCache

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


def facts_for(path: str, host: Optional[str], cache: Optional[FactsCache] = None) -> Optional[FileFacts]:
    """FileFacts of the file at host (standing for Windows path `path`), or None if none is there; its PE facts
    through `cache` (by the file's identity: FactsCache.host_facts) when one is given."""
    if host is None:
        return None
    try:
        st = os.stat(host)  # (the one stat isfile made: its size kept, to compare with a RECORD's)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    size = st.st_size
    if not os.access(host, os.R_OK):
        return FileFacts(path=path, error="access_denied", size=size)
    res = read_pe_facts(host) if cache is None else cache.host_facts(host)
    if isinstance(res, PEError):
        if res.kind == "unreadable":
            return FileFacts(path=path, error="access_denied", size=size)
        return FileFacts(path=path, error="not_pe", size=size)
    return FileFacts(path=path, pe=res, size=size)


class LiveWorld:
    """A World over a real disk. `places` are the folders files_named() looks in; `cache` keeps the PE facts of
    its files between runs (worlds/factscache.py)."""

    def __init__(self, system: SystemInfo, to_host: PathMap = identity_map, places: Iterable[str] = (),
                 cache: Optional[FactsCache] = None):
        self.system = system
        self.facts_cache = cache
        self.to_host = to_host
        self.places = list(places)
        self._cache: dict[str, Optional[FileFacts]] = {}
        self._dirs: dict[str, bool] = {}
        self._listed: dict[str, list[str]] = {}

    def file(self, path: str) -> Optional[FileFacts]:
        k = winpath.key(path)
        if k not in self._cache:
            self._cache[k] = facts_for(winpath.normalize(path), self.to_host(path), self.facts_cache)
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


# ---- the machine itself, on Windows (dlltrace.winapi) ---------------------------------------------------
# platform.machine() on Windows (PROCESSOR_ARCHITECTURE of this Python) -> model.MACHINES
_MACHINE = {"amd64": "x64", "x86_64": "x64", "x86": "x86", "i386": "x86", "i686": "x86", "arm64": "arm64",
            "aarch64": "arm64", "arm": "arm"}


def _need_windows(what: str) -> None:
    if not winapi.available():
        raise DlltraceError(f"{what} reads the Windows API: Windows only, with ctypes-windows-sdk installed",
                            EXIT_UNSUPPORTED)


def live_system() -> SystemInfo:
    """This Windows machine's SystemInfo, as this Python sees it (a 32-bit Python's System32 is SysWOW64).
    KnownDLLs: the registry's list; the stock list when the key cannot be read."""
    import platform

    _need_windows("the live system")
    folders = winapi.system_folders()
    try:
        known = winapi.known_dlls()
    except OSError:
        known = None
    try:
        safe = winapi.safe_dll_search_mode()
    except OSError:
        safe = None
    return SystemInfo(
        windows=folders.windows, system32=folders.system32,
        machine=_MACHINE.get(platform.machine().lower(), "x64"),
        safe_dll_search_mode=safe != 0,  # (unset: on, the loader's default)
        known_dlls=tuple(n.lower() for n in known) if known is not None else DEFAULT_KNOWN_DLLS,
        version=platform.version(),
    )


def live_process(pid: Optional[int] = None) -> ProcessState:
    """A process's DLL-search state as far as Windows tells it from outside: its loaded modules (the exe
    first). For this process (pid None) also its folder, PATH and SetDllDirectory folder; another process's
    cwd, PATH and DLL directory have no API (the shim records them from inside: its `env` event)."""
    _need_windows("a live process")
    try:
        modules = winapi.process_modules(pid)
    except OSError as e:  # (WindowsOnly, or the package's WinError: access denied, a 64-bit process, ...)
        raise DlltraceError(f"cannot list the modules of process {pid if pid is not None else os.getpid()}: "
                            f"{e.strerror or e}", EXIT_UNSUPPORTED) from None
    if not modules:
        raise DlltraceError(f"process {pid}: no modules listed", EXIT_UNSUPPORTED)
    own = pid is None
    path = [p for p in os.environ.get("PATH", "").split(";") if p.strip()] if own else []
    state = ProcessState(exe=modules[0], cwd=os.getcwd() if own else "", path=path,
                         dll_directory=winapi.dll_directory() if own else None)
    for m in modules:
        state.add_loaded(LoadedModule(winpath.normalize(m), 1, "loaded when the process was read"))
    return state


def error_message(code: int) -> str:
    """The text for a Win32 error or NTSTATUS: the model's words (model.ERROR_TEXT, the same on every OS),
    else on Windows the system's (FormatMessage), else the number."""
    if code in ERROR_TEXT:
        return ERROR_TEXT[code]
    if winapi.available():
        try:
            text = winapi.format_message(code)
        except OSError:
            text = None
        if text:
            return text
    return f"error {code}" if code < 0x10000 else f"status 0x{code & 0xFFFFFFFF:08X}"
