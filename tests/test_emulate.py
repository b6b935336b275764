"""One test per rule of the Python layer over the loader (emulate/python.py): CPython's extension
imports, ctypes.CDLL and torch's _load_dll_libraries, named after the rule, as tests/test_rules.py
does for the loader's own rules."""

from __future__ import annotations

from dlltrace.emulate import python as emulate
from simhelp import run, scenario

PYD = "C:\\py\\Lib\\site-packages\\m\\_C.pyd"
TORCH_LIB = "C:\\py\\Lib\\site-packages\\torch\\lib"


def test_rule_python_extension_flags():
    assert emulate.rule_python_extension_flags("3.7.6") == 0x8
    assert emulate.rule_python_extension_flags("3.8.10") == 0x1100
    assert emulate.rule_python_extension_flags("3.12.1 (64-bit)") == 0x1100
    assert emulate.rule_python_extension_flags("") == 0x1100
    # the S6 story: the same layout imports on 3.7 (PATH searched) and fails on 3.8
    files = [{"path": PYD, "imports": ["dep.dll"]}, "C:\\tools\\dep.dll"]
    call = [{"op": "python_import", "module": "m._C", "path": PYD}]
    r37 = run(files, call, exe="C:\\py\\python.exe", path=["C:\\tools"], python="3.7.9")[0]
    assert (r37.error, r37.flags, r37.origin) == (0, 0x8, "import m._C")
    assert run(files, call, exe="C:\\py\\python.exe", path=["C:\\tools"], python="3.8.10")[0].error == 126


def test_rule_ctypes_winmode():
    assert emulate.rule_ctypes_winmode("b.dll", None) == 0x1000
    assert emulate.rule_ctypes_winmode("sub\\b.dll", None) == 0x1100
    assert emulate.rule_ctypes_winmode("C:/x/b.dll", None) == 0x1100
    assert emulate.rule_ctypes_winmode("b.dll", 0) == 0
    assert emulate.rule_ctypes_winmode("sub\\b.dll", 0x8) == 0x8  # an int winmode is the flags as they are
    # winmode None searches DEFAULT_DIRS only: a DLL on PATH is not found; winmode=0 is the standard order
    files = ["C:\\tools\\b.dll"]
    r = run(files, [{"op": "ctypes_cdll", "name": "b.dll"}], path=["C:\\tools"])[0]
    assert (r.error, r.flags, r.origin) == (126, 0x1000, 'ctypes.CDLL("b.dll")')
    r = run(files, [{"op": "ctypes_cdll", "name": "b.dll", "winmode": 0}], path=["C:\\tools"])[0]
    assert (r.error, r.module_path, r.origin) == (0, "C:\\tools\\b.dll", 'ctypes.CDLL("b.dll", winmode=0x0)')


def test_rule_ctypes_relative_name():
    assert emulate.rule_ctypes_relative_name("sub\\b.dll", None, "C:\\work") == "C:\\work\\sub\\b.dll"
    assert emulate.rule_ctypes_relative_name("b.dll", None, "C:\\work") == "b.dll"
    assert emulate.rule_ctypes_relative_name("D:\\x\\b.dll", None, "C:\\work") == "D:\\x\\b.dll"
    assert emulate.rule_ctypes_relative_name("sub\\b.dll", 0, "C:\\work") == "sub\\b.dll"
    # the name made absolute gives DLL_LOAD_DIR a folder: b.dll's own import is found beside it
    files = [{"path": "C:\\work\\sub\\b.dll", "imports": ["c.dll"]}, "C:\\work\\sub\\c.dll"]
    r = run(files, [{"op": "ctypes_cdll", "name": "sub\\b.dll"}], cwd="C:\\work")[0]
    assert (r.error, r.name, r.module_path) == (0, "C:\\work\\sub\\b.dll", "C:\\work\\sub\\b.dll")
    assert r.tree.children[0].path == "C:\\work\\sub\\c.dll"


