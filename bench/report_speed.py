"""How fast is `dlltrace report` on a big trace? `python bench/report_speed.py [--events N] [--sizes N,N,..] [--profile]`

Generates a trace of about N events (default 100,000): one Windows process that imports many
extension-like DLLs (a py_import, then LoadLibraryExW(path, 0x1100) with its probes; every 10th
load misses a dependency, searched in four folders), then the `file` facts of every DLL, as
`dlltrace run` appends them. Then, in the same run, times

  parse   reading the file and json.loads of every line (the floor: what any reader must do)
  report  what `dlltrace report` does in-process: read_trace + replay/analyse + render (text and JSON)

and prints both and their ratio (best of --repeat, wall and CPU time: the CPU ratio is the steadier one on a
busy machine). The aim (issue 25): the report within 3x the parse of the same lines, at 100,000 events,
and linear: `--sizes 10000,100000,500000` prints the CPU time per event of each size and the largest over
the smallest (linear: about 1). `--profile` prints the top functions of the report by cumulative time.

Measured (Linux, Python 3.11, 93,005 events, 19 MB, 10,000 loads of which 1,000 fail):
  before: parse 0.33 s, report 234 s (700x): trace.context() scanned every event per load, and
          RecordedWorld.close_files() every file name per failed load (both now indexed once)
  then:   parse 0.33 s, report 8.4 s (26x). Where the time went (cProfile):
          ~60% world.ProcessState.remove_loaded -> _reindex (the simulator rolls back each failed
          load's new modules; _reindex rebuilds both indexes over the whole loaded list: quadratic);
          ~10% read_trace (json.loads); ~8% RecordedWorld (pe_facts_from_dict per file event);
          ~8% the simulator's own search (_probe_dirs); ~5% json rendering.
  then:   the loaded-module indexes are updated, not rebuilt, on removal; PE facts are built on
          first use; the cyclic garbage collector is paused while the report is built (it took
          more than half the time): parse 0.33 s, report 2.3 s (7.1x), of which 0.46 s was the
          collection that ran when the pause ended, over everything the report had built.
  now:    what survives the pause is frozen (gc.freeze) instead of collected, which is sound
          because nothing dlltrace builds is cyclic any more (a recursive closure and an observer
          made whole replays cyclic; tests/test_report.py checks for cycles); the trace is read
          with the C JSON scanner per line and indexed by event kind:
          parse 0.32 s, report 1.52 s (4.7x), --json 1.7 s.
  with checks: the reader now checks every event against the trace schema (tracecheck.py), and
          the replay builds PE facts from checked `file` events without checking them again:
          parse 0.33 s, report 1.75 s (5.3x), --json 1.97 s. The aim is met on this machine.
  with fix verification (every failed load re-run once more for what is also missing, and once
          per candidate fix) and the rich renderer: first 28.8 s. The re-runs copied the process
          state (fork: copy on write now), package_roots scanned every loaded module per failure,
          verdict.rule_retried_ok compared each failure with every successful load (indexed by file
          name now), and rich laid out 1,000 explained failures (the text report explains the first
          25 in full and lists the rest a line each; --all explains all):
          parse 0.32 s, report 2.14 s (6.7x), --json 2.31 s. The aim is missed by about 0.15 s.
  streaming (issue 10 item 7: memory; bench/report_memory.py): the events are kept as their lines,
          compressed in blocks, and parsed again when replayed; the replay keeps a successful load as a
          few fields; the path caches are cleared every 1,000 loads; the file probes the recorded world
          needs are gathered while reading. Peak memory 298 -> 112 MB. Time, measured back to back
          with the version before, three times (a 2-core machine shared with other jobs): before
          report 2.31-2.41 s, --json 2.52-2.62 s; after report 3.18-3.80 s, --json 3.32-3.63 s (about
          +1 s). In CPU time the parts cost about: every bulky event parsed a second time 0.5 s, the
          zlib blocks 0.2 s, clearing the caches 0.25 s; each of the last two can be traded back for
          memory (17 MB and 31 MB on this trace).
  low memory (bench/report_memory.py: 4.2x -> 1.75x the trace): back to back with the version before,
          twice each (the machine as noisy): before report 3.66-4.34 s, --json 3.80-5.26 s; after
          report 3.37-3.78 s, --json 3.81-4.63 s. A file's facts are built again when let go (the last
          1,024 kept); a name index's list of 10,000 names of one shape was scanned on each insert
          (quadratic: 0.6 s) and the CUDA table rebuilt the recorded world (0.85 s): both gone.
  issue 25 (aim: <= 3x the parse, in CPU time): on a quiet moment of the 2-core machine, back to back:
          before parse 0.39 s, report 4.35 s (11.2x), --json 4.64 s; after parse 0.40 s, report 4.20 s
          (10.5x), --json 4.69 s (at load 8-10 the ratio moved between 8.8x and 11.2x from run to run;
          callgrind on the 9,305-event trace: 9.0x -> 8.7x in instructions). Linear: 101, 81 and 68 us
          an event at 9,305, 93,005 and 465,005 events (fixed costs weigh on the small one). Where the CPU
          time goes (cProfile, 93,005 events): reading 25% (json 10%, the schema check of every event
          9%, indexing 5%); the replay 55% (the simulator's search and mapping of 11,000 loads 35%,
          explaining and verifying the 1,000 failures 9%, every load event parsed again 5%); the
          recorded world 10% (every `file` event parsed twice: indexed, then built); the CUDA table
          7% (every `file` and `probe` event parsed once more); rendering 4%. The events are kept as
          compressed lines and parsed again on use (the memory aim, bench/report_memory.py): the
          bulky kinds are parsed about three times in all. Taken off: path normalisation of paths
          already normal (a check, not a split: 117,000 calls), a typing generic built per file
          lookup, typing.Mapping's isinstance per file event. Reaching 3x needs the replay and the
          world built in the reader's one pass (no second parse), or a schema check compiled per kind.
  tried and dropped (no gain, measured back to back on the 93,005-event trace):
          - the schema check compiled per kind into one expression (tracecheck: each field's common shapes,
            {type}, an integer's {type, minimum, maximum}, a string's {type, pattern}, inline; the others
            called): the fields of every event checked in 0.293-0.307 s before, 0.285-0.286 s after (3% of
            the check, a tenth of a percent of the report: check_event's loop over the fields is not where
            its time goes; the nested `pe` objects of the `file` events and the call per event are);
          - RecordedWorld reading a file event's fields off its parsed dict instead of LazyEvent.get (the
            same parses, fewer wrapper calls): the index 0.30 s both ways, building 21,001 files' facts
            0.39 -> 0.36 s: under 1% of the report, within the machine's noise (callgrind on the 9,305-event
            trace: 4.669 G -> 4.674 G instructions, whole process).
          What is left to take is structural: the bulky events (`file`, `probe`, the load events) parsed two
          or three times (the CUDA table's `known` paths alone re-parse 21,001 file and 42,000 probe events:
          about 0.35 s, 8%), and the simulator's search (35%).
  issue 25, second pass (what the world and the CUDA table need, gathered in the reader's one pass):
          the reader keeps, as it reads them, each `file` event's place, path and kind and folds its `pe`
          object's imports into what the trace asks of exports (trace/reader.py FileIndex; AskedFold moved to
          trace/asked.py, below the reader): RecordedWorld indexes the 21,001 files and the CUDA table lists
          the known paths without parsing a `file` event again (a file's facts are still built from its
          event, parsed when the replay first asks, as a dict, not a LazyEvent read a field at a time). The
          probe facts the reader gathered per process keep any probe with a path, so the CUDA table's found
          paths come from them too (no pass over 42,000 probes); they are let go of once the world and the
          table took them, and the table is made before the replay, so that is before the replay's peak. The
          index's paths are one string once read. Elsewhere: within one LoadLibrary call the simulator asks
          the world for each path once (a module's file was asked for when searched, bound and initialised:
          96,004 asks -> 58,004), packages.wheel_folders made once (a list scanned per row, 0.2 ms for each
          failed load), a load's Python context found once (origin_of and user_import each asked), the
          trace's `capped` event found once per process (it was once per load), the reader's tuple of
          essential fields made once per kind. The report's text and JSON of the 93,005-event trace are byte
          for byte main's. Memory (bench/report_memory.py, back to back, this machine): main text 2.06x,
          --json 2.09x, --redact 2.20x, `redact` 0.47x; now 2.04x, 2.03x, 2.20x, 0.56x.
          Time, on the 2-core machine shared with two other jobs (load 1-6, CPU times moving by a third from run
          to run): this script, main then this, twice each: main 10.6x and 8.9x CPU (report 5.24 and 5.08 s),
          this 12.2x (during its own tests) and 10.7x (parse 0.41 s, report 4.34 s, --json 4.50 s); then seven
          runs of each, alternated, one process each (parse best of 3, report best of 2): report CPU median
          main 5.99 s, this 5.09 s (-15%); the ratio's median 10.6x and 10.2x (the parse's own spread, 0.44 to
          0.82 s, is as wide as the gain). Linear: 65, 56 and 55 us an event at 9,305, 93,005 and 465,005
          events (--sizes, --repeat 1: 0.84).
          callgrind on the 9,305-event trace (PYTHONHASHSEED=0, each less a run that only imports): main
          report 3.014 G instructions, parse 0.390 G (7.7x); now 2.620 G, 0.370 G (7.1x): 13% fewer; on the
          93,005-event trace: main report 27.79 G, parse 3.71 G (7.5x); now 23.99 G, 3.71 G (6.5x): 14% fewer.
          Where the CPU time goes now (one run of each part, timed in the same process, 93,005 events):
          reading 28% (json about 9%, the schema check 9%, indexing 7%); the replay 63%: the simulator 39%
          (its search and mapping of 11,000 loads; in it, building 19,002 files' facts 5% and explaining and
          verifying the 1,000 failures 8%), events parsed again 12% (the replay's 82,003 load, probe and
          py_import events, the 10,000 py_import events once more for the Python contexts, the files'), the
          rest of the replay (Load and Probe objects, comparing probes, the light records) about 12%; the CUDA
          table, with the world's index of the files now built in it, 6%; rendering 1% (timers around each
          part, which add about a tenth). What is left: the reader alone is about 3x the parse (json, the check of every
          event, the index), so 3x for the whole report needs the schema check out of Python (or not every
          event checked), the replay's events kept parsed (the memory aim says no: the lines are kept
          compressed, about a tenth of their parsed size) and a simulator several times cheaper per load:
          its 11,000 loads are distinct modules, so memoising its search (same name, same search path, same
          loaded modules) finds nothing to reuse on this trace.
  tried and dropped (issue 25, second pass):
          - the schema check's predicates made cheaper (an enum of one type tested without a (type, value)
            pair per value; {type, pattern} in one call; an anyOf of two without a loop): checking every event
            of the trace, alone, 0.547 -> 0.538 s: noise. As the entry before found, check_event's time is its
            loop over the fields and a call per field, not the predicates;
          - the Python contexts (PyContexts) fed by the reader as it reads the py_* events (10,000 parses
            fewer): `dlltrace redact`, which reads the whole trace first, then held every py_import event
            (with the probes' found paths in a dict of their own and the index's paths a string each: 38.4 ->
            50.9 MB, 0.47x -> 1.06x the trace); the report would gain about 1% (10,000 of 185,000 parses).
  issue 25, third pass (2026-12-05; per-line, per-event and per-load work made smaller, nothing structural):
          the reader's loop strips each line once (no copy of it without its newline first), calls the JSON
          scanner inline and counts events in a local; Events.add looks a kind up once (its code, its index,
          kept or not, and its py_*/file/probe tag); a blank line is told by bytes.isspace (no stripped copy);
          AskedFold.add folds a pe object without a list of both import lists and skips empty names/ordinals
          lists; pe_facts_from_dict (checked) gives an empty imports, delay_imports or forwarders as the
          default without a generator or a copy; whether a path is already normal is one regular expression
          (winpath._NORMAL: the same answers as the eight string tests for all 2.1 M strings of up to six
          characters over a, C, c, :, \\, /, ., space, newline, 1, é); rule_dos_path_name returns a path with
          nothing to drop as it is (the same answers for 597,871 strings); the LOAD_LIBRARY_SEARCH_* folders
          after DLL_LOAD_DIR are made once per process state (rules._flags_order_rest: they depend on the flags
          and the state, never on the name); the replay makes its Load and Probe objects with positional
          arguments, appends a light record column by column, and real_probe_statuses compares with the last
          kept key; the CUDA table's folder index makes each path's key once. The report's text and --json of
          the 9,305- and 93,005-event traces are byte for byte main's.
          callgrind (PYTHONHASHSEED=0, each less a run that only imports; this script's generator, parse =
          parse_only, report = full_report text): 9,305 events: main report 2,616.7 M instructions, parse 369.6 M
          (7.08x); now 2,455.9 M, 370.4 M (6.63x): 6.1% fewer. 93,005 events: main report 24,171.4 M, parse
          3,702.8 M (6.53x); now 22,475.9 M, 3,713.3 M (6.05x): 7.0% fewer.
          CPU time (this script, --repeat 2, 100,000 events; the 2-core machine shared with other jobs, load 1 to 5;
          main and this alternated, five runs each, one process each): report CPU median main 5.09 s, this 4.18 s
          (-18%); the ratio's median main 9.4x, this 8.4x (each run's parse moved between 0.40 and 0.88 s); the
          quietest pair (parse 0.404 and 0.405 s): main 3.79 s (9.4x), this 3.41 s (8.4x).
          Memory (bench/report_memory.py --events 100000, this machine, loaded): main text 1.77x,
          --json 1.78x, --redact 1.95x (the worst), `redact` 0.59x; this 1.72x, 1.71x, 1.88x (the worst), 0.59x.
  tried and dropped (issue 25, third pass; callgrind on the 9,305-event trace, report less imports):
          - winpath.key with normalize and fold inline (no two inner calls per new path): 25 M instructions
            MORE: key no longer fills normalize's cache, so the normalize calls that followed for the same
            paths missed it;
          - Node and CallResult as slotted dataclasses: 1.5 M fewer (0.06%): not worth the change;
          - Trace.select returning Events' iterator itself, and Events.select a map of _get over the positions
            (two generator frames less per replayed event): 3.9 M fewer (0.16%): not worth the change.
          What is left is as the second pass found: the reader alone is about 2.5x the parse (the scanner, the
          schema check of every event, the index), and the simulator's work per load (39%) is spread over
          dozens of small functions (path keys, candidates, nodes, the world's file lookups), none above 3%.
  issue 25, fourth pass (2026-12-05): the schema check of every event, timed alone per kind on the 93,005-event
          trace (one process, CPU): 407 ms, of it probe 166 ms (3.96 us each: a loop over ten fields, a call
          a field), file 127 ms, load_end 50 ms. Reading without any check was 1.24x the parse, with it 2.12x.
          Each kind's check is now one function of inline tests compiled from the schema (tracecheck.
          _event_function: the required fields asked at once, each field's common shape written out, the
          others called), used once the kind has had FAST_AFTER events (compiling the forty kinds at import
          took 20 ms): 271 ms (probe 1.95 us, load_end 2.7 us; file 5.3 us, its nested pe object still
          called). The report: 3.45 -> 3.37 s CPU back to back, ratio 8.4x -> 8.2-8.4x: the check is 7% of it.
          Not done: the nested objects (the `pe` of a file event) written out too: at most the file events'
          share of the check (~0.1 s), under 3% of the report (an estimate, not measured).
  issue 25, fifth pass (2026-12-06; structural: work the report never shows not done):
          a load that loaded, really and in the model, is kept as a few fields (Replays.add_light), so nothing of
          its comparison with the real load was kept: _replay_load now asks light_if first and compares only the
          loads kept in full (a whole-run replay, fix verification, compares none); the reader keeps each probe's
          `load` (an int a probe: 0.3 MB here) and the replay attributes a probe to its load by position
          (Events.select_probes_unparsed), parsing the probes of a load kept in full only (42,000 probe events were
          parsed again and made Probes; now 6,000). RecordedWorld.files_in indexes the files by folder once (the
          CUDA table asked three folders, each a scan of all 21,001 files and 60,003 name lookups). The report's
          text and --json of the 9,305- and 93,005-event traces are byte for byte main's.
          callgrind (PYTHONHASHSEED=0, each less a run that only imports, 1,798.2 M): 9,305 events: main report
          2,430.6 M instructions, parse 401.8 M (6.05x); now 2,266.4 M (5.64x): 6.8% fewer. 93,005 events: main
          21,606.5 M, parse 3,745.0 M (5.77x); now 19,974.7 M (5.33x): 7.6% fewer.
          CPU time (this script, --repeat 2, 100,000 events; main and this alternated, four runs each, one process
          each, the 2-core machine shared with other jobs, load 3 to 5): report main 3.73, 3.43, 3.78, 3.91 s
          (median 3.75), this 3.17, 3.07, 3.28, 3.24 s (median 3.21: -14%); the ratio main 8.6, 8.9, 8.9, 8.3x,
          this 7.9, 7.9, 8.2, 7.3x; --json main median 3.68 s, this 3.42 s. Linear (--sizes, --repeat 1, a
          quieter moment): 31.8, 28.8 and 31.5 us an event at 9,305, 93,005 and 465,005 events (0.99); 93,005: 7.9x.
          Memory (bench/report_memory.py --events 100000, which listed no modules since cli.entry ends with
          os._exit: it uses cli.main now): main text 1.66x, --json 1.63x, --redact 1.82x, redact 0.76x; this 1.66x,
          1.64x, 1.82x, 0.76x.
          Where the CPU time goes now (one run, timers around the simulator's top-level calls, 93,005 events, total
          3.33 s): reading 0.84 s (25%); the simulator on the 9,000 loads that loaded 1.04 s (31%), on the 1,000
          that failed, with their explanations and fixes, 0.44 s (13%); the CUDA table 0.22 s (7%); the rest of the
          replay, the recorded world's index, the verdicts and rendering 0.78 s (24%).
          Evaluated and not done: replaying a load that loaded from what the trace recorded (its modules added to
          the state as the loader mapped them) instead of simulating it. It changes what the report says: the
          model's check of every load that loaded is what finds a load the model would fail (kept in full and
          shown as an incident: analysis.incidents), and the state the simulation leaves (each module's `by_call`, its
          dependencies and references, which later loads' trees, "already loaded from" and FreeLibrary read) is the
          model's, not the trace's, so a failure's explanation after it could differ. And it would not reach the
          aim: without the simulator's 1.04 s the report is about 2.3 s, 5.5x the parse, since reading alone is
          about 2x. The aim needs the reader near the parse (the schema check and the index out of Python, or
          events not checked) and the replay's per-load cost several times smaller.
          Left (their cProfile shares): the py_import events are parsed four times (the
          reader, the replay's pass, PyContexts' index of them, and each load's context: about 3%); PyContexts could be
          indexed from what the reader keeps (pid, seq, tid) and take the replay's parsed event for the load's
          context. A file's facts are built from its event parsed again (19,002 builds: about 5%), and the CUDA
          table's folder index of 38,001 known paths (about 3%).
  2026-12-06 afternoon (no change to the report's path; a quiet moment, --repeat 2): parse 0.395 s, report 2.907 s
          (7.4x CPU), --json 2.998 s (7.6x); reading alone (read_trace) is 1.40x the parse (1.10 s against 0.79 s in a
          busier moment). What is over the aim is the replay: the simulator's search of 11,000 loads, the world's file
          lookups (60,004) and the 1,000 failures' explanations and fixes, each a few percent, none a tenth.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracer"))

from dlltrace.render.summary import produce  # noqa: E402
from dlltrace.trace.reader import freeze_after_pauses, read_trace  # noqa: E402


APP = "C:\\app"
LIB = APP + "\\lib"
SYS32 = "C:\\Windows\\System32"


def pe(imports=(), version=None) -> dict:
    return {"machine": "x64", "is_dll": True, "imports": [{"dll": i, "names": [], "ordinals": []} for i in imports],
            "delay_imports": [], "exports": ["f"], "export_ordinals": [], "forwarders": {},
            "dependent_load_flags": 0, "file_version": version}


def letters(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out = chr(97 + r) + out
        if i == 0:
            return out


def generate(path: Path, target: int) -> int:
    """Write a trace of about `target` events; return the exact number of lines after the header."""
    pid, tid = 100, 101
    seq = 0
    out = []

    def ev(kind, **f):
        nonlocal seq
        seq += 1
        out.append(json.dumps({"ev": kind, "seq": seq, "pid": pid, "tid": tid, "t": seq * 1000, **f}))
        return seq

    ev("process", ppid=1, exe=APP + "\\python.exe", cmdline="python.exe big.py", shim="C:\\s.dll", shim_version="0.1.0",
       via="python", hooks=[])
    ev("env", exe=APP + "\\python.exe", cwd=APP, vars={"PATH": f"{APP};{SYS32};C:\\Windows"}, dll_directory=None,
       user_dirs=None, default_dirs=None, known_dlls=["kernel32.dll", "ntdll.dll", "kernelbase.dll"],
       safe_dll_search_mode=None, system32=SYS32, windows="C:\\Windows", windows_version="10.0.19045", machine="x64",
       wine=None, modules=[APP + "\\python.exe", SYS32 + "\\ntdll.dll", SYS32 + "\\kernel32.dll",
                           SYS32 + "\\kernelbase.dll"])
    ev("py_env", version="3.11.7", implementation="cpython", executable=APP + "\\python.exe", prefix=APP,
       base_prefix=APP, exec_prefix=APP, bits=64, conda=False, conda_prefix=None, sys_path=[APP])
    ev("adddir", api="AddDllDirectory", caller=APP + "\\python.exe", path=LIB, cookie="0x1", ok=True, error=0)
    files = []
    # per load: ~7 events when it succeeds, 9 when it fails, plus 2-3 file facts
    n_loads = max(1, target // 10)
    for i in range(n_loads):
        mod = f"{LIB}\\m{i:06d}.pyd"
        dep = f"dep{letters(i)}.dll"  # distinct names, not 10,000 "versions" of one name (see close names)
        ctx = ev("py_import", module=f"pkg.m{i:06d}")
        b = ev("load_begin", api="LoadLibraryExW", name=mod, flags=0x1100, parent=None, depth=0, ctx=ctx,
               caller=APP + "\\python311.dll")
        ev("probe", load=b, op="open", path="\\??\\" + mod, status=0, handle="0x10")
        ev("probe", load=b, op="section", status=0, handle="0x14", file="0x10")
        if i % 10 == 9:
            for d in (LIB, APP, LIB, SYS32):
                ev("probe", load=b, op="open", path=f"\\??\\{d}\\{dep}", status=0xC0000034)
            ev("load_end", load=b, result=None, error=126, status=0xC0000135, path=None)
            files.append({"ev": "file", "path": f"{LIB}\\{dep}", "kind": "missing"})
            files.append({"ev": "file", "path": f"{SYS32}\\{dep}", "kind": "missing"})
        else:
            ev("probe", load=b, op="open", path=f"\\??\\{LIB}\\{dep}", status=0, handle="0x18")
            ev("probe", load=b, op="section", status=0, handle="0x1c", file="0x18")
            ev("load_end", load=b, result="0x180000000", error=0, status=0, path=mod)
            files.append({"ev": "file", "path": f"{LIB}\\{dep}", "kind": "pe", "pe": pe(["kernel32.dll"], "1.0.0.0")})
        files.append({"ev": "file", "path": mod, "kind": "pe", "pe": pe([dep, "kernel32.dll"])})
        if seq + len(files) >= target:
            break
    files.append({"ev": "file", "path": SYS32 + "\\kernel32.dll", "kind": "pe", "pe": pe()})
    for f in files:
        out.append(json.dumps({**f, "pid": pid, "seq": 0, "tid": 0, "t": 0}))
    header = {"format": "dlltrace-trace", "version": 1, "tool": "bench/report_speed.py", "created": None,
              "platform": "windows"}
    path.write_text(json.dumps(header) + "\n" + "\n".join(out) + "\n", encoding="utf-8")
    return len(out)


def parse_only(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
            n += 1
    return n


def full_report(path: Path, fmt: str = "text") -> str:
    """What `dlltrace report TRACE` (fmt "text") or `dlltrace report --json TRACE` does, less printing."""
    return produce(read_trace(path), fmt)


def best_of(fn, repeat: int) -> tuple[float, float]:
    """The best (wall, CPU) seconds of `repeat` runs."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


