"""The Linux recorder (native/audit: LD_AUDIT + an LD_PRELOAD dlerror wrapper) and trace/linux.py: what it
records agrees with LD_DEBUG=libs and with the model, it follows fork and exec, loses no line across
threads and processes, and never changes the program (its exit code, its dlerror text). Linux with gcc."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import ldso_kit as kit
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def _need() -> None:
    why = "" if sys.platform.startswith("linux") and shutil.which("gcc") else "the Linux recorder needs Linux and gcc"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="session")
def recorder(tmp_path_factory) -> Path:
    _need()
    from dlltrace.trace.linux import build_recorder
    d = tmp_path_factory.mktemp("recorder")
    build_recorder(d)
    return d


def traced_env(recorder: Path, trace: Path, **extra: str) -> dict[str, str]:
    from dlltrace.trace.linux import AUDIT_LIB, PRELOAD_LIB

    env = dict(os.environ, DLLTRACE_TRACE=str(trace), LD_AUDIT=str(recorder / AUDIT_LIB), LD_PRELOAD=str(recorder / PRELOAD_LIB))
    env.update(extra)
    return env


def events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines() if line.startswith("{")]


def searches(evs: list[dict], pid: int | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each bare name searched (LA_SER_ORIG), with every file tried and its flag."""
    out: list[tuple[str, list[tuple[str, str]]]] = []
    for e in evs:
        if e.get("ev") != "objsearch" or (pid is not None and e["pid"] != pid):
            continue
        if e["flag"] == "LA_SER_ORIG":
            out.append((e["name"], []))
        elif out:
            out[-1][1].append((e["name"], e["flag"]))
    return [(n, tried) for n, tried in out if "/" not in n]


def test_recorder_agrees_with_ld_debug_and_the_model(recorder, tmp_path):
    """On generated layouts (tests/ldso_kit.py), the recorder's candidates are LD_DEBUG's "trying" lines,
    and their la_objsearch flags are the model's search steps."""
    pool = kit.build_pool(tmp_path)
    for seed in range(40):
        lay = kit.generate(1000 + seed)
        L = kit.place(tmp_path, pool, lay)
        trace = tmp_path / "t.jsonl"
        trace.write_text("")
        env = {"PATH": "/usr/bin:/bin", "LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(L / "dbg"),
               "DLLTRACE_TRACE": str(trace), "LD_AUDIT": str(recorder / "libdlltrace_audit.so"),
               "DLT_DLIB": str(L / "dd" / "libdltd.so")}
        if lay.llp:
            env["LD_LIBRARY_PATH"] = ":".join(str(L / d) for d in lay.llp)
        argv = kit.host_argv(L, lay)
        plain = subprocess.run(argv, env={k: v for k, v in env.items() if k not in ("LD_AUDIT", "DLLTRACE_TRACE")},
                               capture_output=True, text=True)
        for f in L.glob("dbg.*"):
            f.unlink()
        # under LD_AUDIT, ld.so first loads the recorder and its libc into a namespace of their own ([1] in
        # LD_DEBUG; la_objsearch does not see it); the folders those searches find missing are then skipped
        # by the program's searches: the model is told of the audit library (LinuxProcess.audit)
        traced = subprocess.run(argv, env=env, capture_output=True, text=True)
        debug = kit.parse_ld_debug("".join(f.read_text() for f in L.glob("dbg.*")), ns=0)
        assert traced.returncode == plain.returncode
        # the host's answers are the same traced (the objects mapped: but for the recorder itself)
        assert [x for x in traced.stdout.splitlines() if "dlltrace" not in x] == plain.stdout.splitlines()
        rec = searches(events(trace))
        assert [(n, [p for p, _ in tried]) for n, tried in rec] == debug, lay.describe()
        model = kit.run_model(L, lay, audit=(env["LD_AUDIT"],))
        assert [(n, [p for p, _ in t]) for n, t in rec] == model.lookups, lay.describe()
        # flags: the model's step for each candidate
        assert [[fl for _, fl in t] for _, t in rec] == model.sers, lay.describe()


def test_recorder_keeps_exit_code_and_dlerror_text(recorder, tmp_path):
    code = "import ctypes\ntry:\n    ctypes.CDLL('libcudart.so.11.0')\nexcept OSError as e:\n    print(e)\n    raise SystemExit(3)"
    plain = subprocess.run([PY, "-c", code], capture_output=True, text=True)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    traced = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=traced_env(recorder, trace))
    assert plain.returncode == traced.returncode == 3
    assert traced.stdout == plain.stdout == "libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
    evs = events(trace)
    assert any(e["ev"] == "dlerror" and e["text"] == plain.stdout.strip() for e in evs)
    assert subprocess.run(["sh", "-c", "exit 7"], env=traced_env(recorder, trace)).returncode == 7


def test_recorder_follows_fork_and_exec(recorder, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    code = ("import ctypes, os\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    try: ctypes.CDLL('libforkchild.so')\n"
            "    except OSError: pass\n"
            "    os.execv('/bin/true', ['/bin/true'])\n"
            "os.waitpid(pid, 0)\n"
            "print(pid)\n")
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=traced_env(recorder, trace))
    child = int(p.stdout.strip())
    evs = events(trace)
    names = [e["name"] for e in evs if e["ev"] == "objsearch" and e["pid"] == child and e["flag"] == "LA_SER_ORIG"]
    assert "libforkchild.so" in names  # the forked child's events carry its own pid
    seqs = [e["seq"] for e in evs if e["pid"] == child and e["seq"]]
    assert seqs[0] == 1  # and its own numbering
    # the exec'd program (same pid) loaded the recorder again
    starts = [e for e in evs if e["ev"] == "audit_start" and e["pid"] == child]
    assert [os.path.basename(e["exe"]) for e in starts] == ["true"]


