"""CPython, ctypes and torch over the Windows loader model (LOADER.md §6): each function drives a
Simulator (loader/windows/engine.py) with the LoadLibraryExW calls that code makes; the choices
they make are rules, one named function each, tested in tests/test_emulate.py.

    sim = PythonSimulator(world, process)   # a Simulator whose do() also takes PYTHON_OPS
    results = sim.run(calls)
"""

from __future__ import annotations

from typing import Optional

from dlltrace import winpath
from dlltrace.loader.windows.engine import Call, Simulator
from dlltrace.model import (
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS,
    LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR,
    LOAD_WITH_ALTERED_SEARCH_PATH,
    LOAD_OPS,
    PYTHON_EXTRA_OPS,
    PYTHON_OPS,
    STATE_OPS,
    WINDOWS_EXTRA_OPS,
    CallResult,
    OriginKind,
)

ALL_OPS = LOAD_OPS + STATE_OPS + WINDOWS_EXTRA_OPS + PYTHON_OPS + PYTHON_EXTRA_OPS

TORCH_ORIGIN = "import torch (_load_dll_libraries)"
TORCH_RUNTIMES = ("vcruntime140.dll", "msvcp140.dll", "vcruntime140_1.dll")
TORCH_FLAGS = LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR  # 0x1100


# --- rules -------------------------------------------------------------------------------------------
def rule_python_extension_flags(python_version: str) -> int:
    """The flags CPython loads an extension module (.pyd) with: since 3.8
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | DLL_LOAD_DIR (0x1100: PATH is not searched);
    before 3.8 LOAD_WITH_ALTERED_SEARCH_PATH (0x8: the standard order, PATH included, from
    the .pyd's folder). An unknown version is taken as current."""
    version = _version_tuple(python_version)
    if version is not None and version < (3, 8):
        return LOAD_WITH_ALTERED_SEARCH_PATH
    return LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR


def rule_ctypes_winmode(name: str, winmode: Optional[int]) -> int:
    """The flags ctypes.CDLL passes to LoadLibraryExW: an int winmode is the flags as they are;
    winmode None is DEFAULT_DIRS, plus DLL_LOAD_DIR when the name has a separator (CPython's
    ctypes/__init__.py, 3.8 and later)."""
    if winmode is not None:
        return winmode
    if "/" in name or "\\" in name:
        return LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR
    return LOAD_LIBRARY_SEARCH_DEFAULT_DIRS


def rule_ctypes_relative_name(name: str, winmode: Optional[int], cwd: str) -> str:
    """With winmode None, a relative name with a separator is made absolute against the current
    folder before the load (ctypes calls os.path.abspath, so DLL_LOAD_DIR gets a full path); a
    bare name, an absolute one or an explicit winmode is passed as it is."""
    if winmode is None and ("/" in name or "\\" in name) and not winpath.is_absolute(name):
        return winpath.join(cwd, name)
    return name


def rule_torch_retry(error: int) -> bool:
    """torch's _load_dll_libraries retries a torch\\lib DLL with LoadLibraryW (after putting its
    folders in front of PATH, once) only when LoadLibraryExW(dll, 0x1100) failed with 126; any other
    error, or a failed retry, ends the loop (torch raises)."""
    return error == 126


def rule_torch_dll_loop_origin(op: str, name: str, flags: int) -> Optional[OriginKind]:
    """Whether a traced top-level load is one of torch's _load_dll_libraries loop (torch/__init__.py on
    Windows, read from torch 2.5.1's: `kernel32.LoadLibraryExW(dll, None, 0x00001100)` for every
    `torch\\lib\\*.dll`, and `kernel32.LoadLibraryW(dll)` as its retry after a 126): "torch" for the
    first, "torch_retry" for the retry, None for any other load. A full path to a .dll directly in a
    folder `torch\\lib`, with that op and those flags. Needed because these are ctypes *function calls*
    (kernel32's, through ctypes.WinDLL), which raise no audit event: the trace's Python context of such a
    load is whatever event came last (in 2.5.1 its ctypes.CDLL("vcruntime140_1.dll") just before the
    loop), not `import torch`, which is what the code a fix must run before is."""
    if not winpath.is_absolute(name) or not name.lower().endswith(".dll"):
        return None
    lib = winpath.dirname(name)
    if winpath.basename(lib).lower() != "lib" or winpath.basename(winpath.dirname(lib)).lower() != "torch":
        return None
    if op == "LoadLibraryExW" and flags == TORCH_FLAGS:
        return "torch"
    if op == "LoadLibraryW" and flags == 0:
        return "torch_retry"
    return None


# packages whose __init__ loads every DLL of their own folder with ctypes.CDLL on Windows (folder name -> the
# package to import): ctranslate2 3.x-4.x (`for library in glob.glob(os.path.join(package_dir, "*.dll")):
# ctypes.CDLL(library)`, after os.add_dll_directory(package_dir); read from the 4.5.0 and 4.8.5 wheels)
PACKAGE_DLL_LOOPS = {"ctranslate2": "ctranslate2"}


