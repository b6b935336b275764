"""Benchmark: simulated top-level loads per second on a 50-DLL tree.

Each iteration runs LoadLibraryExW(top.dll, 0x1100) in a fresh copy of the process
state, so the loader resolves all 50 DLLs every time (nothing is already loaded).
Baseline, measured in the same run: the same walk over the same tree done with plain
dict look-ups (what any implementation must at least do). The target is 20,000
loads/s; the ratio says how far the simulator is from the bare walk.

    python bench/simulate_loads.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracer"))

from dlltrace.diagnosis.scenario import scenario_from_dict  # noqa: E402
from dlltrace.loader.windows.engine import Call  # noqa: E402

N = 50
TARGET = 20_000


def tree_scenario():
    """top.dll -> d1..d49, each importing the next two (a DAG with shared imports), spread
    over the DLL's folder, an AddDllDirectory folder and System32."""
    files = []
    folders = ["C:\\app\\lib", "C:\\deps", "C:\\Windows\\System32"]
    for i in range(N):
        name = "top.dll" if i == 0 else f"d{i}.dll"
        imports = [f"d{j}.dll" for j in (i + 1, i + 2) if j < N]
        files.append({"path": f"{folders[i % 3]}\\{name}", "imports": imports, "exports": ["f"]})
    # a second top-level DLL beside top.dll with the same imports (for the warm measure)
    files.append({"path": "C:\\app\\lib\\top2.dll", "imports": ["d1.dll", "d2.dll"], "exports": ["f"]})
    return scenario_from_dict({
        "process": {"exe": "C:\\Python311\\python.exe", "path": ["C:\\p1", "C:\\p2"], "dll_directories": ["C:\\deps"]},
        "file": files,
        "call": [{"op": "LoadLibraryExW", "name": "C:\\app\\lib\\top.dll", "flags": 0x1100}],
    })


def bench_simulator(seconds: float) -> float:
    s = tree_scenario()
    call = Call("LoadLibraryExW", "C:\\app\\lib\\top.dll", 0x1100)
    base = s.process
    from dlltrace.loader.windows.engine import Simulator
    r = Simulator(s.world, base.copy()).load_library(call.name, call.flags)
    assert r.error == 0 and len(list(r.tree.walk())) >= N, "the benchmark tree must load"
    n = 0
    t0 = time.perf_counter()
    while (el := time.perf_counter() - t0) < seconds:
        for _ in range(50):
            Simulator(s.world, base.copy()).load_library(call.name, call.flags)
        n += 50
    return n / el


def bench_simulator_warm(seconds: float) -> float:
    """One process that keeps top.dll (and so its 49 imports) loaded, loading and freeing
    top2.dll, which imports the same DLLs: it is found and mapped, and its imports bind through
    the loaded-module list (torch's loop over torch\\lib\\*.dll looks like this after the
    first DLL)."""
    from dlltrace.loader.windows.engine import Simulator

    s = tree_scenario()
    sim = Simulator(s.world, s.process.copy())
    assert sim.load_library("C:\\app\\lib\\top.dll", 0x1100).error == 0
    name = "C:\\app\\lib\\top2.dll"
    r = sim.load_library(name, 0x1100)
    assert r.error == 0 and r.tree.children and not r.tree.children[0].new
    sim.free_library(name)
    n = 0
    t0 = time.perf_counter()
    while (el := time.perf_counter() - t0) < seconds:
        for _ in range(200):
            sim.load_library(name, 0x1100)
            sim.free_library(name)
        n += 200
    return n / el


def bench_bare_walk(seconds: float) -> float:
    s = tree_scenario()
    files = {f.path.lower(): f for f in s.world.all_files()}
    dirs = ["c:\\app\\lib", "c:\\python311", "c:\\deps", "c:\\windows\\system32"]

    def walk():
        loaded = {}
        stack = ["top.dll"]
        while stack:
            name = stack.pop()
            if name in loaded:
                continue
            for d in dirs:
                f = files.get(d + "\\" + name)
                if f is not None:
                    loaded[name] = f
                    stack.extend(i.dll for i in f.pe.imports)
                    break
        return loaded

    assert len(walk()) == N
    n = 0
    t0 = time.perf_counter()
    while (el := time.perf_counter() - t0) < seconds:
        for _ in range(50):
            walk()
        n += 50
    return n / el


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    sim = bench_simulator(a.seconds)
    warm = bench_simulator_warm(a.seconds)
    bare = bench_bare_walk(a.seconds)
    print(f"cold: {sim:,.0f} top-level loads/s, all {N} DLLs resolved each time (target {TARGET:,}/s: "
          f"{'met' if sim >= TARGET else 'NOT met'})")
    print(f"warm: {warm:,.0f} top-level loads/s, imports already loaded (target {TARGET:,}/s: "
          f"{'met' if warm >= TARGET else 'NOT met'})")
    print(f"baseline, same run: a bare dict walk of the tree, {bare:,.0f} walks/s")
    print(f"ratio cold/baseline: {sim / bare:.3f}   warm/baseline: {warm / bare:.3f}")


if __name__ == "__main__":
    main()
