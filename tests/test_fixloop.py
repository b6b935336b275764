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


def test_verify_fixes_chain_partial_keeps_the_longest_chain_no_step_completes():
    """A chain no step completes (Linux's system packages: the third library's package is unknown, or past
    max_steps): with chain_partial, the partial fix keeps every step of its kind found and what fails after the
    last; without it, only itself (PyQt5's xcb plugin showed `apt-get install libxcb-icccm4` alone, seen for real)."""
    a, b, c = fix("install_system_package", "A"), fix("install_system_package", "B"), fix("install_system_package", "C")
    results = {("start", "A"): Attempt(False, outcome=Outcome(1, "b.so", "not_found"), after="a"),
               ("a", "B"): Attempt(False, outcome=Outcome(1, "c.so", "not_found"), after="b"),
               ("b", "C"): Attempt(False, outcome=Outcome(1, "d.so", "not_found"), after="c")}
    follow = {"a": [b], "b": [c]}  # (nothing for "c": d.so's package is not known)
    follow_ups = dict(follow)

    def chain(partial: bool):
        return verify_fixes("start", [a], applies=lambda f: True, attempt=lambda s, f: results[(s, f.folder)],
                            follow_up=lambda s: follow_ups.get(s, []), key=lambda f: (f.action, f.folder),
                            names=("x.dll",), max_steps=5, chain_partial=partial)

    (got,) = chain(True)
    steps, cur = [got.folder], got
    while cur.then:
        cur = cur.then[0]
        steps.append(cur.folder)
    assert steps == ["A", "B", "C"] and got.verified is False and got.outcome == Outcome(1, "d.so", "not_found")
    (alone,) = chain(False)
    assert (alone.folder, alone.then, alone.outcome) == ("A", (), Outcome(1, "b.so", "not_found"))
