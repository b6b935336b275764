"""How a package makes its own DLLs reachable, as data (data/loaders.json): each row read from the package's
real code, with the file, the versions it was read in, what it does and when, and the real wheels it was read from
(their loader files pinned by sha256: tests/test_loaders.py). `deps` and `check` load a wheel's extensions as
importing the package would (worlds/static.py reads the files, diagnosis/static.py applies the rules); the replay
of a trace gets the same facts from the bootstrap's py_dists.

A row's marker found in one of its files makes it that package's loader; its rule, one named function each, reads
what the text says where the text decides it (the replay of a trace knows delvewheel's patch only, from the
bootstrap's py_dists: trace/shim.py package_loaders):

- `rule_delvewheel` — delvewheel's patch at the top of `<pkg>/__init__.py` (`_delvewheel_patch_1_8_0` in scipy
  1.14.1, `_delvewheel_patch_1_13_2` in pandas 3.1.1, `_delvewheel_init_patch_*` in delvewheel < 1.0):
  `os.add_dll_directory(<site>/<name>.libs)`, the name read from the patch.
- `rule_pywin32_bootstrap` — pywin32's `pywin32.pth` runs `import pywin32_bootstrap`, which adds
  `<site>/pywin32_system32` at the interpreter's start.
- `rule_pywin32_service` — `win32serviceutil.LocatePythonServiceExe` copies pythonservice.exe and pywintypes3XY.dll
  before a service runs; win32/pythonservice.exe is a template.
- `rule_torch_load_dll_libraries` — torch's `_load_dll_libraries`: torch/lib and the prefix's Library/bin added,
  every DLL of torch/lib loaded, before torch's, functorch's, torchvision's and torchaudio's extensions.
- `rule_opencv_binaries_paths` — cv2's bootstrap adds and puts on PATH each folder of cv2/config.py's
  BINARIES_PATHS (read from it: `<site>/cv2/../../x64/vc14/bin` in the pip wheels).
- `rule_distributor_init_preloads` — scikit-learn's `_distributor_init.py` loads the DLLs it names from
  `sklearn/.libs` by full path (read from it: vcomp140.dll, msvcp140.dll).
- `rule_marker` — every other row (ctranslate2's folder and its DLLs, PySide6, cupy, llama-cpp-python, onnxruntime's opt-in
  preload_dlls, TensorFlow's self check, xgboost's and lightgbm's full-path loads): the marker is the evidence,
  the effect is the row's adds, path_adds, env_adds and preloads.

This module reads no package file, only its own data: `loaders_from_files` is given the texts (worlds/static.py reads
them from a wheel or a folder)."""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Optional

from dlltrace.datafiles import read_data

DATA_FILE = "loaders.json"
MAX_LOADER_FILE = 1 << 17  # bytes of each read (delvewheel's patch and torch's loader are near the top; setuptools' get_win_launcher is at 85 KB of easy_install.py)
RULES_READ_HERE = ("rule_delvewheel", "rule_pywin32_bootstrap", "rule_pywin32_service", "rule_torch_load_dll_libraries",
                   "rule_qt_plugin_folders")


@dataclass(frozen=True)
class LoaderRow:
    """One row of data/loaders.json: a package's way of making its DLLs reachable."""

    id: str
    rule: str  # the function that reads it ("model": the loader model does it, no file is read)
    when: str  # "import", "start" (the interpreter's), "call" (a function the program calls)
    files: tuple[str, ...]  # the files it is read from, relative to site-packages ("<package>/__init__.py")
    marker: "re.Pattern[str]"
    does: str
    versions: str
    source: str
    adds: tuple[str, ...] = ()  # folders it os.add_dll_directory()s, relative to site-packages
    path_adds: tuple[str, ...] = ()  # folders it prepends to PATH
    env_adds: tuple[str, ...] = ()  # "CUDA_PATH/bin": a variable's folder it adds when the variable is set
    preloads: tuple[str, ...] = ()  # files it loads by full path ("ctranslate2/*.dll": every DLL of a folder)
    seen: tuple[dict, ...] = ()  # the real wheels it was read from
    templates: tuple[str, ...] = ()  # files it never loads into the running Python (a launcher a machine it copies, a helper for another process)
    # files it loads only on demand and does without when their load fails (globs, relative to site-packages:
    # "numba/np/ufunc/tbbpool.*.pyd", a Qt plugin): a DLL only they import is not a failure of the package
    optional: tuple[str, ...] = ()
    required: tuple[str, ...] = ()  # files `optional` matches that the package cannot do without after all


