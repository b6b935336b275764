"""The outcome of a process in words (diagnosis/outcome.py): the report's first line when the answer is not
"N failed loads" (the program ran without its GPU, it died of a Python error that is not a load)."""

from __future__ import annotations

import re
import shlex
from typing import Any, Callable, Optional, get_args

from dlltrace import winpath
from dlltrace.diagnosis.ending import SIGNAL_NAMES, Ending, code_name, code_text
from dlltrace.diagnosis.outcome import OutcomeKind, ProcessOutcome
from dlltrace.diagnosis.result import Gone, Unfound, Unstarted
from dlltrace.model import Fix
from dlltrace.render.calls import fix_dict
from dlltrace.render.fixwords import fix_lines, fix_text, sh_export_prepend, sh_quote
from dlltrace.trace.reader import Trace
from dlltrace.worlds.gpu import DRIVER_STATES

MAX_MESSAGE = 160  # an exception's message in the headline (its whole text is the program's own stderr)
MAX_UNFOUND_MESSAGE = 80  # the same, when the find_library call it died of follows it in the headline
CPU_FEATURES = ("CUDA", "cuDNN", "TensorRT", "the NVIDIA driver", "NCCL")


# what a Linux crash's signal means, in a few words
SIGNAL_WORDS = {4: "an illegal instruction", 5: "a trap", 6: "it aborted", 7: "a bus error", 8: "an arithmetic error",
                11: "a segmentation fault", 31: "a forbidden system call"}


def crash_words(o: ProcessOutcome) -> str:
    """"SIGABRT: it aborted", "0xc0000005 STATUS_ACCESS_VIOLATION": how a crashed process ended."""
    if o.signal is not None:
        name = SIGNAL_NAMES.get(o.signal, f"signal {o.signal}")
        return f"{name}: {SIGNAL_WORDS[o.signal]}" if o.signal in SIGNAL_WORDS else name
    return code_name(o.code)


def crash_headline(o: ProcessOutcome, fatal_leaf: Optional[str] = None, gone: Optional[Gone] = None) -> str:
    """The headline of a crash (`fatal_leaf`: the library whose failed load the crash followed, if any; `gone`: else
    the file of a distribution it imported that was not there, result.Gone how=listed)."""
    after = f", right after {fatal_leaf} failed to load" if fatal_leaf else \
        f": {gone_words(gone)}" if gone is not None else "; no failed load explains it"
    return f"the program crashed ({crash_words(o)}){after}"


def unstarted_words(u: Unstarted) -> str:
    """"the program 'tesseract' was not found on PATH": why a program the Python program started did not start."""
    if u.error == "PermissionError":  # (not executable, or a PATH folder this user may not search: it may be absent)
        return f"the program {u.program!r} could not be run: permission denied"
    if "/" in u.program or "\\" in u.program:
        return f"the program {u.program!r} does not exist"
    return f"the program {u.program!r} was not found on PATH"


def died_without_a_gpu_words(o: ProcessOutcome) -> str:
    """What "N failed loads" is followed by when the load the program died of is the NVIDIA driver's and the
    machine has no NVIDIA GPU (torch's .cuda(), CuPy's first array: outcome.rule_outcome keeps the driver state of
    such a failure), else ""."""
    if o.kind == "died_of_load" and o.gpu == "no_gpu":
        return ": the program needs an NVIDIA GPU, and this machine has none"
    return ""


def gone_words(g: Gone) -> str:
    """"xgboost.dll, a file of xgboost 2.1.3, is not there": the file of an installed distribution the program died
    for want of (result.Gone)."""
    name = re.split(r"[\\/]", g.path)[-1]
    return f"{name}, a file of {f'{g.package} {g.version}'.strip()}, is not there"


