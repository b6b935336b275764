"""A Linux trace (platform "linux", the LD_AUDIT recorder's events) replayed against the ld.so model.

recorded_calls(events) cuts each process's events into calls: every search ld.so began for a name
(objsearch LA_SER_ORIG) that is not a dependency of an object being added (la_activity LA_ACT_ADD ...
LA_ACT_CONSISTENT) is a top-level call (a dlopen), with the searches of its dependencies after it. The
startup (everything before the first LA_ACT_CONSISTENT) is the executable's DT_NEEDED closure.

replay_linux(trace) re-runs each process in the model (loader/linux), in the trace's own world (the
elf_system / elf_file facts `dlltrace run` appends: RecordedELFWorld) or, for a trace without them, this
machine (LiveELFWorld): start, then each top-level call in order, dlopen-ed from the object that made it. Each failed call becomes a LinuxCall: the model's leaf
(model.Node / Leaf / Candidate: every file tried with the rule of its folder: "RUNPATH of /x/_C.so",
"LD_LIBRARY_PATH", "system search path"), the chain from the call to the leaf, the recorded candidates,
and whether the model tried the same files in the same order as the real ld.so did (`agrees`).

render/linux.py linux_report_dict(trace) is that as JSON (the pieces through render/calls.py's node_dict
and candidate_dict, the fixes' through fix_dict). Not done: a text form in render/explained.py's words (its
"Where Windows looked" and winpath-based folders are Windows's; the lead's call).
"""

from __future__ import annotations

import dataclasses
import itertools
import posixpath
import re

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from dlltrace.diagnosis.outcome import found_none, not_started, rule_exception_is_unstarted_program
from dlltrace.trace.pycontext import PyContexts
from dlltrace.trace.reader import owners_index
from dlltrace.loader.linux.engine import DlopenResult, LinuxObject, LinuxProcess, LinuxSimulator, Lookup
from dlltrace.loader.linux.rules import RTLD_NOW
from dlltrace.loader.linux.fixes import (Rerun, propose, rule_glibc_too_old, rule_ld_library_path_shadows,
                                         rule_ld_library_path_shadows_a_runpath_copy,
                                         rule_linux_not_the_file_its_distribution_installed)
from dlltrace.loader.linux.tree import DepNode, dep_tree
from dlltrace.model import Candidate, Cause, Fix, Leaf, LeafFacts, Node, OriginKind
from dlltrace.worlds.elf import ELFWorld, LiveELFWorld, OverlayWorld, RecordedELFWorld

# the model's causes (DlopenResult.cause) as the report's (model.Cause)
CAUSES: dict[str, Cause] = {"not_found": "not_found", "wrong_class": "bad_machine", "bad_elf": "not_pe",
                            "missing_version": "missing_export"}


@dataclass
class RecordedCall:
    """One top-level search of a process, as the recorder saw it."""

    pid: int
    name: str
    by: str  # the object whose search it was ("" the executable)
    searches: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)  # (name, [(path, LA_SER_*)])
    opened: list[str] = field(default_factory=list)  # objects la_objopen reported for it
    dlerror: str = ""  # the dlerror() text the program read after it (the LD_PRELOAD wrapper)
    ctx: Optional[dict] = None  # the Python action it ran in (a py_import / py_dlopen event), if any
    inherited: bool = False  # a forked child's copy of its parent's call: replayed for its state, not reported
    cwd: str = ""  # the current folder when the call began (a relative path's: the recorder's `cwd`); "" unknown


@dataclass
class RecordedProcess:
    pid: int
    exe: str = ""
    env: dict[str, str] = field(default_factory=dict)
    audit: list[str] = field(default_factory=list)
    preload: list[str] = field(default_factory=list)
    calls: list[RecordedCall] = field(default_factory=list)
    python: dict[int, dict] = field(default_factory=dict)  # seq -> its py_* event
    sys_path: list[str] = field(default_factory=list)  # py_env's: where pip would install for this Python
    dists: list[dict] = field(default_factory=list)  # its py_dists events: who owns each file (owners_index)
    interpreter: str = ""  # py_env's sys.executable: the Python (a venv's, not the base one exe resolves to)
    cwd: str = ""  # the current folder when the program started (audit_start's `cwd`); "" unknown (older traces)


