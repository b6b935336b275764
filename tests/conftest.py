import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tracer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import winetools  # noqa: E402  (needs the paths above)

# The many `python -m dlltrace` the tests start each compile dlltrace's ~180 modules again when the environment
# says PYTHONDONTWRITEBYTECODE (measured here: 0.9 s a `report` against 0.25 s with bytecode kept): their bytecode
# goes to the test cache instead (PYTHONPYCACHEPREFIX: never into the checkout; a cold run starts it empty).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# No COLUMNS or LINES for the tests' children: pytest-xdist's workers are started with COLUMNS=80 and LINES=24
# (execnet), and a plain pytest run hands its children COLUMNS=80 in the process's C environment though os.environ
# has none; a `dlltrace` child writing to a pipe would then lay its output out for 80 columns (rich and
# render/terminal.py read COLUMNS). A test that wants a width sets it itself.
def _no_terminal_size() -> None:
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        os.unsetenv(name)


_no_terminal_size()
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(winetools.CACHE / "pycache"))
# the PE facts dlltrace keeps between runs (worlds/factscache.py): in the tests' own cache, not the user's
# ~/.cache/dlltrace (the tests' files, in folders pytest removes, would stay there as entries nothing reads again)
os.environ.setdefault("DLLTRACE_CACHE", str(winetools.CACHE / "dlltrace-cache"))

# ----------------------------------------------------------------------------- summary lines
# Lines a test wants shown at the end of the run, also with plain `pytest -q` (counts of generated
# cases run against Wine, ...). They live in the session's config.stash, filled through the
# `summary` fixture: summary[name] = a line, or a function giving it, called when the run ends (so a
# line built from results counts the tests that ran, in whatever order, with -k too). Printed in the
# order of SUMMARY_ORDER, then any other name alphabetically: never in test order.
SUMMARY_KEY = pytest.StashKey[dict]()
SUMMARY_ORDER = ("wine differential", "real-binary corpus", "process start")


def pytest_configure(config):
    config.stash[SUMMARY_KEY] = {
        # Wine's own start-up failures that were run again (winetools.run_captured, test_shim.traced): said, not hidden
        "wine start-up failures": lambda: (f"wine start-up failures run again: {len(winetools.WINE_START_RETRIED)} "
                                           f"({'; '.join(winetools.WINE_START_RETRIED[:5])})"
                                           if winetools.WINE_START_RETRIED else ""),
    }
    _no_terminal_size()  # (again, after the plugins: see above)


@pytest.fixture(scope="session")
def summary(request) -> dict:
    return request.config.stash[SUMMARY_KEY]


def summary_lines(config) -> list[str]:
    lines = config.stash.get(SUMMARY_KEY, {})
    names = sorted(lines, key=lambda n: (SUMMARY_ORDER.index(n) if n in SUMMARY_ORDER else len(SUMMARY_ORDER), n))
    out = []
    for name in names:
        line = lines[name]() if callable(lines[name]) else lines[name]
        if line:
            out.append(line)
    return out


def pytest_terminal_summary(terminalreporter, config):
    for line in summary_lines(config):
        terminalreporter.write_line(line)


# Under pytest-xdist (tests/run-all.sh: -n 2) the tests run in worker processes, each with its own stash: a
# worker sends its lines (names and texts) to the controller when it ends, which prints them with its own.
def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)  # (set in an xdist worker only)
    if out is not None:
        lines = session.config.stash.get(SUMMARY_KEY, {})
        out["dlltrace_summary"] = {name: (line() if callable(line) else line) for name, line in lines.items()}


@pytest.hookimpl(optionalhook=True)  # (an xdist hook, in the controller)
def pytest_testnodedown(node, error):
    mine = node.config.stash.setdefault(SUMMARY_KEY, {})
    for name, line in getattr(node, "workeroutput", {}).get("dlltrace_summary", {}).items():
        if line:
            mine[name if name not in mine else f"{name} ({node.gateway.id})"] = line


