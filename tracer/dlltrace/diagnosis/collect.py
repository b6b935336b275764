"""At the end of `dlltrace run`: read from the real disk the facts a replay will need and
store them in the trace as `file` events (docs/trace-format.md), so that `dlltrace report`
works from the trace alone, on any OS.

The facts are exactly those the simulator asks for while replaying the trace against the
live disk (every candidate file's PE facts, every folder's existence), plus near misses:
the missing name in likely places (PATH, CUDA_PATH*, conda Library\\bin,
site-packages\\nvidia\\*\\bin, torch\\lib, the Python folder) and close names
(cublas64_11.dll when cublas64_12.dll is wanted).

Export lists are then trimmed to what the trace asks for (worlds/recorded.trim_file_events,
docs/trace-format.md "What a trace keeps"): torch_cpu.dll alone has 58,481 export names, and a
replay needs the few hundred some recorded module imports. `DLLTRACE_KEEP_ALL_EXPORTS=1` (or
collect_facts(keep_all=True)) keeps every export: a switch for tests and bench/trace_size.py, which
compare a trimmed trace with a full one.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Iterable, Optional

from dlltrace import winpath
from dlltrace.worlds.factscache import FactsCache, default_cache_dir
from dlltrace.worlds.live import LiveWorld, PathMap, listdir
from dlltrace.worlds.recorded import RecordingWorld, trim_file_events
from dlltrace.diagnosis.replay import can_replay_start, replay, replay_start, system_and_process
from dlltrace.trace.files import event_lines
from dlltrace.trace.reader import Trace
from dlltrace.worlds.world import ProcessState


def near_miss_places(trace: Trace, pid: int, process: ProcessState, to_host: PathMap) -> list[str]:
    """Folders where a missing DLL often is, for this process (its state as the trace began)."""
    env = process.env
    places: list[str] = [process.app_dir]
    places += process.path
    # and every PATH the program set while it ran (SetEnvironmentVariableW, os.environ)
    for e in trace.of("setenv", pid=pid):
        if str(e.get("name", "")).upper() == "PATH" and isinstance(e.get("value"), str):
            places += [p for p in e["value"].split(";") if p.strip()]
    for k, v in env.items():
        if k.upper() == "CUDA_PATH" or k.upper().startswith("CUDA_PATH_V"):
            places.append(winpath.join(v, "bin"))
        if k.upper() in ("CONDA_PREFIX", "VIRTUAL_ENV"):
            places += [winpath.join(v, "Library\\bin"), winpath.join(v, "bin"), winpath.join(v, "Scripts")]
    py = next(trace.of("py_env", pid=pid), None) or {}
    for key in ("executable",):
        if isinstance(py.get(key), str) and winpath.is_absolute(py[key]):
            places.append(winpath.dirname(py[key]))
    for key in ("prefix", "base_prefix", "exec_prefix", "conda_prefix"):
        if isinstance(py.get(key), str) and winpath.is_absolute(py[key]):
            places += [py[key], winpath.join(py[key], "Library\\bin"), winpath.join(py[key], "DLLs")]
    site = [p for p in (py.get("sys_path") or []) if isinstance(p, str) and p.lower().endswith("site-packages")]
    # a Python install's own layout next to the program (python.exe's folder, a venv's root): its
    # Lib\site-packages, also when the program is not Python or its sys.path was not recorded
    for root in (process.app_dir, winpath.dirname(process.app_dir)):
        own = winpath.join(root, "Lib\\site-packages")
        if listdir(to_host(own)):
            site.append(own)
    # the site-packages folders the loaded modules live in (also for a host that is not Python)
    for e in trace.of("load_begin", pid=pid):
        name = e.get("name")
        if isinstance(name, str) and "\\site-packages\\" in name.lower():
            i = name.lower().index("\\site-packages\\")
            site.append(name[:i + len("\\site-packages")])
    for sp in site:
        places.append(winpath.join(sp, "torch\\lib"))
        # wheels such as mkl put DLLs in <prefix>\Library\bin: <userbase>\PythonXY\Library\bin for a
        # --user install (…\PythonXY\site-packages), <venv>\Library\bin for …\Lib\site-packages
        places.append(winpath.join(winpath.dirname(sp), "Library\\bin"))
        places.append(winpath.join(winpath.dirname(winpath.dirname(sp)), "Library\\bin"))
        nvidia = winpath.join(sp, "nvidia")
        for sub in listdir(to_host(nvidia)):
            places.append(winpath.join(nvidia, sub + "\\bin"))
    places += [e["path"] for e in trace.of("adddir", pid=pid) if isinstance(e.get("path"), str)]
    seen, out = set(), []
    for p in places:
        if p and winpath.is_absolute(p) and winpath.key(p) not in seen:
            seen.add(winpath.key(p))
            out.append(winpath.normalize(p))
    return out


KEEP_ALL_EXPORTS_ENV = "DLLTRACE_KEEP_ALL_EXPORTS"  # "1": no trimming (a test and bench switch)


def keep_all_exports() -> bool:
    """Whether the environment asks for full export lists (KEEP_ALL_EXPORTS_ENV set to 1)."""
    return os.environ.get(KEEP_ALL_EXPORTS_ENV, "") == "1"


def collect_facts(trace: Trace, to_host: PathMap, *, keep_all: Optional[bool] = None,
                  use_cache: bool = True) -> list[dict[str, Any]]:
    """The `file` events to append to the trace: whatever the replay of each process asks the
    disk, through a recording world. The replay explains every failed load, and so looks up its
    near misses (the missing name in the likely places, close names) as the report will.
    Export lists are trimmed to the names the trace asks for (trim_file_events) unless `keep_all`
    (None: KEEP_ALL_EXPORTS_ENV decides). The files' PE facts are kept between runs by each file's identity
    (worlds/factscache.py) unless not `use_cache` (`run --no-cache`)."""
    events: list[dict[str, Any]] = []
    cache = FactsCache(default_cache_dir() if use_cache else None)  # (the same system DLLs every run)

    def record(pid: int, replay_with: Callable[[RecordingWorld], object]) -> None:
        system, process = system_and_process(trace, pid)
        world = RecordingWorld(LiveWorld(system, to_host, near_miss_places(trace, pid, process, to_host), cache))
        replay_with(world)
        events.extend({**e, "pid": pid, "seq": 0, "tid": 0, "t": 0} for e in world.events())

    for pid in trace.pids:
        record(pid, lambda world: replay(trace, world, pid))
    for pid in trace.start_failures():
        if can_replay_start(trace, pid):
            record(pid, lambda world: replay_start(trace, pid, world))
    if keep_all if keep_all is not None else keep_all_exports():
        return events
    return trim_file_events(events)


def trim_trace_bytes(data: bytes) -> bytes:
    """A whole trace file's bytes with its `file` events trimmed as `dlltrace run` trims them
    (trim_file_events over all of them), every other line byte for byte as it was: a full trace
    (DLLTRACE_KEEP_ALL_EXPORTS=1) made into the one `run` writes by default, for tests and
    bench/trace_size.py. A line that is not a JSON object stays as it is."""
    lines = data.splitlines(keepends=True)
    facts: dict[int, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        if b'"file"' not in line:
            continue
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("ev") == "file":
            facts[i] = e
    trimmed = dict(zip(facts, trim_file_events(facts.values())))
    return b"".join(event_lines([trimmed[i]]) if i in trimmed else line for i, line in enumerate(lines))
