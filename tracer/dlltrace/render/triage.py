"""Many traces in words (`dlltrace report A B C ...`, diagnosis/triage.py): how many ended which way, then each
failure with the traces that report it, the most traces first, with the first trace's fix; then a line per trace:
how it ended and what failed. Text, Markdown and JSON."""

from __future__ import annotations

import json
from typing import Any, Sequence, get_args

from dlltrace.diagnosis.triage import Culprit, Triaged, groups
from dlltrace.render.diagnosis import headline_of
from dlltrace.render.escape import escape_code_span, escape_prose, escape_table_cell, escape_terminal
from dlltrace.render.explained import as_typed
from dlltrace.render.fixwords import fix_lines, fix_markdown, fix_text, steps_said_after
from dlltrace.render.outcome import gone_words, unstarted_words

# how each kind of end is counted in the first line
KIND_WORDS = {"died_of_load": "died of a load", "died_of_other": "died of a Python error", "degraded":
              "ran without a feature", "crashed": "crashed", "ok": "ran without a fault", "unreadable":
              "could not be read", "exited": "exited with an error", "killed": "killed",
              "interrupted": "interrupted", "could_not_start": "could not start", "never_ran": "never ran",
              "not_windows": "ran no Windows program", "not_traced": "ran untraced",
              "unknown": "with no end in the trace"}