# ----------------------------------------------------------------------------- no skip in CI
# CI installs everything the tests need (.ci/run): a test that skips there (a tool, a download or a platform
# missing) hides a missing install step, so with CI set a skip is reported as a failure, with its reason.
def skip_is_failure(env=os.environ) -> bool:
    return bool(env.get("CI"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and skip_is_failure():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may skip (.ci/run installs what the tests need): {reason}"


# ----------------------------------------------------------------------------- the wine marker
# A test that needs Wine carries @pytest.mark.wine (pyproject.toml). Two checks:
# - at collection: a test whose fixtures include `wine_prefix` (every fixture that starts Wine
#   depends on it) must be marked, or the run stops with the list;
# - while an unmarked test runs: reaching a wine64 binary through tests/winetools.py or
#   dlltrace.commands.run.find_wine, or the prefix, fails it.
@pytest.fixture(scope="session")
def wine_prefix():
    """The test prefix with its persistent wineserver (winetools.ensure_prefix); skips (fails in
    CI) without wine64. Fixtures that run Wine depend on it: the collection check finds them."""
    winetools.require("wine")
    return winetools.ensure_prefix()


def unmarked_wine_tests(items) -> list[str]:
    return [item.nodeid for item in items
            if "wine_prefix" in getattr(item, "fixturenames", ()) and item.get_closest_marker("wine") is None]


def pytest_collection_modifyitems(config, items):
    bad = unmarked_wine_tests(items)
    if bad:
        raise pytest.UsageError("tests that use Wine (the wine_prefix fixture) lack @pytest.mark.wine:\n  "
                                + "\n  ".join(bad))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = slow_first(items)


# Under pytest-xdist (tests/run-all.sh: --dist loadfile --no-loadscope-reorder, which hands the files out in
# this order) the slowest files go first, so that none of them starts last while the other worker has nothing
# left (xdist's own order, by number of tests, sends one-test files such as test_multiprocess.py last). The
# order: roughly their durations, measured on a loaded 2-core machine and said in docs (the files not named keep
# their order, after them); a file out of place costs time, never a result.
SLOW_FIRST = ("test_real_imports.py", "test_multiprocess.py", "test_big_traces.py", "test_wine_diff.py",
              "test_real_corpus.py", "test_real_situations.py", "test_fuzz.py", "test_dllmain.py",
              "test_start_wine.py", "test_run.py", "test_exit_codes.py", "test_ldso_diff.py", "test_wheels.py",
              "test_linux_trace.py", "test_console.py", "test_elf_reader.py", "test_cuda_table.py")


def slow_first(items: list) -> list:
    """items with those of the SLOW_FIRST files first, in that order; each file's own items keep their order."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    return sorted(items, key=lambda item: rank.get(Path(str(item.path)).name, len(SLOW_FIRST)))


def _not_for_unmarked(what: str):
    pytest.fail(f"this test reaches Wine ({what}) but lacks @pytest.mark.wine", pytrace=False)


@pytest.fixture(autouse=True)
def _wine_only_when_marked(request, monkeypatch):
    if request.node.get_closest_marker("wine") is not None:
        yield
        return
    # every dlltrace module that holds find_wine (where it is defined and where it is imported);
    # the modules it has lived in are imported first, since `run` imports its helpers when it runs
    import importlib

    for home in ("dlltrace.trace.launch", "dlltrace.commands.run"):
        try:
            importlib.import_module(home)
        except ImportError:
            pass
    holders = [m for name, m in list(sys.modules.items())
               if name.split(".")[0] == "dlltrace" and callable(getattr(m, "find_wine", None))]
    real_find_wine = next((m.find_wine for m in holders if m.find_wine.__module__ == m.__name__),
                          holders[0].find_wine if holders else (lambda: None))
    real_wine_binary, real_dlltrace = winetools.wine_binary, winetools.dlltrace

    def find_wine():
        found = real_find_wine()
        if found:
            _not_for_unmarked(f"find_wine() -> {found}")
        return found

    def wine_binary():
        found = real_wine_binary()
        if found:
            _not_for_unmarked(f"winetools.wine_binary() -> {found}")
        return found

    def ensure_prefix():
        _not_for_unmarked("winetools.ensure_prefix()")

    def dlltrace(*argv, **kw):
        if "--wine" in argv:
            override = kw.get("DLLTRACE_WINE", os.environ.get("DLLTRACE_WINE"))
            if (os.path.isfile(override) and os.access(override, os.X_OK)) if override else real_find_wine():
                _not_for_unmarked("dlltrace run --wine in a child process")
        return real_dlltrace(*argv, **kw)

    for m in holders:
        monkeypatch.setattr(m, "find_wine", find_wine)
    monkeypatch.setattr(winetools, "wine_binary", wine_binary)
    monkeypatch.setattr(winetools, "ensure_prefix", ensure_prefix)
    monkeypatch.setattr(winetools, "dlltrace", dlltrace)
    yield


# ----------------------------------------------------------------------------- the CLI, in-process
class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult(returncode={self.returncode!r}, stdout={self.stdout[-500:]!r}, stderr={self.stderr[-500:]!r})"


@pytest.fixture
def dlltrace_cli(capsys, monkeypatch):
    """dlltrace_cli(*argv, cwd=None, **env) -> CliResult(returncode, stdout, stderr): the `dlltrace`
    command run in this process (dlltrace.cli.main(argv)), its output taken with capsys, the exit
    code what main returned or what argparse exited with; cwd and env changed for the call only."""
    from dlltrace import cli

    def call(*argv: str, cwd=None, **env: str) -> CliResult:
        capsys.readouterr()
        with monkeypatch.context() as m:
            if cwd is not None:
                m.chdir(cwd)
            for k, v in env.items():
                m.setenv(k, v)
            try:
                code = cli.main([str(a) for a in argv])
            except SystemExit as e:  # argparse: --version, --help, a usage error
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return call


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with nothing installed (a venv without pip or cffi): the bootstrap binds the shim with ctypes
    (tests/test_bootstrap.py, tests/test_linux_trace.py)."""
    import subprocess

    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=300)
    py = str(venv / "bin" / "python")
    assert subprocess.run([py, "-c", "import cffi"], capture_output=True).returncode != 0  # (no cffi there)
    return py