def _s(e: dict, key: str) -> str:
    """A string field, "" when absent or not a string (a damaged or edited trace)."""
    v = e.get(key)
    return v if isinstance(v, str) else ""


# the kinds of event recorded_processes reads, but for `activity` (and the py_* kinds): an `activity` alone
# only changes how a later objsearch is taken
CALL_KINDS = frozenset({"audit_start", "objsearch", "objopen", "dlerror", "fork"})


def changes_calls(kind: Any) -> bool:
    """Whether an event of this kind, after the others, can change the calls recorded_processes makes of them
    (and so the replay): the kinds it reads but `activity`, whose flag only decides how a later search is
    taken."""
    return isinstance(kind, str) and (kind in CALL_KINDS or kind.startswith("py_"))


def calls_unchanged_after(full: Sequence[dict], k: int) -> bool:
    """No event of `full` after its first `k` can change a call (changes_calls): a replay of its first k is one of
    it all. `run`'s replay made ahead, while the program's Python was ending (runner.LinuxFactsMeanwhile), is kept
    only then."""
    return len(full) >= k and not any(changes_calls(e.get("ev")) for e in itertools.islice(full, k, None))


def recorded_processes(events: Iterable[dict]) -> list[RecordedProcess]:
    procs: dict[int, RecordedProcess] = {}
    state: dict[int, dict[str, Any]] = {}
    py_events: list[dict] = []
    for e in events:
        ev, pid = e.get("ev"), e.get("pid")
        if not isinstance(pid, int):
            continue
        p = procs.get(pid)
        if isinstance(ev, str) and ev.startswith("py_") and p is not None and isinstance(e.get("seq"), int):
            p.python[e["seq"]] = e
            if pid in state:  # (the program went on in Python: an unload before it was not a failing dlopen's)
                state[pid]["deleted"] = False
            py_events.append(e)
            if ev == "py_env" and isinstance(e.get("sys_path"), list):
                p.sys_path = [x for x in e["sys_path"] if isinstance(x, str) and x]
            if ev == "py_env" and isinstance(e.get("executable"), str):
                p.interpreter = e["executable"]
            if ev == "py_dists":
                p.dists.append(e)
            continue
        if not isinstance(ev, str) or (ev not in CALL_KINDS and ev != "activity"):
            continue
        if ev == "fork":  # a forked child: its parent's process so far (what it has loaded), then its own calls
            ppid = e.get("ppid")
            parent = procs.get(ppid) if isinstance(ppid, int) else None
            if parent is not None and p is None:
                p = procs[pid] = dataclasses.replace(
                    parent, pid=pid, env=dict(parent.env), python=dict(parent.python),
                    calls=[dataclasses.replace(c, pid=pid, inherited=True) for c in parent.calls])
                state[pid] = {"started": True, "adding": set(), "cur": None, "deleted": False}
            continue
        if ev == "audit_start":  # (a new program in this pid after exec starts afresh)
            p = procs[pid] = RecordedProcess(pid, exe=_s(e, "exe"), cwd=_s(e, "cwd"))
            if e.get("has_ld_library_path") is True or e.get("has_ld_library_path") == 1:
                p.env["LD_LIBRARY_PATH"] = _s(e, "ld_library_path")
            p.audit = [a for a in _s(e, "ld_audit").split(":") if a]
            p.preload = [a for a in _s(e, "ld_preload").replace(" ", ":").split(":") if a]
            state[pid] = {"started": False, "adding": set(), "cur": None, "deleted": False}
            continue
        if p is None:
            continue
        st = state[pid]
        if ev == "activity":
            if e.get("flag") == "LA_ACT_CONSISTENT":
                st["started"] = True
                st["adding"] = set()
            elif e.get("flag") == "LA_ACT_DELETE" and st["cur"] is not None:
                st["deleted"] = True
            continue
        if not st["started"]:
            continue
        if ev == "objopen":
            st["adding"].add(_s(e, "path"))
            if st["cur"] is not None:
                st["cur"].opened.append(_s(e, "path"))
        elif ev == "dlerror":
            # (the text of a failed dlsym on a library the call loaded, such as a hasattr() of ctypes for an
            # optional function, is not the call's: only a call whose own file was not opened failed, or one that
            # opened it and could not bind a symbol, which unloads what it mapped (LA_ACT_DELETE) before its
            # dlerror: PyOpenGL's hasattr(libOpenGL.so, 'FunctionType') names libOpenGL.so as such a text does)
            cur = st["cur"]
            text = _s(e, "text")
            if cur is not None and not cur.dlerror and (
                    not _target_opened(cur) or (st["deleted"] and undefined_symbol(text, cur.opened))):
                cur.dlerror = text
        elif ev == "objsearch":
            name, flag, by = _s(e, "name"), _s(e, "flag"), _s(e, "by")
            if not name:
                continue
            if flag == "LA_SER_ORIG":
                if by in st["adding"] and st["cur"] is not None:
                    st["cur"].searches.append((name, []))
                else:
                    ctx = e.get("ctx")
                    st["cur"] = RecordedCall(pid, name, by, [(name, [])],
                                             ctx=p.python.get(ctx) if isinstance(ctx, int) else None,
                                             cwd=_s(e, "cwd"))
                    st["deleted"] = False
                    p.calls.append(st["cur"])
            elif st["cur"] is not None and st["cur"].searches:
                st["cur"].searches[-1][1].append((name, flag))
    contexts = PyContexts(py_events)  # (each call's live context: the import still in progress when it was made)
    for p in procs.values():
        for c in p.calls:
            if c.ctx is not None and not c.inherited:
                c.ctx = contexts.live(c.pid, c.ctx.get("seq"), c.by, c.name) or c.ctx
    return list(procs.values())


