"""The PE facts cache of files on disk (worlds/factscache.py FactsCache.host_facts): kept by the file's identity once
it has settled, read again when the file changes, a damaged or foreign entry a miss; used by `run`'s facts
(diagnosis/collect.py) and `deps`/`check` of a folder (worlds/static.folder_files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tinype import tiny_dll

import dlltrace.worlds.factscache as factscache
from dlltrace.model import PEFacts
from dlltrace.worlds.factscache import FactsCache, host_key, settled

ROOT = Path(__file__).resolve().parent.parent


def _st(mtime: float, ctime: float) -> os.stat_result:
    return SimpleNamespace(st_mtime_ns=int(mtime * 1e9), st_ctime_ns=int(ctime * 1e9))  # type: ignore[return-value]


def test_settled():
    now = 1_000_000.0
    assert settled(_st(now - 3, now - 3), now)
    assert not settled(_st(now - 1, now - 1), now)  # (within HOST_SETTLED: a change in the clock's step could hide)
    assert not settled(_st(now - 60, now - 0.5), now)  # (an old modification time set back, its change time new)
    assert not settled(_st(now + 60, now + 60), now)  # (from the future: a clock set back)


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A cache in tmp_path/cache that keeps every file (as if each had settled), and a DLL exporting `f`."""
    monkeypatch.setattr(factscache, "settled", lambda st, now: True)
    dll = tmp_path / "a.dll"
    dll.write_bytes(tiny_dll("a.dll"))
    return FactsCache(tmp_path / "cache"), str(dll)


def _no_reading(monkeypatch):
    def refuse(path):
        raise AssertionError(f"{path} was read, not taken from the cache")

    monkeypatch.setattr(factscache, "read_pe_facts", refuse)


def test_host_facts_kept_and_read_back(kept, monkeypatch):
    cache, dll = kept
    first = cache.host_facts(dll)
    assert isinstance(first, PEFacts) and first.exports == frozenset({"f"})
    (entry,) = Path(cache.folder).glob("*.json")
    assert entry.name == host_key(dll, os.stat(dll)) + ".json"
    assert json.loads(entry.read_text())["path"] == dll
    _no_reading(monkeypatch)
    assert cache.host_facts(dll) == first


