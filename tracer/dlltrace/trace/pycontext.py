"""Which Python action a load made by native code was really made in.

The shim sets a thread's context at each py_* event, and a load carries the last one (`ctx`). A load that
C code makes later (TensorFlow dlopen()ing libcuda.so.1 inside tf.config.list_physical_devices, onnxruntime
loading its CUDA provider inside InferenceSession) carries an import that finished long before. Each
py_import / py_dlopen event also holds the imports in progress when it was made (`imports`, outermost first;
a py_import's own module starts right after it), and py_exit those the program ended in. A load between a
thread's event E and its next event N:

- when N is made while the import E's outermost import belongs to is still in progress (N's imports start
  with it), the load was made in that import, in the innermost import in progress at both E and N: `ctx`
  when that is E's own (an extension module's import runs no Python code, so its end is never seen), else
  that import (an inner import E started had finished: cffi's pycparser before pyvips' ffi.dlopen);
- when it had finished (N is the program's next top-level import or statement, or py_exit after a normal
  end), the load was made by the program's own code after it: a `py_after` context (`after`: that import;
  `frame`: where the user's code made it, when N was made at the same place as E, else not known). A load
  in an import that finished is taken for one after it: the program's end after an exception keeps the
  imports it was raised in (py_exit's `imports`), so a load that failed an import stays that import's; and
  the load of an extension module being imported, and one it makes while it initialises (its own file is
  the caller), are its import's.

A module that a meta-path importer makes with no module code (PyGObject's `from gi.repository import Gtk`) has no
`<module>` frame, so it is missing from the imports in progress inside it: an event made at the line of the
user's last import whose imports lack it gets it put first (rule_users_import_without_a_module_frame).

A process that crashed never reaches py_exit: its py_fault (the crashing thread's Python stack, trace/faults.py)
stands for it. With no frame of the import system in that stack, no import was in progress when it crashed
(`imports` []), and its innermost frame of the user's code is where it was (fault_as_exit); with one, which
imports were in progress is not known, and `ctx` is kept.

A trace without `imports` (older ones, a Python without the bootstrap) keeps `ctx` as it is. This module
does no I/O: it is given events.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional


def _imports(e: dict) -> Optional[list[str]]:
    v = e.get("imports")
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else None


def in_progress(e: dict) -> Optional[list[str]]:
    """The imports in progress right after event e: its `imports`, and a py_import's own module."""
    held = _imports(e)
    if held is None:
        return None
    return held + [str(e.get("module"))] if e.get("ev") == "py_import" else held


def extension_of(module: str, caller: str) -> bool:
    """Whether `caller` (the file of the module that made a load) is the extension module `module` itself
    ("dltext_dl" and .../dltext_dl.cpython-311-x86_64-linux-gnu.so, "torch._C" and ...\\_C.cp311-win_amd64.pyd)."""
    base = caller.replace("\\", "/").rsplit("/", 1)[-1].lower()
    stem = module.rsplit(".", 1)[-1].lower()
    return bool(stem) and base.startswith(stem + ".") and base.endswith((".so", ".pyd", ".dll"))


def rule_users_import_without_a_module_frame(ctx: dict, following: Optional[dict], top: Optional[dict]
                                             ) -> "tuple[dict, Optional[list[str]]]":
    """`ctx` and the imports in progress at `following` (the thread's event before a load and its next), each with
    the user's own import put first where its stack lacks it. `top`: the thread's last import the user's code made
    (a py_import with no import in progress) at or before ctx. A module a meta-path importer makes with no module
    code (PyGObject's `from gi.repository import Gtk`: gi.importer builds an IntrospectionModule) has no `<module>`
    frame, so the imports in progress inside it start with what it imported in turn (gi.overrides.GLib, imported
    by importlib.import_module, which no audit event names): an event made at the very line of the user's import
    (the same frame) whose imports lack it was made inside it. Then `following`'s imports are too when they start
    as ctx's did, or it was made at that line. Else both as they are."""
    held = _imports(ctx)
    later = _imports(following) if following is not None else None
    module = top.get("module") if top is not None else None
    if (top is None or top.get("seq") == ctx.get("seq") or not isinstance(module, str) or not module or not held or module in held
            or top.get("frame") is None or ctx.get("frame") != top.get("frame")):
        return ctx, later
    if later and module not in later and (later[0] == held[0] or following is not None
                                          and following.get("frame") == top.get("frame")):
        later = [module] + later
    return {**ctx, "imports": [module] + held}, later


