"""The report of a Linux trace (platform "linux": the LD_AUDIT recorder's events, diagnosis/replay_linux.py),
as text, Markdown and JSON, from the typed replay (LinuxCall: leaf, chain, candidates with their rules,
what ld.so really tried, fixes re-run through the model).

Which failed call is the failure the program hit is diagnosis/verdict_linux.py's (linux_verdicts); the
others are listed apart as loads the program (or another process of the run: a pyenv shim's bash, a
child) went past.

The text and Markdown are render/diagnosis.py's, from the typed Diagnoses (the same renderer any
Diagnosis has); the JSON keeps the replay's fields, with the Diagnoses under `diagnoses`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional, Sequence

from dlltrace import model
from dlltrace.trace.reader import Trace
from dlltrace.diagnosis.replay_linux import LinuxCall, replay_linux
from dlltrace.diagnosis.result import schema as diagnosis_schema
from dlltrace.render.diagnosis import diagnoses_text, fatal_leaf
from dlltrace.render.escape import markdown_paragraphs
from dlltrace.render.outcome import cpu_builds_schema, damaged_words, outcome_dict, outcome_schema
from dlltrace.diagnosis.verdict_linux import linux_diagnoses, linux_exit_code, linux_verdicts
from dlltrace.render.calls import candidate_dict, fix_dict, node_dict
from dlltrace.worlds.elf import ELFWorld
from dlltrace.render.fixwords import fix_text
from dlltrace.render.linux_tree import tree_dict, tree_lines, tree_schema

# the Linux report JSON's name of each fix action (report-linux-v1.json; the fix itself is under "fix")
LINUX_FIX_NAMES = {"set_env": "ld_library_path", "set_runpath": "patchelf", "install_package": "install_package",
                   "add_ld_so_conf": "ldconfig", "install_driver": "install_driver",
                   "install_system_package": "install_system_package", "install": "reinstall",
                   "newer_glibc": "newer_glibc"}


def linux_text(trace: Trace, md: bool = False, saved: bool = False, everything: bool = False, note: str = "") -> str:
    """The report of a Linux trace, from its Diagnoses (render/diagnosis.py); `everything` (--all): the calls
    the program went past explained in full too; `note`: a paragraph after it (render/cuda.py cpu_build_text)."""
    calls = trace.replayed if trace.replayed is not None else replay_linux(trace.events)  # (`run`'s: made once)
    diagnoses = linux_diagnoses(trace, calls)
    end = next(trace.of("exit"), None)
    main = next((d for d in diagnoses if end is not None and d.pid == end.get("pid")), None)
    where = f"trace saved to {trace.path}" if saved else trace.path
    text = diagnoses_text(diagnoses, where, main, everything, markdown=md, trees=linux_trees(trace, calls),
                          damaged=bool(trace.warnings))
    for paragraph in (note, damaged_words(trace)):  # (a damaged trace says so last: render/outcome.py)
        if paragraph:
            text = text.rstrip("\n") + "\n\n" + (markdown_paragraphs(paragraph) + "\n" if md else paragraph)
    return text


def linux_trees(trace: Trace, calls: list[LinuxCall]) -> dict[tuple[int, int], list[str]]:
    """Each failed call's dependency tree as lines (render/linux_tree.py), by (pid, its index among the process's
    failed calls: the FailedLoad's seq, verdict_linux.linux_failed_load); only a tree with more than the call's
    own library (the folders tried for the leaf are the report's "Where ld.so looked" already)."""
    failed, _, _ = linux_verdicts(trace, calls)
    out: dict[tuple[int, int], list[str]] = {}
    index: dict[int, int] = {}
    for c in failed:
        i = index[c.pid] = index.get(c.pid, -1) + 1
        if c.deps is not None and c.deps.children:
            out[(c.pid, i)] = tree_lines(c.deps, folders=False)
    return out


def linux_json(trace: Trace, cpu_builds: Sequence[dict[str, Any]] = ()) -> str:
    """`dlltrace report --json` of a Linux trace: schemas/report-linux-v1.json (linux_report_schema), with the
    typed Diagnosis of each process (schemas/diagnosis-v1.json) in `diagnoses`."""
    calls = replay_linux(trace.events)  # (once: the JSON and the verdicts are of the same replay)
    doc: dict[str, Any] = linux_report_dict(trace.events, calls=calls)
    failed, fatal, apart = linux_verdicts(trace, calls)
    doc["source"] = trace.path
    doc["exit_code"] = linux_exit_code(trace)
    doc["fatal"] = None if fatal is None else failed.index(fatal)
    doc["went_on"] = [i for i, c in enumerate(failed) if any(c is a for a in apart)]
    doc["warnings"] = list(trace.warnings)
    diagnoses = linux_diagnoses(trace, calls)
    top = next(trace.of("exit"), None)
    main = next((d for d in diagnoses if top is not None and d.pid == top.get("pid")), None)
    doc["outcome"] = outcome_dict(main.outcome, fatal_leaf(main), main.unfound, main.unstarted, main.gone) \
        if main is not None else None
    doc["diagnoses"] = [d.to_dict() for d in diagnoses]
    doc["cpu_builds"] = list(cpu_builds)  # (render/cuda.py cpu_build_dict: the CPU builds of GPU frameworks imported)
    return json.dumps(doc, indent=2, ensure_ascii=False)


def linux_report_schema() -> dict[str, Any]:
    """The JSON Schema of linux_json's document (committed as schemas/report-linux-v1.json; tests check it is
    this): its own fields, and the Diagnosis schema's definitions for `diagnoses`."""
    diag = diagnosis_schema()
    defs = dict(diag["$defs"])
    defs["Diagnosis"] = {k: v for k, v in diag.items() if k not in ("$schema", "$id", "title", "$defs")}
    defs["DepNode"] = tree_schema()  # (a failed call's dependency tree: render/linux_tree.py)
    s, i, b, null = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "null"}

    def opt(t: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [t, null]}

    cand = {"type": "object", "required": ["path", "rule", "result"], "additionalProperties": False,
            "properties": {"path": s, "rule": s, "result": {"enum": list(model.CANDIDATE_RESULTS)}, "machine": s}}
    fix = {"type": "object", "additionalProperties": False,
           "required": ["action", "text", "folder", "path", "package", "verified", "framework_preloads", "needs_path", "fix"],
           "properties": {"action": {"enum": list(LINUX_FIX_NAMES.values())}, "text": s,
                          "folder": opt(s), "path": opt(s), "package": opt(s), "verified": b, "framework_preloads": b,
                          "needs_path": b, "fix": {"type": "object"}}}
    leaf = {"type": "object", "required": ["name", "cause", "detail", "parent"], "additionalProperties": False,
            "properties": {"name": s, "cause": s, "detail": s, "parent": opt(s)}}
    call = {"type": "object", "additionalProperties": False,
            "required": ["pid", "exe", "op", "name", "by", "origin", "origin_kind", "origin_module", "error", "real_error",
                         "leaf", "chain", "candidates", "recorded", "agrees", "tree", "deps", "fixes"],
            "properties": {"pid": i, "exe": s, "op": {"const": "dlopen"}, "name": s, "by": opt(s), "origin": opt(s),
                           "origin_kind": opt(s), "origin_module": opt(s), "error": s, "real_error": opt(s),
                           "leaf": opt(leaf), "chain": {"type": "array", "items": s},
                           "candidates": {"type": "array", "items": cand}, "recorded": {"type": "array", "items": cand},
                           "agrees": b, "tree": opt({"type": "object"}),
                           "deps": opt({"$ref": "#/$defs/DepNode"}), "fixes": {"type": "array", "items": fix}}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "dlltrace-report-linux-v1",
            "title": "dlltrace report --json of a Linux trace", "type": "object", "additionalProperties": False,
            "required": ["format", "version", "calls", "agree", "failed", "source", "exit_code", "fatal", "went_on",
                         "warnings", "outcome", "diagnoses", "cpu_builds"],
            "properties": {"format": {"const": "dlltrace-report-linux"}, "version": {"const": 1}, "calls": i, "agree": i,
                           "failed": {"type": "array", "items": call}, "source": s, "exit_code": opt(i), "fatal": opt(i),
                           "went_on": {"type": "array", "items": i}, "warnings": {"type": "array", "items": s},
                           "outcome": opt(outcome_schema()),
                           "diagnoses": {"type": "array", "items": {"$ref": "#/$defs/Diagnosis"}},
                           "cpu_builds": cpu_builds_schema()},
            "$defs": dict(sorted(defs.items()))}


