"""The reports read typed facts the simulator wrote, never its sentences (issue 8 item 1): each test
changes the words a producer writes and checks the consumer still decides the same."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from simhelp import load

from dlltrace.report.text import verdict_line


def _replayed(res):
    return SimpleNamespace(result=res, failed=True, load=SimpleNamespace(name=res.name), real_error=res.error)


def test_bad_machine_verdict_reads_the_machines_not_the_detail():
    res = load("a.dll", files=[{"path": "C:\\app\\a.dll", "machine": "x64"}], machine="arm64")
    assert res.leaf.cause == "bad_machine"
    assert (res.leaf.facts.process_machine, res.leaf.facts.machines) == ("arm64", ("x64",))
    res.leaf = dataclasses.replace(res.leaf, detail="words that name no machine (x86)")
    assert verdict_line(_replayed(res)) == "✗ a.dll is built for x64, but this process is arm64"


def test_missing_export_and_ordinal_are_facts():
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"], "ordinals": [7]}]},
             {"path": "C:\\app\\b.dll", "exports": ["g"]}]
    res = load("C:\\app\\a.dll", files=files)
    assert (res.leaf.cause, res.leaf.facts.export, res.leaf.detail) == ("missing_export", "f", "f")
    files[1]["exports"] = ["f"]
    res = load("C:\\app\\a.dll", files=files)
    assert (res.leaf.cause, res.leaf.facts.ordinal, res.leaf.detail) == ("missing_ordinal", 7, "ordinal 7")
