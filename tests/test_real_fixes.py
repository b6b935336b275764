"""The first fix, applied for real (issue 9): for failing situations of the real-wheel corpus
(tests/test_real_corpus.py), the FIRST fix `dlltrace report --json` gives for the failure the
program hit (calls[i].fixes[0]) is made into a real change by its typed action (tests/realfixes.py:
an op before the load, a file copied, a real wheel installed, the load's flags or path changed;
never its text), the situation is run again under plain Wine, and Wine's own log must say that the
load which failed now succeeds (the host's result 0, no "not found", the DLL mapped from the file
the fix names). The fix must also say the model verified it (`verified: true`).

Also: every further fix the report marks verified is applied alone the same way and must work too;
and hand-written control fixes (CONTROLS) show the harness tells a working fix from one that cannot
work (AddDllDirectory for a plain LoadLibraryA, PATH for a 0x1100 load ...), whatever the model says.

The situations' first runs (layout, Wine, dlltrace run + report) are the corpus's own, shared in the
session (test_real_corpus.corpus_runs): only the fixed runs are extra, under plain Wine. The run
prints `real fixes: N situations, M loads succeed after the first fix under Wine` at the end.
"""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

import realfixes as rf
import realwheels as rw
import test_real_corpus as rc
import winetools


@dataclass(frozen=True)
class Pick:
    name: str  # a failing situation of test_real_corpus.SITUATIONS
    why: str  # what its first fix should do
    first: tuple = ()  # the first fix's action must be one of these (empty: any the harness applies)
    never: tuple = ()  # no fix offered for the call may have these actions (they cannot work for this load)


PICKS = [
    Pick("cuda_ext_not_searched", "cudart64_12.dll is in site-packages\\nvidia\\cuda_runtime\\bin, which 0x1100 "
         "does not search: add that folder (or preload the file)"),
    Pick("cuda_bin_on_path_0x1100", "the nvidia bin folder is on PATH, which 0x1100 never searches: add it with "
         "AddDllDirectory (or preload); putting it on PATH again does nothing", never=("path_prepend",)),
    Pick("x86_omp_only_copy_searched", "torch\\lib's libiomp5md.dll is 32-bit, the x64 one is only on PATH: "
         "make the x64 copy searched (Wine skips the other machine's image and goes on)"),
    Pick("default_dirs_without_dll_load_dir", "SetDefaultDllDirectories(DEFAULT_DIRS) and flags 0: torch\\lib "
         "is not searched for torch_cpu.dll's imports: add it (DEFAULT_DIRS has the user folders)"),
    Pick("dll_load_dir_with_bare_name", "DLL_LOAD_DIR with a bare name is 87: pass the full path",
         first=("flags", "change_flags")),
    Pick("torch_without_libiomp5md", "no libiomp5md.dll anywhere: pip install intel-openmp (the real wheel puts it "
         "in <prefix>\\Library\\bin), then make that folder searched"),
    Pick("torch_omp_in_library_bin", "intel-openmp's libiomp5md.dll is in <prefix>\\Library\\bin: add that folder"),
    Pick("cudart_loadlibrary_at_run_time", "a DLL's own LoadLibraryA(cudart64_12.dll), flags 0: only PATH (or a "
         "full-path preload, or SetDllDirectory) reaches the nvidia folder; AddDllDirectory is never searched by "
         "this load", first=("path_prepend", "preload_path", "set_dll_directory"), never=("add_dll_directory",)),
]
MIN_FIXED = 6  # issue 9: at least 6 situations whose first fix makes the load succeed under Wine


@dataclass
class FixRun:
    name: str
    problems: list = field(default_factory=list)  # why the first fix is not shown to work (empty: it works)
    call: dict | None = None  # the failing call (report JSON)
    fix: dict | None = None  # its first fix
    steps: list = field(default_factory=list)  # what was changed, in words
    argv: list = field(default_factory=list)  # the fixed run's argv
    loads: bool = False  # Wine loaded it after the fix
    seconds: float = 0.0

    @property
    def works(self) -> bool:
        return not self.problems


def _sit(name: str) -> rc.Situation:
    return next(s for s in rc.SITUATIONS if s.name == name)


