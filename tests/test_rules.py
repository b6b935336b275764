"""One test per loader rule (rules.py), named after the rule, in the spirit of libtree's tests."""

from __future__ import annotations

import pytest

from dlltrace.loader.windows import rules
from dlltrace.model import FileFacts, Import, PEFacts
from dlltrace.worlds.world import LoadedModule, ProcessState, SystemInfo
from simhelp import folders_probed, load, run, scenario
from dlltrace.render.fixwords import fix_markdown, fix_text, relation_text  # noqa: F401

SYS = SystemInfo()


def test_rule_name_has_path():
    assert not rules.rule_name_has_path("a.dll")
    assert rules.rule_name_has_path("sub\\a.dll")
    assert rules.rule_name_has_path("sub/a.dll")
    assert rules.rule_name_has_path("C:a.dll")


def test_rule_default_extension():
    assert rules.rule_default_extension("foo") == "foo.dll"
    assert rules.rule_default_extension("foo.") == "foo"
    assert rules.rule_default_extension("foo.bin") == "foo.bin"
    assert rules.rule_default_extension("C:\\x.y\\foo") == "C:\\x.y\\foo.dll"
    # end to end: a name without extension finds the .dll; a trailing dot finds the file with no extension
    assert load("b", files=["C:\\app\\b.dll"]).module_path == "C:\\app\\b.dll"
    assert load("b.", files=["C:\\app\\b"]).module_path == "C:\\app\\b"
    assert load("b.", files=["C:\\app\\b.dll"]).error == 126


def test_rule_api_set_match():
    system = SystemInfo(api_sets={"api-ms-win-crt-runtime-l1-1-0": "ucrtbase.dll", "api-ms-win-x-l1-1-0": "",
                                  "ext-ms-win-y-l1-1-0": "y.dll"})
    assert rules.rule_api_set_match("API-MS-WIN-CRT-RUNTIME-L1-1-0.dll", system).name == "api-ms-win-crt-runtime-l1-1-0"
    # the last version number is ignored when matching; the one before it is not
    assert rules.rule_api_set_match("api-ms-win-crt-runtime-l1-1-7.dll", system).host == "ucrtbase.dll"
    assert rules.rule_api_set_match("api-ms-win-crt-runtime-l1-2-0.dll", system) is None
    assert rules.rule_api_set_match("api-ms-win-crt-runtime-l1-1-0", system).host == "ucrtbase.dll"  # no .dll
    assert rules.rule_api_set_match("EXT-MS-WIN-Y-L1-1-0.DLL", system).host == "y.dll"
    assert rules.rule_api_set_match("kernel32.dll", system) is None
    # a name that looks like an API set but is not in the schema is an ordinary file name
    assert rules.rule_api_set_match("api-ms-win-absent-l1-1-0.dll", system) is None
    # end to end: resolved through the schema to its host, with no file probe for the contract
    r = load("a.dll", files=[{"path": "C:\\app\\a.dll", "imports": ["api-ms-win-crt-runtime-l1-1-0.dll"]},
                             "C:\\Windows\\System32\\ucrtbase.dll"],
             system={"api_sets": {"api-ms-win-crt-runtime-l1-1-0": "ucrtbase.dll"}})
    assert r.error == 0
    api = r.tree.children[0]
    assert api.how == "API set → ucrtbase.dll" and api.path == "C:\\Windows\\System32\\ucrtbase.dll"
    assert not any("api-ms-win" in p for p in r.probes)


def test_rule_api_set_match_name_not_in_schema_is_searched_as_a_file():
    """The bug real wheels showed: a missing DLL whose name starts with api- was blamed on an API
    set. Not in the schema, it is searched for like any DLL (found when a file is there)."""
    imp = {"path": "C:\\app\\a.dll", "imports": ["api-ms-win-absent-l1-1-0.dll"]}
    r = load("C:\\app\\a.dll", files=[imp], system={"api_sets": {}})
    assert (r.error, r.leaf.cause, r.leaf.name) == (126, "not_found", "api-ms-win-absent-l1-1-0.dll")
    assert folders_probed(r, "api-ms-win-absent-l1-1-0.dll")[0] == "C:\\app"
    r = load("C:\\app\\a.dll", files=[imp, "C:\\app\\api-ms-win-absent-l1-1-0.dll"], system={"api_sets": {}})
    assert r.error == 0 and r.tree.children[0].path == "C:\\app\\api-ms-win-absent-l1-1-0.dll"


def test_rule_api_set_host():
    """A per-importer exception host comes ahead of the default; a LoadLibrary of the contract
    itself (no importer) gets the default."""
    sets = {"api-ms-win-z-l1-1-0": {"host": "kernel32.dll", "exceptions": {"kernel32.dll": "kernelbase.dll"}}}
    c = rules.rule_api_set_match("api-ms-win-z-l1-1-0.dll", SystemInfo(api_sets=sets))
    assert rules.rule_api_set_host(c, "KERNEL32.dll") == "kernelbase.dll"
    assert rules.rule_api_set_host(c, "other.dll") == "kernel32.dll"
    assert rules.rule_api_set_host(c, None) == "kernel32.dll"
    files = [{"path": "C:\\Windows\\System32\\special.dll", "imports": ["api-ms-win-q-l1-1-0.dll"]},
             {"path": "C:\\app\\a.dll", "imports": ["api-ms-win-q-l1-1-0.dll"]},
             "C:\\Windows\\System32\\host1.dll", "C:\\Windows\\System32\\host2.dll"]
    system = {"api_sets": {"api-ms-win-q-l1-1-0": {"host": "host1.dll", "exceptions": {"special.dll": "host2.dll"}}}}
    assert load("C:\\app\\a.dll", files=files, system=system).tree.children[0].path.endswith("host1.dll")
    r = load("C:\\Windows\\System32\\special.dll", files=files, system=system)
    assert r.tree.children[0].path == "C:\\Windows\\System32\\host2.dll"


def test_rule_api_set_host_empty_is_126():
    r = load("a.dll", files=[{"path": "C:\\app\\a.dll", "imports": ["api-ms-win-x-l1-1-0.dll"]}],
             system={"api_sets": {"api-ms-win-x-l1-1-0": ""}})
    assert (r.error, r.leaf.cause, r.leaf.name) == (126, "apiset_no_host", "api-ms-win-x-l1-1-0.dll")
    assert not any("api-ms-win-x" in p for p in r.probes)


def test_rule_api_set_match_builtin_table_when_none_is_given():
    """With no schema of its own, a system uses the built-in table: an MSVC/UCRT DLL's
    api-ms-win-crt-* imports resolve to ucrtbase.dll."""
    assert SystemInfo().api_sets.source == "builtin"
    r = load("C:\\app\\a.dll", files=[{"path": "C:\\app\\a.dll", "imports": ["api-ms-win-crt-runtime-l1-1-0.dll",
                                                                              "api-ms-win-crt-string-l1-1-0.dll"]},
                                       "C:\\Windows\\System32\\ucrtbase.dll"])
    assert r.error == 0 and {c.path for c in r.tree.children} == {"C:\\Windows\\System32\\ucrtbase.dll"}


