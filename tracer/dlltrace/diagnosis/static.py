"""Static mode: explain a DLL, a folder or a wheel without running anything (`dlltrace deps`,
`dlltrace check`). Pure logic: the commands (commands/deps.py, check.py) only parse and print.

deps: each root (the target, or every PE file of a folder or wheel that no other root's closure
loads) is loaded by the simulator (loader/windows/engine.py) in a static world (worlds/static.py)
with a load context (LoadContext: how the target would be loaded: a Python extension import, a
ctypes load, a process start, or LoadLibraryExW with given flags). Windows stops a load at its first
failing import, so one load shows one problem; to show every problem, the load is run again with a
stand-in for each problem found (worlds/overlay.OverlayWorld, through loader/walk.keep_going): a file for a missing DLL in the first
folder its search tried, a right-machine copy for a wrong-machine one, the missing exports added to
the copy that is bound. Every stand-in is reported as the problem it stands for; the tree of the last
run is the closure, with each DLL's folder and the rule (Node.how_kind / how) that found it.

check: every PE file of the package, every import (static and delay-load) classified by name
(classify.py): a failure when it is none of bundled / Windows / API set / an allowed external; plus
wrong machines, exports missing from the bundled copy an import binds to, a VC++ runtime older than
the linker that built the DLL, mixed CUDA majors.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence

from dlltrace import packages, winpath
from dlltrace.classify import ALLOWABLE, DllClass, classify, version_key, windows_install
from dlltrace.emulate.python import (PythonSimulator, ctypes_cdll, python_import, rule_ctypes_winmode,
                                     rule_python_extension_flags)
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.loader.windows import rules
from dlltrace.model import CallResult, Cause, FileFacts, Node, SearchDir
from dlltrace.diagnosis.outcome import rule_load_class
from dlltrace.diagnosis.result import Copy, Diagnosis, Fate, FailedLoad, NextFailure, ProcessEnd, Tried, process_outcome
from dlltrace.loader.walk import Step, keep_going
from dlltrace.worlds.overlay import OverlayWorld
from dlltrace.pkgloaders import LoaderRule, optional_row, optional_unreached
from dlltrace.worlds.loaderfiles import folder_loaders, is_site_folder
from dlltrace.worlds.static import (RecordEntry, distribution_files_beside, folder_records, installed_wheel_files,
                                   record_digest_matches, site_interpreter, VC_RUNTIME_DLLS,
                                   FactsCache, ZipError, StaticWorld, TargetFile, builtin_system,
                                    default_cache_dir, folder_files, live_system_world, marker_environment, normalize_dist,
                                    python_files, python_home, site_packages, wheel_elf_members, wheel_files,
                                    wheel_loaders, wheel_metadata, WHEEL_SUFFIXES, zip_members)
from dlltrace.worlds.world import CORE_MODULES, LoadedModule, ProcessState
from dlltrace.loader.windows.engine import Call

How = Literal["python_import", "ctypes", "start", "LoadLibraryExW"]
ProblemKind = Literal["missing", "wrong_machine", "missing_export", "missing_ordinal", "not_pe", "access_denied",
                      "apiset_no_host", "invalid_parameter", "not_allowed", "vcruntime_older", "python_mismatch",
                      "cuda_mixed", "required_not_given", "nothing_to_check", "missing_version", "not_elf"]
MAX_ROUNDS = 400  # stand-ins per load: far more than any real closure needs
DEFAULT_PYTHON = "3.12"
DEFAULT_PATH_TAIL = ("C:\\Windows\\system32", "C:\\Windows", "C:\\Windows\\System32\\Wbem")
_WHEEL_TAG = re.compile(r"-(cp|py)(\d)(\d+)-([a-z0-9_.]+)-([a-z0-9_.]+)\.whl$", re.I)
_PLATFORM_MACHINE = {"win_amd64": "x64", "win32": "x86", "win_arm64": "arm64"}
LINUX_SITE = "/venv/lib/python3/site-packages"  # where a Linux wheel's files are in its model (diagnosis/static_elf.py)
_LINUX_PLATFORM = re.compile(r"^(manylinux|musllinux|linux)", re.I)


def wheel_platform(filename: str) -> Literal["windows", "linux", "any"]:
    """What a wheel's platform tag says its binaries are for: win_* -> windows; manylinux*, musllinux*, linux_* ->
    linux; anything else (any, macosx_*) -> any."""
    base = os.path.basename(filename)
    if not base.lower().endswith(".whl") or base.count("-") < 4:
        return "any"
    plats = base[:-4].rsplit("-", 1)[1].lower().split(".")
    if any(x.startswith("win") for x in plats):
        return "windows"
    if any(_LINUX_PLATFORM.match(x) for x in plats):
        return "linux"
    return "any"


# --- the target ---------------------------------------------------------------------------------------
@dataclass
class Target:
    """What was given, as files in a static world."""

    given: str  # the argument
    kind: Literal["wheel", "folder", "file"]
    world: StaticWorld
    files: list[TargetFile]
    root: str  # the target's own folder in the model
    python: str
    machine: str  # the machine its files should be (the wheel's platform tag; x64 otherwise)
    focus: Optional[str] = None  # kind "file": the file given (its Windows path in the model)
    wheel_python_tag: str = ""  # "cp311", "py3", "cp311-abi3": which pythonXY.dll a wheel may import
    loaders: tuple[LoaderRule, ...] = ()  # how its packages make their DLLs reachable (pkgloaders.py)
    placed: tuple[str, ...] = ()  # the copies the packages make and then run (pywin32's pythonservice.exe)
    templates: tuple[str, ...] = ()  # the files they copy and never run where they are
    dist: str = ""  # a wheel's distribution (normalized: PEP 503), from its METADATA
    requires: tuple[str, ...] = ()  # the distributions its Requires-Dist names (no extra's), normalized
    record_lines: Mapping[str, int] = field(default_factory=dict)  # wheel member -> the line RECORD lists it on
    platform: Literal["windows", "linux", "any"] = "windows"  # what its files are for (a wheel's platform tag)
    elf_members: tuple[str, ...] = ()  # a Linux wheel: its ELF shared objects (members), checked by static_elf.py
    # an installed folder's: the native files its distributions' RECORDs list, by winpath.key of their model path
    records: Mapping[str, tuple[RecordEntry, ...]] = field(default_factory=dict)
    interpreter: str = ""  # an installed folder's: the Python whose site-packages it is, on this disk (site_interpreter)

    # (files, how many, base name (folded) -> its files): made when first asked, again if `files` changes; so
    # file_named is one dict read, not a scan of every file (issue 28: check of 16,000 DLLs took 88 s)
    _index: Optional[tuple[list[TargetFile], int, dict[str, list[TargetFile]]]] = field(
        default=None, init=False, repr=False, compare=False)

    def file_named(self, name: str) -> list[TargetFile]:
        if self._index is None or self._index[0] is not self.files or self._index[1] != len(self.files):
            by_name: dict[str, list[TargetFile]] = {}
            for f in self.files:
                by_name.setdefault(winpath.fold(winpath.basename(f.path)), []).append(f)
            self._index = (self.files, len(self.files), by_name)
        return list(self._index[2].get(winpath.fold(name), ()))


def wheel_python(filename: str) -> tuple[str, str, str]:
    """(python "3.11", python tag "cp311" or "abi3", machine "x64") from a wheel's file name; unknown parts "". A
    free-threaded wheel (cp313-cp313t) is Python "3.13t", tag "cp313t"."""
    m = _WHEEL_TAG.search(os.path.basename(filename))
    if not m:
        return "", "", ""
    impl, major, minor, abi, plat = m.groups()
    # (cp313t: the free-threaded build's ABI, whose extensions import python313t.dll: "3.13t", tag "cp313t")
    free = "t" if impl.lower() == "cp" and minor and abi.lower() == f"cp{major}{minor}t" else ""
    python = f"{major}.{minor}{free}" if minor else ""
    tag = "abi3" if abi.lower() == "abi3" else (f"cp{major}{minor}{free}" if impl.lower() == "cp" else "")
    machine = _PLATFORM_MACHINE.get(plat.split(".")[0].lower(), "")
    return python, tag, machine


def rule_package_copies(target: Target) -> Target:
    """The copies the target's packages make before they run them (a loader's `copies`: pywin32 puts
    pythonservice.exe in the Python's folder and pywintypes3XY.dll next to python3XY.dll), placed in its world; an
    .exe so placed is a root where its template is not."""
    xy = target.python.replace(".", "")
    site, home = site_packages(target.python), python_home(target.python)
    placed: list[str] = []
    templates: list[str] = []
    for lo in target.loaders:
        for where, source in lo.copies:
            of = target.world.target_file(winpath.join(site, source.format(xy=xy).replace("/", "\\")))
            if of is not None:
                placed.append(target.world.place_copy(winpath.join(home, where.format(xy=xy)), of).path)
        templates += [winpath.join(site, t.replace("/", "\\")) for t in lo.templates]
    return dataclasses.replace(target, placed=tuple(placed), templates=tuple(templates)) if placed or templates else target


# folder names that say which machine the files in them are for (a package's per-machine copies: clr_loader's
# ffi/dlls/x86 and amd64, pyvjoy's utils/x86 and x64, .NET's runtimes/win-x86/native)
MACHINE_FOLDERS = {"x86": "x86", "win32": "x86", "i386": "x86", "i686": "x86", "32bit": "x86", "win-x86": "x86",
                   "x64": "x64", "amd64": "x64", "x86_64": "x64", "win64": "x64", "64bit": "x64", "win-x64": "x64",
                   "arm64": "arm64", "aarch64": "arm64", "win-arm64": "arm64"}


def rule_other_machine_copy(target: Target, path: str, machine: str) -> Optional[str]:
    """A file for another machine than the target's that is one of a package's per-machine copies: a folder of its
    path names its machine (MACHINE_FOLDERS: `x86`, `win-x86` ...) and the target has the same file in a sibling
    folder named for the target's machine, built for it (clr_loader/ffi/dlls/x86/ClrLoader.dll beside
    amd64/ClrLoader.dll: the package loads the copy for the running Python's machine, `sys.maxsize > 2**32`). Its
    twin's path, or None: a lone file of another machine is the wrong machine."""
    parts = winpath.normalize(path).split("\\")
    for i, part in enumerate(parts[:-1]):
        if MACHINE_FOLDERS.get(part.lower()) != machine:
            continue
        for name, m in MACHINE_FOLDERS.items():
            if m != target.machine:
                continue
            twin = "\\".join([*parts[:i], name, *parts[i + 1:]])
            if target.world.target_file(twin) is None:
                continue
            facts = target.world.file(twin)
            if facts is not None and facts.pe is not None and facts.pe.machine == target.machine:
                return twin
    return None


