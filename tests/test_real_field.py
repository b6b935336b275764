"""Real wheels the field test tried under Wine, with the real Windows CPython 3.11 (tests/realimports.py): a
broken situation a user meets, Wine's +loaddll log and the program's own exception as the truth, the report's
answer checked against them, and its first fix applied for real (realimports.apply_fix: the typed action, never
its text) and run again.

- scikit-learn 1.5.2 without its sklearn\\.libs\\vcomp140.dll: its _distributor_init.py loads that file by full
  path (ctypes.WinDLL) and the program ends on FileNotFoundError; System32 has a vcomp140.dll (Wine's own; on
  Windows the VC++ runtime's, when installed), which a full-path load never takes. The file is scikit-learn's
  (its RECORD): reinstalling scikit-learn is the fix (explain.rule_record_listed_file_looked_for). Before, the
  report said "installed but not searched" and copied System32's file into sklearn\\.libs.

- tokenizers 0.20.3 under Wine 8.0: its extension (Rust's std, 1.78 or later) imports bcryptprimitives.dll, which
  every Windows 10/11 has and Wine 8.0 has not; `import tokenizers` ends on ImportError. The report must say Wine
  lacks it (explain.rule_windows_dll_missing_under_wine), not that the user's Windows does. Its fix is advice (a
  Wine that has the DLL): nothing to apply here.

- xgboost 2.1.3 (py3-none-win_amd64) with its xgboost\\lib\\xgboost.dll replaced by a 32-bit DLL: xgboost's own
  code loads it by full path (ctypes), Wine fails it (c000007b) and xgboost raises XGBoostError, whose text blames
  a missing OpenMP runtime. The file is xgboost's (its RECORD) and the wheel is built for x64 only (its WHEEL
  tags): reinstalling xgboost is the fix (explain.rule_wrong_machine_file_of_its_own_wheel, by the tags).

- psycopg2-binary 2.9.13 installed, and its psycopg2 folder vendored into the application's folder (first on
  sys.path) without psycopg2_binary.libs: _psycopg.pyd cannot find libpq. `import psycopg2` is no fix (it imports
  the vendored copy again: explain.rule_package_loader_of_another_copy); os.add_dll_directory of the installed
  psycopg2_binary.libs is, and the vendored copy then loads.

- openslide-python 1.4.7 without OpenSlide (its wheel ships none): it imports openslide_bin, then tries ctypes
  loads of libopenslide-1.dll and OpenSlide 3's libopenslide-0.dll in turn, and ends on ModuleNotFoundError.
  The failure is libopenslide-1.dll, which the openslide-bin wheel ships (verdict.rule_alternate_name_a_package_ships);
  before, the report named libopenslide-0.dll, which no package ships, and said "find the package". Installing
  openslide-bin (its real wheel) is the fix: openslide then loads openslide_bin\\libopenslide-1.dll.

- pyusb 1.3.1 without libusb (its wheel ships none): usb.core.find() asks ctypes.util.find_library for
  'usb-1.0.dll', 'libusb-1.0.dll', 'usb.dll' (libusb 1.0), 'openusb.dll', 'usb-0.1.dll', 'usb.dll', 'libusb0.dll',
  which on Windows look in the PATH folders only, finds none, makes no load, and raises usb.core.NoBackendError
  ("No backend available"). The report answers with find_library('libusb-1.0.dll') (the name the libusb-package
  wheel ships: outcome.rule_unfound_dll_with_a_fix), the PATH folders it looked in, and the fix: pip install
  libusb-package, then its folder on PATH (pip alone puts the DLL where find_library does not look). Both applied
  for real: find_library then finds libusb_package\\libusb-1.0.dll and pyusb loads it.

- sounddevice 0.5.1 with its _sounddevice_data\\portaudio-binaries\\libportaudio64bit.dll gone, or a 32-bit DLL put
  over it: sounddevice.py asks ctypes.util.find_library for PortAudio first (the PATH folders; none here), then
  loads its own copy by full path with cffi's ffi.dlopen (LoadLibraryExW(path, 0x1100)) and ends on OSError
  ("error 0x7e", "error 0xc1"). The file is sounddevice's (its RECORD): reinstalling it is the fix, and after it
  the import runs. A 32-bit portaudio.dll on PATH is found by find_library, fails (193), and sounddevice goes on to
  its own copy: the run is ok and the report lists that load apart, with no failure.

- pyproj 3.7.0 (delvewheel 1.8.2: pyproj.libs, names mangled, added with os.add_dll_directory by its __init__.py)
  with pyproj.libs' sqlite3-<hash>.dll gone, or its tiff-<hash>.dll a 32-bit DLL: `import pyproj` ends on
  ImportError while importing _context; the leaf is the DLL proj-<hash>.dll imports (chain _context pyd, proj,
  leaf), pyproj's (its RECORD), and reinstalling pyproj is the fix; after it pyproj prints PROJ's version.

- pycryptodome 3.21.0 without its Crypto\\Cipher\\_raw_aes.pyd: Crypto/Util/_raw_api.py looks for the file with
  os.path.isfile before loading it and ends on OSError "Cannot load native module 'Crypto.Cipher._raw_aes': Not
  found '_raw_aes.cp311-win_amd64.pyd', Not found '_raw_aes.pyd'", base names only, no load made. The report said
  "no failed load explains it"; the shim now names the module's file in its package's folder
  (shim._module_files), and the report says pycryptodome's file is not there and reinstalls it.

- pywin32 306 installed from its cp310 wheel, or from its win32 wheel, into the 64-bit CPython 3.11: its .pyd names
  carry no tag, so `import win32api` imports its win32api.pyd, which imports python310.dll (not found), or is x86
  (193). The report said "install the package's build for this Python" naming no package, and "get the 64-bit
  build of what ships win32api.pyd"; it now names pywin32 306 (its RECORD; explain.rule_extension_of_another_python,
  rule_wheel_for_another_machine) and reinstalls it with this Python's pip, which picks the cp311 win_amd64 build:
  placed for real, the import runs. (python311.dll beside python.exe was said to be "in no folder the loader
  searches": the application folder the load searched; explain.rule_close_name_in_a_searched_folder.)

- python-magic 0.4.27 without libmagic (its wheel ships none): magic/loader.py's find_library calls find nothing and
  it raises "failed to find libmagic". The report said to put libmagic.dll in a PATH folder, which is no fix (python-
  magic then loads it and finds no magic database: MagicException). python-magic-bin replaces python-magic (both
  install the module magic) and loads its own DLL and database (data/packages.json `replaces`;
  analysis.rule_package_that_replaces_the_module): uninstall python-magic, install python-magic-bin; done, it runs.

- PyQt5 5.15.11 with PyQt5-Qt5 5.15.2 without its PyQt5\\Qt5\\plugins\\platforms\\qwindows.dll: QGuiApplication([])
  (which starts under Wine with no X display: platform "windows") finds no platform plugin, says so with
  OutputDebugString ("This application failed to start because no Qt platform plugin could be initialized") and
  aborts: 0xC0000409, no load of the plugin made. The report said "no failed load explains it"; `dlltrace run` now
  looks, after a failed run, for the native files the RECORDs of the imported distributions list, and the report
  says PyQt5_Qt5's file is not there and reinstalls it (pip, for real, under Wine: the program then runs).
 numpy 1.26.4 and scipy 1.11.4 (scipy 1.13 and 1.14's OpenBLAS call ucrtbase's crealf, which
Wine 8 lacks: `import sklearn` would abort under Wine once the DLL is back), built once into the test cache.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import pytest

import realimports as ri
import realwheels as rw

pytestmark = [pytest.mark.wine,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine runs on Linux here")]

SKLEARN_ENV = [
    rw.WHEELS["sklearn"],
    rw.Wheel("numpy", "1.26.4", "numpy-1.26.4-cp311-cp311-win_amd64.whl"),
    rw.Wheel("scipy", "1.11.4", "scipy-1.11.4-cp311-cp311-win_amd64.whl"),
    rw.Wheel("joblib", "1.4.2", "joblib-1.4.2-py3-none-any.whl", platform="any"),
    rw.Wheel("threadpoolctl", "3.5.0", "threadpoolctl-3.5.0-py3-none-any.whl", platform="any"),
]


@pytest.fixture(scope="module")
def sklearn_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-sklearn", SKLEARN_ENV))


NUMPY_SCIPY = SKLEARN_ENV[1:3]


@pytest.fixture(scope="module")
def xgboost_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-xgboost", [rw.WHEELS["xgboost"], *NUMPY_SCIPY]))


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Traced(NamedTuple):
    trace: Path  # the trace of the run
    run: subprocess.CompletedProcess  # the traced run (`dlltrace run --wine`)
    report: dict  # `dlltrace report --json` of its trace
    call: dict  # the report's one failed call


def traced_failure(env: ri.Env, code: str, tmp_path: Path, exit_code: Optional[int] = None) -> Traced:
    """`python -c CODE` of `env` traced (tmp_path/t.jsonl), then its report's JSON, which has exactly one failed
    call (its `failed`), returned with it; `exit_code`: the traced run's, checked before the report is made."""
    trace = tmp_path / "t.jsonl"
    run = ri.run_python(env, code, traced=trace, cwd=tmp_path)
    assert exit_code is None or run.returncode == exit_code, (run.returncode, run.stderr[-2000:])
    rep = ri.report_json(trace)
    calls = {c["index"]: c for c in rep["calls"]}
    failed = [calls[i] for i in rep["failed"]]
    assert len(failed) == 1, [(c["name"], c["leaf"]) for c in failed]
    return Traced(trace, run, rep, failed[0])


