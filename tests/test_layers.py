"""The layers of tracer/dlltrace, downwards only (docs/architecture.md), checked from the source.

Every module of the package is parsed (ast) and every import of a dlltrace module counts: those at
the top, those inside functions and methods, and those under `if TYPE_CHECKING:` (none is excluded).
The layer table and the Windows / Linux lists are read from pyproject.toml's [tool.importlinter]
contracts, the ones `lint-imports` checks, so there is one table. Checked:

(a) the module graph has no cycle (a cycle found is printed, module by module);
(b) every import goes to the same layer or a lower one;
(c) no Windows module imports a Linux one, and no Linux module a Windows one;
(d) an import inside a function (a lazy one, to keep start-up light) is at the command layer only.

tracer/dlltrace/bootstrap/ is not a package: it runs by path inside the traced Python, and must import
nothing of dlltrace (checked); it is in no layer. `checks` takes a graph, so the last tests feed it
small synthetic graphs with a cycle, an upward import, a Windows -> Linux import: they must be reported.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterable, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (the package's own dependency there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tracer" / "dlltrace"
NOT_PACKAGES = ("bootstrap",)  # run by path in the traced program (see above)
ROOT_MODULE = "dlltrace"  # the package's __init__: the public API (dlltrace/api.py, lazily), the command layer; import-linter leaves it out

Graph = dict[str, set[str]]


# --- the tables, from the import-linter contracts ------------------------------------------------------------
def contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def layer_table() -> list[list[str]]:
    """The layers, top first: each a list of module names (a name stands for it and its submodules)."""
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    return [[m.strip() for m in layer.replace("|", ":").split(":")] for layer in layers["layers"]]


def platform_lists() -> tuple[list[str], list[str]]:
    """(the Windows modules, the Linux ones), from the two forbidden contracts."""
    by_id = {c.get("id"): c for c in contracts()}
    linux, windows = by_id["linux-not-windows"], by_id["windows-not-linux"]
    assert sorted(linux["source_modules"]) == sorted(windows["forbidden_modules"])
    assert sorted(windows["source_modules"]) == sorted(linux["forbidden_modules"])
    return list(windows["source_modules"]), list(linux["source_modules"])


def owner(name: str, prefixes: Iterable[str]) -> Optional[str]:
    """The longest of `prefixes` that is `name` or a package holding it."""
    best = None
    for p in prefixes:
        if (name == p or name.startswith(p + ".")) and (best is None or len(p) > len(best)):
            best = p
    return best


# --- the graph, from the source ------------------------------------------------------------------------------
def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[1:2] and parts[1] in NOT_PACKAGES:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> list[tuple[str, int, bool]]:
    """(module imported, line, inside a function) of every dlltrace import in the module's tree."""
    out: list[tuple[str, int, bool]] = []

    def nearest(mod: str) -> Optional[str]:
        while mod and mod not in known:
            mod = mod.rpartition(".")[0]
        return mod or None

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] == "dlltrace":
                        target = nearest(a.name)
                        if target:
                            out.append((target, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: from the module's package
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[:len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                if mod.split(".")[0] != "dlltrace":
                    continue
                for a in child.names:  # `from dlltrace import winpath` imports the module dlltrace.winpath
                    target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else nearest(mod)
                    if target:
                        out.append((target, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return out


def package_graph() -> tuple[Graph, dict[str, list[tuple[str, int, bool]]]]:
    files = module_files()
    known = set(files)
    graph: Graph = {m: set() for m in files}
    detail: dict[str, list[tuple[str, int, bool]]] = {}
    for m, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        detail[m] = imported(tree, m, path.name == "__init__.py", known)
        graph[m] |= {t for t, _, _ in detail[m] if t != m}
    return graph, detail


# --- the checks ----------------------------------------------------------------------------------------------
def find_cycle(graph: Graph) -> Optional[list[str]]:
    """One cycle of the graph (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(m: str) -> Optional[list[str]]:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state:
                found = walk(t)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = walk(m)
            if found:
                return found
    return None


def checks(graph: Graph, layers: list[list[str]], windows: list[str], linux: list[str],
           lazy: Optional[dict[str, list[str]]] = None) -> list[str]:
    """Every breach of (a)-(d) in `graph` (module -> modules it imports), in words; [] when none.
    lazy: module -> the modules it imports inside functions."""
    problems = []
    cycle = find_cycle(graph)
    if cycle:
        problems.append("import cycle: " + " -> ".join(cycle))
    rank = {p: i for i, layer in enumerate(layers) for p in layer}

    def layer_of(m: str) -> Optional[int]:
        if m == ROOT_MODULE:  # (its __init__ is the public API's facade: the command layer)
            return 0
        p = owner(m, rank)
        return None if p is None else rank[p]

    for m in sorted(graph):
        if layer_of(m) is None:
            problems.append(f"{m} is in no layer (add it to the layers contract in pyproject.toml)")
            continue
        for t in sorted(graph[m]):
            lt = layer_of(t)
            if lt is not None and lt < layer_of(m):  # (a lower index is a higher layer)
                problems.append(f"upward import: {m} (layer {layer_of(m)}: {layers[layer_of(m)][0]}) imports "
                                f"{t} (layer {lt}: {layers[lt][0]})")
            for here, there, what in ((windows, linux, "a Windows module imports a Linux one"),
                                      (linux, windows, "a Linux module imports a Windows one")):
                if owner(m, here) and owner(t, there):
                    problems.append(f"{what}: {m} imports {t}")
    for m, targets in sorted((lazy or {}).items()):
        if targets and layer_of(m) != 0:
            problems.append(f"import inside a function below the command layer: {m} imports {', '.join(targets)}")
    return problems


# --- the package -----------------------------------------------------------------------------------------------
def test_the_package_is_layered():
    graph, detail = package_graph()
    windows, linux = platform_lists()
    lazy = {m: sorted({t for t, _, inner in found if inner}) for m, found in detail.items()}
    problems = checks(graph, layer_table(), windows, linux, lazy)
    assert not problems, "\n".join(problems)


def test_every_listed_module_exists():
    """A name in the tables that matches no module (a module moved, the table not updated) checks nothing."""
    files = set(module_files())
    windows, linux = platform_lists()
    for p in [p for layer in layer_table() for p in layer] + windows + linux:
        assert any(m == p or m.startswith(p + ".") for m in files), f"{p}: no such module in tracer/dlltrace"


def test_every_import_is_seen():
    """The reading finds imports where they hide: inside a function, under TYPE_CHECKING, relative ones."""
    src = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\nfrom . import model\n"
           "if TYPE_CHECKING:\n    from dlltrace.trace.reader import Trace\n"
           "def f():\n    import dlltrace.worlds.world\n    from dlltrace import winpath, errors as e\n")
    known = {"dlltrace", "dlltrace.model", "dlltrace.trace", "dlltrace.trace.reader", "dlltrace.worlds",
             "dlltrace.worlds.world", "dlltrace.winpath", "dlltrace.errors", "dlltrace.pe"}
    got = imported(ast.parse(src), "dlltrace.pe", False, known)
    assert [(t, inner) for t, _, inner in got] == [
        ("dlltrace.model", False), ("dlltrace.trace.reader", False), ("dlltrace.worlds.world", True),
        ("dlltrace.winpath", True), ("dlltrace.errors", True)]


def test_bootstrap_imports_nothing_of_dlltrace():
    for path in (PACKAGE / "bootstrap").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] == "dlltrace"], path


# --- the checker can fail --------------------------------------------------------------------------------------
LAYERS = [["p.top"], ["p.mid", "p.mid2"], ["p.low"]]  # top first; p.mid and p.mid2: one layer


def test_a_cycle_is_reported():
    graph = {"p.low.a": {"p.low.b"}, "p.low.b": {"p.low.c"}, "p.low.c": {"p.low.a"}, "p.top": {"p.low.a"}}
    (problem,) = checks(graph, LAYERS, [], [])
    assert problem == "import cycle: p.low.a -> p.low.b -> p.low.c -> p.low.a"


def test_a_cycle_through_a_function_import_is_a_cycle():
    # (the graph has every import: one inside a function is an edge like any other)
    graph, _ = package_graph()
    graph = {m: set(t) for m, t in graph.items()}
    graph["dlltrace.model"].add("dlltrace.diagnosis.verdict")  # as if model.py imported verdict in a function
    problems = checks(graph, layer_table(), *platform_lists())
    assert any(p.startswith("import cycle: ") and "dlltrace.model" in p for p in problems)
    assert any(p.startswith("upward import: dlltrace.model ") for p in problems)


def test_an_upward_import_is_reported():
    graph = {"p.top": {"p.mid"}, "p.mid": {"p.low"}, "p.low": {"p.mid2.x"}, "p.mid2.x": set()}
    assert checks(graph, LAYERS, [], []) == [
        "upward import: p.low (layer 2: p.low) imports p.mid2.x (layer 1: p.mid)"]


def test_siblings_importing_each_other_are_reported():
    graph = {"p.mid.win": {"p.mid.lin", "p.low"}, "p.mid.lin": set(), "p.low": set(), "p.low.elf": {"p.low.pe"},
             "p.low.pe": set()}
    assert checks(graph, LAYERS, ["p.mid.win", "p.low.pe"], ["p.mid.lin", "p.low.elf"]) == [
        "a Linux module imports a Windows one: p.low.elf imports p.low.pe",
        "a Windows module imports a Linux one: p.mid.win imports p.mid.lin"]


def test_a_module_in_no_layer_and_a_lazy_import_are_reported():
    graph = {"p.top": {"p.low"}, "p.low": set(), "p.mid": {"p.low"}, "q.other": set()}
    assert checks(graph, LAYERS, [], [], lazy={"p.top": ["p.low"], "p.mid": ["p.low"]}) == [
        "q.other is in no layer (add it to the layers contract in pyproject.toml)",
        "import inside a function below the command layer: p.mid imports p.low"]


def test_the_table_has_the_layers_of_the_architecture():
    """commands -> render -> diagnose -> loader -> worlds -> readers -> model (docs/architecture.md)."""
    firsts = ["dlltrace.cli", "dlltrace.render", "dlltrace.diagnosis", "dlltrace.loader", "dlltrace.worlds",
              "dlltrace.trace", "dlltrace.model"]
    assert [layer[0] for layer in layer_table()] == firsts
