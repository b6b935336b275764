"""A native file at a path its distribution's RECORD lists, of another size than RECORD gives: not the file that
distribution installed (a `pip install -U` that could not replace a DLL a running process held, leaving the old DLL
next to the new .pyd; a DLL copied over the package's own). The report says so and offers the reinstall first
(explain.rule_not_the_file_its_distribution_installed). Traces without RECORD's sizes (older) report as before."""

from __future__ import annotations

import json
from pathlib import Path

from simhelp import handwritten, python_writer

from dlltrace import cli

NEW, OLD = 2_499_072, 1_561_088  # pygame 2.6.1's SDL2.dll, as its RECORD lists it; pygame 2.0.1's


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
        "could not replace a file in use, or a copy): reinstall it (C:\\Python311\\python.exe -m pip install "
        "--force-reinstall --no-deps pygame==2.6.1)"), first["text"]
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
