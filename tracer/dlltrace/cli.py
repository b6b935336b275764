"""The `dlltrace` command: one module per subcommand (commands/), this file only dispatches.

    dlltrace simulate SCENARIO [--json] [-o FILE]
    dlltrace run [-o FILE] [--wine] -- CMD ...
    dlltrace report TRACE [--json | --markdown] [--redact] [--all] [-o FILE]
    dlltrace help [COMMAND]
    dlltrace --version          (and whether this install can trace: install.py)
    dlltrace CMD ...            (shorthand for `dlltrace run -- CMD ...`: a program on PATH, or a path that exists)
    dlltrace --wine PROG ...    (shorthand for `dlltrace run --wine -- PROG ...`: an .exe that exists)
A word that is neither a command nor a program is a one-line error: "did you mean" a command close to
it (exit 2), else exit 4.
"""

from __future__ import annotations

import os
import sys

from dlltrace.errors import EXIT_BAD_TRACE, EXIT_INTERNAL, EXIT_NO_COMMAND, EXIT_OUTPUT, EXIT_USAGE, DlltraceError

TYPE_CHECKING = False  # (argparse, difflib and shutil are imported where they are used: `--version` needs
if TYPE_CHECKING:      # none of them; bench/startup.py)
    import argparse
    from typing import Collection, NoReturn

# subcommand -> its help; its module is dlltrace.commands.<name> (configure_parser(parser), execute(args) -> int),
# imported when a parser is built: `dlltrace --version` imports none of them
SUBCOMMANDS = {
    "simulate": "replay a scenario file through the simulated Windows loader",
    "run": "run a command with every DLL load traced",
    "report": "explain the failed loads of a trace file",
    "redact": "write a copy of a trace with user, home and machine names replaced",
    "deps": "the import closure of a DLL, folder or wheel, resolved without running it (any OS)",
    "check": "CI gate: fail when a wheel's DLLs need what it lacks (any OS)",
    "cuda": "the CUDA stack table: driver, toolkits, cuDNN, wheels and each framework's CUDA, and their mismatches",
}

# the commands that walk import trees: run in deep.deep_call (their input argument, their exit code for a tree too deep)
DEEP = {"simulate": ("scenario", EXIT_USAGE), "report": ("trace", EXIT_BAD_TRACE), "redact": ("trace", EXIT_BAD_TRACE),
        "deps": ("target", EXIT_USAGE)}


HELP = "show help for dlltrace, or for one command"
COLOR_COMMANDS = ("run", "simulate", "report", "deps", "check", "cuda")  # the commands that print text in colour: --color
PROGRAM_EXTS = (".exe", ".com")  # what `dlltrace --wine PROG` runs (an existing file)


def build_parsers(only: Collection[str] | None = None) -> tuple[argparse.ArgumentParser,
                                                                dict[str, argparse.ArgumentParser]]:
    """The `dlltrace` parser and each command's own; with `only`, the options of those commands alone (their
    modules imported; the others are listed, not built: `dlltrace --help` imports no command module)."""
    import argparse
    import importlib

    class _Version(argparse.Action):
        """--version: the version, and whether this install can trace (install.py), computed when asked."""

        def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
            super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS,
                             help="show the version and whether this install can trace, then exit")

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            from dlltrace.install import version_text

            print(version_text())
            parser.exit(0)

    parser = argparse.ArgumentParser(
        prog="dlltrace",
        description="Find out exactly why a Windows DLL failed to load.",
        epilog="Shorthand: `dlltrace CMD ...` is `dlltrace run -- CMD ...` for a program that exists (on PATH, or "
               "a path); `dlltrace --wine PROG.exe ...` is `dlltrace run --wine -- PROG.exe ...`. "
               "`dlltrace help COMMAND` shows a command's options.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs = {}
    for name, help_text in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is not None and name not in only:
            continue
        command = importlib.import_module(f"dlltrace.commands.{name}")
        p.set_defaults(_execute=command.execute)
        command.configure_parser(p)
        if name in COLOR_COMMANDS:  # (render/terminal.py: how --color, NO_COLOR and the terminal's width combine)
            p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                           help="colour the text: auto (on a terminal, unless NO_COLOR is set), always (a pipe "
                                "too), never (no escape code at all)")
        subs[name] = p
    h = sub.add_parser("help", help=HELP, description=HELP)
    h.add_argument("topic", nargs="?", metavar="COMMAND", help="a command")
    subs["help"] = h
    return parser, subs


def build_parser() -> argparse.ArgumentParser:
    return build_parsers()[0]


def named_commands(argv: list[str]) -> set[str]:
    """The commands a command line names (the one it runs, or the one `help` is asked about): the only
    parsers main() builds. The top-level options take no value, so the first word is the command."""
    words = [a for a in argv if not a.startswith("-")]
    if words[:1] == ["help"]:
        return set(words[1:2]) & set(SUBCOMMANDS)
    return set(words[:1]) & set(SUBCOMMANDS)


