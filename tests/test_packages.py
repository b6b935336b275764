"""dlltrace.packages and its data (tracer/dlltrace/data/packages.json): which package, driver or part
of the system provides a DLL by name.

Two kinds of test:
- lookup: the rows give the right provider, and every mapping the old regex table in
  diagnosis/explain.py got wrong has its own test; the loader refuses a malformed file.
- real wheels: for every wheel the data file's "checked" section names (pinned below as well), the
  wheel's file list, read from its zip central directory with HTTP Range requests against the PyPI
  file (the 400-700 MB cuBLAS / cuDNN wheels are never downloaded whole), holds each row's DLLs in
  the row's folder, and the wheel is not a placeholder. File lists are cached as JSON under
  CACHE/wheel-lists/, so a rerun is offline. Without the network and without a cached list the
  test skips, saying why; in CI (CI set) it fails instead.
"""

from __future__ import annotations

import copy
import http.client
import io
import json
import os
import re
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Optional

import pytest

import winetools
from dlltrace import packages
from dlltrace.packages import PackageDataError, Provider, cuda_major_of, lookup, providers, wheel_folders

DATA = Path(packages.__file__).resolve().parent / "data" / packages.DATA_FILE
LIST_CACHE = winetools.DOWNLOADS / "wheel-lists"  # (downloaded facts of files that never change)
CHECK_DAYS = ("2026-12-01", "2026-12-06")  # the days the rows were checked (the data file's "checked" dates)


def raw_data() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def pip(name: str, cuda_major: Optional[int] = None) -> Provider:
    p = lookup(name, cuda_major=cuda_major)
    assert p is not None, f"no row for {name}"
    assert p.kind == "pip", (name, p)
    return p


# ----------------------------------------------------------------------------- the old table's mistakes
def test_cuda13_cublas_is_the_unsuffixed_package_in_the_shared_folder():
    for name in ("cublas64_13.dll", "cublasLt64_13.dll"):
        p = pip(name)
        assert (p.package, p.requirement, p.cuda_major) == ("nvidia-cublas", "nvidia-cublas", 13)
        assert (p.root, p.folder, p.win_folder) == ("site-packages", "nvidia/cu13/bin/x86_64", "nvidia\\cu13\\bin\\x86_64")


def test_cuda13_runtime_is_not_the_placeholder():
    p = pip("cudart64_13.dll")
    assert p.package == "nvidia-cuda-runtime" and p.folder == "nvidia/cu13/bin/x86_64"
    placeholders = {x["package"] for x in raw_data()["placeholders"]}
    assert {"nvidia-cublas-cu13", "nvidia-cuda-runtime-cu13"} <= placeholders
    assert not placeholders & {r.package for r in packages.load() if r.package}


def test_cuda11_runtime_gets_the_cu11_package():
    p = pip("cudart64_110.dll")
    assert (p.package, p.cuda_major, p.folder) == ("nvidia-cuda-runtime-cu11", 11, "nvidia/cuda_runtime/bin")
    assert pip("cudart64_12.dll").package == "nvidia-cuda-runtime-cu12"


def test_cufft_names_follow_cufft_majors_not_cuda_majors():
    # cuFFT 10 / 11 / 12 ship with CUDA 11 / 12 / 13
    assert pip("cufft64_10.dll").package == "nvidia-cufft-cu11"
    assert pip("cufft64_11.dll").package == "nvidia-cufft-cu12"
    p = pip("cufft64_12.dll")
    assert (p.package, p.cuda_major, p.folder) == ("nvidia-cufft", 13, "nvidia/cu13/bin/x86_64")
    assert pip("cufftw64_12.dll").package == "nvidia-cufft"


