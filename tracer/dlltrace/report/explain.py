"""From a simulated (or replayed) call to a verdict: where the leaf actually is, and the fixes.

Pure logic over a CallResult, the world and the process state; used by `simulate` and
by `report`.
"""

from __future__ import annotations

import re
import dataclasses
from typing import Literal, Optional

from dlltrace import winpath
from dlltrace.model import TORCH_ORIGINS, CallResult, Elsewhere, Fix, Node
from dlltrace.worlds.world import ProcessState, World

MSVC_MIN = (14, 40)  # what current PyTorch wheels need of msvcp140.dll (pytorch#169429)
VC_REDIST = "https://aka.ms/vs/17/release/vc_redist.{arch}.exe"

# name pattern -> what provides the file
_PROVIDERS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140(_1)?|concrt140|vcomp140)\.dll$"),
     "Install the latest Microsoft Visual C++ Redistributable ({arch}): " + VC_REDIST),
    (re.compile(r"^libomp140\.x86_64\.dll$"),
     "Install Visual Studio's \"MSVC v143 build tools\" component (it puts libomp140.x86_64.dll in System32), "
     "or a torch build that does not need it"),
    (re.compile(r"^cublas(lt)?64_(\d+)\.dll$"), "pip install nvidia-cublas-cu{cuda}"),
    (re.compile(r"^cudart64_(\d+)\.dll$"), "pip install nvidia-cuda-runtime-cu{cuda}"),
    (re.compile(r"^cudnn(_[a-z_]+)?64_9\.dll$"), "pip install nvidia-cudnn-cu12 (it ships cuDNN 9)"),
    (re.compile(r"^cudnn(_[a-z_]+)?64_(\d+)\.dll$"),
     "Install cuDNN {cudnn} for your CUDA version (NVIDIA's cuDNN archive) and add its bin folder with os.add_dll_directory, "
     "or install a torch build that bundles cuDNN"),
    (re.compile(r"^cufft(w)?64_(\d+)\.dll$"), "pip install nvidia-cufft-cu12"),
    (re.compile(r"^curand64_(\d+)\.dll$"), "pip install nvidia-curand-cu12"),
    (re.compile(r"^cusparse64_(\d+)\.dll$"), "pip install nvidia-cusparse-cu12"),
    (re.compile(r"^cusolver(mg)?64_(\d+)\.dll$"), "pip install nvidia-cusolver-cu12"),
    (re.compile(r"^nvrtc64_(\d+)"), "pip install nvidia-cuda-nvrtc-cu12"),
    (re.compile(r"^nvjitlink_?\d*"), "pip install nvidia-nvjitlink-cu12"),
    (re.compile(r"^(mkl_[a-z0-9_]+)\.(\d+\.)?dll$"), "pip install mkl (it puts the MKL DLLs in <prefix>\\Library\\bin)"),
    (re.compile(r"^libiomp5md\.dll$"), "pip install intel-openmp"),
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


def _before(res: CallResult) -> str:
    """"before `import torch`": when a fix must run, from what made the call (CallResult.origin_kind)."""
    if res.origin_kind in TORCH_ORIGINS:
        return "before `import torch`"
    if res.origin_kind == "python_import" and res.origin_module:
        return f"before `import {res.origin_module}`"
    if res.origin_kind == "ctypes":
        return f"before `{res.origin}`"
    return "before the load"


