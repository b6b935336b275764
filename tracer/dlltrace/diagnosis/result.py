"""One typed Diagnosis per traced process, of a Windows or a Linux trace alike: how the process ended, and
each failed load with its fate (the failure the program hit, or one it went past), its leaf and chain, the
files the loader tried with the rule that put each there, the copies found elsewhere, what fails next, and
the fixes (model.Fix: one fix type for both OSes, each with whether the model re-ran it and what the re-run
gave). Pure data, no sentences: the renderers word it. `to_dict` is its JSON, whose schema is generated
from these classes (`schema`, schemas/diagnosis-v1.json).

Built from a trace by diagnosis/analysis.py (`windows_diagnoses`) and diagnosis/verdict_linux.py
(`linux_diagnoses`); the public API's `dlltrace.diagnose` returns them."""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, Union, get_args, get_origin

from dlltrace.diagnosis.outcome import (LoadClass, ProcessOutcome, PyError, dist_sites, feature_of,
                                        rule_exception_names_a_missing_file_of_its_distribution,
                                        rule_record_listed_file_gone_after_a_failure,
                                        rule_exception_is_unstarted_program,
                                        rule_outcome)
from dlltrace.model import CandidateResult, Cause, Fix, Outcome, Relation
from dlltrace.worlds.gpu import DRIVER_STATES

if TYPE_CHECKING:
    from dlltrace.model import Owner
    from dlltrace.trace.reader import Trace

DIAGNOSIS_FORMAT = "dlltrace-diagnosis"
DIAGNOSIS_VERSION = 1

Platform = Literal["windows", "linux"]
# How the process ended (diagnosis/ending.py's kinds; "unknown" for a process whose end the trace does not hold)
EndKind = Literal["exited", "crashed", "could_not_start", "killed", "interrupted", "never_ran", "not_windows",
                  "not_traced", "unknown"]
# A failed load's fate (diagnosis/verdict.py): the failure the program hit, one it went past, or not known
Fate = Literal["fatal", "went_on", "unknown"]


@dataclass(frozen=True)
class ProcessEnd:
    kind: EndKind
    code: Optional[int] = None  # the exit code (Windows: the full 32-bit code; an NTSTATUS for a crash)
    signal: Optional[int] = None  # Linux: the signal that ended it
    crashed_at: Optional[CodePlace] = None  # a crash: where the user's code was (faulthandler's stack: py_fault)
    fault: str = ""  # a crash: faulthandler's first line ("Fatal Python error: Aborted"), "" without one


@dataclass(frozen=True)
class Tried:
    """One file the loader tried for the leaf, in order, and the rule that put its folder in the search."""
    path: str
    rule: str  # the rule's tag: "DLL_LOAD_DIR of x.pyd", "PATH[2]", "RUNPATH of libx.so", "system search path"
    result: CandidateResult


@dataclass(frozen=True)
class Copy:
    """A copy of the leaf outside the files tried, and how its folder relates to the search."""
    path: str
    relation: Relation
    machine: Optional[str] = None
    version: Optional[str] = None
    path_entry: Optional[int] = None  # on_path, on_path_not_searched: which PATH entry (from 1)
    owner: str = ""  # "numpy 2.1.3": known from that distribution's RECORD only (its facts were not recorded)


@dataclass(frozen=True)
class NextFailure:
    """A library the load would fail on once the leaf is fixed."""
    name: str
    cause: Cause
    needed_by: str


@dataclass(frozen=True)
class CodePlace:
    """Where in the user's own code a load was made: the innermost frame that is not the standard library's or
    an installed package's, when the Python import or ctypes call that made it ran (the bootstrap's `frame`)."""
    file: str
    line: int
    function: str


