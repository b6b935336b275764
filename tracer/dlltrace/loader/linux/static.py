"""Static mode for a shared object (`dlltrace deps x.so` on Linux, commands/deps.py): the
DT_NEEDED closure of x.so as a plain program's dlopen would load it, through the same ld.so model, and
every problem in it, each found by re-running the load with a stand-in for the ones before (so one missing
library does not hide the next), like the Windows static mode.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Optional

from dlltrace.elf import ELFFacts, ELFResult
from dlltrace.loader.linux.engine import DlopenResult, LinuxProcess, LinuxSimulator, Lookup
from dlltrace.loader.linux.rules import RTLD_NOW
from dlltrace.loader.linux.tree import DepNode, dep_tree
from dlltrace.loader.walk import Step, keep_going
from dlltrace.classify import is_extension
from dlltrace.worlds.elf import ELFWorld, OverlayWorld

STAND_IN_DIR = "/dlltrace-static/stand-ins"
PROGRAM = "/dlltrace-static/program"  # a program with no DT_RPATH / DT_RUNPATH / DT_NEEDED of its own


def static_roots(paths: list[str]) -> list[str]:
    """The order in which the shared objects of a package (a Linux wheel's, an installed folder's) are dlopened,
    each as a root of its own unless an earlier root loaded it: the Python extensions first (is_extension:
    x.cpython-312-x86_64-linux-gnu.so, x.abi3.so, a bare x.so), then the other objects outside a <pkg>.libs
    folder (a library a package loads with ctypes), then the libraries auditwheel grafts into <pkg>.libs, each
    group by path. A grafted library without an RPATH of its own (auditwheel's copylib gives it none when the
    original had none) finds what it needs through the DT_RPATH of the extension that loaded it -- ld.so searches
    the loader's DT_RPATH, not a DT_RUNPATH -- as `import` does for real; dlopened alone by path it would not
    (scipy.libs/libgfortran's libquadmath: "cannot open shared object file")."""
    def rank(p: str) -> int:
        return 0 if is_extension(posixpath.basename(p)) else 2 if posixpath.dirname(p).endswith(".libs") else 1
    return sorted(paths, key=lambda p: (rank(p), p))


@dataclass(frozen=True)
class StaticProblem:
    name: str  # the library that failed
    cause: str  # engine's: not_found | wrong_class | bad_elf | missing_version
    needed_by: str  # the object that needs it
    error: str  # ld.so's words
    candidates: tuple[str, ...] = ()  # every file tried for it


@dataclass
class StaticResult:
    path: str
    loaded: list[str] = field(default_factory=list)  # the closure, when it loads (with stand-ins: the real ones)
    problems: list[StaticProblem] = field(default_factory=list)
    tree: Optional[DepNode] = None  # the closure as a tree, each library with its reason, each problem where it is
    # every object the last run found, as it found it (a stand-in not), also when that run failed on a version
    # after mapping them all: what deps FOLDER does not load again on its own
    mapped: list[str] = field(default_factory=list)
    # (name asked for, the file found, who asked) of each library the last run found, as it found it (a stand-in not)
    found: list[tuple[str, str, str]] = field(default_factory=list)


def static_deps(path: str, world: ELFWorld, env: Optional[dict[str, str]] = None, limit: int = 50) -> StaticResult:
    """The load of `path` by a plain program (dlopen, RTLD_NOW), and each problem in its closure (the one
    keep-going walk, loader/walk.py: a stand-in in STAND_IN_DIR, put first on LD_LIBRARY_PATH, for each)."""
    env = dict(env or {})
    failed: dict[str, Lookup] = {}  # each leaf's lookup in the run that failed on it (its files tried, with their rules)

    def run(stand_ins: dict[str, ELFResult]) -> DlopenResult:
        w = OverlayWorld(world, {PROGRAM: ELFFacts(), **stand_ins})
        e = dict(env)
        if stand_ins:
            e["LD_LIBRARY_PATH"] = STAND_IN_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        sim = LinuxSimulator(w, LinuxProcess(PROGRAM, env=e))
        sim.start()
        return sim.dlopen(path, RTLD_NOW)

    def step(res: DlopenResult, _: dict[str, ELFResult]) -> Optional[Step[StaticProblem, ELFResult]]:
        if not res.error:
            return None
        lk = next((x for x in reversed(res.lookups) if x.error), None)
        leaf = res.leaf or (lk.name if lk else path)
        problem = StaticProblem(leaf, res.cause, lk.requester if lk else "", res.error, tuple(lk.tried) if lk else ())
        if lk is not None:
            failed.setdefault(leaf, lk)
        if res.cause == "missing_version" or "/" in leaf or leaf == path:
            return Step(problem, last=True)  # (a stand-in cannot stand for a version, nor for the file asked for)
        return Step(problem, {posixpath.join(STAND_IN_DIR, leaf): ELFFacts(soname=leaf)})

    walk = keep_going(run, step, limit)
    out = StaticResult(path, problems=walk.found)
    last = walk.result
    out.tree = dep_tree(last.lookups, world, last.error, last.cause, last.leaf, STAND_IN_DIR, failed)
    if not walk.result.error:
        out.loaded = [p for p in walk.result.loaded if not p.startswith(STAND_IN_DIR + "/")]
    out.mapped = list(dict.fromkeys(lk.path for lk in last.lookups
                                    if lk.path and not lk.path.startswith(STAND_IN_DIR + "/")))
    out.found = list(dict.fromkeys((lk.name, lk.path, lk.requester) for lk in last.lookups
                                   if lk.path and not lk.path.startswith(STAND_IN_DIR + "/")))
    return out
