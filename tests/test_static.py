"""Static mode (`dlltrace deps`, `dlltrace check`, issue 12): rules on small mingw-built PEs, the
classifier, and the real torch 2.5.1, onnxruntime-gpu 1.31.1 and ctranslate2 win_amd64 wheels
(fetched into ~/.cache/dlltrace-downloads/wheels; skipped offline, failed in CI)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

import realwheels
from dlltrace.diagnosis import static
from dlltrace.classify import classify
from dlltrace.worlds import static as worlds_static
from dlltrace.worlds.static import CACHE_FORMAT, FactsCache, read_member, wheel_member_path, zip_members
from winetools import CC32, mingw_compile, require

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "static-v1.json").read_text(encoding="utf-8"))


def dlltrace(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if cache is not None:
        env["DLLTRACE_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


def as_json(run: subprocess.CompletedProcess) -> dict:
    assert run.stdout.startswith("{"), run.stderr[-2000:]
    doc = json.loads(run.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def wheel(key: str) -> Path:
    return realwheels.wheel_or_skip(key)


# --- small PEs built with mingw -----------------------------------------------------------------------
B_C = "__declspec(dllexport) int fb(void) { return 1; }\n__declspec(dllexport) int fb2(void) { return 2; }\n"
B_STALE_C = "__declspec(dllexport) int fb2(void) { return 2; }\n"
C_C = "__declspec(dllexport) int fc(void) { return 3; }\n"
D_C = "__declspec(dllexport) int fd(void) { return 4; }\n"
A_C = "int fb(void); int fc(void); int fd(void);\n__declspec(dllexport) int fa(void) { return fb() + fc() + fd(); }\n"


@pytest.fixture(scope="module")
def pes(tmp_path_factory) -> dict[str, Path]:
    """a.dll imports fb from b.dll, fc from c.dll, fd from d.dll; the built DLLs kept aside in `lib`."""
    require("mingw64")
    d = tmp_path_factory.mktemp("static")
    lib = d / "lib"
    lib.mkdir()
    out: dict[str, Path] = {}
    for name, text in (("b", B_C), ("c", C_C), ("d", D_C)):
        (lib / f"{name}.c").write_text(text)
        out[name] = mingw_compile([lib / f"{name}.c"], lib / f"{name}.dll", dll=True,
                                  extra=[f"-Wl,--out-implib,{lib / f'lib{name}.a'}"])
    (lib / "a.c").write_text(A_C)
    out["a"] = mingw_compile([lib / "a.c", lib / "libb.a", lib / "libc.a", lib / "libd.a"], lib / "a.dll", dll=True)
    (lib / "stale.c").write_text(B_STALE_C)
    (lib / "stale").mkdir()
    out["b_stale"] = mingw_compile([lib / "stale.c"], lib / "stale" / "b.dll", dll=True)
    if CC32 and subprocess.run(["which", CC32], capture_output=True).returncode == 0:
        (lib / "b32").mkdir()
        out["b32"] = mingw_compile([lib / "b.c"], lib / "b32" / "b.dll", dll=True, bits=32)
    out["dir"] = d
    return out


def package(pes: dict[str, Path], name: str, files: dict[str, str]) -> Path:
    """A folder `name` holding copies of built DLLs: {relative path: key in pes}."""
    root = pes["dir"] / name
    for rel, key in files.items():
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(pes[key].read_bytes())
    return root


def deps_json(target: Path, *extra: str, cache: Path | None = None) -> tuple[dict, int]:
    run = dlltrace("deps", str(target), "--json", *extra, cache=cache)
    return as_json(run), run.returncode


def test_rule_every_missing_import_is_reported_not_only_the_first(pes):
    """Windows stops at a.dll's first failing import (b.dll); static mode re-runs the load with a stand-in
    and reports b.dll, c.dll and d.dll, each needed by a.dll, each with the folders searched."""
    root = package(pes, "only_a", {"a.dll": "a"})
    doc, code = deps_json(root / "a.dll")
    assert code == 1
    (load,) = doc["loads"]
    missing = [p["dll"] for p in load["problems"] if p["kind"] == "missing"]
    assert missing == ["b.dll", "c.dll", "d.dll"]
    assert all(p["needed_by"] == ["a.dll"] for p in load["problems"])
    assert load["problems"][0]["searched"][0]["rule"].startswith("DLL_LOAD_DIR")
    kids = {c["name"]: c["status"] for c in load["tree"]["children"]}
    assert kids["b.dll"] == kids["c.dll"] == kids["d.dll"] == "missing"
    assert load["rounds"] == 4  # one load per problem, then the one that gets through


def test_rule_found_dlls_carry_the_rule_that_found_them(pes):
    root = package(pes, "complete", {"a.dll": "a", "b.dll": "b", "c.dll": "c", "d.dll": "d"})
    doc, code = deps_json(root / "a.dll")
    assert code == 0 and doc["ok"]
    (load,) = doc["loads"]
    assert load["context"]["how"] == "ctypes" and load["context"]["flags"] == 0x1100
    kids = {c["name"]: c for c in load["tree"]["children"]}
    assert kids["b.dll"]["how_kind"] == "search" and kids["b.dll"]["how"].startswith("DLL_LOAD_DIR")
    assert kids["b.dll"]["status"] == "loaded" and kids["b.dll"]["class"]["kind"] == "bundled"
    assert kids["KERNEL32.dll"]["class"]["kind"] == "windows"


def test_rule_wrong_machine_copy_is_reported_and_the_rest_still_checked(pes):
    if "b32" not in pes:
        require("mingw32")
    root = package(pes, "wrong_machine", {"a.dll": "a", "b.dll": "b32", "d.dll": "d"})
    doc, code = deps_json(root / "a.dll")
    assert code == 1
    kinds = [(p["kind"], p["dll"]) for p in doc["loads"][0]["problems"]]
    assert kinds == [("wrong_machine", "b.dll"), ("missing", "c.dll")]
    assert doc["loads"][0]["problems"][0]["machine"] == "x86"


def test_rule_missing_export_against_the_copy_that_is_bound(pes):
    root = package(pes, "stale", {"a.dll": "a", "b.dll": "b_stale", "c.dll": "c", "d.dll": "d"})
    doc, code = deps_json(root / "a.dll")
    assert code == 1
    (p,) = doc["loads"][0]["problems"]
    assert (p["kind"], p["dll"], p["exports"], p["needed_by"]) == ("missing_export", "b.dll", ["fb"], ["a.dll"])
    assert p["path"].endswith("stale\\b.dll")


def test_rule_pyd_default_is_the_extension_import_and_python_version_changes_it(pes):
    root = package(pes, "ext", {"m.pyd": "a", "b.dll": "b", "c.dll": "c", "d.dll": "d"})
    doc, _ = deps_json(root / "m.pyd")
    assert doc["loads"][0]["context"]["how"] == "python_import" and doc["loads"][0]["context"]["flags"] == 0x1100
    doc, _ = deps_json(root / "m.pyd", "--python", "3.7")
    assert doc["loads"][0]["context"]["flags"] == 0x8  # LOAD_WITH_ALTERED_SEARCH_PATH before 3.8
    doc, _ = deps_json(root / "m.pyd", "--flags", "0x800")
    assert doc["loads"][0]["context"] == {**doc["loads"][0]["context"], "how": "LoadLibraryExW", "flags": 0x800}


def test_deps_python_option_takes_the_free_threaded_build(pes, tmp_path):
    """--python 3.13t (the Python a cp313t wheel's tag gives) is the free-threaded build: an untagged extension that
    imports python313t.dll finds it already loaded, where the default Python (3.12) has no such DLL; a version
    that is neither X.Y nor X.Yt is still a usage error."""
    (tmp_path / "py.c").write_text("__declspec(dllexport) int PyFoo(void) { return 1; }\n")
    mingw_compile([tmp_path / "py.c"], tmp_path / "python313t.dll", dll=True,
                  extra=[f"-Wl,--out-implib,{tmp_path / 'libpython313t.a'}"])
    (tmp_path / "m.c").write_text("int PyFoo(void);\n__declspec(dllexport) int PyInit_m(void) { return PyFoo(); }\n")
    ext = tmp_path / "ft" / "m.pyd"
    ext.parent.mkdir()
    mingw_compile([tmp_path / "m.c", tmp_path / "libpython313t.a"], ext, dll=True)
    doc, code = deps_json(ext)
    assert code == 1 and [p["dll"] for p in doc["loads"][0]["problems"]] == ["python313t.dll"]
    doc, code = deps_json(ext, "--python", "3.13t")
    assert code == 0 and doc["world"]["python"] == "3.13t", doc["loads"][0]["problems"]
    assert dlltrace("deps", str(ext), "--python", "3.13x").returncode == 2


def test_rule_add_dll_directory_reaches_a_subfolder(pes):
    """b.dll in lib\\ is bundled but not searched (reported with where it is); --add-dll-directory lib finds it."""
    root = package(pes, "sub", {"m.pyd": "a", "lib/b.dll": "b", "lib/c.dll": "c", "lib/d.dll": "d"})
    doc, code = deps_json(root / "m.pyd")
    assert code == 1
    first = doc["loads"][0]["problems"][0]
    assert first["dll"] == "b.dll" and first["class"]["bundled"] and first["elsewhere"][0].endswith("sub\\lib\\b.dll")
    doc, code = deps_json(root, "--only", "m.pyd", "--add-dll-directory", "lib")
    assert code == 0, doc["loads"][0]["problems"]
    b = next(c for c in doc["loads"][0]["tree"]["children"] if c["name"] == "b.dll")
    assert b["how"].startswith("AddDllDirectory") and b["path"].endswith("sub\\lib\\b.dll")


def test_deps_of_a_folder_loads_each_root_not_reached_before(pes):
    root = package(pes, "tree", {"m.pyd": "a", "b.dll": "b", "c.dll": "c", "d.dll": "d"})
    doc, code = deps_json(root)
    assert code == 0
    assert [Path(load["root"].replace("\\", "/")).name for load in doc["loads"]] == ["m.pyd"]  # b, c, d reached


def test_site_packages_tree_and_exe_start(pes):
    """A folder holding *.dist-info is site-packages itself; an .exe is loaded as a process start, its
    own folder the application folder (the standard search order, flags 0)."""
    root = package(pes, "site-packages", {"pkg/m.pyd": "a", "pkg/b.dll": "b", "pkg/c.dll": "c",
                                          "tool/app.exe": "a", "tool/b.dll": "b", "tool/c.dll": "c"})
    (root / "pkg-1.0.dist-info").mkdir()
    doc, code = deps_json(root)
    assert code == 1 and doc["world"]["root"] == "C:\\Python312\\Lib\\site-packages"
    loads = {l["source"].replace("\\", "/").split("site-packages/")[-1]: l for l in doc["loads"]}
    assert loads["pkg/m.pyd"]["context"]["how"] == "python_import"
    assert loads["tool/app.exe"]["context"]["how"] == "start" and loads["tool/app.exe"]["context"]["flags"] == 0
    app_b = next(c for c in loads["tool/app.exe"]["tree"]["children"] if c["name"] == "b.dll")
    assert app_b["how"] == "application folder" and app_b["path"].endswith("tool\\b.dll")
    assert [p["dll"] for p in loads["tool/app.exe"]["problems"]] == ["d.dll"]


def test_markdown_and_text_name_every_missing_dll(pes):
    root = package(pes, "md", {"a.dll": "a"})
    md = dlltrace("deps", str(root / "a.dll"), "--markdown")
    text = dlltrace("deps", str(root / "a.dll"))
    assert md.returncode == text.returncode == 1
    for out in (md.stdout, text.stdout):
        assert all(n in out for n in ("b.dll", "c.dll", "d.dll")) and "MISSING" in out
    assert "| missing | `c.dll` |" in md.stdout


def _patch_linker(path: Path, major: int, minor: int) -> None:
    data = bytearray(path.read_bytes())
    (pe_at,) = struct.unpack_from("<I", data, 0x3C)
    data[pe_at + 24 + 2] = major
    data[pe_at + 24 + 3] = minor
    path.write_bytes(bytes(data))


VERSION_RC = """1 VERSIONINFO
FILEVERSION 14,29,30133,0
PRODUCTVERSION 14,29,30133,0
BEGIN
END
"""


def test_check_gate_vcruntime_older_and_allow(pes, tmp_path):
    """A DLL linked by MSVC 14.40 (linker version patched in) next to a bundled msvcp140.dll 14.29: fail;
    an import of cublas64_12.dll fails until --allow cuda."""
    import shutil

    windres = shutil.which("x86_64-w64-mingw32-windres")
    if windres is None:  # (binutils-mingw-w64, with gcc-mingw-w64-x86-64): a failure in CI, not a skip
        require("mingw64")
        if os.environ.get("CI"):
            pytest.fail("needs x86_64-w64-mingw32-windres (binutils-mingw-w64-x86-64) -- CI must install it")
        pytest.skip("needs x86_64-w64-mingw32-windres")
    d = tmp_path
    (d / "msvcp140.c").write_text("__declspec(dllexport) int f(void) { return 0; }\n")
    (d / "v.rc").write_text(VERSION_RC)
    subprocess.run([windres, str(d / "v.rc"), "-O", "coff", "-o", str(d / "v.o")], check=True)
    pkg = d / "pkg"
    pkg.mkdir()
    mingw_compile([d / "msvcp140.c", d / "v.o"], pkg / "msvcp140.dll", dll=True,
                  extra=[f"-Wl,--out-implib,{d / 'libmsvcp140.a'}"])
    (d / "cublas.c").write_text("__declspec(dllexport) int g(void) { return 0; }\n")
    mingw_compile([d / "cublas.c"], d / "cublas64_12.dll", dll=True, extra=[f"-Wl,--out-implib,{d / 'libcublas.a'}"])
    (d / "user.c").write_text("int f(void); int g(void);\n__declspec(dllexport) int h(void) { return f() + g(); }\n")
    user = mingw_compile([d / "user.c", d / "libmsvcp140.a", d / "libcublas.a"], pkg / "user.dll", dll=True)
    run = dlltrace("check", str(pkg), "--json")
    doc = as_json(run)
    assert run.returncode == 1
    assert [p["kind"] for p in doc["problems"]] == ["not_allowed"]  # GNU ld's linker version is not MSVC's
    assert doc["cuda_majors"] == [12] and doc["vcruntime_bundled"] == "14.29.30133.0"
    _patch_linker(user, 14, 40)
    doc = as_json(run := dlltrace("check", str(pkg), "--json", "--allow", "cuda"))
    assert run.returncode == 1
    assert [p["kind"] for p in doc["problems"]] == ["vcruntime_older"] and doc["vcruntime_required"] == "14.40"
    _patch_linker(user, 14, 29)
    run = dlltrace("check", str(pkg), "--allow", "cuda")
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1].startswith("PASS")


def test_check_bad_arguments_are_one_line_exit_2(tmp_path):
    for args in (["check", str(tmp_path / "nope.whl")], ["check", str(tmp_path), "--allow", "cuda,bogus"],
                 ["deps", str(tmp_path / "x.txt")]):
        if args[1].endswith(".txt"):
            (tmp_path / "x.txt").write_text("x")
        run = dlltrace(*args)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stderr.startswith("dlltrace: "), run.stderr
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    run = dlltrace("check", str(tmp_path / "bad.whl"))
    assert run.returncode == 2 and "not a readable wheel" in run.stderr


# --- the classifier --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, kind, label", [
    ("cublasLt64_13.dll", "cuda", "CUDA 13 (cublasLt)"),
    ("cudart64_110.dll", "cuda", "CUDA 11 (cudart)"),
    ("cudart64_12.dll", "cuda", "CUDA 12 (cudart)"),
    ("cufft64_11.dll", "cuda", "CUDA 12 (cufft)"),  # cuFFT 11 ships with CUDA 12
    ("cusolver64_11.dll", "cuda", "CUDA 11/12 (cusolver)"),
    ("nvrtc64_120_0.dll", "cuda", "CUDA 12 (nvrtc)"),
    ("cudnn_graph64_9.dll", "cudnn", "cuDNN 9"),
    ("MSVCP140.dll", "vcruntime", "VC++ runtime 14"),
    ("vcruntime140_1.dll", "vcruntime", "VC++ runtime 14"),
    ("msvcp140_clr0400.dll", "other", "external"),  # .NET's private copy, not the VC++ runtime (Windows 11 list only)
    ("dbghelp.dll", "windows", "Windows"),
    ("python311.dll", "python", "Python 3.11"),
    ("python313t.dll", "python", "Python 3.13t"),  # the free-threaded build
    ("python3.dll", "python", "Python 3"),
    ("libiomp5md.dll", "mkl_openmp", "MKL/OpenMP"),
    ("mkl_core.2.dll", "mkl_openmp", "MKL/OpenMP"),
    ("nvcuda.dll", "nvidia_driver", "NVIDIA driver"),
    ("KERNEL32.dll", "windows", "Windows"),
    ("api-ms-win-crt-heap-l1-1-0.dll", "apiset", "API set"),
    ("nvinfer_10.dll", "tensorrt", "TensorRT 10"),
    ("c10.dll", "other", "external"),
])
def test_classify(name, kind, label):
    c = classify(name)
    assert (c.kind, c.label) == (kind, label)


def test_classify_bundled_keeps_what_it_is():
    assert classify("c10.dll", bundled=True).kind == "bundled"
    c = classify("msvcp140.dll", bundled=True, file_version="14.40.33810.0")
    assert (c.kind, c.vc_version, c.label) == ("vcruntime", "14.40.33810.0", "VC++ runtime 14.40.33810.0, bundled")


def test_wheel_data_members_go_to_their_scheme():
    assert wheel_member_path("x-1.data/data/Library/bin/a.dll", "3.11") == "C:\\Python311\\Library\\bin\\a.dll"
    assert wheel_member_path("torch/lib/c10.dll", "3.11") == "C:\\Python311\\Lib\\site-packages\\torch\\lib\\c10.dll"
    assert wheel_member_path("x-1.data/platlib/x/a.dll", "3.11") == "C:\\Python311\\Lib\\site-packages\\x\\a.dll"
    # (headers: not site-packages, where a DLL put there would pass for one beside the package's extensions)
    assert wheel_member_path("x-1.data/headers/a.dll", "3.11") == "C:\\Python311\\Include\\x\\a.dll"


def test_linux_wheel_data_members_go_to_their_scheme():
    from dlltrace.diagnosis.static_elf import site_path

    assert site_path("x-1.data/platlib/x/a.so") == site_path("x/a.so") and site_path("x/a.so").endswith("/site-packages/x/a.so")
    assert site_path("x-1.data/data/lib/a.so") == "/venv/lib/a.so"
    assert site_path("x-1.data/headers/a.so") == "/venv/include/site/python3/x/a.so"


# --- the real wheels --------------------------------------------------------------------------------------
def test_onnxruntime_gpu_check_classifies_cuda_13_and_the_vc_runtime(tmp_path):
    w = wheel("onnxruntime")
    run = dlltrace("check", str(w), "--json")
    doc = as_json(run)
    assert run.returncode == 1 and not doc["ok"]
    rows = {r["dll"].lower(): r for r in doc["dlls"]}
    assert rows["cublaslt64_13.dll"]["class"]["kind"] == "cuda"
    assert rows["cublaslt64_13.dll"]["class"]["cuda_majors"] == [13]
    # (the VC++ runtime is a system requirement in the default world, said with the version it needs)
    assert rows["msvcp140.dll"]["class"]["kind"] == "vcruntime" and rows["msvcp140.dll"]["status"] == "system"
    assert rows["onnxruntime_providers_shared.dll"]["status"] == "bundled"
    assert doc["cuda_majors"] == [13] and doc["vcruntime_required"] == "14.44" and doc["world"]["vc_runtime"]
    strict = as_json(dlltrace("check", str(w), "--json", "--no-vc-runtime"))
    assert {r["dll"].lower(): r for r in strict["dlls"]}["msvcp140.dll"]["status"] == "not_allowed"
    run = dlltrace("check", str(w), "--json", "--allow", "cuda,cudnn,tensorrt")
    assert run.returncode == 0 and as_json(run)["ok"]


def test_onnxruntime_gpu_deps_of_the_cuda_provider_lists_every_cuda_dll_missing():
    w = wheel("onnxruntime")
    run = dlltrace("deps", str(w), "--only", "onnxruntime_providers_cuda.dll", "--json")
    doc = as_json(run)
    assert run.returncode == 1
    (load,) = doc["loads"]
    assert load["source"] == "onnxruntime/capi/onnxruntime_providers_cuda.dll"
    missing = {p["dll"].lower(): p for p in load["problems"] if p["kind"] == "missing"}
    f = read_facts(w, "onnxruntime/capi/onnxruntime_providers_cuda.dll")
    cuda_imports = {i.dll.lower() for i in f.imports if classify(i.dll).kind == "cuda"}
    assert cuda_imports == {"cublaslt64_13.dll", "cublas64_13.dll"}
    assert cuda_imports <= set(missing)
    assert all(missing[n]["class"]["cuda_majors"] == [13] for n in cuda_imports)
    assert not {"msvcp140.dll", "msvcp140_atomic_wait.dll"} & set(missing)  # (the VC++ runtime: in System32)
    strict = as_json(dlltrace("deps", str(w), "--only", "onnxruntime_providers_cuda.dll", "--json", "--no-vc-runtime"))
    assert {"msvcp140.dll", "msvcp140_atomic_wait.dll"} <= {p["dll"].lower() for p in strict["loads"][0]["problems"]}


def read_facts(w: Path, member: str):
    from dlltrace.pe import pe_facts_from_bytes

    with zipfile.ZipFile(w) as z:
        return pe_facts_from_bytes(z.read(member))


def test_torch_deps_of_torch_python_resolves_its_closure_in_torch_lib():
    w = wheel("torch")
    run = dlltrace("deps", str(w), "--only", "torch/lib/torch_python.dll", "--json", "--no-vc-runtime")
    doc = as_json(run)
    (load,) = doc["loads"]
    assert {p["dll"].lower() for p in load["problems"]} == {"msvcp140.dll"}  # not in a vanilla Windows
    assert run.returncode == 1
    assert dlltrace("deps", str(w), "--only", "torch/lib/torch_python.dll").returncode == 0  # (with the runtime)
    kids = {c["name"]: c for c in load["tree"]["children"]}
    assert kids["torch_cpu.dll"]["status"] in ("loaded", "already_loaded")
    closure = set()

    def walk(n):
        if n["path"]:
            closure.add(n["path"].rsplit("\\", 1)[-1].lower())
        for c in n["children"]:
            walk(c)
    walk(load["tree"])
    assert {"torch_cpu.dll", "c10.dll", "fbgemm.dll", "asmjit.dll", "libiomp5md.dll", "uv.dll", "shm.dll"} <= closure
    torch_cpu = next(c for c in load["tree"]["children"] if c["name"] == "torch_cpu.dll" and c["how_kind"] == "search"
                     ) if kids["torch_cpu.dll"]["how_kind"] == "search" else None
    assert torch_cpu is None or torch_cpu["how"].startswith("DLL_LOAD_DIR")


# Healthy real wheels, each loaded as its package makes its DLLs reachable (pkgloaders.py): numpy, scipy and
# shapely through delvewheel's patch (<name>.libs), pywin32 through its .pth bootstrap (pywin32_system32) and
# its service host copied next to python311.dll, torch through _load_dll_libraries (torch\lib); opencv's DLLs
# sit next to its extension. (Before, deps called 5 of these 6 broken.)
HEALTHY = {"numpy": "numpy's delvewheel patch", "scipy": "scipy's delvewheel patch",
           "shapely": "shapely's delvewheel patch", "pywin32": "pywin32's .pth bootstrap",
           "torch": "torch's _load_dll_libraries", "opencv": None,
           # (before data/loaders.json pygame_dll_directory: 6 of 45 loads failed, pygame/_sdl2's on SDL2.dll)
           "pygame": "pygame's __init__.py"}


@pytest.mark.parametrize("key", list(HEALTHY))
def test_deps_and_check_pass_a_healthy_wheel(key):
    w = wheel(key)
    run = dlltrace("deps", str(w))
    assert run.returncode == 0 and "would fail" not in run.stdout and "resolved, no problem" in run.stdout, \
        run.stdout[-3000:]
    if HEALTHY[key]:
        assert f"after {HEALTHY[key]}" in run.stdout  # (the load context names the package's own loader)
    assert "with the VC++ 2015-2022 runtime" in run.stdout.splitlines()[1]
    check = dlltrace("check", str(w), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout


def test_rule_package_loaders():
    """What each real wheel's loader adds, read from its own files (pkgloaders.py), and which roots it covers."""
    from dlltrace.pkgloaders import rule_delvewheel, rule_pywin32_bootstrap, rule_pywin32_service

    numpy = static.open_target(str(wheel("numpy")))
    (lo,) = numpy.loaders
    assert (lo.package, lo.how, lo.adds) == ("numpy", "delvewheel", ("numpy.libs",))
    assert lo.covers("numpy/_core/_multiarray_umath.cp311-win_amd64.pyd") and not lo.covers("scipy/x.pyd")
    eff = static.rule_package_loader_effects(numpy, numpy.root + "\\numpy\\linalg\\_umath_linalg.cp311-win_amd64.pyd")
    assert list(eff.dirs) == [numpy.root + "\\numpy.libs"] and list(eff.words) == ["numpy's delvewheel patch"]
    pywin32 = static.open_target(str(wheel("pywin32")))
    assert {x.how for x in pywin32.loaders} == {"pywin32_bootstrap", "pywin32_service"}
    assert pywin32.placed == ("C:\\Python311\\pythonservice.exe", "C:\\Python311\\pywintypes311.dll")
    assert not any(r.lower().endswith("win32\\pythonservice.exe") for r in static.roots_of(pywin32))
    torch = static.open_target(str(wheel("torch")))
    (lo,) = torch.loaders
    assert lo.how == "torch" and lo.covers("functorch/_C.cp311-win_amd64.pyd") and lo.adds == ("torch/lib",)
    # the forms the rules read, and what they do not take
    older = "def _delvewheel_init_patch_0_0_22():\n    libs_dir = os.path.join(os.path.dirname(__file__), os.pardir, 'x.libs')"
    assert rule_delvewheel("x", older).adds == ("x.libs",)
    assert rule_delvewheel("x", "import os\nos.add_dll_directory(os.path.join(os.pardir, 'x.libs'))") is None
    assert rule_pywin32_bootstrap("pywin32.pth", "win32\n", "os.add_dll_directory(pywin32_system32)") is None
    assert rule_pywin32_service("def LocatePythonServiceExe(exe=None):\n    return exe") is None


def test_torch_check_passes_with_the_vc_runtime_allowed():
    w = wheel("torch")
    run = dlltrace("check", str(w), "--json", "--allow", "vcruntime")
    doc = as_json(run)
    assert run.returncode == 0 and doc["ok"], doc["problems"]
    rows = {r["dll"].lower(): r for r in doc["dlls"]}
    assert rows["torch_cpu.dll"]["status"] == "bundled" and rows["libiomp5md.dll"]["class"]["kind"] == "mkl_openmp"
    assert doc["cuda_majors"] == []  # the PyPI torch 2.5.1 Windows wheel is the CPU build
    assert len(doc["files"]) == 16


def test_check_the_vc_runtime_python_ships_is_python_the_rest_is_not():
    """vcruntime140.dll and vcruntime140_1.dll come with every python.org CPython (deps finds them next to
    python.exe): a Python wheel's import of them is `python`, never a failure; msvcp140.dll is not shipped."""
    doc = as_json(dlltrace("check", str(wheel("torch")), "--json", "--no-vc-runtime"))
    rows = {r["dll"].lower(): r for r in doc["dlls"]}
    assert rows["vcruntime140.dll"]["status"] == rows["vcruntime140_1.dll"]["status"] == "python"
    assert rows["msvcp140.dll"]["status"] == "not_allowed"
    assert [p["dll"].lower() for p in doc["problems"] if p["kind"] == "not_allowed"] == ["msvcp140.dll"]
    assert not [p for p in doc["problems"] if p["kind"] == "python_mismatch"]


def test_check_a_folder_of_wheels_checks_each_and_an_empty_folder_is_a_usage_error(tmp_path):
    """`dlltrace check dist/`: every wheel in it, so a failing wheel fails the gate; a folder with nothing
    to check is exit 2 (a PASS of nothing would let anything through)."""
    dist = tmp_path / "dist"
    dist.mkdir()
    w = wheel("ctranslate2")
    (dist / w.name).symlink_to(w)
    run = dlltrace("check", str(dist), "--json", "--no-vc-runtime")
    assert run.returncode == 1, run.stderr
    assert as_json(run)["target"].endswith(w.name)
    (tmp_path / "empty").mkdir()
    for cmd in ("check", "deps"):
        run = dlltrace(cmd, str(tmp_path / "empty"))
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and "nothing to" in run.stderr, run.stderr


def test_a_damaged_wheel_member_is_one_line_saying_the_wheel_is_damaged(tmp_path):
    """A member whose bytes are damaged (bad CRC, cut short): one line naming the wheel and the member,
    exit 2, for deps and check alike (it was reported as "access denied")."""
    w = wheel("cudart12")
    bad = tmp_path / w.name
    data = bytearray(w.read_bytes())
    with zipfile.ZipFile(w) as z:
        info = next(i for i in z.infolist() if i.filename.lower().endswith("cudart64_12.dll"))
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 5000
    for i in range(start, start + 2000):
        data[i] ^= 0x5A
    bad.write_bytes(bytes(data))
    for cmd in ("deps", "check"):
        run = dlltrace(cmd, str(bad), "--no-cache")
        assert run.returncode == 2, (cmd, run.stdout[-500:], run.stderr)
        assert run.stderr.count("\n") == 1 and "cudart64_12.dll cannot be read" in run.stderr, run.stderr
        assert "the wheel is damaged" in run.stderr and "access denied" not in run.stdout + run.stderr


def test_ctranslate2_deps_and_check():
    w = wheel("ctranslate2")
    run = dlltrace("deps", str(w), "--only", "_ext.cp311-win_amd64.pyd", "--json", "--no-vc-runtime")
    doc = as_json(run)
    kids = {c["name"]: c for c in doc["loads"][0]["tree"]["children"]}
    # (ctranslate2's __init__.py loads every DLL of its folder by full path before the extension: data/loaders.json)
    assert kids["ctranslate2.dll"]["how"].startswith("already loaded"), kids["ctranslate2.dll"]
    assert doc["loads"][0]["context"]["after"] == ["ctranslate2's __init__.py"]
    assert kids["python311.dll"]["status"] == "already_loaded"
    assert {p["dll"].lower() for p in doc["loads"][0]["problems"]} == {"msvcp140.dll"}
    run = dlltrace("check", str(w), "--allow", "vcruntime", "--json")
    doc = as_json(run)
    assert run.returncode == 0
    rows = {r["dll"].lower(): r for r in doc["dlls"]}
    assert rows["libiomp5md.dll"]["status"] == "bundled" and rows["python311.dll"]["status"] == "python"


def test_facts_cache_gives_the_facts_the_zip_member_gives(tmp_path):
    w = wheel("torch")
    cold = static.open_target(str(w), use_cache=False)
    cache_dir = tmp_path / "cache"
    os.environ["DLLTRACE_CACHE"] = str(cache_dir)
    try:
        for _ in range(2):  # the first run writes the cache, the second reads it
            warm = static.open_target(str(w))
            path = next(f.path for f in warm.files if f.path.lower().endswith("\\lib\\c10.dll"))
            assert warm.world.file(path) == cold.world.file(path)
        assert len(list(cache_dir.rglob("*.json"))) == 1
    finally:
        del os.environ["DLLTRACE_CACHE"]
    info = zipfile.ZipFile(w).getinfo("torch/lib/c10.dll")
    (member,) = [m for m in zip_members(w) if m.filename == "torch/lib/c10.dll"]
    assert (member.CRC, member.file_size, member.compress_size) == (info.CRC, info.file_size, info.compress_size)
    assert FactsCache.key(member).startswith(f"v{CACHE_FORMAT}-{info.CRC:08x}-{info.file_size}-")


def test_zip_reader_lists_and_reads_members_as_zipfile_does(tmp_path):
    """The central-directory reader against zipfile on a zip with stored, deflated and zip64-sized members."""
    z = tmp_path / "t.whl"
    with zipfile.ZipFile(z, "w") as out:
        out.writestr("pkg/a.dll", b"MZ" + bytes(5000), compress_type=zipfile.ZIP_DEFLATED)
        out.writestr("pkg/b.PYD", b"MZ stored", compress_type=zipfile.ZIP_STORED)
        out.writestr("pkg/readme.txt", b"text")
        with out.open(zipfile.ZipInfo("pkg/c.exe"), "w", force_zip64=True) as f:
            f.write(b"MZ zip64")
    members = zip_members(z)
    assert [m.filename for m in members] == ["pkg/a.dll", "pkg/b.PYD", "pkg/c.exe"]
    with zipfile.ZipFile(z) as ref:
        for m in members:
            assert read_member(z, m) == ref.read(m.filename)
    torch = wheel("torch")
    with zipfile.ZipFile(torch) as ref:
        names = [i.filename for i in ref.infolist() if i.filename.lower().endswith((".dll", ".pyd", ".exe"))]
    assert [m.filename for m in zip_members(torch)] == names


# --- a member read as it inflates (worlds/static.py MemberView) ----------------------------------------------
def test_member_view_reads_as_the_members_bytes(tmp_path, monkeypatch):
    """Slices and finds of a MemberView are those of the member's bytes, in any order: ahead of the main pass,
    in a chunk still kept, behind it in one let go of (inflated again from a checkpoint, by a side pass that
    goes on or starts again), across chunks, past the end; stored and deflated; then finish() checks the CRC."""
    import random

    monkeypatch.setattr(worlds_static, "VIEW_CHUNK", 4096)
    monkeypatch.setattr(worlds_static, "VIEW_CACHE", 3)
    monkeypatch.setattr(worlds_static, "VIEW_CHECKPOINT", 2)
    monkeypatch.setattr(worlds_static, "VIEW_INPUT", 1000)
    rnd = random.Random(7)
    data = b"MZ" + b"".join(rnd.choice([b"\0" * 50, bytes(rnd.randrange(256) for _ in range(40)), b"name\0"])
                            for _ in range(4000))
    z = tmp_path / "v.whl"
    with zipfile.ZipFile(z, "w") as out:
        out.writestr("pkg/d.dll", data, compress_type=zipfile.ZIP_DEFLATED)
        out.writestr("pkg/s.dll", data, compress_type=zipfile.ZIP_STORED)
    for m in zip_members(z):
        view = worlds_static.MemberView(z, m)
        assert len(view) == len(data)
        for _ in range(400):
            a = rnd.randrange(len(data) + 100)
            b = a + rnd.choice([1, 2, 8, 40, 5000, 20000])
            assert view[a:b] == data[a:b], (m.filename, a, b)
            assert view.find(b"\0", a, b) == data.find(b"\0", a, b)
            assert view.find(b"name", a, b) == data.find(b"name", a, b)
        assert view[5] == data[5] and view[-1] == data[-1] and view[:2] == b"MZ"
        assert len(view.chunks) <= 3
        view.finish()
        view.close()


def test_member_pe_facts_are_the_facts_of_the_whole_member():
    """Every PE member of the torch wheel (torch_cpu.dll: 237 MiB, 58 481 exports), read as it inflates, gives
    the facts of its bytes read whole."""
    from dlltrace.pe import pe_facts_from_bytes

    w = wheel("torch")
    for m in zip_members(w):
        assert worlds_static.member_pe_facts(w, m) == pe_facts_from_bytes(read_member(w, m, magic=b"MZ")), m.filename


@pytest.fixture(scope="module")
def numpy_site(tmp_path_factory) -> Path:
    """The real numpy 2.1.3 win_amd64 wheel installed as pip installs it: its files and numpy-2.1.3.dist-info (with its
    RECORD) in a site-packages folder."""
    site = tmp_path_factory.mktemp("installed") / "site-packages"
    with zipfile.ZipFile(wheel("numpy")) as z:
        z.extractall(site)
    return site


def openblas(site: Path) -> Path:
    (dll,) = (site / "numpy.libs").glob("libscipy_openblas*.dll")
    return dll


def test_rule_record_of_installed_files(numpy_site, tmp_path):
    """An installed folder is set against its RECORD (issue 23 item 1): numpy's OpenBLAS deleted (as an antivirus
    quarantines it) is numpy's own file, gone; cut short, it is not the file numpy installed (its sha256 differs from
    RECORD's); as installed, nothing is said. Each says to reinstall numpy, in text and JSON, for deps and check."""
    import shutil

    site = tmp_path / "site-packages"
    shutil.copytree(numpy_site, site)
    healthy = dlltrace("deps", str(site), "--python", "3.11")
    assert healthy.returncode == 0 and "RECORD" not in healthy.stdout, healthy.stdout[-2000:]
    dll = openblas(site)
    record_path = f"numpy.libs/{dll.name}"
    data = dll.read_bytes()
    dll.unlink()
    gone = dlltrace("deps", str(site), "--python", "3.11")
    assert gone.returncode == 1, gone.stdout[-2000:]
    assert (f"numpy 2.1.3's RECORD lists {record_path}, and it is gone: reinstall numpy "
            "(pip install --force-reinstall --no-deps numpy==2.1.3)") in gone.stdout, gone.stdout[-3000:]
    doc = as_json(dlltrace("deps", str(site), "--python", "3.11", "--json"))
    owners = [p["owner"] for a in doc["loads"] for p in a["problems"] if p["kind"] == "missing"]
    assert owners and all(o == {"dist": "numpy", "version": "2.1.3", "record_path": record_path, "record": "missing",
                                "python": None} for o in owners), owners  # (python: no interpreter beside this site)
    dll.write_bytes(data[:4096])  # (its headers, cut short: not a PE any more)
    cut = dlltrace("deps", str(site), "--python", "3.11", "--json")
    problems = [p for a in as_json(cut)["loads"] for p in a["problems"] if p["dll"] == dll.name]
    assert problems and all(p["owner"]["record"] == "differs" for p in problems), problems
    text = dlltrace("deps", str(site), "--python", "3.11").stdout
    assert ("it is not the file numpy 2.1.3 installed (it differs from its RECORD's digest): reinstall numpy "
            "(pip install --force-reinstall --no-deps numpy==2.1.3)") in text, text[-3000:]
    check = as_json(dlltrace("check", str(site), "--python", "3.11", "--json"))
    bad = [p for p in check["problems"] if p["dll"] == dll.name]
    assert bad and bad[0]["kind"] == "not_pe" and bad[0]["owner"]["record"] == "differs", check["problems"]
    # and in words: check's text and its GitHub annotations, deps' Markdown (render/static.py record_words)
    said = "it is not the file numpy 2.1.3 installed (it differs from its RECORD's digest): reinstall numpy"
    for argv in (("check", str(site)), ("check", str(site), "--format", "github"), ("deps", str(site), "--markdown")):
        out = dlltrace(*argv, "--python", "3.11").stdout
        assert said in out, (argv, out[-2000:])
    # the same bytes written back: as installed, the owner said, nothing wrong with the file
    dll.write_bytes(data)
    target = static.open_target(str(site), python="3.11")
    p = static.rule_record_of_installed_files(target, static.Problem("wrong_machine", dll.name, path=str(
        target.root + "\\numpy.libs\\" + dll.name)))
    assert (p.owner, p.owner_version, p.record, p.record_path) == ("numpy", "2.1.3", "", record_path)
    assert "RECORD" not in p.detail


def test_rule_installed_files_are_not_wheels(numpy_site, tmp_path):
    """numpy 2.1.3's real wheel ships an empty numpy-2.1.3-cp311-cp311-win_amd64.whl at its top (its RECORD lists it),
    which pip installs into site-packages: `check` of that site-packages checks its DLLs, not that file as a wheel; a
    .whl no RECORD lists is still a wheel to check, and an empty one a usage error."""
    installed = numpy_site / "numpy-2.1.3-cp311-cp311-win_amd64.whl"
    assert installed.exists() and installed.stat().st_size == 0
    assert static.rule_installed_files_are_not_wheels(str(numpy_site)) == {installed.name}
    assert static.check_targets(str(numpy_site)) == [str(numpy_site)]
    run = dlltrace("check", str(numpy_site), "--python", "3.11", "-q")
    assert run.returncode == 0 and run.stdout.startswith("PASS "), (run.stdout[-2000:], run.stderr[-2000:])
    stray = tmp_path / "dist"
    stray.mkdir()
    (stray / "x-1.0-cp311-cp311-win_amd64.whl").write_bytes(b"")
    assert static.check_targets(str(stray)) == [str(stray / "x-1.0-cp311-cp311-win_amd64.whl")]
    bad = dlltrace("check", str(stray))
    assert bad.returncode == 2 and "not a readable wheel" in bad.stderr, bad.stderr


def test_rule_extension_tags(numpy_site, tmp_path):
    """An installed folder has no wheel name to read its Python from: its extensions' names say it
    (`.cp311-win_amd64.pyd`). deps of the healthy numpy 2.1.3 install, given no --python, models Python 3.11 and
    finds nothing wrong (as Python 3.12, the default, every extension missed python311.dll); a single .pyd its own
    tag; a win32 extension an x86 target; a folder with no tagged extension the default."""
    assert static.rule_extension_tags(str(numpy_site)) == ("3.11", "x64")
    run = dlltrace("deps", str(numpy_site))
    assert run.returncode == 0 and "Python 3.11" in run.stdout and "would fail" not in run.stdout, run.stdout[-2000:]
    pyd = next((numpy_site / "numpy" / "_core").glob("_multiarray_umath.*.pyd"))
    assert static.open_target(str(pyd)).python == "3.11"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "_x.cp39-win32.pyd").write_bytes(b"MZ")
    (tmp_path / "pkg" / "helper.dll").write_bytes(b"MZ")
    target = static.open_target(str(tmp_path / "pkg"))
    assert (target.python, target.machine) == ("3.9", "x86")
    assert static.rule_extension_tags(str(tmp_path / "pkg"), str(tmp_path / "pkg" / "helper.dll")) == ("3.9", "x86")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.dll").write_bytes(b"MZ")
    assert static.open_target(str(tmp_path / "plain")).python == static.DEFAULT_PYTHON
    (tmp_path / "ft").mkdir()  # the free-threaded build's extensions (cp313t): Python "3.13t", python313t.dll
    (tmp_path / "ft" / "_x.cp313t-win_amd64.pyd").write_bytes(b"MZ")
    assert static.rule_extension_tags(str(tmp_path / "ft")) == ("3.13t", "x64")
    assert static.wheel_python("numpy-2.1.3-cp313-cp313t-win_amd64.whl") == ("3.13t", "cp313t", "x64")
    assert static.wheel_python("numpy-2.1.3-cp313-cp313-win_amd64.whl") == ("3.13", "cp313", "x64")


