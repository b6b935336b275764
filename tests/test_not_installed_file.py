"""A native file at a path its distribution's RECORD lists, of another size than RECORD gives: not the file that
distribution installed (a `pip install -U` that could not replace a DLL a running process held, leaving the old DLL
next to the new .pyd; a DLL copied over the package's own). The report says so and offers the reinstall first
(explain.rule_not_the_file_its_distribution_installed). Traces without RECORD's sizes (older) report as before."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from simhelp import handwritten, python_writer

from dlltrace import cli

NEW, OLD = 2_499_072, 1_561_088  # pygame 2.6.1's SDL2.dll, as its RECORD lists it; pygame 2.0.1's
NEW_WHEEL = ("pygame", "2.6.1", "pygame-2.6.1-cp311-cp311-win_amd64.whl")  # (realwheels.Wheel's fields, pinned there)
OLD_WHEEL = ("pygame", "2.0.1", "pygame-2.0.1-cp39-cp39-win_amd64.whl", "win_amd64", "3.9")


def _trace(dest: Path, *, sizes: bool = True, disk: int = OLD, exit_code: int = 1) -> Path:
    """`import pygame.base` of pygame 2.6.1, whose base.pyd imports SDL_NewFn from its own SDL2.dll; the SDL2.dll at
    that path (`disk` bytes) lacks it: 127. `sizes`: the trace has RECORD's sizes and the files' (a trace made before
    them has neither)."""
    hw = handwritten()
    w, site = python_writer(hw, "import pygame.base")
    pkg = site + "\\pygame"
    files = ["pygame/base.cp311-win_amd64.pyd", "pygame/SDL2.dll"]
    dist = {"name": "pygame", "version": "2.6.1", "site": site, "files": files, "loaders": []}
    if sizes:
        dist["sizes"] = [27_136, NEW]
    w.ev("py_dists", dists=[dist], conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module="pygame.base")
    pyd, sdl = pkg + "\\base.cp311-win_amd64.pyd", pkg + "\\SDL2.dll"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0), (sdl, 0)], 127, 0xC0000139, None)
    w.file(pyd, imports=[{"dll": "SDL2.dll", "names": ["SDL_Init", "SDL_NewFn"], "ordinals": []}, "python311.dll",
                         "kernel32.dll"])
    w.file(sdl, exports=["SDL_Init"], imports=["kernel32.dll"])
    w.file("C:\\Python311\\python311.dll", exports=[])
    if sizes:
        w.files[-3]["size"] = 27_136
        w.files[-2]["size"] = disk
    w.write(dest, exit_code=exit_code)
    return dest


def _fixes(capsys, trace: Path) -> list[dict]:
    cli.main(["report", "--json", str(trace)])
    d = json.loads(capsys.readouterr().out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    return call["fixes"]


def test_rule_not_the_file_its_distribution_installed(tmp_path, capsys):
    fixes = _fixes(capsys, _trace(tmp_path / "t.jsonl"))
    first = fixes[0]
    assert (first["action"], first["package"], first["version"], first["size"], first["record_size"],
            first["verified"]) == ("install", "pygame", "2.6.1", OLD, NEW, True), fixes
    assert first["text"] == (
        "SDL2.dll at C:\\Python311\\Lib\\site-packages\\pygame\\SDL2.dll is not the file pygame 2.6.1 installed: it is "
        "1,561,088 bytes, and its RECORD lists pygame/SDL2.dll at 2,499,072 (another build put over it: an upgrade that "
        "could not replace a file in use, or a copy): reinstall it:  C:\\Python311\\python.exe -m pip install "
        "--force-reinstall --no-deps pygame==2.6.1"), first["text"]
    assert sum(f["action"] == "install" for f in fixes) == 1, fixes  # (said once)
    cli.main(["report", str(tmp_path / "t.jsonl")])
    text = capsys.readouterr().out
    assert "is not the file pygame 2.6.1 installed" in text, text
    # the file its RECORD lists at its size: nothing said, whatever else is offered
    same = _fixes(capsys, _trace(tmp_path / "same.jsonl", disk=NEW))
    assert all(f.get("record_size") is None and "not the file" not in f["text"] for f in same), same


def test_not_installed_file_an_older_trace_reports_as_before(tmp_path, capsys):
    """A trace made before RECORD's sizes were recorded (no py_dists `sizes`, no file `size`) reads and reports as one
    whose file is the one RECORD lists: no reinstall, the same words."""
    (tmp_path / "old").mkdir()
    (tmp_path / "same").mkdir()
    old = _trace(tmp_path / "old" / "t.jsonl", sizes=False)  # (one name: the Markdown names the file)
    same = _trace(tmp_path / "same" / "t.jsonl", disk=NEW)
    outs = []
    for t in (old, same):
        for fmt in ([], ["--markdown"], ["--json"]):
            cli.main(["report", *fmt, str(t)])
            outs.append(capsys.readouterr().out.replace(str(t), "T"))
    assert outs[:3] == outs[3:]
    assert "not the file" not in outs[0] and "--force-reinstall" not in outs[0], outs[0]


def test_not_installed_file_sizes_go_from_the_disk_into_the_trace_and_back(tmp_path):
    """`run`'s facts keep each file's size (the stat it made anyway); the trace's world reads it back, and RECORD's
    from py_dists (a `sizes` list that does not match `files` is not read); an older event has none."""
    from dlltrace.trace.reader import owners_index
    from dlltrace.worlds.live import facts_for
    from dlltrace.worlds.recorded import facts_of_event, file_event

    f = tmp_path / "x.dll"
    f.write_bytes(b"MZ" + b"\0" * 98)  # (not a PE: its size all the same)
    facts = facts_for("C:\\x.dll", str(f))
    assert facts is not None and (facts.error, facts.size) == ("not_pe", 100)
    e = file_event("C:\\x.dll", facts)
    assert e["size"] == 100 and facts_of_event(e) == facts
    assert facts_of_event({"ev": "file", "path": "C:\\x.dll", "kind": "not_pe"}).size is None  # type: ignore[union-attr]
    assert facts_for("C:\\d", str(tmp_path)) is None  # (a folder is no file)
    dists = {"ev": "py_dists", "dists": [
        {"name": "a", "version": "1", "site": "C:\\s", "files": ["a/x.dll", "a/y.pyd"], "sizes": [10, None]},
        {"name": "b", "version": "2", "site": "C:\\s", "files": ["b/z.dll"], "sizes": [1, 2]},  # (not one a file)
        {"name": "c", "version": "3", "site": "C:\\s", "files": ["c/w.dll"]}]}  # (an older trace)
    owners = owners_index([dists])
    assert [(o.path, o.size) for k in ("x.dll", "y.pyd", "z.dll", "w.dll") for o in owners[k]] == [
        ("a/x.dll", 10), ("a/y.pyd", None), ("b/z.dll", None), ("c/w.dll", None)]



def _ended_trace(dest: Path, *, exit_code: int = 1, exception: bool = True, disk: int = OLD, sizes: bool = True) -> Path:
    """The real case's shape: `import pygame` loads base.pyd and, with it, its SDL2.dll (`disk` bytes; the loader's
    DLL notifications say so), and the program ends on pygame's own RuntimeError (`exception`), no load failed."""
    hw = handwritten()
    w, site = python_writer(hw, "import pygame")
    pkg = site + "\\pygame"
    dist = {"name": "pygame", "version": "2.6.1", "site": site, "loaders": [],
            "files": ["pygame/base.cp311-win_amd64.pyd", "pygame/SDL2.dll"]}
    if sizes:
        dist["sizes"] = [27_136, NEW]
    w.ev("py_dists", dists=[dist], conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module="pygame.base")
    pyd, sdl = pkg + "\\base.cp311-win_amd64.pyd", pkg + "\\SDL2.dll"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0), (sdl, 0)], 0, 0, pyd)
    begin = w.lines[-1]["load"]
    for path in (sdl, pyd):  # (before its load_end, as the shim writes them)
        w.lines.insert(len(w.lines) - 1, {**w.lines[-1], "ev": "dll_notify", "load": begin, "reason": "loaded",
                                          "path": path, "base": "0x10000000"})
    for i, line in enumerate(w.lines[1:], 1):
        line["seq"] = i
    w.seq = len(w.lines) - 1
    w.file(pyd, imports=[{"dll": "SDL2.dll", "names": ["SDL_Init"], "ordinals": []}, "python311.dll", "kernel32.dll"])
    w.file(sdl, exports=["SDL_Init"], imports=["kernel32.dll"])
    w.file("C:\\Python311\\python311.dll", exports=[])
    if sizes:
        w.files[-3]["size"], w.files[-2]["size"] = 27_136, disk
    if exception:
        w.ev("py_exception", type="RuntimeError", message="Dynamic linking causes SDL downgrade! (compiled with version "
             "2.28.4, linked to 2.0.14)", module=None, path=None, winerror=None, causes=[])
    w.write(dest, exit_code=exit_code)
    return dest


