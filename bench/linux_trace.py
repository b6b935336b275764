#!/usr/bin/env python3
"""The cost of the Linux recorder (native/audit: LD_AUDIT + the LD_PRELOAD dlerror wrapper) on an import
that loads many shared libraries: a Python that imports every extension module of its standard library
(lib-dynload: 60-80 .so files, and the system libraries they need) and dlopens a few missing names.

Timed in the same run, each the median of --runs runs (after a warm-up of each, in a shuffled order each
round, so machine load hits all alike):
  untraced                  the command alone
  traced                    under the recorder, with the environment `dlltrace run` gives the program
                            (trace.linux.recorder_env: LD_AUDIT, LD_PRELOAD and the Python bootstrap),
                            trace to a tmp file
  LD_DEBUG=libs             glibc's own search log, to a file (LD_DEBUG_OUTPUT)
  strace -f -e trace=openat every openat, to a file (when strace is installed)
Prints each against untraced. Aim (issue 13): traced <= 5 % over untraced. Measured (2-core machine
shared with other jobs, 15 runs, twice), with the bootstrap (before, the bench left it out): +3.6 % and
+3.8 %; one run while other jobs ran gave +11.5 %.

    python bench/linux_trace.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracer"))

WORK = r"""
import importlib, os, sys, ctypes
d = next(p for p in sys.path if p.endswith("lib-dynload"))
n = 0
for f in sorted(os.listdir(d)):
    name = f.split(".")[0]
    if name.startswith(("_test", "xxlimited", "_xxtest", "_ctypes_test", "xxsubtype")):
        continue
    try:
        importlib.import_module(name); n += 1
    except Exception:
        pass
for missing in ("libcudart.so.11.0", "libcublas.so.12", "libnotthere.so"):
    try: ctypes.CDLL(missing)
    except OSError: pass
print(n)
"""


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        print("bench/linux_trace.py: Linux only")
        return 0
    from dlltrace.trace.linux import recorder_dir, recorder_env
    rec = recorder_dir()
    tmp = Path(tempfile.mkdtemp(prefix="dlltrace-bench-"))
    cmd = [sys.executable, "-c", WORK]
    loaded = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    base = dict(os.environ)
    trace = tmp / "t.jsonl"
    modes: dict[str, tuple[list[str], dict[str, str]]] = {
        "untraced": (cmd, base),
        "traced": (cmd, recorder_env(dict(base), rec, trace)),
        "LD_DEBUG=libs": (cmd, dict(base, LD_DEBUG="libs", LD_DEBUG_OUTPUT=str(tmp / "dbg"))),
    }
    if shutil.which("strace"):
        modes["strace -f -e trace=openat"] = (["strace", "-f", "-e", "trace=openat", "-o", str(tmp / "st"), *cmd], base)
    times: dict[str, list[float]] = {m: [] for m in modes}
    order = list(modes)
    for c, env in modes.values():  # a warm-up of each (caches, .pyc files)
        timed(c, env)
    for r in range(a.runs):
        random.Random(r).shuffle(order)
        for m in order:
            c, env = modes[m]
            trace.write_text("")
            times[m].append(timed(c, env))
    trace.write_text("")
    timed(*modes["traced"])
    sos = sum(1 for line in trace.read_text().splitlines() if '"ev":"objopen"' in line)
    base_t = statistics.median(times["untraced"])
    print(f"linux trace bench: {loaded} extension modules imported, {sos} objects opened (la_objopen), "
          f"median of {a.runs} runs")
    for m, ts in times.items():
        med = statistics.median(ts)
        print(f"  {m:28s} {med * 1000:8.1f} ms  {(med / base_t - 1) * 100:+6.1f} % vs untraced")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
