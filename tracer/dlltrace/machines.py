"""The machines a PE file is built for, read from its header without pefile (`dlltrace --version` reads
the shim's and the launcher's; pe.py reads everything else)."""

from __future__ import annotations

TYPE_CHECKING = False  # (typing and pathlib are not imported at run time: `dlltrace --version`, bench/startup.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Optional

# a PE header's Machine field -> its name (model.MACHINES)
MACHINE_NAMES = {0x8664: "x64", 0x14C: "x86", 0xAA64: "arm64", 0x1C4: "arm", 0x1C0: "arm"}


def pe_machine(path: Path) -> tuple[Optional[str], Optional[str]]:
    """(machine, problem) from a file's PE header: ("x64", None), or (None, "not a usable PE file (...)")."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    if len(head) < 0x40 or head[:2] != b"MZ":
        return None, "not a usable PE file (no MZ header)"
    at = int.from_bytes(head[0x3C:0x40], "little")
    if at + 6 > len(head) or head[at:at + 4] != b"PE\0\0":
        return None, "not a usable PE file (no PE signature)"
    code = int.from_bytes(head[at + 4:at + 6], "little")
    return MACHINE_NAMES.get(code, f"unknown:{code:#06x}"), None
