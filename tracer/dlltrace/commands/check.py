"""`dlltrace check WHEEL|FOLDER ... [--allow cuda,cudart64_12.dll,dist:NAME] [--exclude NAME] [--assume-installed DIST]
[--allow-pure] [--format text|json|github] [--junit-xml FILE]`: a CI gate. Exits 0 (EXIT_OK) when every import of every
binary of each package is bundled, the system's, provided by a wheel given beside it, or allowed, with no other
problem; 1 (EXIT_PROBLEMS) otherwise; 2 (EXIT_USAGE) for a bad argument or a damaged wheel; 5 (EXIT_OUTPUT) when
the --junit-xml file cannot be written (README, Exit codes; docs/static.md)."""

from __future__ import annotations

import argparse
import json
import sys

from dlltrace.classify import ALLOWABLE
from dlltrace.errors import EXIT_OK, EXIT_OUTPUT, EXIT_PROBLEMS, EXIT_USAGE, DlltraceError


def _split(values: list[str]) -> list[str]:
    return [a.strip() for s in values for a in s.replace(";", ",").split(",") if a.strip()]


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="+", metavar="WHEEL|FOLDER",
                   help="wheels (.whl) or folders to check; a DLL one of them needs may come from another given here")
    p.add_argument("--allow", metavar="WHAT", action="append", default=[],
                   help=f"what a binary may need without the package carrying it, comma-separated: a class "
                        f"({', '.join(ALLOWABLE)}), a DLL or library name (cudart64_12.dll, globs: libcuda.so.*), or "
                        f"dist:NAME (the DLLs that distribution provides)")
    p.add_argument("--exclude", metavar="NAME", action="append", default=[],
                   help="a DLL or library name (globs allowed; comma-separated, repeatable) neither required nor "
                        "reported, like auditwheel's and delvewheel's --exclude")
    p.add_argument("--assume-installed", metavar="DIST", action="append", default=[], dest="assume_installed",
                   help="a distribution the package requires (Requires-Dist) whose wheel is not given: its DLLs pass")
    p.add_argument("--allow-pure", action="store_true",
                   help="pass a wheel with no binary (by default it fails: nothing to check)")
    p.add_argument("--python", metavar="X.Y", default=None, help="the Python version (default: the wheel's tag, else the folder's extensions' tag: .cp311-win_amd64.pyd, else 3.12)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the PE facts cache (wheel members', a folder's files')")
    p.add_argument("--no-vc-runtime", action="store_true",
                   help="model a Windows without the Visual C++ 2015-2022 runtime (by default it is in System32, as "
                        "most machines have it: a wheel that needs msvcp140.dll and does not ship it passes)")
    p.add_argument("--all", action="store_true", help="list Windows and API-set imports in the table too")
    p.add_argument("--junit-xml", metavar="FILE", default=None,
                   help="also write a JUnit XML report: a testcase per binary checked, a failure per problem")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--format", choices=("text", "json", "github"), default=None,
                     help="text (default), json (as --json) or github: a GitHub Actions ::error annotation per "
                          "problem, with the file and the line of RECORD that lists it, then the summary")
    out.add_argument("--json", action="store_true", help="print the JSON result (its schema: dlltrace/schemas/static-v1.json in this package)")
    out.add_argument("--quiet", "-q", action="store_true", help="print only the one-line summary per target")


def execute(args: argparse.Namespace) -> int:
    from dlltrace.diagnosis.gate import check_paths
    from dlltrace.diagnosis.static import gate_options
    from dlltrace.render.static import check_dict, check_summary, print_check

    opts = gate_options(_split(args.allow), _split(args.exclude), _split(args.assume_installed), args.allow_pure)
    for given in args.targets:
        if given.lower().endswith((".dll", ".pyd", ".exe")):
            raise DlltraceError(f"{given}: check takes a wheel or a folder (deps explains one DLL)", EXIT_USAGE)
    # (a folder of wheels: each of them; every target given is a peer of the others)
    results = check_paths(args.targets, opts, python=args.python, use_cache=not args.no_cache,
                          vc_runtime=not args.no_vc_runtime)
    fmt = "json" if args.json else (args.format or "text")
    if args.junit_xml:
        from dlltrace.render.gate import junit_xml

        try:
            with open(args.junit_xml, "w", encoding="utf-8") as f:
                f.write(junit_xml(results))
        except OSError as exc:
            raise DlltraceError(f"--junit-xml {args.junit_xml}: cannot be written ({exc.strerror})", EXIT_OUTPUT) from None
    if fmt == "json":
        doc = check_dict(results[0]) if len(results) == 1 else {
            "format": "dlltrace-static", "schema": "dlltrace-static", "version": 1, "command": "check", "ok": all(r.ok for r in results),
            "results": [check_dict(r) for r in results]}
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif fmt == "github":
        from dlltrace.render.gate import github_annotations

        sys.stdout.write(github_annotations(results))
    elif args.quiet:
        for r in results:
            print(check_summary(r))
    else:
        from dlltrace.render.terminal import terminal_console

        console = terminal_console(getattr(args, "color", "auto"), plain_width=160)
        for r in results:
            print_check(r, console, all_rows=args.all)
    return EXIT_OK if all(r.ok for r in results) else EXIT_PROBLEMS
