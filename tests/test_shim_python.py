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

from dlltrace.trace import shim

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
                                         "dlltrace_env_snapshot", "dlltrace_stop"}
    # same parameter lists (modulo whitespace)
    norm = lambda s: {m.group(1): re.sub(r"\s+", " ", m.group(0).split("(", 1)[1]) for m in re.finditer(r"(dlltrace_\w+)\([^)]*\)", s)}
    assert norm(header) == norm(shim.CDEF)


def test_audit_hook_events_and_context():
    b = FakeBackend()
    hook = shim.make_audit_hook(b)
    # (under pytest-xdist this test runs inside the body of execnet's module `__channelexec__`, which the hook
    # rightly sees as a module being run, outermost; in a plain pytest run nothing is)
    below = ["__channelexec__"] if os.environ.get("PYTEST_XDIST_WORKER") else []
    hook("import", ("torch", None, [], [], []))
    here = {"file": __file__, "function": "test_audit_hook_events_and_context"}
    frame = b.events[-1][2].pop("frame")  # (the innermost frame of the user's code: this test's)
    assert {k: frame[k] for k in here} == here and isinstance(frame["line"], int)
    # (no module is being imported: this test is a function called by pytest)
    assert b.events[-1][1:] == ("py_import", {"module": "torch", "imports": below}) and b.context == b.events[-1][0]
    hook("ctypes.dlopen", ("C:\\x\\cudnn64_9.dll",))
    assert b.events[-1][2].pop("frame")["file"] == __file__
    assert b.events[-1][1:] == ("py_dlopen", {"name": "C:\\x\\cudnn64_9.dll", "mode": None, "imports": below})
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
        from dlltrace.trace import shim
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
        sys.path.insert(0, {str(tmp_path)!r})
        import outer
        import ctypes
        ctypes.CDLL(None)
        print(B.ctx)
    """)
    (tmp_path / "outer.py").write_text("import colorsys\n")  # (a module whose body imports another)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events = [json.loads(l) for l in out.read_text().splitlines()]
    assert events[0]["ev"] == "py_env" and events[0]["executable"] == sys.executable
    imports = {e["module"]: e["imports"] for e in events if e["ev"] == "py_import"}
    assert imports["outer"] == [] and imports["colorsys"] == ["outer"]  # the imports in progress, outermost first
    dl = [e for e in events if e["ev"] == "py_dlopen"]
    assert dl and int(r.stdout) == dl[-1]["seq"]  # the context is the last Python action
    assert dl[-1]["imports"] == [] and events[-1] == {"seq": events[-1]["seq"], "ev": "py_exit", "imports": []}


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


def test_exception_fields_name_the_module_the_path_and_the_causes():
    try:
        try:
            raise FileNotFoundError(2, "Could not find module", "C:\\x\\a.dll")
        except OSError as e:
            raise ImportError("DLL load failed while importing _ext", name="pkg._ext", path="C:\\x\\_ext.pyd") from e
    except ImportError as e:
        f = shim.exception_fields(e)
    assert {k: f[k] for k in ("type", "message", "module", "path", "winerror")} == {
        "type": "ImportError", "message": "DLL load failed while importing _ext", "module": "pkg._ext",
        "path": "C:\\x\\_ext.pyd", "winerror": None}
    assert f["causes"] == [{"type": "FileNotFoundError", "message": "[Errno 2] Could not find module: 'C:\\\\x\\\\a.dll'",
                            "module": None, "path": "C:\\x\\a.dll", "winerror": None}]

    class Odd(Exception):
        def __str__(self):
            raise RuntimeError("no text")
    odd = shim.exception_fields(Odd())
    assert odd["type"].endswith("Odd") and odd["message"] == "" and odd["causes"] == []
    assert len(shim.exception_fields(ValueError("x" * 10000))["message"]) == shim.MESSAGE_LIMIT
    json.dumps(f)


def test_named_files_are_the_absolute_native_paths_of_the_messages(tmp_path):
    """The native files an ending exception's messages name by an absolute path, each with whether it is there and its
    size (xgboost 2.1.3's XGBoostLibraryNotFound, lightgbm 4.5.0's list, ctypes' Windows and Linux messages), each
    once, relative names and other extensions left out."""
    here = tmp_path / "lib_x.so"
    here.write_bytes(b"1234")
    xgb = ("Cannot find XGBoost Library in the candidate path.  List of candidates:\n"
           "- C:\\py\\Lib\\site-packages\\xgboost\\lib\\xgboost.dll\n"
           "- C:\\py\\Lib\\site-packages\\xgboost\\..\\..\\lib\\xgboost.dll\n"
           "XGBoost Python package path: C:\\py\\Lib\\site-packages\\xgboost\nsys.base_prefix: C:\\py")
    lgb = f"Cannot find lightgbm library file in following paths:\n{here}\n/nonesuch/lightgbm/lib_lightgbm.so"
    got = shim.named_files([xgb, lgb, "Could not find module 'C:\\Program Files\\a b\\x.DLL' (or one of its "
                            "dependencies)", "OSError: /usr/lib/libfoo.so.1.2: cannot open shared object file",
                            "dlopen(/opt/x/libbar.dylib, 6): image not found", "relative foo.dll, x.so. or C:\\y.txt",
                            "again C:\\py\\Lib\\site-packages\\xgboost\\lib\\xgboost.dll", None])
    assert got == [
        {"path": "C:\\py\\Lib\\site-packages\\xgboost\\lib\\xgboost.dll", "exists": False, "size": None},
        {"path": "C:\\py\\Lib\\site-packages\\xgboost\\..\\..\\lib\\xgboost.dll", "exists": False, "size": None},
        {"path": str(here), "exists": True, "size": 4},
        {"path": "/nonesuch/lightgbm/lib_lightgbm.so", "exists": False, "size": None},
        {"path": "C:\\Program Files\\a b\\x.DLL", "exists": False, "size": None},
        {"path": "/usr/lib/libfoo.so.1.2", "exists": False, "size": None},
        {"path": "/opt/x/libbar.dylib", "exists": False, "size": None}], got
    many = " ".join(f"/x/l{i}.so" for i in range(40))
    assert len(shim.named_files([many])) == shim.NAMED_FILES_LIMIT
    try:
        raise RuntimeError(lgb)
    except RuntimeError as e:
        assert shim.exception_fields(e)["files"][0] == {"path": str(here), "exists": True, "size": 4}


def test_named_files_with_spaces_a_unc_path_and_many_names(tmp_path):
    """A venv in a folder whose name has a space, on Linux: xgboost's list ("- " before each path) and lightgbm's
    (a path a line) name the whole path, and the file that is there is seen there; a Windows UNC path; two paths on
    one line each their own; and a message of the most characters kept (4000) full of names is looked at in a
    fraction of a second (each name used to walk back to the message's start: 1.4 s for five of them)."""
    import time

    folder = tmp_path / "My Projects" / "lightgbm" / "lib"
    folder.mkdir(parents=True)
    (folder / "lib_lightgbm.so").write_bytes(b"12")
    here = str(folder / "lib_lightgbm.so")
    xgb = ("Cannot find XGBoost Library in the candidate path.  List of candidates:\n"
           "- /home/u/My Projects/venv/lib/python3.11/site-packages/xgboost/lib/libxgboost.so\n"
           "XGBoost Python package path: /home/u/My Projects/venv/lib/python3.11/site-packages/xgboost")
    lgb = f"Cannot find lightgbm library file in following paths:\n{here}"
    got = shim.named_files([xgb, lgb, "Cannot find \\\\server\\share\\My Env\\xgboost\\lib\\xgboost.dll",
                            "neither /a/b.so or /c/d.so", "/a/x.so: undefined symbol: f, needed by /b/y.so"])
    assert got == [
        {"path": "/home/u/My Projects/venv/lib/python3.11/site-packages/xgboost/lib/libxgboost.so", "exists": False,
         "size": None},
        {"path": here, "exists": True, "size": 2},
        {"path": "\\\\server\\share\\My Env\\xgboost\\lib\\xgboost.dll", "exists": False, "size": None},
        {"path": "/a/b.so", "exists": False, "size": None},
        {"path": "/c/d.so", "exists": False, "size": None},
        {"path": "/a/x.so", "exists": False, "size": None},
        {"path": "/b/y.so", "exists": False, "size": None}], got
    full = [("x.so " * 1000)[:4000], ("a.dll a.pyd a.so a.dylib " * 400)[:4000]] * 3
    t = time.perf_counter()
    assert shim.named_files(full) == []
    assert time.perf_counter() - t < 0.4


PROGRAM = """
import sys
print("working")
sys.stdout.flush()
mode = sys.argv[1]
if mode == "raise":
    try:
        raise OSError(22, "[WinError 126] Error loading \\"C:\\\\torch\\\\lib\\\\c10.dll\\" or one of its dependencies.")
    except OSError as e:
        raise ImportError("torch needs c10.dll", name="torch") from e
elif mode == "exit":
    sys.exit(3)
"""

WRAPPER = """
import json, os, sys
if os.environ.get("DLLTRACE_TEST_INSTALL"):
    sys.path.insert(0, {tracer!r})
    from dlltrace.trace import shim
    class B:
        n = 0
        def write_event(self, ev, fields):
            B.n += 1
            with open({out!r}, "a") as f:
                f.write(json.dumps({{"seq": B.n, "ev": ev, **fields}}) + "\\n")
            return B.n
        def set_context(self, seq):
            pass
    shim.install(B())
sys.path.insert(0, {here!r})
import prog
"""


@pytest.mark.parametrize("mode, code", [("raise", 1), ("exit", 3), ("ok", 0)])
def test_the_exit_hook_records_the_exception_and_changes_nothing(tmp_path, mode, code):
    """The bootstrap's exit hook in a real child Python: the program's output and exit code are the
    same with and without it; a py_exception event is written only when it ends on an exception."""
    out = tmp_path / "events.jsonl"
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "wrapper.py").write_text(WRAPPER.format(tracer=str(ROOT / "tracer"), out=str(out), here=str(tmp_path)))

    def run(install: bool):
        env = {k: v for k, v in os.environ.items() if k != "DLLTRACE_TEST_INSTALL"}
        if install:
            env["DLLTRACE_TEST_INSTALL"] = "1"
        r = subprocess.run([sys.executable, str(tmp_path / "wrapper.py"), mode], capture_output=True, text=True,
                           timeout=60, env=env)
        return r.returncode, r.stdout, r.stderr

    plain, traced = run(False), run(True)
    assert traced == plain and plain[0] == code and plain[1] == "working\n"
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert events[0]["ev"] == "py_env"
    exc = [e for e in events if e["ev"] == "py_exception"]
    # py_exit last: the imports the program ended in (prog's body raised: prog's import; none for a normal end)
    assert events[-1]["ev"] == "py_exit" and events[-1]["imports"] == (["prog"] if mode == "raise" else [])
    if mode != "raise":
        assert exc == []
        return
    assert "ImportError: torch needs c10.dll" in plain[2]
    (e,) = exc
    assert (e["type"], e["message"], e["module"], e["path"]) == ("ImportError", "torch needs c10.dll", "torch", None)
    (cause,) = e["causes"]
    assert cause["type"] == "OSError" and "c10.dll" in cause["message"]
    # the event is what the trace schema describes
    import jsonschema

    from dlltrace.tracecheck import SCHEMA_PATH

    jsonschema.validate({**e, "pid": 1, "tid": 1, "t": 1}, json.loads(SCHEMA_PATH.read_text()))


def test_a_standard_library_frame_is_not_the_users_code_even_from_a_zip():
    """The embeddable distribution's standard library is in python311.zip and its code objects name files
    relative to it ("ctypes\\__init__.py"): its frames are the library's by their module's __file__ or name,
    so "in your code" is the user's line, not ctypes' (seen under Wine with torch's retry)."""
    sep = os.sep
    assert shim.library_module({"__file__": f"C:{sep}py{sep}python311.zip{sep}ctypes{sep}__init__.pyc",
                                "__name__": "ctypes"})
    assert shim.library_module({"__name__": "ctypes"}) == (sys.version_info >= (3, 10))
    assert not shim.library_module({"__name__": "__main__", "__file__": str(Path("app.py").resolve())})
    assert not shim.library_module({"__name__": "myproject.train"})
    ns: dict = {"__name__": "ctypes", "__file__": f"C:{sep}py{sep}python311.zip{sep}ctypes{sep}__init__.pyc",
                "user_frame": shim.user_frame}
    exec(compile("def call():\n    return user_frame(1)\n", "ctypes\\__init__.py", "exec"), ns)
    here = ns["call"]()  # (the innermost frame is "ctypes" of the zip: skipped; then this test's)
    assert here is not None and here["file"] == __file__ and here["function"].startswith("test_a_standard"), here


def test_installed_dists_lists_each_distributions_native_files_from_its_record(tmp_path, monkeypatch):
    """py_dists: the *.dist-info of a site folder with the DLLs, extensions and shared objects its RECORD
    lists (other files left out), and a conda prefix's conda-meta packages, read without the json module."""
    site = tmp_path / "Lib" / "site-packages"
    (site / "pywin32-306.dist-info").mkdir(parents=True)
    (site / "pywin32-306.dist-info" / "RECORD").write_text(
        "pywin32_system32/pywintypes311.dll,sha256=x,134656\nwin32/win32api.pyd,sha256=y,1\n"
        "win32/lib/pywintypes.py,sha256=z,5938\n\"numpy.libs/libopenblas.so.0\",,\n")
    (site / "pywin32-306.dist-info" / "WHEEL").write_text(  # (its tags: the machine its files are for)
        "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.41.2)\nRoot-Is-Purelib: false\nTag: cp311-cp311-win_amd64\n")
    (site / "broken-1.0.dist-info").mkdir()  # (no RECORD: listed with no files)
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "libcudnn-9.1-0.json").write_text('{"name": "cudnn", "version": "9.1.0", "files": '
                                              '["Library\\\\bin\\\\cudnn64_9.dll", "info\\\\about.json"]}')
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    got = shim.installed_dists([str(site), str(site), str(tmp_path / "elsewhere")])
    assert got["dists"] == [
        {"name": "broken", "version": "1.0", "site": str(site), "files": [], "sizes": [], "loaders": []},
        {"name": "pywin32", "version": "306", "site": str(site),
         "files": ["pywin32_system32/pywintypes311.dll", "win32/win32api.pyd", "numpy.libs/libopenblas.so.0"],
         "sizes": [134656, 1, None],  # (RECORD's third column, one a file; none given: null)
         "loaders": [], "tags": ["cp311-cp311-win_amd64"]}]
    assert got["conda"] == [{"name": "cudnn", "version": "9.1.0", "files": ["Library\\bin\\cudnn64_9.dll"]}]
    assert got["conda_prefix"] == str(tmp_path) and got["cut"] is False


