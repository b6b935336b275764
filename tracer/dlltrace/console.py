"""Printing on any console, and writing output files.

A Windows console or a redirected stream often has a code page (cp1252, cp437: PYTHONIOENCODING, or
Python's default for a redirected stdout) that lacks the characters the report uses (✗ ✓ → — └ …),
and any name may hold a lone surrogate (a Windows file name can). Instead of a UnicodeEncodeError,
stdout and stderr are given an error handler (setup_streams):
- text (TEXT_ERRORS): a character of FALLBACK (the report's own: ✗ ✓ → — └ …) as its ASCII stand-in (✗ x,
  → ->, └ `, ─ -, …); any other (a name's: 用, 😀, ü on ASCII; a lone surrogate) as its Python escape
  (`\\u7528`, `\\U0001f600`, `\\xfc`, `\\udc80`: what explained.visible writes for a lone surrogate), so
  that two names the console cannot show still read apart;
- JSON on stdout (JSON_ERRORS): a JSON escape `\\uXXXX` (a pair for a character past U+FFFF), so the
  document stays valid JSON and loses nothing in any encoding (a lone surrogate: its escape, the
  same name again).
The encoding itself is left as it is, so rich (the terminal renderer) is told the truth about the
console: on a code page that is not UTF it draws boxes with ASCII, and it still colours.

write_output writes a command's `-o FILE` in UTF-8, whatever the console's encoding; output_file is
how every `-o` is opened (`report`, `simulate`, `redact`): written through the path, never renamed over.
"""

from __future__ import annotations

import codecs
import os
import stat
import sys
from contextlib import contextmanager

from dlltrace.errors import EXIT_OUTPUT, DlltraceError

TYPE_CHECKING = False  # (typing is not imported at run time: start-up, bench/startup.py)
if TYPE_CHECKING:
    from typing import BinaryIO, Iterable, Iterator, Optional, TextIO, Union

TEXT_ERRORS = "dlltrace-text"
JSON_ERRORS = "dlltrace-json"

# ASCII stand-ins for the characters the renderers use, where an encoding lacks them
FALLBACK = {
    "✗": "x", "✓": "ok", "→": "->", "←": "<-", "—": "--", "–": "-", "…": "...", "·": "-", "§": "S",
    "─": "-", "━": "-", "└": "`", "├": "|", "│": "|", "┌": "+", "┐": "+", "┘": "+", "┬": "+", "┴": "+",
    "┼": "+", "≥": ">=", "≤": "<=", "×": "x", "•": "*", "‘": "'", "’": "'", "“": '"', "”": '"', "\u00a0": " ",
}


def _text_errors(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):
        raise e
    return "".join(FALLBACK.get(ch) or escaped(ch) for ch in e.object[e.start:e.end]), e.end


def escaped(ch: str) -> str:
    """A character as its Python escape: `\\xfc`, `\\u7528`, `\\U0001f600` (ASCII: any console shows it)."""
    o = ord(ch)
    return "\\x%02x" % o if o < 0x100 else "\\u%04x" % o if o <= 0xFFFF else "\\U%08x" % o


def shown_on(encoding: str, text: str) -> str:
    """`text` as a console of `encoding` shows it (TEXT_ERRORS: stand-ins and escapes), as a str: what a
    renderer lays out for that console, so that its widths are those of what is printed."""
    try:
        return text.encode(encoding, TEXT_ERRORS).decode(encoding)
    except (LookupError, UnicodeDecodeError):
        return text


def _json_errors(e: UnicodeError) -> tuple[str, int]:
    if not isinstance(e, UnicodeEncodeError):
        raise e
    out = []
    for ch in e.object[e.start:e.end]:
        o = ord(ch)
        if o > 0xFFFF:
            o -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF)))
        else:
            out.append("\\u%04x" % o)
    return "".join(out), e.end


codecs.register_error(TEXT_ERRORS, _text_errors)
codecs.register_error(JSON_ERRORS, _json_errors)


def setup_streams(json_stdout: bool = False) -> None:
    """stdout (JSON_ERRORS when it carries JSON, else TEXT_ERRORS) and stderr (TEXT_ERRORS) never
    raise UnicodeEncodeError; their encodings are not changed."""
    _set_errors(sys.stdout, JSON_ERRORS if json_stdout else TEXT_ERRORS)
    _set_errors(sys.stderr, TEXT_ERRORS)


