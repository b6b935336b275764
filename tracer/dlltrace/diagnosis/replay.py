"""Replay a trace through the simulator: for each real load, what the model says and whether
the real loader agreed.

    trace = read_trace("t.jsonl")
    world = recorded_world(trace)              # or a RecordingWorld over the live disk
    for r in replay(trace, world):
        r.result        # the model's CallResult, explained (leaf, chain, candidates, fixes)
        r.load          # the real call (trace.Load): its error and probes
        r.differences   # where the model and the loader differ (Difference: typed), r.disagreements in words
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, Optional, Sequence, Union

from dlltrace.seqs import MadeSequence
from dlltrace import winpath
from dlltrace.apisets import ApiSetSchema, builtin_schema, schema_from_sets
from dlltrace.classify import classify
from dlltrace.diagnosis.explain import explain
from dlltrace.emulate.python import TORCH_ORIGIN, rule_torch_dll_loop_origin
from dlltrace.model import ERROR_DLL_INIT_FAILED, SLOTS, CallResult, Node, OriginKind, load_op
from dlltrace.trace.capped import Capped, capped, cut_by_cap
from dlltrace.worlds.gpu import gpu_facts_from_dict
from dlltrace.worlds.recorded import RecordedWorld
from dlltrace.loader.windows import rules
from dlltrace.loader.windows.engine import Simulator
from dlltrace.trace.reader import FILE_PROBE_OPS, STARTUP_STATUS, Events, Load, Probe, Progress, Trace, nt_to_win32, python_kind
from dlltrace.worlds.world import CORE_MODULES, DEFAULT_KNOWN_DLLS, LoadedModule, ProcessState, SystemInfo, World

PROBE_OPS = FILE_PROBE_OPS

DifferenceKind = Literal["error", "unexpected_probe", "missing_probe"]
NT_STATUS_WORDS = {0: "found", 0xC0000034: "not found", 0xC000003A: "path not found", 0xC0000022: "access denied",
                   0xC000000F: "no such file", 0xC00000BA: "a folder"}


@dataclass(frozen=True, **SLOTS)
class Difference:
    """One place where the model and the real loader differ, for one load.

    error:            the loader returned `trace_error`, the model says `model_error`
    unexpected_probe: the trace holds a probe of `path` (with `trace_status`) the model did not predict
    missing_probe:    the model predicted a probe of `path` (expecting `model_result` there, a
                      Candidate.result, when it is one of its candidates) that the trace does not hold
    """
    kind: DifferenceKind
    path: Optional[str] = None
    trace_status: Optional[int] = None
    model_result: Optional[str] = None
    trace_error: Optional[int] = None
    model_error: Optional[int] = None

    @property
    def text(self) -> str:
        if self.kind == "error":
            return f"the loader returned {self.trace_error}, the model says {self.model_error}"
        if self.kind == "unexpected_probe":
            st = self.trace_status
            words = NT_STATUS_WORDS.get(st, "") if st is not None else ""
            seen = f" ({words}, {st:#x})" if st is not None and words else (f" ({st:#x})" if st is not None else "")
            return f"{self.path}: the trace saw a probe{seen}, the model predicted none"
        expect = f" (expecting {self.model_result.replace('_', ' ')})" if self.model_result else ""
        return f"{self.path}: the model predicted a probe{expect}, the trace saw none"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "path": self.path, "trace_status": self.trace_status,
                "model_result": self.model_result, "trace_error": self.trace_error, "model_error": self.model_error,
                "text": self.text}


@dataclass
class Replayed:
    load: Load
    result: CallResult
    origin: str = ""
    real_probes: list[str] = field(default_factory=list)
    agreed: int = 0
    differences: list[Difference] = field(default_factory=list)
    cut: bool = False  # the size cap dropped lines of this load (trace/capped.py): its probes not compared

    @property
    def not_searched(self) -> str:
        return self.result.not_searched

    @property
    def path(self) -> tuple[str, ...]:
        """PATH when the call was made."""
        return self.result.path

    @property
    def disagreements(self) -> list[str]:
        """The differences in words."""
        return [d.text for d in self.differences]

    @property
    def real_error(self) -> Optional[int]:
        return self.load.error

    @property
    def failed(self) -> bool:
        return not self.load.ok


def system_and_process(trace: Trace, pid: int) -> tuple[SystemInfo, ProcessState]:
    env = trace.env(pid) or {}
    proc = trace.process(pid) or {}
    wine = trace.header.platform == "wine" or bool(env.get("wine"))
    known = env.get("known_dlls")
    machine = env.get("machine") or "x64"
    system = SystemInfo(
        windows=env.get("windows") or "C:\\Windows",
        system32=native_system32(env.get("system32") or "", env.get("windows") or "C:\\Windows", machine),
        machine=wow64_os_machine(machine),
        safe_dll_search_mode=env.get("safe_dll_search_mode") is not False and env.get("safe_dll_search_mode") != 0,
        known_dlls=tuple(known) if isinstance(known, list) else (() if wine else DEFAULT_KNOWN_DLLS),
        profile="wine" if wine else "windows",
        version=env.get("windows_version") or "",
        api_sets=api_set_schema(trace, pid),
    )
    vars_ = env.get("vars") or {}
    path = [p for p in (vars_.get("PATH") or "").split(";") if p.strip()]
    exe = env.get("exe") or proc.get("exe") or "C:\\unknown\\program.exe"
    py = next(trace.of("py_env", pid=pid), None) or {}
    process = ProcessState(
        exe=exe, cwd=env.get("cwd") or "", path=path,
        dll_directory=env.get("dll_directory") or None,
        default_dirs=env.get("default_dirs") or None,
        machine=machine,
        python=str(py.get("version") or ""),
        env={k: v for k, v in vars_.items() if isinstance(v, str)},
        python_kind=python_kind(py),
        pip_site=pip_site(trace, pid, py),
        launcher=venv_launcher(py, exe) or store_alias(py, exe),
    )
    for d in env.get("user_dirs") or []:
        process.dll_directories.append((winpath.normalize(d), ""))
    modules = env.get("modules")
    if not isinstance(modules, list):
        modules = [winpath.join(system.system32, n) for n in CORE_MODULES]
    for m in modules:
        if isinstance(m, str) and winpath.is_absolute(m):
            process.add_loaded(LoadedModule(winpath.normalize(m), 1, "loaded before tracing started"))
    return system, process


def venv_launcher(py: dict, exe: str) -> str:
    """The venv's own python.exe that started a traced process (the py_env event's sys.executable: a venv's
    Scripts\\python.exe starts its base interpreter, `exe`, which knows the venv from __PYVENV_LAUNCHER__), "" when
    the process is not a venv's or is that python.exe itself. A fix's pip runs with it: the base interpreter's pip
    installs into the base Python, not the venv the program ran in."""
    launcher = py.get("executable")
    if python_kind(py) != "venv" or not isinstance(launcher, str) or not winpath.is_absolute(launcher):
        return ""
    return launcher if winpath.key(launcher) != winpath.key(exe) else ""


def store_alias(py: dict, exe: str) -> str:
    """A Microsoft Store Python's app execution alias (the py_env event's sys.executable: %LOCALAPPDATA%\\Microsoft\\
    WindowsApps\\PythonSoftwareFoundation.Python.3.X_...\\python.exe, what `python` on PATH runs), "" for any other
    Python. A fix's pip runs with it: the process's own image under C:\\Program Files\\WindowsApps cannot be run by
    the user (that folder's access is the package's own: "Access is denied")."""
    alias = py.get("executable")
    if python_kind(py) != "store" or not isinstance(alias, str) or not winpath.is_absolute(alias):
        return ""
    k = winpath.key(alias)
    if "\\microsoft\\windowsapps\\" not in k or "\\program files" in k or k == winpath.key(exe):
        return ""
    return alias


def wow64_os_machine(process_machine: str) -> str:
    """The machine of the Windows a traced process ran on, from the process's own (the `env` event's
    `machine`): a 32-bit x86 process is taken to run under WOW64 on x64 Windows (Windows 11 has no 32-bit
    edition, and Wine with 32-bit support is a 64-bit Wine; the trace does not record the OS's machine),
    so its System32 is SysWOW64 (rules.rule_wow64_redirect); any other process ran on its own machine."""
    return "x64" if process_machine == "x86" else process_machine


def native_system32(recorded: str, windows: str, process_machine: str) -> str:
    """The native System32 of a traced process's Windows: the `env` event's `system32` is what
    GetSystemDirectoryW gave the process, and a 32-bit process under WOW64 may be told SysWOW64 there;
    the model keeps System32 the native folder and redirects the 32-bit process's opens itself
    (rules.rule_wow64_redirect), so a recorded SysWOW64 is read as the System32 beside it."""
    if process_machine == "x86" and recorded and winpath.basename(recorded).lower() == "syswow64":
        return winpath.join(winpath.dirname(recorded), "System32")
    return recorded or winpath.join(windows, "System32")


def pip_site(trace: Trace, pid: int, py: dict) -> str:
    """The site-packages folder the traced Python's own pip installs into: a Microsoft Store Python's user site
    (rule_store_python_installs_into_its_user_site), else where its pip distribution is (py_dists); "" when it has
    no pip (python.org's embeddable Python comes without) or the trace does not say."""
    user = rule_store_python_installs_into_its_user_site(py)
    if user:
        return user
    for e in trace.of("py_dists", pid=pid):
        for d in e.get("dists") or ():
            if str(d.get("name") or "").lower() == "pip" and isinstance(d.get("site"), str):
                return winpath.normalize(d["site"])
    return ""


def rule_store_python_installs_into_its_user_site(py: Optional[dict]) -> str:
    """A Microsoft Store Python's own folder (under WindowsApps) cannot be written, so its pip installs into the
    user site (pip's "Defaulting to user installation because normal site-packages is not writeable"): the
    user_site its py_env recorded (site.USER_SITE: LocalCache\\local-packages\\PythonXY\\site-packages of the
    app's folder); else the entry of sys.path under LocalCache\\local-packages (a trace made before user_site was
    recorded). "" for any other Python (a venv made from the Store's Python installs into the venv)."""
    if python_kind(py) != "store" or not py:
        return ""
    user = py.get("user_site")
    if isinstance(user, str) and user:
        return winpath.normalize(user)
    for p in py.get("sys_path") or ():
        if isinstance(p, str) and "\\localcache\\local-packages\\" in winpath.key(p) and winpath.key(p).endswith("\\site-packages"):
            return winpath.normalize(p)
    return ""


def api_set_schema(trace: Trace, pid: int) -> ApiSetSchema:
    """The process's recorded API-set schema, or the built-in table when the trace has none
    (the report says which: ApiSetSchema.source). Parsed once per process of a trace."""
    cache = trace.__dict__.setdefault("_api_set_schemas", {})
    if pid not in cache:
        schema = None
        sets = trace.api_sets(pid)
        if sets is not None:
            try:
                schema = schema_from_sets(sets, "trace")
            except ValueError:
                pass  # (the reader checked it against the schema; a hand-made trace may still be odd)
        cache[pid] = schema or builtin_schema()  # (the built-in table, 50 KB of JSON, read only when needed)
    return cache[pid]


def init_failed_module(load: Load) -> Optional[str]:
    """The module whose DllMain failed in a load that ended with 1114, from the loader's DLL
    notifications: the loader notifies "loaded" right before it calls a module's DllMain and,
    when that DllMain fails, "unloaded" right after it (Wine dlls/ntdll/loader.c, process_attach;
    it stops at the first failure). So the failed one is the last module notified "loaded" before
    the first "unloaded" of a module this load notified "loaded" (an "unloaded" of another module
    is a FreeLibrary made inside a DllMain). None when the notifications do not show it."""
    loaded: list[str] = []
    for reason, path in load.notifications:
        if reason == "loaded":
            loaded.append(path)
        elif any(winpath.same(p, path) for p in loaded):
            return nt_to_win32(path) if winpath.same(loaded[-1], path) else None
    return None


def dllmain_running_module(load: Load) -> Optional[str]:
    """The module whose DllMain was running when the process ended inside a load that never
    returned (ExitProcess in a DllMain, or a crash nothing caught): the loader notifies "loaded"
    right before it calls a module's DllMain (Wine's process_attach), so it is the module of the
    load's last notification when that one is "loaded". None when the load returned, or the
    notifications do not end on a "loaded" (no DllMain was running that the trace shows)."""
    if load.finished or not load.notifications:
        return None
    reason, path = load.notifications[-1]
    return nt_to_win32(path) if reason == "loaded" else None


def mark_dllmain_failure(world: World, load: Load) -> None:
    """Tell the recorded world which module's DllMain failed in this load, and how, from the
    loader's answer and notifications (FileFacts.dllmain_how): 1114, DllMain returned FALSE
    (init_failed_module); another error with a module notified "loaded" then "unloaded", the
    loader caught an exception inside that DllMain (998 for an access violation under Wine:
    rules.rule_dllmain_failure_error); no return, the process ended inside the DllMain of the last
    module notified "loaded" (dllmain_running_module)."""
    mark = getattr(world, "mark_init_failed", None)
    if mark is None:
        return
    if not load.finished:
        running = dllmain_running_module(load)
        if running is not None:
            mark(running, "exited")
        return
    if load.error == ERROR_DLL_INIT_FAILED:
        failed = init_failed_module(load)
        if failed is None and not load.notifications and load.name and winpath.is_absolute(load.name):
            failed = load.name  # no notifications (an older trace): the loaded module itself
        if failed is not None:
            mark(failed)
    elif load.error:
        failed = init_failed_module(load)  # a failed DllMain is the only reason to notify "unloaded" there
        if failed is not None:
            mark(failed, "crashed", load.error, load.status)


def can_replay_start(trace: Trace, pid: int) -> bool:
    """Whether a process that could not start (Trace.start_failures) has what replay_start needs:
    the `env` event the launcher writes for it, naming the program."""
    env = trace.env(pid)
    return env is not None and isinstance(env.get("exe"), str) and winpath.is_absolute(env["exe"])


def replay_start(trace: Trace, pid: int, world: World) -> Replayed:
    """A process that ended before its shim started, with a loader status (Trace.start_failures):
    its static imports, resolved as the loader does at process start (the standard search order
    from the program's folder), replayed as a load of the program itself. Needs the `env` event
    the launcher writes for it; the real loader's probes were not seen."""
    code = trace.start_status(pid)
    if code is None:
        raise ValueError(f"process {pid} did not fail to start (Trace.start_failures)")
    _, process = system_and_process(trace, pid)
    exe = process.exe
    sim = Simulator(world, process)
    origin = f"starting {winpath.basename(exe)}"
    res = sim.load_library(exe, 0, op="start", origin=origin, origin_kind="start")
    explain(res, world, sim.process)
    load = Load(seq=0, pid=pid, tid=0, t=0, api="start", name=exe, flags=0, parent=None, depth=0, ctx=None, caller=None,
                end={"result": None, "error": STARTUP_STATUS[code], "status": code, "path": None})
    dis = []
    if res.error != STARTUP_STATUS[code]:
        dis.append(Difference("error", trace_error=STARTUP_STATUS[code], model_error=res.error))
    return Replayed(load=load, result=res, origin=origin, differences=dis)


def recorded_world(trace: Trace, pid: Optional[int] = None) -> RecordedWorld:
    """The world a trace's process recorded (the first process by default), each caller given a fresh()
    one of its own. The index of the trace's file events, which its processes share, is made once a
    trace; the world of the process last asked for is kept (the replay and then the CUDA table ask for
    the first process's), a world per process of a trace of many is not."""
    pid = trace.pids[0] if pid is None and trace.pids else pid
    made = trace.__dict__.setdefault("_recorded_worlds", {})
    n = len(trace.events)  # (a trace changed since: made again)
    files = made.get(("files", n))
    if files is None:
        made.clear()
        # (of a read trace, what its reader gathered of the file events: a file's facts are built from its event,
        # parsed when asked for)
        files = made[("files", n)] = RecordedWorld(SystemInfo(), trace.events if isinstance(trace.events, Events)
                                                   else trace.file_events(), checked=trace.checked)
        _clear_path_caches()  # (filled with every path of the trace's file events: of no use now)
    world = made.get(("process", pid, n))
    if world is None:
        for k in [k for k in made if k[0] == "process"]:
            del made[k]
        system, process = system_and_process(trace, pid) if pid is not None else (SystemInfo(), None)
        machine = process.machine if process is not None else system.machine
        # (each (path, status) once: the first of a path decides, or a later one); a 32-bit process's probe of
        # System32 is a fact about SysWOW64 (rules.rule_wow64_redirect): the file its open reached
        probes = [(rules.rule_wow64_redirect(p, machine, system), st) for p, st in trace.probe_facts(pid)]
        dirs = [e["path"] for e in trace.of("adddir", pid=pid) if e.get("ok") and isinstance(e.get("path"), str)]
        world = made[("process", pid, n)] = files.with_process(system, probes, dirs)
        world.owners = trace.owners(pid)  # (who owns each DLL: the traced Python's RECORD files, conda-meta)
        world.add_listed(machine)  # (what those records list that the trace never looked at: the process's machine)
        world.loaders = trace.package_loaders(pid)  # (packages whose import adds a DLL folder: delvewheel's patch)
        world.gpu = next((gpu_facts_from_dict(e) for e in trace.of("py_gpu", pid=pid)), None)  # (worlds/gpu.py)
    return world.fresh()


def origin_of(trace: Trace, load: Load, ctx: Union[dict, None, Literal[False]] = False) -> tuple[str, OriginKind, str]:
    """What made a traced load, from its Python context (`ctx`: trace.context(load), when the caller has it):
    (words, kind, the module imported)."""
    if ctx is False:
        ctx = trace.context(load)
    if not ctx:
        return "", "", ""
    ev = ctx.get("ev")
    if ev == "py_import":
        return f"import {ctx.get('module')}", "python_import", str(ctx.get("module"))
    if ev == "py_dlopen":
        return f"ctypes.CDLL({winpath.typed(ctx.get('name'))})", "ctypes", ""
    if ev == "py_add_dll_directory":
        return f"os.add_dll_directory({winpath.typed(ctx.get('path'))})", "os_add_dll_directory", ""
    if ev == "py_after":  # (made by native code after every import had finished: trace/pycontext.py)
        after = str(ctx.get("after") or "")
        return (f"the program's code after import {after}" if after else "the program's code"), "python_code", after
    return "", "", ""


def real_probe_statuses(load: Load) -> list[tuple[str, int]]:
    """(path, NTSTATUS) of every file the loader asked about for this load (its own probes: its
    static imports' too; not those of loads nested in it), in order."""
    out: list[tuple[str, int]] = []
    last = None  # winpath.key of the last path kept
    for p in load.probes:
        if p.op not in PROBE_OPS or not p.path:
            continue
        wp = winpath.normalize(p.win_path or "")
        k = winpath.key(wp)
        if k == last:
            continue  # the same file asked twice in a row (attributes, then open)
        out.append((wp, p.status))
        last = k
    return out


def model_results(res: CallResult) -> dict[str, str]:
    """path key -> what the model expects there (Candidate.result), over the whole resolution tree."""
    out: dict[str, str] = {}
    if res.tree is not None:
        for n in res.tree.walk():
            for c in n.candidates:
                out.setdefault(winpath.key(c.path), c.result)
    return out


def compare(model: list[str], real: list[str], reached: bool = True, statuses: Optional[list[int]] = None,
            expected: Optional[dict[str, str]] = None) -> tuple[int, list[Difference]]:
    """Line up the model's probes with the loader's; return (agreed, differences). `statuses`: the
    NTSTATUS of each real probe; `expected`: what the model expects at a path (model_results)."""
    expected = expected or {}
    mk = [winpath.key(p) for p in model]
    rk = [winpath.key(p) for p in real]
    agreed = 0
    out: list[Difference] = []
    j = 0

    def missing(path: str) -> Difference:
        return Difference("missing_probe", path=path, model_result=expected.get(winpath.key(path)))

    for i, k in enumerate(rk):
        if j < len(mk) and mk[j] == k:
            agreed += 1
            j += 1
            continue
        if k in mk[j:]:
            nxt = mk.index(k, j)
            out.extend(missing(skipped) for skipped in model[j:nxt])
            j = nxt + 1
            agreed += 1
            continue
        out.append(Difference("unexpected_probe", path=real[i], trace_status=statuses[i] if statuses else None))
    if reached:
        out.extend(missing(skipped) for skipped in model[j:])
    return agreed, out


NONE_INT = -(1 << 63)  # a light record's int column for None (Replays)
INT_MAX = (1 << 63) - 1


class Replays(MadeSequence[Replayed]):
    """The replayed top-level loads of a trace, in order (replay(..., light=True)): a load the real
    loader and the model both loaded is kept as a few fields (what the verdicts and the counts read:
    its pid, seq, api, name, flags, the path loaded), in columns (arrays of ints, lists of shared or
    interned strings: about 90 bytes a load), made a Replayed again when asked for (without its
    probes, nested loads or the model's tree); every other one in full."""

    def __init__(self) -> None:
        self._n = 0
        self._full: dict[int, Replayed] = {}  # position -> a load kept in full
        # one row per position (a full one's row is left unread): seq, pid, flags, ctx, index (NONE_INT: None)
        self._ints = tuple(array("q") for _ in range(5))
        # api, name, path (the name's own string when it is the same: one string, not two), result, op, origin
        self._strs: tuple[list[Any], ...] = tuple([] for _ in range(6))
        self._intern: dict[Any, Any] = {}

    def append(self, r: Replayed) -> None:
        self._full[self._n] = r
        self._row((0,) * 5, (None,) * 6)

    def _row(self, ints: tuple, strs: tuple) -> None:
        for col, v in zip(self._ints, ints):
            col.append(v)
        for lst, v in zip(self._strs, strs):
            lst.append(v)
        self._n += 1

    def extend(self, rs: Sequence[Replayed]) -> None:
        if not isinstance(rs, Replays):
            for r in rs:
                self.append(r)
            return
        for i in range(len(rs)):
            if i in rs._full:
                self.append(rs._full[i])
            else:
                self._row(tuple(c[i] for c in rs._ints), tuple(c[i] for c in rs._strs))

    def add_light(self, r: Replayed) -> None:
        """Keep a load that succeeded (and that the model loaded) as a few fields only (in full when a
        field does not fit its column: an int beyond 64 bits)."""
        ld, res = r.load, r.result
        ints = (ld.seq, ld.pid, ld.flags, ld.ctx, res.index)  # (seq, pid and index are never None)
        for v in ints:  # (a loop and appends, not all() of a generator and tuples: 10,000 loads of a big trace)
            if v is not None and not (type(v) is int and NONE_INT < v <= INT_MAX):
                self.append(r)
                return
        for col, v in zip(self._ints, ints):
            col.append(NONE_INT if v is None else v)
        s = self._intern.setdefault
        api, name, path, result, op, origin = self._strs
        api.append(s(ld.api, ld.api))
        name.append(ld.name)
        path.append(ld.name if ld.path == ld.name else ld.path)
        result.append(s(ld.result, ld.result))
        op.append(s(res.op, res.op))
        origin.append(s(r.origin, r.origin))
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def _get(self, i: int) -> Replayed:
        full = self._full.get(i)
        if full is not None:
            return full
        seq, pid, flags_, ctx_, index = (c[i] for c in self._ints)
        flags, ctx = (None if v == NONE_INT else v for v in (flags_, ctx_))
        api, name, path, result, op, origin = (c[i] for c in self._strs)
        load = Load(seq=seq, pid=pid, tid=0, t=0, api=api, name=name, flags=flags, parent=None, depth=0, ctx=ctx,
                    caller=None, end={"result": result, "error": 0, "path": path})
        return Replayed(load=load, result=CallResult(index=index, op=op, name=name or "", flags=flags or 0,
                                                     origin=origin), origin=origin)

    def __iter__(self) -> Iterator[Replayed]:
        return (self._get(i) for i in range(self._n))

    def full(self) -> Iterator[Replayed]:
        """The loads kept in full (every one but those that succeeded), in order."""
        return iter(list(self._full.values()))

    def is_light(self, i: int) -> bool:
        return (i + self._n if i < 0 else i) not in self._full

    def pids(self) -> list[int]:
        """The pid of each load, in order (without making a Replayed of the light ones)."""
        col = self._ints[1]
        return [self._full[i].load.pid if i in self._full else col[i] for i in range(self._n)]


def replay(trace: Trace, world: Optional[World] = None, pid: Optional[int] = None, light: bool = False,
           progress: Optional[Progress] = None) -> Sequence[Replayed]:
    """Replay every load of every traced process (or of `pid`), in order. `light`: a load that
    succeeded (really and in the model) is kept as a few fields (Replays), and every other one
    without its real probes, nested loads and DLL notifications (its Replayed has what the report
    reads of them: real_probes, the differences); `progress` is called now and then with (events
    replayed, events to replay)."""
    out: Union[list[Replayed], Replays] = Replays() if light else []
    pids = [pid] if pid is not None else trace.pids
    total = sum(trace.count_of(REPLAY_KINDS, p) for p in pids) if progress is not None else 0
    done = 0
    for p in pids:
        tick = None if progress is None else (lambda n, _d=done: progress(min(_d + n, total), total))
        done += _replay_process(trace, p, world or recorded_world(trace, p), out, light, tick)
    return out


@dataclass(frozen=True)
class LoadOutcome:
    """What the model gave one top-level load of a whole-run replay: its error and the file it loaded."""
    seq: int
    name: str
    error: int
    path: str
    stubs: int = 0  # imports it bound to stubs (the Wine profile: a missing export loads, and fails when called)


class _Outcomes:
    """A replay's sink that keeps each top-level load's outcome only (whole_run)."""

    def __init__(self) -> None:
        self.by_seq: dict[int, LoadOutcome] = {}

    def _add(self, r: Replayed) -> None:
        tree = r.result.tree
        path = tree.path if tree is not None and not r.result.error and tree.path else ""
        stubs = sum(len(n.stubs) for n in tree.walk()) if tree is not None else 0
        self.by_seq[r.load.seq] = LoadOutcome(r.load.seq, r.load.name or "", r.result.error, path, stubs)

    append = add_light = _add


def whole_run(trace: Trace, pid: int, world: World,
              hook: Optional[Callable[[Simulator, Load], bool]] = None,
              keep: Optional[Callable[[Simulator], None]] = None) -> dict[int, LoadOutcome]:
    """Every top-level load of process pid replayed through the model, in order, each one's outcome by its
    seq; `hook(sim, load)` runs before each load is replayed (a fix applied at the failing call: it returns True
    then, and from there the model's process is no longer synced with the real one's loaded modules). No load
    is explained: the whole-run check of a fix (wholerun.check_whole_run) compares two of these. `keep(sim)`
    runs after each of the program's own state changes from there (torch setting PATH keeps the folder a fix
    put first on it, as os.environ["PATH"] = ... + os.environ["PATH"] does)."""
    sink = _Outcomes()
    _replay_process(trace, pid, world, sink, light=True, hook=hook, explained=False, keep=keep,  # type: ignore[arg-type]
                    compared=False)
    return sink.by_seq


# the events a process's replay reads: what changes its DLL-search state, and its loads
STATE_KINDS = ("py_import", "adddir", "removedir", "setdlldir", "setenv", "setdefault", "free")
REPLAY_KINDS = STATE_KINDS + ("load_begin", "load_end", "probe", "dll_notify")
PROGRESS_EVERY = 4096  # events
CACHE_LOADS = 1000  # top-level loads replayed between two clearings of the path caches (_clear_path_caches)


def _clear_path_caches() -> None:
    """Empty the path functions' caches (winpath's and the loader rules' functools.lru_cache, up to
    winpath.PATH_CACHE entries each): on a big trace they fill with the paths of loads long replayed;
    cleared every CACHE_LOADS loads they hold those of the loads at hand (on the 19 MB bench trace,
    bench/report_memory.py: peak 4 MB less than without clearing, and no slower)."""
    for module in (winpath, rules):
        for f in vars(module).values():
            clear = getattr(f, "cache_clear", None)
            if callable(clear):
                clear()


def _replay_process(trace: Trace, pid: int, world: World, out: Union[list[Replayed], Replays], light: bool = False,
                    progress: Optional[Callable[[int], None]] = None,
                    hook: Optional[Callable[[Simulator, Load], bool]] = None, explained: bool = True,
                    keep: Optional[Callable[[Simulator], None]] = None, compared: bool = True) -> int:
    """One pass over the process's events: each top-level load is built while it is in flight (its
    end, probes, DLL notifications and nested loads) and replayed once it has ended and every event
    before its load_begin has been applied, in file order, as if it were replayed at its load_begin
    (the state events of other threads while it is in flight wait for it). A load that never ends is
    replayed at the end. Then it is let go (or kept as a few fields: Replays). Each replayed load is
    added to `out`; returns how many events were read. `compared` False: no load is compared with the real one
    (a whole-run replay keeps each load's outcome only), and every one is added as a light one."""
    _, process = system_and_process(trace, pid)
    sim = Simulator(world, process)
    cap = capped(trace)  # (the trace's `capped` event: found once, not per load)

    def observe(res: CallResult) -> None:  # (holds the process, not sim: no reference cycle)
        explain(res, world, process)

    if explained:
        sim.observers.append(observe)
    # (looked up with an event's field: None where it lacks it, or had it dropped as breaking the schema)
    cookies: dict[Optional[str], str] = {}
    label_for_tid: dict[Optional[int], str] = {}
    # the loads begun and not replayed yet, by seq (a top-level one and its nested ones)
    by_seq: dict[Any, Load] = {}
    # what waits for a top-level load in flight: state events and top-level loads, in file order
    pending: deque[Union[dict, Load]] = deque()

    def apply(e: dict) -> None:
        ev = e.get("ev")
        if ev == "py_import":
            label_for_tid[e.get("tid")] = str(e.get("module") or "").split(".")[0]
        elif ev == "adddir" and e.get("ok") and isinstance(e.get("path"), str):
            folder = winpath.normalize(e["path"])
            sim.process.dll_directories.append((folder, label_for_tid.get(e.get("tid"), "")))
            if e.get("cookie"):
                cookies[e["cookie"]] = folder
        elif ev == "removedir" and e.get("ok"):
            removed = cookies.get(e.get("cookie"))
            if removed:
                sim.remove_dll_directory(removed)
        elif ev == "setdlldir" and e.get("ok"):
            p = e.get("path")
            sim.process.dll_directory = winpath.normalize(p) if p else p
        elif ev == "setenv" and e.get("ok") and str(e.get("name", "")).upper() == "PATH":
            value = e.get("value")
            sim.process.path = [p for p in (value or "").split(";") if p.strip()]
        elif ev == "setdefault" and e.get("ok"):
            sim.process.default_dirs = e.get("flags")
        elif ev == "free" and e.get("ok") and e.get("path"):
            sim.free_library(e["path"])

    def forget(load: Load) -> None:
        """Let go of a replayed load and its nested ones (later events naming them are ignored)."""
        todo = [load]
        while todo:
            ld = todo.pop()
            if by_seq.get(ld.seq) is ld:
                del by_seq[ld.seq]
            unparsed.pop(id(ld), None)
            todo.extend(ld.children)

    # a read trace's probes are attributed to their loads unparsed (their positions: Events.select_probes_unparsed)
    # and made Probes only for a load whose probes are read (fill): not for one kept as a few fields (light_if)
    events = trace.events if isinstance(trace.events, Events) else None
    unparsed: dict[int, list[int]] = {}  # id(load in flight) -> the positions of its probes, in order

    def fill(load: Load) -> None:
        """Make the probes of a load and its nested ones (their events parsed) from their positions."""
        todo = [load]
        while todo:
            ld = todo.pop()
            at = unparsed.pop(id(ld), None)
            if at and events is not None:
                for pos in at:
                    e = events.event(pos)
                    # (positional: Probe's fields in order, seq pid tid t load op status path handle file)
                    ld.probes.append(Probe(e["seq"], e["pid"], e["tid"], e["t"], e["load"], e.get("op", ""),
                                           e.get("status", 0), e.get("path"), e.get("handle"), e.get("file")))
            todo.extend(ld.children)

    windows = sim.system.windows

    def light_if(load: Load, res: CallResult) -> bool:
        """Whether a replayed load is kept as a few fields (Replays.add_light): it loaded, really and in the model
        (and, under Wine, bound no stub and imported no Wine-only DLL); a whole-run replay without comparing keeps
        only outcomes: every load."""
        if not compared:
            return True
        return light and load.ok and not res.error and not (wine and (
            bool(stubs_bound(res)) or bool(wine_only_imports(res, windows))))

    replayed = 0
    diverged = False  # a hook applied a fix: the model's process no longer follows the real one
    # (under Wine a load that bound a stub, or an import to Wine's own DLL, is kept in full: analysis.wine_stub_bindings,
    # analysis.wine_only_dlls)
    wine = sim.system.profile == "wine"

    def drain(final: bool = False) -> None:
        nonlocal replayed, diverged
        while pending:
            item = pending[0]
            if isinstance(item, Load):
                if not item.finished and not final:
                    return
                pending.popleft()
                replayed += 1
                if replayed % CACHE_LOADS == 0:
                    _clear_path_caches()
                if hook is not None and hook(sim, item):
                    diverged = True
                done = _replay_load(trace, world, sim, item, sync=not diverged, cap=cap, light_if=light_if,
                                    fill=fill)
                forget(item)
                if done is None:
                    continue
                r, is_light = done
                if is_light:
                    out.add_light(r)  # type: ignore[union-attr]
                else:
                    if light:  # (what the report reads of the real load is in r: real_probes, its end)
                        r.load.probes, r.load.children, r.load.notifications = [], [], []
                    out.append(r)
            else:
                pending.popleft()
                apply(item)
                if diverged and keep is not None:  # (what the fix changed, kept over the program's own changes)
                    keep(sim)

    n = 0
    ld: Optional[Load]
    stream: Iterator[tuple[int, Optional[dict], Any]] = (
        events.select_probes_unparsed(REPLAY_KINDS, pid) if events is not None
        else ((0, e, None) for e in trace.select(REPLAY_KINDS, pid)))
    for pos, parsed, probe_load in stream:
        n += 1
        if progress is not None and n % PROGRESS_EVERY == 0:
            progress(n)
        if parsed is None:  # a probe, not parsed: its position kept with its load's (fill)
            ld = by_seq.get(probe_load)
            if ld is not None:
                at = unparsed.get(id(ld))
                if at is None:
                    at = unparsed[id(ld)] = []
                at.append(pos)
            continue
        e = parsed
        ev = e.get("ev")
        if ev == "load_begin":
            # (every event has a seq: reader.ESSENTIAL; the reader checked tid and t)
            # (positional: Load's fields in order, seq pid tid t api name flags parent depth ctx caller)
            begun = Load(e["seq"], e["pid"], e["tid"], e["t"], e.get("api", ""), e.get("name"), e.get("flags"),
                         e.get("parent"), e.get("depth", 0), e.get("ctx"), e.get("caller"))
            if begun.parent is None:
                by_seq[begun.seq] = begun
                pending.append(begun)
            elif begun.parent in by_seq:  # (a nested load whose parent is not in flight is in no replay)
                by_seq[begun.seq] = begun
                by_seq[begun.parent].children.append(begun)
        elif ev == "load_end":
            ld = by_seq.get(e.get("load"))
            if ld is not None:
                ld.end = e
                if ld.parent is None and pending and pending[0] is ld:
                    drain()
        elif ev == "probe":
            ld = by_seq.get(e.get("load"))
            if ld is not None:
                # (positional: Probe's fields in order, seq pid tid t load op status path handle file)
                ld.probes.append(Probe(e["seq"], e["pid"], e["tid"], e["t"], e["load"], e.get("op", ""),
                                       e.get("status", 0), e.get("path"), e.get("handle"), e.get("file")))
        elif ev == "dll_notify":
            ld = by_seq.get(e.get("load"))
            if ld is not None and isinstance(e.get("path"), str) and e.get("reason") in ("loaded", "unloaded"):
                ld.notifications.append((e["reason"], e["path"]))
        elif pending:
            pending.append(e)
        else:
            apply(e)
            if diverged and keep is not None:
                keep(sim)
    drain(final=True)
    if progress is not None:
        progress(n)
    return n


def _replay_load(trace: Trace, world: World, sim: Simulator, load: Load, sync: bool = True,
                 cap: Union[Capped, None, Literal[False]] = False,
                 light_if: Optional[Callable[[Load, CallResult], bool]] = None,
                 fill: Optional[Callable[[Load], None]] = None) -> Optional[tuple[Replayed, bool]]:
    """One top-level load through the simulator, compared with what the loader did (`cap`: capped(trace),
    when the caller has it), and whether it is kept as a few fields: `light_if(load, result)` says so, and then
    it is not compared (nothing of the comparison is kept of it); `fill(load)` makes the probes of a load (and its
    nested ones) that the replay kept unparsed, before they are read."""
    if not load.name:
        return None
    flags = load.flags or 0
    ctx = trace.context(load)  # (asked once: origin_of and user_import read it)
    origin, origin_kind, origin_module = origin_of(trace, load, ctx)
    # torch's own _load_dll_libraries loop: its loads are ctypes *function calls*, which raise no audit
    # event, so the trace's Python context is whatever came last; in a Python process they are `import
    # torch`'s (emulate/python.rule_torch_dll_loop_origin), whether they fail or not
    if sim.process.python and origin_kind in ("", "ctypes", "os_add_dll_directory"):
        torch = rule_torch_dll_loop_origin(load_op(load.api), load.name, flags)
        if torch is not None:
            origin, origin_kind, origin_module = TORCH_ORIGIN, torch, ""
    mark_dllmain_failure(world, load)  # DllMain's answer is in no file: take the loader's
    res = sim.load_library(load.name, flags, op=load_op(load.api),
                           origin=origin, origin_kind=origin_kind, origin_module=origin_module)
    if light_if is not None and light_if(load, res):
        if sync:
            _sync_loaded(sim.process, load, res)
        res.origin_top = user_import(ctx)
        return Replayed(load=load, result=res, origin=origin), True
    if fill is not None:
        fill(load)
    seen = real_probe_statuses(load)
    real = [p for p, _ in seen]
    # probes the model expects past the last one seen are missing only if the loader got
    # that far: not for a load that never returned (the process died inside it)
    reached = load.finished and (load.status is not None or bool(real))
    cut = cut_by_cap(capped(trace) if cap is False else cap, load)
    dis: list[Difference]
    if cut:  # lines of it were dropped by the size cap: what is left cannot be compared with the model
        agreed, dis = 0, []
    else:
        agreed, dis = compare(res.probes, real, reached, [st for _, st in seen], model_results(res))
        if load.finished and load.error is not None and load.error != res.error:
            dis.insert(0, Difference("error", trace_error=load.error, model_error=res.error))
    if sync:  # (a whole-run replay with a fix applied diverges from the real run from there: no sync)
        _sync_loaded(sim.process, load, res)
    res.origin_top = user_import(ctx)
    return Replayed(load=load, result=res, origin=origin, real_probes=real, agreed=agreed, differences=dis, cut=cut), False


def stubs_bound(res: CallResult) -> list[tuple[str, str, str]]:
    """(importer, DLL, function) of each import the call bound to a stub, in the order of its tree: under Wine an
    import its DLL does not export loads anyway, bound to a stub that ends the process when called
    (rules.rule_missing_import_is_error); on Windows the load fails with 127."""
    return [(parent.path or parent.name, node.path or node.name, fn) for node, parent in tree_edges(res)
            if node.stubs and parent is not None for fn in node.stubs]


def tree_edges(res: CallResult) -> Iterator[tuple[Node, Optional[Node]]]:
    """Each node of the call's tree with the node whose import it is (None for the call's own), in tree order."""
    todo: list[tuple[Node, Optional[Node]]] = [(res.tree, None)] if res.tree is not None else []
    while todo:
        node, parent = todo.pop()
        yield node, parent
        todo.extend((c, node) for c in reversed(node.children))


def wine_only_imports(res: CallResult, windows: str) -> list[tuple[str, str]]:
    """(importer, file) of each module the call mapped from the Windows folder (System32, SysWOW64) for an import of
    a module outside it, whose name no vanilla Windows System32 has (classify: not a Windows DLL nor an API set):
    under Wine, Wine's own DLL (zlib1.dll, msvcp140.dll); on Windows the import must find it elsewhere: the
    package's own copy, an installer's (the VC++ Redistributable), a driver's."""
    win = winpath.key(windows) + "\\"
    return [(parent.path, node.path) for node, parent in tree_edges(res)
            if node.new and node.path and parent is not None and parent.path and node.how_kind != "apiset"
            and winpath.key(node.path).startswith(win) and not winpath.key(parent.path).startswith(win)
            and classify(node.path).kind not in ("windows", "apiset")]


def user_import(ctx: Optional[dict]) -> str:
    """The import of the user's own code a load was made under: the outermost import in progress (a py_import
    event's `imports`, else its own module): "requests" for _ssl's load, "transformers" for torch's. A fix to run
    "before" it goes there, where the user can put it."""
    if not ctx:
        return ""
    held = ctx.get("imports")
    if isinstance(held, list) and held and isinstance(held[0], str):
        return held[0]
    module = ctx.get("module")
    return module if ctx.get("ev") == "py_import" and isinstance(module, str) else ""


def _sync_loaded(process: ProcessState, load: Load, res: CallResult) -> None:
    """Keep the model's loaded-module list true to the real process after each call."""
    if load.ok and load.path and process.find_loaded_by_path(load.path) is None:
        process.add_loaded(LoadedModule(winpath.normalize(load.path), 1, f"loaded by {load.api}({winpath.typed(load.name)})"))
    if not load.ok and res.error == 0 and res.tree is not None:
        for n in res.tree.walk():
            if n.new and n.path:
                m = process.find_loaded_by_path(n.path)
                if m is not None:
                    process.remove_loaded(m)
