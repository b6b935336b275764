"""Which failure is the failure: the outcome of a traced process, the question a user asks first (did it
crash, die of a load, die of something else, or run without its GPU?), and the class of each failed load
(fatal, fallback, probe, noise). Both OSes; docs/verdicts.md, "Outcomes".

rule_outcome, in order:
  crashed       the process ended on an unhandled exception (an NTSTATUS exit code, a fatal signal)
  died_of_load  a failed load was the failure (its verdict: diagnosis/verdict.py, verdict_linux.py)
  died_of_other the program ended on a Python exception that names no failed load: the exception is the
                answer, failed loads are context, and no fix is "the" fix
  degraded      it ended normally (no crash, no exception) but a library of an accelerator or optional
                feature did not load: it ran without it ("ran on the CPU: its CUDA libraries did not load")
  ok            it exited with 0 and lost nothing
  and otherwise how it ended (exited with a code nothing explains, killed, interrupted, ...).

rule_load_class, for each failed load: fatal (its fate), fallback (gone past, and an accelerator's
library: the program lost a feature), probe (gone past by design: a retry that worked, the real loader
loading it), noise (gone past, nothing lost)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Literal, Mapping, Optional, Sequence

from dlltrace import winpath

if TYPE_CHECKING:
    from dlltrace.model import Owner
    from dlltrace.trace.reader import Trace

OutcomeKind = Literal["crashed", "died_of_load", "died_of_other", "degraded", "ok", "exited", "killed", "interrupted",
                      "could_not_start", "never_ran", "not_windows", "not_traced", "unknown"]
LoadClass = Literal["fatal", "fallback", "probe", "noise"]

# The libraries whose absence costs an accelerator or an optional feature, by file name (Windows and Linux),
# with the feature: CUDA's runtime and libraries (cudart64_110.dll, libcudart.so.11.0, cublas, cufft, curand,
# cusolver, cusparse, nvrtc, nvJitLink), cuDNN, TensorRT (nvinfer), NCCL, the NVIDIA driver (nvcuda.dll,
# libcuda.so.1), DirectML (DirectML.dll: onnxruntime-directml, torch-directml). Where frameworks go past them
# (the code that makes such a load a fallback, not a failure):
# - TensorFlow: tsl/platform/default/dso_loader.cc (GetCudaRuntimeDsoHandle, GetCublasDsoHandle, GetCudnnDsoHandle,
#   ...: "Could not load dynamic library '%s'; dlerror: %s", then GPU devices are skipped), and
#   stream_executor/cuda/cuda_diagnostics.cc for libcuda.so.1;
# - onnxruntime: core/session/provider_bridge_ort.cc (ProviderLibrary::Get: "Failed to load library ... with error",
#   the CUDA/TensorRT provider is left out and the session falls back to the CPU provider);
# - CuPy: cupy_backends/cuda/libs/*.pyx load cuBLAS/cuRAND/cuSPARSE lazily, at first use;
# - torch: torch/cuda/__init__.py _lazy_init ("Found no NVIDIA driver", is_available() False) for the driver;
#   its CUDA libraries are its own imports (a failure there is its import's, fatal);
# - onnxruntime-directml / torch-directml: DirectML.dll, loaded with the DML provider only;
# - OpenCV (opencv-python, -headless, -contrib): modules/videoio/src/cap_ffmpeg.cpp (HAVE_FFMPEG_WRAPPER, icvInitFFMPEG)
#   loads opencv_videoio_ffmpeg<version>_64.dll from cv2's folder, then by name, when a VideoCapture or VideoWriter
#   first asks for FFmpeg; failing, the FFmpeg backend is left out and the capture does not open (isOpened() False,
#   no exception): opencv-python-headless 4.10.0.84 with the file gone, seen under Wine.
FEATURES: tuple[tuple[str, "re.Pattern[str]"], ...] = tuple((f, re.compile(p, re.I)) for f, p in (
    ("the NVIDIA driver", r"^(nvcuda\.dll|libcuda\.so(\.\d+)*|libnvidia-ml\.so(\.\d+)*|nvml\.dll)$"),
    ("cuDNN", r"^(cudnn(64)?(_\w+)?(64)?_\d+\.dll|libcudnn(_\w+)?\.so(\.\d+)*)$"),
    ("TensorRT", r"^(nvinfer(_\w+)?(_\d+)?\.dll|libnvinfer(_\w+)?\.so(\.\d+)*|nvonnxparser(_\d+)?\.dll)$"),
    ("NCCL", r"^libnccl\.so(\.\d+)*$"),
    ("DirectML", r"^directml\.dll$"),
    ("OpenCV's FFmpeg video I/O", r"^opencv_videoio_ffmpeg\d*(_64)?\.dll$"),
    ("CUDA", r"^(cu(dart|blas|blaslt|fft|rand|solver|sparse|pti)\w*64_\d+\.dll|nvrtc\w*64_\d+\w*\.dll|nvjitlink\w*\.dll"
             r"|lib(cudart|cublas|cublaslt|cufft|curand|cusolver|cusparse|nvrtc|nvjitlink|cupti)\w*\.so(\.\d+)*)$"),
))


# What a framework raises when a feature's library did not load, by feature, each from the code that raises it:
# - the NVIDIA driver: the CUDA runtime's cudaErrorInsufficientDriver (35), "CUDA driver version is insufficient
#   for CUDA runtime version", which a runtime without libcuda.so.1 / nvcuda.dll returns and CuPy raises as
#   CUDARuntimeError (cupy_backends/cuda/api/runtime.pyx, check_status); torch's "Found no NVIDIA driver on your
#   system" (c10/cuda/CUDAFunctions.cpp, device_count_impl, on cudaErrorInsufficientDriver with no driver);
#   TensorFlow's "failed call to cuInit" (stream_executor/cuda/cuda_driver.cc);
# - cuDNN: torch's "cuDNN error: CUDNN_STATUS_..." and CTranslate2's "Could not load library libcudnn..."
FEATURE_ERRORS: tuple[tuple[str, "re.Pattern[str]"], ...] = tuple((f, re.compile(p, re.I)) for f, p in (
    ("the NVIDIA driver", r"cudaErrorInsufficientDriver|CUDA driver version is insufficient|Found no NVIDIA driver"
                          r"|failed call to cuInit"),
    ("cuDNN", r"CUDNN_STATUS_|cuDNN error|Could not load library (lib)?cudnn"),
))


def rule_exception_names_feature(text: str, failed: list[Optional[str]]) -> Optional[int]:
    """The failed library an exception is about when it names no library but the feature one of them is: the
    last of `failed` (library names, in order) whose feature's errors (FEATURE_ERRORS) the exception's text
    holds (CuPy's cudaErrorInsufficientDriver after libcuda.so.1 failed to load: the driver is what it died
    of), None for none."""
    for i in range(len(failed) - 1, -1, -1):
        feature = feature_of(failed[i])
        if feature and any(f == feature and p.search(text) for f, p in FEATURE_ERRORS):
            return i
    return None


def feature_of(name: Optional[str]) -> Optional[str]:
    """The accelerator or optional feature a library is part of ("CUDA", "cuDNN", ...), from its file name."""
    if not name:
        return None
    base = re.split(r"[\\/]", name)[-1]
    return next((f for f, p in FEATURES if p.match(base)), None)


@dataclass(frozen=True)
class PyError:
    """The Python exception the program ended on (the bootstrap's py_exception event)."""
    type: str
    message: str

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


def python_error(trace: "Trace", pid: int) -> Optional[PyError]:
    """The Python exception process pid ended on (its last py_exception event: the bootstrap's), or None."""
    ends = list(trace.of("py_exception", pid=pid))
    if not ends:
        return None
    return PyError(str(ends[-1].get("type") or "?"), str(ends[-1].get("message") or ""))


# the words a warning uses for a feature whose library did not load (FEATURES' names)
FEATURE_WORDS: dict[str, tuple[str, ...]] = {
    "CUDA": ("CUDA",), "cuDNN": ("cuDNN",), "TensorRT": ("TensorRT",), "NCCL": ("NCCL",), "DirectML": ("DirectML",),
    "the NVIDIA driver": ("NVIDIA driver", "CUDA driver"), "OpenCV's FFmpeg video I/O": ("FFmpeg", "FFMPEG"),
}


SAID_LIMIT = 3  # the program's lines shown with one load


def program_words(trace: "Trace", pid: int) -> list[str]:
    """What process pid said: the warnings it showed (the bootstrap's py_warning events, as "UserWarning:
    message"), then the lines its native code printed to stderr (the Linux recorder's stderr events:
    TensorFlow's "Could not load dynamic library ...", onnxruntime's "Failed to load library ...")."""
    said = [f"{e.get('category') or 'Warning'}: {e.get('message') or ''}" for e in trace.of("py_warning", pid=pid)]
    return said + [e["text"] for e in trace.of("stderr", pid=pid) if isinstance(e.get("text"), str)]


def rule_program_said(warnings: list[str], name: str, leaf: Optional[str]) -> tuple[str, ...]:
    """The program's own words about a failed load (program_words: its warnings and stderr lines): those that
    name the load's file or its leaf (torchvision's "Failed to load image Python extension: 'libpng16.so.16:
    cannot open ...'", TensorFlow's "Could not load dynamic library 'libcudart.so.11.0'"), else, for an
    accelerator's library, those that name its feature (torch's "CUDA initialization: Found no NVIDIA driver
    ..." for libcuda.so.1); SAID_LIMIT at most. Evidence shown with the load, never a verdict of its own."""
    names = {re.split(r"[\\/]", x)[-1].lower() for x in (name, leaf or "") if x}
    named = [w for w in warnings if any(n in w.lower() for n in names)]
    words = FEATURE_WORDS.get(feature_of(leaf) or feature_of(name) or "", ())
    about = named or [w for w in warnings if any(x.lower() in w.lower() for x in words)]
    return tuple(about[:SAID_LIMIT])


def found_none(e: dict) -> Optional[str]:
    """The name of a py_find_library event whose call found nothing (its `result` recorded, and None) for a library's
    name, not a path (sounddevice also asks for 'bin\\libportaudio-2.dll', its wheels' own copy), else None."""
    name = e.get("name")
    if "result" not in e or e.get("result") is not None or not isinstance(name, str) or not name \
            or "/" in name or "\\" in name:
        return None
    return name


_OTHER_SYSTEMS = re.compile(r"\.(?:so|dylib|dll)(?:\..*)?$", re.IGNORECASE)


def library_key(name: str) -> str:
    """What a library is called under its every name, for any system: the file name's, in lower case, without
    `lib`, its extension (.so and a version after it, .dylib, .dll) and a version at its end: 'cairo' for
    libcairo.so.2, libcairo.2.dylib and libcairo-2.dll; 'pango' for libpango-1.0-0 and libpango-1.0.so.0."""
    base = re.split(r"[\\/]", name)[-1].lower()
    base = _OTHER_SYSTEMS.sub("", base)
    base = base[3:] if base.startswith("lib") else base
    return re.sub(r"[-._\d]+$", "", base)


def rule_exception_is_find_library(text: str, finds: "list[dict]", opened: "Iterable[dict]" = ()) -> Optional[dict]:
    """The ctypes.util.find_library call, of the process's py_find_library events `finds` (in order), that the
    exception it ended on (`text`: "OSError: PortAudio library not found") is about: the last one that found
    nothing (its `result` recorded, and None) for a library's name (not a path: sounddevice then asks for
    'bin\\libportaudio-2.dll' and 'lib/libportaudio.dylib', its wheels' own copies) that the text names as a
    word, with or without `lib` and a `.dll` after it (any case: 'PortAudio', 'zbar', python-magic's 'libmagic'; on
    Windows pyusb asks for 'usb.dll', and its usb.core.NoBackendError names `usb`), or as the prefix of one of
    its C functions (python-vlc's NameError("no function 'libvlc_new'"): find_library('vlc') was None, and
    ctypes.CDLL(None) opened the program itself); None for none. A call whose result was not recorded (the program
    had a tracer of its own) is not taken, nor one whose library the process opened after it all the same
    (`opened`: its objopen events; a file lib<name>.so*, by its own path or a fallback name: find_library was not
    what it died of)."""
    loads = [(e.get("seq"), str(e.get("path") or "").replace("\\", "/").rsplit("/", 1)[-1]) for e in opened]
    for e in reversed(finds):
        name = found_none(e)
        if name is None or len(name) < 2:
            continue
        stem = name[:-4] if name.lower().endswith(".dll") and len(name) > 4 else name  # (Windows: pyusb's 'usb.dll')
        stem = stem[3:] if stem.lower().startswith("lib") and len(stem) > 3 else stem
        if not (re.search(rf"(?<![A-Za-z0-9_])(lib)?{re.escape(stem)}(?![A-Za-z0-9_])", text, re.IGNORECASE) or
                re.search(rf"(?<![A-Za-z0-9_])(lib)?{re.escape(stem)}_[A-Za-z]", text, re.IGNORECASE)):
            continue
        so = ("lib" + stem) + ".so"
        seq = e.get("seq")
        if any((base == so or base.startswith(so + ".")) and not (isinstance(seq, int) and isinstance(at, int)
                                                                   and at < seq) for at, base in loads):
            continue  # (loaded after all: the program went past the call)
        return e
    return None


def rule_unfound_dll_with_a_fix(e: dict, finds: "list[dict]", known: "Callable[[str], bool]") -> dict:
    """The find_library call to show on Windows for `e`, the one the exception is about (of `finds`, the process's
    py_find_library events): itself when `known` (a file of its name this environment holds, or a pip package that
    ships one: find_library_fixes) says a fix for its name; else the program's first call that found nothing for
    the same library (library_key) whose name it knows a fix for (pyusb 1.3.1 asks for 'usb-1.0.dll',
    'libusb-1.0.dll', 'usb.dll', 'openusb.dll', 'usb-0.1.dll', 'usb.dll', 'libusb0.dll', and its NoBackendError names
    `usb`: the last 'usb.dll' is libusb 0.1's; libusb-package ships libusb-1.0.dll); else itself. The twin of
    verdict_linux.rule_unfound_name_with_a_package."""
    name = e.get("name")
    if isinstance(name, str) and known(name):
        return e
    key = library_key(str(name or ""))
    same = (f for f in finds if key and found_none(f) and library_key(f["name"]) == key and known(f["name"]))
    return next(same, e)


UNSTARTED_ERRORS = ("FileNotFoundError", "PermissionError")  # a program not found; found but not executable


def not_started(e: dict) -> Optional[str]:
    """The program of a py_popen event that failed to start because it was not found or not executable (its `error`
    a FileNotFoundError or a PermissionError: shim.watch_start), else None. Not one whose error names another file
    (its `filename`): subprocess on Linux raises the same errors, with the folder as the file name, for a `cwd` it
    could not change into (the program itself was never looked for); on Windows the file name is null."""
    error, program = e.get("error"), e.get("program")
    if not isinstance(error, dict) or error.get("type") not in UNSTARTED_ERRORS or not isinstance(program, str) \
            or not program:
        return None
    filename = error.get("filename")
    if isinstance(filename, str) and filename != program:
        return None
    return program


def _program_base(program: str) -> str:
    return re.split(r"[\\/]", program)[-1]


def _place(frame: object) -> Optional[tuple[str, str]]:
    if not isinstance(frame, dict) or not isinstance(frame.get("file"), str) or not isinstance(frame.get("function"), str):
        return None
    return frame["file"], frame["function"]


def rule_exception_is_unstarted_program(exception: dict, starts: "list[dict]") -> Optional[dict]:
    """The failed start of a program, of the process's py_popen events `starts` (in order), that the exception it
    ended on (`exception`: its py_exception event) is about: the last that failed for want of the program
    (not_started: not found, or not executable) such that
    - the exception, or one of its causes, is an OSError of that program (its `path`, OSError.filename, is the
      program or names the same file: pdf2image's PDFInfoNotInstalledError, raised while handling
      "FileNotFoundError: [Errno 2] No such file or directory: 'pdfinfo'"); or
    - its message or a cause's names the program, its file name as a word (pytesseract's "tesseract is not
      installed or it's not in your PATH", graphviz's "failed to execute PosixPath('dot')"); or
    - the exception is a package's own class (a module-qualified type) raised by the function that started the
      program: that start's `caller` (file and function) is the innermost of its traceback's `frames`, the one it
      was raised in, whatever its words (`raise ToolMissing() from None` keeps no cause); not a function it only
      passed through (a probe of nvidia-smi at a script's top level, caught, is not what every later error of it is
      about).
    None for none. A start whose error was not recorded (a tracer of the program's own) is not taken."""
    texts = [exception] + [c for c in exception.get("causes") or [] if isinstance(c, dict)]
    words = " ".join(str(t.get("message") or "") for t in texts)
    paths = [str(t.get("path")) for t in texts if isinstance(t.get("path"), str) and t.get("path")]
    failed = [e for e in starts if not_started(e) is not None]
    for e in reversed(failed):
        program = str(e["program"])
        base = _program_base(program)
        if any(p == program or _program_base(p) == base for p in paths):
            return e
        if len(base) >= 2 and re.search(rf"(?<![A-Za-z0-9_.-]){re.escape(base)}(?![A-Za-z0-9_-])", words):
            return e
    frames = [f for f in exception.get("frames") or [] if _place(f) is not None]
    if "." in str(exception.get("type") or "") and frames:
        raised_in = _place(frames[-1])  # (the innermost: where it was raised, not a function it passed through)
        for e in reversed(failed):
            if _place(e.get("caller")) == raised_in:
                return e
    return None


# the GPU frameworks that have CPU-only builds, and the module each is imported as (diagnosis/cuda.py Framework.name ->
# module): a program that imported one may have run on the CPU with every load succeeding (cuda.rule_imported_cpu_build)
CPU_BUILD_FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "paddle": "paddle", "onnxruntime": "onnxruntime",
                        "jax": "jax"}


