"""The CUDA stack table: the NVIDIA driver, every CUDA toolkit, every cuDNN, the nvidia-* wheels and each
framework's CUDA build, side by side, and every mismatch between them named with its fix (docs/cuda.md).

One core, many worlds. The table is built from a `CudaFacts` (what it may ask: environment variables,
the files in a folder, a file's PE facts with its version, a small text file's content), answered by
- `WorldFacts`: a simulator world (a scenario's VirtualWorld, a trace's RecordedWorld) and its process:
  only what the world holds (a trace: the PATH-like variables it recorded and the files it touched);
- `LiveFacts`: the machine dlltrace runs on (Windows: nvcuda.dll, CUDA_PATH*, PATH; Linux: libcuda.so,
  /usr/local/cuda-*, LD_LIBRARY_PATH, site-packages/nvidia/*/lib).
Frameworks are read from their files (torch/version.py, onnxruntime/capi/version_info.py, a provider
DLL's imports, dist-info folder names), never imported.

Each check is one named function (rule_*), each mismatch a typed `Mismatch` with its fixes (model.Fix, the one fix type); the
words are made in one place (render/cuda.py mismatch_text, render/fixwords.py fix_text). The driver table is data
(data/cuda-drivers.json, with its source: NVIDIA's CUDA Toolkit release notes, Tables 2 and 3).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Literal, Mapping, Optional, Protocol

from dlltrace import winpath
from dlltrace.model import FileFacts, Fix
from dlltrace.classify import cuda_class
from dlltrace.worlds.live import facts_for
from dlltrace.worlds.gpu import GpuFacts, gpu_facts_from_dict, read_gpu_facts, rule_driver_state
from dlltrace.trace.shim import windows_gpu_fields
from dlltrace.diagnosis.outcome import CPU_BUILD_FRAMEWORKS, feature_of
from dlltrace.diagnosis.replay import recorded_world, system_and_process

Platform = Literal["windows", "linux"]


def path_first(platform: Platform, folder: str) -> Fix:
    """Put folder first in the search of the framework's loads: PATH on Windows, LD_LIBRARY_PATH on Linux."""
    if platform == "windows":
        return Fix("path", "path_prepend", folder=folder, python=False)
    return Fix("env", "set_env", folder=folder, variable="LD_LIBRARY_PATH", value=folder, python=False)
DATA = Path(__file__).resolve().parents[1] / "data" / "cuda-drivers.json"

# --- the driver table (data/cuda-drivers.json) -------------------------------------------------------------


def vtuple(v: Optional[str]) -> tuple[int, ...]:
    """'531.14' -> (531, 14); '12.4.127' -> (12, 4, 127); () for None or no number."""
    return tuple(int(x) for x in re.findall(r"\d+", v or ""))


def _major(v: Optional[str]) -> Optional[int]:
    """The first number of a version ('12.4.1' -> 12); None when it has none."""
    t = vtuple(v)
    return t[0] if t else None


def _version_text(v: Optional[str]) -> Optional[str]:
    """A version a package file wrote, kept when it is one ("12.4", "13.0.88"); None for anything else."""
    return v if v and re.match(r"^\d+(\.\d+)*$", v.strip()) else None


@dataclass(frozen=True)
class DriverRow:
    release: str  # "12.1 Update 1"
    cuda: str     # "12.1"
    linux: Optional[str]
    windows: Optional[str]  # None: NVIDIA lists N/A (CUDA 13.x on Windows)


@dataclass(frozen=True)
class FamilyMinimum:
    major: int
    min_branch: int           # the lowest driver branch (525 for 12.x)
    max_branch: Optional[int]  # the branch of the next family (580 for 12.x); None for the newest
    linux: Optional[str]      # an exact minimum where NVIDIA gives one (11.x: 450.80.02)
    windows: Optional[str]


@dataclass(frozen=True)
class DriverTable:
    rows: tuple[DriverRow, ...]
    families: tuple[FamilyMinimum, ...]
    sources: tuple[str, ...]

    def toolkit_minimum(self, cuda: str, platform: Platform) -> Optional[str]:
        """The driver the release notes (Table 3) name for CUDA major.minor `cuda` (its GA row: the lowest of
        that minor's rows); on Windows where NVIDIA lists N/A, the family minimum (Table 2)."""
        mm = vtuple(cuda)[:2]
        rows = [r for r in self.rows if vtuple(r.cuda)[:2] == mm]
        values = [getattr(r, platform) for r in rows if getattr(r, platform)]
        if values:
            return min(values, key=vtuple)
        if rows:  # a known release with no number for this platform: the family minimum
            return self.family_minimum(mm[0], platform)
        return None

    def family_minimum(self, major: int, platform: Platform) -> Optional[str]:
        """The lowest driver that runs CUDA `major`.x programs (minor version compatibility, Table 2)."""
        f = next((f for f in self.families if f.major == major), None)
        if f is None:
            return None
        return getattr(f, platform) or str(f.min_branch)

    def supports(self, driver: str, platform: Platform) -> tuple[Optional[str], Optional[int]]:
        """(the newest CUDA major.minor whose Table 3 driver `driver` meets, the newest CUDA major whose
        family minimum it meets). Windows 13.x rows (N/A) count with their family minimum."""
        d = vtuple(driver)
        best: Optional[str] = None
        for r in self.rows:
            need = getattr(r, platform) or (self.family_minimum(vtuple(r.cuda)[0], platform) if platform == "windows" else None)
            if need and d >= vtuple(need) and (best is None or vtuple(r.cuda) > vtuple(best)):
                best = r.cuda
        fams = [f.major for f in self.families if d >= vtuple(self.family_minimum(f.major, platform))]
        return best, (max(fams) if fams else None)


@lru_cache(maxsize=1)
def driver_table() -> DriverTable:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    rows = tuple(DriverRow(r["release"], r["cuda"], r.get("linux"), r.get("windows")) for r in doc["toolkit_drivers"])
    fams = tuple(FamilyMinimum(f["major"], f["min_driver_branch"], f.get("max_driver_branch"), f.get("linux"),
                               f.get("windows")) for f in doc["minor_version_compatibility"])
    return DriverTable(rows, fams, tuple(s["url"] or s["title"] for s in doc["sources"]))


# --- names and versions, from the files themselves ----------------------------------------------------------

def windows_driver_version(file_version: Optional[str]) -> Optional[str]:
    """nvcuda.dll's file version a.b.c.d -> NVIDIA's driver number: the last five digits of c and d
    (32.0.15.6094 -> 560.94). None when it is not of that shape."""
    p = vtuple(file_version)
    if len(p) < 4:
        return None
    digits = f"{p[2]}{p[3]:04d}"[-5:]
    return f"{int(digits[:3])}.{digits[3:]}" if len(digits) == 5 else None


def cudart_cuda_version(file_version: Optional[str]) -> Optional[str]:
    """cudart64_12.dll's file version 6.14.11.12040 -> '12.4' (NVIDIA writes major*1000 + minor*10 in its
    last part; read off the real nvidia-cuda-runtime-cu12 12.4.127 wheel). None for another shape."""
    p = vtuple(file_version)
    if len(p) == 4 and p[:3] == (6, 14, 11) and p[3] >= 1000:
        return f"{p[3] // 1000}.{(p[3] % 1000) // 10}"
    return None


# Windows DLL names that carry the CUDA major (cudart64_110.dll is CUDA 11.x, cudart64_101.dll 10.1) ...
_WIN_CUDA_NAME = re.compile(r"^(cudart|cublas|cublaslt)64_(\d+)\.dll$", re.I)
_WIN_NVRTC = re.compile(r"^nvrtc64_(\d+)(\d)_0\.dll$", re.I)
_WIN_CUDNN = re.compile(r"^cudnn64_(\d+)\.dll$", re.I)
# ... and Linux sonames (libcudart.so.12, libcudart.so.12.4.127, libcudnn.so.9)
_LINUX_CUDA_NAME = re.compile(r"^lib(cudart|cublas|cublasLt)\.so\.(\d+)((?:\.\d+)*)$")
_LINUX_CUDNN = re.compile(r"^libcudnn\.so\.(\d+)((?:\.\d+)*)$")


def cuda_major_of_name(name: str) -> Optional[int]:
    """The CUDA major a file name says (cublas64_12.dll -> 12, cudart64_110.dll -> 11, nvrtc64_120_0.dll -> 12,
    libcublas.so.12 -> 12; another library's name through classify.py's table, when it names one major:
    cufft64_11.dll -> 12); None for a name that says none or several (curand64_10.dll: CUDA 10 to 13)."""
    base = name.rsplit("\\", 1)[-1].rsplit("/", 1)[-1]
    m = _WIN_CUDA_NAME.match(base)
    if m:
        d = m.group(2)
        return int(d[:-1]) if len(d) == 3 else int(d)
    m = _WIN_NVRTC.match(base)
    if m:
        return int(m.group(1))
    m = _LINUX_CUDA_NAME.match(base)
    if m:
        return int(m.group(2))
    if base.lower().endswith(".dll"):  # the other libraries' own majors: classify.py's table (cufft64_11.dll is CUDA 12)

        c = cuda_class(base.lower()[:-4])
        if c is not None and len(c.cuda_majors) == 1:
            return c.cuda_majors[0]
    return None


def cudnn_major_of_name(name: str) -> Optional[int]:
    base = name.rsplit("\\", 1)[-1].rsplit("/", 1)[-1]
    m = _WIN_CUDNN.match(base) or _LINUX_CUDNN.match(base)
    return int(m.group(1)) if m else None