def test_record_candidates_are_every_line_a_native_or_build_facts_file_can_be_on(tmp_path):
    """installed_dists splits and decodes only the RECORD lines with a native suffix (or an existing build-facts
    file's name) in them, lower-cased: it lists what reading the file as text and looking at every line lists, in
    order, whatever the case of the suffix, the quoting, the line ends (\\n, \\r\\n, \\r), non-ASCII names and bytes
    that are not UTF-8."""
    text = ("a/__init__.py,sha256=x,1\nA/B.PYD,sha256=y,2\n\"numpy.libs/libopenblas.so.0\",,\n"
            "x/Lib.Dll,sha256=z,3\ntorch/version.py,sha256=v,4\nrun.exe,,\nso/notes.txt,,\nfoo.sources,,\n"
            "İstanbul/libç.SO.2,,\nbad\udcff/x.so,,\nlast.so")
    for nl in ("\n", "\r\n", "\r"):
        record = text.replace("\n", nl).encode("utf-8", "surrogateescape")
        (tmp_path / "RECORD").write_bytes(record)
        with open(tmp_path / "RECORD", encoding="utf-8", errors="replace") as f:  # (as installed_dists read it before)
            want = [p for p in (line.split(",", 1)[0].strip().strip('"') for line in f) if shim._native(p)]
        assert want == ["A/B.PYD", "numpy.libs/libopenblas.so.0", "x/Lib.Dll", "run.exe", "İstanbul/libç.SO.2",
                        "bad\ufffd/x.so", "last.so"]
        assert [p for p in shim.record_candidates(record) if shim._native(p)] == want
        # (with RECORD's sizes: the third column, a number, else None)
        assert [r for r in shim.record_rows(record) if shim._native(r[0])] == [
            ("A/B.PYD", 2), ("numpy.libs/libopenblas.so.0", None), ("x/Lib.Dll", 3), ("run.exe", None),
            ("İstanbul/libç.SO.2", None), ("bad\ufffd/x.so", None), ("last.so", None)]
        assert shim.record_rows(b"a.dll,sha256=q, 7 \nb.dll,,-3\nc.dll,sha256=r,1e3\nd.dll,sha256=s,\xd9\xa3\ne.dll") == [
            ("a.dll", 7), ("b.dll", None), ("c.dll", None), ("d.dll", None), ("e.dll", None)]  # (\xd9\xa3: an Arabic 3)
        marks = shim._NATIVE_MARKS + (b"torch/version.py",)
        assert "torch/version.py" in shim.record_candidates(record, marks)
    site = tmp_path / "site-packages"  # (and installed_dists, from a file with Windows line ends)
    (site / "t-1.dist-info").mkdir(parents=True)
    (site / "t-1.dist-info" / "RECORD").write_bytes(text.replace("\n", "\r\n").encode("utf-8", "surrogateescape"))
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("cuda = '12.4'\n")
    (d,) = shim.installed_dists([str(site)])["dists"]
    assert d["files"] == want and d["texts"] == {"torch/version.py": "cuda = '12.4'\n"}