def first_failure(report: dict) -> tuple[int, dict] | None:
    """The failure the program hit (report.failed, the first) and its call."""
    failed = report.get("failed") or []
    calls = report.get("calls") or []
    for i in failed:
        if 0 <= i < len(calls) and calls[i].get("error"):
            return i, calls[i]
    return None


def run_fix(pick: Pick, o: rc.Outcome, built: dict, base, work, given: dict | None = None, tag: str = "",
            nth: int = 0) -> FixRun:
    """The pick's situation run again under plain Wine with the first fix of the failure the program hit
    applied (nth: the report's nth fix instead; given: this fix, {R}/{SP}/{T} in its paths the
    situation's folders. The pick's checks of the report's first fix are made for the first only)."""
    t0 = time.monotonic()
    fr = FixRun(pick.name + tag)
    sit = _sit(pick.name)
    if o.harness or o.report is None or o.log is None:
        fr.problems.append("the situation's own run has harness problems: " + "; ".join(o.harness or ["no report"]))
        return fr
    hit = first_failure(o.report)
    if hit is None:
        fr.problems.append(f"the report names no failure the program hit (failed: {o.report.get('failed')})")
        return fr
    index, call = hit
    fr.call = call
    fixes = call.get("fixes") or []
    if not fixes:
        fr.problems.append(f"the failing call {index} ({call.get('op')} {call.get('name')}: {call.get('error')}, leaf "
                           f"{(call.get('leaf') or {}).get('name')} {(call.get('leaf') or {}).get('cause')}) has no fix")
        return fr
    if nth >= len(fixes):
        fr.problems.append(f"the failing call has {len(fixes)} fixes, no fix {nth}")
        return fr
    fix = fr.fix = fixes[nth] if given is None else _given(given, o.root_win)
    if given is not None or nth:
        pass
    elif pick.first and fix.get("action") not in pick.first:
        fr.problems.append(f"the first fix is {fix.get('action')} ({fix.get('text')!r}); for this load it must be one "
                           f"of {list(pick.first)}")
    bad = [f"{f.get('action')} ({f.get('text')!r})" for f in fixes if f.get("action") in pick.never]
    if bad and given is None and not nth:
        fr.problems.append(f"fixes offered that cannot work for this load: {bad}")
    if fix.get("verified") is not True and given is None:  # (the nth fixes tried are the verified ones)
        fr.problems.append(f"the first fix is not verified by the model (verified: {fix.get('verified')!r}, "
                           f"outcome: {fix.get('outcome')!r})")
    # the situation again, in a folder of its own, with the fix applied
    ops = [op[1:] for op in _split(o.argv)]
    folder = base / f"fix-{pick.name}{tag}"
    try:
        rc.lay_out(sit, folder, built)
        layout = rf.Layout(o.root_win, winetools.to_windows(folder), folder)
        target = rf.failing_op(o.report, index, ops, o.log)
        applied = rf.apply_fix(fix, [[layout.remap(a) for a in op] for op in ops], target, layout, call)
        fr.steps = applied.steps
        argv, at = rf.flatten(layout.root_win + "\\loadhost.exe", applied.ops)
        fr.argv = argv
        r = rc.run_plain_wine(argv)
        work.mkdir(parents=True, exist_ok=True)
        (work / "wine-fixed.log").write_text(r.stderr)
        log = rw.parse_wine_log(r.stderr)
        leaf = rf.base((call.get("leaf") or {}).get("name"))
        still = rf.check_fixed(log, at[applied.target], call, leaf, applied.expect)
        fr.loads = not still
        if still:
            fr.problems.append(f"after the fix ({fix.get('action')}: {fix.get('text')!r}), by Wine's log: "
                               + "; ".join(still) + f" (host printed {r.stdout.split()!r})")
    except rf.CannotApply as e:
        fr.problems.append(f"the first fix ({fix.get('action')}: {fix.get('text')!r}) cannot be applied for real: {e}")
    finally:
        if not os.environ.get("DLLTRACE_CORPUS_KEEP"):
            shutil.rmtree(folder, ignore_errors=True)
    fr.seconds = time.monotonic() - t0
    return fr


def _given(fix: dict, root_win: str) -> dict:
    out = {k: (rc._win(root_win, v) if isinstance(v, str) else v) for k, v in fix.items()}
    out["then"] = [_given(t, root_win) for t in fix.get("then") or []]
    return out


