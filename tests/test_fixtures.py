"""Every scenario in fixtures/scenarios/ (the real failures of shared/CASES.md) with its verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlltrace import winpath
from dlltrace.render.scenario import explain_scenario
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")) + sorted((ROOT / "fixtures" / "scenarios").glob("*.json"))


def as_list(v) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def fix_problems(exp: dict, text: str) -> list[str]:
    """What the first fix's words `text` break of an expectation: `fix_contains` (a string, or a list:
    every one must be in them) and `fix_not_contains` (a string or a list: none may be). [] = none.
    (tests/test_report_cases.py can check the traces' expect.toml with it too.)"""
    out = [f"lacks {s!r}" for s in as_list(exp.get("fix_contains", [])) if s not in text]
    out += [f"has {s!r}" for s in as_list(exp.get("fix_not_contains", [])) if s in text]
    return out


def test_fix_problems_reads_strings_and_lists():
    assert fix_problems({"fix_contains": "a", "fix_not_contains": "z"}, "abc") == []
    assert fix_problems({"fix_contains": ["a", "b"], "fix_not_contains": ["y", "z"]}, "abc") == []
    assert fix_problems({"fix_contains": ["a", "q"]}, "abc") == ["lacks 'q'"]
    assert fix_problems({"fix_not_contains": ["x", "c"]}, "abc") == ["has 'c'"]
    assert fix_problems({}, "") == []


def first_failed(results):
    failed = [r for r in results if r.error and r.tree is not None]
    return failed[0] if failed else None


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_verdict(path):
    scenario, results = explain_scenario(str(path))
    exp = scenario.expect
    assert exp, f"{path.name} has no [expect] table"
    r = first_failed(results)
    if exp.get("error", 0) == 0:
        assert r is None
        return
    assert r is not None, "expected a failed load"
    assert r.error == exp["error"]
    if "call" in exp:  # which load failed: its index among the loads the calls make
        assert r.index == exp["call"], (r.index, r.name)
    if "module" in exp:  # and the module that load named
        assert winpath.same(r.name, exp["module"]), r.name
    if "leaf" in exp:
        assert r.leaf.name == exp["leaf"]
    if "cause" in exp:
        assert r.leaf.cause == exp["cause"]
    if "chain" in exp:
        assert r.chain == exp["chain"]
    if "fix_contains" in exp or "fix_not_contains" in exp:
        assert r.fixes, "no fix suggested"
        assert not fix_problems(exp, fix_text(r.fixes[0])), (fix_problems(exp, fix_text(r.fixes[0])), fix_text(r.fixes[0]))
    if "found_elsewhere" in exp:
        assert exp["found_elsewhere"] in [c.path for c in r.found_elsewhere]


def test_every_search_order_case_has_a_scenario():
    names = {p.stem for p in SCENARIOS}
    assert {"s1", "s3", "s5", "s6", "s7", "s8", "s10", "s11"} <= names


def test_s1_says_the_folder_is_only_on_path():
    scenario, results = explain_scenario(str(ROOT / "fixtures" / "scenarios" / "s1.toml"))
    # a made-up extension module (no real package is said to load cuBLAS this way: CASES.md S1)
    assert "ctranslate2" not in json.dumps(scenario.to_dict()).lower()
    r = first_failed(results)
    assert (r.op, r.flags, r.origin_kind, r.origin_module) == ("LoadLibraryExW", 0x1100, "python_import", "myext._ext")
    v12 = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.1\\bin"
    [c] = [c for c in r.found_elsewhere if c.path.startswith(v12)]
    assert (c.relation, c.path_entry) == ("on_path_not_searched", 2)
    assert "on PATH (entry 2)" in relation_text(c) and "does not search" in relation_text(c)
    assert r.not_searched == "PATH and the current folder are not searched with these flags."
    # and PATH was really not searched
    assert not any(p.startswith(v12) for p in r.probes)
    # the v11.8 copy is another version, named as such (reordering PATH cannot help)
    assert [c.path for c in r.close_names] == [
        "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.8\\bin\\cublas64_11.dll"]
    assert "on PATH (entry 1)" in relation_text(r.close_names[0])


def test_s2_both_attempts_name_the_leaf():
    _, results = explain_scenario(str(ROOT / "fixtures" / "scenarios" / "s2.toml"))
    failed = [r for r in results if r.error and r.tree is not None]
    assert [(r.op, r.flags) for r in failed] == [("LoadLibraryExW", 0x1100), ("LoadLibraryW", 0)]
    assert all(r.leaf.name == "cudnn64_7.dll" for r in failed)
    # the retry searched PATH (torch prepended its folders), the first attempt did not
    first, retry = failed
    assert not any("PATH" in c.rule for c in first.tree.walk() for c in c.candidates)
    assert any(c.rule.startswith("PATH[") for n in retry.tree.walk() for c in n.candidates)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_matches_json_schema(path):
    import jsonschema
    import tomllib

    schema = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "scenario-v1.json").read_text())
    data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    jsonschema.validate(data, schema)


def test_s4_compares_the_runtime_with_the_toolset_c10_was_built_with():
    _, results = explain_scenario(str(ROOT / "fixtures" / "scenarios" / "s4.toml"))
    r = first_failed(results)
    assert "older than 14.42 (c10.dll was built with 14.42)" in fix_text(r.fixes[0])
    assert r.fixes[0].kind == "vc_redist"
