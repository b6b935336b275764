"""Typed facts and results shared by the simulator, the worlds and the reports."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Mapping, Optional, Union, get_args

from dlltrace import winpath
from dlltrace.machines import MACHINE_NAMES  # noqa: F401  (a PE header's Machine field -> its name)

# dataclass(slots=True) where Python has it (3.10): a big trace's replay keeps thousands of these
# (bench/report_memory.py); on 3.9 they are plain dataclasses, the same but for their size
SLOTS: dict[str, bool] = {"slots": True} if sys.version_info >= (3, 10) else {}

# --- LoadLibraryExW flags (LOADER.md §2, §3) -------------------------------------------
DONT_RESOLVE_DLL_REFERENCES = 0x1
LOAD_LIBRARY_AS_DATAFILE = 0x2
LOAD_WITH_ALTERED_SEARCH_PATH = 0x8
LOAD_IGNORE_CODE_AUTHZ_LEVEL = 0x10
LOAD_LIBRARY_AS_IMAGE_RESOURCE = 0x20
LOAD_LIBRARY_AS_DATAFILE_EXCLUSIVE = 0x40
LOAD_LIBRARY_REQUIRE_SIGNED_TARGET = 0x80
LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR = 0x100
LOAD_LIBRARY_SEARCH_APPLICATION_DIR = 0x200
LOAD_LIBRARY_SEARCH_USER_DIRS = 0x400
LOAD_LIBRARY_SEARCH_SYSTEM32 = 0x800
LOAD_LIBRARY_SEARCH_DEFAULT_DIRS = 0x1000
LOAD_LIBRARY_SEARCH_SAFE_CURRENT_DIRS = 0x2000
LOAD_LIBRARY_SEARCH_SYSTEM32_NO_FORWARDER = 0x4000
LOAD_LIBRARY_SEARCH_MASK = 0x1F00  # the LOAD_LIBRARY_SEARCH_* flags this model knows
# IMAGE_COR20_HEADER.Flags (corhdr.h): a .NET assembly's
COMIMAGE_FLAGS_ILONLY = 0x1
COMIMAGE_FLAGS_32BITREQUIRED = 0x2

FLAG_NAMES = {
    DONT_RESOLVE_DLL_REFERENCES: "DONT_RESOLVE_DLL_REFERENCES",
    LOAD_LIBRARY_AS_DATAFILE: "AS_DATAFILE",
    LOAD_WITH_ALTERED_SEARCH_PATH: "ALTERED_SEARCH_PATH",
    LOAD_IGNORE_CODE_AUTHZ_LEVEL: "IGNORE_CODE_AUTHZ_LEVEL",
    LOAD_LIBRARY_AS_IMAGE_RESOURCE: "AS_IMAGE_RESOURCE",
    LOAD_LIBRARY_AS_DATAFILE_EXCLUSIVE: "AS_DATAFILE_EXCLUSIVE",
    LOAD_LIBRARY_REQUIRE_SIGNED_TARGET: "REQUIRE_SIGNED_TARGET",
    LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR: "DLL_LOAD_DIR",
    LOAD_LIBRARY_SEARCH_APPLICATION_DIR: "APPLICATION_DIR",
    LOAD_LIBRARY_SEARCH_USER_DIRS: "USER_DIRS",
    LOAD_LIBRARY_SEARCH_SYSTEM32: "SYSTEM32",
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS: "DEFAULT_DIRS",
    LOAD_LIBRARY_SEARCH_SAFE_CURRENT_DIRS: "SAFE_CURRENT_DIRS",
    LOAD_LIBRARY_SEARCH_SYSTEM32_NO_FORWARDER: "SYSTEM32_NO_FORWARDER",
}
KNOWN_FLAGS = sum(FLAG_NAMES)


def flags_text(flags: int) -> str:
    """`0x1100` -> `DLL_LOAD_DIR | DEFAULT_DIRS`; 0 -> `none (standard order)`."""
    if not flags:
        return "none (standard order)"
    names = [n for bit, n in sorted(FLAG_NAMES.items()) if flags & bit]
    rest = flags & ~KNOWN_FLAGS
    if rest:
        names.append(hex(rest))
    return " | ".join(names)


# --- calls (docs/scenarios.md) -----------------------------------------------------------------
LoadOp = Literal["LoadLibraryExW", "LoadLibraryExA", "LoadLibraryW", "LoadLibraryA"]
StateOp = Literal["AddDllDirectory", "RemoveDllDirectory", "SetDllDirectory", "SetDefaultDllDirectories", "FreeLibrary"]
PythonOp = Literal["python_import", "ctypes_cdll", "os_add_dll_directory", "torch_load_dll_libraries"]
# calls beyond those: a Windows call, a delay-load import's first call (Simulator.do), and Python's
# ctypes.util.find_library (emulate/python.py); their results carry the op as it is
WindowsExtraOp = Literal["SetEnvironmentVariable", "delay_load"]
PythonExtraOp = Literal["ctypes_find_library"]
CallOp = Union[LoadOp, StateOp, PythonOp, WindowsExtraOp, PythonExtraOp]  # a scenario's call (engine.Call.op)
# a result's op (CallResult.op): a load, a state change (os_add_dll_directory: Python's), or "start",
# a program's static imports at process start (diagnosis/replay.py replay_start), or an extra call's
ResultOp = Union[LoadOp, StateOp, Literal["os_add_dll_directory", "start", "SetEnvironmentVariable", "ctypes_find_library"]]
LOAD_OPS: tuple[LoadOp, ...] = get_args(LoadOp)
STATE_OPS: tuple[StateOp, ...] = get_args(StateOp)
PYTHON_OPS: tuple[PythonOp, ...] = get_args(PythonOp)
WINDOWS_EXTRA_OPS: tuple[WindowsExtraOp, ...] = get_args(WindowsExtraOp)
PYTHON_EXTRA_OPS: tuple[PythonExtraOp, ...] = get_args(PythonExtraOp)
TREE_OPS: tuple[ResultOp, ...] = (*LOAD_OPS, "start")  # the results that resolve a module tree


def load_op(api: str) -> LoadOp:
    """A traced load's api as the op it is replayed as: LdrLoadDll (and anything else) as LoadLibraryExW."""
    for op in LOAD_OPS:
        if api == op:
            return op
    return "LoadLibraryExW"