def test_recorder_is_lossless_across_threads_and_processes(recorder, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    worker = ("import ctypes, os, threading, sys\n"
              "def run(t):\n"
              "    for i in range(40):\n"
              "        try: ctypes.CDLL(f'libmiss_{os.getpid()}_{t}_{i}.so')\n"
              "        except OSError: pass\n"
              "ts = [threading.Thread(target=run, args=(t,)) for t in range(6)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]\n")
    parent = ("import subprocess, sys\n"
              f"ps = [subprocess.Popen([sys.executable, '-c', {worker!r}]) for _ in range(4)]\n"
              "sys.exit(sum(p.wait() for p in ps))\n")
    assert subprocess.run([PY, "-c", parent], env=traced_env(recorder, trace)).returncode == 0
    lines = trace.read_text().splitlines()
    evs = [json.loads(line) for line in lines]  # every line whole
    miss = Counter(e["pid"] for e in evs if e["ev"] == "objsearch" and e["flag"] == "LA_SER_ORIG"
                   and e["name"].startswith("libmiss_"))
    assert sorted(miss.values()) == [240] * 4
    for pid in miss:
        seqs = sorted(e["seq"] for e in evs if e["pid"] == pid and e["seq"])
        assert seqs == list(range(1, len(seqs) + 1))  # no number lost or given twice


def test_trace_linux_command_ctypes_cudart(recorder, tmp_path, monkeypatch):
    from dlltrace import runner
    from dlltrace.trace import linux
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    out = tmp_path / "t.jsonl"
    rc, trace = runner.trace_linux_command([PY, "-c", "import ctypes; ctypes.CDLL('libcudart.so.11.0')"], str(out))
    assert rc == 1
    assert trace.header.platform == "linux" and not trace.warnings
    evs = list(trace.events)
    assert any(e.get("ev") == "objsearch" and e.get("name") == "libcudart.so.11.0" for e in evs)
    assert any(e.get("ev") == "dlerror" and "libcudart.so.11.0" in e.get("text", "") for e in evs)


def test_run_keeps_the_replay_a_report_of_its_trace_makes(recorder, tmp_path, monkeypatch):
    """`run` replays the trace once, while it gathers the facts (against this machine, its ELF facts partly read
    while the program ran: runner.LinuxFactsMeanwhile), and keeps that replay for its summary
    (Trace.replayed): it is the replay a report makes of the trace file alone (its recorded world), call for
    call, fixes included; and the trace it returns holds what the file holds."""
    from dlltrace import runner
    from dlltrace.diagnosis.replay_linux import replay_linux
    from dlltrace.trace import linux
    from dlltrace.trace.reader import read_trace
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    code = ("import ctypes, time, subprocess, sys; ctypes.CDLL('libm.so.6'); time.sleep(0.3); "
            "ctypes.CDLL('libcudart.so.11.0')")
    rc, trace = runner.trace_linux_command([PY, "-c", code], str(tmp_path / "t.jsonl"))
    assert rc == 1 and trace.replayed is not None
    again = read_trace(trace.path)
    assert [dict(e) for e in trace.events] == [dict(e) for e in again.events]
    fresh = replay_linux(again.events)
    assert fresh == trace.replayed
    failed = [c for c in fresh if c.error]
    assert [c.name for c in failed] == ["libcudart.so.11.0"] and failed[0].fixes is not None


SLOW_TEARDOWN = """
import ctypes, time
class Slow:
    def __del__(self):
        time.sleep(0.8)  # the interpreter's teardown, after py_exit: the facts are made meanwhile
        {more}
keep = Slow()
ctypes.CDLL('libm.so.6')
"""


@pytest.mark.parametrize("more", ["pass", "ctypes.CDLL('libcudart.so.11.0')"], ids=["nothing-after", "a-load-after"])
def test_run_makes_the_facts_ahead_while_python_tears_down(recorder, tmp_path, monkeypatch, more):
    """Once the program's Python has ended (py_exit), `run`'s worker replays the trace so far and makes its facts
    (runner.FactsAhead) while the interpreter tears down; they are appended when nothing after changes the replay
    (calls_unchanged_after), else made again of the whole trace: a library loaded in the teardown (a __del__) is in the
    summary's replay. Either way the replay kept is the one a report of the file makes."""
    from dlltrace import runner
    from dlltrace.diagnosis.replay_linux import replay_linux
    from dlltrace.trace import linux
    from dlltrace.trace.reader import read_trace
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    import threading

    made: list[str] = []
    real = runner.linux_facts

    def facts(read, world=None):
        made.append(threading.current_thread().name)
        return real(read, world)

    monkeypatch.setattr(runner, "linux_facts", facts)
    rc, trace = runner.trace_linux_command([PY, "-c", SLOW_TEARDOWN.format(more=more)], str(tmp_path / "t.jsonl"))
    assert rc == 0 and trace.replayed is not None
    assert made[0] == "dlltrace-trace-reader"  # (made ahead, by the worker)
    names = [c.name for c in trace.replayed]
    if more == "pass":
        assert made == ["dlltrace-trace-reader"] and "libcudart.so.11.0" not in names
    else:
        assert made == ["dlltrace-trace-reader", threading.main_thread().name]  # (made again, after)
        assert [c.name for c in trace.replayed if c.error] == ["libcudart.so.11.0"]
    again = read_trace(trace.path)
    assert [dict(e) for e in trace.events] == [dict(e) for e in again.events]
    assert replay_linux(again.events) == trace.replayed
    assert sum(e.get("ev") == "elf_system" for e in again.events) == 1


def test_a_compressed_trace_is_compressed_as_it_is_read(recorder, tmp_path, monkeypatch):
    """A .jsonl.gz trace's spill is compressed by `run`'s worker as it reads it (files.GzipAhead); after the
    program, only the rest (its end, the facts) is: the file is the same bytes as one compression of the whole,
    and reads back as the trace run returned."""
    import gzip

    from dlltrace import runner
    from dlltrace.trace import files, linux
    from dlltrace.trace.reader import read_trace
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    fed: list[int] = []
    real = runner.finish_trace

    def finish(spill, out, ahead=None):
        fed.append(ahead.fed if ahead is not None else 0)
        return real(spill, out, ahead)

    monkeypatch.setattr(runner, "finish_trace", finish)
    out = tmp_path / "t.jsonl.gz"
    rc, trace = runner.trace_linux_command([PY, "-c", "import ctypes; ctypes.CDLL('libm.so.6')"], str(out))
    assert rc == 0 and trace.path == str(out) and not (tmp_path / "t.jsonl.gz.part").exists()
    data = gzip.decompress(out.read_bytes())
    assert 0 < fed[0] < len(data)
    import io
    again = io.BytesIO()
    with files._gzip_writer(again) as gz:
        gz.write(data)
    assert again.getvalue() == out.read_bytes()
    assert [dict(e) for e in read_trace(out).events] == [dict(e) for e in trace.events]


def test_gzip_ahead_lets_go_past_its_limit(tmp_path, monkeypatch):
    """Past GzipAhead.LIMIT bytes fed, it lets go of what it compressed, and finish_trace compresses the whole
    spill: the same file."""
    import gzip

    from dlltrace.trace import files
    monkeypatch.setattr(files.GzipAhead, "LIMIT", 100)
    spill = tmp_path / "t.jsonl.gz.part"
    lines = [b'{"ev":"x","n":%d}\n' % i for i in range(20)]
    spill.write_bytes(b"".join(lines))
    ahead = files.GzipAhead()
    for line in lines[:10]:
        ahead.feed(line)
    assert ahead.gz is None and ahead.buf.getvalue() == b""
    out = files.finish_trace(spill, tmp_path / "t.jsonl.gz", ahead)
    assert gzip.decompress(out.read_bytes()) == b"".join(lines) and files.is_spill(spill)
    assert not files.is_spill(tmp_path / "t.jsonl") and not files.is_spill(tmp_path / "t.part")


AFTER_PY_EXIT = {
    # the program's Python ends twice (its exit functions run by hand): the facts made ahead at the first are not
    # the whole trace's; a load after it fails
    "py-exit-twice": """
import atexit, ctypes, time
atexit._run_exitfuncs()
time.sleep(0.4)
try:
    ctypes.CDLL('libnosuch_after.so.4')
except OSError:
    pass
class Slow:
    def __del__(self):
        time.sleep(0.5)
keep = Slow()
""",
    # a forked child (no exec: it has the parent's py_exit hook, and writes none of the parent's pid) loads after the
    # parent's py_exit
    "fork-child-after": """
import ctypes, os, time
class Slow:
    def __del__(self):
        time.sleep(0.5)
keep = Slow()
if os.fork() == 0:
    time.sleep(0.2)
    try:
        ctypes.CDLL('libnosuch_after.so.5')
    except OSError:
        pass
    os._exit(0)
""",
}


@pytest.mark.parametrize("name", list(AFTER_PY_EXIT))
def test_run_facts_made_ahead_are_not_kept_past_a_later_load(recorder, tmp_path, monkeypatch, name):
    """A load after the facts were made ahead (after a first py_exit, or in a forked child of the program after its
    py_exit) has them made again: the replay `run` keeps has that load's failure, and is a report's of the file."""
    from dlltrace import runner
    from dlltrace.diagnosis.replay_linux import replay_linux
    from dlltrace.trace import linux
    from dlltrace.trace.reader import read_trace
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    rc, trace = runner.trace_linux_command([PY, "-c", AFTER_PY_EXIT[name]], str(tmp_path / "t.jsonl.gz"))
    assert rc == 0 and trace.replayed is not None
    assert [c.name for c in trace.replayed if c.error] == ["libnosuch_after.so." + ("4" if "twice" in name else "5")]
    again = read_trace(trace.path)
    assert [dict(e) for e in trace.events] == [dict(e) for e in again.events]
    assert replay_linux(again.events) == trace.replayed


def test_calls_unchanged_after_only_when_nothing_after_changes_a_call():
    from dlltrace.diagnosis.replay_linux import calls_unchanged_after
    pre = [{"ev": "audit_start", "pid": 1}, {"ev": "objsearch", "pid": 1, "name": "a"}, {"ev": "py_exit", "pid": 1}]
    tail = [{"ev": "activity", "pid": 1, "flag": "LA_ACT_DELETE"}, {"ev": "exit", "pid": 1}, {"ev": "objclose", "pid": 1}]
    assert calls_unchanged_after(pre, 3) and calls_unchanged_after(pre + tail, 3)
    assert not calls_unchanged_after(pre[:2], 3)  # (fewer events than were replayed: not that trace)
    assert not calls_unchanged_after(pre, 1)  # (its objsearch came after)
    for kind in ("objsearch", "objopen", "dlerror", "fork", "audit_start", "py_import"):
        assert not calls_unchanged_after(pre + tail + [{"ev": kind, "pid": 1}], 3), kind


# --- replay: the trace against the model ----------------------------------------------------------------
def test_report_of_ctypes_cudart_names_the_leaf_with_every_candidate(recorder, tmp_path, monkeypatch):
    from dlltrace import runner
    from dlltrace.trace import linux
    from dlltrace.render.linux import linux_report_dict
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    rc, trace = runner.trace_linux_command([PY, "-c", "import ctypes; ctypes.CDLL('libcudart.so.11.0')"],
                                          str(tmp_path / "t.jsonl"))
    assert rc == 1
    rep = linux_report_dict(trace.events)
    assert rep["calls"] == rep["agree"]  # every call: the model tried what ld.so tried
    mine = [f for f in rep["failed"] if f["name"] == "libcudart.so.11.0"]
    assert len(mine) == 1
    f = mine[0]
    assert f["leaf"]["name"] == "libcudart.so.11.0" and f["leaf"]["cause"] == "not_found"
    assert f["error"] == f["real_error"] == "libcudart.so.11.0: cannot open shared object file: No such file or directory"
    assert f["leaf"]["parent"].endswith(".so")  # _ctypes: the object whose search it was
    assert f["candidates"] and all(c["rule"] and c["result"] == "not_there" for c in f["candidates"])
    assert [c["path"] for c in f["candidates"]] == [c["path"] for c in f["recorded"]]
    rules = {c["rule"] for c in f["candidates"]}
    assert "system search path" in rules


def test_report_chain_through_dt_needed(recorder, tmp_path):
    """dlopen(libdlta.so) whose DT_NEEDED libdltb.so is missing: the leaf is libdltb.so, needed by libdlta.so,
    the chain libdlta.so -> libdltb.so, its candidates under libdlta's DT_RUNPATH."""
    from dlltrace.render.linux import linux_report_dict
    pool = kit.build_pool(tmp_path)
    lay = kit.Layout(0, "h0", {"d1/libdlta.so": "a41"}, ["d1"], [(2, "libdlta.so")])  # a41: RUNPATH $ORIGIN, needs libdltb
    L = kit.place(tmp_path, pool, lay)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    env = traced_env(recorder, trace, LD_LIBRARY_PATH=str(L / "d1"))
    p = subprocess.run([str(L / "bin" / "host"), "2", "libdlta.so"], env=env, capture_output=True, text=True)
    assert p.stdout.startswith("ERR libdltb.so: cannot open shared object file")
    rep = linux_report_dict(events(trace))
    f = next(f for f in rep["failed"] if f["name"] == "libdlta.so")
    assert f["agrees"] and f["chain"] == ["libdlta.so", "libdltb.so"]
    assert f["leaf"]["name"] == "libdltb.so" and f["leaf"]["parent"] == str(L / "d1" / "libdlta.so")
    assert f["candidates"][0]["rule"] == "LD_LIBRARY_PATH"
    assert any(c["rule"] == f"RUNPATH of {L / 'd1' / 'libdlta.so'}" for c in f["candidates"])


def test_fixes_for_a_missing_cuda_runtime_are_rerun_and_real(recorder, tmp_path):
    """libdlta.so needs libcudart.so.11.0, which only the venv's nvidia wheel folder has. The replay offers
    LD_LIBRARY_PATH, patchelf, ldconfig and nvidia-cuda-runtime-cu11, each verified by the model; the real
    ld.so loads with the LD_LIBRARY_PATH fix as the model says."""
    from dlltrace.diagnosis.replay_linux import replay_linux
    pool = kit.build_pool(tmp_path)
    venv = tmp_path / "venv"
    wheel = venv / "lib" / "python3.11" / "site-packages" / "nvidia" / "cuda_runtime" / "lib"
    wheel.mkdir(parents=True)
    (venv / "bin").mkdir()
    shutil.copy2(pool / "h0", venv / "bin" / "host")
    src = tmp_path / "c.c"
    src.write_text("int cudart_f(void) { return 11; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(wheel / "libcudart.so.11.0"), str(src),
                    "-Wl,-soname,libcudart.so.11.0"], check=True)
    d1 = tmp_path / "d1"
    d1.mkdir()
    (tmp_path / "a.c").write_text("int cudart_f(void); int dlta_f(void) { return cudart_f(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d1 / "libdlta.so"), str(tmp_path / "a.c"), f"-L{wheel}",
                    "-Wl,--no-as-needed", "-l:libcudart.so.11.0", "-Wl,-soname,libdlta.so"], check=True)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    host = [str(venv / "bin" / "host"), "2", "libdlta.so"]
    p = subprocess.run(host, env=traced_env(recorder, trace, LD_LIBRARY_PATH=str(d1)), capture_output=True, text=True)
    assert p.stdout.startswith("ERR libcudart.so.11.0: cannot open shared object file")
    calls = [c for c in replay_linux(events(trace)) if c.name == "libdlta.so"]
    assert len(calls) == 1 and calls[0].leaf is not None and calls[0].leaf.name == "libcudart.so.11.0"
    fixes = {f.action: f for f in calls[0].fixes}
    # (on a machine with no NVIDIA GPU, read here from sysfs, the no-GPU advice too: rule_no_gpu_for_cuda_library)
    vendors = [open(v).read().strip().lower() for v in glob.glob("/sys/bus/pci/devices/*/vendor")]
    no_gpu = fixes.pop("install_driver", None)
    assert (no_gpu is not None and no_gpu.value == "no_gpu") == bool(vendors and "0x10de" not in vendors), no_gpu
    assert set(fixes) == {"set_env", "set_runpath", "add_ld_so_conf", "install_package"}  # (model.Fix: one type)
    assert all(f.verified for f in fixes.values())
    pkg = fixes["install_package"]
    assert pkg.package == "nvidia-cuda-runtime-cu11" and pkg.then and pkg.preloaded_by == "torch"
    assert pkg.folder == str(wheel)
    env_fix = fixes["set_env"]
    assert env_fix.variable == "LD_LIBRARY_PATH" and env_fix.value == f"{wheel}:{d1}"
    assert "export LD_LIBRARY_PATH=" in fix_text(env_fix)
    # the real loader agrees with the model's verdict on the LD_LIBRARY_PATH fix
    ok = subprocess.run(host, env=dict(os.environ, LD_LIBRARY_PATH=env_fix.value), capture_output=True, text=True)
    assert ok.stdout.startswith(f"OK {d1 / 'libdlta.so'}")
    # and on patchelf's, applied for real (the program's own LD_LIBRARY_PATH, d1, as it ran: the new
    # RUNPATH of libdlta.so must find libcudart.so.11.0, which failed above with that same environment)
    if shutil.which("patchelf") is None:
        if os.environ.get("CI"):
            pytest.fail("needs patchelf -- CI installs it (tools/setup.sh --tests)")
        pytest.skip("patchelf's fix not applied: no patchelf here (CI installs it: tools/setup.sh --tests)")
    subprocess.run(fix_text(fixes["set_runpath"]), shell=True, check=True)  # (its words are what a user pastes)
    again = subprocess.run(host, env=dict(os.environ, LD_LIBRARY_PATH=str(d1)), capture_output=True, text=True)
    assert again.stdout.startswith(f"OK {d1 / 'libdlta.so'}"), again.stdout + again.stderr


