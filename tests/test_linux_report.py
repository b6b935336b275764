"""The issue's done-when for Linux, through the commands: `dlltrace run` of a real CPython whose
ctypes.CDLL('libcudart.so.11.0') fails passes the exit code (1) through, and `dlltrace report` (JSON,
text, Markdown) names libcudart.so.11.0 as the leaf of the failure the program hit, with every candidate
folder and its rule; a failure the program went past is listed apart (render/linux.py)."""

from __future__ import annotations

import json
import posixpath
import re
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def dlltrace(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("needs gcc (the recorder is built with it)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_run_and_report_name_libcudart_as_the_leaf_with_every_folder_and_its_rule(tmp_path):
    code = "import ctypes; ctypes.CDLL('libcudart.so.11.0')"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]  # the program's own exit code
    assert "OSError: libcudart.so.11.0: cannot open shared object file" in r.stderr  # its own stderr, untouched
    assert "✗ libcudart.so.11.0 was not found" in r.stderr and "trace saved to t.jsonl" in r.stderr
    rep = dlltrace("report", "t.jsonl", "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    fatal = doc["failed"][doc["fatal"]]
    assert fatal["leaf"]["name"] == "libcudart.so.11.0" and fatal["leaf"]["cause"] == "not_found"
    assert fatal["origin"] == "ctypes.CDLL('libcudart.so.11.0')" and fatal["agrees"]
    cands = fatal["candidates"]
    assert len(cands) >= 3 and all(c["path"].endswith("/libcudart.so.11.0") and c["rule"] for c in cands)
    assert [c["path"] for c in cands] == [c["path"] for c in fatal["recorded"]]  # what ld.so really tried
    assert any(c["rule"] == "system search path" for c in cands)
    pkgs = [f["package"] for f in fatal["fixes"] if f["action"] == "install_package"]
    assert pkgs == ["nvidia-cuda-runtime-cu11"]
    assert all("lib-dynload" not in (f["folder"] or "") for f in fatal["fixes"])
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert text.splitlines()[0].startswith("dlltrace ─ 1 failed load")
    assert re.search(r"Where ld\.so looked for libcudart\.so\.11\.0 \(\d+ files in \d+ folders\):", text), text
    # every folder tried is a line, its glibc-hwcaps and legacy hwcap subfolders (tls, x86_64, haswell, and
    # avx512_1 on a CPU that has AVX-512: which ones ld.so tries depends on the machine) counted on its line
    from dlltrace.render.diagnosis import hwcaps_base

    folders = {hwcaps_base(posixpath.dirname(c["path"])) for c in cands}
    assert len(folders) >= 2 and all(f"  {f}  " in text for f in folders), (folders, text)
    md = dlltrace("report", "t.jsonl", "--markdown", cwd=tmp_path).stdout
    assert md.startswith("## dlltrace ─ 1 failed load") and "libcudart.so.11.0 was not found" in md
    a_terminal_gets_the_report_wrapped(tmp_path, text)


def a_terminal_gets_the_report_wrapped(tmp_path: Path, text: str) -> None:
    """On a terminal (here `--color always`, as wide as COLUMNS says) the Linux report is the pipe's text
    wrapped: no line wider than the terminal but a piece no break can narrow, the same unbreakable pieces in
    the same order (no name cut), each continuation indented; a pipe gets the lines whole."""
    from dlltrace.render.wrap import units

    assert max(map(len, text.splitlines())) > 60  # (the pipe's lines are whole: some are wider than 60)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer"), "COLUMNS": "60"}
    narrow = subprocess.run([sys.executable, "-m", "dlltrace", "report", "t.jsonl", "--color", "always"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300).stdout
    assert "\x1b[" not in narrow  # (no style: the Linux report is plain words)
    pieces = [u for line in narrow.splitlines() for u in units(line)]
    assert pieces == [u for line in text.splitlines() for u in units(line)]
    assert all(len(line) <= 60 or len(units(line)) == 1 for line in narrow.splitlines()), narrow
    assert len(narrow.splitlines()) > len(text.splitlines())
    # each line of the pipe's text is narrow lines holding its pieces, in order: the first at its own indent, each
    # continuation indented 2 more than it
    lines, i = narrow.splitlines(), 0
    for line in text.splitlines():
        want, got, lead = units(line), [], len(line) - len(line.lstrip(" "))
        first = True
        while len(got) < len(want) or (first and not want):
            indent = len(lines[i]) - len(lines[i].lstrip(" "))
            assert indent == (lead if first else lead + 2) or (not want and not lines[i].strip()), (line, lines[i])
            got += units(lines[i])
            i, first = i + 1, False
        assert got == want, (line, got)


def test_a_failure_the_program_went_past_is_not_the_failure(tmp_path):
    code = ("import ctypes\ntry:\n    ctypes.CDLL('libnope_optional.so.1')\nexcept OSError:\n    pass\n"
            "ctypes.CDLL('libcudart.so.11.0')")
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    names = [c["name"] for c in doc["failed"]]
    assert names == ["libnope_optional.so.1", "libcudart.so.11.0"] and doc["fatal"] == 1
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert "1 the program went past" in text and "  libnope_optional.so.1  (" in text


def test_an_exception_naming_the_library_by_its_stem_is_the_failure(tmp_path):
    # python-magic 0.4.27's loader with libmagic1 not installed (seen for real): it catches ctypes' OSError and
    # raises an ImportError of its own that names libmagic, not libmagic.so.1; the report said "no failed load
    # explains it" and listed the load as context only, with no fix
    code = ("import ctypes\nfor lib in (None, 'libdltnope_magic.so.1'):\n    if lib is None:\n        continue\n"
            "    try:\n        ctypes.CDLL(lib)\n    except OSError:\n        pass\n"
            "raise ImportError('failed to find libdltnope_magic.  Check your installation')")
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1 and "ImportError: failed to find libdltnope_magic" in r.stderr, r.stderr[-2000:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert [c["name"] for c in doc["failed"]] == ["libdltnope_magic.so.1"] and doc["fatal"] == 0
    assert doc["outcome"]["kind"] == "died_of_load", doc["outcome"]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert text.splitlines()[0] == "dlltrace ─ 1 failed load · t.jsonl", text
    assert "✗ libdltnope_magic.so.1 was not found" in text and "no failed load explains it" not in text


def gcc(*args: str) -> None:
    if shutil.which("gcc") is None:
        if os.environ.get("CI"):
            pytest.fail("needs gcc -- CI has it")
        pytest.skip("needs gcc")
    subprocess.run(["gcc", *args], check=True, capture_output=True)


def test_a_copy_on_ld_library_path_that_lacks_a_symbol_version_gets_that_folder_taken_out(tmp_path):
    # an old libstdc++.so.6 on LD_LIBRARY_PATH (an old toolchain's or environment's) before the system's, seen for
    # real: "version `CXXABI_1.3.9' not found (required by cppext.cpython-311-x86_64-linux-gnu.so)"; the report
    # named the leaf and gave no fix. Here the same with gcc-built libraries: libdltver.so.1 in old/ defines
    # DLTVER_1 only, the one in new/ (the requester's RUNPATH, searched after LD_LIBRARY_PATH) DLTVER_2 too.
    for folder, versions in (("old", ["DLTVER_1"]), ("new", ["DLTVER_1", "DLTVER_2"])):
        (tmp_path / folder).mkdir()
        (tmp_path / f"{folder}.map").write_text("".join(f"{v} {{ global: f_{v}; }};\n" for v in versions))
        (tmp_path / f"{folder}.c").write_text("".join(f"void f_{v}(void) {{}}\n" for v in versions))
        gcc("-shared", "-fPIC", "-o", str(tmp_path / folder / "libdltver.so.1"), "-Wl,-soname,libdltver.so.1",
            f"-Wl,--version-script={tmp_path / f'{folder}.map'}", str(tmp_path / f"{folder}.c"))
    (tmp_path / "other").mkdir()
    (tmp_path / "user.c").write_text("void f_DLTVER_2(void);\nvoid user(void) { f_DLTVER_2(); }\n")
    gcc("-shared", "-fPIC", "-o", str(tmp_path / "libdltuser.so"), str(tmp_path / "user.c"),
        f"-L{tmp_path / 'new'}", "-l:libdltver.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/new")
    code = f"import ctypes; ctypes.CDLL({str(tmp_path / 'libdltuser.so')!r}); print('loaded')"
    env = {**os.environ, "LD_LIBRARY_PATH": f"{tmp_path / 'old'}:{tmp_path / 'other'}"}
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", "t.jsonl", "--", sys.executable, "-c", code],
                       cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT / "tracer")}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "version `DLTVER_2' not found" in r.stderr, r.stderr[-2000:]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert "✗ libdltver.so.1 lacks a symbol version it needs — it is needed by libdltuser.so" in text, text
    fix = f"export LD_LIBRARY_PATH={tmp_path / 'other'}"
    assert (f"    1. Before starting the program:\n       {fix}\n       ({tmp_path / 'old' / 'libdltver.so.1'} lacks "
            "DLTVER_2;") in text, text
    # applied for real, in bash: the program loads
    done = subprocess.run(["bash", "-c", f"{fix}; {shlex.quote(sys.executable)} -c {shlex.quote(code)}"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    (f,) = doc["failed"][doc["fatal"]]["fixes"]
    assert f["action"] == "ld_library_path" and f["verified"] and f["fix"]["value"] == str(tmp_path / "other")


def test_an_object_built_for_a_newer_glibc_is_said_to_need_it(tmp_path):
    """"version `GLIBC_2.99' not found (required by ext.so)": the Linux field test found the leaf right and nothing
    said why nor what to do; no file can add a version to this system's C library. The report now says which glibc
    it needs, which this system has, and the two ways out (loader/linux/fixes.rule_glibc_too_old). Here an object
    built with gcc whose version need is rewritten to GLIBC_2.99 (its hash left: ld.so fails it by name)."""
    (tmp_path / "e.c").write_text('#include <stdio.h>\nvoid hi(void) { puts("hi"); }\n')
    gcc("-shared", "-fPIC", "-o", str(tmp_path / "ext.so"), str(tmp_path / "e.c"))
    data = (tmp_path / "ext.so").read_bytes()
    m = re.search(rb"GLIBC_2\.[0-9.]+\0", data)
    assert m is not None and len(m.group()) >= len(b"GLIBC_2.99\0"), m
    (tmp_path / "ext.so").write_bytes(data[:m.start()] + b"GLIBC_2.99".ljust(len(m.group()), b"\0") + data[m.end():])
    code = f"import ctypes; ctypes.CDLL({str(tmp_path / 'ext.so')!r})"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1 and "version `GLIBC_2.99' not found" in r.stderr, r.stderr[-2000:]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert re.search(r"ext\.so needs glibc 2\.99 \(GLIBC_2\.99\); this system's is 2\.\d+, and no file can add it: "
                     r"install a build of ext\.so made for glibc 2\.\d+ or older \(for a wheel: one tagged "
                     r"manylinux_2_\d+ or lower, often an earlier release\), or run it on a system with glibc 2\.99 or "
                     r"newer", text), text
    assert text.index("\n  Fix\n") < text.index("\n  Dependency tree (the failing branch first):"), text  # (what to do first)
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    (f,) = doc["failed"][doc["fatal"]]["fixes"]
    assert f["action"] == "newer_glibc" and f["fix"]["need"] == "2.99", f
    # the document is report-linux-v1.json's (its fix action enum lacked newer_glibc)
    import jsonschema

    jsonschema.Draft202012Validator(json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "report-linux-v1.json")
                                               .read_text(encoding="utf-8"))).validate(doc)


def test_a_copy_of_a_glibc_library_on_ld_library_path_that_lacks_a_version_gets_that_folder_taken_out(tmp_path):
    """A libanl.so.1 on LD_LIBRARY_PATH that defines GLIBC_2.0 only (a bundled or old toolchain's copy of a glibc
    library) before the system's, which has GLIBC_2.2.5: rule_glibc_too_old took it for this system's glibc and
    said 'ext.so needs glibc 2.2.5 (GLIBC_2.2.5); this system's is 2.0 ... run it on a system with glibc 2.2.5 or
    newer'; the fix is LD_LIBRARY_PATH without that folder (rule_ld_library_path_shadows), which the model checks."""
    (tmp_path / "old").mkdir()
    (tmp_path / "stub").mkdir()
    (tmp_path / "old.map").write_text("GLIBC_2.0 { global: f_old; };\n")
    (tmp_path / "old.c").write_text("void f_old(void) {}\n")
    gcc("-shared", "-fPIC", "-o", str(tmp_path / "old" / "libanl.so.1"), "-Wl,-soname,libanl.so.1",
        f"-Wl,--version-script={tmp_path / 'old.map'}", str(tmp_path / "old.c"))
    # (ext.so needs getaddrinfo_a@GLIBC_2.2.5 of libanl.so.1, as linked against a stub: the system's libanl has it)
    (tmp_path / "stub.map").write_text("GLIBC_2.2.5 { global: getaddrinfo_a; };\n")
    (tmp_path / "stub.c").write_text("int getaddrinfo_a(int m, void *l, int n, void *s) { return 0; }\n")
    gcc("-shared", "-fPIC", "-o", str(tmp_path / "stub" / "libanl.so.1"), "-Wl,-soname,libanl.so.1",
        f"-Wl,--version-script={tmp_path / 'stub.map'}", str(tmp_path / "stub.c"))
    (tmp_path / "ext.c").write_text("int getaddrinfo_a(int, void *, int, void *);\n"
                                    "int use(void) { return getaddrinfo_a(0, 0, 0, 0); }\n")
    gcc("-shared", "-fPIC", "-o", str(tmp_path / "ext.so"), str(tmp_path / "ext.c"), f"-L{tmp_path / 'stub'}",
        "-l:libanl.so.1")
    code = f"import ctypes; ctypes.CDLL({str(tmp_path / 'ext.so')!r}); print('loaded')"
    if subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("this system's libanl.so.1 has no getaddrinfo_a@GLIBC_2.2.5")
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path / "old")}
    r = subprocess.run([sys.executable, "-m", "dlltrace", "run", "-o", "t.jsonl", "--", sys.executable, "-c", code],
                       cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT / "tracer")}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "version `GLIBC_2.2.5' not found" in r.stderr, r.stderr[-2000:]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    assert "needs glibc" not in text, text
    assert (f"    1. Before starting the program:\n       unset LD_LIBRARY_PATH\n       ({tmp_path / 'old' / 'libanl.so.1'} "
            "lacks GLIBC_2.2.5;") in text, text


