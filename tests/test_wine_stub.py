"""Issue 22 item 4, under Wine: a module imports a function its DLL does not export. Windows fails the load with
127; Wine loads it anyway, binding the import to a stub, and ends the process with EXCEPTION_WINE_STUB
(0x80000100, "Call from ... to unimplemented function stub.dll.stub_fn, aborting") when the program calls it.
The report must say so -- the failure is that missing export, named with its DLL and its importer, as the 127
it is on Windows -- and not "the program was killed", "0 failed loads" nor "no failed load explains it"."""

from __future__ import annotations

from pathlib import Path

import pytest

from simhelp import handwritten, python_writer

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
    # the Markdown to paste into an issue says the same (it said "none failed ... no failed load explains it")
    md = winetools.dlltrace("report", "--markdown", "t.jsonl", cwd=tmp_path).stdout
    assert md.startswith("**dlltrace:** `stub.dll` does not export `stub_fn` — it is needed by `stubuser.dll`"), md
    assert "no failed load explains it" not in md


def _stub_load(w) -> None:
    """`import pkg._ext` loads _ext.pyd, which imports stub_fn and ok_fn from the stub.dll beside it; that stub.dll
    exports ok_fn only."""
    site = "C:\\Python311\\Lib\\site-packages"
    pkg = site + "\\pkg"
    ctx = w.ev("py_import", module="pkg._ext")
    pyd = pkg + "\\_ext.cp311-win_amd64.pyd"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0), (pkg + "\\stub.dll", 0)], 0, 0, pyd)
    w.file(pyd, imports=[{"dll": "stub.dll", "names": ["stub_fn", "ok_fn"], "ordinals": []}, "kernel32.dll"])
    w.file(pkg + "\\stub.dll", exports=["ok_fn"])


def _stub_writer(hw):
    """A hand-written Wine trace's writer, with _stub_load's load in it."""
    py = "C:\\Python311"
    w, site = python_writer(hw, "import pkg._ext", py)
    pkg = site + "\\pkg"
    w.lines[2]["wine"] = "wine-8.0"  # (the env event: traced under Wine)
    _stub_load(w)
    return w


def _stub_trace(dest: Path, exit_code: int = 0) -> Path:
    """A hand-written Wine trace: `import pkg._ext` loads _ext.pyd, which imports stub_fn and ok_fn from the stub.dll
    beside it; that stub.dll exports ok_fn only. Wine loads it (stub_fn bound to a stub); Windows fails it with 127."""
    _stub_writer(handwritten()).write(dest, exit_code=exit_code)
    return dest


def test_wine_stub_bindings_an_import_never_called_is_a_windows_failure_wine_hid(tmp_path, capsys):
    """The field test under Wine: an old copy of a DLL, lacking an export the package needs, found first: Wine loaded
    it (the import bound to a stub the program never called) and the report said 'every load succeeded'; on Windows
    that import fails with 127. Now each such binding is named, in text, Markdown, JSON and the API's Diagnosis."""
    import json

    import dlltrace
    from dlltrace import cli

    t = _stub_trace(tmp_path / "t.jsonl")
    assert cli.main(["report", str(t)]) == 0  # (the program ran: the report's own exit is the program's fate)
    text = capsys.readouterr().out
    assert text.startswith("dlltrace ─ every load succeeded under Wine (1 load traced); 1 import Wine bound to a stub "
                           "would fail on Windows"), text
    assert "Loaded under Wine, fails on Windows" in text
    assert ("✗ stub.dll does not export stub_fn — it is needed by _ext.cp311-win_amd64.pyd · import pkg._ext: "
            "LoadLibraryExW(") in text and "ok_fn" not in text
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert md.startswith("**dlltrace:** every load succeeded under Wine (1 load traced); 1 import Wine bound to a stub "
                         "would fail on Windows."), md
    assert "- `stub.dll` does not export `stub_fn` — it is needed by `_ext.cp311-win_amd64.pyd`" in md
    cli.main(["report", "--json", str(t)])
    (b,) = json.loads(capsys.readouterr().out)["wine_stubs"]
    assert (b["function"], b["called"], b["error_on_windows"], b["origin"]) == ("stub_fn", False, 127, "import pkg._ext")
    assert b["dll"].endswith("\\pkg\\stub.dll") and b["importer"].endswith("_ext.cp311-win_amd64.pyd")
    (d,) = dlltrace.diagnose(read_trace(t))
    assert d.outcome.kind == "ok"  # (under Wine it ran; the failure is Windows')
    (f,) = d.failures
    assert (f.fate, f.reason, f.error, f.leaf, f.symbol, f.needed_by) == (
        "went_on", "wine_stub_unused", 127, "stub.dll", "stub_fn", "_ext.cp311-win_amd64.pyd")


