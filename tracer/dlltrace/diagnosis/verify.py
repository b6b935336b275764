"""Fix verification: every fix is applied to a copy of the world and the process, and the failing
call is simulated again, with what the program does around it (torch's retry with LoadLibraryW,
ctypes' flags, CPython's flags for an import). A fix is offered only if the call then loads.

Also "every missing DLL at once": once the leaf is made loadable (a stand-in file the model
assumes provides what is asked), the call is re-run, and the next DLL it fails on is listed, until
it loads or no stand-in helps (`also_missing`).

Pure logic over the loader model (loader/windows/engine.Simulator), a World and a ProcessState;
it never knows which world it has. The hypotheses live in an `OverlayWorld` (worlds/overlay.py): the world
itself is never changed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable, Optional

from dlltrace import winpath
from dlltrace.emulate.python import TORCH_FLAGS, rule_ctypes_winmode, rule_torch_retry
from dlltrace.loader.windows.engine import Simulator
from dlltrace.loader.windows.rules import InitFacts
from dlltrace.model import (
    APPLIED_ACTIONS,
    LOAD_WITH_ALTERED_SEARCH_PATH,
    AlsoMissing,
    CallResult,
    FileFacts,
    Fix,
    Outcome,
    PEFacts,
)
from dlltrace.loader.fixloop import Attempt, verify_fixes
from dlltrace.loader.walk import Step, keep_going
from dlltrace.worlds.overlay import OverlayWorld
from dlltrace.worlds.world import ProcessState, World, listed_by

MAX_ALSO_MISSING = 32  # a closure with more missing DLLs than this is cut (and says so: it stops listing)
MAX_STEPS = 4  # a fix with more steps than this is not looked for


class _Everything(frozenset):
    """The exports of a stand-in file: it provides whatever is asked (a file the model has no facts
    about, assumed to be the right build of what its name says)."""

    def __contains__(self, item: object) -> bool:
        return True


ANY_EXPORTS: frozenset = _Everything()


def stand_in(path: str, machine: str) -> FileFacts:
    """A DLL the model assumes: the process's machine, no imports, every export (an installed
    package's file whose facts the world does not have, or the leaf made loadable)."""
    return FileFacts(path=winpath.normalize(path),
                     pe=PEFacts(machine=machine, exports=ANY_EXPORTS, export_ordinals=ANY_EXPORTS))


@dataclass
class Situation:
    """A failing call and what the model needs to run it again: the world, the process as it was at
    the call (a copy), and the result (its name, flags, op and what made it)."""

    world: World
    process: ProcessState
    res: CallResult
    # files a fix must add to the world before the call (install_package, copy_file), already applied
    added: tuple[FileFacts, ...] = ()
    steps: tuple[Fix, ...] = field(default_factory=tuple)
    # the call the program made, when `res` is a later failure of a re-run (a next step's situation: its
    # failure may be a preload's); None: `res` is the call
    call: Optional[CallResult] = None

    @property
    def the_call(self) -> CallResult:
        return self.call if self.call is not None else self.res


def snapshot(process: ProcessState) -> ProcessState:
    """The process as it is now, for re-runs: a fork (ProcessState.fork), valid until the process
    makes its next call; every re-run forks it again."""
    return process.fork()


# --- applying a fix ---------------------------------------------------------------------------------------------
def applies(fix: Fix) -> bool:
    """Whether the model can apply this fix and re-run the call (model.APPLIED_ACTIONS)."""
    if fix.action == "flags":  # a full path the model knows, or dropping 0x8
        return fix.reason == "altered_with_search_flags" or bool(fix.path)
    if fix.action == "install":  # an installer whose file lands where the model knows (System32)
        return bool(fix.path)
    if fix.action in ("use_64bit_python", "use_build"):  # (re-run as a process of the DLL's machine)
        return bool(fix.other_machine)
    return fix.action in APPLIED_ACTIONS


@dataclass
class _Applied:
    world: OverlayWorld
    process: ProcessState
    preloads: list[tuple[str, int]] = field(default_factory=list)  # (path, flags) loaded before the call
    name: Optional[str] = None  # the call's name, changed
    flags: Optional[int] = None  # the call's flags, changed


