"""`dlltrace deps` of a Linux install's folder, or of a Linux wheel unpacked into one: each shared object in it
loaded as a plain program's dlopen would, on this machine (loader/linux/static.py, one world for all), an object
an earlier one loaded taken as loaded by it, what its packages load only on demand (pkgloaders.py) told apart, and,
for a wheel, what was found here that its manylinux policy does not allow and the objects of another machine
(loader/linux/policy.py). Typed results; the words are render/deps_linux.py's."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from dlltrace.loader.linux.policy import OutsidePolicy, Policy, rule_outside_policy, rule_wheel_machine
from dlltrace.loader.linux.static import StaticResult, static_deps, static_roots
from dlltrace.pkgloaders import optional_row
from dlltrace.worlds.elf import ELFWorld
from dlltrace.worlds.loaderfiles import site_loaders


@dataclass
class FolderDeps:
    results: list[tuple[str, StaticResult]] = field(default_factory=list)  # (object, its load), each root loaded
    reached: list[tuple[str, str]] = field(default_factory=list)  # (object, the root that loaded it)
    failing: set[str] = field(default_factory=set)  # the reached objects a need of which fails in their root's load
    optional: dict[str, str] = field(default_factory=dict)  # a failing root its package does without: the loader row
    outside: list[OutsidePolicy] = field(default_factory=list)  # found here, outside the wheel's policy
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (object, its machine): not the wheel tag's

    @property
    def bad(self) -> list[tuple[str, StaticResult]]:
        return [(rel, r) for rel, r in self.results if r.problems]

    @property
    def needed(self) -> list[str]:
        """The failing roots the package needs (not optional): what makes `deps` exit 1."""
        return [rel for rel, _ in self.bad if rel not in self.optional]


def folder_deps(objects: Sequence[str], base: str, world: ELFWorld, env: dict[str, str], not_elf: Sequence[str] = (),
                policy: Optional[Policy] = None) -> FolderDeps:
    """Each shared object of `objects` (paths under `base`, the folder they are named from) loaded in `world` with
    `env`, then each of `not_elf` (files named as shared objects that are no ELF file: each a root of its own, whose
    dlopen fails, as check fails it, unless its package loads it only on demand). `policy`: a wheel's: what was found
    in the world that it does not allow (rule_outside_policy: what check fails the wheel for; the loads here still
    load), and its objects of another machine (rule_wheel_machine)."""
    site, loaders = site_loaders(base)  # (as deps of a Windows folder reads them: what loads on demand)
    out = FolderDeps()
    result_of: dict[str, StaticResult] = {}  # (results, by the root's name)
    by: dict[str, str] = {}  # an object an earlier root loaded (its real path) -> that root

    def in_site(path: str) -> str:  # (a file as the member of site-packages it is, "/"; "" outside it)
        r = os.path.relpath(os.path.abspath(path), site)
        return "" if r == os.pardir or r.startswith(os.pardir + os.sep) else r.replace(os.sep, "/")

    for p in [*static_roots(list(objects)), *not_elf]:
        rel = os.path.relpath(p, base)
        if os.path.realpath(p) in by:
            out.reached.append((rel, by[os.path.realpath(p)]))
            if any(q.needed_by and os.path.realpath(q.needed_by) == os.path.realpath(p)
                   for q in result_of[by[os.path.realpath(p)]].problems):
                out.failing.add(rel)
            continue
        r = static_deps(os.path.abspath(p), world, env)  # (the model's program has a cwd of its own)
        out.results.append((rel, r))
        result_of[rel] = r
        opt = optional_row(loaders, in_site(p))
        # (optional when each failing need is its own, the program's or another optional file's: a library of the
        # package it loads whose need fails is the package's failure, as check has it: static_elf.rule_optional_members)
        if opt and r.problems and all(not q.needed_by or in_site(q.needed_by) in (in_site(p), "")
                                      or optional_row(loaders, in_site(q.needed_by)) for q in r.problems):
            out.optional[rel] = opt
        for x in r.mapped:  # (also when its load failed: they are found as it finds them, their problems its)
            by.setdefault(os.path.realpath(x), rel)
    if policy is not None:
        out.outside = rule_outside_policy(policy, [f for _, r in out.results for f in r.found], in_site, world.file)
        out.foreign = [(os.path.relpath(p, base), m) for p in objects
                       for m in (rule_wheel_machine(policy, world.file(os.path.abspath(p))),) if m is not None]
    return out
