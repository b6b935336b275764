"""A trace holds what the replay needs (issue 14 item 1; docs/trace-format.md "What a trace keeps"):
export lists trimmed to the names and ordinals the trace asks for (worlds/recorded.py asked_exports,
trim_pe, trim_file_events, AskedOnly; diagnosis/collect.py collect_facts, trim_trace_bytes).

Rule-level tests on small `pe` objects and hand-written traces (fixtures/traces/handwritten.py's
Writer, platform "windows": the Windows profile, where a missing export is 127), then the done-when
on the real-wheel corpus under Wine (tests/test_real_corpus.py runs each situation once, with every
export kept, and reports its trimmed trace too): the same `report --json` from both.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlltrace.render.summary import produce
from dlltrace.diagnosis import collect
from dlltrace.diagnosis.collect import collect_facts, trim_trace_bytes
from dlltrace.trace.reader import read_trace
from dlltrace.worlds.recorded import (TRIMMED, Asked, AskedOnly, RecordedWorld, asked_exports, trim_file_events,
                                      trim_pe)
from dlltrace.worlds.world import SystemInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures" / "traces"))
from handwritten import ENTRY_NOT_FOUND, SYS32, Writer  # noqa: E402

FIXTURE_TRACES = sorted((ROOT / "fixtures" / "traces").glob("*.jsonl"))
APP = "C:\\app"


def pe(imports=(), delay=(), exports=(), ordinals=(), forwarders=None) -> dict:
    return {"machine": "x64", "is_dll": True,
            "imports": [{"dll": d, "names": list(n), "ordinals": list(o)} for d, n, o in imports],
            "delay_imports": [{"dll": d, "names": list(n), "ordinals": list(o)} for d, n, o in delay],
            "exports": sorted(exports), "export_ordinals": sorted(ordinals), "forwarders": dict(forwarders or {}),
            "dependent_load_flags": 0, "file_version": None, "linker_version": None}


def report_json(path: Path) -> dict:
    """`report --json --all` of a trace, without its `source` (the file's name)."""
    out = json.loads(produce(read_trace(path), "json", everything=True))
    out.pop("source")
    return out


def trimmed_copy(src: Path, dest: Path) -> Path:
    dest.write_bytes(trim_trace_bytes(src.read_bytes()))
    return dest


# --------------------------------------------------------------------------- the rules
def test_asked_exports_every_import_and_delay_import_of_every_pe():
    a = asked_exports([pe(imports=[("c10.dll", ["f", "g"], [3])], delay=[("nvcuda.dll", ["cuInit"], [])]),
                       pe(imports=[("kernel32.dll", ["LoadLibraryW"], [])], exports=["not_asked"])])
    assert a.names == {"f", "g", "cuInit", "LoadLibraryW"} and a.ordinals == {3}
    assert asked_exports([]) == Asked(frozenset(), frozenset())


def test_asked_exports_follows_kept_forwarders_to_a_fixed_point():
    """HeapAlloc (imported) -> kernelbase.HeapAlloc2 -> ntdll.#5 -> (nameless forwarder #5) -> rtl.Q;
    a forwarder nobody asks for asks nothing (Z -> w.Y)."""
    a = asked_exports([pe(imports=[("kernel32.dll", ["HeapAlloc"], [])]),
                       pe(forwarders={"HeapAlloc": "kernelbase.HeapAlloc2", "Z": "w.Y"}),
                       pe(forwarders={"HeapAlloc2": "ntdll.#5"}),
                       pe(forwarders={"#5": "rtl.Q"})])
    assert a.names == {"HeapAlloc", "HeapAlloc2", "Q"} and a.ordinals == {5}
    assert a.wants("#5") and not a.wants("#6") and a.wants("Q") and not a.wants("Y")


def test_trim_pe_keeps_only_asked_and_says_the_full_counts():
    full = pe(imports=[("ntdll.dll", ["x"], [])], exports=["a", "b", "c", "fw"], ordinals=[1, 2, 3, 4],
              forwarders={"fw": "ntdll.x", "other": "ntdll.y", "#4": "ntdll.z"})
    got = trim_pe(full, Asked(frozenset({"a", "fw", "zzz"}), frozenset({2})))
    assert got["exports"] == ["a", "fw"] and got["export_ordinals"] == [2] and got["forwarders"] == {"fw": "ntdll.x"}
    assert got[TRIMMED] == {"exports": 4, "export_ordinals": 4, "forwarders": 3}
    assert got["imports"] == full["imports"] and full["exports"] == ["a", "b", "c", "fw"]  # imports whole, input kept
    assert trim_pe(got, Asked(frozenset(), frozenset())) == got  # trimmed once: never trimmed again


def test_trim_file_events_asks_across_the_whole_trace():
    """A name one DLL imports is kept in every DLL that exports it (the import may be bound to any of
    them: another copy, an API set's host); events that are not PE facts pass as they are."""
    events = [{"ev": "file", "path": "C:\\a\\top.dll", "kind": "pe", "pe": pe(imports=[("b.dll", ["f"], [7])])},
              {"ev": "file", "path": "C:\\a\\b.dll", "kind": "pe", "pe": pe(exports=["f", "g"], ordinals=[7, 8])},
              {"ev": "file", "path": "C:\\old\\b.dll", "kind": "pe", "pe": pe(exports=["f", "h"], ordinals=[9])},
              {"ev": "file", "path": "C:\\a\\c.dll", "kind": "missing"}, {"ev": "exit", "code": 0}]
    out = trim_file_events(events)
    assert [e["pe"]["exports"] for e in out[:3]] == [[], ["f"], ["f"]]
    assert [e["pe"]["export_ordinals"] for e in out[:3]] == [[], [7], []]
    assert out[3:] == events[3:] and "exports" in events[1]["pe"] and events[1]["pe"]["exports"] == ["f", "g"]
    assert trim_file_events(out) == out  # idempotent
    assert asked_exports(e["pe"] for e in out[:3]) == asked_exports(e["pe"] for e in events[:3])


def test_trimmed_list_never_reads_as_missing_an_export():
    """RecordedWorld on trimmed facts: an asked name is exact (present or missing); a name nobody asked
    for is not known and reads as exported; untrimmed facts (older traces) answer as they always did."""
    events = trim_file_events([
        {"ev": "file", "path": "C:\\a\\top.dll", "kind": "pe", "pe": pe(imports=[("b.dll", ["f", "gone"], [2, 5])])},
        {"ev": "file", "path": "C:\\a\\b.dll", "kind": "pe", "pe": pe(exports=["f", "g"], ordinals=[1, 2])}])
    events.append({"ev": "file", "path": "C:\\a\\old.dll", "kind": "pe", "pe": pe(exports=["f"])})
    world = RecordedWorld(SystemInfo(), events)
    b = world.file("C:\\a\\b.dll").pe
    assert isinstance(b.exports, AskedOnly) and isinstance(b.export_ordinals, AskedOnly)
    assert "f" in b.exports and "gone" not in b.exports  # asked: exact
    assert "g" in b.exports and "never_asked" in b.exports  # not asked: not known, so never "missing"
    assert 2 in b.export_ordinals and 5 not in b.export_ordinals and 99 in b.export_ordinals
    old = world.file("C:\\a\\old.dll").pe
    assert type(old.exports) is frozenset and "g" not in old.exports


NAMES = st.sampled_from(["a", "b", "c", "d", "e", "#1", "#2"])
DLLS = st.sampled_from(["x.dll", "y.dll", "z.dll"])


@st.composite
def pe_objects(draw) -> dict:
    names = st.lists(NAMES.filter(lambda n: not n.startswith("#")), max_size=4)
    imports = draw(st.lists(st.tuples(DLLS, names, st.lists(st.integers(1, 4), max_size=2)), max_size=3))
    forwarders = draw(st.dictionaries(NAMES, st.tuples(st.sampled_from(["x", "y", "z"]), NAMES)
                                      .map(lambda t: f"{t[0]}.{t[1]}"), max_size=3))
    exports = draw(st.lists(NAMES.filter(lambda n: not n.startswith("#")), max_size=5))
    return pe(imports=imports, exports=set(exports) | {k for k in forwarders if not k.startswith("#")},
              ordinals=draw(st.sets(st.integers(1, 4), max_size=4)), forwarders=forwarders)


@given(st.lists(pe_objects(), min_size=1, max_size=5))
@settings(max_examples=300, deadline=None)
def test_trimmed_world_answers_every_asked_name_as_the_full_one(pes):
    """Whatever the facts: for every name and ordinal the trace asks for (imports, forwarder targets),
    every DLL of the trimmed world answers "exported?" and "forwarded where?" as the full world does,
    and nothing reads as missing that the full world has."""
    events = [{"ev": "file", "path": f"C:\\d\\m{i}.dll", "kind": "pe", "pe": p} for i, p in enumerate(pes)]
    full, small = RecordedWorld(SystemInfo(), events), RecordedWorld(SystemInfo(), trim_file_events(events))
    asked = asked_exports(pes)
    targets = {t.rpartition(".")[2] for p in pes for k, t in p["forwarders"].items() if asked.wants(k)}
    assert {t for t in targets if not t.startswith("#")} <= asked.names
    for e in events:
        f, t = full.file(e["path"]).pe, small.file(e["path"]).pe
        for n in asked.names | {"a", "b", "c", "d", "e"}:
            if n in asked.names:
                assert (n in f.exports) == (n in t.exports) and f.forwarders.get(n) == t.forwarders.get(n)
            assert n not in f.exports or n in t.exports
        for o in range(1, 6):
            if o in asked.ordinals:
                assert (o in f.export_ordinals) == (o in t.export_ordinals)
            assert o not in f.export_ordinals or o in t.export_ordinals


def test_collect_facts_trims_unless_keep_all(monkeypatch):
    """collect_facts trims what the recording world gave (by default), keeps it whole with keep_all
    or DLLTRACE_KEEP_ALL_EXPORTS=1."""
    recorded = [{"ev": "file", "path": "C:\\a\\top.dll", "kind": "pe", "pe": pe(imports=[("b.dll", ["f"], [])])},
                {"ev": "file", "path": "C:\\a\\b.dll", "kind": "pe", "pe": pe(exports=["f", *map(str, range(500))])}]

    class FakeRecording:
        def __init__(self, inner):
            pass

        def events(self):
            return [dict(e) for e in recorded]

    class FakeTrace:
        pids = [1]

        def start_failures(self):
            return []

    monkeypatch.setattr(collect, "RecordingWorld", FakeRecording)
    monkeypatch.setattr(collect, "LiveWorld", lambda *a: None)
    monkeypatch.setattr(collect, "near_miss_places", lambda *a: [])
    monkeypatch.setattr(collect, "system_and_process", lambda trace, pid: (None, None))
    monkeypatch.setattr(collect, "replay", lambda trace, world, pid: None)
    monkeypatch.delenv(collect.KEEP_ALL_EXPORTS_ENV, raising=False)
    trimmed = collect_facts(FakeTrace(), lambda p: p)
    assert trimmed[1]["pe"]["exports"] == ["f"] and trimmed[1]["pe"][TRIMMED]["exports"] == 501
    assert all(e["pid"] == 1 and e["seq"] == 0 for e in trimmed)
    assert len(collect_facts(FakeTrace(), lambda p: p, keep_all=True)[1]["pe"]["exports"]) == 501
    monkeypatch.setenv(collect.KEEP_ALL_EXPORTS_ENV, "1")
    assert TRIMMED not in collect_facts(FakeTrace(), lambda p: p)[1]["pe"]
    assert TRIMMED in collect_facts(FakeTrace(), lambda p: p, keep_all=False)[1]["pe"]


def test_trim_trace_bytes_changes_only_the_file_lines(tmp_path):
    src = FIXTURE_TRACES[0]
    data = src.read_bytes()
    out = trim_trace_bytes(data)
    before, after = data.splitlines(), out.splitlines()
    assert len(before) == len(after)
    for a, b in zip(before, after):
        if json.loads(a).get("ev") != "file":
            assert a == b
        elif "pe" in json.loads(a):
            assert TRIMMED in json.loads(b)["pe"]
    assert trim_trace_bytes(out) == out
    read_trace(trimmed_copy(src, tmp_path / "t.jsonl"))  # reads back
    assert not read_trace(tmp_path / "t.jsonl").warnings


# --------------------------------------------------------------------------- same report, trimmed or full
@pytest.mark.parametrize("path", FIXTURE_TRACES, ids=[p.stem for p in FIXTURE_TRACES])
def test_fixture_trace_reports_the_same_trimmed(path, tmp_path):
    """Every fixture trace (recorded under Wine, or hand-written for Windows) gives the same report
    once its exports are trimmed as `dlltrace run` trims them."""
    assert report_json(trimmed_copy(path, tmp_path / path.name)) == report_json(path)


def test_missing_export_diagnosed_from_a_trimmed_trace(tmp_path):
    """s7 (Windows profile): torch_cuda.dll imports cudnnGetConvolutionForwardAlgorithm_v7 from the
    cudnn64_7.dll already loaded, which lacks it: 127, and the copy in torch\\lib that has it."""
    t = trimmed_copy(ROOT / "fixtures" / "traces" / "s7.jsonl", tmp_path / "s7.jsonl")
    rep = report_json(t)
    leaf = rep["calls"][rep["failed"][0]]["leaf"]
    assert (rep["error"], leaf["cause"], leaf["name"]) == (127, "missing_export", "cudnn64_7.dll")
    assert "cudnnGetConvolutionForwardAlgorithm_v7" in json.dumps(leaf)
    assert "C:\\\\DeepMosaics\\\\torch\\\\lib\\\\cudnn64_7.dll" in json.dumps(rep)  # the copy that has it
    assert rep == report_json(ROOT / "fixtures" / "traces" / "s7.jsonl")


BIG = [f"?big_{i}@@YAXXZ" for i in range(3000)]  # the exports nobody asks for


def forwarder_trace(dest: Path, n_exports: list[str], ordinal: int = 3) -> Path:
    """C:\\app\\top.dll imports k.dll!f (a forwarder to n.g) and k.dll ordinal `ordinal`; k.dll and
    n.dll export thousands of names nobody imports."""
    w = Writer(APP + "\\host.exe", APP, [APP, SYS32, "C:\\Windows"],
               [f"{SYS32}\\ntdll.dll", f"{SYS32}\\kernel32.dll", f"{SYS32}\\kernelbase.dll"], [APP + "\\host.exe"])
    ok = "g" in n_exports and ordinal in (1, 2, 3)
    w.load("LoadLibraryExW", APP + "\\top.dll", 0, None,
           [(APP + "\\top.dll", 0), (APP + "\\k.dll", 0), (APP + "\\n.dll", 0)],
           0 if ok else 127, 0 if ok else ENTRY_NOT_FOUND, APP + "\\top.dll")
    w.file(APP + "\\top.dll", imports=[{"dll": "k.dll", "names": ["f"], "ordinals": [ordinal]}])
    w.file(APP + "\\k.dll", exports=["f", *BIG], imports=["n.dll"])
    w.file(APP + "\\n.dll", exports=[*n_exports, *BIG])
    w.file(f"{SYS32}\\kernel32.dll")
    w.write(dest, exit_code=0 if ok else 1)
    lines = dest.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):  # k.dll's forwarder f -> n.g and its ordinals 1..3000
        e = json.loads(line)
        if e.get("ev") == "file" and e["path"].endswith("\\k.dll"):
            e["pe"]["forwarders"] = {"f": "n.g", **{n: "n." + n for n in BIG[:500]}}
            e["pe"]["export_ordinals"] = list(range(1, 3001))
            lines[i] = json.dumps(e)
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