def rule_live_context(ctx: dict, following: Optional[dict], caller: str = "", name: str = "",
                      top: Optional[dict] = None) -> dict:
    """The context a load made after the thread's event `ctx` and before its next, `following`, ran in (the
    module docstring): `ctx` itself, or a py_after context. `caller`: the file of the module that made the
    load, `name`: the file it asked for; the load of an extension module being imported, and a library it
    loads while it initialises, are its import's. `top`: the thread's last import made by the user's code at or
    before ctx (rule_users_import_without_a_module_frame)."""
    ctx, later = rule_users_import_without_a_module_frame(ctx, following, top)
    held = in_progress(ctx)
    if held is None or later is None:
        return ctx
    module = str(ctx.get("module") or "")
    if ctx.get("ev") == "py_import" and any(x and extension_of(module, x) for x in (caller, name)):
        return ctx
    if not held:
        return ctx
    if later and later[0] == held[0]:
        # (the user's outermost import was still in progress at the thread's next event: the load was made in
        # it, in the innermost import in progress at both events; an inner import ctx started that had finished
        # by then (cffi's pycparser.ast_transforms before pyvips' ffi.dlopen) is not where it was made)
        common = 0
        while common < min(len(held), len(later)) and held[common] == later[common]:
            common += 1
        if common == len(held):
            return ctx
        return {"ev": "py_import", "pid": ctx.get("pid"), "tid": ctx.get("tid"), "seq": ctx.get("seq"),
                "module": held[common - 1], "imports": held[:common - 1], "frame": ctx.get("frame")}
    same_place = following is not None and following.get("frame") == ctx.get("frame")
    return {"ev": "py_after", "pid": ctx.get("pid"), "tid": ctx.get("tid"), "seq": ctx.get("seq"), "after": held[0],
            "frame": ctx.get("frame") if same_place else None}


CONTEXT_KINDS = ("py_import", "py_dlopen", "py_add_dll_directory")  # the events the shim makes a thread's context
END_KINDS = ("py_exit", "py_fault")  # a process's last word: its normal or exceptional end, or its crash


def library_path(file: str) -> bool:
    """A frame's file that is not the user's code, from its path alone: the import system's frozen modules, an
    installed package, the standard library (lib/pythonX.Y; a Windows Python's Lib folder, or its .zip)."""
    low = file.replace("\\", "/").lower()
    return (low.startswith("<frozen") or "/site-packages/" in low or "/dist-packages/" in low or ".zip/" in low
            or re.search(r"/lib(64)?/python\d+\.\d+/|/python\d*/lib/", low) is not None)


def fault_as_exit(e: dict) -> Optional[dict]:
    """A py_fault event as the py_exit its process never wrote: no import in progress (no frame of the import
    system in the crashing stack) and the user's innermost frame there as `frame`; None when an import was in
    progress (which one, a stack of files cannot say)."""
    frames = [f for f in e.get("frames") or [] if isinstance(f, dict) and isinstance(f.get("file"), str)]
    if any(f["file"].startswith("<frozen importlib") for f in frames):
        return None
    mine = next((f for f in frames if not library_path(f["file"])), None)
    frame = {"file": mine["file"], "line": mine.get("line"), "function": mine.get("function")} if mine else None
    return {"ev": "py_exit", "pid": e.get("pid"), "tid": e.get("tid"), "seq": e.get("seq"), "imports": [],
            "frame": frame, "fault": e.get("fault")}


