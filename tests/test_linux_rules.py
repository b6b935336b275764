"""One test per rule of loader/linux/rules.py, named after it, plus the engine applying them in a virtual
ELF world and the ELF reader on files gcc builds here. (tests/test_ldso_diff.py checks the whole
against the real ld.so.)"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from dlltrace.elf import ELFError, ELFFacts, VersionNeed, read_elf, read_elf_bytes
from dlltrace.loader.linux import rules
from dlltrace.loader.linux.engine import LinuxProcess, LinuxSimulator
from dlltrace.loader.linux.rules import LoadedRef, ObjRef
from dlltrace.worlds.elf import LinuxSystem, VirtualELFWorld, read_ld_so_cache

SYS = LinuxSystem(hwcaps=("glibc-hwcaps/x86-64-v3/", ""))


def lib(**kw) -> ELFFacts:
    return ELFFacts(**kw)


# --- the rules, one test each ----------------------------------------------------------------------------
def test_rule_name_has_slash():
    assert rules.rule_name_has_slash("./libx.so") and rules.rule_name_has_slash("/a/libx.so")
    assert rules.rule_name_has_slash("sub/libx.so")
    assert not rules.rule_name_has_slash("libx.so") and not rules.rule_name_has_slash("libx")


def test_rule_loaded_by_soname():
    loaded = [LoadedRef("/a/libfoo.so.1.2", ("libfoo.so.1.2",), "libfoo.so.1"), LoadedRef("/b/libfoo.so.1", ("libfoo.so.1",), None)]
    assert rules.rule_loaded_by_soname("libfoo.so.1", loaded) == 0  # the soname of the first wins
    assert rules.rule_loaded_by_soname("/a/libfoo.so.1.2", loaded) == 0  # its path
    assert rules.rule_loaded_by_soname("/b/libfoo.so.1", loaded) == 1
    assert rules.rule_loaded_by_soname("libbar.so", loaded) is None


def test_rule_same_file():
    assert rules.rule_same_file("8:42", ["8:1", "8:42"]) == 1
    assert rules.rule_same_file("8:7", ["8:1"]) is None


def test_rule_origin():
    assert rules.rule_origin("/opt/app/lib/libx.so") == "/opt/app/lib"
    assert rules.rule_origin("lib/libx.so", "/home/u") == "/home/u/lib"
    assert rules.rule_origin("/libx.so") == "/"


def test_rule_open_relative():
    """open(2) of a relative path reads it from the current folder; an absolute path is itself; ".." is kept
    for the kernel to walk (a link in the path decides where it leads)."""
    assert rules.rule_open_relative("app/d2/libx.so", "/home/u") == "/home/u/app/d2/libx.so"
    assert rules.rule_open_relative("./libx.so", "/w") == "/w/./libx.so"
    assert rules.rule_open_relative("../l/libx.so", "/w/b") == "/w/b/../l/libx.so"
    assert rules.rule_open_relative("/opt/libx.so", "/w") == "/opt/libx.so"
    assert rules.rule_open_relative("a/libx.so", "") == "/a/libx.so"


def test_rule_expand_dst():
    e = rules.rule_expand_dst
    assert e("$ORIGIN/../lib", "/opt/a/bin", "lib64", "x86_64") == "/opt/a/bin/../lib"
    assert e("${ORIGIN}/x", "/o", "lib64", "x86_64") == "/o/x"
    assert e("/usr/$LIB/$PLATFORM", "/o", "lib/x86_64-linux-gnu", "x86_64") == "/usr/lib/x86_64-linux-gnu/x86_64"
    assert e("$ORIGINAL/x", "/o", "l", "p") == "$ORIGINAL/x"  # not a DST: kept
    assert e("$HOME/x", "/o", "l", "p") == "$HOME/x"
    assert e("$ORIGIN/x", None, "l", "p") is None  # origin unknown: dropped
    # secure: $ORIGIN only first and alone; the executable's must land in a trusted folder
    assert e("$ORIGIN/lib", "/o", "l", "p", secure=True) == "/o/lib"
    assert e("x$ORIGIN", "/o", "l", "p", secure=True) is None
    assert e("$ORIGIN/sub", "/usr/lib", "l", "p", secure=True, is_executable=True, trusted=("/usr/lib",)) == "/usr/lib/sub"
    assert e("$ORIGIN/sub", "/home/u", "l", "p", secure=True, is_executable=True, trusted=("/usr/lib",)) is None


def test_rule_decompose_path():
    ident = lambda s: s  # noqa: E731
    assert rules.rule_decompose_path("/a//:/b:/a/", ident) == ("/a/", "/b/")  # slashes trimmed, duplicates once
    # empty = the current folder, as a name of length 0 (ld.so then tries "libx.so", not "./libx.so")
    assert rules.rule_decompose_path("/a::/b", ident) == ("/a/", "", "/b/")
    assert rules.rule_decompose_path("/a:", ident) == ("/a/", "") and rules.rule_decompose_path(":.:", ident) == ("", "./")
    assert rules.rule_decompose_path("/a;/b", ident, ":;") == ("/a/", "/b/")
    assert rules.rule_decompose_path("$ORIGIN/x:/b", lambda s: None if "$" in s else s) == ("/b/",)
    assert rules.rule_decompose_path("/", ident) == ("/",)


def test_rule_rpath_of_loaders():
    exe = ObjRef("/bin/app", "/exe-rpath", None, is_executable=True)
    a = ObjRef("/x/liba.so", "/a-rpath", None)
    b = ObjRef("/x/libb.so", None, None)
    c_run = ObjRef("/x/libc.so", None, "/c-runpath")
    assert [o.path for o in rules.rule_rpath_of_loaders([b, a, exe], exe)] == ["/x/liba.so", "/bin/app"]
    assert [o.path for o in rules.rule_rpath_of_loaders([b, a], exe)] == ["/x/liba.so", "/bin/app"]  # exe added once
    assert rules.rule_rpath_of_loaders([c_run, a, exe], exe) == []  # DT_RUNPATH: no DT_RPATH at all
    dl = ObjRef("/bin/app", "/r", None, is_executable=True, dlopened=True)
    assert rules.rule_rpath_of_loaders([b], dl) == []


def test_rule_ld_library_path():
    assert rules.rule_ld_library_path({"LD_LIBRARY_PATH": "/a:/b"}, False) == "/a:/b"
    assert rules.rule_ld_library_path({"LD_LIBRARY_PATH": "/a"}, True) is None
    assert rules.rule_ld_library_path({"LD_LIBRARY_PATH": ""}, False) is None
    assert rules.rule_ld_library_path({}, False) is None


def test_rule_runpath_direct_only():
    assert rules.rule_runpath_direct_only(ObjRef("/x/l.so", None, "$ORIGIN")) == "$ORIGIN"
    assert rules.rule_runpath_direct_only(ObjRef("/x/l.so", "/r", None)) is None
    assert rules.rule_runpath_direct_only(None) is None
    # in the engine: a dependency of a RUNPATH object does not search that RUNPATH
    w = VirtualELFWorld({"/app": lib(needed=("libA.so",), runpath="/r"), "/r/libA.so": lib(needed=("libB.so",)),
                         "/r/libB.so": lib()}, system=SYS)
    res = LinuxSimulator(w, LinuxProcess("/app")).start()
    assert res.error == "libB.so: cannot open shared object file: No such file or directory"
    # the same with DT_RPATH: inherited, so libB is found
    w2 = VirtualELFWorld({"/app": lib(needed=("libA.so",), rpath="/r"), "/r/libA.so": lib(needed=("libB.so",)),
                          "/r/libB.so": lib()}, system=SYS)
    assert LinuxSimulator(w2, LinuxProcess("/app")).start().loaded == ["/r/libA.so", "/r/libB.so"]


def test_rule_ld_so_cache():
    look = {"libz.so.1": "/lib/x86_64-linux-gnu/libz.so.1", "libq.so": "/opt/q/libq.so"}.get
    sysd = ("/lib/x86_64-linux-gnu", "/usr/lib")
    assert rules.rule_ld_so_cache("libz.so.1", look, False, sysd) == "/lib/x86_64-linux-gnu/libz.so.1"
    assert rules.rule_ld_so_cache("libz.so.1", look, True, sysd) is None  # NODEFLIB: not a system-folder entry
    assert rules.rule_ld_so_cache("libq.so", look, True, sysd) == "/opt/q/libq.so"
    assert rules.rule_ld_so_cache("libz.so.1", look, False, sysd, secure_open=True) is None
    assert rules.rule_ld_so_cache("libnone.so", look, False, sysd) is None


def test_rule_default_dirs():
    assert rules.rule_default_dirs(("/lib", "/usr/lib"), False) == ("/lib/", "/usr/lib/")
    assert rules.rule_default_dirs(("/lib", "/usr/lib"), True) == ()
    # in the engine: -z nodefaultlib on the loading object
    w = VirtualELFWorld({"/app": lib(needed=("libz.so",), flags_1=0x800), "/lib/libz.so": lib()},
                        system=LinuxSystem(system_dirs=("/lib",), hwcaps=("",)))
    assert "cannot open" in LinuxSimulator(w, LinuxProcess("/app")).start().error
    w = VirtualELFWorld({"/app": lib(needed=("libz.so",)), "/lib/libz.so": lib()},
                        system=LinuxSystem(system_dirs=("/lib",), hwcaps=("",)))
    assert LinuxSimulator(w, LinuxProcess("/app")).start().loaded == ["/lib/libz.so"]


def test_rule_hwcaps_subdirs():
    assert rules.rule_hwcaps_subdirs("/a/", ("glibc-hwcaps/x86-64-v3/", "glibc-hwcaps/x86-64-v2/", "")) == [
        "/a/glibc-hwcaps/x86-64-v3/", "/a/glibc-hwcaps/x86-64-v2/", "/a/"]
    # a copy in a hwcaps subfolder wins over the folder's own
    w = VirtualELFWorld({"/app": lib(needed=("libm2.so",), runpath="/a"), "/a/libm2.so": lib(),
                         "/a/glibc-hwcaps/x86-64-v3/libm2.so": lib()}, system=SYS)
    assert LinuxSimulator(w, LinuxProcess("/app")).start().loaded == ["/a/glibc-hwcaps/x86-64-v3/libm2.so"]


def test_rule_dir_status():
    isdir = {"/a"}.__contains__
    assert rules.rule_dir_status("/a/", "unknown", False, isdir) == "existing"
    assert rules.rule_dir_status("/nope/", "unknown", False, isdir) == "nonexisting"
    assert rules.rule_dir_status("/nope/", "unknown", True, isdir) == "existing"
    assert rules.rule_dir_status("rel/", "unknown", False, isdir) == "existing"
    assert rules.rule_dir_status("/a/", "nonexisting", False, isdir) == "nonexisting"
    # in the engine: the second search skips the folder that does not exist
    w = VirtualELFWorld({"/app": lib()}, system=SYS)
    sim = LinuxSimulator(w, LinuxProcess("/app", env={"LD_LIBRARY_PATH": "/gone"}))
    sim.start()
    first = sim.dlopen("libx.so").lookups[0].tried
    second = sim.dlopen("libx.so").lookups[0].tried
    assert "/gone/libx.so" in first and not any(p.startswith("/gone/") for p in second)


def test_rule_verify_elf():
    assert rules.rule_verify_elf(lib(), 64, "EM_X86_64") == "ok"
    assert rules.rule_verify_elf(lib(elf_class=32, machine="EM_386"), 64, "EM_X86_64") == "wrong_class"
    assert rules.rule_verify_elf(lib(machine="EM_AARCH64"), 64, "EM_X86_64") == "wrong_machine"
    assert rules.rule_verify_elf(ELFError("not_elf", "invalid ELF header"), 64, "EM_X86_64") == "bad"
    # in the engine: a 32-bit copy is skipped, the search goes on; alone, "wrong ELF class"
    files = {"/app": lib(runpath="/a:/b"), "/a/libw.so": lib(elf_class=32, machine="EM_386"), "/b/libw.so": lib()}
    sim = LinuxSimulator(VirtualELFWorld(files, system=SYS), LinuxProcess("/app"))
    sim.start()
    assert sim.dlopen("libw.so").path == "/b/libw.so"
    del files["/b/libw.so"]
    sim = LinuxSimulator(VirtualELFWorld(files, system=SYS), LinuxProcess("/app"))
    sim.start()
    assert sim.dlopen("libw.so").error == "libw.so: wrong ELF class: ELFCLASS32"


def test_rule_secure_mode():
    env = {"LD_LIBRARY_PATH": "/evil", "LD_PRELOAD": "x.so", "HOME": "/h"}
    assert rules.rule_secure_mode(env, True) == {"HOME": "/h"}
    assert rules.rule_secure_mode(env, False) == env
    w = VirtualELFWorld({"/app": lib(), "/evil/libx.so": lib()}, system=SYS)
    sim = LinuxSimulator(w, LinuxProcess("/app", env=env, secure=True))
    sim.start()
    assert sim.dlopen("libx.so").error.endswith("No such file or directory")
    sim = LinuxSimulator(w, LinuxProcess("/app", env=env))
    sim.start()
    assert sim.dlopen("libx.so").path == "/evil/libx.so"


def test_rule_dlopen_flags():
    m = rules.rule_dlopen_flags(rules.RTLD_NOW | rules.RTLD_NOLOAD | rules.RTLD_GLOBAL)
    assert m.noload and m.now and m.global_ and not m.invalid
    assert rules.rule_dlopen_flags(rules.RTLD_GLOBAL).invalid
    w = VirtualELFWorld({"/app": lib(runpath="/a"), "/a/libn.so": lib()}, system=SYS)
    sim = LinuxSimulator(w, LinuxProcess("/app"))
    sim.start()
    r = sim.dlopen("libn.so", rules.RTLD_NOW | rules.RTLD_NOLOAD)
    assert r.cause == "noload" and r.error == "" and r.lookups[0].tried == ["/a/glibc-hwcaps/x86-64-v3/libn.so", "/a/libn.so"]
    assert sim.dlopen("libn.so", rules.RTLD_LAZY).path == "/a/libn.so"
    assert sim.dlopen("libn.so", 0).cause == "invalid_mode"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
def test_rule_preload_ignored(tmp_path):
    """An LD_PRELOAD object ld.so cannot map (not there, by name or path; another ELF class; not ELF) is ignored: the
    real ld.so prints one line and runs the program (exit 0), and the simulator's start goes on too, its line the
    real one. Before, the model's start failed on it and the replay of the whole process was empty: a program run
    with LD_PRELOAD=libjemalloc.so.2 (not installed) and dying of a missing libmariadb.so.3 was reported as 'no
    failed load explains it' (seen for real)."""
    from dlltrace.worlds.elf import LiveELFWorld

    (tmp_path / "notelf.so").write_bytes(b"x\n")
    names = ["libdlltrace_not_there.so.9", str(tmp_path / "gone.so"), str(tmp_path / "notelf.so")]
    names += sorted(glob.glob("/usr/lib/i386-linux-gnu/libstdc++.so.6"))[:1]  # (another ELF class, where it is)
    true = shutil.which("true") or "/bin/true"
    w = LiveELFWorld()
    for name in names:
        real = subprocess.run([true], env={**os.environ, "LD_PRELOAD": name}, capture_output=True, text=True)
        sim = LinuxSimulator(w, LinuxProcess(true, env={}, preload=[name]))
        res = sim.start()
        assert real.returncode == 0 and res.error == "" and res.loaded, (name, res.error)
        assert sim.preload_ignored == [real.stderr.strip()], (name, real.stderr)
        assert any(p.endswith("/libc.so.6") for p in res.loaded)  # (the program's own dependencies mapped after it)
    assert rules.rule_preload_ignored("libx.so", "libx.so: cannot open shared object file: No such file or directory") \
        == "ERROR: ld.so: object 'libx.so' from LD_PRELOAD cannot be preloaded (cannot open shared object file): ignored."


