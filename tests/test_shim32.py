"""32-bit (x86) programs under 32-bit Wine (Debian's wine32:i386): the x86 shim (dlltrace_shim32.dll,
native/shim/hook_x86.c) is put into them by the x64 launcher (native/common/inject.c: an x86 stub written into
the WoW64 child), by the x86 launcher, and by the CreateProcess hook of either shim for a child of the other
machine (a 32-bit process starts dlltrace_launch64.exe --dlltrace-inject for an x64 child). A program no shim
can enter (arm64, ARM64EC) runs untraced, or is refused by the system, and the launcher's events say which
machine it was (`child_machine`, a `warning`).

Hosts: fixtures/host/loadhost.c built for both machines; the chain top.dll -> mid.dll -> leaf.dll (leaf.dll
nowhere) built 32-bit; an arm64 exe (an x64 loadhost whose PE header says ARM64: Wine refuses it); an
"ARM64EC" exe (an x64 program whose load config carries CHPE metadata, as an ARM64EC image's does: Wine on
x86-64 runs it as x64). In CI a missing wine32 or i686 compiler fails (winetools.require)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

import winetools
from dlltrace import errors
from dlltrace.trace.reader import read_trace
from test_shim import BIN, FIX, HOST, LAUNCHER, ROOT, lines, schema_checked_lines, shim_env  # noqa: F401  (fixture)
from test_shim import w as w64

pytestmark = pytest.mark.wine

LAUNCHER32 = BIN / "dlltrace_launch32.exe"
SHIM32 = BIN / "dlltrace_shim32.dll"
WROOT = "C:\\dlltrace-shim32"
IMAGE_FILE_MACHINE_ARM64 = 0xAA64

# an x64 program whose load config (IMAGE_LOAD_CONFIG_DIRECTORY64, 0xE8 bytes here) has a non-zero
# CHPEMetadataPointer (offset 0xC8): what marks an ARM64EC image; the test points the PE header's load-config
# directory at it (mingw's ld does not)
EC_SOURCE = r"""
#include <stdlib.h>
typedef struct { unsigned int size; unsigned char pad[0xC8 - 4]; unsigned long long chpe; unsigned long long rest[4]; } lc_t;
const lc_t _load_config_used __attribute__((aligned(8), used)) = {sizeof(lc_t), {0}, 0x140001000ULL, {0}};
int main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }
"""


def w(*parts: str) -> str:
    """C:\\dlltrace-shim32\\<parts>"""
    return "\\".join([WROOT, *parts])


HOST32 = w("host32", "loadhost32.exe")


def patch_machine(src: Path, dest: Path, machine: int) -> None:
    """dest: src with its PE header's Machine field replaced."""
    b = bytearray(src.read_bytes())
    at = struct.unpack_from("<I", b, 0x3C)[0]
    struct.pack_into("<H", b, at + 4, machine)
    dest.write_bytes(bytes(b))