@pytest.mark.parametrize("dll", ["vcomp140.dll", "msvcp140.dll"])
def test_sklearn_without_its_own_runtime_dll_is_reinstalled(sklearn_env, dll, tmp_path):
    env = ri.env_copy(sklearn_env, tmp_path / "env")
    gone = env.site / "sklearn" / ".libs" / dll
    gone.unlink()
    code = "import sklearn; print(sklearn.__version__)"
    # 1. the truth: Wine cannot map the file the full-path load names; the program ends on FileNotFoundError
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    win = env.win(f"Lib/site-packages/sklearn/.libs/{dll}")
    assert (win, 0xC0000135) in log.load_failed, log.load_failed
    exc = ri.python_exception(plain.stderr)
    assert plain.returncode == 1 and exc is not None and exc[0] == "FileNotFoundError" and win in exc[1], exc
    # 2. traced: the leaf, whose file it is, and the fix
    trace, _, rep, call = traced_failure(env, code, tmp_path, exit_code=1)
    assert rep["outcome"]["kind"] == "died_of_load" and call["verdict"]["fate"] == "fatal", rep["outcome"]
    assert ri.base(call["leaf"]["name"]) == dll and call["leaf"]["cause"] == "not_found", call["leaf"]
    first = call["fixes"][0]
    assert first["action"] == "install" and norm(first["package"]) == "scikit-learn", first
    assert first["verified"] is True and f"its RECORD lists sklearn/.libs/{dll}" in first["text"], first
    text = ri.report_text(trace)
    assert "its distribution's RECORD lists it, and it is not there" in text and "installed but not searched" not in \
        text, text[:3000]
    # 3. the fix, for real: scikit-learn's wheel put back where pip puts it; the import then runs to its end
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and "1.5.2" in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert win.lower() in {p.lower() for p in log2.mapped}, [p for p in log2.mapped if ri.base(p) == dll]
    assert not log2.load_failed and not log2.not_found, (log2.load_failed, log2.not_found)


@pytest.fixture(scope="module")
def tokenizers_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-tokenizers", [rw.WHEELS["tokenizers"]]))


