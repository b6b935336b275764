"""Which failed call of a Linux trace is the failure the program hit, and one Diagnosis per process
(diagnosis/result.py) of a Linux trace.

rule_linux_python_exception: the failed call the Python exception the program ended on names (its message
holds the leaf's or the call's name, as ctypes' `OSError: libcudart.so.11.0: cannot open shared object
file` and ImportError's do; or only its stem, rule_exception_names_library_stem: python-magic's
`ImportError: failed to find libmagic` after libmagic.so.1 failed), the Linux soname of the same library when the
one named is a name for another system (rule_soname_of_the_same_library); rule_linux_exit_zero: a program that exited with 0 went past every failed
call; rule_linux_variant_probe: a try of a variant of a file before the file itself (Qt's plugin loader
tries libqxcb.so.avx2, then libqxcb.so) is a probe, never the failure; rule_linux_crash_after_failed_load:
a process that crashed (SIGABRT, SIGSEGV, ...) right after a load failed, with no load succeeding in between,
crashed of it (Qt aborts when its platform plugin does not load). Without any, every failed call is shown,
none chosen (fate "unknown")."""

from __future__ import annotations

import posixpath
import re
from typing import Any, Callable, Optional, Sequence

from dlltrace.diagnosis.outcome import (program_words, python_error, rule_exception_names_feature, rule_load_class,
                                        rule_program_said)
from dlltrace.diagnosis.outcome import ProcessOutcome, found_none, library_key, rule_exception_is_find_library
from dlltrace.diagnosis.result import (Copy, Diagnosis, FailedLoad, ProcessEnd, Tried, Unfound, Unstarted, code_place, gone_of,
                                       listed_gone_of, process_outcome, unstarted_of)
from dlltrace.diagnosis.replay_linux import (LinuxCall, default_world, find_lib_never_found, replay_linux,
                                             unversioned_name)
from dlltrace.loader.linux.fixes import system_package_fix
from dlltrace.model import Owner
from dlltrace.trace.pycontext import fault_as_exit
from dlltrace.trace.reader import Trace


CRASH_SIGNALS = (4, 5, 6, 7, 8, 11, 31)  # SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS: a crash, not a kill


def _exception_messages(trace: Trace) -> list[tuple[Any, str]]:
    """(pid, the text of its exception and its causes) of each Python exception the trace's processes ended on, but
    those of processes that ran while the program was being started (starting_processes): a wrapper script's check
    (`python -c 'import ctypes; ctypes.CDLL(...)' || true` before it execs the program) is not what the program ended
    on, and its exception took the verdict from the program's own failed load (an abort right after it read "no
    failed load explains it")."""
    starting = starting_processes(trace)
    out = []
    for e in trace.of("py_exception"):
        if e.get("pid") in starting:
            continue
        texts = [str(e.get("message") or "")] + [str(c.get("message") or "") for c in e.get("causes") or []
                                                 if isinstance(c, dict)]
        out.append((e.get("pid"), " ".join(texts)))
    return out


def rule_linux_python_exception(calls: list[LinuxCall], trace: Trace,
                                every: Sequence[LinuxCall] = ()) -> Optional[LinuxCall]:
    """The last failed call whose name or leaf the program's final Python exception names; else the last
    whose stem it names (rule_exception_names_library_stem; `every`, all the calls, failed or not: a stem the
    process loaded by another name is not one it failed on); else the last whose feature it names
    (outcome.rule_exception_names_feature: CuPy's cudaErrorInsufficientDriver after libcuda.so.1 failed); else the
    OpenCL driver the ICD loader did not load when it says no platform was found (rule_opencl_driver_not_loaded)."""
    messages = _exception_messages(trace)
    for c in reversed(calls):
        names = {c.name.rsplit("/", 1)[-1], (c.leaf.name if c.leaf else "")} - {""}
        if any(pid == c.pid and any(n in text for n in names) for pid, text in messages):
            return rule_soname_of_the_same_library(c, calls)
    for pid, text in messages:
        mine = [c for c in calls if c.pid == pid]
        leaves: list[Optional[str]] = [c.leaf.name if c.leaf else c.name for c in mine]
        loaded = [c.name for c in every if c.pid == pid and not (c.error or c.real_error)]
        i = rule_exception_names_library_stem(text, leaves, loaded)
        if i is None:
            i = rule_exception_names_feature(text, leaves)
        if i is None:
            i = rule_opencl_driver_not_loaded(text, mine)
        if i is not None:
            return rule_soname_of_the_same_library(mine[i], calls)
    return None


