"""The manylinux and musllinux policies (data/manylinux-policy.json, auditwheel's policy): which system libraries a
Linux wheel may need, and which symbol versions of them. `check` judges a wheel against its policy
(diagnosis/static_elf.py); `deps` of a wheel, which resolves on this machine, names what it found here that the policy
does not allow (commands/deps.py)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Optional

from dlltrace.datafiles import read_data
from dlltrace.errors import EXIT_USAGE, DlltraceError

ARCH_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
# the ELF interpreters: part of the C library (auditwheel's lddtree never reports them as a dependency to graft)
INTERPRETERS = re.compile(r"^(ld-linux[-.\w]*\.so\.\d+|ld64\.so\.\d+|ld-musl-[\w]+\.so\.1)$")
_PLAT = re.compile(r"^(manylinux|musllinux)(?:_(\d+)_(\d+)|(1|2010|2014))?_(\w+)$")


@dataclass(frozen=True)
class Policy:
    """One manylinux/musllinux policy for one architecture: the system libraries a wheel may need, and the symbol
    versions allowed by prefix ("GLIBC" -> {"2.2.5", ...})."""

    name: str
    arch: str
    libraries: frozenset[str]
    versions: dict[str, frozenset[str]]

    def allows_version(self, version: str) -> bool:
        """auditwheel's rule: a version whose prefix the policy lists must be one it lists; any other passes."""
        prefix, _, v = version.partition("_")
        return prefix not in self.versions or v in self.versions[prefix]


@lru_cache(maxsize=1)
def _policies() -> list[dict]:
    doc = json.loads(read_data("manylinux-policy.json"))
    return list(doc["policies"])


def rule_wheel_policy(filename: str) -> Policy:
    """The policy a Linux wheel is checked against: of the policies its platform tags name (manylinux_2_17_x86_64,
    its alias manylinux2014_x86_64, musllinux_1_2_aarch64), the strictest (auditwheel's highest priority): the wheel
    claims to run wherever each of its tags does. A manylinux_2_Y (PEP 600: any glibc 2.Y) or musllinux_1_Y the data
    does not hold (manylinux_2_29, or one newer than the data) is judged as the newest one it holds below it
    (_nearest_policy), with the GLIBC versions up to 2.Y allowed (its libraries, and its other versions, as that
    one's); before, it had the `linux` policy, and libc.so.6 was 'not a linux system library'. A linux_* tag has
    auditwheel's `linux` policy: no system library at all. An architecture other than x86_64 and aarch64 is a usage
    error (the data holds those two)."""
    plats = os.path.basename(filename)[:-len(".whl")].split("-")[-1].split(".")
    best: Optional[tuple[float, dict, str, int]] = None  # (priority, policy, name, the glibc minor a tag claims)
    arch = ""
    for plat in plats:
        m = _PLAT.match(plat.lower())
        if m is None:
            if plat.lower().startswith("linux_"):
                arch = arch or plat[len("linux_"):]
            continue
        arch = m.group(5)
        if m.group(2):
            name = f"{m.group(1)}_{m.group(2)}_{m.group(3)}"
        else:
            name = f"{m.group(1)}{m.group(4)}" if m.group(4) else m.group(1)
        found: Optional[tuple[float, dict, str, int]] = None
        for p in _policies():
            if name == p["name"] or name in p.get("aliases", []):
                found = (p["priority"], p, p["name"], 0)
        if found is None and m.group(2):
            near = _nearest_policy(m.group(1), int(m.group(2)), int(m.group(3)))
            if near is not None:  # (a little less strict than the one it is made from: a tag of that one wins)
                found = (near["priority"] - 0.5, near, name,
                         int(m.group(3)) if m.group(1) == "manylinux" and int(m.group(2)) == 2 else 0)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    if arch not in ARCH_MACHINE:
        raise DlltraceError(f"{filename}: a Linux wheel for {arch or 'an unknown architecture'}: check reads "
                            f"{', '.join(ARCH_MACHINE)} wheels", EXIT_USAGE)
    if best is None:
        return Policy("linux", arch, frozenset(), {})
    _, p, name, glibc_minor = best
    libs = {f"libc.musl-{arch}.so.1" if lib == "libc.so" and p["name"].startswith("musllinux") else lib
            for lib in p["lib_whitelist"]}
    versions = {k: frozenset(v) for k, v in p["symbol_versions"].get(arch, {}).items()}
    if glibc_minor and "GLIBC" in versions:
        versions["GLIBC"] = versions["GLIBC"] | {f"2.{y}" for y in range(glibc_minor + 1)}
    return Policy(name, arch, frozenset(libs), versions)


