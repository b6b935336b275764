"""The trace file a bug report should attach (`report --markdown` names it, with its size): what the file
on disk is, read from the file itself, not from its name: compressed (gzip's magic bytes), redacted (the
header `dlltrace redact` and `run --redact` write says `"redacted": true`), its size; and whether the
Trace is the redacted copy `report --redact` reports from (the file itself then is not redacted)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass
from typing import Optional

from dlltrace.trace.redact import GZIP_MAGIC, HEADER_FIELD, redacted_copy_of
from dlltrace.trace.reader import Trace

GITHUB_ATTACHMENT_LIMIT = 25 * 1000 * 1000  # bytes: GitHub's limit for a file attached to an issue (25 MB)


@dataclass(frozen=True)
class Attachment:
    name: str  # the file's name (the report's own spelling of it: redacted under --redact)
    size: Optional[int]  # bytes; None when the file cannot be read
    compressed: bool  # gzip, by its content
    redacted: bool  # the file is a redacted trace (its header says so)
    report_redacted: bool  # the report is made of a redacted copy of an unredacted file (`report --redact`)

    @property
    def name_says_compressed(self) -> bool:
        return self.name.lower().endswith(".gz")

    @property
    def too_big(self) -> bool:
        return self.size is not None and self.size > GITHUB_ATTACHMENT_LIMIT


def _header_redacted(path: str, compressed: bool) -> bool:
    try:
        with (gzip.open(path, "rb") if compressed else open(path, "rb")) as f:
            line = f.readline(1 << 20)
        head = json.loads(line.decode("utf-8"))
    except (OSError, EOFError, zlib.error, ValueError, RecursionError):
        return False
    return isinstance(head, dict) and head.get(HEADER_FIELD) is True


def attachment_of(trace: Trace) -> Attachment:
    """The file a report of `trace` should attach: the trace file (for `report --redact`, the original
    that the redacted copy was made of: its size and content; its name as the report spells it)."""
    original = redacted_copy_of(trace)
    path = original if original is not None else trace.path
    name = os.path.basename(trace.path.replace("\\", "/")) or trace.path
    try:
        size: Optional[int] = os.path.getsize(path)
        with open(path, "rb") as f:
            compressed = f.read(2) == GZIP_MAGIC
    except OSError:
        size, compressed = None, False
    redacted = size is not None and _header_redacted(path, compressed)
    return Attachment(name, size, compressed, redacted, report_redacted=original is not None and not redacted)


def size_text(n: int) -> str:
    """1,234 bytes, 12.3 KB, 6.3 MB (decimal units, as GitHub gives its limits)."""
    if n < 1000:
        return f"{n:,} bytes"
    if n < 1000 * 1000:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1e6:.1f} MB"
