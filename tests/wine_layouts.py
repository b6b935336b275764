"""Generated cases for the Wine differential test (tests/test_wine_diff.py).

A case is a layout of the fixture DLLs (fixtures/wine/: top -> mid -> leaf, each possibly
in several folders and in several variants), a process state (cwd, PATH, AddDllDirectory,
SetDllDirectoryW, SetDefaultDllDirectories) and one or two LoadLibrary calls. From a case
come both the loadhost.exe arguments (what Wine does) and a scenario dict in the format of
docs/scenarios.md with `system.profile = "wine"` (what the simulator says).

Cases are fully determined by (seed, index): `generate(seed, n, nonce)`. The nonce only
changes the DLL names (unique per test session, so copies put in System32 or the Windows
folder cannot leak between cases or between sessions sharing a Wine prefix).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from wine_diffkit import EXPORT, IMPORTS, ROLES, SYSTEM_IMPORTS

WINDIR = r"C:\windows"
SYS32 = r"C:\windows\system32"
HOST_EXE = "loadhost.exe"
# What loadhost.exe has loaded before its first op (a mingw program: msvcrt + kernel32).
SYSTEM_LOADED = ("ntdll.dll", "kernelbase.dll", "kernel32.dll", "msvcrt.dll")
PLAIN = ("f1", "f2", "f3", "f4")  # plain folders under the case root

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
}


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

    @property
    def exe(self) -> str:
        return self.folders["app"] + "\\" + HOST_EXE

    def dll_names(self) -> set:
        return {n.lower() + ".dll" for n in self.names.values()}

    def keep_files(self) -> list:
        """Placeholder files that make the plain folders exist (an empty folder cannot be
        described in a scenario; AddDllDirectory of a missing folder fails)."""
        return [self.folders[k] + "\\keep.txt" for k in PLAIN]

    def describe(self) -> str:
        lines = [f"case {self.ident} ({self.shape})", f"  cwd={self.cwd}", f"  PATH={';'.join(self.path)}"]
        if self.state:
            lines.append(f"  state={self.state}")
        for p, r, v in self.files:
            lines.append(f"  file {p}  [{ {'t': 'top', 'm': 'mid', 'l': 'leaf'}[r]} {v}]")
        for op in self.ops:
            lines.append(f"  op {op.kind} {' '.join(op.args)}" + ("" if op.call else "   (process state)"))
        return "\n".join(lines)

    # ---------------------------------------------------------------- the scenario
    def scenario(self) -> dict:
        files = []
        for name in SYSTEM_LOADED:
            files.append({"path": f"{SYS32}\\{name}", "machine": "x64"})
        files.append({"path": self.exe, "machine": "x64", "is_dll": False,
                      "imports": list(SYSTEM_IMPORTS)})
        for k in self.keep_files():
            files.append({"path": k, "kind": "not_pe"})
        for path, role, variant in self.files:
            files.append(file_entry(path, role, variant, self.names))
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
                       "profile": "wine"},
            "process": process,
            "file": files,
            "call": [op.call for op in self.ops if op.call is not None],
        }


def file_entry(path: str, role: str, variant: str, names: dict) -> dict:
    if variant == "notpe":
        return {"path": path, "kind": "not_pe"}
    imports: list = []
    child = IMPORTS[role]
    if child:
        imports.append({"dll": names[child] + ".dll", "names": [EXPORT[child]]})
    imports.extend(SYSTEM_IMPORTS)
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
        chain.append(IMPORTS[chain[-1]])
    bottom = chain[-1]  # the leaf

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
    for r in chain:  # the initfail variant exists for the leaf only
        layout[r] = [(f, v if (v != "initfail" or r == "l") else "ok") for f, v in layout[r]]

    # "reachable": every folder a copy can be in is on the search path (standard order, PATH =
    # all plain folders), and the modules above the leaf load, so the leaf's copies decide:
    # a wrong-machine copy skipped before a good one, a DllMain-FALSE copy before or after one.
    reachable = shape in ("wrong_machine_then_ok", "init_fail") and rng.random() < 0.7
    if reachable:
        for r in chain[:-1]:
            layout[r] = [(rng.choice(local), "ok")]

    files = [(f"{folders[f]}\\{names[r]}.dll", r, v) for r in chain for f, v in layout[r]]

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

    for d in adddirs:
        ops.append(HostOp("adddir", (d,), None if state_form else {"op": "AddDllDirectory", "path": d}))
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
        if adddirs:
            state["dll_directories"] = list(adddirs)
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

    return Case(ident=ident, shape=shape, root=root, names=names, folders=folders, files=files,
                cwd=cwd, path=path, ops=ops, state=state)
