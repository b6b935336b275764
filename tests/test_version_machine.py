"""`dlltrace --version` says what this machine can trace, and its words are held against the machine: where
it says yes, the run works; where it says how to fix a no, that command is run and the line then says yes.

Needs gcc (the Linux recorder) and mingw-w64 (the shim): locally a test without them skips, in CI it fails
(tests/winetools.py: require)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import winetools
from dlltrace import install
from dlltrace.trace import launch, where

ROOT = Path(__file__).resolve().parent.parent
LINUX = "tracing Linux programs (`dlltrace run -- CMD`): "
WINE = "tracing Windows programs under Wine (`dlltrace run --wine -- PROG.exe`): "


def line(text: str, start: str) -> str:
    got = [ln for ln in text.splitlines() if ln.startswith(start)]
    assert len(got) == 1, text
    return got[0][len(start):]


def fix_of(words: str) -> str:
    """The command after "fix: " or "to build it now: " in a line of --version."""
    for mark in ("; fix: ", "; to build it now: "):
        if mark in words:
            return words.split(mark, 1)[1].rstrip(")")
    raise AssertionError(f"no fix command in {words!r}")


def run_fix(cmd: str) -> None:
    """A fix --version gave, run as a user pastes it, less an apt-get step (the tests' machine has the
    package already: what follows `&&` is the part that builds)."""
    if "apt-get install" in cmd:
        cmd = cmd.split("&&", 1)[1]
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (cmd, r.stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux recorder is Linux's")
def test_linux_recorder_line_matches_the_machine(dlltrace_cli, monkeypatch, tmp_path):
    if not shutil.which("gcc"):
        if os.environ.get("CI"):
            pytest.fail("needs gcc -- CI must install it (.ci/run)")
        pytest.skip("needs gcc")
    monkeypatch.setattr(where, "find_wine", lambda: None)  # (--version looks for wine64; runs nothing)
    # no recorder anywhere yet, gcc on PATH: "yes", built on first use, with the command to build it now
    monkeypatch.setattr(where, "package_recorder_dir", lambda: tmp_path / "none")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    words = line(dlltrace_cli("--version").stdout, LINUX)
    built_at = tmp_path / "cache" / "dlltrace" / "linux"
    assert words.startswith(f"yes (the recorder is not built yet; the first `dlltrace run` builds it with gcc into {built_at}")
    assert "linux recorder: not built" in dlltrace_cli("--version").stdout
    # the fix it names builds it, and then the line says built, there
    run_fix(fix_of(words))
    out = dlltrace_cli("--version").stdout
    assert line(out, LINUX) == "yes" and f"linux recorder: {built_at} (built)" in out
    # and "yes" is true: a traced run of a real program records its loads with that recorder
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", "/bin/true"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert '"ev": "objopen"' in trace.read_text() or '"ev":"objopen"' in trace.read_text()
    # without gcc and without a built recorder: "no", and the fix installs gcc
    shutil.rmtree(built_at)
    real_which = shutil.which
    monkeypatch.setattr(install.shutil, "which", lambda c, *a, **k: None if c == "gcc" else real_which(c, *a, **k))
    words = line(dlltrace_cli("--version").stdout, LINUX)
    assert words.startswith("no: the recorder is not built and gcc, which builds it, is not installed; fix: ")
    assert fix_of(words).endswith("apt-get install gcc") or fix_of(words) == "install gcc"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux recorder is Linux's")
def test_linux_recorder_line_in_a_folder_others_can_write_says_no(dlltrace_cli, monkeypatch, tmp_path):
    """XDG_CACHE_HOME under a folder anyone may write (not sticky): `dlltrace run` builds no recorder there (exit 7,
    trace/linux.recorder_dir), so --version said 'yes (... the first `dlltrace run` builds it with gcc into ...)'
    falsely; it says no, makes nothing there, and names a folder of the user's own as the fix."""
    monkeypatch.setattr(where, "find_wine", lambda: None)
    monkeypatch.setattr(where, "package_recorder_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(install.shutil, "which", lambda c, *a, **k: "/usr/bin/gcc" if c == "gcc" else None)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared / "cache"))
    words = line(dlltrace_cli("--version").stdout, LINUX)
    assert words == (f"no: the recorder is not built, and the folder it would be built in, {shared}/cache/dlltrace/linux, "
                     "or one above it, can be written by another user; fix: set XDG_CACHE_HOME to a folder of your "
                     "own, or install dlltrace with its recorder built (tools/setup.sh)"), words
    assert list(shared.iterdir()) == []  # (nothing made there by asking)
    from dlltrace.errors import EXIT_UNSUPPORTED, DlltraceError
    from dlltrace.trace import linux

    monkeypatch.setattr(linux, "build_recorder", lambda out: pytest.fail(f"built into {out}"))
    with pytest.raises(DlltraceError) as e:  # (what the line says no to)
        linux.recorder_dir()
    assert e.value.exit_code == EXIT_UNSUPPORTED
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "own"))  # (the fix)
    assert line(dlltrace_cli("--version").stdout, LINUX).startswith("yes (the recorder is not built yet")


