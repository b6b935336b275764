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
    PYTHON_OPS,
    STATE_OPS,
    CallResult,
)

ALL_OPS = LOAD_OPS + STATE_OPS + PYTHON_OPS

TORCH_ORIGIN = "import torch (_load_dll_libraries)"
TORCH_RUNTIMES = ("vcruntime140.dll", "msvcp140.dll", "vcruntime140_1.dll")
TORCH_FLAGS = LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR  # 0x1100


# --- rules -------------------------------------------------------------------------------------------
def rule_python_extension_flags(python_version: str) -> int:
    """The flags CPython loads an extension module (.pyd) with: since 3.8
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | DLL_LOAD_DIR (0x1100: PATH is not searched);
    before 3.8 LOAD_WITH_ALTERED_SEARCH_PATH (0x8: the standard order, PATH included, from
    the .pyd's folder). An unknown version is taken as current."""
    parts = []
    for p in python_version.split(" ")[0].split(".")[:2]:
        if not p.isdigit():
            break
        parts.append(int(p))
    if len(parts) == 2 and tuple(parts) < (3, 8):
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


# --- the emulations ------------------------------------------------------------------------------------
def python_import(sim: Simulator, path: str, module: str = "") -> CallResult:
    """`import module` of the extension at `path`: one LoadLibraryExW with CPython's flags."""
    flags = rule_python_extension_flags(sim.process.python)
    return sim.load_library(path, flags, origin=f"import {module}".strip(), origin_kind="python_import",
                            origin_module=module)


def os_add_dll_directory(sim: Simulator, folder: str, label: str = "") -> CallResult:
    """os.add_dll_directory(folder): AddDllDirectory, labelled as Python's."""
    return sim.state_result("os_add_dll_directory", folder, sim.add_dll_directory(folder, label or "os.add_dll_directory"))


def ctypes_cdll(sim: Simulator, name: str, winmode: Optional[int]) -> CallResult:
    """ctypes.CDLL(name, winmode=winmode)."""
    origin = f"ctypes.CDLL({name!r}" + ("" if winmode is None else f", winmode={winmode:#x}") + ")"
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
            return [ctypes_cdll(self, call.name, call.winmode)]
        if op == "os_add_dll_directory":
            return [os_add_dll_directory(self, call.path or "", call.label)]
        if op == "torch_load_dll_libraries":
            return torch_load_dll_libraries(self, call.torch_lib, call.dlls, call.extra_dirs)
        return super().do(call)
