"""Big and compressed traces (issue 10 item 7, issue 14 item 2), no Wine needed.

- `read_trace` reads a gzip trace as it reads a plain one (told by the first two bytes, not the name;
  one member or several); one cut short or damaged is read up to its last whole event, with a warning,
  and `dlltrace report` on it exits 3 as for any damaged trace (README, "Exit codes").
- A read trace keeps its events compactly (Events), and the report's replay keeps a load that succeeded
  as a few fields (Replays), with the same report, verdicts and incidents as a full replay; the state
  events other threads write while a load is in flight still wait for it (one streaming pass).
- `dlltrace report` shows a progress bar on stderr when it takes over a second on a terminal, never on
  a pipe or a file.

The memory itself is measured in bench/report_memory.py, the speed in bench/report_speed.py.
"""

from __future__ import annotations

import gzip
import json
import os
import select
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from dlltrace.errors import EXIT_BAD_TRACE, DlltraceError
from dlltrace.diagnosis.analysis import analyse, incidents
from dlltrace.render.json import json_report
from dlltrace.render.markdown import markdown_report
from dlltrace.render.text import text_report
from dlltrace.render.summary import produce
from dlltrace.diagnosis.verdict import judge
from dlltrace.trace.reader import Events, Trace, read_trace
from dlltrace.diagnosis.replay import Replays, replay

ROOT = Path(__file__).resolve().parent.parent
S1 = ROOT / "fixtures" / "traces" / "s1.jsonl"
BENCH = ROOT / "bench" / "report_memory.py"


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    e["PYTHONPATH"] = str(ROOT / "tracer")
    return e


def report_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlltrace", "report", *argv], capture_output=True, text=True,
                          env=env(), stdin=subprocess.DEVNULL, timeout=300)


def events_of(trace) -> list[dict]:
    return [dict(e) for e in trace.events]


def generated(tmp_path_factory, name: str, n_events: int) -> Path:
    """A trace of about n_events made by bench/report_speed.py's generator."""
    p = tmp_path_factory.mktemp(name) / f"{name}.jsonl"
    subprocess.run([sys.executable, str(BENCH), "--write", str(p), "--events", str(n_events)], check=True, env=env(),
                   timeout=300)
    return p


@pytest.fixture(scope="module")
def bench_trace(tmp_path_factory) -> Path:
    """About 150,000 events (29 MB): seconds to report (a bar after one)."""
    return generated(tmp_path_factory, "big", 150000)


@pytest.fixture(scope="module")
def mid_trace(tmp_path_factory) -> Path:
    """A trace of about 3,000 events (100 failed loads of 300)."""
    return generated(tmp_path_factory, "mid", 3000)


# --- gzip --------------------------------------------------------------------------------------------
def test_a_gzip_trace_reads_as_the_plain_one_whatever_its_name(tmp_path):
    plain = read_trace(S1)
    data = gzip.compress(S1.read_bytes())
    for name in ("s1.jsonl.gz", "s1.jsonl", "s1.txt"):  # (the magic decides, not the name)
        (tmp_path / name).write_bytes(data)
        packed = read_trace(tmp_path / name)
        assert packed.warnings == [] and events_of(packed) == events_of(plain) and packed.header == plain.header
    (tmp_path / "plain.gz").write_bytes(S1.read_bytes())  # plain bytes named .gz: read as plain
    assert events_of(read_trace(tmp_path / "plain.gz")) == events_of(plain)
    assert produce(read_trace(tmp_path / "s1.txt"), "json").replace(str(tmp_path / "s1.txt"), "T") == \
        produce(plain, "json").replace(str(S1), "T")


def test_several_gzip_members_and_zero_padding_read_as_one_trace(tmp_path, mid_trace):
    raw = mid_trace.read_bytes()
    lines = raw.splitlines(keepends=True)
    third = len(lines) // 3
    # members cut at line boundaries and one mid-line (a member may end anywhere), zeros between and after
    cut = len(b"".join(lines[:2 * third])) + 17
    parts = [b"".join(lines[:third]), raw[len(b"".join(lines[:third])):cut], raw[cut:]]
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(parts[0]) + gzip.compress(parts[1]) + b"\0" * 8 + gzip.compress(parts[2])
                       + b"\0" * 100)
    a, b = read_trace(mid_trace), read_trace(packed)
    assert b.warnings == [] and len(b.events) == len(a.events) > 2500 and events_of(b) == events_of(a)