def test_wine_stub_the_markdown_names_the_missing_export_the_program_died_of(tmp_path, capsys):
    """The same trace ending with 0x80000100 (the program called the stub): the Markdown said '1 load traced, none
    failed ... no failed load explains it' while the text named the missing export."""
    from dlltrace import cli

    t = _stub_trace(tmp_path / "t.jsonl", exit_code=0x80000100)
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert md.startswith("**dlltrace:** `stub.dll` does not export `stub_fn` — it is needed by "
                         "`_ext.cp311-win_amd64.pyd`: Wine bound the import to a stub, and the program ended when it "
                         "called it"), md
    assert "On Windows this load fails with 127" in md and "no failed load explains it" not in md
    assert "Loaded under Wine, fails on Windows" not in md  # (the one it died of is not listed again)


def _wine_own_trace(dest: Path, wine: bool = True) -> Path:
    """A hand-written trace: `import pkg.base` loads base.pyd, which imports zlib1.dll (pkg 2.6.1's RECORD lists
    pkg/zlib1.dll, gone) and msvcp140.dll: both found in System32, where under Wine Wine's own copies are."""
    hw = handwritten()
    py = "C:\\Python311"
    w, site = python_writer(hw, "import pkg.base", py)
    pkg = site + "\\pkg"
    if wine:
        w.lines[2]["wine"] = "wine-8.0"
    w.ev("py_dists", dists=[{"name": "pkg", "version": "2.6.1", "site": site, "loaders": [],
                             "files": ["pkg/base.cp311-win_amd64.pyd", "pkg/zlib1.dll"]}], conda=[], conda_prefix=None,
         cut=False)
    ctx = w.ev("py_import", module="pkg.base")
    pyd = pkg + "\\base.cp311-win_amd64.pyd"
    probes = [(pyd, 0)]
    for name in ("zlib1.dll", "msvcp140.dll"):
        probes += [(pkg + "\\" + name, 0xC0000034), (py + "\\" + name, 0xC0000034), (hw.SYS32 + "\\" + name, 0)]
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, probes, 0, 0, pyd)
    w.file(pyd, imports=["zlib1.dll", "msvcp140.dll", "kernel32.dll"])
    w.file(hw.SYS32 + "\\zlib1.dll", exports=["inflate"])
    w.file(hw.SYS32 + "\\msvcp140.dll", exports=["x"])
    w.file(pkg + "\\zlib1.dll", kind="missing")
    w.write(dest, exit_code=0)
    return dest


def test_wine_only_dlls_an_import_bound_to_wines_own_dll_is_named(tmp_path, capsys):
    """The Windows field test: pygame's zlib1.dll deleted, Wine's own zlib1.dll in its System32 was loaded instead, the
    program worked, and the report said 'every load succeeded'; no vanilla Windows has zlib1.dll, so there the import
    fails. Now each import bound to Wine's own DLL that no vanilla Windows System32 has is named (replay.
    wine_only_imports, analysis.wine_only_dlls), with where Windows takes it from (none: the package must ship it; the
    VC++ Redistributable for msvcp140.dll) and, the package's own copy being gone, the reinstall."""
    import json

    from dlltrace import cli

    t = _wine_own_trace(tmp_path / "t.jsonl")
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert text.startswith("dlltrace ─ every load succeeded under Wine (1 load traced); 1 DLL came from Wine's own, "
                           "which Windows lacks"), text
    zlib = next(line for line in text.splitlines() if "zlib1.dll — needed by base.cp311-win_amd64.pyd" in line)
    assert "on Windows no system folder has it" in zlib and "Wine's copy: C:\\Windows\\System32\\zlib1.dll" in zlib
    after = text.splitlines()[text.splitlines().index(zlib) + 1:][:2]  # (the reinstall under it, its command alone)
    assert after[0].rstrip().endswith("reinstall it:") and after[1].strip() == (
        "C:\\Python311\\python.exe -m pip install --force-reinstall --no-deps pkg==2.6.1"), after
    msvcp = next(line for line in text.splitlines() if "msvcp140.dll — needed by" in line)
    assert "the VC++ Redistributable's copy in System32, when that is installed" in msvcp and "reinstall" not in msvcp
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert md.startswith("**dlltrace:** every load succeeded under Wine (1 load traced); 1 DLL came from Wine's own"), md
    assert "- `zlib1.dll` — needed by `base.cp311-win_amd64.pyd`" in md and "pkg==2.6.1" in md
    cli.main(["report", "--json", str(t)])
    own = json.loads(capsys.readouterr().out)["wine_own"]
    assert [(w["class"], w["path"].rsplit("\\", 1)[-1]) for w in own] == [("other", "zlib1.dll"), ("vcruntime", "msvcp140.dll")]
    assert own[0]["reinstall"]["action"] == "install" and own[1]["reinstall"] is None
    # the same trace not under Wine: System32's copies are Windows' (an installer's), nothing of it said
    t = _wine_own_trace(tmp_path / "w.jsonl", wine=False)
    cli.main(["report", str(t)])
    assert capsys.readouterr().out.splitlines() == [f"dlltrace ─ every load succeeded (1 load traced) · {t}"]


