"""render/diagnosis.py: one text and Markdown renderer for any Diagnosis, Windows or Linux: the outcome
first when it is not "N failed loads", the failures that matter explained, the loads gone past a line each."""

from __future__ import annotations

from dlltrace.diagnosis.outcome import ProcessOutcome
from dlltrace.diagnosis.result import Diagnosis, FailedLoad, NextFailure, ProcessEnd, Tried
from dlltrace.model import Fix
from dlltrace.render.diagnosis import diagnoses_lines, diagnoses_text


def load(name, fate="fatal", klass="fatal", **kw) -> FailedLoad:
    base = dict(seq=1, api="dlopen", name=name, error=0, message=f"{name}: cannot open shared object file",
                fate=fate, reason=None, origin=f"ctypes.CDLL('{name}')", leaf=name, cause="not_found", needed_by=None,
                chain=(), tried=(), elsewhere=(), next_failures=(), fixes=(), model_agrees=True, klass=klass)
    base.update(kw)
    return FailedLoad(**base)


def linux(failures, outcome, pid=7, program="/usr/bin/python3.11") -> Diagnosis:
    return Diagnosis("linux", pid, program, ProcessEnd("exited", outcome.code), outcome, tuple(failures))


def test_a_fatal_linux_load_with_its_folders_grouped_by_rule_and_its_fix():
    sysdirs = ["glibc-hwcaps/x86-64-v3/", "tls/", ""]
    tried = (Tried("/opt/app/lib/libcudart.so.11.0", "RUNPATH of /opt/app/lib/libapp.so", "not_there"),
             *(Tried(f"/usr/lib/{d}libcudart.so.11.0", "system search path", "not_there") for d in sysdirs))
    fix = Fix("env", "set_env", name="libcudart.so.11.0", variable="LD_LIBRARY_PATH", value="/x/lib", folder="/x/lib",
              python=False,
              verified=True, covers=("libcudart.so.11.0", "libcublas.so.11"))
    f = load("libcudart.so.11.0", tried=tried, fixes=(fix,),
             next_failures=(NextFailure("libcublas.so.11", "not_found", "/opt/app/lib/libapp.so"),))
    d = linux([f], ProcessOutcome("died_of_load", 1))
    lines = diagnoses_lines([d], "t.jsonl", d)
    assert lines[0] == "dlltrace ─ 1 failed load · t.jsonl"
    assert lines[2] == "✗ libcudart.so.11.0 was not found"  # (the library asked for: no "needed by")
    assert "  ctypes.CDLL('libcudart.so.11.0'): dlopen(libcudart.so.11.0) → libcudart.so.11.0: cannot open shared object file" in lines
    assert "  Where ld.so looked for libcudart.so.11.0 (4 files in 2 folders):" in lines
    rows = [x for x in lines if x.startswith("     ")]
    assert rows[0].split() == ["1", "/opt/app/lib", "RUNPATH", "of", "libapp.so", "not", "there"]
    assert rows[1].endswith("not there  (and 2 glibc-hwcaps/tls subfolders)") and "/usr/lib " in rows[1]
    assert "    libcublas.so.11  ✗ not found  needed by libapp.so" in lines
    i = lines.index("    1. Before starting the program:")
    assert lines[i + 1] == "       export LD_LIBRARY_PATH=/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}", lines
    assert "       it also fixes libcublas.so.11" in lines


def test_a_degraded_run_answers_first_and_explains_the_fallback_not_the_probes():
    lost = load("libcudart.so.11.0", fate="went_on", klass="fallback", reason="exit_zero")
    probe = load("libnope_optional.so.1", fate="went_on", klass="probe", reason="exit_zero")
    d = linux([probe, lost], ProcessOutcome("degraded", 0, None, ("CUDA",), ("libcudart.so.11.0",)))
    text = diagnoses_text([d], "t.jsonl", d)
    first = text.splitlines()[0]
    assert first == "dlltrace ─ the program ran without CUDA (on the CPU): libcudart.so.11.0 did not load · t.jsonl"
    assert "✗ libcudart.so.11.0 was not found" in text and "  The program went on without CUDA" in text
    assert "✗ libnope_optional.so.1" not in text  # a probe: a line under the loads gone past
    assert "Failed, and the program went past them (not the failure):\n  libnope_optional.so.1  (python3.11, pid 7)" in text
    every = diagnoses_text([d], "t.jsonl", d, everything=True)
    assert "✗ libnope_optional.so.1 was not found" in every