# --- the Python context, in a real CPython ---------------------------------------------------------------
EXT_MISSING = r"""
#include <Python.h>
int dltgone_f(void);
static PyObject *f(PyObject *s, PyObject *a) { return PyLong_FromLong(dltgone_f()); }
static PyMethodDef m[] = {{"f", f, METH_NOARGS, 0}, {0}};
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "dltext_missing", 0, -1, m};
PyMODINIT_FUNC PyInit_dltext_missing(void) { return PyModule_Create(&d); }
"""
EXT_DLOPEN = r"""
#include <Python.h>
#include <dlfcn.h>
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "dltext_dl", 0, -1, 0};
PyMODINIT_FUNC PyInit_dltext_dl(void) {
    void *h = dlopen("libdltinner_missing.so", RTLD_NOW);  /* a dlopen inside an extension: it goes on */
    if (!h) dlerror();
    return PyModule_Create(&d);
}
"""


@pytest.fixture(scope="session")
def extensions(tmp_path_factory) -> Path:
    """A folder with two gcc-built extension modules: dltext_missing (DT_NEEDED libdltgone.so, absent at
    run time) and dltext_dl (its init dlopens a missing libdltinner_missing.so)."""
    _need()
    import sysconfig
    inc = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    d = tmp_path_factory.mktemp("ext")
    stub = d / "stub"
    stub.mkdir()
    (stub / "g.c").write_text("int dltgone_f(void) { return 7; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stub / "libdltgone.so"), str(stub / "g.c"),
                    "-Wl,-soname,libdltgone.so"], check=True)
    for name, src, extra in (("dltext_missing", EXT_MISSING, [f"-L{stub}", "-Wl,--no-as-needed", "-ldltgone"]),
                             ("dltext_dl", EXT_DLOPEN, ["-ldl"])):
        (d / f"{name}.c").write_text(src)
        subprocess.run(["gcc", "-shared", "-fPIC", f"-I{inc}", "-o", str(d / f"{name}{suffix}"), str(d / f"{name}.c"),
                        *extra], check=True)
    shutil.rmtree(stub)
    return d


def _run_python(recorder, tmp_path, monkeypatch, code: str, extensions: Path):
    from dlltrace import runner
    from dlltrace.trace import linux
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    monkeypatch.setenv("PYTHONPATH", str(extensions))
    return runner.trace_linux_command([PY, "-c", code], str(tmp_path / "t.jsonl"))


def test_python_context_import_of_an_extension_whose_dependency_is_missing(recorder, extensions, tmp_path, monkeypatch):
    from dlltrace.diagnosis.replay_linux import replay_linux
    rc, trace = _run_python(recorder, tmp_path, monkeypatch, "import dltext_missing", extensions)
    assert rc == 1
    evs = list(trace.events)
    imp = [e for e in evs if e.get("ev") == "py_import" and e.get("module") == "dltext_missing"]
    assert imp  # the bootstrap's audit hook ran in this real CPython (CPython audits an import twice)
    orig = [e for e in evs if e.get("ev") == "objsearch" and e.get("flag") == "LA_SER_ORIG" and e.get("name") == "libdltgone.so"]
    assert orig and orig[0]["ctx"] == imp[-1]["seq"]  # the native search carries the import that caused it
    call = next(c for c in replay_linux(evs) if "dltext_missing" in c.name and c.error)
    assert call.origin_kind == "python_import" and call.origin_module == "dltext_missing"
    assert call.leaf is not None and call.leaf.name == "libdltgone.so" and call.leaf.cause == "not_found"
    assert call.chain == [call.name, "libdltgone.so"] and call.agrees


def test_python_context_ctypes_cdll_of_a_missing_soname(recorder, extensions, tmp_path, monkeypatch):
    from dlltrace.diagnosis.replay_linux import replay_linux
    rc, trace = _run_python(recorder, tmp_path, monkeypatch, "import ctypes; ctypes.CDLL('libcudart.so.11.0')", extensions)
    assert rc == 1
    call = next(c for c in replay_linux(trace.events) if c.name == "libcudart.so.11.0")
    assert call.origin_kind == "ctypes" and call.origin == "ctypes.CDLL('libcudart.so.11.0')"
    assert call.error == call.real_error and call.leaf is not None and call.agrees



def test_an_ld_preload_object_ld_so_ignores_leaves_the_replay_whole(recorder, extensions, tmp_path, monkeypatch):
    """LD_PRELOAD naming a library that is not there (a tcmalloc or jemalloc not installed): ld.so says it ignores it and
    runs the program. Its failed loads are replayed and reported as without it (rules.rule_preload_ignored); before,
    the model's start failed and no call of the process was replayed ('no failed load explains it')."""
    from dlltrace.diagnosis.replay_linux import replay_linux
    monkeypatch.setenv("LD_PRELOAD", "libdlltrace_not_there.so.9")
    rc, trace = _run_python(recorder, tmp_path, monkeypatch, "import ctypes; ctypes.CDLL('libcudart.so.11.0')", extensions)
    assert rc == 1
    call = next(c for c in replay_linux(trace.events) if c.name == "libcudart.so.11.0")
    assert call.origin_kind == "ctypes" and call.leaf is not None and call.leaf.name == "libcudart.so.11.0" and call.agrees