def point_load_config(exe: Path, nm: str) -> None:
    """Point the PE32+ header's load-config directory (data directory 10) at the exe's _load_config_used."""
    syms = subprocess.run([nm, str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    (va,) = [int(s.split()[0], 16) for s in syms if s.endswith(" _load_config_used")]
    b = bytearray(exe.read_bytes())
    at = struct.unpack_from("<I", b, 0x3C)[0]
    opt = at + 24
    assert struct.unpack_from("<H", b, opt)[0] == 0x20B  # PE32+
    image_base = struct.unpack_from("<Q", b, opt + 24)[0]
    struct.pack_into("<II", b, opt + 112 + 10 * 8, va - image_base, 0xE8)
    exe.write_bytes(bytes(b))


def build_fixtures(cache: Path) -> Path:
    sources = sorted([FIX / "host" / "loadhost.c", FIX / "host" / "needstop.c", *(FIX / "dlls" / n for n in ("leaf.c", "mid.c", "top.c", "plain.c")),
                      Path(__file__)])

    def build(out: Path) -> None:
        cc = winetools.mingw_compile
        d = FIX / "dlls"
        cc([FIX / "host" / "loadhost.c"], out / "loadhost32.exe", bits=32, extra=["-municode"])
        cc([FIX / "host" / "loadhost.c"], out / "loadhost64.exe", extra=["-municode"])
        cc([d / "leaf.c"], out / "leaf.dll", dll=True, bits=32)
        cc([d / "mid.c", out / "leaf.dll"], out / "mid.dll", dll=True, bits=32)
        cc([d / "top.c", out / "mid.dll"], out / "top.dll", dll=True, bits=32)
        cc([FIX / "host" / "needstop.c", out / "top.dll"], out / "needstop32.exe", bits=32)
        cc([d / "plain.c"], out / "a64.dll", dll=True)
        cc([d / "plain.c"], out / "a32.dll", dll=True, bits=32)
        patch_machine(out / "loadhost64.exe", out / "arm64.exe", IMAGE_FILE_MACHINE_ARM64)
        (out / "ec.c").write_text(EC_SOURCE)
        subprocess.run([winetools.CC64, "-O1", str(out / "ec.c"), "-o", str(out / "ec.exe")], check=True)
        point_load_config(out / "ec.exe", "x86_64-w64-mingw32-nm")

    return winetools.built_once(cache.with_name(f"{cache.name}-{winetools.source_key(*sources)}"), build)


@pytest.fixture(scope="session")
def x86_env(shim_env):
    """shim_env (the shim built, both machines: native/build.sh) plus the 32-bit fixtures at C:\\dlltrace-shim32."""
    winetools.require("wine", "wine32", "mingw64", "mingw32")
    assert LAUNCHER32.is_file() and SHIM32.is_file(), "native/build.sh builds the x86 shim and launcher too"
    built = build_fixtures(winetools.CACHE / "shim32-fixtures")
    root = winetools.drive_c() / "dlltrace-shim32"
    files = {"host32/loadhost32.exe": "loadhost32.exe", "host64/loadhost64.exe": "loadhost64.exe",
             "chain/top.dll": "top.dll", "chain/mid.dll": "mid.dll", "chain/needstop32.exe": "needstop32.exe", "lib/a64.dll": "a64.dll", "lib/a32.dll": "a32.dll",
             "odd/arm64.exe": "arm64.exe", "odd/ec.exe": "ec.exe"}
    for dest, src in files.items():
        p = root / dest
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes((built / src).read_bytes())
    return built


HOST64 = w("host64", "loadhost64.exe")


def launched(tmp_path: Path, launcher: Path, *argv: str, name: str = "t.jsonl"):
    """The launcher (x64 or x86) run on argv, the trace in tmp_path/name: (completed process, Trace)."""
    out = tmp_path / name
    r = winetools.run_launcher(launcher, list(argv), out)
    return r, read_trace(out)


def launcher_events(tr, ev: str) -> list[dict]:
    return [e for e in tr.of(ev) if e.get("by") == "launcher"]


def test_32bit_host_missing_leaf_run_and_report(x86_env, tmp_path, dlltrace_cli):
    """The acceptance case of issue 27: a 32-bit host loading top.dll -> mid.dll -> leaf.dll (missing), traced by
    `dlltrace run --wine` (the x64 launcher, the x86 shim) and reported like the 64-bit one."""
    trace = winetools.traced_run(tmp_path / "t.jsonl", HOST32, ["load", w("chain", "top.dll"), "0x1100"])
    tr = read_trace(trace)
    (pid,) = tr.pids
    proc, env = tr.process(pid), tr.env(pid)
    assert proc["via"] == "launcher" and proc["shim"].lower().endswith("\\dlltrace_shim32.dll")
    assert {"LoadLibraryExW", "LdrLoadDll", "NtOpenFile", "NtCreateSection", "CreateProcessInternalW"} <= set(proc["hooks"])
    assert tr.warnings == [] and not list(tr.of("warning"))  # every hook installed: Wine's i386 prologues decoded
    assert env["machine"] == "x86" and env["exe"].lower() == HOST32.lower()
    (exit_ev,) = launcher_events(tr, "exit")
    assert (exit_ev["code"], exit_ev["child_machine"]) == (126, "x86")
    (load,) = tr.loads()
    assert (load.api, load.name, load.flags, load.error, load.status) == (
        "LoadLibraryExW", w("chain", "top.dll"), 0x1100, 126, 0xC0000135)
    leaf = [p.win_path.lower() for p in load.probes if p.op == "open" and p.win_path.lower().endswith("\\leaf.dll")]
    # Wine's order for 0x1100: DLL_LOAD_DIR (top's folder), APPLICATION_DIR, SYSTEM32 (as the 32-bit process names it)
    assert leaf == [w("chain", "leaf.dll").lower(), w("host32", "leaf.dll").lower(), "c:\\windows\\system32\\leaf.dll"]

    rep = dlltrace_cli("report", "--json", str(trace))
    assert rep.returncode == 0, rep.stderr
    (call,) = json.loads(rep.stdout)["calls"]
    assert call["real_error"] == 126 and call["leaf"]["name"] == "leaf.dll"
    assert call["chain"] == ["top.dll", "mid.dll", "leaf.dll"] and call["leaf"]["parent"] == "mid.dll"
    searched = [c["path"].lower() for c in call["candidates"]]
    assert searched[:2] == [w("chain", "leaf.dll").lower(), w("host32", "leaf.dll").lower()], call["candidates"]
    text = dlltrace_cli("report", str(trace))
    assert text.returncode == 0 and "✗ leaf.dll was not found — it is needed by mid.dll" in text.stdout


def test_32bit_trace_matches_the_schema(x86_env, tmp_path):
    r, tr = launched(tmp_path, LAUNCHER, HOST32, "load", w("chain", "top.dll"), "0x1100", "spawn", HOST64, "exit", "3")
    objs = schema_checked_lines(tmp_path / "t.jsonl")
    assert {"process", "env", "load_begin", "probe", "load_end", "spawn", "exit"} <= {o.get("ev") for o in objs}
    assert [o["child_machine"] for o in objs if o.get("ev") in ("spawn", "exit") and o.get("by") != "shim"] == ["x64", "x86"]


def test_x86_launcher_runs_a_32bit_program(x86_env, tmp_path):
    r, tr = launched(tmp_path, LAUNCHER32, HOST32, "load", w("chain", "top.dll"), "0")
    assert lines(r) == ["load err 126"] and r.returncode == 126
    (pid,) = tr.pids
    assert tr.env(pid)["machine"] == "x86" and tr.process(pid)["via"] == "launcher"
    assert [ld.error for ld in tr.loads()] == [126]
    (exit_ev,) = launcher_events(tr, "exit")
    assert exit_ev["child_machine"] == "x86" and tr.warnings == []


def test_children_across_machines_are_traced(x86_env, tmp_path):
    """x64 -> x86 -> x64: the x64 shim writes x86 code into its 32-bit child; the x86 shim has
    dlltrace_launch64.exe inject its x64 child. Each process writes to the one trace."""
    r, tr = launched(tmp_path, LAUNCHER, HOST64, "spawn", HOST32, "spawn", HOST64, "load", "no_such_x.dll", "0")
    out = lines(r)
    assert out[0] == "load err 126" and out[1].startswith("spawn pid ") and out[2].startswith("spawn pid "), out
    assert r.returncode == 126
    top, mid, low = tr.pids
    assert [tr.env(p)["machine"] for p in (top, mid, low)] == ["x64", "x86", "x64"]
    assert [tr.process(p)["via"] for p in (top, mid, low)] == ["launcher", "spawn", "spawn"]
    assert tr.process(mid)["ppid"] == top and tr.process(low)["ppid"] == mid
    s1, s2 = tr.of("spawn")
    assert (s1["pid"], s1["child_pid"], s1["child_machine"], s1["injected"]) == (top, mid, "x86", True)
    assert (s2["pid"], s2["child_pid"], s2["child_machine"], s2["injected"]) == (mid, low, "x64", True)
    assert s1["reason"] is None and s2["reason"] is None
    assert [ld.error for ld in tr.loads(low)] == [126] and tr.loads(top) == tr.loads(mid) == []
    assert not list(tr.of("warning"))


def test_x86_launcher_32bit_program_with_a_64bit_child(x86_env, tmp_path):
    """The x86 launcher (a 32-bit Windows's) and its 32-bit child's x64 child: the x86 shim has the x64
    launcher of its folder inject it."""
    r, tr = launched(tmp_path, LAUNCHER32, HOST32, "spawn", HOST64, "load", "no_such_y.dll", "0")
    assert r.returncode == 126, lines(r)
    parent, child = tr.pids
    assert (tr.env(parent)["machine"], tr.env(child)["machine"]) == ("x86", "x64")
    (spawn,) = tr.of("spawn")
    assert (spawn["child_machine"], spawn["injected"], spawn["inject_error"]) == ("x64", True, 0)
    assert tr.process(child)["shim"].lower().endswith("\\dlltrace_shim64.dll")
    assert [ld.error for ld in tr.loads(child)] == [126]


def test_a_dll_of_the_other_machine_is_193_in_both_directions(x86_env, tmp_path):
    r, tr = launched(tmp_path, LAUNCHER, HOST32, "load", w("lib", "a64.dll"), "0", "spawn", HOST64, "load", w("lib", "a32.dll"), "0")
    assert lines(r)[0] == "load err 193", lines(r)
    p32, p64 = tr.pids
    assert [(ld.name, ld.error) for ld in tr.loads(p32)] == [(w("lib", "a64.dll"), 193)]
    assert [(ld.name, ld.error) for ld in tr.loads(p64)] == [(w("lib", "a32.dll"), 193)]
    assert (tr.env(p32)["machine"], tr.env(p64)["machine"]) == ("x86", "x64")


def test_an_arm64_program_the_system_refuses_says_its_machine(x86_env, tmp_path):
    """Wine (x86-64) does not start an ARM64 exe: the launcher's launch_error names its machine, and a warning
    says no shim could have entered it; `dlltrace run` fails with one line that says so."""
    exe = w("odd", "arm64.exe")
    r, tr = launched(tmp_path, LAUNCHER, exe, "exit", "3")
    assert r.returncode == 127
    raw = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    (err,) = [o for o in raw if o.get("ev") == "launch_error"]
    assert err["child_machine"] == "arm64" and err["error"] == 193
    (warn,) = [o for o in raw if o.get("ev") == "warning"]
    assert "arm64" in warn["message"] and warn["by"] == "launcher"
    run = winetools.dlltrace("run", "--wine", "-o", "r.jsonl", "--", exe, cwd=tmp_path)
    assert run.returncode == errors.EXIT_NO_COMMAND
    assert run.stderr.count("\n") == 1 and "an arm64 program: no dlltrace shim can enter it" in run.stderr, run.stderr


def test_a_child_the_shim_cannot_enter_runs_untraced_and_says_its_machine(x86_env, tmp_path):
    """An ARM64EC image (here: an x64 one with CHPE metadata, which Wine on x86-64 runs as x64) is not entered:
    the launcher's exit says child_machine arm64ec with a warning naming it; as a child, its spawn event does."""
    r, tr = launched(tmp_path, LAUNCHER, w("odd", "ec.exe"), "7")
    assert r.returncode == 7  # it ran, untraced
    assert tr.pids == []
    (exit_ev,) = launcher_events(tr, "exit")
    assert exit_ev["child_machine"] == "arm64ec"
    raw = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    (warn,) = [o for o in raw if o.get("ev") == "warning"]
    assert warn["message"] == "child not traced: the shim cannot enter an arm64ec process (no dlltrace shim for that machine)"
    assert warn["error"] == 216
    r, tr = launched(tmp_path, LAUNCHER, HOST32, "spawn", w("odd", "ec.exe"), "5", name="c.jsonl")
    assert lines(r) == [lines(r)[0]] and lines(r)[0].endswith(" exit 5") and r.returncode == 5
    (spawn,) = tr.of("spawn")
    assert (spawn["ok"], spawn["injected"], spawn["inject_error"], spawn["child_machine"]) == (True, False, 216, "arm64ec")
    assert spawn["reason"] == "an arm64ec process: no dlltrace shim can enter it"
    assert len(tr.pids) == 1  # the child wrote nothing
    # `dlltrace run` of it is never success: exit 10 (EXIT_NOT_TRACED) and one line that says why, whatever the
    # program's own code; its report says the same, never "every load succeeded"
    run = winetools.dlltrace("run", "--wine", "-o", "u.jsonl", "--", w("odd", "ec.exe"), "0", cwd=tmp_path)
    assert run.returncode == errors.EXIT_NOT_TRACED == 10, run.stderr
    said = [x for x in run.stderr.splitlines() if x.strip()]
    assert len(said) == 1 and "cannot trace ARM64EC processes: ec.exe is one (unsupported)" in said[0], run.stderr
    rep = winetools.dlltrace("report", "u.jsonl", cwd=tmp_path)
    assert "cannot trace ARM64EC processes" in rep.stdout + rep.stderr
    assert "every load succeeded" not in rep.stdout + rep.stderr


def test_without_the_x86_shim_a_32bit_child_runs_untraced_with_a_warning(x86_env, tmp_path):
    """An install with the x64 launcher and shim only: the injection into a 32-bit child is refused (error 2,
    the x86 shim not found beside the x64 one) and said, instead of a stub whose LoadLibraryW fails unseen."""
    alone = winetools.drive_c() / "dlltrace-shim32" / "x64only"
    alone.mkdir(parents=True, exist_ok=True)
    for f in (LAUNCHER, BIN / "dlltrace_shim64.dll"):
        (alone / f.name).write_bytes(f.read_bytes())
    r, tr = launched(tmp_path, alone / LAUNCHER.name, HOST32, "exit", "6")
    assert r.returncode == 6 and tr.pids == []
    (exit_ev,) = launcher_events(tr, "exit")
    assert exit_ev["child_machine"] == "x86"
    raw = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    (warn,) = [o for o in raw if o.get("ev") == "warning"]
    assert (warn["message"], warn["error"]) == ("child not traced: the shim could not be injected", 2)


def test_api_start_in_a_32bit_process_while_other_threads_load(x86_env, tmp_path):
    """The x86 shim loaded late (LoadLibraryW + dlltrace_start, no launcher) while four threads loop in
    LoadLibraryExW: freeze.c freezes them (Eip in the x86 build) around the patching, and every load a worker starts after
    dlltrace_start returned is recorded whole. (No thread is parked inside a prologue here: Wine's i386 Nt*
    stubs replace exactly one 5-byte instruction, so there is no point inside them to park at.)"""
    out = tmp_path / "api.jsonl"
    m = 40
    (winetools.drive_c() / "dlltrace-shim32" / "lib" / "a32b.dll").write_bytes((x86_env / "a32.dll").read_bytes())
    r = winetools.run_wine([HOST32, "apistart", winetools.to_windows(SHIM32), winetools.to_windows(out), "4", str(m),
                            w("lib", "a32b.dll"), w("lib", "missing.dll")])
    out_lines = lines(r)
    assert r.returncode == 0, (out_lines, r.stderr[-2000:])
    assert out_lines[:2] == ["apistart start 0", "apistart park none"]
    workers = [int(x.split()[2]) for x in out_lines[2:]]
    assert len(workers) == 4 and out_lines[2:] == [f"apistart worker {t} after {m}" for t in workers]
    tr = read_trace(out)
    assert tr.warnings == []
    (pid,) = tr.pids
    assert tr.process(pid)["via"] == "loadhost" and tr.env(pid)["machine"] == "x86"
    mine = [e for e in tr.events if e.get("pid") == pid and e.get("seq")]
    assert [e["ev"] for e in mine[:3]] == ["process", "env", "apisets"] and mine[-1]["ev"] == "stats"
    assert mine[-1]["lost"] == 0
    for tid in workers:
        loads = [ld for ld in tr.loads(pid) if ld.tid == tid]
        assert len(loads) >= m and all(ld.finished for ld in loads)
        names = [ld.name for ld in loads]
        assert all(a != b for a, b in zip(names, names[1:]))  # alternating: none lost in between


def test_a_32bit_program_whose_static_import_fails_has_its_machine_in_its_env(x86_env, tmp_path):
    """needstop32.exe imports top.dll -> mid.dll -> leaf.dll (nowhere): it ends before its entry point, so the
    x64 launcher writes its env from its own state (dlltrace_env_snapshot), with the child's machine: x86
    (read from the exe's header; the launcher's own would be x64)."""
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", w("chain", "needstop32.exe"), cwd=tmp_path)
    assert r.returncode == 0xC0000135 & 0xFF, r.stderr
    tr = read_trace(tmp_path / "t.jsonl")
    (pid,) = tr.start_failures()
    assert tr.env(pid)["machine"] == "x86" and tr.env(pid)["modules"] is None
    assert tr.env(pid)["exe"].lower() == w("chain", "needstop32.exe").lower()
    (exit_ev,) = launcher_events(tr, "exit")
    assert exit_ev["child_machine"] == "x86"


def test_a_32bit_program_whose_static_import_fails_is_explained(x86_env, tmp_path, dlltrace_cli):
    r = winetools.dlltrace("run", "--wine", "-o", "t.jsonl", "--", w("chain", "needstop32.exe"), cwd=tmp_path)
    assert "✗ leaf.dll was not found — it is needed by mid.dll" in r.stderr
    rep = dlltrace_cli("report", "--json", "t.jsonl", cwd=tmp_path)
    (call,) = json.loads(rep.stdout)["calls"]
    assert call["chain"] == ["needstop32.exe", "top.dll", "mid.dll", "leaf.dll"] and call["real_error"] == 126