def imports_a_cpu_build_framework(modules: "Iterable[object]") -> bool:
    """Whether any of the modules the program imported (its py_import events' `module`) is of a framework that has
    CPU-only builds: the cheap test before the CUDA table is made to tell whether the build it imported is one."""
    wanted = set(CPU_BUILD_FRAMEWORKS.values())
    return any(isinstance(m, str) and m.split(".", 1)[0] in wanted for m in modules)


def where_listed(o: "Owner") -> str:
    """The path an owner's record puts its file at: its root joined with the record's path."""
    if winpath.is_absolute(o.root):
        return winpath.join(o.root, *o.path.split("/"))
    return posixpath.join(o.root, o.path)


def same_path(a: str, b: str) -> bool:
    """Two absolute paths of one file: Windows' folded and normalised (.. resolved), a POSIX path's normalised."""
    if winpath.is_absolute(a) or winpath.is_absolute(b):
        return winpath.key(a) == winpath.key(b)
    return posixpath.normpath(a) == posixpath.normpath(b)


def rule_exception_names_a_missing_file_of_its_distribution(exception: dict, owners: "Mapping[str, tuple[Owner, ...]]"
                                                            ) -> "Optional[tuple[str, Owner]]":
    """The file, of the native files the exception the program ended on names (its py_exception's `files`: each with
    whether it was there at the end), that is not there and that an installed distribution's record (RECORD, a conda
    package's conda-meta) lists at that very path, with that distribution (`owners`: Trace.owners); None for none.
    A package that checks for its own DLL before loading it dies with no load made: xgboost's
    XGBoostLibraryNotFound lists xgboost\\lib\\xgboost.dll among its candidates, lightgbm's "Cannot find lightgbm
    library file in following paths" lightgbm\\bin\\lib_lightgbm.dll. Its install is damaged, and reinstalling it
    puts the file back. A candidate no record lists at its path (xgboost's sys.base_prefix\\lib\\xgboost.dll) is not
    taken, nor a file that is there."""
    for f in exception.get("files") or []:
        if not isinstance(f, dict) or f.get("exists") is not False or not isinstance(f.get("path"), str) \
                or not f["path"]:
            continue
        path = f["path"]
        base = re.split(r"[\\/]", path)[-1].lower()
        for o in owners.get(base, ()):
            if same_path(where_listed(o), path):
                return path, o
    return None


