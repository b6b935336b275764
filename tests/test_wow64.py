"""WOW64 in the loader model: a 32-bit (x86) process on 64-bit Windows (loader/windows/rules.py,
the rule_wow64_* rules). One test per rule, named after it; end to end through scenarios."""

from __future__ import annotations

from pathlib import Path

from dlltrace.loader.windows import rules
from dlltrace.worlds.world import SystemInfo
from simhelp import load

SYS = SystemInfo()  # an x64 Windows
SYS32 = "C:\\Windows\\System32"
WOW = "C:\\Windows\\SysWOW64"


def x86(path, **more):
    return {"path": path, "machine": "x86", **more}


def x64(path, **more):
    return {"path": path, "machine": "x64", **more}


def load32(name, flags=0, files=(), **kw):
    """LoadLibraryExW(name, flags) in a 32-bit process (process.machine x86) on x64 Windows."""
    return load(name, flags, files, machine="x86", **kw)


def test_rule_wow64_applies():
    assert rules.rule_wow64_applies("x86", SYS)
    assert rules.rule_wow64_applies("x86", SystemInfo(machine="arm64"))  # x86 emulation on arm64 is WOW64 too
    assert not rules.rule_wow64_applies("x64", SYS)
    assert not rules.rule_wow64_applies("x86", SystemInfo(machine="x86"))  # 32-bit Windows: no WOW64
    assert not rules.rule_wow64_applies("arm64", SystemInfo(machine="arm64"))


def test_rule_wow64_redirect():
    r = rules.rule_wow64_redirect
    assert r(SYS32 + "\\x.dll", "x86", SYS) == WOW + "\\x.dll"
    assert r("c:/windows//system32/Sub/x.dll", "x86", SYS) == WOW + "\\Sub\\x.dll"  # any spelling; the rest kept
    assert r(SYS32, "x86", SYS) == WOW
    # the exempt subfolders (Microsoft's "File System Redirector" page; Wine's redirects[] table)
    for sub in ("catroot", "catroot2", "DriverStore", "drivers\\etc", "LogFiles", "spool"):
        assert r(f"{SYS32}\\{sub}\\a.dll", "x86", SYS) == f"{SYS32}\\{sub}\\a.dll", sub
    assert r(SYS32 + "\\drivers\\a.sys", "x86", SYS) == WOW + "\\drivers\\a.sys"  # only drivers\etc is exempt
    assert r(SYS32 + "\\catrootx\\a.dll", "x86", SYS) == WOW + "\\catrootx\\a.dll"
    # Sysnative reaches the real System32
    assert r("C:\\Windows\\Sysnative\\x.dll", "x86", SYS) == SYS32 + "\\x.dll"
    # not below System32, a 64-bit process, 32-bit Windows: unchanged
    assert r("C:\\Windows\\System32x\\a.dll", "x86", SYS) == "C:\\Windows\\System32x\\a.dll"
    assert r(WOW + "\\x.dll", "x86", SYS) == WOW + "\\x.dll"
    assert r(SYS32 + "\\x.dll", "x64", SYS) == SYS32 + "\\x.dll"
    assert r(SYS32 + "\\x.dll", "x86", SystemInfo(machine="x86")) == SYS32 + "\\x.dll"
    assert r("C:\\Windows\\Sysnative\\x.dll", "x64", SYS) == "C:\\Windows\\Sysnative\\x.dll"
    # a Windows folder elsewhere: its own System32
    d = SystemInfo(windows="D:\\WinNT")
    assert r("D:\\WinNT\\System32\\x.dll", "x86", d) == "D:\\WinNT\\SysWOW64\\x.dll"
    assert r(SYS32 + "\\x.dll", "x86", d) == SYS32 + "\\x.dll"


