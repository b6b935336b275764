"""The Python side of the shim: its binding (cffi, or the standard library's ctypes) and the audit hook
that adds Python context.

On Windows, `dlltrace run python ...` puts tracer/dlltrace/bootstrap on the child's PYTHONPATH; its
sitecustomize runs this file (by path: `dlltrace` itself is not importable there) and calls bootstrap()
before any user code runs: load the shim (bin/dlltrace_shim64.dll, or DLLTRACE_SHIM) through cffi when
the traced interpreter has a working cffi, else through ctypes (load_backend: the same five functions,
one CDEF), dlltrace_start(NULL, "python") (a no-op when the launcher already started it), write a py_env
event and install a sys.addaudithook hook that turns `import`, `ctypes.dlopen` and
`os.add_dll_directory` into py_* events, and a `subprocess.Popen` made inside ctypes.util.find_library (on Linux
it asks ldconfig, gcc and ld) into a py_find_library event with what the call returned (watch_find_library; on
Windows, where it asks no program, ctypes.util.find_library is wrapped as its module is imported, at its `exec`
audit event: watch_ctypes_util, find_library_wrapper); any other `subprocess.Popen` into a py_popen event, with the OSError it failed to start with (watch_start: a program
not found on PATH). Each py_* event's seq becomes the thread's context
(dlltrace_set_context), so every native load that follows on that thread carries "ctx": <that seq> --
the Python action that caused it. At exit (atexit), if the program is ending on an uncaught exception
(sys.last_exc / sys.last_value, which the interpreter sets before it prints the traceback), a
py_exception event says which: the report uses it to tell the load that failed the program from the
ones it went past (docs/verdicts.md); then py_exit. Each py_import / py_dlopen carries the imports in
progress (`imports`), py_exit those the program ended in: trace/pycontext.py tells from them whether a
load made by C code after an import event ran during that import or after it finished. Nothing the program sees or prints changes.
On Linux, with the ctypes binding, the hook is installed behind the preload library's C audit hook
(c_audit_filter), which calls it for the events it records only: a hook added with sys.addaudithook is
called for every audit event of the process.

This file runs inside the traced program's interpreter, which may be any CPython 3.7+ with nothing
installed: it imports only modules every CPython has loaded at start-up (sys, os, _thread) and, for
the binding, cffi (only when the traced environment has it) or ctypes, and atexit (built in). It
never imports json, typing, pathlib, threading, __future__ (its annotations are strings) or anything
of dlltrace's, so the program's own imports of those happen (and are recorded) as without dlltrace.
A CPython without sys.addaudithook (< 3.8) gets py_env only.
Tested on Linux against a fake shim built with gcc (tests/test_bootstrap.py), both bindings.
"""

import _thread
import os
import sys

TYPE_CHECKING = False  # (typing is not imported at run time: see above)
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional, Protocol

    class Backend(Protocol):
        def write_event(self, ev: str, fields: dict) -> int: ...
        def set_context(self, seq: int) -> None: ...

# Keep in step with native/shim/dlltrace_shim.h.
CDEF = """
int dlltrace_start(const wchar_t *trace_path, const char *via);
long long dlltrace_write_event(const char *ev, const char *fields_json);
void dlltrace_set_context(long long ctx_seq);
const char *dlltrace_version(void);
int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe);
int dlltrace_stop(void);
"""

SHIM_DLL = "dlltrace_shim64.dll"
SHIM32_DLL = "dlltrace_shim32.dll"  # for a 32-bit Python (its C API is cdecl, cffi's default)

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _json_str(s: str) -> str:
    """A JSON string: non-ASCII characters as they are (UTF-8 later), control characters and lone
    surrogates (a Windows file name may hold one) as \\uXXXX escapes, so the text always encodes.
    A printable string without a quote or a backslash (nearly every module name and path) is taken whole,
    by str methods written in C: _json_str_escaped's loop, a character at a time, was a tenth of the audit hook's
    time in `import scipy.stats, sklearn, pandas`."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return _json_str_escaped(s)


def _json_str_escaped(s: str) -> str:
    """_json_str a character at a time (what the shortcut gives too, for the strings it takes)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif o < 0x20 or o == 0x7F or 0xD800 <= o <= 0xDFFF:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json(v: "Any") -> str:
    t = type(v)  # (the usual types first, by type: the events are made of these)
    if t is str:
        return _json_str(v)
    if t is dict:
        return "{" + ",".join([_json_str(k if type(k) is str else str(k)) + ":" + _json(x) for k, x in v.items()]) + "}"
    if t is list:
        return "[" + ",".join([_json_str(x) if type(x) is str else _json(x) for x in v]) + "]"
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else "null"
    if isinstance(v, str):
        return _json_str(v)
    if isinstance(v, dict):
        return "{" + ",".join(_json_str(str(k)) + ":" + _json(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_json(x) for x in v) + "]"
    return _json_str(str(v))


def imports_json(imports: "list") -> str:
    """The JSON text of an event's `imports` (module names, which have nothing to escape: joined at once, where _json
    makes a string of each: a tenth of the audit hook's time)."""
    try:
        joined = "".join(imports)
    except TypeError:  # (not a list of str)
        return _json(imports)
    if not imports:
        return "[]"
    if joined.isprintable() and '"' not in joined and "\\" not in joined:
        return '["' + '","'.join(imports) + '"]'
    return _json(imports)


_FRAME_JSON: "dict[tuple, str]" = {}  # frame_json's texts (the user's frame of a program's imports is a few lines)


def frame_json(frame: "Any") -> str:
    """The JSON text of an event's `frame` ({"file", "line", "function"}, or None), made once for each frame."""
    if type(frame) is not dict or len(frame) != 3:
        return _json(frame)
    try:
        key = (frame["file"], frame["line"], frame["function"])
        text = _FRAME_JSON.get(key)
    except (KeyError, TypeError):
        return _json(frame)
    if text is None:
        if len(_FRAME_JSON) >= 1000:
            _FRAME_JSON.clear()
        text = _FRAME_JSON[key] = _json(frame)
    return text


_KEY_JSON = {"module": '"module":', "frame": '"frame":', "imports": '"imports":', "name": '"name":', "mode": '"mode":'}


def fields_json(fields: dict) -> str:
    """Object members without the braces, as dlltrace_write_event takes them (JSON; a str, UTF-8 encoded
    by the caller). The standard library's json is not used: see the module's docstring. The hook's events
    (those with `imports`) through imports_json and frame_json."""
    if type(fields.get("imports")) is list:
        return ",".join([(_KEY_JSON.get(k) or (_json_str(k if type(k) is str else str(k)) + ":"))
                         + (imports_json(v) if k == "imports" else frame_json(v) if k == "frame" else _json(v))
                         for k, v in fields.items()])
    return _json(fields)[1:-1]


def make_ffi():
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi


def default_shim_path() -> "Optional[str]":
    """The shim next to this file's package (bin/), on Windows, of this Python's machine (the x86 one in a 32-bit
    Python); elsewhere there is none (DLLTRACE_SHIM)."""
    if sys.platform != "win32":
        return None
    name = SHIM_DLL if sys.maxsize > 2**32 else SHIM32_DLL
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", name)


def _c_decl(decl: str) -> tuple:
    """("const char *", "via") of "const char *via": a C declaration's type and name."""
    stars = decl.count("*")
    words = decl.replace("*", " ").split()
    return " ".join(words[:-1]) + (" " + "*" * stars if stars else ""), words[-1]


def cdef_signatures(cdef: str = CDEF) -> dict:
    """{function: (return type, [parameter types])} of the CDEF, as C type names ("const char *"):
    both bindings are made from these declarations."""
    sigs = {}
    for decl in cdef.split(";"):
        if not decl.strip():
            continue
        head, params = decl.split("(", 1)
        ret, name = _c_decl(head)
        sigs[name] = (ret, [_c_decl(p)[0] for p in params.rsplit(")", 1)[0].split(",") if p.strip() not in ("", "void")])
    return sigs


def _shim_path(dll_path: "Optional[str]") -> str:
    path = dll_path or default_shim_path()
    if not path:
        raise OSError("no shim library for this platform (set DLLTRACE_SHIM)")
    return path


class CffiBackend:
    """The shim through cffi, in ABI mode, made with cffi's C backend (_cffi_backend) from the CDEF's
    signatures: cffi.FFI().cdef would parse the CDEF with pycparser, which imports some fifty modules
    (typing, threading, subprocess, inspect...) into the traced program; the backend is one
    extension module and nothing else."""

    route = "cffi"

    def __init__(self, dll_path: "Optional[str]" = None):
        b = __import__("_cffi_backend")  # (no stubs: untyped)

        path = _shim_path(dll_path)

        def ctype(c: str) -> "Any":
            if c == "void":
                return b.new_void_type()
            base = c.replace("const ", "").replace("*", "").strip()
            t = b.new_primitive_type(base)
            for _ in range(c.count("*")):
                t = b.new_pointer_type(t)
            return t

        self._b = b
        self._null_wstr = b.cast(ctype("const wchar_t *"), 0)
        self.lib = b.load_library(path, 0)
        self.fn = {name: self.lib.load_function(b.new_function_type(tuple(ctype(p) for p in params), ctype(ret), False),
                                                name)
                   for name, (ret, params) in cdef_signatures().items()}

    def start(self, trace_path: "Optional[str]" = None, via: str = "python") -> int:
        return int(self.fn["dlltrace_start"](self._null_wstr if trace_path is None else trace_path, via.encode()))

    def write_event(self, ev: str, fields: dict) -> int:
        return int(self.fn["dlltrace_write_event"](ev.encode(), fields_json(fields).encode("utf-8")))

    def set_context(self, seq: int) -> None:
        self.fn["dlltrace_set_context"](seq)

    def version(self) -> str:
        return self._b.string(self.fn["dlltrace_version"]()).decode()

    def stop(self) -> int:
        return int(self.fn["dlltrace_stop"]())


ShimBackend = CffiBackend  # (its old name)

# The CDEF's C types as ctypes names (the only ones it uses)
CTYPES_OF = {"int": "c_int", "long long": "c_longlong", "void": None, "const char *": "c_char_p",
             "const wchar_t *": "c_wchar_p", "unsigned long": "c_ulong"}


def _ctypes_type(ctypes: "Any", c: str) -> "Any":
    name = CTYPES_OF[c]
    return None if name is None else getattr(ctypes, name)


class CtypesBackend:
    """The shim through the standard library's ctypes, for a traced interpreter without cffi."""

    route = "ctypes"

    def __init__(self, dll_path: "Optional[str]" = None):
        import ctypes

        self.lib = ctypes.CDLL(_shim_path(dll_path))
        for name, (ret, params) in cdef_signatures().items():
            fn = getattr(self.lib, name)
            fn.restype = _ctypes_type(ctypes, ret)
            fn.argtypes = [_ctypes_type(ctypes, p) for p in params]

    def start(self, trace_path: "Optional[str]" = None, via: str = "python") -> int:
        return int(self.lib.dlltrace_start(trace_path, via.encode()))

    def write_event(self, ev: str, fields: dict) -> int:
        return int(self.lib.dlltrace_write_event(ev.encode(), fields_json(fields).encode("utf-8")))

    def set_context(self, seq: int) -> None:
        self.lib.dlltrace_set_context(seq)

    def version(self) -> str:
        return self.lib.dlltrace_version().decode()

    def stop(self) -> int:
        return int(self.lib.dlltrace_stop())


def load_backend(dll_path: "Optional[str]" = None):
    """The shim bound through cffi when this interpreter has a working cffi, else through ctypes.
    An OSError naming both failures when neither loads it."""
    why = []
    for make in (CffiBackend, CtypesBackend):
        try:
            return make(dll_path)
        except Exception as e:  # (no cffi, a broken one, no ctypes: the next; the shim itself: both fail)
            why.append("%s: %s" % (make.route, e))
    raise OSError("; ".join(why))


def python_env_fields(environ: "Optional[Mapping[str, str]]" = None) -> dict:
    """The py_env event: which Python this is, and whether it is a conda one."""
    if environ is None:
        environ = os.environ
    prefix = sys.prefix
    conda_prefix = environ.get("CONDA_PREFIX")
    conda = bool(conda_prefix) or os.path.isdir(os.path.join(prefix, "conda-meta"))
    return {
        "version": sys.version.split()[0],
        "implementation": sys.implementation.name,
        "executable": sys.executable or None,
        "prefix": prefix,
        "base_prefix": getattr(sys, "base_prefix", prefix),
        "exec_prefix": sys.exec_prefix,
        "bits": 64 if sys.maxsize > 2**32 else 32,
        "conda": conda,
        "conda_prefix": conda_prefix,
        "sys_path": [p for p in sys.path if isinstance(p, str)],
        "pth": _pth_file(),
        "user_site": _user_site(),
    }


def _user_site() -> "Optional[str]":
    """The user site-packages folder as site set it when it added it (site.USER_SITE:
    LocalCache\\local-packages\\PythonXY\\site-packages in a Microsoft Store Python's app folder), where pip installs
    when the Python's own site-packages cannot be written. Read, never computed: site.getusersitepackages() would
    set USER_SITE and USER_BASE in the program's own site module. None when site did not add it (`-s`,
    PYTHONNOUSERSITE, a venv, `-S`, the embeddable Python's ._pth): the replay then reads sys.path."""
    user = getattr(sys.modules.get("site"), "USER_SITE", None)
    return user if isinstance(user, str) and user else None


def _pth_file() -> "Optional[dict]":
    """The `python3XY._pth` next to the interpreter (the embeddable distribution's: it replaces sys.path, and
    site -- site-packages, .pth files, sitecustomize -- runs only when its `import site` line is uncommented):
    {"file", "import_site"}; None when there is none."""
    exe = sys.executable or ""
    name = "python%d%d._pth" % sys.version_info[:2]
    path = os.path.join(os.path.dirname(exe), name) if exe else ""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 16).splitlines()
    except OSError:
        return {"file": path, "import_site": False}
    return {"file": path, "import_site": any(line.strip() == "import site" for line in lines)}


