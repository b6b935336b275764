"""The tests' own caches (tests/winetools.py, tests/realwheels.py): what is built is made whole or not at all,
and a download is used only when it is the pinned file. A cold start (.ci/run: an empty test cache) depends on
both."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

import realwheels as rw
import winetools


def test_built_once_builds_whole_or_not_at_all(tmp_path):
    calls = []

    def build(d: Path) -> None:
        calls.append(d)
        (d / "a.txt").write_text("a")

    out = winetools.built_once(tmp_path / "thing", build)
    assert out == tmp_path / "thing" and (out / "a.txt").read_text() == "a" and (out / ".complete").is_file()
    assert winetools.built_once(tmp_path / "thing", build) == out and len(calls) == 1  # whole: kept

    def broken(d: Path) -> None:
        (d / "half.txt").write_text("half")
        raise RuntimeError("the compiler failed")

    with pytest.raises(RuntimeError):
        winetools.built_once(tmp_path / "other", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing"]  # nothing half-built is left
    # a folder an older layout or a killed run left, without the stamp, is built again
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "old.txt").write_text("old")
    out = winetools.built_once(tmp_path / "stale", build)
    assert sorted(p.name for p in out.iterdir()) == [".complete", "a.txt"] and len(calls) == 2


def test_two_processes_building_one_folder_build_it_once(tmp_path):
    """The pytest-xdist workers (tests/run-all.sh) ask for the same pieces at once: one builds, the other
    waits for it (winetools.locked) and finds it whole; neither sees a half-built folder."""
    import os
    import sys

    log = tmp_path / "builds.log"
    script = ("import sys, time\nfrom pathlib import Path\nimport winetools\n"
              "def build(d):\n"
              "    with open(sys.argv[2], 'a') as f: f.write('built\\n')\n"
              "    time.sleep(1.0)\n"
              "    (d / 'a.txt').write_text('a')\n"
              "out = winetools.built_once(Path(sys.argv[1]), build)\n"
              "print((out / 'a.txt').read_text())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent),
                                                         str(Path(__file__).resolve().parent.parent / "tracer")]),
           "DLLTRACE_TEST_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "thing"), str(log)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == ["a\n", "a\n"]
    assert log.read_text() == "built\n"


def test_source_key_follows_contents(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int a;")
    k1 = winetools.source_key(src, "flags")
    assert winetools.source_key(src, "flags") == k1
    assert winetools.source_key(src, "other flags") != k1
    src.write_text("int b;")
    assert winetools.source_key(src, "flags") != k1


@pytest.fixture
def fake_pip(monkeypatch):
    """pip download replaced by a function writing `served[0]` as the requested file; the calls counted."""
    served = [b"the real wheel"]
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "pkg-1.0-py3-none-any.whl").write_bytes(served[0])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(rw.subprocess, "run", run)
    monkeypatch.setattr(rw, "_verified", {})
    monkeypatch.setitem(rw.PINNED_SHA256, "pkg-1.0-py3-none-any.whl", hashlib.sha256(b"the real wheel").hexdigest())
    return served, calls


def test_a_download_is_used_only_when_it_is_the_pinned_file(tmp_path, fake_pip):
    served, calls = fake_pip
    got = rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path)
    assert got.read_bytes() == b"the real wheel" and len(calls) == 1
    assert rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path) == got and len(calls) == 1  # kept
    # a cached file that is not the pinned one (cut short, replaced) is fetched again
    got.write_bytes(b"the real wh")
    rw._verified.clear()
    assert rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path).read_bytes() == b"the real wheel"
    assert len(calls) == 2
    # pip serving another file: refused, and nothing is left in the cache
    got.unlink()
    served[0] = b"something else"
    with pytest.raises(rw.WheelUnavailable, match="sha256 other than the pinned"):
        rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_unpinned_download_fails_in_ci(tmp_path, fake_pip, monkeypatch):
    del rw.PINNED_SHA256["pkg-1.0-py3-none-any.whl"]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(AssertionError, match=r"no pinned sha256 .* \(its sha256: " + hashlib.sha256(b"the real wheel").hexdigest()):
        rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path)
    monkeypatch.delenv("CI")
    with pytest.warns(UserWarning, match="no pinned sha256"):
        rw.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path)


def test_every_download_the_tests_name_is_pinned():
    """The pins cover the files the tests fetch (the wheels of the corpus and of the real imports, the Windows
    Pythons, cffi's and ctypes-windows-sdk's wheels, the manylinux wheel)."""
    import realimports as ri
    import test_bootstrap
    import test_linux_trace
    import test_real_field
    import test_winapi

    names = {w.filename for w in rw.WHEELS.values()} | {w.filename for w in ri.wheels()}
    names |= {w.filename for w in ri.EXTRA_WHEELS.values()} | {ri.PY_EMBED[2], test_bootstrap.PY_EMBED[2],
                                                               test_bootstrap.CFFI_WIN[2], test_winapi.CWS_WHEEL.name}
    names |= {w.filename for w in test_real_field.SKLEARN_ENV}
    names |= {t[-1] for t in vars(test_linux_trace).values()
              if isinstance(t, tuple) and t and isinstance(t[-1], str) and t[-1].endswith(".whl")}
    assert sorted(names - set(rw.PINNED_SHA256)) == []
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in rw.PINNED_SHA256.values())
    # (the downloads outlive an empty test cache: .ci/run empties the one and keeps the other)
    assert winetools.CACHE.resolve() not in (winetools.DOWNLOADS.resolve(), *winetools.DOWNLOADS.resolve().parents)
