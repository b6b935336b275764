"""`dlltrace run --max-size` (native/common/jsonw.h, trace/capped.py) and compressed traces
(trace/files.py: spill_path, finish_trace): a capped trace says exactly what it dropped, the default
cap keeps real runs whole, a compressed trace reads like a plain one, and neither a crash of the
program nor a killed `dlltrace run` loses the events written before it."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import winetools
from dlltrace import errors
from dlltrace.commands.run import parse_size
from dlltrace.trace.capped import Capped, capped_line, cut_by_cap
from dlltrace.render.summary import produce
from dlltrace.trace import files, launch
from dlltrace.trace.reader import Load, read_trace
from test_bootstrap import windows_python  # noqa: F401  (fixture: a Windows CPython 3.13 from PyPI)
from test_shim import HOST, shim_env, w  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parent.parent
dlltrace = winetools.dlltrace
LOADS = 3000  # timeloads: LoadLibraryExW calls alternating a.dll (loads) and nope.dll (126)


def timeloads(tmp_path: Path, out: str, *opts: str, n: int = LOADS):
    return dlltrace("run", "--wine", *opts, "-o", out, "--", HOST, "timeloads", str(n), w("lib", "a.dll"),
                    "C:\\nope.dll", cwd=tmp_path)


def lines_of(path: Path) -> list[dict]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(x) for x in raw.decode("utf-8").splitlines()[1:] if x.strip()]


# ---------------------------------------------------------------------------------------------- the cap
@pytest.mark.wine
def test_max_size_drops_past_the_cap_and_counts_every_dropped_line(shim_env, tmp_path):
    r = timeloads(tmp_path, "c.jsonl", "--max-size", "200K")
    assert r.returncode == 0, r.stderr
    events = lines_of(tmp_path / "c.jsonl")
    (cap,) = [e for e in events if e["ev"] == "capped"]
    (stats,) = [e for e in events if e["ev"] == "stats"]
    assert cap["max_size"] == 200 * 1024
    # every line the program's process made is either in the file or counted as dropped: none lost
    mine = [e for e in events if e["pid"] == stats["pid"] and e["seq"]]
    assert len(mine) == stats["written"] + 1  # (+ the stats line itself)
    assert stats["written"] + stats["dropped"] == stats["seq"] - 1 and stats["lost"] == 0
    assert sum(cap["dropped"].values()) == stats["dropped"] > 0
    begins = [e for e in events if e["ev"] == "load_begin"]
    assert len(begins) + cap["dropped"]["load_begin"] == LOADS
    # probes stop first (at 90% of the cap): the loads written last have no probes
    assert cap["dropped"]["probe"] > 0
    # the writers stayed within the cap (the facts dlltrace appends at the end come on top)
    head = (tmp_path / "c.jsonl").read_bytes()
    written = len(head) - sum(len(json.dumps(e, ensure_ascii=False)) + 1 for e in events if e["ev"] == "file")
    assert written <= 200 * 1024 + 4096
    # the summary, the report and its JSON say what was dropped
    assert "The trace reached its size cap of 200 KB" in r.stderr
    rep = json.loads(produce(read_trace(tmp_path / "c.jsonl"), "json"))
    assert rep["capped"]["dropped"] == {k: v for k, v in cap["dropped"].items() if v}
    assert f"{stats['dropped']:,} events after it were dropped" in rep["capped"]["text"]
    # the loads the cap cut are not compared with the model (their probes are missing, not wrong)
    assert not [c for c in rep["calls"] if c["disagreements"]]


@pytest.mark.wine
def test_default_cap_keeps_a_run_whole(shim_env, tmp_path):
    """The default (1 GB) is far above a real run: this one (3,000 loads, 2.4 MB) is written whole,
    and its compressed trace is the default output."""
    r = timeloads(tmp_path, "t.jsonl.gz")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "t.jsonl.gz.part").exists()  # the spill is gone
    events = lines_of(tmp_path / "t.jsonl.gz")
    assert not [e for e in events if e["ev"] == "capped"]
    assert len([e for e in events if e["ev"] == "load_begin"]) == LOADS
    (stats,) = [e for e in events if e["ev"] == "stats"]
    assert stats["dropped"] == 0 and stats["lost"] == 0
    assert "trace saved to t.jsonl.gz" in r.stderr


@pytest.mark.parametrize("text, size", [("500M", 500 << 20), ("2G", 2 << 30), ("1.5g", 3 << 29), ("64KiB", 64 << 10),
                                        ("1000000", 1000000), ("0", 0), ("none", 0), (" 300 MB ", 300 << 20)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-5M", "10X", "1K", ""])
def test_bad_max_size_is_one_line_and_usage_code(text, tmp_path):
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "--wine", f"--max-size={text}", "--", "x.exe"],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == errors.EXIT_USAGE, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dlltrace: run: --max-size") and "Traceback" not in r.stderr


def test_capped_words_and_which_loads_the_cap_cut():
    cap = Capped(max_size=200 << 10, dropped={"load_begin": 1, "probe": 4192, "other": 2}, dropped_bytes=2 << 20,
                 first_t=1000)
    assert capped_line(cap).startswith("The trace reached its size cap of 200 KB (dlltrace run --max-size): "
                                       "4,195 events after it were dropped (1 load, 4,192 probes, 2 other events; 2 MB).")

    def load(t, end_t, *probe_ts):
        from dlltrace.trace.reader import Probe

        ld = Load(seq=1, pid=1, tid=1, t=t, api="LoadLibraryW", name="a.dll", flags=0, parent=None, depth=0, ctx=None,
                  caller=None, end=None if end_t is None else {"t": end_t, "result": "0x1"})
        ld.probes = [Probe(seq=2, pid=1, tid=1, t=p, load=1, op="open", status=0) for p in probe_ts]
        return ld

    assert not cut_by_cap(cap, load(10, 20, 15))       # wholly before the first dropped line
    assert cut_by_cap(cap, load(10, 1000))             # it ended when lines were being dropped
    assert cut_by_cap(cap, load(10, None))             # its end was dropped (or it never ended)
    outer = load(10, 999)
    outer.children = [load(20, 1200)]                 # a nested load past the cap
    assert cut_by_cap(cap, outer)
    assert not cut_by_cap(None, load(10, None))        # not a capped trace: nothing is cut


# ---------------------------------------------------------------------------------------------- compression
def test_default_trace_name_is_compressed_and_spills_beside_it(tmp_path):
    assert launch.default_trace_name(["python"]).endswith(".jsonl.gz")
    out = tmp_path / "t.jsonl.gz"
    assert launch.spill_path(out) == tmp_path / "t.jsonl.gz.part"
    assert launch.spill_path(tmp_path / "t.jsonl") == tmp_path / "t.jsonl"  # -o x.jsonl: plain, written in place


def test_finish_trace_compresses_the_whole_spill_and_removes_it(tmp_path):
    spill = tmp_path / "t.jsonl.gz.part"
    body = "".join(json.dumps({"ev": "warning", "seq": i, "pid": 1, "tid": 1, "t": i, "message": "ü"}) + "\n"
                   for i in range(1, 5000))
    spill.write_text('{"format": "dlltrace-trace", "version": 1}\n' + body, encoding="utf-8")
    before = spill.read_bytes()
    out = files.finish_trace(spill, tmp_path / "t.jsonl.gz")
    assert out == tmp_path / "t.jsonl.gz" and not spill.exists()
    assert gzip.decompress(out.read_bytes()) == before
    assert out.stat().st_size < len(before) / 5
    # the same bytes every time (no name, no time in the gzip header)
    spill.write_bytes(before)
    assert files.finish_trace(spill, tmp_path / "u.jsonl.gz").read_bytes() == out.read_bytes()


def test_finish_trace_keeps_the_spill_when_it_cannot_compress(tmp_path, capsys):
    spill = tmp_path / "t.jsonl.gz.part"
    spill.write_bytes(b'{"format": "dlltrace-trace", "version": 1}\n')
    (tmp_path / "sub").mkdir()
    where = files.finish_trace(spill, tmp_path / "sub")  # a folder: cannot be replaced by a file
    assert where == spill and spill.exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not compress the trace" in err and str(spill) in err


@pytest.mark.wine
def test_a_crash_mid_run_loses_nothing_in_the_compressed_trace(shim_env, tmp_path):
    """The program crashes after its loads: the compressed trace holds every event the plain one does."""
    ops = ["load", "C:\\nope.dll", "0", "loadw", w("lib", "a.dll"), "load", w("chain", "top.dll"), "0x1100", "crash"]
    plain = dlltrace("run", "--wine", "-o", "p.jsonl", "--", HOST, *ops, cwd=tmp_path)
    packed = dlltrace("run", "--wine", "-o", "p.jsonl.gz", "--", HOST, *ops, cwd=tmp_path)
    assert plain.returncode == packed.returncode == 0xC0000005 & 0xFF
    a, b = read_trace(tmp_path / "p.jsonl"), read_trace(tmp_path / "p.jsonl.gz")
    shape = lambda t: [(e["ev"], e.get("api"), e.get("name"), e.get("error")) for e in t.events if e["ev"] != "file"]
    assert shape(a) == shape(b) and [ld.error for ld in b.loads()] == [126, 0, 126]
    assert b.exit_code(b.pids[0]) == 0xC0000005
    facts = lambda t: [(c["name"], c["error"], (c.get("leaf") or {}).get("name"), (c["verdict"] or {}).get("reason"))
                       for c in json.loads(produce(t, "json"))["calls"]] + [json.loads(produce(t, "json"))["ending"]]
    assert facts(a) == facts(b) and len(facts(a)) >= 2  # (the two runs' pids differ)


@pytest.mark.wine
def test_a_killed_dlltrace_run_leaves_a_readable_spill(shim_env, tmp_path):
    """SIGKILL of `dlltrace run` itself (nothing can run at its end): the launcher and the program end
    with it (PR_SET_PDEATHSIG, the job), and the plain spill holds every whole line written until then."""
    env = winetools.wine_env(PYTHONPATH=str(ROOT / "tracer"))
    proc = subprocess.Popen([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", "k.jsonl.gz", "--", HOST,
                             "timeloads", "400000", w("lib", "a.dll"), "C:\\nope.dll"], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spill = tmp_path / "k.jsonl.gz.part"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not spill.exists() or spill.stat().st_size < 300_000):
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    time.sleep(2)  # the launcher and the program end with it
    assert spill.exists() and not (tmp_path / "k.jsonl.gz").exists()
    size = spill.stat().st_size
    time.sleep(1)
    assert spill.stat().st_size == size, "the traced program went on writing after dlltrace run was killed"
    t = read_trace(spill)
    assert len(t.loads()) > 300  # every whole line, up to the last
    assert all(not w_.startswith(f"{spill}: line") or "truncated last line" in w_ for w_ in t.warnings)
    r = dlltrace("report", "--json", str(spill), cwd=tmp_path)
    assert r.returncode in (0, errors.EXIT_BAD_TRACE) and "Traceback" not in r.stderr
    assert json.loads(r.stdout)["ending"]["kind"] in ("killed", "unknown")


# ---------------------------------------------------------------------------------------------- --redact
@pytest.mark.wine
def test_run_redact_writes_a_redacted_trace_with_the_same_verdict(shim_env, tmp_path):
    """`dlltrace run --redact`: no unredacted copy is left, none of the planted names is in the file's
    bytes (compressed or not), and the report of it gives the same verdict as the plain run's."""
    user_dir = "C:\\users\\Alice Smith-Jones\\proj"
    ops = ["load", user_dir + "\\nope.dll", "0", "load", "\\\\BUILDBOX7\\share\\x.dll", "0"]
    plain = dlltrace("run", "--wine", "-o", "p.jsonl", "--", HOST, *ops, cwd=tmp_path,
                     USERNAME="Alice Smith-Jones", COMPUTERNAME="BUILDBOX7")
    red = dlltrace("run", "--wine", "--redact", "-o", "r.jsonl.gz", "--", HOST, *ops, cwd=tmp_path,
                   USERNAME="Alice Smith-Jones", COMPUTERNAME="BUILDBOX7")
    assert plain.returncode == red.returncode == 126, red.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "r.jsonl.gz"]  # no .part, no .unredacted
    data = gzip.decompress((tmp_path / "r.jsonl.gz").read_bytes())
    for planted in (b"Alice", b"Smith", b"Jones", b"BUILDBOX7", b"buildbox7"):
        assert planted not in data and planted not in red.stderr.encode()
    assert b"Alice" in (tmp_path / "p.jsonl").read_bytes()  # (planted indeed)
    a, b = (json.loads(produce(read_trace(tmp_path / n), "json")) for n in ("p.jsonl", "r.jsonl.gz"))
    verdicts = lambda rep: [(c["verdict"] or {}).get("fate") for c in rep["calls"]] + [rep["error"], rep["failed"]]
    assert verdicts(a) == verdicts(b) and len(a["calls"]) == 2


