"""Applying a report's fix for real (tests/test_real_fixes.py): the typed action of a fix from
`dlltrace report --json` (calls[i].fixes[k]: action, folder, path, dest, package, flags, then ...,
never its text) made into a real change of a real-wheel situation (tests/test_real_corpus.py), so
that the situation can be run again under plain Wine and Wine's own log says whether the fix works.

What each action becomes (the situation's layout is laid out afresh in a folder of its own, the
fix folder, and every Windows path the report gives under the situation's folder is moved there):
- add_dll_directory  an `adddir FOLDER` op just before the op that made the failing call
- path_prepend       a `pathprepend FOLDER` op before it (PATH = FOLDER;<PATH as it is then>)
- set_dll_directory  a `setdlldir FOLDER` op before it
- preload_path       a `load PATH FLAGS` op before it: the fix's flags, else 0x1100 for Python code
                     (python: true; ctypes.WinDLL's LoadLibraryExW flags), else 0x8 (LOAD_WITH_ALTERED_SEARCH_PATH)
- copy_file          PATH copied into the folder DEST of the layout
- install_package    (and install, when it names a pip package) the package's files placed from its real
                     wheel (realwheels.WHEELS, pinned) where pip puts them in the situation's
                     environment (its folder is the prefix: Lib\\site-packages, Library\\bin ...)
- change_flags       the failing load op made with the fix's flags (LoadLibraryExW)
- flags              dll_load_dir_needs_full_path: the failing load op given the DLL's full path (and
                     the fix's flags, when it gives some: 0x1100 for DLL_LOAD_DIR alone);
                     altered_with_search_flags: the load's flags without 0x8
then each step of the fix's `then`, the same way. Any other action, or one that cannot be made
here (a run-time load some DLL makes cannot change its flags; a write outside the situation's
folder), raises CannotApply with what and why.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Optional

import realwheels as rw


class CannotApply(Exception):
    """A fix this harness cannot make into a real change (the message says which and why)."""


def norm_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_of(package: str) -> Optional[rw.Wheel]:
    """The pinned real wheel of a pip package (realwheels.WHEELS), or None."""
    for w in rw.WHEELS.values():
        if norm_dist(w.dist) == norm_dist(package):
            return w
    return None


def _key(win: str) -> str:
    return win.replace("/", "\\").rstrip("\\").lower()


@dataclass
class Layout:
    """The fix folder: the situation laid out again at `folder` (Unix), which Windows sees as `root_win`;
    `old_root` is the situation's folder the report speaks of."""
    old_root: str
    root_win: str
    folder: Path

    def remap(self, win: str) -> str:
        """A Windows path (or a ';' list of them, or any argument) with the situation's folder moved to the fix folder."""
        return re.sub(re.escape(self.old_root), lambda m: self.root_win, win, flags=re.I)

    def unix(self, win: str) -> Path:
        """A Windows path under the fix folder (after remap) -> its file in the layout; CannotApply elsewhere
        (the fix would change the shared Wine prefix, or a file outside it)."""
        p = self.remap(win)
        root = _key(self.root_win)
        k = _key(p)
        if k != root and not k.startswith(root + "\\"):
            raise CannotApply(f"{win} is outside the situation's folder {self.old_root}: not changed for real here")
        rel = PureWindowsPath(p[len(self.root_win):].lstrip("\\/"))
        return self.folder.joinpath(*rel.parts) if rel.parts else self.folder

    def find(self, name: str) -> list:
        """Windows paths (under the fix folder) of every file of the layout named `name` (case-insensitive)."""
        out = []
        for p in sorted(self.folder.rglob("*")):
            if p.is_file() and p.name.lower() == name.lower():
                out.append(self.root_win + "\\" + "\\".join(p.relative_to(self.folder).parts))
        return out


LOAD_OPS = rw.LOAD_OPS


def base(p: Optional[str]) -> str:
    return PureWindowsPath(p).name.lower() if p else ""


def failing_op(report: dict, call_index: int, ops: list, log: rw.WineLog) -> int:
    """The position in `ops` of the host op that made report call `call_index`: a host load op (matched
    to the report's calls by name in order, as realwheels.report_facts does), or, for a load a DLL made
    at run time, the op (from the last host load before it on) in whose part of Wine's log a load of
    that name failed. ops: [[op, operand, ...]] as run (Windows paths of the situation's folder);
    log: plain Wine's log of that run (one OpLog per op)."""
    pending = [k for k, op in enumerate(ops) if op[0] in LOAD_OPS]
    last = 0
    calls = report.get("calls") or []
    for i, c in enumerate(calls):
        name = c.get("name") or ""
        if pending and name.lower() == ops[pending[0]][1].lower():
            last = pending.pop(0)
            if i == call_index:
                return last
        elif i == call_index:
            for k in range(last, min(len(ops), len(log.ops))):
                if any(base(n) == base(name) for n, _ in log.ops[k].load_failed):
                    return k
            raise CannotApply(f"the failing call {call_index} ({c.get('op')} {name}) is no host op's, and no op's "
                              "part of Wine's log has a failed load of that name")
    raise CannotApply(f"the report has no call {call_index}")


