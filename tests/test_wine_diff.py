"""Differential test: the simulator (Wine profile) against Wine's real loader.

Generated cases (tests/wine_layouts.py: mingw-built DLLs top -> mid -> leaf in folders, a
process state, one or two LoadLibrary calls) are run twice:
- under wine64 by fixtures/wine/loadhost.c, with WINEDEBUG=+file,+module: the error code,
  GetModuleFileNameW of the result, and every file the loader opened;
- through the simulator, as a scenario with `system.profile = "wine"` (docs/wine-profile.md).
They must agree on success/failure, the Win32 error, the module chosen and the ordered list
of files probed for the case's own DLL names (system DLLs are ignored, except the host of an
API set a case's leaf imports through, ucrtbase.dll). The scenario's `system.api_sets` is
Wine's own API-set schema, read once per session from a `dlltrace run --wine` trace
(fixture `api_sets`).

In CI (CI=true) a missing wine64/mingw fails instead of skipping (tests/winetools.require).
Environment: DLLTRACE_WINE_SEED (default 20240611), DLLTRACE_WINE_CASES (default 300),
DLLTRACE_WINE_JOBS (parallel wine processes, default 4), DLLTRACE_WINE_KEEP=1 keeps the
case folders on the prefix's C: drive for inspection.
"""

from __future__ import annotations

import os
import secrets
import shutil
import string

import pytest

import winetools
import wine_diffkit as kit
import wine_layouts as lay

from dlltrace import winpath

pytestmark = pytest.mark.wine

SEED = int(os.environ.get("DLLTRACE_WINE_SEED", "20240611"))
N_CASES = int(os.environ.get("DLLTRACE_WINE_CASES", "300"))
MIN_CASES = 200
JOBS = int(os.environ.get("DLLTRACE_WINE_JOBS", "4"))
NONCE = "".join(secrets.choice(string.ascii_lowercase) for _ in range(3))
CASES = lay.generate(SEED, N_CASES, NONCE)
BASE_UNIX = "dtw"  # C:\dtw on the prefix's drive_c


# ----------------------------------------------------------------------------- Wine side
@pytest.fixture(scope="session")
def pool(wine_prefix):
    winetools.require("wine", "mingw64", "mingw32")
    built = kit.build_pool()
    base = winetools.drive_c() / BASE_UNIX
    kit.remove_stale_case_dirs(base, keep=NONCE)
    yield built
    if not os.environ.get("DLLTRACE_WINE_KEEP"):
        shutil.rmtree(base / NONCE, ignore_errors=True)


@pytest.fixture(scope="session")
def api_sets(pool, tmp_path_factory):
    """Wine's API-set schema (contract -> host, "" = none), once per session: the `apisets` event
    of a `dlltrace run --wine` trace of loadhost.exe (the shim reads PEB->ApiSetMap)."""
    from test_shim import build_shim

    build_shim()
    return kit.wine_api_sets(pool, tmp_path_factory.mktemp("apisets"))


@pytest.fixture(scope="session")
def wine_runs(pool):
    """Run every generated case under wine64 (each case its own process), once per session."""
    return kit.run_cases(CASES, pool, JOBS)


# ----------------------------------------------------------------------------- comparing
def _ours(case, paths) -> list:
    names = case.dll_names()
    return [winpath.key(p) for p in paths if winpath.basename(p).lower() in names]


def compare(case, run, results) -> list:
    """The disagreements between Wine's run and the simulator's results: (op index or None for
    a harness problem, readable text)."""
    out = []
    if not run.complete or len(run.ops) != len(case.ops):
        return [(None, f"harness: loadhost did not finish (rc={run.returncode}, {len(run.ops)}/"
                f"{len(case.ops)} ops)\n{run.stderr_tail}")]
    calls = [i for i, op in enumerate(case.ops) if op.call is not None]
    if len(results) != len(calls):
        return [(None, f"simulator returned {len(results)} results for {len(calls)} calls")]
    by_op = dict(zip(calls, results))
    for i, op in enumerate(case.ops):
        w = run.ops[i]
        if op.call is None:  # process state: Wine must have accepted it, or the case is wrong
            if not w.ok:
                out.append((None, f"harness: state op {op.kind} {op.args} failed under Wine (error {w.error})"))
            continue
        r = by_op[i]
        label = f"op {i} {op.kind} {' '.join(op.args)}"
        if w.error != r.error:
            out.append((i, f"{label}: error: wine {w.error}, model {r.error}"))
        if op.kind in ("load", "loadw"):
            wm = winpath.key(w.path) if w.path else None
            mm = winpath.key(r.module_path) if r.module_path else None
            if wm != mm:
                out.append((i, f"{label}: module: wine {w.path}, model {r.module_path}"))
            wp = _ours(case, run.logs[i].opens)
            mp = _ours(case, r.probes)
            if wp != mp:
                out.append((i, f"{label}: probes differ\n    wine : {wp}\n    model: {mp}"))
    return out