@dataclass
class LinuxCall:
    """A top-level call, replayed: what the real loader did and what the model says."""

    pid: int
    exe: str
    name: str
    by: str
    error: str  # the model's dlerror() words ("" it loads)
    real_error: str  # the dlerror() text recorded ("" none was read)
    leaf: Optional[Leaf] = None
    tree: Optional[Node] = None  # the leaf's node: its candidates in order, each with its rule and result
    chain: list[str] = field(default_factory=list)  # from the call's name down to the leaf
    recorded: list[Candidate] = field(default_factory=list)  # the files the real ld.so tried for the leaf
    agrees: bool = True  # the model tried the same files, in the same order, for every search of the call
    path: Optional[str] = None
    fixes: list[Fix] = field(default_factory=list)  # each re-run through the model (loader/linux/fixes.py)
    origin_kind: OriginKind = ""  # the Python action that made the call (model.OriginKind): python_import, ctypes
    origin_module: str = ""  # python_import: the module imported
    origin: str = ""  # in words: "import torch", "ctypes.CDLL('libcudart.so.11.0')"
    frame: Optional[dict] = None  # the origin's place in the user's code (the bootstrap's `frame`)
    deps: Optional[DepNode] = None  # a failed call's dependency tree: what it loaded, each with its reason, and where it stopped
    opened: list[str] = field(default_factory=list)  # the objects the real ld.so mapped for it (la_objopen)


_UNDEFINED = re.compile(r"^(?P<obj>.+?): undefined symbol: (?P<sym>\S+)$")