# What made a top-level call (CallResult.origin_kind; CallResult.origin is its words):
#   ""                    the call itself (a scenario's LoadLibrary, a traced load with no Python context)
#   python_import         `import origin_module` (CPython loading an extension module)
#   ctypes                ctypes.CDLL
#   torch, torch_preload, torch_retry   torch's _load_dll_libraries (its loads, its preloads of the
#                         VC++ runtime, its retries with LoadLibraryW): inside `import torch`
#   os_add_dll_directory  a load made inside os.add_dll_directory (a trace's context)
#   start                 the program's static imports at process start (diagnosis/replay.py replay_start)
#   runtime               a load a DLL made at run time (origin_module: that DLL's base name), e.g.
#                         ctranslate2.dll's LoadLibraryA("cublas64_12.dll") at the first GPU matmul
OriginKind = Literal["", "python_import", "ctypes", "torch", "torch_preload", "torch_retry", "os_add_dll_directory",
                     "start", "runtime", "python_code"]
# python_code: made by native code the program's own code called after its imports had finished
# (trace/pycontext.py; origin_module: the outermost import that had), not in an import nor a ctypes call
TORCH_ORIGINS: tuple[OriginKind, ...] = ("torch", "torch_preload", "torch_retry")
PYTHON_ORIGINS: tuple[OriginKind, ...] = ("python_import", "ctypes", *TORCH_ORIGINS, "os_add_dll_directory")


# The loader's behaviour profile (SystemInfo.profile, docs/wine-profile.md).
Profile = Literal["windows", "wine"]


# --- Win32 errors (LOADER.md §5) ----------------------------------------------------------
ERROR_SUCCESS = 0
ERROR_FILE_NOT_FOUND = 2
ERROR_PATH_NOT_FOUND = 3
ERROR_ACCESS_DENIED = 5
ERROR_INVALID_PARAMETER = 87
ERROR_INTERNAL_ERROR = 1359  # CreateProcess: the new process ended before it was initialised
ERROR_MOD_NOT_FOUND = 126
ERROR_PROC_NOT_FOUND = 127
ERROR_INVALID_ORDINAL = 182
ERROR_BAD_EXE_FORMAT = 193
ERROR_DLL_INIT_FAILED = 1114
ERROR_NOACCESS = 998  # RtlNtStatusToDosError(STATUS_ACCESS_VIOLATION): a DllMain that crashed, under Wine

