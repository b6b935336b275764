"""Machinery of the Wine differential test (tests/test_wine_diff.py).

- build_pool(): the fixture DLLs of fixtures/wine/ and the loadhost.exe host, compiled once
  and cached under the test cache dir by a hash of their sources and compilers.
- patch_names(): per-case unique DLL names, by byte-patching the fixed-length placeholder
  names (`tqzzzzzz.dll`, `mqzzzzzz.dll`, `lqzzzzzz.dll`) in import tables and export names.
- materialize() / run_case(): put a generated case's files on the Wine prefix's C: drive, run
  loadhost.exe under wine64 with WINEDEBUG=+file,+module, and parse what it did.
- parse_host_output() / parse_debug_log(): the host's `R ...` lines, and per operation the
  files the loader opened (NtCreateFile lines of +file) and the search paths it computed
  (`load_dll looking for X in PATH` lines of +module).
- wine_api_sets(): Wine's API-set schema, once per session: the `apisets` event (PEB->ApiSetMap)
  the shim writes into a `dlltrace run --wine` trace of loadhost.exe.

Nothing here knows the simulator; tests/wine_layouts.py builds the cases and scenarios.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import winetools
from dlltrace.worlds.live import wine_map
from dlltrace.trace.reader import nt_to_win32

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "wine"

# The placeholder base names the fixture DLLs are built with; every per-case name has the same
# length (a role letter + 7 characters) so that patching never moves a byte.
# Roles: top -> mid -> leaf (a chain), and "two" (w), which imports the leaf and the "extra"
# DLL (x): a module with two fixture imports, one of which can fail while the other loads.
# Role "a" is a DLL named like an API set that is in no schema (api-ms-win-dt-<name>-l1-1-0.dll,
# apiset.c): the file the "apiabs" leaf imports from.
ROLES = ("t", "m", "l", "w", "x", "a")
PLACEHOLDER = {r: f"{r}qzzzzzz" for r in ROLES}
EXPORT = {"t": "top_fn", "m": "mid_fn", "l": "leaf_fn", "w": "two_fn", "x": "extra_fn", "a": "apiset_fn"}
IMPORTS = {"t": ("m",), "m": ("l",), "l": (), "w": ("l", "x"), "x": (), "a": ()}  # fixture DLLs each role imports, in order
SOURCES = {"t": "top.c", "m": "mid.c", "l": "leaf.c", "w": "two.c", "x": "extra.c", "a": "apiset.c"}
ABSENT_APISET = "api-ms-win-dt-{}-l1-1-0"  # role a's file name (without .dll) for a base name


def dll_base(role: str, names: dict) -> str:
    """The file base name (without .dll) of a role's DLL under the per-case names."""
    return ABSENT_APISET.format(names["a"]) if role == "a" else names[role]


# The leaf builds that import one function through an API-set name (leaf.c, -DLEAF_API_*):
# variant -> (imported DLL base name as built, the function, the define, the .def file). The
# imported name is the leaf's first import descriptor (before SYSTEM_IMPORTS); a case may
# re-spell it (case, version numbers: same length) with respell_import().
API_VARIANTS = {
    "api": ("api-ms-win-crt-string-l1-1-0", "strlen", "LEAF_API_HOSTED", "apiset-hosted.def"),
    "apiabs": (ABSENT_APISET.format(PLACEHOLDER["a"]), "apiset_fn", "LEAF_API_ABSENT", "apiset-absent.def"),
    "apinohost": ("api-ms-win-deprecated-apis-legacy-l1-1-0", "dlltrace_legacy_fn", "LEAF_API_NOHOST",
                  "apiset-nohost.def"),
}


def api_import(variant: str, names: dict) -> str:
    """The API-set name (no .dll) an API-set leaf build imports from, under the per-case names."""
    built = API_VARIANTS[variant][0]
    return built.replace(PLACEHOLDER["a"], names["a"])


def imports_of(role: str, variant: str) -> tuple:
    """The fixture DLLs a build imports, in the order of its import descriptors: the "rev"
    build of two.c lists the extra DLL before the leaf."""
    return tuple(reversed(IMPORTS[role])) if variant == "rev" else IMPORTS[role]


