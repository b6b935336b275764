"""A scenario file run through the loader model with each load explained (`dlltrace simulate`)."""

from __future__ import annotations

from dlltrace.report.explain import not_searched_note
from dlltrace.report.render import text_call
from dlltrace.scenario import load_scenario


def explain_scenario(path: str):
    """Run a scenario file; returns (scenario, results, not-searched notes by call index)."""
    scenario = load_scenario(path)
    sim = scenario.simulator()
    notes: dict[int, str] = {}
    process = sim.process
    sim.observers.append(lambda r: notes.__setitem__(r.index, not_searched_note(r, process)))
    return scenario, sim.run(scenario.calls), notes


def scenario_text(scenario, results, notes: dict[int, str]) -> str:
    """What `dlltrace simulate` prints: the description, each call explained, a count."""
    out = []
    if scenario.description:
        out.append(scenario.description)
        out.append("")
    failed = [r for r in results if r.error and r.tree is not None]
    for r in results:
        out.extend(text_call(r, not_searched=notes.get(r.index, "")))
    out.append("")
    loads = [r for r in results if r.tree is not None]
    out.append(f"{len(loads)} load{'s' if len(loads) != 1 else ''} simulated, {len(failed)} failed")
    return "\n".join(out)
