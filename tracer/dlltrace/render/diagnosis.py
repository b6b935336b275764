"""Diagnoses (diagnosis/result.py) as text and Markdown, for Windows and Linux alike: the answer first (the
outcome, when it is not "N failed loads"), then each failed load that matters (the failure the program hit,
a fallback that cost it a feature, one whose fate is not known) with its leaf, the call and where in the
user's code it was made, the chain, every file the loader tried grouped by folder with the rule that put
the folder there, the copies found elsewhere, what fails next and the fixes (render/fixwords.py); then the
loads the program went past, a line each.

It reads only the typed Diagnosis: the Linux report is made with it, and `dlltrace.render` gives it for
any Diagnosis (a Windows trace's, a scenario's, a wheel's). The Windows report (render/text.py) says
more than a Diagnosis holds (the resolution tree, each retry, each probe compared): it renders the replay.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from dlltrace import model, winpath
from dlltrace.diagnosis.result import Copy, Diagnosis, FailedLoad, Tried, rule_process_ended_on
from dlltrace.diagnosis.outcome import feature_of
from dlltrace.render.escape import escape_code_block, escape_prose, escape_terminal
from dlltrace.render.fixwords import numbered_fix, steps_said_after
from dlltrace.render.outcome import (CPU_FEATURES, crash_headline, all_loaded_words, died_without_a_gpu_words, exited_unexplained_words,
                                     gone_lines, outcome_headline, said_line, unfound_lines, unstarted_lines)

# each candidate's result in words, per platform (an ELF file is not "a PE")
RESULT_WORDS: dict[str, dict[str, str]] = {
    "windows": {str(k): v for k, v in model.RESULT_WORDS.items()},
    "linux": {**{str(k): v for k, v in model.RESULT_WORDS.items()}, "wrong_machine": "wrong ELF class or machine", "not_pe": "not an ELF file"},
}
LOADER = {"windows": "Windows", "linux": "ld.so"}
CAUSE_WORDS: dict[str, dict[str, str]] = {
    "windows": {"not_found": "was not found", "bad_machine": "is for another machine", "not_pe": "is not a valid PE file",
                "missing_export": "lacks an export it needs", "missing_ordinal": "lacks an ordinal it needs",
                "apiset_no_host": "is an API set with no host", "init_failed": "failed to initialise (DllMain)",
                "invalid_parameter": "was loaded with invalid parameters", "access_denied": "could not be opened"},
    "linux": {"not_found": "was not found", "bad_machine": "is the wrong ELF class or machine",
              "not_pe": "is not an ELF file", "missing_export": "lacks a symbol version it needs",
              "init_failed": "failed to initialise", "access_denied": "could not be opened"},
}
NEXT_WORDS = {"not_found": "not found", "bad_machine": "wrong machine", "not_pe": "not a loadable file",
              "missing_export": "lacks an export", "missing_ordinal": "lacks an ordinal", "apiset_no_host": "no host",
              "init_failed": "initialisation failed", "access_denied": "access denied"}
RELATION_WORDS = {"loaded_wins": "searched, but the copy already loaded wins", "on_path": "on PATH",
                  "on_path_not_searched": "on PATH, which this load does not search",
                  "current_folder": "the current folder", "not_searched": "in no folder the loader searches",
                  "searched": "in a folder this load searched"}

# the subfolders glibc tries inside each folder of a search before the folder itself (dl-load.c: the
# glibc-hwcaps/<level> subfolders, then the legacy tls and platform/hwcap ones); a report shows the folder once
HWCAP_SUBFOLDERS = {"tls", "x86_64", "haswell", "avx512_1", "i686", "i586", "sse2", "aarch64", "atomics", "asimd"}


def hwcaps_base(folder: str) -> str:
    """The folder of a search that `folder` is a glibc-hwcaps or legacy hwcap subfolder of (itself otherwise);
    "." for the current folder (an empty RUNPATH element: ld.so tries "glibc-hwcaps/x86-64-v3/libx.so")."""
    parts = folder.split("/") if folder else []
    while parts:
        if len(parts) >= 2 and parts[-2] == "glibc-hwcaps":
            parts = parts[:-2]
        elif parts[-1] in HWCAP_SUBFOLDERS:
            parts = parts[:-1]
        else:
            break
    if not parts:
        return "/" if folder.startswith("/") else "."
    return "/".join(parts) or "/"


@dataclass(frozen=True)
class FolderGroup:
    folder: str
    rule: str
    result: str
    subfolders: int  # how many of its hwcaps subfolders were tried too, each with the same result


def folder_groups(tried: Sequence[Tried], platform: str = "linux") -> list[FolderGroup]:
    """The files tried as folders: on Linux, consecutive tries of one rule in a folder and its hwcaps
    subfolders, with one result, are one line (glibc tries up to 11 of them for each folder of the system
    search path); on Windows each file tried is its folder's line."""
    out: list[FolderGroup] = []
    for x in tried:
        if platform != "linux":
            out.append(FolderGroup(winpath.dirname(x.path), x.rule, x.result, 0))
            continue
        base = hwcaps_base(posixpath.dirname(x.path))
        last = out[-1] if out else None
        if last is not None and (last.folder, last.rule, last.result) == (base, x.rule, x.result):
            out[-1] = FolderGroup(base, x.rule, x.result, last.subfolders + 1)
        else:
            out.append(FolderGroup(base, x.rule, x.result, 0))  # (the folder itself: the rest are subfolders)
    return out


