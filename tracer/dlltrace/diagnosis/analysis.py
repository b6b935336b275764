"""A trace's analysis: every traced process replayed through the loader model (diagnosis/replay.py), the
failed loads grouped with their retries into incidents, each with its verdict (verdict.py: the
failure the program hit, or a load it went past), and where the replay's API sets came from."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence, Union, cast

from dlltrace import packages, winpath
from dlltrace.diagnosis.outcome import (ProcessOutcome, program_words, python_error, rule_exception_is_find_library,
                                       rule_load_class, rule_program_said, rule_unfound_dll_with_a_fix, same_path,
                                       where_listed)
from dlltrace.diagnosis.result import (Copy, Diagnosis, FailedLoad, Gone, NextFailure, ProcessEnd, Tried, code_place,
                                       gone_of, listed_gone_of, process_outcome, Unfound, Unstarted, unstarted_of)
from dlltrace.diagnosis.ending import EXCEPTION_WINE_STUB, ending
from dlltrace.diagnosis.verdict import Verdict, judge, key, same_module
from dlltrace.diagnosis.wholerun import check_whole_run
from dlltrace.classify import classify
from dlltrace.diagnosis.explain import not_installed_fix, owner_reinstall, reinstalling_python
from dlltrace.model import ERROR_PROC_NOT_FOUND, ERROR_TEXT, CallResult, Fix, Owner
from dlltrace.worlds.world import owners_of
from dlltrace.trace.reader import Progress, Trace, paused_gc
from dlltrace.diagnosis.replay import (REPLAY_KINDS, Replayed, Replays, api_set_schema, can_replay_start, recorded_world,
                                   replay, replay_start, stubs_bound, system_and_process, wine_only_imports)


@dataclass
class Incident:
    """One failed (or, with --all, any) top-level load, and torch-style retries of the same file;
    `verdict`: whether it is the failure the program hit (None for a load that succeeded)."""

    attempts: list[Replayed]
    verdict: Optional[Verdict] = None

    @property
    def first(self) -> Replayed:
        return self.attempts[0]

    @property
    def real_failure(self) -> bool:
        """The failure the program hit, or one whose outcome the trace does not tell (counted)."""
        return self.verdict is not None and self.verdict.real_failure

    @property
    def went_on(self) -> bool:
        """Probed, absent, the program went on (listed apart, no fix, not counted)."""
        return self.verdict is not None and self.verdict.fate == "went_on"


def incidents(replays: Sequence[Replayed], everything: bool = False,
              verdicts: Optional[dict[tuple[int, int], Verdict]] = None) -> list[Incident]:
    """The failed loads (every load with `everything`) grouped with their retries; `verdicts`
    (verdict.judge) decides each one's fate: attempts of different fates are never grouped."""
    verdicts = verdicts or {}
    out: list[Incident] = []
    # (the loads Replays keeps as a few fields succeeded, really and in the model: never an incident
    # but with `everything`, and never between two attempts of one: they are not looked at)
    for r in (replays.full() if isinstance(replays, Replays) and not everything else replays):
        if not everything and not r.failed and not r.result.error:
            continue
        v = verdicts.get(key(r))
        prev = out[-1].attempts[-1] if out else None
        if (prev is not None and prev.failed and r.failed and r.load.pid == prev.load.pid
                and same_module(r.load.name, prev.load.name)
                and (out[-1].verdict.fate if out[-1].verdict else None) == (v.fate if v else None)):
            out[-1].attempts.append(r)
            out[-1].verdict = v
        else:
            out.append(Incident([r], v))
    return out


def analyse(trace: Trace, everything: bool = True, progress: Optional[Progress] = None) -> Sequence[Replayed]:
    """Every traced process replayed, in order. Without `everything`, a load that succeeded (really and
    in the model) is kept as a few fields only (replay.Replays: what the verdicts and the counts read),
    which keeps a big trace's report small; `everything` (--all) keeps every load in full.
    `progress` is called now and then with (events replayed, events to replay)."""
    with paused_gc():
        out = cast(Union[list[Replayed], Replays], replay(trace, light=not everything, progress=progress))
        for pid in trace.start_failures():
            if can_replay_start(trace, pid):  # the launcher wrote its env event
                out.append(replay_start(trace, pid, recorded_world(trace, pid)))
    if progress is not None:
        total = trace.count_of(REPLAY_KINDS)
        progress(total, total)  # (done: the start failures too)
    return out