# the RECORD-listed native files of the distributions a failed program imported that `dlltrace run` looks at after it
# ended (rule_record_listed_file_gone_after_a_failure); a healthy run looks at none
MAX_RECORD_CHECKS = 20_000
MAX_RECORD_GONE = 64  # of those not there, the most whose absence a trace records


def listed_top(o: "Owner") -> str:
    """The top-level import name a record's file is under ("PyQt5" for PyQt5/Qt5/plugins/platforms/qwindows.dll,
    "numpy" for delvewheel's and auditwheel's numpy.libs/, "_cffi_backend" for a top-level extension), "" for a file
    outside site-packages (a conda package's Library\\bin, a wheel's ../../Library/bin)."""
    parts = o.path.split("/")
    if o.kind == "conda":  # (relative to the prefix: Lib/site-packages/..., lib/python3.11/site-packages/...)
        low = [x.lower() for x in parts]
        if "site-packages" not in low:
            return ""
        parts = parts[low.index("site-packages") + 1:]
    if len(parts) < 1 or parts[0] in ("", ".", ".."):
        return ""
    top = parts[0]
    if len(parts) == 1:  # (a top-level module file: _cffi_backend.cpython-311-x86_64-linux-gnu.so, _foo.pyd)
        return top.split(".", 1)[0]
    return top[:-5] if top.endswith(".libs") else top


