"""Which package, driver or part of the system provides a DLL, by the name a process asked for.

The knowledge is data, not code: data/packages.json (version 1). Each row matches DLL names either
by an explicit list ("names", compared case-insensitively) or by a regular expression matched
against the whole name ("pattern", case-insensitive), and says who provides them:

    pip            a pip package (`package`, installed with `requirement`) whose wheel puts the DLL
                   in `folder` under `root`
    package_itself the package's own DLL (torch's c10.dll ...): reinstall `package`
    driver         the NVIDIA driver (nvcuda.dll, nvml.dll ...): never a pip package
    windows        part of Windows (kernel32.dll, dxcore.dll, api-ms-win-* ...)
    python         the Python interpreter's own DLL (python3XX.dll)
    msvc_runtime   the Microsoft Visual C++ Redistributable (msvcp140.dll, vcruntime140.dll ...)
    vs_component   a Visual Studio component, not in the Redistributable (libomp140.x86_64.dll)
    archive        no wheel on PyPI: NVIDIA's CUDA / cuDNN archive (CUDA 10, cuDNN 7)

`folder` is relative to `root`, with forward slashes ("nvidia/cu13/bin/x86_64"; `Provider.win_folder`
gives backslashes). root "site-packages" is the environment's site-packages folder; root "prefix"
is sys.prefix, where a wheel's `<dist>.data/data/` files go (intel-openmp and mkl put their DLLs in
`<prefix>/Library/bin`). Rows that name no folder have root "" and folder "".

Some names are shipped by the packages of several CUDA majors (curand64_10.dll is in the CUDA 11,
12 and 13 packages; cudnn64_9.dll in nvidia-cudnn-cu11/-cu12/-cu13). The DLL name decides first;
the process's CUDA major (when the caller knows it) only chooses among the rows the name matches.

Pure: the only I/O is reading the data file once. A malformed file raises PackageDataError.
"""

from __future__ import annotations

import functools

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Mapping, Any, Literal, Optional, cast, get_args

from dlltrace.datafiles import read_data

ProviderKind = Literal["pip", "driver", "windows", "python", "msvc_runtime", "vs_component", "package_itself", "archive",
                       "msvc_legacy", "windows_feature", "directx_legacy"]
Root = Literal["site-packages", "prefix", ""]

DATA_FILE = "packages.json"
DATA_VERSION = 1
KINDS: tuple[str, ...] = get_args(ProviderKind)
ROOTS: tuple[str, ...] = get_args(Root)
CUDA_MAJORS = (10, 11, 12, 13)
# kinds whose rows name a package (pip: the one to install; package_itself: the one to reinstall)
_WITH_PACKAGE = ("pip", "package_itself")


class PackageDataError(ValueError):
    """data/packages.json is not what this module expects (the message says where and what)."""


@dataclass(frozen=True)
class Provider:
    """Who provides the DLL `dll` (the name as asked). Words-free facts: the renderer picks the words."""

    dll: str  # the base name as asked (a path passed to lookup loses its folder)
    kind: ProviderKind
    component: str  # "cuBLAS", "CUDA runtime", "NVIDIA driver", "Windows", "torch" ...
    cuda_major: Optional[int]  # the CUDA major of the row (pip CUDA rows; 10 for the CUDA 10 archive row)
    package: Optional[str]  # pip distribution name (kinds pip and package_itself), else None
    requirement: Optional[str]  # what to `pip install` ("nvidia-cudnn-cu12<9"), kind pip only
    root: Root  # what `folder` is relative to; "" when there is no folder
    folder: str  # relative to root, forward slashes; "" when there is no folder
    source: str  # where the row's facts come from
    row: str  # the row's id in data/packages.json
    since: Optional[str] = None  # the first version of its installer that ships it ("14.20": VC++ 2019 16.0)
    download: Optional[Mapping[str, str]] = None  # its installer by architecture ("x64", "x86", "arm64", "any")
    exports: Optional[Mapping[str, str]] = None  # export -> the first installer version that has it
    side_by_side: bool = False  # a WinSxS assembly (VC++ 2005, 2008): bound by a manifest, never found on PATH
    # a pip row's: the distribution whose module this package's own replaces (both install it), and which loads the DLL
    # from the package's folder itself (python-magic-bin's magic, for python-magic's): installing it is the whole fix
    replaces: Optional[str] = None

    def download_for(self, arch: str) -> Optional[str]:
        """The installer's address for this architecture ("x64", "x86", "arm64"), or its one address."""
        d = self.download or {}
        return d.get(arch) or d.get("any")

    def export_since(self, export: Optional[str]) -> Optional[str]:
        """The first installer version whose copy exports `export`, when the data knows it."""
        return (self.exports or {}).get(export or "")

    @property
    def win_folder(self) -> str:
        """`folder` with backslashes, for joining to a Windows path."""
        return self.folder.replace("/", "\\")

    @property
    def pip_installable(self) -> bool:
        return self.kind == "pip"