def test_rule_version_needs():
    needer = lib(version_needs=(VersionNeed("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.34")),))
    old = lib(version_defs=("GLIBC_2.2.5", "GLIBC_2.17"))
    assert rules.rule_version_needs(needer, {"libc.so.6": old}) == ("libc.so.6", "GLIBC_2.34")
    assert rules.rule_version_needs(needer, {"libc.so.6": lib(version_defs=("GLIBC_2.2.5", "GLIBC_2.34"))}) is None
    assert rules.rule_version_needs(needer, {"libc.so.6": lib()}) is None  # no definitions: a warning only
    weak = lib(version_needs=(VersionNeed("libc.so.6", (), ("GLIBC_2.34",)),))
    assert rules.rule_version_needs(weak, {"libc.so.6": old}) is None
    # in the engine, with ld.so's words (GLIBCXX from a system libstdc++ older than conda's)
    w = VirtualELFWorld({"/app": lib(needed=("libstdc++.so.6",), version_needs=(VersionNeed("libstdc++.so.6", ("GLIBCXX_3.4.30",)),)),
                         "/lib/libstdc++.so.6": lib(soname="libstdc++.so.6", version_defs=("GLIBCXX_3.4", "GLIBCXX_3.4.29"))},
                        system=LinuxSystem(system_dirs=("/lib",), hwcaps=("",)))
    assert LinuxSimulator(w, LinuxProcess("/app")).start().error == (
        "/lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by /app)")


