"""The dependency tree of one load (a dlopen, or `deps x.so`'s), as libtree and lddtree draw it, made from the
engine's lookups (engine.Lookup: the name, the object that asked, each search step with each file tried): each
library with the rule that found it (`reason`: rpath, runpath, LD_LIBRARY_PATH, ld.so.cache, default path,
direct; the RPATH/RUNPATH element as written when it had $ORIGIN/$LIB/$PLATFORM), and where the search stopped
with every file tried and its rule.

Which library is a child of which is the engine's own record: the lookups an object made (its DT_NEEDED, in
order). A library already in the tree is a leaf the second time (`seen`: not expanded again, as libtree does);
a library the process had loaded before the call is `loaded` (its search was another call's). The children
that fail, or hold a failure below them, come first. No words here: render/linux_tree.py draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from dlltrace.elf import ELFFacts
from dlltrace.limits import Limits, limits
from dlltrace.loader.linux import rules
from dlltrace.loader.linux.engine import Lookup
from dlltrace.model import Candidate
from dlltrace.worlds.elf import ELFWorld

# the search step that found a library (SearchGroup.what) as its reason, libtree's tags
REASONS = {"RPATH": "rpath", "RUNPATH": "runpath", "LD_LIBRARY_PATH": "LD_LIBRARY_PATH", "cache": "ld.so.cache",
           "system search path": "default path", "path": "direct"}


@dataclass
class DepNode:
    name: str  # the name asked for: a DT_NEEDED entry, or the call's own name
    path: Optional[str] = None  # the file it resolved to (None: the search found nothing)
    # rpath | runpath | LD_LIBRARY_PATH | ld.so.cache | default path | direct (a name with a slash) | loaded (by an
    # earlier call of the process) | "" (the root, or a failure)
    reason: str = ""
    owner: str = ""  # rpath / runpath: the object whose DT_RPATH / DT_RUNPATH it was
    entry: str = ""  # rpath / runpath: its element as written, when it had a $ORIGIN, $LIB or $PLATFORM ("$ORIGIN/../lib")
    error: str = ""  # ld.so's words when this library failed
    cause: str = ""  # the engine's: not_found | wrong_class | bad_elf | missing_version
    tried: tuple[Candidate, ...] = ()  # a failure's every file tried, in order, each with its rule
    steps: tuple[str, ...] = ()  # a failure's search steps in order (SearchGroup.rule), a step that tried no file too
    seen: bool = False  # shown before in this tree: not expanded again
    children: list["DepNode"] = field(default_factory=list)
    more: int = 0  # its dependencies left out of the tree by a bound (limits.py tree_depth, tree_width)
    cut: str = ""  # which bound: "tree_depth" (none of them drawn) | "tree_width" (the last `more` of them)

    @property
    def fails(self) -> bool:
        """This library, or one below it, fails."""
        return bool(self.error) or any(c.fails for c in self.children)


def rule_reason(lk: Lookup) -> tuple[str, str]:
    """(reason, owner) of a lookup that found its library: the search step of the file found (libtree's tag:
    rpath, runpath, LD_LIBRARY_PATH, ld.so.cache, default path; direct for a name with a slash), with whose
    DT_RPATH / DT_RUNPATH it was; ("loaded", "") for an object already loaded."""
    if lk.how == "already_loaded":
        return "loaded", ""
    for g in lk.groups:
        if any(c.result == "found" for c in g.tried):
            return REASONS.get(g.what, g.what), g.where
    return "", ""


def dst_entry(world: ELFWorld, owner: str, reason: str, found: str, cwd: str = "/") -> str:
    """The DT_RPATH / DT_RUNPATH element of `owner` that put the folder of `found` in the search, as written, when
    it has a dynamic string token ($ORIGIN, $LIB, $PLATFORM): "" otherwise. `cwd`: the current folder of the
    load (an owner opened by a relative path)."""
    facts = world.file(rules.rule_open_relative(owner, cwd)) if owner else None
    if not isinstance(facts, ELFFacts):
        return ""
    raw = facts.runpath if reason == "runpath" else facts.rpath
    folder = found.rsplit("/", 1)[0].rstrip("/") if "/" in found else ""
    sysd = world.system
    for part in (raw or "").split(":"):
        if "$" not in part:
            continue
        got = rules.rule_expand_dst(part, rules.rule_origin(owner, cwd), sysd.lib, sysd.platform)
        if not got:
            continue
        base = got.rstrip("/")
        if folder == base or folder.startswith(base + "/glibc-hwcaps/") or _legacy_sub(folder, base):
            return part
    return ""


def _legacy_sub(folder: str, base: str) -> bool:
    rest = folder[len(base) + 1:] if folder.startswith(base + "/") else None
    return rest is not None and all(p in ("tls", "x86_64", "haswell", "avx512_1", "i686", "i586", "sse2", "aarch64",
                                          "atomics", "asimd") for p in rest.split("/"))


def dep_tree(lookups: Sequence[Lookup], world: ELFWorld, error: str = "", cause: str = "", leaf: str = "",
             stand_in_dir: str = "", failures: Optional[Mapping[str, Lookup]] = None,
             bounds: Optional[Limits] = None, cwd: str = "/") -> Optional[DepNode]:
    """The tree of one load from its lookups (DlopenResult.lookups: the first is the call's own). `error`,
    `cause`, `leaf`: the load's (a missing symbol version fails after every lookup found its file: the library
    named `leaf` carries it). `stand_in_dir`, `failures`: a keep-going walk's last run (loader/linux/static.py),
    where a library resolved to a stand-in is the failure found for it (`failures[name]`: its lookup then).
    `bounds`: the depth and the dependencies under one library (limits.py tree_depth, tree_width; the failing
    first, so a bound leaves out the ones that load first); a library cut by the depth is expanded where it
    comes again higher up, never marked as shown when it was not."""
    if not lookups:
        return None
    b = bounds or limits()
    fails = failures or {}
    root = lookups[0]
    asked: dict[str, list[Lookup]] = {}
    for lk in lookups[1:]:
        asked.setdefault(lk.requester, []).append(lk)
    added: dict[str, Lookup] = {}  # each object's lookup that found it (ld.so maps breadth first: not always the one drawn first)
    for lk in lookups:
        if lk.path and lk.how != "already_loaded":
            added.setdefault(lk.path, lk)

    def stand_in(lk: Lookup) -> Optional[Lookup]:
        if stand_in_dir and lk.path and lk.path.startswith(stand_in_dir.rstrip("/") + "/"):
            return fails.get(lk.name) or Lookup(lk.name, lk.requester, error=f"{lk.name}: not found")
        return None

    # (which objects fail, on the graph of who asked for what, before any is drawn: the failing come first)
    bad: dict[str, bool] = {}

    def failing(lk: Lookup, trail: frozenset[str]) -> bool:
        if lk.error or stand_in(lk) is not None or (cause == "missing_version" and lk.name == leaf):
            return True
        p = lk.path
        if not p or p in trail:
            return False
        if p not in bad:
            bad[p] = False
            bad[p] = any(failing(c, trail | {p}) for c in asked.get(p, []))
        return bad[p]

    shown: set[str] = set()

    def node(lk: Lookup, depth_trail: frozenset[str], depth: int) -> DepNode:
        failed = lk if lk.error else stand_in(lk)
        if failed is not None:
            groups = [g for g in failed.groups if not (stand_in_dir and g.tried and all(  # (a stand-in folder alone)
                c.path.startswith(stand_in_dir.rstrip("/") + "/") for c in g.tried))]
            return DepNode(lk.name, None, error=failed.error or f"{lk.name}: not found", cause=_cause(failed, cause),
                           tried=tuple(c for g in groups for c in g.tried
                                       if not (stand_in_dir and c.path.startswith(stand_in_dir.rstrip("/") + "/"))),
                           steps=tuple(g.rule for g in groups))
        reason, owner = rule_reason(added.get(lk.path or "", lk))
        n = DepNode(lk.name, lk.path, reason, owner)
        if reason in ("rpath", "runpath") and lk.path:
            n.entry = dst_entry(world, owner, reason, lk.path, cwd)
        if cause == "missing_version" and lk.name == leaf:
            n.error, n.cause = error, cause
        p = lk.path or ""
        if p in shown or p in depth_trail:
            n.seen = True
            return n
        kids = asked.get(p, [])
        if kids and depth >= b.tree_depth:
            n.more, n.cut = len(kids), "tree_depth"
            return n
        shown.add(p)
        order = sorted(range(len(kids)), key=lambda i: (not failing(kids[i], frozenset({p})), i))
        if len(order) > b.tree_width:
            n.more, n.cut = len(order) - b.tree_width, "tree_width"
            order = order[:b.tree_width]
        n.children = [node(kids[i], depth_trail | {p}, depth + 1) for i in order]
        return n

    return node(root, frozenset(), 0)


def _cause(lk: Lookup, load_cause: str) -> str:
    text = lk.error
    if "wrong ELF class" in text:
        return "wrong_class"
    if "cannot open shared object file" in text or text.endswith("not found"):
        return "not_found"
    if "version `" in text:
        return "missing_version"
    return load_cause or "bad_elf"
