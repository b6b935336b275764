"""The corpus of real situations on Linux (issue 22): real pip-installed packages, pinned with their hashes
(tests/situations/*.txt), run for real under `dlltrace run`, each taken from a public thread it cites. Each
asserts what the user asked first: how the program ended (the outcome), the load that was the failure or the
fallback that cost the program its GPU, where that load was made (the user's import, or the program's code
after it), and that no load the program went past is blamed.

The environments are built once into the test cache (a venv per lock file; the wheels are downloaded into
the download cache, pip checking every hash). CPython 3.9 (TensorFlow 2.11 has no wheel for 3.11) is taken
from pyenv or PATH. Locally a situation skips when its Python or its wheels cannot be had; in CI it fails.
The Windows situations of the corpus are tests/test_real_imports.py's cases that cite a thread.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

import winetools

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "tests" / "situations"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

RESULTS: list[str] = []
APPLIED: list[str] = []  # first fixes applied for real, and the program then ran


def apt_install_for_real(packages: list[str]) -> list[str]:
    """`apt-get install PACKAGES` as root, as a report's fix says it (apt's lists updated once if a mirror moved
    on); the packages it added (apt_purge takes them off again). Unavailable apt: _unavailable."""
    sim = subprocess.run(["apt-get", "install", "--simulate", *packages], capture_output=True, text=True, timeout=300)
    pulled = newly_installed(sim.stdout)
    for attempt in range(2):
        got = subprocess.run(["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", *packages],
                             capture_output=True, text=True, timeout=900, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if got.returncode == 0:
            return pulled
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)  # (a mirror moved on)
    _unavailable(f"apt-get install {' '.join(packages)} failed: {got.stderr[-800:]}")
    return pulled


def newly_installed(simulated: str) -> list[str]:
    """The packages `apt-get install --simulate` says it installs anew: its `Inst NAME (VERSION ...)` lines, not the
    upgrades of installed ones (`Inst NAME [OLD] (NEW ...)`), which a purge would take off the machine (perl-base,
    essential, that vlc-plugin-base's install upgrades: apt then refuses the whole purge, and nothing is taken off)."""
    return [x.split()[1] for x in simulated.splitlines()
            if x.startswith("Inst ") and len(x.split()) > 2 and not x.split()[2].startswith("[")]


def test_newly_installed_takes_no_upgrade():
    sim = ("NOTE: This is only a simulation!\n"
           "Inst perl-base [5.36.0-7+deb12u1] (5.36.0-7+deb12u2 Debian-Security:12/oldstable-security [amd64])\n"
           "Inst libvlc5 (3.0.23-0+deb12u1 Debian:12.15/oldstable [amd64])\n"
           "Conf libvlc5 (3.0.23-0+deb12u1 Debian:12.15/oldstable [amd64])\n")
    assert newly_installed(sim) == ["libvlc5"]


def apt_purge(pulled: list[str]) -> None:
    """The packages an apt_install_for_real added, purged."""
    if pulled:
        subprocess.run(["apt-get", "remove", "--purge", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", *pulled],
                       capture_output=True, timeout=900, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def find_python(version: str) -> str:
    """A CPython of this X.Y: on PATH as pythonX.Y, or pyenv's."""
    cands = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / f"{version}.*" / "bin" / f"python{version}")),
                   reverse=True) + [p for p in [shutil.which(f"python{version}")] if p]
    for c in cands:  # (a pyenv shim is on PATH for every version, and fails for one not selected)
        if subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0:
            return c
    _unavailable(f"no CPython {version} here (pyenv install {version}, or put python{version} on PATH)")
    raise AssertionError("unreachable")


def pip(python: Path, *args: str) -> None:
    r = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], capture_output=True,
                       text=True, timeout=1800)
    if r.returncode != 0:
        _unavailable(f"pip {' '.join(args[:1])} failed: {(r.stderr or r.stdout)[-1500:]}")


