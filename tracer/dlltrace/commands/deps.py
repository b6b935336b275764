"""`dlltrace deps TARGET`: the import closure of a .dll/.pyd/.exe, a folder or a wheel, resolved by the
simulated loader in a static world (diagnosis/static.py, worlds/static.py), without running anything. Exits 0
when every load resolves, 1 (EXIT_PROBLEMS) when one would fail (README, Exit codes)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Optional, Sequence

from dlltrace.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, DlltraceError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dlltrace.loader.linux.policy import Policy
    from dlltrace.loader.linux.static import StaticResult


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="a .dll, .pyd or .exe, a folder (a package or site-packages) or a .whl; on Linux "
                                  "also a .so, a Linux install's folder or a manylinux wheel (resolved on this machine)")
    p.add_argument("--only", metavar="NAME", action="append", default=[],
                   help="in a folder or wheel, load only this file (a name or a path inside it; repeatable)")
    p.add_argument("--flags", type=lambda s: int(s, 0), default=None,
                   help="load with LoadLibraryExW(target, FLAGS) instead of the default context (.pyd: a Python "
                        "extension import, 0x1100; .dll: ctypes.CDLL; .exe: a process start)")
    p.add_argument("--python", metavar="X.Y", default=None,
                   help="the Python version, 3.13t the free-threaded build (default: the wheel's tag, else the folder's "
                        "extensions' tag: .cp311-win_amd64.pyd, else 3.12)")
    p.add_argument("--path", metavar="FOLDER", action="append", default=[],
                   help="a PATH entry in front of the default PATH (a Windows path, or a folder inside the target)")
    p.add_argument("--add-dll-directory", metavar="FOLDER", action="append", default=[], dest="dll_dirs",
                   help="an os.add_dll_directory folder made before the load (a Windows path, or a folder inside the target)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the PE facts cache (wheel members', a folder's files')")
    p.add_argument("--no-vc-runtime", action="store_true",
                   help="model a Windows without the Visual C++ 2015-2022 runtime (by default it is in System32, as "
                        "most machines have it: a wheel that needs msvcp140.dll and does not ship it passes)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON result (its schema: dlltrace/schemas/static-v1.json in this package)")
    out.add_argument("--markdown", action="store_true", help="print Markdown")


def is_elf(path: str) -> bool:
    """Whether `path` is a regular file (a link followed) that starts as an ELF file does. A FIFO, a socket or a
    device is not read (opened without blocking, then let go: reading a FIFO waits for a writer forever)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 4) == b"\x7fELF"
    except OSError:
        return False
    finally:
        os.close(fd)


def elf_objects(folder: str, limit: int = 5000, not_elf: Optional[list[str]] = None) -> list[str]:
    """The ELF shared objects under a folder (`*.so`, `*.so.N...`), in a stable order, each file once (a link
    to another is not one more: libfoo.so -> libfoo.so.1); [] when it is a Windows install (classify.py
    windows_install: more .pyd than Linux extensions; pip's Windows launchers, .NET assemblies or a stray .pyd do
    not make a Linux site-packages one). More than `limit`: DlltraceError (EXIT_USAGE). `not_elf`: given, the
    regular files named so that are no ELF file are added to it (a dlopen of one fails: check fails them too)."""
    import os
    import stat

    from dlltrace.classify import windows_install

    out: list[str] = []
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for fn in sorted(filenames):
            low = fn.lower()
            names.append(fn)
            p = os.path.join(dirpath, fn)
            if len(out) <= limit and (low.endswith(".so") or ".so." in low) and not os.path.islink(p):
                if is_elf(p):
                    out.append(p)
                elif not_elf is not None and stat.S_ISREG(_mode(p)):
                    not_elf.append(p)
    if windows_install(names):
        return []
    if len(out) > limit:  # (not the first `limit` of them said to be all: a usage error; a PE file found after wins)
        raise DlltraceError(f"{folder}: more than {limit:,} shared objects in it: give a folder inside it (a "
                            "package)", EXIT_USAGE)
    return out


def _elf_doc(target: str, r: "StaticResult") -> dict:
    """The --json document of one shared object's closure (schemas/static-linux-v1.json)."""
    from dlltrace.render.linux_tree import tree_dict

    return {"format": "dlltrace-static-linux", "schema": "dlltrace-static-linux", "version": 1, "command": "deps",
            "target": target, "loaded": r.loaded, "ok": not r.problems,
            "problems": [{"name": p.name, "cause": p.cause, "needed_by": p.needed_by, "error": p.error,
                          "candidates": list(p.candidates)} for p in r.problems],
            "tree": tree_dict(r.tree) if r.tree is not None else None}