# the files of an installed distribution a report may need the owner of: a DLL, an extension, a shared object
_NATIVE = (".dll", ".pyd", ".so", ".exe")
DISTS_LIMIT = 3000  # distributions listed (a site-packages of more is cut, and said: `cut`)
GPU_DEVICES_LIMIT = 1024  # PCI device instances looked at (a machine has a few dozen)
DISPLAY_CLASS_GUID = "{4d36e968-e325-11ce-bfc1-08002be10318}"  # GUID_DEVCLASS_DISPLAY


def windows_gpu_fields(reg: "Any" = None) -> dict:
    """The py_gpu event (Windows): the machine's NVIDIA GPUs and driver as worlds/gpu.py's GpuFacts has them, from
    the registry (`reg`: the winreg module, or a stand-in): each device instance of HKLM\\SYSTEM\\
    CurrentControlSet\\Enum\\PCI counted; one with vendor VEN_10DE of the display class (ClassGUID), or of PCI class
    03 by its CompatibleIDs ("PCI\\CC_0302": a 3D controller Windows has no driver for, such as a laptop's NVIDIA GPU
    before NVIDIA's driver is installed, which is not of the display class but under "Other devices") is an NVIDIA
    GPU; the DriverVersion of the Control\\Class key its `Driver` value names, when that key's ProviderName is
    NVIDIA, is the driver's. Read once at start, bounded (GPU_DEVICES_LIMIT); pci_devices 0 when Enum\\PCI
    cannot be read (nothing known)."""
    if reg is None:
        import winreg as reg
    hklm = reg.HKEY_LOCAL_MACHINE
    out = {"pci_devices": 0, "nvidia_gpus": [], "kernel_driver": None, "device_nodes": True,
           "wsl": False}  # type: dict[str, Any]

    def value(key: "Any", name: str) -> str:
        try:
            v = reg.QueryValueEx(key, name)[0]
        except OSError:
            return ""
        return v if isinstance(v, str) else ""

    def display_ids(key: "Any") -> bool:  # (its PCI class is 03, a display or 3D controller, whatever driver it has)
        try:
            ids = reg.QueryValueEx(key, "CompatibleIDs")[0]
        except OSError:
            return False
        return isinstance(ids, list) and any(isinstance(x, str) and x.upper().startswith("PCI\\CC_03") for x in ids)

    def subkeys(key: "Any") -> "list":
        names = []  # type: list[str]
        while len(names) < GPU_DEVICES_LIMIT:
            try:
                names.append(reg.EnumKey(key, len(names)))
            except OSError:
                break
        return names
    try:
        pci = reg.OpenKey(hklm, r"SYSTEM\CurrentControlSet\Enum\PCI")
    except OSError:
        return out
    with pci:
        for hw in subkeys(pci):
            try:
                hw_key = reg.OpenKey(pci, hw)
            except OSError:
                continue
            with hw_key:
                for inst in subkeys(hw_key):
                    if out["pci_devices"] >= GPU_DEVICES_LIMIT:
                        return out
                    out["pci_devices"] += 1
                    if not hw.upper().startswith("VEN_10DE&"):
                        continue
                    try:
                        inst_key = reg.OpenKey(hw_key, inst)
                    except OSError:
                        continue
                    with inst_key:
                        if value(inst_key, "ClassGUID").lower() != DISPLAY_CLASS_GUID and not display_ids(inst_key):
                            continue
                        out["nvidia_gpus"].append("PCI\\" + hw + "\\" + inst)
                        driver = value(inst_key, "Driver")
                    if not driver or out["kernel_driver"] is not None:
                        continue
                    try:
                        class_key = reg.OpenKey(hklm, "SYSTEM\\CurrentControlSet\\Control\\Class\\" + driver)
                    except OSError:
                        continue
                    with class_key:
                        if "nvidia" in value(class_key, "ProviderName").lower():
                            out["kernel_driver"] = value(class_key, "DriverVersion") or "?"
    return out