def test_python_context_dlopen_inside_an_extension(recorder, extensions, tmp_path, monkeypatch):
    from dlltrace.diagnosis.replay_linux import replay_linux
    rc, trace = _run_python(recorder, tmp_path, monkeypatch, "import dltext_dl; print('ok')", extensions)
    assert rc == 0  # the extension went past its failed dlopen: the program is unchanged
    call = next(c for c in replay_linux(trace.events) if c.name == "libdltinner_missing.so")
    assert call.by.endswith(".so") and "dltext_dl" in call.by  # made by the extension: its search
    assert call.origin_kind == "python_import" and call.origin_module == "dltext_dl"
    assert call.error.startswith("libdltinner_missing.so: cannot open") and call.agrees



@pytest.mark.parametrize("wrapper", ["env", "script"])
def test_a_wrapper_that_sets_pythonpath_keeps_the_python_context(recorder, tmp_path, monkeypatch, wrapper):
    """`dlltrace run -- env PYTHONPATH=src python app.py`, or a script that exports PYTHONPATH before it runs Python
    (seen in a field test: the report said only 'the program exited with 1; no failed load explains it', the
    ModuleNotFoundError unrecorded): the wrapper took the bootstrap folder off PYTHONPATH. The preload library puts it
    first again in the Python process (DLLTRACE_BOOTSTRAP), which then records its imports and the exception it ends
    on, and still finds the wrapper's own folder; `python -I` ignores PYTHONPATH and is left as it is."""
    from dlltrace import runner
    from dlltrace.diagnosis.verdict_linux import linux_diagnoses
    from dlltrace.trace import linux

    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    src = tmp_path / "src"
    src.mkdir()
    (src / "mymod_dlltrace.py").write_text("X = 42\n")
    (tmp_path / "app.py").write_text("import mymod_dlltrace\nprint(mymod_dlltrace.X)\nimport nosuchmod_dlltrace\n")
    if wrapper == "env":
        command = ["env", f"PYTHONPATH={src}", PY, str(tmp_path / "app.py")]
    else:
        (tmp_path / "run.sh").write_text(f"#!/bin/sh\nexport PYTHONPATH={src}\nexec {PY} {tmp_path / 'app.py'}\n")
        command = ["sh", str(tmp_path / "run.sh")]
    rc, trace = runner.trace_linux_command(command, str(tmp_path / "t.jsonl"))
    assert rc == 1
    (main,) = [d for d in linux_diagnoses(trace) if d.end.kind == "exited"]
    assert main.outcome.exception is not None and main.outcome.exception.type == "ModuleNotFoundError", main.outcome
    assert any(e.get("module") == "mymod_dlltrace" for e in trace.of("py_import"))  # (its own folder: still there)
    rc, trace = runner.trace_linux_command([PY, "-I", str(tmp_path / "app.py")], str(tmp_path / "t2.jsonl"))
    assert rc == 1 and not list(trace.of("py_env"))


def test_trace_linux_command_compressed_signals_and_bad_commands(recorder, tmp_path, monkeypatch):
    from dlltrace.errors import EXIT_NO_COMMAND, DlltraceError
    from dlltrace import runner
    from dlltrace.trace import linux
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    out = tmp_path / "t.jsonl.gz"
    rc, trace = runner.trace_linux_command(["sh", "-c", "kill -TERM $$"], str(out))
    assert rc == 128 + 15
    assert out.exists() and not (tmp_path / "t.jsonl.gz.part").exists() and out.read_bytes()[:2] == b"\x1f\x8b"
    assert trace.header.platform == "linux" and any(e.get("ev") == "audit_start" for e in trace.events)
    with pytest.raises(DlltraceError) as e:
        runner.trace_linux_command(["/nonexistent/prog"], str(tmp_path / "u.jsonl"))
    assert e.value.exit_code == EXIT_NO_COMMAND


# --- a real wheel: nvidia-cuda-runtime-cu11's libcudart.so.11.0 -------------------------------------------
CUDART11 = ("nvidia-cuda-runtime-cu11==11.8.89", "nvidia_cuda_runtime_cu11-11.8.89-py3-none-manylinux2014_x86_64.whl")


def linux_wheel(requirement: str, filename: str) -> Path:
    """A manylinux wheel, cached beside the Windows ones (~/.cache/dlltrace-downloads/wheels); pip download
    when missing (skips locally without the network, fails in CI)."""
    import realwheels as rw

    return rw.or_skip(lambda: rw.pip_download(requirement, filename, rw.WHEEL_DIR, "--platform", "manylinux2014_x86_64",
                                              "--only-binary=:all:", "--python-version", "3.11", timeout=600))