class LoaderDataError(ValueError):
    """data/loaders.json is not what this module expects."""


def _strs(raw: dict, key: str, where: str) -> tuple[str, ...]:
    v = raw.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise LoaderDataError(f"{DATA_FILE}: {where}: {key!r} must be a list of strings")
    return tuple(v)


def parse_rows(doc: Any) -> tuple[LoaderRow, ...]:
    """The rows of a loaders.json document, validated."""
    if not isinstance(doc, dict) or doc.get("format") != "dlltrace-loaders" or doc.get("version") != 1:
        raise LoaderDataError(f"{DATA_FILE}: not a dlltrace-loaders document of version 1")
    out = []
    for i, raw in enumerate(doc.get("loaders") or ()):
        where = f"loaders[{i}]"
        if not isinstance(raw, dict):
            raise LoaderDataError(f"{DATA_FILE}: {where}: must be an object")
        for key in ("id", "rule", "when", "marker", "does", "versions", "source"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise LoaderDataError(f"{DATA_FILE}: {where}: {key!r} must be a non-empty string")
        if raw["rule"] not in RULES and raw["rule"] != "model":
            raise LoaderDataError(f"{DATA_FILE}: {where}: no rule named {raw['rule']!r}")
        if raw["when"] not in ("import", "start", "call"):
            raise LoaderDataError(f"{DATA_FILE}: {where}: when must be import, start or call")
        try:
            marker = re.compile(raw["marker"])
        except re.error as e:
            raise LoaderDataError(f"{DATA_FILE}: {where}: marker: {e}") from None
        seen = raw.get("seen", [])
        if not isinstance(seen, list) or not all(isinstance(x, dict) and isinstance(x.get("sha256"), str) for x in seen):
            raise LoaderDataError(f"{DATA_FILE}: {where}: seen must list objects with a sha256")
        optional, required = _strs(raw, "optional", where), _strs(raw, "required", where)
        # (`required` takes back files `optional` matches: one no `optional` glob matches is a mistake of the data)
        stray = [g for g in required if not any(fnmatch.fnmatchcase(g.lower(), o.lower()) for o in optional)]
        if stray:
            raise LoaderDataError(f"{DATA_FILE}: {where}: 'required' {stray[0]!r} is not one of its 'optional' files")
        out.append(LoaderRow(raw["id"], raw["rule"], raw["when"], _strs(raw, "files", where), marker, raw["does"],
                             raw["versions"], raw["source"], _strs(raw, "adds", where), _strs(raw, "path_adds", where),
                             _strs(raw, "env_adds", where), _strs(raw, "preloads", where), tuple(seen),
                             _strs(raw, "templates", where), optional, required))
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids) or not out:
        raise LoaderDataError(f"{DATA_FILE}: ids must be unique and there must be rows")
    return tuple(out)


@lru_cache(maxsize=1)
def loader_rows() -> tuple[LoaderRow, ...]:
    """The rows of the shipped data file, read and validated once."""
    text = read_data(DATA_FILE)
    return parse_rows(json.loads(text))


def loader_files() -> tuple[str, ...]:
    """The exact files (relative to site-packages) the rows are read from, beyond every package's __init__.py
    and every .pth: what worlds/static.py reads of a wheel or a folder."""
    return tuple(dict.fromkeys(f for r in loader_rows() for f in r.files if not f.startswith("<")))


def is_loader_file(member: str) -> bool:
    """Whether a member (relative to site-packages, "/") is a file some loader is read from."""
    return bool(_GENERIC_FILE.match(member)) or member in loader_files()