def needs_path(f: model.Fix) -> bool:
    """A fix that also needs LD_LIBRARY_PATH (a wheel whose folder nothing searches); a system package's next
    steps are more packages, not that."""
    return any(t.action == "set_env" and t.variable == "LD_LIBRARY_PATH" for t in f.then)


def linux_report_dict(events: Iterable[dict], world: Optional[ELFWorld] = None, fixes: bool = True,
                      calls: Optional[list[LinuxCall]] = None) -> dict[str, Any]:
    """The failed calls of a Linux trace as JSON: each with its leaf, chain, candidates (path, rule,
    result), the candidates the real ld.so tried (rule: its la_objsearch flag), and `agrees`. `calls`:
    the trace's replay, when the caller has it already (replay_linux)."""
    if calls is None:
        calls = replay_linux(events, world, fixes)
    failed = [c for c in calls if c.error or c.real_error]
    return {
        "format": "dlltrace-report-linux", "version": 1,
        "calls": len(calls), "agree": sum(c.agrees for c in calls),
        "failed": [{
            "pid": c.pid, "exe": c.exe, "op": "dlopen", "name": c.name, "by": c.by or None,
            "origin": c.origin or None, "origin_kind": c.origin_kind or None, "origin_module": c.origin_module or None,
            "error": c.error, "real_error": c.real_error or None,
            "leaf": None if c.leaf is None else {"name": c.leaf.name, "cause": c.leaf.cause, "detail": c.leaf.detail,
                                                 "parent": c.leaf.parent},
            "chain": c.chain,
            "candidates": [candidate_dict(x) for x in (c.tree.candidates if c.tree else [])],
            "recorded": [candidate_dict(x) for x in c.recorded],
            "agrees": c.agrees,
            "tree": node_dict(c.tree) if c.tree else None,
            "deps": tree_dict(c.deps) if c.deps is not None else None,
            "fixes": [{"action": LINUX_FIX_NAMES.get(f.action, f.action), "text": fix_text(f), "folder": f.folder or None,
                       "path": (f.path if f.action == "set_runpath" else None), "package": f.package or None,
                       "verified": bool(f.verified), "framework_preloads": bool(f.preloaded_by),
                       "needs_path": needs_path(f), "fix": fix_dict(f)}
                      for f in c.fixes],
        } for c in failed],
    }