def test_the_checkout_recorder_line(dlltrace_cli, monkeypatch):
    """What setup built (tools/setup.sh: tracer/dlltrace/bin/linux) is what --version names."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    monkeypatch.setattr(where, "find_wine", lambda: None)
    out = dlltrace_cli("--version").stdout
    built = where.built_recorder()
    if built is not None:
        assert line(out, LINUX) == "yes" and f"linux recorder: {built} (built)" in out
    elif shutil.which("gcc"):
        assert line(out, LINUX).startswith("yes (the recorder is not built yet")
    else:
        assert line(out, LINUX).startswith("no: ")


def test_no_mingw_says_how_to_build_the_shim_and_that_command_builds_it(dlltrace_cli, monkeypatch, tmp_path):
    """A machine without mingw and without a built shim: the line names the apt package and native/build.sh;
    with mingw there (CI), the build step of that line, run as pasted, makes the shim and --version sees it."""
    winetools.require("mingw64")
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("DLLTRACE_BIN", str(bin_dir))
    monkeypatch.setattr(where, "find_wine", lambda: "/usr/bin/wine64")  # (looked for, never run)
    real_which = shutil.which
    monkeypatch.setattr(install.shutil, "which",
                        lambda c, *a, **k: None if c == install.CC64 else real_which(c, *a, **k))
    monkeypatch.setattr(install, "_apt", lambda pkg: f"sudo apt-get install {pkg}")
    words = line(dlltrace_cli("--version").stdout, WINE)
    assert words == (f"no: the native launcher and shim are not built; fix: sudo apt-get install gcc-mingw-w64-x86-64 "
                     f"&& bash {ROOT / 'native' / 'build.sh'} {bin_dir}")
    run_fix(fix_of(words))
    monkeypatch.setattr(install.shutil, "which", real_which)
    out = dlltrace_cli("--version").stdout
    assert line(out, WINE) == "yes"
    assert f"shim: {bin_dir / launch.SHIM} (x64 PE)" in out and f"launcher: {bin_dir / launch.LAUNCHER} (x64 PE)" in out


def test_no_wine_says_how_to_install_it(dlltrace_cli, monkeypatch):
    monkeypatch.setattr(where, "find_wine", lambda: None)
    assert "wine64: not found" in dlltrace_cli("--version").stdout
    built = tuple(install.NativeFile(role, Path(role), "x64", None) for role in ("launcher", "shim"))
    monkeypatch.setattr(install, "_apt", lambda pkg: f"sudo apt-get install {pkg}")
    assert install.windows_ability(built, "linux", None) == install.Ability(
        "wine", "no", "wine64 is not installed", "sudo apt-get install wine64")
    monkeypatch.setattr(install, "_apt", lambda pkg: None)  # (no apt-get: a machine of another kind)
    assert install.windows_ability(built, "linux", None).fix == "install Wine (wine64)"
    assert install.windows_ability(built, "linux", "/usr/bin/wine64").state == "yes"
    assert install.windows_ability(built, "windows", None).state == "yes"  # (Windows runs them itself)


@pytest.mark.wine
def test_wine_yes_is_true(dlltrace_cli, wine_prefix, tmp_path):
    """Where --version says Windows programs can be traced under Wine, `dlltrace run --wine` of a real
    program records its loads."""
    winetools.require("wine", "mingw64")
    out = dlltrace_cli("--version").stdout
    if line(out, WINE) != "yes":
        pytest.fail(f"CI builds the shim and installs wine64, yet --version says: {line(out, WINE)}")
    exe = tmp_path / "hello.exe"
    src = tmp_path / "hello.c"
    src.write_text('#include <windows.h>\nint main(void){ return LoadLibraryA("no_such_thing.dll") ? 1 : 3; }\n')
    winetools.mingw_compile([src], exe)
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(trace), "--", str(exe)],
                       capture_output=True, text=True, timeout=300,
                       env=winetools.wine_env(PYTHONPATH=str(ROOT / "tracer")))
    assert r.returncode == 3, r.stderr
    assert "no_such_thing.dll" in trace.read_text()


X86 = "tracing 32-bit (x86) Windows programs: "


def test_x86_line_says_what_is_missing(monkeypatch):
    """The 32-bit line: the x86 shim and launcher (both x86 PE), and under Wine its 32-bit half."""
    yes = install.Ability("wine", "yes", None, None)
    x86 = tuple(install.NativeFile(role, Path(role), "x86", None) for role in ("x86 launcher", "x86 shim"))
    missing = tuple(install.NativeFile(role, Path(role), None, "missing") for role in ("x86 launcher", "x86 shim"))
    x64 = tuple(install.NativeFile(role, Path(role), "x64", None) for role in ("x86 launcher", "x86 shim"))
    monkeypatch.setattr(install.shutil, "which", lambda c, *a, **k: "/usr/bin/" + c)  # (compilers, apt-get: there)
    monkeypatch.setattr(install, "_root", lambda: "sudo ")
    assert install.x86_ability(yes, x86, "linux", "/usr/bin/wine64", True) == install.Ability("x86", "yes", None, None)
    a = install.x86_ability(yes, missing, "linux", "/usr/bin/wine64", True)
    assert (a.state, a.why, a.fix) == ("no", "the x86 shim and launcher are not built", install.shim_fix())
    a = install.x86_ability(yes, x64, "linux", "/usr/bin/wine64", True)
    assert a.why == "the x86 launcher is an x64 PE, the x86 shim is an x64 PE"
    a = install.x86_ability(yes, x86, "linux", "/usr/bin/wine64", False)
    assert a.state == "no" and "32-bit" in a.why
    assert a.fix == ("sudo dpkg --add-architecture i386 && sudo apt-get update && sudo apt-get install wine32:i386")
    assert install.x86_ability(yes, x86, "windows", None, False).state == "yes"  # (Windows runs them itself)
    no = install.Ability("wine", "no", "wine64 is not installed", None)
    assert install.x86_ability(no, x86, "linux", None, True).state == "no"


def test_no_i686_compiler_names_its_package(monkeypatch, tmp_path):
    monkeypatch.setenv("DLLTRACE_BIN", str(tmp_path / "bin"))
    real_which = shutil.which
    monkeypatch.setattr(install.shutil, "which",
                        lambda c, *a, **k: None if c == install.CC32 else real_which(c, *a, **k))
    monkeypatch.setattr(install, "_apt", lambda pkg: f"sudo apt-get install {pkg}")
    assert install.shim_fix() == (f"sudo apt-get install gcc-mingw-w64-i686-win32 && bash {ROOT / 'native' / 'build.sh'} "
                                  f"{tmp_path / 'bin'}")


@pytest.mark.wine
def test_x86_yes_is_true(dlltrace_cli, wine_prefix, tmp_path):
    """Where --version says 32-bit programs can be traced, `dlltrace run --wine` of a 32-bit program records
    its loads (the x86 shim in it)."""
    winetools.require("wine", "wine32", "mingw32")
    out = dlltrace_cli("--version").stdout
    if line(out, X86) != "yes":
        pytest.fail(f"CI builds the x86 shim and installs wine32, yet --version says: {line(out, X86)}")
    assert f"x86 shim: {where.bin_dir() / where.SHIM32} (x86 PE)" in out
    src = tmp_path / "hello.c"
    src.write_text('#include <windows.h>\nint main(void){ return LoadLibraryA("no_such_thing32.dll") ? 1 : 3; }\n')
    exe = winetools.mingw_compile([src], tmp_path / "hello32.exe", bits=32)
    trace = tmp_path / "t.jsonl"
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(trace), "--", str(exe)],
                       capture_output=True, text=True, timeout=300,
                       env=winetools.wine_env(PYTHONPATH=str(ROOT / "tracer")))
    assert r.returncode == 3, r.stderr
    assert "no_such_thing32.dll" in trace.read_text() and '"machine":"x86"' in trace.read_text()