def test_cuda13_nvrtc_and_nvjitlink():
    assert (pip("nvrtc64_130_0.dll").package, pip("nvrtc64_130_0.dll").cuda_major) == ("nvidia-cuda-nvrtc", 13)
    assert pip("nvJitLink_130_0.dll").package == "nvidia-nvjitlink"
    assert pip("nvjitlink_130_0.dll").package == "nvidia-nvjitlink"  # names compare case-insensitively
    assert pip("nvrtc64_120_0.dll").package == "nvidia-cuda-nvrtc-cu12"
    assert pip("nvrtc64_112_0.dll").package == "nvidia-cuda-nvrtc-cu11"
    assert pip("nvJitLink_120_0.dll").package == "nvidia-nvjitlink-cu12"
    assert pip("nvrtc-builtins64_135.dll").package == "nvidia-cuda-nvrtc"
    assert pip("nvrtc-builtins64_124.dll").package == "nvidia-cuda-nvrtc-cu12"
    assert lookup("nvrtc64_120_0_extra.dll") is None  # the old regex matched any nvrtc64_* prefix


def test_cudnn9_follows_the_process_cuda_major():
    assert pip("cudnn64_9.dll", cuda_major=13).package == "nvidia-cudnn-cu13"
    assert pip("cudnn64_9.dll", cuda_major=12).package == "nvidia-cudnn-cu12"
    assert pip("cudnn64_9.dll", cuda_major=11).package == "nvidia-cudnn-cu11"
    p = pip("cudnn_graph64_9.dll", cuda_major=13)
    assert (p.package, p.requirement, p.folder) == ("nvidia-cudnn-cu13", "nvidia-cudnn-cu13>=9,<10", "nvidia/cudnn/bin")
    # unknown major: the newest
    assert pip("cudnn64_9.dll").package == "nvidia-cudnn-cu13"
    assert [p.package for p in providers("cudnn64_9.dll")] == ["nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"]
    assert cuda_major_of("cudnn64_9.dll") is None


def test_cudnn8_needs_a_version_below_9():
    p = pip("cudnn64_8.dll", cuda_major=11)
    assert (p.package, p.requirement) == ("nvidia-cudnn-cu11", "nvidia-cudnn-cu11<9")
    assert pip("cudnn_ops_infer64_8.dll", cuda_major=12).requirement == "nvidia-cudnn-cu12<9"
    # no cuDNN 8 for CUDA 13: the name decides, the newest of its rows
    assert pip("cudnn64_8.dll", cuda_major=13).package == "nvidia-cudnn-cu12"


def test_cudnn7_is_not_on_pypi():
    p = lookup("cudnn64_7.dll")
    assert p is not None and p.kind == "archive" and p.package is None and p.requirement is None


def test_names_of_several_cuda_majors():
    assert pip("curand64_10.dll", cuda_major=11).package == "nvidia-curand-cu11"
    assert pip("curand64_10.dll", cuda_major=12).package == "nvidia-curand-cu12"
    assert pip("curand64_10.dll", cuda_major=13).package == "nvidia-curand"
    assert pip("cusolver64_11.dll", cuda_major=12).package == "nvidia-cusolver-cu12"  # cuSOLVER 11 is CUDA 12's too
    assert pip("cusolver64_12.dll").package == "nvidia-cusolver"
    assert pip("cusparse64_12.dll", cuda_major=12).package == "nvidia-cusparse-cu12"
    assert pip("cusparse64_12.dll", cuda_major=13).package == "nvidia-cusparse"


def test_a_name_that_implies_its_major_ignores_the_process_major():
    p = pip("cublas64_12.dll", cuda_major=13)
    assert (p.package, p.cuda_major, p.folder) == ("nvidia-cublas-cu12", 12, "nvidia/cublas/bin")
    assert pip("cublas64_11.dll").package == "nvidia-cublas-cu11"


def test_cuda_major_of():
    assert [cuda_major_of(n) for n in ("cudart64_110.dll", "cublas64_12.dll", "CUBLASLT64_13.DLL", "cufft64_12.dll",
                                       "nvJitLink_130_0.dll", "cudart64_102.dll")] == [11, 12, 13, 13, 13, 10]
    assert [cuda_major_of(n) for n in ("curand64_10.dll", "cudnn64_9.dll", "cusparse64_12.dll", "kernel32.dll",
                                       "unknown.dll")] == [None] * 5


@pytest.mark.parametrize("name", ["nvcuda.dll", "nvml.dll", "NVCUDA.DLL", "nvcudart_hybrid64.dll"])
def test_nvidia_driver_is_never_a_pip_package(name):
    p = lookup(name)
    assert p is not None
    assert (p.kind, p.package, p.requirement, p.root, p.folder) == ("driver", None, None, "", "")


