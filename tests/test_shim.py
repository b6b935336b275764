"""The native shim under Wine: fixture host (fixtures/host/loadhost.c) + mingw-built DLLs
(fixtures/dlls/*.c), run through the launcher; assertions on the recorded trace.

The shim and launcher are built on demand by native/build.sh (when missing or older than the sources);
the fixtures are built once per source change into the test cache and laid out on the prefix's C:.
In CI a missing wine64/mingw fails (winetools.require).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import winetools
from dlltrace.trace.reader import read_trace

pytestmark = pytest.mark.wine

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"
BIN = ROOT / "tracer" / "dlltrace" / "bin"
FIX = ROOT / "fixtures"
LAUNCHER = BIN / "dlltrace_launch64.exe"
SHIM = BIN / "dlltrace_shim64.dll"
WROOT = "C:\\dlltrace-shim"  # where the fixtures live inside the prefix
NON_ASCII_DIR = ("用户", "张三", "lib")
LONG_DIR = ("long", *[f"{'d' * 60}{i}" for i in range(5)])  # > 260 characters in all

STATUS_DLL_NOT_FOUND = 0xC0000135
STATUS_OBJECT_NAME_NOT_FOUND = 0xC0000034


def _newest(paths) -> float:
    return max(p.stat().st_mtime for p in paths)


def build_shim() -> None:
    """native/build.sh when the outputs are missing or older than the sources; one process at a time (the
    pytest-xdist workers: the other waits, then finds them built, rather than load a half-written DLL)."""
    sources = [p for p in NATIVE.rglob("*") if p.suffix in (".c", ".h", ".sh")]
    outs = [LAUNCHER, SHIM, BIN / "dlltrace_launch32.exe", BIN / "dlltrace_shim32.dll"]  # (both machines)

    def built() -> bool:
        return all(o.exists() for o in outs) and min(o.stat().st_mtime for o in outs) >= _newest(sources)

    if built():
        return
    with winetools.locked(BIN.resolve()):
        if built():
            return
        r = subprocess.run(["bash", str(NATIVE / "build.sh")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def build_fixtures(cache: Path) -> Path:
    """The hosts and DLLs the shim tests load, built with mingw into cache-<hash of their sources and of this
    file, which holds the recipe>/, whole or not at all (winetools.built_once)."""
    sources = sorted([*FIX.joinpath("host").glob("*.c"), *FIX.joinpath("dlls").glob("*.c"), Path(__file__)])

    def build(out: Path) -> None:
        cc = winetools.mingw_compile
        d = FIX / "dlls"
        cc([FIX / "host" / "loadhost.c"], out / "loadhost.exe", extra=["-municode"])
        cc([d / "plain.c"], out / "a.dll", dll=True)
        cc([d / "plain.c"], out / "x86.dll", dll=True, bits=32)
        cc([d / "leaf.c"], out / "leaf.dll", dll=True)
        cc([d / "leaf.c"], out / "leaf86.dll", dll=True, bits=32)
        cc([d / "mid.c", out / "leaf.dll"], out / "mid.dll", dll=True)
        cc([d / "top.c", out / "mid.dll"], out / "top.dll", dll=True)
        cc([FIX / "host" / "needstop.c", out / "top.dll"], out / "needstop.exe")
        cc([d / "initfail.c"], out / "initfail.dll", dll=True)
        cc([d / "mainload.c"], out / "mainload.dll", dll=True)

    return winetools.built_once(cache.with_name(f"{cache.name}-{winetools.source_key(*sources)}"), build)


def layout(built: Path, root: Path) -> None:
    """The folders on C: the tests load from (leaf.dll is deliberately nowhere)."""
    shutil.rmtree(root, ignore_errors=True)
    files = {
        "host/loadhost.exe": "loadhost.exe",
        "chain/top.dll": "top.dll", "chain/mid.dll": "mid.dll", "chain/needstop.exe": "needstop.exe",
        "lib/a.dll": "a.dll", "bad/x86.dll": "x86.dll", "bad/initfail.dll": "initfail.dll",
        "ml/mainload.dll": "mainload.dll", "ml/nested.dll": "a.dll",
        "ad/ad.dll": "a.dll", "ad/dd.dll": "a.dll", "sd/sd.dll": "a.dll",
        "/".join(NON_ASCII_DIR) + "/a.dll": "a.dll",
        "/".join(LONG_DIR) + "/a.dll": "a.dll",
    }
    for dest, src in files.items():
        p = root / dest
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built / src, p)


@pytest.fixture(scope="session")
def shim_env(wine_prefix):
    winetools.require("wine", "mingw64", "mingw32")
    build_shim()
    built = build_fixtures(winetools.CACHE / "shim-fixtures")
    layout(built, winetools.drive_c() / "dlltrace-shim")
    return built


def w(*parts: str) -> str:
    """C:\\dlltrace-shim\\<parts>"""
    return "\\".join([WROOT, *parts])


HOST = w("host", "loadhost.exe")


def traced(tmp_path: Path, *ops: str, name: str = "t.jsonl", **env: str):
    """Run the host with ops through the launcher (env: more environment); return (completed
    process, Trace)."""
    out = tmp_path / name
    r = winetools.run_launcher(LAUNCHER, [HOST, *ops], out, extra_env={"LC_ALL": "C.UTF-8", **env})
    return r, read_trace(out)


def lines(r) -> list[str]:
    return r.stdout.decode("utf-8", "replace").replace("\r\n", "\n").splitlines()


def ends(path, *parts) -> bool:
    return path is not None and path.lower().endswith("\\".join(parts).lower())


def test_missing_leaf_two_levels_down(shim_env, tmp_path):
    r, tr = traced(tmp_path, "load", w("chain", "top.dll"), "0x1100")
    assert lines(r) == ["load err 126"]
    assert r.returncode == 126
    assert tr.warnings == []
    (pid,) = tr.pids
    assert "LoadLibraryExW" in tr.process(pid)["hooks"] and "NtOpenFile" in tr.process(pid)["hooks"]
    (load,) = tr.loads()
    assert (load.api, load.name, load.flags) == ("LoadLibraryExW", w("chain", "top.dll"), 0x1100)
    assert load.caller.lower().endswith("loadhost.exe")
    assert (load.error, load.status, load.result) == (126, STATUS_DLL_NOT_FOUND, None)
    opened = [(p.win_path.lower(), p.status) for p in load.probes if p.op == "open"]
    assert (w("chain", "mid.dll").lower(), 0) in opened
    leaf = [(path, st) for path, st in opened if path.endswith("\\leaf.dll")]
    # Wine's order for 0x1100: DLL_LOAD_DIR (top's folder), APPLICATION_DIR, (no user dirs), SYSTEM32
    assert [path for path, _ in leaf] == [w("chain", "leaf.dll").lower(), w("host", "leaf.dll").lower(),
                                          "c:\\windows\\system32\\leaf.dll"]
    assert all(st == STATUS_OBJECT_NAME_NOT_FOUND for _, st in leaf)
    assert any(p.op == "section" and p.ok for p in load.probes)  # top.dll and mid.dll were mapped


def schema_validator():
    """jsonschema's validator for the trace schema."""
    import jsonschema

    from dlltrace.tracecheck import SCHEMA_PATH

    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def schema_checked_lines(path: Path) -> list[dict]:
    """Every line of a trace file, each asserted to follow the trace schema (checked by jsonschema)."""
    v = schema_validator()
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        obj = json.loads(line)
        assert not [e.message for e in v.iter_errors(obj)], f"line {i}: {obj}"
        out.append(obj)
    return out