# an OpenCL program's error when the ICD loader found no platform (CL_PLATFORM_NOT_FOUND_KHR, -1001: pyopencl's
# "clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR"), and the ICD loader's file (libOpenCL.so.1: ocl-icd's or
# Khronos', auditwheel's copy in a wheel renamed libOpenCL-<hash>.so.1.0.0)
NO_OPENCL_PLATFORM = re.compile(r"PLATFORM_NOT_FOUND_KHR|(?<![\w-])-1001\b")
OPENCL_ICD_LOADER = re.compile(r"^libOpenCL(-[0-9a-f]{8})?\.so(\.\d+)*$")


def rule_opencl_driver_not_loaded(text: str, calls: Sequence[LinuxCall]) -> Optional[int]:
    """The failed call an OpenCL error names no library of: when the exception's text says no platform was found
    (NO_OPENCL_PLATFORM), the last of `calls` (the process's failed calls, in order) that the ICD loader made
    (OPENCL_ICD_LOADER: it dlopens each driver /etc/OpenCL/vendors/*.icd names, and a driver that does not load is
    no platform): its index, None for none. pyopencl 2026.1.4 with an .icd naming libnvidia-opencl.so.1, not
    installed, raises 'clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR' (field test, Debian 12): that load is what
    it died of, not one it went past."""
    if not NO_OPENCL_PLATFORM.search(text):
        return None
    for i in range(len(calls) - 1, -1, -1):
        if OPENCL_ICD_LOADER.match(posixpath.basename(calls[i].by or "")):
            return i
    return None


_SONAME = re.compile(r"^lib.+\.so(?:\.\d+)*$")


def rule_unfound_name_with_a_package(e: dict, finds: Sequence[dict],
                                     package: "Callable[[str], Optional[str]]") -> dict:
    """The find_library call to show for `e`, the one the exception is about (of `finds`, the process's
    py_find_library events): itself when `package` (the system's, of lib<name>.so) knows one of its name; else the
    program's first call that found nothing for the same library (library_key) whose name it knows one of (pyusb
    1.3.1 asks for 'usb-1.0', 'libusb-1.0', 'usb', 'openusb', 'usb-0.1', 'usb', 'libusb0' and raises
    usb.core.NoBackendError, whose text names 'usb': Debian has no libusbN, and 'usb-1.0' is in libusb-1.0-0); else
    itself."""
    def known(f: dict) -> bool:
        name = f.get("name")
        return isinstance(name, str) and bool(package(unversioned_name(name)))

    if known(e):
        return e
    key = library_key(str(e.get("name") or ""))
    same = (f for f in finds if key and found_none(f) and library_key(f["name"]) == key and known(f))
    return next(same, e)


def rule_soname_of_the_same_library(named: LinuxCall, calls: Sequence[LinuxCall]) -> LinuxCall:
    """The failed call to show for `named` (the one the exception names), of `calls` (the failed ones): itself
    when its name is a Linux soname (lib<name>.so[.<version>]); else the last of the same process for the same
    library (library_key) that is one, the name a Linux system ships and a package can be found for (cairocffi
    1.7.1 tries 'libcairo.so.2', 'libcairo.2.dylib', 'libcairo-2.dll' and raises an OSError naming all three;
    weasyprint 70 tries 'libpango-1.0-0', 'pango-1.0-0', 'pango-1.0', 'libpango-1.0.so.0', ... and names the
    first); else itself."""
    if _SONAME.match(posixpath.basename(named.name)):
        return named
    key = library_key(named.name)
    same = [c for c in calls if c.pid == named.pid and key and library_key(c.name) == key
            and _SONAME.match(posixpath.basename(c.name))]
    return same[-1] if same else named


def _stem(name: Optional[str]) -> str:
    return posixpath.basename(name or "").split(".so", 1)[0]