def test_rule_loaded_module():
    # a bare name binds to the loaded copy whatever folder it came from; no search happens
    r = load("b.dll", files=["C:\\app\\b.dll", "C:\\other\\b.dll"], loaded=["C:\\other\\b.dll"])
    assert r.module_path == "C:\\other\\b.dll"
    assert r.probes == []
    p = ProcessState(exe="C:\\a\\x.exe")
    assert rules.rule_loaded_module("B.DLL", p) is None
    p.add_loaded(LoadedModule("C:\\other\\b.dll", 1, "test"))
    assert rules.rule_loaded_module("B.DLL", p) is p.loaded[0]  # the base name, any case
    assert rules.rule_loaded_module("c.dll", p) is None


def test_rule_loaded_module_first_loaded_wins():
    r = load("b.dll", files=["C:\\one\\b.dll", "C:\\two\\b.dll"], loaded=["C:\\one\\b.dll", "C:\\two\\b.dll"])
    assert r.module_path == "C:\\one\\b.dll"


def test_rule_loaded_same_file():
    r = load("C:\\x\\b.dll", files=["C:\\x\\b.dll"], loaded=["C:\\x\\B.DLL"])
    assert r.error == 0 and r.probes == [] and r.tree.how == "already loaded from the same file"
    # a full path to ANOTHER file with the same base name is loaded, not satisfied by the loaded copy
    r = load("C:\\y\\b.dll", files=["C:\\x\\b.dll", "C:\\y\\b.dll"], loaded=["C:\\x\\b.dll"])
    assert r.module_path == "C:\\y\\b.dll"


def test_rule_known_dlls():
    assert rules.rule_known_dlls("USER32.dll", SYS) == "C:\\Windows\\System32\\user32.dll"
    assert rules.rule_known_dlls("user32.dll", SystemInfo(profile="wine")) is None
    # a copy in the application folder does not win over KnownDLLs
    r = load("user32.dll", files=["C:\\app\\user32.dll"])
    assert r.tree.how == "KnownDLLs" and r.module_path.lower() == "c:\\windows\\system32\\user32.dll"


def test_rule_dot_local():
    files = [{"path": "C:\\app\\host.exe.local", "kind": "not_pe"}, "C:\\app\\b.dll", "C:\\lib\\b.dll"]
    # a .local file makes the application folder win even for a full path
    r = load("C:\\lib\\b.dll", files=files)
    assert r.module_path == "C:\\app\\b.dll"
    r = load("C:\\lib\\b.dll", files=["C:\\app\\b.dll", "C:\\lib\\b.dll"])
    assert r.module_path == "C:\\lib\\b.dll"
    # a .local folder is searched first
    r = load("b.dll", files=["C:\\app\\host.exe.local\\b.dll", "C:\\app\\b.dll"])
    assert r.module_path == "C:\\app\\host.exe.local\\b.dll"


def test_rule_invalid_flags():
    assert rules.rule_invalid_flags("C:\\a.dll", 0x8 | 0x1000) == "altered_with_search_flags"
    assert rules.rule_invalid_flags("a.dll", 0x100) == "dll_load_dir_needs_full_path"
    assert rules.rule_invalid_flags("C:\\a.dll", 0x100) is None
    # 0x8 alone, with SetDefaultDllDirectories in effect (DLL_LOAD_DIR in effect), and a bare name
    assert rules.rule_invalid_flags("a.dll", 0x8, 0x800 | 0x100) == "altered_with_default_dirs_needs_full_path"


def test_rule_invalid_flags_fix_fits_the_flags_passed():
    """The wrong fix the prose check gave: after SetDefaultDllDirectories(0x800),
    LoadLibraryExW("m.dll", 0x8) was told to drop 0x8 'when passing LOAD_LIBRARY_SEARCH_* flags',
    which it did not pass. The fix now comes from the typed reason."""
    sc = scenario(calls=[{"op": "SetDefaultDllDirectories", "flags": 0x800},
                         {"op": "LoadLibraryExW", "name": "m.dll", "flags": 0x8}])
    res = sc.run()[-1]
    assert (res.error, res.leaf.cause, res.leaf.reason) == (87, "invalid_parameter", "altered_with_default_dirs_needs_full_path")
    texts = [fix_text(f) for f in res.fixes]
    assert texts and "fully qualified path" in texts[0]
    assert not any("when passing LOAD_LIBRARY_SEARCH_" in t for t in texts)
    bad = scenario(calls=[{"op": "LoadLibraryExW", "name": "C:\\m.dll", "flags": 0x8 | 0x1000}]).run()[-1]
    assert bad.leaf.reason == "altered_with_search_flags" and "Drop LOAD_WITH_ALTERED_SEARCH_PATH" in fix_text(bad.fixes[0])
    r = load("a.dll", 0x1100, files=["C:\\app\\a.dll"])
    assert (r.error, r.leaf.cause) == (87, "invalid_parameter")
    assert load("C:\\app\\a.dll", 0x8 | 0x800, files=["C:\\app\\a.dll"]).error == 87


@pytest.mark.parametrize("flags, valid", [(0, False), (0x100, False), (0x1100, False), (0x2000, False),
                                          (0x1000, True), (0xE00, True)])
def test_rule_set_default_dirs_valid(flags, valid):
    # DLL_LOAD_DIR (0x100) is rejected in any combination, as are 0 and bits outside the SEARCH ones
    why = rules.rule_set_default_dirs_valid(flags)
    assert why is None if valid else isinstance(why, str) and why
    res = run([], [{"op": "SetDefaultDllDirectories", "flags": flags}, {"op": "LoadLibraryExW", "name": "x.dll"}],
              path=["C:\\p"])
    assert res[0].error == (0 if valid else 87)
    # a rejected default takes no effect: plain LoadLibrary still searches PATH
    assert ("C:\\p\\x.dll" in res[1].probes) == (not valid)


def test_rule_add_dll_directory_valid():
    res = run(["C:\\d\\x.dll"], [{"op": "AddDllDirectory", "path": "C:\\d"},
                                 {"op": "AddDllDirectory", "path": "C:\\missing"}])
    assert [r.error for r in res] == [0, 2]
    assert rules.rule_add_dll_directory_valid("rel\\dir", lambda p: True) == 87
    # a folder that only holds other folders exists too (every parent of a file is a folder)
    res = run(["C:\\x\\y\\z.dll"], [{"op": "AddDllDirectory", "path": "C:\\x"},
                                     {"op": "AddDllDirectory", "path": "c:\\X\\Y"}])
    assert [r.error for r in res] == [0, 0]


