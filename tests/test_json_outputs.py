"""Every --json output of every command validates against its schema (tracer/dlltrace/schemas/): report of
a Windows and of a Linux trace, simulate, deps of a DLL folder and of a .so, check, cuda; the schemas made from
code (the Diagnosis's and the Linux report's) are the committed files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import winetools
from test_gate import _grafted_pair

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "tracer" / "dlltrace" / "schemas"


def schema(name: str) -> jsonschema.Draft202012Validator:
    s = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def run_json(*argv: str, cwd: Path = ROOT, ok=(0, 1), timeout: float = 600) -> dict:
    r = subprocess.run([sys.executable, "-m", "dlltrace", *argv], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=timeout)
    assert r.returncode in ok, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_report_of_windows_traces():
    v = schema("result-v1.json")
    for t in sorted((ROOT / "fixtures" / "traces").glob("*.jsonl")):
        v.validate(run_json("report", str(t), "--json", ok=(0,)))


def test_simulate():
    v = schema("result-v1.json")
    for s in sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")):
        v.validate(run_json("simulate", str(s), "--json"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux trace is recorded here")
def test_report_of_a_linux_trace_with_its_diagnoses(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", str(tmp_path / "t.jsonl"), "--", sys.executable,
                        "-c", "import ctypes\ntry:\n    ctypes.CDLL('libnope_optional.so.1')\nexcept OSError:\n    pass\n"
                              "ctypes.CDLL('libdlltrace_no_such.so.2')"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=300)
    assert r.returncode == 1, r.stderr
    doc = run_json("report", str(tmp_path / "t.jsonl"), "--json", ok=(0,))
    schema("report-linux-v1.json").validate(doc)
    assert doc["outcome"]["kind"] == "died_of_load"
    (d,) = [d for d in doc["diagnoses"] if d["outcome"]["kind"] == "died_of_load"]
    fates = {f["name"]: f["fate"] for f in d["failures"]}
    assert fates == {"libnope_optional.so.1": "went_on", "libdlltrace_no_such.so.2": "fatal"}


def test_the_generated_schemas_are_the_committed_files():
    from dlltrace.diagnosis.result import schema as diagnosis_schema
    from dlltrace.render.linux import linux_report_schema

    for name, made in (("diagnosis-v1.json", diagnosis_schema()), ("report-linux-v1.json", linux_report_schema())):
        assert json.loads((SCHEMAS / name).read_text(encoding="utf-8")) == made, f"{name}: regenerate it"


def test_deps_and_check_of_a_dll_folder(tmp_path):
    winetools.require("mingw64")
    leaf = winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "leaf.c"], tmp_path / "leaf.dll", dll=True)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "mid.c", leaf], pkg / "mid.dll", dll=True)
    v = schema("static-v1.json")
    env_cache = str(tmp_path / "cache")
    os.environ["DLLTRACE_CACHE"] = env_cache
    try:
        deps = run_json("deps", str(pkg), "--json")
        v.validate(deps)
        assert not deps["ok"]
        check = run_json("check", str(pkg), "--json")
        v.validate(check)
        diagnosis = schema("diagnosis-v1.json")
        for doc in (deps, check):  # each carries its typed Diagnosis: a failed load whose leaf is the DLL missing
            diagnosis.validate(doc["diagnosis"])
            assert [(f["leaf"], f["cause"], f["fate"]) for f in doc["diagnosis"]["failures"]] == [
                ("leaf.dll", "not_found", "fatal")], doc["diagnosis"]["failures"]
            assert doc["diagnosis"]["outcome"]["kind"] != "ok"
        shutil.copy(leaf, pkg / "leaf.dll")
        v.validate(run_json("deps", str(pkg), "--json", ok=(0,)))
    finally:
        del os.environ["DLLTRACE_CACHE"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_shared_object(tmp_path):
    v = schema("static-linux-v1.json")
    (tmp_path / "b.c").write_text("int b(void) { return 2; }\n")
    (tmp_path / "a.c").write_text("int b(void);\nint a(void) { return b(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libb.so"), str(tmp_path / "b.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "liba.so"), str(tmp_path / "a.c"),
                    "-L", str(tmp_path), "-lb"], check=True)
    doc = run_json("deps", str(tmp_path / "liba.so"), "--json")
    v.validate(doc)
    assert not doc["ok"] and [p["name"] for p in doc["problems"]] == ["libb.so"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_folder_of_shared_objects(tmp_path):
    """`deps FOLDER` of a Linux install: each shared object in it, a link to one not counted again; one whose
    DT_NEEDED is missing fails the run (exit 1) and says so; the JSON has each object's document."""
    v = schema("static-linux-v1.json")
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "b.c").write_text("int b(void) { return 2; }\n")
    (tmp_path / "a.c").write_text("int b(void);\nint a(void) { return b(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libb.so"), str(tmp_path / "b.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "sub" / "liba.so.1"), str(tmp_path / "a.c"),
                    "-L", str(tmp_path), "-lb"], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "_ok.cpython-311-x86_64-linux-gnu.so"),
                    str(tmp_path / "b.c")], check=True)
    (pkg / "sub" / "liba.so").symlink_to("liba.so.1")
    doc = run_json("deps", str(pkg), "--json", ok=(1,))
    v.validate(doc)
    assert [o["file"] for o in doc["objects"]] == ["_ok.cpython-311-x86_64-linux-gnu.so", "sub/liba.so.1"]
    assert [o["ok"] for o in doc["objects"]] == [True, False] and not doc["ok"]
    assert [p["name"] for p in doc["problems"]] == ["libb.so"]
    text = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(pkg)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")})
    assert text.returncode == 1, text.stderr
    assert text.stdout.startswith(f"dlltrace deps {pkg}: 2 shared objects, 1 with a problem"), text.stdout
    assert "  ✗ sub/liba.so.1: 1 problem(s)" in text.stdout and "libb.so" in text.stdout
    shutil.copy(tmp_path / "libb.so", pkg / "sub" / "libb.so")  # (no RUNPATH: still not found beside it)
    v.validate(run_json("deps", str(pkg), "--json", ok=(1,)))


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_site_packages_with_launchers_and_grafted_libraries(tmp_path):
    """A Linux venv's site-packages holds pip's and setuptools' Windows launchers (t64.exe, cli-64.exe: templates):
    `deps` of it is still the Linux install it is (before: the Windows world, '0 loads resolved'; and `check` said
    PASS of the launchers alone). The extension is loaded first and the libraries it loads through its DT_RPATH
    are not loaded again on their own (static_roots): liba.so alone would not find libb.so (before: exit 1). A
    stray .pyd (a Windows wheel installed by mistake) does not make it Windows's either (windows_install: before,
    deps said '1 load resolved, no problem' of a copy of the bench venv with regex's .pyd, and check 'PASS: 15 PE
    files', its 251 .so files unseen). Given
    relative to the current folder, the same (before: every object 'not found', dlopened by its relative path)."""
    v = schema("static-linux-v1.json")
    site = tmp_path / "site-packages"
    for d in ("pkg", "pkg.libs", "pip/_vendor/distlib"):
        (site / d).mkdir(parents=True)
    libs = _grafted_pair(tmp_path, site / "pkg.libs")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(site / "pkg" / "_ext.cpython-311-x86_64-linux-gnu.so"),
                    str(tmp_path / "e.c"), "-L", str(libs), "-la", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../pkg.libs"],
                   check=True)
    (site / "pip" / "_vendor" / "distlib" / "t64.exe").write_bytes(b"MZ" + bytes(126))
    (site / "regex").mkdir()  # (a Windows wheel installed by mistake: a .pyd among the Linux extensions)
    (site / "regex" / "_regex.cp311-win_amd64.pyd").write_bytes(b"MZ" + bytes(126))
    doc = run_json("deps", str(site), "--json", ok=(0,))
    v.validate(doc)
    assert doc["ok"] and [o["file"] for o in doc["objects"]] == ["pkg/_ext.cpython-311-x86_64-linux-gnu.so"], doc
    assert doc["reached"] == [{"file": "pkg.libs/liba.so", "loaded_by": "pkg/_ext.cpython-311-x86_64-linux-gnu.so"},
                              {"file": "pkg.libs/libb.so", "loaded_by": "pkg/_ext.cpython-311-x86_64-linux-gnu.so"}]
    # (the folder given relative to the current one: the same, not every object 'not found' in the folder)
    rel = run_json("deps", "site-packages", "--json", cwd=tmp_path, ok=(0,))
    assert (rel["objects"][0]["ok"], rel["reached"]) == (True, doc["reached"]), rel
    alone = run_json("deps", str(libs / "liba.so"), "--json", ok=(1,))  # (by itself it does not load: no RPATH)
    assert [p["name"] for p in alone["problems"]] == ["libb.so"]
    r = subprocess.run([sys.executable, "-m", "dlltrace", "check", str(site)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert r.returncode == 2 and "a Linux install" in r.stderr and r.stderr.count("\n") == 1, r.stderr + r.stdout
    from dlltrace.classify import windows_install
    assert windows_install(["_regex.cp311-win_amd64.pyd", "libz.so.1"])  # (more .pyd than Linux extensions)
    assert windows_install(["a.dll", "t64.exe"]) and not windows_install(["a.dll", "x.abi3.so"])
    assert not windows_install(["_a.cp311-win_amd64.pyd", "_a.cpython-311-x86_64-linux-gnu.so", "_b.abi3.so"])
    assert windows_install(["_a.cp311-win_amd64.pyd", "attach_linux_amd64.so"])  # (a bare x.so: no Linux sign)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_folder_a_reached_library_whose_need_fails(tmp_path):
    """`deps FOLDER`: an extension with DT_RUNPATH loads pkg.libs/liba.so, which has no RPATH and does not find
    libb.so (the runpath is not searched for liba's needs; the real ld.so agrees: ctypes of the extension fails).
    liba.so is reached, not loaded alone, and its line says it fails (before: '✓ pkg.libs/liba.so: loaded by ...'
    under '3 shared objects, 1 with a problem')."""
    site = tmp_path / "site"
    for d in ("pkg", "pkg.libs"):
        (site / d).mkdir(parents=True)
    libs = _grafted_pair(tmp_path, site / "pkg.libs")
    ext = site / "pkg" / "_ext.cpython-311-x86_64-linux-gnu.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(ext), str(tmp_path / "e.c"), "-L", str(libs), "-la",
                    "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../pkg.libs"], check=True)
    real = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(ext)],
                          capture_output=True, text=True)
    assert real.returncode != 0 and "libb.so" in real.stderr, real.stderr
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(site)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert r.returncode == 1 and r.stdout.startswith(f"dlltrace deps {site}: 3 shared objects, 2 with a problem"), r.stdout
    assert "  ✗ pkg.libs/liba.so: loaded by pkg/_ext.cpython-311-x86_64-linux-gnu.so, as it loads it: a library it " \
        "needs fails (below)" in r.stdout, r.stdout
    assert "  ✓ pkg.libs/libb.so: 1 object loads" in r.stdout, r.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_folder_with_a_fifo_named_so(tmp_path):
    """`deps FOLDER` never reads a FIFO named x.so (is_elf opened it for reading, which waits for a writer
    forever: `deps` hung); the folder's real shared object is still examined, and a FIFO given as the target is
    a one-line error (exit 2), not a hang."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (tmp_path / "b.c").write_text("int b(void) { return 2; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "libb.so"), str(tmp_path / "b.c")], check=True)
    os.mkfifo(pkg / "x.so")
    doc = run_json("deps", str(pkg), "--json", ok=(0,), timeout=60)
    schema("static-linux-v1.json").validate(doc)
    assert [o["file"] for o in doc["objects"]] == ["libb.so"] and doc["ok"]
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(pkg / "x.so")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_linux_targets_refuses_windows_options(tmp_path):
    """--only, --flags, --python, --path, --add-dll-directory with a Linux shared object or install folder: a
    one-line usage error (exit 2), not silently ignored (--only x.so of a folder examined every object in it)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (tmp_path / "b.c").write_text("int b(void) { return 2; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(pkg / "libb.so"), str(tmp_path / "b.c")], check=True)
    for target, extra in ((pkg, ["--only", "nothing.so"]), (pkg, ["--python", "3.11"]),
                          (pkg / "libb.so", ["--flags", "8", "--path", "x"]), (pkg, ["--add-dll-directory", "x"])):
        r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(target), *extra], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and extra[0] in r.stderr and not r.stdout, r.stderr
    assert run_json("deps", str(pkg), "--json", "--no-cache", ok=(0,))["ok"]  # (changes nothing there: taken)