_GENERIC_FILE = re.compile(r"^(?:[^/]+/__init__\.py|[^/]+\.pth)$")

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
    path_adds: tuple[str, ...] = ()  # folders it prepends to PATH (relative to site-packages)
    env_adds: tuple[str, ...] = ()  # "CUDA_PATH/bin": a variable's folder, added when the variable is set
    preload_files: tuple[str, ...] = ()  # files it loads by full path before the package's extensions
    when: str = "import"  # "import", "start", "call" (only when the program calls it: no effect at import)
    row: str = ""  # its row in data/loaders.json
    optional: tuple[str, ...] = ()  # files loaded only on demand, done without when they fail (globs, site-relative)
    required: tuple[str, ...] = ()  # files `optional` matches that the package cannot do without after all
    # where the host that loads an optional file has the libraries it shares with it (Qt's: QtCore's folder): the
    # search of such a file's load has it, as the host's libraries, loaded from there, are found by name
    host_dirs: tuple[str, ...] = ()

    def hosts(self, member: str) -> bool:
        """Whether a file (relative to site-packages, "/") is one this loader's host loads (its `optional` globs,
        the `required` ones among them too: Qt's platform plugin is loaded by the same host)."""
        low = member.lower()
        return any(fnmatch.fnmatchcase(low, g.lower()) for g in self.optional)

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


_CV2_PATH = re.compile(r"os\.path\.join\(os\.path\.join\(LOADER_DIR,\s*(['\"])([^'\"]*)\1\),\s*(['\"])([^'\"]*)\3\)")
_LIBS_FILE = re.compile(r"op\.join\(libs_path,\s*(['\"])([^'\"]+\.dll)\1\)")
_LIBS_PATH = re.compile(r"libs_path\s*=\s*op\.join\(op\.dirname\(__file__\),\s*(['\"])([^'\"]+)\1\)")


def rule_opencv_binaries_paths(row: LoaderRow, package: str, text: str) -> Optional[LoaderRule]:
    """cv2's bootstrap: each BINARIES_PATHS folder of cv2/config.py (`os.path.join(os.path.join(LOADER_DIR,
    '../../'), 'x64/vc14/bin')`, LOADER_DIR being cv2's folder) added with os.add_dll_directory and put on PATH."""
    folders = []
    for m in _CV2_PATH.finditer(text):
        rel = posixpath.normpath(posixpath.join("cv2", m.group(2), m.group(4)))
        folders.append(rel)
    if not folders:
        return None
    return LoaderRule("cv2", row.id, tuple(folders), "cv2/config.py", path_adds=tuple(folders), row=row.id)


def rule_distributor_init_preloads(row: LoaderRow, package: str, text: str) -> Optional[LoaderRule]:
    """scikit-learn's _distributor_init.py: the DLLs it names (`op.join(libs_path, "vcomp140.dll")`) in its
    `libs_path` (`.libs` next to it), loaded by full path with ctypes.WinDLL when sklearn is imported."""
    libs = _LIBS_PATH.search(text)
    names = [m.group(2) for m in _LIBS_FILE.finditer(text)]
    if libs is None or not names:
        return None
    top = row.files[0].split("/", 1)[0]
    files = tuple(posixpath.join(top, libs.group(2), n) for n in names)
    return LoaderRule(top, row.id, (), row.files[0], preload_files=files, row=row.id)


def rule_marker(row: LoaderRow, package: str, text: str) -> Optional[LoaderRule]:
    """A row whose marker is the evidence and whose effect is the row's own data (adds, path_adds, env_adds,
    preloads, templates), for the package whose file it is."""
    top = row.files[0].split("/", 1)[0] if row.files and not row.files[0].startswith("<") else package
    return LoaderRule(top, row.id, row.adds, row.files[0] if row.files else "", path_adds=row.path_adds,
                      env_adds=row.env_adds, preload_files=row.preloads, when=row.when, row=row.id,
                      templates=row.templates, optional=row.optional, required=row.required)