def _split(argv: list) -> list:
    """argv -> [[argv index, op, operands...]] (rc.host_ops's framing)."""
    out = []
    for i, op, _ in rc.host_ops(argv):
        out.append([i, op, *argv[i + 1:i + 1 + rc.ARITY[op]]])
    return out


@pytest.fixture(scope="module")
def fixed(tmp_path_factory, wine_prefix, summary):
    runs = rc.corpus_runs(tmp_path_factory)
    t0 = time.monotonic()
    outcomes = runs.run([_sit(p.name) for p in PICKS])
    work = tmp_path_factory.mktemp("real-fixes")
    with ThreadPoolExecutor(max_workers=max(1, rc.JOBS)) as ex:
        result = list(ex.map(lambda p: run_fix(p, outcomes[p.name], runs.built, runs.base, work / p.name), PICKS))
    if not os.environ.get("DLLTRACE_CORPUS_KEEP"):
        try:
            runs.base.rmdir()  # empty once every layout is removed (the corpus's too, when it ran first)
        except OSError:
            pass
    out = {f.name: f for f in result}
    loads = sum(f.loads for f in result)
    verified = sum(bool(f.fix and f.fix.get("verified") is True) for f in result)
    summary["real fixes"] = (f"real fixes: {len(result)} situations, {loads} loads succeed after the first fix under "
                             f"Wine ({sum(f.works for f in result)} with every check passing, {verified} first fixes "
                             f"verified by the model; {time.monotonic() - t0:.0f} s)")
    return out


@pytest.mark.wine
@pytest.mark.parametrize("pick", PICKS, ids=[p.name for p in PICKS])
def test_first_fix_works_under_wine(pick, fixed):
    fr = fixed[pick.name]
    if fr.works:
        return
    lines = [f"{pick.name}: {pick.why}"]
    if fr.call:
        leaf = fr.call.get("leaf") or {}
        lines.append(f"  failing call: {fr.call.get('op')} {fr.call.get('name')} flags {fr.call.get('flags')}: "
                     f"{fr.call.get('error')}, leaf {leaf.get('name')} {leaf.get('cause')}")
    if fr.fix:
        shown = {k: v for k, v in fr.fix.items() if k not in ("text",)}
        lines.append(f"  first fix: {fr.fix.get('text')!r}\n    {shown}")
    for s in fr.steps:
        lines.append(f"  applied: {s}")
    if fr.argv:
        lines.append(f"  fixed run: {' '.join(fr.argv[1:])}")
    pytest.fail("\n".join(["the first fix does not work for real:", *(f"  - {p}" for p in fr.problems), *lines]),
                pytrace=False)


# Hand-written fixes, each applied by the same harness: the translations work under Wine (where the
# fix is right), and the check fails where the fix cannot work (AddDllDirectory for a plain
# LoadLibraryA, PATH for a 0x1100 load, a full path alone with DLL_LOAD_DIR only): the harness can
# tell a working fix from one that is not, whatever the model offers.
CUDA_BIN = "{SP}\\nvidia\\cuda_runtime\\bin"
CONTROLS = [
    ("cudart_loadlibrary_at_run_time", "preload", {"action": "preload_path", "path": CUDA_BIN + "\\cudart64_12.dll"}, True),
    ("cudart_loadlibrary_at_run_time", "path", {"action": "path_prepend", "folder": CUDA_BIN}, True),
    ("cudart_loadlibrary_at_run_time", "setdlldir", {"action": "set_dll_directory", "folder": CUDA_BIN}, True),
    ("cudart_loadlibrary_at_run_time", "adddir", {"action": "add_dll_directory", "folder": CUDA_BIN}, False),
    ("cuda_bin_on_path_0x1100", "path", {"action": "path_prepend", "folder": CUDA_BIN}, False),
    ("x86_omp_only_copy_searched", "copy", {"action": "copy_file", "path": "{R}\\omp64\\libiomp5md.dll", "dest": "{T}"}, True),
    ("x86_omp_only_copy_searched", "adddir", {"action": "add_dll_directory", "folder": "{R}\\omp64",
                                              "path": "{R}\\omp64\\libiomp5md.dll"}, True),
    ("dll_load_dir_with_bare_name", "fullpath", {"action": "flags", "reason": "dll_load_dir_needs_full_path"}, False),
    ("dll_load_dir_with_bare_name", "fullpath+flags", {"action": "flags", "reason": "dll_load_dir_needs_full_path",
                                                       "then": [{"action": "change_flags", "flags": 0x1100}]}, True),
    ("torch_without_libiomp5md", "install", {"action": "install_package", "package": "intel-openmp", "name": "libiomp5md.dll",
                                             "folder": "{R}\\Library\\bin",
                                             "then": [{"action": "add_dll_directory", "folder": "{R}\\Library\\bin"}]}, True),
]


