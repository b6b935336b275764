"""Results as JSON (versioned, documented in docs/json-output.md) and as text."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from dlltrace.model import (ERROR_TEXT, TREE_OPS, AlsoMissing, Candidate, CallResult, Elsewhere, Fix, LeafFacts, Node,
                            Outcome, flags_text)
from dlltrace.render.explained import (LineStyle, Styled, block_lines, call_blocks, from_result, full_tree, leaf_of,
                                       rendered_lines, style_of)
from dlltrace.render.fixwords import fix_text, relation_text

__all__ = ["LineStyle", "Styled", "style_of", "call_dict", "results_dict", "text_call", "tree_lines"]

JSON_VERSION = 1

def candidate_dict(c: Candidate) -> dict[str, Any]:
    d = {"path": c.path, "rule": c.rule, "result": c.result}
    if c.machine:
        d["machine"] = c.machine
    if c.opened:
        d["opened"] = c.opened
    return d


FIX_ALWAYS = ("python", "verified", "outcome", "then", "covers")  # said even when false, null or empty


def outcome_dict(o: Outcome) -> dict[str, Any]:
    return {"error": o.error, "leaf": o.leaf or None, "cause": o.cause, "chain": list(o.chain)}


def fix_dict(f: Fix) -> dict[str, Any]:
    """A fix: its words, its kind and action, the fields of the action that are set (model.Fix), and
    always whether the model checked it (`verified`, `outcome`), its further steps (`then`), the DLLs it
    fixes (`covers`) and whether its code is Python's (`python`)."""
    d: dict[str, Any] = {"text": fix_text(f), "kind": f.kind, "action": f.action}
    for fl in fields(f):
        k, v = fl.name, getattr(f, fl.name)
        if k in d or k in FIX_ALWAYS or v is None or v is False or v == "" or v == ():
            continue
        d[k] = v
    d.update({"python": f.python, "verified": f.verified,
              "outcome": outcome_dict(f.outcome) if f.outcome is not None else None,
              "then": [fix_dict(t) for t in f.then], "covers": list(f.covers)})
    return d


def also_missing_dict(a: AlsoMissing) -> dict[str, Any]:
    return {"name": a.name, "cause": a.cause, "needed_by": a.needed_by, "chain": list(a.chain),
            "installed_at": list(a.installed_at)}


def elsewhere_dict(e: Elsewhere) -> dict[str, Any]:
    """A copy found elsewhere: `rule` is the relation in words (as found_elsewhere has always had it)."""
    d: dict[str, Any] = {"path": e.path, "rule": relation_text(e), "result": e.result}
    if e.machine:
        d["machine"] = e.machine
    if e.version:
        d["version"] = e.version
    d["relation"] = e.relation
    if e.path_entry is not None:
        d["path_entry"] = e.path_entry
    if e.owner:
        d["owner"] = e.owner
    return d


def leaf_facts_dict(f: LeafFacts) -> dict[str, Any]:
    """The facts of a leaf's cause that apply to it (model.LeafFacts; none are null)."""
    d: dict[str, Any] = {k: v for k, v in asdict(f).items() if v is not None and v is not False and v != ()}
    if "machines" in d:
        d["machines"] = list(d["machines"])
    return d


def node_dict(n: Node) -> dict[str, Any]:
    return {
        "name": n.name, "via": n.via, "path": n.path, "how": n.how, "how_kind": n.how_kind or None, "error": n.error, "cause": n.cause,
        "detail": n.detail, "new": n.new, "loaded_by": n.loaded_by or None, "candidates": [candidate_dict(c) for c in n.candidates],
        "children": [node_dict(c) for c in n.children],
    }


def call_dict(r: CallResult) -> dict[str, Any]:
    d: dict[str, Any] = {"index": r.index, "op": r.op, "name": r.name, "error": r.error,
                         "error_text": ERROR_TEXT.get(r.error, "")}
    if r.op not in TREE_OPS:
        if r.note:
            d["note"] = r.note
        return d
    leaf = leaf_of(r.tree)
    d.update({
        "flags": r.flags,
        "flags_text": flags_text(r.flags),
        "search_flags": r.search_flags,
        "origin": r.origin,
        "origin_kind": r.origin_kind or None,
        "origin_module": r.origin_module or None,
        "module": r.module_path,
        "leaf": None if r.leaf is None else {
            "name": r.leaf.name, "cause": r.leaf.cause, "path": r.leaf.path, "detail": r.leaf.detail,
            "parent": r.leaf.parent, "facts": leaf_facts_dict(r.leaf.facts)},
        "chain": list(r.chain),
        "candidates": [candidate_dict(c) for c in (leaf.candidates if leaf else [])],
        "search_order": [{"folder": s.folder, "rule": s.rule} for s in (leaf.search if leaf else ())],
        "not_searched": r.not_searched or None,
        "path": list(r.path),
        "cwd": r.cwd,
        "found_elsewhere": [elsewhere_dict(c) for c in r.found_elsewhere],
        "close_names": [elsewhere_dict(c) for c in r.close_names],
        "fixes": [fix_dict(f) for f in r.fixes],
        "also_missing": [also_missing_dict(a) for a in r.also_missing],
        "probes": list(r.probes),
        "tree": node_dict(r.tree) if r.tree else None,
    })
    if r.note:
        d["note"] = r.note
    return d


def results_dict(results: list[CallResult], *, kind: str, source: str, description: str = "") -> dict[str, Any]:
    calls = [call_dict(r) for r in results]
    loads = [c for c in calls if c["op"] in TREE_OPS]
    failed = [c for c in loads if c["error"]]
    return {
        "format": f"dlltrace-{kind}",
        "version": JSON_VERSION,
        "source": source,
        "description": description,
        "error": failed[0]["error"] if failed else 0,
        "failed": [c["index"] for c in failed],
        "calls": calls,
    }


# --- text (the words are render/explained.py's) -------------------------------------------------------
def tree_lines(node: Node) -> list[str]:
    """The whole resolution tree of a call as lines."""
    return rendered_lines(full_tree(node))


def text_call(r: CallResult) -> list[str]:
    """One call as `dlltrace simulate` shows it."""
    return block_lines(call_blocks(from_result(r)))