def rule_tag(rule: str) -> str:
    """A rule as the Windows report tags its folders ("DLL_LOAD_DIR of x.pyd"): the object a RUNPATH or
    RPATH is of by its file name (its folder is the line's)."""
    for tag in ("RUNPATH of ", "RPATH of "):
        if rule.startswith(tag):
            return tag + posixpath.basename(rule[len(tag):])
    return rule


def _base(platform: str, path: str) -> str:
    return path.rsplit("/", 1)[-1] if platform == "linux" else winpath.basename(path)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def headline_of(d: Diagnosis, f: FailedLoad) -> str:
    """"✗ libcudart.so.11.0 was not found — it is needed by libtorch_cuda.so"."""
    p = d.platform
    leaf = f.leaf or _base(p, f.name)
    if f.cause == "missing_export" and f.symbol and f.needed_by and _base(p, f.needed_by) == leaf:
        # (ld.so's "undefined symbol": the object itself needs a symbol no library loaded defines)
        return f"✗ {leaf} needs the symbol {f.symbol}, which none of the libraries loaded defines"
    cause = CAUSE_WORDS[p].get(f.cause or "", f.cause or "failed")
    if f.cause == "missing_export" and f.symbol and p == "windows":
        cause = f"does not export {f.symbol}"
    asked = winpath.same(leaf, _base(p, f.name)) if p == "windows" else leaf == _base(p, f.name)
    by = f" — it is needed by {_base(p, f.needed_by)}" if f.needed_by and not asked else ""
    return f"✗ {leaf} {cause}{by}"


def fatal_leaf(d: Diagnosis) -> Optional[str]:
    """The library of the failure the process hit (its leaf, else the file it asked for), None without one."""
    f = d.fatal
    return None if f is None else (f.leaf or _base(d.platform, f.name))


ALSO_SHOWN = 6  # other names of a failed load's library named with it (the rest counted)


