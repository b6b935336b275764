"""The recorded world of a big trace (worlds/recorded.py): facts built when asked and only the last
FACTS_KEPT kept, a process's indexes made once and shared (fresh()), the name and folder lookups
over keys. Each answer is checked against a plain model made from the same events."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dlltrace import winpath
from dlltrace.model import FileFacts, Import, Owner, PEFacts
from dlltrace.trace.reader import read_trace
from dlltrace.diagnosis.replay import recorded_world
from dlltrace.worlds.recorded import RecordedWorld, facts_of_event, file_event
from dlltrace.worlds.world import SystemInfo

FOLDERS = ["C:\\app", "C:\\app\\lib", "c:\\APP\\Lib\\sub", "C:\\", "\\\\srv\\share", "\\\\srv\\share\\x", "D:\\other"]


def events(n: int, seed: int) -> list[dict]:
    """n `file` events of PE files (each its own imports and version) over FOLDERS, some names shared by
    several folders, some paths recorded twice in another case, and missing/dir/not_pe ones."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        folder = rnd.choice(FOLDERS)
        name = f"lib{rnd.randrange(n // 3 + 1)}.dll" if rnd.random() < 0.5 else f"m{i}.pyd"
        pe = PEFacts(machine="x64", imports=(Import(f"dep{i}.dll", (f"f{i}",)),), exports=frozenset({f"g{i}"}),
                     file_version=f"1.0.{i}.0")
        kind = rnd.random()
        path = winpath.join(folder, name)
        if kind < 0.05:
            out.append(file_event(path, None))
        elif kind < 0.1:
            out.append(file_event(path, FileFacts(path=path, error="not_pe")))
        else:
            out.append(file_event(path, FileFacts(path=path, pe=pe)))
        if rnd.random() < 0.05:  # the same file again, in another case
            out.append(file_event(path.upper(), FileFacts(path=path.upper(), pe=pe)))
    out += [{"ev": "file", "path": f, "kind": "dir"} for f in FOLDERS]
    return out


def model(evs: list[dict]) -> dict[str, tuple[str, dict]]:
    """key -> (the path first recorded, the last event recorded for it): what the world answers from."""
    first: dict[str, str] = {}
    last: dict[str, dict] = {}
    missing: set[str] = set()
    for e in evs:
        k = winpath.key(e["path"])
        if e["kind"] in ("dir", "nodir"):
            continue
        if e["kind"] == "missing":
            missing.add(k)
            continue
        first.setdefault(k, winpath.normalize(e["path"]))
        last[k] = e
    return {k: (first[k], last[k]) for k in last}


@pytest.fixture(params=[4, 1024])
def kept(request, monkeypatch):
    monkeypatch.setattr(RecordedWorld, "FACTS_KEPT", request.param)
    return request.param


def test_facts_built_on_demand_are_the_events_facts_whatever_was_let_go(kept):
    evs = events(600, 1)
    m = model(evs)
    world = RecordedWorld(SystemInfo(), evs)
    rnd = random.Random(2)
    keys = list(m)
    for _ in range(3000):  # (asked in any order, again and again: built again once let go)
        k = rnd.choice(keys)
        _, e = m[k]
        got = world.file(k.upper() if rnd.random() < 0.5 else k)
        assert got == facts_of_event(e), k
    assert len(world._built) <= kept
    assert world.file("C:\\nowhere\\x.dll") is None


def test_a_dllmain_failure_outlives_the_facts_being_let_go(kept):
    evs = events(200, 3)
    m = model(evs)
    world = RecordedWorld(SystemInfo(), evs)
    pe_keys = [k for k, (_, e) in m.items() if e["kind"] == "pe"]
    target = pe_keys[0]
    world.mark_init_failed(target, how="crashed", error=998, status=0xC0000005)
    for k in pe_keys[1:]:
        world.file(k)
    f = world.file(target)
    assert f is not None and f.dllmain_fails and (f.dllmain_how, f.dllmain_error, f.dllmain_status) == ("crashed", 998, 0xC0000005)
    assert not world.file(pe_keys[1]).dllmain_fails


