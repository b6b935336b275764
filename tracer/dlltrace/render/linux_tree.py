"""The dependency tree of a Linux load (loader/linux/tree.py's DepNode) drawn as libtree draws it: each library
with the rule that found it in brackets, lddtree's `=> path`, and under a library ld.so could not find, the
folders it tried in their order, each with its rule:

    libtop.so => /opt/app/lib/libtop.so
    ├── libmissing.so.1 ✗ not found
    │   ┊ ld.so looked in, in this order:
    │   ┊   /opt/app/lib/../d1          [runpath of libtop.so]  not there
    │   ┊   /usr/lib/x86_64-linux-gnu   [default path]          not there  (and 5 glibc-hwcaps/tls subfolders)
    ├── libb.so => /opt/app/d1/libb.so [runpath $ORIGIN/../d1]
    │   └── libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 [ld.so.cache]
    └── libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 [ld.so.cache] (shown above)

The failing branch is first (the tree's order); a library drawn before is not expanded again; what the bounds
(limits.py tree_depth, tree_width) left out of the tree is one line. Lines only: the caller escapes them
for where they go (escape_terminal, escape_code_block).
"""

from __future__ import annotations

import posixpath
from typing import Optional

from dlltrace.loader.linux.tree import DepNode
from dlltrace.render.diagnosis import RESULT_WORDS, folder_groups
from dlltrace.diagnosis.result import Tried

# the rule of a search folder (engine.SearchGroup.rule: "RUNPATH of /x/libtop.so") as the tree tags a library
RULE_TAGS = {"LD_LIBRARY_PATH": "LD_LIBRARY_PATH", "system search path": "default path", "cache": "ld.so.cache",
             "path": "direct"}
FAIL_WORDS = {"not_found": "not found", "wrong_class": "wrong ELF class", "bad_elf": "not an ELF file",
              "missing_version": "lacks a symbol version"}


def rule_tag(rule: str) -> str:
    """"RUNPATH of /x/libtop.so" -> "runpath of libtop.so"; "system search path" -> "default path"."""
    for word in ("RUNPATH", "RPATH"):
        if rule.startswith(word + " of "):
            return f"{word.lower()} of {posixpath.basename(rule[len(word) + 4:])}"
    return RULE_TAGS.get(rule, rule)


def reason_tag(n: DepNode, parent: Optional[DepNode]) -> str:
    """The bracketed reason of a library found: "[runpath]" (its needer's own), "[rpath of libtop.so]" (another
    object's DT_RPATH up the chain), with the element as written when it had $ORIGIN ("[runpath $ORIGIN/../lib]"),
    "[LD_LIBRARY_PATH]", "[ld.so.cache]", "[default path]", "[direct]", "[already loaded]"."""
    if not n.reason:
        return ""
    if n.reason in ("rpath", "runpath"):
        tag = n.reason
        if n.owner and (parent is None or n.owner != parent.path):
            tag += f" of {posixpath.basename(n.owner)}"
        if n.entry:
            tag += f" {n.entry}"
        return f"[{tag}]"
    return "[already loaded]" if n.reason == "loaded" else f"[{n.reason}]"


def tried_lines(n: DepNode) -> list[str]:
    """A failure's folders in the order ld.so tried them, one line each with its rule and what it found; a step
    that tried no file says why (ld.so.cache without an entry for the name, every folder of a step known missing)."""
    tried = [Tried(c.path, c.rule, c.result) for c in n.tried]
    if not tried and not n.steps:
        return []
    groups = folder_groups(tried, "linux")
    width = max([len(g.folder) for g in groups] + [len("ld.so.cache")])
    tag_width = max([len(f"[{rule_tag(g.rule)}]") for g in groups] + [len(f"[{rule_tag(s)}]") for s in n.steps])
    words = RESULT_WORDS["linux"]
    out = ["ld.so looked in, in this order:"]
    steps = list(dict.fromkeys([*n.steps, *(g.rule for g in groups)]))
    for step in steps:
        tag = f"[{rule_tag(step)}]"
        mine = [g for g in groups if g.rule == step]
        if not mine:
            what = "no entry for it" if step == "cache" else "every folder known missing (skipped)"
            out.append(f"  {('ld.so.cache' if step == 'cache' else '-').ljust(width)}  {tag.ljust(tag_width)}  {what}")
        for g in mine:
            more = f"  (and {g.subfolders} glibc-hwcaps/tls subfolders)" if g.subfolders else ""
            out.append(f"  {g.folder.ljust(width)}  {tag.ljust(tag_width)}  {words.get(g.result, g.result)}{more}")
    return out