@dataclass(frozen=True)
class _Row:
    id: str
    names: frozenset[str]  # lower case; empty when the row has a pattern
    pattern: Optional[re.Pattern[str]]
    kind: ProviderKind
    component: str
    cuda_major: Optional[int]
    package: Optional[str]
    requirement: Optional[str]
    root: Root
    folder: str
    source: str
    since: Optional[str] = None
    download: Optional[Mapping[str, str]] = None
    exports: Optional[Mapping[str, str]] = None
    side_by_side: bool = False
    replaces: Optional[str] = None

    def matches(self, lower_name: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(lower_name) is not None
        return lower_name in self.names

    def provider(self, dll: str) -> Provider:
        return Provider(dll=dll, kind=self.kind, component=self.component, cuda_major=self.cuda_major,
                        package=self.package, requirement=self.requirement, root=self.root, folder=self.folder,
                        source=self.source, row=self.id, since=self.since, download=self.download, exports=self.exports,
                        side_by_side=self.side_by_side, replaces=self.replaces)


def normalize_dist(name: str) -> str:
    """A distribution name as PEP 503 compares them: torch, scikit-learn (Scikit_Learn, scikit.learn)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _fail(where: str, what: str) -> PackageDataError:
    return PackageDataError(f"{DATA_FILE}: {where}: {what}")


def _str(row: dict[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    v = row.get(key)
    if not isinstance(v, str) or (not empty and not v):
        raise _fail(where, f"{key!r} must be a {'' if empty else 'non-empty '}string, not {v!r}")
    return v


def _opt_str(row: dict[str, Any], key: str, where: str) -> Optional[str]:
    if key not in row:
        raise _fail(where, f"{key!r} is missing (null when it does not apply)")
    v = row[key]
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise _fail(where, f"{key!r} must be a non-empty string or null, not {v!r}")
    return v


_ROW_KEYS = {"id", "names", "pattern", "examples", "kind", "component", "cuda_major", "package", "requirement",
             "root", "folder", "source", "since", "download", "exports", "side_by_side", "replaces"}
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)*$")
_ARCHES = ("x64", "x86", "arm64", "any")
# kinds whose rows may say which installer (and which version of it) ships the DLL
_WITH_INSTALLER = ("msvc_runtime", "msvc_legacy", "directx_legacy", "windows_feature", "driver")


def _installer_facts(raw: dict[str, Any], kind: str, where: str) -> tuple[Optional[str], Optional[dict[str, str]],
                                                                          Optional[dict[str, str]], bool]:
    """A row's optional since / download / exports / side_by_side, validated."""
    since, download, exports = raw.get("since"), raw.get("download"), raw.get("exports")
    sxs = raw.get("side_by_side", False)
    if (since is not None or download is not None or exports is not None or sxs) and kind not in _WITH_INSTALLER:
        raise _fail(where, f"kind {kind!r} takes no since, download, exports or side_by_side")
    if since is not None and (not isinstance(since, str) or not _VERSION.match(since)):
        raise _fail(where, f"since must be a version such as '14.20', not {since!r}")
    if download is not None:
        if (not isinstance(download, dict) or not download or set(download) - set(_ARCHES)
                or not all(isinstance(u, str) and u.startswith("https://") for u in download.values())):
            raise _fail(where, f"download must map {list(_ARCHES)} to https:// addresses, not {download!r}")
    if exports is not None:
        if (not isinstance(exports, dict) or not exports
                or not all(isinstance(k, str) and k and isinstance(v, str) and _VERSION.match(v) for k, v in exports.items())):
            raise _fail(where, "exports must map export names to versions such as '14.29'")
    if not isinstance(sxs, bool):
        raise _fail(where, f"side_by_side must be true or false, not {sxs!r}")
    return since, download, exports, sxs


def _parse_row(raw: Any, index: int) -> _Row:
    where = f"rows[{index}]"
    if not isinstance(raw, dict):
        raise _fail(where, "a row must be an object")
    unknown = set(raw) - _ROW_KEYS
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}")
    rid = _str(raw, "id", where)
    where = f"row {rid!r}"
    kind = _str(raw, "kind", where)
    if kind not in KINDS:
        raise _fail(where, f"kind {kind!r} is not one of {list(KINDS)}")
    has_names, has_pattern = "names" in raw, "pattern" in raw
    if has_names == has_pattern:
        raise _fail(where, "give exactly one of 'names' and 'pattern'")
    names: frozenset[str] = frozenset()
    pattern: Optional[re.Pattern[str]] = None
    if has_names:
        ns = raw["names"]
        if not isinstance(ns, list) or not ns or not all(isinstance(n, str) and n.lower().endswith(".dll") for n in ns):
            raise _fail(where, "'names' must be a non-empty list of DLL names (ending in .dll)")
        if len({n.lower() for n in ns}) != len(ns):
            raise _fail(where, "'names' lists a name twice")
        names = frozenset(n.lower() for n in ns)
        if "examples" in raw:
            raise _fail(where, "'examples' belong to pattern rows")
    else:
        p = _str(raw, "pattern", where)
        try:
            pattern = re.compile(p, re.IGNORECASE)
        except re.error as e:
            raise _fail(where, f"pattern {p!r} is not a regular expression: {e}") from None
        ex = raw.get("examples")
        if not isinstance(ex, list) or not ex or not all(isinstance(e, str) for e in ex):
            raise _fail(where, "a pattern row needs 'examples': a non-empty list of names it matches")
        for example in ex:
            if pattern.fullmatch(example.lower()) is None:
                raise _fail(where, f"example {example!r} does not match the pattern {p!r}")
    component = _str(raw, "component", where)
    source = _str(raw, "source", where)
    if "cuda_major" not in raw:
        raise _fail(where, "'cuda_major' is missing (null when it does not apply)")
    cuda = raw["cuda_major"]
    if cuda is not None and (isinstance(cuda, bool) or cuda not in CUDA_MAJORS):
        raise _fail(where, f"cuda_major must be null or one of {list(CUDA_MAJORS)}, not {cuda!r}")
    package = _opt_str(raw, "package", where)
    requirement = _opt_str(raw, "requirement", where)
    if (package is not None) != (kind in _WITH_PACKAGE):
        raise _fail(where, f"kind {kind!r} {'needs' if kind in _WITH_PACKAGE else 'takes no'} 'package'")
    if (requirement is not None) != (kind == "pip"):
        raise _fail(where, f"kind {kind!r} {'needs' if kind == 'pip' else 'takes no'} 'requirement'")
    if package is not None and requirement is not None and not re.match(re.escape(package) + r"($|[<>=!~,; \[])", requirement):
        raise _fail(where, f"requirement {requirement!r} does not start with the package name {package!r}")
    root = _str(raw, "root", where, empty=True)
    if root not in ROOTS:
        raise _fail(where, f"root {root!r} is not one of {list(ROOTS)}")
    folder = _str(raw, "folder", where, empty=True)
    if (root == "") != (folder == ""):
        raise _fail(where, "root and folder are both empty or both given")
    if kind == "pip" and not folder:
        raise _fail(where, "a pip row needs the folder its wheel puts the DLLs in")
    if folder and ("\\" in folder or folder.startswith("/") or folder.endswith("/") or ".." in folder.split("/")
                   or ":" in folder):
        raise _fail(where, f"folder {folder!r} must be relative, with forward slashes, without '..'")
    since, download, exports, sxs = _installer_facts(raw, kind, where)
    replaces = raw.get("replaces")
    if replaces is not None and (kind != "pip" or not isinstance(replaces, str) or not replaces):
        raise _fail(where, f"replaces is a pip row's distribution name, not {replaces!r}")
    return _Row(rid, names, pattern, cast(ProviderKind, kind), component, cuda, package, requirement,
                cast(Root, root), folder, source, since, download, exports, sxs, replaces)


