"""What tests/conftest.py does for the other tests.

- The summary lines (the `summary` fixture, config.stash): printed in a fixed order, whatever order
  the tests that made them ran in; a line given as a function is made when the run ends.
- The `wine` marker (pyproject.toml) is on every test that needs Wine: a run whose tests use the
  wine_prefix fixture unmarked stops at collection, and an unmarked test that reaches a wine64
  binary or the prefix fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import winetools
from conftest import SLOW_FIRST, SUMMARY_KEY, slow_first, summary_lines, unmarked_wine_tests


def test_summary_lines_come_in_a_fixed_order_and_functions_are_called_at_the_end():
    counts = []
    orders = [["process start", "zz other", "wine differential", "real-binary corpus"],
              ["real-binary corpus", "wine differential", "zz other", "process start"]]
    printed = []
    for order in orders:
        config = SimpleNamespace(stash={SUMMARY_KEY: {}})
        for name in order:
            config.stash[SUMMARY_KEY][name] = (lambda n=name: f"{n}: {len(counts)}") if name == "wine differential" else name
        counts.append(1)  # a result arriving after the line was registered
        config.stash[SUMMARY_KEY]["empty"] = lambda: ""  # nothing to say: no line
        printed.append(summary_lines(config))
    assert printed[0] == ["wine differential: 1", "real-binary corpus", "process start", "zz other"]
    assert printed[1] == ["wine differential: 2", "real-binary corpus", "process start", "zz other"]


def _item(nodeid, fixtures, marked):
    return SimpleNamespace(nodeid=nodeid, fixturenames=fixtures,
                           get_closest_marker=lambda name: object() if marked and name == "wine" else None)


def test_collection_check_names_the_unmarked_tests_that_use_the_wine_fixtures():
    items = [_item("a", ["tmp_path", "wine_prefix"], True), _item("b", ["shim_env", "wine_prefix"], False),
             _item("c", ["tmp_path"], False)]
    assert unmarked_wine_tests(items) == ["b"]


def test_an_unmarked_test_that_reaches_wine_fails():
    from dlltrace.trace import launch

    with pytest.MonkeyPatch.context() as m:
        m.setenv("DLLTRACE_WINE", "/bin/true")  # a wine64 that is "installed" whatever the machine has
        with pytest.raises(pytest.fail.Exception, match="lacks @pytest.mark.wine"):
            launch.find_wine()
        with pytest.raises(pytest.fail.Exception, match="lacks @pytest.mark.wine"):
            winetools.require("wine")
    with pytest.raises(pytest.fail.Exception, match="lacks @pytest.mark.wine"):
        winetools.ensure_prefix()


def test_an_unmarked_test_may_look_for_a_wine_that_is_not_there(monkeypatch):
    from dlltrace.trace import launch

    monkeypatch.setenv("DLLTRACE_WINE", "/no/wine64")
    assert launch.find_wine() is None


@pytest.mark.wine
def test_a_marked_test_reaches_wine_freely(monkeypatch):
    from dlltrace.trace import launch

    monkeypatch.setenv("DLLTRACE_WINE", "/bin/true")
    assert launch.find_wine() == "/bin/true"


def test_a_skip_fails_in_ci_and_only_there(tmp_path):
    """With CI set, a skipped test is a failure that names the reason (.ci/run: nothing may skip); an
    expected failure (xfail) stays one; without CI a skip is a skip."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_skips():\n    pytest.skip('no such tool here')\n"
        "@pytest.mark.xfail(strict=True, reason='known')\n"
        "def test_xfails():\n    assert 0\n")

    def run(**env: str) -> str:
        e = {k: v for k, v in os.environ.items() if k != "CI"}
        e.update(env, PYTHONPATH=os.pathsep.join([str(tests), str(tests.parent / "tracer")]))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                            "--rootdir", str(tmp_path), str(tmp_path / "test_x.py")],
                           capture_output=True, text=True, env=e, cwd=tmp_path, timeout=120)
        return r.stdout.strip().splitlines()[-1]

    assert run().startswith("1 skipped, 1 xfailed")
    ci = run(CI="true")
    assert ci.startswith("1 failed, 1 xfailed"), ci


def test_summary_lines_of_xdist_workers_are_printed_by_the_controller(tmp_path):
    """tests/run-all.sh runs the tests in two pytest-xdist workers: the lines each worker's tests made reach
    the end of the output, in the fixed order, a line given as a function made in its worker."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("xdist")  # (a test extra: pyproject.toml)
    tests = Path(__file__).resolve().parent
    (tmp_path / "test_a.py").write_text("def test_a(summary):\n    summary['zz a'] = 'line of a'\n")
    (tmp_path / "test_b.py").write_text("import os\n"
                                        "def test_b(summary):\n"
                                        "    summary['wine differential'] = lambda: 'line of b in ' + os.environ['PYTEST_XDIST_WORKER']\n")
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(tests), str(tests.parent / "tracer"), *filter(None, [e.get("PYTHONPATH")])])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "-n", "2",
                        "--dist", "loadfile", "--rootdir", str(tmp_path), str(tmp_path)],
                       capture_output=True, text=True, env=e, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:]
    lines = r.stdout.splitlines()
    mine = [ln for ln in lines if ln.startswith("line of ")]
    assert len(mine) == 2 and mine[0] in ("line of b in gw0", "line of b in gw1") and mine[1] == "line of a", r.stdout


def test_the_slow_files_go_first_and_each_file_keeps_its_order():
    items = [SimpleNamespace(path=f"/t/{name}", n=n) for name, n in
             [("test_a.py", 1), (SLOW_FIRST[1], 2), ("test_a.py", 3), (SLOW_FIRST[0], 4), (SLOW_FIRST[1], 5),
              ("test_b.py", 6)]]
    assert [i.n for i in slow_first(items)] == [4, 2, 5, 1, 3, 6]
