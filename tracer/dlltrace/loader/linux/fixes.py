"""Fixes for a failed Linux load, each re-run through the ld.so model before it is offered.

For a leaf that was not found (a missing soname), the candidates are:
  - LD_LIBRARY_PATH=<folder> for the run (a folder that holds a copy): model.Fix set_env, python=False;
  - `patchelf --set-rpath` on the object that needed it (its DT_RUNPATH gets the folder);
  - the pip package that ships the soname for the right CUDA major (nvidia-cuda-runtime-cu11 ships
    libcudart.so.11.0 in nvidia/cuda_runtime/lib), with whether that alone makes it load (a requester
    whose DT_RUNPATH already points at site-packages/nvidia/..., as torch's libraries' do) or it also
    needs LD_LIBRARY_PATH;
  - ldconfig (the folder in /etc/ld.so.conf.d, then ld.so.cache has the name);
  - for a library no pip package ships, the system's package (apt's, on Debian and Ubuntu: the world knows
    it, worlds/elf.py apt_package_of), with the packages of the libraries it then fails on, as one command.
For a leaf found in a folder of LD_LIBRARY_PATH that lacks a symbol version (an old libstdc++.so.6), the fix is
LD_LIBRARY_PATH without that folder (rule_ld_library_path_shadows); for an undefined symbol in a process that took
a library from LD_LIBRARY_PATH ahead of the copy a RUNPATH names, the same, when the model then takes that copy
(rule_ld_library_path_shadows_a_runpath_copy).
Each is applied to a copy of the world / process and the process is replayed (replay_linux.replay_process);
`verified` says whether the failed call then loads. torch's own preloading of nvidia wheels
(torch/__init__.py _load_global_deps: when lib/libtorch_global_deps.so fails with a CUDA library's name,
it ctypes-loads sys.path's nvidia/<folder>/lib/<lib>.so.*[0-9] for each of its CUDA_LIBS, then retries)
is a fact of the package fix (its `preloaded_by`). Every fix is a model.Fix, the one fix type.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Optional

from dlltrace.elf import ELFFacts, ELFResult
from dlltrace.loader.fixloop import Attempt, verify_fixes
from dlltrace.model import Fix, Outcome, Owner
from dlltrace.worlds.elf import ELFWorld, OverlayWorld, copies_on_disk, file_size
from dlltrace.worlds.gpu import rule_driver_state

# soname pattern -> (the nvidia wheel's folder, {CUDA major: package}); a soname two majors ship is
# resolved by the CUDA runtime the requester needs (libcudart.so.N), else the newest
NVIDIA_WHEELS: tuple[tuple[str, str, dict[int, str]], ...] = (
    (r"libcudart\.so\.11(\.\d+)*$", "cuda_runtime", {11: "nvidia-cuda-runtime-cu11"}),
    (r"libcudart\.so\.12(\.\d+)*$", "cuda_runtime", {12: "nvidia-cuda-runtime-cu12"}),
    (r"libcublas(Lt)?\.so\.11(\.\d+)*$", "cublas", {11: "nvidia-cublas-cu11"}),
    (r"libcublas(Lt)?\.so\.12(\.\d+)*$", "cublas", {12: "nvidia-cublas-cu12"}),
    (r"libcufft\.so\.10(\.\d+)*$", "cufft", {11: "nvidia-cufft-cu11"}),
    (r"libcufft\.so\.11(\.\d+)*$", "cufft", {12: "nvidia-cufft-cu12"}),
    (r"libcurand\.so\.10(\.\d+)*$", "curand", {11: "nvidia-curand-cu11", 12: "nvidia-curand-cu12"}),
    (r"libcusparse\.so\.11(\.\d+)*$", "cusparse", {11: "nvidia-cusparse-cu11"}),
    (r"libcusparse\.so\.12(\.\d+)*$", "cusparse", {12: "nvidia-cusparse-cu12"}),
    (r"libcusolver\.so\.11(\.\d+)*$", "cusolver", {11: "nvidia-cusolver-cu11", 12: "nvidia-cusolver-cu12"}),
    (r"libnvrtc\.so\.11(\.\d+)*$", "cuda_nvrtc", {11: "nvidia-cuda-nvrtc-cu11"}),
    (r"libnvrtc\.so\.12(\.\d+)*$", "cuda_nvrtc", {12: "nvidia-cuda-nvrtc-cu12"}),
    (r"libnvJitLink\.so\.12(\.\d+)*$", "nvjitlink", {12: "nvidia-nvjitlink-cu12"}),
    (r"libcupti\.so\.11(\.\d+)*$", "cuda_cupti", {11: "nvidia-cuda-cupti-cu11"}),
    (r"libcupti\.so\.12(\.\d+)*$", "cuda_cupti", {12: "nvidia-cuda-cupti-cu12"}),
    (r"libcudnn[a-z_]*\.so\.[89](\.\d+)*$", "cudnn", {11: "nvidia-cudnn-cu11", 12: "nvidia-cudnn-cu12"}),
    (r"libnccl\.so\.2(\.\d+)*$", "nccl", {11: "nvidia-nccl-cu11", 12: "nvidia-nccl-cu12"}),
)
# torch/__init__.py (2.5.1) _load_global_deps: the folders it preloads from sys.path's nvidia/
TORCH_PRELOADS = {"cublas": "libcublas.so.*[0-9]", "cudnn": "libcudnn.so.*[0-9]", "cuda_nvrtc": "libnvrtc.so.*[0-9]",
                  "cuda_runtime": "libcudart.so.*[0-9]", "cuda_cupti": "libcupti.so.*[0-9]", "cufft": "libcufft.so.*[0-9]",
                  "curand": "libcurand.so.*[0-9]", "nvjitlink": "libnvJitLink.so.*[0-9]",
                  "cusparse": "libcusparse.so.*[0-9]", "cusolver": "libcusolver.so.*[0-9]", "nccl": "libnccl.so.*[0-9]",
                  "nvtx": "libnvToolsExt.so.*[0-9]"}


@dataclass(frozen=True)
class NvidiaWheel:
    package: str
    folder: str  # under site-packages: nvidia/<folder>/lib
    major: int


def cuda_major_needed(facts: Optional[ELFResult]) -> Optional[int]:
    """The CUDA major an object is built against, from its DT_NEEDED libcudart.so.N (or libcublas.so.N)."""
    if not isinstance(facts, ELFFacts):
        return None
    for n in facts.needed:
        m = re.match(r"lib(cudart|cublas)\.so\.(\d+)", n)
        if m:
            return int(m.group(2))
    return None


def nvidia_wheel(soname: str, major: Optional[int] = None) -> Optional[NvidiaWheel]:
    """The pip package that ships `soname`, for the CUDA major the requester needs (`major`)."""
    for pat, folder, by_major in NVIDIA_WHEELS:
        if re.match(pat, soname):
            pick = major if major in by_major else max(by_major)
            return NvidiaWheel(by_major[pick], folder, pick)
    return None


def nvidia_wheels(soname: str) -> list[NvidiaWheel]:
    """Every pip package that ships `soname`, one per CUDA major (libcudnn.so.8: nvidia-cudnn-cu11 and -cu12)."""
    for pat, folder, by_major in NVIDIA_WHEELS:
        if re.match(pat, soname):
            return [NvidiaWheel(pkg, folder, major) for major, pkg in sorted(by_major.items())]
    return []


def torch_preloads(wheel: NvidiaWheel, soname: str) -> bool:
    """Whether torch's _load_global_deps would ctypes-load this wheel's copy of soname from sys.path."""
    pat = TORCH_PRELOADS.get(wheel.folder)
    return pat is not None and fnmatch.fnmatch(soname, pat)


def site_packages(exe: str) -> list[str]:
    """The site-packages folders of the Python at exe (its prefix's lib/python3*/site-packages)."""
    prefix = posixpath.dirname(posixpath.dirname(exe))
    return sorted(glob.glob(posixpath.join(prefix, "lib", "python3*", "site-packages")))


@dataclass(frozen=True)
class Rerun:
    """What replaying the process with a fix applied gave: the failing call loads; else the library it fails on
    now ("" not known); and the calls that loaded before and now fail or load another file (`breaks`)."""
    loads: bool
    next_missing: str = ""
    breaks: tuple[str, ...] = ()


def as_rerun(got: "Rerun | bool | str") -> Rerun:
    """A rerun's answer as a Rerun (a bare True: it loads; a name: what it fails on now)."""
    if isinstance(got, Rerun):
        return got
    return Rerun(got is True, got if isinstance(got, str) else "")


@dataclass(frozen=True)
class LinuxSituation:
    """What a Linux fix's re-run needs: the world and the environment, with the fixes so far applied."""
    world: ELFWorld
    env: dict[str, str]
    failing: str = ""  # after a system package: the library the process fails on next ("" not known)


def apply_fix(fix: Fix, s: LinuxSituation) -> LinuxSituation:
    """The situation with one fix applied, to overlays (the world itself is never changed)."""
    if fix.action == "set_env":
        return LinuxSituation(s.world, dict(s.env, **{fix.variable: fix.value}))
    if fix.action == "set_runpath":
        req = s.world.file(fix.path)
        if not isinstance(req, ELFFacts):
            return s
        patched = replace(req, runpath=fix.value, rpath=None)
        return LinuxSituation(OverlayWorld(s.world, {posixpath.normpath(fix.path): patched}), s.env)
    if fix.action == "add_ld_so_conf":
        return LinuxSituation(OverlayWorld(s.world, cache={fix.name: fix.path}), s.env)
    if fix.action == "install" and fix.path:  # (a reinstall: the file is back where its RECORD says)
        return LinuxSituation(OverlayWorld(s.world, {posixpath.normpath(fix.path): ELFFacts(soname=fix.name)}), s.env)
    if fix.action in ("install_package", "install_system_package"):
        return LinuxSituation(OverlayWorld(s.world, {posixpath.join(fix.folder, fix.name): ELFFacts(soname=fix.name)}),
                              s.env)
    return s


def interpreter_file(path: str) -> bool:
    """A file of the Python interpreter itself (its lib-dynload extensions: ctypes' _ctypes.so makes every
    ctypes.CDLL): never a fix's to patch (a patchelf of it changes every program that Python runs)."""
    return "/lib-dynload/" in path or posixpath.basename(path).startswith("_ctypes.")


def system_lib_folder(world: ELFWorld) -> str:
    """Where a system package puts a library: the multiarch folder of the system search path (Debian's
    /usr/lib/x86_64-linux-gnu), else its first folder."""
    dirs = world.system.system_dirs
    return next((d for d in dirs if d.startswith("/usr/lib/") and "-linux-gnu" in d), dirs[0] if dirs else "/usr/lib")


def system_package_fix(name: str, world: ELFWorld) -> Optional[Fix]:
    """The system's package of a library no pip package ships (the world's answer: apt's, on Debian and Ubuntu,
    worlds/elf.py apt_package_of), as a fix that puts it in the system's library folder (with the package of its
    plugins next, rule_library_needs_its_plugins); None when not known."""
    ask = getattr(world, "system_package", None)
    package = ask(name) if ask is not None and not DRIVER_LIBRARY.match(name) else None
    if not package:
        return None
    folder = system_lib_folder(world)
    root = "root" if getattr(world, "as_root", False) else ""
    fix = Fix("install", "install_system_package", name=name, package=package, folder=folder, value=root, python=False)
    plugins = rule_library_needs_its_plugins(name)
    if plugins is not None:
        fix = replace(fix, then=(Fix("install", "install_system_package", name=plugins[1], package=plugins[0],
                                     folder=posixpath.join(folder, plugins[1]), value=root, python=False),))
    return fix


# a library that loads and then does nothing without its plugins, which Debian and Ubuntu ship in a package apart
# (not a dependency of the library's, nor a Recommends of it): its name without a version -> (that package, the
# plugins' folder under the system's library folder)
PLUGINS_PACKAGE = {"libvlc.so": ("vlc-plugin-base", "vlc/plugins")}


def rule_library_needs_its_plugins(name: str) -> Optional[tuple[str, str]]:
    """(the package of its plugins, their folder) for a library of PLUGINS_PACKAGE, by any version of its name;
    None for any other. libvlc5 alone loads (python-vlc's libvlc_get_version() answers), but libvlc_new() finds no
    plugin and returns NULL, and vlc.MediaPlayer() then fails with AttributeError: 'NoneType' object has no
    attribute 'media_player_new' (field test, Debian 12: libvlc5 3.0.23 and python-vlc 3.0.21203; with
    vlc-plugin-base too the player is made)."""
    return PLUGINS_PACKAGE.get(re.sub(r"(\.so)(\.\d+)*$", r"\1", posixpath.basename(name)))


def applied(fix: Fix, s: LinuxSituation) -> LinuxSituation:
    """The situation with a fix and each of its further steps applied."""
    s = apply_fix(fix, s)
    for step in fix.then:
        s = applied(step, s)
    return s


def rule_whole_run_linux(fixes: list[Fix], s: LinuxSituation,
                         rerun: Callable[[ELFWorld, dict[str, str]], "Rerun | bool | str"]) -> list[Fix]:
    """A fix counts over the whole run: each verified fix, with its steps, is applied and the whole process
    replayed; one under which a call that loaded now fails or loads another file (LD_LIBRARY_PATH to a folder
    that also holds an older copy of a library the program loaded from elsewhere) is unverified, says what it
    breaks, and comes after every fix that breaks nothing."""
    kept: list[Fix] = []
    broken: list[Fix] = []
    for f in fixes:
        if not f.verified:
            kept.append(f)
            continue
        after = applied(f, s)
        got = as_rerun(rerun(after.world, after.env))
        if got.breaks:
            broken.append(replace(f, verified=False, breaks=got.breaks))
        else:
            kept.append(f)
    return kept + broken


def reinstall_fix(name: str, world: ELFWorld, owners: Optional[dict[str, tuple[Owner, ...]]],
                  interpreter: str) -> Optional[Fix]:
    """A library a distribution's RECORD lists (or a conda package's conda-meta) and that is not where it says:
    that install is damaged (a file deleted, a copy cut short), and reinstalling the distribution puts it back
    (pip's --force-reinstall --no-deps of the same version, by the traced Python's own pip); None otherwise."""
    for o in (owners or {}).get(name.lower(), ()):
        where = posixpath.normpath(posixpath.join(o.root, o.path))
        if world.file(where) is None:
            return Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=where,
                       bound=o.path, exe=interpreter if o.kind == "wheel" else "", lacks=o.kind, python=False,
                       folder=o.root if o.kind == "conda" else "")  # (a conda package's: its environment's prefix)
    return None