def test_wine_stub_the_markdown_of_an_unused_stub_keeps_the_programs_end_and_what_it_went_past(tmp_path, capsys):
    """An import bound to a stub the program never called, in a run that crashed otherwise (0xC0000005) or went past
    a load: the Markdown said 'every load succeeded under Wine' and nothing else (the crash and the load it went past
    left out), while the text said both."""
    from dlltrace import cli

    t = _stub_trace(tmp_path / "t.jsonl", exit_code=0xC0000005)
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert "every load succeeded" not in md, md
    assert "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION" in md
    assert "- `stub.dll` does not export `stub_fn` — it is needed by `_ext.cp311-win_amd64.pyd`" in md

    hw = handwritten()
    w = _stub_writer(hw)
    site = "C:\\Python311\\Lib\\site-packages"
    w.failed_import("pkg._opt", site + "\\pkg\\_opt.pyd", "opt.dll", [site + "\\pkg", "C:\\Python311"])
    w.write(tmp_path / "went.jsonl", exit_code=0)
    cli.main(["report", "--markdown", str(tmp_path / "went.jsonl")])
    md = capsys.readouterr().out
    assert "every load succeeded" not in md, md
    assert "- `_opt.pyd`: `LoadLibraryExW` with flags `0x1100` → 126" in md
    assert "- `stub.dll` does not export `stub_fn` — it is needed by `_ext.cp311-win_amd64.pyd`" in md


def test_wine_stub_bindings_of_two_processes_keep_the_one_a_process_died_of(tmp_path, capsys):
    """The same import bound to a stub in two processes: the parent never called it, the child died calling it
    (0x80000100). Only the parent's was kept (one entry per binding, the first), as never called: --json said
    called false, and the Markdown 'every load succeeded under Wine' for a run whose child died of it."""
    import copy
    import json

    from dlltrace import cli

    hw = handwritten()
    w = _stub_writer(hw)
    parent_files, w.files = w.files, []
    proc, env = copy.deepcopy(w.lines[1]), copy.deepcopy(w.lines[2])
    w.pid = 5000
    for e in (proc, env):
        w.seq += 1
        w.lines.append({**e, "seq": w.seq, "pid": w.pid})
    w.lines[-2]["ppid"] = 4242
    w.py_env("3.11.9", "C:\\Python311", "C:\\Python311\\Lib\\site-packages")
    _stub_load(w)
    w.ev("exit", code=0x80000100, by="launcher")
    w.pid = 4242
    w.files = [*parent_files, *w.files]
    t = tmp_path / "t.jsonl"
    w.write(t, exit_code=0)
    with open(t, "a", encoding="utf-8") as f:  # (the child's own file facts)
        for e in w.files:
            f.write(json.dumps({**e, "pid": 5000, "seq": 0, "tid": 0, "t": 0}) + "\n")
    cli.main(["report", "--json", str(t)])
    stubs = json.loads(capsys.readouterr().out)["wine_stubs"]
    assert [(b["pid"], b["function"], b["called"]) for b in stubs] == [(5000, "stub_fn", True)]
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert md.startswith("**dlltrace:** `stub.dll` does not export `stub_fn` — it is needed by "
                         "`_ext.cp311-win_amd64.pyd`: Wine bound the import to a stub, and the program ended"), md
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert "the program crashed (0x80000100 EXCEPTION_WINE_STUB)" in text
    assert "Loaded under Wine, fails on Windows" not in text  # (the one binding is the one the child died of)


