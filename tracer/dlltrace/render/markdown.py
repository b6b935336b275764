"""The report as Markdown, to paste into a GitHub issue (`dlltrace report TRACE --markdown`).

It fits an issue whatever the trace holds: GitHub takes an issue body of at most 65,536 characters, and
the report stays within MARKDOWN_BUDGET (UTF-8 bytes, so within the limit however GitHub counts, with
room left for the user's own words). The incident comes first, whole: the failure the program hit
(else the first whose outcome the trace does not tell). The other failed loads follow, collapsed in a
<details>: the first OTHERS_IN_FULL explained in full, the rest a line each, as far as the budget goes;
then the loads the program went past, a line each (collapsed when there are many). Each list that
does not fit ends with a line that says how many were left out (`**N more ... left out**`). Last, the
trace file to attach, its size, and whether it is compressed and redacted (render/attach.py).

Every string of the trace (a name, a path, a message, the trace file's own name) is escaped for where it
stands (render/escape.py): a code span, running text or a table cell; the report's own words too, where
they hold names (a verdict, a fate, the environment). A hostile name injects no Markdown, HTML, link or
mention, and fakes no line."""

from __future__ import annotations

import re
from typing import Sequence

from dlltrace import winpath
from dlltrace.model import TORCH_ORIGINS, Fix
from dlltrace.render.attach import Attachment, attachment_of, size_text
from dlltrace.diagnosis.analysis import (Incident, NotInstalled, StubBinding, WineOnly, main_gone, main_outcome,
                                         main_unfound, main_unstarted,
                                         not_installed_files, wine_only_dlls, wine_stub_bindings)
from dlltrace.diagnosis.outcome import feature_of
from dlltrace.diagnosis.result import Unfound
from dlltrace.render.outcome import all_loaded_words, died_without_a_gpu_words, outcome_headline, unfound_dll, untraced_line
from dlltrace.render.escape import escape_code_span as code, escape_prose as prose, escape_table_cell as cell
from dlltrace.render.explained import (ALSO_MISSING, CAUSE_LINE, also_missing_row, cause_line, as_typed, elsewhere_facts,
                                       fix_notes_markdown,
                                       looked_heading, looked_rows, verdict_text, visible)
from dlltrace.trace.capped import capped, capped_line
from dlltrace.diagnosis.ending import ending
from dlltrace.render.text import (FATE_WORDS, stub_fix_words, went_on_words, WINE_ONLY_WHERE, agreement_lines, ending_lines, environment_line, explained_incident,
                                  no_gpu_failure,
                                  fate_line, lost_a_feature, plural, shown_not_installed, unexplained_exits)
from dlltrace.trace.redact import redacted_name
from dlltrace.diagnosis.verdict import reason_text
from dlltrace.trace.reader import STARTUP_STATUS_TEXT, Trace
from dlltrace.diagnosis.replay import Replayed
from dlltrace.render.fixwords import fix_markdown


def unfound_markdown(u: Unfound) -> list[str]:
    """What the Markdown says after its first line of a program that died of a library ctypes.util.find_library did
    not find (Windows: render/outcome.windows_unfound_lines' words, shorter): where find_library looked, and the
    fix with its steps."""
    dll = unfound_dll(u.name)
    files = code(u.name) if u.name.lower().endswith(".dll") else f"{code(u.name)}, then {code(dll)},"
    out = [f"`find_library` looks for {files} in each folder of PATH ({len(u.searched)} here, none holds it) and "
           "in no other: on Windows it does not use the DLL search.", ""]
    if not u.fixes:
        return out + [f"Suggested fix: put {code(dll)} in a folder of PATH, or put the folder that holds it on PATH "
                      "before the program starts.", ""]
    x = u.fixes[0]
    steps = " then: ".join(fix_markdown(f, as_typed) for f in (x, *x.then))
    alone = (f" (installing it alone is not enough: pip puts {code(x.name)} in {code(x.folder)}, which is not on PATH)"
             if x.action == "install_package" and not x.replaces else "")
    return out + [f"Suggested fix: {steps}{alone}", ""]