# --- the ELF reader and the live world ---------------------------------------------------------------
def test_read_elf_rejects_what_ld_so_rejects():
    assert read_elf_bytes(b"short") == ELFError("truncated", "file too short")
    assert read_elf_bytes(b"x" * 200).message == "invalid ELF header"  # type: ignore[union-attr]
    assert isinstance(read_elf("/nonexistent/x.so"), ELFError)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs Linux and gcc")
def test_read_elf_of_gcc_built_files(tmp_path):
    (tmp_path / "b.c").write_text("int b(void){return 1;}\n")
    (tmp_path / "v.map").write_text("V1 { global: b; local: *; };\n")
    (tmp_path / "a.c").write_text("#include <stdio.h>\nint b(void); int a(void){puts(\"a\"); return b();}\n")
    def gcc(*a):
        subprocess.run(["gcc", *a], check=True, capture_output=True, cwd=tmp_path)
    gcc("-shared", "-fPIC", "-o", "libb.so", "b.c", "-Wl,-soname,libb.so.1", "-Wl,--version-script=v.map")
    gcc("-shared", "-fPIC", "-o", "liba.so", "a.c", "-L.", "-lb", "-Wl,-rpath,$ORIGIN/x", "-Wl,--disable-new-dtags",
        "-Wl,-z,nodefaultlib")
    b = read_elf(str(tmp_path / "libb.so"))
    a = read_elf(str(tmp_path / "liba.so"))
    assert isinstance(a, ELFFacts) and isinstance(b, ELFFacts)
    assert b.soname == "libb.so.1" and b.version_defs == ("V1",) and b.elf_class == 64
    assert a.needed[0] == "libb.so.1" and a.rpath == "$ORIGIN/x" and a.runpath is None and a.nodeflib
    assert VersionNeed("libb.so.1", ("V1",)) in a.version_needs
    assert any(n.file == "libc.so.6" and any(v.startswith("GLIBC_2.") for v in n.versions) for n in a.version_needs)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
def test_read_ld_so_cache_of_this_machine():
    try:
        data = open("/etc/ld.so.cache", "rb").read()
    except OSError:
        pytest.skip("no /etc/ld.so.cache")
    cache = read_ld_so_cache(data)
    assert cache.get("libc.so.6", "").endswith("/libc.so.6")
    facts = read_elf(cache["libc.so.6"])
    assert isinstance(facts, ELFFacts) and "GLIBC_2.34" in facts.version_defs


