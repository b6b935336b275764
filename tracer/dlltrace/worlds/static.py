"""The static world: a package's own files (a folder, a single DLL's folder or a wheel read from its
zip) on top of a model of a Windows 10/11 x64 machine with a Python installed, for `dlltrace deps`
and `dlltrace check`, which explain a DLL without running anything, on any OS.

Where each fact comes from:
- the target's files: their PE facts (pe.py), read only when the simulator asks for the file; a
  wheel member is inflated alone (nothing else of the wheel is unpacked), and read as it inflates
  (MemberView: the PE reader's few reads are answered from a window of chunks, never the whole
  member in memory), and its facts are kept in a cache keyed by the member's CRC-32 and size
  (FactsCache), so a second run reads no 249 MB torch_cpu.dll again;
- the system: on Linux and macOS the names of data/windows-system.json (a vanilla System32, and the same
  names in SysWOW64 for a 32-bit (win32) target, whose System32 is SysWOW64 (rules.rule_wow64_redirect), with
  no versions and no exports: such a file is "there, loads, imports unknown"), its KnownDLLs and
  the built-in API-set table (apisets.py); on Windows the live machine (worlds/live.LiveWorld over
  the real System32: not run on real Windows here);
- the Python: a python.org-style install at C:\\PythonXY (python.exe, pythonXY.dll, python3.dll,
  vcruntime140.dll, vcruntime140_1.dll: what its installer puts next to python.exe), the
  site-packages tree below it at Lib\\site-packages, where the wheel's files go.

Static mode goes on past a failure (a stand-in for a missing DLL) through worlds/overlay.OverlayWorld, over
this world, and asks the same simulator again.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import io
import json
import dataclasses
import os
import re
import struct
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Mapping, Optional, Union

from dlltrace import winpath
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.packages import normalize_dist  # noqa: F401  (diagnosis/static.py's, static_elf.py's)
from dlltrace.classify import system_document
from dlltrace.model import FileFacts, PEError, PEFacts
from dlltrace.pe import pe_facts_from_bytes, read_pe_facts
from dlltrace.worlds.world import SystemInfo
from dlltrace.limits import limits
from dlltrace.pkgloaders import MAX_LOADER_FILE, LoaderRule, is_loader_file, loaders_from_files
from dlltrace.worlds.live import LiveWorld
from dlltrace.worlds.factscache import CACHE_FORMAT, FactsCache, default_cache_dir  # noqa: F401  (static's API)

PE_SUFFIXES = (".dll", ".pyd", ".exe")


def python_home(python: str) -> str:
    """C:\\Python311 for "3.11"."""
    return "C:\\Python" + python.replace(".", "")


def site_packages(python: str) -> str:
    return python_home(python) + "\\Lib\\site-packages"


def builtin_system() -> SystemInfo:
    """The modelled Windows 10/11 x64 machine (data/windows-system.json, apisets-builtin.json)."""
    doc = system_document()
    return SystemInfo(windows="C:\\Windows", machine="x64", known_dlls=tuple(doc["known_dlls"]),
                      version="Windows 10/11 x64 (built-in model)")


# the Visual C++ 2015-2022 Redistributable (x64)'s DLLs in System32: not part of Windows, installed by most
# machines' programs, and a requirement torch states itself ("Microsoft Visual C++ Redistributable is not
# installed", torch/__init__.py); `deps` and `check` model a Windows that has it unless told not to
VC_RUNTIME_DLLS = ("concrt140.dll", "msvcp140.dll", "msvcp140_1.dll", "msvcp140_2.dll", "msvcp140_atomic_wait.dll",
                   "msvcp140_codecvt_ids.dll", "vccorlib140.dll", "vcruntime140.dll", "vcruntime140_1.dll",
                   "vcruntime140_threads.dll", "vcomp140.dll", "vcamp140.dll", "mfc140.dll", "mfc140u.dll",
                   "mfcm140.dll", "mfcm140u.dll")


def python_files(python: str) -> list[str]:
    """The DLLs and the exe of the modelled Python install (their imports are not modelled)."""
    home = python_home(python)
    xy = python.replace(".", "")
    return [f"{home}\\python.exe", f"{home}\\python{xy}.dll", f"{home}\\python3.dll",
            f"{home}\\vcruntime140.dll", f"{home}\\vcruntime140_1.dll"]


# --- the target's files -----------------------------------------------------------------------------
@dataclass
class TargetFile:
    """One file of the target: its Windows path in the model, where it comes from (a wheel member or
    a host path), and how to read its facts."""

    path: str  # the Windows path in the model
    source: str  # the wheel member name, or the host path
    read: Callable[[], FileFacts]
    size: int = 0  # bytes to read (a wheel member's compressed size), for prefetch's order


def _facts(path: str, res: Union[PEFacts, PEError]) -> FileFacts:
    if isinstance(res, PEError):
        return FileFacts(path=path, error="access_denied" if res.kind == "unreadable" else "not_pe")
    return FileFacts(path=path, pe=res)


def _member_parts(member: str) -> list[str]:
    """A member's name as pip reads it: `\\` a separator too, `.` and `..` resolved."""
    parts: list[str] = []
    for part in member.replace("\\", "/").split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return parts


def site_relative(member: str) -> Optional[str]:
    """Where in site-packages pip puts a wheel member, "/"-separated (<name>.data/platlib/ and purelib/ members
    there too, without that prefix), None for a member of another scheme (data, scripts, headers): the name a
    package's loaders (pkgloaders.py) know a file by."""
    parts = _member_parts(member)
    if len(parts) > 2 and parts[0].endswith(".data"):
        return "/".join(parts[2:]) if parts[1] in ("platlib", "purelib") else None
    return "/".join(parts) or None


def is_data_member(member: str) -> bool:
    """A member of one of the wheel's <name>.data/ schemes: pip installs every other member first and these after
    (pip's _install_wheel: the root scheme's files, then the data schemes'), so of two members pip puts at one
    place, a .data one is the file installed (in the zip's order among themselves: the last one)."""
    parts = _member_parts(member)
    return len(parts) > 2 and parts[0].endswith(".data")


def pip_installs(members: list[ZipMember], place: Callable[[str], str]) -> list[ZipMember]:
    """The members whose bytes pip leaves installed, in the zip's order: of those pip puts at one place (`place`
    of a member's name), the one it writes last (is_data_member's after every other, each in the zip's order)."""
    last: dict[str, int] = {}
    for i in sorted(range(len(members)), key=lambda i: is_data_member(members[i].filename)):
        last[place(members[i].filename)] = i
    kept = set(last.values())
    return [m for i, m in enumerate(members) if i in kept]


def wheel_member_path(member: str, python: str) -> str:
    """Where pip puts a wheel member: site-packages, or for <name>.data/<scheme>/... the scheme's folder."""
    parts = _member_parts(member)
    if len(parts) > 2 and parts[0].endswith(".data"):
        scheme, rest = parts[1], "\\".join(parts[2:])
        if scheme == "data":
            return python_home(python) + "\\" + rest
        if scheme == "scripts":
            return python_home(python) + "\\Scripts\\" + rest
        if scheme == "headers":  # (pip's headers scheme of a plain install: <prefix>\Include\<dist>, no DLL search)
            return python_home(python) + "\\Include\\" + parts[0][:-len(".data")].split("-")[0] + "\\" + rest
        return site_packages(python) + "\\" + rest  # purelib, platlib
    return site_packages(python) + "\\" + "\\".join(parts)


@dataclass(frozen=True)
class ZipMember:
    """One entry of a zip's central directory (what reading it alone needs)."""

    filename: str
    method: int  # 0 stored, 8 deflated
    flags: int
    CRC: int
    compress_size: int
    file_size: int
    header_offset: int  # of its local file header
    end: int = -1  # where its data must end by: the next member's local header, or the central directory


_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"

