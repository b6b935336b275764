"""`dlltrace check` of a Linux wheel (manylinux, musllinux): every shared object of the wheel loaded by the ld.so
model (loader/linux/engine.py) in a virtual machine made of the wheel's files installed in a site-packages
(with the other Linux wheels given in the same call), and the libraries its manylinux/musllinux policy lets a wheel
need from the system (data/manylinux-policy.json, auditwheel's policy: the anchor), each defining the symbol
versions the policy allows. Each DT_NEEDED is found as ld.so finds it (DT_RPATH/DT_RUNPATH with $ORIGIN, so
auditwheel's <pkg>.libs folders), and each version need (.gnu.version_r) is checked against what the library it
binds to defines. Every problem is found, not only the first: the load is run again with a stand-in for each
(a library put on LD_LIBRARY_PATH, a version added), as loader/linux/static.py does for `deps x.so`.

What differs from auditwheel: docs/static.md ("Linux wheels").
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from typing import Optional

from dlltrace.classify import DllClass
from dlltrace.diagnosis.static import (LINUX_SITE, CheckResult, CheckRow, FileRow, GateOptions, Problem, Provider,
                                       Status, Target, required_not_given_words, rule_nothing_to_check)
from dlltrace.elf import ELFError, ELFFacts, ELFResult, read_elf_bytes
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.loader.linux.engine import DlopenResult, LinuxProcess, LinuxSimulator
from dlltrace.loader.linux.rules import RTLD_NOW
from dlltrace.loader.linux.static import static_roots
from dlltrace.pkgloaders import optional_row, optional_unreached
from dlltrace.loader.linux.fixes import nvidia_wheels
from dlltrace.loader.linux.policy import ARCH_MACHINE, INTERPRETERS, Policy, newest_version, rule_wheel_policy
from dlltrace.worlds.elf import OverlayWorld, VirtualELFWorld
from dlltrace.worlds.static import InflateBudget, ZipError, normalize_dist, read_member, site_relative, zip_members

PREFIX = "/venv"
SITE = LINUX_SITE  # where pip installs the wheel in the model
SYSTEM_DIR = "/usr/lib/x86_64-linux-gnu"  # where the policy's libraries are (the model's first default folder)
STAND_IN_DIR = "/dlltrace-check/stand-ins"
PROGRAM = "/dlltrace-check/python"  # a program with no DT_RPATH / DT_RUNPATH / DT_NEEDED of its own
MAX_ROUNDS = 400


def site_path(member: str) -> str:
    """Where pip installs a wheel member in the model: site-packages (also .data/platlib and purelib), <prefix>/<rest>
    for .data/data, <prefix>/bin for scripts, <prefix>/include/site/python3/<dist> for headers."""
    parts = [x for x in member.split("/") if x not in ("", ".")]
    site = SITE
    if len(parts) > 2 and parts[0].endswith(".data"):
        if parts[1] == "data":
            return posixpath.join(PREFIX, *parts[2:])
        if parts[1] == "scripts":
            return posixpath.join(PREFIX, "bin", *parts[2:])
        if parts[1] == "headers":  # (pip's headers scheme of a venv: <prefix>/include/site/python3.X/<dist>)
            return posixpath.join(PREFIX, "include", "site", "python3", parts[0][:-len(".data")].split("-")[0], *parts[2:])
        return posixpath.join(site, *parts[2:])
    return posixpath.join(site, *parts)


def wheel_elf_facts(wheel: str, members: tuple[str, ...]) -> dict[str, ELFResult]:
    """member -> its ELF facts (elf.py), each member inflated alone (its CRC-32 checked; one that does not start
    with the ELF magic is read no further: an ELFError). Raises OSError / ZipError."""
    want = set(members)
    out: dict[str, ELFResult] = {}
    budget = InflateBudget()
    for m in zip_members(wheel, keep=lambda n: n in want):
        out[m.filename] = read_elf_bytes(read_member(wheel, m, magic=b"\x7fELF", budget=budget))
    return out


def _read(target: Target) -> dict[str, ELFResult]:
    try:
        return {site_path(m): f for m, f in wheel_elf_facts(target.given, target.elf_members).items()}
    except (OSError, ZipError) as exc:
        raise DlltraceError(f"{target.given}: not a readable wheel (zip): {exc}", EXIT_USAGE) from None


def check_elf(target: Target, peers: list[Target], opts: GateOptions) -> CheckResult:
    """The gate's verdict on a Linux wheel (module docstring), as check's CheckResult: rows of each needed
    library (bundled, a given or required peer's, the policy's `system`, allowed, or a problem), problems."""
    policy = rule_wheel_policy(target.given)
    own = {p: f for p, f in _read(target).items() if not opts.excludes(posixpath.basename(p))}
    member_of = {site_path(m): m for m in target.elf_members}
    peer_of: dict[str, Target] = {}
    files: dict[str, ELFResult] = dict(own)
    for peer in peers:
        if peer.platform != "linux":
            continue
        for p, f in _read(peer).items():
            if p not in files:
                files[p] = f
                peer_of[p] = peer
    needs: dict[str, set[str]] = {}  # library name -> every version any object needs from it
    for f in files.values():
        if isinstance(f, ELFFacts):
            for vn in f.version_needs:
                needs.setdefault(vn.file, set()).update(vn.versions)
    system: dict[str, ELFResult] = {}
    for lib in policy.libraries:
        allowed = {f"{k}_{v}" for k, vs in policy.versions.items() for v in vs}
        extra = {v for v in needs.get(lib, ()) if policy.allows_version(v)}  # (prefixes the policy does not list)
        system[posixpath.join(SYSTEM_DIR, lib)] = ELFFacts(soname=lib, version_defs=tuple(sorted(allowed | extra)))
    for f in files.values():  # (the ELF interpreter a library names: the C library's own, with its versions)
        if isinstance(f, ELFFacts):
            for n in f.needed:
                if INTERPRETERS.match(n) and posixpath.join(SYSTEM_DIR, n) not in system:
                    system[posixpath.join(SYSTEM_DIR, n)] = ELFFacts(soname=n, version_defs=tuple(sorted(
                        {f"{k}_{v}" for k, vs in policy.versions.items() for v in vs}
                        | {v for v in needs.get(n, ()) if policy.allows_version(v)})))
    machine = ARCH_MACHINE[policy.arch]
    problems: list[Problem] = []
    rows_files: list[FileRow] = []
    for path in sorted(own):
        f = own[path]
        m = member_of[path]
        line = target.record_lines.get(m)
        if isinstance(f, ELFError):
            rows_files.append(FileRow(m, None, None, None, f.kind, member=m, record_line=line))
            problems.append(Problem("not_elf", posixpath.basename(m), path=m, detail=f"{m} is not an ELF file ({f.message})"))
            continue
        rows_files.append(FileRow(m, f.machine, None, None, None, member=m, record_line=line))
        if f.machine != machine:
            problems.append(Problem("wrong_machine", posixpath.basename(m), path=m, machine=f.machine,
                                    detail=f"{m} is {f.machine}; the wheel is {policy.arch} ({machine})"))
    if not rows_files and not opts.allow_pure:
        problems.append(rule_nothing_to_check(target))
    world = VirtualELFWorld(files={**files, **system})
    stand_ins: dict[str, ELFResult] = {}
    decided: dict[str, tuple[Status, Optional[Provider]]] = {}  # a library that is not found -> its row's verdict
    added: dict[str, set[str]] = {}  # library path -> versions added to it (each a problem)
    runs: list[DlopenResult] = []
    reached: set[str] = set()
    for root in static_roots([p for p, f in own.items() if isinstance(f, ELFFacts) and f.machine == machine]):
        if root in reached:  # (loaded by an earlier root, found as that load finds it: not a root of its own)
            continue
        res = _load_keep_going(world, root, stand_ins, added, decided, target, opts, policy, needs, problems,
                               member_of, files)
        runs.append(res)
        # (what it found, also when its load stopped: those are loaded as it loads them, their problems are its)
        reached.update(posixpath.normpath(lk.path) for lk in res.lookups if lk.path)
    # (a member loaded only on demand whose own load fails: deps goes on past it, so no failure here either)
    optional_of = rule_optional_members(target, own, member_of)
    optional_problems: list[Problem] = []
    kept: list[Problem] = []
    for q in problems:
        at = q.needed_by[0] if q.needed_by else q.path  # (the member whose load the problem fails)
        if at and optional_of.get(at):
            optional_problems.append(dataclasses.replace(q, optional_by=optional_of[at]))
        else:
            kept.append(q)
    problems = kept
    rows = _rows(runs, own, peer_of, member_of, decided, policy, target)
    for row in rows.values():
        by = {optional_of.get(m, "") for m in row.needed_by}
        row.optional_by = by.pop() if len(by) == 1 else ""  # (every member that needs it optional, by one row)
        if row.status in ("not_allowed", "required_not_given") and row.optional_by:
            row.status = "optional"  # (only files the package loads on demand, and does without, need it)
        elif row.status == "not_allowed":
            problems.append(Problem("not_allowed", row.dll, list(row.needed_by), row.klass,
                                    detail=f"{row.dll} is not in the wheel, not a {policy.name} system library, and "
                                           "not allowed" + _not_given_words(target, peers, opts)))
        elif row.status == "required_not_given" and row.provider is not None:
            problems.append(Problem("required_not_given", row.dll, list(row.needed_by), row.klass,
                                    detail=required_not_given_words(row.dll, row.provider.dist)))
    return CheckResult(target, opts.allow, rows_files, sorted(rows.values(), key=lambda r: (r.status, r.dll.lower())),
                       problems, (), None, None, opts, policy=f"{policy.name}_{policy.arch}",
                       optional_problems=optional_problems)


def rule_optional_member(target: Target, member: str) -> str:
    """The loader row (data/loaders.json) that loads the wheel member only on demand and does without it when its
    load fails (numba's threading layers: tbbpool needs libtbb.so.12, omppool libgomp), "" for any other member:
    the Linux side of static.rule_optional_file, on member names (pkgloaders.optional_row; a <name>.data/platlib/
    member by where pip puts it, worlds/static.site_relative)."""
    return optional_row(target.loaders, site_relative(member) or member)


def rule_optional_members(target: Target, own: dict[str, ELFResult], member_of: dict[str, str]) -> dict[str, str]:
    """check's optional members (the Linux side of static.rule_optional_files): each of the wheel's ELF members
    (`own`, by its place in the model; `member_of` its member name) that rule_optional_member says its package loads
    only on demand -> that loader row, less any a member loaded at once needs (DT_NEEDED naming its file name or
    soname), however deep: that member's load loads it too, and its failure is the package's."""
    optional = {m: row for m in (member_of[p] for p in own) if (row := rule_optional_member(target, m))}
    named: dict[str, list[str]] = {}  # a DT_NEEDED name -> the members it may be
    for p, f in own.items():
        named.setdefault(posixpath.basename(p), []).append(member_of[p])
        if isinstance(f, ELFFacts) and f.soname and f.soname != posixpath.basename(p):
            named.setdefault(f.soname, []).append(member_of[p])
    facts = {member_of[p]: f for p, f in own.items()}

    def needs(m: str) -> list[str]:  # (the members its DT_NEEDED names may be)
        f = facts.get(m)
        return [x for n in (f.needed if isinstance(f, ELFFacts) else ()) for x in named.get(n, ())]
    return optional_unreached(optional, facts, needs)


def _not_given_words(target: Target, peers: list[Target], opts: GateOptions) -> str:
    not_given = [d for d in target.requires if d not in opts.assume_installed and not any(p.dist == d for p in peers)]
    return (f"; {target.dist or 'it'} requires {', '.join(not_given)}, not given: pass their wheels to see whether "
            "they provide it") if not_given else ""


def _load_keep_going(world: VirtualELFWorld, root: str, stand_ins: dict[str, ELFResult], added: dict[str, set[str]],
                     decided: dict[str, tuple[Status, Optional[Provider]]], target: Target, opts: GateOptions,
                     policy: Policy, needs: dict[str, set[str]], problems: list[Problem], member_of: dict[str, str],
                     files: dict[str, ELFResult]) -> DlopenResult:
    """`root` dlopened (RTLD_NOW) by a plain program, again with a stand-in for each problem, until it loads."""
    res = DlopenResult(root, RTLD_NOW)
    transient: list[str] = []  # (the stand-ins of what only an optional member misses: this root's alone)
    try:
        for _ in range(MAX_ROUNDS):
            overlay: dict[str, ELFResult] = {PROGRAM: ELFFacts(), **stand_ins}
            for path, vs in added.items():
                base = world.file(path)
                if isinstance(base, ELFFacts):
                    overlay[path] = dataclasses.replace(base, version_defs=tuple(sorted({*base.version_defs, *vs})))
            env = {"LD_LIBRARY_PATH": STAND_IN_DIR} if stand_ins else {}
            sim = LinuxSimulator(OverlayWorld(world, overlay), LinuxProcess(PROGRAM, env=env))
            sim.start()
            res = sim.dlopen(root, RTLD_NOW)
            if not res.error:
                return res
            lk = next((x for x in reversed(res.lookups) if x.error), None)
            by = member_of.get(posixpath.normpath(lk.requester), lk.requester) if lk is not None and lk.requester \
                else member_of.get(root, root)
            leaf = res.leaf
            if res.cause == "not_found" and leaf and "/" not in leaf:
                stand_ins[posixpath.join(STAND_IN_DIR, leaf)] = ELFFacts(soname=leaf)
                if opts.excludes(leaf):
                    continue
                if INTERPRETERS.match(leaf):
                    decided[leaf] = ("system", None)
                    continue
                in_wheel = [member_of[p] for p in member_of if posixpath.basename(p) == leaf]
                if in_wheel and rule_optional_member(target, by):  # (a plugin: its host has loaded what it needs)
                    decided[leaf] = ("bundled", None)
                    transient.append(posixpath.join(STAND_IN_DIR, leaf))
                elif in_wheel:  # (the wheel has it, where this object's search does not look: its RPATH is wrong)
                    problems.append(Problem("missing", leaf, [by], DllClass("bundled", bundled=True), path=in_wheel[0],
                                            elsewhere=in_wheel,
                                            detail=f"{leaf} (needed by {by}) is in the wheel at {in_wheel[0]}, a folder "
                                                   f"its search does not reach (DT_RPATH/DT_RUNPATH: {_rpath(files, lk)})"))
                    decided[leaf] = ("bundled", None)
                else:
                    decided[leaf] = rule_soname_provider(leaf, target, opts)
                continue
            if res.cause == "missing_version" and leaf:
                m = re.search(r"version `([^']+)' not found \(required by (.*)\)$", res.error)
                lib_path = next((x.path for x in res.lookups
                                 if m is not None and x.requester == m.group(2) and x.name == leaf and x.path), None)
                if m is None or lib_path is None:
                    break
                v = m.group(1)
                lib_path = posixpath.normpath(lib_path)
                if v in added.get(lib_path, set()):
                    break  # (added and still missing: the model disagrees with itself; stop rather than loop)
                added.setdefault(lib_path, set()).add(v)
                who = member_of.get(posixpath.normpath(m.group(2)), m.group(2))
                where = "the wheel's " + member_of[lib_path] if lib_path in member_of else leaf
                beyond = f": newer than {policy.name} allows" if lib_path.startswith(SYSTEM_DIR + "/") else ""
                problems.append(Problem("missing_version", leaf, [who], None, path=member_of.get(lib_path),
                                        detail=f"{who} needs {v} from {where}{beyond} (the policy's newest "
                                               f"{v.partition('_')[0]}: {newest_version(policy, v.partition('_')[0])})"
                                        if beyond else f"{who} needs {v} from {where}, which does not define it"))
                continue
            problems.append(Problem("not_elf" if res.cause == "bad_elf" else "wrong_machine", leaf or root, [by],
                                    None, detail=res.error))
            if res.cause == "wrong_class" and leaf and "/" not in leaf and posixpath.join(STAND_IN_DIR, leaf) not in stand_ins:
                # (ld.so skips a file of the other class and searches on: a stand-in on LD_LIBRARY_PATH is found, and
                # the load goes on to what the root needs after it)
                stand_ins[posixpath.join(STAND_IN_DIR, leaf)] = ELFFacts(soname=leaf)
                continue
            break
    finally:
        for k in transient:  # (a later root that misses it too has the problem: the member's option is not its)
            stand_ins.pop(k, None)
    return res


def rule_soname_provider(soname: str, target: Target, opts: GateOptions) -> tuple[Status, Optional[Provider]]:
    """A library the wheel needs that is not in it nor the policy's: allowed by name, by its distribution or by
    class; else the pip distribution that ships it (loader/linux/fixes.nvidia_wheels, any CUDA major: libcudart.so.12 ->
    nvidia-cuda-runtime-cu12), when the wheel's Requires-Dist names it: `assumed` with --assume-installed, else
    `required_not_given` (a failure that says to pass its wheel); else `not_allowed` (the Windows side's
    rule_dll_provider, for sonames)."""
    dists = [normalize_dist(w.package) for w in nvidia_wheels(soname)]  # (one per CUDA major: the wheel's own)
    required = next((d for d in dists if d in target.requires), None)
    if opts.allows_name(soname) or any(d in opts.dists for d in dists) or "other" in opts.classes:
        return "allowed", (Provider(required, None, True) if required is not None else None)
    if required is not None:
        return ("assumed" if required in opts.assume_installed else "required_not_given"), Provider(required, None, True)
    return "not_allowed", None


def _rpath(files: dict[str, ELFResult], lk) -> str:
    f = files.get(posixpath.normpath(lk.requester)) if lk is not None and lk.requester else None
    if isinstance(f, ELFFacts):
        return f.runpath or f.rpath or "none"
    return "none"


def _rows(runs: list[DlopenResult], own: dict[str, ELFResult], peer_of: dict[str, Target], member_of: dict[str, str],
          decided: dict[str, tuple[Status, Optional[Provider]]], policy: Policy, target: Target) -> dict[str, CheckRow]:
    """A row for each library the wheel's own objects need, from the last (successful) run of each root."""
    rows: dict[str, CheckRow] = {}
    for res in runs:
        for lk in res.lookups:
            requester = posixpath.normpath(lk.requester) if lk.requester else ""
            if requester not in own or lk.path is None:
                continue
            path = posixpath.normpath(lk.path)
            name = lk.name
            if name in rows:
                row = rows[name]
            else:
                status: Status
                provider: Optional[Provider] = None
                if path in own:
                    status, klass = "bundled", DllClass("bundled", bundled=True)
                elif path in peer_of:
                    peer = peer_of[path]
                    req = bool(peer.dist) and peer.dist in target.requires
                    status, klass = ("required" if req else "given"), DllClass("other")
                    provider = Provider(peer.dist or os.path.basename(peer.given), peer.given, req)
                elif path.startswith(SYSTEM_DIR + "/") or INTERPRETERS.match(name):
                    status, klass = "system", DllClass("policy", component=policy.name)
                elif name in decided:
                    status, provider = decided[name]
                    klass = DllClass("other")
                else:
                    continue  # (an excluded library's stand-in)
                row = rows[name] = CheckRow(name, klass, status, provider=provider)
            who = member_of.get(requester, requester)
            if who not in row.needed_by:
                row.needed_by.append(who)
            row.delay_only = False
    return rows