def _explain(case, run, results) -> str:
    lines = [case.describe(), "  wine search paths:"]
    for i, lg in enumerate(run.logs):
        for name, sp in lg.searches:
            if winpath.basename(name).lower() in case.dll_names() or name.lower().endswith(
                    tuple(n[:-4] for n in case.dll_names())):
                lines.append(f"    op {i}: {name} in {sp}")
    if results is not None:
        for r in results:
            if r.tree is not None:
                for node in r.tree.walk():
                    if node.search:
                        lines.append(f"  model search for {node.name}: "
                                     + "; ".join(f"{s.folder} [{s.rule}]" for s in node.search))
    return "\n".join(lines)


def simulate(case, api_sets):
    from dlltrace.diagnosis.scenario import run_scenario, scenario_from_dict

    return run_scenario(scenario_from_dict(case.scenario(api_sets), where=case.ident))


def summary_line(outcomes: dict, runs: dict) -> str:
    """outcomes: ident -> "agree" | "disagree" (a harness problem is a disagreement) for the cases
    whose test ran; runs: the Wine runs of the generated cases (WineRun.repeats)."""
    n = len(outcomes)
    agree = sum(1 for v in outcomes.values() if v == "agree")
    repeated = sum(r.repeats for r in runs.values())
    return (f"wine differential (seed {SEED}): {len(CASES)} cases generated, {n} run, {agree} agree, "
            f"{n - agree} disagree; {repeated} wine runs repeated")


@pytest.fixture(scope="session")
def outcomes(summary, wine_runs) -> dict:
    """What each case's test found, for the summary line; the line is made when the run ends, from
    the cases that ran (any order, any -k subset)."""
    found: dict = {}
    summary["wine differential"] = lambda: summary_line(found, wine_runs) if found else ""
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.ident for c in CASES])
def test_wine_agrees_with_model(case, wine_runs, api_sets, outcomes):
    run = wine_runs[case.ident]
    outcomes[case.ident] = "disagree"  # until it is shown to agree (a harness problem included)
    results = simulate(case, api_sets)
    diffs = compare(case, run, results)
    harness = [t for i, t in diffs if i is None]
    assert not harness, "\n".join(harness) + "\n" + _explain(case, run, results)
    if diffs:
        pytest.fail("Wine and the model disagree:\n" + "\n".join(t for _, t in diffs) + "\n" + _explain(case, run, results))
    outcomes[case.ident] = "agree"


def test_enough_cases_generated():
    assert len(CASES) >= MIN_CASES, f"only {len(CASES)} cases (DLLTRACE_WINE_CASES); need {MIN_CASES}"


def test_summary_line_counts_the_cases_that_ran():
    runs = {"a": kit.WineRun([], [], True, 0, "", repeats=2), "b": kit.WineRun([], [], True, 0, "")}
    assert summary_line({"x": "agree", "y": "disagree", "z": "agree"}, runs) == (
        f"wine differential (seed {SEED}): {len(CASES)} cases generated, 3 run, 2 agree, 1 disagree; "
        "2 wine runs repeated")


