"""The Windows API from Python, through ctypes-windows-sdk (`cwinsdk`, a Windows-only dependency in
pyproject.toml), imported on Windows only, on first use: this module imports anywhere, and every
function raises WindowsOnly elsewhere.

What the Python side asks Windows (the live world on Windows, worlds/live.py; the run command on Windows):
  system_folders()        GetWindowsDirectoryW, GetSystemDirectoryW
  known_dlls()            HKLM\\...\\Session Manager\\KnownDLLs (RegOpenKeyExW, RegEnumValueW)
  safe_dll_search_mode()  its SafeDllSearchMode value (RegGetValueW)
  dll_directory()         this process's SetDllDirectory folder (GetDllDirectoryW)
  process_modules(pid)    the modules a process has loaded (OpenProcess, EnumProcessModulesEx,
                          GetModuleFileNameExW)
  format_message(code)    the system's text for a Win32 error or an NTSTATUS (FormatMessageW)
  kill_on_close_job(pid)  for `dlltrace run` on Windows: the launcher in a job that ends it when dlltrace
                          ends, however it ends (the twin of die_with_parent's PR_SET_PDEATHSIG on Linux);
                          close_handle(job) once the launcher has ended

Better done in the shim, and done there (native/shim/dlltrace_shim.c, write_env): the same facts *of the
traced process*. Its DLL directory has no API that reads it from another process (GetDllDirectoryW
answers for the caller only), its KnownDLLs and system folder are those of its own registry and file
system view (a 32-bit program's are redirected by WOW64), and its loaded modules are only all there once
its loader has run, which the shim sees from inside and a second process only races. So `dlltrace run`
stores the shim's facts in the trace, and these functions are for this process and the live world.

Where ctypes-windows-sdk 0.0.20 has the function or constant, it is used (SDK, checked against the
package's source by tests/test_winapi.py); what it lacks (OWN below: OpenProcess, FormatMessageW,
GetDllDirectoryW, GetModuleHandleW, the job-object calls; constants it only has inside a commented-out
block, such as KEY_READ and REG_SZ) is declared here through its `windll` loader, with the Windows SDK's
values.

NOT RUN ON REAL WINDOWS: this machine and CI are Linux. tests/test_winapi.py runs every function here
against a fake of the package (the calls' buffers, sizes, retries, error paths and results), checks that
the package defines every name used (in its 0.0.20 source), and that the module imports without it.
The calls themselves, against a real kernel32/advapi32, have not been run.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterable, Optional

# What is taken from ctypes-windows-sdk: module -> names (tests/test_winapi.py checks them in its source).
SDK: dict[str, tuple[str, ...]] = {
    "cwinsdk": ("windll",),
    "cwinsdk.um.sysinfoapi": ("GetWindowsDirectoryW", "GetSystemDirectoryW"),
    "cwinsdk.um.winreg": ("RegOpenKeyExW", "RegEnumValueW", "RegGetValueW", "RegCloseKey", "HKEY_LOCAL_MACHINE",
                          "RRF_RT_REG_DWORD"),
    "cwinsdk.um.psapi": ("EnumProcessModulesEx", "GetModuleFileNameExW", "LIST_MODULES_ALL"),
    "cwinsdk.um.processthreadsapi": ("GetCurrentProcess",),
    "cwinsdk.um.handleapi": ("CloseHandle",),
    "cwinsdk.um.errhandlingapi": ("GetLastError",),
    "cwinsdk.um.winbase": ("LocalFree",),
    "cwinsdk.shared.minwindef": ("HKEY", "HMODULE"),
    "cwinsdk.shared.winerror": ("ERROR_NO_MORE_ITEMS", "ERROR_MORE_DATA", "ERROR_FILE_NOT_FOUND"),
}
# What ctypes-windows-sdk 0.0.20 does not have, declared here (_declare_own); tests/test_winapi.py checks
# that it really lacks them (so a later version that adds them is noticed).
OWN = ("OpenProcess", "FormatMessageW", "GetDllDirectoryW", "GetModuleHandleW", "CreateJobObjectW",
       "SetInformationJobObject", "AssignProcessToJobObject")

KNOWN_DLLS_KEY = "SYSTEM\\CurrentControlSet\\Control\\Session Manager\\KnownDLLs"
SESSION_MANAGER_KEY = "SYSTEM\\CurrentControlSet\\Control\\Session Manager"
# Windows SDK values (winnt.h, winbase.h) that the package defines only inside a commented-out block
KEY_READ = 0x20019
REG_SZ, REG_EXPAND_SZ = 1, 2
PROCESS_TERMINATE, PROCESS_VM_READ, PROCESS_SET_QUOTA, PROCESS_QUERY_INFORMATION = 0x1, 0x10, 0x100, 0x400
FORMAT_MESSAGE_ALLOCATE_BUFFER, FORMAT_MESSAGE_IGNORE_INSERTS = 0x100, 0x200
FORMAT_MESSAGE_FROM_HMODULE, FORMAT_MESSAGE_FROM_SYSTEM = 0x800, 0x1000
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JobObjectExtendedLimitInformation = 9
MAX_LONG_PATH = 32767  # a path's most UTF-16 units (the \\?\ form)


class WindowsOnly(OSError):
    """A Windows API call made where there is none (not Windows, or ctypes-windows-sdk not installed)."""


@dataclass(frozen=True)
class SystemFolders:
    windows: str   # GetWindowsDirectoryW
    system32: str  # GetSystemDirectoryW: the caller's view (a 32-bit Python's is redirected to SysWOW64)


_loaded: Optional[SimpleNamespace] = None


def available() -> bool:
    """Whether the calls here can be made (Windows, with ctypes-windows-sdk installed)."""
    try:
        _sdk()
    except WindowsOnly:
        return False
    return True


def _sdk() -> SimpleNamespace:
    """The functions and constants used here: ctypes-windows-sdk's (SDK) and ours (OWN). Loaded once."""
    global _loaded
    if _loaded is None:
        if sys.platform != "win32":
            raise WindowsOnly(f"the Windows API is not available on {sys.platform}")
        ns = SimpleNamespace()
        try:
            for module, names in SDK.items():
                m = importlib.import_module(module)
                for n in names:
                    setattr(ns, n, getattr(m, n))
        except (ImportError, AttributeError) as e:
            raise WindowsOnly(f"ctypes-windows-sdk is missing or too old ({e}): pip install 'ctypes-windows-sdk>=0.0.20'"
                              ) from None
        _declare_own(ns)
        _loaded = ns
    return _loaded