def failure_lines(d: Diagnosis, f: FailedLoad, tree: Sequence[str] = ()) -> list[str]:
    """One failed load explained: its headline, the call (origin, API, name, the loader's own message), the
    place in the user's code, the chain, the files tried by folder with their rules, the copies elsewhere, what
    fails next, the fixes; then `tree`, its dependency tree (drawn by the caller: render/linux_tree.py), last, as
    it can be long (the Linux field test: opencv's, 60 lines between the leaf and its fix)."""
    p = d.platform
    out = [headline_of(d, f)]
    feature = feature_of(f.leaf) or feature_of(f.name)
    if f.fate == "went_on" and f.klass == "fallback":
        out.append(f"  The program went on without {feature or 'it'}")
        if d.outcome.gpu == "no_gpu" and feature in CPU_FEATURES and feature != "the NVIDIA driver":
            out.append("  This machine has no NVIDIA GPU: installing it would not make the program use one")
    elif f.reason == "crashed_after":
        out.append(f"  The program crashed right after this load failed, loading nothing after it: "
                   f"{'it aborted, ' if d.outcome.signal == 6 else ''}most likely because of it")
    elif feature == "the NVIDIA driver" and f.fate == "fatal" and d.outcome.gpu == "no_gpu":
        out.append("  It is the NVIDIA driver's library, and this machine has no NVIDIA GPU for a driver to run")
    elif feature == "the NVIDIA driver" and f.fate == "fatal":
        out.append("  It is the NVIDIA driver's library: the program needs a GPU driver, which no pip package installs")
    elif feature and f.fate == "fatal":
        out.append(f"  It is {feature}'s library")
    origin = f.origin or (f"{f.api} by {_base(p, f.caller)}" if f.caller else "")
    message = " ".join(x for x in (str(f.error) if f.error else "", f.message) if x)
    tries = f" ({f.attempts} attempts)" if f.attempts > 1 else ""
    out += ["", f"  {origin + ': ' if origin else ''}{f.api}({f.name}) → {message}{tries}"]
    if f.user_code is not None:
        out.append(f"  in your code: {f.user_code.file}:{f.user_code.line}, in {f.user_code.function}")
    out += [said_line(w) for w in f.said]  # (the program's own words about it: a warning, a stderr line)
    also = list(dict.fromkeys(g.name for g in d.failures if g.reason == "another_name_of_the_failure")) \
        if f.fate == "fatal" else []
    if also:  # (the same library under other names: verdict_linux.rule_another_name_of_the_failure)
        more = f" and {len(also) - ALSO_SHOWN} more" if len(also) > ALSO_SHOWN else ""
        out.append(f"  it also tried {'these names' if len(also) > 1 else 'this name'} for the same library, which "
                   f"failed too: {', '.join(also[:ALSO_SHOWN])}{more}")
    if len(f.chain) > 1:
        out.append("  chain: " + " → ".join(_base(p, x) for x in f.chain))
    if f.tried:
        groups = folder_groups(f.tried, p)
        out += ["", f"  Where {LOADER[p]} looked for {f.leaf or _base(p, f.name)} "
                    f"({_plural(len(f.tried), 'file')} in {_plural(len(groups), 'folder')}):"]
        width = max(len(g.folder) for g in groups)
        rule_width = max(len(rule_tag(g.rule)) for g in groups)
        words = RESULT_WORDS[p]
        for i, g in enumerate(groups, 1):
            more = f"  (and {g.subfolders} glibc-hwcaps/tls subfolders)" if g.subfolders else ""
            out.append(f"    {i:>2}  {g.folder.ljust(width)}  {rule_tag(g.rule).ljust(rule_width)}  "
                       f"{words.get(g.result, g.result)}{more}")
    if f.tried or p == "linux":
        out.append(f"  The model tried the same files, in the same order, as {LOADER[p]} did." if f.model_agrees else
                   f"  The model and the real {LOADER[p]} tried different files (please report this, with the trace).")
    if f.elsewhere:
        out += ["", "  Found elsewhere"] + [f"    {copy_line(c)}" for c in f.elsewhere]
    if f.next_failures:
        out += ["", "  Also missing — you would hit these next"]
        out += [f"    {n.name}  ✗ {NEXT_WORDS.get(n.cause, n.cause)}" + (f"  needed by {_base(p, n.needed_by)}"
                                                                          if n.needed_by else "")
                for n in f.next_failures]
    if f.fixes:
        out += ["", "  Fix"]
        for i, x in enumerate(f.fixes, 1):
            out += numbered_fix(i, x, "" if x.verified or x.breaks else f"({fix_not_enough(x, p)})")
            if x.breaks:
                out.append(f"       (it breaks {', '.join(x.breaks)}: with this fix the model has it fail or load "
                           "another copy)")
            for step in steps_said_after(x):  # (a next step the model found it needs; more system packages are in
                out += numbered_fix(0, step, lead="       then: ")  # its command)
            also = [n for n in x.covers if n.lower() != (f.leaf or "").lower()]
            if also:
                out.append("       it also fixes " + ", ".join(also))
            if x.preloaded_by and f.origin.split(" ")[-1].split(".")[0] == x.preloaded_by:
                out.append(f"       ({x.preloaded_by} preloads this wheel's copy itself: "
                           f"{x.preloaded_by}/__init__.py)")
    if tree:  # (last: the evidence in full, after what to do; opencv's was 60 lines between the leaf and its fix)
        out += ["", "  Dependency tree (the failing branch first):"] + [f"    {x}" for x in tree]
    return out


