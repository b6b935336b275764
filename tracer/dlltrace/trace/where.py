"""Where the native parts of this install are, looked up without loading anything heavy (`dlltrace --version`,
install.py, reads this; trace/launch.py and trace/linux.py use it):

- the Windows launcher and shim: the package's bin/ (the win_amd64 wheel's, or a checkout's built by
  native/build.sh), for x64 and for x86 (the x86 shim goes into a 32-bit child; the x86 launcher runs
  on a 32-bit Windows); DLLTRACE_BIN names another folder (a build of one's own; the tests' missing one);
- wine64, for `run --wine` (DLLTRACE_WINE names one), and whether Wine can run 32-bit programs;
- the Linux recorder (LD_AUDIT and LD_PRELOAD libraries): the package's bin/linux, else the cache folder
  the first `dlltrace run` builds it into from its sources (a checkout's native/audit, or the copy every
  wheel carries: setup.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dlltrace.cachedir import trusted_dir, xdg_cache

TYPE_CHECKING = False  # (typing is not imported at run time: `dlltrace --version`, bench/startup.py)
if TYPE_CHECKING:
    from typing import Any, Optional

_PACKAGE = Path(__file__).resolve().parents[1]
BIN = _PACKAGE / "bin"
LAUNCHER = "dlltrace_launch64.exe"
SHIM = "dlltrace_shim64.dll"
LAUNCHER32 = "dlltrace_launch32.exe"  # (native/build.sh's i686 build: the x86 shim and launcher)
SHIM32 = "dlltrace_shim32.dll"
WINE_CANDIDATES = ("/usr/lib/wine/wine64", "wine64", "wine")
# Where a Wine with 32-bit support keeps its 32-bit Windows DLLs (Debian's wine32:i386 installs the first);
# also looked for beside the wine binary found (a Wine of its own prefix: <prefix>/lib/wine/i386-windows)
WINE32_DLL_DIRS = ("/usr/lib/i386-linux-gnu/wine/i386-windows", "/usr/lib/wine/i386-windows",
                   "/usr/lib32/wine/i386-windows")

# `run --max-size` (native/common/jsonw.h): the writers drop lines past it, counting them, and the launcher
# writes what was dropped as a `capped` event. The default is far above any real failing run (the real
# wheels' runs under Wine write a few MB; a whole `import torch` tens of MB), so those stay whole, and a
# program that loads in a loop cannot fill the disk (one reached 618 MB before it was stopped).
DEFAULT_MAX_SIZE = 1 << 30
# the trace's header (docs/trace-format.md): here, so that writing it (trace/files.py start_trace) loads no reader
FORMAT_NAME = "dlltrace-trace"
FORMAT_VERSION = 1
MIN_MAX_SIZE = 64 << 10

_CHECKOUT_NATIVE = _PACKAGE.parents[1] / "native" / "audit"
NATIVE = _CHECKOUT_NATIVE if (_CHECKOUT_NATIVE / "build.sh").is_file() else _PACKAGE / "native" / "audit"
AUDIT_LIB = "libdlltrace_audit.so"
PRELOAD_LIB = "libdlltrace_preload.so"


def bin_dir() -> Path:
    return Path(os.environ["DLLTRACE_BIN"]) if os.environ.get("DLLTRACE_BIN") else BIN


def launcher_name(windows_machine: str) -> str:
    """The launcher for a Windows of this machine ("AMD64", "ARM64", "x86", as platform.machine() says it):
    the x64 one wherever x64 programs run (it injects the x86 shim into 32-bit children itself), else the
    x86 one (a 32-bit Windows)."""
    return LAUNCHER32 if windows_machine.lower() in ("x86", "i386", "i686") else LAUNCHER


def wine_runs_32bit(wine: Optional[str]) -> bool:
    """Whether this Wine has its 32-bit half (Debian: wine32:i386): its 32-bit ntdll.dll is there."""
    dirs = [Path(d) for d in WINE32_DLL_DIRS]
    if wine:
        real = Path(wine).resolve().parent
        dirs += [real.parent / "lib" / "wine" / "i386-windows", real.parent / "lib32" / "wine" / "i386-windows",
                 real / "i386-windows"]
    return any((d / "ntdll.dll").is_file() for d in dirs)


def find_wine() -> Optional[str]:
    override = os.environ.get("DLLTRACE_WINE")
    cands = (override,) if override else WINE_CANDIDATES
    for c in cands:
        p = c if os.path.isabs(c) else shutil.which(c)
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def package_recorder_dir() -> Path:
    return _PACKAGE / "bin" / "linux"


def cache_recorder_dir() -> Path:
    """Where an install without a recorder builds one: $XDG_CACHE_HOME/dlltrace/linux (cachedir.xdg_cache). It is
    loaded into every traced program (LD_AUDIT, LD_PRELOAD): it is used, and built, only in a folder nobody else
    can write (cachedir.trusted_dir)."""
    return xdg_cache() / "dlltrace" / "linux"


RECORDER_STAMP = "sources.sha256"  # written by native/audit/build.sh next to the libraries it builds


def _sha256() -> "Any":
    """A sha256 object from CPython's own builtin module (_sha2 in 3.12+, _sha256 before): hashlib would load
    OpenSSL's libcrypto first, a few milliseconds of every `run` before its program starts."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return sha256()


def recorder_sources_digest() -> str:
    """The sha256 of the recorder's sources (native/audit: dlltrace_audit.c, dlltrace_preload.c, then the
    dlltrace_out.h both include), as build.sh writes it in RECORDER_STAMP; "" when this install has no sources (its bin/linux is the one)."""
    h = _sha256()
    try:
        for name in ("dlltrace_audit.c", "dlltrace_preload.c", "dlltrace_out.h"):
            h.update((NATIVE / name).read_bytes())
    except OSError:
        return ""
    return h.hexdigest()


def built_recorder() -> Optional[Path]:
    """The folder of a built recorder (both libraries) built from this install's sources: the package's bin/linux,
    else the cache's; None. A build of other sources (~/.cache/dlltrace/linux left by an older dlltrace, whose
    preload library lacks what this bootstrap calls) is stale: not it."""
    digest = None
    for d in (package_recorder_dir(), cache_recorder_dir()):
        if (d / AUDIT_LIB).is_file() and (d / PRELOAD_LIB).is_file():
            if d != package_recorder_dir():
                trusted = trusted_dir(d)  # (libraries others could have put there are not loaded into the program)
                if trusted is None:
                    continue
                d = trusted
            digest = recorder_sources_digest() if digest is None else digest
            try:
                stamp = (d / RECORDER_STAMP).read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                stamp = ""
            if not digest or stamp == digest:
                return d
    return None