def fix_items(fixes: list[Fix], leaf: str) -> list[str]:
    """Fixes as a Markdown list, each with its notes (explained.fix_notes) as sub-items."""
    out: list[str] = []
    for f in fixes:
        out.append(f"- {fix_markdown(f, as_typed)}")
        out.extend(f"  - {n}" for n in fix_notes_markdown(f, leaf))
    return out


MARKDOWN_BUDGET = 50_000  # UTF-8 bytes: under GitHub's 65,536-character issue body, with room for the user's words
OTHERS_IN_FULL = 5  # other failed loads explained in full (collapsed) before the rest get a line each
APART_OPEN = 10  # at most this many loads the program went past are listed open; more are collapsed
ATTACH = "**Trace to attach:**"
DETAILS = "<details><summary>Chain, folders searched, environment</summary>"
APART_HEADING = ", the program went on (not failures, no fix needed)"  # (after text.went_on_words)


def incident_lines(inc: Incident, trace: Trace, lead: str = "**dlltrace:**") -> list[str]:
    """One failed load in full: its verdict and call, its fate, where the leaf is, the first fix; then,
    collapsed, the chain, the folders searched, the other fixes, the model's agreement, the environment."""
    out: list[str] = []
    r = inc.first
    res = r.result
    e = explained_incident(inc)
    what = prose(verdict_text(e)[2:])
    if r.load.api == "start":
        status = r.load.status or 0
        out.append(f"{lead} {what} — {code(winpath.basename(r.load.name or '?'))} could not start "
                   f"(`{status:#x}` {STARTUP_STATUS_TEXT.get(status, '')}).")
    else:
        # (torch's own loop: the model's typed origin, as the text says it: diagnosis.explain.torch_origin)
        origin = r.result.origin if r.result.origin_kind in TORCH_ORIGINS and r.result.origin else r.origin
        where = f" while {code(as_typed(origin))} loaded" if origin else " loading"
        out.append(f"{lead} {what} — WinError {r.real_error}{where} "
                   f"{code(winpath.basename(r.load.name or '?'))} with flags `{(r.load.flags or 0):#x}`.")
    out.append("")
    if inc.verdict is not None and inc.went_on and lost_a_feature(inc):
        feature = feature_of(res.leaf.name if res.leaf else None) or feature_of(r.load.name)
        out.append(f"The program went on without {prose(feature or '')}: {prose(reason_text(inc.verdict))}.")
    else:
        out.append(prose(fate_line(inc.verdict).rstrip(".")) + ".")
    out.append("")
    for c in res.found_elsewhere[:2]:
        out.append(f"Found at {code(c.path)} ({prose(elsewhere_facts(c))}).")
    leaf = res.leaf.name if res.leaf else ""
    if e.fixes:
        cause = cause_line(e)
        if cause:  # (its paths and names from the trace: escaped as prose)
            out.append(prose(CAUSE_LINE.format(cause) + "."))
        out.append(f"Suggested fix: {fix_markdown(e.fixes[0], as_typed)}")
        out.extend(f"  - {n}" for n in fix_notes_markdown(e.fixes[0], leaf))
    if e.also_missing:
        out += ["", f"{ALSO_MISSING}:", ""]
        for a in e.also_missing:
            name, why, by, installed = also_missing_row(a)
            chain = " → ".join(code(n) for n in a.chain)
            out.append(f"- {code(name)}: {prose(why)}, {prose(by)}{' (' + chain + ')' if chain else ''}; {prose(installed)}")
    out.append("")
    out.append(DETAILS)
    out.append("")
    out.append("Chain: " + " → ".join(code(n) for n in res.chain))
    for lk in e.looked:
        out += ["", prose(looked_heading(lk)), "", "| # | folder | rule | result |", "|---|---|---|---|"]
        out += [f"| {i} | {cell(code(folder))} | {cell(prose(rule, False))} | {cell(prose(result, False))} |"
                for i, folder, rule, result in looked_rows(lk)]
        if lk.not_searched:
            out += ["", prose(lk.not_searched)]
    if len(e.fixes) > 1:
        out += ["", "Other fixes:"]
        out.extend(fix_items(e.fixes[1:], leaf))
    out.append("")
    out.extend(_prose_line(line) for line in agreement_lines(inc, indent=""))
    out.append("")
    out.append(prose(environment_line(trace)))
    out.append("")
    out.append("</details>")
    out.append("")
    return out