def environment(lock: str, version: str, extra: str = "") -> tuple[Path, Optional[Path]]:
    """(the venv's python, the folder `extra`'s lock is installed into, to put on PYTHONPATH), built once."""
    files = [LOCKS / f"{lock}.txt"] + ([LOCKS / f"{extra}.txt"] if extra else [])
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    folder = winetools.CACHE / "situations" / f"{lock}{'+' + extra if extra else ''}-{digest}"
    wheels = winetools.DOWNLOADS / "situations"

    def build(tmp: Path) -> None:
        subprocess.run([find_python(version), "-m", "venv", str(tmp / "venv")], check=True)
        py = tmp / "venv" / "bin" / "python"
        for f in files:  # (into the download cache, every hash checked; then installed from there only)
            pip(py, "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "-d", str(wheels), "-r", str(f))
        pip(py, "install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes", "-r", str(files[0]))
        if extra:
            pip(py, "install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes",
                "--target", str(tmp / "extra"), "-r", str(files[1]))

    winetools.built_once(folder, build)
    return folder / "venv" / "bin" / "python", (folder / "extra" if extra else None)


def identity_model() -> bytes:
    from test_real_imports import identity_model as model

    return model()


@dataclass(frozen=True)
class Situation:
    name: str
    thread: str  # the public thread the situation is taken from
    lock: str  # tests/situations/<lock>.txt
    python: str
    program: str  # app.py
    exit_code: int
    outcome: str  # the main process's outcome kind (diagnosis/outcome.py)
    headline: str  # what the report's first line starts with, after "dlltrace ─ "
    fatal: Optional[str] = None  # the leaf of the failure the program hit
    fallbacks: tuple = ()  # leaves of loads that cost the program a feature (explained, not the failure)
    lost: tuple = ()  # features the outcome says the program ran without
    origins: dict = field(default_factory=dict)  # leaf -> how its origin starts
    user_line: dict = field(default_factory=dict)  # leaf -> the line of app.py the report names
    exception: Optional[str] = None  # the type the program ended on
    extra: str = ""  # a second lock, installed apart and put first on PYTHONPATH
    first_fix: Optional[str] = None  # the action of the fatal load's first fix
    signal: Optional[int] = None  # the signal the program crashes with (then exit_code is unused)
    unset: tuple = ()  # variables taken out of the program's environment (DISPLAY: no X server)
    crashed_at: Optional[int] = None  # the line of app.py the program crashed on
    probes: tuple = ()  # leaves of loads tried first by design (a probe: never the failure, nor explained)
    said: dict = field(default_factory=dict)  # leaf -> what the program itself printed about it (its stderr line)
    cuda: dict = field(default_factory=dict)  # framework -> (its CUDA, read from) in `dlltrace cuda --trace`
    cuda_exit: int = 0  # that command's exit code (1: the stack does not fit)
    find_library: tuple = ()  # (name, package, *more): the library find_library found none of, that the program died
    # of, and the packages of its fix (more: those its fix installs with it, as its next steps)
    find_module: str = ""  # the module that asked find_library, when not the program's first import
    unstarted: tuple = ()  # (program, package): the program it started, not found on PATH, that it died of
    cpu_builds: tuple = ()  # (framework, version): the CPU-only builds of GPU frameworks it imported, said after all
    files: dict = field(default_factory=dict)  # files written beside app.py (a relative path -> its text)
    env: dict = field(default_factory=dict)  # variables set for the program ("{here}": the folder of app.py)


TF_APP = 'import tensorflow as tf\n\nprint(tf.config.list_physical_devices("GPU"))\n'
ORT_APP = ('import numpy as np\nimport onnxruntime as ort\n\n'
           'session = ort.InferenceSession("identity.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])\n'
           'print(session.get_providers(), session.run(None, {"X": np.ones(1, np.float32)}))\n')
# the module whose system libraries decide a situation (system_expectation), under site-packages
SYSTEM_MODULES = {"pyside6_xcb_plugin_aborts": "PySide6/Qt/plugins/platforms/libqxcb.so",
                  "pyodbc_without_unixodbc": "pyodbc.cpython-*.so", "openslide_without_its_library": "",
                  "pyvips_without_libvips": "", "pyopencl_icd_without_its_driver": ""}
# the libraries a situation dlopens by name (not a module's DT_NEEDED): those ld.so does not find, in its order
DLOPENED = {"openslide_without_its_library": ("libopenslide.so.1", "libopenslide.so.0"),
            "pyvips_without_libvips": ("libvips.so.42",), "pyopencl_icd_without_its_driver": ("libpocl.so.2",)}
QT_APP = 'from PySide6.QtWidgets import QApplication, QLabel\n\napp = QApplication([])\nQLabel("hello").show()\n'
TESSERACT_APP = ('import pytesseract\nfrom PIL import Image\n\n'
                 'print(repr(pytesseract.image_to_string(Image.new("RGB", (60, 20), "white"))))\n')
VLC_APP = 'import vlc\n\nplayer = vlc.Instance().media_player_new()\nprint(player)\n'
GRAPHVIZ_APP = 'import graphviz\n\ng = graphviz.Digraph()\ng.edge("a", "b")\nprint(g.pipe(format="svg")[:5])\n'
PDF2IMAGE_APP = ('import io\nfrom PIL import Image\nfrom pdf2image import convert_from_bytes\n\n'
                 'pdf = io.BytesIO()\nImage.new("RGB", (60, 20), "white").save(pdf, "PDF")\n'
                 'print(convert_from_bytes(pdf.getvalue()))\n')
SITUATIONS = [
    Situation("tensorflow_gpu_not_used", "https://github.com/tensorflow/tensorflow/issues/45930",
              "tensorflow-2.11-py39", "3.9", TF_APP, 0, "degraded", "the program ran without the NVIDIA driver, CUDA",
              fallbacks=("libcudart.so.11.0", "libcuda.so.1"), lost=("CUDA", "the NVIDIA driver"),
              origins={"libcudart.so.11.0": "import tensorflow",
                       "libcuda.so.1": "the program's code after import tensorflow"},
              user_line={"libcudart.so.11.0": 1},
              said={"libcudart.so.11.0": "Could not load dynamic library 'libcudart.so.11.0'; dlerror: "},
              cuda={"tensorflow": ("11.2", "tensorflow/python/platform/build_info.py")}, cuda_exit=1),
    Situation("tensorflow_with_numpy_2", "https://github.com/tensorflow/tensorflow/issues/102743",
              "tensorflow-2.11-py39", "3.9", 'import tensorflow as tf\n\nprint(tf.__version__)\n', 1, "died_of_other",
              "the program ended with TypeError: Unable to convert function return value", exception="TypeError",
              extra="numpy-2.0.2-py39"),
    Situation("onnxruntime_cuda_provider_falls_back", "https://github.com/microsoft/onnxruntime/issues/21684",
              "onnxruntime-gpu-1.19-cupy-13.6-py311", "3.11", ORT_APP, 0, "degraded", "the program ran without CUDA",
              fallbacks=("libcublasLt.so.12",), lost=("CUDA",),
              origins={"libcublasLt.so.12": "the program's code after import onnxruntime"},
              said={"libcublasLt.so.12": "Failed to load library libonnxruntime_providers_cuda.so with error: "
                                         "libcublasLt.so.12: cannot open shared object file"}),
    Situation("cupy_without_a_driver", "https://github.com/cupy/cupy/issues/9252",
              "onnxruntime-gpu-1.19-cupy-13.6-py311", "3.11", "import cupy as cp\n\nprint(cp.zeros(3))\n", 1,
              "died_of_load", "1 failed load", fatal="libcuda.so.1",
              origins={"libcuda.so.1": "the program's code after import cupy"},
              exception="cupy_backends.cuda.api.runtime.CUDARuntimeError", first_fix="install_driver",
              cuda={"cupy": ("11", "the cupy-cuda11x distribution")}, cuda_exit=1),
    # PySide6 6.8's xcb plugin needs libxcb-icccm.so.4 and libxcb-keysyms.so.1, which no wheel ships; Qt tries
    # libqxcb.so.avx2 first, then libqxcb.so, and when neither loads it aborts ("Could not load the Qt platform
    # plugin "xcb" ... Aborted"), naming xcb-cursor0 in its hint. On a machine that has both, it aborts all the
    # same with no display: no load is blamed then (the expectation is ld.so's own answer: system_expectation).
    Situation("pyside6_xcb_plugin_aborts", "https://github.com/labsquare/cutevariant/issues/588",
              "pyside6-6.8-py311", "3.11", QT_APP, 0, "crashed", "the program crashed (SIGABRT: it aborted)",
              signal=6, unset=("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"), crashed_at=3,
              probes=("libqxcb.so.avx2",)),
    # pyodbc's manylinux wheel needs unixODBC's libodbc.so.2 and does not ship it (since 4.0.35): `import pyodbc`
    # dies of it; the fix is Debian's libodbc2 (its first fix is applied for real below)
    Situation("pyodbc_without_unixodbc", "https://github.com/mkleehammer/pyodbc/issues/1133", "pyodbc-5.2-py311",
              "3.11", "import pyodbc\n\nprint(pyodbc.version)\n", 1, "died_of_load", "1 failed load",
              origins={"*": "import pyodbc"}, user_line={"*": 1}, exception="ImportError",
              first_fix="install_system_package"),
    # openslide-python tries libopenslide.so.1, then libopenslide.so.0, with ctypes, and raises
    # ModuleNotFoundError("Couldn't locate OpenSlide shared library") from both OSErrors: the last is the failure
    # (the exception's causes name it), the first a load it went past
    Situation("openslide_without_its_library", "https://github.com/openslide/openslide/issues/575",
              "openslide-1.4-py311", "3.11", "import openslide\n\nprint(openslide.__library_version__)\n", 1,
              "died_of_load", "1 failed load", origins={"*": "ctypes.CDLL('libopenslide.so.0')"}, user_line={"*": 1},
              exception="ModuleNotFoundError", first_fix="install_system_package"),
    # pyvips 2.1.0 in cffi's ABI mode: `import pyvips` dlopens libvips.so.42 (ffi.dlopen) and dies of its OSError;
    # the load is `import pyvips`'s, not that of the cffi/pycparser imports that had finished before it
    Situation("pyvips_without_libvips", "https://github.com/libvips/pyvips/issues/424", "pyvips-2.1-py311", "3.11",
              "import pyvips\n\nprint(pyvips.__version__)\n", 1, "died_of_load", "1 failed load",
              origins={"*": "import pyvips"}, user_line={"*": 1}, exception="OSError",
              first_fix="install_system_package"),
    # sounddevice 0.5.6 asks ctypes.util.find_library('portaudio') and, finding none, raises OSError('PortAudio
    # library not found') before any load: no load is blamed, the report names the find_library call and the package
    # (its fix is applied for real below: apt-get install, as root)
    Situation("sounddevice_without_portaudio", "https://github.com/spatialaudio/python-sounddevice/issues/130",
              "sounddevice-0.5-py311", "3.11", "import sounddevice as sd\n\nprint(sd.get_portaudio_version())\n", 1,
              "died_of_other", "the program ended with OSError: PortAudio library not found: "
              "ctypes.util.find_library('portaudio') found no such library", exception="OSError",
              find_library=("portaudio", "libportaudio2")),
    # pylibdmtx 0.1.10 asks find_library('dmtx') in pylibdmtx.wrapper and raises ImportError('Unable to find dmtx
    # shared library'); Debian 12 ships libdmtx.so.0 in libdmtx0b (an ABI-transition letter after the major: the
    # package is not libdmtx0). python-vlc 3.0.21203 asks find_library('vlc'), finds none, opens the program itself
    # (ctypes.CDLL(None)) and dies of NameError("no function 'libvlc_new'"); its fix installs VLC's plugins
    # too (without them libvlc_new() returns NULL: loader/linux/fixes.rule_library_needs_its_plugins)
    Situation("pylibdmtx_without_libdmtx", "https://github.com/NaturalHistoryMuseum/pylibdmtx/issues/103",
              "pylibdmtx-0.1-py311", "3.11", "from pylibdmtx.pylibdmtx import decode\n\nprint(decode((bytes(300), 10, 10)))\n",
              1, "died_of_other", "the program ended with ImportError: Unable to find dmtx shared library: "
              "ctypes.util.find_library('dmtx') found no such library", exception="ImportError",
              find_library=("dmtx", "libdmtx0b"), find_module="pylibdmtx.wrapper"),
    Situation("python_vlc_without_libvlc", "https://github.com/oaubert/python-vlc/issues/22",
              "python-vlc-3.0-py311", "3.11", VLC_APP, 1, "died_of_other",
              "the program ended with NameError: no function 'libvlc_new': "
              "ctypes.util.find_library('vlc') found no such library", exception="NameError",
              find_library=("vlc", "libvlc5", "vlc-plugin-base")),
    # pyopencl 2026.1.4's bundled ICD loader dlopens the driver an .icd names (PoCL's libpocl.so.2, not installed) and,
    # with no platform loaded, get_platforms() raises LogicError 'clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR',
    # which names no library: that load is the failure (verdict_linux.rule_opencl_driver_not_loaded), not one gone past
    Situation("pyopencl_icd_without_its_driver", "https://github.com/inducer/pyopencl/issues/283", "pyopencl-2026.1-py311",
              "3.11", "import pyopencl as cl\n\nprint(cl.get_platforms())\n", 1, "died_of_load", "1 failed load",
              origins={"*": "the program's code after import pyopencl"}, exception="pyopencl._cl.LogicError",
              first_fix="install_system_package", files={"vendors/pocl.icd": "libpocl.so.2\n"},
              env={"OCL_ICD_VENDORS": "{here}/vendors"}),
    # pytesseract 0.3.13 runs tesseract and, not finding it, raises TesseractNotFoundError; graphviz 0.20.3's
    # ExecutableNotFound names 'dot'; pdf2image 1.17.0's PDFInfoNotInstalledError names poppler, and its cause is
    # pdfinfo's FileNotFoundError. No load fails: the report names the program and the PATH folders it was looked
    # for in (their fixes are applied for real below: apt-get install, as root)
    Situation("pytesseract_without_tesseract", "https://github.com/madmaze/pytesseract/issues/342",
              "pytesseract-0.3-py311", "3.11", TESSERACT_APP, 1, "died_of_other",
              "the program ended with pytesseract.pytesseract.TesseractNotFoundError: tesseract is not installed or…: "
              "the program 'tesseract' was not found on PATH", exception="pytesseract.pytesseract.TesseractNotFoundError",
              unstarted=("tesseract", "tesseract-ocr")),
    Situation("graphviz_without_dot", "https://github.com/DigitalPhonetics/adviser/issues/5", "graphviz-0.20-py311",
              "3.11", GRAPHVIZ_APP, 1, "died_of_other",
              "the program ended with graphviz.backend.execute.ExecutableNotFound: failed to execute PosixPath('dot')…: "
              "the program 'dot' was not found on PATH", exception="graphviz.backend.execute.ExecutableNotFound",
              unstarted=("dot", "graphviz")),
    Situation("pdf2image_without_poppler", "https://github.com/Belval/pdf2image/issues/142", "pdf2image-1.17-py311",
              "3.11", PDF2IMAGE_APP, 1, "died_of_other",
              "the program ended with pdf2image.exceptions.PDFInfoNotInstalledError: Unable to get page count. Is…: "
              "the program 'pdfinfo' was not found on PATH", exception="pdf2image.exceptions.PDFInfoNotInstalledError",
              unstarted=("pdfinfo", "poppler-utils")),
    Situation("torch_cpu_build_cuda_not_available", "https://github.com/THU-MIG/yolov10/issues/218",
              "torch-2.13-cpu-py311", "3.11", "import torch\n\nprint(torch.__version__, torch.cuda.is_available())\n",
              0, "ok", "every load succeeded", cpu_builds=(("torch", "2.13.0+cpu"),)),
]


@pytest.fixture(scope="module", autouse=True)
def _summary(summary):
    summary["real situations (Linux)"] = lambda: (f"real situations (Linux): {len(RESULTS)} of {len(SITUATIONS)} "
                                                  f"agree with the program's real end: {', '.join(RESULTS)}"
                                                  + (f"; first fixes applied for real, the load then works and the program runs unless said: "
                                                     f"{'; '.join(APPLIED)}" if APPLIED else "")
                                                  if RESULTS or APPLIED else "")


def situation_env(s: Situation, here: Path) -> dict[str, str]:
    """The situation's files written beside app.py, and the variables it sets for the program."""
    for rel, text in s.files.items():
        (here / rel).parent.mkdir(parents=True, exist_ok=True)
        (here / rel).write_text(text)
    return {k: v.replace("{here}", str(here)) for k, v in s.env.items()}


def dlltrace(*args: str, cwd: Path, pythonpath: str = "", unset: tuple = (),
             given: Optional[dict] = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k not in unset}, **(given or {}),
           "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, str(ROOT / "tracer")) if p)}
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def missing_system_libraries(python: Path, module: str) -> list[str]:
    """The libraries a package's module (a glob under site-packages) needs that this machine's ld.so does not find,
    in ld.so's order (`ldd`, the loader's own answer)."""
    path = next(python.parent.parent.glob(f"lib/python*/site-packages/{module}"))
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    return list(dict.fromkeys(line.split()[0] for line in out.splitlines() if "not found" in line))


def ld_so_finds(name: str) -> bool:
    """Whether a dlopen of this bare name loads here (the real ld.so, in a child Python: ctypes.CDLL)."""
    return subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({name!r})"],
                          capture_output=True).returncode == 0


