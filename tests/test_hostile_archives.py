"""Hostile wheels for `dlltrace deps` and `dlltrace check` (issue 28, items 3, 4 and 6; worlds/static.py
zip_members, read_member, member_name_problem; docs/limits.md).

Each zip is written here byte by byte (struct), with its size and offset fields set to lies: a zip64
extra field shorter than it says, declared sizes of 2**62 and 2**64-2, a central directory of 4 GB in a
file of 300 bytes, members that overlap or run past the file. Each is one `dlltrace: ... not a readable
wheel (zip): ...` line on stderr and exit 2 (a bad input), never a traceback, never exit 9, and never
exit 1 from `check` (which a CI reads as a FAIL of the wheel). A member named as pip refuses to install
(`../../../Windows/System32/msvcp140.dll`, `C:/...`, `/...`, `\\...`) makes the wheel an input error
naming the member: it never satisfies an import. A 1 MB member inflating to 1 GB of zeros is read no
further than its first chunk (no `MZ`), so it costs little memory; what one wheel inflates to in all is
bounded (limits.py zip_inflate)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from dlltrace import cli
from dlltrace.worlds import static
from dlltrace.worlds.static import INFLATE_CHUNK, ZipError, member_name_problem, read_member, zip_members

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
WHEEL = "pkg-1.0-cp311-cp311-win_amd64.whl"
MZ = b"MZ" + bytes(200)  # (not a whole PE: a member read as "not a PE file", enough for the zip's sake)


# --- a zip, byte by byte ---------------------------------------------------------------------------------
@dataclass
class Entry:
    name: bytes
    payload: bytes = b""  # as stored (deflated already for method 8)
    method: int = 0
    crc: int = 0
    usize: int = 0
    csize: Optional[int] = None  # the central directory's fields (None: the true ones)
    offset: Optional[int] = None
    cd_extra: bytes = b""
    flags: int = 0x800


def stored(name: str, data: bytes) -> Entry:
    return Entry(name.encode("utf-8"), data, 0, zlib.crc32(data), len(data))


def deflated(name: str, data: bytes) -> Entry:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return Entry(name.encode("utf-8"), c.compress(data) + c.flush(), 8, zlib.crc32(data), len(data))


def zip64_extra(*vals: int, length: Optional[int] = None) -> bytes:
    body = b"".join(struct.pack("<Q", v) for v in vals)
    return struct.pack("<2H", 1, len(body) if length is None else length) + body


def zip_bytes(entries: list[Entry], cd_size: Optional[int] = None, cd_offset: Optional[int] = None,
              zip64_end: Optional[tuple[int, int, int]] = None) -> bytes:
    out = bytearray()
    at = []
    for e in entries:
        at.append(len(out))
        out += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, e.flags, e.method, 0, 0, e.crc, len(e.payload),
                           min(e.usize, 0xFFFFFFFF), len(e.name), 0) + e.name + e.payload
    cd_at = len(out)
    for e, off in zip(entries, at):
        csize = len(e.payload) if e.csize is None else e.csize
        out += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, e.flags, e.method, 0, 0, e.crc,
                           min(csize, 0xFFFFFFFF), min(e.usize, 0xFFFFFFFF), len(e.name), len(e.cd_extra), 0, 0, 0,
                           0, min(off if e.offset is None else e.offset, 0xFFFFFFFF)) + e.name + e.cd_extra
    size = len(out) - cd_at
    if zip64_end is not None:  # a zip64 end record with these (total, size, offset), its locator, the end record
        rec_at = len(out)
        out += struct.pack("<4sQ2H2I4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, zip64_end[0], zip64_end[0], zip64_end[1],
                           zip64_end[2])
        out += struct.pack("<4sIQI", b"PK\x06\x07", 0, rec_at, 1)
        out += struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                           size if cd_size is None else cd_size, cd_at if cd_offset is None else cd_offset, 0)
    return bytes(out)


def write_wheel(folder: Path, data: bytes, name: str = WHEEL) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    w = folder / name
    w.write_bytes(data)
    return w


def dlltrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], capture_output=True, text=True, env=ENV,
                          timeout=300)


def assert_input_error(run: subprocess.CompletedProcess, *needles: str) -> str:
    """One `dlltrace: ` line, exit 2 (README: a bad input; docs/static.md: an unreadable zip), no traceback."""
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlltrace: "), run.stderr
    assert run.returncode == 2, (run.returncode, run.stderr, run.stdout[-500:])
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# --- lies in the zip's fields ----------------------------------------------------------------------------
def _short_zip64() -> bytes:
    e = stored("pkg/x.dll", MZ)
    e.csize, e.cd_extra = 0xFFFFFFFF, zip64_extra(len(MZ), length=16)  # says 16 bytes, holds 8
    return zip_bytes([e])


def _declared(usize: int, csize: Optional[int] = None, method: int = 8) -> bytes:
    e = deflated("pkg/x.dll", MZ) if method == 8 else stored("pkg/x.dll", MZ)
    vals = [usize] + ([csize] if csize is not None else [])
    e.usize, e.cd_extra = usize, zip64_extra(*vals)
    if csize is not None:
        e.csize = csize
    return zip_bytes([e])


def _overlapping() -> bytes:  # two entries sharing one local header (the non-recursive zip bomb's trick)
    a, b = deflated("pkg/a.dll", MZ), deflated("pkg/b.dll", MZ)
    b.offset = 0
    return zip_bytes([a, b])


def _past_the_next() -> bytes:  # a's data declared to run into b's header
    a, b = stored("pkg/a.dll", MZ), stored("pkg/b.dll", MZ)
    a.csize, a.usize = len(MZ) + 40, len(MZ) + 40
    return zip_bytes([a, b])


def _cd_entry_cut() -> bytes:
    e = stored("pkg/x.dll", MZ)
    e.cd_extra = b"\x01\x00"  # (its length is counted, then the directory is said to end 1 byte early)
    data = zip_bytes([e])
    return zip_bytes([e], cd_size=len(data) - 22 - (30 + len(e.name) + len(MZ)) - 1)


HOSTILE = {
    "zip64 extra shorter than it says": (_short_zip64, "zip64 extra field"),
    "a declared size of 2**62": (lambda: _declared(1 << 62), "declares"),
    "a declared size of 2**64-2": (lambda: _declared((1 << 64) - 2, (1 << 64) - 2, method=0), "do not fit"),
    "a compressed size of 2**62": (lambda: _declared(len(MZ), 1 << 62), "do not fit"),
    "a central directory of 4 GB": (lambda: zip_bytes([stored("pkg/x.dll", MZ)], cd_size=0xFFFFFFF0), "does not fit"),
    "a zip64 central directory of 2**62": (lambda: zip_bytes([stored("pkg/x.dll", MZ)], zip64_end=(1, 1 << 62, 0)),
                                           "does not fit"),
    "a central directory past the end": (lambda: zip_bytes([stored("pkg/x.dll", MZ)], cd_offset=1 << 31),
                                         "does not fit"),
    "a zip64 end record past the end": (lambda: zip_bytes([stored("pkg/x.dll", MZ)], zip64_end=(1, 46, 1 << 40))[:-42]
                                        + struct.pack("<4sIQI", b"PK\x06\x07", 0, 1 << 40, 1)
                                        + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                                                      0xFFFFFFFF, 0), "zip64 end record"),
    "two members on one local header": (_overlapping, "overlapping"),
    "a member running into the next": (_past_the_next, "do not fit"),
    "a central directory entry cut": (_cd_entry_cut, "central directory"),
    "stored with two sizes": (lambda: zip_bytes([Entry(b"pkg/x.dll", MZ, 0, zlib.crc32(MZ), 5000)]), "stored"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("command", ["check", "deps"])
def test_a_lie_in_the_zip_is_one_line_and_exit_2_never_1(tmp_path, case, command):
    """(Before: struct.error, MemoryError, OverflowError tracebacks as "internal error" exit 9, or members
    read from each other's bytes.)"""
    make, needle = HOSTILE[case]
    w = write_wheel(tmp_path, make())
    assert_input_error(dlltrace(command, str(w), "--no-cache"), "not a readable wheel (zip)", needle)


def each_damaged_member_raises(tmp_path: Path, read, big: bytes) -> None:
    """`read(wheel, member)` on each member zip_members accepts but whose bytes lie: an inflation past the declared
    size, a bad CRC (deflated and stored), a deflate stream cut short, a local header that is not one: a ZipError
    each, never another exception."""
    cases = []
    e = deflated("pkg/x.dll", b"MZ" + big)
    e.usize = 100  # inflates past it
    cases.append(e)
    e = deflated("pkg/x.dll", b"MZ" + big)
    e.crc ^= 1
    cases.append(e)
    e = deflated("pkg/x.dll", b"MZ" + big)
    e.payload = e.payload[:len(e.payload) // 2]
    cases.append(e)
    e = stored("pkg/x.dll", b"MZ" + big)
    e.crc ^= 1
    cases.append(e)
    for i, e in enumerate(cases):
        w = write_wheel(tmp_path / str(i), zip_bytes([e]))
        (m,) = zip_members(w)
        with pytest.raises(ZipError):
            read(w, m)
    w = write_wheel(tmp_path / "nolocal", zip_bytes([stored("pkg/x.dll", MZ)]))
    (m,) = zip_members(w)
    data = bytearray(w.read_bytes())
    data[0:4] = b"XXXX"
    w.write_bytes(bytes(data))
    with pytest.raises(ZipError, match="no local file header"):
        read(w, m)


def test_the_readers_own_errors_are_zip_errors(tmp_path):
    """read_member on what zip_members accepted: an inflation past the declared size, a bad CRC, a deflate
    stream cut short, a local header that is not one: each a ZipError, never another exception."""
    each_damaged_member_raises(tmp_path, read_member, os.urandom(3000))


def test_a_sound_zip_is_read_whole_with_its_crc(tmp_path):
    """The guards keep what is sound: stored and deflated members, a name with `.` and `..` that stays
    inside (pip installs it where its normalized path says), read whole."""
    data = b"MZ" + os.urandom(3 * INFLATE_CHUNK + 123)  # (several chunks, incompressible)
    zeros = b"MZ" + bytes(5 * INFLATE_CHUNK)  # (a deflate stream far smaller than what it inflates to)
    w = write_wheel(tmp_path, zip_bytes([deflated("pkg/a.dll", data), stored("pkg/./b.dll", data),
                                         deflated("pkg/sub/../c.dll", zeros)]))
    members = zip_members(w)
    assert [read_member(w, m) for m in members] == [data, data, zeros]
    assert static.wheel_member_path("pkg/sub/../c.dll", "3.11") == static.wheel_member_path("pkg/c.dll", "3.11")


# --- member names pip refuses ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, why", [
    ("../../../Windows/System32/msvcp140.dll", "`..`"),
    ("pkg/../../x.dll", "`..`"),
    ("pkg\\..\\..\\..\\x.dll", "`..`"),
    ("C:/Windows/System32/msvcp140.dll", "drive letter"),
    ("c:x.dll", "drive letter"),
    ("/Windows/System32/msvcp140.dll", "absolute"),
    ("\\Windows\\System32\\msvcp140.dll", "absolute"),
    ("\\\\server\\share\\msvcp140.dll", "absolute"),
    ("pkg.data/data/../../../x.dll", "`..`"),
    ("pkg-1.0.data/PLATLIB/pkg/x.dll", "unknown .data scheme 'PLATLIB'"),
    ("pkg-1.0.data/lib/x.dll", "unknown .data scheme 'lib'"),
    ("pkg-1.0.data/x.dll", "no scheme folder"),
])
def test_a_name_pip_refuses_is_refused(name, why):
    assert why in (member_name_problem(name) or "")


