"""The reports read typed facts the simulator wrote, never its sentences (issue 8 item 1): each test
changes the words a producer writes and checks the consumer still decides the same."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from simhelp import load, scenario

from dlltrace.diagnosis.explain import explain, fixes_for, leaf_node
from dlltrace.render.text import verdict_line
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401


def _replayed(res):
    return SimpleNamespace(result=res, failed=True, load=SimpleNamespace(name=res.name), real_error=res.error)


def test_bad_machine_verdict_reads_the_machines_not_the_detail():
    res = load("a.dll", files=[{"path": "C:\\app\\a.dll", "machine": "x64"}], machine="arm64")
    assert res.leaf.cause == "bad_machine"
    assert (res.leaf.facts.process_machine, res.leaf.facts.machines) == ("arm64", ("x64",))
    res.leaf = dataclasses.replace(res.leaf, detail="words that name no machine (x86)")
    assert verdict_line(_replayed(res)) == "✗ a.dll is built for x64, but this process is arm64"


def test_missing_export_and_ordinal_are_facts():
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"], "ordinals": [7]}]},
             {"path": "C:\\app\\b.dll", "exports": ["g"]}]
    res = load("C:\\app\\a.dll", files=files)
    assert (res.leaf.cause, res.leaf.facts.export, res.leaf.detail) == ("missing_export", "f", "f")
    files[1]["exports"] = ["f"]
    res = load("C:\\app\\a.dll", files=files)
    assert (res.leaf.cause, res.leaf.facts.ordinal, res.leaf.detail) == ("missing_ordinal", 7, "ordinal 7")


def _explained(files, calls, **kw):
    sc = scenario(files, calls, **kw)
    sim = sc.simulator()
    results = sim.run(sc.calls)
    for r in results:
        explain(r, sc.world, sim.process)
    _LAST.update(world=sc.world, process=sim.process)
    return results


_LAST: dict = {}


TORCH_LIB = "C:\\py\\Lib\\site-packages\\torch\\lib"


def test_fix_says_before_what_from_the_origin_kind_not_its_words():
    files = [{"path": TORCH_LIB + "\\a.dll", "imports": ["dep.dll"]}, "C:\\other\\dep.dll"]
    res = _explained(files, [{"op": "torch_load_dll_libraries", "torch_lib": TORCH_LIB, "dlls": ["a.dll"]}],
                     exe="C:\\py\\python.exe", folders=[TORCH_LIB])
    failed = [r for r in res if r.error and r.tree is not None][-1]
    assert failed.origin_kind == "torch_retry" and failed.origin_package == "torch"
    failed.origin = "words that say nothing"
    assert fix_text(fixes_of(failed)[0]).startswith("Before `import torch`:")
    pyd = "C:\\py\\Lib\\site-packages\\m\\_C.pyd"
    res = _explained([{"path": pyd, "imports": ["dep.dll"]}, "C:\\other\\dep.dll"],
                     [{"op": "python_import", "module": "m._C", "path": pyd}], exe="C:\\py\\python.exe")
    assert (res[0].origin_kind, res[0].origin_module) == ("python_import", "m._C")
    res[0].origin = "ctypes.CDLL('not what happened')"
    assert fix_text(fixes_of(res[0])[0]).startswith("Before `import m._C`:")


def fixes_of(r):
    """The fixes explain gives `r` as it is now (its world and process: those of _explained's last run)."""
    return fixes_for(r, _LAST["world"], _LAST["process"])


def test_already_loaded_shadowing_is_read_from_how_kind():
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"]}]},
             {"path": "C:\\old\\b.dll", "exports": []}, {"path": "C:\\new\\b.dll", "exports": ["f"]}]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\old\\b.dll"}, {"op": "LoadLibraryExW", "name": "C:\\app\\a.dll"}]
    sc = scenario(files, calls)
    sim = sc.simulator()
    res = sim.run(sc.calls)[-1]
    leaf = leaf_node(res.tree)
    assert leaf is not None and leaf.how_kind == "already_loaded"
    leaf.how = "words that do not start the way they used to"
    explain(res, sc.world, sim.process)
    assert [f.kind for f in res.fixes] == ["shadowing"]