@pytest.mark.parametrize("name", ["kernel32.dll", "KERNEL32.dll", "dxcore.dll", "dxgi.dll", "d3d12.dll", "ws2_32.dll",
                                  "api-ms-win-crt-runtime-l1-1-0.dll", "api-ms-win-core-path-l1-1-0.dll", "ucrtbase.dll"])
def test_windows_dlls(name):
    p = lookup(name)
    assert p is not None and p.kind == "windows" and p.package is None


@pytest.mark.parametrize("name", ["python311.dll", "python3.dll", "python39.dll", "python313.dll"])
def test_python_dll_is_the_interpreter(name):
    p = lookup(name)
    assert p is not None and (p.kind, p.package) == ("python", None)


@pytest.mark.parametrize("name", ["c10.dll", "torch_cpu.dll", "fbgemm.dll", "asmjit.dll", "uv.dll", "shm.dll",
                                  "torch_python.dll", "torch_global_deps.dll", "torch_cuda.dll"])
def test_torch_own_dlls_mean_reinstall_torch(name):
    p = lookup(name)
    assert p is not None
    assert (p.kind, p.package, p.requirement, p.root, p.folder) == ("package_itself", "torch", None, "site-packages", "torch/lib")


@pytest.mark.parametrize("name", ["msvcp140.dll", "MSVCP140_1.dll", "msvcp140_atomic_wait.dll", "vcruntime140.dll",
                                  "VCRUNTIME140_1.dll", "concrt140.dll", "vcomp140.dll"])
def test_msvc_runtime(name):
    p = lookup(name)
    assert p is not None and (p.kind, p.package) == ("msvc_runtime", None)


def test_libomp140_is_a_visual_studio_component():
    p = lookup("libomp140.x86_64.dll")
    assert p is not None and (p.kind, p.package) == ("vs_component", None)
    assert lookup("vcomp140.dll").kind == "msvc_runtime"  # the Redistributable's own OpenMP is not


def test_intel_openmp_and_mkl_install_under_the_prefix():
    p = pip("libiomp5md.dll")
    assert (p.package, p.root, p.folder, p.win_folder) == ("intel-openmp", "prefix", "Library/bin", "Library\\bin")
    assert pip("mkl_rt.3.dll").requirement == "mkl>=2026"
    assert pip("mkl_core.2.dll").requirement == "mkl>=2022,<2026"
    assert pip("mkl_blacs_lp64.2.dll").requirement == "mkl>=2022"  # still *.2 in mkl 2026
    assert pip("mkl_rt.1.dll").requirement == "mkl>=2021,<2022"
    assert pip("mkl_rt.dll").requirement == "mkl<2021"
    assert all(pip(n).root == "prefix" and pip(n).folder == "Library/bin" for n in ("mkl_rt.3.dll", "tbb12.dll"))


def test_openslide_is_the_openslide_bin_wheel():
    """openslide-python 1.4 ships no OpenSlide: the openslide-bin wheel ships libopenslide-1.dll (its only DLL)."""
    p = pip("libopenslide-1.dll")
    assert (p.package, p.requirement, p.root, p.folder) == ("openslide-bin", "openslide-bin", "site-packages",
                                                           "openslide_bin")
    assert lookup("libopenslide-0.dll") is None  # (OpenSlide 3's name: no pip package ships it)


def test_libusb_is_the_libusb_package_wheel():
    """pyusb ships no libusb: the libusb-package wheel ships libusb-1.0.dll (its only DLL) in its own folder."""
    p = pip("libusb-1.0.dll")
    assert (p.package, p.requirement, p.root, p.folder) == ("libusb-package", "libusb-package", "site-packages",
                                                           "libusb_package")
    assert lookup("usb-1.0.dll") is None and lookup("libusb0.dll") is None  # (pyusb's other names: no wheel's)


def test_libmagic_is_the_python_magic_bin_wheel_which_replaces_python_magic():
    """python-magic ships no libmagic; python-magic-bin ships libmagic.dll in magic/libmagic and its own module magic,
    which replaces python-magic's (analysis.rule_package_that_replaces_the_module)."""
    p = pip("libmagic.dll")
    assert (p.package, p.requirement, p.root, p.folder, p.replaces) == (
        "python-magic-bin", "python-magic-bin", "site-packages", "magic/libmagic", "python-magic")
    assert pip("libusb-1.0.dll").replaces is None