FILES_LIMIT = 60000  # native files listed in all
# the small files in which a framework states the CUDA it was built for (diagnosis/cuda.py reads them): recorded
# whole in py_dists (`texts`) so that `dlltrace cuda --trace` reads a trace's frameworks as a machine's
BUILD_FACT_FILES = frozenset({
    "torch/version.py",                               # torch: cuda = '12.4' (None in a CPU build)
    "onnxruntime/capi/build_and_package_info.py",     # onnxruntime-gpu: package_name, cuda_version ('13.0')
    "onnxruntime/capi/version_info.py",               # onnxruntime-gpu (Windows): cuda_version, cudnn_version
    "tensorflow/python/platform/build_info.py",       # tensorflow: cuda_version, cudnn_version, cudart_dll_name
    "paddle/version/__init__.py",                     # paddlepaddle-gpu: cuda_version, cudnn_version
    "ctranslate2/version.py",                         # ctranslate2: __version__
    "cupy/.data/_wheel.json",                         # cupy-cuda12x: "cuda": "12.x", the cuDNN/NCCL it preloads
})
BUILD_FACT_LIMIT = 1 << 16  # bytes of each (they are a few hundred)


def _native(path: str) -> bool:
    low = path.lower()
    return low.endswith(_NATIVE) or ".so." in low.rsplit("/", 1)[-1]


_NATIVE_MARKS = (b".so", b".dll", b".pyd", b".exe")  # (what every path _native takes has in it, lower-cased)


def record_candidates(record: bytes, marks: "tuple" = _NATIVE_MARKS) -> "list":
    """The paths of the lines of a RECORD (its bytes) that have one of `marks` in them (ASCII lower-cased: a native
    file's suffix, the name of a build-facts file that exists), in order, as text (UTF-8, errors replaced; a line
    ends with \\n, \\r\\n or \\r, as a text file reads it); the others are neither split nor decoded: scipy's,
    pandas' and numpy's RECORDs have 7000 lines, and looking at each in Python was most of the bootstrap's time.
    (No character but ASCII lower-cases to one of the marks' letters.)"""
    return [path for path, _ in record_rows(record, marks)]


def record_rows(record: bytes, marks: "tuple" = _NATIVE_MARKS) -> "list":
    """(path, size) of each line record_candidates keeps: size is RECORD's third column (the file's size in bytes
    as the wheel installed it), None when that column is empty or not a number (RECORD's own line, a file pip
    wrote, a .pyc). Only the lines kept are split."""
    low = record.lower()
    starts = set()
    for mark in marks:
        at = low.find(mark)
        while at >= 0:
            start, end = _line_around(low, at)
            starts.add(start)
            at = low.find(mark, end) if end < len(low) else -1
    out = []
    for start in sorted(starts):
        end = _line_around(record, start)[1]
        line = record[start:end].decode("utf-8", "replace")
        last = line.rsplit(",", 2)
        size = last[2].strip() if len(last) == 3 else ""
        out.append((line.split(",", 1)[0].strip().strip('"'),
                    int(size) if size and len(size) < 16 and size.isdigit() and size.isascii() else None))
    return out


def _line_around(buf: bytes, at: int) -> "tuple[int, int]":
    """(start, end) of the line of buf that position `at` is in: after the \\n or \\r before it, up to the \\n or
    \\r after it (each looked for within the \\n-ended line only: pip's RECORDs end their lines with \\r\\n)."""
    start = buf.rfind(b"\n", 0, at) + 1
    cr = buf.rfind(b"\r", start, at)
    if cr >= 0:
        start = cr + 1
    end = buf.find(b"\n", at)
    if end < 0:
        end = len(buf)
    cr = buf.find(b"\r", at, end)
    return start, cr if cr >= 0 else end


def _dist_name(folder: str) -> "tuple[str, str]":
    """(name, version) of a `name-version.dist-info` folder (the wheel spec's escaped name)."""
    stem = folder[: -len(".dist-info")]
    name, _, version = stem.partition("-")
    return name, version


_RECORD_NATIVE: "dict[str, list]" = {}  # base name (lower case) -> the absolute paths installed_dists' RECORDs list


def installed_dists(paths: "Optional[list]" = None) -> dict:
    """The py_dists event: every distribution in sys.path's site folders (their *.dist-info) with the native
    files its RECORD lists (relative to the site folder, as RECORD has them), and a conda prefix's packages
    (conda-meta/*.json: `files`, relative to the prefix) -- who owns each DLL, read where the program runs
    (trace/pycontext.py's sibling: diagnosis/explain.py reads it through the world). Bounded: DISTS_LIMIT,
    FILES_LIMIT; `cut` says when it was."""
    out: list = []
    total = 0
    cut = False
    seen: set = set()
    _RECORD_NATIVE.clear()
    for site in (paths if paths is not None else [p for p in sys.path if isinstance(p, str)]):
        base = os.path.basename(site.rstrip("/\\")).lower()
        if base not in ("site-packages", "dist-packages") or site in seen or not os.path.isdir(site):
            continue
        seen.add(site)
        try:
            names = sorted(os.listdir(site))
        except OSError:
            continue
        # (a build-facts file that is not there gives no text: only those that are are looked for in the RECORDs)
        marks = _NATIVE_MARKS + tuple(p.encode() for p in sorted(BUILD_FACT_FILES) if os.path.isfile(os.path.join(site, p)))
        for folder in names:
            if not folder.endswith(".dist-info"):
                continue
            if len(out) >= DISTS_LIMIT or total >= FILES_LIMIT:
                cut = True
                break
            name, version = _dist_name(folder)
            files = []
            sizes = []  # (RECORD's size of each file: one not the wheel's is told by it, diagnosis/explain.py)
            texts = {}
            try:
                with open(os.path.join(site, folder, "RECORD"), "rb") as f:  # (text only of the lines kept)
                    record = f.read()
            except OSError:
                record = b""
            for path, size in record_rows(record, marks):
                if path and _native(path) and total < FILES_LIMIT:
                    files.append(path)
                    sizes.append(size)
                    total += 1
                    # (named_files looks a bare name of an exception's message up here: _record_files)
                    _RECORD_NATIVE.setdefault(path.replace("\\", "/").rsplit("/", 1)[-1].lower(), []).append(
                        os.path.join(site, *path.replace("\\", "/").split("/")))
                elif path in BUILD_FACT_FILES:
                    text = _small_text(os.path.join(site, path))
                    if text is not None:
                        texts[path] = text
            dist = {"name": name, "version": version, "site": site, "files": files, "sizes": sizes,
                    "loaders": package_loaders(site, files)}
            if texts:
                dist["texts"] = texts
            tags = wheel_tags(os.path.join(site, folder, "WHEEL")) if files else []
            if tags:
                dist["tags"] = tags
            out.append(dist)
    conda: list = []
    meta = os.path.join(sys.prefix, "conda-meta")
    if os.path.isdir(meta):
        try:
            entries = sorted(os.listdir(meta))
        except OSError:
            entries = []
        for entry in entries:
            if not entry.endswith(".json") or len(conda) >= DISTS_LIMIT or total >= FILES_LIMIT:
                continue
            package = _conda_record(os.path.join(meta, entry))
            if package is not None:
                total += len(package["files"])
                conda.append(package)
    return {"dists": out, "conda": conda, "conda_prefix": sys.prefix if conda else None, "cut": cut}


def wheel_tags(path: str) -> "list":
    """The tags a wheel's WHEEL file names (`Tag: py3-none-win_amd64`, one a line): the platforms it was built for
    (which machine its DLLs are). [] when it cannot be read; at most 64."""
    text = _small_text(path) or ""
    return [line[4:].strip() for line in text.splitlines() if line.startswith("Tag:") and line[4:].strip()][:64]