def test_loaded_index_answers_as_the_rules():
    """The engine's loaded_index (dicts instead of a loop over every object at each lookup) gives the answers of
    rule_loaded_by_soname and rule_same_file over the same namespace, after every step: loads, a name given to an
    object already loaded, the same file by another path (a link), a failed dlopen that unloads what it mapped."""
    w = VirtualELFWorld({"/exe": lib(needed=("libc.so.6",), elf_type="ET_EXEC"), "/l/libc.so.6": lib(soname="libc.so.6"),
                         "/w/liba.so": lib(needed=("libb.so.1", "libc.so.6"), runpath="$ORIGIN", soname="liba.so"),
                         "/w/libb.so.1.2": lib(soname="libb.so.1", needed=("libc.so.6",)),
                         "/w/libbad.so": lib(needed=("libd.so", "libgone.so"), runpath="$ORIGIN"),
                         "/w/libd.so": lib(needed=("libb.so.1",))},
                        links={"/w/libb.so.1": "/w/libb.so.1.2", "/w/other/libb.so.1": "/w/libb.so.1.2"},
                        dirs={"/w/other"}, system=LinuxSystem(system_dirs=("/l",), hwcaps=("",)))
    sim = LinuxSimulator(w, LinuxProcess("/exe"))
    names = ["/exe", "libc.so.6", "/l/libc.so.6", "liba.so", "/w/liba.so", "libb.so.1", "/w/libb.so.1",
             "/w/other/libb.so.1", "/w/libb.so.1.2", "libd.so", "/w/libd.so", "libbad.so", "libgone.so", "nothing"]

    def agree() -> None:
        by_name, by_id = sim.loaded_index()
        refs = [o.loaded_ref() for o in sim.loaded]
        ids = [o.file_id for o in sim.loaded]
        for n in names:
            assert by_name.get(n) == rules.rule_loaded_by_soname(n, refs), n
            fid = w.file_id(n)
            assert by_id.get(fid) == rules.rule_same_file(fid, ids), n
    assert not sim.start().error
    agree()
    assert not sim.dlopen("/w/liba.so").error
    agree()
    assert not sim.dlopen("/w/other/libb.so.1").error  # the same file as libb.so.1: the name goes to it
    agree()
    assert sim.dlopen("/w/libbad.so").error  # libd.so mapped, then unloaded
    agree()
    assert not sim.dlopen("/w/libd.so").error
    agree()
    assert len(sim.loaded) == 5


