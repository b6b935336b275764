"""A file its distribution's RECORD lists, that the load looked for exactly there, and that is gone, while another
copy of the name is elsewhere (explain.rule_record_listed_file_looked_for). The field test's scikit-learn 1.5.2:
its _distributor_init.py loads sklearn\\.libs\\vcomp140.dll by full path; with that file deleted the program ends
on FileNotFoundError, and System32 holds a vcomp140.dll (the VC++ runtime's, or Wine's own). The report said
"installed but not searched" and its one fix copied System32's file into sklearn\\.libs; the file at fault is
scikit-learn's own, and reinstalling scikit-learn puts it back (tests/test_real_field.py does it for real under
Wine)."""

from __future__ import annotations

from pathlib import Path

from dlltrace import cli
from simhelp import failed_call, handwritten, python_writer

PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"
VCOMP = SITE + "\\sklearn\\.libs\\vcomp140.dll"


def trace(tmp_path: Path, listed: bool = True, system_copy: bool = True) -> Path:
    h = handwritten()
    w, _ = python_writer(h, "import sklearn", PREFIX)
    files = ["sklearn/.libs/vcomp140.dll", "sklearn/.libs/msvcp140.dll"] if listed else []
    w.ev("py_dists", dists=[{"name": "scikit-learn", "version": "1.5.2", "site": SITE, "files": files, "loaders": []}],
         conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_dlopen", name=VCOMP, mode=None, frame={"file": "<string>", "line": 1, "function": "<module>"},
               imports=["sklearn", "sklearn._distributor_init"])
    w.load("LoadLibraryExW", VCOMP, 0x1100, ctx, [(VCOMP, 0xC0000034)], 126, 0xC0000135, None)
    w.ev("py_exception", type="FileNotFoundError", message=f"Could not find module '{VCOMP}' (or one of its "
         "dependencies). Try using the full path with constructor syntax.", module=None, path=None, winerror=None,
         causes=[])
    w.file(VCOMP, kind="missing")
    if system_copy:
        w.file(h.SYS32 + "\\vcomp140.dll", imports=["kernel32.dll"], version="14.40.33810.0")
    w.file(h.SYS32 + "\\kernel32.dll")
    w.write(tmp_path / "t.jsonl")
    return tmp_path / "t.jsonl"




def test_rule_record_listed_file_looked_for(tmp_path, capsys):
    """The file the full-path load asked for is scikit-learn's (its RECORD), and gone: reinstalling scikit-learn
    is the first fix, checked by the model, and the report says whose file is gone, not that a copy elsewhere is
    unsearched (System32's copy is still offered, after it)."""
    call = failed_call(trace(tmp_path), capsys)
    assert call["leaf"]["name"].lower().endswith("vcomp140.dll") and call["leaf"]["cause"] == "not_found", call["leaf"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["path"]) == ("install", "scikit-learn", VCOMP), first
    assert first["verified"] is True and "its RECORD lists sklearn/.libs/vcomp140.dll" in first["text"], first
    assert any(f["action"] == "copy_file" for f in call["fixes"][1:]), [f["action"] for f in call["fixes"]]
    cli.main(["report", str(tmp_path / "t.jsonl")])
    text = capsys.readouterr().out
    assert "its distribution's RECORD lists it, and it is not there" in text, text
    assert "Cause: scikit-learn's install is damaged: its own vcomp140.dll is gone" in text, text
    assert "installed but not searched" not in text, text


def test_rule_record_listed_file_looked_for_no_record(tmp_path, capsys):
    """No RECORD lists the file: nothing says whose it was, and the copy elsewhere is the answer (as before)."""
    call = failed_call(trace(tmp_path, listed=False), capsys)
    assert all(f["action"] != "install" for f in call["fixes"]), call["fixes"]
    cli.main(["report", str(tmp_path / "t.jsonl")])
    assert "installed but not searched" in capsys.readouterr().out


def test_rule_record_listed_file_looked_for_no_copy_anywhere(tmp_path, capsys):
    """No copy anywhere (a pip package ships the name, too: vcomp140.dll is the VC++ runtime's): the reinstall is
    first, once."""
    call = failed_call(trace(tmp_path, system_copy=False), capsys)
    installs = [f for f in call["fixes"] if f["action"] == "install" and f.get("package")]
    assert call["fixes"][0] is installs[0] and len(installs) == 1 and installs[0]["package"] == "scikit-learn", \
        [(f["action"], f.get("package")) for f in call["fixes"]]


def test_a_record_listed_file_gone_is_not_also_searched_for(tmp_path, capsys):
    """A DLL no table knows (delvewheel's mangled sqlite3-<hash>.dll of pyproj), its RECORD's, gone, no copy
    anywhere: the reinstall of its distribution is the fix, with no "find the package that ships it" after it (the
    RECORD named that package: the Windows field test's pyproj case said both)."""
    h = handwritten()
    w, _ = python_writer(h, "import pyproj", PREFIX)
    dll = SITE + "\\pyproj.libs\\sqlite3-48ecfbf32b094424f1c789c5d1dc2023.dll"
    w.ev("py_dists", dists=[{"name": "pyproj", "version": "3.7.0", "site": SITE, "loaders": [],
                             "files": ["pyproj.libs/sqlite3-48ecfbf32b094424f1c789c5d1dc2023.dll"]}],
         conda=[], conda_prefix=None, cut=False)
    ctx = w.ev("py_dlopen", name=dll, mode=None, frame={"file": "<string>", "line": 1, "function": "<module>"},
               imports=["pyproj"])
    w.load("LoadLibraryExW", dll, 0x1100, ctx, [(dll, 0xC0000034)], 126, 0xC0000135, None)
    w.ev("py_exception", type="FileNotFoundError", message=f"Could not find module '{dll}'", module=None, path=None,
         winerror=None, causes=[])
    w.file(dll, kind="missing")
    w.file(h.SYS32 + "\\kernel32.dll")
    w.write(tmp_path / "t.jsonl")
    call = failed_call(tmp_path / "t.jsonl", capsys)
    assert [(f["action"], f.get("package")) for f in call["fixes"]] == [("install", "pyproj")], call["fixes"]