def fix_not_enough(x: model.Fix, platform: str) -> str:
    """Why a fix offered is not known to make the load succeed: on Linux, a fix the model re-ran that then fails
    on another library says which (libgl1 installed, libQt5Core then needs libgthread-2.0.so.0: a library whose
    package was not found, or past the steps one fix may chain); else the model did not check it."""
    o = x.outcome
    if platform != "linux" or x.verified is not False or o is None or not o.leaf or o.leaf == x.name:
        return "not checked by the model"
    return f"not enough alone: the model re-ran the load with it, and it then fails on {o.leaf}"


def copy_line(c: Copy) -> str:
    facts = "".join(f"{x} · " for x in (c.machine, c.version) if x)
    where = RELATION_WORDS.get(c.relation, c.relation)
    if c.path_entry is not None and where.startswith("on PATH"):
        where = f"on PATH (entry {c.path_entry})" + where[len("on PATH"):]
    return f"{c.path}  {facts}{where}" + (f"; {c.owner}'s RECORD lists it" if c.owner else "")


def explained(f: FailedLoad, d: Diagnosis, everything: bool) -> bool:
    """Whether a failed load is explained in full: the failure, one whose fate is not known, a fallback that
    cost a degraded program its feature, and with `everything` (--all) every one."""
    return everything or f.fate != "went_on" or (d.outcome.kind == "degraded" and f.klass == "fallback")


def diagnoses_lines(diagnoses: Sequence[Diagnosis], source: str = "", main: Optional[Diagnosis] = None,
                    everything: bool = False, trees: Optional[Mapping[tuple[int, int], Sequence[str]]] = None,
                    damaged: bool = False) -> list[str]:
    """The report of a run's Diagnoses: the headline (the outcome of `main`, the program the run started,
    when it is not "N failed loads"), each failed load that matters explained, the rest a line each. `trees`:
    a failed load's dependency tree as lines, by (pid, seq); `damaged`: the trace is (its reader's warnings)."""
    where = f" · {source}" if source else ""
    shown = [(d, f) for d in diagnoses for f in d.failures if explained(f, d, everything)]
    # (the NVIDIA driver's fallback before the other fallbacks, as the headline says it: outcome.rule_driver_first;
    # a fatal load keeps its place before them, it is what the program died of)
    shown.sort(key=lambda x: (x[1].fate != "fatal",
                              not (x[1].klass == "fallback" and feature_of(x[1].leaf or x[1].name) == "the NVIDIA driver")))
    apart = [(d, f) for d in diagnoses for f in d.failures if not explained(f, d, everything)]
    # (the failure's own library tried under other names: said with it, not among the loads gone past)
    names = {(d.pid, f.seq): [g.name for g in d.failures if g.reason == "another_name_of_the_failure"]
             for d, f in shown if f.fate == "fatal"}
    apart = [(d, f) for d, f in apart if f.reason != "another_name_of_the_failure" or
             not any(d.pid == pid for pid, _ in names)]
    # (the loads of processes that ran before the program started: verdict_linux.rule_linux_call_while_starting)
    before = [(d, f) for d, f in apart if f.reason == "while_starting"]
    said = None
    if main is not None and main.outcome.kind == "crashed":  # (a crash is said first, with the load it followed)
        said = crash_headline(main.outcome, fatal_leaf(main), main.gone)
    elif main is not None and main.fatal is None:
        said = outcome_headline(main.outcome, main.unfound, main.unstarted, main.gone)
        if said is None and not shown:
            said = exited_unexplained_words(main.outcome)
    if not diagnoses:  # (no process traced: never "every load succeeded"; a damaged trace cut before its program's
        # end and any failed load did trace its processes: "no process was traced" was said of it)
        none = all_loaded_words("", True) if damaged else "no process was traced: nothing of its loads is known"
        return [f"dlltrace ─ {none}{where}"]
    if not shown and not apart and said is None:
        return [f"dlltrace ─ {all_loaded_words('', damaged)}{where}"]
    head = f"dlltrace ─ {said}{where}" if said is not None else (
        f"dlltrace ─ {_plural(len(shown), 'failed load')}"
        + (died_without_a_gpu_words(main.outcome) if main is not None else "")
        + (f" · {len(apart) - len(before)} the program went past" if len(apart) > len(before) else "")
        + (f" · {len(before)} before the program started" if before else "")
        + where)
    lines = [head]
    if main is not None and main.unfound is not None and main.outcome.kind == "died_of_other":
        lines += unfound_lines(main.unfound, numbered_fix, windows=main.platform == "windows")
    if main is not None and main.unstarted is not None and main.outcome.kind == "died_of_other":
        lines += unstarted_lines(main.unstarted)
    if main is not None and main.gone is not None:  # (died_of_other; or how=listed: a failure no load explains)
        lines += gone_lines(main.gone, numbered_fix)
    if main is not None and main.end.crashed_at is not None:
        at = main.end.crashed_at
        lines += ["", f"It crashed in your code at {at.file}:{at.line}, in {at.function}"
                      + (f" ({main.end.fault})" if main.end.fault else "")]
    for d, f in shown:
        lines += [""] + failure_lines(d, f, (trees or {}).get((d.pid, f.seq), ()))
    apart = [(d, f) for d, f in apart if f.reason != "while_starting"]
    if apart:
        lines += ["", "Failed loads, context only: the program went past them, and none is what it ended with:"
                  if main is not None and main.outcome.kind == "died_of_other" else
                  "Failed, and the program went past them (not the failure):"]
        lines += went_past_lines(apart)
    if before:  # (verdict_linux.rule_linux_call_while_starting: not the program's; one may have ended its own process)
        lines += ["", "Failed in processes run before the program itself started (by the wrapper or script that "
                      "started it), not its failure:"]
        lines += went_past_lines(before, died=True)
    return lines


