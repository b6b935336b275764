"""The one verification loop (tracer/dlltrace/loader/fixloop.py) on its own; the Windows re-run of a call
(diagnosis/verify.py) and the Linux re-run of a process (loader/linux/fixes.py) are tested through the reports'
fixes (tests/test_verify.py, tests/test_linux_trace.py)."""

from __future__ import annotations

from dlltrace.loader.fixloop import Attempt, verify_fixes
from dlltrace.model import Fix, Outcome


def fix(action: str, folder: str = "") -> Fix:
    return Fix("path", action, name="x.dll", folder=folder)  # type: ignore[arg-type]


def run(candidates, results, follow=(), applies=lambda f: True, max_steps=3):
    """results: folder -> Attempt (after: a state name for follow_up)."""
    follow_ups = dict(follow)
    return verify_fixes("start", candidates, applies=applies,
                        attempt=lambda s, f: results[(s, f.folder)],
                        follow_up=lambda s: follow_ups.get(s, []), key=lambda f: (f.action, f.folder),
                        names=("x.dll",), max_steps=max_steps)


def test_verify_fixes_keeps_what_loads_ranked_by_steps_and_drops_what_changes_nothing():
    a, b, c = fix("path_prepend", "A"), fix("path_prepend", "B"), fix("copy_file", "C")
    results = {("start", "A"): Attempt(False, same=True),
               ("start", "B"): Attempt(True, covers=("x.dll",)),
               ("start", "C"): Attempt(False, outcome=Outcome(126, "y.dll", "not_found"), after="copied"),
               ("copied", "D"): Attempt(True)}
    got = run([a, b, c], results, follow={"copied": [fix("copy_file", "D")]})
    assert [(f.folder, f.verified, [t.folder for t in f.then]) for f in got] == [("B", True, []), ("C", True, ["D"])]
    assert got[0].outcome == Outcome(0) and got[0].covers == ("x.dll",) and got[1].covers == ("x.dll",)


def test_verify_fixes_partial_advice_and_unknowable():
    a, b, c = fix("copy_file", "A"), fix("check_init", "B"), fix("path_prepend", "C")
    results = {("start", "A"): Attempt(False, outcome=Outcome(126, "y.dll", "not_found"), after="moved"),
               ("start", "C"): Attempt(False, same=True, unknowable=True)}
    got = run([a, b, c], results, applies=lambda f: f.action != "check_init")
    # nothing loads: the fix that moves the failure, unverified with what fails next; then the advice, unchecked
    assert [(f.folder, f.verified) for f in got] == [("A", False), ("B", None), ("C", None)]
    assert got[0].outcome == Outcome(126, "y.dll", "not_found")


def test_verify_fixes_stops_at_max_steps():
    a = fix("copy_file", "A")
    results = {("start", "A"): Attempt(False, outcome=Outcome(126, "y.dll", "not_found"), after="moved"),
               ("moved", "B"): Attempt(True)}
    # (at the last step a fix that only moves the failure is not offered at all)
    assert run([a], results, follow={"moved": [fix("copy_file", "B")]}, max_steps=1) == []
    assert [f.verified for f in run([a], results, follow={"moved": [fix("copy_file", "B")]}, max_steps=2)] == [True]