def commands() -> list[str]:
    return [*SUBCOMMANDS, "help"]


def close_commands(word: str) -> list[str]:
    """The commands a mistyped word may mean (difflib), or that it begins."""
    import difflib

    low = word.lower()
    near = difflib.get_close_matches(low, commands(), n=3, cutoff=0.7)
    starts = [c for c in commands() if len(low) >= 2 and c.startswith(low) and c not in near]
    return near + starts


OPTION_WORDS = {"version": "--version", "-v": "--version", "-version": "--version"}  # words meaning an option


def did_you_mean(word: str) -> str:
    if word.lower() in OPTION_WORDS:
        return f"did you mean `dlltrace {OPTION_WORDS[word.lower()]}`?"
    near = close_commands(word)
    return "did you mean " + " or ".join(f"`dlltrace {c}`" for c in near) + "?" if near else ""


def _is_path(word: str) -> bool:
    return "/" in word or "\\" in word or os.sep in word


def is_program(word: str) -> bool:
    """A program the shorthand may run: found on PATH, or a path that exists."""
    if _is_path(word):
        return os.path.exists(word)
    import shutil

    return shutil.which(word) is not None


def is_wine_program(word: str) -> bool:
    """A program `dlltrace --wine PROG` may run: an existing .exe (or .com) file."""
    return word.lower().endswith(PROGRAM_EXTS) and os.path.isfile(word)


def take_limits(argv: list[str]) -> list[str]:
    """`dlltrace --limit NAME=N [--limit ...] COMMAND ...`: the bounds of what reading a trace may cost
    (limits.py, docs/limits.md), raised for this command (DLLTRACE_LIMITS, which its children see
    too); the rest of the command line as it was."""
    given = []
    while argv and (argv[0] == "--limit" or argv[0].startswith("--limit=")):
        if argv[0] == "--limit":
            if len(argv) < 2:
                raise DlltraceError("--limit needs NAME=N (docs/limits.md)", EXIT_USAGE)
            given.append(argv[1])
            argv = argv[2:]
        else:
            given.append(argv[0].split("=", 1)[1])
            argv = argv[1:]
    if given:
        from dlltrace.limits import parse_limits

        text = ",".join([os.environ.get("DLLTRACE_LIMITS", ""), *given]).strip(",")
        parse_limits(text)  # (a bad name or value: one line, exit 2)
        os.environ["DLLTRACE_LIMITS"] = text
    return argv


def shorthand(argv: list[str]) -> list[str]:
    """The arguments as a command line parse them: `dlltrace CMD ...` and `dlltrace --wine PROG ...`
    become `run -- ...`; a word that is neither a command nor a program is a one-line error."""
    if not argv:
        return argv
    first = argv[0]
    if first == "--wine":  # the shorthand's twin: `dlltrace --wine PROG ...`
        rest = argv[2:] if argv[1:2] == ["--"] else argv[1:]
        if not rest:
            raise DlltraceError("--wine needs a program: dlltrace --wine PROG.exe [ARG ...]", EXIT_NO_COMMAND)
        if not is_wine_program(rest[0]):
            raise DlltraceError(f"--wine {rest[0]}: no such .exe file (the shorthand runs an existing .exe; for a "
                                f"program Wine finds itself: dlltrace run --wine -- {rest[0]})", EXIT_NO_COMMAND)
        return ["run", "--wine", "--", *rest]
    if first in SUBCOMMANDS or first == "help" or (first.startswith("-") and first not in OPTION_WORDS):
        return argv
    if is_program(first):  # `dlltrace python -c "import torch"`
        return ["run", "--", *argv]
    if _is_path(first):
        raise DlltraceError(f"{first}: no such file", EXIT_NO_COMMAND)
    hint = did_you_mean(first)
    if hint:
        raise DlltraceError(f"{first}: not a command; {hint}", EXIT_USAGE)
    raise DlltraceError(f"{first}: neither a command ({', '.join(commands())}) nor a program found on PATH "
                        "(`dlltrace help`)", EXIT_NO_COMMAND)