def test_not_installed_file_loaded_by_a_program_that_died_of_no_failed_load(tmp_path, capsys):
    """No load failed and the program ended on an error of its own (pygame's "Dynamic linking causes SDL downgrade!"):
    the module it loaded that is not the file its distribution installed is the news, in the first line and with its
    reinstall (analysis.not_installed_files), in text, Markdown and JSON."""
    t = _ended_trace(tmp_path / "t.jsonl")
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert text.splitlines()[0] == (
        "dlltrace ─ the program ended with RuntimeError: Dynamic linking causes SDL downgrade! (compiled with version "
        f"2.28.4, linked to 2.0.14); no failed load explains it, and SDL2.dll is not the file pygame 2.6.1 installed · {t}")
    assert text.splitlines()[2:7] == [
        "Not the files their distributions installed (RECORD lists each at this path with another size: another build "
        "was put there)",
        "  ✗ SDL2.dll — loaded by import pygame.base: LoadLibraryExW(C:\\Python311\\Lib\\site-packages\\pygame\\"
        "base.cp311-win_amd64.pyd)",
        "    Fix (not checked by the model: no failed load is what it fixes):",
        "      SDL2.dll at C:\\Python311\\Lib\\site-packages\\pygame\\SDL2.dll is not the file pygame 2.6.1 installed: "
        "it is 1,561,088 bytes, and its RECORD lists pygame/SDL2.dll at 2,499,072 (another build put over it: "
        "an upgrade that could not replace a file in use, or a copy): reinstall it:",
        "      C:\\Python311\\python.exe -m pip install --force-reinstall --no-deps pygame==2.6.1"], text  # (it pastes)
    cli.main(["report", "--markdown", str(t)])
    md = capsys.readouterr().out
    assert md.splitlines()[0].endswith("`SDL2.dll` is not the file pygame 2.6.1 installed."), md
    assert "- `SDL2.dll` — loaded by import pygame.base, loading `base.cp311-win_amd64.pyd`." in md, md
    cli.main(["report", "--json", str(t)])
    (x,) = json.loads(capsys.readouterr().out)["not_installed"]
    assert (x["origin"], x["reinstall"]["package"], x["reinstall"]["size"], x["reinstall"]["record_size"],
            x["reinstall"]["verified"]) == ("import pygame.base", "pygame", OLD, NEW, None), x
    # the file RECORD lists at its size, or a trace without sizes: nothing said (the report of before)
    for other in (_ended_trace(tmp_path / "same.jsonl", disk=NEW), _ended_trace(tmp_path / "old.jsonl", sizes=False)):
        cli.main(["report", str(other)])
        assert "not the file" not in capsys.readouterr().out
        cli.main(["report", "--json", str(other)])
        assert json.loads(capsys.readouterr().out)["not_installed"] == []
    # a program that exited 0: every load succeeded, and that one line is all (the JSON still lists the file)
    ok = _ended_trace(tmp_path / "ok.jsonl", exit_code=0, exception=False)
    cli.main(["report", str(ok)])
    assert capsys.readouterr().out.splitlines() == [f"dlltrace ─ every load succeeded (1 load traced) · {ok}"]
    cli.main(["report", "--json", str(ok)])
    assert len(json.loads(capsys.readouterr().out)["not_installed"]) == 1