# ----------------------------------------------------------------------------- the harness itself
def test_generator_is_deterministic_and_covers_the_shapes():
    again = lay.generate(SEED, N_CASES, NONCE)
    schema = {"api-ms-win-crt-string-l1-1-0": "ucrtbase.dll"}
    assert [c.scenario(schema) for c in again] == [c.scenario(schema) for c in CASES]
    assert all(c.scenario(schema)["system"]["api_sets"] == schema for c in CASES[:3])
    shapes = {c.shape for c in CASES}
    assert shapes == set(lay.SHAPES), f"missing shapes: {set(lay.SHAPES) - shapes}"
    main_flags = {int(c.ops[-1].args[1], 16) for c in CASES if c.ops[-1].kind == "load"}
    for f in (0, 0x8, 0x100, 0x200, 0x400, 0x800, 0x1000, 0x1100, 0x100 | 0x800, 0x8 | 0x1000):
        assert f in main_flags, hex(f)
    kinds = {op.kind for c in CASES for op in c.ops}
    assert {"adddir", "rmdir", "setdlldir", "setdlldir-empty", "setdefault", "load", "loadw", "free"} <= kinds
    loads = [op for c in CASES for op in c.ops if op.kind in ("load", "loadw")]
    assert any("\\" in op.args[0] and not winpath.is_absolute(op.args[0]) for op in loads)  # sub\x.dll
    all_flags = {int(op.args[1], 16) for op in loads if op.kind == "load"}
    assert {0x1, 0x2} <= all_flags, sorted(all_flags)
    assert {(r, v) for c in CASES for _, r, v in c.files if r == "w"} >= {("w", "ok"), ("w", "rev")}
    assert any(c.state for c in CASES) and any(
        op.call and op.call["op"] == "AddDllDirectory" for c in CASES for op in c.ops)
    placed = {p.rsplit("\\", 1)[0].lower() for c in CASES for p, _, _ in c.files}
    assert lay.SYS32.lower() in placed and lay.WINDIR.lower() in placed
    # API-set imports: every variant, in about API_RATE of the cases, spelled several ways; the
    # file named like an absent API set placed (also in System32) and not placed
    api_cases = [c for c in CASES if c.api]
    assert {c.api for c in api_cases} == set(kit.API_VARIANTS)
    assert 0.1 * len(CASES) <= len(api_cases) <= 0.3 * len(CASES), len(api_cases)
    assert sum(any(r == "l" and v == c.api for _, r, v in c.files) for c in api_cases) >= 0.7 * len(api_cases)
    assert not any(v in kit.API_VARIANTS for c in CASES if not c.api for _, _, v in c.files)
    spelled = [(c.api, n) for c in api_cases for n in c.api_names.values()]
    assert any(n != n.lower() for _, n in spelled) and any(not n.endswith("-0") for _, n in spelled)
    assert any(v == "api" and "-l1-2-" in n.lower() for v, n in spelled)
    absent = [c for c in api_cases if c.api == "apiabs"]
    with_file = [c for c in absent if any(r == "a" for _, r, _ in c.files)]
    assert with_file and len(with_file) < len(absent)
    assert any(p.lower().startswith(lay.SYS32.lower() + "\\") for c in with_file for p, r, _ in c.files if r == "a")
    assert any(op.kind == "loadw" and op.args[0].lower().startswith(("api-", "ext-")) for c in api_cases for op in c.ops)
    # the host of the hosted contract is compared (its probes), also for a direct load of a contract
    assert all("ucrtbase.dll" in c.dll_names() for c in api_cases)
    assert all({n.lower() + ".dll" for n in c.api_names.values()} <= c.dll_names() for c in api_cases)
    assert "ucrtbase.dll" in MINIMAL["rule_api_set_host_search-direct-load-from-system32"][0].dll_names()
    assert "ucrtbase.dll" not in CASES[[c.api for c in CASES].index(None)].dll_names()
    # names are unique per case and have the placeholder's length
    all_names = [n for c in CASES for n in c.names.values()]
    assert len(set(all_names)) == len(all_names)
    assert all(len(n) == len(kit.PLACEHOLDER["t"]) for n in all_names)


def test_debug_log_parser():
    log = "\n".join([
        '0024:trace:file:NtCreateFile handle=0x21fb38 access=80100080 name=L"\\\\??\\\\C:\\\\dlltrace-marker-0" objattr=00000040',
        '0024:trace:module:load_dll looking for L"x.dll" in L"C:\\\\a;C:\\\\windows\\\\system32;."',
        '0024:trace:file:NtCreateFile handle=0x21f788 access=80100000 name=L"\\\\??\\\\C:\\\\a\\\\x.dll" objattr=00000040',
        '0024:trace:file:NtCreateFile handle=0x21f788 access=80100000 name=L"\\\\??\\\\C:\\\\windows\\\\system32\\\\x.dll" objattr=00000040',
        '0024:trace:file:NtCreateFile handle=0x21fb38 access=80100080 name=L"\\\\??\\\\C:\\\\dlltrace-marker-1" objattr=00000040',
        '0024:trace:file:NtCreateFile handle=0x21f788 access=80100000 name=L"\\\\??\\\\Z:\\\\tmp\\\\caf\\xe9.dll" objattr=00000040',
    ])
    logs = kit.parse_debug_log(log, 2)
    assert logs[0].opens == ["C:\\a\\x.dll", "C:\\windows\\system32\\x.dll"]
    assert logs[0].searches == [("x.dll", "C:\\a;C:\\windows\\system32;.")]
    assert logs[1].opens == ["Z:\\tmp\\caf\u00e9.dll"]
    ops, end = kit.parse_host_output("R 0 cd ok=1 err=0 path=-\r\nR 1 load ok=0 err=126 path=-\r\nEND\r\n")
    assert end and [(o.op, o.ok, o.error, o.path) for o in ops] == [("cd", True, 0, None),
                                                                     ("load", False, 126, None)]