def outcome_headline(o: ProcessOutcome, unfound: Optional[Unfound] = None,
                     unstarted: Optional[Unstarted] = None, gone: Optional[Gone] = None) -> Optional[str]:
    """The headline of a degraded or died_of_other outcome (`unfound`: the library find_library did not find that
    it died of, result.Unfound; `unstarted`: the program it started that was not found, result.Unstarted; `gone`:
    the file of an installed distribution, not there, result.Gone); None for the others (their own first lines say
    it: a crash's is crash_headline, which needs the load it followed)."""
    if o.kind == "degraded":
        lost = ", ".join(o.lost)
        where = " (on the CPU)" if any(f in CPU_FEATURES for f in o.lost) else ""
        count = max(o.missing, len(o.lost_by))
        libs = o.lost_by[0] + (f" and {count - 1} more" if count > 1 else "")
        if o.gpu == "no_gpu":  # (no driver or library would change it: loader/linux/fixes.py rule_driver_state)
            return f"the program ran on the CPU: this machine has no NVIDIA GPU ({libs} did not load)"
        return f"the program ran without {lost}{where}: {libs} did not load"
    if o.kind == "died_of_other" and o.exception is not None:
        # (the answer after it, find_library's, kept in sight: python-mpv's message is 200 characters)
        most = MAX_UNFOUND_MESSAGE if unfound is not None or unstarted is not None or gone is not None else MAX_MESSAGE
        text = message_words(o.exception.text, most)
        if unfound is not None:
            return f"the program ended with {text}: ctypes.util.find_library({unfound.name!r}) found no such library"
        if unstarted is not None:
            return f"the program ended with {text}: {unstarted_words(unstarted)}"
        if gone is not None:
            return f"the program ended with {text}: {gone_words(gone)}"
        return f"the program ended with {text}; no failed load explains it"
    if gone is not None and o.kind == "crashed":  # (no failed load explains it: a file its package looks for itself)
        return crash_headline(o, None, gone)
    if gone is not None and o.kind == "exited" and o.code not in (None, 0):
        return f"the program exited with {code_text(o.code)}: {gone_words(gone)}"
    return None


def all_loaded_words(loads: str, damaged: bool) -> str:
    """A report's headline when no load failed: `loads`, "(N loads traced)" or ""; `damaged`, the trace is (its
    reader's warnings): then only what could be read is known ("every load succeeded" of a trace cut off after its
    first lines was said of nothing)."""
    return (f"no load failed in what could be read of this damaged trace{loads}" if damaged else
            f"every load succeeded{loads}")


def damaged_words(trace: Trace) -> str:
    """The paragraph a report of a damaged trace ends with (its reader's warnings: a line cut off, an event that is
    not JSON): what it is reported from, so that a report read without its stderr (pasted, attached, -o) says it;
    "" for a whole trace."""
    if not trace.warnings:
        return ""
    first = trace.warnings[0].removeprefix(f"{trace.path}: ")
    more = len(trace.warnings) - 1
    return (f"This trace is damaged ({first}" + (f", and {more} more damaged line{'s' if more != 1 else ''}" if more else "")
            + "): this report is of what could be read.")


def exited_unexplained_words(o: ProcessOutcome) -> Optional[str]:
    """The headline of a program that exited with a code not 0 when no failed load is shown as its failure (the
    failed loads there were, if any, gone past: a sys.exit(3) through pyenv's python3 after its bash subshells' tries
    of pyenv-realpath.dylib); None for any other outcome."""
    if o.kind != "exited" or o.code in (None, 0):
        return None
    return f"the program exited with {code_text(o.code)}; no failed load explains it"


