"""Tiny valid PE32+ DLLs (x64) written byte by byte: one section holding an export directory (one
function, `f`) and an import directory (each DLL named imports its `f`). Enough for pe.py (pefile) and
the loader model; used by the scale tests and bench/static_scale.py."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

_SECTION_RVA = 0x1000
_FILE_ALIGN = 0x200


def tiny_dll(name: str, imports: Sequence[str] = ()) -> bytes:
    """A PE32+ DLL named `name` exporting `f` and importing `f` from each of `imports`."""
    body = bytearray()

    def rva() -> int:
        return _SECTION_RVA + len(body)

    def put(data: bytes) -> int:
        at = rva()
        body.extend(data)
        while len(body) % 8:
            body.append(0)
        return at

    code = put(b"\xc3")  # ret
    dll_name = put(name.encode() + b"\0")
    f_name = put(b"f\0")
    eat = put(struct.pack("<I", code))
    ent = put(struct.pack("<I", f_name))
    eot = put(struct.pack("<H", 0))
    export_dir = put(struct.pack("<2I2H7I", 0, 0, 0, 0, dll_name, 1, 1, 1, eat, ent, eot))
    import_dir, import_size = 0, 0
    if imports:
        hint = put(struct.pack("<H", 0) + b"f\0")
        descs = []
        for dll in imports:
            n = put(dll.encode() + b"\0")
            ilt = put(struct.pack("<QQ", hint, 0))
            iat = put(struct.pack("<QQ", hint, 0))
            descs.append(struct.pack("<5I", ilt, 0, 0, n, iat))
        import_size = 20 * (len(descs) + 1)
        import_dir = put(b"".join(descs) + bytes(20))
    raw = bytes(body) + bytes(-len(body) % _FILE_ALIGN)
    vsize = len(body)
    image = _SECTION_RVA + ((vsize + 0xFFF) & ~0xFFF)
    dirs = [(0, 0)] * 16
    dirs[0] = (export_dir, 40)
    dirs[1] = (import_dir, import_size)
    dos = bytearray(64)
    dos[:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 64)
    coff = struct.pack("<2H3I2H", 0x8664, 1, 0, 0, 0, 240, 0x2022)
    opt = struct.pack("<HBB5IQ2I6H4I2H4Q2I", 0x20B, 14, 0, len(raw), 0, 0, 0, _SECTION_RVA, 0x180000000,
                      0x1000, _FILE_ALIGN, 6, 0, 0, 0, 6, 0, 0, image, _FILE_ALIGN, 0, 2, 0x160,
                      0x100000, 0x1000, 0x100000, 0x1000, 0, 16)
    opt += b"".join(struct.pack("<2I", a, s) for a, s in dirs)
    section = struct.pack("<8s6I2HI", b".rdata", vsize, _SECTION_RVA, len(raw), _FILE_ALIGN, 0, 0, 0, 0, 0xC0000040)
    headers = bytes(dos) + b"PE\0\0" + coff + opt + section
    return headers + bytes(_FILE_ALIGN - len(headers)) + raw


def chain_names(n: int) -> list[str]:
    """d0.dll, d1.dll, ...: d0 imports d1 imports d2 ... (the last imports nothing)."""
    return [f"d{i}.dll" for i in range(n)]


def write_chain(folder: Path, n: int) -> list[Path]:
    """A folder with an n-level import chain d0.dll -> d1.dll -> ... -> d{n-1}.dll."""
    folder.mkdir(parents=True, exist_ok=True)
    names = chain_names(n)
    out = []
    for i, name in enumerate(names):
        p = folder / name
        p.write_bytes(tiny_dll(name, names[i + 1:i + 2]))
        out.append(p)
    return out


def write_wheel(path: Path, names: Iterable[str], package: str = "pkg") -> Path:
    """A win_amd64 wheel whose package holds one tiny DLL per name (stored, not deflated: it is the count that
    matters), each importing nothing but kernel32.dll."""
    one = {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name in names:
            data = one.get(name) or tiny_dll(name, ["kernel32.dll"])
            z.writestr(f"{package}/{name}", data)
        z.writestr(f"{package}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    return path