def test_tokenizers_under_a_wine_without_bcryptprimitives(tokenizers_env, tmp_path):
    code = "import tokenizers; print(tokenizers.__version__)"
    plain = ri.run_python(tokenizers_env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    pyd = tokenizers_env.win("Lib/site-packages/tokenizers/tokenizers.cp311-win_amd64.pyd")
    if ("bcryptprimitives.dll", pyd) not in log.not_found:
        pytest.skip(f"this Wine has bcryptprimitives.dll: the import ran ({plain.returncode})")
    exc = ri.python_exception(plain.stderr)
    assert exc is not None and exc[0] == "ImportError" and "tokenizers" in exc[1], exc
    call = traced_failure(tokenizers_env, code, tmp_path).call
    assert (call["leaf"]["name"].lower(), call["leaf"]["parent"]) == (
        "bcryptprimitives.dll", "tokenizers.cp311-win_amd64.pyd"), call["leaf"]
    text = call["fixes"][0]["text"]
    assert "this Wine has none" in text and "update Windows" not in text, text


def test_xgboost_with_a_32bit_xgboost_dll_is_reinstalled(xgboost_env, tmp_path):
    env = ri.env_copy(xgboost_env, tmp_path / "env")
    dll = env.site / "xgboost" / "lib" / "xgboost.dll"
    dll.unlink()
    rw.place(rw.build_fixtures()["plain32"], dll)
    code = "import xgboost; print(xgboost.__version__)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    win = env.win("Lib/site-packages/xgboost/lib/xgboost.dll")
    assert (win, 0xC000007B) in ri.parse_loader_log(plain.stderr).load_failed and plain.returncode == 1, \
        ri.program_output(plain.stderr)
    assert "XGBoostError" in plain.stderr and "OpenMP runtime is not installed" in plain.stderr
    call = traced_failure(env, code, tmp_path).call
    assert call["leaf"]["cause"] == "bad_machine" and call["leaf"]["facts"]["machines"] == ["x86"], call["leaf"]
    assert call["verdict"]["exception"]["type"] == "xgboost.core.XGBoostError", call["verdict"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["version"]) == ("install", "xgboost", "2.1.3"), first
    assert "its RECORD lists xgboost/lib/xgboost.dll" in first["text"], first["text"]
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and "2.1.3" in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert win in log2.native and not log2.load_failed, (log2.native[-5:], log2.load_failed)


@pytest.fixture(scope="module")
def lightgbm_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-lightgbm", [rw.WHEELS["lightgbm"], *NUMPY_SCIPY]))


# (the package, the file its RECORD lists that is taken away, the exception its own check raises; no load is made)
LOOKS_FIRST = {"xgboost": ("xgboost/lib/xgboost.dll", "xgboost.libpath.XGBoostLibraryNotFound", "2.1.3"),
               "lightgbm": ("lightgbm/bin/lib_lightgbm.dll", "Exception", "4.5.0")}


@pytest.mark.parametrize("package", sorted(LOOKS_FIRST))
def test_a_package_that_looks_for_its_own_dll_first_is_reinstalled(package, request, tmp_path):
    """xgboost 2.1.3 and lightgbm 4.5.0 look for their own DLL before loading it (xgboost/libpath.py, lightgbm/
    libpath.py: os.path.isfile over a list of candidates) and raise when none is there: no load is made, so no loader
    searched. The exception lists the paths it tried; the one its RECORD lists is the file, and reinstalling the
    distribution is the fix. Wine's side: the program ends on that exception with no load of the DLL; then the
    fix applied for real (the wheel put back where pip puts it) and the import runs to its end."""
    listed, exc_type, version = LOOKS_FIRST[package]
    env = ri.env_copy(request.getfixturevalue(f"{package}_env"), tmp_path / "env")
    dll = env.site / listed
    dll.unlink()
    code = f"import {package}; print({package}.__version__)"
    win = env.win("Lib/site-packages/" + listed)
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    said = ri.program_output(plain.stderr, 100000)  # (its message is many lines: one a path it tried)
    assert plain.returncode == 1 and f"\n{exc_type}: Cannot find " in said and f"\n{win}\n" in said.replace(
        "\n- ", "\n"), said[-3000:]
    log = ri.parse_loader_log(plain.stderr)
    assert not any(ri.base(p) == ri.base(win) for p, _ in log.load_failed), log.load_failed  # (no load of it made)
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    rep = ri.report_json(trace)
    assert rep["outcome"]["kind"] == "died_of_other" and not rep["failed"], (rep["outcome"], rep["failed"])
    file = rep["outcome"]["file"]
    assert (file["path"].lower(), file["package"], file["version"], file["listed"]) == (
        win.lower(), package, version, listed), file
    assert f"--force-reinstall --no-deps {package}=={version}" in file["fix"], file["fix"]
    assert rep["outcome"]["text"].endswith(f": {ri.base(win)}, a file of {package} {version}, is not there"), \
        rep["outcome"]["text"]
    text = ri.report_text(trace)
    assert "the program looked for this file before loading it, and it is not there:" in text, text[:3000]
    assert f"-m pip install --force-reinstall --no-deps {package}=={version}" in text, text[:3000]
    md = ri.report_markdown(trace)  # (the answer first there too, with the reinstall; never "none failed")
    assert md.startswith("**dlltrace:** the program ended with ") and "none failed" not in md, md[:2000]
    assert f"a file of {package} {version}, is not there" in md.split("\n")[0], md[:2000]
    assert "Suggested fix: " in md and f"--force-reinstall --no-deps {package}=={version}`" in md, md[:2000]
    applied = ri.apply_fix({"action": "install", "package": file["package"], "version": file["version"],
                            "text": file["fix"]}, env)
    again = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and version in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert win.lower() in {p.lower() for p in log2.mapped}, [p for p in log2.mapped if ri.base(p) == ri.base(win)]


@pytest.fixture(scope="module")
def psycopg2_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-psycopg2", [rw.WHEELS["psycopg2"]]))


def test_psycopg2_vendored_without_its_libs(psycopg2_env, tmp_path):
    import shutil

    env = ri.env_copy(psycopg2_env, tmp_path / "env")
    shutil.copytree(env.site / "psycopg2", env.root / "app" / "psycopg2")
    app = env.win("app")
    code = f"import sys; sys.path.insert(0, r'{app}'); import psycopg2; print(psycopg2.__file__)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    pyd = env.win("app/psycopg2/_psycopg.cp311-win_amd64.pyd")
    libpq = "libpq-f81e1880e53c9b2acc2a45e78d57cbab.dll"
    assert (libpq, pyd) in ri.parse_loader_log(plain.stderr).not_found, ri.program_output(plain.stderr)
    call = traced_failure(env, code, tmp_path).call
    assert (call["leaf"]["name"], call["name"]) == (libpq, pyd), (call["leaf"], call["name"])
    assert all(f["action"] != "package_mechanism" for f in call["fixes"]), [f["text"] for f in call["fixes"]]
    first = call["fixes"][0]
    libs = env.win("Lib/site-packages/psycopg2_binary.libs")
    assert (first["action"], first["folder"]) == ("add_dll_directory", libs), first
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    mapped = ri.parse_loader_log(again.stderr).mapped
    # (the program's own vendored copy ran, its libpq from the installed folder)
    assert again.returncode == 0 and app + "\\psycopg2\\__init__.py" in again.stdout, ri.program_output(again.stderr)
    assert pyd in mapped and libs + "\\" + libpq in mapped, [m for m in mapped if "psycopg" in m.lower()]


@pytest.fixture(scope="module")
def openslide_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-openslide", [rw.WHEELS["openslide"], rw.WHEELS["pillow"]]))


def test_openslide_without_openslide_installs_openslide_bin(openslide_env, tmp_path):
    env = ri.env_copy(openslide_env, tmp_path / "env")
    code = "import openslide; print('openslide', openslide.__library_version__)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    exc = ri.python_exception(plain.stderr)
    assert exc is not None and exc[0] == "ModuleNotFoundError" and "openslide-bin" in exc[1], ri.program_output(plain.stderr)
    call = traced_failure(env, code, tmp_path).call
    assert call["leaf"]["name"] == "libopenslide-1.dll", call["leaf"]
    first = call["fixes"][0]
    folder = env.win("Lib/site-packages/openslide_bin")
    assert (first["action"], first["package"], first["folder"]) == ("install_package", "openslide-bin", folder), first
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    assert again.returncode == 0 and "openslide 4." in again.stdout, ri.program_output(again.stderr)
    assert folder + "\\libopenslide-1.dll" in ri.parse_loader_log(again.stderr).mapped


@pytest.fixture(scope="module")
def pyusb_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-pyusb", [rw.WHEELS["pyusb"]]))


def test_pyusb_without_libusb_is_told_find_library_looks_on_path(pyusb_env, tmp_path):
    env = ri.env_copy(pyusb_env, tmp_path / "env")
    code = "import usb.core\nprint('pyusb found', usb.core.find())"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert ri.python_exception(plain.stderr) == ("usb.core.NoBackendError", "No backend available"), \
        ri.program_output(plain.stderr)
    assert not any("usb" in ri.base(m) for m in ri.parse_loader_log(plain.stderr).mapped)  # (no load was made)
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    rep = ri.report_json(trace)
    folder = env.win("Lib/site-packages/libusb_package")
    assert rep["outcome"]["kind"] == "died_of_other" and rep["failed"] == [], rep["outcome"]
    found = rep["outcome"]["find_library"]
    assert (found["name"], found["package"]) == ("libusb-1.0.dll", "libusb-package"), found
    assert found["searched"] and all(isinstance(d, str) for d in found["searched"]), found
    (first,) = found["fixes"]
    (step,) = first["then"]
    assert (first["action"], first["package"], first["folder"]) == ("install_package", "libusb-package", folder), first
    assert (step["action"], step["variable"], step["folder"]) == ("set_env", "PATH", folder), step
    text = ri.report_text(trace)
    assert text.splitlines()[0].startswith(
        "dlltrace ─ the program ended with usb.core.NoBackendError: No backend available: "
        "ctypes.util.find_library('libusb-1.0.dll') found no such library"), text
    assert "find_library looks for libusb-1.0.dll in each folder of PATH, in order, and in no other" in text, text
    assert f"It looked in the {len(found['searched'])} folders of PATH, and none holds libusb-1.0.dll:" in text
    assert "-m pip install libusb-package" in text and f'set "PATH={folder};%PATH%"' in text, text
    assert "installing it alone is not enough" in text, text
    md = ri.report_markdown(trace)
    assert "find_library('libusb-1.0.dll')" in md.split("\n", 1)[0] and "libusb-package" in md, md[:2000]
    # the fix, for real: libusb-package's real wheel placed where pip puts it, then its folder first on PATH
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    mapped = ri.parse_loader_log(again.stderr).mapped
    assert folder + "\\libusb-1.0.dll" in mapped, [m for m in mapped if "usb" in m.lower()]
    assert again.returncode == 0 and "pyusb found None" in again.stdout, ri.program_output(again.stderr)


@pytest.fixture(scope="module")
def sounddevice_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-sounddevice", [
        rw.WHEELS["sounddevice"], rw.Wheel("cffi", "1.17.1", "cffi-1.17.1-cp311-cp311-win_amd64.whl"),
        rw.Wheel("pycparser", "2.22", "pycparser-2.22-py3-none-any.whl", platform="any")]))