def find_library_finds(name: str) -> bool:
    """Whether ctypes.util.find_library(name) finds a library here (in a child Python)."""
    return subprocess.run([sys.executable, "-c", f"import ctypes.util, sys; sys.exit(ctypes.util.find_library({name!r}) is None)"],
                          capture_output=True).returncode == 0


def nvidia_on_the_pci_bus() -> bool:
    """Whether this machine has an NVIDIA device (vendor 0x10de) on its PCI bus (sysfs), or cannot tell (no bus)."""
    vendors = glob.glob("/sys/bus/pci/devices/*/vendor")
    return not vendors or any(Path(v).read_text().strip().lower() == "0x10de" for v in vendors)


def system_expectation(s: Situation, python: Path) -> Situation:
    """A situation that turns on a system library no pip package ships, as this machine has it (SYSTEM_MODULES):
    the first library ld.so does not find is the failure; on a machine that has them all, the other ending."""
    if s.unstarted:  # (a machine that has the program runs it)
        if shutil.which(s.unstarted[0]):
            return dataclasses.replace(s, exit_code=0, outcome="ok", headline="every load succeeded", exception=None,
                                       unstarted=())
        return s
    if s.find_library:  # (what find_library answers here: a machine that has the library imports it)
        if find_library_finds(s.find_library[0]):
            return dataclasses.replace(s, exit_code=0, outcome="ok", headline="every load succeeded", exception=None,
                                       find_library=())
        return s
    if s.name in DLOPENED:  # (ld.so.cache and the system folders, as a bare name's dlopen searches them)
        missing = [n for n in DLOPENED[s.name] if not ld_so_finds(n)]
        if len(missing) < len(DLOPENED[s.name]):  # (one loads: the program imports)
            missing = []
        else:
            missing = missing[-1:]  # (the last try is the failure; the first, one it went past)
    else:
        missing = missing_system_libraries(python, SYSTEM_MODULES[s.name])
    if s.name == "pyside6_xcb_plugin_aborts":  # (it aborts either way: with no display when the plugin loads)
        if not missing:
            return dataclasses.replace(s, headline=s.headline + "; no failed load explains it")
        return dataclasses.replace(s, headline=f"{s.headline}, right after {missing[0]} failed to load",
                                   fatal=missing[0], origins={missing[0]: "the program's code after import PySide6"})
    if not missing:  # (pyodbc with unixODBC installed: it imports)
        return dataclasses.replace(s, exit_code=0, outcome="ok", headline="every load succeeded", fatal=None,
                                   origins={}, user_line={}, exception=None, first_fix=None)
    return dataclasses.replace(s, fatal=missing[0], origins={missing[0]: s.origins.get("*", "")},
                               user_line={missing[0]: s.user_line["*"]} if "*" in s.user_line else {})