def test_fixture_dlls_patch_to_unique_names(pool):
    import pefile

    names = lay.case_names("abc", 7)
    for (role, variant), path in pool.dll.items():
        data = path.read_bytes()
        assert kit.placeholder_count(data, role) >= 1, (role, variant)
        data = kit.patch_names(data, names)
        spelled = {}
        if variant in kit.API_VARIANTS:  # re-spelled as a case may: upper case, last number 7
            spelled = {variant: kit.api_import(variant, names).upper()[:-1] + "7"}
            data = kit.respell_import(data, kit.api_import(variant, names), spelled[variant])
        pe = pefile.PE(data=data)
        assert pe.DIRECTORY_ENTRY_EXPORT.name.decode().lower() == kit.dll_base(role, names) + ".dll"
        imported = [e.dll.decode() for e in pe.DIRECTORY_ENTRY_IMPORT]
        want = [n + ".dll" for n in spelled.values()] + list(kit.SYSTEM_IMPORTS)
        want += [names[c] + ".dll" for c in kit.imports_of(role, variant)]
        # the same DLLs in the same order as the scenario's file entry says (the model's import order)
        assert [x.lower() for x in imported] == [x.lower() for x in want], imported
        if spelled:  # exactly as spelled, importing the function the entry names
            assert imported[0] == want[0], imported
            assert [i.name.decode() for i in pe.DIRECTORY_ENTRY_IMPORT[0].imports] == [kit.API_VARIANTS[variant][1]]
        entry = lay.file_entry("C:\\x.dll", role, variant, names, spelled)
        entry_dlls = [i if isinstance(i, str) else i["dll"] for i in entry["imports"]]
        assert [x.lower() for x in entry_dlls] == [x.lower() for x in want]
        assert entry_dlls[:len(spelled)] == want[:len(spelled)]
        machine = pe.FILE_HEADER.Machine
        assert machine == (0x14C if variant == "x86" else 0x8664)


# Hand-written anchor cases: the harness against LOADER.md facts, with no simulator involved,
# so that a broken harness cannot pass as agreement.
def _anchor(ident, index, files, ops, pool):
    names = lay.case_names(NONCE, index)
    root = f"C:\\{BASE_UNIX}\\{NONCE}\\anchor-{ident}"
    folders = {"app": root + "\\app", **{k: f"{root}\\{k}" for k in lay.PLAIN}}
    case = lay.Case(ident=ident, shape="anchor", root=root, names=names, folders=folders,
                    files=[(f"{folders[f]}\\{names[r]}.dll", r, v) for f, r, v in files],
                    cwd=folders["app"], path=[],
                    ops=[lay.HostOp(k, tuple(a.format(**folders, **names) for a in args)) for k, *args in ops])
    outside = kit.materialize(case, pool, winetools.drive_c())
    try:
        return case, kit.run_host(case.exe, case.ops)
    finally:
        kit.remove_files(outside)


def test_anchor_wine_facts(pool):
    """Facts of LOADER.md §2-§5, §7 as Wine shows them through this harness."""
    # PATH is searched by the standard order, not with DEFAULT_DIRS; the chain resolves.
    case, run = _anchor("path", 9001, [("f1", "t", "ok"), ("f1", "m", "ok"), ("f2", "l", "ok")],
                        [("cd", "{app}"), ("path", "{f2}"), ("load", "{f1}\\{t}.dll", "0x8"),
                         ("load", "{f1}\\{m}.dll", "0x1100")], pool)
    assert run.complete, run.stderr_tail
    assert [(o.ok, o.error) for o in run.ops] == [(True, 0), (True, 0), (True, 0), (True, 0)]
    assert winpath.key(run.ops[2].path) == winpath.key(case.files[0][0])
    leaf = case.names["l"].lower() + ".dll"
    opened = [winpath.dirname(p).lower() for p in run.logs[2].opens if p.lower().endswith(leaf)]
    f1, f2 = case.folders["f1"].lower(), case.folders["f2"].lower()
    assert opened == [f1, lay.SYS32.lower(), lay.SYS32.lower()[:-2], lay.WINDIR.lower(),
                      case.folders["app"].lower(), f2], opened
    # the second load reused everything: no probe for the leaf at all
    assert not [p for p in run.logs[3].opens if p.lower().endswith(leaf)]

    # 126 (leaf only on PATH with 0x1100), 193 (only a wrong-machine leaf), 1114, 87
    case, run = _anchor("errs", 9002, [("f1", "m", "ok"), ("f2", "l", "ok"), ("f3", "m", "x86"),
                                 ("f4", "m", "ok"), ("f4", "l", "initfail")],
                        [("cd", "{app}"), ("path", "{f2}"), ("load", "{f1}\\{m}.dll", "0x1100"),
                         ("load", "{f3}\\{m}.dll", "0"), ("load", "{f4}\\{m}.dll", "0x1100"),
                         ("load", "{f1}\\{m}.dll", "0x1008"),
                         ("load", "{m}.dll", "0x100")], pool)
    assert run.complete, run.stderr_tail
    assert [o.error for o in run.ops] == [0, 0, 126, 193, 1114, 87, 87]


# ----------------------------------------------------------------------------- minimal cases
def _call_for(kind, args):
    if kind == "adddir":
        return {"op": "AddDllDirectory", "path": args[0]}
    if kind == "rmdir":
        return {"op": "RemoveDllDirectory", "path": args[0]}
    if kind == "free":
        return {"op": "FreeLibrary", "name": args[0]}
    if kind == "setdlldir":
        return {"op": "SetDllDirectory", "path": args[0]}
    if kind == "setdlldir-empty":
        return {"op": "SetDllDirectory", "path": ""}
    if kind == "setdlldir-null":
        return {"op": "SetDllDirectory"}
    if kind == "setdefault":
        return {"op": "SetDefaultDllDirectories", "flags": int(args[0], 16)}
    if kind == "load":
        return {"op": "LoadLibraryExW", "name": args[0], "flags": int(args[1], 16)}
    if kind == "loadw":
        return {"op": "LoadLibraryW", "name": args[0]}
    return None  # cd, path: process state


