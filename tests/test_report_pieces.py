"""The pieces `dlltrace report` was given to use less memory, each against a plain reference:
- render/json.py json_chunks: the JSON document written a call at a time is json.dumps(indent=2)'s text;
- diagnosis/replay.py Replays: light records in columns read back as the fields they were given;
- trace/reader.py Events: pids in arrays widened when one does not fit, Python events found by seq;
- console.py write_output: a report written from its pieces, no file when the first one fails;
- `dlltrace report --json` (stdout, -o, --redact) gives produce()'s document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlltrace.console import write_output
from dlltrace.errors import EXIT_OUTPUT, DlltraceError
from dlltrace.model import CallResult
from dlltrace.diagnosis.analysis import judged_incidents
from dlltrace.render.json import CALLS, call_dicts, json_chunks, json_report, json_report_head
from dlltrace.trace.redact import redact, redact_trace, redactor_of
from dlltrace.render.summary import produce
from dlltrace.trace.reader import Events, Load, read_trace
from dlltrace.diagnosis.replay import Replayed, Replays

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"
# fixtures with failed loads: s2 (two failed calls), s5 (two, and a value --redact replaces), s4 (one, redacted)
FAILED = ["s2", "s4", "s5"]

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def reference(doc: dict, calls: list) -> str:
    return json.dumps({**doc, "calls": list(calls)}, indent=2, ensure_ascii=False)


# ------------------------------------------------------------------------------------------ json_chunks
SPECIAL = ["\n", "\r\n", '"', "\\", "\t", "\x00", "\x1f", "\u2028", "\u0085", "é", "€", "😀",
           "\ud800", "\udfff", "a\ud83db", "\ud83d\ude00", ": ", ",\n  ", "[]", "{}", "  "]
texts = st.lists(st.one_of(st.characters(), st.sampled_from(SPECIAL)), max_size=8).map("".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=False, allow_infinity=False), texts)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(texts, inner, max_size=4)), max_leaves=20)
calls_st = st.lists(st.dictionaries(texts, values, max_size=4), max_size=4)


@st.composite
def docs(draw: Any) -> dict:
    """A document of string keys with CALLS among them, at any place (perhaps the only key)."""
    keys = draw(st.lists(texts.filter(lambda k: k != CALLS), unique=True, max_size=5))
    at = draw(st.integers(min_value=0, max_value=len(keys)))
    keys.insert(at, CALLS)
    return {k: (draw(st.sampled_from([None, [], {}, "x"])) if k == CALLS else draw(values)) for k in keys}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs(), calls_st)
def test_json_chunks_joined_are_json_dumps_of_the_whole_document(doc, calls):
    pieces = list(json_chunks(doc, iter(calls)))  # (an iterator: read once)
    assert all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == reference(doc, calls)


@pytest.mark.parametrize("doc", [
    {CALLS: None},
    {CALLS: None, "after": []},
    {"before": {}, CALLS: None},
    {"a": "line\nbreak \"quoted\" \ud800", CALLS: None, "z": [[], {}, [{}]]},
    {"nested": {"x": [1, {"y": "a\nb"}]}, CALLS: None},
])
@pytest.mark.parametrize("calls", [[], [{}], [{"a": []}], [{"a": 1, "b": {"c": "\n"}}, {"d": "\udfff"}, {}]])
def test_json_chunks_on_chosen_documents(doc, calls):
    assert "".join(json_chunks(doc, iter(calls))) == reference(doc, calls)


def test_json_chunks_takes_the_calls_one_at_a_time():
    """The calls are not all read before the first of them is written (never held whole)."""
    taken: list[int] = []

    def calls() -> Iterator[dict]:
        for i in range(3):
            taken.append(i)
            yield {"index": i}
        raise AssertionError("not to be read further")

    doc = {"format": "x", CALLS: None, "tail": 1}
    it = json_chunks(doc, calls())
    out = ""
    for piece in it:
        out += piece
        if '"index": 0' in out:
            break
    assert taken == [0], "the first call written before the next is made"
    with pytest.raises(AssertionError, match="not to be read further"):
        list(it)


def test_json_chunks_with_a_non_string_top_level_key():
    """A key that is not a string is written as json.dumps writes it: as a string (1 -> "1", None -> "null")."""
    doc = {1: "one", None: "none", 2.5: "f", True: "t", CALLS: None}
    assert "".join(json_chunks(doc, iter([]))) == reference(doc, [])


@pytest.mark.parametrize("name", FAILED)
def test_json_report_is_its_head_and_calls_written_in_pieces(name):
    trace = read_trace(TRACES / f"{name}.jsonl")
    replays, incs = judged_incidents(trace)
    whole = json_report(trace, incs, replays)
    assert whole["failed"], "a fixture with failed loads"
    assert len(whole[CALLS]) >= 1
    expected = json.dumps(whole, indent=2, ensure_ascii=False)
    assert "".join(json_chunks(json_report_head(trace, incs), call_dicts(incs))) == expected
    # the head's keys in the whole document's order, its calls left out (None)
    head = json_report_head(trace, incs)
    assert list(head) == list(whole) and head[CALLS] is None
    assert {k: v for k, v in head.items() if k != CALLS} == {k: v for k, v in whole.items() if k != CALLS}


# ------------------------------------------------------------------------------------------ Replays
def made(seq: int = 10, pid: int = 100, api: str = "LoadLibraryExW", name: Optional[str] = "a.dll",
         flags: Optional[int] = 0, ctx: Optional[int] = None, path: Any = "C:\\x\\a.dll",
         result: str = "0x7ff000000000", index: int = 0, op: str = "LoadLibraryExW",
         origin: str = "import a") -> Replayed:
    """A Replayed of a load that succeeded, its result what a light record keeps (its name and flags those
    of the load, its origin the Replayed's)."""
    load = Load(seq=seq, pid=pid, tid=7, t=1, api=api, name=name, flags=flags, parent=None, depth=0, ctx=ctx,
                caller=None, end={"result": result, "error": 0, "path": path})
    res = CallResult(index=index, op=op, name=name or "", flags=flags or 0, origin=origin)  # type: ignore[arg-type]
    return Replayed(load=load, result=res, origin=origin)


def fields(r: Replayed) -> tuple:
    ld, res = r.load, r.result
    return (ld.seq, ld.pid, ld.api, ld.name, ld.flags, ld.ctx, ld.path, ld.result, ld.error,
            res.index, res.op, res.origin, res.name, res.flags, r.origin)


def exact(a: tuple, b: tuple) -> bool:
    """Equal, and of the same types (None is not 0, True is not 1)."""
    return a == b and [type(x) for x in a] == [type(x) for x in b]


# (the Replayed, whether it is kept light)
CASES = [
    (made(), True),
    (made(flags=None), True),
    (made(ctx=None), True),
    (made(ctx=5), True),
    (made(path=None), True),
    (made(name="b.dll", path="b.dll"), True),                 # path equal to name
    (made(name="B.DLL", path="C:\\Windows\\System32\\b.dll"), True),
    (made(name=None, path=None, flags=None), True),
    (made(name="", path=""), True),
    (made(name="\ud800.dll", path="C:\\\ud800.dll", origin="ctypes.CDLL('\ud800')"), True),
    (made(seq=I64_MAX, pid=I64_MAX, flags=I64_MAX, ctx=I64_MAX, index=I64_MAX), True),
    (made(seq=I64_MIN + 1, pid=I64_MIN + 1, flags=I64_MIN + 1, ctx=I64_MIN + 1, index=I64_MIN + 1), True),
    (made(flags=0xFFFFFFFF, ctx=0), True),
    (made(seq=I64_MAX + 1), False),
    (made(pid=1 << 64), False),
    (made(flags=I64_MIN), False),     # the column's None: kept in full, not read back as None
    (made(ctx=I64_MIN), False),
    (made(ctx=-(1 << 70)), False),
    (made(index=1 << 63), False),
    (made(flags=I64_MIN, ctx=None), False),
]


def filled(cases: list) -> Replays:
    rs = Replays()
    for r, _ in cases:
        rs.add_light(r)
    return rs


def test_replays_read_back_every_field_as_given():
    rs = filled(CASES)
    assert len(rs) == len(CASES)
    for i, (r, light) in enumerate(CASES):
        assert rs.is_light(i) is light, (i, fields(r))
        back = rs[i]
        assert exact(fields(back), fields(r)), (i, fields(back), fields(r))
        assert back.load.ok and back.result.error == 0
        if not light:
            assert back is r
    assert [fields(x) for x in rs] == [fields(r) for r, _ in CASES]
    assert rs.pids() == [r.load.pid for r, _ in CASES]
    assert [type(p) for p in rs.pids()] == [int] * len(CASES)


def test_replays_path_equal_to_name_is_not_shared_with_another_record():
    """A path the same as its name is kept as the name's own string: each record reads back its own."""
    rs = filled([(made(name=n, path=n), True) for n in ("a.dll", "b.dll", "a.dll")] +
                [(made(name="c.dll", path="a.dll"), True)])
    assert [(r.load.name, r.load.path) for r in rs] == \
        [("a.dll", "a.dll"), ("b.dll", "b.dll"), ("a.dll", "a.dll"), ("c.dll", "a.dll")]


def failed_load(seq: int, pid: int = 100) -> Replayed:
    load = Load(seq=seq, pid=pid, tid=1, t=0, api="LoadLibraryW", name="gone.dll", flags=None, parent=None,
                depth=0, ctx=None, caller=None, end={"result": None, "error": 126, "path": None})
    return Replayed(load=load, result=CallResult(index=seq, op="LoadLibraryW", name="gone.dll", error=126),
                    real_probes=["C:\\gone.dll"])


def test_replays_full_ones_and_extend_keep_order_and_status():
    a = Replays()
    f1, f2, f3 = failed_load(1), failed_load(2, pid=200), failed_load(3, pid=1 << 64)
    a.append(f1)
    a.add_light(made(seq=2, pid=100, name="x.dll", path="x.dll"))
    a.add_light(made(seq=3, pid=1 << 64))  # in full: its pid does not fit
    a.append(f2)
    a.add_light(made(seq=5, pid=200, flags=None, ctx=9))
    b = Replays()
    b.add_light(made(seq=6, pid=300, name="y.dll", path=None))
    b.append(f3)
    b.add_light(made(seq=8, pid=300, index=I64_MAX))

    model = [fields(x) for x in a] + [fields(x) for x in b]
    status = [a.is_light(i) for i in range(len(a))] + [b.is_light(i) for i in range(len(b))]
    assert status == [False, True, False, False, True, True, False, True]

    a.extend(b)
    assert len(a) == 8
    assert [fields(x) for x in a] == model
    assert [a.is_light(i) for i in range(8)] == status
    assert a[0] is f1 and a[3] is f2 and a[6] is f3
    assert [r.load.seq for r in a.full()] == [1, 3, 2, 3]
    full = list(a.full())
    assert [fields(r) for r in full] == [model[i] for i in range(8) if not status[i]]
    assert full[0] is f1 and full[2] is f2 and full[3] is f3
    assert a.pids() == [100, 100, 1 << 64, 200, 200, 300, 1 << 64, 300]
    # b is left as it was
    assert len(b) == 3 and [fields(x) for x in b] == model[5:]

    # extend from a plain list: each in full, in order
    c = Replays()
    c.add_light(made(seq=1))
    c.extend([f1, made(seq=9)])
    assert [c.is_light(i) for i in range(3)] == [True, False, False]
    assert [r.load.seq for r in c] == [1, 1, 9]


def test_replays_index_like_a_list():
    rs = filled(CASES)
    model = [fields(r) for r, _ in CASES]
    n = len(model)
    for i in range(-n, n):
        assert fields(rs[i]) == model[i]
    for i in (n, -n - 1, 10 ** 6):
        with pytest.raises(IndexError):
            rs[i]
    for sl in (slice(None), slice(2, 9), slice(-3, None), slice(None, None, -1), slice(1, -1, 3),
               slice(100, 200), slice(5, 2)):
        assert [fields(r) for r in rs[sl]] == model[sl]
    assert Replays()[:] == [] and len(Replays()) == 0 and Replays().pids() == []


# ------------------------------------------------------------------------------------------ Events
def line_of(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def events_of(objs: list[dict]) -> Events:
    ev = Events()
    for o in objs:
        ev.add(o, line_of(o))
    return ev


PIDS = [0, 7, (1 << 32) - 1, (1 << 32) + 5, -1, I64_MAX, I64_MIN, 1 << 70, -(1 << 70), 3]


@pytest.mark.parametrize("order", ["rising", "wide first", "widest first"])
def test_events_pids_that_need_widening_read_back_exactly(order):
    pids = {"rising": PIDS, "wide first": [(1 << 32) + 5] + PIDS, "widest first": [1 << 70] + PIDS}[order]
    kinds = ["load_begin", "process", "probe", "py_import"]
    objs = [{"ev": kinds[i % len(kinds)], "pid": p, "seq": i, "pad": "x" * (i % 5)} for i, p in enumerate(pids)]
    # and each pid again, after the widest, in other kinds
    objs += [{"ev": "load_end" if i % 2 else "env", "pid": p, "seq": 100 + i} for i, p in enumerate(pids)]
    ev = events_of(objs)
    assert len(ev) == len(objs)
    assert [ev.pid(i) for i in range(len(objs))] == [o["pid"] for o in objs]
    assert all(type(ev.pid(i)) is int for i in range(len(objs)))
    assert list(ev) == objs
    assert [ev.kind(i) for i in range(len(objs))] == [o["ev"] for o in objs]
    for p in set(pids) | {2, 1 << 71}:
        for kind in kinds + ["load_end", "env", "nothing"]:
            want = [o for o in objs if o["ev"] == kind and o["pid"] == p]
            assert list(ev.of(kind, pid=p)) == want
            assert ev.count_of([kind], pid=p) == len(want)
        both = ["probe", "env", "py_import"]
        assert list(ev.select(both, pid=p)) == [o for o in objs if o["ev"] in both and o["pid"] == p]
        assert ev.count_of(both, pid=p) == sum(1 for o in objs if o["ev"] in both and o["pid"] == p)
    assert list(ev.select(["probe", "load_end", "nope"])) == [o for o in objs if o["ev"] in ("probe", "load_end")]
    assert ev.count_of(["probe", "probe", "load_end"]) == sum(1 for o in objs if o["ev"] in ("probe", "load_end"))


def test_events_pid_of_a_32_bit_trace_stays_exact_across_blocks():
    """Many bulky events (several compressed blocks), pids of 32 bits, then one of 64, then one beyond."""
    objs = [{"ev": "probe", "pid": (i * 2654435761) % (1 << 32), "seq": i, "path": "C:\\" + "p" * 200}
            for i in range(1200)]
    objs.append({"ev": "probe", "pid": -5, "seq": 1200})
    objs.append({"ev": "probe", "pid": 1 << 64, "seq": 1201})
    ev = events_of(objs)
    assert ev.stored_bytes() < ev.nbytes()  # (compressed blocks there are)
    assert [ev.pid(i) for i in range(len(objs))] == [o["pid"] for o in objs]
    assert ev[-1] == objs[-1] and ev[0] == objs[0] and ev[600] == objs[600]
    assert list(ev.of("probe", pid=objs[600]["pid"])) == [o for o in objs if o["pid"] == objs[600]["pid"]]


def test_py_event_by_seq_out_of_order_duplicated_wide_and_interleaved():
    p, q = 4242, 1 << 40
    spec = [  # (pid, seq, kind): the first py_* event of a (pid, seq) wins
        (p, 5, "py_import"), (q, 5, "py_import"), (p, 9, "py_call"), (p, 3, "py_import"),   # 3: out of order
        (p, 9, "py_import"),                      # a repeat of the last
        (p, 5, "py_env"),                         # a repeat of an earlier one (a kept kind)
        (q, 1, "py_import"), (p, 3, "py_call"),   # a repeat of one out of order
        (p, 1 << 64, "py_import"), (p, 1 << 64, "py_call"),  # beyond 64 bits, twice
        (p, I64_MAX, "py_import"), (p, I64_MIN, "py_import"), (p, -1, "py_import"),
        (q, 1 << 70, "py_call"), (q, 2, "py_import"), (q, 2, "py_call"), (q, 100, "py_import"),
        (p, 10, "py_import"), (p, 7, "py_import"), (p, 10, "py_call"), (p, 8, "load_begin"),  # not a py_ event
        (p, None, "py_import"), (p, None, "py_call"), (p, "s", "py_import"),
        (q, 50, "py_import"), (q, 100, "py_call"), (q, 0, "py_import"),
    ]
    objs = [{"ev": k, "pid": pid, "seq": s, "n": n} for n, (pid, s, k) in enumerate(spec)]
    objs.insert(3, {"ev": "py_import", "pid": p})  # no seq at all: the same as seq None
    ev = events_of(objs)
    asked = {(pid, s) for pid, s, _ in spec} | {(p, 4), (p, 8), (q, 3), (p, 1 << 65), (q, 9), (p, 1 << 70),
                                               (7, 5), (q, None), (p, I64_MAX - 1)}
    for pid, s in asked:
        at = next((i for i, o in enumerate(objs) if o["ev"].startswith("py_") and o["pid"] == pid
                   and o.get("seq") == s and type(o.get("seq")) is type(s)), None)
        got = ev.py_event(pid, s)
        assert got == (None if at is None else objs[at]), (pid, s, got, at)
    assert ev.py_event(p, 5)["n"] == 0 and ev.py_event(p, 3)["n"] == 3 and ev.py_event(p, 9)["n"] == 2
    assert ev.py_event(p, 1 << 64)["n"] == 8 and ev.py_event(q, 2)["n"] == 14
    assert ev.py_event(p, 8) is None  # a load_begin's seq is not a Python event's


def test_kind_and_count_of():
    objs = [{"ev": k, "pid": pid, "seq": i} for i, (k, pid) in enumerate(
        [("process", 1), ("load_begin", 1), ("probe", 2), ("load_begin", 2), ("exit", 1), ("probe", 1),
         ("probe", 1), ("weird_kind", 3), ("load_begin", 1 << 40)])]
    ev = events_of(objs)
    assert [ev.kind(i) for i in range(len(objs))] == [o["ev"] for o in objs]
    assert ev.kind(-1) == "load_begin"
    kinds = {o["ev"] for o in objs} | {"none"}
    for pid in (None, 1, 2, 3, 1 << 40, 9):
        for ks in ([k] for k in kinds):
            assert ev.count_of(ks, pid) == sum(1 for o in objs if o["ev"] in ks and (pid is None or o["pid"] == pid))
        ks = ["probe", "load_begin", "probe"]
        assert ev.count_of(ks, pid) == sum(1 for o in objs if o["ev"] in ks and (pid is None or o["pid"] == pid))


# ------------------------------------------------------------------------------------------ write_output
def test_write_output_writes_every_piece_in_utf8(tmp_path):
    pieces = ["{\n", '  "a": "é€😀",\n', "", "  \"b\": \"\ud800\"\n", "}", "\n"]
    out = tmp_path / "r.json"
    write_output(str(out), iter(pieces))
    want = "".join(pieces).replace("\ud800", "\\ud800").encode("utf-8")
    assert out.read_bytes() == want
    write_output(str(out), (p for p in ["x\n", "y"]))  # (written over)
    assert out.read_bytes() == b"x\ny"
    write_output(str(out), "one string\n")
    assert out.read_bytes() == b"one string\n"
    write_output(str(out), iter([]))
    assert out.read_bytes() == b""


def test_write_output_makes_no_file_when_the_first_piece_fails(tmp_path):
    out = tmp_path / "r.json"

    def pieces() -> Iterator[str]:
        raise RuntimeError("the report could not be made")
        yield "never"

    with pytest.raises(RuntimeError, match="could not be made"):
        write_output(str(out), pieces())
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_output_into_a_folder_that_does_not_exist(tmp_path):
    out = tmp_path / "no" / "such" / "r.json"
    with pytest.raises(DlltraceError) as e:
        write_output(str(out), iter(["a", "b"]))
    assert e.value.exit_code == EXIT_OUTPUT
    assert str(out) in str(e.value)
    assert not (tmp_path / "no").exists()


# ------------------------------------------------------------------------------------------ end to end
def run_report(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    return subprocess.run([sys.executable, "-m", "dlltrace", "report", *args], capture_output=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("name", FAILED)
@pytest.mark.parametrize("redacted", [False, True], ids=["plain", "redact"])
def test_report_json_prints_and_writes_produces_document(tmp_path, name, redacted):
    src = TRACES / f"{name}.jsonl"
    trace = read_trace(src)
    if redacted:
        red = redactor_of(trace)
        want_text = redact(produce(redact_trace(trace, red), "json"), red)
    else:
        want_text = produce(trace, "json")
    want = json.loads(want_text)
    assert want["failed"], "a fixture with failed loads"
    flags = ["--redact"] if redacted else []

    shown = run_report("--json", *flags, str(src))
    assert shown.returncode == 0, shown.stderr.decode()
    assert json.loads(shown.stdout.decode("utf-8")) == want
    assert shown.stdout.endswith(b"}\n")

    out = tmp_path / "report.json"
    written = run_report("--json", *flags, "-o", str(out), str(src))
    assert written.returncode == 0, written.stderr.decode()
    assert written.stdout == b""
    assert out.read_bytes() == (want_text + "\n").encode("utf-8")


def test_report_redact_changes_what_a_fixture_shows():
    """(So the --redact case above compares a redacted report, not the plain one again.)"""
    trace = read_trace(TRACES / "s5.jsonl")
    red = redactor_of(trace)
    assert redact(produce(redact_trace(trace, red), "json"), red) != produce(trace, "json")


def test_write_output_writes_through_a_symlink_and_keeps_the_files_mode(tmp_path):
    """-o names the file as the user has it: a symlink is written through (the link stays a link), an
    existing file keeps its mode (written in place, not replaced by a new file: reviewer's case)."""
    target = tmp_path / "target.txt"
    target.write_text("old\n", encoding="utf-8")
    os.chmod(target, 0o600)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output(str(link), iter(["new", "\n"]))
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new\n"
    assert (target.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "target.txt"]