def test_trace_lines_match_the_schema(shim_env, tmp_path):
    r, tr = traced(tmp_path, "adddir", w("ad"), "load", w("chain", "top.dll"), "0x1100", "load", w("lib", "a.dll"), "0",
                   "free", "setdlldir", w("sd"), "setdefault", "0x1000", "removedir")
    kinds = {obj.get("ev") for obj in schema_checked_lines(tmp_path / "t.jsonl")}
    assert {"process", "env", "load_begin", "load_end", "probe", "adddir", "free", "setdlldir", "setdefault",
            "removedir", "exit"} <= kinds
    env = tr.env(tr.pids[0])
    assert env["machine"] == "x64" and env["wine"] and env["system32"].lower() == "c:\\windows\\system32"
    assert "PATH" in env["vars"] and "LC_ALL" not in env["vars"]  # PATH-like variables only


def test_error_codes_193_1114_87(shim_env, tmp_path):
    r, tr = traced(tmp_path, "load", w("bad", "x86.dll"), "0", "load", w("bad", "initfail.dll"), "0",
                   "load", "a.dll", "0x100")
    assert lines(r) == ["load err 193", "load err 1114", "load err 87"]
    got = [(ld.name, ld.flags, ld.error) for ld in tr.loads()]
    assert got == [(w("bad", "x86.dll"), 0, 193), (w("bad", "initfail.dll"), 0, 1114), ("a.dll", 0x100, 87)]
    assert [ld.status for ld in tr.loads()][:2] == [0xC000007B, 0xC0000142]
    # the loader's notifications around the DllMain that failed: loaded, then unloaded, in that load
    from dlltrace.diagnosis.replay import init_failed_module

    init = tr.loads()[1]
    assert [(r_, p.lower()) for r_, p in init.notifications] == [
        ("loaded", w("bad", "initfail.dll").lower()),
        ("unloaded", w("bad", "initfail.dll").lower())]
    assert init_failed_module(init).lower() == w("bad", "initfail.dll").lower()
    assert not tr.loads()[0].notifications and not tr.loads()[2].notifications


