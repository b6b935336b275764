"""dlltrace bootstrap: first on a traced Python's PYTHONPATH (put there by `dlltrace run`).

Loads dlltrace's trace/shim.py by file path (the traced program does not get `dlltrace` importable),
starts tracing (dlltrace.trace.shim.bootstrap), then runs the sitecustomize this one shadows, if any.
"""
import importlib.util as _ilu
import os as _os
import sys as _sys


def _run_file(name, path):
    """The module at `path`, run under `name`."""
    spec = _ilu.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % (path,))
    mod = _ilu.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dlltrace_boot():
    here = _os.path.dirname(_os.path.abspath(__file__))
    _run_file("_dlltrace_shim", _os.path.join(_os.path.dirname(here), "trace", "shim.py")).bootstrap()
    # chain to the next sitecustomize on sys.path
    rest = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    for p in rest:
        cand = _os.path.join(p or ".", "sitecustomize.py")
        if _os.path.isfile(cand):
            _run_file("sitecustomize", cand)
            break


try:
    _dlltrace_boot()
except Exception as _e:  # never stop the traced program
    print("dlltrace: bootstrap failed: %s" % (_e,), file=_sys.stderr)
