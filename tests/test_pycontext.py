"""trace/pycontext.py: the Python action a load made by native code ran in, from the imports in progress at
the thread's event before it and at its next one (rule_live_context)."""

from __future__ import annotations

from dlltrace.trace.pycontext import (PyContexts, extension_of, rule_live_context,
                                      rule_users_import_without_a_module_frame)

FRAME = {"file": "app.py", "line": 1, "function": "<module>"}


def imp(seq, module, imports, tid=1, frame=FRAME):
    return {"ev": "py_import", "pid": 9, "tid": tid, "seq": seq, "t": seq, "module": module, "imports": imports,
            "frame": frame}


def test_rule_live_context():
    # TensorFlow: the last import of `import tensorflow`, then the program's next top-level statement
    last = imp(10, "keras.wrappers", ["tensorflow", "keras"])
    later = imp(20, "json", [], frame={"file": "app.py", "line": 3, "function": "<module>"})
    after = rule_live_context(last, later)
    assert after["ev"] == "py_after" and after["after"] == "tensorflow" and after["frame"] is None
    # a normal end (py_exit with no import in progress): the same, and at the same place its frame is known
    end = {"ev": "py_exit", "pid": 9, "tid": 1, "seq": 30, "t": 30, "imports": []}
    assert rule_live_context(last, end)["ev"] == "py_after"
    assert rule_live_context(last, {**later, "frame": FRAME})["frame"] == FRAME
    # the next event is still inside `import tensorflow`, and no longer in keras: the load was made in
    # `import tensorflow` (the innermost import in progress at both events), not in keras.wrappers, finished
    inner = imp(11, "tensorflow.eager", ["tensorflow", "tensorflow.python"])
    made = rule_live_context(last, inner)
    assert (made["ev"], made["module"], made["imports"], made["frame"]) == ("py_import", "tensorflow", [], FRAME)
    # ... and while keras.wrappers itself was still being imported: ctx kept
    assert rule_live_context(last, imp(12, "six", ["tensorflow", "keras", "keras.wrappers"])) is last
    # the program ended on an exception raised in `import tensorflow`: the load was that import's (pyvips: cffi's
    # ffi.dlopen in `import pyvips` after its pycparser imports had finished)
    raised = {**end, "imports": ["tensorflow", "tensorflow.python"]}
    assert rule_live_context(last, raised)["module"] == "tensorflow"
    parsed = imp(40, "pycparser.ast_transforms", ["pyvips", "pyvips.base", "cffi.api", "pycparser"])
    assert rule_live_context(parsed, {**end, "imports": ["pyvips"]})["module"] == "pyvips"
    # a top-level ctypes call, and a trace without `imports`: kept
    dl = {"ev": "py_dlopen", "pid": 9, "tid": 1, "seq": 12, "t": 12, "name": "x.so", "imports": []}
    assert rule_live_context(dl, end) is dl
    old = {k: v for k, v in last.items() if k != "imports"}
    assert rule_live_context(old, end) is old and rule_live_context(last, None) is last


def test_rule_live_context_an_extension_loading_while_it_initialises_is_its_import():
    ext = imp(5, "dltext_dl", [])
    end = {"ev": "py_exit", "pid": 9, "tid": 1, "seq": 6, "t": 6, "imports": []}
    assert rule_live_context(ext, end, "/tmp/dltext_dl.cpython-311-x86_64-linux-gnu.so") is ext
    assert rule_live_context(ext, end, "/usr/lib/libtensorflow_framework.so.2")["ev"] == "py_after"
    # the extension's own load (ImportError: a library it needs is missing; the program's end holds no import)
    assert rule_live_context(ext, end, "/usr/bin/python3.11", "/tmp/dltext_dl.cpython-311-x86_64-linux-gnu.so") is ext
    assert extension_of("torch._C", "C:\\venv\\Lib\\site-packages\\torch\\_C.cp311-win_amd64.pyd")
    assert not extension_of("torch._C", "C:\\venv\\Lib\\site-packages\\torch\\lib\\c10.dll")