ERROR_TEXT = {
    0: "The operation completed successfully.",
    2: "The system cannot find the file specified.",
    3: "The system cannot find the path specified.",
    1359: "An internal error occurred.",
    5: "Access is denied.",
    87: "The parameter is incorrect.",
    126: "The specified module could not be found.",
    127: "The specified procedure could not be found.",
    182: "The operating system cannot run %1.",
    193: "%1 is not a valid Win32 application.",
    998: "Invalid access to memory location.",
    1114: "A dynamic link library (DLL) initialization routine failed.",
}

# Leaf causes (the `cause` field of the JSON output): the one list of them, and the Win32 error each
# gives (the reports' words for each are tables keyed by Cause; tests/test_model.py checks they
# name every cause).
Cause = Literal["not_found", "apiset_no_host", "missing_export", "missing_ordinal", "bad_machine", "not_pe",
                "init_failed", "invalid_parameter", "access_denied"]
CAUSES: tuple[Cause, ...] = get_args(Cause)
CAUSE_ERROR: dict[Cause, int] = {
    "not_found": ERROR_MOD_NOT_FOUND,
    "apiset_no_host": ERROR_MOD_NOT_FOUND,
    "missing_export": ERROR_PROC_NOT_FOUND,
    "missing_ordinal": ERROR_INVALID_ORDINAL,
    "bad_machine": ERROR_BAD_EXE_FORMAT,
    "not_pe": ERROR_BAD_EXE_FORMAT,
    "init_failed": ERROR_DLL_INIT_FAILED,
    "invalid_parameter": ERROR_INVALID_PARAMETER,
    "access_denied": ERROR_ACCESS_DENIED,
}

MACHINES = ("x64", "x86", "arm64", "arm")

# What the loader found at one candidate path (Candidate.result), and the words the reports say for each.
CandidateResult = Literal["found", "not_there", "wrong_machine", "not_pe", "access_denied", "already_loaded",
                          "known_dll", "apiset", "not_loaded"]
CANDIDATE_RESULTS: tuple[CandidateResult, ...] = get_args(CandidateResult)
RESULT_WORDS: dict[CandidateResult, str] = {
    "not_there": "not there", "found": "found", "wrong_machine": "wrong machine", "not_pe": "not a PE",
    "access_denied": "access denied", "already_loaded": "already loaded", "not_loaded": "there, not loaded",
    "known_dll": "KnownDLLs", "apiset": "API set"}

# How a Node came into the tree: the call itself, an import, a forwarder's target, an API set's host.
Via = Literal["call", "import", "forwarder", "apiset"]

# Which rule satisfied a node (Node.how_kind; Node.how is its words):
#   already_loaded      a bare name matched a module already loaded (by name)
#   loaded_same_file    a name with a path matched a module already loaded from that file
#   loaded_candidate    a searched candidate was a module already loaded (Wine; a data-file load)
#   known_dll           KnownDLLs
#   apiset              an API-set contract, satisfied by its host (the child node)
#   search              a file found on the search path (how: the rule of its folder)
HowKind = Literal["", "already_loaded", "loaded_same_file", "loaded_candidate", "known_dll", "apiset", "search"]

# Why a LoadLibraryEx call's flags are invalid (87): a leaf's `reason` when its cause is
# invalid_parameter (rules.rule_invalid_flags), and the words said for each.
InvalidFlagsReason = Literal["altered_with_search_flags", "dll_load_dir_needs_full_path",
                             "altered_with_default_dirs_needs_full_path"]
INVALID_FLAGS_TEXT: dict[InvalidFlagsReason, str] = {
    "altered_with_search_flags": "LOAD_WITH_ALTERED_SEARCH_PATH (0x8) cannot be combined with LOAD_LIBRARY_SEARCH_* flags",
    "dll_load_dir_needs_full_path": "LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (0x100) needs a fully qualified path",
    "altered_with_default_dirs_needs_full_path": (
        "LOAD_WITH_ALTERED_SEARCH_PATH (0x8) while SetDefaultDllDirectories is in effect searches the DLL's own "
        "folder (LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR), so it needs a fully qualified path"),
}


# --- PE facts --------------------------------------------------------------------------
@dataclass(frozen=True, **SLOTS)
class Import:
    """What one module imports from one DLL."""

    dll: str
    names: tuple[str, ...] = ()
    ordinals: tuple[int, ...] = ()