def test_deps_folder_over_its_limit_of_shared_objects(tmp_path):
    """A folder with more shared objects than elf_objects' limit is a one-line usage error, not its first `limit`
    said to be all ('5000 shared objects, every one loads' of a folder of 5003); a Windows extension (.pyd) after
    them still makes it a Windows folder ([]); another PE file does not (a Linux site-packages holds pip's Windows
    launchers)."""
    from dlltrace.worlds.elffiles import elf_objects
    from dlltrace.errors import EXIT_USAGE, DlltraceError

    for i in range(3):
        (tmp_path / f"lib{i}.so").write_bytes(b"\x7fELF" + bytes(60))
    assert len(elf_objects(str(tmp_path), limit=3)) == 3
    with pytest.raises(DlltraceError) as e:
        elf_objects(str(tmp_path), limit=2)
    assert e.value.exit_code == EXIT_USAGE and "more than 2 shared objects" in str(e.value)
    (tmp_path / "z.dll").write_bytes(b"MZ")
    assert len(elf_objects(str(tmp_path), limit=3)) == 3
    (tmp_path / "z.pyd").write_bytes(b"MZ")
    assert elf_objects(str(tmp_path), limit=2) == []


def test_cuda_of_a_scenario_and_of_this_machine():
    v = schema("cuda-v1.json")
    for s in sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")):  # (1: the stack does not fit, as s2's)
        v.validate(run_json("cuda", "--scenario", str(s), "--json", ok=(0, 1)))
    v.validate(run_json("cuda", "--json", ok=(0, 1)))