def test_dll_directory_apis_each_recorded(shim_env, tmp_path):
    r, tr = traced(tmp_path,
                   "adddir", w("ad"), "load", "ad.dll", "0x400",    # found through AddDllDirectory
                   "loadw", "dd.dll",                                # standard order: user dirs not searched
                   "setdefault", "0x1000", "loadw", "dd.dll",        # now they are
                   "setdlldir", w("sd"), "loadw", "sd.dll",          # found through SetDllDirectoryW
                   "setdlldira", "-x-", "setdlldir", "-", "removedir")
    assert lines(r) == ["adddir ok", "load ok", "loadw err 126", "setdefault ok", "loadw ok", "setdlldir ok",
                        "loadw ok", "setdlldira ok", "setdlldir ok", "removedir ok"]
    loads = tr.loads()
    assert [(ld.name, ld.error) for ld in loads] == [("ad.dll", 0), ("dd.dll", 126), ("dd.dll", 0), ("sd.dll", 0)]
    assert ends(loads[0].path, "ad", "ad.dll") and ends(loads[2].path, "ad", "dd.dll")
    assert ends(loads[3].path, "sd", "sd.dll")
    (add,) = tr.of("adddir")
    assert add["path"] == w("ad") and add["ok"] and add["cookie"]
    (rm,) = tr.of("removedir")
    assert rm["cookie"] == add["cookie"] and rm["ok"]
    (sd,) = tr.of("setdefault")
    assert (sd["flags"], sd["ok"]) == (0x1000, True)
    # SetDllDirectoryA is one event (not also the W call it may make), NULL is null
    assert [(e["api"], e["path"]) for e in tr.of("setdlldir")] == [
        ("SetDllDirectoryW", w("sd")), ("SetDllDirectoryA", "-x-"), ("SetDllDirectoryW", None)]
    # order in the file is the order of the calls
    kinds = [e["ev"] for e in tr.events if e["ev"] in ("adddir", "setdefault", "setdlldir", "removedir", "load_begin")]
    assert kinds == ["adddir", "load_begin", "load_begin", "setdefault", "load_begin", "setdlldir", "load_begin",
                     "setdlldir", "setdlldir", "removedir"]


