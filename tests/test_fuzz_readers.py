"""Fuzzing the readers of what strangers send (issue 28: "the zip reader, the PE and ELF readers ... the Markdown
renderer: at least 10,000 inputs each a run, no traceback, no run over its bounds"): each reader is given 10,000
mutations of a small real input (a wheel, a mingw-built DLL, a gcc-built shared object, report words) and must
answer with its own result or its documented error -- never another exception -- and within its bounds.

Seeded (DLLTRACE_FUZZ_SEED, as tests/test_fuzz.py) and reproducible; a failing input is saved under the test's
tmp folder and named in the failure. The trace and scenario readers are fuzzed through the commands by
tests/test_fuzz.py."""

from __future__ import annotations

import io
import os
import random
import re
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

import winetools

SEED = int(os.environ.get("DLLTRACE_FUZZ_SEED", "20261205"))
N = int(os.environ.get("DLLTRACE_FUZZ_N", "10000"))


def mutate(data: bytes, rng: random.Random) -> bytes:
    """A few byte-level edits: flips, random bytes, a field set to 0 or 0xff..., a cut, a splice, a repeat."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        op = rng.random()
        if not b:
            b += bytes(rng.randrange(256) for _ in range(8))
        i = rng.randrange(len(b))
        if op < 0.35:
            b[i] ^= 1 << rng.randrange(8)
        elif op < 0.55:
            b[i] = rng.randrange(256)
        elif op < 0.70:  # a 2/4/8-byte field to an extreme
            w = rng.choice((2, 4, 8))
            b[i:i + w] = rng.choice((b"\x00", b"\xff", b"\x7f", b"\x80")) * w
        elif op < 0.80:
            del b[rng.randrange(len(b)):]
        elif op < 0.90:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 64)]
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return bytes(b)


def run_fuzz(name: str, seeds: list, check, tmp_path: Path, summary, budget_s: float) -> None:
    rng = random.Random(f"{SEED}/{name}")
    started = time.perf_counter()
    worst = 0.0
    for i in range(N):
        data = mutate(rng.choice(seeds), rng)
        t0 = time.perf_counter()
        try:
            check(data)
        except Exception as e:  # (the reader's own errors are results: anything else is a bug)
            bad = tmp_path / f"{name}-{i}.bin"
            bad.write_bytes(data)
            raise AssertionError(f"{name} input {i} (seed {SEED}, saved as {bad}): {type(e).__name__}: {e}") from e
        worst = max(worst, time.perf_counter() - t0)
    took = time.perf_counter() - started
    summary[f"fuzz {name}"] = lambda: f"fuzz {name}: {N:,} inputs in {took:.1f} s, the slowest {worst * 1000:.0f} ms, none raised"
    assert worst < budget_s, f"{name}: an input took {worst:.2f} s"


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dll_bytes(tmp_path_factory) -> list:
    """Small real DLLs, built by mingw from fixtures/dlls (one with imports, one with exports, one plain)."""
    winetools.require("mingw64")
    d = tmp_path_factory.mktemp("fuzz-dlls")
    leaf = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "leaf.c"], d / "leaf.dll", dll=True)
    mid = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "mid.c", leaf], d / "mid.dll", dll=True)
    plain = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "plain.c"], d / "plain.dll", dll=True)
    return [leaf.read_bytes(), mid.read_bytes(), plain.read_bytes()]


def test_fuzz_the_pe_reader(dll_bytes, tmp_path, summary):
    from dlltrace.pe import pe_facts_from_bytes
    from dlltrace.model import PEError, PEFacts

    def check(data: bytes) -> None:
        assert isinstance(pe_facts_from_bytes(data), (PEFacts, PEError))
    run_fuzz("pe", dll_bytes, check, tmp_path, summary, budget_s=2.0)


def test_fuzz_the_zip_reader(dll_bytes, tmp_path, summary):
    from dlltrace.worlds.static import ZipError, read_member, zip_members

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/__init__.py", "import os\n")
        z.writestr("pkg/x.dll", dll_bytes[0])
        z.writestr("pkg-1.0.dist-info/RECORD", "pkg/x.dll,,\n")
    wheel = tmp_path / "w.whl"

    def check(data: bytes) -> None:
        wheel.write_bytes(data)
        try:
            for m in zip_members(wheel, (".dll", ".py")):
                read_member(wheel, m)
        except ZipError:
            pass
    run_fuzz("zip", [buf.getvalue()], check, tmp_path, summary, budget_s=2.0)


def test_fuzz_the_elf_reader(tmp_path, summary):
    from dlltrace.elf import ELFError, ELFFacts, read_elf_bytes

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc") if not os.environ.get("CI") else pytest.fail("CI needs gcc")
    (tmp_path / "x.c").write_text("int fx(void) { return 1; }\n")
    so = tmp_path / "libx.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libx.so.1", "-Wl,-rpath,$ORIGIN/lib", "-o", str(so),
                    str(tmp_path / "x.c"), "-lm"], check=True)

    def check(data: bytes) -> None:
        assert isinstance(read_elf_bytes(data), (ELFFacts, ELFError))
    run_fuzz("elf", [so.read_bytes()], check, tmp_path, summary, budget_s=2.0)


def test_fuzz_the_markdown_escapes(tmp_path, summary):
    """Names from a trace through each Markdown context: the rendered HTML (GitHub's cmark-gfm) never gets a
    link, an image, raw HTML, a heading or a table row from the name, and the name reads back whole."""
    cmarkgfm = pytest.importorskip("cmarkgfm") if not os.environ.get("CI") else __import__("cmarkgfm")
    from dlltrace.render.escape import escape_code_span, escape_prose, escape_table_cell

    parts = ["`", "``", "|", "\n", "<img src=x onerror=alert(1)>", "@everyone", "[x](javascript:alert(1))", "*", "_",
             "# ", "- [ ] ", "\u202e", "\\", "http://x.y/", "www.x.y", "a@b.co", "</details>", "&amp;", "1. ", "    "]

    def html(md: str) -> str:
        return cmarkgfm.github_flavored_markdown_to_html(md, options=cmarkgfm.Options.CMARK_OPT_UNSAFE)

    plain = html(f"Load {escape_code_span('x.dll')} from {escape_prose('C x')}.\n\n| a | b |\n|---|---|\n| "
                 + escape_table_cell(escape_code_span("x.dll")) + " | " + escape_table_cell(escape_prose("y")) + " |\n")
    shape = re.findall(r"</?[a-z0-9]+", plain)

    def check(data: bytes) -> None:
        name = data.decode("utf-8", "replace")
        md = (f"Load {escape_code_span(name)} from {escape_prose(name)}.\n\n| a | b |\n|---|---|\n| "
              + escape_table_cell(escape_code_span(name)) + " | " + escape_table_cell(escape_prose(name)) + " |\n")
        assert re.findall(r"</?[a-z0-9]+", html(md)) == shape, md
    seeds = ["".join(random.Random(i).choice(parts) for _ in range(6)).encode() for i in range(50)]
    run_fuzz("markdown", seeds, check, tmp_path, summary, budget_s=1.0)
