"""A DLL the trace never looked at, known only from its distribution's RECORD (worlds/recorded.py add_listed: the
bootstrap's py_dists): the field test's pyzmq 25.1.2, its context.pyd loaded with ctypes.CDLL without `import zmq`,
libzmq in pyzmq.libs, beside the libsodium it imports. Under Wine, os.add_dll_directory(pyzmq.libs) made the load
work and copying libzmq next to context.pyd did not (libsodium stays behind); the report had dropped the first and
called the second checked."""

from __future__ import annotations

import json
from pathlib import Path

from dlltrace import cli
from simhelp import handwritten, python_writer

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "C:\\py"
SITE = PREFIX + "\\Lib\\site-packages"
PYD = SITE + "\\zmq\\backend\\cython\\context.cp311-win_amd64.pyd"
LIBZMQ = "libzmq-v141-mt-4_3_4-0a6f51ca.dll"


def trace(tmp_path: Path) -> Path:
    h = handwritten()
    w, _ = python_writer(h, "import app", PREFIX)
    files = ["zmq/backend/cython/context.cp311-win_amd64.pyd", f"pyzmq.libs/{LIBZMQ}", "pyzmq.libs/libsodium-ac42d648.dll"]
    w.ev("py_dists", dists=[{"name": "pip", "version": "24.0", "site": SITE, "files": [], "loaders": []},
                            {"name": "pyzmq", "version": "25.1.2", "site": SITE, "files": files, "loaders": []}],
         conda=[], conda_prefix=None, cut=False)
    w.failed_import("zmq.backend.cython.context", PYD, LIBZMQ, [SITE + "\\zmq\\backend\\cython", PREFIX, h.SYS32])
    w.write(tmp_path / "t.jsonl")
    return tmp_path / "t.jsonl"


def fixes(tmp_path: Path, capsys) -> list[dict]:
    cli.main(["report", "--json", str(trace(tmp_path))])
    d = json.loads(capsys.readouterr().out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    assert any(e.get("owner") == "pyzmq 25.1.2" for e in call["found_elsewhere"]), call["found_elsewhere"]
    return call["fixes"]


def test_a_folder_only_a_record_lists_is_added_by_os_add_dll_directory(tmp_path, capsys):
    """The folder of a record-listed file exists as far as the environment says: os.add_dll_directory of it is
    offered and checked, as it would be had the trace looked there."""
    got = [(f["action"], f.get("folder"), f.get("verified")) for f in fixes(tmp_path, capsys)]
    assert ("add_dll_directory", SITE + "\\pyzmq.libs", True) in got, got


def test_rule_copy_of_a_record_listed_file(tmp_path, capsys):
    """Its own imports are unknown (a stand-in's facts): a copy of it elsewhere may leave its dependencies behind
    (libsodium, beside libzmq), so the copy is offered unchecked, after the checked fixes."""
    fs = fixes(tmp_path, capsys)
    copies = [f for f in fs if f["action"] == "copy_file"]
    assert copies and all(f.get("verified") is not True for f in copies), copies
    assert fs[0]["verified"] is True and fs.index(copies[0]) > 0
    cli.main(["report", str(tmp_path / "t.jsonl")])
    text = capsys.readouterr().out
    after = text[text.index(f"Copy {SITE}\\pyzmq.libs\\{LIBZMQ}"):]
    assert after.splitlines()[1].strip() == "(not checked by the model)", after
