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


def execute_elf_folder(args: argparse.Namespace, objects: list[str], base: str = "", shown: str = "",
                       not_elf: Sequence[str] = (), policy: Optional["Policy"] = None) -> int:
    """`dlltrace deps FOLDER` of a Linux install (site-packages/torch), or of a wheel unpacked into one: each shared
    object in it loaded as a plain program's dlopen would, on this machine (diagnosis/deps_linux.py): a line each,
    the tree of each that has a problem (render/deps_linux.py). Exit 1 when one the package needs has. `base`: the
    folder the objects are named from (args.target); `shown`: what the output calls the target; `not_elf`: its files
    named as shared objects that are no ELF file; `policy`: a wheel's (loader/linux/policy.py)."""
    import os

    from dlltrace.diagnosis.deps_linux import folder_deps
    from dlltrace.render.deps_linux import folder_doc, folder_text
    from dlltrace.worlds.elf import LiveELFWorld

    env = {"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]} if os.environ.get("LD_LIBRARY_PATH") else {}
    d = folder_deps(objects, base or args.target, LiveELFWorld(), env, not_elf, policy)
    if args.json:
        json.dump(folder_doc(shown or args.target, d, policy), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(folder_text(shown or args.target, d, policy, markdown=args.markdown))
    return EXIT_PROBLEMS if d.needed else EXIT_OK


def execute_elf(args: argparse.Namespace) -> int:
    """`dlltrace deps x.so`: its DT_NEEDED closure as a plain program's dlopen would load it on this
    machine, through the ld.so model (loader/linux/static.py), every problem found (not only the first)."""
    import os

    from dlltrace.loader.linux.static import static_deps
    from dlltrace.render.deps_linux import elf_doc, elf_text
    from dlltrace.worlds.elf import LiveELFWorld

    env = {"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]} if os.environ.get("LD_LIBRARY_PATH") else {}
    r = static_deps(os.path.abspath(args.target), LiveELFWorld(), env)
    if args.json:
        json.dump(elf_doc(args.target, r), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(elf_text(args.target, r, markdown=args.markdown))
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
    out: worlds/static.py unpack_linux_site) and each resolved on this machine as `deps FOLDER` does. `check` judges
    the same wheel against its manylinux policy, on any OS."""
    import os
    import tempfile

    if not sys.platform.startswith("linux"):
        raise DlltraceError(f"{args.target}: a Linux wheel: deps resolves its shared objects on a Linux machine; "
                            "`dlltrace check` judges it against its manylinux policy on any OS", EXIT_USAGE)
    from dlltrace.loader.linux.policy import rule_wheel_policy
    from dlltrace.worlds.elffiles import elf_objects
    from dlltrace.worlds.static import ZipError, unpack_linux_site

    with tempfile.TemporaryDirectory(prefix="dlltrace-deps-") as tmp:
        site = os.path.join(tmp, "site-packages")
        try:
            elsewhere = unpack_linux_site(args.target, site)
        except (OSError, ZipError) as exc:
            raise DlltraceError(f"{args.target}: not a readable wheel (zip): {exc}", EXIT_USAGE) from None
        bad: list[str] = []  # (the members named as shared objects that are no ELF object: each a failing root)
        objects = elf_objects(site, not_elf=bad) if os.path.isdir(site) else []
        if not objects and not bad:
            left = [f"{elsewhere} in .data/data, scripts or headers"] if elsewhere else []
            raise DlltraceError(f"{args.target}: a Linux wheel with no shared object (.so) pip installs into "
                                "site-packages: nothing to resolve" + (f" (left out: {'; '.join(left)})" if left else ""),
                                EXIT_USAGE)
        try:
            policy: Optional[Policy] = rule_wheel_policy(args.target)
        except DlltraceError:  # (an architecture the policies do not have: nothing to name against)
            policy = None
        return execute_elf_folder(args, objects, base=site, shown=args.target, not_elf=bad, policy=policy)


def execute(args: argparse.Namespace) -> int:
    if _LINUX_WHEEL.search(args.target):  # a Linux wheel: its .so files unpacked, each resolved on this machine
        refuse_windows_options(args, "a Linux wheel")
        return execute_elf_wheel(args)
    from dlltrace.worlds.elffiles import elf_objects, is_elf

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