PORTAUDIO = "_sounddevice_data/portaudio-binaries/libportaudio64bit.dll"


@pytest.mark.parametrize("how", ["gone", "x86"])
def test_sounddevice_without_its_own_portaudio_is_reinstalled(sounddevice_env, how, tmp_path):
    env = ri.env_copy(sounddevice_env, tmp_path / "env")
    dll = env.site / PORTAUDIO
    dll.unlink()
    if how == "x86":
        rw.place(rw.build_fixtures()["plain32"], dll)
    code = "import sounddevice; print('sounddevice', sounddevice.__version__)"
    win = env.win("Lib/site-packages/" + PORTAUDIO)
    status, error = {"gone": (0xC0000135, "0x7e"), "x86": (0xC000007B, "0xc1")}[how]
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert (win, status) in ri.parse_loader_log(plain.stderr).load_failed, ri.program_output(plain.stderr)
    assert ri.python_exception(plain.stderr) == ("OSError", f"cannot load library '{win}': error {error}")
    trace, _, _, call = traced_failure(env, code, tmp_path)
    assert (call["name"], call["flags"]) == (win, 0x1100), (call["name"], call["flags"])
    cause = {"gone": "not_found", "x86": "bad_machine"}[how]
    assert (ri.base(call["leaf"]["name"]), call["leaf"]["cause"]) == ("libportaudio64bit.dll", cause), call["leaf"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["version"], first["bound"]) == (
        "install", "sounddevice", "0.5.1", PORTAUDIO), first
    text = ri.report_text(trace)
    assert "-m pip install --force-reinstall --no-deps sounddevice==0.5.1" in text, text[:3000]
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and "sounddevice 0.5.1" in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert win in log2.native and not [f for f in log2.load_failed if "portaudio" in f[0].lower()], log2.load_failed