def test_rule_vc_runtime_of_its_package(tmp_path):
    """An installed site-packages holds many packages, and Windows binds an import of msvcp140.dll to the module of
    that name loaded first, whichever folder it came from: a file that imports a VC++ runtime DLL by name is held to
    the oldest copy of that name installed there. lightgbm 4.5.0's lib_lightgbm.dll (MSVC 14.29) imports
    msvcp140.dll, and pyarrow 18.0.0 installs msvcp140.dll 14.28: lightgbm binds to it if pyarrow is imported first.
    h5py 3.12.1's extensions (MSVC 14.41) import only vcruntime140.dll, which python.exe's own copy serves: not held
    to pyarrow's (before, all 26 of its files were "vcruntime older" there)."""
    site = tmp_path / "site-packages"
    for key in ("pyarrow", "lightgbm", "h5py"):
        with zipfile.ZipFile(wheel(key)) as z:
            z.extractall(site)
    doc = as_json(dlltrace("check", str(site), "--json"))
    older = [p for p in doc["problems"] if p["kind"] == "vcruntime_older"]
    assert {p["needed_by"][0].split("\\")[0] for p in older} == {"lightgbm"}, older[:3]
    (lgbm,) = older
    assert lgbm["dll"] == "msvcp140.dll"
    assert ("pyarrow\\msvcp140.dll (14.28.29334.0), the oldest msvcp140.dll installed here, is the one it binds to "
            "when pyarrow is imported first") in lgbm["detail"], lgbm["detail"]
    # a wheel is one package: its own copy, for every file that uses the runtime (as before)
    alone = as_json(dlltrace("check", str(wheel("pyarrow")), "--json"))
    assert alone["vcruntime_bundled"] == "14.28.29334.0"

