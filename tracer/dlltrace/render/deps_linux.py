"""`dlltrace deps` of Linux targets in words and JSON (schemas/static-linux-v1.json): one shared object's closure
(loader/linux/static.py's StaticResult), and a folder's or a wheel's objects (diagnosis/deps_linux.py's FolderDeps)."""

from __future__ import annotations

from typing import Any, Optional

from dlltrace.diagnosis.deps_linux import FolderDeps
from dlltrace.loader.linux.policy import Policy
from dlltrace.loader.linux.static import StaticResult
from dlltrace.render.escape import escape_code_block, escape_terminal
from dlltrace.render.linux_tree import tree_dict, tree_lines
from dlltrace.render.optional import optional_words


def elf_doc(target: str, r: StaticResult) -> dict[str, Any]:
    """The --json document of one shared object's closure (schemas/static-linux-v1.json)."""
    return {"format": "dlltrace-static-linux", "schema": "dlltrace-static-linux", "version": 1, "command": "deps",
            "target": target, "loaded": r.loaded, "ok": not r.problems,
            "problems": [{"name": p.name, "cause": p.cause, "needed_by": p.needed_by, "error": p.error,
                          "candidates": list(p.candidates)} for p in r.problems],
            "tree": tree_dict(r.tree) if r.tree is not None else None}


def elf_text(target: str, r: StaticResult, markdown: bool = False) -> str:
    lines = [f"dlltrace deps {target}: " + (f"{len(r.loaded)} objects load, no problem" if not r.problems
                                             else f"{len(r.problems)} problem(s)"), ""]
    lines += tree_lines(r.tree) if r.tree is not None else [f"  {x}" for x in r.loaded]
    # (a name of the closure cannot close the block, nor fake a line: render/escape.py)
    return "\n".join(escape_code_block(lines) if markdown else [escape_terminal(x) for x in lines])


def folder_doc(shown: str, d: FolderDeps, policy: Optional[Policy]) -> dict[str, Any]:
    """The --json document of a folder's (a wheel's) objects: each object's closure, those another one loaded."""
    docs = [dict(elf_doc(rel, r), file=rel) for rel, r in d.results]
    doc: dict[str, Any] = {
        "format": "dlltrace-static-linux", "schema": "dlltrace-static-linux", "version": 1, "command": "deps",
        "target": shown, "loaded": list(dict.fromkeys(x for _, r in d.results for x in r.loaded)),
        "ok": not d.needed, "problems": [p for x in docs for p in x["problems"]], "tree": None,
        "objects": [{**{k: x[k] for k in ("file", "loaded", "ok", "problems", "tree")},
                     **({"optional_by": d.optional[x["file"]]} if x["file"] in d.optional else {})} for x in docs],
        "reached": [{"file": rel, "loaded_by": root} for rel, root in d.reached]}
    if policy is not None:
        doc["policy"] = f"{policy.name}_{policy.arch}"
        doc["outside_policy"] = [{"name": o.name, "path": o.path, "needed_by": o.needed_by,
                                  "version": o.version or None, "newest": o.newest or None} for o in d.outside]
        doc["wrong_machine"] = [{"file": rel, "machine": m} for rel, m in d.foreign]
    return doc


def folder_text(shown: str, d: FolderDeps, policy: Optional[Policy], markdown: bool = False) -> str:
    """A folder's (a wheel's) objects in words: a line each, what was found outside the policy, the objects of another
    machine, then the tree of each that has a problem."""
    bad = d.bad
    total = len(d.results) + len(d.reached)
    outside, foreign = d.outside, d.foreign
    lines = [f"dlltrace deps {shown}: {total} shared object{'s' if total != 1 else ''}, "
             + (f"{len(bad) + len(d.failing)} with a problem" if bad else "every one loads, no problem")
             + (f" ({len(d.optional)} of them optional, which the package does without)" if d.optional else "")
             + (f"; {len({(o.name, o.version) for o in outside})} found on this machine outside the wheel's policy "
                "(below)" if outside else "")
             + (f"; {len(foreign)} not for the machine its tag names (below)" if foreign else ""), ""]
    for rel, r in d.results:
        n = len(r.loaded)
        why = f" (optional: {optional_words(d.optional[rel])}; the package does without it)" if rel in d.optional else ""
        lines.append(f"  {'✗' if r.problems else '✓'} {rel}: " + (f"{len(r.problems)} problem(s){why}" if r.problems
                                                                  else f"{n} object{'s' if n != 1 else ''} load{'s' if n == 1 else ''}"))
    lines += [f"  ✗ {rel}: loaded by {root}, as it loads it: a library it needs fails (below)" if rel in d.failing
              else f"  ✓ {rel}: loaded by {root}, as it loads it" for rel, root in d.reached]
    if outside and policy is not None:
        libs = sorted({o.name for o in outside if not o.version})
        versions = sorted({o.version for o in outside if o.version})
        what = " and ".join(x for x in (f"{len(libs)} librar{'y' if len(libs) == 1 else 'ies'}" if libs else "",
                                         f"{len(versions)} symbol version{'s' if len(versions) != 1 else ''}"
                                         if versions else "") if x)
        lines += ["", f"Found on this machine, outside the wheel's policy ({policy.name}_{policy.arch}): {what}. "
                  "These load here; a machine without them fails (`dlltrace check` fails the wheel for each):"]
        for o in outside:
            lines.append(f"  ! {o.name} {o.version}, needed by {o.needed_by}: newer than the policy allows (its newest "
                         f"{o.version.partition('_')[0]}: {o.newest}); here from {o.path}" if o.version else
                         f"  ! {o.name}, needed by {o.needed_by}: not a {policy.name} system library; here from {o.path}")
    if foreign and policy is not None:
        lines += ["", f"Not for the machine the wheel's tag names ({policy.arch}): pip installs it on {policy.arch} "
                  "machines, where these do not load (`dlltrace check` fails the wheel for each):"]
        lines += [f"  ! {rel}: {m}" for rel, m in foreign]
    for rel, r in bad:
        lines += ["", f"{rel}:"] + (tree_lines(r.tree) if r.tree is not None else [])
    return "\n".join(escape_code_block(lines) if markdown else [escape_terminal(x) for x in lines])