MAX_PIDS = 3  # the processes a went-past line names; the others are counted


def went_past_lines(apart: Sequence[tuple[Diagnosis, FailedLoad]], died: bool = False) -> list[str]:
    """A line for each load the program went past, the same library failing the same way in the same program said
    once: with how many times it was tried (CuPy 13.6 tries libcutensor.so.2 four times; each try is a failed load of
    the Diagnosis, and of the JSON), and in which processes (pyenv's python3 runs four bash subshells that each try
    pyenv-realpath.dylib: one line, "bash, pids 4854, 4864, 4876 and 1 more"); `died` (processes that ran before the
    program started): whether their process died of it (result.rule_process_ended_on: a script's `python check.py`
    that raised on it before the script exec'd the program)."""
    same: dict[tuple[str, str, str], list[tuple[Diagnosis, FailedLoad]]] = {}
    for d, f in apart:
        same.setdefault((_base(d.platform, d.program) or "?", f.name, f.message), []).append((d, f))
    out = []
    for (program, name, message), loads in same.items():
        pids = list(dict.fromkeys(d.pid for d, _ in loads))
        where = f"pid {pids[0]}" if len(pids) == 1 else "pids " + ", ".join(map(str, pids[:MAX_PIDS])) + (
            f" and {len(pids) - MAX_PIDS} more" if len(pids) > MAX_PIDS else "")
        ended = list(dict.fromkeys(d.pid for d, f in loads if died and rule_process_ended_on(d, f)))
        out.append(f"  {name}  ({program}, {where})  {message}"
                   + (f"  ({len(loads)} tries)" if len(loads) > len(pids) else "")
                   + (f"  ({'that process' if len(pids) == 1 else f'{len(ended)} of them'} died of it: "
                      f"{ended_type(loads, ended)})" if ended else ""))
    return out


def ended_type(loads: Sequence[tuple[Diagnosis, FailedLoad]], ended: Sequence[int]) -> str:
    """The exception type the first process of `ended` ended on ("OSError")."""
    d = next(d for d, _ in loads if d.pid == ended[0])
    return d.outcome.exception.type if d.outcome.exception is not None else "?"


def diagnoses_text(diagnoses: Sequence[Diagnosis], source: str = "", main: Optional[Diagnosis] = None,
                   everything: bool = False, markdown: bool = False,
                   trees: Optional[Mapping[tuple[int, int], Sequence[str]]] = None, damaged: bool = False) -> str:
    """diagnoses_lines as text, or as Markdown: the headline a heading, the rest in a code block (its folder
    tables keep their columns), each escaped for its place (render/escape.py: a name in the heading injects
    nothing, one in the block cannot close it)."""
    lines = diagnoses_lines(diagnoses, source, main, everything, trees, damaged)
    if markdown:
        body = lines[2:] if lines[1:2] == [""] else lines[1:]
        return "\n".join([f"## {escape_prose(lines[0])}"] + ([""] + escape_code_block(body) if body else [])) + "\n"
    return "\n".join(escape_terminal(line) for line in lines)  # (each one line: a name's newline escaped)