def rule_package_dll_loop(op: str, name: str, flags: int) -> Optional[str]:
    """The package (PACKAGE_DLL_LOOPS) whose own __init__ made this load, or None: a ctypes.CDLL of a full
    path (winmode None: LoadLibraryExW with DLL_LOAD_DIR | DEFAULT_DIRS) to a .dll directly in that
    package's folder in site-packages. The code a fix must run before is then `import <package>`, not the
    ctypes.CDLL, which is inside the package."""
    if op != "LoadLibraryExW" or flags != rule_ctypes_winmode(name, None) or not winpath.is_absolute(name) \
            or not name.lower().endswith(".dll"):
        return None
    folder = winpath.dirname(name)
    if winpath.basename(winpath.dirname(folder)).lower() != "site-packages":
        return None
    return PACKAGE_DLL_LOOPS.get(winpath.basename(folder).lower())


def rule_ctypes_find_library(name: str, path: list[str], is_file) -> Optional[str]:
    """ctypes.util.find_library(name) on Windows: "c" and "m" give find_msvcrt(), None for every
    Python built with MSVC 14 or later (3.5+: "CRT is no longer directly loadable"); any other name
    is looked for in each PATH entry, in order: <entry>\\<name> if it is a file, else (when name
    does not end in ".dll") <entry>\\<name>.dll; the first file found is returned as a full path,
    whatever its machine and whether it would load; none: None. It loads nothing and searches no
    other folder (not the application folder, not System32, not the os.add_dll_directory folders).
    Source: CPython Lib/ctypes/util.py, the `os.name == "nt"` branch (find_library, find_msvcrt).
    The model's PATH has no empty entries (an empty entry would make it look in the current folder
    and return a relative name)."""
    if name in ("c", "m"):
        return None
    for d in path:
        fname = name if winpath.is_absolute(name) else winpath.join(d, name)
        if is_file(fname):
            return fname
        if fname.lower().endswith(".dll"):
            continue
        if is_file(fname + ".dll"):
            return fname + ".dll"
    return None


CONDA_DLL_DIRS = ("bin", "Scripts", "Library\\bin", "Library\\usr\\bin", "Library\\mingw-w64\\bin")


def rule_conda_startup_dll_directories(prefix: str, python_version: str, env: dict[str, str]) -> Optional[list[str]]:
    """The folders a conda Python's python.exe adds with AddDllDirectory at start-up, in the order
    added: <prefix>\\bin, Scripts, Library\\bin, Library\\usr\\bin, Library\\mingw-w64\\bin, where
    prefix is the folder of the interpreter's pythonXY.dll (the environment's prefix). They are
    searched only by loads with LOAD_LIBRARY_SEARCH_USER_DIRS (extension imports, ctypes.CDLL),
    after the os.add_dll_directory folders added later, and never by a plain LoadLibrary. A folder
    that does not exist is not added (AddDllDirectory fails on it). Source: conda-forge
    python-feedstock recipe/patches/*-Add-CondaEcosystemModifyDllSearchPath.patch
    (CondaEcosystemModifyDllSearchPath_Init, called from _PyRuntime_Initialize: AddDllDirectory
    over condaPaths from the last to the first). Conda Pythons before 3.11 had a second mode,
    CONDA_DLL_SEARCH_MODIFICATION_ENABLE set (not "0"): SetDefaultDllDirectories and an
    AddDllDirectory for every PATH entry; it is not modelled: None."""
    enable = next((v for k, v in env.items() if k.upper() == "CONDA_DLL_SEARCH_MODIFICATION_ENABLE"), None)
    version = _version_tuple(python_version)
    if enable is not None and enable != "0" and version is not None and version < (3, 11):
        return None
    return [winpath.join(prefix, d) for d in CONDA_DLL_DIRS]


def rule_venv_redirector(exe: str, base_exe: str) -> str:
    """The executable of the process that loads the DLLs when `exe` is a venv's python.exe: since
    Python 3.7.2 a venv's Scripts\\python.exe on Windows is a redirector (PC/launcher.c built with
    VENV_REDIRECT, PC/venvlauncher) that reads `home` from pyvenv.cfg and starts the base
    interpreter's python.exe as a child, setting __PYVENV_LAUNCHER__ so that sys.executable still
    names the venv's (bpo-35811; site.py took sys._base_executable from GetModuleFileName(0)). So the
    application folder is the base interpreter's folder, not the venv's Scripts folder. base_exe ""
    (a venv made by copying python.exe, or none): exe itself."""
    return base_exe or exe


def _version_tuple(python_version: str) -> Optional[tuple[int, int]]:
    parts = []
    for p in python_version.split(" ")[0].split(".")[:2]:
        if not p.isdigit():
            break
        parts.append(int(p))
    return (parts[0], parts[1]) if len(parts) == 2 else None


# --- the emulations ------------------------------------------------------------------------------------
def python_import(sim: Simulator, path: str, module: str = "") -> CallResult:
    """`import module` of the extension at `path`: one LoadLibraryExW with CPython's flags."""
    flags = rule_python_extension_flags(sim.process.python)
    return sim.load_library(path, flags, origin=f"import {module}".strip(), origin_kind="python_import",
                            origin_module=module)


