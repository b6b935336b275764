#!/usr/bin/env python3
"""`dlltrace run` on Linux of a big scientific import against the same command untraced (issue 25):

    python -c "import scipy.stats, sklearn, pandas"

Timed in the same run, each the median of --runs runs (after a warm-up of each, in a shuffled order each
round, so the load of the machine hits all alike):
  untraced        the command alone
  recorder only   the command with the environment `dlltrace run` gives it (trace.linux.recorder_env: LD_AUDIT,
                  LD_PRELOAD, the Python bootstrap), no dlltrace process: the recorder's own cost
  dlltrace run    `python -m dlltrace run -o T -- <command>`: start-up, the run, the ELF facts appended, the
                  summary printed
Prints each against untraced, in wall time (what the aims are of) and in CPU time (user + system of the
process and its children: less at the mercy of other jobs on a shared machine). Aims (issue 25): dlltrace run <= 1.15x, recorder only <= 1.06x.

DLLTRACE_BENCH_TRACER=<another tree>/tracer adds that tree's "recorder only" and "dlltrace run" to the same
rounds (to compare with main). --instructions also counts untraced and recorder only (and the other tree's)
under valgrind's callgrind, PYTHONHASHSEED=0: the same on a loaded machine (minutes each). The environments
run without PYTHONDONTWRITEBYTECODE: the warm-up writes the .pyc files an install has (pip compiles them).

The Python with scipy, scikit-learn and pandas: --python, else $DLLTRACE_BENCH_SCIPY_PYTHON, else the venv
/tmp/dlltrace-bench-scipy (made here when missing: `python3 -m venv` + `pip install scipy scikit-learn pandas`,
a few minutes, once).

    python bench/linux_run.py [--runs 9] [--python PATH] [--instructions]

Where the time went, and what was done (2026-12-05, perf-linuxrun; this import makes 57,000 audit events, 1,587
of them imports, and 206 objects):
- the recorder's C part (LD_AUDIT + LD_PRELOAD, no Python bootstrap) is 1.002x in instructions and not
  measurable in time: the rest of "recorder only" is the Python bootstrap and its audit hook;
- a Python audit hook is called by CPython for every audit event (46,000 here are the program's own id()
  calls), with a str made of the event's name, an argument tuple and a Python call: one that does nothing
  costs this import 2.9% of its instructions. The hook is now installed behind a C audit hook of the preload
  library (trace/shim.py c_audit_filter, when the shim is bound with ctypes: a Python without cffi), which
  calls it for import, ctypes.dlopen and os.add_dll_directory only (every event until the warnings module
  is hooked);
- the hook's walk up the stack read each frame's f_code, an audit event of its own: the import system's
  frames (five of six in nested imports) are now told by their globals (94,000 such events were 18,700), and
  with the ctypes binding the walk is made in C by the preload library (dlltrace_linux_frames: no f_code
  read, no Python step per frame);
- JSON strings with nothing to escape are taken whole (str methods, not a loop a character at a time: 90 ms
  of JSON were 13), each import stack's JSON made once; the preload library keeps the trace open (it opened
  and closed it for each event);
- the bootstrap ran shim.py from source (30 ms of compiling in each traced Python): now from its .pyc
  (SourceFileLoader.get_code); py_dists read every line of every RECORD in Python (36 ms): now only the lines
  with a native suffix, found in the bytes (`python -c pass` traced: 170 M instructions over the C part
  were 38 M);
- `dlltrace run` imports neither dataclasses (with inspect), typing nor ctypes before the program starts.
Traces are unchanged: py_import module, frame and imports, and every native event's ctx, compared with
main's under one PYTHONHASHSEED.
Measured, callgrind (PYTHONHASHSEED=0, instructions against untraced, 5.035 G): recorder only 1.258x on main,
1.066x now; the C part alone 1.002x. Timed (medians of 7, shuffled; 2 cores shared with other jobs, whose load
moved the untraced baseline by 30% between runs): recorder only 1.05-1.09x when the machine was quiet (main
1.29-1.31x), 1.17-1.21x when it was not (main 1.21-1.36x); dlltrace run 1.20-1.35x (main 1.27-1.42x).
What is left: each recorded import costs the hook ~35-45 us: the frame objects the walk makes, the user's frame
and module names read from the ~10 frames that are not the import system's, the event's JSON, three ctypes
calls and six system calls; and `dlltrace run`'s own work while the program runs (reading the
trace as it grows, ELF facts of each object, importing the model and the renderer: ~280 ms of CPU) takes a
core the program shares when the machine is busy, plus ~45 ms after it ends (the replay, the facts) and
~40 ms before it starts.

Second pass (2026-12-05, perf-linuxrun2): what each recorded import cost, timed inside the traced program
(perf_counter around the hook's parts; the machine shared): 110-130 ms in all for 1,607 hook calls, of which the
walk 45 ms (the C walk 15, the Python loop over its 15,600 frames 30), the event's JSON 33 ms, the two ctypes
calls into the preload library 25 ms. Now:
- the walk gives Python only the module names and the frames whose file _LIBRARY_FILES does not know for a
  library's (dlltrace_linux_stack): the library files' frames never reach Python;
- `imports` is joined at once (module names need no escape) and a frame's JSON made once (frame_json);
- once the warnings module is hooked, the preload library's C audit hook writes py_import itself
  (dlltrace_linux_fast_import): the walk, the JSON, the write and the thread's context in C, one Python call
  (shim.user_frame_json) for the frames that may be the user's; anything out of the common case goes to the
  Python hook. The events are the same (test_py_import_written_in_c_is_what_the_python_hook_writes);
- `dlltrace run`'s worker (its imports, the trace read as it grows, the ELF facts) is one thread that lowers
  its own priority (runner.lower_thread_priority, nice +5): it takes what the program leaves of the cores; the
  main thread, which does what follows the program's end, keeps its own;
- no hashlib (OpenSSL's libcrypto: the recorder's staleness check) nor platform before the program starts.
callgrind (PYTHONHASHSEED=0, `import scipy.stats, sklearn, pandas`): untraced 5.029 G instructions; recorder only
main 5.335 G (1.061x), the walk in C 5.283 G (1.050x), py_import in C 5.216 G (1.037x). The rest of the
recorder: CPython building each audit event's arguments once any hook is installed (~60 M for 57,000 events),
the bootstrap's start (~38 M: binding the shim with ctypes, py_env, py_dists), the C hook's own steps.
Timed, this script with DLLTRACE_BENCH_TRACER=main's tree, 9 runs, while another job kept one core busy:
  untraced                1962.8 ms 1.000x     1952.8 ms 1.000x
  recorder only           2015.4 ms 1.027x     1961.6 ms 1.005x   (aim <= 1.06x)
  dlltrace run            2234.2 ms 1.138x     2252.6 ms 1.154x   (aim <= 1.15x)
  recorder only (other)   2168.3 ms 1.105x     2160.7 ms 1.106x
  dlltrace run (other)    2646.3 ms 1.348x     2553.4 ms 1.308x

Third pass (2026-12-05): what `run` did after the program ended, timed in-process (three runs each, this program,
the default .jsonl.gz): the facts 37-57 ms (the replay 15-18, parsing the worker's events again 12, recorded_processes
6, the facts' JSON and check 9), the compression 11-17 ms, the summary ~4 ms. The interpreter's teardown after
py_exit took 0.22 s here. Now:
- once the program's own process wrote py_exit, the worker makes the facts (runner.linux_facts) of the trace so far
  (runner.FactsAhead); after the end they are appended when nothing that followed changes a call
  (replay_linux.calls_unchanged_after), else made again (test_run_makes_the_facts_ahead_while_python_tears_down);
- the worker's read keeps the events parsed (reader.Events(keep_parsed)): no second parse;
- a .jsonl.gz trace is compressed as the worker reads it (files.GzipAhead): the same bytes.
After the program: facts 2-4 ms, compression 3-4 ms; what `run` does after the program ends is ~8 ms in all.
Before the program: ~35 ms from the interpreter's start to the program's (the CLI, the header, the recorder's check).
What is left is the worker's CPU while the program runs (~320 ms of the dlltrace process's own CPU in all: imports
~130, the trace read and checked ~30, the ELF facts ~20, the replay ahead ~30, the compression ~10), at nice +5 on
the core the program leaves; the untraced program itself uses 1.2 cores on average (OpenBLAS's threads).
This script, 15 runs, the machine otherwise quiet:
  untraced                1524.5 ms 1.000x     1777.9 ms 1.000x     1180.3 ms 1.000x
  recorder only           1534.3 ms 1.006x     1788.4 ms 1.006x     1275.8 ms 1.081x   (aim <= 1.06x)
  dlltrace run            1800.8 ms 1.181x     2240.5 ms 1.260x     1345.1 ms 1.140x   (aim <= 1.15x)
"""