def test_rule_users_import_without_a_module_frame():
    """PyGObject (Debian 12's python3-gi 3.42.2, a real trace): `from gi.repository import PackageKitGlib` at line 3
    is a module gi.importer makes with no module code, so the imports in progress inside it start with
    gi.overrides.GLib (imported by importlib.import_module: no audit event names it). The typelib's library,
    missing, is dlopened at line 5 (PackageKitGlib.Client.new()): the report said 'the program's code after import
    gi.overrides.GLib', an import the user never wrote; it is the program's code after import
    gi.repository.PackageKitGlib."""
    line3 = {"file": "pk.py", "line": 3, "function": "<module>"}
    top = imp(113, "gi.repository.PackageKitGlib", [], frame=line3)
    locale = imp(130, "_locale", ["gi.overrides.GLib", "gi._option", "optparse", "locale"], frame=line3)
    end = {"ev": "py_exit", "pid": 9, "tid": 1, "seq": 220, "t": 220, "imports": []}
    after = rule_live_context(locale, end, top=top)
    assert (after["ev"], after["after"]) == ("py_after", "gi.repository.PackageKitGlib"), after
    assert rule_live_context(locale, end)["after"] == "gi.overrides.GLib"  # (without the user's import: as before)
    # a load inside the import (the next event is still in gi.overrides.GLib, or made at line 3 in another override
    # gi imported): that import's, the user's import first among those in progress
    inside = imp(131, "gettext", ["gi.overrides.GLib", "gi._option"], frame=line3)
    made = rule_live_context(locale, inside, top=top)
    assert (made["ev"], made["module"], made["imports"]) == ("py_import", "gi._option",
                                                             ["gi.repository.PackageKitGlib", "gi.overrides.GLib"])
    other = imp(132, "gi.overrides.Gio", ["gi.overrides"], frame=line3)
    assert rule_live_context(locale, other, top=top)["module"] == "gi.repository.PackageKitGlib"
    ctx, later = rule_users_import_without_a_module_frame(locale, {**end, "imports": ["gi.overrides.GLib"]}, top)
    assert ctx["imports"][0] == "gi.repository.PackageKitGlib" and later == ["gi.repository.PackageKitGlib",
                                                                              "gi.overrides.GLib"]
    # not at the line of the user's import (an import a later line made with importlib.import_module), the stack
    # holding it already, or the user's import itself: as they are
    line7 = imp(140, "json.decoder", ["plugins.x", "json"], frame={"file": "pk.py", "line": 7, "function": "<module>"})
    assert rule_users_import_without_a_module_frame(line7, end, top) == (line7, [])
    nested = imp(114, "gi.types", ["gi.repository.PackageKitGlib", "gi.module"], frame=line3)
    assert rule_users_import_without_a_module_frame(nested, end, top)[0] is nested
    assert rule_users_import_without_a_module_frame(top, end, top)[0] is top
    # PyContexts hands each load its thread's last top-level import
    c = PyContexts([imp(1, "gi", []), top, locale, end])
    assert c.live(9, 130)["after"] == "gi.repository.PackageKitGlib"


def test_py_contexts_follow_each_thread_and_the_program_end():
    events = [imp(1, "tensorflow", []), imp(2, "tensorflow.python", ["tensorflow"]),
              imp(3, "worker_mod", [], tid=2), imp(4, "json", [], frame={"file": "app.py", "line": 2, "function": "f"}),
              {"ev": "py_exit", "pid": 9, "tid": 1, "seq": 5, "t": 5, "imports": []},
              {"ev": "py_import", "pid": "bad", "seq": {}, "tid": []}]  # (a damaged event: left out)
    c = PyContexts(events)
    # thread 1's next event after 2 is 4, a top-level import: `import tensorflow` had finished
    assert c.live(9, 2)["ev"] == "py_after" and c.live(9, 2)["after"] == "tensorflow"
    assert c.live(9, 3)["ev"] == "py_after"  # thread 2's only event: the program's end follows it
    assert c.live(9, 1) is events[0]  # (the next event on thread 1 is inside `import tensorflow`)
    assert c.live(9, 99) is None and c.live("bad", {}) is None


