"""Generated cases for the Wine differential test (tests/test_wine_diff.py).

A case is a layout of the fixture DLLs (fixtures/wine/: top -> mid -> leaf, each possibly
in several folders and in several variants), a process state (cwd, PATH, AddDllDirectory,
SetDllDirectoryW, SetDefaultDllDirectories) and one or two LoadLibrary calls. From a case
come both the loadhost.exe arguments (what Wine does) and a scenario dict in the format of
docs/scenarios.md with `system.profile = "wine"` (what the simulator says).

Cases are fully determined by (seed, index): `generate(seed, n, nonce)`. The nonce only
changes the DLL names (unique per test session, so copies put in System32 or the Windows
folder cannot leak between cases or between sessions sharing a Wine prefix).

API sets: about one case in five (API_RATE, drawn from a random stream of its own, so the other
cases are the ones the generator made before API sets) turns the leaf's good copies into a leaf
that also imports through an API-set name (wine_diffkit.API_VARIANTS): a contract Wine hosts
(ucrtbase.dll), a name in no schema (a file of that name, role "a", placed or not), or a contract
with an empty host; the name is re-spelled per case (case, the last version number, sometimes a
middle one no contract has). The scenario carries Wine's own schema as `system.api_sets`
(Case.scenario(api_sets), read once per session from Wine).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from wine_diffkit import API_VARIANTS, EXPORT, IMPORTS, ROLES, SYSTEM_IMPORTS, api_import, dll_base, imports_of

WINDIR = r"C:\windows"
SYS32 = r"C:\windows\system32"
HOST_EXE = "loadhost.exe"
# What loadhost.exe has loaded before its first op (a mingw program: msvcrt + kernel32).
SYSTEM_LOADED = ("ntdll.dll", "kernelbase.dll", "kernel32.dll", "msvcrt.dll")
PLAIN = ("f1", "f2", "f3", "f4")
ROLE_NAMES = {"t": "top", "m": "mid", "l": "leaf", "w": "two", "x": "extra", "a": "apiset-named"}  # plain folders under the case root
# Files of Wine's System32 the API-set cases need besides SYSTEM_LOADED: the host of the hosted
# contract (api-ms-win-crt-string-l1-1-0 -> ucrtbase.dll in Wine's schema; not loaded by loadhost).
SYSTEM_FILES = ("ucrtbase.dll",)
API_RATE = 0.2  # share of cases whose leaf imports through an API-set name
API_WEIGHTS = {"api": 5, "apiabs": 4, "apinohost": 2}

# Flag sets the generator draws the main call's flags from.
FLAGS_BARE = (0, 0, 0x8, 0x200, 0x400, 0x800, 0x1000, 0x1000, 0x200 | 0x800, 0x400 | 0x800,
              0x200 | 0x400)
FLAGS_ABS = (0, 0, 0x8, 0x8, 0x100, 0x1100, 0x1100, 0x100 | 0x800, 0x200, 0x800, 0x1000, 0x400)
FLAGS_INVALID_BARE = (0x100, 0x1100, 0x8 | 0x1000, 0x8 | 0x800)
FLAGS_INVALID_ABS = (0x8 | 0x1000, 0x8 | 0x100, 0x8 | 0x1100, 0x8 | 0x200)
# SetDefaultDllDirectories: values Wine accepts (only 0x200/0x400/0x800/0x1000 bits) and values
# it rejects with 87; the rejected ones are only generated as scenario calls, never as state.
DEFAULT_DIRS_VALID = (0x1000, 0x1000, 0x800, 0x200 | 0x800, 0x400 | 0x800, 0x400, 0x200)
DEFAULT_DIRS_INVALID = (0, 0x100, 0x1100, 0x1100)

SHAPES = {  # shape -> weight
    "random": 5,
    "missing_leaf": 2,
    "wrong_machine_then_ok": 3,
    "only_wrong_machine": 2,
    "init_fail": 2,
    "not_pe": 2,
    "invalid_flags": 2,
    "preloaded": 3,
    # shapes added for RemoveDllDirectory / FreeLibrary / relative paths / a module with two
    # fixture imports / LOAD_LIBRARY_AS_DATAFILE and DONT_RESOLVE_DLL_REFERENCES
    "relative_path": 3,
    "free_library": 3,
    "two_imports": 4,
    "datafile": 1,
    "dont_resolve": 2,
}
SUB = "sub"  # the folder of a relative name `sub\\x.dll` (relative_path shape)
FLAGS_RELATIVE = (0, 0, 0, 0x8, 0x200, 0x1000, 0x1000, 0x200 | 0x800)
FLAGS_DATAFILE = (0x2, 0x2, 0x2, 0x2 | 0x8, 0x2 | 0x1000)
FLAGS_NO_REFS = (0x1, 0x1, 0x1 | 0x8, 0x1 | 0x1000)


@dataclass
class HostOp:
    kind: str  # a loadhost.exe op (fixtures/wine/loadhost.c)
    args: tuple = ()
    call: Optional[dict] = None  # the scenario [[call]] it is, or None when it is process state


@dataclass
class Case:
    ident: str
    shape: str
    root: str  # the case's folder on C:
    names: dict  # role -> 8-character base name
    folders: dict  # folder key -> Windows path
    files: list  # (Windows path, role, variant)
    cwd: str
    path: list
    ops: list  # HostOp, in order
    state: dict = field(default_factory=dict)  # process-state keys of the scenario (state form)
    api_names: dict = field(default_factory=dict)  # API variant -> the name its leaf imports (no .dll), as spelled

    def __post_init__(self) -> None:
        # A shape may place a second file where one already is: on disk the later one replaces it
        # (materialize writes them in order), so only that one is the case's file, for the
        # scenario too (which must describe a path once).
        last = {p.lower(): i for i, (p, _, _) in enumerate(self.files)}
        self.files = [f for i, f in enumerate(self.files) if last[f[0].lower()] == i]

    @property
    def api(self) -> Optional[str]:
        """The API-set leaf variant this case uses, if any."""
        return next(iter(self.api_names), None)

    @property
    def exe(self) -> str:
        return self.folders["app"] + "\\" + HOST_EXE

    def dll_names(self) -> set:
        """The names whose probes are compared: the case's DLLs, every file it places, the
        API-set names its leaf imports, and the hosts an API set may resolve to."""
        out = {dll_base(r, self.names).lower() + ".dll" for r in self.names}
        out |= {p.rsplit("\\", 1)[-1].lower() for p, _, _ in self.files}
        out |= {n.lower() + ".dll" for n in self.api_names.values()}
        direct = {op.args[0].lower() for op in self.ops if op.kind in ("load", "loadw")
                  and op.args[0].lower().startswith(("api-", "ext-"))}
        if self.api_names or direct:
            out |= direct | set(SYSTEM_FILES)
        return out

    def keep_files(self) -> list:
        """Placeholder files that make the plain folders exist (an empty folder cannot be
        described in a scenario; AddDllDirectory of a missing folder fails)."""
        return [self.folders[k] + "\\keep.txt" for k in PLAIN]

    def describe(self) -> str:
        lines = [f"case {self.ident} ({self.shape})", f"  cwd={self.cwd}", f"  PATH={';'.join(self.path)}"]
        if self.state:
            lines.append(f"  state={self.state}")
        for v, n in self.api_names.items():
            lines.append(f"  leaf {v} imports {n}.dll")
        for p, r, v in self.files:
            lines.append(f"  file {p}  [{ROLE_NAMES[r]} {v}]")
        for op in self.ops:
            lines.append(f"  op {op.kind} {' '.join(op.args)}" + ("" if op.call else "   (process state)"))
        return "\n".join(lines)

    # ---------------------------------------------------------------- the scenario
    def scenario(self, api_sets: dict) -> dict:
        """The scenario for the model; api_sets: the API-set schema, contract -> host (Wine's,
        wine_diffkit.wine_api_sets())."""
        files = []
        for name in SYSTEM_LOADED + SYSTEM_FILES:
            files.append({"path": f"{SYS32}\\{name}", "machine": "x64"})
        files.append({"path": self.exe, "machine": "x64", "is_dll": False,
                      "imports": list(SYSTEM_IMPORTS)})
        for k in self.keep_files():
            files.append({"path": k, "kind": "not_pe"})
        placed: dict = {}  # a path placed twice is described once: as the later copy, the one on disk
        for path, role, variant in self.files:
            placed[path.lower()] = file_entry(path, role, variant, self.names, self.api_names)
        files.extend(placed.values())
        process = {
            "exe": self.exe,
            "cwd": self.cwd,
            "path": list(self.path),
            "loaded": [f"{SYS32}\\{n}" for n in SYSTEM_LOADED],
        }
        process.update(self.state)
        return {
            "format": "dlltrace-scenario",
            "version": 1,
            "description": f"wine differential {self.ident}: {self.shape}",
            "system": {"windows": WINDIR, "system32": SYS32, "machine": "x64", "known_dlls": [],
                       "profile": "wine", "api_sets": dict(api_sets)},
            "process": process,
            "file": files,
            "call": [op.call for op in self.ops if op.call is not None],
        }


def file_entry(path: str, role: str, variant: str, names: dict, api_names: Optional[dict] = None) -> dict:
    """api_names: the API-set import names as the case spells them (default: as built)."""
    if variant == "notpe":
        return {"path": path, "kind": "not_pe"}
    # in the order of the built DLL's import descriptors: the API-set import of an API-set leaf
    # build (wine_diffkit.API_VARIANTS), the system DLLs, then the fixture DLLs
    imports: list = []
    if variant in API_VARIANTS:
        spelled = (api_names or {}).get(variant) or api_import(variant, names)
        imports.append({"dll": spelled + ".dll", "names": [API_VARIANTS[variant][1]]})
    imports += SYSTEM_IMPORTS
    for child in imports_of(role, variant):
        imports.append({"dll": names[child] + ".dll", "names": [EXPORT[child]]})
    e = {"path": path, "machine": "x86" if variant == "x86" else "x64", "imports": imports,
         "exports": [EXPORT[role]]}
    if variant == "initfail":
        e["dllmain_fails"] = True
    return e


# ---------------------------------------------------------------- generation
def case_names(nonce: str, index: int) -> dict:
    """role -> unique 8-character base name: role letter + 3-char nonce + 4-digit index."""
    if len(nonce) != 3 or not nonce.isalnum():
        raise ValueError("nonce must be 3 alphanumeric characters")
    return {r: f"{r}{nonce.lower()}{index % 10000:04d}" for r in ROLES}


def generate(seed: int, n: int, nonce: str, base: str = r"C:\dtw") -> list:
    return [make_case(seed, i, nonce, base) for i in range(n)]


def _load_call(name: str, flags: int, loadw: bool) -> HostOp:
    if loadw:
        return HostOp("loadw", (name,), {"op": "LoadLibraryW", "name": name})
    return HostOp("load", (name, hex(flags)), {"op": "LoadLibraryExW", "name": name, "flags": flags})


def make_case(seed: int, index: int, nonce: str, base: str = r"C:\dtw") -> Case:
    rng = random.Random(f"{seed}-{index}")
    shapes = list(SHAPES)
    shape = rng.choices(shapes, weights=[SHAPES[s] for s in shapes])[0]
    ident = f"s{seed}-{index:03d}"
    root = f"{base}\\{nonce}\\c{index:04d}"
    names = case_names(nonce, index)
    folders = {"app": root + "\\app", **{k: f"{root}\\{k}" for k in PLAIN}, "sys32": SYS32, "win": WINDIR}
    local = ["app", *PLAIN]

    target = rng.choices(["t", "m", "l"], weights=[5, 2, 2])[0]
    chain = [target]
    while IMPORTS[chain[-1]]:
        chain.append(IMPORTS[chain[-1]][0])
    if shape == "two_imports":  # two -> (leaf, extra), in either import order
        target, chain = "w", ["w", "l", "x"]
    elif shape == "free_library" and target == "l":
        target, chain = "m", ["m", "l"]  # something with a dependency to free
    bottom = chain[-1]  # the leaf
    if shape == "relative_path":  # the target's copies are in <folder>\sub
        for k in local:
            folders[k + "_" + SUB] = folders[k] + "\\" + SUB

    def pick_folders(k: int) -> list:
        keys = local + ["sys32", "win"]
        weights = [3, 3, 3, 3, 3, 1, 1]
        out: list = []
        while len(out) < k:
            f = rng.choices(keys, weights=weights)[0]
            if f not in out:
                out.append(f)
        return out

    layout: dict = {}  # role -> list of (folder key, variant)
    for r in chain:
        k = rng.choices([0, 1, 2, 3], weights=[1 if r != target else 0.3, 6, 3, 1])[0]
        copies = []
        for f in pick_folders(k):
            v = rng.choices(["ok", "x86", "notpe", "initfail"],
                            weights=[10, 2, 0.7, 1 if r == "l" else 0])[0]
            copies.append((f, v))
        layout[r] = copies

    if shape == "missing_leaf":
        layout[bottom] = []
    elif shape == "wrong_machine_then_ok":
        fs = pick_folders(rng.choice([2, 3]))
        layout[bottom] = [(f, "x86") for f in fs[:-1]] + [(fs[-1], "ok")]
        rng.shuffle(layout[bottom])
    elif shape == "only_wrong_machine":
        layout[bottom] = [(f, "x86") for f in pick_folders(rng.choice([1, 2]))]
    elif shape == "init_fail":
        fs = pick_folders(rng.choice([1, 2]))
        layout[bottom] = [(fs[0], "initfail")] + [(f, "ok") for f in fs[1:]]
    elif shape == "not_pe":
        r = rng.choice(chain)
        fs = pick_folders(rng.choice([1, 2]))
        layout[r] = [(fs[0], "notpe")] + [(f, "ok") for f in fs[1:]]
    elif shape == "relative_path":
        layout[target] = [(f + "_" + SUB, v) for f, v in layout[target] if f in local] or [
            (rng.choice(local) + "_" + SUB, "ok")]
    elif shape == "two_imports":
        layout["w"] = [(rng.choice(local), rng.choice(["ok", "rev", "rev"]))]
        if rng.random() < 0.3:
            layout["w"].append((rng.choice(local), "ok"))
        if rng.random() < 0.65:
            layout["x"] = []  # the extra DLL is missing: the import that fails
        if not any(v == "ok" for _, v in layout["l"]) and rng.random() < 0.8:
            layout["l"].append((rng.choice(local), "ok"))
    elif shape == "free_library":  # everything loads from one folder (by full path and 0x8)
        home = rng.choice(PLAIN)
        for r in chain:
            layout[r] = [(home, "ok")] + [(f, "ok") for f in pick_folders(rng.choice([0, 1, 1])) if f != home]
    for r in chain:  # the initfail variant exists for the leaf only
        layout[r] = [(f, v if (v != "initfail" or r == "l") else "ok") for f, v in layout[r]]

    # "reachable": every folder a copy can be in is on the search path (standard order, PATH =
    # all plain folders), and the modules above the leaf load, so the leaf's copies decide:
    # a wrong-machine copy skipped before a good one, a DllMain-FALSE copy before or after one.
    reachable = shape in ("wrong_machine_then_ok", "init_fail") and rng.random() < 0.7
    if reachable:
        for r in chain[:-1]:
            layout[r] = [(rng.choice(local), "ok")]

    files = [(f"{folders[f]}\\{dll_base(r, names)}.dll", r, v) for r in chain for f, v in layout[r]]

    # process state
    cwd = folders[rng.choice(local)]
    path = [folders[f] for f in rng.sample(local, rng.choice([0, 1, 1, 2, 2, 3]))]
    if reachable:
        path = [folders[f] for f in rng.sample(PLAIN, len(PLAIN))]
    ops: list = [HostOp("cd", (cwd,)), HostOp("path", (";".join(path) if path else "-",))]
    state: dict = {}
    state_form = rng.random() < 0.4

    adddirs = []
    if rng.random() < 0.45 and not reachable:
        adddirs = [folders[f] for f in rng.sample(local, rng.choice([1, 2, 3]))]
    setdll: list = []  # the SetDllDirectoryW arguments in order (None = NULL)
    u = 1.0 if reachable else rng.random()
    if u < 0.25:
        setdll = [folders[rng.choice(local)]]
    elif u < 0.35:
        setdll = [""]
    elif u < 0.40:
        setdll = [folders[rng.choice(local)], rng.choice([None, "", folders[rng.choice(local)]])]
    default = None
    if rng.random() < 0.3 and not reachable:
        default = rng.choice(DEFAULT_DIRS_VALID + (DEFAULT_DIRS_INVALID if not state_form else ()))

    removed = rng.sample(adddirs, 1) if adddirs and rng.random() < 0.4 else []
    for d in adddirs:
        ops.append(HostOp("adddir", (d,), None if state_form else {"op": "AddDllDirectory", "path": d}))
    for d in removed:  # RemoveDllDirectory (the host passes the cookie AddDllDirectory returned)
        ops.append(HostOp("rmdir", (d,), None if state_form else {"op": "RemoveDllDirectory", "path": d}))
    for d in setdll:
        if d is None:
            op = HostOp("setdlldir-null", (), {"op": "SetDllDirectory"})
        elif d == "":
            op = HostOp("setdlldir-empty", (), {"op": "SetDllDirectory", "path": ""})
        else:
            op = HostOp("setdlldir", (d,), {"op": "SetDllDirectory", "path": d})
        if state_form:
            op.call = None
        ops.append(op)
    if default is not None:
        ops.append(HostOp("setdefault", (hex(default),),
                          None if state_form else {"op": "SetDefaultDllDirectories", "flags": default}))
    if state_form:
        if [d for d in adddirs if d not in removed]:
            state["dll_directories"] = [d for d in adddirs if d not in removed]
        if setdll and setdll[-1] is not None:
            state["dll_directory"] = setdll[-1]
        if default is not None:
            state["default_dirs"] = default

    # a load before the main call: the loaded-module rule
    if shape == "preloaded":
        r = rng.choice(chain[1:] or chain)
        where = [f for f, v in layout[r] if v == "ok"]
        if not where:
            f = rng.choice(local)
            layout[r].append((f, "ok"))
            files.append((f"{folders[f]}\\{names[r]}.dll", r, "ok"))
            where = [f]
        ops.append(_load_call(f"{folders[rng.choice(where)]}\\{names[r]}.dll", 0, False))

    # the main call
    if shape == "free_library":
        ops += _free_library_ops(rng, chain, layout, folders, names)
    elif shape == "two_imports":
        ops += _two_imports_ops(rng, layout, folders, names)
    elif shape == "relative_path":
        ops += _relative_path_ops(rng, target, chain, layout, folders, names)
    elif shape in ("datafile", "dont_resolve"):
        ops += _no_refs_ops(rng, shape, target, chain, layout, folders, names, local)
    else:
        bare = rng.random() < 0.55
        if bare:
            name = names[target] + ".dll"
            u = rng.random()
            if u < 0.1:
                name = name.upper()
            elif u < 0.2:
                name = names[target]  # no extension: the loader appends .dll
            flags = rng.choice(FLAGS_INVALID_BARE if shape == "invalid_flags" else FLAGS_BARE)
            if reachable:
                flags = rng.choice((0, 0, 0x8))
        else:
            where = [f for f, _ in layout[target]]
            f = rng.choice(where) if where and rng.random() < 0.9 else rng.choice(local)
            name = f"{folders[f]}\\{names[target]}.dll"
            flags = rng.choice(FLAGS_INVALID_ABS if shape == "invalid_flags" else FLAGS_ABS)
            if reachable:
                flags = rng.choice((0, 0x8))
        ops.append(_load_call(name, flags, loadw=(flags == 0 and rng.random() < 0.3)))

    api_names, files = _api_set_imports(random.Random(f"{seed}-{index}-api"), shape, files, ops, folders, names,
                                        local)
    return Case(ident=ident, shape=shape, root=root, names=names, folders=folders, files=files,
                cwd=cwd, path=path, ops=ops, state=state, api_names=api_names)


def _api_set_imports(arng, shape, files, ops, folders, names, local) -> tuple:
    """For API_RATE of the cases (their own random stream): every good leaf copy becomes an
    API-set leaf build of one variant, its import re-spelled (a case with no good leaf copy gets
    one in a plain folder, unless its point is that there is none); for the name in no schema, a file
    of that name (role a, sometimes wrong-machine) in one or two folders, or none; for the
    empty-host contract sometimes a file named like the contract (never to be opened); and
    sometimes a LoadLibraryW of the API-set name itself after the case's calls.
    Returns (api_names, files)."""
    if arng.random() >= API_RATE:
        return {}, files
    v = arng.choices(list(API_WEIGHTS), weights=list(API_WEIGHTS.values()))[0]
    api_names = {v: _api_spelling(arng, v, names)}
    files = [(p, r, v if (r == "l" and var == "ok") else var) for p, r, var in files]
    if not any(r == "l" and var == v for _, r, var in files) and shape not in ("missing_leaf", "only_wrong_machine"):
        files.append((f"{folders[arng.choice(local)]}\\{names['l']}.dll", "l", v))
    if v == "apiabs" and arng.random() < 0.6:
        for f in arng.sample(local + ["sys32", "win"], arng.choice([1, 1, 2])):
            files.append((f"{folders[f]}\\{dll_base('a', names)}.dll", "a", "x86" if arng.random() < 0.15 else "ok"))
    elif v == "apinohost" and arng.random() < 0.5:
        files.append((f"{folders[arng.choice(local)]}\\{api_import(v, names)}.dll", "a", "ok"))
    if arng.random() < 0.25:
        ops.append(_load_call(api_names[v] + ".dll", 0, loadw=True))
    return api_names, files


def _api_spelling(arng, variant: str, names: dict) -> str:
    """The API-set name as a case's leaf imports it (same length as built): sometimes another
    last version number (a contract matches whatever it is; a file name must match exactly),
    for the hosted contract sometimes another minor version (l1-2-0: in no schema, so searched
    as a file), and sometimes upper or mixed case."""
    head, last = api_import(variant, names).rsplit("-", 1)
    u = arng.random()
    if variant == "api" and u < 0.15:
        head = head[:-1] + str(int(head[-1]) + 1)
    elif u < (0.15 if variant == "apiabs" else 0.55):
        last = str(arng.randrange(1, 10))
    s = f"{head}-{last}"
    u = arng.random()
    if u < 0.2:
        s = s.upper()
    elif u < 0.4:
        s = "".join(c.upper() if arng.random() < 0.5 else c for c in s)
    return s


def _bare(rng, name: str) -> str:
    u = rng.random()
    if u < 0.1:
        return name.upper() + ".DLL"
    if u < 0.2:
        return name  # no extension: the loader appends .dll
    return name + ".dll"


def _free_library_ops(rng, chain, layout, folders, names) -> list:
    """Load the chain by full path with 0x8 (once or twice), FreeLibrary it (by bare name or
    full path, once or twice), then load a member of the chain by bare name: the loaded-module
    rule applies only to what is still loaded."""
    home = layout[chain[0]][0][0]
    full = f"{folders[home]}\\{names[chain[0]]}.dll"
    ops = [_load_call(full, 0x8, False) for _ in range(rng.choice([1, 1, 2]))]
    for _ in range(rng.choice([1, 1, 2])):
        who = full if rng.random() < 0.3 else names[chain[0]] + ".dll"
        ops.append(HostOp("free", (who,), {"op": "FreeLibrary", "name": who}))
    again = rng.choice(chain)
    ops.append(_load_call(_bare(rng, names[again]), 0, loadw=rng.random() < 0.5))
    return ops


def _two_imports_ops(rng, layout, folders, names) -> list:
    """Load two (imports leaf and extra, in either order), then the same call again (a retry
    after a failure must not probe for an import that loaded and stayed), then sometimes a
    bare load of the leaf or the extra DLL."""
    if rng.random() < 0.6:
        f = rng.choice(layout["w"])[0]
        call = (f"{folders[f]}\\{names['w']}.dll", rng.choice((0x8, 0x8, 0x8, 0, 0x1100)))
    else:
        call = (_bare(rng, names["w"]), rng.choice((0, 0, 0x1000)))
    loadw = call[1] == 0 and rng.random() < 0.3
    ops = [_load_call(call[0], call[1], loadw), _load_call(call[0], call[1], loadw)]
    if rng.random() < 0.5:
        ops.append(_load_call(names[rng.choice(["l", "l", "x"])] + ".dll", 0, loadw=True))
    return ops


def _relative_path_ops(rng, target, chain, layout, folders, names) -> list:
    """A relative name with a folder, `sub\\x.dll`: appended to every folder of the search
    path. Sometimes the bare name or the relative name was loaded first."""
    ops = []
    rel = SUB + "\\" + _bare(rng, names[target])
    if rng.random() < 0.25:
        first = rng.choice([rel, names[target] + ".dll"])
        ops.append(_load_call(first, 0, loadw=True))
    flags = rng.choice(FLAGS_RELATIVE)
    ops.append(_load_call(rel, flags, loadw=flags == 0 and rng.random() < 0.3))
    if rng.random() < 0.3:
        ops.append(_load_call(names[target] + ".dll", 0, loadw=True))
    return ops


def _no_refs_ops(rng, shape, target, chain, layout, folders, names, local) -> list:
    """LOAD_LIBRARY_AS_DATAFILE (0x2) or DONT_RESOLVE_DLL_REFERENCES (0x1) of the target (a
    DLL whose imports may be missing, or a wrong-machine copy), then sometimes a normal bare
    load of it or of its import: the data file is not listed as loaded, a DONT_RESOLVE module is
    (unresolved), and neither loaded the imports."""
    flags = rng.choice(FLAGS_DATAFILE if shape == "datafile" else FLAGS_NO_REFS)
    where = [f for f, _ in layout[target]]
    if (flags & 0x8 or rng.random() < 0.5) and where:
        name = f"{folders[rng.choice(where)]}\\{names[target]}.dll"
    else:
        name = _bare(rng, names[target])
        flags &= ~0x8
    ops = [_load_call(name, flags, False)]
    if rng.random() < 0.6:
        again = rng.choice(chain[:2])
        ops.append(_load_call(names[again] + ".dll", 0, loadw=True))
    return ops
