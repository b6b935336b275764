"""PE facts from real mingw-built DLLs and EXEs, and from broken files of every kind."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pefile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlltrace.pe as pe_module
from dlltrace.model import Import, PEError, PEFacts
from dlltrace.pe import (
    pe_facts_from_bytes,
    pe_facts_from_dict,
    pe_facts_to_dict,
    read_pe_facts,
    read_pe_facts_with_warnings,
)
from winetools import CC32, mingw_compile, require

ERROR_KINDS = {"not_pe", "truncated", "corrupt", "unreadable"}

LIB_C = r"""
__declspec(dllexport) int f1(void) { return 1; }
__declspec(dllexport) int f2(void) { return 2; }
int f3(void) { return 3; }
"""
LIB_DEF = """LIBRARY lib.dll
EXPORTS
f1
f2
f3 @7 NONAME
fwd = other.g
fwdo = "other.#5"
"""
USE_C = r"""
int f1(void); int f3(void);
__declspec(dllexport) int use(void) { return f1() + f3(); }
"""
APP_C = "int main(void) { return 0; }\n"
SIMPLE_C = "__declspec(dllexport) int simple(void) { return 42; }\n"
# A load-config directory as MSVC's /DEPENDENTLOADFLAG writes it (Reserved1 is
# DependentLoadFlags in mingw's older header). GNU ld 2.40 does not point the data
# directory at it, so the fixture patches that in; the struct itself is the compiler's.
LOADCFG_C = r"""
#include <windows.h>
__declspec(dllexport) const IMAGE_LOAD_CONFIG_DIRECTORY pe_test_load_config = {
    .Size = LOADCFG_SIZE, .Reserved1 = 0x800 };
"""
VERSION_RC = """1 VERSIONINFO
FILEVERSION 14,36,32532,0
PRODUCTVERSION 14,36,0,0
BEGIN
  BLOCK "StringFileInfo"
  BEGIN
    BLOCK "040904b0"
    BEGIN
      VALUE "FileVersion", "14.36.32532.0"
    END
  END
  BLOCK "VarFileInfo"
  BEGIN
    VALUE "Translation", 0x409, 1200
  END
END
"""
# An ImgDelayDescr table for other.dll (g, h by name, #5 by ordinal), laid out as MSVC's
# linker does. GNU ld never fills the delay-import data directory (dlltool's delay
# libraries work through thunks alone), so the fixture points it at this table.
DELAY_S = """
	.section .rdata,"dr"
	.p2align 3
	.globl pe_test_delay_table
pe_test_delay_table:
	.long 1
	.rva dl_name, dl_handle, dl_iat, dl_int
	.long 0, 0, 0
	.long 0, 0, 0, 0, 0, 0, 0, 0
	.p2align 3
dl_int:
	.rva dl_hn_g
	.long 0
	.rva dl_hn_h
	.long 0
	.long 5, 0x80000000
	.quad 0
	.p2align 1
dl_hn_g:
	.short 0
	.asciz "g"
	.p2align 1
dl_hn_h:
	.short 0
	.asciz "h"
dl_name:
	.asciz "other.dll"
	.data
	.p2align 3
dl_handle:
	.quad 0
dl_iat:
	.quad 0, 0, 0, 0
	.section .drectve
	.ascii " -export:pe_test_delay_table,data"
