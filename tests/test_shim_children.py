"""The shim follows the traced program's children: its CreateProcess hook (kernelbase
CreateProcessInternalW under Wine 8) creates the child suspended, injects the shim with
native/common/inject.c (the launcher's injection), writes a `spawn` event and resumes the child unless
the caller asked for CREATE_SUSPENDED. All processes write to the same trace file.

Hosts: fixtures/host/loadhost.c's spawn ops (spawn / spawna / spawnsusp / spawnenv EXE ARGS...), which
run a second loadhost and wait for it; a 32-bit build of loadhost (the x86 shim goes into it).
"""

from __future__ import annotations

import json

import pytest

import winetools
from dlltrace.trace.reader import read_trace
from test_shim import shim_env  # noqa: F401  (session fixture)
from test_shim import (HOST, ROOT, STATUS_OBJECT_NAME_NOT_FOUND, ends, lines, schema_checked_lines, schema_validator,
                       traced, w)

pytestmark = pytest.mark.wine

HOST32 = w("host32", "loadhost32.exe")


@pytest.fixture(scope="session")
def children_env(shim_env):
    """shim_env plus a 32-bit loadhost at C:\\dlltrace-shim\\host32 (built once per source change)."""
    src = ROOT / "fixtures" / "host" / "loadhost.c"
    cache = winetools.built_once(
        winetools.CACHE / f"children-{winetools.source_key(src)}",
        lambda d: winetools.mingw_compile([src], d / "loadhost32.exe", bits=32, extra=["-municode"]))
    exe32 = cache / "loadhost32.exe"
    dest = winetools.drive_c() / "dlltrace-shim" / "host32" / "loadhost32.exe"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(exe32.read_bytes())
    return shim_env


def test_child_is_traced_with_its_failed_load(children_env, tmp_path):
    r, tr = traced(tmp_path, "spawn", HOST, "load", w("lib", "missing.dll"), "0")
    out = lines(r)
    assert out[0] == "load err 126" and out[1].startswith("spawn pid ") and out[1].endswith(" exit 126"), out
    shown_pid = int(out[1].split()[2])
    assert r.returncode == 126  # the child's exit code reached the parent, then the launcher
    assert tr.warnings == [] and not list(tr.of("warning"))
    parent, child = tr.pids
    pp, cp = tr.process(parent), tr.process(child)
    assert (pp["via"], cp["via"]) == ("launcher", "spawn")
    assert child == shown_pid and cp["ppid"] == parent
    assert "CreateProcessInternalW" in pp["hooks"] and "CreateProcessInternalW" in cp["hooks"]
    assert "CreateProcessW" not in pp["hooks"]  # the fallbacks are not needed under Wine 8
    assert tr.env(parent) and tr.env(child) and tr.env(child)["exe"].lower().endswith("loadhost.exe")
    (spawn,) = tr.of("spawn")
    assert spawn["pid"] == parent and spawn["child_pid"] == child
    assert (spawn["ok"], spawn["error"], spawn["injected"], spawn["inject_error"], spawn["reason"]) == (True, 0, True, 0, None)
    assert spawn["cmdline"] == f"{HOST} load {w('lib', 'missing.dll')} 0" and spawn["app"] is None
    assert spawn["flags"] == 0  # the caller's flags, not the CREATE_SUSPENDED the hook added
    assert tr.loads(parent) == []  # the process creation's own file calls are not loads or probes
    (load,) = tr.loads(child)
    assert (load.api, load.name, load.error, load.status) == ("LoadLibraryExW", w("lib", "missing.dll"), 126, 0xC0000135)
    assert any(ends(p.win_path, "lib", "missing.dll") and p.status == STATUS_OBJECT_NAME_NOT_FOUND for p in load.probes)
    # file order: the parent's spawn event before anything the child wrote
    order = [(e["pid"], e["ev"]) for e in tr.events]
    assert order.index((parent, "spawn")) < order.index((child, "process"))
    assert tr.exit_code(parent) == 126


def test_trace_with_children_matches_the_schema(children_env, tmp_path):
    traced(tmp_path, "spawn", HOST, "spawn", "C:\\no\\such.exe")
    spawns = [obj for obj in schema_checked_lines(tmp_path / "t.jsonl") if obj.get("ev") == "spawn"]
    assert [(s["ok"], s["injected"]) for s in spawns] == [(True, True), (False, False)]
    # the spawn schema rejects an event without child_pid (it is required, null when not created)
    bad = {k: val for k, val in spawns[0].items() if k != "child_pid"}
    assert list(schema_validator().iter_errors(bad))


def test_caller_asking_for_create_suspended_gets_a_suspended_child(children_env, tmp_path):
    r, tr = traced(tmp_path, "spawnsusp", HOST, "exit", "5")
    (out,) = lines(r)
    # ResumeThread's previous suspend count: 1 = the hook left the child suspended for the caller
    assert out.startswith("spawnsusp pid ") and out.endswith(" suspended 1 exit 5"), out
    assert r.returncode == 5
    parent, child = tr.pids
    (spawn,) = tr.of("spawn")
    assert spawn["child_pid"] == child == int(out.split()[2]) and spawn["injected"]
    assert spawn["flags"] & 0x4  # CREATE_SUSPENDED, as the caller passed it
    assert tr.process(child)["via"] == "spawn"


