"""A wrong-machine file its own distribution's RECORD lists (the field test, under Wine): pygame 2.6.1's SDL2.dll
replaced by the win32 wheel's, and pillow 11.0.0's _imaging.cp311-win_amd64.pyd by the win32 wheel's build. The
file is not the one pip installed; reinstalling the distribution (which put the x64 file back, and the import then
worked) is the first fix, not only "get the 64-bit build of what ships it"."""

from __future__ import annotations

import json
from pathlib import Path

from dlltrace import cli
from simhelp import handwritten, python_writer

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"


def report(tmp_path: Path, capsys, dist: str, version: str, files: list[str], module: str, root: str,
           dep: "str | None", dep_machine: str = "x86", root_machine: str = "x64", fmt: str = "--json",
           tags: "list | None" = None):
    """`import module` of SITE\\root (of root_machine), which imports `dep` from its own folder (of dep_machine):
    error 193. `files`: what the distribution's RECORD lists (relative to SITE)."""
    h = handwritten()
    w, _ = python_writer(h, "import app", PREFIX)
    w.ev("py_dists", dists=[{"name": "pip", "version": "24.0", "site": SITE, "files": [], "loaders": []},
                            {"name": dist, "version": version, "site": SITE, "files": files, "loaders": [],
                             **({"tags": tags} if tags is not None else {})}],
         conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module=module)
    pyd = SITE + "\\" + root.replace("/", "\\")
    probes = [(pyd, 0)]
    if dep:
        probes.append((winpath_dir(pyd) + "\\" + dep, 0))
    w.load("LoadLibraryExW", pyd, 0x1100, ctx, probes, 193, 0xC000007B, None)
    w.file(pyd, imports=[*([dep] if dep else []), "python311.dll", "kernel32.dll"], machine=root_machine)
    if dep:
        w.file(winpath_dir(pyd) + "\\" + dep, imports=["kernel32.dll"], machine=dep_machine)
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", *([fmt] if fmt else []), str(tmp_path / "t.jsonl")])
    out = capsys.readouterr().out
    if fmt != "--json":
        return out
    d = json.loads(out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    return call["fixes"]


def steps(f: dict) -> list[dict]:
    return [f, *(s for t in f.get("then", []) for s in steps(t))]


def winpath_dir(p: str) -> str:
    return p.rsplit("\\", 1)[0]


def test_rule_wrong_machine_file_of_its_own_wheel(tmp_path, capsys):
    # pygame's x64 base.pyd imports pygame's own SDL2.dll, which is x86: not the file pip installed
    files = ["pygame/base.cp311-win_amd64.pyd", "pygame/SDL2.dll"]
    fixes = report(tmp_path, capsys, "pygame", "2.6.1", files, "pygame.base", files[0], "SDL2.dll")
    first = fixes[0]
    assert (first["action"], first.get("package"), first.get("version"), first.get("verified")) == \
        ("install", "pygame", "2.6.1", True), fixes
    assert first["text"].startswith("SDL2.dll at C:\\py\\Lib\\site-packages\\pygame\\SDL2.dll is 32-bit (x86): it is not "
                                    "the file pygame 2.6.1 installed (its RECORD lists pygame/SDL2.dll"), first["text"]
    assert "C:\\py\\python.exe -m pip install --force-reinstall --no-deps pygame==2.6.1" in first["text"]
    # and no chain changes the process's machine twice ("use a 32-bit Python, then a 64-bit one, then reinstall")
    for f in fixes:
        assert [s["kind"] for s in steps(f)].count("python_bitness") <= 1, f
    # the extension itself: its name's platform tag says the build pip installed (pillow's win_amd64 .pyd, x86 inside)
    files = ["PIL/_imaging.cp311-win_amd64.pyd"]
    fixes = report(tmp_path, capsys, "pillow", "11.0.0", files, "PIL._imaging", files[0], None, root_machine="x86")
    assert (fixes[0]["action"], fixes[0].get("package")) == ("install", "pillow"), fixes
    # not its own wheel's module that needs it, no platform tag: which build the wheel ships is unknown -- no reinstall
    # (an extension RECORD does not list, in the folder, imports the distribution's x86 helper.dll)
    fixes = report(tmp_path, capsys, "otherpkg", "1.0", ["otherpkg/helper.dll"], "otherpkg.mine",
                   "otherpkg/mine.cp311-win_amd64.pyd", "helper.dll")
    assert fixes and fixes[0]["kind"] == "python_bitness", fixes
    assert all(f["action"] != "install" for f in fixes), fixes


def test_rule_wrong_machine_file_of_its_own_wheel_by_its_tags(tmp_path, capsys):
    """The field test's xgboost 2.1.3 (py3-none-win_amd64) under Wine: its xgboost\\lib\\xgboost.dll, loaded by full
    path from xgboost's own code, replaced by a 32-bit DLL (error 193). No importer, no platform tag in its name:
    the wheel's tags (its WHEEL file, py_dists `tags`) say it is built for x64 only, so the x86 file is not the one
    pip installed: reinstall xgboost (the generic "get the 64-bit build" was all the report said)."""
    files = ["xgboost/lib/xgboost.dll"]
    fixes = report(tmp_path, capsys, "xgboost", "2.1.3", files, "xgboost.core", files[0], None, root_machine="x86",
                   tags=["py3-none-win_amd64"])
    assert (fixes[0]["action"], fixes[0].get("package"), fixes[0].get("version")) == ("install", "xgboost", "2.1.3"), \
        fixes
    # a wheel for every platform (py3-none-any: clr_loader ships ffi/dlls/x86 and amd64): which file is for which
    # machine is not the tag's to say -- no reinstall
    fixes = report(tmp_path, capsys, "clr_loader", "0.3.1", ["clr_loader/ffi/dlls/x86/ClrLoader.dll"], "clr_loader.ffi",
                   "clr_loader/ffi/dlls/x86/ClrLoader.dll", None, root_machine="x86", tags=["py3-none-any"])
    assert all(f["action"] != "install" for f in fixes), fixes


def test_rule_wheel_for_another_machine(tmp_path, capsys):
    """The field test's pywin32 306 cp311-cp311-win32 wheel in a 64-bit CPython 3.11 (under Wine): its win32api.pyd,
    named with no platform tag, is imported and is x86 (error 193). The file is the one pip installed: the wheel is
    the wrong one (its tags name win32 only), and this Python's own pip reinstalling pywin32 306 picks its
    win_amd64 build. The report said only "Get the 64-bit build of what ships win32api.pyd"."""
    files = ["win32/win32api.pyd", "pywin32_system32/pywintypes311.dll"]
    fixes = report(tmp_path, capsys, "pywin32", "306", files, "win32api", files[0], None, root_machine="x86",
                   tags=["cp311-cp311-win32"])
    first = fixes[0]
    assert (first["action"], first["package"], first["version"], first["need"], first["verified"]) == (
        "install", "pywin32", "306", "win32", True), fixes
    assert first["text"] == (
        "win32api.pyd is pywin32 306's (its RECORD lists win32/win32api.pyd), and the pywin32 installed here is its "
        "win32 wheel, 32-bit (x86), for another Python than this x64 one: install its build for this Python with this "
        "Python's own pip:  C:\\py\\python.exe -m pip install --force-reinstall --no-deps pywin32==306"), first["text"]
    assert fixes[1]["kind"] == "python_bitness", fixes  # (then the general advice)
    # a wheel of this machine (win_amd64) whose file is x86: not the file pip installed (the rule before), other words
    fixes = report(tmp_path, capsys, "pywin32", "306", files, "win32api", files[0], None, root_machine="x86",
                   tags=["cp311-cp311-win_amd64"])
    assert fixes[0]["package"] == "pywin32" and "need" not in fixes[0], fixes[0]
    assert "is not the file pywin32 306 installed" in fixes[0]["text"], fixes[0]["text"]