def rule_linux_not_the_file_its_distribution_installed(paths: Iterable[str], world: ELFWorld,
                                                       owners: Optional[dict[str, tuple[Owner, ...]]],
                                                       interpreter: str) -> Optional[Fix]:
    """The reinstall of the distribution whose RECORD lists one of `paths` (the files a failed load mapped: the object
    ld.so could not bind a symbol of, and what it loaded with it) with a size that file does not have: it is not the
    file that distribution installed (a .so of another version copied over the wheel's own, an upgrade cut short),
    as on Windows (diagnosis/explain.rule_not_the_file_its_distribution_installed). None when no such file, or the
    world does not know the sizes (a trace made before they were recorded)."""
    for path in dict.fromkeys(posixpath.normpath(p) for p in paths if p):
        name = posixpath.basename(path)
        for o in (owners or {}).get(name.lower(), ()):
            where = posixpath.normpath(posixpath.join(o.root, o.path))
            if o.kind != "wheel" or o.size is None or where != path or world.file(where) is None:
                continue
            size = file_size(world, where)
            if size is not None and size != o.size:
                return Fix("reinstall", "install", name=name, package=o.dist, version=o.version, path=where,
                           bound=o.path, exe=interpreter, lacks=o.kind, size=size, record_size=o.size, python=False)
    return None