def _small_text(path: str) -> "Optional[str]":
    """A build-facts file's text (BUILD_FACT_LIMIT bytes at most); None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(BUILD_FACT_LIMIT)
    except OSError:
        return None


def package_loaders(site: str, files: "list") -> "list":
    """How a distribution's packages make its DLLs reachable, read from their own __init__.py: delvewheel's
    patch (`_delvewheel_patch_*`, `_delvewheel_init_patch_*` before delvewheel 1.0, which os.add_dll_directory()s `<site>/<name>.libs` when the package is
    imported: numpy, scipy, pandas, ...). [{"package", "adds", "how"}], `adds` relative to the site folder."""
    out = []
    tops = []
    for f in files:
        top = f.replace("\\", "/").split("/", 1)[0]
        if top and top not in tops and "/" in f.replace("\\", "/"):
            tops.append(top)
    for top in tops[:20]:
        init = os.path.join(site, top, "__init__.py")
        try:
            with open(init, encoding="utf-8", errors="replace") as fh:
                text = fh.read(1 << 16)
        except OSError:
            continue
        if "_delvewheel_patch" not in text and "_delvewheel_init_patch" not in text:  # (delvewheel < 1.0: pyzmq 25)
            continue
        adds: "list" = []
        at = text.find("os.pardir, ")
        while at >= 0 and len(adds) < 4:
            q = text[at + len("os.pardir, "): at + len("os.pardir, ") + 1]
            end = text.find(q, at + len("os.pardir, ") + 1) if q in ("'", '"') else -1
            if end > 0:
                adds.append(text[at + len("os.pardir, ") + 1: end])
            at = text.find("os.pardir, ", at + 1)
        if adds:
            out.append({"package": top, "adds": adds, "how": "delvewheel"})
    return out


def _json_strings(text: str, key: str) -> "list":
    """The strings of `"key": [ ... ]` or `"key": "..."` in a JSON text, read without the json module (not
    loaded at start-up: importing it would change what the program imports); backslash escapes of paths kept
    as one character."""
    at = text.find('"' + key + '"')
    if at < 0:
        return []
    i = text.find(":", at) + 1
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    end = text.find("]", i) if i < len(text) and text[i] == "[" else text.find('"', text.find('"', i) + 1)
    chunk = text[i:end + 1]
    out, cur, inside, esc = [], [], False, False
    for ch in chunk:
        if inside:
            if esc:
                cur.append(ch)
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                out.append("".join(cur))
                cur, inside = [], False
            else:
                cur.append(ch)
        elif ch == '"':
            inside = True
    return out


def _conda_record(path: str) -> "Optional[dict]":
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(4 << 20)
    except OSError:
        return None
    name, version = (_json_strings(text, "name") or [""])[0], (_json_strings(text, "version") or [""])[0]
    if not name:
        return None
    return {"name": name, "version": version, "files": [p for p in _json_strings(text, "files") if _native(p)]}


_STDLIB = os.path.normcase(os.path.dirname(os.__file__)) + os.sep  # (os is loaded at start-up: no import here)
_PACKAGES = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


_LIBRARY_FILES: "dict[str, bool]" = {}  # library_file's answers (each frame of each import asks: 60 000 times in
# `import scipy.stats, sklearn, pandas`, for a few thousand files)


def library_file(filename: str) -> bool:
    """A frame's file that is not the user's own code: the import system's frozen modules, the standard
    library, an installed package (site-packages), this file."""
    known = _LIBRARY_FILES.get(filename)
    if known is None:
        known = _LIBRARY_FILES[filename] = _library_file(filename)
    return known


def _library_file(filename: str) -> bool:
    if filename.startswith("<frozen") or filename == __file__:
        return True
    f = os.path.normcase(filename)
    return f.startswith(_STDLIB) or any(p in f for p in _PACKAGES)


def user_frame(depth: int = 2) -> "Optional[dict]":
    """The innermost frame of the user's own code on this thread (the script, `python -c`'s <string>, a module
    of the project), as {"file", "line", "function"}; None when every frame is a library's."""
    try:
        f: "Any" = sys._getframe(depth)
    except ValueError:
        return None
    while f is not None:
        name = f.f_code.co_filename
        if not library_file(name) and not library_module(f.f_globals):
            return {"file": name, "line": f.f_lineno, "function": f.f_code.co_name}
        f = f.f_back
    return None


_STDLIB_NAMES: "frozenset" = getattr(sys, "stdlib_module_names", frozenset())  # (3.10+)


def library_module(g: dict) -> bool:
    """A frame's module that is the standard library's or a package's by what its globals say: its __file__
    (the embeddable distribution's standard library is in python3X.zip, and its code names files relative
    to it, "ctypes\\__init__.py"), or its name (3.10+: sys.stdlib_module_names)."""
    path = g.get("__file__")
    if isinstance(path, str) and (library_file(path) or ".zip" + os.sep in os.path.normcase(path)):
        return True
    name = g.get("__name__")
    return isinstance(name, str) and name != "__main__" and name.split(".")[0] in _STDLIB_NAMES


IMPORTS_LIMIT = 64  # modules of an import stack kept (the outermost ones: the user's import comes first)


def module_stack(f: "Any") -> "list":
    """The modules whose code is running in frame f and the frames it was called from (each `<module>` frame
    is a module being imported, or the script), outermost first, `__main__` left out: the imports in progress."""
    out = []
    while f is not None:
        if f.f_code.co_name == "<module>":
            name = f.f_globals.get("__name__")
            if isinstance(name, str) and name != "__main__":
                out.append(name)
        f = f.f_back
    out.reverse()
    return out[:IMPORTS_LIMIT]


# The globals of the import system's own modules (frozen, loaded at start-up): a frame running their code is
# neither the user's code nor a module being imported (their own module code ran at start-up)
_IMPORT_SYSTEM = tuple(getattr(sys.modules.get(m), "__dict__", None) or {"(none)": m}
                       for m in ("_frozen_importlib", "_frozen_importlib_external"))


def frame_and_imports(f: "Any", frames: "Optional[Callable[..., Any]]" = None) -> "tuple[Optional[dict], list]":
    """user_frame and module_stack of frame f in one walk up the stack: each frame's f_code is an audit event of
    its own (object.__getattr__, CPython 3.11+), which every hook of the process sees; two walks made 180 000 of
    them in `import scipy.stats, sklearn, pandas`, a tenth of its time. The import system's frames (five of
    the six frames of each nested import) are told by their globals, with no f_code: 94 000 such events were
    18 700. `frames`: the preload library's walk in C (c_audit_filter: dlltrace_linux_stack), which reads no
    f_code and gives the module names of the stack and the frames whose file _LIBRARY_FILES does not know for a
    library's (the user's frame among them): a Python step for each of that import's 15 000 frames was 30 ms;
    the walk is made here when it is not given or fails."""
    walked = None
    if frames is not None:
        try:
            walked = frames(f, _IMPORT_SYSTEM[0], _IMPORT_SYSTEM[1], _LIBRARY_FILES)
        except Exception:  # (no such C API before 3.9, an error: walked here)
            walked = None
    if walked is not None:
        names, candidates = walked
        user = None
        for code, g, frame in candidates:
            if not library_file(code.co_filename) and not library_module(g):
                user = {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name}
                break
        out = [name for name in names if isinstance(name, str) and name != "__main__"]
        out.reverse()
        return user, out[:IMPORTS_LIMIT]
    user = None
    out = []
    for code, g, frame in _walk(f):
        if user is None and not library_file(code.co_filename) and not library_module(g):
            user = {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name}
        if code.co_name == "<module>":
            name = g.get("__name__")
            if isinstance(name, str) and name != "__main__":
                out.append(name)
    out.reverse()
    return user, out[:IMPORTS_LIMIT]


