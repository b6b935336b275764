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
(DIR/tracer, e.g. the main branch's) to the same rounds, with this checkout's launcher and shim.
--phases N (default 10; 0: none) then times N warm runs phase by phase inside `dlltrace run --wine` (PHASES:
Python's start and the CLI, up to the launcher's start, the imports made while the program runs, the rest
of the program's run, reading the trace back, the facts, the summary, the interpreter's exit; wall, and the
process's own CPU).

    python bench/wine_run.py [--rounds N] [--cold-rounds N] [--compare DIR] [--phases N]

Measured (2026-12-05, 2 cores shared with other jobs, load average 3-7; four runs of --rounds 10
--cold-rounds 3 --compare <main>): warm 13.7x, 13.0x, 16.3x, 20.5x against main's 17.3x, 16.8x, 22.7x, 28.1x
in the same rounds (21-28% less wall time, median 25%); cold 2.1x, 1.9x, 1.4x, 1.5x. What changed: the
launcher starts before the heavy imports (trace/launch.py imports no reader or model: ~15 ms of CPU from
`run`'s start to the launcher's, 70-100 before), no `uname -p` child for the header, the launcher no longer links shell32 (user32 and gdi32
no longer start in it: 61 -> 46 ms for the launcher and shim alone, 20 interleaved runs), `run`'s summary
without rich or report's renderers (~40 -> ~11 ms CPU), exports read in one pass, the interpreter's exit
after gc.freeze (80-150 -> ~24 ms wall). The phases (CPU): start and CLI ~66-72 ms, to the launcher ~15,
imports while the program runs ~180 (they outlast a 20-50 ms program: the critical path), facts ~33,
summary ~11. Why <= 3x warm is out of reach: Wine's own part, the launcher's and the program's processes,
is 2.3-3.2x plain wine64, `python -c pass` 0.8x: 3.1-4x before `run` imports anything
(docs/wine-profile.md, "Where `dlltrace run --wine`'s time goes").

Then (2026-12-06, a quiet machine, --rounds 15 --cold-rounds 3 --compare <the tree before>): warm 11.1x against the
tree before's 13.6x in the same rounds (250 against 305 ms; a quieter run of 12 rounds: 9.4x against 11.5x, 154
against 188 ms), cold 1.4x. What changed: the PE facts `run` appends are kept between runs by each file's identity
(worlds/factscache.py: Wine's kernel32, ntdll and msvcrt, 5,000 export names, were read again every run; the facts
~30 -> 7-12 ms CPU), so a warm run parses no PE and imports neither pefile nor hashlib (~18 ms); the data files are
read from the package's folder (importlib.resources' import and first read, ~10 ms); the trace schema's event kinds
are made when first met (tracecheck: 8-10 -> 3.7 ms). Of the imports left (~135 ms CPU), making the 66 dataclasses
is ~85 ms (timed around dataclasses._process_class).