class _JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32), ("SchedulingClass", ctypes.c_uint32)]


class _IO_COUNTERS(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
                                               "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("BasicLimitInformation", _JOBOBJECT_BASIC_LIMIT_INFORMATION), ("IoInfo", _IO_COUNTERS),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


def _declare_own(ns: SimpleNamespace) -> None:
    """OWN, through the package's windll loader, with argtypes as in the Windows SDK headers."""
    from ctypes import wintypes as w

    k32 = ns.windll.kernel32

    def fn(name: str, restype: Any, *argtypes: Any) -> None:
        f = getattr(k32, name)
        f.restype, f.argtypes = restype, list(argtypes)
        setattr(ns, name, f)

    fn("OpenProcess", w.HANDLE, w.DWORD, w.BOOL, w.DWORD)
    fn("FormatMessageW", w.DWORD, w.DWORD, w.LPCVOID, w.DWORD, w.DWORD, ctypes.c_void_p, w.DWORD, ctypes.c_void_p)
    fn("GetDllDirectoryW", w.DWORD, w.DWORD, w.LPWSTR)
    fn("GetModuleHandleW", w.HMODULE, w.LPCWSTR)
    fn("CreateJobObjectW", w.HANDLE, ctypes.c_void_p, w.LPCWSTR)
    fn("SetInformationJobObject", w.BOOL, w.HANDLE, ctypes.c_int, ctypes.c_void_p, w.DWORD)
    fn("AssignProcessToJobObject", w.BOOL, w.HANDLE, w.HANDLE)


def _last_error() -> int:
    return int(_sdk().GetLastError())


def _winerror(e: OSError) -> Optional[int]:
    """The Win32 error an OSError of the package's errcheck carries (WinError(code))."""
    return getattr(e, "winerror", None)


def _string_call(call: Any, first: int = 260) -> str:
    """A `UINT f(LPWSTR buf, UINT size)` call that returns the length written, or the size needed when the
    buffer is too small (GetWindowsDirectoryW, GetSystemDirectoryW), or 0 on failure."""
    size = first
    for _ in range(3):
        buf = ctypes.create_unicode_buffer(size)
        n = int(call(buf, size))
        if n == 0:
            raise WindowsOnly(f"{getattr(call, '__name__', 'the call')} failed (error {_last_error()})")
        if n < size:
            return buf.value[:n]
        size = n + 1
    raise WindowsOnly("the folder's name kept growing")


def system_folders() -> SystemFolders:
    s = _sdk()
    return SystemFolders(windows=_string_call(s.GetWindowsDirectoryW), system32=_string_call(s.GetSystemDirectoryW))


def reg_sz(raw: bytes) -> str:
    """A REG_SZ / REG_EXPAND_SZ value's bytes as text: UTF-16-LE, up to its first NUL (a value may or may
    not hold its terminator, and may hold garbage after it)."""
    text = raw[: len(raw) - len(raw) % 2].decode("utf-16-le", "replace")
    return text.split("\0", 1)[0]


def known_dll_names(values: Iterable[tuple[str, int, bytes]]) -> list[str]:
    """The file names in the KnownDLLs key's values (name, type, data): the string values' data, as the
    loader reads them (the value names do not matter; DllDirectory* are folders, not DLLs)."""
    out: list[str] = []
    for name, kind, data in values:
        if kind not in (REG_SZ, REG_EXPAND_SZ) or name.lower().startswith("dlldirectory"):
            continue
        text = reg_sz(data).strip()
        if text:
            out.append(text)
    return out


def _enum_values(key: Any) -> list[tuple[str, int, bytes]]:
    s = _sdk()
    from ctypes import wintypes as w

    out: list[tuple[str, int, bytes]] = []
    i = 0
    while True:
        name = ctypes.create_unicode_buffer(16384)  # a value name's most characters + 1
        name_len, kind = w.DWORD(len(name)), w.DWORD(0)
        data = ctypes.create_string_buffer(4096)
        data_len = w.DWORD(len(data))
        try:
            s.RegEnumValueW(key, i, name, ctypes.byref(name_len), None, ctypes.byref(kind), data, ctypes.byref(data_len))
        except OSError as e:
            if _winerror(e) == s.ERROR_NO_MORE_ITEMS:
                return out
            if _winerror(e) == s.ERROR_MORE_DATA:  # a value past 4 KB is no DLL name
                i += 1
                continue
            raise
        out.append((name.value[: name_len.value], int(kind.value), data.raw[: data_len.value]))
        i += 1


def known_dlls() -> Optional[list[str]]:
    """The KnownDLLs file names from the registry, as the shim records them (`env.known_dlls`); None when
    the key is absent (as under Wine)."""
    s = _sdk()
    key = s.HKEY()
    try:
        s.RegOpenKeyExW(s.HKEY_LOCAL_MACHINE, KNOWN_DLLS_KEY, 0, KEY_READ, ctypes.byref(key))
    except OSError as e:
        if _winerror(e) == s.ERROR_FILE_NOT_FOUND:
            return None
        raise
    try:
        return known_dll_names(_enum_values(key))
    finally:
        s.RegCloseKey(key)


def safe_dll_search_mode() -> Optional[int]:
    """Session Manager's SafeDllSearchMode (a DWORD); None when it is not set (the loader's default: on)."""
    s = _sdk()
    from ctypes import wintypes as w

    value, size = w.DWORD(0), w.DWORD(4)
    try:
        s.RegGetValueW(s.HKEY_LOCAL_MACHINE, SESSION_MANAGER_KEY, "SafeDllSearchMode", s.RRF_RT_REG_DWORD, None,
                       ctypes.byref(value), ctypes.byref(size))
    except OSError as e:
        if _winerror(e) == s.ERROR_FILE_NOT_FOUND:
            return None
        raise
    return int(value.value)


def dll_directory() -> Optional[str]:
    """This process's SetDllDirectory folder; None when none is set. (The traced process's is recorded by
    its shim: no API reads another process's.)"""
    s = _sdk()
    size = 260
    for _ in range(3):
        buf = ctypes.create_unicode_buffer(size)
        n = int(s.GetDllDirectoryW(size, buf))
        if n == 0:
            return None  # none set (or an error: the same answer for the search order, the default one)
        if n < size:
            return buf.value[:n]
        size = n + 1
    return None


def process_modules(pid: Optional[int] = None) -> list[str]:
    """The full paths of the modules loaded in process `pid` (None: this one), the exe first, in the
    loader's order. Another process: it must be fully started (EnumProcessModulesEx fails with
    ERROR_PARTIAL_COPY on one created suspended), and this Python must be 64-bit to list a 64-bit one."""
    s = _sdk()
    from ctypes import wintypes as w

    own = pid is None
    h = s.GetCurrentProcess() if own else s.OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, False, pid)
    if not h:
        raise WindowsOnly(f"cannot open process {pid} (error {_last_error()})")
    try:
        count = 256
        while True:
            mods = (s.HMODULE * count)()
            needed = w.DWORD(0)
            s.EnumProcessModulesEx(h, mods, ctypes.sizeof(mods), ctypes.byref(needed), s.LIST_MODULES_ALL)
            n = needed.value // ctypes.sizeof(s.HMODULE)
            if n <= count:
                break
            count = n + 16  # it loaded more meanwhile
        out: list[str] = []
        buf = ctypes.create_unicode_buffer(MAX_LONG_PATH)
        for m in list(mods)[:n]:
            try:
                length = int(s.GetModuleFileNameExW(h, m, buf, MAX_LONG_PATH))
            except OSError:
                continue  # unloaded meanwhile
            out.append(buf.value[:length])
        return out
    finally:
        if not own:
            s.CloseHandle(h)


