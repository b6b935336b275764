"""A package's own loader (delvewheel's patch in its __init__.py) offered as a fix for a load made while another
copy of that package is imported (explain.rule_package_loader_of_another_copy). The field test under Wine:
psycopg2-binary 2.9.13 installed, and a copy of its psycopg2 folder vendored into the application's folder, first
on sys.path, without psycopg2_binary.libs beside it: its _psycopg.pyd cannot find libpq. The report's first fix was
"before `import psycopg2._psycopg`: import psycopg2 (the package's own loader ...)"; that import runs the vendored
copy again (it is the one sys.path finds), never the installed one's patch. It "worked" only when run before the
program's sys.path change, by importing the installed psycopg2 instead of the program's (psycopg2.__file__ in
site-packages). os.add_dll_directory of psycopg2_binary.libs, now the first fix, made the vendored copy load under
Wine (Wine mapped app\\psycopg2\\_psycopg.pyd, libpq from site-packages)."""

from __future__ import annotations

import json
from pathlib import Path

from dlltrace import cli
from simhelp import handwritten, python_writer

PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"
LIBPQ = "libpq-f81e1880e53c9b2acc2a45e78d57cbab.dll"


def fixes(tmp_path: Path, capsys, pyd_folder: str) -> list[dict]:
    h = handwritten()
    w, _ = python_writer(h, "import psycopg2", PREFIX)
    w.ev("py_dists", dists=[{"name": "psycopg2_binary", "version": "2.9.13", "site": SITE, "loaders": [
        {"package": "psycopg2", "adds": ["psycopg2_binary.libs"], "how": "delvewheel"}],
        "files": ["psycopg2/_psycopg.cp311-win_amd64.pyd", f"psycopg2_binary.libs/{LIBPQ}"]}],
        conda=[], conda_prefix=None, cut=False)
    pyd = pyd_folder + "\\_psycopg.cp311-win_amd64.pyd"
    w.failed_import("psycopg2._psycopg", pyd, LIBPQ, [pyd_folder, PREFIX, h.SYS32])
    w.file(SITE + "\\psycopg2_binary.libs\\" + LIBPQ, imports=["kernel32.dll"])
    w.file(h.SYS32 + "\\kernel32.dll")
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", "--json", str(tmp_path / "t.jsonl")])
    d = json.loads(capsys.readouterr().out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    return call["fixes"]


def test_rule_package_loader_of_another_copy(tmp_path, capsys):
    got = fixes(tmp_path, capsys, "C:\\app\\psycopg2")  # (the vendored copy)
    assert all(f["action"] != "package_mechanism" for f in got), [(f["action"], f.get("call")) for f in got]
    assert (got[0]["action"], got[0]["folder"], got[0]["verified"]) == (
        "add_dll_directory", SITE + "\\psycopg2_binary.libs", True), got[0]


def test_rule_package_loader_of_another_copy_the_installed_one(tmp_path, capsys):
    """The installed copy's own module (its patch did not add the folder, as when the module is imported by a
    path that skips its __init__): `import psycopg2` runs that copy's patch, and stays offered (as before)."""
    got = fixes(tmp_path, capsys, SITE + "\\psycopg2")
    assert any(f["action"] == "package_mechanism" and f["call"] == "import psycopg2" for f in got), got