def test_rule_effective_search_flags():
    p = ProcessState(exe="C:\\a\\x.exe")
    assert rules.rule_effective_search_flags(0, p) == 0
    assert rules.rule_effective_search_flags(0x800, p) == 0x800
    p.default_dirs = 0x1000
    assert rules.rule_effective_search_flags(0, p) == 0x1000
    assert rules.rule_effective_search_flags(0x200, p) == 0x200
    # SetDefaultDllDirectories changes plain LoadLibrary: PATH is no longer searched
    r = load("b.dll", files=["C:\\p\\b.dll"], path=["C:\\p"], pre=[{"op": "SetDefaultDllDirectories", "flags": 0x1000}])
    assert r.error == 126 and "C:\\p" not in folders_probed(r, "b.dll")


def test_rule_user_dirs_most_recent_first():
    files = ["C:\\one\\b.dll", "C:\\two\\b.dll"]
    pre = [{"op": "AddDllDirectory", "path": "C:\\one"}, {"op": "AddDllDirectory", "path": "C:\\two"}]
    r = load("b.dll", 0x400, files=files, pre=pre)
    assert r.module_path == "C:\\two\\b.dll"
    rs = [c.rule for c in r.tree.candidates]
    assert rs == ["AddDllDirectory #2"]
    # the SetDllDirectory folder comes after every AddDllDirectory folder
    r = load("c.dll", 0x400, files=["C:\\one\\b.dll", "C:\\s\\c.dll"], pre=[*pre[:1], {"op": "SetDllDirectory", "path": "C:\\s"}])
    assert [c.rule for c in r.tree.candidates] == ["AddDllDirectory #1", "SetDllDirectory"]


@pytest.mark.parametrize("flag,folders", [
    (0x100, ["C:\\lib"]),
    (0x200, ["C:\\app"]),
    (0x400, ["C:\\u"]),
    (0x800, ["C:\\Windows\\System32"]),
    (0x1000, ["C:\\app", "C:\\u", "C:\\Windows\\System32"]),
    (0x1100, ["C:\\lib", "C:\\app", "C:\\u", "C:\\Windows\\System32"]),
    (0x900, ["C:\\lib", "C:\\Windows\\System32"]),
])
def test_rule_search_flags_order(flag, folders):
    r = load("C:\\lib\\top.dll", flag, files=[{"path": "C:\\lib\\top.dll", "imports": ["dep.dll"]}, "C:\\p\\dep.dll"],
             folders=["C:\\u"], path=["C:\\p"], cwd="C:\\cwd", pre=[{"op": "AddDllDirectory", "path": "C:\\u"}])
    assert r.error == 126
    assert folders_probed(r, "dep.dll") == folders  # never PATH or the current folder


def test_rule_path_entries():
    p = ProcessState(exe="C:\\a\\x.exe", path=["C:\\p1", " ", "C:\\p2"])
    assert [(d.folder, d.rule) for d in rules.rule_path_entries(p)] == [("C:\\p1", "PATH[1]"), ("C:\\p2", "PATH[3]")]


WINDOWS_DIRS = ["C:\\Windows\\System32", "C:\\Windows\\System", "C:\\Windows"]
SET_EMPTY = {"op": "SetDllDirectory", "path": ""}


@pytest.mark.parametrize("kw, folders", [
    (dict(path=["C:\\p1", "C:\\p2"]), ["C:\\app", *WINDOWS_DIRS, "C:\\cwd", "C:\\p1", "C:\\p2"]),
    (dict(system={"safe_dll_search_mode": False}), ["C:\\app", "C:\\cwd", *WINDOWS_DIRS, "C:\\p1"]),
    (dict(folders=["C:\\s"], pre=[{"op": "SetDllDirectory", "path": "C:\\s"}]),
     ["C:\\app", "C:\\s", *WINDOWS_DIRS, "C:\\p1"]),
    # "" removes only the current folder; NULL restores it; Wine treats "" as NULL
    (dict(pre=[SET_EMPTY]), ["C:\\app", *WINDOWS_DIRS, "C:\\p1"]),
    (dict(pre=[SET_EMPTY, {"op": "SetDllDirectory"}]), ["C:\\app", *WINDOWS_DIRS, "C:\\cwd", "C:\\p1"]),
    (dict(pre=[SET_EMPTY], system={"profile": "wine"}), ["C:\\app", *WINDOWS_DIRS, "C:\\cwd", "C:\\p1"]),
], ids=["standard", "SafeDllSearchMode off", "SetDllDirectory folder", "SetDllDirectory empty",
        "SetDllDirectory NULL after empty", "SetDllDirectory empty in the Wine profile"])
def test_rule_standard_order(kw, folders):
    r = load("b.dll", cwd="C:\\cwd", **{"path": ["C:\\p1"], **kw})
    assert folders_probed(r, "b.dll") == folders


def test_rule_standard_order_altered_search_path():
    files = [{"path": "C:\\lib\\top.dll", "imports": ["dep.dll"]}, "C:\\lib\\dep.dll", "C:\\app\\dep.dll"]
    assert load("C:\\lib\\top.dll", 0x8, files=files).tree.children[0].path == "C:\\lib\\dep.dll"
    assert load("C:\\lib\\top.dll", 0, files=files).tree.children[0].path == "C:\\app\\dep.dll"


def test_rule_search_path():
    p = ProcessState(exe="C:\\a\\x.exe", path=["C:\\p"])
    assert [d.rule for d in rules.rule_search_path("x.dll", 0x800, p, SYS)] == ["SYSTEM32"]
    assert rules.rule_search_path("x.dll", 0, p, SYS)[-1].rule == "PATH[1]"


def test_rule_dependencies_use_callers_path():
    # with 0x100 the DLL_LOAD_DIR is the TOP-level DLL's folder at every level: c.dll next to b.dll is not found
    files = [{"path": "C:\\t\\a.dll", "imports": ["b.dll"]}, {"path": "C:\\u\\b.dll", "imports": ["c.dll"]},
             "C:\\u\\c.dll"]
    r = load("C:\\t\\a.dll", 0x500, files=files, folders=["C:\\u"], pre=[{"op": "AddDllDirectory", "path": "C:\\u"}])
    assert r.error == 0  # b and c are both found through AddDllDirectory
    r = load("C:\\t\\a.dll", 0x100, files=files)
    assert (r.error, r.leaf.name) == (126, "b.dll")
    # a chain top -> a -> b all in one folder loads with 0x100
    files = [{"path": "C:\\t\\top.dll", "imports": ["a.dll"]}, {"path": "C:\\t\\a.dll", "imports": ["b.dll"]}, "C:\\t\\b.dll"]
    assert load("C:\\t\\top.dll", 0x100, files=files).error == 0


def test_rule_dependent_load_flags():
    files = [{"path": "C:\\lib\\top.dll", "imports": ["dep.dll"], "dependent_load_flags": 0x800},
             "C:\\app\\dep.dll", "C:\\Windows\\System32\\dep.dll"]
    r = load("C:\\lib\\top.dll", 0, files=files)
    assert r.tree.children[0].path == "C:\\Windows\\System32\\dep.dll"
    assert rules.rule_dependent_load_flags(FileFacts("x", PEFacts("x64", dependent_load_flags=0x800))) == 0x800
    assert rules.rule_dependent_load_flags(None) == 0


