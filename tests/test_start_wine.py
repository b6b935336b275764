"""A program's static imports at process start: the model (replay.replay_start) against Wine's loader.

needstop.exe imports top.dll -> mid.dll -> leaf.dll (fixtures/host/needstop.c, fixtures/dlls). Each case
lays the files out differently (the program's folder, a subfolder, the current folder, a folder on
PATH through WINEPATH, a 32-bit leaf) and runs the program with `dlltrace run --wine`. When the process
could not start, the model must give the error its exit status means; when it started, the model must
bind each DLL to the file the real loader mapped (the shim's `env.modules`, taken when it started).
A seeded generator adds random layouts (DLLTRACE_START_SEED, DLLTRACE_START_CASES).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import winetools
from dlltrace import winpath
from dlltrace.worlds.live import LiveWorld, wine_map
from dlltrace.diagnosis.replay import replay_start, system_and_process
from dlltrace.loader.windows.engine import Simulator
from dlltrace.trace.reader import STARTUP_STATUS, read_trace
from dlltrace.worlds.world import CORE_MODULES, LoadedModule
from test_shim import LAUNCHER, shim_env  # noqa: F401  (session fixture: the shim and the fixture DLLs under Wine)

pytestmark = pytest.mark.wine

WROOT = "dlltrace-start"

# case -> (files: place -> built file, current folder, PATH folders (WINEPATH), what Wine does: 0 =
# the program started, else the Win32 error its exit status means); places are relative to the
# case's folder; the program is always app/needstop.exe. (A 32-bit leaf alone is "not found" under
# Wine, where every failed import is 126: docs/wine-profile.md.)
CASES = {
    "all_in_app": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "app/leaf.dll": "leaf.dll"}, "app", [], 0),
    "leaf_in_cwd": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "work/leaf.dll": "leaf.dll"}, "work", [], 0),
    "leaf_on_path": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "p/leaf.dll": "leaf.dll"}, "app", ["p"], 0),
    "mid_and_leaf_on_path": ({"app/top.dll": "top.dll", "p/mid.dll": "mid.dll", "p/leaf.dll": "leaf.dll"}, "app", ["p"], 0),
    "top_in_cwd_only": ({"work/top.dll": "top.dll", "app/mid.dll": "mid.dll", "app/leaf.dll": "leaf.dll"}, "work", [], 0),
    "second_path_entry": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "q/leaf.dll": "leaf.dll"}, "app",
                          ["p", "q"], 0),
    "mid_in_subfolder": ({"app/top.dll": "top.dll", "app/sub/mid.dll": "mid.dll", "app/sub/leaf.dll": "leaf.dll"},
                         "app", [], 126),
    "leaf_nowhere": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll"}, "app", [], 126),
    "leaf_in_unsearched_folder": ({"app/top.dll": "top.dll", "p/mid.dll": "mid.dll", "m/leaf.dll": "leaf.dll"}, "app",
                             ["p"], 126),
    "x86_leaf_only": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "app/leaf.dll": "leaf86.dll"}, "app", [], 126),
    "x86_leaf_then_x64_on_path": ({"app/top.dll": "top.dll", "app/mid.dll": "mid.dll", "app/leaf.dll": "leaf86.dll",
                                   "p/leaf.dll": "leaf.dll"}, "app", ["p"], 0),
}


def _live(trace, pid) -> LiveWorld:
    system, _ = system_and_process(trace, pid)
    return LiveWorld(system, wine_map(winetools.PREFIX), [])


def _model(trace, pid, exe: str):
    """The model's answer for starting `exe` in the state a process that did start recorded (the
    loaded list as at process start: the core modules only). replay_start does this for a process
    that could not start."""
    system, process = system_and_process(trace, pid)
    fresh = type(process)(exe=process.exe, cwd=process.cwd, path=list(process.path), machine=process.machine)
    for n in CORE_MODULES:
        fresh.add_loaded(LoadedModule(winpath.join(system.system32, n), 1, "process start"))
    return Simulator(_live(trace, pid), fresh).load_library(exe, 0, op="start")


def _lay_out(case: str, files: dict[str, str], built: Path) -> Path:
    root = winetools.drive_c() / WROOT / case
    shutil.rmtree(root, ignore_errors=True)
    for place, src in {**files, "app/needstop.exe": "needstop.exe"}.items():
        (root / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built / src, root / place)
    for d in ("work", "p", "q"):
        (root / d).mkdir(exist_ok=True)
    return root


def _outcomes(trace, exe: str) -> tuple[object, object]:
    """(what Wine did, what the model says): the Win32 error when the process could not start,
    else the file each of top, mid and leaf was mapped from."""
    starts = trace.start_failures()
    if starts:
        (pid,) = starts  # what `dlltrace report` does for it
        return STARTUP_STATUS[trace.start_status(pid)], replay_start(trace, pid, _live(trace, pid)).result.error
    (pid,) = trace.pids
    real = {winpath.basename(m).lower(): m.lower() for m in trace.env(pid)["modules"]}
    res = _model(trace, pid, exe)
    if res.error:
        return 0, res.error
    model = {winpath.basename(n.path).lower(): n.path.lower() for n in res.tree.walk() if n.path}
    chain = ("top.dll", "mid.dll", "leaf.dll")
    return {d: real.get(d) for d in chain}, {d: model.get(d) for d in chain}


@pytest.mark.parametrize("case", sorted(CASES))
def test_process_start_matches_wine(shim_env, tmp_path, case):
    files, cwd, path, wine_says = CASES[case]
    root = _lay_out(case, files, shim_env)
    exe = f"C:\\{WROOT}\\{case}\\app\\needstop.exe"
    out = tmp_path / "t.jsonl"
    r = winetools.dlltrace("run", "--wine", "-o", str(out), "--", exe, cwd=root / cwd,
                           WINEPATH=";".join(f"C:\\{WROOT}\\{case}\\{p}" for p in path))
    assert "Traceback" not in r.stderr
    real, model = _outcomes(read_trace(out), exe)
    assert real == model, (case, r.stderr)
    if wine_says:  # it could not start, and the run's own report said why
        assert real == wine_says and f"error {wine_says}" in r.stderr
    else:
        assert isinstance(real, dict) and r.stdout.replace("\r\n", "\n") == "top_fn 6\n", r.stderr


def test_process_start_random_layouts(shim_env, tmp_path, summary):
    """Seeded random layouts of the chain over the program's folder, a subfolder, the current
    folder, two PATH entries in either order and nowhere, with 32-bit copies of the leaf; run
    through the launcher alone (no Python per case). The model must agree with Wine on each."""
    import os
    import random

    seed = int(os.environ.get("DLLTRACE_START_SEED", "20261129"))
    n = int(os.environ.get("DLLTRACE_START_CASES", "100"))
    rng = random.Random(seed)
    places = ["app", "app/sub", "work", "p", "q", None]
    tally = {"started": 0, "could not start": 0}
    for i in range(n):
        files: dict[str, str] = {}
        for dll in ("top.dll", "mid.dll", "leaf.dll"):
            # mostly somewhere the loader may search, so that both outcomes come up often
            for where in set(rng.choices(places, weights=[4, 1, 2, 2, 2, 1], k=rng.choice([1, 1, 2]))):
                if where:
                    files[f"{where}/{dll}"] = dll
        if rng.random() < 0.3:
            where = rng.choice(places[:-1])
            files.setdefault(f"{where}/leaf.dll", "leaf86.dll")
        cwd = rng.choice(["work", "app"])
        path = rng.sample(["p", "q"], rng.choice([0, 1, 2]))
        case = f"random{i:03d}"
        root = _lay_out(case, files, shim_env)
        exe = f"C:\\{WROOT}\\{case}\\app\\needstop.exe"
        out = tmp_path / f"{case}.jsonl"
        winetools.run_launcher(LAUNCHER, [exe], out, cwd=root / cwd,
                               extra_env={"WINEPATH": ";".join(f"C:\\{WROOT}\\{case}\\{p}" for p in path)})
        trace = read_trace(out)  # the launcher alone wrote the header: readable even if no shim started
        assert (trace.header.tool, trace.header.platform) == ("dlltrace-launch 0.1.0", "wine")
        real, model = _outcomes(trace, exe)
        assert real == model, (seed, case, files, cwd, path)
        tally["started" if isinstance(real, dict) else "could not start"] += 1
        shutil.rmtree(root, ignore_errors=True)
    summary["process start"] = (f"process start (seed {seed}): {n} random layouts, all agree with Wine "
                                f"({tally['started']} started, {tally['could not start']} could not start)")
    assert all(tally.values())  # both kinds of outcome were exercised