def code_place(frame: object) -> Optional[CodePlace]:
    """A py_* event's `frame` as a CodePlace (None when the trace has none, or it is not one)."""
    if not isinstance(frame, dict):
        return None
    file, line, function = frame.get("file"), frame.get("line"), frame.get("function")
    if not isinstance(file, str) or not isinstance(line, int) or isinstance(line, bool) or not isinstance(function, str):
        return None
    return CodePlace(file, line, function)


@dataclass(frozen=True)
class FailedLoad:
    seq: int  # the load's sequence number in its process's events (Linux: its index among the process's calls)
    api: str  # LoadLibraryExW, LdrLoadDll, dlopen, "static imports" (a program that could not start)
    name: str  # the name or path the program asked for
    error: int  # the Win32 error (126, 193, ...); Linux: 0 (its text is `message`)
    message: str  # the loader's own text (FormatMessage's, dlerror's)
    fate: Fate
    reason: Optional[str]  # the verdict rule that decided the fate (docs/verdicts.md)
    origin: str  # the Python action that made the call ("import torch", "ctypes.CDLL('x.dll')"), "" unknown
    leaf: Optional[str]  # the library that really failed
    cause: Optional[Cause]
    needed_by: Optional[str]  # the module that needed the leaf
    chain: tuple[str, ...]  # from the call's module down to the leaf
    tried: tuple[Tried, ...]  # every file the loader tried for the leaf, in order
    elsewhere: tuple[Copy, ...]
    next_failures: tuple[NextFailure, ...]
    fixes: tuple[Fix, ...]
    model_agrees: bool  # the model tried the files the real loader tried, in its order
    klass: LoadClass = "fatal"  # fatal, fallback (an accelerator's library gone past), probe, noise (outcome.py)
    user_code: Optional[CodePlace] = None  # where in the user's code the import or call that made it ran
    attempts: int = 1  # the program's tries of this load (torch's retry after changing PATH): the facts are the last's
    symbol: Optional[str] = None  # missing_export: the export (Linux: the symbol) the leaf lacks
    caller: str = ""  # the module that made the call (Linux: the object whose dlopen it was), "" when not known
    said: tuple[str, ...] = ()  # the program's own words about it: its warnings, its stderr lines (outcome.program_words)


def process_outcome(end_kind: str, code: Optional[int], failures: tuple[FailedLoad, ...],
                    exception: Optional[PyError], signal: Optional[int] = None) -> ProcessOutcome:
    """A process's outcome (outcome.rule_outcome) from how it ended, its failed loads (their fates, and the
    features its fallbacks cost it) and the exception it ended on; both OSes' Diagnoses are made with it."""
    fallbacks = [(f.leaf or f.name, feature_of(f.leaf) or feature_of(f.name) or "") for f in failures
                 if f.klass == "fallback"]
    # (why the driver's library was not there: a failure's driver fix says it; the failure's own, when it has one)
    fatal = [f for f in failures if f.fate == "fatal"]
    gpu = next((x.value for f in (fatal or failures) for x in f.fixes if x.value in DRIVER_STATES
                and x.action in ("install_driver", "install")), "")
    return rule_outcome(end_kind, code, any(f.fate == "fatal" for f in failures), exception, fallbacks, signal, gpu)


@dataclass(frozen=True)
class Unfound:
    """A library the program asked ctypes.util.find_library for, that it did not find, and that the exception the
    program ended on is about (outcome.rule_exception_is_find_library): sounddevice's find_library('portaudio')
    before its OSError('PortAudio library not found'); on Windows pyusb's find_library('libusb-1.0.dll') before its
    usb.core.NoBackendError. No load was made, so no loader searched: find_library (Linux) asks ld.so.cache
    (ldconfig -p), then gcc and ld, for lib<name>.so; (Windows) looks in each PATH folder for <name>, then
    <name>.dll, and nowhere else."""
    name: str  # find_library's argument: "portaudio"
    module: str  # the innermost import in progress when it asked ("sounddevice"), "" when none
    user_code: Optional[CodePlace]  # where the user's own code was then
    # Linux: the system package that ships lib<name>.so.* (apt's), when known; Windows: the folder of a copy this
    # environment holds put on PATH, else the pip package that ships the DLL, then its folder put on PATH
    fixes: tuple[Fix, ...]
    searched: tuple[str, ...] = ()  # Windows: the PATH folders it looked in (the py_find_library event's `searched`)


