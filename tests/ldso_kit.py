"""The ld.so differential's kit: a pool of tiny gcc-built .so files (built once per session), random
layouts of copies of them, a C host that loads names through DT_NEEDED and dlopen, and the real
loader's answer (LD_DEBUG=libs: each name searched and every file tried; the host: dlerror() or the
object chosen, and every object mapped, from dl_iterate_phdr) set beside the model's (loader/linux).

The pool: libdlta/libdltb/libdltc in variants (DT_NEEDED of the next one, DT_RPATH or DT_RUNPATH with
$ORIGIN, -z nodefaultlib, version scripts defining V1 / V1+V2, a need for V2), hosts with and without
DT_RPATH / DT_RUNPATH / DT_NEEDED, and damaged copies (ELFCLASS32 in the header, another e_machine, not
ELF at all). Layouts copy pool files (never link them: ld.so tells files apart by inode) into
ROOT/L/d0..d3, with LD_LIBRARY_PATH over some of those folders and one that does not exist.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from dlltrace.loader.linux.engine import LinuxProcess, LinuxSimulator
from dlltrace.loader.linux.rules import LA_SER_NAMES, RTLD_LAZY, RTLD_NOLOAD, RTLD_NOW
from dlltrace.worlds.elf import LiveELFWorld, probe_live_system

HOST_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
static int show(struct dl_phdr_info *i, size_t n, void *d) {
    (void)n; (void)d; if (i->dlpi_name && i->dlpi_name[0]) printf("MAP %s\n", i->dlpi_name); return 0; }
int main(int argc, char **argv) {
    /* argv: pairs of (flags, name); flags "D<n>": dlopen called from libdltd.so ($DLT_DLIB), not the host */
    void *(*dopen)(const char *, int) = 0;
    for (int k = 1; k + 1 < argc; k += 2) {
        void *h;
        if (argv[k][0] == 'D') {
            if (!dopen) {
                void *d = dlopen(getenv("DLT_DLIB"), RTLD_NOW);
                if (!d) { printf("DLIB %s\n", dlerror()); return 2; }
                dopen = (void *(*)(const char *, int))dlsym(d, "dltd_open");
            }
            h = dopen(argv[k + 1], atoi(argv[k] + 1));
        } else
            h = dlopen(argv[k + 1], atoi(argv[k]));
        if (!h) { const char *e = dlerror(); printf("ERR %s\n", e ? e : "(null)"); continue; }
        struct link_map *m = 0;
        dlinfo(h, RTLD_DI_LINKMAP, &m);
        printf("OK %s\n", m ? m->l_name : "?");
    }
    dl_iterate_phdr(show, 0);
    fflush(stdout);
    return 0;
}
"""

NAMES = ("libdlta.so", "libdltb.so", "libdltc.so")
DIRS = ("d0", "d1", "d2", "d3")


@dataclass(frozen=True)
class Variant:
    key: str
    name: str  # the file name it is placed as
    needed: tuple[str, ...] = ()
    rpath: str = ""
    runpath: str = ""
    nodeflib: bool = False
    defs: tuple[str, ...] = ()  # version script: the versions it defines
    needs_v2: bool = False  # linked against a libdltb defining V2, using it
    damage: str = ""  # "", "class32", "machine", "garbage"


def _variants() -> list[Variant]:
    paths = [("", ""), ("$ORIGIN/../d0", ""), ("$ORIGIN/../d2", ""), ("", "$ORIGIN/../d1"), ("", "$ORIGIN"),
             ("$ORIGIN/../d3:$ORIGIN", ""), ("", "$ORIGIN/../d2:/nonexistent-dlt")]
    out: list[Variant] = []
    for i, (rp, rn) in enumerate(paths):
        for needed in ((), ("libdltb.so",)):
            out.append(Variant(f"a{i}{len(needed)}", "libdlta.so", needed, rp, rn))
        for needed in ((), ("libdltc.so",)):
            out.append(Variant(f"b{i}{len(needed)}", "libdltb.so", needed, rp, rn))
        if i < 3:
            out.append(Variant(f"c{i}", "libdltc.so", (), rp, rn))
    out += [Variant("bv1", "libdltb.so", defs=("V1",)), Variant("bv2", "libdltb.so", defs=("V1", "V2")),
            Variant("av2", "libdlta.so", ("libdltb.so",), "$ORIGIN", needs_v2=True),
            Variant("anodef", "libdlta.so", ("libdltb.so",), "", "$ORIGIN/../d0", nodeflib=True),
            Variant("cx32", "libdltc.so", damage="class32"), Variant("cxm", "libdltc.so", damage="machine"),
            Variant("bx32", "libdltb.so", damage="class32"), Variant("cgarb", "libdltc.so", damage="garbage")]
    return out


