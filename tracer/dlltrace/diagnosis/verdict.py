"""Which failed load is *the* failure: a typed verdict for every failed top-level load (docs/verdicts.md).

A program may probe for a DLL it can do without (nvcuda.dll, dxcore.dll), or fail a load and retry
it another way (torch's LoadLibraryExW(…, 0x1100), then LoadLibraryW after putting its folders on
PATH). Such a failure is not what went wrong. From what the trace says about how the program ended
-- the launcher's `exit` event, the bootstrap's `py_exception` event, a load that never returned --
each failed load gets a Verdict:

    fate    "fatal"    the failure the program hit (the report explains it and offers fixes)
            "went_on"  probed, absent, the program went on (listed apart, no fix, never counted)
            "unknown"  the trace does not say how the program ended (shown as a failure, said so)
    reason  which rule chose the fate (REASONS), with the facts it used (exit code, exception,
            the related load: the successful retry, or the load that was the failure)

Each rule is one function named rule_*; tests/test_verdicts.py has a test named after each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Literal, Optional, Sequence, get_args

from dlltrace.seqs import MadeSequence
from dlltrace import packages, winpath
from dlltrace.loader.windows.rules import rule_datafile_load
from dlltrace.trace.capped import Capped, capped, cut_by_cap
from dlltrace.diagnosis.ending import CRASH_TEXT, ending, exit_text, is_crash  # noqa: F401 (CRASH_TEXT, is_crash: verdict's words)
from dlltrace.diagnosis.outcome import rule_exception_names_a_missing_file_of_its_distribution, rule_exception_names_feature
from dlltrace.diagnosis.replay import Replayed, Replays
from dlltrace.trace.reader import Trace

Fate = Literal["fatal", "went_on", "unknown"]
Reason = Literal[
    "could_not_start",       # fatal: the process ended with a loader status before its entry point
    "real_load_succeeded",   # went_on: the real loader loaded it (only the model failed it)
    "exit_zero",             # went_on: the program exited with 0
    "retried_ok",            # went_on: a later load of the same module succeeded
    "died_in_load",          # fatal: the process ended inside this load (it never returned)
    "python_exception",      # fatal: the Python exception the program ended on names this load
    "exception_not_a_load",  # went_on: the program ended on a Python exception that names no failed load
    "crash",                 # fatal: the program crashed (an NTSTATUS exit code); the last failed load
    "nonzero_exit",          # fatal: the program exited non-zero; the last failed load
    "another_was_fatal",     # went_on: the program went past it; another load was the failure
    "no_exit",               # unknown: no exit code and no exception recorded for this process
    "cut_by_cap",            # unknown: the trace reached its size cap while this load ran (trace/capped.py)
]
FATES: tuple[str, ...] = get_args(Fate)
REASONS: tuple[str, ...] = get_args(Reason)
REAL_FAILURE: tuple[str, ...] = ("fatal", "unknown")  # what the summary counts as a failed load

@dataclass(frozen=True)
class PyException:
    """The bootstrap's `py_exception` event: the exception a Python program ended on (and its causes)."""
    type: str
    message: str
    module: Optional[str] = None   # ImportError.name
    path: Optional[str] = None     # ImportError.path, OSError.filename
    winerror: Optional[int] = None
    causes: tuple["PyException", ...] = ()

    @classmethod
    def from_event(cls, e: dict) -> "PyException":
        def one(d: dict) -> "PyException":
            s = lambda k: d.get(k) if isinstance(d.get(k), str) else None
            w = d.get("winerror")
            return cls(type=s("type") or "?", message=s("message") or "", module=s("module"), path=s("path"),
                       winerror=w if isinstance(w, int) and not isinstance(w, bool) else None)
        causes = tuple(one(c) for c in (e.get("causes") or []) if isinstance(c, dict))
        top = one(e)
        return cls(top.type, top.message, top.module, top.path, top.winerror, causes)

    def all(self) -> tuple["PyException", ...]:
        return (self, *self.causes)


@dataclass(frozen=True)
class LoadRef:
    """Another load a verdict refers to (the retry that succeeded, the load that was the failure)."""
    pid: int
    seq: int
    api: str
    name: str


@dataclass(frozen=True)
class Verdict:
    fate: Fate
    reason: Reason
    exit_code: Optional[int] = None
    exception: Optional[PyException] = None
    related: Optional[LoadRef] = None

    @property
    def real_failure(self) -> bool:
        return self.fate in REAL_FAILURE