def failure_item(inc: Incident) -> str:
    """Another failed load, in one line: its verdict, the call and its fate."""
    r = inc.first
    e = explained_incident(inc)
    fate = FATE_WORDS[inc.verdict.fate] if inc.verdict else ""
    return (f"- {prose(verdict_text(e)[2:])} — WinError {r.real_error} loading {code(winpath.basename(r.load.name or '?'))}"
            f" with flags `{(r.load.flags or 0):#x}`{' · ' + prose(fate.lower()) if fate else ''}")


def apart_item(inc: Incident) -> str:
    r = inc.first
    return (f"- {code(winpath.basename(r.load.name or '?'))}: {code(r.load.api)} with flags `{(r.load.flags or 0):#x}` "
            f"→ {r.real_error if r.real_error is not None else '?'} · {prose(reason_text(inc.verdict)) if inc.verdict else '?'}")


def left_out_line(count: int, one: str, many: str, trace_name: str) -> str:
    """The line that caps a list: how many of it were left out, and where every one is."""
    return (f"**{count} more {one if count == 1 else many} left out** to fit a GitHub issue: "
            f"{code('dlltrace report ' + trace_name)} lists every one.")


def attach_line(a: Attachment) -> str:
    """The trace file to attach, its size, and what to do first when it is not compressed or not redacted."""
    redact_cmd = code(f"dlltrace redact {a.name} -o {winpath.basename(redacted_name(a.name))}")
    size = size_text(a.size) if a.size is not None else "size unknown"
    if a.report_redacted:
        return (f"{ATTACH} this report is redacted, the trace file {code(a.name)} ({size}) is not: {redact_cmd} writes "
                "a compressed copy with user, home and machine names replaced; attach that one.")
    facts = [size, "compressed" if a.compressed else "not compressed"]
    if a.name_says_compressed and not a.compressed:
        facts[-1] += ", whatever its name says"
    if a.redacted:
        facts.append("user, home and machine names replaced")
    out = f"{ATTACH} {code(a.name)} ({', '.join(facts)})."
    if a.too_big:
        out += " It is over GitHub's 25 MB limit for an attachment: share it another way, or attach the report alone."
    if not a.redacted:
        out += (f" It is not redacted (it may hold your user, home and machine names): {redact_cmd} writes a"
                " compressed copy with them replaced, to attach instead.")
    elif not a.compressed:
        out += f" GitHub takes `.gz` attachments: {code('python -m gzip ' + a.name)} writes {code(a.name + '.gz')} to attach."
    return out


def stub_lines(b: StubBinding, trace: Trace) -> list[str]:
    """The import Wine bound to a stub that the program called and died of (0x80000100): the failure, as the 127
    it is on Windows (the text report's stub_blocks)."""
    r = b.load
    dll, importer = winpath.basename(b.dll), winpath.basename(b.importer)
    origin = f" while {code(as_typed(r.origin))} loaded" if r.origin else " loading"
    return [f"**dlltrace:** {code(dll)} does not export {code(b.function)} — it is needed by {code(importer)}: Wine "
            f"bound the import to a stub, and the program ended when it called it (`0x80000100` EXCEPTION_WINE_STUB)"
            f"{origin} {code(winpath.basename(r.load.name or '?'))}. On Windows this load fails with 127 "
            "(ERROR_PROC_NOT_FOUND).", "",
            f"Suggested fix: {stub_fix_markdown(b, trace)}", ""]


def stub_fix_markdown(b: StubBinding, trace: Trace) -> str:
    """The text report's stub_fix_words, in Markdown."""
    return stub_fix_words(b, trace, code, prose) + "."


