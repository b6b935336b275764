"""Where the native parts of this install are, looked up without loading anything heavy (`dlltrace --version`,
install.py, reads this; trace/launch.py and trace/linux.py use it):

- the Windows launcher and shim: the package's bin/ (the win_amd64 wheel's, or a checkout's built by
  native/build.sh); DLLTRACE_BIN names another folder (a build of one's own; the tests' missing one);
- wine64, for `run --wine` (DLLTRACE_WINE names one);
- the Linux recorder (LD_AUDIT and LD_PRELOAD libraries): the package's bin/linux, else the cache folder
  the first `dlltrace run` builds it into from its sources (a checkout's native/audit, or the copy every
  wheel carries: setup.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

_PACKAGE = Path(__file__).resolve().parents[1]
BIN = _PACKAGE / "bin"
LAUNCHER = "dlltrace_launch64.exe"
SHIM = "dlltrace_shim64.dll"
WINE_CANDIDATES = ("/usr/lib/wine/wine64", "wine64", "wine")

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
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlltrace" / "linux"


def built_recorder() -> Optional[Path]:
    """The folder of a built recorder (both libraries): the package's bin/linux, else the cache's; None."""
    for d in (package_recorder_dir(), cache_recorder_dir()):
        if (d / AUDIT_LIB).is_file() and (d / PRELOAD_LIB).is_file():
            return d
    return None
