"""The report of a Linux trace (platform "linux": the LD_AUDIT recorder's events, diagnose/replay_linux.py),
as text, Markdown and JSON, from the typed replay (LinuxCall: leaf, chain, candidates with their rules,
what ld.so really tried, fixes re-run through the model).

Which failed call is the failure the program hit (rule_linux_python_exception): the one the Python
exception the program ended on names (its message holds the leaf's or the call's name, as ctypes'
`OSError: libcudart.so.11.0: cannot open shared object file` and ImportError's do); the others are
listed apart as loads the program (or another process of the run: a pyenv shim's bash, a child) went
past. Without such an exception every failed call is shown, none chosen.

Not yet through render/explained.py (whose words and folder handling are Windows's): a form of its own,
made of the same typed fields, never of another module's sentences.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from dlltrace import model
from dlltrace.trace.reader import Trace
from dlltrace.diagnose.replay_linux import LinuxCall, replay_linux
from dlltrace.render.calls import candidate_dict, fix_dict, node_dict
from dlltrace.worlds.elf import ELFWorld

# the candidates' words: the model's, those of a PE said of an ELF file
RESULT_WORDS = {**model.RESULT_WORDS, "wrong_machine": "wrong ELF class or machine", "not_pe": "not an ELF file"}


def _exception_messages(trace: Trace) -> list[tuple[Any, str]]:
    out = []
    for e in trace.of("py_exception"):
        texts = [str(e.get("message") or "")] + [str(c.get("message") or "") for c in e.get("causes") or []
                                                 if isinstance(c, dict)]
        out.append((e.get("pid"), " ".join(texts)))
    return out


def rule_linux_python_exception(calls: list[LinuxCall], trace: Trace) -> Optional[LinuxCall]:
    """The last failed call whose name or leaf the program's final Python exception names."""
    messages = _exception_messages(trace)
    for c in reversed(calls):
        names = {c.name.rsplit("/", 1)[-1], (c.leaf.name if c.leaf else "")} - {""}
        if any(pid == c.pid and any(n in text for n in names) for pid, text in messages):
            return c
    return None


def linux_exit_code(trace: Trace) -> Optional[int]:
    """The program's exit code, as `dlltrace run` recorded it (None: not recorded, or a signal)."""
    e = next(trace.of("exit"), None)
    code = e.get("code") if e else None
    return code if isinstance(code, int) else None


def linux_calls(trace: Trace, calls: Optional[list[LinuxCall]] = None) -> tuple[list[LinuxCall], Optional[LinuxCall]]:
    """The failed calls of the trace (of its replay, `calls`, made here when not given), and the one the
    program hit (or None)."""
    failed = [c for c in (replay_linux(trace.events) if calls is None else calls) if c.error or c.real_error]
    return failed, rule_linux_python_exception(failed, trace)


def rule_linux_exit_zero(trace: Trace) -> bool:
    """The program exited with 0: every failed call was one it went past (a probe for an optional
    library, a pyenv shim's bash trying its .dylib)."""
    return linux_exit_code(trace) == 0


def linux_verdicts(trace: Trace, calls: Optional[list[LinuxCall]] = None
                   ) -> tuple[list[LinuxCall], Optional[LinuxCall], list[LinuxCall]]:
    """(the failed calls, the one the program hit or None, those it went past)."""
    failed, fatal = linux_calls(trace, calls)
    if fatal is None and rule_linux_exit_zero(trace):
        return failed, None, list(failed)
    return failed, fatal, [c for c in failed if fatal is not None and c is not fatal]


def _call_lines(c: LinuxCall) -> list[str]:
    leaf = c.leaf.name if c.leaf else c.name
    by = f" — it is needed by {c.leaf.parent.rsplit('/', 1)[-1]}" if c.leaf and c.leaf.parent else ""
    words = {"not_found": "was not found", "bad_machine": "is the wrong ELF class or machine",
             "not_pe": "is not an ELF file", "missing_export": "lacks a symbol version it needs"}
    cause = words.get(c.leaf.cause, c.leaf.cause) if c.leaf else "failed"
    head = f"✗ {leaf} {cause}{by}"
    origin = c.origin or f"dlopen by {c.by.rsplit('/', 1)[-1] or c.exe}"
    out = [head, "",
           f"  {origin}: dlopen({c.name}) → {c.real_error or c.error}"]
    if len(c.chain) > 1:
        out.append("  chain: " + " → ".join(x.rsplit("/", 1)[-1] for x in c.chain))
    cands = c.tree.candidates if c.tree else []
    if cands:
        out += ["", f"  Where ld.so looked for {leaf}:"]
        width = max(len(x.path) for x in cands)
        for i, x in enumerate(cands, 1):
            out.append(f"    {i:>2}  {x.path.ljust(width)}  {x.rule}  {RESULT_WORDS.get(x.result, x.result)}")
    out.append("  The model tried the same files, in the same order, as ld.so did." if c.agrees else
               "  The model and the real ld.so tried different files (please report this, with the trace).")
    if c.fixes:
        out += ["", "  Fix"]
        for i, f in enumerate(c.fixes, 1):
            out.append(f"    {i}. {f.words}" + ("" if f.verified else "  (not checked by the model)"))
            for step in (f.fix.then if f.fix is not None else []):  # (a next step the model found it needs)
                out.append(f"       then: {step.text}")
            if f.framework_preloads and (c.origin_module or "").split(".")[0] == "torch":
                out.append("       (torch preloads this wheel's copy itself: torch/__init__.py)")
    return out


