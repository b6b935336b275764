#!/usr/bin/env python3
"""Benchmark: `check` and `deps` are linear in the files (issue 28, item 5; docs/limits.md).

Builds, in a temporary folder, wheels of N and 4N tiny valid PE DLLs (tests/tinype.py) and folders holding an
import chain of N and 4N levels (d0.dll imports d1.dll imports ...), then times `check` of each wheel and `deps`
of each chain (in process, no facts cache, the text rendered). Floor, measured in the same run: reading the same
files' PE facts alone (pe.py), which any implementation must at least do. Linear: the ratio time/floor stays
about the same from N to 4N (the old per-lookup scans made it grow about 4 times: check of 16,000 DLLs took 88 s,
a 10,000-level chain 48 s).

    python bench/static_scale.py [--n 2500]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tracer"))
sys.path.insert(0, str(ROOT / "tests"))

import tinype  # noqa: E402
from rich.console import Console  # noqa: E402

from dlltrace import deep  # noqa: E402
from dlltrace.diagnosis import static  # noqa: E402
from dlltrace.pe import read_pe_facts  # noqa: E402
from dlltrace.render.static import print_deps, print_check  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    deep.deep_call(lambda: (fn(), 0)[1])
    return time.perf_counter() - t0


def floor(folder: Path) -> float:
    files = sorted(folder.rglob("*.dll"))
    return timed(lambda: [read_pe_facts(p) for p in files])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2500, help="the small size (the big one is 4 times it)")
    args = ap.parse_args(argv)
    out = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for n in (args.n, 4 * args.n):
            names = [f"m{i}.dll" for i in range(n)]
            wheel = tinype.write_wheel(t / f"w{n}-1.0-cp311-cp311-win_amd64.whl", names)
            loose = t / f"loose{n}"
            loose.mkdir()
            for name in names:
                (loose / name).write_bytes(tinype.tiny_dll(name, ["kernel32.dll"]))
            tinype.write_chain(t / f"chain{n}" / "pkg", n)

            def check() -> None:
                print_check(static.check(static.open_target(str(wheel), use_cache=False)), Console(file=out, width=160))

            def deps() -> None:
                print_deps(static.deps(static.open_target(str(t / f"chain{n}" / "pkg"), use_cache=False)),
                           Console(file=out, width=160))
            fc, fd = floor(loose), floor(t / f"chain{n}")
            tc, td = timed(check), timed(deps)
            print(f"N={n:>6}: check of a {n}-DLL wheel {tc:6.2f} s (floor {fc:5.2f} s, ratio {tc / fc:4.2f}); "
                  f"deps of a {n}-level chain {td:6.2f} s (floor {fd:5.2f} s, ratio {td / fd:4.2f})")
    print("linear when each ratio stays about the same from N to 4N (quadratic: about 4 times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