def test_not_searched_and_path_entries_are_the_calls_own():
    """The note and "on PATH (entry N)" come from the CallResult (its search flags, its PATH), not
    from the process state at whatever time the report is made."""
    sc = scenario(["C:\\tools\\b.dll"], [{"op": "SetDefaultDllDirectories", "flags": 0x1000},
                                         {"op": "LoadLibraryExW", "name": "b.dll"}], path=["C:\\tools"])
    sim = sc.simulator(explain=False)
    res = sim.run(sc.calls)[-1]
    assert (res.error, res.search_flags, res.path) == (126, 0x1000, ("C:\\tools",))
    sim.process.default_dirs, sim.process.path = None, []  # the process changes after the call
    explain(res, sc.world, sim.process)
    assert res.not_searched == "PATH and the current folder are not searched with these flags."
    assert [(c.relation, c.path_entry, relation_text(c)) for c in res.found_elsewhere] == [
        ("on_path_not_searched", 1, "on PATH (entry 1), which this load does not search")]


def test_every_fix_action_has_words_and_markdown_marks_the_code_from_the_fields():
    from typing import get_args

    from dlltrace.model import Fix, FixAction

    texts = {}
    for action in get_args(FixAction):
        f = Fix("install", action, name="a.dll", folder="C:\\x", path="C:\\x\\a.dll", instruction="pip install a",
                reason="altered_with_search_flags", other_machine="x64", machine="x86", bound="C:\\old\\a.dll")
        assert fix_text(f), action  # fix_text raises on an action it has no words for
        texts[action] = fix_text(f)
    assert len(set(texts.values())) == len(texts), "two actions share their words"
    f = Fix("add_dll_directory", "add_dll_directory", name="a.dll", folder='C:\\odd "name"', before="import torch")
    # (a raw string cannot hold the quote: a plain literal that pastes as it is)
    assert fix_text(f) == 'Before `import torch`:  os.add_dll_directory(\'C:\\\\odd "name"\')'
    assert fix_markdown(f) == 'Before `import torch`:  `os.add_dll_directory(\'C:\\\\odd "name"\')`'


def _old_style(line: str) -> str:
    """How commands/report.py used to style a line: by matching its text."""
    s = line.strip()
    if s.startswith("✗"):
        return "failure"
    if s.startswith("✓"):
        return "success"
    if s in ("Fix", "Found elsewhere") or s.startswith("Where Windows looked") or line.startswith("dlltrace ─"):
        return "heading"
    if s.startswith("Also missing — you would hit these next"):  # (a section added since: the same rule)
        return "heading"
    if s.startswith("The model and the real loader disagree"):
        return "disagreement"
    if s.startswith("Probed, absent, the program went on"):
        return "went_on"
    return ""


def test_terminal_styles_come_from_the_producer_and_match_the_old_text_matching(tmp_path):
    from pathlib import Path

    from dlltrace.commands.report import line_styles
    from dlltrace.render.summary import produce_lines
    from dlltrace.trace.reader import read_trace

    traces = sorted((Path(__file__).parent.parent / "fixtures" / "traces").glob("*.jsonl"))
    assert traces
    # a trace the model disagrees with: s3 without its PATH `setenv` (as first recorded, before the
    # shim hooked SetEnvironmentVariableW: fixtures/traces/expect.toml [s3])
    stale = tmp_path / "s3-without-setenv.jsonl"
    stale.write_text("".join(x for x in (traces[0].parent / "s3.jsonl").read_text(encoding="utf-8").splitlines(True)
                             if '"setenv"' not in x), encoding="utf-8")
    traces.append(stale)
    seen = set()
    for path in traces:
        trace = read_trace(path)
        for everything in (False, True):
            lines = produce_lines(trace, everything)
            styles = line_styles(lines)
            physical = "\n".join(lines).split("\n")
            assert [_old_style(x) for x in physical] == styles, path
            seen.update(styles)
    assert {"failure", "success", "heading", "disagreement"} <= seen


def test_every_cause_has_words_in_every_report_table():
    from dlltrace.model import CAUSE_ERROR, CAUSES, CallResult, Leaf, Node
    from dlltrace.render.calls import text_call, tree_lines

    for cause in CAUSES:
        tree = Node(name="a.dll", via="call", path="C:\\x\\a.dll", error=CAUSE_ERROR[cause], cause=cause, detail="d")
        res = CallResult(index=0, op="LoadLibraryExW", name="a.dll", error=CAUSE_ERROR[cause], tree=tree,
                         leaf=Leaf(name="a.dll", cause=cause, path="C:\\x\\a.dll", detail="d"))
        assert verdict_line(_replayed(res)).startswith("✗ "), cause
        assert any("✗" in line for line in tree_lines(tree)), cause
        assert any(line.startswith("  ✗ ") for line in text_call(res)), cause