def test_fresh_worlds_share_the_indexes_not_the_dllmain_failures():
    evs = events(100, 4)
    world = RecordedWorld(SystemInfo(), evs)
    k = next(k for k, (_, e) in model(evs).items() if e["kind"] == "pe")
    a, b = world.fresh(), world.fresh()
    a.mark_init_failed(k)
    assert a.file(k).dllmain_fails and not b.file(k).dllmain_fails and not world.file(k).dllmain_fails
    assert a.files_named("m1.pyd") == b.files_named("m1.pyd") == world.files_named("m1.pyd")
    assert a.close_files("lib1.dll") == world.close_files("lib1.dll")


def test_lookups_over_keys_answer_as_the_plain_model(kept):
    evs = events(500, 5)
    m = model(evs)
    world = RecordedWorld(SystemInfo(), evs)
    names = sorted({winpath.basename(k) for k in m})
    for name in names:
        want = [p for k, (p, _) in m.items() if winpath.basename(k) == name]
        assert world.files_named(name) == want
        assert world.files_named(name.upper()) == want
        close = sorted((p for k, (p, _) in m.items() if winpath.close_name(winpath.basename(k), name)), key=str.lower)
        assert world.close_files(name) == close
    for folder in [*FOLDERS, "C:\\APP\\", "c:/app/lib", "C:\\none", "\\\\srv"]:
        want = sorted((p for k, (p, _) in m.items() if winpath.key(winpath.dirname(p)) == winpath.key(folder)),
                      key=str.lower)
        assert world.files_in(folder) == want, folder


def test_records_says_what_the_trace_knows_of_a_file():
    evs = [file_event("C:\\a\\x.dll", FileFacts(path="C:\\a\\x.dll", pe=PEFacts(machine="x64"))),
           file_event("C:\\a\\gone.dll", None)]
    probes = [("C:\\a\\probed.dll", 0), ("C:\\a\\absent.dll", 0xC0000034), ("C:\\a\\denied.dll", 0xC0000022)]
    world = RecordedWorld(SystemInfo(), evs, probes)
    assert [world.records(p) for p in ("c:\\A\\X.DLL", "C:\\a\\gone.dll", "C:\\a\\probed.dll", "C:\\a\\absent.dll")] == [True] * 4
    assert not world.records("C:\\a\\denied.dll") and not world.records("C:\\a\\never.dll")
    assert world.file("C:\\a\\probed.dll") == FileFacts(path="C:\\a\\probed.dll")
    assert world.file("C:\\a\\absent.dll") is None and world.file("C:\\a\\gone.dll") is None
    assert world.files_named("probed.dll") == ["C:\\a\\probed.dll"]
    assert world.files_in("C:\\A") == ["C:\\a\\probed.dll", "C:\\a\\x.dll"]


def test_files_in_lists_a_file_an_owners_record_added_after_it_was_first_asked():
    """files_in answers from an index of the files by folder made at its first call; a file the owners' records add
    later (add_listed) is in the next answer."""
    world = RecordedWorld(SystemInfo(), [file_event("C:\\site\\pkg\\x.dll", FileFacts(path="C:\\site\\pkg\\x.dll",
                                                                                    pe=PEFacts(machine="x64")))])
    assert world.files_in("C:\\site\\pkg") == ["C:\\site\\pkg\\x.dll"]
    world.owners = {"y.dll": (Owner("pkg", "1.0", "pkg/y.dll", "C:\\site"),)}
    world.add_listed("x64")
    assert world.files_in("C:\\site\\pkg") == ["C:\\site\\pkg\\x.dll", "C:\\site\\pkg\\y.dll"]


