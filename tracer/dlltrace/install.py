"""Can this install trace? The native files `dlltrace run` needs (the launcher and the shim, in the
package's bin/, where trace/launch.py looks for them), the machine each is built for (read from its
PE header), and what runs them here (Windows itself, or wine64 for `--wine`). `dlltrace --version`
prints it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dlltrace import __version__
from dlltrace.model import PEFacts
from dlltrace.pe import read_pe_facts
from dlltrace.trace import launch


@dataclass(frozen=True)
class NativeFile:
    role: str                # "launcher" | "shim"
    path: Path
    machine: Optional[str]   # "x64", ... from its PE header; None when missing or not a PE
    problem: Optional[str]   # why it cannot be used: "missing", or what is wrong with it


@dataclass(frozen=True)
class TracingStatus:
    files: tuple[NativeFile, ...]
    platform: str            # "windows" or another sys.platform
    wine: Optional[str]      # wine64's path (for --wine), when found

    @property
    def built(self) -> bool:
        """Both native files are there and are PE files of one machine."""
        return all(f.problem is None for f in self.files) and len({f.machine for f in self.files}) == 1

    @property
    def machine(self) -> Optional[str]:
        return self.files[0].machine if self.built else None

    @property
    def can_trace(self) -> bool:
        return self.built and (self.platform == "windows" or self.wine is not None)


def native_file(role: str, path: Path) -> NativeFile:
    if not path.is_file():
        return NativeFile(role, path, None, "missing")
    facts = read_pe_facts(path)
    if not isinstance(facts, PEFacts):
        return NativeFile(role, path, None, f"not a usable PE file ({facts.message})")
    return NativeFile(role, path, facts.machine, None)


def tracing_status() -> TracingStatus:
    files = (native_file("launcher", launch.bin_dir() / launch.LAUNCHER), native_file("shim", launch.bin_dir() / launch.SHIM))
    platform = "windows" if sys.platform == "win32" else sys.platform
    return TracingStatus(files, platform, None if platform == "windows" else launch.find_wine())


def status_lines(status: TracingStatus) -> list[str]:
    """What `dlltrace --version` says after its first line."""
    lines = []
    for f in status.files:
        what = f"{f.machine} PE" if f.problem is None else f.problem
        lines.append(f"{f.role}: {f.path} ({what})")
    if not status.built:
        missing = ", ".join(f.path.name for f in status.files if f.problem is not None) or "the launcher and shim"
        why = (f"{missing} not usable" if any(f.problem is not None for f in status.files)
               else "the launcher and the shim are built for different machines")
        lines.append(f"tracing: not possible with this install ({why}); the win_amd64 wheel includes them, "
                     "and a source checkout builds them with `bash native/build.sh` (mingw-w64)")
    elif status.platform == "windows":
        lines.append(f"tracing: yes, {status.machine} Windows programs (`dlltrace run -- CMD`)")
    elif status.wine:
        lines.append(f"tracing: yes, {status.machine} Windows programs under Wine ({status.wine}: "
                     "`dlltrace run --wine -- PROG.exe`); native programs of this OS: not yet")
    else:
        lines.append(f"tracing: not here: the shim is built ({status.machine}), but this is not Windows and wine64 "
                     "is not installed (`run --wine` needs it: apt-get install wine64)")
    return lines


def version_text() -> str:
    return "\n".join([f"dlltrace {__version__}", *status_lines(tracing_status())])
