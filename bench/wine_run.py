"""`dlltrace run --wine` of a small program against plain `wine64` of it, measured in the same run: every
case once a round, in a shuffled order, whole processes, medians. Aim (issue 25): <= 3x.

The program is the shim tests' loadhost.exe doing one LoadLibraryExW of a DLL in a folder (C:\\dlltrace-shim\\
lib\\a.dll). Two states of Wine, each peer measured in the same state:
- warm: the test prefix's persistent wineserver with its services running (winetools.ensure_prefix), as
  for every run after the first; plain wine64 is then ~10-40 ms;
- cold (--cold-rounds, 0 to skip): the wineserver killed before each run, so each run starts a server and
  Wine's services (~1 s), as the first Wine program of a session does.
The cases that say where the time goes: the launcher and shim alone under wine64 (no Python: Wine's part
of a traced run, two Wine processes, the launcher's and the program's), `python -c pass` (any Python
command's floor), `dlltrace --version` (the CLI's own start-up), and `dlltrace run` with its stdout and
stderr on pipes (where it first makes sure Wine's services run detached: trace/launch.py,
start_wine_services). Python children get compiled bytecode (a cache of their own, filled by a first round
not counted), as an installed package has. --compare DIR adds `dlltrace run --wine` of another checkout
(DIR/tracer, e.g. the main branch's) to the same rounds.

    python bench/wine_run.py [--rounds N] [--cold-rounds N] [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tracer"), str(ROOT / "tests")]

import winetools  # noqa: E402
import test_shim as kit  # noqa: E402

AIM = 3.0


def once(argv: list[str], env: dict, cwd: str, piped: bool = False) -> float:
    """Wall time of one whole process; its output to files (or pipes, read to the end), exit 0 asserted."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        if piped:
            r = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True)
            o, e = r.stdout, r.stderr
        else:
            r = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        took = time.perf_counter() - t
        if not piped:
            out.seek(0)
            err.seek(0)
            o, e = out.read(), err.read()
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {r.returncode}:\n{o[-1000:]!r}\n{e[-2000:]!r}")
    return took


def kill_server() -> None:
    env = winetools.wine_env()
    quiet = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    subprocess.run([winetools.wineserver_binary(), "-k"], timeout=60, **quiet)
    subprocess.run([winetools.wineserver_binary(), "-w"], timeout=60, **quiet)


def measure(cases: dict, rounds: int, cold: bool) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        order = list(cases)
        random.shuffle(order)  # (a slow moment of the machine costs a random case, not always the same one)
        for k in order:
            if cold:
                kill_server()
            times[k].append(once(*cases[k]))
    return times


def show(title: str, times: dict[str, list[float]], peer: str) -> dict[str, float]:
    med = {k: statistics.median(ts) for k, ts in times.items()}
    print(title)
    for k, ts in times.items():
        ratio = f"  {med[k] / med[peer]:5.1f}x {peer}" if k != peer else ""
        print(f"  {k:42} median {med[k] * 1000:7.1f} ms  (min {min(ts) * 1000:7.1f}, max {max(ts) * 1000:7.1f}){ratio}")
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cold-rounds", type=int, default=5)
    ap.add_argument("--compare", metavar="DIR", help="another checkout whose `dlltrace run --wine` to add")
    a = ap.parse_args()
    winetools.require("wine", "mingw64", "mingw32")
    kit.build_shim()
    built = kit.build_fixtures(winetools.CACHE / "shim-fixtures")
    winetools.ensure_prefix()
    kit.layout(built, winetools.drive_c() / "dlltrace-shim")
    wine = winetools.wine_binary()
    assert wine
    prog = [kit.HOST, "load", kit.w("lib", "a.dll"), "0"]
    with tempfile.TemporaryDirectory() as d:
        env = winetools.wine_env()
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(d) / "pyc")  # (compiled once, in the first round, not counted)
        ours = {**env, "PYTHONPATH": str(ROOT / "tracer")}
        traced = [sys.executable, "-m", "dlltrace", "run", "--wine", "-o", "t.jsonl", "--", *prog]
        cases = {
            "wine64 prog": ([wine, *prog], env, d),
            "dlltrace run --wine -- prog": (traced, ours, d),
            "dlltrace run --wine -- prog (output piped)": (traced, ours, d, True),
            "wine64 launcher prog (launcher+shim alone)": (
                [wine, str(kit.LAUNCHER), *prog], {**env, "DLLTRACE_TRACE": winetools.to_windows(Path(d) / "l.jsonl")}, d),
            "python -c pass": ([sys.executable, "-c", "pass"], ours, d),
            "dlltrace --version": ([sys.executable, "-m", "dlltrace", "--version"], ours, d),
        }
        if a.compare:
            other = {**env, "PYTHONPATH": str(Path(a.compare).resolve() / "tracer"),
                     "DLLTRACE_BIN": str(kit.BIN)}  # (the same shim: only the Python side differs)
            cases[f"dlltrace run --wine -- prog ({Path(a.compare).name})"] = (traced, other, d)
        measure(cases, 1, cold=False)  # warm-up: bytecode, the prefix's caches
        warm = show(f"warm: a persistent wineserver with its services running; {a.rounds} rounds, shuffled, medians",
                    measure(cases, a.rounds, cold=False), "wine64 prog")
        main_case = "dlltrace run --wine -- prog"
        ours_s = warm[main_case] - warm["wine64 launcher prog (launcher+shim alone)"]
        print(f"  of `dlltrace run --wine`: Wine's part (the launcher and the program, two Wine processes) "
              f"{warm['wine64 launcher prog (launcher+shim alone)'] * 1000:.0f} ms, dlltrace's own (Python: start, "
              f"imports, facts, summary) {ours_s * 1000:.0f} ms, of which `python -c pass` "
              f"{warm['python -c pass'] * 1000:.0f} ms")
        cold = None
        if a.cold_rounds:
            cold_cases = {k: cases[k] for k in ("wine64 prog", main_case)}
            try:
                cold = show(f"cold: the wineserver killed before each run; {a.cold_rounds} rounds, shuffled, medians",
                            measure(cold_cases, a.cold_rounds, cold=True), "wine64 prog")
            finally:
                winetools.restart_server()  # the persistent server and its services, as the tests expect
        ratio = warm[main_case] / warm["wine64 prog"]
        line = f"dlltrace run --wine vs plain wine64: warm {ratio:.1f}x"
        if cold:
            line += f", cold {cold[main_case] / cold['wine64 prog']:.1f}x"
        print(f"{line}   aim: <= {AIM:.0f}x -> warm {'met' if ratio <= AIM else 'NOT met'}"
              + (f", cold {'met' if cold[main_case] / cold['wine64 prog'] <= AIM else 'NOT met'}" if cold else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
