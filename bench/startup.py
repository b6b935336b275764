"""Start-up: `dlltrace --version` (and `dlltrace --help`) against `python -c pass`, the floor, measured in the
same run, interleaved, as whole processes; medians. Aim: `--version` and `--help` within +0.08 s of the floor.

    python bench/startup.py [--runs N]

Measured as an install runs: with its bytecode written and cached (a user's pip install compiles it), so
PYTHONDONTWRITEBYTECODE is dropped for the runs, the bytecode goes to a temporary PYTHONPYCACHEPREFIX (the
checkout stays clean), and each case runs once before the timed runs.

Measured (Linux, Python 3.11, 2 cores shared with other jobs, a quiet moment; medians over python -c pass, wall):
  before (cli.py imported argparse, difflib, shutil; install.py dataclasses, typing, platform; --help built
          every command's parser, check's importing classify): --version +46 ms, --help +60 ms
          (+167 ms in the issue: measured with PYTHONDONTWRITEBYTECODE, every module compiled each run)
  now (--version imports neither a parser nor dataclasses, typing, platform; --help builds only the parser
          of the command named, none for the list): --version +20 ms, --help +23 ms
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AIM = 0.08


def once(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one run: the CPU time (the child's user + system) varies less on a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "tracer")
    env["PYTHONPYCACHEPREFIX"] = pycache = tempfile.mkdtemp(prefix="dlltrace-startup-")
    cases = {"python -c pass": [sys.executable, "-c", "pass"],
             "dlltrace --version": [sys.executable, "-m", "dlltrace", "--version"],
             "dlltrace --help": [sys.executable, "-m", "dlltrace", "--help"],
             "import dlltrace": [sys.executable, "-c", "import dlltrace"]}
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for argv in cases.values():  # (the bytecode written, as an install has it)
        once(argv, env)
    for _ in range(args.runs):  # (interleaved: a slow moment of the machine costs every case alike)
        for k, argv in cases.items():
            wall, used = once(argv, env)
            times[k].append(wall)
            cpu[k].append(used)
    floor = statistics.median(times["python -c pass"])
    cpu_floor = statistics.median(cpu["python -c pass"])
    for k, ts in times.items():
        med = statistics.median(ts)
        cmed = statistics.median(cpu[k])
        print(f"{k:20}  median {med * 1000:6.1f} ms  (min {min(ts) * 1000:6.1f}, max {max(ts) * 1000:6.1f})"
              + ("" if k == "python -c pass" else f"  +{(med - floor) * 1000:5.1f} ms over the floor")
              + f"   CPU {cmed * 1000:6.1f} ms" + ("" if k == "python -c pass" else f" (+{(cmed - cpu_floor) * 1000:5.1f})"))
    shutil.rmtree(pycache, ignore_errors=True)
    for k in ("dlltrace --version", "dlltrace --help"):
        extra = statistics.median(times[k]) - floor
        print(f"{k}: +{extra:.3f} s over python -c pass   aim: <= +{AIM} s -> {'met' if extra <= AIM else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
