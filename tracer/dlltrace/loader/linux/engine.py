"""The simulated ld.so: applies the rules of rules.py to an ELF world and a process, in the order of
glibc's elf/dl-load.c _dl_map_object and elf/dl-deps.c _dl_map_object_deps.

    sim = LinuxSimulator(world, LinuxProcess(exe="/usr/bin/python3", env={...}))
    start = sim.start()                       # the executable's DT_NEEDED closure
    res = sim.dlopen("libcudart.so.11.0")     # one DlopenResult: error (dlerror()'s words), path, lookups

Every lookup of a bare name is a Lookup: the name, the object that asked, and each search step (a
SearchGroup: RPATH of X, LD_LIBRARY_PATH, RUNPATH of X, the cache, the system search path) with each
file tried in it (model.Candidate: path, rule, result), in the order ld.so tries them (LD_DEBUG=libs's
"trying file=" lines; la_objsearch's calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from dlltrace.elf import ELFError, ELFFacts
from dlltrace.loader.linux import rules
from dlltrace.loader.linux.rules import DirStatus, LoadedRef, ObjRef
from dlltrace.model import Candidate
from dlltrace.worlds.elf import ELFWorld

ObjKind = Literal["executable", "library", "loaded"]


@dataclass(eq=False)
class LinuxObject:
    """One object in the namespace (glibc's struct link_map)."""

    path: str  # l_name: the path it was opened by ("" never: the executable has its path here)
    facts: ELFFacts
    kind: ObjKind
    file_id: str
    loader: Optional["LinuxObject"] = None  # l_loader: the object whose DT_NEEDED loaded it
    names: list[str] = field(default_factory=list)  # l_libname
    origin: str = "/"
    deps: list["LinuxObject"] = field(default_factory=list)
    rpath_dirs: Optional[tuple[str, ...]] = None  # decomposed on first use
    runpath_dirs: Optional[tuple[str, ...]] = None

    def ref(self) -> ObjRef:
        return ObjRef(self.path, self.facts.rpath if self.facts.runpath is None else None, self.facts.runpath,
                      self.facts.nodeflib, self.kind == "executable", self.kind == "loaded")

    def loaded_ref(self) -> LoadedRef:
        return LoadedRef("" if self.kind == "executable" else self.path, tuple(self.names), self.facts.soname)


@dataclass
class LinuxProcess:
    exe: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"
    secure: bool = False
    # LD_AUDIT libraries (the recorder): ld.so loads each, with its dependencies, into a namespace of its own
    # before the program's; those searches are not the program's, but the folders they find missing are
    # skipped by the program's searches after (the statuses are shared)
    audit: list[str] = field(default_factory=list)
    preload: list[str] = field(default_factory=list)  # LD_PRELOAD paths: mapped after the executable, before its deps


@dataclass
class SearchGroup:
    """One step of a search: what (rules.What), whose (the object for RPATH/RUNPATH), the la_objsearch flag,
    and each file tried."""

    what: str
    where: str = ""
    ser: int = 0
    tried: list[Candidate] = field(default_factory=list)

    @property
    def rule(self) -> str:
        return f"{self.what} of {self.where}" if self.where else self.what


@dataclass
class Lookup:
    """One _dl_map_object call: a name asked for by an object (requester: its path; "" for the program's
    dlopen from ld.so), and how it ended."""

    name: str
    requester: str
    groups: list[SearchGroup] = field(default_factory=list)
    path: Optional[str] = None  # the object it resolved to
    how: str = ""  # "search" | "already_loaded" | "same_file" | "path"
    error: str = ""

    @property
    def tried(self) -> list[str]:
        return [c.path for g in self.groups for c in g.tried]


@dataclass
class DlopenResult:
    name: str
    flags: int
    error: str = ""  # dlerror()'s words; "" when it loaded
    path: Optional[str] = None
    lookups: list[Lookup] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)  # the objects it added, in load order
    cause: str = ""  # not_found | wrong_class | bad_elf | missing_version | invalid_mode | noload
    leaf: str = ""  # the name that failed


