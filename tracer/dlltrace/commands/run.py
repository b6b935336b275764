"""`dlltrace run [-o FILE] [--wine] -- CMD ...`: run a command with every DLL load traced.

The command runs under the native launcher (trace/launch.py, bin/dlltrace_launch64.exe), which starts
it with the shim in place (and in a job object: it ends when the launcher does); stdin/stdout/stderr are
the caller's. The exit code is the child's when it exited or crashed (its low 8 bits under Wine), else
dlltrace's for how it ended: never ran, killed, Ctrl-C (README, Exit codes; trace/launch.py:
run_exit_code). The summary says how it ended (report/ending.py). The trace file gets a header line
here, then the shim's events (docs/trace-format.md).
`--wine` runs a Windows program under wine64. On Windows a Python child also gets the bootstrap
(tracer/dlltrace/bootstrap) on PYTHONPATH, which adds Python context events. Tracing native Linux
programs is not supported.
"""

from __future__ import annotations

import argparse
import sys

from dlltrace.errors import EXIT_NO_COMMAND, DlltraceError
from dlltrace.report.summary import summarize
from dlltrace.trace.launch import trace_command

USAGE = "usage: dlltrace run [-o FILE] [--wine] -- CMD [ARGS...]"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="trace file to write (default: dlltrace-<cmd>-YYYYMMDD-HHMMSS.jsonl)")
    parser.add_argument("--wine", action="store_true", help="run a Windows program under wine64")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to trace")


def command_of(args: argparse.Namespace) -> list[str]:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise DlltraceError(f"run: no command given ({USAGE})", EXIT_NO_COMMAND)
    return cmd


def execute(args: argparse.Namespace) -> int:
    rc, trace = trace_command(command_of(args), args.output, args.wine)
    print(summarize(trace), file=sys.stderr)  # it says where the trace was saved
    return rc
