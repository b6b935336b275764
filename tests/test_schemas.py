"""The schemas are the checks: scenarios are read through schemas/scenario-v1.json and trace events
through schemas/trace-v1.json, both compiled by dlltrace.tracecheck. Here: the compiler refuses what
it does not implement, the scenario reader and jsonschema (the reference) agree on mutated scenarios,
and the inputs of issue 10 are one-line errors."""

from __future__ import annotations

import copy
import json
import random
import tomllib
import traceback
from pathlib import Path

import jsonschema
import pytest

from dlltrace import tracecheck
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.diagnosis.scenario import SCHEMA, SCHEMA_PATH, ScenarioError, load_scenario, place, scenario_from_dict
from dlltrace.tracecheck import SchemaKeywordError, Validator, compile_schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "tracer" / "dlltrace" / "schemas"
SCENARIO_FILES = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")) + sorted(
    (ROOT / "fixtures" / "scenarios").glob("*.json")) + sorted((ROOT / "tracer" / "dlltrace" / "examples").glob("*.toml"))


def read(path: Path):
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def reference():
    """jsonschema with one change, the one tracecheck documents: an integer is a JSON integer
    (jsonschema takes 1.0 for one)."""
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _, v: type(v) is int)
    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return cls(schema)


# --- the compiler ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["trace-v1.json", "scenario-v1.json", "result-v1.json"])
def test_every_schema_of_the_package_compiles(name):
    v = Validator.from_path(SCHEMAS / name)
    assert not v.is_valid(42)