def undefined_symbol(text: str, opened: Iterable[str] = ()) -> Optional[tuple[str, str]]:
    """(the object, the symbol) of ld.so's "OBJ: undefined symbol: SYM" (a dlopen that mapped its files and
    then failed to bind a symbol none of them defines), when OBJ is one of the files the call opened (`opened`
    empty: any); None for any other text (a failed dlsym of a loaded library, hasattr() of ctypes, is not one)."""
    m = _UNDEFINED.match(text.strip())
    if m is None:
        return None
    obj = m.group("obj")
    names = list(opened)
    if names and not any(o == obj or o.rsplit("/", 1)[-1] == obj.rsplit("/", 1)[-1] for o in names):
        return None
    return obj, m.group("sym")


def _target_opened(call: RecordedCall) -> bool:
    """The file the call asked for was opened (la_objopen): the call loaded it."""
    want = call.name.rsplit("/", 1)[-1]
    return any(o == call.name or o.rsplit("/", 1)[-1] == want for o in call.opened)


def _leaf_lookup(res: DlopenResult) -> Optional[Lookup]:
    return next((lk for lk in reversed(res.lookups) if lk.error or lk.name == res.leaf), None)


def _chain(res: DlopenResult, leaf: Lookup) -> list[str]:
    """From the call's name down to the leaf, each object the one that needed the next. An object already
    loaded is looked up again as a dependency of what it loads (libqxcb.so, dlopen-ed by libQt6Core.so.6,
    needs libQt6Core.so.6): the walk up stops at the call's own file, and never visits an object twice."""
    by_path: dict[str, Lookup] = {}
    for lk in res.lookups:  # (an object's first lookup is the one that added it)
        if lk.path and lk.path not in by_path:
            by_path[lk.path] = lk
    out = [leaf.name]
    cur = leaf
    seen = {leaf.path}
    while cur.requester and cur.requester in by_path and cur.requester not in seen and cur.name != res.name:
        seen.add(cur.requester)
        cur = by_path[cur.requester]
        out.append(cur.name)
    if out[-1] != res.name:
        out.append(res.name)
    return list(reversed(out))


def _candidates(lk: Lookup) -> list[Candidate]:
    return [c for g in lk.groups for c in g.tried]


def _result(sim: LinuxSimulator, rc: RecordedCall, proc: RecordedProcess, res: DlopenResult) -> LinuxCall:
    model_tried = [(lk.name, lk.tried) for lk in res.lookups if lk.how == "search"]
    real_tried = [(n, [p for p, _ in tried]) for n, tried in rc.searches if "/" not in n]
    call = LinuxCall(rc.pid, proc.exe, rc.name, rc.by, res.error, rc.dlerror, agrees=model_tried == real_tried,
                     path=res.path)
    if rc.ctx is not None:
        call.frame = rc.ctx.get("frame") if isinstance(rc.ctx.get("frame"), dict) else None
        if rc.ctx.get("ev") == "py_import":
            call.origin_kind, call.origin_module = "python_import", _s(rc.ctx, "module")
            call.origin = f"import {call.origin_module}"
        elif rc.ctx.get("ev") == "py_dlopen":
            call.origin_kind, call.origin = "ctypes", f"ctypes.CDLL({rc.ctx.get('name')!r})"
        elif rc.ctx.get("ev") == "py_after":  # (made by native code after every import had finished)
            call.origin_kind, call.origin_module = "python_code", _s(rc.ctx, "after")
            call.origin = f"the program's code after import {call.origin_module}" if call.origin_module else \
                "the program's code"
    call.opened = list(rc.opened)
    missing = undefined_symbol(rc.dlerror, rc.opened) if rc.dlerror else None
    if not res.error and missing is not None:  # (the model finds every file; the real ld.so could not bind one)
        obj, sym = missing
        facts = LeafFacts(export=sym)
        detail = f"{obj.rsplit('/', 1)[-1]} needs the symbol {sym}, which none of the libraries loaded defines"
        call.leaf = Leaf(obj.rsplit("/", 1)[-1], "missing_export", path=obj, detail=detail, parent=obj, facts=facts)
        call.tree = Node(obj, "call" if obj == rc.name else "import", path=obj, error=1, cause="missing_export",
                         detail=detail, facts=facts)
        call.chain = [rc.name] + ([obj] if obj not in (rc.name, res.path) else [])  # (the call's own object: once)
        return call
    if not res.error:
        return call
    lk = _leaf_lookup(res)
    if lk is None:
        return call
    cause = CAUSES.get(res.cause, "not_found")
    facts = LeafFacts(export=res.error.split("version `", 1)[1].split("'", 1)[0]) if res.cause == "missing_version" else LeafFacts()
    parent = lk.requester or proc.exe
    detail = res.error
    call.leaf = Leaf(res.leaf or lk.name, cause, path=lk.path, detail=detail, parent=parent, facts=facts)
    call.tree = Node(lk.name, "call" if lk.name == rc.name else "import", path=lk.path, error=1, cause=cause,
                     detail=detail, candidates=_candidates(lk), facts=facts)
    call.chain = _chain(res, lk)
    call.deps = dep_tree(res.lookups, sim.world, res.error, res.cause, res.leaf, cwd=sim.process.cwd)
    rec = next((tried for n, tried in reversed(rc.searches) if n == lk.name), [])
    call.recorded = [Candidate(p, flag, "found" if p in rc.opened else "not_there") for p, flag in rec]
    return call