def test_real_cudart_wheel_fix_is_what_ld_so_does(recorder, tmp_path):
    """A framework library laid out as torch's are (site-packages/fw/lib/libfw.so, DT_RUNPATH
    $ORIGIN/../../nvidia/cuda_runtime/lib) needs libcudart.so.11.0. Without the wheel: the leaf, and the
    fix nvidia-cuda-runtime-cu11, which the model says loads without LD_LIBRARY_PATH. Then the real
    wheel is unpacked there, and the real ld.so loads it, as the model said."""
    import zipfile
    from dlltrace.elf import read_elf
    from dlltrace.diagnosis.replay_linux import replay_linux
    whl = linux_wheel(*CUDART11)
    pool = kit.build_pool(tmp_path)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    fw = site / "fw" / "lib"
    fw.mkdir(parents=True)
    (tmp_path / "venv" / "bin").mkdir()
    shutil.copy2(pool / "h0", tmp_path / "venv" / "bin" / "host")
    stub = tmp_path / "stub"
    stub.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stub / "libcudart.so.11.0"), "-x", "c", "/dev/null",
                    "-Wl,-soname,libcudart.so.11.0"], check=True)
    (tmp_path / "fw.c").write_text("int cudaGetDeviceCount(int *n);\nint fw_devices(void) { int n = 0; "
                                   "return cudaGetDeviceCount(&n) ? -1 : n; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(fw / "libfw.so"), str(tmp_path / "fw.c"), f"-L{stub}",
                    "-Wl,--no-as-needed", "-l:libcudart.so.11.0",
                    "-Wl,-rpath,$ORIGIN/../../nvidia/cuda_runtime/lib", "-Wl,--enable-new-dtags"], check=True)
    host = [str(tmp_path / "venv" / "bin" / "host"), "2", str(fw / "libfw.so")]
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    p = subprocess.run(host, env=traced_env(recorder, trace), capture_output=True, text=True)
    assert p.stdout.startswith("ERR libcudart.so.11.0: cannot open shared object file")
    call = next(c for c in replay_linux(events(trace)) if c.name.endswith("libfw.so"))
    assert call.agrees and call.leaf is not None and call.leaf.name == "libcudart.so.11.0"
    assert any(c.rule == f"RUNPATH of {fw / 'libfw.so'}" for c in (call.tree.candidates if call.tree else []))
    pkg = next(f for f in call.fixes if f.action == "install_package")
    assert pkg.package == "nvidia-cuda-runtime-cu11" and pkg.verified and not pkg.then
    assert pkg.folder == str(site / "nvidia" / "cuda_runtime" / "lib")
    # install the real wheel's library where pip would
    with zipfile.ZipFile(whl) as z:
        z.extract("nvidia/cuda_runtime/lib/libcudart.so.11.0", site)
    real = read_elf(str(site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.11.0"))
    assert getattr(real, "soname", None) == "libcudart.so.11.0" and "libcudart.so.11.0" in getattr(real, "version_defs", ())
    ok = subprocess.run(host, capture_output=True, text=True)
    assert ok.stdout.startswith(f"OK {fw / 'libfw.so'}"), ok.stdout
    assert f"MAP {fw}/../../nvidia/cuda_runtime/lib/libcudart.so.11.0" in ok.stdout


def test_recorder_keeps_errno_across_dlerror(recorder, tmp_path):
    """The dlerror() wrapper writes an event; the program sees the errno it sees untraced (glibc's dlerror
    sets it itself: 2 here)."""
    (tmp_path / "e.c").write_text(
        "#include <dlfcn.h>\n#include <errno.h>\n#include <stdio.h>\n"
        "int main(void) { void *h = dlopen(\"libdltnope.so\", RTLD_NOW); errno = 1234;\n"
        "  const char *e = dlerror(); printf(\"%d %s %s\\n\", errno, h ? \"h\" : \"-\", e ? e : \"(null)\"); return 0; }\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "e"), str(tmp_path / "e.c"), "-ldl"], check=True)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    plain = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True).stdout
    traced = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True, env=traced_env(recorder, trace)).stdout
    assert plain == traced and " - libdltnope.so: cannot open" in plain
    assert any(e["ev"] == "dlerror" for e in events(trace))


TORCH_C = r"""
#include <Python.h>
int torch_cuda_init(void);
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_C", 0, -1, 0};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&d); }
int touch(void) { return torch_cuda_init(); }
"""


def test_import_of_a_torch_like_package_names_the_chain_and_the_wheel(recorder, tmp_path, monkeypatch):
    """A package laid out as torch is (torch/_C.so with DT_RUNPATH $ORIGIN/lib, torch/lib/libtorch_cuda.so
    needing libcudart.so.12 with DT_RUNPATH $ORIGIN/../../nvidia/cuda_runtime/lib), its nvidia wheel not
    installed: `import torch` -> torch/_C.so -> libtorch_cuda.so -> libcudart.so.12 not found, in the
    context of the import, and the fix is nvidia-cuda-runtime-cu12, which torch's RUNPATH finds alone."""
    import sysconfig
    from dlltrace import runner
    from dlltrace.trace import linux
    from dlltrace.render.linux import linux_report_dict
    site = tmp_path / "site"
    lib = site / "torch" / "lib"
    lib.mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("from torch import _C\n")
    stub = tmp_path / "stub"
    stub.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(stub / "libcudart.so.12"), "-x", "c", "/dev/null",
                    "-Wl,-soname,libcudart.so.12"], check=True)
    (tmp_path / "tc.c").write_text("int torch_cuda_init(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libtorch_cuda.so"), str(tmp_path / "tc.c"), f"-L{stub}",
                    "-Wl,--no-as-needed", "-l:libcudart.so.12", "-Wl,-soname,libtorch_cuda.so",
                    "-Wl,-rpath,$ORIGIN/../../nvidia/cuda_runtime/lib", "-Wl,--enable-new-dtags"], check=True)
    (tmp_path / "c.c").write_text(TORCH_C)
    ext = site / "torch" / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["gcc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(ext), str(tmp_path / "c.c"),
                    f"-L{lib}", "-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,-rpath,$ORIGIN/lib", "-Wl,--enable-new-dtags"],
                   check=True)
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    monkeypatch.setenv("PYTHONPATH", str(site))
    rc, trace = runner.trace_linux_command([PY, "-c", "import torch"], str(tmp_path / "t.jsonl"))
    assert rc == 1
    rep = linux_report_dict(trace.events)
    f = next(x for x in rep["failed"] if x["name"] == str(ext))
    assert f["agrees"] and f["origin_kind"] == "python_import" and f["origin_module"].split(".")[0] == "torch"
    assert f["chain"] == [str(ext), "libtorch_cuda.so", "libcudart.so.12"]
    assert f["leaf"]["name"] == "libcudart.so.12" and f["leaf"]["parent"] == str(lib / "libtorch_cuda.so")
    assert f"RUNPATH of {lib / 'libtorch_cuda.so'}" in {c["rule"] for c in f["candidates"]}
    pkg = next(x for x in f["fixes"] if x["action"] == "install_package")
    assert pkg["package"] == "nvidia-cuda-runtime-cu12" and pkg["verified"] and not pkg["needs_path"]
    assert pkg["framework_preloads"] and pkg["folder"] == str(site / "nvidia" / "cuda_runtime" / "lib")
    # the fix done (a stand-in for the wheel's file where pip puts it): the real import works, as the model said
    (site / "nvidia" / "cuda_runtime" / "lib").mkdir(parents=True)
    shutil.copy2(stub / "libcudart.so.12", site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12")
    assert subprocess.run([PY, "-c", "import torch"], env=dict(os.environ, PYTHONPATH=str(site))).returncode == 0


def test_replay_of_a_damaged_trace_never_raises(recorder, tmp_path, monkeypatch):
    """Events dropped, fields removed or of the wrong type (a trace cut short, edited, from a newer
    writer): the replay reports what it can and never raises."""
    import random
    from dlltrace import runner
    from dlltrace.trace import linux
    from dlltrace.render.linux import linux_report_dict
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    _, trace = runner.trace_linux_command([PY, "-c", "import ctypes; ctypes.CDLL('libcudart.so.11.0')"], str(tmp_path / "t.jsonl"))
    evs = [dict(e) for e in trace.events]
    rnd = random.Random(13)
    for _ in range(25):
        damaged = []
        for e in evs:
            r = rnd.random()
            if r < 0.1:
                continue
            e = dict(e)
            if r < 0.25 and len(e) > 1:
                e.pop(rnd.choice(sorted(e)))
            elif r < 0.35:
                e[rnd.choice(sorted(e))] = rnd.choice([None, 7, "x", [], {}])
            damaged.append(e)
        rep = linux_report_dict(damaged, fixes=False)
        assert rep["calls"] >= rep["agree"] >= 0
    # a process whose program is not there (another machine's trace): nothing to replay, no error
    assert linux_report_dict(evs, fixes=False)["calls"] > 0  # (the same events with their program: replayed)
    gone = [dict(e, exe="/nonexistent/python") if e.get("ev") == "audit_start" else e for e in evs]
    assert linux_report_dict(gone, fixes=False)["calls"] == 0


def test_a_trace_reports_the_same_without_the_machine(recorder, tmp_path, monkeypatch):
    """run appends the facts the replay asked for (elf_system, elf_file); with the layout deleted, the
    trace's own world gives the same report as the live machine gave."""
    import json as _json
    from dlltrace import runner
    from dlltrace.trace import linux
    from dlltrace.render.linux import linux_report_dict
    from dlltrace.worlds.elf import LiveELFWorld
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    pool = kit.build_pool(tmp_path)
    lay = kit.Layout(0, "hrp", {"d1/libdlta.so": "a41", "d2/libdltc.so": "c0"}, ["d2", "nonexistent"],
                     [(2, "libdlta.so"), (2, "libdltc.so")])
    L = kit.place(tmp_path, pool, lay)
    monkeypatch.setenv("LD_LIBRARY_PATH", ":".join(str(L / d) for d in lay.llp))
    rc, trace = runner.trace_linux_command(kit.host_argv(L, lay), str(tmp_path / "t.jsonl"))
    evs = list(trace.events)
    assert any(e.get("ev") == "elf_system" for e in evs) and any(e.get("ev") == "elf_file" for e in evs)
    assert not trace.warnings  # (the schema knows the facts' events)
    live = linux_report_dict([e for e in evs if not str(e.get("ev")).startswith("elf_")], world=LiveELFWorld())
    shutil.rmtree(L)
    recorded = linux_report_dict(evs)
    assert _json.dumps(recorded, sort_keys=True) == _json.dumps(live, sort_keys=True)
    f = next(x for x in recorded["failed"] if x["name"] == "libdlta.so")
    assert f["leaf"]["name"] == "libdltb.so" and f["agrees"]


def test_install_roots_are_site_packages_never_lib_dynload():
    """ctypes.CDLL's requester is _ctypes.so in lib-dynload: pip would put nvidia-cuda-runtime-cu11 in
    site-packages, not there (the fix said lib-dynload/nvidia/cuda_runtime/lib)."""
    from types import SimpleNamespace

    from dlltrace.diagnosis.replay_linux import install_roots

    py = "/opt/py/lib/python3.11"
    proc = SimpleNamespace(sys_path=[py + ".zip", py, py + "/lib-dynload", py + "/site-packages", "/home/u/.local/lib/python3.11/site-packages"])
    assert install_roots(proc, py + "/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so") == [
        py + "/site-packages", "/home/u/.local/lib/python3.11/site-packages"]
    assert install_roots(proc, "/home/u/.local/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so")[0] == \
        "/home/u/.local/lib/python3.11/site-packages"


def test_rule_decompose_path_an_empty_runpath_element_is_tried_as_bare_names(recorder, tmp_path):
    """onnxruntime-gpu 1.19.2's CUDA provider has RUNPATH "/usr/local/cuda-12.2/lib:" (a trailing empty
    element): the real ld.so tries "glibc-hwcaps/x86-64-v3/libx.so" ... "libx.so" for it, names of the current
    folder with no "./" (fillin_rpath keeps its length 0). A library built the same way, dlopen()ed by a real
    Python whose dlopen of a missing name from it fails: the model tries the same files, in the same order."""
    from dlltrace.diagnosis.replay_linux import replay_linux
    (tmp_path / "p.c").write_text('#include <dlfcn.h>\nint probe(void) { return dlopen("libdlt_absent.so.3", RTLD_NOW) != 0; }\n')
    lib = tmp_path / "libdltprobe.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "p.c"), "-ldl",
                    "-Wl,--enable-new-dtags,-rpath,/nonexistent-dlt:"], check=True)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    code = f"import ctypes; print(ctypes.CDLL({str(lib)!r}).probe())"
    p = subprocess.run([PY, "-c", code], env=traced_env(recorder, trace), capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "0\n", p.stderr
    call = next(c for c in replay_linux(events(trace)) if c.name == "libdlt_absent.so.3")
    real = [path for name, tried in searches(events(trace)) if name == "libdlt_absent.so.3" for path, _ in tried]
    assert "libdlt_absent.so.3" in real and not any(x.startswith("./") for x in real)  # (what ld.so really tried)
    assert call.agrees, ([c.path for c in call.tree.candidates] if call.tree else None, real)


STDERR_C = r'''
#include <stdio.h>
#include <dlfcn.h>
int main(void) {
    void *h = dlopen("libcudart.so.11.0", RTLD_NOW);
    if (!h) fprintf(stderr, "W dso_loader.cc:64] Could not load dynamic library '%s'; dlerror: %s\n",
                    "libcudart.so.11.0", dlerror());
    fputs("in ", stderr); fwrite("two\n", 1, 4, stderr);
    fprintf(stdout, "out\n");
    fputs("no newline at the end", stderr);
    return 0;
}
'''
STDERR_CC = r'''
#include <iostream>
#include <dlfcn.h>
int main() {
    if (!dlopen("libnvinfer.so.8", RTLD_NOW))
        std::cerr << "Failed to load library libnvinfer.so.8 with error: " << dlerror() << std::endl;
    return 0;
}
'''


def test_recorder_copies_what_native_code_prints_to_stderr(recorder, tmp_path):
    """The loaders' own words (TensorFlow's fprintf, a C++ std::cerr line, fputs and fwrite pieces of a line) are
    copied a line at a time as stderr events, while the program's own output is exactly what it prints without
    the recorder; DLLTRACE_NO_STDERR=1 turns the copy off. (_FORTIFY_SOURCE makes fprintf __fprintf_chk.)"""
    (tmp_path / "e.c").write_text(STDERR_C)
    (tmp_path / "c.cc").write_text(STDERR_CC)
    subprocess.run(["gcc", "-O2", "-D_FORTIFY_SOURCE=2", str(tmp_path / "e.c"), "-o", str(tmp_path / "e"), "-ldl"],
                   check=True)
    cxx = shutil.which("g++")
    if cxx:
        subprocess.run([cxx, "-O2", str(tmp_path / "c.cc"), "-o", str(tmp_path / "c"), "-ldl"], check=True)
    plain = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    traced = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True, env=traced_env(recorder, trace))
    assert (traced.stdout, traced.stderr, traced.returncode) == (plain.stdout, plain.stderr, plain.returncode)
    lines = [e["text"] for e in events(trace) if e["ev"] == "stderr"]
    assert lines == [plain.stderr.splitlines()[0], "in two", "no newline at the end"], lines
    assert lines[0].startswith("W dso_loader.cc:64] Could not load dynamic library 'libcudart.so.11.0'; dlerror: ")
    off = tmp_path / "off.jsonl"
    off.write_text("")
    subprocess.run([str(tmp_path / "e")], capture_output=True, env=traced_env(recorder, off, DLLTRACE_NO_STDERR="1"))
    assert not [e for e in events(off) if e["ev"] == "stderr"] and events(off)
    if cxx:
        cc = tmp_path / "cc.jsonl"
        cc.write_text("")
        subprocess.run([str(tmp_path / "c")], capture_output=True, env=traced_env(recorder, cc))
        assert [e["text"] for e in events(cc) if e["ev"] == "stderr"] == [
            "Failed to load library libnvinfer.so.8 with error: libnvinfer.so.8: cannot open shared object file: "
            "No such file or directory"]


