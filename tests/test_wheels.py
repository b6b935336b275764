"""The sdist and the two wheels `tools/build-wheels.sh` builds (docs/install.md): their tags, METADATA and
file lists, that a wheel's bin/ is built for it (never the tree's files), and a trace under Wine with the
shim and the launcher taken from the unpacked win_amd64 wheel only.

The artifacts are built once per session (about 20 s: isolated builds, pip fetches setuptools from PyPI or
its cache). Needs mingw-w64 and the `build` frontend (the test extras): skipped locally without them,
failed in CI (winetools.require)."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import winetools
from dlltrace import __version__
from dlltrace.model import PEFacts
from dlltrace.pe import read_pe_facts
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
V = __version__
WIN = f"dlltrace-{V}-py3-none-win_amd64.whl"
ANY = f"dlltrace-{V}-py3-none-any.whl"
SDIST = f"dlltrace-{V}.tar.gz"
BIN_FILES = {"dlltrace/bin/dlltrace_shim64.dll", "dlltrace/bin/dlltrace_launch64.exe",
             "dlltrace/bin/dlltrace_shim32.dll", "dlltrace/bin/dlltrace_launch32.exe"}
# the shim's C API (native/shim/dlltrace_shim.h), which the Python side calls (trace/shim.py)
SHIM_EXPORTS = {"dlltrace_start", "dlltrace_write_event", "dlltrace_set_context", "dlltrace_version",
                "dlltrace_env_snapshot"}
# package data every wheel has (pyproject.toml [tool.setuptools.package-data]), and the bootstrap
DATA_FILES = {"dlltrace/schemas/trace-v1.json", "dlltrace/schemas/scenario-v1.json",
              "dlltrace/schemas/result-v1.json", "dlltrace/data/apisets-builtin.json",
              "dlltrace/data/packages.json", "dlltrace/examples/s1.toml", "dlltrace/bootstrap/sitecustomize.py",
              "dlltrace/cli.py", "dlltrace/winapi.py"}


def require_build_tools() -> None:
    winetools.require("mingw64", "mingw32")  # (native/build.sh builds both machines)
    try:
        import build  # noqa: F401
    except ImportError:
        msg = "needs the `build` frontend (pip install build; in the test extras)"
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI installs the test extras (tools/setup.sh --tests)")
        pytest.skip(msg)


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    """tools/build-wheels.sh's output folder (built once per session)."""
    require_build_tools()
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "DLLTRACE_PLATFORM"}
    r = subprocess.run(["bash", str(ROOT / "tools" / "build-wheels.sh"), str(out)], env={**env, "PYTHON": sys.executable},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n for n in z.namelist() if not n.endswith("/")}


def dist_info(wheel: Path, name: str):
    with zipfile.ZipFile(wheel) as z:
        return email.parser.Parser().parsestr(z.read(f"dlltrace-{V}.dist-info/{name}").decode("utf-8"))


def package_files(wheel: Path) -> set[str]:
    return {n for n in names(wheel) if not n.startswith(f"dlltrace-{V}.dist-info/")}


def test_build_wheels_writes_the_three_artifacts(dist):
    assert sorted(p.name for p in dist.iterdir()) == sorted([SDIST, ANY, WIN])


@pytest.mark.parametrize("wheel, tag", [(WIN, "py3-none-win_amd64"), (ANY, "py3-none-any")])
def test_wheel_tags(dist, wheel, tag):
    w = dist_info(dist / wheel, "WHEEL")
    assert w.get_all("Tag") == [tag]
    # the binaries are data the package runs (no extension module): the files go to purelib either way
    assert w["Root-Is-Purelib"] == "true"