def test_rule_candidate():
    ok = FileFacts("x", PEFacts("x64"))
    assert rules.rule_candidate(None, "x64") == rules.CandidateVerdict("not_there", False)
    assert rules.rule_candidate(ok, "x64") == rules.CandidateVerdict("found", True)
    assert rules.rule_candidate(FileFacts("x", PEFacts("x86")), "x64") == rules.CandidateVerdict("wrong_machine", False)
    assert rules.rule_candidate(FileFacts("x", None, "not_pe"), "x64") == rules.CandidateVerdict("not_pe", True)
    assert rules.rule_candidate(FileFacts("x", None, "access_denied"), "x64") == rules.CandidateVerdict("access_denied", True)


def test_rule_il_only_image_fits():
    """A .NET assembly of IL only built as PE32 (x86, "AnyCPU": pythonnet's Python.Runtime.dll) loads in a 64-bit
    process; Windows refuses one marked 32BITREQUIRED, Wine takes it; a native x86 DLL never fits."""
    anycpu, x86_only = PEFacts("x86", cor_flags=0x1), PEFacts("x86", cor_flags=0x1 | 0x2)
    assert rules.rule_il_only_image_fits(anycpu, "x64") and rules.rule_il_only_image_fits(anycpu, "arm64")
    assert not rules.rule_il_only_image_fits(x86_only, "x64")
    assert rules.rule_il_only_image_fits(x86_only, "x64", "wine")
    assert not rules.rule_il_only_image_fits(PEFacts("x86"), "x64", "wine")  # (native: no CLR header)
    assert not rules.rule_il_only_image_fits(PEFacts("x86", cor_flags=0x8), "x64")  # (a CLR header, native code too)
    assert not rules.rule_il_only_image_fits(PEFacts("x64", cor_flags=0x1), "x86")  # (PE32+ is never made PE32)
    assert rules.rule_candidate(FileFacts("x", anycpu), "x64") == rules.CandidateVerdict("found", True)
    assert rules.rule_candidate(FileFacts("x", x86_only), "x64") == rules.CandidateVerdict("wrong_machine", False)
    # through the simulator, from a scenario's file: the first copy loads
    r = load("Python.Runtime.dll", files=[{"path": "C:\\app\\Python.Runtime.dll", "machine": "x86", "cor_flags": 1}])
    assert r.error == 0 and r.module_path == "C:\\app\\Python.Runtime.dll"
    r = load("Python.Runtime.dll", files=[{"path": "C:\\app\\Python.Runtime.dll", "machine": "x86", "cor_flags": 3}])
    assert (r.error, r.leaf.cause) == (193, "bad_machine")


def test_rule_candidate_wrong_machine_is_skipped():
    r = load("b.dll", files=[{"path": "C:\\app\\b.dll", "machine": "x86"}, "C:\\Windows\\System32\\b.dll"])
    assert r.module_path == "C:\\Windows\\System32\\b.dll"
    assert r.tree.candidates[0].result == "wrong_machine"


def test_rule_candidate_only_wrong_machine_is_193():
    r = load("b.dll", files=[{"path": "C:\\app\\b.dll", "machine": "x86"}])
    assert (r.error, r.leaf.cause) == (193, "bad_machine")


def test_rule_candidate_not_pe_is_193_and_stops():
    r = load("b.dll", files=[{"path": "C:\\app\\b.dll", "kind": "not_pe"}, "C:\\Windows\\System32\\b.dll"])
    assert (r.error, r.leaf.cause) == (193, "not_pe")


def test_rule_candidate_access_denied_is_5():
    r = load("b.dll", files=[{"path": "C:\\app\\b.dll", "kind": "access_denied"}])
    assert (r.error, r.leaf.cause) == (5, "access_denied")


def test_rule_forwarder_target():
    assert rules.rule_forwarder_target("NTDLL.RtlAllocateHeap") == ("NTDLL.dll", "RtlAllocateHeap")
    assert rules.rule_forwarder_target("other.#7") == ("other.dll", "#7")
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"]}]},
             {"path": "C:\\app\\b.dll", "forwarders": {"f": "c.g"}}]
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.name, r.chain) == (126, "c.dll", ["a.dll", "b.dll", "c.dll"])
    r = load("a.dll", files=[*files, {"path": "C:\\app\\c.dll", "exports": ["g"]}])
    assert r.error == 0
    r = load("a.dll", files=[*files, {"path": "C:\\app\\c.dll", "exports": ["h"]}])
    assert (r.error, r.leaf.name, r.leaf.cause) == (127, "c.dll", "missing_export")
    # a forwarder to an API set takes the exception host of the module being bound (a.dll), not
    # of the forwarding DLL (Wine build_import_name: current_modref)
    fw = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"]}]},
          {"path": "C:\\app\\b.dll", "forwarders": {"f": "api-ms-win-q-l1-1-0.g"}},
          {"path": "C:\\Windows\\System32\\h1.dll", "exports": ["g"]}, {"path": "C:\\Windows\\System32\\h2.dll", "exports": ["g"]}]
    sets = {"api_sets": {"api-ms-win-q-l1-1-0": {"host": "h1.dll", "exceptions": {"a.dll": "h2.dll", "b.dll": "h1.dll"}}}}
    r = load("a.dll", files=fw, system=sets)
    assert r.error == 0
    fwd = next(n for n in r.tree.walk() if n.via == "forwarder")
    assert fwd.path == "C:\\Windows\\System32\\h2.dll"


def test_rule_delay_imports_not_loaded_at_load_time():
    pe = PEFacts(machine="x64", imports=(Import("b.dll"),), delay_imports=(Import("missing.dll"),))
    assert rules.rule_delay_imports_not_loaded_at_load_time(pe) == (Import("b.dll"),)
    r = load("a.dll", files=[{"path": "C:\\app\\a.dll", "delay_imports": ["missing.dll"]}])
    assert r.error == 0 and not any("missing" in p for p in r.probes)


def test_rule_missing_import_is_error():
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"], "ordinals": []}]},
             {"path": "C:\\app\\b.dll", "exports": ["g"]}]
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.cause, r.leaf.detail) == (127, "missing_export", "f")
    assert load("a.dll", files=files, system={"profile": "wine"}).error == 0
    files = [{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "ordinals": [5]}]},
             {"path": "C:\\app\\b.dll", "export_ordinals": [1, 2]}]
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.cause) == (182, "missing_ordinal")
    # the Wine profile binds each to a stub, kept on the node of the DLL that lacks it (replay.stubs_bound, the
    # report's 'Loaded under Wine, fails on Windows'): by name, by ordinal (Wine's import_dll: allocate_stub with the
    # ordinal), and through a forwarder whose target lacks the function (find_named_export gives nothing): the last
    # two loaded with no stub named, and the report said 'every load succeeded'
    from dlltrace.diagnosis.replay import stubs_bound

    def wine_stubs(files: list) -> list:
        r = load("a.dll", files=files, system={"profile": "wine"})
        assert r.error == 0
        return [(i.rsplit("\\", 1)[-1], d.rsplit("\\", 1)[-1], f) for i, d, f in stubs_bound(r)]

    assert wine_stubs([{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"], "ordinals": []}]},
                       {"path": "C:\\app\\b.dll", "exports": ["g"]}]) == [("a.dll", "b.dll", "f")]
    assert wine_stubs(files) == [("a.dll", "b.dll", "#5")]
    assert wine_stubs([{"path": "C:\\app\\a.dll", "imports": [{"dll": "b.dll", "names": ["f"]}]},
                       {"path": "C:\\app\\b.dll", "forwarders": {"f": "c.g"}},
                       {"path": "C:\\app\\c.dll", "exports": ["h"]}]) == [("a.dll", "b.dll", "f")]


def test_init_failure_is_1114_after_every_dependency_resolved():
    files = [{"path": "C:\\app\\a.dll", "imports": ["b.dll"]}, {"path": "C:\\app\\b.dll", "dllmain_fails": True}]
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.name, r.leaf.cause, r.chain) == (1114, "b.dll", "init_failed", ["a.dll", "b.dll"])


