"""The report of a Linux trace (platform "linux": the LD_AUDIT recorder's events, diagnosis/replay_linux.py),
as text, Markdown and JSON, from the typed replay (LinuxCall: leaf, chain, candidates with their rules,
what ld.so really tried, fixes re-run through the model).

Which failed call is the failure the program hit is diagnosis/verdict_linux.py's (linux_verdicts); the
others are listed apart as loads the program (or another process of the run: a pyenv shim's bash, a
child) went past.

Not yet through render/explained.py (whose words and folder handling are Windows's): a form of its own,
made of the same typed fields, never of another module's sentences.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from dlltrace import model
from dlltrace.trace.reader import Trace
from dlltrace.diagnosis.replay_linux import LinuxCall, replay_linux
from dlltrace.diagnosis.outcome import ProcessOutcome, feature_of
from dlltrace.diagnosis.result import schema as diagnosis_schema
from dlltrace.render.outcome import code_line, outcome_dict, outcome_headline, outcome_schema
from dlltrace.diagnosis.verdict_linux import linux_diagnoses, linux_exit_code, linux_verdicts
from dlltrace.render.calls import candidate_dict, fix_dict, node_dict
from dlltrace.worlds.elf import ELFWorld
from dlltrace.render.fixwords import fix_text

# the candidates' words: the model's, those of a PE said of an ELF file
RESULT_WORDS = {**model.RESULT_WORDS, "wrong_machine": "wrong ELF class or machine", "not_pe": "not an ELF file"}


# the subfolders glibc tries inside each folder of a search before the folder itself (dl-load.c: the
# glibc-hwcaps/<level> subfolders, then the legacy tls and platform/hwcap ones); a report shows the folder once
HWCAP_SUBFOLDERS = {"tls", "x86_64", "haswell", "avx512_1", "i686", "i586", "sse2", "aarch64", "atomics", "asimd"}


def hwcaps_base(folder: str) -> str:
    """The folder of a search that `folder` is a glibc-hwcaps or legacy hwcap subfolder of (itself otherwise)."""
    parts = folder.split("/")
    while len(parts) > 1:
        if len(parts) > 2 and parts[-2] == "glibc-hwcaps":
            parts = parts[:-2]
        elif parts[-1] in HWCAP_SUBFOLDERS:
            parts = parts[:-1]
        else:
            break
    return "/".join(parts) or "/"


@dataclass(frozen=True)
class FolderGroup:
    folder: str
    rule: str
    result: model.CandidateResult
    subfolders: int  # how many of its hwcaps subfolders were tried too, each with the same result


def folder_groups(cands: list[model.Candidate]) -> list[FolderGroup]:
    """The files tried as folders: consecutive tries of one rule in a folder and its hwcaps subfolders, with
    one result, are one line (glibc tries up to 11 of them for each folder of the system search path)."""
    out: list[FolderGroup] = []
    for x in cands:
        base = hwcaps_base(posixpath.dirname(x.path))
        last = out[-1] if out else None
        if last is not None and (last.folder, last.rule, last.result) == (base, x.rule, x.result):
            out[-1] = FolderGroup(base, x.rule, x.result, last.subfolders + 1)
        else:
            out.append(FolderGroup(base, x.rule, x.result, 0))  # (the folder itself: the rest are subfolders)
    return out


def rule_tag(rule: str) -> str:
    """A rule as the Windows report tags its folders ("DLL_LOAD_DIR of x.pyd"): the object a RUNPATH or
    RPATH is of by its file name (its folder is the line's)."""
    for tag in ("RUNPATH of ", "RPATH of "):
        if rule.startswith(tag):
            return tag + posixpath.basename(rule[len(tag):])
    return rule


# the Linux report's JSON name of each fix action (report-linux-v1.json; the fix itself is under "fix")
LINUX_FIX_NAMES = {"set_env": "ld_library_path", "set_runpath": "patchelf", "install_package": "install_package",
                   "add_ld_so_conf": "ldconfig"}


def _call_lines(c: LinuxCall) -> list[str]:
    leaf = c.leaf.name if c.leaf else c.name
    by = f" — it is needed by {c.leaf.parent.rsplit('/', 1)[-1]}" if c.leaf and c.leaf.parent else ""
    words = {"not_found": "was not found", "bad_machine": "is the wrong ELF class or machine",
             "not_pe": "is not an ELF file", "missing_export": "lacks a symbol version it needs"}
    cause = words.get(c.leaf.cause, c.leaf.cause) if c.leaf else "failed"
    head = f"✗ {leaf} {cause}{by}"
    if c.leaf and c.leaf.cause == "missing_export" and c.leaf.parent == c.leaf.path and c.leaf.facts.export:
        # (ld.so's "undefined symbol": the object itself needs a symbol no library loaded defines)
        head = f"✗ {leaf} needs the symbol {c.leaf.facts.export}, which none of the libraries loaded defines"
    origin = c.origin or f"dlopen by {c.by.rsplit('/', 1)[-1] or c.exe}"
    out = [head, "",
           f"  {origin}: dlopen({c.name}) → {c.real_error or c.error}"]
    where = code_line(c.frame)
    if where:
        out.append(where)
    if len(c.chain) > 1:
        out.append("  chain: " + " → ".join(x.rsplit("/", 1)[-1] for x in c.chain))
    cands = c.tree.candidates if c.tree else []
    if cands:
        groups = folder_groups(cands)
        files = f"{len(cands)} file{'s' if len(cands) != 1 else ''}"
        out += ["", f"  Where ld.so looked for {leaf} ({files} in {len(groups)} folder{'s' if len(groups) != 1 else ''}):"]
        width = max(len(g.folder) for g in groups)
        rule_width = max(len(rule_tag(g.rule)) for g in groups)
        for i, g in enumerate(groups, 1):
            more = f"  (and {g.subfolders} glibc-hwcaps/tls subfolders)" if g.subfolders else ""
            out.append(f"    {i:>2}  {g.folder.ljust(width)}  {rule_tag(g.rule).ljust(rule_width)}  "
                       f"{RESULT_WORDS.get(g.result, g.result)}{more}")
    out.append("  The model tried the same files, in the same order, as ld.so did." if c.agrees else
               "  The model and the real ld.so tried different files (please report this, with the trace).")
    if c.fixes:
        out += ["", "  Fix"]
        for i, f in enumerate(c.fixes, 1):
            out.append(f"    {i}. {fix_text(f)}" + ("" if f.verified else "  (not checked by the model)"))
            for step in f.then:  # (a next step the model found it needs)
                out.append(f"       then: {fix_text(step)}")
            if f.preloaded_by == "torch" and (c.origin_module or "").split(".")[0] == "torch":
                out.append("       (torch preloads this wheel's copy itself: torch/__init__.py)")
    return out


def main_linux_outcome(trace: Trace, calls: list[LinuxCall]) -> Optional[ProcessOutcome]:
    """The outcome of the program `dlltrace run` started (its exit event's process)."""
    end = next(trace.of("exit"), None)
    top = end.get("pid") if end else None
    return next((d.outcome for d in linux_diagnoses(trace, calls) if d.pid == top), None)


def linux_text(trace: Trace, md: bool = False, saved: bool = False, everything: bool = False) -> str:
    """The report of a Linux trace; `everything` (--all): the calls the program went past explained in full too."""
    calls = replay_linux(trace.events)
    failed, fatal, apart = linux_verdicts(trace, calls)
    where = f"trace saved to {trace.path}" if saved else trace.path
    outcome = main_linux_outcome(trace, calls) if fatal is None else None
    said = outcome_headline(outcome) if outcome is not None else None
    if not failed and said is None:
        return f"dlltrace ─ every load succeeded · {where}"
    if outcome is not None and outcome.kind == "degraded":  # the loads that cost it a feature: explained in full
        apart = [c for c in apart if not (feature_of(c.leaf.name if c.leaf else None) or feature_of(c.name))]
    if everything:
        apart = []
    shown = [c for c in failed if not any(c is a for a in apart)]
    n = len(shown)
    head = f"dlltrace ─ {n} failed load{'s' if n != 1 else ''}" + (
        f" · {len(apart)} the program went past" if apart else "") + f" · {where}"
    if said is not None:
        head = f"dlltrace ─ {said} · {where}"
    lines = [f"## {head}" if md else head]
    for c in shown:
        lines += [""] + _call_lines(c)
    if apart:
        lines += ["", "Failed loads, context only: the program went past them, and none is what it ended with:"
                  if outcome is not None and outcome.kind == "died_of_other" else
                  "Failed, and the program went past them (not the failure):"]
        lines += [f"  {c.name}  ({c.exe.rsplit('/', 1)[-1]}, pid {c.pid})  {c.real_error or c.error}" for c in apart]
    if md:
        return "\n".join(lines[:1] + ["", "```"] + lines[1:] + ["```"]) + "\n"
    return "\n".join(lines)


def linux_json(trace: Trace) -> str:
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
    doc["outcome"] = outcome_dict(main.outcome) if main is not None else None
    doc["diagnoses"] = [d.to_dict() for d in diagnoses]
    return json.dumps(doc, indent=2, ensure_ascii=False)


def linux_report_schema() -> dict[str, Any]:
    """The JSON Schema of linux_json's document (committed as schemas/report-linux-v1.json; tests check it is
    this): its own fields, and the Diagnosis schema's definitions for `diagnoses`."""
    diag = diagnosis_schema()
    defs = dict(diag["$defs"])
    defs["Diagnosis"] = {k: v for k, v in diag.items() if k not in ("$schema", "$id", "title", "$defs")}
    s, i, b, null = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "null"}

    def opt(t: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [t, null]}

    cand = {"type": "object", "required": ["path", "rule", "result"], "additionalProperties": False,
            "properties": {"path": s, "rule": s, "result": {"enum": list(model.CANDIDATE_RESULTS)}, "machine": s}}
    fix = {"type": "object", "additionalProperties": False,
           "required": ["action", "text", "folder", "path", "package", "verified", "framework_preloads", "needs_path", "fix"],
           "properties": {"action": {"enum": ["ld_library_path", "patchelf", "install_package", "ldconfig"]}, "text": s,
                          "folder": opt(s), "path": opt(s), "package": opt(s), "verified": b, "framework_preloads": b,
                          "needs_path": b, "fix": {"type": "object"}}}
    leaf = {"type": "object", "required": ["name", "cause", "detail", "parent"], "additionalProperties": False,
            "properties": {"name": s, "cause": s, "detail": s, "parent": opt(s)}}
    call = {"type": "object", "additionalProperties": False,
            "required": ["pid", "exe", "op", "name", "by", "origin", "origin_kind", "origin_module", "error", "real_error",
                         "leaf", "chain", "candidates", "recorded", "agrees", "tree", "fixes"],
            "properties": {"pid": i, "exe": s, "op": {"const": "dlopen"}, "name": s, "by": opt(s), "origin": opt(s),
                           "origin_kind": opt(s), "origin_module": opt(s), "error": s, "real_error": opt(s),
                           "leaf": opt(leaf), "chain": {"type": "array", "items": s},
                           "candidates": {"type": "array", "items": cand}, "recorded": {"type": "array", "items": cand},
                           "agrees": b, "tree": opt({"type": "object"}), "fixes": {"type": "array", "items": fix}}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "dlltrace-report-linux-v1",
            "title": "dlltrace report --json of a Linux trace", "type": "object", "additionalProperties": False,
            "required": ["format", "version", "calls", "agree", "failed", "source", "exit_code", "fatal", "went_on",
                         "warnings", "outcome", "diagnoses"],
            "properties": {"format": {"const": "dlltrace-report-linux"}, "version": {"const": 1}, "calls": i, "agree": i,
                           "failed": {"type": "array", "items": call}, "source": s, "exit_code": opt(i), "fatal": opt(i),
                           "went_on": {"type": "array", "items": i}, "warnings": {"type": "array", "items": s},
                           "outcome": opt(outcome_schema()),
                           "diagnoses": {"type": "array", "items": {"$ref": "#/$defs/Diagnosis"}}},
            "$defs": dict(sorted(defs.items()))}


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
            "fixes": [{"action": LINUX_FIX_NAMES[f.action], "text": fix_text(f), "folder": f.folder or None,
                       "path": (f.path if f.action == "set_runpath" else None), "package": f.package or None,
                       "verified": bool(f.verified), "framework_preloads": bool(f.preloaded_by),
                       "needs_path": bool(f.then), "fix": fix_dict(f)}
                      for f in c.fixes],
        } for c in failed],
    }
