"""`dlltrace cuda [--scenario FILE | --trace FILE] [--site-packages DIR ...] [--json | --markdown]`: the CUDA
stack table (docs/cuda.md): the NVIDIA driver, the CUDA toolkits, cuDNN, the nvidia-* wheels and each
framework's CUDA build, side by side, with every mismatch named and its fix.

Without --scenario/--trace: this machine (Windows: nvcuda.dll, CUDA_PATH*, PATH; Linux: libcuda.so,
/usr/local/cuda-*, LD_LIBRARY_PATH) and this Python's site-packages. Exits 0 with the table, mismatches
or not (a machine without an NVIDIA driver is a table that says so); 2 for a bad command line, scenario or
missing file; 3 for an unreadable trace, or a damaged one (its table is still printed, as far as the trace could
be read, and every damaged line is named on stderr, as `report` does) (README, Exit codes)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from typing import TYPE_CHECKING, Optional

from dlltrace.errors import EXIT_BAD_TRACE, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, DlltraceError

if TYPE_CHECKING:
    from dlltrace.diagnosis.cuda import CudaFacts


def configure_parser(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--scenario", metavar="FILE", help="the table of a scenario's virtual machine (a scenario file, as `dlltrace simulate` takes)")
    src.add_argument("--trace", metavar="FILE", help="the table of what a trace recorded (its PATH-like variables, the files it touched)")
    p.add_argument("--site-packages", metavar="DIR", action="append", default=None,
                   help="a site-packages folder to read the frameworks from (this machine; default: this Python's)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the documented JSON form (its schema: dlltrace/schemas/cuda-v1.json in this package)")
    fmt.add_argument("--markdown", action="store_true", help="Markdown to paste into a GitHub issue")


def facts_of_args(args: argparse.Namespace, warnings: Optional[list[str]] = None) -> "CudaFacts":
    """The facts the table is made of; with --trace, the reader's warnings about a damaged trace are added to
    `warnings` (as `dlltrace: warning: ...` lines)."""
    from dlltrace.diagnosis.cuda import LiveFacts, facts_of_scenario, facts_of_trace

    if args.scenario:
        from dlltrace.diagnosis.scenario import load_scenario

        if args.site_packages:
            raise DlltraceError("--site-packages is for this machine: a scenario's frameworks are its own files", EXIT_USAGE)
        return facts_of_scenario(load_scenario(args.scenario))
    if args.trace:
        from dlltrace.trace.reader import read_trace, warning_lines

        if args.site_packages:
            raise DlltraceError("--site-packages is for this machine: a trace's frameworks are the files it recorded", EXIT_USAGE)
        if not os.path.exists(args.trace):
            raise DlltraceError(f"{args.trace}: no such file", EXIT_USAGE)
        trace = read_trace(args.trace)
        if warnings is not None:
            warnings.extend(warning_lines(trace))
        facts = facts_of_trace(trace)
        if facts is None:
            raise DlltraceError(f"{args.trace}: the trace holds no traced process", EXIT_BAD_TRACE)
        return facts
    for d in args.site_packages or ():
        if not os.path.isdir(d):
            raise DlltraceError(f"{d}: no such folder", EXIT_USAGE)
    return LiveFacts(site_packages=args.site_packages)


def execute(args: argparse.Namespace) -> int:
    from dlltrace.diagnosis.cuda import cuda_table
    from dlltrace.render.cuda import cuda_blocks, cuda_dict, cuda_markdown, mismatch_text
    from dlltrace.render.explained import block_lines, print_blocks
    from dlltrace.render.terminal import styled_output, terminal_console

    damaged: list[str] = []
    table = cuda_table(facts_of_args(args, damaged))
    for line in damaged:  # (a damaged trace: its table as far as it could be read, then exit 3, as `report`)
        print(line, file=sys.stderr)
    if args.json:
        json.dump(cuda_dict(table), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(cuda_markdown(table))
    elif styled_output(getattr(args, "color", "auto")):  # (a terminal, or --color always: render/terminal.py)
        print_blocks(cuda_blocks(table), terminal_console(getattr(args, "color", "auto")))
    else:
        print("\n".join(block_lines(cuda_blocks(table))))
    # a stack that does not fit (an error mismatch: no driver, a CUDA major missing, ...) fails, as check does, with
    # one line on stderr saying the first (its fixes are in the table)
    errors = [m for m in table.mismatches if m.severity == "error"]
    if errors:
        print(f"dlltrace: the CUDA stack does not fit: {len(errors)} mismatch{'es' if len(errors) > 1 else ''}, "
              f"the first: {mismatch_text(errors[0], table.platform, table.gpu)}", file=sys.stderr)
    if damaged:
        return EXIT_BAD_TRACE
    if errors:
        return EXIT_PROBLEMS
    return EXIT_OK
