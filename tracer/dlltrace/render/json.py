"""The report as the documented JSON document (`dlltrace report TRACE --json`, docs/json-output.md)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Sequence

from dlltrace.diagnosis.analysis import (Incident, api_set_source, main_gone, main_outcome, main_unfound, main_unstarted,
                                         not_installed_files,
                                         wine_only_dlls, wine_stub_bindings)
from dlltrace.model import ERROR_PROC_NOT_FOUND
from dlltrace.render.outcome import outcome_dict
from dlltrace.trace.capped import capped, capped_dict
from dlltrace.diagnosis.ending import code_name, ending, ending_line
from dlltrace.render.outcome import untraced_line
from dlltrace.render.calls import call_dict, fix_dict
from dlltrace.render.text import environment_line
from dlltrace.diagnosis.verdict import verdict_dict
from dlltrace.trace.reader import Trace
from dlltrace.diagnosis.replay import Replayed


CALLS = "calls"  # the key of the document's one long list (json_chunks writes it an item at a time)


def json_report(trace: Trace, incs: list[Incident], replays: Sequence[Replayed]) -> dict[str, Any]:
    """The document, whole (json_report_chunks writes the same text without holding it)."""
    doc = json_report_head(trace, incs, replays)
    doc[CALLS] = list(call_dicts(incs))
    return doc


def call_dicts(incs: list[Incident]) -> Iterator[dict[str, Any]]:
    """The document's `calls`: each attempt of each incident, made when asked for."""
    for inc in incs:
        for a in inc.attempts:
            d = call_dict(a.result)
            d.update({"real_error": a.real_error, "pid": a.load.pid, "real_probes": a.real_probes,
                      "agreed": a.agreed, "disagreements": a.disagreements,
                      "differences": [x.to_dict() for x in a.differences],
                      "verdict": verdict_dict(inc.verdict) if inc.verdict else None})
            if inc.went_on and "fixes" in d:
                d["fixes"] = []  # fixes only for a failure the program hit
            yield d


def json_report_head(trace: Trace, incs: list[Incident], replays: Sequence[Replayed] = ()) -> dict[str, Any]:
    """The document with its `calls` left out (its place kept: None), from the incidents' typed fields; `replays`:
    the replayed loads, where the imports Wine bound to a stub are (wine_stubs)."""
    failed: list[int] = []
    went_on: list[int] = []
    error = 0
    for inc in incs:
        for a in inc.attempts:
            if inc.real_failure:
                if not failed:
                    error = a.real_error or a.result.error
                failed.append(a.result.index)
            elif inc.went_on:
                went_on.append(a.result.index)
    outcome = main_outcome(trace, incs)
    unfound = main_unfound(trace, outcome)
    unstarted = main_unstarted(trace, outcome) if unfound is None else None
    gone = main_gone(trace, outcome, bool(failed)) if unfound is None and unstarted is None else None
    return {"format": "dlltrace-report", "version": 1,
            "outcome": outcome_dict(outcome, None, unfound, unstarted, gone),
            "source": trace.path, "description": environment_line(trace),
            "error": error, "failed": failed, "went_on": went_on,
            "api_sets": api_set_source(trace), CALLS: None, "warnings": list(trace.warnings),
            "ending": ending_dict(trace, bool(failed) or (gone is not None and gone.how == "listed")),
            "capped": capped_dict(capped(trace)),
            "wine_stubs": [{"pid": b.load.load.pid, "seq": b.load.load.seq, "api": b.load.load.api,
                            "name": b.load.load.name, "origin": b.load.origin, "importer": b.importer, "dll": b.dll,
                            "function": b.function, "called": b.called, "error_on_windows": ERROR_PROC_NOT_FOUND}
                           for b in wine_stub_bindings(trace, replays)],
            "wine_own": [{"pid": w.load.load.pid, "seq": w.load.load.seq, "api": w.load.load.api, "name": w.load.load.name,
                          "origin": w.load.origin, "importer": w.importer, "path": w.path, "class": w.klass,
                          "reinstall": fix_dict(w.reinstall) if w.reinstall is not None else None}
                         for w in wine_only_dlls(trace, replays)],
            "not_installed": [{"pid": x.load.load.pid, "seq": x.load.load.seq, "api": x.load.load.api,
                               "name": x.load.load.name, "origin": x.load.origin, "path": x.path,
                               "reinstall": fix_dict(x.reinstall)} for x in not_installed_files(trace, replays)]}


def json_chunks(doc: dict[str, Any], calls: Iterable[dict[str, Any]]) -> Iterator[str]:
    """json.dumps({**doc, "calls": list(calls)}, indent=2, ensure_ascii=False), the same text in
    pieces: a report of thousands of failed loads is written a call at a time, never held whole
    (issue 10 item 7: bench/report_memory.py)."""
    def dumps(v: Any, indent: str) -> str:
        # (a JSON text holds no raw newline: each of its newlines starts a line to indent)
        return json.dumps(v, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)

    yield "{"
    for i, (k, v) in enumerate(doc.items()):
        key = json.dumps({k: 0}, ensure_ascii=False)[1:-4]  # (a key as json writes one: 1 -> "1", None -> "null")
        yield ("," if i else "") + "\n  " + key + ": "
        if k != CALLS:
            yield dumps(v, "  ")
            continue
        n = 0
        for call in calls:
            yield ("," if n else "[") + "\n    " + dumps(call, "    ")
            n += 1
        yield "\n  ]" if n else "[]"
    yield "\n}" if doc else "}"


def ending_dict(trace: Trace, explained: bool) -> dict[str, Any]:
    """How the program ended (diagnosis/ending.py): its kind, its full exit code and the code's name, the
    signal `dlltrace run` passed on, and the sentence the text report gives ("" for a plain exit)."""
    e = ending(trace)
    untraced = untraced_line(trace, e)  # (the program ran untraced: said, never an empty ending)
    return {"kind": e.kind, "code": e.code, "code_name": code_name(e.code) if e.code is not None else None,
            "signal": e.signal, "text": untraced if untraced is not None else ending_line(e, explained)}