from __future__ import annotations

import argparse
import os
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACER = Path(__file__).resolve().parents[1] / "tracer"
OTHER = os.environ.get("DLLTRACE_BENCH_TRACER")  # (another tree's tracer/, timed in the same rounds: to compare)
sys.path.insert(0, str(TRACER))

VENV = Path("/tmp/dlltrace-bench-scipy")
PROGRAM = "import scipy.stats, sklearn, pandas"


def scipy_python(given: str | None) -> str | None:
    """A Python that imports the program's modules (made in VENV when none is given)."""
    py = given or os.environ.get("DLLTRACE_BENCH_SCIPY_PYTHON") or str(VENV / "bin" / "python")
    ok = Path(py).exists() and subprocess.run([py, "-c", PROGRAM], capture_output=True).returncode == 0
    if ok or given:
        return py if ok else None
    print(f"making {VENV} (python3 -m venv; pip install scipy scikit-learn pandas) ...", flush=True)
    r = subprocess.run(f"python3 -m venv {VENV} && {VENV}/bin/pip install -q scipy scikit-learn pandas",
                       shell=True, capture_output=True, text=True)
    if r.returncode != 0:
        print("could not make the venv:", (r.stderr.strip().splitlines() or ["?"])[-1])
        return None
    return str(VENV / "bin" / "python")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall time, CPU time: user + system of the command and its children)"""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


ENV_OF = """import json, os, sys
from pathlib import Path
from dlltrace.trace.linux import recorder_dir, recorder_env
print(json.dumps(recorder_env(json.loads(sys.argv[1]), recorder_dir(), Path(sys.argv[2]))))
"""


def other_recorder_env(tracer: str, base: dict[str, str], trace: Path) -> dict[str, str]:
    """recorder_env of the tree at `tracer` (its recorder, its bootstrap), asked of that tree."""
    r = subprocess.run([sys.executable, "-c", ENV_OF, json.dumps(base), str(trace)], capture_output=True, text=True,
                       env=dict(base, PYTHONPATH=tracer), check=True)
    return json.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--python", default=None, help="a Python with scipy, scikit-learn and pandas")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of untraced and recorder only, once each, under valgrind's callgrind "
                         "(PYTHONHASHSEED=0): the same on a loaded machine; minutes each")
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        print("bench/linux_run.py: Linux only")
        return 0
    py = scipy_python(a.python)
    if py is None:
        print("skipped: no Python with scipy, scikit-learn and pandas (offline?)")
        return 0
    from dlltrace.trace.linux import recorder_dir, recorder_env

    rec = recorder_dir()
    tmp = Path(tempfile.mkdtemp(prefix="dlltrace-bench-"))
    cmd = [py, "-c", PROGRAM]
    base = dict(os.environ)
    base.pop("PYTHONPATH", None)
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # (the warm-up writes the .pyc files an install has: pip compiles them)
    trace = tmp / "t.jsonl"
    modes: dict[str, tuple[list[str], dict[str, str]]] = {
        "untraced": (cmd, base),
        "recorder only": (cmd, recorder_env(dict(base), rec, tmp / "r.jsonl")),
        "dlltrace run": ([sys.executable, "-m", "dlltrace", "run", "-o", str(trace), "--", *cmd],
                         dict(base, PYTHONPATH=str(TRACER))),
    }
    if OTHER:
        modes["recorder only (other)"] = (cmd, other_recorder_env(OTHER, base, tmp / "r.jsonl"))
        modes["dlltrace run (other)"] = ([sys.executable, "-m", "dlltrace", "run", "-o", str(tmp / "o.jsonl"), "--",
                                          *cmd], dict(base, PYTHONPATH=OTHER))
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    order = list(modes)
    for c, env in modes.values():  # a warm-up of each (caches, .pyc files)
        timed(c, env)
    for r in range(a.runs):
        random.Random(r).shuffle(order)
        for m in order:
            c, env = modes[m]
            (tmp / "r.jsonl").write_text("")
            times[m].append(timed(c, env))
    evs = [json.loads(x).get("ev") for x in trace.read_text().splitlines() if x.strip()]
    objs, facts = evs.count("objopen"), evs.count("elf_file")
    base_t = statistics.median(w for w, _ in times["untraced"])
    base_c = statistics.median(c for _, c in times["untraced"])
    base_min = min(w for w, _ in times["untraced"])
    print(f"linux run bench: {PROGRAM!r} with {py}; {objs} objects opened, {facts} elf_file facts; median of "
          f"{a.runs} runs, shuffled")
    if OTHER:
        print(f"  (other): the tree of {OTHER}")
    aims = {"recorder only": 1.06, "dlltrace run": 1.15}
    # (best: the fastest run of each, the cost with the least of the machine's own noise in it -- other jobs, a
    # virtual machine's neighbours only ever add time; the untraced program alone moved by 50% from run to run)
    print(f"  {'':21s} {'wall':>11s} {'ratio':>6s}   {'CPU':>11s} {'ratio':>6s}   {'best wall':>11s} {'ratio':>6s}")
    for m, ts in times.items():
        med = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        best = min(w for w, _ in ts)
        aim = f"   (aim <= {aims[m]:.2f}x)" if m in aims else ""
        print(f"  {m:21s} {med * 1000:8.1f} ms {med / base_t:5.3f}x   {cpu * 1000:8.1f} ms {cpu / base_c:5.3f}x   "
              f"{best * 1000:8.1f} ms {best / base_min:5.3f}x{aim}")
    if a.instructions:
        counted = {m: instructions(modes[m][0], modes[m][1], tmp) for m in modes if m.startswith(("untraced", "recorder"))}
        base_i = counted["untraced"]
        print("  instructions (callgrind, PYTHONHASHSEED=0):")
        for m, n in counted.items():
            print(f"  {m:21s} {n / 1e9:8.3f} G    {n / base_i:5.3f}x" if n and base_i else f"  {m:21s} not counted")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def instructions(cmd: list[str], env: dict[str, str], tmp: Path) -> int:
    """The instructions `cmd` runs (valgrind --tool=callgrind), 0 when valgrind is missing or failed."""
    if shutil.which("valgrind") is None:
        return 0
    (tmp / "r.jsonl").write_text("")
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}", *cmd],
                       env=dict(env, PYTHONHASHSEED="0"), capture_output=True, text=True)
    found = [line.split(":")[-1].strip().replace(",", "") for line in r.stderr.splitlines() if "Collected :" in line]
    return int(found[-1]) if found and found[-1].isdigit() else 0


if __name__ == "__main__":
    raise SystemExit(main())