def test_dllmain_order_dependencies_first():
    """DllMain runs imports first (the reverse of dependency order), in import order: the first
    DllMain that fails in that order is the leaf, and its importer's DllMain never runs."""
    files = [{"path": "C:\\app\\a.dll", "imports": ["b.dll", "c.dll"], "dllmain_fails": True},
             {"path": "C:\\app\\b.dll", "imports": ["d.dll"]}, {"path": "C:\\app\\c.dll", "dllmain_fails": True},
             {"path": "C:\\app\\d.dll", "dllmain_fails": True}]
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.name, r.chain) == (1114, "d.dll", ["a.dll", "b.dll", "d.dll"])
    files[3]["dllmain_fails"] = False
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.name, r.chain) == (1114, "c.dll", ["a.dll", "c.dll"])
    files[2]["dllmain_fails"] = False
    r = load("a.dll", files=files)
    assert (r.error, r.leaf.name, r.chain) == (1114, "a.dll", ["a.dll"])


def test_failed_load_unloads_what_it_loaded():
    files = [{"path": "C:\\app\\a.dll", "imports": ["b.dll", "missing.dll"]}, "C:\\app\\b.dll", "C:\\other\\b.dll"]
    res = run(files, [{"op": "LoadLibraryExW", "name": "a.dll"}, {"op": "LoadLibraryExW", "name": "C:\\other\\b.dll"},
                      {"op": "LoadLibraryExW", "name": "b.dll"}])
    assert res[0].error == 126
    assert res[2].module_path == "C:\\other\\b.dll"  # b.dll from C:\app was unloaded with the failed call


def test_relative_path_with_folder_is_appended_to_every_folder():
    r = load("sub\\b.dll", files=["C:\\Windows\\System32\\sub\\b.dll"], path=["C:\\p"])
    assert r.module_path == "C:\\Windows\\System32\\sub\\b.dll"
    assert r.probes[0] == "C:\\app\\sub\\b.dll"


def test_case_insensitive_throughout():
    r = load("C:\\APP\\A.DLL", files=[{"path": "C:\\app\\a.dll", "imports": ["B.Dll"]}, "c:\\app\\b.dll"])
    assert r.error == 0


def test_rule_effective_search_flags_altered_with_default_dirs():
    p = ProcessState(exe="C:\\a\\x.exe", default_dirs=0x800)
    assert rules.rule_effective_search_flags(0x8, p) == 0x900
    files = [{"path": "C:\\f1\\m.dll", "imports": ["l.dll"]}, "C:\\f1\\l.dll"]
    pre = [{"op": "SetDefaultDllDirectories", "flags": 0x800}]
    r = load("C:\\f1\\m.dll", 0x8, files=files, pre=pre)
    assert r.error == 0 and r.tree.children[0].path == "C:\\f1\\l.dll"
    r = load("m.dll", 0x8, files=files, pre=pre)
    assert (r.error, r.leaf.cause) == (87, "invalid_parameter")


def test_rule_import_failure_error():
    assert rules.rule_import_failure_error(SYS, 193) == 193
    assert rules.rule_import_failure_error(SystemInfo(profile="wine"), 193) == 126
    files = [{"path": "C:\\f1\\m.dll", "imports": ["l.dll"]}, {"path": "C:\\f1\\l.dll", "machine": "x86"}]
    assert load("C:\\f1\\m.dll", 0x8, files=files).error == 193
    r = load("C:\\f1\\m.dll", 0x8, files=files, system={"profile": "wine"})
    assert (r.error, r.leaf.name, r.leaf.cause) == (126, "l.dll", "bad_machine")


def test_rule_imports_stop_at_first_failure():
    assert rules.rule_imports_stop_at_first_failure(SYS)
    assert not rules.rule_imports_stop_at_first_failure(SystemInfo(profile="wine"))
    files = [{"path": "C:\\app\\a.dll", "imports": ["missing.dll", "b.dll"]}, "C:\\app\\b.dll"]
    r = load("a.dll", files=files)
    assert r.error == 126 and not any(p.endswith("b.dll") for p in r.probes)
    r = load("a.dll", files=files, system={"profile": "wine"})
    assert (r.error, r.leaf.name) == (126, "missing.dll") and "C:\\app\\b.dll" in r.probes


def test_rule_datafile_load():
    assert rules.rule_datafile_load(0x2) and rules.rule_datafile_load(0x20) and not rules.rule_datafile_load(0x8)
    files = [{"path": "C:\\app\\res.dll", "machine": "x86", "imports": ["missing.dll"], "dllmain_fails": True}]
    res = run(files, [{"op": "LoadLibraryExW", "name": "res.dll", "flags": 0x2},
                      {"op": "LoadLibraryExW", "name": "res.dll", "flags": 0}])
    assert res[0].error == 0 and res[0].module_path == "C:\\app\\res.dll"
    assert not any("missing" in p for p in res[0].probes)
    assert res[1].error == 193  # the data-file mapping did not join the loaded-module list


def test_rule_dont_resolve_references():
    assert rules.rule_dont_resolve_references(0x1)
    files = [{"path": "C:\\app\\a.dll", "imports": ["missing.dll"], "dllmain_fails": True}]
    res = run(files, [{"op": "LoadLibraryExW", "name": "a.dll", "flags": 0x1},
                      {"op": "LoadLibraryExW", "name": "a.dll", "flags": 0}])
    assert res[0].error == 0 and not any("missing" in p for p in res[0].probes)
    assert res[1].error == 0 and res[1].probes == []  # listed: the second load binds to it