def test_package_loaders_read_delvewheels_patch_from_the_packages_own_init(tmp_path):
    """numpy's __init__.py (delvewheel's patch) adds <site>/numpy.libs to the DLL search when numpy is imported:
    read from the file itself, for the packages the distribution's RECORD has files in."""
    site = tmp_path / "site-packages"
    (site / "numpy").mkdir(parents=True)
    (site / "numpy" / "__init__.py").write_text(
        "# start delvewheel patch\ndef _delvewheel_patch_1_8_3():\n    import os\n    if os.path.isdir(libs_dir := "
        "os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, 'numpy.libs'))):\n"
        "        os.add_dll_directory(libs_dir)\n_delvewheel_patch_1_8_3()\n")
    (site / "plain").mkdir()
    (site / "plain" / "__init__.py").write_text("import os\n")
    files = ["numpy/_core/_multiarray_umath.cp311-win_amd64.pyd", "numpy.libs/libscipy_openblas.dll", "plain/x.pyd"]
    assert shim.package_loaders(str(site), files) == [{"package": "numpy", "adds": ["numpy.libs"], "how": "delvewheel"}]


def test_package_loaders_read_delvewheels_older_init_patch(tmp_path):
    """delvewheel < 1.0 names its patch `_delvewheel_init_patch_<version>` (pyzmq 25.1.2's zmq/__init__.py, the real
    text's shape): it adds <site>/pyzmq.libs as the newer patch does, and the replay must know it (the field test:
    ctypes.CDLL of zmq's context.pyd was offered no `import zmq` first, nor os.add_dll_directory)."""
    site = tmp_path / "site-packages"
    (site / "zmq").mkdir(parents=True)
    (site / "zmq" / "__init__.py").write_text(
        "# start delvewheel patch\ndef _delvewheel_init_patch_0_0_22():\n    import os\n    import sys\n"
        "    libs_dir = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, 'pyzmq.libs'))\n"
        "    if sys.version_info[:2] >= (3, 8):\n        os.add_dll_directory(libs_dir)\n\n\n"
        "_delvewheel_init_patch_0_0_22()\n")
    files = ["zmq/backend/cython/context.cp311-win_amd64.pyd", "pyzmq.libs/libzmq-v141-mt-4_3_4-0a6f51ca.dll"]
    assert shim.package_loaders(str(site), files) == [{"package": "zmq", "adds": ["pyzmq.libs"], "how": "delvewheel"}]


