"""What this install can do here, for `dlltrace --version`: per platform, whether `dlltrace run` can trace,
and when it cannot, why and the one command that fixes it.

- Windows programs need the native launcher and shim (the package's bin/, where trace/launch.py looks for
  them: the win_amd64 wheel ships them, a checkout builds them with native/build.sh and mingw-w64), both
  PE files of one machine (read from their PE headers), and Windows itself or wine64 (`run --wine`).
- 32-bit (x86) Windows programs also need the x86 shim (and launcher) beside them, and under Wine its 32-bit
  half (Debian: wine32:i386).
- Linux programs need the LD_AUDIT recorder (trace/linux.py): built (the package's bin/linux, or the
  cache folder the first `dlltrace run` builds it into), or buildable (its sources, which every install
  carries, and gcc), on a glibc system (LD_AUDIT is glibc's ld.so).
- simulate, report, redact, deps, check and cuda need none of it.

Nothing here runs a program or builds anything: it looks (files, PATH, headers)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from dlltrace.cachedir import trusted_dir
from dlltrace.machines import pe_machine
from dlltrace.trace import where
from dlltrace.version import __version__

# (no dataclasses, typing nor platform at run time: importing them cost `dlltrace --version` more than all
# its own work; bench/startup.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal, Optional

    State = Literal["yes", "buildable", "no", "not_here"]  # not_here: not for this OS (Linux programs on macOS)
CHECKOUT = Path(__file__).resolve().parents[2]  # a source checkout's root (native/, tools/), when it is one
CC64 = "x86_64-w64-mingw32-gcc"
CC32 = "i686-w64-mingw32-gcc"
WINE32_FIX = "dpkg --add-architecture i386 && {root}apt-get update && {root}apt-get install wine32:i386"


class _Record:
    """A frozen record compared by its fields, as a frozen dataclass is."""
    __slots__: tuple[str, ...] = ()

    def _set(self, *values: object) -> None:
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


class NativeFile(_Record):
    __slots__ = ("role", "path", "machine", "problem")
    role: str                # "launcher" | "shim"
    path: Path
    machine: Optional[str]   # "x64", ... from its PE header; None when missing or not a PE
    problem: Optional[str]   # why it cannot be used: "missing", or what is wrong with it

    def __init__(self, role: str, path: Path, machine: Optional[str], problem: Optional[str]) -> None:
        self._set(role, path, machine, problem)


class Ability(_Record):
    """One thing `dlltrace run` may trace here."""
    __slots__ = ("key", "state", "why", "fix")
    key: str                 # "windows" (natively), "wine" (run --wine), "linux"
    state: State
    why: Optional[str]       # what is missing (state "no" or "buildable")
    fix: Optional[str]       # the one command that fixes it (None: nothing to do, or nothing we know)

    def __init__(self, key: str, state: State, why: Optional[str], fix: Optional[str]) -> None:
        self._set(key, state, why, fix)


class TracingStatus(_Record):
    __slots__ = ("files", "platform", "wine", "recorder", "abilities", "files32")
    files: tuple[NativeFile, ...]
    platform: str            # "windows" or another sys.platform
    wine: Optional[str]      # wine64's path (for --wine), when found
    recorder: Optional[Path]  # the Linux recorder's folder, when built
    abilities: tuple[Ability, ...]
    files32: tuple[NativeFile, ...]  # the x86 launcher and shim (32-bit programs)

    def __init__(self, files: tuple[NativeFile, ...], platform: str, wine: Optional[str], recorder: Optional[Path],
                 abilities: tuple[Ability, ...] = (), files32: tuple[NativeFile, ...] = ()) -> None:
        self._set(files, platform, wine, recorder, abilities, files32)

    @property
    def built(self) -> bool:
        return usable(self.files)

    def ability(self, key: str) -> Optional[Ability]:
        return next((a for a in self.abilities if a.key == key), None)


def native_file(role: str, path: Path) -> NativeFile:
    if not path.is_file():
        return NativeFile(role, path, None, "missing")
    machine, problem = pe_machine(path)
    return NativeFile(role, path, machine, problem)


def _root() -> str:
    return "" if (hasattr(os, "geteuid") and os.geteuid() == 0) else "sudo "


def _apt(package: str) -> Optional[str]:
    """`sudo apt-get install PACKAGE` where apt-get is the package manager, else None."""
    return f"{_root()}apt-get install {package}" if shutil.which("apt-get") else None


def _libc() -> str:
    """The C library's name: what platform.libc_ver() says, read first as it does from os.confstr (importing
    platform only when that is not enough)."""
    try:
        parts = (os.confstr("CS_GNU_LIBC_VERSION") or "").split(maxsplit=1)
        if len(parts) == 2:
            return parts[0]
    except (AttributeError, ValueError, OSError):
        pass
    import platform

    return platform.libc_ver()[0]


def _is_glibc() -> bool:
    return _libc() == "glibc"


def usable(files: tuple[NativeFile, ...]) -> bool:
    """The launcher and the shim are there and are PE files of one machine."""
    return all(f.problem is None for f in files) and len({f.machine for f in files}) == 1


def shim_fix() -> str:
    """How to get a usable launcher and shim: in a checkout, native/build.sh (with mingw-w64 first when it
    is missing); an installed package, the win_amd64 wheel."""
    build = CHECKOUT / "native" / "build.sh"
    if not build.is_file():
        return "install the win_amd64 wheel of dlltrace (pip install on 64-bit Windows), or build from a source checkout"
    cmd = f"bash {build}"
    if where.bin_dir() != where.BIN:
        cmd += f" {where.bin_dir()}"
    # (native/build.sh builds both machines: both compilers)
    missing = [(cc, pkg) for env, cc, pkg in (("CC64", CC64, "gcc-mingw-w64-x86-64"), ("CC32", CC32, "gcc-mingw-w64-i686-win32"))
               if not shutil.which(os.environ.get(env, cc))]
    if missing:
        apt = _apt(" ".join(pkg for _, pkg in missing))
        cmd = f"{apt} && {cmd}" if apt else f"install mingw-w64 ({', '.join(cc for cc, _ in missing)}), then {cmd}"
    return cmd


def linux_ability() -> tuple[Ability, Optional[Path]]:
    if not sys.platform.startswith("linux"):
        return Ability("linux", "not_here", None, None), None
    if not _is_glibc():
        return Ability("linux", "no", "the recorder uses glibc's LD_AUDIT, and this C library is "
                       f"{_libc() or 'not glibc'}", None), None
    built = where.built_recorder()
    if built is not None:
        return Ability("linux", "yes", None, None), built
    cache = where.cache_recorder_dir()
    if not (where.NATIVE / "build.sh").is_file():
        return Ability("linux", "no", f"the recorder is not built and its sources are not in this install ({where.NATIVE})",
                       "reinstall dlltrace (pip install --force-reinstall dlltrace)"), None
    if trusted_dir(cache, make=False) is None:  # (trace/linux.recorder_dir builds none there: exit 7)
        return Ability("linux", "no", f"the recorder is not built, and the folder it would be built in, {cache}, or one "
                       "above it, can be written by another user", "set XDG_CACHE_HOME to a folder of your own, or "
                       "install dlltrace with its recorder built (tools/setup.sh)"), None
    if shutil.which("gcc"):
        return Ability("linux", "buildable", f"the recorder is not built yet; the first `dlltrace run` builds it with "
                       f"gcc into {cache}", f"sh {where.NATIVE / 'build.sh'} {cache}"), None
    return Ability("linux", "no", "the recorder is not built and gcc, which builds it, is not installed",
                   _apt("gcc") or "install gcc"), None


def windows_ability(files: tuple[NativeFile, ...], platform: str, wine: Optional[str]) -> Ability:
    key = "windows" if platform == "windows" else "wine"
    if not usable(files):
        bad = [f for f in files if f.problem is not None]
        why = (", ".join(f"the {f.role} is {f.problem}" for f in bad) if bad
               else "the launcher and the shim are built for different machines")
        if all(f.problem == "missing" for f in files):
            why = "the native launcher and shim are not built"
        return Ability(key, "no", why, shim_fix())
    if platform == "windows" or wine:
        return Ability(key, "yes", None, None)
    return Ability(key, "no", "wine64 is not installed", _apt("wine64") or "install Wine (wine64)")


def x86_ability(main: Ability, files32: tuple[NativeFile, ...], platform: str, wine: Optional[str],
                wine32: bool) -> Ability:
    """32-bit programs: the launcher of `main` puts the x86 shim into them (native/common/inject.c), so they
    need what `main` needs, the x86 shim and launcher (both x86 PE), and under Wine its 32-bit half."""
    if main.state != "yes":
        return Ability("x86", "no", "Windows programs cannot be traced here (the line above)", None)
    if not (usable(files32) and all(f.machine == "x86" for f in files32)):
        bad = [f for f in files32 if f.problem is not None or f.machine != "x86"]
        why = ", ".join(f"the {f.role} is {f.problem or f'an {f.machine} PE'}" for f in bad)
        if all(f.problem == "missing" for f in files32):
            why = "the x86 shim and launcher are not built"
        return Ability("x86", "no", why, shim_fix())
    if platform != "windows" and not wine32:
        fix = WINE32_FIX.format(root=_root()) if shutil.which("apt-get") else None
        return Ability("x86", "no", "this Wine cannot run 32-bit programs (no 32-bit Wine: wine32)",
                       (_root() + fix) if fix else "install Wine's 32-bit part (wine32)")
    return Ability("x86", "yes", None, None)


def tracing_status() -> TracingStatus:
    files = (native_file("launcher", where.bin_dir() / where.LAUNCHER), native_file("shim", where.bin_dir() / where.SHIM))
    files32 = (native_file("x86 launcher", where.bin_dir() / where.LAUNCHER32),
               native_file("x86 shim", where.bin_dir() / where.SHIM32))
    platform = "windows" if sys.platform == "win32" else sys.platform
    wine = None if platform == "windows" else where.find_wine()
    if platform == "windows":
        import platform as _platform  # (Windows only: --version elsewhere imports no platform)

        if where.launcher_name(_platform.machine()) == where.LAUNCHER32:
            files = files32  # a 32-bit Windows: the x86 launcher and shim are the ones run
    lin, recorder = linux_ability()
    main = windows_ability(files, platform, wine)
    abilities = [main, x86_ability(main, files32, platform, wine, platform == "windows" or where.wine_runs_32bit(wine))]
    if lin.state != "not_here":
        abilities.insert(0, lin)
    return TracingStatus(files, platform, wine, recorder, tuple(abilities), files32)


WHAT = {
    "windows": "tracing Windows programs (`dlltrace run -- CMD`)",
    "wine": "tracing Windows programs under Wine (`dlltrace run --wine -- PROG.exe`)",
    "linux": "tracing Linux programs (`dlltrace run -- CMD`)",
    "x86": "tracing 32-bit (x86) Windows programs",
}


def ability_line(a: Ability) -> str:
    if a.state == "yes":
        return f"{WHAT[a.key]}: yes"
    if a.state == "buildable":
        return f"{WHAT[a.key]}: yes ({a.why}; to build it now: {a.fix})"
    return f"{WHAT[a.key]}: no: {a.why}" + (f"; fix: {a.fix}" if a.fix else "")


def status_lines(status: TracingStatus) -> list[str]:
    """What `dlltrace --version` says after its first line."""
    lines = []
    for f in (*status.files, *(f for f in status.files32 if f not in status.files)):
        what = f"{f.machine} PE" if f.problem is None else f.problem
        lines.append(f"{f.role}: {f.path} ({what})")
    if status.platform != "windows":
        lines.append(f"wine64: {status.wine or 'not found'}")
    lin = status.ability("linux")
    if lin is not None:
        lines.append(f"linux recorder: {status.recorder} (built)" if status.recorder else
                     f"linux recorder: not built ({where.NATIVE})")
    lines += [ability_line(a) for a in status.abilities]
    lines.append("reading traces, scenarios and wheels (report, redact, simulate, deps, check, cuda): yes, on any OS")
    return lines


def version_text() -> str:
    head = f"dlltrace {__version__} (Python {sys.version.split()[0]}, {sys.platform})"  # (platform.python_version())
    return "\n".join([head, *status_lines(tracing_status())])