class PyContexts:
    """The py_* events of a trace's processes, by thread and in order, and each load's live context.

    `events`: the events, or (with `get`) (reference, event) pairs whose reference `get` parses the event from
    again (an Events store's position): then only the references are kept, and an event is parsed again when a
    load asks for it (a few recent ones kept), not held for the whole replay (10,000 imports' stacks: 7 MB of a
    19 MB trace's report, bench/report_memory.py)."""

    RECENT = 64  # events kept parsed (a load's context and the thread's next event; loads come in order)

    def __init__(self, events, get: Optional[Callable[[int], dict]] = None) -> None:
        self._get = get
        self._by_seq: dict[tuple[Any, Any], Any] = {}  # (pid, seq) -> the event, or its reference
        self._thread: dict[tuple[Any, Any], list[Any]] = {}
        self._index: dict[tuple[Any, Any], int] = {}
        self._top: dict[tuple[Any, Any], Any] = {}  # (pid, seq) -> the thread's last top-level import up to it
        last_top: dict[tuple[Any, Any], Any] = {}
        self._recent: dict[int, dict] = {}
        for item in events:
            ref, e = item if get is not None else (None, item)
            ev = e.get("ev")
            if ev not in CONTEXT_KINDS and ev not in END_KINDS:  # (py_env, py_exception: no thread's context)
                continue
            if ev == "py_fault":  # (a crash: the end of a process that wrote no py_exit)
                ended = fault_as_exit(e)
                if ended is None:
                    continue
                e, ev, ref = ended, "py_exit", None
            pid, seq, tid = e.get("pid"), e.get("seq"), e.get("tid")
            if type(pid) is not int or type(seq) is not int:  # (a damaged trace's event: no context of it)
                continue
            key = (pid, seq)
            if key in self._by_seq and ev != "py_exit":
                continue
            held = e if ref is None else ref
            if ev == "py_exit":  # (the program's end: every thread's last word)
                self._thread.setdefault((pid, "exit"), []).append(held)
                continue
            self._by_seq[key] = held
            thread = (pid, tid if type(tid) is int else None)
            lst = self._thread.setdefault(thread, [])
            self._index[key] = len(lst)
            lst.append(held)
            if ev == "py_import" and e.get("imports") == []:  # (an import the user's own code made)
                last_top[thread] = held
            if thread in last_top:
                self._top[key] = last_top[thread]

    def _event(self, held: Any) -> dict:
        if isinstance(held, dict) or self._get is None:
            return held
        e = self._recent.get(held)
        if e is None:
            if len(self._recent) >= self.RECENT:
                self._recent.pop(next(iter(self._recent)))
            e = self._recent[held] = self._get(held)
        return e

    def event(self, pid: Any, seq: Any) -> Optional[dict]:
        held = self._by_seq.get((pid, seq))
        return None if held is None else self._event(held)

    def live(self, pid: Any, seq: Any, caller: str = "", name: str = "") -> Optional[dict]:
        """The live context of a load whose ctx is (pid, seq), made by the module at `caller` (rule_live_context),
        None when there is no such event."""
        if type(pid) is not int or type(seq) is not int:
            return None
        held = self._by_seq.get((pid, seq))
        if held is None:
            return None
        ctx = self._event(held)
        tid = ctx.get("tid")
        thread = self._thread.get((pid, tid if type(tid) is int else None), [])
        i = self._index.get((pid, seq))
        if i is None:
            return ctx
        nxt = thread[i + 1] if i + 1 < len(thread) else next(iter(self._thread.get((pid, "exit"), [])), None)
        following = None if nxt is None else self._event(nxt)
        top = self._top.get((pid, seq))
        return rule_live_context(ctx, following, caller, name, None if top is None else self._event(top))