@dataclass(frozen=True)
class Unstarted:
    """A program the Python program started (subprocess) that was not found, or not executable, and that the
    exception the program ended on is about (outcome.rule_exception_is_unstarted_program): pytesseract's
    'tesseract' before its TesseractNotFoundError, pdf2image's 'pdfinfo', graphviz's 'dot'."""
    program: str  # what subprocess ran: "tesseract", or a path
    error: str  # the OSError it failed to start with: "FileNotFoundError" (not found), "PermissionError"
    argv: tuple[str, ...]  # its arguments, the program's name first (at most 8)
    module: str  # the innermost import in progress when it was started, "" when none
    user_code: Optional[CodePlace]  # where the user's own code was then
    searched: tuple[str, ...]  # the PATH folders it was looked for in (the child's environment's); () for a path
    elsewhere: tuple[str, ...]  # the usual program folders not on that PATH that hold it ("/usr/sbin/x")
    package: Optional[str]  # the system package that ships it (apt's, as the machine's own data says), when known
    as_root: bool = False  # dlltrace run ran as root: its apt-get needs no sudo


def _strings(v: object) -> tuple[str, ...]:
    return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list) else ()


def unstarted_of(trace: "Trace", pid: int, package_of: "Callable[[str], Optional[str]]" = lambda program: None,
                 as_root: bool = False) -> Optional[Unstarted]:
    """The program process pid started that was not found (or not executable) and that the exception it ended on
    is about (outcome.rule_exception_is_unstarted_program, of its py_popen events), with the system package that
    ships it (`package_of`, asked for a program named without a folder: Linux's, the trace's world); None when the
    exception is not about one. Both systems: on Windows no package is asked."""
    ends = list(trace.of("py_exception", pid=pid))
    if not ends:
        return None
    e = rule_exception_is_unstarted_program(ends[-1], list(trace.of("py_popen", pid=pid)))
    if e is None:
        return None
    program = str(e["program"])
    package = package_of(program) if "/" not in program and "\\" not in program else None
    imports = e.get("imports")
    module = str(imports[-1]) if isinstance(imports, list) and imports and isinstance(imports[-1], str) else ""
    return Unstarted(program, str(e["error"]["type"]), _strings(e.get("argv")), module, code_place(e.get("frame")),
                     _strings(e.get("searched")), _strings(e.get("elsewhere")), package or None, as_root)


@dataclass(frozen=True)
class Gone:
    """A file of an installed distribution that is not there and that the exception the program ended on names
    (outcome.rule_exception_names_a_missing_file_of_its_distribution): xgboost's XGBoostLibraryNotFound for
    xgboost\\lib\\xgboost.dll. The package looked for its own file before loading it: no load was made, no loader
    searched."""
    path: str  # the file, as the exception names it
    package: str  # the distribution whose record lists it ("xgboost")
    version: str
    listed: str  # the file as the record lists it ("xgboost/lib/xgboost.dll")
    record: Literal["wheel", "conda"]  # RECORD (a wheel's) or conda-meta (a conda package's)
    module: str  # the outermost import in progress when the program ended ("xgboost"), "" when none
    fixes: tuple[Fix, ...]  # the distribution reinstalled (the traced Python's own pip; conda's for a conda package)
    # "named": the exception names it; "listed": no exception names it and no failed load explains the failure, and
    # `dlltrace run` found it not there after the program failed (rule_record_listed_file_gone_after_a_failure:
    # Qt's platform plugin, which Qt looks for itself)
    how: Literal["named", "listed"] = "named"
    also: tuple[str, ...] = ()  # "listed": the other files of the imported distributions not there (at most 8)