def _nearest_policy(family: str, major: int, minor: int) -> Optional[dict]:
    """The policy of `family` (manylinux, musllinux) the data holds with the newest version at or below major.minor
    (None: none is that old)."""
    below = []
    for p in _policies():
        m = re.match(rf"^{family}_(\d+)_(\d+)$", p["name"])
        if m is not None and (int(m.group(1)), int(m.group(2))) <= (major, minor):
            below.append(((int(m.group(1)), int(m.group(2))), p))
    return max(below, key=lambda x: x[0])[1] if below else None


def rule_policy_library(policy: Policy, soname: str) -> bool:
    """Whether a wheel may need `soname` from the system: a library its policy lists, or the ELF interpreter (part
    of the C library)."""
    return soname in policy.libraries or bool(INTERPRETERS.match(soname))


def newest_version(policy: Policy, prefix: str) -> str:
    """The newest version of a prefix (GLIBC) the policy allows ("none": it lists none)."""
    vs = policy.versions.get(prefix)
    if not vs:
        return "none"
    return max(vs, key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")))


@dataclass(frozen=True)
class OutsidePolicy:
    """A library a wheel's object was found to need on this machine, which its policy does not let it need from the
    system (version "": the library itself), or a symbol version of one it may need that is newer than the policy's."""

    name: str  # the DT_NEEDED name
    path: str  # the file found on this machine
    needed_by: str  # the wheel's object that needs it (its path in site-packages)
    version: str = ""  # a version need beyond the policy's ("GLIBC_2.34"); "" for the library
    newest: str = ""  # the policy's newest of that version's prefix ("2.17")


def rule_outside_policy(policy: Policy, found: Iterable[tuple[str, str, str]], in_wheel: Callable[[str], str],
                        facts: Callable[[str], object]) -> list[OutsidePolicy]:
    """What a load on this machine found here that the wheel's policy does not allow (check fails the same wheel for
    each, as not_allowed or missing_version): of `found` ((name, file, requester) of each library found), each one
    outside the wheel (in_wheel(file) == "") needed by one of its objects (in_wheel(requester): its path there) that
    the policy does not list; of those it lists, each version the object needs (facts(requester): its ELFFacts)
    that the policy does not allow. Each once. An object for another architecture than the policy's is not judged
    against it (a wheel tagged aarch64 whose objects are x86-64: check fails them as wrong_machine; against the
    aarch64 policy, whose GLIBC starts at 2.17, x86-64's GLIBC_2.2.5 would read as newer than it allows)."""
    out: dict[tuple[str, str, str], OutsidePolicy] = {}
    for name, path, requester in found:
        by = in_wheel(requester) if requester else ""
        if not by or in_wheel(path):
            continue
        f = facts(requester)
        if getattr(f, "machine", None) not in (None, ARCH_MACHINE[policy.arch]):
            continue  # (an object for another architecture than the wheel's tag: check fails it as wrong_machine)
        if not rule_policy_library(policy, name):
            out.setdefault((name, by, ""), OutsidePolicy(name, path, by))
            continue
        for vn in getattr(f, "version_needs", ()):
            if vn.file != name:
                continue
            for v in vn.versions:
                if not policy.allows_version(v):
                    prefix = v.partition("_")[0]
                    out.setdefault((name, by, v), OutsidePolicy(name, path, by, v, newest_version(policy, prefix)))
    return list(out.values())


def rule_wheel_machine(policy: Policy, facts: object) -> Optional[str]:
    """The machine of a wheel's object (facts: its ELFFacts) when it is not the one its tag names (a wheel tagged
    aarch64 whose .so files are x86-64: pip installs it on aarch64 machines, where none loads; check fails each as
    wrong_machine); None when it is, or is not known."""
    machine = getattr(facts, "machine", None)
    return machine if machine is not None and machine != ARCH_MACHINE[policy.arch] else None
