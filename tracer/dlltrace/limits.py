"""What reading input from strangers may cost (docs/limits.md), in one place for every reader: a trace's lines
(trace/reader.py) and a wheel's zip (worlds/static.py). Exceeded, a bound stops the read with one line naming it
(exit 3 for a trace, 2 for a wheel); `dlltrace --limit NAME=N COMMAND ...` raises it for that command
(DLLTRACE_LIMITS="NAME=N,...", which its children see too; K, M, G, T suffixes)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from dlltrace.errors import EXIT_USAGE, DlltraceError


@dataclass(frozen=True)
class Limits:
    """Every bound, with its default."""

    # a trace (trace/reader.py)
    trace_bytes: int = 16 << 30  # bytes of the trace's lines (a gzip trace's, inflated)
    line_bytes: int = 64 << 20  # bytes of one line (the largest real event, py_dists of a big environment: a few MB)
    events: int = 100_000_000  # events kept
    blank_run: int = 1_000_000  # blank lines in a row (a writer's padding is zero bytes, not blank lines)
    gzip_ratio: int = 200  # a gzip trace inflating to more than this many times its size, plus 64 MiB: a bomb (real traces: 10-30)
    # a wheel (worlds/static.py)
    zip_members: int = 250_000  # entries of the central directory (torch's wheel: 11,236)
    zip_central_directory: int = 128 << 20  # bytes of the central directory (torch's: about 1.3 MB)
    zip_member_bytes: int = 1 << 32  # a member's declared (inflated) size: a PE image cannot be larger
    zip_inflate: int = 16 << 30  # bytes inflated from one wheel in all
    record_hash_bytes: int = 1 << 32  # an installed file hashed against its RECORD (a PE image cannot be larger)
    # a drawn dependency tree (render/linux_tree.py: `deps x.so`, the Linux report)
    tree_depth: int = 24  # levels of libraries below the root (libgtk-x11-2.0's deepest: 9)
    tree_width: int = 200  # libraries drawn under one library (the failing first; libgtk-x11-2.0's widest: 19)


LIMIT_NAMES = tuple(Limits.__dataclass_fields__)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_limits(text: str, base: Optional[Limits] = None) -> Limits:
    """"trace_bytes=32G,events=200M" over `base` (the defaults). DlltraceError (exit 2) for a bad name or value."""
    values = dict((base or Limits()).__dict__)
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        name, _, value = part.partition("=")
        m = re.fullmatch(r"(\d+)([KMGT]?)", value.strip().upper())
        if name.strip() not in values or m is None:
            raise DlltraceError(f"--limit {part}: expected NAME=NUMBER[K|M|G|T], NAME one of {', '.join(LIMIT_NAMES)}",
                                EXIT_USAGE)
        values[name.strip()] = int(m.group(1)) * _UNITS[m.group(2)]
    return Limits(**values)


def limits() -> Limits:
    """The bounds in effect: the defaults, raised by DLLTRACE_LIMITS (what `dlltrace --limit` sets)."""
    return parse_limits(os.environ.get("DLLTRACE_LIMITS", ""))
