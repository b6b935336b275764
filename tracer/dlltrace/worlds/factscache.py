"""PE facts kept on disk between runs, in one folder (default_cache_dir: ~/.cache/dlltrace/pe-facts,
DLLTRACE_CACHE moves it), one JSON file an entry:

- a wheel member's, keyed by its CRC-32, size and name (FactsCache.key: the zip's central directory gives
  all three without reading the member), for `deps` and `check` of a wheel;
- a file on disk's, keyed by its identity (host_key: device, file id, size, modification and change times,
  and its path), for `dlltrace run`'s facts (the same Wine or Windows system DLLs every run: kernel32's
  thousands of export names read again each time were most of the facts' time) and `deps` or `check` of an
  installed folder.

A file is kept only once its times are HOST_SETTLED seconds old: a file written again within the clock's
step (a byte of its header patched in place keeps its size and file id) cannot be mistaken for the version
that was kept, since that version was older than the step when it was kept (as git's "racily clean" index
entries); and only when the file is still the one stat'ed once read. A damaged entry, one whose stored path is
not the file's, one that is no regular file (a FIFO is not waited on) or larger than MAX_ENTRY_BYTES reads as a
miss; a file the caller cannot read is read (a cache shared by users gives none of its facts); a folder that
cannot be written costs only time. Only facts are kept: a file that is not a PE is read again (that is quick).

Trust: the facts in the folder are believed only if nobody else could have written them (cachedir.trusted_dir: the
folder the user's own and writable by nobody else, nor any folder above it); otherwise the cache is not used at all:
every file is read (`--no-cache`), since an entry planted there would be taken as a DLL's imports and exports.

Size: the folder is pruned at most once a PRUNE_EVERY (a stamp file, .pruned, says when it last was), after a
write: when its entries are over MAX_CACHE_BYTES the oldest written go until they are under PRUNE_TO_BYTES; an
entry pruned that is still needed is read and kept again. Temporary files of writes that never ended (a process
killed) go once an hour old.

Not seen (no Python stat gives it): on Windows st_ctime is the creation time, so a file rewritten in place with
its size kept and its modification time put back (SetFileTime) keeps its key.
"""

from __future__ import annotations

import _thread
import json
import os
import stat
import time
import zlib
from pathlib import Path
from typing import Any, Optional, Protocol, Union

from dlltrace.cachedir import cache_home, trusted_dir
from dlltrace.model import PEError, PEFacts
from dlltrace.pe import pe_facts_from_dict, pe_facts_to_dict, read_pe_facts


class Member(Protocol):
    """What a wheel member's key is made of (worlds/static.ZipMember, zipfile.ZipInfo)."""
    @property
    def filename(self) -> str: ...
    @property
    def CRC(self) -> int: ...  # noqa: N802  (zipfile's name)
    @property
    def file_size(self) -> int: ...

# bump when PEFacts (or how pe.py reads them) changes (2: PEFacts.cor_flags; 3: none from a COM descriptor
# smaller than its header)
CACHE_FORMAT = 3
HOST_SETTLED = 2.0  # seconds: how old a file's modification and change times must be for its facts to be kept
MAX_ENTRY_BYTES = 256 << 20  # an entry larger is a miss, not read (torch_cpu.dll's facts, the largest seen: 6.8 MB)
MAX_CACHE_BYTES = 512 << 20  # the folder's entries, past which the oldest go (prune)
PRUNE_TO_BYTES = 384 << 20
PRUNE_EVERY = 24 * 3600.0  # seconds between two prunings of one folder (the stamp file's age)
STALE_TMP = 3600.0  # seconds: a temporary file this old is a write that never ended
STAMP = ".pruned"
# (opened without blocking: an entry that is a FIFO is a miss, not a read that waits for a writer forever)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def default_cache_dir() -> Path:
    return cache_home() / "pe-facts"


