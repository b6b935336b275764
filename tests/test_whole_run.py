"""Issue 24 item 1, under Wine: a fix is verified over the WHOLE recorded run. wra.dll fails (wrx.dll is in
no folder its load searches); two copies of wrx.dll are known, the old one (d1: wrx_f1 only) and the current
one (d2: wrx_f1 and wrx_f2), and either makes wra.dll load. The program then loads wrb.dll from d2, which needs
wrx_f2. A fix that makes wra.dll load with the old copy makes wrb.dll bind to that copy already loaded
(Windows: 127; Wine: a stub): the per-call re-run calls it verified, the whole-run replay refuses it and says
what it breaks; the fix with the current copy breaks nothing and comes first."""

from __future__ import annotations

from pathlib import Path

import pytest

import winetools
from dlltrace.diagnosis.wholerun import broken_by, rule_whole_run  # noqa: F401  (the rule this tests)
from dlltrace.diagnosis.replay import LoadOutcome

ROOT = Path(__file__).resolve().parent.parent
DLLS = ROOT / "fixtures" / "dlls"


def test_broken_by_counts_a_load_that_fails_binds_elsewhere_or_to_more_stubs():
    before = {1: LoadOutcome(1, "a.dll", 126, ""), 2: LoadOutcome(2, "C:\\d2\\b.dll", 0, "C:\\d2\\b.dll"),
              3: LoadOutcome(3, "c.dll", 0, "C:\\x\\c.dll"), 4: LoadOutcome(4, "d.dll", 0, "C:\\x\\d.dll"),
              5: LoadOutcome(5, "e.dll", 0, "C:\\x\\e.dll")}
    after = {1: LoadOutcome(1, "a.dll", 0, "C:\\d0\\a.dll"), 2: LoadOutcome(2, "C:\\d2\\b.dll", 0, "C:\\d2\\b.dll", 1),
             3: LoadOutcome(3, "c.dll", 0, "C:\\y\\c.dll"), 4: LoadOutcome(4, "d.dll", 127, ""),
             5: LoadOutcome(5, "e.dll", 0, "c:\\X\\E.DLL")}
    assert broken_by(before, after, at=1) == ("b.dll", "c.dll", "d.dll")  # (e.dll: the same file)
    assert broken_by(before, after, at=4) == ()  # (after the fix point: e.dll only, the same file)
    assert broken_by(before, before, at=1) == ()


@pytest.fixture(scope="module")
def case(wine_prefix) -> Path:
    winetools.require("wine", "mingw64")
    from test_shim import build_shim

    build_shim()
    srcs = [ROOT / "fixtures" / "host" / "loadhost.c", *(DLLS / f"{n}.c" for n in ("wrx1", "wrx2", "wra", "wrb"))]

    def build(d: Path) -> None:
        for sub in ("d0", "d1", "d2"):
            (d / sub).mkdir()
        old = winetools.mingw_compile([DLLS / "wrx1.c"], d / "d1" / "wrx.dll", dll=True)
        new = winetools.mingw_compile([DLLS / "wrx2.c"], d / "d2" / "wrx.dll", dll=True)
        winetools.mingw_compile([DLLS / "wra.c", old], d / "d0" / "wra.dll", dll=True)
        winetools.mingw_compile([DLLS / "wrb.c", new], d / "d2" / "wrb.dll", dll=True)
        winetools.mingw_compile([srcs[0]], d / "loadhost.exe", extra=["-municode"])

    return winetools.built_once(winetools.CACHE / f"whole-run-{winetools.source_key(*srcs)}", build)


@pytest.mark.wine
def test_rule_whole_run_refuses_a_fix_that_breaks_a_later_load(case, tmp_path):
    import dlltrace

    w = winetools.to_windows
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(case / "loadhost.exe"),
                           "load", w(case / "d1" / "wrx.dll"), "0", "free",  # (the old copy: known to the trace)
                           "load", w(case / "d0" / "wra.dll"), "0x1000",  # fails: no folder it searches has wrx.dll
                           "load", w(case / "d2" / "wrb.dll"), "0x8",  # loads, with d2's wrx.dll
                           "exit", "3", cwd=tmp_path)
    assert r.returncode == 3, r.stderr[-3000:]
    (d,) = dlltrace.diagnose(tmp_path / "t.jsonl")
    (f,) = [x for x in d.failures if x.fate == "fatal"]
    assert (f.leaf, f.needed_by) == ("wrx.dll", "wra.dll"), f
    folder = lambda x: winetools.to_windows(case / x).lower()  # noqa: E731
    ok = [x for x in f.fixes if x.verified]
    refused = [x for x in f.fixes if x.breaks]
    assert ok and refused, [(x.action, x.folder, x.path, x.verified, x.breaks) for x in f.fixes]
    # the fixes with the old copy (d1) break wrb.dll; the first fix is one with the current copy (d2)
    assert all(x.breaks == ("wrb.dll",) and folder("d1") in (x.folder or x.path).lower() for x in refused)
    assert folder("d2") in (f.fixes[0].folder or f.fixes[0].path).lower() and f.fixes[0].verified
    text = winetools.dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert "(it breaks wrb.dll:" in text, text[-3000:]