@pytest.mark.parametrize("s", SITUATIONS, ids=[s.name for s in SITUATIONS])
def test_a_real_situation(s: Situation, tmp_path):
    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    python, extra = environment(s.lock, s.python, s.extra)
    # (the ELF reader against pyelftools on every shared object of the real environment: TensorFlow's 600 MB
    # library with a dynamic string table of tens of MB, Qt's plugins, ...)
    from test_elf_reader import elf_differences
    venv = python.parent.parent
    assert not elf_differences(glob.glob(str(venv / "lib*" / "python*" / "site-packages" / "**" / "*.so*"), recursive=True))
    if s.name in SYSTEM_MODULES or s.find_library or s.unstarted:
        s = system_expectation(s, python)
    if "the NVIDIA driver" in s.lost and not nvidia_on_the_pci_bus():  # (read here, not by dlltrace's code)
        s = dataclasses.replace(s, headline="the program ran on the CPU: this machine has no NVIDIA GPU (libcuda.so.1 and")
    elif s.outcome == "degraded" and not nvidia_on_the_pci_bus():  # (onnxruntime's CUDA provider: no GPU all the same)
        s = dataclasses.replace(s, headline="the program ran on the CPU: this machine has no NVIDIA GPU (")
    elif s.fatal == "libcuda.so.1" and not nvidia_on_the_pci_bus():  # (cupy's first array: it died of the driver)
        s = dataclasses.replace(s, headline="1 failed load: the program needs an NVIDIA GPU, and this machine has none")
    (tmp_path / "app.py").write_text(s.program)
    (tmp_path / "identity.onnx").write_bytes(identity_model())
    given = situation_env(s, tmp_path)
    pythonpath = str(extra) if extra else ""
    # the program as it is, untraced: its real end (the oracle)
    plain = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                           env={**{k: v for k, v in os.environ.items() if k not in s.unset}, **given,
                                "PYTHONPATH": pythonpath})
    assert plain.returncode == (-s.signal if s.signal else s.exit_code), plain.stderr[-3000:]
    if s.exception:
        assert f"{s.exception}: " in plain.stderr.splitlines()[-1] or s.exception.rsplit(".", 1)[-1] in plain.stderr
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path, pythonpath=pythonpath,
                   unset=s.unset, given=given)
    # (dlltrace passes the program's exit code on; a signal N as 128 + N, as a shell does)
    assert run.returncode == (128 + s.signal if s.signal else s.exit_code), run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    report_schema().validate(doc)  # (issue 26 item 4: every Linux --json document validates, real ones too)
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert text.splitlines()[0].startswith(f"dlltrace ─ {s.headline}"), text[:600]
    if doc["fatal"] is not None:  # the failed call's dependency tree ends where the leaf was not found (docs/linux.md)
        call = doc["failed"][doc["fatal"]]
        if call["deps"] is not None and call["leaf"] and call["leaf"]["cause"] == "not_found":
            assert call["leaf"]["name"] in tree_failures(call["deps"]), call["deps"]
    (main,) = [d for d in doc["diagnoses"] if d["end"]["kind"] in ("exited", "crashed")]
    o = main["outcome"]
    if s.signal:
        assert main["end"]["kind"] == "crashed" and o["signal"] == s.signal, (main["end"], o)
    if s.crashed_at:  # (where the program was: faulthandler's stack, py_fault)
        at = main["end"]["crashed_at"]
        assert at is not None and at["file"].endswith("app.py") and at["line"] == s.crashed_at, main["end"]
        assert f"It crashed in your code at {at['file']}:{s.crashed_at}" in text
    assert o["kind"] == s.outcome and doc["outcome"]["kind"] == s.outcome, o
    assert set(s.lost) <= set(o["lost"]), o
    if "the NVIDIA driver" in s.lost:  # (the driver first: without it no GPU is used; and why it was not there)
        assert o["lost"][0] == "the NVIDIA driver" and (o["gpu"] == "no_gpu") == (not nvidia_on_the_pci_bus()), o
        assert o["missing"] >= len(s.fallbacks), o
    if s.exception:
        assert o["exception"]["type"] == s.exception, o["exception"]
    fatal = [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    # the failure the program hit, and nothing it went past blamed
    assert [f["leaf"] for f in fatal] == ([s.fatal] if s.fatal else []), [(f["leaf"], f["reason"]) for f in fatal]
    mine = {f["leaf"]: f for f in main["failures"]}
    for probe in s.probes:
        (f,) = [f for f in main["failures"] if f["name"].endswith("/" + probe) or f["name"] == probe]
        assert (f["fate"], f["klass"]) == ("went_on", "probe"), f
        assert f"✗ {probe}" not in text  # (not explained: tried first by design)
    for leaf in s.fallbacks:
        f = mine[leaf]
        assert (f["fate"], f["klass"]) == ("went_on", "fallback"), f
        assert f"✗ {leaf} was not found" in text  # (explained in full: it cost the program its GPU)
    for leaf, origin in s.origins.items():
        assert mine[leaf]["origin"].startswith(origin), (leaf, mine[leaf]["origin"])
    for leaf, words in s.said.items():  # (the program's own words, copied from its stderr: the evidence)
        assert any(words in x for x in mine[leaf]["said"]), mine[leaf]["said"]
        assert "  the program said: " in text
    for leaf, line in s.user_line.items():
        place = mine[leaf]["user_code"]
        assert place is not None and place["file"].endswith("app.py") and place["line"] == line, place
    if s.fatal:
        assert mine[s.fatal]["model_agrees"] and mine[s.fatal]["tried"], mine[s.fatal]
        if s.first_fix:
            assert mine[s.fatal]["fixes"][0]["action"] == s.first_fix, mine[s.fatal]["fixes"]
    assert all(f["model_agrees"] for f in main["failures"]), [f["leaf"] for f in main["failures"] if not f["model_agrees"]]
    if s.find_library:  # (no load to blame: the find_library call it died of, and the package that ships it)
        name, package, *more = s.find_library
        found = doc["outcome"]["find_library"]
        assert {k: found[k] for k in ("name", "module", "package", "searched")} == {
            "name": name, "module": s.find_module or s.program.split()[1], "package": package, "searched": []}, doc
        assert [(x["action"], x["package"]) for x in found["fixes"]] == [("install_system_package", package)], found
        assert [x["package"] for x in found["fixes"][0]["then"]] == more, found
        assert main["unfound"]["user_code"]["file"].endswith("app.py") and main["unfound"]["user_code"]["line"] == 1
        sudo = "" if os.geteuid() == 0 else "sudo "
        assert f"    1. {sudo}apt-get install {' '.join([package, *more])}\n       (Debian, Ubuntu" in text, text
    if s.unstarted:  # (no load to blame: the program it started that was not found, and the PATH it was looked for in)
        program, package = s.unstarted
        got = doc["outcome"]["program"]
        assert got is not None and (got["name"], got["error"]) == (program, "FileNotFoundError"), doc["outcome"]
        assert got["searched"] == os.get_exec_path() and got["package"] in (None, package), got
        assert main["unstarted"]["user_code"]["file"].endswith("app.py"), main["unstarted"]
        assert f"It was looked for in the {len(got['searched'])} folders of the PATH it was given" in text, text
        sudo = "" if os.geteuid() == 0 else "sudo "
        assert (f"    1. {sudo}apt-get install {package}\n       (Debian, Ubuntu" in text if got["package"] else
                f"apt-file search --regexp '/bin/{program}$'" in text), text
    # (a CPU-only build of a GPU framework it imported: every load may succeed, and the GPU is never used)
    assert [(c["framework"], c["version"]) for c in doc["cpu_builds"]] == list(s.cpu_builds), doc["cpu_builds"]
    for name, version in s.cpu_builds:
        said = f"{name} {version} is a CPU-only build"
        assert said in text and said in run.stderr and "For an NVIDIA GPU, install a CUDA build" in text, run.stderr[-2000:]
    if s.cuda:  # the CUDA stack of the trace: each framework's build read from its own files (py_dists texts)
        cuda = dlltrace("cuda", "--trace", "t.jsonl", "--json", cwd=tmp_path)
        schema("cuda-v1.json").validate(json.loads(cuda.stdout))
        fws = {f["name"]: (f["cuda"], f["cuda_from"]) for f in json.loads(cuda.stdout)["frameworks"]}
        assert {k: fws.get(k) for k in s.cuda} == s.cuda, fws
        assert cuda.returncode == s.cuda_exit, cuda.stderr
        if s.cuda_exit:  # (no driver on this machine: the one line says what to install; with no NVIDIA GPU, that
            # none would make a program use one: cuda.rule_no_driver, worlds/gpu.py)
            words = "install an NVIDIA driver" if nvidia_on_the_pci_bus() else "this machine has no NVIDIA GPU"
            assert cuda.stderr.count("\n") == 1 and words in cuda.stderr, cuda.stderr
    RESULTS.append(s.name)


def schema(name: str):
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / name).read_text(
        encoding="utf-8")))