@dataclass(frozen=True, **SLOTS)
class PEFacts:
    """The facts about a PE file that decide how it loads."""

    machine: str  # one of MACHINES, or "unknown:0x…"
    is_dll: bool = True
    imports: tuple[Import, ...] = ()
    delay_imports: tuple[Import, ...] = ()
    exports: frozenset[str] = frozenset()
    export_ordinals: frozenset[int] = frozenset()
    forwarders: Mapping[str, str] = field(default_factory=dict)  # export name -> "target.func" / "target.#7"
    dependent_load_flags: int = 0
    file_version: Optional[str] = None  # "14.36.32532.0"
    linker_version: Optional[str] = None  # "14.40": the MSVC toolset that linked it (optional header)
    # a .NET assembly's IMAGE_COR20_HEADER.Flags (COMIMAGE_FLAGS_ILONLY, _32BITREQUIRED ...); None: no CLR header
    cor_flags: Optional[int] = None


@dataclass(frozen=True, **SLOTS)
class PEError:
    """Why a file is not a loadable PE. The loader's answer to all of these is 193."""

    kind: str  # "not_pe" | "truncated" | "corrupt" | "unreadable"
    message: str


# --- what a world knows about one file -------------------------------------------------------
FileError = Literal["not_pe", "access_denied"]  # a file the loader cannot map, and why

@dataclass(frozen=True, **SLOTS)
class FileFacts:
    path: str
    pe: Optional[PEFacts] = None  # None when the file is not a PE (see error)
    error: Optional[FileError] = None
    dllmain_fails: bool = False  # its DllMain returns FALSE (or its static init crashes)
    # how it fails, when a trace showed it: "" returns FALSE, "crashed" raised an exception the
    # loader caught (the load gave dllmain_error, 998 for an access violation under Wine), "exited" the process
    # ended inside it (ExitProcess, or a crash nothing caught): the load never returned
    dllmain_how: str = ""
    dllmain_error: Optional[int] = None
    dllmain_status: Optional[int] = None  # the NTSTATUS the load ended with (0xC0000005)
    size: Optional[int] = None  # bytes, where the world knows it (a trace's `file` event; None: unknown)


# --- results --------------------------------------------------------------------------------
@dataclass(frozen=True, **SLOTS)
class SearchDir:
    """One folder of a search path and the rule that put it there."""

    folder: str
    rule: str


@dataclass(frozen=True, **SLOTS)
class Candidate:
    """One place the loader looked, in order, and what was there.

    result: a CandidateResult (RESULT_WORDS)
    """

    path: str
    rule: str
    result: CandidateResult
    machine: Optional[str] = None
    opened: Optional[str] = None  # the file the path opens when it is another (WOW64: System32's is SysWOW64's)


# Where a copy of the leaf found elsewhere is, relative to the call's search (Elsewhere.relation):
#   loaded_wins       in a folder the call searched, but a copy already loaded won (rule: which folder)
#   on_path           in a PATH entry (path_entry, from 1), which the call searches
#   on_path_not_searched   in a PATH entry the call does not search (it used LOAD_LIBRARY_SEARCH_* flags)
#   current_folder    in the current folder
#   not_searched      in no folder the loader searches
#   searched          another version's file (close_names) in a folder the call searched (rule: which folder)
Relation = Literal["loaded_wins", "on_path", "on_path_not_searched", "current_folder", "not_searched", "searched"]


@dataclass(frozen=True, **SLOTS)
class Elsewhere:
    """A copy of the leaf outside the folders the call tried (CallResult.found_elsewhere), or a file of
    another version of it (CallResult.close_names), and how its folder relates to the call's search."""

    path: str
    relation: Relation
    result: Literal["found", "wrong_machine"] = "found"  # whether its machine is the process's
    machine: Optional[str] = None
    version: Optional[str] = None  # its file version, where known
    path_entry: Optional[int] = None  # on_path, on_path_not_searched: which PATH entry (from 1)
    rule: Optional[str] = None  # loaded_wins, searched: the rule of the folder searched
    owner: str = ""  # "numpy 2.1.3": a copy known from that distribution's RECORD only (its facts not recorded)