Key = tuple[int, int]  # (pid, seq of the load_begin; 0 for a process that could not start)


def key(r: Replayed) -> Key:
    return (r.load.pid, r.load.seq)


def ref(r: Replayed) -> LoadRef:
    return LoadRef(r.load.pid, r.load.seq, r.load.api, r.load.name or "")


def same_module(a: Optional[str], b: Optional[str]) -> bool:
    """Two load names (or a name and a loaded path) that mean the same DLL: same file name."""
    return bool(a and b) and winpath.basename(a).lower() == winpath.basename(b).lower()


_DLL_NAME = re.compile(r"([\w.\-+~]+\.(?:dll|pyd))\b", re.IGNORECASE)


def exception_names_load(exc: PyException, r: Replayed, trace: Trace) -> bool:
    """Whether the exception (or one of its causes) names this load: its path (ImportError.path,
    OSError.filename), a DLL named in its message (torch's `Error loading "…\\x.dll"`, ctypes'
    `Could not find module '…\\x.dll'`), or the module being imported (ImportError.name = the
    `import` the load is attributed to)."""
    ctx = trace.context(r.load)
    imported = ctx.get("module") if ctx and ctx.get("ev") == "py_import" else None
    for e in exc.all():
        if e.path and (same_module(e.path, r.load.name) or same_module(e.path, r.load.path)):
            return True
        if any(same_module(m, r.load.name) for m in _DLL_NAME.findall(e.message)):
            return True
        if e.module and isinstance(imported, str) and (imported == e.module or imported.startswith(e.module + ".")):
            return True
        if rule_message_names_import(e.message, imported if isinstance(imported, str) else None, r.load.name):
            return True
        if rule_winerror_of_dlopen(e.winerror, ctx.get("ev") if ctx else None, r.load.error):
            return True
    return False


def rule_winerror_of_dlopen(winerror: Optional[int], context: Optional[str], error: Optional[int]) -> bool:
    """An OSError carrying the Windows error a load made by ctypes (context py_dlopen) failed with names that
    load (the last such: rule_python_exception), when the message does not: ctypes' own error for a
    wrong-machine DLL is "[WinError 193] %1 is not a valid Win32 application", with no file name, and a package
    that wraps it keeps it only as the cause (llvmlite 0.43.0's llvmlite.dll, 32-bit: "OSError: Could not
    find/load shared object file", from the WinError 193)."""
    return winerror is not None and winerror != 0 and context == "py_dlopen" and error == winerror


# CPython's words for an extension whose LoadLibraryExW failed (Python/dynload_win.c): the module's last name
_DLL_LOAD_FAILED = re.compile(r"DLL load failed while importing ([A-Za-z_]\w*)")


def rule_message_names_import(message: str, imported: Optional[str], name: Optional[str]) -> bool:
    """An exception's message that quotes CPython's "DLL load failed while importing X" names the extension
    load of the import whose last name is X (or, with no import known, the file X.*.pyd), even when the
    exception is not CPython's own: a package that tries its implementations in turn and raises one error
    of its own quoting each (psycopg's "no pq wrapper available. ... couldn't import psycopg 'binary'
    implementation: DLL load failed while importing pq: ...") keeps no ImportError.name nor path."""
    quoted = _DLL_LOAD_FAILED.findall(message)
    if not quoted:
        return False
    if imported:
        return imported.rsplit(".", 1)[-1] in quoted
    stem = winpath.basename(name or "").split(".", 1)[0]
    return bool(stem) and (name or "").lower().endswith(".pyd") and stem in quoted


# --- the rules, in the order they apply --------------------------------------------------------------
def rule_could_not_start(r: Replayed) -> Optional[Verdict]:
    """A process that ended with a loader status before its entry point: its static imports are the failure."""
    if r.load.api == "start":
        return Verdict("fatal", "could_not_start", exit_code=r.load.status)
    return None


def rule_real_load_succeeded(r: Replayed) -> Optional[Verdict]:
    """The real loader loaded it; only the model said it fails: not a failure of the program."""
    return Verdict("went_on", "real_load_succeeded") if not r.failed else None


def rule_exit_zero(code: Optional[int]) -> Optional[Verdict]:
    """The program exited with 0: no failed load was the failure, every one was probed and gone past."""
    return Verdict("went_on", "exit_zero", exit_code=0) if code == 0 else None


