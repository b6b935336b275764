"""A scenario file run through the loader model with each load explained (`dlltrace simulate`)."""

from __future__ import annotations

from dlltrace.render.calls import text_call
from dlltrace.diagnosis.scenario import load_scenario


def explain_scenario(path: str):
    """Run a scenario file; returns (scenario, results), each failed load explained."""
    scenario = load_scenario(path)
    return scenario, scenario.simulator().run(scenario.calls)


def scenario_text(scenario, results) -> str:
    """What `dlltrace simulate` prints: the description, each call explained, a count."""
    out = []
    if scenario.description:
        out.append(scenario.description)
        out.append("")
    failed = [r for r in results if r.error and r.tree is not None]
    for r in results:
        out.extend(text_call(r))
    out.append("")
    loads = [r for r in results if r.tree is not None]
    out.append(f"{len(loads)} load{'s' if len(loads) != 1 else ''} simulated, {len(failed)} failed")
    return "\n".join(out)
