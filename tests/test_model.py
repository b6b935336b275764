"""The typed vocabularies of model.py: one list each (a Literal), and every table keyed by one names
every value of it; the JSON schemas' enums are the same lists."""

from __future__ import annotations

import json
from pathlib import Path

from dlltrace import model
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

SCHEMAS = Path(model.__file__).parent / "schemas"


def _enums(o, path=""):
    if isinstance(o, dict):
        if "enum" in o:
            yield path, o["enum"]
        for k, v in o.items():
            yield from _enums(v, f"{path}/{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _enums(v, f"{path}/{i}")


def test_cause_tables_name_every_cause():
    assert set(model.CAUSE_ERROR) == set(model.CAUSES)


def test_result_words_name_every_candidate_result():
    assert set(model.RESULT_WORDS) == set(model.CANDIDATE_RESULTS)


def test_schema_enums_are_the_model_lists():
    result = dict(_enums(json.loads((SCHEMAS / "result-v1.json").read_text(encoding="utf-8"))))
    assert set(result["/properties/calls/items/properties/leaf/oneOf/1/properties/cause"]) == set(model.CAUSES)
    for key in ("candidates", "found_elsewhere"):
        assert set(result[f"/properties/calls/items/properties/{key}/items/properties/result"]) == set(model.CANDIDATE_RESULTS)
    scenario = dict(_enums(json.loads((SCHEMAS / "scenario-v1.json").read_text(encoding="utf-8"))))
    causes = [v for k, v in scenario.items() if k.endswith("/cause")]
    assert causes and all(set(c) - {None} == set(model.CAUSES) for c in causes)


def test_leaf_facts_reason_enum_is_the_model_list():
    from typing import get_args
    result = dict(_enums(json.loads((SCHEMAS / "result-v1.json").read_text(encoding="utf-8"))))
    reason = result["/properties/calls/items/properties/leaf/oneOf/1/properties/facts/properties/reason"]
    assert set(reason) == set(get_args(model.InvalidFlagsReason)) == set(model.INVALID_FLAGS_TEXT)


def test_origin_kind_enum_is_the_model_list():
    from typing import get_args
    result = dict(_enums(json.loads((SCHEMAS / "result-v1.json").read_text(encoding="utf-8"))))
    kinds = result["/properties/calls/items/properties/origin_kind"]
    assert set(kinds) - {None} == set(get_args(model.OriginKind)) - {""}


def test_elsewhere_relation_enum_is_the_model_list():
    from typing import get_args
    result = dict(_enums(json.loads((SCHEMAS / "result-v1.json").read_text(encoding="utf-8"))))
    relation = result["/properties/calls/items/properties/found_elsewhere/items/properties/relation"]
    assert set(relation) == set(get_args(model.Relation))
    words = {r: relation_text(model.Elsewhere("C:\\x\\a.dll", r, path_entry=2, rule="PATH[2]")) for r in get_args(model.Relation)}
    assert len(set(words.values())) == len(words)  # each relation has its own words


def test_fix_enums_are_the_model_lists():
    from typing import get_args
    result = dict(_enums(json.loads((SCHEMAS / "result-v1.json").read_text(encoding="utf-8"))))
    fixes = "/properties/calls/items/properties/fixes/items/properties/"
    assert set(result[fixes + "kind"]) == set(get_args(model.FixKind))
    assert set(result[fixes + "action"]) == set(get_args(model.FixAction))