def rule_cut_by_cap(r: Replayed, cap: Optional[Capped]) -> Optional[Verdict]:
    """The trace reached its size cap (`run --max-size`) while this load ran: its end, probes or nested
    loads may have been dropped, so whether and why it failed is not known (it is not a load the process
    died in, whatever the lines that are left say)."""
    # (r.cut: as the replay found it, before a light replay let go of the load's probes and nested loads)
    return Verdict("unknown", "cut_by_cap") if r.cut or cut_by_cap(cap, r.load) else None


def rule_retried_ok(r: Replayed, later_ok: list[Replayed]) -> Optional[Verdict]:
    """A failure followed by a successful load of the same module: the program went on (torch's retry)."""
    for ok in later_ok:
        if rule_datafile_load(ok.load.flags or 0):
            continue  # mapped as data or as an image resource: the module was not loaded
        if ok.load.seq > r.load.seq and (same_module(ok.load.name, r.load.name) or same_module(ok.load.path, r.load.name)):
            return Verdict("went_on", "retried_ok", related=ref(ok))
    return None


def rule_died_in_load(candidates: list[Replayed]) -> Optional[Replayed]:
    """A load that never returned: the process ended inside it, so it is the failure."""
    unfinished = [r for r in candidates if not r.load.finished]
    return unfinished[-1] if unfinished else None


def rule_python_exception(candidates: list[Replayed], exc: Optional[PyException], trace: Trace) -> Optional[Replayed]:
    """The Python exception the program ended on names a load (its DLL, its path, its import): the
    last such failed load is the failure; naming none, one whose feature it names (the NVIDIA driver for
    cudaErrorInsufficientDriver: outcome.rule_exception_names_feature)."""
    if exc is None:
        return None
    named = [r for r in candidates if exception_names_load(exc, r, trace)]
    if named:
        return named[-1]
    # (no load named: one whose feature it names, outcome.rule_exception_names_feature)
    text = " ".join(f"{e.type}: {e.message}" for e in exc.all())
    i = rule_exception_names_feature(text, [r.result.leaf.name if r.result.leaf else r.load.name for r in candidates])
    return candidates[i] if i is not None else None


ERROR_INVALID_PARAMETER = 87


def rule_bare_call_of_a_gone_file(r: Replayed, exc_event: Optional[dict], trace: Trace, pid: int) -> bool:
    """A load by a bare name that failed with 87 (LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR without a full path: it loads no
    file, whatever is installed), when the exception the program ended on names, by that name, a file an installed
    distribution's record lists that is not there (its py_exception `files`: outcome.rule_exception_names_a_missing_
    file_of_its_distribution). pywin32's pywintypes.__import_pywin32_system_module__ tries LoadLibraryEx of the bare
    'pythoncom311.dll' (_win32sysloader: always 87) before it looks for pywin32_system32\\pythoncom311.dll on
    sys.path; with that file gone it raises "No system module 'pythoncom' (pythoncom311.dll)". The 87 is not the
    failure (it fails when all is well too): the file gone is, and the report said "pass a fully qualified path"."""
    name = r.load.name or ""
    if r.load.error != ERROR_INVALID_PARAMETER or not name or "\\" in name or "/" in name or exc_event is None:
        return False
    hit = rule_exception_names_a_missing_file_of_its_distribution(exc_event, trace.owners(pid))
    return hit is not None and winpath.basename(hit[0]).lower() == name.lower()


def rule_exception_not_a_load(candidates: list[Replayed], exc: Optional[PyException]) -> bool:
    """The program ended on a Python exception that names none of its failed loads (rule_python_exception
    found none: a ModuleNotFoundError for a missing Python module, numpy's ABI TypeError in an old
    TensorFlow, any error of the program's own): that exception is what it died of, and no failed load was
    the failure (they were gone past: context, not the cause)."""
    return exc is not None and bool(candidates)


def rule_crash(candidates: list[Replayed], code: Optional[int]) -> Optional[Replayed]:
    """A crash (an NTSTATUS exit code such as 0xC0000005): the last failed load before the end."""
    return candidates[-1] if is_crash(code) and candidates else None


def rule_nonzero_exit(candidates: list[Replayed], code: Optional[int]) -> Optional[Replayed]:
    """A non-zero exit with nothing more precise: the last failed top-level load not later loaded
    successfully (the one the program reported before it exited)."""
    return candidates[-1] if code not in (None, 0) and candidates else None