def test_static_deps_finds_every_missing_library():
    from dlltrace.loader.linux.static import static_deps
    w = VirtualELFWorld({"/w/libtop.so": lib(needed=("libx.so", "liby.so"), runpath="$ORIGIN"),
                         "/w/libx.so": lib(needed=("libgone1.so",)), "/w/liby.so": lib(needed=("libgone2.so",))},
                        system=SYS)
    r = static_deps("/w/libtop.so", w)
    assert [(p.name, p.needed_by, p.cause) for p in r.problems] == [
        ("libgone1.so", "/w/libx.so", "not_found"), ("libgone2.so", "/w/liby.so", "not_found")]
    assert r.problems[0].candidates[-1].endswith("/libgone1.so")
    ok = static_deps("/w/libx.so", VirtualELFWorld({"/w/libx.so": lib()}, system=SYS))
    assert not ok.problems and ok.loaded == ["/w/libx.so"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
def test_static_deps_of_a_system_library_on_this_machine():
    from dlltrace.loader.linux.static import static_deps
    from dlltrace.worlds.elf import LiveELFWorld
    w = LiveELFWorld()
    libm = w.cache_lookup("libm.so.6")
    assert libm
    r = static_deps(libm, w)
    assert not r.problems and r.loaded[0] == libm and any(p.endswith("/libc.so.6") for p in r.loaded)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
def test_read_elf_version_definitions_of_the_system_libstdcxx():
    """GLIBCXX_* and CXXABI_* as the system libstdc++ defines them: a library built with a newer g++ (conda's)
    needs one it lacks, "version `GLIBCXX_3.4.32' not found" (rule_version_needs)."""
    from dlltrace.worlds.elf import LiveELFWorld
    w = LiveELFWorld()
    path = w.cache_lookup("libstdc++.so.6")
    if not path:
        pytest.skip("no libstdc++.so.6 in ld.so.cache")
    facts = read_elf(path)
    assert isinstance(facts, ELFFacts)
    assert "GLIBCXX_3.4" in facts.version_defs and any(v.startswith("CXXABI_1.3") for v in facts.version_defs)
    need = lib(version_needs=(VersionNeed("libstdc++.so.6", ("GLIBCXX_3.4.99",)),))
    assert rules.rule_version_needs(need, {"libstdc++.so.6": facts}) == ("libstdc++.so.6", "GLIBCXX_3.4.99")


def test_package_of_unversioned():
    """What ctypes.util.find_library('<name>') wants, lib<name>.so at any version, as the package apt has of it: the
    names of Debian's policy, the highest major, a plain name before its t64 variant; never a -dev or -bin one."""
    from dlltrace.worlds.elf import package_of_unversioned as of

    apt = ["libportaudio2", "libportaudiocpp0", "portaudio19-dev", "libzbar0", "libzbar-dev", "libmagic1", "libmagic-mgc",
           "libusb-1.0-0", "libusb-1.0-0-dev", "libssl1.1", "libssl3", "libssl3t64", "libglib2.0-0t64", "libfoo2-3"]
    assert of("portaudio", apt) == "libportaudio2"
    assert of("zbar", apt) == "libzbar0" and of("magic", apt) == "libmagic1"
    assert of("usb-1.0", apt) == "libusb-1.0-0"  # (a name ending in a digit: a hyphen before the major)
    assert of("ssl", apt) == "libssl3"  # (the highest major; the plain name before its t64 variant)
    assert of("glib-2.0", apt) == "libglib2.0-0t64"  # (GNOME's API version in the package's name)
    assert of("foo2", apt) == "libfoo2-3" and of("Foo2", apt) == "libfoo2-3"
    assert of("portaudiocpp", apt) == "libportaudiocpp0" and of("nothere", apt) is None
    assert of("portaudio", ["libportaudio2t64"]) == "libportaudio2t64"
    # Debian's ABI-transition suffixes: pylibdmtx's find_library('dmtx') is libdmtx.so.0, in Debian 12's libdmtx0b
    # (the field test); leveldb's libleveldb1d, Qt's libqt5core5a; never a translation package (l10n, i18n)
    assert of("dmtx", ["libdmtx0b", "libdmtx-dev"]) == "libdmtx0b"
    assert of("leveldb", ["libleveldb1d"]) == "libleveldb1d" and of("qt5core", ["libqt5core5a"]) == "libqt5core5a"
    assert of("foo", ["libfoo1", "libfoo1b"]) == "libfoo1"  # (the plain name first)
    assert of("gpg-error", ["libgpg-error-l10n"]) is None and of("gammu", ["libgammu-i18n"]) is None


def test_package_of_soname():
    """The package apt has of a versioned soname: a name of Debian's policy (debian_package_names), else that name
    with an ABI-transition suffix (libdmtx.so.0 is in Debian 12's libdmtx0b: the field test's pylibdmtx)."""
    from dlltrace.worlds.elf import package_of_soname as of

    assert of("libdmtx.so.0", ["libdmtx0b", "libdmtx-dev"]) == "libdmtx0b"
    assert of("libleveldb.so.1", ["libleveldb1d"]) == "libleveldb1d"
    assert of("libfoo.so.1", ["libfoo1b", "libfoo1"]) == "libfoo1" and of("libfoo.so.1", ["libfoo1t64"]) == "libfoo1t64"
    assert of("libfoo.so.1", ["libfoo12", "libfoo1-dev", "libfoo1-l10n"]) is None and of("libfoo.so", ["libfoo1"]) is None


def test_debian_package_names():
    from dlltrace.worlds.elf import debian_package_names

    assert debian_package_names("libxcb-icccm.so.4") == ["libxcb-icccm4", "libxcb-icccm4t64", "libxcb-icccm4v5"]
    assert "libgeos-c1v5" in debian_package_names("libgeos_c.so.1")  # (Debian's package of it: a C++ ABI suffix)
    assert debian_package_names("libGL.so.1")[0] == "libgl1"
    assert debian_package_names("libfoo2.so.3")[0] == "libfoo2-3"  # (a name ending in a digit: a hyphen)
    assert debian_package_names("libcudart.so.11.0")[0] == "libcudart11.0"  # (the whole soname version)
    assert debian_package_names("libfoo.so") == [] and debian_package_names("ld-linux-x86-64.so.2") == []
    # GNOME's names with an API version, as their packages are named (opencv-python's libQt5Core needs
    # libgthread-2.0.so.0 and libglib-2.0.so.0: both in libglib2.0-0, which no name made by the policy gave)
    assert "libglib2.0-0" in debian_package_names("libglib-2.0.so.0")
    assert "libglib2.0-0" in debian_package_names("libgthread-2.0.so.0")
    assert "libglib2.0-0t64" in debian_package_names("libgobject-2.0.so.0")
    # (GTK 3's package ships GDK 3: libgdk-3.so.0 is in libgtk-3-0, read from Debian 12's .deb; the review's leftover)
    assert debian_package_names("libgdk-3.so.0")[0] == "libgtk-3-0" and "libgtk-3-0t64" in debian_package_names("libgdk-3.so.0")
    assert "libatk1.0-0" in debian_package_names("libatk-1.0.so.0")
    assert debian_package_names("libpango-1.0.so.0")[0] == "libpango-1.0-0"  # (the policy's name first)


def test_system_package_fix_chains_the_next_missing_library():
    """A library no pip package ships gets its system package, verified by the model: the plugin then fails on the
    next library, whose package is the next step; the fix is complete when the load succeeds (Qt's xcb plugin)."""
    from dlltrace.elf import ELFFacts
    from dlltrace.loader.linux.fixes import propose
    from dlltrace.worlds.elf import LinuxSystem, OverlayWorld, VirtualELFWorld

    plugin = "/v/PySide6/Qt/plugins/platforms/libqxcb.so"
    base = VirtualELFWorld(files={plugin: ELFFacts(needed=("libxcb-icccm.so.4", "libxcb-keysyms.so.1"))},
                           system=LinuxSystem(system_dirs=("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")))

    class World(OverlayWorld):
        as_root = False

        def system_package(self, soname):
            return {"libxcb-icccm.so.4": "libxcb-icccm4", "libxcb-keysyms.so.1": "libxcb-keysyms1"}.get(soname)

    world = World(base)

    def rerun(w, env):
        missing = [n for n in ("libxcb-icccm.so.4", "libxcb-keysyms.so.1")
                   if w.file(f"/usr/lib/x86_64-linux-gnu/{n}") is None]
        return True if not missing else missing[0]

    (fix,) = propose("libxcb-icccm.so.4", plugin, "/v/bin/python", {}, world, rerun, roots=[])
    assert (fix.action, fix.package, fix.verified, fix.folder) == ("install_system_package", "libxcb-icccm4", True,
                                                                    "/usr/lib/x86_64-linux-gnu")
    assert [s.package for s in fix.then] == ["libxcb-keysyms1"]
    unknown = propose("libnotapackage.so.1", plugin, "/v/bin/python", {}, world, lambda w, e: False, roots=[])
    assert not [f for f in unknown if f.action == "install_system_package"]


def test_rule_library_needs_its_plugins():
    """libvlc5 alone loads, but libvlc_new() finds no plugin and python-vlc's vlc.MediaPlayer() then fails
    (AttributeError on None; field test, Debian 12): the fix for libvlc, by any version of its name, installs
    vlc-plugin-base with it, in the one apt-get command; a library without plugins gets its own package only."""
    from dlltrace.loader.linux.fixes import rule_library_needs_its_plugins, system_package_fix
    from dlltrace.render.fixwords import fix_text
    from dlltrace.worlds.elf import OverlayWorld

    assert rule_library_needs_its_plugins("libvlc.so") == ("vlc-plugin-base", "vlc/plugins")
    assert rule_library_needs_its_plugins("/usr/lib/x86_64-linux-gnu/libvlc.so.5") == ("vlc-plugin-base", "vlc/plugins")
    assert rule_library_needs_its_plugins("libvlccore.so.9") is None
    assert rule_library_needs_its_plugins("libzbar.so") is None

    class World(OverlayWorld):
        as_root = True

        def system_package(self, soname):
            return {"libvlc.so": "libvlc5", "libzbar.so": "libzbar0"}.get(soname)

    world = World(VirtualELFWorld(files={}, system=LinuxSystem(system_dirs=("/usr/lib/x86_64-linux-gnu",))))
    vlc = system_package_fix("libvlc.so", world)
    assert vlc is not None and [(s.package, s.folder) for s in vlc.then] == [
        ("vlc-plugin-base", "/usr/lib/x86_64-linux-gnu/vlc/plugins")]
    assert fix_text(vlc) == ("apt-get install libvlc5 vlc-plugin-base (Debian, Ubuntu: the system's packages of "
                             "libvlc.so, the plugins in vlc/plugins, which no pip package ships)")
    zbar = system_package_fix("libzbar.so", world)
    assert zbar is not None and zbar.then == () and fix_text(zbar).startswith("apt-get install libzbar0 (")


def test_rule_ld_library_path_shadows():
    """An old copy on LD_LIBRARY_PATH that lacks a symbol version: LD_LIBRARY_PATH without its folder, offered
    only when the replay then loads the call (loader/linux/fixes.py)."""
    from dlltrace.loader.linux.fixes import rule_ld_library_path_shadows as rule

    w = VirtualELFWorld({})
    env = {"LD_LIBRARY_PATH": "/opt/old/lib/:/x"}
    seen: list[dict] = []

    def loads(world, env2):
        seen.append(env2)
        return env2.get("LD_LIBRARY_PATH") == "/x"

    (f,) = rule("libstdc++.so.6", "/opt/old/lib/libstdc++.so.6", "GLIBCXX_3.4.30", env, w, loads)
    assert f.action == "set_env" and f.variable == "LD_LIBRARY_PATH" and f.value == "/x" and f.verified
    assert f.bound == "/opt/old/lib/libstdc++.so.6" and f.lacks == "GLIBCXX_3.4.30" and f.folder == ""
    assert seen[0] == {"LD_LIBRARY_PATH": "/x"}  # (the folder, written with a trailing slash, taken out)
    # the only folder: emptied (ld.so then searches none, as when it is unset)
    (g,) = rule("libstdc++.so.6", "/opt/old/lib/libstdc++.so.6", "GLIBCXX_3.4.30", {"LD_LIBRARY_PATH": "/opt/old/lib"},
                w, lambda world, e: e["LD_LIBRARY_PATH"] == "")
    assert g.value == ""
    # a copy not found through LD_LIBRARY_PATH, or a replay that still fails: no fix
    assert rule("libstdc++.so.6", "/usr/lib/libstdc++.so.6", "GLIBCXX_3.4.30", env, w, loads) == []
    assert rule("libstdc++.so.6", "/opt/old/lib/libstdc++.so.6", "GLIBCXX_3.4.30", env, w, lambda world, e: False) == []



def test_rule_ld_library_path_shadows_a_runpath_copy():
    """pyenv's python3.11 (its RUNPATH: its own lib folder, with libpython3.11.so.1.0) run with
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu, which holds Debian's older libpython3.11.so.1.0: LD_LIBRARY_PATH is
    searched before RUNPATH, and `import ssl` dies of '_ssl...so: undefined symbol: _PyModule_Add' (seen for real: the
    report named the symbol and gave no fix). The fix: LD_LIBRARY_PATH without that folder, when the model then takes
    the RUNPATH's copy (replay_linux.loaded_objects, the real simulator) and breaks no other load."""
    from dlltrace.diagnosis.replay_linux import RecordedCall, RecordedProcess, loaded_objects
    from dlltrace.loader.linux.fixes import rule_ld_library_path_shadows_a_runpath_copy as rule
    from dlltrace.render.fixwords import fix_text

    exe, mine, debian = "/opt/py/bin/python3.11", "/opt/py/lib/libpython3.11.so.1.0", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
    ssl = "/opt/py/lib/python3.11/lib-dynload/_ssl.so"
    w = VirtualELFWorld({exe: lib(elf_type="ET_EXEC", needed=("libpython3.11.so.1.0",), runpath="/opt/py/lib"),
                         mine: lib(soname="libpython3.11.so.1.0"), debian: lib(soname="libpython3.11.so.1.0"),
                         ssl: lib()})
    env = {"LD_LIBRARY_PATH": "/opt/other:/usr/lib/x86_64-linux-gnu/"}
    proc = RecordedProcess(1, exe, env, calls=[RecordedCall(1, ssl, exe)])
    taken = loaded_objects(proc, w, env, 0)
    assert [(n, p) for n, p, _ in taken] == [("libpython3.11.so.1.0", debian), (ssl, ssl)]
    assert [p for _, p, _ in loaded_objects(proc, w, {"LD_LIBRARY_PATH": "/opt/other"}, 0)] == [mine, ssl]
    (f,) = rule("_PyModule_Add", "_ssl.so", env, taken, lambda env2: loaded_objects(proc, w, env2, 0), w,
                lambda world, env2: True)
    assert (f.action, f.variable, f.value, f.name, f.bound, f.ahead_of, f.lacks, f.leaf, f.verified) == (
        "set_env", "LD_LIBRARY_PATH", "/opt/other", "libpython3.11.so.1.0", debian, mine, "_PyModule_Add", "_ssl.so", True)
    assert fix_text(f) == ("Before starting the program:  export LD_LIBRARY_PATH=/opt/other  (_ssl.so needs the symbol "
                           f"_PyModule_Add, which no library loaded defines; {debian} was taken from LD_LIBRARY_PATH "
                           f"ahead of {mine}: without that folder, ld.so takes that copy)")
    # no copy elsewhere (the folder out, the model takes the same file, or finds none): no fix; a fix that breaks
    # another load is not offered
    alone = VirtualELFWorld({exe: lib(elf_type="ET_EXEC", needed=("libpython3.11.so.1.0",)),
                             debian: lib(soname="libpython3.11.so.1.0"), ssl: lib()})
    assert rule("_PyModule_Add", "_ssl.so", env, loaded_objects(proc, alone, env, 0),
                lambda env2: loaded_objects(proc, alone, env2, 0), alone, lambda world, env2: True) == []
    assert rule("_PyModule_Add", "_ssl.so", {}, taken, lambda env2: taken, w, lambda world, env2: True) == []
    from dlltrace.loader.linux.fixes import Rerun
    assert rule("_PyModule_Add", "_ssl.so", env, taken, lambda env2: loaded_objects(proc, w, env2, 0), w,
                lambda world, env2: Rerun(True, breaks=("libother.so",))) == []


def test_rule_stale_ld_so_cache(tmp_path):
    """A copy in a folder /etc/ld.so.conf lists, that ld.so.cache does not know (`make install` into
    /usr/local/lib, ldconfig not run since; seen for real: the report found no copy and gave no fix): the fix is
    ldconfig alone, first, and without sudo for a program run as root; a copy in another folder gets the
    ld.so.conf.d file too."""
    from dataclasses import replace as copy_with

    from dlltrace.loader.linux.fixes import propose, rule_stale_ld_so_cache
    from dlltrace.render.fixwords import fix_text

    local = tmp_path / "local"
    local.mkdir()
    (local / "libdltlocal.so.1").write_bytes(b"")
    copy = str(local / "libdltlocal.so.1")
    system = copy_with(LinuxSystem(), conf_dirs=(str(local),))
    w = VirtualELFWorld({copy: lib(soname="libdltlocal.so.1"), "/app/libuse.so": lib(needed=("libdltlocal.so.1",))},
                        system=system)
    f = rule_stale_ld_so_cache("libdltlocal.so.1", copy, w)
    assert f.action == "add_ld_so_conf" and f.dest == "/etc/ld.so.conf" and f.folder == str(local)
    assert fix_text(f).startswith(f"sudo ldconfig ({local} is listed in /etc/ld.so.conf, but ld.so.cache was made")
    w.as_root = True  # type: ignore[attr-defined]
    assert fix_text(rule_stale_ld_so_cache("libdltlocal.so.1", copy, w)).startswith("ldconfig (")
    other = VirtualELFWorld({copy: lib(soname="libdltlocal.so.1")})
    g = rule_stale_ld_so_cache("libdltlocal.so.1", copy, other)
    assert g.dest == "" and fix_text(g) == f"echo {local} | sudo tee /etc/ld.so.conf.d/libdltlocal.conf && sudo ldconfig"
    # propose finds the copy in the listed folder and offers ldconfig first (each fix re-run: here every one loads)
    fixes = propose("libdltlocal.so.1", "/app/libuse.so", "/usr/bin/python3", {}, w, lambda world, env: True, roots=[])
    assert [x.action for x in fixes][:1] == ["add_ld_so_conf"] and fixes[0].dest and fixes[0].verified
    assert {x.action for x in fixes} == {"add_ld_so_conf", "set_env", "set_runpath"}


def test_read_ld_so_conf(tmp_path):
    """The folders an ld.so.conf lists, as ldconfig reads it: includes (relative to the file's folder) in place,
    comments, hwcap lines skipped, each folder once; a line is one folder, spaces and all ("/opt/a b/lib"), and
    "/opt/x/lib, /opt/y/lib" is one folder too, which does not exist (glibc 2.36's ldconfig -f of such a file,
    with a library in each: only /opt/a b/lib's is cached); `=libc6` after a folder dropped."""
    from dlltrace.worlds.elf import read_ld_so_conf

    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "b.conf").write_text("# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/opt/b/lib/\n")
    (tmp_path / "conf.d" / "a.conf").write_text("/usr/local/lib\n")
    (tmp_path / "ld.so.conf").write_text("include conf.d/*.conf\n/opt/x/lib, /opt/y/lib  # one\nhwcap 0 nosegneg\n"
                                         "/usr/local/lib\n  /opt/a b/lib/  \n/opt/old=libc6\nHWCAP 1 x\n")
    assert read_ld_so_conf(str(tmp_path / "ld.so.conf")) == (
        "/usr/local/lib", "/usr/local/lib/x86_64-linux-gnu", "/opt/b/lib", "/opt/x/lib, /opt/y/lib", "/opt/a b/lib",
        "/opt/old")
    assert read_ld_so_conf(str(tmp_path / "nothing.conf")) == ()


