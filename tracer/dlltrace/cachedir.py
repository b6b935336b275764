"""Where dlltrace keeps files between runs, and whether what is there can be believed.

- cache_home(): DLLTRACE_CACHE, else $XDG_CACHE_HOME/dlltrace (an absolute XDG_CACHE_HOME only: the XDG spec calls a
  relative one invalid), else ~/.cache/dlltrace. The PE facts (worlds/factscache.py, pe-facts/) and apt's package
  names (worlds/elf.py, apt-pkgnames/) are kept there.
- xdg_cache(): $XDG_CACHE_HOME (absolute), else ~/.cache: the Linux recorder an install without one builds goes into
  its dlltrace/linux (trace/where.py).
- trusted_dir(folder): a file there is believed, or loaded into a traced program (the recorder), only if nobody else
  could have written it: on a POSIX system the folder must be the user's own and writable by nobody else (one of the
  user's own that group or others may write is made private first), and each folder above it owned by the user or
  root and writable by nobody else unless sticky (as /tmp) or, one of the user's own, by a group that is the user's
  alone (a user private group); the folders missing are made (each 0700) only under one that is, and the folder is
  then used as it really is (a link on the way retargeted later does not move it). Not checked on Windows (no owner
  in os.stat).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # (typing is not imported at run time: `dlltrace --version` reads where the recorder is)
if TYPE_CHECKING:
    from typing import Optional, Union


def xdg_cache() -> Path:
    """$XDG_CACHE_HOME when it is absolute, else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME") or ""
    return Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"


def cache_home() -> Path:
    """DLLTRACE_CACHE, else xdg_cache()/dlltrace."""
    return Path(os.environ.get("DLLTRACE_CACHE") or xdg_cache() / "dlltrace")


def trusted_dir(folder: Union[str, Path], make: bool = True) -> Optional[Path]:
    """Whether files kept in `folder` can be believed (the module's docstring): the folder as it really is (no link on
    the way, so that the folder used is the one checked: a link on the way retargeted after the check would not move
    it), or None if it is not to be believed. The folders missing are made only below one that is trusted (not a
    folder of root's in a home sudo kept), each 0700 (made by makedirs, those above the last would be as the umask
    says: 0775 with the umask 002 of a user private group, which the check of the folders above then refuses, every
    run). Always the folder on a system with no file owners (Windows). Without `make`, only whether it would be: no
    folder made or made private (a missing one: the folder as named, when the one it would be made under is trusted;
    what `dlltrace --version` says of the recorder's folder)."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:
        return Path(folder)
    me = geteuid()
    try:
        named = os.path.abspath(folder)
        missing = []
        top = named
        while not os.path.isdir(top):
            parent = os.path.dirname(top)
            if parent == top:
                return None
            missing.append(top)
            top = parent
        if missing:
            if not all(_above_trusted(d, me) for d in _chain(top)):
                return None
            if not make:
                return Path(named)
            for d in reversed(missing):
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:  # (another process made it first: checked below, as any folder)
                    pass
        real = os.path.realpath(named)
        st = os.stat(real)
        if st.st_uid != me or not stat.S_ISDIR(st.st_mode):
            return None
        if st.st_mode & 0o022 and make:  # the user's own, that others may write (a umask of 002): made private
            os.chmod(real, stat.S_IMODE(st.st_mode) & ~0o022)
        # the folders above it, as named and as they really are (a link in a folder others may write, retargeted,
        # would move the cache elsewhere)
        for start in (named, real):
            if not all(_above_trusted(d, me) for d in _chain(os.path.dirname(start))):
                return None
        return Path(real)
    except (OSError, ValueError):
        return None


def _chain(path: str) -> list[str]:
    """`path` and each folder above it."""
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


def _above_trusted(path: str, me: int) -> bool:
    """Whether a folder above the cache lets nobody else replace what is below it: owned by the user or root and
    writable by nobody else, unless sticky (/tmp); one of the user's own that its group may write is, when that group
    is the user's alone (_private_group: the ~/.cache that pip made 0775 under a user private group's umask 002)."""
    st = os.stat(path)
    if st.st_uid not in (me, 0):
        return False
    if not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX:
        return True
    return not st.st_mode & 0o002 and st.st_uid == me and _private_group(st.st_gid, me)


def _private_group(gid: int, me: int) -> bool:
    """Whether group `gid` is the user's alone (a user private group, as Fedora and Debian make one for each user):
    the user's primary group, with no other member and no other user's primary group (OpenSSH's test, on Debian, of
    a group-writable home). Asked only of a folder its group may write."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(me)
        if user.pw_gid != gid or any(m != user.pw_name for m in grp.getgrgid(gid).gr_mem):
            return False
        return all(u.pw_uid == me for u in pwd.getpwall() if u.pw_gid == gid)
    except (ImportError, KeyError, OSError):
        return False


