"""What `dlltrace run` prints at its end: the report of the failed loads with where the trace was saved.
A module of its own so that `run` imports only the text report (render/summary.py, `report`'s, also imports
the CUDA, JSON and Markdown renderers: ~0.05 s of CPU that `run` does not use)."""

from __future__ import annotations

from dlltrace.diagnosis.analysis import judged_incidents
from dlltrace.render.explained import Block, Styled
from dlltrace.render.text import text_report, text_report_blocks
from dlltrace.trace.reader import Trace, warning_lines


def summarize(trace: Trace) -> str:
    """What `dlltrace run` prints at the end: the report of the failed loads, with where the trace
    was saved in its first line (or its only line, when every load succeeded)."""
    replays, incs = judged_incidents(trace)
    return "\n".join(warning_lines(trace) + [text_report(trace, incs, replays, saved=True)])


def summary_blocks(trace: Trace) -> list[Block]:
    """summarize's text for a terminal (explained.print_blocks): the same lines, tables and trees, each
    piece in its style, wrapped to the terminal's width."""
    replays, incs = judged_incidents(trace)
    return [Styled(w, "warning") for w in warning_lines(trace)] + text_report_blocks(trace, incs, replays, saved=True)
