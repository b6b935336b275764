"""What a DLL is, from its name (and its file version when known): the classes of static mode.

    classify("cublasLt64_13.dll")            -> DllClass(kind="cuda", component="cublasLt", cuda_majors=(13,))
    classify("msvcp140.dll")                 -> DllClass(kind="vcruntime", vc_version="14")
    classify("c10.dll", bundled=True)        -> DllClass(kind="bundled")

Kinds (KINDS): bundled (a file of the package being examined, and nothing more specific),
windows (in the built-in list of a vanilla Windows 10/11 System32, data/windows-system.json),
apiset (api-ms-* / ext-ms-*: resolved through the API-set schema), vcruntime (the Visual C++
runtime, with its version: "14" from the name, the file's version when known), cuda (a CUDA
toolkit component, with the CUDA majors its name fits), cudnn (with its major), tensorrt (with its
major), mkl_openmp (Intel MKL, Intel/LLVM OpenMP), python (python3.dll, python3XY.dll, with its
version), nvidia_driver (nvcuda.dll and the other DLLs the NVIDIA display driver installs),
other (none of these).

A name decides the class; `bundled` says the package carries a file of that name. A bundled
msvcp140.dll is still "vcruntime" (with bundled=True): the class says what the DLL is, not where
it is. The CUDA majors of each library's file name are in CUDA_LIBRARIES, with their sources.
This module reads no file and knows no world: callers pass what they know.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Literal, Optional

from dlltrace.datafiles import read_data

Kind = Literal["bundled", "windows", "apiset", "vcruntime", "cuda", "cudnn", "tensorrt", "mkl_openmp",
               "python", "nvidia_driver", "other", "policy"]
KINDS: tuple[Kind, ...] = ("bundled", "windows", "apiset", "vcruntime", "cuda", "cudnn", "tensorrt", "mkl_openmp",
                           "python", "nvidia_driver", "other", "policy")
# The kinds `dlltrace check --allow` takes (an external a wheel may need and not carry).
ALLOWABLE: tuple[Kind, ...] = ("vcruntime", "cuda", "cudnn", "tensorrt", "mkl_openmp", "python", "nvidia_driver",
                               "other")

KIND_TEXT: dict[str, str] = {
    "bundled": "bundled", "windows": "Windows", "apiset": "API set", "vcruntime": "VC++ runtime",
    "cuda": "CUDA", "cudnn": "cuDNN", "tensorrt": "TensorRT", "mkl_openmp": "MKL/OpenMP", "python": "Python",
    "nvidia_driver": "NVIDIA driver", "other": "external",
    "policy": "system library",  # a Linux wheel's: a library its manylinux/musllinux policy lets it need (component)
}

SYSTEM_FILE = "windows-system.json"


@dataclass(frozen=True)
class DllClass:
    kind: Kind
    bundled: bool = False  # the package examined has a file of this name
    component: str = ""  # cuda: the library (cublas, cublasLt, cudart, ...); vcruntime: msvcp/vcruntime/...
    cuda_majors: tuple[int, ...] = ()  # cuda: the CUDA majors whose toolkit ships a DLL of this name
    major: Optional[int] = None  # cudnn / tensorrt: its own major
    vc_version: str = ""  # vcruntime: "14" from the name, or the file's version ("14.40.33810.0")
    python_version: str = ""  # python: "3.11" (python311.dll), "3" (python3.dll), "3.13t" (python313t.dll)

    @property
    def label(self) -> str:
        """The class in words: "CUDA 13 (cublasLt)", "VC++ runtime 14.40.33810.0", "bundled"."""
        text = KIND_TEXT[self.kind]
        if self.kind == "cuda":
            majors = "/".join(str(m) for m in self.cuda_majors)
            text = f"CUDA {majors} ({self.component})" if majors else f"CUDA ({self.component})"
        elif self.kind in ("cudnn", "tensorrt") and self.major is not None:
            text = f"{text} {self.major}"
        elif self.kind == "vcruntime" and self.vc_version:
            text = f"{text} {self.vc_version}"
        elif self.kind == "python" and self.python_version:
            text = f"{text} {self.python_version}"
        elif self.kind == "policy" and self.component:
            text = f"{self.component} {text}"
        if self.bundled and self.kind != "bundled":
            text += ", bundled"
        return text

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind, "label": self.label, "bundled": self.bundled}
        if self.component:
            d["component"] = self.component
        if self.kind == "cuda":
            d["cuda_majors"] = list(self.cuda_majors)
        if self.major is not None:
            d["major"] = self.major
        if self.vc_version:
            d["vc_version"] = self.vc_version
        if self.python_version:
            d["python_version"] = self.python_version
        return d


# --- CUDA ---------------------------------------------------------------------------------------
# A CUDA library's Windows file name carries the library's own major (cufft64_11.dll is cuFFT 11,
# shipped with CUDA 12), so the CUDA majors are a table: library -> {number in the name -> the CUDA
# majors whose toolkit has a DLL of that name}. A number not listed falls back to `default`:
# "same" = the number is the CUDA major (cublas64_12.dll), "cudart" = CUDA's packed form (110 -> 11,
# 102 -> 10, 92 -> 9, 12 -> 12). Sources: the file lists of the CUDA 11.8, 12.x and 13.x Windows
# toolkits' bin folders as projects that vendor them list them (e.g. a CUDA 13.1 install: cudart64_13,
# cublas64_13, cublasLt64_13, cufft64_12, curand64_10, cusolver64_12, cusparse64_12, nppc64_13;
# CUDA 12.x: cufft64_11, cusolver64_11, cusparse64_12, curand64_10; CUDA 11.x: cufft64_10,
# cusolver64_11, cusparse64_11), and NVIDIA's redistributable archives (libcufft 11.x is CUDA 12).
# Limits: from names only; a library NVIDIA renames in a later toolkit needs a new row here.
CUDA_LIBRARIES: dict[str, tuple[str, dict[str, tuple[int, ...]]]] = {
    "cudart": ("cudart", {}),
    "cublas": ("same", {"10": (10,), "100": (10,), "91": (9,), "90": (9,), "80": (8,)}),
    "cublaslt": ("same", {"10": (10,)}),
    "cufft": ("none", {"10": (11,), "11": (12,), "12": (13,), "100": (10,), "101": (10,), "102": (10,)}),
    "cufftw": ("none", {"10": (11,), "11": (12,), "12": (13,), "100": (10,), "101": (10,), "102": (10,)}),
    "curand": ("none", {"10": (10, 11, 12, 13)}),
    "cusolver": ("none", {"10": (10,), "11": (11, 12), "12": (13,)}),
    "cusolvermg": ("none", {"10": (10,), "11": (11, 12), "12": (13,)}),
    "cusparse": ("none", {"10": (10,), "11": (11,), "12": (12, 13)}),
    "nvjpeg": ("same", {}),
    "nvblas": ("same", {}),
}
# cudart-style packed numbers in nvrtc64_120_0.dll, nvrtc-builtins64_124.dll, nvJitLink_120_0.dll
_PACKED = {"nvrtc": "nvrtc", "nvrtc-builtins": "nvrtc-builtins", "nvjitlink": "nvJitLink"}
_CUDA_NAME = re.compile(r"^(cudart|cublas|cublaslt|cufft|cufftw|curand|cusolver|cusolvermg|cusparse|nvjpeg|nvblas)64_(\d+)$")
_PACKED_NAME = re.compile(r"^(nvrtc|nvrtc-builtins)64_(\d+)(?:_0)?$|^(nvjitlink)_(\d+)_0$")
_NPP_NAME = re.compile(r"^(npp[a-z]*)64_(\d+)$")
_CUPTI_NAME = re.compile(r"^cupti64_(\d{4})")
_CUDA_COMPONENT_NAMES = {"cublas": "cublas", "cublaslt": "cublasLt", "cusolvermg": "cusolverMg", "cufftw": "cufftw"}


def _packed_major(number: str) -> Optional[int]:
    """CUDA's packed version in a name: 110 -> 11, 102 -> 10, 120 -> 12, 92 -> 9, 12 -> 12."""
    if len(number) >= 3:
        return int(number[:-1])
    value = int(number)
    if value >= 80:  # 80, 90, 91, 92: CUDA 8 / 9
        return value // 10
    return value


