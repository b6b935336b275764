"""`dlltrace deps TARGET`: the import closure of a .dll/.pyd/.exe, a folder or a wheel, resolved by the
simulated loader in a static world (static.py, worlds/static.py), without running anything. Exits 0
when every load resolves, 1 (EXIT_PROBLEMS) when one would fail (README, Exit codes)."""

from __future__ import annotations

import argparse
import json
import sys

from dlltrace.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, DlltraceError
from dlltrace.report.static import deps_dict, deps_markdown, print_deps
from dlltrace.static import deps, open_target
from dlltrace import winpath


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="a .dll, .pyd or .exe, a folder (a package or site-packages) or a .whl")
    p.add_argument("--only", metavar="NAME", action="append", default=[],
                   help="in a folder or wheel, load only this file (a name or a path inside it; repeatable)")
    p.add_argument("--flags", type=lambda s: int(s, 0), default=None,
                   help="load with LoadLibraryExW(target, FLAGS) instead of the default context (.pyd: a Python "
                        "extension import, 0x1100; .dll: ctypes.CDLL; .exe: a process start)")
    p.add_argument("--python", metavar="X.Y", default=None,
                   help="the Python version (default: the wheel's tag, else 3.12)")
    p.add_argument("--path", metavar="FOLDER", action="append", default=[],
                   help="a PATH entry in front of the default PATH (a Windows path, or a folder inside the target)")
    p.add_argument("--add-dll-directory", metavar="FOLDER", action="append", default=[], dest="dll_dirs",
                   help="an os.add_dll_directory folder made before the load (a Windows path, or a folder inside the target)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the PE facts cache of wheel members")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON result (its schema: dlltrace/schemas/static-v1.json in this package)")
    out.add_argument("--markdown", action="store_true", help="print Markdown")


def execute(args: argparse.Namespace) -> int:
    if args.python is not None and not _python_ok(args.python):
        raise DlltraceError(f"--python {args.python}: give a version like 3.11", EXIT_USAGE)
    target = open_target(args.target, python=args.python, use_cache=not args.no_cache)
    focus: list[str] = []
    if args.only:
        for o in args.only:
            want = o.replace("/", "\\").lower()
            hits = [f.path for f in target.files
                    if winpath.key(f.path).endswith("\\" + want) or winpath.basename(f.path).lower() == want]
            if not hits:
                raise DlltraceError(f"--only {o}: no such file in {args.target}", EXIT_USAGE)
            focus.extend(hits)
    result = deps(target, flags=args.flags, extra_path=args.path, dll_dirs=args.dll_dirs, only=focus or None)
    if args.json:
        json.dump(deps_dict(result), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(deps_markdown(result))
    else:
        from rich.console import Console

        print_deps(result, Console(highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else 160))
    return EXIT_PROBLEMS if result.problems else EXIT_OK


def _python_ok(v: str) -> bool:
    parts = v.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)