def clean_message(text: str) -> str:
    """FormatMessage's text on one line: no CR/LF (it ends with one, and some messages have several lines),
    no insert placeholders left (%1)."""
    return " ".join(text.replace("%1", "").split())


def format_message(code: int) -> Optional[str]:
    """The system's text for an error code: a Win32 error (126), or an NTSTATUS (0xC0000135, from ntdll's
    message table); None when the system has none."""
    s = _sdk()
    from ctypes import wintypes as w

    flags = FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_IGNORE_INSERTS
    source = None
    if code & 0xC0000000 == 0xC0000000:  # an NTSTATUS error (0xC0000135): ntdll's messages
        source = s.GetModuleHandleW("ntdll.dll")
        flags |= FORMAT_MESSAGE_FROM_HMODULE
    else:
        flags |= FORMAT_MESSAGE_FROM_SYSTEM
    out = w.LPWSTR()
    # (ALLOCATE_BUFFER: the buffer argument is a pointer to the LPWSTR the system allocates)
    n = int(s.FormatMessageW(flags, source, code & 0xFFFFFFFF, 0, ctypes.byref(out), 0, None))
    if not n or not out:
        return None
    try:
        text = (out.value or "")[:n]
    finally:
        s.LocalFree(out)
    return clean_message(text) or None


