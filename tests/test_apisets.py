"""The API-set schema: parsing (trace events, scenarios), the built-in table, and the report's
word on which schema a replay used."""

from __future__ import annotations

import pytest

from dlltrace.apisets import SOURCE_TEXT, builtin_document, builtin_schema, hashed_name, schema_from_sets
from dlltrace.errors import DlltraceError
from simhelp import scenario


def test_hashed_name_drops_extension_and_last_component():
    assert hashed_name("API-MS-Win-Core-File-L1-2-4.dll") == "api-ms-win-core-file-l1-2"
    assert hashed_name("api-ms-win-crt-string-l1-1-0") == "api-ms-win-crt-string-l1-1"


def test_schema_from_sets_shapes_and_errors():
    s = schema_from_sets({"api-ms-a-l1-1-0": "A.dll", "api-ms-b-l1-1-0": {"host": "b.dll", "exceptions": {"X.dll": "c.dll"}},
                          "ext-ms-c-l1-1-0": ""}, "trace")
    assert s.lookup("api-ms-a-l1-1-3.dll").host == "a.dll"
    assert s.lookup("api-ms-b-l1-1-0.dll").host_for("x.dll") == "c.dll"
    assert s.lookup("ext-ms-c-l1-1-0.dll").host == ""
    for bad in ({"api-ms-a-l1-1-0": 3}, {"api-ms-a-l1-1-0": {"host": 1}}, {"api-ms-a-l1-1-0": {"exceptions": {"x": 2}}}):
        with pytest.raises(ValueError):
            schema_from_sets(bad, "trace")


@pytest.mark.parametrize("value", [3, ["ucrtbase.dll"], {"host": "a.dll", "exceptions": {"x.dll": 1}}])
def test_scenario_api_sets_of_the_wrong_shape_is_a_one_line_error(value):
    with pytest.raises(DlltraceError) as e:
        scenario(system={"api_sets": {"api-ms-win-x-l1-1-0": value}})
    assert "system.api_sets" in str(e.value) and "\n" not in str(e.value)


def test_builtin_table_is_the_windows_11_schema_with_its_origin():
    doc = builtin_document()
    assert {"origin", "licence", "limits", "sets"} <= set(doc) and "10.0.22621" in doc["windows"]
    s = builtin_schema()
    assert s.source == "builtin" and len(s) >= 900
    assert s.lookup("api-ms-win-crt-runtime-l1-1-0.dll").host == "ucrtbase.dll"
    assert s.lookup("api-ms-win-core-processthreads-l1-1-3.dll").host_for("kernel32.dll") == "kernelbase.dll"
    assert sum(1 for c in s.contracts.values() if not c.host) > 50  # Windows 11 has unhosted contracts
    assert set(SOURCE_TEXT) == {"trace", "scenario", "builtin"}


def test_builtin_table_reads_through_any_traversable(monkeypatch):
    # a package not on disk (imported from a zip) has its data files read through importlib.resources
    # (datafiles.read_data), whose files() gives a Traversable, whose joinpath takes a single name before
    # Python 3.11 (zipfile.Path's on 3.9); requires-python is 3.9
    from importlib import resources

    import dlltrace.datafiles as datafiles

    class OneName:  # the 3.9/3.10 protocol: joinpath(child), `/`, read_text
        def __init__(self, path):
            self.path = path

        def joinpath(self, child):
            return OneName(self.path / child)

        __truediv__ = joinpath

        def read_text(self, encoding=None):
            return self.path.read_text(encoding=encoding)

    real = resources.files("dlltrace")
    monkeypatch.setattr(datafiles, "_DATA", "/nonexistent/dlltrace-data")  # (not on disk: the fallback)
    monkeypatch.setattr(resources, "files", lambda package: OneName(real))
    builtin_document.cache_clear()
    try:
        assert len(builtin_document()["sets"]) >= 900
    finally:
        builtin_document.cache_clear()


def _trace_with_apisets(tmp_path, src: str, sets: dict):
    """A copy of a fixture trace whose process recorded an API-set schema."""
    import json
    from pathlib import Path

    lines = Path(src).read_text(encoding="utf-8").splitlines()
    env = next(json.loads(x) for x in lines if '"ev":"env"' in x.replace(" ", ""))
    ev = {"ev": "apisets", "seq": 999999, "pid": env["pid"], "tid": env["tid"], "t": env["t"], "version": 6, "sets": sets}
    out = tmp_path / "with-apisets.jsonl"
    out.write_text("\n".join([*lines, json.dumps(ev)]) + "\n", encoding="utf-8")
    return out


def test_report_says_when_api_sets_come_from_the_builtin_table(tmp_path):
    import json

    from dlltrace.render.summary import produce
    from dlltrace.trace.reader import read_trace

    old = read_trace("fixtures/traces/s6.jsonl")  # made before traces carried a schema (s3 was re-recorded with one)
    assert old.api_sets(old.pids[0]) is None
    assert "API sets resolved from the built-in Windows 11 (22H2) table" in produce(old, "text")
    assert json.loads(produce(old, "json"))["api_sets"] == "builtin"
    assert "API sets from the built-in table" in produce(old, "markdown")
    new = read_trace(_trace_with_apisets(tmp_path, "fixtures/traces/s6.jsonl", {"api-ms-win-crt-runtime-l1-1-0": "ucrtbase.dll"}))
    assert new.warnings == []
    assert "built-in" not in produce(new, "text") and "built-in" not in produce(new, "markdown")
    assert json.loads(produce(new, "json"))["api_sets"] == "trace"