def unused_stub_lines(unused: list[StubBinding], room: int, trace_name: str) -> list[str]:
    """Loads that succeeded under Wine only because Wine bound an import their DLL lacks to a stub the program
    never called: on Windows each fails with 127 (the text report's unused_stub_blocks); as many as fit in `room`
    bytes, the rest counted (a DLL of an old version lacks hundreds: the list alone was larger than an issue)."""
    out = ["**Loaded under Wine, fails on Windows** (Wine bound each import below, which its DLL does not export, "
           "to a stub that ends the program if called; Windows fails the load with 127, ERROR_PROC_NOT_FOUND):", ""]
    end = ["", "Fix: for each, use the copy of the DLL its importer was built against (update or reinstall what "
           "ships it, or make that copy be found first).", ""]
    room -= _size(out) + _size(end) + _size(["", left_out_line(len(unused), "", "imports bound to a stub", trace_name)])
    shown = 0
    for b in unused:
        r = b.load
        item = (f"- {code(winpath.basename(b.dll))} does not export {code(b.function)} — it is needed by "
                f"{code(winpath.basename(b.importer))}, loading {code(winpath.basename(r.load.name or '?'))}; the "
                f"copy bound: {code(b.dll)}")
        room -= _size([item])
        if room < 0:
            break
        out.append(item)
        shown += 1
    if shown < len(unused):
        out += ["", left_out_line(len(unused) - shown, "import bound to a stub", "imports bound to a stub", trace_name)]
    return out + end


def wine_only_lines(items: list[WineOnly]) -> list[str]:
    """Imports bound to Wine's own DLLs, which no vanilla Windows has (the text report's wine_only_blocks)."""
    out = ["**From Wine's own DLLs, which no vanilla Windows has** (under Wine each import below was bound to Wine's "
           "copy; on Windows it must find the DLL elsewhere):", ""]
    for w in items:
        where = WINE_ONLY_WHERE.get(w.klass, "on Windows it must come from the package, an installer or a driver")
        out.append(f"- {code(winpath.basename(w.path))} — needed by {code(winpath.basename(w.importer))}, loading "
                   f"{code(winpath.basename(w.load.load.name or '?'))}; Wine's copy: {code(w.path)}; {prose(where)}"
                   + (f". {fix_markdown(w.reinstall, as_typed)}" if w.reinstall is not None else ""))
    return out + [""]


def not_installed_lines(items: list[NotInstalled]) -> list[str]:
    """Modules loaded that are not the files their distributions installed (the text report's not_installed_blocks)."""
    out = ["**Not the files their distributions installed** (RECORD lists each at this path with another size: another "
           "build was put there):", ""]
    for x in items:
        r = x.load
        out.append(f"- {code(winpath.basename(x.path))} — loaded by {prose(r.origin) + ', ' if r.origin else ''}loading "
                   f"{code(winpath.basename(r.load.name or '?'))}. {fix_markdown(x.reinstall, as_typed)} (not checked by "
                   "the model: no failed load is what it fixes)")
    return out + [""]


def not_installed_sentence(items: list[NotInstalled]) -> str:
    """The first line's sentence for them ("" when none)."""
    if not items:
        return ""
    f = items[0].reinstall
    more = f" (and {plural(len(items) - 1, 'more file')})" if len(items) > 1 else ""
    return f" {code(f.name)} is not the file {prose(f'{f.package} {f.version}')} installed{more}."


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines)


