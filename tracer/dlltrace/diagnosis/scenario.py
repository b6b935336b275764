"""Scenario files: a virtual machine, a process on it, and the calls it makes.

The format is documented in docs/scenarios.md with a JSON Schema in
schemas/scenario-v1.json. Reading checks the input against that schema first (compiled by
tracecheck.py, the trace reader's compiler), then the few things a schema cannot say (flag
bits, a file described twice, the API-set table); any problem raises ScenarioError with one
line: the file, the place (`file[2].machine`) and the problem.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlltrace import winpath
from dlltrace.apisets import builtin_schema, schema_from_sets
from dlltrace.errors import EXIT_USAGE, DlltraceError
from dlltrace.model import KNOWN_FLAGS, FileFacts, Import, PEFacts
from dlltrace.emulate.python import PythonSimulator as Simulator
from dlltrace.emulate.python import rule_conda_startup_dll_directories, rule_venv_redirector
from dlltrace.loader.windows.engine import Call, CallError
from dlltrace.loader.windows.rules import BoundVersionCondition, InitFacts, rule_add_dll_directory_valid
from dlltrace.tracecheck import SCENARIO_SCHEMA_PATH, SchemaError, Validator, json_type, show
from dlltrace.worlds.world import CORE_MODULES, DEFAULT_KNOWN_DLLS, LoadedModule, ProcessState, SystemInfo, VirtualWorld
from dlltrace.diagnosis.explain import explain as _explain

FORMAT = "dlltrace-scenario"
VERSION = 1


class ScenarioError(DlltraceError):
    """A scenario that cannot be read: one line, exit code 2. `place` is the key it is about
    (`file[2].machine`; "" for the whole document), when it is about one."""

    def __init__(self, message: str, place: str | None = None):
        super().__init__(message, EXIT_USAGE)
        self.place = place


@dataclass
class Scenario:
    world: VirtualWorld
    process: ProcessState
    calls: list[Call]
    description: str = ""
    expect: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)  # the validated input, for to_dict()
    where: str = "<scenario>"  # the file it was read from, for the one-line errors of a run


    def simulator(self, explain: bool = True) -> Simulator:
        """A fresh simulator over a copy of the process state (a scenario can be run twice);
        with explain, each failed load gets its verdict (found elsewhere, fixes)."""
        process = self.process.copy()
        sim = Simulator(self.world, process)
        sim.where = self.where
        if explain:

            # (the observers hold the process, not the simulator: no reference cycle)
            sim.observers.append(lambda res: _explain(res, self.world, process))
        return sim

    def run(self, explain: bool = True):
        """Every call's results. A call the process cannot make as written (a run-time load by a DLL
        not loaded at that call) is a ScenarioError of one line at its place (`call[4].by`)."""
        try:
            return self.simulator(explain).run(self.calls)
        except CallError as e:
            raise ScenarioError(e.message, e.place) from None

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.source)


# --- reading: the schema first, then what it cannot say ------------------------------------------------------
SCHEMA_PATH = SCENARIO_SCHEMA_PATH
SCHEMA = Validator.from_path(SCHEMA_PATH)
_WINPATH = "#/$defs/winpath"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def place(path: tuple) -> str:
    """`file[3].imports[0].ordinals` for ("file", 3, "imports", 0, "ordinals"); a key that is not
    a plain word is quoted (`process.env["A B"]`), so the place stays one line."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += ("." if out else "") + part
        else:
            out += "[" + json.dumps(part) + "]"
    return out


def schema_message(err: SchemaError) -> tuple[str, str]:
    """(place, problem) for the first error the schema found in a scenario."""
    where = place(err.path)
    if err.keyword == "required" and len(err.path) == 2 and err.path[0] == "call" and err.key != "op":
        return where, f"{err.value['op']} needs `{err.key}`"
    if err.keyword == "required" and err.path == ("process",) and err.key == "exe":
        return where, "needs `exe` (the program's path: its folder is the application folder)"
    if err.node.where == _WINPATH and type(err.value) is str:
        # the words winpath uses elsewhere; the pattern and the length are the schema's
        v = err.value
        if err.keyword == "maxLength" and isinstance(err.node.schema, dict):
            return where, f"{show(v)} is {len(v)} characters long (a Windows path has at most {err.node.schema['maxLength']})"
        if any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in v):
            return where, f"{show(v)} has control characters"
        why = winpath.check_windows_path(v)  # (it quotes the whole path: not a 30,000-character one)
        return where, why if why and len(v) <= 200 else err.message
    return where, err.message