def test_rule_torch_retry():
    assert emulate.rule_torch_retry(126)
    assert not emulate.rule_torch_retry(193) and not emulate.rule_torch_retry(127)
    # a.dll needs dep.dll from the current folder: 0x1100 misses it, the LoadLibraryW retry finds it
    files = [{"path": TORCH_LIB + "\\a.dll", "imports": ["dep.dll"]}, "C:\\work\\dep.dll"]
    res = run(files, [{"op": "torch_load_dll_libraries", "torch_lib": TORCH_LIB}], exe="C:\\py\\python.exe",
              cwd="C:\\work", folders=[TORCH_LIB])
    loads = [r for r in res if r.name == TORCH_LIB + "\\a.dll"]
    assert [(r.op, r.flags, r.error) for r in loads] == [("LoadLibraryExW", 0x1100, 126), ("LoadLibraryW", 0, 0)]
    assert loads[1].origin.endswith("retry after adding its folders to PATH")
    assert res[0].op == "AddDllDirectory" and res[0].name == TORCH_LIB
    # another error is not retried: the loop ends (torch raises)
    files = [{"path": TORCH_LIB + "\\a.dll", "machine": "x86"}, TORCH_LIB + "\\b.dll"]
    res = run(files, [{"op": "torch_load_dll_libraries", "torch_lib": TORCH_LIB}], exe="C:\\py\\python.exe",
              folders=[TORCH_LIB])
    assert [(r.name, r.error) for r in res if r.name.startswith(TORCH_LIB + "\\")] == [(TORCH_LIB + "\\a.dll", 193)]


def test_os_add_dll_directory_is_add_dll_directory_labelled_as_python():
    files = ["C:\\libs\\b.dll"]
    res = run(files, [{"op": "os_add_dll_directory", "path": "C:\\libs"}, {"op": "LoadLibraryExW", "name": "b.dll",
                                                                          "flags": 0x1000}], folders=["C:\\libs"])
    assert (res[0].op, res[0].error) == ("os_add_dll_directory", 0)
    assert res[1].error == 0 and res[1].tree.how == "AddDllDirectory #1 (os.add_dll_directory)"


def test_rule_ctypes_find_library():
    files = {"C:\\tools\\zlibwapi.dll", "C:\\bin\\libfoo", "C:\\bin\\x.dll.dll", "C:\\late\\zlibwapi.dll"}
    is_file = files.__contains__
    path = ["C:\\none", "C:\\tools", "C:\\bin", "C:\\late"]
    assert emulate.rule_ctypes_find_library("zlibwapi", path, is_file) == "C:\\tools\\zlibwapi.dll"  # first entry wins
    assert emulate.rule_ctypes_find_library("zlibwapi.dll", path, is_file) == "C:\\tools\\zlibwapi.dll"
    assert emulate.rule_ctypes_find_library("libfoo", path, is_file) == "C:\\bin\\libfoo"  # the name itself first
    assert emulate.rule_ctypes_find_library("x.dll", path, is_file) is None  # a name ending in .dll gets no second .dll
    assert emulate.rule_ctypes_find_library("c", path, is_file) is None  # find_msvcrt(): None on MSVC 14+
    assert emulate.rule_ctypes_find_library("zlibwapi", [], is_file) is None
    # it searches PATH only (not the application folder, not an os.add_dll_directory folder) and loads nothing;
    # ctypes.CDLL of what it returns loads that full path
    world = ["C:\\app\\zlibwapi.dll", {"path": "C:\\tools\\zlibwapi.dll", "imports": ["dep.dll"]}, "C:\\tools\\dep.dll"]
    calls = [{"op": "os_add_dll_directory", "path": "C:\\app"}, {"op": "ctypes_find_library", "name": "zlibwapi"},
             {"op": "ctypes_cdll", "find_library": "zlibwapi"}]
    res = run(world, calls, path=["C:\\tools"])
    assert [(r.op, r.error) for r in res] == [("os_add_dll_directory", 0), ("ctypes_find_library", 0),
                                             ("ctypes_find_library", 0), ("LoadLibraryExW", 0)]
    assert res[1].note == "returned C:\\tools\\zlibwapi.dll" and res[1].tree is None and res[1].probes == []
    load = res[3]
    assert (load.name, load.flags, load.module_path) == ("C:\\tools\\zlibwapi.dll", 0x1100, "C:\\tools\\zlibwapi.dll")
    assert load.origin == 'ctypes.CDLL(ctypes.util.find_library("zlibwapi"))' and load.origin_kind == "ctypes"
    # None: find_library's result says so, and ctypes.CDLL(None) makes no load (TypeError on Windows)
    res = run(world, calls[1:], path=[])
    assert [(r.op, r.error) for r in res] == [("ctypes_find_library", 2), ("ctypes_find_library", 2)]
    assert "returned None" in res[0].note and "TypeError" in res[1].note


