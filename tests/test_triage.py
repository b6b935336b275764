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
from dlltrace.diagnosis.triage import (Triaged, groups, main_diagnosis, neutral_message, representative,
                                       rule_same_exception, rule_same_failure, rule_same_trace, trace_file, triage,
                                       unreadable)
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
    """Six traces, two of one failure (s2's on another machine: its folders elsewhere): the counts, the group of two
    first with its fix, the others, the unreadable ones last (a file that does not exist, one that is no trace), then
    a line each; exit 3 (a trace not read), and the JSON form validates against schemas/triage-v1.json, which is
    triage_schema()."""
    for name in ("s2.jsonl", "s5.jsonl", "s8.jsonl"):
        (tmp_path / name).write_bytes((TRACES / name).read_bytes())
    (tmp_path / "copy of s2.jsonl").write_text((TRACES / "s2.jsonl").read_text(encoding="utf-8").replace(
        "C:\\\\dlltrace-cases\\\\s2", "D:\\\\Users\\\\ann\\\\s2"), encoding="utf-8")
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
    assert trace_words(err) == "ended with RuntimeError: boom, and no failed load explains it", trace_words(err)
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


def exception(source: str, type_: str, message: str, warnings: tuple[str, ...] = ()) -> Triaged:
    return Triaged(source, "died_of_other", "exception", type_, "", None, None, warnings=warnings, message=message)


# the same failure on two machines (Windows and Linux, other users, other temporary folders, other sizes and
# addresses), each paired with another failure of the same exception type
SAME_ON_TWO_MACHINES = [
    ("ImportError", r"cannot import name 'Mapping' from 'collections' (C:\Users\jo\AppData\Local\Programs\Python\Python311"
     r"\Lib\site-packages\attrdict\__init__.py)",
     "cannot import name 'Mapping' from 'collections' (/home/ann/.venv/lib/python3.11/site-packages/attrdict/__init__.py)",
     "cannot import name 'Sequence' from 'collections' (/home/ann/.venv/lib/python3.11/site-packages/attrdict/__init__.py)"),
    ("FileNotFoundError", r"[Errno 2] No such file or directory: 'C:\\Users\\Jo Doe\\AppData\\Local\\Temp\\_MEI84213"
     r"\\ultralytics\\cfg\\default.yaml'",
     "[Errno 2] No such file or directory: '/tmp/_MEI1207/ultralytics/cfg/default.yaml'",
     "[Errno 2] No such file or directory: '/tmp/_MEI1207/ultralytics/cfg/trackers.yaml'"),
    ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; "
     "3.21 GiB already allocated)", "CUDA out of memory. Tried to allocate 1.50 GiB (GPU 1; 24.00 GiB total capacity; "
     "22.7 GiB already allocated)", "CUDA error: an illegal memory access was encountered"),
    ("RuntimeError", "Error in <built-in method of PyCapsule object at 0x000001F2A3B4C5D0>: tmpa8x_k2qz is locked",
     "Error in <built-in method of PyCapsule object at 0x7f3a9c2b1d40>: tmp0j3hh_1e is locked",
     "Error in <built-in method of PyCapsule object at 0x7f3a9c2b1d40>: model.lock is locked"),
    ("ModuleNotFoundError", "No module named 'numpy'", "No module named 'numpy'", "No module named 'scipy'"),
]


@pytest.mark.parametrize("type_, here, there, other", SAME_ON_TWO_MACHINES, ids=[x[0] for x in SAME_ON_TWO_MACHINES])
def test_rule_same_exception(type_, here, there, other):
    """Two programs that ended on an exception no failed load explains failed the same way when the type and the
    message are the same but for what differs between machines (paths, temporary folders' names, numbers, hex
    addresses); another message of the same type is another failure, and so is the same message of another type."""
    a, b, c = exception("a", type_, here), exception("b", type_, there), exception("c", type_, other)
    assert rule_same_exception(a, b) and rule_same_failure(a, b), (neutral_message(here), neutral_message(there))
    assert not rule_same_exception(a, c) and not rule_same_failure(b, c), neutral_message(other)
    assert not rule_same_exception(a, exception("d", "OSError", here))
    assert "\\" not in neutral_message(here) and "/home" not in neutral_message(there)  # (no machine's folders)