def message_words(text: str, most: int = MAX_MESSAGE) -> str:
    """An exception's text in a line of words: on one line ("The signature was\n\t() -> handle"), cut to `most`
    characters between words ("…"), without its last full stop (no ".;" or ".:" after it)."""
    text = " ".join(text.split())
    if len(text) > most:
        cut = text[:most - 1]
        if cut[-1].isalnum() and text[most - 1].isalnum() and " " in cut[most // 2:]:  # (not in a word: "or i…")
            cut = cut.rsplit(" ", 1)[0]
        text = cut.rstrip() + "…"
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def unfound_lines(u: Unfound, fix_line: "Callable[[int, Fix], list[str]]", windows: bool = False) -> list[str]:
    """What a program that died of a library find_library did not find is told after the headline: the call, where
    its code was, what find_library looks in (CPython's Lib/ctypes/util.py; `windows`: the PATH folders, and the
    ones it looked in), and the fix (`fix_line`: the renderer's numbered lines of a fix)."""
    where = f"import {u.module}: " if u.module else ""
    out = ["", f"  {where}ctypes.util.find_library({u.name!r}) → None"]
    if u.user_code is not None:
        out.append(f"  in your code: {u.user_code.file}:{u.user_code.line}, in {u.user_code.function}")
    if windows:
        return out + windows_unfound_lines(u)
    lib = "lib" + u.name  # (find_library puts lib before any name: replay_linux.unversioned_name)
    if u.name.startswith("lib"):  # (replay_linux.find_lib_never_found: no package is a fix)
        return out + ["", f"  find_library looks for {lib}.so.*: on Linux it puts lib before the name it is given, so a",
                      "  name that begins with lib is never found, installed or not. The call that finds",
                      f"  {u.name}.so.* is find_library({u.name[3:]!r})."]
    out += ["", f"  find_library looks for {lib}.so.* in ld.so.cache (ldconfig -p), then through gcc and ld",
            "  (LD_LIBRARY_PATH), and found none. No load of it was made, so no loader searched for it."]
    if u.fixes:
        out += ["", "  Fix"] + [line for i, x in enumerate(u.fixes, 1) for line in fix_line(i, x)]
    else:
        out += ["", f"  Install the system package that ships {lib}.so (Debian and Ubuntu: apt-file search {lib}.so)"]
    return out


def gone_lines(g: Gone, fix_line: "Callable[[int, Fix], list[str]]") -> list[str]:
    """What a program that died for want of a file of an installed distribution is told after the headline: the
    file, who lists it, why no loader searched, and the reinstall (`fix_line`: the renderer's numbered lines of a
    fix)."""
    where = f"import {g.module}: " if g.module else ""
    record = "its conda-meta" if g.record == "conda" else "its RECORD"
    damaged = [f"  {g.package} {g.version} installed it ({record} lists {g.listed}): the install is damaged (a file",
               "  deleted, an antivirus, a copy cut short)."]
    if g.how == "listed":  # (no exception names it: dlltrace run looked for the imported distributions' files)
        out = ["", "  No failed load explains the failure, and a file of a distribution the program imported is",
               "  not there:", f"    {g.path}", *damaged,
               "  No load of it failed: a package that looks for such a file itself (Qt scans its plugins folder",
               "  for its platform plugin) fails without loading it."]
        out += ["  Not there either:", *(f"    {p}" for p in g.also)] if g.also else []
    else:
        out = ["", f"  {where}the program looked for this file before loading it, and it is not there:",
               f"    {g.path}", *damaged[:-1], damaged[-1] + " No load of it was made, so no loader searched for it."]
    if g.fixes:
        out += ["", "  Fix"] + [line for i, x in enumerate(g.fixes, 1) for line in fix_line(i, x)]
    return out


SEARCHED_SHOWN = 12  # PATH folders listed


def unfound_dll(name: str) -> str:
    """The file find_library(name) on Windows finds last: NAME itself when it ends in .dll, else NAME.dll."""
    return name if name.lower().endswith(".dll") else f"{name}.dll"


def folder_words(folder: str) -> str:
    """A PATH entry as a list shows it: an empty one is the current folder (os.path.join('', name) is name)."""
    return folder if folder else "(an empty entry: the current folder)"


def windows_unfound_lines(u: Unfound) -> list[str]:
    """unfound_lines' Windows words: find_library looks in each PATH folder for NAME, then NAME.dll, and in no other
    folder (it does not use Windows' DLL search); the folders it looked in; the fix: a folder that holds the DLL put on
    PATH (a copy the environment holds), or the pip package that ships it and then its folder on PATH (pip alone puts
    it where find_library does not look), else where to put it."""
    dll = unfound_dll(u.name)
    files = u.name if u.name.lower().endswith(".dll") else f"{u.name}, then {dll},"
    out = ["", f"  find_library looks for {files} in each folder of PATH, in order, and in no other: on Windows it",
           "  does not use the DLL search (not the program's own folder, nor the os.add_dll_directory folders).",
           "  No load of it was made."]
    if u.searched:
        out += ["", f"  It looked in the {len(u.searched)} folder{'s' if len(u.searched) != 1 else ''} of PATH, "
                    f"and none holds {dll}:"]
        out += [f"    {folder_words(d)}" for d in u.searched[:SEARCHED_SHOWN]]
        if len(u.searched) > SEARCHED_SHOWN:
            out.append(f"    … and {len(u.searched) - SEARCHED_SHOWN} more")
    if not u.fixes:
        return out + ["", f"  Put {dll} (the library's Windows DLL, of this Python's machine) in one of these folders, or put",
                      "  the folder that holds it on PATH before the program starts."]
    def lines(x: Fix, lead: str) -> list[str]:  # (each command on a line of its own: fixwords.fix_lines)
        return [(lead if k == 0 else " " * len(lead)) + text for k, (text, _) in enumerate(fix_lines(x))]

    out += ["", "  Fix"]
    for i, x in enumerate(u.fixes, 1):
        out += lines(x, f"    {i}. ")
        for step in x.then:
            out += lines(step, "       then: ")
        if x.action == "install_package" and not x.replaces:  # (pip puts it in the package's own folder)
            out += ["       (installing it alone is not enough: that folder is not on PATH, and find_library looks",
                    "       nowhere else)"]
    return out


def unstarted_lines(u: Unstarted, windows: bool = False) -> list[str]:
    """What a program that died of a program it started, not found, is told after the headline: what it ran,
    where its code was, the folders it was looked for in (the PATH the child was given), and the fix: the system
    package that ships it when the machine's own data names one (command-not-found's database, apt-file), a folder
    that holds it put on PATH, else how to find its package. `windows`: CreateProcess's search, and no package."""
    where = f"import {u.module}: " if u.module else ""
    ran = shlex.join(u.argv) if u.argv else u.program
    out = ["", f"  {where}subprocess ran {ran} → {u.error}"]
    if u.user_code is not None:
        out.append(f"  in your code: {u.user_code.file}:{u.user_code.line}, in {u.user_code.function}")
    base = u.program.replace("\\", "/").rsplit("/", 1)[-1]
    exe = base if "." in base else f"{base}.exe"  # (CreateProcess adds .exe to a name without an extension only)
    if u.error == "PermissionError":
        out += ["", f"  Starting {u.program} was refused with permission denied: a file of that name is not executable,",
                "  or a folder on its way (a PATH folder, for a name) may not be searched by this user."]
    elif u.searched and windows:  # (CreateProcess: its own folder, the current one, the system's, then PATH)
        out += ["", f"  CreateProcess looked for {exe} in the program's own folder, the current folder, the system",
                f"  folders, then the {len(u.searched)} folders of its caller's PATH, and none holds it:"]
        out += [f"    {d}" for d in u.searched[:SEARCHED_SHOWN]]
        if len(u.searched) > SEARCHED_SHOWN:
            out.append(f"    … and {len(u.searched) - SEARCHED_SHOWN} more")
    elif u.searched:
        out += ["", f"  It was looked for in the {len(u.searched)} folders of the PATH it was given, and none holds it:"]
        out += [f"    {d}" for d in u.searched[:SEARCHED_SHOWN]]
        if len(u.searched) > SEARCHED_SHOWN:
            out.append(f"    … and {len(u.searched) - SEARCHED_SHOWN} more")
    elif not u.searched and ("/" in u.program or "\\" in u.program):
        out += ["", f"  It was run by its path, and no file {u.program} exists."]
    fixes: list[tuple[str, str]] = []  # (the command, on a line of its own so that it pastes as it is; its words)
    for p in u.elsewhere:
        fixes.append((sh_export_prepend("PATH", p.rsplit("/", 1)[0]),
                      f"(it is installed as {p}, in a folder not on that PATH)"))
    if u.package and u.error != "PermissionError" and not u.elsewhere:
        sudo = "" if u.as_root else "sudo "
        fixes.append((f"{sudo}apt-get install {sh_quote(u.package)}",
                      f"(Debian, Ubuntu: the system's package of the program {base})"))
    if fixes:
        return out + ["", "  Fix"] + [x for i, (cmd, words) in enumerate(fixes, 1)
                                      for x in (f"    {i}. {cmd}", f"       {words}")]
    # (each command on a line of its own, quoted, so that it pastes as it is: fixwords.fix_lines's rule)
    if u.error == "PermissionError" and windows:
        return out + ["", f"  Check that {u.program} is a program this user may run, or install {base} again"]
    if u.error == "PermissionError" and "/" in u.program:
        return out + ["", f"  Make it executable, or install {base} again:", f"    chmod +x {sh_quote(u.program)}"]
    if u.error == "PermissionError":  # (which file of that name the search met is not known: not ./<name>)
        return out + ["", f"  Make the file {base} in a folder of that PATH executable (chmod +x), let this user search",
                      f"  each folder of that PATH (ls -ld each one), or install {base} again"]
    if windows:
        return out + ["", f"  Install the program {base}, or put the folder that holds {exe} on PATH (or give its",
                      "  full path where the package asks for it)."]
    regex = "/bin/" + re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", base) + "$"  # (apt-file's Perl regex: g++, python3.12)
    return out + ["", f"  Install the program {base}, or put the folder that holds it on PATH. Which system package",
                  "  ships it is not known here; on Debian and Ubuntu this names it:",
                  f"    apt-file search --regexp {sh_quote(regex)}"]


# the machines the shim cannot enter, as the words name them (ending.CHILD_MACHINES)
UNSUPPORTED_MACHINE_WORDS = {"arm64": "arm64", "arm64ec": "ARM64EC", "unknown": "unknown-machine"}


def untraced_line(trace: Trace, end: Ending) -> Optional[str]:
    """The report's one line when `dlltrace run` traced no load of the process it started (ending kind
    not_traced: the shim was not loaded into it), or when the trace holds no traced process at all: never
    "every load succeeded (0 loads traced)". None when a process was traced (or the program never ran, or
    could not start: their own lines say it)."""
    program = winpath.basename(trace.header.command[0]) if trace.header.command else "the program"
    ran = f"{program} ran untraced" + (f" and exited with {code_text(end.code)}" if end.code is not None else "")
    if end.kind == "not_traced":
        why = f" ({end.why})" if end.why else ""
        m = end.child_machine
        if m in UNSUPPORTED_MACHINE_WORDS:
            return (f"dlltrace cannot trace {UNSUPPORTED_MACHINE_WORDS[m]} processes: {program} is one "
                    f"(unsupported){why}; {ran}, nothing of its loads is known")
        bits = "32-bit " if m == "x86" else ""
        reason = end.why or ("no 32-bit shim was injected into it" if m == "x86" else "no event of it was written")
        return f"the shim was not loaded into this {bits}process: {reason}; {ran}, nothing of its loads is known"
    if not trace.pids and not trace.start_failures() and end.kind not in ("never_ran", "not_windows"):
        return "no process was traced: the trace holds no traced process's events, nothing of its loads is known"
    return None


SAID_WIDTH = 300  # characters of one of the program's lines shown with a load


def said_line(words: str) -> str:
    """"  the program said: UserWarning: ...": one of the program's own lines about a load (FailedLoad.said)."""
    return f"  the program said: {words if len(words) <= SAID_WIDTH else words[:SAID_WIDTH - 1] + '…'}"


def code_line(frame: object) -> Optional[str]:
    """"  in your code: train.py:12, in main": where the user's own code made the import or call of a load (a
    py_* event's `frame`), None without one."""
    if not isinstance(frame, dict) or not isinstance(frame.get("file"), str) or not isinstance(frame.get("line"), int):
        return None
    return f"  in your code: {frame['file']}:{frame['line']}, in {frame.get('function') or '?'}"


def outcome_schema() -> dict[str, Any]:
    """The JSON Schema of outcome_dict (in result-v1.json and report-linux-v1.json; tests check both have it)."""
    null, s = {"type": "null"}, {"type": "string"}
    return {"type": "object", "additionalProperties": False,
            "required": ["kind", "code", "signal", "exception", "lost", "lost_by", "missing", "gpu", "find_library",
                         "program", "file", "text"],
            "description": "the answer first: how the program dlltrace run started ended, and why "
                           "(diagnosis/outcome.py, docs/verdicts.md)",
            "properties": {"kind": {"enum": list(get_args(OutcomeKind))}, "code": {"type": ["integer", "null"]},
                           "signal": {"type": ["integer", "null"],
                                      "description": "a Linux crash's signal (6 SIGABRT, 11 SIGSEGV); code is null"},
                           "exception": {"anyOf": [null, {"type": "object", "additionalProperties": False,
                                                          "required": ["type", "message"],
                                                          "properties": {"type": s, "message": s}}]},
                           "lost": {"type": "array", "items": s}, "lost_by": {"type": "array", "items": s},
                           "missing": {"type": "integer", "minimum": 0, "description": "degraded: how many libraries "
                                       "did not load (lost_by names one a feature)"},
                           "gpu": {"enum": [None, *DRIVER_STATES],
                                   "description": "the NVIDIA driver lost (Linux): why its library was not there, from "
                                                  "the machine's GPU facts (loader/linux/fixes.py rule_driver_state); "
                                                  "null: not known or not lost"},
                           "find_library": {"anyOf": [null, {
                               "type": "object", "additionalProperties": False,
                               "required": ["name", "module", "package", "searched", "fixes"],
                               "description": "died_of_other: the library ctypes.util.find_library found none of, "
                                              "which the exception is about (result.Unfound)",
                               "properties": {"name": s, "module": s, "package": {"type": ["string", "null"]},
                                              "searched": {"type": "array", "items": s,
                                                           "description": "Windows: the PATH folders it looked in"},
                                              "fixes": {"type": "array", "items": {"type": "object"},
                                                        "description": "its fixes, as a failure's (Linux: the system "
                                                                       "package; Windows: a folder put on PATH, the pip "
                                                                       "package first when one ships it)"}}}]},
                           "program": {"anyOf": [null, {
                               "type": "object", "additionalProperties": False,
                               "required": ["name", "error", "searched", "package"],
                               "description": "died_of_other: the program it started that was not found (or not "
                                              "executable), which the exception is about (result.Unstarted)",
                               "properties": {"name": s, "error": s, "searched": {"type": "array", "items": s},
                                              "package": {"type": ["string", "null"]}}}]},
                           "file": {"anyOf": [null, {
                               "type": "object", "additionalProperties": False,
                               "required": ["path", "package", "version", "listed", "how", "also", "fix"],
                               "description": "the file of an installed distribution, not there, that the program "
                                              "failed for want of (result.Gone): died_of_other, the exception names "
                                              "it; or a failure no failed load explains (crashed, died_of_other, "
                                              "exited with a code) and `dlltrace run` found the file of a "
                                              "distribution it imported missing (how: listed). Reinstalling the "
                                              "distribution is the fix",
                               "properties": {"path": s, "package": s, "version": s, "listed": s,
                                              "how": {"enum": ["named", "listed"],
                                                      "description": "named: the exception names it; listed: "
                                                                     "its record lists it, and no exception "
                                                                     "names it"},
                                              "also": {"type": "array", "items": s,
                                                       "description": "listed: the other files of the imported "
                                                                      "distributions not there (at most 8)"},
                                              "fix": {"type": ["string", "null"],
                                                      "description": "the reinstall, in words with its command"}}}]},
                           "text": {"type": ["string", "null"],
                                    "description": "the headline of a crashed, degraded or died_of_other outcome"}}}


def cpu_builds_schema() -> dict[str, Any]:
    """The JSON Schema of a report's `cpu_builds` (render/cuda.py cpu_build_dict; result-v1.json, report-linux-v1.json):
    the CPU-only builds of GPU frameworks the program imported (diagnosis/cuda.py rule_imported_cpu_build)."""
    return {"type": "array", "description": "the CPU-only builds of GPU frameworks the program imported: they never "
                                            "load CUDA (diagnosis/cuda.py rule_imported_cpu_build)",
            "items": {"type": "object", "additionalProperties": False, "required": ["framework", "version", "read_from"],
                      "properties": {"framework": {"type": "string"}, "version": {"type": ["string", "null"]},
                                     "read_from": {"type": ["string", "null"],
                                                   "description": "the file or tag that says it has no CUDA"}}}}


def outcome_dict(o: ProcessOutcome, fatal_leaf: Optional[str] = None, unfound: Optional[Unfound] = None,
                 unstarted: Optional[Unstarted] = None, gone: Optional[Gone] = None) -> dict[str, Any]:
    """The outcome in a report's JSON (result-v1.json, report-linux-v1.json: `outcome`); a Linux crash's text is
    its crash_headline (`fatal_leaf`: the load it followed), a Windows crash's is said by the report's ending;
    `unfound`: the library find_library did not find that it died of; `unstarted`: the program it started that was
    not found; `gone`: the file of an installed distribution, not there, that it died for want of."""
    text = crash_headline(o, fatal_leaf, gone) if o.kind == "crashed" and o.signal is not None else \
        outcome_headline(o, unfound, unstarted, gone)
    found = None if unfound is None else {
        "name": unfound.name, "module": unfound.module,
        "package": next((x.package for x in unfound.fixes if x.action in ("install_system_package", "install_package")),
                        None),
        "searched": list(unfound.searched), "fixes": [fix_dict(x) for x in unfound.fixes]}
    return {"kind": o.kind, "code": o.code, "signal": o.signal,
            "exception": None if o.exception is None else {"type": o.exception.type, "message": o.exception.message},
            "lost": list(o.lost), "lost_by": list(o.lost_by), "missing": max(o.missing, len(o.lost_by)),
            "gpu": o.gpu or None, "find_library": found,
            "program": None if unstarted is None else {"name": unstarted.program, "error": unstarted.error,
                                                       "searched": list(unstarted.searched),
                                                       "package": unstarted.package},
            "file": None if gone is None else {"path": gone.path, "package": gone.package, "version": gone.version,
                                               "listed": gone.listed, "how": gone.how, "also": list(gone.also),
                                               "fix": fix_text(gone.fixes[0]) if gone.fixes else None},
            "text": text}
