"""The report as Markdown, to paste into a GitHub issue (`dlltrace report TRACE --markdown`)."""

from __future__ import annotations

from dlltrace import winpath
from dlltrace.model import Fix
from dlltrace.report.analysis import Incident
from dlltrace.report.explained import (ALSO_MISSING, also_missing_row, as_typed, elsewhere_facts, fix_notes_markdown,
                                       looked_heading, looked_rows, verdict_text, visible)
from dlltrace.report.ending import ending
from dlltrace.report.text import (agreement_lines, ending_lines, environment_line, explained_incident, fate_line, plural,
                                  unexplained_exits)
from dlltrace.report.verdict import reason_text
from dlltrace.trace.reader import STARTUP_STATUS_TEXT, Trace
from dlltrace.trace.replay import Replayed


def fix_items(fixes: list[Fix], leaf: str) -> list[str]:
    """Fixes as a Markdown list, each with its notes (explained.fix_notes) as sub-items."""
    out: list[str] = []
    for f in fixes:
        out.append(f"- {as_typed(f.markdown)}")
        out.extend(f"  - {n}" for n in fix_notes_markdown(f, leaf))
    return out


def markdown_report(trace: Trace, incs: list[Incident], replays: list[Replayed]) -> str:
    failed = [i for i in incs if i.real_failure]
    apart = [i for i in incs if i.went_on]
    end_words = ending_lines(trace, incs, ending(trace))
    if not failed and not apart and not end_words:
        return f"**dlltrace:** every load succeeded ({plural(len(replays), 'load')} traced).\n"
    if not failed and not apart:
        return f"**dlltrace:** {plural(len(replays), 'load')} traced, none failed. " + " ".join(end_words) + "\n"
    out = []
    if not failed:
        out += [f"**dlltrace:** no failed load the program hit ({plural(len(replays), 'load')} traced)."]
        out += [f"{line}" for line in unexplained_exits(trace, incs)]
        out.append("")
    for inc in failed:
        r = inc.first
        res = r.result
        e = explained_incident(inc)
        what = verdict_text(e)[2:]
        if r.load.api == "start":
            status = r.load.status or 0
            out.append(f"**dlltrace:** {what} — `{winpath.basename(r.load.name or '?')}` could not start "
                       f"(`{status:#x}` {STARTUP_STATUS_TEXT.get(status, '')}).")
        else:
            where = f" while `{as_typed(r.origin)}` loaded" if r.origin else " loading"
            out.append(f"**dlltrace:** {what} — WinError {r.real_error}{where} "
                       f"`{winpath.basename(r.load.name or '?')}` with flags `{(r.load.flags or 0):#x}`.")
        out.append("")
        out.append(fate_line(inc.verdict).rstrip(".") + ".")
        out.append("")
        for c in res.found_elsewhere[:2]:
            out.append(f"Found at `{c.path}` ({elsewhere_facts(c)}).")
        leaf = res.leaf.name if res.leaf else ""
        if e.fixes:
            out.append(f"Suggested fix: {as_typed(e.fixes[0].markdown)}")
            out.extend(f"  - {n}" for n in fix_notes_markdown(e.fixes[0], leaf))
        if e.also_missing:
            out += ["", f"{ALSO_MISSING}:", ""]
            for a in e.also_missing:
                name, why, by, installed = also_missing_row(a)
                chain = " → ".join(f"`{n}`" for n in a.chain)
                out.append(f"- `{name}`: {why}, {by}{' (' + chain + ')' if chain else ''}; {installed}")
        out.append("")
        out.append("<details><summary>Chain, folders searched, environment</summary>")
        out.append("")
        out.append("Chain: " + " → ".join(f"`{n}`" for n in res.chain))
        for lk in e.looked:
            out += ["", looked_heading(lk), "", "| # | folder | rule | result |", "|---|---|---|---|"]
            out += [f"| {i} | `{folder}` | {rule} | {result} |" for i, folder, rule, result in looked_rows(lk)]
            if lk.not_searched:
                out += ["", lk.not_searched]
        if len(e.fixes) > 1:
            out += ["", "Other fixes:"]
            out.extend(fix_items(e.fixes[1:], leaf))
        out.append("")
        out.extend(agreement_lines(inc, indent=""))
        out.append("")
        out.append(environment_line(trace))
        out.append("")
        out.append("</details>")
        out.append("")
    if apart:
        out.append("Probed, absent, the program went on (not failures, no fix needed):")
        out.append("")
        for inc in apart:
            r = inc.first
            out.append(f"- `{winpath.basename(r.load.name or '?')}`: `{r.load.api}` with flags `{(r.load.flags or 0):#x}` "
                       f"→ {r.real_error if r.real_error is not None else '?'} · {reason_text(inc.verdict) if inc.verdict else '?'}")
        out.append("")
    return visible("\n".join(out))  # (a name's control characters and lone surrogates as escapes)

