"""The ELF reader (tracer/dlltrace/elf.py: the header, the program headers and the dynamic segment, as ld.so reads
them) against pyelftools, which it replaced (issue 25: pyelftools took 0.53 s of a 0.96 s Linux run): the same facts
for every shared object of this machine's library folders, this Python's lib-dynload and site-packages; and a file
cut short where ld.so dies (issue 28 item 9: it was "1 objects load, no problem")."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from dlltrace.elf import VER_FLG_WEAK, ELFError, ELFFacts, VersionNeed, read_elf

ROOT = Path(__file__).resolve().parent.parent


def pyelftools_facts(path: str) -> ELFFacts:
    """The facts as pyelftools reads them (the reader elf.py had until issue 25)."""
    from elftools.elf.dynamic import DynamicSection, DynamicSegment
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

    with open(path, "rb") as f:
        elf = ELFFile(f)
        needed: list[str] = []
        rpath = runpath = soname = None
        flags_1 = 0
        dyn: Any = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
        if dyn is None:
            dyn = next((s for s in elf.iter_segments() if isinstance(s, DynamicSegment)), None)
        for t in (dyn.iter_tags() if dyn is not None else ()):
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
        interp = next((seg.get_interp_name() for seg in elf.iter_segments() if seg["p_type"] == "PT_INTERP"), None)
        needs, defs = [], []
        for s in elf.iter_sections():
            if isinstance(s, GNUVerNeedSection):
                for vn, aux in s.iter_versions():
                    strong, weak = [], []
                    for a in aux:
                        (weak if a["vna_flags"] & VER_FLG_WEAK else strong).append(a.name)
                    needs.append(VersionNeed(str(vn.name), tuple(strong), tuple(weak)))
            elif isinstance(s, GNUVerDefSection):
                for vd, aux in s.iter_versions():
                    if not vd["vd_flags"] & 0x1:
                        names = [a.name for a in aux]
                        if names:
                            defs.append(names[0])
        return ELFFacts(elf_class=elf.elfclass, machine=str(elf["e_machine"]), elf_type=str(elf["e_type"]),
                        needed=tuple(needed), rpath=rpath, runpath=runpath, soname=soname, flags_1=flags_1,
                        version_needs=tuple(needs), version_defs=tuple(defs), interp=interp)


def shared_objects(limit: int = 400) -> list[str]:
    pats = ["/usr/lib/x86_64-linux-gnu/*.so*", "/lib/x86_64-linux-gnu/*.so*", "/usr/lib/aarch64-linux-gnu/*.so*",
            os.path.join(sysconfig.get_paths()["platstdlib"], "lib-dynload", "*.so"),
            os.path.join(sysconfig.get_paths()["purelib"], "**", "*.so*")]
    out: list[str] = []
    for p in pats:
        for f in sorted(glob.glob(p, recursive=True)):
            if os.path.isfile(f) and not os.path.islink(f) and open(f, "rb").read(4) == b"\x7fELF":
                out.append(f)
    out.append(sys.executable if os.path.isfile(sys.executable) else "/bin/sh")
    return sorted(set(out))[:limit] if len(out) > limit else out


@pytest.mark.parametrize("chunk", range(4))
def test_rule_elf_facts_are_pyelftools_facts_for_every_real_object(chunk):
    files = shared_objects()[chunk::4]
    assert len(files) > 10
    diffs = []
    for f in files:
        try:
            want = pyelftools_facts(f)
        except Exception:  # (pyelftools cannot read it: nothing to compare)
            continue
        got = read_elf(f)
        if got != want:
            diffs.append((f, got, want))
    assert not diffs, diffs[:3]


def test_rule_strings_of_a_big_dynamic_string_table(tmp_path):
    """A library whose dynamic string table is tens of MB (TensorFlow's _pywrap_tensorflow_internal.so: every C++
    symbol name), its DT_NEEDED names at the end: read where they are (a first cut of this reader read at most
    16 MB of the table and then knew no DT_NEEDED at all; the real TensorFlow situation caught it)."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc") if not os.environ.get("CI") else pytest.fail("CI needs gcc")
    src = tmp_path / "big.c"
    src.write_text("".join(f"int f{i}_{'x' * 9000}(void) {{ return {i}; }}\n" for i in range(2000)))
    so = tmp_path / "libbig.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src), "-Wl,--no-as-needed", "-lm",
                    "-Wl,-rpath,$ORIGIN/lib"], check=True)
    assert so.stat().st_size > 20 << 20
    got = read_elf(str(so))
    assert got == pyelftools_facts(str(so)) and "libm.so.6" in got.needed and got.runpath == "$ORIGIN/lib", got


def elf_differences(files) -> list[str]:
    """The files whose facts this reader and pyelftools do not agree on (tests/test_real_situations.py checks each
    real situation's environment with it: TensorFlow, PySide6, onnxruntime-gpu, cupy, ...)."""
    diffs = []
    for f in files:
        try:
            if not os.path.isfile(f) or os.path.islink(f) or open(f, "rb").read(4) != b"\x7fELF":
                continue
            want = pyelftools_facts(f)
        except Exception:
            continue
        if read_elf(f) != want:
            diffs.append(f)
    return diffs


def test_rule_a_shared_object_cut_short_is_damaged_as_ld_so_dies_of_it(tmp_path):
    """A .so cut inside its dynamic segment: ld.so maps it and the process dies (SIGBUS; no words of its own): a
    failure, never "loads, no problem"; cut inside its program headers: ld.so's "cannot read file data"."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc") if not os.environ.get("CI") else pytest.fail("CI needs gcc")
    (tmp_path / "x.c").write_text("#include <stdio.h>\nint fx(void) { return puts(\"x\"); }\n")
    so = tmp_path / "libx.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "x.c")], check=True)
    data = so.read_bytes()
    whole = read_elf(str(so))
    assert isinstance(whole, ELFFacts) and whole.needed
    cut = tmp_path / "libcut.so"
    cut.write_bytes(data[:12000] if len(data) > 12000 else data[:len(data) // 2])
    res = read_elf(str(cut))
    assert isinstance(res, ELFError) and res.kind == "damaged", res
    # the real ld.so: the process that dlopens it dies (no Python exception to catch)
    r = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(cut)!r})"], capture_output=True, timeout=60)
    assert r.returncode != 0
    (tmp_path / "libtiny.so").write_bytes(data[:100])
    assert read_elf(str(tmp_path / "libtiny.so")) == ELFError("unreadable", "cannot read file data")
    # deps of the cut file: a failure, exit 1, with the words
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(cut)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == 1 and "the file ends before its dynamic section" in r.stdout + r.stderr, (r.stdout, r.stderr)
