"""Which launcher and shim `dlltrace run` and the bootstrap pick for the machine they run on, and what a failed
start says about a program no shim can enter (no Wine needed; tests/test_shim32.py runs them)."""

from __future__ import annotations

import sys
from pathlib import Path

from dlltrace.trace import launch, shim, where


def test_launcher_name_per_windows_machine():
    assert where.launcher_name("AMD64") == where.launcher_name("ARM64") == "dlltrace_launch64.exe"
    assert where.launcher_name("x86") == "dlltrace_launch32.exe"


def test_native_pair(monkeypatch, tmp_path):
    monkeypatch.setenv("DLLTRACE_BIN", str(tmp_path))
    monkeypatch.setattr(launch.platform, "machine", lambda: "x86")
    assert launch.native_pair(wine=True) == (tmp_path / "dlltrace_launch64.exe", tmp_path / "dlltrace_shim64.dll")
    assert launch.native_pair(wine=False) == (tmp_path / "dlltrace_launch32.exe", tmp_path / "dlltrace_shim32.dll")
    monkeypatch.setattr(launch.platform, "machine", lambda: "AMD64")
    assert launch.native_pair(wine=False) == (tmp_path / "dlltrace_launch64.exe", tmp_path / "dlltrace_shim64.dll")


def test_machine_words_only_for_machines_no_shim_enters():
    assert launch.machine_words("x86") == launch.machine_words("x64") == launch.machine_words(None) == ""
    assert launch.machine_words("arm64") == "; an arm64 program: no dlltrace shim can enter it"
    assert launch.machine_words("unknown") == "; a program of an unknown machine: no dlltrace shim can enter it"


def test_wine_runs_32bit_looks_for_the_32bit_ntdll(monkeypatch, tmp_path):
    monkeypatch.setattr(where, "WINE32_DLL_DIRS", ())
    wine = tmp_path / "opt" / "bin" / "wine64"
    wine.parent.mkdir(parents=True)
    wine.write_text("")
    assert not where.wine_runs_32bit(str(wine)) and not where.wine_runs_32bit(None)
    dlls = tmp_path / "opt" / "lib" / "wine" / "i386-windows"
    dlls.mkdir(parents=True)
    (dlls / "ntdll.dll").write_bytes(b"MZ")
    assert where.wine_runs_32bit(str(wine))


def test_the_bootstrap_loads_the_shim_of_its_python(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "maxsize", 2**63 - 1)
    assert Path(shim.default_shim_path()).name == "dlltrace_shim64.dll"
    monkeypatch.setattr(sys, "maxsize", 2**31 - 1)
    assert Path(shim.default_shim_path()).name == "dlltrace_shim32.dll"