@pytest.mark.parametrize("exit_code", [0, 0xC0000005])
def test_wine_stub_the_markdown_of_many_unused_stubs_fits_an_issue(tmp_path, capsys, exit_code):
    """An old copy of a DLL lacking hundreds of exports an extension needs: the Markdown listed every import bound to
    a stub, past MARKDOWN_BUDGET (a 600-load hand-written trace: 354,108 bytes); now as many as fit, the rest
    counted, as the other lists are (test_markdown_cap.py). The text says them a line a DLL, importer and load: the
    1,500 imports of _big.pyd one line (it was a line each: 261 lines for one stray DLL in the field test), with the
    first names and the count."""
    from dlltrace import cli
    from dlltrace.render.markdown import MARKDOWN_BUDGET

    w = _stub_writer(handwritten())
    pkg = "C:\\Python311\\Lib\\site-packages\\pkg"
    ctx = w.ev("py_import", module="pkg._big")
    pyd = pkg + "\\_big.cp311-win_amd64.pyd"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0)], 0, 0, pyd)
    w.file(pyd, imports=[{"dll": "stub.dll", "names": [f"gone_{i}" for i in range(1500)], "ordinals": []}])
    t = tmp_path / "t.jsonl"
    w.write(t, exit_code=exit_code)
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert len(md.encode("utf-8")) <= MARKDOWN_BUDGET, len(md.encode("utf-8"))
    shown = md.count("- `stub.dll` does not export `")
    assert shown > 100 and f"**{1501 - shown} more imports bound to a stub left out** to fit a GitHub issue" in md
    assert "Fix: for each, use the copy of the DLL its importer was built against" in md
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert text.count("✗ stub.dll does not export ") == 2, text  # (_big.pyd's 1,500, and the trace's other one)
    assert ("✗ stub.dll does not export 1500 functions _big.cp311-win_amd64.pyd imports (gone_0, gone_1, gone_2, "
            "gone_3, gone_4, … and 1495 more) — it is needed by _big.cp311-win_amd64.pyd") in text, text[-3000:]


def test_wine_stub_bindings_replay_no_process_again(tmp_path, capsys, monkeypatch):
    """wine_stub_bindings read which binding a process died of from rule_wine_stub, which replays the whole process
    again: a Wine trace of 3,000 loads ending with 0x80000100 took 3.6 s of CPU for --json instead of 2.6 s, and
    --markdown 3.5 s instead of 2.4 s. The report's own replays have it (a load that bound a stub is kept in full):
    --json replays once, and still marks the binding the program died of as called."""
    import json

    from dlltrace import cli
    from dlltrace.diagnosis import analysis

    t = _stub_trace(tmp_path / "t.jsonl", exit_code=0x80000100)
    calls = []
    real = analysis.replay
    monkeypatch.setattr(analysis, "replay", lambda *a, **k: calls.append(k) or real(*a, **k))
    cli.main(["report", "--json", str(t)])
    (b,) = json.loads(capsys.readouterr().out)["wine_stubs"]
    assert (b["function"], b["called"]) == ("stub_fn", True)
    assert len(calls) == 1, calls  # (the report's own: analyse)


def _cut_load(w, module: str, pyd: str, imports: list, tmp_path: Path) -> Path:
    """`import module` loading pyd (with these imports), the load's probes dropped by the size cap; the trace written."""
    ctx = w.ev("py_import", module=module)
    first_t = w.t + 500  # (the first dropped line: this load's probes)
    begin = w.ev("load_begin", api="LoadLibraryExW", name=pyd, flags=0x1100, parent=None, depth=0, ctx=ctx,
                 caller=w.lines[1]["exe"])
    w.ev("load_end", load=begin, result="0x7ffb10000000", error=0, status=0, path=pyd)
    w.file(pyd, imports=imports)
    w.ev("capped", max_size=100000, dropped={"probe": 6}, dropped_bytes=900, first_t=first_t)
    t = tmp_path / "t.jsonl"
    w.write(t, exit_code=0)
    return t


