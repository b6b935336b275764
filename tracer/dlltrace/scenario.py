"""Scenario files: a virtual machine, a process on it, and the calls it makes.

The format is documented in docs/scenarios.md with a JSON Schema in
schemas/scenario-v1.json. Reading validates everything and raises ScenarioError
with one line: the file, the place (`file[2].machine`) and the problem.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlltrace import winpath
from dlltrace.apisets import schema_from_sets
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.model import KNOWN_FLAGS, MACHINES, FileFacts, Import, PEFacts
from dlltrace.emulate.python import ALL_OPS, PythonSimulator as Simulator
from dlltrace.loader.windows.engine import LOAD_OPS, Call
from dlltrace.worlds.world import CORE_MODULES, PROFILES, LoadedModule, ProcessState, SystemInfo, VirtualWorld

FORMAT = "dlltrace-scenario"
VERSION = 1


class ScenarioError(DlltraceError):
    def __init__(self, message: str):
        super().__init__(message, EXIT_USAGE)


@dataclass
class Scenario:
    world: VirtualWorld
    process: ProcessState
    calls: list[Call]
    description: str = ""
    expect: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)  # the validated input, for to_dict()

    def simulator(self, explain: bool = True) -> Simulator:
        """A fresh simulator over a copy of the process state (a scenario can be run twice);
        with explain, each failed load gets its verdict (found elsewhere, fixes)."""
        process = self.process.copy()
        sim = Simulator(self.world, process)
        if explain:
            from dlltrace.report.explain import explain as _explain

            # (the observers hold the process, not the simulator: no reference cycle)
            sim.observers.append(lambda res: _explain(res, self.world, process))
        return sim

    def run(self, explain: bool = True):
        return self.simulator(explain).run(self.calls)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.source)


# --- the schema, as code: key -> (type checker, description) -----------------------------------------
SYSTEM_KEYS = {"windows", "system32", "system16", "machine", "safe_dll_search_mode", "known_dlls",
               "api_sets", "profile", "version"}
PROCESS_KEYS = {"exe", "cwd", "path", "dll_directory", "dll_directories", "default_dirs", "loaded",
                "python", "env", "machine"}
FILE_KEYS = {"path", "machine", "kind", "imports", "delay_imports", "exports", "export_ordinals",
             "forwarders", "dependent_load_flags", "version", "linker_version", "dllmain_fails", "is_dll"}
CALL_KEYS = {"op", "name", "flags", "path", "module", "winmode", "torch_lib", "dlls", "extra_dirs", "label"}
CALL_NEEDS = {**dict.fromkeys(LOAD_OPS, "name"), "FreeLibrary": "name", "ctypes_cdll": "name",
              "AddDllDirectory": "path", "RemoveDllDirectory": "path", "os_add_dll_directory": "path",
              "python_import": "path", "torch_load_dll_libraries": "torch_lib"}  # op -> the key it cannot do without
TOP_KEYS = {"format", "version", "description", "system", "process", "file", "call", "expect", "folders"}
EXPECT_KEYS = {"error", "leaf", "cause", "chain", "fix_contains", "call", "module", "found_elsewhere"}
CAUSES = {"not_found", "missing_export", "missing_ordinal", "bad_machine", "not_pe", "init_failed",
          "invalid_parameter", "access_denied", "apiset_no_host", None}


class _Reader:
    def __init__(self, where: str):
        self.where = where

    def fail(self, place: str, problem: str):
        raise ScenarioError(f"{self.where}: {place}: {problem}" if place else f"{self.where}: {problem}")

    def table(self, value, place: str, allowed: set[str]) -> dict:
        if not isinstance(value, dict):
            self.fail(place, f"must be a table, not {type(value).__name__}")
        for k in value:
            if k not in allowed:
                self.fail(place, f"unknown key {k!r} (expected one of: {', '.join(sorted(allowed))})")
        return value

    def string(self, value, place: str) -> str:
        if not isinstance(value, str):
            self.fail(place, f"must be a string, not {type(value).__name__}")
        return value

    def boolean(self, value, place: str) -> bool:
        if not isinstance(value, bool):
            self.fail(place, "must be true or false")
        return value

    def integer(self, value, place: str) -> int:
        if isinstance(value, bool):
            self.fail(place, "must be a number")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value, 0)
            except ValueError:
                pass
        self.fail(place, f"must be a number (like 4352 or \"0x1100\"), not {value!r}")

    def flags(self, value, place: str) -> int:
        n = self.integer(value, place)
        if n < 0 or n & ~KNOWN_FLAGS:
            self.fail(place, f"{value!r} has bits that are not LoadLibraryEx flags")
        return n

    def winpath(self, value, place: str, *, empty_ok: bool = False) -> str:
        s = self.string(value, place)
        if empty_ok and s == "":
            return s
        why = winpath.check_windows_path(s)
        if why:
            self.fail(place, why)
        return winpath.normalize(s)

    def strings(self, value, place: str) -> list[str]:
        if not isinstance(value, list):
            self.fail(place, "must be a list")
        return [self.string(v, f"{place}[{i}]") for i, v in enumerate(value)]

    def machine(self, value, place: str) -> str:
        s = self.string(value, place)
        if s not in MACHINES:
            self.fail(place, f"{s!r} is not a machine ({', '.join(MACHINES)})")
        return s

    def imports(self, value, place: str) -> tuple[Import, ...]:
        if not isinstance(value, list):
            self.fail(place, "must be a list")
        out = []
        for i, v in enumerate(value):
            p = f"{place}[{i}]"
            if isinstance(v, str):
                out.append(Import(v))
                continue
            t = self.table(v, p, {"dll", "names", "ordinals"})
            if "dll" not in t:
                self.fail(p, "needs `dll`")
            out.append(Import(self.string(t["dll"], p + ".dll"),
                              tuple(self.strings(t.get("names", []), p + ".names")),
                              tuple(self.integer(o, f"{p}.ordinals[{j}]") for j, o in enumerate(t.get("ordinals", [])))))
        return tuple(out)


def scenario_from_dict(data: Any, where: str = "<scenario>") -> Scenario:
    r = _Reader(where)
    top = r.table(data, "", TOP_KEYS)
    if "format" in top and top["format"] != FORMAT:
        r.fail("format", f"must be {FORMAT!r}")
    if "version" in top and top["version"] != VERSION:
        r.fail("version", f"version {top['version']!r} is not supported (this dlltrace reads version {VERSION})")

    sysd = r.table(top.get("system", {}), "system", SYSTEM_KEYS)
    profile = r.string(sysd.get("profile", "windows"), "system.profile")
    if profile not in PROFILES:
        r.fail("system.profile", f"{profile!r} is not a profile ({', '.join(PROFILES)})")
    api = sysd.get("api_sets")
    api_schema = None
    if api is not None:
        if not isinstance(api, dict):
            r.fail("system.api_sets", "must be a table of contract = host")
        try:
            api_schema = schema_from_sets(api, "scenario")
        except ValueError as e:
            r.fail("system.api_sets", str(e))
    system = SystemInfo(
        windows=r.winpath(sysd.get("windows", "C:\\Windows"), "system.windows"),
        system32=r.winpath(sysd["system32"], "system.system32") if "system32" in sysd else "",
        system16=r.winpath(sysd["system16"], "system.system16") if "system16" in sysd else "",
        machine=r.machine(sysd.get("machine", "x64"), "system.machine"),
        safe_dll_search_mode=r.boolean(sysd.get("safe_dll_search_mode", True), "system.safe_dll_search_mode"),
        **({"api_sets": api_schema} if api_schema is not None else {}),
        profile=profile,
        version=r.string(sysd.get("version", ""), "system.version"),
        **({"known_dlls": tuple(r.strings(sysd["known_dlls"], "system.known_dlls"))} if "known_dlls" in sysd else {}),
    )

    files = []
    raw_files = top.get("file", [])
    if not isinstance(raw_files, list):
        r.fail("file", "must be a list of tables ([[file]])")
    for i, f in enumerate(raw_files):
        p = f"file[{i}]"
        t = r.table(f, p, FILE_KEYS)
        if "path" not in t:
            r.fail(p, "needs `path`")
        kind = r.string(t.get("kind", "pe"), p + ".kind")
        if kind not in ("pe", "not_pe", "access_denied"):
            r.fail(p + ".kind", f"{kind!r} is not one of pe, not_pe, access_denied")
        fw = t.get("forwarders", {})
        if not isinstance(fw, dict):
            r.fail(p + ".forwarders", "must be a table of export = \"target.function\"")
        pe = PEFacts(
            machine=r.machine(t.get("machine", system.machine), p + ".machine"),
            is_dll=r.boolean(t.get("is_dll", True), p + ".is_dll"),
            imports=r.imports(t.get("imports", []), p + ".imports"),
            delay_imports=r.imports(t.get("delay_imports", []), p + ".delay_imports"),
            exports=frozenset(r.strings(t.get("exports", []), p + ".exports")),
            export_ordinals=frozenset(r.integer(o, f"{p}.export_ordinals[{j}]")
                                      for j, o in enumerate(t.get("export_ordinals", []))),
            forwarders={k: r.string(v, f"{p}.forwarders.{k}") for k, v in fw.items()},
            dependent_load_flags=r.flags(t.get("dependent_load_flags", 0), p + ".dependent_load_flags"),
            file_version=r.string(t["version"], p + ".version") if "version" in t else None,
            linker_version=r.string(t["linker_version"], p + ".linker_version") if "linker_version" in t else None,
        )
        files.append(FileFacts(
            path=r.winpath(t["path"], p + ".path"),
            pe=pe if kind == "pe" else None,
            error=None if kind == "pe" else kind,
            dllmain_fails=r.boolean(t.get("dllmain_fails", False), p + ".dllmain_fails"),
        ))
    folders = [r.winpath(d, f"folders[{i}]") for i, d in enumerate(r.strings(top.get("folders", []), "folders"))]

    prd = r.table(top.get("process", {}), "process", PROCESS_KEYS)
    if "exe" not in prd:
        r.fail("process", "needs `exe` (the program's path: its folder is the application folder)")
    env = prd.get("env", {})
    if not isinstance(env, dict):
        r.fail("process.env", "must be a table")
    process = ProcessState(
        exe=r.winpath(prd["exe"], "process.exe"),
        cwd=r.winpath(prd["cwd"], "process.cwd") if "cwd" in prd else "",
        path=[r.winpath(d, f"process.path[{i}]") for i, d in enumerate(r.strings(prd.get("path", []), "process.path"))],
        dll_directory=(r.winpath(prd["dll_directory"], "process.dll_directory", empty_ok=True)
                       if "dll_directory" in prd else None),
        dll_directories=[(r.winpath(d, f"process.dll_directories[{i}]"), "")
                         for i, d in enumerate(r.strings(prd.get("dll_directories", []), "process.dll_directories"))],
        default_dirs=r.flags(prd["default_dirs"], "process.default_dirs") if "default_dirs" in prd else None,
        machine=r.machine(prd.get("machine", system.machine), "process.machine"),
        python=r.string(prd.get("python", ""), "process.python"),
        env={r.string(k, "process.env"): r.string(v, f"process.env.{k}") for k, v in env.items()},
    )
    loaded = [r.winpath(d, f"process.loaded[{i}]") for i, d in enumerate(r.strings(prd.get("loaded", []), "process.loaded"))]
    names = {winpath.basename(p).lower() for p in loaded}
    core = [winpath.join(system.system32, n) for n in CORE_MODULES if n not in names]
    for p in core + loaded:
        process.add_loaded(LoadedModule(p, 1, "loaded before the first call"))
    world = VirtualWorld(system, files, folders + [process.app_dir, process.cwd])

    calls = []
    raw_calls = top.get("call", [])
    if not isinstance(raw_calls, list):
        r.fail("call", "must be a list of tables ([[call]])")
    for i, c in enumerate(raw_calls):
        p = f"call[{i}]"
        t = r.table(c, p, CALL_KEYS)
        op = r.string(t.get("op", ""), p + ".op")
        if op not in ALL_OPS:
            r.fail(p + ".op", f"{op!r} is not a known call ({', '.join(ALL_OPS)})")
        call = Call(op=op)
        if "name" in t:
            call.name = r.string(t["name"], p + ".name")
            if not call.name:
                r.fail(p + ".name", "is empty")
        if "flags" in t:
            call.flags = r.flags(t["flags"], p + ".flags")
        if "path" in t:
            call.path = r.winpath(t["path"], p + ".path", empty_ok=(op == "SetDllDirectory"))
        if "winmode" in t:
            call.winmode = r.flags(t["winmode"], p + ".winmode")
        call.module = r.string(t.get("module", ""), p + ".module")
        call.label = r.string(t.get("label", ""), p + ".label")
        if "torch_lib" in t:
            call.torch_lib = r.winpath(t["torch_lib"], p + ".torch_lib")
        if "dlls" in t:
            call.dlls = r.strings(t["dlls"], p + ".dlls")
        call.extra_dirs = [r.winpath(d, f"{p}.extra_dirs[{j}]") for j, d in enumerate(r.strings(t.get("extra_dirs", []), p + ".extra_dirs"))]
        need = CALL_NEEDS.get(op)
        if need and not t.get(need):
            r.fail(p, f"{op} needs `{need}`")
        if op == "SetDefaultDllDirectories" and "flags" not in t:
            r.fail(p, "SetDefaultDllDirectories needs `flags`")
        calls.append(call)

    expect = r.table(top.get("expect", {}), "expect", EXPECT_KEYS)
    if "cause" in expect and (not isinstance(expect["cause"], (str, type(None))) or expect["cause"] not in CAUSES):
        r.fail("expect.cause", f"{expect['cause']!r} is not a leaf cause")
    return Scenario(world=world, process=process, calls=calls, description=r.string(top.get("description", ""), "description"),
                    expect=dict(expect), source=copy.deepcopy(data))


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such file")
    except IsADirectoryError:
        raise ScenarioError(f"{p}: is a folder, not a scenario file")
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read it ({e.strerror})")
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text.decode("utf-8"))
        else:
            try:
                import tomllib  # Python 3.11+
            except ModuleNotFoundError:  # pragma: no cover
                import tomli as tomllib  # type: ignore
            data = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(f"{p}: not UTF-8 text")
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{p}: line {e.lineno}: not valid JSON ({e.msg})")
    except Exception as e:  # tomllib.TOMLDecodeError carries "(at line N, column M)"
        raise ScenarioError(f"{p}: not valid TOML ({e})")
    return scenario_from_dict(data, str(p))


def run_scenario(scenario: Scenario):
    return scenario.run()
