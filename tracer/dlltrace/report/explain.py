"""From a simulated (or replayed) call to a verdict: where the leaf actually is, and the fixes.

Pure logic over a CallResult, the world and the process state; used by `simulate` and
by `report`.
"""

from __future__ import annotations

import re
import dataclasses
from typing import Literal, Optional

from dlltrace import winpath
from dlltrace.model import TORCH_ORIGINS, VC_REDIST, CallResult, Elsewhere, Fix, Node
from dlltrace.worlds.world import ProcessState, World

MSVC_MIN = (14, 40)  # what current PyTorch wheels need of msvcp140.dll (pytorch#169429)

# name pattern -> the pip package that provides the file (None: not a pip package), and how to install it
_PROVIDERS: list[tuple[re.Pattern, Optional[str], str]] = [
    (re.compile(r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140(_1)?|concrt140|vcomp140)\.dll$"), None,
     "Install the latest Microsoft Visual C++ Redistributable ({arch}): " + VC_REDIST),
    (re.compile(r"^libomp140\.x86_64\.dll$"), None,
     "Install Visual Studio's \"MSVC v143 build tools\" component (it puts libomp140.x86_64.dll in System32), "
     "or a torch build that does not need it"),
    (re.compile(r"^cublas(lt)?64_(\d+)\.dll$"), "nvidia-cublas-cu{cuda}", "pip install {package}"),
    (re.compile(r"^cudart64_(\d+)\.dll$"), "nvidia-cuda-runtime-cu{cuda}", "pip install {package}"),
    (re.compile(r"^cudnn(_[a-z_]+)?64_9\.dll$"), "nvidia-cudnn-cu12", "pip install {package} (it ships cuDNN 9)"),
    (re.compile(r"^cudnn(_[a-z_]+)?64_(\d+)\.dll$"), None,
     "Install cuDNN {cudnn} for your CUDA version (NVIDIA's cuDNN archive) and add its bin folder with os.add_dll_directory, "
     "or install a torch build that bundles cuDNN"),
    (re.compile(r"^cufft(w)?64_(\d+)\.dll$"), "nvidia-cufft-cu12", "pip install {package}"),
    (re.compile(r"^curand64_(\d+)\.dll$"), "nvidia-curand-cu12", "pip install {package}"),
    (re.compile(r"^cusparse64_(\d+)\.dll$"), "nvidia-cusparse-cu12", "pip install {package}"),
    (re.compile(r"^cusolver(mg)?64_(\d+)\.dll$"), "nvidia-cusolver-cu12", "pip install {package}"),
    (re.compile(r"^nvrtc64_(\d+)"), "nvidia-cuda-nvrtc-cu12", "pip install {package}"),
    (re.compile(r"^nvjitlink_?\d*"), "nvidia-nvjitlink-cu12", "pip install {package}"),
    (re.compile(r"^(mkl_[a-z0-9_]+)\.(\d+\.)?dll$"), "mkl", "pip install {package} (it puts the MKL DLLs in <prefix>\\Library\\bin)"),
    (re.compile(r"^libiomp5md\.dll$"), "intel-openmp", "pip install {package}"),
]


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
        out.append(where_is(path, res, world, process, leaf))
    out.sort(key=lambda c: (c.result != "found", c.path.lower()))
    return out


def _before(res: CallResult) -> Optional[str]:
    """The code a fix must run before ("import torch"), from what made the call (CallResult.origin_kind);
    None: before the load itself."""
    if res.origin_kind in TORCH_ORIGINS:
        return "import torch"
    if res.origin_kind == "python_import" and res.origin_module:
        return f"import {res.origin_module}"
    if res.origin_kind == "ctypes":
        return res.origin
    return None


def provider_fix(name: str, process: ProcessState) -> Optional[Fix]:
    n = name.lower()
    arch = "x86" if process.machine == "x86" else ("arm64" if process.machine == "arm64" else "x64")
    for pat, package, text in _PROVIDERS:
        m = pat.match(n)
        if m:
            digits = re.findall(r"\d+", n)
            cuda = digits[-1] if digits and digits[-1] in ("11", "12", "13") else "12"
            cudnn = digits[-1] if digits else ""
            pkg = package.format(cuda=cuda) if package else None
            return Fix("install", "install", name=name, package=pkg,
                       instruction=text.format(arch=arch, cuda=cuda, cudnn=cudnn, package=pkg))
    return None