@pytest.mark.parametrize("wheel", [WIN, ANY])
def test_wheel_metadata(dist, wheel):
    from packaging.requirements import Requirement

    m = dist_info(dist / wheel, "METADATA")
    assert m["Name"] == "dlltrace"
    assert m["Version"] == V
    assert m["License-Expression"] == "MIT" and m.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(dist / wheel) as z:
        assert z.read(f"dlltrace-{V}.dist-info/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    reqs = {r.name: r for r in map(Requirement, m.get_all("Requires-Dist"))}
    assert {"pefile", "rich", "cffi", "ctypes-windows-sdk"} <= set(reqs)
    cws = reqs["ctypes-windows-sdk"]
    # Windows only: it cannot even be imported elsewhere (it binds kernel32 at import)
    assert cws.marker is not None
    assert cws.marker.evaluate({"sys_platform": "win32"}) and not cws.marker.evaluate({"sys_platform": "linux"})
    assert cws.specifier.contains("0.0.20")  # the version whose names tests/test_winapi.py checks
    with zipfile.ZipFile(dist / wheel) as z:
        eps = z.read(f"dlltrace-{V}.dist-info/entry_points.txt").decode()
    assert "dlltrace = dlltrace.cli:entry" in eps


def test_wheel_file_lists(dist):
    win, any_ = package_files(dist / WIN), package_files(dist / ANY)
    assert {n for n in win if n.startswith("dlltrace/bin/")} == BIN_FILES
    assert not any(n.startswith("dlltrace/bin/") for n in any_)
    assert DATA_FILES <= any_
    assert win - BIN_FILES == any_  # the same package otherwise
    # every module of the package is in it (the tree's tracer/dlltrace, the built bin/ aside)
    tree = {p.relative_to(ROOT / "tracer").as_posix() for p in (ROOT / "tracer" / "dlltrace").rglob("*.py")}
    assert tree <= any_
    assert not [n for n in any_ if n.endswith((".pyc", ".dll", ".exe", ".so"))]
    # the Linux recorder's sources, which an installed dlltrace builds with gcc on first use (trace/linux.py)
    audit = {f"dlltrace/native/audit/{n}" for n in ("build.sh", "dlltrace_audit.c", "dlltrace_preload.c",
                                                      "dlltrace_out.h")}
    assert audit <= any_ and {n for n in any_ if n.startswith("dlltrace/native/")} == audit


def test_an_installed_wheel_traces_on_linux(dist, tmp_path):
    """The any wheel unpacked alone (no checkout): `dlltrace run` on Linux builds the recorder from the
    wheel's own copy of native/audit into the cache and traces a failing ctypes.CDLL (exit 1 passed on)."""
    if shutil.which("gcc") is None:
        if os.environ.get("CI"):
            pytest.fail("needs gcc -- CI has it")
        pytest.skip("needs gcc")
    site = tmp_path / "site"
    with zipfile.ZipFile(dist / ANY) as z:
        z.extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = "import ctypes; ctypes.CDLL('libnope_from_wheel.so.3')"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", "t.jsonl", "--", sys.executable, "-c", code],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "✗ libnope_from_wheel.so.3 was not found" in r.stderr
    assert (tmp_path / "cache" / "dlltrace" / "linux" / "libdlltrace_audit.so").is_file()  # built from the wheel


@pytest.mark.parametrize("bits, machine", [("64", "x64"), ("32", "x86")])
def test_win_wheel_binaries_are_pe_of_both_machines_with_the_shim_api(dist, tmp_path, bits, machine):
    """The win_amd64 wheel holds both machines' shim and launcher (the x64 launcher puts the x86 shim into
    32-bit programs)."""
    with zipfile.ZipFile(dist / WIN) as z:
        z.extractall(tmp_path, members=sorted(BIN_FILES))
    shim = read_pe_facts(tmp_path / f"dlltrace/bin/dlltrace_shim{bits}.dll")
    launcher = read_pe_facts(tmp_path / f"dlltrace/bin/dlltrace_launch{bits}.exe")
    assert isinstance(shim, PEFacts) and isinstance(launcher, PEFacts)
    assert (shim.machine, shim.is_dll) == (machine, True)
    assert (launcher.machine, launcher.is_dll) == (machine, False)
    assert SHIM_EXPORTS <= shim.exports  # (undecorated in the x86 build too: GetProcAddress finds them by name)


def test_sdist_holds_native_sources_and_no_binary(dist):
    with tarfile.open(dist / SDIST) as t:
        files = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}
    native = {p.relative_to(ROOT).as_posix() for p in (ROOT / "native").rglob("*") if p.is_file()}
    assert native and native <= files
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "tools/build-wheels.sh"} <= files
    assert not [f for f in files if f.startswith("tracer/dlltrace/bin/") or f.endswith((".dll", ".exe", ".pyc"))]


