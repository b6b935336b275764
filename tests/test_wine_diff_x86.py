"""Differential test for 32-bit processes: the simulator (Wine profile, process machine x86 on x64 Windows, so
WOW64 applies: rules.rule_wow64_*) against Wine's real loader running a 32-bit loadhost.exe.

The cases are tests/wine_layouts.py's generated layouts (the same shapes as tests/test_wine_diff.py), seen from
a 32-bit host (wine_diffkit.build_pool32: "ok" is the i686 build of each fixture DLL, the wrong machine the x64
build) and made WOW64's: each file a layout puts in System32 stays in the real (64-bit) System32, which a
32-bit process never sees, or moves to SysWOW64, which its System32 opens; and a share of the copies in plain
folders move to one or the other. The loads still name System32 (the path asked for), as a 32-bit program does.
Wine runs each case (wine64 hands the i686 host to the 32-bit loader, with the prefix's SysWOW64) with
WINEDEBUG=+file,+module; the model runs the case's scenario with `process.machine = "x86"`. They must agree on
the error, the module's path and the files probed for the case's DLLs (compare() of test_wine_diff.py).
Hand-written cases pin WOW64's facts first (Wine's side asserted, then the model's).

In CI (CI=true) a missing 32-bit Wine or i686 mingw fails instead of skipping (tests/winetools.require).
Environment: DLLTRACE_WINE_X86_SEED (default 20261205), DLLTRACE_WINE_X86_CASES (default 120, at least 100),
DLLTRACE_WINE_JOBS (parallel wine processes, default 4).
"""

from __future__ import annotations

import dataclasses
import os
import random
import secrets
import shutil
import string

import pytest

import winetools
import wine_diffkit as kit
import wine_layouts as lay
from test_wine_diff import _explain, compare

from dlltrace import winpath

pytestmark = pytest.mark.wine

SEED = int(os.environ.get("DLLTRACE_WINE_X86_SEED", "20261205"))
N_CASES = int(os.environ.get("DLLTRACE_WINE_X86_CASES", "120"))
MIN_CASES = 100
JOBS = int(os.environ.get("DLLTRACE_WINE_JOBS", "4"))
NONCE = "".join(secrets.choice(string.ascii_lowercase) for _ in range(3))
SYSWOW64 = lay.WINDIR + "\\syswow64"
SYSNATIVE = lay.WINDIR + "\\sysnative"
BASE_UNIX = "dtw"
MOVE_TO_SYSTEM = 0.12  # share of the copies in plain folders moved to System32 or SysWOW64


def wow64_case(case: lay.Case, seed: int) -> lay.Case:
    """The case as WOW64 sees it (module docstring): its files in System32 stay there or move to SysWOW64, and
    some copies in plain folders move to either; the ops are the same (they name System32 where they did)."""
    rng = random.Random(f"{seed}-{case.ident}-wow64")
    plain = {winpath.key(case.folders[k]) for k in lay.PLAIN}
    files = []
    for path, role, variant in case.files:
        folder, base = path.rsplit("\\", 1)
        if winpath.key(folder) == winpath.key(lay.SYS32):
            folder = rng.choice([lay.SYS32, SYSWOW64])
        elif winpath.key(folder) in plain and rng.random() < MOVE_TO_SYSTEM:
            folder = rng.choice([lay.SYS32, SYSWOW64, SYSWOW64])
        files.append((f"{folder}\\{base}", role, variant))
    return dataclasses.replace(case, files=files)  # (__post_init__: a path placed twice is its last copy)


CASES = [wow64_case(c, SEED) for c in lay.generate(SEED, N_CASES, NONCE)]


def x86_scenario(case: lay.Case, api_sets: dict) -> dict:
    """case.scenario() for the 32-bit host: the process x86 on x64 Windows (WOW64), each file's machine the other
    (the pool's "ok" builds are i686, its wrong machine x64), Wine's own DLLs the 32-bit ones of SysWOW64; the
    modules loaded before the first op keep the names the process knows them by (System32's)."""
    d = case.scenario(api_sets)
    d["system"]["machine"] = "x64"
    d["process"]["machine"] = "x86"
    own = {f"{lay.SYS32}\\{n}".lower() for n in lay.SYSTEM_LOADED + lay.SYSTEM_FILES}
    for f in d["file"]:
        if "machine" in f:
            f["machine"] = {"x64": "x86", "x86": "x64"}[f["machine"]]
        if f["path"].lower() in own:
            f["path"] = SYSWOW64 + "\\" + f["path"].rsplit("\\", 1)[1]
    return d


def simulate(case, api_sets):
    from dlltrace.diagnosis.scenario import run_scenario, scenario_from_dict

    return run_scenario(scenario_from_dict(x86_scenario(case, api_sets), where=case.ident))


# ----------------------------------------------------------------------------- Wine side
@pytest.fixture(scope="session")
def pool32(wine_prefix):
    winetools.require("wine", "wine32", "mingw64", "mingw32")
    winetools.ensure_wow64_prefix()
    built = kit.build_pool32()
    base = winetools.drive_c() / BASE_UNIX
    yield built
    if not os.environ.get("DLLTRACE_WINE_KEEP"):
        shutil.rmtree(base / NONCE, ignore_errors=True)