def markdown_report(trace: Trace, incs: list[Incident], replays: Sequence[Replayed], budget: int = MARKDOWN_BUDGET) -> str:
    failed = [i for i in incs if i.real_failure]
    failed.sort(key=lambda i: i.verdict is None or i.verdict.fate != "fatal")  # the failure the program hit first
    apart = [i for i in incs if i.went_on]
    end_words = ending_lines(trace, incs, ending(trace))
    cap = capped(trace)  # the size cap dropped lines: said with the trace to attach (trace/capped.py)
    cap_words = [prose(capped_line(cap))] if cap is not None else []
    untraced = untraced_line(trace, ending(trace))  # (never "every load succeeded" for a run that traced nothing)
    if untraced is not None:
        return f"**dlltrace:** {prose(untraced)}.\n" + "".join(f"\n{w}\n" for w in cap_words)
    stubs = wine_stub_bindings(trace, replays)  # (under Wine: imports bound to a stub, each a 127 on Windows)
    died = [b for b in stubs if b.called]
    unused = [b for b in stubs if not b.called]
    wine_own = wine_only_dlls(trace, replays)  # (under Wine: imports bound to Wine's own DLLs, which Windows lacks)
    lacking = [w for w in wine_own if w.klass == "other"]
    # (the news when nothing else is: the program died of a stub, or else every load succeeded but under Wine; with
    # loads it went past or an end to tell, those come first and the Wine sections are listed after them)
    if not failed and (died or ((unused or wine_own) and not apart and not end_words)):
        name = attachment_of(trace)
        news = [f"{plural(len(unused), 'import')} Wine bound to a stub would fail on Windows"] if unused else []
        news += [f"{plural(len(lacking), 'DLL')} came from Wine's own, which Windows lacks"] if lacking else []
        head = (stub_lines(died[-1], trace) if died else
                [f"**dlltrace:** every load succeeded under Wine ({plural(len(replays), 'load')} traced)"
                 + "".join(f"; {n}" for n in news) + ".", ""])
        tail = [visible(attach_line(name))] + ["", *cap_words] * bool(cap_words)
        own = wine_only_lines(wine_own) if wine_own else []
        room = budget - _size(head) - _size(own) - _size(tail) - 400
        return "\n".join(head + (unused_stub_lines(unused, room, name.name) if unused else []) + own + tail) + "\n"
    if not failed and not apart and not end_words:
        said_all = all_loaded_words(f" ({plural(len(replays), 'load')} traced)", bool(trace.warnings))
        return f"**dlltrace:** {said_all}.\n" + "".join(
            f"\n{w}\n" for w in cap_words)
    strays = shown_not_installed(not_installed_files(trace, replays), incs)
    if not failed and not apart:
        ended = main_outcome(trace, incs)
        unfound = main_unfound(trace, ended)  # (it died of a library ctypes.util.find_library did not find)
        unstarted = main_unstarted(trace, ended) if unfound is None else None  # (or of a program not found)
        gone = main_gone(trace, ended) if unfound is None and unstarted is None else None  # (or of its file, gone)
        said = outcome_headline(ended, unfound, unstarted, gone) \
            if unfound is not None or unstarted is not None or gone is not None else None
        if said is not None:  # (the answer first, as the text's: no load failed, and this is what it died of)
            fix = [f"Suggested fix: {fix_markdown(gone.fixes[0], as_typed)}", ""] if gone is not None and gone.fixes \
                else []
            return "\n".join([f"**dlltrace:** {prose(said)} ({plural(len(replays), 'load')} traced)."
                              + not_installed_sentence(strays), "", *(unfound_markdown(unfound) if unfound else []),
                              *fix, *cap_words]).rstrip("\n") + "\n"
        none = (f"**dlltrace:** {plural(len(replays), 'load')} traced, none failed. "
                + " ".join([prose(w) for w in end_words] + cap_words) + not_installed_sentence(strays) + "\n")
        own = (wine_only_lines(wine_own) if wine_own else []) + not_installed_lines(strays) * bool(strays)
        return (none + "".join("\n" + line for line in unused_stub_lines(
            unused, budget - _size([none, *own]) - 400, attachment_of(trace).name)) * bool(unused)
                + "".join("\n" + line for line in own))
    name = attachment_of(trace)
    tail = [visible(attach_line(name))] + ["", *cap_words] * bool(cap_words)
    out: list[str] = []
    outcome = main_outcome(trace, incs) if not failed else None
    unfound = main_unfound(trace, outcome)  # (it died of a library ctypes.util.find_library did not find)
    unstarted = main_unstarted(trace, outcome) if unfound is None else None
    gone = main_gone(trace, outcome) if unfound is None and unstarted is None else None  # (for want of its file)
    said = outcome_headline(outcome, unfound, unstarted, gone) if outcome is not None else None
    # it ran without its GPU: the loads that cost it a feature are explained, with their fixes (outcome.py)
    lost = [i for i in apart if lost_a_feature(i)] if outcome is not None and outcome.kind == "degraded" else []
    apart = [i for i in apart if not any(i is x for x in lost)]
    if said is not None:  # the answer first: it ran without its GPU, or died of a Python error (outcome.py)
        out += [f"**dlltrace:** {prose(said)} ({plural(len(replays), 'load')} traced)."
                + not_installed_sentence(strays), ""]
        if unfound is not None:
            out += unfound_markdown(unfound)
        elif unstarted is None and gone is not None and gone.fixes:
            out += [f"Suggested fix: {fix_markdown(gone.fixes[0], as_typed)}", ""]
    elif failed and no_gpu_failure(failed):  # (nvcuda.dll, on a machine with no NVIDIA GPU: the answer first)
        out += [f"**dlltrace:** {prose(died_without_a_gpu_words(main_outcome(trace, incs))[2:])}.", ""]
    elif not failed:
        out += [f"**dlltrace:** no failed load the program hit ({plural(len(replays), 'load')} traced)."]
        out += [prose(line) for line in unexplained_exits(trace, incs)]
        out.append("")
    reserve = 2 * len(left_out_line(len(incs), "", "loads the program went past", name.name)) + 400  # cap lines, closings
    room = budget - _size(tail) - reserve

    def fits(lines: list[str]) -> bool:
        return _size(out) + _size(lines) <= room

    explained = failed or lost
    if explained:
        first = [visible(line) for line in incident_lines(explained[0], trace,
                                                          "**dlltrace:**" if failed else "**Did not load:**")]
        if not fits(first):  # one failure larger than an issue (thousands of folders searched): cut
            first = _cut(first, room - _size(out), name.name)
        # the trace to attach, in the open, before the incident's collapsed details
        at = next((i for i, line in enumerate(first) if line.startswith(DETAILS)), len(first))
        out += first[:at] + tail + [""] + first[at:]
    else:
        out += tail + [""]
    others = explained[1:]
    if others:
        out += [f"<details><summary>{plural(len(others), 'other failed load')}</summary>", ""]
        shown = 0
        for inc in others:
            block = ([visible(line) for line in incident_lines(inc, trace, "**Also failed:**")] if shown < OTHERS_IN_FULL
                     else [visible(failure_item(inc))])
            if not fits(block):
                break
            if shown == OTHERS_IN_FULL:
                out.append("")
            out += block
            shown += 1
        out += ["", "</details>", ""]
        if shown < len(others):
            out += [left_out_line(len(others) - shown, "failed load", "failed loads", name.name), ""]
    if apart:
        collapsed = len(apart) > APART_OPEN
        heading = went_on_words(apart).capitalize() + APART_HEADING
        out += ([f"<details><summary>{heading}: {len(apart)}</summary>", ""] if collapsed else [f"{heading}:", ""])
        shown = 0
        for inc in apart:
            item = [visible(apart_item(inc))]
            if not fits(item):
                break
            out += item
            shown += 1
        out += ["", "</details>", ""] if collapsed else [""]
        if shown < len(apart):
            out += [left_out_line(len(apart) - shown, "load the program went past", "loads the program went past",
                                  name.name), ""]
    if unused:  # (besides the failures: loads Wine let through that fail on Windows)
        out += unused_stub_lines(unused, room - _size(out), name.name)
    if wine_own:
        out += wine_only_lines(wine_own)
    if strays:
        out += not_installed_lines(strays)
    return "\n".join(out)


def _prose_line(line: str) -> str:
    """A line of the report's words (with names in them) as Markdown running text; a list item ("  - x")
    stays one."""
    item = re.match(r"\s*- ", line)
    return line[:item.end()] + prose(line[item.end():]) if item else prose(line)


def _cut(lines: list[str], room: int, trace_name: str) -> list[str]:
    """Lines cut to `room` bytes, a <details> left open closed, and a line that says so."""
    note = f"(cut here to fit a GitHub issue: the full report is {code('dlltrace report ' + trace_name)})"
    out: list[str] = []
    for line in lines:
        if _size(out) + _size([line, note, "</details>", ""]) > room:
            break
        out.append(line)
    opened = sum(1 for line in out if line.startswith("<details>")) - sum(1 for line in out if line == "</details>")
    return out + [note] + ["</details>", ""] * opened
