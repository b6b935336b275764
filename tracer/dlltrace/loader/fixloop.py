"""The one verification loop: every candidate fix is applied to an overlay of the world and the process, and the
failing call (Windows: diagnosis/verify.py) or the whole process (Linux: loader/linux/fixes.py) is run again.
A fix is offered as verified only if the load then succeeds; one that only moves the failure is completed with
the next steps `follow_up` proposes for the situation after it (depth-first, `max_steps` at most); advice the
model cannot apply is kept, unverified, after them. Ranked: complete fixes first, fewer steps first, then in the
order proposed. Knows neither OS: `attempt` applies a fix and re-runs, in the caller's world."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, Iterable, Optional, TypeVar

from dlltrace.model import Fix, Outcome

S = TypeVar("S")  # a situation: what the re-run needs (the world, the process, the call)


@dataclass
class Attempt(Generic[S]):
    """What a re-run with a fix applied gave."""
    loads: bool
    same: bool = False  # it fails as before: the fix changed nothing
    unknowable: bool = False  # whether it helps the model cannot tell (a DllMain failure no file explains)
    outcome: Optional[Outcome] = None  # what it fails on now (None: it loads)
    covers: tuple[str, ...] = ()  # the missing libraries it made load
    after: Optional[S] = None  # the situation with the fix applied, failing on what it fails on now (None: no next step)


def verify_fixes(state: S, candidates: Iterable[Fix], *, applies: Callable[[Fix], bool],
                 attempt: Callable[[S, Fix], Attempt[S]], follow_up: Callable[[S], list[Fix]],
                 key: Callable[[Fix], Hashable], names: tuple[str, ...], max_steps: int, depth: int = 0,
                 chain_partial: bool = False) -> list[Fix]:
    """The candidates that make the load succeed, each marked verified with its outcome (module docstring).
    `chain_partial`: a fix no chain of steps completes keeps the longest chain of steps of its own kind found
    (Linux's system packages: every package the model found, and the library that fails after them), not only
    itself."""
    here = list(candidates)
    done: list[tuple[int, int, Fix]] = []
    advice: list[Fix] = []
    partial: list[Fix] = []
    for order, fix in enumerate(here):
        if not applies(fix):
            advice.append(fix)
            continue
        a = attempt(state, fix)
        if a.loads:
            done.append((1 + len(fix.then), order, dataclasses.replace(
                fix, verified=True, outcome=Outcome(0), covers=fix.covers or a.covers)))
            continue
        if a.same and a.unknowable:
            advice.append(fix)  # the model cannot tell: kept, not checked
            continue
        if a.same or depth + 1 >= max_steps or a.after is None:
            continue
        # the next steps: of the same kind first (copy, then copy again); never one that alone would have been
        # offered at this level (it is a fix of its own, not a step of this one)
        seen = {key(f) for f in here}
        more = [f for f in follow_up(a.after) if key(f) not in seen]
        more.sort(key=lambda f: f.action != fix.action)
        further: Optional[Fix] = None
        for step in verify_fixes(a.after, more, applies=applies, attempt=attempt, follow_up=follow_up, key=key,
                                 names=names, max_steps=max_steps, depth=depth + 1, chain_partial=chain_partial):
            if step.verified:
                whole = dataclasses.replace(fix, then=(*fix.then, step), verified=True, outcome=step.outcome,
                                            covers=tuple(names))
                done.append((1 + len(fix.then) + 1 + len(step.then), order, whole))
                break
            if chain_partial and further is None and step.verified is False and step.action == fix.action:
                further = step
        else:
            # it moves the failure and no further step helps: offered after the fixes that work, as not verified,
            # with what fails next
            if further is not None:
                partial.append(dataclasses.replace(fix, then=(*fix.then, further), verified=False,
                                                   outcome=further.outcome, covers=a.covers))
            else:
                partial.append(dataclasses.replace(fix, verified=False, outcome=a.outcome, covers=a.covers))
    done.sort(key=lambda t: (t[0], t[1]))
    return [f for _, _, f in done] + (partial if not done else []) + advice
