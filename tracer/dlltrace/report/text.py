"""The report as terminal text (`dlltrace report TRACE`, and the end of `dlltrace run`); the wording the
Markdown and JSON forms share (the verdict line, the fate line, the agreement lines, the environment)."""

from __future__ import annotations

from typing import Optional

from dlltrace import __version__, winpath
from dlltrace.apisets import SOURCE_TEXT
from dlltrace.model import RESULT_WORDS, Cause, flags_text
from dlltrace.report.analysis import Incident, api_set_source
from dlltrace.report.explain import leaf_node
from dlltrace.report.render import Styled, tail_lines
from dlltrace.report.verdict import Verdict, exit_text, reason_text
from dlltrace.trace.reader import STARTUP_STATUS_TEXT, Trace
from dlltrace.trace.replay import Replayed, can_replay_start



def short(path: Optional[str], keep: int = 3) -> str:
    if not path:
        return ""
    parts = winpath.normalize(path).split("\\")
    return path if len(parts) <= keep + 1 else "…\\" + "\\".join(parts[-keep:])


def verdict_line(r: Replayed) -> str:
    res = r.result
    leaf = res.leaf
    if leaf is None:
        if r.failed:
            return f"✗ {winpath.basename(r.load.name or '?')} failed with {r.real_error}; the model could not say why"
        return f"✓ {winpath.basename(r.load.name or '?')} loaded from {res.module_path}"
    need = f" — it is needed by {leaf.parent}" if leaf.parent else ""
    what = leaf.detail
    verdicts: dict[Cause, str] = {
        "not_found": f"{leaf.name} was not found{need}",
        "bad_machine": f"{leaf.name} is built for {dll_machines(r)}, but this process is {r_machine(r)}{need}",
        "not_pe": f"{leaf.name} at {leaf.path} is not a valid DLL{need}",
        "missing_export": f"{leaf.name} at {leaf.path} does not export {what}{need}",
        "missing_ordinal": f"{leaf.name} at {leaf.path} lacks {what}{need}",
        "init_failed": f"{leaf.name}: its initialisation (DllMain) failed; every dependency resolved",
        "apiset_no_host": f"{leaf.name} is an API set with no host on this system{need}",
        "invalid_parameter": f"invalid parameters: {leaf.detail}",
        "access_denied": f"access to {leaf.path} was denied{need}",
    }
    return "✗ " + verdicts[leaf.cause]


def r_machine(r: Replayed) -> str:
    """The process's machine (the bad_machine leaf's fact)."""
    return (r.result.leaf.facts.process_machine if r.result.leaf else None) or "x64"


def dll_machines(r: Replayed) -> str:
    """The machines of the copies the loader rejected (x86 for an x86 DLL in an x64 process)."""
    return " / ".join(r.result.leaf.facts.machines if r.result.leaf else ()) or "another machine"


def call_text(r: Replayed) -> str:
    if r.load.api == "start":
        status = r.load.status or 0
        return (f"{short(r.load.name)} and its static imports  → {status:#x} {STARTUP_STATUS_TEXT.get(status, '')} "
                f"(error {r.real_error}); the process ended before its entry point")
    flags = r.load.flags or 0
    err = r.real_error if r.real_error is not None else "(no return: the process ended)"
    return f"{r.load.api}({short(r.load.name)}, {flags:#x})  → {err}"


FATE_WORDS = {"fatal": "The failure the program hit", "unknown": "Whether the program went on is not known",
              "went_on": "Probed, absent, the program went on"}


def fate_line(v: Optional[Verdict]) -> str:
    """"The failure the program hit: the program exited with 126, and this is …" ("" for a success)."""
    return "" if v is None else f"{FATE_WORDS[v.fate]}: {reason_text(v)}"