def test_getprocaddress_pointer_and_load_inside_dllmain(shim_env, tmp_path):
    r, tr = traced(tmp_path, "loadgpa", w("lib", "a.dll"), "0", "loada", w("ml", "mainload.dll"))
    assert lines(r) == ["loadgpa ok", "loada ok"]
    gpa, outer, nested = tr.loads()
    assert (gpa.api, gpa.name, gpa.error, gpa.parent) == ("LoadLibraryExW", w("lib", "a.dll"), 0, None)
    assert gpa.caller.lower().endswith("loadhost.exe") and ends(gpa.path, "lib", "a.dll")
    # LoadLibraryA -> LoadLibraryExA -> LoadLibraryExW -> LdrLoadDll is ONE load, recorded as LoadLibraryA
    assert (outer.api, outer.depth, outer.parent) == ("LoadLibraryA", 0, None)
    assert (nested.api, nested.name, nested.parent, nested.depth) == ("LoadLibraryW", w("ml", "nested.dll"), outer.seq, 1)
    assert nested.caller.lower().endswith("mainload.dll")
    assert outer.children == [nested] and nested.ok and outer.ok
    # nested.dll's probe belongs to the nested load, mainload.dll's to the outer one
    assert any(ends(p.win_path, "ml", "nested.dll") for p in nested.probes)
    assert not any(ends(p.win_path, "ml", "nested.dll") for p in outer.probes)
    assert any(ends(p.win_path, "ml", "mainload.dll") for p in outer.probes)
    # the events nest in time: outer begin < nested begin < nested end < outer end
    assert outer.seq < nested.seq < nested.end["seq"] < outer.end["seq"]


def test_events_written_while_freelibrary_is_in_flight(shim_env, tmp_path):
    # mainload.dll's DllMain loads and frees nested.dll while the host's FreeLibrary of it runs:
    # those lines are written while the `free` line is still open, and each must stay whole
    r, tr = traced(tmp_path, "loadw", w("ml", "mainload.dll"), "free")
    assert lines(r) == ["loadw ok", "free ok"]
    assert tr.warnings == []  # no garbled line
    frees = list(tr.of("free"))
    assert [(ends(f["path"], "ml", "nested.dll"), f["ok"]) for f in frees] == [(True, True), (False, True)]
    assert ends(frees[1]["path"], "ml", "mainload.dll")
    inner = tr.loads()[-1]  # the load made by DllMain during the FreeLibrary
    assert (inner.api, inner.parent, inner.ok) == ("LoadLibraryW", None, True) and ends(inner.name, "ml", "nested.dll")
    assert inner.caller.lower().endswith("mainload.dll")
    # the outer free's seq was taken when its line was opened, before the call; its line is written last
    assert frees[1]["seq"] < inner.seq < frees[0]["seq"]


def test_eight_threads_two_hundred_loads_each(shim_env, tmp_path):
    r, tr = traced(tmp_path, "threads", "8", "200", w("lib", "a.dll"), w("lib", "missing.dll"))
    assert lines(r) == ["threads fails 800"]
    assert tr.warnings == []  # no garbled line
    loads = tr.loads()
    assert len(loads) == 1600 and all(ld.finished for ld in loads)
    assert Counter(ld.error for ld in loads) == {0: 800, 126: 800}
    assert len({ld.tid for ld in loads}) == 8
    assert Counter(ld.tid for ld in loads) == {tid: 200 for tid in {ld.tid for ld in loads}}
    assert len(list(tr.of("free"))) == 800
    seqs = [e["seq"] for e in tr.events if e["pid"] == tr.pids[0]]
    assert len(seqs) == len(set(seqs))  # every event present once
    for ld in loads:  # every probe is attributed to a load on its own thread
        assert all(p.tid == ld.tid for p in ld.probes)
        if ld.error == 126:
            assert any(ends(p.win_path, "lib", "missing.dll") for p in ld.probes)


def test_non_ascii_and_long_paths_round_trip(shim_env, tmp_path):
    uni = w(*NON_ASCII_DIR, "a.dll")
    long = w(*LONG_DIR, "a.dll")
    assert len(long) > 260
    r, tr = traced(tmp_path, "load", uni, "0", "load", long, "0")
    assert lines(r) == ["load ok", "load ok"]
    a, b = tr.loads()
    assert a.name == uni and a.path.lower() == uni.lower()
    assert b.name == long and b.path.lower() == long.lower()
    assert any(p.win_path == uni for p in a.probes)
    assert "用户\\\\张三".encode() in (tmp_path / "t.jsonl").read_bytes()  # raw UTF-8 in the JSON, not \\u escapes