def test_wine_stub_bindings_skip_a_load_the_size_cap_cut(tmp_path, capsys):
    """A load the size cap cut short (its probes dropped: run --max-size) gets no verdict and no comparison with the
    model (verdict.rule_cut_by_cap): what it bound is not known. Its model replay, without the probes that found the
    package's own stub.dll, bound the already loaded C:\\Python311\\stub.dll, which lacks stub_fn, and the report
    said it would fail on Windows."""
    import json

    from dlltrace import cli

    hw = handwritten()
    py = "C:\\Python311"
    w, site = python_writer(hw, "import pkg._ext", py)
    pkg = site + "\\pkg"
    w.lines[2]["wine"] = "wine-8.0"
    old = py + "\\stub.dll"
    w.load("LoadLibraryExW", old, 0, w.ev("py_import", module="old"), [(old, 0)], 0, 0, old)
    w.file(old, exports=["ok_fn"])
    t = _cut_load(w, "pkg._ext", pkg + "\\_ext.cp311-win_amd64.pyd",
                  [{"dll": "stub.dll", "names": ["stub_fn", "ok_fn"], "ordinals": []}, "kernel32.dll"], tmp_path)
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert "The trace reached its size cap" in text and "Loaded under Wine, fails on Windows" not in text, text
    cli.main(["report", "--json", str(t)])
    assert json.loads(capsys.readouterr().out)["wine_stubs"] == []


def test_wine_only_dlls_the_markdown_keeps_the_programs_end(tmp_path, capsys):
    """Wine's own zlib1.dll bound in a run that crashed (0xC0000005): the Markdown said 'every load succeeded under
    Wine (1 load traced); 1 DLL came from Wine's own, which Windows lacks' and nothing of the crash (the early return
    test_wine_stub_the_markdown_of_an_unused_stub_keeps_the_programs_end_and_what_it_went_past is about)."""
    from dlltrace import cli

    t = _wine_own_trace(tmp_path / "t.jsonl")
    t.write_text(t.read_text(encoding="utf-8").replace('"code": 0,', f'"code": {0xC0000005},'), encoding="utf-8")
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert "every load succeeded" not in md, md
    assert "The program crashed: 0xc0000005 STATUS_ACCESS_VIOLATION" in md
    assert "**From Wine's own DLLs, which no vanilla Windows has**" in md


def test_wine_only_dlls_skip_a_load_the_size_cap_cut(tmp_path, capsys):
    """A load the size cap cut short: its model replay, without the probes that found the package's own copy, may
    bind Wine's System32 one; what it bound is not known (verdict.rule_cut_by_cap), so it is not named."""
    from dlltrace import cli

    hw = handwritten()
    py = "C:\\Python311"
    w, site = python_writer(hw, "import pkg.base", py)
    pkg = site + "\\pkg"
    w.lines[2]["wine"] = "wine-8.0"
    w.file(hw.SYS32 + "\\zlib1.dll", exports=["inflate"])
    t = _cut_load(w, "pkg.base", pkg + "\\base.cp311-win_amd64.pyd", ["zlib1.dll", "kernel32.dll"], tmp_path)
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert "The trace reached its size cap" in text and "From Wine's own DLLs" not in text, text


def test_rule_stub_dll_shadows_a_package_copy():
    """The stub-bound DLL's copy an installed distribution ships elsewhere (gmpy2 2.2.1's gmpy2.libs\\libgmp-10.dll,
    a stray libgmp-10.dll in the Python's folder bound first: tests/test_real_field.py has it under Wine); none when
    the copy bound is a distribution's own (its version is the question), nor when no record, or two, list the name."""
    from types import SimpleNamespace

    from dlltrace.diagnosis.analysis import rule_stub_dll_shadows_a_package_copy
    from dlltrace.model import Owner

    site = r"C:\py\Lib\site-packages"
    gmpy2 = Owner("gmpy2", "2.2.1", "gmpy2.libs/libgmp-10.dll", site)
    other = Owner("other", "1.0", "other.libs/libgmp-10.dll", site)

    def case(bound: str, owners: tuple):
        b = SimpleNamespace(dll=bound, load=SimpleNamespace(load=SimpleNamespace(pid=7)))
        trace = SimpleNamespace(owners=lambda pid: {"libgmp-10.dll": owners} if pid == 7 else {})
        return rule_stub_dll_shadows_a_package_copy(b, trace)  # type: ignore[arg-type]

    assert case(r"C:\py\libgmp-10.dll", (gmpy2,)) == (site + r"\gmpy2.libs\libgmp-10.dll", gmpy2)
    assert case(site + r"\GMPY2.libs\libgmp-10.dll", (gmpy2,)) is None  # (the package's own copy was bound)
    assert case(r"C:\py\libgmp-10.dll", ()) is None
    assert case(r"C:\py\libgmp-10.dll", (gmpy2, other)) is None  # (which one it was built against: not known)


