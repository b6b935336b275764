"""Many traces at once, for a maintainer with forty bug reports: each trace's answer reduced to what failed and its
first fix (`triage`), and the traces grouped by it (`rule_same_failure`; an exception no load explains by its type
and its message made neutral, `rule_same_exception`), most traces first, each group said by its `representative`.
A trace file given twice (the same path, another path to the same file, the same content) is counted once
(`rule_same_trace`). Data only: the words are render/triage.py's. `dlltrace report A B C ...` (commands/report.py)
reads each trace, diagnoses it (api.diagnose's Diagnoses, both OSes) and renders the groups; a trace that cannot be
read is one line of its own, never the end of the others."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, replace
from typing import Literal, Optional, Sequence

from dlltrace.diagnosis.result import Diagnosis
from dlltrace.errors import DlltraceError
from dlltrace.model import Fix
from dlltrace.trace.reader import raw_lines

# what a trace's answer is about: a failed load's leaf (its cause: not_found, bad_machine, ...), a file of a
# distribution that is gone, a program not found, a library find_library found none of, a feature the program ran
# without, a crash no load explains, an exception no load explains, an end nothing explains (an exit code, a kill, a
# start that failed, an end the trace does not hold: its cause is the outcome's kind), a CPU-only build imported,
# nothing failed, or a trace not read
Culprit = Literal["load", "gone", "unstarted", "unfound", "lost", "crash", "exception", "end", "cpu_build", "none",
                  "unreadable"]


@dataclass(frozen=True)
class Triaged:
    source: str  # the trace file, as given
    kind: str  # the outcome of the run's program (diagnosis/outcome.py OutcomeKind), "unreadable" for a trace not read
    culprit: Culprit
    name: str  # the leaf, the file, the program, the library or the feature; the exception's type; "" for none
    cause: str  # a load's cause ("not_found", "bad_machine", "missing_export", ...), else ""
    fix: Optional[Fix]  # the first fix the report gives, None for none
    main: Optional[Diagnosis]  # the Diagnosis of the run's program (its headline is the report's), None when unread
    error: str = ""  # unreadable: the one-line error it gave
    warnings: tuple[str, ...] = ()  # a damaged trace, read as far as it could be: the reader's warnings
    message: str = ""  # exception: the exception's message, as the trace has it


def main_diagnosis(diagnoses: Sequence[Diagnosis], pid: Optional[int]) -> Optional[Diagnosis]:
    """The Diagnosis of the run's program: the process `pid` (the trace's ending's, or its first exit's), else the
    first that ended, else the first."""
    return next((d for d in diagnoses if pid is not None and d.pid == pid), None) or \
        next((d for d in diagnoses if d.end.kind != "unknown"), None) or (diagnoses[0] if diagnoses else None)


def triage(source: str, main: Optional[Diagnosis], cpu_builds: Sequence[str] = (),
           warnings: Sequence[str] = ()) -> Triaged:
    """What a trace's answer is about (its run's program's Diagnosis `main`), in the report's own order: the load it
    died of, the file, program or library the exception was about, the first feature it ran without, how it ended
    (an end that is not success is never "none": a non-zero exit's code is its name), else the CPU-only build of a
    GPU framework it imported (`cpu_builds`: "torch 2.13.0+cpu", diagnosis/cuda.py rule_imported_cpu_build).
    `warnings`: the reader's, for a damaged trace."""
    return replace(_triage(source, main, cpu_builds), warnings=tuple(warnings))


def _triage(source: str, main: Optional[Diagnosis], cpu_builds: Sequence[str]) -> Triaged:
    if main is None:
        return Triaged(source, "not_traced", "end", "", "not_traced", None, None)
    o = main.outcome
    fatal = main.fatal
    if fatal is not None:
        return Triaged(source, o.kind, "load", fatal.leaf or fatal.name, fatal.cause or "",
                       fatal.fixes[0] if fatal.fixes else None, main)
    if main.gone is not None and (o.kind == "died_of_other" or main.gone.how == "listed"):  # (a crash's, an exit's too)
        g = main.gone
        return Triaged(source, o.kind, "gone", g.path.replace("\\", "/").rsplit("/", 1)[-1], "",
                       g.fixes[0] if g.fixes else None, main)
    if o.kind == "died_of_other" and main.unstarted is not None:
        return Triaged(source, o.kind, "unstarted", main.unstarted.program, main.unstarted.error, None, main)
    if o.kind == "died_of_other" and main.unfound is not None:
        u = main.unfound
        return Triaged(source, o.kind, "unfound", u.name, "", u.fixes[0] if u.fixes else None, main)
    if o.kind == "degraded" and o.lost_by:
        lost = next((f for f in main.failures if (f.leaf or f.name) == o.lost_by[0]), None)
        return Triaged(source, o.kind, "lost", o.lost_by[0], (lost.cause or "") if lost is not None else "",
                       lost.fixes[0] if lost is not None and lost.fixes else None, main)
    if o.kind == "crashed":  # (its name: the NTSTATUS, "0xc0000005", or the Linux signal, "11")
        what = str(o.signal) if o.signal is not None else f"0x{o.code & 0xFFFFFFFF:08x}" if o.code is not None else ""
        return Triaged(source, o.kind, "crash", what, "", None, main)
    if o.exception is not None:
        return Triaged(source, o.kind, "exception", o.exception.type, "", None, main, message=o.exception.message)
    if o.kind not in ("ok", "degraded"):
        return Triaged(source, o.kind, "end", str(o.code) if o.kind == "exited" and o.code is not None else "",
                       o.kind, None, main)
    if cpu_builds:
        return Triaged(source, o.kind, "cpu_build", cpu_builds[0], "", None, main)
    return Triaged(source, o.kind, "none", "", "", None, main)


def unreadable(source: str, error: str) -> Triaged:
    return Triaged(source, "unreadable", "unreadable", "", "", None, None, error)


def rule_same_failure(a: Triaged, b: Triaged) -> bool:
    """Two traces report the same failure: the same kind of answer about the same name (a DLL's name in any case:
    C10.dll is c10.dll), failing the same way; two exceptions no load explains: rule_same_exception. Two traces that
    both ran without a fault are one group, and so are two crashes no load explains with the same code (or signal);
    unreadable traces are one group."""
    if (a.culprit, a.name.lower(), a.cause) != (b.culprit, b.name.lower(), b.cause):
        return False
    return a.culprit != "exception" or rule_same_exception(a, b)


# what differs between two machines' copies of one exception's message (neutral_message): an absolute path
# (Windows, UNC or POSIX, its separators doubled or not as repr() gives them; a folder's name may hold spaces when a
# separator follows it), a temporary folder's made-up name (tempfile's tmp + 8 characters, PyInstaller's _MEI123456,
# pip's pip-install-k2j3h4g5), a hex address (0x7ffa3c2b1d40, 000001F2A3B4C5D0), a size (20.00 MiB, 1.5GiB) and a
# number (a line, a version, a pid)
_NAME = r"[^\\/\s'\"`<>|:*?()\[\],;]+"  # (a file's or folder's name, without spaces)
_PATH = re.compile(r"(?:(?<![\w/\\])[A-Za-z]:[\\/]+|\\\\+|(?<![\w/\\.:~-])/(?=[^\s/])|~/)"  # (C:\ \\ / ~/)
                   rf"(?:{_NAME}(?: {_NAME})*[\\/]+)*(?:{_NAME})?")
_TEMP = re.compile(r"(?<![\w-])(?:tmp[a-z0-9_]{8}|_MEI\d+|pip-[a-z]+(?:-[a-z]+)*-[a-z0-9_]{8})(?![\w-])")
_ANCHOR = re.compile(r"site-packages|dist-packages", re.IGNORECASE)
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b")
_SIZE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)* ?(?:[KMGT]i?B|bytes)\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)")


