"""The facts of an ELF file that decide how ld.so loads it, read as ld.so reads them (its header, program headers and
dynamic segment: a few small reads).

read_elf(path) returns ELFFacts (the class, the machine, DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME,
DT_FLAGS_1, the symbol-version needs and definitions) or ELFError (why ld.so would refuse the file,
with the words glibc's open_verify says: "invalid ELF header", "file too short").
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, Optional, Union

DF_1_NODEFLIB = 0x800  # elf.h: "Ignore default lib search path"
DF_1_NOOPEN = 0x40  # elf.h: "Set RTLD_NOOPEN for this object" (dlopen refuses it)
VER_FLG_WEAK = 0x2  # elf.h: "Weak version identifier" (a missing one is not an error)

ELFCLASS32 = 32
ELFCLASS64 = 64

# ld.so's own words for a file it rejects (glibc elf/dl-load.c, open_verify); "damaged": a file ld.so maps and
# then dies reading (its dynamic segment past the file's end: SIGBUS, no words of its own)
ELF_ERROR_TEXT = {
    "not_elf": "invalid ELF header",
    "truncated": "file too short",
    "unreadable": "cannot read file data",
    "damaged": "the file ends before its dynamic section (cut short: ld.so maps it and the process dies of SIGBUS)",
}


@dataclass(frozen=True)
class VersionNeed:
    """What an object needs from one DT_NEEDED file (.gnu.version_r): the file's name and the version
    names ("GLIBC_2.34", "GLIBCXX_3.4.30"); weak ones are listed apart (missing is not an error)."""

    file: str
    versions: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()


@dataclass(frozen=True)
class ELFFacts:
    """The facts ld.so reads from one ELF file."""

    elf_class: int = ELFCLASS64  # 32 or 64
    machine: str = "EM_X86_64"  # e_machine as elf.h names it
    elf_type: str = "ET_DYN"
    needed: tuple[str, ...] = ()
    rpath: Optional[str] = None  # DT_RPATH as written (colon-separated, DSTs unexpanded)
    runpath: Optional[str] = None  # DT_RUNPATH
    soname: Optional[str] = None
    flags_1: int = 0
    version_needs: tuple[VersionNeed, ...] = ()
    version_defs: tuple[str, ...] = ()  # the version names it defines (not the base entry, its own name)
    interp: Optional[str] = None  # PT_INTERP: the program's ld.so ("/lib64/ld-linux-x86-64.so.2")

    @property
    def nodeflib(self) -> bool:
        """DF_1_NODEFLIB (-z nodefaultlib): the default folders and their ld.so.cache entries are not used for
        the names this object loads."""
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def noopen(self) -> bool:
        return bool(self.flags_1 & DF_1_NOOPEN)


@dataclass(frozen=True)
class ELFError:
    """Why ld.so cannot use a file: kind is "not_elf", "truncated" or "unreadable"; message is ld.so's words."""

    kind: str
    message: str


ELFResult = Union[ELFFacts, ELFError]


def read_elf(path: str) -> ELFResult:
    """The facts of the ELF file at path, or why it is not one."""
    try:
        with open(path, "rb") as f:
            return read_elf_stream(f)
    except OSError as e:
        return ELFError("unreadable", f"cannot read file data: {e.strerror}")


def read_elf_bytes(data: bytes) -> ELFResult:
    return read_elf_stream(io.BytesIO(data))


def _header_check(head: bytes) -> Optional[ELFError]:
    # ld.so reads the header first (open_verify): too short for one, or no magic
    if len(head) < 4 or head[:4] != b"\x7fELF":
        if len(head) < 52:  # shorter than the smallest ELF header (32-bit)
            return ELFError("truncated", ELF_ERROR_TEXT["truncated"])
        return ELFError("not_elf", ELF_ERROR_TEXT["not_elf"])
    if len(head) < (64 if head[4:5] == b"\x02" else 52):
        return ELFError("truncated", ELF_ERROR_TEXT["truncated"])
    return None