VARIANTS = _variants()
HOSTS = {"h0": ("", "", ()), "hrp": ("$ORIGIN/../d1:$ORIGIN/../d2", "", ()), "hrn": ("", "$ORIGIN/../d2", ()),
         "hna": ("$ORIGIN/../d0", "", ("libdlta.so",)), "hnr": ("", "$ORIGIN/../d3", ("libdlta.so",))}


# libdltd.so, whose dltd_open() calls dlopen: the search is its DT_RUNPATH / DT_RPATH, not the host's
DLIBS = {"drn": ("", "$ORIGIN/../d0"), "drp": ("$ORIGIN/../d3", ""), "dnone": ("", "")}


def _gcc(args: list[str]) -> None:
    subprocess.run(["gcc", *args], check=True, capture_output=True)


def build_pool(root: Path) -> Path:
    """Build every variant and host into root/pool (once; a second call finds them built)."""
    pool = root / "pool"
    done = pool / ".done"
    if done.exists():
        return pool
    pool.mkdir(parents=True, exist_ok=True)
    src = pool / "src"
    src.mkdir(exist_ok=True)
    (src / "host.c").write_text(HOST_C)
    stub = pool / "stub"  # libraries to link against (their DT_NEEDED names): plain ones
    stub.mkdir(exist_ok=True)
    for n in NAMES:
        (src / f"{n}.c").write_text(f"int {n[3:7]}_f(void) {{ return 1; }}\n")
    (src / "v1.map").write_text("V1 { global: dltb_f; local: *; };\n")
    (src / "v2.map").write_text("V1 { global: dltb_old; }; V2 { global: dltb_f; local: *; } V1;\n")
    (src / "b2.c").write_text("int dltb_old(void) { return 0; }\nint dltb_f(void) { return 2; }\n")
    (src / "a2.c").write_text("int dltb_f(void);\nint dlta_f(void) { return dltb_f(); }\n")
    (src / "d.c").write_text("#include <dlfcn.h>\nvoid *dltd_open(const char *n, int f) { return dlopen(n, f); }\n")
    for n in ("libdltc.so", "libdltb.so"):
        _gcc(["-shared", "-fPIC", "-o", str(stub / n), str(src / f"{n}.c"), f"-Wl,-soname,{n}"])
    (stub / "v2").mkdir(exist_ok=True)
    _gcc(["-shared", "-fPIC", "-o", str(stub / "v2" / "libdltb.so"), str(src / "b2.c"), "-Wl,-soname,libdltb.so",
          f"-Wl,--version-script={src / 'v2.map'}"])

    def one(v: Variant) -> None:
        out = pool / v.key
        if v.damage:
            return
        args = ["-shared", "-fPIC", "-o", str(out), f"-Wl,-soname,{v.name}"]
        if v.needs_v2:
            args += [str(src / "a2.c"), f"-L{stub / 'v2'}", "-ldltb"]
        elif v.defs == ("V1",):
            args += [str(src / "libdltb.so.c"), f"-Wl,--version-script={src / 'v1.map'}"]
        elif v.defs:
            args += [str(src / "b2.c"), f"-Wl,--version-script={src / 'v2.map'}"]
        else:
            args += [str(src / f"{v.name}.c"), f"-L{stub}", "-Wl,--no-as-needed"] + [f"-l{n[3:-3]}" for n in v.needed]
        if v.rpath:
            args += [f"-Wl,-rpath,{v.rpath}", "-Wl,--disable-new-dtags"]
        if v.runpath:
            args += [f"-Wl,-rpath,{v.runpath}", "-Wl,--enable-new-dtags"]
        if v.nodeflib:
            args.append("-Wl,-z,nodefaultlib")
        _gcc(args)

    def host(key: str) -> None:
        rp, rn, needed = HOSTS[key]
        args = ["-o", str(pool / key), str(src / "host.c"), f"-L{stub}", "-Wl,--no-as-needed"]
        if needed:
            (stub / "libdlta.so").exists() or _gcc(["-shared", "-fPIC", "-o", str(stub / "libdlta.so"),
                                                    str(src / "libdlta.so.c"), "-Wl,-soname,libdlta.so"])
            args += [f"-l{n[3:-3]}" for n in needed]
        if rp:
            args += [f"-Wl,-rpath,{rp}", "-Wl,--disable-new-dtags"]
        if rn:
            args += [f"-Wl,-rpath,{rn}", "-Wl,--enable-new-dtags"]
        args.append("-ldl")
        _gcc(args)

    _gcc(["-shared", "-fPIC", "-o", str(stub / "libdlta.so"), str(src / "libdlta.so.c"), "-Wl,-soname,libdlta.so"])

    def dlib(key: str) -> None:
        rp, rn = DLIBS[key]
        args = ["-shared", "-fPIC", "-o", str(pool / key), str(src / "d.c"), "-Wl,-soname,libdltd.so", "-ldl"]
        if rp:
            args += [f"-Wl,-rpath,{rp}", "-Wl,--disable-new-dtags"]
        if rn:
            args += [f"-Wl,-rpath,{rn}", "-Wl,--enable-new-dtags"]
        _gcc(args)

    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(one, VARIANTS))
        list(ex.map(host, HOSTS))
        list(ex.map(dlib, DLIBS))
    base = pool / "c0"
    data = bytearray(base.read_bytes())
    for v in VARIANTS:
        if v.damage == "class32":
            d = bytearray(data)
            d[4] = 1  # EI_CLASS = ELFCLASS32
            (pool / v.key).write_bytes(bytes(d))
        elif v.damage == "machine":
            d = bytearray(data)
            d[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
            (pool / v.key).write_bytes(bytes(d))
        elif v.damage == "garbage":
            (pool / v.key).write_bytes(b"this is not an ELF file, it only has the name of one.\n" * 3)
    done.write_text("ok")
    return pool


@dataclass
class Layout:
    seed: int
    host: str
    files: dict[str, str]  # "d1/libdlta.so" -> variant key
    llp: list[str]  # LD_LIBRARY_PATH entries ("d1", "nonexistent", ...)
    ops: list[tuple[int, str]]  # dlopen (flags, name); a name "@d2/libdlta.so" is a path under L
    dlib: str = ""  # a DLIBS key: the ops with flags >= 1000 are dlopen(name, flags - 1000) from libdltd.so

    def describe(self) -> str:
        return (f"seed {self.seed}: host {self.host}, files {self.files}, LD_LIBRARY_PATH {self.llp}, dlopen {self.ops}"
                + (f", from libdltd {self.dlib}" if self.dlib else ""))


def generate(seed: int) -> Layout:
    rnd = random.Random(seed)
    files: dict[str, str] = {}
    by_name: dict[str, list[Variant]] = {}
    for v in VARIANTS:
        by_name.setdefault(v.name, []).append(v)
    for d in DIRS:
        for n in NAMES:
            if rnd.random() < 0.45:
                files[f"{d}/{n}"] = rnd.choice(by_name[n]).key
    ops: list[tuple[int, str]] = []
    if rnd.random() < 0.3:  # a version need: libdlta (V2 of libdltb, RPATH $ORIGIN) beside a libdltb with or without it
        d = rnd.choice(DIRS)
        files[f"{d}/libdlta.so"] = "av2"
        files[f"{d}/libdltb.so"] = rnd.choice(("bv1", "bv2"))
        ops.append((RTLD_NOW, f"@{d}/libdlta.so"))
    llp = [d for d in (*DIRS, "nonexistent") if rnd.random() < 0.35]
    rnd.shuffle(llp)
    host = rnd.choice(list(HOSTS))
    for _ in range(rnd.randint(1, 3)):
        r = rnd.random()
        flags = RTLD_NOW if rnd.random() < 0.8 else (RTLD_LAZY if rnd.random() < 0.7 else RTLD_NOW | RTLD_NOLOAD)
        if r < 0.7:
            ops.append((flags, rnd.choice(NAMES)))
        elif r < 0.9:
            ops.append((flags, f"@{rnd.choice(DIRS)}/{rnd.choice(NAMES)}"))
        else:
            ops.append((flags, "libdltmissing.so"))
    dlib = ""
    if rnd.random() < 0.3:  # some calls made by a library (its DT_RUNPATH / DT_RPATH searched)
        dlib = rnd.choice(list(DLIBS))
        ops = [(f + 1000, n) if rnd.random() < 0.6 else (f, n) for f, n in ops]
    if rnd.random() < 0.15:  # a copy in a glibc-hwcaps subfolder
        d = rnd.choice(DIRS)
        n = rnd.choice(NAMES)
        files[f"{d}/glibc-hwcaps/x86-64-v2/{n}"] = rnd.choice(by_name[n]).key
    return Layout(seed, host, files, llp, ops, dlib)


@dataclass
class Observed:
    lookups: list[tuple[str, list[str]]]  # each bare name searched, and the files tried
    results: list[str]  # per op: "OK path" / "ERR text" / "NULL"
    mapped: list[str] = field(default_factory=list)
    start_error: str = ""
    sers: list[list[str]] = field(default_factory=list)  # the model's: each file's la_objsearch flag


_FIND = re.compile(r"^\s*\d+:\s+find library=(\S+) \[(\d+)\]; searching$")
_TRY = re.compile(r"^\s*\d+:\s+trying file=(.*)$")


def parse_ld_debug(text: str, ns: int = 0) -> list[tuple[str, list[str]]]:
    """Each bare name ld.so searched in namespace `ns` ("find library=NAME [ns]"), with the files tried."""
    out: list[tuple[str, list[str]]] = []
    keep = False
    for line in text.splitlines():
        m = _FIND.match(line)
        if m:
            keep = int(m.group(2)) == ns
            if keep:
                out.append((m.group(1), []))
            continue
        m = _TRY.match(line)
        if m and out and keep:
            out[-1][1].append(m.group(1))
    return out


def place(root: Path, pool: Path, lay: Layout) -> Path:
    L = root / "L"
    if L.exists():
        shutil.rmtree(L)
    for d in (*DIRS, "bin"):
        (L / d).mkdir(parents=True)
    shutil.copy2(pool / lay.host, L / "bin" / "host")
    if lay.dlib:
        (L / "dd").mkdir()
        shutil.copyfile(pool / lay.dlib, L / "dd" / "libdltd.so")
    for rel, key in lay.files.items():
        (L / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pool / key, L / rel)
    return L


def _op_name(L: Path, name: str) -> str:
    return str(L / name[1:]) if name.startswith("@") else name


def host_argv(L: Path, lay: Layout) -> list[str]:
    argv = [str(L / "bin" / "host")]
    for flags, name in lay.ops:
        argv += [f"D{flags - 1000}" if flags >= 1000 else str(flags), _op_name(L, name)]
    return argv


SECURE_PREFIX = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def make_setuid(L: Path) -> None:
    """Secure mode for the host: a set-user-ID root copy run as nobody (AT_SECURE). Needs root."""
    for dirpath, dirs, files in os.walk(L):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o755)
    os.chown(L / "bin" / "host", 0, 0)
    os.chmod(L / "bin" / "host", 0o4755)


