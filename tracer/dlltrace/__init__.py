"""dlltrace: find out exactly why a DLL (or a .so) failed to load.

The Python API (docs/api.md; each name is dlltrace/api.py's, imported when first used, so that
`import dlltrace` costs next to nothing):

    dlltrace.read_trace(path)         a trace file, read
    dlltrace.diagnose(trace_or_path)  one typed Diagnosis per traced process
    dlltrace.deps(path)               a DLL, folder or wheel's import closure, resolved without running it
    dlltrace.check(paths, allow=...)  the CI gate, as results
    dlltrace.report(diagnoses, format="text")  Diagnoses as text, Markdown or JSON
    dlltrace.Trace(path=None, out=None)  trace this process's DLL loads while a block runs (Windows)
"""

from __future__ import annotations

from dlltrace.version import __version__

TYPE_CHECKING = False  # (typing is not imported at run time: `import dlltrace` and `--version` stay light)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__", "read_trace", "diagnose", "deps", "check", "report", "Trace", "Diagnosis", "FailedLoad",
           "DlltraceError"]
_API = {"read_trace", "diagnose", "deps", "check", "report", "Trace"}
_TYPES = {"Diagnosis", "FailedLoad"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from dlltrace import api

        return getattr(api, name)
    if name in _TYPES:
        from dlltrace.diagnosis import result

        return getattr(result, name)
    if name == "DlltraceError":
        from dlltrace.errors import DlltraceError

        return DlltraceError
    raise AttributeError(f"module 'dlltrace' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
