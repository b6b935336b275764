"""The scenario format's ways to say what really happened (project issue 9, item 6): a run-time load
`by` a DLL, SetEnvironmentVariable, delay_load, ctypes_find_library / ctypes_cdll find_library,
packaged / base_exe / conda_prefix, dllmain_fails_if_bound, fix_not_contains; and S11, CTranslate2
4.8.5 as it loads cuBLAS (docs/packages.md §1), with each fix of §1.5 re-run through the model.
The rules behind them have their own rule-named tests (test_rules.py, test_emulate.py)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest

from dlltrace.diagnosis.scenario import ScenarioError, scenario_from_dict
from simhelp import run

ROOT = Path(__file__).resolve().parent.parent
S11 = ROOT / "fixtures" / "scenarios" / "s11.toml"
SP = "C:\\Users\\me\\venv\\Lib\\site-packages"
CUBLAS_BIN = SP + "\\nvidia\\cublas\\bin"


def test_a_load_by_a_dll_is_a_runtime_load_of_that_dll():
    files = [{"path": "C:\\app\\ct2.dll"}, "C:\\tools\\cublas.dll"]
    calls = [{"op": "LoadLibraryExW", "name": "C:\\app\\ct2.dll"},
             {"op": "LoadLibraryA", "name": "cublas.dll", "by": "CT2.DLL"}]
    r = run(files, calls)[-1]
    assert (r.op, r.flags, r.error) == ("LoadLibraryA", 0, 126)
    assert (r.origin_kind, r.origin_module, r.origin) == ("runtime", "ct2.dll", "loaded at run time by ct2.dll")
    assert r.chain == ["ct2.dll", "cublas.dll"] and r.leaf.parent == "ct2.dll"  # the chain shows who loaded it
    ok = run(files, calls, path=["C:\\tools"])[-1]
    assert (ok.error, ok.origin_kind, ok.chain) == (0, "runtime", [])


def test_a_load_by_a_dll_that_is_not_loaded_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        run([], [{"op": "LoadLibraryA", "name": "cublas.dll", "by": "ct2.dll"}])
    assert str(e.value) == "<test>: call[0].by: ct2.dll is not loaded at this call (a run-time load is made by a loaded DLL)"
    assert e.value.place == "call[0].by" and e.value.exit_code == 2
    # a DLL loaded and freed again is not loaded
    files = ["C:\\app\\ct2.dll"]
    with pytest.raises(ScenarioError, match=r"call\[2\]\.by: ct2.dll is not loaded"):
        run(files, [{"op": "LoadLibraryW", "name": "C:\\app\\ct2.dll"}, {"op": "FreeLibrary", "name": "ct2.dll"},
                    {"op": "LoadLibraryW", "name": "x.dll", "by": "ct2.dll"}])


def test_delay_load_needs_a_loaded_module_with_that_delay_import():
    files = [{"path": "C:\\app\\a.dll", "delay_imports": ["d.dll"]}]
    with pytest.raises(ScenarioError, match=r"call\[0\]\.module: a.dll is not loaded"):
        run(files, [{"op": "delay_load", "module": "a.dll", "name": "d.dll"}])
    with pytest.raises(ScenarioError, match=r"call\[1\]\.name: a.dll has no delay-load import x.dll \(its delay_imports: d.dll\)"):
        run(files, [{"op": "LoadLibraryW", "name": "C:\\app\\a.dll"}, {"op": "delay_load", "module": "a.dll", "name": "x.dll"}])
    # the name matches without its extension, any case
    r = run(files + ["C:\\app\\d.dll"], [{"op": "LoadLibraryW", "name": "C:\\app\\a.dll"},
                                        {"op": "delay_load", "module": "A.dll", "name": "D"}])[-1]
    assert (r.error, r.module_path.lower(), r.origin_module) == (0, "c:\\app\\d.dll", "a.dll")


@pytest.mark.parametrize("call, message", [
    ({"op": "AddDllDirectory", "path": "C:\\x", "by": "a.dll"}, "call[0].op"),
    ({"op": "delay_load", "name": "d.dll"}, "call[0]: delay_load needs `module`"),
    ({"op": "delay_load", "module": "C:\\x\\a.dll", "name": "d.dll"}, "call[0].module"),
    ({"op": "ctypes_cdll", "name": "a.dll", "find_library": "a"}, "call[0]"),
    ({"op": "ctypes_cdll"}, "call[0]"),
    ({"op": "ctypes_find_library"}, "call[0]: ctypes_find_library needs `name`"),
    ({"op": "SetEnvironmentVariable", "name": "A=B", "value": "x"}, "call[0].name"),
    ({"op": "SetEnvironmentVariable", "value": "x"}, "call[0]: SetEnvironmentVariable needs `name`"),
    ({"op": "SetEnvironmentVariable", "name": "PATH", "value": "a\nb"}, "call[0].value"),
])
def test_the_new_call_fields_are_checked(call, message):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"process": {"exe": "C:\\app\\h.exe"}, "call": [call]}, "s.json")
    assert str(e.value).startswith("s.json: " + message), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("doc, place", [
    ({"process": {"exe": "C:\\h.exe", "packaged": "yes"}}, "process.packaged"),
    ({"process": {"exe": "C:\\h.exe", "package_graph": ["rel"]}}, "process.package_graph[0]"),
    ({"process": {"exe": "C:\\h.exe", "base_exe": "python.exe"}}, "process.base_exe"),
    ({"process": {"exe": "C:\\h.exe", "conda_prefix": ""}}, "process.conda_prefix"),
    ({"process": {"exe": "C:\\h.exe"}, "file": [{"path": "C:\\a.dll", "dllmain_fails_if_bound": {"name": "m.dll"}}]},
     "file[0].dllmain_fails_if_bound"),
    ({"process": {"exe": "C:\\h.exe"}, "file": [{"path": "C:\\a.dll", "dllmain_fails_if_bound":
                                                  {"name": "m.dll", "older_than": "new"}}]},
     "file[0].dllmain_fails_if_bound.older_than"),
    ({"process": {"exe": "C:\\h.exe"}, "expect": {"fix_not_contains": 3}}, "expect.fix_not_contains"),
    ({"process": {"exe": "C:\\h.exe"}, "expect": {"fix_contains": ["a", 1]}}, "expect.fix_contains"),
])
def test_the_new_process_file_and_expect_fields_are_checked(doc, place):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(doc, "s.json")
    assert e.value.place is not None and e.value.place.startswith(place), (e.value.place, str(e.value))


def test_the_new_fields_are_read():
    sc = scenario_from_dict({
        "process": {"exe": "C:\\v\\Scripts\\python.exe", "base_exe": "C:\\Py\\python.exe", "packaged": True,
                    "package_graph": ["C:\\pkg"], "conda_prefix": "C:\\Py"},
        "expect": {"fix_contains": ["a", "b"], "fix_not_contains": "c"}}, "s.json")
    p = sc.process
    assert (p.exe, p.launcher, p.packaged, p.package_graph, p.conda_prefix) == (
        "C:\\Py\\python.exe", "C:\\v\\Scripts\\python.exe", True, ["C:\\pkg"], "C:\\Py")
    assert sc.expect == {"fix_contains": ["a", "b"], "fix_not_contains": "c"}
    copied = p.copy()
    assert (copied.launcher, copied.packaged, copied.package_graph, copied.conda_prefix) == (
        p.launcher, True, ["C:\\pkg"], "C:\\Py")
    # conda's PATH mode (before 3.11) is refused, not guessed
    with pytest.raises(ScenarioError, match="process.conda_prefix: a conda Python before 3.11"):
        scenario_from_dict({"process": {"exe": "C:\\c\\python.exe", "conda_prefix": "C:\\c", "python": "3.9.7",
                                        "env": {"CONDA_DLL_SEARCH_MODIFICATION_ENABLE": "1"}}}, "s.json")


# --- S11: CTranslate2 4.8.5 and cuBLAS (docs/packages.md §1.5), each fix re-run through the model ----------


def s11(before_gemm=(), files=(), env=None, extra_preloads=()):
    """S11 with `before_gemm` calls made just before the first GEMM, `files` added, the process env
    replaced, and `extra_preloads` (DLLs copied into site-packages\\ctranslate2) preloaded by __init__."""
    doc = tomllib.loads(S11.read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    doc.pop("expect")
    doc["file"] += [f if isinstance(f, dict) else {"path": f} for f in files]
    if env is not None:
        doc["process"]["env"] = env
    calls = doc["call"]
    gemm = calls.pop()
    preloads = [c for c in calls if c["op"] == "ctypes_cdll"]
    for name in extra_preloads:  # __init__.py: ctypes.CDLL for each glob(package_dir/*.dll), in name order
        preloads.append({"op": "ctypes_cdll", "name": SP + "\\ctranslate2\\" + name})
    preloads.sort(key=lambda c: c["name"].lower())
    doc["call"] = [calls[0], *preloads, *[c for c in calls if c["op"] == "python_import"], *before_gemm, gemm]
    results = scenario_from_dict(doc, "s11-variant").run(explain=False)
    return results[-1], results


def test_s11_fails_at_the_first_gemm_not_at_import():
    gemm, results = s11()
    assert all(r.error == 0 for r in results[:-1])  # import ctranslate2 works
    assert (gemm.op, gemm.flags, gemm.error, gemm.leaf.name, gemm.chain) == (
        "LoadLibraryA", 0, 126, "cublas64_12.dll", ["ctranslate2.dll", "cublas64_12.dll"])
    assert gemm.origin == "loaded at run time by ctranslate2.dll"
    # the standard order: PATH is searched, the os.add_dll_directory folder of __init__.py is not
    assert any(d.rule.startswith("PATH[") for d in gemm.tree.search)
    assert not any("AddDllDirectory" in d.rule for d in gemm.tree.search)


def test_s11_os_add_dll_directory_does_not_help():
    gemm, _ = s11(before_gemm=[{"op": "os_add_dll_directory", "path": CUBLAS_BIN}])
    assert (gemm.error, gemm.leaf.name) == (126, "cublas64_12.dll")


def test_s11_path_helps():
    gemm, _ = s11(before_gemm=[{"op": "SetEnvironmentVariable", "name": "PATH",
                                "value": CUBLAS_BIN + ";C:\\Users\\me\\venv\\Scripts;C:\\Python311;C:\\Windows\\System32"}])
    assert (gemm.error, gemm.module_path) == (0, CUBLAS_BIN + "\\cublas64_12.dll")
    assert gemm.tree.children[0].path == CUBLAS_BIN + "\\cublasLt64_12.dll"  # its import, from PATH too


def test_s11_a_preload_by_full_path_helps():
    gemm, results = s11(before_gemm=[{"op": "ctypes_cdll", "name": CUBLAS_BIN + "\\cublas64_12.dll"}])
    pre = results[-2]
    assert (pre.error, pre.flags, pre.tree.children[0].path) == (0, 0x1100, CUBLAS_BIN + "\\cublasLt64_12.dll")
    assert (gemm.error, gemm.module_path, gemm.probes) == (0, CUBLAS_BIN + "\\cublas64_12.dll", [])
    assert gemm.tree.how.startswith("already loaded")


def test_s11_copying_the_dlls_into_the_package_folder_helps():
    pkg = SP + "\\ctranslate2\\"
    gemm, results = s11(files=[{"path": pkg + "cublas64_12.dll", "imports": ["cublasLt64_12.dll"]}, pkg + "cublasLt64_12.dll"],
                        extra_preloads=["cublas64_12.dll", "cublasLt64_12.dll"])
    assert [r.name.rsplit("\\", 1)[-1] for r in results[1:6]] == [
        "ctranslate2.dll", "cublas64_12.dll", "cublasLt64_12.dll", "cudnn64_9.dll", "libiomp5md.dll"]
    assert (gemm.error, gemm.module_path) == (0, pkg + "cublas64_12.dll")


def test_s11_cuda_path_helps_through_set_dll_directory():
    # CUDA_PATH set: the stub calls SetDllDirectoryA(%CUDA_PATH%\bin) before LoadLibraryA (cublas_stub.cc)
    cuda_path = SP + "\\nvidia\\cublas"
    gemm, _ = s11(env={"CUDA_PATH": cuda_path}, before_gemm=[{"op": "SetDllDirectory", "path": cuda_path + "\\bin"}])
    assert (gemm.error, gemm.tree.how) == (0, "SetDllDirectory")