def propose(name: str, requester: str, exe: str, env: dict[str, str], world: ELFWorld,
            rerun: Callable[[ELFWorld, dict[str, str]], "Rerun | bool | str"], roots: Optional[list[str]] = None,
            interpreter: str = "", owners: Optional[dict[str, tuple[Owner, ...]]] = None) -> list[Fix]:
    """The fixes for `name` not found (needed by `requester`, in the process of `exe` with `env`): the candidates
    (for each copy on disk: LD_LIBRARY_PATH, the requester's RUNPATH, the ld.so cache; the pip package that ships
    it), each applied and checked with rerun(world, env) -> the call loads, through the one verification loop
    (loader/fixloop.py): a package installed where nothing searches is completed with LD_LIBRARY_PATH."""
    candidates: list[Fix] = []
    own = reinstall_fix(name, world, owners, interpreter)
    if own is not None:  # (the root cause first: the environment's own file is missing)
        candidates.append(own)
    roots = site_packages(exe) if roots is None else roots
    old = env.get("LD_LIBRARY_PATH", "")
    finder = getattr(world, "find_copies", None)  # a recorded world answers from the trace
    req = world.file(requester) if requester else None
    conf_dirs = world.system.conf_dirs
    for copy in (finder(name, roots) if finder is not None else copies_on_disk(name, roots, conf_dirs)):
        folder = posixpath.dirname(copy)
        cache = rule_stale_ld_so_cache(name, copy, world)
        if cache.dest:  # (the folder is ldconfig's already: refreshing the cache is the fix, first)
            candidates.append(cache)
        candidates.append(Fix("env", "set_env", name=name, folder=folder, path=copy, variable="LD_LIBRARY_PATH",
                              value=folder + (":" + old if old else ""), python=False))
        if isinstance(req, ELFFacts) and not interpreter_file(requester):
            runpath = ":".join(x for x in (req.runpath or req.rpath or "", folder) if x)
            candidates.append(Fix("linker", "set_runpath", name=name, folder=folder, path=requester, value=runpath,
                                  python=False))
        if not cache.dest:
            candidates.append(cache)
    wheel = nvidia_wheel(name, cuda_major_needed(req if isinstance(req, ELFFacts) else None))
    if wheel is not None and roots:
        folder = posixpath.join(roots[0], "nvidia", wheel.folder, "lib")
        candidates.append(Fix("install", "install_package", name=name, folder=folder, package=wheel.package,
                              preloaded_by="torch" if torch_preloads(wheel, name) else "", python=False,
                              exe=interpreter))  # (pip of the traced Python: `interpreter -m pip install`)

    system = system_package_fix(name, world) if wheel is None else None
    if system is not None:
        candidates.append(system)

    def attempt(s: LinuxSituation, fix: Fix) -> Attempt[LinuxSituation]:
        after = apply_fix(fix, s)
        got = as_rerun(rerun(after.world, after.env))
        if got.loads:
            return Attempt(True, covers=(name,))
        if fix.action == "install_system_package":  # (the next library the plugin needs: its package next)
            nxt = got.next_missing if got.next_missing != fix.name else ""
            return Attempt(False, same=not nxt, outcome=Outcome(1, nxt or name, "not_found"),
                           after=replace(after, failing=nxt) if nxt else None)
        moved = fix.action == "install_package"  # (its file is there now: what is left is to make it searched)
        return Attempt(False, same=not moved, outcome=Outcome(1, name, "not_found"), after=after if moved else None)

    def follow_up(s: LinuxSituation) -> list[Fix]:
        if s.failing:
            step = system_package_fix(s.failing, s.world)
            return [step] if step is not None else []
        installed = [f for f in candidates if f.action == "install_package"]
        return [Fix("env", "set_env", name=name, folder=f.folder, variable="LD_LIBRARY_PATH",
                    value=f.folder + (":" + old if old else ""), python=False) for f in installed]

    if DRIVER_LIBRARY.match(name):  # (a CUDA toolkit's stubs/libcuda.so links, and fails at run time: no driver)
        candidates = [f for f in candidates if "/stubs" not in f.folder]
    out = verify_fixes(LinuxSituation(world, env), candidates, applies=lambda f: True, attempt=attempt,
                       follow_up=follow_up, key=lambda f: (f.action, f.folder, f.path, f.name), names=(name,),
                       max_steps=SYSTEM_PACKAGE_STEPS if system is not None else 2, chain_partial=system is not None)
    out = rule_whole_run_linux(out, LinuxSituation(world, env), rerun)
    if DRIVER_LIBRARY.match(name):
        # the driver's own library: installed with the NVIDIA driver (the system's package manager, or NVIDIA's
        # installer), never by pip; advice the model cannot apply, first when no copy on disk loads
        ask = getattr(world, "gpu_facts", None)
        gpu = ask() if ask is not None else None
        state = rule_driver_state(gpu)
        driver = Fix("driver", "install_driver", name=name, python=False, value=state,
                     driver=(gpu.kernel_driver or "") if gpu is not None and state == "no_user_library" else "")
        out = [*[f for f in out if f.verified], driver, *[f for f in out if not f.verified]]
    else:
        out = rule_no_gpu_for_cuda_library(name, world, out)
    return out