def test_every_json_document_names_its_kind_the_same_way():
    """Issue 26 item 4: every --json document says what it is with `format` ("dlltrace-...") and `version`: each
    output schema requires both (the outputs validate against them above); the static documents also keep the
    `schema` key they had first."""
    outputs = ["result-v1.json", "report-linux-v1.json", "diagnosis-v1.json", "static-v1.json", "static-linux-v1.json",
               "cuda-v1.json", "triage-v1.json"]
    for name in outputs:
        doc = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        assert {"format", "version"} <= set(doc.get("required", [])), name
        fmt = doc["properties"]["format"]
        kinds = [fmt["const"]] if "const" in fmt else fmt.get("enum", [])
        assert kinds and all(k.startswith("dlltrace-") for k in kinds), (name, fmt)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_resolves_its_shared_objects_here(tmp_path):
    """`deps x.whl` of a manylinux wheel: its shared objects unpacked into a site-packages of their own and each
    resolved on this machine, as `deps FOLDER` (before: the Windows world, '0 loads resolved, no problem', of a
    wheel it never looked into). A damaged one is a one-line usage error."""
    import zipfile

    libs = _grafted_pair(tmp_path, tmp_path)
    ext = tmp_path / "_ext.cpython-311-x86_64-linux-gnu.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(ext), str(tmp_path / "e.c"), "-L", str(libs), "-la",
                    "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../pkg.libs"], check=True)
    w = tmp_path / "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("pkg/" + ext.name, ext.read_bytes())
        z.writestr("pkg.libs/liba.so", (libs / "liba.so").read_bytes())
        z.writestr("pkg-1.0.data/platlib/pkg.libs/libb.so", (libs / "libb.so").read_bytes())  # (pip: site-packages)
        z.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    doc = run_json("deps", str(w), "--json", ok=(0,))
    schema("static-linux-v1.json").validate(doc)
    assert doc["target"] == str(w) and [o["file"] for o in doc["objects"]] == ["pkg/" + ext.name], doc
    assert [r["file"] for r in doc["reached"]] == ["pkg.libs/liba.so", "pkg.libs/libb.so"]
    text = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert text.returncode == 0 and text.stdout.startswith(f"dlltrace deps {w}: 3 shared objects, every one loads")
    bad = tmp_path / "bad-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    bad.write_bytes(b"not a zip")
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(bad)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a readable wheel" in r.stderr, r.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_folder_marks_an_optional_file(tmp_path):
    """`deps FOLDER` on Linux reads the packages' loaders as the Windows side does: numba's tbbpool (whose
    libtbb.so.12 is not installed here) is a file numba loads only on demand and does without (parallel.py's
    try/except ImportError: data/loaders.json numba_threading_layers), so its failure is shown, marked optional, and
    the run exits 0; without the marker it is the package's failure (exit 1)."""
    site = tmp_path / "site-packages"
    ufunc = site / "numba" / "np" / "ufunc"
    ufunc.mkdir(parents=True)
    (site / "numba" / "__init__.py").write_text("")
    (tmp_path / "t.c").write_text("int tbb_call(void);\nint pool(void) { return tbb_call(); }\n")
    (tmp_path / "tbb.c").write_text("int tbb_call(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtbb-dlltrace-test.so.12", "-o",
                    str(tmp_path / "libtbb-dlltrace-test.so.12"), str(tmp_path / "tbb.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(ufunc / "tbbpool.cpython-312-x86_64-linux-gnu.so"),
                    str(tmp_path / "t.c"), str(tmp_path / "libtbb-dlltrace-test.so.12")], check=True)
    marker = "                        from numba.np.ufunc import tbbpool as lib\n"
    (ufunc / "parallel.py").write_text("def select_known_backend(backend):\n    try:\n" + marker + "    except ImportError:\n        pass\n")
    doc = run_json("deps", str(site), "--json", ok=(0,))
    schema("static-linux-v1.json").validate(doc)
    assert doc["ok"] and doc["objects"][0]["optional_by"] == "numba_threading_layers", doc["objects"]
    text = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(site / "numba")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert text.returncode == 0 and "(optional: numba threading layer only; the package does without it)" in text.stdout
    # the same files as a manylinux wheel: its loader's text is unpacked with its shared objects, the same verdict
    import zipfile

    w = tmp_path / "numba-0.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        for f in sorted(site.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(site).as_posix())
    whl = run_json("deps", str(w), "--json", ok=(0,))
    assert whl["ok"] and whl["objects"][0]["optional_by"] == "numba_threading_layers", whl["objects"]
    # and with every member under numba-0.60.0.data/platlib/ (where pip takes them from into site-packages): the
    # loader is known by where pip puts it, so the same verdict (before: its text was not unpacked, exit 1)
    with zipfile.ZipFile(w, "w") as z:
        for f in sorted(site.rglob("*")):
            if f.is_file():
                z.write(f, "numba-0.60.0.data/platlib/" + f.relative_to(site).as_posix())
    whl = run_json("deps", str(w), "--json", ok=(0,))
    assert whl["ok"] and whl["objects"][0]["optional_by"] == "numba_threading_layers", whl["objects"]
    (ufunc / "parallel.py").write_text("import os\n")
    assert not run_json("deps", str(site), "--json", ok=(1,))["ok"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_writes_nothing_outside_its_temporary_folder(tmp_path):
    """A member `x-1.0.data/platlib/../../y.so` stays inside the wheel (zip_members takes it), but it is installed
    two folders above site-packages: pip refuses it (assert_no_path_traversal on the path after its scheme), and
    deps refuses it too, a one-line usage error (before: written to the temporary folder's parent, left there).
    Every run, good or refused, leaves no temporary folder behind."""
    import zipfile

    libs = _grafted_pair(tmp_path, tmp_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "TMPDIR": str(tmpdir)}
    for i, name in enumerate(["esc-1.0.data/platlib/../../liba.so", "esc-1.0.data/purelib/p/../../../liba.so"]):
        w = tmp_path / f"esc{i}-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr("esc/ok.cpython-311-x86_64-linux-gnu.so", (libs / "libb.so").read_bytes())
            z.writestr(name, (libs / "liba.so").read_bytes())
        r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True,
                           env=env, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and name in r.stderr and "pip" in r.stderr, r.stderr
        assert list(tmpdir.iterdir()) == [], list(tmpdir.rglob("*"))
    ok = tmp_path / "ok-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(ok, "w") as z:
        z.writestr("ok/libb.so", (libs / "libb.so").read_bytes())
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(ok)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and list(tmpdir.iterdir()) == [], (r.stdout, r.stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_inflates_no_member_that_is_not_elf(tmp_path):
    """A member named like a shared object that is not one (zeros: a zip bomb's, 1 MiB of a wheel inflating to
    gigabytes) is read no further than its first bytes, as check reads it (magic b"\\x7fELF"), not inflated into
    memory and written out whole (before: a 780 KB wheel of 768 MiB of zeros took 813 MB of memory and 768 MiB of
    the temporary folder). Shown with a 2 MiB inflate budget: the 4 MiB member no longer exhausts it (1 MiB, one chunk, is inflated).
    It is no shared object a dlopen loads: a failing root, as check fails it (not_elf)."""
    import zipfile

    libs = _grafted_pair(tmp_path, tmp_path)
    w = tmp_path / "bomb-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(w, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb/libb.so", (libs / "libb.so").read_bytes())
        z.writestr("bomb/zeros.cpython-311-x86_64-linux-gnu.so", b"\0" * (4 << 20))
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "DLLTRACE_LIMITS": "zip_inflate=2M"},
                       timeout=120)
    assert r.returncode == 1 and "2 shared objects, 1 with a problem" in r.stdout, (r.stdout, r.stderr)
    assert "✓ bomb/libb.so" in r.stdout and "✗ bomb/zeros.cpython-311-x86_64-linux-gnu.so" in r.stdout, r.stdout
    check = subprocess.run([sys.executable, "-m", "dlltrace", "check", "--json", str(w)], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert check.returncode == 1 and [p["kind"] for p in json.loads(check.stdout)["problems"]] == ["not_elf"], \
        check.stdout[-1500:]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_folder_fails_a_file_named_as_a_shared_object_that_is_not_one(tmp_path):
    """An installed folder's x.so that is no ELF object: a dlopen of it fails ("file too short", "invalid ELF header"),
    so deps resolves it as a root of its own and fails (before: left out silently, exit 0, while check of the same
    files as a wheel fails: not_elf); unless its package loads it only on demand (numba's tbbpool: exit 0)."""
    libs = _grafted_pair(tmp_path, tmp_path)
    site = tmp_path / "site-packages"
    ufunc = site / "numba" / "np" / "ufunc"
    ufunc.mkdir(parents=True)
    (site / "numba" / "libb.so").write_bytes((libs / "libb.so").read_bytes())
    (ufunc / "tbbpool.cpython-312-x86_64-linux-gnu.so").write_bytes(b"not an ELF object, but named as one")
    doc = run_json("deps", str(site), "--json", ok=(1,))
    assert [(p["cause"], p["name"].rsplit("/", 1)[-1]) for p in doc["problems"]] == \
        [("bad_elf", "tbbpool.cpython-312-x86_64-linux-gnu.so")], doc["problems"]
    (ufunc / "parallel.py").write_text("    from numba.np.ufunc import tbbpool as lib\n")
    doc = run_json("deps", str(site), "--json", ok=(0,))
    (tbb,) = [o for o in doc["objects"] if o["file"].endswith("tbbpool.cpython-312-x86_64-linux-gnu.so")]
    assert tbb["optional_by"] == "numba_threading_layers" and not tbb["ok"], tbb


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_says_why_it_has_nothing_to_resolve(tmp_path):
    """A wheel whose shared objects are all in .data/data (pip installs them under the prefix, not site-packages):
    the one-line error says they were left out, and why (before: 'a Linux wheel with no shared object (.so)', of a
    wheel that has some). One named so that is no ELF object is resolved, and fails, as check fails it (before:
    left out, and said so in that line)."""
    import zipfile

    libs = _grafted_pair(tmp_path, tmp_path)
    w = tmp_path / "dd-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("dd-1.0.data/data/lib/libb.so", (libs / "libb.so").read_bytes())
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "(left out: 1 in .data/data, scripts or headers)" in r.stderr, r.stderr
    with zipfile.ZipFile(w, "a") as z:
        z.writestr("dd/x.cpython-311-x86_64-linux-gnu.so", b"not an ELF object")
    r = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "tracer")}, timeout=120)
    assert r.returncode == 1 and "✗ dd/x.cpython-311-x86_64-linux-gnu.so" in r.stdout, (r.stdout, r.stderr)