@pytest.mark.parametrize("schema, keyword, where", [
    ({"type": "string", "format": "date"}, "format", "#"),
    ({"properties": {"a": {"items": {"uniqueItems": True}}}}, "uniqueItems", "#/properties/a/items"),
    ({"anyOf": [{"type": "string"}, {"multipleOf": 2}]}, "multipleOf", "#/anyOf/1"),
    ({"properties": {"x": {"patternProperties": {"^a": {}}}}}, "patternProperties", "#/properties/x"),
    ({"$defs": {"d": {"dependentRequired": {"a": ["b"]}}}, "$ref": "#/$defs/d"}, "dependentRequired", "#/$defs/d"),
    ({"$defs": {"n": {"items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}, "$ref", "#/$defs/n/items/$ref"),
    ({"$ref": "other.json#/x"}, "$ref", "#/$ref"),
    ({"then": {"type": "string"}}, "then", "#"),
    ({"items": [{"type": "string"}]}, "items", "#"),
    ({"enum": [[1]]}, "enum", "#"),
])
def test_the_compiler_refuses_a_keyword_it_does_not_implement(schema, keyword, where):
    # (each is a schema jsonschema takes: real JSON Schema, only not implemented here)
    with pytest.raises(SchemaKeywordError) as e:
        compile_schema(schema)
    assert (e.value.keyword, e.value.where) == (keyword, where)
    assert repr(keyword) in str(e.value) and where in str(e.value)


def test_the_event_level_reader_refuses_what_it_would_skip(tmp_path):
    # load_specs reads the kinds' own `required` and `properties`; an additionalProperties (or any
    # other keyword) there would be skipped silently: it is refused, named with its place
    schema = json.loads((SCHEMAS / "trace-v1.json").read_text(encoding="utf-8"))
    schema["$defs"]["probe"]["additionalProperties"] = False
    p = tmp_path / "trace.json"
    p.write_text(json.dumps(schema))
    with pytest.raises(SchemaKeywordError) as e:
        tracecheck.load_specs(p)
    assert (e.value.keyword, e.value.where) == ("additionalProperties", "#/$defs/probe")
    schema["$defs"]["probe"].pop("additionalProperties")
    schema["$defs"]["probe"]["properties"]["op"]["format"] = "x"
    p.write_text(json.dumps(schema))
    with pytest.raises(SchemaKeywordError) as e:
        tracecheck.load_specs(p)
    assert (e.value.keyword, e.value.where) == ("format", "#/$defs/probe/properties/op")


def test_additional_properties_false_and_if_then_else_are_checked():
    # (before: additionalProperties false was read as "no check" and if/then/else were skipped)
    check = compile_schema({"properties": {"a": {"type": "integer"}}, "additionalProperties": False,
                            "if": {"required": ["a"]}, "then": {"properties": {"a": {"minimum": 1}}},
                            "else": {"required": ["b"]}})
    assert check({"a": 1}) and not check({"a": 0}) and not check({"a": 1, "c": 2}) and not check({})


def test_first_error_walks_a_deep_value_without_recursion():
    v = Validator({"type": "array", "items": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}})
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    err = v.first_error([[[1, 2], ["x"]]])
    assert (err.path, err.keyword, err.value) == ((0, 1, 0), "type", "x")
    err = v.first_error(deep)
    assert (err.path, err.keyword) == ((0, 0, 0), "type")


# --- the scenario schema and the code -------------------------------------------------------------------


def test_the_schema_lists_what_the_code_knows():
    from dlltrace.emulate.python import ALL_OPS
    from dlltrace.model import CAUSE_ERROR, MACHINES
    from dlltrace.worlds.world import PROFILES

    s = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    props = s["properties"]
    assert props["call"]["items"]["properties"]["op"]["enum"] == list(ALL_OPS)
    assert s["$defs"]["machine"]["enum"] == list(MACHINES)
    assert props["system"]["properties"]["profile"]["enum"] == list(PROFILES)
    assert set(props["expect"]["properties"]["cause"]["enum"]) == set(CAUSE_ERROR) | {None}


def test_the_trace_schema_lists_the_machines_the_launcher_writes():
    """child_machine (the launcher's exit and launch_error, the shim's spawn): the words of
    native/common/inject.c's inject_machine_name, and null; the ones no shim enters are among them."""
    import re

    from dlltrace.trace.launch import UNENTERABLE

    src = (ROOT / "native" / "common" / "inject.c").read_text()
    body = src[src.index("const char *inject_machine_name("):]
    body = body[:body.index("\n}\n")]
    words = re.findall(r'return "([a-z0-9]+)";', body)
    assert sorted(words) == ["arm64", "arm64ec", "unknown", "x64", "x86"]
    defs = json.loads((SCHEMAS / "trace-v1.json").read_text(encoding="utf-8"))["$defs"]
    for ev in ("exit", "launch_error", "spawn"):
        assert sorted(defs[ev]["properties"]["child_machine"]["enum"], key=str) == sorted([*words, None], key=str), ev
    assert set(UNENTERABLE) == set(words) - {"x64", "x86"}


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[f"{p.parent.name}/{p.name}" for p in SCENARIO_FILES])
def test_every_fixture_and_example_is_valid(path):
    data = read(path)
    assert not [e.message for e in reference().iter_errors(data)]
    assert SCHEMA.first_error(data) is None
    load_scenario(path)


OK = {"process": {"exe": "C:\\app\\h.exe"},
      "file": [{"path": "C:\\app\\a.dll", "imports": ["b.dll"]}, {"path": "C:\\app\\b.dll"}],
      "call": [{"op": "LoadLibraryExW", "name": "a.dll", "flags": 0}]}


def changed(change):
    d = copy.deepcopy(OK)
    change(d)
    return d


ISSUE_10 = {
    "ordinals not a list": (lambda d: d["file"][0].update(imports=[{"dll": "b.dll", "ordinals": 3}]),
                            "file[0].imports[0].ordinals", "must be a list of ordinals (integers 0..65535"),
    "export_ordinals not a list": (lambda d: d["file"][1].update(export_ordinals=1), "file[1].export_ordinals", "must be a list of ordinals"),
    "5000-digit python": (lambda d: d["process"].update(python="3." + "1" * 5000), "process.python", "is 5002 characters long"),
    "expect a number": (lambda d: d.update(expect=3), "expect", "must be a table, not an integer"),
    "expect a list": (lambda d: d.update(expect=["x"]), "expect", "must be a table, not a list"),
    "expect a string": (lambda d: d.update(expect="x"), "expect", "must be a table, not a string"),
    "negative ordinal": (lambda d: d["file"][0].update(imports=[{"dll": "b.dll", "ordinals": [-1]}]),
                         "file[0].imports[0].ordinals[0]", "must be an integer 0..65535, not -1"),
    "huge ordinal": (lambda d: d["file"][1].update(export_ordinals=[10 ** 30]), "file[1].export_ordinals[0]", "0..65535"),
    "huge ordinal string": (lambda d: d["file"][1].update(export_ordinals=["0x10000"]), "file[1].export_ordinals[0]", "like \"0x1f\""),
    "empty import": (lambda d: d["file"][0].update(imports=[""]), "file[0].imports[0]", "must be a DLL file name"),
    "drive as import": (lambda d: d["file"][0].update(imports=["C:"]), "file[0].imports[0]", "must be a DLL file name"),
    "drive as import dll": (lambda d: d["file"][0].update(delay_imports=[{"dll": "C:"}]), "file[0].delay_imports[0].dll", "file name"),
    "NUL in a path": (lambda d: d["file"][1].update(path="C:\\app\\b\x00.dll"), "file[1].path", "has control characters"),
    "ANSI escape in a path": (lambda d: d["process"].update(exe="C:\\app\\\x1b[31mh.exe"), "process.exe", "has control characters"),
    "newline ending a path": (lambda d: d["process"].update(path=["C:\\bin\n"]), "process.path[0]", "has control characters"),
    "ANSI escape in a label": (lambda d: d["call"][0].update(label="\x1b[2J"), "call[0].label", "without control characters"),
    "same file, other case": (lambda d: d["file"].append({"path": "C:\\APP\\B.DLL"}), "file[2].path", "is file[1] ('C:\\\\app\\\\b.dll') again"),
    "same file twice": (lambda d: d["file"].append({"path": "C:\\app\\b.dll"}), "file[2].path", "is described twice (file[1] too)"),
    "same file through ..": (lambda d: d["file"].append({"path": "C:\\app\\x\\..\\a.dll"}), "file[2].path", "is file[0]"),
    "huge flags": (lambda d: d["call"][0].update(flags=2 ** 64), "call[0].flags", "must be an integer 0..4294967295"),
    "flags with a leading zero": (lambda d: d["call"][0].update(flags="0100"), "call[0].flags", "like \"0x1100\""),
    "unknown flag bit": (lambda d: d["call"][0].update(flags=0x80000000), "call[0].flags", "has bits that are not LoadLibraryEx flags"),
    "a load without a name": (lambda d: d["call"][0].pop("name"), "call[0]", "LoadLibraryExW needs `name`"),
    "an empty path to add": (lambda d: d["call"].insert(0, {"op": "AddDllDirectory", "path": ""}), "call[0].path", "empty path"),
    "forwarder without a dot": (lambda d: d["file"][1].update(forwarders={"f": "nodot"}), "file[1].forwarders.f", "forwarder"),
    "env name with =": (lambda d: d["process"].update(env={"A=B": "x"}), "process.env", "environment variable name"),
    "env key with a newline": (lambda d: d["process"].update(env={"A\nB": "x"}), "process.env", "key 'A\\nB' must be an environment"),
    "env value not a string": (lambda d: d["process"].update(env={"A B": 1}), "process.env[\"A B\"]", "must be a string"),
    "api-set host not a string": (lambda d: d.update(system={"api_sets": {"api-ms-x-l1-1-0": 3}}), "system.api_sets[\"api-ms-x-l1-1-0\"]", "host"),
}


@pytest.mark.parametrize("name", sorted(ISSUE_10))
def test_issue_10_inputs_are_one_line_errors(name):
    change, where, words = ISSUE_10[name]
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(changed(change), "s.toml")
    msg = str(e.value)
    assert e.value.exit_code == EXIT_USAGE and "\n" not in msg and "\x1b" not in msg and "\x00" not in msg and len(msg) < 300
    assert e.value.place == where, msg
    assert msg.startswith(f"s.toml: {where}: ") and words in msg, msg


@pytest.mark.parametrize("name", ["ordinals not a list", "5000-digit python", "ANSI escape in a path", "same file, other case"])
def test_issue_10_inputs_through_the_command(tmp_path, dlltrace_cli, name):
    # as a user meets them: `dlltrace simulate` prints one line and exits with 2
    change, where, words = ISSUE_10[name]
    f = tmp_path / "s.json"
    f.write_text(json.dumps(changed(change)))
    r = dlltrace_cli("simulate", str(f))
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"dlltrace: {f}: {where}: ") and words in r.stderr, r.stderr


def test_nesting_too_deep_for_the_parser_is_one_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"process": {"exe": "C:\\\\a.exe"}, "expect": {"chain": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(ScenarioError) as e:
        load_scenario(f)
    assert str(e.value) == f"{f}: nested too deeply to read"
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ScenarioError) as e:  # built in memory, past the parser: the schema stops it
        scenario_from_dict({"process": {"exe": "C:\\a.exe"}, "expect": {"chain": deep}}, "m")
    assert str(e.value) == "m: expect.chain[0]: must be a string without control characters, not a list"


def test_an_integral_float_is_not_an_integer():
    # the one documented difference from plain jsonschema (reference() removes it there)
    doc = changed(lambda d: d["call"][0].update(flags=1.0))
    assert not list(jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).iter_errors(doc))
    with pytest.raises(DlltraceError, match=r"call\[0\]\.flags: must be a number"):
        scenario_from_dict(doc)