def is_cuda_dll(name: str) -> bool:
    """A CUDA runtime/library or cuDNN file (what a framework folder bundles or a wheel ships)."""
    base = name.rsplit("\\", 1)[-1].rsplit("/", 1)[-1].lower()
    return bool(re.match(r"^(lib)?(cudart|cublas|cublaslt|cufft|curand|cusolver|cusparse|nvrtc|nvjitlink|cudnn|"
                         r"nvtoolsext|nvtx|cupti|nccl|nvinfer)", base)) and (base.endswith(".dll") or ".so" in base)


# --- the facts the table asks for ---------------------------------------------------------------------------

class CudaFacts(Protocol):
    """What the table may ask of a world. Paths are the world's own (Windows paths, or POSIX on Linux)."""

    platform: Platform
    origin: str  # "machine" | "scenario" | "trace"

    def env(self) -> Mapping[str, str]:
        """The environment: PATH, CUDA_PATH, CUDA_PATH_V*, (Linux) LD_LIBRARY_PATH, CUDA_HOME."""

    def file(self, path: str) -> Optional[FileFacts]:
        """The PE facts (version, imports) of a file; None when there is none or it is not a PE."""

    def exists(self, path: str) -> bool:
        """Whether a file is there (any kind)."""

    def files_in(self, folder: str) -> list[str]:
        """The files directly in `folder`, as full paths."""

    def folders_in(self, folder: str) -> list[str]:
        """The folders directly in `folder`, as full paths."""

    def text(self, path: str) -> Optional[str]:
        """A small text file's content (version.py); None when unknown (a trace records no contents)."""

    def site_packages(self) -> list[str]:
        """The Python's site-packages folders."""

    def system_folders(self) -> list[str]:
        """Where the driver's user-mode library lives (System32; the Linux library folders)."""

    def toolkit_parents(self) -> list[str]:
        """Where toolkits are installed by default (CUDA\\v12.4 folders; /usr/local/cuda-12.4)."""

    def real_path(self, path: str) -> str:
        """The path with its links resolved (/usr/local/cuda -> /usr/local/cuda-13.0); itself in a world."""

    def knows(self, path: str) -> bool:
        """Whether the world can tell if the file is there (a trace knows only the files it touched)."""

    def find_in_file(self, path: str, pattern: bytes) -> Optional[str]:
        """The first group of `pattern` in a file's bytes (a name a DLL loads at run time: CTranslate2's
        cublas64_12.dll); None when absent or the world holds no contents (a scenario, a trace)."""


class _Paths:
    """Path operations of a platform: Windows names are case-insensitive."""

    def __init__(self, platform: Platform):
        self.win = platform == "windows"

    def join(self, a: str, *b: str) -> str:
        return winpath.join(a, *b) if self.win else posixpath.join(a, *b)

    def base(self, p: str) -> str:
        return winpath.basename(p) if self.win else posixpath.basename(p.rstrip("/"))

    def parent(self, p: str) -> str:
        return winpath.dirname(p) if self.win else posixpath.dirname(p.rstrip("/"))

    def key(self, p: str) -> str:
        return winpath.key(p) if self.win else posixpath.normpath(p)

    def sep(self) -> str:
        return ";" if self.win else ":"


class WorldFacts:
    """The facts of a simulator world and its process: a scenario's files and [process] env/path, or a
    trace's recorded files, env and PATH. `known_paths`: every path the world knows (files and folders),
    from which folders are listed; `texts`: file contents the world holds (none for a trace)."""

    platform: Platform = "windows"

    def __init__(self, world, process, known_paths: Iterable[str] = (), site_packages: Iterable[str] = (),
                 texts: Optional[Mapping[str, str]] = None, origin: str = "scenario",
                 to_host: Optional[Callable[[str], Optional[str]]] = None):
        """`to_host`: the world is a Windows layout on this disk (worlds/live.py PathMap: a Wine prefix, a
        test's folder): its folders, texts and bytes are read from there."""
        self.world = world
        self.process = process
        self.origin = origin
        self.to_host = to_host
        self._texts = {winpath.key(k): v for k, v in (texts or {}).items()}
        self._children: dict[str, dict[str, str]] = {}  # folder key -> {child key: child path}
        for p in known_paths:
            self._note(winpath.normalize(p))
        self._site = list(dict.fromkeys(winpath.normalize(s) for s in site_packages))
        for k in list(self._children):
            for ck, cp in self._children[k].items():
                if winpath.basename(ck) == "site-packages" and all(not winpath.same(cp, s) for s in self._site):
                    self._site.append(cp)
        default = winpath.join(process.app_dir, "Lib", "site-packages")
        if self.is_dir(default) and all(not winpath.same(default, s) for s in self._site):
            self._site.append(default)

    def _note(self, path: str) -> None:
        child, child_key = path, winpath.key(path)
        parent = winpath.dirname(child)
        while parent and parent != child:
            parent_key = winpath.key(parent)
            kids = self._children.setdefault(parent_key, {})
            if child_key in kids:
                return
            kids[child_key] = child
            child, child_key, parent = parent, parent_key, winpath.dirname(parent)

    def is_dir(self, path: str) -> bool:
        return self.world.is_dir(path) or winpath.key(path) in self._children

    def gpu_facts(self) -> Optional[GpuFacts]:
        """The machine's NVIDIA GPUs and driver, as the world knows them (a trace's py_gpu), else None."""
        ask = getattr(self.world, "gpu_facts", None)
        return ask() if ask is not None else None

    def env(self) -> Mapping[str, str]:
        out = {k: v for k, v in self.process.env.items() if isinstance(v, str)}
        out["PATH"] = ";".join(self.process.path)
        return out

    def file(self, path: str) -> Optional[FileFacts]:
        f = self.world.file(path)
        return f if f is not None and f.pe is not None else None

    def exists(self, path: str) -> bool:
        if self.world.file(path) is not None or winpath.key(path) in self._texts:
            return True
        host = self.to_host(path) if self.to_host else None
        return bool(host) and os.path.isfile(host or "")

    def files_in(self, folder: str) -> list[str]:
        out = {winpath.key(p): p for p in self.world.files_in(folder) if self.world.file(p) is not None or self.to_host is None
               or os.path.isfile(self.to_host(p) or "")}
        for ck, cp in self._children.get(winpath.key(folder), {}).items():
            if ck not in out and (self.world.file(cp) is not None or ck in self._texts):
                out[ck] = cp
        return sorted(out.values(), key=str.lower)

    def folders_in(self, folder: str) -> list[str]:
        out = {ck: cp for ck, cp in self._children.get(winpath.key(folder), {}).items()
               if self.world.file(cp) is None and ck not in self._texts}
        host = self.to_host(folder) if self.to_host else None
        if host and os.path.isdir(host):
            for e in sorted(os.listdir(host)):
                if os.path.isdir(os.path.join(host, e)):
                    out.setdefault(winpath.key(winpath.join(folder, e)), winpath.join(folder, e))
        return sorted(out.values(), key=str.lower)

    def text(self, path: str) -> Optional[str]:
        got = self._texts.get(winpath.key(path))
        host = self.to_host(path) if self.to_host and got is None else None
        return _read_text(host) if host else got

    def find_in_file(self, path: str, pattern: bytes) -> Optional[str]:
        host = self.to_host(path) if self.to_host else None
        return _name_in_binary(host, pattern) if host else None

    def site_packages(self) -> list[str]:
        return list(self._site)

    def system_folders(self) -> list[str]:
        return [self.world.system.system32]

    def real_path(self, path: str) -> str:
        return path

    def toolkit_parents(self) -> list[str]:
        return [WIN_DEFAULT_ROOT]

    def knows(self, path: str) -> bool:
        records = getattr(self.world, "records", None)  # (a RecordedWorld: does the trace say anything of it)
        return records(path) if callable(records) else True


class LiveFacts:
    """The machine dlltrace runs on. `root` maps the machine's paths under a folder (tests); `env`
    replaces os.environ (tests)."""

    origin = "machine"

    def __init__(self, platform: Optional[Platform] = None, env: Optional[Mapping[str, str]] = None,
                 site_packages: Optional[Iterable[str]] = None, system_folders: Optional[Iterable[str]] = None,
                 toolkit_parents: Optional[Iterable[str]] = None):
        self.platform: Platform = platform or ("windows" if sys.platform == "win32" else "linux")
        self._env = dict(os.environ if env is None else env)
        self._site = list(site_packages) if site_packages is not None else _python_site_packages()
        self._system = list(system_folders) if system_folders is not None else self._default_system()
        self._live = system_folders is None  # (the machine's own folders: its GPU facts are about them)
        self._toolkits = list(toolkit_parents) if toolkit_parents is not None else \
            [WIN_DEFAULT_ROOT if self.platform == "windows" else "/usr/local"]

    def _default_system(self) -> list[str]:
        if self.platform == "windows":
            return [os.path.join(self._env.get("SystemRoot", r"C:\Windows"), "System32")]
        return ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/wsl/lib",
                "/usr/local/nvidia/lib64", "/usr/lib/aarch64-linux-gnu"]

    def gpu_facts(self) -> Optional[GpuFacts]:
        """This machine's NVIDIA GPUs and driver (worlds/gpu.py; Windows: its registry, as the bootstrap reads it),
        only when it is this machine whose folders are asked about (not a test's stand-in folders)."""
        if not self._live:
            return None
        if self.platform == "linux" and sys.platform.startswith("linux"):
            return read_gpu_facts()
        if self.platform == "windows" and sys.platform == "win32":
            return gpu_facts_from_dict(windows_gpu_fields())
        return None

    def env(self) -> Mapping[str, str]:
        return self._env

    def file(self, path: str) -> Optional[FileFacts]:
        if not path.lower().endswith((".dll", ".pyd", ".exe")) or not os.path.isfile(path):
            return None

        f = facts_for(path, path)
        return f if f is not None and f.pe is not None else None

    def exists(self, path: str) -> bool:
        return os.path.isfile(path)

    def files_in(self, folder: str) -> list[str]:
        try:
            with os.scandir(folder) as it:
                return sorted((e.path for e in it if e.is_file()), key=str.lower)
        except OSError:
            return []

    def folders_in(self, folder: str) -> list[str]:
        try:
            with os.scandir(folder) as it:
                return sorted((e.path for e in it if e.is_dir()), key=str.lower)
        except OSError:
            return []

    def text(self, path: str) -> Optional[str]:
        return _read_text(path)

    def find_in_file(self, path: str, pattern: bytes) -> Optional[str]:
        return _name_in_binary(path, pattern)

    def site_packages(self) -> list[str]:
        return list(self._site)

    def system_folders(self) -> list[str]:
        return list(self._system)

    def real_path(self, path: str) -> str:
        return os.path.realpath(path)

    def toolkit_parents(self) -> list[str]:
        return list(self._toolkits)

    def knows(self, path: str) -> bool:
        return True