@pytest.mark.parametrize("name", ["pkg/x.dll", "pkg/../x.dll", "./pkg/x.dll", "pkg.data/scripts/x.exe", "pkg/C:x.dll",
                                  "pkg/..x/y.dll", "..pkg/x.dll", "pkg-1.0.data/", "pkg-1.0.data/platlib/",
                                  "pkg-1.0.data/platlib/pkg/x.dll", "pkg/x.data/y.dll"])
def test_a_name_pip_installs_is_kept(name):
    assert member_name_problem(name) is None


MSVCP_C = "__declspec(dllexport) int fm(void) { return 1; }\n"
A_C = "int fm(void);\n__declspec(dllexport) int fa(void) { return fm(); }\n"


@pytest.fixture(scope="module")
def needs_msvcp(tmp_path_factory) -> dict[str, bytes]:
    """a.dll, which imports fm from msvcp140.dll, and a msvcp140.dll that exports it (mingw)."""
    from winetools import mingw_compile, require

    require("mingw64")
    d = tmp_path_factory.mktemp("msvcp")
    (d / "msvcp140.c").write_text(MSVCP_C)
    (d / "a.c").write_text(A_C)
    msvcp = mingw_compile([d / "msvcp140.c"], d / "msvcp140.dll", dll=True,
                          extra=[f"-Wl,--out-implib,{d / 'libmsvcp140.a'}"])
    a = mingw_compile([d / "a.c", d / "libmsvcp140.a"], d / "a.dll", dll=True)
    return {"a": a.read_bytes(), "msvcp": msvcp.read_bytes()}