def decodable_events(data: bytes) -> list[dict]:
    """The events a gzip stream cut at its end holds whole: every line zlib can give back in full."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data)
    except zlib.error:
        out = b""
    lines = out.split(b"\n")
    whole = [json.loads(line) for line in lines[1:-1] if line.strip()]
    try:  # the last line, cut just before its newline, may still be a whole event
        last = json.loads(lines[-1]) if len(lines) > 1 and lines[-1].strip() else None
    except ValueError:
        last = None
    return whole + ([last] if isinstance(last, dict) else [])


def test_a_gzip_trace_cut_anywhere_is_read_up_to_its_last_whole_event(tmp_path, mid_trace):
    data = gzip.compress(mid_trace.read_bytes())
    full = events_of(read_trace(mid_trace))
    cut_file = tmp_path / "cut.jsonl.gz"
    seen_counts = []
    # (the first 200 bytes byte by byte: the gzip header and the trace's header line)
    for k in list(range(1, 200)) + list(range(200, len(data), max(1, len(data) // 150))) + [len(data) - 1]:
        cut_file.write_bytes(data[:k])
        try:
            tr = read_trace(cut_file)
        except DlltraceError as e:  # cut inside the header line: not a trace yet
            assert e.exit_code == EXIT_BAD_TRACE and ("empty file" in e.message or "not a dlltrace trace" in e.message)
            assert not decodable_events(data[:k])
            continue
        got = events_of(tr)
        assert got == decodable_events(data[:k]) and got == full[:len(got)]
        assert any("compressed trace ends before its end" in w for w in tr.warnings), (k, tr.warnings)
        seen_counts.append(len(got))
    assert seen_counts == sorted(seen_counts) and seen_counts[-1] >= len(full) - 1 and len(set(seen_counts)) > 100


def test_report_of_a_cut_or_damaged_gzip_trace_says_so_and_exits_3(tmp_path, mid_trace):
    data = gzip.compress(mid_trace.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    r = report_cli(str(cut), "--json")
    assert r.returncode == EXIT_BAD_TRACE and "Traceback" not in r.stderr
    assert "compressed trace ends before its end" in r.stderr
    out = json.loads(r.stdout)
    assert out["calls"] and any("compressed trace ends before its end" in w for w in out["warnings"])
    # damaged in the middle: a byte flipped at several places; never a traceback, always exit 3
    for at in (len(data) // 4, len(data) // 2, len(data) - 6):
        bad = bytearray(data)
        bad[at] ^= 0x55
        (tmp_path / "bad.jsonl.gz").write_bytes(bytes(bad))
        try:
            tr = read_trace(tmp_path / "bad.jsonl.gz")
        except DlltraceError as e:
            assert e.exit_code == EXIT_BAD_TRACE
        else:
            assert tr.warnings, at
        r = report_cli(str(tmp_path / "bad.jsonl.gz"))
        assert r.returncode == EXIT_BAD_TRACE and "Traceback" not in r.stderr and r.stderr.startswith("dlltrace: ")


# --- compact events, light replays -----------------------------------------------------------------------
def test_a_read_trace_keeps_its_bulky_events_as_bytes_and_gives_them_back_whole(mid_trace):
    tr = read_trace(mid_trace)
    assert isinstance(tr.events, Events)
    lines = [json.loads(line) for line in mid_trace.read_bytes().splitlines()[1:]]
    assert events_of(tr) == lines and tr.events == lines and tr.events[-1] == lines[-1]
    assert tr.events.nbytes() <= mid_trace.stat().st_size  # (each bulky line once, nothing else)
    assert tr.events.stored_bytes() * 4 < tr.events.nbytes()  # (and they are kept compressed)
    assert [dict(e) for e in tr.of("load_end", pid=100)] == [e for e in lines if e["ev"] == "load_end"]
    assert [dict(e) for e in tr.file_events()] == [e for e in lines if e["ev"] == "file"]
    # the file probes gathered while reading: what a pass over the probes gives, the first time and after
    as_list = Trace(path=tr.path, header=tr.header, events=lines)
    assert tr.probe_facts(100) == as_list.probe_facts(100) == tr.probe_facts(100)
    assert len(tr.probe_facts(100)) == len({(e["path"], e["status"]) for e in lines
                                            if e["ev"] == "probe" and e["op"] == "open"}) > 500


def test_a_load_that_succeeded_is_kept_as_a_few_fields_with_the_same_report(mid_trace):
    tr = read_trace(mid_trace)
    full = analyse(tr)  # (every load in full: --all)
    light = analyse(tr, everything=False)
    assert isinstance(light, Replays) and len(light) == len(full) == 300
    assert sum(light.is_light(i) for i in range(len(light))) == 270  # (every 10th load fails)
    assert [(r.load.pid, r.load.seq, r.load.name, r.load.path, r.load.ok, r.failed, r.result.error) for r in light] == \
        [(r.load.pid, r.load.seq, r.load.name, r.load.path, r.load.ok, r.failed, r.result.error) for r in full]
    assert judge(tr, light) == judge(tr, full)
    a, b = incidents(light, False, judge(tr, light)), incidents(full, False, judge(tr, full))
    assert [[x.load.seq for x in i.attempts] for i in a] == [[x.load.seq for x in i.attempts] for i in b]
    assert len(a) == 30
    # the same report in every form from the light replays as from the full ones
    assert json_report(tr, a, light) == json_report(tr, b, full)
    assert text_report(tr, a, light) == text_report(tr, b, full) and markdown_report(tr, a, light) == markdown_report(tr, b, full)


def test_a_light_replay_parses_the_probes_of_the_loads_it_keeps_in_full_only(mid_trace, monkeypatch):
    tr = read_trace(mid_trace)
    parsed: list[int] = []  # the positions of the probe events the replay parsed
    event = tr.events.event

    def counted(i: int) -> dict:
        if tr.events.kind(i) == "probe":
            parsed.append(i)
        return event(i)

    monkeypatch.setattr(tr.events, "event", counted)
    light = analyse(tr, everything=False)
    full_failed = [r for r in light if r.failed]
    assert len(full_failed) == 30
    # each failed load's 6 probes (its own open and section, 4 opens of the missing dependency), none of a load
    # that loaded (4 each)
    assert len(parsed) == 30 * 6 == len(set(parsed))
    parsed.clear()
    full = analyse(tr)  # (--all: every load's probes, as Trace.loads() has them)
    assert len(parsed) == 270 * 4 + 30 * 6
    assert [r.load.probes for r in full] == [ld.probes for ld in tr.top_loads()]
    assert [(r.real_probes, r.agreed, r.differences) for r in full_failed] == \
        [(r.real_probes, r.agreed, r.differences) for r in full if r.failed]


def state_trace(tmp_path) -> Path:
    """Thread 1 loads x.dll with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS (it fails: not in the app folder or
    System32); while that load is in flight, thread 2 calls AddDllDirectory(C:\\extra), where x.dll is;
    then thread 1 loads x.dll again, which succeeds from there."""
    pid = 7
    sys32 = "C:\\Windows\\System32"

    def ev(kind, seq, tid=1, **f):
        return {"ev": kind, "seq": seq, "pid": pid, "tid": tid, "t": seq * 10, **f}

    pe = {"machine": "x64", "is_dll": True, "imports": [], "delay_imports": [], "exports": ["f"],
          "export_ordinals": [], "forwarders": {}, "dependent_load_flags": 0, "file_version": None}
    lines = [
        {"format": "dlltrace-trace", "version": 1, "platform": "windows"},
        ev("process", 1, exe="C:\\app\\prog.exe", hooks=[]),
        ev("env", 2, exe="C:\\app\\prog.exe", cwd="C:\\app", vars={"PATH": sys32}, system32=sys32,
           windows="C:\\Windows", machine="x64", modules=["C:\\app\\prog.exe", sys32 + "\\ntdll.dll",
                                                          sys32 + "\\kernel32.dll"]),
        ev("load_begin", 3, api="LoadLibraryExW", name="x.dll", flags=0x1000, parent=None, depth=0, ctx=None,
           caller="C:\\app\\prog.exe"),
        ev("adddir", 4, tid=2, api="AddDllDirectory", path="C:\\extra", cookie="0x1", ok=True, error=0),
        ev("probe", 5, load=3, op="open", path="\\??\\C:\\app\\x.dll", status=0xC0000034),
        ev("probe", 6, load=3, op="open", path="\\??\\" + sys32 + "\\x.dll", status=0xC0000034),
        ev("load_end", 7, load=3, result=None, error=126, status=0xC0000135, path=None),
        ev("load_begin", 8, api="LoadLibraryExW", name="x.dll", flags=0x1000, parent=None, depth=0, ctx=None,
           caller="C:\\app\\prog.exe"),
        ev("probe", 9, load=8, op="open", path="\\??\\C:\\app\\x.dll", status=0xC0000034),
        ev("probe", 10, load=8, op="open", path="\\??\\" + sys32 + "\\x.dll", status=0xC0000034),
        ev("probe", 11, load=8, op="open", path="\\??\\C:\\extra\\x.dll", status=0, handle="0x4"),
        ev("load_end", 12, load=8, result="0x10000", error=0, status=0, path="C:\\extra\\x.dll"),
        {"ev": "exit", "seq": 0, "pid": pid, "tid": 0, "t": 200, "code": 0, "by": "launcher", "ended": "exited"},
        {"ev": "file", "pid": pid, "seq": 0, "tid": 0, "t": 0, "path": "C:\\extra\\x.dll", "kind": "pe", "pe": pe},
        {"ev": "file", "pid": pid, "seq": 0, "tid": 0, "t": 0, "path": "C:\\app\\x.dll", "kind": "missing"},
        {"ev": "file", "pid": pid, "seq": 0, "tid": 0, "t": 0, "path": sys32 + "\\x.dll", "kind": "missing"},
    ]
    p = tmp_path / "state.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def test_another_threads_state_change_during_a_load_waits_for_it(tmp_path):
    tr = read_trace(state_trace(tmp_path))
    assert tr.warnings == []
    first, second = replay(tr, light=False)
    # the first load is replayed as at its load_begin: C:\extra was not a DLL directory yet
    assert first.result.error == 126 and first.real_error == 126 and not first.differences
    assert second.result.error == 0 and second.load.ok and not [d for d in second.differences if d.kind == "error"]


# --- the progress bar --------------------------------------------------------------------------------------
def run_on_pty(argv: list[str], stderr_to: Path | None = None) -> tuple[int, bytes, float]:
    """Run argv with stdout (and stderr, unless `stderr_to`) on a pseudo-terminal: (exit code, what the
    terminal got, seconds)."""
    import pty  # (POSIX only)

    master, slave = pty.openpty()
    err = open(stderr_to, "wb") if stderr_to else slave
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=slave, stderr=err, stdin=subprocess.DEVNULL, env={**env(), "TERM": "xterm"},
                         close_fds=True)
    os.close(slave)
    if stderr_to:
        err.close()
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 300)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # (the child closed the terminal)
            break
        if not chunk:
            break
        out += chunk
    code = p.wait(timeout=300)
    os.close(master)
    return code, out, time.monotonic() - t


BAR = (b"dlltrace: reading the trace", b"dlltrace: replaying the loads")


POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals (pty) are POSIX only")


@POSIX_ONLY
def test_a_progress_bar_on_a_terminal_when_the_report_takes_over_a_second(bench_trace):
    code, out, took = run_on_pty([sys.executable, "-m", "dlltrace", "report", str(bench_trace), "--json"])
    assert code == 0 and took > 1.5
    assert any(b in out for b in BAR), out[:300]
    assert b"\xe2\x94\x81" in out  # (the bar itself: rich's ━)
    body = out[out.index(b'{\r\n  "format"'):] if b'{\r\n  "format"' in out else b""
    assert body and b"dlltrace: replaying" not in body  # erased before the report is printed (transient)


@POSIX_ONLY
def test_no_progress_bar_on_a_pipe_or_a_file(bench_trace, tmp_path):
    t = time.monotonic()
    r = report_cli(str(bench_trace))
    assert r.returncode == 0 and time.monotonic() - t > 1.5  # (slow enough that a terminal would get a bar)
    assert r.stdout.startswith("dlltrace ─ 1500 failed loads") and r.stderr == ""
    # stdout on a terminal, stderr to a file: no bar either (it would go to stderr)
    code, out, took = run_on_pty([sys.executable, "-m", "dlltrace", "report", str(bench_trace)], stderr_to=tmp_path / "e")
    assert code == 0 and took > 1.5 and not any(b in out for b in BAR)
    assert (tmp_path / "e").read_bytes() == b"" and b"1500 failed loads" in out


def test_a_damaged_gzip_trace_keeps_what_came_before_the_damage(tmp_path):
    """One bad byte (the CRC at the end, or bytes in the middle): the events before the damage are read,
    not lost with the whole chunk zlib was given (the review found a small trace read as empty)."""
    import gzip as _gzip

    lines = [json.dumps({"format": "dlltrace-trace", "version": 1, "platform": "wine"})]
    lines += [json.dumps({"ev": "warning", "seq": i, "pid": 1, "tid": 1, "t": i, "message": f"m{i}" * 8})
              for i in range(1, 3000)]
    good = _gzip.compress(("\n".join(lines) + "\n").encode())
    crc = bytearray(good)
    crc[-6] ^= 0xFF  # the member's CRC-32
    (tmp_path / "crc.jsonl.gz").write_bytes(bytes(crc))
    t = read_trace(tmp_path / "crc.jsonl.gz")
    assert len(t.events) >= 2500 and any("damaged" in w for w in t.warnings), (len(t.events), t.warnings)
    assert [e["seq"] for e in t.events] == list(range(1, len(t.events) + 1))  # whole events, in order