# --- the reader and jsonschema agree ---------------------------------------------------------------------

# a scenario that uses every key (the fixtures leave some out)
RICH = {
    "format": "dlltrace-scenario", "version": 1, "description": "every key",
    "folders": ["C:\\extra"],
    "system": {"windows": "C:\\Windows", "system32": "C:\\Windows\\System32", "system16": "C:\\Windows\\System",
               "machine": "x64", "safe_dll_search_mode": True, "known_dlls": ["kernel32.dll"], "profile": "windows",
               "version": "10.0.22631",
               "api_sets": {"api-ms-win-crt-runtime-l1-1-0": "ucrtbase.dll", "api-ms-win-core-x-l1-1-0": "",
                            "api-ms-win-core-y-l1-1-0": {"host": "kernel32.dll", "exceptions": {"kernel32.dll": "kernelbase.dll"}}}},
    "process": {"exe": "C:\\app\\h.exe", "cwd": "C:\\work", "path": ["C:\\bin"], "dll_directory": "",
                "dll_directories": ["C:\\plugins"], "default_dirs": "0x1000", "loaded": ["C:\\Windows\\System32\\kernel32.dll"],
                "python": "3.8.10 (32-bit)", "machine": "x64", "env": {"CUDA_PATH": "C:\\cuda"}},
    "file": [
        {"path": "C:\\app\\a.dll", "machine": "x64", "kind": "pe",
         "imports": ["b.dll", {"dll": "c.dll", "names": ["f"], "ordinals": [3, "0x10"]}, "api-ms-win-crt-runtime-l1-1-0.dll"],
         "delay_imports": ["d.dll"], "exports": ["g"], "export_ordinals": [1, "2"], "forwarders": {"h": "c.f"},
         "dependent_load_flags": 0x800, "version": "14.36.32532.0", "linker_version": "14.42", "dllmain_fails": False, "is_dll": True},
        {"path": "C:\\app\\b.dll", "kind": "not_pe"},
        {"path": "C:\\plugins\\c.dll", "exports": ["f"], "export_ordinals": [3, 16]},
        {"path": "C:\\app\\torch\\lib\\c10.dll"},
        {"path": "C:\\Windows\\System32\\ucrtbase.dll"},
    ],
    "call": [
        {"op": "SetDllDirectory", "path": ""}, {"op": "AddDllDirectory", "path": "C:\\x"},
        {"op": "RemoveDllDirectory", "path": "C:\\x"}, {"op": "SetDefaultDllDirectories", "flags": 0x1000},
        {"op": "LoadLibraryExW", "name": "a.dll", "flags": "0x1100", "label": "first"}, {"op": "FreeLibrary", "name": "a.dll"},
        {"op": "python_import", "module": "m", "path": "C:\\app\\m.pyd"}, {"op": "ctypes_cdll", "name": "c.dll", "winmode": 0},
        {"op": "os_add_dll_directory", "path": "C:\\plugins"},
        {"op": "torch_load_dll_libraries", "torch_lib": "C:\\app\\torch\\lib", "dlls": ["c10.dll"], "extra_dirs": ["C:\\bin"]},
        {"op": "LoadLibraryA", "name": "C:\\app\\a.dll"},
    ],
    "expect": {"error": 193, "leaf": "b.dll", "cause": "not_pe", "chain": ["a.dll", "b.dll"], "fix_contains": "x",
               "call": 4, "module": "m", "found_elsewhere": "C:\\x\\b.dll"},
}

