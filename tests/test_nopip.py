"""What no pip package ships (issue 23 item 3), as data (tracer/dlltrace/data/packages.json) and the fix each
gets: the Visual C++ runtimes by DLL name, with the first redistributable that ships each DLL and the one that
first has an export; the legacy DirectX runtime; Windows' Media Feature Pack (N and KN editions); the Python
interpreter's own DLLs by the Python they name; a DLL of every vanilla Windows. None of them is ever "find the
package that ships X"."""

from __future__ import annotations

import pytest

from dlltrace.packages import lookup
from dlltrace.render.fixwords import fix_text
from simhelp import scenario

PY = "C:\\Python311"
SITE = PY + "\\Lib\\site-packages"
SYS = "C:\\Windows\\System32"


def first_fix(imports, files=(), python="3.11.9", machine="x64", exports_needed=None):
    """The failing import of an extension that imports `imports`, and the text of its first fix."""
    pyd = {"path": SITE + "\\pkg\\_ext.cp311-win_amd64.pyd", "imports": list(imports)}
    if exports_needed:
        pyd["imports"] = [{"dll": d, "names": names} for d, names in exports_needed.items()] + list(imports)
    sc = scenario([pyd, *files], [{"op": "python_import", "module": "pkg._ext", "path": pyd["path"]}],
                  exe=PY + "\\python.exe", python=python, path=[PY], cwd="C:\\work")
    res = sc.run()[-1]
    assert res.error in (126, 127), res
    texts = [fix_text(f) for f in res.fixes]
    assert texts, res
    assert not any("Find the package that ships" in t for t in texts), texts
    return res, texts[0]


@pytest.mark.parametrize("dll, year, url", [
    ("msvcr100.dll", "2010 SP1", "165255E7-1014-4D0A-B094-B6A430A6BFFC/vcredist_x64.exe"),
    ("msvcp120.dll", "2013", "cee5d6bca2ddbcd039da727bf4acb48a/vcredist_x64.exe"),
    ("msvcr110.dll", "2012 Update 4", "VSU_4/vcredist_x64.exe"),
])
def test_rule_legacy_vc_runtime_names_its_own_redistributable(dll, year, url):
    res, text = first_fix([dll])
    assert res.leaf.name.lower() == dll
    assert f"Visual C++ {year} Redistributable" in text and url in text and "does not replace" in text, text


def test_rule_vc_2008_is_a_side_by_side_assembly_a_copy_on_path_does_not_bind():
    _, text = first_fix(["msvcr90.dll"])
    assert "2008 SP1" in text and "side-by-side" in text and "vcredist_x64.exe" in text, text


@pytest.mark.parametrize("dll, since", [("vcruntime140_1.dll", "14.20"), ("msvcp140_atomic_wait.dll", "14.28"),
                                        ("msvcp140_codecvt_ids.dll", "14.22"), ("msvcp140_2.dll", "14.14")])
def test_rule_vc14_satellite_names_the_first_redistributable_that_ships_it(dll, since):
    _, text = first_fix([dll])
    assert f"first shipped with version {since}" in text and "https://aka.ms/vc14/vc_redist.x64.exe" in text, text


def test_rule_vc_export_names_the_redistributable_that_first_has_it():
    """`__std_tzdb_delete_time_zones` (C++20 chrono time zones) came with msvcp140_atomic_wait.dll 14.29: a
    System32 copy of 14.28 lacks it (error 127); the fix names 14.29 and the redistributable."""
    old = {"path": SYS + "\\msvcp140_atomic_wait.dll", "version": "14.28.29231.0",
           "exports": ["__std_atomic_wait_direct"]}
    res, text = first_fix([], files=[old], exports_needed={"msvcp140_atomic_wait.dll": ["__std_tzdb_delete_time_zones"]})
    assert res.error == 127 and res.leaf.cause == "missing_export"
    assert "lacks __std_tzdb_delete_time_zones" in text and "first shipped with version 14.29" in text, text
    assert "14.28.29231.0" in text and "vc_redist.x64.exe" in text
    assert lookup("msvcp140_atomic_wait.dll").export_since("__std_atomic_wait_direct") == "14.28"
    assert lookup("msvcp140_atomic_wait.dll").export_since("not_an_export") is None


@pytest.mark.parametrize("dll", ["d3dx9_43.dll", "xinput1_3.dll", "xaudio2_7.dll", "d3dcompiler_43.dll", "d3dx11_43.dll"])
def test_rule_legacy_directx_is_the_june_2010_runtime(dll):
    _, text = first_fix([dll])
    assert "DirectX End-User Runtime (June 2010)" in text and "id=8109" in text, text


@pytest.mark.parametrize("dll", ["xinput1_4.dll", "xaudio2_9.dll", "d3dcompiler_47.dll", "xinput9_1_0.dll"])
def test_the_directx_parts_windows_ships_are_not_the_legacy_runtime(dll):
    p = lookup(dll)
    assert p is None or p.kind == "windows", p


@pytest.mark.parametrize("dll", ["mfplat.dll", "mfreadwrite.dll"])
def test_rule_media_feature_pack_on_n_editions(dll):
    _, text = first_fix([dll])
    assert "Media Feature Pack" in text and "N and KN" in text and "Media.MediaFeaturePack~~~~0.0.1.0" in text, text
    assert "Server-Media-Foundation" in text


def test_rule_a_dll_of_every_windows_that_this_windows_lacks():
    """wmvcore.dll is in every vanilla Windows 10/11 System32 (data/windows-system.json), not in packages.json:
    part of Windows, not a package to find."""
    assert lookup("wmvcore.dll") is None
    _, text = first_fix(["wmvcore.dll"])
    assert text.startswith("wmvcore.dll is part of Windows"), text


@pytest.mark.parametrize("dll, python, built", [("python310.dll", "3.11.9", "3.10"), ("python313t.dll", "3.13.1", "3.13 free-threaded")])
def test_rule_python_dll_names_the_python_the_extension_was_built_for(dll, python, built):
    _, text = first_fix([dll], python=python)
    this = ".".join(python.split(".")[:2])
    assert f"{dll} is the Python {built} interpreter's own DLL" in text and f"this is Python {this}" in text, text
    assert "_ext.cp311-win_amd64.pyd was built for" in text


def test_the_data_dates_each_vc14_dll_and_every_legacy_row_has_an_installer():
    from dlltrace.packages import load

    rows = {r.id: r for r in load()}
    assert rows["msvc-runtime"].since == "14.0" and "msvcp140.dll" in rows["msvc-runtime"].names
    for r in rows.values():
        if r.kind in ("msvc_legacy", "directx_legacy", "windows_feature"):
            assert r.download and all(u.startswith("https://") for u in r.download.values()), r.id
        if r.kind == "msvc_runtime":  # (dated where a source dates it: vcruntime140_threads's first build is not)
            assert r.download and r.download.get("x64") == "https://aka.ms/vc14/vc_redist.x64.exe", r.id
            assert bool(r.since) == (r.id != "msvc-runtime-14.38"), r.id
    assert [r.id for r in rows.values() if r.side_by_side] == ["msvc-2008", "msvc-2005"]
