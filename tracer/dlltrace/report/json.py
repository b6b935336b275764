"""The report as the documented JSON document (`dlltrace report TRACE --json`, docs/json-output.md)."""

from __future__ import annotations

from typing import Any, Sequence

from dlltrace.report.analysis import Incident, api_set_source
from dlltrace.report.capped import capped, capped_dict
from dlltrace.report.ending import code_name, ending, ending_line
from dlltrace.report.render import call_dict
from dlltrace.report.text import environment_line
from dlltrace.report.verdict import verdict_dict
from dlltrace.trace.reader import Trace
from dlltrace.trace.replay import Replayed


def json_report(trace: Trace, incs: list[Incident], replays: Sequence[Replayed]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    went_on: list[dict[str, Any]] = []
    for inc in incs:
        for a in inc.attempts:
            d = call_dict(a.result)
            d.update({"real_error": a.real_error, "pid": a.load.pid, "real_probes": a.real_probes,
                      "agreed": a.agreed, "disagreements": a.disagreements,
                      "differences": [x.to_dict() for x in a.differences],
                      "verdict": verdict_dict(inc.verdict) if inc.verdict else None})
            if inc.went_on and "fixes" in d:
                d["fixes"] = []  # fixes only for a failure the program hit
            (failed if inc.real_failure else went_on if inc.went_on else []).append(d)
            calls.append(d)
    return {"format": "dlltrace-report", "version": 1, "source": trace.path, "description": environment_line(trace),
            "error": (failed[0].get("real_error") or failed[0]["error"]) if failed else 0,
            "failed": [c["index"] for c in failed], "went_on": [c["index"] for c in went_on],
            "api_sets": api_set_source(trace), "calls": calls, "warnings": list(trace.warnings),
            "ending": ending_dict(trace, bool(failed)), "capped": capped_dict(capped(trace))}


def ending_dict(trace: Trace, explained: bool) -> dict[str, Any]:
    """How the program ended (report/ending.py): its kind, its full exit code and the code's name, the
    signal `dlltrace run` passed on, and the sentence the text report gives ("" for a plain exit)."""
    e = ending(trace)
    return {"kind": e.kind, "code": e.code, "code_name": code_name(e.code) if e.code is not None else None,
            "signal": e.signal, "text": ending_line(e, explained)}
