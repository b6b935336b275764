"""Several traces at once (`dlltrace report A B C ...`: diagnosis/triage.py, render/triage.py): a maintainer's forty
bug reports grouped by what failed, the most traces first, each group with its fix, then a line per trace; a trace
that cannot be read is a line of its own and never stops the others."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from dlltrace.api import diagnose
from dlltrace.diagnosis.ending import ending
from dlltrace.diagnosis.outcome import ProcessOutcome
from dlltrace.diagnosis.triage import Triaged, groups, main_diagnosis, rule_same_failure, triage, unreadable
from dlltrace.render.triage import triage_schema, triage_text
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"
SCHEMA = ROOT / "tracer" / "dlltrace" / "schemas" / "triage-v1.json"


def report(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlltrace", "report", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=300)


def triaged(name: str) -> Triaged:
    trace = read_trace(TRACES / name)
    return triage(name, main_diagnosis(diagnose(trace), ending(trace).pid))


def fake(source: str, culprit: str = "load", name: str = "c10.dll", cause: str = "not_found") -> Triaged:
    return Triaged(source, "died_of_load", culprit, name, cause, None, None)  # type: ignore[arg-type]


def test_rule_same_failure():
    """The same failure: the same kind of answer about the same name (a DLL's in any case), failing the same way."""
    assert rule_same_failure(fake("a"), fake("b", name="C10.DLL"))
    assert not rule_same_failure(fake("a"), fake("b", cause="bad_machine"))  # (found, but another machine's)
    assert not rule_same_failure(fake("a"), fake("b", name="c10_cuda.dll"))
    assert not rule_same_failure(fake("a", "gone", "xgboost.dll", ""), fake("b", "load", "xgboost.dll", ""))
    assert rule_same_failure(unreadable("a", "no such file"), unreadable("b", "line 1: not a dlltrace trace"))


def test_groups_put_the_most_traces_first_and_the_unread_last():
    items = [fake("a"), unreadable("x", "no such file"), fake("b", name="cudnn64_8.dll"), fake("c"),
             fake("d", "none", "", ""), fake("e", name="CUDNN64_8.dll"), fake("f")]
    assert [[t.source for t in g] for g in groups(items)] == [["a", "c", "f"], ["b", "e"], ["d"], ["x"]]


def test_triage_of_each_fixture_trace_is_its_reports_failure():
    """Each fixture trace's triage names the leaf its own report explains, and its first fix."""
    for path in sorted(TRACES.glob("*.jsonl")):
        trace = read_trace(path)
        main = main_diagnosis(diagnose(trace), ending(trace).pid)
        t = triage(path.name, main)
        assert main is not None and main.fatal is not None, path.name
        assert (t.culprit, t.name, t.cause) == ("load", main.fatal.leaf or main.fatal.name, main.fatal.cause), path.name
        assert t.fix == (main.fatal.fixes[0] if main.fatal.fixes else None), path.name
        text = report(str(path), cwd=TRACES).stdout
        assert t.name in text.split("\n\n", 2)[1], (path.name, text[:500])  # (the leaf its report explains first)


def test_many_traces_are_grouped_and_a_bad_one_is_said_on_its_line(tmp_path):
    """Five traces, two of one failure: the counts, the group of two first with its fix, the others, the unreadable
    ones last (a file that does not exist, one that is no trace), then a line each; exit 3 (a trace not read), and
    the JSON form validates against schemas/triage-v1.json, which is triage_schema()."""
    for name in ("s2.jsonl", "s5.jsonl", "s8.jsonl"):
        (tmp_path / name).write_bytes((TRACES / name).read_bytes())
    (tmp_path / "copy of s2.jsonl").write_bytes((TRACES / "s2.jsonl").read_bytes())
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    args = ["s2.jsonl", "s5.jsonl", "copy of s2.jsonl", "s8.jsonl", "gone.jsonl", "notes.txt"]
    r = report(*args, cwd=tmp_path)
    assert r.returncode == 3 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "dlltrace ─ 6 traces: 4 died of a load, 2 could not be read", lines[0]
    assert lines[2:5] == ["What failed, the most traces first:", "",
                          "  2 traces  cudnn64_7.dll was not found — it is needed by torch_cuda.dll"], lines[:6]
    assert lines[5].startswith("    Fix, as s2.jsonl's report gives it: Get cuDNN 7"), lines[5]
    assert lines[6:8] == ["    s2.jsonl", "    copy of s2.jsonl"], lines[:9]
    assert "  2 traces  could not be read\n    gone.jsonl  (no such file)\n    notes.txt  (line 1: not a dlltrace " \
           "trace" in r.stdout, r.stdout
    assert r.stdout.index("msvcp140_1.dll") < r.stdout.index("  2 traces  could not be read")  # (the unread last)
    each = lines[lines.index("Each trace:") + 1:]
    assert [x.split()[0] for x in each] == ["s2.jsonl", "s5.jsonl", "copy", "s8.jsonl", "gone.jsonl", "notes.txt"]
    assert each[1].endswith("died of a load: mkl_intel_thread.2.dll was not found — it is needed by torch_cpu.dll")
    doc = json.loads(report(*args, "--json", cwd=tmp_path).stdout)
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == triage_schema(), "regenerate schemas/triage-v1.json"
    jsonschema.Draft202012Validator(triage_schema()).validate(doc)
    assert [g["sources"] for g in doc["groups"]][0] == ["s2.jsonl", "copy of s2.jsonl"], doc["groups"]
    assert [t["kind"] for t in doc["traces"]] == ["died_of_load"] * 4 + ["unreadable"] * 2
    md = report(*args, "--markdown", cwd=tmp_path).stdout
    assert md.startswith("**dlltrace:** 6 traces: 4 died of a load, 2 could not be read.\n"), md[:200]
    rows = [x for x in md.splitlines() if x.startswith("| ")]
    assert all(x.count(" | ") == rows[0].count(" | ") or x.startswith("| trace") or x.startswith("| `")
               for x in rows[:6]), rows  # (no cell broken by a pipe)
    assert report("s2.jsonl", "s5.jsonl", "--all", cwd=tmp_path).returncode == 2  # (--all is one trace's)


def test_one_trace_is_its_full_report(tmp_path):
    """One trace given: the report as before, not the triage."""
    r = report(str(TRACES / "s2.jsonl"), cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("dlltrace ─ 1 failed load") and "What failed" not in r.stdout


@pytest.mark.parametrize("kind", ["text", "markdown"])
def test_a_pipe_or_a_newline_in_a_file_name_breaks_no_line(kind, tmp_path):
    """A file name with a pipe and a newline: the Markdown table keeps its columns, the text its lines."""
    odd = "a|b\nc.jsonl"
    (tmp_path / odd).write_bytes((TRACES / "s2.jsonl").read_bytes())
    out = report(odd, "s9.jsonl", *(["--markdown"] if kind == "markdown" else []), cwd=tmp_path).stdout
    if kind == "markdown":
        rows = [x for x in out.splitlines() if x.startswith("|")]
        assert all(x.replace("\\|", "").count("|") == rows[0].replace("\\|", "").count("|") for x in rows[:3]), rows
    else:
        assert "\n  a|b\\nc.jsonl  died of a load: cudnn64_7.dll" in out and "\nc.jsonl" not in out, out
        assert triage_text([triaged("s2.jsonl")]) == triage_text([triaged("s2.jsonl")])  # (made of the data alone)


def test_a_fix_is_said_with_its_steps(tmp_path):
    """A fix whose steps make it work (pyusb on Windows without libusb: pip install libusb-package, then its folder on
    PATH, without which find_library never looks there) is said whole in each form, never its first step alone."""
    from test_outcome import pyusb_trace

    traces = [str(pyusb_trace(tmp_path / f"t{i}.jsonl", installed=False)) for i in (1, 2)]
    folder = "C:\\Python311\\Lib\\site-packages\\libusb_package"
    text = report(*traces, cwd=tmp_path).stdout
    assert "-m pip install libusb-package" in text and f'      then: Before starting the program: in cmd\n' \
        f'            set "PATH={folder};%PATH%"' in text, text
    md = report(*traces, "--markdown", cwd=tmp_path).stdout
    assert "libusb-package" in md and f"then: Before starting the program: in cmd" in md, md
    doc = json.loads(report(*traces, "--json", cwd=tmp_path).stdout)
    jsonschema.validate(doc, triage_schema())
    assert all(f'set "PATH={folder};%PATH%"' in t["fix"] for t in doc["traces"]), doc["traces"]


def test_a_system_package_fix_is_one_command_among_several_traces():
    """A system package fix whose next packages are in its one apt-get line (PySide6's xcb plugin: libxcb-icccm4,
    then libxcb-keysyms1; python-vlc's libvlc5 with vlc-plugin-base) is that line in each form, as one trace's report
    says it: its steps not said again after it ('then: apt-get install libxcb-keysyms1' repeated the package)."""
    from dlltrace.model import Fix
    from dlltrace.render.triage import triage_dict, triage_markdown

    keysyms = Fix("install", "install_system_package", name="libxcb-keysyms.so.1", package="libxcb-keysyms1",
                  folder="/usr/lib/x86_64-linux-gnu", value="root", python=False)
    fix = Fix("install", "install_system_package", name="libxcb-icccm.so.4", package="libxcb-icccm4",
              folder="/usr/lib/x86_64-linux-gnu", value="root", python=False, then=(keysyms,))
    items = [dataclasses.replace(fake(f"t{i}.jsonl", name="libxcb-icccm.so.4"), fix=fix) for i in (1, 2)]
    for words in (triage_text(items), triage_markdown(items), json.dumps(triage_dict(items))):
        assert "apt-get install libxcb-icccm4 libxcb-keysyms1" in words and "then" not in words, words
        assert words.count("libxcb-keysyms1") == words.count("apt-get install libxcb-icccm4 libxcb-keysyms1"), words


def test_a_cpu_only_build_the_program_imported_is_what_a_faultless_trace_reports():
    """A trace where nothing failed but the program imported a CPU-only build of a GPU framework (diagnosis/cuda.py
    rule_imported_cpu_build) is grouped by that build, not with the traces where nothing failed."""
    main = triaged("s2.jsonl").main
    assert main is not None
    ok = dataclasses.replace(main, outcome=ProcessOutcome("ok", 0), failures=())
    a, b, c = (triage("a", ok, ["torch 2.13.0+cpu"]), triage("b", ok, ["torch 2.13.0+cpu"]), triage("c", ok))
    assert (a.culprit, a.name, c.culprit) == ("cpu_build", "torch 2.13.0+cpu", "none")
    assert [[t.source for t in g] for g in groups([c, a, b])] == [["a", "b"], ["c"]]
    assert "  2 traces  torch 2.13.0+cpu is a CPU-only build: it never loads CUDA, so the program ran on the CPU" in \
        triage_text([c, a, b])


def test_an_end_nothing_explains_is_not_nothing_failed(tmp_path):
    """A program that exited with an error no load explains, was killed, or whose end the trace does not hold (a
    trace cut short) is never grouped with those that ran without a fault, nor said to be "nothing failed"; a
    damaged trace's line says it is damaged, its warnings are printed as one trace's report prints them, exit 3, and
    the JSON (with each trace's warnings) validates."""
    import dataclasses

    from dlltrace.diagnosis.outcome import ProcessOutcome
    from dlltrace.diagnosis.result import Diagnosis, ProcessEnd
    from dlltrace.render.triage import failure_words

    def ended(kind, code=None):
        end = ProcessEnd("exited" if kind in ("ok", "exited") else kind, code)  # type: ignore[arg-type]
        return Diagnosis("linux", 7, "/usr/bin/python3", end, ProcessOutcome(kind, code), ())  # type: ignore[arg-type]

    ok, one, two, killed = (triage(n, ended(k, c)) for n, k, c in [("ok", "ok", 0), ("one", "exited", 1),
                                                                   ("two", "exited", 2), ("k", "killed", None)])
    assert not rule_same_failure(ok, one) and not rule_same_failure(one, two) and not rule_same_failure(one, killed)
    assert failure_words(one) == "exited with 1, and no failed load explains it", failure_words(one)
    assert failure_words(killed) == "was killed" and failure_words(ok) == "nothing failed"
    from dlltrace.diagnosis.outcome import PyError
    from dlltrace.render.triage import counts_line, trace_words

    err = triage("e", dataclasses.replace(ended("exited", 1), outcome=ProcessOutcome(
        "died_of_other", 1, PyError("RuntimeError", "boom"))))  # type: ignore[arg-type]
    assert trace_words(err) == "ended with RuntimeError, and no failed load explains it", trace_words(err)
    assert counts_line([err, one]) == "2 traces: 1 died of a Python error, 1 exited with an error", counts_line([err])
    assert [[t.source for t in g] for g in groups([ok, one, killed, dataclasses.replace(one, source="one'")])] == \
        [["one", "one'"], ["k"], ["ok"]]
    (tmp_path / "cut.jsonl").write_bytes((TRACES / "s2.jsonl").read_bytes()[:3000])  # (cut short mid-line)
    (tmp_path / "s9.jsonl").write_bytes((TRACES / "s9.jsonl").read_bytes())
    r = report("s9.jsonl", "cut.jsonl", cwd=tmp_path)
    assert r.returncode == 3 and "dlltrace: warning: cut.jsonl: line 9: truncated last line ignored" in r.stderr, \
        (r.returncode, r.stderr)
    assert "nothing failed" not in r.stdout and r.stdout.splitlines()[0].endswith("1 with no end in the trace"), \
        r.stdout
    assert "\n  cut.jsonl  the trace does not say how the program ended (cut short?) (a damaged trace: line 9: " \
           "truncated last line ignored)\n" in r.stdout + "\n", r.stdout
    doc = json.loads(report("s9.jsonl", "cut.jsonl", "--json", cwd=tmp_path).stdout)
    jsonschema.Draft202012Validator(triage_schema()).validate(doc)
    assert doc["traces"][1]["warnings"] == ["cut.jsonl: line 9: truncated last line ignored"], doc["traces"][1]
    assert (doc["traces"][1]["culprit"], doc["traces"][1]["cause"]) == ("end", "unknown"), doc["traces"][1]


def test_a_control_character_of_a_trace_reaches_no_terminal(tmp_path):
    """A bug report's trace whose paths hold an escape sequence and a bell (a hostile or garbled path): the text of
    several traces shows them escaped, as one trace's report does, in the fix and in what failed, never raw."""
    text = (TRACES / "s2.jsonl").read_text(encoding="utf-8")
    (tmp_path / "esc.jsonl").write_text(text.replace("C:\\\\dlltrace-cases\\\\s2",
                                                     "C:\\\\dlltrace-cases\\\\s2\\u001b[31mRED\\u0007"), encoding="utf-8")
    (tmp_path / "name.jsonl").write_text(text.replace("cudnn64_7.dll", "cudnn64_7\\u001b[2J.dll"), encoding="utf-8")
    out = report("esc.jsonl", "name.jsonl", cwd=tmp_path).stdout
    assert "RED" in out and "\x1b" not in out and "\x07" not in out, out
    assert "s2\\x1b[31mRED\\x07\\venv" in out and "cudnn64_7\\x1b[2J.dll" in out, out


def test_a_trace_with_no_process_is_not_read_among_several(tmp_path):
    """A trace that is its header alone (a run cut short before its first event): one trace's report says "the trace
    holds no traced process" and exits 3; among several it is a trace not read, said so, and the exit is 3."""
    (tmp_path / "s9.jsonl").write_bytes((TRACES / "s9.jsonl").read_bytes())
    (tmp_path / "head.jsonl").write_text((TRACES / "s2.jsonl").read_text(encoding="utf-8").splitlines()[0] + "\n",
                                         encoding="utf-8")
    alone = report("head.jsonl", cwd=tmp_path)
    assert alone.returncode == 3 and "the trace holds no traced process" in alone.stderr, (alone.returncode, alone.stderr)
    r = report("s9.jsonl", "head.jsonl", cwd=tmp_path)
    assert r.returncode == 3, (r.returncode, r.stdout)
    assert "\n  head.jsonl  could not be read: the trace holds no traced process" in r.stdout, r.stdout