def read_elf_stream(f: BinaryIO) -> ELFResult:
    """The facts ld.so reads, read as ld.so reads them: the ELF header, the program headers, PT_INTERP, the dynamic
    segment (PT_DYNAMIC) and what its tags point at (the string table, DT_VERNEED, DT_VERDEF), found through the
    PT_LOAD segments -- a few small reads, never the section headers nor the whole file (pyelftools, used before,
    cost 17 ms a file of a big import: tests/test_elf_reader.py checks this reader against it)."""
    head = f.read(64)
    bad = _header_check(head)
    if bad is not None:
        return bad
    raw_class = {1: ELFCLASS32, 2: ELFCLASS64}.get(head[4])
    if raw_class is None:
        return ELFError("not_elf", ELF_ERROR_TEXT["not_elf"])
    cut = _program_headers_cut(f, head, raw_class)
    if cut is not None:
        return cut
    try:
        return _read_dynamic(f, head, raw_class)
    except (struct.error, ValueError, IndexError, OverflowError, MemoryError, OSError):
        # ld.so reads the identification and e_machine first: a file of the other class is skipped for that
        # alone, whatever follows (a 64-bit file with EI_CLASS patched to 32 is "wrong ELF class")
        return ELFFacts(elf_class=raw_class, machine=_raw_machine(head, raw_class))


class _Damaged(Exception):
    """The dynamic segment (or what it points at) lies past the end of the file: ld.so maps it and dies reading it."""


PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 10, 14, 15, 29
DT_FLAGS_1, DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFB, 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
_ET_NAMES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
MAX_DYNAMIC = 1 << 20  # bytes of a dynamic segment read (a real one: a few hundred)
MAX_STRING = 1 << 16  # bytes of one string read (a DT_RUNPATH of many folders: a few hundred)