# values of every JSON type and the shapes the schema cares about (no 1.0: see reference())
VALUES = [None, True, False, 0, -1, 1, 3, 0x800, 0x1100, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 31 + 5, 10 ** 30, 1.5, float("inf"),
          "", " ", "x", "a.dll", "b.dll", "C:", "C:\\", "C:\\app\\b.dll", "C:\\APP\\A.DLL", "c:/app/z.dll", "\\\\srv\\share\\x.dll",
          "/usr/lib/x.so", "lib\\a.dll", "C:\\a?b", "C:\\a\x00b", "C:\\a\x1b[31mb", "C:\\a\n", "a\x9bb.dll", "0", "7", "007", "0x1100",
          "0x", "0X1f", "0x10000", "65535", "65536", "4294967296", "1_000", "3.11.7", "3.12.0rc1", "3." + "1" * 5000, "14.42",
          "14.36.32532.0", "e.f", "e.#7", "nodot", ".f", "x64", "arm64", "sparc", "pe", "not_pe", "wine", "not_found", "LoadLibraryW",
          "SetDllDirectory", "AddDllDirectory", "torch_load_dll_libraries", "A=B",
          [], [1], [-1], [70000], ["a.dll"], [""], ["C:\\x"], [["a"]], [{}], [{"dll": "a.dll"}], [{"dll": "a.dll", "ordinals": 3}],
          [{"dll": ""}], [{"dll": "a.dll", "names": [""]}], {}, {"a": 1}, {"a": "b"}, {"dll": "a.dll"}, {"host": "x.dll"},
          {"host": "x.dll", "exceptions": {"a.dll": 1}}, {"op": "LoadLibraryW", "name": "a.dll"}, {"path": "C:\\q.dll"}, {"": "x"}]
