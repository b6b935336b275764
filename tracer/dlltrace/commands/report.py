"""`dlltrace report TRACE [--json | --markdown] [--redact] [--all] [-o FILE]`: explain a trace's failed loads.

The trace is replayed through the simulator in the world it recorded (worlds/recorded.py,
diagnosis/replay.py); for every failed top-level load the report names the leaf that really failed,
the chain from the Python action down to it, every folder searched with the rule that put
it there, where the file actually is, the fixes, and whether the model agreed with every
probe the real loader made for that load. Each failed load has a verdict (diagnosis/verdict.py,
docs/verdicts.md): only the failure the program hit is explained with fixes and counted; a load
the program went past ("probed, absent, the program went on") is listed apart. Works on any OS,
from the trace file alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from dlltrace.errors import EXIT_BAD_TRACE, EXIT_USAGE, DlltraceError

if TYPE_CHECKING:
    from dlltrace.render.explained import LineStyle
    from dlltrace.render.progress import ProgressBar
    from dlltrace.trace.redact import Redactor
    from dlltrace.trace.reader import Trace

RESULT_SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "result-v1.json"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="+", help="a trace file written by `dlltrace run`; several: what each reports, "
                   "grouped by what failed (the most traces first), then a line each")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the documented JSON form (its JSON Schema: %s)"
                     % str(RESULT_SCHEMA).replace("%", "%%"))
    fmt.add_argument("--markdown", action="store_true", help="Markdown to paste into a GitHub issue")
    p.add_argument("--redact", action="store_true", help="replace user names and home folders")
    p.add_argument("--all", action="store_true", help="explain every load, not only the failed ones")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE, in UTF-8, instead of printing it")


def execute(args: argparse.Namespace) -> int:
    from dlltrace.render.progress import ProgressBar

    if isinstance(args.trace, list) and len(args.trace) > 1:
        return _triage(args)
    if isinstance(args.trace, list):
        args.trace = args.trace[0]

    # a big trace: a progress bar on stderr after a second, on a terminal only (render/progress.py)
    bar = ProgressBar.for_stderr()
    try:
        return _report(args, bar)
    finally:
        if bar is not None:
            bar.close()


def _report(args: argparse.Namespace, bar: "Optional[ProgressBar]") -> int:
    from dlltrace.console import write_output
    from dlltrace.render.explained import print_blocks
    from dlltrace.render.summary import produce_blocks, produce_chunks
    from dlltrace.render.terminal import styled_output, terminal_console
    from dlltrace.trace.reader import read_trace, warning_lines
    from dlltrace.trace.redact import redact, redact_trace, redactor_of

    if not os.path.exists(args.trace):
        raise DlltraceError(f"{args.trace}: no such file", EXIT_USAGE)
    trace = read_trace(args.trace, progress=bar.reading if bar else None)
    replaying = bar.replaying if bar else None
    # --redact: the report is made of a redacted copy of the trace (every form, the warnings too), and
    # what it prints is passed through the same rules once more (trace/redact.py, docs/redaction.md)
    red = redactor_of(trace) if args.redact else None
    if red is not None:
        trace = redact_trace(trace, red)
    for line in warning_lines(trace):
        print(red.text(line) if red else line, file=sys.stderr)
    if trace.header.platform == "linux":  # .so loads: the ld.so model (render/linux.py)
        from dlltrace.render.linux import linux_json, linux_text
        from dlltrace.render.wrap import wrap_plain

        if holds_no_process(trace):
            raise DlltraceError(f"{args.trace}: the trace holds no traced process", EXIT_BAD_TRACE)
        from dlltrace.render.cuda import cpu_build_dict, cpu_build_text, imported_cpu_builds

        cpu = imported_cpu_builds(trace)  # (CPU-only builds of GPU frameworks it imported: render/cuda.py)
        out = linux_json(trace, [cpu_build_dict(fw) for fw in cpu]) if args.json else \
            linux_text(trace, md=args.markdown, everything=args.all, note=cpu_build_text(cpu, "linux"))
        out = redact(out, red) if red else out
        if getattr(args, "output", None):
            write_output(args.output, out + "\n")
        elif not args.json and not args.markdown and styled_output(getattr(args, "color", "auto")):
            # (a terminal, or --color always: wrapped to its width, after the redaction, render/wrap.py; a pipe
            # gets whole lines)
            print(wrap_plain(out, terminal_console(getattr(args, "color", "auto")).width))
        else:
            print(out)
        return EXIT_BAD_TRACE if trace.warnings else 0
    # (a run whose program never ran has no traced process, and its `exit` events say so: reported)
    if holds_no_process(trace):
        raise DlltraceError(f"{args.trace}: the trace holds no traced process", EXIT_BAD_TRACE)
    fmt = "json" if args.json else "markdown" if args.markdown else "text"
    color = getattr(args, "color", "auto")
    if getattr(args, "output", None):  # (-o: UTF-8 whatever the console's encoding; console.py)
        write_output(args.output, _pieces(produce_chunks(trace, fmt, args.all, progress=replaying), bar, red))
    elif fmt == "text" and styled_output(color):  # (a terminal, or --color always: render/terminal.py)
        console = terminal_console(color)
        blocks = produce_blocks(trace, args.all, progress=replaying)
        if bar is not None:
            bar.close()
        print_blocks(blocks, console, clean=red.text if red else None)
    else:
        for piece in _pieces(produce_chunks(trace, fmt, args.all, progress=replaying), bar, red):
            sys.stdout.write(piece)
        sys.stdout.flush()
    # a damaged trace is still reported as far as it can be read, with its own exit code
    return EXIT_BAD_TRACE if trace.warnings else 0


def holds_no_process(trace: "Trace") -> bool:
    """A trace with no traced process to report (a header alone, a run cut short before its first event): on Linux
    no audit_start nor fork; on Windows no process, no start that failed and no exit (a run whose program never ran
    has `exit` events that say so)."""
    if trace.header.platform == "linux":
        return not any(trace.of("audit_start")) and not any(trace.of("fork"))
    return not trace.pids and not trace.start_failures() and not any(trace.of("exit"))


def _triage(args: argparse.Namespace) -> int:
    """Several traces (diagnosis/triage.py, render/triage.py): each read and diagnosed once (one given again, by the
    same path, another path to the same file or another copy, is counted once and said so); one that cannot be read
    (no such file, not a trace, damaged beyond reading) is said on its line, and the others are reported all the
    same. Exit EXIT_BAD_TRACE when any was unreadable or damaged, else 0."""
    from dlltrace.api import diagnose
    from dlltrace.console import write_output
    from dlltrace.diagnosis.ending import ending
    from dlltrace.diagnosis.triage import Triaged, distinct, main_diagnosis, triage, unreadable
    from dlltrace.render.triage import triage_json, triage_markdown, triage_text
    from dlltrace.render.cuda import imported_cpu_builds
    from dlltrace.trace.reader import read_trace, warning_lines
    from dlltrace.trace.redact import redact_trace, redactor_of

    if args.all:
        raise DlltraceError("--all explains one trace's every load: give one trace with it", EXIT_USAGE)
    items: list[Triaged] = []
    damaged = False
    paths, again = distinct(args.trace)
    for path in paths:
        try:
            if not os.path.exists(path):
                raise DlltraceError(f"{path}: no such file", EXIT_USAGE)
            trace = read_trace(path)
            red = redactor_of(trace) if args.redact else None
            if red is not None:
                trace = redact_trace(trace, red)
            for line in warning_lines(trace):  # (as one trace's report says them: a damaged trace is said)
                print(red.text(line) if red else line, file=sys.stderr)
            damaged = damaged or bool(trace.warnings)
            if holds_no_process(trace):  # (as one trace's report: an error, exit 3)
                raise DlltraceError(f"{path}: the trace holds no traced process", EXIT_BAD_TRACE)
            ds = diagnose(trace)
            if trace.header.platform == "linux":
                end = next(trace.of("exit"), None)
                pid = end.get("pid") if end is not None else None
            else:
                pid = ending(trace).pid
            cpu = [f"{fw.name} {fw.version}".strip() for fw in imported_cpu_builds(trace)]
            items.append(triage(path, main_diagnosis(ds, pid if isinstance(pid, int) else None), cpu,
                                trace.warnings))
        except DlltraceError as e:
            items.append(unreadable(path, str(e).removeprefix(f"{path}: ")))
    out = triage_json(items, again) if args.json else triage_markdown(items, again) if args.markdown else \
        triage_text(items, again)
    if getattr(args, "output", None):
        write_output(args.output, out + "\n")
    else:
        print(out)
    return EXIT_BAD_TRACE if damaged or any(t.kind == "unreadable" for t in items) else 0


def _pieces(chunks: Iterator[str], bar: "Optional[ProgressBar]", red: "Optional[Redactor]") -> Iterator[str]:
    """The report's pieces as they are written (a JSON report a call at a time, never whole), each
    redacted (a piece is whole lines: no value is cut in two), then its last newline; the progress bar
    is closed once the first piece is made (the replay is done then)."""
    for i, piece in enumerate(chunks):
        if i == 0 and bar is not None:
            bar.close()
        yield red.text(piece) if red else piece
    yield "\n"


def line_styles(lines: list[str]) -> "list[LineStyle]":
    """The style of each physical line of "\n".join(lines): a line with newlines in it keeps its style on each."""
    from dlltrace.render.explained import style_of

    return [style_of(line) for line in lines for _ in line.split("\n")]