def _mode(path: str) -> int:
    import os

    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return 0


def execute_elf_folder(args: argparse.Namespace, objects: list[str], base: str = "", shown: str = "",
                       not_elf: Sequence[str] = (), policy: Optional["Policy"] = None) -> int:
    """`dlltrace deps FOLDER` of a Linux install (site-packages/torch): each shared object in it loaded as a plain
    program's dlopen would, on this machine (execute_elf's, one world for all): a line each, the tree of each that
    has a problem. Exit 1 when one has. `base`: the folder the objects are named from (args.target); `shown`: what
    the output calls the target (args.target); `not_elf`: its files named as shared objects that are no ELF file,
    each loaded after the others, as a root of its own (its dlopen fails, as check fails it; unless its package
    loads it only on demand); `policy`: a wheel's (loader/linux/policy.py), what was found on this machine that it
    does not allow is named (rule_outside_policy: what check fails the wheel for; the loads here still load)."""
    import os

    from dlltrace.loader.linux.static import StaticResult, static_deps, static_roots
    from dlltrace.pkgloaders import optional_row
    from dlltrace.render.escape import escape_code_block, escape_terminal
    from dlltrace.render.linux_tree import tree_lines
    from dlltrace.render.optional import optional_words
    from dlltrace.worlds.elf import LiveELFWorld
    from dlltrace.worlds.loaderfiles import site_loaders

    site, loaders = site_loaders(base or args.target)  # (as deps of a Windows folder reads them: what loads on demand)
    env = {"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]} if os.environ.get("LD_LIBRARY_PATH") else {}
    world = LiveELFWorld()
    results: list[tuple[str, StaticResult]] = []
    result_of: dict[str, StaticResult] = {}  # (results, by the root's name)
    by: dict[str, str] = {}  # an object an earlier root loaded (its real path) -> that root
    reached: list[tuple[str, str]] = []  # (object, the root that loaded it), not loaded again on its own
    failing: set[str] = set()  # (the reached objects a need of which fails in their root's load)
    optional: dict[str, str] = {}  # a root that fails, and its package does without it: the loader row
    def in_site(path: str) -> str:  # (a file as the member of site-packages it is, "/"; "" outside it)
        r = os.path.relpath(os.path.abspath(path), site)
        return "" if r == os.pardir or r.startswith(os.pardir + os.sep) else r.replace(os.sep, "/")

    for p in [*static_roots(objects), *not_elf]:
        rel = os.path.relpath(p, base or args.target)
        if os.path.realpath(p) in by:
            reached.append((rel, by[os.path.realpath(p)]))
            if any(q.needed_by and os.path.realpath(q.needed_by) == os.path.realpath(p)
                   for q in result_of[by[os.path.realpath(p)]].problems):
                failing.add(rel)
            continue
        r = static_deps(os.path.abspath(p), world, env)  # (the model's program has a cwd of its own)
        results.append((rel, r))
        result_of[rel] = r
        opt = optional_row(loaders, in_site(p))
        # (optional when each failing need is its own, the program's or another optional file's: a library of the
        # package it loads whose need fails is the package's failure, as check has it: static_elf.rule_optional_members)
        if opt and r.problems and all(not q.needed_by or in_site(q.needed_by) in (in_site(p), "")
                                      or optional_row(loaders, in_site(q.needed_by)) for q in r.problems):
            optional[rel] = opt
        for x in r.mapped:  # (also when its load failed: they are found as it finds them, their problems its)
            by.setdefault(os.path.realpath(x), rel)
    bad = [(rel, r) for rel, r in results if r.problems]
    needed = [rel for rel, _ in bad if rel not in optional]  # (what makes the run fail: exit 1)
    outside = []
    foreign: list[tuple[str, str]] = []  # (object, its machine) of those not for the machine the wheel's tag names
    if policy is not None:
        from dlltrace.loader.linux.policy import rule_outside_policy, rule_wheel_machine

        outside = rule_outside_policy(policy, [f for _, r in results for f in r.found], in_site, world.file)
        foreign = [(os.path.relpath(p, base or args.target), m) for p in objects
                   for m in (rule_wheel_machine(policy, world.file(os.path.abspath(p))),) if m is not None]
    if args.json:
        docs = [dict(_elf_doc(rel, r), file=rel) for rel, r in results]
        doc = {"format": "dlltrace-static-linux", "schema": "dlltrace-static-linux", "version": 1, "command": "deps",
               "target": shown or args.target, "loaded": list(dict.fromkeys(x for _, r in results for x in r.loaded)),
               "ok": not needed, "problems": [p for d in docs for p in d["problems"]], "tree": None,
               "objects": [{**{k: d[k] for k in ("file", "loaded", "ok", "problems", "tree")},
                            **({"optional_by": optional[d["file"]]} if d["file"] in optional else {})} for d in docs],
               "reached": [{"file": rel, "loaded_by": root} for rel, root in reached]}
        if policy is not None:
            doc["policy"] = f"{policy.name}_{policy.arch}"
            doc["outside_policy"] = [{"name": o.name, "path": o.path, "needed_by": o.needed_by,
                                      "version": o.version or None, "newest": o.newest or None} for o in outside]
            doc["wrong_machine"] = [{"file": rel, "machine": m} for rel, m in foreign]
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_PROBLEMS if needed else EXIT_OK
    total = len(results) + len(reached)
    lines = [f"dlltrace deps {shown or args.target}: {total} shared object{'s' if total != 1 else ''}, "
             + (f"{len(bad) + len(failing)} with a problem" if bad else "every one loads, no problem")
             + (f" ({len(optional)} of them optional, which the package does without)" if optional else "")
             + (f"; {len({(o.name, o.version) for o in outside})} found on this machine outside the wheel's policy "
                "(below)" if outside else "")
             + (f"; {len(foreign)} not for the machine its tag names (below)" if foreign else ""), ""]
    for rel, r in results:
        n = len(r.loaded)
        why = f" (optional: {optional_words(optional[rel])}; the package does without it)" if rel in optional else ""
        lines.append(f"  {'✗' if r.problems else '✓'} {rel}: " + (f"{len(r.problems)} problem(s){why}" if r.problems
                                                                  else f"{n} object{'s' if n != 1 else ''} load{'s' if n == 1 else ''}"))
    lines += [f"  ✗ {rel}: loaded by {root}, as it loads it: a library it needs fails (below)" if rel in failing
              else f"  ✓ {rel}: loaded by {root}, as it loads it" for rel, root in reached]
    if outside and policy is not None:
        libs = sorted({o.name for o in outside if not o.version})
        versions = sorted({o.version for o in outside if o.version})
        what = " and ".join(x for x in (f"{len(libs)} librar{'y' if len(libs) == 1 else 'ies'}" if libs else "",
                                         f"{len(versions)} symbol version{'s' if len(versions) != 1 else ''}"
                                         if versions else "") if x)
        lines += ["", f"Found on this machine, outside the wheel's policy ({policy.name}_{policy.arch}): {what}. "
                  "These load here; a machine without them fails (`dlltrace check` fails the wheel for each):"]
        for o in outside:
            lines.append(f"  ! {o.name} {o.version}, needed by {o.needed_by}: newer than the policy allows (its newest "
                         f"{o.version.partition('_')[0]}: {o.newest}); here from {o.path}" if o.version else
                         f"  ! {o.name}, needed by {o.needed_by}: not a {policy.name} system library; here from {o.path}")
    if foreign and policy is not None:
        lines += ["", f"Not for the machine the wheel's tag names ({policy.arch}): pip installs it on {policy.arch} "
                  "machines, where these do not load (`dlltrace check` fails the wheel for each):"]
        lines += [f"  ! {rel}: {m}" for rel, m in foreign]
    for rel, r in bad:
        lines += ["", f"{rel}:"] + (tree_lines(r.tree) if r.tree is not None else [])
    print("\n".join(escape_code_block(lines) if args.markdown else [escape_terminal(x) for x in lines]))
    return EXIT_PROBLEMS if needed else EXIT_OK


def execute_elf(args: argparse.Namespace) -> int:
    """`dlltrace deps x.so`: its DT_NEEDED closure as a plain program's dlopen would load it on this
    machine, through the ld.so model (loader/linux/static.py), every problem found (not only the first)."""
    import os

    from dlltrace.loader.linux.static import static_deps
    from dlltrace.render.escape import escape_code_block, escape_terminal
    from dlltrace.render.linux_tree import tree_lines
    from dlltrace.worlds.elf import LiveELFWorld

    path = os.path.abspath(args.target)
    env = {"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]} if os.environ.get("LD_LIBRARY_PATH") else {}
    r = static_deps(path, LiveELFWorld(), env)
    if args.json:
        json.dump(_elf_doc(args.target, r), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        lines = [f"dlltrace deps {args.target}: " + (f"{len(r.loaded)} objects load, no problem" if not r.problems
                                                      else f"{len(r.problems)} problem(s)"), ""]
        lines += tree_lines(r.tree) if r.tree is not None else [f"  {x}" for x in r.loaded]
        # (a name of the closure cannot close the block, nor fake a line: render/escape.py)
        print("\n".join(escape_code_block(lines) if args.markdown else [escape_terminal(x) for x in lines]))
    return EXIT_PROBLEMS if r.problems else EXIT_OK


# the options of a Windows target that change what is loaded, which the ld.so model has no use for (each with its
# dest and its default; --no-cache and --no-vc-runtime change nothing there)
WINDOWS_OPTIONS: tuple[tuple[str, str, object], ...] = (
    ("--only", "only", []), ("--flags", "flags", None), ("--python", "python", None), ("--path", "path", []),
    ("--add-dll-directory", "dll_dirs", []))


def refuse_windows_options(args: argparse.Namespace, what: str) -> None:
    """A Windows target's option given with a Linux one (`what`): a usage error, not silently ignored (--only
    x.so of a Linux folder examined every object in it)."""
    given = [name for name, dest, default in WINDOWS_OPTIONS if getattr(args, dest, default) != default]
    if given:
        raise DlltraceError(f"{', '.join(given)}: for a Windows target (a .dll/.pyd/.exe, a folder of them or a "
                            f"wheel), not taken for {what}", EXIT_USAGE)


_LINUX_WHEEL = re.compile(r"-(?:[^-]*\.)?(?:manylinux|musllinux|linux_)[^-]*\.whl$", re.IGNORECASE)


def execute_elf_wheel(args: argparse.Namespace) -> int:
    """`dlltrace deps x.whl` of a Linux wheel: its shared objects unpacked into a site-packages of their own (a
    temporary folder; `<name>.data/purelib` and `platlib` members where pip puts them, other `.data` members left
    out) and each resolved on this machine as `deps FOLDER` does. `check` judges the same wheel against its
    manylinux policy, on any OS."""
    import os
    import tempfile

    if not sys.platform.startswith("linux"):
        raise DlltraceError(f"{args.target}: a Linux wheel: deps resolves its shared objects on a Linux machine; "
                            "`dlltrace check` judges it against its manylinux policy on any OS", EXIT_USAGE)
    from dlltrace.pkgloaders import MAX_LOADER_FILE, is_loader_file
    from dlltrace.worlds.static import (InflateBudget, ZipError, is_data_member, is_elf_name, member_name_problem,
                                        read_member, site_relative, zip_members)

    def is_text(member: str) -> bool:  # (a <name>.data/platlib/ member: by where pip puts it)
        name = site_relative(member)
        return name is not None and name.endswith((".py", ".pth")) and is_loader_file(name)

    with tempfile.TemporaryDirectory(prefix="dlltrace-deps-") as tmp:
        site = os.path.join(tmp, "site-packages")
        try:
            budget = InflateBudget()
            elsewhere = 0  # (members left out: in another of pip's schemes)
            # (its shared objects, and the files its packages' loaders are read from: what loads one on demand; its
            # central directory read once)
            # (the .data members after the others, as pip writes them: of two at one place, pip's is the last)
            for m in sorted(zip_members(args.target, keep=lambda n: is_elf_name(n) or is_text(n)),
                            key=lambda m: is_data_member(m.filename)):
                parts = m.filename.split("/")
                if parts[0].endswith(".data"):  # (pip's schemes: purelib and platlib are site-packages)
                    if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                        elsewhere += 1
                        continue
                    parts = parts[2:]
                    # (pip checks the path after its scheme: `x.data/platlib/../../y.so` stays in the wheel but
                    # lands above site-packages, outside the temporary folder)
                    why = member_name_problem("/".join(parts))
                    if why is not None:
                        raise DlltraceError(f"{args.target}: its member {m.filename!r} has {why}: pip refuses to "
                                            "install such a wheel", EXIT_USAGE)
                if is_text(m.filename):  # (a loader's text: read as wheel_loaders reads it, at most 1 MiB)
                    if m.file_size > (1 << 20):
                        continue
                    data = read_member(args.target, m, budget=budget)[:MAX_LOADER_FILE]
                else:
                    # (one that is not an ELF object is read no further than its first bytes, as check reads it: a
                    # zip bomb's zeros named x.so are neither inflated into memory nor written out)
                    data = read_member(args.target, m, magic=b"\x7fELF", budget=budget)
                    # (one that is not: its first bytes written, a file named so that is no ELF object, which a dlopen
                    # fails on, as check fails it: elf_objects' not_elf)
                dest = os.path.join(site, *parts)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as f:
                    f.write(data)
        except (OSError, ZipError) as exc:
            raise DlltraceError(f"{args.target}: not a readable wheel (zip): {exc}", EXIT_USAGE) from None
        bad: list[str] = []  # (the members named as shared objects that are no ELF object: each a failing root)
        objects = elf_objects(site, not_elf=bad) if os.path.isdir(site) else []
        if not objects and not bad:
            left = [f"{elsewhere} in .data/data, scripts or headers"] if elsewhere else []
            raise DlltraceError(f"{args.target}: a Linux wheel with no shared object (.so) pip installs into "
                                "site-packages: nothing to resolve" + (f" (left out: {'; '.join(left)})" if left else ""),
                                EXIT_USAGE)
        from dlltrace.loader.linux.policy import rule_wheel_policy

        try:
            policy: Optional[Policy] = rule_wheel_policy(args.target)
        except DlltraceError:  # (an architecture the policies do not have: nothing to name against)
            policy = None
        return execute_elf_folder(args, objects, base=site, shown=args.target, not_elf=bad, policy=policy)


def execute(args: argparse.Namespace) -> int:
    if _LINUX_WHEEL.search(args.target):  # a Linux wheel: its .so files unpacked, each resolved on this machine
        refuse_windows_options(args, "a Linux wheel")
        return execute_elf_wheel(args)
    if is_elf(args.target):  # a Linux shared object (.so): the ld.so model (and none of the Windows side imported)
        refuse_windows_options(args, "a Linux shared object")
        return execute_elf(args)
    import os

    if os.path.isdir(args.target):  # a Linux install's folder: each of its shared objects so (no PE file in it)
        bad: list[str] = []
        objects = elf_objects(args.target, not_elf=bad)
        if objects:
            refuse_windows_options(args, "a Linux install's folder")
            return execute_elf_folder(args, objects, not_elf=bad)
    from dlltrace import winpath
    from dlltrace.diagnosis.static import deps, open_target
    from dlltrace.render.static import deps_dict, deps_json_indent, deps_markdown, print_deps

    if args.python is not None and not _python_ok(args.python):
        raise DlltraceError(f"--python {args.python}: give a version like 3.11", EXIT_USAGE)
    target = open_target(args.target, python=args.python, use_cache=not args.no_cache,
                         vc_runtime=not args.no_vc_runtime)
    focus: list[str] = []
    if args.only:
        for o in args.only:
            want = o.replace("/", "\\").lower()
            hits = [f.path for f in target.files
                    if winpath.key(f.path).endswith("\\" + want) or winpath.basename(f.path).lower() == want]
            if not hits:
                raise DlltraceError(f"--only {o}: no such file in {args.target}", EXIT_USAGE)
            focus.extend(hits)
    result = deps(target, flags=args.flags, extra_path=args.path, dll_dirs=args.dll_dirs, only=focus or None)
    if args.json:
        # (dumps: json.dump's generators pass each piece up through every level, the C encoder of a one-shot compact
        # dumps does not; compact JSON for a deep tree: render/static.py deps_json_indent)
        sys.stdout.write(json.dumps(deps_dict(result), indent=deps_json_indent(result), ensure_ascii=False) + "\n")
    elif args.markdown:
        sys.stdout.write(deps_markdown(result))
    else:
        from dlltrace.render.terminal import terminal_console

        print_deps(result, terminal_console(getattr(args, "color", "auto"), plain_width=160))
    return EXIT_PROBLEMS if result.failing else EXIT_OK


def _python_ok(v: str) -> bool:
    """X.Y, or X.Yt: the free-threaded build (3.13t), the Python a cp313t wheel's tag gives (wheel_python)."""
    parts = (v[:-1] if v.endswith("t") else v).split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)