def _tbb_pool(b: Path) -> Path:
    """b (made) with gcc's libtbb-dlltrace-test.so.12 (defines tbb_call) and tbbpool.so (a pool that needs it): b."""
    b.mkdir()
    (b / "t.c").write_text("int tbb_call(void);\nint pool(void) { return tbb_call(); }\n")
    (b / "tbb.c").write_text("int tbb_call(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtbb-dlltrace-test.so.12", "-o",
                    str(b / "libtbb-dlltrace-test.so.12"), str(b / "tbb.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "tbbpool.so"), str(b / "t.c"),
                    str(b / "libtbb-dlltrace-test.so.12")], check=True)
    return b


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_installs_its_data_members_last(tmp_path):
    """A Linux wheel with numba's parallel.py twice, under numba-0.60.0.data/platlib/ (listed first) and as a plain
    member: pip installs the plain members first and the .data ones after, over them, so the .data copy is the one
    numba runs. Without the threading layers' marker in it, tbbpool (its libtbb not installed here) is the
    package's failure: deps exits 1 as check does (exit 1, libtbb not allowed); with it, both pass. Before, deps
    wrote the members in the zip's order, the plain copy last, and passed what check failed."""
    import zipfile

    b = _tbb_pool(tmp_path / "build")
    marker = (b"def select_known_backend(backend):\n    try:\n                        from numba.np.ufunc import tbbpool "
              b"as lib\n    except ImportError:\n        pass\n")
    w = tmp_path / "numba-0.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    for data_has_it in (False, True):
        with zipfile.ZipFile(w, "w") as z:
            z.writestr("numba-0.60.0.data/platlib/numba/np/ufunc/parallel.py", marker if data_has_it else b"import os\n")
            z.writestr("numba/np/ufunc/parallel.py", b"import os\n" if data_has_it else marker)
            z.writestr("numba/np/ufunc/tbbpool.cpython-312-x86_64-linux-gnu.so", (b / "tbbpool.so").read_bytes())
            z.writestr("numba/__init__.py", b"")
        deps = run_json("deps", str(w), "--json")
        check = run_json("check", str(w), "--json")
        assert deps["ok"] == check["ok"] == data_has_it, (data_has_it, deps["objects"], check["problems"])


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_check_of_a_linux_wheel_reads_the_member_pip_installs(tmp_path):
    """A Linux wheel with a shared object twice, under <name>.data/platlib/ (listed first) and as a plain member:
    pip writes the .data one last, so it is the file installed. Here the plain copy needs a library the wheel does
    not have and the .data copy needs nothing: check passes, as deps does (it writes the members in pip's order).
    Before, check read the copy listed last and failed it."""
    import zipfile

    b = _tbb_pool(tmp_path / "build")
    (b / "lone.c").write_text("int pool(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "lone.so"), str(b / "lone.c")], check=True)
    w = tmp_path / "pool-1.0-cp312-cp312-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("pool-1.0.data/platlib/pool/ext.cpython-312-x86_64-linux-gnu.so", (b / "lone.so").read_bytes())
        z.writestr("pool/ext.cpython-312-x86_64-linux-gnu.so", (b / "tbbpool.so").read_bytes())
    check = run_json("check", str(w), "--json")
    assert check["ok"] and len(check["files"]) == 1, (check["problems"], check["files"])
    if sys.platform.startswith("linux"):
        assert run_json("deps", str(w), "--json")["ok"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_deps_of_a_linux_wheel_an_optional_file_fails_only_its_own_load(tmp_path):
    """numba's tbbpool (loaded only on demand) loads the wheel's numba.libs/libtbbx.so.12, whose own need
    (libfoo-missing.so.1) is nowhere: that is the failure of a library of the package, not of tbbpool's own load,
    so deps exits 1, as check does (libfoo-missing not allowed, needed by libtbbx) and as deps of a Windows folder
    does (a DLL an optional file reaches is loaded as a root of its own). tbbpool's own need failing (libtbbx.so.12
    not in the wheel) is optional in both: exit 0. Before, deps called the first optional too and passed it."""
    import zipfile

    b = tmp_path / "build"
    b.mkdir()
    (b / "foo.c").write_text("int foo(void) { return 0; }\n")
    (b / "tbb.c").write_text("int foo(void);\nint tbb_call(void) { return foo(); }\n")
    (b / "t.c").write_text("int tbb_call(void);\nint pool(void) { return tbb_call(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libfoo-missing.so.1", "-o", "libfoo-missing.so.1", "foo.c"],
                   check=True, cwd=b)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtbbx.so.12", "-o", "libtbbx.so.12", "tbb.c",
                    "libfoo-missing.so.1"], check=True, cwd=b)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-rpath,$ORIGIN/../../../numba.libs", "-o", "tbbpool.so", "t.c",
                    "libtbbx.so.12"], check=True, cwd=b)
    w = tmp_path / "numba-0.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    for with_lib in (True, False):
        with zipfile.ZipFile(w, "w") as z:
            z.writestr("numba/np/ufunc/parallel.py", "    try:\n        from numba.np.ufunc import tbbpool as lib\n"
                                                     "    except ImportError:\n        pass\n")
            z.writestr("numba/np/ufunc/tbbpool.cpython-312-x86_64-linux-gnu.so", (b / "tbbpool.so").read_bytes())
            if with_lib:
                z.writestr("numba.libs/libtbbx.so.12", (b / "libtbbx.so.12").read_bytes())
        deps = run_json("deps", str(w), "--json")
        check = run_json("check", str(w), "--json")
        assert deps["ok"] == check["ok"] == (not with_lib), (with_lib, deps["objects"], check["problems"])
        assert [o.get("optional_by") for o in deps["objects"]] == [None if with_lib else "numba_threading_layers"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None
                    or not os.path.exists("/usr/lib/x86_64-linux-gnu/libxml2.so.2"),
                    reason="needs Linux, gcc and libxml2 (tools/setup.sh --tests installs it)")