def gone_of(trace: "Trace", pid: int, python: str = "") -> Optional[Gone]:
    """The file of an installed distribution, not there, that the exception process pid ended on names
    (outcome.rule_exception_names_a_missing_file_of_its_distribution, of the trace's records: Trace.owners), with
    its reinstall by `python`'s pip (the traced interpreter; "" when none can be named: `pip install`); None when
    the exception names none. Both systems."""
    ends = list(trace.of("py_exception", pid=pid))
    if not ends:
        return None
    hit = rule_exception_names_a_missing_file_of_its_distribution(ends[-1], trace.owners(pid))
    if hit is None:
        return None
    path, o = hit
    exit_ = next(iter(trace.of("py_exit", pid=pid)), None)
    imports = exit_.get("imports") if exit_ is not None else None  # (outermost first: the program's own import)
    module = str(imports[0]) if isinstance(imports, list) and imports and isinstance(imports[0], str) else ""
    return Gone(path, o.dist, o.version, o.path, o.kind, module, (reinstall_fix(path, o, python),))


def reinstall_fix(path: str, o: "Owner", python: str) -> Fix:
    """The distribution `o` that lists the file at `path` reinstalled: `python`'s pip for a wheel, conda for a conda
    package."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=path, bound=o.path,
               exe=python if o.kind == "wheel" else "", lacks=o.kind, python=False,
               folder=o.root if o.kind == "conda" else "")  # (a conda package's: its environment's prefix)


def missing_paths(trace: "Trace") -> list[str]:
    """The paths the trace's file facts (`file`, `elf_file`: appended by `dlltrace run`) say are not there."""
    return [e["path"] for kind in ("file", "elf_file") for e in trace.of(kind)
            if e.get("kind") == "missing" and isinstance(e.get("path"), str)]


def loaded_paths(trace: "Trace", pid: int) -> list[str]:
    """The paths of the modules process pid mapped: its loads' (load_end `path`) and the files its loader's probes
    found (Windows), its objopen events' (Linux)."""
    out = [e["path"] for kind in ("load_end", "objopen") for e in trace.of(kind, pid=pid) if isinstance(e.get("path"), str)]
    return out + trace.found_probe_paths(pid)


MAX_ALSO = 8


def listed_gone_of(trace: "Trace", pid: int, outcome: ProcessOutcome, failed_load_is_the_failure: bool,
                   python: str = "") -> Optional[Gone]:
    """The file of a distribution the program imported, not there when it ended, that its failure is for want of
    (outcome.rule_record_listed_file_gone_after_a_failure: it failed, no failed load is its failure, and `dlltrace
    run` found the file its record lists missing), with its reinstall by `python`'s pip; None when there is none.
    Both systems."""
    ends = list(trace.of("py_exception", pid=pid))
    frames = [str(f.get("file")) for f in (ends[-1].get("frames") or []) if isinstance(f, dict)] if ends else []
    hits = rule_record_listed_file_gone_after_a_failure(
        outcome.kind, outcome.code, failed_load_is_the_failure, trace.owners(pid),
        (e.get("module") for e in trace.of("py_import", pid=pid)), missing_paths(trace), frames,
        dist_sites(trace.of("py_dists", pid=pid)), lambda: loaded_paths(trace, pid))
    if not hits:
        return None
    path, o = hits[0]
    return Gone(path, o.dist, o.version, o.path, o.kind, "", (reinstall_fix(path, o, python),), "listed",
                tuple(p for p, _ in hits[1:1 + MAX_ALSO]))