def parse(data: Any) -> tuple[_Row, ...]:
    """The rows of a packages.json document (already decoded), validated. Raises PackageDataError."""
    if not isinstance(data, dict):
        raise _fail("top level", "must be an object")
    if data.get("version") != DATA_VERSION:
        raise _fail("top level", f"version must be {DATA_VERSION}, not {data.get('version')!r}")
    raw_rows = data.get("rows")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise _fail("top level", "'rows' must be a non-empty list")
    rows = tuple(_parse_row(r, i) for i, r in enumerate(raw_rows))
    ids = [r.id for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise _fail("rows", f"ids used twice: {dup}")
    # an exact name in several rows is only for CUDA-major alternatives: pip rows of distinct majors
    by_name: dict[str, list[_Row]] = {}
    for r in rows:
        for n in r.names:
            by_name.setdefault(n, []).append(r)
    for n, rs in by_name.items():
        if len(rs) > 1:
            majors = [r.cuda_major for r in rs]
            if any(r.kind != "pip" for r in rs) or None in majors or len(set(majors)) != len(majors):
                raise _fail("rows", f"{n} is in rows {[r.id for r in rs]}: only pip rows of distinct CUDA majors may share a name")
    placeholders = data.get("placeholders", [])
    if not isinstance(placeholders, list) or not all(isinstance(p, dict) and isinstance(p.get("package"), str)
                                                     for p in placeholders):
        raise _fail("placeholders", "must be a list of objects with a 'package'")
    bad = {p["package"] for p in placeholders} & {r.package for r in rows if r.package}
    if bad:
        raise _fail("rows", f"a row names a placeholder package (no DLLs): {sorted(bad)}")
    checked = data.get("checked")
    if not isinstance(checked, list) or not checked:
        raise _fail("checked", "must be a non-empty list of {date, wheel, rows, summary}")
    known = set(ids)
    for i, c in enumerate(checked):
        w = f"checked[{i}]"
        if not isinstance(c, dict):
            raise _fail(w, "must be an object")
        _str(c, "wheel", w)
        d = _str(c, "date", w)
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", d):
            raise _fail(w, f"date {d!r} is not YYYY-MM-DD")
        cr = c.get("rows")
        if not isinstance(cr, list) or not cr or not all(isinstance(x, str) for x in cr):
            raise _fail(w, "'rows' must be a non-empty list of row ids")
        missing = sorted(set(cr) - known)
        if missing:
            raise _fail(w, f"names rows that do not exist: {missing}")
    return rows


@cache
def load() -> tuple[_Row, ...]:
    """The rows of the shipped data file, read and validated once."""
    try:
        text = read_data(DATA_FILE)
    except OSError as e:
        raise PackageDataError(f"{DATA_FILE}: cannot read it: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PackageDataError(f"{DATA_FILE}: not JSON: {e}") from None
    return parse(data)


def _base(dll_name: str) -> str:
    """The base name: a caller may pass a path (either separator)."""
    return dll_name.replace("/", "\\").rsplit("\\", 1)[-1]


def providers(dll_name: str) -> tuple[Provider, ...]:
    """Every provider whose row matches the name, one per CUDA major (the first matching row of each,
    in file order). Several only where packages of several CUDA majors ship the same name."""
    return _providers(_base(dll_name))


@functools.lru_cache(maxsize=4096)
def _providers(base: str) -> tuple[Provider, ...]:  # (a replay asks about the same names again and again)
    n = base.lower()
    seen: set[Optional[int]] = set()
    out: list[Provider] = []
    for r in load():
        if r.matches(n) and r.cuda_major not in seen:
            seen.add(r.cuda_major)
            out.append(r.provider(base))
    return tuple(out)


def lookup(dll_name: str, *, cuda_major: Optional[int] = None) -> Optional[Provider]:
    """Who provides `dll_name` (a base name or a path; case does not matter), or None if no row knows it.

    When the name alone fits several CUDA majors (curand64_10.dll, cudnn64_9.dll ...), `cuda_major`
    (the process's CUDA major, when known) picks the row of that major; without it, or when no row
    has that major, the newest major wins. A name that implies its major (cublas64_12.dll) always
    gets that major's row, whatever `cuda_major` says."""
    cands = providers(dll_name)
    if not cands:
        return None
    if cuda_major is not None:
        for p in cands:
            if p.cuda_major == cuda_major:
                return p
    return max(cands, key=lambda p: -1 if p.cuda_major is None else p.cuda_major)


@cache
def wheel_folders() -> tuple[tuple[Root, str], ...]:
    """Every (root, folder) where a wheel puts DLLs (pip and package_itself rows), in file order,
    each once: the caller joins them to the process's site-packages / prefix folders to look for
    an installed copy of a missing DLL. Made once (a report asks for each failed load: 0.2 ms each)."""
    return tuple(dict.fromkeys((r.root, r.folder) for r in load() if r.root))


def cuda_major_of(dll_name: str) -> Optional[int]:
    """The CUDA major that the name alone implies (cublas64_12.dll -> 12, cudart64_110.dll -> 11), or
    None: not a CUDA name, or one that several majors ship (curand64_10.dll, cudnn64_9.dll). What a
    caller can use to learn a process's CUDA major from the names it loads."""
    majors = {p.cuda_major for p in providers(dll_name)}
    return majors.pop() if len(majors) == 1 else None