def _read_text(path: str) -> Optional[str]:
    """A small text file's content (version.py); None when absent, unreadable or over 1 MB."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > 1 << 20:
            return None
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _python_site_packages() -> list[str]:
    import site
    import sysconfig

    out = [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
    try:
        out += site.getsitepackages()
    except AttributeError:  # pragma: no cover (old virtualenv)
        pass
    return [p for p in dict.fromkeys(out) if p and os.path.isdir(p)]


# --- the table, typed ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Component:
    """One CUDA file: its name, where, the CUDA (or cuDNN) major its name says, its version."""

    name: str
    path: str
    major: Optional[int]
    version: Optional[str] = None  # the file's version (cublas 12.1.3.1), or the CUDA version a cudart says (12.4)


@dataclass(frozen=True)
class Driver:
    path: str
    file_version: Optional[str]  # nvcuda.dll's (32.0.15.6094); None on Linux
    version: Optional[str]       # NVIDIA's number (560.94, 550.54.15)
    supports: Optional[str]      # the newest CUDA major.minor it runs fully (Table 3)
    supports_major: Optional[int]  # the newest CUDA major it runs at all (Table 2)


@dataclass(frozen=True)
class Toolkit:
    version: str             # "12.1"
    root: str
    bin: str
    sources: tuple[str, ...]  # how it was found: "CUDA_PATH", "CUDA_PATH_V12_1", "PATH", "default folder"
    path_index: Optional[int]  # its bin's position on PATH (from 1), None when not on PATH
    cudart: Optional[Component] = None
    cublas: Optional[Component] = None
    exists: bool = True       # False: a variable names it, but its folder is not there


@dataclass(frozen=True)
class Cudnn:
    version: Optional[str]    # from the file's version (9.10.2.21) or the file name (Linux)
    major: int                # cudnn64_9.dll -> 9
    path: str
    folder: str
    cuda_major: Optional[int]  # the CUDA major it was built for, when its files say (imports, folder, wheel)
    cuda_major_from: str = ""  # "imports" | "folder" | "wheel" | "toolkit"
    on_path: Optional[int] = None


@dataclass(frozen=True)
class Wheel:
    """An nvidia-* wheel's library folder (site-packages\\nvidia\\cublas\\bin, .../nvidia/cublas/lib)."""

    name: str                  # the folder under nvidia\\ ("cublas", "cu13")
    folder: str
    files: tuple[str, ...]     # the CUDA files in it (names)
    cuda_major: Optional[int]
    searched: bool             # its folder is on PATH (Windows) / LD_LIBRARY_PATH (Linux)


FrameworkName = Literal["torch", "onnxruntime-gpu", "onnxruntime", "ctranslate2", "tensorflow", "paddle", "cupy", "jax"]


@dataclass(frozen=True)
class Framework:
    name: FrameworkName
    version: Optional[str]
    folder: str
    cuda: Optional[str]        # the CUDA it was built for ("12.1", "13.0"); None: a CPU build or unknown
    cuda_major: Optional[int]
    cuda_from: str             # where that was read: "torch/version.py", "imports of onnxruntime_providers_cuda.dll", ...
    cpu_build: bool = False    # its files say it has no CUDA (torch 2.5.1+cpu: cuda = None)
    cudnn_major: Optional[int] = None
    bundles: tuple[str, ...] = ()   # CUDA files in its own folders (torch\\lib)
    needs: tuple[str, ...] = ()     # CUDA files it loads from outside (names)


MismatchKind = Literal[
    "no_driver",                # something needs CUDA and there is no NVIDIA driver
    "driver_too_old",           # the driver is below the CUDA family's minimum: it cannot run that CUDA
    "driver_minor_compat",      # the driver runs that CUDA only through minor version compatibility
    "cuda_major_missing",       # a framework needs CUDA M libraries and none of major M is anywhere
    "framework_toolkit_major",  # a framework's CUDA M is installed, but PATH reaches only another major's toolkit
    "path_order",               # two toolkits of one major on PATH: the first, older, one wins
    "cudnn_major_missing",      # a framework needs cudnn64_K.dll and no cuDNN K is there
    "cudnn_cuda_major",         # the cuDNN a framework or toolkit gets was built for another CUDA major
    "wheel_not_searched",       # an nvidia-* wheel holds what a framework needs, in a folder nothing searches
]
Severity = Literal["error", "warning"]

@dataclass(frozen=True)
class Mismatch:
    kind: MismatchKind
    severity: Severity
    subject: str                     # what needs it: "torch 2.5.1+cu121", "CUDA 12.4 toolkit", "onnxruntime-gpu 1.31.1"
    needs_cuda: Optional[str] = None  # the CUDA it needs ("12.1", "13")
    driver: Optional[str] = None      # the driver there is
    driver_supports: Optional[str] = None
    needs_driver: Optional[str] = None
    found: tuple[str, ...] = ()       # the paths involved (the winning file, the toolkit bins, the wheel folder)
    dll: Optional[str] = None         # the file name it is about (cublas64_12.dll, cudnn64_9.dll)
    have: Optional[str] = None        # what there is instead ("CUDA 11.8", "cuDNN 8", "CUDA 12 build")
    bundled: bool = False             # the subject brings its CUDA libraries itself (torch\\lib): only the driver matters
    fixes: tuple[Fix, ...] = ()  # the one fix type (model.Fix): the CUDA actions are its update_driver ... install_cudnn


@dataclass(frozen=True)
class CudaTable:
    platform: Platform
    origin: str                      # "machine" | "scenario" | "trace"
    driver: Optional[Driver]
    toolkits: tuple[Toolkit, ...]
    cudnns: tuple[Cudnn, ...]
    wheels: tuple[Wheel, ...]
    frameworks: tuple[Framework, ...]
    mismatches: tuple[Mismatch, ...]
    path: tuple[str, ...]            # the PATH (LD_LIBRARY_PATH) entries, in order
    cuda_path: Optional[str] = None
    driver_known: bool = True        # False: the world cannot tell (a trace that never touched nvcuda.dll)
    sources: tuple[str, ...] = ()    # where the driver table comes from
    gpu: str = ""                    # why no driver, when none: worlds/gpu.py rule_driver_state ("no_gpu", ...)

    @property
    def empty(self) -> bool:
        return not (self.driver or self.toolkits or self.cudnns or self.wheels or self.frameworks)


# --- building the table ---------------------------------------------------------------------------------------

_VFOLDER = re.compile(r"^v(\d+)\.(\d+)$", re.I)
_LINUX_TK = re.compile(r"^cuda-(\d+)\.(\d+)$")
WIN_DEFAULT_ROOT = r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA"
WIN_CUDNN_ROOT = r"C:\Program Files\NVIDIA\CUDNN"