def _already_loaded_trace(dest: Path, listed: bool = True) -> Path:
    """The field test's h5py (tests/test_real_field.py's shape, under Wine): the program loads a stray stub.dll with
    ctypes from C:\\other, a folder no search tries, then `import pkg._ext`, whose _ext.pyd imports stub_fn from
    stub.dll: the module already loaded is bound (no probe), it lacks stub_fn, and the program ends calling it.
    `listed`: pkg's RECORD lists its own pkg/stub.dll (h5py's h5py/hdf5.dll)."""
    hw = handwritten()
    w, site = python_writer(hw, "import ctypes; ctypes.WinDLL(r'C:\\other\\stub.dll'); import pkg._ext")
    w.lines[2]["wine"] = "wine-8.0"
    pkg = site + "\\pkg"
    w.ev("py_dists", dists=[{"name": "pkg", "version": "1.0", "site": site, "loaders": [],
                             "files": ["pkg/stub.dll"] if listed else []}], conda=[], conda_prefix=None, cut=False)
    stray = "C:\\other\\stub.dll"
    ctx = w.ev("py_dlopen", name=stray, mode=None, frame={"file": "<string>", "line": 1, "function": "<module>"},
               imports=[])
    w.load("LoadLibraryExW", stray, 0x1100, ctx, [(stray, 0)], 0, 0, stray)
    w.file(stray, exports=["ok_fn"])
    ctx = w.ev("py_import", module="pkg._ext")
    pyd = pkg + "\\_ext.cp311-win_amd64.pyd"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0)], 0, 0, pyd)
    w.file(pyd, imports=[{"dll": "stub.dll", "names": ["stub_fn", "ok_fn"], "ordinals": []}, "kernel32.dll"])
    w.file(pkg + "\\stub.dll", exports=["ok_fn", "stub_fn"])
    w.write(dest, exit_code=0x80000100)
    return dest


def test_rule_stub_dll_was_already_loaded(tmp_path, capsys):
    """The stub-bound copy was the module already loaded (the program's ctypes.WinDLL of a stray copy): the fix said
    "its folder is searched first: move it out of C:\\other", a folder no search tries; the copy is bound because it
    is loaded, whatever its folder. Now it says so, and to load the package's own copy first or not load that one
    before it (under Wine, h5py's hdf5.dll loaded first made the import run: tests/test_real_field.py)."""
    from types import SimpleNamespace

    from dlltrace import cli
    from dlltrace.diagnosis.analysis import rule_stub_dll_was_already_loaded
    from dlltrace.model import Node

    site = "C:\\Python311\\Lib\\site-packages"
    for listed in (True, False):
        t = _already_loaded_trace(tmp_path / f"t{listed}.jsonl", listed)
        cli.main(["report", str(t)])
        text = capsys.readouterr().out
        assert "✗ stub.dll does not export stub_fn — it is needed by _ext.cp311-win_amd64.pyd" in text, text
        assert "searched first" not in text and "move it out of" not in text, text
        said = ("it was already in the process (loaded by ctypes.CDLL(r\"C:\\other\\stub.dll\")) before "
                "_ext.cp311-win_amd64.pyd: a DLL already loaded is used whatever folders the search would try")
        assert said in text, text
        if listed:
            assert f"Do not load it before pkg (or load {site}\\pkg\\stub.dll first)" in text, text
        else:
            assert "Load a stub.dll that exports stub_fn (the one _ext.cp311-win_amd64.pyd was built against) before " \
                "it, or do not load that copy first" in text, text
    # found by the search (the gmpy2 case: a stray copy in a folder searched first): no such words
    found = Node("stub.dll", "import", path="C:\\py\\stub.dll", how_kind="search")
    b = SimpleNamespace(dll="C:\\py\\stub.dll", load=SimpleNamespace(result=SimpleNamespace(tree=Node(
        "_ext.pyd", "call", path="C:\\py\\_ext.pyd", children=[found]))))
    assert rule_stub_dll_was_already_loaded(b) == ""  # type: ignore[arg-type]