def test_read_ld_so_conf_agrees_with_ldconfig(tmp_path):
    """The folders read_ld_so_conf reads from a file are those glibc's own ldconfig caches libraries from: a library
    in each folder the file names (spaces, a comma, `=TYPE`, trailing slashes), `ldconfig -C CACHE -f FILE`, then
    `ldconfig -C CACHE -p`: the folders of what it cached are the folders read (those that exist)."""
    import shutil

    from dlltrace.worlds.elf import read_ld_so_conf

    ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if ldconfig is None or shutil.which("gcc") is None:
        pytest.fail("needs ldconfig and gcc -- CI has both") if os.environ.get("CI") else pytest.skip("needs ldconfig, gcc")
    (tmp_path / "f.c").write_text("int f(void) { return 1; }\n")
    lines = {"a b/lib": "liba", "x/lib, y": "libxy", "x/lib": "libx", "old": "libold", "slash": "libslash"}
    for folder, lib in lines.items():
        d = tmp_path / folder
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{lib}.so.1", "-o", str(d / f"{lib}.so.1"),
                        str(tmp_path / "f.c")], check=True)
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{tmp_path}/a b/lib\n{tmp_path}/x/lib, y\n{tmp_path}/old=libc6\n"
                    f"   {tmp_path}/slash//  \n{tmp_path}/nothere\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run([ldconfig, "-X", "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    printed = subprocess.run([ldconfig, "-C", str(cache), "-p"], check=True, capture_output=True, text=True).stdout
    cached = {x.split(" => ", 1)[1].rsplit("/", 1)[0] for x in printed.splitlines() if " => " + str(tmp_path) in x}
    read = {d for d in read_ld_so_conf(str(conf)) if os.path.isdir(d)}
    assert cached == read == {f"{tmp_path}/a b/lib", f"{tmp_path}/x/lib, y", f"{tmp_path}/old",
                              f"{tmp_path}/slash"}, (cached, read)