def test_rule_vc_runtime_of_its_package_wheel(tmp_path):
    """A wheel is one package, and its bundled VC++ runtime holds the files that import it by name: scikit-learn
    1.5.2 bundles msvcp140.dll and vcomp140.dll (14.40.33810.0) in sklearn\\.libs, and its extensions are MSVC
    14.41. _loss.pyd imports vcomp140.dll (held to the bundled copy: vcruntime older); _check_build.pyd imports only
    vcruntime140.dll, which python.exe's own copy serves (held to none). Before, all 67 were "vcruntime older"."""
    doc = as_json(dlltrace("check", str(wheel("sklearn")), "--json"))
    older = {p["needed_by"][0] for p in doc["problems"] if p["kind"] == "vcruntime_older"}
    imports: dict = {}
    for row in doc["dlls"]:
        for f in row["needed_by"]:
            imports.setdefault(f, set()).add(row["dll"].lower())
    assert "sklearn\\_loss\\_loss.cp311-win_amd64.pyd" in older, sorted(older)[:5]
    assert "sklearn\\__check_build\\_check_build.cp311-win_amd64.pyd" not in older
    assert older and all(imports[f] & {"msvcp140.dll", "vcomp140.dll"} for f in older), \
        [f for f in older if not imports[f] & {"msvcp140.dll", "vcomp140.dll"}]
    assert len(older) == 27 and doc["vcruntime_bundled"] == "14.40.33810.0", len(older)