@pytest.mark.parametrize("name", ["../../../Windows/System32/msvcp140.dll", "../../msvcp140.dll",
                                  "C:/Windows/System32/msvcp140.dll", "/Python311/msvcp140.dll",
                                  "pkg-1.0.data/PLATLIB/pkg/msvcp140.dll"])
def test_check_never_passes_a_wheel_through_a_member_pip_refuses(tmp_path, needs_msvcp, name):
    """A wheel whose a.dll needs msvcp140.dll, carried under a name pip refuses: an input error naming the
    member (exit 2), not a PASS. (Before: `check --no-vc-runtime` PASSed, "every import bundled", for the
    `..` names.) The same wheel carrying it as pkg/msvcp140.dll passes: the test's DLLs are sound."""
    good = write_wheel(tmp_path / "good", zip_bytes([deflated("pkg/a.dll", needs_msvcp["a"]),
                                                      deflated("pkg/msvcp140.dll", needs_msvcp["msvcp"])]))
    ok = dlltrace("check", str(good), "--no-cache", "--no-vc-runtime")
    assert ok.returncode == 0 and ok.stdout.strip().splitlines()[-1].startswith("PASS"), ok.stdout + ok.stderr
    bad = write_wheel(tmp_path / "bad", zip_bytes([deflated("pkg/a.dll", needs_msvcp["a"]),
                                                    deflated(name, needs_msvcp["msvcp"])]))
    for command in ("check", "deps"):
        line = assert_input_error(dlltrace(command, str(bad), "--no-cache", "--no-vc-runtime"),
                                  repr(name), "pip refuses")
        assert "not a readable wheel" in line