def judged_incidents(trace: Trace, everything: bool = False,
                     progress: Optional[Progress] = None) -> tuple[Sequence[Replayed], list[Incident]]:
    """The trace replayed (analyse) and its incidents, each with its verdict (verdict.judge)."""
    replays = analyse(trace, everything, progress)
    incs = incidents(replays, everything, judge(trace, replays))
    for inc in incs:  # (the failure's fixes checked over the whole run: none may break a load that loaded)
        if inc.verdict is not None and inc.verdict.fate == "fatal" and inc.attempts[-1].result.fixes:
            last = inc.attempts[-1]
            check_whole_run(trace, last.load.pid, tuple(a.load.seq for a in inc.attempts), last.result)
    return replays, incs

def api_set_source(trace: Trace) -> str:
    """Where the replay's API sets came from (apisets.SOURCE_TEXT keys): "trace" when every traced
    process recorded its schema, else "builtin"."""
    pids = trace.pids or [e["pid"] for e in trace.of("env")]
    return "trace" if pids and all(api_set_schema(trace, p).source == "trace" for p in pids) else "builtin"


# --- one Diagnosis per process (diagnosis/result.py) ---------------------------------------------------------
def _tried(res: CallResult) -> tuple[Tried, ...]:
    chain = res.tree.failure_chain() if res.tree is not None else []
    leaf = chain[-1] if chain and chain[-1].cause else None
    return tuple(Tried(c.path, c.rule, c.result) for c in (leaf.candidates if leaf else []))


def call_failed_load(res: CallResult) -> FailedLoad:
    """A failed call's facts as a FailedLoad: its leaf, chain, files tried, copies elsewhere, what fails next and
    fixes. As it stands, a scenario's call (`dlltrace simulate`): the failure simulated; failed_load adds a
    trace's (the real load, its verdict, its attempts, the user's code)."""
    return FailedLoad(
        seq=res.index, api=res.op, name=res.name, error=res.error, message=ERROR_TEXT.get(res.error, ""),
        fate="fatal", reason=None, origin=res.origin, leaf=res.leaf.name if res.leaf else None,
        cause=res.leaf.cause if res.leaf else None, needed_by=res.leaf.parent if res.leaf else None,
        chain=tuple(res.chain), tried=_tried(res),
        elsewhere=tuple(Copy(e.path, e.relation, e.machine, e.version, e.path_entry, e.owner) for e in res.found_elsewhere),
        next_failures=tuple(NextFailure(a.name, a.cause, a.needed_by) for a in res.also_missing),
        fixes=tuple(res.fixes), model_agrees=True, klass="fatal",
        symbol=res.leaf.facts.export if res.leaf and res.leaf.cause == "missing_export" else None)


def failed_load(inc: Incident, trace: Optional[Trace] = None) -> FailedLoad:
    """An incident (a failed load and its retries) as a FailedLoad: its last attempt's facts (`trace`: where its
    Python context, and so the place in the user's code, is)."""
    r = inc.attempts[-1]
    ctx = trace.context(inc.first.load) if trace is not None else None
    res = r.result
    v = inc.verdict
    fate = v.fate if v else "unknown"
    name = r.load.name or res.name
    error = r.real_error or res.error or 0
    return dataclasses.replace(
        call_failed_load(res), seq=r.load.seq, api=r.load.api, name=name, error=error,
        message=ERROR_TEXT.get(error, ""), fate=fate, reason=v.reason if v else None, origin=res.origin or r.origin,
        klass=rule_load_class(fate, v.reason if v else None, name, res.leaf.name if res.leaf else None),
        model_agrees=not any(a.differences for a in inc.attempts), attempts=len(inc.attempts),
        user_code=code_place(ctx.get("frame")) if ctx else None,
        said=rule_program_said(program_words(trace, r.load.pid), name, res.leaf.name if res.leaf else None)
        if trace is not None else ())


def scenario_diagnosis(results: Sequence[CallResult], program: str = "") -> Diagnosis:
    """A scenario's calls (`dlltrace simulate`) as the Diagnosis of its one process: every failed load is the
    failure simulated; the process did not end (`unknown`)."""
    failures = tuple(call_failed_load(r) for r in results if r.error and r.tree is not None)
    end = ProcessEnd("unknown")
    return Diagnosis("windows", 0, program, end, process_outcome(end.kind, None, failures, None), failures)


