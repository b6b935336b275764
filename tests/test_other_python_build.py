"""An installed wheel that is the build for another Python (the field test, under Wine with the embeddable CPython
3.11): pywin32 306's cp310-cp310-win_amd64 wheel, whose .pyd names carry no tag, so Python 3.11 imports its
win32api.pyd, which imports python310.dll (explain.rule_extension_of_another_python); and its cp311-cp311-win32
wheel in a 64-bit Python: win32api.pyd is x86 (explain.rule_wheel_for_another_machine). The report said "install
the package's build for this Python" without naming the package, and "Get the 64-bit build of what ships
win32api.pyd"; the wheel's RECORD says whose file it is, and this Python's own pip reinstalling the same version
picks its build (done for real in tests/test_real_field.py: the import then runs)."""

from __future__ import annotations

import json
from pathlib import Path

from dlltrace import cli
from simhelp import handwritten, python_writer

PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"
PYD = SITE + "\\win32\\win32api.pyd"


def trace(tmp_path: Path, leaf: str = "python310.dll", listed: bool = True) -> Path:
    """`import win32api` of pywin32 306 (RECORD: win32/win32api.pyd when `listed`) in CPython 3.11 at PREFIX, its
    win32api.pyd importing `leaf`, which no folder searched holds (error 126); python311.dll and python3.dll are
    in PREFIX, the application folder."""
    h = handwritten()
    w, _ = python_writer(h, "import win32api", PREFIX)
    w.ev("py_dists", dists=[{"name": "pywin32", "version": "306", "site": SITE, "loaders": [],
                             "files": ["win32/win32api.pyd"] if listed else [], "tags": ["cp310-cp310-win_amd64"]}],
         conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_import", module="win32api")
    folders = [SITE + "\\win32", PREFIX, h.SYS32]
    w.load("LoadLibraryExW", PYD, 0x1100, ctx, [(PYD, 0)] + [(f + "\\" + leaf, 0xC0000034) for f in folders], 126,
           0xC0000135, None)
    w.ev("py_exception", type="ImportError", message="DLL load failed while importing win32api: The specified module "
         "could not be found.", module="win32api", path=PYD, winerror=None, causes=[])
    w.file(PYD, imports=[leaf, "kernel32.dll"])
    w.file(PREFIX + "\\python311.dll", imports=["kernel32.dll"])
    w.file(PREFIX + "\\python3.dll", imports=["python311.dll"])
    w.file(h.SYS32 + "\\kernel32.dll")
    w.write(tmp_path / "t.jsonl")
    return tmp_path / "t.jsonl"


def report(path: Path, capsys, fmt: str = "--json"):
    cli.main(["report", *([fmt] if fmt else []), str(path)])
    out = capsys.readouterr().out
    if fmt != "--json":
        return out
    d = json.loads(out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    return call


def test_rule_extension_of_another_python(tmp_path, capsys):
    call = report(trace(tmp_path), capsys)
    assert (call["leaf"]["name"], call["leaf"]["parent"]) == ("python310.dll", "win32api.pyd"), call["leaf"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["version"], first["path"], first["need"]) == (
        "install", "pywin32", "306", PYD, "3.10"), first
    assert first["text"] == (
        "win32api.pyd is pywin32 306's (its RECORD lists win32/win32api.pyd), and that wheel is its build for Python "
        "3.10: win32api.pyd imports python310.dll, the Python 3.10 interpreter's own DLL. Install its build for this "
        "Python with this Python's own pip:  C:\\py\\python.exe -m pip install --force-reinstall --no-deps pywin32==306")
    text = report(tmp_path / "t.jsonl", capsys, fmt="")
    assert "✗ python310.dll was not found — it is needed by win32api.pyd; win32api.pyd is pywin32 306's build for " \
        "Python 3.10, another Python" in text, text
    # (nothing of pywin32 is gone: never "its install is damaged")
    assert "RECORD lists it, and it is not there" not in text and "install is damaged" not in text, text
    md = report(tmp_path / "t.jsonl", capsys, fmt="--markdown")
    assert "win32api.pyd is pywin32 306's build for Python 3.10" in md.split("\n", 1)[0], md[:1000]
    assert "`C:\\py\\python.exe -m pip install --force-reinstall --no-deps pywin32==306`" in md, md[:2000]


def test_rule_extension_of_another_python_of_no_wheel(tmp_path, capsys):
    # an importer no wheel's RECORD lists: whose build it is is not known, no reinstall (the advice only)
    call = report(trace(tmp_path, listed=False), capsys)
    assert call["leaf"]["name"] == "python310.dll", call["leaf"]
    assert all(f["action"] != "install" or not f.get("package") for f in call["fixes"]), call["fixes"]
    assert call["fixes"][0]["text"].startswith("python310.dll is the Python 3.10 interpreter's own DLL"), call["fixes"]


def test_rule_close_name_in_a_searched_folder(tmp_path, capsys):
    """python311.dll and python3.dll, beside python.exe in the application folder the load searched: another
    version's files, said to be in a folder this load searched (they were said to be "in no folder the loader
    searches")."""
    call = report(trace(tmp_path), capsys)
    close = {c["path"]: (c["relation"], c.get("rule")) for c in call["close_names"]}
    assert close[PREFIX + "\\python311.dll"] == ("searched", "in a folder this load searched (APPLICATION_DIR)"), close
    text = report(tmp_path / "t.jsonl", capsys, fmt="")
    assert "C:\\py\\python311.dll  in a folder this load searched (APPLICATION_DIR)" in text, text
    assert "in no folder the loader searches" not in text, text