def test_deps_of_a_so_lists_every_missing_library(tmp_path):
    """`dlltrace deps x.so` on Linux: the DT_NEEDED closure through the ld.so model, each missing library
    (not only the first), exit 1; a .so whose closure loads exits 0."""
    if shutil.which("gcc") is None:
        if os.environ.get("CI"):
            pytest.fail("needs gcc -- CI has it")
        pytest.skip("needs gcc")
    for name in ("a", "b"):
        (tmp_path / f"{name}.c").write_text(f"int {name}(void) {{ return 1; }}\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / f"lib{name}.so"), str(tmp_path / f"{name}.c")],
                       check=True)
    (tmp_path / "top.c").write_text("int a(void); int b(void); int top(void) { return a() + b(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libtop.so"), str(tmp_path / "top.c"),
                    f"-L{tmp_path}", "-la", "-lb"], check=True)
    for name in ("a", "b"):
        (tmp_path / f"lib{name}.so").unlink()  # both gone: neither on any search path
    r = dlltrace("deps", str(tmp_path / "libtop.so"), "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [(p["name"], p["cause"]) for p in doc["problems"]] == [("liba.so", "not_found"), ("libb.so", "not_found")]
    assert all(p["candidates"] for p in doc["problems"])
    ok = dlltrace("deps", "/lib/x86_64-linux-gnu/libc.so.6", cwd=tmp_path)
    assert ok.returncode == 0 and "no problem" in ok.stdout


def test_a_failed_dlsym_is_not_a_failed_load(tmp_path):
    """hasattr() of a ctypes library for an optional function: dlsym fails and sets dlerror, the load
    itself worked (the report said "✗ libuuid.so.1 failed ... undefined symbol")."""
    lib = "libc.so.6"
    code = f"import ctypes; lib = ctypes.CDLL('{lib}'); print(hasattr(lib, 'no_such_function_xyz'))"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-1500:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert [c["name"] for c in doc["failed"]] == [], doc["failed"]


def test_a_failed_dlsym_on_a_library_the_call_just_loaded_is_not_a_failed_load(tmp_path):
    """PyOpenGL 3.1.10's `import OpenGL.GL` loads libOpenGL.so, then asks hasattr(dll, 'FunctionType'): the text of
    that failed dlsym ('/lib/x86_64-linux-gnu/libOpenGL.so: undefined symbol: FunctionType') was taken for the load's
    own (it names the object the call opened, as a dlopen that cannot bind a symbol does), and the report listed
    libOpenGL.so as failed (the field test). A dlopen that fails so unloads what it mapped (LA_ACT_DELETE before its
    dlerror); a load that worked does not, whatever is looked up in it after."""
    if shutil.which("gcc") is None:
        pytest.fail("needs gcc -- CI has it") if os.environ.get("CI") else pytest.skip("needs gcc")
    (tmp_path / "f.c").write_text("int f(void) { return 1; }\n")
    lib = tmp_path / "libfresh.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "f.c")], check=True)
    code = (f"import ctypes; lib = ctypes.CDLL({str(lib)!r}); print(hasattr(lib, 'FunctionType'), lib.f())")
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "False 1", r.stderr[-1500:]
    events = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert any(e.get("ev") == "dlerror" and "undefined symbol: FunctionType" in e.get("text", "") for e in events)
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert [c["name"] for c in doc["failed"] if "libfresh" in c["name"]] == [], doc["failed"]


def test_a_forked_child_s_failed_load_is_reported(tmp_path):
    """os.fork() (multiprocessing's default start on Linux) writes no audit_start: the child is its
    parent's copy (the preload library's fork event), and its failed load is in the report."""
    prog = tmp_path / "fk.py"
    prog.write_text("import ctypes, os, sys\npid = os.fork()\nif pid == 0:\n    ctypes.CDLL('libchildnope.so.2')\n"
                    "    os._exit(0)\n_, st = os.waitpid(pid, 0)\nsys.exit(1 if st else 0)\n")
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, str(prog), cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-1500:]
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert [c["name"] for c in doc["failed"]] == ["libchildnope.so.2"] and doc["fatal"] == 0  # (its exception names it)


