"""What `dlltrace deps` and `dlltrace check` print: JSON (schemas/static-v1.json, docs/static.md), the
tree drawn with rich, Markdown, and check's one-line summary and table. Made from diagnosis/static.py's typed
results only."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text as RichText
from rich.tree import Tree

from dlltrace import winpath
from dlltrace.classify import DllClass, classify
from dlltrace.model import CAUSE_ERROR, Fix, Node
from dlltrace.render.fixwords import pip_install
from dlltrace.render.optional import optional_words
from dlltrace.render.escape import escape_code_span as code, escape_prose as prose, escape_table_cell as cell
from dlltrace.render.escape import escape_terminal
from dlltrace.render.wrap import Grid, wrap_text


class Text(RichText):
    """rich's Text whose words are shown, not obeyed: a name from a wheel or a DLL (an import table's DLL names, a
    member's, a RECORD's or METADATA's) may hold an ESC sequence, a newline or a bidi control that would retitle or
    clear a terminal or fake a line of the text: every control, lone surrogate and bidi control becomes its escape
    (escape.escape_terminal), in the text given and in each piece appended. (Text("\n"), the line break the
    wrapped lines are joined with, is the renderer's own.)"""

    def __init__(self, text: str = "", *args: Any, **kw: Any) -> None:
        super().__init__(text if text == "\n" else escape_terminal(text), *args, **kw)

    def append(self, text: "str | RichText", style: Any = None) -> "Text":
        super().append(escape_terminal(text) if isinstance(text, str) else text, style)
        return self
from dlltrace.diagnosis.static import (CheckResult, CheckRow, DepsResult, LoadAnalysis, Problem, Target, check_diagnosis,
                                       static_diagnosis)

# The levels of an import tree the text and Markdown renderings nest. Each level is indented once more, so a chain
# costs its depth squared in characters (and rich's Tree sums every line's guides: a 10,000-level chain took 48 s;
# at 160 columns a line wraps from about 30 levels down). Below this depth a branch is one line that counts
# its DLLs; the problems are listed whatever their depth, and --json holds every level (issue 28, docs/limits.md).
MAX_SHOWN_DEPTH = 24
SCHEMA = "dlltrace-static"
SCHEMA_VERSION = 1

STATUS_WORDS = {
    "loaded": "found", "already_loaded": "already loaded", "missing": "MISSING", "wrong_machine": "WRONG MACHINE",
    "missing_export": "MISSING EXPORT", "missing_ordinal": "MISSING ORDINAL", "not_pe": "NOT A PE FILE",
    "access_denied": "ACCESS DENIED", "apiset_no_host": "API SET WITH NO HOST", "failed": "FAILED",
}


def _shown(target: Target, path: Optional[str]) -> str:
    """A path as people read it: package-relative for the target's files, else as it is."""
    if not path:
        return ""
    p = winpath.normalize(path)
    if p.lower().startswith(target.root.lower() + "\\"):
        return p[len(target.root) + 1:]
    return p


# --- deps: the tree as data ------------------------------------------------------------------------------
def _status(a: LoadAnalysis, node: Node) -> str:
    if node.path:
        p = a.standins.get(winpath.key(node.path))
        if p is not None:
            return p.kind
    if node.cause:
        cause = {"not_found": "missing", "bad_machine": "wrong_machine"}.get(node.cause, node.cause)
        return cause if cause in STATUS_WORDS else "failed"
    if node.error:
        return "failed"
    if node.how_kind in ("already_loaded", "loaded_same_file", "loaded_candidate"):
        return "already_loaded"
    return "loaded"


def _node_class(target: Target, a: LoadAnalysis, node: Node) -> DllClass:
    name = winpath.basename(node.name)
    bundled = bool(target.file_named(name))
    version = None
    if node.path and winpath.key(node.path) not in a.standins:
        f = target.world.file(node.path)
        if f is not None and f.pe is not None:
            version = f.pe.file_version
    return classify(name, bundled=bundled, file_version=version)


def node_dict(target: Target, a: LoadAnalysis, node: Node) -> dict:
    status = _status(a, node)
    path = None if status == "missing" else node.path
    t = target.world.target_file(path) if path else None
    d: dict = {
        "name": winpath.basename(node.name), "via": node.via, "status": status, "path": path,
        "source": t.source if t is not None else None,
        "how": node.how if status != "missing" else "", "how_kind": node.how_kind if status != "missing" else "",
        "class": _node_class(target, a, node).to_dict(), "error": node.error,
    }
    if status != "already_loaded":
        d["children"] = [node_dict(target, a, c) for c in node.children]
    else:
        d["children"] = []
    return d


def load_dict(target: Target, a: LoadAnalysis) -> dict:
    tree = a.result.tree
    return {
        "root": a.root, "source": a.source, "context": a.context.to_dict(),
        "error": a.result.error if not a.problems else (a.result.error or _first_error(a)),
        "ok": a.ok, "rounds": a.rounds,
        "tree": node_dict(target, a, tree) if tree is not None else None,
        "problems": [p.to_dict() for p in a.problems],
        "delay_imports": [{"importer": d.importer, "dll": d.dll, "error": d.error, "path": d.path, "how": d.how,
                           "how_kind": d.how_kind, "class": d.klass.to_dict()} for d in a.delay],
        **({"optional_by": a.optional_by} if a.optional_by else {}),
    }


def _first_error(a: LoadAnalysis) -> int:

    kind = a.problems[0].kind
    errors: dict[str, int] = {str(k): v for k, v in CAUSE_ERROR.items()}
    errors["missing"], errors["wrong_machine"] = errors["not_found"], errors["bad_machine"]
    return errors.get(kind, 126)


def _world_dict(target: Target) -> dict:
    s = target.world.system
    return {"system": s.version or "live", "machine": target.machine, "python": target.python,
            "root": target.root, "kind": target.kind, "vc_runtime": target.world.vc_runtime}


def deps_json_indent(r: DepsResult) -> Optional[int]:
    """2, or None (compact JSON) when an import tree is deeper than MAX_SHOWN_DEPTH: indented, each level's lines
    carry its depth in spaces, and a 2,000-level chain's JSON was 137 MB (quadratic), compact it is linear."""
    for a in r.loads:
        if a.result.tree is None:
            continue
        todo = [(a.result.tree, 0)]
        while todo:
            node, depth = todo.pop()
            if depth > MAX_SHOWN_DEPTH:
                return None
            todo.extend((c, depth + 1) for c in node.children)
    return 2


def deps_dict(r: DepsResult) -> dict:
    return {"format": SCHEMA, "schema": SCHEMA, "version": SCHEMA_VERSION, "command": "deps", "target": r.target.given,
            "world": _world_dict(r.target), "ok": not r.failing,
            "loads": [load_dict(r.target, a) for a in r.loads],
            "summary": _deps_counts(r), "diagnosis": static_diagnosis(r).to_dict()}


def _deps_counts(r: DepsResult) -> dict:
    counts: dict[str, int] = {}
    for p in r.problems:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    missing = sorted({p.dll.lower() for p in r.problems if p.kind == "missing"})
    return {"loads": len(r.loads), "failed": sum(1 for a in r.loads if not a.ok), "problems": counts,
            "missing": missing}


# --- deps: text and Markdown -------------------------------------------------------------------------------
def _label(target: Target, a: LoadAnalysis, node: Node) -> Text:
    status = _status(a, node)
    cls = _node_class(target, a, node)
    t = Text(winpath.basename(node.name), style="bold" if node.via == "call" else "")
    if status == "missing":
        t.append("  MISSING", style="bold red")
    elif status in STATUS_WORDS and status not in ("loaded", "already_loaded"):
        t.append(f"  {STATUS_WORDS[status]}", style="bold red")
        if node.path:
            t.append(f"  {_shown(target, node.path)}", style="dim")
    elif node.how_kind == "apiset":
        t.append(f"  → {node.how.split('→')[-1].strip()}", style="dim")
    elif status == "already_loaded":
        t.append(f"  already loaded ({_shown(target, node.path)})", style="dim")
    else:
        t.append(f"  {_shown(target, node.path)}", style="cyan")
        t.append(f"  [{node.how}]", style="dim")
    t.append(f"  {cls.label}", style="magenta")
    return t


def _expands(a: LoadAnalysis, node: Node) -> bool:
    """Whether a rendering shows the node's children (an already loaded DLL's and an API set's are not)."""
    return _status(a, node) != "already_loaded" and node.how_kind != "apiset"


def _hidden(a: LoadAnalysis, node: Node) -> int:
    """How many DLLs a rendering would show under `node` (a loop: the branch may be thousands deep)."""
    count = 0
    todo = list(node.children)
    while todo:
        c = todo.pop()
        count += 1
        if _expands(a, c):
            todo.extend(c.children)
    return count


def _hidden_words(n: int) -> str:
    return f"… {n} more DLL{'s' if n != 1 else ''} below, {MAX_SHOWN_DEPTH} levels down (--json lists every level)"


def _add(target: Target, a: LoadAnalysis, node: Node, tree: Tree, depth: int = 1,
         fit: Optional[Callable[..., RichText]] = None) -> None:
    if depth > MAX_SHOWN_DEPTH:
        tree.add(Text(_hidden_words(_hidden(a, node)), style="dim"))
        return
    for c in node.children:
        label = _label(target, a, c)
        branch = tree.add(fit(label, 4 * depth) if fit is not None else label)  # (a tree guide: 4 cells a level)
        if _expands(a, c):
            _add(target, a, c, branch, depth + 1, fit)


def _fitter(console: Console) -> Callable[..., RichText]:
    """A line wrapped to the console's width less `taken` cells (a tree's guides) by render/wrap.py: at spaces,
    else right after a path separator, never inside a DLL's or a folder's name (rich would fold a long path
    anywhere). `soft`: a line a pipe gets whole (a problem, the summary: grep finds it), wrapped only on a terminal
    or when COLUMNS gives the width."""
    def fit(text: RichText, taken: int = 0, hang: int = 2, soft: bool = False) -> RichText:
        if soft and not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            return text
        return Text("\n").join(wrap_text(text, max(20, console.width - taken), hang))
    return fit


def problem_line(target: Target, p: Problem) -> str:
    who = f" (needed by {', '.join(p.needed_by)})" if p.needed_by else ""
    cls = f" [{p.klass.label}]" if p.klass else ""
    if p.kind == "missing":
        tried = "; searched " + ", ".join(f"{s.rule}" for s in p.searched) if p.searched else ""
        where = f"; the package has it at {_shown(target, p.elsewhere[0])}" if p.elsewhere else ""
        return f"missing {p.dll}{cls}{who}{tried}{where}{record_words(p)}"
    return f"{p.kind.replace('_', ' ')} {p.dll}{cls}{who}: {p.detail}{record_words(p)}"


def record_words(p: Problem) -> str:
    """What an installed folder's RECORD says of a problem's file (diagnosis/static.rule_record_of_installed_files)."""
    pin = f"{p.owner}=={p.owner_version}" if p.owner_version else p.owner
    # (with the pip of the Python whose site-packages it is, when it is known: not the first pip on PATH)
    how = pip_install(Fix("reinstall", "install", package=f"--force-reinstall --no-deps {pin}", exe=p.owner_python), str)
    fix = f"reinstall {p.owner} ({how})"
    if p.record == "missing":
        return f"; {p.owner} {p.owner_version}'s RECORD lists {p.record_path}, and it is gone: {fix}"
    if p.record == "differs":
        return f"; it is not the file {p.owner} {p.owner_version} installed (it differs from its RECORD's digest): {fix}"
    return ""


def print_deps(r: DepsResult, console: Console) -> None:
    target = r.target
    fit = _fitter(console)
    console.print(fit(Text(f"dlltrace deps {target.given}", style="bold")), soft_wrap=True)
    vc = " with the VC++ 2015-2022 runtime" if target.world.vc_runtime and target.world.system.version else ""
    bits = " (32-bit, x86: System32 is SysWOW64 for it)" if target.machine == "x86" else ""
    console.print(fit(Text(f"world: {target.world.system.version or 'this machine'}{vc}, Python {target.python}{bits} "
                           f"at {winpath.dirname(target.root) if target.kind != 'folder' else target.root}",
                           style="dim")), soft_wrap=True)
    for a in r.loads:
        console.print()
        root = _label(target, a, a.result.tree) if a.result.tree is not None else Text(a.root)
        tree = Tree(fit(root, 0, 0))
        if a.result.tree is not None:
            _add(target, a, a.result.tree, tree, fit=lambda t, taken: fit(t, taken, 0))
        console.print(fit(Text(f"{_shown(target, a.root)}: {a.context.text}", style="bold")), soft_wrap=True)
        console.print(tree)
        for d in a.delay:
            console.print(fit(Text(f"  delay-load {d.dll} (by {d.importer}): "
                                   + (f"{_shown(target, d.path)} [{d.how}]" if not d.error else "MISSING")
                                   + f"  {d.klass.label}", style="dim" if not d.error else "red")), soft_wrap=True)
        for p in a.problems:
            console.print(fit(Text("  ✗ " + problem_line(target, p), style="red"), 0, 4, soft=True), soft_wrap=True)
        if a.problems and a.optional_by:
            console.print(fit(Text(f"  (optional: {optional_words(a.optional_by)}; the package does without it)",
                                   style="dim"), 0, 4, soft=True), soft_wrap=True)
        if a.ok:
            console.print(Text("  ✓ loads", style="green"))
    console.print()
    console.print(fit(Text(deps_summary(r), style="bold"), soft=True), soft_wrap=True)


def deps_summary(r: DepsResult) -> str:
    c = _deps_counts(r)
    if not r.problems:
        return f"{c['loads']} load{'s' if c['loads'] != 1 else ''} resolved, no problem"
    parts = [f"{n} {k.replace('_', ' ')}" for k, n in sorted(c["problems"].items())]
    miss = f": {', '.join(c['missing'])}" if c["missing"] else ""
    optional = [a for a in r.loads if a.problems and a.optional_by]
    some = ""
    if optional:
        kinds = ", ".join(dict.fromkeys(optional_words(a.optional_by) for a in optional))
        some = (f"; {'all' if len(optional) == c['failed'] else len(optional)} of them optional ({kinds}), which the "
                "package does without")
    return f"{c['failed']} of {c['loads']} load{'s' if c['loads'] != 1 else ''} would fail ({', '.join(parts)}){miss}{some}"


def deps_markdown(r: DepsResult) -> str:
    target = r.target
    out = [f"# dlltrace deps {code(target.given)}", "",
           f"World: {prose(target.world.system.version or 'this machine')}, Python {prose(str(target.python))}.", ""]
    for a in r.loads:
        out += [f"## {code(_shown(target, a.root))}", "", f"Loaded as {prose(a.context.text)}.", ""]
        if a.result.tree is not None:
            out += _md_tree(target, a, a.result.tree, 0)
        out.append("")
        if a.problems:
            out += ["| problem | DLL | class | needed by | detail |", "|---|---|---|---|---|"]
            for p in a.problems:
                out.append(f"| {cell(prose(p.kind, False))} | {cell(code(p.dll))} | {cell(prose(p.klass.label if p.klass else '', False))} | "
                           f"{cell(prose(', '.join(p.needed_by), False))} | {cell(prose(p.detail + record_words(p), False))} |")
            if a.optional_by:  # (as print_deps says it: a file loaded only on demand)
                out += ["", prose(f"Optional ({optional_words(a.optional_by)}): the package does without it.")]
        else:
            out.append("Loads: no problem.")
        out.append("")
    out.append(f"**{prose(deps_summary(r))}**")
    return "\n".join(out) + "\n"


def _md_tree(target: Target, a: LoadAnalysis, node: Node, depth: int) -> list[str]:
    status = _status(a, node)
    cls = _node_class(target, a, node)
    where = "" if status == "missing" else f" {code(_shown(target, node.path))} ({prose(node.how)})" if node.path else ""
    line = (f"{'  ' * depth}- {code(winpath.basename(node.name))}{where} — {prose(STATUS_WORDS.get(status, status))}, "
            f"{prose(cls.label)}")
    out = [line]
    if _expands(a, node) and node.children:
        if depth + 1 > MAX_SHOWN_DEPTH:
            out.append(f"{'  ' * (depth + 1)}- {_hidden_words(_hidden(a, node))}")
        else:
            for c in node.children:
                out += _md_tree(target, a, c, depth + 1)
    return out


# --- check ---------------------------------------------------------------------------------------------------
def _check_world(r: CheckResult) -> dict:
    if r.policy is None:
        return _world_dict(r.target)
    return {"system": f"{r.policy} (auditwheel's policy)", "machine": r.target.machine, "python": r.target.python,
            "root": r.target.root, "kind": r.target.kind, "vc_runtime": False, "policy": r.policy}


def check_dict(r: CheckResult) -> dict:
    o = r.options
    return {"format": SCHEMA, "schema": SCHEMA, "version": SCHEMA_VERSION, "command": "check", "target": r.target.given,
            "world": _check_world(r), "ok": r.ok, "allow": list(r.allow),
            "exclude": list(o.exclude), "assume_installed": list(o.assume_installed), "allow_pure": o.allow_pure,
            "dist": r.target.dist or None, "requires": list(r.target.requires),
            "summary": check_summary(r),
            "cuda_majors": list(r.cuda_majors), "vcruntime_required": r.vcruntime_required,
            "vcruntime_bundled": r.vcruntime_bundled,
            "files": [{"path": f.path, "machine": f.machine, "linker_version": f.linker_version,
                       "file_version": f.file_version, "error": f.error, "member": f.member,
                       "record_line": f.record_line} for f in r.files],
            "dlls": [row.to_dict() for row in r.rows],
            "problems": [p.to_dict() for p in r.problems],
            "optional_problems": [p.to_dict() for p in r.optional_problems],
            "diagnosis": check_diagnosis(r).to_dict()}


def check_summary(r: CheckResult) -> str:
    n = len(r.files)
    cuda = f"; CUDA {'/'.join(str(m) for m in r.cuda_majors)}" if r.cuda_majors else ""
    vc = f"; needs VC++ runtime >= {r.vcruntime_required}" if r.vcruntime_required else ""
    # (an older VC++ runtime a file imports -- msvcr120.dll, VC++ 2013 -- is no part of the 2015-2022 one)
    older = sorted({f"VC++ runtime {row.klass.vc_version} ({row.dll})" for row in r.rows if row.status == "allowed"
                    and row.klass.kind == "vcruntime" and row.klass.vc_version.split(".")[0] not in ("", "14")})
    vc += f"; needs {', '.join(older)}, not in the VC++ 2015-2022 Redistributable" if older else ""
    given = sorted({row.provider.dist for row in r.rows if row.provider is not None and row.status in ("required", "given")})
    assumed = sorted({row.provider.dist for row in r.rows if row.provider is not None and row.status == "assumed"})
    vc += f"; with {', '.join(given)} given" if given else ""
    vc += f"; assuming {', '.join(assumed)} installed" if assumed else ""
    what = "ELF" if r.policy else "PE"
    if r.ok and not r.files:
        return f"PASS {r.target.given}: no binary to check (--allow-pure)"
    if r.ok:
        optional = sum(1 for row in r.rows if row.status == "optional")
        what_lib = "librar" + ("ies" if optional != 1 else "y") if r.policy else "DLL" + ("s" if optional != 1 else "")
        some = f"; {optional} {what_lib} only optional files need" if optional else ""
        if r.optional_problems:  # (a file loaded only on demand whose own load fails: deps goes on past it)
            n_opt = len(r.optional_problems)
            kinds = ", ".join(dict.fromkeys(p.kind.replace("_", " ") for p in r.optional_problems))
            some += f"; {n_opt} problem{'s' if n_opt != 1 else ''} only optional files have ({kinds})"
        if r.policy:
            return (f"PASS {r.target.given}: {n} ELF file{'s' if n != 1 else ''}, every library bundled, a {r.policy} "
                    f"system library or allowed{some}{vc}")
        return (f"PASS {r.target.given}: {n} PE file{'s' if n != 1 else ''}, every import bundled, Windows, an API set "
                f"or allowed{some}{cuda}{vc}")
    counts: dict[str, int] = {}
    for p in r.problems:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    parts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(counts.items()))
    return f"FAIL {r.target.given}: {n} {what} file{'s' if n != 1 else ''}, {parts}{cuda}{vc}"