def test_sounddevice_goes_past_a_32bit_portaudio_on_path(sounddevice_env, tmp_path):
    env = ri.env_copy(sounddevice_env, tmp_path / "env")
    rw.place(rw.build_fixtures()["plain32"], env.root / "other" / "portaudio.dll")
    other = env.win("other")
    code = f"import os; os.environ['PATH'] = r'{other};' + os.environ['PATH']\n" \
        "import sounddevice; print('sounddevice', sounddevice.__version__)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    assert plain.returncode == 0 and (other + "\\portaudio.dll", 0xC000007B) in log.load_failed, log.load_failed
    assert env.win("Lib/site-packages/" + PORTAUDIO) in log.native
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    rep = ri.report_json(trace)
    assert rep["failed"] == [] and rep["outcome"]["kind"] == "ok", (rep["failed"], rep["outcome"])
    calls = {c["index"]: c for c in rep["calls"]}
    (went,) = [calls[i] for i in rep["went_on"] if ri.base(calls[i]["name"]) == "portaudio.dll"]
    assert went["real_error"] == 193 and went["verdict"]["reason"] == "exit_zero", went["verdict"]
    text = ri.report_text(trace)  # (a 32-bit copy was there: its load failed, nothing was "absent")
    assert " failed, the program went on" in text.splitlines()[0] and "absent" not in text, text[:2000]
    md = ri.report_markdown(trace)
    assert "Failed, the program went on (not failures" in md and "absent" not in md, md[:2000]


@pytest.fixture(scope="module")
def pyproj_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-pyproj", [
        rw.WHEELS["pyproj"], rw.Wheel("certifi", "2024.8.30", "certifi-2024.8.30-py3-none-any.whl", platform="any")]))


PROJ = "proj-6d12646a60eadad0ff602e4d488ce48d.dll"


@pytest.mark.parametrize("dll, how", [("sqlite3-48ecfbf32b094424f1c789c5d1dc2023.dll", "gone"),
                                      ("tiff-ad38035c59240d77cc8b20654a403b8f.dll", "x86")])
def test_pyproj_without_a_dll_of_its_delvewheel_folder_is_reinstalled(pyproj_env, dll, how, tmp_path):
    env = ri.env_copy(pyproj_env, tmp_path / "env")
    path = env.site / "pyproj.libs" / dll
    path.unlink()
    if how == "x86":
        rw.place(rw.build_fixtures()["plain32"], path)
    code = "import pyproj; print('pyproj', pyproj.__version__, pyproj.proj_version_str)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    proj = env.win("Lib/site-packages/pyproj.libs/" + PROJ)
    if how == "gone":
        assert (dll, proj) in log.not_found, log.not_found
    else:
        assert (dll, proj, 0xC000007B) in log.import_failed, log.import_failed
    exc = ri.python_exception(plain.stderr)
    assert exc is not None and exc[0] == "ImportError" and "while importing _context" in exc[1], exc
    call = traced_failure(env, code, tmp_path).call
    cause = {"gone": "not_found", "x86": "bad_machine"}[how]
    assert (call["leaf"]["name"], call["leaf"]["parent"], call["leaf"]["cause"]) == (dll, PROJ, cause), call["leaf"]
    assert ri.base(call["name"]) == "_context.cp311-win_amd64.pyd", call["name"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["version"], first["bound"]) == (
        "install", "pyproj", "3.7.0", "pyproj.libs/" + dll), first
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and "pyproj 3.7.0 9." in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert env.win("Lib/site-packages/pyproj.libs/" + dll) in log2.native and not log2.load_failed, log2.load_failed


@pytest.fixture(scope="module")
def pycryptodome_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-pycryptodome", [rw.WHEELS["pycryptodome"]]))


def test_pycryptodome_without_a_module_file_it_looks_for_is_reinstalled(pycryptodome_env, tmp_path):
    env = ri.env_copy(pycryptodome_env, tmp_path / "env")
    (env.site / "Crypto" / "Cipher" / "_raw_aes.pyd").unlink()
    code = "from Crypto.Cipher import AES\nprint('aes', AES.new(bytes(16), AES.MODE_ECB).encrypt(bytes(16)).hex())"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert ri.python_exception(plain.stderr) == ("OSError", "Cannot load native module 'Crypto.Cipher._raw_aes': "
                                                 "Not found '_raw_aes.cp311-win_amd64.pyd', Not found '_raw_aes.pyd'")
    assert not any("_raw_aes" in p for p in ri.parse_loader_log(plain.stderr).mapped)  # (no load of it was made)
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    rep = ri.report_json(trace)
    assert rep["outcome"]["kind"] == "died_of_other" and rep["failed"] == [], rep["outcome"]
    file = rep["outcome"]["file"]
    win = env.win("Lib/site-packages/Crypto/Cipher/_raw_aes.pyd")
    assert file is not None and (file["path"], file["package"], file["version"], file["listed"]) == (
        win, "pycryptodome", "3.21.0", "Crypto/Cipher/_raw_aes.pyd"), rep["outcome"]
    text = ri.report_text(trace)
    assert "the program looked for this file before loading it, and it is not there:" in text, text[:3000]
    assert "-m pip install --force-reinstall --no-deps pycryptodome==3.21.0" in text, text[:3000]
    applied = ri.apply_fix({"action": "install", "package": file["package"], "version": file["version"],
                            "text": file["fix"]}, env)
    again = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert again.returncode == 0 and "aes 66e94bd4ef8a2c3b884cfa59ca342b2e" in again.stdout, \
        (applied.steps, ri.program_output(again.stderr))
    assert win in ri.parse_loader_log(again.stderr).native