def test_lookup_takes_a_path_and_keeps_the_name():
    p = lookup(r"C:\env\Lib\site-packages\nvidia\cu13\bin\x86_64\CUBLAS64_13.DLL")
    assert p is not None and p.dll == "CUBLAS64_13.DLL" and p.package == "nvidia-cublas"
    assert lookup("C:/x/cudart64_12.dll").package == "nvidia-cuda-runtime-cu12"


def test_unknown_names():
    for name in ("foo.dll", "cublas64_99.dll", "cudart64_14.dll", "kernel32.dll.bak", "", "mkl_rt.3.dll.old"):
        assert lookup(name) is None, name


def test_wheel_folders():
    folders = wheel_folders()
    for f in [("site-packages", "nvidia/cu13/bin/x86_64"), ("site-packages", "nvidia/cublas/bin"),
              ("site-packages", "nvidia/cuda_runtime/bin"), ("site-packages", "nvidia/cudnn/bin"),
              ("site-packages", "nvidia/cufft/bin"), ("site-packages", "nvidia/nvjitlink/bin"),
              ("prefix", "Library/bin"), ("site-packages", "torch/lib")]:
        assert f in folders, f
    assert len(folders) == len(set(folders))
    assert all(root in ("site-packages", "prefix") and folder and "\\" not in folder for root, folder in folders)
    # every pip row's folder is there
    assert {(r.root, r.folder) for r in packages.load() if r.kind == "pip"} <= set(folders)


def test_every_kind_has_a_row_and_rows_are_sourced():
    rows = packages.load()
    assert {r.kind for r in rows} == set(packages.KINDS)
    assert all(r.source for r in rows)


# ----------------------------------------------------------------------------- the loader refuses bad data
def _row(data: dict, rid: str) -> dict:
    return next(r for r in data["rows"] if r["id"] == rid)


def _break(edit) -> str:
    data = copy.deepcopy(raw_data())
    edit(data)
    with pytest.raises(PackageDataError) as e:
        packages.parse(data)
    return str(e.value)


def test_the_shipped_file_parses():
    assert len(packages.parse(raw_data())) == len(raw_data()["rows"]) == len(packages.load())


def test_malformed_data_raises_a_clear_error():
    assert "version" in _break(lambda d: d.update(version=2))
    assert "kind" in _break(lambda d: _row(d, "cublas-cu13").update(kind="conda"))
    assert "root" in _break(lambda d: _row(d, "cublas-cu13").update(root="Lib"))
    assert "folder" in _break(lambda d: _row(d, "cublas-cu13").update(folder="nvidia\\cu13\\bin"))
    assert "folder" in _break(lambda d: _row(d, "cublas-cu13").update(folder=""))
    assert "requirement" in _break(lambda d: _row(d, "cublas-cu13").update(requirement=None))
    assert "requirement" in _break(lambda d: _row(d, "cublas-cu13").update(requirement="nvidia-cufft"))
    assert "package" in _break(lambda d: _row(d, "nvidia-driver").update(package="nvidia-ml-py"))
    assert "cuda_major" in _break(lambda d: _row(d, "cublas-cu13").update(cuda_major=14))
    assert "cuda_major" in _break(lambda d: _row(d, "cublas-cu13").pop("cuda_major"))
    assert "pattern" in _break(lambda d: _row(d, "mkl-3").update(pattern="mkl_[a-z"))
    assert "example" in _break(lambda d: _row(d, "mkl-3").update(examples=["mkl_rt.2.dll"]))
    assert "exactly one" in _break(lambda d: _row(d, "mkl-3").update(names=["mkl_rt.3.dll"]))
    assert "unknown keys" in _break(lambda d: _row(d, "mkl-3").update(folders="x"))
    assert "replaces" in _break(lambda d: _row(d, "nvidia-driver").update(replaces="python-magic"))
    assert "replaces" in _break(lambda d: _row(d, "python-magic-bin").update(replaces=""))
    assert "twice" in _break(lambda d: d["rows"].append(dict(_row(d, "cublas-cu13"))))
    # the same name in two rows: only CUDA-major alternatives
    assert "distinct CUDA majors" in _break(lambda d: _row(d, "windows")["names"].append("nvcuda.dll"))
    assert "distinct CUDA majors" in _break(lambda d: _row(d, "curand-cu12").update(cuda_major=13))
    assert "placeholder" in _break(lambda d: _row(d, "cublas-cu13").update(package="nvidia-cublas-cu13",
                                                                            requirement="nvidia-cublas-cu13"))
    assert "do not exist" in _break(lambda d: d["checked"][0]["rows"].append("no-such-row"))
    assert "date" in _break(lambda d: d["checked"][0].update(date="1 Dec 2026"))