"""


@dataclass
class Built:
    lib: Path  # x64 DLL: exports f1, f2, #7 (NONAME), forwarders fwd, fwdo
    use: Path  # x64 DLL importing f1 by name and #7 by ordinal from lib.dll
    app: Path  # x64 EXE
    lib32: Path | None  # x86 DLL (None without the 32-bit compiler)
    loadcfg: Path  # x64 DLL with DependentLoadFlags 0x800
    loadcfg_small: Path  # same flag, but a load-config Size too small to hold the field
    loadcfg32: Path | None
    version: Path  # x64 DLL with VERSIONINFO 14.36.32532.0
    delay: Path  # x64 DLL with a delay-import directory for other.dll


def _export_rva(path: Path, name: str) -> int:
    pe = pefile.PE(str(path))  # an independent reader, only to find where to patch
    return next(s.address for s in pe.DIRECTORY_ENTRY_EXPORT.symbols if s.name == name.encode())


def _data_directory_at(data: bytes | bytearray, index: int) -> int:
    (pe_at,) = struct.unpack_from("<I", data, 0x3C)
    optional = pe_at + 24
    (magic,) = struct.unpack_from("<H", data, optional)
    return optional + (96 if magic == 0x10B else 112) + 8 * index


def _set_data_directory(path: Path, index: int, rva: int, size: int) -> Path:
    data = bytearray(path.read_bytes())
    struct.pack_into("<II", data, _data_directory_at(data, index), rva, size)
    path.write_bytes(data)
    return path


def _build_loadcfg(d: Path, name: str, size_expr: str, bits: int) -> Path:
    out = mingw_compile([d / "loadcfg.c"], d / name, dll=True, bits=bits,
                        extra=[f"-DLOADCFG_SIZE={size_expr}"])
    return _set_data_directory(out, 10, _export_rva(out, "pe_test_load_config"), 0x40)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Built:
    require("mingw64")
    d = tmp_path_factory.mktemp("pe")
    for name, text in {"lib.c": LIB_C, "lib.def": LIB_DEF, "use.c": USE_C, "app.c": APP_C,
                       "simple.c": SIMPLE_C, "loadcfg.c": LOADCFG_C, "version.rc": VERSION_RC,
                       "delay.s": DELAY_S}.items():
        (d / name).write_text(text)
    lib = mingw_compile([d / "lib.c", d / "lib.def"], d / "lib.dll", dll=True,
                        extra=[f"-Wl,--out-implib,{d / 'liblib.a'}"])
    use = mingw_compile([d / "use.c", d / "liblib.a"], d / "use.dll", dll=True)
    app = mingw_compile([d / "app.c"], d / "app.exe")
    has32 = shutil.which(CC32) is not None
    lib32 = mingw_compile([d / "simple.c"], d / "lib32.dll", dll=True, bits=32) if has32 else None
    loadcfg = _build_loadcfg(d, "loadcfg.dll", "sizeof(IMAGE_LOAD_CONFIG_DIRECTORY)", 64)
    loadcfg_small = _build_loadcfg(d, "loadcfg_small.dll", "0x40", 64)
    loadcfg32 = _build_loadcfg(d, "loadcfg32.dll", "sizeof(IMAGE_LOAD_CONFIG_DIRECTORY)", 32) if has32 else None
    windres = shutil.which("x86_64-w64-mingw32-windres")
    if windres is None:
        pytest.skip("needs x86_64-w64-mingw32-windres (binutils-mingw-w64-x86-64)")
    subprocess.run([windres, str(d / "version.rc"), "-O", "coff", "-o", str(d / "version.o")], check=True)
    version = mingw_compile([d / "simple.c", d / "version.o"], d / "version.dll", dll=True)
    delay = mingw_compile([d / "simple.c", d / "delay.s"], d / "delay.dll", dll=True)
    _set_data_directory(delay, 13, _export_rva(delay, "pe_test_delay_table"), 64)
    return Built(lib, use, app, lib32, loadcfg, loadcfg_small, loadcfg32, version, delay)


def facts(path: Path) -> PEFacts:
    result = read_pe_facts(path)
    assert isinstance(result, PEFacts), result
    return result


def error(path: Path | str) -> PEError:
    result = read_pe_facts(path)
    assert isinstance(result, PEError), result
    assert result.kind in ERROR_KINDS
    assert result.message and "\n" not in result.message
    return result


def _need(path: Path | None) -> Path:
    if path is None:
        require("mingw32")
    assert path is not None
    return path


# --- facts of good files ------------------------------------------------------------------
def test_machine_x64_and_dll_flag(built):
    lib = facts(built.lib)
    assert lib.machine == "x64"
    assert lib.is_dll is True


def test_machine_x86(built):
    lib32 = facts(_need(built.lib32))
    assert lib32.machine == "x86"
    assert lib32.is_dll is True
    assert lib32.exports == {"simple"}


def test_exe_is_not_a_dll(built):
    app = facts(built.app)
    assert app.machine == "x64"
    assert app.is_dll is False
    assert app.exports == frozenset()


def test_exports_ordinals_and_forwarders(built):
    lib = facts(built.lib)
    assert lib.exports == {"f1", "f2", "fwd", "fwdo"}  # not f3: NONAME, reachable by ordinal only
    assert 7 in lib.export_ordinals
    assert len(lib.export_ordinals) == 5
    assert dict(lib.forwarders) == {"fwd": "other.g", "fwdo": "other.#5"}


def test_imports_by_name_and_by_ordinal(built):
    use = facts(built.use)
    by_dll = {i.dll.lower(): i for i in use.imports}
    assert by_dll["lib.dll"] == Import(dll="lib.dll", names=("f1",), ordinals=(7,))
    assert "kernel32.dll" in by_dll
    assert "DeleteCriticalSection" in by_dll["kernel32.dll"].names
    assert use.delay_imports == ()


def test_imports_keep_directory_order(built):
    pe = pefile.PE(str(built.use))  # the order as an independent parser sees it
    expected = [e.dll.decode() for e in pe.DIRECTORY_ENTRY_IMPORT]
    assert [i.dll for i in facts(built.use).imports] == expected


def test_delay_imports(built):
    delay = facts(built.delay)
    assert delay.delay_imports == (Import(dll="other.dll", names=("g", "h"), ordinals=(5,)),)
    assert "other.dll" not in {i.dll for i in delay.imports}


def test_dependent_load_flags(built):
    assert facts(built.loadcfg).dependent_load_flags == 0x800
    assert facts(built.lib).dependent_load_flags == 0  # no load-config directory


def test_dependent_load_flags_x86_layout(built):
    assert facts(_need(built.loadcfg32)).dependent_load_flags == 0x800


def test_dependent_load_flags_ignored_when_structure_too_small(built):
    # Size 0x40 ends before DependentLoadFlags (0x4E on x64): the loader does not read it.
    assert facts(built.loadcfg_small).dependent_load_flags == 0


def test_file_version(built):
    assert facts(built.version).file_version == "14.36.32532.0"
    assert facts(built.lib).file_version is None


def test_linker_version(built, tmp_path):
    # the optional header's linker version: 14.xx is the MSVC toolset (what msvcp140.dll must at least be)
    data = bytearray(built.lib.read_bytes())
    opt = int.from_bytes(data[0x3C:0x40], "little") + 24
    assert facts(built.lib).linker_version == f"{data[opt + 2]}.{data[opt + 3]:02d}"
    data[opt + 2], data[opt + 3] = 14, 42
    patched = tmp_path / "msvc.dll"
    patched.write_bytes(bytes(data))
    assert facts(patched).linker_version == "14.42"


def test_cor_flags_need_a_whole_cor20_header(built, tmp_path):
    """IMAGE_COR20_HEADER.Flags (a .NET assembly's; offset 16) is read only when the COM descriptor directory's Size
    holds the whole header (72 bytes): Windows' LdrpIsILOnlyImage takes an image as IL-only only when the directory
    entry's size is at least sizeof(IMAGE_COR20_HEADER). Here the directory points at the export directory: its
    Base (offset 16) is read as the flags when the size says 72, not when it says less.
    Outside the file, the flags are absent and the rest of the facts stay."""
    assert facts(built.lib).cor_flags is None  # (a native DLL: no COM descriptor)
    data = built.lib.read_bytes()
    export_rva = struct.unpack_from("<I", data, _data_directory_at(data, 0))[0]
    (base,) = struct.unpack_from("<I", data, pefile.PE(data=data, fast_load=True).get_offset_from_rva(export_rva) + 16)
    whole = tmp_path / "whole.dll"
    shutil.copy(built.lib, whole)
    assert facts(_set_data_directory(whole, 14, export_rva, 72)).cor_flags == base
    for size in (0, 8, 71):
        short = tmp_path / f"short{size}.dll"
        shutil.copy(built.lib, short)
        assert facts(_set_data_directory(short, 14, export_rva, size)).cor_flags is None, size
    outside = tmp_path / "outside.dll"
    shutil.copy(built.lib, outside)
    result, warnings = read_pe_facts_with_warnings(_set_data_directory(outside, 14, 0x7FFF0000, 72))
    assert isinstance(result, PEFacts) and result.cor_flags is None
    assert result.exports == facts(built.lib).exports and result.imports == facts(built.lib).imports
    assert any("CLR header" in w for w in warnings), warnings


# --- partly damaged files: what can be read still is ------------------------------------
def test_damaged_version_resource_keeps_the_rest(built, tmp_path):
    data = built.version.read_bytes()
    key = "VS_VERSION_INFO".encode("utf-16-le")
    assert data.count(key) == 1
    bad = tmp_path / "badver.dll"
    bad.write_bytes(data.replace(key, b"X" * len(key)))
    result, warnings = read_pe_facts_with_warnings(bad)
    assert isinstance(result, PEFacts)
    assert result.file_version is None
    assert "simple" in result.exports and result.imports
    assert any("version resource" in w for w in warnings)


def test_damaged_export_directory_keeps_the_rest(built, tmp_path):
    data = bytearray(built.lib.read_bytes())
    export_rva = struct.unpack_from("<I", data, _data_directory_at(data, 0))[0]
    pe = pefile.PE(data=bytes(data), fast_load=True)
    at = pe.get_offset_from_rva(export_rva)
    struct.pack_into("<I", data, at + 28, 0x7FFF0000)  # AddressOfFunctions: far outside the file
    bad = tmp_path / "badexp.dll"
    bad.write_bytes(data)
    result, warnings = read_pe_facts_with_warnings(bad)
    assert isinstance(result, PEFacts)
    assert result.exports == frozenset() and result.forwarders == {}
    assert [i.dll for i in result.imports] == [i.dll for i in facts(built.lib).imports]
    assert any("export directory" in w for w in warnings)


def test_import_directory_outside_the_file_is_corrupt(built, tmp_path):
    bad = tmp_path / "badimp.dll"
    shutil.copy(built.use, bad)
    _set_data_directory(bad, 1, 0x7FFF0000, 0x100)
    assert error(bad).kind == "corrupt"


@pytest.mark.parametrize("machine, name", [(0xAA64, "arm64"), (0x1C4, "arm"), (0x14C, "x86"),
                                           (0x200, "unknown:0x0200")])
def test_machine_names(built, tmp_path, machine, name):
    data = bytearray(built.lib.read_bytes())
    struct.pack_into("<H", data, struct.unpack_from("<I", data, 0x3C)[0] + 4, machine)
    assert pe_facts_from_bytes(bytes(data)).machine == name


# --- files that are not loadable PEs ---------------------------------------------------------
def test_empty_file(tmp_path):
    (tmp_path / "empty.dll").write_bytes(b"")
    assert error(tmp_path / "empty.dll").kind == "not_pe"


def test_text_file(tmp_path):
    (tmp_path / "readme.dll").write_text("This is not a DLL.\n" * 20)
    err = error(tmp_path / "readme.dll")
    assert err.kind == "not_pe"
    assert "MZ" in err.message


def test_dos_program_and_ne_executable(built):
    dos = bytearray(64)
    dos[:2] = b"MZ"  # e_lfanew 0: an MS-DOS program
    assert pe_facts_from_bytes(bytes(dos) + b"\0" * 64).kind == "not_pe"
    ne = bytearray(built.lib.read_bytes()[:0x200])
    pe_at = struct.unpack_from("<I", ne, 0x3C)[0]
    ne[pe_at:pe_at + 4] = b"NE\x05\x0a"
    result = pe_facts_from_bytes(bytes(ne))
    assert result.kind == "not_pe" and "16-bit" in result.message


def _cut_points(data: bytes) -> dict[str, int]:
    pe_at = struct.unpack_from("<I", data, 0x3C)[0]
    optional_size = struct.unpack_from("<H", data, pe_at + 20)[0]
    headers_end = pe_at + 24 + optional_size
    return {
        "inside the DOS header": 40,
        "DOS header only": 64,
        "inside the COFF header": pe_at + 10,
        "inside the optional header": pe_at + 24 + optional_size // 2,
        "inside the section table": headers_end + 20,
        "headers only": struct.unpack_from("<I", data, pe_at + 24 + 60)[0],  # SizeOfHeaders
        "middle of the sections": len(data) // 2,
        "one byte short": len(data) - 1,
    }


@pytest.mark.parametrize("where", ["inside the DOS header", "DOS header only", "inside the COFF header",
                                   "inside the optional header", "inside the section table",
                                   "headers only", "middle of the sections", "one byte short"])
def test_truncated(built, tmp_path, where):
    data = built.use.read_bytes()
    cut = _cut_points(data)[where]
    path = tmp_path / "cut.dll"
    path.write_bytes(data[:cut])
    err = error(path)
    assert err.kind == "truncated", err


def test_random_bytes_after_mz_header(built, tmp_path):
    rng = random.Random(1234)
    header = built.lib.read_bytes()[:64]  # a valid DOS header: e_lfanew = 0x80
    path = tmp_path / "junk.dll"
    path.write_bytes(header + bytes(rng.getrandbits(8) for _ in range(8192)))
    err = error(path)
    assert err.kind == "corrupt"
    assert "PE signature" in err.message


def test_missing_path(tmp_path):
    err = error(tmp_path / "nowhere.dll")
    assert err.kind == "unreadable"
    assert "does not exist" in err.message


def test_directory(tmp_path):
    err = error(tmp_path)
    assert err.kind == "unreadable"
    assert "directory" in err.message


def test_permission_denied(built, tmp_path, monkeypatch):
    import dlltrace.pe as pe_module

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    if os.name != "nt" and os.geteuid() != 0:  # a real one where the OS enforces it
        path = tmp_path / "locked.dll"
        shutil.copy(built.lib, path)
        path.chmod(0)
    else:  # root reads anything: make open() refuse as Windows would
        path = built.lib
        monkeypatch.setattr(pe_module, "open", denied, raising=False)
    err = error(path)
    assert err.kind == "unreadable"
    assert "permission denied" in err.message


# --- JSON form --------------------------------------------------------------------------------
def test_dict_round_trip(built):
    for path in (built.lib, built.use, built.delay, built.loadcfg, built.version, built.app):
        original = facts(path)
        d = json.loads(json.dumps(pe_facts_to_dict(original)))
        assert pe_facts_from_dict(d) == original


def test_dict_shape(built):
    d = pe_facts_to_dict(facts(built.use))
    assert list(d) == ["machine", "is_dll", "imports", "delay_imports", "exports", "export_ordinals",
                       "forwarders", "dependent_load_flags", "file_version", "linker_version"]
    assert {"dll": "lib.dll", "names": ["f1"], "ordinals": [7]} in d["imports"]
    assert d["exports"] == ["use"]


def test_dict_defaults_and_errors():
    assert pe_facts_from_dict({"machine": "x86"}) == PEFacts(machine="x86")
    with pytest.raises(ValueError, match="machine"):
        pe_facts_from_dict({"is_dll": True})
    with pytest.raises(ValueError, match="ordinals"):
        pe_facts_from_dict({"machine": "x64", "imports": [{"dll": "a.dll", "ordinals": ["7"]}]})
    with pytest.raises(ValueError, match="dependent_load_flags"):
        pe_facts_from_dict({"machine": "x64", "dependent_load_flags": True})


# --- fuzzing: damaged copies of real files never raise ------------------------------------
# pe_facts_from_bytes turns any exception into PEError("corrupt"), and _read itself turns any
# exception of the import reader into a "corrupt" message and of an optional reader into a
# warning: a parser crash (a struct.error from a missing bounds check, an IndexError) would pass
# unseen through all three. So the fuzz tests call _read, below the outer catch-all, with every
# directory reader watched: only the parser's own exceptions may come out of them.
_EXPECTED = (pe_module._Malformed, pefile.PEFormatError)
_READERS = ("_imports", "_delay_imports", "_exports", "_dependent_load_flags", "_file_version")


@contextlib.contextmanager
def _readers_watched():
    """Every directory reader wrapped: an exception other than the parser's own is recorded in the
    list yielded (and raised on, for _read to catch as it would)."""
    unexpected: list = []

    def watched(reader):
        def read(*args, **kwargs):
            try:
                return reader(*args, **kwargs)
            except _EXPECTED:
                raise
            except Exception as exc:
                unexpected.append(exc)
                raise
        return read

    with contextlib.ExitStack() as stack:
        for name in _READERS:
            stack.enter_context(mock.patch.object(pe_module, name, watched(getattr(pe_module, name))))
        yield unexpected


def _check_parse(data: bytes, unexpected: list) -> None:
    result, warnings = pe_module._read(data)  # raises if anything escapes the parser
    assert not unexpected, f"the parser crashed: {unexpected[0]!r}"
    assert all(isinstance(w, str) for w in warnings)
    assert isinstance(result, (PEFacts, PEError))
    if isinstance(result, PEError):
        assert result.kind in ERROR_KINDS and "\n" not in result.message
    else:
        json.dumps(pe_facts_to_dict(result))


def _check_never_raises(data: bytes) -> None:
    with _readers_watched() as unexpected:
        _check_parse(data, unexpected)


class _Samples(list):
    """The sample files' bytes; a short repr, so a failing example does not print them."""

    def __repr__(self) -> str:
        return f"<{len(self)} sample files>"


@pytest.fixture(scope="session")
def samples(built) -> list[bytes]:
    return _Samples([built.use.read_bytes(), built.lib.read_bytes(), built.delay.read_bytes(),
                     built.version.read_bytes(), built.loadcfg.read_bytes()])


# the directories the parser reads: export, import, resource, load config, delay import
_PARSED_DIRECTORIES = (0, 1, 2, 10, 13)


@pytest.fixture(scope="session")
def directory_spans(samples) -> list[list[tuple[int, int]]]:
    """For each sample, the (file offset, size) of every parsed directory it has (found by pefile)."""
    out = []
    for data in samples:
        pe = pefile.PE(data=data, fast_load=True)
        spans = []
        for index in _PARSED_DIRECTORIES:
            rva, size = struct.unpack_from("<II", data, _data_directory_at(data, index))
            if rva and size:
                spans.append((pe.get_offset_from_rva(rva), size))
        out.append(spans)
    assert all(len(spans) >= 2 for spans in out)  # imports and at least one more each
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 4), cut=st.floats(0, 1))
def test_fuzz_truncation(samples, which, cut):
    data = samples[which]
    _check_never_raises(data[: int(len(data) * cut)])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 4),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
       in_headers=st.booleans())