# The bounds of reading a zip (docs/limits.md) are limits.py's zip_members, zip_central_directory,
# zip_member_bytes and zip_inflate: what a hostile wheel can cost. Every one exceeded is a ZipError (deps and
# check: one line, exit 2, "not a readable wheel"); `dlltrace --limit zip_members=N ...` raises one.
INFLATE_CHUNK = 1 << 20  # inflated a chunk at a time


class ZipError(Exception):
    """A zip this reader cannot read (the caller says so in one line)."""


class ZipLimitError(ZipError):
    """A zip past one of the bounds above (not damaged, perhaps: too big for dlltrace to read)."""


class InflateBudget:
    """The bytes one wheel's members may inflate to in all (limits.py zip_inflate): a zip of many members
    each inflating to gigabytes costs bounded time. Shared by the threads prefetch reads with."""

    def __init__(self, limit: Optional[int] = None):
        self.limit = limits().zip_inflate if limit is None else limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int, member: str) -> None:
        with self._lock:
            self.used += n
            if self.used > self.limit:
                raise ZipLimitError(f"its members inflate to more than {self.limit:,} bytes in all (dlltrace's "
                                    f"limit for one wheel; {member} passed it)")


def member_name_problem(name: str) -> Optional[str]:
    """Why pip would refuse to install a member of this name (None: it would not): pip normalizes the
    member's path and refuses one that lands outside the folder it installs into (pip's
    operations/install/wheel.py, assert_no_path_traversal). The Windows reading of the name: both `/` and
    `\\` separate, so a drive (`C:/...`, `C:x`), a UNC or absolute path (`/x`, `\\x`) and a `..` that
    climbs above the wheel's root are refused. (A drive-relative `C:x` that pip would keep inside on drive
    C: is refused too.)"""
    p = name.replace("\\", "/")
    if p.startswith("/"):
        return "an absolute path"
    if len(p) >= 2 and p[1] == ":" and p[0].isascii() and p[0].isalpha():
        return "a drive letter"
    depth = 0
    for part in p.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return "a `..` that leaves the install folder"
        elif part not in ("", "."):
            depth += 1
    return rule_data_scheme(name)


# the schemes a wheel's <name>.data/ folder may hold (pip's models/scheme.py SCHEME_KEYS), as pip spells them
PIP_SCHEMES = ("data", "headers", "platlib", "purelib", "scripts")


def rule_data_scheme(name: str) -> Optional[str]:
    """Why pip refuses a member under a top folder ending in `.data` (pip's operations/install/wheel.py,
    make_data_scheme_file: an InstallationError, the whole wheel not installed): one with no scheme folder and
    path under it ("Unexpected file"), or a scheme pip does not know, in any other case than its own
    ('PLATLIB': "Unknown scheme key used in ..."; seen with pip 23.2). A folder entry (a name ending in `/`) is
    skipped, as pip skips them. None: pip installs it."""
    if name.endswith("/") or not name.split("/", 1)[0].endswith(".data"):
        return None
    parts = _member_parts(name)
    if len(parts) < 3:
        return "no scheme folder under its .data folder (pip wants <name>.data/<scheme>/<path>)"
    if parts[1] not in PIP_SCHEMES:
        return f"an unknown .data scheme {parts[1]!r} (pip knows {', '.join(PIP_SCHEMES)})"
    return None


def zip_members(path: Union[str, os.PathLike], suffixes: tuple[str, ...] = PE_SUFFIXES,
                keep: Optional[Callable[[str], bool]] = None) -> list[ZipMember]:
    """The members of a zip whose names end with `suffixes` (any case), read straight from its central
    directory: zipfile.ZipFile builds an object for every member (11 236 in the torch wheel: 0.1-0.2 s),
    this only for the few PE files. Zip64 is read; a multi-disk zip is refused.

    Nothing declared is trusted (a hostile wheel: docs/limits.md): the central directory must lie within
    the file, before its end record, and be at most zip_central_directory bytes of at most zip_members
    entries; every entry must fit in it (its zip64 extra field too); no two members may share a local
    header, each member's header and data must fit before the next one's (no overlapping members, no
    data past the file), a listed member must declare at most zip_member_bytes; and every member's name,
    listed or not, must be one pip installs (member_name_problem). Anything else is a ZipError."""
    ends = tuple(x.lower().encode() for x in suffixes)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            cd, cd_offset = _central_directory(f, size)
    except (struct.error, OverflowError, ValueError) as exc:  # (a field this reader did not bound: still one line)
        raise ZipError(f"a damaged zip ({exc})") from None
    bound = limits()
    listed: list[tuple[bytes, int, int, int, int, int, int]] = []
    offsets: list[int] = []
    p = 0
    unpack = struct.unpack_from
    while p < len(cd):
        if p + 46 > len(cd) or cd[p:p + 4] != _CENTRAL:
            raise ZipError(f"a damaged central directory (at {cd_offset + p})")
        if len(offsets) >= bound.zip_members:
            raise ZipLimitError(f"more than {bound.zip_members:,} members (dlltrace's limit zip_members; raise it with "
                                f"dlltrace --limit zip_members=N)")
        flags, method = unpack("<2H", cd, p + 8)
        crc, csize, usize, n, m, k = unpack("<3I3H", cd, p + 16)
        (offset,) = unpack("<I", cd, p + 42)
        if p + 46 + n + m + k > len(cd):
            raise ZipError(f"a damaged central directory (an entry past its end, at {cd_offset + p})")
        raw = cd[p + 46:p + 46 + n]
        name = raw.decode("utf-8" if flags & 0x800 else "cp437", "surrogateescape")
        if 0xFFFFFFFF in (csize, usize, offset):
            usize, csize, offset = _zip64_extra(cd[p + 46 + n:p + 46 + n + m], usize, csize, offset, name)
        why = member_name_problem(name)
        if why is not None:
            raise ZipError(f"its member {name!r} has {why}: pip refuses to install such a wheel")
        offsets.append(offset)
        if (keep(name) if keep is not None else raw.lower().endswith(ends)):
            listed.append((raw, flags, method, crc, csize, usize, offset))
        p += 46 + n + m + k
    bounds = sorted(set(offsets))
    if len(bounds) != len(offsets):
        raise ZipError("two members share one local header (overlapping members)")
    bounds = sorted({*bounds, cd_offset})  # (kept sorted for bisect: a header past the directory is refused below)
    out: list[ZipMember] = []
    for raw, flags, method, crc, csize, usize, offset in listed:
        name = raw.decode("utf-8" if flags & 0x800 else "cp437", "surrogateescape")
        end = bounds[bisect.bisect_right(bounds, offset)] if offset < cd_offset else cd_offset
        if offset + 30 + len(raw) + csize > end:
            raise ZipError(f"{name}: its {csize:,} bytes at {offset} do not fit before the next member or the "
                           f"central directory (a damaged or overlapping member)")
        if usize > bound.zip_member_bytes:
            raise ZipLimitError(f"{name}: declares {usize:,} bytes, more than dlltrace reads of a member "
                                f"({bound.zip_member_bytes:,}, zip_member_bytes: a PE file cannot be larger)")
        if method == 0 and usize != csize:
            raise ZipError(f"{name}: stored, with a size of {usize:,} bytes that is not its {csize:,}")
        out.append(ZipMember(name, method, flags, crc, csize, usize, offset, end))
    return out


