"""A scenario file run through the loader model with each load explained (`dlltrace simulate`)."""

from __future__ import annotations

from dlltrace.report.explain import not_searched_note
from dlltrace.scenario import load_scenario


def explain_scenario(path: str):
    """Run a scenario file; returns (scenario, results, not-searched notes by call index)."""
    scenario = load_scenario(path)
    sim = scenario.simulator()
    notes: dict[int, str] = {}
    process = sim.process
    sim.observers.append(lambda r: notes.__setitem__(r.index, not_searched_note(r, process)))
    return scenario, sim.run(scenario.calls), notes