def _set_errors(stream: Optional[TextIO], errors: str) -> None:
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) != errors:
        try:
            reconfigure(errors=errors)
        except (ValueError, OSError, TypeError):  # (a stream that cannot change: left as it is)
            pass


def is_utf(stream: Optional[TextIO]) -> bool:
    """Whether the stream's encoding is a UTF one (every character can be written as it is)."""
    enc = getattr(stream, "encoding", None) or ""
    try:
        return codecs.lookup(enc).name.startswith("utf")
    except LookupError:
        return False


class StdoutError(DlltraceError):
    """stdout cannot be written (a full disk, /dev/full, a failing device): one line, exit 5."""

    def __init__(self, e: OSError) -> None:
        super().__init__(f"cannot write the output (stdout): {e.strerror or e}", EXIT_OUTPUT)


class _GuardedStdout:
    """sys.stdout while a command runs (guarded_stdout): what the stream does, except that a write or flush
    failing with an OSError other than a reader gone away (EPIPE: BrokenPipeError, as before) raises
    StdoutError, which the CLI says as one line, exit 5, not as a failure of dlltrace's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutError(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise StdoutError(e) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextmanager
def guarded_stdout() -> Iterator[None]:
    """sys.stdout made a _GuardedStdout while the block runs (the stream it wraps put back after)."""
    real = sys.stdout
    if real is None or isinstance(real, _GuardedStdout):
        yield
        return
    sys.stdout = _GuardedStdout(real)
    try:
        yield
    finally:
        if isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = real


def write_output(path: str, text: Union[str, Iterable[str]]) -> None:
    """`text` (what the command prints, its last newline too) into the file `path`, in UTF-8 (a lone surrogate as its `\\udXXX` escape), newlines as
    `\\n`; a file that cannot be written is a one-line error (exit 5), and leaves no partial file (output_file)."""
    pieces = iter([text] if isinstance(text, str) else text)  # (pieces: a report written as it is made)
    first = next(pieces, "")  # (made before the file is opened: an error in making it leaves no file)
    if os.path.isdir(path):
        raise DlltraceError(f"cannot write {path}: is a folder; name the file to write", EXIT_OUTPUT)
    try:
        with output_file(path) as f:
            f.write(first.encode("utf-8", TEXT_ERRORS))
            for piece in pieces:
                f.write(piece.encode("utf-8", TEXT_ERRORS))
    except OSError as e:
        raise DlltraceError(f"cannot write {path}: {e.strerror or e}", EXIT_OUTPUT) from None


@contextmanager
def output_file(path: str) -> Iterator[BinaryIO]:
    """`path` opened to be written THROUGH (binary): a symlink is followed and stays a symlink, a FIFO or a
    device is written to (`-o /dev/stdout`, `-o /dev/full`), an existing regular file is truncated in place
    (its mode, owner and hard links kept); nothing is ever renamed over the path, so nothing at it is
    replaced by a new file. The caller refuses a folder first (with its own words and exit code).

    On any failure while it is written (a full disk: OSError ENOSPC; Ctrl-C; an error making the output)
    no partial output is left: a regular file this call created is removed; a regular file that existed
    (already truncated: its old content is gone either way) is truncated to empty, never deleted; a FIFO,
    a device or anything else that was not a regular file is left as it is. The exception is raised again
    (an OSError: the caller's one-line error, exit 5)."""
    try:
        existed = os.path.exists(path)  # (follows a symlink: a dangling one is a file this call creates)
    except (OSError, ValueError):
        existed = False
    f = open(path, "wb")
    opened = os.fstat(f.fileno())
    try:
        with f:
            yield f
    except BaseException:
        _undo_output(path, opened, existed)
        raise


def _undo_output(path: str, opened: os.stat_result, existed: bool) -> None:
    """What output_file leaves of an output whose writing failed: nothing partial (see there)."""
    if not stat.S_ISREG(opened.st_mode):
        return  # a FIFO, a device: written to, never removed
    try:
        real = os.path.realpath(path)  # (through a symlink: the file it points at, the link left as it was)
        now = os.stat(real)
        if not os.path.samestat(now, opened):
            return  # (the path names another file by now: not ours to touch)
        if existed:
            os.truncate(real, 0)
        else:
            os.unlink(real)
    except OSError:
        pass  # (best effort: the one-line error about the write is what the user needs)