def imported_tops(modules: "Iterable[object]") -> frozenset[str]:
    """The top-level names of the modules a program imported (its py_import events' `module`), lower-case."""
    return frozenset(m.split(".", 1)[0].lower() for m in modules if isinstance(m, str) and m)


def record_files_to_check(owners: "Mapping[str, tuple[Owner, ...]]", modules: "Iterable[object]",
                          limit: int = MAX_RECORD_CHECKS, sites: "Sequence[str]" = ()) -> list["Owner"]:
    """The native files, of the distributions whose files are under a package the program imported (`modules`: its
    py_import events' `module`), that their records list (`owners`: Trace.owners), at most `limit`: what `dlltrace
    run` looks for on the disk after a program that failed (rule_record_listed_file_gone_after_a_failure). Every
    native file of such a distribution, not only those under the package: PyQt5-Qt5's Qt is under PyQt5/Qt5. A
    wheel's package in a site-packages folder after another that has it (`sites`: the site folders in sys.path's
    order, py_dists' own) is not the one imported: a user site's PyQt5 hides the system's."""
    tops = imported_tops(modules)
    if not tops:
        return []
    rank = {key_of(s): i for i, s in reversed(list(enumerate(sites)))}
    first: dict[str, int] = {}  # a top-level package -> the first site (its rank) a wheel has it in
    dists: dict[tuple[str, str, str], list["Owner"]] = {}
    for group in owners.values():
        for o in group:
            dists.setdefault((o.kind, o.dist, o.root), []).append(o)
            top = listed_top(o).lower()
            if top in tops and o.kind == "wheel" and key_of(o.root) in rank:
                first[top] = min(first.get(top, len(rank)), rank[key_of(o.root)])
    used = {key for key, files in dists.items()
            if any((t := listed_top(o).lower()) in tops and
                   (o.kind != "wheel" or rank.get(key_of(o.root), first.get(t, 0)) <= first.get(t, len(rank)))
                   for o in files)}
    out = [o for key, files in dists.items() if key in used for o in sorted(files, key=lambda x: x.path)]
    return out[:limit]