@pytest.mark.parametrize("n_exports, ordinal, cause, detail", [
    (["g"], 3, None, None),
    (["h"], 3, "missing_export", "g"),  # the forwarder's target lacks the name
    (["g"], 4000, "missing_ordinal", "4000"),  # an import by an ordinal k.dll does not have
], ids=["all_there", "forwarded_name_missing", "ordinal_missing"])
def test_forwarded_and_ordinal_imports_from_a_trimmed_trace(tmp_path, n_exports, ordinal, cause, detail):
    full = forwarder_trace(tmp_path / "full.jsonl", n_exports, ordinal)
    small = trimmed_copy(full, tmp_path / "small.jsonl")
    assert small.stat().st_size * 5 < full.stat().st_size  # the 3000 names nobody asks for are gone
    facts = {e["path"]: e["pe"] for e in read_trace(small).of("file") if "pe" in e}
    assert facts[APP + "\\k.dll"]["forwarders"] == {"f": "n.g"}
    assert facts[APP + "\\n.dll"]["exports"] == [n for n in n_exports if n == "g"]
    rep = report_json(small)
    assert rep == report_json(full)
    if cause is None:
        assert not rep["failed"]
    else:
        leaf = rep["calls"][rep["failed"][0]]["leaf"]
        assert leaf["cause"] == cause and detail in json.dumps(leaf)


