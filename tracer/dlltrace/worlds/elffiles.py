"""The ELF shared objects on disk that `dlltrace deps` resolves: whether a file is one (is_elf), and those under a
folder (elf_objects). Light on purpose: `deps` asks is_elf of every target before it imports either OS's side."""

from __future__ import annotations

import os
import stat
from typing import Optional

from dlltrace.classify import windows_install
from dlltrace.errors import EXIT_USAGE, DlltraceError


def is_elf(path: str) -> bool:
    """Whether `path` is a regular file (a link followed) that starts as an ELF file does. A FIFO, a socket or a
    device is not read (opened without blocking, then let go: reading a FIFO waits for a writer forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 4) == b"\x7fELF"
    except OSError:
        return False
    finally:
        os.close(fd)


def elf_objects(folder: str, limit: int = 5000, not_elf: Optional[list[str]] = None) -> list[str]:
    """The ELF shared objects under a folder (`*.so`, `*.so.N...`), in a stable order, each file once (a link
    to another is not one more: libfoo.so -> libfoo.so.1); [] when it is a Windows install (classify.py
    windows_install: more .pyd than Linux extensions; pip's Windows launchers, .NET assemblies or a stray .pyd do
    not make a Linux site-packages one). More than `limit`: DlltraceError (EXIT_USAGE). `not_elf`: given, the
    regular files named so that are no ELF file are added to it (a dlopen of one fails: check fails them too)."""
    out: list[str] = []
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for fn in sorted(filenames):
            low = fn.lower()
            names.append(fn)
            p = os.path.join(dirpath, fn)
            if len(out) <= limit and (low.endswith(".so") or ".so." in low) and not os.path.islink(p):
                if is_elf(p):
                    out.append(p)
                elif not_elf is not None and stat.S_ISREG(_mode(p)):
                    not_elf.append(p)
    if windows_install(names):
        return []
    if len(out) > limit:  # (not the first `limit` of them said to be all: a usage error; a PE file found after wins)
        raise DlltraceError(f"{folder}: more than {limit:,} shared objects in it: give a folder inside it (a "
                            "package)", EXIT_USAGE)
    return out


def _mode(path: str) -> int:
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return 0
