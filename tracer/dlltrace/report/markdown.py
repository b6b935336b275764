"""The report as Markdown, to paste into a GitHub issue (`dlltrace report TRACE --markdown`)."""

from __future__ import annotations

from dlltrace import winpath
from dlltrace.report.analysis import Incident
from dlltrace.report.explain import leaf_node
from dlltrace.model import RESULT_WORDS
from dlltrace.report.text import (agreement_lines, environment_line, fate_line, plural,
                                  unexplained_exits, verdict_line)
from dlltrace.report.verdict import reason_text
from dlltrace.trace.reader import STARTUP_STATUS_TEXT, Trace
from dlltrace.trace.replay import Replayed


# --- markdown ---------------------------------------------------------------------------------------
def markdown_report(trace: Trace, incs: list[Incident], replays: list[Replayed]) -> str:
    failed = [i for i in incs if i.real_failure]
    apart = [i for i in incs if i.went_on]
    if not failed and not apart:
        return f"**dlltrace:** every load succeeded ({plural(len(replays), 'load')} traced).\n"
    out = []
    if not failed:
        out += [f"**dlltrace:** no failed load the program hit ({plural(len(replays), 'load')} traced)."]
        out += [f"{line}" for line in unexplained_exits(trace, incs)]
        out.append("")
    for inc in failed:
        r = inc.first
        res = r.result
        what = verdict_line(r)[2:]
        if r.load.api == "start":
            status = r.load.status or 0
            out.append(f"**dlltrace:** {what} — `{winpath.basename(r.load.name or '?')}` could not start "
                       f"(`{status:#x}` {STARTUP_STATUS_TEXT.get(status, '')}).")
        else:
            where = f" while `{r.origin}` loaded" if r.origin else " loading"
            out.append(f"**dlltrace:** {what} — WinError {r.real_error}{where} "
                       f"`{winpath.basename(r.load.name or '?')}` with flags `{(r.load.flags or 0):#x}`.")
        out.append("")
        out.append(fate_line(inc.verdict).rstrip(".") + ".")
        out.append("")
        for e in res.found_elsewhere[:2]:
            out.append(f"Found at `{e.path}` ({e.text}).")
        if res.fixes:
            out.append(f"Suggested fix: {res.fixes[0].markdown}")
        out.append("")
        out.append("<details><summary>Chain, folders searched, environment</summary>")
        out.append("")
        out.append("Chain: " + " → ".join(f"`{n}`" for n in res.chain))
        out.append("")
        al = leaf_node(res.tree)
        if al is not None and al.candidates:
            out.append("| # | folder | rule | result |")
            out.append("|---|---|---|---|")
            for i, c in enumerate(al.candidates, 1):
                out.append(f"| {i} | `{winpath.dirname(c.path)}` | {c.rule} | {RESULT_WORDS[c.result]} |")
            if r.not_searched:
                out.append("")
                out.append(r.not_searched)
        if len(res.fixes) > 1:
            out.append("")
            out.append("Other fixes:")
            for f in res.fixes[1:]:
                out.append(f"- {f.markdown}")
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
    return "\n".join(out)