def dist_sites(dists_events: "Iterable[dict]") -> list[str]:
    """The site-packages folders the first of these py_dists events lists its distributions in, in its order
    (sys.path's)."""
    for e in dists_events:
        return list(dict.fromkeys(d["site"] for d in e.get("dists") or []
                                  if isinstance(d, dict) and isinstance(d.get("site"), str)))
    return []


def key_of(path: str) -> str:
    """A folder's comparison key: Windows' folded and normalised, a POSIX one normalised."""
    return winpath.key(path) if winpath.is_absolute(path) else posixpath.normpath(path)


def listed_package_folder(o: "Owner") -> str:
    """The folder of the top-level package a record's file is under (<site>/PyQt5 for PyQt5/Qt5/bin/Qt5Core.dll,
    <site>/numpy.libs for numpy.libs/x.so), "" for a top-level file or one outside site-packages."""
    parts = o.path.split("/")
    low = [x.lower() for x in parts]
    n = low.index("site-packages") + 2 if o.kind == "conda" and "site-packages" in low else 1
    if not listed_top(o) or len(parts) <= n:
        return ""
    root = o.root
    for x in parts[:n]:
        root = winpath.join(root, x) if winpath.is_absolute(root) else posixpath.join(root, x)
    return root


def _in_folder(path: str, folder: str) -> bool:
    if winpath.is_absolute(folder):
        return winpath.key(path).startswith(winpath.key(folder) + "\\") if winpath.is_absolute(path) else False
    return posixpath.normpath(path).startswith(posixpath.normpath(folder) + "/")