class _Builder:
    def __init__(self, facts: CudaFacts):
        self.f = facts
        self.p = _Paths(facts.platform)
        self.win = facts.platform == "windows"
        env = facts.env()
        self.env = {k.upper() if self.win else k: v for k, v in env.items()}
        var = "PATH" if self.win else "LD_LIBRARY_PATH"
        self.path = [e for e in (self.env.get(var) or "").split(self.p.sep()) if e.strip()]
        if self.win:
            self.path = [winpath.normalize(e) for e in self.path]
        self.table = driver_table()

    def path_index(self, folder: str) -> Optional[int]:
        k = self.p.key(folder)
        return next((i + 1 for i, e in enumerate(self.path) if self.p.key(e) == k), None)

    # the driver
    def driver(self) -> Optional[Driver]:
        if self.win:
            for d in self.f.system_folders():
                path = self.p.join(d, "nvcuda.dll")
                if self.f.exists(path):
                    facts = self.f.file(path)
                    fv = facts.pe.file_version if facts is not None and facts.pe is not None else None
                    return self._driver(path, fv, windows_driver_version(fv))
            return None
        for d in self.f.system_folders():
            for p in self.f.files_in(d):
                m = re.match(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", self.p.base(p))
                if m:
                    return self._driver(p, None, m.group(1))
        for d in self.f.system_folders():
            p = self.p.join(d, "libcuda.so.1")
            if self.f.exists(p):  # (WSL: libcuda.so.1 only; the version is in /proc when the module is there)
                text = self.f.text("/proc/driver/nvidia/version") or ""
                m = re.search(r"Kernel Module\s+(\d+\.\d+(?:\.\d+)?)", text)
                return self._driver(p, None, m.group(1) if m else None)
        return None

    def _driver(self, path: str, fv: Optional[str], version: Optional[str]) -> Driver:
        sup, fam = self.table.supports(version, self.f.platform) if version else (None, None)
        return Driver(path, fv, version, sup, fam)

    # toolkits
    def toolkits(self) -> list[Toolkit]:
        found: dict[str, tuple[str, list[str]]] = {}  # root key -> (root, sources)

        def add(root: str, source: str) -> None:
            root = winpath.normalize(root) if self.win else posixpath.normpath(self.f.real_path(root))
            k = self.p.key(root)
            found.setdefault(k, (root, []))[1].append(source)

        if self.win:
            for name, value in sorted(self.env.items()):
                if (name == "CUDA_PATH" or name.startswith("CUDA_PATH_V")) and value.strip() and winpath.is_absolute(value.strip()):
                    add(value.strip(), name)
            for e in self.path:
                b = winpath.basename(e).lower()
                root = winpath.dirname(e) if b == "bin" else winpath.dirname(winpath.dirname(e)) if b == "x64" else ""
                if root and _VFOLDER.match(winpath.basename(root)):
                    add(root, "PATH")
            for parent in self.f.toolkit_parents():
                for d in self.f.folders_in(parent):
                    if _VFOLDER.match(winpath.basename(d)):
                        add(d, "default folder")
        else:
            for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
                if self.env.get(name, "").startswith("/"):
                    add(self.env[name], name)
            for parent in self.f.toolkit_parents():
                for d in self.f.folders_in(parent):
                    if _LINUX_TK.match(self.p.base(d)):
                        add(d, "default folder")
            for e in self.path:
                if self.p.base(e) in ("lib64", "lib") and _LINUX_TK.match(self.p.base(self.p.parent(e))):
                    add(self.p.parent(e), "LD_LIBRARY_PATH")
        made = [self._toolkit(root, tuple(dict.fromkeys(src))) for root, src in found.values()]
        out = [t for t in made if t is not None]
        return sorted(out, key=lambda t: (t.path_index is None, t.path_index or 0, [-x for x in vtuple(t.version)]))

    def _toolkit(self, root: str, sources: tuple[str, ...]) -> Optional[Toolkit]:
        if self.win:
            bins = [self.p.join(root, "bin"), self.p.join(root, "bin", "x64")]
        else:
            bins = [self.p.join(root, "lib64"), self.p.join(root, "lib"), self.p.join(root, "targets", "x86_64-linux", "lib")]
        files = [p for b in bins for p in self.f.files_in(b)]
        cudart = cublas = None
        for p in files:
            n = self.p.base(p)
            low = n.lower()
            if cudart is None and (low.startswith("cudart64_") or (low.startswith("libcudart.so.") and low.count(".") >= 2)):
                cudart = self._component(p)
            if cublas is None and (low.startswith("cublas64_") or (low.startswith("libcublas.so.") and low.count(".") >= 2)):
                cublas = self._component(p)
        if cudart is not None and cudart.version is None and not self.win:  # libcudart.so.13 alone: the toolkit's version.json
            text = self.f.text(self.p.join(root, "version.json")) or ""
            m = re.search(r'"cuda_cudart"\s*:\s*\{[^}]*"version"\s*:\s*"([\d.]+)"', text)
            if m:
                cudart = Component(cudart.name, cudart.path, cudart.major, m.group(1))
        version = self._root_version(root, cudart)
        if version is None:
            return None
        binf = next((b for b in bins if any(self.p.key(self.p.parent(x)) == self.p.key(b) for x in files)), bins[0])
        return Toolkit(version, root, binf, sources, self.path_index(binf), cudart, cublas, exists=bool(files) or bool(self.f.folders_in(root)))

    def _root_version(self, root: str, cudart: Optional[Component]) -> Optional[str]:
        name = self.p.base(root)
        m = _VFOLDER.match(name) or _LINUX_TK.match(name)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
        text = self.f.text(self.p.join(root, "version.json"))
        if text:
            mm = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"(\d+\.\d+)', text)
            if mm:
                return mm.group(1)
        if cudart is not None and cudart.version:
            return ".".join(cudart.version.split(".")[:2])
        return None

    def _component(self, path: str) -> Component:
        name = self.p.base(path)
        facts = self.f.file(path)
        fv = facts.pe.file_version if facts is not None and facts.pe is not None else None
        low = name.lower()
        if low.startswith("cudart64_"):
            version = cudart_cuda_version(fv) or fv
        elif self.win:
            version = fv
        else:  # libcudart.so.12.4.127: the version is in the name
            m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", name)
            version = m.group(1) if m else None
        major = cuda_major_of_name(name)
        if major is None:
            major = cudnn_major_of_name(name)
        return Component(name, path, major, version)

    # cuDNN
    def cudnns(self, toolkits: list[Toolkit], wheels: list[Wheel], frameworks_dirs: list[str]) -> list[Cudnn]:
        places: list[tuple[str, Optional[int], str]] = []  # (folder, CUDA major the place says, how)
        for t in toolkits:
            places.append((t.bin, vtuple(t.version)[0], "toolkit"))
        for w in wheels:
            if w.name in ("cudnn",) or any(cudnn_major_of_name(n) for n in w.files):
                places.append((w.folder, w.cuda_major, "wheel"))
        if self.win:  # (the places that say a CUDA major first: a file is listed once, from the first place)
            for v in self.f.folders_in(WIN_CUDNN_ROOT):  # cuDNN 9's installer: CUDNN\v9.x\bin\12.x\cudnn64_9.dll
                b = self.p.join(v, "bin")
                for sub in self.f.folders_in(b):
                    m = re.match(r"^(\d+)\.", self.p.base(sub))
                    places.append((sub, int(m.group(1)) if m else None, "folder"))
                places.append((b, None, ""))
        for e in self.path:
            places.append((e, None, ""))
        if not self.win:
            for d in self.f.system_folders():
                places.append((d, None, ""))
        for d in frameworks_dirs:
            places.append((d, None, ""))
        out: dict[str, Cudnn] = {}
        for folder, place_major, how in places:
            files = self.f.files_in(folder)
            for p in files:
                major = cudnn_major_of_name(self.p.base(p))
                if major is None or self.p.key(p) in out:
                    continue
                facts = self.f.file(p)
                version = facts.pe.file_version if facts is not None and facts.pe is not None else None
                if not self.win:
                    m = _LINUX_CUDNN.match(self.p.base(p))
                    version = f"{m.group(1)}{m.group(2)}" if m and m.group(2) else None
                    if not version and any(_LINUX_CUDNN.match(self.p.base(x)) and self.p.base(x).count(".") > 2 for x in files):
                        continue  # libcudnn.so.9 next to libcudnn.so.9.1.0: one row, the versioned one
                imported = self._imported_cuda_major(files)
                cm, frm = (imported, "imports") if imported is not None else (place_major, how) if place_major is not None else (None, "")
                out[self.p.key(p)] = Cudnn(version, major, p, folder, cm, frm, self.path_index(folder))
        return list(out.values())

    def _imported_cuda_major(self, files: list[str]) -> Optional[int]:
        """The CUDA major the cuDNN files of a folder import (cudnn_ops64_9.dll imports cublasLt64_12.dll)."""
        for p in files:
            if not self.p.base(p).lower().startswith("cudnn"):
                continue
            facts = self.f.file(p)
            if facts is None or facts.pe is None:
                continue
            for imp in facts.pe.imports + facts.pe.delay_imports:
                m = cuda_major_of_name(imp.dll)
                if m is not None:
                    return m
        return None

    # nvidia-* wheels
    def wheels(self) -> list[Wheel]:
        out = []
        for site in self.f.site_packages():
            for pkg in self.f.folders_in(self.p.join(site, "nvidia")):
                subs = ["bin", self.p.join("bin", "x86_64"), self.p.join("bin", "arm64")] if self.win else ["lib"]
                for s in subs:
                    folder = self.p.join(pkg, s)
                    names = tuple(self.p.base(x) for x in self.f.files_in(folder) if is_cuda_dll(self.p.base(x)))
                    if not names:
                        continue
                    majors = [m for m in map(cuda_major_of_name, names) if m is not None]
                    major = max(majors) if majors else self._wheel_major(site, self.p.base(pkg))
                    out.append(Wheel(self.p.base(pkg), folder, names, major, self.path_index(folder) is not None))
        return out

    def _wheel_major(self, site: str, pkg: str) -> Optional[int]:
        """The CUDA major of a wheel whose file names say none (cuDNN, cuFFT): its dist-info name
        (nvidia_cudnn_cu12-9.1.0.70.dist-info); the consolidated folder nvidia\\cu13."""
        m = re.match(r"^cu(\d+)$", pkg)
        if m:
            return int(m.group(1))
        for d in self.f.folders_in(site):
            mm = re.match(rf"^nvidia_{re.escape(pkg)}_cu(\d+)-.*\.dist-info$", self.p.base(d), re.I)
            if mm:
                return int(mm.group(1))
        return None

    # frameworks
    def frameworks(self) -> list[Framework]:
        out: list[Framework] = []
        for site in self.f.site_packages():
            dist = self._dist_infos(site)
            for read in (self._torch, self._onnxruntime, self._ctranslate2, self._tensorflow, self._paddle, self._cupy,
                         self._jax):
                fw = read(site, dist)
                if fw is not None:
                    out.append(fw)
        return out

    def _dist_infos(self, site: str) -> dict[str, str]:
        """normalized distribution name -> version, from the dist-info folder names."""
        out = {}
        for d in self.f.folders_in(site):
            m = re.match(r"^(.+?)-([^-]+)\.dist-info$", self.p.base(d))
            if m:
                out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
        return out

    def _bundled(self, folder: str) -> tuple[str, ...]:
        return tuple(self.p.base(x) for x in self.f.files_in(folder) if is_cuda_dll(self.p.base(x)))

    def _py_value(self, text: Optional[str], name: str) -> tuple[bool, Optional[str]]:
        """(whether `name` is assigned in the text, its string value or None)."""
        if not text:
            return False, None
        m = re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|(None))", text, re.M)
        if not m:
            return False, None
        return True, m.group(1) if m.group(1) is not None else m.group(2)

    def _torch(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "torch")
        lib = self.p.join(root, "lib")
        text = self.f.text(self.p.join(root, "version.py"))
        bundles = self._bundled(lib)
        if text is None and not self.f.files_in(lib) and "torch" not in dist:
            return None
        has_v, version = self._py_value(text, "__version__")
        has_c, cuda = self._py_value(text, "cuda")
        cuda = _version_text(cuda)
        version = version or dist.get("torch")
        frm = "torch/version.py" if has_c else ""
        if not has_c:  # no version.py in the world: the CUDA runtime torch\lib bundles says it
            cudart = next((x for x in self.f.files_in(lib) if self.p.base(x).lower().startswith(("cudart64_", "libcudart.so"))), None)
            if cudart is not None:
                c = self._component(cudart)
                cuda = (c.version if c.version and re.match(r"^\d+\.\d+$", c.version) else None) or (str(c.major) if c.major else None)
                frm = f"{self.p.base(cudart)} in torch/lib"
            elif version and "+cu" in version:
                m = re.search(r"\+cu(\d+)(\d)$", version)
                cuda = f"{m.group(1)}.{m.group(2)}" if m else None
                frm = "its version's +cu tag"
        cpu = has_c and cuda is None
        if not has_c and cuda is None and version and "+cpu" in version:
            cpu, frm = True, "its version's +cpu tag"
        major = _major(cuda)
        cudnn = next((m for m in map(cudnn_major_of_name, bundles) if m), None)
        # torch's Windows CUDA wheels bundle their CUDA DLLs in torch\lib; on Linux they come from the nvidia-* wheels
        needs: tuple[str, ...] = ()
        if major and not self.win and not any(cuda_major_of_name(n) for n in bundles):
            needs = (f"libcublas.so.{major}",)
        return Framework("torch", version, root, cuda, major, frm, cpu, cudnn, bundles, needs)

    def _onnxruntime(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "onnxruntime")
        capi = self.p.join(root, "capi")
        if "onnxruntime-gpu" not in dist and "onnxruntime" not in dist and not self.f.files_in(capi):
            return None
        provider = self.p.join(capi, "onnxruntime_providers_cuda.dll" if self.win else "libonnxruntime_providers_cuda.so")
        if "onnxruntime-gpu" not in dist and not self.f.exists(provider):
            # the CPU package (onnxruntime, not onnxruntime-gpu: the same module, no CUDA execution provider)
            return Framework("onnxruntime", dist["onnxruntime"], root, None, None, "its distribution, onnxruntime",
                             True) if "onnxruntime" in dist else None
        # build_and_package_info.py (every build: cuda_version = '13.0'; cudnn_version in some), version_info.py
        # (Windows builds: cuda_version = "13.0.88", cudnn_version = "9")
        cuda = cudnn = None
        frm = ""
        for fname in ("build_and_package_info.py", "version_info.py"):
            text = self.f.text(self.p.join(capi, fname))
            c = _version_text(self._py_value(text, "cuda_version")[1])
            if cuda is None and c:
                cuda, frm = c, f"onnxruntime/capi/{fname}"
            cudnn = cudnn or _version_text(self._py_value(text, "cudnn_version")[1])
        facts = self.f.file(provider)
        imports = [i.dll for i in facts.pe.imports] if facts is not None and facts.pe is not None else []
        cuda_imports = tuple(n for n in imports if cuda_major_of_name(n) is not None)
        major = _major(cuda)
        if cuda_imports:
            imajor = cuda_major_of_name(cuda_imports[0])
            if major is None:
                major, cuda, frm = imajor, str(imajor), f"imports of {self.p.base(provider)}"
        version = dist.get("onnxruntime-gpu")
        if version is None:
            core = self.f.file(self.p.join(capi, "onnxruntime.dll"))
            fv = core.pe.file_version if core is not None and core.pe is not None else None
            version = ".".join(fv.split(".")[:3]) if fv else None
        needs = cuda_imports or ((f"cublasLt64_{major}.dll", f"cublas64_{major}.dll") if major and self.win else
                                 (f"libcublasLt.so.{major}", f"libcublas.so.{major}") if major else ())
        cudnn_major = _major(cudnn)
        if cudnn_major:
            needs = needs + ((f"cudnn64_{cudnn_major}.dll",) if self.win else (f"libcudnn.so.{cudnn_major}",))
        return Framework("onnxruntime-gpu", version, root, cuda, major, frm, False, cudnn_major,
                         self._bundled(capi), needs)

    def _ctranslate2(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "ctranslate2")
        files = self.f.files_in(root)
        if not files and "ctranslate2" not in dist:
            return None
        _, version = self._py_value(self.f.text(self.p.join(root, "version.py")), "__version__")
        version = version or dist.get("ctranslate2")
        major: Optional[int] = None
        frm = ""
        for p in files:  # 4.5.0 imports cudnn64_9.dll; a build linked to cuBLAS imports it
            facts = self.f.file(p)
            for imp in (facts.pe.imports if facts is not None and facts.pe is not None else ()):
                m = cuda_major_of_name(imp.dll)
                if m is not None:
                    major, frm = m, f"imports of {self.p.base(p)}"
        if major is None:  # 4.8.5 loads cuBLAS at run time: the name is in the DLL (live machine only)
            lib = self.p.join(root, "ctranslate2.dll" if self.win else "libctranslate2.so")
            name = self.f.find_in_file(lib, rb"cublas64_(\d+)\.dll" if self.win else rb"libcublas\.so\.(\d+)")
            if name:
                major, frm = int(name), f"the cuBLAS name in {self.p.base(lib)}"
        bundles = self._bundled(root)
        cudnn = next((m for m in map(cudnn_major_of_name, bundles) if m), None)
        needs = ((f"cublas64_{major}.dll",) if self.win else (f"libcublas.so.{major}",)) if major else ()
        return Framework("ctranslate2", version, root, str(major) if major else None, major, frm, False, cudnn, bundles, needs)

    def _tensorflow(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "tensorflow")
        text = self.f.text(self.p.join(root, "python", "platform", "build_info.py"))
        names = [k for k in dist if k in ("tensorflow", "tensorflow-gpu", "tensorflow-intel", "tensorflow-cpu")]
        if text is None and not names:
            return None
        version = dist.get(names[0]) if names else None
        cuda = cudnn = None
        if text:
            # (a dict on Windows, {'cuda_version': '64_112'}; an OrderedDict of pairs on Linux, ('cuda_version', '11.2'))
            m = re.search(r"['\"]cuda_version['\"]\s*[:,]\s*['\"]([^'\"]*)['\"]", text)
            n = re.search(r"['\"]cudnn_version['\"]\s*[:,]\s*['\"]([^'\"]*)['\"]", text)
            cuda = _version_text(_tf_version(m.group(1))) if m else None
            cudnn = _version_text(_tf_version(n.group(1))) if n else None
        major = _major(cuda)
        cudnn_major = _major(cudnn)
        needs: tuple[str, ...] = ()
        if text:
            needs = tuple(re.findall(r"['\"](?:cudart|cudnn)_dll_name['\"]\s*[:,]\s*['\"]([^'\"]+)['\"]", text))
        # (its build_info.py is where both were read: a CUDA build's cuda_version, a CPU build's lack of one)
        return Framework("tensorflow", version, root, cuda, major, "tensorflow/python/platform/build_info.py" if text else "",
                         bool(text) and cuda is None, cudnn_major, (), needs)

    def _paddle(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "paddle")
        text = self.f.text(self.p.join(root, "version", "__init__.py")) or self.f.text(self.p.join(root, "version.py"))
        names = [k for k in dist if k in ("paddlepaddle-gpu", "paddlepaddle")]
        if text is None and not names:
            return None
        _, version = self._py_value(text, "full_version")
        version = version or (dist.get(names[0]) if names else None)
        cuda = _version_text(self._py_value(text, "cuda_version")[1])
        cudnn = _version_text(self._py_value(text, "cudnn_version")[1])
        major = _major(cuda)
        cudnn_major = _major(cudnn)
        bundles = self._bundled(self.p.join(root, "libs"))
        return Framework("paddle", version, root, cuda, major, "paddle/version/__init__.py" if cuda else "",
                         text is not None and cuda is None, cudnn_major, bundles, ())

    def _jax(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        """jaxlib has no CUDA of its own: its CUDA build is the jax-cuda<M>-plugin distribution (pip install
        'jax[cuda12]'); without one jax runs on the CPU (jaxlib has no CUDA build for native Windows at all)."""
        if "jaxlib" not in dist:
            return None
        plugin = next((k for k in sorted(dist) if re.match(r"^jax-cuda\d+-plugin$", k)), None)
        major = int(re.sub(r"\D", "", plugin)) if plugin else None
        return Framework("jax", dist.get("jax") or dist["jaxlib"], self.p.join(site, "jaxlib"),
                         str(major) if major else None, major,
                         f"the {plugin} distribution" if plugin else "no jax-cuda plugin distribution", plugin is None)

    def _cupy(self, site: str, dist: dict[str, str]) -> Optional[Framework]:
        root = self.p.join(site, "cupy")
        name = next((k for k in dist if re.match(r"^cupy-cuda\d+x?$", k)), None)
        text = self.f.text(self.p.join(root, ".data", "_wheel.json"))
        if name is None and not self.f.files_in(root) and text is None:
            return None
        version = dist.get(name) if name else None
        major = cuda = None
        frm = ""
        if name:
            m = re.match(r"^cupy-cuda(\d+?)(\d?)x?$", name)
            digits = name[len("cupy-cuda"):].rstrip("x")
            if name.endswith("x"):
                cuda, major = digits, int(digits)
            elif m:  # cupy-cuda117: CUDA 11.7
                cuda, major = f"{digits[:-1]}.{digits[-1]}", int(digits[:-1])
            frm = f"the {name} distribution"
        # cupy/.data/_wheel.json (the wheel's build facts): {"cuda": "12.x", "cudnn": {...}, ...}; its cuDNN, NCCL and
        # cuTENSOR are optional (preloaded when installed): not needs
        if text and major is None:
            mm = re.search(r'"cuda"\s*:\s*"(\d+)\.', text)
            if mm:
                major, cuda, frm = int(mm.group(1)), mm.group(1), "cupy/.data/_wheel.json"
        needs = ((f"cublas64_{major}.dll",) if self.win else (f"libcublas.so.{major}",)) if major else ()
        return Framework("cupy", version, root, cuda, major, frm, False, None, (), needs)

    def build(self) -> CudaTable:
        driver = self.driver()
        toolkits = self.toolkits()
        wheels = self.wheels()
        frameworks = self.frameworks()
        fw_dirs = [fw.folder if fw.name != "torch" else self.p.join(fw.folder, "lib") for fw in frameworks]
        fw_dirs += [self.p.join(fw.folder, "capi") for fw in frameworks if fw.name == "onnxruntime-gpu"]
        cudnns = self.cudnns(toolkits, wheels, fw_dirs)
        # (a trace knows the driver is absent only where the program looked for it: nvcuda.dll probed, libcuda.so.1
        # searched for by ld.so; a program that never initialised CUDA says nothing of the driver)
        lib = "nvcuda.dll" if self.win else "libcuda.so.1"
        known = driver is not None or all(self.f.knows(self.p.join(d, lib)) for d in self.f.system_folders())
        ask = getattr(self.f, "gpu_facts", None)  # (why no driver: a machine without an NVIDIA GPU needs none)
        gpu = rule_driver_state(ask()) if driver is None and ask is not None else ""
        t = CudaTable(self.f.platform, self.f.origin, driver, tuple(toolkits), tuple(cudnns), tuple(wheels),
                      tuple(frameworks), (), tuple(self.path), self.env.get("CUDA_PATH"), known, self.table.sources, gpu)
        return CudaTable(**{**t.__dict__, "mismatches": tuple(mismatches(t, self.f.files_in))})


def _tf_version(v: str) -> Optional[str]:
    """TensorFlow's build_info on Windows writes '64_112' for CUDA 11.2 and '64_8' for cuDNN 8; Linux '12.3'."""
    m = re.match(r"^64_(\d+)$", v)
    if m:
        d = m.group(1)
        return f"{d[:-1]}.{d[-1]}" if len(d) >= 3 else d
    return v or None


def _name_in_binary(path: str, pattern: bytes) -> Optional[str]:
    """The first match's group of `pattern` in a file's bytes (a DLL that loads cuBLAS by name at run time)."""
    import mmap

    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            m = re.search(pattern, mm)
            return m.group(1).decode("ascii") if m else None
    except (OSError, ValueError):
        return None


def cuda_table(facts: CudaFacts) -> CudaTable:
    """The CUDA stack table of a world (docs/cuda.md)."""
    return _Builder(facts).build()


# --- the mismatches: one rule each --------------------------------------------------------------------------

def _label(fw: Framework) -> str:
    return f"{fw.name} {fw.version}" if fw.version else fw.name


@dataclass(frozen=True)
class _Needer:
    subject: str
    cuda: str           # major.minor, or the major alone
    bundled: bool       # it brings its CUDA libraries (torch\\lib)
    toolkit: bool       # a toolkit (it builds without a driver), not a framework


def _needers(t: CudaTable) -> list[_Needer]:
    """Everything that needs the driver: each framework built for CUDA, each toolkit."""
    out = [_Needer(_label(fw), fw.cuda, any(cuda_major_of_name(b) is not None for b in fw.bundles), False)
           for fw in t.frameworks if fw.cuda]
    out += [_Needer(f"CUDA {tk.version} toolkit ({tk.root})", tk.version, False, True) for tk in t.toolkits if tk.exists]
    return [n for n in out if _major(n.cuda) is not None]


def rule_no_driver(t: CudaTable) -> list[Mismatch]:
    """Something needs CUDA (a framework built for it, a toolkit) and no NVIDIA driver is there (a world
    that cannot tell, a trace that never touched nvcuda.dll, says nothing)."""
    if t.driver is not None or not t.driver_known:
        return []
    needs = _needers(t)
    if not needs:
        return []
    table = driver_table()
    out = []
    for n in needs:
        drv = table.toolkit_minimum(n.cuda, t.platform) if "." in n.cuda else table.family_minimum(vtuple(n.cuda)[0], t.platform)
        # (a toolkit builds without a driver: a warning; a framework built for CUDA cannot run: an error)
        # (no NVIDIA GPU here: no driver is a fix, and the words say why: fixwords.DRIVER_STATE_WORDS)
        fix = Fix("driver", "install_driver", name="nvcuda.dll" if t.platform == "windows" else "libcuda.so.1",
                  value="no_gpu", python=False) if t.gpu == "no_gpu" else \
            Fix("driver", "install_driver", driver=drv or "", python=False)
        out.append(Mismatch("no_driver", "warning" if n.toolkit else "error", n.subject, needs_cuda=n.cuda,
                            needs_driver=drv, bundled=n.bundled, fixes=(fix,)))
    return out


def rule_driver_too_old(t: CudaTable) -> list[Mismatch]:
    """The driver is older than what a framework's or toolkit's CUDA needs: below the family minimum it
    cannot run it ("driver_too_old"); above it but below the release's own driver (release notes, Table 3)
    it runs it only through minor version compatibility, with a limited feature set: PTX code newer than
    the driver fails to JIT ("driver_minor_compat")."""
    d = t.driver
    if d is None or not d.version:
        return []
    table = driver_table()
    out = []
    for n in _needers(t):
        subject, cuda, bundled = n.subject, n.cuda, n.bundled
        major = vtuple(cuda)[0]
        full = table.toolkit_minimum(cuda, t.platform) if "." in cuda else None
        family = table.family_minimum(major, t.platform)
        if family and vtuple(d.version) < vtuple(family):
            need = full or family
            out.append(Mismatch("driver_too_old", "error", subject, needs_cuda=cuda, driver=d.version,
                                driver_supports=d.supports, needs_driver=need, found=(d.path,), bundled=bundled,
                                fixes=(Fix("driver", "update_driver", driver=need or "", family_driver=(family if full and full != family else None) or "", python=False),)))
        elif full and vtuple(d.version) < vtuple(full):
            out.append(Mismatch("driver_minor_compat", "warning", subject, needs_cuda=cuda, driver=d.version,
                                driver_supports=d.supports, needs_driver=full, found=(d.path,), bundled=bundled,
                                fixes=(Fix("driver", "update_driver", driver=full or "", family_driver=family or "", python=False),)))
    return out


def _places(t: CudaTable) -> list[tuple[str, Optional[int], str]]:
    """(folder, CUDA major, what) of every place with CUDA libraries: toolkits' bins and wheels."""
    out: list[tuple[str, Optional[int], str]] = [(tk.bin, vtuple(tk.version)[0], f"CUDA {tk.version}")
                                                 for tk in t.toolkits if tk.exists]
    out += [(w.folder, w.cuda_major, f"nvidia-{w.name} wheel") for w in t.wheels]
    return out


def rule_cuda_major_missing(t: CudaTable, files_in) -> list[Mismatch]:
    """A framework that loads its CUDA libraries from outside its folder needs major M's files
    (onnxruntime-gpu 1.31.1: cublasLt64_13.dll) and no toolkit, wheel or PATH folder has a file of that name."""
    out = []
    for fw in t.frameworks:
        names = [n for n in fw.needs if cuda_major_of_name(n) is not None]
        if not names or fw.cuda_major is None:
            continue
        folders = [f for f, _, _ in _places(t)] + list(t.path) + [fw.folder]
        if any(_has(files_in, f, n) for f in folders for n in names):
            continue
        majors = sorted({m for _, m, _ in _places(t) if m is not None})
        have = [f"CUDA {m}" for m in majors]
        fixes = [Fix("cuda", "install_cuda", cuda=str(fw.cuda_major), package=_cublas_wheel(fw.cuda_major, t.platform), python=False)]
        others = [m for m in majors if m != fw.cuda_major]  # (a build for the major it has is what it is already)
        if others:
            fixes.append(Fix("cuda", "other_cuda_build", package=fw.name, cuda=str(others[-1]), python=False))
        out.append(Mismatch("cuda_major_missing", "error", _label(fw), needs_cuda=fw.cuda, dll=names[0],
                            have=", ".join(have) or None, fixes=tuple(fixes)))
    return out


def _cublas_wheel(major: int, platform: Platform) -> Optional[str]:
    """The pip package with cuBLAS of a CUDA major (PyPI: nvidia-cublas for 13, -cu12, -cu11); none before 11."""
    return "nvidia-cublas" if major >= 13 else f"nvidia-cublas-cu{major}" if major >= 11 else None


def _has(files_in, folder: str, name: str) -> bool:
    low = name.lower()
    return any(p.replace("/", "\\").rsplit("\\", 1)[-1].lower() == low for p in files_in(folder))


def _first_on_path(t: CudaTable, files_in, name: str) -> Optional[tuple[int, str]]:
    for i, e in enumerate(t.path):
        if _has(files_in, e, name):
            return i + 1, e
    return None


def rule_framework_toolkit_major(t: CudaTable, files_in) -> list[Mismatch]:
    """A framework needs CUDA M's files from PATH (it bundles none) and PATH reaches another major's
    toolkit only, while a toolkit of major M is installed off PATH."""
    if t.platform != "windows":
        return []
    out = []
    for fw in t.frameworks:
        names = [n for n in fw.needs if cuda_major_of_name(n) is not None]
        if not names or fw.cuda_major is None or _first_on_path(t, files_in, names[0]) is not None:
            continue
        on_path = [tk for tk in t.toolkits if tk.path_index is not None and tk.exists]
        off = [tk for tk in t.toolkits if tk.exists and tk.path_index is None and vtuple(tk.version)[0] == fw.cuda_major
               and _has(files_in, tk.bin, names[0])]
        if not on_path or not off or all(vtuple(tk.version)[0] == fw.cuda_major for tk in on_path):
            continue
        best = max(off, key=lambda tk: vtuple(tk.version))
        out.append(Mismatch("framework_toolkit_major", "error", _label(fw), needs_cuda=fw.cuda, dll=names[0],
                            have=f"CUDA {on_path[0].version}", found=(on_path[0].bin, best.bin),
                            fixes=(path_first(t.platform, best.bin),)))
    return out


def rule_path_order(t: CudaTable, files_in) -> list[Mismatch]:
    """Two toolkits of one CUDA major are on PATH: their DLLs share names (cublas64_12.dll), so the first
    one wins every bare-name load. A mismatch when the winner is older than what CUDA_PATH names, or than
    the CUDA minor a framework that takes it from PATH was built for."""
    if t.platform != "windows":
        return []
    out = []
    on_path = sorted((tk for tk in t.toolkits if tk.path_index is not None and tk.exists), key=lambda tk: tk.path_index or 0)
    cuda_path = next((tk for tk in t.toolkits if "CUDA_PATH" in tk.sources), None)
    for i, first in enumerate(on_path):
        for later in on_path[i + 1:]:
            if vtuple(later.version)[0] != vtuple(first.version)[0] or vtuple(later.version) <= vtuple(first.version):
                continue
            shared = [c.name for c in (first.cudart, first.cublas) if c is not None and _has(files_in, later.bin, c.name)]
            if not shared:
                continue
            wants = []
            if cuda_path is not None and cuda_path.root == later.root:
                wants.append(f"CUDA_PATH ({later.root})")
            wants += [_label(fw) for fw in t.frameworks if fw.cuda and fw.cuda_major == vtuple(first.version)[0]
                      and vtuple(fw.cuda)[:2] > vtuple(first.version)[:2] and any(n.lower() in (s.lower() for s in shared) for n in fw.needs)]
            if not wants:
                continue
            out.append(Mismatch("path_order", "warning", ", ".join(wants), needs_cuda=later.version, dll=shared[0],
                                have=f"CUDA {first.version}", found=(first.bin, later.bin),
                                fixes=(Fix("path", "reorder_path", folder=later.bin, ahead_of=first.bin, python=False),)))
    return out


def rule_cudnn_major_missing(t: CudaTable) -> list[Mismatch]:
    """A framework needs cuDNN K (onnxruntime-gpu 1.31.1: cudnn_version = "9") and no cuDNN K is there
    (only another major, or none)."""
    out = []
    for fw in t.frameworks:
        if fw.cudnn_major is None or not any(cudnn_major_of_name(n) for n in fw.needs):
            continue
        if any(c.major == fw.cudnn_major for c in t.cudnns):
            continue
        have = sorted({f"cuDNN {c.major}" for c in t.cudnns})
        out.append(Mismatch("cudnn_major_missing", "error", _label(fw), needs_cuda=fw.cuda,
                            dll=next(n for n in fw.needs if cudnn_major_of_name(n)), have=", ".join(have) or None,
                            fixes=(Fix("cuda", "install_cudnn", cudnn=fw.cudnn_major, cuda=str(fw.cuda_major) if fw.cuda_major else "",
                                      package=_cudnn_wheel(fw.cudnn_major, fw.cuda_major), python=False),)))
    return out


def _cudnn_wheel(cudnn: int, cuda: Optional[int]) -> Optional[str]:
    """The pip package of cuDNN for a CUDA major (PyPI: nvidia-cudnn-cu11, -cu12, -cu13; plain nvidia-cudnn is a
    placeholder that installs nothing)."""
    return f"nvidia-cudnn-cu{cuda}" if cuda and cuda >= 11 else None


def rule_cudnn_cuda_major(t: CudaTable) -> list[Mismatch]:
    """A cuDNN built for CUDA M (its DLLs import cublasLt64_M.dll, or its folder or wheel says M) where
    CUDA N is used: in a CUDA N toolkit's bin, or the first cudnn64_K.dll on PATH for a framework of CUDA N."""
    out = []
    for c in t.cudnns:
        if c.cuda_major is None:
            continue
        tk = next((tk for tk in t.toolkits if tk.bin == c.folder), None)
        if tk is not None and vtuple(tk.version)[0] != c.cuda_major:
            out.append(Mismatch("cudnn_cuda_major", "error", f"CUDA {tk.version} toolkit ({tk.root})",
                                needs_cuda=tk.version, dll=winpath.basename(c.path) if t.platform == "windows" else posixpath.basename(c.path),
                                have=f"cuDNN {c.version or c.major} for CUDA {c.cuda_major}", found=(c.path,),
                                fixes=(Fix("cuda", "install_cudnn", cudnn=c.major, cuda=tk.version.split(".")[0], python=False),)))
    for fw in t.frameworks:
        names = [n for n in fw.needs if cudnn_major_of_name(n)]
        if not names or fw.cuda_major is None:
            continue
        first = sorted((c for c in t.cudnns if c.on_path is not None and c.major == cudnn_major_of_name(names[0])),
                       key=lambda c: c.on_path or 0)
        if first and first[0].cuda_major is not None and first[0].cuda_major != fw.cuda_major:
            c = first[0]
            out.append(Mismatch("cudnn_cuda_major", "error", _label(fw), needs_cuda=fw.cuda, dll=names[0],
                                have=f"cuDNN {c.version or c.major} for CUDA {c.cuda_major}", found=(c.path,),
                                fixes=(Fix("cuda", "install_cudnn", cudnn=c.major, cuda=str(fw.cuda_major),
                                          package=_cudnn_wheel(c.major, fw.cuda_major), python=False),)))
    return out


def rule_wheel_not_searched(t: CudaTable, files_in) -> list[Mismatch]:
    """An nvidia-* wheel's folder holds a file a framework needs, but nothing the framework's load searches
    reaches it: not on PATH, not bundled, no other copy on PATH (Windows: pip never puts these folders on
    PATH, and torch's and onnxruntime's loaders do not add them by themselves)."""
    if t.platform != "windows":
        return []
    out = []
    for fw in t.frameworks:
        for name in fw.needs:
            if _first_on_path(t, files_in, name) is not None or _has(files_in, fw.folder, name):
                continue
            wheel = next((w for w in t.wheels if not w.searched and any(n.lower() == name.lower() for n in w.files)), None)
            if wheel is None:
                continue
            if fw.name == "onnxruntime-gpu":
                fix = Fix("package", "package_mechanism", name=name, package="onnxruntime", call="onnxruntime.preload_dlls()",
                          python=True)
            else:
                fix = Fix("preload", "preload_path", name=name, path=winpath.join(wheel.folder, name),
                          files=(winpath.join(wheel.folder, name),), python=True)
            out.append(Mismatch("wheel_not_searched", "error", _label(fw), needs_cuda=fw.cuda, dll=name,
                                found=(wheel.folder,), fixes=(fix, path_first(t.platform, wheel.folder))))
            break
    return out


def mismatches(t: CudaTable, files_in) -> list[Mismatch]:
    return (rule_no_driver(t) + rule_driver_too_old(t) + rule_cuda_major_missing(t, files_in)
            + rule_framework_toolkit_major(t, files_in) + rule_path_order(t, files_in) + rule_cudnn_major_missing(t)
            + rule_cudnn_cuda_major(t) + rule_wheel_not_searched(t, files_in))


# --- a trace and a scenario as worlds -------------------------------------------------------------------------

def rule_imported_cpu_build(t: CudaTable, imported: Iterable[str]) -> list[Framework]:
    """The frameworks the program imported (`imported`: its py_import modules, any submodule counts) that are CPU
    builds (their own files say no CUDA: torch 2.13.0+cpu's torch/version.py has cuda = None; TensorFlow's
    build_info without cuda_version, every TensorFlow 2.11+ for native Windows): such a build never loads CUDA,
    so a program that asks for the GPU gets none and every load succeeds ("why is torch.cuda.is_available()
    False?"). In the table's order."""
    tops = {m.split(".", 1)[0] for m in imported if isinstance(m, str)}
    return [fw for fw in t.frameworks if fw.cpu_build and CPU_BUILD_FRAMEWORKS.get(fw.name) in tops]


def rule_mismatch_of_the_run(m: Mismatch, opened: Iterable[str], failed: Iterable[str]) -> bool:
    """Whether a mismatch of a trace's CUDA table is about the run the trace is of, so the report shows the table:
    the run opened a file of it (under a folder of `m.found`, or one of them, or a file named `m.dll`), or a load of
    it failed (`failed`: the failed loads' names and leaves; `m.dll` among them, or any CUDA, cuDNN, TensorRT, NCCL
    or driver library: CUDA was in play). Else it is the environment's, not the run's: an h5py import that failed on
    hdf5.dll in an environment that also holds onnxruntime-gpu is not told onnxruntime-gpu lacks cuBLAS 13 (the field
    test under Wine: the report's only other ✗). `dlltrace cuda --trace` shows the whole table whatever the run."""
    dll = (m.dll or "").lower()
    failed = [winpath.basename(x).lower() for x in failed if x]
    if any(x == dll or feature_of(x) in ("CUDA", "cuDNN", "TensorRT", "NCCL", "the NVIDIA driver") for x in failed):
        return True
    places = [winpath.key(f) for f in m.found if f]
    for path in opened:
        k = winpath.key(path)
        if (dll and winpath.basename(k) == dll) or any(k == f or k.startswith(f + "\\") for f in places):
            return True
    return False


def facts_of_scenario(scenario) -> WorldFacts:
    """The table's facts in a scenario: its [[file]] entries (a file's `version` is its PE version), its
    folders, its [process] path and env. Nothing else is made up."""
    known = [f.path for f in scenario.world.all_files()] + list(scenario.source.get("folders", []))
    return WorldFacts(scenario.world, scenario.process, known, origin="scenario")


def trace_texts(trace, pid: Optional[int], join: Callable[[str, str], str]) -> dict[str, str]:
    """The build-facts files the traced Python's py_dists recorded whole (trace/shim.py BUILD_FACT_FILES:
    torch/version.py, onnxruntime's build_and_package_info.py, ...), by their full path."""
    out: dict[str, str] = {}
    for e in trace.of("py_dists", pid=pid):
        for d in e.get("dists") or ():
            site, texts = d.get("site"), d.get("texts")
            if isinstance(site, str) and isinstance(texts, dict):
                out.update({join(site, rel): t for rel, t in texts.items() if isinstance(rel, str) and isinstance(t, str)})
    return out


def facts_of_trace(trace, pid: Optional[int] = None) -> Optional[CudaFacts]:
    """The table's facts in a trace: the variables its `env` event recorded (PATH, CUDA_PATH, CUDA_PATH_V*),
    the files it touched (their `file` events: PE facts with versions) and the folders it saw; site-packages
    from its `py_env`; the frameworks' build facts from its `py_dists`. A Linux trace: LinuxTraceFacts. None
    when the trace has no traced process."""

    if trace.header.platform == "linux":
        return LinuxTraceFacts.of(trace, pid)
    pids = trace.pids
    if pid is None:
        if not pids:
            return None
        pid = pids[0]
    _, process = system_and_process(trace, pid)
    world = recorded_world(trace, pid)
    known = trace.known_file_paths()  # (of a read trace: gathered while it was read)
    known += trace.found_probe_paths(pid)  # (of a read trace: gathered while it was read)
    py = next(trace.of("py_env", pid=pid), None) or {}
    site = [p for p in (py.get("sys_path") or []) if isinstance(p, str) and winpath.basename(p).lower() == "site-packages"
            and winpath.is_absolute(p)]
    texts = trace_texts(trace, pid, lambda a, b: winpath.join(a, b.replace("/", "\\")))
    known += list(texts)
    known += dist_info_folders(trace, pid)
    return WorldFacts(world, process, [k for k in known if k and winpath.is_absolute(k)], site, texts=texts, origin="trace")


def dist_info_folders(trace, pid: Optional[int]) -> list[str]:
    """The dist-info folders of the distributions the traced Python's py_dists event lists (<site>\\<name>-<version>
    .dist-info): the table reads a framework's distribution and version from them (tensorflow-intel 2.15.0, the
    onnxruntime distribution of the CPU build), as LinuxTraceFacts does. A Windows trace's other paths are the files
    the run touched, and no run touches a dist-info folder: without these, a trace's TensorFlow had no version and
    its onnxruntime CPU package was not seen at all."""
    out: list[str] = []
    for e in trace.of("py_dists", pid=pid):
        for d in e.get("dists") or ():
            site, name, version = (d.get(k) if isinstance(d, dict) else None for k in ("site", "name", "version"))
            if isinstance(site, str) and isinstance(name, str) and isinstance(version, str) and name and version:
                out.append(winpath.join(site, f"{name}-{version}.dist-info"))
        break
    return out


class LinuxTraceFacts:
    """The facts of a Linux trace: LD_LIBRARY_PATH as ld.so saw it (audit_start), the objects it opened and the
    files it found (elf_file, objopen), ld.so's system folders (elf_system), site-packages from py_env, the
    installed distributions' dist-info folders and native files (py_dists: RECORD) and the frameworks' build
    facts (py_dists texts). A trace holds no other contents: no driver version unless a libcuda.so.<version>
    was opened, no toolkit's version.json."""

    platform: Platform = "linux"
    origin = "trace"

    def __init__(self, env: Mapping[str, str], files: Iterable[str], folders: Iterable[str], site_packages: Iterable[str],
                 system_folders: Iterable[str], texts: Mapping[str, str], searched: Iterable[str] = ()):
        self._searched = {posixpath.basename(n) for n in searched}  # the names ld.so was asked for
        self.gpu: Optional[GpuFacts] = None  # the machine's NVIDIA GPUs and driver (elf_system's gpu)
        self._env = dict(env)
        self._texts = {posixpath.normpath(k): v for k, v in texts.items()}
        self._files: dict[str, set[str]] = {}
        self._folders: dict[str, set[str]] = {}
        self._known: set[str] = set()
        for f in list(files) + list(self._texts):
            f = posixpath.normpath(f)
            self._known.add(f)
            self._files.setdefault(posixpath.dirname(f), set()).add(f)
            self._note_folder(posixpath.dirname(f))
        for d in folders:
            self._note_folder(posixpath.normpath(d))
        self._site = list(dict.fromkeys(posixpath.normpath(s) for s in site_packages))
        self._system = list(dict.fromkeys(posixpath.normpath(s) for s in system_folders))

    def _note_folder(self, folder: str) -> None:
        while folder not in ("/", "", "."):
            parent = posixpath.dirname(folder)
            kids = self._folders.setdefault(parent, set())
            if folder in kids:
                return
            kids.add(folder)
            folder = parent

    @classmethod
    def of(cls, trace, pid: Optional[int] = None) -> Optional["LinuxTraceFacts"]:
        """The facts of process `pid` (default: the first Python process, else the first process ld.so started)."""
        py = next(trace.of("py_env", pid=pid), None)
        start = next(trace.of("audit_start", pid=pid if pid is not None else (py or {}).get("pid")), None)
        if py is None and start is None:
            return None
        pid = (py or start or {}).get("pid")
        env = {}
        if start is not None and start.get("has_ld_library_path"):
            env["LD_LIBRARY_PATH"] = str(start.get("ld_library_path") or "")
        # (the objects ld.so opened and the files the trace read, of the traced Python's process; folders apart)
        elf = [e for e in trace.of("elf_file") if isinstance(e.get("path"), str) and e["path"].startswith("/")
               and e.get("kind") not in ("missing", "nodir")]
        files = [e["path"] for e in elf if e.get("kind") != "dir"]
        files += [e["path"] for e in trace.of("objopen", pid=pid) if isinstance(e.get("path"), str) and e["path"].startswith("/")]
        searched = [e["name"] for e in trace.of("objsearch", pid=pid) if isinstance(e.get("name"), str)
                    and e.get("flag") == "LA_SER_ORIG"]
        folders: list[str] = [e["path"] for e in elf if e.get("kind") == "dir"]
        for e in trace.of("py_dists", pid=pid):
            for d in e.get("dists") or ():
                site = d.get("site")
                if not isinstance(site, str):
                    continue
                folders.append(posixpath.join(site, f"{d.get('name')}-{d.get('version')}.dist-info"))
                files += [posixpath.join(site, f) for f in d.get("files") or () if isinstance(f, str)]
        system = next((e.get("system", {}).get("system_dirs") for e in trace.of("elf_system")), None) or []
        site = [p for p in ((py or {}).get("sys_path") or []) if isinstance(p, str)
                and posixpath.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
        made = cls(env, files, folders, site, [s for s in system if isinstance(s, str)],
                   trace_texts(trace, pid, posixpath.join), searched)
        made.gpu = next((gpu_facts_from_dict(e.get("gpu")) for e in trace.of("elf_system")), None)
        return made

    def gpu_facts(self) -> Optional[GpuFacts]:
        return self.gpu

    def env(self) -> Mapping[str, str]:
        return self._env

    def file(self, path: str) -> Optional[FileFacts]:
        return None  # (ELF files: the table reads versions from their names)

    def exists(self, path: str) -> bool:
        return posixpath.normpath(path) in self._known

    def files_in(self, folder: str) -> list[str]:
        return sorted(self._files.get(posixpath.normpath(folder), ()))

    def folders_in(self, folder: str) -> list[str]:
        return sorted(self._folders.get(posixpath.normpath(folder), ()))

    def text(self, path: str) -> Optional[str]:
        return self._texts.get(posixpath.normpath(path))

    def find_in_file(self, path: str, pattern: bytes) -> Optional[str]:
        return None

    def site_packages(self) -> list[str]:
        return list(self._site)

    def system_folders(self) -> list[str]:
        return list(self._system)

    def real_path(self, path: str) -> str:
        return path

    def toolkit_parents(self) -> list[str]:
        return ["/usr/local"]

    def knows(self, path: str) -> bool:
        """Whether the trace can tell if the file is there: it was opened, or ld.so was asked for its name."""
        return posixpath.normpath(path) in self._known or posixpath.basename(path) in self._searched