# What every mingw-built fixture DLL imports besides its role imports (system DLLs).
SYSTEM_IMPORTS = ("KERNEL32.dll", "msvcrt.dll")
# Variants: "ok" (x64), "x86" (i686: wrong machine in a 64-bit process), "initfail" (x64,
# DllMain returns FALSE; leaf only), "notpe" (a text file named like the DLL), "rev" (two.c
# only: x64 with its imports in the other order), "api"/"apiabs"/"apinohost" (leaf only: x64
# with an API-set import, API_VARIANTS).
VARIANTS = ("ok", "x86", "initfail", "notpe", "rev", *API_VARIANTS)
NOT_PE_TEXT = b"This is not a PE file, only a text file named like a DLL.\r\n"


# ----------------------------------------------------------------------------- building
def _tool_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return ""


def pool_key() -> str:
    h = hashlib.sha256()
    for name in ("loadhost.c", *SOURCES.values(), *(v[3] for v in API_VARIANTS.values())):
        h.update(name.encode() + b"\0" + (FIXTURES / name).read_bytes() + b"\0")
    h.update(Path(__file__).read_bytes())  # the build recipe below
    h.update(_tool_version(winetools.CC64).encode())
    h.update(_tool_version(winetools.CC32).encode())
    h.update(_tool_version(DLLTOOL[64]).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Pool:
    """Built fixtures: `host` (loadhost.exe) and `dll[(role, variant)]` -> placeholder-named file."""

    root: Path
    host: Path
    dll: dict

    def content(self, role: str, variant: str) -> bytes:
        if variant == "notpe":
            return NOT_PE_TEXT
        return self.dll[(role, variant)].read_bytes()


# The host's own machine, and the other one (a case's "x86" variant: the wrong machine for that host): the 64-bit
# pool's "ok" DLLs are x64 builds and its wrong ones i686 builds; the 32-bit pool's (tests/test_wine_diff_x86.py)
# the reverse, with an i686 loadhost.exe. So a case's variants mean the same for either host.
MACHINE_DIRS = {64: ("x64", "x86"), 32: ("x86", "x64")}
DLLTOOL = {64: "x86_64-w64-mingw32-dlltool", 32: "i686-w64-mingw32-dlltool"}


def _pool_from(root: Path, bits: int = 64) -> Pool:
    own, other = MACHINE_DIRS[bits]
    dll = {}
    for variant, sub in (("ok", own), ("x86", other)):
        for r in ROLES:
            dll[(r, variant)] = root / sub / f"{dll_base(r, PLACEHOLDER)}.dll"
    dll[("l", "initfail")] = root / "initfail" / f"{PLACEHOLDER['l']}.dll"
    dll[("w", "rev")] = root / "rev" / f"{PLACEHOLDER['w']}.dll"
    for v in API_VARIANTS:
        dll[("l", v)] = root / v / f"{PLACEHOLDER['l']}.dll"
    return Pool(root=root, host=root / "loadhost.exe", dll=dll)


def _import_library(def_file: Path, out: Path, bits: int = 64) -> Path:
    r = subprocess.run([DLLTOOL[bits], "-d", str(def_file), "-l", str(out)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{DLLTOOL[bits]} -d {def_file} failed:\n{r.stderr}")
    return out


def build_pool(cache: Path | None = None, bits: int = 64) -> Pool:
    """Compile the host and the fixture DLLs (once; cached by source/compiler hash) for a host of `bits` (64: x64;
    32: i686, tests/test_wine_diff_x86.py): every fixture DLL built for the host's machine and for the other one
    (the wrong machine), and the DllMain-FALSE leaf, the two-imports DLL in the other order, the API-set leaves and
    loadhost.exe for the host's machine."""
    cache = cache or (winetools.CACHE / "wine-diff")
    root = cache / (pool_key() + ("" if bits == 64 else "-x86"))
    if (root / "done").exists():
        return _pool_from(root, bits)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-" if bits == 64 else "build32-", dir=cache))
    cc = winetools.mingw_compile
    own, other = MACHINE_DIRS[bits]
    for sub, b, defs in ((own, bits, []), (other, 96 - bits, []), ("initfail", bits, ["-DLEAF_INIT_FAILS"])):
        d = tmp / sub
        d.mkdir()
        leaf = cc([FIXTURES / "leaf.c"], d / f"{PLACEHOLDER['l']}.dll", dll=True, bits=b, extra=defs)
        if sub == "initfail":
            continue
        mid = cc([FIXTURES / "mid.c", leaf], d / f"{PLACEHOLDER['m']}.dll", dll=True, bits=b)
        cc([FIXTURES / "top.c", mid], d / f"{PLACEHOLDER['t']}.dll", dll=True, bits=b)
        extra = cc([FIXTURES / "extra.c"], d / f"{PLACEHOLDER['x']}.dll", dll=True, bits=b)
        cc([FIXTURES / "apiset.c"], d / f"{dll_base('a', PLACEHOLDER)}.dll", dll=True, bits=b)
        cc([FIXTURES / "two.c", leaf, extra], d / f"{PLACEHOLDER['w']}.dll", dll=True, bits=b)
        if sub == own:  # the same DLL with its two fixture imports in the other order
            (tmp / "rev").mkdir()
            two = (d / f"{PLACEHOLDER['w']}.dll").read_bytes()
            (tmp / "rev" / f"{PLACEHOLDER['w']}.dll").write_bytes(swap_imports(two, PLACEHOLDER["l"], PLACEHOLDER["x"]))
    for v, (_, _, define, def_file) in API_VARIANTS.items():  # the leaf with an API-set import
        d = tmp / v
        d.mkdir()
        lib = _import_library(FIXTURES / def_file, d / "libapiset.a", bits)
        # the import library before the default ones (strlen: not msvcrt's); no builtin strlen
        cc([FIXTURES / "leaf.c", lib], d / f"{PLACEHOLDER['l']}.dll", dll=True, bits=bits,
           extra=[f"-D{define}", "-fno-builtin"])
    cc([FIXTURES / "loadhost.c"], tmp / "loadhost.exe", bits=bits, extra=["-municode", "-lpsapi"])
    (tmp / "done").write_text("ok\n")
    try:
        tmp.rename(root)
    except OSError:  # another session finished the same build first
        shutil.rmtree(tmp, ignore_errors=True)
    return _pool_from(root, bits)


def build_pool32(cache: Path | None = None) -> Pool:
    """The pool for a 32-bit (x86) host: build_pool(bits=32)."""
    return build_pool(cache, 32)


def _import_descriptors(data: bytes) -> list:
    """(file offset, imported DLL name) of each import descriptor of a PE32/PE32+ image."""
    import struct

    pe = struct.unpack_from("<I", data, 0x3C)[0]
    n_sections, opt_size = struct.unpack_from("<H12xH", data, pe + 6)
    opt = pe + 24
    dirs = opt + (112 if struct.unpack_from("<H", data, opt)[0] == 0x20B else 96)  # (PE32+ or PE32)
    imp_rva = struct.unpack_from("<I", data, dirs + 8)[0]
    # (VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData) per section header
    sections = [struct.unpack_from("<8xIIII", data, opt + opt_size + 40 * i) for i in range(n_sections)]

    def off(rva):
        for vsize, va, raw_size, raw_ptr in sections:
            if va <= rva < va + max(vsize, raw_size):
                return raw_ptr + rva - va
        raise ValueError(f"RVA {rva:#x} is in no section")

    out = []
    at = off(imp_rva)
    while any(data[at:at + 20]):
        name_rva = struct.unpack_from("<I", data, at + 12)[0]
        o = off(name_rva)
        out.append((at, data[o:data.index(b"\0", o)].decode("ascii")))
        at += 20
    return out


def swap_imports(data: bytes, a: str, b: str) -> bytes:
    """Swap the import descriptors of DLLs `a` and `b` (base names; each descriptor is
    self-contained, so the image stays valid): their imports are processed in the other order."""
    desc = {name.lower().removesuffix(".dll"): at for at, name in _import_descriptors(data)}
    x, y = sorted((desc[a], desc[b]))
    buf = bytearray(data)
    buf[x:x + 20], buf[y:y + 20] = data[y:y + 20], data[x:x + 20]
    return bytes(buf)


def patch_names(data: bytes, names: dict) -> bytes:
    """Replace each role's placeholder base name by names[role] (same length, ASCII)."""
    for r, new in names.items():
        old = PLACEHOLDER[r].encode()
        new_b = new.encode("ascii")
        if len(new_b) != len(old):
            raise ValueError(f"name {new!r} must have {len(old)} characters")
        data = data.replace(old, new_b)
    return data


def respell_import(data: bytes, canonical: str, spelled: str) -> bytes:
    """Re-spell an imported DLL name (base names without .dll, same length): the image's one
    occurrence of `canonical` + ".dll" becomes `spelled` + ".dll"."""
    old, new = (canonical + ".dll").encode("ascii"), (spelled + ".dll").encode("ascii")
    if len(old) != len(new) or data.count(old) != 1:
        raise ValueError(f"cannot re-spell {canonical!r} as {spelled!r}")
    return data.replace(old, new)


def placeholder_count(data: bytes, role: str) -> int:
    return data.count(PLACEHOLDER[role].encode())


# ----------------------------------------------------------------------------- parsing
@dataclass
class OpResult:
    index: int
    op: str
    ok: bool
    error: int
    path: str | None  # GetModuleFileNameW, or for a data-file handle the mapped file (Windows path)
    mapped: bool = False  # path is the file mapped as a data file (LOAD_LIBRARY_AS_DATAFILE)


_R_LINE = re.compile(r"^R (\d+) (\S+) ok=([01]) err=(\d+) path=(.*)$")


def parse_host_output(text: str) -> tuple[list[OpResult], bool]:
    """loadhost's stdout -> (one OpResult per op, whether it printed END)."""
    res = []
    end = False
    for line in text.replace("\r\n", "\n").split("\n"):
        m = _R_LINE.match(line)
        if m:
            p = m.group(5)
            mapped = p.startswith("mapped:")
            if mapped:
                p = nt_to_win32(p[len("mapped:"):])  # GetMappedFileNameW under Wine: \\??\\C:\\...
            res.append(OpResult(int(m.group(1)), m.group(2), m.group(3) == "1", int(m.group(4)),
                                None if p == "-" else p, mapped))
        elif line == "END":
            end = True
    return res, end


def _unescape(s: str) -> str:
    """A debugstr_w body (without the L"..." quotes) -> the string."""
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x":
                j = i + 2
                while j < len(s) and j < i + 6 and s[j] in "0123456789abcdefABCDEF":
                    j += 1
                out.append(chr(int(s[i + 2:j], 16)))
                i = j
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_MARKER = re.compile(r'trace:file:NtCreateFile .*name=L"\\\\\?\?\\\\C:\\\\dlltrace-marker-(\d+)"')
_OPEN = re.compile(r'trace:file:NtCreateFile handle=\S+ access=\S+ name=L"((?:[^"\\]|\\.)*)"')
_LOOKING = re.compile(r'trace:module:load_dll looking for L"((?:[^"\\]|\\.)*)" in L"((?:[^"\\]|\\.)*)"')


@dataclass
class OpLog:
    """What the +file/+module log shows for one host operation."""

    opens: list = field(default_factory=list)  # Windows paths passed to NtCreateFile, in order
    searches: list = field(default_factory=list)  # (name, search path string) per load_dll


def parse_debug_log(text: str, n_ops: int) -> list[OpLog]:
    """Cut the WINEDEBUG=+file,+module log at the host's markers: one OpLog per op."""
    logs = [OpLog() for _ in range(n_ops)]
    cur = None
    for line in text.splitlines():
        m = _MARKER.search(line)
        if m:
            i = int(m.group(1))
            cur = logs[i] if i < n_ops else None
            continue
        if cur is None:
            continue
        m = _OPEN.search(line)
        if m:
            cur.opens.append(nt_to_win32(_unescape(m.group(1))))
            continue
        m = _LOOKING.search(line)
        if m:
            cur.searches.append((_unescape(m.group(1)), _unescape(m.group(2))))
    return logs


# ----------------------------------------------------------------------------- the API-set schema
def wine_api_sets(pool: Pool, workdir: Path) -> dict:
    """Wine's API-set schema as a real Wine process sees it: loadhost.exe run once through
    `dlltrace run --wine`, whose shim writes the process's PEB->ApiSetMap as the trace's `apisets`
    event. Returns its sets: {contract: host | {"host", "exceptions"}}, contract names without
    .dll, "" = no host. (The shim must be built: test_shim.build_shim.)"""
    from dlltrace.trace.reader import read_trace

    out = workdir / "apisets.jsonl"
    r = winetools.dlltrace("run", "--wine", "-o", str(out), "--", str(pool.host), "cd", "C:\\", cwd=workdir)
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"dlltrace run --wine loadhost.exe: rc={r.returncode}\n{r.stdout[-500:]}\n{r.stderr[-1500:]}")
    tr = read_trace(out)
    sets = tr.api_sets(tr.pids[0]) if tr.pids else None
    if not sets:
        raise RuntimeError(f"{out}: no apisets event for the host process (pids {tr.pids})")
    return sets


# ----------------------------------------------------------------------------- running
@dataclass
class WineRun:
    ops: list  # OpResult per host op
    logs: list  # OpLog per host op
    complete: bool  # the host printed END
    returncode: int
    stderr_tail: str
    repeats: int = 0  # runs repeated because wine printed nothing at all (see run_host)


def host_argv(ops) -> list[str]:
    """HostOp list -> loadhost.exe arguments."""
    argv = []
    for op in ops:
        argv.append(op.kind)
        argv.extend(op.args)
    return argv


def run_host(host_win: str, ops, *, timeout: float = 60, attempts: int = 3) -> WineRun:
    """Run loadhost.exe once. A run in which the host printed nothing at all (wine could not
    start it, e.g. the shared wineserver was restarting) is not an outcome: it is repeated,
    up to `attempts` times; a run that printed anything is returned as it is."""
    repeats = 0
    for attempt in range(attempts):
        r = winetools.run_wine([host_win, *host_argv(ops)], winedebug="+file,+module", timeout=timeout,
                               cwd=tempfile.gettempdir())
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        results, end = parse_host_output(out)
        if results or end:
            break
        repeats += 1
    logs = parse_debug_log(err, len(ops))
    tail = "\n".join(line for line in err.splitlines() if ":err:" in line or ":warn:module" in line)[-3000:]
    if not end:
        tail = (tail + "\n--- stderr tail ---\n" + err[-2000:]).strip()
    return WineRun(results, logs, end, r.returncode, tail, repeats)


def win_to_unix(winpath: str, drive_c: Path) -> Path:
    """C:\\a\\b -> <prefix>/drive_c/a/b (C: only). Wine's lookups are case-insensitive, but the
    files we create are written with the case the layout uses."""
    if not winpath[:3].lower() == "c:\\":
        raise ValueError(winpath)
    rest = winpath[3:].replace("\\", "/")
    return drive_c / rest


# ----------------------------------------------------------------------------- cases on disk
def materialize(case, pool: Pool, drive_c: Path) -> list:
    """Write a case's files under drive_c. Returns the files created outside the case root
    (System32, the Windows folder), which the caller must remove."""
    outside = []
    root = win_to_unix(case.root, drive_c)
    for key, folder in case.folders.items():
        if folder.lower().startswith(case.root.lower() + "\\"):
            win_to_unix(folder, drive_c).mkdir(parents=True, exist_ok=True)
    host = win_to_unix(case.exe, drive_c)
    if not host.exists():
        try:
            os.link(pool.host, host)
        except OSError:
            shutil.copyfile(pool.host, host)
    for k in case.keep_files():
        win_to_unix(k, drive_c).write_text("keeps this folder in existence\n")
    for path, role, variant in case.files:
        if path.lower().startswith(case.root.lower() + "\\"):
            target = win_to_unix(path, drive_c)
        else:
            target = Path(wine_map(drive_c.parent)(path))  # (C:\\Windows\\System32 is drive_c/windows/system32)
            outside.append(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = patch_names(pool.content(role, variant), case.names)
        if variant in API_VARIANTS:
            data = respell_import(data, api_import(variant, case.names), case.api_names[variant])
        target.write_bytes(data)
    assert root.is_dir()
    return outside


def remove_files(paths) -> None:
    for p in paths:
        try:
            Path(p).unlink()
        except FileNotFoundError:
            pass


def remove_stale_case_dirs(base: Path, keep: str, older_than: float = 3600) -> None:
    """Remove case folders of earlier sessions (C:\\dtw\\<nonce>) older than an hour; a
    session running at the same time on the same prefix has a younger folder."""
    import time

    if not base.is_dir():
        return
    now = time.time()
    for d in base.iterdir():
        try:
            if d.name != keep and d.is_dir() and now - d.stat().st_mtime > older_than:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def run_cases(cases, pool: Pool, jobs: int) -> dict:
    """Every generated case run by the pool's host under Wine (each case its own process, `jobs` at a time), its
    files put on the prefix's C: drive first and those outside the case's own folder removed after: case.ident ->
    run_host's result."""
    from concurrent.futures import ThreadPoolExecutor

    drive_c = winetools.drive_c()
    outside: list = []
    try:
        for case in cases:
            outside += materialize(case, pool, drive_c)

        def run(case):
            return case.ident, run_host(case.exe, case.ops)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            return dict(ex.map(run, cases))
    finally:
        remove_files(outside)