def rule_optional_file(target: Target, path: str) -> str:
    """The loader row (data/loaders.json) that loads the target's file `path` only on demand and does without it
    when its load fails (a Qt plugin, numba's TBB threading layer), "" for any other file: a DLL that only such
    files import is not a failure of the package (check's `optional` status). The Linux side's rule on the file's
    place in site-packages (pkgloaders.optional_row)."""
    member = site_member(target, path)
    return optional_row(target.loaders, member) if member is not None else ""


def rule_optional_files(target: Target, facts_of: dict[str, FileFacts],
                        skip: Callable[[str], bool] = lambda name: False) -> dict[str, str]:
    """check's optional files: each file of the target (winpath.key) that rule_optional_file says its package loads
    only on demand -> that loader row, less any file that a file loaded at once imports, through the bundled
    copies its static imports bind to (_bound_copy), however deep: deps loads such a file as part of that load,
    whose failure is the package's (a Qt plugin DLL another module links to, a threading layer a helper DLL
    imports). Delay-loaded imports bind nothing at load time and keep a file optional. `facts_of`: the files read
    (winpath.key -> facts); `skip`: an import name --exclude leaves out."""
    optional = {k: row for k, row in ((winpath.key(f.path), rule_optional_file(target, f.path))
                                      for f in target.files if winpath.key(f.path) in facts_of) if row}
    by_key = {winpath.key(f.path): f for f in target.files}

    def needs(k: str) -> Iterator[str]:  # (the bundled copies its static imports bind to)
        f, facts = by_key.get(k), facts_of.get(k)
        if f is None or facts is None or facts.pe is None:
            return
        for imp in facts.pe.imports:
            name = rules.rule_default_extension(imp.dll)
            bound = None if skip(name) else _bound_copy(f, target.file_named(name))
            if bound is not None:
                yield winpath.key(bound.path)
    return optional_unreached(optional, facts_of, needs)


def site_member(target: Target, path: str) -> Optional[str]:
    """A file of the model as the member of site-packages it is ("numpy/_core/x.pyd"), None outside it."""
    site = site_packages(target.python)
    rel = winpath.normalize(path)
    return rel[len(site) + 1:].replace("\\", "/") if rel.lower().startswith(site.lower() + "\\") else None


def open_target(given: str, python: Optional[str] = None, use_cache: bool = True, vc_runtime: bool = True) -> Target:
    """The static world of a .whl, a folder (a package or a site-packages tree; a package of an installed
    site-packages with what its distributions' RECORDs list beside it) or a .dll/.pyd/.exe (a file of an installed
    package: that package's world; else the files of its folder and the folders below). A bad argument is a
    DlltraceError (exit 2).
    `vc_runtime`: the modelled Windows has the VC++ 2015-2022 runtime in System32 (worlds/static.py)."""
    if not os.path.exists(given):
        raise DlltraceError(f"{given}: no such file or folder", EXIT_USAGE)
    system = builtin_system()
    live = live_system_world()
    cache = FactsCache(default_cache_dir() if use_cache else None)
    if os.path.isfile(given) and given.lower().endswith(".whl"):
        wp, tag, machine = wheel_python(given)
        py = python or wp or DEFAULT_PYTHON
        platform = wheel_platform(given)
        try:
            # (an abi3 wheel is for any Python from its tag's on, a py3-none one for any: its markers' python_version
            # is decided only when it is so for each, not for the Python the model runs it with)
            exact = python or (wp if tag != "abi3" else "")
            meta = wheel_metadata(given, marker_environment(exact, platform, machine or "", floor=wp or "3"))
            if platform == "linux":  # (its ELF files: diagnosis/static_elf.py; no PE world)
                elf = tuple(wheel_elf_members(given))
                world = StaticWorld(system, [], py, system_world=live, vc_runtime=vc_runtime)
                # (its loaders: only what they load on demand is read, static_elf.rule_optional_member)
                return Target(given, "wheel", world, [], LINUX_SITE, py, "x86_64", wheel_python_tag=tag,
                              loaders=tuple(wheel_loaders(given)), dist=meta.dist, requires=meta.requires,
                              record_lines=meta.record_lines, platform="linux", elf_members=elf)
            listing = zip_members(given, WHEEL_SUFFIXES)  # (its central directory read once, for both)
            files, root = wheel_files(given, py, cache, listing)
            loaders = wheel_loaders(given, listing)
        except (OSError, ZipError) as exc:
            raise DlltraceError(f"{given}: not a readable wheel (zip): {exc}", EXIT_USAGE) from None
        world = StaticWorld(system, files, py, system_world=live, vc_runtime=vc_runtime)
        return rule_package_copies(Target(given, "wheel", world, files, root, py, machine or "x64",
                                          wheel_python_tag=tag, loaders=tuple(loaders), dist=meta.dist,
                                          requires=meta.requires, record_lines=meta.record_lines,
                                          platform=platform))
    if os.path.isdir(given):
        host = os.path.abspath(given)
        tag_python, tag_machine = rule_extension_tags(host)
        py = python or tag_python or DEFAULT_PYTHON
        base = os.path.basename(host.rstrip(os.sep))
        is_site = is_site_folder(host)
        root = site_packages(py) if is_site else winpath.join(site_packages(py), base)
        files = folder_files(host, root, cache)
        beside: list[RecordEntry] = []
        if not is_site and files:  # (a package in an installed site-packages: its distribution's files beside it)
            more, beside = distribution_files_beside(host, site_packages(py), cache)
            files += more
        if not files:  # (a folder of wheels: check_targets gives each .whl; deps takes one)
            wheels = " (it holds wheels: pass a .whl)" if any(e.lower().endswith(".whl") for e in _listdir(host)) else ""
            raise DlltraceError(f"{given}: no .dll, .pyd or .exe in it: nothing to examine{wheels}", EXIT_USAGE)
        world = StaticWorld(system, files, py, system_world=live, vc_runtime=vc_runtime)
        loaders = folder_loaders(host) if is_site else folder_loaders(os.path.dirname(host), base)
        # (a package's: every entry of the distributions that own a file of it, those inside it with the rest, as
        # distribution_files_beside read them; a site's: each RECORD in it)
        records = records_by_model_path(beside, py) if not is_site else installed_records(host, host, py)
        return rule_package_copies(Target(given, "folder", world, files, root, py, tag_machine or "x64",
                                          loaders=tuple(loaders), records=records,
                                          interpreter=site_interpreter(host if is_site else os.path.dirname(host))))
    if not given.lower().endswith((".dll", ".pyd", ".exe")):
        raise DlltraceError(f"{given}: not a .whl, a folder, a .dll/.pyd/.exe or an ELF shared object (.so)",
                            EXIT_USAGE)
    host = os.path.abspath(given)
    folder = os.path.dirname(host)
    tag_python, tag_machine = rule_extension_tags(folder, host)
    py = python or tag_python or DEFAULT_PYTHON
    site = installed_site_of(host)
    if site is not None:  # (a file of an installed package: as its package's folder is, the file the one examined)
        package = os.path.join(site, os.path.relpath(host, site).split(os.sep)[0])
        target = open_target(package, py, use_cache, vc_runtime)
        focus = winpath.join(site_packages(py), *os.path.relpath(host, site).split(os.sep))
        return dataclasses.replace(target, given=given, kind="file", focus=focus,
                                   root=winpath.dirname(focus), machine=tag_machine or target.machine)
    root = winpath.join(site_packages(py), os.path.basename(folder) or "target")
    files = folder_files(folder, root, cache)  # the file's folder and the folders below it
    world = StaticWorld(system, files, py, system_world=live, vc_runtime=vc_runtime)
    focus = winpath.join(root, os.path.basename(host))
    return Target(given, "file", world, files, root, py, tag_machine or "x64", focus=focus,
                  records=installed_records(os.path.dirname(folder), folder, py))


def installed_site_of(host: str, up: int = 8) -> Optional[str]:
    """The installed site-packages folder a file is in, when a package folder holds it: the nearest folder above its
    package folder (at most `up` levels up) whose *.dist-info RECORDs list the file; None otherwise (a file on its
    own, or the site's own top level)."""
    path = os.path.abspath(host)
    d = os.path.dirname(os.path.dirname(path))
    for _ in range(up):
        if any(os.path.normcase(e.host) == os.path.normcase(path) for e in folder_records(d, os.path.dirname(path))):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None


_EXTENSION_TAG = re.compile(r"\.cp(\d)(\d+)(t?)-(win_amd64|win32|win_arm64)\.pyd$", re.I)