def incident_lines(inc: Incident, trace: Trace) -> list[str]:
    r = inc.first
    res = r.result
    lines: list[str] = [Styled(verdict_line(r), "success" if res.leaf is None and not r.failed else "failure")]
    if len(trace.pids) > 1:
        lines.append(f"  in {process_label(trace, r.load.pid)}")
    if inc.verdict is not None:
        lines.append(Styled(f"  {fate_line(inc.verdict)}", "went_on" if inc.verdict.fate == "went_on" else ""))
    lines.append("")
    indent = "  "
    if r.origin:
        lines.append(f"{indent}{r.origin}")
        indent += "└─ "
        pad = "  " + "   "
    else:
        pad = "  "
    lines.append(f"{indent}{call_text(r)}")
    nodes = res.tree.failure_chain() if res.tree else []
    for depth, n in enumerate(nodes):
        pre = pad + "   " * depth + "└─ "
        if n.cause and n.cause in ("not_found", "apiset_no_host"):
            right = "✗ " + ("not found" if n.cause == "not_found" else "API set with no host")
        elif n.cause:
            right = f"{short(winpath.dirname(n.path or ''))}  ✗ {n.cause.replace('_', ' ')}"
        else:
            right = f"{short(winpath.dirname(n.path or ''))}  {n.how}"
        lines.append(f"{pre}{winpath.basename(n.name):<30} {right}")
    for a in inc.attempts[1:]:
        same = " (same leaf)" if a.result.leaf and res.leaf and a.result.leaf.name == res.leaf.name else (
            f" (leaf {a.result.leaf.name})" if a.result.leaf else "")
        added = [p for p in a.path if not any(winpath.same(p, q) for q in r.path)]
        why = ""
        if added:
            why = " after putting its folders on PATH" if list(a.path[:len(added)]) == added else " after changing PATH"
        who = "torch" if (a.result if a.result.origin else res).origin_package == "torch" else "the program"
        lines.append(f"  then {who} retried with {a.load.api}{why}  → {a.real_error}{same}")
    for k, a in enumerate(inc.attempts):
        al = leaf_node(a.result.tree)
        if al is None or not al.candidates:
            continue
        which = "" if len(inc.attempts) == 1 else (" (first attempt" if k == 0 else f" (attempt {k + 1}")
        lines.append("")
        lines.append(Styled(f"  Where Windows looked for {winpath.basename(al.name)}{which}{', ' if which else ' ('}"
                            f"flags {flags_text(a.load.flags or 0)}):", "heading"))
        for i, c in enumerate(al.candidates, 1):
            res_word = RESULT_WORDS[c.result] + (f" ({c.machine})" if c.result == "wrong_machine" else "")
            lines.append(f"    {i:>2}  {short(winpath.dirname(c.path)):<40} {c.rule:<44} {res_word}")
        if a.not_searched:
            lines.append(f"    {a.not_searched}")
    lines.extend(tail_lines(res, fixes=not inc.went_on))  # fixes only for a failure the program hit
    lines.append("")
    lines.extend(agreement_lines(inc))
    return lines


def process_label(trace: Trace, pid: int) -> str:
    """"process 1604 (loadhost.exe, started by 1600)": which of a trace's processes."""
    proc = trace.process(pid) or {}
    exe = winpath.basename(proc.get("exe") or "") or "?"
    parent = proc.get("ppid")
    by = f", started by {parent}" if parent in trace.pids else ""
    return f"process {pid} ({exe}{by})"


def attempt_name(inc: Incident, k: int) -> str:
    if len(inc.attempts) == 1:
        return "this load"
    return "the first attempt" if k == 0 else f"attempt {k + 1}"


def agreement(inc: Incident, k: int) -> str:
    """Whether the model agreed with the real loader on one attempt of the incident: only that
    load's own probes (its resolution tree) count, never another load's."""
    a = inc.attempts[k]
    which = attempt_name(inc, k)
    n = len(a.differences)
    if a.load.api == "start" and not n:
        return ("The loader's own probes were not seen (the process ended before dlltrace's shim could start); "
                "the model gives the same error.")
    if n:
        return (f"The model and the real loader disagree on {which} ({n} difference{'s' if n != 1 else ''}): "
                "please report this with the trace attached.")
    if not a.real_probes:
        return (f"The trace holds no probe the loader made for {which}, so the model could not be checked "
                "against it.")
    probes = len(a.real_probes)
    return f"The model agreed with all {probes} probe{'s' if probes != 1 else ''} the loader made for {which}."


def agreement_lines(inc: Incident, indent: str = "  ") -> list[str]:
    """One line per attempt, each difference named under it (path, what the trace saw, what the model
    predicted)."""
    out: list[str] = []
    for k, a in enumerate(inc.attempts):
        out.append(Styled(indent + agreement(inc, k), "disagreement" if a.differences else ""))
        out.extend(f"{indent}  - {d.text}" for d in a.differences)
    return out