# ---------------------------------------------------------------------------------------------- --wine python
@pytest.mark.wine
def test_run_wine_gives_a_windows_python_the_bootstrap(shim_env, windows_python, tmp_path):
    """`dlltrace run --wine -- python.exe -c ...` with nothing set by hand: the Windows Python gets the
    bootstrap on its PYTHONPATH (as Z:\\...), so the trace has its Python context and the report names
    the ctypes call that failed. (A Unix PYTHONPATH of ours is not passed to it.)"""
    exe, _ = windows_python
    code = "import ctypes\ntry:\n    ctypes.CDLL('nope_x.dll')\nexcept OSError as e:\n    raise SystemExit(3)"
    env = winetools.wine_env(PYTHONPATH=str(ROOT / "tracer"))
    for _ in range(3):  # (pipes: a Windows Python under Wine 8 cannot use a file as its stdout)
        r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "--wine", "-o", "t.jsonl", "--", str(exe), "-c",
                            code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
                           stdin=subprocess.DEVNULL)
        if "the program never ran" not in r.stderr:
            break
    assert r.returncode == 3, r.stderr[-3000:]
    t = read_trace(tmp_path / "t.jsonl")
    assert [e["version"][:4] for e in t.of("py_env")] == ["3.13"]
    (dl,) = [e for e in t.of("py_dlopen") if e["name"] == "nope_x.dll"]
    (ld,) = [ld for ld in t.top_loads() if (ld.name or "").endswith("nope_x.dll")]
    assert ld.ctx == dl["seq"] and ld.error == 126
    assert "ctypes.CDLL('nope_x.dll')" in r.stderr or 'ctypes.CDLL("nope_x.dll")' in r.stderr, r.stderr


def test_host_platform_is_platform_platform_without_importing_it():
    """The header's `host`: platform.platform()'s text (on Linux without its `uname -p` child, whose answer
    Linux's form drops), made without importing platform where glibc answers (files.libc_version)."""
    import platform

    assert files.libc_version() == platform.libc_ver()
    if sys.platform.startswith("linux") and platform.processor() in ("", platform.machine()):
        assert files.host_platform() == platform.platform()
    code = ("import sys; sys.path.insert(0, %r); from dlltrace.trace import files; files.host_platform(); "
            "print('platform' in sys.modules)" % str(Path(files.__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("False" if os.confstr("CS_GNU_LIBC_VERSION") else "True")
