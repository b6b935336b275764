"""Windows path arithmetic that runs on any OS.

Paths are kept as the user wrote them (for display); comparisons go through
`key()`, which folds case and separators the way the loader does.
"""

from __future__ import annotations

import re
from functools import lru_cache

# The path functions' caches: the paths of the loads at hand (a load asks about tens of paths), not
# every path of a big trace (65,536 entries each held about 28 MB on the 19 MB bench trace;
# bench/report_memory.py, bench/report_speed.py)
PATH_CACHE = 4096

_DRIVE = re.compile(r"^[A-Za-z]:")
_ABS = re.compile(r"^(?:[A-Za-z]:[\\/]|[\\/]{2}[^\\/]+[\\/][^\\/]+)")


@lru_cache(maxsize=PATH_CACHE)
def has_path(name: str) -> bool:
    """A name "has a path" when it contains a separator or starts with a drive letter (LOADER.md §1)."""
    return "\\" in name or "/" in name or bool(_DRIVE.match(name))


def is_absolute(path: str) -> bool:
    """Fully qualified: `C:\\x` or a UNC path `\\\\server\\share`."""
    return bool(_ABS.match(path))




# A path normalize() returns as it is (most paths of a trace), told by one match, not a split: an upper-case drive
# letter and a backslash, or a UNC path's two backslashes, then parts; or a relative path (not "X:..."): parts or
# nothing. Parts are separated by one backslash, have no forward slash, and do not start with a dot (no ".", ".."
# nor empty part, no trailing separator). (One regular expression: a third cheaper than the eight string tests it
# replaced, and the same answers: every string of up to six characters of a:C:c:\:/:.: :newline:1 checked.)
_PART = r"[^/\\.][^/\\]*(?:\\[^/\\.][^/\\]*)*"
_NORMAL = re.compile(rf"(?:[A-Z]:\\|\\\\){_PART}|(?!.:)(?:{_PART})?", re.DOTALL).fullmatch


def _normal(path: str) -> bool:
    """Whether normalize(path) is `path` itself (_NORMAL)."""
    return _NORMAL(path) is not None


@lru_cache(maxsize=PATH_CACHE)
def normalize(path: str) -> str:
    """Backslashes, no duplicate or trailing separators, `.` and `..` resolved.

    Case is preserved; use key() to compare.
    """
    if _NORMAL(path) is not None:  # (most paths of a trace: already normal, returned as they are)
        return path
    path = path.replace("/", "\\")
    unc = path.startswith("\\\\")
    drive = ""
    rest = path
    if unc:
        rest = path[2:]
    elif _DRIVE.match(path):
        drive, rest = path[:2], path[2:]
    parts: list[str] = []
    for part in rest.split("\\"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    if unc:
        return "\\\\" + "\\".join(parts)
    if drive:
        return drive[0].upper() + ":\\" + "\\".join(parts)
    return "\\".join(parts)


# Windows compares names by upcasing each UTF-16 unit (RtlUpcaseUnicodeChar, the NLS upcase table; NTFS's $UpCase
# is the same kind of table): one character to one, the simple uppercase mapping, never Unicode case folding. So
# the Kelvin sign U+212A and the Angstrom sign U+212B upcase to themselves (str.lower() made them k and å), ß has no
# one-character capital (str.upper() makes it SS), and neither dotless ı U+0131 nor long ſ U+017F is in the table
# (the default upcase table NTFS formats with, Linux fs/ntfs/upcase.c generate_default_upcase: its ranges skip
# U+00DF, U+0130-0131, U+017F and U+212A/B), where Python's simple mapping makes them I and S. _upcase is that
# mapping: Python's where it is one character to one, except for those two that would reach ASCII. A key keeps
# ASCII lowercase (as it was, and the fast path: str.lower() of an ASCII string) and puts every other character
# as upcased: the same equivalence as Windows' upcase, one representative each. (Characters whose case Unicode
# added after the table Windows ships may differ: not modelled.)
_NOT_UPCASED = frozenset("\u0131\u017f")  # ı and ſ: Python's upper is ASCII I and S, Windows keeps them


@lru_cache(maxsize=1024)
def _upcase(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 and c not in _NOT_UPCASED else c


def fold(name: str) -> str:
    """A name's case-insensitive form as Windows compares names: ASCII lowercased, any other character upcased by
    the simple one-to-one mapping (above)."""
    if name.isascii():
        return name.lower()
    return "".join(c.lower() if c.isascii() else _upcase(c) for c in name)


@lru_cache(maxsize=PATH_CACHE)
def key(path: str) -> str:
    """The comparison key: normalised and case-folded as Windows compares names (fold)."""
    return fold(normalize(path))


@lru_cache(maxsize=PATH_CACHE)
def join(folder: str, name: str, *more: str) -> str:
    if more:
        return join(join(folder, name), *more)
    return normalize(folder.rstrip("\\/") + "\\" + name)


@lru_cache(maxsize=PATH_CACHE)
def dirname(path: str) -> str:
    path = normalize(path)
    i = path.rfind("\\")
    if i < 0:
        return ""
    head = path[:i]
    if len(head) == 2 and head[1] == ":":
        head += "\\"
    return head


@lru_cache(maxsize=PATH_CACHE)
def basename(path: str) -> str:
    path = path.replace("/", "\\")
    return path[path.rfind("\\") + 1:]


def same(a: str, b: str) -> bool:
    return key(a) == key(b)


def check_windows_path(path: str) -> str | None:
    """Why `path` is not an absolute Windows path, or None if it is one."""
    if not isinstance(path, str) or not path:
        return "empty path"
    if path.startswith("/"):
        return f"{path!r} is a POSIX path, not a Windows path (write it like C:\\folder)"
    if not is_absolute(path):
        return f"{path!r} is not an absolute Windows path (write it like C:\\folder)"
    if any(c in path[2:] for c in '<>"|?*') or ":" in path[2:]:
        return f"{path!r} has characters Windows does not allow in a path"
    return None


_DIGITS = re.compile(r"\d+")


def name_shape(name: str) -> str:
    """A file name without its numbers, case-folded: cublas64_#.dll for cublas64_12.dll."""
    return _DIGITS.sub("#", fold(basename(name)))


def close_name(candidate: str, name: str) -> bool:
    """Whether file name `candidate` differs from `name` only in its numbers
    (cublas64_11.dll for cublas64_12.dll): another version of the same library."""
    a, b = fold(basename(candidate)), fold(basename(name))
    return a != b and name_shape(a) == name_shape(b) and bool(_DIGITS.search(b))


def typed(value: object) -> str:
    """A string as a user types it in Python: r"C:\\x" for a path (a raw string, no doubled
    backslashes), "name.dll" for a name; the repr where a raw string cannot hold it (a quote, a
    trailing backslash, a line break) or for what is not a string."""
    if not isinstance(value, str) or '"' in value or value.endswith("\\") or "\n" in value:
        return repr(value)
    return f'r"{value}"' if "\\" in value else f'"{value}"'