def install_roots(proc: RecordedProcess, requester: str) -> list[str]:
    """Where pip would put a wheel for the library that needs it: the sys.path entry the requester is under
    (torch's RUNPATH points into its own site-packages), then the process's other site-packages."""
    # (never the standard library's own entries, lib-dynload, pythonX.Y, its .zip: pip does not install
    # there, and ctypes' own _ctypes.so there is the requester of every ctypes.CDLL)
    entries = [p.rstrip("/") for p in proc.sys_path if p.startswith("/") and not _stdlib_entry(p.rstrip("/"))]
    under = [p for p in entries if requester.startswith(p + "/")]
    rest = [p for p in entries if p not in under and p.endswith(("site-packages", "dist-packages"))]
    return sorted(under, key=len, reverse=True)[:1] + rest


def _stdlib_entry(p: str) -> bool:
    return p.endswith(("/lib-dynload", ".zip")) or re.search(r"/lib(64)?/python\d+\.\d+$", p) is not None


def replay_process(proc: RecordedProcess, world: ELFWorld, env: Optional[dict[str, str]] = None) -> list[LinuxCall]:
    """One recorded process re-run in the model (env: its environment, or a fix's)."""
    sim = LinuxSimulator(world, LinuxProcess(proc.exe, env=dict(proc.env if env is None else env), audit=proc.audit,
                                             preload=proc.preload))
    if sim.start().error:
        return []
    out: list[LinuxCall] = []
    objs = {o.path: o for o in sim.loaded}
    for rc in proc.calls:
        caller: Optional[LinuxObject] = objs.get(rc.by) if rc.by else None
        sim.lookups = []
        # (a relative path's $ORIGIN is made from the current folder of that moment: rule_origin)
        sim.process.cwd = rc.cwd or proc.cwd or "/"
        res = sim.dlopen(rc.name, RTLD_NOW, caller=caller)
        objs = {o.path: o for o in sim.loaded}
        if not rc.inherited:
            out.append(_result(sim, rc, proc, res))
    return out


