#!/usr/bin/env python3
"""Static mode's speed on the torch 2.5.1 win_amd64 wheel (issue 12 item 4), each against a baseline
measured in the same run:

1. `deps` over the closure of torch\\lib\\torch_python.dll (read from the wheel: torch_cpu.dll is
   249 MB) against a full `pefile.PE` parse of c10.dll alone (the file already extracted). Aim <= 1.0.
   Cold: an empty PE facts cache (every DLL of the closure decompressed and parsed); warm: the cache
   the cold run wrote (worlds/static.FactsCache: keyed by each member's CRC-32 and size).
2. `check` of the whole wheel against its floor: the zip's listing plus the bare decompression of the
   DLLs check must read (every .dll/.pyd/.exe member), cold and warm.

3. cold `check` of the torch and onnxruntime-gpu wheels each in a fresh process (--no-cache: every PE member
   inflated and read): its time against the floor's (the same bare decompression, in a fresh process too), and its
   peak memory (the process's own VmHWM, /proc/self/status). Aims (issue 25): <= 1.3x the floor, <= 128 MiB.
   Each member is read as it inflates (worlds/static.py MemberView): the memory does not grow with the DLLs.

    python bench/static_torch.py [--repeat 3] [--wheel PATH] [--memory-only]

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

WHEELS = Path(os.environ.get("DLLTRACE_DOWNLOAD_CACHE", Path.home() / ".cache" / "dlltrace-downloads")) / "wheels"
WHEEL = WHEELS / "torch-2.5.1-cp311-cp311-win_amd64.whl"
ORT = WHEELS / "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl"  # (tests/realwheels.py's; fetched by its tests)

# a fresh process: cold check, or the floor (the bare decompression of every PE member); its time and own peak
CHILD = r"""
import sys, time, zipfile
sys.path.insert(0, sys.argv[1])
what, wheel = sys.argv[2], sys.argv[3]
if what == "check":
    from dlltrace.diagnosis import static
t = time.perf_counter()
if what == "check":
    static.check(static.open_target(wheel, use_cache=False), ["vcruntime"])
else:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.filename.lower().endswith((".dll", ".pyd", ".exe")):
                with z.open(info) as f:
                    while f.read(1 << 20):
                        pass
dt = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(dt, hwm)
"""


def fresh(what: str, wheel: Path) -> tuple[float, int]:
    """(seconds, peak KiB) of CHILD doing `what` on wheel."""
    tracer = os.environ.get("DLLTRACE_BENCH_TRACER") or str(HERE.parent / "tracer")  # (another tree's, to compare)
    out = subprocess.run([sys.executable, "-c", CHILD, tracer, what, str(wheel)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def memory(wheels: list[Path], repeat: int) -> None:
    import random
    import statistics

    for w in wheels:
        if not w.is_file():
            print(f"cold check of {w.name}: skipped (not there; tests/test_static.py fetches it)")
            continue
        runs: dict[str, list[tuple[float, int]]] = {"check": [], "floor": []}
        order = list(runs)
        for r in range(repeat):
            random.Random(r).shuffle(order)
            for what in order:
                runs[what].append(fresh(what, w))
        t_check = statistics.median(t for t, _ in runs["check"])
        t_floor = statistics.median(t for t, _ in runs["floor"])
        peak = max(k for _, k in runs["check"]) / 1024
        floor_peak = max(k for _, k in runs["floor"]) / 1024
        print(f"cold check of {w.name}, a fresh process each, median of {repeat} (shuffled):")
        print(f"  floor (decompressing every PE member): {t_floor:.2f} s, peak {floor_peak:.0f} MiB")
        print(f"  check --no-cache: {t_check:.2f} s   ratio {t_check / t_floor:.2f}  (aim <= 1.3);   "
              f"peak {peak:.0f} MiB (aim <= 128)")
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
    ap.add_argument("--memory-only", action="store_true", help="only part 3 (cold check's time and peak memory)")
    args = ap.parse_args()
    if args.memory_only:
        memory([args.wheel, ORT], args.repeat)
        return 0
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
        memory([args.wheel, ORT], args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
