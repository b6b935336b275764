"""dlltrace.winapi (the Windows API through ctypes-windows-sdk) and the live world's Windows facts, off
Windows: the module imports without the package, the package (0.0.20, fetched from PyPI) defines every
name used, and each function against a fake of the API (buffers, sizes, retries, errors, results).
NOT covered: the calls against a real kernel32/advapi32 (no Windows Python here)."""

from __future__ import annotations

import ast
import ctypes
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import winetools
from dlltrace import winapi
from dlltrace.errors import EXIT_UNSUPPORTED, DlltraceError
from dlltrace.worlds import live

ROOT = Path(__file__).resolve().parent.parent
CWS = "ctypes-windows-sdk"
CWS_VERSION = "0.0.20"
CWS_WHEEL = winetools.DOWNLOADS / "wheels" / f"ctypes_windows_sdk-{CWS_VERSION}-py3-none-any.whl"


# ---- without Windows ---------------------------------------------------------------------------------
def test_imports_and_says_unavailable_without_windows():
    code = ("import sys, dlltrace.winapi as w, dlltrace.worlds.live\n"
            "print(w.available(), 'cwinsdk' in sys.modules)\n"
            "try:\n    w.system_folders()\nexcept w.WindowsOnly as e:\n    print('WindowsOnly', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "False False"  # nothing imported it
    assert second == f"WindowsOnly the Windows API is not available on {sys.platform}"


def test_live_world_says_windows_only_in_one_line():
    with pytest.raises(DlltraceError) as e:
        live.live_system()
    assert e.value.exit_code == EXIT_UNSUPPORTED
    assert str(e.value) == "the live system reads the Windows API: Windows only, with ctypes-windows-sdk installed"
    assert live.error_message(126) == "The specified module could not be found."  # the model's words, any OS
    assert live.error_message(5555) == "error 5555"
    assert live.error_message(0xC0000999) == "status 0xC0000999"


# ---- the package really has what is used -----------------------------------------------------------
@pytest.fixture(scope="module")
def cws_source(tmp_path_factory) -> Path:
    """ctypes-windows-sdk 0.0.20's files (the wheel, fetched once into the test cache)."""
    import realwheels as rw

    rw.or_skip(lambda: rw.pip_download(f"{CWS}=={CWS_VERSION}", CWS_WHEEL.name, CWS_WHEEL.parent, "--only-binary=:all:"))
    out = tmp_path_factory.mktemp("cws")
    with zipfile.ZipFile(CWS_WHEEL) as z:
        z.extractall(out)
    return out


def top_level_names(path: Path) -> set[str]:
    """Names a module defines at its top level (assignments, functions, classes, imports); not those in a
    string (the package keeps parts of winnt.h as a commented-out block)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            out |= {a.asname or a.name for a in node.names}
    return out


def module_file(root: Path, module: str) -> Path:
    parts = module.split(".")
    pkg = root.joinpath(*parts) / "__init__.py"
    return pkg if pkg.exists() else root.joinpath(*parts[:-1], parts[-1] + ".py")


def test_the_package_defines_every_name_used(cws_source):
    missing = [f"{m}.{n}" for m, names in winapi.SDK.items() for n in names
               if n not in top_level_names(module_file(cws_source, m))]
    assert missing == []


def test_what_is_declared_here_is_really_missing_from_the_package(cws_source):
    everywhere: set[str] = set()
    for p in (cws_source / "cwinsdk").rglob("*.py"):
        everywhere |= top_level_names(p)
    assert [n for n in winapi.OWN if n in everywhere] == []
    # the constants defined here: only inside the package's commented-out winnt.h block, not as names
    winnt = top_level_names(cws_source / "cwinsdk" / "um" / "winnt.py")
    assert {"KEY_READ", "REG_SZ", "REG_EXPAND_SZ", "PROCESS_VM_READ", "PROCESS_QUERY_INFORMATION"}.isdisjoint(winnt)
    assert "KEY_READ = (STANDARD_RIGHTS_READ" in (cws_source / "cwinsdk" / "um" / "winnt.py").read_text()


# The real package imported on Linux, with ctypes' Windows-only parts faked (a WinDLL whose functions only
# record their DLL and name): what winapi._sdk() binds, and how the package declares each function.
FAKE_WINDOWS = """
import ctypes, json, sys

class FakeFunction:
    def __init__(self, dll, name):
        self.dll, self.__name__ = dll, name
    def __call__(self, *args):
        raise AssertionError("a fake")

class FakeDLL:
    def __init__(self, name, *args, **kwargs):
        self._name = name
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        f = FakeFunction(self._name, name)
        setattr(self, name, f)
        return f

ctypes.WinDLL = ctypes.OleDLL = FakeDLL
ctypes.WINFUNCTYPE = ctypes.CFUNCTYPE
ctypes.WinError = lambda code=None, descr=None: OSError(None, descr, None, code)
ctypes.HRESULT = ctypes.c_long
sys.path.insert(0, sys.argv[1])
sys.platform = "win32"
from dlltrace import winapi
s = winapi._sdk()
out = {}
for name in [n for names in winapi.SDK.values() for n in names] + list(winapi.OWN):
    f = getattr(s, name)
    if isinstance(f, FakeFunction):
        check = getattr(f, "errcheck", None)
        out[name] = [f.dll, f.__name__, len(f.argtypes), check.__name__ if check else None]
print(json.dumps(out))
"""

# How winapi calls each: (DLL, export, the number of arguments it passes, the package's errcheck, which
# decides whether a failure raises OSError(winerror) or is the return value winapi reads)
CALLS = {
    "GetWindowsDirectoryW": ["kernel32", "GetWindowsDirectoryW", 2, None],
    "GetSystemDirectoryW": ["kernel32", "GetSystemDirectoryW", 2, None],
    "RegOpenKeyExW": ["advapi32", "RegOpenKeyExW", 5, "error_success"],
    "RegEnumValueW": ["advapi32", "RegEnumValueW", 8, "error_success"],
    "RegGetValueW": ["advapi32", "RegGetValueW", 7, "error_success"],
    "RegCloseKey": ["advapi32", "RegCloseKey", 1, "error_success"],
    "EnumProcessModulesEx": ["kernel32", "K32EnumProcessModulesEx", 5, "nonzero"],
    "GetModuleFileNameExW": ["kernel32", "K32GetModuleFileNameExW", 4, "nonzero"],
    "GetCurrentProcess": ["kernel32", "GetCurrentProcess", 0, None],
    "CloseHandle": ["kernel32", "CloseHandle", 1, "nonzero"],
    "GetLastError": ["kernel32", "GetLastError", 0, None],
    "LocalFree": ["kernel32", "LocalFree", 1, None],
    "OpenProcess": ["kernel32", "OpenProcess", 3, None],
    "FormatMessageW": ["kernel32", "FormatMessageW", 7, None],
    "GetDllDirectoryW": ["kernel32", "GetDllDirectoryW", 2, None],
    "GetModuleHandleW": ["kernel32", "GetModuleHandleW", 1, None],
    "CreateJobObjectW": ["kernel32", "CreateJobObjectW", 2, None],
    "SetInformationJobObject": ["kernel32", "SetInformationJobObject", 4, None],
    "AssignProcessToJobObject": ["kernel32", "AssignProcessToJobObject", 2, None],
}


def test_the_real_package_binds_what_winapi_calls_as_it_calls_it(cws_source):
    import json

    r = subprocess.run([sys.executable, "-c", FAKE_WINDOWS, str(cws_source)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout) == CALLS


def test_the_declared_dependency_is_the_version_checked():
    text = (ROOT / "pyproject.toml").read_text()
    assert f"\"{CWS}>={CWS_VERSION}; sys_platform == 'win32'\"" in text


# ---- the functions against a fake API ----------------------------------------------------------------
def win_error(code: int) -> OSError:
    """What the package's errcheck raises (ctypes.WinError(code)): an OSError with .winerror."""
    e = OSError(None, f"[WinError {code}]")
    e.winerror = code  # type: ignore[attr-defined]
    return e


class _HANDLE(ctypes.Structure):
    _fields_ = [("unused", ctypes.c_int)]


HANDLE_T = ctypes.POINTER(_HANDLE)  # the package's HKEY and HMODULE: DECLARE_HANDLE() (shared/minwindef.py)


def as_handle(address: int):
    return ctypes.cast(ctypes.c_void_p(address), HANDLE_T)


def address(handle) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def store_handle(out, value: int) -> None:
    """*out = value, for an out-parameter of a handle type passed by byref()."""
    ctypes.memmove(ctypes.addressof(out._obj), ctypes.byref(ctypes.c_void_p(value)), ctypes.sizeof(ctypes.c_void_p))


class FakeApi(SimpleNamespace):
    """The calls winapi makes, answering as Windows does (sizes, the errcheck exceptions), with a call log."""

    def __init__(self, **kw):
        super().__init__(HKEY=HANDLE_T, HMODULE=HANDLE_T, HKEY_LOCAL_MACHINE=as_handle(0x80000002),
                         RRF_RT_REG_DWORD=0x10, LIST_MODULES_ALL=3, ERROR_NO_MORE_ITEMS=259, ERROR_MORE_DATA=234,
                         ERROR_FILE_NOT_FOUND=2, log=[], last_error=0, **kw)

    def GetLastError(self):
        return self.last_error

    @staticmethod
    def string_call(value: str):
        def call(buf, size):
            if size <= len(value):
                return len(value) + 1  # too small: the size needed, with the NUL
            buf.value = value
            return len(value)
        return call


WINDOWS_DIR = "C:\\Windows"
LONG_SYS32 = "C:\\" + "x" * 300 + "\\System32"  # past the first 260-character buffer


def fake_system(api: FakeApi) -> None:
    api.GetWindowsDirectoryW = FakeApi.string_call(WINDOWS_DIR)
    api.GetSystemDirectoryW = FakeApi.string_call(LONG_SYS32)


def fake_registry(api: FakeApi, values, safe=None, known_key=True) -> None:
    def open_key(root, sub, opts, sam, out):
        api.log.append(("open", sub, sam))
        if not known_key:
            raise win_error(2)
        store_handle(out, 0x1234)

    def enum(key, i, name, name_len, reserved, kind, data, data_len):
        if i >= len(values):
            raise win_error(259)
        n, t, d = values[i]
        if len(d) > data_len._obj.value:
            raise win_error(234)
        name.value = n
        name_len._obj.value = len(n)
        kind._obj.value = t
        ctypes.memmove(data, d, len(d))
        data_len._obj.value = len(d)
        return 0

    def get_value(root, sub, value, flags, kind, data, size):
        api.log.append(("get", sub, value, flags))
        if safe is None:
            raise win_error(2)
        data._obj.value = safe
        return 0

    api.RegOpenKeyExW, api.RegEnumValueW, api.RegGetValueW = open_key, enum, get_value
    api.RegCloseKey = lambda key: api.log.append(("close", address(key)))


@pytest.fixture
def api(monkeypatch):
    fake = FakeApi()
    monkeypatch.setattr(winapi, "_loaded", fake)
    return fake


def sz(text: str, nul: bool = True) -> bytes:
    return (text + ("\0" if nul else "")).encode("utf-16-le")


def test_system_folders_grow_the_buffer_to_the_size_asked(api):
    fake_system(api)
    assert winapi.system_folders() == winapi.SystemFolders(WINDOWS_DIR, LONG_SYS32)


def test_reg_sz_stops_at_the_first_nul_with_or_without_one():
    assert winapi.reg_sz(sz("kernel32.dll")) == "kernel32.dll"
    assert winapi.reg_sz(sz("kernel32.dll", nul=False)) == "kernel32.dll"
    assert winapi.reg_sz(sz("a.dll") + b"garbage!") == "a.dll"
    assert winapi.reg_sz(sz("odd") + b"\x00") == "odd"  # an odd byte count


def test_known_dlls_from_the_registry(api):
    values = [("kernel32", winapi.REG_SZ, sz("kernel32.dll")), ("_wow64", winapi.REG_SZ, sz("wow64.dll", nul=False)),
              ("DllDirectory", winapi.REG_EXPAND_SZ, sz("%SystemRoot%\\system32")),  # a folder, not a DLL
              ("flags", 4, (1).to_bytes(4, "little")),  # a DWORD: not a name
              ("big", winapi.REG_SZ, sz("x" * 3000)),  # past the 4 KB buffer: ERROR_MORE_DATA, skipped
              ("ole32", winapi.REG_EXPAND_SZ, sz("ole32.dll"))]
    fake_registry(api, values)
    assert winapi.known_dlls() == ["kernel32.dll", "wow64.dll", "ole32.dll"]
    assert api.log[0] == ("open", winapi.KNOWN_DLLS_KEY, 0x20019)
    assert api.log[-1] == ("close", 0x1234)  # the key is closed


def test_known_dlls_none_when_the_key_is_absent(api):
    fake_registry(api, [], known_key=False)
    assert winapi.known_dlls() is None


def test_safe_dll_search_mode(api):
    fake_registry(api, [], safe=0)
    assert winapi.safe_dll_search_mode() == 0
    assert api.log == [("get", winapi.SESSION_MANAGER_KEY, "SafeDllSearchMode", 0x10)]
    fake_registry(api, [], safe=None)
    assert winapi.safe_dll_search_mode() is None


def test_dll_directory(api):
    api.GetDllDirectoryW = lambda size, buf: FakeApi.string_call("D:\\deps")(buf, size)
    assert winapi.dll_directory() == "D:\\deps"
    api.GetDllDirectoryW = lambda size, buf: 0
    assert winapi.dll_directory() is None


MODULES = ["C:\\py\\python.exe", "C:\\Windows\\System32\\ntdll.dll"] + [f"C:\\m\\m{i}.dll" for i in range(298)]


def fake_process(api: FakeApi, modules=MODULES, open_ok=True) -> None:
    def open_process(access, inherit, pid):
        api.log.append(("open", access, pid))
        return 0x99 if open_ok else 0

    def enum(h, mods, cb, needed, flags):
        api.log.append(("enum", h, cb // ctypes.sizeof(ctypes.c_void_p), flags))
        n = min(len(modules), cb // ctypes.sizeof(ctypes.c_void_p))
        for i in range(n):
            mods[i] = as_handle(0x10000 * (i + 1))
        needed._obj.value = len(modules) * ctypes.sizeof(ctypes.c_void_p)
        return 1

    def file_name(h, m, buf, size):
        path = modules[address(m) // 0x10000 - 1]
        buf.value = path
        return len(path)

    api.OpenProcess, api.EnumProcessModulesEx, api.GetModuleFileNameExW = open_process, enum, file_name
    api.GetCurrentProcess = lambda: -1
    api.CloseHandle = lambda h: api.log.append(("closehandle", h))


def test_process_modules_of_another_process(api):
    fake_process(api)
    assert winapi.process_modules(4242) == MODULES
    assert api.log[0] == ("open", 0x410, 4242)  # PROCESS_QUERY_INFORMATION | PROCESS_VM_READ
    enums = [e for e in api.log if e[0] == "enum"]
    assert [e[2] for e in enums] == [256, 316]  # 300 modules: a second call with room for them
    assert all(e[3] == 3 for e in enums)  # LIST_MODULES_ALL
    assert api.log[-1] == ("closehandle", 0x99)


def test_process_modules_of_this_process_and_a_process_that_cannot_be_opened(api):
    fake_process(api, modules=MODULES[:2])
    assert winapi.process_modules() == MODULES[:2]
    assert not [e for e in api.log if e[0] in ("open", "closehandle")]  # the pseudo handle, never closed
    fake_process(api, open_ok=False)
    api.last_error = 5
    with pytest.raises(winapi.WindowsOnly, match=r"cannot open process 7 \(error 5\)"):
        winapi.process_modules(7)


def fake_format(api: FakeApi, messages: dict) -> None:
    def fmt(flags, source, code, lang, out, size, args):
        api.log.append(("format", flags, source, code))
        text = messages.get(code)
        if text is None:
            return 0
        out._obj.value = text
        return len(text)

    api.FormatMessageW = fmt
    api.GetModuleHandleW = lambda name: 0x7000 if name == "ntdll.dll" else 0
    api.LocalFree = lambda p: api.log.append(("free",))


def test_format_message_win32_and_ntstatus(api):
    fake_format(api, {5555: "Some system text.\r\n", 0xC0000135: "{Unable To Locate Component}\r\nThis app %1 failed.\r\n"})
    assert winapi.format_message(5555) == "Some system text."
    assert api.log[0] == ("format", 0x100 | 0x200 | 0x1000, None, 5555)  # ALLOCATE_BUFFER | IGNORE_INSERTS | SYSTEM
    assert api.log[1] == ("free",)
    assert winapi.format_message(0xC0000135) == "{Unable To Locate Component} This app failed."
    assert api.log[2] == ("format", 0x100 | 0x200 | 0x800, 0x7000, 0xC0000135)  # ntdll's message table
    assert winapi.format_message(4321) is None


def test_error_message_takes_the_system_text_on_windows(api, monkeypatch):
    fake_format(api, {5555: "Some system text.\r\n"})
    monkeypatch.setattr(winapi, "available", lambda: True)
    assert live.error_message(126) == "The specified module could not be found."  # the model's own first
    assert live.error_message(5555) == "Some system text."
    assert live.error_message(4321) == "error 4321"


def test_live_system_and_process_on_windows(api, monkeypatch):
    fake_system(api)
    fake_registry(api, [("a", winapi.REG_SZ, sz("Kernel32.DLL")), ("b", winapi.REG_SZ, sz("user32.dll"))], safe=0)
    fake_process(api, modules=MODULES[:3])
    api.GetDllDirectoryW = lambda size, buf: FakeApi.string_call("D:\\deps")(buf, size)
    monkeypatch.setattr(winapi, "available", lambda: True)
    monkeypatch.setattr("platform.machine", lambda: "AMD64")
    system = live.live_system()
    assert (system.windows, system.system32, system.machine) == (WINDOWS_DIR, LONG_SYS32, "x64")
    assert system.known_dlls == ("kernel32.dll", "user32.dll")
    assert system.safe_dll_search_mode is False
    monkeypatch.setenv("PATH", "C:\\a;;C:\\b")
    proc = live.live_process()
    assert proc.exe == MODULES[0] and proc.dll_directory == "D:\\deps" and proc.path == ["C:\\a", "C:\\b"]
    assert [m.path for m in proc.loaded] == MODULES[:3]
    other = live.live_process(4242)
    assert other.dll_directory is None and other.path == []  # no API reads them from outside
    api.OpenProcess = lambda access, inherit, pid: 0
    api.last_error = 5
    with pytest.raises(DlltraceError, match=r"^cannot list the modules of process 7: cannot open process 7 \(error 5\)$"):
        live.live_process(7)


def test_live_system_keeps_the_stock_known_dlls_when_the_registry_cannot_be_read(api, monkeypatch):
    fake_system(api)
    fake_registry(api, [], known_key=False)
    monkeypatch.setattr(winapi, "available", lambda: True)
    from dlltrace.worlds.world import DEFAULT_KNOWN_DLLS

    system = live.live_system()
    assert system.known_dlls == DEFAULT_KNOWN_DLLS and system.safe_dll_search_mode is True


def test_kill_on_close_job(api):
    seen = {}
    api.CreateJobObjectW = lambda attrs, name: 0x50
    api.OpenProcess = lambda access, inherit, pid: seen.setdefault("open", (access, pid)) and 0x60

    def set_info(job, cls, info, size):
        obj = info._obj
        seen["set"] = (job, cls, obj.BasicLimitInformation.LimitFlags, size == ctypes.sizeof(obj))
        return 1

    api.SetInformationJobObject = set_info
    api.AssignProcessToJobObject = lambda job, proc: seen.setdefault("assign", (job, proc)) and 1
    api.CloseHandle = lambda h: seen.setdefault("closed", []).append(h)
    assert winapi.kill_on_close_job(77) == 0x50
    assert seen["open"] == (0x101, 77)  # PROCESS_SET_QUOTA | PROCESS_TERMINATE
    assert seen["set"] == (0x50, 9, 0x2000, True)  # JobObjectExtendedLimitInformation, KILL_ON_JOB_CLOSE
    assert seen["assign"] == (0x50, 0x60)
    assert seen["closed"] == [0x60]  # the process handle; the job's stays open for the caller
    winapi.close_handle(0x50)
    assert seen["closed"] == [0x60, 0x50]
    # the 64-bit layout of JOBOBJECT_EXTENDED_LIMIT_INFORMATION (winnt.h): 144 bytes
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert ctypes.sizeof(winapi.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == 144


def test_kill_on_close_job_failure_closes_the_job(api):
    closed = []
    api.CreateJobObjectW = lambda attrs, name: 0x50
    api.OpenProcess = lambda access, inherit, pid: 0x60
    api.SetInformationJobObject = lambda *a: 1
    api.AssignProcessToJobObject = lambda job, proc: 0
    api.CloseHandle = closed.append
    api.last_error = 5
    with pytest.raises(winapi.WindowsOnly, match=r"cannot put process 77 in a job \(error 5\)"):
        winapi.kill_on_close_job(77)
    assert closed == [0x60, 0x50]