def test_rule_whole_run_linux(recorder, tmp_path):
    """A fix counts over the whole run: LD_LIBRARY_PATH to the folder with the missing libfoo.so.1 also holds an
    older libbar.so.1, which the program loaded from elsewhere before; under that fix libbar.so.1 resolves to the
    older copy (the real ld.so agrees: the program then prints 1, not 2), so it is unverified, says it breaks
    libbar.so.1, and comes after the ld.so.conf fix, which breaks nothing; the interpreter's own _ctypes is never
    patched; the copy found elsewhere names the distribution whose RECORD lists it."""
    (tmp_path / "a").mkdir()
    lib = tmp_path / "site-packages" / "nvidia" / "fake" / "lib"
    lib.mkdir(parents=True)
    for src, out, soname in (("int bar_v(void){return 2;}", tmp_path / "a" / "libbar.so.1", "libbar.so.1"),
                             ("int bar_v(void){return 1;}", lib / "libbar.so.1", "libbar.so.1"),
                             ("int foo(void){return 3;}", lib / "libfoo.so.1", "libfoo.so.1")):
        (tmp_path / "x.c").write_text(src + "\n")
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", str(tmp_path / "x.c"), "-o", str(out)],
                       check=True)
    dist = tmp_path / "site-packages" / "nvidia_fake_cu12-1.2.3.dist-info"  # (who owns the copy: its RECORD)
    dist.mkdir()
    (dist / "RECORD").write_text("nvidia/fake/lib/libfoo.so.1,,\nnvidia/fake/lib/libbar.so.1,,\n")
    (tmp_path / "app.py").write_text("import ctypes\nprint(ctypes.CDLL('libbar.so.1').bar_v())\nctypes.CDLL('libfoo.so.1')\n")
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path / "a"),
           "PYTHONPATH": f"{tmp_path / 'site-packages'}:{ROOT / 'tracer'}"}
    r = subprocess.run([PY, "-m", "dlltrace", "run", "-o", "t.jsonl", "--", PY, "app.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stdout == "2\n", r.stderr[-2000:]
    rep = subprocess.run([PY, "-m", "dlltrace", "report", "t.jsonl", "--json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    (fatal,) = [f for d in json.loads(rep.stdout)["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    assert [(c["path"], c["owner"]) for c in fatal["elsewhere"]] == [(str(lib / "libfoo.so.1"), "nvidia_fake_cu12 1.2.3")]
    assert "nvidia_fake_cu12 1.2.3's RECORD lists it" in r.stderr
    fixes = [(f["action"], f["verified"], f["breaks"]) for f in fatal["fixes"]]
    assert fixes == [("add_ld_so_conf", True, []), ("set_env", False, ["libbar.so.1"])], fixes
    assert "(it breaks libbar.so.1" in r.stderr
    # the real ld.so under that fix: libbar.so.1 is the older copy
    real = subprocess.run([PY, "-c", "import ctypes; print(ctypes.CDLL('libbar.so.1').bar_v())"], cwd=tmp_path,
                          env={**env, "LD_LIBRARY_PATH": f"{lib}:{tmp_path / 'a'}"}, capture_output=True, text=True)
    assert real.stdout == "1\n", real.stderr


def test_growing_trace_gives_each_line_once_it_is_whole(tmp_path):
    """`run` reads the trace while the recorder writes it (runner.GrowingTrace): a line is given once its newline
    is there (a line half written is waited for), and once the trace is complete the rest as it is (a last line
    cut short: read_trace's to judge), then the end."""
    import threading

    from dlltrace.runner import GrowingTrace

    class Running:
        def poll(self):
            return None

    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"a":1}\n{"b"')
    seen: list = []
    g = GrowingTrace(p, Running(), seen.append)
    assert g.readline() == b'{"a":1}\n'

    def more() -> None:
        with open(p, "ab") as f:
            f.write(b':2}\n{"c"')
    threading.Timer(0.2, more).start()
    assert g.readline() == b'{"b":2}\n'  # (waited for)
    threading.Timer(0.2, g.complete.set).start()
    assert g.readline() == b'{"c"' and g.readline() == b""
    assert seen == [b'{"a":1}\n', b'{"b":2}\n', b'{"c"']
    g.f.close()


C_FILTER = """
import sys
sys.path.insert(0, {tracer!r})
from dlltrace.trace import shim
backend = shim.CtypesBackend({lib!r})
install, only_kept, frames = shim.c_audit_filter(backend)
told = []
sys.addaudithook(lambda event, args: told.append(event) if event == "sys.addaudithook" else None)
got = []
assert install(lambda event, args: got.append(event), {all_events})
assert told == ["sys.addaudithook"], told  # (installed with the GIL held: the hooks already there are told)
sys.audit("dlltrace.test.one")
import colorsys
only_kept()
sys.audit("dlltrace.test.two")
import ctypes
ctypes.CDLL(None)
print(" ".join(got))
"""


@pytest.mark.parametrize("all_events", [True, False])
def test_the_c_audit_filter_hands_the_hook_its_three_events_or_all_while_asked(recorder, bare_python, all_events):
    """The preload library's C audit hook (dlltrace_preload.c, installed by shim.c_audit_filter in a Python bound
    with ctypes) calls the Python hook for import and ctypes.dlopen (and os.add_dll_directory), and for every other
    event too only while asked (until the warnings module is hooked): the 57 000 other events of a big import
    never reach Python."""
    from dlltrace.trace.linux import PRELOAD_LIB

    code = C_FILTER.format(tracer=str(ROOT / "tracer"), lib=str(recorder / PRELOAD_LIB), all_events=all_events)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))}
    env["DLLTRACE_NO_C_IMPORTS"] = "1"  # (what reaches the hook: no py_import written in C, which has its own test)
    r = subprocess.run([bare_python, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    got = r.stdout.split()
    assert "import" in got and "ctypes.dlopen" in got and "dlltrace.test.two" not in got
    assert ("dlltrace.test.one" in got) == all_events


def test_a_python_bound_with_ctypes_records_its_imports_and_the_warnings_it_shows(recorder, bare_python, tmp_path):
    """In a Python without cffi (the C audit filter in place), each import is recorded with the imports in progress
    and the user's frame, and a warning shown right after the program imported the warnings module is recorded
    (the filter hands the hook every event until the warnings module is hooked: here the open() between, an
    event the hook does not record; CPython's warn() itself, in C, makes none)."""
    from dlltrace.trace.linux import recorder_env

    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    (tmp_path / "outer.py").write_text("import colorsys\n")
    code = ("import sys\nprint('warnings' in sys.modules)\nsys.path.insert(0, %r)\nimport outer\nimport warnings\n"
            "open(sys.executable, 'rb').close()\nwarnings.warn('said by the program')\n" % str(tmp_path))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))}
    r = subprocess.run([bare_python, "-c", code], capture_output=True, text=True, timeout=60,
                       env=recorder_env(base, recorder, trace))
    assert r.returncode == 0 and r.stdout.split() == ["False"], r.stderr  # (warnings: not loaded at start-up)
    evs = events(trace)
    imports = {e["module"]: e for e in evs if e["ev"] == "py_import"}
    assert imports["outer"]["imports"] == [] and imports["colorsys"]["imports"] == ["outer"]
    assert imports["colorsys"]["frame"] == {"file": str(tmp_path / "outer.py"), "line": 1, "function": "<module>"}
    assert imports["outer"]["frame"] == {"file": "<string>", "line": 4, "function": "<module>"}
    assert [e["message"] for e in evs if e["ev"] == "py_warning"] == ["said by the program"]
    assert "said by the program" in r.stderr  # (shown as without dlltrace)