def rule_exception_names_library_stem(text: str, failed: Sequence[Optional[str]],
                                      loaded: Sequence[str] = ()) -> Optional[int]:
    """The failed library an exception names by its stem only, the file name before `.so` (python-magic 0.4.27
    tries ctypes.CDLL('libmagic.so.1'), catches the OSError and raises ImportError('failed to find libmagic.
    Check your installation')): the last of `failed` (library names, in order) whose stem, `lib` and at least
    one more letter, the text holds as a whole word (any case); else the first (the program's first choice) whose
    stem without its `lib`, three letters or more, the text holds as a whole word that is no part of a path
    (pyttsx3 2.99 tries libespeak-ng.so.1, then libespeak.so.1, and says 'do not have eSpeak or eSpeak-ng
    installed!': libespeak-ng.so.1, whose package makes it work, which libespeak.so.1's does not; PyOpenGL 3.1.10's
    'Unable to load OpenGL or GL library'); of those, none that a name of `loaded` (the libraries the process did
    load) has: a failed try of libz.so.99 before libz.so.1 loaded is not what 'libz returned Z_DATA_ERROR' is
    about; None for none."""
    had = {_stem(n).lower() for n in loaded}
    stems = [(i, _stem(name)) for i, name in enumerate(failed)]
    stems = [(i, s) for i, s in stems if len(s) > 3 and s.lower().startswith("lib") and s.lower() not in had]
    for i, stem in reversed(stems):
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(stem)}(?![A-Za-z0-9_])", text, re.IGNORECASE):
            return i
    for i, stem in stems:  # (the bare word, not a path's part: '/usr/lib/python3.11/' is no libpython3.11)
        if len(stem) >= 6 and re.search(rf"(?<![A-Za-z0-9_/\\.]){re.escape(stem[3:])}(?![A-Za-z0-9_/\\])", text,
                                        re.IGNORECASE):
            return i
    return None


def linux_exit_code(trace: Trace) -> Optional[int]:
    """The program's exit code, as `dlltrace run` recorded it (None: not recorded, or a signal)."""
    e = next(trace.of("exit"), None)
    code = e.get("code") if e else None
    return code if isinstance(code, int) else None


def linux_calls(trace: Trace, calls: Optional[list[LinuxCall]] = None) -> tuple[list[LinuxCall], Optional[LinuxCall]]:
    """The failed calls of the trace (of its replay, `calls`, made here when not given), and the one the
    program hit (or None)."""
    every = replay_linux(trace.events) if calls is None else calls
    failed = [c for c in every if c.error or c.real_error]
    return failed, rule_linux_python_exception(failed, trace, every)


def rule_linux_exception_not_a_load(trace: Trace) -> bool:
    """The program ended on a Python exception that names none of its failed calls (rule_linux_python_exception
    found none): the exception is what it died of; its failed calls were gone past."""
    return bool(_exception_messages(trace))


def rule_linux_exit_zero(trace: Trace) -> bool:
    """The program exited with 0: every failed call was one it went past (a probe for an optional
    library, a pyenv shim's bash trying its .dylib)."""
    return linux_exit_code(trace) == 0


def rule_linux_variant_probe(c: LinuxCall, calls: list[LinuxCall]) -> bool:
    """A failed call for a variant of the file the same object asks for next: `X.avx2` before `X` (Qt 6's
    QLibrary tries a plugin's CPU-specific build first, then the plugin). It is tried first by design: the
    next call is the load that counts, and this one is a probe whether that one loads or not. A suffix that is
    another system's extension is not a variant: weasyprint 70 tries 'libgobject-2.0-0.dll' and then
    'libgobject-2.0-0' again, whose failure it raises (both names of the failure, not a probe)."""
    i = next((k for k, x in enumerate(calls) if x is c), -1)
    after = next((x for x in calls[i + 1:] if x.pid == c.pid), None) if i >= 0 else None
    if after is None or after.by != c.by or not c.name.startswith(after.name + "."):
        return False
    suffix = c.name[len(after.name) + 1:]
    return bool(suffix) and suffix.isalnum() and suffix.lower() not in ("dll", "dylib", "so", "pyd")


def crash_signal(trace: Trace) -> Optional[int]:
    """The signal the program `dlltrace run` started crashed with (CRASH_SIGNALS), None when it did not crash."""
    e = next(trace.of("exit"), None)
    sig = e.get("signal") if e is not None else None
    return sig if isinstance(sig, int) and sig in CRASH_SIGNALS and e is not None and e.get("code") is None else None