def rule_extension_tags(folder: str, file: Optional[str] = None, most: int = 200) -> tuple[str, str]:
    """(Python "3.11", machine "x64") of a folder of installed files, as their extensions' names say
    (`_multiarray_umath.cp311-win_amd64.pyd`: CPython 3.11, win_amd64; `.cp313t-win_amd64.pyd`: the free-threaded
    3.13, "3.13t"): `file`'s own tag when it has one, else the
    commonest tag of the first `most` tagged .pyd files under `folder`; ("", "") when none is tagged. An installed
    folder comes with no wheel file name to read: without this, a healthy cp311 install read as Python 3.12 needs a
    python312.dll it never imports and misses the python311.dll it does."""
    if file is not None:
        m = _EXTENSION_TAG.search(os.path.basename(file))
        if m:
            return f"{m.group(1)}.{m.group(2)}{m.group(3).lower()}", _PLATFORM_MACHINE.get(m.group(4).lower(), "")
    seen: dict[tuple[str, str], int] = {}
    n = 0
    for _, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for fn in filenames:
            m = _EXTENSION_TAG.search(fn)
            if m:
                key = (f"{m.group(1)}.{m.group(2)}{m.group(3).lower()}", _PLATFORM_MACHINE.get(m.group(4).lower(), ""))
                seen[key] = seen.get(key, 0) + 1
                n += 1
        if n >= most:
            break
    return max(seen, key=lambda k: seen[k]) if seen else ("", "")


def installed_records(site: str, under: str, python: str) -> dict[str, tuple[RecordEntry, ...]]:
    """The RECORD entries of the distributions installed in the host folder `site` for the files under `under`,
    by the key of each file's path in the model (its RECORD path under the model's site-packages); a path two
    distributions list has both entries (one wrote over the other's file)."""
    return records_by_model_path(folder_records(site, under), python)


def records_by_model_path(entries: Iterable[RecordEntry], python: str) -> dict[str, tuple[RecordEntry, ...]]:
    """RECORD entries by the key of each file's path in the model (its RECORD path under the model's
    site-packages); a path two distributions list has both entries."""
    model_site = site_packages(python)
    out: dict[str, list[RecordEntry]] = {}
    for e in entries:
        out.setdefault(winpath.key(winpath.join(model_site, *e.path.split("/"))), []).append(e)
    return {k: tuple(v) for k, v in out.items()}


def rule_record_of_installed_files(target: Target, p: Problem) -> Problem:
    """An installed folder's problem set against its distributions' RECORDs (issue 23 item 1):
    - a missing DLL is a distribution's own file, gone (deleted, quarantined by an antivirus, a copy cut short),
      when its RECORD lists a file of that name, gone, in a folder the load searched, or in the distribution of
      the module that needs it (what reinstalling it puts back is then found; another package's copy is not
      this load's);
    - a file that cannot load (not a PE, the wrong machine, an export missing) is not the file its distribution
      installed when its bytes differ from the digest its RECORD gives (damaged, or written over by another
      package); of two distributions that list it, the one whose digest it has is its owner.
    Either way reinstalling that distribution puts its file back (render/static.py says so). A file as RECORD
    lists it: only its owner is set."""
    if not target.records or not p.dll:
        return p
    if p.kind == "missing":
        searched = {winpath.key(s.folder) for s in p.searched}
        importers = {e.dist.lower() for es in target.records.values() for e in es
                     if p.needed_by and winpath.same(e.path.rsplit("/", 1)[-1], p.needed_by[0])}
        model_site = site_packages(target.python)
        gone = [e for es in target.records.values() for e in es
                if winpath.same(e.path.rsplit("/", 1)[-1], p.dll) and not os.path.exists(e.host)]
        # (the importer's own distribution first: two RECORDs may list one path)
        for e in sorted(gone, key=lambda e: e.dist.lower() not in importers):
            folder = winpath.key(winpath.dirname(winpath.join(model_site, *e.path.split("/"))))
            if folder in searched or e.dist.lower() in importers:
                return dataclasses.replace(p, owner=e.dist, owner_version=e.version, record="missing",
                                           record_path=e.path, owner_python=target.interpreter)
        return p
    if p.kind not in ("not_pe", "wrong_machine", "missing_export", "missing_ordinal") or not p.path:
        return p
    # (deps gives a model path; check a path relative to the target's folder)
    entries = next((target.records[k] for k in (winpath.key(p.path), winpath.key(winpath.join(target.root, p.path)))
                    if k in target.records), ())
    if not entries:
        return p
    verdicts = [(e, record_digest_matches(e)) for e in entries]
    same = next((e for e, ok in verdicts if ok is True), None)
    if same is not None:
        return dataclasses.replace(p, owner=same.dist, owner_version=same.version, record_path=same.path,
                                   owner_python=target.interpreter)
    e, ok = verdicts[0]
    return dataclasses.replace(p, owner=e.dist, owner_version=e.version, record_path=e.path,
                               record="differs" if ok is False else "", owner_python=target.interpreter)


def _listdir(host: str) -> list[str]:
    try:
        return os.listdir(host)
    except OSError:
        return []


# --- the load context --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadContext:
    """How a root is loaded: `how` and the flags it passes, the Python, the PATH, os.add_dll_directory folders."""

    how: How
    flags: int
    python: str
    path: tuple[str, ...] = ()
    dll_directories: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # the package loaders that ran before it ("numpy's delvewheel patch"), in words
    preloaded: tuple[str, ...] = ()  # DLLs a package's loader loaded by full path before it (sklearn's .libs)
    preloaded_by: tuple[str, ...] = ()  # the loader of each, in words

    def to_dict(self) -> dict:
        return {"how": self.how, "flags": self.flags, "python": self.python, "path": list(self.path),
                "dll_directories": list(self.dll_directories), "after": list(self.after)}

    @property
    def text(self) -> str:
        what = {"python_import": "a Python extension import", "ctypes": "ctypes.CDLL(full path)",
                "start": "a process start", "LoadLibraryExW": "LoadLibraryExW"}[self.how]
        after = f", after {' and '.join(self.after)}" if self.after else ""
        return f"{what}, flags {self.flags:#x}, Python {self.python}{after}"


def context_for(path: str, python: str, flags: Optional[int] = None, extra_path: Iterable[str] = (),
                dll_dirs: Iterable[str] = ()) -> LoadContext:
    """The default context of a file: .pyd an extension import (0x1100 on Python >= 3.8), .dll
    ctypes' default (ctypes.CDLL with a full path: 0x1100), .exe a process start; `flags` overrides."""
    low = path.lower()
    if flags is not None:
        how: How = "LoadLibraryExW"
        f = flags
    elif low.endswith(".pyd"):

        how, f = "python_import", rule_python_extension_flags(python)
    elif low.endswith(".exe"):
        how, f = "start", 0
    else:

        how, f = "ctypes", rule_ctypes_winmode(path, None)
    return LoadContext(how, f, python, tuple(extra_path), tuple(dll_dirs))


def _process(target: Target, root: str, ctx: LoadContext) -> ProcessState:
    system = target.world.system
    home = python_home(ctx.python)
    exe = root if ctx.how == "start" else winpath.join(home, "python.exe")
    p = ProcessState(exe=exe, cwd=winpath.dirname(exe), path=[*ctx.path, *DEFAULT_PATH_TAIL],
                     machine=target.machine, python=ctx.python)
    for n in CORE_MODULES:
        p.add_loaded(LoadedModule(winpath.join(system.system32, n), origin="the process start"))
    if ctx.how != "start":
        for f in python_files(ctx.python)[:2] + python_files(ctx.python)[3:4]:  # python.exe, pythonXY.dll, vcruntime140.dll
            p.add_loaded(LoadedModule(f, origin="the Python interpreter's start"))
    for f, by in zip(ctx.preloaded, ctx.preloaded_by):  # (loaded by full path: a later import of the name binds to them)
        if p.find_loaded_by_name(winpath.basename(f)) is None:
            p.add_loaded(LoadedModule(f, origin=by))
    return p


def _module_name(target: Target, path: str) -> str:
    """torch._C for ...\\site-packages\\torch\\_C.cp311-win_amd64.pyd."""
    sp = site_packages(target.python)
    rel = winpath.normalize(path)
    if rel.lower().startswith(sp.lower() + "\\"):
        rel = rel[len(sp) + 1:]
    parts = rel.split("\\")
    parts[-1] = parts[-1].split(".")[0]
    return ".".join(parts)


