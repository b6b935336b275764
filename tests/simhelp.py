"""Small builders for simulator tests: a scenario from keyword arguments."""

from __future__ import annotations

from pathlib import Path

from dlltrace import winpath
from dlltrace.diagnosis.scenario import scenario_from_dict

APP = "C:\\app\\host.exe"


def scenario(files=(), calls=(), system=None, folders=(), **process):
    process.setdefault("exe", APP)
    d = {"process": process, "file": [f if isinstance(f, dict) else {"path": f} for f in files],
         "call": list(calls), "folders": list(folders)}
    if system:
        d["system"] = system
    return scenario_from_dict(d, "<test>")


def run(files=(), calls=(), **kw):
    return scenario(files, calls, **kw).run()


def load(name, flags=0, files=(), pre=(), **kw):
    """Run the calls in `pre`, then LoadLibraryExW(name, flags); return that load's result."""
    res = run(files, [*pre, {"op": "LoadLibraryExW", "name": name, "flags": flags}], **kw)
    return res[-1]


def folders_probed(result, name):
    """The folders probed for file `name`, in order."""
    return [winpath.dirname(p) for p in result.probes if winpath.same(winpath.basename(p), name)]


def handwritten():
    """fixtures/traces/handwritten.py, the module (its Writer makes a Windows trace by hand, as the shim would)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "handwritten", Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "handwritten.py")
    hw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hw)
    return hw


def python_writer(hw, command: str, py: str = "C:\\Python311"):
    """A Writer of a python.org CPython 3.11 at `py` running `python -c COMMAND` (py_env written): (writer, site)."""
    site = py + "\\Lib\\site-packages"
    w = hw.Writer(py + "\\python.exe", "C:\\work", [py, hw.SYS32], [hw.SYS32 + "\\kernel32.dll", py + "\\python311.dll"],
                  [py + "\\python.exe", "-c", command])
    w.py_env("3.11.9", py, site)
    return w, site


def failed_call(path: Path, capsys) -> dict:
    """The one failed call of `dlltrace report --json PATH` (a handwritten trace's), as the JSON has it."""
    import json

    from dlltrace import cli

    cli.main(["report", "--json", str(path)])
    d = json.loads(capsys.readouterr().out)
    (call,) = [c for c in d["calls"] if c["index"] in d["failed"]]
    return call