def rule_record_listed_file_gone_after_a_failure(kind: str, code: Optional[int], failed_load_is_the_failure: bool,
                                                 owners: "Mapping[str, tuple[Owner, ...]]",
                                                 modules: "Iterable[object]", missing: "Iterable[str]",
                                                 frames: "Iterable[str]" = (), sites: "Sequence[str]" = (),
                                                 loaded: "Callable[[], Iterable[str]]" = lambda: ()
                                                 ) -> list[tuple[str, "Owner"]]:
    """The native files of the distributions the program imported (record_files_to_check: their RECORD or
    conda-meta lists them) that were not there when it ended (`missing`: the paths its trace's file facts say are
    missing), with the distribution of each, in the records' order, when the program failed (`kind`, `code`: its
    outcome: crashed, died_of_other, or exited with a code that is not 0) and no failed load is its failure
    (`failed_load_is_the_failure`); [] else. A program that looks for its own file itself, and fails without it,
    makes no load of it: Qt scans its plugins folder for the platform plugin and aborts when it finds none ("This
    application failed to start because no Qt platform plugin could be initialized"), PyQt5-Qt5's
    PyQt5/Qt5/plugins/platforms/qwindows.dll, PySide6's libqxcb.so. Its install is damaged, and reinstalling the
    distribution puts the file back. A file of a distribution the program did not import is not taken; nor, when
    the program ended on a Python exception, one of a distribution none of the exception's frames (`frames`: the
    files its traceback passed through) is in the package folder of (listed_package_folder): an exception the
    program's own code raised is not for want of a package's file. `sites`: py_dists' site folders, in sys.path's
    order (record_files_to_check). Nor a file of a name the process loaded all the same (`loaded`: the paths of the
    modules it mapped, asked once a file is found gone): another copy was used (Wine's own zlib1.dll for a package's
    gone one), which the report says as a module that is not the file its distribution installed."""
    failed = kind in ("crashed", "died_of_other") or (kind == "exited" and code not in (None, 0))
    if not failed or failed_load_is_the_failure:
        return []
    where = [f for f in frames if isinstance(f, str) and f]
    gone = {key_of(p) for p in missing if isinstance(p, str)}
    if not gone:
        return []
    out = []
    checked = record_files_to_check(owners, modules, sites=sites)
    folders: dict[tuple[str, str, str], set[str]] = {}  # each distribution's package folders
    for o in checked:
        folders.setdefault((o.kind, o.dist, o.root), set()).add(listed_package_folder(o))
    for o in checked:
        at = where_listed(o)
        if key_of(at) not in gone:
            continue
        if kind == "died_of_other":  # (the exception went through the package whose file it is)
            if not any(_in_folder(f, d) for f in where for d in folders[(o.kind, o.dist, o.root)] if d):
                continue
        out.append((at, o))
    if out:
        names = {re.split(r"[\\/]", p)[-1].lower() for p in loaded() if isinstance(p, str)}
        out = [(at, o) for at, o in out if re.split(r"[\\/]", at)[-1].lower() not in names]
    return out


