"""Which failed call of a Linux trace is the failure the program hit, and one Diagnosis per process
(diagnosis/result.py) of a Linux trace.

rule_linux_python_exception: the failed call the Python exception the program ended on names (its message
holds the leaf's or the call's name, as ctypes' `OSError: libcudart.so.11.0: cannot open shared object
file` and ImportError's do); rule_linux_exit_zero: a program that exited with 0 went past every failed
call. Without either, every failed call is shown, none chosen (fate "unknown")."""

from __future__ import annotations

from typing import Any, Optional

from dlltrace.diagnosis.outcome import python_error, rule_exception_names_feature, rule_load_class
from dlltrace.diagnosis.result import Copy, Diagnosis, FailedLoad, ProcessEnd, Tried, code_place, process_outcome
from dlltrace.diagnosis.replay_linux import LinuxCall, replay_linux
from dlltrace.trace.reader import Trace


def _exception_messages(trace: Trace) -> list[tuple[Any, str]]:
    out = []
    for e in trace.of("py_exception"):
        texts = [str(e.get("message") or "")] + [str(c.get("message") or "") for c in e.get("causes") or []
                                                 if isinstance(c, dict)]
        out.append((e.get("pid"), " ".join(texts)))
    return out


def rule_linux_python_exception(calls: list[LinuxCall], trace: Trace) -> Optional[LinuxCall]:
    """The last failed call whose name or leaf the program's final Python exception names; else the last
    whose feature it names (outcome.rule_exception_names_feature: CuPy's cudaErrorInsufficientDriver after
    libcuda.so.1 failed)."""
    messages = _exception_messages(trace)
    for c in reversed(calls):
        names = {c.name.rsplit("/", 1)[-1], (c.leaf.name if c.leaf else "")} - {""}
        if any(pid == c.pid and any(n in text for n in names) for pid, text in messages):
            return c
    for pid, text in messages:
        mine = [c for c in calls if c.pid == pid]
        i = rule_exception_names_feature(text, [c.leaf.name if c.leaf else c.name for c in mine])
        if i is not None:
            return mine[i]
    return None


def linux_exit_code(trace: Trace) -> Optional[int]:
    """The program's exit code, as `dlltrace run` recorded it (None: not recorded, or a signal)."""
    e = next(trace.of("exit"), None)
    code = e.get("code") if e else None
    return code if isinstance(code, int) else None


def linux_calls(trace: Trace, calls: Optional[list[LinuxCall]] = None) -> tuple[list[LinuxCall], Optional[LinuxCall]]:
    """The failed calls of the trace (of its replay, `calls`, made here when not given), and the one the
    program hit (or None)."""
    failed = [c for c in (replay_linux(trace.events) if calls is None else calls) if c.error or c.real_error]
    return failed, rule_linux_python_exception(failed, trace)


def rule_linux_exception_not_a_load(trace: Trace) -> bool:
    """The program ended on a Python exception that names none of its failed calls (rule_linux_python_exception
    found none): the exception is what it died of; its failed calls were gone past."""
    return bool(_exception_messages(trace))


def rule_linux_exit_zero(trace: Trace) -> bool:
    """The program exited with 0: every failed call was one it went past (a probe for an optional
    library, a pyenv shim's bash trying its .dylib)."""
    return linux_exit_code(trace) == 0


def linux_verdicts(trace: Trace, calls: Optional[list[LinuxCall]] = None
                   ) -> tuple[list[LinuxCall], Optional[LinuxCall], list[LinuxCall]]:
    """(the failed calls, the one the program hit or None, those it went past)."""
    failed, fatal = linux_calls(trace, calls)
    if fatal is None and (rule_linux_exit_zero(trace) or rule_linux_exception_not_a_load(trace)):
        return failed, None, list(failed)
    return failed, fatal, [c for c in failed if fatal is not None and c is not fatal]


def _fate(c: LinuxCall, fatal: Optional[LinuxCall], apart: list[LinuxCall], exit_zero: bool) -> tuple[str, Optional[str]]:
    if c is fatal:
        return "fatal", "python_exception"
    if any(c is a for a in apart):
        return "went_on", ("another_was_fatal" if fatal is not None else
                           "exit_zero" if exit_zero else "exception_not_a_load")
    return "unknown", None


def linux_failed_load(c: LinuxCall, index: int, fate: tuple[str, Optional[str]]) -> FailedLoad:
    cands = c.tree.candidates if c.tree else []
    leaf = c.leaf.name if c.leaf else None
    return FailedLoad(
        seq=index, api="dlopen", name=c.name, error=0, message=c.real_error or c.error, fate=fate[0],  # type: ignore[arg-type]
        reason=fate[1], origin=c.origin, leaf=c.leaf.name if c.leaf else None,
        cause=c.leaf.cause if c.leaf else None, needed_by=c.leaf.parent if c.leaf else None, chain=tuple(c.chain),
        tried=tuple(Tried(x.path, x.rule, x.result) for x in cands),
        elsewhere=tuple(Copy(f.path, "not_searched") for f in c.fixes if f.action == "set_env" and f.path),
        next_failures=(), fixes=tuple(c.fixes), model_agrees=c.agrees,
        klass=rule_load_class(fate[0], fate[1], c.name, leaf), user_code=code_place(c.frame),
        symbol=c.leaf.facts.export if c.leaf and c.leaf.cause == "missing_export" else None, caller=c.by or "")


def linux_diagnoses(trace: Trace, calls: Optional[list[LinuxCall]] = None) -> list[Diagnosis]:
    """One Diagnosis per process of a Linux trace (those with a failed call, and the program `dlltrace run`
    started), in the order of their first event."""
    calls = replay_linux(trace.events) if calls is None else calls
    failed, fatal, apart = linux_verdicts(trace, calls)
    end = next(trace.of("exit"), None)
    top = end.get("pid") if end else None
    pids: dict[int, str] = {}
    for e in trace.of("audit_start"):  # (a pid that execs another program: the last one is its program)
        pids[e["pid"]] = str(e.get("exe") or "")
    for c in calls:
        pids.setdefault(c.pid, c.exe)
    out = []
    zero = rule_linux_exit_zero(trace)
    for pid, exe in pids.items():
        mine = [c for c in failed if c.pid == pid]
        if pid == top and end is not None:
            sig = end.get("signal")
            kind = "killed" if isinstance(sig, int) and sig not in (2,) and end.get("code") is None else \
                "interrupted" if sig == 2 else "exited"
            pend = ProcessEnd(kind, end.get("code"), sig)  # type: ignore[arg-type]
        else:
            pend = ProcessEnd("unknown")
        if not mine and pid != top:
            continue
        failures = tuple(linux_failed_load(c, i, _fate(c, fatal, apart, zero)) for i, c in enumerate(mine))
        crashed = pend.kind == "killed" and pend.signal in CRASH_SIGNALS
        outcome = process_outcome("crashed" if crashed else pend.kind, pend.code, failures, python_error(trace, pid))
        out.append(Diagnosis("linux", pid, exe or next((c.exe for c in mine), ""), pend, outcome, failures))
    return out


CRASH_SIGNALS = (4, 6, 7, 8, 11)  # SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV: a crash, not a kill
