"""How a package makes its own DLLs reachable, as data: read from the package's own files (its __init__.py, its
.pth), each kind taken from the real code it models, so that `deps` and `check` load a wheel's extensions as
importing the package would (the replay of a trace gets the same facts from the bootstrap's py_dists).

Each kind, with the code it is read from:

- `delvewheel` — delvewheel's patch at the top of `<pkg>/__init__.py` (`_delvewheel_patch_1_8_0` in scipy 1.14.1
  and shapely 2.0.6, `_delvewheel_patch_1_8_3` in numpy 2.1.3; `_delvewheel_init_patch_*` in delvewheel < 1.0):
  `os.add_dll_directory(<site>/<name>.libs)` when the folder exists (the older form, on Python < 3.8 or a conda
  CPython < 3.10, preloads the same folder's DLLs in its `.load-order` file instead: the same folder either way).
  It runs when `<pkg>` is imported: before any of the package's extensions.
- `pywin32_bootstrap` — pywin32's `pywin32.pth` (pywin32 300 and later) runs `import pywin32_bootstrap`
  (`win32/lib/pywin32_bootstrap.py`), which adds `<site>/pywin32_system32` with `os.add_dll_directory` (PATH before
  Python 3.8), at the interpreter's start: before any import.
- `pywin32_service` — pywin32's `win32/lib/win32serviceutil.py` `LocatePythonServiceExe` (pywin32 302 and later):
  win32/pythonservice.exe is a template ("we can't run it from there"): it is copied to sys.exec_prefix, and
  pywintypes3XY.dll next to python3XY.dll, before a service runs.
- `torch` — `torch/__init__.py`'s `_load_dll_libraries` (torch 1.8 to 2.x on Windows): `os.add_dll_directory` of
  `torch/lib` and, where they exist, `<sys.exec_prefix>/Library/bin` (conda's and the mkl / intel-openmp wheels'
  folder), the base prefix's and the user base's `Library/bin`; then it loads every DLL of `torch/lib` with
  LoadLibraryExW(0x1100). It runs when torch is imported, before torch._C (and functorch's, torchvision's).

Not yet data here: onnxruntime's `preload_dlls` (diagnosis/explain.py has its CUDA lists), cupy's CUDA_PATH
search, TensorFlow's dso_loader, opencv's config.py BINARIES_PATHS (opencv-python's wheels need none: their
DLLs sit next to cv2's extension), conda's activation.

This module reads no file: `loaders_from_files` is given the texts (worlds/static.py reads them from a wheel or
a folder)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

# the files a package's loader is read from, relative to site-packages: what worlds/static.py reads
LOADER_FILE_PATTERN = re.compile(r"^(?:[^/]+/__init__\.py|[^/]+\.pth|win32/lib/(?:pywin32_bootstrap|win32serviceutil)\.py)$")
MAX_LOADER_FILE = 1 << 16  # bytes of each read (delvewheel's patch and torch's loader are near the top)

_DELVEWHEEL = re.compile(r"_delvewheel_(?:init_)?patch_\w+")
_LIBS_DIR = re.compile(r"os\.pardir,\s*(['\"])([^'\"/\\]+\.libs)\1")


@dataclass(frozen=True)
class LoaderRule:
    """What importing `package` (or starting the interpreter: package "") does to the DLL search: the folders it
    adds with os.add_dll_directory (`adds`, relative to site-packages with "/"; `prefix_adds`, relative to the
    Python's prefix), and a folder whose every DLL it loads (`preloads`)."""

    package: str  # the import name whose import runs it; "" at the interpreter's start (a .pth)
    how: str  # "delvewheel", "pywin32_bootstrap", "torch"
    adds: tuple[str, ...]
    source: str  # the file it was read from
    prefix_adds: tuple[str, ...] = ()
    preloads: str = ""
    applies_to: tuple[str, ...] = ()  # the top-level folders whose modules run after it (default: the package's)
    # files the package copies before it runs them: (where, relative to the Python's folder; from, relative to
    # site-packages), "{xy}" the Python's version ("311"); and the templates it never runs where they are
    copies: tuple[tuple[str, str], ...] = ()
    templates: tuple[str, ...] = ()

    def covers(self, member: str) -> bool:
        """Whether a module at `member` (relative to site-packages, "/") is loaded after this loader ran."""
        if not self.package:
            return True
        top = member.split("/", 1)[0]
        return top in (self.applies_to or (self.package,))


def rule_delvewheel(package: str, text: str) -> Optional[LoaderRule]:
    """delvewheel's patch in `<package>/__init__.py`: the `<name>.libs` folder it adds (None without one)."""
    if not _DELVEWHEEL.search(text):
        return None
    libs = tuple(dict.fromkeys(m.group(2) for m in _LIBS_DIR.finditer(text)))
    return LoaderRule(package, "delvewheel", libs, f"{package}/__init__.py") if libs else None


def rule_pywin32_bootstrap(pth_name: str, pth: str, bootstrap: str) -> Optional[LoaderRule]:
    """pywin32's .pth that imports pywin32_bootstrap, whose code adds pywin32_system32 at start-up."""
    runs = any(line.strip().startswith("import pywin32_bootstrap") for line in pth.splitlines())
    if not runs or "pywin32_system32" not in bootstrap or "add_dll_directory" not in bootstrap:
        return None
    return LoaderRule("", "pywin32_bootstrap", ("pywin32_system32",), f"{pth_name} -> win32/lib/pywin32_bootstrap.py")


def rule_pywin32_service(text: str) -> Optional[LoaderRule]:
    """pywin32's win32serviceutil.LocatePythonServiceExe (pywin32 302 and later): "pywin32 installed it next to
    win32service.pyd (but we can't run it from there)": it copies win32/pythonservice.exe to sys.exec_prefix and
    pywintypes3XY.dll next to python3XY.dll before a service runs; the exe in win32/ is a template."""
    if "def LocatePythonServiceExe" not in text or "sys.exec_prefix" not in text:
        return None
    return LoaderRule("win32serviceutil", "pywin32_service", (), "win32/lib/win32serviceutil.py",
                      copies=(("pythonservice.exe", "win32/pythonservice.exe"),
                              ("pywintypes{xy}.dll", "pywin32_system32/pywintypes{xy}.dll")),
                      templates=("win32/pythonservice.exe",))


def rule_torch_load_dll_libraries(text: str) -> Optional[LoaderRule]:
    """torch's _load_dll_libraries in torch/__init__.py: torch/lib and the prefix's Library/bin added, every DLL of
    torch/lib loaded; functorch and torchvision import torch first."""
    if "def _load_dll_libraries" not in text and "_load_dll_libraries()" not in text:
        return None
    return LoaderRule("torch", "torch", ("torch/lib",), "torch/__init__.py", prefix_adds=("Library/bin",),
                      preloads="torch/lib", applies_to=("torch", "functorch", "torchvision", "torchaudio"))


def loaders_from_files(read: Callable[[str], Optional[str]], members: Iterable[str]) -> list[LoaderRule]:
    """The loaders of the packages whose files are `members` (paths relative to site-packages, "/"), each file's
    text from `read` (None: unreadable)."""
    names = [m for m in members if LOADER_FILE_PATTERN.match(m)]
    out: list[LoaderRule] = []
    for m in names:
        if m.endswith("/__init__.py"):
            package = m.split("/", 1)[0]
            text = read(m)
            if text is None:
                continue
            rule = rule_torch_load_dll_libraries(text) if package == "torch" else None
            rule = rule or rule_delvewheel(package, text)
            if rule is not None:
                out.append(rule)
        elif m == "win32/lib/win32serviceutil.py":
            rule = rule_pywin32_service(read(m) or "")
            if rule is not None:
                out.append(rule)
        elif m.endswith(".pth"):
            pth = read(m) or ""
            if "pywin32_bootstrap" in pth:
                rule = rule_pywin32_bootstrap(m, pth, read("win32/lib/pywin32_bootstrap.py") or "")
                if rule is not None:
                    out.append(rule)
    return out