def _apply_one(fix: Fix, a: _Applied, sit: Situation) -> None:
    act = fix.action
    p = a.process
    if act == "add_dll_directory":
        if a.world.is_dir(fix.folder) and not any(winpath.same(f, fix.folder) for f, _ in p.dll_directories):
            p.dll_directories.append((winpath.normalize(fix.folder), "os.add_dll_directory" if fix.python else ""))
    elif act == "path_prepend":
        p.path = [fix.folder, *p.path]
    elif act == "set_dll_directory":
        p.dll_directory = winpath.normalize(fix.folder)
    elif act == "set_env":
        p.env[fix.variable] = fix.value
        if fix.variable.upper() == "PATH":
            p.path = [x for x in fix.value.split(";") if x.strip()]
    elif act == "preload_path":
        flags = rule_ctypes_winmode(fix.path, None) if fix.python else LOAD_WITH_ALTERED_SEARCH_PATH
        a.preloads.append((fix.path, flags))
    elif act == "preload":  # the matching copy first: the copy loaded now (bound) is not loaded first
        old = p.find_loaded_by_path(fix.bound) if fix.bound else None
        if old is not None:
            p.remove_loaded(old)
        a.preloads.append((fix.path, rule_ctypes_winmode(fix.path, None) if fix.python else LOAD_WITH_ALTERED_SEARCH_PATH))
    elif act == "copy_file":
        src = a.world.file(fix.path)
        dest = winpath.join(fix.dest, winpath.basename(fix.path))
        a.world.add(dataclasses.replace(src, path=dest) if src is not None else stand_in(dest, p.machine))
    elif act == "install_package":
        a.world.add(stand_in(winpath.join(fix.folder, fix.name), p.machine))
    elif act == "install":
        if fix.path:
            a.world.add(stand_in(fix.path, p.machine))
    elif act in ("use_64bit_python", "use_build"):
        p.machine = fix.other_machine
    elif act == "cpu_build":  # a build of the same DLL whose initialization does not need the feature
        have = a.world.file(fix.path) if fix.path else None
        if isinstance(have, InitFacts) and have.needs_cpu:
            a.world.add(dataclasses.replace(have, needs_cpu=tuple(x for x in have.needs_cpu if x.lower() != fix.lacks.lower())))
    elif act == "vc_redist":  # the redistributable puts a current copy in System32 (with the export it lacked)
        path = winpath.join(a.world.system.system32, fix.name)
        have = a.world.file(path)
        if have is None or have.pe is None:
            have = stand_in(path, p.machine)
        assert have.pe is not None
        version = f"{fix.need}.0.0" if fix.need else have.pe.file_version
        exports = have.pe.exports | ({fix.lacks} if fix.lacks else set())
        a.world.add(dataclasses.replace(have, pe=dataclasses.replace(have.pe, file_version=version, exports=frozenset(exports))))
    elif act == "rename_file":  # the copy at fault renamed away: the search goes on past its folder
        a.world.remove(fix.path)
    elif act == "change_flags":
        a.flags = fix.flags
    elif act == "flags":
        if fix.reason == "altered_with_search_flags":
            a.flags = (sit.res.flags & ~LOAD_WITH_ALTERED_SEARCH_PATH)
        else:
            if fix.path:
                a.name = fix.path
            if fix.flags is not None:
                a.flags = fix.flags
    elif act == "activate_conda":
        p.path = [winpath.join(fix.folder, "Library", "bin"), fix.folder, *p.path]
    elif act == "import_first":  # what loads `bound` now comes after the call: it is not loaded yet
        old_copy = p.find_loaded_by_path(fix.bound) if fix.bound else None
        if old_copy is not None:
            p.remove_loaded(old_copy)
    elif act == "package_mechanism":
        for path in fix.files:  # (the files the package's loader loads by full path)
            a.preloads.append((path, rule_ctypes_winmode(path, None)))
        if fix.folder:  # (a package whose import adds a DLL folder: os.add_dll_directory, as delvewheel's patch)
            p.dll_directories.append((fix.folder, fix.call))
    for step in fix.then:
        _apply_one(step, a, sit)


def prepared(sit: Situation, fix: Optional[Fix] = None) -> _Applied:
    """Copies of the world and the process with the situation's steps and `fix` applied."""
    a = _Applied(OverlayWorld(sit.world, sit.added), sit.process.fork())
    for step in sit.steps:
        _apply_one(step, a, sit)
    if fix is not None:
        _apply_one(fix, a, sit)
    return a


def rerun(sit: Situation, fix: Optional[Fix]) -> CallResult:
    """The failing call again, with `fix` (and its `then` steps) applied first to copies."""
    a = prepared(sit, fix)
    sim = Simulator(a.world, a.process)
    for path, flags in a.preloads:
        pre = sim.load_library(path, flags, origin="preload")
        if pre.error:
            return pre
    return call_again(sim, sit.the_call, name=a.name, flags=a.flags)


