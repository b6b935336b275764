"""Properties of the simulator over generated worlds (hypothesis), in both profiles.

A property that holds only for some worlds says so with assume() (the others are discarded, not
counted as passes) and labels what it saw with event(); `pytest --hypothesis-show-statistics`
shows both. Where the Wine profile (docs/wine-profile.md) differs, the property says what each
profile does."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, assume, event, given, settings, strategies as st

from dlltrace import winpath
from dlltrace.diagnosis import explain
from dlltrace.model import CAUSE_ERROR
from dlltrace.diagnosis.scenario import scenario_from_dict

NAMES = ["a.dll", "b.dll", "c.dll", "d.dll"]
# Folders the SEARCH flags may search, and folders only PATH / the current folder point at: disjoint.
SEARCHABLE = ["C:\\app", "C:\\lib", "C:\\u1", "C:\\u2", "C:\\Windows\\System32"]
PATHONLY = ["C:\\p1", "C:\\p2", "C:\\cwd"]
FLAGS = [0, 0x8, 0x100, 0x200, 0x400, 0x800, 0x1000, 0x1100, 0x900, 0x600]


@st.composite
def worlds(draw, preload="sometimes", dense=False):
    """A world (Windows or Wine profile, half each) and its calls, the last a LoadLibraryExW.
    `preload` ("never", "sometimes", "always"): a load of one of the generated DLLs comes first,
    and the last load is often of a DLL that imports it, so it binds to a module already loaded
    (taking a reference). `dense`: most folders hold most names, mostly good x64 DLLs, so most
    last loads succeed."""
    profile = draw(st.sampled_from(["windows", "wine"]))
    files = []
    for folder in SEARCHABLE + PATHONLY:
        for name in NAMES:
            if (draw(st.integers(0, 3)) != 0) if dense else (draw(st.integers(0, 3)) == 0):
                f = {"path": f"{folder}\\{name}"}
                f["machine"] = draw(st.sampled_from(["x64"] * (15 if dense else 3) + ["x86"]))
                kind = draw(st.sampled_from(["pe"] * (40 if dense else 8) + ["not_pe"]))
                if kind != "pe":
                    f["kind"] = kind
                deps = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
                f["imports"] = [d for d in deps if d != name]
                if draw(st.integers(0, 60 if dense else 15)) == 0:
                    f["dllmain_fails"] = True
                files.append(f)
    process = {
        "exe": "C:\\app\\host.exe",
        "cwd": "C:\\cwd",
        "path": draw(st.lists(st.sampled_from(["C:\\p1", "C:\\p2"]), max_size=2, unique=True)),
    }
    calls = []
    for d in draw(st.lists(st.sampled_from(["C:\\u1", "C:\\u2"]), max_size=2, unique=True)):
        calls.append({"op": "AddDllDirectory", "path": d})
    dll_directory = draw(st.sampled_from([None, None, "C:\\u2", "C:\\u2", ""]))
    if dll_directory is not None:
        # "" drops the current folder on Windows, not under Wine (rule_standard_order)
        calls.append({"op": "SetDllDirectory", "path": dll_directory})
    if draw(st.integers(0, 3)) == 0:
        calls.append({"op": "SetDefaultDllDirectories", "flags": draw(st.sampled_from([0x1000, 0x800, 0x200, 0x1100]))})
    importers = []
    if files and preload != "never" and (preload == "always" or draw(st.booleans())):
        loadable = [f for f in files if f["machine"] == "x64" and "kind" not in f and "dllmain_fails" not in f]
        first = draw(st.sampled_from(loadable or files))
        calls.append({"op": "LoadLibraryExW", "name": first["path"], "flags": 0})
        # other DLLs often import it first: a later load binds to it (a reference taken), then may
        # fail on its next import or its DllMain, and must give that reference back
        name = winpath.basename(first["path"])
        for f in files:
            if not f["path"].endswith("\\" + name) and draw(st.booleans()):
                f["imports"] = [name, *(d for d in f["imports"] if d != name)]
                if winpath.dirname(f["path"]) in SEARCHABLE:
                    importers.append(f["path"])
    target = draw(st.sampled_from(NAMES))
    if importers and (preload == "always" or draw(st.booleans())):
        target = draw(st.sampled_from(importers))
    elif draw(st.booleans()):
        target = draw(st.sampled_from(["C:\\lib", "C:\\app"])) + "\\" + target
    calls.append({"op": "LoadLibraryExW", "name": target, "flags": draw(st.sampled_from(FLAGS))})
    doc = {"process": process, "file": files, "call": calls, "folders": ["C:\\u1", "C:\\u2", "C:\\lib", "C:\\p1", "C:\\p2"]}
    if profile == "wine":
        doc["system"] = {"profile": "wine"}
    return doc


def profile_of(doc) -> str:
    return doc.get("system", {}).get("profile", "windows")


def outcome(doc):
    r = scenario_from_dict(copy.deepcopy(doc)).run()[-1]
    event(f"{profile_of(doc)} profile, last load error {r.error}")
    return r


def key(r):
    return (r.error, r.module_path, tuple(r.probes), tuple(r.chain), r.leaf)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds())
def test_deterministic(doc):
    s = scenario_from_dict(copy.deepcopy(doc))
    first = [key(r) for r in s.run()]
    event(f"{profile_of(doc)} profile, last load error {first[-1][0]}")
    # the same Scenario object run again: nothing of the first run (loaded modules, refcounts,
    # directories added) may leak into the second
    assert [key(r) for r in s.run()] == first
    assert [key(r) for r in scenario_from_dict(copy.deepcopy(doc)).run()] == first


def good(doc, path) -> bool:
    facts = next((f for f in doc["file"] if winpath.same(f["path"], path)), None)
    return facts is not None and facts.get("machine", "x64") == "x64" and facts.get("kind", "pe") == "pe"


@SETTINGS
@given(st.one_of(worlds(), worlds(dense=True)))
def test_found_module_is_first_existing_matching_candidate(doc):
    """A search takes the first candidate that is there and fits, or that is loaded already (its
    path: rule_loaded_same_file; under Wine any candidate: rule_loaded_candidate_not_opened),
    skipping only missing and wrong-machine files; a search that finds nothing (126, or 193 when
    only wrong-machine copies were there) looked at no good file."""
    r = outcome(doc)
    checked = 0
    for node in r.tree.walk():
        if not node.candidates or (node.path is None) != (node.cause in ("not_found", "bad_machine")):
            continue
        results = [c.result for c in node.candidates]
        if node.path is None:
            event(f"a search that found nothing ({node.cause})")
            assert all(x in ("not_there", "wrong_machine") for x in results), results
            assert not any(good(doc, c.path) for c in node.candidates)
            checked += 1
            continue
        if node.cause:
            continue
        assert results[-1] in ("found", "already_loaded"), results
        assert all(x in ("not_there", "wrong_machine") for x in results[:-1]), results
        assert not any(good(doc, c.path) for c in node.candidates[:-1])
        if results[-1] == "already_loaded":
            event("a module bound to a loaded candidate")
        else:
            assert good(doc, node.path)
        checked += 1
    assume(checked)  # no search in this load (a full path, or rejected flags)


@SETTINGS
@given(worlds(preload="never", dense=True))  # a preload that fails may succeed with the new folder, changing what is loaded
def test_appending_a_path_folder_never_changes_a_success(doc):
    r = outcome(doc)
    assume(r.error == 0)
    doc2 = copy.deepcopy(doc)
    doc2["process"]["path"].append("C:\\zz")
    doc2["file"] += [{"path": f"C:\\zz\\{n}"} for n in NAMES]
    doc2["folders"].append("C:\\zz")
    assert key(outcome(doc2))[:2] == key(r)[:2]


@SETTINGS
@given(worlds())
def test_search_flags_never_reach_path_or_current_folder(doc):
    flags = doc["call"][-1]["flags"]
    # SetDefaultDllDirectories takes effect only with APPLICATION_DIR/USER_DIRS/SYSTEM32/DEFAULT_DIRS bits
    defaults = [c["flags"] for c in doc["call"] if c["op"] == "SetDefaultDllDirectories" and not c["flags"] & ~0x1E00]
    assume(flags & 0x1F00 or defaults)
    r = outcome(doc)
    if r.error == 87:
        # rejected flags: nothing searched at all
        assert r.probes == []
    for p in r.probes:
        assert winpath.dirname(p) not in PATHONLY, p


@SETTINGS
@given(worlds(), st.data())
def test_deleting_an_unprobed_file_changes_nothing(doc, data):
    results = scenario_from_dict(copy.deepcopy(doc)).run()
    probed = {winpath.key(p) for r in results for p in r.probes}
    unprobed = [f for f in doc["file"] if winpath.key(f["path"]) not in probed]
    assume(unprobed)
    event(f"{profile_of(doc)} profile, last load error {results[-1].error}")
    victim = data.draw(st.sampled_from(unprobed))
    doc2 = copy.deepcopy(doc)
    doc2["file"] = [f for f in doc2["file"] if f["path"] != victim["path"]]
    assert [key(r) for r in scenario_from_dict(doc2).run()] == [key(r) for r in results]


@SETTINGS
@given(worlds())
def test_scenario_round_trips_through_json(doc):
    # to_dict gives back the input (a copy of it: changing it leaves the scenario alone), that
    # input is JSON, and the scenario read back from the JSON runs the same
    s = scenario_from_dict(copy.deepcopy(doc))
    d = s.to_dict()
    assert d == doc
    text = json.dumps(d)
    d["call"].clear()
    assert s.to_dict() == doc
    again = scenario_from_dict(json.loads(text))
    assert [key(x) for x in s.run()] == [key(x) for x in again.run()]


@st.composite
def worlds_failing_on_a_last_import(draw):
    """A dense world whose last load's DLL (every file of its name) imports one or two other
    names, then a DLL no folder holds: the load fails in the import stage, usually after other
    imports loaded (under Wine those stay loaded)."""
    doc = draw(worlds(dense=True))
    target = winpath.basename(doc["call"][-1]["name"]).lower()
    others = [n for n in NAMES if n != target]
    for f in doc["file"]:
        if winpath.basename(f["path"]).lower() == target:
            f["imports"] = [*draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True)), "nowhere.dll"]
    return doc


def check_failed_load_leaves_loaded_modules(doc):
    """Windows: a failed load unloads everything it loaded and gives back every reference it took.
    Wine (rule_failed_load_keeps_loaded_dependencies): after an import-stage failure the
    dependencies that loaded stay listed, not initialized, and keep the references taken; a
    DllMain failure (1114) unloads the whole call, as on Windows. In both, nothing loaded before
    the call is unloaded."""
    s = scenario_from_dict(copy.deepcopy(doc))
    sim = s.simulator(explain=False)
    for c in s.calls[:-1]:
        sim.do(c)
    before = [(m, m.refcount) for m in sim.process.loaded]
    [r] = sim.do(s.calls[-1])
    after = sim.process.loaded
    if not r.error:
        event("last load succeeded")
        assert sim.process.find_loaded_by_path(r.module_path) is not None
        return
    if profile_of(doc) == "windows" or r.error == 1114:
        event(f"{profile_of(doc)} profile: failed load, {r.error}")
        assert [(m, m.refcount) for m in after] == before
        return
    kept = [m for m in after if all(m is not b for b, _ in before)]
    event("wine profile: failed load, " + ("dependencies kept" if kept else "nothing kept"))
    assert [m for m in after if m not in kept] == [b for b, _ in before]
    assert all(m.refcount >= n for m, n in before)
    assert all(not m.initialized for m in kept)


@SETTINGS
@given(worlds(preload="always"))
def test_failed_load_leaves_loaded_modules_as_they_were(doc):
    check_failed_load_leaves_loaded_modules(doc)


@SETTINGS
@given(worlds_failing_on_a_last_import())
def test_a_load_failing_on_its_last_import_unloads_or_keeps_per_profile(doc):
    check_failed_load_leaves_loaded_modules(doc)


@SETTINGS
@given(worlds())
def test_error_iff_leaf_and_chain_ends_at_leaf(doc):
    r = outcome(doc)
    assert (r.error == 0) == (r.leaf is None)
    assume(r.leaf)
    assert r.chain[-1] == r.leaf.name
    assert r.chain[0] == winpath.basename(doc["call"][-1]["name"])
    # the tree holds the cause (the leaf is not a default filled in)
    assert explain.leaf_node(r.tree).cause == r.leaf.cause
    # the call's error is the leaf's: on Windows a failed import passes its own error up unchanged;
    # under Wine (rule_import_failure_error) a failed import is 126 for its importer, whatever the
    # cause, except a DllMain failure (1114)
    if profile_of(doc) == "wine" and len(r.chain) > 1 and r.leaf.cause != "init_failed":
        event("wine profile: failed import")
        assert r.error == 126
    else:
        assert CAUSE_ERROR[r.leaf.cause] == r.error
