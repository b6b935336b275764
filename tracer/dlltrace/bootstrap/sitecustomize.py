"""dlltrace bootstrap: first on a traced Python's PYTHONPATH (put there by `dlltrace run`).

Loads dlltrace's trace/shim.py by file path (the traced program does not get `dlltrace` importable),
starts tracing (dlltrace.trace.shim.bootstrap), then runs the sitecustomize this one shadows, if any.
"""
import importlib.util as _ilu
import os as _os
import sys as _sys


def _dlltrace_boot():
    here = _os.path.dirname(_os.path.abspath(__file__))
    spec = _ilu.spec_from_file_location("_dlltrace_shim", _os.path.join(_os.path.dirname(here), "trace", "shim.py"))
    mod = _ilu.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.bootstrap()
    # chain to the next sitecustomize on sys.path
    rest = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    for p in rest:
        cand = _os.path.join(p or ".", "sitecustomize.py")
        if _os.path.isfile(cand):
            spec = _ilu.spec_from_file_location("sitecustomize", cand)
            m = _ilu.module_from_spec(spec)
            spec.loader.exec_module(m)
            break


try:
    _dlltrace_boot()
except Exception as _e:  # never stop the traced program
    print("dlltrace: bootstrap failed: %s" % (_e,), file=_sys.stderr)