Then (2026-12-06 afternoon, --rounds 8 --cold-rounds 0 --phases 5, two other jobs starting): warm 11.5x (234 ms against
20.3 ms; the launcher and shim alone 48.6 ms, 2.4x; `python -c pass` 17.2 ms, 0.8x). Phases (CPU): start and CLI 54 ms,
to the launcher 15, the imports while the program runs 141 (they outlast the 49 ms of Wine's two processes), reading
the trace 3.5, the facts 11, the summary 6. The same imports timed alone in one process with compiled bytecode: 104 ms
CPU, of which CPython 3.11's dataclasses._process_class is 52 ms for 72 classes (it compiles each generated method:
__init__, __repr__, __eq__, and a frozen class's __hash__, __setattr__ and __delattr__). Even with no import at all
the run would be 3.2x: the aim sits below the floor of a launcher process and a Python CLI.
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


# --phases: `dlltrace run --wine` run through this driver (python -c PHASES ARGS...), which marks each phase's
# end (wall clock, and the process's CPU time) without changing what runs or when it is imported: the
# launcher's Popen and wait are watched; the functions that follow the program are wrapped once it ended
# (they are imported by then: commands/run.py import_what_follows). The marks go to the file named by
# DLLTRACE_BENCH_PHASES as JSON; DLLTRACE_BENCH_T0 is the bench's clock just before it started the process.
PHASES = r"""
import json, os, subprocess, sys, time
marks = []
def mark(what):
    marks.append((what, (time.time(), time.process_time())))
P = subprocess.Popen
class Watched(P):
    def __init__(self, argv, *a, **k):
        launcher = any("dlltrace_launch" in str(x) for x in argv)
        if launcher:
            mark("to the launcher's start (launch.py imports, header, checks)")
        super().__init__(argv, *a, **k)
        self.launcher = launcher
    def wait(self, *a, **k):
        if self.launcher:
            mark("imports of what follows, while the program runs")
        r = super().wait(*a, **k)
        if self.launcher:
            mark("the rest of the launcher's and the program's run (Wine)")
            wrap()
        return r
subprocess.Popen = Watched
def wrap():
    import dlltrace.runner as runner, dlltrace.trace.reader as reader, dlltrace.render.runsummary as rs
    def w(mod, name, label):
        f = getattr(mod, name)
        def g(*a, **k):
            try:
                return f(*a, **k)
            finally:
                mark(label)
        setattr(mod, name, g)
    w(reader, "read_trace", "reading the trace back")
    w(runner, "append_facts", "the facts (collect_facts: replay, PE facts)")
    w(runner, "run_exit_code", "finishing the trace, the exit code")
    w(rs, "summarize", "the summary")
import dlltrace.commands.run as run
execute = run.execute
def timed(args):
    mark("python start, the CLI's imports, the parser")
    return execute(args)
run.execute = timed
t0 = float(os.environ["DLLTRACE_BENCH_T0"])
import atexit
def written():  # (at exit: cli.entry ends the process itself, with os._exit after the atexit functions)
    with open(os.environ["DLLTRACE_BENCH_PHASES"], "w") as f:
        json.dump([("(started)", (t0, 0.0)), *marks], f)
atexit.register(written)
from dlltrace.cli import entry
sys.argv[:] = ["dlltrace", "run", *sys.argv[1:]]
sys.exit(entry())
"""


def phases(argv: list[str], env: dict, cwd: str, rounds: int) -> None:
    """Where the warm time of `dlltrace run --wine` goes, phase by phase (PHASES), medians of `rounds` runs."""
    import json

    got: dict[str, list[tuple[float, float]]] = {}
    total: list[float] = []
    for _ in range(rounds):
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            e = {**env, "DLLTRACE_BENCH_PHASES": f.name}
            e["DLLTRACE_BENCH_T0"] = repr(time.time())
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", PHASES, *argv], env=e, cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            total.append(time.perf_counter() - t)
            end = time.time()
            marks = json.load(open(f.name))
        marks.append(["the interpreter's exit", [end, marks[-1][1][1]]])  # (CPU: not seen after the last mark)
        for (_, (t_prev, c_prev)), (what, (t_now, c_now)) in zip(marks, marks[1:]):
            got.setdefault(what, []).append((t_now - t_prev, c_now - c_prev))
    print(f"phases of `dlltrace run --wine` (warm; {rounds} runs, medians; wall, and this process's CPU)")
    for what, ts in got.items():
        print(f"  {what:66} wall {statistics.median(t for t, _ in ts) * 1000:6.1f} ms  "
              f"CPU {statistics.median(c for _, c in ts) * 1000:6.1f} ms")
    print(f"  {'(the whole process)':66} wall {statistics.median(total) * 1000:6.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cold-rounds", type=int, default=5)
    ap.add_argument("--compare", metavar="DIR", help="another checkout whose `dlltrace run --wine` to add")
    ap.add_argument("--phases", type=int, default=10, metavar="N",
                    help="runs of `dlltrace run --wine` timed phase by phase, warm (0: none)")
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
        if a.phases:
            phases(["--wine", "-o", "t.jsonl", "--", *prog], ours, d, a.phases)
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
