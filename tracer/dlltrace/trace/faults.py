"""Where a traced Python was when it crashed: the files faulthandler wrote (trace/shim.py enable_faults: one
`<pid>.txt` in the folder DLLTRACE_FAULTS names), read after the program ended and made `py_fault` events
(docs/trace-format.md), one per process that wrote anything.

faulthandler's text (CPython's Python/faulthandler.c) is its first line, what ended the process ("Fatal Python
error: Aborted", "Fatal Python error: Segmentation fault", "Windows fatal exception: access violation"), then
the Python stack of the thread that crashed, most recent call first, a line a frame:
`  File "/app/app.py", line 3 in <module>`. This module only reads: what a crash means for a load is
diagnosis/'s. Bounded: FAULT_MAX_BYTES of a file, FAULT_MAX_FRAMES frames.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

FAULT_MAX_BYTES = 64 * 1024
FAULT_MAX_FRAMES = 100
_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>\S+)\s*$')


def parse_fault(text: str) -> Optional[dict[str, Any]]:
    """faulthandler's text as a py_fault event's fields: `fault` (its first line), `frames` (innermost first,
    each {"file", "line", "function"}), None when the text holds no fault (an empty file: no crash)."""
    lines = text.splitlines()
    first = next((x.strip() for x in lines if x.strip()), "")
    if not first:
        return None
    frames: list[dict[str, Any]] = []
    for x in lines:
        if x.startswith(("Thread ", "Current thread")) and frames:
            break  # (another thread's stack: only the first one's is the crash's)
        m = _FRAME.match(x)
        if m and len(frames) < FAULT_MAX_FRAMES:
            frames.append({"file": m.group("file"), "line": int(m.group("line")), "function": m.group("function")})
    return {"fault": first[:500], "frames": frames}


def fault_events(folder: Path) -> list[dict[str, Any]]:
    """The py_fault events of the files in `folder` (`<pid>.txt`), in pid order; unreadable or empty files are
    none."""
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        stem = name[:-4] if name.endswith(".txt") else ""
        if not stem.isdigit():
            continue
        try:
            with open(folder / name, "rb") as f:
                text = f.read(FAULT_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        fields = parse_fault(text)
        if fields is not None:
            out.append({"ev": "py_fault", "pid": int(stem), "tid": 0, "seq": 0, "t": 0, **fields})
    return out