_ANY = "any"
TENSORFLOW_ENV = [
    rw.Wheel("tensorflow", "2.15.0", "tensorflow-2.15.0-cp311-cp311-win_amd64.whl"),
    rw.Wheel("tensorflow-intel", "2.15.0", "tensorflow_intel-2.15.0-cp311-cp311-win_amd64.whl"),
    SKLEARN_ENV[1],  # numpy 1.26.4 (tensorflow 2.15 needs numpy < 2)
    rw.Wheel("protobuf", "4.25.5", "protobuf-4.25.5-cp310-abi3-win_amd64.whl"),
    rw.Wheel("ml_dtypes", "0.2.0", "ml_dtypes-0.2.0-cp311-cp311-win_amd64.whl"),
    rw.Wheel("wrapt", "1.14.1", "wrapt-1.14.1-cp311-cp311-win_amd64.whl"),
    rw.Wheel("charset-normalizer", "3.4.0", "charset_normalizer-3.4.0-cp311-cp311-win_amd64.whl"),
    *[rw.Wheel(d, v, f, platform=_ANY) for d, v, f in [
        ("absl-py", "2.1.0", "absl_py-2.1.0-py3-none-any.whl"),
        ("astunparse", "1.6.3", "astunparse-1.6.3-py2.py3-none-any.whl"),
        ("gast", "0.6.0", "gast-0.6.0-py3-none-any.whl"),
        ("google-pasta", "0.2.0", "google_pasta-0.2.0-py3-none-any.whl"),
        ("opt-einsum", "3.4.0", "opt_einsum-3.4.0-py3-none-any.whl"),
        ("six", "1.16.0", "six-1.16.0-py2.py3-none-any.whl"),
        ("termcolor", "2.5.0", "termcolor-2.5.0-py3-none-any.whl"),
        ("wheel", "0.45.1", "wheel-0.45.1-py3-none-any.whl"),
        ("typing_extensions", "4.12.2", "typing_extensions-4.12.2-py3-none-any.whl"),
        ("packaging", "24.2", "packaging-24.2-py3-none-any.whl"),
        ("setuptools", "75.6.0", "setuptools-75.6.0-py3-none-any.whl"),
        ("flatbuffers", "24.3.25", "flatbuffers-24.3.25-py2.py3-none-any.whl"),
        ("requests", "2.32.3", "requests-2.32.3-py3-none-any.whl"),
        ("urllib3", "2.2.3", "urllib3-2.2.3-py3-none-any.whl"),
        ("idna", "3.10", "idna-3.10-py3-none-any.whl"),
        ("certifi", "2024.8.30", "certifi-2024.8.30-py3-none-any.whl")]],
]


@pytest.fixture(scope="module")
def tensorflow_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-tensorflow", TENSORFLOW_ENV))


def test_tensorflow_for_windows_is_said_to_be_a_cpu_only_build(tensorflow_env, tmp_path):
    code = "import tensorflow as tf; print('tf', tf.__version__, tf.test.is_built_with_cuda())"
    trace = tmp_path / "t.jsonl"
    r = ri.run_python(tensorflow_env, code, traced=trace, cwd=tmp_path)
    assert r.returncode == 0 and "tf 2.15.0 False" in r.stdout, ri.program_output(r.stderr)
    rep = ri.report_json(trace)
    assert rep["failed"] == [] and rep["cpu_builds"] == [{"framework": "tensorflow", "version": "2.15.0",
                                                          "read_from": "tensorflow/python/platform/build_info.py"}], \
        rep["cpu_builds"]
    text = ri.report_text(trace)
    assert "tensorflow 2.15.0 is a CPU-only build (tensorflow/python/platform/build_info.py says it has no CUDA)" \
        in text, text[:3000]
    assert "TensorFlow 2.11 and later have no GPU build for native Windows" in text, text[:3000]


@pytest.fixture(scope="module")
def gmpy2_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-gmpy2", [rw.WHEELS["gmpy2"]]))


def test_gmpy2_with_a_stray_libgmp_in_the_python_folder_is_told_to_move_it(gmpy2_env, tmp_path):
    env = ri.env_copy(gmpy2_env, tmp_path / "env")
    stray = env.root / "libgmp-10.dll"
    rw.place(rw.build_fixtures()["plain64"], stray)  # (a libgmp-10.dll of nothing: a stray copy of another build)
    code = "import gmpy2; print('gmpy2', gmpy2.version(), gmpy2.mpz(2) ** 100)"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    pyd = env.win("Lib/site-packages/gmpy2/gmpy2.cp311-win_amd64.pyd")
    said = ri.program_output(plain.stderr)  # (Wine aborts the process on the call: no Python end)
    assert "unimplemented function libgmp-10.dll." in said and ri.DONE not in plain.stdout, said
    assert env.win("libgmp-10.dll") in log.native, [p for p in log.native if "gmp" in p]
    assert any(d == "libgmp-10.dll" and imp == pyd for d, _, imp in log.stubs), log.stubs[:5]
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    own = env.win("Lib/site-packages/gmpy2.libs/libgmp-10.dll")
    text = ri.report_text(trace)
    assert (f"gmpy2 2.2.1 ships its own libgmp-10.dll, {own} (its RECORD lists gmpy2.libs/libgmp-10.dll): the one "
            f"gmpy2.cp311-win_amd64.pyd was built against. The copy bound, {env.win('libgmp-10.dll')}, is no installed "
            f"distribution's, and its folder is searched first: move it out of {env.win()}") in text, text[:3000]
    md = ri.report_markdown(trace)
    assert f"Suggested fix: gmpy2 2.2.1 ships its own `libgmp-10.dll`, `{own}`" in md, md[:3000]
    stray.unlink()  # (what the fix says: the stray copy moved away)
    again = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert again.returncode == 0 and "gmpy2 2.2.1 1267650600228229401496703205376" in again.stdout, \
        ri.program_output(again.stderr)
    assert own in ri.parse_loader_log(again.stderr).native


# pywin32 306 installed from a wheel of another Python: its .pyd names carry no tag (win32api.pyd), so CPython 3.11
# imports them whatever build they are (site-packages copied from a Python 3.10, a 32-bit Python's pip)
OTHER_PYWIN32 = {"cp310": rw.Wheel("pywin32", "306", "pywin32-306-cp310-cp310-win_amd64.whl", python="3.10"),
                 "win32": rw.Wheel("pywin32", "306", "pywin32-306-cp311-cp311-win32.whl", platform="win32")}


