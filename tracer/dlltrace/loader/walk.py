"""The one keep-going walk: a load run again and again, each time with a stand-in for the library it failed
on, so that one failure does not hide the next. `dlltrace deps` / `check` on Windows (diagnosis/static.py)
and on Linux (loader/linux/static.py) and a report's "also missing" (diagnosis/verify.py) are this walk with
their own `run` (the load, in a world with the stand-ins so far) and `step` (what the failure is, and the
stand-in that takes its place). Knows neither OS: the stand-ins are whatever the caller's world takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Optional, TypeVar

R = TypeVar("R")  # a load's result (model.CallResult, engine's DlopenResult)
P = TypeVar("P")  # what a failure is found to be (a Problem, an AlsoMissing)
S = TypeVar("S")  # a stand-in (FileFacts, ELFFacts)


@dataclass
class Step(Generic[P, S]):
    """A failure found: what it is (`found`, None to record nothing), the stand-ins that take its place
    (path -> facts), and whether the walk stops here all the same."""
    found: Optional[P]
    stand_ins: dict[str, S] = field(default_factory=dict)
    last: bool = False


@dataclass
class Walk(Generic[R, P, S]):
    result: R  # the last run's result (it loads, or fails on what no stand-in fixes)
    found: list[P]  # each failure, in order
    stand_ins: dict[str, S]  # every stand-in the last run had
    rounds: int


def keep_going(run: Callable[[dict[str, S]], R], step: Callable[[R, dict[str, S]], Optional[Step[P, S]]],
               limit: int) -> Walk[R, P, S]:
    """Run the load (run(stand_ins)); while step() finds a failure with a stand-in, record it, add the stand-in
    and run again; stop when the load succeeds or step() gives None (no stand-in helps), a step says it is
    the last, a stand-in would not change the world (it was there already: the failure would repeat), or
    after `limit` runs."""
    stand_ins: dict[str, S] = {}
    found: list[P] = []
    rounds = 0
    result = run(stand_ins)
    for rounds in range(1, limit + 1):
        s = step(result, stand_ins)
        if s is None:
            break
        if s.stand_ins and all(stand_ins.get(k) == v for k, v in s.stand_ins.items()):
            break  # (its stand-in is there already: the same failure again, found before)
        if s.found is not None:
            found.append(s.found)
        if s.last or not s.stand_ins:
            break
        if rounds == limit:
            break
        stand_ins.update(s.stand_ins)
        result = run(stand_ins)
    return Walk(result, found, stand_ins, rounds)
