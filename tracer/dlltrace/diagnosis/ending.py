"""How the traced program ended, as a typed fact read from the trace's `exit` events (docs/trace-format.md):
the launcher's (the program's full 32-bit exit code, and whether a Ctrl-C came or Wine ran a Unix
program instead) and `dlltrace run`'s own (`by` "dlltrace": the launcher's exit status, the signal
dlltrace received), with the shim's `stats` line (written only when a process exits through
ExitProcess). The report and `dlltrace run` say the ending from this (ending_line, headline), never from
text, and `dlltrace run` takes its exit code from it (runner.py: run_exit_code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

from dlltrace.trace.reader import Trace

EndingKind = Literal[
    "exited",           # the program exited (ExitProcess, the end of main) with `code`
    "crashed",          # it ended on an unhandled exception: `code` is its NTSTATUS (0xC0000005 ...)
    "could_not_start",  # its static imports failed before its entry point (0xC0000135 ...: STARTUP_STATUS)
    "killed",           # it ended without exiting: killed (a signal under Wine, TerminateProcess), or with the launcher
    "interrupted",      # a Ctrl-C was passed to it (then it ended, or was killed)
    "never_ran",        # Wine (or the launcher) ended before the program was started
    "not_windows",      # Wine ran the command as a Unix program: outside Windows, untraced, no exit code
    "not_traced",       # the launcher started it, and the shim never ran in it: no `process` event (a 32-bit or
                        # an arm64 program, an injection that failed); it ran untraced (`child_machine`, `why`)
    "unknown",          # the trace does not say (written without the launcher, or by an older one)
]

# Exit codes that are NTSTATUS crash codes, named in the report (verdict.py's words use them too)
CRASH_TEXT = {0xC0000005: "STATUS_ACCESS_VIOLATION", 0xC000001D: "STATUS_ILLEGAL_INSTRUCTION",
              0xC0000094: "STATUS_INTEGER_DIVIDE_BY_ZERO", 0xC00000FD: "STATUS_STACK_OVERFLOW",
              0xC0000374: "STATUS_HEAP_CORRUPTION", 0xC0000409: "STATUS_STACK_BUFFER_OVERRUN",
              0xC06D007E: "delay-load module not found", 0xC06D007F: "delay-load procedure not found",
              0xE06D7363: "unhandled C++ exception", 0x80000003: "STATUS_BREAKPOINT",
              0x80000100: "EXCEPTION_WINE_STUB"}
EXCEPTION_WINE_STUB = 0x80000100  # Wine: a function called that Wine bound to a stub (ntdll stub_entry_point)


def is_crash(code: Optional[int]) -> bool:
    """An exit code that is an NTSTATUS error (0xC0000005 ...; 0xE06D7363, a C++ exception; the
    breakpoint 0x80000003; Wine's EXCEPTION_WINE_STUB 0x80000100, a call to a function it bound to a stub), not
    exit(-1)...exit(-65536) (0xFFFFFFFF...0xFFFF0000)."""
    if code is None:
        return False
    return 0xC0000000 <= code < 0xFFFF0000 or code in (0x80000002, 0x80000003, EXCEPTION_WINE_STUB)


def exit_text(code: Optional[int]) -> str:
    if code is None:
        return "?"
    if code >= 0x80000000:
        name = CRASH_TEXT.get(code)
        return f"{code:#x}" + (f" {name}" if name else "")
    return str(code)


STATUS_CONTROL_C_EXIT = 0xC000013A
SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
                9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 31: "SIGSYS"}

# plain words for the exit codes a report meets (NTSTATUS crashes and loader failures, a DllMain's 1114)
CODE_WORDS = {
    0xC0000005: "an access violation",
    0xC000001D: "an illegal instruction",
    0xC0000094: "an integer division by zero",
    0xC00000FD: "a stack overflow",
    0xC0000374: "heap corruption",
    0xC0000409: "a stack buffer overrun, or a fail-fast exit: abort() of a program built with MSVC",
    0xC0000135: "a DLL it needs was not found",
    0xC0000139: "a function it imports was not found in its DLL",
    0xC000007B: "a DLL or the program is not a valid image for this machine",
    0xC0000142: "a DLL's initialization (DllMain) failed",
    0xC000013A: "it was ended by Ctrl-C",
    0xC06D007E: "a delay-loaded DLL was not found",
    0xC06D007F: "a delay-loaded function was not found",
    0xE06D7363: "an unhandled C++ exception",
    0x80000003: "a breakpoint",
    0x80000100: "a call to a function its DLL does not export: Wine bound the import to a stub, and the program "
                "ended when it called it",
    1114: "ERROR_DLL_INIT_FAILED: a DLL's initialization routine (DllMain) failed",
}
STATUS_NAMES = {0xC0000135: "STATUS_DLL_NOT_FOUND", 0xC0000139: "STATUS_ENTRYPOINT_NOT_FOUND",
                0xC000007B: "STATUS_INVALID_IMAGE_FORMAT", 0xC0000142: "STATUS_DLL_INIT_FAILED",
                0xC000013A: "STATUS_CONTROL_C_EXIT"}


@dataclass(frozen=True)
class Ending:
    kind: EndingKind
    code: Optional[int] = None             # the program's full exit code, when the launcher saw it end
    pid: Optional[int] = None              # the launcher's child
    launcher_status: Optional[int] = None  # `dlltrace run`: the launcher's exit status (negative: its signal)
    signal: Optional[int] = None           # `dlltrace run`: the signal it received and passed on
    # not_traced: the child's machine as the launcher read it from its PE header (`child_machine`: x64, x86, arm64,
    # arm64ec, unknown; None from a launcher that does not say), and the launcher's warning of why it could not inject
    child_machine: Optional[str] = None
    why: str = ""

    @property
    def abnormal(self) -> bool:
        """Not an exit of the program's own (with whatever code), nor unknown: said in every report."""
        return self.kind in ("crashed", "killed", "interrupted", "never_ran", "not_windows", "not_traced")


def code_name(code: Optional[int]) -> str:
    """"0xc0000005 STATUS_ACCESS_VIOLATION", "0xc0000135 STATUS_DLL_NOT_FOUND", "1114", "3"."""
    if code is None:
        return "?"
    text = exit_text(code)
    return f"{text} {STATUS_NAMES[code]}" if code in STATUS_NAMES and " " not in text else text


def code_text(code: Optional[int]) -> str:
    """"0xc0000005 STATUS_ACCESS_VIOLATION (an access violation)", "1114 (ERROR_DLL_INIT_FAILED: …)", "3"."""
    text = code_name(code)
    words = CODE_WORDS.get(code) if code is not None else None
    return f"{text} ({words})" if words else text


def ending(trace: Trace) -> Ending:
    """How the program `dlltrace run` started ended (the launcher's child), from the trace's facts."""
    mine = next((e for e in trace.of("exit") if e.get("by") == "dlltrace"), None)
    status = mine.get("launcher_status") if mine else None
    sig = mine.get("signal") if mine else None
    base: dict[str, Any] = dict(launcher_status=status, signal=sig)
    launcher = [e for e in trace.of("exit") if e.get("by") == "launcher"]
    ex = launcher[0] if launcher else None
    if ex is not None and ex.get("ended") == "not_windows":
        return Ending("not_windows", pid=None, **base)
    interrupted = sig == 2 or (ex is not None and ex.get("ended") == "interrupted")
    if ex is None:
        if interrupted:
            return Ending("interrupted", **base)
        if trace.pids:  # the program ran, and its exit was never recorded: the launcher ended first
            return Ending("killed", **base) if mine is not None else Ending("unknown", **base)
        if mine is not None and not any(trace.of("launch_error")):
            return Ending("never_ran", **base)
        return Ending("unknown", **base)
    pid, code = ex.get("pid"), ex.get("code")
    if interrupted or code == STATUS_CONTROL_C_EXIT:
        return Ending("interrupted", code=code, pid=pid, **base)
    if pid is not None and trace.start_status(pid) is not None:
        return Ending("could_not_start", code=code, pid=pid, **base)
    untraced = not_traced(trace, ex)
    if untraced is not None:
        return Ending("not_traced", code=code, pid=pid, child_machine=untraced[0], why=untraced[1], **base)
    if is_crash(code):
        return Ending("crashed", code=code, pid=pid, **base)
    # the shim writes `stats` when its process exits through ExitProcess; a launcher that writes
    # `ended` comes with a shim that writes it: a traced process without it did not exit, it was ended
    if "ended" in ex and pid in trace.pids and not any(trace.of("stats", pid=pid)):
        return Ending("killed", code=code, pid=pid, **base)
    return Ending("exited", code=code, pid=pid, **base)


CHILD_MACHINES = ("x64", "x86", "arm64", "arm64ec", "unknown")  # the launcher's `child_machine` values


def not_traced(trace: Trace, ex: dict) -> Optional[tuple[Optional[str], str]]:
    """Whether the process the launcher started (its `exit` event `ex`) ran untraced: the launcher started it
    (a pid) and the trace has no `process` event of it (the shim never started in it), or the launcher warned
    that it could not inject the shim into it. Returns (the child's machine as the launcher read it, or None;
    the launcher's warning about it, or ""), or None when it was traced. A program that never reached its
    entry point (could_not_start) is not asked about: the shim never starts in one."""
    pid = ex.get("pid")
    if pid is None or not isinstance(pid, int) or pid == 0:
        return None
    machine = ex.get("child_machine")
    machine = machine if machine in CHILD_MACHINES else None
    warned = next((str(w.get("message") or "") for w in trace.of("warning", pid=pid)
                   if w.get("by") == "launcher" and w.get("seq") == 0), None)
    if pid in trace.pids and warned is None:
        return None
    return machine, warned or ""


def headline(e: Ending) -> str:
    """The few words the report's first line gets for an abnormal ending ("" otherwise)."""
    return {"crashed": f"the program crashed ({code_name(e.code)})", "killed": "the program was killed",
            "interrupted": "interrupted (Ctrl-C)", "never_ran": "the program never ran",
            "not_windows": "the program never ran as a Windows program",
            "not_traced": "the program ran untraced"}.get(e.kind, "")


def ending_line(e: Ending, explained: bool) -> str:
    """The sentence that says how the program ended ("" when there is nothing to say: a normal exit, which
    the verdicts already use, or an unknown one); `explained`: a failed load the program hit is reported."""
    blame = "" if explained else "; no failed load explains it"
    if e.kind == "exited":
        return f"The program exited with {code_text(e.code)}{blame}." if e.code not in (None, 0) and not explained else ""
    if e.kind == "crashed":
        return f"The program crashed: {code_text(e.code)}{blame}."
    if e.kind == "killed":
        if e.code is None and e.signal is not None:
            return (f"The program was ended with dlltrace run, which received {SIGNAL_NAMES.get(e.signal, f'signal {e.signal}')}"
                    ": its exit was never recorded, and the trace ends where it was ended.")
        if e.code is None:
            how = (f" with dlltrace's launcher ({SIGNAL_NAMES.get(-e.launcher_status, f'signal {-e.launcher_status}')})"
                   if e.launcher_status is not None and e.launcher_status < 0 else " with dlltrace's launcher")
            return f"The program was killed{how}: its exit was never recorded, and the trace ends where it was killed."
        return ("The program was killed: it ended without exiting (a kill signal, or TerminateProcess by another "
                f"process; the code given for it is {code_text(e.code)}), and the trace ends where it was killed.")
    if e.kind == "interrupted":
        if e.code is not None:
            return f"Interrupted: Ctrl-C was passed to the program, which then ended with {code_text(e.code)}."
        return "Interrupted: Ctrl-C was passed to the program, which did not end on it and was killed with the launcher."
    if e.kind == "never_ran":
        st = e.launcher_status
        why = f"exited with {st}" if st is not None and st >= 0 else (
            f"was killed ({SIGNAL_NAMES.get(-st, f'signal {-st}')})" if st is not None else "ended")
        return (f"The program never ran: Wine {why} before dlltrace's launcher could start it (Wine's own message, "
                "if any, is on stderr; check WINEPREFIX and the Wine installation).")
    if e.kind == "not_windows":
        return ("The program never ran as a Windows program: it is not one (a shell script, a Linux executable), so "
                "Wine ran it as a Unix program, outside Windows and untraced, and its exit code is not known. "
                "Give a Windows .exe to --wine (tracing native Linux programs is not supported).")
    return ""