@dataclass
class Node:
    """One module the loader had to find for a call: what it looked at, what it chose, its imports."""

    name: str  # the name as requested (an import name, or the call's argument)
    via: Via
    path: Optional[str] = None  # the file chosen, when one was
    how: str = ""  # the rule that satisfied it, in words ("AddDllDirectory #1", "already loaded", "KnownDLLs", ...)
    how_kind: HowKind = ""  # which kind of rule that was
    candidates: list[Candidate] = field(default_factory=list)
    children: list["Node"] = field(default_factory=list)
    error: int = 0
    cause: Optional[Cause] = None  # a leaf cause when this node is where it failed
    detail: str = ""  # words for people, made from the facts below (leaf_detail) or about how it loaded
    facts: Optional["LeafFacts"] = None  # the cause's facts, when this node is the leaf
    new: bool = False  # loaded by this call (False: it was already loaded)
    search: tuple[SearchDir, ...] = ()  # the folders searched for this name, in order
    loaded_by: str = ""  # for an already-loaded module: the call that loaded it first
    stubs: tuple[str, ...] = ()  # Wine profile: the functions its importer needs that it lacks, bound to stubs
    owner: str = ""  # "numpy 2.1.3": the installed distribution whose RECORD (or conda package) lists the file chosen

    def walk(self) -> Iterator["Node"]:
        """This node and every node under it, depth first, parents before children (a loop, not
        recursion: an import tree may be thousands of levels deep)."""
        todo: list[Node] = [self]
        while todo:
            node = todo.pop()
            yield node
            todo.extend(reversed(node.children))

    def failure_chain(self) -> list["Node"]:
        """From this node down the failing children to the node with the cause (the leaf), or
        as far as failing children go."""
        out: list[Node] = []
        node: Optional[Node] = self
        while node is not None:
            out.append(node)
            if node.cause:
                break
            node = next((c for c in node.children if c.error), None)
        return out


@dataclass(frozen=True, **SLOTS)
class LeafFacts:
    """What a cause is about, as facts (Leaf.detail is the words made from them: leaf_detail).

    bad_machine:      process_machine, the process's; machines, those of the copies rejected
    missing_export:   export, the name not exported; forwarded_from, "dll!name" when a forwarder
                      pointed at it
    missing_ordinal:  ordinal
    apiset_no_host:   contract, the API-set contract with no host
    invalid_parameter: reason (INVALID_FLAGS_TEXT)
    init_failed:      loaded_earlier, when an earlier failed load had loaded it, not initialized;
                      dllmain_how / dllmain_status, how its DllMain failed (FileFacts.dllmain_how)
    not_found:        search_path_w, for a data-file load under Wine (SearchPathW found nothing)
    """

    process_machine: Optional[str] = None
    machines: tuple[str, ...] = ()
    export: Optional[str] = None
    forwarded_from: Optional[str] = None
    ordinal: Optional[int] = None
    contract: Optional[str] = None
    reason: Optional[InvalidFlagsReason] = None
    loaded_earlier: bool = False
    search_path_w: bool = False
    cpu_lacks: Optional[str] = None  # init_failed: the CPU feature its initialization needs and this CPU lacks
    dllmain_how: Optional[str] = None  # "crashed" / "exited" (FileFacts.dllmain_how); None: returned FALSE
    dllmain_status: Optional[int] = None


def leaf_detail(cause: Cause, f: LeafFacts) -> str:
    """The words of a cause's facts (Node.detail and Leaf.detail of the leaf)."""
    if cause == "bad_machine":
        return f"only copies for another machine than the process ({f.process_machine}) exist"
    if cause == "missing_export":
        return f"{f.export} (forwarded from {f.forwarded_from})" if f.forwarded_from else f"{f.export}"
    if cause == "missing_ordinal":
        return f"ordinal {f.ordinal}"
    if cause == "apiset_no_host":
        return f"API set {f.contract} has no host on this system"
    if cause == "invalid_parameter" and f.reason is not None:
        return INVALID_FLAGS_TEXT[f.reason]
    if cause == "not_pe":
        return "not a valid PE image"
    if cause == "access_denied":
        return "access denied"
    if cause == "init_failed":
        if f.dllmain_how == "crashed":
            st = f" ({f.dllmain_status:#x})" if f.dllmain_status is not None else ""
            return f"its DllMain crashed{st}; the loader caught the exception and unloaded it" + (
                "; it had been loaded, not initialized, by an earlier failed load" if f.loaded_earlier else "")
        if f.dllmain_how == "exited":
            return ("the process ended inside its DllMain (ExitProcess, or a crash nothing caught): "
                    "the load never returned")
        if f.cpu_lacks:
            return f"its initialisation needs a CPU with {f.cpu_lacks.upper()}, which this CPU lacks"
        return "DllMain returned FALSE (or its static initialisation failed)" + (
            "; it had been loaded, not initialized, by an earlier failed load" if f.loaded_earlier else "")
    if cause == "not_found" and f.search_path_w:
        return "SearchPathW found no file of that name (a data-file load under Wine)"
    return ""