def _central_directory(f: BinaryIO, size: int) -> tuple[bytes, int]:
    """The central directory's bytes and offset, its declared place and size checked against the file."""
    tail_at = max(0, size - (1 << 16) - 22)
    f.seek(tail_at)
    tail = f.read()
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise ZipError("no end-of-central-directory record (not a zip file)")
    disk, cd_disk, _, total, cd_size, cd_offset, _ = struct.unpack_from("<4H2IH", tail, at + 4)
    if disk or cd_disk:
        raise ZipError("a multi-disk zip")
    before = tail_at + at  # (the central directory ends before its end record)
    if total == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        loc = at - 20
        if loc < 0 or tail[loc:loc + 4] != _EOCD64_LOCATOR:
            raise ZipError("a zip64 archive without its locator")
        (eocd64_at,) = struct.unpack_from("<Q", tail, loc + 8)
        if eocd64_at + 56 > tail_at + loc:
            raise ZipError("a damaged zip64 end record (past the end of the file)")
        f.seek(eocd64_at)
        rec = f.read(56)
        if len(rec) < 56 or rec[:4] != b"PK\x06\x06":
            raise ZipError("a damaged zip64 end record")
        total, cd_size, cd_offset = struct.unpack_from("<3Q", rec, 32)
        before = eocd64_at
    if cd_offset > before or cd_size > before - cd_offset:
        raise ZipError(f"a damaged end record: a central directory of {cd_size:,} bytes at {cd_offset:,} does not "
                       f"fit in the file ({size:,} bytes)")
    if cd_size > limits().zip_central_directory:
        raise ZipLimitError(f"a central directory of {cd_size:,} bytes (dlltrace's limit zip_central_directory: "
                            f"{limits().zip_central_directory:,})")
    f.seek(cd_offset)
    cd = f.read(cd_size)
    if len(cd) != cd_size:
        raise ZipError("the central directory is cut short")
    return cd, cd_offset


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int, name: str) -> tuple[int, int, int]:
    """The zip64 sizes and offset of an entry whose 32-bit field says 0xFFFFFFFF, from its extra field."""
    p = 0
    while p + 4 <= len(extra):
        tag, length = struct.unpack_from("<2H", extra, p)
        if p + 4 + length > len(extra):
            break
        if tag == 1:
            vals = list(struct.unpack_from(f"<{length // 8}Q", extra, p + 4))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if offset == 0xFFFFFFFF and vals:
                offset = vals.pop(0)
            if 0xFFFFFFFF in (usize, csize, offset):
                break
            return usize, csize, offset
        p += 4 + length
    raise ZipError(f"{name}: a damaged zip64 extra field (its sizes are missing or cut short)")


def read_member(path: Union[str, os.PathLike], m: ZipMember, magic: bytes = b"",
                budget: Optional[InflateBudget] = None) -> bytes:
    """One member's bytes, inflated alone (zlib), a chunk at a time (INFLATE_CHUNK), its CRC-32 checked.
    `magic`: what the member must start with for its caller (b"MZ": a PE); one that does not is read no
    further, and its first bytes are returned as they are (unchecked: all the caller needs is that it is
    not one). Its data must lie where zip_members placed it (m.end) and inflate to its declared size and
    no more; `budget` counts what is inflated. Raises ZipError."""
    if m.flags & 1:
        raise ZipError(f"{m.filename}: encrypted")
    if m.method not in (0, 8):
        raise ZipError(f"{m.filename}: compression method {m.method} (only stored and deflate are read)")
    with open(path, "rb") as f:
        f.seek(m.header_offset)
        head = f.read(30)
        if len(head) < 30 or head[:4] != _LOCAL:
            raise ZipError(f"{m.filename}: no local file header at {m.header_offset}")
        n, k = struct.unpack_from("<2H", head, 26)
        data_at = m.header_offset + 30 + n + k
        end = m.end if m.end >= 0 else os.fstat(f.fileno()).st_size
        if data_at + m.compress_size > end:
            raise ZipError(f"{m.filename}: its data runs past the next member or the central directory")
        left = m.compress_size
        out = io.BytesIO()  # (its buffer becomes the bytes returned: no copy)
        crc = 0
        d = zlib.decompressobj(-15) if m.method == 8 else None
        f.seek(data_at)
        checked = not magic
        while True:
            pending = b""
            if d is not None and d.unconsumed_tail:
                pending = d.unconsumed_tail
            elif left > 0:
                pending = f.read(min(INFLATE_CHUNK, left))
                if not pending:
                    raise ZipError(f"{m.filename}: cut short")
                left -= len(pending)
            elif d is None or d.eof:
                break
            try:  # (all its data read: what the inflater still holds, then its end)
                chunk = d.decompress(pending, INFLATE_CHUNK) if d is not None else pending
            except zlib.error as exc:
                raise ZipError(f"{m.filename}: {exc}") from None
            if not pending and not chunk and not (d is not None and d.eof):
                raise ZipError(f"{m.filename}: cut short (its deflate stream does not end)")
            if out.tell() + len(chunk) > m.file_size:
                raise ZipError(f"{m.filename}: inflates past its declared {m.file_size:,} bytes")
            if budget is not None:
                budget.take(len(chunk), m.filename)
            out.write(chunk)
            crc = zlib.crc32(chunk, crc)
            if not checked and out.tell() >= len(magic):
                checked = True
                if not out.getvalue().startswith(magic):  # (not a PE: no need to inflate the rest)
                    return out.getvalue()
            if d is not None and d.eof:
                break
    if out.tell() != m.file_size or crc != m.CRC:
        raise ZipError(f"{m.filename}: bad CRC-32 or size")
    return out.getvalue()


# --- a member read as it inflates ---------------------------------------------------------------------------
VIEW_CHUNK = 1 << 20  # a member's bytes are kept in chunks of this many
VIEW_CACHE = 8  # chunks kept (the last used): 8 MiB a member
VIEW_CHECKPOINT = 4  # chunks between two copies of the inflater's state (a read behind starts from the last one)
VIEW_INPUT = 1 << 18  # compressed bytes read at a time


class _Inflater:
    """One pass over a member's data: the inflater (None: stored), where its next input is, what it holds unread,
    and where its next output lands."""

    def __init__(self, d: "Optional[zlib._Decompress]", at: int, out: int) -> None:
        self.d, self.at, self.out, self.tail = d, at, out, b""