def test_rule_failed_load_keeps_loaded_dependencies():
    assert not rules.rule_failed_load_keeps_loaded_dependencies(SYS, 126)
    assert rules.rule_failed_load_keeps_loaded_dependencies(SystemInfo(profile="wine"), 126)
    assert not rules.rule_failed_load_keeps_loaded_dependencies(SystemInfo(profile="wine"), 1114)
    files = [{"path": "C:\\t\\a.dll", "imports": ["good.dll", "missing.dll"]}, "C:\\t\\good.dll", "C:\\u\\good.dll"]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\t\\a.dll", "flags": 0x100},
             {"op": "LoadLibraryExW", "name": "good.dll", "flags": 0}]
    windows = run(files, calls, folders=["C:\\u"], path=["C:\\u"])
    assert windows[0].error == 126 and windows[1].module_path == "C:\\u\\good.dll"  # unloaded with the failure
    wine = run(files, calls, folders=["C:\\u"], path=["C:\\u"], system={"profile": "wine"})
    assert wine[0].error == 126 and wine[1].module_path == "C:\\t\\good.dll" and wine[1].probes == []


def test_free_library_releases_dependencies():
    files = [{"path": "C:\\f1\\m.dll", "imports": ["l.dll"]}, "C:\\f1\\l.dll"]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\f1\\m.dll", "flags": 0x8}, {"op": "FreeLibrary", "name": "m.dll"},
             {"op": "LoadLibraryExW", "name": "l.dll"}]
    res = run(files, calls)
    assert res[2].error == 126  # l.dll left with m.dll, so it is searched for again
    # a dependency still used by another module stays
    files.append({"path": "C:\\f1\\n.dll", "imports": ["l.dll"]})
    calls.insert(1, {"op": "LoadLibraryExW", "name": "C:\\f1\\n.dll", "flags": 0x8})
    res = run(files, calls)
    assert res[-1].module_path == "C:\\f1\\l.dll" and res[-1].probes == []


def test_module_left_uninitialized_runs_dllmain_when_bound():
    # Wine keeps l.dll (loaded, not initialized) after w.dll fails on its next import; binding to it later runs DllMain
    files = [{"path": "C:\\f1\\w.dll", "imports": ["l.dll", "x.dll"]}, {"path": "C:\\f1\\l.dll", "dllmain_fails": True}]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\f1\\w.dll", "flags": 0x8}, {"op": "LoadLibraryExW", "name": "l.dll"}]
    res = run(files, calls, system={"profile": "wine"})
    assert res[0].error == 126
    assert (res[1].error, res[1].leaf.cause, res[1].probes) == (1114, "init_failed", [])


def test_rule_loaded_candidate_not_opened():
    assert rules.rule_loaded_candidate_not_opened(SystemInfo(profile="wine"))
    assert not rules.rule_loaded_candidate_not_opened(SYS)
    calls = [{"op": "LoadLibraryExW", "name": "sub\\l.dll"}] * 2
    wine = run(["C:\\app\\sub\\l.dll"], calls, system={"profile": "wine"})
    assert wine[1].module_path == "C:\\app\\sub\\l.dll" and wine[1].probes == []
    windows = run(["C:\\app\\sub\\l.dll"], calls)
    assert windows[1].module_path == "C:\\app\\sub\\l.dll" and windows[1].probes == ["C:\\app\\sub\\l.dll"]


def test_rule_datafile_search_path():
    p = ProcessState(exe="C:\\a\\x.exe", cwd="C:\\cwd", path=["C:\\p"])
    assert [d.folder for d in rules.rule_datafile_search_path(p, SYS)] == [
        "C:\\a", "C:\\cwd", "C:\\Windows\\System32", "C:\\Windows\\System", "C:\\Windows", "C:\\p"]
    files = ["C:\\f1\\l.dll", {"path": "C:\\p\\l.dll", "machine": "x86"}]
    pre = [{"op": "AddDllDirectory", "path": "C:\\f1"}]
    wine = load("l.dll", 0x1002, files=files, pre=pre, path=["C:\\p"], system={"profile": "wine"})
    # the loader's search finds f1\l.dll (not loaded); SearchPath does not search f1, takes the x86 copy on PATH
    assert (wine.error, wine.module_path) == (0, "C:\\p\\l.dll")
    assert load("l.dll", 0x1002, files=files[:1], pre=pre, system={"profile": "wine"}).error == 2
    assert load("l.dll", 0x1002, files=files, pre=pre, path=["C:\\p"]).module_path == "C:\\f1\\l.dll"


def test_rule_altered_relative_name():
    p = ProcessState(exe="C:\\a\\x.exe", cwd="C:\\f1")
    assert rules.rule_altered_relative_name("sub\\l.dll", p) == "C:\\f1\\sub\\l.dll"
    files = ["C:\\f1\\sub\\l.dll", "C:\\f1\\sub\\sub\\l.dll"]
    assert load("sub\\l.dll", 0x8, files=files, cwd="C:\\f1", system={"profile": "wine"}).module_path == \
        "C:\\f1\\sub\\sub\\l.dll"
    assert load("sub\\l.dll", 0x8, files=files, cwd="C:\\f1").module_path == "C:\\f1\\sub\\l.dll"


def test_rule_api_set_host_search():
    """A LoadLibrary of a contract takes its host from System32 whatever the search path; an
    import of it searches for the host on the importer's path (Wine 8.0, measured)."""
    host_app = "C:\\app\\ucrtbase.dll"
    files = [host_app, "C:\\Windows\\System32\\ucrtbase.dll",
             {"path": "C:\\app\\a.dll", "imports": ["api-ms-win-crt-string-l1-1-0.dll"]}]
    system = {"api_sets": {"api-ms-win-crt-string-l1-1-0": "ucrtbase.dll"}}
    # SetDefaultDllDirectories(APPLICATION_DIR): the search path misses System32
    pre = [{"op": "SetDefaultDllDirectories", "flags": 0x200}]
    r = load("api-ms-win-crt-string-l1-1-0.dll", files=files, pre=pre, system=system)
    assert r.error == 0 and r.module_path == "C:\\Windows\\System32\\ucrtbase.dll"
    assert r.probes == ["C:\\Windows\\System32\\ucrtbase.dll"]
    r = load("C:\\app\\a.dll", files=files, pre=pre, system=system)
    assert r.error == 0 and r.tree.children[0].path == host_app
    r = load("C:\\app\\a.dll", files=files[1:], pre=pre, system=system)
    assert r.error == 126 and r.leaf.name == "ucrtbase.dll"


def test_free_library_releases_dependencies_through_an_api_set():
    """A host loaded through a contract is a dependency like any other: freeing the importer
    unloads it, and the next load looks for it again."""
    files = ["C:\\Windows\\System32\\ucrtbase.dll",
             {"path": "C:\\app\\a.dll", "imports": ["api-ms-win-crt-string-l1-1-0.dll"]}]
    system = {"api_sets": {"api-ms-win-crt-string-l1-1-0": "ucrtbase.dll"}}
    res = run(files, [{"op": "LoadLibraryExW", "name": "C:\\app\\a.dll"}, {"op": "FreeLibrary", "name": "C:\\app\\a.dll"},
                      {"op": "LoadLibraryExW", "name": "C:\\app\\a.dll"}], system=system)
    assert res[1].error == 0
    assert "C:\\Windows\\System32\\ucrtbase.dll" in res[2].probes
    assert res[2].tree.children[0].children[0].new


