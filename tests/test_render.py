"""One renderer (render/explained.py): simulate and report say the same words for the same call; the fix
fields (verified, outcome, then, covers) and also_missing are said in text, Markdown and JSON; tables
align with wide characters; paths are printed as a user types them; the JSON validates."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import get_args

import pytest

from dlltrace import model
from dlltrace.model import AlsoMissing, CallResult, Candidate, Elsewhere, Fix, Leaf, Node, Outcome
from dlltrace.render import explained
from dlltrace.render.explained import call_blocks, from_result, print_blocks, style_of
from dlltrace.render.calls import results_dict, text_call

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"
SCENARIOS = ROOT / "fixtures" / "scenarios"
SCHEMA = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "result-v1.json").read_text(encoding="utf-8"))


def failed_call(folder: str = "C:\\app", leaf_name: str = "b.dll", fixes=(), found=(), also=(), module: str = "a.dll",
                candidates=None) -> CallResult:
    """a.dll (in folder) imports b.dll, which is not found."""
    cands = candidates if candidates is not None else [
        Candidate(folder + "\\" + leaf_name, "DLL_LOAD_DIR of " + module, "not_there"),
        Candidate("C:\\Windows\\System32\\" + leaf_name, "SYSTEM32", "not_there")]
    leaf = Node(name=leaf_name, via="import", error=126, cause="not_found", candidates=cands)
    top = Node(name=folder + "\\" + module, via="call", path=folder + "\\" + module, how="given path", how_kind="",
               error=126, children=[leaf], new=True)
    return CallResult(index=0, op="LoadLibraryExW", name=folder + "\\" + module, flags=0x1100, search_flags=0x1100,
                      path=("C:\\Windows\\System32", "C:\\tools"), cwd="C:\\work", error=126, tree=top,
                      leaf=Leaf(name=leaf_name, cause="not_found", parent=module), chain=[module, leaf_name],
                      fixes=list(fixes), found_elsewhere=list(found), also_missing=list(also))


CHECKED = Fix(kind="add_dll_directory", action="add_dll_directory", name="b.dll", folder="C:\\tools", verified=True,
              outcome=Outcome(0), covers=("b.dll",))
UNCHECKED = Fix(kind="install", action="install", name="b.dll", instruction="Install the B runtime", verified=None)
FAILS = Fix(kind="copy", action="copy_file", name="b.dll", path="C:\\tools\\b.dll", dest="C:\\app", verified=False,
            outcome=Outcome(126, "c.dll", "not_found", ("a.dll", "b.dll", "c.dll")))
WITH_STEPS = Fix(kind="package", action="install_package", name="b.dll", package="b-runtime", folder="C:\\py\\b",
                 verified=True, outcome=Outcome(0), covers=("b.dll", "c.dll"),
                 then=(Fix(kind="add_dll_directory", action="add_dll_directory", name="b.dll", folder="C:\\py\\b",
                           verified=True),))


# --- verification, steps, also missing: text ------------------------------------------------------------
def test_text_says_nothing_about_verification_when_every_fix_is_verified():
    text = "\n".join(text_call(failed_call(fixes=[CHECKED, WITH_STEPS])))
    assert "not checked" not in text and "re-ran" not in text
    # (the command on a line of its own: the line pastes as it is, fixwords.fix_lines)
    assert '1. Before the load:\n' in text and '\n       os.add_dll_directory(r"C:\\tools")\n' in text, text


def test_text_names_each_fix_the_model_did_not_check_or_that_still_fails():
    lines = text_call(failed_call(fixes=[CHECKED, UNCHECKED, FAILS]))
    text = "\n".join(lines)
    assert text.count(explained.NOT_CHECKED) == 1
    i = next(k for k, line in enumerate(lines) if "2. Install the B runtime" in line)
    assert lines[i + 1].strip() == "(not checked by the model)"  # under the fix it is about
    j = next(k for k, line in enumerate(lines) if "3. Copy C:\\tools\\b.dll into C:\\app" in line)
    assert lines[j + 1].strip() == "(the model re-ran the load with this fix: it still fails with 126 on c.dll (not found))"
    k = next(k for k, line in enumerate(lines) if "1. Before the load" in line)
    assert lines[k + 1].strip() == 'os.add_dll_directory(r"C:\\tools")'
    assert lines[k + 2].strip().startswith("2.")  # nothing said under the verified one


def test_further_steps_and_what_else_a_fix_covers_are_sub_steps():
    lines = text_call(failed_call(fixes=[WITH_STEPS]))
    i = next(k for k, line in enumerate(lines) if line.strip() == "1. pip install b-runtime")  # (a line of its own)
    assert lines[i + 1].strip() == "(it puts b.dll in C:\\py\\b)"
    assert lines[i + 2].strip() == "then: Before the load:"
    assert lines[i + 3].strip() == 'os.add_dll_directory(r"C:\\py\\b")'
    assert lines[i + 4].strip() == "it also fixes c.dll"
    assert lines[i + 2].index("then:") == lines[i].index("pip")  # indented under the fix's words
    assert lines[i + 3].index("os.") == lines[i + 2].index("Before")  # and the step's command under its words


def test_also_missing_section_in_text():
    also = [AlsoMissing("c.dll", "not_found", "b.dll", ("a.dll", "b.dll", "c.dll"), ("D:\\sdk\\c.dll",)),
            AlsoMissing("d.dll", "bad_machine", "a.dll", ("a.dll", "d.dll"))]
    lines = text_call(failed_call(fixes=[CHECKED], also=also))
    i = lines.index("  " + explained.ALSO_MISSING)
    assert "Also missing — you would hit these next" in lines[i]
    c, d = lines[i + 1], lines[i + 2]
    assert c.split() [:5] == ["c.dll", "✗", "not", "found", "needed"] and c.rstrip().endswith("installed at D:\\sdk\\c.dll")
    assert "✗ wrong machine" in d and d.rstrip().endswith("not installed anywhere dlltrace looked")
    assert c.index("needed by") == d.index("needed by")  # a table
    assert i < next(k for k, line in enumerate(lines) if line.strip() == "Fix")


def test_verdict_says_whether_the_missing_leaf_is_installed():
    found = Elsewhere("C:\\tools\\b.dll", "on_path_not_searched", path_entry=2)
    assert text_call(failed_call(found=[found]))[1] == (
        "  ✗ b.dll was not found — it is needed by a.dll; installed but not searched")
    other = Elsewhere("C:\\x86\\b.dll", "not_searched", result="wrong_machine", machine="x86")
    assert text_call(failed_call(found=[other]))[1] == (
        "  ✗ b.dll was not found — it is needed by a.dll; not installed anywhere dlltrace looked")


def test_one_word_table_names_every_cause():
    assert set(explained.CAUSE_WORDS) == set(model.CAUSES)
    for cause, words in explained.CAUSE_WORDS.items():  # every field a verdict uses is given
        words.verdict.format(name="a.dll", path="C:\\a.dll", detail="d", need="", built_for="x86", process="x64")
        words.mark.format(detail="d")


# --- the same words from simulate and report ------------------------------------------------------------
@pytest.mark.parametrize("case", ["s1", "s6", "s7", "s9", "s10"])
def test_simulate_and_report_give_the_same_words_for_the_same_call(case):
    from dlltrace.diagnosis.analysis import judged_incidents
    from dlltrace.render.text import incident_lines
    from dlltrace.trace.reader import read_trace

    trace = read_trace(TRACES / f"{case}.jsonl")
    _, incs = judged_incidents(trace)
    (inc,) = [i for i in incs if i.real_failure]
    assert len(inc.attempts) == 1 and inc.first.real_error == inc.first.result.error
    report = incident_lines(inc, trace)
    simulate = text_call(inc.first.result)  # the same CallResult, as `dlltrace simulate` shows it
    assert simulate[1] == "  " + report[0]  # the verdict
    assert report.index("  " + simulate[0]) > 0  # the call line
    body = simulate[3:]  # the module chain, where it looked, found elsewhere, the fixes
    start = report.index(body[0])
    assert report[start:start + len(body)] == body
    assert any("Where Windows looked for" in line for line in body)


def test_simulate_prints_the_same_text_it_renders(dlltrace_cli):
    from dlltrace.render.scenario import explain_scenario

    _, results = explain_scenario(str(SCENARIOS / "s1.toml"))
    r = dlltrace_cli("simulate", str(SCENARIOS / "s1.toml"))
    for res in results:
        assert "\n".join(text_call(res)) in r.stdout


# --- layout ------------------------------------------------------------------------------------------------
def _rows_after(lines: list[str], heading: str) -> list[str]:
    i = next(k for k, line in enumerate(lines) if line.strip().startswith(heading))
    out = []
    for line in lines[i + 1:]:
        if not line.startswith("    ") or line.strip().startswith("PATH and"):
            break
        out.append(line)
    return out


def test_columns_align_with_wide_characters_and_long_paths():
    from rich.cells import cell_len

    wide = "C:\\Users\\山田太郎\\ドキュメント\\プロジェクト"
    long = "C:\\" + "\\".join(f"folder{i:02}" for i in range(30))
    cands = [Candidate(wide + "\\b.dll", "DLL_LOAD_DIR of a.dll", "not_there"),
             Candidate(long + "\\b.dll", "AddDllDirectory #1", "not_there"),
             Candidate("C:\\Windows\\System32\\b.dll", "SYSTEM32", "wrong_machine", machine="x86")]
    found = [Elsewhere(wide + "\\lib\\b.dll", "not_searched", machine="x64", version="1.2"),
             Elsewhere("C:\\x\\b.dll", "on_path_not_searched", path_entry=2)]
    lines = text_call(failed_call(folder=wide, module="模块.dll", candidates=cands, found=found))
    rows = _rows_after(lines, "Where Windows looked for")
    assert len(rows) == 3
    assert long in rows[1]  # a long path is never cut, in plain text
    for column in ("DLL_LOAD_DIR of a.dll", "AddDllDirectory #1", "SYSTEM32"):
        assert any(column in r for r in rows)
    rule_at = {cell_len(r[:r.index(rule)]) for r, rule in zip(rows, ("DLL_LOAD_DIR", "AddDllDirectory", "SYSTEM32"))}
    result_at = {cell_len(r[:r.rindex(w)]) for r, w in zip(rows, ("not there", "not there", "wrong machine (x86)"))}
    assert len(rule_at) == 1 and len(result_at) == 1, rows
    rows = _rows_after(lines, "Found elsewhere")
    assert len(rows) == 2 and len({cell_len(r[:r.index(w)]) for r, w in zip(rows, ("x64 ·", "on PATH"))}) == 1, rows
    tree = lines[3:5]  # the module chain: the folder column aligns whatever the depth and the name's width
    assert tree[0].lstrip().startswith("模块.dll") and "└── b.dll" in tree[1]
    assert cell_len(tree[0][:tree[0].index(wide)]) == cell_len(tree[1][:tree[1].index("✗")])


def test_a_narrow_terminal_wraps_inside_the_columns():
    from rich.console import Console
    from rich.cells import cell_len
    import io

    long = "C:\\" + "\\".join(f"folder{i:02}" for i in range(12))
    res = failed_call(candidates=[Candidate(long + "\\b.dll", "AddDllDirectory #1", "not_there"),
                                  Candidate("C:\\b\\b.dll", "SYSTEM32", "not_there")])
    buf = io.StringIO()
    console = Console(file=buf, width=60, color_system=None, force_terminal=False, legacy_windows=False)
    print_blocks(call_blocks(from_result(res)), console)
    out = buf.getvalue().splitlines()
    i = next(k for k, line in enumerate(out) if "Where Windows looked" in line)
    end = next(k for k, line in enumerate(out) if line.startswith("    PATH and the current folder are not"))
    table = out[i + 1:end]
    assert len(table) > 2 and all(cell_len(line) <= 60 for line in out), out  # the long folder wraps...
    rows = [line for line in table if line.startswith("     1  ") or line.startswith("     2  ")]
    assert len(rows) == 2 and rows[0].index("AddDllDirectory") == rows[1].index("SYSTEM32")  # ...in its column
    column = rows[0].index("AddDllDirectory") - 2
    pieces = [line[8:column].strip() for line in table[table.index(rows[0]):table.index(rows[1])]]
    assert "".join(pieces) == long and all(p.endswith("\\") for p in pieces[:-1]), pieces  # (at separators)


def test_styles_come_from_the_typed_fields():
    from rich.console import Console
    import io

    res = failed_call(candidates=[Candidate("C:\\a\\b.dll", "PATH[1]", "not_there"),
                                  Candidate("C:\\c\\b.dll", "PATH[2]", "wrong_machine", machine="x86")],
                      fixes=[UNCHECKED])
    blocks = call_blocks(from_result(res))
    assert [style_of(b) for b in blocks if isinstance(b, str) and b.strip() in ("Fix",)] == ["heading"]
    assert style_of(blocks[1]) == "failure"
    console = Console(file=io.StringIO(), width=200, color_system="truecolor", force_terminal=True)
    styles = {}
    for b in blocks:
        if not isinstance(b, str):
            for line in console.render_lines(b, console.options, pad=False):
                for seg in line:
                    if seg.text.strip():
                        styles[seg.text.strip()] = str(seg.style or "")
    assert styles["not there"] == explained.RICH_STYLES["muted"]
    assert styles["wrong machine (x86)"] == explained.RICH_STYLES["failure"]
    assert styles["(not checked by the model)"] == explained.RICH_STYLES["warning"]
    assert any("PATH[1]" in text and style == "" for text, style in styles.items())  # words (a rule like PATH[1]) are never read as markup


def test_paths_are_printed_as_typed(capsys):
    from dlltrace import cli

    doubled = re.compile(r"\w\\\\\w")  # C:\\x: a Python repr, not what a user types
    c_literal = re.compile(r'L"(?:[^"\\]|\\.)*"')  # (a C wide string: its backslashes are escaped, as C needs)
    for case in sorted(TRACES.glob("s*.jsonl")):
        for form in ([], ["--markdown"], ["--all"]):
            capsys.readouterr()
            cli.main(["report", str(case), *form])
            out = c_literal.sub("", capsys.readouterr().out)
            assert not doubled.search(out), (case, form, doubled.search(out))
    for s in sorted(SCENARIOS.glob("s*.toml")):
        capsys.readouterr()
        cli.main(["simulate", str(s)])
        out = c_literal.sub("", capsys.readouterr().out)
        assert not doubled.search(out) and "C:\\" in out, s


def test_only_a_real_repr_is_printed_as_typed():
    """as_typed writes a Python repr in words as the user types it ('C:\\\\x.dll' -> r"C:\\x.dll"); quoted text that
    is not exactly a repr stays as it is: a path written with single backslashes ('C:\\sdk\\bin.dll': literal_eval
    read its \\b as a backspace, and a Python 3.12+ warned of its \\s on stderr), and a repr of a control character
    (an escape sequence for the terminal) stays escaped."""
    import warnings

    from dlltrace.render.explained import as_typed

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no SyntaxWarning / DeprecationWarning from a string it reads)
        assert as_typed("ctypes.CDLL('C:\\\\sdk\\\\bin.dll')") == 'ctypes.CDLL(r"C:\\sdk\\bin.dll")'
        assert as_typed("ctypes.CDLL('C:\\sdk\\bin.dll')") == "ctypes.CDLL('C:\\sdk\\bin.dll')"
        assert as_typed("ctypes.CDLL('cudart64_110.dll')") == 'ctypes.CDLL("cudart64_110.dll")'
        assert as_typed("ctypes.CDLL('a\\x1b[2Jb.dll')") == "ctypes.CDLL('a\\x1b[2Jb.dll')"
        assert as_typed("ctypes.CDLL('C:\\\\x\\n')") == "ctypes.CDLL('C:\\\\x\\n')"


def test_a_quote_after_a_backslash_starts_no_repr():
    """A quote right after a backslash (\\' inside other quoted text) is not the start of a repr: as_typed rewrote
    one (x \\'a' -> x \\"a"), and each such quote of a line with no closing one was a start read to the line's
    end (a 24 KB line of them took 5 s, time quadratic in its length)."""
    from dlltrace.render.explained import as_typed

    assert as_typed("x \\'a'") == "x \\'a'"
    assert as_typed("it said 'x \\'a\\' y' then ctypes.CDLL('C:\\\\x.dll')") == \
        "it said 'x \\'a\\' y' then ctypes.CDLL(r\"C:\\x.dll\")"
    line = "x '" + "\\' " * 3000  # (no closing quote: left as it is)
    assert as_typed(line) == line


# --- Markdown and JSON from the same data -------------------------------------------------------------------
def _s1_with(fixes, also):
    from dlltrace.diagnosis.analysis import judged_incidents
    from dlltrace.trace.reader import read_trace

    trace = read_trace(TRACES / "s1.jsonl")
    replays, incs = judged_incidents(trace)
    res = incs[0].first.result
    res.fixes = list(fixes)
    res.also_missing = list(also)
    return trace, incs, replays


def test_markdown_and_json_say_the_fix_fields_and_also_missing():
    import jsonschema

    from dlltrace.render.json import json_report
    from dlltrace.render.markdown import markdown_report
    from dlltrace.render.text import text_report

    also = [AlsoMissing("cublasLt64_12.dll", "not_found", "cublas64_12.dll",
                        ("ctranslate2.pyd", "cublas64_12.dll", "cublasLt64_12.dll"), ("C:\\cuda\\cublasLt64_12.dll",))]
    trace, incs, replays = _s1_with([WITH_STEPS, UNCHECKED, FAILS], also)
    md = markdown_report(trace, incs, replays)
    assert "Suggested fix: `pip install b-runtime` (it puts b.dll in C:\\py\\b)" in md
    assert '  - then: Before the load:  `os.add_dll_directory(r"C:\\py\\b")`' in md
    assert "- Install the B runtime\n  - (not checked by the model)" in md
    assert "Also missing — you would hit these next:" in md
    assert ("- `cublasLt64_12.dll`: not found, needed by cublas64_12.dll (`ctranslate2.pyd` → `cublas64_12.dll` → "
            "`cublasLt64_12.dll`); installed at C:\\cuda\\cublasLt64_12.dll") in md
    text = text_report(trace, incs, replays)
    assert "Also missing — you would hit these next" in text and "(not checked by the model)" in text
    doc = json_report(trace, incs, replays)
    jsonschema.validate(doc, SCHEMA)
    call = doc["calls"][0]
    assert call["also_missing"] == [{"name": "cublasLt64_12.dll", "cause": "not_found", "needed_by": "cublas64_12.dll",
                                     "chain": ["ctranslate2.pyd", "cublas64_12.dll", "cublasLt64_12.dll"],
                                     "installed_at": ["C:\\cuda\\cublasLt64_12.dll"]}]
    steps, unchecked, fails = call["fixes"]
    assert (steps["verified"], steps["outcome"], steps["covers"]) == (True, {"error": 0, "leaf": None, "cause": None,
                                                                             "chain": []}, ["b.dll", "c.dll"])
    assert [t["action"] for t in steps["then"]] == ["add_dll_directory"] and steps["then"][0]["verified"] is True
    assert (unchecked["verified"], unchecked["outcome"], unchecked["then"]) == (None, None, [])
    assert fails["verified"] is False and fails["outcome"]["leaf"] == "c.dll" and fails["dest"] == "C:\\app"


def test_json_has_every_fix_field_and_the_snapshot_and_validates():
    import jsonschema

    every = Fix(kind="env", action="set_env", name="b.dll", variable="CUDA_PATH", value="C:\\cuda", python=False,
                verified=False, outcome=Outcome(127, "b.dll", "missing_export"))
    flags = Fix(kind="call", action="change_flags", name="b.dll", flags=0, verified=True, outcome=Outcome(0))
    first = Fix(kind="import_order", action="import_first", name="b.dll", module="torch", verified=None)
    mech = Fix(kind="package", action="package_mechanism", name="b.dll", call="onnxruntime.preload_dlls()",
               verified=True, then=(FAILS,))
    res = failed_call(fixes=[every, flags, first, mech], also=[AlsoMissing("c.dll", "not_found", "b.dll")])
    res.close_names = [Elsewhere("C:\\tools\\b11.dll", "on_path", path_entry=2)]
    doc = results_dict([res], kind="simulate", source="x")
    jsonschema.validate(doc, SCHEMA)
    call = doc["calls"][0]
    assert (call["path"], call["cwd"]) == (["C:\\Windows\\System32", "C:\\tools"], "C:\\work")
    env, fl, imp, pm = call["fixes"]
    assert (env["variable"], env["value"], env["python"], env["verified"]) == ("CUDA_PATH", "C:\\cuda", False, False)
    assert env["outcome"] == {"error": 127, "leaf": "b.dll", "cause": "missing_export", "chain": []}
    assert fl["flags"] == 0 and imp["module"] == "torch" and imp["verified"] is None
    assert pm["call"] == "onnxruntime.preload_dlls()" and pm["then"][0]["dest"] == "C:\\app"
    bad = copy.deepcopy(doc)
    bad["calls"][0]["fixes"][0]["verified"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
    bad = copy.deepcopy(doc)
    bad["calls"][0]["also_missing"][0]["cause"] = "gone"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
    bad = copy.deepcopy(doc)
    bad["calls"][0]["tree"]["how_kind"] = "guessed"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)


def _enum(path: str):
    node = SCHEMA
    for part in path.strip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node["enum"]


def test_schema_enums_of_the_new_fields_are_the_model_lists():
    assert set(_enum("$defs/node/properties/how_kind")) == (set(get_args(model.HowKind)) - {""}) | {None}
    assert set(_enum("$defs/node/properties/via")) == set(get_args(model.Via))
    assert set(_enum("$defs/node/properties/cause")) == set(model.CAUSES) | {None}
    fixes = "properties/calls/items/properties/fixes/items/properties/"
    assert set(_enum(fixes + "outcome/oneOf/1/properties/cause")) == set(model.CAUSES) | {None}
    also = "properties/calls/items/properties/also_missing/items/properties/cause"
    assert set(_enum(also)) == set(model.CAUSES)
    call = SCHEMA["properties"]["calls"]["items"]["properties"]
    assert call["close_names"]["items"] == {"$ref": "#/properties/calls/items/properties/found_elsewhere/items"}
    from dataclasses import fields
    said = set(call["fixes"]["items"]["properties"])
    assert {f.name for f in fields(Fix)} <= said  # every field of a fix is in the schema


def _nodes(node):
    yield node
    for c in node["children"]:
        yield from _nodes(c)


def test_every_tree_node_of_the_fixtures_validates_against_the_node_schema(capsys):
    import jsonschema

    from dlltrace import cli

    node_schema = dict(SCHEMA["$defs"]["node"], **{"$defs": SCHEMA["$defs"]})
    node_schema = json.loads(json.dumps(node_schema).replace("#/properties/calls", "#/$defs/calls"))
    node_schema["$defs"]["calls"] = SCHEMA["properties"]["calls"]
    docs = []
    for s in sorted(SCENARIOS.glob("s*.toml")):
        capsys.readouterr()
        cli.main(["simulate", str(s), "--json"])
        docs.append(json.loads(capsys.readouterr().out))
    for t in sorted(TRACES.glob("s*.jsonl")):
        capsys.readouterr()
        cli.main(["report", str(t), "--json", "--all"])
        docs.append(json.loads(capsys.readouterr().out))
    kinds = set()
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)
        for call in doc["calls"]:
            if call.get("tree"):
                for n in _nodes(call["tree"]):
                    jsonschema.validate(n, node_schema)
                    kinds.add(n["how_kind"])
    assert {"search", None} <= kinds


def test_the_terminal_report_is_redacted_in_every_cell(tmp_path, capsys, monkeypatch):
    """On a terminal the report is printed from its tables and trees (each cell in its style); --redact
    still removes the user name from every cell."""
    import sys

    from dlltrace import cli

    text = (TRACES / "s1.jsonl").read_text(encoding="utf-8").replace("C:\\\\dlltrace-cases", "C:\\\\Users\\\\alice\\\\cases")
    p = tmp_path / "alice.jsonl"
    p.write_text(text, encoding="utf-8")
    capsys.readouterr()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli.main(["report", str(p)]) == 0
    plain = capsys.readouterr().out
    assert "alice" in plain and "Where Windows looked for" in plain and "\x1b[" in plain  # (in colour)
    assert cli.main(["report", str(p), "--redact"]) == 0
    red = capsys.readouterr().out
    assert "alice" not in red.lower() and "<user>" in red and "Where Windows looked for" in red


def test_went_past_lines_say_a_library_tried_again_once():
    """The loads a program went past, a line each, the same library failing the same way in the same program said once
    with its number of tries (CuPy 13.6's four tries of libcutensor.so.2) and its processes (pyenv's four bash
    subshells), in the order first tried; another error's or another program's try is a line of its own."""
    import dataclasses
    from dlltrace.diagnosis.result import Diagnosis, FailedLoad, ProcessEnd
    from dlltrace.diagnosis.outcome import ProcessOutcome
    from dlltrace.render.diagnosis import went_past_lines

    def failed(seq, name, message="not found"):
        return FailedLoad(seq=seq, api="dlopen", name=name, error=2, message=message, fate="went_on", reason="x",
                          origin="", leaf=name, cause="not_found", needed_by=None, chain=(name,), tried=(), elsewhere=(),
                          next_failures=(), fixes=(), model_agrees=True)

    d = Diagnosis("linux", 7, "/usr/bin/python3.11", ProcessEnd("exited", 0), ProcessOutcome("ok", 0), ())
    other = dataclasses.replace(d, pid=8)
    apart = [(d, failed(1, "libcutensor.so.2")), (d, failed(2, "libnccl.so.2")), (d, failed(3, "libcutensor.so.2")),
             (d, failed(4, "libcutensor.so.2")), (other, failed(5, "libcutensor.so.2")),
             (d, failed(6, "libcutensor.so.2", "wrong ELF class")), (d, failed(7, "libcutensor.so.2"))]
    assert went_past_lines(apart[:4] + apart[5:]) == [
        "  libcutensor.so.2  (python3.11, pid 7)  not found  (4 tries)",
        "  libnccl.so.2  (python3.11, pid 7)  not found",
        "  libcutensor.so.2  (python3.11, pid 7)  wrong ELF class"]
    assert went_past_lines(apart)[0] == "  libcutensor.so.2  (python3.11, pids 7, 8)  not found  (5 tries)"
    bash = dataclasses.replace(d, program="/usr/bin/bash")
    subshells = [(dataclasses.replace(bash, pid=p), failed(p, "pyenv-realpath.dylib")) for p in (21, 22, 23, 24, 25)]
    assert went_past_lines(apart[:1] + subshells) == [
        "  libcutensor.so.2  (python3.11, pid 7)  not found",
        "  pyenv-realpath.dylib  (bash, pids 21, 22, 23 and 2 more)  not found"]  # (one try each: no "tries")


def test_rule_process_ended_on():
    """A load of a process that ran before the program started (while_starting) is said under its own heading, not as
    one "the program went past"; when that process ended on a Python exception naming it (`bash -c "python fail.py;
    python app.py"`: fail.py died of it, then bash exec'd app.py), the line says it died of it. A process whose
    exception names another library, or none, did not; the program's own loads gone past keep their heading, and the
    headline counts the two apart."""
    import dataclasses
    from dlltrace.diagnosis.result import Diagnosis, FailedLoad, ProcessEnd, rule_process_ended_on
    from dlltrace.diagnosis.outcome import ProcessOutcome, PyError
    from dlltrace.render.diagnosis import diagnoses_lines

    def failed(seq, name, reason="while_starting"):
        return FailedLoad(seq=seq, api="dlopen", name=name, error=2, message="not found", fate="went_on", reason=reason,
                          origin="", leaf=None, cause="not_found", needed_by=None, chain=(name,), tried=(), elsewhere=(),
                          next_failures=(), fixes=(), model_agrees=True)

    oserror = ProcessOutcome("died_of_other", None, exception=PyError("OSError", "libnotthere.so.1: cannot open shared "
                                                                                 "object file: No such file or directory"))
    child = Diagnosis("linux", 8, "/usr/bin/python3.11", ProcessEnd("unknown"), oserror,
                      (failed(0, "/opt/x/libnotthere.so.1"),))
    assert rule_process_ended_on(child, child.failures[0])
    assert not rule_process_ended_on(child, failed(1, "libother.so.2"))
    assert not rule_process_ended_on(dataclasses.replace(child, outcome=ProcessOutcome("exited", 0)), child.failures[0])
    main = Diagnosis("linux", 7, "/usr/bin/python3.11", ProcessEnd("exited", 4), ProcessOutcome("exited", 4),
                     (failed(0, "libcutensor.so.2", "exception_not_a_load"),))
    lines = diagnoses_lines([main, child], "t.jsonl", main)
    assert lines[0] == "dlltrace ─ the program exited with 4; no failed load explains it · t.jsonl"
    assert lines[2:] == [
        "Failed, and the program went past them (not the failure):",
        "  libcutensor.so.2  (python3.11, pid 7)  not found",
        "",
        "Failed in processes run before the program itself started (by the wrapper or script that started it), not its "
        "failure:",
        "  /opt/x/libnotthere.so.1  (python3.11, pid 8)  not found  (that process died of it: OSError)"], lines
    # (the headline counts them apart too: pyenv's python3 -c pass, which exited 0, read "4 the program went past")
    ok = dataclasses.replace(main, end=ProcessEnd("exited", 0), outcome=ProcessOutcome("ok", 0))
    assert diagnoses_lines([ok, child], "t.jsonl", ok)[0] == \
        "dlltrace ─ 0 failed loads · 1 the program went past · 1 before the program started · t.jsonl"
    assert diagnoses_lines([dataclasses.replace(ok, failures=()), child], "t.jsonl", ok)[0] == \
        "dlltrace ─ 0 failed loads · 1 before the program started · t.jsonl"
