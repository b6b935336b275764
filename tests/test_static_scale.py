"""`deps` and `check` are linear in the files they examine (issue 28, item 5; docs/limits.md).

`check --no-cache` of 4,000 tiny DLLs took 2.3 s and of 16,000 88 s (Target.file_named scanned every file for each
import), and a 10,000-level import chain in a folder 48 s (file_named per tree node again, and rich's Tree summing
every line's guides). These tests count work instead of timing it: the calls of winpath.basename (each file the
old scans looked at cost one) grow like the input, not like its square; the world's indexes answer files_in and
close_files without looking at every file. The inputs are tiny valid PE DLLs written byte by byte (tinype.py).
bench/static_scale.py times the same."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

import tinype
from dlltrace import deep, winpath
from dlltrace.diagnosis import static
from dlltrace.render.static import MAX_SHOWN_DEPTH, deps_json_indent, deps_markdown, print_deps
from dlltrace.worlds.static import StaticWorld, TargetFile, builtin_system


class Counter:
    def __init__(self, monkeypatch, fn_name: str):
        self.n = 0
        real = getattr(winpath, fn_name)

        def counted(*args):
            self.n += 1
            return real(*args)
        monkeypatch.setattr(winpath, fn_name, counted)


def _check_work(tmp_path: Path, monkeypatch, n: int) -> int:
    wheel = tinype.write_wheel(tmp_path / f"w{n}-1.0-cp311-cp311-win_amd64.whl", [f"m{i}.dll" for i in range(n)])
    target = static.open_target(str(wheel), use_cache=False)
    with monkeypatch.context() as m:
        c = Counter(m, "basename")
        result = static.check(target)
    assert result.ok and len(result.files) == n
    return c.n


def test_check_work_grows_like_the_wheel_not_its_square(tmp_path, monkeypatch):
    """Twice the members, about twice the work (the old file_named: four times, 3.99 measured)."""
    small, big = _check_work(tmp_path, monkeypatch, 400), _check_work(tmp_path, monkeypatch, 800)
    assert big / small < 2.5, (small, big)


def _deps_work(tmp_path: Path, monkeypatch, n: int) -> tuple[int, str, str, dict]:
    tinype.write_chain(tmp_path / f"c{n}" / "pkg", n)
    target = static.open_target(str(tmp_path / f"c{n}" / "pkg"), use_cache=False)
    out: dict = {}

    def go() -> int:
        with monkeypatch.context() as m:
            c = Counter(m, "basename")
            r = static.deps(target)
            text = io.StringIO()
            print_deps(r, Console(file=text, width=160, highlight=False, markup=False, emoji=False))
            md = deps_markdown(r)
        out.update(r=r, n=c.n, text=text.getvalue(), md=md)
        return 0
    deep.deep_call(go)
    r = out["r"]
    assert not r.problems and len(r.loads) == 1  # d0 reaches every other DLL
    return out["n"], out["text"], out["md"], json.loads(json.dumps({"i": deps_json_indent(r)}))


def test_a_deep_chain_costs_its_length_and_renders_a_bounded_tree(tmp_path, monkeypatch):
    """A chain d0 -> d1 -> ... : twice as deep, about twice the work (the old: 3.97 times); the text and the
    Markdown nest MAX_SHOWN_DEPTH levels, then one line counting the rest; the JSON of a deep tree is compact."""
    w1, text1, md1, j1 = _deps_work(tmp_path, monkeypatch, 300)
    w2, text2, md2, j2 = _deps_work(tmp_path, monkeypatch, 600)
    assert w2 / w1 < 2.5, (w1, w2)
    hidden = 600 - 1 - MAX_SHOWN_DEPTH
    assert f"… {hidden} more DLLs below, {MAX_SHOWN_DEPTH} levels down (--json lists every level)" in " ".join(text2.split())
    assert f"- … {hidden} more DLLs below" in md2, md2
    assert f"d{MAX_SHOWN_DEPTH}.dll" in text2 and f"d{MAX_SHOWN_DEPTH + 1}.dll" not in text2.split("1 load")[0]
    assert len(text2) < 2 * len(text1) and len(md2) < 2 * len(md1)  # (bounded: the chains differ in what is hidden)
    assert j1["i"] is None and j2["i"] is None


def test_a_shallow_tree_is_shown_whole_and_indented(tmp_path, monkeypatch):
    _, text, md, j = _deps_work(tmp_path, monkeypatch, 5)
    assert "more DLL" not in text + md and "d4.dll" in text and "`d4.dll`" in md and j["i"] == 2


def _old_files_in(world: StaticWorld, folder: str) -> list[str]:  # (the scan the index replaces: its answers)
    k = winpath.key(folder)
    return [p for paths in world._by_name.values() for p in paths if winpath.key(winpath.dirname(p)) == k]


def _old_close_files(world: StaticWorld, name: str) -> list[str]:
    return sorted((ps[0] for n, ps in world._by_name.items() if ps and winpath.close_name(n, name)), key=str.lower)


def test_world_lookups_read_an_index_and_answer_as_the_scan_did(monkeypatch):
    site = "C:\\Python312\\Lib\\site-packages"
    names = [f"lib{i}_{j}.dll" for i in range(300) for j in range(3)] + ["cublas64_11.dll", "CUBLAS64_12.dll", "x.pyd"]
    files = [TargetFile(winpath.join(site, "pkg" if i % 3 else "pkg\\sub", n), n, lambda: None, 0)  # type: ignore
             for i, n in enumerate(names)]
    world = StaticWorld(builtin_system(), files, "3.12")
    copy = world.place_copy(winpath.join(site, "pkg\\sub\\lib0_0.dll"), files[1])  # (a name met before, added last)
    folders = [winpath.join(site, "pkg"), winpath.join(site, "pkg\\SUB"), world.system.system32, "C:\\nowhere"]
    for f in folders:
        assert world.files_in(f) == _old_files_in(world, f), f
    assert copy.path in world.files_in(folders[1])
    for n in ("cublas64_13.dll", "lib7_1.dll", "LIB12_2.DLL", "x.pyd", "msvcp140_1.dll", "nothing.dll"):
        assert world.close_files(n) == _old_close_files(world, n), n
    assert sorted(winpath.basename(p) for p in world.close_files("cublas64_13.dll")) == ["CUBLAS64_12.dll", "cublas64_11.dll"]
    with monkeypatch.context() as m:  # 200 lookups of each: no scan of the 900 files for any of them
        dirs, close = Counter(m, "dirname"), Counter(m, "close_name")
        for i in range(200):
            world.files_in(folders[i % 4])
            world.close_files(f"cublas64_{i}.dll")  # (two names of its shape, among 900 others)
    assert dirs.n <= 200 and close.n <= 200 * 2, (dirs.n, close.n)


@pytest.mark.parametrize("n", [3])
def test_target_file_named_follows_its_files(tmp_path, n):
    """The name index of Target is made again when its files change (dataclasses.replace, an append)."""
    tinype.write_chain(tmp_path / "pkg", n)
    t = static.open_target(str(tmp_path / "pkg"), use_cache=False)
    assert [f.path for f in t.file_named("D1.DLL")] == [winpath.join(t.root, "d1.dll")]
    extra = TargetFile(winpath.join(t.root, "sub\\d1.dll"), "x", lambda: None, 0)  # type: ignore
    t.files.append(extra)
    assert len(t.file_named("d1.dll")) == 2
    import dataclasses
    t2 = dataclasses.replace(t, files=t.files[:1])
    assert [f.path for f in t2.file_named("d0.dll")] == [winpath.join(t.root, "d0.dll")] and not t2.file_named("d1.dll")