# --- deps ---------------------------------------------------------------------------------------------
@dataclass
class Problem:
    """One thing that would make a load fail (or, in check, a wheel not self-contained)."""

    kind: ProblemKind
    dll: str  # the DLL it is about (base name)
    needed_by: list[str] = field(default_factory=list)  # base names of the DLLs whose imports need it
    klass: Optional[DllClass] = None
    path: Optional[str] = None  # the file concerned, when there is one (wrong machine, bound copy)
    searched: list[SearchDir] = field(default_factory=list)  # missing: the folders searched, in order
    elsewhere: list[str] = field(default_factory=list)  # missing: the target's files of that name (not searched)
    exports: list[str] = field(default_factory=list)  # missing_export: the names not exported
    ordinals: list[int] = field(default_factory=list)
    machine: Optional[str] = None  # wrong_machine: the file's machine
    detail: str = ""  # words for people (made here from the fields above)
    owner: str = ""  # an installed folder's: the distribution whose RECORD lists the file ("numpy 2.1.3")
    owner_version: str = ""  # its version
    record: Literal["", "missing", "differs"] = ""  # that file is gone; its bytes differ from RECORD's digest
    record_path: str = ""  # the file as that RECORD lists it
    owner_python: str = ""  # the Python whose pip reinstalls it (Target.interpreter), "" not known
    # check: the file whose load it fails is one its package loads only on demand and does without (the file
    # itself, or the importer of a missing export): the data/loaders.json row that says so (rule_optional_file)
    optional_by: str = ""

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind, "dll": self.dll, "needed_by": list(self.needed_by),
                   "class": self.klass.to_dict() if self.klass else None, "path": self.path,
                   "detail": self.detail}
        if self.kind == "missing":
            d["searched"] = [{"folder": s.folder, "rule": s.rule} for s in self.searched]
            d["elsewhere"] = list(self.elsewhere)
        if self.owner:
            d["owner"] = {"dist": self.owner, "version": self.owner_version, "record_path": self.record_path,
                          "record": self.record or None, "python": self.owner_python or None}
        if self.exports:
            d["exports"] = list(self.exports)
        if self.ordinals:
            d["ordinals"] = list(self.ordinals)
        if self.machine:
            d["machine"] = self.machine
        if self.optional_by:
            d["optional_by"] = self.optional_by
        return d


@dataclass
class DelayImport:
    importer: str  # base name
    dll: str
    error: int
    path: Optional[str]
    how: str
    how_kind: str
    klass: DllClass


@dataclass
class LoadAnalysis:
    """One root loaded: its context, the last run's result (its tree is the closure), every problem."""

    root: str  # Windows path in the model
    source: str  # wheel member or host path
    context: LoadContext
    result: CallResult
    problems: list[Problem]
    standins: dict[str, Problem]  # winpath.key(stand-in path) -> the problem it stands for
    rounds: int
    delay: list[DelayImport] = field(default_factory=list)
    # the root is a file its package loads only on demand and does without when it fails (rule_optional_file):
    # the loader row; its problems are not the package's
    optional_by: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def _class_of(target: Target, name: str, path: Optional[str], world) -> DllClass:
    bundled = bool(target.file_named(winpath.basename(name))) or bool(
        path and target.world.target_file(path) is not None)
    version = None
    if path:
        f = world.file(path)
        if f is not None and f.pe is not None:
            version = f.pe.file_version
    return classify(winpath.basename(name), bundled=bundled, file_version=version)


def _load(sim: PythonSimulator, target: Target, root: str, ctx: LoadContext) -> CallResult:
    for d in ctx.dll_directories:
        err = sim.add_dll_directory(d, "os.add_dll_directory")
        if err:
            raise DlltraceError(f"--add-dll-directory {d}: no such folder in the model "
                                f"(the target's folders are under {target.root})", EXIT_USAGE)
    if ctx.how == "python_import":
        return python_import(sim, root, _module_name(target, root))
    if ctx.how == "ctypes":
        return ctypes_cdll(sim, root, None)
    if ctx.how == "start":
        return sim.load_library(root, 0, op="start", origin="the process start")
    return sim.load_library(root, ctx.flags, op="LoadLibraryExW")


def analyse_load(target: Target, root: str, ctx: LoadContext) -> LoadAnalysis:
    """Load `root` in `ctx`, again and again with a stand-in for each problem found, until it loads
    or a problem has no stand-in (module docstring): the one keep-going walk (loader/walk.py)."""
    world = target.world
    source = (world.target_file(root).source if world.target_file(root) else root)  # type: ignore[union-attr]

    def run(assumed: dict[str, FileFacts]) -> tuple[CallResult, PythonSimulator, OverlayWorld]:
        cur = OverlayWorld(world, assumed.values())
        sim = PythonSimulator(cur, _process(target, root, ctx))
        return _load(sim, target, root, ctx), sim, cur

    def step(ran: tuple[CallResult, PythonSimulator, OverlayWorld], _: dict[str, FileFacts]) -> Optional[Step[Problem, FileFacts]]:
        res, _sim, cur = ran
        if not res.error or res.tree is None:
            return None
        chain = res.tree.failure_chain()
        leaf = chain[-1]
        importer = winpath.basename(chain[-2].path or chain[-2].name) if len(chain) > 1 else ""
        new: dict[str, FileFacts] = {}
        p = _stand_in(target, cur, leaf, chain, importer, new, ctx)
        if p is None:
            return None
        return Step(p, new, last=p.kind in ("invalid_parameter", "apiset_no_host"))

    walk = keep_going(run, step, MAX_ROUNDS)
    res, sim, _ = walk.result
    problems = walk.found
    standins = {winpath.key(p.path): p for p in problems if p.path and p.kind in ("missing", "not_pe", "access_denied")}
    if res.tree is not None:
        _needed_by(res.tree, standins, problems)
    out = LoadAnalysis(root, source, ctx, res, problems, standins, walk.rounds)
    if not res.error and res.tree is not None:
        out.delay = _delay_imports(target, sim, res.tree, out)
    return out


def _stand_in(target: Target, cur: OverlayWorld, leaf: Node, chain: list[Node], importer: str,
              assumed: dict[str, FileFacts], ctx: LoadContext) -> Optional[Problem]:
    """The problem at `leaf`, with its stand-in put in `assumed`; None when it has none."""
    name = winpath.basename(leaf.name)
    cls = _class_of(target, name, leaf.path, cur)
    needed = [importer] if importer else []
    cause = leaf.cause
    if cause == "not_found":
        if rules.rule_name_has_path(leaf.name):
            path = winpath.normalize(leaf.name)
        elif leaf.search:
            path = winpath.join(leaf.search[0].folder, name)
        else:
            return None
        assumed[path] = FileFacts(path=path)
        elsewhere = [f.path for f in target.file_named(name)]
        detail = f"{name} is not in any folder the load searched"
        if elsewhere:
            detail += f"; the package has it at {elsewhere[0]}, a folder this load does not search"
        return Problem("missing", name, needed, cls, path=path, searched=list(leaf.search), elsewhere=elsewhere,
                       detail=detail)
    if cause == "bad_machine":
        wrong = next((c for c in leaf.candidates if c.result == "wrong_machine"), None)
        facts = cur.file(wrong.path) if wrong else None
        if wrong is None or facts is None or facts.pe is None:
            return None
        assumed[wrong.path] = dataclasses.replace(facts, pe=dataclasses.replace(facts.pe, machine=target.machine))
        return Problem("wrong_machine", name, needed, cls, path=wrong.path, machine=facts.pe.machine,
                       detail=f"{wrong.path} is {facts.pe.machine}, the process is {target.machine}")
    if cause in ("missing_export", "missing_ordinal") and leaf.path:
        facts = cur.file(leaf.path)
        if facts is None or facts.pe is None:
            return None
        lf = leaf.facts
        names: list[str] = []
        ordinals: list[int] = []
        if lf is not None and lf.forwarded_from:
            names = [lf.export] if lf.export else []
        else:
            imp_facts = cur.file(chain[-2].path) if len(chain) > 1 and chain[-2].path else None
            imp = None
            if imp_facts is not None and imp_facts.pe is not None:
                want = rules.rule_default_extension(winpath.basename(leaf.name)).lower()
                imp = next((i for i in imp_facts.pe.imports
                            if rules.rule_default_extension(i.dll).lower() == want), None)
            if imp is not None:
                names = [n for n in imp.names if n not in facts.pe.exports and n not in facts.pe.forwarders]
                ordinals = [o for o in imp.ordinals if o not in facts.pe.export_ordinals]
            elif lf is not None:
                names = [lf.export] if lf.export else []
                ordinals = [lf.ordinal] if lf.ordinal is not None else []
        if not names and not ordinals:
            return None
        pe = dataclasses.replace(facts.pe, exports=facts.pe.exports | frozenset(names),
                                 export_ordinals=facts.pe.export_ordinals | frozenset(ordinals))
        assumed[leaf.path] = dataclasses.replace(facts, pe=pe)
        kind: ProblemKind = "missing_export" if names else "missing_ordinal"
        what = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") if names else \
            ", ".join(f"#{o}" for o in ordinals)
        return Problem(kind, name, needed, cls, path=leaf.path, exports=names, ordinals=ordinals,
                       detail=f"{leaf.path} does not export {what}"
                              + (f" (forwarded from {lf.forwarded_from})" if lf and lf.forwarded_from else ""))
    if cause in ("not_pe", "access_denied") and leaf.path:
        assumed[leaf.path] = FileFacts(path=leaf.path)
        return Problem(cause, name, needed, cls, path=leaf.path, detail=leaf.detail)
    if cause in ("apiset_no_host", "invalid_parameter"):
        return Problem(cause, name, needed, cls, detail=leaf.detail)
    return None


