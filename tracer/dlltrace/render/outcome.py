"""The outcome of a process in words (diagnosis/outcome.py): the report's first line when the answer is not
"N failed loads" (the program ran without its GPU, it died of a Python error that is not a load)."""

from __future__ import annotations

from typing import Any, Optional, get_args

from dlltrace.diagnosis.outcome import OutcomeKind, ProcessOutcome

MAX_MESSAGE = 160  # an exception's message in the headline (its whole text is the program's own stderr)
CPU_FEATURES = ("CUDA", "cuDNN", "TensorRT", "the NVIDIA driver", "NCCL")


def outcome_headline(o: ProcessOutcome) -> Optional[str]:
    """The headline of a degraded or died_of_other outcome; None for the others (their own first lines say it)."""
    if o.kind == "degraded":
        lost = ", ".join(o.lost)
        where = " (on the CPU)" if any(f in CPU_FEATURES for f in o.lost) else ""
        libs = o.lost_by[0] + (f" and {len(o.lost_by) - 1} more" if len(o.lost_by) > 1 else "")
        return f"the program ran without {lost}{where}: {libs} did not load"
    if o.kind == "died_of_other" and o.exception is not None:
        text = " ".join(o.exception.text.split())  # (one line: "The signature was\n\t() -> handle")
        if len(text) > MAX_MESSAGE:
            text = text[:MAX_MESSAGE - 1] + "…"
        return f"the program ended with {text}; no failed load explains it"
    return None


def code_line(frame: object) -> Optional[str]:
    """"  in your code: train.py:12, in main": where the user's own code made the import or call of a load (a
    py_* event's `frame`), None without one."""
    if not isinstance(frame, dict) or not isinstance(frame.get("file"), str) or not isinstance(frame.get("line"), int):
        return None
    return f"  in your code: {frame['file']}:{frame['line']}, in {frame.get('function') or '?'}"


def outcome_schema() -> dict[str, Any]:
    """The JSON Schema of outcome_dict (in result-v1.json and report-linux-v1.json; tests check both have it)."""
    null, s = {"type": "null"}, {"type": "string"}
    return {"type": "object", "additionalProperties": False,
            "required": ["kind", "code", "exception", "lost", "lost_by", "text"],
            "description": "the answer first: how the program dlltrace run started ended, and why "
                           "(diagnosis/outcome.py, docs/verdicts.md)",
            "properties": {"kind": {"enum": list(get_args(OutcomeKind))}, "code": {"type": ["integer", "null"]},
                           "exception": {"anyOf": [null, {"type": "object", "additionalProperties": False,
                                                          "required": ["type", "message"],
                                                          "properties": {"type": s, "message": s}}]},
                           "lost": {"type": "array", "items": s}, "lost_by": {"type": "array", "items": s},
                           "text": {"type": ["string", "null"],
                                    "description": "the headline of a degraded or died_of_other outcome"}}}


def outcome_dict(o: ProcessOutcome) -> dict[str, Any]:
    """The outcome in a report's JSON (result-v1.json, report-linux-v1.json: `outcome`)."""
    return {"kind": o.kind, "code": o.code,
            "exception": None if o.exception is None else {"type": o.exception.type, "message": o.exception.message},
            "lost": list(o.lost), "lost_by": list(o.lost_by), "text": outcome_headline(o)}