def user_frame_json(code: "Any", g: dict, frame: "Any") -> "Optional[str]":
    """The JSON text of a py_import's `frame` when this frame (its code, globals and frame object) is the user's,
    else None: what frame_and_imports decides of each frame, for the preload library's writing of py_import in C
    (c_audit_filter: dlltrace_linux_fast_import), which asks it of the frames whose file _LIBRARY_FILES does not
    know for a library's, innermost first, until one is."""
    if library_file(code.co_filename) or library_module(g):
        return None
    return frame_json({"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name})


def _walk(f: "Any") -> "Any":
    """(code, globals, frame) of each frame from f outwards that is not the import system's (by its globals)."""
    boot, external = _IMPORT_SYSTEM
    while f is not None:
        g = f.f_globals
        if g is not boot and g is not external:
            yield f.f_code, g, f
        f = f.f_back


def make_audit_hook(backend: "Backend", warnings_hooked: bool = True,
                    on_warnings: "Optional[Callable[[], None]]" = None,
                    frames: "Optional[Callable[..., Any]]" = None,
                    wraps_find_library: "Optional[bool]" = None) -> "Callable[[str, tuple], None]":
    """A sys.addaudithook hook writing py_import / py_dlopen / py_add_dll_directory events and setting
    the thread's context to each. Reentrancy-safe (the backend may import nothing, but be sure).
    `warnings_hooked` False: the warnings module was not loaded at start-up; at the first audit event after
    the program imported it, its warnings are hooked (hook_warnings), then `on_warnings` is called (the C
    filter, c_audit_filter, hands the hook only its three events from then on).
    `wraps_find_library` (None: on Windows, os.name "nt"): ctypes.util's find_library is wrapped as its module is
    imported (its `exec` audit event: watch_ctypes_util), and each call is a py_find_library event; else (Linux)
    a call is seen at its first subprocess (watch_find_library), and never both."""
    busy = _thread._local()
    pending = [not warnings_hooked]
    popens = [0, 0]  # py_popen events written: of programs that started, of programs that did not (watch_start)
    wraps = os.name == "nt" if wraps_find_library is None else wraps_find_library
    finds = [0]  # py_find_library events the wrapper wrote (find_library_wrapper)

    def hook(event: str, args: tuple) -> None:
        fields: dict[str, Any]
        if pending[0] and "warnings" in sys.modules and not getattr(busy, "on", False):
            busy.on = True
            try:
                # (not yet while its module is still being executed; never where it cannot be: CPython 3.14's)
                pending[0] = not hook_warnings(backend) and getattr(sys.modules["warnings"], "_showwarnmsg", None) is None
            except Exception:
                pending[0] = False
            finally:
                busy.on = False
            if not pending[0] and on_warnings is not None:
                try:
                    on_warnings()
                except Exception:
                    pass
        if event == "import":
            ev, fields = "py_import", {"module": str(args[0])}
        elif event == "ctypes.dlopen":
            name = args[0] if args else None
            mode = args[1] if len(args) > 1 and isinstance(args[1], int) else None
            ev, fields = "py_dlopen", {"name": None if name is None else os.fspath(name) if not isinstance(name, str) else name,
                                       "mode": mode}
        elif event == "os.add_dll_directory":
            ev, fields = "py_add_dll_directory", {"path": os.fspath(args[0]) if args else None}
        elif event == "exec":  # (a module's code about to run: ctypes.util's, whose find_library is then wrapped)
            if wraps and not getattr(busy, "on", False) and args and ctypes_util_code(args[0]):
                busy.on = True
                try:
                    watch_ctypes_util(backend, frames, finds)
                except Exception:  # never break the traced program
                    pass
                finally:
                    busy.on = False
            return
        elif event == "subprocess.Popen":  # (a program started; or ctypes.util.find_library's ldconfig, gcc or ld)
            if not getattr(busy, "on", False):
                busy.on = True
                try:
                    f = sys._getframe(1)
                    if (wraps or not watch_find_library(backend, f, frames, starts_find_library(args))) \
                            and find_library_frame(f) is None:
                        watch_start(backend, f, args, frames, popens)
                except Exception:  # never break the traced program
                    pass
                finally:
                    busy.on = False
            return
        else:
            return
        if getattr(busy, "on", False):
            return
        busy.on = True
        try:
            if ev != "py_add_dll_directory":
                # where in the user's code the import or the load was made (user_frame), and the imports in
                # progress (module_stack; a py_import's own module is not among them yet): with the thread's next
                # event's, they tell whether a load made after this event was made during the import
                fields["frame"], fields["imports"] = frame_and_imports(sys._getframe(1), frames)
            seq = backend.write_event(ev, fields)
            if seq:
                backend.set_context(seq)
        except Exception:  # never break the traced program
            pass
        finally:
            busy.on = False

    return hook


FIND_LIBRARY_DEPTH = 12  # frames from a subprocess.Popen audit event up to find_library's


def find_library_frame(f: "Any") -> "Any":
    """The frame of ctypes.util.find_library that the frame `f` runs in (its ldconfig, gcc or ld subprocess:
    find_library on Linux asks them), or None."""
    for _ in range(FIND_LIBRARY_DEPTH):
        if f is None:
            return None
        c = f.f_code
        if c.co_name == "find_library" and c.co_filename.replace("\\", "/").endswith("/ctypes/util.py"):
            return f
        f = f.f_back
    return None


_watched = _thread._local()  # the find_library call last written without its result, on this thread


def starts_find_library(args: tuple) -> bool:
    """Whether a subprocess.Popen audit event's `args` (executable, args, cwd, env) run ldconfig: the first
    subprocess of every find_library call on Linux (_findSoname_ldconfig; then gcc, ld, objdump), so a new call."""
    argv = args[1] if len(args) > 1 else None
    first = argv[0] if isinstance(argv, (list, tuple)) and argv else argv
    try:
        return isinstance(first, (str, bytes, os.PathLike)) and os.path.basename(os.fsdecode(first)) == "ldconfig"
    except (TypeError, ValueError):
        return False


def _untraced(frame: "Any", event: str, arg: "Any") -> None:
    return None  # (no frame but find_library's is traced: each new call costs this call only)


def watch_find_library(backend: "Backend", f: "Any", frames: "Optional[Callable[..., Any]]" = None,
                       starts: bool = False) -> bool:
    """A py_find_library event for the find_library call that `f` (a subprocess.Popen audit event's caller) runs
    in: its `name`, where the user's code called it and the imports in progress, and what it returned (`result`:
    a library's name, or None: it found none), written when it returns. Its return is seen through the frame's
    own trace function (f_trace) and sys.settrace on this thread while the call runs (a tracer that returns None
    for every other frame), both taken off at its return. A program with a tracer of its own (sys.gettrace(): a
    debugger, coverage) is left alone: the event is written now, without `result`, once per call (`starts`: this
    subprocess is a call's first, ldconfig; the same frame address again is then another call). False when `f` is
    not in a find_library call, or in one already watched (its second and third subprocess)."""
    fl = find_library_frame(f)
    if fl is None or fl.f_trace is not None:
        return False
    name = fl.f_locals.get("name")
    fields: "dict[str, Any]" = {"name": name if isinstance(name, str) else None}
    fields["frame"], fields["imports"] = frame_and_imports(fl, frames)
    if sys.gettrace() is not None:
        call = (id(fl), id(fl.f_back), fields["name"])  # (this call's; its frame is not marked: no f_trace of ours)
        if not starts and getattr(_watched, "call", None) == call:
            return False
        _watched.call = call
        backend.write_event("py_find_library", fields)
        return True
    def returned(raised: "list", value: "Any") -> None:
        if not raised:  # (raised in it, or through it: what it returns is then not known)
            fields["result"] = value if value is None or isinstance(value, str) else str(value)
        backend.write_event("py_find_library", fields)

    watch_frame(fl, returned)
    return True


def watch_frame(f: "Any", returned: "Callable[[list, Any], None]") -> None:
    """Call returned(raised, value) when frame `f` returns: the exceptions raised in it or through it, in order, and
    what it returned. Seen through the frame's own trace function (f_trace) and sys.settrace on this thread while
    it runs (a tracer that returns None for every other frame: each new call costs that call only), both taken off
    at its return; a tracer the program set meanwhile is its own and kept. An error in `returned` never reaches the
    program. (watch_find_library's and watch_start's.)"""
    raised: "list[Any]" = []

    def local(frame: "Any", event: str, arg: "Any") -> "Any":
        if event == "exception":
            raised.append(arg[1] if isinstance(arg, tuple) and len(arg) > 1 else None)
        elif event == "return":
            if sys.gettrace() is _untraced:
                sys.settrace(None)
            try:
                returned(raised, arg)
            except Exception:  # never break the traced program
                pass
            return None
        return local

    f.f_trace = local
    f.f_trace_lines = False
    sys.settrace(_untraced)


def ctypes_util_code(code: "Any") -> bool:
    """Whether an `exec` audit event's code object is the module code of the standard library's ctypes/util.py
    (its file named as the interpreter compiled it: a full path, or "ctypes\\util.py" in the embeddable
    distribution's python3X.zip); the module it runs in is checked when it starts (watch_ctypes_util)."""
    try:
        if code.co_name != "<module>":
            return False
        f = code.co_filename.replace("\\", "/")
    except Exception:  # (not a code object)
        return False
    return isinstance(f, str) and (f == "ctypes/util.py" or f.endswith("/ctypes/util.py"))


def watch_ctypes_util(backend: "Backend", frames: "Optional[Callable[..., Any]]" = None,
                      counts: "Optional[list[int]]" = None) -> bool:
    """Wrap ctypes.util.find_library (find_library_wrapper) when the module code of ctypes.util that is about to
    run (an `exec` audit event of the import) returns: before the import statement that ran it gets the module, so
    `from ctypes.util import find_library`, a default argument bound to it (pyusb's libloader.locate_library) and
    `f is ctypes.util.find_library` (pyusb's again) all see the one wrapper. Seen as watch_frame sees a frame: the
    first frame to start on this thread (the module's: audit hooks themselves are not traced) gets the frame's own
    trace function, sys.settrace until it returns. A program with a tracer of its own is left alone (False): its
    find_library calls are then not recorded. On Windows only (make_audit_hook): there find_library starts no
    subprocess (CPython's Lib/ctypes/util.py, `os.name == "nt"`: each PATH folder, NAME then NAME.dll, by
    os.path.isfile), so no audit event tells of a call."""
    if sys.gettrace() is not None:
        return False

    def first(frame: "Any", event: str, arg: "Any") -> "Any":
        sys.settrace(None)
        g = frame.f_globals
        if event != "call" or g.get("__name__") != "ctypes.util":
            return None

        def returned(raised: "list", value: "Any") -> None:
            original = g.get("find_library")
            if callable(original) and getattr(original, "__module__", None) == "ctypes.util" \
                    and not hasattr(original, "__wrapped__"):
                g["find_library"] = find_library_wrapper(original, backend, frames, counts)

        watch_frame(frame, returned)
        return frame.f_trace

    sys.settrace(first)
    return True


FIND_LIBRARY_LIMIT = 200  # py_find_library events the wrapper writes at most (a call in a loop)


def find_library_wrapper(original: "Callable[..., Any]", backend: "Backend",
                         frames: "Optional[Callable[..., Any]]" = None,
                         counts: "Optional[list[int]]" = None) -> "Callable[..., Any]":
    """ctypes.util.find_library as the program gets it on Windows: the original called with the same argument, its
    value returned and its exceptions raised as they are (one frame of this file more in their traceback), its
    name, docstring and signature (inspect follows __wrapped__); each call a py_find_library event, as on Linux
    (`name`, `result`: what it returned, absent when it raised; `frame`, `imports`), with `searched`: the PATH
    folders it went through (find_library_searched). At most FIND_LIBRARY_LIMIT events (`counts`); an error of the
    recording never reaches the program."""
    counts = counts if counts is not None else [0]

    def find_library(name):  # (no annotations: get_type_hints of it must not need this file's names)
        path = os.environ.get("PATH")  # (what the call reads: os.environ['PATH'])
        try:
            value = original(name)
        except BaseException:
            _record_find_library(backend, frames, counts, name, path, False, None)
            raise
        _record_find_library(backend, frames, counts, name, path, True, value)
        return value

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(find_library, attr, getattr(original, attr))
        except Exception:
            pass
    find_library.__wrapped__ = original  # type: ignore[attr-defined]
    return find_library


def _record_find_library(backend: "Backend", frames: "Optional[Callable[..., Any]]", counts: "list[int]",
                         name: "Any", path: "Optional[str]", returned: bool, value: "Any") -> None:
    try:
        if counts[0] >= FIND_LIBRARY_LIMIT:
            return
        counts[0] += 1
        fields: "dict[str, Any]" = {"name": name if isinstance(name, str) else None}
        fields["frame"], fields["imports"] = frame_and_imports(sys._getframe(2), frames)
        if returned:
            fields["result"] = value if value is None or isinstance(value, str) else str(value)
        fields["searched"] = find_library_searched(name, path, value if returned else None)
        backend.write_event("py_find_library", fields)
    except Exception:  # never break the traced program
        pass


def find_library_searched(name: "Any", path: "Optional[str]", result: "Any") -> "list[str]":
    """The PATH folders find_library(name) went through on Windows (CPython's Lib/ctypes/util.py, 3.6 to 3.13:
    os.environ['PATH'] split at os.pathsep, in order, each for NAME then NAME.dll, the first file found returned):
    up to the one whose file it returned, every one when it found none (an empty entry is the current folder),
    at most SEARCHED_LIMIT; [] for 'c' and 'm' (find_msvcrt: no folder) and when PATH was not set."""
    if not isinstance(name, str) or name in ("c", "m") or not isinstance(path, str):
        return []
    folders = path.split(os.pathsep)
    if isinstance(result, str):
        for i, d in enumerate(folders):
            f = os.path.join(d, name)
            if result == f or result == f + ".dll":
                folders = folders[:i + 1]
                break
    return folders[:SEARCHED_LIMIT]


POPEN_LIMIT = 200  # py_popen events of a process: of programs that started, and as many of programs that did not
ARGV_LIMIT = 8  # arguments of a program kept (each at most ARG_LIMIT characters)
ARG_LIMIT = 200
SEARCHED_LIMIT = 64  # PATH folders kept of a start that failed
# the folders a program is looked for in when it was not found on the PATH the child was given (`elsewhere`)
USUAL_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/snap/bin")


def _text(v: "Any") -> "Optional[str]":
    try:
        return os.fsdecode(v) if isinstance(v, (str, bytes, os.PathLike)) else None
    except (TypeError, ValueError):
        return None


def command_words(line: str) -> "list[str]":
    """The words of a Windows command line (subprocess on Windows audits the one string CreateProcess gets:
    list2cmdline's), split at blanks outside double quotes, the quotes taken off; at most ARGV_LIMIT. (For the
    record only: CreateProcess itself reads the program's name so, and the program its own arguments its way.)"""
    out: "list[str]" = []
    word: "list[str]" = []
    quoted, started = False, False
    for ch in line:
        if ch == '"':
            quoted, started = not quoted, True
        elif ch in " \t" and not quoted:
            if started:
                out.append("".join(word))
                if len(out) >= ARGV_LIMIT:
                    return out
            word, started = [], False
        else:
            word.append(ch)
            started = True
    if started:
        out.append("".join(word))
    return out[:ARGV_LIMIT]


def popen_fields(args: tuple) -> "dict[str, Any]":
    """A py_popen event's `program` (what subprocess runs: the audit event's executable, else its argv's first)
    and `argv` (at most ARGV_LIMIT, each at most ARG_LIMIT characters) of a subprocess.Popen audit event's `args`
    (executable, args, cwd, env; on Windows args is one command line: command_words)."""
    executable = args[0] if args else None
    argv = args[1] if len(args) > 1 else None
    if isinstance(argv, str) and os.name == "nt":
        argv = command_words(argv)
    argv = list(argv[:ARGV_LIMIT]) if isinstance(argv, (list, tuple)) else [argv] if argv is not None else []
    words = [w[:ARG_LIMIT] for w in (_text(a) for a in argv) if w is not None]
    program = _text(executable) or (words[0] if words else None)
    return {"program": program, "argv": words}


def searched_path(program: str, env: "Any") -> "list[str]":
    """The folders a program without a folder in its name is looked for in: the PATH of the environment the child
    was given (`env`, else this process's: os.get_exec_path, as subprocess's own search), at most SEARCHED_LIMIT;
    [] for a name with a folder. On Windows always this process's: CreateProcess searches its caller's PATH, and
    an `env` cannot change it (Python's subprocess documentation, Popen's warning)."""
    if os.sep in program or (os.altsep and os.altsep in program):
        return []
    try:
        folders = os.get_exec_path(env if hasattr(env, "get") and os.name != "nt" else None)
    except Exception:  # (an env subprocess itself refuses)
        return []
    return [os.fsdecode(d) for d in folders[:SEARCHED_LIMIT]]


def found_elsewhere(program: str, searched: "list[str]") -> "list[str]":
    """The usual program folders (USUAL_BIN_DIRS) not among `searched` that hold an executable file `program`; [] on
    Windows (CreateProcess searches its own folders before PATH)."""
    if not searched or os.name == "nt":
        return []
    out = []
    for d in USUAL_BIN_DIRS:
        if d in searched:
            continue
        p = os.path.join(d, program)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            out.append(p)
    return out


def popen_caller(f: "Any") -> "Optional[dict]":
    """The function that started the program (`f`: subprocess's _execute_child): the first frame out from it
    whose file is not subprocess.py's (Popen.__init__, run, check_output ...), {file, line, function}; None."""
    for _ in range(FIND_LIBRARY_DEPTH):
        if f is None:
            return None
        c = f.f_code
        if not c.co_filename.replace("\\", "/").endswith("/subprocess.py"):
            return {"file": c.co_filename, "line": f.f_lineno, "function": c.co_name}
        f = f.f_back
    return None


def watch_start(backend: "Backend", f: "Any", args: tuple, frames: "Optional[Callable[..., Any]]" = None,
                counts: "Optional[list[int]]" = None) -> bool:
    """A py_popen event for the program a subprocess.Popen audit event starts (`f`: its caller, subprocess's
    _execute_child; `args`: executable, args, cwd, env): the program, its arguments, where the user's code started
    it and the imports in progress, written when _execute_child returns, with `error` when it raised an OSError
    (the program was not found: FileNotFoundError; not executable: PermissionError) and then the folders searched
    and the usual folders not among them that hold it. Seen as watch_find_library sees its call: the frame's own
    trace function and sys.settrace on this thread until it returns; nothing the program does changes. A program
    with a tracer of its own is left alone: the event is written now, without `error`. `counts`: events written
    [started, failed], at most POPEN_LIMIT each."""
    counts = counts if counts is not None else [0, 0]
    if f is None or f.f_code.co_name != "_execute_child" or f.f_trace is not None or \
            counts[0] >= POPEN_LIMIT and counts[1] >= POPEN_LIMIT:
        return False
    fields = popen_fields(args)
    if fields["program"] is None:
        return False
    env = args[3] if len(args) > 3 else None
    fields["frame"], fields["imports"] = frame_and_imports(f, frames)
    fields["caller"] = popen_caller(f)
    if sys.gettrace() is not None:
        if counts[0] >= POPEN_LIMIT:
            return False
        counts[0] += 1
        backend.write_event("py_popen", fields)
        return True
    def returned(raised: "list", value: "Any") -> None:
        exc = next((x for x in reversed(raised) if isinstance(x, OSError)), None)  # (the last OSError raised in it)
        i = 0 if exc is None else 1
        if counts[i] >= POPEN_LIMIT:
            return
        counts[i] += 1
        if exc is not None:
            fields["error"] = {"type": type(exc).__name__, "errno": exc.errno, "filename": _text(exc.filename)}
            fields["searched"] = searched_path(fields["program"], env)
            fields["elsewhere"] = found_elsewhere(fields["program"], fields["searched"])
        else:
            fields["error"] = None
        backend.write_event("py_popen", fields)

    watch_frame(f, returned)
    return True


MESSAGE_LIMIT = 4000  # characters of str(exception) kept
CAUSES_LIMIT = 4      # links of the __cause__ / __context__ chain kept


def _exception_one(exc: BaseException) -> dict:
    t = type(exc)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", t.__name__)
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not stop the record
        message = ""
    module = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    path = getattr(exc, "path", None) if isinstance(exc, ImportError) else (
        getattr(exc, "filename", None) if isinstance(exc, OSError) else None)
    winerror = getattr(exc, "winerror", None) if isinstance(exc, OSError) else None
    return {"type": name if mod in ("builtins", "") else f"{mod}.{name}",
            "message": message[:MESSAGE_LIMIT],
            "module": module if isinstance(module, str) else None,
            "path": os.fspath(path) if isinstance(path, (str, os.PathLike)) else None,
            "winerror": winerror if isinstance(winerror, int) and not isinstance(winerror, bool) else None}


def exception_fields(exc: BaseException) -> dict:
    """The py_exception event: the exception's type, message, ImportError.name (`module`),
    ImportError.path / OSError.filename (`path`), OSError.winerror, its causes (the
    __cause__ / __context__ chain, nearest first), and the native files their messages name (`files`)."""
    fields = _exception_one(exc)
    causes: list[dict] = []
    seen = {id(exc)}
    cur = exc
    while len(causes) < CAUSES_LIMIT:
        nxt = cur.__cause__ if cur.__cause__ is not None else (None if cur.__suppress_context__ else cur.__context__)
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        causes.append(_exception_one(nxt))
        cur = nxt
    fields["causes"] = causes
    fields["frames"] = traceback_frames(exc)
    fields["files"] = named_files([fields["message"]] + [c["message"] for c in causes])
    return fields


NAMED_FILES_LIMIT = 16  # native files of an exception's messages looked at
_NATIVE_ENDS = (".dll", ".pyd", ".so", ".dylib")
_PATH_STOPS = "\"'<>|*?\r\n\t"  # (no path has them: where a path named in a message begins, at the latest)
NAMED_FILES_LOOK = 4096  # characters looked at before a native extension for where its path begins (PATH_MAX)


def named_files(texts: "list") -> "list":
    """The native files (.dll, .pyd, .so[.N...], .dylib) the messages `texts` name by an absolute path, or by a base
    name beside the module they are the file of (_module_files), each {path, exists, size} as the file system says
    at the program's end: a package that checks for its own DLL before loading it dies with no load made (xgboost's
    XGBoostLibraryNotFound lists the paths it looked at, lightgbm's "Cannot find lightgbm library file in following
    paths", pycryptodome's "Cannot load native module"), and the report tells from these whether
    such a file is one an installed distribution's RECORD lists (diagnosis/outcome.py). No regular expressions
    (re is not imported at start-up: see above). At most NAMED_FILES_LIMIT, each once."""
    out: list = []
    for text in texts:
        if not isinstance(text, str):
            continue
        low = text.lower()
        for ext in _NATIVE_ENDS:
            i = low.find(ext)
            while i >= 0 and len(out) < NAMED_FILES_LIMIT:
                end = i + len(ext)
                while ext == ".so" and end + 1 < len(text) and text[end] == "." and text[end + 1].isdigit():
                    end += 1  # (libxgboost.so.2.1: its version numbers)
                    while end < len(text) and text[end].isdigit():
                        end += 1
                if end == len(text) or not (text[end].isalnum() or text[end] == "_"):
                    path = _path_ending_at(text, i, end)
                    if path and all(f["path"] != path for f in out):
                        out.append(_file_state(path))
                i = low.find(ext, i + 1)
        _module_files(text, out)
        _record_files(text, out)
    return out


def _record_files(text: str, out: "list") -> None:
    """The files an installed distribution's RECORD lists (installed_dists: _RECORD_NATIVE) by a base name a message
    names alone, as a word: pywin32's "No system module 'pythoncom' (pythoncom311.dll)" (pywintypes.py looks for its
    pywin32_system32\\pythoncom311.dll on sys.path with os.path.isfile, after a LoadLibraryEx of the bare name that
    always fails with 87) names pywin32_system32\\pythoncom311.dll. Each once, into `out` (at most NAMED_FILES_LIMIT)."""
    if not _RECORD_NATIVE:
        return
    for word in text.split():
        name = word.strip("()[]{}<>'\",;:.!?`")
        if not name.lower().endswith(_NATIVE_ENDS) or "/" in name or "\\" in name:
            continue
        for path in _RECORD_NATIVE.get(name.lower(), ())[:4]:
            if len(out) >= NAMED_FILES_LIMIT:
                return
            if all(f["path"] != path for f in out):
                out.append(_file_state(path))


def _module_files(text: str, out: "list") -> None:
    """The native files a message names by their base name beside the dotted module they are the file of, in the
    folder of that module's package (sys.modules): pycryptodome's "Cannot load native module 'Crypto.Cipher._raw_aes':
    Not found '_raw_aes.cp311-win_amd64.pyd', Not found '_raw_aes.pyd'" (Crypto/Util/_raw_api.py looks for its own
    file with os.path.isfile before loading it) names Crypto\\Cipher\\_raw_aes.pyd. Quoted names only ('...' or
    "..."), each once, into `out` (at most NAMED_FILES_LIMIT)."""
    if "'" not in text and '"' not in text:
        return
    words = [w.strip() for w in text.replace('"', "'").split("'")[1::2]]
    modules = [w for w in words if "." in w and all(p.isidentifier() for p in w.split("."))]
    bare = [w for w in words if w.lower().endswith(_NATIVE_ENDS) and "/" not in w and "\\" not in w
            and " " not in w]
    for m in modules:
        parent, last = m.rsplit(".", 1)
        try:  # (a package's __path__ may be any iterable: a namespace package's recomputes itself)
            paths = getattr(sys.modules.get(parent), "__path__", None)
            folder = next((p for p in paths if isinstance(p, str)), None) if paths is not None else None
        except Exception:
            folder = None
        if folder is None:
            continue
        for name in bare:
            if len(out) >= NAMED_FILES_LIMIT:
                return
            path = os.path.join(folder, name)
            if name.lower().startswith(last.lower() + ".") and all(f["path"] != path for f in out):
                out.append(_file_state(path))


def _path_ending_at(text: str, i: int, end: int) -> str:
    """The absolute path that ends at `end` in `text` (its extension at `i`): a Windows one from the last drive
    (C:\\ or C:/) before it, or from a UNC path's \\\\ after a space or an opening character, spaces allowed
    (C:\\Program Files\\...); a POSIX one from the / that begins its line (a list of paths, a line each, after a
    "- ": xgboost's and lightgbm's; spaces allowed: /home/u/My Projects/...), else from the last / that follows a
    space or an opening character; "" for none. Looks at most NAMED_FILES_LOOK characters back, with the string's
    own searches (a message of thousands of names costs no character-by-character walk)."""
    lo = max(0, i - NAMED_FILES_LOOK)
    j = max(lo, max(text.rfind(c, lo, i) for c in _PATH_STOPS) + 1)
    seg = text[j:end]
    stop = i - j  # (where the extension begins in seg)
    k = seg.rfind(":", 0, stop)
    while k >= 1:
        if seg[k + 1] in "\\/" and seg[k - 1].isalpha() and (k == 1 or not seg[k - 2].isalnum()):
            return seg[k - 1:]
        k = seg.rfind(":", 0, k)
    k = seg.rfind("\\\\", 0, stop)
    while k >= 0:
        if k == 0 or seg[k - 1].isspace() or seg[k - 1] in "(=,[:":
            return seg[k:]
        k = seg.rfind("\\\\", 0, k)
    line = seg.lstrip()
    if line[:2] in ("- ", "* "):
        line = line[2:].lstrip()
    if line[:1] == "/" and not any(e in line[:len(line) - (end - i)].lower() for e in _NATIVE_ENDS):
        return line  # (one path: not "/a/b.so or /c/d.so", "/a/x.so: undefined symbol: f, needed by /b/y.so")
    token = seg.rsplit(None, 1)[-1] if seg.strip() else ""
    slash = token.find("/")
    if slash < 0 or (slash > 0 and token[slash - 1] not in "(=,[:"):
        return ""
    return token[slash:]


def _file_state(path: str) -> dict:
    try:
        exists = os.path.isfile(path)
        size = os.path.getsize(path) if exists else None
    except (OSError, ValueError):
        exists, size = False, None
    return {"path": path, "exists": exists, "size": size}


TRACEBACK_LIMIT = 16  # frames of the ending exception's traceback kept (the innermost)


def traceback_frames(exc: BaseException) -> "list":
    """The functions the ending exception passed through, outermost first, the innermost TRACEBACK_LIMIT kept:
    each {file, line, function}. The report tells by them an exception raised by the function that a failed
    py_popen was started from (its `caller`)."""
    out = []
    tb = getattr(exc, "__traceback__", None)
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append({"file": code.co_filename, "line": tb.tb_lineno, "function": code.co_name})
        tb = tb.tb_next
    return out[-TRACEBACK_LIMIT:]


def ending_exception() -> "Optional[BaseException]":
    """The uncaught exception the program is ending on, at exit (None when it ends normally or on
    SystemExit): the interpreter sets sys.last_exc (3.12+) / sys.last_value before printing it."""
    exc = getattr(sys, "last_exc", None)
    if exc is None:
        exc = getattr(sys, "last_value", None)
    return exc if isinstance(exc, BaseException) and not isinstance(exc, SystemExit) else None


def traceback_imports(exc: "Optional[BaseException]") -> "list":
    """The imports in progress where the ending exception was raised (its traceback's innermost frame's
    module stack), [] for none."""
    out = []
    tb = getattr(exc, "__traceback__", None)  # (from where it ended up, down to where it was raised)
    while tb is not None:
        code = tb.tb_frame.f_code
        name = tb.tb_frame.f_globals.get("__name__") if code.co_name == "<module>" else None
        if isinstance(name, str) and name != "__main__":
            out.append(name)
        tb = tb.tb_next
    return out[:IMPORTS_LIMIT]


def make_exit_hook(backend: "Backend") -> "Callable[[], None]":
    """An atexit hook writing py_exception when the program ends on an uncaught exception, then py_exit: the
    imports still in progress when it ended (those the ending exception was raised in; none for a normal end),
    so that a load made after the thread's last py_* event is known to be in or after that event's import."""
    def at_exit() -> None:
        try:
            exc = ending_exception()
            if exc is not None:
                backend.write_event("py_exception", exception_fields(exc))
            backend.write_event("py_exit", {"imports": traceback_imports(exc)})
        except Exception:  # never break the traced program, nor change what it prints
            pass

    return at_exit


WARNINGS_LIMIT = 100  # py_warning events a process writes at most (a warning in a loop is said once a location anyway)


def hook_warnings(backend: "Backend") -> bool:
    """The program's own words as evidence: each warning Python shows (warnings._showwarnmsg_impl, what prints
    it to stderr: torchvision's "Failed to load image Python extension", torch's "CUDA initialization: Found no
    NVIDIA driver") becomes a py_warning event, then is shown as before. A warning a catch_warnings(record=True)
    block records, or that the program's own showwarning handles, is not shown by Python, and not recorded.
    Done where warnings is loaded (at start-up, or at the first audit event after the program imported it:
    make_audit_hook) and its _showwarnmsg reads _showwarnmsg_impl from the module's globals (CPython 3.6 to
    3.13); it never imports it. True when hooked."""
    w = sys.modules.get("warnings")
    impl = getattr(w, "_showwarnmsg_impl", None)
    show = getattr(w, "_showwarnmsg", None)
    if w is None or impl is None or getattr(show, "__globals__", None) is not vars(w):
        return False
    count = [0]

    def _showwarnmsg_impl(msg: "Any") -> None:
        try:
            if count[0] < WARNINGS_LIMIT:
                count[0] += 1
                category = getattr(msg, "category", None)
                backend.write_event("py_warning", {
                    "category": getattr(category, "__name__", "Warning"),
                    "message": str(getattr(msg, "message", ""))[:MESSAGE_LIMIT],
                    "file": str(getattr(msg, "filename", "") or ""),
                    "line": getattr(msg, "lineno", None) if isinstance(getattr(msg, "lineno", None), int) else None})
        except Exception:  # (never break the traced program)
            pass
        impl(msg)

    w._showwarnmsg_impl = _showwarnmsg_impl  # type: ignore[attr-defined]
    return True


_FAULT_FILES: list = []  # (the files faulthandler writes to: kept open for the life of the process)


def enable_faults(environ: "Optional[Mapping[str, str]]" = None) -> bool:
    """Where the program was when it crashes: faulthandler writes the Python stack of a fatal signal or
    exception (SIGSEGV, SIGABRT, an access violation, ...) to DLLTRACE_FAULTS/<pid>.txt, which `dlltrace run`
    reads after the program ended (trace/faults.py: py_fault events). It then lets the crash go on as before
    (the same signal, the same exit code). Left alone when the program's user has it on already
    (PYTHONFAULTHANDLER, -X faulthandler: their stderr gets it, as without dlltrace). True when enabled."""
    folder = (environ if environ is not None else os.environ).get("DLLTRACE_FAULTS")
    if not folder:
        return False
    try:
        import faulthandler  # (built into CPython 3.3 and later)

        if faulthandler.is_enabled():
            return False
        f = open(os.path.join(folder, "%d.txt" % os.getpid()), "w")
        faulthandler.enable(file=f, all_threads=False)
        _FAULT_FILES.append(f)
        return True
    except Exception:  # (never break the traced program)
        return False


def install(backend: "Backend", environ: "Optional[Mapping[str, str]]" = None) -> "Optional[Callable[[str, tuple], None]]":
    """py_env, then the audit hook and the exit hook (a CPython without audit hooks, < 3.8: py_env only),
    faulthandler into DLLTRACE_FAULTS (enable_faults) and the warnings Python shows (hook_warnings)."""
    import atexit

    backend.write_event("py_env", python_env_fields(environ))
    enable_faults(environ)
    try:
        warned = hook_warnings(backend)
    except Exception:  # (never break the traced program)
        warned = True
    try:
        backend.write_event("py_dists", installed_dists())
    except Exception:  # (never break the traced program)
        pass
    if sys.platform == "win32":  # (Linux: `dlltrace run` reads them itself, worlds/gpu.py)
        try:
            backend.write_event("py_gpu", windows_gpu_fields())
        except Exception:  # (never break the traced program)
            pass
    if not hasattr(sys, "addaudithook"):
        return None
    cfilter = c_audit_filter(backend)
    hook = make_audit_hook(backend, warned, None if cfilter is None else cfilter[1],
                           None if cfilter is None else cfilter[2])
    if cfilter is None or not cfilter[0](hook, not warned):
        sys.addaudithook(hook)
    atexit.register(make_exit_hook(backend))  # registered first, so it runs after the program's own
    return hook


def c_audit_filter(backend: "Backend") -> "Optional[tuple[Callable[[Any, bool], bool], Callable[[], None], Callable[..., Any]]]":
    """The preload library's C audit hook (native/audit/dlltrace_preload.c, Linux), which hands the Python hook
    the events it records (every event while it is asked to), where a hook added with sys.addaudithook is
    called for every audit event of the process (57 000 in `import scipy.stats, sklearn, pandas`, 18 000 more
    for the hook's own f_code reads; 1 600 are kept). (install(hook, all_events): True when installed, else
    the caller adds the hook itself; only_kept(): the three events from then on; frames: the walk up the stack
    in C, frame_and_imports's.) Installed, it also writes py_import itself from the first kept-only event on
    (dlltrace_linux_fast_import: the walk, the JSON and the thread's context in C, user_frame_json the one Python
    call; an event out of the common case goes to the hook); DLLTRACE_NO_C_IMPORTS=1 leaves every event to the
    hook. None where there is none (the Windows shim; the cffi binding: ctypes is what passes a Python object
    to C)."""
    lib = getattr(backend, "lib", None)
    if getattr(backend, "route", None) != "ctypes" or sys.platform == "win32" or lib is None:
        return None
    try:
        import ctypes  # (already imported by the ctypes binding)

        # (PyDLL: the calls keep the GIL, which dlltrace_linux_audit_install needs: it calls the Python C API)
        pylib = ctypes.PyDLL(lib._name)
        add = pylib.dlltrace_linux_audit_install
        add.restype, add.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_int]
        every = pylib.dlltrace_linux_audit_all
        every.restype, every.argtypes = None, [ctypes.c_int]
        frames = pylib.dlltrace_linux_stack
        frames.restype, frames.argtypes = ctypes.py_object, [ctypes.py_object] * 4
        fast = pylib.dlltrace_linux_fast_import
        fast.restype, fast.argtypes = ctypes.c_int, [ctypes.py_object] * 5
    except Exception:  # (another shim: no such functions)
        return None

    def install(hook: "Any", all_events: bool) -> bool:
        if int(add(hook, 1 if all_events else 0)) != 0:
            return False
        if not os.environ.get("DLLTRACE_NO_C_IMPORTS"):  # (py_import written in C from the first kept-only event on)
            fast(user_frame_json, _LIBRARY_FILES, _IMPORT_SYSTEM[0], _IMPORT_SYSTEM[1], str)
        return True

    def only_kept() -> None:
        every(0)

    return install, only_kept, frames


def bootstrap() -> None:
    """Called by bootstrap/sitecustomize.py in a traced Python (DLLTRACE_TRACE is set): the shim at
    DLLTRACE_SHIM, or bin/dlltrace_shim64.dll on Windows (elsewhere, without DLLTRACE_SHIM: nothing)."""
    if not os.environ.get("DLLTRACE_TRACE"):
        return
    path = os.environ.get("DLLTRACE_SHIM") or default_shim_path()
    if not path:
        return
    try:
        backend = load_backend(path)
        if backend.start(None, "python") != 0:
            return
    except Exception as e:  # tracing must never stop the program
        sys.stderr.write("dlltrace: tracing disabled in this process: %s\n" % (e,))
        return
    install(backend)