# how a trace nothing explains ended, in a group's words (the culprit "end": its cause is the outcome's kind)
END_WORDS = {"killed": "was killed", "interrupted": "was interrupted", "could_not_start": "could not start",
             "never_ran": "never ran", "not_windows": "ran no Windows program", "not_traced": "ran untraced, or no "
             "process was traced", "unknown": "the trace does not say how the program ended (cut short?)"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def counts_line(items: Sequence[Triaged]) -> str:
    """"5 traces: 3 died of a load, 1 ran without a feature, 1 could not be read"."""
    kinds: dict[str, int] = {}
    for t in items:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    parts = [f"{n} {KIND_WORDS.get(k, k.replace('_', ' '))}" for k, n in sorted(kinds.items(), key=lambda x: -x[1])]
    return f"{_plural(len(items), 'trace')}: {', '.join(parts)}"


def failure_words(t: Triaged) -> str:
    """What one group's traces report, in a few words (the report's own words for it)."""
    m = t.main
    if t.culprit == "load" and m is not None and m.fatal is not None:
        return headline_of(m, m.fatal)[2:]
    if t.culprit == "gone" and m is not None and m.gone is not None:
        return gone_words(m.gone)
    if t.culprit == "unstarted" and m is not None and m.unstarted is not None:
        return unstarted_words(m.unstarted)
    if t.culprit == "unfound":
        return f"ctypes.util.find_library({t.name!r}) found no such library"
    if t.culprit == "lost":
        return f"ran without {', '.join(m.outcome.lost) if m is not None else t.name}: {t.name} did not load"
    if t.culprit == "cpu_build":
        return f"{t.name} is a CPU-only build: it never loads CUDA, so the program ran on the CPU"
    if t.culprit == "crash":
        return "crashed, and no failed load explains it"
    if t.culprit == "exception":
        return f"ended with {t.name}, and no failed load explains it"
    if t.culprit == "end" and t.cause == "exited":
        return f"exited with {t.name or 'an error'}, and no failed load explains it"
    if t.culprit == "end":
        return END_WORDS.get(t.cause, t.cause.replace("_", " "))
    if t.culprit == "unreadable":
        return "could not be read"
    return "nothing failed"


def trace_words(t: Triaged) -> str:
    """"died of a load: c10.dll was not found": how a trace's program ended, and what failed; a damaged trace's
    says so (its first warning: what the rest is said of is only what could be read)."""
    if t.culprit == "unreadable":
        return f"could not be read: {t.error}"
    first = t.warnings[0].removeprefix(f"{t.source}: ") if t.warnings else ""
    damaged = "" if not t.warnings else f" (a damaged trace: {first}" + (
        f", and {_plural(len(t.warnings) - 1, 'more warning')}" if len(t.warnings) > 1 else "") + ")"
    if t.culprit == "none":
        return KIND_WORDS.get(t.kind, t.kind.replace("_", " ")) + damaged
    if t.culprit in ("end", "exception"):  # (its words say how it ended: "ended with RuntimeError, ...")
        return failure_words(t) + damaged
    return f"{KIND_WORDS.get(t.kind, t.kind.replace('_', ' '))}: {failure_words(t)}{damaged}"


def triage_text(items: Sequence[Triaged]) -> str:
    """The text of many traces."""
    out = [f"dlltrace ─ {counts_line(items)}", "", "What failed, the most traces first:"]
    for g in groups(items):
        t = g[0]
        out += ["", f"  {_plural(len(g), 'trace')}  {escape_terminal(failure_words(t))}"]
        if t.fix is not None:  # (each report's own fix names its own paths: the first trace's is shown)
            lead = "    Fix: " if len(g) == 1 else f"    Fix, as {escape_terminal(t.source)}'s report gives it: "
            out += [(lead if i == 0 else " " * 6) + escape_terminal(text) for i, (text, _) in enumerate(fix_lines(t.fix))]
            for step in steps_said_after(t.fix):  # (its steps: pyusb's pip install libusb-package is nothing without PATH's)
                out += [("      then: " if i == 0 else " " * 12) + escape_terminal(text)
                        for i, (text, _) in enumerate(fix_lines(step))]
        for x in g:
            out.append(f"    {escape_terminal(x.source)}" + (f"  ({escape_terminal(x.error)})" if x.error else ""))
    width = max(len(escape_terminal(t.source)) for t in items)
    out += ["", "Each trace:"]
    out += [f"  {escape_terminal(t.source).ljust(width)}  {escape_terminal(trace_words(t))}" for t in items]
    return "\n".join(out)


def triage_markdown(items: Sequence[Triaged]) -> str:
    """The same as Markdown: the count, then a table of the failures (traces, what failed, the first fix), then a
    table of the traces."""
    out = [f"**dlltrace:** {escape_prose(counts_line(items))}.", "", "| traces | what failed | fix (the first trace's) |",
           "|---:|---|---|"]
    for g in groups(items):
        t = g[0]
        fix = _cell(" then: ".join(fix_markdown(x, as_typed) for x in (t.fix, *steps_said_after(t.fix)))) if t.fix is not None else ""
        names = _cell(", ".join(escape_code_span(x.source) for x in g))
        out.append(f"| {len(g)} | {_cell(escape_prose(failure_words(t)))}<br>{names} | {fix} |")
    out += ["", "| trace | how it ended, and what failed |", "|---|---|"]
    out += [f"| {_cell(escape_code_span(t.source))} | {_cell(escape_prose(trace_words(t)))} |" for t in items]
    return "\n".join(out)


def _cell(markdown: str) -> str:
    """Inline Markdown in a table's cell (escape.escape_table_cell), on one line."""
    return escape_table_cell(markdown.replace("\n", " "))


def triage_dict(items: Sequence[Triaged]) -> dict[str, Any]:
    """The JSON form: each trace (its outcome, what failed, its first fix's words, its error when it was not read)
    and each group (what failed, its traces)."""
    return {"format": "dlltrace-triage", "version": 1,
            "traces": [{"source": t.source, "kind": t.kind, "culprit": t.culprit, "name": t.name or None,
                        "cause": t.cause or None,
                        "fix": " then: ".join(fix_text(x) for x in (t.fix, *steps_said_after(t.fix))) if t.fix is not None else None,
                        "words": trace_words(t), "error": t.error or None, "warnings": list(t.warnings)}
                       for t in items],
            "groups": [{"culprit": g[0].culprit, "name": g[0].name or None, "cause": g[0].cause or None,
                        "words": failure_words(g[0]), "sources": [t.source for t in g]} for g in groups(items)]}


def triage_schema() -> dict[str, Any]:
    """The JSON Schema of triage_dict (schemas/triage-v1.json is this; tests/test_triage.py checks it)."""
    s, opt = {"type": "string"}, {"type": ["string", "null"]}
    culprits = list(get_args(Culprit))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "dlltrace-triage-v1",
            "title": "dlltrace report of several traces (render/triage.py)", "type": "object",
            "additionalProperties": False, "required": ["format", "version", "traces", "groups"],
            "properties": {
                "format": {"const": "dlltrace-triage"}, "version": {"const": 1},
                "traces": {"type": "array", "description": "each trace given, in order", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["source", "kind", "culprit", "name", "cause", "fix", "words", "error",
                                 "warnings"],
                    "properties": {"source": s, "kind": {"type": "string", "description": "the outcome of the "
                                                         "run's program (diagnosis/outcome.py), or unreadable"},
                                   "culprit": {"enum": culprits}, "name": opt, "cause": opt,
                                   "fix": {"type": ["string", "null"], "description": "its report's first fix (and its steps: ' then: ')"},
                                   "words": s, "error": {"type": ["string", "null"],
                                                         "description": "why it could not be read"},
                                   "warnings": {"type": "array", "items": s, "description": "a damaged trace, "
                                                "read as far as it could be: the reader's warnings"}}}},
                "groups": {"type": "array", "description": "the traces by what failed, the most traces first",
                           "items": {"type": "object", "additionalProperties": False,
                                     "required": ["culprit", "name", "cause", "words", "sources"],
                                     "properties": {"culprit": {"enum": culprits}, "name": opt, "cause": opt,
                                                    "words": s, "sources": {"type": "array", "items": s}}}}}}


def triage_json(items: Sequence[Triaged]) -> str:
    return json.dumps(triage_dict(items), indent=2, ensure_ascii=False)