def _neutral_path(m: "re.Match[str]") -> str:
    """A path's part that is the same on every machine: what follows its last site-packages (or dist-packages, or
    temporary folder), else its last name: "…/numpy/__init__.py", "…/model.onnx"."""
    parts = [p for p in re.split(r"[\\/]+", m.group(0)) if p and not p.endswith(":")]
    at = max((i for i, p in enumerate(parts) if _ANCHOR.fullmatch(p) or _TEMP.fullmatch(p)), default=len(parts) - 2)
    tail = "/".join(parts[at + 1:])
    return "…/" + tail if tail else "…/<temp>" if parts else "…"


def neutral_message(message: str) -> str:
    """An exception's message with what differs between machines made neutral (paths their part below
    site-packages or a temporary folder, else their last name; temporary folders' names <temp>, hex addresses <hex>,
    sizes <size>, numbers <n>), on one line: "cannot import name 'x' from 'numpy' (…/numpy/__init__.py)", "Tried to
    allocate <size>"."""
    text = _PATH.sub(_neutral_path, message)
    text = _TEMP.sub("<temp>", text)
    text = _HEX.sub("<hex>", text)
    text = _SIZE.sub("<size>", text)
    text = _NUMBER.sub("<n>", text)
    return " ".join(text.split())


def rule_same_exception(a: Triaged, b: Triaged) -> bool:
    """Two programs that ended on a Python exception no failed load explains failed the same way: the same type,
    and the same message once what differs between machines is made neutral (neutral_message: its paths, numbers,
    hex addresses and temporary folders' names). "cannot import name 'x' from 'numpy' (C:\\Users\\jo\\...)" on
    one machine is the same as on another; "No module named 'numpy'" is not "No module named 'scipy'"."""
    return a.name == b.name and neutral_message(a.message) == neutral_message(b.message)