def test_deps_of_a_linux_wheel_names_what_it_found_here_outside_the_wheels_policy(tmp_path):
    """`deps x.whl` resolves on this machine, so a library the wheel's policy does not allow, found here, loaded and
    was said to be fine, while `check` failed the wheel (lightgbm 4.5.0: libgomp.so.1, not a manylinux system
    library). deps still answers whether the loads fail here (exit 0), and now names each library outside the
    policy and each symbol version newer than it (a wheel built against glibc 2.34's pthread_create, tagged
    manylinux_2_17), as check fails the same wheel for them (exit 1)."""
    import zipfile

    (tmp_path / "x.c").write_text("void xmlInitParser(void);\nvoid init(void) { xmlInitParser(); }\n")
    (tmp_path / "t.c").write_text("#include <pthread.h>\nstatic void *run(void *a) { return a; }\n"
                                  "int go(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n")
    xml = tmp_path / "_xml.cpython-311-x86_64-linux-gnu.so"
    thr = tmp_path / "_thr.cpython-311-x86_64-linux-gnu.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(xml), str(tmp_path / "x.c"),
                    "/usr/lib/x86_64-linux-gnu/libxml2.so.2"], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(thr), str(tmp_path / "t.c"), "-pthread"], check=True)
    w = tmp_path / "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("pkg/" + xml.name, xml.read_bytes())
        z.writestr("pkg/" + thr.name, thr.read_bytes())
        z.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    doc = run_json("deps", str(w), "--json", ok=(0,))
    schema("static-linux-v1.json").validate(doc)
    assert doc["ok"] and doc["policy"] == "manylinux_2_17_x86_64", doc
    outside = {(o["name"], o["version"], o["needed_by"]) for o in doc["outside_policy"]}
    assert ("libxml2.so.2", None, "pkg/" + xml.name) in outside, outside
    assert ("libc.so.6", "GLIBC_2.34", "pkg/" + thr.name) in outside, outside
    assert all(o["newest"] == "2.17" for o in doc["outside_policy"] if o["version"] and o["version"].startswith("GLIBC_"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    text = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(w)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert text.returncode == 0 and "outside the wheel's policy (manylinux_2_17_x86_64)" in text.stdout, text.stdout
    assert f"! libxml2.so.2, needed by pkg/{xml.name}: not a manylinux_2_17 system library" in text.stdout
    assert f"! libc.so.6 GLIBC_2.34, needed by pkg/{thr.name}: newer than the policy allows (its newest GLIBC: 2.17)" \
        in text.stdout
    check = subprocess.run([sys.executable, "-m", "dlltrace", "check", "--json", str(w)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert check.returncode == 1, check.stderr
    failed = {(p["dll"], p["kind"]) for p in json.loads(check.stdout)["problems"]}
    assert ("libxml2.so.2", "not_allowed") in failed and ("libc.so.6", "missing_version") in failed, failed
    # a wheel tagged for a policy that allows them: nothing named
    ok = tmp_path / "pkg-1.0-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(ok, "w") as z:
        z.writestr("pkg/" + thr.name, thr.read_bytes())
    assert run_json("deps", str(ok), "--json", ok=(0,))["outside_policy"] == []
    # tagged aarch64, its objects x86-64: they load here, on an aarch64 machine none does (check: wrong_machine)
    arm = tmp_path / "pkg-1.0-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    with zipfile.ZipFile(arm, "w") as z:
        z.writestr("pkg/" + thr.name, thr.read_bytes())
    doc = run_json("deps", str(arm), "--json", ok=(0,))
    schema("static-linux-v1.json").validate(doc)
    assert doc["wrong_machine"] == [{"file": "pkg/" + thr.name, "machine": "EM_X86_64"}] and doc["outside_policy"] == []
    text = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(arm)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert "1 not for the machine its tag names" in text.stdout and f"! pkg/{thr.name}: EM_X86_64" in text.stdout
    check = subprocess.run([sys.executable, "-m", "dlltrace", "check", "--json", str(arm)], capture_output=True,
                           text=True, env=env, timeout=120)
    assert check.returncode == 1 and {p["kind"] for p in json.loads(check.stdout)["problems"]} == {"wrong_machine"}