def _read_dynamic(f: BinaryIO, head: bytes, elf_class: int) -> ELFResult:
    e = "<" if head[5] != 2 else ">"
    is64 = elf_class == ELFCLASS64
    size = f.seek(0, 2)
    e_type, e_machine = struct.unpack_from(e + "HH", head, 16)
    if is64:
        phoff, = struct.unpack_from(e + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
    else:
        phoff, = struct.unpack_from(e + "I", head, 28)
        phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dyn_at = dyn_size = interp_at = interp_size = None
    for i in range(phnum):
        at = i * phentsize
        if is64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(e + "IIQQQQ", table, at)
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(e + "IIIII", table, at)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC and dyn_at is None:
            dyn_at, dyn_size = p_offset, p_filesz
        elif p_type == PT_INTERP and interp_at is None:
            interp_at, interp_size = p_offset, p_filesz

    def read(at: int, n: int) -> bytes:
        if at < 0 or n < 0 or at + n > size:
            raise _Damaged()
        f.seek(at)
        return f.read(n)

    def offset_of(vaddr: int) -> int:
        for v, o, n in loads:
            if v <= vaddr < v + n:
                return o + (vaddr - v)
        raise ValueError("address in no PT_LOAD segment")

    machine = _EM_NAMES.get(e_machine) or f"EM_{e_machine}"
    kind = _ET_NAMES.get(e_type, f"ET_{e_type}")
    interp = None
    try:
        if interp_at is not None and interp_size:
            interp = read(interp_at, min(interp_size, 4096)).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        if dyn_at is None:
            return ELFFacts(elf_class=elf_class, machine=machine, elf_type=kind, interp=interp)
        dyn = read(dyn_at, min(dyn_size or 0, MAX_DYNAMIC))
    except _Damaged:
        return ELFError("damaged", ELF_ERROR_TEXT["damaged"])
    fmt, width = (e + "qQ", 16) if is64 else (e + "iI", 8)
    tags: list[tuple[int, int]] = []
    for at in range(0, len(dyn) - width + 1, width):
        tag, val = struct.unpack_from(fmt, dyn, at)
        if tag == 0:  # DT_NULL
            break
        tags.append((tag, val))
    one = dict(tags)  # (each tag's last entry, as ld.so's elf_get_dynamic_info keeps it)
    needed_at = [v for t, v in tags if t == DT_NEEDED]
    # (the strings are read where they are, a small window each: a big library's dynamic string table holds every
    # symbol name -- TensorFlow's is tens of MB -- and only a few of them are facts here)
    str_at = offset_of(one[DT_STRTAB]) if DT_STRTAB in one else -1
    str_size = one.get(DT_STRSZ, 0)

    def string(at: int) -> str:
        if str_at < 0 or at >= str_size:
            raise ValueError("a string past the string table")
        out = b""
        while True:
            piece = read(str_at + at + len(out), min(4096, str_size - at - len(out), size - (str_at + at + len(out))))
            end = piece.find(b"\0")
            if end >= 0:
                return (out + piece[:end]).decode("utf-8", "surrogateescape")
            out += piece
            if not piece or len(out) > MAX_STRING:
                raise ValueError("a string without its end")

    try:
        needed = tuple(string(v) for v in needed_at)
        rpath = string(one[DT_RPATH]) if DT_RPATH in one else None
        runpath = string(one[DT_RUNPATH]) if DT_RUNPATH in one else None
        soname = string(one[DT_SONAME]) if DT_SONAME in one else None
    except _Damaged:
        return ELFError("damaged", ELF_ERROR_TEXT["damaged"])
    flags_1 = one.get(DT_FLAGS_1, 0)
    needs: list[VersionNeed] = []
    defs: list[str] = []
    try:
        if DT_VERNEED in one:
            at = offset_of(one[DT_VERNEED])
            for _ in range(min(one.get(DT_VERNEEDNUM, 0), 4096)):
                vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack(e + "HHIII", read(at, 16))
                strong: list[str] = []
                weak: list[str] = []
                aux = at + vn_aux
                for _ in range(min(vn_cnt, 4096)):
                    _hash, vna_flags, _other, vna_name, vna_next = struct.unpack(e + "IHHII", read(aux, 16))
                    (weak if vna_flags & VER_FLG_WEAK else strong).append(string(vna_name))
                    if not vna_next:
                        break
                    aux += vna_next
                needs.append(VersionNeed(string(vn_file), tuple(strong), tuple(weak)))
                if not vn_next:
                    break
                at += vn_next
        if DT_VERDEF in one:
            at = offset_of(one[DT_VERDEF])
            for _ in range(min(one.get(DT_VERDEFNUM, 0), 4096)):
                _v, vd_flags, _ndx, vd_cnt, _hash, vd_aux, vd_next = struct.unpack(e + "HHHHIII", read(at, 20))
                if not vd_flags & 0x1 and vd_cnt:  # (VER_FLG_BASE: the file's own name)
                    vda_name, _vda_next = struct.unpack(e + "II", read(at + vd_aux, 8))
                    defs.append(string(vda_name))
                if not vd_next:
                    break
                at += vd_next
    except _Damaged:
        return ELFError("damaged", ELF_ERROR_TEXT["damaged"])
    return ELFFacts(elf_class=elf_class, machine=machine, elf_type=kind, needed=needed, rpath=rpath, runpath=runpath,
                    soname=soname, flags_1=flags_1, version_needs=tuple(needs), version_defs=tuple(defs), interp=interp)


def _program_headers_cut(f: BinaryIO, head: bytes, elf_class: int) -> Optional[ELFError]:
    """ld.so reads the program headers (e_phoff, e_phnum x e_phentsize) before anything else: a file that
    ends before them is "cannot read file data" (a copy cut short), whatever pyelftools makes of it."""
    little = head[5] != 2
    try:
        if elf_class == ELFCLASS64:
            phoff, = struct.unpack_from("<Q" if little else ">Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH" if little else ">HH", head, 54)
        else:
            phoff, = struct.unpack_from("<I" if little else ">I", head, 28)
            phentsize, phnum = struct.unpack_from("<HH" if little else ">HH", head, 42)
    except struct.error:
        return ELFError("truncated", ELF_ERROR_TEXT["truncated"])
    size = f.seek(0, 2)
    f.seek(0)
    if phoff + phentsize * phnum > size:
        return ELFError("unreadable", ELF_ERROR_TEXT["unreadable"])
    return None


_EM_NAMES = {3: "EM_386", 62: "EM_X86_64", 183: "EM_AARCH64", 40: "EM_ARM", 243: "EM_RISCV", 8: "EM_MIPS",
             21: "EM_PPC64", 22: "EM_S390"}


def _raw_machine(head: bytes, elf_class: int) -> str:
    order: Literal["big", "little"] = "big" if head[5] == 2 else "little"
    em = int.from_bytes(head[18:20], order)
    return _EM_NAMES.get(em, f"EM_{em}")