def _same_action(a: Replayed, b: Replayed, trace: Trace) -> bool:
    """Two loads made by the same Python action: the same process, and contexts at the same line of the program
    under the same imports (openslide-python's loop of ctypes loads, cffi's dlopen of each name in turn)."""
    if a.load.pid != b.load.pid:
        return False
    ca, cb = trace.context(a.load), trace.context(b.load)
    if ca is None or cb is None or ca.get("ev") is None:
        return False
    return all(ca.get(k) == cb.get(k) for k in ("ev", "frame", "imports", "module"))


def rule_alternate_name_a_package_ships(fatal: Replayed, candidates: list[Replayed], trace: Trace) -> Replayed:
    """A program that tries the names of one library in turn from one line of its code fails on every one of them
    (openslide-python 1.4: libopenslide-1.dll, then OpenSlide 3's libopenslide-0.dll; cairocffi: libcairo.so.2,
    libcairo.2.dylib, libcairo-2.dll). The failure is the first of those names, not found like the last, that a
    pip package ships (packages.json: openslide-bin ships libopenslide-1.dll): installing it is the fix. When the
    last name tried has such a package itself, or none of them has, the last name tried stays the failure."""
    if _pip_package(fatal.load.name) or fatal.load.error is None:
        return fatal
    i = candidates.index(fatal)
    run: list[Replayed] = []
    while i > 0 and _same_action(candidates[i - 1], fatal, trace) and candidates[i - 1].load.error == fatal.load.error:
        i -= 1
        run.insert(0, candidates[i])
    return next((r for r in run if _pip_package(r.load.name)), fatal)


def _pip_package(name: Optional[str]) -> bool:
    p = packages.lookup(name) if name else None
    return p is not None and p.kind == "pip"


def attempts_of(fatal: Replayed, candidates: list[Replayed]) -> list[Replayed]:
    """The fatal load and the failed attempts of the same module right before it (torch's first
    try before its retry): one failure, one verdict."""
    i = candidates.index(fatal)
    out = [fatal]
    while i > 0 and candidates[i - 1].load.pid == fatal.load.pid and same_module(candidates[i - 1].load.name, fatal.load.name):
        i -= 1
        out.append(candidates[i])
    return out


def judge_process(trace: Trace, pid: int, replays: Sequence[Replayed]) -> dict[Key, Verdict]:
    """The verdict of every failed load of one process (replays: its top-level loads, in order)."""
    out: dict[Key, Verdict] = {}
    end = ending(trace)
    # a killed process has no exit code of its own (Wine gives 0 for it): not an exit with 0
    code = None if end.kind == "killed" and end.pid == pid else trace.exit_code(pid)
    cap = capped(trace)
    exc_event = next(reversed(list(trace.of("py_exception", pid=pid))), None)
    exc = PyException.from_event(exc_event) if exc_event else None
    # the loads that succeeded, by file name (of the name asked and of the path loaded): a failure is
    # compared with those of its own name only (a scan of every load per failure was quadratic); by
    # their place in `replays` (replay.Replays makes a Replayed of a light record when asked for)
    ok_by_name: dict[str, list[int]] = {}
    candidates: list[Replayed] = []
    for i, r in enumerate(replays):
        if not r.failed:
            for n in {winpath.basename(r.load.name or "").lower(), winpath.basename(r.load.path or "").lower()} - {""}:
                ok_by_name.setdefault(n, []).append(i)
            if not r.result.error:
                continue  # a load that succeeded, and the model agrees: no verdict needed
        candidates.append(r)
    judged, candidates = candidates, []
    for r in judged:
        later_ok = [replays[i] for i in ok_by_name.get(winpath.basename(r.load.name or "").lower(), ())]
        v = (rule_could_not_start(r) or rule_real_load_succeeded(r) or rule_exit_zero(code) or rule_cut_by_cap(r, cap)
             or rule_retried_ok(r, later_ok))
        if v is not None:
            out[key(r)] = v
        else:
            candidates.append(r)
    if not candidates:
        return out
    fatal, verdict = None, None
    # the exception first: it names the load the program failed on, where a load that never
    # returned may be another thread's, caught by the exit (not a call that could load no file, when the file the
    # exception names is its distribution's and gone: that is what the program died of, rule_bare_call_of_a_gone_file)
    named = [r for r in candidates if not rule_bare_call_of_a_gone_file(r, exc_event, trace, pid)]
    if (fatal := rule_python_exception(named, exc, trace)) is not None:
        fatal = rule_alternate_name_a_package_ships(fatal, candidates, trace)
        verdict = Verdict("fatal", "python_exception", exit_code=code, exception=exc)
    elif (fatal := rule_died_in_load(candidates)) is not None:
        verdict = Verdict("fatal", "died_in_load", exit_code=code, exception=exc)
    elif rule_exception_not_a_load(candidates, exc):
        for r in candidates:
            out[key(r)] = Verdict("went_on", "exception_not_a_load", exit_code=code, exception=exc)
        return out
    elif (fatal := rule_crash(candidates, code)) is not None:
        verdict = Verdict("fatal", "crash", exit_code=code, exception=exc)
    elif (fatal := rule_nonzero_exit(candidates, code)) is not None:
        verdict = Verdict("fatal", "nonzero_exit", exit_code=code, exception=exc)
    if fatal is None or verdict is None:
        for r in candidates:
            out[key(r)] = Verdict("unknown", "no_exit", exception=exc)
        return out
    same = attempts_of(fatal, candidates)
    for r in candidates:
        out[key(r)] = verdict if any(r is a for a in same) else Verdict(
            "went_on", "another_was_fatal", exit_code=code, exception=exc, related=ref(fatal))
    return out