# --- inflation: bounded, and stopped early -----------------------------------------------------------------
@pytest.fixture(scope="module")
def gigabyte_of_zeros(tmp_path_factory) -> Path:
    """A wheel (about 1 MB) whose pkg/x.dll inflates to 1 GiB of zeros: deflated a chunk at a time, never
    1 GiB in memory."""
    zero = bytes(16 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = b"".join(c.compress(zero) for _ in range(64)) + c.flush()
    crc = 0
    for _ in range(64):
        crc = zlib.crc32(zero, crc)
    e = Entry(b"pkg/x.dll", payload, 8, crc, 1 << 30)
    return write_wheel(tmp_path_factory.mktemp("bomb"), zip_bytes([e]))


# (this process's own peak, VmHWM: ru_maxrss would carry the parent's over fork and exec -- pytest's gigabytes in a
# whole run, under which a growth of 1 GiB would not show)
MEASURE = """
import re, sys
from dlltrace import cli
from dlltrace.diagnosis import static  # (what the command imports anyway, before the first measure)
import rich.console
def peak():
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
before = peak()
code = cli.main(sys.argv[1:])
after = peak()
print(f"GREW {(after - before) // 1024}", file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM of /proc/self/status: Linux")
@pytest.mark.parametrize("command", ["check", "deps"])
def test_a_gigabyte_of_zeros_costs_no_gigabyte(gigabyte_of_zeros, command):
    """Its first bytes are not `MZ`: read no further than the first chunk, it is "not a PE file" (check:
    FAIL, a problem of the wheel; deps: a load that would fail), and the command's peak memory grows by
    far less than the 1 GiB it inflates to. (Before: 1 GiB more.)"""
    run = subprocess.run([sys.executable, "-c", MEASURE, command, str(gigabyte_of_zeros), "--no-cache"],
                         capture_output=True, text=True, env=ENV, timeout=300)
    grew = int(run.stderr.rsplit("GREW ", 1)[1])
    assert "Traceback" not in run.stderr and run.returncode == 1, run.stderr
    assert "not a readable PE" in run.stdout or "not pe" in run.stdout.lower(), run.stdout
    assert grew < 200, f"peak memory grew by {grew} MiB"


def test_the_zeros_are_read_no_further_than_a_chunk(gigabyte_of_zeros):
    (m,) = zip_members(gigabyte_of_zeros)
    assert m.file_size == 1 << 30
    head = read_member(gigabyte_of_zeros, m, magic=b"MZ")
    assert 0 < len(head) <= INFLATE_CHUNK and not head.startswith(b"MZ")


def test_what_one_wheel_inflates_to_is_bounded(tmp_path, monkeypatch, capsys):
    """Three members of 8 MiB each (MZ, then zeros: a PE's first bytes, so read whole) under a limit of
    20 MiB for the wheel: the third passes it, one line, exit 2. The limit is limits.py's zip_inflate (16 GiB:
    docs/limits.md), lowered here as a user lowers it (`dlltrace --limit zip_inflate=20M check ...`)."""
    body = b"MZ" + bytes(8 << 20)
    w = write_wheel(tmp_path, zip_bytes([deflated(f"pkg/{c}.dll", body) for c in "abc"]))
    # (setenv first, so that monkeypatch restores the variable's absence at the end: cli.main sets it in
    # os.environ, and a delenv of a value it set would restore that value for the tests after, which then read
    # a 20 MiB bound: seen under pytest-xdist, whose order put test_gate.py after this file)
    monkeypatch.setenv("DLLTRACE_LIMITS", "")
    for command in ("check", "deps"):
        capsys.readouterr()
        code = cli.main(["--limit", "zip_inflate=20M", command, str(w), "--no-cache"])
        monkeypatch.delenv("DLLTRACE_LIMITS", raising=False)
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "inflate to more than 20,971,520 bytes" in lines[0], (code, err)


def test_the_streamed_readers_errors_are_zip_errors(tmp_path):
    """member_pe_facts (check and deps read a member's PE facts as it inflates, never whole: MemberView) on the
    members read_member refuses: an inflation past the declared size, a bad CRC, a deflate stream cut short,
    a local header that is not one; each a ZipError, whatever the PE reader made of the bytes before."""
    from dlltrace.worlds.static import member_pe_facts

    big = os.urandom(3000)
    each_damaged_member_raises(tmp_path, member_pe_facts, big)
    ok = write_wheel(tmp_path / "ok", zip_bytes([deflated("pkg/x.dll", b"MZ" + big), stored("pkg/y.dll", b"ZM" + big)]))
    from dlltrace.pe import pe_facts_from_bytes
    assert [member_pe_facts(ok, m) for m in zip_members(ok)] == [pe_facts_from_bytes(b"MZ" + big),
                                                                   pe_facts_from_bytes(b"ZM" + big)]
