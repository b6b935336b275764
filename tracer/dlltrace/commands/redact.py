"""`dlltrace redact TRACE -o OUT`: write a copy of a trace with the user's names, home folders and machine
names replaced (trace/redact.py, docs/redaction.md), to attach to a bug report.

The same redaction as `dlltrace report --redact`: the report of OUT is the report of TRACE with
`--redact`. OUT ending in `.gz` is written gzip (GitHub takes `.gz` attachments), else plain JSON Lines.
"""

from __future__ import annotations

import argparse
import os
import sys

from dlltrace.errors import EXIT_BAD_TRACE, EXIT_USAGE, DlltraceError


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="a trace file written by `dlltrace run` (plain or .gz)")
    p.add_argument("-o", "--output", help="the redacted trace to write (gzip when it ends in .gz; "
                                          "default: TRACE's name with .redacted.jsonl.gz)")


def execute(args: argparse.Namespace) -> int:
    from dlltrace.trace.redact import redact_trace_file, redacted_name

    if not os.path.exists(args.trace):
        raise DlltraceError(f"{args.trace}: no such file", EXIT_USAGE)
    out = args.output or redacted_name(args.trace)
    s = redact_trace_file(args.trace, out)
    for w in s.warnings[:10]:
        print(f"dlltrace: warning: {w}", file=sys.stderr)
    if len(s.warnings) > 10:
        print(f"dlltrace: warning: {len(s.warnings) - 10} more damaged lines or fields not shown", file=sys.stderr)
    # (a home folder replaced by its pattern alone, /root or /home/x/: no named value, lines changed all the same;
    # the header always changes: it says "redacted")
    kinds = ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in sorted(s.values.items())) or (
        "home folders in paths" if s.changed > 1 else "nothing to replace")
    print(f"redacted trace written to {s.output} ({s.size:,} bytes{', gzip' if s.compressed else ''}): "
          f"{kinds}; {s.changed} of {s.lines} lines changed")
    # a damaged trace is still copied as far as it can be read (its damaged lines redacted as text), with
    # report's exit code for it
    return EXIT_BAD_TRACE if s.warnings else 0
