"""The `dlltrace` command: one module per subcommand (commands/), this file only dispatches.

    dlltrace simulate SCENARIO [--json]
    dlltrace run [-o FILE] [--wine] -- CMD ...
    dlltrace report TRACE [--json | --markdown] [--redact] [--all]
    dlltrace CMD ...            (shorthand for `dlltrace run -- CMD ...`)
"""

from __future__ import annotations

import argparse
import sys

from dlltrace import __version__
from dlltrace.commands import check, cuda, deps, redact, report, run, simulate
from dlltrace.deep import deep_call, safe_streams
from dlltrace.errors import EXIT_BAD_TRACE, EXIT_USAGE, DlltraceError

# subcommand -> (its module: configure_parser(parser), execute(args) -> int; its help)
SUBCOMMANDS = {
    "simulate": (simulate, "replay a scenario file through the simulated Windows loader"),
    "run": (run, "run a command with every DLL load traced"),
    "report": (report, "explain the failed loads of a trace file"),
    "redact": (redact, "write a copy of a trace with user, home and machine names replaced"),
    "deps": (deps, "the import closure of a DLL, folder or wheel, resolved without running it (any OS)"),
    "check": (check, "CI gate: fail when a wheel's DLLs need what it lacks (any OS)"),
    "cuda": (cuda, "the CUDA stack table: driver, toolkits, cuDNN, wheels and each framework's CUDA, and their mismatches"),
}

# the commands that walk import trees: run in deep.deep_call (their input argument, their exit code for a tree too deep)
DEEP = {"simulate": ("scenario", EXIT_USAGE), "report": ("trace", EXIT_BAD_TRACE), "redact": ("trace", EXIT_BAD_TRACE),
        "deps": ("target", EXIT_USAGE)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlltrace",
        description="Find out exactly why a Windows DLL failed to load.",
        epilog="Shorthand: `dlltrace CMD ...` is `dlltrace run -- CMD ...`.",
    )
    parser.add_argument("--version", action="version", version=f"dlltrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (command, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_execute=command.execute)
        command.configure_parser(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `dlltrace python -c "import torch"`: anything that is not a subcommand or an option is a command to run.
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["run", "--", *argv]
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    safe_streams()  # a lone surrogate in a name prints as its escape (deep.py)
    try:
        if args.command in DEEP:  # import trees of any depth, a too-deep one as one line (deep.py)
            where = getattr(args, DEEP[args.command][0], None) or ""
            return deep_call(args._execute, args, where=where, exit_code=DEEP[args.command][1])
        return args._execute(args)
    except DlltraceError as e:
        print(f"dlltrace: {e.message}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("dlltrace: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def entry() -> int:
    """The `dlltrace` command (console script, python -m dlltrace): main() in a process that ends
    with it, which lets the trace reader freeze what it built instead of collecting it."""
    from dlltrace.trace.reader import freeze_after_pauses

    freeze_after_pauses()
    return main()