class LoadFailure(Exception):
    def __init__(self, text: str, cause: str, leaf: str):
        super().__init__(text)
        self.text, self.cause, self.leaf = text, cause, leaf


class LinuxSimulator:
    def __init__(self, world: ELFWorld, process: LinuxProcess):
        self.world = world
        self.process = process
        self.system = world.system
        self.env = rules.rule_secure_mode(process.env, process.secure)
        self.loaded: list[LinuxObject] = []
        self.dir_status: dict[tuple[str, int], DirStatus] = {}
        self.main: Optional[LinuxObject] = None
        self.env_dirs: tuple[str, ...] = ()
        self.lookups: list[Lookup] = []
        self.preload_ignored: list[str] = []  # ld.so's lines for the LD_PRELOAD objects it could not map (rules.rule_preload_ignored)
        self._in_audit = False
        # rule_loaded_by_soname's and rule_same_file's answers over self.loaded as dicts (loaded_index)
        self._index_of: Optional[list[LinuxObject]] = None
        self._index_len = 0
        self._by_name: dict[str, int] = {}
        self._by_id: dict[str, int] = {}

    # --- process start ----------------------------------------------------------------------------
    def start(self) -> DlopenResult:
        """Map the executable and its DT_NEEDED closure (breadth first), then check the versions."""
        facts = self.world.file(self.process.exe)
        exe = self.process.exe
        if not isinstance(facts, ELFFacts):
            return DlopenResult(exe, 0, error=f"{exe}: cannot execute: not an ELF file here", cause="bad_elf", leaf=exe)
        real = self.world.real_path(exe)  # $ORIGIN of the executable: /proc/self/exe, links resolved
        self.main = LinuxObject(exe, facts, "executable", self.world.file_id(exe), origin=rules.rule_origin(real))
        self.loaded.append(self.main)
        if facts.interp:  # ld.so itself is in the namespace from the start (its soname matches DT_NEEDED)
            ld = self.world.file(facts.interp)
            if isinstance(ld, ELFFacts):
                self.loaded.append(LinuxObject(facts.interp, ld, "library", self.world.file_id(facts.interp),
                                               names=[facts.interp], origin=rules.rule_origin(facts.interp)))
        llp = rules.rule_ld_library_path(self.env, self.process.secure)
        if llp is not None:
            self.env_dirs = rules.rule_decompose_path(llp, lambda s: self._expand(self.main, s), ":;")
        res = DlopenResult(exe, 0, path=exe)
        for lib in self.process.audit:
            self._audit_namespace(lib)
        try:
            pre = []
            for p in self.process.preload:
                try:
                    o = self._map_object(self.main, p, "library", res)
                except LoadFailure as e:  # (not the start's failure: ld.so says so and goes on without it)
                    self.preload_ignored.append(rules.rule_preload_ignored(p, e.text))
                    continue
                if o is not None:
                    pre.append(o)
            new = pre + self._map_deps(self.main, res, pre)
            self._check_versions([self.main, *new])
            res.loaded = [o.path for o in new]
        except LoadFailure as e:
            res.error, res.cause, res.leaf = e.text, e.cause, e.leaf
        return res

    # --- dlopen ---------------------------------------------------------------------------------------
    def dlopen(self, name: str, flags: int = rules.RTLD_NOW, caller: Optional[LinuxObject] = None) -> DlopenResult:
        """dlopen(name, flags) called from `caller` (default: the executable): its DT_RUNPATH / DT_RPATH are
        the search's, but the new object has no loader (its dependencies' RPATH chain stops at it)."""
        res = DlopenResult(name, flags)
        mode = rules.rule_dlopen_flags(flags)
        if mode.invalid:
            res.error, res.cause = "invalid mode for dlopen(): Invalid argument", "invalid_mode"
            return res
        caller = caller or self.main
        before = list(self.loaded)
        try:
            obj = self._map_object(caller, name, "loaded", res, callmap=True, noload=mode.noload)
            if obj is None:
                res.cause = "noload"
                return res
            new = [obj] if obj not in before else []
            new += self._map_deps(obj, res)
            self._check_versions([obj, *self._closure(obj)])
            res.path = obj.path
            res.loaded = [o.path for o in new]
        except LoadFailure as e:
            res.error, res.cause, res.leaf = e.text, e.cause, e.leaf
            self.loaded = before  # a failed dlopen unloads what it loaded; the folder statuses stay
        return res

    # --- the pieces --------------------------------------------------------------------------------------
    def _expand(self, obj: Optional[LinuxObject], s: str) -> Optional[str]:
        sysd = self.system
        return rules.rule_expand_dst(s, obj.origin if obj is not None else None, sysd.lib, sysd.platform,
                                     self.process.secure, obj is not None and obj.kind == "executable",
                                     sysd.system_dirs)

    def _rpath(self, obj: LinuxObject) -> tuple[str, ...]:
        if obj.rpath_dirs is None:
            v = obj.facts.rpath if obj.facts.runpath is None else None
            obj.rpath_dirs = rules.rule_decompose_path(v, lambda s: self._expand(obj, s)) if v else ()
        return obj.rpath_dirs

    def _runpath(self, obj: LinuxObject) -> tuple[str, ...]:
        if obj.runpath_dirs is None:
            v = obj.facts.runpath
            obj.runpath_dirs = rules.rule_decompose_path(v, lambda s: self._expand(obj, s)) if v else ()
        return obj.runpath_dirs

    def _closure(self, obj: LinuxObject) -> list[LinuxObject]:
        seen: list[LinuxObject] = [obj]
        i = 0
        while i < len(seen):
            for d in seen[i].deps:
                if d not in seen:
                    seen.append(d)
            i += 1
        return seen[1:]

    def _audit_namespace(self, lib: str) -> None:
        """An LD_AUDIT library and its dependencies, loaded into a new namespace (nothing in it, ld.so
        included): only the folder statuses its searches set stay."""
        saved, saved_lookups = self.loaded, list(self.lookups)
        self.loaded = []
        self._in_audit = True
        scratch = DlopenResult(lib, 0)
        try:
            obj = self._map_object(None, lib, "loaded", scratch)
            if obj is not None:
                self._map_deps(obj, scratch)
        except LoadFailure:
            pass  # ld.so goes on without an audit library it cannot load
        self.loaded, self.lookups = saved, saved_lookups
        self._in_audit = False

    def _map_deps(self, root: LinuxObject, res: DlopenResult, more: Optional[list[LinuxObject]] = None) -> list[LinuxObject]:
        """_dl_map_object_deps: breadth first, each DT_NEEDED in order, loaded with its needer as loader; the
        first that fails fails the whole load. `more`: objects queued after root (LD_PRELOAD's)."""
        queue = [root, *(more or [])]
        new: list[LinuxObject] = []
        i = 0
        while i < len(queue):
            obj = queue[i]
            i += 1
            if obj.deps:  # mapped before (an object already loaded): its deps are loaded too
                continue
            for n in obj.facts.needed:
                before = len(self.loaded)
                dep = self._map_object(obj, n, "library", res)
                assert dep is not None
                if len(self.loaded) > before:
                    new.append(dep)
                if dep not in obj.deps:
                    obj.deps.append(dep)
                if dep not in queue:
                    queue.append(dep)
        return new

    def _check_versions(self, objs: list[LinuxObject]) -> None:
        for obj in objs:
            by_name: dict[str, Optional[ELFFacts]] = {}
            dep_path: dict[str, str] = {}
            for d in obj.deps:
                for n in d.names + ([d.facts.soname] if d.facts.soname else []):
                    by_name.setdefault(n, d.facts)
                    dep_path.setdefault(n, d.path)
            got = rules.rule_version_needs(obj.facts, by_name)
            if got is not None:
                f, v = got
                raise LoadFailure(rules.version_text(dep_path[f], v, obj.path), "missing_version", f)

    def _map_object(self, loader: Optional[LinuxObject], name: str, kind: ObjKind, res: DlopenResult,
                    callmap: bool = False, noload: bool = False) -> Optional[LinuxObject]:
        """_dl_map_object: the object already loaded for `name`, or the one the search finds, mapped."""
        lk = Lookup(name, loader.path if loader is not None else "")
        res.lookups.append(lk)
        self.lookups.append(lk)
        by_name, by_id = self.loaded_index()
        i = by_name.get(name)  # (rules.rule_loaded_by_soname's answer: loaded_index)
        if i is not None:
            o = self.loaded[i]
            if name not in o.names and name != o.path:
                o.names.append(name)
                by_name.setdefault(name, i)
            lk.path, lk.how = o.path, "already_loaded"
            return o
        other_class = False
        found: Optional[tuple[str, ELFFacts]] = None
        if rules.rule_name_has_slash(name):
            real = self._expand(loader, name) if loader is not None and kind == "library" else name
            lk.how = "path"
            if real:
                at = rules.rule_open_relative(real, self.process.cwd)  # (the file read: from the current folder)
                facts = self.world.file(at)
                v = rules.rule_verify_elf(facts, self.system.elf_class, self.system.machine) if facts is not None else None
                g = SearchGroup("path", ser=rules.LA_SER_ORIG)
                lk.groups.append(g)
                if facts is None:
                    g.tried.append(Candidate(real, "path", "not_there"))
                elif v == "bad":
                    assert isinstance(facts, ELFError)
                    g.tried.append(Candidate(real, "path", "not_pe"))
                    raise self._fail(lk, f"{real}: {facts.message.split(' (')[0]}", "bad_elf", name)
                elif v == "ok":
                    assert isinstance(facts, ELFFacts)
                    g.tried.append(Candidate(real, "path", "found"))
                    found = (real, facts)
                else:
                    g.tried.append(Candidate(real, "path", "wrong_machine"))
                    other_class = v == "wrong_class"
        else:
            lk.how = "search"
            found, other_class = self._search(loader, name, lk)
        if found is None:
            if other_class:
                raise self._fail(lk, f"{name}: {rules.wrong_class_text(self.system.elf_class)}", "wrong_class", name)
            raise self._fail(lk, f"{name}: cannot open shared object file: No such file or directory", "not_found", name)
        path, facts = found
        fid = self.world.file_id(rules.rule_open_relative(path, self.process.cwd))
        by_name, by_id = self.loaded_index()
        j = by_id.get(fid)  # (rules.rule_same_file's answer: loaded_index)
        if j is not None:
            o = self.loaded[j]
            if name not in o.names:
                o.names.append(name)
                by_name.setdefault(name, j)
            lk.path, lk.how = o.path, "same_file"
            return o
        if noload:
            return None
        real_loader = None if callmap else loader
        obj = LinuxObject(path, facts, kind, fid, loader=real_loader, names=[name],
                          origin=rules.rule_origin(path, self.process.cwd))
        self.loaded.append(obj)
        lk.path = path
        return obj

    def loaded_index(self) -> tuple[dict[str, int], dict[str, int]]:
        """What rule_loaded_by_soname and rule_same_file answer over self.loaded, as two dicts (a name or a file id ->
        the index of the first object in load order it matches: the rules' loops, made once instead of at each
        lookup, which cost O(objects) each: a run of 366 objects made 120 000 LoadedRefs). Kept up to date as
        objects are added, made again when self.loaded is another list (a failed dlopen's unload, an audit
        namespace); _map_object adds the names it gives an object (tests/test_linux_loader.py checks the answers
        are the rules')."""
        if self._index_of is not self.loaded or self._index_len > len(self.loaded):
            self._index_of, self._index_len, self._by_name, self._by_id = self.loaded, 0, {}, {}
        for i in range(self._index_len, len(self.loaded)):
            ref = self.loaded[i].loaded_ref()
            if ref.path:
                self._by_name.setdefault(ref.path, i)
            for n in ref.names:
                self._by_name.setdefault(n, i)
            if ref.soname is not None:
                self._by_name.setdefault(ref.soname, i)
            self._by_id.setdefault(self.loaded[i].file_id, i)
        self._index_len = len(self.loaded)
        return self._by_name, self._by_id

    def _fail(self, lk: Lookup, text: str, cause: str, leaf: str) -> LoadFailure:
        lk.error = text
        return LoadFailure(text, cause, leaf)

    def _search(self, loader: Optional[LinuxObject], name: str, lk: Lookup) -> tuple[Optional[tuple[str, ELFFacts]], bool]:
        other = [False]
        main = self.main
        sysd = self.system

        def try_dirs(dirs: tuple[str, ...], what: str, where: str) -> Optional[tuple[str, ELFFacts]]:
            if not dirs:
                return None
            g = SearchGroup(what, where, rules.WHAT_SER[what])
            lk.groups.append(g)
            rule = g.rule
            for d in dirs:
                for idx, folder in enumerate(rules.rule_hwcaps_subdirs(d, sysd.hwcaps)):
                    key = (d, idx)
                    status = self.dir_status.get(key, "unknown" if d.startswith("/") else "existing")
                    if status == "nonexisting":
                        continue
                    path = folder + name
                    facts = self.world.file(path)
                    v = rules.rule_verify_elf(facts, sysd.elf_class, sysd.machine) if facts is not None else None
                    ok = v == "ok"
                    self.dir_status[key] = rules.rule_dir_status(folder, status, ok, self.world.is_dir)
                    if facts is None:
                        g.tried.append(Candidate(path, rule, "not_there"))
                        continue
                    if v == "bad":
                        assert isinstance(facts, ELFError)
                        g.tried.append(Candidate(path, rule, "not_pe"))
                        raise self._fail(lk, f"{path}: {facts.message.split(' (')[0]}", "bad_elf", name)
                    if not ok:
                        other[0] = other[0] or v == "wrong_class"
                        g.tried.append(Candidate(path, rule, "wrong_machine"))
                        continue
                    assert isinstance(facts, ELFFacts)
                    g.tried.append(Candidate(path, rule, "found"))
                    return path, facts
            return None

        chain: list[LinuxObject] = []
        o = loader
        while o is not None:
            chain.append(o)
            o = o.loader
        refs = [c.ref() for c in chain]
        main_ref = main.ref() if main is not None else None
        found = None
        rp_objs = rules.rule_rpath_of_loaders(refs, main_ref)
        if self._in_audit and main is not None and not rp_objs:
            # measured (glibc 2.36, LD_DEBUG [1]): the audit namespace's searches take the executable's
            # DT_RUNPATH, when it has one, at the step of its DT_RPATH (before LD_LIBRARY_PATH)
            found = try_dirs(self._runpath(main), "RPATH", main.path)
            if found:
                return found, other[0]
        for ref in rp_objs:
            obj = next((c for c in chain if c.path == ref.path), main)
            assert obj is not None
            found = try_dirs(self._rpath(obj), "RPATH", obj.path)
            if found:
                return found, other[0]
        if self.env_dirs:
            found = try_dirs(self.env_dirs, "LD_LIBRARY_PATH", "")
            if found:
                return found, other[0]
        if loader is not None and rules.rule_runpath_direct_only(loader.ref()) is not None:
            found = try_dirs(self._runpath(loader), "RUNPATH", loader.path)
            if found:
                return found, other[0]
        nodeflib_obj = loader or main
        nodeflib = nodeflib_obj.facts.nodeflib if nodeflib_obj is not None else False
        cached = rules.rule_ld_so_cache(name, self.world.cache_lookup, nodeflib, sysd.system_dirs)
        g = SearchGroup("cache", "", rules.LA_SER_CONFIG)
        lk.groups.append(g)
        if cached is not None:
            facts = self.world.file(cached)
            v = rules.rule_verify_elf(facts, sysd.elf_class, sysd.machine) if facts is not None else None
            if v == "ok":
                assert isinstance(facts, ELFFacts)
                g.tried.append(Candidate(cached, "cache", "found"))
                return (cached, facts), other[0]
            g.tried.append(Candidate(cached, "cache", "not_there" if facts is None else "wrong_machine"))
            other[0] = other[0] or v == "wrong_class"
        found = try_dirs(rules.rule_default_dirs(sysd.system_dirs, nodeflib), "system search path", "")
        return found, other[0]