def manual_case(ident, index, files, cwd, path, ops, api=None):
    """A hand-written case: files [(folder key, role, variant[, file base name])], cwd a folder
    key, path a list of folder keys, ops [(kind, *args)] with {f1}/{t}-style placeholders. A
    folder key may name a subfolder of a case folder (`f1\\sub`). api: {API variant: the name
    the leaf imports (no .dll; {a} placeholder)}, default as built."""
    names = lay.case_names(NONCE, index)
    root = f"C:\\{BASE_UNIX}\\{NONCE}\\m{index:04d}"
    folders = {"app": root + "\\app", **{k: f"{root}\\{k}" for k in lay.PLAIN}}
    for f, *_ in files:
        if "\\" in f:
            folders[f] = folders[f.split("\\")[0]] + f[f.index("\\"):]
    fill = {**folders, **names}
    host_ops = [lay.HostOp("cd", (folders[cwd],)),
                lay.HostOp("path", (";".join(folders[k] for k in path) or "-",))]
    for kind, *args in ops:
        args = tuple(a.format(**fill) for a in args)
        host_ops.append(lay.HostOp(kind, args, _call_for(kind, args)))
    api_names = {v: n.format(**names) for v, n in (api or {}).items()}
    for _, _, v, *_ in files:
        if v in kit.API_VARIANTS and v not in api_names:
            api_names[v] = kit.api_import(v, names)
    return lay.Case(ident=ident, shape="minimal", root=root, names=names, folders=folders,
                    files=[(f"{folders[f]}\\{(base or [kit.dll_base(r, names)])[0].format(**names)}.dll", r, v)
                           for f, r, v, *base in files],
                    cwd=folders[cwd], path=[folders[k] for k in path], ops=host_ops, api_names=api_names)


# The differences this test once found between Wine and the model, each now modelled
# (docs/wine-profile.md), as minimal cases: name (see MINIMAL) -> (case, what Wine does: [(op
# index, error, folder key of the module or None)][, {op index: (role, folders it opened)}]).
# Wine's side is asserted strictly (a different Wine would show here first), then the model must
# agree exactly.
MODELLED = {
    "rule_standard_order": (
        # the leaf is only in the current folder; SetDllDirectoryW("") then LoadLibraryW(bare)
        manual_case("empty-dll-dir", 9101, [("f1", "l", "ok")], "f1", [],
                    [("setdlldir-empty",), ("loadw", "{l}.dll")]),
        [(2, 0, None), (3, 0, "f1")]),
    "rule_import_failure_error": (
        # mid loaded by full path imports the leaf, found only as an x86 build next to it
        manual_case("import-x86", 9102, [("f1", "m", "ok"), ("f1", "l", "x86")], "app", [],
                    [("load", "{f1}\\{m}.dll", "0x8")]),
        [(2, 126, None)]),
    "rule_set_default_dirs_valid": (
        manual_case("default-0x1100", 9103, [], "app", [], [("setdefault", "0x1100")]),
        [(2, 87, None)]),
    "rule_effective_search_flags": (
        # SetDefaultDllDirectories(SYSTEM32); mid and leaf side by side in f1; 0x8 by full
        # path loads (the leaf is found in the DLL's folder), 0x8 with a bare name is 87
        manual_case("altered-default", 9104, [("f1", "m", "ok"), ("f1", "l", "ok")], "app", [],
                    [("setdefault", "0x800"), ("load", "{f1}\\{m}.dll", "0x8"), ("load", "{m}.dll", "0x8")]),
        [(3, 0, "f1"), (4, 87, None)]),
    "free-library-unloads-dependencies": (
        # mid (importing the leaf) loaded from f1 and freed; the leaf is nowhere else
        manual_case("free-deps", 9105, [("f1", "m", "ok"), ("f1", "l", "ok")], "app", [],
                    [("load", "{f1}\\{m}.dll", "0x8"), ("free", "{m}.dll"), ("loadw", "{l}.dll")]),
        [(2, 0, "f1"), (3, 0, None), (4, 126, None)]),
    "rule_datafile_search_path": (
        # a data file only in an AddDllDirectory folder (0x1002) is not found, error 2; an x86
        # data file by full path is opened twice (the loader's search, then SearchPathW's file)
        manual_case("datafile", 9106, [("f1", "l", "ok"), ("f2", "l", "x86")], "app", [],
                    [("adddir", "{f1}"), ("load", "{l}.dll", "0x1002"), ("load", "{f2}\\{l}.dll", "0x2")]),
        [(3, 2, None), (4, 0, "f2")]),
    "rule_altered_relative_name": (
        # cwd f1; LoadLibraryExW("sub\\l.dll", 0x8): Wine searches `sub` (cwd-relative) first,
        # so it takes f1\sub\sub\l.dll, not f1\sub\l.dll (the current-folder entry)
        manual_case("altered-relative", 9107, [("f1\\sub", "l", "ok"), ("f1\\sub\\sub", "l", "ok")], "f1", [],
                    [("load", "sub\\{l}.dll", "0x8")]),
        [(2, 0, "f1\\sub\\sub")]),
    "wine-kept-dependency-not-initialized": (
        # two imports the leaf (DllMain FALSE, in f1) then the missing extra DLL: 126, the leaf
        # stays loaded uninitialized; LoadLibraryW(leaf) then runs its DllMain: 1114
        manual_case("kept-uninit", 9108, [("f1", "w", "ok"), ("f1", "l", "initfail")], "app", [],
                    [("load", "{f1}\\{w}.dll", "0x8"), ("loadw", "{l}.dll")]),
        [(2, 126, None), (3, 1114, None)]),
    "rule_failed_load_keeps_loaded_dependencies": (
        # two (rev) imports the extra DLL (loads) then the leaf (DllMain FALSE): 1114, and Wine
        # unloads the extra DLL too, so a bare load of it searches (and fails: f1 is not searched)
        manual_case("init-unload", 9109, [("f1", "w", "rev"), ("f1", "x", "ok"), ("f1", "l", "initfail")], "app", [],
                    [("load", "{f1}\\{w}.dll", "0x8"), ("loadw", "{x}.dll")]),
        [(2, 1114, None), (3, 126, None)]),
    "rule_loaded_candidate_not_opened": (
        # `sub\\l.dll` loaded from app\sub, then the same call again: Wine opens nothing (the
        # candidate's full name is a loaded module)
        manual_case("loaded-candidate", 9110, [("app\\sub", "l", "ok")], "app", [],
                    [("loadw", "sub\\{l}.dll"), ("loadw", "sub\\{l}.dll")]),
        [(2, 0, "app\\sub"), (3, 0, "app\\sub")], {3: ("l", [])}),
}