def test_crash_after_failed_load_keeps_the_trace(shim_env, tmp_path):
    r, tr = traced(tmp_path, "load", w("lib", "missing.dll"), "0", "crash")
    assert lines(r)[:2] == ["load err 126", "crash"]
    (load,) = tr.loads()
    assert load.error == 126 and load.probes
    assert tr.exit_code(tr.pids[0]) == 0xC0000005
    # the launcher exits with the child's status; wine64 hands its low 8 bits to Linux. (Not compared
    # with an untraced run: Wine's own exit status for a crashed program varies while winedbg starts.)
    assert r.returncode == 0xC0000005 & 0xFF


def test_api_set_schema_recorded_once_per_process(shim_env, tmp_path):
    """The shim writes the process's API-set schema (PEB ApiSetMap) right after env; the replay
    resolves API sets with it. The built-in table (data/apisets-builtin.json) is compared with it."""
    from dlltrace.apisets import builtin_document, schema_from_sets
    from dlltrace.diagnosis.replay import recorded_world

    r, tr = traced(tmp_path, "loadw", "api-ms-win-crt-string-l1-1-0.dll", "loadw", "API-MS-WIN-CRT-STRING-L1-1-9.DLL")
    assert lines(r) == ["loadw ok", "loadw ok"]
    (pid,) = tr.pids
    (ev,) = list(tr.of("apisets", pid=pid))
    kinds = [e["ev"] for e in tr.events if e.get("pid") == pid]
    assert kinds.index("apisets") == kinds.index("env") + 1
    assert ev["version"] == 6
    sets = tr.api_sets(pid)
    assert sets["api-ms-win-crt-string-l1-1-0"] == "ucrtbase.dll"
    assert sum(1 for v in sets.values() if v == "") >= 1  # Wine 8.0 has contracts with no host
    # the built-in table (Windows 11 22H2) against the schema a real loader uses: Wine holds no
    # contract the table lacks but 3, and the UCRT family, which every MSVC-built DLL imports, agrees
    builtin = schema_from_sets(builtin_document()["sets"], "builtin")
    wine = schema_from_sets(sets, "trace")
    assert len([k for k in wine.contracts if k not in builtin.contracts]) <= 3
    crt = [k for k in wine.contracts if k.startswith("api-ms-win-crt-")]
    assert len(crt) >= 15 and all(builtin.contracts[k].host == wine.contracts[k].host == "ucrtbase.dll" for k in crt)
    # both loads resolve through the schema to ucrtbase.dll, with no file probe for the contract
    for ld in tr.loads(pid):
        assert ld.ok and ld.path.lower().endswith("\\ucrtbase.dll")
        assert not any("api-ms-win-crt" in (p.win_path or "").lower() for p in ld.probes)
    assert recorded_world(tr, pid).system.api_sets.source == "trace"


def shim_events(tr, pid) -> list[dict]:
    """The events the shim of process pid wrote (not the launcher's: it writes seq 0)."""
    return [e for e in tr.events if e.get("pid") == pid and e.get("by") != "launcher"]


def test_stats_line_last_with_nothing_lost(shim_env, tmp_path):
    r, tr = traced(tmp_path, "load", w("lib", "a.dll"), "0", "load", w("lib", "missing.dll"), "0")
    assert lines(r) == ["load ok", "load err 126"]
    (pid,) = tr.pids
    mine = shim_events(tr, pid)
    stats = mine[-1]
    assert stats["ev"] == "stats" and [e["ev"] for e in mine].count("stats") == 1
    assert (stats["lost"], stats["cut"]) == (0, 0)
    assert stats["written"] == len(mine) - 1  # every other line of this process's shim, all present
    assert sorted(e["seq"] for e in mine) == list(range(1, stats["seq"] + 1))
    schema_checked_lines(tmp_path / "t.jsonl")
    assert list(schema_validator().iter_errors({k: v for k, v in stats.items() if k != "lost"}))  # the schema knows it


