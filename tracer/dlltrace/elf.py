"""The facts of an ELF file that decide how ld.so loads it, read with pyelftools.

read_elf(path) returns ELFFacts (the class, the machine, DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME,
DT_FLAGS_1, the symbol-version needs and definitions) or ELFError (why ld.so would refuse the file,
with the words glibc's open_verify says: "invalid ELF header", "file too short").
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, Optional, Union

DF_1_NODEFLIB = 0x800  # elf.h: "Ignore default lib search path"
DF_1_NOOPEN = 0x40  # elf.h: "Set RTLD_NOOPEN for this object" (dlopen refuses it)
VER_FLG_WEAK = 0x2  # elf.h: "Weak version identifier" (a missing one is not an error)

ELFCLASS32 = 32
ELFCLASS64 = 64

# ld.so's own words for a file it rejects (glibc elf/dl-load.c, open_verify)
ELF_ERROR_TEXT = {
    "not_elf": "invalid ELF header",
    "truncated": "file too short",
    "unreadable": "cannot read file data",
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
    from elftools.elf.dynamic import DynamicSection, DynamicSegment
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

    head = f.read(64)
    bad = _header_check(head)
    if bad is not None:
        return bad
    f.seek(0)
    raw_class = {1: ELFCLASS32, 2: ELFCLASS64}.get(head[4])
    if raw_class is None:
        return ELFError("not_elf", ELF_ERROR_TEXT["not_elf"])
    cut = _program_headers_cut(f, head, raw_class)
    if cut is not None:
        return cut
    try:
        elf = ELFFile(f)
        needed: list[str] = []
        rpath = runpath = soname = None
        flags_1 = 0
        dyn: Any = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
        if dyn is None:
            dyn = next((s for s in elf.iter_segments() if isinstance(s, DynamicSegment)), None)
        if dyn is not None:
            for tg in dyn.iter_tags():
                t: Any = tg
                tag = t.entry.d_tag
                if tag == "DT_NEEDED":
                    needed.append(t.needed)
                elif tag == "DT_RPATH":
                    rpath = t.rpath
                elif tag == "DT_RUNPATH":
                    runpath = t.runpath
                elif tag == "DT_SONAME":
                    soname = t.soname
                elif tag == "DT_FLAGS_1":
                    flags_1 = int(t.entry.d_val)
        segs: list[Any] = list(elf.iter_segments())
        interp = next((seg.get_interp_name() for seg in segs if seg["p_type"] == "PT_INTERP"), None)
        needs: list[VersionNeed] = []
        defs: list[str] = []
        for s in elf.iter_sections():
            if isinstance(s, GNUVerNeedSection):
                for vn, aux in s.iter_versions():
                    strong: list[str] = []
                    weak: list[str] = []
                    for a in aux:
                        (weak if a["vna_flags"] & VER_FLG_WEAK else strong).append(a.name)
                    needs.append(VersionNeed(str(vn.name), tuple(strong), tuple(weak)))
            elif isinstance(s, GNUVerDefSection):
                for vd, aux in s.iter_versions():
                    if vd["vd_flags"] & 0x1:  # VER_FLG_BASE: the file's own name
                        continue
                    names = [a.name for a in aux]
                    if names:
                        defs.append(names[0])
        return ELFFacts(elf_class=elf.elfclass, machine=str(elf["e_machine"]), elf_type=str(elf["e_type"]),
                        needed=tuple(needed), rpath=rpath, runpath=runpath, soname=soname, flags_1=flags_1,
                        version_needs=tuple(needs), version_defs=tuple(defs), interp=interp)
    except Exception:  # pyelftools raises its own and construct's errors on a damaged file
        # ld.so reads the identification and e_machine first: a file of the other class is skipped for that
        # alone, whatever follows (a 64-bit file with EI_CLASS patched to 32 is "wrong ELF class")
        return ELFFacts(elf_class=raw_class, machine=_raw_machine(head, raw_class))


def _program_headers_cut(f: BinaryIO, head: bytes, elf_class: int) -> Optional[ELFError]:
    """ld.so reads the program headers (e_phoff, e_phnum x e_phentsize) before anything else: a file that
    ends before them is "cannot read file data" (a copy cut short), whatever pyelftools makes of it."""
    import struct

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
