"""`dlltrace check` as a CI gate (issue 26, item 1): DLLs resolved against the other wheels given in the same call
and the wheel's Requires-Dist (the real torch 2.5.1 and torchvision 0.20.1 win_amd64 wheels), --allow by name, glob
and dist:NAME, --exclude, --assume-installed, a pure wheel, the GitHub annotations and the JUnit XML checked against
their formats, and Linux wheels against their manylinux policy (the real numpy 2.1.3 manylinux2014 wheel, and small
gcc-built wheels). The real wheels are fetched into ~/.cache/dlltrace-downloads/wheels, pinned by sha256
(realwheels.py); skipped offline, failed in CI."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Optional

import pytest

from test_static import as_json, wheel  # (a --json document checked against static-v1.json; a real wheel)

ROOT = Path(__file__).resolve().parent.parent
REQUIRED_WORDS = "not checked: torch is required but not given; pass its wheel or --assume-installed torch"


def dlltrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)



def record_lines(w: Path) -> list[list[str]]:
    with zipfile.ZipFile(w) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD") and n.count("/") == 1)
        return list(csv.reader(z.read(name).decode().splitlines()))


# --- torch and torchvision (win_amd64) -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """A dist/ folder holding the real torchvision and torch wheels (links to the download cache)."""
    d = tmp_path_factory.mktemp("gate") / "dist"
    d.mkdir()
    for key in ("torch", "torchvision"):
        w = wheel(key)
        (d / w.name).symlink_to(w)
    return d


def test_a_folder_with_torchvision_and_torch_passes_with_only_allow_vcruntime(dist):
    run = dlltrace("check", str(dist), "--allow", "vcruntime", "--json")
    doc = as_json(run)
    assert run.returncode == 0 and doc["ok"], [r["problems"] for r in doc["results"]]
    tv = next(r for r in doc["results"] if "torchvision" in r["target"])
    assert tv["dist"] == "torchvision" and "torch" in tv["requires"]
    rows = {r["dll"].lower(): r for r in tv["dlls"]}
    for name in ("c10.dll", "torch_cpu.dll"):  # (torchvision's _C.pyd and image.pyd import them from torch's wheel)
        assert rows[name]["status"] == "required", rows[name]
        assert rows[name]["provider"]["dist"] == "torch" and rows[name]["provider"]["required"]
        assert rows[name]["provider"]["target"].endswith("torch-2.5.1-cp311-cp311-win_amd64.whl")
    text = dlltrace("check", str(dist), "--allow", "vcruntime")
    assert text.returncode == 0 and "provided by torch (required)" in text.stdout, text.stdout[-3000:]


def test_rule_dll_provider_torchvision_alone_fails_naming_torch():
    tv = wheel("torchvision")
    run = dlltrace("check", str(tv), "--allow", "vcruntime", "--json")
    doc = as_json(run)
    assert run.returncode == 1
    probs = {p["dll"].lower(): p for p in doc["problems"]}
    assert set(probs) == {"c10.dll", "torch_cpu.dll"} and all(p["kind"] == "required_not_given" for p in probs.values())
    assert REQUIRED_WORDS in probs["c10.dll"]["detail"]
    assert sorted(probs["c10.dll"]["needed_by"]) == ["torchvision\\_C.pyd", "torchvision\\image.pyd"]
    text = dlltrace("check", str(tv), "--allow", "vcruntime")
    assert text.returncode == 1 and REQUIRED_WORDS in text.stdout and "FAIL" in text.stdout.splitlines()[-1]
    # --assume-installed torch: the distribution is there, its DLLs pass, said so
    run = dlltrace("check", str(tv), "--assume-installed", "torch", "--json")
    doc = as_json(run)
    assert run.returncode == 0 and {r["dll"].lower(): r["status"] for r in doc["dlls"]}["c10.dll"] == "assumed"
    assert "assuming torch installed" in doc["summary"]


def test_allow_takes_dll_names_globs_and_dist_and_exclude_drops_the_dll():
    tv = str(wheel("torchvision"))
    one = dlltrace("check", tv, "--allow", "c10.dll", "--json")
    doc = as_json(one)
    assert one.returncode == 1 and [p["dll"] for p in doc["problems"]] == ["torch_cpu.dll"]
    assert {r["dll"].lower(): r["status"] for r in doc["dlls"]}["c10.dll"] == "allowed"
    assert dlltrace("check", tv, "--allow", "C10.DLL,torch_*.dll", "-q").returncode == 0  # (case-insensitive glob)
    assert dlltrace("check", tv, "--allow", "dist:Torch", "-q").returncode == 0  # (data/packages.json: torch's DLLs)
    assert dlltrace("check", tv, "--allow", "dist:numpy", "-q").returncode == 1
    run = dlltrace("check", tv, "--exclude", "c10.dll", "--exclude", "torch_cpu*", "--json")
    doc = as_json(run)
    assert run.returncode == 0 and not {"c10.dll", "torch_cpu.dll"} & {r["dll"].lower() for r in doc["dlls"]}
    assert doc["exclude"] == ["c10.dll", "torch_cpu*"]


def test_bad_gate_arguments_are_one_line_exit_2_and_an_unwritable_junit_file_exit_5(tmp_path):
    tv = str(wheel("torchvision"))
    for args in (["--allow", "bogus"], ["--allow", "dist:"]):
        run = dlltrace("check", tv, *args)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stderr.startswith("dlltrace: "), run.stderr
    run = dlltrace("check", tv, "--junit-xml", str(tmp_path / "no" / "such" / "x.xml"))
    assert run.returncode == 5 and run.stderr.startswith("dlltrace: --junit-xml"), run.stderr


# --- a pure wheel ------------------------------------------------------------------------------------------------
def test_rule_nothing_to_check_a_pure_wheel_fails_unless_allowed():
    w = str(wheel("packaging"))
    run = dlltrace("check", w, "--json")
    doc = as_json(run)
    assert run.returncode == 1 and [p["kind"] for p in doc["problems"]] == ["nothing_to_check"]
    assert doc["problems"][0]["detail"].startswith("nothing to check: packaging-24.2-py3-none-any.whl has no PE")
    run = dlltrace("check", w, "--allow-pure")
    assert run.returncode == 0 and run.stdout.startswith("PASS ") and "--allow-pure" in run.stdout


# --- GitHub annotations ------------------------------------------------------------------------------------------
# GitHub's workflow command: ::error file={name},line={line},title={title}::{message}; a property value has %, CR,
# LF, `:` and `,` escaped (%25 %0D %0A %3A %2C), the message %, CR and LF (actions/toolkit command.ts)
_COMMAND = re.compile(r"^::(error|warning|notice) ([^:]*)::(.*)$")
_PROP = re.compile(r"^(file|line|endLine|col|endColumn|title)=([^,:\r\n]*)$")


def parse_annotation(line: str) -> tuple[dict[str, str], str]:
    m = _COMMAND.match(line)
    assert m, line
    props = {}
    for part in m.group(2).split(","):
        pm = _PROP.match(part)
        assert pm, (part, line)
        props[pm.group(1)] = pm.group(2)
    assert "\r" not in m.group(3) and "\n" not in m.group(3)
    unescape = lambda s: s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")  # noqa: E731
    return {k: unescape(v) for k, v in props.items()}, unescape(m.group(3))


def test_github_annotations_one_per_failing_dll_with_the_record_line():
    tv = wheel("torchvision")
    run = dlltrace("check", str(tv), "--format", "github")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[-1].startswith("FAIL ")
    annotations = [parse_annotation(x) for x in lines[:-1]]
    assert len(annotations) == 2
    record = record_lines(tv)
    for props, message in annotations:
        assert props["title"] == "dlltrace check: required not given"
        line = int(props["line"])
        assert record[line - 1][0] == props["file"] == "torchvision/_C.pyd"  # (the first importer, as RECORD lists it)
        assert REQUIRED_WORDS in message and "torchvision/image.pyd" in message
    assert {m.split(":")[0] for _, m in annotations} == {"c10.dll", "torch_cpu.dll"}


def test_github_escapes_what_would_end_or_start_a_command():
    from dlltrace.api import check
    from dlltrace.render.gate import escape_data, escape_property, github_annotations

    assert escape_data("50%\r\nx::y") == "50%25%0D%0Ax::y"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"
    (r,) = check(str(wheel("torchvision")), allow=["vcruntime"])
    r.problems[0].detail = "evil\n::warning file=x::injected 100%"
    r.files[0].member = "torchvision/a,b:c.pyd"
    r.problems[0].needed_by = [r.files[0].path]
    out = github_annotations([r]).splitlines()
    assert len(out) == len(r.problems) + 1 and not any(x.startswith("::warning") for x in out)
    props, message = parse_annotation(out[0])
    assert props["file"] == "torchvision/a,b:c.pyd" and message.endswith("evil\n::warning file=x::injected 100%")


# --- JUnit XML ---------------------------------------------------------------------------------------------------
def check_junit_shape(root: ET.Element) -> None:
    """The shape Jenkins' and GitLab's JUnit readers take: <testsuites> of <testsuite name tests failures errors
    skipped time> of <testcase classname name time> with at most a <failure message type> each; counts consistent."""
    assert root.tag == "testsuites"
    total = failures = 0
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        cases = list(suite)
        assert all(c.tag == "testcase" and c.get("name") and c.get("classname") and c.get("time") for c in cases)
        failed = [c for c in cases if c.find("failure") is not None]
        assert int(suite.get("tests")) == len(cases) and int(suite.get("failures")) == len(failed)
        assert suite.get("errors") == "0" and suite.get("skipped") == "0" and float(suite.get("time")) >= 0
        for c in cases:
            assert all(x.tag == "failure" and x.get("message") and x.get("type") for x in c)
        total += len(cases)
        failures += len(failed)
    assert int(root.get("tests")) == total and int(root.get("failures")) == failures


def test_junit_xml_one_testcase_per_binary_failures_with_their_message(tmp_path, dist):
    tv = wheel("torchvision")
    out = tmp_path / "junit.xml"
    run = dlltrace("check", str(tv), "--junit-xml", str(out), "-q")
    assert run.returncode == 1
    root = ET.parse(out).getroot()
    check_junit_shape(root)
    (suite,) = root
    assert suite.get("name") == tv.name and suite.get("tests") == "8"  # (its 8 PE files)
    failed = {c.get("name"): [f.get("message") for f in c.findall("failure")] for c in suite if c.find("failure") is not None}
    assert set(failed) == {"torchvision/_C.pyd", "torchvision/image.pyd"}
    assert all(len(m) == 2 and all(REQUIRED_WORDS in x for x in m) for m in failed.values())
    assert all(c.get("classname") == "torchvision" for c in suite)
    run = dlltrace("check", str(dist), "--allow", "vcruntime", "--junit-xml", str(out), "-q")
    root = ET.parse(out).getroot()
    check_junit_shape(root)
    assert run.returncode == 0 and root.get("tests") == str(16 + 8) and root.get("failures") == "0"
    pure = dlltrace("check", str(wheel("packaging")), "--junit-xml", str(out), "-q")
    root = ET.parse(out).getroot()
    check_junit_shape(root)
    assert pure.returncode == 1 and root.get("failures") == "1"
    assert root.find("testsuite/testcase/failure").get("type") == "nothing_to_check"


# --- Linux wheels ------------------------------------------------------------------------------------------------
def test_a_real_manylinux_wheel_passes_against_its_policy():
    w = wheel("numpy_manylinux")
    run = dlltrace("check", str(w), "--json")
    doc = as_json(run)
    assert run.returncode == 0 and doc["ok"], doc["problems"]
    assert doc["world"]["policy"] == "manylinux_2_17_x86_64"
    rows = {r["dll"]: r for r in doc["dlls"]}
    # _multiarray_umath finds openblas through its DT_RPATH $ORIGIN/../../numpy.libs; openblas finds libgfortran
    # through $ORIGIN, libgfortran libquadmath (the libraries auditwheel grafted)
    assert rows["libscipy_openblas64_-ff651d7f.so"]["status"] == "bundled"
    assert "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so" in rows["libscipy_openblas64_-ff651d7f.so"]["needed_by"]
    assert rows["libgfortran-040039e1-0352e75f.so.5.0.0"]["status"] == "bundled"
    assert rows["libquadmath-96973f99-934c22de.so.0.0.0"]["status"] == "bundled"
    for lib in ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1", "ld-linux-x86-64.so.2"):
        assert rows[lib]["status"] == "system" and rows[lib]["class"]["kind"] == "policy", rows[lib]
    assert len(doc["files"]) == 22 and all(f["machine"] == "EM_X86_64" for f in doc["files"])
    assert doc["diagnosis"]["platform"] == "linux"


def test_rule_wheel_policy_a_mistagged_manylinux_wheel_fails_on_its_symbol_versions(tmp_path):
    """The same numpy wheel renamed manylinux_2_5 (glibc 2.5): its libraries need newer GLIBC_ and GCC_ versions
    than the policy allows (auditwheel's symbol_versions)."""
    w = tmp_path / "numpy-2.1.3-cp311-cp311-manylinux_2_5_x86_64.whl"
    shutil.copyfile(wheel("numpy_manylinux"), w)
    doc = as_json(run := dlltrace("check", str(w), "--json"))
    assert run.returncode == 1 and doc["world"]["policy"] == "manylinux_2_5_x86_64"
    assert {p["kind"] for p in doc["problems"]} == {"missing_version"}
    words = " ".join(p["detail"] for p in doc["problems"])
    assert "GLIBC_2.14 from libc.so.6: newer than manylinux_2_5 allows (the policy's newest GLIBC: 2.5)" in words


def _need_gcc() -> None:
    """A test that builds with gcc skips without it; in CI it fails."""
    if shutil.which("gcc") is None:
        if os.environ.get("CI"):
            pytest.fail("needs gcc (tools/setup.sh --tests installs it)")
        pytest.skip("needs gcc")


def _build_dir(tmp: Path, name: str = "build") -> Path:
    """A new folder to build C sources in with gcc (_need_gcc)."""
    _need_gcc()
    b = tmp / name
    b.mkdir()
    return b


def _gcc_wheel(tmp: Path, name: str, rpath: bool, extra_needed: bool, requires: str = "",
               tag: str = "manylinux_2_17_x86_64.manylinux2014_x86_64", ship_bar: bool = False,
               bar: str = "libbar.so.1") -> Path:
    """A small Linux wheel: pkg/_ext.so needs libfoo.so (in pkg.libs, found through DT_RPATH
    $ORIGIN/../pkg.libs when `rpath`), and libbar.so.1 (not in it) when `extra_needed`; `ship_bar`: a wheel
    holding only pkg.libs/libbar.so.1; `requires`: its Requires-Dist; `bar`: libbar.so.1's soname (and file name)."""
    b = _build_dir(tmp, f"build-{name}")
    (b / "foo.c").write_text("int foo(void) { return 1; }\n")
    (b / "bar.c").write_text("int bar(void) { return 2; }\n")
    (b / "ext.c").write_text("#include <stdio.h>\nint foo(void);\n" + ("int bar(void);\n" if extra_needed else "")
                             + "int ext(void) { puts(\"ext\"); return foo()" + (" + bar()" if extra_needed else "")
                             + "; }\n")  # (puts: it needs libc.so.6)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "libfoo.so"), str(b / "foo.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{bar}", "-o", str(b / bar), str(b / "bar.c")], check=True)
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(b / "_ext.so"), str(b / "ext.c"), "-L", str(b), "-lfoo"]
    if extra_needed:
        cmd += [str(b / bar)]
    if rpath:
        cmd += ["-Wl,--disable-new-dtags,-rpath,$ORIGIN/../pkg.libs"]
    subprocess.run(cmd, check=True)
    w = tmp / f"{name}-1.0-cp311-cp311-{tag}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + (f"Requires-Dist: {requires}\n" if requires else "")
    members = {"pkg/__init__.py": b"", "pkg/_ext.so": (b / "_ext.so").read_bytes(),
               "pkg.libs/libfoo.so": (b / "libfoo.so").read_bytes(),
               f"{name}-1.0.dist-info/METADATA": meta.encode()}
    if ship_bar:
        members = {f"pkg.libs/{bar}": (b / bar).read_bytes(), f"{name}-1.0.dist-info/METADATA": meta.encode()}
    record = io.StringIO()
    for m in [*members, f"{name}-1.0.dist-info/RECORD"]:
        record.write(f"{m},,\n")
    members[f"{name}-1.0.dist-info/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(w, "w", zipfile.ZIP_DEFLATED) as z:
        for m, data in members.items():
            z.writestr(m, data)
    return w


def test_linux_wheel_rpath_origin_exclude_and_allow(tmp_path):
    good = _gcc_wheel(tmp_path, "good", rpath=True, extra_needed=False)
    doc = as_json(run := dlltrace("check", str(good), "--json"))
    assert run.returncode == 0, doc["problems"]
    assert {r["dll"]: r["status"] for r in doc["dlls"]}["libfoo.so"] == "bundled"
    # no DT_RPATH: libfoo.so is in the wheel, where _ext.so's search does not look
    norpath = _gcc_wheel(tmp_path, "norpath", rpath=False, extra_needed=False)
    doc = as_json(run := dlltrace("check", str(norpath), "--json"))
    assert run.returncode == 1 and [p["kind"] for p in doc["problems"]] == ["missing"]
    assert "is in the wheel at pkg.libs/libfoo.so, a folder its search does not reach" in doc["problems"][0]["detail"]
    # libbar.so.1 is nowhere: not allowed; --exclude drops it; --allow (a glob) lets it through, listed
    bar = _gcc_wheel(tmp_path, "bar", rpath=True, extra_needed=True)
    doc = as_json(run := dlltrace("check", str(bar), "--json"))
    assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [("not_allowed", "libbar.so.1")]
    assert "not a manylinux_2_17 system library" in doc["problems"][0]["detail"]
    doc = as_json(run := dlltrace("check", str(bar), "--exclude", "libbar.so.1", "--json"))
    assert run.returncode == 0 and "libbar.so.1" not in {r["dll"] for r in doc["dlls"]}
    doc = as_json(run := dlltrace("check", str(bar), "--allow", "libbar.so.*", "--json"))
    assert run.returncode == 0 and {r["dll"]: r["status"] for r in doc["dlls"]}["libbar.so.1"] == "allowed"
    gh = dlltrace("check", str(bar), "--format", "github")
    (ann,) = [parse_annotation(x) for x in gh.stdout.splitlines() if x.startswith("::")]
    assert ann[0]["file"] == "pkg/_ext.so" and ann[0]["line"] == "2"  # (RECORD's second line)


def test_linux_wheels_given_together_and_a_glibc_build_tagged_musllinux(tmp_path):
    """A library another Linux wheel given in the same call installs where the search looks: `given`, or
    `required` when Requires-Dist names it; a glibc build tagged musllinux needs libc.so.6, which the musllinux
    policy does not hold (its C library is libc.musl-x86_64.so.1)."""
    bar = _gcc_wheel(tmp_path, "bar", rpath=True, extra_needed=True)
    barlib = _gcc_wheel(tmp_path, "barlib", rpath=True, extra_needed=False, ship_bar=True)
    doc = as_json(run := dlltrace("check", str(bar), str(barlib), "--json"))
    assert run.returncode == 0, doc
    row = {r["dll"]: r for r in doc["results"][0]["dlls"]}["libbar.so.1"]
    assert row["status"] == "given" and row["provider"] == {"dist": "barlib", "target": str(barlib), "required": False}
    (tmp_path / "req").mkdir()
    bar_req = _gcc_wheel(tmp_path / "req", "bar", rpath=True, extra_needed=True, requires="BarLib (>=1.0)")
    doc = as_json(dlltrace("check", str(bar_req), str(barlib), "--json"))
    assert {r["dll"]: r for r in doc["results"][0]["dlls"]}["libbar.so.1"]["status"] == "required"
    assert doc["results"][0]["requires"] == ["barlib"]
    alone = as_json(dlltrace("check", str(bar_req), "--json"))
    assert "bar requires barlib, not given" in alone["problems"][0]["detail"]
    (tmp_path / "musl").mkdir()
    musl = _gcc_wheel(tmp_path / "musl", "m", rpath=True, extra_needed=False, tag="musllinux_1_2_x86_64")
    doc = as_json(run := dlltrace("check", str(musl), "--json"))
    assert run.returncode == 1 and doc["world"]["policy"] == "musllinux_1_2_x86_64"
    assert ("not_allowed", "libc.so.6") in {(p["kind"], p["dll"]) for p in doc["problems"]}


def test_rule_soname_provider(tmp_path):
    """A Linux wheel's extension needs libcudart.so.12, which it does not ship: with nvidia-cuda-runtime-cu12 in its
    Requires-Dist it is that distribution's (required, not given: pass its wheel; --assume-installed lets it through,
    as --allow does by its distribution's name); without, it is not allowed, as any library nobody is known to ship."""
    req = _gcc_wheel(tmp_path, "cu", rpath=True, extra_needed=True, bar="libcudart.so.12",
                     requires="nvidia-cuda-runtime-cu12==12.4.127")
    doc = as_json(run := dlltrace("check", str(req), "--json"))
    assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [
        ("required_not_given", "libcudart.so.12")], doc["problems"]
    assert "nvidia-cuda-runtime-cu12 is required but not given" in doc["problems"][0]["detail"]
    row = {r["dll"]: r for r in doc["dlls"]}["libcudart.so.12"]
    assert row["status"] == "required_not_given" and row["provider"]["dist"] == "nvidia-cuda-runtime-cu12"
    doc = as_json(run := dlltrace("check", str(req), "--assume-installed", "nvidia-cuda-runtime-cu12", "--json"))
    assert run.returncode == 0 and {r["dll"]: r["status"] for r in doc["dlls"]}["libcudart.so.12"] == "assumed"
    doc = as_json(run := dlltrace("check", str(req), "--allow", "dist:nvidia-cuda-runtime-cu12", "--json"))
    assert run.returncode == 0 and {r["dll"]: r["status"] for r in doc["dlls"]}["libcudart.so.12"] == "allowed"
    (tmp_path / "noreq").mkdir()
    plain = _gcc_wheel(tmp_path / "noreq", "cu", rpath=True, extra_needed=True, bar="libcudart.so.12")
    doc = as_json(run := dlltrace("check", str(plain), "--json"))
    assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [("not_allowed", "libcudart.so.12")]


def test_rule_marker_holds(tmp_path):
    """A Requires-Dist whose environment marker does not hold for the wheel's Python and platform is not the wheel's
    requirement (pyzbar 0.1.9's `enum34; python_version=="2.7"` made `check` say "pyzbar requires enum34, pathlib,
    not given"; torch's Windows wheel lists its Linux-only nvidia-* wheels); a marker it cannot decide holds, as
    before markers were read. Then check: a Linux wheel whose libcudart.so.12 is nvidia-cuda-runtime-cu12's is
    required_not_given only when the marker holds on Linux; an abi3 wheel's python_version is its tag's Python or any
    later one."""
    from dlltrace.worlds.static import marker_environment, parse_requires_dist, rule_marker_holds

    win, lin = marker_environment("3.11", "windows", "x64"), marker_environment("3.9", "linux", "x86_64")
    cases = [('python_version == "2.7"', False, False),
             ('platform_system == "Linux" and platform_machine == "x86_64"', False, True),
             ("sys_platform == 'win32'", True, False),
             ('python_version < "3.10"', False, True),
             ('python_version >= "3.8" or extra == "x"', True, True),
             ('(os_name == "nt" or os_name == "posix") and implementation_name == "cpython"', True, True),
             ('"linux" in sys_platform', False, True),
             ('sys_platform not in "darwin cygwin"', True, True),
             ('python_full_version >= "3.11.2"', True, True),  # (not known: holds)
             ('python_version ~= "3.8"', True, True),  # (not decided: holds)
             ('platform_system == "Darwin" and python_full_version >= "3.9"', False, False),  # (false and unknown)
             ("python_version <", True, True), ("((", True, True)]  # (unreadable: holds)
    for marker, on_windows, on_linux in cases:
        assert (rule_marker_holds(marker, win), rule_marker_holds(marker, lin)) == (on_windows, on_linux), marker
    assert rule_marker_holds('sys_platform == "win32"', marker_environment("3.11", "any")) is True  # (no platform)
    assert parse_requires_dist('enum34 (>=1.1.6) ; python_version=="2.7"', win) is None
    assert parse_requires_dist('enum34 (>=1.1.6) ; python_version=="2.7"') == "enum34"  # (no environment: as before)
    assert parse_requires_dist("Pillow (>=3.2.0) ; extra == 'scripts'", win) is None
    either = 'importlib-metadata; python_version < "3.8" or extra == "docs"'  # (an extra's, or an old Python's)
    assert parse_requires_dist(either, marker_environment("3.7", "linux")) == "importlib-metadata"
    assert parse_requires_dist(either, win) is None
    for marker, required in (('platform_system == "Windows"', False), ('platform_system == "Linux"', True)):
        (tmp_path / marker[-8:-1]).mkdir()
        wheel = _gcc_wheel(tmp_path / marker[-8:-1], "cu", rpath=True, extra_needed=True, bar="libcudart.so.12",
                           requires=f"nvidia-cuda-runtime-cu12==12.4.127; {marker}")
        doc = as_json(run := dlltrace("check", str(wheel), "--json"))
        assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [
            ("required_not_given" if required else "not_allowed", "libcudart.so.12")], (marker, doc["problems"])
    # (an abi3 wheel, cp38-abi3, is for any Python from 3.8 on, a py3-none one for any: python_version is decided only
    # when it is so for each; a requirement pip installs with it on 3.12 is its requirement, not the model's 3.8's)
    abi3, py3 = marker_environment("", "windows", "x64", floor="3.8"), marker_environment("", "windows", "x64", floor="3")
    cases = [('python_version == "2.7"', False, False), ('python_version < "3.8"', False, True),
             ('python_version >= "3.10"', True, True), ('python_version < "3.10"', True, True),
             ('"3.7" < python_version', True, True), ('python_version <= "3.7"', False, True),
             ('python_version < "3"', False, False), ('python_version >= "3.10" and os_name == "posix"', False, False)]
    for marker, of_abi3, of_py3 in cases:
        assert (rule_marker_holds(marker, abi3), rule_marker_holds(marker, py3)) == (of_abi3, of_py3), marker
    for python, marker, required in (("cp38-abi3", 'python_version >= "3.10"', True),
                                     ("cp38-abi3", 'python_version < "3.8"', False)):
        (tmp_path / python / marker[-5:-1]).mkdir(parents=True)
        built = _gcc_wheel(tmp_path / python / marker[-5:-1], "cu", rpath=True, extra_needed=True,
                           bar="libcudart.so.12", requires=f"nvidia-cuda-runtime-cu12==12.4.127; {marker}")
        wheel = built.rename(built.with_name(built.name.replace("cp311-cp311", python)))
        doc = as_json(run := dlltrace("check", str(wheel), "--json"))
        assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [
            ("required_not_given" if required else "not_allowed", "libcudart.so.12")], (python, marker, doc["problems"])


def test_rule_soname_provider_of_an_older_cuda(tmp_path):
    """A soname two CUDA majors' packages ship (libcudnn.so.8: nvidia-cudnn-cu11 and -cu12) is the one the wheel's
    Requires-Dist names: a CUDA 11 wheel's is nvidia-cudnn-cu11, required and not given, or allowed by that name."""
    req = _gcc_wheel(tmp_path, "cu", rpath=True, extra_needed=True, bar="libcudnn.so.8", requires="nvidia-cudnn-cu11")
    doc = as_json(run := dlltrace("check", str(req), "--json"))
    assert run.returncode == 1 and [(p["kind"], p["dll"]) for p in doc["problems"]] == [
        ("required_not_given", "libcudnn.so.8")], doc["problems"]
    assert {r["dll"]: r for r in doc["dlls"]}["libcudnn.so.8"]["provider"]["dist"] == "nvidia-cudnn-cu11"
    doc = as_json(run := dlltrace("check", str(req), "--allow", "dist:nvidia-cudnn-cu11", "--json"))
    assert run.returncode == 0, doc["problems"]


def _grafted_pair(tmp_path: Path, libs: Path) -> Path:
    """libs/liba.so (no RPATH) needing libs/libb.so, built with gcc, as auditwheel grafts them; and tmp_path/e.c,
    an extension's source calling liba's fa(). Returns libs."""
    (tmp_path / "b.c").write_text("int fb(void) { return 2; }\n")
    (tmp_path / "a.c").write_text("int fb(void);\nint fa(void) { return fb(); }\n")
    (tmp_path / "e.c").write_text("int fa(void);\nint ext(void) { return fa(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libb.so", "-o", str(libs / "libb.so"), str(tmp_path / "b.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,liba.so", "-o", str(libs / "liba.so"), str(tmp_path / "a.c"),
                    "-L", str(libs), "-lb"], check=True)
    return libs


def test_static_roots_a_grafted_library_is_loaded_as_its_extension_loads_it(tmp_path):
    """auditwheel grafts libraries into <pkg>.libs and gives the extension DT_RPATH $ORIGIN/../pkg.libs; a grafted
    library has none of its own (scipy.libs/libgfortran needs libquadmath; pillow.libs/libtiff needs libjpeg): ld.so
    finds its needs through the DT_RPATH of the extension that loaded it. check dlopens the extensions first and
    a library they loaded is no root of its own (loader/linux/static.py static_roots): the wheel passes, as `import` works for real here; with
    DT_RUNPATH on the extension (not searched for another object's needs) the same layout fails, in check and for
    real. Before, every object was a root: scipy, pillow, h5py, shapely, opencv-python-headless ... 1.14.1's real
    manylinux wheels failed with 'missing'."""
    b = _grafted_pair(_build_dir(tmp_path), _build_dir(tmp_path, "libs"))
    ext = "_ext.cpython-311-x86_64-linux-gnu.so"
    results = {}
    for tags in ("--disable-new-dtags", "--enable-new-dtags"):  # DT_RPATH, DT_RUNPATH
        name = "rpath" if tags == "--disable-new-dtags" else "runpath"
        built = tmp_path / "build" / f"{name}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(built), str(tmp_path / "build" / "e.c"), "-L", str(b), "-la",
                        f"-Wl,{tags},-rpath,$ORIGIN/../pkg.libs"], check=True)
        members = {f"pkg/{ext}": built.read_bytes(), "pkg.libs/liba.so": (b / "liba.so").read_bytes(),
                   "pkg.libs/libb.so": (b / "libb.so").read_bytes(),
                   f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()}
        w = tmp_path / f"{name}-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
        site = tmp_path / f"site-{name}"
        with zipfile.ZipFile(w, "w") as z:
            for m, data in members.items():
                z.writestr(m, data)
                (site / m).parent.mkdir(parents=True, exist_ok=True)
                (site / m).write_bytes(data)
        real = [subprocess.run([sys.executable, "-c", "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\n"
                                "    print('ok')\nexcept OSError:\n    print('fails')\n", str(p)],
                               capture_output=True, text=True).stdout.strip()
                for p in (site / "pkg" / ext, site / "pkg.libs" / "liba.so")]  # (each alone, in a process of its own)
        doc = as_json(run := dlltrace("check", str(w), "--json"))
        results[name] = (real, run.returncode, [(p["kind"], p["dll"], p["needed_by"]) for p in doc["problems"]])
    # the real ld.so: the extension loads with DT_RPATH (liba.so alone, by path, does not), not with DT_RUNPATH
    assert results["rpath"] == (["ok", "fails"], 0, []), results
    assert results["runpath"] == (["fails", "fails"], 1, [("missing", "libb.so", ["pkg.libs/liba.so"])]), results