def test_failed_writes_are_counted_as_lost(shim_env, tmp_path):
    # DLLTRACE_TEST_FAIL_WRITES=2: the two event writes after the start's own events really fail
    # (their ranges reserved, then written to a null handle): those are setdefault and adddir; the
    # load after them is whole
    r, tr = traced(tmp_path, "setdefault", "0x1000", "adddir", w("ad"), "load", w("lib", "a.dll"), "0",
                   DLLTRACE_TEST_FAIL_WRITES="2")
    assert lines(r) == ["setdefault ok", "adddir ok", "load ok"]
    # the two reserved ranges stay zero bytes, in front of the next line; the reader skips them
    raw = (tmp_path / "t.jsonl").read_bytes()
    holes = [ln for ln in raw.split(b"\n") if b"\0" in ln]
    assert len(holes) == 1 and holes[0].lstrip(b"\0").startswith(b'{"ev":"load_begin"')
    assert [x for x in tr.warnings if "bytes of unwritten lines skipped" in x] == tr.warnings and len(tr.warnings) == 1
    (pid,) = tr.pids
    mine = shim_events(tr, pid)
    stats = mine[-1]
    assert stats["ev"] == "stats" and (stats["lost"], stats["cut"]) == (2, 0)
    assert stats["written"] == len(mine) - 1
    apisets = next(e["seq"] for e in mine if e["ev"] == "apisets")
    present = {e["seq"] for e in mine}
    assert set(range(1, stats["seq"] + 1)) - present == {apisets + 1, apisets + 2}  # exactly the two lost lines
    assert not list(tr.of("setdefault")) and not list(tr.of("adddir"))
    (load,) = tr.loads()
    assert load.ok and load.finished


def test_api_start_while_other_threads_load_and_one_is_inside_a_prologue(shim_env, tmp_path):
    """The shim loaded late (LoadLibraryW + dlltrace_start, no launcher) while four threads loop in
    LoadLibraryExW, and a fifth is suspended 3 bytes into NtQueryAttributesFile (after its mov r10,rcx,
    inside the 8 bytes the hook replaces). The start freezes the other threads and moves that one into
    the trampoline: without that, it resumes in the middle of the new jmp and the process crashes (or
    the call goes wrong). Every load a worker starts after dlltrace_start returned is recorded whole."""
    out = tmp_path / "api.jsonl"
    m = 40
    r = winetools.run_wine([HOST, "apistart", winetools.to_windows(SHIM), winetools.to_windows(out), "4", str(m),
                            w("lib", "a.dll"), w("lib", "missing.dll")], extra_env={"LC_ALL": "C.UTF-8"})
    out_lines = lines(r)
    assert r.returncode == 0, (out_lines, r.stderr[-2000:])
    assert out_lines[:2] == ["apistart start 0", "apistart park status 0x00000000"]
    workers = [int(x.split()[2]) for x in out_lines[2:]]
    assert len(workers) == 4 and out_lines[2:] == [f"apistart worker {t} after {m}" for t in workers]
    tr = read_trace(out)
    assert tr.warnings == []
    assert tr.header.tool.startswith("dlltrace-shim")  # an empty file: the shim wrote the header
    (pid,) = tr.pids
    proc = tr.process(pid)
    assert proc["via"] == "loadhost" and {"LoadLibraryExW", "NtQueryAttributesFile"} <= set(proc["hooks"])
    mine = shim_events(tr, pid)
    kinds = [e["ev"] for e in mine]
    assert kinds[:3] == ["process", "env", "apisets"]  # nothing recorded before the start was done
    assert kinds[-1] == "stats" and mine[-1]["lost"] == 0
    for tid in workers:
        loads = [ld for ld in tr.loads(pid) if ld.tid == tid]
        assert len(loads) >= m and all(ld.finished for ld in loads)
        # a contiguous run of the worker's alternating calls: none lost in between
        names = [ld.name for ld in loads]
        assert all(a != b for a, b in zip(names, names[1:]))
        assert all(ld.error == (0 if ld.name == w("lib", "a.dll") else 126) for ld in loads)