class _Picked(MadeSequence[Replayed]):
    """Some of a sequence of replays, by their places in it (one process's, in judge)."""

    def __init__(self, base: Sequence[Replayed], places: list[int]):
        self.base, self.places = base, places

    def __len__(self) -> int:
        return len(self.places)

    def _get(self, i: int) -> Replayed:
        return self.base[self.places[i]]

    def __iter__(self) -> Iterator[Replayed]:
        return (self.base[j] for j in self.places)


def judge(trace: Trace, replays: Sequence[Replayed]) -> dict[Key, Verdict]:
    """The verdict of every failed load (and of every load the model alone fails) of every process."""
    out: dict[Key, Verdict] = {}
    by_pid: dict[int, list[int]] = {}
    pids = replays.pids() if isinstance(replays, Replays) else [r.load.pid for r in replays]
    for i, pid in enumerate(pids):
        by_pid.setdefault(pid, []).append(i)
    for pid, places in by_pid.items():
        out.update(judge_process(trace, pid, replays if len(by_pid) == 1 else _Picked(replays, places)))
    return out


# --- words ----------------------------------------------------------------------------------------------
def _short_message(exc: PyException, limit: int = 160) -> str:
    msg = " ".join(exc.message.split())
    msg = msg if len(msg) <= limit else msg[:limit - 1] + "…"
    return f"{exc.type}: {msg}" if msg else exc.type


def reason_text(v: Verdict) -> str:
    """The verdict in words (the text and Markdown reports)."""
    rel = winpath.basename(v.related.name) if v.related else "?"
    return {
        "could_not_start": "the program could not start",
        "real_load_succeeded": "the real loader loaded it; only the model says it fails (please report this)",
        "exit_zero": "the program exited with 0",
        "retried_ok": f"then loaded by {v.related.api if v.related else '?'}({rel})",
        "died_in_load": "the process ended inside this load" + (
            f" (exit code {exit_text(v.exit_code)})" if v.exit_code is not None else ""),
        "python_exception": f"the program ended on {_short_message(v.exception) if v.exception else 'an exception'}",
        "exception_not_a_load": (f"the program ended on {_short_message(v.exception) if v.exception else '?'}, "
                                 + ("a missing Python module, " if v.exception and v.exception.type == "ModuleNotFoundError"
                                    else "") + "not this load"),
        "crash": (f"the program crashed ({exit_text(v.exit_code)}), and this is the last failed load "
                  "before the end"),
        "nonzero_exit": (f"the program exited with {exit_text(v.exit_code)}, and this is the last failed load "
                         "it did not load afterwards"),
        "another_was_fatal": f"the program went past it; {rel} was the failure",
        "no_exit": "the trace does not say how this process ended (no exit code, no Python exception)",
        "cut_by_cap": ("the trace reached its size cap (--max-size) while this load ran, and lines of it were "
                       "dropped: whether it failed is not known"),
    }[v.reason]


def verdict_dict(v: Verdict) -> dict:
    """The verdict in the JSON report (docs/json-output.md)."""
    exc = None
    if v.exception is not None:
        one = lambda e: {"type": e.type, "message": e.message, "module": e.module, "path": e.path,
                         "winerror": e.winerror}
        exc = {**one(v.exception), "causes": [one(c) for c in v.exception.causes]}
    return {"fate": v.fate, "reason": v.reason, "exit_code": v.exit_code, "exception": exc,
            "related": None if v.related is None else {"pid": v.related.pid, "seq": v.related.seq,
                                                       "api": v.related.api, "name": v.related.name}}