def test_grandchild_through_createprocessa_and_an_own_environment_block(children_env, tmp_path):
    # host --CreateProcessA--> host --CreateProcessW with an environment block without DLLTRACE_TRACE--> host
    r, tr = traced(tmp_path, "spawna", HOST, "spawnenv", HOST, "load", w("chain", "top.dll"), "0x1100")
    out = lines(r)
    assert out[0] == "load err 126" and out[1].startswith("spawnenv pid ") and out[2].startswith("spawna pid "), out
    assert out[1].endswith(" exit 126") and out[2].endswith(" exit 126") and r.returncode == 126
    top, mid, low = tr.pids
    assert [tr.process(p)["via"] for p in (top, mid, low)] == ["launcher", "spawn", "spawn"]
    assert tr.process(mid)["ppid"] == top and tr.process(low)["ppid"] == mid
    s1, s2 = tr.of("spawn")
    assert (s1["pid"], s1["child_pid"], s2["pid"], s2["child_pid"]) == (top, mid, mid, low)
    assert s1["api"] == "CreateProcessInternalW"  # CreateProcessA reaches it through CreateProcessInternalA
    assert s1["cmdline"].startswith(HOST + " spawnenv ")
    # the trace path reached the grandchild without the environment variable (passed by the injection)
    assert "PATH" not in tr.env(low)["vars"] and "PATH" in tr.env(mid)["vars"]
    assert [ld.error for ld in tr.loads(low)] == [126] and tr.loads(top) == tr.loads(mid) == []


def test_32bit_child_is_injected_with_the_x86_shim(children_env, tmp_path):
    # (32-bit Wine, wine32: the child runs, and the x64 shim put the x86 one into it: tests/test_shim32.py has more)
    winetools.require("wine32")
    r, tr = traced(tmp_path, "spawn", HOST32, "exit", "4")
    (out,) = lines(r)
    assert out.startswith("spawn pid ") and out.endswith(" exit 4"), out
    (spawn,) = tr.of("spawn")
    assert (spawn["ok"], spawn["injected"], spawn["inject_error"], spawn["child_machine"]) == (True, True, 0, "x86")
    parent, child = tr.pids
    assert spawn["child_pid"] == child and tr.env(child)["machine"] == "x86"
    assert tr.process(child)["shim"].lower().endswith("dlltrace_shim32.dll")


def test_failed_createprocess_is_recorded(children_env, tmp_path):
    r, tr = traced(tmp_path, "spawn", "C:\\no\\such.exe", "x")
    assert lines(r) == ["spawn err 2"] and r.returncode == 2
    (spawn,) = tr.of("spawn")
    assert (spawn["ok"], spawn["error"], spawn["child_pid"], spawn["injected"]) == (False, 2, None, False)
    assert spawn["cmdline"] == "C:\\no\\such.exe x"


def test_run_and_report_with_a_child(children_env, tmp_path, dlltrace_cli):
    # `dlltrace run` (which appends the file facts a replay needs) over the parent's own failed load, then
    # a child with another one; the report replays each process
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", HOST, "load", w("lib", "missing.dll"), "0",
                           "spawn", HOST, "load", w("chain", "top.dll"), "0x1100", cwd=tmp_path, LC_ALL="C.UTF-8")
    assert r.returncode == 126, r.stderr
    out = r.stdout.replace("\r\n", "\n").splitlines()
    assert out[:2] == ["load err 126", "load err 126"] and out[2].startswith("spawn pid "), out
    tr = read_trace(tmp_path / "t.jsonl")
    parent, child = tr.pids
    rep = dlltrace_cli("report", "--json", "t.jsonl", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    calls = json.loads(rep.stdout)["calls"]
    assert {(c["pid"], c["name"], c["real_error"]) for c in calls} == {
        (parent, w("lib", "missing.dll"), 126), (child, w("chain", "top.dll"), 126)}
    (child_call,) = [c for c in calls if c["pid"] == child]
    assert child_call["leaf"]["name"] == "leaf.dll" and child_call["chain"] == ["top.dll", "mid.dll", "leaf.dll"]
    text = dlltrace_cli("report", "t.jsonl", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "leaf.dll" in text.stdout and "top.dll" in text.stdout and "missing.dll" in text.stdout  # child, parent
    # each verdict says which process it is about
    assert f"in process {parent} (loadhost.exe" in text.stdout
    assert f"in process {child} (loadhost.exe, started by {parent})" in text.stdout


def test_createprocess_w_and_a_fallbacks(children_env, tmp_path):
    # where CreateProcessInternalW cannot be hooked, CreateProcessW and CreateProcessA are (DLLTRACE_SKIP_HOOKS
    # stands in for a refused prologue; the children inherit it)
    r, tr = traced(tmp_path, "spawna", HOST, "spawn", HOST, "load", w("lib", "missing.dll"), "0",
                   DLLTRACE_SKIP_HOOKS="NtCreateSection,CreateProcessInternalW")
    out_lines = lines(r)
    assert out_lines[0] == "load err 126" and out_lines[2].startswith("spawna pid "), out_lines
    assert r.returncode == 126
    top, mid, low = tr.pids
    for pid in (top, mid, low):
        hooks = tr.process(pid)["hooks"]
        assert "CreateProcessW" in hooks and "CreateProcessA" in hooks
        assert "CreateProcessInternalW" not in hooks and "NtCreateSection" not in hooks
        assert sorted(x["hook"] for x in tr.of("warning", pid=pid)) == ["CreateProcessInternalW", "NtCreateSection"]
    s1, s2 = tr.of("spawn")  # CreateProcessA is one event (its inner calls run under the guard)
    assert (s1["api"], s1["pid"], s1["child_pid"], s1["injected"]) == ("CreateProcessA", top, mid, True)
    assert (s2["api"], s2["pid"], s2["child_pid"], s2["injected"]) == ("CreateProcessW", mid, low, True)
    assert s1["cmdline"].startswith(HOST + " spawn ") and s1["app"] is None
    assert [ld.error for ld in tr.loads(low)] == [126]
