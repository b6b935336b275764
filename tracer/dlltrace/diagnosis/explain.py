"""From a simulated (or replayed) call to a verdict: where the leaf actually is, and the fixes.

Pure logic over a CallResult, the world and the process state; used by `simulate` and
by `report`.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Literal, Optional

from dlltrace import packages, winpath
from dlltrace.emulate.python import TORCH_ORIGIN, rule_package_dll_loop, rule_torch_dll_loop_origin
from dlltrace.diagnosis import verify
from dlltrace.model import (LOAD_LIBRARY_SEARCH_APPLICATION_DIR, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS,
                            LOAD_LIBRARY_SEARCH_SYSTEM32, LOAD_LIBRARY_SEARCH_USER_DIRS)
from dlltrace.classify import windows_names
from dlltrace.model import (PYTHON_ORIGINS, TORCH_ORIGINS, VC_REDIST, CallResult, Elsewhere, Fix, Node, Owner,
                            PackageLoader)
from dlltrace.worlds.gpu import rule_driver_state
from dlltrace.worlds.world import ProcessState, World, listed_by, owner_of_path, owners_of, package_loaders

# the LOAD_LIBRARY_SEARCH_* flags that search beyond the DLL's own folder
SEARCH_ELSEWHERE = (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_SYSTEM32 | LOAD_LIBRARY_SEARCH_APPLICATION_DIR
                    | LOAD_LIBRARY_SEARCH_USER_DIRS)
MSVC_MIN = (14, 40)  # what current PyTorch wheels need of msvcp140.dll (pytorch#169429)

def version_tuple(v: Optional[str]) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (v or "").split("."))
    except ValueError:
        return ()


def leaf_node(tree: Optional[Node]) -> Optional[Node]:
    """The node where the cause sits, if the tree failed."""
    chain = tree.failure_chain() if tree is not None else []
    return chain[-1] if chain and chain[-1].cause else None


def uses_search_flags(res: CallResult) -> bool:
    """Whether the call searched with LOAD_LIBRARY_SEARCH_* flags (its own or the process default)."""
    return bool(res.search_flags)


def where_is(path: str, res: CallResult, world: World, process: ProcessState, leaf: Optional[Node] = None) -> Elsewhere:
    """A file of the world outside the call's search, with how its folder relates to the call's search
    state (its search flags, its PATH, its current folder)."""
    folder = winpath.dirname(path)
    facts = world.file(path)
    machine = facts.pe.machine if facts and facts.pe else None
    version = facts.pe.file_version if facts and facts.pe else None
    result: Literal["found", "wrong_machine"] = "found" if machine in (None, process.machine) else "wrong_machine"
    if leaf is not None and leaf.how_kind in ("already_loaded", "loaded_same_file"):
        for s in leaf.search:
            if winpath.same(s.folder, folder):
                return Elsewhere(path, "loaded_wins", result, machine, version, rule=s.rule)
    for i, p in enumerate(res.path, 1):
        if winpath.same(p, folder):
            return Elsewhere(path, "on_path_not_searched" if uses_search_flags(res) else "on_path", result, machine,
                             version, path_entry=i)
    if winpath.same(folder, res.cwd):
        return Elsewhere(path, "current_folder", result, machine, version)
    return Elsewhere(path, "not_searched", result, machine, version)


def find_elsewhere(res: CallResult, world: World, process: ProcessState) -> list[Elsewhere]:
    """Every copy of the leaf the world knows, outside the folders this call already tried."""
    leaf = leaf_node(res.tree)
    if leaf is None or leaf.cause not in ("not_found", "bad_machine", "missing_export", "missing_ordinal"):
        return []
    tried = {winpath.key(c.path) for c in leaf.candidates}
    out = []
    for path in world.files_named(winpath.basename(leaf.name)):
        if winpath.key(path) in tried and leaf.cause in ("not_found", "bad_machine"):
            continue
        if leaf.path and winpath.same(path, leaf.path):
            continue
        e = where_is(path, res, world, process, leaf)
        owner = listed_by(world, path)
        out.append(dataclasses.replace(e, owner=f"{owner.dist} {owner.version}".strip()) if owner is not None else e)
    out.sort(key=lambda c: (c.result != "found", c.path.lower()))
    return out


def _before(res: CallResult) -> Optional[str]:
    """The code a fix must run before ("import torch"), from what made the call (CallResult.origin_kind);
    None: before the load itself."""
    # (before the user's own import it was made under, where the user can put code: `import requests` for
    # _ssl's load, which the standard library imports; `import transformers` for torch's)
    if res.origin_kind in TORCH_ORIGINS:
        return f"import {res.origin_top or 'torch'}"
    if res.origin_kind == "python_import" and res.origin_module:
        return f"import {res.origin_top or res.origin_module}"
    if res.origin_kind == "ctypes":
        package = rule_package_dll_loop(res.op, res.name, res.flags)
        return f"import {package}" if package else res.origin
    return None


def torch_origin(res: CallResult, process: ProcessState) -> None:
    """A load a Python process made (its version known: a trace's py_env) that is torch's own
    _load_dll_libraries loop (emulate.python.rule_torch_dll_loop_origin) is said to be made by `import torch`
    (origin_kind torch / torch_retry), whatever Python event the trace attributed it to: its fixes run
    before `import torch`, and are re-run as torch makes the load. (A program that is not Python, loading
    torch\\lib's DLLs itself, keeps its own origin.)"""
    if not process.python or res.origin_kind not in ("", "ctypes", "os_add_dll_directory"):
        return  # (an extension import keeps its own: CPython's import made that load)
    kind = rule_torch_dll_loop_origin(res.op, res.name, res.flags)
    if kind is not None:
        res.origin_kind, res.origin, res.origin_module = kind, TORCH_ORIGIN, ""


def python_version(process: ProcessState) -> tuple[int, ...]:
    """(3, 11) for "3.11.7"; () for a process that is not Python (or whose version is unknown)."""
    return version_tuple(".".join(process.python.split(" ")[0].split(".")[:2])) if process.python else ()


def is_python(process: ProcessState, res: Optional[CallResult] = None) -> bool:
    """A Python process: its version is known (a trace's py_env event, a scenario's process.python), or
    the call was made by Python code (an import, ctypes, torch)."""
    return bool(process.python) or (res is not None and res.origin_kind in PYTHON_ORIGINS)


def package_roots(res: CallResult, process: ProcessState) -> tuple[str, list[str]]:
    """(prefix, [site-packages folders]) of the process: sys.prefix is python.exe's folder (a venv's
    root when python.exe is in Scripts); site-packages are those on the paths of the call (its name,
    its modules, the DLL that made a run-time load), else prefix\\Lib\\site-packages; a Store Python's user site
    first (replay.rule_store_python_installs_into_its_user_site: where its pip installs)."""
    exe_dir = winpath.dirname(process.exe)
    prefix = winpath.dirname(exe_dir) if winpath.basename(exe_dir).lower() == "scripts" else exe_dir
    sites: list[str] = []
    by = process.find_loaded_by_name(res.origin_module) if res.origin_kind == "runtime" and res.origin_module else None
    paths = itertools.chain([res.name], (n.path or "" for n in (res.tree.walk() if res.tree else ())),
                            [by.path] if by is not None else [])
    for p in paths:
        i = p.lower().find("\\site-packages\\")
        if i >= 0:
            site = winpath.normalize(p[:i + len("\\site-packages")])
            if not any(winpath.same(site, s) for s in sites):
                sites.append(site)
            if len(sites) >= 4:  # (enough: a process has one or two)
                break
    if process.python_kind == "store" and process.pip_site:  # (its pip installs into the user site: first)
        sites = [process.pip_site, *(s for s in sites if not winpath.same(s, process.pip_site))]
    if not sites:
        sites.append(winpath.join(prefix, "Lib", "site-packages"))
    return prefix, sites


def wheel_copies(name: str, res: CallResult, world: World, process: ProcessState) -> list[str]:
    """Copies of `name` in the folders pip wheels put DLLs in (packages.wheel_folders: nvidia\\cublas\\bin,
    nvidia\\cu13\\bin\\x86_64, Library\\bin, ...), under the process's prefix and site-packages."""
    prefix, sites = package_roots(res, process)
    out = []
    for root, folder in packages.wheel_folders():
        for base in ([prefix] if root == "prefix" else sites):
            path = winpath.join(base, folder.replace("/", "\\"), name)
            if world.file(path) is not None:
                out.append(winpath.normalize(path))
    return out


def install_folder(prov: packages.Provider, res: CallResult, process: ProcessState) -> str:
    prefix, sites = package_roots(res, process)
    return winpath.join(prefix if prov.root == "prefix" else sites[0], prov.win_folder)


def _usable(path: str, world: World, process: ProcessState) -> bool:
    f = world.file(path)
    return f is not None and f.pe is not None and f.pe.machine == process.machine and f.error is None


def make_searched(copy: str, name: str, res: CallResult, world: World, process: ProcessState) -> list[Fix]:
    """Every way to make the call find `copy` (a file of the world, or one a fix installs), in the
    order offered: os.add_dll_directory (a Python >= 3.8 process), PATH (not a packaged app), a
    preload by full path, a copy next to the module the call loads. Only what the process has not
    done already; verify.py keeps those that work."""
    folder = winpath.dirname(copy)
    before = _before(res)
    py = is_python(process, res)
    out: list[Fix] = []
    # os.add_dll_directory exists from Python 3.8 (a non-Python program calls AddDllDirectory itself)
    if (not py or python_version(process) >= (3, 8)) and not any(winpath.same(f, folder) for f, _ in process.dll_directories):
        out.append(Fix("add_dll_directory", "add_dll_directory", name=name, folder=folder, path=copy, before=before, python=py))
    if not getattr(process, "packaged", False) and not any(winpath.same(p, folder) for p in process.path):
        out.append(Fix("path", "path_prepend", name=name, folder=folder, path=copy, before=before, python=py))
    if res.op != "start":
        out.append(Fix("preload", "preload_path", name=name, path=copy, before=before, python=py))
    top = res.tree.path if res.tree is not None and res.tree.path else (res.name if winpath.is_absolute(res.name) else "")
    dest = winpath.dirname(process.exe) if res.op == "start" else (winpath.dirname(top) if top else "")
    # (a Store Python's own folder, under WindowsApps, cannot be written: no copy goes there)
    read_only = process.python_kind == "store" and "\\windowsapps\\" in winpath.key(dest) + "\\"
    if dest and not winpath.same(dest, folder) and not read_only:
        out.append(Fix("copy", "copy_file", name=name, path=copy, dest=dest, python=py))
    return out


# onnxruntime 1.31.1 `preload_dlls()` (onnxruntime/__init__.py, docs/packages.md 2.3): for a CUDA 13
# build, the files it loads by full path (ctypes.CDLL) from site-packages when they exist
ORT_PRELOAD_CU13 = ("nvidia/cu13/bin/x86_64/cublasLt64_13.dll", "nvidia/cu13/bin/x86_64/cublas64_13.dll",
                    "nvidia/cu13/bin/x86_64/cufft64_12.dll", "nvidia/cu13/bin/x86_64/cudart64_13.dll")
ORT_PRELOAD_CU12 = ("nvidia/cublas/bin/cublasLt64_12.dll", "nvidia/cublas/bin/cublas64_12.dll",
                    "nvidia/cufft/bin/cufft64_11.dll", "nvidia/cuda_runtime/bin/cudart64_12.dll")
ORT_PRELOAD_CUDNN = tuple(f"nvidia/cudnn/bin/{n}64_9.dll" for n in (
    "cudnn_engines_runtime_compiled", "cudnn_engines_precompiled", "cudnn_heuristic", "cudnn_ops", "cudnn_adv",
    "cudnn_graph", "cudnn", "cudnn_engines_tensor_ir"))


def package_mechanisms(name: str, copies: list[str], res: CallResult, world: World, process: ProcessState) -> list[Fix]:
    """The package's own way of finding the DLL, where it has one and it would find this copy:
    onnxruntime's opt-in `preload_dlls()` for its CUDA provider; CTranslate2's CUDA_PATH, read by its
    cuBLAS loader (verify.rule_ctranslate2_cublas_loader)."""
    out: list[Fix] = []
    py = is_python(process, res)
    chain = [n.lower() for n in res.chain]
    _, sites = package_roots(res, process)
    if py and any(n.startswith("onnxruntime_providers_") for n in chain):
        for site in sites:
            # which list preload_dlls uses follows the build's CUDA major: the names the provider asks for
            cu13 = any(n.endswith("_13.dll") for n in chain)
            rels = (ORT_PRELOAD_CU13 if cu13 else ORT_PRELOAD_CU12) + ORT_PRELOAD_CUDNN
            files = tuple(p for p in (winpath.join(site, r.replace("/", "\\")) for r in rels) if world.file(p) is not None)
            if any(winpath.same(winpath.basename(p), name) for p in files):
                out.append(Fix("package", "package_mechanism", name=name, call="onnxruntime.preload_dlls()",
                               before="creating the session", files=files))
                break
    if py:  # a package whose own __init__.py adds the copy's folder (delvewheel's patch): import it first
        for c in copies:
            for lo in package_loaders(world):
                if winpath.same(winpath.dirname(c), lo.folder) and not any(
                        winpath.same(f, lo.folder) for f, _ in process.dll_directories) and \
                        not rule_package_loader_of_another_copy(lo, res):
                    out.append(Fix("package", "package_mechanism", name=name, call=f"import {lo.package}",
                                   folder=lo.folder, path=c, before=_before(res), python=py))
    if verify.rule_ctranslate2_cublas_loader(res, name):
        for c in copies[:1]:
            folder = winpath.dirname(c)
            if winpath.basename(folder).lower() == "bin":
                out.append(Fix("env", "set_env", name=name, variable="CUDA_PATH", value=winpath.dirname(folder), python=py))
    return out


def rule_package_loader_of_another_copy(lo: PackageLoader, res: CallResult) -> bool:
    """Whether the load is the import of a module of `lo.package` from another copy of that package than the one
    whose __init__.py adds `lo.folder` (a copy of psycopg2 vendored into the application's folder, without
    psycopg2_binary.libs beside it, imported first on sys.path): `import psycopg2` runs that copy again, never the
    installed one's loader, so it is no fix. A load that is not such an import (ctypes) says nothing of which copy
    `import` finds: False."""
    if res.origin_kind != "python_import" or not (res.origin_module == lo.package or
                                                  res.origin_module.startswith(lo.package + ".")):
        return False
    own = winpath.join(winpath.dirname(lo.folder), *lo.package.split("."))
    return winpath.is_absolute(res.name) and not winpath.key(res.name).startswith(winpath.key(own) + "\\")


def _top_folder(res: CallResult) -> str:
    """The folder of the module the call loads (searched for its imports with DLL_LOAD_DIR or 0x8)."""
    top = res.tree.path if res.tree is not None and res.tree.path else (res.name if winpath.is_absolute(res.name) else "")
    return winpath.dirname(top) if top and res.op != "start" else ""


def _major(name: str) -> str:
    m = re.search(r"64_(\d+)", name)
    return m.group(1) if m else ""


def owner_reinstall(name: str, world: World, process: ProcessState, res: CallResult,
                    owner: Optional[Owner] = None) -> Optional[Fix]:
    """A DLL no folder has that an installed distribution's record lists (its RECORD, a conda package's
    conda-meta: worlds.world.owners_of): its install is damaged (a file deleted, antivirus, a copy cut short),
    and reinstalling that distribution puts the file back where the record says. pywin32's
    pywin32_system32/pywintypes311.dll is pywin32's, whatever its folder is called. `owner`: that distribution,
    when it is known (rule_record_listed_file_looked_for), else the first whose record lists the name."""
    owners = [owner] if owner is not None else owners_of(world, name)
    if not owners:
        return None
    o = owners[0]
    where = winpath.join(o.root, *o.path.split("/"))
    # (a wheel's: reinstalled by the traced Python's own pip, not the first pip on PATH, which may be another Python's;
    # an embeddable Python has none: no interpreter to name)
    python = is_python(process, res)
    exe = reinstalling_python(process, python) if o.kind == "wheel" else ""
    return Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=where, bound=o.path,
               exe=exe, lacks=o.kind, python=python, folder=o.root if o.kind == "conda" else "")


def reinstalling_python(process: ProcessState, python: bool) -> str:
    """The interpreter whose pip reinstalls a wheel of the traced Python (its launcher: a Store Python's alias), ""
    when the process is not Python or is an embeddable Python with no pip (no interpreter to name)."""
    return (process.launcher or process.exe) if python and not (
        process.python_kind == "embeddable" and not process.pip_site) else ""


def rule_record_listed_file_looked_for(leaf: Node, world: World) -> Optional[Owner]:
    """The installed distribution whose record lists the very file a not-found leaf's load looked for (the full
    path it was given, or a path its search tried): that file is gone, so its install is damaged, whatever
    other copy of the name some other folder holds, and whatever other package ships the name (torch\\lib's
    libiomp5md.dll: reinstall torch before intel-openmp) (scikit-learn's _distributor_init loads its own
    sklearn\\.libs\\vcomp140.dll by full path; System32's copy, the VC++ runtime's or Wine's, is never that
    file). Reinstalling the distribution is the root-cause fix; else None."""
    for c in leaf.candidates:
        if c.result == "not_there" and (o := owner_of_path(world, c.path)) is not None:
            return o
    return None


def rule_windows_dll_missing_under_wine(prov: packages.Provider, world: World) -> bool:
    """A DLL of Windows itself (data/windows-system.json, an API set) not found in a run under Wine: Wine's own set
    of Windows DLLs lacks it, not the user's Windows (Wine 8.0 has no bcryptprimitives.dll, which Rust 1.78's std
    imports for ProcessPrng: tokenizers 0.20.3's extension). Updating Windows is no fix there."""
    return prov.kind == "windows" and world.system.profile == "wine"


def rule_standard_order_searches_path_not_added_folders(res: CallResult) -> bool:
    """A load with the standard search order (no LOAD_LIBRARY_SEARCH_* flag of its own nor the process's: cffi's
    ffi.dlopen, LoadLibraryExW(name, NULL, 0)) searches PATH and never the folders of AddDllDirectory
    (os.add_dll_directory): a folder that must hold its DLL goes on PATH (seen under Wine: after
    os.add_dll_directory(F), LoadLibraryExW(name in F, 0) fails with 126, and with 0x1000 loads it)."""
    return res.op != "start" and not uses_search_flags(res)


def provider_advice(name: str, prov: Optional[packages.Provider], process: ProcessState, res: CallResult,
                    world: World) -> Optional[Fix]:
    """What ships `name` when no copy is there and no pip package does (the NVIDIA driver, Windows, the
    Python interpreter, the VC++ runtime, a Visual Studio component, the package itself): advice the
    model cannot apply."""
    arch = arch_of(process)
    major = _major(name)
    if prov is None and name.lower() in windows_names():
        # a DLL of every vanilla Windows 10/11 System32 (data/windows-system.json) that this Windows lacks
        prov = packages.Provider(dll=name, kind="windows", component="Windows", cuda_major=None, package=None,
                                 requirement=None, root="", folder="", source="data/windows-system.json", row="")
    if prov is None:
        return Fix("install", "find_package", name=name, exe=res.name if res.op == "start" else "", python=is_python(process),
                   value="path" if rule_standard_order_searches_path_not_added_folders(res) else "")
    url = prov.download_for(arch) or ""
    since = f" (it first shipped with version {prov.since})" if prov.since and prov.since != "14.0" else ""
    words = {
        "driver": f"{name} comes with the NVIDIA display driver (it installs it in System32); no pip package provides it: "
                  "install or update the NVIDIA driver",
        "windows": f"{name} is part of Windows 10 and 11, and this Wine has none (Wine's own DLLs stand for Windows'): "
                   "under Wine, use a Wine release that has it; on Windows 10 or 11 the load finds System32's"
        if rule_windows_dll_missing_under_wine(prov, world) else
        f"{name} is part of Windows: this Windows lacks it (an older or a reduced edition, e.g. N or Server "
        "without its feature); update Windows or enable the feature that provides it",
        "python": python_dll_words(name, res, process),
        "msvc_runtime": f"{name} is part of the Visual C++ 2015-2022 runtime{since}: install the latest Microsoft Visual "
                        f"C++ Redistributable ({arch}): " + (url or VC_REDIST.format(arch=arch)),
        "msvc_legacy": f"{name} is part of the {prov.component}, which the 2015-2022 one does not replace: install it "
                       f"({arch}{': ' + url if url else ''})" + (
                           "; it is a side-by-side assembly (WinSxS), bound by the program's manifest: a copy on PATH "
                           "or next to the program is not used" if prov.side_by_side else ""),
        "directx_legacy": f"{name} is part of the legacy {prov.component}, which no Windows includes: download "
                          f"directx_Jun2010_redist.exe ({url}), run it to unpack into a folder, then run DXSETUP.exe "
                          "from that folder",
        "windows_feature": f"{name} is part of Windows' Media Feature Pack, which Windows N and KN editions lack: add it "
                           "(Settings > Apps > Optional features > Add a feature > Media Feature Pack, then restart; or, "
                           "as administrator, DISM /Online /Add-Capability /CapabilityName:Media.MediaFeaturePack~~~~0.0.1.0; "
                           f"on Windows Server: Install-WindowsFeature Server-Media-Foundation; {url})",
        "vs_component": f"Install Visual Studio's \"MSVC v143 build tools\" component (it puts {name} in System32), or a "
                        "build of the package that does not need it",
        "package_itself": f"{name} belongs to {prov.component or 'the package'} itself and is missing from its folder: "
                          f"reinstall it (pip install --force-reinstall {prov.package or prov.component})",
        "archive": f"Install {prov.component}{' ' + major if major else ''} for your CUDA version from NVIDIA's archive "
                   "and put its bin folder on PATH",
    }
    text = words.get(prov.kind)
    if text is None:
        return None
    # where the installer puts it: System32 for the driver, the redistributable and the VS component
    # (the model re-runs the call with a copy there); nowhere the model knows for the others
    # (a side-by-side assembly lands in WinSxS, which the model does not search)
    lands = winpath.join(world.system.system32, name) if prov.kind in (
        "driver", "msvc_runtime", "vs_component", "directx_legacy", "windows_feature") or (
        prov.kind == "msvc_legacy" and not prov.side_by_side) else ""
    state, version = "", ""
    if prov.kind == "driver":  # (why the driver's DLL is not there, when the traced Python read the machine's GPUs)
        ask = getattr(world, "gpu_facts", None)
        gpu = ask() if ask is not None else None
        state = rule_driver_state(gpu)
        version = (gpu.kernel_driver or "") if gpu is not None else ""
    return Fix("install", "install", name=name, package=prov.package, instruction=text, python=is_python(process, res),
               path=lands, value=state, driver=version)


def arch_of(process: ProcessState) -> str:
    """The redistributables' name for the process's machine: x86, arm64 or x64."""
    return "x86" if process.machine == "x86" else ("arm64" if process.machine == "arm64" else "x64")


_PLATFORM_TAG_MACHINE = {"win_amd64": "x64", "win32": "x86", "win_arm64": "arm64"}


def rule_wheel_for_another_machine(path: str, world: World, machine: str) -> Optional[tuple[Owner, str]]:
    """The wheel whose RECORD lists this wrong-machine file, when that wheel is itself a build for another machine:
    its tags (its WHEEL file) name platforms of one other machine only (pywin32 306's cp311-cp311-win32 wheel in a
    64-bit Python: its win32api.pyd, x86, named with no platform tag, is imported and fails with 193). pip put the
    file there as the wheel holds it: the wheel is the wrong one, and this Python's own pip picks its build for this
    machine. Returns (the wheel, its platform tag), else None (a wheel for this machine, or of no known tags)."""
    o = owner_of_path(world, path) if path else None
    if o is None or o.kind != "wheel":
        return None
    platforms = {t.rsplit("-", 1)[-1].lower() for t in o.tags}
    machines = {_PLATFORM_TAG_MACHINE.get(p) for p in platforms}
    if len(machines) != 1 or None in machines or machine in machines:
        return None
    return o, sorted(platforms)[0]


def rule_wrong_machine_file_of_its_own_wheel(path: str, parent: str, world: World, machine: str) -> Optional[Owner]:
    """The wheel whose RECORD lists this wrong-machine file (None: no wheel's, or nothing says which build it
    shipped). A wheel is built for one machine: the file is not the one pip installed when the module that imports
    it is the same wheel's and loads in this process (pygame's x64 base.pyd, its own SDL2.dll x86: the win32
    wheel's copied over it), or when its own name's platform tag is this process's machine (pillow's
    _imaging.cp311-win_amd64.pyd, x86 inside), or when the wheel's tags (its WHEEL file) name this machine's
    platform only (xgboost 2.1.3, py3-none-win_amd64: its xgboost\\lib\\xgboost.dll, loaded by full path,
    x86 inside). Reinstalling the distribution puts its file back."""
    o = owner_of_path(world, path) if path else None
    if o is None or o.kind != "wheel":
        return None
    m = re.search(r"[.-](win_amd64|win32|win_arm64)\.(?:pyd|dll)$", path.lower())
    if m is not None and _PLATFORM_TAG_MACHINE[m.group(1)] == machine:
        return o
    platforms = {t.rsplit("-", 1)[-1].lower() for t in o.tags}
    if platforms and all(_PLATFORM_TAG_MACHINE.get(p) == machine for p in platforms):
        return o
    p = owner_of_path(world, parent) if parent else None
    return o if p is not None and (p.dist, p.version, p.root) == (o.dist, o.version, o.root) else None


def rule_not_the_file_its_distribution_installed(path: str, world: World) -> Optional[Owner]:
    """The wheel whose RECORD lists this very file (its path under the site folder) with a size the file does not
    have (None: no wheel lists it, RECORD gives no size -- an older trace --, or the world does not know the file's
    size). pip writes each file whole and RECORD says how big: a file of another size at that path is not the one the
    distribution installed -- a `pip install -U` that could not replace a DLL a running process held (the new .pyd next
    to the old DLL), or a DLL copied over the package's own. Reinstalling the distribution puts its file back.
    (A size alone: the same size with other bytes is not seen; RECORD's hash is not compared, the file is not read.)"""
    o = owner_of_path(world, path) if path else None
    if o is None or o.kind != "wheel" or o.size is None:
        return None
    f = world.file(path)
    return o if f is not None and f.size is not None and f.size != o.size else None


def not_installed_fix(path: str, world: World, process: ProcessState, res: Optional[CallResult] = None) -> Optional[Fix]:
    """The reinstall of the distribution whose RECORD lists `path` with another size
    (rule_not_the_file_its_distribution_installed), by the traced Python's own pip; None when the rule does not
    apply. The model re-runs a load with the distribution's file assumed in place (a stand-in at `path`)."""
    o = rule_not_the_file_its_distribution_installed(path, world)
    f = world.file(path) if o is not None else None
    if o is None or f is None:
        return None
    python = is_python(process, res)
    exe = reinstalling_python(process, python)
    return Fix("reinstall", "install", name=winpath.basename(path), package=o.dist, version=o.version,
               path=winpath.normalize(path), bound=o.path, exe=exe, lacks=o.kind, size=f.size, record_size=o.size,
               python=python)


def stale_copy(name: str, leaf: Node, world: World, process: ProcessState) -> list[Fix]:
    """The copy at fault: the search reached `leaf.path` first and it is unusable (another machine's, or it lacks
    the export), while a usable copy is elsewhere. Renaming it lets the search go on (verified by the re-run: the
    next copy must be on the search). Never a file of the Windows folder (a redistributable or Windows owns it)."""
    bad = leaf.path
    under_windows = bool(bad) and winpath.key(bad).startswith(winpath.key(world.system.windows) + "\\")
    if not bad or under_windows or leaf.how_kind in ("already_loaded", "loaded_same_file"):
        return []
    others = [p for p in world.files_named(name) if not winpath.same(p, bad) and _usable(p, world, process)]
    if leaf.cause in ("missing_export", "missing_ordinal"):
        others = [p for p in others if _provides(world, p, leaf)]
    if not others:
        return []
    o = owner_of_path(world, bad)
    what = leaf.detail if leaf.cause in ("missing_export", "missing_ordinal") else ""
    return [Fix("stale", "rename_file", name=name, path=bad, lacks=what, machine=leaf.facts.machines[0]
                if leaf.facts is not None and leaf.facts.machines else "", package=f"{o.dist} {o.version}".strip() if o else "")]


def python_dll_words(name: str, res: CallResult, process: ProcessState) -> str:
    """python311.dll missing: the extension that imports it was built for Python 3.11 (the DLL names the Python,
    as the wheel's ABI tag cp311 does); python3.dll is the stable ABI's, which every CPython ships next to its own."""
    m = re.fullmatch(r"python3(\d+)(t?)(_d)?\.dll", name.lower())
    this = ".".join((process.python or "").split(".")[:2])
    by = res.chain[-2] if len(res.chain) > 1 else (winpath.basename(res.name) if res.name else "the extension")
    if m is None:
        return (f"{name} is the stable-ABI DLL every CPython 3 ships next to python3XY.dll: this Python's folder lacks "
                "it (an embedded or trimmed copy of Python): copy it from a full install of the same Python version")
    built = f"3.{m.group(1)}{' free-threaded' if m.group(2) else ''}{' (debug)' if m.group(3) else ''}"
    if this and this != f"3.{m.group(1)}" or (this and m.group(2)):
        exe = process.launcher or process.exe
        pip = f'"{exe}" -m pip' if exe else "this Python's own pip"
        return (f"{name} is the Python {built} interpreter's own DLL: {by} was built for Python {built} and this is "
                f"Python {this}: run it with Python {built}, or install the package's build for this Python with {pip}")
    return (f"{name} is the Python {built} interpreter's own DLL, next to its python.exe: {by} is loaded where it is "
            f"not found: load it from that Python (import it there), or put that Python's folder on PATH")


def rule_extension_of_another_python(name: str, res: CallResult, world: World,
                                     process: ProcessState) -> Optional[tuple[Owner, str, str]]:
    """python3XY.dll of another Python than this one, imported by a file an installed wheel's RECORD lists: that
    wheel is the build for Python 3.XY (site-packages copied from another Python, a wheel installed with another
    Python's pip, pywin32's win32api.pyd of its cp310 wheel in a Python 3.11: it imports python310.dll, and its
    .pyd names carry no tag that would keep 3.11 from importing them). Reinstalling the same version with this
    Python's own pip puts this Python's build in its place. Returns (the wheel, the importer's path, the Python
    3.XY it was built for), else None (this Python's own DLL, the stable ABI's python3.dll, an importer no wheel
    lists)."""
    m = re.fullmatch(r"python3(\d+)(t?)(_d)?\.dll", name.lower())
    this = ".".join((process.python or "").split(".")[:2])
    if m is None or not this or this == f"3.{m.group(1)}" and not m.group(2):
        return None
    chain = res.tree.failure_chain() if res.tree is not None else []
    importer = (chain[-2].path or "") if len(chain) > 1 else ""
    o = owner_of_path(world, importer) if importer else None
    if o is None or o.kind != "wheel":
        return None
    return o, importer, f"3.{m.group(1)}{m.group(2)}"


def cuda_major(res: CallResult, world: World, process: ProcessState) -> Optional[int]:
    """The CUDA major version the process uses, from the CUDA DLL names it loads or asks for
    (cudart64_12.dll, cublas64_13.dll): for cuDNN 9, which has one name for every CUDA major."""
    names = itertools.chain((winpath.basename(n.name) for n in (res.tree.walk() if res.tree else ())),
                            (m.name for m in process.iter_loaded()))
    for n in names:
        major = packages.cuda_major_of(n)
        if major is not None:
            return major
    return None


def candidates(sit: verify.Situation) -> list[Fix]:
    """The fixes to try for the failing call of `sit`, generated from how the load searches and what the
    process is, before verification (verify.verify keeps those that work)."""
    # res: the failure (its leaf); call: the call the program made (its op, flags, origin, module); the
    # world and the process with the situation's steps applied (a next step's)
    res, call = sit.res, sit.the_call
    ready = verify.prepared(sit)
    world: World = ready.world
    process = ready.process
    leaf = leaf_node(res.tree)
    if leaf is None:
        return []
    name = winpath.basename(leaf.name)
    cause = leaf.cause
    out: list[Fix] = []
    # a file of the failure (the leaf, its importers, the wrong-machine copy the search reached) that is not the one
    # its distribution installed: reinstalling it comes first (rule_not_the_file_its_distribution_installed)
    chain = res.tree.failure_chain() if res.tree is not None else []
    involved = [n.path for n in reversed(chain) if n.path]
    involved += [c.path for c in leaf.candidates if c.result == "wrong_machine" and c.path]
    reinstalls: list[Fix] = []
    for p in dict.fromkeys(winpath.normalize(p) for p in involved):
        fix = not_installed_fix(p, world, process, res)
        if fix is not None and not any((r.package, r.version) == (fix.package, fix.version) for r in reinstalls):
            reinstalls.append(fix)
    if cause in ("not_found", "bad_machine", "not_pe"):
        tried_bad = {winpath.key(c.path) for c in leaf.candidates if c.result != "not_there"}
        by_key: dict[str, str] = {}  # (one copy per file, the world's spelling kept)
        for p in [*world.files_named(name), *wheel_copies(name, call, world, process)]:
            by_key.setdefault(winpath.key(p), p)
        copies = [p for k, p in by_key.items() if _usable(p, world, process) and k not in tried_bad]
        listed = rule_record_listed_file_looked_for(leaf, world) if cause == "not_found" else None
        if listed is not None and (owner := owner_reinstall(name, world, process, call, listed)) is not None:
            out.append(owner)  # (the file the load wanted is its distribution's, and gone: the root cause first)
        mechanisms = package_mechanisms(name, copies, call, world, process)
        # the package's own loader first (onnxruntime.preload_dlls()); a variable it reads last (CUDA_PATH:
        # it changes what every other CUDA program finds)
        out.extend(f for f in mechanisms if f.action == "package_mechanism")
        for c in copies[:2]:
            out.extend(make_searched(c, name, call, world, process))
        out.extend(f for f in mechanisms if f.action != "package_mechanism")
        # (the process's CUDA major matters only for a name several CUDA majors ship: cudnn64_9.dll)
        ambiguous = len(packages.providers(name)) > 1
        prov = packages.lookup(name, cuda_major=cuda_major(res, world, process) if ambiguous else None)
        if not copies and prov is not None and prov.kind == "pip" and prov.package:
            folder = install_folder(prov, call, process)
            path = winpath.join(folder, name)
            base = Fix("install", "install_package", name=name, package=prov.requirement or prov.package, folder=folder,
                       path=path, exe=(process.launcher or process.exe) if is_python(process, call) else "")
            if process.python_kind == "store" and process.pip_site and winpath.key(folder).startswith(
                    winpath.key(process.pip_site) + "\\"):
                base = dataclasses.replace(base, value="user_site", dest=process.pip_site)  # (its pip's own choice)
            if process.python_kind == "embeddable" and not process.pip_site:
                # (python.org's embeddable Python has no pip: another Python of its version installs into the folder
                # the wheel's files go under, which its ._pth must list)
                _, sites = package_roots(call, process)
                root = (package_roots(call, process)[0] if prov.root == "prefix" else sites[0]) if sites else ""
                base = dataclasses.replace(base, value="embeddable", dest=root)
            for step in make_searched(path, name, call, world, process):
                out.append(dataclasses.replace(base, then=(step,)))
        if cause == "not_pe":
            out.append(Fix("reinstall", "reinstall", name=name, path=leaf.path or ""))
        elif cause == "bad_machine":
            out[:0] = stale_copy(name, leaf, world, process)  # (the root cause first: the copy at fault)
            chain = res.tree.failure_chain() if res.tree is not None else []
            parent = (chain[-2].path or "") if len(chain) > 1 else ""
            # (the file of the wrong machine: the leaf's path, else the first such file its search reached)
            bad = leaf.path or next((c.path for c in leaf.candidates if c.result == "wrong_machine"), "")
            own = rule_wrong_machine_file_of_its_own_wheel(bad, parent, world, process.machine)
            if own is not None and any((r.package, r.version) == (own.dist, own.version) for r in reinstalls):
                pass  # (its size tells the same: that reinstall comes first, below)
            elif (wheel := rule_wheel_for_another_machine(bad, world, process.machine)) is not None:
                # (pip installed another machine's wheel: this Python's own pip picks this machine's build)
                o, platform = wheel
                other = leaf.facts.machines[0] if leaf.facts is not None and leaf.facts.machines else ""
                out.insert(0, Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=bad,
                                  bound=o.path, exe=reinstalling_python(process, is_python(process, res)),
                                  lacks=o.kind, machine=process.machine, other_machine=other, need=platform,
                                  python=is_python(process, res)))
            elif own is not None:  # (pip put another file there: reinstalling its distribution puts it back)
                exe = reinstalling_python(process, is_python(process, res))
                other = leaf.facts.machines[0] if leaf.facts is not None and leaf.facts.machines else ""
                out.insert(0, Fix("reinstall", "install", name=name, package=own.dist, version=own.version,
                                  path=bad, bound=own.path, exe=exe, lacks=own.kind,
                                  machine=process.machine, other_machine=other, python=is_python(process, res)))
            machines = sorted({c.machine for c in leaf.candidates if c.machine})
            other = machines[0] if machines else "x64"
            if any(s.kind == "python_bitness" for s in sit.steps):
                pass  # (a chain changes the process's machine once: another change would only undo it)
            elif is_python(process) and process.machine == "x86" and other == "x64":
                out.append(Fix("python_bitness", "use_64bit_python", name=name, machine=process.machine, other_machine=other))
            else:
                out.append(Fix("python_bitness", "use_build", name=name, machine=process.machine, other_machine=other,
                               python=is_python(process, res)))
        elif not copies and cause == "not_found" and listed is None and \
                (owner := owner_reinstall(name, world, process, call)) is not None:
            out.append(owner)  # (a distribution's RECORD lists it, and it is not there: its install is damaged)
        elif not copies and not (prov is not None and prov.kind == "pip"):
            if prov is not None and prov.kind == "python" and (
                    another := rule_extension_of_another_python(name, res, world, process)) is not None:
                # (the wheel built for another Python: its build for this one, by this Python's own pip, first)
                o, importer, built = another
                out.append(Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=importer,
                               bound=o.path, exe=reinstalling_python(process, is_python(process, res)), lacks=o.kind,
                               need=built, parent=winpath.basename(importer), python=is_python(process, res)))
            advice = provider_advice(name, prov, process, call, world)
            if advice is not None and advice.action == "find_package" and listed is not None:
                advice = None  # (its RECORD named the package that ships it: the reinstall above; no search for one)
            cuda_path = next((v for k, v in process.env.items() if k.upper() == "CUDA_PATH"), "")
            if advice is not None and prov is not None and prov.kind == "archive" and cuda_path:
                # NVIDIA's cuDNN archive is unpacked into the CUDA toolkit's folders (its bin into %CUDA_PATH%\bin)
                path = winpath.join(cuda_path, "bin", name)
                for step in make_searched(path, name, call, world, process):
                    out.append(dataclasses.replace(advice, path=path, folder=winpath.dirname(path), then=(step,)))
            elif advice is not None and prov is not None and prov.kind == "archive" and _top_folder(call):
                # no toolkit folder: the archive's DLL copied next to the module the call loads
                dest = _top_folder(call)
                out.append(dataclasses.replace(
                    advice, path=winpath.join(dest, name), dest=dest,
                    instruction=f"Get {prov.component}{' ' + _major(name) if _major(name) else ''} for your CUDA version "
                                f"from NVIDIA's archive and copy {name} into {dest}"))
            elif advice is not None:
                out.append(advice)
    elif cause in ("missing_export", "missing_ordinal"):
        what = leaf.detail
        bound = leaf.path or name
        good = [p for p in world.files_named(name) if _usable(p, world, process) and not (leaf.path and winpath.same(p, leaf.path))
                and _provides(world, p, leaf)]
        if leaf.how_kind in ("already_loaded", "loaded_same_file"):
            for c in good[:1]:
                out.append(Fix("shadowing", "preload", name=name, bound=bound, loaded_by=leaf.loaded_by, lacks=what,
                               path=c, folder=winpath.dirname(c), python=is_python(process)))
            if not good:
                out.append(Fix("shadowing", "update_loaded", name=name, bound=bound, loaded_by=leaf.loaded_by, lacks=what))
        else:
            out.extend(stale_copy(name, leaf, world, process))  # (the root cause first: the copy at fault)
            for c in good[:1]:
                out.extend(make_searched(c, name, call, world, process))
            prov = packages.lookup(name)
            since = prov.export_since(leaf.facts.export if leaf.facts else None) if prov is not None else None
            in_system32 = bool(leaf.path) and winpath.same(winpath.dirname(leaf.path or ""), world.system.system32)
            if not good and prov is not None and prov.kind == "msvc_runtime" and in_system32:
                # the VC++ runtime's export: the redistributable that first has it (data/packages.json `exports`),
                # the latest when the data does not date it
                facts = world.file(leaf.path) if leaf.path else None
                ver = facts.pe.file_version if facts is not None and facts.pe is not None else ""
                out.append(Fix("vc_redist", "vc_redist", name=name, path=bound, version=ver or "", need=since or "",
                               lacks=what, arch=arch_of(process)))
            elif not good:
                out.append(Fix("install", "install_matching", name=name, bound=bound,
                               parent=res.chain[-2] if len(res.chain) > 1 else "the caller"))
    elif cause == "init_failed":
        if leaf.facts is not None and leaf.facts.cpu_lacks:  # the cause is known: no list of common causes
            out.append(Fix("init", "cpu_build", name=name, path=leaf.path or "", lacks=leaf.facts.cpu_lacks))
        else:
            out.extend(msvc_runtime_fixes(res, world, process))
            out.append(Fix("init", "check_init", name=name))
    elif cause == "apiset_no_host":
        out.append(Fix("install", "update_windows", name=name))
    elif cause == "invalid_parameter":
        if leaf.facts is not None and leaf.facts.reason is not None:
            full = ""
            flags: Optional[int] = None
            if leaf.facts.reason != "altered_with_search_flags":
                here = [winpath.join(process.cwd, res.name), winpath.join(process.app_dir, res.name)]
                full = next((p for p in [*world.files_named(winpath.basename(res.name)), *here]
                             if _usable(p, world, process)), "")
            if leaf.facts.reason == "dll_load_dir_needs_full_path" and not res.flags & SEARCH_ELSEWHERE:
                # DLL_LOAD_DIR alone searches only the DLL's own folder: its imports of Windows' DLLs (and the
                # rest) are then not found; with DEFAULT_DIRS they are (found for real under Wine:
                # tests/test_real_fixes.py, dll_load_dir_with_bare_name)
                flags = res.flags | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
            out.append(Fix("call", "flags", name=name, reason=leaf.facts.reason, path=full, flags=flags,
                           python=is_python(process, res)))
    elif cause == "access_denied":
        out.append(Fix("permissions", "permissions", name=name, path=leaf.path or ""))
    if reinstalls:  # (the root cause first; another fix naming the same distribution's reinstall dropped)
        named = {(r.package, r.version) for r in reinstalls}
        out = [*reinstalls, *(f for f in out if not (f.action == "install" and (f.package, f.version) in named))]
    return out