def test_fuzz_byte_flips(samples, which, flips, in_headers):
    data = bytearray(samples[which])
    span = 0x400 if in_headers else len(data)  # most structure lives in the first 1 KiB
    for where, value in flips:
        data[int(where * (span - 1))] = value
    _check_never_raises(bytes(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 4), part=st.one_of(st.just(0), st.integers(1, 5)), where=st.floats(0, 1),
       value=st.sampled_from([0, 0xFF, 0x7F, 0x80]), width=st.sampled_from([2, 4]))
def test_fuzz_directory_fields(samples, directory_spans, which, part, where, value, width):
    """Smash one field of the data directories or the directory structures they point at."""
    data = bytearray(samples[which])
    spans = directory_spans[which]
    if part == 0:  # (half the examples) the data directory table: a field of one of its first 15 entries
        at = _data_directory_at(data, 0) + int(where * 15) * 8 + (4 if width == 2 else 0)
    else:  # a field (aligned to its width) anywhere in the structure one directory points at
        # (every field of their first 64 bytes: test_every_directory_header_field_smashed)
        start, size = spans[part % len(spans)]
        at = start + int(where * max(size // width - 1, 0)) * width
    data[at:at + width] = bytes([value]) * width
    _check_never_raises(bytes(data))


def test_every_directory_header_field_smashed(samples, directory_spans):
    """Each 2- and 4-byte field in the first 64 bytes of every directory structure (the counts and
    RVAs the readers trust), set to each smash value in turn: few of them reach a read past the end
    of the file, so they are all tried rather than left to the fuzzer's luck."""
    tried = 0
    with _readers_watched() as unexpected:
        for data, spans in zip(samples, directory_spans):
            for start, size in spans:
                for width in (2, 4):
                    for at in range(start, start + min(size, 64) - width + 1, width):
                        for value in (0, 0xFF, 0x7F, 0x80):
                            smashed = bytearray(data)
                            smashed[at:at + width] = bytes([value]) * width
                            _check_parse(bytes(smashed), unexpected)
                            tried += 1
    assert tried > 2000


def test_checked_pe_facts_are_built_the_same_way():
    # the trace reader checks `pe` objects against the schema, after which the replay builds them
    # without checking again: both ways must give the same facts
    import json

    from dlltrace.pe import pe_facts_from_dict

    root = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
    seen = 0
    for path in sorted(root.glob("s*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            e = json.loads(line)
            if e.get("ev") == "file" and "pe" in e:
                assert pe_facts_from_dict(e["pe"], checked=True) == pe_facts_from_dict(e["pe"])
                seen += 1
    assert seen > 20
