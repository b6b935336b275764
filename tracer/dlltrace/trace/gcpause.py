"""The cyclic garbage collector paused while dlltrace builds many small objects (trace/reader.py, the replay, the
renderers), apart from the reader so that the `dlltrace` command sets its mode (freeze_after_pauses) without
importing the reader: `dlltrace --help` imports no trace code."""

from __future__ import annotations

import gc
from contextlib import contextmanager

TYPE_CHECKING = False  # (typing is not imported at run time: start-up, bench/startup.py)
if TYPE_CHECKING:
    from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects (events, loads,
    simulator trees): on a 100,000-event trace collecting as they are made took more than half the
    time. In the command (freeze_after_pauses), what is still alive at the end (the trace, the
    replay) is then frozen (gc.freeze), not left in the youngest generation, where the first
    collection after the pause would scan every one of it (0.2 s a pause on such a trace); sound
    because what dlltrace builds has no reference cycles (tests/test_report.py checks it), so
    reference counting alone frees it. A library caller, whose process lives on, gets the plain
    pause: freezing would also keep any cyclic garbage of its own for ever."""
    was = gc.isenabled()
    try:  # (disabled inside the try: an exception raised at any point after -- deep.py's KeyboardInterrupt, sent to a
        gc.disable()  # thread asynchronously -- still enables it again)
        yield
    finally:
        if was:
            if _FREEZE[0]:
                gc.freeze()
            gc.enable()


_FREEZE = [False]


def freeze_after_pauses(on: bool = True) -> None:
    """For a short-lived process (the `dlltrace` command): paused_gc freezes instead of collecting."""
    _FREEZE[0] = on




def freeze_before_exit() -> None:
    """For the `dlltrace` command, once its work is done and the process is about to end: every object left
    is frozen, so the interpreter's last collections at exit do not scan them (the loader model, the
    diagnosis, the trace: after a `run --wine`, 0.04 s of CPU and 0.1 s of wall time on a busy 2-core
    machine, against 0.01 s frozen; bench/wine_run.py --phases, "the interpreter's exit"). Reference
    counting still frees what it holds; cyclic garbage is left to the process's end, as paused_gc does."""
    if _FREEZE[0]:
        gc.freeze()