def fixes_for(res: CallResult, world: World, process: ProcessState) -> list[Fix]:
    leaf = leaf_node(res.tree)
    if leaf is None:
        return []
    name = winpath.basename(leaf.name)
    fixes: list[Fix] = []
    elsewhere = res.found_elsewhere
    good = [c for c in elsewhere if c.result == "found"]
    cause = leaf.cause
    before = _before(res)
    if cause == "not_found" and res.op == "start":
        # the program's own imports: no os.add_dll_directory (no code runs before them), but the
        # standard search order, which ends with PATH
        for c in good[:2]:
            fixes.append(Fix("path", "path_or_copy", name=name, folder=winpath.dirname(c.path), path=c.path, exe=res.name))
        p = provider_fix(name, process)
        if p:
            fixes.append(p)
        if not fixes:
            fixes.append(Fix("install", "find_package", name=name, exe=res.name))
    elif cause == "not_found":
        for c in good[:2]:
            fixes.append(Fix("add_dll_directory", "add_dll_directory", name=name, folder=winpath.dirname(c.path),
                             path=c.path, before=before))
        if good and not uses_search_flags(res):
            fixes.append(Fix("path", "path_prepend", name=name, folder=winpath.dirname(good[0].path), path=good[0].path))
        p = provider_fix(name, process)
        if p:
            fixes.append(p)
        if not fixes:
            fixes.append(Fix("install", "find_package", name=name))
    elif cause == "bad_machine":
        machines = sorted({c.machine for c in leaf.candidates if c.machine})
        for c in good[:1]:
            fixes.append(Fix("add_dll_directory", "add_dll_directory", name=name, folder=winpath.dirname(c.path),
                             path=c.path, before=before, machine=process.machine))
        other = machines[0] if machines else "x64"
        if process.machine == "x86" and other == "x64":
            fixes.append(Fix("python_bitness", "use_64bit_python", name=name, machine=process.machine, other_machine=other))
        else:
            fixes.append(Fix("python_bitness", "use_build", name=name, machine=process.machine, other_machine=other))
    elif cause == "not_pe":
        fixes.append(Fix("reinstall", "reinstall", name=name, path=leaf.path or ""))
    elif cause in ("missing_export", "missing_ordinal"):
        what = leaf.detail
        bound = leaf.path or name
        if leaf.how_kind in ("already_loaded", "loaded_same_file") or leaf.candidates and leaf.candidates[0].result == "already_loaded":
            for c in good[:1]:
                fixes.append(Fix("shadowing", "preload", name=name, bound=bound, loaded_by=leaf.loaded_by, lacks=what,
                                 path=c.path, folder=winpath.dirname(c.path)))
            if not good:
                fixes.append(Fix("shadowing", "update_loaded", name=name, bound=bound, loaded_by=leaf.loaded_by, lacks=what))
        else:
            for c in good[:1]:
                fixes.append(Fix("add_dll_directory", "add_dll_directory", name=name, folder=winpath.dirname(c.path),
                                 path=c.path, before=before, bound=bound, lacks=what))
            if not good:
                fixes.append(Fix("install", "install_matching", name=name, bound=bound,
                                 parent=res.chain[-2] if len(res.chain) > 1 else "the caller"))
    elif cause == "init_failed":
        fixes.extend(msvc_runtime_fixes(res, world, process))
        fixes.append(Fix("init", "check_init", name=name))
    elif cause == "apiset_no_host":
        fixes.append(Fix("install", "update_windows", name=name))
    elif cause == "invalid_parameter":
        if leaf.facts is not None and leaf.facts.reason is not None:
            fixes.append(Fix("call", "flags", name=name, reason=leaf.facts.reason))
    elif cause == "access_denied":
        fixes.append(Fix("permissions", "permissions", name=name, path=leaf.path or ""))
    return fixes


def msvc_runtime_fixes(res: CallResult, world: World, process: ProcessState) -> list[Fix]:
    """The MSVC-runtime check for 1114: the msvcp140.dll / vcruntime140.dll the call bound to,
    with their file versions, against the toolset the failing DLL was linked with (its PE
    linker version, 14.x; 14.40 when unknown, what current PyTorch wheels need)."""
    out = []
    need = MSVC_MIN
    leaf = leaf_node(res.tree)
    lf = world.file(leaf.path) if leaf is not None and leaf.path else None
    lv = version_tuple(lf.pe.linker_version) if lf and lf.pe else ()
    if len(lv) == 2 and lv[0] == 14:
        need = lv
    for rt in ("msvcp140.dll", "vcruntime140.dll"):
        path = None
        for n in (res.tree.walk() if res.tree else ()):
            if winpath.basename(n.name).lower() == rt and n.path:
                path = n.path
                break
        if path is None:
            m = process.find_loaded_by_name(rt)
            path = m.path if m else None
        if path is None:
            continue
        facts = world.file(path)
        ver = facts.pe.file_version if facts and facts.pe else None
        if ver and version_tuple(ver)[:2] < need:
            out.append(Fix("vc_redist", "vc_redist", name=rt, path=path, version=ver, need=f"{need[0]}.{need[1]:02d}",
                           built_with=need != MSVC_MIN and leaf is not None,
                           leaf=winpath.basename(leaf.name) if leaf is not None else "",
                           arch="x86" if process.machine == "x86" else "x64"))
    return out


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
        out.append(dataclasses.replace(e, result="found", relation="on_path")
                   if e.relation == "on_path_not_searched" else dataclasses.replace(e, result="found"))
    return out


def explain(res: CallResult, world: World, process: ProcessState) -> CallResult:
    """Fill found_elsewhere, close_names and fixes of a failed load (in place) and return it."""
    if res.error and res.tree is not None:
        res.found_elsewhere = find_elsewhere(res, world, process)
        res.close_names = find_close_names(res, world, process)
        res.fixes = fixes_for(res, world, process)
    return res