def rule_no_gpu_for_cuda_library(name: str, world: ELFWorld, fixes: list[Fix]) -> list[Fix]:
    """A CUDA library (one an nvidia-* wheel ships: libcublasLt.so.12, libcudart.so.11.0, libcudnn.so.9) not found
    on a machine with no NVIDIA GPU (worlds/gpu.py rule_driver_state "no_gpu", asked of the world, so `run` records
    the facts): the driver's no-GPU advice after the fixes the model verified (as the driver's own advice is:
    propose), before the others. Installing the library would only move the program
    on to the driver's libcuda.so.1, which no machine without an NVIDIA GPU loads (onnxruntime-gpu 1.19's CUDA
    provider fails on libcublasLt.so.12 before it tries the driver: the field test's report offered
    `pip install nvidia-cublas-cu12` alone). With a GPU, or not known, `fixes` as they are."""
    if nvidia_wheel(name) is None:
        return fixes
    ask = getattr(world, "gpu_facts", None)
    if ask is None or rule_driver_state(ask()) != "no_gpu":
        return fixes
    advice = Fix("driver", "install_driver", name="libcuda.so.1", python=False, value="no_gpu")
    return [*[f for f in fixes if f.verified], advice, *[f for f in fixes if not f.verified]]


def rule_stale_ld_so_cache(name: str, copy: str, world: ELFWorld) -> Fix:
    """ldconfig for a copy in a folder: when /etc/ld.so.conf already lists the folder (`make install` into
    /usr/local/lib, ldconfig not run since), ldconfig alone (`dest` the conf file); else a file in
    /etc/ld.so.conf.d naming the folder, then ldconfig. `value` "root": the program ran as root (no sudo)."""
    folder = posixpath.dirname(copy)
    listed = posixpath.normpath(folder) in world.system.conf_dirs
    return Fix("linker", "add_ld_so_conf", name=name, folder=folder, path=copy, python=False,
               dest="/etc/ld.so.conf" if listed else "", value="root" if getattr(world, "as_root", False) else "")