def test_a_broken_file_fails_loading(monkeypatch, tmp_path):
    # load() reads the package's data file (datafiles.read_data); give it a broken copy
    monkeypatch.setattr(packages, "read_data", lambda name: "{not json" if name == packages.DATA_FILE else "")
    packages.load.cache_clear()
    try:
        with pytest.raises(PackageDataError, match="not JSON"):
            packages.load()
    finally:
        monkeypatch.undo()
        packages.load.cache_clear()
    assert packages.load()


def test_the_data_file_ships_in_the_package():
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'dlltrace\s*=\s*\[[^\]]*"data/\*\.json"', text)


# ----------------------------------------------------------------------------- real wheels
# Every wheel the data file says was checked, pinned by file name (project and version in it).
PINNED = [
    "nvidia_cuda_runtime_cu11-11.8.89-py3-none-win_amd64.whl",
    "nvidia_cuda_runtime_cu12-12.9.79-py3-none-win_amd64.whl",
    "nvidia_cuda_runtime-13.5.37-py3-none-win_amd64.whl",
    "nvidia_cublas_cu11-11.11.3.6-py3-none-win_amd64.whl",
    "nvidia_cublas_cu12-12.9.2.10-py3-none-win_amd64.whl",
    "nvidia_cublas-13.10.0.20-py3-none-win_amd64.whl",
    "nvidia_cufft_cu11-10.9.0.58-py3-none-win_amd64.whl",
    "nvidia_cufft_cu12-11.4.1.4-py3-none-win_amd64.whl",
    "nvidia_cufft-12.5.0.14-py3-none-win_amd64.whl",
    "nvidia_curand_cu11-10.3.0.86-py3-none-win_amd64.whl",
    "nvidia_curand_cu12-10.3.10.19-py3-none-win_amd64.whl",
    "nvidia_curand-10.4.5.25-py3-none-win_amd64.whl",
    "nvidia_cusparse_cu11-11.7.5.86-py3-none-win_amd64.whl",
    "nvidia_cusparse_cu12-12.5.10.65-py3-none-win_amd64.whl",
    "nvidia_cusparse-12.9.4.2-py3-none-win_amd64.whl",
    "nvidia_cusolver_cu11-11.4.1.48-py3-none-win_amd64.whl",
    "nvidia_cusolver_cu12-11.7.5.82-py3-none-win_amd64.whl",
    "nvidia_cusolver-12.4.1.2-py3-none-win_amd64.whl",
    "nvidia_cuda_nvrtc_cu11-11.8.89-py3-none-win_amd64.whl",
    "nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-win_amd64.whl",
    "nvidia_cuda_nvrtc-13.5.37-py3-none-win_amd64.whl",
    "nvidia_nvjitlink_cu12-12.9.86-py3-none-win_amd64.whl",
    "nvidia_nvjitlink-13.5.37-py3-none-win_amd64.whl",
    "nvidia_cudnn_cu11-8.9.5.29-py3-none-win_amd64.whl",
    "nvidia_cudnn_cu12-8.9.7.29-py3-none-win_amd64.whl",
    "nvidia_cudnn_cu11-9.10.2.21-py3-none-win_amd64.whl",
    "nvidia_cudnn_cu12-9.28.0.42-py3-none-win_amd64.whl",
    "nvidia_cudnn_cu13-9.28.1.4-py3-none-win_amd64.whl",
    "intel_openmp-2026.2.0-py2.py3-none-win_amd64.whl",
    "intel_openmp-2021.4.0-py2.py3-none-win_amd64.whl",
    "tbb-2023.2.0-py3-none-win_amd64.whl",
    "mkl-2026.2.1-py2.py3-none-win_amd64.whl",
    "mkl-2025.3.1-py2.py3-none-win_amd64.whl",
    "mkl-2021.4.0-py2.py3-none-win_amd64.whl",
    "mkl-2019.0-py2.py3-none-win_amd64.whl",
    "torch-2.5.1-cp311-cp311-win_amd64.whl",
    "torch-2.15.0-cp311-cp311-win_amd64.whl",
    "ctranslate2-4.8.5-cp311-cp311-win_amd64.whl",
    "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl",
    "openslide_bin-4.0.1.2-py3-none-win_amd64.whl",
    "libusb_package-1.0.30.0-py3-none-win_amd64.whl",
    "python_magic_bin-0.4.14-py2.py3-none-win_amd64.whl",
]
PLACEHOLDERS = [
    "nvidia_cublas_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_cuda_runtime_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_cufft_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_curand_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_cusparse_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_cusolver_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_cuda_nvrtc_cu13-0.0.0a0-py2.py3-none-any.whl",
    "nvidia_nvjitlink_cu13-0.0.0a0-py2.py3-none-any.whl",
]