def test_rule_wow64_redirect_in_a_load():
    # the 32-bit copy is in SysWOW64, the 64-bit one in System32: a 32-bit process gets the 32-bit one,
    # named by the path it asked for (as Wine names it), and a 64-bit process the 64-bit one
    files = [x64(SYS32 + "\\b.dll"), x86(WOW + "\\b.dll")]
    r = load32("b.dll", files=files)
    assert r.error == 0 and r.module_path == SYS32 + "\\b.dll"
    assert SYS32 + "\\b.dll" in r.probes
    assert load("b.dll", files=files).error == 0
    # a 32-bit DLL only in the real System32 is not found by a 32-bit process (System32 is SysWOW64)
    r = load32("b.dll", files=[x86(SYS32 + "\\b.dll")])
    assert (r.error, r.leaf.cause) == (126, "not_found")
    r = load32(SYS32 + "\\b.dll", files=[x86(SYS32 + "\\b.dll")])
    assert r.error == 126
    # Sysnative is the real System32: its 64-bit DLL is the wrong machine for a 32-bit process
    r = load32("C:\\Windows\\Sysnative\\b.dll", files=files)
    assert (r.error, r.leaf.cause) == (193, "bad_machine")
    assert r.leaf.facts.process_machine == "x86" and r.leaf.facts.machines == ("x64",)
    # an import: the 64-bit copy in System32 is not even seen (System32 is SysWOW64), one in the
    # application folder is the wrong machine (193), a 32-bit one in SysWOW64 loads
    files = [x86("C:\\app\\a.dll", imports=["b.dll"]), x64(SYS32 + "\\b.dll")]
    r = load32("C:\\app\\a.dll", files=files)
    assert (r.error, r.leaf.name, r.leaf.cause) == (126, "b.dll", "not_found")
    r = load32("C:\\app\\a.dll", files=[*files, x64("C:\\app\\b.dll")])
    assert (r.error, r.leaf.name, r.leaf.cause) == (193, "b.dll", "bad_machine")
    assert load32("C:\\app\\a.dll", files=[*files, x86(WOW + "\\b.dll")]).error == 0


def test_rule_wow64_same_file():
    assert rules.rule_wow64_same_file(SYS32 + "\\x.dll", "x86", SYS) == (SYS32 + "\\x.dll", WOW + "\\x.dll")
    assert rules.rule_wow64_same_file(WOW + "\\x.dll", "x86", SYS) == (WOW + "\\x.dll", SYS32 + "\\x.dll")
    assert rules.rule_wow64_same_file("C:\\app\\x.dll", "x86", SYS) == ("C:\\app\\x.dll",)
    assert rules.rule_wow64_same_file(SYS32 + "\\x.dll", "x64", SYS) == (SYS32 + "\\x.dll",)
    # end to end (measured under Wine 8.0): SysWOW64\x.dll after System32\x.dll is the module loaded first
    files = [x86(WOW + "\\b.dll")]
    pre = [{"op": "LoadLibraryExW", "name": SYS32 + "\\b.dll", "flags": 0}]
    r = load32(WOW + "\\b.dll", files=files, pre=pre)
    assert r.error == 0 and r.tree.how_kind == "loaded_same_file" and r.module_path == SYS32 + "\\b.dll"
    assert not r.tree.new


def test_rule_wow64_known_dlls():
    assert rules.rule_wow64_known_dlls("USER32.dll", SYS) == WOW + "\\user32.dll"
    assert rules.rule_wow64_known_dlls("wow64.dll", SYS) is None  # WOW64's own DLLs are 64-bit only
    assert rules.rule_wow64_known_dlls("notknown.dll", SYS) is None
    # rule_known_dlls asks it for a 32-bit process; Wine has no KnownDLLs in either view
    assert rules.rule_known_dlls("user32.dll", SYS, "x86") == WOW + "\\user32.dll"
    assert rules.rule_known_dlls("wow64cpu.dll", SYS, "x86") is None
    assert rules.rule_known_dlls("wow64cpu.dll", SYS, "x64") == SYS32 + "\\wow64cpu.dll"
    assert rules.rule_known_dlls("user32.dll", SystemInfo(profile="wine"), "x86") is None
    # a copy in the application folder does not win over the 32-bit KnownDLLs
    r = load32("user32.dll", files=[x86("C:\\app\\user32.dll")])
    assert r.tree.how == "KnownDLLs" and r.module_path == WOW + "\\user32.dll"