def loaded_objects(proc: RecordedProcess, world: ELFWorld, env: dict[str, str], upto: int) -> list[tuple[str, str, str]]:
    """The objects the model has loaded in the process (name: its soname, else the name it was loaded by; path; file
    id) once its call `upto` (an index of replay_process's calls) is made, with environment `env`."""
    sim = LinuxSimulator(world, LinuxProcess(proc.exe, env=dict(env), audit=proc.audit, preload=proc.preload))
    if sim.start().error:
        return []
    objs = {o.path: o for o in sim.loaded}
    made = -1
    for rc in proc.calls:
        if made >= upto:
            break
        sim.process.cwd = rc.cwd or proc.cwd or "/"
        sim.dlopen(rc.name, RTLD_NOW, caller=objs.get(rc.by) if rc.by else None)
        objs = {o.path: o for o in sim.loaded}
        made += 0 if rc.inherited else 1
    return [(o.facts.soname or (o.names[0] if o.names else posixpath.basename(o.path)), o.path, o.file_id)
            for o in sim.loaded if o.kind != "executable"]


def _overlay_key(world: ELFWorld) -> Optional[tuple]:
    """What a world of fixes applied is, as a key: its overlays' files and cache entries, down to the base world
    (None: a world that is not overlays over the one being replayed, never shared)."""
    levels: list[tuple] = []
    while isinstance(world, OverlayWorld):
        levels.append((tuple(sorted((k, repr(v)) for k, v in world.files.items())), tuple(sorted(world.cache.items()))))
        world = world.base
    return (id(world), tuple(levels))


def replay_linux(events: Iterable[dict], world: Optional[ELFWorld] = None, fixes: bool = True) -> list[LinuxCall]:
    """Every top-level call of every process of a Linux trace, replayed in the model; a call whose leaf was
    not found gets the fixes that make the model load it (each re-run: loader/linux/fixes.py)."""
    evs = list(events)
    w = world or default_world(evs)
    out: list[LinuxCall] = []
    for proc in recorded_processes(evs):
        if not proc.exe:
            continue
        calls = replay_process(proc, w)
        # the whole-process replays of the fixes, by the world and environment they ran with: each failed call's
        # fixes replay the process again, and calls that need the same system packages (10 that each need a
        # chain of 24: 264 replays, 8 s) ask for the same worlds
        replays: dict[tuple, list[LinuxCall]] = {}
        for i, c in enumerate(calls):
            glibc = rule_glibc_too_old(c.leaf.name, c.leaf.path or "", c.leaf.facts.export or "", c.leaf.parent or "", w,
                                       owners_index(proc.dists)) if fixes and c.leaf is not None and \
                c.leaf.cause == "missing_export" else None
            shadowed = c.leaf is not None and c.leaf.cause == "missing_export" and bool(c.leaf.facts.export) and \
                bool(c.leaf.path) and "LD_LIBRARY_PATH" in proc.env
            if glibc is not None and not shadowed:  # (this system's C library is older than the one it was built
                c.fixes = [glibc]                   # for: no file fixes it)
                continue
            if fixes and c.leaf is not None and (shadowed or c.leaf.cause == "not_found" and "/" not in c.leaf.name):
                def rerun(world2: ELFWorld, env2: dict[str, str], i: int = i) -> Rerun:
                    """The whole process replayed with a fix: whether call i loads, else the library it fails on
                    now; and the calls that loaded and now fail or load another file (rule_whole_run_linux)."""
                    key = (_overlay_key(world2), tuple(sorted(env2.items())))
                    if key not in replays:
                        replays[key] = replay_process(proc, world2, env2)
                    again = replays[key]
                    breaks = tuple(dict.fromkeys(
                        c0.name for j, c0 in enumerate(calls) if j != i and not c0.error
                        and (j >= len(again) or again[j].error or again[j].path != c0.path)))
                    if len(again) > i and not again[i].error:
                        return Rerun(True, breaks=breaks)
                    leaf = again[i].leaf if len(again) > i else None
                    return Rerun(False, leaf.name if leaf is not None else "", breaks)
                if shadowed:  # (a copy of glibc's on LD_LIBRARY_PATH that lacks it: that folder out, if it loads then)
                    c.fixes = rule_ld_library_path_shadows(c.leaf.name, c.leaf.path or "", c.leaf.facts.export or "",
                                                           proc.env, w, rerun) or ([glibc] if glibc is not None else [])
                    if not c.fixes and undefined_symbol(c.real_error, c.opened) is not None:
                        # (a symbol no library loaded defines: a library taken from LD_LIBRARY_PATH ahead of the
                        # copy a RUNPATH names, when the model takes that copy without the folder)
                        def loaded_with(env2: dict[str, str], i: int = i) -> list[tuple[str, str, str]]:
                            return loaded_objects(proc, w, env2, i)
                        c.fixes = rule_ld_library_path_shadows_a_runpath_copy(
                            c.leaf.facts.export or "", c.leaf.name, proc.env, loaded_with(proc.env), loaded_with, w,
                            rerun)
                    continue
                c.fixes = propose(c.leaf.name, c.leaf.parent or "", proc.exe, proc.env, w, rerun,
                                  roots=install_roots(proc, c.leaf.parent or "") or None, interpreter=proc.interpreter,
                                  owners=owners_index(proc.dists))
        if fixes:
            note_unfound_packages(proc, w)
            note_unstarted_packages(proc, w)
            owners = owners_index(proc.dists)
            for c in calls:  # (a file of the failure its distribution did not install: its reinstall first)
                stray = rule_linux_not_the_file_its_distribution_installed(
                    [c.leaf.path or "", *c.opened], w, owners, proc.interpreter) if c.leaf is not None else None
                if stray is not None:
                    c.fixes = [stray, *(f for f in c.fixes if not (f.action == "install" and f.package == stray.package))]
        out += calls
    return out


