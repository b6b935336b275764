"""Writing trace files (docs/trace-format.md): the header line a run starts with, the spill file the
writers of a run append to and its compression into the finished trace, and events written as trace
lines. Shared by the Windows launcher (launch.py) and the Linux recorder (linux.py)."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import sys
from pathlib import Path

TYPE_CHECKING = False  # (typing is not imported before a Linux program starts: trace/linux.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Optional

from dlltrace.version import __version__
from dlltrace.errors import EXIT_OUTPUT, DlltraceError
from dlltrace.trace.where import FORMAT_NAME, FORMAT_VERSION  # (no reader: `run` writes the header, starts the program)


def default_trace_name(cmd: list[str], now: Optional[datetime.datetime] = None) -> str:
    now = now or datetime.datetime.now()
    stem = re.split(r"[\\/]", cmd[0])[-1]
    stem = re.sub(r"\.(exe|com|bat|cmd)$", "", stem, flags=re.I)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("._") or "cmd"
    return f"dlltrace-{stem}-{now:%Y%m%d-%H%M%S}.jsonl.gz"


# ---- compressed traces (docs/trace-format.md, "Compressed traces") --------------------------------------
# A trace named *.gz is written compressed, the rest (-o x.jsonl) as plain JSON Lines. The writers of a run
# (every process's shim, the launcher) append whole lines to a plain spill file next to it, <name>.part,
# which `dlltrace run` compresses into <name> when the run is over, the facts appended: a crash of the
# program loses nothing (the run goes on), and a `dlltrace run` that is itself killed leaves the spill,
# plain JSON Lines that `dlltrace report` reads up to its last whole line. A gzip member can only be read
# once it is whole, and one member per line (the writers are many processes, under the loader lock)
# would cost more than the compression saves.
GZIP_LEVEL = 6


def is_compressed_name(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def spill_path(out: Path) -> Path:
    """Where the writers of a run append: `out` itself for a plain trace, <out>.part for a compressed one."""
    return out.with_name(out.name + ".part") if is_compressed_name(out) else out


def is_spill(path: Path) -> bool:
    """A compressed trace's spill (spill_path), not a plain trace."""
    return path.name.endswith(".part") and is_compressed_name(path.with_name(path.name[:-len(".part")]))


class GzipAhead:
    """The start of a spill compressed while it is written (`feed` its bytes in order, from its first: `run` on
    Linux, as its worker reads the trace), so that finish_trace compresses only the rest. In memory, up to
    LIMIT bytes of spill fed (then dropped: finish_trace compresses it all, as without it)."""

    LIMIT = 256 << 20  # (about a tenth of it compressed)

    def __init__(self) -> None:
        import gzip
        import io

        self.buf = io.BytesIO()
        self.gz: Optional[gzip.GzipFile] = _gzip_writer(self.buf)
        self.fed = 0

    def feed(self, data: bytes) -> None:
        if self.gz is None:
            return
        if self.fed + len(data) > self.LIMIT:
            self.gz = None
            self.buf = type(self.buf)()
            return
        self.gz.write(data)
        self.fed += len(data)


def _gzip_writer(raw: Any) -> Any:
    """A gzip writer with no file name and no time in its header: the same trace gives the same bytes."""
    import gzip

    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0)


def finish_trace(spill: Path, out: Path, ahead: Optional[GzipAhead] = None) -> Path:
    """Compress the spill into `out` (through <out>.tmp, then renamed: a reader never sees half a file)
    and remove it; the path the trace is in at the end: `out`, or the spill when it could not be
    compressed (said on stderr; nothing is lost). `ahead`: the spill's first bytes already compressed (the
    same bytes in the end)."""
    if spill == out:
        return out
    tmp = out.with_name(out.name + ".tmp")
    try:
        with open(spill, "rb") as src, open(tmp, "wb") as raw:
            if ahead is not None and ahead.gz is not None and os.fstat(src.fileno()).st_size >= ahead.fed:
                src.seek(ahead.fed)
                shutil.copyfileobj(src, ahead.gz, 1 << 20)
                ahead.gz.close()
                raw.write(ahead.buf.getbuffer())
            else:
                with _gzip_writer(raw) as gz:
                    shutil.copyfileobj(src, gz, 1 << 20)
        os.replace(tmp, out)
    except OSError as e:
        print(f"dlltrace: warning: could not compress the trace into {out} ({e.strerror or e}); "
              f"it is in {spill}, uncompressed", file=sys.stderr)
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return spill
    try:
        spill.unlink()
    except OSError:
        pass
    return out


def libc_version() -> tuple[str, str]:
    """platform.libc_ver(): glibc answers os.confstr (no file read, and no import of platform, whose regular
    expressions are a few milliseconds of `run` before its program starts); another C library, platform's reading
    of the interpreter's file."""
    try:
        parts = (os.confstr("CS_GNU_LIBC_VERSION") or "").split(maxsplit=1)
        if len(parts) == 2:
            return parts[0], parts[1]
    except (AttributeError, ValueError, OSError):
        pass
    import platform

    return platform.libc_ver()


def host_platform() -> str:
    """platform.platform() (the header's "host"), on Linux without its `uname -p` child: a fork and an exec
    before the program starts (~5-15 ms of `dlltrace run`'s wall time) for a processor name that Linux's
    form drops anyway ("unknown", or the machine again): <system>-<release>-<machine>-with-<libc><version>,
    cleaned as platform.platform() cleans it."""
    if not sys.platform.startswith("linux"):
        import platform

        return platform.platform()
    u = os.uname()
    libc, version = libc_version()
    text = "-".join(p.strip() for p in (u.sysname, u.release, u.machine, "with", libc + version) if p)
    for c in ' /\\:;"()':
        text = text.replace(c, "_" if c == " " else "-")
    text = text.replace("unknown", "")
    while "--" in text:
        text = text.replace("--", "-")
    return text.rstrip("-")


def header_line(platform_name: str, cmd: list[str]) -> str:
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tool": f"dlltrace {__version__}",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform_name,
        "host": host_platform(),
        "command": cmd,
    }
    # (a command-line argument with bytes that are not UTF-8 reaches Python as lone surrogates: their escapes)
    return json.dumps(header, ensure_ascii=True) + "\n"


def start_trace(path: Path, platform_name: str, cmd: list[str]) -> None:
    """Create the trace file with its header (replacing an old one); one clear error if impossible.

    An old file is removed first, not truncated: the writers of a run share the file's end through a
    block named after the file's identity (native/common/jsonw.h), and a process of an earlier run
    still holding the old file must not share it with this run (a new file is a new identity)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # (in use without FILE_SHARE_DELETE on Windows, a folder...): open() below truncates or says why
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(header_line(platform_name, cmd))
    except OSError as e:
        raise DlltraceError(f"cannot write the trace file {path}: {e.strerror or e}", EXIT_OUTPUT) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def event_lines(events: Iterable[dict[str, Any]]) -> bytes:
    """Events as trace lines (JSON Lines, UTF-8), as the shim writes them: strings as raw UTF-8, except
    that a lone UTF-16 surrogate (legal in a Windows file name: a LoadLibraryW name, read back from the
    trace's own `\\udXXX` escape) is written as that escape again (docs/trace-format.md). The name
    round-trips, and writing never raises UnicodeEncodeError. (In JSON text a surrogate can only stand
    inside a string, where its escape means the same.)"""
    text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
    if _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8")