@dataclass
class Applied:
    """A situation's ops with a fix applied. target: the position in ops of the op that made the failing
    call (moved by the ops inserted before it)."""
    ops: list
    target: int
    steps: list = field(default_factory=list)  # what was done, in words (for the test's messages)
    expect: list = field(default_factory=list)  # (DLL base name, Windows path) the fixed run must map it from (the last of a name)


def apply_fix(fix: dict, ops: list, target: int, layout: Layout, call: dict) -> Applied:
    """Apply `fix` (a report's fix, JSON) and its `then` steps: file changes in the layout, and the
    situation's ops with the fix's ops inserted before (or made of) ops[target]. call: the failing
    call's JSON (its op, name, flags)."""
    out = Applied([list(op) for op in ops], target)
    _apply(fix, out, layout, call, depth=0)
    return out


def _insert(a: Applied, op: list, why: str) -> None:
    a.ops.insert(a.target, op)
    a.target += 1
    a.steps.append(f"{' '.join(op)}  ({why})")


def _need(fix: dict, *names: str) -> list:
    missing = [n for n in names if not fix.get(n)]
    if missing:
        raise CannotApply(f"the {fix.get('action')} fix gives no {', '.join(missing)}: {fix}")
    return [fix[n] for n in names]


def _host_load(a: Applied, call: dict, action: str) -> list:
    op = a.ops[a.target]
    if op[0] not in LOAD_OPS or base(op[1]) != base(call.get("name")):
        raise CannotApply(f"{action}: the failing call ({call.get('op')} {call.get('name')}) is made by a DLL at run "
                          f"time (during the host's `{' '.join(op)}`), whose code cannot change its own load here")
    return op


def _apply(fix: dict, a: Applied, layout: Layout, call: dict, depth: int) -> None:
    if depth > 4:
        raise CannotApply("fix steps nested more than 4 deep")
    act = fix.get("action")
    if act == "add_dll_directory":
        (folder,) = _need(fix, "folder")
        _insert(a, ["adddir", layout.remap(folder)], "add_dll_directory: AddDllDirectory before the load")
        if fix.get("path"):
            a.expect.append((base(fix["path"]), layout.remap(fix["path"])))
    elif act == "path_prepend":
        (folder,) = _need(fix, "folder")
        _insert(a, ["pathprepend", layout.remap(folder)], "path_prepend: the folder first on PATH")
        if fix.get("path"):
            a.expect.append((base(fix["path"]), layout.remap(fix["path"])))
    elif act == "set_dll_directory":
        (folder,) = _need(fix, "folder")
        _insert(a, ["setdlldir", layout.remap(folder)], "set_dll_directory: SetDllDirectoryW before the load")
    elif act == "preload_path":
        (path,) = _need(fix, "path")
        flags = fix.get("flags")
        why = "the fix's flags"
        if flags is None:
            # (the JSON leaves out a false `python`: absent is a non-Python program, LoadLibraryExW)
            flags, why = (0x1100, "ctypes.WinDLL's flags") if fix.get("python") is True else (0x8, "LOAD_WITH_ALTERED_SEARCH_PATH")
        if not layout.unix(path).is_file() and _key(path).startswith(_key(layout.old_root)):
            raise CannotApply(f"preload_path: {path} is not a file of the situation")
        _insert(a, ["load", layout.remap(path), hex(flags)], f"preload_path: loaded by full path first, {why}")
        a.expect.append((base(path), layout.remap(path)))
    elif act == "copy_file":
        path, dest = _need(fix, "path", "dest")
        src = layout.unix(path)
        if not src.is_file():
            raise CannotApply(f"copy_file: {path} is not a file of the situation")
        to = layout.unix(dest) / src.name
        to.parent.mkdir(parents=True, exist_ok=True)
        if to.exists() or to.is_symlink():
            to.unlink()  # a placed file may be a hard link to the cache: never written through
        shutil.copyfile(src, to)
        a.steps.append(f"copied {layout.remap(path)} into {layout.remap(dest)}  (copy_file)")
        a.expect.append((src.name.lower(), layout.remap(dest).rstrip("\\") + "\\" + src.name))
    elif act in ("install_package", "install"):
        package = fix.get("package")
        if not package:
            raise CannotApply(f"{act}: the fix names no pip package (instruction: {fix.get('instruction')!r}); "
                              "nothing to install for real")
        w = wheel_of(package)
        if w is None:
            raise CannotApply(f"{act}: no pinned real wheel of {package} in realwheels.WHEELS")
        placed = []
        for member in rw.wheel_members(w):
            rel = rw.install_target(w, member)
            if rel is None:
                continue
            rw.place(rw.wheel_member(w, member), layout.folder / rel)
            placed.append(rel)
        a.steps.append(f"pip install {w.requirement}: {len(placed)} files of its real wheel placed under the "
                       f"situation's prefix ({act})")
        name, folder = fix.get("name"), fix.get("folder")
        if act == "install_package" and name and folder:
            if not (layout.unix(folder) / name).is_file():
                where = [r for r in placed if base(r) == name.lower()]
                raise CannotApply(f"install_package: the fix says {package} puts {name} in {folder}; its wheel "
                                  f"puts it at {where or 'no place'} (under the prefix)")
            a.expect.append((name.lower(), layout.remap(folder).rstrip("\\") + "\\" + name))
    elif act == "change_flags":
        if fix.get("flags") is None:
            raise CannotApply(f"change_flags: the fix gives no flags: {fix}")
        op = _host_load(a, call, act)
        a.ops[a.target] = ["load", op[1], hex(fix["flags"])]
        a.steps.append(f"the failing load made as `load {op[1]} {hex(fix['flags'])}` (change_flags; was `{' '.join(op)}`)")
    elif act == "flags":
        op = _host_load(a, call, act)
        reason = fix.get("reason")
        flags = op[2] if op[0] in ("load", "loadgpa") else "0"
        if reason == "dll_load_dir_needs_full_path":
            path = fix.get("path") or (fix["folder"].rstrip("\\") + "\\" + (fix.get("name") or base(op[1]))
                                       if fix.get("folder") else "")
            how = "the fix's"
            if path:
                path = layout.remap(path)
            else:  # the fix names no file: the DLL the program means, the only one of that name it has
                found = layout.find(base(op[1]))
                if len(found) != 1:
                    raise CannotApply(f"flags ({reason}): the fix names no path, and the situation has "
                                      f"{len(found)} files named {base(op[1])}: {found}")
                path, how = found[0], "the fix names none: the situation's only " + base(op[1])
            if fix.get("flags") is not None:  # the fix also changes the flags (DLL_LOAD_DIR alone -> 0x1100)
                if op[0] not in ("load", "loadgpa"):
                    raise CannotApply(f"flags ({reason}): the failing op `{' '.join(op)}` passes no flags")
                flags = hex(fix["flags"])
                a.ops[a.target] = [op[0], path, flags, *op[3:]]
            else:
                a.ops[a.target] = [op[0], path, *op[2:]]
            a.steps.append(f"the failing load given the full path {path} ({how}; flags {flags})")
        elif reason == "altered_with_search_flags":
            if op[0] not in ("load", "loadgpa"):
                raise CannotApply(f"flags ({reason}): the failing op `{' '.join(op)}` passes no flags")
            new = int(op[2], 0) & ~0x8
            a.ops[a.target] = [op[0], op[1], hex(new)]
            a.steps.append(f"the failing load made with {hex(new)} (0x8 dropped; flags fix)")
        else:
            raise CannotApply(f"flags: reason {reason!r} is not applied by this harness")
    else:
        raise CannotApply(f"action {act!r} ({fix.get('kind')}) has no real translation in this harness "
                          f"(fix: {fix.get('text')!r})")
    for step in fix.get("then") or []:
        _apply(step, a, layout, call, depth + 1)