def test_not_installed_file_whose_missing_export_wine_bound_to_a_stub(tmp_path, capsys):
    """Under Wine a missing export does not fail the load (a stub is bound: docs/wine-profile.md), so no failed load
    carries the reinstall; the DLL that lacks it, a file its distribution did not install, is listed after the
    imports Wine bound to a stub (which fail on Windows with 127), with its reinstall. No DLL notification in this
    trace: the model's own binding of the load says which file was mapped."""
    hw = handwritten()
    w, site = python_writer(hw, "import pkg._ext")
    w.lines[2]["wine"] = "wine-8.0"
    pkg = site + "\\pkg"
    w.ev("py_dists", dists=[{"name": "pkg", "version": "3.0", "site": site, "loaders": [],
                             "files": ["pkg/_ext.cp311-win_amd64.pyd", "pkg/stub.dll"], "sizes": [5_000, 90_112]}],
         conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module="pkg._ext")
    pyd, stub = pkg + "\\_ext.cp311-win_amd64.pyd", pkg + "\\stub.dll"
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, [(pyd, 0), (stub, 0)], 0, 0, pyd)
    w.file(pyd, imports=[{"dll": "stub.dll", "names": ["stub_fn", "ok_fn"], "ordinals": []}, "kernel32.dll"])
    w.file(stub, exports=["ok_fn"])
    w.files[-2]["size"], w.files[-1]["size"] = 5_000, 40_960
    t = tmp_path / "t.jsonl"
    w.write(t, exit_code=0)
    cli.main(["report", str(t)])
    text = capsys.readouterr().out
    assert text.startswith("dlltrace ─ every load succeeded under Wine (1 load traced); 1 import Wine bound to a stub "
                           "would fail on Windows"), text
    assert "✗ stub.dll does not export stub_fn — it is needed by _ext.cp311-win_amd64.pyd" in text
    assert (f"  ✗ stub.dll — loaded by import pkg._ext: LoadLibraryExW({pyd})\n    Fix (not checked by the model: no "
            f"failed load is what it fixes):\n      stub.dll at {stub} is not the file pkg 3.0 installed: it is 40,960 bytes, "
            "and its RECORD lists pkg/stub.dll at 90,112") in text, text