@pytest.fixture(scope="session")
def api_sets32(pool32, tmp_path_factory):
    """Wine's API-set schema, as test_wine_diff.py reads it (a `dlltrace run --wine` of the 64-bit loadhost.exe:
    the shim writes PEB->ApiSetMap; Wine's schema is one file, apiset.dll's, for either machine)."""
    from test_shim import build_shim

    build_shim()
    return kit.wine_api_sets(kit.build_pool(), tmp_path_factory.mktemp("apisets32"))


@pytest.fixture(scope="session")
def wine_runs32(pool32):
    return kit.run_cases(CASES, pool32, JOBS)


@pytest.fixture(scope="session")
def outcomes32(summary, wine_runs32) -> dict:
    found: dict = {}

    def line() -> str:
        agree = sum(1 for v in found.values() if v == "agree")
        placed = sum(1 for c in CASES if any(p.lower().startswith((lay.SYS32.lower() + "\\", SYSWOW64.lower() + "\\"))
                                             for p, _, _ in c.files))
        return (f"wine differential x86 (seed {SEED}): {len(CASES)} cases generated ({placed} with DLLs in System32 "
                f"or SysWOW64), {len(found)} run, {agree} agree, {len(found) - agree} disagree") if found else ""

    summary["wine differential x86"] = line
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.ident for c in CASES])
def test_wine_x86_agrees_with_model(case, wine_runs32, api_sets32, outcomes32):
    run = wine_runs32[case.ident]
    outcomes32[case.ident] = "disagree"
    results = simulate(case, api_sets32)
    diffs = compare(case, run, results)
    harness = [t for i, t in diffs if i is None]
    assert not harness, "\n".join(harness) + "\n" + _explain(case, run, results)
    if diffs:
        pytest.fail("Wine (32-bit) and the model disagree:\n" + "\n".join(t for _, t in diffs) + "\n"
                    + _explain(case, run, results))
    outcomes32[case.ident] = "agree"


def test_enough_x86_cases_and_wow64_layouts():
    """At least MIN_CASES cases, and the WOW64 layouts among them: DLLs in the real System32 (not seen) and in
    SysWOW64 (seen), loads that name System32 by full path, and the wrong machine (an x64 build)."""
    assert len(CASES) >= MIN_CASES, f"only {len(CASES)} cases (DLLTRACE_WINE_X86_CASES); need {MIN_CASES}"
    placed = [winpath.key(p).rsplit("\\", 1)[0] for c in CASES for p, _, _ in c.files]
    assert placed.count(winpath.key(lay.SYS32)) >= 10 and placed.count(winpath.key(SYSWOW64)) >= 10
    assert any(v == "x86" for c in CASES for _, _, v in c.files)
    named = [op.args[0] for c in CASES for op in c.ops if op.kind in ("load", "loadw")]
    assert any(n.lower().startswith(lay.SYS32.lower() + "\\") for n in named)
    scenario = x86_scenario(CASES[0], {})
    assert scenario["process"]["machine"] == "x86" and scenario["system"]["machine"] == "x64"
    assert {f["path"].lower() for f in scenario["file"]} >= {(SYSWOW64 + "\\kernel32.dll").lower(),
                                                             (SYSWOW64 + "\\ucrtbase.dll").lower()}


# ----------------------------------------------------------------------------- hand-written WOW64 cases
def wow64_manual(ident, index, files, ops, path=()):
    """A hand-written case: files [(folder key or a system folder, role, variant)], ops [(kind, *args)] with
    {f1}/{l}/{sys32}/{syswow64}/{sysnative}-style placeholders; cwd the app folder."""
    names = lay.case_names(NONCE, index)
    root = f"C:\\{BASE_UNIX}\\{NONCE}\\w{index:04d}"
    folders = {"app": root + "\\app", **{k: f"{root}\\{k}" for k in lay.PLAIN},
               "sys32": lay.SYS32, "syswow64": SYSWOW64, "sysnative": SYSNATIVE}
    fill = {**folders, **names}
    host_ops = [lay.HostOp("cd", (folders["app"],)), lay.HostOp("path", (";".join(folders[k] for k in path) or "-",))]
    for kind, *args in ops:
        args = tuple(a.format(**fill) for a in args)
        call = ({"op": "LoadLibraryExW", "name": args[0], "flags": int(args[1], 16)} if kind == "load" else
                {"op": "LoadLibraryW", "name": args[0]})
        host_ops.append(lay.HostOp(kind, args, call))
    return lay.Case(ident=ident, shape="wow64", root=root, names=names, folders=folders,
                    files=[(f"{folders[f]}\\{kit.dll_base(r, names)}.dll", r, v) for f, r, v in files],
                    cwd=folders["app"], path=[folders[k] for k in path], ops=host_ops)