def test_read_ld_so_conf_reads_each_file_once(tmp_path):
    """Six files that each include the glob of all six (an include loop ldconfig itself never ends): read once
    each, quickly, every folder once, and the include line is never taken for a folder (it was, once the depth
    limit stopped following it: '/.../*.conf' came out as a folder; and 6**8 files were read, a minute)."""
    import time

    from dlltrace.worlds.elf import read_ld_so_conf

    for i in range(1, 7):
        (tmp_path / f"f{i}.conf").write_text(f"include {tmp_path}/*.conf\n/opt/l{i}\n")
    t = time.monotonic()
    got = read_ld_so_conf(str(tmp_path / "f1.conf"))
    assert time.monotonic() - t < 5
    assert sorted(got) == [f"/opt/l{i}" for i in range(1, 7)]


def test_read_ld_so_conf_of_a_huge_file_is_quick_and_capped(tmp_path):
    """A 1 MB ld.so.conf of distinct folders (116,000 lines): each was checked against every one kept before it
    (100 s, at every `dlltrace run`) and all were recorded in the trace; now quick, the first MAX_CONF_DIRS."""
    import time

    from dlltrace.worlds.elf import MAX_CONF_DIRS, read_ld_so_conf

    (tmp_path / "ld.so.conf").write_text("".join(f"/d/{i}\n" for i in range(120000)))
    t = time.monotonic()
    got = read_ld_so_conf(str(tmp_path / "ld.so.conf"))
    assert time.monotonic() - t < 5
    assert got == tuple(f"/d/{i}" for i in range(MAX_CONF_DIRS))



def _chained_system_package_fix(names: dict, requester: str):
    """The one fix propose() gives for the first of `names` (soname -> its Debian package) that `requester` needs,
    none installed: a machine as root whose replay loads once every package is in."""
    from dlltrace.elf import ELFFacts
    from dlltrace.loader.linux.fixes import propose
    from dlltrace.worlds.elf import LinuxSystem, OverlayWorld, VirtualELFWorld

    base = VirtualELFWorld(files={requester: ELFFacts(needed=tuple(names))},
                           system=LinuxSystem(system_dirs=("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")))

    class World(OverlayWorld):
        as_root = True

        def system_package(self, soname):
            return names.get(soname)

    def rerun(w, env):
        missing = [n for n in names if w.file(f"/usr/lib/x86_64-linux-gnu/{n}") is None]
        return True if not missing else missing[0]

    (fix,) = propose(next(iter(names)), requester, "/v/bin/python", {}, World(base), rerun, roots=[])
    return fix

def test_nine_system_packages_chained_are_one_command():
    """PyQt5 5.15's xcb plugin on a machine without libxcb-icccm4, libxcb-keysyms1 and libxcb-xinerama0 (seen for
    real): the model chains the three as nested steps, and the command printed named only the first two, so the
    plugin, after `apt-get install libxcb-icccm4 libxcb-keysyms1`, still failed on libxcb-xinerama.so.0. With six
    more xcb packages removed (seen for real: nine in all), the chain was cut at six steps and only the first
    package was printed; the nine are one command (with it, the program runs)."""
    from dlltrace.render.fixwords import fix_text

    names = {"libxcb-icccm.so.4": "libxcb-icccm4", "libxcb-image.so.0": "libxcb-image0",
             "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-randr.so.0": "libxcb-randr0",
             "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-shape.so.0": "libxcb-shape0",
             "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-xkb.so.1": "libxcb-xkb1",
             "libxkbcommon-x11.so.0": "libxkbcommon-x11-0"}
    plugin = "/v/PyQt5/Qt5/plugins/platforms/libqxcb.so"
    fix = _chained_system_package_fix(names, plugin)
    # the report's JSON: more packages are not "also needs LD_LIBRARY_PATH" (needs_path was any next step)
    from dlltrace.diagnosis.replay_linux import LinuxCall
    from dlltrace.render.linux import linux_report_dict

    call = LinuxCall(1, "/v/bin/python", plugin, "", "libxcb-icccm.so.4: cannot open", "libxcb-icccm.so.4: cannot open",
                     fixes=[fix])
    (got,) = linux_report_dict([], calls=[call])["failed"][0]["fixes"]
    assert got["action"] == "install_system_package" and got["needs_path"] is False
    assert fix.verified and fix_text(fix).startswith(
        f"apt-get install {' '.join(names.values())} (Debian, Ubuntu: the system's packages of {', '.join(names)},"), \
        fix_text(fix)