def linux_text(trace: Trace, md: bool = False, saved: bool = False) -> str:
    failed, fatal, apart = linux_verdicts(trace)
    where = f"trace saved to {trace.path}" if saved else trace.path
    if not failed:
        return f"dlltrace ─ every load succeeded · {where}"
    shown = [c for c in failed if not any(c is a for a in apart)]
    n = len(shown)
    head = f"dlltrace ─ {n} failed load{'s' if n != 1 else ''}" + (
        f" · {len(apart)} the program went past" if apart else "") + f" · {where}"
    lines = [f"## {head}" if md else head]
    for c in shown:
        lines += [""] + _call_lines(c)
    if apart:
        lines += ["", "Failed, and the program went past them (not the failure):"]
        lines += [f"  {c.name}  ({c.exe.rsplit('/', 1)[-1]}, pid {c.pid})  {c.real_error or c.error}" for c in apart]
    if md:
        return "\n".join(lines[:1] + ["", "```"] + lines[1:] + ["```"]) + "\n"
    return "\n".join(lines)


def linux_json(trace: Trace) -> str:
    calls = replay_linux(trace.events)  # (once: the JSON and the verdicts are of the same replay)
    doc: dict[str, Any] = linux_report_dict(trace.events, calls=calls)
    failed, fatal, apart = linux_verdicts(trace, calls)
    doc["source"] = trace.path
    doc["exit_code"] = linux_exit_code(trace)
    doc["fatal"] = None if fatal is None else failed.index(fatal)
    doc["went_on"] = [i for i, c in enumerate(failed) if any(c is a for a in apart)]
    doc["warnings"] = list(trace.warnings)
    return json.dumps(doc, indent=2, ensure_ascii=False)


def linux_report_dict(events: Iterable[dict], world: Optional[ELFWorld] = None, fixes: bool = True,
                      calls: Optional[list[LinuxCall]] = None) -> dict[str, Any]:
    """The failed calls of a Linux trace as JSON: each with its leaf, chain, candidates (path, rule,
    result), the candidates the real ld.so tried (rule: its la_objsearch flag), and `agrees`. `calls`:
    the trace's replay, when the caller has it already (replay_linux)."""
    if calls is None:
        calls = replay_linux(events, world, fixes)
    failed = [c for c in calls if c.error or c.real_error]
    return {
        "format": "dlltrace-report-linux", "version": 1,
        "calls": len(calls), "agree": sum(c.agrees for c in calls),
        "failed": [{
            "pid": c.pid, "exe": c.exe, "op": "dlopen", "name": c.name, "by": c.by or None,
            "origin": c.origin or None, "origin_kind": c.origin_kind or None, "origin_module": c.origin_module or None,
            "error": c.error, "real_error": c.real_error or None,
            "leaf": None if c.leaf is None else {"name": c.leaf.name, "cause": c.leaf.cause, "detail": c.leaf.detail,
                                                 "parent": c.leaf.parent},
            "chain": c.chain,
            "candidates": [candidate_dict(x) for x in (c.tree.candidates if c.tree else [])],
            "recorded": [candidate_dict(x) for x in c.recorded],
            "agrees": c.agrees,
            "tree": node_dict(c.tree) if c.tree else None,
            "fixes": [{"action": f.action, "text": f.words, "folder": f.folder or None, "path": f.path or None,
                       "package": f.package or None, "verified": f.verified, "framework_preloads": f.framework_preloads,
                       "needs_path": f.needs_path, "fix": fix_dict(f.fix) if f.fix is not None else None}
                      for f in c.fixes],
        } for c in failed],
    }