def report_schema():
    return schema("report-linux-v1.json")


def tree_failures(node: dict) -> list[str]:
    """The names of a `deps` tree's libraries that failed (report-linux-v1.json DepNode)."""
    return ([node["name"]] if node["path"] is None else []) + [n for k in node["children"] for n in tree_failures(k)]


def apt_files(packages: list[str], into: Path) -> Path:
    """The files of these Debian packages, unpacked under `into` (apt-get download, dpkg -x): what apt-get install
    would put in /usr/lib, without changing this machine. Its usr/lib/<multiarch> folder."""
    debs = into / "debs"
    debs.mkdir(parents=True)
    for attempt in range(2):
        r = subprocess.run(["apt-get", "download", *packages], cwd=debs, capture_output=True, text=True, timeout=600)
        if r.returncode == 0:
            break
        if attempt == 0:  # (old package lists: the mirror moved on)
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
    else:
        _unavailable(f"apt-get download {' '.join(packages)} failed: {r.stderr[-800:]}")
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(into / "root")], check=True)
    (lib,) = [p for p in (into / "root" / "usr" / "lib").iterdir() if p.name.endswith("-linux-gnu")]
    return lib


@pytest.mark.parametrize("name", ["pyside6_xcb_plugin_aborts", "pyodbc_without_unixodbc", "openslide_without_its_library",
                                  "pyvips_without_libvips", "pyopencl_icd_without_its_driver"])