def rule_linux_crash_after_failed_load(trace: Trace, failed: list[LinuxCall], calls: list[LinuxCall],
                                       probes: list[LinuxCall]) -> Optional[LinuxCall]:
    """The program crashed (crash_signal) with no Python exception, and its last top-level call failed (no
    later call of that process succeeded): it crashed of that load (Qt's qFatal "Could not load the Qt platform
    plugin" aborts the process when libqxcb.so does not load). A probe (rule_linux_variant_probe) is never it;
    None when the process went on loading after its last failure, or did not crash."""
    end = next(trace.of("exit"), None)
    if crash_signal(trace) is None or end is None or _exception_messages(trace):
        return None
    pid = end.get("pid")
    mine = [c for c in calls if c.pid == pid]
    last = mine[-1] if mine else None
    if last is None or not any(last is f for f in failed) or any(last is p for p in probes):
        return None
    return last


def starting_processes(trace: Trace) -> frozenset[int]:
    """The processes that ran while the program `dlltrace run` started was still being started: forked, themselves or
    an ancestor, by an image of that process (the `exit` event's pid) that later exec'd another program. pyenv's
    `python3` is a bash script; its subshells try to load bash's realpath builtin (`enable -f
    .../pyenv-realpath.dylib`), go on without it, and the script then execs the real python in the same pid. A child
    spawned without a fork event (vfork, posix_spawn: Python's subprocess) is known by its first audit_start's ppid.
    A child whose `fork` event the trace holds only after its parent's next exec counts as the program's (it is
    kept)."""
    end = next(trace.of("exit"), None)
    main = end.get("pid") if end is not None else None
    if not isinstance(main, int):
        return frozenset()
    images: dict[int, int] = {}  # pid -> the audit_start events of it so far (an exec starts a new image)
    forked: dict[int, tuple[int, int]] = {}  # pid -> (its parent, the parent's image when it forked)
    for e in trace.select(("audit_start", "fork")):
        pid = e.get("pid")
        if not isinstance(pid, int):
            continue
        if e.get("ev") == "audit_start":
            ppid = e.get("ppid")  # (a child spawned with vfork or posix_spawn, as Python's subprocess does, runs no
            # atfork handler and has no fork event: its first audit_start, with its parent, is its start)
            if pid not in images and pid not in forked and isinstance(ppid, int) and (ppid in images or ppid in forked):
                forked[pid] = (ppid, images.get(ppid, 0))
            images[pid] = images.get(pid, 0) + 1
        elif isinstance(e.get("ppid"), int) and pid not in forked:
            forked[pid] = (e["ppid"], images.get(e["ppid"], 0))
    last = images.get(main, 0)
    out = set()
    for pid in forked:
        p, seen = pid, set()
        while p in forked and p not in seen:
            seen.add(p)
            parent, image = forked[p]
            if parent == main:
                if image < last:
                    out.add(pid)
                break
            p = parent
    return frozenset(out)


def rule_linux_call_while_starting(c: LinuxCall, starting: frozenset[int]) -> bool:
    """A failed call of a process that ran while the program was being started (starting_processes: a wrapper
    script's subshell, such as pyenv's trying bash's pyenv-realpath.dylib): the program ran after it, so it went
    past it, whatever the program then did; never the failure (a sys.exit(3) through pyenv's python3 read "4 failed
    loads", each bash's)."""
    return c.pid in starting


def linux_probes(failed: list[LinuxCall], calls: list[LinuxCall]) -> list[LinuxCall]:
    """The failed calls tried first by design (rule_linux_variant_probe)."""
    return [c for c in failed if rule_linux_variant_probe(c, calls)]


def linux_verdicts(trace: Trace, calls: Optional[list[LinuxCall]] = None
                   ) -> tuple[list[LinuxCall], Optional[LinuxCall], list[LinuxCall]]:
    """(the failed calls, the one the program hit or None, those it went past)."""
    calls = replay_linux(trace.events) if calls is None else calls
    failed, fatal = linux_calls(trace, calls)
    starting = starting_processes(trace)
    if fatal is not None and rule_linux_call_while_starting(fatal, starting):
        fatal = None
    probes = linux_probes(failed, calls)
    if fatal is None:
        fatal = rule_linux_crash_after_failed_load(trace, failed, calls, probes)
    if fatal is None and (rule_linux_exit_zero(trace) or rule_linux_exception_not_a_load(trace)):
        return failed, None, list(failed)
    return failed, fatal, [c for c in failed if (fatal is not None and c is not fatal) or any(c is p for p in probes)
                           or rule_linux_call_while_starting(c, starting)]


