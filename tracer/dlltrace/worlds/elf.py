"""ELF worlds: where the Linux loader model (loader/linux) gets its facts.

The model asks a world whether a path is a file and what it holds (elf.ELFFacts or elf.ELFError), whether
a folder exists, which file ld.so.cache gives for a name, whether two paths are the same file, and the
machine's fixed facts (LinuxSystem: the default folders, the hwcaps subfolders, what $LIB and $PLATFORM
expand to). VirtualELFWorld answers from a dict (tests, scenarios); LiveELFWorld from this machine's disk,
its /etc/ld.so.cache and its ld.so. The model never knows which one it has.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
import shutil
import stat
import struct
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Optional, Protocol, TypeVar

from dlltrace.cachedir import cache_home, trusted_dir
from dlltrace.elf import ELFError, ELFFacts, ELFResult, VersionNeed, read_elf
from dlltrace.worlds.gpu import GpuFacts, gpu_facts_from_dict, read_gpu_facts

try:  # (a CPython built without it: no command-not-found database is read)
    import sqlite3
except ImportError:  # pragma: no cover
    sqlite3 = None  # type: ignore[assignment]

# Debian/Ubuntu x86-64 (glibc's SYSTEM_DIRS as Debian builds it; `ld.so --help` lists them)
DEFAULT_SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")
# the subfolders open_path tries in each folder, in order ("" is the folder itself): glibc 2.36 on an
# x86-64-v4 CPU (the glibc-hwcaps ones, then the legacy ones ld.so still tries before glibc 2.37)
DEFAULT_HWCAPS = ("glibc-hwcaps/x86-64-v4/", "glibc-hwcaps/x86-64-v3/", "glibc-hwcaps/x86-64-v2/",
                  "tls/x86_64/x86_64/", "tls/x86_64/", "tls/x86_64/", "tls/", "x86_64/x86_64/", "x86_64/",
                  "x86_64/", "")


def file_size(world: object, path: str) -> Optional[int]:
    """The size in bytes of the file at `path`, where the world knows it (this machine's disk; a trace that recorded
    it: its elf_file `size`); None otherwise (a world of facts alone, an older trace)."""
    f = getattr(world, "file_size", None)
    return f(path) if callable(f) else None


def copies_on_disk(name: str, roots: list[str], conf_dirs: tuple[str, ...] = ()) -> list[str]:
    """Files named `name` under the usual places: each root's nvidia/*/lib, CUDA toolkits, conda, and the
    folders /etc/ld.so.conf lists (`conf_dirs`: a library put there after ldconfig last ran, `make install`'s
    /usr/local/lib, is in none of ld.so.cache's answers)."""
    pats = [posixpath.join(r, "nvidia", "*", "lib", name) for r in roots]
    pats += [f"/usr/local/cuda*/lib64/{name}", f"/usr/local/cuda*/targets/*/lib/{name}", f"/opt/conda/lib/{name}"]
    pats += [posixpath.join(glob.escape(d), glob.escape(name)) for d in conf_dirs]
    out: list[str] = []
    for p in pats:
        out += [g for g in sorted(glob.glob(p)) if g not in out and os.path.isfile(g)]
    return out


@dataclass(frozen=True)
class LinuxSystem:
    """Machine-wide facts of the Linux loader."""

    system_dirs: tuple[str, ...] = DEFAULT_SYSTEM_DIRS
    hwcaps: tuple[str, ...] = DEFAULT_HWCAPS  # subfolders with a trailing "/", "" last
    lib: str = "lib/x86_64-linux-gnu"  # what $LIB expands to
    platform: str = "x86_64"  # what $PLATFORM expands to (AT_PLATFORM)
    machine: str = "EM_X86_64"
    elf_class: int = 64
    cache_file: str = "/etc/ld.so.cache"
    conf_dirs: tuple[str, ...] = ()  # the folders /etc/ld.so.conf lists (ldconfig indexes them), read_ld_so_conf


class ELFWorld(Protocol):
    system: LinuxSystem

    def file(self, path: str) -> Optional[ELFResult]:
        """What is at path: None when no regular file is there."""

    def is_dir(self, path: str) -> bool: ...

    def cache_lookup(self, name: str) -> Optional[str]:
        """The path ld.so.cache gives for a bare name, or None."""

    def file_id(self, path: str) -> str:
        """A key equal for two paths of the same file (ld.so compares st_dev/st_ino)."""

    def real_path(self, path: str) -> str:
        """The path with its links resolved (the executable's $ORIGIN comes from /proc/self/exe)."""


@dataclass
class VirtualELFWorld:
    """A world from a dict: path -> ELFFacts / ELFError; folders are the parents of the files plus `dirs`;
    `cache` is ld.so.cache (name -> path); `links` maps a path to the file it is the same as."""

    files: dict[str, ELFResult] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    cache: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    system: LinuxSystem = field(default_factory=LinuxSystem)

    def __post_init__(self) -> None:
        self.files = {posixpath.normpath(k): v for k, v in self.files.items()}
        self._dirs = {posixpath.normpath(d) for d in self.dirs} | set(self.system.system_dirs)
        for p in self.files:
            d = posixpath.dirname(p)
            while d and d not in self._dirs:
                self._dirs.add(d)
                d = posixpath.dirname(d) if d != "/" else ""

    def _real(self, path: str) -> str:
        p = posixpath.normpath(path)
        return self.links.get(p, p)

    def file(self, path: str) -> Optional[ELFResult]:
        return self.files.get(self._real(path))

    def is_dir(self, path: str) -> bool:
        return posixpath.normpath(path) in self._dirs

    def cache_lookup(self, name: str) -> Optional[str]:
        return self.cache.get(name)

    def file_id(self, path: str) -> str:
        return self._real(path)

    def real_path(self, path: str) -> str:
        return self._real(path)


# --- the live machine -------------------------------------------------------------------------------
_CACHE_MAGIC_NEW = b"glibc-ld.so.cache1.1"
FLAG_ELF_LIBC6 = 0x0003
FLAG_X8664_LIB64 = 0x0300


def read_ld_so_cache(data: bytes, want_flags: int = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64) -> dict[str, str]:
    """name -> path from an ld.so.cache of the new format (glibc's elf/cache.c: a header of 20 magic bytes,
    nlibs, len_strings, flags, extension offset, then nlibs entries of flags, key, value, osversion,
    hwcap; string offsets count from that header). The first entry of a name with the wanted flags
    and no hwcap wins. An old-format prefix ("ld.so-1.7.0") is skipped."""
    start = data.find(_CACHE_MAGIC_NEW)
    if start < 0:
        return {}
    nlibs, _len_strings = struct.unpack_from("<II", data, start + 20)
    out: dict[str, str] = {}
    off = start + 48  # magic 20, nlibs 4, len_strings 4, flags 1 + pad 3, extension_offset 4, unused 3*4
    for i in range(nlibs):
        flags, key, value, _osv, hwcap = struct.unpack_from("<iIIIQ", data, off + i * 24)
        if flags != want_flags or hwcap:
            continue

        def s(o: int) -> str:
            end = data.find(b"\0", o)
            return data[o:end].decode("utf-8", "surrogateescape")
        out.setdefault(s(start + key), s(start + value))  # offsets count from the new header
    return out


# the most folders read_ld_so_conf keeps (a real system's lists a few dozen; each is recorded in every trace and
# searched for every library not found)
MAX_CONF_DIRS = 1024


def read_ld_so_conf(path: str = "/etc/ld.so.conf") -> tuple[str, ...]:
    """The folders an ld.so.conf lists, in order, as ldconfig reads it (glibc's elf/ldconfig.c, parse_conf and
    add_dir_1): one folder a line, the whole line less the spaces around it and its trailing slashes (a space in a
    folder's name is part of it; "/a, /b" is one folder, which does not exist: glibc 2.36's ldconfig caches neither),
    `=TYPE` after it dropped, `#` to the end of a line a comment, `include GLOB ...` read in place (a relative glob
    from the file's own folder), `hwcap` lines skipped; () when it cannot be read. Each file is read once (an include
    loop, or files that include each other's glob, would else be read again and again), an include line is never
    a folder (not even one too deep to follow), and no more than MAX_CONF_DIRS folders are kept."""
    out: dict[str, None] = {}
    _read_conf(path, 0, set(), out)
    return tuple(out)


def _read_conf(path: str, depth: int, seen: set[str], out: dict[str, None]) -> None:
    real = os.path.realpath(path)
    if real in seen or len(seen) >= 4096 or len(out) >= MAX_CONF_DIRS:
        return
    seen.add(real)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("include") and line[7:8] in (" ", "\t"):
            for pat in line[8:].split() if depth < 8 else ():
                pat = pat if pat.startswith("/") else posixpath.join(posixpath.dirname(path), pat)
                for inc in sorted(glob.glob(pat)):
                    _read_conf(inc, depth + 1, seen, out)
        elif line and not (line[:5].lower() == "hwcap" and line[5:6] in (" ", "\t")):
            folder = line.split("=", 1)[0].rstrip()  # (the whole line, spaces in it too; `=TYPE` an old type mark)
            if folder.startswith("/") and len(out) < MAX_CONF_DIRS:
                out.setdefault(posixpath.normpath(folder))


@lru_cache(maxsize=1)
def probe_live_system() -> LinuxSystem:
    """This machine's loader facts, from its ld.so: `ld.so --help` for the default folders, and one
    `LD_DEBUG=libs` run for the hwcaps subfolders and what $LIB and $PLATFORM expand to."""
    ldso = next((p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1") if os.path.exists(p)), "")
    system_dirs: tuple[str, ...] = DEFAULT_SYSTEM_DIRS
    if ldso:
        try:
            out = subprocess.run([ldso, "--help"], capture_output=True, text=True, timeout=10).stdout
            dirs = tuple(m.group(1) for m in re.finditer(r"^\s+(/\S*) \(system search path\)", out, re.M))
            system_dirs = dirs or system_dirs
        except (OSError, subprocess.SubprocessError):
            pass
    hwcaps: tuple[str, ...] = DEFAULT_HWCAPS
    lib, platform = "lib/x86_64-linux-gnu", "x86_64"
    probe = "/nonexistent-dlltrace-probe"
    env = dict(os.environ, LD_DEBUG="libs", LD_LIBRARY_PATH=f"{probe}/$LIB/$PLATFORM")
    env.pop("LD_DEBUG_OUTPUT", None)
    try:
        err = subprocess.run(["/bin/true"], capture_output=True, text=True, env=env, timeout=10).stderr
        tried = [m.group(1) for m in re.finditer(r"trying file=(\S+)", err) if m.group(1).startswith(probe + "/")]
        if tried:
            base = posixpath.dirname(tried[-1])  # the folder itself comes last
            rel = base[len(probe) + 1:]
            lib, platform = posixpath.dirname(rel), posixpath.basename(rel)
            name = posixpath.basename(tried[-1])
            subs = []
            for t in tried:
                if posixpath.basename(t) != name:
                    break
                sub = posixpath.dirname(t)[len(base) + 1:]
                subs.append(sub + "/" if sub else "")
                if not sub:
                    break
            hwcaps = tuple(subs)
    except (OSError, subprocess.SubprocessError):
        pass
    return LinuxSystem(system_dirs=system_dirs, hwcaps=hwcaps, lib=lib, platform=platform, conf_dirs=read_ld_so_conf())


def debian_package_names(soname: str) -> list[str]:
    """The names Debian's policy gives the package of a shared library (Debian Policy 8.1: the soname's name and
    major, a hyphen between them when the name ends in a digit, lower case), its 64-bit time_t variant (the "t64"
    packages of Debian 13 and Ubuntu 24.04) and its C++ ABI one ("v5": libgeos_c.so.1 is in libgeos-c1v5):
    libxcb-icccm.so.4 -> libxcb-icccm4, libGL.so.1 ->
    libgl1, libfoo2.so.3 -> libfoo2-3, libcudart.so.11.0 -> libcudart11.0; a GNOME name with its API version,
    libglib-2.0.so.0, also as GNOME's packages are named: libglib2.0-0 (and libgthread-2.0.so.0, which GLib's
    package ships: GLIB_FAMILY); [] for a name that is not lib<name>.so.<version>."""
    m = re.match(r"^lib(?P<name>[A-Za-z0-9_+.-]+?)\.so\.(?P<version>\d+(?:\.\d+)*)$", soname)
    if m is None:
        return []
    first, *others = policy_stems(m.group("name"))
    version = m.group("version")
    return [first + version, first + version + "t64", first + version + "v5",
            *(x for s in others for x in (s + version, s + version + "t64"))]


def policy_stems(name: str) -> list[str]:
    """What Debian's policy puts before a library's major in its package's name, for lib<name>.so: lib<name> in lower
    case, `_` as `-` (no "_" in a package name), a hyphen after a name that ends in a digit (libfoo2-3); GLib's family
    named after GLib (GLIB_FAMILY); and, for a GNOME name with its API version, also as GNOME's packages are named
    (glib-2.0: libglib2.0-)."""
    low = name.lower().replace("_", "-")
    low = GLIB_FAMILY.get(low, low)
    out = [f"lib{low}-" if low[-1:].isdigit() else f"lib{low}"]
    api = re.match(r"^(.*[a-z])-(\d+\.\d+)$", low)  # (GNOME's "glib-2.0": its package says libglib2.0-0)
    if api is not None:
        out.append(f"lib{api.group(1)}{api.group(2)}-")
    return out


# the libraries GLib's package ships besides libglib-2.0.so.0 (Debian's and Ubuntu's libglib2.0-0): named after
# GLib, not after themselves (no package is called libgthread-2.0-0)
GLIB_FAMILY = {"gthread-2.0": "glib-2.0", "gobject-2.0": "glib-2.0", "gmodule-2.0": "glib-2.0", "gio-2.0": "glib-2.0",
               # (GTK 3's package ships GDK 3: libgtk-3-0 has libgdk-3.so.0, read from its .deb on Debian 12)
               "gdk-3": "gtk-3"}


def apt_package_of(soname: str) -> Optional[str]:
    """The apt package that ships soname on this machine (a Debian or Ubuntu one), as its policy names it and
    apt knows it (debian_package_names, apt_package_names); None elsewhere, or when apt knows no such package.
    A name without a version, `lib<name>.so` (what ctypes.util.find_library('<name>') looks for), is the package of
    whichever version apt has (package_of_unversioned)."""
    names = apt_package_names()
    if not names:
        return None
    m = re.match(r"^lib(?P<name>[A-Za-z0-9_+.-]+?)\.so$", soname)
    if m is not None:
        return package_of_unversioned(m.group("name"), names)
    return package_of_soname(soname, names)


# Debian's suffixes of a library package's name after its soname's major, besides none: the 64-bit time_t variant
# (t64), the C++ ABI ones (v5, c2, c2a, ldbl) and the letter of an ABI transition (libdmtx0b, libleveldb1d,
# libqt5core5a); a plain name is taken before its t64 variant, and that before the others
ABI_SUFFIX = r"t64|v5|c2a?|ldbl|[a-g]"


def _suffix_rank(suffix: Optional[str]) -> int:
    return 0 if not suffix else 1 if suffix == "t64" else 2


def package_of_soname(soname: str, names: Iterable[str]) -> Optional[str]:
    """The package of `names` (apt's) that ships the versioned soname: a name Debian's policy gives it
    (debian_package_names), in that order; else that name with an ABI-transition suffix (ABI_SUFFIX: Debian 12
    ships libdmtx.so.0, pylibdmtx's library, in libdmtx0b); None for none."""
    names = set(names)
    cands = debian_package_names(soname)
    hit = next((c for c in cands if c in names), None)
    if hit is not None or not cands:
        return hit
    bases = {c for c in cands if not c.endswith(("t64", "v5"))}
    pat = re.compile(rf"^(?P<base>{'|'.join(re.escape(b) for b in sorted(bases))})(?P<suffix>{ABI_SUFFIX})$")
    found = sorted((_suffix_rank(m.group("suffix")), n) for n in names for m in [pat.match(n)] if m is not None)
    return found[0][1] if found else None


def package_of_unversioned(name: str, names: Iterable[str]) -> Optional[str]:
    """The package of `names` (apt's) that ships lib<name>.so.<some version>, as Debian's policy names it
    (debian_package_names: lib<name><major>, lib<name>-<major> when the name ends in a digit, and their t64 and
    v5 variants, and ABI_SUFFIX's: dmtx -> libdmtx0b): portaudio -> libportaudio2, usb-1.0 -> libusb-1.0-0, magic ->
    libmagic1; the highest major when apt knows several (libssl1.1 and libssl3: libssl3), a plain name before its
    t64 variant, and that before the others; None for none."""
    stems = "|".join(re.escape(s) for s in policy_stems(name))
    pat = re.compile(rf"^(?:{stems})(?P<major>\d+(?:\.\d+)*)(?P<variant>{ABI_SUFFIX})?$")
    found = []
    for n in names:
        m = pat.match(n)
        if m is not None:
            major = tuple(int(x) for x in m.group("major").split("."))
            found.append((major, _suffix_rank(m.group("variant")), n))
    if not found:
        return None
    best = max(x[0] for x in found)
    return min((v, n) for major, v, n in found if major == best)[1]


@lru_cache(maxsize=1)
def apt_package_names() -> frozenset[str]:
    """Every package name apt knows here (`apt-cache pkgnames`: one call, about 1 s, made only when a library no
    pip package ships is missing); empty off Debian and Ubuntu, or without apt's lists."""
    if not shutil.which("apt-cache") or not _debian_like():
        return frozenset()
    # (apt loads its whole cache for any question, about 0.5 s: the answer is kept on disk for the state of apt's
    # lists it came from, so a later run on this machine reads it instead)
    try:  # (what apt's answer depends on: its lists, and dpkg's status)
        stamp = "-".join(str(os.stat(p).st_mtime_ns) for p in ("/var/lib/apt/lists", "/var/lib/dpkg/status"))
    except OSError:
        stamp = ""
    folder = trusted_dir(cache_home() / "apt-pkgnames") if stamp else None  # (names others wrote are not believed)
    kept = os.path.join(folder, stamp + ".txt") if folder is not None else ""
    if kept:
        try:
            with open(kept, encoding="utf-8") as f:
                return frozenset(f.read().split())
        except OSError:
            pass
    try:
        r = subprocess.run(["apt-cache", "pkgnames"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    if r.returncode != 0:
        return frozenset()
    if kept:
        try:
            os.makedirs(os.path.dirname(kept), exist_ok=True)
            tmp = f"{kept}.part{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(r.stdout)
            os.replace(tmp, kept)
        except OSError:
            pass  # (a cache that cannot be written: asked again next time)
    return frozenset(r.stdout.split())


# command-not-found's databases (sqlite: its `commands` and `packages` tables), Debian's and Ubuntu's places
CNF_DATABASES = ("/var/lib/command-not-found/commands.db", "/usr/share/command-not-found/commands.db")
PROGRAM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def cnf_packages(database: str, program: str) -> list[str]:
    """The packages command-not-found's database (`database`, read only) says ship the command `program`, its
    highest priority first; [] when it cannot be read. An architecture qualifier ("wine:i386") is kept."""
    if sqlite3 is None or not os.path.isfile(database):
        return []
    try:
        con = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        rows = con.execute("SELECT packages.name FROM commands JOIN packages ON packages.pkgID = commands.pkgID "
                           "WHERE commands.command = ? ORDER BY packages.priority DESC", (program,)).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()
    return [str(r[0]) for r in rows if isinstance(r[0], str)]


def apt_file_packages(program: str) -> list[str]:
    """The packages apt-file's Contents indexes say ship /bin, /sbin, /usr/bin or /usr/sbin's `program`; [] without
    apt-file or its indexes (apt-file update)."""
    if not shutil.which("apt-file"):
        return []
    try:
        r = subprocess.run(["apt-file", "search", "--regexp", rf"^/(usr/)?s?bin/{re.escape(program)}$"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return []
    if r.returncode != 0:
        return []
    return list(dict.fromkeys(line.split(":", 1)[0].strip() for line in r.stdout.splitlines() if ":" in line))


def apt_package_of_program(program: str, databases: Iterable[str] = CNF_DATABASES,
                           names: Optional[Iterable[str]] = None) -> Optional[str]:
    """The apt package that ships the program `program` (a command on PATH, in /usr/bin or /usr/sbin), as this
    machine's own data says: command-not-found's database (cnf_packages), else apt-file's indexes
    (apt_file_packages); only a package apt knows here (`names`: apt_package_names), never a name made up. None
    off Debian and Ubuntu, without either source (Debian installs neither by default), or when neither knows it."""
    if not PROGRAM_NAME.match(program):
        return None
    known = frozenset(names) if names is not None else apt_package_names()
    if not known:
        return None
    for found in [cnf_packages(db, program) for db in databases] + [apt_file_packages(program)]:
        for package in found:
            package = package.split(":", 1)[0]
            if package in known:
                return package
    return None


def _debian_like() -> bool:
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 14)
    except OSError:
        return False
    ids = " ".join(m.group(1) for m in re.finditer(r'^(?:ID|ID_LIKE)="?([^"\n]*)"?$', text, re.M)).split()
    return any(x in ("debian", "ubuntu") for x in ids)


class LiveELFWorld:
    """This machine: its files, its ld.so.cache, its ld.so's facts (probe_live_system), the system packages apt
    knows (system_package) and whether this user is root (`as_root`: a fix's words need no sudo)."""

    def __init__(self, system: Optional[LinuxSystem] = None) -> None:
        self.system = system or probe_live_system()
        self._facts: dict[tuple[str, int, float], ELFResult] = {}
        self._cache: Optional[dict[str, str]] = None
        self.as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self._gpu: Optional[GpuFacts] = None

    def system_package(self, soname: str) -> Optional[str]:
        return apt_package_of(soname)

    def gpu_facts(self) -> Optional[GpuFacts]:
        """This machine's NVIDIA GPUs and driver (worlds/gpu.py), read when first asked."""
        if self._gpu is None:
            self._gpu = read_gpu_facts()
        return self._gpu

    def program_package(self, program: str) -> Optional[str]:
        return apt_package_of_program(program)

    def file(self, path: str) -> Optional[ELFResult]:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not os.path.isfile(path):
            return None
        key = (f"{st.st_dev}:{st.st_ino}", st.st_size, st.st_mtime)
        got = self._facts.get(key)
        if got is None:
            got = self._facts[key] = read_elf(path)
        return got

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def file_size(self, path: str) -> Optional[int]:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def cache_lookup(self, name: str) -> Optional[str]:
        if self._cache is None:
            try:
                with open(self.system.cache_file, "rb") as f:
                    self._cache = read_ld_so_cache(f.read())
            except OSError:
                self._cache = {}
        return self._cache.get(name)

    def file_id(self, path: str) -> str:
        try:
            st = os.stat(path)
            return f"{st.st_dev}:{st.st_ino}"
        except OSError:
            return path

    def real_path(self, path: str) -> str:
        return os.path.realpath(path)


def is_elf_facts(r: Optional[ELFResult]) -> bool:
    return isinstance(r, ELFFacts)


# --- a trace's world: what the model asked the live machine, recorded, and read back -----------------------
def facts_dict(r: ELFResult) -> dict:
    """ELFFacts / ELFError as a trace's elf_file event fields."""
    if isinstance(r, ELFError):
        return {"kind": "not_elf", "error": r.kind, "message": r.message}
    return {"kind": "elf", "elf": {
        "elf_class": r.elf_class, "machine": r.machine, "elf_type": r.elf_type, "needed": list(r.needed),
        "rpath": r.rpath, "runpath": r.runpath, "soname": r.soname, "flags_1": r.flags_1, "interp": r.interp,
        "version_needs": [{"file": n.file, "versions": list(n.versions), "weak": list(n.weak)} for n in r.version_needs],
        "version_defs": list(r.version_defs)}}


def _strs(v: object) -> tuple[str, ...]:
    return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list) else ()


def facts_from_dict(d: dict) -> Optional[ELFResult]:
    """An elf_file event's fields back as ELFFacts / ELFError (None: missing, or not readable as either)."""
    if d.get("kind") == "not_elf":
        return ELFError(str(d.get("error") or "not_elf"), str(d.get("message") or "invalid ELF header"))
    e = d.get("elf")
    if d.get("kind") != "elf" or not isinstance(e, dict):
        return None

    def opt(k: str) -> Optional[str]:
        v = e.get(k)
        return v if isinstance(v, str) else None
    needs = tuple(VersionNeed(str(n.get("file", "")), _strs(n.get("versions")), _strs(n.get("weak")))
                  for n in e.get("version_needs", []) if isinstance(n, dict)) if isinstance(e.get("version_needs"), list) else ()
    ec, fl = e.get("elf_class"), e.get("flags_1")
    return ELFFacts(elf_class=ec if isinstance(ec, int) else 64, machine=str(e.get("machine") or "EM_X86_64"),
                    elf_type=str(e.get("elf_type") or "ET_DYN"), needed=_strs(e.get("needed")), rpath=opt("rpath"),
                    runpath=opt("runpath"), soname=opt("soname"), flags_1=fl if isinstance(fl, int) else 0,
                    version_needs=needs, version_defs=_strs(e.get("version_defs")), interp=opt("interp"))



_T = TypeVar("_T")


class _Answers:
    """The answers a recording world notes and a recorded world gives back, one table per question."""

    def __init__(self) -> None:
        self.files: dict[str, Optional[ELFResult]] = {}
        self.dirs: dict[str, bool] = {}
        self.cache: dict[str, Optional[str]] = {}
        self.ids: dict[str, str] = {}
        self.reals: dict[str, str] = {}
        self.copies: dict[str, list[str]] = {}
        self.packages: dict[str, Optional[str]] = {}  # soname -> the system package that ships it (apt), or None
        self.programs: dict[str, Optional[str]] = {}  # program -> the system package that ships it (apt), or None
        self.sizes: dict[str, Optional[int]] = {}  # path -> the file's size in bytes (asked of a RECORD-listed file)
        self.as_root = False
        self.gpu: Optional[GpuFacts] = None  # the machine's NVIDIA GPUs and driver, once asked (worlds/gpu.py)


def _noted(table: dict[str, _T], key: str, ask: Callable[[str], _T]) -> _T:
    """The world's answer for key, asked once and noted in table (what the trace will record)."""
    if key not in table:
        table[key] = ask(key)
    return table[key]

class RecordingELFWorld(_Answers):
    """A world that answers from another (the live machine) and keeps every answer, for the trace."""

    def __init__(self, base: ELFWorld) -> None:
        self.base = base
        self.system = base.system
        _Answers.__init__(self)
        self.as_root = bool(getattr(base, "as_root", False))

    def system_package(self, soname: str) -> Optional[str]:
        ask = getattr(self.base, "system_package", None)
        return _noted(self.packages, soname, ask if ask is not None else lambda _: None)

    def gpu_facts(self) -> Optional[GpuFacts]:
        if self.gpu is None:
            ask = getattr(self.base, "gpu_facts", None)
            self.gpu = ask() if ask is not None else None
        return self.gpu

    def program_package(self, program: str) -> Optional[str]:
        ask = getattr(self.base, "program_package", None)
        return _noted(self.programs, program, ask if ask is not None else lambda _: None)

    def file(self, path: str) -> Optional[ELFResult]:
        return _noted(self.files, path, self.base.file)

    def file_size(self, path: str) -> Optional[int]:
        return _noted(self.sizes, path, lambda p: file_size(self.base, p))

    def is_dir(self, path: str) -> bool:
        return _noted(self.dirs, path, self.base.is_dir)

    def cache_lookup(self, name: str) -> Optional[str]:
        return _noted(self.cache, name, self.base.cache_lookup)

    def file_id(self, path: str) -> str:
        return _noted(self.ids, path, self.base.file_id)

    def real_path(self, path: str) -> str:
        return _noted(self.reals, path, self.base.real_path)

    def find_copies(self, name: str, roots: list[str]) -> list[str]:
        key = name + "\0" + "\0".join(roots)
        if key not in self.copies:
            self.copies[key] = copies_on_disk(name, roots, self.system.conf_dirs)
            for c in self.copies[key]:
                self.file(c)
        return self.copies[key]

    def events(self, pid: int) -> list[dict]:
        """The elf_system and elf_file events (seq 0, tid 0) that let RecordedELFWorld answer the same."""
        base = {"pid": pid, "tid": 0, "seq": 0, "t": 0}
        s = self.system
        out: list[dict] = [dict(base, ev="elf_system", system={
            "system_dirs": list(s.system_dirs), "hwcaps": list(s.hwcaps), "lib": s.lib, "platform": s.platform,
            "machine": s.machine, "elf_class": s.elf_class, "conf_dirs": list(s.conf_dirs)}, cache=self.cache, copies=self.copies,
            real_paths=self.reals, packages=self.packages, programs=self.programs, as_root=self.as_root)]
        if self.gpu is not None:
            out[0]["gpu"] = self.gpu.as_dict()
        for p, r in self.files.items():
            ev = dict(base, ev="elf_file", path=p, **({"kind": "missing"} if r is None else facts_dict(r)))
            if p in self.ids:
                ev["file_id"] = self.ids[p]
            if r is not None and self.sizes.get(p) is not None:
                ev["size"] = self.sizes[p]
            out.append(ev)
        for p, there in self.dirs.items():
            out.append(dict(base, ev="elf_file", path=p, kind="dir" if there else "nodir"))
        return out


class RecordedELFWorld(_Answers):
    """The world of a Linux trace: the answers `dlltrace run` recorded (RecordingELFWorld.events) after the
    program ended, so a report is made without the machine it ran on. What was not recorded is missing."""

    def __init__(self, events: list[dict]) -> None:
        self.system = LinuxSystem()
        _Answers.__init__(self)
        for e in events:
            if e.get("ev") == "elf_system":
                sysd = e.get("system") if isinstance(e.get("system"), dict) else {}
                assert isinstance(sysd, dict)
                ec = sysd.get("elf_class")
                self.system = LinuxSystem(system_dirs=_strs(sysd.get("system_dirs")) or DEFAULT_SYSTEM_DIRS,
                                          hwcaps=_strs(sysd.get("hwcaps")) or ("",),
                                          lib=str(sysd.get("lib") or "lib"), platform=str(sysd.get("platform") or ""),
                                          machine=str(sysd.get("machine") or "EM_X86_64"),
                                          elf_class=ec if isinstance(ec, int) else 64,
                                          conf_dirs=_strs(sysd.get("conf_dirs")))
                for k, name in (("cache", "cache"), ("real_paths", "reals")):
                    v = e.get(k)
                    if isinstance(v, dict):
                        getattr(self, name).update({a: b for a, b in v.items() if isinstance(a, str)
                                                    and (b is None or isinstance(b, str))})
                c = e.get("copies")
                if isinstance(c, dict):
                    self.copies.update({a: list(_strs(b)) for a, b in c.items() if isinstance(a, str)})
                for k, table in (("packages", self.packages), ("programs", self.programs)):
                    pk = e.get(k)
                    if isinstance(pk, dict):
                        table.update({a: b for a, b in pk.items() if isinstance(a, str)
                                      and (b is None or isinstance(b, str))})
                self.as_root = e.get("as_root") is True
                self.gpu = gpu_facts_from_dict(e.get("gpu"))
            elif e.get("ev") == "elf_file" and isinstance(e.get("path"), str):
                p, kind = e["path"], e.get("kind")
                if kind in ("dir", "nodir"):
                    self.dirs[p] = kind == "dir"
                else:
                    self.files[p] = None if kind == "missing" else facts_from_dict(e)
                    if isinstance(e.get("file_id"), str):
                        self.ids[p] = e["file_id"]
                    if type(e.get("size")) is int and e["size"] >= 0:  # (absent in older traces)
                        self.sizes[p] = e["size"]

    def file(self, path: str) -> Optional[ELFResult]:
        return self.files.get(path)

    def file_size(self, path: str) -> Optional[int]:
        return self.sizes.get(path)

    def is_dir(self, path: str) -> bool:
        return self.dirs.get(path, False)

    def cache_lookup(self, name: str) -> Optional[str]:
        return self.cache.get(name)

    def file_id(self, path: str) -> str:
        return self.ids.get(path, path)

    def real_path(self, path: str) -> str:
        return self.reals.get(path, path)

    def find_copies(self, name: str, roots: list[str]) -> list[str]:
        return self.copies.get(name + "\0" + "\0".join(roots), [])

    def system_package(self, soname: str) -> Optional[str]:
        return self.packages.get(soname)

    def gpu_facts(self) -> Optional[GpuFacts]:
        return self.gpu

    def program_package(self, program: str) -> Optional[str]:
        return self.programs.get(program)


@dataclass
class OverlayWorld:
    """The one overlay of the ELF worlds (worlds/overlay.py is the Windows worlds'): another world with some
    files added or replaced and some ld.so.cache entries added, left as it is: a fix applied for its re-run
    (loader/linux/fixes.py), and the stand-ins of the keep-going walk (loader/linux/static.py)."""

    base: ELFWorld
    files: dict[str, ELFResult] = field(default_factory=dict)
    cache: dict[str, str] = field(default_factory=dict)
    system: LinuxSystem = field(init=False)

    def __post_init__(self) -> None:
        self.system = self.base.system

    def file(self, path: str) -> Optional[ELFResult]:
        p = posixpath.normpath(path)
        return self.files[p] if p in self.files else self.base.file(path)

    def file_size(self, path: str) -> Optional[int]:
        return None if posixpath.normpath(path) in self.files else file_size(self.base, path)

    def is_dir(self, path: str) -> bool:
        p = posixpath.normpath(path)
        return any(f.startswith(p.rstrip("/") + "/") for f in self.files) or self.base.is_dir(path)

    def cache_lookup(self, name: str) -> Optional[str]:
        return self.cache.get(name) or self.base.cache_lookup(name)

    def file_id(self, path: str) -> str:
        p = posixpath.normpath(path)
        return "overlay:" + p if p in self.files else self.base.file_id(path)

    def real_path(self, path: str) -> str:
        return path if posixpath.normpath(path) in self.files else self.base.real_path(path)

    def system_package(self, soname: str) -> Optional[str]:
        ask = getattr(self.base, "system_package", None)
        return ask(soname) if ask is not None else None

    def gpu_facts(self) -> Optional[GpuFacts]:
        ask = getattr(self.base, "gpu_facts", None)
        return ask() if ask is not None else None

    def program_package(self, program: str) -> Optional[str]:
        ask = getattr(self.base, "program_package", None)
        return ask(program) if ask is not None else None

    @property
    def as_root(self) -> bool:
        return bool(getattr(self.base, "as_root", False))
