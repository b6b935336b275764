"""The simulated Windows loader: applies the rules of rules.py to a world and a process.

    sim = Simulator(world, process)
    results = sim.run(calls)          # one CallResult per LoadLibrary call made

Simulator.do takes the Windows calls (LOAD_OPS, STATE_OPS); Python's own (ctypes, imports, torch)
are emulated over it by emulate/python.py (PythonSimulator).

The result of a load is a tree of Nodes: for each module, every candidate in order with
the rule that produced it, what was there, the module chosen and its imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Optional, Union, cast, overload

from dlltrace import winpath
from dlltrace.loader.windows import rules
from dlltrace.model import (
    CAUSE_ERROR,
    Cause,
    ERROR_DLL_INIT_FAILED,
    ERROR_FILE_NOT_FOUND,
    ERROR_INVALID_PARAMETER,
    LOAD_WITH_ALTERED_SEARCH_PATH,
    CallOp,
    PythonExtraOp,
    WindowsExtraOp,
    LoadOp,
    OriginKind,
    ResultOp,
    Candidate,
    CallResult,
    FileFacts,
    HowKind,
    Import,
    Leaf,
    LeafFacts,
    Node,
    SearchDir,
    Via,
    leaf_detail,
)
from dlltrace.deep import MAX_IMPORT_DEPTH, ImportDepthError
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.worlds.world import LoadedModule, ProcessState, World

_UNASKED = object()  # (Simulator._file: a path not asked of the world yet in this call)


class CallError(DlltraceError):
    """A call the process cannot make as written (a run-time load `by` a DLL that is not loaded):
    one line, exit code 2. `place` is the key it is about (`call[4].by`)."""

    def __init__(self, where: str, place: str, problem: str):
        super().__init__(f"{where}: {place}: {problem}" if where else f"{place}: {problem}", EXIT_USAGE)
        self.place, self.problem = place, problem


@dataclass
class Call:
    """One call a program makes (see docs/scenarios.md for each op's fields; the Python ops'
    fields, module to label, are used by emulate/python.py)."""

    op: CallOp
    name: str = ""
    flags: int = 0
    path: Optional[str] = None
    module: str = ""
    winmode: Optional[int] = None
    torch_lib: str = ""
    dlls: Optional[list[str]] = None
    extra_dirs: list[str] = field(default_factory=list)
    label: str = ""
    by: str = ""  # a LoadLibrary call made at run time by this loaded DLL (origin_kind "runtime")
    value: Optional[str] = None  # SetEnvironmentVariable: the value (None: the variable deleted)
    find_library: str = ""  # ctypes_cdll: load what ctypes.util.find_library(find_library) returns
    place: str = ""  # where the call is written (`call[3]`), for a CallError


class Simulator:
    def __init__(self, world: World, process: ProcessState):
        self.world = world
        self.system = world.system
        self.process = process
        self._count = 0
        # called with each finished LoadLibrary result while the process state is still the
        # state of that call (explain.py uses it to say where files are relative to PATH etc.)
        self.observers: list = []
        self._datafile = self._no_refs = False
        self._local: Optional[SearchDir] = None  # the .local folder of the current call
        self.where = ""  # the scenario file, for a CallError
        self._depth = 0  # modules being resolved, one inside the other (an import chain): MAX_IMPORT_DEPTH at most
        self._facts: Optional[dict[str, Optional[FileFacts]]] = None  # the files asked about in the call at hand (_file)

    # --- the files, as the process sees them ---------------------------------------------------
    def _file(self, path: str) -> Optional[FileFacts]:
        """The facts of the file a path opens in this process: under WOW64 System32 is SysWOW64
        (rules.rule_wow64_redirect); the loader still names it by the path it asked for. Within one
        LoadLibrary call each path is asked of the world once (_facts): a call asks about a module's file
        when it searches, binds and initialises it, and nothing changes the world's files during a call."""
        facts = self._facts
        if facts is not None:
            f = facts.get(path, _UNASKED)
            if f is not _UNASKED:
                return f  # type: ignore[return-value]
        f = self.world.file(rules.rule_wow64_redirect(path, self.process.machine, self.system))
        if facts is not None:
            facts[path] = f
        return f

    def _is_dir(self, path: str) -> bool:
        return self.world.is_dir(rules.rule_wow64_redirect(path, self.process.machine, self.system))

    # --- calls -------------------------------------------------------------------------
    def run(self, calls: Iterable[Call]) -> list[CallResult]:
        out: list[CallResult] = []
        for call in calls:
            out.extend(self.do(call))
        return out

    def do(self, call: Call) -> list[CallResult]:
        op = call.op
        if op in ("LoadLibraryExW", "LoadLibraryExA", "LoadLibraryW", "LoadLibraryA"):
            flags = call.flags if op in ("LoadLibraryExW", "LoadLibraryExA") else 0
            if call.by:
                by = self.runtime_loader(call.by, call, "by")
                return [self.load_library(call.name, flags, op=op, origin=f"loaded at run time by {by}",
                                          origin_kind="runtime", origin_module=by)]
            return [self.load_library(call.name, flags, op=op)]
        if op == "SetEnvironmentVariable":
            return [self.set_environment_variable(call.name, call.value)]
        if op == "delay_load":
            return [self.delay_load(call)]
        if op == "AddDllDirectory":
            return [self.state_result(op, call.path or "", self.add_dll_directory(call.path or "", call.label))]
        if op == "RemoveDllDirectory":
            return [self.state_result(op, call.path or "", self.remove_dll_directory(call.path or ""))]
        if op == "SetDllDirectory":
            self.process.dll_directory = winpath.normalize(call.path) if call.path else call.path
            return [self.state_result(op, call.path if call.path is not None else "NULL", 0)]
        if op == "SetDefaultDllDirectories":
            why = rules.rule_set_default_dirs_valid(call.flags)
            if not why:
                self.process.default_dirs = call.flags
            r = self.state_result(op, "", ERROR_INVALID_PARAMETER if why else 0)
            r.flags, r.note = call.flags, why or ""
            return [r]
        if op == "FreeLibrary":
            return [self.state_result(op, call.name, self.free_library(call.name))]
        raise ValueError(f"unknown op {op!r}")

    def runtime_loader(self, name: str, call: Call, key: str) -> str:
        """The base name of the loaded DLL that makes a run-time call; a CallError when none of that
        name is loaded at this call."""
        m = self.process.find_loaded_by_name(winpath.basename(name))
        if m is None:
            raise CallError(self.where, f"{call.place}.{key}" if call.place else key,
                            f"{name} is not loaded at this call (a run-time load is made by a loaded DLL)")
        return winpath.basename(m.path)

    def set_environment_variable(self, name: str, value: Optional[str]) -> CallResult:
        """SetEnvironmentVariableW(name, value): PATH (any case) changes the PATH entries later
        loads search (rules.rule_environment_path); any variable is kept in process.env (value None
        deletes it). os.environ[name] = value does the same (CPython's os.putenv calls it)."""
        if value is None:
            for k in [k for k in self.process.env if k.upper() == name.upper()]:
                del self.process.env[k]
        else:
            self.process.env[name] = value
        if name.upper() == "PATH":
            self.process.path = rules.rule_environment_path(value, self.process.cwd)
        return self.extra_result("SetEnvironmentVariable", f"{name}={value}" if value is not None else f"{name}=NULL", 0)

    def delay_load(self, call: Call) -> CallResult:
        """The first call through a delay-load import of the loaded DLL `call.module`: the delay-load
        helper's LoadLibraryExA(name, NULL, 0) (rules.rule_delay_load_call), a load at run time by
        that DLL. A module that is not loaded, or that has no such delay import, is a CallError."""
        by = self.runtime_loader(call.module, call, "module")
        m = self.process.find_loaded_by_name(by)
        facts = self._file(m.path) if m is not None else None
        if facts is not None and facts.pe is not None and not any(
                winpath.same(rules.rule_default_extension(i.dll), rules.rule_default_extension(call.name))
                for i in facts.pe.delay_imports):
            raise CallError(self.where, f"{call.place}.name" if call.place else "name",
                            f"{by} has no delay-load import {call.name} (its delay_imports: "
                            f"{', '.join(i.dll for i in facts.pe.delay_imports) or 'none'})")
        op, flags = rules.rule_delay_load_call(call.name)
        res = self.load_library(call.name, flags, op=op,
                                origin=f"loaded at run time by {by} (delay-load import)", origin_kind="runtime",
                                origin_module=by)
        if res.error:
            res.note = (f"the delay-load helper raises 0xC06D007E (VcppException ERROR_MOD_NOT_FOUND) in {by}'s "
                        "caller: LoadLibraryExA failed")
        return res

    def extra_result(self, op: Union[WindowsExtraOp, PythonExtraOp], name: str, error: int, note: str = "") -> CallResult:
        """The result of a call model.ResultOp does not list (SetEnvironmentVariable,
        ctypes_find_library): no load, no tree; the op as it is."""
        r = CallResult(index=self._next_index(), op=cast(ResultOp, op), name=name, error=error)
        r.note = note
        return r

    def _next_index(self) -> int:
        self._count += 1
        return self._count - 1

    def state_result(self, op: ResultOp, name: str, error: int) -> CallResult:
        """The result of a call that changes the process state (no load, no tree)."""
        return CallResult(index=self._next_index(), op=op, name=name, error=error)

    def add_dll_directory(self, folder: str, label: str = "") -> int:
        err = rules.rule_add_dll_directory_valid(folder, self._is_dir)
        if not err:
            self.process.dll_directories.append((winpath.normalize(folder), label))
        return err

    def remove_dll_directory(self, folder: str) -> int:
        for i, (f, _) in enumerate(self.process.dll_directories):
            if winpath.same(f, folder):
                del self.process.dll_directories[i]
                return 0
        return ERROR_INVALID_PARAMETER

    def free_library(self, name: str) -> int:
        m = (self.process.find_loaded_by_path(name) if winpath.is_absolute(name)
             else self.process.find_loaded_by_name(rules.rule_default_extension(name)))
        if m is None:
            return 126
        self._release(m)
        return 0

    def _release(self, m: LoadedModule) -> None:
        """Drop one reference; at 0 the module is unloaded and releases one reference on every
        module its imports bound to, recursively (LdrUnloadDll; Wine's MODULE_DecRefCount). Each
        import of a module that was already loaded took a reference on it."""
        m.refcount -= 1
        if m.refcount > 0:
            return
        self.process.remove_loaded(m)
        for d in m.deps:
            if self.process.find_loaded_by_path(d.path) is d:
                self._release(d)

    # --- LoadLibrary ----------------------------------------------------------------------------
    def load_library(self, name: str, flags: int, *, op: Union[LoadOp, Literal["start"]] = "LoadLibraryExW", origin: str = "",
                     origin_kind: OriginKind = "", origin_module: str = "") -> CallResult:
        outer, self._facts = self._facts, {}  # (each call its own: the world may change between calls)
        try:
            return self._load_library(name, flags, op, origin, origin_kind, origin_module)
        finally:
            self._facts = outer

    def _load_library(self, name: str, flags: int, op: Union[LoadOp, Literal["start"]], origin: str,
                      origin_kind: OriginKind, origin_module: str) -> CallResult:
        res = CallResult(index=self._next_index(), op=op, name=name, flags=flags, origin=origin,
                         origin_kind=origin_kind, origin_module=origin_module)
        req = rules.rule_load_name(name)  # ".dll" added, then the path rules (\\?\, trailing dots and spaces)
        search = rules.rule_effective_search_flags(flags, self.process)
        res.search_flags, res.path, res.cwd = search, tuple(self.process.path), self.process.cwd
        why = rules.rule_invalid_flags(req, flags, search)
        if why:
            res.error = ERROR_INVALID_PARAMETER
            res.tree = Node(name=winpath.basename(name) or name, via="call")
            self._fail(res.tree, "invalid_parameter", LeafFacts(reason=why))
            return self._done(res)
        dirs = tuple(rules.rule_search_path(req, flags, self.process, self.system))
        if flags & LOAD_WITH_ALTERED_SEARCH_PATH and not winpath.is_absolute(req) and not search:
            res.note = "ALTERED_SEARCH_PATH with a relative name: Windows documents the result as undefined; the standard order is modelled"
        self._new: list[tuple[LoadedModule, Node]] = []
        self._bumped: list[LoadedModule] = []  # references this call took on modules already loaded
        self._module_of: dict[int, LoadedModule] = {}  # id(node) -> the module it resolved to
        self._probes: list[str] = []
        self._origin = origin or f"{op}({winpath.typed(name)})"
        self._local = rules.rule_dot_local(self.process, self._is_dir, self._file)
        self._datafile = rules.rule_datafile_load(flags)
        self._no_refs = self._datafile or rules.rule_dont_resolve_references(flags)
        if self._datafile and self.system.profile == "wine":
            tree = self._datafile_wine(req, dirs)
        else:
            tree = self._resolve(req, dirs, via="call")
        if tree.error == 0:
            self._initialize(tree)
        self._datafile = self._no_refs = False
        if tree.error:
            keep = rules.rule_failed_load_keeps_loaded_dependencies(self.system, tree.error)
            for m, n in self._new:
                if not (keep and n.error == 0):
                    self.process.remove_loaded(m)
            if not keep:
                for m in self._bumped:
                    m.refcount -= 1
        elif not tree.new:
            already = self.process.find_loaded_by_path(tree.path) if tree.path else None
            if already is not None:
                already.refcount += 1
        res.tree = tree
        res.error = tree.error
        res.probes = self._probes
        return self._done(res)

    def _done(self, res: CallResult) -> CallResult:
        """A load's last step: its leaf and chain, then the observers."""
        self._finish(res)
        for observe in self.observers:
            observe(res)
        return res

    def _finish(self, res: CallResult) -> None:
        tree = res.tree
        if tree is None or not res.error:
            return
        chain = tree.failure_chain()
        leaf = chain[-1]
        parent = chain[-2].name if len(chain) > 1 else None
        res.chain = [winpath.basename(n.name) for n in chain]
        if res.origin_kind == "runtime" and res.origin_module:
            # a load a DLL made at run time: the chain starts at that DLL, which needed the module
            res.chain.insert(0, res.origin_module)
            if parent is None:
                parent = res.origin_module
        res.leaf = Leaf(name=winpath.basename(leaf.name), cause=leaf.cause or "not_found", path=leaf.path,
                        detail=leaf.detail, parent=winpath.basename(parent) if parent else None,
                        facts=leaf.facts or LeafFacts())

    # --- finding one module ---------------------------------------------------------------------
    def _resolve(self, name: str, dirs: tuple[SearchDir, ...], via: Via, importer: Optional[str] = None) -> Node:
        """Find one module. `importer`: the base name of the module whose import (or forwarder)
        asks for it, None for the call itself (API-set exceptions are per importer). An import chain
        deeper than MAX_IMPORT_DEPTH is refused (ImportDepthError, one line: deep.py runs the command
        with the stack this depth needs)."""
        if self._depth >= MAX_IMPORT_DEPTH:
            raise ImportDepthError()
        self._depth += 1
        try:
            return self._resolve_here(name, dirs, via, importer)
        finally:
            self._depth -= 1

    def _resolve_here(self, name: str, dirs: tuple[SearchDir, ...], via: Via, importer: Optional[str]) -> Node:
        node = Node(name=name, via=via, search=dirs)
        local = self._local
        if rules.rule_name_has_path(name):
            if local is not None:
                found = self._probe_dirs(node, winpath.basename(name), (local,), final=False)
                if found:
                    return found
            if winpath.is_absolute(name):
                m = rules.rule_loaded_same_file(name, self.process, self.system)
                if m is not None:
                    self._opened_alias(name, m)
                    return self._already_loaded(node, m, "already loaded from the same file", "loaded_same_file")
                return self._probe_dirs(node, winpath.basename(name), (SearchDir(winpath.dirname(name), "given path"),))
            # a relative path with a folder in it is appended to every folder of the search path
            return self._probe_dirs(node, name, dirs)
        contract = rules.rule_api_set_match(name, self.system)
        if contract is not None:
            host = rules.rule_api_set_host(contract, importer)
            if not host:
                self._fail(node, "apiset_no_host", LeafFacts(contract=contract.name))
                return node
            node.how, node.how_kind = f"API set → {host}", "apiset"
            node.candidates.append(Candidate(name, f"API set → {host}", "apiset"))
            child = self._resolve(rules.rule_default_extension(host),
                                  rules.rule_api_set_host_search(importer, dirs, self.system), via="apiset",
                                  importer=importer)
            node.children.append(child)
            # the contract node stands for its host: loaded by this call when the host was (a
            # reference is taken on a host already loaded, and released with the importer)
            node.path, node.error, node.new = child.path, child.error, child.new
            if id(child) in self._module_of:
                self._module_of[id(node)] = self._module_of[id(child)]
            return node
        m = rules.rule_loaded_module(name, self.process)
        if m is not None:
            return self._already_loaded(node, m, f"already loaded from {m.path}", "already_loaded")
        known = rules.rule_known_dlls(name, self.system, self.process.machine)
        if known is not None:
            node.path, node.how, node.how_kind = known, "KnownDLLs", "known_dll"
            node.candidates.append(Candidate(known, "KnownDLLs", "known_dll"))
            return self._load_file(node, self._file(known) or FileFacts(path=known), dirs)
        if local is not None:
            dirs = (local, *dirs)
        return self._probe_dirs(node, name, dirs)

    def _datafile_wine(self, name: str, dirs: tuple[SearchDir, ...]) -> Node:
        """A data-file load under Wine (rule_datafile_search_path): a module already loaded is
        returned; else the loader's search runs (opening candidates, up to the first valid image)
        only to look for a loaded module, then SearchPathW picks the file, whatever its machine."""
        node = Node(name=name, via="call", search=dirs)
        if not rules.rule_name_has_path(name):
            m = rules.rule_loaded_module(name, self.process)
            if m is not None:
                return self._already_loaded(node, m, f"already loaded from {m.path}", "already_loaded")
        first = (SearchDir(winpath.dirname(name), "given path"),) if winpath.is_absolute(name) else dirs
        base = winpath.basename(name) if winpath.is_absolute(name) else name
        for d in first:
            path = winpath.join(d.folder, base)
            m = rules.rule_loaded_same_file(path, self.process, self.system)
            if m is not None:
                return self._already_loaded(node, m, d.rule, "loaded_candidate")
            facts = self._file(path)
            self._probes.append(path)
            v = rules.rule_candidate(facts, self.process.machine, self.system.profile)
            node.candidates.append(Candidate(path, d.rule, v.result if v.result != "found" else "not_loaded",
                                             facts.pe.machine if facts is not None and facts.pe else None))
            if v.stop:
                break
        search = first if winpath.is_absolute(name) else tuple(rules.rule_datafile_search_path(self.process, self.system))
        for d in search:
            path = winpath.join(d.folder, base)
            facts = self._file(path)
            if facts is None:
                continue
            self._probes.append(path)
            node.candidates.append(Candidate(path, d.rule, "found" if facts.error is None else facts.error,
                                             facts.pe.machine if facts.pe else None))
            node.path, node.how, node.how_kind = path, d.rule, "search"
            if facts.error is not None:
                self._fail(node, facts.error, LeafFacts())
            else:
                node.detail = "mapped as a data file: no imports, no DllMain"
            return node
        node.error, node.cause = ERROR_FILE_NOT_FOUND, "not_found"
        node.facts = LeafFacts(search_path_w=True)
        node.detail = leaf_detail("not_found", node.facts)
        return node

    def _opened_alias(self, path: str, m: LoadedModule) -> None:
        """A module found loaded under another name of the same file (WOW64: System32\\x.dll and SysWOW64\\x.dll,
        rules.rule_wow64_same_file) is known only once the file is opened: one probe (measured under Wine 8.0, which
        opens it and finds the module by the file's id, dlls/ntdll/loader.c find_fileid_module)."""
        if not winpath.same(m.path, path):
            self._probes.append(path)

    def _already_loaded(self, node: Node, m: LoadedModule, how: str, kind: HowKind) -> Node:
        self._module_of[id(node)] = m
        node.path, node.how, node.how_kind = m.path, how, kind
        node.candidates.append(Candidate(m.path, "loaded-module list", "already_loaded"))
        node.loaded_by = m.origin
        return node

    @overload
    def _probe_dirs(self, node: Node, name: str, dirs: tuple[SearchDir, ...], final: Literal[True] = ...) -> Node: ...
    @overload
    def _probe_dirs(self, node: Node, name: str, dirs: tuple[SearchDir, ...], final: Literal[False]) -> Optional[Node]: ...

    def _probe_dirs(self, node: Node, name: str, dirs: tuple[SearchDir, ...], final: bool = True) -> Optional[Node]:
        """Probe `name` in each folder of `dirs`, in order: `node` found (or failed on a file that
        stops the search); when nothing is found, `node` failed (not_found, bad_machine), or None
        with `final=False` (the caller searches on)."""
        wrong = False
        machine = self.process.machine
        skip_loaded = rules.rule_loaded_candidate_not_opened(self.system)
        for d in dirs:
            path = winpath.join(d.folder, name)
            if skip_loaded:
                m = rules.rule_loaded_same_file(path, self.process, self.system)
                if m is not None:
                    self._opened_alias(path, m)
                    self._already_loaded(node, m, d.rule, "loaded_candidate")
                    node.candidates[-1] = Candidate(path, d.rule, "already_loaded")
                    return node
            facts = self._file(path)
            self._probes.append(path)
            v = rules.rule_candidate(facts, machine, self.system.profile)
            if self._datafile and v.result == "wrong_machine" and node.via == "call":
                v = rules.CandidateVerdict("found", True)
            real = rules.rule_wow64_redirect(path, self.process.machine, self.system)
            node.candidates.append(Candidate(path, d.rule, v.result,
                                             facts.pe.machine if facts is not None and facts.pe else None,
                                             real if real != path else None))
            if v.result == "wrong_machine":
                wrong = True
            if facts is None or not v.stop:  # (rule_candidate: a file that is not there never stops)
                continue
            if v.result == "found":
                m = rules.rule_loaded_same_file(path, self.process, self.system)
                if m is not None:
                    self._already_loaded(node, m, d.rule, "loaded_candidate")
                    node.candidates[-2:] = [Candidate(path, d.rule, "already_loaded")]
                    return node
                node.path, node.how, node.how_kind = path, d.rule, "search"
                return self._load_file(node, facts, node.search)
            cause: Cause = "access_denied" if v.result == "access_denied" else "not_pe"
            node.path = path
            self._fail(node, cause, LeafFacts())
            return node
        if not final:
            return None
        if wrong:
            self._fail(node, "bad_machine", LeafFacts(process_machine=machine, machines=tuple(sorted(
                {c.machine for c in node.candidates if c.result == "wrong_machine" and c.machine}))))
        else:
            node.error, node.cause = CAUSE_ERROR["not_found"], "not_found"
        return node

    # --- mapping a module and its imports ------------------------------------------------------------
    def _load_file(self, node: Node, facts: FileFacts, dirs: tuple[SearchDir, ...]) -> Node:
        if self._datafile and node.via == "call":
            node.detail = "mapped as a data file: no imports, no DllMain"
            return node
        path = node.path or facts.path
        m = LoadedModule(path, 1, initialized=False, by_call=self._origin)
        self.process.add_loaded(m)  # listed before its imports are processed (cycles bind to it)
        self._new.append((m, node))
        self._module_of[id(node)] = m
        node.new = True
        if facts.pe is None:
            return node  # a file we know nothing about (a system DLL): assume it loads
        if self._no_refs and node.via == "call":
            node.detail = "DONT_RESOLVE_DLL_REFERENCES: imports not loaded, DllMain not called"
            m.initialized = True  # a later load gets it as it is: its DllMain is never run
            return node
        own = rules.rule_dependent_load_flags(facts)
        child_dirs = dirs
        if own:
            child_dirs = tuple(rules.rule_search_path(path, own, self.process, self.system))
            node.detail = f"DependentLoadFlags {own:#x}"
        else:
            child_dirs = rules.rule_dependencies_use_callers_path(child_dirs)
        stop = rules.rule_imports_stop_at_first_failure(self.system)
        for imp in rules.rule_delay_imports_not_loaded_at_load_time(facts.pe):
            child = self._resolve(rules.rule_default_extension(imp.dll), child_dirs, via="import",
                                  importer=m.name)
            node.children.append(child)
            cm = self._module_of.get(id(child))
            if cm is not None:
                m.add_dep(cm)
                if not child.new:  # an import of a module already loaded takes a reference on it
                    cm.refcount += 1
                    self._bumped.append(cm)
            if not child.error:
                self._bind(child, imp, child_dirs, m.name)
            if child.error and not node.error:
                node.error = rules.rule_import_failure_error(self.system, child.error)
            if node.error and stop:
                return node
        return node

    def _bind(self, child: Node, imp: Import, dirs: tuple[SearchDir, ...], importer: str) -> None:
        """Bind the functions `imp` needs from the module `child` resolved to."""
        facts = self._file(child.path) if child.path else None
        if facts is None or facts.pe is None:
            return
        pe = facts.pe
        strict = rules.rule_missing_import_is_error(self.system)
        for fn in imp.names:
            if fn in pe.forwarders:
                target, func = rules.rule_forwarder_target(pe.forwarders[fn])
                # an API-set target's exception host is the one for the module being bound (Wine
                # build_import_name: current_modref, the importer, not the forwarding DLL)
                fwd = self._resolve(target, dirs, via="forwarder", importer=importer)
                child.children.append(fwd)
                if fwd.error:
                    child.error = fwd.error
                    return
                tf = self._file(fwd.path) if fwd.path else None
                if tf is not None and tf.pe is not None and not self._exports(tf.pe, func):
                    if strict:
                        self._fail(fwd, "missing_export",
                                   LeafFacts(export=func, forwarded_from=f"{winpath.basename(child.path or '')}!{fn}"))
                        child.error = fwd.error
                        return
                    # (Wine: the forward not found, find_named_export gives nothing, and import_dll binds the import,
                    # by the importer's name of it, to a stub)
                    child.detail = f"{fn} (forwarded to {target}!{func}) bound to a stub (Wine profile)"
                    child.stubs = (*child.stubs, fn)
                continue
            if fn not in pe.exports:
                if strict:
                    self._fail(child, "missing_export", LeafFacts(export=fn))
                    return
                child.detail = f"{fn} bound to a stub (Wine profile)"
                child.stubs = (*child.stubs, fn)  # (a call to it ends the process: 0x80000100, EXCEPTION_WINE_STUB)
        for o in imp.ordinals:
            if o not in pe.export_ordinals:
                if strict:
                    self._fail(child, "missing_ordinal", LeafFacts(ordinal=o))
                    return
                child.detail = f"ordinal {o} bound to a stub (Wine profile)"  # (as by name: Wine's import_dll)
                child.stubs = (*child.stubs, f"#{o}")

    @staticmethod
    def _fail(node: Node, cause: Cause, facts: LeafFacts) -> None:
        """Make `node` the leaf of a failure: its cause, the cause's error, its facts and their words."""
        node.error, node.cause, node.facts = CAUSE_ERROR[cause], cause, facts
        node.detail = leaf_detail(cause, facts)

    @staticmethod
    def _exports(pe, func: str) -> bool:
        if func.startswith("#") and func[1:].isdigit():
            return int(func[1:]) in pe.export_ordinals
        return func in pe.exports or func in pe.forwarders

    def _initialize(self, tree: Node) -> None:
        """Run DllMain of every module this call loaded, imports first; one that fails makes
        the whole call fail with 1114 (rule: init order is the reverse of dependency order)."""
        self._init_visit(tree, set())

    def _init_visit(self, node: Node, seen: set[int]) -> bool:
        """_initialize for one node, its children first; True once a DllMain has failed (then
        every node on the way up gets 1114). (A method, not a recursive closure: that closure was a
        reference cycle holding the whole simulator until the cyclic garbage collector ran.)"""
        for c in node.children:
            if self._init_visit(c, seen):
                node.error = c.error or ERROR_DLL_INIT_FAILED  # 1114, or a crashed DllMain's error (998)
                return True
        m = self._module_of.get(id(node))
        if m is None or m.initialized or id(m) in seen or (node.via == "call" and self._no_refs):
            return False
        seen.add(id(m))
        facts = self._file(m.path)
        if facts is not None and facts.dllmain_fails:
            self._fail(node, "init_failed", LeafFacts(loaded_earlier=not node.new, dllmain_how=facts.dllmain_how or None,
                                                      dllmain_status=facts.dllmain_status))
            node.error = rules.rule_dllmain_failure_error(facts.dllmain_how, facts.dllmain_error)
            return True
        if isinstance(facts, rules.InitFacts) and facts.needs_cpu:
            lacking = rules.rule_dllmain_needs_cpu_feature(facts.needs_cpu, self.system.cpu_lacks)
            if lacking:
                self._fail(node, "init_failed", LeafFacts(loaded_earlier=not node.new, cpu_lacks=lacking))
                return True
        if isinstance(facts, rules.InitFacts) and facts.dllmain_fails_if_bound:
            bound = [(d.path, self._file_version(d.path)) for d in m.deps]
            why = rules.rule_dllmain_fails_if_bound(facts.dllmain_fails_if_bound, bound)
            if why:
                self._fail(node, "init_failed", LeafFacts(loaded_earlier=not node.new))
                node.detail += f" ({why})"
                return True
        m.initialized = True
        return False

    def _file_version(self, path: str) -> Optional[str]:
        facts = self._file(path)
        return facts.pe.file_version if facts is not None and facts.pe is not None else None