@dataclass(frozen=True, **SLOTS)
class Leaf:
    name: str
    cause: Cause
    path: Optional[str] = None  # the module where the cause sits (for missing_export: the bound module)
    detail: str = ""  # words for people (leaf_detail of `facts`, or the node's own words)
    parent: Optional[str] = None  # the module that needed it
    facts: LeafFacts = LeafFacts()

    @property
    def reason(self) -> Optional[InvalidFlagsReason]:
        """invalid_parameter: why (INVALID_FLAGS_TEXT); from the facts."""
        return self.facts.reason


# A fix's kind (the `kind` of the JSON output): the family of fix, and its action, what exactly to do.
FixKind = Literal["add_dll_directory", "path", "install", "python_bitness", "reinstall", "shadowing", "init", "call",
                  "permissions", "vc_redist", "preload", "copy", "set_dll_directory", "env", "import_order", "conda",
                  "package", "linker", "driver", "cuda", "stale", "glibc"]
# add_dll_directory  os.add_dll_directory(folder) before `before` (path: the copy it holds; machine: the
#                    process's, for a bad_machine leaf; bound, lacks: the copy searched first that lacks it)
# path_prepend       put folder on PATH (a load that searches PATH)
# path_or_copy       put folder on PATH, or copy name next to exe (a program's static imports)
# install            install what ships name (instruction: how; package: the pip package, when it is one)
# find_package       find and install the package that ships name, then add its folder (exe: next to it)
# use_64bit_python   a 64-bit Python for a 64-bit DLL (machine: the process's, other_machine: the DLL's)
# use_build          the process's machine's build of name, or a Python of the DLL's machine
# reinstall          path is not a valid DLL: reinstall what ships it
# preload            load the matching copy (path) first: the copy already loaded (bound) lacks `lacks`
# update_loaded      find what loads bound first and update it
# install_matching   bound is another version than parent was built against
# vc_redist          the MSVC runtime name in use (path, version) is older than need: install the redistributable
# check_init         DllMain failed with every dependency resolved: the common causes
# update_windows     an API set with no host
# flags              the call's flags are invalid (reason: an InvalidFlagsReason)
# permissions        access to path was denied
# --- actions the model applies and re-runs (diagnosis/verify.py); each names exactly what changes:
# preload_path       load path by full path (ctypes.WinDLL) before `before`: later requests for name match it
# copy_file          copy path into folder `dest`
# set_dll_directory  SetDllDirectory(folder) before the load (a non-Python program, or ctypes)
# set_env            set variable to value before the program reads it (CUDA_PATH for CTranslate2)
# install_package    pip install package: it lands name in folder (the wheel's layout); `then` makes it searched
# change_flags       load with flags instead (a program's own LoadLibraryEx call)
# import_first       import module (or load path) before `before`, so its copy of name is the one bound
# activate_conda     activate the conda environment at folder (its Library\bin goes on PATH)
# package_mechanism  call the package's own loader (call: "onnxruntime.preload_dlls()"), which loads name
# cpu_build          name's initialization needs a CPU feature (lacks) this CPU lacks: a build without it
# --- Linux (loader/linux/fixes.py applies and re-runs these through the ld.so model; set_env too):
# set_runpath        give the module at path the RUNPATH value (patchelf), so its search holds folder
# add_ld_so_conf     put folder in the ld.so cache (a file in /etc/ld.so.conf.d, then ldconfig)
# install_system_package  install the system's package `package` (apt: Debian, Ubuntu), which puts name in
#                    folder; `value` "root": the program ran as root (no sudo); `then`: the next packages it needs
# rename_file        kind "stale": the copy at fault (path), reached first by the search and unusable (lacks: the
#                    export it lacks; machine: the one it is built for), renamed away so the search goes on to a
#                    usable copy; package: the distribution whose copy it is ("pyarrow 18.0.0"), "" for nobody's
# newer_glibc        kind "glibc" (advice): the module at path was built against glibc `need`, newer than this system's
#                    (`version`): a build of it (package: its distribution) for this glibc, or a newer system
# --- the CUDA stack table's (diagnosis/cuda.py; advice, not re-run): kind "driver" or "cuda"
# update_driver      update the NVIDIA driver to >= driver (family_driver: the lower one that runs it through
#                    minor version compatibility)
# install_driver     install an NVIDIA driver >= driver
# install_cuda       install the CUDA `cuda` libraries (a toolkit, or pip's `package`)
# other_cuda_build   or install `package`'s build for CUDA `cuda`
# reorder_path       put folder before ahead_of on PATH
# install_cudnn      install cuDNN `cudnn` for CUDA `cuda` (pip's `package`)
FixAction = Literal["add_dll_directory", "path_prepend", "path_or_copy", "install", "find_package", "use_64bit_python",
                    "use_build", "reinstall", "preload", "update_loaded", "install_matching", "vc_redist", "check_init",
                    "update_windows", "flags", "permissions", "preload_path", "copy_file", "set_dll_directory", "set_env",
                    "install_package", "change_flags", "import_first", "activate_conda", "package_mechanism",
                    "cpu_build", "set_runpath", "add_ld_so_conf", "update_driver", "install_driver", "install_cuda",
                    "other_cuda_build", "reorder_path", "install_cudnn", "install_system_package", "rename_file",
                    "newer_glibc"]
