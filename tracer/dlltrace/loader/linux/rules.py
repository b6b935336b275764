"""The rules of glibc's ld.so (2.36) for finding a shared object, one named function each.

Each function is pure: facts in, a decision out. engine.py applies them in the order of glibc's
elf/dl-load.c _dl_map_object; tests/test_linux_rules.py has one test per rule, named after it, and
tests/test_ldso_diff.py checks the whole against the real ld.so on generated layouts.

The search for a name with no slash (_dl_map_object):
  1. an object already loaded whose name, or soname, is the name      rule_loaded_by_soname
  2. DT_RPATH of the loading object, then of its loader, and up, then of the
     executable; all skipped when the loading object has DT_RUNPATH     rule_rpath_of_loaders
  3. LD_LIBRARY_PATH (not in secure mode)                               rule_ld_library_path
  4. DT_RUNPATH of the loading object only                              rule_runpath_direct_only
  5. ld.so.cache (not its system-folder entries under NODEFLIB)          rule_ld_so_cache
  6. the default folders (none under NODEFLIB)                          rule_default_dirs
Each folder is tried with its hwcaps subfolders first (rule_hwcaps_subdirs), and a folder known not to
exist is skipped (rule_dir_status). Paths in 2-4 have $ORIGIN, $LIB and $PLATFORM expanded
(rule_expand_dst). A name with a slash is opened as it is (rule_name_has_slash).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Sequence

from dlltrace.elf import ELFCLASS32, ELFCLASS64, ELFError, ELFFacts, ELFResult

# la_objsearch's flags (<link.h>): which step of the search a candidate comes from
LA_SER_ORIG = 0x01
LA_SER_LIBPATH = 0x02
LA_SER_RUNPATH = 0x04  # DT_RPATH and DT_RUNPATH alike
LA_SER_CONFIG = 0x08
LA_SER_DEFAULT = 0x40
LA_SER_SECURE = 0x80
LA_SER_NAMES = {LA_SER_ORIG: "LA_SER_ORIG", LA_SER_LIBPATH: "LA_SER_LIBPATH", LA_SER_RUNPATH: "LA_SER_RUNPATH",
                LA_SER_CONFIG: "LA_SER_CONFIG", LA_SER_DEFAULT: "LA_SER_DEFAULT", LA_SER_SECURE: "LA_SER_SECURE"}

# dlopen's flags (<dlfcn.h>, x86-64)
RTLD_LAZY = 0x1
RTLD_NOW = 0x2
RTLD_NOLOAD = 0x4
RTLD_DEEPBIND = 0x8
RTLD_GLOBAL = 0x100
RTLD_NODELETE = 0x1000

# The search step a folder came from, as LD_DEBUG=libs names it ("search path=... (RPATH from file X)")
What = Literal["RPATH", "RUNPATH", "LD_LIBRARY_PATH", "system search path", "cache"]
WHAT_SER: dict[str, int] = {"RPATH": LA_SER_RUNPATH, "RUNPATH": LA_SER_RUNPATH, "LD_LIBRARY_PATH": LA_SER_LIBPATH,
                            "system search path": LA_SER_DEFAULT, "cache": LA_SER_CONFIG}

# variables ld.so removes from the environment of a secure (AT_SECURE: setuid/setgid/capabilities)
# process (glibc sysdeps/generic/unsecvars.h, the ones that change the search)
UNSECURE_ENVVARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "LD_DEBUG_OUTPUT", "LD_ORIGIN_PATH",
                    "LD_PROFILE", "LD_HWCAP_MASK", "GCONV_PATH", "LOCALDOMAIN", "LD_DYNAMIC_WEAK")


# --- names -------------------------------------------------------------------------------------------
def rule_name_has_slash(name: str) -> bool:
    """A name with a "/" anywhere is a path: ld.so opens it (after $ORIGIN/$LIB/$PLATFORM expansion for a
    DT_NEEDED entry) and searches no folder; a name without one is searched for. No default suffix is
    added ("libfoo" stays "libfoo")."""
    return "/" in name


@dataclass(frozen=True)
class LoadedRef:
    """What the already-loaded check needs of one loaded object (engine.LinuxObject gives these)."""

    path: str  # l_name: the path it was opened by ("" for the executable)
    names: tuple[str, ...]  # l_libname: every name it was asked for and matched
    soname: Optional[str]


def rule_loaded_by_soname(name: str, loaded: Sequence[LoadedRef]) -> Optional[int]:
    """An object already loaded in the namespace satisfies a name that is its path, one of the names it was
    loaded by, or its DT_SONAME, whatever folder it came from; the first in load order wins (glibc
    _dl_map_object's loop over _ns_loaded, _dl_name_match_p then the soname). This holds for names with a
    slash too (compared as strings). Returns the index in `loaded`, or None."""
    for i, ref in enumerate(loaded):
        if name == ref.path or name in ref.names or (ref.soname is not None and name == ref.soname):
            return i
    return None


def rule_same_file(file_id: str, loaded_ids: Sequence[str]) -> Optional[int]:
    """A file opened by another path than an object already loaded from the same file (same device and
    inode) is that object: it gets the new name and is not loaded twice (_dl_map_object_from_fd)."""
    for i, fid in enumerate(loaded_ids):
        if fid == file_id:
            return i
    return None


# --- $ORIGIN, $LIB, $PLATFORM ----------------------------------------------------------------------------
def _is_dst(s: str, i: int, ref: str) -> int:
    """The length of the DST `ref` at s[i:] (just after the "$"), curly braces counted, or 0."""
    curly = s.startswith("{", i)
    j = i + 1 if curly else i
    if not s.startswith(ref, j):
        return 0
    k = j + len(ref)
    if curly:
        return len(ref) + 2 if s.startswith("}", k) else 0
    if k < len(s) and (s[k].isalnum() or s[k] == "_"):
        return 0
    return len(ref)


def rule_open_relative(path: str, cwd: str = "/") -> str:
    """A path with a "/" that does not begin with one is opened from the current folder (open(2) of a relative
    path): the file ld.so reads is cwd/path; the object keeps the name as given (its l_name)."""
    return path if path.startswith("/") else posixpath.join(cwd or "/", path)


def rule_origin(path: str, cwd: str = "/") -> str:
    """$ORIGIN of an object: the folder of the path it was opened by (not resolved through links; a
    relative path is taken from the current folder); for the executable, the folder of its real path
    (/proc/self/exe)."""
    if not path.startswith("/"):
        path = posixpath.join(cwd, path)
    d = posixpath.dirname(path)
    return d or "/"


def rule_expand_dst(s: str, origin: Optional[str], lib: str, platform: str, secure: bool = False,
                    is_executable: bool = False, trusted: Sequence[str] = ()) -> Optional[str]:
    """$ORIGIN / ${ORIGIN}, $LIB, $PLATFORM replaced (glibc _dl_dst_substitute). $ORIGIN is the object's
    folder (rule_origin), $LIB the machine's library folder name ("lib/x86_64-linux-gnu" on Debian),
    $PLATFORM AT_PLATFORM ("x86_64"). An unknown $WORD stays as it is. Returns None when the path must be
    dropped: $ORIGIN unknown, or in a secure process $ORIGIN not first and alone, or (for the executable)
    the expanded path not under a trusted folder."""
    out: list[str] = []
    i = 0
    check_trusted = False
    while i < len(s):
        c = s[i]
        if c != "$":
            out.append(c)
            i += 1
            continue
        i += 1
        n = _is_dst(s, i, "ORIGIN")
        if n:
            if secure and not (i == 1 and (i + n == len(s) or s[i + n] == "/")):
                return None
            if origin is None:
                return None
            out.append(origin)
            check_trusted = secure and is_executable
            i += n
            continue
        n = _is_dst(s, i, "PLATFORM")
        if n:
            out.append(platform)
            i += n
            continue
        n = _is_dst(s, i, "LIB")
        if n:
            out.append(lib)
            i += n
            continue
        out.append("$")
    result = "".join(out)
    if check_trusted:
        norm = posixpath.normpath(result)
        if not any(norm == t or norm.startswith(t.rstrip("/") + "/") for t in trusted):
            return None
    return result


def rule_decompose_path(value: str, expand: Callable[[str], Optional[str]], sep: str = ":") -> tuple[str, ...]:
    """A DT_RPATH / DT_RUNPATH / LD_LIBRARY_PATH value as the folders ld.so searches (glibc fillin_rpath):
    split at `sep` (":"; ":" and ";" for LD_LIBRARY_PATH), each element DST-expanded (dropped when the
    expansion drops it or leaves it empty), trailing slashes removed and one added; an empty element is
    the current folder as "", a name of length 0 (fillin_rpath keeps len 0: ld.so tries
    "glibc-hwcaps/x86-64-v3/libx.so", not "./glibc-hwcaps/..."; seen with onnxruntime-gpu 1.19.2's provider,
    RUNPATH "/usr/local/cuda-12.2/lib:"); a folder already in the list is not added again. Folders end
    with "/", but for that one."""
    out: list[str] = []
    parts = [value]
    for ch in sep:
        parts = [q for p in parts for q in p.split(ch)]
    for part in parts:
        if part:
            got = expand(part)
            if not got:
                continue
            d = got
            while len(d) > 1 and d.endswith("/"):
                d = d[:-1]
            if not d.endswith("/"):
                d += "/"
        else:
            d = ""  # (glibc: an element of length 0, the current folder; its files are tried as bare names)
        if d not in out:
            out.append(d)
    return tuple(out)


# --- the steps of the search --------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjRef:
    """What the search needs of an object in the loader chain."""

    path: str
    rpath: Optional[str]
    runpath: Optional[str]
    nodeflib: bool = False
    is_executable: bool = False
    dlopened: bool = False  # loaded by dlopen (lt_loaded): its l_loader is None


def rule_rpath_of_loaders(chain: Sequence[ObjRef], main: Optional[ObjRef]) -> list[ObjRef]:
    """Whose DT_RPATH is searched, in order: when the loading object (chain[0]) has no DT_RUNPATH, the
    DT_RPATH of the loading object, then of the object that loaded it, and on up (chain: the l_loader
    links; a dlopened object has none), then the executable's unless it was in the chain already or was
    itself dlopened. A loading object with DT_RUNPATH uses no DT_RPATH at all (neither its own nor its
    loaders'). No loading object (a dlopen from ld.so itself): the executable's."""
    if chain and chain[0].runpath is not None:
        return []
    out = [o for o in chain if o.rpath is not None]
    if main is not None and not main.dlopened and main.rpath is not None and not any(o.is_executable for o in chain):
        out.append(main)
    return out


def rule_ld_library_path(env: dict[str, str], secure: bool) -> Optional[str]:
    """LD_LIBRARY_PATH, read once when the process starts (later changes to the variable are not seen), its
    elements split at ":" and ";"; ignored in a secure process (rule_secure_mode). None: not searched."""
    if secure:
        return None
    v = env.get("LD_LIBRARY_PATH")
    return v if v else None


def rule_runpath_direct_only(loader: Optional[ObjRef]) -> Optional[str]:
    """DT_RUNPATH is searched only for the loading object's own DT_NEEDED entries (and its dlopen calls):
    never for the dependencies of those (they use their own DT_RUNPATH, or none), unlike DT_RPATH.
    Returns the RUNPATH to search, or None."""
    if loader is None:
        return None
    return loader.runpath


def rule_ld_so_cache(name: str, lookup: Callable[[str], Optional[str]], loader_nodeflib: bool,
                     system_dirs: Sequence[str], secure_open: bool = False) -> Optional[str]:
    """/etc/ld.so.cache (what ldconfig found) is asked for a bare name after the paths above; its answer is
    tried as one candidate (LA_SER_CONFIG). An answer in a default folder is not used when the loading
    object (or the executable, for a dlopen with none) has DF_1_NODEFLIB; the cache is not used for a
    secure-mode preload (__RTLD_SECURE in a secure process)."""
    if secure_open:
        return None
    got = lookup(name)
    if got is None:
        return None
    if loader_nodeflib and any(got.startswith(d.rstrip("/") + "/") for d in system_dirs):
        return None
    return got


def rule_default_dirs(system_dirs: Sequence[str], loader_nodeflib: bool) -> tuple[str, ...]:
    """The default folders last (Debian x86-64: /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib,
    /usr/lib; `ld.so --help` lists a machine's); none when the loading object (or, for a dlopen by ld.so,
    the executable) was linked with -z nodefaultlib (DF_1_NODEFLIB)."""
    if loader_nodeflib:
        return ()
    return tuple(d.rstrip("/") + "/" for d in system_dirs)


def rule_hwcaps_subdirs(folder: str, hwcaps: Sequence[str]) -> list[str]:
    """The folders open_path tries for one search folder, in order: each hwcaps subfolder the CPU supports
    (glibc-hwcaps/x86-64-v4/, -v3/, -v2/, then, before glibc 2.37, the legacy tls/ and platform ones, a
    subfolder listed twice tried twice), then the folder itself. `folder` ends with "/"."""
    return [folder + sub for sub in hwcaps]


DirStatus = Literal["unknown", "existing", "nonexisting"]


def rule_dir_status(folder: str, known: DirStatus, found: bool, is_dir: Callable[[str], bool]) -> DirStatus:
    """ld.so remembers, for the life of the process, which search folders (each with each hwcaps subfolder)
    do not exist and skips them in every later search, without a "trying" line. A folder's status becomes
    known the first time a file is tried in it: existing when the file opened, else existing or
    nonexisting as stat says. A relative folder is never skipped (the current folder may change)."""
    if known != "unknown":
        return known
    if not folder.startswith("/"):
        return "existing"
    if found:
        return "existing"
    return "existing" if is_dir(folder.rstrip("/") or "/") else "nonexisting"


VerifyResult = Literal["ok", "wrong_class", "wrong_machine", "bad"]


def rule_verify_elf(facts: ELFResult, elf_class: int, machine: str) -> VerifyResult:
    """What ld.so does with a file it opened (open_verify): not ELF at all ("invalid ELF header", "file too
    short"): the load fails there with that error ("bad"); another ELF class (32-bit for a 64-bit process):
    skipped, the search goes on, and if nothing is found the error is "wrong ELF class: ELFCLASS32"; the
    right class but another e_machine: skipped silently (the error is then "cannot open shared object
    file")."""
    if isinstance(facts, ELFError):
        return "bad"
    if facts.elf_class != elf_class:
        return "wrong_class"
    if facts.machine != machine:
        return "wrong_machine"
    return "ok"


def wrong_class_text(process_class: int) -> str:
    other = ELFCLASS64 if process_class == ELFCLASS32 else ELFCLASS32
    return f"wrong ELF class: ELFCLASS{other}"


def rule_secure_mode(env: dict[str, str], secure: bool) -> dict[str, str]:
    """A secure process (setuid/setgid, file capabilities: AT_SECURE) starts with the variables that change
    the search removed (LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT, ...: UNSECURE_ENVVARS); in its DT_RPATH and
    DT_RUNPATH, $ORIGIN counts only as the first element and, for the executable, under a trusted folder
    (rule_expand_dst's `secure`)."""
    if not secure:
        return dict(env)
    return {k: v for k, v in env.items() if k not in UNSECURE_ENVVARS}


@dataclass(frozen=True)
class DlopenMode:
    """What dlopen's flags change, for the search and the binding."""

    noload: bool  # RTLD_NOLOAD: only an object already loaded is returned; a new one is searched, not loaded
    now: bool  # RTLD_NOW: every undefined symbol is bound at load (a missing one fails the load)
    global_: bool  # RTLD_GLOBAL: its symbols serve objects loaded later
    deepbind: bool  # RTLD_DEEPBIND: its own symbols before the global ones
    invalid: bool  # neither RTLD_LAZY nor RTLD_NOW: "invalid mode for dlopen()"


def rule_dlopen_flags(flags: int) -> DlopenMode:
    """dlopen's flags, as far as they change the search or the binding: the search order is the same for
    every flag; RTLD_NOLOAD searches but loads nothing new (dlopen returns NULL and dlerror() NULL);
    a mode without RTLD_LAZY or RTLD_NOW is refused with "invalid mode for dlopen()"; RTLD_NOW,
    RTLD_GLOBAL and RTLD_DEEPBIND change only which symbols bind where."""
    return DlopenMode(noload=bool(flags & RTLD_NOLOAD), now=bool(flags & RTLD_NOW),
                      global_=bool(flags & RTLD_GLOBAL), deepbind=bool(flags & RTLD_DEEPBIND),
                      invalid=not (flags & (RTLD_LAZY | RTLD_NOW)))


def rule_preload_ignored(name: str, error: str) -> str:
    """An object of LD_PRELOAD that cannot be mapped does not stop the program's start (glibc 2.36 elf/rtld.c
    do_preload): ld.so prints "ERROR: ld.so: object 'NAME' from LD_PRELOAD cannot be preloaded (ERRSTRING):
    ignored." and maps the next one and the program's dependencies without it; the folders its search found missing
    stay so (rule_dir_status). `error`: the object's failure as dlerror() words it ("NAME: cannot open shared object
    file: No such file or directory", "NAME: wrong ELF class: ELFCLASS32"); ERRSTRING is them without the object's
    name and without the errno's text. Returns the line ld.so prints."""
    text = error.split(": ", 1)[1] if ": " in error else error
    if text.startswith("cannot open shared object file"):
        text = "cannot open shared object file"
    return f"ERROR: ld.so: object '{name}' from LD_PRELOAD cannot be preloaded ({text}): ignored."


def rule_version_needs(facts: ELFFacts, deps: dict[str, Optional[ELFFacts]]) -> Optional[tuple[str, str]]:
    """Each version an object needs from a dependency (.gnu.version_r: "GLIBC_2.34" from libc.so.6,
    "GLIBCXX_3.4.30" from libstdc++.so.6) must be defined by the object that name bound to; a dependency
    with no version definitions at all only gets a warning, a weak need is not checked. `deps` maps each
    needed file name to the facts of the object it bound to. Returns (file, version) of the first missing
    one, or None."""
    for need in facts.version_needs:
        got = deps.get(need.file)
        if got is None or not got.version_defs:
            continue
        for v in need.versions:
            if v not in got.version_defs:
                return need.file, v
    return None


def version_text(needed_path: str, version: str, needed_by: str) -> str:
    """ld.so's words (elf/dl-version.c match_symbol)."""
    return f"{needed_path or '<main program>'}: version `{version}' not found (required by {needed_by or '<main program>'})"