def test_rule_datafile_search_path_not_pe_has_the_words_of_its_cause():
    """A data-file load under Wine that finds a file that is not a PE: the leaf's cause, error and
    words are those of any not_pe leaf (they were left empty on this path)."""
    r = load("C:\\app\\x.dll", 0x2, files=[{"path": "C:\\app\\x.dll", "kind": "not_pe"}], system={"profile": "wine"})
    assert (r.error, r.leaf.cause) == (193, "not_pe")
    assert r.leaf.detail == load("C:\\app\\x.dll", 0, files=[{"path": "C:\\app\\x.dll", "kind": "not_pe"}]).leaf.detail != ""


# --- issue 9 item 6: packaged processes, PATH edits, delay loads, DllMain failures that depend on a binding


def test_rule_packaged_standard_order():
    """Microsoft Learn, "Standard search order for packaged apps": package dependency graph,
    executable's folder, System32; no System/Windows folder, no current folder, no PATH."""
    p = ProcessState(exe="C:\\pkg\\app\\app.exe", cwd="C:\\work", path=["C:\\tools"], packaged=True,
                     package_graph=["C:\\pkg\\app", "C:\\pkg\\vclibs"])
    order = rules.rule_packaged_standard_order(p, SYS)
    assert [(d.folder, d.rule) for d in order] == [
        ("C:\\pkg\\app", "package dependency graph #1"), ("C:\\pkg\\vclibs", "package dependency graph #2"),
        ("C:\\pkg\\app", "application folder"), ("C:\\Windows\\System32", "System32")]
    # "Alternate search order for packaged apps": ALTERED_SEARCH_PATH puts the DLL's folder in the exe's place
    alt = rules.rule_packaged_standard_order(p, SYS, "C:\\plug\\x.dll")
    assert [d.folder for d in alt][2:] == ["C:\\plug", "C:\\Windows\\System32"]
    # rule_search_path uses it: the same layout finds b.dll on PATH unpackaged, not packaged
    files = ["C:\\tools\\b.dll", "C:\\pkg\\vclibs\\v.dll"]
    assert load("b.dll", files=files, path=["C:\\tools"]).error == 0
    r = load("b.dll", files=files, path=["C:\\tools"], packaged=True)
    assert r.error == 126 and not any(p.startswith("C:\\tools") for p in r.probes)
    assert folders_probed(r, "b.dll") == ["C:\\app", "C:\\Windows\\System32"]
    r = load("v.dll", files=files, packaged=True, package_graph=["C:\\pkg\\vclibs"])
    assert (r.error, r.module_path, r.tree.how) == (0, "C:\\pkg\\vclibs\\v.dll", "package dependency graph #1")
    # the LOAD_LIBRARY_SEARCH_* order is not the packaged one (it never searches PATH either way)
    assert [d.rule for d in rules.rule_search_path("b.dll", 0x800, p, SYS)] == ["SYSTEM32"]


def test_rule_environment_path():
    assert rules.rule_environment_path("C:\\a;;C:\\b\\;  ;rel\\x", "C:\\work") == ["C:\\a", "C:\\b", "C:\\work\\rel\\x"]
    assert rules.rule_environment_path(None, "C:\\work") == []
    assert rules.rule_environment_path("", "C:\\work") == []
    # SetEnvironmentVariable("PATH") changes what a later plain LoadLibrary searches (any case of the name)
    files = ["C:\\cuda\\bin\\c.dll"]
    calls = [{"op": "LoadLibraryW", "name": "c.dll"},
             {"op": "SetEnvironmentVariable", "name": "Path", "value": "C:\\cuda\\bin;C:\\Windows"},
             {"op": "LoadLibraryW", "name": "c.dll"},
             {"op": "SetEnvironmentVariable", "name": "PATH"},  # no value: deleted
             {"op": "LoadLibraryW", "name": "c.dll", "flags": 0}]
    res = run(files, calls, path=["C:\\Windows"])
    assert [(r.op, r.error) for r in res] == [("LoadLibraryW", 126), ("SetEnvironmentVariable", 0), ("LoadLibraryW", 0),
                                             ("SetEnvironmentVariable", 0), ("LoadLibraryW", 0)]
    assert res[1].name == "Path=C:\\cuda\\bin;C:\\Windows" and res[2].path == ("C:\\cuda\\bin", "C:\\Windows")
    assert res[4].path == () and res[4].tree.how == "already loaded from C:\\cuda\\bin\\c.dll"
    # another variable is kept in the process environment
    sc = scenario(calls=[{"op": "SetEnvironmentVariable", "name": "CUDA_PATH", "value": "C:\\cuda"}])
    sim = sc.simulator(explain=False)
    sim.run(sc.calls)
    assert sim.process.env == {"CUDA_PATH": "C:\\cuda"}


def test_rule_delay_load_call():
    assert rules.rule_delay_load_call("d.dll") == ("LoadLibraryExA", 0)
    # the helper's bare-name LoadLibraryExA never searches the importing DLL's own folder: a d.dll next to a.dll
    # is missed when a.dll was loaded from elsewhere than the application folder
    files = [{"path": "C:\\lib\\a.dll", "delay_imports": ["d.dll"]}, "C:\\lib\\d.dll"]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\lib\\a.dll", "flags": 0x1100},
             {"op": "delay_load", "module": "a.dll", "name": "d.dll"}]
    a, d = run(files, calls)
    assert a.error == 0 and "C:\\lib\\d.dll" not in a.probes  # not loaded at load time
    assert (d.op, d.flags, d.error, d.origin_kind, d.origin_module) == ("LoadLibraryExA", 0, 126, "runtime", "a.dll")
    assert d.origin == "loaded at run time by a.dll (delay-load import)" and d.chain == ["a.dll", "d.dll"]
    assert "0xC06D007E" in d.note and "C:\\lib\\d.dll" not in d.probes
    # ... and it searches PATH (the standard order): found there
    d = run(files, calls, path=["C:\\lib"])[-1]
    assert (d.error, d.module_path, d.tree.how, d.note) == (0, "C:\\lib\\d.dll", "PATH[1]", "")


