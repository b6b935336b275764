"""The Python side of the shim: the cffi binding (ABI mode) and the audit hook that adds Python context.

On Windows, `dlltrace run python ...` puts tracer/dlltrace/bootstrap on the child's PYTHONPATH; its
sitecustomize calls bootstrap() before any user code runs: load the shim with cffi (ffi.dlopen of
bin/dlltrace_shim64.dll + the cdef below), dlltrace_start(NULL, "python") (a no-op when the launcher
already started it), write a py_env event and install a sys.addaudithook hook that turns `import`,
`ctypes.dlopen` and `os.add_dll_directory` into py_* events. Each py_* event's seq becomes the
thread's context (dlltrace_set_context), so every native load that follows on that thread carries
"ctx": <that seq> -- the Python action that caused it. At exit (atexit), if the program is ending on
an uncaught exception (sys.last_exc / sys.last_value, which the interpreter sets before it prints
the traceback), a py_exception event says which: the report uses it to tell the load that failed
the program from the ones it went past (docs/verdicts.md). Nothing the program sees or prints changes.

Everything except load_shim() is plain Python, tested on Linux with a fake backend.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol

# Keep in step with native/shim/dlltrace_shim.h.
CDEF = """
int dlltrace_start(const wchar_t *trace_path, const char *via);
long long dlltrace_write_event(const char *ev, const char *fields_json);
void dlltrace_set_context(long long ctx_seq);
const char *dlltrace_version(void);
int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe);
"""

SHIM_DLL = "dlltrace_shim64.dll"


class Backend(Protocol):
    def write_event(self, ev: str, fields: dict) -> int: ...
    def set_context(self, seq: int) -> None: ...


def fields_json(fields: dict) -> str:
    """Object members without the braces, as dlltrace_write_event takes them (UTF-8 JSON)."""
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"), default=str)[1:-1]


def make_ffi():
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi


class ShimBackend:
    """The real backend: the shim DLL through cffi (Windows only)."""

    def __init__(self, dll_path: Optional[str] = None):
        self.ffi = make_ffi()
        path = dll_path or str(Path(__file__).resolve().parents[1] / "bin" / SHIM_DLL)
        self.lib = self.ffi.dlopen(path)

    def start(self, trace_path: Optional[str] = None, via: str = "python") -> int:
        return self.lib.dlltrace_start(trace_path if trace_path is not None else self.ffi.NULL, via.encode())

    def write_event(self, ev: str, fields: dict) -> int:
        return int(self.lib.dlltrace_write_event(ev.encode(), fields_json(fields).encode("utf-8")))

    def set_context(self, seq: int) -> None:
        self.lib.dlltrace_set_context(seq)


def python_env_fields(environ: Optional[Mapping[str, str]] = None) -> dict:
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
    }


def make_audit_hook(backend: Backend) -> Callable[[str, tuple], None]:
    """A sys.addaudithook hook writing py_import / py_dlopen / py_add_dll_directory events and setting
    the thread's context to each. Reentrancy-safe (the backend may import nothing, but be sure)."""
    busy = threading.local()

    def hook(event: str, args: tuple) -> None:
        fields: dict[str, Any]
        if event == "import":
            ev, fields = "py_import", {"module": str(args[0])}
        elif event == "ctypes.dlopen":
            name = args[0] if args else None
            mode = args[1] if len(args) > 1 and isinstance(args[1], int) else None
            ev, fields = "py_dlopen", {"name": None if name is None else os.fspath(name) if not isinstance(name, str) else name,
                                       "mode": mode}
        elif event == "os.add_dll_directory":
            ev, fields = "py_add_dll_directory", {"path": os.fspath(args[0]) if args else None}
        else:
            return
        if getattr(busy, "on", False):
            return
        busy.on = True
        try:
            seq = backend.write_event(ev, fields)
            if seq:
                backend.set_context(seq)
        except Exception:  # never break the traced program
            pass
        finally:
            busy.on = False

    return hook


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
    ImportError.path / OSError.filename (`path`), OSError.winerror, and its causes (the
    __cause__ / __context__ chain, nearest first)."""
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
    return fields


def ending_exception() -> Optional[BaseException]:
    """The uncaught exception the program is ending on, at exit (None when it ends normally or on
    SystemExit): the interpreter sets sys.last_exc (3.12+) / sys.last_value before printing it."""
    exc = getattr(sys, "last_exc", None)
    if exc is None:
        exc = getattr(sys, "last_value", None)
    return exc if isinstance(exc, BaseException) and not isinstance(exc, SystemExit) else None


def make_exit_hook(backend: Backend) -> Callable[[], None]:
    """An atexit hook writing py_exception when the program ends on an uncaught exception."""
    def at_exit() -> None:
        try:
            exc = ending_exception()
            if exc is not None:
                backend.write_event("py_exception", exception_fields(exc))
        except Exception:  # never break the traced program, nor change what it prints
            pass

    return at_exit


def install(backend: Backend, environ: Optional[Mapping[str, str]] = None) -> Callable[[str, tuple], None]:
    import atexit

    backend.write_event("py_env", python_env_fields(environ))
    hook = make_audit_hook(backend)
    sys.addaudithook(hook)
    atexit.register(make_exit_hook(backend))  # registered first, so it runs after the program's own
    return hook


def bootstrap() -> None:
    """Called by bootstrap/sitecustomize.py in a traced Windows Python (DLLTRACE_TRACE is set)."""
    if sys.platform != "win32" or not os.environ.get("DLLTRACE_TRACE"):
        return
    try:
        backend = ShimBackend(os.environ.get("DLLTRACE_SHIM"))
        if backend.start(None, "python") != 0:
            return
    except Exception as e:  # tracing must never stop the program
        print(f"dlltrace: tracing disabled in this process: {e}", file=sys.stderr)
        return
    install(backend)
