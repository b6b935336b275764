"""A DLL no package known to dlltrace ships, loaded with the standard search order (explain.
rule_standard_order_searches_path_not_added_folders): the field test's cairocffi 1.7.1 without cairo, whose cffi
ffi.dlopen calls LoadLibraryExW("libcairo-2.dll", NULL, 0). That search takes PATH and never the folders of
os.add_dll_directory (checked under Wine: after os.add_dll_directory(F), LoadLibraryExW of a DLL of F fails with
126 under flags 0 and loads under 0x1000). The report told the user to add the folder with os.add_dll_directory,
which cannot work for that load; ctypes' own loads (flags 0x1000) keep that advice."""

from __future__ import annotations

from pathlib import Path

import pytest

from simhelp import failed_call, handwritten, python_writer

PREFIX = "C:\\py"


def trace(tmp_path: Path, flags: int) -> Path:
    h = handwritten()
    w, _ = python_writer(h, "import cairocffi", PREFIX)
    ctx = w.ev("py_import", module="cairocffi")
    dirs = [PREFIX, h.SYS32] if flags else [PREFIX, h.SYS32, "C:\\work", PREFIX]  # (flags 0: the current folder, PATH)
    w.load("LoadLibraryExW", "libcairo-2.dll", flags, ctx, [(d + "\\libcairo-2.dll", h.NOT_FOUND) for d in dirs], 126,
           h.DLL_NOT_FOUND, None)
    for d in dict.fromkeys(dirs):
        w.file(d + "\\libcairo-2.dll", kind="missing")
    w.ev("py_exception", type="OSError", message="no library called \"cairo-2\" was found\ncannot load library "
         "'libcairo-2.dll': error 0x7e", module=None, path=None, winerror=None, causes=[])
    w.write(tmp_path / "t.jsonl")
    return tmp_path / "t.jsonl"


def first_fix(path: Path, capsys) -> dict:
    call = failed_call(path, capsys)
    assert call["leaf"]["name"] == "libcairo-2.dll" and call["leaf"]["cause"] == "not_found", call["leaf"]
    return call["fixes"][0]


def test_rule_standard_order_searches_path_not_added_folders(tmp_path, capsys):
    fix = first_fix(trace(tmp_path, 0), capsys)
    assert fix["action"] == "find_package" and "on PATH" in fix["text"], fix
    assert "os.add_dll_directory" not in fix["text"].split("(")[0], fix["text"]


@pytest.mark.parametrize("flags", [0x1000, 0x1000 | 0x800])
def test_rule_standard_order_searches_path_not_added_folders_search_flags(tmp_path, capsys, flags):
    """ctypes.CDLL's load (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS): os.add_dll_directory's folders are searched."""
    fix = first_fix(trace(tmp_path, flags), capsys)
    assert fix["action"] == "find_package" and fix["text"].endswith("add its folder with os.add_dll_directory"), fix
