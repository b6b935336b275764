#!/usr/bin/env python3
"""`dlltrace deps x.so` against lddtree (Debian's pax-utils) on the same library (issue 25: aim <= 1x).

x.so is built here (gcc) with DT_NEEDED entries on system libraries whose closures make about 140 objects
together (libgd, libappstream, libgtk-x11-2.0, libcurl, libcups, libpq: those of them this machine has; 133 on
Debian 12 with its desktop libraries); y.so needs x.so's libraries and three that are nowhere (deps then walks
on past each: one load of the closure per problem). Each command is a fresh process (start-up included), timed
in the same run, the median of --runs (shuffled each round), in wall time and in CPU time (user + system:
less at the mercy of other jobs on a shared machine).

    python bench/linux_deps.py [--runs 7] [--lib PATH]   # --lib: time another library instead of x.so / y.so
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACER = Path(os.environ.get("DLLTRACE_BENCH_TRACER") or Path(__file__).resolve().parents[1] / "tracer")  # (another tree: to compare)
SYSTEM_LIBS = ("libgd.so.3", "libappstream.so.4", "libgtk-x11-2.0.so.0", "libcurl.so.4", "libcups.so.2", "libpq.so.5")
MISSING = ("libdlltrace-bench-gone1.so", "libdlltrace-bench-gone2.so.3", "libdlltrace-bench-gone3.so")


def lddtree() -> list[str] | None:
    """The command that runs lddtree (its Python script with the system Python, which has pyelftools)."""
    exe = shutil.which("lddtree")
    if exe is None:
        return None
    with open(exe, "rb") as f:
        script = b"python" in f.readline()
    return ["/usr/bin/python3", exe] if script and os.path.exists("/usr/bin/python3") else [exe]


def build(into: Path) -> list[Path]:
    """x.so and y.so (see above), in `into`."""
    libdir = Path("/usr/lib/x86_64-linux-gnu")
    have = [str(libdir / n) for n in SYSTEM_LIBS if (libdir / n).exists()]
    (into / "x.c").write_text("int x_bench(void) { return 0; }\n")
    for n in MISSING:  # (stubs to link against, removed after: y.so's DT_NEEDED names nothing on the machine)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(into / n), str(into / "x.c"), f"-Wl,-soname,{n}"], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(into / "x.so"), str(into / "x.c"), "-Wl,--no-as-needed", *have],
                   check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(into / "y.so"), str(into / "x.c"), "-Wl,--no-as-needed", *have,
                    *(str(into / n) for n in MISSING)], check=True)
    for n in MISSING:
        (into / n).unlink()
    return [into / "x.so", into / "y.so"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--lib", type=Path, default=None)
    a = ap.parse_args()
    peer = lddtree()
    if not sys.platform.startswith("linux") or peer is None or shutil.which("gcc") is None:
        print("skipped: needs Linux, gcc and lddtree (Debian: apt-get install pax-utils)")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="dlltrace-bench-deps-"))
    try:
        libs = [a.lib.resolve()] if a.lib else build(tmp)
        env = dict(os.environ, PYTHONPATH=str(TRACER))
        env.pop("LD_LIBRARY_PATH", None)
        for lib in libs:
            objs = subprocess.run([*peer, "-l", str(lib)], capture_output=True, text=True, env=env).stdout.split()
            modes = {"dlltrace deps": [sys.executable, "-m", "dlltrace", "deps", str(lib)],
                     "lddtree": [*peer, str(lib)]}
            first = subprocess.run(modes["dlltrace deps"], capture_output=True, text=True, env=env).stdout
            times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            for c in modes.values():
                timed(c, env)  # (a warm-up of each)
            order = list(modes)
            for r in range(a.runs):
                random.Random(r).shuffle(order)
                for m in order:
                    times[m].append(timed(modes[m], env))
            print(f"{lib.name}: lddtree lists {len(objs)} objects; dlltrace deps says: {first.splitlines()[0] if first else '?'}")
            pw = statistics.median(w for w, _ in times["lddtree"])
            pc = statistics.median(c for _, c in times["lddtree"])
            for m, ts in times.items():
                w = statistics.median(x for x, _ in ts)
                c = statistics.median(x for _, x in ts)
                aim = "   (aim <= 1x)" if m == "dlltrace deps" else ""
                print(f"  {m:14s} wall {w * 1000:7.0f} ms {w / pw:5.2f}x   CPU {c * 1000:6.0f} ms {c / pc:5.2f}x{aim}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