def test_rule_wow64_program_files():
    assert rules.rule_wow64_program_files("x86", SYS) == "C:\\Program Files (x86)"
    assert rules.rule_wow64_program_files("x64", SYS) == "C:\\Program Files"
    assert rules.rule_wow64_program_files("x86", SystemInfo(machine="x86")) == "C:\\Program Files"
    assert rules.rule_wow64_program_files("x86", SystemInfo(machine="arm64"), "D:\\PF") == "D:\\PF (x86)"


# ----------------------------------------------------------------------------- a recorded 32-bit trace
def _pe32(name, imports=(), machine=0x14C) -> bytes:
    """tinype's DLL with its Machine field set (0x14C: i386): what pe.py reads a DLL's machine from."""
    import struct

    from tinype import tiny_dll

    data = bytearray(tiny_dll(name, imports))
    at = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<H", data, at + 4, machine)
    return bytes(data)


def x86_prefix(tmp_path: Path) -> Path:
    """A Wine prefix's drive C in tmp_path/prefix (dosdevices/c: a link to it) for the 32-bit chain of X86_PROBES:
    app\\top.dll and app\\mid.dll x86, System32\\leaf.dll x64 (SysWOW64 has none)."""
    prefix = tmp_path / "prefix"
    c = prefix / "drive_c"
    for d in ("app", "windows/system32", "windows/syswow64", "windows/system"):
        (c / d).mkdir(parents=True)
    (prefix / "dosdevices").mkdir()
    (prefix / "dosdevices" / "c:").symlink_to(c)
    (c / "app" / "top.dll").write_bytes(_pe32("top.dll", ["mid.dll"]))
    (c / "app" / "mid.dll").write_bytes(_pe32("mid.dll", ["leaf.dll"]))
    (c / "windows" / "system32" / "leaf.dll").write_bytes(_pe32("leaf.dll", machine=0x8664))
    return prefix


def _x86_trace(tmp_path, probes):
    """A hand-written trace of a 32-bit process (env machine x86) whose LoadLibraryExW(C:\\app\\top.dll)
    failed with 126: top -> mid -> leaf, the leaf missing."""
    import json

    from dlltrace.trace.files import header_line

    def ev(kind, seq, **f):
        return {"ev": kind, "seq": seq, "pid": 7, "tid": 1, "t": seq, **f}

    events = [ev("process", 1, ppid=1, exe="C:\\app\\host.exe", hooks=[]),
              ev("env", 2, exe="C:\\app\\host.exe", cwd="C:\\app", vars={"PATH": ""}, dll_directory=None,
                 user_dirs=None, default_dirs=None, known_dlls=None, safe_dll_search_mode=None,
                 system32="C:\\windows\\system32", windows="C:\\windows", windows_version="6.1.7601",
                 machine="x86", wine="8.0", modules=["C:\\app\\host.exe"]),
              ev("load_begin", 3, api="LoadLibraryExW", name="C:\\app\\top.dll", flags=0, parent=None, depth=0,
                 ctx=None, caller="C:\\app\\host.exe")]
    seq = 4
    for path, status in probes:
        events.append(ev("probe", seq, load=3, op="open", path="\\??\\" + path, status=status))
        seq += 1
    events.append(ev("load_end", seq, load=3, result=None, error=126, status=0xC0000135, path=None))
    p = tmp_path / "x86.jsonl"
    p.write_text(header_line("wine", ["host.exe"]) + "".join(json.dumps(e) + "\n" for e in events))
    return p


NF = 0xC0000034
X86_PROBES = [("C:\\app\\top.dll", 0), ("C:\\app\\mid.dll", 0), ("C:\\app\\leaf.dll", NF),
              ("C:\\windows\\system32\\leaf.dll", NF), ("C:\\windows\\system\\leaf.dll", NF),
              ("C:\\windows\\leaf.dll", NF), ("C:\\app\\leaf.dll", NF)]


