"""`-o PATH` writes THROUGH the path and leaves nothing half-done (issue 28, item 1; console.py output_file,
trace/redact.py redact_trace_file, docs/limits.md).

- `redact -o` was a temporary file renamed over PATH: a symlink, a FIFO, a device (as root /dev/full)
  became a regular file. Now, as `report -o`: a symlink stays a symlink (its target gets the copy), a FIFO
  is written to, a device is written to (/dev/full: its ENOSPC is the one-line error, exit 5).
- A full disk (ENOSPC while writing: simulated) leaves no partial output, for `report -o` as for `redact -o`:
  a file the command created is removed, an existing regular file is left empty (never deleted).
- `redact` killed by SIGTERM while it redacts leaves no `.dlltrace-redact-*` file (its events wait in an
  anonymous temporary file, which the system deletes with the process).
- A folder is refused in one line."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dlltrace import cli, console, errors

ROOT = Path(__file__).resolve().parent.parent
S5 = ROOT / "fixtures" / "traces" / "s5.jsonl"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}


def main(capsys, *argv: Any) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlltrace: ") and "Traceback" not in err, err
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".dlltrace-redact"))


def reference(capsys, tmp_path: Path, name: str) -> bytes:
    """What `redact -o` writes into a new regular file."""
    ref = tmp_path / "ref" / name
    ref.parent.mkdir()
    code, _, err = main(capsys, "redact", S5, "-o", ref)
    assert code == 0, err
    return ref.read_bytes()


# --- write through -----------------------------------------------------------------------------------
def test_redact_writes_through_a_symlink_which_stays_a_symlink(tmp_path, capsys):
    want = reference(capsys, tmp_path, "r.jsonl.gz")
    target = tmp_path / "target.jsonl.gz"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.jsonl.gz"
    link.symlink_to(target)
    code, out, err = main(capsys, "redact", S5, "-o", link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == want and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl.gz", "ref", "target.jsonl.gz"]


def test_redact_through_a_dangling_symlink_makes_its_target(tmp_path, capsys):
    want = reference(capsys, tmp_path, "r.jsonl")
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "made.jsonl")
    code, _, err = main(capsys, "redact", S5, "-o", link)
    assert code == 0, err
    assert link.is_symlink() and (tmp_path / "made.jsonl").read_bytes() == want


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_redact_writes_into_a_fifo_which_stays_a_fifo(tmp_path, capsys):
    """(Before: the FIFO was replaced by a regular file, and its reader waited for ever.)"""
    want = reference(capsys, tmp_path, "r.jsonl")
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    code, said, err = main(capsys, "redact", S5, "-o", fifo)
    t.join(30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert got == [want]
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["redact", "report"])
def test_a_device_is_written_to_never_replaced_and_its_enospc_is_one_line(tmp_path, capsys, command):
    """-o through a symlink to /dev/full (the link, not /dev/full itself: a regression must not destroy the
    machine's device): the device's ENOSPC is exit 5 in one line; the link is still the link and
    /dev/full still a character device. (Before, redact said "written" and the link became a file.)"""
    link = tmp_path / "full.jsonl"
    link.symlink_to("/dev/full")
    code, out, err = main(capsys, command, S5, "-o", link)
    assert code == errors.EXIT_OUTPUT, (out, err)
    assert "No space left on device" in one_line(err)
    assert link.is_symlink() and os.readlink(link) == "/dev/full"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.jsonl"]


@pytest.mark.parametrize("command, code", [("redact", errors.EXIT_USAGE), ("report", errors.EXIT_OUTPUT)])
def test_a_folder_is_refused_in_one_line(tmp_path, capsys, command, code):
    """(A guard: both refused a folder before too, redact with exit 2, report with 5; kept as they were.)"""
    got, out, err = main(capsys, command, S5, "-o", tmp_path)
    assert got == code and "is a folder" in one_line(err)
    assert list(tmp_path.iterdir()) == []


# --- a full disk ---------------------------------------------------------------------------------------
class FullDisk:
    """What console.py's `open` gives, with a disk that fills after the first write (ENOSPC)."""

    def __init__(self, f: Any):
        self.f, self.writes = f, 0

    def write(self, data: Any) -> int:
        self.writes += 1
        if self.writes > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.f.write(data)

    def __enter__(self) -> "FullDisk":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.f.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)


@pytest.fixture
def full_disk(monkeypatch):
    real_open = open
    monkeypatch.setattr(console, "open", lambda *a, **k: FullDisk(real_open(*a, **k)), raising=False)


@pytest.mark.parametrize("command", ["report", "redact"])
def test_a_full_disk_leaves_no_partial_new_file(tmp_path, capsys, full_disk, command):
    """(Before: report left the part it wrote; redact did not write through console.py at all and said
    "written".)"""
    out = tmp_path / "out.jsonl"
    code, said, err = main(capsys, command, S5, "-o", out)
    assert code == errors.EXIT_OUTPUT, (said, err)
    assert "No space left on device" in one_line(err) and str(out) in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["report", "redact"])
def test_a_full_disk_leaves_an_existing_file_empty_not_deleted(tmp_path, capsys, full_disk, command):
    """An existing regular file is truncated when it is opened (its old content gone either way): on a full
    disk it is left empty, the same file (its mode and links kept), never a partial output, never deleted."""
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"an older report\n" * 100)
    os.chmod(out, 0o600)
    ino = out.stat().st_ino
    code, said, err = main(capsys, command, S5, "-o", out)
    assert code == errors.EXIT_OUTPUT and "No space left on device" in one_line(err)
    assert out.read_bytes() == b"" and out.stat().st_ino == ino and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_a_failure_while_a_report_is_made_leaves_no_partial_file(tmp_path, monkeypatch):
    """Not only ENOSPC: any error after the first piece (here one making the report) removes what was written."""
    out = tmp_path / "r.txt"

    def pieces():
        yield "first\n"
        raise RuntimeError("the report could not be made")

    with pytest.raises(RuntimeError):
        console.write_output(str(out), pieces())
    assert list(tmp_path.iterdir()) == []


# --- SIGTERM --------------------------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_sigterm_while_redacting_leaves_no_temporary_file(tmp_path):
    """`redact` of a big trace, SIGTERM once it writes its temporary file in the output's folder (seen in
    /proc/PID/fd): nothing is left in that folder. (Before: `.dlltrace-redact-body-*` stayed.)"""
    lines = S5.read_bytes().splitlines(keepends=True)
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.write(lines[0])
        for _ in range(150):  # (about 20 MB: seconds of redaction)
            f.writelines(lines[1:])
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "dlltrace", "redact", str(big), "-o", str(out / "r.jsonl.gz")],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = ""
    deadline = time.monotonic() + 120
    try:
        while not seen and proc.poll() is None and time.monotonic() < deadline:
            try:
                fds = os.listdir(f"/proc/{proc.pid}/fd")
            except OSError:
                break
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{proc.pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(str(out) + os.sep):
                    seen = target
            time.sleep(0.01)
        assert seen, "the redaction never wrote into the output's folder (or ended first)"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, proc.stderr.read() if proc.stderr else "")
    assert list(out.iterdir()) == [], seen