def test_the_first_system_package_fix_applied_for_real(name, tmp_path):
    """A real situation's first fix, as printed ("apt-get install libxcb-icccm4 libxcb-keysyms1", one command for
    both libraries PySide6's xcb plugin lacks, the model having found the second after the first; "apt-get install
    libodbc2" for pyodbc), applied for real: the files of exactly those packages, with what apt would install with
    them here, on the search path (apt_files; LD_LIBRARY_PATH stands for the folder apt-get install writes into),
    and the program then runs (PySide6 on a virtual display, Xvfb): exit 0, and its trace's outcome is ok (pyvips
    2.1.0 gets past the load and then dies of its own bug: AFTER_FIX)."""
    if not (shutil.which("apt-get") and shutil.which("dpkg") and shutil.which("xvfb-run")):
        _unavailable("needs apt-get, dpkg and xvfb-run (apt-get install xvfb)")
    (s,) = [x for x in SITUATIONS if x.name == name]
    python, _ = environment(s.lock, s.python)
    s = system_expectation(s, python)
    if not s.fatal:
        _unavailable(f"this machine has every library {SYSTEM_MODULES[name]} needs: there is no fix to apply")
    (tmp_path / "app.py").write_text(s.program)
    given = situation_env(s, tmp_path)
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path, unset=s.unset, given=given)
    assert run.returncode == (128 + s.signal if s.signal else s.exit_code), run.stderr[-2000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    (fatal,) = [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    first = fatal["fixes"][0]
    assert first["action"] == "install_system_package" and first["verified"], fatal["fixes"]
    packages = [first["package"]] + [t["package"] for t in first["then"] if t["action"] == "install_system_package"]
    assert len(packages) == len(set(packages)) >= 1
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert f"1. {sudo}apt-get install {' '.join(packages)}\n       (Debian, Ubuntu" in run.stderr, run.stderr[-3000:]
    # (what apt-get install would add here: the packages and those of their dependencies this machine lacks)
    sim = subprocess.run(["apt-get", "install", "--simulate", *packages], capture_output=True, text=True, timeout=300)
    pulled = [line.split()[1] for line in sim.stdout.splitlines() if line.startswith("Inst ")] or packages
    lib = apt_files(pulled, tmp_path / "apt")
    env = {**{k: v for k, v in os.environ.items() if k not in s.unset}, **given}
    env["LD_LIBRARY_PATH"] = str(lib)
    display = ["xvfb-run", "-a"] if s.signal else []  # (PySide6's window needs a display once its plugin loads)
    after = subprocess.run([*display, str(python), "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    # (pyvips 2.1.0's ABI mode, once libvips loads, imports a module it lacks: its own bug, fixed in 2.1.1; the
    # load is fixed, and the report says what the program died of then, blaming no load)
    then = AFTER_FIX.get(name)
    assert after.returncode == (1 if then else 0), after.stderr[-3000:]
    assert then is None or then in after.stderr, after.stderr[-3000:]
    traced = subprocess.run([*display, sys.executable, "-m", "dlltrace", "run", "-o", "t2.jsonl", "--", str(python),
                             "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**env, "PYTHONPATH": str(ROOT / "tracer")})
    assert traced.returncode == after.returncode, traced.stderr[-3000:]
    again = json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)
    assert again["outcome"]["kind"] == ("died_of_other" if then else "ok") and not [
        f for d in again["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"], again["outcome"]
    APPLIED.append(f"{name}: apt-get install {' '.join(packages)}" + (f" (then: {then})" if then else ""))


# what the program prints once its find_library fix is applied (its stdout holds it)
FOUND_PRINTS = {"sounddevice_without_portaudio": "PortAudio", "pylibdmtx_without_libdmtx": "[]"}


@pytest.mark.parametrize("name", sorted(FOUND_PRINTS))
def test_the_find_library_fix_applied_for_real(name, tmp_path):
    """sounddevice without PortAudio, pylibdmtx without libdmtx: the report's fix ("apt-get install libportaudio2",
    "apt-get install libdmtx0b"), run for real as printed (as root: CI's machine; find_library reads ld.so.cache,
    which only an install, with its ldconfig, changes: no folder on a search path stands for it), then the program
    runs, and its trace's outcome is ok. What the install added is purged after."""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        _unavailable("needs apt-get and root (the fix installs a system package: CI's machine)")
    (s,) = [x for x in SITUATIONS if x.name == name]
    python, _ = environment(s.lock, s.python)
    if find_library_finds(s.find_library[0]):
        _unavailable(f"this machine has lib{s.find_library[0]} installed: there is no fix to apply")
    (tmp_path / "app.py").write_text(s.program)
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    line = next((x for x in run.stderr.splitlines() if x.startswith("    1. apt-get install ")), None)
    assert line is not None, run.stderr[-3000:]
    packages = line[len("    1. apt-get install "):].split(" (", 1)[0].split()
    assert packages == [s.find_library[1]], line
    pulled: list[str] = []
    try:
        pulled = apt_install_for_real(packages)
        after = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert after.returncode == 0 and FOUND_PRINTS[name] in after.stdout, after.stderr[-2000:]
        again = dlltrace("run", "-o", "t2.jsonl", "--", str(python), "app.py", cwd=tmp_path)
        doc = json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)
        assert again.returncode == 0 and doc["outcome"]["kind"] == "ok", again.stderr[-2000:]
    finally:
        apt_purge(pulled)  # (the machine as it was: what the install added, purged)
    APPLIED.append(f"{name}: apt-get install {' '.join(packages)}")


def deb_ships(package: str, program: str, into: Path) -> bool:
    """Whether Debian's package (apt-get download, its file list: dpkg-deb -c) ships /usr/bin/<program> (a file or
    a link): the ground truth a command-not-found database holds."""
    into.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["apt-get", "download", package], cwd=into, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        _unavailable(f"apt-get download {package} failed: {r.stderr[-800:]}")
    (deb,) = into.glob(f"{package}_*.deb")
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    return any(line.split()[5] == f"./usr/bin/{program}" for line in listing.splitlines() if len(line.split()) > 5)


CNF_DB = Path("/var/lib/command-not-found/commands.db")


@pytest.mark.parametrize("name", ["pytesseract_without_tesseract", "graphviz_without_dot", "pdf2image_without_poppler"])
def test_the_program_fix_applied_for_real(name, tmp_path):
    """A program not found (pytesseract's tesseract, graphviz's dot, pdf2image's pdfinfo): the report's fix,
    "apt-get install tesseract-ocr", run for real as printed (as root: CI's machine), then the program runs and its
    trace's outcome is ok. The package comes from command-not-found's database, as on a machine that has it
    (Ubuntu's default): where this one has none, the database is written for the test with the one row the
    package's own file list proves (deb_ships: the .deb that apt-get download fetches lists ./usr/bin/<program>),
    and taken away after; a machine's own database is used as it is. What the install added is purged after."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb") or os.geteuid() != 0:
        _unavailable("needs apt-get, dpkg-deb and root (the fix installs a system package: CI's machine)")
    import sqlite3

    (s,) = [x for x in SITUATIONS if x.name == name]
    program, package = s.unstarted
    python, _ = environment(s.lock, s.python)
    if shutil.which(program):
        _unavailable(f"this machine has {program}: there is no fix to apply")
    made = not CNF_DB.exists()
    if made:
        assert deb_ships(package, program, tmp_path / "debs"), f"{package} ships no /usr/bin/{program}"
        CNF_DB.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(CNF_DB)
        con.executescript('CREATE TABLE "commands" ([cmdID] INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, '
                          '[pkgID] INTEGER NOT NULL, [command] TEXT); CREATE TABLE "packages" ([pkgID] INTEGER PRIMARY '
                          'KEY AUTOINCREMENT NOT NULL, [name] TEXT, [version] TEXT, [component] TEXT, [priority] INTEGER);')
        con.execute("INSERT INTO packages VALUES (1, ?, '', 'main', 120)", (package,))
        con.execute("INSERT INTO commands VALUES (1, 1, ?)", (program,))
        con.commit()
        con.close()
    pulled: list[str] = []
    try:
        (tmp_path / "app.py").write_text(s.program)
        run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path)
        assert run.returncode == 1, run.stderr[-2000:]
        head = next((x for x in run.stderr.splitlines() if x.startswith("dlltrace ─")), "")
        assert head.startswith(f"dlltrace ─ {s.headline}"), run.stderr[-3000:]
        line = next((x for x in run.stderr.splitlines() if x.startswith("    1. apt-get install ")), None)
        assert line is not None, run.stderr[-3000:]
        packages = line[len("    1. apt-get install "):].split(" (", 1)[0].split()
        assert packages == [package], line
        pulled = apt_install_for_real(packages)
        after = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert after.returncode == 0, after.stderr[-2000:]
        again = dlltrace("run", "-o", "t2.jsonl", "--", str(python), "app.py", cwd=tmp_path)
        doc = json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)
        assert again.returncode == 0 and doc["outcome"]["kind"] == "ok", again.stderr[-2000:]
    finally:
        if made:
            CNF_DB.unlink(missing_ok=True)
            try:
                CNF_DB.parent.rmdir()
            except OSError:
                pass
        apt_purge(pulled)  # (the machine as it was: what the install added, purged)
    APPLIED.append(f"{name}: apt-get install {' '.join(packages)}")


# what a program whose first fix made its load work then dies of, that is no load (its own bug)
AFTER_FIX = {"pyvips_without_libvips": "ModuleNotFoundError: No module named 'decls'"}


# A distribution's own file deleted (an install cut short, an antivirus): the report finds it in the distribution's
# RECORD and its first fix reinstalls that distribution with the traced Python's own pip; applied for real (the fix's
# command as printed, pip told where the pinned wheel is), the program then runs. (name, lock, requirement, the file
# removed (a glob under site-packages), the program, what the ending exception says)
DAMAGED = [
    ("pillow_without_its_libjpeg", "openslide-1.4-py311", "pillow==11.0.0", "pillow.libs/libjpeg-*.so*",
     'from PIL import Image\n\nprint(Image.new("RGB", (2, 2)).size)\n'),
    ("numpy_without_its_openblas", "onnxruntime-gpu-1.19-cupy-13.6-py311", "numpy==1.26.4",
     "numpy.libs/libopenblas*.so*", "import numpy\n\nprint(numpy.ones(3).sum())\n"),
]


@pytest.mark.parametrize("name,lock,requirement,removed,program", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_distributions_own_file_removed_is_reinstalled(name, lock, requirement, removed, program, tmp_path):
    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    wheels = winetools.DOWNLOADS / "situations"
    pin = next(line for line in (LOCKS / f"{lock}.txt").read_text().splitlines()
               if line.lower().startswith(requirement.lower() + " "))
    (tmp_path / "req.txt").write_text(pin + "\n")
    subprocess.run([find_python("3.11"), "-m", "venv", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    pip(python, "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "-d", str(wheels), "-r",
        str(tmp_path / "req.txt"))
    pip(python, "install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes", "-r",
        str(tmp_path / "req.txt"))
    site = next((tmp_path / "venv" / "lib").glob("python3.*/site-packages"))
    (gone,) = [p for p in site.glob(removed) if not p.is_symlink()]
    gone.unlink()
    (tmp_path / "app.py").write_text(program)
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path)
    assert run.returncode == 1 and "ImportError" in run.stderr, run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    (fatal,) = [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    assert fatal["leaf"] == gone.name, (fatal["leaf"], gone.name)
    first = fatal["fixes"][0]
    dist, version = requirement.split("==")
    assert (first["action"], first["package"], first["version"], first["verified"]) == ("install", dist, version, True)
    command = f"{python} -m pip install --force-reinstall --no-deps {requirement}"
    assert (f"1. {gone.name} belongs to {dist} {version} (its RECORD lists {gone.relative_to(site)}) and is not "
            f"there: reinstall it:\n       {command}\n") in run.stderr, run.stderr[-3000:]  # (the command alone: it pastes)
    # the fix as printed, pip told where the pinned wheel is (the same file PyPI serves, its hash checked before)
    fixed = subprocess.run(command.split() + ["--no-index", "--find-links", str(wheels)], capture_output=True,
                           text=True, timeout=600)
    assert fixed.returncode == 0 and gone.exists(), fixed.stderr[-2000:]
    after = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr[-2000:]
    again = dlltrace("run", "-o", "t2.jsonl", "--", str(python), "app.py", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)[
        "outcome"]["kind"] == "ok", again.stderr[-2000:]
    APPLIED.append(f"{name}: pip install --force-reinstall --no-deps {requirement}")


@pytest.mark.parametrize("folder", ["My Projects/venv"])  # (a plain venv is the DAMAGED cases' already)
def test_a_distributions_own_file_its_package_looks_for_first_is_reinstalled(tmp_path, folder):
    """lightgbm 4.5.0 with its lightgbm/lib/lib_lightgbm.so deleted: lightgbm looks for the file before loading it
    (lightgbm/libpath.py) and raises Exception("Cannot find lightgbm library file in following paths: ..."): no load is
    made, so no loader searched. The report names the file its RECORD lists, and the reinstall by the traced Python's
    own pip; the fix's command as printed, pip told where the pinned wheel is, then the program runs and its trace
    reads ok. In a venv whose folder's name has a space too ("My Projects": the path, a line of lightgbm's message,
    was not taken before shim.named_files took a line's whole path)."""
    import shlex

    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    wheels = winetools.DOWNLOADS / "situations"
    lock = LOCKS / "lightgbm-4.5-py311.txt"
    subprocess.run([find_python("3.11"), "-m", "venv", str(tmp_path / folder)], check=True)
    python = tmp_path / folder / "bin" / "python"
    pip(python, "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "-d", str(wheels), "-r", str(lock))
    pip(python, "install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes", "-r", str(lock))
    site = next((tmp_path / folder / "lib").glob("python3.*/site-packages"))
    gone = site / "lightgbm" / "lib" / "lib_lightgbm.so"
    gone.unlink()
    (tmp_path / "app.py").write_text("import lightgbm\n\nprint(lightgbm.__version__)\n")
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path)
    assert run.returncode == 1 and "Cannot find lightgbm library file in following paths" in run.stderr, \
        run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert doc["outcome"]["kind"] == "died_of_other", doc["outcome"]
    assert not [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]  # (no load is the failure)
    file = doc["outcome"]["file"]
    assert file is not None and (file["path"], file["package"], file["version"], file["listed"]) == (
        str(gone), "lightgbm", "4.5.0", "lightgbm/lib/lib_lightgbm.so"), doc["outcome"]
    assert doc["outcome"]["text"].endswith(": lib_lightgbm.so, a file of lightgbm 4.5.0, is not there"), doc["outcome"]
    command = f"{shlex.quote(str(python))} -m pip install --force-reinstall --no-deps lightgbm==4.5.0"
    assert ("1. lib_lightgbm.so belongs to lightgbm 4.5.0 (its RECORD lists lightgbm/lib/lib_lightgbm.so) and is not "
            f"there: reinstall it:\n       {command}\n") in run.stderr, run.stderr[-3000:]  # (the command alone: it pastes)
    fixed = subprocess.run(shlex.split(command) + ["--no-index", "--find-links", str(wheels)], capture_output=True,
                           text=True, timeout=600)
    assert fixed.returncode == 0 and gone.exists(), fixed.stderr[-2000:]
    after = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout.strip() == "4.5.0", after.stderr[-2000:]
    again = dlltrace("run", "-o", "t2.jsonl", "--", str(python), "app.py", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)[
        "outcome"]["kind"] == "ok", again.stderr[-2000:]
    APPLIED.append("lightgbm_without_its_library: pip install --force-reinstall --no-deps lightgbm==4.5.0")


def test_ld_library_path_ahead_of_the_pythons_own_libpython_is_taken_out(tmp_path):
    """pyenv's CPython 3.11 (a shared build: its RUNPATH names its own lib folder, with libpython3.11.so.1.0) run
    with LD_LIBRARY_PATH at the system's library folder, which holds the distribution's older libpython3.11.so.1.0
    (Debian 12's libpython3.11, 3.11.2): LD_LIBRARY_PATH is searched before RUNPATH, so that copy is taken, and
    `import ssl` dies of '_ssl.cpython-311-x86_64-linux-gnu.so: undefined symbol: _PyModule_Add'. The report names
    the symbol and its first fix is 'unset LD_LIBRARY_PATH', saying which copy was taken ahead of which
    (loader/linux/fixes.rule_ld_library_path_shadows_a_runpath_copy); applied for real, the program runs and its
    trace reads ok."""
    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    python = find_python("3.11")
    real = Path(python).resolve()
    own = real.parent.parent / "lib" / "libpython3.11.so.1.0"
    system = sorted(glob.glob("/usr/lib/*-linux-gnu/libpython3.11.so.1.0"))
    if not own.exists() or not system:
        _unavailable("needs a shared CPython 3.11 build (pyenv's) and the system's libpython3.11 (apt-get install libpython3.11)")
    folder = str(Path(system[0]).parent)
    (tmp_path / "app.py").write_text("import ssl\n\nprint(ssl.OPENSSL_VERSION)\n")
    given = {"LD_LIBRARY_PATH": folder}
    plain = subprocess.run([python, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, **given})
    if plain.returncode == 0:
        _unavailable(f"the system's {system[0]} defines every symbol this CPython's _ssl needs: there is no failure")
    assert "undefined symbol: " in plain.stderr, plain.stderr[-2000:]
    symbol = plain.stderr.strip().rsplit("undefined symbol: ", 1)[1].split()[0]
    run = dlltrace("run", "-o", "t.jsonl", "--", python, "app.py", cwd=tmp_path, given=given)
    assert run.returncode == 1, run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    report_schema().validate(doc)
    (fatal,) = [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    assert (fatal["cause"], fatal["symbol"]) == ("missing_export", symbol), fatal
    assert fatal["fixes"], fatal  # (before: the symbol named, and no fix)
    first = fatal["fixes"][0]
    assert (first["action"], first["variable"], first["value"], first["bound"], first["ahead_of"], first["verified"]) == (
        "set_env", "LD_LIBRARY_PATH", "", system[0], str(own), True), first
    assert (f"unset LD_LIBRARY_PATH\n       ({fatal['leaf']} needs the symbol {symbol}, which no library loaded defines; "
            f"{system[0]} was taken from LD_LIBRARY_PATH ahead of {own}: without that folder, ld.so takes that copy)"
            in run.stderr), run.stderr[-3000:]
    # the fix as printed: the program started with LD_LIBRARY_PATH unset
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    after = subprocess.run([python, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert after.returncode == 0 and "OpenSSL" in after.stdout, after.stderr[-2000:]
    again = dlltrace("run", "-o", "t2.jsonl", "--", python, "app.py", cwd=tmp_path, unset=("LD_LIBRARY_PATH",))
    assert again.returncode == 0 and json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)[
        "outcome"]["kind"] == "ok", again.stderr[-2000:]
    APPLIED.append(f"pyenv_python_with_the_systems_libpython_on_ld_library_path: unset LD_LIBRARY_PATH")


# A Debian package's files made absent for one command, as on a machine without the package: a private mount
# namespace (unshare -m) in which an overlay over the library folder hides the package's files there, ld.so.cache is
# made again without them and dpkg's status lacks the package; the machine itself is not changed. $1: the packages,
# $2...: the command.
WITHOUT_PACKAGES = r'''
set -e
pkgs="$1"; shift
lib=$(dirname "$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')")
lib=$(readlink -f "$lib")
t=$(mktemp -d)
mount -t tmpfs tmpfs "$t"
mkdir "$t/upper" "$t/work"
mount -t overlay overlay -o "lowerdir=$lib,upperdir=$t/upper,workdir=$t/work" "$lib"
for p in $pkgs; do
  for f in $(dpkg -L "$p"); do
    case "$(readlink -m "$f")" in "$lib"/*) [ -d "$f" ] || rm -f "$f" ;; esac
  done
done
ldconfig -C "$t/ld.so.cache"
mount --bind "$t/ld.so.cache" /etc/ld.so.cache
awk -v drop=" $pkgs " 'BEGIN { RS = ""; ORS = "\n\n" } { split($0, l, "\n"); n = l[1]; sub(/^Package: /, "", n);
  if (index(drop, " " n " ") == 0) print }' /var/lib/dpkg/status > "$t/status"
mount --bind "$t/status" /var/lib/dpkg/status
"$@"
'''


def without_packages(packages: list[str], command: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """`command` run where these Debian packages' library files are absent (WITHOUT_PACKAGES; root and unshare)."""
    return subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", WITHOUT_PACKAGES, "bash",
                           " ".join(packages), *command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_typelibs_library_loaded_after_the_users_gi_import(tmp_path):
    """Debian's PyGObject (python3-gi 3.42.2, the system's /usr/bin/python3) and PackageKit's typelib, its library
    (libpackagekit-glib2-18) absent: `from gi.repository import PackageKitGlib` imports, and the first call of its
    code (PackageKitGlib.Client.new(), line 5) dlopens libpackagekit-glib2.so.18 from GLib's typelib code and dies of
    a GError naming it. The report blames that load, made by the program's code after the user's own import
    gi.repository.PackageKitGlib (gi.importer makes that module with no <module> frame: before
    pycontext.rule_users_import_without_a_module_frame it said 'after import gi.overrides.GLib', an import gi made),
    and its first fix is 'apt-get install libpackagekit-glib2-18'; with the package there (this machine outside the
    namespace), the program runs and its trace reads ok."""
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("dpkg"):
        _unavailable("needs root, unshare and dpkg (a package's files hidden in a private mount namespace)")
    probe = subprocess.run([python, "-c", "import gi; gi.require_version('PackageKitGlib', '1.0'); "
                            "from gi.repository import PackageKitGlib"], capture_output=True, text=True)
    listed = subprocess.run(["dpkg", "-L", "libpackagekit-glib2-18"], capture_output=True, text=True)
    if probe.returncode != 0 or listed.returncode != 0:
        _unavailable("needs Debian's python3-gi, gir1.2-packagekitglib-1.0 and libpackagekit-glib2-18")
    (tmp_path / "app.py").write_text('import gi\ngi.require_version("PackageKitGlib", "1.0")\n'
                                     'from gi.repository import PackageKitGlib\n\nprint(PackageKitGlib.Client.new())\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    run = without_packages(["libpackagekit-glib2-18"], [sys.executable, "-m", "dlltrace", "run", "-o", "t.jsonl", "--",
                                                        python, "app.py"], tmp_path, env)
    assert run.returncode == 1 and "Could not locate pk_client_new: libpackagekit-glib2.so.18" in run.stderr, \
        run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    report_schema().validate(doc)
    assert doc["outcome"]["kind"] == "died_of_load", doc["outcome"]
    (fatal,) = [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    assert fatal["leaf"] == "libpackagekit-glib2.so.18" and fatal["model_agrees"], fatal
    assert fatal["origin"] == "the program's code after import gi.repository.PackageKitGlib", fatal["origin"]
    first = fatal["fixes"][0]
    assert (first["action"], first["package"], first["verified"]) == ("install_system_package", "libpackagekit-glib2-18",
                                                                      True), fatal["fixes"]
    assert "    1. apt-get install libpackagekit-glib2-18\n" in run.stderr, run.stderr[-3000:]
    # with the package (this machine, outside the namespace): it runs, and the trace reads ok
    after = subprocess.run([python, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and "PackageKitGlib.Client" in after.stdout, after.stderr[-2000:]
    again = dlltrace("run", "-o", "t2.jsonl", "--", python, "app.py", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(dlltrace("report", "t2.jsonl", "--json", cwd=tmp_path).stdout)[
        "outcome"]["kind"] == "ok", again.stderr[-2000:]
    APPLIED.append("pygobject_typelib_without_its_library: apt-get install libpackagekit-glib2-18 (installed here)")


QT_OFFSCREEN_APP = ('from PySide6.QtGui import QGuiApplication\n\napp = QGuiApplication([])\n'
                    'print("platform", app.platformName())\n')


def test_a_qt_platform_plugin_its_distribution_lists_removed_is_reinstalled(tmp_path):
    """PySide6_Essentials 6.8.1 with QT_QPA_PLATFORM=offscreen and its PySide6/Qt/plugins/platforms/libqoffscreen.so
    deleted: Qt finds no such plugin in its plugins folder, prints "This application failed to start because no Qt
    platform plugin could be initialized" and aborts (SIGABRT), no load of the plugin made. The report said "no failed
    load explains it"; it now names the file, PySide6_Essentials 6.8.1 (its RECORD) and the reinstall by the traced
    Python's own pip; applied as printed (pip told where the pinned wheel is), the program prints its platform and
    its trace reads ok. A failed run with every file there names no file; one that imported nothing of PySide6 does
    not blame its missing file (shiboken6's import would: it imports PySide6 and PySide6.support). The report of the
    saved trace reads no disk: the same once the venv is gone."""
    import shlex

    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    wheels = winetools.DOWNLOADS / "situations"
    lock = LOCKS / "pyside6-6.8-py311.txt"
    subprocess.run([find_python("3.11"), "-m", "venv", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    pip(python, "download", "--no-deps", "--only-binary=:all:", "--require-hashes", "-d", str(wheels), "-r", str(lock))
    pip(python, "install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes", "-r", str(lock))
    site = next((tmp_path / "venv" / "lib").glob("python3.*/site-packages"))
    gone = site / "PySide6" / "Qt" / "plugins" / "platforms" / "libqoffscreen.so"
    (tmp_path / "app.py").write_text(QT_OFFSCREEN_APP)
    given = {"QT_QPA_PLATFORM": "offscreen"}
    # every file there, a run that fails after importing PySide6: nothing is named (no false alarm)
    (tmp_path / "exits.py").write_text("import PySide6.QtGui\nraise SystemExit(3)\n")
    run = dlltrace("run", "-o", "t0.jsonl", "--", str(python), "exits.py", cwd=tmp_path, given=given)
    assert run.returncode == 3 and "a file of" not in run.stderr, run.stderr[-3000:]
    assert json.loads(dlltrace("report", "t0.jsonl", "--json", cwd=tmp_path).stdout)["outcome"]["file"] is None
    gone.unlink()
    plain = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, **given})
    assert plain.returncode == -6 and "no Qt platform plugin could be initialized" in plain.stderr, plain.stderr[-2000:]
    run = dlltrace("run", "-o", "t.jsonl", "--", str(python), "app.py", cwd=tmp_path, given=given)
    assert run.returncode == 134 and "no Qt platform plugin could be initialized" in run.stderr, run.stderr[-3000:]
    head = next(line for line in run.stderr.splitlines() if line.startswith("dlltrace ─"))
    assert head.startswith("dlltrace ─ the program crashed (SIGABRT: it aborted): libqoffscreen.so, a file of "
                           "PySide6_Essentials 6.8.1, is not there · "), head
    command = f"{shlex.quote(str(python))} -m pip install --force-reinstall --no-deps PySide6_Essentials==6.8.1"
    assert ("1. libqoffscreen.so belongs to PySide6_Essentials 6.8.1 (its RECORD lists PySide6/Qt/plugins/platforms/"
            f"libqoffscreen.so) and is not there: reinstall it:\n       {command}\n") in run.stderr, run.stderr[-3000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    schema("report-linux-v1.json").validate(doc)
    assert doc["outcome"]["kind"] == "crashed" and doc["outcome"]["signal"] == 6, doc["outcome"]
    assert not [f for d in doc["diagnoses"] for f in d["failures"] if f["fate"] == "fatal"]
    file = doc["outcome"]["file"]
    assert file is not None and (file["path"], file["package"], file["version"], file["how"]) == (
        str(gone), "PySide6_Essentials", "6.8.1", "listed"), doc["outcome"]
    # a failed run that imported nothing of PySide6 (shiboken6 imports PySide6: not it): its missing file is not blamed
    (tmp_path / "other.py").write_text("import json\nraise SystemExit(3)\n")
    other = dlltrace("run", "-o", "t2.jsonl", "--", str(python), "other.py", cwd=tmp_path, given=given)
    assert other.returncode == 3 and "libqoffscreen" not in other.stderr and "a file of" not in other.stderr, \
        other.stderr[-3000:]
    fixed = subprocess.run(shlex.split(command) + ["--no-index", "--find-links", str(wheels)], capture_output=True,
                           text=True, timeout=600)
    assert fixed.returncode == 0 and gone.exists(), fixed.stderr[-2000:]
    after = subprocess.run([str(python), "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, **given})
    assert after.returncode == 0 and after.stdout.strip() == "platform offscreen", after.stderr[-2000:]
    again = dlltrace("run", "-o", "t3.jsonl", "--", str(python), "app.py", cwd=tmp_path, given=given)
    assert again.returncode == 0 and json.loads(dlltrace("report", "t3.jsonl", "--json", cwd=tmp_path).stdout)[
        "outcome"]["kind"] == "ok", again.stderr[-2000:]
    shutil.rmtree(tmp_path / "venv")  # (the report reads the trace alone)
    said = dlltrace("report", "t.jsonl", cwd=tmp_path)
    assert said.returncode == 0 and said.stdout.splitlines()[0].split(" · ")[0] == head.split(" · ")[0], said.stdout
    APPLIED.append("pyside6_without_its_platform_plugin: pip install --force-reinstall --no-deps "
                   "PySide6_Essentials==6.8.1")