def rule_ld_library_path_shadows(name: str, path: str, lacks: str, env: dict[str, str], world: ELFWorld,
                                 rerun: Callable[[ELFWorld, dict[str, str]], "Rerun | bool | str"]) -> list[Fix]:
    """A library found in a folder of LD_LIBRARY_PATH that lacks a symbol version its requester needs (an old
    toolchain's or environment's libstdc++.so.6 before the system's: "version `GLIBCXX_3.4.30' not found"):
    LD_LIBRARY_PATH without that folder, so that ld.so goes on to the next copy (the system's, through
    ld.so.cache), offered only when the replay of the whole process then loads the call and breaks no other
    load (rule_whole_run_linux). `bound` is the copy that lacks it, `lacks` the version."""
    folder = posixpath.normpath(posixpath.dirname(path)) if path else ""
    old = env.get("LD_LIBRARY_PATH", "")
    parts = re.split(r"[:;]", old) if old else []
    kept = [x for x in parts if x and posixpath.normpath(x) != folder]
    if not folder or len(kept) == len([x for x in parts if x]):
        return []
    fix = Fix("env", "set_env", name=name, variable="LD_LIBRARY_PATH", value=":".join(kept), bound=path,
              lacks=lacks, python=False)
    s = LinuxSituation(world, env)
    after = apply_fix(fix, s)
    if not as_rerun(rerun(after.world, after.env)).loads:
        return []
    return [f for f in rule_whole_run_linux([replace(fix, verified=True, outcome=Outcome(0), covers=(name,))], s,
                                            rerun) if f.verified]