def _needed_by(tree: Node, standins: dict[str, Problem], problems: list[Problem]) -> None:
    """Every importer of each stand-in, from the last run's tree (the first run saw only one)."""
    seen: set[int] = set()

    def walk(node: Node, parent: Optional[Node]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if node.path and parent is not None:
            p = standins.get(winpath.key(node.path))
            if p is not None:
                who = winpath.basename(parent.path or parent.name)
                if who not in p.needed_by:
                    p.needed_by.append(who)
        for c in node.children:
            walk(c, parent if node.via == "apiset" else node)  # an API-set node stands for its importer

    walk(tree, None)


def closure_paths(tree: Node) -> list[str]:
    """The files a load's tree maps (each once, in tree order)."""
    out: list[str] = []
    seen: set[str] = set()

    def walk(node: Node) -> None:
        if node.path and winpath.key(node.path) not in seen:
            seen.add(winpath.key(node.path))
            out.append(node.path)
        for c in node.children:
            walk(c)

    walk(tree)
    return out


def _delay_imports(target: Target, sim: PythonSimulator, tree: Node, analysis: LoadAnalysis) -> list[DelayImport]:
    """Each delay-load import of the closure's own files, loaded as the delay-load helper would at its
    first call, after the load (rules.rule_delay_load_call). A missing one is a problem too."""

    out: list[DelayImport] = []
    for path in closure_paths(tree):
        if target.world.target_file(path) is None or winpath.key(path) in analysis.standins:
            continue
        facts = sim.world.file(path)
        if facts is None or facts.pe is None:
            continue
        for imp in facts.pe.delay_imports:
            r = sim.do(Call(op="delay_load", module=winpath.basename(path), name=imp.dll))[0]
            node = r.tree
            cls = _class_of(target, imp.dll, node.path if node else None, sim.world)
            out.append(DelayImport(winpath.basename(path), imp.dll, r.error, node.path if node else None,
                                   node.how if node else "", node.how_kind if node else "", cls))
            if r.error and r.leaf is not None and r.leaf.cause == "not_found":
                searched = list(node.search) if node else []
                analysis.problems.append(Problem(
                    "missing", winpath.basename(imp.dll), [winpath.basename(path)], cls, searched=searched,
                    elsewhere=[f.path for f in target.file_named(imp.dll)],
                    detail=f"delay-load import of {winpath.basename(path)}: fails at its first call"))
    return out


@dataclass
class DepsResult:
    target: Target
    loads: list[LoadAnalysis]

    @property
    def problems(self) -> list[Problem]:
        return [p for a in self.loads for p in a.problems]

    @property
    def failing(self) -> list[Problem]:
        """The problems of the loads the package needs: not those of a file it loads only on demand and does
        without (LoadAnalysis.optional_by): what makes `deps` exit 1."""
        return [p for a in self.loads if not a.optional_by for p in a.problems]

    @property
    def diagnosis(self) -> Diagnosis:
        """The loads it would make as the typed Diagnosis (static_diagnosis)."""
        return static_diagnosis(self)


# a static problem's cause as a failed load's (model.Cause), for the Diagnosis of a wheel or folder
PROBLEM_CAUSES: dict[str, Cause] = {"missing": "not_found", "wrong_machine": "bad_machine", "missing_export": "missing_export",
                                    "missing_ordinal": "missing_export", "not_pe": "not_pe",
                                    "access_denied": "access_denied", "apiset_no_host": "not_found",
                                    "invalid_parameter": "invalid_parameter"}


def static_diagnosis(result: DepsResult) -> Diagnosis:
    """`dlltrace deps` as the Diagnosis of one (not run) process: each problem that would make a load fail is a
    failed load of its root, with its leaf, the folders searched for it and where the package has it; the
    problems after the first in a root are what fails next."""
    failures: list[FailedLoad] = []
    for a in result.loads:
        found = [p for p in a.problems if p.kind in PROBLEM_CAUSES]
        fate: Fate = "went_on" if a.optional_by else "fatal"
        for i, p in enumerate(found):
            tried = tuple(Tried(winpath.join(d.folder, p.dll), d.rule, "not_there") for d in p.searched)
            failures.append(FailedLoad(
                seq=len(failures) + 1, api=a.result.op, name=a.root, error=a.result.error, message=p.detail,
                # (a file loaded only on demand: its package goes on without it; its class as a went_on load's)
                fate=fate, reason=None, origin="", leaf=p.dll, cause=PROBLEM_CAUSES[p.kind],
                klass=rule_load_class(fate, None, a.root, p.dll),
                needed_by=p.needed_by[0] if p.needed_by else None, chain=(), tried=tried,
                elsewhere=tuple(Copy(e, "not_searched") for e in p.elsewhere),
                next_failures=tuple(NextFailure(q.dll, PROBLEM_CAUSES[q.kind], q.needed_by[0] if q.needed_by else "")
                                    for q in found[i + 1:]),
                fixes=(), model_agrees=True))
    end = ProcessEnd("never_ran")
    return Diagnosis("windows", 0, result.target.given, end,
                     process_outcome(end.kind, None, tuple(failures), None), tuple(failures))


# check's problems that are not a failed load's cause in deps: what each would do on a machine without the
# external (not_allowed, python_mismatch: the DLL is not found; vcruntime_older: the runtime's DllMain, or the
# imports it lacks, fail the load); cuda_mixed names no one DLL
CHECK_CAUSES: dict[str, Optional[Cause]] = {**PROBLEM_CAUSES, "not_allowed": "not_found", "python_mismatch": "not_found",
                                            "vcruntime_older": "init_failed", "cuda_mixed": None,
                                            "required_not_given": "not_found", "nothing_to_check": None,
                                            "missing_version": "missing_export", "not_elf": "not_pe"}


def check_diagnosis(result: CheckResult) -> Diagnosis:
    """`dlltrace check` as the Diagnosis of one (not run) package: each problem a failed load of the file that
    needs the DLL (a file of the package that is itself bad: a failed load of it), its fate fatal (the gate
    fails on it; a problem of a file loaded only on demand, CheckResult.optional_problems: went_on, as deps has
    it), its leaf the DLL, and where the package has it."""
    failures: list[FailedLoad] = []
    for p in [*result.problems, *result.optional_problems]:
        cause = CHECK_CAUSES[p.kind]
        by = p.needed_by[0] if p.needed_by else None
        fate: Fate = "went_on" if p.optional_by else "fatal"  # (a file loaded only on demand: as deps has it)
        failures.append(FailedLoad(
            seq=len(failures) + 1, api="static imports", name=by or p.path or p.dll, error=0, message=p.detail,
            fate=fate, reason=None, origin="", leaf=p.dll or None, cause=cause, needed_by=by,
            klass=rule_load_class(fate, None, by or p.path or p.dll, p.dll),
            chain=tuple(x for x in (by, p.dll) if x), tried=(),
            elsewhere=tuple(Copy(e, "not_searched") for e in p.elsewhere), next_failures=(), fixes=(),
            model_agrees=True))
    end = ProcessEnd("never_ran")
    return Diagnosis("linux" if result.policy else "windows", 0, result.target.given, end,
                     process_outcome(end.kind, None, tuple(failures), None), tuple(failures))


def roots_of(target: Target) -> list[str]:
    """The files deps loads: the file given; for a folder or wheel every extension (.pyd) and
    executable, then every DLL that none of those loads reach (each in turn: one that a DLL before it
    loads is left out)."""
    if target.focus:
        return [target.focus]
    files = sorted([f.path for f in target.files if not any(winpath.same(f.path, t) for t in target.templates)]
                   + [p for p in target.placed if p.lower().endswith(".exe")],
                   key=lambda p: (not p.lower().endswith(".pyd"), not p.lower().endswith(".exe"), p.lower()))
    return files


LOADER_WORDS = {"delvewheel": "{package}'s delvewheel patch", "pywin32_bootstrap": "pywin32's .pth bootstrap",
                "torch": "torch's _load_dll_libraries", "qt_plugins": "Qt's plugin loader, its Qt libraries loaded"}


@dataclass(frozen=True)
class LoaderEffects:
    """What the packages' own loaders have done when a root loads: folders added (os.add_dll_directory), folders
    put on PATH, DLLs loaded by full path, and the loaders in words."""

    dirs: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    preloaded: tuple[str, ...] = ()
    preloaded_by: tuple[str, ...] = ()  # the loader of each preloaded DLL, in words
    words: tuple[str, ...] = ()


def _loader_words(lo: LoaderRule) -> str:
    return LOADER_WORDS.get(lo.how, "{package}'s " + lo.source.rsplit("/", 1)[-1]).format(package=lo.package)


def rule_package_loader_effects(target: Target, root: str) -> LoaderEffects:
    """The folders the packages' own loaders add (and put on PATH) and the DLLs they load by full path before
    `root` loads, as importing it would (pkgloaders.py, data/loaders.json: delvewheel's patch before the
    package's extensions, pywin32's .pth at every start, torch's loader before torch's, functorch's and
    torchvision's, scikit-learn's preloads, PySide6's shiboken6 folder ...), those that exist in the model. A
    loader that runs only when the program calls it (onnxruntime.preload_dlls) does nothing here; a variable's
    folder (%CUDA_PATH%\\bin) neither: the model has no environment. An .exe is started, not imported: none
    (its start is rule_exe_path's)."""
    if root.lower().endswith(".exe"):
        return LoaderEffects()
    site = site_packages(target.python)
    member = site_member(target, root)
    if member is None:
        return LoaderEffects()
    dirs: list[str] = []
    path: list[str] = []
    pre: list[str] = []
    pre_by: list[str] = []
    words: list[str] = []

    def at(rel_path: str) -> str:
        return winpath.normalize(winpath.join(site, rel_path.replace("/", "\\")))
    for lo in target.loaders:
        host = [at(d) for d in lo.host_dirs if lo.hosts(member)]  # (a Qt plugin: its host's Qt folder)
        host = [d for d in host if target.world.is_dir(d) and not any(winpath.same(d, x) for x in dirs)]
        if host:
            dirs += host
            words.append(_loader_words(lo))
        if not lo.covers(member) or lo.when == "call":
            continue
        adds = [at(a) for a in lo.adds]
        adds += [winpath.join(python_home(target.python), a.replace("/", "\\")) for a in lo.prefix_adds]
        found = [d for d in adds if target.world.is_dir(d) and not any(winpath.same(d, x) for x in dirs)]
        on_path = [d for d in map(at, lo.path_adds) if target.world.is_dir(d) and not any(winpath.same(d, x) for x in path)]
        loads: list[str] = []
        for f in lo.preload_files:
            if f.endswith("/*.dll"):
                loads += [p for p in target.world.files_in(at(f[:-len("/*.dll")])) if p.lower().endswith(".dll")]
            elif target.world.file(at(f)) is not None:
                loads.append(at(f))
        if found or on_path or loads:
            dirs += found
            path += on_path
            for p in loads:
                if not any(winpath.same(p, x) for x in pre):
                    pre.append(p)
                    pre_by.append(_loader_words(lo))
            words.append(_loader_words(lo))
    return LoaderEffects(tuple(dirs), tuple(path), tuple(pre), tuple(pre_by), tuple(words))


def rule_exe_path(target: Target, root: str) -> list[str]:
    """An .exe a wheel ships (pythonservice.exe, Pythonwin.exe) is started where its Python is usable: the
    Python's folder and its Scripts on PATH (an activated environment, or the installer's "Add to PATH"), so
    python3XY.dll is found as when Python itself starts it."""
    if not root.lower().endswith(".exe"):
        return []
    home = python_home(target.python)
    return [home, winpath.join(home, "Scripts")]


def deps(target: Target, flags: Optional[int] = None, extra_path: Iterable[str] = (),
         dll_dirs: Iterable[str] = (), only: Optional[list[str]] = None) -> DepsResult:
    """Load each root (roots_of, or `only`: Windows paths of target files) and explain it, each as its package
    loads it (rule_package_loader_effects, rule_exe_path)."""
    path = [_model_path(target, p) for p in extra_path]
    dirs = [_model_path(target, p) for p in dll_dirs]
    loads: list[LoadAnalysis] = []
    reached: set[str] = set()
    for root in (only if only else roots_of(target)):
        if winpath.key(root) in reached and not only:
            continue
        if not only and _other_machine_copy(target, root):  # (the package loads its twin for this machine)
            continue
        eff = rule_package_loader_effects(target, root)
        if any(winpath.same(root, x) for x in eff.preloaded):  # (the root is one of them: it loads itself, for real)
            keep = [i for i, x in enumerate(eff.preloaded) if not winpath.same(root, x)]
            eff = dataclasses.replace(eff, preloaded=tuple(eff.preloaded[i] for i in keep),
                                      preloaded_by=tuple(eff.preloaded_by[i] for i in keep))
        ctx = context_for(root, target.python, flags, [*eff.path, *path, *rule_exe_path(target, root)], dirs + list(eff.dirs))
        ctx = dataclasses.replace(ctx, after=eff.words, preloaded=eff.preloaded, preloaded_by=eff.preloaded_by)
        a = analyse_load(target, root, ctx)
        if not only and not target.focus:  # (a file asked for by name is never optional)
            a = dataclasses.replace(a, optional_by=rule_optional_file(target, root))
        if target.records:
            a = dataclasses.replace(a, problems=[rule_record_of_installed_files(target, p) for p in a.problems])
        loads.append(a)
        # (an optional file's load reaches nothing for the roots after it: a DLL of the package it reaches is loaded
        # as a root of its own, so that its failure is the package's, as check counts it, not the optional file's)
        if a.result.tree is not None and not a.optional_by:
            # (a DLL a package's loader loaded first is "already loaded" here, its own imports unread: it is a root
            # of its own, never reached through another)
            pre = {winpath.key(p) for p in ctx.preloaded}
            reached.update(k for k in (winpath.key(p) for p in closure_paths(a.result.tree))
                           if k not in a.standins and k not in pre)
    return DepsResult(target, loads)


def _other_machine_copy(target: Target, root: str) -> bool:
    facts = target.world.file(root)
    machine = facts.pe.machine if facts is not None and facts.pe is not None else None
    return machine is not None and machine != target.machine and rule_other_machine_copy(target, root, machine) is not None


def _model_path(target: Target, p: str) -> str:
    """A folder given on the command line: a Windows path as it is; a relative one is inside the target."""
    if winpath.is_absolute(p):
        return winpath.normalize(p)
    return winpath.join(target.root, p.replace("/", "\\"))


# --- check --------------------------------------------------------------------------------------------
Status = Literal["bundled", "windows", "apiset", "allowed", "python", "system", "not_allowed", "required", "given",
                 "assumed", "required_not_given", "optional"]


@dataclass(frozen=True)
class GateOptions:
    """What the gate lets through besides the package's own files and the system (commands/check.py's options):
    `classes` (--allow cuda), `names` (--allow cudart64_12.dll, globs: fnmatch, case-insensitive), `dists` (--allow
    dist:NAME: a DLL data/packages.json says that distribution provides), `exclude` (--exclude NAME: neither
    required nor reported, like auditwheel's and delvewheel's), `assume_installed` (a required distribution that is
    not given: its DLLs pass), `allow_pure` (a wheel with no binary passes)."""

    classes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    dists: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    assume_installed: tuple[str, ...] = ()
    allow_pure: bool = False

    @property
    def allow(self) -> tuple[str, ...]:
        """The --allow values as given (JSON `allow`)."""
        return (*self.classes, *self.names, *(f"dist:{d}" for d in self.dists))

    def allows_name(self, name: str) -> bool:
        return _matches(name, self.names)

    def excludes(self, name: str) -> bool:
        return _matches(name, self.exclude)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    import fnmatch

    low = name.lower()
    return any(fnmatch.fnmatchcase(low, p.lower()) for p in patterns)


def gate_options(allow: Iterable[str] = (), exclude: Iterable[str] = (), assume_installed: Iterable[str] = (),
                 allow_pure: bool = False) -> GateOptions:
    """GateOptions from the command line's values: an --allow value is a class (ALLOWABLE), `dist:NAME`, or a DLL
    name or glob (it has a `.` or one of `*?[`); anything else is a usage error (exit 2)."""
    classes: list[str] = []
    names: list[str] = []
    dists: list[str] = []
    for a in allow:
        a = a.strip()
        if not a:
            continue
        if a.lower().startswith("dist:"):
            if not a[5:].strip():
                raise DlltraceError(f"--allow {a}: give a distribution's name after dist:", EXIT_USAGE)
            dists.append(normalize_dist(a[5:]))
        elif any(c in a for c in ".*?["):
            names.append(a.lower())
        elif a.lower() in ALLOWABLE:
            classes.append(a.lower())
        else:
            raise DlltraceError(f"--allow {a}: not a class (one of {', '.join(ALLOWABLE)}), a DLL name (x.dll, "
                                f"globs allowed) or dist:NAME", EXIT_USAGE)
    return GateOptions(tuple(classes), tuple(names), tuple(dists),
                       tuple(e.strip().lower() for e in exclude if e.strip()),
                       tuple(normalize_dist(d) for d in assume_installed if d.strip()), allow_pure)


@dataclass(frozen=True)
class Provider:
    """Where a DLL the package does not carry comes from, when not from the system: a distribution (`dist`), given
    in this call as `target` (None: not given), `required` by the package's Requires-Dist or not."""

    dist: str
    target: Optional[str]
    required: bool

    def to_dict(self) -> dict:
        return {"dist": self.dist, "target": self.target, "required": self.required}


@dataclass
class CheckRow:
    """One DLL some file of the package imports, with who imports it and the verdict."""

    dll: str  # base name as first spelled
    klass: DllClass
    status: Status
    needed_by: list[str] = field(default_factory=list)  # package-relative paths of the importers
    delay_only: bool = True  # only delay-load imports need it
    provider: Optional[Provider] = None  # required / given / assumed / required_not_given: the distribution
    # status optional: the loader row (data/loaders.json) that loads every file needing it only on demand; while
    # check runs, None until a first importer is seen, "" once one that is not optional is
    optional_by: Optional[str] = None

    def to_dict(self) -> dict:
        d = {"dll": self.dll, "class": self.klass.to_dict(), "status": self.status,
             "needed_by": list(self.needed_by), "delay_only": self.delay_only}
        if self.provider is not None:
            d["provider"] = self.provider.to_dict()
        if self.status == "optional":
            d["optional_by"] = self.optional_by
        return d


@dataclass
class FileRow:
    path: str  # package-relative
    machine: Optional[str]
    linker_version: Optional[str]
    file_version: Optional[str]
    error: Optional[str] = None
    cuda_majors: tuple[int, ...] = ()
    member: Optional[str] = None  # a wheel's: the member name (as RECORD lists it)
    record_line: Optional[int] = None  # the line of RECORD that lists it


@dataclass
class CheckResult:
    target: Target
    allow: tuple[str, ...]
    files: list[FileRow]
    rows: list[CheckRow]
    problems: list[Problem]
    cuda_majors: tuple[int, ...]  # the CUDA major(s) the package's DLL names expect, () for none
    vcruntime_required: Optional[str]  # the newest linker (14.xx) among files that import the VC++ runtime
    vcruntime_bundled: Optional[str]  # the file version of a bundled msvcp140/vcruntime140, if any
    options: GateOptions = field(default_factory=GateOptions)
    policy: Optional[str] = None  # a Linux wheel: the manylinux/musllinux policy it was checked against
    # problems of files the package loads only on demand and does without (Problem.optional_by): no failure, as
    # deps goes on past them
    optional_problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def diagnosis(self) -> Diagnosis:
        """The gate's verdict as the typed Diagnosis (check_diagnosis)."""
        return check_diagnosis(self)


_VC_COMPONENTS = ("msvcp", "vcruntime", "concrt", "vcomp")


def check(target: Target, allow: Iterable[str] = (), peers: Iterable[Target] = (),
          options: Optional[GateOptions] = None) -> CheckResult:
    """The gate's verdict on one target. `peers`: the other targets given in the same call (a DLL one of them has
    is provided by it: `required` when the target's Requires-Dist names its distribution, else `given`);
    `options` (gate_options) or, as before it, `allow`: --allow values."""
    opts = options if options is not None else gate_options(allow)
    others = [p for p in peers if p is not target]
    if target.platform == "linux":  # (a Linux wheel: diagnosis/gate.py gives it to static_elf.check_elf)
        raise ValueError(f"{target.given}: a Linux wheel: diagnosis.gate.check_target checks it")
    world = target.world
    rel = lambda p: winpath.normalize(p)[len(target.root) + 1:] if winpath.normalize(p).lower().startswith(  # noqa: E731
        target.root.lower() + "\\") else p
    world.prefetch([f.path for f in target.files], workers=min(2, os.cpu_count() or 1))
    facts_of: dict[str, FileFacts] = {}
    files: list[FileRow] = []
    problems: list[Problem] = []
    optional_problems: list[Problem] = []  # (CheckResult.optional_problems)
    own: list[tuple[str, Problem]] = []  # (a file's own problem: optional or not once every file is read)
    for f in sorted(target.files, key=lambda f: f.path.lower()):
        if opts.excludes(winpath.basename(f.path)):
            continue
        facts = world.file(f.path)
        if facts is None:
            continue
        facts_of[winpath.key(f.path)] = facts
        pe = facts.pe
        member = f.source if target.kind == "wheel" else None
        files.append(FileRow(rel(f.path), pe.machine if pe else None, pe.linker_version if pe else None,
                             pe.file_version if pe else None, facts.error, member=member,
                             record_line=target.record_lines.get(member) if member else None))
        bad: Optional[Problem] = None
        if pe is None:
            bad = Problem("not_pe" if facts.error != "access_denied" else "access_denied", winpath.basename(f.path),
                          path=rel(f.path), detail=f"{rel(f.path)} is not a readable PE file")
        elif (pe.machine != target.machine and not rules.rule_il_only_image_fits(pe, target.machine)
              and not any(winpath.same(f.path, t) for t in target.templates)
              and rule_other_machine_copy(target, f.path, pe.machine) is None):
            # (a template, one launcher a machine that its package copies and never runs where it is: not wrong)
            bad = Problem("wrong_machine", winpath.basename(f.path), path=rel(f.path), machine=pe.machine,
                          detail=f"{rel(f.path)} is {pe.machine}; the package is {target.machine}")
        if bad is not None:
            own.append((winpath.key(f.path), bad))
    optional_of = rule_optional_files(target, facts_of, opts.excludes)
    for k, bad in own:
        if optional_of.get(k):  # (deps goes on past its failed load: no failure here)
            optional_problems.append(dataclasses.replace(bad, optional_by=optional_of[k]))
        else:
            problems.append(bad)
    if not files and target.kind == "wheel" and not opts.allow_pure:
        problems.append(rule_nothing_to_check(target))
    rows: dict[str, CheckRow] = {}
    vc_required: Optional[str] = None
    vc_of = rule_vc_runtime_of_its_package(target, facts_of)
    # (an installed site-packages has no one bundled runtime: each package's own, rule_vc_runtime_of_its_package)
    vc_bundled = None if _many_packages(target) else _bundled_vc_version(target, facts_of)
    for f in sorted(target.files, key=lambda f: f.path.lower()):
        facts = facts_of.get(winpath.key(f.path))
        if facts is None or facts.pe is None:
            continue
        pe = facts.pe
        uses_vc = False
        optional = optional_of.get(winpath.key(f.path), "")  # (once a file, not once an import)
        for imp, delay in [(i, False) for i in pe.imports] + [(i, True) for i in pe.delay_imports]:
            name = rules.rule_default_extension(imp.dll)
            if opts.excludes(name):  # (--exclude: neither required nor reported)
                continue
            copies = target.file_named(name)
            bound = _bound_copy(f, copies)
            bound_facts = facts_of.get(winpath.key(bound.path)) if bound is not None else None
            peer: Optional[Target] = None
            if bound is None:  # (another target given in this call may have it: its copy is bound)
                peer, bound_facts = _peer_copy(others, name)
            version = bound_facts.pe.file_version if bound_facts is not None and bound_facts.pe is not None else None
            cls = classify(name, bundled=bool(copies), file_version=version)
            if cls.kind == "vcruntime" and cls.component in _VC_COMPONENTS:
                uses_vc = True
            row = rows.get(name.lower())
            if row is None:
                status, provider = rule_dll_provider(cls, target, opts, name, peer)
                row = rows[name.lower()] = CheckRow(name, cls, status, provider=provider)
            row.needed_by.append(rel(f.path))
            row.delay_only = row.delay_only and delay
            if row.optional_by != "":
                row.optional_by = optional
            if bound_facts is not None and bound_facts.pe is not None and row.status in ("bundled", "required", "given"):
                missing = [n for n in imp.names if n not in bound_facts.pe.exports and n not in bound_facts.pe.forwarders]
                missing_o = [o for o in imp.ordinals if o not in bound_facts.pe.export_ordinals]
                if missing or missing_o:
                    where = rel(bound.path) if bound is not None else f"{peer.given if peer else ''}: {name}"
                    # (an importer loaded only on demand: deps goes on past its failed load, so no failure here)
                    (optional_problems if optional else problems).append(Problem(
                        "missing_export" if missing else "missing_ordinal", name, [rel(f.path)], cls,
                        path=where, exports=missing, ordinals=missing_o,
                        detail=f"{where} does not export {', '.join(missing[:3]) or missing_o}"
                               + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                               + f" (imported by {rel(f.path)})", optional_by=optional))
        if uses_vc and pe.linker_version and pe.linker_version.startswith("14."):
            if vc_required is None or version_key(pe.linker_version) > version_key(vc_required):
                vc_required = pe.linker_version
            held = vc_of(f.path, [rules.rule_default_extension(i.dll) for i in (*pe.imports, *pe.delay_imports)])
            if held is not None and version_key(held[0])[:2] < version_key(pe.linker_version)[:2]:
                vc, copy = held
                where = (f"{rel(copy)} ({vc}), the oldest {winpath.basename(copy)} installed here, is the one it "
                         f"binds to when {_package_of(target, copy)} is imported first") if copy else \
                    f"the bundled VC++ runtime is {vc}"
                problems.append(Problem(
                    "vcruntime_older", winpath.basename(copy) if copy else "msvcp140.dll", [rel(f.path)],
                    classify("msvcp140.dll", bundled=True, file_version=vc),
                    detail=f"{rel(f.path)} was linked by MSVC {pe.linker_version}; {where}: the runtime must be at "
                           "least as new as the newest toolset used"))
    not_given = [d for d in target.requires if d not in opts.assume_installed and not any(p.dist == d for p in others)]
    for row in rows.values():
        if row.status in ("not_allowed", "required_not_given") and row.optional_by:
            row.status = "optional"  # (only files loaded on demand, done without when they fail, need it)
        elif row.status == "not_allowed":
            perhaps = (f"; {target.dist or 'it'} requires {', '.join(not_given)}, not given: pass their wheels to see "
                       "whether they provide it") if not_given else ""
            older = (" (not in the VC++ 2015-2022 Redistributable, which the gate takes as installed: bundle it, or "
                     f"--allow {row.dll.lower()})") if row.klass.kind == "vcruntime" else ""
            problems.append(Problem("not_allowed", row.dll, list(row.needed_by), row.klass,
                                    detail=f"{row.dll} ({row.klass.label}) is not in the package, not part of "
                                           "Windows, and not allowed" + older
                                           + (" (delay-load only)" if row.delay_only else "") + perhaps))
        elif row.status == "required_not_given" and row.provider is not None:
            problems.append(Problem("required_not_given", row.dll, list(row.needed_by), row.klass,
                                    detail=required_not_given_words(row.dll, row.provider.dist)))
        elif row.status == "python" and row.klass.kind == "python" and not _python_ok(row.klass, target):
            problems.append(Problem("python_mismatch", row.dll, list(row.needed_by), row.klass,
                                    detail=f"{row.dll} does not match the wheel's Python ({target.wheel_python_tag})"))
    majors, mixed = _cuda_majors(rows.values())
    if mixed:
        problems.append(Problem("cuda_mixed", "", [], None,
                                detail="the package's CUDA DLL names fit no single CUDA major: "
                                       + ", ".join(f"{r.dll} ({r.klass.label})" for r in rows.values()
                                                   if r.klass.kind == "cuda" and r.klass.cuda_majors)))
    problems = [rule_record_of_installed_files(target, p) for p in problems]
    optional_problems = [rule_record_of_installed_files(target, p) for p in optional_problems]  # (as deps has them)
    return CheckResult(target, opts.allow, files, sorted(rows.values(), key=lambda r: (r.status, r.dll.lower())),
                       problems, majors, vc_required, vc_bundled, opts, optional_problems=optional_problems)


def required_not_given_words(dll: str, dist: str) -> str:
    return (f"{dll}: not checked: {dist} is required but not given; pass its wheel or --assume-installed {dist}")


def rule_nothing_to_check(target: Target) -> Problem:
    """A wheel with no binary (no PE file; for a Linux wheel, no ELF file) fails: a gate that passes nothing
    checked would pass a wheel built without its extensions (auditwheel's --allow-pure-python-wheel: here
    --allow-pure)."""
    what = "ELF" if target.platform == "linux" else "PE (.dll, .pyd, .exe)"
    return Problem("nothing_to_check", "", [], None,
                   detail=f"nothing to check: {os.path.basename(target.given)} has no {what} file; --allow-pure "
                          "passes a wheel with no binaries")


def _peer_copy(peers: list[Target], name: str) -> tuple[Optional[Target], Optional[FileFacts]]:
    """The first target given beside this one that has a file `name`, and that file's facts."""
    for p in peers:
        if p.platform == "linux":
            continue
        copies = p.file_named(name)
        if copies:
            return p, p.world.file(copies[0].path)
    return None, None


def rule_dll_provider(cls: DllClass, target: Target, opts: GateOptions, name: str,
                      peer: Optional[Target]) -> tuple[Status, Optional[Provider]]:
    """Where a DLL the package imports comes from, and whether the gate lets it through, in this order: an API
    set; the package's own file; Windows; the Python; the VC++ runtime (system); another target given in this call
    (`required` when the package's Requires-Dist names its distribution, `given` otherwise); allowed by name, by
    distribution or by class; a distribution data/packages.json says provides it, that the package requires and
    that is not given (`assumed` with --assume-installed, else `required_not_given`: a failure that says so);
    else `not_allowed`."""
    base = _status(cls, target, (), name)
    if base != "not_allowed":
        return base, None
    if peer is not None:
        dist = peer.dist or os.path.basename(peer.given)
        req = bool(peer.dist) and peer.dist in target.requires
        return ("required" if req else "given"), Provider(dist, peer.given, req)
    known = [p.package for p in packages.providers(name) if p.package]
    dists = [normalize_dist(d) for d in known]
    if opts.allows_name(name) or any(d in opts.dists for d in dists) or cls.kind in opts.classes:
        req_d = next((d for d in dists if d in target.requires), None)
        return "allowed", (Provider(req_d, None, True) if req_d else None)
    for d in dists:
        if d in target.requires:
            return ("assumed" if d in opts.assume_installed else "required_not_given"), Provider(d, None, True)
    return "not_allowed", None


# The VC++ runtime DLLs every python.org CPython 3.5+ ships next to python.exe (vcruntime140_1.dll since
# 3.8): a DLL that an extension imports from them finds them there (loaded already, or APPLICATION_DIR),
# as `deps` shows; msvcp140.dll and the rest are not shipped and stay externals.
PYTHON_SHIPPED_VC = frozenset({"vcruntime140.dll", "vcruntime140_1.dll"})


def check_targets(given: str) -> list[str]:
    """What `check` examines for one argument: a folder's own DLLs and every wheel (.whl) in it (a CI
    `dlltrace check dist/`), else the argument itself; a folder with neither is a usage error."""
    if not os.path.isdir(given):
        return [given]
    listed = rule_installed_files_are_not_wheels(given)
    wheels = sorted(os.path.join(given, e) for e in _listdir(os.path.abspath(given))
                    if e.lower().endswith(".whl") and e not in listed)
    names = [fn for _, _, fns in os.walk(given) for fn in fns]
    so = any(fn.lower().endswith(".so") or ".so." in fn.lower() for fn in names)
    # (a Linux install holds PE files that are no part of it -- pip's and setuptools' Windows launchers, templates;
    # .NET assemblies; a .pyd of a Windows wheel installed by mistake --: windows_install)
    has_pe = windows_install(names)
    out = ([given] if has_pe else []) + wheels
    if not out and so:
        raise DlltraceError(f"{given}: a Linux install (its .so files), and no wheel (.whl) in it: check takes "
                            "a Linux wheel; `dlltrace deps FOLDER` resolves each .so on this machine", EXIT_USAGE)
    if not out:
        raise DlltraceError(f"{given}: no wheel (.whl) and no .dll, .pyd or .exe in it: nothing to check", EXIT_USAGE)
    return out


def rule_installed_files_are_not_wheels(folder: str) -> frozenset[str]:
    """The names of the .whl files in an installed site-packages folder that a distribution's RECORD there lists: that
    distribution's own files, not wheels to check (numpy 2.1.3's win_amd64 wheel ships an empty
    numpy-2.1.3-cp311-cp311-win_amd64.whl at its top, which pip installs into site-packages)."""
    return installed_wheel_files(folder)


def _status(cls: DllClass, target: Target, allowed: tuple[str, ...], name: str = "") -> Status:
    if cls.kind == "apiset":
        return "apiset"
    if cls.bundled:
        return "bundled"
    if cls.kind == "windows":
        return "windows"
    if cls.kind == "python" or (cls.kind == "vcruntime" and name.lower() in PYTHON_SHIPPED_VC
                                and target.kind != "file"):
        return "python"
    if cls.kind == "vcruntime" and target.world.vc_runtime and name.lower() in VC_RUNTIME_DLLS:
        # (a system requirement: the VC++ 2015-2022 Redistributable's DLLs, in the modelled System32 as deps has them;
        # an older runtime's -- msvcr120.dll, VC++ 2013 -- is not there, and deps says it is missing)
        return "system"
    if cls.kind in allowed:
        return "allowed"
    return "not_allowed"


def _python_ok(cls: DllClass, target: Target) -> bool:
    """A pythonXY.dll import fits the wheel's tag (cp311: python311.dll or python3.dll; abi3: python3.dll)."""
    tag = target.wheel_python_tag
    if not tag:
        return True
    v = cls.python_version
    if v in ("3", "3t"):
        return True
    return tag.startswith("cp") and v.replace(".", "") == tag[2:]


def _bound_copy(importer: TargetFile, copies: list[TargetFile]) -> Optional[TargetFile]:
    """The bundled copy an import binds to: the one in the importer's folder, else the first."""
    if not copies:
        return None
    here = winpath.key(winpath.dirname(importer.path))
    return next((c for c in copies if winpath.key(winpath.dirname(c.path)) == here), copies[0])


def rule_vc_runtime_of_its_package(target: Target, facts_of: dict[str, FileFacts]
                                   ) -> Callable[[str, Sequence[str]], Optional[tuple[str, str]]]:
    """The bundled VC++ runtime a file of the target is held to (its version, and in an installed site-packages the
    copy), given the names the file imports:
    - a wheel or a package folder is one package: its copy of msvcp140.dll or vcruntime140.dll, wherever it is,
      is the runtime of every file that imports a VC++ runtime DLL the package bundles, by its name; not one that
      imports only vcruntime140.dll or vcruntime140_1.dll when the package bundles no copy of those (python.exe's
      own serves it: scikit-learn 1.5.2 bundles msvcp140.dll and vcomp140.dll 14.40, and 40 of its extensions,
      MSVC 14.41, import neither);
    - an installed site-packages holds many, and Windows binds an import of msvcp140.dll to the module of that name
      loaded first, from whichever folder (a copy under its own name is not renamed away as delvewheel's are): a
      file that imports a VC++ runtime DLL by its own name is held to the oldest copy of that name installed here
      (pyarrow's msvcp140.dll 14.28 serves scikit-learn's extensions if pyarrow is imported first). Not
      vcruntime140.dll or vcruntime140_1.dll: python.exe loads its own first, and an extension binds to that
      (PYTHON_SHIPPED_VC). A file that imports none by name is held to no copy (h5py's extensions import only
      vcruntime140.dll)."""
    if not _many_packages(target):
        whole = _bundled_vc_version(target, facts_of)
        bundled = {winpath.basename(f.path).lower() for f in target.files
                   if classify(winpath.basename(f.path)).kind == "vcruntime"}
        return lambda path, names: (whole, "") if whole and any(n.lower() in bundled for n in names) else None

    oldest: dict[str, tuple[str, str]] = {}  # runtime DLL name -> (version, path) of its oldest copy here
    for f in target.files:
        name = winpath.basename(f.path).lower()
        facts = facts_of.get(winpath.key(f.path))
        if (name in PYTHON_SHIPPED_VC or facts is None or facts.pe is None or not facts.pe.file_version
                or classify(name).kind != "vcruntime"):
            continue
        if name not in oldest or version_key(facts.pe.file_version) < version_key(oldest[name][0]):
            oldest[name] = (facts.pe.file_version, f.path)

    def held(path: str, names: Sequence[str]) -> Optional[tuple[str, str]]:
        copies = [oldest[n.lower()] for n in names if n.lower() in oldest]
        return min(copies, key=lambda c: version_key(c[0])) if copies else None
    return held


def _package_of(target: Target, path: str) -> str:
    """The distribution whose RECORD lists a file of an installed folder, else its top-level folder's name."""
    entries = target.records.get(winpath.key(path))
    if entries:
        return entries[0].dist
    return winpath.normalize(path)[len(target.root) + 1:].split("\\", 1)[0]


def _many_packages(target: Target) -> bool:
    """Whether the target is an installed site-packages (its root the model's site-packages folder): many packages."""
    return target.kind != "wheel" and winpath.same(target.root, site_packages(target.python))


def _bundled_vc_version(target: Target, facts_of: dict[str, FileFacts]) -> Optional[str]:
    for name in ("msvcp140.dll", "vcruntime140.dll"):
        for c in target.file_named(name):
            f = facts_of.get(winpath.key(c.path))
            if f is not None and f.pe is not None and f.pe.file_version:
                return f.pe.file_version
    return None


def _cuda_majors(rows: Iterable[CheckRow]) -> tuple[tuple[int, ...], bool]:
    """(majors, mixed): the CUDA majors every CUDA DLL name of the package fits (their intersection);
    when none fits them all, the union of each name's majors and mixed=True."""
    sets = [set(r.klass.cuda_majors) for r in rows if r.klass.kind == "cuda" and r.klass.cuda_majors]
    if not sets:
        return (), False
    common = set.intersection(*sets)
    if common:
        return tuple(sorted(common)), False
    return tuple(sorted(set.union(*sets))), True
