"""Every distribution a fix can tell a user to `pip install` exists on PyPI and is not a placeholder (issue 23
item 4): the packages table (data/packages.json), the NVIDIA wheels of the Linux fixes (loader/linux/fixes.py),
the cuBLAS and cuDNN wheels the CUDA table names for each major (diagnosis/cuda.py), and the apt packages the
Linux fixes derive (worlds/elf.py) for the libraries of the real corpus. A placeholder is a name whose every
release is a 0.0.x stub that installs nothing (nvidia-cublas-cu13: CUDA 13's real package is nvidia-cublas).

It asks the registry with pip (`pip index versions`), 8 names at a time; offline it skips, in CI it fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from dlltrace import packages
from dlltrace.diagnosis.cuda import _cublas_wheel, _cudnn_wheel
from dlltrace.loader.linux.fixes import NVIDIA_WHEELS


def offered_names() -> list[str]:
    names = {r.package for r in packages.load() if r.package}
    names |= {p for _, _, by_major in NVIDIA_WHEELS for p in by_major.values()}
    for major in (11, 12, 13):
        names |= {x for x in (_cublas_wheel(major, "windows"), _cudnn_wheel(9, major)) if x}
    return sorted(names)


# (pip answers for this machine's platform unless told another: a distribution with Windows wheels only, as
# python-magic-bin, which a Windows fix offers, is "No matching distribution" on Linux until asked for win_amd64)
PLATFORMS = ([], ["--platform", "win_amd64", "--only-binary=:all:"],
             ["--platform", "manylinux2014_x86_64", "--only-binary=:all:"])


def versions(name: str) -> tuple[str, list[str]]:
    """(pip's error, "" when none; the versions PyPI has), for this platform, else Windows', else Linux's."""
    error = "?"
    for platform in PLATFORMS:
        r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check",
                            *platform], capture_output=True, text=True, timeout=120)
        m = re.search(r"^Available versions: (.*)$", r.stdout, re.M)
        if r.returncode == 0 and m is not None:
            return "", [v.strip() for v in m.group(1).split(",")]
        error = (r.stderr.strip().splitlines() or ["?"])[-1]
        if "No matching distribution" not in error:
            break  # (the registry did not answer: asking again for another platform will not either)
    return error, []


def placeholder(vs: list[str]) -> bool:
    return all(re.match(r"^0\.0(\.|$)", v) for v in vs)


def test_placeholder():
    assert placeholder(["0.0.1"]) and placeholder(["0.0.0a0", "0.0.1"])
    assert not placeholder(["9.28.1.4", "0.0.1"]) and not placeholder(["13.5.37"])


def test_every_distribution_a_fix_offers_exists_and_is_no_placeholder():
    names = offered_names()
    assert "nvidia-cuda-runtime-cu12" in names and "nvidia-cublas" in names and len(names) > 30
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = dict(zip(names, pool.map(versions, names)))
    errors = {n: e for n, (e, _) in got.items() if e}
    if errors and all("No matching distribution" not in e for e in errors.values()):
        why = f"the registry did not answer: {next(iter(errors.values()))}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    assert not errors, errors  # (names PyPI does not have)
    stubs = sorted(n for n, (_, vs) in got.items() if placeholder(vs))
    assert not stubs, f"placeholders offered as fixes: {stubs}"


def test_the_apt_packages_of_the_corpus_exist_here():
    """The Debian packages the Linux fixes name for the corpus's system libraries, as this machine's apt knows them
    (the fixes say only what apt-cache answers; this checks the names Debian's policy gives are real ones)."""
    from dlltrace.worlds.elf import apt_package_names, debian_package_names

    if not shutil.which("apt-cache"):
        if os.environ.get("CI"):
            pytest.fail("no apt-cache")
        pytest.skip("no apt-cache (not Debian or Ubuntu)")
    names = apt_package_names()
    for soname, package in (("libxcb-icccm.so.4", "libxcb-icccm4"), ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
                            ("libGL.so.1", "libgl1"), ("libgeos_c.so.1", "libgeos-c1v5"), ("libvlc.so.5", "libvlc5"),
                            ("libglib-2.0.so.0", "libglib2.0-0"), ("libgthread-2.0.so.0", "libglib2.0-0")):
        assert package in debian_package_names(soname) and package in names, (soname, package)