def _run_minimal(pool, api_sets, label, case, wine_facts, wine_probes):
    """Run a minimal case under Wine, assert what Wine did (errors, modules, files opened), and
    return the model's results and the differences between the two. wine_facts: [(op index,
    error, folder key or path of the module, or None)]; wine_probes: {op index: (role or file
    name, folders it opened) or a list of those}."""
    outside = kit.materialize(case, pool, winetools.drive_c())
    try:
        run = kit.run_host(case.exe, case.ops)
    finally:
        kit.remove_files(outside)
    assert run.complete, run.stderr_tail
    for i, err, folder in wine_facts:
        w = run.ops[i]
        assert w.error == err, (label, i, w)
        if folder is None:
            assert w.path is None, (label, i, w)
        else:
            assert w.path and winpath.key(winpath.dirname(w.path)) == winpath.key(
                case.folders.get(folder, folder)), (label, i, w)
    for i, specs in wine_probes.items():
        for role, folders in specs if isinstance(specs, list) else [specs]:
            got = _opened(case, run, i, role)
            assert got == _expected_folders(case, folders), (label, i, role, got)
    results = simulate(case, api_sets)
    return run, results, compare(case, run, results)


def _opened(case, run, i, role) -> list:
    """The folders in which op i opened the role's DLL (or the file `role` when it is a file
    name), in order: the key of case.folders, or for another folder its winpath.key."""
    by_folder = {winpath.key(v): k for k, v in case.folders.items()}
    name = (kit.dll_base(role, case.names) + ".dll" if role in case.names else role.format(**case.names)).lower()
    return [by_folder.get(winpath.key(winpath.dirname(p)), winpath.key(winpath.dirname(p)))
            for p in run.logs[i].opens if winpath.basename(p).lower() == name]


def _expected_folders(case, folders) -> list:
    """Folder keys as they are, and `{app}\\sub`-style templates as winpath.key of the path."""
    return [f if f in case.folders else winpath.key(f.format(**case.folders)) for f in folders]