@pytest.fixture(scope="module")
def controls(tmp_path_factory, wine_prefix):
    runs = rc.corpus_runs(tmp_path_factory)
    picks = {p.name: p for p in PICKS}
    outcomes = runs.run([_sit(n) for n in dict.fromkeys(n for n, _, _, _ in CONTROLS)])
    work = tmp_path_factory.mktemp("real-fix-controls")
    with ThreadPoolExecutor(max_workers=max(1, rc.JOBS)) as ex:
        return list(ex.map(lambda c: run_fix(picks[c[0]], outcomes[c[0]], runs.built, runs.base, work / f"{c[0]}-{c[1]}",
                                             given=c[2], tag=f"-{c[1]}"), CONTROLS))


@pytest.mark.wine
def test_harness_tells_working_fixes_from_others(controls):
    wrong = []
    for (name, tag, fix, works), fr in zip(CONTROLS, controls):
        if fr.loads != works:
            wrong.append(f"{name} + {tag} ({fix['action']}): expected {'to load' if works else 'still to fail'}, "
                         f"{'loads' if fr.loads else 'fails'} under Wine: {fr.problems}; applied {fr.steps}")
        if works and fr.problems:
            wrong.append(f"{name} + {tag}: {fr.problems}")
    assert not wrong, "\n".join(wrong)


@pytest.fixture(scope="module")
def later_fixes(tmp_path_factory, wine_prefix, fixed):
    """Every further fix (after the first) the report marks verified, for each pick, applied alone."""
    runs = rc.corpus_runs(tmp_path_factory)
    todo = []
    for p in PICKS:
        o = runs.outcomes[p.name]
        hit = first_failure(o.report) if o.report else None
        for k, f in enumerate((hit[1].get("fixes") or []) if hit else []):
            if k and f.get("verified") is True:
                todo.append((p, k))
    work = tmp_path_factory.mktemp("real-later-fixes")
    with ThreadPoolExecutor(max_workers=max(1, rc.JOBS)) as ex:
        return list(ex.map(lambda t: run_fix(t[0], runs.outcomes[t[0].name], runs.built, runs.base,
                                             work / f"{t[0].name}-{t[1]}", tag=f"-fix{t[1]}", nth=t[1]), todo))


@pytest.mark.wine
def test_every_verified_fix_works_under_wine(later_fixes, summary):
    """Not only the first: every other fix the model says it verified works for real too."""
    summary["real fixes, later"] = (f"real fixes: {len(later_fixes)} further verified fixes of those situations, "
                                    f"{sum(f.loads for f in later_fixes)} make the load succeed under Wine")
    wrong = [f"{fr.name} ({fr.fix.get('action') if fr.fix else None}: {fr.fix.get('text') if fr.fix else ''!r}): "
             + "; ".join(fr.problems) for fr in later_fixes if not fr.works]
    assert not wrong, "\n".join(wrong)


@pytest.mark.wine
def test_enough_fixes_and_summary(fixed, summary):
    assert len(PICKS) >= MIN_FIXED and len({p.name for p in PICKS}) == len(PICKS)
    names = {s.name: s for s in rc.SITUATIONS}
    assert all(p.name in names and not names[p.name].loads_fine for p in PICKS), "every pick is a failing situation"
    for p in PICKS:
        fr = fixed[p.name]
        act = fr.fix.get("action") if fr.fix else None
        print(f"{p.name}: {'works' if fr.works else 'FAILS'} (first fix {act}; {fr.seconds:.1f} s)")
        for s in fr.steps:
            print(f"    applied: {s}")
        for q in fr.problems:
            print(f"    - {q}")
    print(summary["real fixes"])
    assert sum(f.loads for f in fixed.values()) >= MIN_FIXED, summary["real fixes"]