def cuda_class(base: str) -> Optional[DllClass]:
    """The CUDA class of a lower-case base name without ".dll", or None."""
    m = _CUDA_NAME.match(base)
    if m:
        lib, number = m.groups()
        default, table = CUDA_LIBRARIES[lib]
        majors = table.get(number)
        if majors is None:
            if default == "same":
                majors = (int(number),)
            elif default == "cudart":
                p = _packed_major(number)
                majors = (p,) if p is not None else ()
            else:
                majors = ()
        return DllClass("cuda", component=_CUDA_COMPONENT_NAMES.get(lib, lib), cuda_majors=majors)
    m = _PACKED_NAME.match(base)
    if m:
        lib, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        p = _packed_major(number)
        return DllClass("cuda", component=_PACKED[lib], cuda_majors=(p,) if p is not None else ())
    m = _NPP_NAME.match(base)
    if m:
        return DllClass("cuda", component=m.group(1), cuda_majors=(int(m.group(2)),))
    if _CUPTI_NAME.match(base):
        return DllClass("cuda", component="cupti")
    if base in ("nvtoolsext64_1", "nvcudart_hybrid64", "cudadebugger"):
        return DllClass("cuda", component=base)
    return None


# --- the rest -----------------------------------------------------------------------------------
# The Visual C++ runtime's DLLs (the VC++ Redistributable; Python ships vcruntime140.dll and
# vcruntime140_1.dll next to python.exe). Version from the name: 140 -> 14 (VS 2015-2022), 120 -> 12 ...
_VC_NAME = re.compile(r"^(msvcp|vcruntime|concrt|vccorlib|vcomp|vcamp|mfc|mfcm|msvcr)(\d{2,3})(u?)(_[a-z0-9_]+)?$")
_CUDNN_NAME = re.compile(r"^cudnn(?:_[a-z_]+)?64_(\d+)$")
_TENSORRT_NAME = re.compile(r"^(nvinfer|nvinfer_plugin|nvonnxparser|nvparsers|nvinfer_builder_resource|nvinfer_lean|"
                            r"nvinfer_dispatch|nvinfer_vc_plugin)(?:_(\d+))?(?:_win)?$")