def rule_ld_library_path_shadows_a_runpath_copy(symbol: str, needer: str, env: dict[str, str],
                                                loaded: list[tuple[str, str, str]],
                                                loaded_with: Callable[[dict[str, str]], list[tuple[str, str, str]]],
                                                world: ELFWorld,
                                                rerun: Callable[[ELFWorld, dict[str, str]], "Rerun | bool | str"]
                                                ) -> list[Fix]:
    """An object ld.so could not bind a symbol of (`needer` needs `symbol`: "undefined symbol: _PyModule_Add", which
    no library loaded defines) in a process that took a library from a folder of LD_LIBRARY_PATH which, with that
    folder out of it, the model takes from another file. LD_LIBRARY_PATH is searched before DT_RUNPATH, so a copy
    there wins over the one the program or a wheel's $ORIGIN RUNPATH names (pyenv's python3.11 with its own
    libpython3.11.so.1.0 in its RUNPATH, LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu holding Debian's older one; a
    stale copy of a wheel's library): LD_LIBRARY_PATH without that folder, offered when the model then takes the
    other copy and the whole replay breaks no other load (rule_whole_run_linux). `loaded`: the process's objects
    (name, path, file id) when the call failed; `loaded_with`: the same replayed with another environment. The
    fix's `bound` is the copy taken, `ahead_of` the one taken without that folder, `leaf` the object that needs the
    symbol; [] when no folder of LD_LIBRARY_PATH held a library that moves."""
    old = env.get("LD_LIBRARY_PATH", "")
    parts = [x for x in re.split(r"[:;]", old) if x] if old else []
    s = LinuxSituation(world, env)
    for folder in dict.fromkeys(posixpath.normpath(x) for x in parts):
        mine = [x for x in loaded if posixpath.normpath(posixpath.dirname(x[1])) == folder]
        if not mine:
            continue
        kept = [x for x in parts if posixpath.normpath(x) != folder]
        fix = Fix("env", "set_env", name="", variable="LD_LIBRARY_PATH", value=":".join(kept), lacks=symbol,
                  leaf=needer, python=False)
        after = {n: (p, fid) for n, p, fid in loaded_with(apply_fix(fix, s).env)}
        moved = [(n, p, after[n][0]) for n, p, fid in mine if n in after and after[n][1] != fid]
        if not moved:
            continue
        name, bound, other = moved[0]
        fix = replace(fix, name=name, bound=bound, ahead_of=other, verified=True, outcome=Outcome(0), covers=(needer,))
        return [f for f in rule_whole_run_linux([fix], s, rerun) if f.verified]
    return []