class MemberView:
    """A wheel member's bytes, inflated as the PE reader asks for them (pe.py reads a few of them: the headers, the
    import and export directories, the load config, the version resource), never the whole member in memory: a
    249 MB torch_cpu.dll costs VIEW_CACHE chunks and a copy of the inflater's state every VIEW_CHECKPOINT chunks
    (32 KiB of window each), whatever its size.

    It behaves as the member's bytes for what pe.py and pefile do with them: len(), slices, find(). The main pass
    goes forward only, checking the CRC-32 as it goes; a read behind it, in a chunk no longer kept, inflates
    again from the last checkpoint before it (the inflater's state copied there), counted in the wheel's
    InflateBudget like the first pass. finish() inflates the rest and checks the CRC-32 and size, as read_member
    does; every error is a ZipError, kept in `error` when it is met inside the PE reader (which would take it
    for a damaged file) and raised by finish()."""

    def __init__(self, path: Union[str, os.PathLike], m: ZipMember, budget: Optional[InflateBudget] = None) -> None:
        if m.flags & 1:
            raise ZipError(f"{m.filename}: encrypted")
        if m.method not in (0, 8):
            raise ZipError(f"{m.filename}: compression method {m.method} (only stored and deflate are read)")
        self.m, self.budget = m, budget
        self.f = open(path, "rb")
        try:
            self.f.seek(m.header_offset)
            head = self.f.read(30)
            if len(head) < 30 or head[:4] != _LOCAL:
                raise ZipError(f"{m.filename}: no local file header at {m.header_offset}")
            n, k = struct.unpack_from("<2H", head, 26)
            data_at = m.header_offset + 30 + n + k
            end = m.end if m.end >= 0 else os.fstat(self.f.fileno()).st_size
            if data_at + m.compress_size > end:
                raise ZipError(f"{m.filename}: its data runs past the next member or the central directory")
        except BaseException:
            self.f.close()
            raise
        self.data_end = data_at + m.compress_size
        self.size = m.file_size
        self.main = _Inflater(zlib.decompressobj(-15) if m.method == 8 else None, data_at, 0)
        self.crc = 0
        self.chunks: dict[int, bytes] = {}  # index -> bytes, the last used last
        self.checkpoints: list[tuple[int, "Optional[zlib._Decompress]", int]] = [(0, self.main.d and self.main.d.copy(), data_at)]
        self.side: Optional[_Inflater] = None  # the pass a read behind the main one goes on with
        self.error: Optional[ZipError] = None
        self.last, self.last_at = b"", -1  # the chunk read last, and where it starts (most reads are in it)

    def close(self) -> None:
        self.f.close()
        self.chunks.clear()
        self.checkpoints.clear()

    # --- inflating ---
    def _produce(self, st: _Inflater, n: int) -> bytes:
        """Up to n more bytes of output of the pass st (fewer only at the end of the member's data)."""
        out: list[bytes] = []
        got = 0
        while got < n:
            if st.d is None:  # stored
                want = min(n - got, self.data_end - st.at)
                if want <= 0:
                    break
                self.f.seek(st.at)
                piece = self.f.read(want)
                if not piece:
                    raise ZipError(f"{self.m.filename}: cut short")
                st.at += len(piece)
            else:
                if st.d.eof:
                    break
                if st.tail:
                    pending = st.tail
                else:
                    pending = b""
                    if st.at < self.data_end:
                        self.f.seek(st.at)
                        pending = self.f.read(min(VIEW_INPUT, self.data_end - st.at))
                        if not pending:
                            raise ZipError(f"{self.m.filename}: cut short")
                        st.at += len(pending)
                try:
                    piece = st.d.decompress(pending, n - got)
                except zlib.error as exc:
                    raise ZipError(f"{self.m.filename}: {exc}") from None
                st.tail = st.d.unconsumed_tail
                if not pending and not piece and not st.d.eof:
                    raise ZipError(f"{self.m.filename}: cut short (its deflate stream does not end)")
            if self.budget is not None:
                self.budget.take(len(piece), self.m.filename)
            out.append(piece)
            got += len(piece)
        return b"".join(out)

    def _main_chunk(self) -> bytes:
        """The main pass's next chunk, its CRC-32 counted; a checkpoint after every VIEW_CHECKPOINT chunks."""
        st = self.main
        piece = self._produce(st, VIEW_CHUNK)
        if st.out + len(piece) > self.size:
            raise ZipError(f"{self.m.filename}: inflates past its declared {self.size:,} bytes")
        self.crc = zlib.crc32(piece, self.crc)
        st.out += len(piece)
        i = st.out // VIEW_CHUNK
        if len(piece) == VIEW_CHUNK and i % VIEW_CHECKPOINT == 0 and st.out < self.size:
            self.checkpoints.append((i, st.d.copy() if st.d is not None else None, st.at - len(st.tail)))
        return piece

    def _keep(self, i: int, piece: bytes) -> bytes:
        self.chunks[i] = piece
        while len(self.chunks) > VIEW_CACHE:
            del self.chunks[next(iter(self.chunks))]
        return piece

    def _chunk(self, i: int) -> bytes:
        piece = self.chunks.pop(i, None)
        if piece is not None:
            self.chunks[i] = piece  # (the last used last)
            return piece
        if i * VIEW_CHUNK >= self.main.out:  # ahead: the main pass goes on to it
            while True:
                at = self.main.out // VIEW_CHUNK
                piece = self._main_chunk()
                if not piece:
                    return b""
                self._keep(at, piece)
                if at >= i:
                    return piece
        st = self.side  # behind: a side pass, from where it is when that is near, else from a checkpoint
        if st is None or not (st.out <= i * VIEW_CHUNK < st.out + VIEW_CHECKPOINT * VIEW_CHUNK):
            j, d, at = max(c for c in self.checkpoints if c[0] <= i)
            st = self.side = _Inflater(d.copy() if d is not None else None, at, j * VIEW_CHUNK)
        while True:
            at = st.out // VIEW_CHUNK
            piece = self._produce(st, VIEW_CHUNK)
            st.out += len(piece)
            if not piece:
                return b""
            self._keep(at, piece)
            if at >= i:
                return piece

    def _bytes(self, start: int, stop: int) -> bytes:
        at = self.last_at
        if at <= start and stop <= at + VIEW_CHUNK and at >= 0:  # (in the chunk read last: 60 000 export names)
            return self.last[start - at:stop - at]
        stop = min(stop, self.size)
        if start >= stop:
            return b""
        try:
            parts = []
            for i in range(start // VIEW_CHUNK, (stop - 1) // VIEW_CHUNK + 1):
                c = self._chunk(i)
                self.last, self.last_at = c, i * VIEW_CHUNK
                parts.append(c[max(0, start - i * VIEW_CHUNK):stop - i * VIEW_CHUNK])
            return b"".join(parts) if len(parts) > 1 else parts[0]
        except ZipError as exc:
            self.error = self.error or exc
            raise

    # --- what pe.py and pefile do with bytes ---
    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: Union[int, slice]) -> Union[int, bytes]:
        if isinstance(key, slice):
            start, stop = key.start, key.stop
            if key.step is None and type(start) is int and type(stop) is int and 0 <= start <= stop:
                return self._bytes(start, stop)
            start, stop, step = key.indices(self.size)
            data = self._bytes(start, stop) if stop > start else b""
            return data if step == 1 else data[::step]
        i = key + self.size if key < 0 else key
        if not 0 <= i < self.size:
            raise IndexError("index out of range")
        return self._bytes(i, i + 1)[0]

    def find(self, sub: bytes, start: int = 0, end: Optional[int] = None) -> int:
        at = self.last_at
        if len(sub) == 1 and at >= 0 and at <= start and end is not None and start <= end <= at + VIEW_CHUNK:
            hit = self.last.find(sub, start - at, end - at)  # (in the chunk read last)
            if hit >= 0 or end <= at + len(self.last):
                return hit + at if hit >= 0 else -1
        start, end, _ = slice(start, end).indices(self.size)
        if len(sub) != 1:  # (pefile's "Rich" in the headers: a small range)
            at = self._bytes(start, end).find(sub)
            return at + start if at >= 0 else -1
        at = start
        while at < end:  # (a NUL after a name: found in the chunk the name is in, nearly always)
            i = at // VIEW_CHUNK
            stop = min(end, (i + 1) * VIEW_CHUNK)
            self._bytes(at, at + 1)
            hit = self.last.find(sub, at - i * VIEW_CHUNK, stop - i * VIEW_CHUNK)
            if hit >= 0:
                return hit + i * VIEW_CHUNK
            at = stop
        return -1

    def finish(self) -> None:
        """Inflate what the main pass has not, its CRC-32 and size checked (a ZipError when they are wrong, or one
        was met before)."""
        if self.error is not None:
            raise self.error
        self.chunks.clear()
        self.checkpoints.clear()
        self.side = None
        self.last, self.last_at = b"", -1
        while self._main_chunk():
            pass
        if self.main.d is not None and not self.main.d.eof:
            raise ZipError(f"{self.m.filename}: cut short (its deflate stream does not end)")
        if self.main.out != self.size or self.crc != self.m.CRC:
            raise ZipError(f"{self.m.filename}: bad CRC-32 or size")


def member_pe_facts(path: Union[str, os.PathLike], m: ZipMember, budget: Optional[InflateBudget] = None
                    ) -> Union[PEFacts, PEError]:
    """A wheel member's PE facts, read as it inflates (MemberView: never the whole member in memory), its CRC-32
    checked; one that does not start with MZ is read no further (not a PE). Raises ZipError."""
    view = MemberView(path, m, budget)
    try:
        res = pe_facts_from_bytes(view)  # type: ignore[arg-type]
        if view.error is not None:
            raise view.error
        if view.size < 2 or view[:2] == b"MZ":
            view.finish()
        return res
    finally:
        view.close()


WHEEL_SUFFIXES = PE_SUFFIXES + (".py", ".pth")  # what wheel_files and wheel_loaders read: one zip_members for both