def process_end(trace: Trace, pid: int) -> ProcessEnd:
    """How process pid ended: the run's ending for the program `dlltrace run` started; for the others, their
    own exit event when the trace has one."""
    e = ending(trace)
    if e.pid == pid or (e.pid is None and trace.pids[:1] == [pid]):
        return ProcessEnd(e.kind, e.code, e.signal)
    own = next((x for x in trace.of("exit", pid=pid) if isinstance(x.get("code"), int)), None)
    return ProcessEnd("exited", own["code"]) if own is not None else ProcessEnd("unknown")


@dataclass(frozen=True)
class StubBinding:
    """Under Wine: an import a module needs and its DLL lacks, which Wine bound to a stub (a load that succeeded,
    where Windows fails it with 127). `called`: the program called it, and so ended with EXCEPTION_WINE_STUB."""
    load: Replayed  # the top-level load that bound it
    importer: str  # the module whose import it is
    dll: str  # the module that lacks it
    function: str
    called: bool = True


def rule_stub_dll_shadows_a_package_copy(b: StubBinding, trace: Trace) -> Optional[tuple[str, Owner]]:
    """The copy of the stub-bound DLL an installed distribution ships (its RECORD lists a file of that name at another
    path: gmpy2 2.2.1's gmpy2.libs\\libgmp-10.dll), when the copy bound is no distribution's (a stray libgmp-10.dll in
    the Python's folder, the application folder, searched before the package's add_dll_directory folder): the
    copy the importer was built against, and the one to be found; (its path, its owner), else None."""
    owners = trace.owners(b.load.load.pid).get(winpath.basename(b.dll).lower(), ())
    if any(same_path(where_listed(o), b.dll) for o in owners):
        return None  # (the copy bound is a distribution's own: its version is the question, not its place)
    own = [o for o in owners if winpath.is_absolute(where_listed(o))]
    return (where_listed(own[0]), own[0]) if len(own) == 1 else None


def rule_stub_dll_was_already_loaded(b: StubBinding) -> str:
    """How the stub-bound copy was bound, when no search found it: it was already loaded before this load (the first
    node of the load's tree that binds it is the loaded module), and a module already loaded is used whatever folders
    the search would try (h5py's _errors.pyd bound a stray hdf5.dll the program had loaded with ctypes from a folder no
    search looks in: moving that file out of a searched folder is no fix). What loaded it ("loaded by
    ctypes.CDLL(...)"), else "" (the search found it)."""
    tree = b.load.result.tree
    first = next((n for n in (tree.walk() if tree is not None else ()) if n.path and winpath.same(n.path, b.dll)), None)
    if first is None or first.how_kind not in ("already_loaded", "loaded_same_file"):
        return ""
    return first.loaded_by or "loaded earlier"


def rule_wine_stub(trace: Trace, pid: int, replays: Sequence[Replayed]) -> Optional[StubBinding]:
    """A process that ended with EXCEPTION_WINE_STUB (0x80000100: "Call ... to unimplemented function
    b.dll.b_fn, aborting"): the model's Wine profile binds an import the DLL lacks to a stub as Wine does
    (rules.rule_missing_import_is_error), so its replay finds each such binding: the last one before the end is
    what the program died of; on Windows that load itself fails with 127. `replays`: the trace's, as the report
    holds them (a load that bound a stub is kept in full, as every failed one: the process is not replayed again,
    which doubled the time of a big trace's report)."""
    if trace.exit_code(pid) != EXCEPTION_WINE_STUB:
        return None
    found: Optional[StubBinding] = None
    for r in replays:
        if r.load.pid != pid:
            continue
        for importer, dll, fn in stubs_bound(r.result):
            found = StubBinding(r, importer, dll, fn)
    return found