_PYTHON_NAME = re.compile(r"^python(\d)(\d*)(t?)(?:_d)?$")  # (python313t.dll: the free-threaded build)
_MKL_OPENMP = re.compile(r"^(mkl_[a-z0-9_.]+|libiomp5md|libiompstubs5md|libiomp5md_db|libomp|libomp140\.x86_64|"
                         r"vcomp140d|omptarget(\.[a-z0-9_.]+)?|tbb(12|malloc)?(_debug)?|libgomp-1|svml_dispmd|"
                         r"libmmd|libifcoremd|libifportmd)$")
# DLLs the NVIDIA display driver installs in System32 (not in a vanilla Windows).
NVIDIA_DRIVER = frozenset({"nvcuda", "nvml", "nvapi64", "nvcuvid", "nvencodeapi64", "nvoptix", "nvofapi64",
                           "nvfatbinaryloader", "nvptxjitcompiler64", "nvrtc_driver"})


@lru_cache(maxsize=1)
def system_document() -> dict:
    """data/windows-system.json as it is (origin, licence, limits, system32, known_dlls)."""
    text = read_data(SYSTEM_FILE)
    return json.loads(text)


@lru_cache(maxsize=1)
def windows_names() -> frozenset[str]:
    """The lower-case names of the built-in Windows 10/11 System32 list."""
    return frozenset(system_document()["system32"])


def _stem(name: str) -> str:
    n = name.replace("/", "\\").rsplit("\\", 1)[-1].lower()
    return n[:-4] if n.endswith(".dll") or n.endswith(".pyd") or n.endswith(".drv") else n


