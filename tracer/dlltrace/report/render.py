"""Results as JSON (versioned, documented in docs/json-output.md) and as text."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from dlltrace import winpath
from dlltrace.report.explain import leaf_node
from dlltrace.model import ERROR_TEXT, RESULT_WORDS, TREE_OPS, Candidate, CallResult, Cause, Elsewhere, Fix, LeafFacts, Node, flags_text

JSON_VERSION = 1

# How the terminal shows a line of the text report (commands/report.py maps each to a colour).
LineStyle = Literal["", "failure", "success", "heading", "disagreement", "went_on"]


class Styled(str):
    """A line of the text report with the style its producer gave it (a str: printed as it is)."""

    style: LineStyle

    def __new__(cls, text: str, style: LineStyle) -> "Styled":
        line = super().__new__(cls, text)
        line.style = style
        return line


def style_of(line: str) -> LineStyle:
    return line.style if isinstance(line, Styled) else ""


def candidate_dict(c: Candidate) -> dict[str, Any]:
    d = {"path": c.path, "rule": c.rule, "result": c.result}
    if c.machine:
        d["machine"] = c.machine
    return d


def fix_dict(f: Fix) -> dict[str, Any]:
    """A fix: its words, its kind and action, and the fields of the action that are set (model.Fix)."""
    d: dict[str, Any] = {"text": f.text, "kind": f.kind, "action": f.action}
    d.update({k: v for k, v in asdict(f).items() if k not in d and v is not None and v is not False and v != ""})
    return d


def elsewhere_dict(e: Elsewhere) -> dict[str, Any]:
    """A copy found elsewhere: `rule` is the relation in words (as found_elsewhere has always had it)."""
    d: dict[str, Any] = {"path": e.path, "rule": e.text, "result": e.result}
    if e.machine:
        d["machine"] = e.machine
    if e.version:
        d["version"] = e.version
    d["relation"] = e.relation
    if e.path_entry is not None:
        d["path_entry"] = e.path_entry
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
    leaf = leaf_node(r.tree)
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
        "found_elsewhere": [elsewhere_dict(c) for c in r.found_elsewhere],
        "close_names": [elsewhere_dict(c) for c in r.close_names],
        "fixes": [fix_dict(f) for f in r.fixes],
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


# --- text ----------------------------------------------------------------------------------------
def tree_lines(node: Node, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    mark = "" if top else ("└─ " if last else "├─ ")
    if node.cause:
        whats: dict[Cause, str] = {"not_found": "✗ not found", "bad_machine": "✗ wrong machine", "not_pe": "✗ not a PE",
                "missing_export": f"✗ lacks {node.detail}", "missing_ordinal": f"✗ lacks {node.detail}",
                "init_failed": "✗ DllMain failed", "apiset_no_host": "✗ API set with no host",
                "invalid_parameter": f"✗ {node.detail}", "access_denied": "✗ access denied"}
        what = whats[node.cause]
        right = (f"{winpath.dirname(node.path)}  " if node.path and node.cause not in ("not_found",) else "") + what
    else:
        right = f"{winpath.dirname(node.path) if node.path else ''}  {node.how}".strip()
    lines = [f"{prefix}{mark}{winpath.basename(node.name):<28} {right}"]
    kids = node.children
    ext = "" if top else ("   " if last else "│  ")
    for i, c in enumerate(kids):
        lines.extend(tree_lines(c, prefix + ext, i == len(kids) - 1, False))
    return lines


def tail_lines(r: CallResult, fixes: bool = True) -> list[str]:
    """Where else the leaf is, other versions of it, and the fixes (unless `fixes` is false: a load
    the program went past needs none): the end of every verdict."""
    out: list[str] = []
    if r.found_elsewhere:
        out += ["", Styled("  Found elsewhere", "heading")]
        for c in r.found_elsewhere:
            facts = "".join(f"{x} · " for x in (c.machine, c.version) if x)
            out.append(f"    {c.path}   {facts}{c.text}")
    if r.close_names:
        out += ["", f"  Other versions (a different file name: they never satisfy {r.leaf.name if r.leaf else 'it'}, "
                    "whatever the PATH order)"]
        out += [f"    {c.path}   {c.text}" for c in r.close_names]
    if r.fixes and fixes:
        out += ["", Styled("  Fix", "heading")]
        out += [f"    {i}. {f.text}" for i, f in enumerate(r.fixes, 1)]
    return out


def text_call(r: CallResult) -> list[str]:
    if r.op not in TREE_OPS:
        status = "ok" if r.error == 0 else f"error {r.error}"
        return [f"{r.op}({r.name}{', ' + hex(r.flags) if r.flags else ''})  → {status}"]
    head = f"{r.op}({r.name}, {r.flags:#x})"
    if r.origin:
        head = f"{r.origin}: {head}"
    out = [f"{head}  → {r.error} {'ok' if r.error == 0 else ERROR_TEXT.get(r.error, '')}"]
    if r.error == 0:
        out.append(f"  loaded {r.module_path}")
        return out
    leaf = leaf_node(r.tree)
    if r.leaf:
        need = f" — it is needed by {r.leaf.parent}" if r.leaf.parent else ""
        verdicts: dict[Cause, str] = {
            "not_found": f"{r.leaf.name} was not found{need}",
            "bad_machine": f"{r.leaf.name}: only copies for another machine exist{need}",
            "not_pe": f"{r.leaf.name} at {r.leaf.path} is not a valid PE image{need}",
            "missing_export": f"{r.leaf.name} ({r.leaf.path}) does not export {r.leaf.detail}{need}",
            "missing_ordinal": f"{r.leaf.name} ({r.leaf.path}) lacks {r.leaf.detail}{need}",
            "init_failed": f"{r.leaf.name}: its DllMain failed; every dependency resolved",
            "apiset_no_host": f"{r.leaf.name}: API set with no host on this system{need}",
            "invalid_parameter": f"invalid parameter: {r.leaf.detail}",
            "access_denied": f"{r.leaf.name}: access denied ({r.leaf.path}){need}",
        }
        out.append(f"  ✗ {verdicts[r.leaf.cause]}")
    if r.tree:
        out.append("")
        out.extend("    " + line for line in tree_lines(r.tree))
    if leaf and leaf.candidates:
        out.append("")
        out.append(f"  Where the loader looked for {winpath.basename(leaf.name)} (flags {flags_text(r.flags)}):")
        for i, c in enumerate(leaf.candidates, 1):
            res = RESULT_WORDS[c.result] + (f" ({c.machine})" if c.result == "wrong_machine" else "")
            out.append(f"    {i:>2}  {winpath.dirname(c.path):<44} {c.rule:<36} {res}")
        if r.not_searched:
            out.append(f"    {r.not_searched}")
    out.extend(tail_lines(r))
    if r.note:
        out.append(f"  note: {r.note}")
    return out