def wine_stub_bindings(trace: Trace, replays: Sequence[Replayed], pid: Optional[int] = None) -> list[StubBinding]:
    """Every import a load that succeeded under Wine bound to a stub (of process `pid`, or every process), each
    once, in order: on Windows each of those loads fails with 127 (ERROR_PROC_NOT_FOUND), though the program ran
    on (Wine's loader hid it: the program never called it). The one the program called and died of
    (rule_wine_stub, given these replays) is marked called: of a binding several processes made (a worker's), the
    one of a process that died of it. The replays keep such loads in full (replay.stubs_bound)."""
    full = [r for r in (replays.full() if isinstance(replays, Replays) else replays)
            if (pid is None or r.load.pid == pid) and r.load.api != "start"]
    died_of = {p: (winpath.key(b.importer), winpath.key(b.dll), b.function)
               for p in dict.fromkeys(r.load.pid for r in full) if (b := rule_wine_stub(trace, p, full)) is not None}
    at: dict[tuple[str, str, str], int] = {}  # binding -> its place in out
    out: list[StubBinding] = []
    for r in full:
        if not r.load.ok or r.result.error:
            continue
        for importer, dll, fn in stubs_bound(r.result):
            k = (winpath.key(importer), winpath.key(dll), fn)
            called = died_of.get(r.load.pid) == k
            if r.cut and not called:  # (the size cap cut it short: what it bound is not known, rule_cut_by_cap)
                continue
            if k not in at:
                at[k] = len(out)
                out.append(StubBinding(r, importer, dll, fn, called))
            elif called and not out[at[k]].called:  # (another process went past it; this one died of it)
                out[at[k]] = StubBinding(r, importer, dll, fn, called)
    return out


@dataclass(frozen=True)
class WineOnly:
    """Under Wine: a module an import was bound to that came from Wine's own Windows folder, whose name no vanilla
    Windows System32 has (replay.wine_only_imports): on Windows the import must find it elsewhere."""
    load: Replayed  # the top-level load that mapped it
    importer: str  # the module whose import it is
    path: str  # Wine's copy
    klass: str  # classify's kind: vcruntime (the VC++ Redistributable's), nvidia_driver, other (no Windows has it)
    reinstall: Optional[Fix] = None  # a distribution's RECORD lists a file of its name that is not there: reinstall it


def wine_only_dlls(trace: Trace, replays: Sequence[Replayed], pid: Optional[int] = None) -> list[WineOnly]:
    """Every module a load that succeeded under Wine mapped from Wine's own DLLs for an import no vanilla Windows
    satisfies (of process `pid`, or every process), each name once, in order; with the reinstall of the distribution
    whose RECORD lists a file of that name that is gone (explain.owner_reinstall: pygame's zlib1.dll deleted, Wine's
    zlib1.dll loaded instead, and the program worked; on Windows it fails). The replays keep such loads in full."""
    seen: set[str] = set()
    out: list[WineOnly] = []
    windows: dict[int, Optional[str]] = {}  # pid -> its Windows folder, None for a process not under Wine
    for r in (replays.full() if isinstance(replays, Replays) else replays):
        if (pid is not None and r.load.pid != pid) or not r.load.ok or r.result.error:
            continue
        if r.load.pid not in windows:
            system, _ = system_and_process(trace, r.load.pid)
            windows[r.load.pid] = system.windows if system.profile == "wine" else None
        folder = windows[r.load.pid]
        if r.cut:  # (the size cap cut it short: what it bound is not known, verdict.rule_cut_by_cap)
            continue
        for importer, path in (wine_only_imports(r.result, folder) if folder is not None else []):
            name = winpath.basename(path).lower()
            if name in seen:
                continue
            seen.add(name)
            world = recorded_world(trace, r.load.pid)
            gone = [o for o in owners_of(world, name) if world.file(winpath.join(o.root, *o.path.split("/"))) is None]
            fix = None
            if gone:
                _, process = system_and_process(trace, r.load.pid)
                fix = owner_reinstall(name, world, process, r.result)
            out.append(WineOnly(r, importer, path, classify(name).kind, fix))
    return out


@dataclass(frozen=True)
class NotInstalled:
    """A module a process loaded that is not the file its distribution installed: its RECORD lists that path with
    another size (explain.rule_not_the_file_its_distribution_installed). `load`: the top-level load that mapped it."""
    load: Replayed
    path: str
    reinstall: Fix  # reinstalling the distribution (its size and RECORD's in it)