def test_a_read_traces_world_answers_as_the_world_of_its_parsed_events(tmp_path: Path, monkeypatch):
    """A read trace's world holds its file events by position in the compressed events; each answer is
    the one a world of the same events as dicts gives, and the trace's process is indexed once."""
    monkeypatch.setattr(RecordedWorld, "FACTS_KEPT", 16)
    evs = events(400, 6)
    head = {"format": "dlltrace-trace", "version": 1}
    proc = {"ev": "process", "pid": 7, "seq": 1, "tid": 1, "t": 0, "exe": "C:\\app\\python.exe"}
    lines = [json.dumps(head), json.dumps(proc)] + [json.dumps({**e, "pid": 7, "seq": i + 2}) for i, e in enumerate(evs)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trace = read_trace(path)
    w = recorded_world(trace, 7)
    plain = RecordedWorld(w.system, [dict(e, pid=7) for e in evs])
    assert all(isinstance(v, int) for v in w._events.values())  # (positions, not event objects)
    for k in model(evs):
        assert w.file(k) == plain.file(k)
        assert w.files_named(winpath.basename(k)) == plain.files_named(winpath.basename(k))
    for folder in FOLDERS:
        assert w.files_in(folder) == plain.files_in(folder)
    again = recorded_world(trace, 7)
    assert again is not w and again._events is w._events  # (indexed once, each caller its own world)


def test_processes_share_the_file_index_and_keep_their_own_probes(tmp_path: Path):
    """Every process of a trace has the same file events: indexed once a trace; each process's world
    adds its own probes and AddDllDirectory folders; only the world last asked for is kept (a trace of
    ten processes does not keep ten: reviewer's case, 10 processes held 45 MB)."""
    head = {"format": "dlltrace-trace", "version": 1}
    lines = [head]
    seq = 0

    def ev(pid, **f):
        nonlocal seq
        seq += 1
        lines.append({"pid": pid, "seq": seq, "tid": 1, "t": seq, **f})

    for pid in (7, 8):
        ev(pid, ev="process", exe=f"C:\\app{pid}\\python.exe")
        ev(pid, ev="load_begin", api="LoadLibraryW", name=f"C:\\p{pid}\\only{pid}.dll", flags=0, parent=None, depth=0, ctx=None)
        ev(pid, ev="probe", load=seq, op="open", path=f"\\??\\C:\\p{pid}\\only{pid}.dll", status=0)
        ev(pid, ev="load_end", load=seq - 1, result="0x1000", error=0, path=f"C:\\p{pid}\\only{pid}.dll")
        ev(pid, ev="adddir", api="AddDllDirectory", path=f"C:\\added{pid}", cookie="0x1", ok=True, error=0)
    for i, e in enumerate(events(50, 7)):
        ev(7 + i % 2, **e)  # (each process's run appends its own file facts)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    trace = read_trace(path)
    w7, w8 = recorded_world(trace, 7), recorded_world(trace, 8)
    assert w7._events is w8._events and w7._by_name is w8._by_name
    assert w7.records("C:\\p7\\only7.dll") and not w8.records("C:\\p7\\only7.dll")
    assert w8.files_named("only8.dll") == ["C:\\p8\\only8.dll"] and w7.files_named("only8.dll") == []
    assert w7.files_in("C:\\p7") == ["C:\\p7\\only7.dll"] and w8.files_in("C:\\p7") == []
    assert w7.is_dir("C:\\added7") and not w7.is_dir("C:\\added8") and w8.is_dir("C:\\added8")
    kept = [k for k in trace.__dict__["_recorded_worlds"] if k[0] == "process"]
    assert [k[1] for k in kept] == [8]
    plain = RecordedWorld(w7.system, [e for e in trace.file_events()],
                          [("C:\\p7\\only7.dll", 0)], ["C:\\added7"])
    again = recorded_world(trace, 7)
    for k in model(events(50, 7)):
        assert again.file(k) == plain.file(k) and again.files_named(winpath.basename(k)) == plain.files_named(winpath.basename(k))