@pytest.mark.parametrize("build", sorted(OTHER_PYWIN32))
def test_pywin32_of_another_python_is_reinstalled_for_this_one(build, wine_prefix, tmp_path):
    """pywin32 306's cp310 wheel: win32api.pyd imports python310.dll (Wine: not found, needed by win32api.pyd;
    explain.rule_extension_of_another_python). Its win32 wheel: win32api.pyd is x86 (Wine: c000007b;
    explain.rule_wheel_for_another_machine). Either way the report names pywin32 306 (its RECORD) and reinstalls it
    with this Python's own pip, which picks its cp311 win_amd64 build; that build placed where pip puts it, the
    import runs."""
    env = ri.env_copy(rw.or_skip(lambda: ri.small_env(f"field-pywin32-{build}", [OTHER_PYWIN32[build]])),
                      tmp_path / "env")
    code = "import win32api; print('pywin32', win32api.GetTickCount() >= 0)"
    pyd = env.win("Lib/site-packages/win32/win32api.pyd")
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    log = ri.parse_loader_log(plain.stderr)
    if build == "cp310":
        assert ("python310.dll", pyd) in log.not_found, log.not_found
    else:
        assert (pyd, 0xC000007B) in log.load_failed, log.load_failed
    exc = ri.python_exception(plain.stderr)
    assert exc is not None and exc[0] == "ImportError" and "while importing win32api" in exc[1], exc
    trace, _, rep, call = traced_failure(env, code, tmp_path, exit_code=1)
    leaf = {"cp310": ("python310.dll", "not_found"), "win32": ("win32api.pyd", "bad_machine")}[build]
    assert (ri.base(call["leaf"]["name"]), call["leaf"]["cause"]) == leaf, call["leaf"]
    first = call["fixes"][0]
    assert (first["action"], first["package"], first["version"], first["path"]) == ("install", "pywin32", "306", pyd), \
        first
    assert "-m pip install --force-reinstall --no-deps pywin32==306" in first["text"], first["text"]
    head = ri.report_text(trace).splitlines()[2]
    assert head.endswith({"cp310": "win32api.pyd is pywin32 306's build for Python 3.10, another Python",
                          "win32": "Windows cannot load a 32-bit DLL into a 64-bit process"}[build]), head
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    log2 = ri.parse_loader_log(again.stderr)
    assert again.returncode == 0 and "pywin32 True" in again.stdout, (applied.steps, ri.program_output(again.stderr))
    assert pyd in log2.native and not log2.load_failed and not log2.not_found, (log2.load_failed, log2.not_found)


@pytest.fixture(scope="module")
def python_magic_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-python-magic", [rw.WHEELS["python_magic"]]))


def test_python_magic_without_libmagic_is_replaced_by_python_magic_bin(python_magic_env, tmp_path):
    """python-magic 0.4.27 on Windows ships no libmagic: magic/loader.py tries ./libmagic.dll and find_library of six
    names, finds none, and raises "ImportError: failed to find libmagic.  Check your installation". The report said
    "put libmagic.dll in one of these folders (of PATH)": python_magic_bin's libmagic.dll on PATH loads, and magic then
    raises MagicException (no magic database; checked here). python-magic-bin replaces python-magic (both install the
    module magic) and its own magic.py loads its libmagic.dll and magic.mgc (analysis.rule_package_that_replaces_the_
    module): the fix uninstalls python-magic and installs python-magic-bin, and done for real, the program runs."""
    env = ri.env_copy(python_magic_env, tmp_path / "env")
    code = "import magic; print('magic:', magic.from_buffer(b'%PDF-1.4 hello'))"
    plain = ri.run_python(env, code, winedebug="+loaddll,+module", cwd=tmp_path)
    assert ri.python_exception(plain.stderr) == ("ImportError", "failed to find libmagic.  Check your installation"), \
        ri.program_output(plain.stderr)
    assert not any(ri.base(m) == "libmagic.dll" for m in ri.parse_loader_log(plain.stderr).mapped)
    trace = tmp_path / "t.jsonl"
    ri.run_python(env, code, traced=trace, cwd=tmp_path)
    rep = ri.report_json(trace)
    assert rep["outcome"]["kind"] == "died_of_other" and rep["failed"] == [], rep["outcome"]
    found = rep["outcome"]["find_library"]
    (first,) = found["fixes"]
    folder = env.win("Lib/site-packages/magic/libmagic")
    assert (found["name"], first["action"], first["package"], first["replaces"], first["folder"], first["then"]) == (
        "libmagic", "install_package", "python-magic-bin", "python-magic", folder, []), found
    text = ri.report_text(trace)
    assert "-m pip uninstall -y python-magic, then " in text and "-m pip install python-magic-bin" in text, text[:3000]
    # its DLL alone on PATH is not the fix: python-magic loads it, then finds no magic database
    other = env.root / "other"
    rw.place(rw.wheel_member(rw.WHEELS["python_magic_bin"], "magic/libmagic/libmagic.dll"), other / "libmagic.dll")
    on_path = ri.run_python(env, f"import os; os.environ['PATH'] = r'{env.win('other')};' + os.environ['PATH']\n" + code,
                            cwd=tmp_path)
    assert on_path.returncode == 1 and "magic.MagicException" in on_path.stderr, ri.program_output(on_path.stderr)
    applied = ri.apply_fix(first, env)
    again = ri.run_python(env, "\n".join([*applied.prelude, code]), winedebug="+loaddll,+module", cwd=tmp_path)
    assert again.returncode == 0 and "magic: PDF document, version 1.4" in again.stdout, \
        (applied.steps, ri.program_output(again.stderr))
    assert folder + "\\libmagic.dll" in ri.parse_loader_log(again.stderr).mapped


PYQT5_ENV = [rw.Wheel("PyQt5", "5.15.11", "PyQt5-5.15.11-cp38-abi3-win_amd64.whl"),
             rw.Wheel("PyQt5-Qt5", "5.15.2", "PyQt5_Qt5-5.15.2-py3-none-win_amd64.whl"),
             rw.Wheel("PyQt5-sip", "12.15.0", "PyQt5_sip-12.15.0-cp311-cp311-win_amd64.whl"),
             rw.WHEELS["pip"]]  # (pip: the report's reinstall, run for real)