# name -> (case, what Wine does: [(op index, error, the module's folder key or None)], {op index: (role, the
# folders it opened the role's DLL in, in order)})
WOW64 = {
    "rule_wow64_redirect": (
        # the leaf's 32-bit copy in SysWOW64 and its 64-bit copy in System32: the 32-bit process opens
        # System32\leaf.dll, reaches SysWOW64's, and names it System32\leaf.dll
        wow64_manual("wow64-redirect", 9401, [("syswow64", "l", "ok"), ("sys32", "l", "x86")], [("loadw", "{l}.dll")]),
        [(2, 0, "sys32")], {2: ("l", ["app", "sys32"])}),
    "rule_wow64_redirect-system32-is-not-seen": (
        # a 32-bit copy only in the real System32: not found (the search goes on to the end of the standard order)
        wow64_manual("wow64-unseen", 9402, [("sys32", "l", "ok")], [("loadw", "{l}.dll"), ("loadw", "{sys32}\\{l}.dll")]),
        [(2, 126, None), (3, 126, None)], {2: ("l", ["app", "sys32", "C:\\windows\\system", "C:\\windows", "app"])}),
    "rule_wow64_redirect-sysnative": (
        # Sysnative is the real System32: its 64-bit leaf is the wrong machine, 193
        wow64_manual("wow64-sysnative", 9403, [("sys32", "l", "x86"), ("syswow64", "l", "ok")],
                     [("load", "{sysnative}\\{l}.dll", "0")]),
        [(2, 193, None)], {}),
    "rule_wow64_same_file": (
        # System32\leaf.dll, then SysWOW64\leaf.dll: one file, the module loaded first (Wine opens SysWOW64\leaf.dll
        # and knows the file by its id: dlls/ntdll/loader.c find_fileid_module)
        wow64_manual("wow64-same", 9404, [("syswow64", "l", "ok")],
                     [("loadw", "{sys32}\\{l}.dll"), ("loadw", "{syswow64}\\{l}.dll")]),
        [(2, 0, "sys32"), (3, 0, "sys32")], {3: ("l", ["syswow64"])}),
    "chain-of-3-missing-leaf": (
        # issue 27's first case: a 32-bit host loads top -> mid -> leaf, the leaf missing: 126
        wow64_manual("wow64-chain", 9405, [("f1", "t", "ok"), ("f1", "m", "ok")], [("load", "{f1}\\{t}.dll", "0x8")]),
        [(2, 126, None)], {2: ("l", ["f1", "sys32", "C:\\windows\\system", "C:\\windows", "app"])}),
    "64-bit-dll-in-a-32-bit-process": (
        # issue 27's second case: a 32-bit process loads a 64-bit DLL: 193
        wow64_manual("wow64-193", 9406, [("f1", "l", "x86")], [("load", "{f1}\\{l}.dll", "0")]),
        [(2, 193, None)], {}),
}


def _opened(case, run, i, role) -> list:
    by_folder = {winpath.key(v): k for k, v in case.folders.items()}
    name = (kit.dll_base(role, case.names) + ".dll").lower()
    return [by_folder.get(winpath.key(winpath.dirname(p)), winpath.dirname(p))
            for p in run.logs[i].opens if winpath.basename(p).lower() == name]


@pytest.mark.parametrize("name", list(WOW64))
def test_wow64_minimal_agrees(name, pool32, api_sets32):
    case, wine_facts, wine_probes = WOW64[name]
    outside = kit.materialize(case, pool32, winetools.drive_c())
    try:
        run = kit.run_host(case.exe, case.ops)
    finally:
        kit.remove_files(outside)
    assert run.complete, run.stderr_tail
    for i, err, folder in wine_facts:  # Wine's side first: a different Wine shows here
        w = run.ops[i]
        assert w.error == err, (name, i, w)
        assert (w.path is None) if folder is None else winpath.same(winpath.dirname(w.path or ""), case.folders[folder]), \
            (name, i, w)
    for i, (role, folders) in wine_probes.items():
        assert _opened(case, run, i, role) == folders, (name, i, _opened(case, run, i, role))
    results = simulate(case, api_sets32)
    diffs = compare(case, run, results)
    assert not diffs, "\n".join(t for _, t in diffs) + "\n" + _explain(case, run, results)
    if name == "chain-of-3-missing-leaf":
        r = results[-1]
        assert (r.error, r.leaf.name.lower(), len(r.chain)) == (126, case.names["l"] + ".dll", 3)
    if name == "64-bit-dll-in-a-32-bit-process":
        from dlltrace.render.explained import bitness_text

        r = results[-1]
        assert (r.leaf.facts.process_machine, r.leaf.facts.machines) == ("x86", ("x64",))
        assert bitness_text(r.leaf.name, r.leaf.facts.machines, r.leaf.facts.process_machine).endswith(
            "is a 64-bit DLL (x64) in a 32-bit process (x86): Windows cannot load a 64-bit DLL into a 32-bit process")


def test_wow64_minimal_cases_name_existing_rules():
    from dlltrace.loader.windows import rules

    named = [n.split("-")[0] for n in WOW64 if n.startswith("rule_")]
    assert named and all(callable(getattr(rules, n, None)) for n in named)