def test_a_fix_is_anchored_before_the_users_own_import():
    """A load made while the standard library imports _ssl for `import requests`: its fix goes before
    `import requests` (the user's own import, the outermost in progress), not `import _ssl`, which the user
    never wrote; torch's own loads under `import transformers` likewise."""
    from dlltrace.diagnosis.explain import _before
    from dlltrace.diagnosis.replay import user_import
    from dlltrace.model import CallResult

    ssl = {"ev": "py_import", "module": "_ssl", "imports": ["requests", "urllib3", "ssl"]}
    assert user_import(ssl) == "requests"
    assert user_import({"ev": "py_import", "module": "torch", "imports": []}) == "torch"
    assert user_import({"ev": "py_after", "after": "onnxruntime", "imports": []}) == ""
    assert user_import(None) == ""
    res = CallResult(0, "load", origin_kind="python_import", origin_module="_ssl", origin_top="requests")
    assert _before(res) == "import requests"
    assert _before(CallResult(0, "load", origin_kind="torch_retry", origin_top="transformers")) == "import transformers"
    assert _before(CallResult(0, "load", origin_kind="torch")) == "import torch"


def test_fault_as_exit():
    """A crash's py_fault stands for the py_exit the process never wrote: no import in progress when no frame of
    the import system is on the crashing stack, and the user's innermost frame is where it crashed."""
    from dlltrace.trace.faults import parse_fault
    from dlltrace.trace.pycontext import fault_as_exit, library_path

    text = ('Fatal Python error: Aborted\n\nCurrent thread 0x00007f5c8c8b3740 (most recent call first):\n'
            '  File "/v/lib/python3.11/site-packages/PySide6/__init__.py", line 9 in boot\n'
            '  File "/app/app.py", line 3 in <module>\n\nExtension modules: shiboken6.Shiboken (total: 1)\n')
    fields = parse_fault(text)
    assert fields == {"fault": "Fatal Python error: Aborted", "frames": [
        {"file": "/v/lib/python3.11/site-packages/PySide6/__init__.py", "line": 9, "function": "boot"},
        {"file": "/app/app.py", "line": 3, "function": "<module>"}]}
    assert parse_fault("") is None and parse_fault("\n\n") is None  # (no crash: the file stays empty)
    fault = {"ev": "py_fault", "pid": 9, "tid": 0, "seq": 0, "t": 0, **fields}
    ended = fault_as_exit(fault)
    assert ended["ev"] == "py_exit" and ended["imports"] == [] and ended["frame"]["line"] == 3
    importing = {**fault, "frames": [{"file": "<frozen importlib._bootstrap>", "line": 241, "function": "_call"}]}
    assert fault_as_exit(importing) is None  # (which import was in progress, a stack of files cannot say)
    # the crash ends the thread's story: a load after the last import is the program's code after it
    last = imp(10, "PySide6.QtCore", [])
    ctx = PyContexts([last, fault]).live(9, 10)
    assert ctx["ev"] == "py_after" and ctx["after"] == "PySide6.QtCore"
    assert PyContexts([last]).live(9, 10) is last  # (without the crash's stack: not known, ctx kept)
    assert library_path("C:\\Python311\\Lib\\ctypes\\__init__.py") and library_path("<frozen runpy>")
    assert library_path("/usr/lib/python3.11/json/decoder.py") and not library_path("/home/me/proj/lib/train.py")


def test_the_chain_never_loops():
    """An object already loaded is looked up again as a dependency of the plugin it dlopen()s: the chain walks up
    from the leaf to the call's file once (libqxcb.so -> libxcb-icccm.so.4, not 64 rounds of libQt6Core.so.6)."""
    from dlltrace.diagnosis.replay_linux import _chain
    from dlltrace.loader.linux.engine import DlopenResult, Lookup

    core, plugin = "/q/lib/libQt6Core.so.6", "/q/plugins/libqxcb.so"
    lookups = [Lookup(plugin, core, path=plugin, how="path"),
               Lookup("libQt6Core.so.6", plugin, path=core, how="already_loaded"),
               Lookup("libxcb-icccm.so.4", plugin, how="search", error="not found")]
    res = DlopenResult(plugin, 2, error="libxcb-icccm.so.4: cannot open", lookups=lookups, leaf="libxcb-icccm.so.4")
    assert _chain(res, lookups[-1]) == [plugin, "libxcb-icccm.so.4"]