def provider_fix(name: str, process: ProcessState) -> Optional[Fix]:
    n = name.lower()
    arch = "x86" if process.machine == "x86" else ("arm64" if process.machine == "arm64" else "x64")
    for pat, text in _PROVIDERS:
        m = pat.match(n)
        if m:
            digits = re.findall(r"\d+", n)
            cuda = digits[-1] if digits and digits[-1] in ("11", "12", "13") else "12"
            cudnn = digits[-1] if digits else ""
            return Fix(text.format(arch=arch, cuda=cuda, cudnn=cudnn), "install")
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
    if cause == "not_found" and res.op == "start":
        # the program's own imports: no os.add_dll_directory (no code runs before them), but the
        # standard search order, which ends with PATH
        exe = winpath.basename(res.name)
        for c in good[:2]:
            fixes.append(Fix(f"Put {winpath.dirname(c.path)} on PATH, or copy {name} next to {exe} "
                             f"({winpath.dirname(res.name)})", "path"))
        p = provider_fix(name, process)
        if p:
            fixes.append(p)
        if not fixes:
            fixes.append(Fix(f"Find the package that ships {name} and install it, then put its folder on PATH "
                             f"or copy {name} next to {exe}", "install"))
    elif cause == "not_found":
        for c in good[:2]:
            folder = winpath.dirname(c.path)
            b = _before(res)
            fixes.append(Fix(f'{b[0].upper() + b[1:]}:  os.add_dll_directory(r"{folder}")', "add_dll_directory"))
        if good and not uses_search_flags(res):
            fixes.append(Fix(f"Or put {winpath.dirname(good[0].path)} on PATH (this load searches PATH)", "path"))
        p = provider_fix(name, process)
        if p:
            fixes.append(p)
        if not fixes:
            fixes.append(Fix(f"Find the package that ships {name} and install it, then add its folder with os.add_dll_directory", "install"))
    elif cause == "bad_machine":
        machines = sorted({c.machine for c in leaf.candidates if c.machine})
        for c in good[:1]:
            fixes.append(Fix(f'A {process.machine} copy is at {c.path}: {_before(res)}  os.add_dll_directory(r"{winpath.dirname(c.path)}")', "add_dll_directory"))
        other = machines[0] if machines else "x64"
        if process.machine == "x86" and other == "x64":
            fixes.append(Fix("Use a 64-bit Python (this process is 32-bit, the DLL is 64-bit)", "python_bitness"))
        else:
            article = "an" if other[0] in "ax" else "a"
            fixes.append(Fix(f"Use the {process.machine} build of {name}, or {article} {other} Python", "python_bitness"))
    elif cause == "not_pe":
        fixes.append(Fix(f"{leaf.path} is not a valid DLL (truncated or corrupt download?): reinstall the package that ships it", "reinstall"))
    elif cause in ("missing_export", "missing_ordinal"):
        what = leaf.detail
        bound = leaf.path or name
        if leaf.how_kind in ("already_loaded", "loaded_same_file") or leaf.candidates and leaf.candidates[0].result == "already_loaded":
            by = f" ({leaf.loaded_by})" if leaf.loaded_by else ""
            for c in good[:1]:
                fixes.append(Fix(f"{name} was already loaded from {bound}{by}, which lacks {what}; the matching copy is {c.path}: "
                                 f"load it first (before whatever loads {bound}), or update or remove the old copy", "shadowing"))
            if not good:
                fixes.append(Fix(f"{name} was already loaded from {bound}{by}, which lacks {what}: find what loads that copy "
                                 "first and update it", "shadowing"))
        else:
            for c in good[:1]:
                fixes.append(Fix(f'The copy at {bound} lacks {what}; a matching copy is at {c.path}: {_before(res)}  os.add_dll_directory(r"{winpath.dirname(c.path)}") '
                                 f"and make sure it is searched before {winpath.dirname(bound)}", "add_dll_directory"))
            if not good:
                fixes.append(Fix(f"{bound} is a different version from the one {res.chain[-2] if len(res.chain) > 1 else 'the caller'} was built against: install matching versions", "install"))
    elif cause == "init_failed":
        fixes.extend(msvc_runtime_fixes(res, world, process))
        fixes.append(Fix(f"Every dependency of {name} resolved; its initialisation (DllMain) failed. Common causes: an old MSVC runtime "
                         "loaded first, a CPU without AVX for builds that need it, or a missing GPU driver", "init"))
    elif cause == "apiset_no_host":
        fixes.append(Fix(f"{name} has no host on this Windows: update Windows (or install the Universal C Runtime, KB2999226, for api-ms-win-crt-*)", "install"))
    elif cause == "invalid_parameter":
        if leaf.reason == "altered_with_search_flags":
            fixes.append(Fix("Drop LOAD_WITH_ALTERED_SEARCH_PATH (0x8) when passing LOAD_LIBRARY_SEARCH_* flags", "call"))
        elif leaf.reason == "dll_load_dir_needs_full_path":
            fixes.append(Fix("Pass a fully qualified path (os.path.abspath) when using LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR", "call"))
        elif leaf.reason == "altered_with_default_dirs_needs_full_path":
            fixes.append(Fix("Pass a fully qualified path (os.path.abspath): with SetDefaultDllDirectories in effect, "
                             "LOAD_WITH_ALTERED_SEARCH_PATH (0x8) searches the DLL's own folder "
                             "(LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)", "call"))
    elif cause == "access_denied":
        fixes.append(Fix(f"Access to {leaf.path} was denied: check its permissions, or whether antivirus software blocks it", "permissions"))
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
            arch = "x86" if process.machine == "x86" else "x64"
            built = (f" ({winpath.basename(leaf.name)} was built with {need[0]}.{need[1]:02d})"
                     if need != MSVC_MIN and leaf is not None else "")
            out.append(Fix(f"{rt} in use is {path} version {ver}, older than {need[0]}.{need[1]:02d}{built}: install the latest "
                           f"Visual C++ Redistributable ({arch}, {VC_REDIST.format(arch=arch)}), or find the package that "
                           f"ships that old copy and load torch before it", "vc_redist"))
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