class _Reader:
    def __init__(self, where: str):
        self.where = where

    def fail(self, place: str, problem: str):
        raise ScenarioError(f"{self.where}: {place}: {problem}" if place else f"{self.where}: {problem}", place)

    @staticmethod
    def integer(value) -> int:
        """A number the schema let through: an int, or a string int(s, 0) reads."""
        return value if type(value) is int else int(value, 0)

    def flags(self, value, place: str) -> int:
        n = self.integer(value)
        if n & ~KNOWN_FLAGS:
            self.fail(place, f"{show(value)} has bits that are not LoadLibraryEx flags")
        return n

    def imports(self, value: list) -> tuple[Import, ...]:
        return tuple(Import(v) if isinstance(v, str) else
                     Import(v["dll"], tuple(v.get("names", ())), tuple(self.integer(o) for o in v.get("ordinals", ())))
                     for v in value)


def scenario_from_dict(data: Any, where: str = "<scenario>") -> Scenario:
    """Check `data` against schemas/scenario-v1.json, then the two things a schema cannot say
    (flag bits, a file described twice), and build the scenario. Every problem is a ScenarioError
    of one line: `where: place: problem`."""
    r = _Reader(where)
    if not isinstance(data, dict):
        r.fail("", f"must be a table, not {json_type(data)}")
    # format and version first: a file of a later version is refused as such, whatever its keys
    if "format" in data and data["format"] != FORMAT:
        r.fail("format", f"must be {FORMAT!r}")
    if "version" in data and data["version"] != VERSION:
        r.fail("version", f"version {show(data['version'])} is not supported (this dlltrace reads version {VERSION})")
    err = SCHEMA.first_error(data)
    if err is not None:
        r.fail(*schema_message(err))
    top = data

    sysd = top.get("system", {})
    profile = sysd.get("profile", "windows")
    api = sysd.get("api_sets")
    api_schema = None
    if api is not None:
        try:
            api_schema = schema_from_sets(api, "scenario")
        except ValueError as e:
            r.fail("system.api_sets", str(e))
    system = SystemInfo(
        windows=winpath.normalize(sysd.get("windows", "C:\\Windows")),
        system32=winpath.normalize(sysd["system32"]) if "system32" in sysd else "",
        system16=winpath.normalize(sysd["system16"]) if "system16" in sysd else "",
        machine=sysd.get("machine", "x64"),
        safe_dll_search_mode=sysd.get("safe_dll_search_mode", True),
        cpu_lacks=tuple(f.lower() for f in sysd.get("cpu_lacks", [])),
        known_dlls=tuple(sysd["known_dlls"]) if "known_dlls" in sysd else DEFAULT_KNOWN_DLLS,
        api_sets=api_schema if api_schema is not None else builtin_schema(),
        profile=profile,
        version=sysd.get("version", ""),
    )

    files: list[FileFacts] = []
    seen: dict[str, int] = {}
    for i, t in enumerate(top.get("file", [])):
        p = f"file[{i}]"
        path = winpath.normalize(t["path"])
        k = winpath.key(path)
        if k in seen:
            prev = top["file"][seen[k]]["path"]
            r.fail(p + ".path", f"{show(t['path'])} is described twice (file[{seen[k]}] too)" if prev == t["path"] else
                   f"{show(t['path'])} is file[{seen[k]}] ({show(prev)}) again (the same file on Windows: case, . and .. do not matter)")
        seen[k] = i
        kind = t.get("kind", "pe")
        pe = PEFacts(
            machine=t.get("machine", system.machine),
            is_dll=t.get("is_dll", True),
            imports=r.imports(t.get("imports", [])),
            delay_imports=r.imports(t.get("delay_imports", [])),
            exports=frozenset(t.get("exports", [])),
            export_ordinals=frozenset(r.integer(o) for o in t.get("export_ordinals", [])),
            forwarders=dict(t.get("forwarders", {})),
            dependent_load_flags=r.flags(t.get("dependent_load_flags", 0), p + ".dependent_load_flags"),
            file_version=t.get("version"),
            linker_version=t.get("linker_version"),
            cor_flags=t.get("cor_flags"),
        )
        cond = t.get("dllmain_fails_if_bound")
        cpu = t.get("dllmain_fails_if_cpu_lacks")
        if cond is not None or cpu is not None:
            files.append(InitFacts(
                path=path, pe=pe if kind == "pe" else None, error=None if kind == "pe" else kind,
                dllmain_fails=t.get("dllmain_fails", False),
                dllmain_fails_if_bound=(BoundVersionCondition(cond["name"].lower(), cond["older_than"]),) if cond else (),
                needs_cpu=(cpu.lower(),) if cpu else ()))
            continue
        files.append(FileFacts(
            path=path,
            pe=pe if kind == "pe" else None,
            error=None if kind == "pe" else kind,
            dllmain_fails=t.get("dllmain_fails", False),
        ))
    folders = [winpath.normalize(d) for d in top.get("folders", [])]

    prd = top["process"]
    exe = winpath.normalize(prd["exe"])
    base_exe = winpath.normalize(prd["base_exe"]) if "base_exe" in prd else ""
    process = ProcessState(
        exe=rule_venv_redirector(exe, base_exe),
        launcher=exe if base_exe else "",
        cwd=winpath.normalize(prd["cwd"]) if "cwd" in prd else winpath.dirname(exe),
        path=[winpath.normalize(d) for d in prd.get("path", [])],
        dll_directory=(winpath.normalize(prd["dll_directory"]) if prd["dll_directory"] else "") if "dll_directory" in prd else None,
        dll_directories=[(winpath.normalize(d), "") for d in prd.get("dll_directories", [])],
        default_dirs=r.flags(prd["default_dirs"], "process.default_dirs") if "default_dirs" in prd else None,
        machine=prd.get("machine", system.machine),
        python=prd.get("python", ""),
        env=dict(prd.get("env", {})),
        packaged=prd.get("packaged", False),
        package_graph=[winpath.normalize(d) for d in prd.get("package_graph", [])],
        conda_prefix=winpath.normalize(prd["conda_prefix"]) if "conda_prefix" in prd else "",
    )
    loaded = [winpath.normalize(d) for d in prd.get("loaded", [])]
    names = {winpath.basename(p).lower() for p in loaded}
    core = [winpath.join(system.system32, n) for n in CORE_MODULES if n not in names]
    for p in core + loaded:
        process.add_loaded(LoadedModule(p, 1, "loaded before the first call"))
    world = VirtualWorld(system, files, folders + [process.app_dir, process.cwd] +
                         ([winpath.dirname(process.launcher)] if process.launcher else []))
    if process.conda_prefix:
        conda = rule_conda_startup_dll_directories(process.conda_prefix, process.python, process.env)
        if conda is None:
            r.fail("process.conda_prefix", "a conda Python before 3.11 with CONDA_DLL_SEARCH_MODIFICATION_ENABLE set "
                   "(its PATH mode) is not modelled")
        else:  # added at start-up, before anything the scenario's dll_directories say
            process.dll_directories[:0] = [(d, "conda python start-up") for d in conda
                                           if not rule_add_dll_directory_valid(d, world.is_dir)]

    calls = []
    for i, t in enumerate(top.get("call", [])):
        p = f"call[{i}]"
        op = t["op"]
        call = Call(op=op)
        if "name" in t:
            call.name = t["name"]
        if "flags" in t:
            call.flags = r.flags(t["flags"], p + ".flags")
        if "path" in t:
            call.path = winpath.normalize(t["path"]) if t["path"] else ""
        if "winmode" in t:
            call.winmode = r.flags(t["winmode"], p + ".winmode")
        call.module = t.get("module", "")
        call.label = t.get("label", "")
        call.by = t.get("by", "")
        call.value = t.get("value")
        call.find_library = t.get("find_library", "")
        call.place = p
        if "torch_lib" in t:
            call.torch_lib = winpath.normalize(t["torch_lib"])
        if "dlls" in t:
            call.dlls = list(t["dlls"])
        call.extra_dirs = [winpath.normalize(d) for d in t.get("extra_dirs", [])]
        calls.append(call)

    return Scenario(world=world, process=process, calls=calls, description=top.get("description", ""),
                    expect=dict(top.get("expect", {})), source=copy.deepcopy(data), where=where)


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
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover
                import tomli as tomllib
            data = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(f"{p}: not UTF-8 text")
    except RecursionError:  # (both parsers recurse on nested arrays and tables)
        raise ScenarioError(f"{p}: nested too deeply to read")
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{p}: line {e.lineno}: not valid JSON ({e.msg})")
    except Exception as e:  # tomllib.TOMLDecodeError carries "(at line N, column M)"
        raise ScenarioError(f"{p}: not valid TOML ({e})")
    return scenario_from_dict(data, str(p))


def run_scenario(scenario: Scenario):
    return scenario.run()
