"""Many traces at once, for a maintainer with forty bug reports: each trace's answer reduced to what failed and its
first fix (`triage`), and the traces grouped by it (`rule_same_failure`), most traces first. Pure data: the words
are render/triage.py's. `dlltrace report A B C ...` (commands/report.py) reads each trace, diagnoses it
(api.diagnose's Diagnoses, both OSes) and renders the groups; a trace that cannot be read is one line of its own,
never the end of the others."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Optional, Sequence

from dlltrace.diagnosis.result import Diagnosis
from dlltrace.model import Fix

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
    if o.kind == "died_of_other" and main.gone is not None:
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
    if o.kind == "crashed":
        return Triaged(source, o.kind, "crash", "", "", None, main)
    if o.exception is not None:
        return Triaged(source, o.kind, "exception", o.exception.type, "", None, main)
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
    C10.dll is c10.dll), failing the same way. Two traces that both ran without a fault are one group, and so are
    two crashes no load explains; unreadable traces are one group."""
    return (a.culprit, a.name.lower(), a.cause) == (b.culprit, b.name.lower(), b.cause)


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