def _fate(c: LinuxCall, fatal: Optional[LinuxCall], apart: list[LinuxCall], exit_zero: bool,
          probes: list[LinuxCall], crashed: bool, starting: frozenset[int] = frozenset()) -> tuple[str, Optional[str]]:
    if c is fatal:
        return "fatal", "crashed_after" if crashed else "python_exception"
    if any(c is a for a in apart):
        if any(c is p for p in probes):  # (first: Qt's libqxcb.so.avx2 before libqxcb.so, the failure, is a probe)
            return "went_on", "variant_probe"
        if rule_linux_call_while_starting(c, starting):
            return "went_on", "while_starting"
        if fatal is not None and c.pid == fatal.pid and rule_another_name_of_the_failure(c.name, fatal.name):
            return "went_on", "another_name_of_the_failure"
        return "went_on", ("another_was_fatal" if fatal is not None else
                           "exit_zero" if exit_zero else "exception_not_a_load")
    return "unknown", None


def rule_another_name_of_the_failure(name: str, fatal: str) -> bool:
    """A failed load of the process that asked for the same library as the failure, by another name (library_key:
    weasyprint's 'libpango-1.0-0' before 'libpango-1.0.so.0', cairocffi's 'libcairo.so.2' among 'cairo-2' and
    'libcairo-2.dll'): a try of the failure under another name, not a load the program went past and lost nothing by
    (the field test read them so, listed apart)."""
    key = library_key(name)
    return bool(key) and name != fatal and key == library_key(fatal)


def owner_of(path: str, owners: dict[str, tuple[Owner, ...]]) -> str:
    """"nvidia-cublas-cu12 12.4.5.8": the distribution whose RECORD (or conda-meta) lists the file at path (the
    trace's py_dists: Trace.owners), "" when none does."""
    for o in owners.get(posixpath.basename(path).lower(), ()):
        if posixpath.normpath(posixpath.join(o.root, o.path)) == posixpath.normpath(path):
            return f"{o.dist} {o.version}".strip()
    return ""


def linux_failed_load(c: LinuxCall, index: int, fate: tuple[str, Optional[str]],
                      said: Sequence[str] = (), owners: Optional[dict[str, tuple[Owner, ...]]] = None) -> FailedLoad:
    cands = c.tree.candidates if c.tree else []
    leaf = c.leaf.name if c.leaf else None
    return FailedLoad(
        seq=index, api="dlopen", name=c.name, error=0, message=c.real_error or c.error, fate=fate[0],  # type: ignore[arg-type]
        reason=fate[1], origin=c.origin, leaf=c.leaf.name if c.leaf else None,
        cause=c.leaf.cause if c.leaf else None, needed_by=c.leaf.parent if c.leaf else None, chain=tuple(c.chain),
        tried=tuple(Tried(x.path, x.rule, x.result) for x in cands),
        elsewhere=tuple(Copy(f.path, "not_searched", owner=owner_of(f.path, owners or {})) for f in c.fixes
                        if f.action == "set_env" and f.path),
        next_failures=(), fixes=tuple(c.fixes), model_agrees=c.agrees,
        klass=rule_load_class(fate[0], fate[1], c.name, leaf), user_code=code_place(c.frame),
        symbol=c.leaf.facts.export if c.leaf and c.leaf.cause == "missing_export" else None, caller=c.by or "",
        said=rule_program_said(list(said), c.name, leaf))