def call_again(sim: Simulator, res: CallResult, name: Optional[str] = None, flags: Optional[int] = None) -> CallResult:
    """`res`'s call made again on `sim`, with what the program does around it: torch's loop retries a
    126 with LoadLibraryW after putting its folders in front of PATH (emulate/python.rule_torch_retry);
    every other call is made once with its own flags (ctypes' and CPython's are already in them)."""
    name = name if name is not None else res.name
    if rule_ctranslate2_cublas_loader(res, name):
        # its cuBLAS loader runs SetDllDirectoryA(%CUDA_PATH%\bin) first when CUDA_PATH is set
        cuda = next((v for k, v in sim.process.env.items() if k.upper() == "CUDA_PATH"), "")
        if cuda:
            sim.process.dll_directory = winpath.join(cuda, "bin")
    if res.origin_kind in ("torch", "torch_retry"):
        first = sim.load_library(name, TORCH_FLAGS if flags is None else flags, origin=res.origin,
                                 origin_kind="torch")
        if not first.error or not rule_torch_retry(first.error):
            return first
        folders = [f for f, label in sim.process.dll_directories if label == "torch"]
        sim.process.path = [*folders, *(p for p in sim.process.path if not any(winpath.same(p, f) for f in folders))]
        return sim.load_library(name, 0, op="LoadLibraryW", origin=res.origin, origin_kind="torch_retry")
    op = res.op if res.op in ("LoadLibraryExW", "LoadLibraryExA", "LoadLibraryW", "LoadLibraryA", "start") else "LoadLibraryExW"
    return sim.load_library(name, res.flags if flags is None else flags, op=op, origin=res.origin,
                            origin_kind=res.origin_kind, origin_module=res.origin_module)


def rule_ctranslate2_cublas_loader(res: CallResult, name: str) -> bool:
    """CTranslate2 4.x's cuBLAS loader (src/cuda/cublas_stub.cc, get_so_handle; docs/packages.md 1.3):
    at the first cuBLAS call ctranslate2.dll runs SetDllDirectoryA(%CUDA_PATH%\bin) when CUDA_PATH is
    set, then LoadLibraryA("cublas64_<major>.dll"). A re-run of that load does the same first, so a
    CUDA_PATH fix is re-run as the package would apply it."""
    return (res.origin_kind == "runtime" and res.origin_module.lower() == "ctranslate2.dll"
            and winpath.basename(name).lower().startswith("cublas64_"))


def outcome_of(r: CallResult) -> Outcome:
    if not r.error or r.leaf is None:
        return Outcome(error=r.error)
    return Outcome(error=r.error, leaf=r.leaf.name, cause=r.leaf.cause, chain=tuple(r.chain))


def same_failure(a: CallResult, b: CallResult) -> bool:
    if a.error != b.error:
        return False
    if a.leaf is None or b.leaf is None:
        return a.leaf is None and b.leaf is None
    return a.leaf.name.lower() == b.leaf.name.lower() and a.leaf.cause == b.leaf.cause


def loaded_names(r: CallResult) -> set[str]:
    """The base names the re-run found and bound (lower case)."""
    if r.tree is None:
        return set()
    return {winpath.basename(n.name).lower() for n in r.tree.walk() if n.error == 0 and n.path}