def representative(group: Sequence[Triaged]) -> Triaged:
    """The trace a group is said by (its words, its fix): the first that is not damaged and has a fix, else the
    first that is not damaged, else the first (a damaged trace's answer is only what could be read of it)."""
    whole = [t for t in group if not t.warnings]
    return next((t for t in whole if t.fix is not None), None) or (whole[0] if whole else group[0])


def groups(items: Sequence[Triaged]) -> list[list[Triaged]]:
    """The traces grouped by rule_same_failure, the biggest group first (ties: the order first met), unreadable
    traces and those where nothing failed last; each group's traces in the order given."""
    out: list[list[Triaged]] = []
    for t in items:
        for g in out:
            if rule_same_failure(g[0], t):
                g.append(t)
                break
        else:
            out.append([t])
    last = ("none", "unreadable")
    return sorted(out, key=lambda g: (g[0].culprit in last, g[0].culprit == "unreadable", -len(g)))


# how a trace given again is the same as one given before it (rule_same_trace)
Sameness = Literal["same_path", "same_file", "same_content"]


@dataclass(frozen=True)
class TraceFile:
    """What tells a trace file given twice (trace_file): its path made absolute, the file it is (device and inode,
    the file index on Windows) and a digest of its lines (a gzip trace's decompressed: the same trace compressed or
    not is the same content); None where it cannot be read."""
    source: str  # as given
    path: str
    file: Optional[tuple[int, int]]
    digest: Optional[str]


@dataclass(frozen=True)
class Duplicate:
    """A trace given again, counted once: `source` is `same_as`, the one given before it, `how`."""
    source: str
    same_as: str
    how: Sameness


def trace_file(source: str) -> TraceFile:
    """The TraceFile of `source` (read whole, a chunk at a time, as trace/reader.py reads a trace)."""
    path = os.path.normcase(os.path.abspath(source))
    try:
        st = os.stat(source)
    except OSError:
        return TraceFile(source, path, None, None)
    digest = hashlib.sha256()
    try:
        for line in raw_lines(source):
            digest.update(line)
            digest.update(b"\n")
    except (OSError, DlltraceError):
        return TraceFile(source, path, (st.st_dev, st.st_ino) if st.st_ino else None, None)
    return TraceFile(source, path, (st.st_dev, st.st_ino) if st.st_ino else None, digest.hexdigest())


def rule_same_trace(a: TraceFile, b: TraceFile) -> Optional[Sameness]:
    """A trace given twice is counted once: the same path given again (`same_path`), another path to the same file
    (`same_file`: a link, another spelling of its folder), or a file with the same lines (`same_content`: a bug
    report's trace attached twice, or saved again, compressed or not); None for two traces. Two runs never make the
    same lines (each event has its time and pid), so the same content is one run."""
    if a.path == b.path:
        return "same_path"
    if a.file is not None and a.file == b.file:
        return "same_file"
    if a.digest is not None and a.digest == b.digest:
        return "same_content"
    return None


def distinct(sources: Sequence[str]) -> tuple[list[str], list[Duplicate]]:
    """The traces given, each once (in the order given), and those given again (rule_same_trace: each with the one
    given before it that it is)."""
    seen: list[TraceFile] = []
    again: list[Duplicate] = []
    for source in sources:
        f = trace_file(source)
        same = next(((s, how) for s in seen for how in [rule_same_trace(s, f)] if how is not None), None)
        if same is not None:
            again.append(Duplicate(source, same[0].source, same[1]))
        else:
            seen.append(f)
    return [f.source for f in seen], again
