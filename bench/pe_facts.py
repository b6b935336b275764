#!/usr/bin/env python3
"""Time dlltrace's read_pe_facts against a full pefile.PE(path) on real Windows DLLs.

    python bench/pe_facts.py                      # torch 2.5.1 (win_amd64, cp311)
    python bench/pe_facts.py --baseline-limit-mb 300   # include torch_cpu.dll (~49 s)
    python bench/pe_facts.py --wheel onnxruntime==1.20.1

The wheel is fetched with `pip download` into bench/.cache/ (gitignored) and only its
.dll members are extracted. Offline, or when the download fails, it says so and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tracer"))

from dlltrace.model import PEError  # noqa: E402
from dlltrace.pe import read_pe_facts  # noqa: E402

CACHE = HERE / ".cache"
DEFAULT_WHEEL = "torch==2.5.1"


@dataclass
class Row:
    name: str
    size: int
    ours: float
    baseline: Optional[float]  # None when skipped
    summary: str


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", default=DEFAULT_WHEEL, help=f"a pip requirement (default {DEFAULT_WHEEL})")
    ap.add_argument("--python-version", default="3.11")
    ap.add_argument("--baseline-limit-mb", type=float, default=50.0,
                    help="skip the full pefile.PE baseline on files above this size (default 50)")
    ap.add_argument("--top", type=int, default=5, help="per-file lines for the largest N files")
    ap.add_argument("--dlls", type=Path, help="time the .dll files in this folder instead of a wheel")
    args = ap.parse_args(argv)

    if args.dlls:
        dlls = sorted(args.dlls.glob("*.dll"))
    else:
        wheel = fetch_wheel(args.wheel, args.python_version)
        if wheel is None:
            return 0
        dlls = extract_dlls(wheel)
    if not dlls:
        print("no .dll files found; nothing to time")
        return 0
    rows = [time_one(p, args.baseline_limit_mb) for p in dlls]
    report(rows, args.top, args.baseline_limit_mb)
    return 0


# --- getting the DLLs --------------------------------------------------------------------
def fetch_wheel(requirement: str, python_version: str) -> Optional[Path]:
    CACHE.mkdir(parents=True, exist_ok=True)
    project = requirement.split("==")[0].replace("-", "_").lower()
    version = requirement.split("==")[1] if "==" in requirement else ""
    cached = [w for w in CACHE.glob("*.whl") if w.name.lower().startswith(f"{project}-{version}")]
    if cached:
        print(f"using cached {cached[0].name}")
        return cached[0]
    free = shutil.disk_usage(CACHE).free
    if free < 4 * 2**30:
        print(f"skipped: only {free / 2**30:.1f} GB free in {CACHE}; the torch wheel needs ~3 GB with its DLLs")
        return None
    cmd = [sys.executable, "-m", "pip", "download", "--platform", "win_amd64", "--only-binary=:all:",
           "--no-deps", requirement, "--python-version", python_version, "-d", str(CACHE)]
    print("downloading:", " ".join(cmd[2:]))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"skipped: could not download {requirement} ({exc})")
        return None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"skipped: could not download {requirement} (offline?): {last}")
        return None
    cached = [w for w in CACHE.glob("*.whl") if w.name.lower().startswith(project)]
    if not cached:
        print(f"skipped: pip reported success but no {project} wheel is in {CACHE}")
        return None
    return max(cached, key=lambda w: w.stat().st_mtime)


def extract_dlls(wheel: Path) -> list:
    """Extract only the wheel's .dll members (one copy per file name), once."""
    out = CACHE / wheel.stem
    try:
        with zipfile.ZipFile(wheel) as z:
            seen = set()
            paths = []
            members = [i for i in z.infolist() if i.filename.lower().endswith(".dll")]
            torch_lib = [i for i in members if i.filename.startswith("torch/lib/")]
            for info in sorted(torch_lib or members, key=lambda i: i.filename):
                name = Path(info.filename).name
                if name.lower() in seen:
                    continue
                seen.add(name.lower())
                target = out / name
                if not target.exists() or target.stat().st_size != info.file_size:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(info) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                paths.append(target)
    except (OSError, zipfile.BadZipFile) as exc:
        print(f"skipped: cannot read {wheel.name}: {exc}")
        return []
    return paths


# --- timing ----------------------------------------------------------------------------------
def time_one(path: Path, limit_mb: float) -> Row:
    size = path.stat().st_size
    t0 = time.perf_counter()
    facts = read_pe_facts(path)
    ours = time.perf_counter() - t0
    if isinstance(facts, PEError):
        summary = f"{facts.kind}: {facts.message}"
    else:
        summary = (f"{facts.machine} imports={len(facts.imports)} delay={len(facts.delay_imports)} "
                   f"exports={len(facts.exports)} flags={facts.dependent_load_flags:#x} "
                   f"version={facts.file_version}")
    baseline = None
    if size <= limit_mb * 2**20:
        baseline = time_full_pefile(path)
    return Row(path.name, size, ours, baseline, summary)


def time_full_pefile(path: Path) -> float:
    import pefile

    gc.collect()
    t0 = time.perf_counter()
    try:
        pe = pefile.PE(str(path))
        pe.close()
    except Exception as exc:  # noqa: BLE001 - the baseline failing is a result, not a crash
        print(f"  (full pefile.PE failed on {path.name}: {type(exc).__name__}: {exc})")
    return time.perf_counter() - t0


def report(rows: list, top: int, limit_mb: float) -> None:
    rows.sort(key=lambda r: -r.size)
    print(f"\n{len(rows)} DLLs, {sum(r.size for r in rows) / 2**20:.1f} MB\n")
    print(f"{'file':28} {'MB':>8} {'read_pe_facts':>14} {'pefile.PE':>11} {'ratio':>8}")
    for r in rows[:top]:
        base = f"{r.baseline:10.3f}s" if r.baseline is not None else f"{'skipped':>11}"
        ratio = f"{r.baseline / r.ours:7.0f}x" if r.baseline is not None else f"{'-':>8}"
        print(f"{r.name:28} {r.size / 2**20:8.1f} {r.ours * 1000:12.1f}ms {base} {ratio}")
    for r in rows[:top]:
        print(f"  {r.name}: {r.summary}")
    skipped = [r for r in rows if r.baseline is None]
    measured = [r for r in rows if r.baseline is not None]
    ours_all = sum(r.ours for r in rows)
    print(f"\nread_pe_facts, all {len(rows)} files: {ours_all * 1000:.1f} ms")
    if measured:
        ours_m = sum(r.ours for r in measured)
        base_m = sum(r.baseline for r in measured)
        print(f"on the {len(measured)} files with a baseline: read_pe_facts {ours_m * 1000:.1f} ms, "
              f"full pefile.PE {base_m:.2f} s, ratio {base_m / ours_m:.0f}x")
    for r in skipped:
        print(f"baseline skipped for {r.name} ({r.size / 2**20:.0f} MB > --baseline-limit-mb {limit_mb:g}); "
              f"read_pe_facts took {r.ours * 1000:.1f} ms")
    errors = [r for r in rows if r.summary.split(":")[0] in ("not_pe", "truncated", "corrupt", "unreadable")]
    for r in errors:
        print(f"PEError for {r.name}: {r.summary}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
