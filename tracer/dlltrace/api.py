"""dlltrace's Python API (re-exported by the package: `dlltrace.diagnose`, ...). docs/api.md shows each with
examples that run as tests (tests/test_api.py).

    read_trace(path)                  a trace file (`dlltrace run`'s), read
    diagnose(trace_or_path)           one Diagnosis per traced process (diagnosis/result.py): pure data
    deps(path, ...)                   a DLL, folder or wheel's import closure, resolved without running it
    check(paths, allow=...)           the CI gate of `dlltrace check`, as results
    report(diagnoses, format="text")  Diagnoses in words: text, Markdown or JSON (render/diagnosis.py)
    Trace(path=None, out=None)        trace this process's DLL loads while a block runs (Windows)

Each imports what it needs when it is called: `import dlltrace` stays light."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, TextIO, TypeVar, Union

from dlltrace.errors import EXIT_UNSUPPORTED, EXIT_USAGE, DlltraceError

if TYPE_CHECKING:
    from dlltrace.diagnosis.result import Diagnosis
    from dlltrace.diagnosis.static import CheckResult, DepsResult
    from dlltrace.trace.reader import Trace as TraceFile

F = TypeVar("F", bound=Callable[..., Any])


def read_trace(path: Union[str, os.PathLike]) -> "TraceFile":
    """The trace file at path (plain JSON Lines or .gz), read; its damaged lines are in `.warnings`."""
    from dlltrace.trace.reader import read_trace as _read

    if not os.path.exists(path):
        raise DlltraceError(f"{os.fspath(path)}: no such file", EXIT_USAGE)
    return _read(os.fspath(path))


def diagnose(trace: Union["TraceFile", str, os.PathLike]) -> "list[Diagnosis]":
    """One Diagnosis per traced process of a trace (a Trace, or a path to read): how it ended, and each failed
    load with its fate, leaf, chain, files tried, copies elsewhere and verified fixes. Windows, Wine and Linux
    traces alike. Also of what is not a trace: a scenario file (.toml: `dlltrace simulate`'s calls, one
    process), or a wheel, a folder or a DLL (`dlltrace deps`: the loads it would make, not run)."""
    from dlltrace.trace.reader import Trace as TraceFile

    if not isinstance(trace, TraceFile):
        given = os.fspath(trace)
        if given.lower().endswith(".toml"):
            from dlltrace.diagnosis.analysis import scenario_diagnosis
            from dlltrace.diagnosis.scenario import load_scenario

            scenario = load_scenario(given)
            return [scenario_diagnosis(scenario.simulator().run(scenario.calls), scenario.process.exe)]
        if os.path.isdir(given) or given.lower().endswith((".whl", ".dll", ".pyd", ".exe")):
            from dlltrace.diagnosis.static import static_diagnosis

            return [static_diagnosis(deps(given))]
    t = trace if isinstance(trace, TraceFile) else read_trace(trace)
    if t.header.platform == "linux":
        from dlltrace.diagnosis.verdict_linux import linux_diagnoses

        return linux_diagnoses(t)
    from dlltrace.diagnosis.analysis import windows_diagnoses

    return windows_diagnoses(t)


def deps(path: Union[str, os.PathLike], *, python: Optional[str] = None, flags: Optional[int] = None,
         extra_path: Iterable[str] = (), dll_dirs: Iterable[str] = (), vc_runtime: bool = True) -> "DepsResult":
    """`dlltrace deps` as a result: the import closure of a .dll/.pyd/.exe, a folder or a .whl, resolved by
    the simulated Windows loader as the packages' own loaders make their DLLs reachable (`.problems`: every DLL
    that would fail); vc_runtime=False: a Windows without the VC++ 2015-2022 runtime."""
    from dlltrace.diagnosis.static import deps as _deps, open_target

    return _deps(open_target(os.fspath(path), python=python, vc_runtime=vc_runtime), flags=flags,
                 extra_path=list(extra_path), dll_dirs=list(dll_dirs))


def check(paths: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], allow: Iterable[str] = (),
          python: Optional[str] = None, vc_runtime: bool = True) -> "list[CheckResult]":
    """`dlltrace check` as results, one per wheel or folder (`.ok`: it passes); allow: the external classes
    a DLL may need ("cuda", "cudnn", "vcruntime", ...)."""
    from dlltrace.classify import ALLOWABLE
    from dlltrace.diagnosis.gate import check_paths
    from dlltrace.diagnosis.static import gate_options

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    allowed = [a.strip().lower() for a in allow]
    bad = [a for a in allowed if a not in ALLOWABLE]
    if bad:
        raise DlltraceError(f"allow: {', '.join(bad)}: not a class ({', '.join(ALLOWABLE)})", EXIT_USAGE)
    return check_paths([os.fspath(g) for g in given], gate_options(allowed), python=python, vc_runtime=vc_runtime)


def report(diagnoses: "Union[Diagnosis, Iterable[Diagnosis]]", format: str = "text", source: str = "",
           everything: bool = False) -> str:
    """Diagnoses as the report says them: "text" and "markdown" (render/diagnosis.py: the answer first, each
    failed load that matters with the files the loader tried by rule, what fails next and its fixes, the
    loads gone past a line each; `everything`: those explained too), or "json" (a list of Diagnosis.to_dict()).
    The headline is the outcome of the first process that ended (the program a run started)."""
    import json

    from dlltrace.diagnosis.result import Diagnosis as _Diagnosis

    ds = [diagnoses] if isinstance(diagnoses, _Diagnosis) else list(diagnoses)
    if format == "json":
        return json.dumps([d.to_dict() for d in ds], indent=2, ensure_ascii=False)
    if format not in ("text", "markdown"):
        raise DlltraceError(f"format {format!r}: one of text, markdown, json", EXIT_USAGE)
    from dlltrace.render.diagnosis import diagnoses_text

    main = next((d for d in ds if d.end.kind not in ("unknown",)), ds[0] if ds else None)
    return diagnoses_text(ds, source, main, everything, markdown=format == "markdown")


class Trace:
    """Trace the DLL loads of this process while a block runs, as `dlltrace run` would have:

        with dlltrace.Trace(out=sys.stdout):
            import torch

    The shim (the package's bin/dlltrace_shim64.dll, or DLLTRACE_SHIM) is loaded into this process and
    records every load from `__enter__` to `__exit__` into `path` (a temporary .jsonl when not given), with
    the Python context (which import made each load). At the exit the trace is read (`.trace`), diagnosed
    (`.diagnoses`) and, with `out`, its report printed there. Also a decorator (`@dlltrace.Trace()`).

    Windows only: on Linux the .so recorder (LD_AUDIT) must be in place before the process starts, so
    there it raises a DlltraceError saying to run the program under `dlltrace run`. The shim cannot start
    twice in one process: a second Trace() in it raises too."""

    _started_here = False

    def __init__(self, path: Union[str, os.PathLike, None] = None, out: Optional[TextIO] = None):
        self.path = Path(path) if path is not None else None
        self.out = out
        self.trace: Optional["TraceFile"] = None
        self.diagnoses: "list[Diagnosis]" = []
        self._backend: Any = None

    def __enter__(self) -> "Trace":
        if sys.platform != "win32":
            raise DlltraceError("dlltrace.Trace() traces the loads of a running Windows process; on this OS the "
                                "recorder must be there before the process starts: run the program under "
                                "`dlltrace run -- python SCRIPT` instead", EXIT_UNSUPPORTED)
        if Trace._started_here:
            raise DlltraceError("dlltrace.Trace(): this process was traced already (the shim starts once a "
                                "process)", EXIT_UNSUPPORTED)
        from dlltrace.trace import shim

        dll = os.environ.get("DLLTRACE_SHIM") or shim.default_shim_path()
        if not dll or not os.path.isfile(dll):
            raise DlltraceError(f"dlltrace.Trace(): no shim ({dll or 'bin/dlltrace_shim64.dll'}): install the "
                                "win_amd64 wheel, or build it with native/build.sh", EXIT_UNSUPPORTED)
        if self.path is None:
            fd, name = tempfile.mkstemp(prefix="dlltrace-", suffix=".jsonl")
            os.close(fd)
            self.path = Path(name)
        backend = shim.load_backend(dll)
        rc = backend.start(str(self.path), "api")
        if rc != 0:
            raise DlltraceError(f"dlltrace.Trace(): the shim could not open {self.path} (error {rc})", EXIT_UNSUPPORTED)
        Trace._started_here = True
        shim.install(backend)  # py_env and the audit hook: which import made each load
        self._backend = backend
        return self

    def __exit__(self, *exc: object) -> None:
        if self._backend is not None:
            self._backend.stop()
            self._backend = None
        assert self.path is not None
        self.trace = read_trace(self.path)
        self.diagnoses = diagnose(self.trace)
        if self.out is not None:
            from dlltrace.render.summary import produce

            self.out.write(produce(self.trace) + "\n")

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return traced  # type: ignore[return-value]