def not_installed_files(trace: Trace, replays: Sequence[Replayed], pid: Optional[int] = None) -> list[NotInstalled]:
    """Every module a process (`pid`, or every process) loaded, by a load that succeeded or a dependency of one that
    failed, whose path a distribution's RECORD lists with another size than the file has: each once, in the order the
    loader mapped them (its DLL notifications, else the loads' own paths). A program that ended on an error no failed
    load explains may have loaded the wrong build (pygame 2.6.1's base.pyd next to pygame 2.0.1's SDL2.dll: "Dynamic
    linking causes SDL downgrade!"), and one Wine let through with a stub named it too. Nothing for a trace without
    RECORD's sizes (older ones)."""
    out: list[NotInstalled] = []
    seen: set[str] = set()
    every = replays.pids() if isinstance(replays, Replays) else [r.load.pid for r in replays]
    for p in ([pid] if pid is not None else list(dict.fromkeys(every))):
        owners = trace.owners(p)
        if not any(o.size is not None for os_ in owners.values() for o in os_):
            continue  # (no RECORD sizes: an older trace, or no Python)
        mapped: list[tuple[int, str]] = []  # (the load it happened in, the file)
        for e in trace.of("dll_notify", pid=p):
            if e.get("reason") == "loaded" and isinstance(e.get("path"), str) and isinstance(e.get("load"), int):
                mapped.append((e["load"], e["path"]))
        for e in trace.of("load_end", pid=p):  # (the loads' own files, nested ones too)
            if not e.get("error") and isinstance(e.get("path"), str) and isinstance(e.get("load"), int):
                mapped.append((e["load"], e["path"]))
        # (and what the model bound in the loads kept in full: a load that failed, or bound a stub under Wine)
        for kept in (replays.full() if isinstance(replays, Replays) else replays):
            if kept.load.pid == p and kept.result.tree is not None:
                mapped += [(kept.load.seq, n.path) for n in kept.result.tree.walk() if n.path and not n.error]
        hits: list[tuple[int, str, Fix]] = []
        world = None
        process = None
        for load, path in mapped:
            k = winpath.key(path)
            if k in seen or winpath.basename(path).lower() not in owners:
                continue
            seen.add(k)
            if world is None:
                world = recorded_world(trace, p)
                process = system_and_process(trace, p)[1]
            assert process is not None
            fix = not_installed_fix(path, world, process)
            if fix is not None:
                hits.append((load, winpath.normalize(path), fix))
        if not hits:
            continue
        # (each named with the top-level load that mapped it: the replays are looked at only for those)
        tops = {r.load.seq: r for r in replays if r.load.pid == p}
        parent = {e["seq"]: e["parent"] for e in trace.of("load_begin", pid=p) if isinstance(e.get("parent"), int)}
        for load, path, fix in hits:
            top = load
            for _ in range(64):  # (up to its top-level load: nested loads name their parent)
                if top in tops or top not in parent:
                    break
                top = parent[top]
            if top in tops:
                out.append(NotInstalled(tops[top], path, fix))
    return out


def stub_failed_load(b: StubBinding, trace: Trace) -> FailedLoad:
    """A stub binding as the failed load it is on Windows: its DLL lacks the export (127); the failure when the
    program called it, else a load the program went past under Wine (fate went_on, reason wine_stub_unused)."""
    ctx = trace.context(b.load.load)
    name = b.load.load.name or b.load.result.name
    leaf, importer = winpath.basename(b.dll), winpath.basename(b.importer)
    return FailedLoad(
        seq=b.load.load.seq, api=b.load.load.api, name=name, error=ERROR_PROC_NOT_FOUND,
        message=ERROR_TEXT.get(ERROR_PROC_NOT_FOUND, ""), fate="fatal" if b.called else "went_on",
        reason="wine_stub" if b.called else "wine_stub_unused", klass="fatal" if b.called else "noise",
        origin=b.load.result.origin or b.load.origin, leaf=leaf, cause="missing_export", needed_by=importer,
        chain=tuple(dict.fromkeys(x for x in (winpath.basename(name), importer, leaf) if x)),
        tried=(), elsewhere=(), next_failures=(), fixes=(), model_agrees=True, symbol=b.function,
        user_code=code_place(ctx.get("frame")) if ctx else None)


def windows_diagnoses(trace: Trace) -> list[Diagnosis]:
    """One Diagnosis per process of a Windows (or Wine) trace, in the order the trace lists them."""
    replays, incs = judged_incidents(trace)
    pids = list(dict.fromkeys([*trace.pids, *trace.start_failures()]))
    out = []
    for pid in pids:
        proc = trace.process(pid) or trace.env(pid) or {}
        failures = tuple(failed_load(i, trace) for i in incs if i.first.load.pid == pid)
        # (loads Wine let through with a stub: 127s on Windows; the one a process died of is the failure, found in the
        # replays)
        bindings = wine_stub_bindings(trace, replays, pid)
        failures = (*failures, *(stub_failed_load(b, trace) for b in bindings if b.called),
                    *(stub_failed_load(b, trace) for b in bindings if not b.called))
        end = process_end(trace, pid)
        outcome = outcome_of(trace, pid, end, failures)
        unfound = windows_unfound(trace, pid, outcome)
        gone = windows_gone(trace, pid, outcome, any(f.fate == "fatal" for f in failures)) if unfound is None else None
        out.append(Diagnosis("windows", pid, str(proc.get("exe") or ""), end, outcome, failures, unfound, gone=gone))
    return out