# Hand-written cases for the behaviours the generator's newer shapes cover, where Wine and the
# model agree: Wine's side is asserted (results, and the probes that make the point), then the
# model must agree exactly.
AGREE = {
    "rule_user_dirs_most_recent_first": (
        # the removed folder (most recently added, so searched first) is no longer searched
        manual_case("rmdir", 9201, [("f1", "l", "ok"), ("f2", "l", "ok")], "app", [],
                    [("adddir", "{f1}"), ("adddir", "{f2}"), ("rmdir", "{f2}"), ("load", "{l}.dll", "0x1000")]),
        [(4, 0, None), (5, 0, "f1")], {5: ("l", ["app", "f1"])}),
    "relative-path-every-folder": (
        # `sub\l.dll` is appended to each folder of the standard order
        manual_case("relative", 9202, [("f2\\sub", "l", "ok")], "f1", ["f2"], [("loadw", "sub\\{l}.dll")]),
        [(2, 0, "f2\\sub")], {2: ("l", ["{app}\\sub", lay.SYS32 + "\\sub", lay.WINDIR + "\\system\\sub",
                                           lay.WINDIR + "\\sub", "{f1}\\sub", "f2\\sub"])}),
    "rule_imports_stop_at_first_failure": (
        # two (rev) imports the missing extra DLL first, then the leaf: the leaf is still probed
        # and loaded, and stays loaded: the retry and a bare load of the leaf do not probe for it
        manual_case("two-rev", 9203, [("f1", "w", "rev"), ("f1", "l", "ok")], "app", [],
                    [("load", "{f1}\\{w}.dll", "0x8"), ("load", "{f1}\\{w}.dll", "0x8"), ("loadw", "{l}.dll")]),
        [(2, 126, None), (3, 126, None), (4, 0, "f1")], {2: ("l", ["f1"]), 3: ("l", []), 4: ("l", [])}),
    "rule_dont_resolve_references": (
        # DONT_RESOLVE_DLL_REFERENCES: mid loads without its (missing) leaf and is listed, so a
        # normal load of it is answered by the loaded-module rule; the leaf is still missing
        manual_case("no-refs", 9204, [("f1", "m", "ok")], "app", [],
                    [("load", "{f1}\\{m}.dll", "0x1"), ("loadw", "{m}.dll"), ("loadw", "{l}.dll")]),
        [(2, 0, "f1"), (3, 0, "f1"), (4, 126, None)], {2: ("l", []), 3: ("m", [])}),
    "free-library-refcount": (
        # loaded twice, freed once: still loaded; freed again: the next load searches
        manual_case("free-count", 9205, [("f1", "l", "ok"), ("f2", "l", "ok")], "app", ["f2"],
                    [("load", "{f1}\\{l}.dll", "0"), ("load", "{f1}\\{l}.dll", "0"), ("free", "{l}.dll"),
                     ("loadw", "{l}.dll"), ("free", "{l}.dll"), ("free", "{l}.dll"), ("loadw", "{l}.dll")]),
        [(4, 0, None), (5, 0, "f1"), (6, 0, None), (7, 0, None), (8, 0, "f2")], {5: ("l", [])}),
}


