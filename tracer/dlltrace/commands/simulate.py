"""`dlltrace simulate SCENARIO [--json] [-o FILE]`: run a scenario's calls through the simulated loader. Exits with 0
when every simulated load succeeded, 1 (EXIT_SIMULATED_FAILURE) when one failed (README, Exit codes).
`--example` (the README's first command) exits 0 when the built-in example fails as its [expect] says:
its load fails on purpose; 1 when it does not."""

from __future__ import annotations

import argparse
import json
import sys

from pathlib import Path

from typing import TYPE_CHECKING

from dlltrace.errors import EXIT_OK, EXIT_SIMULATED_FAILURE, EXIT_USAGE, DlltraceError

if TYPE_CHECKING:
    from dlltrace.model import CallResult
    from dlltrace.render.explained import Block

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "s1.toml"
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def _installed(path: Path) -> str:
    """A path of the installed package, for a help text (argparse formats help with %)."""
    return str(path).replace("%", "%%")


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?",
                   help="a scenario file (.toml or .json; its JSON Schema: %s; an example: %s)"
                   % (_installed(SCHEMAS / "scenario-v1.json"), _installed(EXAMPLE)))
    p.add_argument("--example", action="store_true",
                   help="simulate the built-in example (S1: cublas64_12.dll on PATH, loaded by a Python extension)")
    p.add_argument("--json", action="store_true",
                   help="print the documented JSON result (its JSON Schema: %s)" % _installed(SCHEMAS / "result-v1.json"))
    p.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE, in UTF-8, instead of printing it")


def execute(args: argparse.Namespace) -> int:
    from dlltrace.console import write_output
    from dlltrace.render.calls import results_dict
    from dlltrace.render.explained import block_lines, print_blocks
    from dlltrace.render.scenario import explain_scenario
    from dlltrace.render.terminal import styled_output, terminal_console

    if args.example:
        args.scenario = str(EXAMPLE)
    elif not args.scenario:
        raise DlltraceError("simulate needs a scenario file (or --example)", EXIT_USAGE)
    scenario, results = explain_scenario(args.scenario)
    code = example_code(scenario.expect, results) if args.example else exit_code(results)
    output = getattr(args, "output", None)
    if args.json:
        doc = results_dict(results, kind="simulate", source=args.scenario, description=scenario.description)
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        if output:
            write_output(output, text)
        else:  # (on a console without UTF, a character it lacks is a JSON escape: console.py)
            sys.stdout.write(text)
        return code
    blocks = scenario_blocks(scenario.description, results)
    if output:  # (-o: UTF-8 whatever the console's encoding)
        write_output(output, "\n".join(block_lines(blocks)) + "\n")
    elif styled_output(getattr(args, "color", "auto")):  # (a terminal, or --color always: render/terminal.py)
        print_blocks(blocks, terminal_console(getattr(args, "color", "auto")))
    else:
        print("\n".join(block_lines(blocks)))
    return code


def example_code(expect: dict, results: "list[CallResult]") -> int:
    """The built-in example's code: 0 when its first failed load fails as its [expect] says (error and
    leaf), else 1 (EXIT_SIMULATED_FAILURE)."""
    failed = next((r for r in results if r.error and r.tree is not None), None)
    ok = (failed is not None and failed.error == expect.get("error") and failed.leaf is not None
          and failed.leaf.name.lower() == str(expect.get("leaf", "")).lower())
    return EXIT_OK if ok else EXIT_SIMULATED_FAILURE


def exit_code(results: "list[CallResult]") -> int:
    """1 when a simulated call failed (a load, or any other call with an error), else 0."""
    return EXIT_SIMULATED_FAILURE if any(r.error for r in results) else EXIT_OK


def scenario_blocks(description: str, results: "list[CallResult]") -> "list[Block]":
    """What `dlltrace simulate` prints: the description, each call explained (explained.call_blocks: the
    words `dlltrace report` gives the same call), a count."""
    from dlltrace.render.explained import Styled, call_blocks, from_result

    out: "list[Block]" = []
    if description:
        out += [Styled(description, "heading"), Styled("", "")]
    for r in results:
        out.extend(call_blocks(from_result(r)))
    loads = [r for r in results if r.tree is not None]
    failed = [r for r in loads if r.error]
    out += [Styled("", ""), Styled(f"{len(loads)} load{'s' if len(loads) != 1 else ''} simulated, {len(failed)} failed", "")]
    return out
