"""The ld.so differential: the Linux loader model (loader/linux) against the real ld.so of this machine on
generated layouts of tiny gcc-built .so files (tests/ldso_kit.py). Every case must agree on the error
(dlerror()'s words, or ld.so's at start), the object each dlopen chose, every object mapped, and, for
every bare name searched, each file tried in order (LD_DEBUG=libs). Linux with gcc only: skipped
elsewhere locally, a failure in CI.

DLLTRACE_LDSO_SEED=N picks the seed (default: a fixed one), DLLTRACE_LDSO_CASES=N the count (>= 200)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import ldso_kit as kit

CASES = max(200, int(os.environ.get("DLLTRACE_LDSO_CASES", "200")))
SEED = int(os.environ.get("DLLTRACE_LDSO_SEED", "20261201"))


def _require_linux_gcc() -> None:
    why = ""
    if not sys.platform.startswith("linux"):
        why = "the ld.so differential needs Linux"
    elif shutil.which("gcc") is None:
        why = "the ld.so differential needs gcc"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why + " -- CI must have it")
        pytest.skip(why)


@pytest.fixture(scope="session")
def ldso_pool(tmp_path_factory):
    _require_linux_gcc()
    root = tmp_path_factory.mktemp("ldso")
    return root, kit.build_pool(root)


def test_ldso_differential(ldso_pool, summary):
    root, pool = ldso_pool
    agree, differ = 0, []
    summary["ld.so differential"] = lambda: (
        f"ld.so differential (seed {SEED}): {CASES} generated layouts, {agree} agree")
    for i in range(CASES):
        lay = kit.generate(SEED + i)
        L = kit.place(root, pool, lay)
        diffs = kit.compare(kit.run_real(L, lay), kit.run_model(L, lay))
        if diffs:
            differ.append(lay.describe() + "\n  " + "\n  ".join(diffs))
        else:
            agree += 1
    assert not differ, f"{len(differ)} of {CASES} layouts differ; the first:\n" + "\n".join(differ[:3])


def test_ldso_differential_sees_each_outcome(ldso_pool):
    """The layouts reach every outcome the model claims to match: a load, not found, wrong ELF class,
    invalid ELF header, a missing version, RTLD_NOLOAD's NULL, an object chosen from a glibc-hwcaps
    subfolder, and a dlopen made by a library that loads (so agreement is evidence about each)."""
    root, pool = ldso_pool
    seen: set[str] = set()
    for i in range(CASES):
        lay = kit.generate(SEED + i)
        obs = kit.run_real(kit.place(root, pool, lay), lay)
        for r in obs.results + [obs.start_error]:
            for key in ("OK ", "cannot open shared object file", "wrong ELF class", "invalid ELF header",
                        "version `V2' not found", "NULL"):
                if key in r:
                    seen.add(key)
        if any("/glibc-hwcaps/" in m for m in obs.mapped):
            seen.add("hwcaps")
        if any(f >= 1000 and r.startswith("OK ") for (f, _), r in zip(lay.ops, obs.results)):
            seen.add("from a library")
        if len(seen) == 8:
            break
    assert len(seen) == 8, seen


def test_model_disagrees_when_a_rule_is_broken(ldso_pool, monkeypatch):
    """The comparison can fail: a model that forgets LD_LIBRARY_PATH differs from ld.so on some layout."""
    from dlltrace.loader.linux import rules
    root, pool = ldso_pool
    monkeypatch.setattr(rules, "rule_ld_library_path", lambda env, secure: None)
    for i in range(CASES):
        lay = kit.generate(SEED + i)
        if not lay.llp:
            continue
        L = kit.place(root, pool, lay)
        if kit.compare(kit.run_real(L, lay), kit.run_model(L, lay)):
            return
    pytest.fail("no layout told a model without LD_LIBRARY_PATH from ld.so")


def test_ldso_differential_secure_mode(ldso_pool, summary, tmp_path_factory):
    """Secure mode for real: the host set-user-ID root and run as nobody (AT_SECURE): LD_LIBRARY_PATH is
    ignored, $ORIGIN in the executable's DT_RPATH / DT_RUNPATH must expand under a trusted folder (it does
    not here: the layouts are under /tmp), a library's $ORIGIN still counts. The error and the object
    chosen must agree (ld.so writes no LD_DEBUG file in secure mode). Needs root and setpriv."""
    if shutil.which("setpriv") is None and os.environ.get("CI"):
        pytest.fail("needs setpriv (util-linux) -- CI installs it (tools/setup.sh --tests)")
    if os.geteuid() != 0 and os.environ.get("CI"):
        pytest.fail("needs root (a set-user-ID copy of the host) -- CI runs as root, as its apt-get does")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("secure mode needs root (a set-user-ID copy of the host) and setpriv (to run it as nobody)")
    import tempfile
    _root, pool = ldso_pool
    root = Path(tempfile.mkdtemp(prefix="dlltrace-secure-"))
    os.chmod(root, 0o755)
    try:
        agree, differ = 0, []
        n = 60
        for i in range(n):
            lay = kit.generate(SEED + 7000 + i)
            L = kit.place(root, pool, lay)
            diffs = kit.compare(kit.run_real(L, lay, secure=True), kit.run_model(L, lay, secure=True), tries=False)
            if diffs:
                differ.append(lay.describe() + "\n  " + "\n  ".join(diffs))
            else:
                agree += 1
        summary["ld.so differential, secure mode"] = f"ld.so differential, secure mode (seed {SEED + 7000}): {n} layouts, {agree} agree"
        assert not differ, f"{len(differ)} of {n} differ; the first:\n" + "\n".join(differ[:3])
    finally:
        shutil.rmtree(root, ignore_errors=True)
