"""What reading a trace may cost (issue 28 item 2; trace/reader.py TraceLimits, docs/limits.md): a gzip bomb of blank
lines, a line of hundreds of megabytes, blank lines without end, too many events -- each a one-line error and exit 3,
read no further, in report, redact and cuda alike; `dlltrace --limit NAME=N` raises a bound."""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADER = json.dumps({"format": "dlltrace-trace", "version": 1, "tool": "test", "platform": "windows"}) + "\n"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(ROOT / "tracer"), **(env or {})}
    e.pop("DLLTRACE_LIMITS", None) if env is None or "DLLTRACE_LIMITS" not in env else None
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], capture_output=True, text=True, env=e, timeout=300)


def gz_bomb(path: Path, filler: bytes, size: int) -> None:
    """A gzip trace: a header, then `size` bytes of `filler` repeated, compressed as they stream (never whole)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = filler * ((1 << 20) // len(filler))
    with open(path, "wb") as f:
        f.write(c.compress(HEADER.encode()))
        for _ in range(size // len(block)):
            f.write(c.compress(block))
        f.write(c.flush())


def one_line_exit_3(r: subprocess.CompletedProcess, words: str) -> None:
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dlltrace: ") and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", [["report"], ["redact", "-o", "{out}"], ["cuda", "--trace"]])
def test_rule_a_gzip_bomb_of_blank_lines_is_refused_early(tmp_path, cmd):
    """1 GiB of blank lines of spaces compresses to about 1 MB: refused as a bomb after the first ~64 MiB, in
    seconds (it ran past two minutes and held 1 GB before)."""
    bomb = tmp_path / "bomb.jsonl.gz"
    gz_bomb(bomb, b" " * 1023 + b"\n", 1 << 30)
    assert bomb.stat().st_size < 4 << 20
    args = [a.format(out=tmp_path / "o.jsonl") for a in cmd]
    r = run(*args, str(bomb))
    one_line_exit_3(r, "a compression bomb, not a trace")
    assert "dlltrace --limit gzip_ratio=N" in r.stderr


def test_rule_a_huge_line_is_refused_without_holding_it(tmp_path):
    """One line of 200 MB (spaces): refused at the line bound, never held whole (a child's peak memory stays far
    below the line)."""
    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:
        f.write(HEADER)
        chunk = " " * (1 << 20)
        for _ in range(200):
            f.write(chunk)
        f.write("\n")
    # (the peak of this process's own memory, VmHWM: ru_maxrss would carry the parent's over fork and exec --
    # pytest's gigabytes in a whole run)
    code = ("import re, sys\nfrom dlltrace.trace.reader import read_trace\nfrom dlltrace.errors import DlltraceError\n"
            "try:\n    read_trace(sys.argv[1])\nexcept DlltraceError as e:\n    print(e.message)\n"
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n")
    r = subprocess.run([sys.executable, "-c", code, str(big)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    message, peak_kib = r.stdout.splitlines()
    assert "a line longer than 67,108,864 bytes" in message and "--limit line_bytes=N" in message, message
    assert int(peak_kib) < 400 * 1024, peak_kib  # (a 200 MB line read whole would cost 400 MB and more)


def test_rule_blank_lines_without_end_and_too_many_events(tmp_path):
    blank = tmp_path / "blank.jsonl"
    blank.write_text(HEADER + "\n" * 1_100_000)
    one_line_exit_3(run("report", str(blank)), "more than 1,000,000 blank lines in a row")
    # events: a low bound given on the command line, before the command; raised again, the trace reads
    t = tmp_path / "t.jsonl"
    lines = [HEADER] + [json.dumps({"ev": "py_import", "pid": 7, "tid": 7, "seq": i + 1, "t": i, "module": "m"}) + "\n"
                        for i in range(50)]
    t.write_text("".join(lines))
    one_line_exit_3(run("--limit", "events=10", "report", str(t)), "more than 10 events")
    r = run("--limit", "events=10", "--limit", "events=100", "report", str(t))
    assert r.returncode != 3 or "more than" not in r.stderr, r.stderr
    bad = run("--limit", "eventz=10", "report", str(t))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "NAME one of trace_bytes" in bad.stderr


def test_rule_limits_parse_units_and_the_environment():
    from dlltrace.trace.reader import TraceLimits, parse_limits

    lim = parse_limits("trace_bytes=2G, line_bytes=512K,events=5")
    assert (lim.trace_bytes, lim.line_bytes, lim.events) == (2 << 30, 512 << 10, 5)
    assert parse_limits("") == TraceLimits()