def flatten(host: str, ops: list) -> tuple[list, list]:
    """loadhost's argv from ops, and each op's argv index (what the host's marks carry)."""
    argv, at = [host], []
    for op in ops:
        at.append(len(argv))
        argv.extend(op)
    return argv, at


def check_fixed(log: rw.WineLog, at: int, call: dict, leaf: str, expect: list) -> list:
    """What is still wrong, by Wine's own log of the fixed run, with the failing call: `at` is the argv
    index of the op that made it; `leaf` the DLL it failed on; expect: (DLL, path) it must map that from."""
    problems = []
    ops = {o.index: o for o in log.ops}
    o = ops.get(at)
    if o is None or o.err is None:
        return [f"the op at argv {at} never ended under Wine (ops seen: {[(x.index, x.op, x.err) for x in log.ops]})"]
    host_load = o.op in LOAD_OPS
    if o.err:
        problems.append(f"the host's `{o.op}` still fails: error {o.err}")
    if o.not_found:
        problems.append(f"Wine: not found {o.not_found}")
    if o.import_failed:
        problems.append(f"Wine: imports failed {o.import_failed}")
    if o.init_failed:
        problems.append(f"Wine: DllMain failed {o.init_failed}")
    if not host_load:
        failed = [(n, hex(st)) for n, st in o.load_failed if base(n) == base(call.get("name"))]
        if failed:
            problems.append(f"Wine: the run-time load of {base(call.get('name'))} still fails {failed}")
    mapped = {p.lower() for p in log.all_mapped()}
    if leaf and not any(base(p) == leaf.lower() for p in mapped):
        problems.append(f"Wine never mapped {leaf}")
    for name, path in dict(expect).items():  # a later step's file wins (install_package, then copy_file)
        if not any(base(p) == name for p in mapped):
            continue  # said above when it is the leaf
        if path.lower() not in mapped:
            problems.append(f"{name} mapped from {sorted(p for p in mapped if base(p) == name)}, not from the fix's {path}")
    return problems