def test_a_file_changed_in_place_is_read_again(kept):
    """The same size, the same file id, even its modification time put back: its change time moved, so its key
    did (and a file is kept only once settled, so the change cannot fall in the step of the kept version)."""
    cache, dll = kept
    before = os.stat(dll)
    assert cache.host_facts(dll).exports == frozenset({"f"})
    data = Path(dll).read_bytes()
    at = data.index(b"f\0", data.index(b"a.dll\0"))  # the export's name
    time.sleep(0.05)  # (past the file system clock's step)
    with open(dll, "r+b") as f:
        f.seek(at)
        f.write(b"g")
    os.utime(dll, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(dll)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert cache.host_facts(dll).exports == frozenset({"g"})


def test_a_fresh_file_is_not_kept(tmp_path):
    dll = tmp_path / "a.dll"
    dll.write_bytes(tiny_dll("a.dll"))
    cache = FactsCache(tmp_path / "cache")
    assert cache.host_facts(str(dll)).exports == frozenset({"f"})
    assert not list(tmp_path.glob("cache/*.json"))


def test_a_damaged_or_foreign_entry_is_a_miss(kept):
    cache, dll = kept
    key = host_key(dll, os.stat(dll))
    entry = Path(cache.folder) / f"{key}.json"
    entry.parent.mkdir(parents=True)
    for bad in ("{not json", json.dumps({"path": dll, "pe": {"machine": 5}}), json.dumps([1, 2]),
                json.dumps({"path": dll + "x", "pe": {"machine": "x86", "exports": ["other"]}})):
        entry.write_text(bad)
        got = cache.host_facts(dll)
        assert isinstance(got, PEFacts) and got.exports == frozenset({"f"}) and got.machine == "x64", bad
        assert json.loads(entry.read_text())["path"] == dll  # (and kept right again)


def test_a_cache_that_cannot_be_written_costs_only_time(kept, tmp_path):
    _, dll = kept
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    got = FactsCache(blocked / "pe-facts").host_facts(dll)
    assert isinstance(got, PEFacts) and got.exports == frozenset({"f"})


def test_no_cache_reads_the_file(kept, monkeypatch):
    _, dll = kept
    assert FactsCache(None).host_facts(dll).exports == frozenset({"f"})
    _no_reading(monkeypatch)
    with pytest.raises(AssertionError):
        FactsCache(None).host_facts(dll)


def test_deps_of_a_folder_keeps_facts_unless_no_cache(tmp_path, monkeypatch):
    """`deps FOLDER` reads its files through the cache (--no-cache: neither read nor written)."""
    from dlltrace.diagnosis.static import open_target

    monkeypatch.setattr(factscache, "settled", lambda st, now: True)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.dll").write_bytes(tiny_dll("a.dll", ["b.dll"]))
    (pkg / "b.dll").write_bytes(tiny_dll("b.dll"))
    monkeypatch.setenv("DLLTRACE_CACHE", str(tmp_path / "c"))

    def facts(use_cache: bool) -> list:
        target = open_target(str(pkg), use_cache=use_cache)
        return [f.read() for f in target.files]

    none = facts(False)
    assert not (tmp_path / "c").exists()
    assert facts(True) == none
    assert len(list((tmp_path / "c" / "pe-facts").glob("*.json"))) == 2
    _no_reading(monkeypatch)
    assert facts(True) == none


def test_run_facts_from_the_cache_are_the_same(tmp_path, monkeypatch):
    """collect_facts (the end of `dlltrace run`) gives the same file events from kept facts as from the files,
    and then reads no file (nor imports pefile: tested in a process of its own)."""
    from test_wow64 import X86_PROBES, _x86_trace, x86_prefix  # (a 32-bit process's trace over a prefix in tmp_path)
    from dlltrace.diagnosis import collect
    from dlltrace.trace.reader import read_trace
    from dlltrace.worlds.live import wine_map

    monkeypatch.setattr(factscache, "settled", lambda st, now: True)
    monkeypatch.setenv("DLLTRACE_CACHE", str(tmp_path / "cache"))
    prefix = x86_prefix(tmp_path)
    trace = _x86_trace(tmp_path, X86_PROBES)
    first = collect.collect_facts(read_trace(trace), wine_map(prefix))
    assert sum(1 for e in first if e.get("pe")) >= 2
    assert len(list((tmp_path / "cache" / "pe-facts").glob("*.json"))) == sum(1 for e in first if e.get("pe"))
    code = (f"import sys; sys.path[:0] = {[str(ROOT / 'tracer'), str(ROOT / 'tests')]!r}\n"
            "import dlltrace.worlds.factscache as fc, json\n"
            "fc.read_pe_facts = lambda p: (_ for _ in ()).throw(AssertionError(p))\n"
            "from dlltrace.diagnosis import collect\n"
            "from dlltrace.trace.reader import read_trace\n"
            "from dlltrace.worlds.live import wine_map\n"
            f"events = collect.collect_facts(read_trace({str(trace)!r}), wine_map({str(prefix)!r}))\n"
            "print(json.dumps({'pefile': 'pefile' in sys.modules, 'events': events}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DLLTRACE_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr[-2000:]
    again = json.loads(out.stdout)
    assert again["pefile"] is False
    assert again["events"] == json.loads(json.dumps(first))
    # `run --no-cache` (append_facts / collect_facts use_cache=False): the same events, nothing read from or kept
    monkeypatch.setenv("DLLTRACE_CACHE", str(tmp_path / "none"))
    assert collect.collect_facts(read_trace(trace), wine_map(prefix), use_cache=False) == first
    assert not (tmp_path / "none").exists()
    from dlltrace.commands import run
    import argparse

    parser = argparse.ArgumentParser()
    run.configure_parser(parser)
    assert parser.parse_args(["--no-cache", "--", "x.exe"]).no_cache is True


def test_a_wheel_members_damaged_entry_is_a_miss(tmp_path):
    """FactsCache.get (a wheel member's facts by CRC-32 and size) checks what it reads: an entry of the wrong shape
    is no facts (it was taken as checked: a machine of 5 came back as facts)."""
    cache = FactsCache(tmp_path)
    member = SimpleNamespace(filename="pkg/a.dll", CRC=0x1234, file_size=99)
    key = cache.key(member)
    facts = PEFacts(machine="x64", exports=frozenset({"f"}))
    cache.put(key, facts)
    assert cache.get(key) == facts
    for bad in ('{"machine": 5}', '{"machine": "x64", "exports": [1]}', "[]", "{"):
        (tmp_path / f"{key}.json").write_text(bad)
        assert cache.get(key) is None, bad


def _counting(monkeypatch) -> list:
    """read_pe_facts, counting the files it reads."""
    read: list = []
    real = factscache.read_pe_facts

    def counted(path):
        read.append(path)
        return real(path)

    monkeypatch.setattr(factscache, "read_pe_facts", counted)
    return read


def test_an_entry_that_is_no_regular_file_is_a_miss(kept):
    """An entry that is a FIFO is a miss, not an open that waits for a writer forever; one that is a device
    (a link to /dev/zero) not a read without end (tested in a process of its own, its memory bounded: the read
    filled it)."""
    cache, dll = kept
    folder = Path(cache.folder)
    folder.mkdir()
    code = (f"import sys, os, resource; sys.path[:0] = {[str(ROOT / 'tracer')]!r}\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "import dlltrace.worlds.factscache as fc\n"
            f"folder, dll = {str(folder)!r}, {dll!r}\n"
            "key = fc.host_key(dll, os.stat(dll))\n"
            "fc.settled = lambda st, now: False\n"
            "entry = os.path.join(folder, key + '.json')\n"
            "for make in (os.mkfifo, lambda e: os.symlink('/dev/zero', e)):\n"
            "    make(entry)\n"
            "    assert fc.FactsCache(fc.Path(folder)).host_facts(dll).exports == frozenset({'f'})\n"
            "    os.unlink(entry)\n"
            "print('ok')\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a cache entry that is a FIFO waited for a writer")
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr[-2000:]


def test_a_deeply_nested_entry_is_a_miss(kept):
    cache, dll = kept
    entry = Path(cache.folder) / f"{host_key(dll, os.stat(dll))}.json"
    entry.parent.mkdir()
    for bad in ("[" * 100_000, '{"path": %s, "pe": %s}' % (json.dumps(dll), "[" * 100_000 + "]" * 100_000)):
        entry.write_text(bad)
        assert cache.host_facts(dll).exports == frozenset({"f"})  # (not a RecursionError)
    member = SimpleNamespace(filename="pkg/a.dll", CRC=1, file_size=2)
    (Path(cache.folder) / f"{cache.key(member)}.json").write_text("{" * 100_000)
    assert cache.get(cache.key(member)) is None


def test_an_entry_larger_than_any_facts_is_not_read(kept, monkeypatch):
    cache, dll = kept
    read = _counting(monkeypatch)
    cache.host_facts(dll)
    (entry,) = Path(cache.folder).glob("*.json")
    assert cache.host_facts(dll) and len(read) == 1  # (kept, and read back)
    monkeypatch.setattr(factscache, "MAX_ENTRY_BYTES", entry.stat().st_size - 1)
    assert cache.host_facts(dll).exports == frozenset({"f"}) and len(read) == 2


def test_a_failed_write_leaves_no_temporary_file(kept):
    """The entry's name taken by a folder: the entry written aside cannot replace it, and is removed (it was left,
    one more each run)."""
    cache, dll = kept
    entry = Path(cache.folder) / f"{host_key(dll, os.stat(dll))}.json"
    entry.mkdir(parents=True)
    assert cache.host_facts(dll).exports == frozenset({"f"})
    assert sorted(p.name for p in Path(cache.folder).iterdir()) == [entry.name]


def test_facts_are_kept_only_for_the_file_that_was_read(tmp_path, monkeypatch):
    """A link retargeted while the file is read (between the stat that makes the key and the read): the facts read
    are the new target's, and must not be kept under the old target's key (they were: once the link pointed back,
    the old target's key found the other file's facts)."""
    monkeypatch.setattr(factscache, "settled", lambda st, now: True)
    old, new = tmp_path / "old.dll", tmp_path / "new.dll"
    old.write_bytes(tiny_dll("a.dll"))
    data = tiny_dll("a.dll")
    at = data.index(b"f\0", data.index(b"a.dll\0"))  # the export's name
    new.write_bytes(data[:at] + b"g" + data[at + 1:])
    link = tmp_path / "a.dll"
    link.symlink_to(old)
    real = factscache.read_pe_facts

    def retargeted_while_read(path):
        link.unlink()
        link.symlink_to(new)
        return real(path)

    cache = FactsCache(tmp_path / "cache")
    monkeypatch.setattr(factscache, "read_pe_facts", retargeted_while_read)
    assert cache.host_facts(str(link)).exports == frozenset({"g"})  # (what was there when it was read)
    monkeypatch.setattr(factscache, "read_pe_facts", real)
    link.unlink()
    link.symlink_to(old)
    assert cache.host_facts(str(link)).exports == frozenset({"f"})


def test_no_kept_facts_of_a_file_that_cannot_be_read(kept, monkeypatch):
    """A cache shared by two users (DLLTRACE_CACHE): the facts one kept are not given to the other if it cannot
    read the file (tried as nobody: deps FOLDER said 'loads' from the cache, 'access denied' with --no-cache).
    Here (as root, who reads anything) the file's unreadability and its read are made up."""
    from dlltrace.model import PEError

    cache, dll = kept
    assert isinstance(cache.host_facts(dll), PEFacts)  # (kept by whoever could read it)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == dll else real_access(p, mode, **kw))
    monkeypatch.setattr(factscache, "read_pe_facts", lambda p: PEError("unreadable", "Permission denied"))
    assert cache.host_facts(dll) == PEError("unreadable", "Permission denied")


def test_a_link_planted_at_the_temporary_name_is_not_followed(kept):
    """In a cache folder others can write (DLLTRACE_CACHE under /tmp), a link at the name an entry is first written
    to (predictable: the process and thread) must not make the write land in the file it points at (it did)."""
    import _thread

    cache, dll = kept
    victim = Path(dll).parent / "victim.txt"
    victim.write_text("keep me")
    key = host_key(dll, os.stat(dll))
    Path(cache.folder).mkdir()
    (Path(cache.folder) / f"{key}.tmp{os.getpid()}-{_thread.get_ident()}").symlink_to(victim)
    assert cache.host_facts(dll).exports == frozenset({"f"})
    assert victim.read_text() == "keep me"
    assert [p.name for p in Path(cache.folder).iterdir()] == []  # (the link removed; kept the next time)
    cache.host_facts(dll)
    assert sorted(p.name for p in Path(cache.folder).iterdir()) == [factscache.STAMP, f"{key}.json"]


def _entries(folder) -> list[str]:
    return sorted(p.name for p in Path(folder).glob("*.json"))


def test_a_cache_folder_another_user_owns_is_not_used(kept):
    """Entries another user could have written (a DLLTRACE_CACHE folder made by someone else, say under /tmp) are not
    believed: each would be taken as a DLL's imports and exports. The cache is then not used at all."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the folder to another user (CI runs as root)")
    cache, dll = kept
    Path(cache.folder).mkdir()
    forged = Path(cache.folder) / f"{host_key(dll, os.stat(dll))}.json"
    forged.write_text(json.dumps({"path": dll, "pe": {"machine": "x64", "is_dll": True, "imports": [],
                                                       "exports": ["forged"]}}))
    os.chown(cache.folder, 12345, 12345)
    assert cache.host_facts(dll).exports == frozenset({"f"})  # (read, not the entry's word)
    assert not cache.usable()
    os.chown(cache.folder, 0, 0)
    assert not FactsCache(Path(cache.folder)).host_facts(dll).exports == frozenset({"f"})  # (believed once trusted)


def test_a_cache_under_a_folder_others_can_write_is_not_used(kept, tmp_path):
    """A folder above the cache that others may write and that is not sticky (as /tmp is): the cache folder could be
    renamed away and replaced with one of theirs. Under a sticky one (/tmp) it is used."""
    _, dll = kept
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    cache = FactsCache(open_dir / "pe-facts")
    assert cache.host_facts(dll).exports == frozenset({"f"}) and not cache.usable()
    assert _entries(cache.folder) == []
    os.chmod(open_dir, 0o777 | 0o1000)  # sticky
    cache = FactsCache(open_dir / "pe-facts")
    cache.host_facts(dll)
    assert cache.usable() and len(_entries(cache.folder)) == 1


def test_the_users_own_cache_folder_that_others_may_write_is_made_private(kept):
    cache, dll = kept
    Path(cache.folder).mkdir()
    os.chmod(cache.folder, 0o777)
    cache.host_facts(dll)
    assert cache.usable() and len(_entries(cache.folder)) == 1
    assert os.stat(cache.folder).st_mode & 0o777 == 0o755


def test_a_made_cache_folder_is_private(kept):
    cache, dll = kept
    cache.host_facts(dll)
    assert os.stat(cache.folder).st_mode & 0o777 == 0o700


def test_the_cache_is_pruned_oldest_first_at_most_once_a_day(kept, monkeypatch):
    """It grew without end (a new entry for every version of every file); now past MAX_CACHE_BYTES the oldest written
    go until it is under PRUNE_TO_BYTES, checked at most once a PRUNE_EVERY."""
    cache, dll = kept
    folder = Path(cache.folder)
    folder.mkdir()
    now = time.time()
    for i in range(10):  # 10 entries of 1,000 bytes, the oldest first
        e = folder / f"old{i}.json"
        e.write_bytes(b" " * 1000)
        os.utime(e, (now - 1000 + i, now - 1000 + i))
    stale = folder / "x.tmp1-2"
    stale.write_bytes(b"half")
    os.utime(stale, (now - 2 * factscache.STALE_TMP, now - 2 * factscache.STALE_TMP))
    fresh_tmp = folder / "y.tmp3-4"
    fresh_tmp.write_bytes(b"being written")
    monkeypatch.setattr(factscache, "MAX_CACHE_BYTES", 8000)
    monkeypatch.setattr(factscache, "PRUNE_TO_BYTES", 5000)
    cache.host_facts(dll)  # (a write: the first of this process prunes)
    kept_names = _entries(folder)
    new = f"{host_key(dll, os.stat(dll))}.json"
    new_size = (folder / new).stat().st_size
    gone = 10 - sum(1 for n in kept_names if n.startswith("old"))
    assert new in kept_names and [f"old{i}.json" for i in range(gone, 10)] == [n for n in kept_names if n != new]
    assert sum((folder / n).stat().st_size for n in kept_names) <= 5000 < 1000 + sum(
        (folder / n).stat().st_size for n in kept_names)  # (no more gone than needed)
    assert not stale.exists() and fresh_tmp.exists()
    assert new_size > 0
    # within a day no other process prunes: more entries stay
    for i in range(10):
        (folder / f"more{i}.json").write_bytes(b" " * 1000)
    other = Path(dll).with_name("b.dll")
    other.write_bytes(tiny_dll("b.dll"))
    FactsCache(folder).host_facts(str(other))
    assert sum(1 for n in _entries(folder) if n.startswith("more")) == 10
    # a day later it does
    os.utime(folder / factscache.STAMP, (now - factscache.PRUNE_EVERY - 1,) * 2)
    third = Path(dll).with_name("c.dll")
    third.write_bytes(tiny_dll("c.dll"))
    FactsCache(folder).host_facts(str(third))
    assert sum((folder / n).stat().st_size for n in _entries(folder)) <= 5000


def test_the_folders_made_for_the_cache_are_private_under_a_umask_of_002(kept, tmp_path):
    """With the umask 002 of a user private group (Fedora's, Ubuntu's), makedirs made the folders above the cache
    folder (~/.cache/dlltrace) 0775, which the check of the folders above then refused: the cache was never used,
    every run. Each folder made is 0700."""
    _, dll = kept
    old = os.umask(0o002)
    try:
        cache = FactsCache(tmp_path / "home" / ".cache" / "dlltrace" / "pe-facts")
        cache.host_facts(dll)
    finally:
        os.umask(old)
    assert cache.usable() and len(_entries(cache.folder)) == 1
    for d in ("home", "home/.cache", "home/.cache/dlltrace", "home/.cache/dlltrace/pe-facts"):
        assert os.stat(tmp_path / d).st_mode & 0o777 == 0o700, d


def test_no_folder_is_made_under_one_that_is_not_trusted(kept, tmp_path):
    """The folders above are checked before any is made: none is left in a folder the cache will not use (root's
    folders in a user's home that sudo kept, or one others may write)."""
    _, dll = kept
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    cache = FactsCache(open_dir / "dlltrace" / "pe-facts")
    assert cache.host_facts(dll).exports == frozenset({"f"}) and not cache.usable()
    assert list(open_dir.iterdir()) == []


def test_the_folder_used_is_the_one_checked(kept, tmp_path):
    """A link on the way to the cache folder, retargeted once it was checked (a link of another user's in /tmp), does
    not move the cache: the folder is used as it really was when checked."""
    cache_dir, dll = kept
    mine = tmp_path / "mine"
    (mine / "pe-facts").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(mine)
    cache = FactsCache(link / "pe-facts")
    assert cache.usable()
    theirs = tmp_path / "theirs"
    (theirs / "pe-facts").mkdir(parents=True)
    forged = theirs / "pe-facts" / f"{host_key(dll, os.stat(dll))}.json"
    forged.write_text(json.dumps({"path": dll, "pe": {"machine": "x64", "is_dll": True, "imports": [],
                                                       "exports": ["forged"]}}))
    link.unlink()
    link.symlink_to(theirs)
    assert cache.host_facts(dll).exports == frozenset({"f"})
    assert len(_entries(mine / "pe-facts")) == 1


def test_a_folder_above_that_only_the_users_private_group_may_write_is_trusted(kept, tmp_path):
    """A ~/.cache that pip made 0775 under the umask 002 of a user private group (Fedora's, Ubuntu's): refused, the
    cache was never used. Its group is the user's alone: nobody else can write it. A group with another in it, or
    none's, is refused still."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the folder to a group (CI runs as root)")
    import grp
    import pwd

    _, dll = kept
    me = pwd.getpwuid(0)
    if me.pw_gid != 0 or grp.getgrgid(0).gr_mem or any(u.pw_gid == 0 and u.pw_uid for u in pwd.getpwall()):
        pytest.skip("root's group is not root's alone here")
    dot_cache = tmp_path / "home" / ".cache"
    dot_cache.mkdir(parents=True)
    os.chmod(dot_cache, 0o775)
    os.chown(dot_cache, 0, 0)
    cache = FactsCache(dot_cache / "dlltrace" / "pe-facts")
    cache.host_facts(dll)
    assert cache.usable() and len(_entries(cache.folder)) == 1
    os.chown(dot_cache, 0, 54321)  # (a group that is not root's: no such group, or one of others)
    assert not FactsCache(dot_cache / "dlltrace" / "pe-facts").usable()
    os.chown(dot_cache, 0, 0)
    os.chmod(dot_cache, 0o777)  # (others may write it: whatever the group)
    assert not FactsCache(dot_cache / "dlltrace" / "pe-facts").usable()


def test_two_processes_pruning_at_once_remove_no_more_than_one(tmp_path, monkeypatch):
    """Two processes that read the stamp before either renewed it prune at once, from the same listing: the entries
    the other removed first were not counted as gone, so this one went on to the newest: all ten went, not five."""
    folder = tmp_path / "pe-facts"
    folder.mkdir()
    now = time.time()
    for i in range(10):
        e = folder / f"old{i}.json"
        e.write_bytes(b" " * 1000)
        os.utime(e, (now - 1000 + i, now - 1000 + i))
    monkeypatch.setattr(factscache, "MAX_CACHE_BYTES", 8000)
    monkeypatch.setattr(factscache, "PRUNE_TO_BYTES", 5000)
    real_unlink = os.unlink

    def other_process_first(path, *a, **k):  # (the other process removed the five oldest between listing and here)
        if Path(path).name in {f"old{i}.json" for i in range(5)}:
            if Path(path).exists():
                real_unlink(path)
            raise FileNotFoundError(path)
        return real_unlink(path, *a, **k)

    monkeypatch.setattr(factscache.os, "unlink", other_process_first)
    factscache.prune(folder, now)
    assert _entries(folder) == [f"old{i}.json" for i in range(5, 10)]


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    """The XDG spec: a relative XDG_CACHE_HOME is invalid and ignored (it was used, relative to wherever dlltrace ran)."""
    monkeypatch.delenv("DLLTRACE_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel/cache")
    assert factscache.default_cache_dir() == tmp_path / ".cache" / "dlltrace" / "pe-facts"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert factscache.default_cache_dir() == tmp_path / "xdg" / "dlltrace" / "pe-facts"