QT_APP = "from PyQt5.QtGui import QGuiApplication\napp = QGuiApplication([])\nprint('platform', app.platformName())"
FAIL_FAST = 0xC0000409 & 0xFF  # (wine64 exits with the low 8 bits of the Windows exit status)


@pytest.fixture(scope="module")
def pyqt5_env(wine_prefix) -> ri.Env:
    return rw.or_skip(lambda: ri.small_env("field-pyqt5", PYQT5_ENV))


def test_pyqt5_without_its_platform_plugin_is_reinstalled(pyqt5_env, tmp_path):
    """The program's own end is the truth (Wine's +loaddll log and Qt's OutputDebugString): with qwindows.dll there
    it prints its platform; a failed run (exit 3 after importing QtGui) with every file there names no file; with
    qwindows.dll deleted it aborts (0xC0000409) and no load of qwindows.dll is made, and the report names the file,
    PyQt5_Qt5 5.15.2 and its reinstall; a failed run that imported nothing of PyQt5 does not blame the missing file;
    with qwindows.dll there but its load failing (dwmapi.dll, which it imports and Qt5Gui.dll does not, disabled in
    Wine) the crash is that load's (the last failed load before the end), and no file is named;
    the reinstall as printed (pip under Wine, told where the pinned wheel is) makes the program print its platform,
    and its trace read ok."""
    import subprocess

    import winetools

    env = ri.env_copy(pyqt5_env, tmp_path / "env")
    plugin = env.site / "PyQt5" / "Qt5" / "plugins" / "platforms" / "qwindows.dll"
    win = env.win("Lib/site-packages/PyQt5/Qt5/plugins/platforms/qwindows.dll")
    exits = "import PyQt5.QtGui, sys\nsys.exit(3)"
    trace = tmp_path / "t0.jsonl"
    assert ri.run_python(env, exits, traced=trace, cwd=tmp_path, ends=3).returncode == 3
    rep = ri.report_json(trace)
    assert (rep["outcome"]["kind"], rep["outcome"]["file"]) == ("exited", None), rep["outcome"]
    assert "no failed load explains it" in ri.report_text(trace)  # (every file there: no false alarm)
    # the plugin there, its load failing: the crash is that load's (as on Linux: rule_linux_crash_after_failed_load)
    trace = tmp_path / "t1.jsonl"
    assert ri.run_python(env, QT_APP, traced=trace, cwd=tmp_path, ends=FAIL_FAST, overrides="dwmapi=").returncode == \
        FAIL_FAST
    rep = ri.report_json(trace)
    assert (rep["outcome"]["kind"], rep["outcome"]["file"], len(rep["failed"])) == ("crashed", None, 1), rep["outcome"]
    text = ri.report_text(trace)
    assert text.startswith("dlltrace ─ 1 failed load · the program crashed (0xc0000409 ") and "✗ qwindows.dll failed " \
        "with 126" in text and "The failure the program hit: the program crashed (0xc0000409 STATUS_STACK_BUFFER_" \
        "OVERRUN), and this is the last failed load before the end" in text, text[:3000]
    plugin.unlink()
    plain = ri.run_python(env, QT_APP, winedebug="+loaddll,+module,warn+seh", cwd=tmp_path, ends=FAIL_FAST)
    assert plain.returncode == FAIL_FAST and "no Qt platform plugin could be initialized" in plain.stderr, \
        plain.stderr[-3000:]
    log = ri.parse_loader_log(plain.stderr)
    assert not any("qwindows" in p.lower() for p in log.mapped + [n for n, _ in log.load_failed]), log.load_failed
    trace = tmp_path / "t.jsonl"
    run = ri.run_python(env, QT_APP, traced=trace, cwd=tmp_path, ends=FAIL_FAST)
    assert run.returncode == FAIL_FAST, run.stderr[-3000:]
    rep = ri.report_json(trace)
    file = rep["outcome"]["file"]
    assert (rep["outcome"]["kind"], rep["outcome"]["code"], rep["failed"]) == ("crashed", 0xC0000409, []), \
        rep["outcome"]
    assert file is not None and (file["path"], file["package"], file["version"], file["listed"], file["how"]) == (
        win, "PyQt5_Qt5", "5.15.2", "PyQt5/Qt5/plugins/platforms/qwindows.dll", "listed"), rep["outcome"]
    text = ri.report_text(trace)
    assert text.startswith("dlltrace ─ the program crashed (0xc0000409 STATUS_STACK_BUFFER_OVERRUN): qwindows.dll, a "
                           "file of PyQt5_Qt5 5.15.2, is not there · "), text[:3000]
    command = text.split("reinstall it:\n", 1)[1].splitlines()[0].strip()
    assert command == f"{env.win('python.exe')} -m pip install --force-reinstall --no-deps PyQt5_Qt5==5.15.2", text
    # a failed run that imported nothing of PyQt5: its missing file is not blamed
    other = tmp_path / "t2.jsonl"
    assert ri.run_python(env, "import sys\nsys.exit(3)", traced=other, cwd=tmp_path, ends=3).returncode == 3
    assert ri.report_json(other)["outcome"]["file"] is None and "qwindows" not in ri.report_text(other)
    # the fix as printed, run under Wine (pip told where the pinned wheel is: the same file PyPI serves)
    argv = command.split()
    assert argv[0] == env.win("python.exe")  # (the program's own python.exe: run by wine64 as the user would)
    pip = subprocess.run([winetools.wine_binary() or "wine64", str(env.python), *argv[1:], "--no-index",
                          "--find-links", winetools.to_windows(rw.WHEEL_DIR)], capture_output=True, text=True,
                         env=winetools.wine_env(WINEDEBUG="-all"), timeout=600, stdin=subprocess.DEVNULL)
    assert pip.returncode == 0 and plugin.is_file(), pip.stdout[-2000:] + pip.stderr[-2000:]
    again = ri.run_python(env, QT_APP, winedebug="+loaddll,+module", cwd=tmp_path)
    assert again.returncode == 0 and "platform windows" in again.stdout, ri.program_output(again.stderr)
    assert win in ri.parse_loader_log(again.stderr).native
    fixed = tmp_path / "t3.jsonl"
    assert ri.run_python(env, QT_APP, traced=fixed, cwd=tmp_path).returncode == 0
    assert ri.report_json(fixed)["outcome"]["kind"] == "ok"
