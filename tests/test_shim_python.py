"""The Python side of the shim, on Linux: the cffi cdef, the audit hook through a fake backend,
the py_env snapshot, and the bootstrap's sitecustomize chaining."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlltrace import shim

ROOT = Path(__file__).resolve().parent.parent


class FakeBackend:
    def __init__(self):
        self.events, self.context, self.seq = [], None, 100

    def write_event(self, ev, fields):
        self.seq += 1
        self.events.append((self.seq, ev, json.loads("{" + shim.fields_json(fields) + "}")))
        return self.seq

    def set_context(self, seq):
        self.context = seq


def test_cdef_parses_and_matches_the_c_header():
    # make_ffi declares every function of the header: a declared name missing from a library says
    # "not found in library" (an undeclared one is a bare AttributeError)
    lib = shim.make_ffi().dlopen(None)
    for name in re.findall(r"\b(dlltrace_\w+)\(", shim.CDEF):
        with pytest.raises(AttributeError, match="not found in library"):
            getattr(lib, name)
    header = (ROOT / "native/shim/dlltrace_shim.h").read_text()
    c_funcs = set(re.findall(r"DLLTRACE_API [^;(]*?\b(dlltrace_\w+)\(", header))
    cdef_funcs = set(re.findall(r"\b(dlltrace_\w+)\(", shim.CDEF))
    assert c_funcs == cdef_funcs == {"dlltrace_start", "dlltrace_write_event", "dlltrace_set_context", "dlltrace_version",
                                         "dlltrace_env_snapshot"}
    # same parameter lists (modulo whitespace)
    norm = lambda s: {m.group(1): re.sub(r"\s+", " ", m.group(0).split("(", 1)[1]) for m in re.finditer(r"(dlltrace_\w+)\([^)]*\)", s)}
    assert norm(header) == norm(shim.CDEF)


def test_audit_hook_events_and_context():
    b = FakeBackend()
    hook = shim.make_audit_hook(b)
    hook("import", ("torch", None, [], [], []))
    assert b.events[-1][1:] == ("py_import", {"module": "torch"}) and b.context == b.events[-1][0]
    hook("ctypes.dlopen", ("C:\\x\\cudnn64_9.dll",))
    assert b.events[-1][1:] == ("py_dlopen", {"name": "C:\\x\\cudnn64_9.dll", "mode": None})
    hook("os.add_dll_directory", (Path("/opt/用户"),))
    assert b.events[-1][1:] == ("py_add_dll_directory", {"path": "/opt/用户"}) and b.context == b.events[-1][0]
    n = len(b.events)
    hook("open", ("x", "r", 0))  # other audit events are ignored
    assert len(b.events) == n


def test_audit_hook_never_raises_into_the_program():
    class Broken(FakeBackend):
        def write_event(self, ev, fields):
            raise OSError("disk full")
    shim.make_audit_hook(Broken())("import", ("x",))  # no exception


def test_python_env_fields():
    f = shim.python_env_fields({"CONDA_PREFIX": "C:\\conda\\envs\\x"})
    assert f["version"] == sys.version.split()[0] and f["executable"] == sys.executable
    assert f["prefix"] == sys.prefix and f["base_prefix"] == sys.base_prefix
    assert f["conda"] is True and f["conda_prefix"] == "C:\\conda\\envs\\x"
    assert shim.python_env_fields({})["conda_prefix"] is None
    json.dumps(f)


def test_installed_hook_sees_real_imports_and_dlopen(tmp_path):
    """In a child Python (audit hooks cannot be removed): install() with a backend writing JSON lines."""
    out = tmp_path / "events.jsonl"
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / 'tracer')!r})
        from dlltrace import shim
        class B:
            n = 0
            def write_event(self, ev, fields):
                B.n += 1
                with open({str(out)!r}, "a") as f:
                    f.write(json.dumps({{"seq": B.n, "ev": ev, **fields}}) + "\\n")
                return B.n
            def set_context(self, seq):
                B.ctx = seq
        shim.install(B())
        import colorsys
        import ctypes
        ctypes.CDLL(None)
        print(B.ctx)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events = [json.loads(l) for l in out.read_text().splitlines()]
    assert events[0]["ev"] == "py_env" and events[0]["executable"] == sys.executable
    assert {"ev": "py_import", "module": "colorsys"} in [{k: e[k] for k in ("ev", "module")} for e in events if e["ev"] == "py_import"]
    dl = [e for e in events if e["ev"] == "py_dlopen"]
    assert dl and int(r.stdout) == dl[-1]["seq"]  # the context is the last Python action


def test_bootstrap_is_a_noop_off_windows_and_chains_sitecustomize(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = '1'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tracer/dlltrace/bootstrap"), str(other)]),
               DLLTRACE_TRACE=str(tmp_path / "t.jsonl"))
    r = subprocess.run([sys.executable, "-c", "import os, sys; print(os.environ.get('CHAINED'), 'dlltrace' in sys.modules)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["1", "False"], r.stderr
    assert r.stderr == "" and not (tmp_path / "t.jsonl").exists()