_STATUS_ORDER = {"not_allowed": 0, "required_not_given": 0, "optional": 1, "allowed": 1, "assumed": 1, "required": 2,
                 "given": 2, "system": 3, "python": 4, "bundled": 5, "windows": 6, "apiset": 7}

def status_words(row: CheckRow) -> str:
    """A row's status in words: "provided by torch (required)", "torch: required, not given", "not allowed"."""
    if row.status == "optional":
        return f"optional ({optional_words(row.optional_by or '')})"
    p = row.provider
    if p is not None:
        if row.status == "required":
            return f"provided by {p.dist} (required)"
        if row.status == "given":
            return f"provided by {p.dist} (given, not required)"
        if row.status == "assumed":
            return f"provided by {p.dist} (required, assumed installed)"
        if row.status == "required_not_given":
            return f"{p.dist}: required, not given"
        if row.status == "allowed":
            return f"allowed ({p.dist}, required)"
    return row.status.replace("_", " ")


def print_check(r: CheckResult, console: Console, all_rows: bool = False) -> None:
    fit = _fitter(console)
    heads = ("library" if r.policy else "DLL", "class", "status", "needed by")
    rows = []
    for row in sorted(r.rows, key=lambda x: (_STATUS_ORDER.get(x.status, 9), x.dll.lower())):
        if not all_rows and row.status in ("windows", "apiset"):
            continue
        names = list(dict.fromkeys(winpath.basename(n) for n in row.needed_by))
        who = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        style = "red" if row.status in ("not_allowed", "required_not_given") else ""
        rows.append((Text(row.dll, style=style), Text(row.klass.label), Text(status_words(row)),
                     Text(who + (" (delay-load)" if row.delay_only else ""))))
    if rows and (console.is_terminal or os.environ.get("COLUMNS", "").isdigit()):
        # (a terminal: columns that shrink to its width and never cut a name, else a paragraph a row: render/wrap.py)
        grid = Grid(["left"] * 4, header=[Text(h, style="bold") for h in heads])
        for cells in rows:
            grid.add_row(*cells)
        console.print(grid)
    elif rows:
        table = Table(show_edge=False, header_style="bold")
        for col in heads:
            table.add_column(col)
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
    hidden = sum(1 for row in r.rows if row.status in ("windows", "apiset"))
    if hidden and not all_rows:
        console.print(Text(f"({hidden} Windows and API-set imports not shown: --all shows them)", style="dim"))
    for p in r.problems:
        if p.kind not in ("not_allowed",):
            kind = p.kind.replace("_", " ")
            words = (p.detail if p.detail.startswith(kind + ":") else f"{kind}: {p.detail}") + record_words(p)
            console.print(fit(Text(f"✗ {words}", style="red"), soft=True), soft_wrap=True)
    for p in r.optional_problems:  # (no failure: the file is loaded only on demand, and done without)
        words = f"{p.kind.replace('_', ' ')}: {p.detail}" + record_words(p)
        console.print(fit(Text(f"· optional ({optional_words(p.optional_by)}): {words}; the package does without it",
                               style="dim"), soft=True), soft_wrap=True)
    hint = next((p.detail.split("; ", 1)[1] for p in r.problems if p.kind == "not_allowed" and "; " in p.detail), None)
    if hint:  # (the not-allowed rows: the requirements not given that might provide them)
        console.print(fit(Text(f"({hint})", style="dim"), soft=True), soft_wrap=True)
    console.print(fit(Text(check_summary(r), style="bold green" if r.ok else "bold red"), soft=True), soft_wrap=True)