@dataclass(frozen=True)
class Diagnosis:
    platform: Platform
    pid: int
    program: str  # the program's path, "" when unknown
    end: ProcessEnd
    outcome: ProcessOutcome  # the answer first: crashed, died_of_load, died_of_other, degraded, ok, ... (outcome.py)
    failures: tuple[FailedLoad, ...]  # every failed top-level load of the process, in order
    unfound: Optional[Unfound] = None  # died_of_other: the library find_library did not find that it died of
    unstarted: Optional[Unstarted] = None  # died_of_other: the program it started that was not found, that it died of
    # the file of an installed distribution, not there, that it died of (died_of_other: the exception names it;
    # or, how=listed, a failure no failed load explains: crashed, died_of_other, exited with a code)
    gone: Optional[Gone] = None

    @property
    def fatal(self) -> Optional[FailedLoad]:
        """The failed load the program hit (died of), or None."""
        return next((f for f in reversed(self.failures) if f.fate == "fatal"), None)

    @property
    def went_past(self) -> tuple[FailedLoad, ...]:
        return tuple(f for f in self.failures if f.fate == "went_on")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (schemas/diagnosis-v1.json): every field."""
        return {"format": DIAGNOSIS_FORMAT, "version": DIAGNOSIS_VERSION, **_plain(self)}


def rule_process_ended_on(d: Diagnosis, f: FailedLoad) -> bool:
    """Whether the process of a failed load (one of d.failures) ended on a Python exception that names it (its file's
    name or its leaf's): a script that runs `python check.py` before it execs the program went past that load, but
    check.py died of it, which "the program went past them" alone hid."""
    e = d.outcome.exception
    name = f.name.replace("\\", "/").rsplit("/", 1)[-1] if d.platform == "windows" else f.name.rsplit("/", 1)[-1]
    return e is not None and any(n in e.message for n in {name, f.leaf or ""} - {""})


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v


# --- the JSON schema, from the classes --------------------------------------------------------------------------
def _type_schema(t: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(t)
    if t is type(None):
        return {"type": "null"}
    if t is str:
        return {"type": "string"}
    if t is bool:
        return {"type": "boolean"}
    if t is int:
        return {"type": "integer"}
    if origin is Literal:
        return {"enum": list(get_args(t))}
    if origin is Union or (sys.version_info >= (3, 10) and origin is getattr(__import__("types"), "UnionType", None)):
        return {"anyOf": [_type_schema(a, defs) for a in get_args(t)]}
    if origin is tuple:
        args = get_args(t)
        return {"type": "array", "items": _type_schema(args[0], defs)}
    if isinstance(t, type) and dataclasses.is_dataclass(t):
        name = t.__name__
        if name not in defs:
            defs[name] = {}  # (a recursive reference: Fix.then)
            hints = typing.get_type_hints(t, vars(sys.modules[t.__module__]))
            fields = dataclasses.fields(t)
            defs[name] = {"type": "object", "additionalProperties": False,
                          "required": [f.name for f in fields],
                          "properties": {f.name: _type_schema(hints[f.name], defs) for f in fields}}
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no JSON schema for {t!r}")


def schema() -> dict[str, Any]:
    """The JSON Schema of Diagnosis.to_dict(), made from the dataclasses (the committed
    schemas/diagnosis-v1.json is this; tests/test_api.py checks it)."""
    defs: dict[str, Any] = {}
    top = _type_schema(Diagnosis, defs)
    assert top == {"$ref": "#/$defs/Diagnosis"}
    root = dict(defs.pop("Diagnosis"))
    root["required"] = ["format", "version", *root["required"]]
    root["properties"] = {"format": {"const": DIAGNOSIS_FORMAT}, "version": {"const": DIAGNOSIS_VERSION},
                          **root["properties"]}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "dlltrace-diagnosis-v1",
            "title": "dlltrace diagnosis of one traced process (dlltrace.diagnosis)", **root,
            "$defs": dict(sorted(defs.items()))}


__all__ = ["Diagnosis", "FailedLoad", "ProcessEnd", "ProcessOutcome", "PyError", "Tried", "Copy", "NextFailure", "Fix",
           "Outcome", "schema"]