def test_frame_and_imports_is_user_frame_and_module_stack_in_one_walk(tmp_path, monkeypatch):
    """The audit hook's one walk up the stack (each frame's f_code is an audit event of its own) gives what
    user_frame and module_stack give, inside nested imports (a library's module importing the user's, which
    asks) and outside any."""
    site = tmp_path / "site-packages"
    (site / "libpkg").mkdir(parents=True)
    (site / "libpkg" / "__init__.py").write_text("import userpkg_inner\n")
    (tmp_path / "userpkg_inner.py").write_text(
        "import sys\nfrom dlltrace.trace import shim\nf = sys._getframe()\n"
        "GOT = (shim.frame_and_imports(f), (shim.user_frame(1), shim.module_stack(f)))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(site))
    shim._LIBRARY_FILES.clear()
    import libpkg  # noqa: F401
    got, want = sys.modules["userpkg_inner"].GOT
    for m in ("libpkg", "userpkg_inner"):
        sys.modules.pop(m, None)
    shim._LIBRARY_FILES.clear()
    assert got == want
    assert want[1][-2:] == ["libpkg", "userpkg_inner"] and want[0]["file"].endswith("userpkg_inner.py")
    f = sys._getframe()
    assert shim.frame_and_imports(f) == (shim.user_frame(1), shim.module_stack(f))


def test_named_files_by_a_base_name_beside_their_module(tmp_path, monkeypatch):
    """pycryptodome 3.21.0 checks for its own file before loading it (Crypto/Util/_raw_api.py: os.path.isfile) and
    ends on "Cannot load native module 'Crypto.Cipher._raw_aes': Not found '_raw_aes.cp311-win_amd64.pyd', Not found
    '_raw_aes.pyd'": base names only. They are the files of that module, in its package's folder (sys.modules'
    Crypto.Cipher): named there, with whether each is there. A module whose package is not imported, a name that is
    not the module's, an unquoted one: none."""
    import types

    folder = tmp_path / "Crypto" / "Cipher"
    folder.mkdir(parents=True)
    (folder / "_raw_des.pyd").write_bytes(b"123")
    pkg = types.ModuleType("Crypto.Cipher")
    pkg.__path__ = [str(folder)]
    monkeypatch.setitem(sys.modules, "Crypto.Cipher", pkg)
    aes = ("Cannot load native module 'Crypto.Cipher._raw_aes': Not found '_raw_aes.cp311-win_amd64.pyd', "
           "Not found '_raw_aes.pyd'")
    des = "Cannot load native module 'Crypto.Cipher._raw_des': Cannot load '_raw_des.pyd': [WinError 193]"
    got = shim.named_files([aes, des, "Cannot load native module 'Nope.Cipher._raw_aes': Not found '_raw_aes.pyd'",
                            "module 'Crypto.Cipher._raw_aes': Not found '_raw_des.pyd', _raw_aes.pyd"])
    assert got == [
        {"path": str(folder / "_raw_aes.cp311-win_amd64.pyd"), "exists": False, "size": None},
        {"path": str(folder / "_raw_aes.pyd"), "exists": False, "size": None},
        {"path": str(folder / "_raw_des.pyd"), "exists": True, "size": 3}], got


def test_named_files_by_a_base_name_a_record_lists(tmp_path):
    """pywin32 306's pywintypes.__import_pywin32_system_module__ ends on "No system module 'pythoncom'
    (pythoncom311.dll)" when pywin32_system32\\pythoncom311.dll is gone (it looks for it on sys.path with
    os.path.isfile; seen under Wine): a base name alone, no module beside it. The files installed_dists' RECORDs list
    by that name are named, with whether each is there (shim._record_files); a name no RECORD lists, or a word that
    only begins with one, is not."""
    site = tmp_path / "Lib" / "site-packages"
    (site / "pywin32-306.dist-info").mkdir(parents=True)
    (site / "pywin32-306.dist-info" / "RECORD").write_text(
        "pywin32_system32/pythoncom311.dll,sha256=x,1\npywin32_system32/pywintypes311.dll,sha256=y,3\n")
    (site / "pywin32_system32").mkdir()
    (site / "pywin32_system32" / "pywintypes311.dll").write_bytes(b"123")
    shim.installed_dists([str(site)])
    got = shim.named_files(["No system module 'pythoncom' (pythoncom311.dll)", "No system module 'pywintypes' "
                            "(pywintypes311.dll); other.dll, pythoncom311.dllx"])
    assert got == [
        {"path": str(site / "pywin32_system32" / "pythoncom311.dll"), "exists": False, "size": None},
        {"path": str(site / "pywin32_system32" / "pywintypes311.dll"), "exists": True, "size": 3}], got
    shim.installed_dists([str(tmp_path / "none")])  # (each py_dists anew: no name of an earlier one)
    assert shim.named_files(["No system module 'pythoncom' (pythoncom311.dll)"]) == []
