"""Right for the user's Python (issue 24 item 3): which kind of Python a trace's py_env says (trace/reader.py
python_kind: venv, conda, the Microsoft Store's, the embeddable distribution, a full install), said in the report, and
used by the fixes: no copy into a Store Python's read-only folder; an embeddable Python without pip gets the
--target install a full Python of its version makes; the bootstrap records the ._pth that makes a Python embeddable."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dlltrace import cli
from dlltrace.trace.reader import python_kind

ROOT = Path(__file__).resolve().parent.parent


def hw():
    spec = importlib.util.spec_from_file_location("handwritten", ROOT / "fixtures" / "traces" / "handwritten.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("py, kind", [
    ({"executable": "C:\\Python311\\python.exe", "prefix": "C:\\Python311", "base_prefix": "C:\\Python311"}, "system"),
    ({"executable": "C:\\v\\Scripts\\python.exe", "prefix": "C:\\v", "base_prefix": "C:\\Python311"}, "venv"),
    ({"executable": "C:\\m\\python.exe", "prefix": "C:\\m", "base_prefix": "C:\\m", "conda": True}, "conda"),
    ({"executable": "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0\\python3.11.exe",
      "prefix": "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0",
      "base_prefix": "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0"}, "store"),
    ({"executable": "C:\\app\\py\\python.exe", "prefix": "C:\\app\\py", "base_prefix": "C:\\app\\py",
      "pth": {"file": "C:\\app\\py\\python311._pth", "import_site": False}}, "embeddable"),
    (None, ""),
])
def test_rule_python_kind(py, kind):
    assert python_kind(py) == kind


def report(tmp_path, capsys, exe: str, prefix: str, pth=None, pip=True, user_site=None, old_trace=False,
           executable=None) -> str:
    """The text and Markdown reports of a Python extension import that fails on cublas64_12.dll (pip's
    nvidia-cublas-cu12 ships it), in a Python of the given kind (`executable`: its sys.executable, when it is not the
    process's image: a Store Python's app execution alias)."""
    h = hw()
    site = prefix + "\\Lib\\site-packages"
    pyd = site + "\\pkg\\_ext.cp311-win_amd64.pyd"
    w = h.Writer(exe, "C:\\work", [prefix, h.SYS32], [h.SYS32 + "\\kernel32.dll", prefix + "\\python311.dll"], [exe, "app.py"])
    w.ev("py_env", version="3.11.9", implementation="cpython", executable=executable or exe, prefix=prefix,
         base_prefix=prefix,
         exec_prefix=prefix, bits=64, conda=False, conda_prefix=None,
         sys_path=[prefix + "\\python311.zip", prefix, *([user_site] if user_site else []), site], pth=pth,
         **({} if old_trace else {"user_site": user_site}))
    w.ev("py_dists", dists=[{"name": "pip", "version": "24.0", "site": site, "files": [], "loaders": []}] if pip else [],
         conda=[], conda_prefix=None, cut=False)
    w.failed_import("pkg._ext", pyd, "cublas64_12.dll", [site + "\\pkg", prefix, h.SYS32])
    w.write(tmp_path / "t.jsonl")
    cli.main(["report", str(tmp_path / "t.jsonl")])
    text = capsys.readouterr().out
    cli.main(["report", "--markdown", str(tmp_path / "t.jsonl")])
    return text + "\n--- markdown ---\n" + capsys.readouterr().out


def test_rule_embeddable_python_without_pip_gets_a_target_install(tmp_path, capsys):
    out = report(tmp_path, capsys, "C:\\app\\py\\python.exe", "C:\\app\\py",
                 pth={"file": "C:\\app\\py\\python311._pth", "import_site": False}, pip=False)
    assert "(64-bit, the embeddable distribution)" in out
    assert ('This embeddable Python has no pip: with the pip of a full Python of the same version, install it into '
            'C:\\app\\py\\Lib\\site-packages') in out, out
    assert 'python -m pip install --target "C:\\app\\py\\Lib\\site-packages" nvidia-cublas-cu12' in out
    # the same Python with pip: its own pip
    out = report(tmp_path, capsys, "C:\\app\\py\\python.exe", "C:\\app\\py",
                 pth={"file": "C:\\app\\py\\python311._pth", "import_site": True}, pip=True)
    assert "C:\\app\\py\\python.exe -m pip install nvidia-cublas-cu12" in out and "has no pip" not in out


def test_rule_no_copy_into_a_store_pythons_folder(tmp_path, capsys):
    store = "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0"
    out = report(tmp_path, capsys, store + "\\python3.11.exe", store)
    assert "the Microsoft Store's" in out
    assert "into C:\\Program Files\\WindowsApps" not in out and "add_dll_directory" in out, out
    out = report(tmp_path, capsys, "C:\\Python311\\python.exe", "C:\\Python311")
    assert "(64-bit)" in out


STORE = "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0"
USER_SITE = ("C:\\Users\\u\\AppData\\Local\\Packages\\PythonSoftwareFoundation.Python.3.11_qbz5n2kfra8p0\\LocalCache\\"
             "local-packages\\Python311\\site-packages")


@pytest.mark.parametrize("old_trace", [False, True], ids=["user_site", "sys_path"])
def test_rule_store_python_installs_into_its_user_site(tmp_path, capsys, old_trace):
    """A Store Python's pip installs into the user site (its own folder is read-only): the install fix says so, and
    names the folder the wheel's DLL lands in there, not under WindowsApps; from py_env's user_site, or (a trace made
    before it was recorded) from sys.path's LocalCache\\local-packages entry."""
    out = report(tmp_path, capsys, STORE + "\\python3.11.exe", STORE, user_site=USER_SITE, old_trace=old_trace)
    assert "pip install nvidia-cublas-cu12" in out, out
    assert (f"this Store Python's own folder cannot be written, so pip installs into your user site, {USER_SITE}: "
            f"it puts cublas64_12.dll in {USER_SITE}\\nvidia\\cublas\\bin") in out, out
    assert "in C:\\Program Files\\WindowsApps" not in out, out
    # a full install's pip installs into its own site-packages, user site or not
    out = report(tmp_path, capsys, "C:\\Python311\\python.exe", "C:\\Python311", user_site=USER_SITE)
    assert "it puts cublas64_12.dll in C:\\Python311\\Lib\\site-packages\\nvidia\\cublas\\bin" in out, out
    assert "user site" not in out


