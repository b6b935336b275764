"""The load-relevant facts of a PE file (machine, imports, exports, load flags, version).

pefile reads the headers and the section table (``fast_load=True``, so no directory is
parsed) and maps RVAs to file offsets; the five directories the loader model needs are
then read straight from the memory-mapped file, so a 249 MB torch_cpu.dll is never read
whole. Why not ``pe.parse_data_directories``:

- pefile cuts import and export names at 512 bytes: 18 of torch_python.dll's imports
  from torch_cpu.dll are longer C++ names, and would look missing (a false 127);
- its safety caps (8192 exports, 8192 imports per file, 120 exports at one address)
  drop real data silently: torch_cpu.dll exports 58 481 symbols;
- it is slow where it matters: 0.7 s for those exports, and its resource parse walks
  every resource (70 ms on a Wine shell32.dll) for one version number.

bench/pe_facts.py measures it against a full ``pefile.PE(path)``: torch_cpu.dll (238 MB,
58 481 exports) takes 0.1-0.2 s here against 26-49 s; the other torch DLLs a few ms.

Nothing raises for a bad file: every problem becomes a `PEError` whose kind says what
is wrong ("not_pe", "truncated", "corrupt", "unreadable"). The headers and the import
directory must be sound (the loader needs them); a damaged optional part (delay imports,
exports, load config, version resource) costs only that part, and the reason is in the
warnings of `read_pe_facts_with_warnings`.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    import pefile  # (imported by _read, the one place that makes a pefile.PE: a run whose facts all come from
    # worlds/factscache.py, and `report`, which reads facts from the trace, never import it: ~18 ms with hashlib)

from .model import MACHINE_NAMES, Import, PEError, PEFacts

PEResult = Union[PEFacts, PEError]

IMAGE_FILE_DLL = 0x2000

_DIR_EXPORT = 0
_DIR_IMPORT = 1
_DIR_RESOURCE = 2
_DIR_LOAD_CONFIG = 10
_DIR_DELAY_IMPORT = 13
_DIR_COM_DESCRIPTOR = 14  # IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR: a .NET assembly's IMAGE_COR20_HEADER
_COR20_HEADER_SIZE = 72  # sizeof(IMAGE_COR20_HEADER)

_PE32 = 0x10B
_PE32_PLUS = 0x20B
# Size of the optional header's fixed part, through NumberOfRvaAndSizes.
_OPTIONAL_FIXED = {_PE32: 96, _PE32_PLUS: 112}
# Offset of DependentLoadFlags (once "Reserved1") in IMAGE_LOAD_CONFIG_DIRECTORY32 / 64.
_DEPENDENT_LOAD_FLAGS_AT = {_PE32: 0x36, _PE32_PLUS: 0x4E}

# An e_lfanew beyond the end of the file but below this is taken for a cut-off file
# (real ones are 0x80..0x400); a larger one is garbage, so the file is corrupt.
_PLAUSIBLE_PE_OFFSET = 0x10000

RT_VERSION = 16
_VS_VERSION_INFO_KEY = "VS_VERSION_INFO\0".encode("utf-16-le")
_VS_FIXEDFILEINFO_SIGNATURE = 0xFEEF04BD
_MAX_RESOURCE_ENTRIES = 0x8000
_MAX_VERSION_BLOB = 0x10000
_MAX_NAME = 0x2000  # longest import/export name read (MSVC caps decorated names at 4096)
_MAX_DESCRIPTORS = 0x10000

_MAX_SYMBOLS = 1 << 20  # imports or exports in one file beyond which it is taken for corrupt


class _Malformed(Exception):
    """A structure points outside the file, or holds an impossible value."""


# --- public API ---------------------------------------------------------------------------
def read_pe_facts(path: Union[str, os.PathLike]) -> PEResult:
    """The `PEFacts` of the file at `path`, or a `PEError` saying why there are none.

    Never raises for a bad, missing or unreadable file.
    """
    return read_pe_facts_with_warnings(path)[0]


def read_pe_facts_with_warnings(path: Union[str, os.PathLike]) -> Tuple[PEResult, list]:
    """`read_pe_facts` plus the non-fatal problems met (pefile's warnings and ours)."""
    try:
        with _mapped(path) as data:
            return _read(data)
    except OSError as exc:
        return PEError("unreadable", _os_message(exc)), []
    except ImportError:  # (pefile missing, imported by _read: an install's fault, cli's one line, not a corrupt file)
        raise
    except Exception as exc:  # noqa: BLE001 - malformed input must never escape as a traceback
        return PEError("corrupt", _one_line(f"could not parse the file: {type(exc).__name__}: {exc}")), []


def pe_facts_from_bytes(data: bytes) -> PEResult:
    """`read_pe_facts` for a file already in memory, or for anything that reads as its bytes (len(), slices,
    find(): worlds/static.py's MemberView, a wheel member inflated as it is read)."""
    try:
        return _read(data)[0]
    except ImportError:  # (as read_pe_facts_with_warnings)
        raise
    except Exception as exc:  # noqa: BLE001
        return PEError("corrupt", _one_line(f"could not parse the file: {type(exc).__name__}: {exc}"))


def machine_name(machine: int) -> str:
    """0x8664 -> "x64"; an unlisted value -> "unknown:0x0200"."""
    return MACHINE_NAMES.get(machine, f"unknown:{machine:#06x}")


# --- JSON form ------------------------------------------------------------------------------
def pe_facts_to_dict(facts: PEFacts) -> dict:
    """A JSON-able dict; sets become sorted lists so the output is stable."""
    return {
        "machine": facts.machine,
        "is_dll": facts.is_dll,
        "imports": [_import_to_dict(i) for i in facts.imports],
        "delay_imports": [_import_to_dict(i) for i in facts.delay_imports],
        "exports": sorted(facts.exports),
        "export_ordinals": sorted(facts.export_ordinals),
        "forwarders": dict(sorted(facts.forwarders.items())),
        "dependent_load_flags": facts.dependent_load_flags,
        "file_version": facts.file_version,
        "linker_version": facts.linker_version,
        **({"cor_flags": facts.cor_flags} if facts.cor_flags is not None else {}),
    }


def pe_facts_from_dict(d: Mapping[str, Any], checked: bool = False) -> PEFacts:
    """The inverse of `pe_facts_to_dict`. Only "machine" is required; a wrong type is a ValueError.
    `checked`: `d` is known to follow the trace schema's `pe` object (the trace reader checked
    it), so only the non-empty machine is checked here."""
    if checked and isinstance(d, dict) and d.get("machine"):
        imports, delay, forwarders = d.get("imports"), d.get("delay_imports"), d.get("forwarders")
        return PEFacts(  # (an empty list or object as the empty default: no generator, no copy)
            machine=d["machine"],
            is_dll=d.get("is_dll", True),
            imports=tuple([Import(i["dll"], tuple(i.get("names", ())), tuple(i.get("ordinals", ()))) for i in imports])
            if imports else (),
            delay_imports=tuple([Import(i["dll"], tuple(i.get("names", ())), tuple(i.get("ordinals", ())))
                                 for i in delay]) if delay else (),
            exports=frozenset(d.get("exports", ())),
            export_ordinals=frozenset(d.get("export_ordinals", ())),
            forwarders=dict(forwarders) if forwarders else {},
            dependent_load_flags=d.get("dependent_load_flags", 0),
            file_version=d.get("file_version"),
            linker_version=d.get("linker_version"),
            cor_flags=d.get("cor_flags"),
        )
    if not isinstance(d, dict) and not isinstance(d, Mapping):  # dict first: typing's check is slow
        raise ValueError(f"PE facts must be an object, not {type(d).__name__}")
    machine = d.get("machine")
    if not isinstance(machine, str) or not machine:
        raise ValueError("PE facts need a 'machine' string (x64, x86, arm64, arm or unknown:0x...)")
    version = d.get("file_version")
    if version is not None and not isinstance(version, str):
        raise ValueError("'file_version' must be a string or null")
    forwarders = d.get("forwarders", {})
    if not isinstance(forwarders, (dict, Mapping)) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in forwarders.items()):
        raise ValueError("'forwarders' must map export names to 'dll.func' strings")
    return PEFacts(
        machine=machine,
        is_dll=_typed(d, "is_dll", bool, True),
        imports=tuple(_import_from_dict(i) for i in _typed(d, "imports", list, [])),
        delay_imports=tuple(_import_from_dict(i) for i in _typed(d, "delay_imports", list, [])),
        exports=frozenset(_items(d, "exports", str)),
        export_ordinals=frozenset(_items(d, "export_ordinals", int)),
        forwarders=dict(forwarders),
        dependent_load_flags=_typed(d, "dependent_load_flags", int, 0),
        file_version=version,
        linker_version=d.get("linker_version") if isinstance(d.get("linker_version"), str) else None,
        cor_flags=_cor_flags_of(d),
    )