def _provides(world: World, path: str, leaf: Node) -> bool:
    """Whether the copy at path has what the leaf's copy lacks (the export or ordinal)."""
    f = world.file(path)
    if f is None or f.pe is None or leaf.facts is None:
        return True
    if leaf.facts.export is not None:
        return leaf.facts.export in f.pe.exports or leaf.facts.export in f.pe.forwarders
    if leaf.facts.ordinal is not None:
        return leaf.facts.ordinal in f.pe.export_ordinals
    return True


def fixes_for(res: CallResult, world: World, process: ProcessState, snapshot: bool = True) -> list[Fix]:
    """The fixes for a failed call, each re-run through the model (diagnosis/verify.py): those that make
    the call load, ranked, then the advice the model cannot apply. `process`: the state of the call
    (copied first unless `snapshot` is False: a copy already, which re-runs copy again)."""
    if leaf_node(res.tree) is None:
        return []
    sit = verify.Situation(world=world, process=verify.snapshot(process) if snapshot else process, res=res)
    names = (res.leaf.name if res.leaf is not None else "", *(m.name for m in res.also_missing))
    return verify.verify(sit, candidates(sit), candidates, tuple(n for n in names if n))


def msvc_runtime_fixes(res: CallResult, world: World, process: ProcessState) -> list[Fix]:
    """The MSVC-runtime check for 1114: the msvcp140.dll the call bound to, with its file version,
    against the toolset the failing DLL was linked with (its PE linker version, 14.x; 14.40 when
    unknown, what current PyTorch wheels need: pytorch#169429). Only msvcp140.dll: vcruntime140.dll's
    versions (python.org ships its own) are no evidence. When the copy bound is a package's own,
    loaded first, the fix is to load the failing package first (import_first), with the
    redistributable too when System32's copy is also old."""
    out: list[Fix] = []
    need = MSVC_MIN
    leaf = leaf_node(res.tree)
    lf = world.file(leaf.path) if leaf is not None and leaf.path else None
    lv = version_tuple(lf.pe.linker_version) if lf and lf.pe else ()
    if len(lv) == 2 and lv[0] == 14:
        need = lv
    rt = "msvcp140.dll"
    path = None
    for n in (res.tree.walk() if res.tree else ()):
        if winpath.basename(n.name).lower() == rt and n.path:
            path = n.path
            break
    if path is None:
        m = process.find_loaded_by_name(rt)
        path = m.path if m else None
    if path is None:
        return out
    facts = world.file(path)
    ver = facts.pe.file_version if facts and facts.pe else None
    if not ver or version_tuple(ver)[:2] >= need:
        return out
    arch = "x86" if process.machine == "x86" else "x64"
    need_s = f"{need[0]}.{need[1]:02d}"
    leaf_name = winpath.basename(leaf.name) if leaf is not None else ""
    system = winpath.join(world.system.system32, rt)
    sys_facts = world.file(system)
    sys_ver = sys_facts.pe.file_version if sys_facts and sys_facts.pe else None
    redist = Fix("vc_redist", "vc_redist", name=rt, path=path, version=ver, need=need_s,
                 built_with=need != MSVC_MIN and leaf is not None, leaf=leaf_name, arch=arch)
    if winpath.same(path, system):
        return [redist]
    first = Fix("import_order", "import_first", name=rt, bound=path, leaf=leaf_name,
                module=res.origin_package or (leaf_name.rsplit(".", 1)[0]), python=is_python(process, res))
    if sys_ver and version_tuple(sys_ver)[:2] >= need:
        return [first]
    return [dataclasses.replace(redist, then=(first,))]