# glibc's own objects: a GLIBC_x.y version one of them lacks is the C library's age, not a missing file
GLIBC_OBJECTS = re.compile(r"^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|"
                           r"libutil\.so\.1|libanl\.so\.1|ld-linux[-.\w]*\.so\.\d+|ld64\.so\.\d+)$")


def _glibc_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in v.split("."))


def rule_glibc_too_old(name: str, path: str, lacks: str, requester: str, world: ELFWorld,
                       owners: Optional[dict[str, tuple[Owner, ...]]] = None) -> Optional[Fix]:
    """A GLIBC_x.y version one of glibc's own objects (libc.so.6, libm.so.6, ...) does not define: the requester was
    built against a newer glibc than this system's ("version `GLIBC_2.34' not found": a wheel built on a newer
    distribution than its tag says, or a binary from a newer OS). No file fixes it: a build of the requester made
    for this glibc (a wheel tagged manylinux_2_<this minor> or lower, often an earlier release) or a newer system.
    `version` is this system's glibc (the newest GLIBC_ version the object defines), `need` the one needed, `package`
    the distribution whose RECORD lists the requester. Advice: the model cannot apply it (None when not glibc's)."""
    if not re.match(r"GLIBC_\d", lacks) or not GLIBC_OBJECTS.match(name):
        return None  # (GLIBC_PRIVATE: glibc's objects of two builds mixed, not its age)
    need = lacks[len("GLIBC_"):]
    # (the newest of the object's and of the libc.so.6 beside it: libm's newest is older than libc's in a glibc
    # that added no libm function, libpthread's and libdl's since glibc 2.34 far older)
    objs = [world.file(p) for p in dict.fromkeys((path, posixpath.join(posixpath.dirname(path), "libc.so.6")))] \
        if path else []
    defined = [v[len("GLIBC_"):] for facts in objs if isinstance(facts, ELFFacts) for v in facts.version_defs
               if v.startswith("GLIBC_") and v[len("GLIBC_"):][:1].isdigit()]
    have = max(defined, key=_glibc_key) if defined else ""
    if have and _glibc_key(need) <= _glibc_key(have):
        return None  # (a file that lacks an older version than its newest is no glibc of this age: not its age)
    dist = ""
    for o in (owners or {}).get(posixpath.basename(requester).lower(), ()):
        if posixpath.normpath(posixpath.join(o.root, o.path)) == posixpath.normpath(requester):
            dist = o.dist
    return Fix("glibc", "newer_glibc", name=name, path=requester, need=need, version=have, package=dist, python=False)


# system packages one fix may chain (Qt's xcb plugin: libxcb-icccm4, then libxcb-keysyms1, ...; PyQt5 5.15's on a
# machine with none of its xcb libraries needs 9 or more: 6 cut it after the first, seen for real); each a replay
SYSTEM_PACKAGE_STEPS = 24

# the NVIDIA driver's user-space libraries (the CUDA driver API, NVML): no pip package ships them
DRIVER_LIBRARY = re.compile(r"^lib(cuda|nvidia-ml)\.so(\.\d+)*$")