def tracked_tree_copy(dest: Path) -> Path:
    """The repository's tracked files (as they are in the work tree) copied to dest."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    for rel in filter(None, r.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.parametrize("platform", ["any", "win_amd64"])
def test_files_lying_in_the_tree_bin_never_ship(tmp_path, platform):
    """A build straight from a tree whose tracer/dlltrace/bin/ holds stale files (an old shim, a junk
    file): the any wheel has no bin/, the win_amd64 wheel exactly the two binaries built for it."""
    require_build_tools()
    src = tracked_tree_copy(tmp_path / "src")
    stale = src / "tracer" / "dlltrace" / "bin"
    stale.mkdir(parents=True, exist_ok=True)
    (stale / "dlltrace_shim64.dll").write_bytes(b"stale shim, not a PE file")
    (stale / "dlltrace_launch64.exe").write_bytes(b"stale launcher")
    (stale / "dlltrace_shim32.dll").write_bytes(b"stale x86 shim")
    (stale / "old_shim32.dll").write_bytes(b"left over")
    env = {**os.environ, "DLLTRACE_PLATFORM": platform}
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "-o", str(tmp_path / "out"), str(src)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert wheel.name == (WIN if platform == "win_amd64" else ANY)
    shipped = {n for n in names(wheel) if n.startswith("dlltrace/bin/")}
    if platform == "any":
        assert shipped == set()
    else:
        assert shipped == BIN_FILES
        with zipfile.ZipFile(wheel) as z:
            assert all(z.read(f)[:2] == b"MZ" for f in BIN_FILES)


def test_bad_platform_is_one_clear_error(tmp_path):
    require_build_tools()
    src = tracked_tree_copy(tmp_path / "src")
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "-o", str(tmp_path / "out"), str(src)],
                       env={**os.environ, "DLLTRACE_PLATFORM": "win32"}, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "DLLTRACE_PLATFORM='win32': expected one of win_amd64, any" in r.stdout + r.stderr


@pytest.mark.wine
def test_trace_under_wine_with_the_shim_from_the_unpacked_wheel(dist, wine_prefix, tmp_path):
    """The win_amd64 wheel unpacked on its own; `python -m dlltrace run --wine` with PYTHONPATH=<unpacked>
    so that `dlltrace` is the wheel's copy, which takes the launcher (and the launcher the shim next to
    it) from the wheel's bin/."""
    winetools.require("mingw64")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(dist / WIN) as z:
        z.extractall(unpacked)
    host = winetools.mingw_compile([FIX / "host" / "loadhost.c"], tmp_path / "loadhost.exe", extra=["-municode"])
    dll = winetools.mingw_compile([FIX / "dlls" / "plain.c"], tmp_path / "a.dll", dll=True)
    env = winetools.wine_env(PYTHONPATH=str(unpacked), LC_ALL="C.UTF-8")
    env.pop("DLLTRACE_SHIM", None)

    where = winetools.run_captured([sys.executable, "-c", "import dlltrace.trace.launch as l; print(l.BIN)"],
                                   env=env)
    assert Path(where.stdout.strip()) == unpacked / "dlltrace" / "bin", where.stdout + where.stderr

    trace_path = tmp_path / "t.jsonl"
    r = None
    for _ in range(3):  # (Wine itself not starting the program on a busy machine: winetools.traced_run)
        r = winetools.run_captured([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(trace_path), "--",
                                    str(host), "load", winetools.to_windows(dll), "0",
                                    "load", "C:\\no\\such\\missing.dll", "0"], env=env, cwd=tmp_path, timeout=300)
        if "the program never ran" not in r.stderr:
            break
    assert r is not None and trace_path.exists(), (r.stdout + r.stderr)[-3000:] if r else ""
    tr = read_trace(trace_path)
    (proc,) = list(tr.of("process"))
    assert proc["shim"].lower() == winetools.to_windows(unpacked / "dlltrace" / "bin" / "dlltrace_shim64.dll").lower()
    loads = [(ld.name.rsplit("\\", 1)[-1].lower(), ld.error) for ld in tr.loads() if ld.name]
    assert loads == [("a.dll", 0), ("missing.dll", 126)]
    assert r.stdout.replace("\r\n", "\n") == "load ok\nload err 126\n"  # the program's stdout, passed through
    assert r.returncode == 126  # loadhost exits with its last op's error