@pytest.mark.wine
def test_not_installed_file_pygame_with_an_older_wheels_sdl2_under_wine(wine_prefix):
    """The real case, under Wine: pygame 2.6.1 (cp311 win_amd64, its RECORD as pip writes it) in the embeddable
    CPython 3.11, its SDL2.dll replaced by pygame 2.0.1's (SDL 2.0.14, 1,561,088 bytes; RECORD says 2,499,072) --
    what a `pip install -U pygame` leaves when a running game held SDL2.dll. base.pyd imports nothing the old SDL2
    lacks (Wine binds no stub: Windows loads it too), and pygame's own check fails the import: "RuntimeError: Dynamic
    linking causes SDL downgrade!". The report said only that no failed load explains it; now it says SDL2.dll is
    not the file pygame 2.6.1 installed and offers the reinstall, which, made for real (the wheel's files put back,
    as pip's --force-reinstall does), makes `import pygame; pygame.init()` work."""
    import realimports as ri
    import realwheels as rw

    new, old = (rw.Wheel(*w) for w in (NEW_WHEEL, OLD_WHEEL))
    try:
        rw.fetch_wheel(new)
        rw.fetch_wheel(old)
        base = ri.base_env()
    except (ri.Unavailable, rw.WheelUnavailable) as e:
        pytest.fail(str(e)) if os.environ.get("CI") else pytest.skip(str(e))
    # (a folder of this run's own: test_real_imports' teardown removes its `cases` folder, whoever's run it is)
    where = ri.CACHE / f"not-installed-{os.getpid()}"
    try:
        _pygame_case(ri, rw, new, old, ri.env_copy(base, where / "env"), where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _pygame_case(ri, rw, new, old, env, where: Path) -> None:
    """test_not_installed_file_pygame_with_an_older_wheels_sdl2_under_wine, in the environment `env`."""

    def install(w) -> None:  # (every file of the wheel where pip puts it, its .dist-info and RECORD too)
        for m in rw.wheel_members(w):
            rw.place(rw.wheel_member(w, m), env.root / (rw.install_target(w, m) or f"Lib/site-packages/{m}"))

    install(new)
    rw.place(rw.wheel_member(old, "pygame/SDL2.dll"), env.site / "pygame" / "SDL2.dll")
    code = "import pygame; print('init', pygame.init())"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module")
    log = ri.parse_loader_log(plain.stderr)
    assert plain.returncode == 1 and ri.python_exception(plain.stderr) == (
        "RuntimeError", "Dynamic linking causes SDL downgrade! (compiled with version 2.28.4, linked to 2.0.14)"), \
        ri.program_output(plain.stderr)
    sdl = env.win("Lib/site-packages/pygame/SDL2.dll")
    assert sdl.lower() in {p.lower() for p in log.native} and log.stubs == [], (log.native, log.stubs)
    trace = where / "t.jsonl"
    traced = ri.run_python(env, code, traced=trace)
    assert traced.returncode == 1, traced.stdout + traced.stderr[-2000:]
    text = ri.report_text(trace)
    head = text.splitlines()[0]
    assert head.startswith("dlltrace ─ the program ended with RuntimeError: Dynamic linking causes SDL downgrade! "
                           "(compiled with version 2.28.4, linked to 2.0.14); no failed load explains it, and SDL2.dll "
                           "is not the file pygame 2.6.1 installed · "), text
    assert f"  ✗ SDL2.dll — loaded by import pygame.base: LoadLibraryExW(" in text, text
    assert (f"Fix (not checked by the model: no failed load is what it fixes):\n      SDL2.dll at {sdl} is not the file "
            f"pygame 2.6.1 installed: it is 1,561,088 bytes, and its RECORD lists pygame/SDL2.dll at 2,499,072") in text, \
        text
    assert "pip install --force-reinstall --no-deps pygame==2.6.1" in text, text
    doc = ri.report_json(trace)
    (x,) = doc["not_installed"]
    fix = x["reinstall"]
    assert (x["path"].lower(), fix["action"], fix["package"], fix["version"], fix["size"], fix["record_size"]) == (
        sdl.lower(), "install", "pygame", "2.6.1", OLD, NEW), x
    assert "`SDL2.dll` is not the file pygame 2.6.1 installed." in ri.report_markdown(trace).splitlines()[0]
    # the fix, for real: the distribution the fix names reinstalled from its wheel (pip's --force-reinstall --no-deps)
    assert (fix["package"], fix["version"]) == (new.dist, new.version)
    install(new)
    fixed = ri.run_python(env, code, winedebug="+loaddll,+module")
    assert fixed.returncode == 0 and ri.DONE in fixed.stdout and "init (" in fixed.stdout, \
        fixed.stdout + ri.program_output(fixed.stderr)
    assert (env.site / "pygame" / "SDL2.dll").stat().st_size == NEW
    traced = ri.run_python(env, code, traced=trace)
    assert traced.returncode == 0 and ri.report_json(trace)["not_installed"] == [], traced.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux recorder runs here")
def test_rule_linux_not_the_file_its_distribution_installed(tmp_path):
    """The same on Linux, for real (gcc, ld.so, the LD_PRELOAD recorder): a wheel-like distribution `mypkg` 2.0 in a
    site-packages folder, whose RECORD lists mypkg/libmain.so (it needs foo_new) and mypkg/libfoo.so (2.0's defines
    it); 1.0's libfoo.so, without foo_new, copied over it. ld.so: "libmain.so: undefined symbol: foo_new". The first
    fix names libfoo.so as not the file mypkg 2.0 installed; put back (the reinstall, for real), the load works."""
    import base64
    import hashlib
    import subprocess

    if shutil.which("gcc") is None:
        pytest.fail("needs gcc -- CI installs it") if os.environ.get("CI") else pytest.skip("needs gcc")
    root = Path(__file__).resolve().parent.parent
    build = tmp_path / "build"
    build.mkdir()
    (build / "foo2.c").write_text("int foo_old(void) { return 1; }\nint foo_new(void) { return 2; }\n")
    (build / "foo1.c").write_text("int foo_old(void) { return 1; }\n")
    (build / "main.c").write_text("int foo_new(void);\nint main_fn(void) { return foo_new(); }\n")
    site = tmp_path / "lib" / "site-packages"
    pkg = site / "mypkg"
    pkg.mkdir(parents=True)
    for src, out in (("foo2.c", build / "v2" / "libfoo.so"), ("foo1.c", build / "v1" / "libfoo.so")):
        out.parent.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libfoo.so", "-o", str(out), str(build / src)], check=True)
    shutil.copy(build / "v2" / "libfoo.so", pkg / "libfoo.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "libmain.so"), str(build / "main.c"), "-L", str(pkg),
                    "-lfoo", "-Wl,-rpath,$ORIGIN"], check=True)
    (pkg / "__init__.py").write_text("")
    info = site / "mypkg-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 2.0\n")

    def row(rel: str) -> str:
        data = (site / rel).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{rel},sha256={digest},{len(data)}"

    (info / "RECORD").write_text("\n".join([*(row(r) for r in ("mypkg/__init__.py", "mypkg/libfoo.so",
                                                               "mypkg/libmain.so", "mypkg-2.0.dist-info/METADATA")),
                                            "mypkg-2.0.dist-info/RECORD,,"]) + "\n")
    new = (pkg / "libfoo.so").stat().st_size
    (pkg / "libfoo.so").unlink()
    shutil.copy(build / "v1" / "libfoo.so", pkg / "libfoo.so")  # (1.0's, put over 2.0's own)
    old = (pkg / "libfoo.so").stat().st_size
    assert old != new
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "tracer"), str(site)])}
    code = f"import ctypes; ctypes.CDLL({str(pkg / 'libmain.so')!r}); print('loaded')"
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", sys.executable, "-c", code],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "undefined symbol: foo_new" in r.stderr, r.stderr[-3000:]
    rep = subprocess.run([sys.executable, "-m", "dlltrace", "report", "--json", str(trace)], capture_output=True,
                         text=True, env=env, timeout=300)
    doc = json.loads(rep.stdout)
    fatal = doc["failed"][doc["fatal"]]
    assert (fatal["leaf"]["name"], fatal["leaf"]["cause"]) == ("libmain.so", "missing_export"), fatal
    first = fatal["fixes"][0]["fix"]  # (the Linux report's fix: its typed fields under "fix")
    assert (first["action"], first["package"], first["version"], first["path"], first["size"], first["record_size"]) \
        == ("install", "mypkg", "2.0", str(pkg / "libfoo.so"), old, new), fatal["fixes"]
    assert first["text"].startswith(f"libfoo.so at {pkg / 'libfoo.so'} is not the file mypkg 2.0 installed: it is "
                                    f"{old:,} bytes, and its RECORD lists mypkg/libfoo.so at {new:,}"), first["text"]
    assert "pip install --force-reinstall --no-deps mypkg==2.0" in first["text"]
    assert "is not the file mypkg 2.0 installed" in r.stderr  # (the run's own report)
    # the reinstall, for real: 2.0's libfoo.so put back where RECORD says; the load then works
    shutil.copy(build / "v2" / "libfoo.so", pkg / "libfoo.so")
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and again.stdout == "loaded\n", again.stderr