C_WALK = """
import sys
sys.path.insert(0, {tracer!r})
from dlltrace.trace import shim
install, only_kept, frames = shim.c_audit_filter(shim.CtypesBackend({lib!r}))
shim.C_FRAMES = frames
sys.path.insert(0, {site!r})
sys.path.insert(0, {user!r})
import libpkg
c, py, warm = sys.modules["userpkg_inner"].GOT
assert c == py == warm and c[1][-2:] == ["libpkg", "userpkg_inner"] and c[0]["file"].endswith("userpkg_inner.py"), (c, py)
f = sys._getframe()
boot, external = shim._IMPORT_SYSTEM
names, candidates = frames(f, boot, external, {{}})
assert names == ["__main__"] and candidates == [(f.f_code, f.f_globals, f)], (names, candidates)
known = {{f.f_code.co_filename: True}}
assert frames(f, boot, external, known) == (["__main__"], [])  # (a library file's frame is no candidate)
assert frames(f, boot, external, {{f.f_code.co_filename: False}})[1] == candidates
del names, candidates
counts = lambda: (sys.getrefcount(f), sys.getrefcount(f.f_globals), sys.getrefcount(f.f_code))
before = counts()
for _ in range(1000):
    frames(f, boot, external, {{}})
    frames(f, boot, external, known)
assert counts() == before, (before, counts())  # (no reference kept nor lost)
print("ok")
"""


def test_the_walk_in_c_gives_what_the_walk_in_python_gives(recorder, bare_python, tmp_path):
    """The preload library's walk up the stack (dlltrace_linux_stack: the module names of the frames that are not
    the import system's, and those of them whose file is not known for a library's, with no f_code read) gives
    frame_and_imports what its walk in Python gives, inside nested imports (a library's module importing the
    user's, which asks), before and after the library files are known, and keeps no reference."""
    from dlltrace.trace.linux import PRELOAD_LIB

    site = tmp_path / "site-packages"
    (site / "libpkg").mkdir(parents=True)
    (site / "libpkg" / "__init__.py").write_text("import userpkg_inner\n")
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "userpkg_inner.py").write_text(
        "import sys\nfrom dlltrace.trace import shim\nf = sys._getframe()\n"
        "GOT = (shim.frame_and_imports(f, shim.C_FRAMES), shim.frame_and_imports(f), "
        "shim.frame_and_imports(f, shim.C_FRAMES))\n")
    code = C_WALK.format(tracer=str(ROOT / "tracer"), lib=str(recorder / PRELOAD_LIB), site=str(site),
                         user=str(tmp_path / "user"))
    r = subprocess.run([bare_python, "-c", code], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))})
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stderr


def test_a_recorder_built_from_other_sources_is_stale(tmp_path, monkeypatch):
    """A recorder is used only when built from this install's sources (native/audit/build.sh writes their sha256
    next to the libraries): one an older dlltrace left in ~/.cache/dlltrace/linux, whose preload library lacks what
    this bootstrap calls, or one with no stamp, is not, and is built again into the cache."""
    from dlltrace.trace import where

    pkg, cache = tmp_path / "pkg", tmp_path / "cache"
    for d in (pkg, cache):
        d.mkdir()
        (d / where.AUDIT_LIB).write_bytes(b"\x7fELF")
        (d / where.PRELOAD_LIB).write_bytes(b"\x7fELF")
    monkeypatch.setattr(where, "package_recorder_dir", lambda: pkg)
    monkeypatch.setattr(where, "cache_recorder_dir", lambda: cache)
    digest = where.recorder_sources_digest()
    assert len(digest) == 64
    assert where.built_recorder() is None  # (neither has a stamp)
    (cache / where.RECORDER_STAMP).write_text("0" * 64 + "\n")
    assert where.built_recorder() is None  # (an older build)
    (cache / where.RECORDER_STAMP).write_text(digest + "\n")
    assert where.built_recorder() == cache
    (pkg / where.RECORDER_STAMP).write_text(digest)
    assert where.built_recorder() == pkg
    # what build.sh writes is that digest
    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc")
    out = tmp_path / "built"
    subprocess.run(["sh", str(where.NATIVE / "build.sh"), str(out)], check=True, capture_output=True)
    assert (out / where.RECORDER_STAMP).read_text().strip() == digest


def test_a_recorder_in_a_folder_others_can_write_is_not_loaded(tmp_path, monkeypatch):
    """The cache's recorder is loaded into every traced program (LD_AUDIT, LD_PRELOAD): one in a folder another user
    could have written (XDG_CACHE_HOME under a folder anyone may write, not sticky) is not used, and none is built
    there (a one-line error, exit 7: EXIT_UNSUPPORTED); in a folder of the user's own it is."""
    from dlltrace.errors import EXIT_UNSUPPORTED, DlltraceError
    from dlltrace.trace import linux, where

    open_dir = tmp_path / "open"
    cache = open_dir / "cache"
    cache.mkdir(parents=True)
    for name in (where.AUDIT_LIB, where.PRELOAD_LIB):
        (cache / name).write_bytes(b"\x7fELF")
    (cache / where.RECORDER_STAMP).write_text(where.recorder_sources_digest())
    os.chmod(open_dir, 0o777)
    monkeypatch.setattr(where, "package_recorder_dir", lambda: tmp_path / "no-package-build")
    monkeypatch.setattr(where, "cache_recorder_dir", lambda: cache)
    monkeypatch.setattr(linux, "cache_recorder_dir", lambda: cache)
    monkeypatch.setattr(linux, "built_recorder", where.built_recorder)
    assert where.built_recorder() is None
    built = []
    monkeypatch.setattr(linux, "build_recorder", lambda out: built.append(out))
    with pytest.raises(DlltraceError) as e:
        linux.recorder_dir()
    assert e.value.exit_code == EXIT_UNSUPPORTED and "can be written by another user" in str(e.value) and not built
    os.chmod(open_dir, 0o755)
    assert where.built_recorder() == cache


def test_lower_thread_priority_lowers_the_calling_thread_only():
    """LinuxFactsMeanwhile's worker (imports, the trace read as it grows) yields to the program: its own nice value
    goes up by MEANWHILE_NICE (a nice value is a thread's on Linux), and the thread that does what follows the
    program's end keeps its priority."""
    import threading

    from dlltrace.runner import MEANWHILE_NICE, lower_thread_priority

    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = {}

    def worker() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        got["done"] = lower_thread_priority()
        got["change"] = (before, os.getpriority(os.PRIO_PROCESS, tid))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    before, after = got["change"]
    assert got["done"] and after == min(19, before + MEANWHILE_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before


def c_and_python_hook_runs(python: str, code: str, recorder: Path, tmp_path: Path) -> dict[str, tuple[str, list[dict]]]:
    """`python -c code` under the recorder twice, under one PYTHONHASHSEED: py_import written in C ("c"), and all
    left to the Python hook ("python": DLLTRACE_NO_C_IMPORTS=1); each run's stdout and events (exit 0 asserted)."""
    from dlltrace.trace.linux import recorder_env

    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))}
    base["PYTHONHASHSEED"] = "0"
    out = {}
    for name, extra in (("c", {}), ("python", {"DLLTRACE_NO_C_IMPORTS": "1"})):
        trace = tmp_path / f"{name}.jsonl"
        trace.write_text("")
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                           env=dict(recorder_env(dict(base), recorder, trace), **extra))
        assert r.returncode == 0, (name, r.returncode, r.stderr)
        out[name] = (r.stdout, events(trace))
    return out


FAST_PROGRAM = """
import sys, warnings, ctypes
sys.path.insert(0, {site!r})
sys.path.insert(0, {user!r})
import libpkg                      # a library's module importing the user's, which imports a chain 70 deep
try:
    __import__('no"such')          # a name JSON escapes: the Python hook writes it
except ImportError:
    pass
exec("import colorsys")            # an import made by code with no file
lib = [p for p in {preload!r}.split(":") if p]
print(ctypes.CDLL(lib[0]).dlltrace_linux_fast_count() if lib else -1)
"""


def test_py_import_written_in_c_is_what_the_python_hook_writes(recorder, bare_python, tmp_path):
    """The preload library writes py_import itself once the warnings module is hooked (dlltrace_linux_fast_import:
    the Python hook's stack walk, JSON and two ctypes calls were most of the recorder's cost): every event of a run
    -- nested imports from a library into the user's code, a chain deeper than IMPORTS_LIMIT, a name JSON must
    escape (handed to the Python hook), an import by exec'd code -- is the same as with DLLTRACE_NO_C_IMPORTS=1,
    where the Python hook writes them all, native loads' contexts included."""
    from dlltrace.trace.linux import PRELOAD_LIB

    site, user = tmp_path / "site-packages", tmp_path / 'us"er'
    (site / "libpkg").mkdir(parents=True)
    (site / "libpkg" / "__init__.py").write_text("import userchain0\n")
    user.mkdir()
    for i in range(70):
        (user / f"userchain{i}.py").write_text(f"import userchain{i + 1}\n" if i < 69 else "import json, decimal\n")
    code = FAST_PROGRAM.format(site=str(site), user=str(user), preload=str(recorder / PRELOAD_LIB))
    runs = {}
    for name, (stdout, evs) in c_and_python_hook_runs(bare_python, code, recorder, tmp_path).items():
        by_seq = {e["seq"]: e for e in evs}
        runs[name] = (int(stdout.split()[-1]), [
            ({k: v for k, v in e.items() if k not in ("pid", "ppid", "tid", "seq", "t", "ctx")},
             (by_seq[e["ctx"]]["ev"], by_seq[e["ctx"]].get("module")) if e.get("ctx") in by_seq else None)
            for e in evs])
    (fast, c_events), (none, py_events) = runs["c"], runs["python"]
    assert none == 0 and fast > 70, (fast, none)  # (the C path wrote the chain's imports; off, none)
    assert c_events == py_events
    imports = {e["module"]: e for e, _ in c_events if e["ev"] == "py_import"}
    assert 'no"such' in imports and "colorsys" in imports
    assert imports["userchain69"]["frame"]["file"] == str(user / "userchain68.py")
    assert len(imports["json"]["imports"]) == 64 and imports["json"]["imports"][:2] == ["libpkg", "userchain0"]