def wheel_files(wheel: Union[str, os.PathLike], python: str, cache: FactsCache,
                members: Optional[list[ZipMember]] = None) -> tuple[list[TargetFile], str]:
    """The PE files of a wheel (by suffix, from the zip's central directory, or of `members`, its listing:
    nothing is decompressed here) and its site-packages folder in the model. Raises OSError / ZipError. What
    its members inflate to, read by the simulator, is bounded in all (InflateBudget, zip_inflate)."""
    out: list[TargetFile] = []
    budget = InflateBudget()
    pe = [m for m in (zip_members(wheel) if members is None else members)
          if not m.filename.endswith("/") and m.filename.lower().endswith(PE_SUFFIXES)]
    for info in pip_installs(pe, lambda n: winpath.key(wheel_member_path(n, python))):  # (one file a place)
        path = wheel_member_path(info.filename, python)
        out.append(TargetFile(path, info.filename, _member_reader(wheel, info, path, cache, budget),
                              info.compress_size))
    return out, site_packages(python)


def _member_reader(wheel: Union[str, os.PathLike], info: ZipMember, path: str,
                   cache: FactsCache, budget: Optional[InflateBudget] = None) -> Callable[[], FileFacts]:
    def read() -> FileFacts:
        key = cache.key(info)
        hit = cache.get(key)
        if hit is not None:
            return FileFacts(path=path, pe=hit)
        try:  # (a PE or not: one that does not start with MZ is read no further, and is "not a PE")
            res = member_pe_facts(wheel, info, budget)
        except ZipLimitError as exc:  # (the wheel past a bound: not "damaged", perhaps; docs/limits.md)
            raise DlltraceError(f"{os.fspath(wheel)}: not read: {exc}", EXIT_USAGE) from None
        except (OSError, ZipError) as exc:  # a damaged member: the wheel is corrupt (pip would not install it)
            raise DlltraceError(f"{os.fspath(wheel)}: its member {info.filename} cannot be read ({exc}): the wheel is "
                                "damaged; download it again", EXIT_USAGE) from None
        if isinstance(res, PEFacts):
            cache.put(key, res)
        return _facts(path, res)
    return read


@dataclass(frozen=True)
class WheelMetadata:
    """What a wheel's .dist-info says of it: its distribution's name (normalized, PEP 503), the distributions it
    requires (Requires-Dist without an `extra` marker, normalized), and the line RECORD lists each member on."""

    dist: str = ""
    requires: tuple[str, ...] = ()
    record_lines: Mapping[str, int] = dataclasses.field(default_factory=dict)


