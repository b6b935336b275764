"""Shim overhead under Wine: 1,000 LoadLibraryExW calls (half succeeding, half failing), timed inside the
fixture host, untraced and traced through the launcher, in the same run. Prints the ratio (aim: < 1.10).

    python bench/shim_overhead.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tracer"), str(ROOT / "tests")]

import winetools  # noqa: E402
import test_shim as kit  # noqa: E402


def timed(args: list[str], env: dict) -> int:
    r = winetools.run_wine(args, extra_env=env)
    m = re.search(rb"timeloads us (\d+)", r.stdout)
    if not m:
        raise SystemExit(f"host failed: {r.stdout!r} {r.stderr[-500:]!r}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    kit.build_shim()
    built = kit.build_fixtures(winetools.CACHE / "shim-fixtures")
    kit.layout(built, winetools.drive_c() / "dlltrace-shim")
    ops = ["timeloads", str(a.calls), kit.w("lib", "a.dll"), kit.w("lib", "missing.dll")]
    plain, traced = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.rounds):  # interleaved, so drift affects both alike
            plain.append(timed([kit.HOST, *ops], {}))
            trace = Path(d) / f"t{i}.jsonl"
            traced.append(timed([str(kit.LAUNCHER), kit.HOST, *ops], {"DLLTRACE_TRACE": winetools.to_windows(trace)}))
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"{a.calls} LoadLibraryExW calls (half failing), median of {a.rounds}: "
          f"untraced {p / 1000:.1f} ms, traced {t / 1000:.1f} ms, ratio {t / p:.3f} (+{(t / p - 1) * 100:.1f}%)")
    # the fastest round of each: less noise from the machine (this VM varies by +-5% run to run)
    bp, bt = min(plain), min(traced)
    print(f"fastest of {a.rounds}: untraced {bp / 1000:.1f} ms, traced {bt / 1000:.1f} ms, ratio {bt / bp:.3f} "
          f"(+{(bt / bp - 1) * 100:.1f}%)   aim: < +10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