def rule_qt_plugin_folders(row: LoaderRow, core: str) -> LoaderRule:
    """Qt's plugins: QFactoryLoader (image formats, platforms, SQL drivers, styles ...) and the QML engine (a QML
    module's `plugin` in its qmldir) load each DLL under `<Qt prefix>/plugins` and `<Qt prefix>/qml` with QLibrary
    only when a feature asks for it, and skip one that does not load (QT_DEBUG_PLUGINS=1 says why); but not the
    Windows platform plugin, plugins/platforms/qwindows.dll, which every QGuiApplication loads. `core` is the
    QtCore library the row found (its file, relative to site-packages): the prefix is its folder, or the folder
    above a `bin` or `lib` folder (PyQt5/Qt5/bin/Qt5Core.dll -> PyQt5/Qt5; PySide6/Qt6Core.dll -> PySide6;
    PySide6/Qt/lib/libQt6Core.so.6 -> PySide6/Qt); on Linux the platform plugin is plugins/platforms/libqxcb.so."""
    folder = posixpath.dirname(core)
    prefix = posixpath.dirname(folder) if posixpath.basename(folder).lower() in ("bin", "lib") else folder
    return LoaderRule(prefix.split("/", 1)[0], row.id, (), core, when=row.when, row=row.id,
                      optional=(f"{prefix}/plugins/*", f"{prefix}/qml/*"),
                      # (the platform plugin every QGuiApplication loads, on Windows and on X11: without it no Qt
                      # GUI starts, "no Qt platform plugin could be initialized")
                      required=(f"{prefix}/plugins/platforms/qwindows.dll", f"{prefix}/plugins/platforms/libqxcb.so"),
                      # (a plugin's host has loaded the Qt libraries the plugin imports, from QtCore's folder)
                      host_dirs=(folder,))


RULES: dict[str, Callable[[LoaderRow, str, str], Optional[LoaderRule]]] = {
    "rule_opencv_binaries_paths": rule_opencv_binaries_paths,
    "rule_distributor_init_preloads": rule_distributor_init_preloads,
    "rule_marker": rule_marker,
    # (these four are read below, each from its own files)
    "rule_delvewheel": lambda row, package, text: rule_delvewheel(package, text),
    "rule_pywin32_bootstrap": lambda row, package, text: None,
    "rule_pywin32_service": lambda row, package, text: rule_pywin32_service(text),
    "rule_torch_load_dll_libraries": lambda row, package, text: rule_torch_load_dll_libraries(text),
    "rule_qt_plugin_folders": lambda row, package, text: None,
}


def loaders_from_files(read: Callable[[str], Optional[str]], members: Iterable[str]) -> list[LoaderRule]:
    """The loaders of the packages whose files are `members` (paths relative to site-packages, "/"), each file's
    text from `read` (None: unreadable)."""
    names = [m for m in members if is_loader_file(m)]
    present = set(names)
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
    # the rows read from their own files (data/loaders.json), each file once
    texts: dict[str, Optional[str]] = {}
    for row in loader_rows():
        if row.rule == "rule_qt_plugin_folders":  # (the QtCore DLL's place is the evidence: no text is read)
            out.extend(rule_qt_plugin_folders(row, f) for f in row.files if f in present)
            continue
        if row.rule in RULES_READ_HERE or row.rule == "model":
            continue
        for f in row.files:
            if f not in present:
                continue
            if f not in texts:
                texts[f] = read(f)
            text = texts[f]
            if text is None or not row.marker.search(text):
                continue
            rule = RULES[row.rule](row, f.split("/", 1)[0], text)
            if rule is not None:
                out.append(rule)
            break
    return out


def optional_row(loaders: Iterable[LoaderRule], member: str) -> str:
    """The row (data/loaders.json) of the loader that loads a file (relative to site-packages, "/") only on demand
    and does without it when its load fails, "" when none does: the first loader whose `required` or `optional`
    globs match decides (a required one: ""). Both sides' rule: static.rule_optional_file (a model path's member),
    static_elf.rule_optional_member, deps FOLDER on Linux."""
    low = member.lower()
    for lo in loaders:
        if any(fnmatch.fnmatchcase(low, g.lower()) for g in lo.required):
            return ""
        if any(fnmatch.fnmatchcase(low, g.lower()) for g in lo.optional):
            return lo.row or lo.how
    return ""


def optional_unreached(optional: dict[str, str], files: Iterable[str],
                       needs: Callable[[str], Iterable[str]]) -> dict[str, str]:
    """`optional` (a file its package loads only on demand -> the loader row: optional_row) less every file that a
    file loaded at once (one of `files` not in `optional`) needs, however deep (`needs`: the files a file's load
    loads with it): that load loads it too, and its failure is the package's. Both sides' rule:
    static.rule_optional_files (static imports), static_elf.rule_optional_members (DT_NEEDED)."""
    kept = dict(optional)
    todo = [f for f in files if f not in optional]
    seen = set(todo)
    while todo:
        for n in needs(todo.pop()):
            if n not in seen:
                seen.add(n)
                kept.pop(n, None)
                todo.append(n)
    return kept
