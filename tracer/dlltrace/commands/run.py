"""`dlltrace run [-o FILE] [--wine] [--redact] [--max-size SIZE] -- CMD ...`: run a command with every DLL
load traced.

The command runs under the native launcher (trace/launch.py, bin/dlltrace_launch64.exe), which starts
it with the shim in place (and in a job object: it ends when the launcher does); stdin/stdout/stderr are
the caller's. The exit code is the child's when it exited or crashed (its low 8 bits under Wine), else
dlltrace's for how it ended: never ran, killed, Ctrl-C (README, Exit codes; runner.py:
run_exit_code). The summary says how it ended (diagnosis/ending.py). The trace file gets a header line
here, then the shim's events (docs/trace-format.md): compressed (.jsonl.gz) unless -o names a plain
file, capped at --max-size (what is dropped past it is counted and reported), redacted with --redact.
`--wine` runs a Windows program under wine64. On Windows a Python child also gets the bootstrap
(tracer/dlltrace/bootstrap) on PYTHONPATH, which adds Python context events. Tracing native Linux
programs is not supported.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from dlltrace.errors import EXIT_NO_COMMAND, EXIT_USAGE, DlltraceError
from dlltrace.trace.where import DEFAULT_MAX_SIZE, MIN_MAX_SIZE

USAGE = "usage: dlltrace run [-o FILE] [--wine] [--redact] [--max-size SIZE] -- CMD [ARGS...]"
UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """--max-size: bytes, or with a unit (K, M, G, T: powers of 1024; KB, MiB... mean the same); 0 or
    "none": no cap."""
    t = text.strip().lower()
    if t in ("0", "none", "off"):
        return 0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", t)
    if not m:
        raise DlltraceError(f"run: --max-size {text!r}: not a size (e.g. 500M, 2G, or 0 for no cap)", EXIT_USAGE)
    size = int(float(m.group(1)) * UNITS[m.group(2)])
    if size < MIN_MAX_SIZE:
        raise DlltraceError(f"run: --max-size {text!r}: too small (at least {MIN_MAX_SIZE // 1024}K)", EXIT_USAGE)
    return size


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="trace file to write (default: dlltrace-<cmd>-YYYYMMDD-HHMMSS.jsonl.gz, compressed; "
                             "a name without .gz is written as plain JSON Lines)")
    parser.add_argument("--wine", action="store_true", help="run a Windows program under wine64")
    parser.add_argument("--redact", action="store_true",
                        help="write the trace with user, home-folder and machine names replaced (as `dlltrace "
                             "redact` does), ready to attach to a bug report")
    parser.add_argument("--max-size", metavar="SIZE", default=None,
                        help=f"cap the trace at SIZE before compression (default {DEFAULT_MAX_SIZE >> 30}G; 0: no "
                             "cap); what is dropped past it is counted and reported")
    parser.add_argument("--no-cache", action="store_true",
                        help="read every DLL's facts again: do not read or write the PE facts kept between runs "
                             "(by each file's identity, in ~/.cache/dlltrace/pe-facts)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to trace")


def command_of(args: argparse.Namespace) -> list[str]:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise DlltraceError(f"run: no command given ({USAGE})", EXIT_NO_COMMAND)
    return cmd


def import_what_follows() -> None:
    """The modules that follow the program (the facts, the summary: ~0.1-0.3 s of imports), imported
    while it runs under the launcher (launch.run_traced's while_running) rather than after it ended."""
    import dlltrace.runner  # noqa: F401
    import dlltrace.trace.reader  # noqa: F401  (the trace read back)
    import dlltrace.diagnosis.collect  # noqa: F401  (the facts: runner.append_facts)
    import dlltrace.render.runsummary  # noqa: F401  (the summary)
    import dlltrace.render.terminal  # noqa: F401


def _import_linux_renderer() -> None:
    import dlltrace.render.linux  # noqa: F401


def execute(args: argparse.Namespace) -> int:
    cmd = command_of(args)
    cap = DEFAULT_MAX_SIZE if args.max_size is None else parse_size(args.max_size)
    if args.max_size is not None and not args.wine and sys.platform.startswith("linux"):
        print("dlltrace: warning: --max-size is not enforced on Linux yet (the LD_AUDIT recorder has no cap)",
              file=sys.stderr)
    if args.wine or not sys.platform.startswith("linux"):  # the launcher (the choice of runner.uses_launcher)
        # is started first: the rest is imported while the program runs
        from dlltrace.trace.launch import run_traced

        launched = run_traced(cmd, args.output, args.wine, cap, while_running=import_what_follows)
        from dlltrace.runner import finish_launched

        rc, trace = finish_launched(launched, use_cache=not args.no_cache)
    else:
        from dlltrace.runner import trace_command

        # (the summary's renderer is imported while a Linux program runs: runner.LinuxFactsMeanwhile)
        rc, trace = trace_command(cmd, args.output, args.wine, max_size=cap, warm=_import_linux_renderer)
    from dlltrace.render.terminal import styled_output, terminal_console

    if args.redact:  # (the summary is then the report of the redacted trace)
        from dlltrace.trace.redact import redact_in_place
        from dlltrace.trace.reader import read_trace

        trace = read_trace(redact_in_place(Path(trace.path)))
    note = _cpu_build_note(trace)  # (a CPU-only build of a GPU framework it imported: said after the summary)
    if trace.header.platform == "linux":
        from dlltrace.render.linux import linux_text

        text, color = linux_text(trace, saved=True, note=note), getattr(args, "color", "auto")
        if styled_output(color, sys.stderr):  # (a terminal: wrapped to its width, render/wrap.py)
            from dlltrace.render.wrap import wrap_plain

            text = wrap_plain(text, terminal_console(color, sys.stderr).width)
        print(text, file=sys.stderr)
    elif styled_output(getattr(args, "color", "auto"), sys.stderr):  # (a terminal: wrapped, in colour; render/terminal.py)
        from dlltrace.render.explained import print_blocks
        from dlltrace.render.runsummary import summary_blocks

        sys.stdout.flush()
        print_blocks(summary_blocks(trace), terminal_console(getattr(args, "color", "auto"), sys.stderr))
        if note:
            print("\n" + note, file=sys.stderr)
    else:
        from dlltrace.render.runsummary import summarize

        print(summarize(trace) + ("\n\n" + note if note else ""), file=sys.stderr)  # it says where the trace was saved
    return rc


def _cpu_build_note(trace) -> str:
    """The words of the CPU-only builds of GPU frameworks the program imported (render/cuda.py cpu_build_text), ""
    for none; the CUDA renderer (~0.05 s of imports) only for a program that imported such a framework at all."""
    from dlltrace.diagnosis.outcome import imports_a_cpu_build_framework

    if not imports_a_cpu_build_framework(e.get("module") for e in trace.of("py_import")):
        return ""
    from dlltrace.render.cuda import cpu_build_text, imported_cpu_builds

    return cpu_build_text(imported_cpu_builds(trace), trace.header.platform)