# --------------------------------------------------------------------------- the real-wheel corpus (Wine)
def _gz(data: bytes) -> int:
    return len(gzip.compress(data, 6))


@pytest.mark.wine
def test_real_corpus_same_report_trimmed_and_full(tmp_path_factory, wine_prefix, summary):
    """The done-when: every corpus situation (torch, onnxruntime-gpu, CTranslate2 DLLs under Wine) reports
    the same from its trimmed trace as from the full one, and a failing run's trace is <= 2 MB gzipped."""
    import test_real_corpus as rc

    runs = rc.corpus_runs(tmp_path_factory)
    outcomes = runs.run(rc.SITUATIONS)
    problems, sizes = [], []
    for sit in rc.SITUATIONS:
        o = outcomes[sit.name]
        if o.report is None or o.full_report is None:
            problems.append(f"{sit.name}: no report ({o.harness})")
            continue
        a, b = dict(o.report), dict(o.full_report)
        a.pop("source", None), b.pop("source", None)
        if a != b:
            diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            problems.append(f"{sit.name}: the trimmed trace's report differs from the full one's in {diff}")
        t, full = (runs.work / sit.name / "t.jsonl").read_bytes(), (runs.work / sit.name / "t.full.jsonl").read_bytes()
        sizes.append((sit.name, len(t), _gz(t), len(full), _gz(full)))
        if not sit.loads_fine and _gz(t) > 2_000_000:
            problems.append(f"{sit.name}: trimmed trace {_gz(t)} bytes gzipped, over 2 MB")
    assert not problems, "\n".join(problems)
    big = max(sizes, key=lambda s: s[3])
    summary["trace trimming"] = (f"trace trimming: {len(sizes)} corpus runs report the same trimmed and full; largest "
                                 f"{big[0]}: {big[3] / 1e6:.1f} MB full -> {big[1] / 1e3:.0f} KB trimmed, "
                                 f"{big[2] / 1e3:.0f} KB gzipped")
    # trimming really happened where the export tables are big (torch_python.dll's own imports of
    # torch_cpu.dll are 0.5 MB: torch_C_needs_python311 is the least trimmed, 4.8x)
    assert all(s[1] * 4 < s[3] for s in sizes if s[3] > 5_000_000), sizes


