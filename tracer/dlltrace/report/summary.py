"""A trace's report in one call: what `dlltrace report` prints (produce) and what `dlltrace run` prints
at its end (summarize)."""

from __future__ import annotations

import json
from typing import Optional

from dlltrace.report.analysis import judged_incidents
from dlltrace.report.json import json_report
from dlltrace.report.markdown import markdown_report
from dlltrace.report.explained import Block
from dlltrace.report.text import text_report, text_report_blocks, text_report_lines
from dlltrace.trace.reader import Progress, Trace, paused_gc, warning_lines


def summarize(trace: Trace) -> str:
    """What `dlltrace run` prints at the end: the report of the failed loads, with where the trace
    was saved in its first line (or its only line, when every load succeeded)."""
    replays, incs = judged_incidents(trace)
    return "\n".join(warning_lines(trace) + [text_report(trace, incs, replays, saved=True)])


def produce(trace: Trace, fmt: str = "text", everything: bool = False, progress: Optional[Progress] = None) -> str:
    """The report of a trace as text, "markdown" or "json" (what `dlltrace report` prints); `progress`:
    called now and then with (events replayed, events to replay)."""
    with paused_gc():
        replays, incs = judged_incidents(trace, everything, progress)
        if fmt == "json":
            return json.dumps(json_report(trace, incs, replays), indent=2, ensure_ascii=False)
        if fmt == "markdown":
            return markdown_report(trace, incs, replays)
        return text_report(trace, incs, replays, everything)


def produce_lines(trace: Trace, everything: bool = False, progress: Optional[Progress] = None) -> list[str]:
    """The text report as lines, each Styled where the terminal shows it in a style (explained.style_of)."""
    with paused_gc():
        replays, incs = judged_incidents(trace, everything, progress)
        return text_report_lines(trace, incs, replays, everything)


def produce_blocks(trace: Trace, everything: bool = False, progress: Optional[Progress] = None) -> list[Block]:
    """The text report for a terminal: its lines with their styles, and each call's tables and trees
    (explained.print_blocks shows each cell in the style of its field)."""
    with paused_gc():
        replays, incs = judged_incidents(trace, everything, progress)
        return text_report_blocks(trace, incs, replays, everything)
