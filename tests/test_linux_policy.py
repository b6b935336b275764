"""The manylinux policy as `deps` of a Linux wheel names it (loader/linux/policy.py rule_outside_policy): what a load on
this machine found here that the wheel's policy does not allow, which `check` fails the same wheel for."""

from __future__ import annotations

from dlltrace.elf import ELFFacts, VersionNeed
from dlltrace.loader.linux.policy import (OutsidePolicy, rule_outside_policy, rule_policy_library, rule_wheel_machine,
                                          rule_wheel_policy)

SITE = "/site/"


def _in_wheel(path: str) -> str:
    return path[len(SITE):] if path.startswith(SITE) else ""


def test_rule_policy_library():
    policy = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    assert rule_policy_library(policy, "libc.so.6") and rule_policy_library(policy, "libm.so.6")
    assert rule_policy_library(policy, "ld-linux-x86-64.so.2")  # (the interpreter: part of the C library)
    assert not rule_policy_library(policy, "libgomp.so.1") and not rule_policy_library(policy, "libxml2.so.2")


def test_rule_outside_policy():
    policy = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    ext = SITE + "pkg/_ext.so"
    facts = {ext: ELFFacts(needed=("libc.so.6", "libgomp.so.1", "liba.so"),
                           version_needs=(VersionNeed("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.34")),
                                          VersionNeed("libgomp.so.1", ("GOMP_4.0",))))}
    found = [
        ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", ext),  # allowed, but one version beyond 2.17
        ("libgomp.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1", ext),  # not a manylinux system library
        ("liba.so", SITE + "pkg.libs/liba.so", ext),  # bundled: the wheel's own
        ("libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1"),  # (a system one's)
        ("libgomp.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1", ext),  # (found twice: named once)
    ]
    got = rule_outside_policy(policy, found, _in_wheel, facts.get)
    assert got == [OutsidePolicy("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "pkg/_ext.so", "GLIBC_2.34", "2.17"),
                   OutsidePolicy("libgomp.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1", "pkg/_ext.so")]
    # a newer policy allows both versions; never the library
    newer = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_34_x86_64.whl")
    assert [o.name for o in rule_outside_policy(newer, found, _in_wheel, facts.get)] == ["libgomp.so.1"]


def test_rule_outside_policy_judges_no_object_of_another_architecture():
    """A wheel tagged aarch64 whose object is x86-64 (check: wrong_machine): its x86-64 GLIBC_2.2.5 is not in the
    aarch64 policy (its GLIBC starts at 2.17), and was named 'newer than the policy allows (its newest GLIBC: 2.28)'."""
    policy = rule_wheel_policy("x-1.0-py3-none-manylinux_2_28_aarch64.whl")
    ext = SITE + "pkg/_ext.so"
    found = [("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", ext),
             ("libgomp.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1", ext)]
    need = (VersionNeed("libc.so.6", ("GLIBC_2.2.5",)),)
    x86 = {ext: ELFFacts(needed=("libc.so.6", "libgomp.so.1"), version_needs=need, machine="EM_X86_64")}
    assert rule_outside_policy(policy, found, _in_wheel, x86.get) == []
    arm = {ext: ELFFacts(needed=("libc.so.6", "libgomp.so.1"), machine="EM_AARCH64",
                         version_needs=(VersionNeed("libc.so.6", ("GLIBC_2.17", "GLIBC_2.34")),))}
    assert [(o.name, o.version) for o in rule_outside_policy(policy, found, _in_wheel, arm.get)] == [
        ("libc.so.6", "GLIBC_2.34"), ("libgomp.so.1", "")]


def test_rule_wheel_policy_a_manylinux_tag_the_data_does_not_hold():
    """PEP 600's manylinux_2_Y is any glibc 2.Y: a tag the data does not hold (manylinux_2_29; one newer than the data,
    manylinux_2_42) had auditwheel's `linux` policy (no system library), so check failed and deps named libc.so.6 of
    a healthy wheel ('not a linux system library'). It is the newest policy held below it, GLIBC up to 2.Y allowed."""
    p = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_29_x86_64.whl")
    assert p.name == "manylinux_2_29"
    assert p.libraries == rule_wheel_policy("x-1.0-py3-none-manylinux_2_28_x86_64.whl").libraries
    assert rule_policy_library(p, "libc.so.6") and p.allows_version("GLIBC_2.29") and not p.allows_version("GLIBC_2.30")
    future = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_42_aarch64.whl")
    assert future.name == "manylinux_2_42" and future.arch == "aarch64" and future.allows_version("GLIBC_2.42")
    assert rule_policy_library(future, "libc.so.6") and not future.allows_version("GLIBC_2.43")
    # with a tag the data holds, the strictest still wins
    assert rule_wheel_policy("x-1.0-py3-none-manylinux_2_28_x86_64.manylinux_2_29_x86_64.whl").name == "manylinux_2_28"
    assert rule_wheel_policy("x-1.0-py3-none-manylinux_2_29_x86_64.manylinux_2_31_x86_64.whl").name == "manylinux_2_29"
    # below every policy held, and a linux_ tag: no system library
    assert rule_wheel_policy("x-1.0-py3-none-manylinux_2_3_x86_64.whl").libraries == frozenset()
    assert rule_wheel_policy("x-1.0-py3-none-linux_x86_64.whl").name == "linux"
    assert rule_wheel_policy("x-1.0-py3-none-musllinux_1_3_x86_64.whl").name == "musllinux_1_3"


def test_rule_wheel_machine():
    arm = rule_wheel_policy("x-1.0-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl")
    assert rule_wheel_machine(arm, ELFFacts(machine="EM_X86_64")) == "EM_X86_64"
    assert rule_wheel_machine(arm, ELFFacts(machine="EM_AARCH64")) is None
    assert rule_wheel_machine(arm, None) is None  # (not known: nothing said)