def test_died_of_other_blames_no_load_and_nothing_at_all_is_every_load_succeeded():
    from dlltrace.diagnosis.outcome import PyError

    err = PyError("TypeError", "Unable to convert function return value to a Python type!")
    gone = load("libcudart.so.11.0", fate="went_on", klass="fallback", reason="exception_not_a_load")
    d = linux([gone], ProcessOutcome("died_of_other", 1, err))
    lines = diagnoses_lines([d], "", d)
    assert lines[0].startswith("dlltrace ─ the program ended with TypeError: Unable to convert")
    assert "no failed load explains it" in lines[0] and not any(x.startswith("✗") for x in lines)
    assert "Failed loads, context only: the program went past them, and none is what it ended with:" in lines
    ok = linux([], ProcessOutcome("ok", 0))
    assert diagnoses_lines([ok], "t.jsonl", ok) == ["dlltrace ─ every load succeeded · t.jsonl"]


def test_markdown_is_a_heading_then_the_text_in_a_code_block():
    d = linux([load("libx.so.1")], ProcessOutcome("died_of_load", 1))
    md = diagnoses_text([d], "t.jsonl", d, markdown=True)
    assert md.startswith("## dlltrace ─ 1 failed load · t.jsonl\n\n```\n✗ libx.so.1 was not found\n")
    assert md.endswith("```\n")


def test_an_undefined_symbol_names_the_symbol_and_a_windows_missing_export_the_export():
    sym = load("libneedsym.so", cause="missing_export", symbol="foo", needed_by="/tmp/libneedsym.so")
    d = linux([sym], ProcessOutcome("died_of_load", 1))
    assert "✗ libneedsym.so needs the symbol foo, which none of the libraries loaded defines" in diagnoses_lines([d])
    win = load("torch_cpu.dll", leaf="vcruntime140.dll", api="LoadLibraryExW", cause="missing_export",
               symbol="__std_find_trivial_8", needed_by="c10.dll")
    w = Diagnosis("windows", 1, "python.exe", ProcessEnd("exited", 1), ProcessOutcome("died_of_load", 1), (win,))
    assert "✗ vcruntime140.dll does not export __std_find_trivial_8 — it is needed by c10.dll" in diagnoses_lines([w])


def test_a_linux_fix_the_model_re_ran_that_then_fails_on_another_library_says_which():
    # opencv-python 5.1 with libgl1 and libglib2.0-0 both missing (seen for real): the fix `apt-get install libgl1`
    # was re-run by the model, and libQt5Core then fails on libgthread-2.0.so.0, whose Debian package
    # (libglib2.0-0) is not named after it; the report said "(not checked by the model)"
    from dlltrace.model import Outcome

    partial = Fix("install", "install_system_package", name="libGL.so.1", package="libgl1", value="root",
                  folder="/usr/lib/x86_64-linux-gnu", python=False, verified=False,
                  outcome=Outcome(1, "libgthread-2.0.so.0", "not_found"))
    advice = Fix("install", "install_system_package", name="libGL.so.1", package="libgl1", value="root",
                 folder="/usr/lib/x86_64-linux-gnu", python=False, verified=None)
    d = linux([load("libGL.so.1", fixes=(partial, advice))], ProcessOutcome("died_of_load", 1))
    lines = diagnoses_lines([d], "t.jsonl", d)
    one, two = (lines.index(x) for x in lines if x.startswith("    1. ") or x.startswith("    2. "))
    # (the command alone on its line, then its words, then the note: fixwords.fix_lines)
    assert lines[one] == "    1. apt-get install libgl1", lines[one:two]
    assert lines[two - 1] == ("       (not enough alone: the model re-ran the load with it, and it then fails on "
                              "libgthread-2.0.so.0)"), lines[one:two]
    assert lines[two] == "    2. apt-get install libgl1" and lines[two + 2] == "       (not checked by the model)", lines