@pytest.mark.wine
def test_run_writes_the_trimmed_facts_by_default(tmp_path_factory, wine_prefix):
    """`dlltrace run` without the switch writes the same `file` facts as its full trace trimmed by
    trim_trace_bytes (which the corpus compares), for a real failing torch situation."""
    import test_real_corpus as rc
    import winetools

    runs = rc.corpus_runs(tmp_path_factory)
    sit = next(s for s in rc.SITUATIONS if s.name == "torch_without_asmjit")
    folder = runs.base / (sit.name + "-default")
    work = tmp_path_factory.mktemp("trim-default")
    rc.lay_out(sit, folder, runs.built)
    try:
        root_win = winetools.to_windows(folder)
        argv = [root_win + "\\loadhost.exe", *(rc._win(root_win, a) for a in sit.ops)]
        paths = {}
        for name, env in (("default", {}), ("full", {"DLLTRACE_KEEP_ALL_EXPORTS": "1"})):
            paths[name] = work / f"{name}.jsonl"
            d = winetools.dlltrace("run", "--wine", "-o", str(paths[name]), "--", *argv, cwd=work, **env)
            assert paths[name].is_file(), d.stderr[-2000:]
    finally:
        shutil_rmtree(folder)

    def facts(data: bytes) -> list:  # the `file` events, without the pid (each run has its own)
        return [{k: v for k, v in e.items() if k != "pid"} for e in map(json.loads, data.splitlines())
                if e.get("ev") == "file"]

    default = facts(paths["default"].read_bytes())
    assert default == facts(trim_trace_bytes(paths["full"].read_bytes()))
    assert any(TRIMMED in e.get("pe", {}) for e in default)
    assert not any(TRIMMED in e.get("pe", {}) for e in facts(paths["full"].read_bytes()))


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