def apart_line(inc: Incident, trace: Trace) -> str:
    """One line of the "probed, absent, the program went on" list."""
    r = inc.first
    err = r.real_error if r.real_error is not None else "?"
    tries = "" if len(inc.attempts) == 1 else f" ({len(inc.attempts)} attempts)"
    who = f" · in {process_label(trace, r.load.pid)}" if len(trace.pids) > 1 else ""
    return (f"  {winpath.basename(r.load.name or '?'):<28} {r.load.api}({short(r.load.name)}, {(r.load.flags or 0):#x})"
            f"  → {err}{tries} · {reason_text(inc.verdict) if inc.verdict else ''}{who}")


def unexplained_exits(trace: Trace, incs: list[Incident]) -> list[str]:
    """A program that ended badly with no failed load to blame: said, so that "0 failed loads" is
    not read as "all is well"."""
    blamed = {i.first.load.pid for i in incs if i.real_failure}
    out = []
    for pid in trace.pids:
        code = trace.exit_code(pid)
        if code not in (None, 0) and pid not in blamed:
            out.append(f"{process_label(trace, pid) if len(trace.pids) > 1 else 'The program'} exited with "
                       f"{exit_text(code)}; no failed load explains it.")
    return out


def unexplained_starts(trace: Trace) -> list[str]:
    """Verdicts for processes that could not start and whose environment was not recorded (the
    launcher writes it; without it there is nothing to replay)."""
    out: list[str] = []
    for pid in trace.start_failures():
        if not can_replay_start(trace, pid):
            code = trace.start_status(pid)
            if code is None:  # (start_failures: only processes that have one)
                continue
            out.append(Styled(f"✗ process {pid} could not start: {code:#x} {STARTUP_STATUS_TEXT[code]} (one of the program's "
                       "static imports failed); its environment was not recorded, so the report cannot say which", "failure"))
    return out


def text_report(trace: Trace, incs: list[Incident], replays: list[Replayed], everything: bool = False,
                saved: bool = False) -> str:
    """The terminal report; `saved`: at the end of `dlltrace run`, whose trace was just saved."""
    return "\n".join(text_report_lines(trace, incs, replays, everything, saved))


def text_report_lines(trace: Trace, incs: list[Incident], replays: list[Replayed], everything: bool = False,
                      saved: bool = False) -> list[str]:
    """text_report's lines, each Styled where the terminal shows it in a style (render.style_of)."""
    failed = [i for i in incs if i.real_failure]
    apart = [i for i in incs if i.went_on]
    starts = unexplained_starts(trace)
    n = len(failed) + len(starts)
    where = f"trace saved to {trace.path}" if saved else trace.path
    went_on = f" · {len(apart)} probed, absent, the program went on" if apart else ""
    head = f"dlltrace ─ {n} failed load{'s' if n != 1 else ''}{went_on} · {where}"
    if not failed and not apart and not everything and not starts:
        return [Styled(f"dlltrace ─ every load succeeded ({plural(len(replays), 'load')} traced) · {where}", "heading")]
    lines: list[str] = [Styled(head, "heading")]
    for verdict in starts:
        lines += ["", verdict]
    for inc in incs:
        if inc.went_on and not everything:
            continue  # listed apart below
        lines.append("")
        lines.extend(incident_lines(inc, trace))
    if apart and not everything:
        lines += ["", Styled("Probed, absent, the program went on (not failures: no fix needed; --all explains them)",
                             "went_on")]
        lines += [apart_line(i, trace) for i in apart]
    if not n:
        for line in unexplained_exits(trace, incs):
            lines += ["", line]
    note = api_set_note(trace)
    if note:
        lines += ["", note]
    return lines


def api_set_note(trace: Trace) -> str:
    """The line a report gives when its API sets did not come from the trace (older traces)."""
    if api_set_source(trace) == "trace":
        return ""
    return f"API sets resolved from {SOURCE_TEXT['builtin']} (the trace has no API-set schema of its own)."


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def environment_line(trace: Trace) -> str:
    pid = trace.pids[0] if trace.pids else None
    env = trace.env(pid) if pid is not None else None
    py = next(trace.of("py_env", pid=pid), None) if pid is not None else None
    parts = []
    if py:
        parts.append(f"Python {py.get('version', '?')} ({py.get('bits', '?')}-bit)")
    if env:
        w = f"Wine {env['wine']}" if env.get("wine") else f"Windows {env.get('windows_version', '?')}"
        parts.append(w)
    if api_set_source(trace) != "trace":
        parts.append("API sets from the built-in table")
    parts += [f"dlltrace {__version__}", f"trace format {trace.header.version}"]
    return " · ".join(parts)