def test_a_run_that_exits_0_went_past_every_failed_load(tmp_path):
    code = "import ctypes\ntry:\n    ctypes.CDLL('libnope_optional.so.1')\nexcept OSError:\n    pass\n"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 0
    assert "dlltrace ─ 0 failed loads · 1 the program went past" in r.stderr, r.stderr
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert doc["exit_code"] == 0 and doc["fatal"] is None and doc["went_on"] == [0]


def test_ctrl_c_finishes_the_compressed_trace(tmp_path):
    """Ctrl-C (SIGINT to dlltrace run and the program, as a terminal sends it): the .gz is written, the
    spill gone, exit 130, and the trace reads."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT / "tracer")}
    # (SIGINT's default action first, as a terminal's shell gives it: a test run started in the background by a
    # shell without job control inherits it ignored, and so would dlltrace and the program, Ctrl-C or not)
    dfl = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.executable, sys.argv[1:])"
    p = subprocess.Popen([sys.executable, "-c", dfl,
                          sys.executable, "-m", "dlltrace", "run", "-o", "t.jsonl.gz", "--", sys.executable, "-c",
                          "import ctypes, time; ctypes.CDLL('libnope_before.so.1') if 0 else None; time.sleep(30)"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(3)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err[-1500:]
    assert (tmp_path / "t.jsonl.gz").is_file() and not (tmp_path / "t.jsonl.gz.part").exists()
    rep = dlltrace("report", "t.jsonl.gz", "--json", cwd=tmp_path)
    assert rep.returncode == 0 and json.loads(rep.stdout)["failed"] == []


def test_report_of_a_linux_trace_with_no_process_is_exit_3(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"format": "dlltrace-trace", "version": 1, "platform": "linux"}\n')
    r = dlltrace("report", "t.jsonl", cwd=tmp_path)
    assert r.returncode == 3 and "holds no traced process" in r.stderr and r.stderr.count("\n") == 1


def test_deps_of_a_so_cut_short_is_cannot_read_file_data(tmp_path):
    (tmp_path / "cut.so").write_bytes((Path("/bin/ls")).read_bytes()[:100])
    r = dlltrace("deps", str(tmp_path / "cut.so"), "--json", cwd=tmp_path)
    assert r.returncode == 1
    (p,) = json.loads(r.stdout)["problems"]
    assert "cannot read file data" in p["error"]


def test_a_script_without_a_shebang_runs_as_a_shell_runs_it(tmp_path):
    script = tmp_path / "noshebang.sh"
    script.write_text(f"{sys.executable} -c \"import ctypes; ctypes.CDLL('libnope_sh.so.1')\"\n")
    script.chmod(0o755)
    r = dlltrace("run", "-o", "t.jsonl", "--", str(script), cwd=tmp_path)
    assert r.returncode == 1 and "libnope_sh.so.1 was not found" in r.stderr, r.stderr[-1500:]


def test_folder_groups_show_a_folder_and_its_hwcaps_subfolders_once():
    """glibc tries each folder of the system search path as up to 11 folders (glibc-hwcaps levels, tls,
    x86_64): the report shows the folder once, with how many subfolders were tried, and the RUNPATH's
    object by its file name."""
    from dlltrace.diagnosis.result import Tried as Candidate
    from dlltrace.render.diagnosis import folder_groups, hwcaps_base, rule_tag

    assert hwcaps_base("/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3") == "/lib/x86_64-linux-gnu"
    assert hwcaps_base("/usr/lib/tls/x86_64/x86_64") == "/usr/lib"
    assert hwcaps_base("/opt/app/lib") == "/opt/app/lib"
    sys_dirs = ["glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "tls/x86_64", "tls", "x86_64", ""]
    cands = [Candidate("/opt/app/lib/libx.so.1", "RUNPATH of /opt/app/lib/libapp.so", "not_there")]
    cands += [Candidate(f"/usr/lib/{d}/libx.so.1".replace("//", "/"), "system search path", "not_there") for d in sys_dirs]
    cands += [Candidate("/lib/libx.so.1", "system search path", "wrong_machine")]
    groups = folder_groups(cands)
    assert [(g.folder, g.result, g.subfolders) for g in groups] == [
        ("/opt/app/lib", "not_there", 0), ("/usr/lib", "not_there", 5), ("/lib", "wrong_machine", 0)]
    assert rule_tag(groups[0].rule) == "RUNPATH of libapp.so"


def test_all_explains_the_calls_the_program_went_past_too(tmp_path):
    """`report --all` on a Linux trace: every failed call explained in full, none only listed apart."""
    code = ("import ctypes\ntry:\n    ctypes.CDLL('libnope_optional.so.1')\nexcept OSError:\n    pass\n"
            "ctypes.CDLL('libcudart.so.11.0')")
    assert dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path).returncode == 1
    plain = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    every = dlltrace("report", "t.jsonl", "--all", cwd=tmp_path).stdout
    assert "✗ libnope_optional.so.1 was not found" not in plain and "libnope_optional.so.1" in plain
    assert "✗ libnope_optional.so.1 was not found" in every and "✗ libcudart.so.11.0 was not found" in every
    assert "the program went past them" not in every


def test_calls_that_need_the_same_system_packages_share_the_replays(tmp_path, monkeypatch):
    """Three libraries each needing the same four missing ones, each with a system package (the trace's apt
    answers, written in here): every failed call's chain of packages replays the whole process once a step, and
    the three ask for the same worlds; those replays are made once (10 calls each needing a chain of 24 took 8.3 s
    to report, now 1.0 s). The fixes are the same: one command of the four packages for each."""
    from dlltrace.diagnosis import replay_linux as rl
    from dlltrace.render.fixwords import fix_text

    for i in range(1, 5):
        (tmp_path / f"m{i}.c").write_text(f"int f{i}(void) {{ return {i}; }}\n")
        gcc("-shared", "-fPIC", "-o", str(tmp_path / f"libdltm{i}.so.1"), f"-Wl,-soname,libdltm{i}.so.1",
            str(tmp_path / f"m{i}.c"))
    (tmp_path / "u.c").write_text("int use(void) { return 0; }\n")
    for k in range(1, 4):
        gcc("-shared", "-fPIC", "-o", str(tmp_path / f"libuse{k}.so"), str(tmp_path / "u.c"), f"-L{tmp_path}",
            "-Wl,--no-as-needed", *[f"-l:libdltm{i}.so.1" for i in range(1, 5)])
    for i in range(1, 5):
        (tmp_path / f"libdltm{i}.so.1").unlink()
    code = ("import ctypes\nfor k in (1, 2, 3):\n    try:\n        ctypes.CDLL(f'" + str(tmp_path) +
            "/libuse{k}.so')\n    except OSError:\n        pass\nraise SystemExit(1)\n")
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    events = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    for e in events:
        if e.get("ev") == "elf_system":
            e["packages"] = {f"libdltm{i}.so.1": f"libdltm{i}" for i in range(1, 5)}
    made = []
    real = rl.replay_process
    monkeypatch.setattr(rl, "replay_process", lambda *a, **k: made.append(1) or real(*a, **k))
    failed = [c for c in rl.replay_linux(events) if c.error]
    assert [c.name.rsplit("/", 1)[-1] for c in failed] == ["libuse1.so", "libuse2.so", "libuse3.so"]
    for c in failed:
        assert [fix_text(f).split(" (")[0] for f in c.fixes] == \
            ["apt-get install libdltm1 libdltm2 libdltm3 libdltm4"], c.fixes
    assert len(made) <= 1 + 4 + 2, len(made)  # (the process, its four worlds of packages, the whole-run check)