AIM = 3.0  # report / parse


def main() -> int:
    freeze_after_pauses()  # as the `dlltrace` command does (cli.entry); in main: importing this module
    # for its generator (tests/test_markdown_cap.py, bench/report_memory.py) must not freeze a caller's objects
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="", help="comma-separated event counts: the CPU time per event of each")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        if a.sizes:
            per_event = []
            for size in (int(x) for x in a.sizes.split(",")):
                n = generate(path, size)
                (_, p_cpu), (_, r_cpu) = best_of(lambda: parse_only(path), a.repeat), best_of(lambda: full_report(path), a.repeat)
                per_event.append(r_cpu / n)
                print(f"{n:8} events: parse {p_cpu:7.3f} s CPU, report {r_cpu:7.3f} s CPU ({r_cpu / p_cpu:4.1f}x), "
                      f"{r_cpu / n * 1e6:5.1f} us an event")
            print(f"linearity: us an event at the largest size / at the smallest: {per_event[-1] / per_event[0]:.2f}")
            return 0
        n = generate(path, a.events)
        text = full_report(path)
        failed = text.splitlines()[0]
        t_parse, c_parse = best_of(lambda: parse_only(path), a.repeat)
        t_report, c_report = best_of(lambda: full_report(path), a.repeat)
        t_json, c_json = best_of(lambda: full_report(path, "json"), a.repeat)
        print(f"trace: {n} events, {path.stat().st_size / 1e6:.1f} MB; report says: {failed.split(' · ')[0]}")
        print(f"parse only (read + json.loads per line): {t_parse:.3f} s ({c_parse:.3f} s CPU)")
        print(f"dlltrace report (read + analyse + render text): {t_report:.3f} s ({c_report:.3f} s CPU), "
              f"{c_report / n * 1e6:.1f} us CPU an event")
        print(f"dlltrace report --json (read + analyse + render JSON with every tree): {t_json:.3f} s ({c_json:.3f} s CPU)")
        print(f"ratio report / parse: {t_report / t_parse:.1f}x wall, {c_report / c_parse:.1f}x CPU; --json "
              f"{c_json / c_parse:.1f}x CPU   aim: <= {AIM:g}x -> {'met' if c_report / c_parse <= AIM else 'NOT met'}")
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            full_report(path)
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