def find_close_names(res: CallResult, world: World, process: ProcessState) -> list[Elsewhere]:
    """Other versions of a missing leaf (cublas64_11.dll when cublas64_12.dll is wanted): they
    never satisfy the request, whatever the PATH order."""
    leaf = leaf_node(res.tree)
    if leaf is None or leaf.cause != "not_found":
        return []
    out = []
    for path in world.close_files(winpath.basename(leaf.name)):
        # (said as found whatever its machine, and never as not searched: another file name)
        e = where_is(path, res, world, process)
        rule = rule_close_name_in_a_searched_folder(path, leaf)
        if rule is not None:
            e = dataclasses.replace(e, relation="searched", rule=rule, path_entry=None)
        out.append(dataclasses.replace(e, result="found", relation="on_path")
                   if e.relation == "on_path_not_searched" else dataclasses.replace(e, result="found"))
    return out


def rule_close_name_in_a_searched_folder(path: str, leaf: Node) -> Optional[str]:
    """The rule of the folder the leaf's search tried that holds `path`, another version's file (python311.dll
    beside python.exe, in the application folder, when python310.dll is wanted: the folder was searched, the name
    differs), else None. Such a file is never "in no folder the loader searches"."""
    folder = winpath.dirname(path)
    return next((s.rule or "" for s in leaf.search if winpath.same(s.folder, folder)), None)


def explain(res: CallResult, world: World, process: ProcessState) -> CallResult:
    """Fill found_elsewhere, close_names and fixes of a failed load (in place) and return it."""
    if res.error and res.tree is not None:
        torch_origin(res, process)
        for n in res.tree.failure_chain():  # (who owns each file of the chain, where the environment says)
            o = owner_of_path(world, n.path) if n.path and not n.owner else None
            if o is not None:
                n.owner = f"{o.dist} {o.version}".strip() if o.kind == "wheel" else f"conda: {o.dist} {o.version}".strip()
        res.found_elsewhere = find_elsewhere(res, world, process)
        res.close_names = find_close_names(res, world, process)
        snap = verify.snapshot(process)
        res.also_missing = verify.also_missing(verify.Situation(world=world, process=snap, res=res))
        res.fixes = fixes_for(res, world, snap, snapshot=False)
    return res