# ----------------------------------------------------------------------------- the translation, without Wine
OLD = "C:\\dtc\\abcd\\sit"
NEW = "C:\\dtc\\abcd\\fix-sit"
SPW = "\\Lib\\site-packages"


def _layout(tmp_path):
    folder = tmp_path / "fix-sit"
    (folder / "Lib/site-packages/torch/lib").mkdir(parents=True)
    (folder / "Lib/site-packages/torch/lib/c10.dll").write_bytes(b"MZ")
    (folder / "omp64").mkdir()
    (folder / "omp64/libiomp5md.dll").write_bytes(b"MZ")
    return rf.Layout(OLD, NEW, folder)


def _ops(*ops):
    return [list(op) for op in ops]


def test_each_action_becomes_its_op(tmp_path):
    lay = _layout(tmp_path)
    ops = _ops(("setenv", "PATH", f"C:\\windows;{OLD}\\omp64"), ("load", f"{NEW}{SPW}\\torch\\lib\\fbgemm.dll", "0x1100"))
    call = {"op": "LoadLibraryExW", "name": f"{OLD}{SPW}\\torch\\lib\\fbgemm.dll", "flags": 0x1100}
    a = rf.apply_fix({"action": "add_dll_directory", "folder": f"{OLD}\\omp64", "path": f"{OLD}\\omp64\\libiomp5md.dll"},
                     ops, 1, lay, call)
    assert a.ops == [ops[0], ["adddir", f"{NEW}\\omp64"], ops[1]] and a.target == 2
    assert a.expect == [("libiomp5md.dll", f"{NEW}\\omp64\\libiomp5md.dll")]
    assert rf.apply_fix({"action": "path_prepend", "folder": f"{OLD}\\omp64"}, ops, 1, lay, call).ops[1] == \
        ["pathprepend", f"{NEW}\\omp64"]
    assert rf.apply_fix({"action": "set_dll_directory", "folder": f"{OLD}\\omp64"}, ops, 1, lay, call).ops[1] == \
        ["setdlldir", f"{NEW}\\omp64"]
    pre = {"action": "preload_path", "path": f"{OLD}\\omp64\\libiomp5md.dll"}
    assert rf.apply_fix({**pre, "python": True}, ops, 1, lay, call).ops[1] == ["load", f"{NEW}\\omp64\\libiomp5md.dll", "0x1100"]
    assert rf.apply_fix(pre, ops, 1, lay, call).ops[1][2] == "0x8"  # no `python` in the JSON: false
    assert rf.apply_fix({**pre, "flags": 0x1000}, ops, 1, lay, call).ops[1][2] == "0x1000"
    assert rf.apply_fix({"action": "change_flags", "flags": 0x1000}, ops, 1, lay, call).ops[1] == \
        ["load", ops[1][1], "0x1000"]
    # then: each further step the same way, in order
    two = {"action": "set_dll_directory", "folder": f"{OLD}\\omp64",
           "then": [{"action": "add_dll_directory", "folder": f"{OLD}{SPW}\\torch\\lib"}]}
    assert [op[0] for op in rf.apply_fix(two, ops, 1, lay, call).ops] == ["setenv", "setdlldir", "adddir", "load"]
    # the situation's own ops are untouched by an apply
    assert ops[1] == ["load", f"{NEW}{SPW}\\torch\\lib\\fbgemm.dll", "0x1100"]


def test_copy_file_and_full_path(tmp_path):
    lay = _layout(tmp_path)
    call = {"op": "LoadLibraryExW", "name": "c10.dll", "flags": 0x100}
    ops = _ops(("load", "c10.dll", "0x100"))
    # the copy lands on a file placed as a hard link to a cache: the cache is not written through
    cached = tmp_path / "cache-x86.dll"
    cached.write_bytes(b"MZ x86")
    os.link(cached, lay.folder / "Lib/site-packages/torch/lib/libiomp5md.dll")
    (lay.folder / "omp64/libiomp5md.dll").write_bytes(b"MZ x64")
    a = rf.apply_fix({"action": "copy_file", "path": f"{OLD}\\omp64\\libiomp5md.dll", "dest": f"{OLD}{SPW}\\torch\\lib"},
                     ops, 0, lay, call)
    assert (lay.folder / "Lib/site-packages/torch/lib/libiomp5md.dll").read_bytes() == b"MZ x64" and a.ops == ops
    assert cached.read_bytes() == b"MZ x86"
    full = rf.apply_fix({"action": "flags", "reason": "dll_load_dir_needs_full_path"}, ops, 0, lay, call)
    assert full.ops == [["load", f"{NEW}{SPW}\\torch\\lib\\c10.dll", "0x100"]]
    # a copy outside the situation's folder (the shared prefix) is not made
    with pytest.raises(rf.CannotApply, match="outside the situation"):
        rf.apply_fix({"action": "copy_file", "path": f"{OLD}\\omp64\\libiomp5md.dll", "dest": "C:\\windows\\system32"},
                     ops, 0, lay, call)