def test_a_package_two_chained_libraries_share_is_named_once():
    """opencv-python 5.1 without libgl1 and libglib2.0-0 (seen for real): libGL.so.1, then libgthread-2.0.so.0 and
    libglib-2.0.so.0, both in libglib2.0-0; the command named libglib2.0-0 twice."""
    from dlltrace.render.fixwords import fix_text

    names = {"libGL.so.1": "libgl1", "libgthread-2.0.so.0": "libglib2.0-0", "libglib-2.0.so.0": "libglib2.0-0"}
    qt = "/v/cv2/../opencv_python.libs/libQt5Core.so.5"
    fix = _chained_system_package_fix(names, qt)
    assert fix_text(fix).startswith("apt-get install libgl1 libglib2.0-0 (Debian, Ubuntu: the system's packages of "
                                    "libGL.so.1, libgthread-2.0.so.0, libglib-2.0.so.0,"), fix_text(fix)


def test_rule_glibc_too_old():
    """A GLIBC_x.y glibc's own objects lack is the C library's age: the advice names both versions (or 'this
    system's glibc' when the trace has no facts of libc). Not for GLIBC_PRIVATE (glibc's objects of two builds
    mixed: it said 'needs glibc PRIVATE'), not for a version older than the newest the object defines (no glibc of
    this age lacks it), not for libstdc++'s GLIBCXX_ nor a musl libc."""
    from dlltrace.elf import ELFFacts
    from dlltrace.loader.linux.fixes import rule_glibc_too_old
    from dlltrace.render.fixwords import fix_text
    from dlltrace.worlds.elf import VirtualELFWorld

    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    w = VirtualELFWorld(files={libc: ELFFacts(soname="libc.so.6",
                                              version_defs=("GLIBC_2.2.5", "GLIBC_2.36", "GLIBC_PRIVATE"))})
    f = rule_glibc_too_old("libc.so.6", libc, "GLIBC_2.99", "/v/ext.so", w)
    assert f is not None and (f.need, f.version) == ("2.99", "2.36")
    assert "ext.so needs glibc 2.99 (GLIBC_2.99); this system's is 2.36" in fix_text(f)
    assert "manylinux_2_36 or lower" in fix_text(f)
    unknown = rule_glibc_too_old("libc.so.6", "", "GLIBC_2.99", "/v/ext.so", w)
    assert unknown is not None and unknown.version == ""
    assert "made for this system's glibc or older" in fix_text(unknown) and "glibc this" not in fix_text(unknown)
    assert rule_glibc_too_old("libc.so.6", libc, "GLIBC_PRIVATE", "/v/ext.so", w) is None
    assert rule_glibc_too_old("libc.so.6", libc, "GLIBC_2.17", "/v/ext.so", w) is None
    # glibc's age is libc's: libpthread.so.0 (since glibc 2.34 a stub with old versions only) lacking GLIBC_2.32 on
    # a glibc 2.36 is not this system being older (it said 'this system's is 2.31'); libm lacking 2.99 says 2.36
    pth, libm = "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib/x86_64-linux-gnu/libm.so.6"
    w2 = VirtualELFWorld(files={**w.files, pth: ELFFacts(soname="libpthread.so.0", version_defs=("GLIBC_2.31",)),
                                libm: ELFFacts(soname="libm.so.6", version_defs=("GLIBC_2.35",))})
    assert rule_glibc_too_old("libpthread.so.0", pth, "GLIBC_2.32", "/v/ext.so", w2) is None
    m = rule_glibc_too_old("libm.so.6", libm, "GLIBC_2.99", "/v/ext.so", w2)
    assert m is not None and m.version == "2.36"
    assert rule_glibc_too_old("libstdc++.so.6", "/x/libstdc++.so.6", "GLIBCXX_3.4.30", "/v/ext.so", w) is None
    assert rule_glibc_too_old("libc.musl-x86_64.so.1", "/lib/libc.musl-x86_64.so.1", "GLIBC_2.34", "/v/ext.so",
                              w) is None


def test_apt_package_of_program(tmp_path, monkeypatch):
    """The package that ships a program, as this machine's own data says: command-not-found's database (its two
    schemas: Ubuntu's older one with `command` its key, the newer with cmdID; the highest priority first, an
    architecture qualifier dropped), else apt-file; only a package apt knows here, never a name made up; None for a
    name that is not a command's."""
    import sqlite3

    from dlltrace.worlds import elf

    monkeypatch.setattr(elf, "apt_file_packages", lambda program: [])
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    con = sqlite3.connect(old)
    con.executescript('CREATE TABLE "commands" ([command] TEXT PRIMARY KEY NOT NULL, [pkgID] INTEGER NOT NULL);'
                      'CREATE TABLE "packages" ([pkgID] INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, [name] TEXT, '
                      '[version] TEXT, [priority] INTEGER);'
                      "INSERT INTO packages VALUES (1, 'tesseract-ocr', '5.3.0-2', 120), (2, 'graphviz', '2.42', 120);"
                      "INSERT INTO commands VALUES ('tesseract', 1), ('dot', 2);")
    con.commit()
    con.close()
    con = sqlite3.connect(new)
    con.executescript('CREATE TABLE "commands" ([cmdID] INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, '
                      '[pkgID] INTEGER NOT NULL, [command] TEXT);'
                      'CREATE TABLE "packages" ([pkgID] INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, [name] TEXT, '
                      '[version] TEXT, [component] TEXT, [priority] INTEGER);'
                      "INSERT INTO packages VALUES (1, 'poppler-utils:amd64', '22', 'main', 120), "
                      "(2, 'xpdf', '3', 'main', 60), (3, 'ffmpeg', '5', 'main', 120);"
                      "INSERT INTO commands VALUES (1, 2, 'pdfinfo'), (2, 1, 'pdfinfo'), (3, 3, 'ffprobe');")
    con.commit()
    con.close()
    apt = ["tesseract-ocr", "graphviz", "poppler-utils", "xpdf"]
    dbs = (str(tmp_path / "none.db"), str(old), str(new))
    assert elf.apt_package_of_program("tesseract", dbs, apt) == "tesseract-ocr"
    assert elf.apt_package_of_program("dot", dbs, apt) == "graphviz"
    assert elf.apt_package_of_program("pdfinfo", dbs, apt) == "poppler-utils"  # (priority 120 before 60)
    assert elf.apt_package_of_program("ffprobe", dbs, apt) is None  # (apt does not know ffmpeg here: never said)
    assert elf.apt_package_of_program("nosuch", dbs, apt) is None
    assert elf.apt_package_of_program("../tesseract", dbs, apt) is None and elf.apt_package_of_program("", dbs, apt) is None
    assert elf.apt_package_of_program("tesseract", dbs, []) is None  # (no apt here)
    (tmp_path / "bad.db").write_bytes(b"not a database")
    assert elf.apt_package_of_program("tesseract", (str(tmp_path / "bad.db"), str(old)), apt) == "tesseract-ocr"
    monkeypatch.setattr(elf, "apt_file_packages", lambda program: ["nosuchpkg", "graphviz"] if program == "neato" else [])
    assert elf.apt_package_of_program("neato", dbs, apt) == "graphviz"  # (apt-file's answer, the first apt knows)