def main_outcome(trace: Trace, incs: list[Incident]) -> ProcessOutcome:
    """The outcome of the program `dlltrace run` started (the run's ending's process, else the first traced),
    from the trace's judged incidents: what a report says first."""
    e = ending(trace)
    pid = e.pid if e.pid is not None else (trace.pids[0] if trace.pids else None)
    if pid is None:
        return ProcessOutcome(e.kind, e.code)
    failures = tuple(failed_load(i) for i in incs if i.first.load.pid == pid and i.verdict is not None)
    return outcome_of(trace, pid, process_end(trace, pid), failures)


def main_unstarted(trace: Trace, outcome: Optional[ProcessOutcome]) -> Optional[Unstarted]:
    """The program the run's program started that was not found, that it died of (result.unstarted_of), when its
    outcome (main_outcome) is died_of_other; None else. No package is named on Windows."""
    if outcome is None or outcome.kind != "died_of_other":
        return None
    e = ending(trace)
    pid = e.pid if e.pid is not None else (trace.pids[0] if trace.pids else None)
    return unstarted_of(trace, pid) if pid is not None else None


def main_gone(trace: Trace, outcome: Optional[ProcessOutcome], explained: bool = False) -> Optional[Gone]:
    """The file of an installed distribution, not there, that the run's program died for want of (result.gone_of),
    when its outcome (main_outcome) is died_of_other and no program it started explains it; else, when it failed
    (crashed, died_of_other, exited with a code) and no failed load explains it (`explained`: one does), the file of
    a distribution it imported that `dlltrace run` found not there (result.listed_gone_of); None else."""
    if outcome is None:
        return None
    e = ending(trace)
    pid = e.pid if e.pid is not None else (trace.pids[0] if trace.pids else None)
    if pid is None or (outcome.kind == "died_of_other" and unstarted_of(trace, pid) is not None):
        return None
    return windows_gone(trace, pid, outcome, explained)


def windows_gone(trace: Trace, pid: int, outcome: ProcessOutcome, explained: bool) -> Optional[Gone]:
    """result.gone_of for a Windows process that died of an exception (died_of_other), else result.listed_gone_of
    (`explained`: a failed load is its failure), reinstalled by the traced Python's own pip
    (explain.reinstalling_python: its launcher; none for an embeddable Python without pip)."""
    python = reinstalling_python(system_and_process(trace, pid)[1], True)
    named = gone_of(trace, pid, python) if outcome.kind == "died_of_other" else None
    return named or listed_gone_of(trace, pid, outcome, explained, python)


def main_unfound(trace: Trace, outcome: Optional[ProcessOutcome]) -> Optional[Unfound]:
    """The library the run's program asked ctypes.util.find_library for, found none of, and died of (windows_unfound),
    when its outcome (main_outcome) is died_of_other; None else."""
    if outcome is None or outcome.kind != "died_of_other":
        return None
    e = ending(trace)
    pid = e.pid if e.pid is not None else (trace.pids[0] if trace.pids else None)
    return windows_unfound(trace, pid, outcome) if pid is not None else None


def windows_unfound(trace: Trace, pid: int, outcome: ProcessOutcome) -> Optional[Unfound]:
    """The library process pid asked ctypes.util.find_library for, that it found none of, and that the exception it
    ended on is about (outcome.rule_exception_is_find_library; the call shown: rule_unfound_dll_with_a_fix), with the
    PATH folders it looked in and its fixes (find_library_fixes); None when the exception is not about one."""
    if outcome.kind != "died_of_other" or outcome.exception is None:
        return None
    finds = list(trace.of("py_find_library", pid=pid))
    e = rule_exception_is_find_library(outcome.exception.text, finds)
    if e is None:
        return None
    e = rule_unfound_dll_with_a_fix(e, finds, lambda name: bool(find_library_fixes(name, trace, pid)))
    name = str(e["name"])
    imports = e.get("imports")
    module = str(imports[-1]) if isinstance(imports, list) and imports and isinstance(imports[-1], str) else ""
    searched = tuple(x for x in e.get("searched") or [] if isinstance(x, str))
    return Unfound(name, module, code_place(e.get("frame")), find_library_fixes(name, trace, pid), searched)