def test_recorded_x86_trace_is_replayed_with_the_syswow64_facts(tmp_path, monkeypatch):
    """`dlltrace run`'s facts (diagnosis/collect.py) for a 32-bit process are asked with the redirected
    path: the 64-bit leaf.dll in the real System32 is not the process's, SysWOW64 has none, so the load is
    126 with the chain of 3 (the loader's open of System32\\leaf.dll reached SysWOW64 and found nothing). The
    report's replay then agrees with the loader, probe for probe."""
    from dlltrace import diagnose
    from dlltrace.runner import append_facts
    from dlltrace.trace.reader import read_trace
    from dlltrace.worlds.live import wine_map

    prefix = x86_prefix(tmp_path)
    p = _x86_trace(tmp_path, X86_PROBES)
    import dlltrace.diagnosis.collect as collect

    facts = collect.collect_facts(read_trace(p), wine_map(prefix))
    by_path = {e["path"].lower(): e for e in facts}
    assert by_path["c:\\windows\\syswow64\\leaf.dll"]["kind"] == "missing"
    assert by_path["c:\\app\\mid.dll"]["pe"]["machine"] == "x86"
    # (the real System32's 64-bit copy is asked of only as a copy found elsewhere, if at all)
    assert by_path.get("c:\\windows\\system32\\leaf.dll", {}).get("why", "elsewhere") == "elsewhere"

    monkeypatch.setenv("WINEPREFIX", str(prefix))
    append_facts(p, read_trace(p), wine=True)
    (d,) = diagnose(p)
    (f,) = d.failures
    assert (f.error, f.leaf, f.cause, f.chain) == (126, "leaf.dll", "not_found", ("top.dll", "mid.dll", "leaf.dll"))
    assert [t.path for t in f.tried][:2] == ["C:\\app\\leaf.dll", "C:\\windows\\system32\\leaf.dll"]
    assert f.model_agrees


# ----------------------------------------------------------------------------- a win32 wheel, statically
def _wheel(path, members: dict, tag="win32"):
    import zipfile

    whl = path / f"pkg-1.0-cp311-cp311-{tag}.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for name, data in members.items():
            z.writestr(f"pkg/{name}", data)
        z.writestr("pkg-1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-{tag}\n")
        z.writestr("pkg-1.0.dist-info/RECORD", "")
    return whl


def test_static_deps_of_a_win32_wheel_use_the_x86_view(tmp_path):
    """`deps` and `check` of a win32 wheel (machine I386) model a 32-bit Python: its System32 is SysWOW64,
    where the built-in model has the 32-bit system DLLs and the VC++ runtime; an x64 DLL in it is the wrong
    machine for the 32-bit process."""
    from dlltrace import deps

    ext = _pe32("ext.pyd", ["kernel32.dll", "vcruntime140.dll", "helper.dll", "user32.dll", "winmm.dll", "msvcp140.dll"])
    good = _wheel(tmp_path, {"ext.pyd": ext, "helper.dll": _pe32("helper.dll", ["kernel32.dll"])})
    r = deps(good)
    assert r.target.machine == "x86" and r.problems == [], [p.detail for p in r.problems]
    (tmp_path / "bad").mkdir()
    bad = _wheel(tmp_path / "bad", {"ext.pyd": ext, "helper.dll": _pe32("helper.dll", ["kernel32.dll"], machine=0x8664)})
    problems = [(p.kind, p.dll, p.machine) for p in deps(bad).problems]
    assert problems == [("wrong_machine", "helper.dll", "x64")]


# ----------------------------------------------------------------------------- 193, both directions, in words
def _import_193(process_machine, dll_machine):
    """A Python (3.11) of `process_machine` importing a .pyd of `dll_machine`: the explained failure."""
    from dlltrace.diagnosis.explain import explain
    from simhelp import scenario

    sp = "C:\\py\\Lib\\site-packages"
    sc = scenario([{"path": sp + "\\pkg\\_ext.pyd", "machine": dll_machine}],
                  [{"op": "python_import", "module": "pkg._ext", "path": sp + "\\pkg\\_ext.pyd"}],
                  exe="C:\\py\\python.exe", python="3.11", machine=process_machine,
                  folders=[sp + "\\pkg"])
    sim = sc.simulator()
    (r,) = [r for r in sim.run(sc.calls) if r.error]
    explain(r, sc.world, sim.process)
    return r