ALIAS = "C:\\Users\\u\\AppData\\Local\\Microsoft\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_qbz5n2kfra8p0\\python.exe"


def test_a_store_pythons_pip_runs_through_its_alias(tmp_path, capsys):
    """A Store Python's process image is under C:\\Program Files\\WindowsApps, which the user cannot run ("Access is
    denied"); its sys.executable is the app execution alias under %LOCALAPPDATA%\\Microsoft\\WindowsApps (CPython's
    bpo-37369): the fix's pip runs with that. (Before: the Program Files path, quoted for cmd and PowerShell.)"""
    out = report(tmp_path, capsys, STORE + "\\python3.11.exe", STORE, user_site=USER_SITE, executable=ALIAS)
    # (the command a line of its own, its words under it: fixwords.fix_lines)
    assert f"1. {ALIAS} -m pip install nvidia-cublas-cu12\n" in out, out
    assert "\n" + " " * (out.index(f"1. {ALIAS}") - out.rindex("\n", 0, out.index(f"1. {ALIAS}")) + 2) + \
        "(this Store Python's own folder cannot be written" in out, out
    assert "WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0\\python3.11.exe\" -m pip" \
        not in out and "Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.11_3.11.2544.0_x64__qbz5n2kfra8p0\\python3.11.exe -m" \
        not in out, out


def test_rule_store_alias():
    from dlltrace.diagnosis.replay import store_alias

    store_py = {"executable": ALIAS, "prefix": STORE, "base_prefix": STORE}
    assert store_alias(store_py, STORE + "\\python3.11.exe") == ALIAS
    assert store_alias(store_py, ALIAS) == ""  # (the process is the alias itself)
    assert store_alias({"executable": STORE + "\\python3.11.exe", "prefix": STORE, "base_prefix": STORE},
                       STORE + "\\python3.11.exe") == ""  # (no alias recorded: the image as before)
    assert store_alias({"executable": "C:\\Python311\\python.exe", "prefix": "C:\\Python311",
                        "base_prefix": "C:\\Python311"}, "C:\\Python311\\python.exe") == ""


def test_the_bootstrap_records_the_user_site(monkeypatch):
    """site.USER_SITE as site set it, read without computing it (which would change the program's site module);
    none when site did not set it."""
    import site
    import sys

    from dlltrace.trace import shim

    monkeypatch.setattr(site, "USER_SITE", "/home/u/.local/lib/python3.11/site-packages")
    assert shim.python_env_fields()["user_site"] == "/home/u/.local/lib/python3.11/site-packages"
    monkeypatch.setattr(site, "USER_SITE", None)  # (-s, PYTHONNOUSERSITE)
    assert shim.python_env_fields()["user_site"] is None and site.USER_SITE is None  # (left as it was)
    monkeypatch.delitem(sys.modules, "site")
    assert shim.python_env_fields()["user_site"] is None


def test_the_bootstrap_records_the_pth_of_an_embeddable_python(tmp_path, monkeypatch):
    import sys

    from dlltrace.trace import shim

    (tmp_path / ("python%d%d._pth" % sys.version_info[:2])).write_text("python311.zip\n.\n# import site\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python.exe"))
    assert shim.python_env_fields()["pth"] == {"file": str(tmp_path / ("python%d%d._pth" % sys.version_info[:2])),
                                               "import_site": False}
    (tmp_path / ("python%d%d._pth" % sys.version_info[:2])).write_text("python311.zip\n.\nimport site\n")
    assert shim.python_env_fields()["pth"]["import_site"] is True
    monkeypatch.setattr(sys, "executable", str(tmp_path / "none" / "python.exe"))
    assert shim.python_env_fields()["pth"] is None
