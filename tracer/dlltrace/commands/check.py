"""`dlltrace check WHEEL|FOLDER ... [--allow cuda,cudnn,vcruntime,...]`: a CI gate. Exits 0 when every
import of every DLL of the package is bundled, Windows, an API set or an allowed external, with no
wrong machine, missing export or too-old VC++ runtime; 1 (EXIT_PROBLEMS) otherwise; 2 for a bad
argument (README, Exit codes; docs/static.md)."""

from __future__ import annotations

import argparse
import json
import sys

from dlltrace.classify import ALLOWABLE
from dlltrace.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, DlltraceError


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="WHEEL|FOLDER", help="wheels (.whl) or folders to check")
    p.add_argument("--allow", metavar="CLASSES", action="append", default=[],
                   help=f"externals a DLL may need without the package carrying them, comma-separated: "
                        f"{', '.join(ALLOWABLE)}")
    p.add_argument("--python", metavar="X.Y", default=None, help="the Python version (default: the wheel's tag)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the PE facts cache of wheel members")
    p.add_argument("--no-vc-runtime", action="store_true",
                   help="model a Windows without the Visual C++ 2015-2022 runtime (by default it is in System32, as "
                        "most machines have it: a wheel that needs msvcp140.dll and does not ship it passes)")
    p.add_argument("--all", action="store_true", help="list Windows and API-set imports in the table too")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON result (its schema: dlltrace/schemas/static-v1.json in this package)")
    out.add_argument("--quiet", "-q", action="store_true", help="print only the one-line summary per target")


def execute(args: argparse.Namespace) -> int:
    from dlltrace.diagnosis.static import check, check_targets, open_target
    from dlltrace.render.static import check_dict, check_summary, print_check

    allow = [a.strip().lower() for s in args.allow for a in s.split(",") if a.strip()]
    results = []
    for given in args.targets:
        if given.lower().endswith((".dll", ".pyd", ".exe")):
            raise DlltraceError(f"{given}: check takes a wheel or a folder (deps explains one DLL)", EXIT_USAGE)
        for t in check_targets(given):  # (a folder of wheels: each of them)
            results.append(check(open_target(t, python=args.python, use_cache=not args.no_cache,
                                             vc_runtime=not args.no_vc_runtime), allow))
    if args.json:
        doc = check_dict(results[0]) if len(results) == 1 else {
            "format": "dlltrace-static", "schema": "dlltrace-static", "version": 1, "command": "check", "ok": all(r.ok for r in results),
            "results": [check_dict(r) for r in results]}
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif args.quiet:
        for r in results:
            print(check_summary(r))
    else:
        from rich.console import Console

        console = Console(highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else 160)
        for r in results:
            print_check(r, console, all_rows=args.all)
    return EXIT_OK if all(r.ok for r in results) else EXIT_PROBLEMS
