"""dlltrace bootstrap: first on a traced Python's PYTHONPATH (put there by `dlltrace run`).

It runs in the traced program's own interpreter, which may have nothing installed, so it imports
nothing that interpreter may lack and changes nothing the program imports:
- it runs dlltrace's trace/shim.py by file path, as a module object of its own that is not put in
  sys.modules (`dlltrace` is not importable in the traced program, and rich, pefile, json, typing...
  are not imported); shim.bootstrap() binds the shim with cffi if the traced interpreter has it, else
  with ctypes (trace/shim.py); the modules that took (ctypes, _cffi_backend...) are then taken out of
  sys.modules again (_dlltrace_forget), so the program imports them itself, recorded as its own;
- it takes its own folder off sys.path first (PYTHONPATH keeps it, for child Pythons), so the
  program's sys.path is what it would be without dlltrace;
- it then runs the sitecustomize it shadows, if any (the next one on sys.path: a .py, a package,
  a .pyc or an extension, found by the import system's own PathFinder), and makes it the
  `sitecustomize` module, as `import sitecustomize` would have without dlltrace. An error in that
  one is raised as Python would raise it (site.py prints "Error in sitecustomize ..."); an error of
  dlltrace's own is one line on stderr and the program runs untraced.
A Python that ignores PYTHONPATH (-E, -I, or a ._pth file next to it, as the embeddable distribution
has) never runs this file: its DLL loads are traced, without Python context.
Tested in tests/test_bootstrap.py: a fake shim built with gcc, both bindings, every CPython 2.7-3.13
found; under Wine a real Windows CPython 3.13 with the real shim. Not run on real Windows.
"""
import os as _os
import sys as _sys


def _dlltrace_here():
    return _os.path.normcase(_os.path.dirname(_os.path.abspath(__file__)))


def _dlltrace_trace(here):
    """Start tracing (trace/shim.py's bootstrap; it needs Python 3.6 or later)."""
    if _sys.version_info < (3, 6):
        if _os.environ.get("DLLTRACE_TRACE"):
            _sys.stderr.write("dlltrace: no Python context in Python %d.%d (3.6 or later has it); "
                              "its DLL loads are traced all the same\n" % _sys.version_info[:2])
        return
    path = _os.path.join(_os.path.dirname(here), "trace", "shim.py")
    shim = type(_sys)("_dlltrace_shim")  # (a module object, not in sys.modules)
    shim.__file__ = path
    exec(_dlltrace_code(path), shim.__dict__)
    shim.bootstrap()


def _dlltrace_code(path):
    """shim.py's code: through the import system's own SourceFileLoader, from its __pycache__ .pyc (written
    there the first time, as an import of it would: compiling its source in every traced Python took 30 ms),
    which imports nothing and puts nothing in sys.modules; compiled here where that fails."""
    external = _sys.modules.get("_frozen_importlib_external")
    if external is not None:
        try:
            return external.SourceFileLoader("_dlltrace_shim", path).get_code("_dlltrace_shim")
        except Exception:
            pass
    with open(path, "rb") as f:
        source = f.read()
    return compile(source, path, "exec")


def _dlltrace_unlist(here):
    """Take this folder off sys.path (the first entry that is it: the one PYTHONPATH added)."""
    for i, p in enumerate(_sys.path):
        try:
            same = isinstance(p, str) and _os.path.normcase(_os.path.abspath(p or ".")) == here
        except Exception:
            same = False
        if same:
            del _sys.path[i]
            return


def _dlltrace_import_system():
    """PathFinder.find_spec and module_from_spec: CPython has its import system loaded (frozen) at
    start-up; the importlib package (not loaded at start-up) only where it is not."""
    boot, ext = _sys.modules.get("_frozen_importlib"), _sys.modules.get("_frozen_importlib_external")
    if boot is not None and ext is not None:
        return ext.PathFinder.find_spec, boot.module_from_spec
    import importlib.machinery
    import importlib.util
    return importlib.machinery.PathFinder.find_spec, importlib.util.module_from_spec


def _dlltrace_chain(here):
    """Run the sitecustomize this one shadows, as the `sitecustomize` module."""
    rest = [p for p in _sys.path if not (isinstance(p, str) and _os.path.normcase(_os.path.abspath(p or ".")) == here)]
    if _sys.version_info < (3, 4):  # (no PathFinder.find_spec: imp, which registers the module itself)
        imp = __import__("imp")  # (gone from Python 3.12: only reached before 3.4)
        try:
            found = imp.find_module("sitecustomize", rest)
        except ImportError:
            return
        try:
            imp.load_module("sitecustomize", found[0], found[1], found[2])
        finally:
            if found[0] is not None:
                found[0].close()
        return
    find_spec, module_from_spec = _dlltrace_import_system()
    spec = find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = module_from_spec(spec)
    _sys.modules["sitecustomize"] = module  # (the import of this file returns it: it replaces this one)
    spec.loader.exec_module(module)


def _dlltrace_boot():
    try:
        here = _dlltrace_here()
        _dlltrace_unlist(here)
    except Exception as e:
        _sys.stderr.write("dlltrace: bootstrap failed: %s\n" % (e,))
        return
    before = set(_sys.modules)
    try:
        _dlltrace_trace(here)
    except Exception as e:  # never stop the traced program
        _sys.stderr.write("dlltrace: bootstrap failed: %s\n" % (e,))
    _dlltrace_forget(before)
    _dlltrace_chain(here)  # (its errors are the program's own)


def _dlltrace_forget(before):
    """Take the modules tracing imported (ctypes or _cffi_backend, and theirs) out of sys.modules again:
    the binding keeps the objects it made, and the program's own `import ctypes` runs, and is recorded
    with the loads it makes, as without dlltrace. atexit stays (before 3.10 a second atexit module
    would replace the interpreter's exit callbacks with its own: the exit hook would be lost)."""
    for name in [m for m in _sys.modules if m not in before and m != "atexit"]:
        del _sys.modules[name]


_dlltrace_boot()