KEYS = sorted({"format", "version", "description", "folders", "system", "process", "file", "call", "expect", "windows",
               "system32", "machine", "known_dlls", "api_sets", "profile", "exe", "cwd", "path", "dll_directory", "default_dirs",
               "python", "env", "imports", "delay_imports", "exports", "export_ordinals", "forwarders", "dependent_load_flags",
               "kind", "dllmain_fails", "op", "name", "flags", "winmode", "torch_lib", "dlls", "extra_dirs", "label", "dll",
               "names", "ordinals", "host", "exceptions", "error", "cause", "chain", "leaf", "bogus"})


def places(doc):
    """(parent, key, shape) for every value in `doc`; the shape is its path with the list indexes
    left out (file.*.imports.*): one per place in the schema, near enough."""
    out, todo = [], [(doc, ())]
    while todo:
        node, shape = todo.pop()
        for k, v in (node.items() if isinstance(node, dict) else enumerate(node)):
            s = shape + ("*" if isinstance(k, int) else k,)
            out.append((node, k, s))
            if isinstance(v, (dict, list)):
                todo.append((v, s))
    return out


def pick(spots, rng):
    """A spot of a shape drawn first: each place in the schema about as often, however many
    files or calls a scenario has."""
    shape = rng.choice(sorted({s for _, _, s in spots}))
    return rng.choice([(p, k) for p, k, s in spots if s == shape])


