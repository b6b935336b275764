#!/usr/bin/env python3
"""The size of a trace as `dlltrace run` writes it (export lists trimmed to what the trace asks for,
docs/trace-format.md "What a trace keeps"), raw and gzip-compressed (Python gzip, level 6), against
the same trace with every export name kept (DLLTRACE_KEEP_ALL_EXPORTS=1), for the real-wheel corpus
runs: torch 2.5.1, onnxruntime-gpu 1.31.1 and CTranslate2 4.8.5 DLLs loaded under Wine
(tests/test_real_corpus.py's situations).

    python bench/trace_size.py                       # run the corpus situations under Wine (minutes)
    python bench/trace_size.py --only torch_without_asmjit,ctranslate2_dll
    python bench/trace_size.py --from DIR            # full traces already made: DIR/*/t.full.jsonl
                                                     # (the corpus test's work folders) or DIR/*.jsonl
    python bench/trace_size.py --breakdown           # and where the bytes of the largest go

The trimmed trace is the full one trimmed by diagnosis/collect.trim_trace_bytes, which is what `dlltrace
run` does to its facts by default (tests/test_trace_trim.py checks both the same). Aim (issue 14): a
real failing run <= 2 MB as written, compressed. Without Wine or the wheels it says so and exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tracer"))
sys.path.insert(0, str(HERE.parent / "tests"))

from dlltrace.diagnosis.collect import trim_trace_bytes  # noqa: E402

AIM = 2_000_000  # bytes, gzip-compressed, of a failing run's trace


def gz(data: bytes) -> int:
    return len(gzip.compress(data, 6))


def corpus_traces(only: Optional[set], work: Path) -> tuple[dict, dict]:
    """{situation: its full trace file} of the corpus situations run now under Wine, and {situation:
    True when it loads fine}. ({}, {}) with a message when Wine, mingw or the wheels are missing."""
    import realwheels as rw
    import test_real_corpus as rc
    import winetools

    if not winetools.wine_binary() or not shutil.which(winetools.CC64) or not shutil.which(winetools.CC32):
        print("trace_size: needs wine64 and mingw (x86_64 and i686): nothing measured")
        return {}, {}
    sits = [s for s in rc.SITUATIONS if only is None or s.name in only]
    try:
        for w in {src[1] for s in sits for src in s.files.values() if src[0] in ("wheel", "truncated")} | {"cudart12", "torch"}:
            rw.fetch_wheel(rw.WHEELS[w])
    except rw.WheelUnavailable as e:
        print(f"trace_size: {e}: nothing measured")
        return {}, {}
    winetools.ensure_prefix()
    from test_shim import build_shim

    build_shim()
    built = rw.build_fixtures()
    base = winetools.drive_c() / rc.BASE_UNIX / ("bench" + secrets.token_hex(2))
    out, fine = {}, {}
    try:
        for sit in sits:
            t0 = time.monotonic()
            o = rc.run_situation(sit, base, built, work / sit.name)
            shutil.rmtree(base / sit.name, ignore_errors=True)
            full = work / sit.name / "t.full.jsonl"
            if not full.is_file():
                print(f"  {sit.name}: no trace ({'; '.join(o.harness)[:200]})")
                continue
            out[sit.name], fine[sit.name] = full, sit.loads_fine
            print(f"  ran {sit.name} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out, fine


def traces_in(folder: Path) -> dict:
    """{name: full trace} of DIR/<name>/t.full.jsonl (the corpus test's work folders), else DIR/<name>.jsonl."""
    found = {p.parent.name: p for p in sorted(folder.glob("*/t.full.jsonl"))}
    return found or {p.stem: p for p in sorted(folder.glob("*.jsonl"))}


def breakdown(data: bytes) -> str:
    """Bytes by event kind, and of `file` events by `pe` field."""
    by_ev: Counter = Counter()
    by_field: Counter = Counter()
    for line in data.splitlines(keepends=True):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        by_ev[e.get("ev", "header")] += len(line)
        if isinstance(e.get("pe"), dict):
            for k, v in e["pe"].items():
                by_field[k] += len(json.dumps(v, ensure_ascii=False).encode())
    evs = ", ".join(f"{k} {v / 1e3:.0f} KB" for k, v in by_ev.most_common(6))
    fields = ", ".join(f"{k} {v / 1e3:.0f} KB" for k, v in by_field.most_common(5))
    return f"    by event: {evs}\n    file facts by pe field: {fields}"


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", type=Path, help="measure the full traces in this folder (no Wine run)")
    ap.add_argument("--only", help="comma-separated situation names (tests/test_real_corpus.py SITUATIONS)")
    ap.add_argument("--breakdown", action="store_true", help="where the bytes of the largest trace go")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None

    fine: dict = {}
    with tempfile.TemporaryDirectory(prefix="dlltrace-trace-size-") as tmp:
        if args.src:
            traces = {k: v for k, v in traces_in(args.src).items() if only is None or k in only}
            try:
                import test_real_corpus as rc
                fine = {s.name: s.loads_fine for s in rc.SITUATIONS}
            except ImportError:
                pass
        else:
            traces, fine = corpus_traces(only, Path(tmp))
        if not traces:
            print("trace_size: no traces")
            return 0
        rows = []
        for name, path in traces.items():
            full = path.read_bytes()
            if b'"trimmed"' in full:
                print(f"  {name}: already trimmed (made without DLLTRACE_KEEP_ALL_EXPORTS=1), skipped")
                continue
            t0 = time.perf_counter()
            small = trim_trace_bytes(full)
            rows.append((name, len(full), gz(full), len(small), gz(small), time.perf_counter() - t0, full, small))

    print(f"{'corpus run':38s} {'full raw':>10s} {'full gz':>9s} {'trimmed':>9s} {'trim gz':>9s} "
          f"{'raw/raw':>8s} {'gz/gz':>6s} {'full raw/trim gz':>16s}  state")
    for name, fr, fg, tr, tg, _, _, _ in sorted(rows, key=lambda r: -r[1]):
        state = {True: "loads", False: "FAILS"}.get(fine.get(name), "?")
        print(f"{name:38s} {fr / 1e6:8.2f}MB {fg / 1e3:7.0f}KB {tr / 1e3:7.0f}KB {tg / 1e3:7.1f}KB "
              f"{fr / tr:7.1f}x {fg / tg:5.1f}x {fr / tg:15.0f}x  {state}")
    tot = [sum(r[i] for r in rows) for i in (1, 2, 3, 4)]
    print(f"{'all ' + str(len(rows)) + ' runs':38s} {tot[0] / 1e6:8.2f}MB {tot[1] / 1e3:7.0f}KB {tot[2] / 1e3:7.0f}KB "
          f"{tot[3] / 1e3:7.1f}KB {tot[0] / tot[2]:7.1f}x {tot[1] / tot[3]:5.1f}x {tot[0] / tot[3]:15.0f}x")
    failing = [r for r in rows if fine.get(r[0]) is False] or rows
    worst = max(failing, key=lambda r: r[4])
    print(f"largest failing run as written (trimmed, gzip level 6): {worst[0]} {worst[4] / 1e3:.1f} KB "
          f"(aim <= {AIM / 1e6:.0f} MB: {'met' if worst[4] <= AIM else 'NOT met'}); "
          f"trimming took {max(r[5] for r in rows):.2f} s at most")
    if args.breakdown:
        big = max(rows, key=lambda r: r[1])
        print(f"{big[0]}, full:\n{breakdown(big[6])}\n{big[0]}, trimmed:\n{breakdown(big[7])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