_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def parse_requires_dist(value: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The distribution a Requires-Dist value names ("torch (==2.5.1)", "gdown>=4.7.3; extra == 'gdown'"), or None
    for one not installed with the wheel: one only an extra requires, and, with `env` (marker_environment: the
    Python and platform the wheel is for), one whose marker does not hold there (rule_marker_holds: pyzbar's
    `enum34; python_version=="2.7"`, torch's `nvidia-cuda-runtime-cu12; platform_system == "Linux"` in its Windows
    wheel). A marker it cannot decide counts as holding (docs/static.md)."""
    req, _, marker = value.partition(";")
    if env is None and re.search(r"\bextra\s*==", marker):
        return None
    if env is not None and marker.strip() and not rule_marker_holds(marker, env):  # (its `extra` is "": no extra)
        return None
    m = _REQ_NAME.match(req)
    return normalize_dist(m.group(1)) if m else None


PYTHON_FLOOR = "python_version_floor"  # (marker_environment's key: the least Python a wheel is for, its own unknown)


def marker_environment(python: str, platform: str, machine: str = "", floor: str = "") -> dict[str, str]:
    """The PEP 508 marker variables of the Python a wheel is for ("3.11", from its tag), on its platform ("windows",
    "linux"; "any" names none of the platform's) and machine (the wheel's: x64, x86, arm64, x86_64, aarch64): those
    rule_marker_holds can decide; any other is not known (its comparisons hold). `floor`, when `python` is not known
    (an abi3 wheel, cp38-abi3: any Python from 3.8 on; a py3-none one): the least Python it is for, PYTHON_FLOOR; a
    comparison of python_version is then decided only when it is so for every Python from there on."""
    env = {"implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    if re.fullmatch(r"\d+\.\d+t?", python):
        env["python_version"] = python.rstrip("t")
    elif re.fullmatch(r"\d+(\.\d+)?t?", floor):
        env[PYTHON_FLOOR] = floor.rstrip("t")
    if platform == "windows":
        env.update(sys_platform="win32", platform_system="Windows", os_name="nt")
        machines = {"x64": "AMD64", "x86": "x86", "arm64": "ARM64"}
    elif platform == "linux":
        env.update(sys_platform="linux", platform_system="Linux", os_name="posix")
        machines = {"x64": "x86_64", "x86_64": "x86_64", "aarch64": "aarch64", "x86": "i686", "i686": "i686"}
    else:
        machines = {}
    if machine.lower() in machines:
        env["platform_machine"] = machines[machine.lower()]
    return env


_MARKER_TOKEN = re.compile(r"\s*(?:(?P<s>'[^']*'|\"[^\"]*\")|(?P<op>===|==|!=|<=|>=|~=|<|>|\(|\)|not\s+in\b|in\b|and\b|or\b)"
                           r"|(?P<var>[A-Za-z_][A-Za-z0-9_.]*))")
_VERSION_VARIABLES = frozenset({"python_version", "python_full_version", "implementation_version"})


def rule_marker_holds(marker: str, env: Mapping[str, str]) -> bool:
    """Whether a Requires-Dist's environment marker (PEP 508: `python_version < "3.8" and sys_platform == "win32"`)
    holds for `env` (marker_environment). A comparison of a variable `env` does not know, or one it cannot decide (a
    version's ~=, a string's <), is unknown; `and` is false when one side is, `or` true when one side is; unknown
    at the end, or a marker it cannot read, holds: the requirement counts as the wheel's, as before markers were
    read."""
    tokens: list[tuple[str, str]] = []
    pos, text = 0, marker.strip()
    while pos < len(text):
        m = _MARKER_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return True
        kind = m.lastgroup or ""
        tokens.append((kind, " ".join(m.group(kind).split())))
        pos = m.end()
    at = 0

    def peek() -> tuple[str, str]:
        return tokens[at] if at < len(tokens) else ("", "")

    def value() -> tuple[str, Optional[str]]:  # (the variable's name or "", its value; None: not known)
        nonlocal at
        kind, tok = peek()
        at += 1
        if kind == "s":
            return "", tok[1:-1]
        if kind == "var":
            return tok, env.get(tok)
        raise ValueError(tok)

    def compare() -> Optional[bool]:
        nonlocal at
        if peek() == ("op", "("):
            at += 1
            r = either()
            if peek() != ("op", ")"):
                raise ValueError("(")
            at += 1
            return r
        (lname, left), (kind, op) = value(), peek()
        if kind != "op" or op in ("(", ")", "and", "or"):
            raise ValueError(op)
        at += 1
        rname, right = value()
        if (left is None) != (right is None) and "python_version" in (lname, rname) and PYTHON_FLOOR in env:
            return _from_floor(op if left is None else _FLIPPED.get(op, op), left or right or "", env[PYTHON_FLOOR])
        if left is None or right is None:
            return None
        if op in ("in", "not in"):
            return (left in right) == (op == "in")
        if lname in _VERSION_VARIABLES or rname in _VERSION_VARIABLES:
            a, b = _version(left), _version(right)
            if a is not None and b is not None and op in ("==", "!=", "<", "<=", ">", ">="):
                n = max(len(a), len(b))
                a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
                return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            return None
        if op in ("==", "===", "!="):
            return (left == right) == (op != "!=")
        return None

    def joined(part: Callable[[], Optional[bool]], word: str, wins: bool) -> Optional[bool]:
        """`part` (word part)*: `wins` when one part is (False for and, True for or), unknown when one is, else not."""
        nonlocal at
        r = part()
        while peek() == ("op", word):
            at += 1
            other = part()
            r = wins if r is wins or other is wins else None if r is None or other is None else not wins
        return r

    def both() -> Optional[bool]:
        return joined(compare, "and", False)

    def either() -> Optional[bool]:
        return joined(both, "or", True)

    try:
        result = either()
    except ValueError:
        return True
    return result is not False if at == len(tokens) else True


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # (`"3.9" < python_version` is `python_version > "3.9"`)


def _from_floor(op: str, literal: str, floor: str) -> Optional[bool]:
    """`python_version <op> literal` for every Python from `floor` on: True when it holds for each, False when for
    none ("2.7" == of a cp38-abi3 wheel), None when for some ("3.10" >= of it: a requirement pip installs on 3.12)."""
    a, b = _version(floor), _version(literal)
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    x, v = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    never, always = {"<": x >= v, "<=": x > v, "==": x > v, "!=": False, ">": False, ">=": False}, \
        {"<": False, "<=": False, "==": False, "!=": x > v, ">": x > v, ">=": x >= v}
    if op not in never:
        return None
    return False if never[op] else True if always[op] else None


def _version(text: str) -> Optional[tuple[int, ...]]:
    """"3.8" -> (3, 8); None for anything but dotted numbers ("3.8.*", "3.12.0rc1")."""
    return tuple(int(x) for x in text.split(".")) if re.fullmatch(r"\d+(\.\d+)*", text) else None


def wheel_metadata(wheel: Union[str, os.PathLike], env: Optional[Mapping[str, str]] = None) -> WheelMetadata:
    """The wheel's METADATA (Name, Requires-Dist: with `env`, marker_environment, those whose markers hold there)
    and RECORD (the line of each member), read from the zip. A wheel without them gives an empty WheelMetadata.
    Raises OSError / ZipError."""
    def top_dist_info(name: str) -> bool:
        parts = name.split("/")
        return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in ("METADATA", "RECORD")

    members = {m.filename.split("/")[1]: m for m in zip_members(wheel, keep=top_dist_info) if m.file_size <= (64 << 20)}
    dist, requires, lines = "", [], {}
    if "METADATA" in members:
        import email.parser

        text = read_member(wheel, members["METADATA"]).decode("utf-8", "replace")
        msg = email.parser.HeaderParser().parsestr(text.split("\n\n", 1)[0] + "\n\n")
        dist = normalize_dist(msg.get("Name", "") or "")
        for v in msg.get_all("Requires-Dist") or []:
            r = parse_requires_dist(str(v), env)
            if r and r not in requires:
                requires.append(r)
    if "RECORD" in members:
        import csv

        text = read_member(wheel, members["RECORD"]).decode("utf-8", "replace")
        for n, row in enumerate(csv.reader(text.splitlines()), 1):
            if row and row[0] not in lines:
                lines[row[0]] = n
    if not dist:
        dist = normalize_dist(os.path.basename(os.fspath(wheel)).split("-", 1)[0])
    return WheelMetadata(dist, tuple(requires), lines)


# (a version part may end in letters: OpenSSL 1.0.2's libssl.so.1.0.2k, grafted by auditwheel into pymssql.libs)
_ELF_NAME = re.compile(r"\.so(\.[0-9][0-9A-Za-z]*)*$")


def is_elf_name(member: str) -> bool:
    """Whether a wheel member is named as a shared object is (x.so, libx.so.1, libssl.so.1.0.2k), not a folder."""
    return bool(_ELF_NAME.search(member)) and not member.endswith("/")


def unpack_linux_site(wheel: str, site: str) -> int:
    """A Linux wheel's shared objects, and the files its packages' loaders are read from (what loads one on demand:
    pkgloaders.py), written under `site` where pip puts them (`<name>.data/purelib` and `platlib` members too, after
    the others, as pip writes them: of two at one place, pip's is the last); its central directory read once. A member
    named as a shared object that is not an ELF object is written as its first bytes only (a dlopen of it fails, as
    check fails it; a zip bomb's zeros named x.so are neither inflated into memory nor written out); a loader's text
    is read as wheel_loaders reads it (at most 1 MiB). The number of members left out (in pip's data, scripts or
    headers schemes). ZipError or OSError for a wheel that cannot be read; DlltraceError (EXIT_USAGE) for a member
    whose path after its scheme pip refuses."""
    def is_text(member: str) -> bool:  # (a <name>.data/platlib/ member: by where pip puts it)
        name = site_relative(member)
        return name is not None and name.endswith((".py", ".pth")) and is_loader_file(name)

    budget = InflateBudget()
    elsewhere = 0
    for m in sorted(zip_members(wheel, keep=lambda n: is_elf_name(n) or is_text(n)),
                    key=lambda m: is_data_member(m.filename)):
        parts = m.filename.split("/")
        if parts[0].endswith(".data"):  # (pip's schemes: purelib and platlib are site-packages)
            if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                elsewhere += 1
                continue
            parts = parts[2:]
            # (pip checks the path after its scheme: `x.data/platlib/../../y.so` stays in the wheel but lands above
            # site-packages, outside the folder written)
            why = member_name_problem("/".join(parts))
            if why is not None:
                raise DlltraceError(f"{wheel}: its member {m.filename!r} has {why}: pip refuses to install such a wheel",
                                    EXIT_USAGE)
        if is_text(m.filename):
            if m.file_size > (1 << 20):
                continue
            data = read_member(wheel, m, budget=budget)[:MAX_LOADER_FILE]
        else:
            data = read_member(wheel, m, magic=b"\x7fELF", budget=budget)
        dest = os.path.join(site, *parts)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)
    return elsewhere


def wheel_elf_members(wheel: Union[str, os.PathLike]) -> list[str]:
    """The shared objects of a Linux wheel (members named *.so or *.so.N...: extensions and the libraries
    auditwheel grafts into <pkg>.libs), in the zip's order; of two pip puts at one place, the one it leaves
    (pip_installs). Raises OSError / ZipError."""
    # (one member a place, the one pip leaves there; a place by its case: a Linux file system's names)
    return [m.filename for m in pip_installs(zip_members(wheel, keep=is_elf_name), lambda n: wheel_member_path(n, "3"))]


def wheel_loaders(wheel: Union[str, os.PathLike], listing: Optional[list[ZipMember]] = None) -> list[LoaderRule]:
    """How the wheel's packages make their DLLs reachable (pkgloaders.py), read from its __init__.py and .pth
    members (`listing`: the zip's, when read already; a member larger than 1 MiB, or unreadable, is not read).
    Raises OSError / ZipError."""
    # (.dll, .so.N: a row whose evidence is a library's place, not a text: rule_qt_plugin_folders's QtCore)
    kinds = (".py", ".pth", ".dll", ".so.5", ".so.6")
    members: dict[str, ZipMember] = {}  # (by where pip puts it: a <name>.data/platlib/ member is known as its rest)
    for m in sorted(zip_members(wheel, kinds) if listing is None else listing, key=lambda m: is_data_member(m.filename)):
        name = site_relative(m.filename) if m.filename.lower().endswith(kinds) else None
        if name is not None and is_loader_file(name):
            members[name] = m  # (of two at one place, the one pip writes last: is_data_member)

    def read(name: str) -> Optional[str]:
        m = members.get(name)
        if m is None or m.file_size > (1 << 20):
            return None
        try:
            return read_member(wheel, m)[:MAX_LOADER_FILE].decode("utf-8", "replace")
        except (OSError, ZipError):
            return None
    return loaders_from_files(read, list(members))


@dataclass(frozen=True)
class RecordEntry:
    """A native file an installed distribution's RECORD lists (PEP 376/627: `path,algorithm=digest,size`): whose it
    is, and what pip wrote there."""

    dist: str  # the distribution, as its .dist-info folder spells it ("numpy")
    version: str
    path: str  # as RECORD lists it, relative to the site folder, "/"-separated
    host: str  # where that is on this disk
    digest: str  # "sha256=<urlsafe base64, no padding>", "" when RECORD gives none
    size: Optional[int] = None  # the size RECORD gives, None when none


MAX_RECORD_BYTES = 16 << 20  # a RECORD bigger than this is not read (torch's is 2 MB)


def record_rows(text: str) -> list[list[str]]:
    """A RECORD's rows, read as the spec says it is written: CSV, Python's default dialect (a path with a comma or
    a quote in it is quoted, its quotes doubled)."""
    import csv

    try:
        return [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error:  # (a NUL, a quote left open at the end: what reads before it is kept)
        out: list[list[str]] = []
        for line in text.split("\n"):
            try:
                out += [row for row in csv.reader([line]) if row]
            except csv.Error:
                continue
        return out


def read_record(folder: str) -> Optional[str]:
    """The text of a .dist-info folder's RECORD; one cut at MAX_RECORD_BYTES loses its last, partial line (a cut
    path or digest would be read as another file's, or a wrong hash); None when it cannot be read."""
    try:
        with open(os.path.join(folder, "RECORD"), "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(data) > MAX_RECORD_BYTES:
        data = data[:data.rfind(b"\n", 0, MAX_RECORD_BYTES) + 1]
    return data.decode("utf-8", "replace")


def record_relative_path(path: str) -> Optional[str]:
    """A RECORD path as "/"-separated parts under the site folder (the spec allows `\\` on Windows), or None for
    one that is not: absolute (`/x`, `\\x`, `\\\\server`), with a drive (`C:`), climbing out with `..`."""
    p = path.replace("\\", "/")
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if not parts or p.startswith("/") or ":" in parts[0] or ".." in parts:
        return None
    return "/".join(parts)


def folder_records(site: Union[str, os.PathLike], under: Optional[str] = None) -> list[RecordEntry]:
    """The .dll/.pyd/.exe files the RECORD of each *.dist-info in a host site-packages folder lists (`under`: only
    those in that host folder and below), in the order RECORD lists them: who owns each, and its hash."""
    site = os.path.abspath(os.fspath(site))
    try:
        infos = sorted(e for e in os.listdir(site) if e.endswith(".dist-info"))
    except OSError:
        return []
    inside = os.path.normcase(os.path.abspath(under)) + os.sep if under else None
    real_site = os.path.normcase(os.path.realpath(site)) + os.sep
    out: list[RecordEntry] = []
    for info in infos:
        name, _, version = info[: -len(".dist-info")].partition("-")
        text = read_record(os.path.join(site, info))
        if text is None:
            continue
        for row in record_rows(text):
            path = record_relative_path(row[0].strip())
            if path is None or not path.lower().endswith(PE_SUFFIXES):
                continue
            host = os.path.normpath(os.path.join(site, *path.split("/")))
            if inside is not None and not os.path.normcase(host).startswith(inside):
                continue
            if not os.path.normcase(os.path.realpath(host)).startswith(real_site):
                continue  # (a link out of the folder: not a file of this environment to judge, nor to read)
            digest = row[1].strip() if len(row) > 1 else ""
            size = row[2].strip() if len(row) > 2 else ""
            out.append(RecordEntry(name, version, path, host, digest if "=" in digest else "",
                                   int(size) if size.isdigit() else None))
    return out


def installed_wheel_files(folder: str) -> frozenset[str]:
    """The .whl files at the top of a host site-packages folder that a distribution's RECORD there lists."""
    out: set[str] = set()
    try:
        infos = [e for e in os.listdir(folder) if e.endswith(".dist-info")]
    except OSError:
        return frozenset()
    for info in infos:
        text = read_record(os.path.join(folder, info))
        for row in record_rows(text or ""):
            path = record_relative_path(row[0].strip())
            if path is not None and "/" not in path and path.lower().endswith(".whl"):
                out.add(path)
    return frozenset(out)


_DIGESTS: dict[tuple[str, int, int, str], Optional[bool]] = {}  # (host, size, mtime, digest) -> the answer


def record_digest_matches(entry: RecordEntry) -> Optional[bool]:
    """Whether the file on disk is the one RECORD describes: a size other than RECORD's says no at once, else its
    digest, read in 1 MiB pieces (never the whole file in memory), once a run for a file. None when RECORD gives no
    digest of an algorithm hashlib has (of a fixed size: not shake_*), or the file is not one to read: not a
    regular file (a FIFO, a device: `-> /dev/zero`), outside the site folder through a link, larger than a PE image
    can be (limits.py record_hash_bytes), unreadable."""
    import stat

    algo, _, want = entry.digest.partition("=")
    algo = algo.lower()
    if not want or algo not in hashlib.algorithms_guaranteed or algo.startswith("shake_"):
        return None
    try:
        fd = os.open(entry.host, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):  # (ValueError: a RECORD path with a NUL in it)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limits().record_hash_bytes:
            return None
        key = (entry.host, st.st_size, st.st_mtime_ns, entry.digest)
        if key in _DIGESTS:
            return _DIGESTS[key]
        if entry.size is not None and entry.size != st.st_size:
            _DIGESTS[key] = False
            return False
        h = hashlib.new(algo)
        with os.fdopen(fd, "rb", closefd=False) as f:
            for piece in iter(lambda: f.read(1 << 20), b""):
                h.update(piece)
        _DIGESTS[key] = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii") == want.rstrip("=")
        return _DIGESTS[key]
    except OSError:
        return None
    finally:
        os.close(fd)


def site_interpreter(site: Union[str, os.PathLike]) -> str:
    """The Python whose installed site-packages `site` is (on this disk), so that its own pip reinstalls there: a
    Windows layout, PREFIX\\Lib\\site-packages (a venv's PREFIX\\Scripts\\python.exe, else PREFIX\\python.exe), or
    a POSIX one, PREFIX/lib/pythonX.Y/site-packages (PREFIX/bin/python3, PREFIX/bin/python); "" when it is neither,
    or that file is not there (a tree unpacked for a look, a wheel's contents)."""
    site = os.path.abspath(os.fspath(site))
    parent = os.path.dirname(site)
    if os.path.basename(site).lower() not in ("site-packages", "dist-packages"):
        return ""
    if os.path.basename(parent).lower() == "lib":
        prefix = os.path.dirname(parent)
        tries = [os.path.join(prefix, "Scripts", "python.exe"), os.path.join(prefix, "python.exe")]
    elif re.fullmatch(r"python\d+(\.\d+)?t?", os.path.basename(parent)) and \
            os.path.basename(os.path.dirname(parent)) in ("lib", "lib64"):
        prefix = os.path.dirname(os.path.dirname(parent))
        tries = [os.path.join(prefix, "bin", "python3"), os.path.join(prefix, "bin", "python")]
    else:
        return ""
    return next((t for t in tries if os.path.isfile(t)), "")


def distribution_files_beside(folder: Union[str, os.PathLike], virtual_site: str, cache: Optional[FactsCache] = None
                              ) -> tuple[list[TargetFile], list[RecordEntry]]:
    """For a package folder in an installed site-packages (its parent holds the *.dist-info): the native files the
    distributions owning its files install outside it, as their RECORDs list them (numpy's numpy.libs\\*.dll,
    which delvewheel puts beside numpy\\ and numpy's __init__ adds with os.add_dll_directory), each at
    virtual_site + its RECORD path; and those distributions' RECORD entries, wherever they are (a listed file gone
    is one of them). Both empty when no RECORD there lists a file of the folder."""
    inside = os.path.normcase(os.path.abspath(os.fspath(folder))) + os.sep
    entries = folder_records(os.path.dirname(os.path.abspath(os.fspath(folder))))
    owners = {e.dist for e in entries if os.path.normcase(e.host).startswith(inside)}
    mine = [e for e in entries if e.dist in owners]
    files: list[TargetFile] = []
    seen: set[str] = set()
    for e in mine:
        if os.path.normcase(e.host).startswith(inside) or not os.path.isfile(e.host) or not _regular(e.host):
            continue
        path = winpath.join(virtual_site, *e.path.split("/"))
        if winpath.key(path) not in seen:
            seen.add(winpath.key(path))
            files.append(TargetFile(path, e.host, _host_reader(e.host, path, cache), _size(e.host)))
    return files, mine


def folder_files(root: Union[str, os.PathLike], virtual_root: str, cache: Optional[FactsCache] = None
                 ) -> list[TargetFile]:
    """The PE files under a host folder, each at virtual_root + its relative path (their facts read through
    `cache`, by each file's identity: FactsCache.host_facts)."""
    out: list[TargetFile] = []
    root = os.fspath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.lower().endswith(PE_SUFFIXES):
                continue
            host = os.path.join(dirpath, fn)
            if not _regular(host):  # (a FIFO or a device named x.dll: reading it would wait forever)
                continue
            rel = os.path.relpath(host, root).replace(os.sep, "\\")
            path = winpath.join(virtual_root, rel)
            out.append(TargetFile(path, host, _host_reader(host, path, cache), _size(host)))
    return out


def _regular(host: str) -> bool:
    """Whether a host file is a regular file (a link followed), which reading ends: not a FIFO, a socket, a device."""
    import stat

    try:
        return stat.S_ISREG(os.stat(host).st_mode)
    except (OSError, ValueError):
        return True  # (unreadable: the reader says so, as for any file it cannot read)


def _size(host: str) -> int:
    try:
        return os.path.getsize(host)
    except OSError:
        return 0


def _host_reader(host: str, path: str, cache: Optional[FactsCache]) -> Callable[[], FileFacts]:
    if cache is None:
        return lambda: _facts(path, read_pe_facts(host))
    return lambda: _facts(path, cache.host_facts(host))


# --- the world --------------------------------------------------------------------------------------
class StaticWorld:
    """A World: the target's files, the modelled Python, and the system (the built-in model, or
    `system_world`, a live world on Windows). The simulator never knows which it has."""

    def __init__(self, system: SystemInfo, files: Iterable[TargetFile], python: str,
                 system_names: Optional[Iterable[str]] = None, system_world: Optional[object] = None,
                 vc_runtime: bool = True):
        self.system = system
        self.python = python
        self.targets: dict[str, TargetFile] = {}
        self._facts: dict[str, Optional[FileFacts]] = {}
        self._dirs: set[str] = set()
        self._by_name: dict[str, list[str]] = {}  # base name (folded) -> the paths of that name, in order added
        # folder's key -> (its name's rank, when added, path) of each file in it (files_in: no scan per lookup)
        self._by_folder: dict[str, list[tuple[int, int, str]]] = {}
        self._folder_sorted: dict[str, list[str]] = {}  # files_in's answers, dropped when the folder gains a file
        self._name_rank: dict[str, int] = {}  # base name -> when it was first added
        self._added = 0  # files indexed so far
        self._by_shape: Optional[dict[str, list[str]]] = None  # digit-less shape -> names (close_files), made when first asked
        self._system_world = system_world
        # SysWOW64, what a 32-bit process's System32 opens (rules.rule_wow64_redirect): the built-in model gives it
        # the names of System32 (a vanilla 64-bit Windows ships a 32-bit copy of nearly every one, and the x86
        # VC++ redistributable puts its DLLs there), facts unknown as System32's are
        self._syswow64 = winpath.key(winpath.join(system.windows, "SysWOW64"))
        for d in (system.windows, system.system32, system.system16, self._syswow64):
            self._add_dir(d)
        for f in files:
            self._add(f.path, f)
        for p in python_files(python):
            self._add(p, None)
        self.vc_runtime = vc_runtime  # the VC++ runtime is in System32 (VC_RUNTIME_DLLS)
        self._system_names = frozenset(n.lower() for n in (
            system_names if system_names is not None else system_document()["system32"])) | frozenset(
            VC_RUNTIME_DLLS if vc_runtime else ())
        if system_world is None:
            for n in self._system_names:
                self._index(winpath.join(system.system32, n))

    def _add_dir(self, folder: str) -> None:
        k = winpath.key(folder)
        while k and k not in self._dirs:
            self._dirs.add(k)
            parent = winpath.key(winpath.dirname(k))
            if parent == k:
                break
            k = parent

    def _add(self, path: str, target: Optional[TargetFile]) -> None:
        k = winpath.key(path)
        if target is not None:
            self.targets[k] = target
        else:
            self._facts[k] = FileFacts(path=path)  # the modelled Python's files: there, imports unknown
        self._index(path)
        self._add_dir(winpath.dirname(path))

    def _index(self, path: str) -> None:
        """`path` in the indexes by name, by folder and (once made) by shape: each lookup is one dict read."""
        name = winpath.fold(winpath.basename(path))
        paths = self._by_name.get(name)
        if paths is None:
            paths = self._by_name[name] = []
            if self._by_shape is not None:
                self._by_shape.setdefault(winpath.name_shape(name), []).append(name)
            self._name_rank[name] = len(self._name_rank)
        paths.append(path)
        folder = winpath.key(winpath.dirname(path))
        self._by_folder.setdefault(folder, []).append((self._name_rank[name], self._added, path))
        self._added += 1
        self._folder_sorted.pop(folder, None)

    def place_copy(self, path: str, of: TargetFile) -> TargetFile:
        """A copy of a target file at `path` (a package copies it there before it runs it: pkgloaders.py)."""
        copy = TargetFile(path, of.source, lambda: dataclasses.replace(of.read(), path=path), of.size)
        self._add(path, copy)
        return copy

    def target_file(self, path: str) -> Optional[TargetFile]:
        return self.targets.get(winpath.key(path))

    def file(self, path: str) -> Optional[FileFacts]:
        k = winpath.key(path)
        if k in self._facts:
            return self._facts[k]
        t = self.targets.get(k)
        if t is not None:
            facts: Optional[FileFacts] = t.read()
        elif winpath.key(winpath.dirname(k)) in (winpath.key(self.system.system32), self._syswow64):
            if self._system_world is not None:
                facts = self._system_world.file(path)  # type: ignore[attr-defined]
            else:
                facts = FileFacts(path=path) if winpath.basename(k) in self._system_names else None
        else:
            facts = self._system_world.file(path) if self._system_world is not None else None  # type: ignore[attr-defined]
        self._facts[k] = facts
        return facts

    def prefetch(self, paths: Iterable[str], workers: int = 2) -> None:
        """Read the facts of these target files now, `workers` at a time (zlib inflates without the GIL,
        so a wheel's members decompress in parallel), largest first."""
        todo = [winpath.key(p) for p in paths if winpath.key(p) in self.targets and winpath.key(p) not in self._facts]
        if len(todo) < 2 or workers < 2:
            return
        from concurrent.futures import ThreadPoolExecutor

        todo.sort(key=lambda k: -self.targets[k].size)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for k, facts in zip(todo, pool.map(lambda k: self.targets[k].read(), todo)):
                self._facts[k] = facts

    def is_dir(self, path: str) -> bool:
        if winpath.key(path) in self._dirs:
            return True
        return bool(self._system_world is not None and self._system_world.is_dir(path))  # type: ignore[attr-defined]

    def files_named(self, name: str) -> list[str]:
        return list(self._by_name.get(winpath.fold(name), ()))

    def close_files(self, name: str) -> list[str]:
        if self._by_shape is None:  # (names by their digit-less shape, made once: no scan of every name per lookup)
            self._by_shape = {}
            for n in self._by_name:
                self._by_shape.setdefault(winpath.name_shape(n), []).append(n)
        same_shape = self._by_shape.get(winpath.name_shape(name), ())
        return sorted((self._by_name[n][0] for n in same_shape if winpath.close_name(n, name)), key=str.lower)

    def files_in(self, folder: str) -> list[str]:
        """The files in `folder`: by when their name was first added, then by when each was added (the order of
        the scan of every name this index replaces)."""
        k = winpath.key(folder)
        done = self._folder_sorted.get(k)
        if done is None:
            done = self._folder_sorted[k] = [p for _, _, p in sorted(self._by_folder.get(k, ()))]
        return list(done)


def live_system_world() -> Optional[object]:
    """On Windows, the live machine's world for everything that is not the target's (not run on real
    Windows here); None elsewhere."""
    if sys.platform != "win32":
        return None

    windows = os.environ.get("SystemRoot", "C:\\Windows")
    return LiveWorld(SystemInfo(windows=windows))