def nudges(v):
    """Values near `v`, of its type most often: a number at or past a limit, a string with a
    control character, in another case, emptied or made long, a table with a bad key."""
    if type(v) is int:
        return [-1, 0, 1, 65535, 65536, 2 ** 32 - 1, 2 ** 32, v + 1, -v - 1, v * 65536, 1.5, str(v), hex(v)]
    if type(v) is str:
        return ["", v + "\x1b[0m", v + "\n", "\x00" + v, v.upper(), v + ":", v + "*", v * 40, "x" * 300,
                v.replace("\\", "/"), v[:2], v.split("\\")[-1], v.split(".")[0], "0" + v, v + ".0", v + " x",
                v + " " + "y" * 80]
    if type(v) is list:
        return [[], v + v[:1], [*v, None], [*v, ""], v[:1] * 2, v[1:]]
    if type(v) is dict:
        first = next(iter(v), "")
        return [{}, [v], {**v, "bogus": 1}, {k: x for k, x in v.items() if k != first}, {"": 1, **v},
                *({(k + end if k == first else k): x for k, x in v.items()} for end in ("=", "\n", "\x1b", ":"))]
    return [1, 0, "true", None, [v]]


def mutate(doc, rng):
    """One to three random changes: a value replaced (by any value, or one near it), a key
    removed, a key added, a list item added or removed, a file's path given to another file in
    another case."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        spots = places(doc)
        parent, k = pick(spots, rng)
        what = rng.random()
        if what < 0.3:
            parent[k] = copy.deepcopy(rng.choice(VALUES))
        elif what < 0.55:
            parent[k] = rng.choice(nudges(parent[k]))
        elif what < 0.7:
            del parent[k]
        elif what < 0.85:
            tables = [p for p, _, _ in spots if isinstance(p, dict)] or [doc]
            rng.choice(tables)[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES))
        elif what < 0.93:
            lists = [p for p, _, _ in spots if isinstance(p, list)]
            if lists:
                target = rng.choice(lists)
                if target and rng.random() < 0.5:
                    target.append(copy.deepcopy(rng.choice(target)))
                else:
                    target.insert(0, copy.deepcopy(rng.choice(VALUES)))
        elif (isinstance(doc.get("file"), list) and len(doc["file"]) > 1
              and all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in doc["file"])):
            a, b = rng.sample(range(len(doc["file"])), 2)
            doc["file"][b]["path"] = doc["file"][a]["path"].swapcase()
    return doc


def mutated_scenarios():
    """Every value of RICH nudged every way, then 1200 random mutations of the fixtures and RICH."""
    for parent, k, _ in places(RICH):
        for v in nudges(parent[k]):
            old = parent[k]
            parent[k] = v
            yield copy.deepcopy(RICH)
            parent[k] = old
    bases = [read(p) for p in SCENARIO_FILES] + [RICH] * 6 + [OK]
    rng = random.Random(20261201)
    for _ in range(1200):
        yield mutate(rng.choice(bases), rng)


def error_places(errors):
    """The place of every error jsonschema reports, those inside anyOf/oneOf included."""
    out, todo = set(), list(errors)
    while todo:
        e = todo.pop()
        out.add(place(tuple(e.absolute_path)))
        todo.extend(e.context)
    return out


# what dlltrace refuses that the schema cannot say (docs/scenarios.md, "What is checked")
BEYOND_THE_SCHEMA = ("has bits that are not LoadLibraryEx flags", "is described twice", ") again (the same file on Windows")


def test_the_reader_and_jsonschema_agree_on_mutated_scenarios(summary):
    """On each mutated scenario: jsonschema refuses it -> the reader refuses it, at a place
    jsonschema names; jsonschema takes it -> the reader takes it and it runs, or the reader refuses
    it for one of BEYOND_THE_SCHEMA. The reader's refusal is always one line, exit code 2."""
    ref = reference()
    counts = {"tried": 0, "valid": 0, "invalid": 0, "beyond": 0}
    disagreements = []
    failed = set()  # (schema place, keyword) of each first error: what the mutations reached
    for doc in mutated_scenarios():
        js = list(ref.iter_errors(doc))
        counts["tried"] += 1
        try:
            sc = scenario_from_dict(copy.deepcopy(doc), "m.json")
            sc.run()  # a scenario the schema lets through must also run
            got = None
        except ScenarioError as e:
            got = e
        except Exception:
            disagreements.append(("traceback", traceback.format_exc(limit=-3), doc))
            continue
        if got is not None and (got.exit_code != EXIT_USAGE or "\n" in str(got) or got.place is None):
            disagreements.append(("not one line with a place", str(got), doc))
        elif js:
            counts["invalid"] += 1
            if got is None:
                disagreements.append(("accepted", [e.message for e in js], doc))
            elif got.place not in error_places(js):
                disagreements.append(("other place", (str(got), sorted(error_places(js))), doc))
        elif got is not None:
            if any(w in str(got) for w in BEYOND_THE_SCHEMA):
                counts["beyond"] += 1
            else:
                disagreements.append(("refused", str(got), doc))
        else:
            counts["valid"] += 1
        err = SCHEMA.first_error(doc)
        if (err is None) != (not js) or err is not None and err.keyword == "?":
            disagreements.append(("first_error", err, doc))
        elif err is not None:
            failed.add((err.node.where, err.keyword))
    for d in disagreements[:5]:
        print(d[0], d[1], json.dumps(d[2])[:400])
    summary["scenario schema"] = (
        f"scenario schema: {counts['tried']} mutated scenarios, the reader agrees with jsonschema on "
        f"{counts['tried'] - len(disagreements)} ({counts['invalid']} invalid, {counts['valid']} valid, "
        f"{counts['beyond']} refused beyond the schema; {len(failed)} different schema checks failed)")
    assert not disagreements, f"{len(disagreements)} disagreements"
    assert counts["invalid"] > 1800 and counts["valid"] > 800 and counts["beyond"] > 50, counts
    assert len(failed) >= 90, sorted(failed)