@dataclass(frozen=True)
class ProcessOutcome:
    kind: OutcomeKind
    code: Optional[int] = None  # the exit code (a crash's NTSTATUS)
    exception: Optional[PyError] = None  # the Python exception it ended on, when there was one
    lost: tuple[str, ...] = ()  # degraded: the features that did not load ("CUDA", "cuDNN"), in order
    lost_by: tuple[str, ...] = ()  # degraded: the libraries that did not load, one per feature lost
    signal: Optional[int] = None  # crashed on Linux: the signal (SIGABRT 6, SIGSEGV 11); its code is None
    missing: int = 0  # degraded: how many libraries did not load, of all the features lost (lost_by names one a feature)
    gpu: str = ""  # the NVIDIA driver lost: why its library was not there (loader/linux/fixes.py rule_driver_state)


def rule_load_class(fate: str, reason: Optional[str], name: str, leaf: Optional[str]) -> LoadClass:
    """A failed load's class: fatal (its verdict), fallback (gone past, an accelerator's library), probe (gone
    past by design: a later try of it worked, or the real loader loaded it), noise (gone past, nothing lost)."""
    if fate != "went_on":
        return "fatal"
    if reason in ("retried_ok", "real_load_succeeded", "variant_probe"):  # (nothing lost: a later try is what counts)
        return "probe"
    if feature_of(leaf) or feature_of(name):
        return "fallback"
    return "noise"


