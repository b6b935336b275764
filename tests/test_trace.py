"""Reading trace files: header checks, truncated/garbled lines, typed loads and probes (no Wine needed)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from dlltrace.errors import EXIT_BAD_TRACE, DlltraceError
from dlltrace.trace.reader import nt_to_win32, read_trace
from dlltrace.tracecheck import SCHEMA_PATH

HEADER = {"format": "dlltrace-trace", "version": 1, "tool": "dlltrace 0.1.0", "created": None, "platform": "wine"}


def ev(kind, seq, pid=7, tid=1, **f):
    return {"ev": kind, "seq": seq, "pid": pid, "tid": tid, "t": seq * 10, **f}


EVENTS = [
    ev("process", 1, exe="C:\\h.exe", hooks=["LoadLibraryExW"]),
    ev("py_import", 2, module="torch"),
    ev("load_begin", 3, api="LoadLibraryExW", name="C:\\t\\top.dll", flags=0x1100, parent=None, depth=0, ctx=2, caller="C:\\h.exe"),
    ev("probe", 4, load=3, op="open", path="\\??\\C:\\t\\top.dll", status=0, handle="0x34"),
    ev("load_begin", 5, api="LoadLibraryW", name="n.dll", flags=0, parent=3, depth=1, ctx=2, caller="C:\\t\\top.dll"),
    ev("probe", 6, load=5, op="open", path="\\??\\C:\\t\\n.dll", status=0xC0000034),
    ev("load_end", 7, load=5, result=None, error=126, status=0xC0000135, path=None),
    ev("probe", 8, load=3, op="open", path="\\??\\C:\\t\\leaf.dll", status=0xC0000034),
    ev("load_end", 9, load=3, result="0x1000", error=0, status=0, path="C:\\t\\top.dll"),
    ev("load_begin", 1, pid=8, api="LoadLibraryA", name="x.dll", flags=0, parent=None, depth=0, ctx=None, caller=None),
]


def write(tmp_path, lines, tail=b"\n", name="t.jsonl"):
    p = tmp_path / name
    p.write_bytes(b"\n".join(json.dumps(x, ensure_ascii=False).encode() if not isinstance(x, bytes) else x
                             for x in lines) + tail)
    return p


def test_typed_loads_probes_nesting_and_context(tmp_path):
    tr = read_trace(write(tmp_path, [HEADER, *EVENTS]))
    assert tr.warnings == [] and tr.header.version == 1 and tr.header.platform == "wine"
    assert tr.pids == [7]  # pid 8 has no process event
    top, nested, other = tr.loads()
    assert (top.name, top.flags, top.ok, top.path, top.error) == ("C:\\t\\top.dll", 0x1100, True, "C:\\t\\top.dll", 0)
    assert [p.win_path for p in top.probes] == ["C:\\t\\top.dll", "C:\\t\\leaf.dll"]
    assert top.children == [nested] and nested.parent == top.seq
    assert (nested.ok, nested.error, nested.status) == (False, 126, 0xC0000135)
    assert [p.seq for p in top.all_probes()] == [4, 6, 8]
    assert not nested.probes[0].ok and top.probes[0].ok
    assert tr.context(top)["module"] == "torch"
    assert other.pid == 8 and not other.finished and other.error is None
    assert [ld.seq for ld in tr.failed_loads()] == [5, 1]
    assert [ld.seq for ld in tr.top_loads(pid=7)] == [3]


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    full = json.dumps(EVENTS[2]).encode()
    tr = read_trace(write(tmp_path, [HEADER, *EVENTS[:2], full[: len(full) // 2]], tail=b""))
    assert [e["seq"] for e in tr.events] == [1, 2]
    assert len(tr.warnings) == 1 and "line 4" in tr.warnings[0] and "truncated" in tr.warnings[0]


def test_garbled_middle_line_is_skipped_and_the_rest_kept(tmp_path):
    tr = read_trace(write(tmp_path, [HEADER, EVENTS[0], b'{"ev":"probe","seq":4,"pi', EVENTS[1], b"\xff\xfe"]))
    assert [e["seq"] for e in tr.events] == [1, 2]
    assert [w.split(": ")[1] for w in tr.warnings] == ["line 3", "line 5"]


def test_a_file_that_is_not_utf8_is_read_line_by_line(tmp_path):
    # blank lines are skipped, a line cut inside a UTF-8 character is the truncated last line, and
    # a first line that is not UTF-8 is not a trace
    named = json.dumps(ev("py_import", 3, module="é"), ensure_ascii=False).encode()
    tr = read_trace(write(tmp_path, [HEADER, EVENTS[0], b" \t", b"\xff", named, b"", named[:-3]], tail=b""))
    assert [e["seq"] for e in tr.events] == [1, 3] and tr.events[1]["module"] == "é"
    assert [w.split(": ", 1)[1] for w in tr.warnings] == [
        "line 4: unreadable line skipped", "line 7: truncated last line ignored"]
    with pytest.raises(DlltraceError) as e:
        read_trace(write(tmp_path, [b"\xff" + json.dumps(HEADER).encode(), EVENTS[0]]))
    assert "line 1: not a dlltrace trace (the first line is not JSON)" in str(e.value)


def test_lines_that_parse_only_together_are_still_bad_lines(tmp_path):
    # the reader parses all lines as one JSON array first; lines that are bad alone but would make
    # a valid array together (two values on one line, a value split over two lines) are still each
    # reported, by line, as the line-by-line reader would
    two = (json.dumps(EVENTS[1]) + "," + json.dumps(EVENTS[2])).encode()
    split = json.dumps(EVENTS[3]).encode()
    tr = read_trace(write(tmp_path, [HEADER, EVENTS[0], two, split[:20], split[20:], b"[1]", EVENTS[4]]))
    assert [e["seq"] for e in tr.events] == [1, 5]
    assert [w.split(": ", 1)[1] for w in tr.warnings] == [
        "line 3: unreadable line skipped", "line 4: unreadable line skipped", "line 5: unreadable line skipped",
        "line 6: not a JSON object, skipped"]


@pytest.mark.parametrize("content, what", [
    (b"", "line 1: empty file"),
    (b"hello\n", "line 1: not a dlltrace trace"),
    (b'{"format":"something-else","version":1}\n', "line 1: not a dlltrace trace"),
    (b'[1,2]\n', "line 1: not a dlltrace trace"),
    (b'{"format":"dlltrace-trace","version":2,"tool":"x","platform":"w"}\n', "line 1: trace format version 2 is newer"),
    (b'{"format":"dlltrace-trace","version":"1"}\n', "line 1: invalid trace format version"),
])
def test_not_a_trace_or_newer_version_raises_bad_trace(tmp_path, content, what):
    p = tmp_path / "x.jsonl"
    p.write_bytes(content)
    with pytest.raises(DlltraceError) as e:
        read_trace(p)
    assert e.value.exit_code == EXIT_BAD_TRACE
    assert str(e.value).startswith(f"{p}: ") and what in str(e.value)


def test_missing_file_is_a_bad_trace_error(tmp_path):
    with pytest.raises(DlltraceError) as e:
        read_trace(tmp_path / "nope.jsonl")
    assert e.value.exit_code == EXIT_BAD_TRACE and "nope.jsonl" in str(e.value)


def test_nt_paths():
    assert nt_to_win32("\\??\\C:\\a.dll") == "C:\\a.dll"
    assert nt_to_win32("\\??\\UNC\\srv\\share\\a.dll") == "\\\\srv\\share\\a.dll"
    assert nt_to_win32("a.dll") == "a.dll" and nt_to_win32(None) is None


def _validator():
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def test_schema_accepts_the_sample_and_rejects_bad_events():
    v = _validator()
    for obj in [HEADER, *EVENTS]:
        assert not list(v.iter_errors(obj)), obj
    assert list(v.iter_errors({"ev": "probe", "seq": 1, "pid": 1, "tid": 1, "t": 1, "load": 1, "op": "open"}))  # no status
    assert list(v.iter_errors({**HEADER, "version": 2}))
    assert list(v.iter_errors({"ev": "load_end", "seq": 1, "pid": 1, "tid": 1, "t": 1, "load": 1, "result": 5, "error": 0}))


def _fixture_events():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    for path in sorted((root / "fixtures" / "traces").glob("s*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            yield json.loads(line)


def test_fixture_traces_follow_the_schema():
    # the recorded and handwritten traces, file facts included, are what the schema describes
    v = _validator()
    kinds = set()
    for e in _fixture_events():
        assert not [err.message for err in v.iter_errors(e)], e
        kinds.add(e["ev"])
    assert {"process", "env", "load_begin", "load_end", "probe", "file", "py_import", "py_exception"} <= kinds


def test_the_readers_checks_agree_with_the_json_schema():
    """tracecheck compiles the schema into plain checks; jsonschema is the reference. On events of
    the fixtures with one field changed to values of every JSON type, both must say the same."""
    import copy
    import random

    from dlltrace.trace.reader import ESSENTIAL, REQUIRED_INT
    from dlltrace.tracecheck import check_event

    v = _validator()
    rng = random.Random(20261129)
    values = [None, 0, -1, 7, 2**33, 1.5, True, "", "x", "0x1f", "C:\\a.dll", [], ["a"], [1], [["a"]], {}, {"a": 1},
              {"machine": "x64"}, {"dll": "a.dll"}, "open", "LoadLibraryW", "x64", "elsewhere", "pe"]
    events = list(_fixture_events())
    tried = disagreed = 0
    for _ in range(600):
        e = copy.deepcopy(rng.choice(events))
        k = rng.choice(sorted(e))
        if k == "ev":
            continue
        e[k] = rng.choice(values)
        if rng.random() < 0.2:
            del e[k]
        valid = not list(v.iter_errors(e))
        problems, usable = check_event(copy.deepcopy(e), ESSENTIAL + REQUIRED_INT.get(e["ev"], ()))
        tried += 1
        if valid != (usable and not problems):
            disagreed += 1
            print("disagree:", valid, problems, e)
    assert tried > 500 and disagreed == 0, disagreed


def test_only_the_command_freezes_after_a_pause(tmp_path):
    # a library caller's process lives on: paused_gc must not freeze its objects (cyclic garbage
    # among them would never be collected); the `dlltrace` command (cli.entry) ends soon after
    import gc

    from dlltrace.trace.reader import freeze_after_pauses, paused_gc

    p = write(tmp_path, [HEADER, *EVENTS])
    was = gc.isenabled()
    gc.enable()  # (paused_gc freezes only a collector it paused: this test's own, whatever a test before left)
    gc.unfreeze()
    try:
        read_trace(p)
        assert gc.get_freeze_count() == 0
        freeze_after_pauses()
        with paused_gc():
            pass
        assert gc.get_freeze_count() > 0
    finally:
        freeze_after_pauses(False)
        gc.unfreeze()
        if not was:
            gc.disable()


def test_init_failed_module_from_the_loader_notifications():
    """1114 in a dependency: the module whose DllMain failed is the last one notified "loaded"
    before the first "unloaded" (Wine's process_attach order); nothing is guessed otherwise."""
    from dlltrace.diagnosis.replay import init_failed_module
    from dlltrace.trace.reader import Load

    def load(*notes):
        ld = Load(seq=1, pid=1, tid=1, t=0, api="LoadLibraryExW", name="C:\\t\\fbgemm.dll", flags=0, parent=None,
                  depth=0, ctx=None, caller=None, end={"result": None, "error": 1114})
        ld.notifications = list(notes)
        return ld

    assert init_failed_module(load(("loaded", "C:\\t\\dep.dll"), ("loaded", "C:\\t\\asmjit.dll"),
                                   ("unloaded", "C:\\t\\asmjit.dll"), ("unloaded", "C:\\t\\dep.dll"))) == "C:\\t\\asmjit.dll"
    assert init_failed_module(load(("loaded", "C:\\t\\fbgemm.dll"), ("unloaded", "C:\\t\\fbgemm.dll"))) == "C:\\t\\fbgemm.dll"
    assert init_failed_module(load()) is None
    assert init_failed_module(load(("loaded", "C:\\t\\a.dll"), ("unloaded", "C:\\t\\b.dll"))) is None
    assert init_failed_module(load(("unloaded", "C:\\t\\b.dll"))) is None
    # a DllMain that loads and frees another DLL before the failure: that "unloaded" is not the one
    assert init_failed_module(load(("loaded", "C:\\t\\a.dll"), ("unloaded", "C:\\t\\helper.dll"),
                                   ("loaded", "C:\\t\\b.dll"), ("unloaded", "C:\\t\\b.dll"))) == "C:\\t\\b.dll"


def test_shipped_s3_agrees_on_every_attempt():
    """fixtures/traces/s3.jsonl: casehost prepends torch\\lib to PATH before its LoadLibraryW retry; the
    trace holds that `setenv` (the first recording predated the hook and the replay disagreed on
    attempt 2, expect.toml [s3]), and the model agrees with every probe of both attempts."""
    from pathlib import Path

    from dlltrace.diagnosis.replay import replay

    tr = read_trace(Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "s3.jsonl")
    assert any(e.get("name") == "PATH" for e in tr.of("setenv"))
    rs = replay(tr)
    assert [r.load.api for r in rs if r.failed] == ["LoadLibraryExW", "LoadLibraryW"]
    assert all(r.differences == [] for r in rs), [r.disagreements for r in rs]
    assert rs[-1].agreed == len(rs[-1].real_probes) > 5


def test_mark_dllmain_failure_says_which_module_and_how():
    """FALSE (1114), a crash the loader caught (998 and "loaded"/"unloaded" of the module), ExitProcess
    (no load_end: the module of the last "loaded"), from the loader's notifications (tests/test_dllmain.py
    checks each under Wine)."""
    from dlltrace.trace.reader import Load
    from dlltrace.diagnosis.replay import dllmain_running_module, mark_dllmain_failure

    class World:
        def __init__(self):
            self.marks = []

        def mark_init_failed(self, path, how="", error=None, status=None):
            self.marks.append((path, how, error, status))

    def load(end, *notes, name="C:\\t\\top.dll"):
        ld = Load(seq=1, pid=1, tid=1, t=0, api="LoadLibraryExW", name=name, flags=0, parent=None,
                  depth=0, ctx=None, caller=None, end=end)
        ld.notifications = list(notes)
        return ld

    def marks(ld):
        w = World()
        mark_dllmain_failure(w, ld)
        return w.marks

    dep = "C:\\t\\dep.dll"
    assert marks(load({"error": 1114}, ("loaded", dep), ("unloaded", dep))) == [(dep, "", None, None)]
    assert marks(load({"error": 998, "status": 0xC0000005}, ("loaded", dep), ("unloaded", dep))) == [
        (dep, "crashed", 998, 0xC0000005)]
    assert marks(load({"error": 126})) == []  # not found: no DllMain ran
    assert marks(load({"error": 998, "status": 0xC0000005})) == []  # no notifications: not guessed
    assert marks(load({"error": 1114}, name="dep.dll")) == []  # a bare name and no notifications: not guessed
    assert marks(load({"error": 1114})) == [("C:\\t\\top.dll", "", None, None)]  # an older trace, a full path
    died = load(None, ("loaded", "C:\\t\\ok.dll"), ("loaded", dep))
    assert not died.finished and dllmain_running_module(died) == dep
    assert marks(died) == [(dep, "exited", None, None)]
    assert dllmain_running_module(load(None)) is None  # died before any DllMain: nothing to say
    assert dllmain_running_module(load(None, ("loaded", dep), ("unloaded", dep))) is None
    assert dllmain_running_module(load({"error": 0}, ("loaded", dep))) is None  # it returned


def test_concatenated_traces_are_refused_with_the_line_to_split_at(tmp_path):
    """Two traces in one file (`cat a.jsonl b.jsonl`): the second header after events is one error naming
    its line, not a merge whose restarted seqs would be read as retries of the first trace's loads. A
    second header before any event (two writers that both found the file empty) is still read."""
    p = write(tmp_path, [HEADER, *EVENTS[:3], HEADER, *EVENTS[:3]])
    with pytest.raises(DlltraceError) as e:
        read_trace(p)
    assert e.value.exit_code == EXIT_BAD_TRACE
    assert "line 5: a second trace header after events: two traces were joined" in str(e.value)
    assert "head -n 4" in str(e.value)
    tr = read_trace(write(tmp_path, [HEADER, HEADER, *EVENTS], name="race.jsonl"))
    assert tr.warnings == [] and len(tr.events) == len(EVENTS)


def test_the_same_events_twice_are_read_once_with_a_warning(tmp_path):
    """The events repeated (the body appended again): one warning naming the first copy and how many,
    and the copies dropped, so the report is the trace's own: no invented retries or disagreements."""
    from pathlib import Path

    from dlltrace.render.summary import produce

    tr = read_trace(write(tmp_path, [HEADER, *EVENTS, *EVENTS]))
    assert len(tr.events) == len(EVENTS) and len(tr.warnings) == 1
    assert f"line {len(EVENTS) + 2}: {len(EVENTS)} event(s) repeat earlier ones exactly" in tr.warnings[0]
    assert [ld.seq for ld in tr.loads(pid=7)] == [3, 5]
    # an event with the seq of another but other fields is not a copy (kept, as before)
    other = dict(EVENTS[2], t=999)
    assert len(read_trace(write(tmp_path, [HEADER, *EVENTS, other], name="o.jsonl")).events) == len(EVENTS) + 1
    s3 = (Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "s3.jsonl").read_text(encoding="utf-8")
    lines = s3.splitlines(True)
    doubled = tmp_path / "s3x2.jsonl"
    doubled.write_text("".join(lines + lines[1:]), encoding="utf-8")
    tr = read_trace(doubled)
    assert len(tr.warnings) == 1 and "the copies are ignored" in tr.warnings[0]
    twice = json.loads(produce(tr, "json"))
    orig = json.loads(produce(read_trace(Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "s3.jsonl"), "json"))
    assert [(c["op"], c["real_error"], c["verdict"]["reason"]) for c in twice["calls"]] == [
        (c["op"], c["real_error"], c["verdict"]["reason"]) for c in orig["calls"]]
    assert all(not c.get("differences") for c in twice["calls"])