def linux_diagnoses(trace: Trace, calls: Optional[list[LinuxCall]] = None) -> list[Diagnosis]:
    """One Diagnosis per process of a Linux trace (those with a failed call, and the program `dlltrace run`
    started), in the order of their first event."""
    calls = replay_linux(trace.events) if calls is None else calls
    failed, fatal, apart = linux_verdicts(trace, calls)
    crashed_of = fatal is not None and not _exception_messages(trace) and crash_signal(trace) is not None
    probes = linux_probes(failed, calls)
    starting = starting_processes(trace)
    end = next(trace.of("exit"), None)
    top = end.get("pid") if end else None
    pids: dict[int, str] = {}
    for e in trace.of("audit_start"):  # (a pid that execs another program: the last one is its program)
        pids[e["pid"]] = str(e.get("exe") or "")
    for c in calls:
        pids.setdefault(c.pid, c.exe)
    out = []
    zero = rule_linux_exit_zero(trace)
    for pid, exe in pids.items():
        mine = [c for c in failed if c.pid == pid]
        if pid == top and end is not None:
            sig = end.get("signal")
            kind = "crashed" if crash_signal(trace) is not None else \
                "killed" if isinstance(sig, int) and sig not in (2,) and end.get("code") is None else \
                "interrupted" if sig == 2 else "exited"
            fault = next(trace.of("py_fault", pid=pid), None)
            ended = fault_as_exit(fault) if fault is not None and kind == "crashed" else None
            pend = ProcessEnd(kind, end.get("code"), sig, code_place(ended.get("frame")) if ended else None,  # type: ignore[arg-type]
                              str(fault.get("fault") or "") if fault is not None and kind == "crashed" else "")
        else:
            pend = ProcessEnd("unknown")
        if not mine and pid != top:
            continue
        said, owners = program_words(trace, pid), trace.owners(pid)
        failures = tuple(linux_failed_load(c, i, _fate(c, fatal, apart, zero, probes, crashed_of, starting), said, owners)
                         for i, c in enumerate(mine))
        outcome = process_outcome(pend.kind, pend.code, failures, python_error(trace, pid), pend.signal)
        unfound = unfound_library(trace, pid, outcome) if outcome.kind == "died_of_other" else None
        unstarted = unstarted_program(trace, pid) if outcome.kind == "died_of_other" and unfound is None else None
        gone = gone_of(trace, pid, linux_interpreter(trace, pid)) \
            if outcome.kind == "died_of_other" and unfound is None and unstarted is None else None
        if gone is None and unfound is None and unstarted is None:  # (a file its package looks for itself: Qt's plugin)
            gone = listed_gone_of(trace, pid, outcome, any(f.fate == "fatal" for f in failures),
                                  linux_interpreter(trace, pid))
        out.append(Diagnosis("linux", pid, exe or next((c.exe for c in mine), ""), pend, outcome, failures, unfound,
                             unstarted, gone))
    return out


def unfound_library(trace: Trace, pid: int, outcome: ProcessOutcome) -> Optional[Unfound]:
    """The library ctypes.util.find_library did not find that process pid died of (outcome: died_of_other; the
    rule: outcome.rule_exception_is_find_library), with the system package that ships it (asked of the trace's
    world: the answer `run` recorded, replay_linux.note_unfound_packages); None when the exception is not about one."""
    if outcome.exception is None:
        return None
    finds = list(trace.of("py_find_library", pid=pid))
    e = rule_exception_is_find_library(outcome.exception.text, finds, trace.of("objopen", pid=pid))
    if e is None:
        return None
    world = default_world(list(trace.events))
    ask = getattr(world, "system_package", None)
    e = rule_unfound_name_with_a_package(e, finds, lambda soname: ask(soname) if ask is not None else None)
    name = str(e["name"])
    imports = e.get("imports")
    module = str(imports[-1]) if isinstance(imports, list) and imports and isinstance(imports[-1], str) else ""
    fix = None if find_lib_never_found(name) else system_package_fix(unversioned_name(name), world)
    return Unfound(name, module, code_place(e.get("frame")), (fix,) if fix is not None else ())


def linux_interpreter(trace: Trace, pid: int) -> str:
    """The traced Python's own interpreter (its py_env's sys.executable: a venv's python, whose pip reinstalls into
    that venv), "" when not known."""
    e = next(iter(trace.of("py_env", pid=pid)), None)
    exe = e.get("executable") if e is not None else None
    return exe if isinstance(exe, str) else ""


def unstarted_program(trace: Trace, pid: int) -> Optional[Unstarted]:
    """The program process pid started that was not found and that it died of (result.unstarted_of), with the
    system package that ships it asked of the trace's world (the answer `run` recorded,
    replay_linux.note_unstarted_packages)."""
    world = default_world(list(trace.events))
    ask = getattr(world, "program_package", None)
    return unstarted_of(trace, pid, ask if ask is not None else lambda program: None,
                        bool(getattr(world, "as_root", False)))