def show_help(parser: argparse.ArgumentParser, subs: dict[str, argparse.ArgumentParser], topic: str | None) -> int:
    """`dlltrace help [COMMAND]`: the help on stdout, 0; an unknown command is a one-line error."""
    if topic is None:
        parser.print_help()
        return 0
    if topic in subs:
        subs[topic].print_help()
        return 0
    hint = did_you_mean(topic)
    raise DlltraceError(f"help: no command {topic!r}; " + (hint or f"the commands: {', '.join(commands())}"),
                        EXIT_USAGE)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # (at once: no command module, no parser; install.py reads only files and PATH)
        from dlltrace.install import version_text

        print(version_text())
        return 0
    from dlltrace.console import guarded_stdout
    from dlltrace.deep import deep_call, safe_streams

    safe_streams()  # any name and any console (deep.py, console.py): the one-line errors below too
    try:
        argv = take_limits(argv)
        argv = shorthand(argv)
    except DlltraceError as e:
        print(f"dlltrace: {e.message}", file=sys.stderr)
        return e.exit_code
    parser, subs = build_parsers(only=named_commands(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # stdout carrying JSON writes a character the console lacks as a JSON escape (console.py)
    safe_streams(json_stdout=bool(getattr(args, "json", False)) and not getattr(args, "output", None))
    try:
        with guarded_stdout():  # (stdout that cannot be written: one line, exit 5, console.StdoutError)
            if args.command == "help":
                return show_help(parser, subs, args.topic)
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
    except Exception as e:  # (never a traceback: one line, the exit code of dlltrace's own failure)
        return internal_error(e)


def stdout_unwritable() -> bool:
    """Whether what is printed cannot be written to stdout (its flush fails with anything but a reader that went
    away: ENOSPC on /dev/full or a full disk, EIO): then said as one line on stderr, True (the caller's exit 5),
    and what stdout still holds is dropped (the process ends without writing it again: end()). A stdout closed
    before the process started (`>&-`: sys.stdout is None) has nothing to write."""
    if sys.stdout is None:
        return False
    try:
        sys.stdout.flush()
        return False
    except BrokenPipeError:
        return False
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e)
        print(f"dlltrace: cannot write the output (stdout): {why}", file=sys.stderr)
        return True


def internal_error(e: Exception) -> int:
    """A failure of dlltrace's own, as one line (DLLTRACE_DEBUG=1: the traceback as well): an install that
    lacks a dependency, or a bug (named, to be reported)."""
    import os
    import traceback

    if os.environ.get("DLLTRACE_DEBUG"):
        traceback.print_exc()
    if isinstance(e, ModuleNotFoundError) and e.name:
        print(f"dlltrace: this install lacks the module {e.name} (pip install --force-reinstall dlltrace, or "
              f"pip install {e.name.split('.')[0]})", file=sys.stderr)
    else:
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {where.filename.replace(chr(92), '/').rsplit('/dlltrace/', 1)[-1]}:{where.lineno}" if where else ""
        text = " ".join(str(e).split())[:200]
        print(f"dlltrace: internal error: {type(e).__name__}{': ' + text if text else ''}{at} (a bug in dlltrace: "
              "please report it, with the trace; DLLTRACE_DEBUG=1 prints the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def entry() -> int:
    """The `dlltrace` command (console script, python -m dlltrace): main() in a process that ends
    with it, which lets the trace reader freeze what it built instead of collecting it, and the process
    freeze what is left before it exits."""
    try:
        if sys.argv[1:] == ["--version"]:
            return main()
        from dlltrace.trace.gcpause import freeze_after_pauses, freeze_before_exit

        freeze_after_pauses()
        try:
            rc = main()
        except SystemExit as e:  # (argparse's --help and its usage errors: their code, the same end)
            rc = e.code if isinstance(e.code, int) else 0 if e.code is None else _said(e.code)
        finally:
            freeze_before_exit()  # (the interpreter's exit then scans none of it: trace/gcpause.py)
    except KeyboardInterrupt:  # (Ctrl-C before main() could say it: while a command's modules are imported)
        print("dlltrace: interrupted", file=sys.stderr)
        return 130
    end(rc)


def _said(code: object) -> int:
    print(code, file=sys.stderr)  # (SystemExit's message, as the interpreter prints it: exit 1)
    return 1


def end(rc: int) -> NoReturn:
    """The `dlltrace` process's end, once main() returned `rc`: stdout and stderr flushed (stdout that cannot
    be written: one line, exit 5; a reader that went away, `| head`: rc, silently), any thread still
    running joined, the atexit functions run (temporary folders removed), then os._exit(rc): the
    interpreter's own finalization, which frees every object and module one by one, is skipped. It does
    no work of ours (every file we write is closed by then), and a race in it between a thread's last
    steps and the freeing of thread states aborted one process of a CI run as it exited ("double free or
    corruption", after the command had printed its line; CPython 3.11)."""
    import atexit
    import threading

    try:
        if rc != EXIT_OUTPUT and stdout_unwritable():
            rc = EXIT_OUTPUT
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:  # (what the interpreter's exit does first: the callbacks threading._register_atexit
            shutdown()            # holds, which wake a ThreadPoolExecutor's idle workers, then every non-daemon joined)
        else:
            for t in threading.enumerate():
                if t is not threading.main_thread() and not t.daemon:
                    t.join()
        atexit._run_exitfuncs()
    except KeyboardInterrupt:  # (Ctrl-C while it waits: the end all the same, as an interrupt, never a traceback)
        rc = 130
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # (closed before the process started: `>&-`, `2>&-`)
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # (already said, or nobody to say it to)
            pass
    os._exit(rc)