def test_193_a_64_bit_dll_in_a_32_bit_process_in_words():
    from dlltrace.render.fixwords import BITS_CHECK, fix_markdown, fix_text
    from dlltrace.render.text import verdict_line

    r = _import_193("x86", "x64")
    assert (r.error, r.leaf.cause, r.leaf.facts.process_machine, r.leaf.facts.machines) == (193, "bad_machine", "x86", ("x64",))
    line = verdict_line(_replayed(r))
    assert line == ("✗ _ext.pyd is a 64-bit DLL (x64) in a 32-bit process (x86): Windows cannot load a 64-bit DLL "
                    "into a 32-bit process")
    (fix,) = [f for f in r.fixes if f.kind == "python_bitness"]
    text = fix_text(fix)
    assert text.startswith("Get the 32-bit build of what ships _ext.pyd (a win32 wheel, the x86 download), or use a "
                           "64-bit Python: this Python is 32-bit and _ext.pyd is 64-bit (x64)")
    assert "win_amd64 wheel is installed into a 32-bit Python" in text and BITS_CHECK in text
    assert "`python -c \"import sys;print(64 if sys.maxsize > 2**32 else 32)\"`" in fix_markdown(fix)
    # as the report writes it (each Python repr as typed: 'P' became "P", inside cmd's double quotes): verbatim
    from dlltrace.render.explained import as_typed
    assert BITS_CHECK in as_typed(text) and f"`{BITS_CHECK}`" in fix_markdown(fix, as_typed)


def test_193_a_32_bit_dll_in_a_64_bit_process_in_words():
    from dlltrace.render.fixwords import BITS_CHECK, fix_text
    from dlltrace.render.text import verdict_line

    r = _import_193("x64", "x86")
    assert (r.error, r.leaf.facts.process_machine, r.leaf.facts.machines) == (193, "x64", ("x86",))
    assert verdict_line(_replayed(r)) == ("✗ _ext.pyd is a 32-bit DLL (x86) in a 64-bit process (x64): Windows cannot "
                                          "load a 32-bit DLL into a 64-bit process")
    (fix,) = [f for f in r.fixes if f.kind == "python_bitness"]
    text = fix_text(fix)
    assert text.startswith("Get the 64-bit build of what ships _ext.pyd (a win_amd64 wheel, the x64 download), or use "
                           "a 32-bit Python: this Python is 64-bit and _ext.pyd is 32-bit (x86)") and BITS_CHECK in text
    # the same bits, another machine: no bitness words
    r = _import_193("x64", "arm64")
    assert verdict_line(_replayed(r)) == "✗ _ext.pyd is built for arm64, but this process is x64"


def _replayed(res):
    from types import SimpleNamespace

    return SimpleNamespace(result=res, failed=True, load=SimpleNamespace(name=res.name), real_error=res.error)


def test_deps_of_a_win32_wheel_says_the_python_is_32_bit(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    whl = _wheel(tmp_path, {"ext.pyd": _pe32("ext.pyd", ["kernel32.dll"])})
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(whl)], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(root / "tracer")}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Python 3.11 (32-bit, x86: System32 is SysWOW64 for it) at C:\\Python311" in r.stdout, r.stdout



def test_the_report_says_where_a_32_bit_process_looked_in_system32():
    from dlltrace.render.explained import result_words

    r = load32("b.dll", files=[x64(SYS32 + "\\b.dll")])
    (c,) = [c for c in r.tree.candidates if c.path.lower().startswith(SYS32.lower() + "\\")]
    assert (c.result, c.opened) == ("not_there", WOW + "\\b.dll")
    assert result_words(c) == f"not there (in {WOW}: a 32-bit process's System32)"
    r = load("b.dll", files=[x64(SYS32 + "\\b.dll")])  # a 64-bit process: no such words
    assert r.tree.candidates[1].opened is None and result_words(r.tree.candidates[1]) == "found"
