"""A trace's report in one call: what `dlltrace report` prints (produce) and what `dlltrace run` prints
at its end (summarize, summary_blocks: render/runsummary.py, which `run` imports alone: none of the CUDA,
JSON and Markdown renderers below)."""

from __future__ import annotations

from typing import Iterator, Optional

from dlltrace.diagnosis.analysis import Incident, judged_incidents
from dlltrace.diagnosis.cuda import CudaTable, rule_mismatch_of_the_run
from dlltrace.render.cuda import (cpu_build_dict, cpu_build_text, cuda_blocks, cuda_dict, cuda_markdown, cuda_table_of_trace,
                                 cuda_text, imported_cpu_builds)
from dlltrace.render.escape import markdown_paragraphs
from dlltrace.render.json import call_dicts, json_chunks, json_report_head
from dlltrace.render.markdown import markdown_report
from dlltrace.render.outcome import damaged_words
from dlltrace.render.explained import Block, Styled
from dlltrace.render.runsummary import summarize, summary_blocks  # noqa: F401  (run's: re-exported)
from dlltrace.render.text import text_report, text_report_blocks, text_report_lines
from dlltrace.trace.reader import Progress, Trace, paused_gc


def produce(trace: Trace, fmt: str = "text", everything: bool = False, progress: Optional[Progress] = None) -> str:
    """The report of a trace as text, "markdown" or "json" (what `dlltrace report` prints); `progress`:
    called now and then with (events replayed, events to replay)."""
    return "".join(produce_chunks(trace, fmt, everything, progress))


def produce_chunks(trace: Trace, fmt: str = "text", everything: bool = False,
                   progress: Optional[Progress] = None) -> Iterator[str]:
    """produce's text in pieces: the JSON document a call at a time (render/json.py json_chunks), the
    text and the Markdown whole."""
    with paused_gc():
        # (the CUDA table first: what it takes of the trace, the paths its probes found, is let go of before the
        # replay holds its most; the replay does not depend on it)
        cuda = cuda_table_of_trace(trace)  # (None: nothing of CUDA in the trace)
        replays, incs = judged_incidents(trace, everything, progress)
        cpu = imported_cpu_builds(trace, cuda)  # (CPU-only builds of GPU frameworks it imported: render/cuda.py)
        if fmt == "json":
            doc = json_report_head(trace, incs, replays)
            doc["cuda"] = cuda_dict(cuda) if cuda is not None else None
            doc["cpu_builds"] = [cpu_build_dict(fw) for fw in cpu]
            yield from json_chunks(doc, call_dicts(incs))
        elif fmt == "markdown":
            md = markdown_report(trace, incs, replays)
            note = cpu_build_text(cpu, trace.header.platform)
            damaged = damaged_words(trace)
            yield md + ("\n" + markdown_paragraphs(note) + "\n" if note else "") + (
                "\n" + cuda_markdown(cuda, level=3) if cuda is not None and cuda_of_the_run(cuda, trace, incs) else "") + (
                "\n" + markdown_paragraphs(damaged) + "\n" if damaged else "")
        else:
            text = text_report(trace, incs, replays, everything)
            note = cpu_build_text(cpu, trace.header.platform)
            damaged = damaged_words(trace)
            yield text + ("\n\n" + note if note else "") + (
                "\n\n" + cuda_text(cuda) if cuda is not None and cuda_of_the_run(cuda, trace, incs) else "") + (
                "\n\n" + damaged if damaged else "")


def produce_lines(trace: Trace, everything: bool = False, progress: Optional[Progress] = None) -> list[str]:
    """The text report as lines, each Styled where the terminal shows it in a style (explained.style_of)."""
    with paused_gc():
        replays, incs = judged_incidents(trace, everything, progress)
        return text_report_lines(trace, incs, replays, everything)


def produce_blocks(trace: Trace, everything: bool = False, progress: Optional[Progress] = None) -> list[Block]:
    """The text report for a terminal: its lines with their styles, and each call's tables and trees
    (explained.print_blocks shows each cell in the style of its field)."""
    with paused_gc():
        cuda = cuda_table_of_trace(trace)  # the CUDA stack table, when it names a mismatch (render/cuda.py); first,
        # as in produce_chunks
        replays, incs = judged_incidents(trace, everything, progress)
        blocks = text_report_blocks(trace, incs, replays, everything)
        # (CPU-only builds of GPU frameworks it imported: render/cuda.py)
        note = cpu_build_text(imported_cpu_builds(trace, cuda), trace.header.platform)
        blocks += [Styled("", ""), *(Styled(line, "") for line in note.split("\n"))] if note else []
        blocks += [Styled("", ""), *cuda_blocks(cuda)] if cuda is not None and cuda_of_the_run(cuda, trace, incs) else []
        damaged = damaged_words(trace)
        return blocks + ([Styled("", ""), Styled(damaged, "failure")] if damaged else [])


def cuda_of_the_run(cuda: CudaTable, trace: Trace, incs: list[Incident]) -> bool:
    """Whether the text and Markdown reports show the CUDA stack table: it names a mismatch about this run
    (diagnosis/cuda.py rule_mismatch_of_the_run: a file of it the run opened, or a failed load of it or of CUDA's)."""
    if not cuda.mismatches:
        return False
    failed = [n for inc in incs for a in inc.attempts
              for n in (a.load.name or "", a.result.leaf.name if a.result.leaf is not None else "")]
    opened = [p for pid in trace.pids for p in trace.found_probe_paths(pid)]
    return any(rule_mismatch_of_the_run(m, opened, failed) for m in cuda.mismatches)