def vc_version_from_name(number: str) -> str:
    """"140" -> "14", "120" -> "12", "90" -> "9"."""
    return str(int(number) // 10)


def classify(name: str, *, bundled: bool = False, file_version: Optional[str] = None,
             windows: Optional[frozenset[str]] = None) -> DllClass:
    """The class of the DLL `name` (a base name or a path). `bundled`: the package examined has a
    file of that name. `file_version`: the version of the copy examined, if any (the VC++ runtime's
    version). `windows`: the system DLL names (default: the built-in Windows 10/11 list)."""
    base = _stem(name)
    if base.startswith("api-ms-") or base.startswith("ext-ms-"):
        return DllClass("apiset", bundled=bundled)
    m = _VC_NAME.match(base)
    if m and not base.endswith("_clr0400"):
        version = file_version or vc_version_from_name(m.group(2))
        return DllClass("vcruntime", bundled=bundled, component=m.group(1), vc_version=version)
    c = cuda_class(base)
    if c is not None:
        return DllClass(c.kind, bundled=bundled, component=c.component, cuda_majors=c.cuda_majors)
    m = _CUDNN_NAME.match(base)
    if m:
        return DllClass("cudnn", bundled=bundled, component=base.rsplit("64_", 1)[0], major=int(m.group(1)))
    m = _TENSORRT_NAME.match(base)
    if m:
        return DllClass("tensorrt", bundled=bundled, component=m.group(1),
                        major=int(m.group(2)) if m.group(2) else None)
    m = _PYTHON_NAME.match(base)
    if m:
        version = m.group(1) + (f".{m.group(2)}" if m.group(2) else "") + m.group(3)
        return DllClass("python", bundled=bundled, python_version=version)
    if _MKL_OPENMP.match(base):
        return DllClass("mkl_openmp", bundled=bundled, component=base)
    if base in NVIDIA_DRIVER:
        return DllClass("nvidia_driver", bundled=bundled, component=base)
    names = windows_names() if windows is None else windows
    if base + ".dll" in names or base + ".drv" in names or base in names:
        return DllClass("windows", bundled=bundled)
    return DllClass("bundled" if bundled else "other", bundled=bundled)


def version_key(version: str) -> tuple[int, ...]:
    """"14.40.33810.0" -> (14, 40, 33810, 0); junk parts count as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


__all__ = ["ALLOWABLE", "CUDA_LIBRARIES", "DllClass", "KINDS", "KIND_TEXT", "Kind", "NVIDIA_DRIVER", "classify",
           "cuda_class", "system_document", "version_key", "windows_names"]


# --- which platform's Python extensions a file is (shared by the Windows and the Linux side) --------------
_EXTENSION = re.compile(r"\.(?:cpython-[^/]+|abi3)\.so$")
_BARE_EXTENSION = re.compile(r"^(?!lib)[A-Za-z_][A-Za-z0-9_]*\.so$")


def is_extension(name: str) -> bool:
    """Whether a file name is a Python extension module's on Linux: x.cpython-312-x86_64-linux-gnu.so, x.abi3.so,
    or the bare x.so importlib also takes (EXTENSION_SUFFIXES: SWIG's and CMake's, pymupdf/_mupdf.so), a Python
    identifier not named lib* (libfoo.so is a library)."""
    return bool(_EXTENSION.search(name) or _BARE_EXTENSION.match(name))


def windows_install(names: Iterable[str]) -> bool:
    """Whether a folder holding files named `names` is a Windows install rather than a Linux one: it holds more
    Python extensions for Windows (.pyd) than for Linux (x.cpython-*.so, x.abi3.so), or no .so file and a .dll or
    .exe. Other PE files do not make it Windows's (a Linux site-packages holds pip's and setuptools' Windows
    launchers, templates, and .NET assemblies), nor does a stray .pyd of a Windows wheel installed by mistake
    among the extensions of a Linux install."""
    pyd = ext = 0
    so = pe = False
    for fn in names:
        low = fn.lower()
        if low.endswith(".pyd"):
            pyd += 1
        elif low.endswith((".dll", ".exe")):
            pe = True
        elif low.endswith(".so") or ".so." in low:
            so = True
            ext += bool(_EXTENSION.search(fn))  # (a tagged name: a bare x.so may be any platform's library)
    return pyd > ext or (pe and not so and not pyd)