# --- every missing DLL at once ------------------------------------------------------------------------------------
def also_missing(sit: Situation) -> list[AlsoMissing]:
    """What the call would fail on next once its leaf loads, and after that, ... : each leaf in turn
    is made loadable (the world's own copy, else a stand-in) in the first folder the load searched for
    it, and the call is made again (the one keep-going walk, loader/walk.py). Stops when it loads, when
    the failure is not one a file can fix, or when a stand-in does not move the failure."""
    fixable = ("not_found", "bad_machine", "not_pe")
    if sit.res.leaf is None or sit.res.leaf.cause not in fixable:
        return []
    system32 = sit.world.system.system32
    seen = {sit.res.leaf.name.lower()}

    def run(stand_ins: dict[str, FileFacts]) -> CallResult:
        return rerun(dataclasses.replace(sit, added=(*sit.added, *stand_ins.values())), None) if stand_ins else sit.res

    def step(r: CallResult, stand_ins: dict[str, FileFacts]) -> Optional[Step[AlsoMissing, FileFacts]]:
        if not r.error or r.leaf is None or r.leaf.cause not in fixable:
            return None
        found = None
        if r is not sit.res:  # (the call's own leaf is the report's; what comes after it is "also missing")
            name = r.leaf.name.lower()
            if name in seen:
                return None
            seen.add(name)
            installed = tuple(p for p in sit.world.files_named(r.leaf.name) if (f := sit.world.file(p)) is not None
                              and f.pe is not None and f.pe.machine == sit.process.machine)
            found = AlsoMissing(name=r.leaf.name, cause=r.leaf.cause, needed_by=r.leaf.parent or "",
                                chain=tuple(r.chain), installed_at=installed)
        # the leaf made loadable: a copy the world has elsewhere (its own imports are then followed), else a
        # stand-in, in the first folder the load searched for it, where the search finds it first (System32 is
        # not searched by every load, e.g. DLL_LOAD_DIR or USER_DIRS alone)
        node = r.tree.failure_chain()[-1] if r.tree is not None else None
        spot = winpath.join(node.search[0].folder if node is not None and node.search else system32, r.leaf.name)
        real = next((f for p in sit.world.files_named(r.leaf.name) if (f := sit.world.file(p)) is not None
                     and f.pe is not None and f.pe.machine == sit.process.machine and f.error is None), None)
        facts = dataclasses.replace(real, path=spot) if real is not None else stand_in(spot, sit.process.machine)
        return Step(found, {winpath.key(spot): facts})

    return keep_going(run, step, MAX_ALSO_MISSING + 1).found


# --- verifying candidates -----------------------------------------------------------------------------------------
def verify(sit: Situation, candidates: Iterable[Fix], follow_up, names: tuple[str, ...] = (), depth: int = 0) -> list[Fix]:
    """The candidates that make the call load, each marked verified with its outcome; one that only
    moves the failure is completed with the follow-up fixes `follow_up(situation after it)` proposes
    (depth-first, MAX_STEPS at most). Advice the model cannot apply is kept, unverified (None), after
    them. Ranked: complete fixes first, fewer steps first, then in the order proposed. The one verification
    loop (loader/fixloop.py), with this call's re-run."""
    names = names or ((sit.res.leaf.name,) if sit.res.leaf is not None else ())

    def attempt(s: Situation, fix: Fix) -> Attempt[Situation]:
        r = rerun(s, fix)
        if not r.error:
            return Attempt(True, covers=_covered(names, r))
        same = same_failure(r, s.res)
        after = None
        if not same and r.leaf is not None:
            after = dataclasses.replace(dataclasses.replace(s, steps=(*s.steps, fix)), res=r, call=s.the_call)
        return Attempt(False, same=same, unknowable=same and _unknowable(s, r), outcome=outcome_of(r),
                       covers=_covered(names, r), after=after)

    def checkable(fix: Fix) -> bool:
        return applies(fix) and not any(rule_copy_of_a_record_listed_file(sit.world, f) for f in (fix, *fix.then))

    return verify_fixes(sit, candidates, applies=checkable, attempt=attempt, follow_up=follow_up, key=_key,
                        names=names, max_steps=MAX_STEPS, depth=depth)


def rule_copy_of_a_record_listed_file(world: World, fix: Fix) -> bool:
    """A copy of a file the world knows only from its distribution's record (RecordedWorld.add_listed: the trace
    never looked at it): its own imports are unknown (a stand-in's facts), so whether its dependencies are found
    once it is moved away from them cannot be checked -- pyzmq 25's libzmq copied next to context.pyd leaves the
    libsodium it imports behind in pyzmq.libs (the field test, under Wine). Offered, not checked."""
    return fix.action == "copy_file" and bool(fix.path) and listed_by(world, fix.path) is not None


def _unknowable(sit: Situation, r: CallResult) -> bool:
    """A DllMain failure whose cause is in no file the model knows (a trace records only that it
    failed: FileFacts.dllmain_fails): whether a fix would help, the model cannot tell."""
    if r.leaf is None or r.leaf.cause != "init_failed" or not r.leaf.path:
        return False
    f = sit.world.file(r.leaf.path)
    return f is not None and f.dllmain_fails


def _key(f: Fix) -> tuple:
    return (f.action, winpath.key(f.folder) if f.folder else "", winpath.key(f.path) if f.path else "")


def _covered(names: tuple[str, ...], r: CallResult) -> tuple[str, ...]:
    """The missing DLLs the re-run `r` found: all of them when it loads; else those it bound, never the
    one it fails on next."""
    if not r.error:
        return tuple(names)
    got = loaded_names(r) - ({r.leaf.name.lower()} if r.leaf is not None else set())
    return tuple(n for n in names if n.lower() in got)