class FactsCache:
    """PE facts on disk, by key (the module's docstring). `folder` None: a cache that keeps nothing
    (`--no-cache`)."""

    def __init__(self, folder: Optional[Path]):
        self.folder = folder
        self._trusted: Optional[bool] = None  # (asked once: trusted_folder)
        self._pruned = False  # (once a process at most)

    def usable(self) -> bool:
        """Whether the folder is used: given (not `--no-cache`) and trusted (trusted_folder), made if missing."""
        if self.folder is None:
            return False
        if self._trusted is None:
            real = trusted_dir(self.folder)
            self._trusted = real is not None
            if real is not None:
                self.folder = real  # (used as checked: cachedir.trusted_dir)
        return self._trusted

    def _file(self, key: str) -> Optional[Path]:
        return self.folder / f"{key}.json" if self.folder is not None and self.usable() else None

    @staticmethod
    def key(info: Member) -> str:
        import hashlib  # (here: `run` uses host keys only, and hashlib's OpenSSL start costs ~4 ms)

        name = hashlib.sha1(info.filename.lower().encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"v{CACHE_FORMAT}-{info.CRC:08x}-{info.file_size}-{name}"

    def _read(self, key: str) -> Any:
        f = self._file(key)
        if f is None:
            return None
        try:
            fd = os.open(f, _OPEN_FLAGS)
        except (OSError, ValueError):
            return None
        try:
            with open(fd, "rb") as fh:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                    return None  # (a FIFO, a device, or more than any facts: not read)
                data = fh.read(st.st_size + 1)  # (bounded by the size checked, should the file grow since)
            return json.loads(data.decode("utf-8"))
        except (OSError, ValueError, RecursionError):  # (RecursionError: absurdly deep nesting)
            return None

    def _write(self, key: str, doc: Any) -> None:
        f = self._file(key)
        if f is None:
            return
        tmp = f.with_suffix(f".tmp{os.getpid()}-{_thread.get_ident()}")  # (prefetch's threads write entries too)
        try:
            # (created, never opened if there: a link planted at its name in a folder others can write, such as a
            # DLLTRACE_CACHE under /tmp, is not followed to overwrite the file it points at)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            with open(fd, "wb") as fh:
                fh.write(json.dumps(doc, separators=(",", ":")).encode("utf-8"))
            os.replace(tmp, f)
        except (OSError, ValueError):  # a cache that cannot be written costs only time
            try:
                tmp.unlink()  # (a full disk, or an entry's name taken by a folder: no half-written file left behind)
            except (OSError, ValueError):
                pass
            return
        if not self._pruned:
            self._pruned = True
            prune(f.parent, time.time())

    def get(self, key: str) -> Optional[PEFacts]:
        doc = self._read(key)
        if doc is None:
            return None
        try:
            return pe_facts_from_dict(doc)  # (checked: a damaged entry is a miss)
        except (ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, facts: PEFacts) -> None:
        self._write(key, pe_facts_to_dict(facts))

    def host_facts(self, host: str) -> Union[PEFacts, PEError]:
        """read_pe_facts(host), from the cache when the file is the one kept (host_key), kept when it is not
        and has settled."""
        if not self.usable():
            return read_pe_facts(host)
        try:
            st = os.stat(host)
            if not os.access(host, os.R_OK):  # (a cache another user shares: no facts of a file this one cannot read)
                return read_pe_facts(host)
        except (OSError, ValueError):
            return read_pe_facts(host)  # (its words for a file it cannot open)
        key = host_key(host, st)
        doc = self._read(key)
        if isinstance(doc, dict) and doc.get("path") == host:
            try:
                return pe_facts_from_dict(doc["pe"])
            except (ValueError, KeyError, TypeError):
                pass
        res = read_pe_facts(host)
        if isinstance(res, PEFacts) and settled(st, time.time()) and _same_file(host, key):
            self._write(key, {"path": host, "pe": pe_facts_to_dict(res)})
        return res


def host_key(host: str, st: os.stat_result) -> str:
    """The cache key of the file at `host` as it is now: its device, file id, size, modification and change
    times (nanoseconds) and a checksum of its path (which the entry also holds, and a hit must match)."""
    path_sum = zlib.crc32(host.encode("utf-8", "surrogatepass"))
    return (f"v{CACHE_FORMAT}-h{st.st_dev:x}-{st.st_ino:x}-{st.st_size}-{st.st_mtime_ns}-{st.st_ctime_ns}"
            f"-{path_sum:08x}")


def _same_file(host: str, key: str) -> bool:
    """Whether the file at `host` still has the identity `key` once its facts are read: they are kept only when the
    file read is the one whose key it is (a file replaced, or a link retargeted, while it was read would otherwise
    leave the new version's facts under the old version's key: a wrong hit, should the old version come back)."""
    try:
        return host_key(host, os.stat(host)) == key
    except (OSError, ValueError):
        return False


def settled(st: os.stat_result, now: float) -> bool:
    """Whether a file's facts may be kept: its modification and change times are HOST_SETTLED seconds old, so that
    a change within the file system clock's step (same size, same file id) cannot go unseen (the module's
    docstring). A time in the future (a clock set back) never settles."""
    newest = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9
    return now - HOST_SETTLED >= newest


def trusted_folder(folder: Path) -> bool:
    """Whether the facts in `folder` can be believed (cachedir.trusted_dir), making it (private) when it is missing."""
    return trusted_dir(folder) is not None


def prune(folder: Path, now: float) -> None:
    """Keep the folder's entries under MAX_CACHE_BYTES (the module's docstring, "Size"): at most once a PRUNE_EVERY
    (the stamp's age; the stamp is renewed first, so that processes writing at once do not all prune)."""
    stamp = folder / STAMP
    try:
        if now - os.stat(stamp).st_mtime < PRUNE_EVERY:
            return
    except (OSError, ValueError):
        pass  # (never pruned)
    try:
        stamp.touch()
        entries = []
        total = 0
        with os.scandir(folder) as it:
            for d in it:
                if d.name == STAMP or not d.is_file(follow_symlinks=False):
                    continue
                st = d.stat(follow_symlinks=False)
                if ".tmp" in d.name:
                    if now - st.st_mtime > STALE_TMP:
                        _unlink(d.path)
                    continue
                entries.append((st.st_mtime, st.st_size, d.path))
                total += st.st_size
    except (OSError, ValueError):
        return
    if total <= MAX_CACHE_BYTES:
        return
    for _, size, path in sorted(entries):
        if total <= PRUNE_TO_BYTES:
            break
        if _unlink(path):
            total -= size


def _unlink(path: str) -> bool:
    """Whether the file at `path` is gone: removed, or already gone (another process pruning at once, which counted
    it: not counted as still there, or each of the two would remove as much again, the newest too)."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:  # (open elsewhere on Windows)
        return False
