"""A DLL of Windows itself that a run under Wine did not find (explain.rule_windows_dll_missing_under_wine): the
field test's tokenizers 0.20.3, whose extension (Rust 1.78 or later: std's ProcessPrng) imports
bcryptprimitives.dll, which Wine 8.0 has none of. Every Windows 10/11 has it in System32. The report told the
user their Windows lacked it and to update Windows; under Wine the Wine lacks it. (tests/test_real_field.py has
the real run.)"""

from __future__ import annotations

from pathlib import Path

from simhelp import failed_call, handwritten, python_writer

PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"
PYD = SITE + "\\tokenizers\\tokenizers.cp311-win_amd64.pyd"


def trace(tmp_path: Path, wine: bool) -> Path:
    h = handwritten()
    w, _ = python_writer(h, "import tokenizers", PREFIX)
    if wine:  # (what `dlltrace run --wine` records: the header's platform, the env event's Wine version)
        w.lines[0]["platform"] = "wine"
        w.lines[2]["wine"] = "8.0"
    w.failed_import("tokenizers.tokenizers", PYD, "bcryptprimitives.dll", [SITE + "\\tokenizers", PREFIX, h.SYS32])
    w.ev("py_exception", type="ImportError", message="DLL load failed while importing tokenizers: The specified "
         "module could not be found.", module="tokenizers.tokenizers", path=PYD, winerror=None, causes=[])
    w.write(tmp_path / "t.jsonl")
    return tmp_path / "t.jsonl"


def first_fix(path: Path, capsys) -> dict:
    call = failed_call(path, capsys)
    assert call["leaf"]["name"] == "bcryptprimitives.dll" and call["leaf"]["cause"] == "not_found", call["leaf"]
    return call["fixes"][0]


def test_rule_windows_dll_missing_under_wine(tmp_path, capsys):
    fix = first_fix(trace(tmp_path, wine=True), capsys)
    assert "this Wine has none" in fix["text"] and "update Windows" not in fix["text"], fix["text"]
    assert fix.get("verified") is not True, fix  # (advice: nothing the model re-runs)


def test_rule_windows_dll_missing_under_wine_on_windows(tmp_path, capsys):
    """The same trace taken on Windows: that Windows lacks it (as before)."""
    fix = first_fix(trace(tmp_path, wine=False), capsys)
    assert "this Windows lacks it" in fix["text"] and "Wine" not in fix["text"], fix["text"]
