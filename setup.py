"""dlltrace's build hooks for setuptools. pyproject.toml holds the metadata; docs/install.md says how to
build the wheels (tools/build-wheels.sh).

DLLTRACE_PLATFORM picks the wheel a build makes:
  win_amd64  build_py cross-builds the shim and the launcher from native/ with mingw-w64 (native/build.sh),
             for x64 and for x86 (the x86 shim goes into the 32-bit programs the x64 launcher starts), into
             the build's dlltrace/bin/, and bdist_wheel tags the wheel py3-none-win_amd64
  any        no bin/ at all: a py3-none-any wheel (other OSes; the run command then says the shim is missing)
Unset: win_amd64 on 64-bit Windows when bash and a mingw-w64 gcc are found (not tried on real Windows),
else any. So `pip install .` on Linux never needs mingw.

The tree's own tracer/dlltrace/bin/ (native/build.sh's default output, used by the tests and by an
editable install) never goes into a wheel: build_py empties the build's bin/ first, and the sdist leaves
it out (MANIFEST.in). The binaries in a wheel are built for it, from the sources of the same build.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1 (pyproject.toml asks for 77)
except ImportError:  # an older setuptools with the wheel package (pyproject.toml asks for a newer one)
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
PLATFORMS = ("win_amd64", "any")
BINARIES = ("dlltrace_shim64.dll", "dlltrace_launch64.exe",  # what native/build.sh makes
            "dlltrace_shim32.dll", "dlltrace_launch32.exe")
AUDIT_SOURCES = ("build.sh", "dlltrace_audit.c", "dlltrace_preload.c", "dlltrace_out.h")  # the Linux recorder (native/audit)
CC64 = "x86_64-w64-mingw32-gcc"
CC32 = "i686-w64-mingw32-gcc"


def wheel_platform() -> str:
    """The platform the wheel is built for: DLLTRACE_PLATFORM, or the default (module docstring)."""
    want = os.environ.get("DLLTRACE_PLATFORM", "").strip()
    if want:
        if want not in PLATFORMS:
            sys.exit(f"DLLTRACE_PLATFORM={want!r}: expected one of {', '.join(PLATFORMS)}")
        return want
    if sys.platform == "win32" and platform.machine().lower() in ("amd64", "x86_64"):
        if shutil.which("bash") and shutil.which(os.environ.get("CC64", CC64)):
            return "win_amd64"
        print("dlltrace: no bash and mingw-w64 gcc found: building the py3-none-any wheel, without the shim "
              "(dlltrace run will not work; see docs/install.md)", file=sys.stderr)
    return "any"


class BuildPy(build_py):
    """build_py, then the build's dlltrace/bin/: emptied, and for win_amd64 the shim and the launcher
    cross-built from native/ into it."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install uses the tree's tracer/dlltrace/bin/ (native/build.sh): left alone
        # the Linux recorder's sources (native/audit), in every wheel: an installed dlltrace builds the recorder
        # with the system gcc on first use on Linux (trace/linux.py), as a checkout's tools/setup.sh does
        audit = Path(self.build_lib) / "dlltrace" / "native" / "audit"
        shutil.rmtree(audit, ignore_errors=True)
        audit.mkdir(parents=True)
        for src in AUDIT_SOURCES:
            shutil.copy2(HERE / "native" / "audit" / src, audit / src)
        out = Path(self.build_lib) / "dlltrace" / "bin"
        shutil.rmtree(out, ignore_errors=True)  # (a file the tree or an earlier build left there never ships)
        if wheel_platform() == "win_amd64":
            build_sh = HERE / "native" / "build.sh"
            if not build_sh.is_file():
                sys.exit(f"dlltrace: {build_sh} is missing: the win_amd64 wheel is built from native/'s sources")
            r = subprocess.run(["bash", str(build_sh), str(out)])
            if r.returncode != 0:
                sys.exit(f"dlltrace: native/build.sh failed (exit {r.returncode}); it needs {CC64} and {CC32} "
                         "(apt-get install gcc-mingw-w64-x86-64 gcc-mingw-w64-i686-win32)")
            missing = [n for n in BINARIES if not (out / n).is_file()]
            if missing:
                sys.exit(f"dlltrace: native/build.sh did not make {', '.join(missing)}")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        out = Path(self.build_lib) / "dlltrace" / "bin"
        audit = Path(self.build_lib) / "dlltrace" / "native" / "audit"
        extra = [str(out / n) for n in BINARIES if (out / n).is_file()]
        extra += [str(audit / n) for n in AUDIT_SOURCES if (audit / n).is_file()]
        return [*super().get_outputs(include_bytecode), *extra]


class BdistWheel(bdist_wheel):
    """Pure Python (Root-Is-Purelib: the binaries are data the package runs, not extension modules);
    only the platform tag says win_amd64 when the wheel holds them."""

    def finalize_options(self) -> None:
        if wheel_platform() == "win_amd64":
            self.plat_name = "win_amd64"
            self.plat_name_supplied = True
        super().finalize_options()
        self.root_is_pure = True


setup(cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
