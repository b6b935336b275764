"""Every failure of shared/CASES.md as a trace (fixtures/traces/sN.jsonl), with its verdict from
`dlltrace report --json` asserted against fixtures/traces/expect.toml.

The .jsonl files are read as committed, on any OS, without Wine. Most were recorded under Wine by
fixtures/traces/record.py (casehost.c performing the case's calls on mingw-built DLLs named like
the real ones); S4, S7 and S8 cannot happen under Wine and were written by
fixtures/traces/handwritten.py (platform "windows"). The Wine tests at the end re-record a case and
record the acceptance trace (missing leaf two levels down) and report it from a copy alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlltrace import cli
from dlltrace.trace.reader import read_trace
from test_fixtures import fix_problems
from test_shim import shim_env  # noqa: F401  (session fixture: the shim and the fixture DLLs under Wine)

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"
EXPECT = tomllib.loads((TRACES / "expect.toml").read_text(encoding="utf-8"))
CASES = [f"s{i}" for i in range(1, 11)]


def report_json(path, capsys) -> dict:
    capsys.readouterr()
    assert cli.main(["report", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out)


def report_text(path, capsys, *extra: str) -> str:
    capsys.readouterr()
    assert cli.main(["report", str(path), *extra]) == 0
    return capsys.readouterr().out


def test_every_case_has_a_trace_and_an_expectation():
    assert sorted(p.stem for p in TRACES.glob("s*.jsonl")) == sorted(CASES)
    assert sorted(EXPECT) == sorted(CASES)


@pytest.mark.parametrize("case", CASES)
def test_case_verdict(case, capsys):
    exp = EXPECT[case]
    rep = report_json(TRACES / f"{case}.jsonl", capsys)
    assert rep["format"] == "dlltrace-report" and rep["warnings"] == []
    assert rep["error"] == exp["error"]
    first = next(c for c in rep["calls"] if c["index"] == rep["failed"][0])
    assert first["real_error"] == exp["error"] and first["error"] == exp["error"]  # the model agrees on the code
    assert first["leaf"]["name"] == exp["leaf"]
    assert first["leaf"]["cause"] == exp["cause"]
    assert first["chain"] == exp["chain"]
    assert first["fixes"], "no fix suggested"
    assert not fix_problems(exp, first["fixes"][0]["text"]), first["fixes"][0]["text"]  # fix_contains, fix_not_contains
    if "found_elsewhere" in exp:
        found = {c["path"]: c["rule"] for c in first["found_elsewhere"]}
        assert exp["found_elsewhere"] in found, found
        if "found_elsewhere_rule" in exp:
            assert found[exp["found_elsewhere"]] == exp["found_elsewhere_rule"]
    if "not_searched" in exp:
        assert first["not_searched"] == exp["not_searched"]
    if "leaf_path" in exp:
        assert first["leaf"]["path"] == exp["leaf_path"]
    if "leaf_detail" in exp:
        assert exp["leaf_detail"] in first["leaf"]["detail"]
    assert (first["verdict"]["fate"], first["verdict"]["reason"]) == ("fatal", exp["reason"])
    if exp.get("agreed"):
        assert first["disagreements"] == [] and first["agreed"] == len(first["real_probes"]) > 0
    if "attempts" in exp:
        attempts = [c for c in rep["calls"] if c["name"] == first["name"]]
        assert [[c["op"], c["flags"]] for c in attempts] == exp["attempts"]
        assert all(c["real_error"] == exp["error"] for c in attempts)


@pytest.mark.parametrize("case", CASES)
def test_recorded_or_hand_written_as_documented(case):
    first = json.loads((TRACES / f"{case}.jsonl").read_text(encoding="utf-8").splitlines()[0])
    recorded = EXPECT[case]["how"].startswith("recorded under Wine")
    assert first["platform"] == ("wine" if recorded else "windows")
    assert ("hand-written" in first["tool"]) == (not recorded)


def test_s1_s6_text_says_path_is_on_path_but_not_searched(capsys):
    # (that PATH is not searched is said once: test_report.test_path_not_searched_is_said_once_for_0x1100)
    for case in ("s1", "s6"):
        text = report_text(TRACES / f"{case}.jsonl", capsys)
        assert "on PATH (entry" in text and "which this load does not search" in text
        assert "AddDllDirectory(L\"C:\\\\dlltrace-cases\\\\" in text  # (the C host: Win32 words, no Python)
        assert "os.add_dll_directory" not in text


def test_s2_both_attempts_with_their_folders(capsys):
    text = report_text(TRACES / "s2.jsonl", capsys)  # (its verdict line: test_report.test_first_line_...)
    assert "then the program retried with LoadLibraryW after putting its folders on PATH  → 126 (same leaf)" in text
    assert "(first attempt, flags DLL_LOAD_DIR | DEFAULT_DIRS)" in text
    assert "(attempt 2, flags none (standard order))" in text
    rep = report_json(TRACES / "s2.jsonl", capsys)
    first, retry = [c for c in rep["calls"] if c["name"].endswith("caffe2_detectron_ops_gpu.dll")]
    lib = "c:\\dlltrace-cases\\s2\\venv\\lib\\site-packages\\torch\\lib\\"
    # what the real loader did: the retry searched PATH, where the host had put torch\lib, and cudnn64_7.dll
    # was missing there too (the first attempt never looked at PATH)
    assert lib + "cudnn64_7.dll" in [p.lower() for p in retry["real_probes"]]
    assert "c:\\windows\\system32\\wbem\\cudnn64_7.dll" in [p.lower() for p in retry["real_probes"]]
    assert not any("wbem" in p.lower() for p in first["real_probes"])


@pytest.mark.parametrize("case, leaf", [("s2", "cudnn64_7.dll"), ("s5", "mkl_intel_thread.2.dll")])
def test_retry_after_path_change_has_the_same_leaf(case, leaf, capsys):
    """The host puts torch\\lib on PATH before the retry (a `setenv` event): the replay searches it."""
    rep = report_json(TRACES / f"{case}.jsonl", capsys)
    retry = [c for c in rep["calls"] if c["op"] == "LoadLibraryW"][0]
    assert retry["leaf"]["name"] == leaf and retry["disagreements"] == []
    assert any(c["rule"] == "PATH[1]" and c["path"].lower().endswith("\\torch\\lib\\" + leaf) for c in retry["candidates"])
    text = report_text(TRACES / f"{case}.jsonl", capsys)
    assert "retried with LoadLibraryW after putting its folders on PATH" in text


def test_s9_invents_no_missing_dll(capsys):
    rep = report_json(TRACES / "s9.jsonl", capsys)
    (call,) = rep["calls"]
    assert not any(n for n in _walk(call["tree"]) if n.get("cause") == "not_found")
    text = report_text(TRACES / "s9.jsonl", capsys)
    assert "its initialisation (DllMain) failed; every dependency resolved" in text.splitlines()[2]
    assert "not found" not in text


def test_s10_names_both_machines(capsys):
    text = report_text(TRACES / "s10.jsonl", capsys)
    assert text.splitlines()[2] == ("✗ blingfiretokdll.dll is a 32-bit DLL (x86) in a 64-bit process (x64): Windows "
                                    "cannot load a 32-bit DLL into a 64-bit process")
    assert "wrong machine (x86)" in text


def test_s7_says_which_import_which_module_and_why(capsys):
    text = report_text(TRACES / "s7.jsonl", capsys)
    assert ("✗ cudnn64_7.dll at C:\\DeepMosaics\\cudnn64_7.dll does not export cudnnGetConvolutionForwardAlgorithm_v7"
            " — it is needed by torch_cuda.dll") in text
    assert "loaded-module list" in text and "already loaded" in text
    assert "C:\\DeepMosaics\\torch\\lib\\cudnn64_7.dll  x64 · 7.6.5" in text


def test_s4_shows_the_bound_msvcp140_and_its_version(capsys):
    text = report_text(TRACES / "s4.jsonl", capsys)
    assert "import torch" in text  # the Python context of the load
    assert "msvcp140.dll in use is C:\\Python312\\Lib\\site-packages\\otherpkg\\msvcp140.dll version 14.36.32532.0" in text


def _walk(node):
    yield node
    for c in node.get("children", []):
        yield from _walk(c)


# --- under Wine ---------------------------------------------------------------------------------------------
def _dlltrace(*argv, cwd, env_extra=None) -> subprocess.CompletedProcess:
    import winetools

    return winetools.dlltrace(*argv, cwd=cwd, **(env_extra or {}))


@pytest.mark.wine
def test_acceptance_wine_trace_reported_from_the_file_alone(shim_env, tmp_path, dlltrace_cli):
    """A trace recorded under Wine of a fixture host loading a DLL whose dependency two levels down is
    missing is reported with that leaf and a chain of length 3, on Linux, from the file alone."""
    import winetools
    from test_shim import HOST, w

    rec = tmp_path / "rec"
    rec.mkdir()
    r = _dlltrace("run", "--wine", "-o", "t.jsonl", "--", HOST, "load", w("chain", "top.dll"), "0x1100", cwd=rec)
    assert r.returncode == 126, r.stderr
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    shutil.copy2(rec / "t.jsonl", alone / "copy.jsonl")
    shutil.rmtree(rec)
    # no Wine prefix to look at: the report must work from the copied file only
    r = dlltrace_cli("report", "--json", "copy.jsonl", cwd=alone,
                     WINEPREFIX=str(tmp_path / "no-such-prefix"), HOME=str(tmp_path / "no-home"))
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    (call,) = rep["calls"]
    assert (call["leaf"]["name"], call["leaf"]["cause"]) == ("leaf.dll", "not_found")
    assert call["chain"] == ["top.dll", "mid.dll", "leaf.dll"]
    assert call["real_error"] == 126 and call["disagreements"] == []
    assert call["agreed"] == len(call["real_probes"]) >= 5
    assert not (tmp_path / "no-such-prefix").exists()
    assert winetools.PREFIX.exists()  # (the real prefix was there all along; the report just did not use it)


@pytest.mark.wine
def test_rerecorded_s1_s2_s10_give_the_committed_verdicts(tmp_path, capsys):
    """record.py still reproduces the committed traces' verdicts (a real run under Wine); S2's
    host changes PATH before its retry, and the shim records that (a `setenv` event)."""
    import winetools

    winetools.require("wine", "mingw64", "mingw32")
    sys.path.insert(0, str(TRACES))
    try:
        import record
    finally:
        sys.path.remove(str(TRACES))
    for case in ("s1", "s10", "s2"):
        fresh_path = record.record(case, tmp_path)
        fresh = report_json(fresh_path, capsys)
        committed = report_json(TRACES / f"{case}.jsonl", capsys)
        key = lambda rep: [(c["op"], c["name"], c["real_error"], c["leaf"]["name"], c["leaf"]["cause"], c["chain"],
                            [f["text"] for f in c["fixes"]], c["real_probes"]) for c in rep["calls"]]
        assert key(fresh) == key(committed)
    setenv = [e for e in read_trace(fresh_path).of("setenv")]
    assert [(e["name"].upper(), e["ok"]) for e in setenv] == [("PATH", True)]
    assert setenv[0]["value"].lower().startswith("c:\\dlltrace-cases\\s2\\venv\\lib\\site-packages\\torch\\lib;")