def test_neutral_message():
    """What a group of exceptions shares, as its words and the JSON's group `message` say it: the part of a path
    below site-packages (or a temporary folder), else its name; numbers and addresses neutral; on one line."""
    assert neutral_message(SAME_ON_TWO_MACHINES[0][1]) == \
        "cannot import name 'Mapping' from 'collections' (…/attrdict/__init__.py)"
    assert neutral_message(SAME_ON_TWO_MACHINES[1][2]) == \
        "[Errno <n>] No such file or directory: '…/ultralytics/cfg/default.yaml'"
    assert neutral_message("A module compiled using NumPy 1.x cannot be run in\n NumPy 2.0.2 as it may crash") == \
        "A module compiled using NumPy <n>.x cannot be run in NumPy <n> as it may crash"
    assert neutral_message("see https://github.com/numpy/numpy/issues/26710 (cp311, python3.11, cudnn64_8.dll)") == \
        "see https://github.com/numpy/numpy/issues/<n> (cp311, python3.11, cudnn64_8.dll)"  # (names keep digits)


def exception_trace(dest: Path, type_: str, message: str, py: str = "C:\\Python311") -> Path:
    """A handwritten Windows trace of `python -c "import app"` that ends on `type_: message` and no failed load."""
    from simhelp import handwritten, python_writer

    w, _ = python_writer(handwritten(), "import app", py)
    w.ev("py_exception", type=type_, message=message, module=None, path=None, winerror=None)
    w.write(dest)
    return dest


