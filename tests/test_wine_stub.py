"""Issue 22 item 4, under Wine: a module imports a function its DLL does not export. Windows fails the load with
127; Wine loads it anyway, binding the import to a stub, and ends the process with EXCEPTION_WINE_STUB
(0x80000100, "Call from ... to unimplemented function stub.dll.stub_fn, aborting") when the program calls it.
The report must say so -- the failure is that missing export, named with its DLL and its importer, as the 127
it is on Windows -- and not "the program was killed", "0 failed loads" nor "no failed load explains it"."""

from __future__ import annotations

from pathlib import Path

import pytest

import winetools
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
DLLS = ROOT / "fixtures" / "dlls"


@pytest.fixture(scope="module")
def stub_case(wine_prefix) -> Path:
    """loadhost.exe, stubuser.dll (built against stub.dll with stub_fn) and the stub.dll without it."""
    winetools.require("wine", "mingw64")
    from test_shim import build_shim

    build_shim()
    srcs = [ROOT / "fixtures" / "host" / "loadhost.c", DLLS / "stubfull.c", DLLS / "stubnew.c", DLLS / "stubuser.c"]

    def build(d: Path) -> None:
        (d / "full").mkdir()
        full = winetools.mingw_compile([DLLS / "stubfull.c"], d / "full" / "stub.dll", dll=True)
        winetools.mingw_compile([DLLS / "stubuser.c", full], d / "stubuser.dll", dll=True)
        winetools.mingw_compile([DLLS / "stubnew.c"], d / "stub.dll", dll=True)
        winetools.mingw_compile([srcs[0]], d / "loadhost.exe", extra=["-municode"])

    return winetools.built_once(winetools.CACHE / f"wine-stub-{winetools.source_key(*srcs)}", build)


@pytest.mark.wine
def test_rule_wine_stub(stub_case, tmp_path):
    user = winetools.to_windows(stub_case / "stubuser.dll")
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", str(stub_case / "loadhost.exe"), "load", user, "0",
                           "call", user, "stubuser_fn", cwd=tmp_path)
    tr = read_trace(tmp_path / "t.jsonl")
    assert tr.exit_code(tr.pids[0]) == 0x80000100, r.stderr[-2000:]  # (Wine's own end of it)
    assert r.returncode == 1  # (a crash whose low 8 bits are 0 never reads as success)
    text = r.stderr[r.stderr.index("dlltrace ─"):]
    assert text.startswith("dlltrace ─ 1 failed load · the program crashed (0x80000100 EXCEPTION_WINE_STUB)"), text
    assert "✗ stub.dll does not export stub_fn — it is needed by stubuser.dll" in text
    assert "On Windows this load fails with 127 (ERROR_PROC_NOT_FOUND)" in text
    assert "no failed load explains it" not in text and "was killed" not in text
    import dlltrace

    (d,) = dlltrace.diagnose(tr)
    assert d.outcome.kind == "crashed" and d.end.code == 0x80000100
    (f,) = d.failures
    assert (f.fate, f.reason, f.cause, f.error) == ("fatal", "wine_stub", "missing_export", 127)
    assert (f.leaf, f.symbol, f.needed_by) == ("stub.dll", "stub_fn", "stubuser.dll")
