"""Many traces in words (`dlltrace report A B C ...`, diagnosis/triage.py): how many ended which way (and the
traces given twice, counted once), then each failure with the traces that report it, the most traces first, with
its representative trace's fix; then a line per trace: how it ended and what failed. Text, Markdown and JSON."""

from __future__ import annotations

import json
from typing import Any, Sequence, get_args

from dlltrace.diagnosis.triage import Culprit, Duplicate, Sameness, Triaged, groups, neutral_message, representative
from dlltrace.render.diagnosis import headline_of
from dlltrace.render.escape import escape_code_span, escape_prose, escape_table_cell, escape_terminal
from dlltrace.render.explained import as_typed
from dlltrace.render.fixwords import fix_lines, fix_markdown, fix_text, steps_said_after
from dlltrace.render.outcome import crash_words, gone_words, message_words, unstarted_words

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


# how a trace given again is the one given before it (diagnosis/triage.py rule_same_trace)
SAME_WORDS = {"same_path": "the same path as {}", "same_file": "the same file as {}",
              "same_content": "the same trace as {}"}


def same_words(d: Duplicate, name: str) -> str:
    """"given twice", "the same file as a.jsonl": how a trace given again is one given before it (`name`: that
    one's, as the renderer writes it)."""
    return "given twice" if d.source == d.same_as else SAME_WORDS[d.how].format(name)


def duplicates_line(again: Sequence[Duplicate]) -> str:
    """"Counted once: s2.jsonl (given twice), copy.jsonl (the same trace as s2.jsonl)"; "" for none."""
    if not again:
        return ""
    return "Counted once: " + ", ".join(f"{d.source} ({same_words(d, d.same_as)})" for d in again)


def failure_words(t: Triaged, group: bool = False) -> str:
    """What one trace reports, in a few words (the report's own words for it); `group`: what a group of traces
    reports, said by one of them (an exception no load explains: its message made neutral, as it groups them)."""
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
        how = f" ({crash_words(m.outcome)})" if m is not None and (t.name or m.outcome.signal is not None) else ""
        return f"crashed{how}, and no failed load explains it"
    if t.culprit == "exception":
        said = message_words(neutral_message(t.message) if group else t.message)
        return f"ended with {t.name}{': ' + said if said else ''}, and no failed load explains it"
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


def triage_text(items: Sequence[Triaged], again: Sequence[Duplicate] = ()) -> str:
    """The text of many traces (`again`: those given twice, counted once: a line of their own)."""
    out = [f"dlltrace ─ {counts_line(items)}"] + ([escape_terminal(duplicates_line(again))] if again else [])
    out += ["", "What failed, the most traces first:"]
    for g in groups(items):
        t = representative(g)
        out += ["", f"  {_plural(len(g), 'trace')}  {escape_terminal(failure_words(t, group=len(g) > 1))}"]
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


def triage_markdown(items: Sequence[Triaged], again: Sequence[Duplicate] = ()) -> str:
    """The same as Markdown: the count (and the traces counted once), then a table of the failures (traces, what
    failed, the fix as one trace's report gives it), then a table of the traces."""
    out = [f"**dlltrace:** {escape_prose(counts_line(items))}."]
    if again:
        out += ["", "Counted once: " + ", ".join(
            f"{escape_code_span(d.source)} ({same_words(d, escape_code_span(d.same_as))})"
            for d in again) + "."]
    out += ["", "| traces | what failed | fix (as one trace's report gives it) |", "|---:|---|---|"]
    for g in groups(items):
        t = representative(g)
        fix = " then: ".join(fix_markdown(x, as_typed) for x in (t.fix, *steps_said_after(t.fix))) if t.fix is not None else ""
        fix = _cell(f"{escape_code_span(t.source)}: {fix}" if fix and len(g) > 1 else fix)
        names = _cell(", ".join(escape_code_span(x.source) for x in g))
        out.append(f"| {len(g)} | {_cell(escape_prose(failure_words(t, group=len(g) > 1)))}<br>{names} | {fix} |")
    out += ["", "| trace | how it ended, and what failed |", "|---|---|"]
    out += [f"| {_cell(escape_code_span(t.source))} | {_cell(escape_prose(trace_words(t)))} |" for t in items]
    return "\n".join(out)