def test_a_lone_surrogate_is_a_legal_name_character():
    # legal in a Windows file name, and in a JSON scenario ("\udc80"): accepted by the schema (it is not a
    # control character), by jsonschema too, and the scenario runs
    doc = changed(lambda d: (d["file"][1].update(path="C:\\app\\b\udc80.dll"),
                             d["file"][0].update(imports=["b\udc80.dll"])))
    assert not list(reference().iter_errors(doc))
    results = scenario_from_dict(json.loads(json.dumps(doc)), "s.json").run()
    assert results[0].error == 0 and results[0].tree is not None
    assert [c.path for c in results[0].tree.children] == ["C:\\app\\b\udc80.dll"]


# --- the trace events' check: one function an event kind --------------------------------------------------

POOL = [0, 1, 7, -1, 2 ** 32 - 1, 2 ** 32, 2 ** 70, 1.0, 1.5, True, False, None, "", "x", "0x1f", "0xZZ", "0X1F",
        "C:\\app\\a.dll", "/usr/lib/libm.so.6", [], ["a"], [1], [None], {}, {"a": "b"}, {"a": 1},
        {"machine": "x64", "imports": [{"dll": "a.dll", "names": ["f"], "ordinals": [1]}], "exports": ["f"]},
        {"machine": "x64", "imports": [{"names": ["f"]}]}, {"machine": 5}]


def test_an_event_kinds_one_function_agrees_with_its_fields_checks():
    """EventSpec.fast(), each kind's check made one function of inline tests (tracecheck._event_function), is true
    exactly when every field the event has passes its own compiled check and every field a writer always writes
    is there: random events of every kind (each field left out, or given a value its check takes or refuses, the
    enum members among them), 200 a kind; and check_event keeps its answers for them, before the kind's function
    is used (its first FAST_AFTER events) and after."""
    rng = random.Random(20261205)
    specs = [*tracecheck.SPECS.values(), tracecheck.OTHER]
    agreed = {True: 0, False: 0}
    for spec in specs:
        for _ in range(200):
            e = {"ev": spec.kind or "no_such_kind"}
            for k, check in spec.checks.items():
                if k == "ev" or rng.random() < 0.15:
                    continue
                pool = POOL + [v for v in _listed(spec, k)]
                good = [v for v in pool if check(v)]
                e[k] = rng.choice(good if good and rng.random() < 0.85 else pool)
            if rng.random() < 0.2:
                e["unknown_field"] = rng.choice(POOL)
            want = spec.required <= e.keys() and all(spec.checks[k](v) for k, v in e.items() if k in spec.checks)
            assert spec.fast()(e) is want, (spec.kind, e)
            agreed[want] += 1
            for valid in (spec.fast(), lambda o: False):  # (a common kind's function; a kind still warming)
                saved, spec.valid = spec.valid, valid
                try:
                    problems, usable = tracecheck.check_event(copy.deepcopy(e), ("pid",))
                finally:
                    spec.valid = saved
                assert (problems == [] and usable) is (want and type(e.get("pid")) is int), (spec.kind, e, problems)
    assert agreed[True] > 500 and agreed[False] > 500, agreed