def _cor_flags_of(d: Mapping[str, Any]) -> Optional[int]:
    v = d.get("cor_flags")
    if v is None:
        return None
    if type(v) is not int or not 0 <= v < 1 << 32:
        raise ValueError("'cor_flags' must be an integer from 0 to 2**32-1, or absent")
    return v


def _import_to_dict(imp: Import) -> dict:
    return {"dll": imp.dll, "names": list(imp.names), "ordinals": list(imp.ordinals)}


def _import_from_dict(d: Any) -> Import:
    if not (isinstance(d, dict) or isinstance(d, Mapping)) or not isinstance(d.get("dll"), str):
        raise ValueError(f"an import must be an object with a 'dll' string, not {d!r}")
    return Import(dll=d["dll"], names=tuple(_items(d, "names", str)), ordinals=tuple(_items(d, "ordinals", int)))


def _typed(d: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = d.get(key, default)
    # bool is an int in Python; an ordinal or a flag given as true/false is a mistake.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"'{key}' must be {kind.__name__}, not {type(value).__name__}")
    return value


def _items(d: Mapping[str, Any], key: str, kind: type) -> list:
    values = _typed(d, key, list, [])
    for v in values:
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ValueError(f"'{key}' must hold {kind.__name__} values, not {v!r}")
    return values


# --- opening --------------------------------------------------------------------------------
@contextmanager
def _mapped(path: Union[str, os.PathLike]) -> Iterator[Union[bytes, mmap.mmap]]:
    """The file's bytes, memory-mapped read-only (an empty file gives b"")."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", os.fspath(path))
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield m
        finally:
            try:
                m.close()
            except BufferError:  # a view still alive; the mapping goes with it
                pass


def _os_message(exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return "cannot read the file: it does not exist"
    if isinstance(exc, PermissionError):
        return f"cannot read the file: permission denied ({reason})"
    if isinstance(exc, IsADirectoryError):
        return "cannot read the file: it is a directory"
    return _one_line(f"cannot read the file: {reason}")


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- headers (checked by hand first, so the error kind is exact) -------------------------
@dataclass(frozen=True)
class _Headers:
    machine: int
    characteristics: int
    magic: int  # optional-header magic: 0x10b (PE32) or 0x20b (PE32+)


def _check_headers(data: Union[bytes, mmap.mmap]) -> Union[_Headers, PEError]:
    """The DOS, COFF and optional headers and the section table, classified the loader's way."""
    size = len(data)
    if size == 0:
        return PEError("not_pe", "not a PE file: the file is empty")
    if data[:2] != b"MZ":
        return PEError("not_pe", f"not a PE file: it starts with {bytes(data[:8])!r}, not 'MZ'")
    if size < 64:
        return PEError("truncated", f"truncated: {size} bytes, the DOS header alone needs 64")
    (pe_at,) = struct.unpack("<I", data[0x3C:0x40])
    if pe_at + 4 > size:
        if pe_at <= _PLAUSIBLE_PE_OFFSET:
            return PEError("truncated", f"truncated: the file ends ({size} bytes) before its PE header at {pe_at:#x}")
        return PEError("corrupt", f"corrupt: the PE header offset {pe_at:#x} lies beyond the end of the file ({size} bytes)")
    signature = bytes(data[pe_at:pe_at + 4])
    if signature != b"PE\0\0":
        return _no_pe_signature(signature, pe_at)
    coff = pe_at + 4
    if coff + 20 > size:
        return PEError("truncated", f"truncated: the file ends ({size} bytes) inside the COFF header at {coff:#x}")
    machine, n_sections, _, _, _, optional_size, characteristics = struct.unpack("<HHIIIHH", data[coff:coff + 20])
    optional = coff + 20
    if optional + 2 > size:
        return PEError("truncated", f"truncated: the file ends ({size} bytes) before the optional header")
    (magic,) = struct.unpack("<H", data[optional:optional + 2])
    if magic not in _OPTIONAL_FIXED:
        return PEError("corrupt", f"corrupt: unknown optional header magic {magic:#x} (expected 0x10b or 0x20b)")
    if optional_size < _OPTIONAL_FIXED[magic]:
        return PEError("corrupt", f"corrupt: the optional header is {optional_size} bytes, "
                                  f"less than the {_OPTIONAL_FIXED[magic]} it must hold")
    table = optional + optional_size
    if table + 40 * n_sections > size:
        return PEError("truncated", f"truncated: the file ends ({size} bytes) inside the headers "
                                    f"(they need {table + 40 * n_sections})")
    end = _sections_end(data, table, n_sections)
    if end > size:
        return PEError("truncated", f"truncated: the file is {size} bytes but its sections extend to {end}")
    return _Headers(machine, characteristics, magic)


def _no_pe_signature(signature: bytes, pe_at: int) -> PEError:
    if signature[:2] in (b"NE", b"LE", b"LX"):
        return PEError("not_pe", f"not a PE file: a 16-bit or OS/2 executable ({signature[:2].decode()} header)")
    if pe_at < 0x40:
        return PEError("not_pe", "not a PE file: an MS-DOS program (no PE header)")
    return PEError("corrupt", f"corrupt: no PE signature at offset {pe_at:#x} (found {signature.hex(' ')})")


def _sections_end(data: Union[bytes, mmap.mmap], table: int, count: int) -> int:
    """Where the last section's raw data ends in the file (0 with no file-backed section)."""
    end = 0
    rows = data[table:table + 40 * count]
    for i in range(count):
        raw_size, raw_at = struct.unpack_from("<II", rows, 40 * i + 16)
        if raw_size and raw_at:
            end = max(end, raw_at + raw_size)
    return end


# --- facts ----------------------------------------------------------------------------------
def _read(data: Union[bytes, mmap.mmap]) -> Tuple[PEResult, list]:
    headers = _check_headers(data)
    if isinstance(headers, PEError):
        return headers, []
    import pefile

    try:
        pe = pefile.PE(data=data, fast_load=True)
    except pefile.PEFormatError as exc:
        return PEError("corrupt", _one_line(f"corrupt: {exc.value}")), []
    warnings: list = []
    rva = _RvaReader(pe, data)
    try:
        imports = _imports(rva, pe, headers.magic)
    except (_Malformed, pefile.PEFormatError) as exc:
        return PEError("corrupt", _one_line(f"corrupt: the import directory cannot be read: {exc}")), []
    except Exception as exc:  # noqa: BLE001 - pefile on malformed data: struct.error, IndexError, ...
        return PEError("corrupt", _one_line(f"corrupt: the import directory cannot be read: "
                                            f"{type(exc).__name__}: {exc}")), []
    delay = _optional(lambda: _delay_imports(rva, pe, headers.magic), (),
                      "delay-import directory", warnings)
    exports, ordinals, forwarders = _optional(lambda: _exports(rva, pe, warnings), (frozenset(), frozenset(), {}),
                                              "export directory", warnings)
    flags = _optional(lambda: _dependent_load_flags(rva, pe, headers.magic), 0, "load-config directory", warnings)
    version = _optional(lambda: _file_version(rva, pe), None, "version resource", warnings)
    linker = _optional(lambda: f"{pe.OPTIONAL_HEADER.MajorLinkerVersion}.{pe.OPTIONAL_HEADER.MinorLinkerVersion:02d}",
                       None, "optional header", warnings)
    cor_flags = _optional(lambda: _cor_flags(rva, pe), None, "CLR header", warnings)
    facts = PEFacts(
        machine=machine_name(headers.machine),
        is_dll=bool(headers.characteristics & IMAGE_FILE_DLL),
        imports=imports,
        delay_imports=delay,
        exports=exports,
        export_ordinals=ordinals,
        forwarders=forwarders,
        dependent_load_flags=flags,
        file_version=version,
        linker_version=linker,
        cor_flags=cor_flags,
    )
    return facts, [*pe.get_warnings(), *warnings]


def _optional(read: Any, default: Any, what: str, warnings: list) -> Any:
    """Run one optional reader; a failure costs only its own facts, and is noted."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - a damaged optional directory must not sink the file
        warnings.append(_one_line(f"{what} ignored: {type(exc).__name__}: {exc}"))
        return default


def _directory(pe: pefile.PE, index: int) -> Optional[Tuple[int, int]]:
    """(rva, size) of a data directory, or None when the file has none there."""
    dirs = pe.OPTIONAL_HEADER.DATA_DIRECTORY
    if index >= len(dirs) or not dirs[index].VirtualAddress:
        return None
    return dirs[index].VirtualAddress, dirs[index].Size


class _RvaReader:
    """Reads the file by RVA with pefile's section mapping, caching the last section hit
    (pefile.get_offset_from_rva costs microseconds; 60 000 export names add up)."""

    def __init__(self, pe: pefile.PE, data: Union[bytes, mmap.mmap]) -> None:
        self.pe = pe
        self.data = data
        self._section: Any = None
        self._delta = 0
        self._span = (0, 0)  # the last section's RVA range, as its contains_rva computed it (empty: ask it)

    def offset(self, rva: int) -> int:
        lo, hi = self._span
        if lo <= rva < hi:  # (the common case, a name in the section of the one before: no call into pefile)
            return rva + self._delta
        sec = self._section
        if sec is None or not sec.contains_rva(rva):
            sec = self.pe.get_section_by_rva(rva)
            if sec is None:
                # pefile's rule: outside every section, an RVA is a file offset (headers).
                if rva < len(self.data):
                    return rva
                raise _Malformed(f"RVA {rva:#x} is outside the file")
            self._section = sec
            self._delta = sec.get_PointerToRawData_adj() - sec.get_VirtualAddress_adj()
        # (pefile keeps the range contains_rva answered from: section_min_addr/max_addr, pefile >= 2021)
        low, high = getattr(sec, "section_min_addr", None), getattr(sec, "section_max_addr", None)
        self._span = (low, high) if isinstance(low, int) and isinstance(high, int) else (0, 0)
        return rva + self._delta

    def read(self, rva: int, length: int) -> bytes:
        """`length` bytes at `rva`, or _Malformed when they are not all in the file."""
        offset = self.offset(rva)
        if offset < 0 or offset + length > len(self.data):
            raise _Malformed(f"RVA {rva:#x} (+{length} bytes) is outside the file")
        return bytes(self.data[offset:offset + length])

    def string(self, rva: int, limit: int = _MAX_NAME) -> bytes:
        """The NUL-terminated string at `rva` (at most `limit` bytes)."""
        lo, hi = self._span
        offset = rva + self._delta if lo <= rva < hi else self.offset(rva)
        if offset < 0 or offset >= len(self.data):
            raise _Malformed(f"string at RVA {rva:#x} is outside the file")
        end = self.data.find(b"\0", offset, offset + limit + 1)
        if end < 0:
            raise _Malformed(f"string at RVA {rva:#x} is not terminated")
        return bytes(self.data[offset:end])


def _text(raw: bytes) -> str:
    """Import/export names are bytes in the file: ASCII in practice; never fails."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _imports(rva: _RvaReader, pe: pefile.PE, magic: int) -> Tuple[Import, ...]:
    """The import directory, walked as the loader walks it (until a descriptor with no Name
    or no FirstThunk). Read here rather than by pefile, which cuts names at 512 bytes
    (torch_python.dll has 18 longer C++ names) and drops tables past its size caps."""
    where = _directory(pe, _DIR_IMPORT)
    if where is None:
        return ()
    merged: dict = {}
    budget = [_MAX_SYMBOLS]
    at = where[0]
    for _ in range(_MAX_DESCRIPTORS):
        original_thunk, _, _, name_rva, first_thunk = struct.unpack("<IIIII", rva.read(at, 20))
        if not name_rva or not first_thunk:
            break
        _merge(merged, rva.string(name_rva), _thunks(rva, original_thunk or first_thunk, magic, 0, budget))
        at += 20
    return _as_imports(merged)


def _delay_imports(rva: _RvaReader, pe: pefile.PE, magic: int) -> Tuple[Import, ...]:
    """The delay-import directory (ImgDelayDescr). Attributes bit 0 clear is the old VC6
    form whose fields are virtual addresses, not RVAs."""
    where = _directory(pe, _DIR_DELAY_IMPORT)
    if where is None:
        return ()
    merged: dict = {}
    budget = [_MAX_SYMBOLS]
    at = where[0]
    for _ in range(_MAX_DESCRIPTORS):
        attributes, name, _, _, name_table, _, _, _ = struct.unpack("<8I", rva.read(at, 32))
        if not name:
            break
        base = 0 if attributes & 1 else pe.OPTIONAL_HEADER.ImageBase
        _merge(merged, rva.string(name - base), _thunks(rva, name_table - base, magic, base, budget))
        at += 32
    return _as_imports(merged)


def _thunks(rva: _RvaReader, at: int, magic: int, base: int, budget: list) -> Tuple[list, list]:
    """(names, ordinals) of one import lookup table; `base` is subtracted from name addresses."""
    size, fmt = (8, "<Q") if magic == _PE32_PLUS else (4, "<I")
    ordinal_flag = 1 << (8 * size - 1)
    names: list = []
    ordinals: list = []
    while True:
        (entry,) = struct.unpack(fmt, rva.read(at, size))
        if not entry:
            return names, ordinals
        budget[0] -= 1
        if budget[0] < 0:
            raise _Malformed(f"more than {_MAX_SYMBOLS} imports")
        if entry & ordinal_flag:
            ordinals.append(entry & 0xFFFF)
        else:
            names.append(rva.string((entry & 0x7FFFFFFF) - base + 2))  # skip the 2-byte hint
        at += size


def _merge(merged: dict, dll_raw: bytes, table: Tuple[list, list]) -> None:
    """Descriptors naming the same DLL (any case) become one Import, at the first one's place."""
    dll = _text(dll_raw)
    _, names, ordinals = merged.setdefault(dll.lower(), (dll, {}, {}))
    names.update(dict.fromkeys(_text(n) for n in table[0]))
    ordinals.update(dict.fromkeys(table[1]))


def _as_imports(merged: dict) -> Tuple[Import, ...]:
    return tuple(Import(dll, tuple(names), tuple(ordinals)) for dll, names, ordinals in merged.values())


def _exports(rva: _RvaReader, pe: pefile.PE, warnings: list) -> Tuple[frozenset, frozenset, dict]:
    """(names, ordinals, forwarders) from IMAGE_EXPORT_DIRECTORY, read directly: pefile's
    parser validates every name and builds an object per export (0.7 s for torch_cpu.dll's
    58 481; this takes ~50 ms). A forwarded export with no name is keyed "#<ordinal>"."""
    where = _directory(pe, _DIR_EXPORT)
    if where is None:
        return frozenset(), frozenset(), {}
    dir_rva, dir_size = where
    (_, _, _, _, _, base, n_functions, n_names, functions_rva, names_rva, name_ordinals_rva) = \
        struct.unpack("<IIHHIIIIIII", rva.read(dir_rva, 40))
    if n_functions > _MAX_SYMBOLS or n_names > _MAX_SYMBOLS:
        raise _Malformed(f"{n_functions} functions / {n_names} names is not believable")
    functions = struct.unpack(f"<{n_functions}I", rva.read(functions_rva, 4 * n_functions)) if n_functions else ()
    dir_end = dir_rva + dir_size
    # (the used slots and the forwarded ones first, then one pass over the names: Wine's kernel32, ntdll and
    # msvcrt, whose facts every `run --wine` reads, in 10-20% less time than a list of names per slot; the
    # same three results, checked on 619 DLLs of the test prefix and caches)
    used = {index for index, address in enumerate(functions) if address}  # (0: an unused slot of the range)
    forwarded = {index for index in used if dir_rva <= functions[index] < dir_end}  # (into the directory)
    names: set = set()
    forwarder_names: dict = {}
    if n_names:
        name_rvas = struct.unpack(f"<{n_names}I", rva.read(names_rva, 4 * n_names))
        indexes = struct.unpack(f"<{n_names}H", rva.read(name_ordinals_rva, 2 * n_names))
        bad = 0
        for name_rva, index in zip(name_rvas, indexes):
            try:
                name = _text(rva.string(name_rva))
            except _Malformed:
                bad += 1
                continue
            if index >= n_functions:
                bad += 1
            elif index in used:
                names.add(name)
                if index in forwarded:
                    forwarder_names.setdefault(index, []).append(name)
        if bad:
            warnings.append(f"export directory: {bad} of {n_names} names unreadable or out of range, left out")
    ordinals = {base + index for index in used}
    forwarders = {}
    for index in sorted(forwarded):
        target = _text(rva.string(functions[index]))
        for key in forwarder_names.get(index) or (f"#{base + index}",):
            forwarders[key] = target
    return frozenset(names), frozenset(ordinals), forwarders


def _dependent_load_flags(rva: _RvaReader, pe: pefile.PE, magic: int) -> int:
    """IMAGE_LOAD_CONFIG_DIRECTORY.DependentLoadFlags; 0 when absent or when the structure's
    own Size field says it is too old to have the field (the loader reads it the same way)."""
    where = _directory(pe, _DIR_LOAD_CONFIG)
    if where is None:
        return 0
    (size,) = struct.unpack("<I", rva.read(where[0], 4))
    field_at = _DEPENDENT_LOAD_FLAGS_AT[magic]
    if size < field_at + 2:
        return 0
    (flags,) = struct.unpack("<H", rva.read(where[0] + field_at, 2))
    return flags


def _cor_flags(rva: _RvaReader, pe: pefile.PE) -> Optional[int]:
    """IMAGE_COR20_HEADER.Flags of a .NET assembly (the COM descriptor directory; the header's cb, runtime
    version and metadata directory come first: Flags is at offset 16); None for a file without one, or whose
    directory entry is smaller than the header (Windows' LdrpIsILOnlyImage takes an image as IL-only only when the
    entry's Size is at least sizeof(IMAGE_COR20_HEADER))."""
    where = _directory(pe, _DIR_COM_DESCRIPTOR)
    if where is None or where[1] < _COR20_HEADER_SIZE:
        return None
    (flags,) = struct.unpack("<I", rva.read(where[0] + 16, 4))
    return flags


def _file_version(rva: _RvaReader, pe: pefile.PE) -> Optional[str]:
    """FILEVERSION of the first RT_VERSION resource, walking only the path to it."""
    where = _directory(pe, _DIR_RESOURCE)
    if where is None:
        return None
    base = where[0]
    entry = _resource_entry(rva, base, 0, lambda name, _: name == RT_VERSION)
    if entry is None:
        return None
    for _level in ("name", "language"):
        if not entry & 0x80000000:
            raise _Malformed("RT_VERSION is a leaf where a directory should be")
        entry = _resource_entry(rva, base, entry & 0x7FFFFFFF, lambda *_: True)
        if entry is None:
            return None
    if entry & 0x80000000:
        raise _Malformed("the version resource nests deeper than type/name/language")
    blob_rva, blob_size = struct.unpack("<II", rva.read(base + entry, 8))
    blob = rva.read(blob_rva, min(blob_size, _MAX_VERSION_BLOB))
    return _fixed_file_version(blob)


def _resource_entry(rva: _RvaReader, base: int, offset: int,
                    wanted: Any) -> Optional[int]:
    """OffsetToData of the first entry of the resource directory at base+offset that `wanted`."""
    header = rva.read(base + offset, 16)
    named, ids = struct.unpack_from("<HH", header, 12)
    count = min(named + ids, _MAX_RESOURCE_ENTRIES)
    table = rva.read(base + offset + 16, 8 * count)
    for i in range(count):
        name, target = struct.unpack_from("<II", table, 8 * i)
        if wanted(name, target):
            return target
    return None


def _fixed_file_version(blob: bytes) -> Optional[str]:
    """"a.b.c.d" from a VS_VERSIONINFO block (header, key, padding, VS_FIXEDFILEINFO)."""
    if len(blob) < 6 + len(_VS_VERSION_INFO_KEY):
        raise _Malformed("the version resource is too short")
    (value_length,) = struct.unpack_from("<H", blob, 2)
    if blob[6:6 + len(_VS_VERSION_INFO_KEY)] != _VS_VERSION_INFO_KEY:
        raise _Malformed("the version resource does not start with VS_VERSION_INFO")
    if value_length == 0:
        return None  # legal: a VERSIONINFO with no fixed part
    fixed = (6 + len(_VS_VERSION_INFO_KEY) + 3) & ~3
    if value_length < 52 or len(blob) < fixed + 16:
        raise _Malformed("the fixed file info is cut short")
    signature, _, ms, ls = struct.unpack_from("<IIII", blob, fixed)
    if signature != _VS_FIXEDFILEINFO_SIGNATURE:
        raise _Malformed(f"bad VS_FIXEDFILEINFO signature {signature:#x}")
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


__all__: Sequence[str] = (
    "MACHINE_NAMES",
    "PEResult",
    "machine_name",
    "pe_facts_from_bytes",
    "pe_facts_from_dict",
    "pe_facts_to_dict",
    "read_pe_facts",
    "read_pe_facts_with_warnings",
)