def node_label(n: DepNode, parent: Optional[DepNode]) -> str:
    if n.path is None:
        what = FAIL_WORDS.get(n.cause, "failed")
        detail = "" if n.cause == "not_found" else f": {n.error}"
        return f"{n.name} ✗ {what}{detail}"
    head = n.name if n.path == n.name else f"{n.name} => {n.path}"
    tag = reason_tag(n, parent)
    tag = "" if parent is None and n.reason == "direct" else tag
    line = f"{head} {tag}".rstrip()
    if n.error:
        line += f" ✗ {FAIL_WORDS.get(n.cause, 'failed')}: {n.error}"
    if n.seen:  # (its reason and path are on the line above)
        return f"{n.name} (shown above)"
    return line


def tree_lines(root: DepNode, folders: bool = True) -> list[str]:
    """The tree as lines, libtree's box drawing; a failure's folders under it behind a dotted bar (`folders`);
    what a bound left out (loader/linux/tree.py dep_tree: limits.py tree_depth, tree_width) as one line."""
    out: list[str] = [node_label(root, None)]
    if root.path is None and folders:
        out += ["┊ " + x for x in tried_lines(root)]

    def walk(n: DepNode, prefix: str) -> None:
        for i, k in enumerate(n.children):
            last = i == len(n.children) - 1 and not n.more
            out.append(prefix + ("└── " if last else "├── ") + node_label(k, n))
            below = prefix + ("    " if last else "│   ")
            if k.path is None and folders:
                out.extend(below + "┊ " + x for x in tried_lines(k))
            walk(k, below)
        if n.more:
            what = "below" if n.cut == "tree_depth" else "more"
            out.append(f"{prefix}└── … {n.more} {what} (past {n.cut}: dlltrace --limit {n.cut}=N draws more)")

    walk(root, "")
    return out


def tree_libraries(root: DepNode) -> list[DepNode]:
    """Every library of the tree once, in drawing order (the root first): what `ldd` lists."""
    out: list[DepNode] = []

    def walk(n: DepNode) -> None:
        if not n.seen:
            out.append(n)
        for k in n.children:
            walk(k)

    walk(root)
    return out


def tree_dict(n: DepNode) -> dict:
    """The tree as JSON (tree_schema: `tree` in static-linux-v1.json)."""
    return {"name": n.name, "path": n.path, "reason": n.reason or None, "owner": n.owner or None,
            "entry": n.entry or None, "error": n.error or None, "cause": n.cause or None,
            "tried": [{"path": c.path, "rule": c.rule, "result": c.result} for c in n.tried], "seen": n.seen,
            "children": [tree_dict(k) for k in n.children], "more": n.more, "cut": n.cut or None}


def tree_schema() -> dict:
    """The JSON Schema of tree_dict's node (`$defs.DepNode` of static-linux-v1.json; a test checks they are one)."""
    s, b = {"type": "string"}, {"type": "boolean"}

    def opt(t: dict) -> dict:
        return {"anyOf": [t, {"type": "null"}]}

    return {"type": "object", "additionalProperties": False,
            "required": ["name", "path", "reason", "owner", "entry", "error", "cause", "tried", "seen", "children",
                         "more", "cut"],
            "properties": {
                "name": s, "path": opt(s),
                "reason": opt({"enum": ["rpath", "runpath", "LD_LIBRARY_PATH", "ld.so.cache", "default path", "direct",
                                        "loaded"]}),
                "owner": opt(s), "entry": opt(s), "error": opt(s),
                "cause": opt({"enum": ["not_found", "wrong_class", "bad_elf", "missing_version"]}),
                "tried": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False, "required": ["path", "rule", "result"],
                    "properties": {"path": s, "rule": s, "result": s}}},
                "seen": b, "children": {"type": "array", "items": {"$ref": "#/$defs/DepNode"}},
                "more": {"type": "integer", "minimum": 0}, "cut": opt({"enum": ["tree_depth", "tree_width"]})}}
