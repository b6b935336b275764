"""The one keep-going walk (tracer/dlltrace/loader/walk.py), on its own: the three walks built on it
(diagnosis/static.py, diagnosis/verify.also_missing, loader/linux/static.py) are tested through deps, check and
the reports' "also missing" (tests/test_static.py, tests/test_verify.py, tests/test_linux_rules.py)."""

from __future__ import annotations

from dlltrace.loader.walk import Step, keep_going

CHAIN = ["a.dll", "b.dll", "c.dll"]  # each needs the next: a missing one fails the load


def run_chain(missing: set[str]):
    def run(stand_ins: dict[str, str]) -> str:
        return next((n for n in CHAIN if n in missing and n not in stand_ins), "")  # "" loads
    return run


def stand_in_each(res: str, stand_ins: dict[str, str]):
    return None if not res else Step(res, {res: "stand-in"})


def test_keep_going_finds_every_missing_library_then_loads():
    runs = []

    def run(stand_ins):
        runs.append(dict(stand_ins))
        return run_chain({"a.dll", "c.dll"})(stand_ins)

    w = keep_going(run, stand_in_each, 10)
    assert w.found == ["a.dll", "c.dll"] and w.result == "" and w.rounds == 3
    assert runs == [{}, {"a.dll": "stand-in"}, {"a.dll": "stand-in", "c.dll": "stand-in"}]


def test_keep_going_stops_where_no_stand_in_helps_or_a_step_is_the_last():
    w = keep_going(run_chain({"b.dll"}), lambda r, s: None, 10)
    assert (w.found, w.result, w.rounds) == ([], "b.dll", 1)
    w = keep_going(run_chain(set(CHAIN)), lambda r, s: Step(r, {r: "x"}, last=r == "b.dll"), 10)
    assert w.found == ["a.dll", "b.dll"] and w.result == "b.dll"


def test_keep_going_stops_when_a_stand_in_would_change_nothing_and_at_its_limit():
    # a stand-in already there: the same failure would come again, forever
    w = keep_going(lambda s: "a.dll", lambda r, s: Step(r, {"a.dll": "x"}), 10)
    assert w.found == ["a.dll"] and w.rounds == 2  # (found once; the second run fails the same way: the end)
    w = keep_going(lambda s: "a.dll", lambda r, s: Step(r, {}), 10)  # (no stand-in at all)
    assert w.found == ["a.dll"] and w.rounds == 1
    many = [f"l{i}.dll" for i in range(20)]
    w = keep_going(lambda s: next(n for n in many if n not in s), stand_in_each, 5)
    assert w.found == many[:5] and w.rounds == 5  # (five runs, five found)