from realwheels import HTTPRangeFile, WheelListUnavailable, project_of, pypi_file  # noqa: E402  (shared with test_loaders)


def wheel_list(filename: str) -> dict[str, Any]:
    """{"wheel", "size", "yanked", "members", "summary"} of a PyPI wheel: cached, else read over HTTP Range."""
    cached = LIST_CACHE / f"{filename}.json"
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    f = pypi_file(filename)
    raw = HTTPRangeFile(f["url"], int(f["size"]))
    try:
        with zipfile.ZipFile(io.BufferedReader(raw, buffer_size=1 << 16)) as z:
            members = z.namelist()
            meta = [m for m in members if re.fullmatch(r"[^/]+\.dist-info/METADATA", m)]
            text = z.read(meta[0]).decode("utf-8", "replace") if meta else ""
    except (OSError, http.client.HTTPException) as e:
        raise WheelListUnavailable(f"{f['url']}: {e}") from None
    m = re.search(r"^Summary: *(.*?)\r?$", text, re.M)
    out = {"wheel": filename, "size": int(f["size"]), "yanked": bool(f.get("yanked")), "members": members,
           "summary": m.group(1).strip() if m else None, "range_requests": raw.requests}
    LIST_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(out, indent=0), encoding="utf-8")
    tmp.replace(cached)
    return out


def listed(filename: str) -> dict[str, Any]:
    try:
        return wheel_list(filename)
    except WheelListUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"cannot read the file list of {filename} (CI never skips): {e}")
        pytest.skip(f"offline and no cached file list of {filename} in {LIST_CACHE}: {e}")


def _checked() -> dict[str, dict[str, Any]]:
    return {c["wheel"]: c for c in raw_data()["checked"]}


def test_the_pins_are_the_checked_wheels():
    checked = raw_data()["checked"]
    assert [c["wheel"] for c in checked] == PINNED
    assert all(c["date"] in CHECK_DAYS for c in checked)
    assert sorted(p["wheel"] for p in raw_data()["placeholders"]) == sorted(PLACEHOLDERS)
    # every pip and package_itself row with names is checked against some wheel, but torch's CUDA build
    covered = {r for c in checked for r in c["rows"]}
    unchecked = [r.id for r in packages.load() if r.kind in ("pip", "package_itself") and r.id not in covered]
    assert unchecked == ["torch-cuda-build"], unchecked
    # every pip package of the data is the project of a checked wheel
    projects = {project_of(w) for w in PINNED}
    assert {r.package for r in packages.load() if r.kind == "pip"} <= projects


def _row_names(r: dict[str, Any]) -> list[str]:
    return r.get("names") or r["examples"]


