"""A fix checked against the WHOLE recorded run, not only the load it fixes (issue 24 item 1).

verify.verify re-runs the failing call with a fix applied. A fix can make that call load and break another:
os.add_dll_directory of a folder whose x.dll lacks what a later module needs (the later load then binds to
the copy already loaded, which lacks it), a preload by full path of the wrong copy. So the failing load's
process is replayed twice through the model, every top-level load in order -- once as recorded, once with
the fix applied just before the failing load's first attempt (replay.whole_run's hook) -- and a fix is verified only when
the failing load now loads and no load that loaded before fails or loads another file now. A fix that
breaks one keeps its words with what it breaks (Fix.breaks) and is ranked after the ones that break nothing.

Checked: the fixes the model verified of each load that was the failure (their first WHOLE_RUN_FIXES), in a
process of at most WHOLE_RUN_MAX_LOADS top-level loads (a bigger one keeps the per-call verification).
"""

from __future__ import annotations

import dataclasses
from dlltrace import winpath
from dlltrace.diagnosis.replay import LoadOutcome, recorded_world, whole_run
from dlltrace.diagnosis.verify import Situation, _Applied, _apply_one
from dlltrace.loader.windows.engine import Simulator
from dlltrace.model import CallResult, Fix
from dlltrace.trace.reader import Load, Trace
from dlltrace.worlds.overlay import OverlayWorld

WHOLE_RUN_FIXES = 3
WHOLE_RUN_MAX_LOADS = 5000


def broken_by(before: dict[int, LoadOutcome], after: dict[int, LoadOutcome], at: int) -> tuple[str, ...]:
    """The loads after `at` that loaded in `before` and, in `after`, fail, load another file, or bind more imports
    to stubs (under Wine a missing export loads, and ends the program when called) -- by name, once each."""
    out: list[str] = []
    for seq, b in before.items():
        if seq <= at or b.error:
            continue
        a = after.get(seq)
        if a is None or a.error or a.stubs > b.stubs or (b.path and a.path and not winpath.same(a.path, b.path)):
            name = winpath.basename(b.name) or b.name
            if name not in out:
                out.append(name)
    return tuple(out)


def rule_whole_run(trace: Trace, pid: int, attempts: tuple[int, ...], res: CallResult, fix: Fix,
                   before: dict[int, LoadOutcome]) -> tuple[bool, tuple[str, ...]]:
    """(whether the failing load loads with the fix -- its last attempt: torch's retry after its first try --,
    the loads that loaded and no longer do or load another file), replaying process pid's whole run with the
    fix applied just before the first attempt (a fix that changes the call itself, its name or flags, changes
    each attempt)."""
    world = OverlayWorld(recorded_world(trace, pid))
    at = attempts[0]
    changed: dict[str, object] = {}
    put_first: list[str] = []  # PATH entries the fix put first: the program's own PATH changes keep them

    def hook(sim: Simulator, load: Load) -> bool:
        if load.seq in attempts[1:] and changed:
            load.name = changed.get("name", load.name)  # type: ignore[assignment]
            load.flags = changed.get("flags", load.flags)  # type: ignore[assignment]
        if load.seq != at:
            return False
        applied = _Applied(world, sim.process)
        old_path = list(sim.process.path)
        _apply_one(fix, applied, Situation(world, sim.process, res))
        put_first.extend(p for p in sim.process.path if not any(winpath.same(p, q) for q in old_path))
        for path, flags in applied.preloads:
            sim.load_library(path, flags)
        if applied.name is not None:
            changed["name"] = load.name = applied.name
        if applied.flags is not None:
            changed["flags"] = load.flags = applied.flags
        return True

    def keep(sim: Simulator) -> None:
        for p in reversed(put_first):
            if not any(winpath.same(p, q) for q in sim.process.path):
                sim.process.path.insert(0, p)

    after = whole_run(trace, pid, world, hook, keep)
    # (fixed: its last attempt loads -- torch's 0x1100 try may still fail under a PATH fix, its retry then loads)
    fixed = attempts[-1] in after and not after[attempts[-1]].error
    others = {k: v for k, v in before.items() if k not in attempts}
    return fixed, broken_by(others, after, at)


def check_whole_run(trace: Trace, pid: int, attempts: tuple[int, ...], res: CallResult) -> None:
    """The failing load's fixes (res.fixes, in place) checked over the whole run: each verified one is marked
    with what it breaks (and unverified when it breaks any, or when the failing load still fails in the run),
    those that break nothing first."""
    verified = [f for f in res.fixes if f.verified][:WHOLE_RUN_FIXES]
    if not verified or trace.count_of(("load_begin",), pid) > WHOLE_RUN_MAX_LOADS:
        return
    before = whole_run(trace, pid, recorded_world(trace, pid))
    checked: dict[int, Fix] = {}
    for f in verified:
        fixed, breaks = rule_whole_run(trace, pid, attempts, res, f, before)
        if breaks or not fixed:
            checked[id(f)] = dataclasses.replace(f, verified=False, breaks=breaks)
    if not checked:
        return
    fixes = [checked.get(id(f), f) for f in res.fixes]
    res.fixes[:] = [f for f in fixes if not f.breaks] + [f for f in fixes if f.breaks]