def test_what_cannot_be_applied_says_why(tmp_path):
    lay = _layout(tmp_path)
    ops = _ops(("load", f"{OLD}\\x.dll", "0x1100"), ("callerr", "x.dll", "f"))
    runtime = {"op": "LoadLibraryA", "name": "cudart64_12.dll", "flags": 0}
    with pytest.raises(rf.CannotApply, match="run time"):
        rf.apply_fix({"action": "change_flags", "flags": 0x1100}, ops, 1, lay, runtime)
    with pytest.raises(rf.CannotApply, match="use_build"):
        rf.apply_fix({"action": "use_build", "kind": "python_bitness"}, ops, 1, lay, runtime)
    with pytest.raises(rf.CannotApply, match="no pinned real wheel"):
        rf.apply_fix({"action": "install", "package": "nvidia-cublas-cu12"}, ops, 1, lay, runtime)
    with pytest.raises(rf.CannotApply, match="no pip package"):
        rf.apply_fix({"action": "install", "instruction": "Install the redistributable"}, ops, 1, lay, runtime)


def test_failing_op_finds_the_host_op_or_the_run_time_one():
    ops = _ops(("setenv", "PATH", "x"), ("load", "C:\\a\\x.dll", "0x1100"), ("callerr", "x.dll", "f"),
               ("loadw", "y.dll"))
    log = rw.WineLog([], [rw.OpLog(1, "setenv", 0), rw.OpLog(4, "load", 0),
                          rw.OpLog(7, "callerr", 126, load_failed=[("cudart64_12.dll", 0xC0000135)]),
                          rw.OpLog(10, "loadw", 126)])
    report = {"calls": [{"name": "C:\\a\\x.dll"}, {"name": "cudart64_12.dll"}, {"name": "y.dll"}]}
    assert [rf.failing_op(report, i, ops, log) for i in range(3)] == [1, 2, 3]
    assert rf.flatten("h.exe", ops)[1] == [1, 4, 7, 10]


def test_check_fixed_reads_wines_log():
    ok = rw.WineLog([], [rw.OpLog(1, "load", 0, mapped=["C:\\r\\omp64\\libiomp5md.dll", "C:\\r\\lib\\fbgemm.dll"])])
    call = {"name": "C:\\r\\lib\\fbgemm.dll"}
    assert rf.check_fixed(ok, 1, call, "libiomp5md.dll", [("libiomp5md.dll", "C:\\r\\omp64\\libiomp5md.dll")]) == []
    # install_package puts it in one folder, its copy_file step then next to the DLL: the last step's file counts
    assert rf.check_fixed(ok, 1, call, "libiomp5md.dll", [("libiomp5md.dll", "C:\\r\\Library\\bin\\libiomp5md.dll"),
                                                          ("libiomp5md.dll", "C:\\r\\omp64\\libiomp5md.dll")]) == []
    wrong_copy = rf.check_fixed(ok, 1, call, "libiomp5md.dll", [("libiomp5md.dll", "C:\\r\\x86\\libiomp5md.dll")])
    assert len(wrong_copy) == 1 and "not from the fix's" in wrong_copy[0]
    bad = rw.WineLog([], [rw.OpLog(1, "load", 126, not_found=[("libiomp5md.dll", "C:\\r\\lib\\fbgemm.dll")])])
    got = rf.check_fixed(bad, 1, call, "libiomp5md.dll", [])
    assert any("still fails: error 126" in p for p in got) and any("not found" in p for p in got) and \
        any("never mapped libiomp5md.dll" in p for p in got)