@pytest.mark.parametrize("filename", PINNED)
def test_wheel_ships_the_rows_dlls(filename):
    """The wheel's file list holds each of the rows' DLLs at the row's folder (under
    <dist>-<version>.data/data/ for prefix rows); the wheel is a real one, not a placeholder."""
    entry = _checked()[filename]
    info = listed(filename)
    members = {m.lower() for m in info["members"]}
    dist, version = filename.split("-")[:2]
    assert "win_amd64" in filename and version != "0.0.0a0" and not info["yanked"]
    assert info["summary"] == entry["summary"], "the wheel's METADATA Summary changed"
    assert "placeholder" not in (info["summary"] or "").lower()
    dlls = [m for m in members if m.endswith(".dll")]
    assert dlls, f"{filename} has no DLL at all"
    rows = {r["id"]: r for r in raw_data()["rows"]}
    for rid in entry["rows"]:
        r = rows[rid]
        assert project_of(filename) == r["package"].lower(), (rid, filename)
        base = r["folder"] if r["root"] == "site-packages" else f"{dist}-{version}.data/data/{r['folder']}"
        names = _row_names(r)
        # a row with names lists DLLs some version may lack (cudnn_ext64_9 is not in 9.10); each wheel
        # must hold at least the first, and every name must be held by one of the row's wheels
        present = [n for n in names if f"{base}/{n}".lower() in members]
        assert names[0] in present, f"{rid}: {base}/{names[0]} not in {filename}"
        if "pattern" in r:
            pat = re.compile(r["pattern"], re.I)
            in_folder = [m.rsplit("/", 1)[1] for m in dlls if m.rsplit("/", 1)[0] == base.lower()]
            assert any(pat.fullmatch(n) for n in in_folder)
        # the lookup agrees: each present name maps to this row (given the row's CUDA major)
        for n in present:
            p = lookup(n, cuda_major=r["cuda_major"])
            assert p is not None and p.row == rid, (n, p)


def test_every_named_dll_is_in_one_of_its_rows_wheels():
    """Across the checked wheels of a row, every name the row lists is a member (so no name is
    made up), checked with the cached or fetched lists."""
    rows = {r["id"]: r for r in raw_data()["rows"]}
    seen: dict[str, set[str]] = {}
    for c in raw_data()["checked"]:
        info = listed(c["wheel"])
        dist, version = c["wheel"].split("-")[:2]
        for rid in c["rows"]:
            r = rows[rid]
            base = r["folder"] if r["root"] == "site-packages" else f"{dist}-{version}.data/data/{r['folder']}"
            seen.setdefault(rid, set()).update(n for n in _row_names(r)
                                               if f"{base}/{n}".lower() in {m.lower() for m in info["members"]})
    for rid, names in seen.items():
        assert set(_row_names(rows[rid])) == names, f"{rid}: not in any of its wheels: {set(_row_names(rows[rid])) - names}"


def test_the_prefix_wheels_install_through_data():
    # pip installs <dist>-<ver>.data/data/X into sys.prefix/X: that is what root "prefix" means
    for filename in ("intel_openmp-2026.2.0-py2.py3-none-win_amd64.whl", "mkl-2026.2.1-py2.py3-none-win_amd64.whl"):
        members = listed(filename)["members"]
        dist, version = filename.split("-")[:2]
        dlls = [m for m in members if m.lower().endswith(".dll")]
        assert dlls and all(m.startswith(f"{dist}-{version}.data/data/Library/bin/") for m in dlls), dlls[:3]


@pytest.mark.parametrize("filename", PLACEHOLDERS)
def test_cu13_suffixed_names_are_placeholders(filename):
    info = listed(filename)
    assert not [m for m in info["members"] if m.lower().endswith(".dll")]
    assert "placeholder" in (info["summary"] or "").lower()
    assert info["size"] < 10_000


def test_no_checked_wheel_ships_a_driver_dll():
    """nvcuda.dll, nvml.dll, nvcudart_hybrid64.dll come with the NVIDIA driver: none of the NVIDIA
    wheels (nor torch's) has them, so no pip install can provide them."""
    driver = {n.lower() for r in raw_data()["rows"] if r["kind"] == "driver" for n in r["names"]}
    for c in raw_data()["checked"]:
        names = {m.rsplit("/", 1)[-1].lower() for m in listed(c["wheel"])["members"]}
        assert not names & driver, (c["wheel"], names & driver)