def test_exceptions_no_load_explains_are_grouped_by_their_message(tmp_path):
    """Four bug reports whose programs ended on an ImportError no load explains: the same one on two machines (other
    users, other Pythons) is one group, said with its message made neutral; another ImportError is a group of its
    own; each trace's line has its own message; the JSON's traces have the message, its groups the neutral one."""
    mapping = "cannot import name 'Mapping' from 'collections' ({}\\site-packages\\attrdict\\__init__.py)"
    exception_trace(tmp_path / "jo.jsonl", "ImportError", mapping.format("C:\\Python311\\Lib"))
    exception_trace(tmp_path / "ann.jsonl", "ImportError", mapping.format(
        "C:\\Users\\Ann Lee\\AppData\\Roaming\\Python\\Python312"), "C:\\Users\\Ann Lee\\py312")
    exception_trace(tmp_path / "bo.jsonl", "ImportError", "numpy.core.multiarray failed to import")
    exception_trace(tmp_path / "cy.jsonl", "ImportError", mapping.format("D:\\envs\\tts\\Lib"), "D:\\envs\\tts")
    r = report("jo.jsonl", "bo.jsonl", "ann.jsonl", "cy.jsonl", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("dlltrace ─ 4 traces: 4 died of a Python error\n\nWhat failed, the most traces first:\n"
                               "\n  3 traces  ended with ImportError: cannot import name 'Mapping' from 'collections' "
                               "(…/attrdict/__init__.py), and no failed load explains it\n    jo.jsonl\n    ann.jsonl\n"
                               "    cy.jsonl\n\n  1 trace  ended with ImportError: numpy.core.multiarray failed to "
                               "import, and no failed load explains it\n    bo.jsonl\n"), r.stdout
    assert "\n  ann.jsonl  ended with ImportError: cannot import name 'Mapping' from 'collections' (C:\\Users\\Ann Lee" \
           "\\AppData\\Roaming\\Python\\Python312\\site-packages\\attrdict\\__init__.py)" in r.stdout, r.stdout
    doc = json.loads(report("jo.jsonl", "bo.jsonl", "ann.jsonl", "cy.jsonl", "--json", cwd=tmp_path).stdout)
    jsonschema.Draft202012Validator(triage_schema()).validate(doc)
    assert [(g["name"], g["message"], g["sources"]) for g in doc["groups"]] == [
        ("ImportError", "cannot import name 'Mapping' from 'collections' (…/attrdict/__init__.py)",
         ["jo.jsonl", "ann.jsonl", "cy.jsonl"]),
        ("ImportError", "numpy.core.multiarray failed to import", ["bo.jsonl"])], doc["groups"]
    assert doc["traces"][0]["message"] == mapping.format("C:\\Python311\\Lib"), doc["traces"][0]


def test_rule_same_trace(tmp_path):
    """A trace given again: the same path (another spelling of it), another path to the same file (a link), or a
    file of the same lines (a copy; the same trace gzipped); a trace of another run is none, and so is the same
    run's trace cut shorter."""
    import gzip

    (tmp_path / "t").mkdir()
    a = tmp_path / "t" / "a.jsonl"
    a.write_bytes((TRACES / "s2.jsonl").read_bytes())
    (tmp_path / "copy.jsonl").write_bytes(a.read_bytes())
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(a.read_bytes()))
    (tmp_path / "other.jsonl").write_bytes((TRACES / "s5.jsonl").read_bytes())
    (tmp_path / "cut.jsonl").write_bytes(a.read_bytes()[:-200])
    os.symlink(a, tmp_path / "link.jsonl")
    first = trace_file(str(a))
    assert rule_same_trace(first, trace_file(str(tmp_path / "t" / ".." / "t" / "a.jsonl"))) == "same_path"
    assert rule_same_trace(first, trace_file(str(tmp_path / "link.jsonl"))) == "same_file"
    assert rule_same_trace(first, trace_file(str(tmp_path / "copy.jsonl"))) == "same_content"
    assert rule_same_trace(first, trace_file(str(tmp_path / "a.jsonl.gz"))) == "same_content"
    assert rule_same_trace(first, trace_file(str(tmp_path / "other.jsonl"))) is None
    assert rule_same_trace(first, trace_file(str(tmp_path / "cut.jsonl"))) is None
    gone = trace_file(str(tmp_path / "gone.jsonl"))
    assert rule_same_trace(gone, trace_file(str(tmp_path / "gone.jsonl"))) == "same_path"
    assert rule_same_trace(gone, trace_file(str(tmp_path / "gone2.jsonl"))) is None  # (two files not there)