TRACE_DEFS = json.loads(tracecheck.SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]


def _listed(spec, k: str) -> list:
    """The members of a field's enum or const, when its schema lists them."""
    kind = TRACE_DEFS.get(spec.kind, {}) if spec.kind else {}
    field = kind.get("properties", {}).get(k) or TRACE_DEFS["event"]["properties"].get(k) or {}
    return list(field.get("enum", [])) + ([field["const"]] if "const" in field else [])


def test_a_kinds_function_is_compiled_once_it_is_common():
    """A kind's function is compiled after its first FAST_AFTER events (check_event's loop decides those): a small
    trace compiles none, a large one each kind it has many of, once."""
    spec = tracecheck.EventSpec("k", {"properties": {"n": {"type": "integer"}}}, {"properties": {"ev": {"type": "string"}}})
    e = {"ev": "k", "n": 1}
    assert spec.valid(e) is False and spec._fast is None
    for _ in range(tracecheck.FAST_AFTER):
        spec.valid(e)
    assert spec._fast is not None and spec.valid is spec._fast and spec.valid(e) is True
    assert spec.valid({"ev": "k", "n": "1"}) is False


INLINE_SCHEMAS = [
    {"type": "integer"}, {"type": ["integer", "null"]}, {"type": "number"}, {"type": ["number", "null"]},
    {"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 5}, {"type": ["integer", "null"], "minimum": 0,
                                                                         "maximum": 4294967295},
    {"type": "number", "minimum": 0}, {"type": "number", "maximum": 5.5}, {"type": ["number", "null"], "minimum": -0.0},
    {"type": "number", "minimum": 0.5, "maximum": 2 ** 64}, {"enum": ["a", "b"]}, {"const": "a"}, {"enum": []},
    {"enum": [1, 1.0, True, None, "1"]}, {"const": 0}, {"const": False}, {"enum": [0.0]},
    {"type": "string", "pattern": "^0x[0-9a-f]+$"}, {"type": ["string", "null"], "pattern": "b$"},
    {"type": ["string", "integer"], "pattern": "^a"}, {"type": "string", "minLength": 1}, {"anyOf": [{"type": "null"},
                                                                                                     {"const": "a"}]},
    True, False,
]
INLINE_VALUES = [0, 1, -1, 5, 6, 2 ** 32 - 1, 2 ** 32, 2 ** 64, 10 ** 400, -10 ** 400, 0.0, -0.0, 0.5, 5.5, 5.6, 1.0,
                 float("nan"), float("inf"), float("-inf"), True, False, None, "", "a", "b", "1", "0x1f", "0xZZ", [], {}]


def test_a_fields_inline_test_agrees_with_its_compiled_check():
    """tracecheck._inline, a field's test written out in its event kind's function, is true exactly when the field's
    compiled check (Node.ok) is, for every shape it writes out and some it calls, beyond the trace schema's own
    fields (a number's bounds, -0.0, NaN and the infinities, integers past a float's range, an enum of mixed types,
    a pattern beside another type): a later schema's field is checked the same by both."""
    for schema in INLINE_SCHEMAS:
        node = tracecheck.compile_node(schema)
        ns: dict = {}
        test = eval("lambda v: " + tracecheck._inline(node, "v", ns), ns)
        for v in INLINE_VALUES:
            assert bool(test(v)) is bool(node.ok(v)), (schema, v)
