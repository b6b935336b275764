"""`report --markdown` fits a GitHub issue (render/markdown.py): at most MARKDOWN_BUDGET UTF-8 bytes
(under GitHub's 65,536-character issue body) however many failures a trace holds; the incident first,
the other failures collapsed in <details>, each list that does not fit capped with a line that counts
what was left out; and the trace file to attach with its size (render/attach.py)."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from dlltrace import cli
from dlltrace.diagnosis.analysis import judged_incidents
from dlltrace.render.attach import attachment_of, size_text
from dlltrace.render.markdown import ATTACH, MARKDOWN_BUDGET, OTHERS_IN_FULL, markdown_report
from dlltrace.trace.redact import redact_trace, redact_trace_file
from dlltrace.trace.reader import read_trace

GITHUB_BODY_LIMIT = 65_536
APP = "C:\\app"
LIB = APP + "\\lib"
SYS32 = "C:\\Windows\\System32"


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from report_speed import letters, pe  # noqa: E402  (the big-trace bench's PE facts and distinct names)


def dep(i: int) -> str:
    return f"dep{letters(i)}.dll"


def failing_trace(path: Path, n: int, exit_code=None, exception_at=None, path_entries: int = 0, pid: int = 100) -> Path:
    """A trace in which a Python program imports n extensions and each fails (a dependency of its own
    missing), as bench/report_speed.py builds them; `exit_code` and `exception_at` (the import the program
    ended on) say how it ended (neither: the trace does not say, so every failure is counted)."""
    tid, seq, out = pid + 1, 0, []

    def ev(kind, **f):
        nonlocal seq
        seq += 1
        out.append({"ev": kind, "seq": seq, "pid": pid, "tid": tid, "t": seq * 1000, **f})
        return seq

    extra = ";".join(f"C:\\tools\\t{k:04d}\\bin" for k in range(path_entries))
    ev("process", ppid=1, exe=APP + "\\python.exe", cmdline="python.exe big.py", shim="C:\\s.dll",
       shim_version="0.1.0", via="python", hooks=[])
    ev("env", exe=APP + "\\python.exe", cwd=APP, vars={"PATH": f"{APP};{SYS32};C:\\Windows" + (";" + extra if extra else "")},
       dll_directory=None, user_dirs=None, default_dirs=None, known_dlls=["kernel32.dll"], safe_dll_search_mode=None,
       system32=SYS32, windows="C:\\Windows", windows_version="10.0.19045", machine="x64", wine=None,
       modules=[APP + "\\python.exe", SYS32 + "\\ntdll.dll", SYS32 + "\\kernel32.dll"])
    files = []
    for i in range(n):
        mod = f"{LIB}\\m{i:06d}.pyd"
        ctx = ev("py_import", module=f"pkg.m{i:06d}")
        b = ev("load_begin", api="LoadLibraryW" if path_entries else "LoadLibraryExW", name=mod,
               flags=0 if path_entries else 0x1100, parent=None, depth=0, ctx=ctx, caller=APP + "\\python311.dll")
        ev("probe", load=b, op="open", path="\\??\\" + mod, status=0, handle="0x10")
        for d in (LIB, APP, SYS32):
            ev("probe", load=b, op="open", path=f"\\??\\{d}\\{dep(i)}", status=0xC0000034)
        ev("load_end", load=b, result=None, error=126, status=0xC0000135, path=None)
        files += [{"ev": "file", "path": f"{d}\\{dep(i)}", "kind": "missing"} for d in (LIB, APP, SYS32)]
        files.append({"ev": "file", "path": mod, "kind": "pe", "pe": pe([dep(i), "kernel32.dll"])})
    files.append({"ev": "file", "path": SYS32 + "\\kernel32.dll", "kind": "pe", "pe": pe()})
    if exception_at is not None:
        ev("py_exception", type="ImportError", message=f"DLL load failed while importing m{exception_at:06d}: "
           "The specified module could not be found.", module=f"pkg.m{exception_at:06d}", path=None, winerror=None,
           causes=[])
    if exit_code is not None:
        out.append({"ev": "exit", "seq": 0, "pid": pid, "tid": 0, "t": seq * 1000 + 1, "code": exit_code, "by": "launcher"})
    out += [{**f, "pid": pid, "seq": 0, "tid": 0, "t": 0} for f in files]
    header = {"format": "dlltrace-trace", "version": 1, "tool": "tests/test_markdown_cap.py", "created": None,
              "platform": "windows"}
    path.write_text("\n".join(json.dumps(x) for x in [header, *out]) + "\n", encoding="utf-8")
    return path


def two_processes(path: Path, first: Path, second: Path) -> Path:
    """One trace of two processes: the events of `first` (header and all), then those of `second`."""
    a, b = first.read_text(encoding="utf-8").split("\n"), second.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(a[:-1] + b[1:]), encoding="utf-8")
    return path


def markdown(capsys, path: Path, *extra: str) -> str:
    capsys.readouterr()
    assert cli.main(["report", str(path), "--markdown", *extra]) == 0
    return capsys.readouterr().out


def fits_an_issue(md: str) -> None:
    assert len(md) < GITHUB_BODY_LIMIT and len(md.encode("utf-8")) <= MARKDOWN_BUDGET + 1, len(md)
    assert md.count("<details>") == md.count("</details>")


def left_out(md: str, what: str) -> int:
    m = re.findall(rf"^\*\*(\d+) more {what} left out\*\* to fit a GitHub issue", md, re.M)
    assert len(m) == 1, m
    return int(m[0])


def test_a_thousand_failures_the_program_may_have_hit(tmp_path, capsys):
    """No exit code, no exception: every one of 1,000 failures is counted. The first is the incident, in
    full; the others collapsed, the first few in full and then a line each; the cap line counts the rest."""
    md = markdown(capsys, failing_trace(tmp_path / "t.jsonl", 1000))
    fits_an_issue(md)
    assert md.startswith(f"**dlltrace:** {dep(0)} was not found — it is needed by m000000.pyd")
    assert "<details><summary>999 other failed loads</summary>" in md
    full = md.count("**Also failed:**")
    lines = len(re.findall(r"^- dep[a-z]+\.dll was not found", md, re.M))
    assert full == OTHERS_IN_FULL and lines > 100
    assert 1 + full + lines + left_out(md, "failed loads") == 1000
    # the ones listed are the next ones in order, none twice
    listed = re.findall(r"it is needed by (m\d{6})\.pyd", md)
    assert list(dict.fromkeys(listed)) == [f"m{i:06d}" for i in range(1 + full + lines)]


def test_a_thousand_failures_and_the_one_the_program_hit(tmp_path, capsys):
    """The program ended on the 401st import's ImportError: that failure is the incident, first, whatever
    its place in the trace; the 999 it went past are a collapsed list, capped, counted."""
    md = markdown(capsys, failing_trace(tmp_path / "t.jsonl", 1000, exit_code=1, exception_at=400))
    fits_an_issue(md)
    assert md.startswith(f"**dlltrace:** {dep(400)} was not found — it is needed by m000400.pyd")
    assert "The failure the program hit: the program ended on ImportError" in md
    assert "**Also failed:**" not in md and "other failed load" not in md
    assert "<details><summary>Probed, absent, the program went on (not failures, no fix needed): 999</summary>" in md
    items = len(re.findall(r"^- `m\d{6}\.pyd`: `LoadLibraryExW`", md, re.M))
    assert items > 100 and items + left_out(md, "loads the program went past") == 999


def test_the_failure_the_program_hit_comes_before_those_whose_outcome_is_unknown(tmp_path, capsys):
    """Process 200 (first in the trace) fails 300 loads and its end is not recorded; process 100 exits
    with 1 after 300 failures: its last is the failure the program hit, and the incident."""
    p = two_processes(tmp_path / "t.jsonl", failing_trace(tmp_path / "a.jsonl", 300, pid=200),
                      failing_trace(tmp_path / "b.jsonl", 300, exit_code=1, pid=100))
    md = markdown(capsys, p)
    fits_an_issue(md)
    assert md.startswith(f"**dlltrace:** {dep(299)} was not found — it is needed by m000299.pyd")
    assert "The failure the program hit: the program exited with 1" in md.split("\n")[2]
    assert "<details><summary>300 other failed loads</summary>" in md  # process 200's, whose end is unknown
    assert "<details><summary>Probed, absent, the program went on (not failures, no fix needed): 299</summary>" in md


def test_a_few_failures_are_all_there_and_nothing_is_capped(tmp_path, capsys):
    md = markdown(capsys, failing_trace(tmp_path / "t.jsonl", 3))
    assert md.startswith(f"**dlltrace:** {dep(0)} was not found") and md.count("**Also failed:**") == 2
    assert "left out" not in md and md.count("<details>") == md.count("</details>") == 4


def test_one_failure_larger_than_an_issue_is_cut_and_says_so(tmp_path, capsys):
    """A bare-name load with 3,000 folders on PATH: its table of folders alone is over the budget."""
    p = failing_trace(tmp_path / "t.jsonl", 2, path_entries=3000)
    md = markdown(capsys, p)
    fits_an_issue(md)
    assert md.startswith(f"**dlltrace:** {dep(0)} was not found")
    assert "(cut here to fit a GitHub issue: the full report is `dlltrace report t.jsonl`)" in md
    assert ATTACH in md and left_out(md, "failed load") == 1
    trace = read_trace(p)
    small = markdown_report(trace, *reversed(judged_incidents(trace)), budget=4000)
    assert len(small.encode("utf-8")) <= 4000 and small.count("<details>") == small.count("</details>")


def attach_line(md: str) -> str:
    lines = [line for line in md.split("\n") if line.startswith(ATTACH)]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_trace_to_attach_and_its_size(tmp_path, capsys):
    p = failing_trace(tmp_path / "run.jsonl", 2, exit_code=1)
    line = attach_line(markdown(capsys, p))
    assert f"`run.jsonl` ({size_text(p.stat().st_size)}, not compressed)" in line
    assert "`dlltrace redact run.jsonl -o run.redacted.jsonl.gz`" in line
    # the incident's summary, then the file to attach, then its collapsed details
    md = markdown(capsys, p)
    assert md.index("Suggested fix") < md.index(ATTACH) < md.index("<details><summary>Chain")


def test_report_redact_says_the_file_itself_is_not_redacted(tmp_path, capsys):
    home = tmp_path / "Users" / "Bartholomew"
    home.mkdir(parents=True)
    p = failing_trace(home / "Bartholomew.jsonl", 2, exit_code=1)
    md = markdown(capsys, p, "--redact")
    line = attach_line(md)
    assert "Bartholomew" not in md
    assert line.startswith(f"{ATTACH} this report is redacted, the trace file `<user>.jsonl` "
                           f"({size_text(p.stat().st_size)}) is not")
    assert "`dlltrace redact <user>.jsonl -o <user>.redacted.jsonl.gz`" in line


def test_a_redacted_compressed_trace_says_what_it_is(tmp_path):
    """The facts come from the file, not its name: gzip by its bytes, redacted by its header."""
    p = failing_trace(tmp_path / "t.jsonl", 2, exit_code=1)
    packed = tmp_path / "t.redacted.jsonl.gz"
    redact_trace_file(p, packed)
    trace = read_trace(packed)
    a = attachment_of(trace)
    assert a.compressed and a.redacted and a.size == packed.stat().st_size and not a.report_redacted
    md = markdown_report(trace, *reversed(judged_incidents(trace)))
    assert (f"{ATTACH} `t.redacted.jsonl.gz` ({size_text(packed.stat().st_size)}, compressed, user, home and machine "
            "names replaced).") == attach_line(md)
    # a plain file named .gz, and a gzip file never redacted
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_bytes(p.read_bytes())
    trace.path = str(fake)
    assert "not compressed, whatever its name says" in attach_line(markdown_report(trace, *reversed(judged_incidents(trace))))
    real_gz = tmp_path / "plain.jsonl.gz"
    real_gz.write_bytes(gzip.compress(p.read_bytes()))
    trace.path = str(real_gz)
    line = attach_line(markdown_report(trace, *reversed(judged_incidents(trace))))
    assert "(" + size_text(real_gz.stat().st_size) + ", compressed)" in line and "It is not redacted" in line
    # the redacted copy `report --redact` reports from: the file it was made of
    trace.path = str(p)
    copy = redact_trace(trace)
    assert attachment_of(copy).report_redacted and attachment_of(copy).size == p.stat().st_size


@pytest.mark.parametrize("n", [0, 1])
def test_no_attach_line_when_nothing_failed(tmp_path, capsys, n):
    """`every load succeeded` stays one line."""
    p = failing_trace(tmp_path / "t.jsonl", n, exit_code=0)
    md = markdown(capsys, p)
    assert ATTACH not in md if n == 0 else ATTACH in md