# API-set imports (the leaf's API-set builds, wine_diffkit.API_VARIANTS), measured under Wine 8.0:
# a contract in the schema resolves to its host (searched like a DLL on the importer's path; the
# API-set name itself is never opened), matching case-insensitively and whatever the last version
# number; a contract with an empty host fails with 126 and opens nothing; a name in no schema
# (also api-ms-win-crt-string-l1-2-0: the schema has l1-1-x only) is an ordinary file name,
# searched on the path and matched exactly. Folder lists: cwd app, PATH as given.
_STD = ["f1", lay.SYS32, lay.WINDIR + "\\system", lay.WINDIR, "app"]  # 0x8 by full path from f1
CRT = "api-ms-win-crt-string-l1-1-0"
ABSENT = "api-ms-win-dt-{a}-l1-1-0"
LEGACY = "api-ms-win-deprecated-apis-legacy-l1-1-0"
API_SETS = {
    "rule_api_set_host": (
        # the import binds to ucrtbase.dll (probed in f1, then found in System32); a
        # LoadLibraryW of the contract name gives ucrtbase.dll, already loaded
        manual_case("api-hosted", 9301, [("f1", "l", "api")], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8"), ("loadw", CRT + ".dll")]),
        [(2, 0, "f1"), (3, 0, lay.SYS32)],
        {2: [(CRT + ".dll", []), ("ucrtbase.dll", ["f1", lay.SYS32])], 3: [(CRT + ".dll", []), ("ucrtbase.dll", [])]}),
    "rule_api_set_host_search-direct-load-from-system32": (
        # LoadLibraryW of the contract name itself: Wine opens <System32>\ucrtbase.dll and no
        # other folder (an import of the contract searches the host on the path, above)
        manual_case("api-direct", 9308, [], "app", [], [("loadw", CRT + ".dll")]),
        [(2, 0, lay.SYS32)], {2: [(CRT + ".dll", []), ("ucrtbase.dll", [lay.SYS32])]}),
    "rule_api_set_host_search-direct-load-ignores-search-path": (
        # SetDefaultDllDirectories(APPLICATION_DIR): the search path is the app folder alone,
        # and still LoadLibraryW of the contract loads <System32>\ucrtbase.dll
        manual_case("api-direct-default", 9310, [], "app", [], [("setdefault", "0x200"), ("loadw", CRT + ".dll")]),
        [(2, 0, None), (3, 0, lay.SYS32)], {3: [(CRT + ".dll", []), ("ucrtbase.dll", [lay.SYS32])]}),
    "api-set-host-released-with-its-importer": (
        # mid (imports the API-set leaf) loaded and freed: the leaf and its host ucrtbase.dll
        # are unloaded too, so loading the leaf again searches for ucrtbase.dll again
        manual_case("api-free", 9309, [("f1", "m", "ok"), ("f1", "l", "api")], "app", [],
                    [("load", "{f1}\\{m}.dll", "0x8"), ("free", "{m}.dll"), ("load", "{f1}\\{l}.dll", "0x8")]),
        [(2, 0, "f1"), (3, 0, None), (4, 0, "f1")],
        {2: ("ucrtbase.dll", ["f1", lay.SYS32]), 4: [("l", ["f1"]), ("ucrtbase.dll", ["f1", lay.SYS32])]}),
    "rule_api_set_match-case-and-last-number-ignored": (
        manual_case("api-spelled", 9302, [("f1", "l", "api")], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8")], api={"api": "API-MS-WIN-CRT-STRING-L1-1-7"}),
        [(2, 0, "f1")], {2: [("api-ms-win-crt-string-l1-1-7.dll", []), ("ucrtbase.dll", ["f1", lay.SYS32])]}),
    "rule_api_set_match-other-minor-version-is-a-file": (
        manual_case("api-minor", 9303, [("f1", "l", "api")], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8")], api={"api": "api-ms-win-crt-string-l1-2-0"}),
        [(2, 126, None)], {2: [("api-ms-win-crt-string-l1-2-0.dll", _STD), ("ucrtbase.dll", [])]}),
    "rule_api_set_match-not-in-schema-no-file": (
        manual_case("api-absent", 9304, [("f1", "l", "apiabs")], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8")]),
        [(2, 126, None)], {2: (ABSENT + ".dll", _STD)}),
    "rule_api_set_match-not-in-schema-file-on-path": (
        # found in f2 (PATH) after the standard folders; then bound by name, no probe
        manual_case("api-absent-file", 9305, [("f1", "l", "apiabs"), ("f2", "a", "ok")], "app", ["f2"],
                    [("load", "{f1}\\{l}.dll", "0x8"), ("loadw", ABSENT + ".dll")]),
        [(2, 0, "f1"), (3, 0, "f2")], {2: (ABSENT + ".dll", _STD + ["f2"]), 3: (ABSENT + ".dll", [])}),
    "rule_api_set_match-not-in-schema-exact-name": (
        # imported as ...-l1-1-3, the file is ...-l1-1-0: not the same file name
        manual_case("api-absent-exact", 9306, [("f1", "l", "apiabs"), ("f1", "a", "ok")], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8")], api={"apiabs": "api-ms-win-dt-{a}-l1-1-3"}),
        [(2, 126, None)], {2: [("api-ms-win-dt-{a}-l1-1-3.dll", _STD), (ABSENT + ".dll", [])]}),
    "rule_api_set_host-empty-host": (
        # a file named like the contract next to the leaf is not opened; nor by LoadLibraryW
        manual_case("api-nohost", 9307, [("f1", "l", "apinohost"), ("f1", "a", "ok", LEGACY)], "app", [],
                    [("load", "{f1}\\{l}.dll", "0x8"), ("loadw", LEGACY + ".dll")]),
        [(2, 126, None), (3, 126, None)], {2: (LEGACY + ".dll", []), 3: (LEGACY + ".dll", [])}),
}


# Named after the function of dlltrace's loader rules (loader/windows/rules.py) a case checks,
# `rule_x` or, when several cases check one rule, `rule_x-what`; a case no single rule decides
# keeps a descriptive name.
MINIMAL = {**{rule: (case, facts, *probes) if probes else (case, facts, {})
              for rule, (case, facts, *probes) in MODELLED.items()}, **AGREE, **API_SETS}


def test_minimal_cases_name_existing_rules():
    from dlltrace.loader.windows import rules

    named = [n for n in MINIMAL if n.startswith("rule_")]
    assert len(named) >= 15
    assert [n for n in named if not callable(getattr(rules, n.split("-")[0], None))] == []


def test_wine_api_set_schema(api_sets):
    """What the API-set cases rely on in Wine's schema (as dumped from a Wine process)."""
    assert len(api_sets) > 100
    assert api_sets[CRT] == "ucrtbase.dll"
    assert api_sets[LEGACY] == ""
    assert not [k for k in api_sets if k.lower().startswith(("api-ms-win-dt-", "api-ms-win-crt-string-l1-2"))]
    assert all(k == k.lower() and not k.endswith(".dll") for k in api_sets)


@pytest.mark.parametrize("name", list(MINIMAL))
def test_minimal_agrees(name, pool, api_sets):
    case, wine_facts, wine_probes = MINIMAL[name]
    run, results, diffs = _run_minimal(pool, api_sets, name, case, wine_facts, wine_probes)
    assert not diffs, "\n".join(t for _, t in diffs) + "\n" + _explain(case, run, results)