def test_rule_dllmain_fails_if_bound():
    cond = (rules.BoundVersionCondition("msvcp140.dll", "14.40"),)
    assert rules.rule_dllmain_fails_if_bound(cond, [("C:\\x\\MSVCP140.dll", "14.36.32532.0")]) == (
        "it fails when its msvcp140.dll is older than 14.40: it bound to C:\\x\\MSVCP140.dll, version 14.36.32532.0")
    assert rules.rule_dllmain_fails_if_bound(cond, [("C:\\x\\msvcp140.dll", "14.40")]) is None
    assert rules.rule_dllmain_fails_if_bound(cond, [("C:\\x\\msvcp140.dll", "14.42.34433.0")]) is None
    assert rules.rule_dllmain_fails_if_bound(cond, [("C:\\x\\msvcp140.dll", None)]) is None  # version unknown
    assert rules.rule_dllmain_fails_if_bound(cond, [("C:\\x\\vcruntime140.dll", "14.0")]) is None
    # end to end (pytorch#169429): the old copy loaded first is bound -> 1114; the import-order fix, the new copy
    # loaded first, is verified by re-running the same world
    files = [{"path": "C:\\pkgs\\old\\msvcp140.dll", "version": "14.36.32532.0"},
             {"path": "C:\\Windows\\System32\\msvcp140.dll", "version": "14.42.34433.0"},
             {"path": "C:\\torch\\lib\\c10.dll", "imports": ["msvcp140.dll"],
              "dllmain_fails_if_bound": {"name": "MSVCP140.dll", "older_than": "14.40"}}]
    old_first = [{"op": "LoadLibraryExW", "name": "C:\\pkgs\\old\\msvcp140.dll"},
                 {"op": "LoadLibraryExW", "name": "C:\\torch\\lib\\c10.dll", "flags": 0x1100}]
    r = run(files, old_first)[-1]
    assert (r.error, r.leaf.cause, r.leaf.name, r.chain) == (1114, "init_failed", "c10.dll", ["c10.dll"])
    assert "C:\\pkgs\\old\\msvcp140.dll, version 14.36.32532.0" in r.leaf.detail
    new_first = [old_first[1], old_first[0]]
    assert [x.error for x in run(files, new_first)] == [0, 0]
    # nothing old loaded: c10.dll binds System32's 14.42 and loads
    assert run(files, old_first[1:])[-1].error == 0


def test_rule_dllmain_failure_error():
    """FALSE gives 1114; a crash the loader caught gives the error the load recorded (998 for an access
    violation under Wine, tests/test_dllmain.py); the engine puts it on the leaf and every importer above."""
    import dataclasses

    assert rules.rule_dllmain_failure_error("") == 1114
    assert rules.rule_dllmain_failure_error("exited") == 1114  # (the load never returned: nothing to compare)
    assert rules.rule_dllmain_failure_error("crashed") == 998
    assert rules.rule_dllmain_failure_error("crashed", 1001) == 1001
    assert not rules.rule_failed_load_keeps_loaded_dependencies(SystemInfo(profile="wine"), 998)
    sc = scenario(files=[{"path": "C:\\t\\top.dll", "imports": ["crash.dll"]}, "C:\\t\\crash.dll"])
    f = sc.world.file("C:\\t\\crash.dll")
    sc.world.add_file(dataclasses.replace(f, dllmain_fails=True, dllmain_how="crashed", dllmain_error=998,
                                          dllmain_status=0xC0000005))
    sim = sc.simulator()
    res = sim.load_library("C:\\t\\top.dll", 0x8)
    assert res.error == 998 and res.leaf is not None and res.leaf.name == "crash.dll"
    assert res.leaf.cause == "init_failed" and res.chain == ["top.dll", "crash.dll"]
    assert "its DllMain crashed (0xc0000005)" in res.leaf.detail
    assert [m for m in ("top.dll", "crash.dll") if sim.process.find_loaded_by_name(m) is not None] == []


def test_rule_dos_path_name():
    r"""Microsoft's "Naming Files, Paths, and Namespaces": `\\?\` sends the string to the file system as
    written; a normal path is parsed, and its last component loses its trailing dots and spaces (Wine's
    collapse_path also drops a folder's last dot). Measured under Wine: tests/test_odd_paths.py."""
    d = rules.rule_dos_path_name
    assert d("\\\\?\\C:\\x\\a.dll") == "C:\\x\\a.dll"
    assert d("\\\\?\\C:\\x\\a.dll.") == "C:\\x\\a.dll."  # kept: the file "a.dll." (not there)
    assert d("\\\\?\\C:\\x\\a.dll ") == "C:\\x\\a.dll "
    assert d("\\\\?\\UNC\\srv\\share\\a.dll") == "\\\\srv\\share\\a.dll"
    assert d("C:\\x\\a.dll.") == d("C:\\x\\a.dll ") == d("C:\\x\\a.dll. . ") == "C:\\x\\a.dll"
    assert d("C:\\x.\\a.dll") == "C:\\x\\a.dll"
    assert d("a.dll ") == "a.dll" and d("sub\\a.dll.") == "sub\\a.dll"
    assert d("C:\\x\\..\\a.dll") == "C:\\x\\..\\a.dll" and d("..\\a.dll") == "..\\a.dll"  # (dots alone: normalize)
    assert d("\\\\srv\\share\\a.dll") == "\\\\srv\\share\\a.dll" and d("C:\\x\\a.dll") == "C:\\x\\a.dll"


def test_rule_load_name():
    """".dll" is added first (a trailing "." means none), then the path rules: the name the model opens is
    the file the loader opens, so a `\\\\?\\` path or a trailing ". " is no 126 next to the same file."""
    n = rules.rule_load_name
    assert n("a") == "a.dll" and n("a.") == "a" and n("a.dll.") == "a.dll" and n("a.dll ") == "a.dll"
    assert n("\\\\?\\C:\\x\\a") == "C:\\x\\a.dll" and n("\\\\?\\C:\\x\\a.dll.") == "C:\\x\\a.dll."
    files = ["C:\\x\\a.dll"]
    for name in ("\\\\?\\C:\\x\\a.dll", "C:\\x\\a.dll.", "C:\\x\\a.dll ", "C:\\x.\\a.dll"):
        r = load(name, 0, files)
        assert (r.error, r.module_path, r.probes) == (0, "C:\\x\\a.dll", ["C:\\x\\a.dll"]), name
    r = load("\\\\?\\C:\\x\\a.dll.", 0, files)
    assert r.error == 126 and r.probes == ["C:\\x\\a.dll."]
    r = load("a.dll ", 0x1000, files, pre=[{"op": "AddDllDirectory", "path": "C:\\x"}])
    assert r.error == 0 and r.module_path == "C:\\x\\a.dll"


def test_rule_dllmain_needs_cpu_feature():
    """A DllMain that needs AVX fails (1114) on a CPU without it, and only there (tensorflow#37221)."""
    from dlltrace.loader.windows.rules import rule_dllmain_needs_cpu_feature

    assert rule_dllmain_needs_cpu_feature(("avx",), ("avx",)) == "avx"
    assert rule_dllmain_needs_cpu_feature(("avx",), ("AVX512F",)) is None
    assert rule_dllmain_needs_cpu_feature((), ("avx",)) is None
    ext = {"path": "C:\\py\\tf.pyd", "dllmain_fails_if_cpu_lacks": "avx"}
    calls = [{"op": "LoadLibraryExW", "name": ext["path"], "flags": 0}]
    bad = scenario(files=[ext], system={"cpu_lacks": ["avx"]}, calls=calls).run()[-1]
    assert bad.error == 1114 and bad.leaf.cause == "init_failed" and bad.leaf.facts.cpu_lacks == "avx"
    assert "needs a CPU with AVX" in bad.leaf.detail
    assert bad.fixes[0].action == "cpu_build" and bad.fixes[0].verified
    assert scenario(files=[ext], calls=calls).run()[-1].error == 0  # a CPU with AVX
