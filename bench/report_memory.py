"""How much memory does `dlltrace report` take on a big trace? `python bench/report_memory.py [--events N ...]`

The aim (issue 10 item 7): at most 2x the trace's size. For each size (default about 100,000 events,
19 MB, and 500,000 events, 96 MB: bench/report_speed.py's generator, one process importing many
extension-like DLLs, every 10th load missing a dependency), this measures in the same run

  baseline  the peak RSS of a Python that imports every module `dlltrace report` imports (the list is
            taken from a report of a tiny trace) and does nothing else
  report    the peak RSS of `dlltrace report TRACE` (text, to a pipe), `--json` and `--redact`, and of
            `dlltrace redact TRACE -o OUT` (what `run --redact` does at its end)

each in a fresh process (a wrapper runs it and reads its ru_maxrss: resource.getrusage(RUSAGE_CHILDREN)),
and prints the ratio (report - baseline) / trace size. Linux and macOS (not Windows: no `resource`).
`--write PATH --events N` only writes such a trace (tests/test_big_traces.py uses it).

Measured (Linux, Python 3.11, a 2-core machine shared with other jobs; baseline 32 MB):
  before (read_trace kept every event as a dict, and the whole file three times while it read it;
          the replay kept every load's simulated tree):
          93,005 events, 19.0 MB: report 298 MB peak, ratio 14.0
          465,005 events, 96.0 MB: report 1,342 MB peak, ratio 13.6
  then (Events: bulky lines in zlib blocks; one streaming pass per process; a successful load kept
          as a few fields; path caches cleared every 1,000 loads):
          93,005 events, 19.0 MB: text 112 MB (ratio 4.2), --json 126 MB (4.9)
          465,005 events, 96.0 MB: text 416 MB (4.0), --json 466 MB (4.5)
          What held the rest, on the 19 MB trace (tracemalloc at the end of the replay, 73 MB): the
          recorded world's facts of all 19,000 DLLs, built once and kept (~25 MB), its indexes (~8 MB),
          the 19,000 loaded modules (~8 MB), the path caches of up to 65,536 entries each, 1,000 failed
          loads with all their probes; --json built the whole document, then its text, then printed it;
          --redact parsed every event at once to learn the names (235 MB).
  now (a file's facts built when asked, the last 1,024 kept; a process's world indexed once, events
          held by position; LoadedModule, the result dataclasses and Probe with slots; light loads in
          columns; a failed load without its probes; 64 KB blocks, 32-bit arrays; path caches of 4,096;
          --json written a call at a time; --redact's names learnt a streamed event at a time and its
          copy kept as Events):
          93,005 events, 19.0 MB: text 62.3 MB (ratio 1.75), --json 62.8 MB (1.78), --redact 65.6 MB (1.93)
          465,005 events, 96.0 MB: text 184.5 MB (1.59), --json 185.1 MB (1.59)
  `dlltrace redact` read the whole file, split it and joined the redacted lines (112 MB on the 19 MB
  trace); it reads a line at a time now, its redacted events going to a file before the header: 49 MB.
  `--all` keeps every load in full (172 MB on the 19 MB trace).
  2026-12-05: it had crept to text 2.04, --json 2.03, --redact 2.21 (93,005 events): the Python contexts
          (trace/pycontext.py PyContexts) held every py_* event parsed for the whole replay, 7 MB of 10,000
          imports' dicts. They keep each event's position in the store now, parsed again when a load asks (the
          last 64 kept): text 62.2 MB (1.67), --json 62.0 MB (1.66), --redact 65.1 MB (1.82); +0.8% instructions
          (callgrind, 9,305 events).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tracer"))

# the wrapper: runs its arguments as a child and prints the child's peak RSS in bytes
WRAPPER = r"""
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if r.returncode not in (0, 3):
    sys.stderr.write(r.stderr.decode(errors="replace")); sys.exit(r.returncode)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(rss if sys.platform == "darwin" else rss * 1024)
"""

# what a report imports: the modules loaded after a report of a tiny trace (printed as JSON)
MODULES_OF_A_REPORT = r"""
import json, sys
sys.argv = ["dlltrace", "report", sys.argv[1]]
from dlltrace.cli import main  # (not entry: it ends the process, os._exit, before the modules are listed)
import io, contextlib
with contextlib.redirect_stdout(io.StringIO()):
    main()
sys.__stdout__.write(json.dumps(sorted(sys.modules)))
"""

BASELINE = r"""
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        pass
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "tracer") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def peak(argv: list[str]) -> int:
    """The peak RSS (bytes) of a process running argv."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, env=env())
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.strip()}")
    return int(out.stdout.strip())


def report_modules(tiny: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-c", MODULES_OF_A_REPORT, str(tiny)], capture_output=True, text=True,
                         env=env(), check=True)
    return [m for m in json.loads(out.stdout) if m != "__main__"]


def main() -> int:
    from report_speed import generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 500_000])
    ap.add_argument("--write", metavar="PATH", help="only write a trace of --events events to PATH")
    a = ap.parse_args()
    if a.write:
        generate(Path(a.write), a.events[0])
        return 0
    if sys.platform == "win32":
        print("bench/report_memory.py measures with the resource module: not on Windows")
        return 1
    report = [sys.executable, "-m", "dlltrace", "report"]
    with tempfile.TemporaryDirectory() as d:
        tiny = Path(d) / "tiny.jsonl"
        generate(tiny, 100)
        modules = report_modules(tiny)
        base = peak([sys.executable, "-c", BASELINE, json.dumps(modules)])
        print(f"baseline: a Python that imports the {len(modules)} modules of a report: {base / 1e6:.1f} MB peak")
        worst = 0.0
        for n in a.events:
            path = Path(d) / f"big{n}.jsonl"
            lines = generate(path, n)
            size = path.stat().st_size
            runs = [("report " + (" ".join(fmt) or "text"), [*report, str(path), *fmt]) for fmt in ([], ["--json"], ["--redact"])]
            runs.append(("redact (the command: a redacted copy of the file)",
                         [sys.executable, "-m", "dlltrace", "redact", str(path), "-o", str(path) + ".red.gz"]))
            for what, argv in runs:
                p = peak(argv)
                ratio = (p - base) / size
                worst = max(worst, ratio)
                print(f"{lines:,} events, {size / 1e6:.1f} MB, {what}: {p / 1e6:.1f} MB peak, "
                      f"ratio (peak - baseline) / size = {ratio:.2f}")
            Path(str(path) + ".red.gz").unlink(missing_ok=True)
            path.unlink()
        print(f"worst ratio: {worst:.2f}   aim: <= 2 -> {'met' if worst <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