def test_a_trace_given_twice_is_counted_once(tmp_path):
    """The same trace given twice (by the same path, a link to it, a copy of it attached to two bug reports) is
    counted once, grouped once, and said so on one line after the counts; its copies have no line of their own.
    The JSON lists them in `duplicates`."""
    for name in ("s2.jsonl", "s8.jsonl"):
        (tmp_path / name).write_bytes((TRACES / name).read_bytes())
    (tmp_path / "issue 12.jsonl").write_bytes((TRACES / "s2.jsonl").read_bytes())
    os.symlink(tmp_path / "s8.jsonl", tmp_path / "latest.jsonl")
    args = ["s2.jsonl", "s8.jsonl", "issue 12.jsonl", "s2.jsonl", "latest.jsonl", "gone.jsonl", "gone.jsonl"]
    r = report(*args, cwd=tmp_path)
    lines = r.stdout.splitlines()
    assert r.returncode == 3 and lines[:2] == [
        "dlltrace ─ 3 traces: 2 died of a load, 1 could not be read",
        "Counted once: issue 12.jsonl (the same trace as s2.jsonl), s2.jsonl (given twice), latest.jsonl (the same "
        "file as s8.jsonl), gone.jsonl (given twice)"], r.stdout
    assert "  1 trace  cudnn64_7.dll was not found" in r.stdout and "issue 12" not in r.stdout.split("\n", 2)[2], \
        r.stdout
    each = lines[lines.index("Each trace:") + 1:]
    assert [x.split()[0] for x in each] == ["s2.jsonl", "s8.jsonl", "gone.jsonl"], each
    doc = json.loads(report(*args, "--json", cwd=tmp_path).stdout)
    jsonschema.Draft202012Validator(triage_schema()).validate(doc)
    assert doc["duplicates"] == [{"source": "issue 12.jsonl", "same_as": "s2.jsonl", "how": "same_content"},
                                 {"source": "s2.jsonl", "same_as": "s2.jsonl", "how": "same_path"},
                                 {"source": "latest.jsonl", "same_as": "s8.jsonl", "how": "same_file"},
                                 {"source": "gone.jsonl", "same_as": "gone.jsonl", "how": "same_path"}], doc["duplicates"]
    assert [t["source"] for t in doc["traces"]] == ["s2.jsonl", "s8.jsonl", "gone.jsonl"]
    md = report(*args, "--markdown", cwd=tmp_path).stdout
    assert "\n\nCounted once: `issue 12.jsonl` (the same trace as `s2.jsonl`), `s2.jsonl` (given twice), " in md, md
    assert report("s2.jsonl", "s2.jsonl", cwd=tmp_path).stdout.startswith(
        "dlltrace ─ 1 trace: 1 died of a load\nCounted once: s2.jsonl (given twice)\n")  # (still the triage's form)


def test_a_group_is_said_by_a_whole_trace_with_a_fix():
    """A group's words and fix are its representative's: the first trace that is not damaged and has a fix (a
    damaged trace's answer is only what could be read of it), else the first not damaged, else the first."""
    fix = triaged("s2.jsonl").fix
    assert fix is not None
    cut, bare, whole = (dataclasses.replace(fake("cut"), fix=fix, warnings=("cut: line 9: truncated",)),
                        fake("bare"), dataclasses.replace(fake("whole"), fix=fix))
    assert representative([cut, bare, whole]) is whole
    assert representative([cut, bare]) is bare and representative([cut]) is cut
    text = triage_text([cut, bare, whole])
    assert "    Fix, as whole's report gives it: Get cuDNN 7" in text, text
    from dlltrace.render.triage import triage_dict, triage_markdown

    assert "| `whole`: Get cuDNN 7" in triage_markdown([cut, bare, whole]), triage_markdown([cut, bare, whole])
    assert triage_dict([cut, bare, whole])["groups"][0]["representative"] == "whole"


def test_crashes_no_load_explains_are_grouped_by_their_code():
    """Two crashes no load explains are one failure when their code (or Linux signal) is the same: an access
    violation is not a stack buffer overrun, and a segmentation fault is not an abort."""
    from dlltrace.diagnosis.result import Diagnosis, ProcessEnd
    from dlltrace.render.triage import failure_words

    def crashed(source, code=None, signal=None):
        d = Diagnosis("windows" if signal is None else "linux", 7, "python", ProcessEnd("exited", code),
                      ProcessOutcome("crashed", code, signal=signal), ())  # type: ignore[arg-type]
        return triage(source, d)

    av, av2, gs, segv, abrt = (crashed("av", 0xC0000005), crashed("av2", -1073741819), crashed("gs", 0xC0000409),
                               crashed("segv", signal=11), crashed("abrt", signal=6))
    assert rule_same_failure(av, av2) and not rule_same_failure(av, gs) and not rule_same_failure(segv, abrt)
    assert failure_words(av) == "crashed (0xc0000005 STATUS_ACCESS_VIOLATION), and no failed load explains it", \
        failure_words(av)
    assert failure_words(segv) == "crashed (SIGSEGV: a segmentation fault), and no failed load explains it"
    assert [[t.source for t in g] for g in groups([av, segv, gs, av2, abrt])] == [["av", "av2"], ["segv"], ["gs"],
                                                                                  ["abrt"]]