DRIVER = "the NVIDIA driver"


def rule_driver_first(fallbacks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The fallback loads ((library, feature)) with the NVIDIA driver's first, the others in their order: without
    the driver no GPU is used, whatever else loads (TensorFlow without libcuda.so.1 skips its GPUs after
    libcudart.so.11.0 failed first), so it is the answer to "why is my GPU not used" before the libraries."""
    return sorted(fallbacks, key=lambda x: x[1] != DRIVER)


def rule_outcome(end_kind: str, code: Optional[int], fatal: bool, exception: Optional[PyError],
                 fallbacks: list[tuple[str, str]], signal: Optional[int] = None, gpu: str = "") -> ProcessOutcome:
    """The outcome of a process (module docstring's order): how it ended (end_kind, code; a Linux crash's
    signal), whether a failed load was its failure (`fatal`), the exception it ended on, and its fallback
    loads ((library, feature) in order); `gpu`, why the NVIDIA driver's library was not there, is kept when the
    driver is lost ("no_gpu" whatever was lost: no CUDA library makes such a machine use a GPU), and when the
    failure's own fix says it (a died_of_load of libcuda.so.1: torch's .cuda() "Found
    no NVIDIA driver", CuPy's cudaErrorInsufficientDriver). The driver is the first feature lost (rule_driver_first)."""
    if end_kind == "crashed":
        return ProcessOutcome("crashed", code, exception, signal=signal)
    if fatal:
        return ProcessOutcome("died_of_load", code, exception, gpu=gpu)
    if exception is not None:
        return ProcessOutcome("died_of_other", code, exception)
    if end_kind == "exited" and code == 0 and fallbacks:
        lost: dict[str, str] = {}
        for lib, feature in rule_driver_first(fallbacks):
            lost.setdefault(feature, lib)
        return ProcessOutcome("degraded", code, None, tuple(lost), tuple(lost.values()),
                              missing=len(dict.fromkeys(lib for lib, _ in fallbacks)),
                              gpu=gpu if DRIVER in lost or gpu == "no_gpu" else "")
    if end_kind == "exited" and code == 0:
        return ProcessOutcome("ok", 0)
    return ProcessOutcome(end_kind, code)  # type: ignore[arg-type]