def test_rule_optional_member_qt_plugins_of_a_linux_wheel(tmp_path):
    """A Linux wheel's Qt plugins (PySide6/Qt/plugins/*, under the prefix of PySide6/Qt/lib/libQt6Core.so.6: data/
    loaders.json qt_plugins) are loaded only on demand: a library only they need (libpq.so.5 for the PostgreSQL SQL
    driver) is `optional` and the wheel passes; the X11 platform plugin (plugins/platforms/libqxcb.so) is no
    option; without the QtCore library nothing is."""
    b = _build_dir(tmp_path)
    (b / "pq.c").write_text("int PQping(void) { return 0; }\n")
    (b / "core.c").write_text("int core(void) { return 1; }\n")
    (b / "drv.c").write_text("int PQping(void);\nint drv(void) { return PQping(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libpq.so.5", "-o", str(b / "libpq.so.5"), str(b / "pq.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libQt6Core.so.6", "-o", str(b / "core.so"), str(b / "core.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "drv.so"), str(b / "drv.c"), str(b / "libpq.so.5")], check=True)

    def wheel_of(name: str, members: dict[str, Path]) -> Path:
        w = tmp_path / f"{name}-1.0-cp39-abi3-manylinux_2_28_x86_64.whl"
        with zipfile.ZipFile(w, "w") as z:
            for m, src in members.items():
                z.writestr(m, src.read_bytes())
            z.writestr(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        return w

    core = {"PySide6/Qt/lib/libQt6Core.so.6": b / "core.so"}
    doc = as_json(run := dlltrace("check", str(wheel_of("plugins", {**core, "PySide6/Qt/plugins/sqldrivers/libqsqlpsql.so":
                                                                   b / "drv.so"})), "--json"))
    rows = {r["dll"]: r for r in doc["dlls"]}
    assert run.returncode == 0 and rows["libpq.so.5"]["status"] == "optional", (doc["problems"], rows)
    assert rows["libpq.so.5"]["optional_by"] == "qt_plugins" and "1 library only optional files need" in doc["summary"]
    # the same members under plugins-1.0.data/platlib/ (pip installs them to the same place): the same verdict
    doc = as_json(run := dlltrace("check", str(wheel_of("plugins", {
        f"plugins-1.0.data/platlib/{m}": src for m, src in {**core, "PySide6/Qt/plugins/sqldrivers/libqsqlpsql.so":
                                                             b / "drv.so"}.items()})), "--json"))
    assert run.returncode == 0 and {r["dll"]: r["status"] for r in doc["dlls"]}["libpq.so.5"] == "optional", doc
    doc = as_json(run := dlltrace("check", str(wheel_of("xcb", {**core, "PySide6/Qt/plugins/platforms/libqxcb.so":
                                                               b / "drv.so"})), "--json"))
    assert run.returncode == 1 and [p["dll"] for p in doc["problems"]] == ["libpq.so.5"], doc["problems"]
    doc = as_json(run := dlltrace("check", str(wheel_of("nocore", {"PySide6/Qt/plugins/sqldrivers/libqsqlpsql.so":
                                                                  b / "drv.so"})), "--json"))
    assert run.returncode == 1 and [p["dll"] for p in doc["problems"]] == ["libpq.so.5"], doc["problems"]


def _gcc_lib(out: Path, name: str, needs: tuple[str, ...] = (), flags: tuple[str, ...] = (), soname: bool = True) -> None:
    """A shared object defining f_<name>() that calls f_<need>() of each library in `needs` (linked from out's folder)."""
    src = out.parent / f"{out.name}.c"
    src.write_text("".join(f"int f_{n}(void);\n" for n in needs)
                   + f"int f_{name}(void) {{ return 1{''.join(f' + f_{n}()' for n in needs)}; }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), *([f"-Wl,-soname,{out.name}"] if soname else []),
                    "-L", str(out.parent), *[f"-l{n}" for n in needs], *flags], check=True)
    src.unlink()


def _ctypes_loads(p: Path) -> str:
    """The real ld.so's answer for `p` dlopened by a fresh Python (ctypes, RTLD_NOW as import): 'ok' or 'fails'."""
    return subprocess.run([sys.executable, "-c", "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\n"
                           "    print('ok')\nexcept OSError:\n    print('fails')\n", str(p)],
                          capture_output=True, text=True).stdout.strip()


def _zip_site(site: Path, w: Path, name: str) -> Path:
    with zipfile.ZipFile(w, "w") as z:
        for p in sorted(site.rglob("*")):
            if p.is_file():
                z.write(p, str(p.relative_to(site)))
        z.writestr(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    return w


def test_static_roots_a_bare_extension_is_an_extension(tmp_path):
    """importlib takes a bare x.so as an extension module too (EXTENSION_SUFFIXES ends with '.so': SWIG's and
    CMake's, the real pymupdf 1.25.0 wheel's pymupdf/_mupdf.so): pkg/zext.so (DT_RPATH $ORIGIN/lib) loads
    pkg/lib/libhelper.so, which has no RPATH and finds libdep.so through zext's. `import pkg.zext` works for real,
    libhelper.so alone does not: check passes and deps FOLDER lists libhelper.so as reached (before: zext.so sorted
    after pkg/lib/ and libhelper.so was loaded alone first, 'missing libdep.so')."""
    _need_gcc()
    from dlltrace.loader.linux.static import static_roots

    site = tmp_path / "site"
    lib = site / "pkg" / "lib"
    lib.mkdir(parents=True)
    _gcc_lib(lib / "libdep.so", "dep")
    _gcc_lib(lib / "libhelper.so", "helper", ("dep",))
    _gcc_lib(site / "pkg" / "zext.so", "zext", ("helper",), ("-L", str(lib), "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib"),
             soname=False)
    assert [_ctypes_loads(p) for p in (site / "pkg" / "zext.so", lib / "libhelper.so")] == ["ok", "fails"]
    w = _zip_site(site, tmp_path / "bare-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "bare")
    doc = as_json(run := dlltrace("check", str(w), "--json"))
    assert run.returncode == 0 and doc["problems"] == [], doc["problems"]
    run = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(site), "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    doc = json.loads(run.stdout)
    assert run.returncode == 0 and [o["file"] for o in doc["objects"]] == ["pkg/zext.so"], doc
    assert {r["file"] for r in doc["reached"]} == {"pkg/lib/libhelper.so", "pkg/lib/libdep.so"}, doc["reached"]
    # (a library named lib*.so is no extension; the tagged names are; .libs last)
    assert static_roots(["p/lib/libz.so", "p.libs/liba.so", "p/zext.so", "p/_b.abi3.so", "p/libx.so"]) == \
        ["p/_b.abi3.so", "p/zext.so", "p/lib/libz.so", "p/libx.so", "p.libs/liba.so"]


def test_static_roots_a_library_reached_by_an_extension_that_fails(tmp_path):
    """An extension whose load fails still reaches the grafted libraries it loads through its DT_RPATH: they are
    not loaded alone after it (each alone fails for real, 'libb.so: cannot open shared object file', a problem the
    package does not have). check: _ext needs libw.so (32-bit, before liba.so in its DT_NEEDED) and liba.so ->
    libb.so: the one problem is libw.so's wrong machine (before: also 'missing libb.so needed by liba.so', the load
    stopping at libw.so before mapping liba.so). deps FOLDER: _ext needs VERS_2 of libv.so, which defines VERS_1:
    the one problem is that version (before: also liba.so's libb.so, its closure not counted as reached)."""
    _need_gcc()
    ext = "_ext.cpython-311-x86_64-linux-gnu.so"
    rpath = "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../pkg.libs"
    build = tmp_path / "build"
    build.mkdir()
    # check: a 32-bit libw.so in pkg.libs, the first need of the extension
    site = tmp_path / "site-w"
    libs = site / "pkg.libs"
    libs.mkdir(parents=True)
    _gcc_lib(libs / "libb.so", "b")
    _gcc_lib(libs / "liba.so", "a", ("b",))
    _gcc_lib(build / "libw.so", "w")
    (site / "pkg").mkdir()
    _gcc_lib(site / "pkg" / ext, "ext", ("w", "a"), ("-L", str(build), "-L", str(libs), rpath), soname=False)
    (build / "w32.c").write_text("int f_w(void) { return 1; }\n")
    subprocess.run(["gcc", "-m32", "-fPIC", "-c", "-o", str(build / "w32.o"), str(build / "w32.c")], check=True)
    subprocess.run(["ld", "-m", "elf_i386", "-shared", "-soname", "libw.so", "-o", str(libs / "libw.so"),
                    str(build / "w32.o")], check=True)
    assert [_ctypes_loads(p) for p in (site / "pkg" / ext, libs / "liba.so")] == ["fails", "fails"]
    w = _zip_site(site, tmp_path / "w-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "w")
    doc = as_json(run := dlltrace("check", str(w), "--json"))
    assert run.returncode == 1 and {(p["kind"], p["dll"]) for p in doc["problems"]} == {("wrong_machine", "libw.so")}, \
        doc["problems"]
    # deps FOLDER: a version the extension needs and libv.so does not define
    site = tmp_path / "site-v"
    libs = site / "pkg.libs"
    libs.mkdir(parents=True)
    (site / "pkg").mkdir()
    _gcc_lib(libs / "libb.so", "b")
    _gcc_lib(libs / "liba.so", "a", ("b",))
    for v, where in (("VERS_2", build), ("VERS_1", libs)):
        (build / f"{v}.map").write_text(f"{v} {{ global: f_v; local: *; }};\n")
        _gcc_lib(where / "libv.so", "v", (), (f"-Wl,--version-script,{build / f'{v}.map'}",))
    _gcc_lib(site / "pkg" / ext, "ext", ("a", "v"), ("-L", str(build), "-L", str(libs), rpath), soname=False)
    assert [_ctypes_loads(p) for p in (site / "pkg" / ext, libs / "liba.so")] == ["fails", "fails"]
    run = subprocess.run([sys.executable, "-m", "dlltrace", "deps", str(site), "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    doc = json.loads(run.stdout)
    assert run.returncode == 1 and [(o["file"], [p["cause"] for p in o["problems"]]) for o in doc["objects"]] == \
        [(f"pkg/{ext}", ["missing_version"])], doc["objects"]
    assert {r["file"] for r in doc["reached"]} == {"pkg.libs/liba.so", "pkg.libs/libb.so", "pkg.libs/libv.so"}


def test_rule_optional_member_a_plugins_miss_is_not_a_later_roots(tmp_path):
    """A Qt plugin whose RPATH misses a library of the wheel is no problem (rule_optional_member: its host loaded
    it), but that option is the plugin's alone: PySide6.libs/libgraft.so, loaded after it, has no RPATH and misses
    the same PySide6/Qt/lib/libhelper.so (for real: ctypes fails), and check says so, as it does without the plugin
    (before: the plugin's stand-in stayed on LD_LIBRARY_PATH for the roots after it, and the wheel passed)."""
    _need_gcc()
    site = tmp_path / "site"
    qt = site / "PySide6" / "Qt"
    for d in (qt / "lib", qt / "plugins" / "sqldrivers", site / "PySide6.libs"):
        d.mkdir(parents=True)
    _gcc_lib(qt / "lib" / "libQt6Core.so.6", "core")
    _gcc_lib(qt / "lib" / "libhelper.so", "helper")
    _gcc_lib(qt / "plugins" / "sqldrivers" / "libqsqlx.so", "qsqlx", ("helper",), ("-L", str(qt / "lib")))
    _gcc_lib(site / "PySide6.libs" / "libgraft.so", "graft", ("helper",), ("-L", str(qt / "lib")))
    assert _ctypes_loads(site / "PySide6.libs" / "libgraft.so") == "fails"
    for name in ("plugin", "noplugin"):
        if name == "noplugin":
            shutil.rmtree(qt / "plugins")
        w = _zip_site(site, tmp_path / f"{name}-1.0-cp39-abi3-manylinux_2_28_x86_64.whl", name)
        doc = as_json(run := dlltrace("check", str(w), "--json"))
        assert run.returncode == 1 and [(p["kind"], p["dll"], p["needed_by"]) for p in doc["problems"]] == \
            [("missing", "libhelper.so", ["PySide6.libs/libgraft.so"])], (name, doc["problems"])


def test_a_grafted_library_whose_version_ends_in_a_letter(tmp_path):
    """auditwheel keeps a library's name with its version: OpenSSL 1.0.2's libssl.so.1.0.2k (pymssql 2.3.2's
    manylinux wheel grafts libssl-cd1d6220.so.1.0.2k into pymssql.libs). Such a member is a shared object of the
    wheel: check finds it where the extension's RPATH looks, and deps of the wheel unpacks it (before: neither saw
    it, and both said the library was missing: 'not allowed')."""
    b = _build_dir(tmp_path)
    soname = "libssl-cd1d6220.so.1.0.2k"
    (b / "ssl.c").write_text("int SSL_new(void) { return 0; }\n")
    (b / "ext.c").write_text("int SSL_new(void);\nint ext(void) { return SSL_new(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(b / soname), str(b / "ssl.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "ext.so"), str(b / "ext.c"), str(b / soname),
                    "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../pkg.libs"], check=True)
    w = tmp_path / "ssl-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("pkg/_ext.cpython-311-x86_64-linux-gnu.so", (b / "ext.so").read_bytes())
        z.writestr(f"pkg.libs/{soname}", (b / soname).read_bytes())
        z.writestr("ssl-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: ssl\nVersion: 1.0\n")
    doc = as_json(run := dlltrace("check", str(w), "--json"))
    assert run.returncode == 0 and {r["dll"]: r["status"] for r in doc["dlls"]}[soname] == "bundled", doc["problems"]
    assert f"pkg.libs/{soname}" in [f["path"] for f in doc["files"]]
    deps = dlltrace("deps", str(w))
    assert deps.returncode == 0 and "2 shared objects, every one loads" in deps.stdout, deps.stdout + deps.stderr


def test_rule_optional_members(tmp_path):
    """A Linux wheel's member loaded only on demand (numba's tbbpool: data/loaders.json numba_threading_layers) whose
    own load fails -- it needs a symbol version the bundled library lacks, it is of another machine, it is no ELF
    file -- is no failure of the wheel in check, as it is none in deps (which goes on without it, exit 0): check
    lists it apart (optional_problems, with optional_by) and passes. Before, check failed what deps passed. When a
    member loaded at once needs it (DT_NEEDED), it is the wheel's failure in both."""
    b = _build_dir(tmp_path)
    (b / "tbb.c").write_text("int tbb_call(void) { return 0; }\n")
    for v in ("1", "2"):
        (b / f"v{v}.map").write_text(f"TBB_{v} {{ global: tbb_call; local: *; }};\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtbbx.so.12", f"-Wl,--version-script,{b / f'v{v}.map'}",
                        "-o", str(b / f"tbb{v}.so"), str(b / "tbb.c")], check=True)
    shutil.copy(b / "tbb2.so", b / "libtbbx.so.12")  # (linked against TBB_2; the wheel ships the TBB_1 one)
    pool = "numba/np/ufunc/tbbpool.cpython-312-x86_64-linux-gnu.so"
    (b / "t.c").write_text("int tbb_call(void);\nint pool(void) { return tbb_call(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-rpath,$ORIGIN/../../../numba.libs", "-o",
                    str(b / "tbbpool.cpython-312-x86_64-linux-gnu.so"), str(b / "t.c"), str(b / "libtbbx.so.12")], check=True)
    (b / "h.c").write_text("int pool(void);\nint helper(void) { return pool(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-rpath,$ORIGIN/np/ufunc", "-o", "helper.so", "h.c",
                    "tbbpool.cpython-312-x86_64-linux-gnu.so"], check=True, cwd=b)  # (DT_NEEDED: its file name)
    parallel = ("def select_known_backend(backend):\n    try:\n                        from numba.np.ufunc import tbbpool "
                "as lib\n    except ImportError:\n        pass\n").encode()
    aarch64 = bytearray((b / "tbbpool.cpython-312-x86_64-linux-gnu.so").read_bytes())
    aarch64[18:20] = (183).to_bytes(2, "little")  # (e_machine: EM_AARCH64)

    def both(members: dict[str, bytes]) -> tuple[dict, Optional[int]]:
        w = tmp_path / "numba-0.60.0-cp312-cp312-manylinux2014_x86_64.whl"
        with zipfile.ZipFile(w, "w") as z:
            for m, data in {"numba/np/ufunc/parallel.py": parallel, "numba.libs/libtbbx.so.12": (b / "tbb1.so").read_bytes(),
                            **members}.items():
                z.writestr(m, data)
        doc = as_json(run := dlltrace("check", str(w), "--json"))
        assert run.returncode == (0 if doc["ok"] else 1), run.stderr
        deps = dlltrace("deps", str(w)).returncode if sys.platform.startswith("linux") else None
        return doc, deps

    doc, deps = both({pool: (b / "tbbpool.cpython-312-x86_64-linux-gnu.so").read_bytes()})
    assert doc["ok"] and deps in (0, None) and doc["problems"] == [], (doc["problems"], deps)
    assert [(p["kind"], p["dll"], p["optional_by"]) for p in doc["optional_problems"]] == [
        ("missing_version", "libtbbx.so.12", "numba_threading_layers")], doc["optional_problems"]
    assert "1 problem only optional files have (missing version)" in doc["summary"], doc["summary"]
    assert [f["fate"] for f in doc["diagnosis"]["failures"]] == ["went_on"], doc["diagnosis"]["failures"]
    doc, deps = both({pool: bytes(aarch64), "numba/np/ufunc/omppool.cpython-312-x86_64-linux-gnu.so": b"not ELF"})
    assert doc["ok"] and deps in (0, None), (doc["problems"], deps)
    assert sorted(p["kind"] for p in doc["optional_problems"]) == ["not_elf", "wrong_machine"], doc["optional_problems"]
    # a member loaded at once needs it: its failure is the wheel's, in both
    doc, deps = both({pool: (b / "tbbpool.cpython-312-x86_64-linux-gnu.so").read_bytes(),
                      "numba/_helper.cpython-312-x86_64-linux-gnu.so": (b / "helper.so").read_bytes()})
    assert not doc["ok"] and deps in (1, None) and doc["optional_problems"] == [], (doc["optional_problems"], deps)
    assert [(p["kind"], p["needed_by"]) for p in doc["problems"]] == [("missing_version", [pool])], doc["problems"]


def test_github_notice_for_a_problem_of_an_optional_file(tmp_path):
    """--format github: a problem of a file loaded only on demand fails nothing, so it is no ::error, but it is a
    defect of the wheel the run's summary should show: a ::notice line, at the member and its RECORD line, titled
    as optional; the gate passes (exit 0) and the JUnit report has no failure for it. Before, nothing was said."""
    b = _build_dir(tmp_path)
    (b / "t.c").write_text("int pool(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(b / "pool.so"), str(b / "t.c")], check=True)
    pool = "numba/np/ufunc/tbbpool.cpython-312-x86_64-linux-gnu.so"
    w = tmp_path / "numba-0.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("numba/np/ufunc/parallel.py", "    try:\n        from numba.np.ufunc import tbbpool as lib\n"
                                                 "    except ImportError:\n        pass\n")
        z.writestr("numba/_helper.cpython-312-x86_64-linux-gnu.so", (b / "pool.so").read_bytes())
        z.writestr(pool, b"not an ELF file")
        z.writestr("numba-0.60.0.dist-info/RECORD", f"numba/_helper.cpython-312-x86_64-linux-gnu.so,,\n{pool},,\n")
    junit = tmp_path / "j.xml"
    run = dlltrace("check", str(w), "--format", "github", "--junit-xml", str(junit))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1].startswith("PASS ") and not any(x.startswith("::error") for x in lines), lines
    (notice,) = [x for x in lines if x.startswith("::notice")]
    props, message = parse_annotation(notice)
    assert (props["file"], props["line"], props["title"]) == (pool, "2", "dlltrace check: not elf (optional file)")
    assert "is not an ELF file" in message and "optional (numba threading layer only)" in message, message
    assert ET.parse(junit).getroot().get("failures") == "0"
