"""The report as terminal text (`dlltrace report TRACE`, and the end of `dlltrace run`): each incident is
an explained call (render/explained.py, whose words `dlltrace simulate` shares) with the trace's context
around it (the fate line, the retries, the model's agreement with the real loader, the environment),
worded here for the text and Markdown forms alike."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from dlltrace import winpath
from dlltrace.version import __version__
from dlltrace.apisets import SOURCE_TEXT
from dlltrace.diagnosis.analysis import (Incident, NotInstalled, StubBinding, WineOnly, api_set_source, main_gone,
                                         rule_stub_dll_shadows_a_package_copy, rule_stub_dll_was_already_loaded, main_outcome, main_unfound, main_unstarted, not_installed_files, wine_only_dlls,
                                         wine_stub_bindings)
from dlltrace.diagnosis.outcome import feature_of, program_words, rule_program_said
from dlltrace.render.outcome import (all_loaded_words, code_line, died_without_a_gpu_words, exited_unexplained_words,
                                     gone_lines, outcome_headline, said_line, unfound_lines, unstarted_lines, untraced_line)
from dlltrace.render.fixwords import fix_lines, numbered_fix
from dlltrace.trace.capped import capped, capped_line
from dlltrace.render.explained import (Block, ExplainedCall, Looked, Styled, block_lines, call_text, leaf_of, sections,
                                       verdict_style, verdict_text)
from dlltrace.diagnosis.ending import Ending, code_text, ending, ending_line, headline
from dlltrace.diagnosis.verdict import Verdict, is_crash, reason_text
from dlltrace.trace.reader import STARTUP_STATUS_TEXT, Trace, python_kind
from dlltrace.diagnosis.replay import Replayed, can_replay_start



def explained_incident(inc: Incident) -> ExplainedCall:
    """An incident as an explained call: the first attempt's result and the real loader's error, with
    where the loader looked on every attempt."""
    r = inc.first
    res = r.result
    looked: list[Looked] = []
    for k, a in enumerate(inc.attempts):
        al = leaf_of(a.result.tree)
        if al is None or not al.candidates:
            continue
        which = "" if len(inc.attempts) == 1 else ("first attempt" if k == 0 else f"attempt {k + 1}")
        looked.append(Looked(al.name, a.load.flags or 0, tuple(al.candidates), a.not_searched, which))
    return ExplainedCall(res, r.load.api, r.load.name or "?", r.load.flags or 0, r.origin or res.origin, r.real_error,
                         r.failed,
                         start_status=r.load.status if r.load.api == "start" else None,
                         chain=res.tree.failure_chain() if res.tree else [], looked=looked,
                         # fixes for a failure the program hit, and for a load that cost it a feature (its GPU)
                         show_fixes=not inc.went_on or lost_a_feature(inc))


def verdict_line(r: Replayed) -> str:
    """The verdict of a replayed load (explained.verdict_text: the same words as simulate's)."""
    return verdict_text(ExplainedCall(r.result, r.result.op, r.load.name or "?", error=r.real_error, failed=r.failed))


FATE_WORDS = {"fatal": "The failure the program hit", "unknown": "Whether the program went on is not known",
              "went_on": "Probed, absent, the program went on"}


def fate_line(v: Optional[Verdict]) -> str:
    """"The failure the program hit: the program exited with 126, and this is …" ("" for a success)."""
    return "" if v is None else f"{FATE_WORDS[v.fate]}: {reason_text(v)}"


def incident_blocks(inc: Incident, trace: Trace) -> list[Block]:
    """One incident: its verdict, where and whether the program went on, the call (and its origin), the
    sections every explained call has (explained.sections), the retries, and the model's agreement."""
    r = inc.first
    e = explained_incident(inc)
    out: list[Block] = [Styled(verdict_text(e), verdict_style(e))]
    if len(trace.pids) > 1:
        out.append(Styled(f"  in {process_label(trace, r.load.pid)}", ""))
    if inc.verdict is not None and inc.went_on and lost_a_feature(inc):
        feature = feature_of(res_leaf(r)) or feature_of(r.load.name)
        out.append(Styled(f"  The program went on without {feature}: {reason_text(inc.verdict)}", "failure"))
    elif inc.verdict is not None:
        out.append(Styled(f"  {fate_line(inc.verdict)}", "went_on" if inc.verdict.fate == "went_on" else ""))
    out += [Styled("", ""), Styled(f"  {call_text(e)}", "")]
    ctx = trace.context(r.load)
    where = code_line(ctx.get("frame")) if ctx else None
    if where:
        out.append(Styled(where, ""))
    last = inc.attempts[-1]
    for w in rule_program_said(program_words(trace, r.load.pid), last.load.name or last.result.name, res_leaf(last)):
        out.append(Styled(said_line(w), ""))
    body = sections(e)
    lead = 1 if e.chain and (e.failed or e.leaf) else 0  # the module chain comes first, then the retries
    out += body[:lead]
    for a in inc.attempts[1:]:
        same = " (same leaf)" if a.result.leaf and res_leaf(r) and a.result.leaf.name == res_leaf(r) else (
            f" (leaf {a.result.leaf.name})" if a.result.leaf else "")
        added = [p for p in a.path if not any(winpath.same(p, q) for q in r.path)]
        why = ""
        if added:
            why = " after putting its folders on PATH" if list(a.path[:len(added)]) == added else " after changing PATH"
        who = "torch" if (a.result if a.result.origin else r.result).origin_package == "torch" else "the program"
        out.append(Styled(f"  then {who} retried with {a.load.api}{why}  → {a.real_error}{same}", ""))
    out += body[lead:]
    out.append(Styled("", ""))
    out.extend(agreement_lines(inc))
    return out


def res_leaf(r: Replayed) -> str:
    return r.result.leaf.name if r.result.leaf else ""


def incident_lines(inc: Incident, trace: Trace) -> list[str]:
    return block_lines(incident_blocks(inc, trace))


def process_label(trace: Trace, pid: int) -> str:
    """"process 1604 (loadhost.exe, started by 1600)": which of a trace's processes."""
    proc = trace.process(pid) or {}
    exe = winpath.basename(proc.get("exe") or "") or "?"
    parent = proc.get("ppid")
    by = f", started by {parent}" if parent in trace.pids else ""
    return f"process {pid} ({exe}{by})"


def attempt_name(inc: Incident, k: int) -> str:
    if len(inc.attempts) == 1:
        return "this load"
    return "the first attempt" if k == 0 else f"attempt {k + 1}"


def agreement(inc: Incident, k: int) -> str:
    """Whether the model agreed with the real loader on one attempt of the incident: only that
    load's own probes (its resolution tree) count, never another load's."""
    a = inc.attempts[k]
    which = attempt_name(inc, k)
    n = len(a.differences)
    if a.cut:
        return (f"The trace reached its size cap while {which} ran, and lines of it were dropped: its probes are "
                "not compared with the model.")
    if a.load.api == "start" and not n:
        return ("The loader's own probes were not seen (the process ended before dlltrace's shim could start); "
                "the model gives the same error.")
    if n:
        return (f"The model and the real loader disagree on {which} ({n} difference{'s' if n != 1 else ''}): "
                "please report this with the trace attached.")
    if not a.real_probes:
        return (f"The trace holds no probe the loader made for {which}, so the model could not be checked "
                "against it.")
    probes = len(a.real_probes)
    if probes == 1:
        return f"The model agreed with the one probe the loader made for {which}."
    return f"The model agreed with all {probes} probes the loader made for {which}."


def agreement_lines(inc: Incident, indent: str = "  ") -> list[str]:
    """One line per attempt, each difference named under it (path, what the trace saw, what the model
    predicted)."""
    out: list[str] = []
    for k, a in enumerate(inc.attempts):
        out.append(Styled(indent + agreement(inc, k), "disagreement" if a.differences else ""))
        out.extend(f"{indent}  - {d.text}" for d in a.differences)
    return out


NOT_FOUND_ERRORS = (2, 3, 126)  # a load's "not there" (ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND, ERROR_MOD_NOT_FOUND)


def went_on_words(apart: "Sequence[Incident]") -> str:
    """"probed, absent" when every load the program went past found no file (a probe), else "failed": a 32-bit copy
    (193) or a DllMain that failed (1114) was there, and its load failed all the same."""
    return "probed, absent" if all(i.first.real_error in NOT_FOUND_ERRORS for i in apart) else "failed"


def apart_line(inc: Incident, trace: Trace) -> str:
    """One line of the "probed, absent (or failed), the program went on" list."""
    r = inc.first
    err = r.real_error if r.real_error is not None else "?"
    tries = "" if len(inc.attempts) == 1 else f" ({len(inc.attempts)} attempts)"
    who = f" · in {process_label(trace, r.load.pid)}" if len(trace.pids) > 1 else ""
    return (f"  {winpath.basename(r.load.name or '?'):<28} {r.load.api}({r.load.name}, {(r.load.flags or 0):#x})"
            f"  → {err}{tries} · {reason_text(inc.verdict) if inc.verdict else ''}{who}")


def unexplained_exits(trace: Trace, incs: list[Incident]) -> list[str]:
    """A program that ended badly with no failed load to blame: said, so that "0 failed loads" is
    not read as "all is well" (the exit code named: ending.code_text)."""
    blamed = {i.first.load.pid for i in incs if i.real_failure}
    out = []
    for pid in trace.pids:
        code = trace.exit_code(pid)
        if code not in (None, 0) and pid not in blamed:
            how = "crashed:" if is_crash(code) else "exited with"
            out.append(f"{process_label(trace, pid) if len(trace.pids) > 1 else 'The program'} {how} "
                       f"{code_text(code)}; no failed load explains it.")
    return out


def ending_lines(trace: Trace, incs: list[Incident], end: Ending, explained: bool = False) -> list[str]:
    """How the program ended, when it did not simply exit (a crash, a kill, Ctrl-C, never ran: ending.py),
    else the exits no failed load explains (`explained`: one is, that is not an incident: a Wine stub)."""
    if end.abnormal:
        return [ending_line(end, explained=explained or any(i.real_failure for i in incs))]
    return unexplained_exits(trace, incs)


def unexplained_starts(trace: Trace) -> list[str]:
    """Verdicts for processes that could not start and whose environment was not recorded (the
    launcher writes it; without it there is nothing to replay)."""
    out: list[str] = []
    for pid in trace.start_failures():
        if not can_replay_start(trace, pid):
            code = trace.start_status(pid)
            if code is None:  # (start_failures: only processes that have one)
                continue
            out.append(Styled(f"✗ process {pid} could not start: {code:#x} {STARTUP_STATUS_TEXT[code]} (one of the program's "
                       "static imports failed); its environment was not recorded, so the report cannot say which", "failure"))
    return out


MAX_EXPLAINED = 25  # failures explained in full in the text report (the rest get a line each; --all: all)


def text_report(trace: Trace, incs: list[Incident], replays: Sequence[Replayed], everything: bool = False,
                saved: bool = False) -> str:
    """The terminal report; `saved`: at the end of `dlltrace run`, whose trace was just saved."""
    return "\n".join(text_report_lines(trace, incs, replays, everything, saved))


def text_report_lines(trace: Trace, incs: list[Incident], replays: Sequence[Replayed], everything: bool = False,
                      saved: bool = False) -> list[str]:
    """text_report's lines, each Styled where the terminal shows it in a style (explained.style_of)."""
    return block_lines(text_report_blocks(trace, incs, replays, everything, saved))


def text_report_blocks(trace: Trace, incs: list[Incident], replays: Sequence[Replayed], everything: bool = False,
                       saved: bool = False) -> list[Block]:
    """The terminal report as blocks: lines with their styles, and the tables and trees of each call."""
    failed = [i for i in incs if i.real_failure]
    apart = [i for i in incs if i.went_on]
    starts = unexplained_starts(trace)
    bindings = wine_stub_bindings(trace, replays)  # (under Wine: imports bound to a stub, each a 127 on Windows)
    stubs = [b for b in bindings if b.called]  # (the one a process died of)
    unused = [b for b in bindings if not b.called]  # (hidden by Wine: the program never called them)
    wine_own = wine_only_dlls(trace, replays)  # (Wine's own DLLs an import was bound to: none on a vanilla Windows)
    lacking = [w for w in wine_own if w.klass == "other"]
    n = len(failed) + len(starts) + len(stubs)
    where = f"trace saved to {trace.path}" if saved else trace.path
    went_on = f" · {len(apart)} {went_on_words(apart)}, the program went on" if apart else ""
    end = ending(trace)
    how = f" · {headline(end)}" if end.abnormal else ""
    # (it died of nvcuda.dll's load on a machine with no NVIDIA GPU: said after the count, as on Linux)
    gpu = died_without_a_gpu_words(main_outcome(trace, incs)) if no_gpu_failure(failed) else ""
    head = f"dlltrace ─ {n} failed load{'s' if n != 1 else ''}{gpu}{went_on}{how} · {where}"
    # the answer first when it is not "N failed loads" (diagnosis/outcome.py): it ran without its GPU (the
    # loads that cost it a feature are explained in full), or it died of a Python error that is not a load
    outcome = main_outcome(trace, incs) if not failed and not starts else None
    unfound = main_unfound(trace, outcome)  # (it died of a library ctypes.util.find_library did not find)
    # (or of a program it started that was not found)
    unstarted = main_unstarted(trace, outcome) if unfound is None else None
    # (or for want of a file of an installed distribution: one the exception names, or one dlltrace run found gone)
    gone = main_gone(trace, outcome) if unfound is None and unstarted is None else None
    said = outcome_headline(outcome, unfound, unstarted, gone) if outcome is not None else None
    # (it exited with a code no failed load explains: that is the headline, as on Linux, not "0 failed loads")
    exited = exited_unexplained_words(outcome) if said is None and outcome is not None and not stubs else None
    said = exited if exited is not None else said
    how = "" if said is not None and outcome is not None and outcome.kind == "crashed" else how  # (said in `said`)
    lost: list[Incident] = []
    # (modules loaded that are not the files their distributions installed, no failure's own fix names: the news
    # when nothing else explains the end)
    strays = shown_not_installed(not_installed_files(trace, replays), incs)
    if outcome is not None and said is not None:
        head = f"dlltrace ─ {said}{not_installed_news(strays)}{how} · {where}"
        if outcome.kind == "degraded":
            lost = [i for i in apart if lost_a_feature(i)]
            apart = [i for i in apart if not lost_a_feature(i)]
    cap = capped(trace)
    untraced = untraced_line(trace, end)  # (the process it started ran untraced: one line, never "every load succeeded")
    if untraced is not None:
        one: list[Block] = [Styled(f"dlltrace ─ {untraced} · {where}", "failure")]
        return one + (["", Styled(capped_line(cap), "failure")] if cap is not None else [])
    quiet = not failed and not apart and not lost and not starts and not ending_lines(trace, incs, end) and not cap
    if quiet and not everything and not unused and not wine_own:
        said_all = all_loaded_words(f" ({plural(len(replays), 'load')} traced)", bool(trace.warnings))
        return [Styled(f"dlltrace ─ {said_all} · {where}", "heading")]
    if quiet and (unused or lacking) and said is None:  # (under Wine: what would fail on Windows is the news)
        news = [f"{plural(len(unused), 'import')} Wine bound to a stub would fail on Windows"] if unused else []
        news += [f"{plural(len(lacking), 'DLL')} came from Wine's own, which Windows lacks"] if lacking else []
        head = f"dlltrace ─ every load succeeded under Wine ({plural(len(replays), 'load')} traced); {'; '.join(news)} · {where}"
    elif quiet and wine_own and said is None:
        head = f"dlltrace ─ every load succeeded under Wine ({plural(len(replays), 'load')} traced) · {where}"
    lines: list[Block] = [Styled(head, "heading")]
    if unfound is not None:
        lines += unfound_lines(unfound, lambda i, x: [], windows=True)
    if unstarted is not None:
        lines += unstarted_lines(unstarted, windows=True)
    if gone is not None:
        lines += gone_lines(gone, numbered_fix)
    for verdict in starts:
        lines += ["", verdict]
    for b in stubs:
        lines += [""] + stub_blocks(b, trace)
    shown = 0
    rest: list[Incident] = []
    for inc in incs:
        if inc.went_on and not everything and not any(inc is i for i in lost):
            continue  # listed apart below
        if shown >= MAX_EXPLAINED and not everything:
            rest.append(inc)  # a line each below: a report of hundreds of explained failures is read by nobody
            continue
        shown += 1
        lines.append("")
        lines.extend(incident_blocks(inc, trace))
    if rest:
        lines += ["", Styled(f"{plural(len(rest), 'more failed load')} (--all explains every one)", "failure")]
        lines += [apart_line(i, trace) for i in rest]
    if apart and not everything:
        words = ("Failed loads, context only: the program went past them, and none is what it ended with" if
                 outcome is not None and outcome.kind == "died_of_other" else
                 f"{went_on_words(apart).capitalize()}, the program went on (not failures: no fix needed; --all "
                 "explains them)")
        lines += ["", Styled(words, "went_on")]
        lines += [apart_line(i, trace) for i in apart]
    if unused:
        lines += [""] + unused_stub_blocks(unused)
    if wine_own:
        lines += [""] + wine_only_blocks(wine_own)
    if strays:
        lines += [""] + not_installed_blocks(strays)
    if (not n or end.abnormal) and (said is None or exited is not None) and not (exited and len(trace.pids) <= 1):
        for line in ending_lines(trace, incs, end, explained=bool(stubs)):  # (one process: its headline said it)
            lines += ["", Styled(line, "failure" if end.abnormal else "")]
    if cap is not None:
        lines += ["", Styled(capped_line(cap), "failure")]
    note = api_set_note(trace) if end.kind not in ("never_ran", "not_windows") else ""
    if note:
        lines += ["", note]
    return lines


def stub_blocks(b: StubBinding, trace: Trace) -> list[Block]:
    """A load Wine let through by binding a missing export to a stub, which the program then called: the
    failure it died of, as the 127 it is on Windows."""
    r = b.load
    dll, importer = winpath.basename(b.dll), winpath.basename(b.importer)
    out: list[Block] = [
        Styled(f"✗ {dll} does not export {b.function} — it is needed by {importer}", "failure"),
        Styled(f"  The failure the program hit: Wine bound {importer}'s import of {b.function} to a stub, and the "
               f"program ended when it called it (0x80000100 EXCEPTION_WINE_STUB). On Windows this load fails with "
               f"127 (ERROR_PROC_NOT_FOUND).", ""),
        Styled("", ""), Styled(f"  {r.origin + ': ' if r.origin else ''}{r.load.api}({r.load.name})  → loaded under Wine", "")]
    ctx = trace.context(r.load)
    where = code_line(ctx.get("frame")) if ctx else None
    if where:
        out.append(Styled(where, ""))
    out += [Styled(f"  The copy of {dll} it bound to: {b.dll}", ""), Styled("", ""), Styled("  Fix", "heading"),
            Styled(f"    1. {stub_fix_words(b, trace)}", "")]
    return out


def _same(s: str) -> str:
    return s


def stub_fix_words(b: StubBinding, trace: Trace, code: "Callable[[str], str]" = _same,
                   prose: "Callable[[str], str]" = _same) -> str:
    """The fix of a load that died on a stub-bound import (stub_blocks, markdown's stub_lines): the package's own copy
    and the stray one to move away when a distribution ships the DLL elsewhere (rule_stub_dll_shadows_a_package_copy),
    else a copy that exports it. `code` marks a name, `prose` escapes words (Markdown's; the text's: as they are)."""
    dll, importer = winpath.basename(b.dll), winpath.basename(b.importer)
    own = rule_stub_dll_shadows_a_package_copy(b, trace)
    by = rule_stub_dll_was_already_loaded(b)  # (the module already loaded is used: no search, no folder order)
    first = (f"it was already in the process ({prose(by)}) before {code(importer)}: a DLL already loaded is used "
             "whatever folders the search would try") if by else ""
    if own is None and by:
        return (f"The copy bound, {code(b.dll)}: {first}. Load a {code(dll)} that exports {code(b.function)} (the one "
                f"{code(importer)} was built against) before it, or do not load that copy first")
    if own is None:
        return (f"Use a {code(dll)} that exports {code(b.function)} (the one {code(importer)} was built against): "
                f"update or reinstall what ships {code(b.dll)}, or make the matching copy be found first")
    path, o = own
    if by:
        return (f"{prose(f'{o.dist} {o.version}')} ships its own {code(dll)}, {code(path)} (its RECORD lists "
                f"{code(o.path)}): the one {code(importer)} was built against. The copy bound, {code(b.dll)}, is no "
                f"installed distribution's, and {first}. Do not load it before {prose(o.dist)} (or load {code(path)} "
                "first)")
    return (f"{prose(f'{o.dist} {o.version}')} ships its own {code(dll)}, {code(path)} (its RECORD lists "
            f"{code(o.path)}): the one {code(importer)} was built against. The copy bound, {code(b.dll)}, is no "
            f"installed distribution's, and its folder is searched first: move it out of "
            f"{code(winpath.dirname(b.dll))} (or rename it), and {prose(o.dist)}'s copy is found")


STUB_NAMES_SHOWN = 5  # the functions named on the line of one DLL's imports Wine bound to stubs


def unused_stub_blocks(unused: list[StubBinding]) -> list[Block]:
    """Loads that succeeded under Wine only because Wine bound an import their DLL lacks to a stub, which the
    program never called: on Windows each of those loads fails with 127 (analysis.wine_stub_bindings)."""
    out: list[Block] = [Styled("Loaded under Wine, fails on Windows: Wine bound each import below, which its DLL does "
                               "not export, to a stub that ends the program if called; Windows fails the load with "
                               "127 (ERROR_PROC_NOT_FOUND)", "failure")]
    groups: dict[tuple[str, str, int], list[StubBinding]] = {}  # (one line a DLL, importer and load: a stray old
    # libgmp-10.dll lacks 246 of gmpy2's imports, which were a line each)
    for b in unused:
        groups.setdefault((winpath.key(b.dll), winpath.key(b.importer), b.load.load.seq), []).append(b)
    for same in groups.values():
        b, r = same[0], same[0].load
        dll, importer = winpath.basename(b.dll), winpath.basename(b.importer)
        names = [x.function for x in same]
        what = f"{names[0]}" if len(names) == 1 else (
            f"{len(names)} functions {importer} imports ({', '.join(names[:STUB_NAMES_SHOWN])}"
            + (f", … and {len(names) - STUB_NAMES_SHOWN} more)" if len(names) > STUB_NAMES_SHOWN else ")"))
        out.append(Styled(f"  ✗ {dll} does not export {what} — it is needed by {importer} · "
                          f"{r.origin + ': ' if r.origin else ''}{r.load.api}({r.load.name}) · the copy bound: {b.dll}",
                          ""))
    out.append(Styled("  Fix: for each, use the copy of the DLL its importer was built against (update or reinstall what "
                      "ships it, or make that copy be found first)", ""))
    return out


# where a DLL that no vanilla Windows has comes from on Windows, by its class (classify's kind)
WINE_ONLY_WHERE = {
    "other": "on Windows no system folder has it: the package (or the program) must ship it, else the load fails (126)",
    "vcruntime": "on Windows it is the VC++ Redistributable's copy in System32, when that is installed",
    "nvidia_driver": "on Windows it is the NVIDIA driver's",
}


def wine_only_blocks(items: list[WineOnly]) -> list[Block]:
    """Imports that were bound to Wine's own DLLs, which no vanilla Windows has (analysis.wine_only_dlls): where each
    comes from on Windows, and the reinstall when the package's own copy is gone."""
    out: list[Block] = [Styled("From Wine's own DLLs, which no vanilla Windows has: under Wine each import below was "
                               "bound to Wine's copy; on Windows it must find the DLL elsewhere", "")]
    for w in items:
        r = w.load
        name, importer = winpath.basename(w.path), winpath.basename(w.importer)
        where = WINE_ONLY_WHERE.get(w.klass, "on Windows it must come from the package, an installer or a driver")
        out.append(Styled(f"  {'!' if w.klass == 'other' else '·'} {name} — needed by {importer} · "
                          f"{r.origin + ': ' if r.origin else ''}{r.load.api}({r.load.name}) · Wine's copy: {w.path} · "
                          f"{where}", "failure" if w.klass == "other" else ""))
        if w.reinstall is not None:  # (each command a line of its own: fixwords.fix_lines)
            out += [Styled(f"    {text}", "") for text, _ in fix_lines(w.reinstall)]
    return out


def shown_not_installed(items: list[NotInstalled], incs: list[Incident]) -> list[NotInstalled]:
    """The modules loaded that are not the files their distributions installed (analysis.not_installed_files) that
    no explained failure's fix already names (its reinstall, explain.rule_not_the_file_its_distribution_installed)."""
    named = {winpath.key(f.path) for i in incs if i.real_failure for f in i.attempts[-1].result.fixes
             if f.record_size is not None and f.path}
    return [x for x in items if winpath.key(x.path) not in named]


def not_installed_news(items: list[NotInstalled]) -> str:
    """The headline's words for them ("", when none): the answer a program that died of no failed load may need."""
    if not items:
        return ""
    f = items[0].reinstall
    more = f" (and {plural(len(items) - 1, 'more file')})" if len(items) > 1 else ""
    return f", and {f.name} is not the file {f.package} {f.version} installed{more}"


def no_gpu_failure(failed: list[Incident]) -> bool:
    """Whether a failure's fix says the machine has no NVIDIA GPU (nvcuda.dll's, explain.provider_advice): only
    then is the outcome worked out for the headline (it is not, for a report of 1,000 failed loads)."""
    return any(x.value == "no_gpu" for i in failed for x in i.attempts[-1].result.fixes)


def not_installed_blocks(items: list[NotInstalled]) -> list[Block]:
    """Modules the program loaded that are not the files their distributions installed: each with the load that
    mapped it and the reinstall (not re-run by the model: no failed load of the trace is what it fixes)."""
    out: list[Block] = [Styled("Not the files their distributions installed (RECORD lists each at this path with "
                               "another size: another build was put there)", "failure")]
    for x in items:
        r = x.load
        out.append(Styled(f"  ✗ {winpath.basename(x.path)} — loaded by {r.origin + ': ' if r.origin else ''}"
                          f"{r.load.api}({r.load.name})", "failure"))
        out.append(Styled("    Fix (not checked by the model: no failed load is what it fixes):", ""))
        out += [Styled(f"      {text}", "") for text, _ in fix_lines(x.reinstall)]  # (fixwords.fix_lines)
    return out


def lost_a_feature(inc: Incident) -> bool:
    """A load the program went past that cost it an accelerator or optional feature (outcome.feature_of)."""
    r = inc.attempts[-1]
    return bool(feature_of(r.load.name) or (r.result.leaf is not None and feature_of(r.result.leaf.name)))


def api_set_note(trace: Trace) -> str:
    """The line a report gives when its API sets did not come from the trace (older traces)."""
    if api_set_source(trace) == "trace":
        return ""
    return f"API sets resolved from {SOURCE_TEXT['builtin']} (the trace has no API-set schema of its own)."


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


PYTHON_KIND_WORDS = {"venv": "a virtual environment", "conda": "conda", "store": "the Microsoft Store's",
                     "embeddable": "the embeddable distribution"}


def environment_line(trace: Trace) -> str:
    pid = trace.pids[0] if trace.pids else None
    env = trace.env(pid) if pid is not None else None
    py = next(trace.of("py_env", pid=pid), None) if pid is not None else None
    parts = []
    if py:
        kind = python_kind(py)
        parts.append(f"Python {py.get('version', '?')} ({py.get('bits', '?')}-bit"
                     + (f", {PYTHON_KIND_WORDS[kind]})" if kind in PYTHON_KIND_WORDS else ")"))
    if env:
        w = f"Wine {env['wine']}" if env.get("wine") else f"Windows {env.get('windows_version', '?')}"
        parts.append(w)
    if api_set_source(trace) != "trace":
        parts.append("API sets from the built-in table")
    parts += [f"dlltrace {__version__}", f"trace format {trace.header.version}"]
    return " · ".join(parts)
