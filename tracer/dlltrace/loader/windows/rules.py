"""The loader's rules, one named function each (LOADER.md §1–§4).

Each function is pure: it takes facts and returns a decision. The engine in
engine.py applies them in the loader's order. tests/test_rules.py has one test
per rule, named after it. Where the sources leave a detail open, the docstring says
which choice is modelled and why ("undocumented choice").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from dlltrace import winpath
from dlltrace.apisets import ApiSetContract
from dlltrace.model import (
    COMIMAGE_FLAGS_32BITREQUIRED,
    COMIMAGE_FLAGS_ILONLY,
    DONT_RESOLVE_DLL_REFERENCES,
    LOAD_LIBRARY_AS_DATAFILE,
    LOAD_LIBRARY_AS_DATAFILE_EXCLUSIVE,
    LOAD_LIBRARY_AS_IMAGE_RESOURCE,
    LOAD_WITH_ALTERED_SEARCH_PATH,
    LOAD_LIBRARY_SEARCH_APPLICATION_DIR,
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS,
    LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR,
    LOAD_LIBRARY_SEARCH_MASK,
    LOAD_LIBRARY_SEARCH_SYSTEM32,
    LOAD_LIBRARY_SEARCH_USER_DIRS,
    CandidateResult,
    FileFacts,
    Import,
    InvalidFlagsReason,
    LoadOp,
    PEFacts,
    SearchDir,
)
from dlltrace.worlds.world import ProcessState, SystemInfo

# --- §1 names -----------------------------------------------------------------------------
def rule_name_has_path(name: str) -> bool:
    """A name has a path when it contains \\ or / or starts with a drive letter; bare names
    go through API sets, the loaded-module list and KnownDLLs before any folder search."""
    return winpath.has_path(name)


@lru_cache(maxsize=winpath.PATH_CACHE)
def rule_default_extension(name: str) -> str:
    """A name whose file part has no dot gets ".dll"; a trailing "." means "no extension"
    and is dropped."""
    base = winpath.basename(name)
    if base.endswith("."):
        return name[:-1]
    if "." not in base:
        return name + ".dll"
    return name


VERBATIM_PREFIX = "\\\\?\\"  # \\?\


@lru_cache(maxsize=winpath.PATH_CACHE)
def rule_dos_path_name(path: str) -> str:
    r"""The Win32 path of the file the loader opens for a path (RtlDosPathNameToNtPathName_U, then
    `\??\` read back as Win32). Microsoft's "Naming Files, Paths, and Namespaces"
    (https://learn.microsoft.com/en-us/windows/win32/fileio/naming-a-file): the `\\?\` prefix
    "tells the Windows APIs to disable all string parsing and to send the string that follows it
    straight to the file system", so `\\?\C:\x\a.dll` is `C:\x\a.dll` exactly as written (`\\?\UNC\srv\s\x`
    is `\\srv\s\x`), a trailing "." or " " kept. A normal path is parsed: the same page says "Do not
    end a file or directory name with a space or a period", and the parsing drops them: the trailing
    spaces and dots of the last component are removed (Wine's dlls/ntdll/path.c collapse_path, which
    RtlDosPathNameToNtPathName_U runs: "remove trailing spaces and dots (yes, Windows really does that,
    don't ask)"), and Wine's collapse_path also drops the last dot of each folder name. A component
    that is only dots (".", "..") is left to winpath.normalize."""
    if path.startswith(VERBATIM_PREFIX):
        rest = path[len(VERBATIM_PREFIX):]
        return "\\\\" + rest[4:] if rest[:4].upper() == "UNC\\" else rest
    if "/" not in path and ".\\" not in path and not path.endswith((".", " ")):
        return path  # (no folder name that ends with a dot, nor a last one that ends with a dot or a space: as it is)
    parts = path.replace("/", "\\").split("\\")
    for i, part in enumerate(parts):
        if not part or part.strip(".") == "" or (i == 0 and part.endswith(":")):
            continue
        if i == len(parts) - 1:
            parts[i] = part.rstrip(" .") or part
        elif part.endswith("."):
            parts[i] = part[:-1]
    return "\\".join(parts)


@lru_cache(maxsize=winpath.PATH_CACHE)
def rule_load_name(name: str) -> str:
    r"""The name LoadLibrary looks for: ".dll" added to a file part with no dot, a trailing "." meaning
    "no extension" (rule_default_extension), then the path rules of the file it opens
    (rule_dos_path_name: `C:\x\a.dll.` and `a.dll ` are a.dll; `\\?\C:\x\a.dll` is C:\x\a.dll, and
    `\\?\C:\x\a.dll.` is the file "a.dll." as written)."""
    if name.startswith(VERBATIM_PREFIX):
        return rule_dos_path_name(name if "." in winpath.basename(name) else name + ".dll")
    return rule_dos_path_name(rule_default_extension(name))


def rule_api_set_match(name: str, system: SystemInfo) -> Optional[ApiSetContract]:
    """A bare name that starts with "api-" or "ext-" is looked up in the API-set schema: the
    name without ".dll" and without its last "-N" component, compared case-insensitively with
    the same part of each contract name (so api-ms-win-crt-string-l1-1-7 is the contract
    api-ms-win-crt-string-l1-1-0). A name the schema does not hold is NOT an API set: it is
    searched for as a file like any other name (the app-local UCRT forwarders of Windows 7
    worked that way). Returns the contract, or None.
    Sources: Wine dlls/ntdll/loader.c (get_apiset_entry: the prefix test and the comparison up
    to the last hyphen); Microsoft Learn, "API set loader operation"."""
    n = winpath.basename(name)
    if n[:4].lower() not in ("api-", "ext-"):
        return None
    return system.api_sets.lookup(n)


def rule_api_set_host(contract: ApiSetContract, importer: Optional[str]) -> str:
    """The host of a contract for the module that imports it: the importer's exception in the
    schema when it has one, else the default host ("" = the contract has no host: the load
    fails with 126 and no file is probed). A LoadLibrary of an API-set name has no importer and
    gets the default. Source: Wine dlls/ntdll/loader.c (get_apiset_target, the importer's base
    name against the value entries after the first)."""
    return contract.host_for(importer)


def rule_api_set_host_search(importer: Optional[str], dirs: tuple[SearchDir, ...],
                             system: SystemInfo) -> tuple[SearchDir, ...]:
    """Where the host of a contract is looked for. An import of a contract searches for its host
    like any bare name, on the importer's search path (so a ucrtbase.dll in the importer's folder
    comes before System32, and a path that misses System32 misses the host). A LoadLibrary of the
    contract itself takes the host from System32 whatever the search path. Measured under Wine 8.0
    (docs/wine-profile.md, the api-set-direct-load-* minimal cases); Windows does not document
    this: modelled the same (undocumented choice)."""
    if importer:
        return dirs
    return (SearchDir(system.system32, "SYSTEM32 (API-set host)"),)




def rule_loaded_module(name: str, process: ProcessState):
    """Any already-loaded module with the same base name satisfies a bare name, whatever
    folder it came from; the first loaded wins. The root of most 127s ("shadowing")."""
    return process.find_loaded_by_name(name)


def rule_loaded_same_file(path: str, process: ProcessState, system: Optional[SystemInfo] = None):
    """A name with a path skips the name-based steps, but a module already loaded from the
    same file is reused (under WOW64 the same file may have been loaded under its System32 or its
    SysWOW64 name: rule_wow64_same_file)."""
    m = process.find_loaded_by_path(path)
    if m is not None or system is None or not rule_wow64_applies(process.machine, system):
        return m
    for alias in rule_wow64_same_file(path, process.machine, system)[1:]:
        m = process.find_loaded_by_path(alias)
        if m is not None:
            return m
    return None


def rule_known_dlls(name: str, system: SystemInfo, machine: str = "x64") -> Optional[str]:
    """A bare name listed in KnownDLLs is taken from System32 with no search; in a 32-bit process on a
    64-bit Windows, from the 32-bit KnownDLLs (rule_wow64_known_dlls: SysWOW64).
    The Wine profile has no KnownDLLs (docs/wine-profile.md)."""
    if system.profile == "wine":
        return None
    n = winpath.basename(name).lower()
    if rule_wow64_applies(machine, system):
        return rule_wow64_known_dlls(n, system)
    if n in system.known_dlls:
        return winpath.join(system.system32, n)
    return None


# --- WOW64: a 32-bit (x86) process on 64-bit Windows ----------------------------------------------------
SYSWOW64 = "SysWOW64"
SYSNATIVE = "Sysnative"
# System32's subfolders the file system redirector leaves alone (Microsoft Learn, "File System Redirector":
# "Certain subdirectories are exempt from redirection"; Wine's dlls/ntdll/unix/file.c `redirects[]` lists
# the same six with no target)
WOW64_NOT_REDIRECTED = ("catroot", "catroot2", "driverstore", "drivers\\etc", "logfiles", "spool")
# KnownDLLs that have no 32-bit copy: WOW64's own 64-bit DLLs ("Wow64.dll, Wow64Win.dll, Wow64Cpu.dll ...
# along with the 64-bit version of Ntdll.dll, are the only 64-bit binaries that can be loaded into a 32-bit
# process": Microsoft Learn, "WOW64 Implementation Details")
WOW64_ONLY_KNOWN_DLLS = ("wow64.dll", "wow64cpu.dll", "wow64win.dll")
WOW64_MACHINES = ("x64", "arm64")  # the Windows machines that run x86 programs under WOW64


def rule_wow64_applies(machine: str, system: SystemInfo) -> bool:
    """A 32-bit x86 process on a 64-bit Windows (x64, or arm64 which emulates x86) runs under WOW64: the
    file system redirector and the 32-bit KnownDLLs apply to it. On a 32-bit Windows (system machine x86)
    there is no WOW64. (32-bit ARM processes are redirected to SysArm32 on Windows 10 on ARM: not modelled.)"""
    return machine == "x86" and system.machine in WOW64_MACHINES


def _under(path_key: str, folder_key: str) -> Optional[str]:
    """The rest of a path (a key) below a folder (a key), "" for the folder itself, None when not below."""
    if path_key == folder_key:
        return ""
    if path_key.startswith(folder_key.rstrip("\\") + "\\"):
        return path_key[len(folder_key.rstrip("\\")) + 1:]
    return None


@lru_cache(maxsize=winpath.PATH_CACHE)
def _wow64_redirect(path: str, windows: str, system32: str) -> str:
    n = winpath.normalize(path)
    k = winpath.key(n)  # (fold maps a character to one: the key and the normalised path have one length)
    rest = _under(k, winpath.key(system32))
    if rest is not None:
        if any(rest == x or rest.startswith(x + "\\") for x in WOW64_NOT_REDIRECTED):
            return path
        tail = n[len(n) - len(rest):] if rest else ""
        return winpath.join(windows, SYSWOW64, tail) if tail else winpath.join(windows, SYSWOW64)
    rest = _under(k, winpath.key(winpath.join(windows, SYSNATIVE)))
    if rest is not None:
        tail = n[len(n) - len(rest):] if rest else ""
        return winpath.join(system32, tail) if tail else system32
    return path


def rule_wow64_redirect(path: str, machine: str, system: SystemInfo) -> str:
    """The file a path opens (WOW64's file system redirector): in a 32-bit process on 64-bit Windows
    (rule_wow64_applies), `%windir%\\System32\\...` is `%windir%\\SysWOW64\\...`, except System32's catroot,
    catroot2, driverstore, drivers\\etc, logfiles and spool (WOW64_NOT_REDIRECTED), and
    `%windir%\\Sysnative\\...` reaches the real System32 ("32-bit applications can access the native system
    directory by substituting %windir%\\Sysnative for %windir%\\System32"). Any other path, and every path of
    a 64-bit process, is itself. The loader asks for the System32 path (its probes and the module's name
    say System32: measured under Wine 8.0, whose redirection is in the file system too: dlls/ntdll/unix/file.c
    get_redirect, `{ system32W, "syswow64" }, { sysnativeW, "system32" }`); the facts are the redirected file's.
    Sources: Microsoft Learn, "File System Redirector"
    (https://learn.microsoft.com/windows/win32/winprog64/file-system-redirector); Wine dlls/ntdll/unix/file.c."""
    if not rule_wow64_applies(machine, system):
        return path
    return _wow64_redirect(path, system.windows, system.system32)


def rule_wow64_same_file(path: str, machine: str, system: SystemInfo) -> tuple[str, ...]:
    """The names under which a 32-bit process may have loaded the file `path` opens: the path itself and,
    under WOW64, its System32 spelling for a SysWOW64 file (System32\\x.dll and SysWOW64\\x.dll are one file:
    measured under Wine 8.0, LoadLibrary of SysWOW64\\x.dll after System32\\x.dll returns the module loaded
    first). A 64-bit process: the path alone."""
    if not rule_wow64_applies(machine, system):
        return (path,)
    real = rule_wow64_redirect(path, machine, system)
    out = [path] if winpath.same(real, path) else [path, real]
    real = winpath.normalize(real)
    rest = _under(winpath.key(real), winpath.key(winpath.join(system.windows, SYSWOW64)))
    if rest is not None:
        tail = real[len(real) - len(rest):] if rest else ""
        alias = winpath.join(system.system32, tail) if tail else system.system32
        if not any(winpath.same(alias, p) for p in out):
            out.append(alias)
    return tuple(out)


def rule_wow64_known_dlls(name: str, system: SystemInfo) -> Optional[str]:
    """The 32-bit KnownDLLs of a process under WOW64: the registry's KnownDLLs list (HKLM\\SYSTEM\\
    CurrentControlSet\\Control\\Session Manager\\KnownDLLs, a key the registry redirector shares between the
    two views: HKLM\\SYSTEM is not redirected) less WOW64's own 64-bit DLLs (WOW64_ONLY_KNOWN_DLLS), whose
    sections the session manager maps from SysWOW64 into the `\\KnownDlls32` object directory (the key's
    `DllDirectory32` value, %SystemRoot%\\SysWOW64). There is no KnownDLLs32 registry key: the 32-bit list is
    that object directory (ntdll's LdrGetKnownDllSectionHandle takes a `KnownDlls32` flag). Returns the
    SysWOW64 path, or None. Wine has no KnownDLLs in either view (rule_known_dlls). Undocumented choice: the
    list is read as the 64-bit list minus WOW64's DLLs; Microsoft documents neither list's contents."""
    n = winpath.basename(name).lower()
    if n in system.known_dlls and n not in WOW64_ONLY_KNOWN_DLLS:
        return winpath.join(system.windows, SYSWOW64, n)
    return None


def rule_wow64_program_files(machine: str, system: SystemInfo, program_files: str = "C:\\Program Files") -> str:
    """The folder %ProgramFiles% names in a process: `Program Files (x86)` in a 32-bit process under WOW64,
    which sets ProgramFiles=%ProgramFiles(x86)% in a 32-bit process's environment (Microsoft Learn, "WOW64
    Implementation Details", Environment variables); Program Files is not redirected by the file system
    (the File System Redirector page lists no such folder): a 32-bit program installs and looks there only
    through the variable. No load the model resolves depends on %ProgramFiles% yet (the static model's Python
    sits at C:\\PythonXY for either machine, and the traces record no ProgramFiles variable): the fact is named
    here, and tested, for the first that does."""
    if rule_wow64_applies(machine, system):
        return program_files + " (x86)"
    return program_files


def rule_dot_local(process: ProcessState, is_dir, file) -> Optional[SearchDir]:
    """DLL redirection: when `app.exe.local` exists the application folder (or, for a
    `.local` folder, that folder) is searched first, even for names with a full path."""
    local = process.exe + ".local"
    if is_dir(local):
        return SearchDir(local, ".local redirection folder")
    if file(local) is not None:
        return SearchDir(process.app_dir, ".local redirection (application folder)")
    return None


# --- §3 flag validity ----------------------------------------------------------------------------
def rule_invalid_flags(name: str, flags: int, effective: Optional[int] = None) -> Optional[InvalidFlagsReason]:
    """ERROR_INVALID_PARAMETER (87): LOAD_WITH_ALTERED_SEARCH_PATH combined with any
    LOAD_LIBRARY_SEARCH_* flag, or LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (passed, or in effect: see
    rule_effective_search_flags) with a name that is not fully qualified. Returns why
    (model.INVALID_FLAGS_TEXT has the words), or None when the flags are valid."""
    if flags & LOAD_WITH_ALTERED_SEARCH_PATH and flags & LOAD_LIBRARY_SEARCH_MASK:
        return "altered_with_search_flags"
    search = flags if effective is None else effective
    if search & LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR and not winpath.is_absolute(name):
        if flags & LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR:
            return "dll_load_dir_needs_full_path"
        return "altered_with_default_dirs_needs_full_path"
    return None


def rule_set_default_dirs_valid(flags: int) -> Optional[str]:
    """SetDefaultDllDirectories takes only APPLICATION_DIR, USER_DIRS, SYSTEM32 and
    DEFAULT_DIRS (Microsoft's documentation lists exactly these; Wine's
    LdrSetDefaultDllDirectories rejects the rest, DLL_LOAD_DIR included): anything else,
    or 0, is ERROR_INVALID_PARAMETER and leaves the default unchanged."""
    allowed = LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_USER_DIRS | LOAD_LIBRARY_SEARCH_SYSTEM32 | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
    if flags == 0 or flags & ~allowed:
        return f"SetDefaultDllDirectories({flags:#x}) is not a valid combination"
    return None


def rule_add_dll_directory_valid(folder: str, is_dir) -> int:
    """AddDllDirectory needs an absolute path (87) to an existing folder (2)."""
    if not winpath.is_absolute(folder):
        return 87
    if not is_dir(folder):
        return 2
    return 0


# --- §2/§3 the folder order -------------------------------------------------------------------------
def rule_effective_search_flags(flags: int, process: ProcessState) -> int:
    """Which LOAD_LIBRARY_SEARCH_* flags a call searches with: its own when it passes any;
    else the process default from SetDefaultDllDirectories; else 0 (the standard order).
    ALTERED_SEARCH_PATH while a process default is in effect means the default plus
    DLL_LOAD_DIR: the DLL's own folder first, and a bare name is invalid (87). Windows
    documents nothing for this case; this is what Wine's LdrGetDllPath does, measured
    under Wine (undocumented choice)."""
    own = flags & LOAD_LIBRARY_SEARCH_MASK
    if own:
        return own
    if process.default_dirs:
        if flags & LOAD_WITH_ALTERED_SEARCH_PATH:
            return process.default_dirs | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR
        return process.default_dirs
    return 0


def rule_user_dirs_most_recent_first(process: ProcessState) -> list[SearchDir]:
    """USER_DIRS: every AddDllDirectory folder, most recently added first (Windows says the
    order is unspecified; Wine and conda's patched Python both behave this way), then the
    SetDllDirectory folder."""
    return list(_user_dirs(tuple(process.dll_directories), process.dll_directory))


def _user_dirs(dll_directories: tuple[tuple[str, str], ...], dll_directory: Optional[str]) -> tuple[SearchDir, ...]:
    out = []
    n = len(dll_directories)
    for i, (folder, label) in enumerate(reversed(dll_directories)):
        rule = f"AddDllDirectory #{n - i}" + (f" ({label})" if label else "")
        out.append(SearchDir(folder, rule))
    if dll_directory:
        out.append(SearchDir(dll_directory, "SetDllDirectory"))
    return tuple(out)


def rule_search_flags_order(search: int, process: ProcessState, system: SystemInfo,
                            dll_path: Optional[str]) -> list[SearchDir]:
    """LOAD_LIBRARY_SEARCH_* order: DLL_LOAD_DIR -> APPLICATION_DIR -> USER_DIRS -> SYSTEM32.
    DEFAULT_DIRS is APPLICATION_DIR|USER_DIRS|SYSTEM32. PATH, the current folder, System
    and Windows are never searched with these flags."""
    if search & LOAD_LIBRARY_SEARCH_DEFAULT_DIRS:
        search |= LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_USER_DIRS | LOAD_LIBRARY_SEARCH_SYSTEM32
    dirs: list[SearchDir] = []
    if search & LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR and dll_path and winpath.is_absolute(dll_path):
        dirs.append(SearchDir(winpath.dirname(dll_path), f"DLL_LOAD_DIR of {winpath.basename(dll_path)}"))
    dirs.extend(_flags_order_rest(search, process.app_dir, tuple(process.dll_directories), process.dll_directory,
                                  system.system32))
    return dirs


@lru_cache(maxsize=64)
def _flags_order_rest(search: int, app_dir: str, dll_directories: tuple[tuple[str, str], ...],
                      dll_directory: Optional[str], system32: str) -> tuple[SearchDir, ...]:
    """rule_search_flags_order's folders after DLL_LOAD_DIR: they depend on the flags and the process's state
    only, not on the name loaded, so they are made once per state (a big trace's loads, tens of thousands, mostly
    search with one state; a cleared cache, _clear_path_caches, makes them again)."""
    dirs: list[SearchDir] = []
    if search & LOAD_LIBRARY_SEARCH_APPLICATION_DIR:
        dirs.append(SearchDir(app_dir, "APPLICATION_DIR"))
    if search & LOAD_LIBRARY_SEARCH_USER_DIRS:
        dirs.extend(_user_dirs(dll_directories, dll_directory))
    if search & LOAD_LIBRARY_SEARCH_SYSTEM32:
        dirs.append(SearchDir(system32, "SYSTEM32"))
    return tuple(dirs)


def rule_path_entries(process: ProcessState) -> list[SearchDir]:
    """Each PATH entry, in order (empty entries skipped), named PATH[n] from 1."""
    return [SearchDir(p, f"PATH[{i}]") for i, p in enumerate(process.path, 1) if p.strip()]


def rule_standard_order(process: ProcessState, system: SystemInfo,
                        altered_dll: Optional[str] = None) -> list[SearchDir]:
    """The standard order: application folder, System32, System, Windows, current folder,
    PATH. SafeDllSearchMode=0 moves the current folder to right after the application
    folder. SetDllDirectoryW(d) puts d after the application folder and drops the current
    folder; SetDllDirectoryW("") drops only the current folder (the Wine profile treats ""
    as NULL: Wine's LdrGetDllPath passes an empty directory on as none).
    LOAD_WITH_ALTERED_SEARCH_PATH with an absolute path: the DLL's folder replaces the
    application folder."""
    if altered_dll:
        first = SearchDir(winpath.dirname(altered_dll), f"folder of {winpath.basename(altered_dll)} (ALTERED_SEARCH_PATH)")
    else:
        first = SearchDir(process.app_dir, "application folder")
    system_dirs = [
        SearchDir(system.system32, "System32"),
        SearchDir(system.system16, "System (16-bit)"),
        SearchDir(system.windows, "Windows folder"),
    ]
    cwd = SearchDir(process.cwd, "current folder")
    if process.dll_directory is not None and not (process.dll_directory == "" and system.profile == "wine"):
        middle = [SearchDir(process.dll_directory, "SetDllDirectory")] if process.dll_directory else []
        return [first, *middle, *system_dirs, *rule_path_entries(process)]
    if system.safe_dll_search_mode:
        return [first, *system_dirs, cwd, *rule_path_entries(process)]
    return [first, cwd, *system_dirs, *rule_path_entries(process)]


def rule_packaged_standard_order(process: ProcessState, system: SystemInfo,
                                 altered_dll: Optional[str] = None) -> list[SearchDir]:
    """The standard order of a packaged (MSIX / Store) process: after DLL redirection, API sets,
    SxS manifests, the loaded-module list and KnownDLLs (which the engine applies before any
    folder), the process's package dependency graph (the app's package, then each
    <PackageDependency> of its manifest, in manifest order), the executable's folder, System32.
    Nothing else: no System or Windows folder, no current folder, no SetDllDirectory folder and
    no PATH. LOAD_WITH_ALTERED_SEARCH_PATH with an absolute path: the DLL's folder replaces the
    executable's folder ("Alternate search order for packaged apps"). The LOAD_LIBRARY_SEARCH_*
    order is the same as for unpackaged processes (it never searches PATH).
    Source: Microsoft Learn, "Dynamic-link library search order", sections "Standard search order
    for packaged apps" and "Alternate search order for packaged apps"
    (https://learn.microsoft.com/windows/win32/dlls/dynamic-link-library-search-order)."""
    graph = [SearchDir(d, f"package dependency graph #{i}") for i, d in enumerate(process.package_graph, 1)]
    if altered_dll:
        first = SearchDir(winpath.dirname(altered_dll), f"folder of {winpath.basename(altered_dll)} (ALTERED_SEARCH_PATH)")
    else:
        first = SearchDir(process.app_dir, "application folder")
    return [*graph, first, SearchDir(system.system32, "System32")]


def rule_search_path(name: str, flags: int, process: ProcessState, system: SystemInfo) -> list[SearchDir]:
    """The folders searched for a call (and, by rule_dependencies_use_callers_path, for its
    static imports). A packaged process has its own standard order (rule_packaged_standard_order)."""
    search = rule_effective_search_flags(flags, process)
    if search:
        return rule_search_flags_order(search, process, system, name if winpath.is_absolute(name) else None)
    altered = None
    if flags & LOAD_WITH_ALTERED_SEARCH_PATH:
        if winpath.is_absolute(name):
            altered = name
        elif system.profile == "wine" and winpath.has_path(name):
            altered = rule_altered_relative_name(name, process)
    if process.packaged:
        return rule_packaged_standard_order(process, system, altered)
    return rule_standard_order(process, system, altered)


def rule_environment_path(value: Optional[str], cwd: str) -> list[str]:
    """The PATH entries the loader searches after SetEnvironmentVariableW("PATH", value) (and
    after Python's `os.environ["PATH"] = value`: it calls os.putenv, which sets the process
    environment block the loader reads, with SetEnvironmentVariableW (older CPythons: the CRT's
    _wputenv, which updates it too)): the value split at ";", empty entries dropped (the
    standard order skips them). A relative entry names a folder relative to the current folder
    (the loader opens <entry>\\<name>, which the file system resolves against it). value None
    (the variable deleted): no PATH entries. Quotes are kept as they are (undocumented choice)."""
    if value is None:
        return []
    out = []
    for e in value.split(";"):
        if not e.strip():
            continue
        out.append(winpath.normalize(e) if winpath.is_absolute(e) else winpath.join(cwd, e))
    return out


def rule_delay_load_call(name: str) -> tuple[LoadOp, int]:
    """What the first call through a delay-load import does: MSVC's delay-load helper
    (__delayLoadHelper2 in delayimp.lib, source delayhlp.cpp) calls LoadLibraryExA(dll, NULL, 0)
    with the import's DLL name, unless a notification hook returns a module first: a bare name
    searched with flags 0, so the process's standard order (or its SetDefaultDllDirectories
    default), never the importing DLL's own folder. A failure raises the structured exception
    VcppException(ERROR_SEVERITY_ERROR, ERROR_MOD_NOT_FOUND) (0xC06D007E) in the caller.
    Returns (op, flags). Sources: Microsoft Learn, "Linker support for delay-loaded DLLs" and
    "Understand the delay load helper function" (the helper "calls LoadLibrary to attempt loading
    of the DLL"); delayhlp.cpp (`hmod = ::LoadLibraryExA(dli.szDll, NULL, 0)`)."""
    return "LoadLibraryExA", 0


@dataclass(frozen=True)
class BoundVersionCondition:
    """`dllmain_fails_if_bound`: the DllMain fails when the module `name` this module bound to has a
    file version older than `older_than`."""

    name: str  # a DLL base name, lower case
    older_than: str  # "14.40"


@dataclass(frozen=True)
class InitFacts(FileFacts):
    """A scenario's file whose DllMain fails only under a condition (rule_dllmain_fails_if_bound)."""

    dllmain_fails_if_bound: tuple[BoundVersionCondition, ...] = ()
    needs_cpu: tuple[str, ...] = ()  # `dllmain_fails_if_cpu_lacks`: CPU features its initialization needs ("avx")


def _version_key(v: str) -> tuple[int, ...]:
    parts = tuple(int(p) for p in v.split("."))
    return parts + (0,) * (4 - len(parts))


def rule_dllmain_needs_cpu_feature(needs: tuple[str, ...], lacks: tuple[str, ...]) -> Optional[str]:
    """`dllmain_fails_if_cpu_lacks`: the DllMain fails (1114) when the CPU lacks a feature its code needs
    (SystemInfo.cpu_lacks). The case: TensorFlow >= 1.6 binaries are built with AVX, and on a CPU without it
    their initialization fails with WinError 1114 with every dependency present (tensorflow#37221,
    shared/CASES.md S9). Returns the feature lacking, or None."""
    have_not = {f.lower() for f in lacks}
    return next((f for f in needs if f.lower() in have_not), None)


def rule_dllmain_fails_if_bound(conditions: tuple[BoundVersionCondition, ...],
                                bound: list[tuple[str, Optional[str]]]) -> Optional[str]:
    """Whether a DllMain fails because of what its module bound to: `bound` is (path, file version)
    of each module its imports bound to (the copy already loaded when one was: the loaded-module
    rule). It fails when a bound module named in a condition has a file version older than the
    condition's; a copy of unknown version is not taken as older, and a module it did not bind to
    (it does not import it) never fails it. Returns the words of why, or None. The case: c10.dll of
    torch >= 2.9 fails its static initialisation (WinError 1114) with an msvcp140.dll older than
    14.40 (pytorch#169429, shared/CASES.md S4): the same world loads once the new copy is bound first."""
    for c in conditions:
        for path, version in bound:
            if winpath.basename(path).lower() != c.name or version is None:
                continue
            if _version_key(version) < _version_key(c.older_than):
                return f"it fails when its {c.name} is older than {c.older_than}: it bound to {path}, version {version}"
    return None


def rule_altered_relative_name(name: str, process: ProcessState) -> str:
    """ALTERED_SEARCH_PATH with a relative name is undefined on Windows (the model keeps the
    standard order there). Wine cuts the name at its last backslash and searches that folder,
    relative to the current folder, first: LoadLibraryExW("sub\\x.dll", 8) probes
    <cwd>\\sub\\sub\\x.dll (get_dll_load_path). Wine profile only."""
    return winpath.join(process.cwd, name)


def rule_dependencies_use_callers_path(top_dirs: tuple[SearchDir, ...]) -> tuple[SearchDir, ...]:
    """Static imports are searched by name only, with the search path computed for the
    top-level call; with DLL_LOAD_DIR that folder is the top-level DLL's folder at every
    level of the tree (Wine; measured: a chain top->a->b in one folder loads with 0x100)."""
    return top_dirs


def rule_dependent_load_flags(facts: Optional[FileFacts]) -> int:
    """A DLL linked with /DEPENDENTLOADFLAG has its own static imports searched as if those
    flags were passed (0: it has none, the caller's search path applies)."""
    if facts is None or facts.pe is None:
        return 0
    return facts.pe.dependent_load_flags & LOAD_LIBRARY_SEARCH_MASK


# --- §4 candidates --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateVerdict:
    """What the loader does with one candidate file (rule_candidate): its result, and whether the search stops."""
    result: CandidateResult
    stop: bool  # the search ends here (found, or an error that ends it)


def rule_candidate(facts: Optional[FileFacts], machine: str, profile: str = "windows") -> CandidateVerdict:
    """What the loader does with one candidate file: none there -> go on; the wrong
    machine (rule_il_only_image_fits: not a .NET image of IL only) -> skip it and go on (193 only
    if nothing else is found); not a PE -> stop with 193; access denied -> stop with 5; otherwise
    take it."""
    if facts is None:
        return CandidateVerdict("not_there", False)
    if facts.error == "access_denied":
        return CandidateVerdict("access_denied", True)
    if facts.error == "not_pe":
        return CandidateVerdict("not_pe", True)
    if facts.pe is not None and facts.pe.machine != machine and not rule_il_only_image_fits(facts.pe, machine, profile):
        return CandidateVerdict("wrong_machine", False)
    return CandidateVerdict("found", True)


def rule_il_only_image_fits(pe: PEFacts, machine: str, profile: str = "windows") -> bool:
    """A .NET assembly of IL only (IMAGE_COR20_HEADER.Flags has COMIMAGE_FLAGS_ILONLY: "AnyCPU"), built as
    PE32 (machine x86), loads in a 64-bit process (x64, arm64): the loader rewrites its headers as PE32+
    (Wine's ntdll convert_to_pe64). Windows refuses one marked COMIMAGE_FLAGS_32BITREQUIRED; Wine's
    is_valid_binary takes any IL-only image (dlls/ntdll/loader.c). pythonnet's Python.Runtime.dll is one.
    A native x86 file, or an IL-only one in an x86 process of another machine, does not fit."""
    flags = pe.cor_flags
    if flags is None or not flags & COMIMAGE_FLAGS_ILONLY or pe.machine != "x86" or machine not in ("x64", "arm64"):
        return False
    return profile == "wine" or not flags & COMIMAGE_FLAGS_32BITREQUIRED


def rule_datafile_load(flags: int) -> bool:
    """LOAD_LIBRARY_AS_DATAFILE(_EXCLUSIVE) / AS_IMAGE_RESOURCE map the file for its
    resources only: no imports, no DllMain, no machine check (a 32-bit DLL loads this way
    in a 64-bit process), and the mapping does not join the loaded-module list."""
    return bool(flags & (LOAD_LIBRARY_AS_DATAFILE | LOAD_LIBRARY_AS_DATAFILE_EXCLUSIVE | LOAD_LIBRARY_AS_IMAGE_RESOURCE))


def rule_dont_resolve_references(flags: int) -> bool:
    """DONT_RESOLVE_DLL_REFERENCES: the module is mapped and listed, but its imports are not
    loaded and its DllMain is not called."""
    return bool(flags & DONT_RESOLVE_DLL_REFERENCES)


def rule_forwarder_target(forward: str) -> tuple[str, str]:
    """A forwarded export "target.func" loads target.dll by name (with the importer's
    search path) and binds func there; "target.#7" binds ordinal 7."""
    dll, _, func = forward.rpartition(".")
    return rule_default_extension(dll), func


def rule_delay_imports_not_loaded_at_load_time(pe: PEFacts) -> tuple[Import, ...]:
    """The imports a load resolves: the import table only. Delay-load imports are not loaded by
    LoadLibrary: they load at first call (failures raise 0xC06D007E/0xC06D007F then), with the
    process default search order."""
    return pe.imports


def rule_missing_import_is_error(system: SystemInfo) -> bool:
    """An import by name the bound module does not export fails the load with 127 (by
    ordinal: 182). The Wine profile binds it to a stub and carries on."""
    return system.profile != "wine"


def rule_import_failure_error(system: SystemInfo, error: int) -> int:
    """The error a failing static import gives its importer: the import's own error
    (126, 193, 5, ...) on Windows; always 126 in the Wine profile (Wine's fixup_imports
    turns any failed import into STATUS_DLL_NOT_FOUND; only a top-level module that is
    itself wrong-machine or not a PE gives 193 there)."""
    if system.profile == "wine":
        return 126
    return error


def rule_imports_stop_at_first_failure(system: SystemInfo) -> bool:
    """Windows stops processing a module's imports at the first that fails; Wine's
    fixup_imports goes on loading (and probing for) the remaining imports, then fails."""
    return system.profile != "wine"


def rule_failed_load_keeps_loaded_dependencies(system: SystemInfo, error: int) -> bool:
    """When a load fails, Windows unloads every module the call loaded. Wine, when the failure
    is in the import stage, unloads only the modules that failed: dependencies that loaded
    fine stay loaded (a FIXME in Wine's loader says so) but are not initialized, and a retry
    binds to them by name (measured in the S2 fixture: the retry never probes for
    cudart64_110.dll). A DllMain failure (1114, or 998 for a DllMain that crashed) unloads the whole
    call under Wine too (tests/test_dllmain.py: Wine's log unloads the importer and the failed DLL)."""
    return system.profile == "wine" and error not in (1114, 998)


def rule_dllmain_failure_error(how: str, error: Optional[int] = None) -> int:
    """The error a load gives when a DllMain in it fails (FileFacts.dllmain_how): FALSE gives 1114
    (ERROR_DLL_INIT_FAILED); an exception inside DllMain that the loader catches gives the exception's
    status as a Win32 error: Wine 8.0 wraps the call in __TRY/__EXCEPT_ALL (dlls/ntdll/loader.c,
    MODULE_InitDLL around call_dll_entry_point; process_attach then notifies "unloaded"), and
    LoadLibrary fails with 998 (ERROR_NOACCESS) for an access violation (tests/test_dllmain.py).
    Windows: not measured here. `error`: the error the trace recorded for that load, if any."""
    if how == "crashed":
        return error if error else 998
    return 1114






def rule_loaded_candidate_not_opened(system: SystemInfo) -> bool:
    """Wine's search looks each candidate's full path up among the loaded modules before it
    opens the file (open_dll_file -> find_fullname_module): a loaded candidate is reused with
    no probe. Windows: not measured; the model opens it (one probe more, same result)."""
    return system.profile == "wine"


def rule_datafile_search_path(process: ProcessState, system: SystemInfo) -> list[SearchDir]:
    """Wine loads a data file (LOAD_LIBRARY_AS_DATAFILE) that is not already loaded through
    SearchPathW(NULL, name, ".dll"): the application folder, the current folder, System32,
    System, Windows, PATH; no SetDllDirectory, AddDllDirectory or SEARCH flags. The first file
    of that name is taken whatever its machine; none is error 2 (ERROR_FILE_NOT_FOUND).
    Windows documents data files as searched like modules: only the Wine profile uses this."""
    return [SearchDir(process.app_dir, "application folder (SearchPath)"),
            SearchDir(process.cwd, "current folder (SearchPath)"),
            SearchDir(system.system32, "System32 (SearchPath)"),
            SearchDir(system.system16, "System (SearchPath)"),
            SearchDir(system.windows, "Windows folder (SearchPath)"),
            *rule_path_entries(process)]