def unversioned_name(name: str) -> str:
    """What ctypes.util.find_library(name) looks for on Linux: lib<name>.so, at any version ("portaudio" ->
    "libportaudio.so"). It puts `lib` before any name: "libusb-1.0" -> "liblibusb-1.0.so", which it never finds
    (find_lib_never_found)."""
    return "lib" + name + ".so"


def find_lib_never_found(name: str) -> bool:
    """Whether find_library(name) finds nothing on Linux whatever is installed: a name that begins with `lib`
    (another system's name: macOS's find_library tries '<name>.dylib' too), for which no package is a fix."""
    return name.startswith("lib")


def note_unfound_packages(proc: RecordedProcess, world: ELFWorld) -> None:
    """The system package of each library the process's ctypes.util.find_library found none of (its py_find_library
    events with a result of None), asked of the world: `run`'s RecordingELFWorld keeps each answer for the trace,
    so that the report (verdict_linux.unfound_library) names it on any machine."""
    ask = getattr(world, "system_package", None)
    if ask is None:
        return
    for e in proc.python.values():
        name = found_none(e) if e.get("ev") == "py_find_library" else None
        if name is not None and not find_lib_never_found(name):
            ask(unversioned_name(name))


def note_unstarted_packages(proc: RecordedProcess, world: ELFWorld) -> None:
    """The system package of the program the process died of not starting (rule_exception_is_unstarted_program of
    the exception it ended on and its py_popen events, by name: not a path), asked of the world: `run`'s
    RecordingELFWorld keeps the answer for the trace, so that the report (verdict_linux.unstarted_program) names it
    on any machine. Only that one: a program probed and gone past is never named, and each question may run
    apt-file (seconds)."""
    ask = getattr(world, "program_package", None)
    if ask is None:
        return
    events = [proc.python[k] for k in sorted(proc.python)]
    ends = [e for e in events if e.get("ev") == "py_exception"]
    e = rule_exception_is_unstarted_program(ends[-1], [x for x in events if x.get("ev") == "py_popen"]) if ends else None
    program = not_started(e) if e is not None else None
    if program is not None and "/" not in program:
        ask(program)


def default_world(events: list[dict]) -> ELFWorld:
    """The trace's own facts (elf_system / elf_file events, appended by `dlltrace run`) when it has them,
    else this machine."""
    if any(e.get("ev") == "elf_system" for e in events):
        return RecordedELFWorld(events)
    return LiveELFWorld()