def test_run_appends_the_facts_with_the_world_its_worker_filled(recorder, tmp_path, monkeypatch):
    """The world LinuxFactsMeanwhile's worker makes (after its imports and `warm`) is the one append_linux_facts
    asks, even when the program ends before the worker made it: read once the worker has ended (finished()), not
    before (a world made again after the program ended: none of the facts read while it ran)."""
    import time

    from dlltrace import runner
    from dlltrace.trace import linux
    monkeypatch.setattr(linux, "recorder_dir", lambda: recorder)
    given: list = []
    real = runner.append_linux_facts

    def append(spill, world=None, read=None, ahead=None):
        given.append(world)
        return real(spill, world, read, ahead)

    monkeypatch.setattr(runner, "append_linux_facts", append)
    rc, trace = runner.trace_linux_command([PY, "-c", "pass"], str(tmp_path / "t.jsonl"), warm=lambda: time.sleep(1.0))
    assert rc == 0 and len(given) == 1 and given[0] is not None


ODD_PROGRAM = """
import sys, warnings, ctypes, json
sys.path.insert(0, {user!r})
class Fake:                        # an object that says it is a str (isinstance), and is not one
    @property
    def __class__(self): return str
class Main(str):                   # a str subclass whose != is its own
    def __ne__(self, o): return True
    __hash__ = str.__hash__
class Shown(str):                  # a str subclass whose str() is its own
    def __str__(self): return "shown"
for name in (Fake(), Main("__main__"), 5, None, "caf\\u00e9", "\\udc80x", 'q"uote', "__main__"):
    exec(compile("import odd1", "<odd>", "exec"), {{"__name__": name}})
    sys.modules.pop("odd1", None)
class Globals(dict):               # globals whose get() imports (user code the walk runs: library_module)
    def get(self, k, d=None):
        if k == "__file__":
            __import__("odd3")
            sys.modules.pop("odd3", None)
        return dict.get(self, k, d)
exec(compile("import odd1", "<odd>", "exec"), Globals(__name__="g"))
sys.modules.pop("odd1", None)
for module in (Shown("odd2"), "\\udc80", "caf\\u00e9"):
    try:
        __import__(module)
    except ImportError:
        pass
lib = [p for p in {preload!r}.split(":") if p]
print(sys.version_info >= (3, 9), ctypes.CDLL(lib[0]).dlltrace_linux_fast_count() if lib else -1)
"""


def _pythons_with_audit_hooks() -> list[str]:
    """The venv's Python ("bare") and the other CPythons 3.8+ on this machine (test_bootstrap.other_pythons)."""
    from test_bootstrap import OTHER_PYTHONS

    out = ["bare"]
    for p in OTHER_PYTHONS:
        r = subprocess.run([p, "-c", "import sys; print(sys.version_info >= (3, 8))"], capture_output=True, text=True)
        if r.stdout.strip() == "True":
            out.append(p)
    return out


@pytest.mark.parametrize("python", _pythons_with_audit_hooks())
def test_py_import_in_c_leaves_what_is_not_exactly_a_str_to_the_python_hook(recorder, bare_python, tmp_path, python):
    """A module's __name__ that says it is a str and is not one (its __class__: PyUnicode_CompareWithASCIIString
    read it as a str, a crash), a str subclass (its != or str() its own), a name JSON escapes or UTF-8 cannot take,
    an import made by the user's code the walk runs (a globals' get(): none, as none while the hook runs):
    the events are the ones the Python hook writes (DLLTRACE_NO_C_IMPORTS=1), and the program runs to its end; on
    3.8 (no PyFrame_GetBack: no walk in C, whose NULL returned with no error set crashed ctypes) too."""
    from dlltrace.trace.linux import PRELOAD_LIB

    if python == "bare":
        python = bare_python
    else:  # (a venv of it with nothing installed: the ctypes binding, whose C audit hook this is; pyenv's may hold cffi)
        subprocess.run([python, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, capture_output=True,
                       timeout=300)
        python = str(tmp_path / "venv" / "bin" / "python")
    user = tmp_path / "user"
    user.mkdir()
    for m in ("odd1", "odd2", "odd3", "shown"):
        (user / f"{m}.py").write_text("import colorsys\n")
    code = ODD_PROGRAM.format(user=str(user), preload=str(recorder / PRELOAD_LIB))
    runs = {}
    for name, (stdout, evs) in c_and_python_hook_runs(python, code, recorder, tmp_path).items():
        in_c, count = stdout.split()[-2:]
        runs[name] = (in_c == "True", int(count), [
            {k: v for k, v in e.items() if k not in ("pid", "ppid", "tid", "seq", "t", "ctx")}
            for e in evs if e["ev"].startswith("py_")])
    (in_c, fast, c_events), (_, none, py_events) = runs["c"], runs["python"]
    assert none == 0 and (fast > 0 if in_c else fast == 0) and c_events == py_events
    modules = [e["module"] for e in c_events if e["ev"] == "py_import"]
    # (8 of 9: the Python hook writes no event for Fake's, whose JSON it cannot make; the C path leaves it to it)
    assert modules.count("odd1") == 8 and "odd3" not in modules and "shown" in modules and "\udc80" in modules
    main = [e for e in c_events if e["ev"] == "py_import" and e["module"] == "odd1" and e["imports"] == ["__main__"]]
    assert len(main) == 1  # (Main("__main__") != "__main__": its own answer, kept)


UNTRACED_PROGRAM = """
import sys, warnings
sys.path.insert(0, {user!r})
seen = set()
def tracer(frame, event, arg):
    if event == "call":
        seen.add(frame.f_code.co_filename)
sys.settrace(tracer)
import traced1
sys.settrace(None)
print(sys.version_info >= (3, 11), "traced1.py" in " ".join(seen), sorted(f for f in seen if "dlltrace" in f))
"""


@pytest.mark.parametrize("c_imports", ["1", ""])
def test_the_recorders_python_code_is_not_seen_by_the_programs_tracer(recorder, bare_python, tmp_path, c_imports):
    """The Python code the preload library's C audit hook calls (the Python hook; shim.user_frame_json) runs with
    tracing off (PyThreadState_EnterTracing, 3.11+), as CPython runs a hook added with sys.addaudithook: a
    program's sys.settrace (a debugger's `step`, coverage) sees its own frames during an import, none of trace/shim.py."""
    from dlltrace.trace.linux import recorder_env

    user = tmp_path / "user"
    user.mkdir()
    (user / "traced1.py").write_text("import colorsys\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))}
    trace = tmp_path / "t.jsonl"
    env = dict(recorder_env(base, recorder, trace), DLLTRACE_NO_C_IMPORTS=c_imports)
    r = subprocess.run([bare_python, "-c", UNTRACED_PROGRAM.format(user=str(user))], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split(None, 2) == ["True", "True", "[]"], r.stdout
    assert [e["module"] for e in events(trace) if e["ev"] == "py_import"][-2:] == ["traced1", "colorsys"]


INTERRUPTED = """
import sys
sys.path.insert(0, {tracer!r})
from dlltrace.trace import shim
backend = shim.CtypesBackend({lib!r})
install, only_kept, frames = shim.c_audit_filter(backend)
import ctypes
pylib = ctypes.PyDLL({lib!r})
fast = pylib.dlltrace_linux_fast_import
fast.restype, fast.argtypes = ctypes.c_int, [ctypes.py_object] * 5
raised = {{"hook": None, "frame": None}}

def hook(event, args):
    if event == "import" and raised["hook"] is not None:
        raise raised["hook"]

def user_frame(code, g, frame):
    if raised["frame"] is not None:
        raise raised["frame"]
    return None

assert install(hook, False)
assert fast(user_frame, {{}}, shim._IMPORT_SYSTEM[0], shim._IMPORT_SYSTEM[1], str) == 0
got = []
for where in ("hook", "frame"):
    for exc in (KeyboardInterrupt, SystemExit, ValueError):
        # ("hook": user_frame's ValueError hands the event to the Python hook, which raises exc)
        raised["hook"], raised["frame"] = (exc, ValueError) if where == "hook" else (None, exc)
        sys.modules.pop("colorsys", None)
        try:
            import colorsys
            got.append("%s:%s:imported" % (where, exc.__name__))
        except BaseException as e:
            got.append("%s:%s:%s" % (where, exc.__name__, type(e).__name__))
print(" ".join(got))
"""


def test_a_ctrl_c_while_the_recorders_python_code_runs_is_the_programs(recorder, bare_python):
    """A KeyboardInterrupt (Ctrl-C's handler runs in whatever Python code runs) or a SystemExit raised while the
    recorder's Python code runs -- the Python hook behind the C audit hook, or user_frame_json that the C hook
    calls for py_import -- is the program's: the import raises it, as with a hook added by sys.addaudithook. The
    recorder's own errors (a ValueError) stop nothing: the import goes on."""
    from dlltrace.trace.linux import PRELOAD_LIB

    code = INTERRUPTED.format(tracer=str(ROOT / "tracer"), lib=str(recorder / PRELOAD_LIB))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DLLTRACE_"))}
    env["DLLTRACE_NO_C_IMPORTS"] = "1"  # (install() leaves the C path off: the test turns it on with its own function)
    r = subprocess.run([bare_python, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    got = r.stdout.split()
    assert got == ["hook:KeyboardInterrupt:KeyboardInterrupt", "hook:SystemExit:SystemExit", "hook:ValueError:imported",
                   "frame:KeyboardInterrupt:KeyboardInterrupt", "frame:SystemExit:SystemExit",
                   "frame:ValueError:imported"], got
