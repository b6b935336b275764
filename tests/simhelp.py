"""Small builders for simulator tests: a scenario from keyword arguments."""

from __future__ import annotations

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