# Which actions the model can apply to a copy of the world and process and re-run (diagnosis/verify.py);
# the others are advice the model cannot check (DllMain's causes, a Windows update, permissions).
APPLIED_ACTIONS: tuple[FixAction, ...] = (
    "add_dll_directory", "path_prepend", "install", "preload", "preload_path", "copy_file", "use_64bit_python",
    "set_dll_directory", "set_env", "install_package", "change_flags", "import_first", "activate_conda",
    "package_mechanism", "vc_redist", "use_build", "flags", "cpu_build", "rename_file")


@dataclass(frozen=True, **SLOTS)
class Outcome:
    """What the model said when it re-ran the failing call with a fix applied (diagnosis/verify.py)."""

    error: int  # the call's error after the fix (0: it loads)
    leaf: str = ""  # when it still fails: the DLL it fails on next
    cause: Optional["Cause"] = None  # and why
    chain: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class Owner:
    """An installed distribution that lists a file (its RECORD, or a conda package's conda-meta `files`): who
    owns a DLL, as the environment says (the bootstrap's py_dists event; trace/reader.py Trace.owners)."""

    dist: str  # the distribution's name ("pywin32", "numpy"), as its .dist-info folder spells it
    version: str
    path: str  # the file as the record lists it (relative to `root`, "/"-separated)
    root: str  # the site-packages folder (a conda package: the environment's prefix)
    kind: Literal["wheel", "conda"] = "wheel"
    size: Optional[int] = None  # the file's size as the record gives it (RECORD's third column), None: not given
    tags: tuple[str, ...] = ()  # a wheel's tags, from its WHEEL file ("py3-none-win_amd64"): the machine it is for


@dataclass(frozen=True, **SLOTS)
class PackageLoader:
    """A package's own way of making its DLLs reachable, read from its __init__.py where the program runs
    (the bootstrap's py_dists): importing `package` adds `folder` to the DLL search (delvewheel's patch)."""

    package: str  # the import name ("numpy")
    folder: str  # the folder it adds (absolute)
    how: str  # "delvewheel"
    dist: str = ""  # the distribution ("numpy 2.1.3")


@dataclass(frozen=True, **SLOTS)
class AlsoMissing:
    """A DLL the failing call would fail on once the first leaf is fixed (CallResult.also_missing):
    "you would hit these next"."""

    name: str
    cause: "Cause"
    needed_by: str  # the module that imports (or loads) it
    chain: tuple[str, ...] = ()  # from the call's module down to it
    installed_at: tuple[str, ...] = ()  # copies the world has outside the folders searched

VC_REDIST = "https://aka.ms/vc14/vc_redist.{arch}.exe"  # (Microsoft's v14 permalink: cpp-docs latest-supported-vc-redist.md)


