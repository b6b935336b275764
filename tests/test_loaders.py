"""How each package makes its own DLLs reachable (tracer/dlltrace/data/loaders.json, pkgloaders.py), tested on
the real file each row was read from: every `seen` wheel's (or sdist's) loader file is fetched (from the tests'
cached wheel, else over HTTP Range from PyPI) and checked against its pinned sha256, and the row's rule must find
that package's loader in it with the folders the data says (for the rows whose rule reads the text -- delvewheel's
.libs name, opencv's config, scikit-learn's DLL names -- the folders and files come from the real text; for the
others the marker found in the real file is the evidence and the effect is the row's). Then what `deps` does with them on real wheels: the
preloads of scikit-learn, the folder-and-preload of ctranslate2 (test_static.py), delvewheel's folders of pandas
and psycopg2-binary, the healthy h5py, pyarrow and lightgbm wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import realwheels
from dlltrace import pkgloaders
from dlltrace.pkgloaders import LoaderDataError, loader_rows, loaders_from_files, parse_rows
from test_static import dlltrace, pes  # noqa: F401  (pes: the built DLLs)

SEEN = [(row.id, s) for row in loader_rows() for s in row.seen]


def test_the_data_covers_at_least_15_packages_each_read_from_a_real_wheel():
    dists = {s["dist"] for _, s in SEEN}
    assert len(dists) >= 15, sorted(dists)
    for row in loader_rows():
        assert row.source and row.versions and row.does, row.id
        assert row.seen or row.rule == "model", row.id  # (read from a real file, or what the loader model does)


@pytest.mark.parametrize("rid, seen", SEEN, ids=[f"{r}-{s['dist']}" for r, s in SEEN])
def test_rule_finds_each_packages_loader_in_its_real_file(rid, seen):
    data = realwheels.or_skip(lambda: realwheels.loader_file(seen))
    member = seen["member"].split("/", 1)[1] if "sdist" in seen else seen["member"]
    texts = {member: data.decode("utf-8", "replace")[:pkgloaders.MAX_LOADER_FILE]}
    if rid == "pywin32_bootstrap":  # (read through the .pth that imports it)
        texts["pywin32.pth"] = "# .pth file for the PyWin32 extensions\nwin32\nwin32\\lib\nPythonwin\nimport pywin32_bootstrap\n"
    found = loaders_from_files(texts.get, list(texts))
    mine = [lo for lo in found if lo.how == rid]
    assert len(mine) == 1, (rid, found)
    assert list(mine[0].adds) == seen["adds"], mine[0]
    if "preloads" in seen:  # (read from the text by its rule: scikit-learn's DLL names)
        assert list(mine[0].preload_files) == seen["preloads"], mine[0]


def test_rule_opencv_binaries_paths_and_distributor_init_preloads_read_their_texts():
    row = next(r for r in loader_rows() if r.id == "opencv_config")
    lo = pkgloaders.rule_opencv_binaries_paths(row, "cv2", "BINARIES_PATHS = [\n    os.path.join(os.path.join("
                                               "LOADER_DIR, '../../'), 'x64/vc17/bin')\n] + BINARIES_PATHS\n")
    assert lo is not None and lo.adds == ("../x64/vc17/bin",) and lo.path_adds == lo.adds
    row = next(r for r in loader_rows() if r.id == "sklearn_distributor_init")
    text = ('libs_path = op.join(op.dirname(__file__), ".libs")\nvcomp140_dll_filename = op.join(libs_path, '
            '"vcomp140.dll")\nWinDLL(op.abspath(vcomp140_dll_filename))\n')
    lo = pkgloaders.rule_distributor_init_preloads(row, "sklearn", text)
    assert lo is not None and lo.preload_files == ("sklearn/.libs/vcomp140.dll",)
    # a file without the marker is no loader; onnxruntime's preload_dlls runs only when the program calls it
    assert loaders_from_files({"sklearn/_distributor_init.py": "import os\n"}.get, ["sklearn/_distributor_init.py"]) == []
    (ort,) = loaders_from_files({"onnxruntime/__init__.py": "def preload_dlls(cuda=True):\n"}.get, ["onnxruntime/__init__.py"])
    assert ort.when == "call" and ort.adds == ()


@pytest.mark.parametrize("doc, what", [
    ({"format": "x", "version": 1, "loaders": []}, "not a dlltrace-loaders document"),
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_nothing", "when": "import",
      "marker": "x", "does": "d", "versions": "v", "source": "s"}]}, "no rule named"),
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_marker", "when": "import",
      "marker": "(", "does": "d", "versions": "v", "source": "s"}]}, "marker"),
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_marker", "when": "later",
      "marker": "x", "does": "d", "versions": "v", "source": "s"}]}, "when must be"),
    # (`required` takes back what `optional` matches: without it, or outside it, it is a mistake, not ignored)
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_marker", "when": "call",
      "marker": "x", "does": "d", "versions": "v", "source": "s", "required": ["p/_shared.*"]}]}, "'required'"),
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_marker", "when": "call",
      "marker": "x", "does": "d", "versions": "v", "source": "s", "optional": ["p/_*"],
      "required": ["q/_shared.*"]}]}, "not one of its 'optional' files"),
    ({"format": "dlltrace-loaders", "version": 1, "loaders": [{"id": "a", "rule": "rule_marker", "when": "call",
      "marker": "x", "does": "d", "versions": "v", "source": "s", "required": "p/_shared.*"}]}, "list of strings"),
])
def test_malformed_loader_data_is_refused(doc, what):
    with pytest.raises(LoaderDataError, match=what):
        parse_rows(doc)
    assert parse_rows(json.loads(json.dumps({"format": "dlltrace-loaders", "version": 1, "loaders": [
        {"id": "a", "rule": "rule_marker", "when": "import", "marker": "x", "does": "d", "versions": "v", "source": "s"}]})))


# --- deps on real wheels: the loaders applied --------------------------------------------------------------------

def wheel(key: str):
    return realwheels.wheel_or_skip(key)


def test_rule_sklearn_preloads_its_vc_runtime_in_deps():
    """scikit-learn 1.5.2 imports VCOMP140.DLL and MSVCP140.dll from its extensions; its _distributor_init.py loads
    both from sklearn/.libs by full path first. Without a VC++ runtime in the model, deps passes the wheel only
    because of that preload (before it was modelled: 27 of 69 loads would fail)."""
    run = dlltrace("deps", str(wheel("sklearn")), "--no-vc-runtime")
    assert run.returncode == 0 and "would fail" not in run.stdout, run.stdout[-2000:]
    assert "after sklearn's _distributor_init.py" in run.stdout
    assert "VCOMP140.DLL  already loaded (sklearn\\.libs\\vcomp140.dll)" in run.stdout


@pytest.mark.parametrize("key, after", [("pandas", "pandas's delvewheel patch"), ("psycopg2", "psycopg2's delvewheel patch"),
                                        ("h5py", None), ("pyarrow", None), ("lightgbm", None)])
def test_more_healthy_wheels_pass_deps_and_check(key, after):
    run = dlltrace("deps", str(wheel(key)))
    assert run.returncode == 0 and "would fail" not in run.stdout and "no problem" in run.stdout, run.stdout[-3000:]
    if after:
        assert f"after {after}" in run.stdout
    check = dlltrace("check", str(wheel(key)), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout


def test_rule_a_dll_a_loader_loads_first_is_still_checked_for_its_own_imports(pes, tmp_path):
    """ctranslate2's __init__.py loads every DLL of its folder by full path before its extension: the extension's
    import of a.dll binds to that loaded copy, and a.dll's own missing import (b.dll) must still be reported --
    in reality ctypes.CDLL(a.dll) fails and so does the import (the review found deps saying "no problem")."""
    from winetools import mingw_compile

    site = tmp_path / "Lib" / "site-packages"
    pkg = site / "ctranslate2"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('import glob, os\npackage_dir = os.path.dirname(__file__)\n'
                                     'os.add_dll_directory(package_dir)\n'
                                     'for library in glob.glob(os.path.join(package_dir, "*.dll")):\n    ctypes.CDLL(library)\n')
    for name in ("a", "c", "d"):
        (pkg / f"{name}.dll").write_bytes(pes[name].read_bytes())
    (tmp_path / "m.c").write_text("int fa(void);\n__declspec(dllexport) int fm(void) { return fa(); }\n")
    mingw_compile([tmp_path / "m.c", pes["a"]], pkg / "m.cp311-win_amd64.pyd", dll=True)
    run = dlltrace("deps", str(site), "--no-cache")
    assert run.returncode == 1 and "would fail" in run.stdout, run.stdout[-3000:]
    assert "missing b.dll" in run.stdout and "(needed by a.dll)" in run.stdout, run.stdout[-3000:]
    assert "after ctranslate2's __init__.py" in run.stdout


def test_a_free_threaded_wheel_imports_its_own_python_dll():
    """numpy 2.1.3 for the free-threaded CPython 3.13 (cp313-cp313t) imports python313t.dll from .cp313t-win_amd64.pyd
    files: that is its Python's DLL (classify: "3.13t"; the wheel's tag cp313t), found in the modelled Python's folder,
    not an external DLL the wheel fails for."""
    run = dlltrace("deps", str(wheel("numpy_ft")))
    assert run.returncode == 0 and "no problem" in run.stdout, run.stdout[-3000:]
    assert "python313t.dll  already loaded (C:\\Python313t\\python313t.dll)  Python 3.13t" in run.stdout, run.stdout[-3000:]
    check = dlltrace("check", str(wheel("numpy_ft")), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout


def test_an_installed_package_folder_has_its_distributions_files_beside_it(tmp_path):
    """`check site-packages/numpy` of an installed numpy: delvewheel put its DLLs in numpy.libs, beside numpy/, and
    numpy's RECORD lists them; they are the package's (bundled, searched through its __init__'s add_dll_directory),
    so the folder passes as its wheel does, and so does one of its extensions given alone (installed_site_of). One of
    them deleted is numpy's file gone, and reinstalling numpy puts it back."""
    import zipfile

    site = tmp_path / "Lib" / "site-packages"
    with zipfile.ZipFile(wheel("numpy")) as z:
        z.extractall(site)
    check = dlltrace("check", str(site / "numpy"), "-q")
    assert check.returncode == 0 and check.stdout.startswith(f"PASS {site / 'numpy'}: 21 PE files"), check.stdout
    pyd = next((site / "numpy" / "_core").glob("_multiarray_umath.*.pyd"))  # (one file of it: its package's world)
    one = dlltrace("deps", str(pyd))
    assert one.returncode == 0 and "1 load resolved, no problem" in one.stdout, one.stdout[-3000:]
    assert "after numpy's delvewheel patch" in one.stdout and "numpy.libs\\libscipy_openblas64_" in one.stdout
    gone = next((site / "numpy.libs").glob("msvcp140-*.dll"))
    gone.unlink()
    run = dlltrace("deps", str(site / "numpy"))
    assert run.returncode == 1 and f"missing {gone.name}" in run.stdout, run.stdout[-3000:]
    assert (f"numpy 2.1.3's RECORD lists numpy.libs/{gone.name}, and it is gone: reinstall numpy "
            "(pip install --force-reinstall --no-deps numpy==2.1.3)") in run.stdout, run.stdout[-3000:]
    # a venv's site-packages (its PREFIX\\Scripts\\python.exe there): that Python's own pip, not the first on PATH
    (tmp_path / "Scripts").mkdir()
    (tmp_path / "Scripts" / "python.exe").write_bytes(b"MZ")
    run = dlltrace("deps", str(site / "numpy"))
    exe = tmp_path / "Scripts" / "python.exe"
    assert f"reinstall numpy ({exe} -m pip install --force-reinstall --no-deps numpy==2.1.3)" in run.stdout, \
        run.stdout[-3000:]


def test_site_interpreter(tmp_path):
    """The Python whose site-packages a folder is, when it is on this disk: a Windows venv's Scripts\\python.exe
    before its PREFIX\\python.exe; a POSIX PREFIX/lib/python3.11/site-packages's PREFIX/bin/python3; nothing for
    another folder, or when the file is not there."""
    from dlltrace.worlds.static import site_interpreter

    win = tmp_path / "w" / "Lib" / "site-packages"
    win.mkdir(parents=True)
    assert site_interpreter(win) == ""
    (tmp_path / "w" / "python.exe").write_bytes(b"MZ")
    assert site_interpreter(win) == str(tmp_path / "w" / "python.exe")
    (tmp_path / "w" / "Scripts").mkdir()
    (tmp_path / "w" / "Scripts" / "python.exe").write_bytes(b"MZ")
    assert site_interpreter(win) == str(tmp_path / "w" / "Scripts" / "python.exe")
    posix = tmp_path / "p" / "lib" / "python3.13t" / "site-packages"
    posix.mkdir(parents=True)
    (tmp_path / "p" / "bin").mkdir()
    (tmp_path / "p" / "bin" / "python3").write_bytes(b"")
    assert site_interpreter(posix) == str(tmp_path / "p" / "bin" / "python3")
    assert site_interpreter(tmp_path / "p" / "lib") == "" and site_interpreter(tmp_path / "nowhere" / "site-packages") == ""


def test_launcher_templates_are_not_wrong_machine(tmp_path):
    """pip (distlib's ScriptMaker) and setuptools (get_win_launcher) ship a Windows launcher for each machine --
    t32.exe, t64.exe, t64-arm.exe ..., cli-32.exe, cli-64.exe, cli-arm64.exe ... -- and copy the one for the running
    Python next to each script they install: the files in the package are templates (data/loaders.json
    distlib_launchers, setuptools_launchers), never loaded where they are; debugpy's attach helpers are for the
    target process's machine, injected there (pydevd_attach_helpers). Their wheels, and a site-packages with pip
    installed (every venv has it), pass; before, each was FAIL with 4, 6 or 3 'wrong machine'."""
    import zipfile

    for key in ("pip", "setuptools", "debugpy"):  # (debugpy: pydevd's attach helpers, for an x86 or x64 target)
        check = dlltrace("check", str(wheel(key)), "-q")
        assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout
    site = tmp_path / "Lib" / "site-packages"
    for key in ("pip", "setuptools", "numpy"):
        with zipfile.ZipFile(wheel(key)) as z:
            z.extractall(site)
    check = dlltrace("check", str(site), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout
    run = dlltrace("deps", str(site))
    assert run.returncode == 0 and "t32.exe" not in run.stdout and "cli-32.exe" not in run.stdout, run.stdout[-2000:]


def test_rule_il_only_image_fits_pythonnet_runtime():
    """pythonnet's Python.Runtime.dll is a .NET assembly of IL only built as PE32 (x86): the CLR loads it in a
    64-bit Python (the loader makes its headers PE32+). Its wheel passes check and deps; before, check failed it
    with 'wrong machine'. Its facts: machine x86, COMIMAGE_FLAGS_ILONLY set, 32BITREQUIRED not."""
    import zipfile

    from dlltrace.pe import pe_facts_from_bytes

    w = wheel("pythonnet")
    with zipfile.ZipFile(w) as z:
        facts = pe_facts_from_bytes(z.read("pythonnet/runtime/Python.Runtime.dll"))
    assert facts.machine == "x86" and facts.cor_flags is not None and facts.cor_flags & 0x3 == 0x1, facts
    check = dlltrace("check", str(w), "-q")
    assert check.returncode == 0 and check.stdout.startswith("PASS "), check.stdout
    run = dlltrace("deps", str(w))
    assert run.returncode == 0 and "1 load resolved, no problem" in run.stdout, run.stdout[-2000:]


def test_rule_optional_file_numba_threading_layer(tmp_path):
    """numba imports its TBB threading layer (tbbpool, which imports tbb12.dll from the tbb distribution) inside
    try/except ImportError and falls back to OpenMP or its workqueue (data/loaders.json numba_threading_layers):
    its wheel passes check with tbb12.dll `optional`, and deps shows the failed load and exits 0; before, both
    failed it. The same tbbpool file outside numba's place is not optional."""
    import zipfile

    w = wheel("numba")
    doc = json.loads(dlltrace("check", str(w), "--json").stdout)
    assert doc["ok"], doc["problems"]
    (tbb,) = [r for r in doc["dlls"] if r["dll"].lower() == "tbb12.dll"]
    assert tbb["status"] == "optional" and tbb["optional_by"] == "numba_threading_layers", tbb
    run = dlltrace("deps", str(w))
    assert run.returncode == 0 and "missing tbb12.dll" in run.stdout, run.stdout[-2000:]
    assert "optional (numba threading layer only), which the package does without" in run.stdout, run.stdout[-800:]
    # parallel.py's marker is the evidence: without it, tbbpool is a file like any other
    bare = tmp_path / w.name
    with zipfile.ZipFile(w) as src, zipfile.ZipFile(bare, "w") as dst:
        for info in src.infolist():
            if info.filename != "numba/np/ufunc/parallel.py":
                dst.writestr(info, src.read(info))
    check = dlltrace("check", str(bare), "--json")
    assert check.returncode == 1 and [p["dll"] for p in json.loads(check.stdout)["problems"]] == ["tbb12.dll"], \
        check.stdout[-2000:]
    # the same wheel with its package under numba-0.60.0.data/platlib/ (pip installs it to the same place): the
    # loader's marker is read from there too (before: not a loader file by its member name, and check failed it)
    moved = tmp_path / "platlib" / w.name
    moved.parent.mkdir()
    with zipfile.ZipFile(w) as src, zipfile.ZipFile(moved, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if not info.filename.split("/")[0].endswith(".dist-info"):
                info.filename = "numba-0.60.0.data/platlib/" + info.filename
            dst.writestr(info, data)
    doc = json.loads(dlltrace("check", str(moved), "--json").stdout)
    assert doc["ok"], doc["problems"]
    assert [r["status"] for r in doc["dlls"] if r["dll"].lower() == "tbb12.dll"] == ["optional"], doc["dlls"]


def test_rule_qt_plugin_folders(pes, tmp_path):
    """Qt loads each plugin under its prefix's plugins/ and qml/ only when a feature asks for it, and skips one
    that does not load (data/loaders.json qt_plugins; the QtCore DLL's place is the evidence): a DLL that only
    plugins import (PySide6_Essentials' LIBPQ.dll for qsqlpsql.dll, Qt53D*.dll from PyQt3D) is optional and the
    package passes; a DLL a module outside the plugins also imports is not; without a QtCore DLL nothing is."""
    import shutil

    site = tmp_path / "Lib" / "site-packages"
    for rel, key in (("PyQt5/Qt5/bin/Qt5Core.dll", "d"), ("PyQt5/Qt5/bin/b.dll", "b"),
                     ("PyQt5/Qt5/plugins/sqldrivers/qsqlpsql.dll", "a"), ("PyQt5/Qt5/qml/QtQuick/Scene3D/s3d.dll", "a")):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pes[key], site / rel)
    doc = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert doc["ok"], doc["problems"]
    rows = {r["dll"].lower(): r for r in doc["dlls"]}
    assert rows["c.dll"]["status"] == rows["d.dll"]["status"] == "optional", rows
    assert rows["c.dll"]["optional_by"] == "qt_plugins" and rows["b.dll"]["status"] == "bundled"
    deps = dlltrace("deps", str(site))
    assert deps.returncode == 0 and "optional (Qt plugins only)" in deps.stdout, deps.stdout[-2000:]
    # a plugin's host has loaded the Qt libraries from QtCore's folder: b.dll there is found, as it is for real (the
    # model adds that folder to a plugin's search: before, every plugin missed every Qt DLL, 101 of PyQt5-Qt5's 139
    # loads failed; now 10, each on a DLL of another wheel or product)
    loads = json.loads(dlltrace("deps", str(site), "--json").stdout)["loads"]
    plugin = [lo for lo in loads if lo["root"].lower().endswith("qsqlpsql.dll")][0]
    assert sorted(p["dll"].lower() for p in plugin["problems"]) == ["c.dll", "d.dll"], plugin["problems"]
    assert plugin["optional_by"] == "qt_plugins" and "Qt's plugin loader" in json.dumps(plugin["context"])
    # the Markdown says of each optional load what the terminal says (before: only its last line said it)
    md = dlltrace("deps", str(site), "--markdown")
    assert md.returncode == 0, md.stderr
    plugin = md.stdout.split("## `PyQt5\\Qt5\\plugins\\sqldrivers\\qsqlpsql.dll`", 1)[1].split("\n## ", 1)[0]
    assert "Optional (Qt plugins only): the package does without it." in plugin, plugin
    plugin = site / "PyQt5" / "Qt5" / "plugins" / "sqldrivers" / "qsqlpsql.dll"
    for named in (["deps", str(plugin)], ["deps", str(site), "--only", plugin.name]):  # (asked for by name: it fails)
        run = dlltrace(*named)
        assert run.returncode == 1 and "optional" not in run.stdout.splitlines()[-1], run.stdout[-1500:]
    one = dlltrace("check", str(site / "PyQt5"), "-q")  # (the package folder alone: the same loaders)
    assert one.returncode == 0 and "2 DLLs only optional files need" in one.stdout, one.stdout
    # the Windows platform plugin is no option: every QGuiApplication loads it
    platforms = site / "PyQt5" / "Qt5" / "plugins" / "platforms"
    platforms.mkdir(parents=True)
    shutil.copyfile(pes["a"], platforms / "qwindows.dll")
    doc = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert not doc["ok"] and {p["dll"].lower() for p in doc["problems"]} == {"c.dll", "d.dll"}, doc["problems"]
    assert dlltrace("deps", str(site)).returncode == 1
    (platforms / "qwindows.dll").unlink()
    # a module outside the plugins that needs c.dll too: c.dll is the package's failure again
    shutil.copyfile(pes["a"], site / "PyQt5" / "QtSql.pyd")
    doc = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert not doc["ok"] and {p["dll"].lower() for p in doc["problems"]} == {"c.dll", "d.dll"}, doc["problems"]
    assert dlltrace("deps", str(site)).returncode == 1
    (site / "PyQt5" / "QtSql.pyd").unlink()
    (site / "PyQt5" / "Qt5" / "bin" / "Qt5Core.dll").unlink()  # (no QtCore: no evidence the plugins are Qt's)
    assert not json.loads(dlltrace("check", str(site), "--json").stdout)["ok"]


def test_rule_optional_file_does_not_hide_a_dll_it_reaches(tmp_path):
    """deps loads every DLL no load before it reached as a root of its own; one an optional file (numba's tbbpool)
    reached first must still be: its failure is the package's (check fails it: y.dll is not an optional file), not
    the optional file's. Before, tbbpool's load reached y.dll, y.dll was never a root, its missing z.dll counted
    only as the optional load's, and deps exited 0 while check failed the same folder."""
    lib = _mingw_dlls(tmp_path, [("z", "__declspec(dllexport) int fz(void) { return 1; }", ()),
                                 ("y", "int fz(void);\n__declspec(dllexport) int fy(void) { return fz(); }", ("z",)),
                                 ("x", "int fy(void);\n__declspec(dllexport) int fx(void) { return fy(); }", ("y",))])
    site, ufunc = _numba_ufunc(tmp_path)
    (ufunc / "tbbpool.cp312-win_amd64.pyd").write_bytes((lib / "x.dll").read_bytes())
    (ufunc / "y.dll").write_bytes((lib / "y.dll").read_bytes())  # (z.dll: in no folder)
    check = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert [(p["dll"], p["needed_by"]) for p in check["problems"]] == [("z.dll", ["numba\\np\\ufunc\\y.dll"])], check
    run = dlltrace("deps", str(site), "--json")
    doc = json.loads(run.stdout)
    loads = {ld["root"].rsplit("\\", 1)[-1]: ld for ld in doc["loads"]}
    assert loads["tbbpool.cp312-win_amd64.pyd"]["optional_by"] == "numba_threading_layers", loads
    assert "y.dll" in loads and "optional_by" not in loads["y.dll"], list(loads)
    assert run.returncode == 1 and not doc["ok"], doc["summary"]
    # its Diagnosis: the optional load went on, and is classed so (rule_load_class: not `fatal`, its verdict)
    fails = {f["name"].rsplit("\\", 1)[-1]: (f["fate"], f["klass"]) for f in doc["diagnosis"]["failures"]}
    assert fails == {"tbbpool.cp312-win_amd64.pyd": ("went_on", "noise"), "y.dll": ("fatal", "fatal")}, fails


def test_rule_optional_file_imagecodecs_codecs(pes, tmp_path):
    """imagecodecs imports each codec's extension on first use inside try/except ImportError and puts a stub in its
    place (data/loaders.json imagecodecs_lazy_codecs, marker read in the real imagecodecs.py): a DLL only codecs
    need (heif.dll, jetraw.dll: SDKs its wheels leave out) is optional; one that _shared needs, which every codec
    imports, is not (the row's `required`)."""
    import shutil

    (seen,) = [s for r in loader_rows() if r.id == "imagecodecs_lazy_codecs" for s in r.seen]
    text = realwheels.or_skip(lambda: realwheels.loader_file(seen))
    site = tmp_path / "Lib" / "site-packages"
    (site / "imagecodecs").mkdir(parents=True)
    (site / "imagecodecs" / "imagecodecs.py").write_bytes(text)
    shutil.copyfile(pes["a"], site / "imagecodecs" / "_heif.cp312-win_amd64.pyd")  # (needs b.dll, c.dll, d.dll)
    shutil.copyfile(pes["b"], site / "imagecodecs" / "_shared.cp312-win_amd64.pyd")
    doc = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert doc["ok"], doc["problems"]
    assert {r["dll"].lower(): r.get("optional_by") for r in doc["dlls"] if r["status"] == "optional"} == \
        {"b.dll": "imagecodecs_lazy_codecs", "c.dll": "imagecodecs_lazy_codecs", "d.dll": "imagecodecs_lazy_codecs"}
    shutil.copyfile(pes["a"], site / "imagecodecs" / "_shared.cp312-win_amd64.pyd")
    doc = json.loads(dlltrace("check", str(site), "--json").stdout)
    assert not doc["ok"] and {p["dll"].lower() for p in doc["problems"]} == {"b.dll", "c.dll", "d.dll"}, doc["problems"]
    (site / "imagecodecs" / "imagecodecs.py").write_text("import importlib\n")  # (no marker: no loader, no option)
    (site / "imagecodecs" / "_shared.cp312-win_amd64.pyd").unlink()
    assert not json.loads(dlltrace("check", str(site), "--json").stdout)["ok"]


@pytest.mark.parametrize("rid", ["pyqt5_find_qt", "pyqt6_find_qt"])
def test_rule_pyqt_find_qt(pes, tmp_path, rid):
    """PyQt5's and PyQt6's __init__.py (find_qt, the real text, pinned) put <pkg>/Qt5/bin (Qt6/bin), where the
    PyQt5-Qt5 wheel has the Qt DLLs, on PATH and os.add_dll_directory() it: QtCore.pyd finds Qt5Core.dll there.
    Before these rows, PyQt5 5.15.11 with PyQt5-Qt5 5.15.2 installed: 47 of 177 loads failed (every extension
    missed Qt5Core.dll); now 10, each an optional plugin's external (PyQt6 6.8.0: 55 of 213, now 21)."""
    import shutil

    (seen,) = [s for r in loader_rows() if r.id == rid for s in r.seen]
    text = realwheels.or_skip(lambda: realwheels.loader_file(seen))
    pkg, qt = seen["dist"], "Qt" + seen["dist"][-1]
    site = tmp_path / "Lib" / "site-packages"
    (site / pkg / qt / "bin").mkdir(parents=True)
    (site / pkg / "__init__.py").write_bytes(text)
    shutil.copyfile(pes["a"], site / pkg / "QtCore.pyd")  # (needs b.dll, c.dll, d.dll: the Qt DLLs here)
    for n in "bcd":
        shutil.copyfile(pes[n], site / pkg / qt / "bin" / f"{n}.dll")
    run = dlltrace("deps", str(site))
    assert run.returncode == 0 and f"after {pkg}'s __init__.py" in run.stdout, run.stdout[-2000:]
    (site / pkg / "__init__.py").write_text("import os\n")  # (no find_qt: the DLLs are not found)
    run = dlltrace("deps", str(site))
    assert run.returncode == 1 and "missing b.dll" in run.stdout.lower(), run.stdout[-2000:]


def test_rule_optional_file_problems_of_its_own(tmp_path):
    """A file loaded only on demand (numba's tbbpool) whose own load fails on what the package bundles -- an export
    the bundled DLL lacks, or the file itself of another machine -- is no failure of the package in `check`, as
    it is none in `deps` (which goes on without it, exit 0): both pass, and both say it. Before, check failed the
    folder (missing export, wrong machine) that deps passed. The same problem in a file that is not optional
    still fails both."""
    lib = _mingw_dlls(tmp_path, [("y", "__declspec(dllexport) int fy(void) { return 1; }", ()),
                                 ("y2", "__declspec(dllexport) int other(void) { return 2; }", ()),
                                 ("x", "int fy(void);\n__declspec(dllexport) int fx(void) { return fy(); }", ("y",))])
    site, ufunc = _numba_ufunc(tmp_path)
    (ufunc / "tbbpool.cp312-win_amd64.pyd").write_bytes((lib / "x.dll").read_bytes())
    (ufunc / "y.dll").write_bytes((lib / "y2.dll").read_bytes())  # (a y.dll without fy)

    def both() -> tuple[dict, dict, str]:
        check = dlltrace("check", str(site), "--json")
        deps = dlltrace("deps", str(site), "--json")
        assert check.returncode == (0 if json.loads(check.stdout)["ok"] else 1), check.stderr
        assert deps.returncode == (0 if json.loads(deps.stdout)["ok"] else 1), deps.stderr
        return json.loads(check.stdout), json.loads(deps.stdout), dlltrace("check", str(site)).stdout

    check, deps, text = both()
    assert deps["ok"] and check["ok"], (check["problems"], deps["summary"])
    (p,) = check["optional_problems"]
    assert (p["kind"], p["dll"], p["exports"], p["optional_by"]) == ("missing_export", "y.dll", ["fy"],
                                                                   "numba_threading_layers"), p
    assert "1 problem only optional files have (missing export)" in text.splitlines()[-1], text
    assert "optional (numba threading layer only)" in text and "y.dll does not export fy" in text, text
    fates = {f["name"].rsplit("\\", 1)[-1]: f["fate"] for f in check["diagnosis"]["failures"]}
    assert fates == {"tbbpool.cp312-win_amd64.pyd": "went_on"}, check["diagnosis"]["failures"]
    # the optional file of another machine: both pass, and say so
    (ufunc / "y.dll").write_bytes((lib / "y.dll").read_bytes())
    (ufunc / "tbbpool.cp312-win_amd64.pyd").write_bytes(_machine(lib / "x.dll", 0x14C))
    check, deps, _ = both()
    assert check["ok"] and deps["ok"], (check["problems"], deps["summary"])
    assert [(p["kind"], p["optional_by"]) for p in check["optional_problems"]] == [("wrong_machine",
                                                                                    "numba_threading_layers")]
    # not optional (parallel.py no longer imports it): the missing export fails both, as before
    (ufunc / "tbbpool.cp312-win_amd64.pyd").write_bytes((lib / "x.dll").read_bytes())
    (ufunc / "y.dll").write_bytes((lib / "y2.dll").read_bytes())
    (ufunc / "parallel.py").write_text("import os\n")
    check, deps, _ = both()
    assert not check["ok"] and not deps["ok"] and check["optional_problems"] == []
    assert [(p["kind"], p["dll"]) for p in check["problems"]] == [("missing_export", "y.dll")], check["problems"]


def _mingw_dlls(tmp_path: Path, dlls: list[tuple[str, str, tuple[str, ...]]]) -> Path:
    """tmp_path/lib with <name>.dll built by mingw for each (name, C source, the names of the DLLs built before it that
    it links to), each with its import library lib<name>.a."""
    from winetools import mingw_compile, require

    require("mingw64")
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, code, links in dlls:
        (lib / f"{name}.c").write_text(code + "\n")
        mingw_compile([lib / f"{name}.c", *(lib / f"lib{n}.a" for n in links)], lib / f"{name}.dll", dll=True,
                      extra=[f"-Wl,--out-implib,{lib / f'lib{name}.a'}"])
    return lib


def _numba_ufunc(tmp_path: Path) -> tuple[Path, Path]:
    """A site-packages in tmp_path with numba's np/ufunc folder whose parallel.py imports tbbpool (data/loaders.json
    numba_threading_layers' marker): (the site, the folder)."""
    site = tmp_path / "Lib" / "site-packages"
    ufunc = site / "numba" / "np" / "ufunc"
    ufunc.mkdir(parents=True)
    (ufunc / "parallel.py").write_text("    from numba.np.ufunc import tbbpool as lib\n")
    return site, ufunc


def _machine(dll: Path, machine: int) -> bytes:
    """The DLL's bytes with its COFF header's Machine field set to `machine` (an x86 one: 0x14C)."""
    import struct

    data = bytearray(dll.read_bytes())
    pe_at = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<H", data, pe_at + 4, machine)
    return bytes(data)


def test_rule_optional_files_of_the_package(tmp_path):
    """A file its package loads only on demand (numba's tbbpool) that a file it loads at once also imports is no
    optional file: deps loads it as part of that file's load, whose failure is the package's (exit 1), so check's
    problems of it (a missing export of the DLL it binds to, its machine) and the DLLs it needs fail check too.
    Before, check passed what deps failed (the optional file's problems were set apart whoever imported it)."""
    from winetools import mingw_compile, require

    require("mingw64")
    lib = tmp_path / "lib"
    lib.mkdir()
    pyd = "tbbpool.cp312-win_amd64.pyd"
    (lib / "y.c").write_text("__declspec(dllexport) int fy(void) { return 1; }\n")
    (lib / "y2.c").write_text("__declspec(dllexport) int other(void) { return 2; }\n")
    (lib / "x.c").write_text("int fy(void);\n__declspec(dllexport) int fx(void) { return fy(); }\n")
    (lib / "u.c").write_text("int fx(void);\n__declspec(dllexport) int fu(void) { return fx(); }\n")
    mingw_compile([lib / "y.c"], lib / "y.dll", dll=True, extra=[f"-Wl,--out-implib,{lib / 'liby.a'}"])
    mingw_compile([lib / "y2.c"], lib / "y2.dll", dll=True)
    mingw_compile([lib / "x.c", lib / "liby.a"], lib / pyd, dll=True, extra=[f"-Wl,--out-implib,{lib / 'libx.a'}"])
    mingw_compile([lib / "u.c", lib / "libx.a"], lib / "u.dll", dll=True)
    site = tmp_path / "Lib" / "site-packages"
    ufunc = site / "numba" / "np" / "ufunc"
    ufunc.mkdir(parents=True)
    (ufunc / "parallel.py").write_text("    from numba.np.ufunc import tbbpool as lib\n")
    (ufunc / pyd).write_bytes((lib / pyd).read_bytes())
    (ufunc / "y.dll").write_bytes((lib / "y2.dll").read_bytes())  # (a y.dll without fy)
    (ufunc / "_helper.dll").write_bytes((lib / "u.dll").read_bytes())  # (not optional; imports tbbpool)

    def both() -> tuple[dict, dict]:
        check = dlltrace("check", str(site), "--json")
        deps = dlltrace("deps", str(site), "--json")
        assert check.returncode == (0 if json.loads(check.stdout)["ok"] else 1), check.stderr
        assert deps.returncode == (0 if json.loads(deps.stdout)["ok"] else 1), deps.stderr
        return json.loads(check.stdout), json.loads(deps.stdout)

    check, deps = both()
    assert not deps["ok"] and not check["ok"], (check["optional_problems"], deps["summary"])
    assert [(p["kind"], p["dll"], p["needed_by"]) for p in check["problems"]] == [
        ("missing_export", "y.dll", [f"numba\\np\\ufunc\\{pyd}"])], check["problems"]
    assert check["optional_problems"] == []
    # of another machine: the same
    (ufunc / "y.dll").write_bytes((lib / "y.dll").read_bytes())
    (ufunc / pyd).write_bytes(_machine(lib / pyd, 0x14C))
    check, deps = both()
    assert not deps["ok"] and not check["ok"], (check["optional_problems"], deps["summary"])
    assert [(p["kind"], p["dll"]) for p in check["problems"]] == [("wrong_machine", pyd)], check["problems"]
    # a DLL only it needs, not in the package: not optional either
    (ufunc / pyd).write_bytes((lib / pyd).read_bytes())
    (ufunc / "y.dll").unlink()
    check, deps = both()
    assert not deps["ok"] and not check["ok"], (check["dlls"], deps["summary"])
    assert [(p["kind"], p["dll"]) for p in check["problems"]] == [("not_allowed", "y.dll")], check["problems"]
    # no file loaded at once imports it: optional again, both pass
    (ufunc / "_helper.dll").unlink()
    check, deps = both()
    assert deps["ok"] and check["ok"], (check["problems"], deps["summary"])


def test_rule_record_of_installed_files_of_an_optional_file(tmp_path):
    """An installed numba whose TBB threading layer (loaded only on demand) is cut short: check sets the file
    apart (an optional problem, not a failure) and, as deps does for the same file, says it is not the file numba
    installed (its RECORD's digest differs), with the reinstall it takes. Before, check's optional problem was not
    set against the RECORD: no owner, no words."""
    import zipfile

    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel("numba")) as z:
        z.extractall(site)
    (pyd,) = (site / "numba" / "np" / "ufunc").glob("tbbpool*.pyd")
    pyd.write_bytes(pyd.read_bytes()[:4096])  # (its headers, cut short: not a PE any more)
    check = dlltrace("check", str(site), "--json")
    doc = json.loads(check.stdout)
    assert check.returncode == 0 and doc["ok"], doc["problems"]
    (p,) = [p for p in doc["optional_problems"] if p["dll"] == pyd.name]
    assert p["kind"] == "not_pe" and p["optional_by"] == "numba_threading_layers", p
    assert (p["owner"]["dist"], p["owner"]["record"]) == ("numba", "differs"), p
    deps = json.loads(dlltrace("deps", str(site), "--json").stdout)
    owners = [q["owner"]["record"] for a in deps["loads"] for q in a["problems"] if q["dll"] == pyd.name]
    assert owners == ["differs"], owners
    text = dlltrace("check", str(site)).stdout
    assert "it is not the file numba 0.60.0 installed (it differs from its RECORD's digest)" in text, text[-2000:]


def test_rule_optional_file_of_a_loader_in_two_members(tmp_path):
    """A wheel with a loader's file twice, as a plain member and under <name>.data/platlib/ (the same place in
    site-packages): pip installs the plain members first and the .data ones after, over them, so the .data copy
    is the one the package runs, whichever the zip lists first. numba's parallel.py with the threading layers'
    marker in one copy only: tbb12.dll is optional exactly when the .data copy has it. Before, the first member
    listed won (a plain parallel.py listed first decided)."""
    import zipfile

    w = wheel("numba")
    with zipfile.ZipFile(w) as src:
        real = src.read("numba/np/ufunc/parallel.py")
    for data_has_it in (True, False):
        twice = tmp_path / str(data_has_it) / w.name
        twice.parent.mkdir()
        with zipfile.ZipFile(w) as src, zipfile.ZipFile(twice, "w") as dst:
            for info in src.infolist():
                if info.filename == "numba/np/ufunc/parallel.py":
                    dst.writestr(info.filename, b"import os\n" if data_has_it else real)  # (the plain copy first)
                    continue
                dst.writestr(info, src.read(info))
            dst.writestr("numba-0.60.0.data/platlib/numba/np/ufunc/parallel.py", real if data_has_it else b"import os\n")
        doc = json.loads(dlltrace("check", str(twice), "--json").stdout)
        tbb = [r["status"] for r in doc["dlls"] if r["dll"].lower() == "tbb12.dll"]
        assert (doc["ok"], tbb) == ((True, ["optional"]) if data_has_it else (False, ["not_allowed"])), doc["problems"]
