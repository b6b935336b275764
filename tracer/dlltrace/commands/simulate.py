"""`dlltrace simulate SCENARIO [--json]`: run a scenario's calls through the simulated loader."""

from __future__ import annotations

import argparse
import json
import sys

from pathlib import Path

from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.report.render import results_dict
from dlltrace.report.scenario import explain_scenario, scenario_text

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "s1.toml"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", help="a scenario file (.toml or .json; see docs/scenarios.md)")
    p.add_argument("--example", action="store_true",
                   help="simulate the built-in example (S1: cublas64_12.dll on PATH, loaded by a Python extension)")
    p.add_argument("--json", action="store_true", help="print the documented JSON result (docs/json-output.md)")


def execute(args: argparse.Namespace) -> int:
    if args.example:
        args.scenario = str(EXAMPLE)
    elif not args.scenario:
        raise DlltraceError("simulate needs a scenario file (or --example)", EXIT_USAGE)
    scenario, results = explain_scenario(args.scenario)
    if args.json:
        doc = results_dict(results, kind="simulate", source=args.scenario, description=scenario.description)
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print(scenario_text(scenario, results))
    return 0