def test_rule_conda_startup_dll_directories():
    dirs = emulate.rule_conda_startup_dll_directories("C:\\conda\\envs\\x", "3.11.9", {})
    assert dirs == ["C:\\conda\\envs\\x\\bin", "C:\\conda\\envs\\x\\Scripts", "C:\\conda\\envs\\x\\Library\\bin",
                    "C:\\conda\\envs\\x\\Library\\usr\\bin", "C:\\conda\\envs\\x\\Library\\mingw-w64\\bin"]
    # 3.11+ ignores CONDA_DLL_SEARCH_MODIFICATION_ENABLE; before, its PATH mode is not modelled
    assert emulate.rule_conda_startup_dll_directories("C:\\c", "3.12.1", {"CONDA_DLL_SEARCH_MODIFICATION_ENABLE": "1"})
    assert emulate.rule_conda_startup_dll_directories("C:\\c", "3.9.7", {"CONDA_DLL_SEARCH_MODIFICATION_ENABLE": "1"}) is None
    assert emulate.rule_conda_startup_dll_directories("C:\\c", "3.9.7", {"CONDA_DLL_SEARCH_MODIFICATION_ENABLE": "0"})
    # in a scenario: the existing folders are AddDllDirectory folders before the first call, searched by an
    # extension import (USER_DIRS) and not by a plain LoadLibrary
    prefix = "C:\\conda\\envs\\x"
    files = [{"path": prefix + "\\Lib\\site-packages\\m\\_m.pyd", "imports": ["mkl_rt.2.dll"]},
             prefix + "\\Library\\bin\\mkl_rt.2.dll"]
    sc = scenario(files, [], exe=prefix + "\\python.exe", conda_prefix=prefix, folders=[prefix + "\\Scripts"])
    assert sc.process.dll_directories == [(prefix + "\\Scripts", "conda python start-up"),
                                          (prefix + "\\Library\\bin", "conda python start-up")]
    r = run(files, [{"op": "python_import", "module": "m._m", "path": prefix + "\\Lib\\site-packages\\m\\_m.pyd"}],
            exe=prefix + "\\python.exe", conda_prefix=prefix)[0]
    assert r.error == 0 and r.tree.children[0].how == "AddDllDirectory #1 (conda python start-up)"
    assert run(files, [{"op": "LoadLibraryW", "name": "mkl_rt.2.dll"}], exe=prefix + "\\python.exe",
               conda_prefix=prefix)[0].error == 126
    # without conda_prefix (a python.org Python in the same folder) the import fails
    assert run(files, [{"op": "python_import", "module": "m._m", "path": prefix + "\\Lib\\site-packages\\m\\_m.pyd"}],
               exe=prefix + "\\python.exe")[0].error == 126


def test_rule_venv_redirector():
    assert emulate.rule_venv_redirector("C:\\v\\Scripts\\python.exe", "C:\\Python311\\python.exe") == "C:\\Python311\\python.exe"
    assert emulate.rule_venv_redirector("C:\\v\\Scripts\\python.exe", "") == "C:\\v\\Scripts\\python.exe"
    # the application folder is the base interpreter's: python311.dll beside it is found, the venv's Scripts is not searched
    files = [{"path": "C:\\v\\Lib\\site-packages\\m\\_m.pyd", "imports": ["python311.dll"]}, "C:\\Python311\\python311.dll"]
    call = [{"op": "python_import", "module": "m._m", "path": "C:\\v\\Lib\\site-packages\\m\\_m.pyd"}]
    sc = scenario(files, call, exe="C:\\v\\Scripts\\python.exe", base_exe="C:\\Python311\\python.exe")
    assert (sc.process.exe, sc.process.launcher, sc.process.cwd) == (
        "C:\\Python311\\python.exe", "C:\\v\\Scripts\\python.exe", "C:\\v\\Scripts")
    r = sc.run()[0]
    assert r.error == 0 and r.tree.children[0].how == "APPLICATION_DIR"
    assert run(files, call, exe="C:\\v\\Scripts\\python.exe")[0].error == 126


def test_origins_are_written_as_the_user_types_them():
    """A path in what made a call is a raw string (r"C:\\x"), never a repr with doubled backslashes."""
    from dlltrace import winpath

    assert winpath.typed("C:\\tools\\b.dll") == 'r"C:\\tools\\b.dll"' and winpath.typed("b.dll") == '"b.dll"'
    assert winpath.typed("C:\\") == repr("C:\\")  # (a raw string cannot end in a backslash)
    r = scenario(files=["C:\\tools\\b.dll"], calls=[{"op": "ctypes_cdll", "name": "C:\\tools\\b.dll"}]).run()[-1]
    assert r.origin == 'ctypes.CDLL(r"C:\\tools\\b.dll")' and "\\\\" not in r.origin
