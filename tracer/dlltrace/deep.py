"""Running a command over deep import trees, and printing any name it meets.

`simulate` and `report` walk import trees by recursion (the simulator's resolve, the renderers, the
fix checks, the stdlib's JSON encoder): an import chain of a few hundred DLLs passed Python's default
recursion limit (1000). deep_call runs such a command in a worker thread with a big stack
(STACK_BYTES) and a recursion limit to match (RECURSION_LIMIT), so that import chains of up to
MAX_IMPORT_DEPTH levels work; the simulator refuses a deeper chain with ImportDepthError (one line),
and a RecursionError still met anywhere becomes one line too, never a traceback. Ctrl-C reaches the
main thread, which hands the KeyboardInterrupt to the worker and waits for it (INTERRUPT_WAIT): the
command's own cleanup runs (`report`'s progress bar erased, the terminal's cursor shown again) before
the interrupt is reported (exit 130).

safe_streams makes stdout and stderr print any string on any console (console.py): a lone UTF-16
surrogate (legal in a Windows file name, read from a trace's or a JSON scenario's `\\udXXX` escape)
is written as the escape `\\udXXX`, which in JSON output is the same JSON escape again (the name
round-trips), and in text a visible one; a character a code page lacks (cp1252, cp437) is an ASCII
stand-in in text and a JSON escape in JSON; printing never raises.
"""

from __future__ import annotations

import sys
import threading

from dlltrace.errors import DlltraceError
from dlltrace.console import setup_streams

TYPE_CHECKING = False  # (typing is not imported at run time: start-up, bench/startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

MAX_IMPORT_DEPTH = 16384    # import levels (a chain of DLLs each importing the next) the simulator follows
RECURSION_LIMIT = 400_000   # frames: MAX_IMPORT_DEPTH levels take about 10 frames each in the deepest walk
STACK_BYTES = 1024 * 1024 * 1024  # reserved, not committed: only the pages a deep walk touches are used
INTERRUPT_WAIT = 5.0  # seconds the worker is given to clean up after Ctrl-C (a second Ctrl-C stops waiting)


class ImportDepthError(DlltraceError):
    """An import chain deeper than MAX_IMPORT_DEPTH: the caller says in which file (deep_call does)."""

    def __init__(self) -> None:
        super().__init__(f"an import chain deeper than {MAX_IMPORT_DEPTH} levels is not simulated")


def deep_call(fn: Callable[..., int], *args: Any, where: str = "", exit_code: int = 2) -> int:
    """fn(*args) in a thread with a big stack and a high recursion limit. An ImportDepthError or a
    RecursionError becomes a DlltraceError of one line (`where: ...`) with `exit_code`; any other
    exception (DlltraceError, KeyboardInterrupt, ...) is raised again here, as fn raised it."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["rc"] = fn(*args)
        except BaseException as e:  # (handed to the calling thread)
            box["error"] = e
        finally:
            done.set()

    old_stack = threading.stack_size()
    old_limit = sys.getrecursionlimit()
    worker: Optional[threading.Thread] = None
    # (the biggest stack the machine lets a thread reserve: under an address-space limit -- ulimit -v -- a 1 GiB
    # reservation fails to start; a smaller stack takes a recursion limit in proportion, so that a walk too deep
    # for it is a RecursionError, one line, never a crash)
    for size in (STACK_BYTES, STACK_BYTES // 4, STACK_BYTES // 16):
        try:
            threading.stack_size(size)  # (read when the thread starts)
        except (ValueError, RuntimeError):  # a platform that refuses the size: the caller's stack, as before
            break
        candidate = threading.Thread(target=work, name="dlltrace-deep", daemon=True)
        sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT * size // STACK_BYTES))
        try:
            candidate.start()
        except RuntimeError:  # can't start new thread: its stack could not be reserved
            sys.setrecursionlimit(old_limit)
            continue
        finally:
            threading.stack_size(old_stack)
        worker = candidate
        break
    if worker is None:
        threading.stack_size(old_stack)
        return _direct(fn, args, where, exit_code)
    try:
        while worker.is_alive():
            worker.join(0.2)  # (a timeout: Ctrl-C reaches the main thread)
    except KeyboardInterrupt:
        interrupt(worker, done)
        raise
    finally:
        sys.setrecursionlimit(old_limit)
    error: Optional[BaseException] = box.get("error")
    if error is None:
        return int(box["rc"])
    raise _one_line(error, where, exit_code)


def interrupt(worker: threading.Thread, done: threading.Event, wait: float = INTERRUPT_WAIT) -> None:
    """Ctrl-C, met by the main thread, raised in the worker too (at its next Python instruction), and the
    worker waited for: its `finally` blocks and context managers run (a progress bar erased, the cursor
    shown again) before the process reports the interrupt and ends."""
    # (not worker.is_alive(): a join that Ctrl-C interrupted may leave the thread said to be stopped while it runs)
    if worker.ident is None or done.is_set():
        return
    import ctypes  # (here only: `dlltrace run` starts its program sooner without it)

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(KeyboardInterrupt))
    try:
        done.wait(wait)
    except KeyboardInterrupt:  # (a second Ctrl-C: do not wait any more)
        pass


def _direct(fn: Callable[..., int], args: tuple, where: str, exit_code: int) -> int:
    try:
        return fn(*args)
    except (ImportDepthError, RecursionError) as e:
        raise _one_line(e, where, exit_code) from None


def _one_line(error: BaseException, where: str, exit_code: int) -> BaseException:
    if isinstance(error, ImportDepthError):
        return DlltraceError(f"{where}: {error.message}" if where else error.message, exit_code)
    if isinstance(error, RecursionError):
        what = "nested too deeply to process (an import chain is followed to "
        return DlltraceError(f"{where + ': ' if where else ''}{what}{MAX_IMPORT_DEPTH} levels)", exit_code)
    return error


def safe_streams(json_stdout: bool = False) -> None:
    """stdout and stderr write a lone surrogate as its backslash escape, and any character their
    encoding lacks as a stand-in (a JSON escape on a stdout carrying JSON), instead of raising
    UnicodeEncodeError (console.setup_streams)."""

    setup_streams(json_stdout)