def run_real(L: Path, lay: Layout, secure: bool = False) -> Observed:
    """ld.so's answer; `secure`: the host set-user-ID (make_setuid) and run as nobody: AT_SECURE, where
    ld.so ignores LD_LIBRARY_PATH and LD_DEBUG_OUTPUT (so no files tried are compared)."""
    dbg = L / "dbg"
    env = {"PATH": "/usr/bin:/bin", "LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(dbg), "DLT_DLIB": str(L / "dd" / "libdltd.so")}
    if lay.llp:
        env["LD_LIBRARY_PATH"] = ":".join(str(L / d) for d in lay.llp)
    argv = host_argv(L, lay)
    if secure:
        make_setuid(L)
    p = subprocess.run((SECURE_PREFIX if secure else []) + argv, env=env, capture_output=True, text=True, timeout=30)
    text = "".join(f.read_text() for f in L.glob("dbg.*"))
    for f in L.glob("dbg.*"):
        f.unlink()
    obs = Observed(parse_ld_debug(text), [], [])
    if p.returncode == 127 and "error while loading shared libraries" in p.stderr:
        obs.start_error = p.stderr.strip().split("error while loading shared libraries: ", 1)[1]
        return obs
    if p.returncode == 1 and not p.stdout and p.stderr.startswith(argv[0] + ": "):  # a version ld.so checks at start
        obs.start_error = p.stderr.strip()[len(argv[0]) + 2:]
        return obs
    for line in p.stdout.splitlines():
        if line.startswith("MAP "):
            obs.mapped.append(line[4:])
        else:
            obs.results.append("NULL" if line == "ERR (null)" else line)
    return obs


_WORLD: Optional[LiveELFWorld] = None


def run_model(L: Path, lay: Layout, audit: tuple[str, ...] = (), secure: bool = False) -> Observed:
    global _WORLD
    if _WORLD is None:
        _WORLD = LiveELFWorld(probe_live_system())
    world = LiveELFWorld(_WORLD.system)  # a fresh file cache: the layout's files are new
    world._cache = _WORLD._cache
    env = {"PATH": "/usr/bin:/bin"}
    if lay.llp:
        env["LD_LIBRARY_PATH"] = ":".join(str(L / d) for d in lay.llp)
    sim = LinuxSimulator(world, LinuxProcess(str(L / "bin" / "host"), env=env, cwd=str(L), audit=list(audit), secure=secure))
    obs = Observed([], [], [])
    start = sim.start()
    if start.error:
        obs.start_error = start.error
    else:
        dobj = None
        for flags, name in lay.ops:
            caller = None
            if flags >= 1000:
                if dobj is None:
                    d = sim.dlopen(str(L / "dd" / "libdltd.so"), RTLD_NOW)
                    dobj = next(o for o in sim.loaded if o.path == d.path)
                caller, flags = dobj, flags - 1000
            r = sim.dlopen(_op_name(L, name), flags, caller=caller)
            if r.error:
                obs.results.append("ERR " + r.error)
            elif r.cause == "noload":
                obs.results.append("NULL")
            else:
                obs.results.append("OK " + (r.path or ""))
        obs.mapped = [o.path for o in sim.loaded if o.kind != "executable"]
    obs.lookups = [(lk.name, lk.tried) for lk in sim.lookups if lk.how == "search"]
    obs.sers = [[LA_SER_NAMES[g.ser] for g in lk.groups for _ in g.tried] for lk in sim.lookups if lk.how == "search"]
    return obs


def compare(real: Observed, model: Observed, tries: bool = True) -> list[str]:
    """The differences, in words ([] when they agree); tries=False: not the files tried (secure mode)."""
    out: list[str] = []
    if not tries:
        model = Observed(real.lookups, model.results, model.mapped, model.start_error)
    if real.start_error != model.start_error:
        out.append(f"start: ld.so said {real.start_error!r}, the model {model.start_error!r}")
    if real.results != model.results:
        out.append(f"results: ld.so {real.results}, the model {model.results}")
    if real.lookups != model.lookups:
        for i, (a, b) in enumerate(zip(real.lookups, model.lookups)):
            if a != b:
                out.append(f"lookup {i}: ld.so searched {a[0]} trying {a[1]}, the model {b[0]} trying {b[1]}")
                break
        else:
            out.append(f"lookups: ld.so {len(real.lookups)}, the model {len(model.lookups)}: "
                       f"{[n for n, _ in real.lookups]} vs {[n for n, _ in model.lookups]}")
    rm = sorted(m for m in real.mapped if not m.startswith("linux-vdso"))
    mm = sorted(model.mapped)
    if not real.start_error and rm != mm:
        out.append(f"mapped: ld.so {rm}, the model {mm}")
    return out