def test_the_failure_s_library_tried_under_other_names_is_said_with_it():
    """weasyprint 70 without Pango: it tries 'libpango-1.0-0', 'pango-1.0', 'libpango-1.0.dylib', 'libpango-1.0-0.dll',
    then 'libpango-1.0.so.0', the failure. The other names are tries of the same library (reason
    another_name_of_the_failure: verdict_linux.rule_another_name_of_the_failure), said on one line with the failure,
    each once, at most ALSO_SHOWN of them; not listed among the loads the program went past (the field test read them
    so), which keep another library's (libgobject-2.0-0)."""
    from dlltrace.render.diagnosis import ALSO_SHOWN

    others = ["libpango-1.0-0", "pango-1.0", "libpango-1.0.dylib", "libpango-1.0-0.dll", "libpango-1.0-0"]
    tries = [load(n, fate="went_on", klass="noise", reason="another_name_of_the_failure", seq=i)
             for i, n in enumerate(others)]
    gobject = load("libgobject-2.0-0", fate="went_on", klass="noise", reason="another_was_fatal", seq=9)
    fatal = load("libpango-1.0.so.0", seq=10)
    d = linux([*tries, gobject, fatal], ProcessOutcome("died_of_load", 1))
    lines = diagnoses_lines([d], "t.jsonl", d)
    assert lines[0] == "dlltrace ─ 1 failed load · 1 the program went past · t.jsonl"
    assert ("  it also tried these names for the same library, which failed too: libpango-1.0-0, pango-1.0, "
            "libpango-1.0.dylib, libpango-1.0-0.dll") in lines, lines
    apart = lines[lines.index("Failed, and the program went past them (not the failure):") + 1:]
    assert [x.split()[0] for x in apart] == ["libgobject-2.0-0"]
    many = [load(f"libGL.so.{i}", fate="went_on", klass="noise", reason="another_name_of_the_failure", seq=i)
            for i in range(9, -1, -1)]
    d = linux([*many, load("libGL.so", seq=20)], ProcessOutcome("died_of_load", 1))
    line = next(x for x in diagnoses_lines([d], "t.jsonl", d) if x.startswith("  it also tried"))
    assert line.endswith(f"libGL.so.{10 - ALSO_SHOWN} and {10 - ALSO_SHOWN} more"), line


def test_rule_another_name_of_the_failure():
    from dlltrace.diagnosis.verdict_linux import rule_another_name_of_the_failure as rule

    assert rule("libpango-1.0-0", "libpango-1.0.so.0") and rule("libpango-1.0-0.dll", "libpango-1.0.so.0")
    assert rule("/opt/homebrew/lib/libespeak-ng.1.dylib", "libespeak-ng.so.1") and rule("libGL.so.9", "libGL.so")
    assert not rule("libgobject-2.0-0", "libpango-1.0.so.0") and not rule("libespeak.so.1", "libespeak-ng.so.1")
    assert not rule("libpango-1.0.so.0", "libpango-1.0.so.0")  # (itself)
    assert not rule("libGLX.so.0", "libGL.so.1")


def test_the_driver_s_fallback_comes_before_the_other_fallbacks_and_after_a_fatal_load():
    """outcome.rule_driver_first in the listing: libcuda.so.1 gone past is explained before libcudart.so.11.0 gone
    past (TensorFlow loads them in the other order), and a fatal load, what the program died of, stays first
    (--all explains every load)."""
    cudart = load("libcudart.so.11.0", fate="went_on", klass="fallback")
    driver = load("libcuda.so.1", fate="went_on", klass="fallback")
    fatal = load("libfoo.so.1")
    d = linux([cudart, driver], ProcessOutcome("degraded", 0, None, ("the NVIDIA driver", "CUDA"),
                                               ("libcuda.so.1", "libcudart.so.11.0"), missing=2))
    heads = [x for x in diagnoses_lines([d], "t.jsonl", d, everything=True) if x.startswith("✗ ")]
    assert [h.split()[1] for h in heads] == ["libcuda.so.1", "libcudart.so.11.0"], heads
    d = linux([cudart, driver, fatal], ProcessOutcome("died_of_load", 1))
    heads = [x for x in diagnoses_lines([d], "t.jsonl", d, everything=True) if x.startswith("✗ ")]
    assert [h.split()[1] for h in heads] == ["libfoo.so.1", "libcuda.so.1", "libcudart.so.11.0"], heads


def test_a_fatal_driver_load_on_a_machine_with_no_gpu_says_so():
    """The load of libcuda.so.1 the program died of (torch's .cuda(), CuPy): with no NVIDIA GPU on the machine
    (outcome.gpu), its line says there is no GPU for a driver to run, not that a driver is all it needs."""
    d = linux([load("libcuda.so.1")], ProcessOutcome("died_of_load", 1, gpu="no_gpu"))
    lines = diagnoses_lines([d], "t.jsonl", d)
    assert "  It is the NVIDIA driver's library, and this machine has no NVIDIA GPU for a driver to run" in lines, lines
    d = linux([load("libcuda.so.1")], ProcessOutcome("died_of_load", 1))
    assert ("  It is the NVIDIA driver's library: the program needs a GPU driver, which no pip package installs"
            in diagnoses_lines([d], "t.jsonl", d))