def _cell(markdown: str) -> str:
    """Inline Markdown in a table's cell (escape.escape_table_cell), on one line."""
    return escape_table_cell(markdown.replace("\n", " "))


def triage_dict(items: Sequence[Triaged], again: Sequence[Duplicate] = ()) -> dict[str, Any]:
    """The JSON form: each trace (its outcome, what failed, its first fix's words, its error when it was not read),
    each group (what failed, its traces, the one it is said by) and the traces given again, counted once."""
    def group(g: list[Triaged]) -> dict[str, Any]:
        t = representative(g)
        return {"culprit": t.culprit, "name": t.name or None, "cause": t.cause or None,
                "message": neutral_message(t.message) if t.culprit == "exception" else None,
                "words": failure_words(t, group=len(g) > 1), "sources": [x.source for x in g],
                "representative": t.source}

    return {"format": "dlltrace-triage", "version": 1,
            "traces": [{"source": t.source, "kind": t.kind, "culprit": t.culprit, "name": t.name or None,
                        "cause": t.cause or None, "message": t.message if t.culprit == "exception" else None,
                        "fix": " then: ".join(fix_text(x) for x in (t.fix, *steps_said_after(t.fix))) if t.fix is not None else None,
                        "words": trace_words(t), "error": t.error or None, "warnings": list(t.warnings)}
                       for t in items],
            "groups": [group(g) for g in groups(items)],
            "duplicates": [{"source": d.source, "same_as": d.same_as, "how": d.how} for d in again]}


def triage_schema() -> dict[str, Any]:
    """The JSON Schema of triage_dict (schemas/triage-v1.json is this; tests/test_triage.py checks it)."""
    s, opt = {"type": "string"}, {"type": ["string", "null"]}
    culprits = list(get_args(Culprit))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "dlltrace-triage-v1",
            "title": "dlltrace report of several traces (render/triage.py)", "type": "object",
            "additionalProperties": False, "required": ["format", "version", "traces", "groups", "duplicates"],
            "properties": {
                "format": {"const": "dlltrace-triage"}, "version": {"const": 1},
                "traces": {"type": "array", "description": "each trace given, in order", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["source", "kind", "culprit", "name", "cause", "message", "fix", "words", "error",
                                 "warnings"],
                    "properties": {"source": s, "kind": {"type": "string", "description": "the outcome of the "
                                                         "run's program (diagnosis/outcome.py), or unreadable"},
                                   "culprit": {"enum": culprits}, "name": opt, "cause": opt,
                                   "message": {"type": ["string", "null"], "description": "culprit exception: "
                                               "the exception's message, as the trace has it"},
                                   "fix": {"type": ["string", "null"], "description": "its report's first fix (and its steps: ' then: ')"},
                                   "words": s, "error": {"type": ["string", "null"],
                                                         "description": "why it could not be read"},
                                   "warnings": {"type": "array", "items": s, "description": "a damaged trace, "
                                                "read as far as it could be: the reader's warnings"}}}},
                "groups": {"type": "array", "description": "the traces by what failed, the most traces first",
                           "items": {"type": "object", "additionalProperties": False,
                                     "required": ["culprit", "name", "cause", "message", "words", "sources",
                                                  "representative"],
                                     "properties": {"culprit": {"enum": culprits}, "name": opt, "cause": opt,
                                                    "message": {"type": ["string", "null"], "description":
                                                                "culprit exception: the message its traces share, "
                                                                "made neutral (paths, numbers, hex addresses, "
                                                                "temporary folders)"},
                                                    "words": s, "sources": {"type": "array", "items": s},
                                                    "representative": {"type": "string", "description":
                                                                       "the trace its words and fix are said by"}}}},
                "duplicates": {"type": "array", "description": "traces given again, counted once",
                               "items": {"type": "object", "additionalProperties": False,
                                         "required": ["source", "same_as", "how"],
                                         "properties": {"source": s, "same_as": s,
                                                        "how": {"enum": list(get_args(Sameness))}}}}}}


def triage_json(items: Sequence[Triaged], again: Sequence[Duplicate] = ()) -> str:
    return json.dumps(triage_dict(items, again), indent=2, ensure_ascii=False)
