"""Start-up: `dlltrace --version` (and `dlltrace --help`) against `python -c pass`, the floor, measured in the
same run, interleaved, as whole processes; medians. Aim: `--version` within +0.08 s of the floor.

    python bench/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AIM = 0.08


def once(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    cases = {"python -c pass": [sys.executable, "-c", "pass"],
             "dlltrace --version": [sys.executable, "-m", "dlltrace", "--version"],
             "dlltrace --help": [sys.executable, "-m", "dlltrace", "--help"],
             "import dlltrace": [sys.executable, "-c", "import dlltrace"]}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.runs):  # (interleaved: a slow moment of the machine costs every case alike)
        for k, argv in cases.items():
            times[k].append(once(argv, env))
    floor = statistics.median(times["python -c pass"])
    for k, ts in times.items():
        med = statistics.median(ts)
        print(f"{k:20}  median {med * 1000:6.1f} ms  (min {min(ts) * 1000:6.1f}, max {max(ts) * 1000:6.1f})"
              + ("" if k == "python -c pass" else f"  +{(med - floor) * 1000:5.1f} ms over the floor"))
    extra = statistics.median(times["dlltrace --version"]) - floor
    print(f"dlltrace --version: +{extra:.3f} s over python -c pass   aim: <= +{AIM} s -> {'met' if extra <= AIM else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