def test_rule_record_of_installed_files_hostile_records(numpy_site, tmp_path):
    """A RECORD is a stranger's file: it is read as CSV (a quoted path with a comma, a doubled quote), its paths with
    `\\` too, and never makes deps read what is not a regular file of the folder (a link to /dev/zero, a FIFO, a
    link out of the folder), nor use a digest of no fixed size (shake_128); a missing DLL is blamed only on a
    distribution whose file the load would have found."""
    import shutil

    from dlltrace.worlds import static as ws

    rows = ws.record_rows('"pkg/a,b.dll",sha256=x,1\n"pkg/q""u.dll",,\npkg\\w.dll,,\n')
    assert [r[0] for r in rows] == ["pkg/a,b.dll", 'pkg/q"u.dll', "pkg\\w.dll"]
    assert [ws.record_relative_path(p) for p in ("pkg\\w.dll", "/x.dll", "C:/x.dll", "\\\\srv\\x.dll",
                                                 "a/../../x.dll", "./a//b.dll")] == ["pkg/w.dll", None, None, None, None,
                                                                                     "a/b.dll"]
    site = tmp_path / "site-packages"
    shutil.copytree(numpy_site, site)
    evil = site / "evil"
    evil.mkdir()
    (evil / "zero.dll").symlink_to("/dev/zero")
    os.mkfifo(evil / "fifo.dll")
    outside = tmp_path / "outside.dll"
    outside.write_bytes(b"MZ" + b"\0" * 100)
    (evil / "out.dll").symlink_to(outside)
    (evil / "shake.dll").write_bytes(b"MZ" + b"\0" * 100)
    info = site / "evil-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("evil/zero.dll,sha256=AAAA,10\nevil/fifo.dll,sha256=AAAA,10\n"
                                 "evil/out.dll,sha256=AAAA,102\nevil/shake.dll,shake_128=AAAA,102\n"
                                 f"numpy.libs/{openblas(site).name},sha256=AAAA,1\n")
    entries = {e.path: e for e in ws.folder_records(str(site), str(evil))}
    assert set(entries) == {"evil/fifo.dll", "evil/shake.dll"}  # (the links out of the folder: not its files)
    zero = ws.RecordEntry("evil", "1.0", "evil/zero.dll", str(evil / "zero.dll"), "sha256=AAAA", 10)
    assert [ws.record_digest_matches(e) for e in (zero, entries["evil/fifo.dll"], entries["evil/shake.dll"])] \
        == [None, None, None]  # (a device, a FIFO: not read; shake_128: no fixed digest size)
    run = subprocess.run([sys.executable, "-m", "dlltrace", "check", str(site), "--json"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, cwd=ROOT, timeout=120)
    assert run.returncode == 1 and run.stdout.startswith("{"), run.stderr[-2000:]  # (no hang, no traceback)
    files = {f["path"] for f in json.loads(run.stdout)["files"]}
    assert "evil\\shake.dll" in files and "evil\\fifo.dll" not in files  # (a FIFO is not read: it never ends)
    (evil / "fifo.dll").unlink()
    # numpy's OpenBLAS gone: numpy's file (numpy.libs is searched: numpy's delvewheel patch), not evil's
    openblas(site).unlink()
    doc = as_json(dlltrace("deps", str(site), "--only", "numpy/_core/_multiarray_umath.cp311-win_amd64.pyd", "--json"))
    owners = {p["owner"]["dist"] for a in doc["loads"] for p in a["problems"] if p.get("owner")}
    assert owners == {"numpy"}, owners
    # a DLL gone that only another package's RECORD lists, in a folder the load does not search: not its owner
    (evil / "zero.dll").unlink()
    target = static.open_target(str(site))
    p = static.rule_record_of_installed_files(target, static.Problem(
        "missing", "zero.dll", ["_multiarray_umath.cp311-win_amd64.pyd"],
        searched=[static.SearchDir(target.root + "\\numpy\\_core", "DLL_LOAD_DIR")]))
    assert p.owner == "" and p.record == ""
    p = static.rule_record_of_installed_files(target, static.Problem(
        "missing", "zero.dll", ["_multiarray_umath.cp311-win_amd64.pyd"],
        searched=[static.SearchDir(target.root + "\\evil", "PATH[1]")]))
    assert (p.owner, p.record, p.record_path) == ("evil", "missing", "evil/zero.dll")


HOSTILE_NAME = "\x1b]0;PWNED\x07\x1b[2J\u202eevil\n✓ loads.dll"


@pytest.mark.parametrize("args", [("deps", "{dll}"), ("check", "{folder}"), ("check", "--format", "github", "{folder}"),
                                  ("check", "--color", "always", "{folder}"), ("deps", "--color", "always", "{dll}")])
def test_a_dll_name_with_escape_sequences_is_shown_not_obeyed(tmp_path, args):
    """deps and check of a DLL whose import table names an ESC sequence (an OSC that retitles the terminal, a
    clear-screen), a bidi override and a newline that would fake a "✓ loads" line: each shown as its escape in the
    text (in colour too) and in GitHub's annotations, never written raw."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tinype import tiny_dll

    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "x.dll").write_bytes(tiny_dll("x.dll", [HOSTILE_NAME]))
    run = dlltrace(*(a.format(dll=folder / "x.dll", folder=folder) for a in args))
    out = run.stdout + run.stderr
    assert run.returncode in (0, 1) and "Traceback" not in out, out
    shown = out.replace("\x1b[", "")  # (the colour codes of --color always are rich's own: SGR only)
    assert "\x1b" not in shown and "\x07" not in out and "\u202e" not in out, out
    newline = "%0A" if "github" in args else "\\n"  # (an annotation's newline is GitHub's %0A: no command starts)
    assert f"\\x1b]0;PWNED\\x07\\x1b[2J\\u202eevil{newline}✓ loads.dll" in out or \
        f"\\x1b]0;pwned\\x07\\x1b[2j\\u202eevil{newline}✓ loads.dll" in out, out
    assert not any(line.lstrip().startswith("✓ loads.dll") for line in out.splitlines())


def test_rule_other_machine_copy(pes, tmp_path):
    """A package's per-machine copies (a folder named for each machine, the same file in each: clr_loader's
    ffi/dlls/x86 and amd64, loaded by `sys.maxsize > 2**32`): the copy for another machine is not the wrong
    machine when its twin for the target's machine is there, and deps loads only the twin; a lone x86 file, or
    twins in folders that name no machine, still are. The real clr_loader wheel passes (before: 1 wrong machine)."""
    if "b32" not in pes:
        pytest.skip("no 32-bit mingw compiler") if not os.environ.get("CI") else pytest.fail("CI needs i686 mingw")
    pkg = package(pes, "twins", {"dlls/x86/b.dll": "b32", "dlls/amd64/b.dll": "b"})
    check = dlltrace("check", str(pkg), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout
    doc, code = deps_json(pkg)
    assert code == 0 and [lo["root"].rsplit("\\", 2)[-2] for lo in doc["loads"]] == ["amd64"], doc["loads"]
    alone = package(pes, "alone", {"dlls/x86/b.dll": "b32"})
    assert "wrong machine" in dlltrace("check", str(alone), "-q").stdout
    unnamed = package(pes, "unnamed", {"lib32/b.dll": "b32", "lib/b.dll": "b"})
    assert "wrong machine" in dlltrace("check", str(unnamed), "-q").stdout
    swapped = package(pes, "swapped", {"dlls/x86/b.dll": "b32", "dlls/amd64/b.dll": "b32"})  # (no x64 twin)
    assert "wrong machine" in dlltrace("check", str(swapped), "-q").stdout
    w = wheel("clr_loader")
    check = dlltrace("check", str(w), "-q")
    assert check.returncode == 0 and check.stdout.startswith(f"PASS {w}: 2 PE files"), check.stdout
    run = dlltrace("deps", str(w))
    assert run.returncode == 0 and "1 load resolved, no problem" in run.stdout, run.stdout[-2000:]


def test_check_fails_an_older_vc_runtime_as_deps_does():
    """pyzbar 0.1.9's libzbar-64.dll imports MSVCR120.dll, the VC++ 2013 runtime, which the VC++ 2015-2022
    Redistributable does not hold and the wheel does not bundle (on a Windows without the 2013 one its import fails:
    "Could not find module libzbar-64.dll"): deps (the model's Windows has the 2015-2022 one) says it is missing, and
    check fails it too, saying why and what passes it; with --allow, its PASS line says the wheel needs it. Before,
    check passed it (every vcruntime-class DLL counted as the system's) beside a deps that failed."""
    w = wheel("pyzbar")
    doc = json.loads(dlltrace("check", str(w), "--json").stdout)
    assert not doc["ok"] and [(p["kind"], p["dll"]) for p in doc["problems"]] == [("not_allowed", "MSVCR120.dll")], \
        doc["problems"]
    assert "not in the VC++ 2015-2022 Redistributable, which the gate takes as installed: bundle it, or --allow " \
        "msvcr120.dll" in doc["problems"][0]["detail"], doc["problems"][0]["detail"]
    check = dlltrace("check", str(w), "-q", "--allow", "msvcr120.dll")
    assert check.returncode == 0 and check.stdout.rstrip().endswith(
        "needs VC++ runtime 12 (MSVCR120.dll), not in the VC++ 2015-2022 Redistributable"), check.stdout
    run = dlltrace("deps", str(w))
    assert run.returncode == 1 and "missing MSVCR120.dll" in run.stdout, run.stdout[-1500:]
    ok = json.loads(dlltrace("check", str(w), "--json").stdout)["dlls"]
    assert {r["dll"].lower(): r["status"] for r in ok if r["class"]["kind"] == "vcruntime"} == {"msvcr120.dll": "not_allowed"}


def test_wheel_files_are_the_ones_pip_installs(tmp_path):
    """A wheel with a DLL twice, as a plain member and under <name>.data/platlib/ (one place in site-packages): pip
    writes the plain members first and the .data ones after, over them, so the .data copy is the file installed,
    whichever the zip lists first; check reads that one, once. numba's _helperlib with a copy that is no PE: the
    wheel fails exactly when the .data copy is it. Before, the model held the copy listed last, and counted both."""
    import zipfile

    w = wheel("numba")
    name = "numba/_helperlib.cp312-win_amd64.pyd"
    with zipfile.ZipFile(w) as src:
        real = src.read(name)
    for data_is_junk in (False, True):
        twice = tmp_path / str(data_is_junk) / w.name
        twice.parent.mkdir()
        with zipfile.ZipFile(w) as src, zipfile.ZipFile(twice, "w") as dst:
            dst.writestr("numba-0.60.0.data/platlib/" + name, b"junk" if data_is_junk else real)  # (listed first)
            for info in src.infolist():
                dst.writestr(info, (real if data_is_junk else b"junk") if info.filename == name else src.read(info))
        plain = as_json(dlltrace("check", str(w), "--json"))
        doc = as_json(dlltrace("check", str(twice), "--json"))
        assert len(doc["files"]) == len(plain["files"]), [f["path"] for f in doc["files"]]
        assert [p["kind"] for p in doc["problems"]] == (["not_pe"] if data_is_junk else []), doc["problems"]