def kill_on_close_job(pid: int) -> int:
    """Put process `pid` (the launcher `dlltrace run` started) in a new job object with
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, and return the job's handle: the caller keeps it open for the run,
    and when the caller's process ends, however (Task Manager too), Windows closes it and ends the launcher,
    whose own kill-on-close job then ends the program (native/launcher/dlltrace_launch.c). Nested jobs need
    Windows 8 or later. Raises WindowsOnly when the job cannot be made (the run goes on without it)."""
    s = _sdk()
    job = s.CreateJobObjectW(None, None)
    if not job:
        raise WindowsOnly(f"CreateJobObjectW failed (error {_last_error()})")
    info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    proc = s.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
    ok = bool(proc) and bool(s.SetInformationJobObject(job, JobObjectExtendedLimitInformation, ctypes.byref(info),
                                                       ctypes.sizeof(info))) \
        and bool(s.AssignProcessToJobObject(job, proc))
    err = _last_error()
    if proc:
        s.CloseHandle(proc)
    if not ok:
        s.CloseHandle(job)
        raise WindowsOnly(f"cannot put process {pid} in a job (error {err})")
    return int(job)


def close_handle(handle: int) -> None:
    """CloseHandle (kill_on_close_job's job, once the launcher has ended: closing it earlier ends the
    launcher)."""
    _sdk().CloseHandle(handle)