def os_add_dll_directory(sim: Simulator, folder: str, label: str = "") -> CallResult:
    """os.add_dll_directory(folder): AddDllDirectory, labelled as Python's."""
    return sim.state_result("os_add_dll_directory", folder, sim.add_dll_directory(folder, label or "os.add_dll_directory"))


def ctypes_find_library(sim: Simulator, name: str) -> tuple[CallResult, Optional[str]]:
    """ctypes.util.find_library(name) (rule_ctypes_find_library) against the PATH of this moment: a
    result with no load (error 0 and the path in its note, or 2 when it returns None) and the value."""
    found = rule_ctypes_find_library(name, sim.process.path, lambda p: sim.world.file(p) is not None)
    note = f"returned {found}" if found else f"returned None (no PATH entry holds {name}" + (
        "" if name.lower().endswith(".dll") or name in ("c", "m") else f" or {name}.dll") + ")"
    return sim.extra_result("ctypes_find_library", name, 0 if found else 2, note), found


def ctypes_cdll_found(sim: Simulator, name: str, winmode: Optional[int]) -> list[CallResult]:
    """ctypes.CDLL(ctypes.util.find_library(name), winmode=winmode): find_library's result, then the
    load of the path it returned; None is not loaded (ctypes.CDLL(None) raises TypeError on Windows:
    `'/' in name` with name None)."""
    r, found = ctypes_find_library(sim, name)
    if found is None:
        r.note += "; ctypes.CDLL(None) raises TypeError on Windows: no load is made"
        return [r]
    load = ctypes_cdll(sim, found, winmode)
    load.origin = f"ctypes.CDLL(ctypes.util.find_library({winpath.typed(name)})" + ("" if winmode is None else f", winmode={winmode:#x}") + ")"
    return [r, load]


def ctypes_cdll(sim: Simulator, name: str, winmode: Optional[int]) -> CallResult:
    """ctypes.CDLL(name, winmode=winmode)."""
    origin = f"ctypes.CDLL({winpath.typed(name)}" + ("" if winmode is None else f", winmode={winmode:#x}") + ")"
    flags = rule_ctypes_winmode(name, winmode)
    return sim.load_library(rule_ctypes_relative_name(name, winmode, sim.process.cwd), flags, origin=origin,
                            origin_kind="ctypes")


def torch_load_dll_libraries(sim: Simulator, torch_lib: str, dlls: Optional[list[str]],
                             extra_dirs: list[str]) -> list[CallResult]:
    """torch/__init__.py _load_dll_libraries: add_dll_directory on torch\\lib and the other
    folders; preload the VC++ runtime with ctypes; LoadLibraryExW(dll, 0x1100) for every
    torch\\lib\\*.dll (`dlls`: these names instead); on 126 put the folders in front of PATH and
    retry with LoadLibraryW (rule_torch_retry); stop at the first failure (torch raises)."""
    folders = [d for d in [torch_lib, *extra_dirs] if sim.world.is_dir(d)]
    out: list[CallResult] = []
    for d in folders:
        out.append(sim.state_result("AddDllDirectory", d, sim.add_dll_directory(d, "torch")))
    for rt in TORCH_RUNTIMES:
        r = ctypes_cdll(sim, rt, None)
        r.origin, r.origin_kind = TORCH_ORIGIN + " preload", "torch_preload"
        out.append(r)
        if r.error:
            break  # torch prints a VC++ redistributable warning and goes on
    if dlls is None:
        names = sorted({winpath.basename(p) for p in sim.world.files_in(torch_lib) if p.lower().endswith(".dll")},
                       key=str.lower)
    else:
        names = list(dlls)
    path_patched = False
    for n in names:
        full = winpath.join(torch_lib, n)
        r = sim.load_library(full, TORCH_FLAGS, origin=TORCH_ORIGIN, origin_kind="torch")
        out.append(r)
        if r.error == 0:
            continue
        if not rule_torch_retry(r.error):
            break
        if not path_patched:
            sim.process.path = [*folders, *sim.process.path]
            path_patched = True
        r2 = sim.load_library(full, 0, op="LoadLibraryW", origin=TORCH_ORIGIN + " retry after adding its folders to PATH",
                              origin_kind="torch_retry")
        out.append(r2)
        if r2.error:
            break
    return out


class PythonSimulator(Simulator):
    """The Windows loader model driven by a Python program: Simulator.do's Windows calls, and
    Python's own (PYTHON_OPS) through the emulations above."""

    def do(self, call: Call) -> list[CallResult]:
        op = call.op
        if op == "python_import":
            return [python_import(self, call.path or call.name, call.module)]
        if op == "ctypes_cdll":
            if call.find_library:
                return ctypes_cdll_found(self, call.find_library, call.winmode)
            return [ctypes_cdll(self, call.name, call.winmode)]
        if op == "ctypes_find_library":
            return [ctypes_find_library(self, call.name)[0]]
        if op == "os_add_dll_directory":
            return [os_add_dll_directory(self, call.path or "", call.label)]
        if op == "torch_load_dll_libraries":
            return torch_load_dll_libraries(self, call.torch_lib, call.dlls, call.extra_dirs)
        return super().do(call)