def find_library_fixes(name: str, trace: Trace, pid: int) -> tuple[Fix, ...]:
    """What makes ctypes.util.find_library(name) find a file on Windows, as this machine's data says: it looks in the
    PATH folders only (NAME, then NAME.dll), so the fix is a folder that holds one put on PATH before the program
    starts: a copy this environment's distributions installed (the py_dists event: Trace.owners), else the pip
    package that ships it (data/packages.json, kind pip), installed first, into the environment's site-packages (the
    py_dists' site, else py_env's sys.path). Installing it alone is not the fix: pip puts it in the package's own
    folder, which find_library does not look in. () when neither is known."""
    files = [name] if name.lower().endswith(".dll") else [name, name + ".dll"]
    if any("\\" in f or "/" in f for f in files):
        return ()
    owners = trace.owners(pid)
    for f in files:
        for o in owners.get(f.lower(), ()):
            if o.kind == "wheel" and o.root:
                path = winpath.join(o.root, o.path.replace("/", "\\"))
                folder = winpath.dirname(path)
                return (Fix("env", "set_env", name=winpath.basename(path), variable="PATH", folder=folder, path=path,
                            python=False),)
    env = next(trace.of("py_env", pid=pid), None) or {}
    for f in files:
        prov = packages.lookup(f)
        if prov is None or prov.kind != "pip" or not prov.package:
            continue
        root = _python_site(trace, pid) if prov.root == "site-packages" else str(env.get("prefix") or "")
        if not root:
            continue
        folder = winpath.join(root, prov.win_folder) if prov.folder else root
        path = winpath.join(folder, f)
        replaced = rule_package_that_replaces_the_module(prov, trace, pid)
        if replaced:  # (its own module loads the DLL from its folder: nothing to put on PATH)
            return (Fix("install", "install_package", name=f, package=prov.requirement or prov.package, folder=folder,
                        path=path, exe=str(env.get("executable") or ""), replaces=replaced),)
        step = Fix("env", "set_env", name=f, variable="PATH", folder=folder, path=path, python=False)
        return (Fix("install", "install_package", name=f, package=prov.requirement or prov.package, folder=folder,
                    path=path, exe=str(env.get("executable") or ""), then=(step,)),)
    return ()


def rule_package_that_replaces_the_module(prov: packages.Provider, trace: Trace, pid: int) -> str:
    """The installed distribution (as the data names it) that the pip package shipping the DLL replaces
    (data/packages.json `replaces`: both install the same module, and the package's own loads the DLL from its
    folder), else "". python-magic 0.4.27 looks for libmagic with find_library and finds none on Windows;
    python-magic-bin's module magic loads its own magic\\libmagic\\libmagic.dll with its magic.mgc: installing it
    in python-magic's place is the fix, where its DLL put on PATH for python-magic is not (seen under Wine: python-magic
    then loads it and raises MagicException, no magic database)."""
    if not prov.replaces:
        return ""
    for e in trace.of("py_dists", pid=pid):
        for d in e.get("dists") or []:
            if isinstance(d, dict) and isinstance(d.get("name"), str) and \
                    packages.normalize_dist(d["name"]) == packages.normalize_dist(prov.replaces):
                return prov.replaces
    return ""


def _python_site(trace: Trace, pid: int) -> str:
    """The traced Python's site-packages folder: its py_dists' first site, else the first of its sys.path (py_env)
    named site-packages; "" when neither says."""
    for e in trace.of("py_dists", pid=pid):
        for d in e.get("dists") or []:
            if isinstance(d, dict) and isinstance(d.get("site"), str) and d["site"]:
                return str(d["site"])
        break
    env = next(trace.of("py_env", pid=pid), None) or {}
    return next((p for p in env.get("sys_path") or [] if isinstance(p, str)
                 and winpath.basename(p.rstrip("\\/")).lower() == "site-packages"), "")


def outcome_of(trace: Trace, pid: int, end: ProcessEnd, failures: tuple[FailedLoad, ...]) -> ProcessOutcome:
    """The process's outcome (result.process_outcome) from how it ended, its failed loads and its exception."""
    return process_outcome(end.kind, end.code, failures, python_error(trace, pid))