@dataclass(frozen=True, **SLOTS)
class Fix:
    """One fix: a typed action and what it acts on. Its words, per format, are render/fixwords.py's (fix_text)."""

    kind: FixKind
    action: FixAction
    name: str = ""  # the DLL
    folder: str = ""
    path: str = ""  # a file: the copy to use, the file at fault
    before: Optional[str] = None  # the code the fix must run before ("import torch"); None: the load
    exe: str = ""  # the program (path_or_copy, find_package for its static imports)
    machine: str = ""  # the process's machine
    other_machine: str = ""  # the DLL's machine
    bound: str = ""  # the copy loaded (or searched first) that lacks what is needed
    lacks: str = ""  # what it lacks, in words (the leaf's detail)
    loaded_by: str = ""  # who loaded that copy ("loaded by import torch")
    parent: str = ""  # the module built against another version
    instruction: str = ""  # install: how to install what ships the DLL
    package: Optional[str] = None  # install: the pip package, when it is one
    version: str = ""  # vc_redist: the version in use
    need: str = ""  # vc_redist: the version needed ("14.40"); install of a python3XY.dll: the Python its wheel is for
    built_with: bool = False  # vc_redist: need is the failing DLL's own toolset (name it)
    leaf: str = ""  # vc_redist: the DLL whose DllMain failed
    arch: str = ""  # vc_redist: the redistributable's architecture
    reason: Optional[InvalidFlagsReason] = None  # flags
    dest: str = ""  # copy_file: the folder to copy into
    variable: str = ""  # set_env: the variable
    value: str = ""  # set_env: its value
    flags: Optional[int] = None  # change_flags: the flags to pass
    module: str = ""  # import_first: the module to import first
    call: str = ""  # package_mechanism: the call to make ("onnxruntime.preload_dlls()")
    files: tuple[str, ...] = ()  # package_mechanism: the files that call loads by full path; preload_path: every file
    driver: str = ""  # update_driver, install_driver: the NVIDIA driver to reach (>=)
    family_driver: str = ""  # update_driver: the lower driver that runs it through minor version compatibility
    cuda: str = ""  # install_cuda, other_cuda_build, install_cudnn: the CUDA major(.minor)
    cudnn: Optional[int] = None  # install_cudnn: the cuDNN major
    ahead_of: str = ""  # reorder_path: the folder `folder` must come before
    preloaded_by: str = ""  # install_package (Linux): the framework that loads this wheel's copy itself ("torch")
    replaces: str = ""  # install_package: the installed distribution whose module the package's own replaces (uninstalled first)
    # install (a reinstall): the file at `path` is not the one its distribution installed: its size on disk, and
    # the size its RECORD gives (explain.rule_not_the_file_its_distribution_installed)
    size: Optional[int] = None
    record_size: Optional[int] = None
    python: bool = True  # the process is Python: the words give Python code (False: Win32 calls, PATH)
    then: tuple["Fix", ...] = ()  # further steps this fix needs (install_package: make the folder searched)
    covers: tuple[str, ...] = ()  # the missing DLLs this fix makes load (the leaf and also_missing)
    verified: Optional[bool] = None  # re-run by the model: True, it loads; None: advice the model cannot apply
    breaks: tuple[str, ...] = ()  # the loads that loaded and, with this fix, fail or load another file (wholerun.py)
    outcome: Optional[Outcome] = None  # what the re-run gave





@dataclass
class CallResult:
    """One top-level call of a scenario or a trace and what the model says it did."""

    index: int
    op: ResultOp
    name: str = ""
    flags: int = 0
    search_flags: int = 0  # the LOAD_LIBRARY_SEARCH_* flags the load searched with (its own, or the process default)
    path: tuple[str, ...] = ()  # PATH when the call was made
    cwd: str = ""  # the current folder when the call was made
    origin: str = ""  # the Python action that made the call, when known, in words
    origin_kind: OriginKind = ""  # what kind of action that was
    origin_module: str = ""  # python_import: the module imported
    origin_top: str = ""  # the user's own import the call was made under (the outermost import in progress)
    error: int = 0
    tree: Optional[Node] = None
    leaf: Optional[Leaf] = None
    chain: list[str] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    found_elsewhere: list[Elsewhere] = field(default_factory=list)
    close_names: list[Elsewhere] = field(default_factory=list)  # other versions of the leaf (cublas64_11 for _12)
    probes: list[str] = field(default_factory=list)  # every file path the loader would open, in order
    note: str = ""
    also_missing: list[AlsoMissing] = field(default_factory=list)  # what fails next once the leaf is fixed

    @property
    def module_path(self) -> Optional[str]:
        return self.tree.path if self.tree is not None and self.error == 0 else None

    @property
    def not_searched(self) -> str:
        """The note a load searched with LOAD_LIBRARY_SEARCH_* flags gets ("" for one that was not)."""
        if self.search_flags:
            return "PATH and the current folder are not searched with these flags."
        return ""

    @property
    def origin_package(self) -> str:
        """The top-level Python package whose code made the call ("torch"), "" when none is known."""
        if self.origin_kind in TORCH_ORIGINS:
            return "torch"
        if self.origin_kind == "python_import":
            return self.origin_module.split(".")[0]
        return ""
