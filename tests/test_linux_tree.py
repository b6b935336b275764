"""The Linux dependency tree (issue 26 item 5): `dlltrace deps x.so` and the Linux report draw each library with
the rule that found it (libtree's tags: rpath, runpath, LD_LIBRARY_PATH, ld.so.cache, default path, direct; the
$ORIGIN element as written), "not found" where the search stops with every folder tried and its rule, the failing
branch first, a library drawn before not expanded again (loader/linux/tree.py, render/linux_tree.py).

Checked on layouts of the ld.so differential's gcc-built pool (tests/ldso_kit.py), one per reason, against the
real ld.so (`ldd`: the same libraries, each at the same path), and on real Debian libraries with several levels
of dependencies against `ldd` and pax-utils' `lddtree`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

import ldso_kit as kit
from dlltrace.elf import ELFFacts
from dlltrace.limits import Limits
from dlltrace.loader.linux.static import static_deps
from dlltrace.loader.linux.tree import DepNode
from dlltrace.render.linux_tree import tree_dict, tree_libraries, tree_lines
from dlltrace.worlds.elf import LinuxSystem, LiveELFWorld, VirtualELFWorld

ROOT = Path(__file__).resolve().parent.parent
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"needs {tool} -- tools/setup.sh --tests installs it")
        pytest.skip(f"needs {tool}")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    need("gcc")
    return kit.build_pool(tmp_path_factory.mktemp("ldso-tree"))


def layout(tmp: Path, pool: Path, files: dict[str, str]) -> Path:
    """Copies of pool variants (kit.VARIANTS' keys) at L/<folder>/<name> (copies: ld.so tells files by inode)."""
    L = tmp / "L"
    for rel, key in files.items():
        (L / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pool / key, L / rel)
    return L


def ldd(path: str, env: Optional[dict[str, str]] = None) -> dict[str, Optional[str]]:
    """The real ld.so's answer (ldd: `ld.so --list`): each library by its DT_NEEDED name, the path it loaded
    (None: not found); the interpreter and the vDSO left out."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)
    out: dict[str, Optional[str]] = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s+(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))$", line)
        if m and "ld-linux" not in m.group(1):
            out[m.group(1)] = m.group(3)
    return out


def tree_map(root: DepNode) -> dict[str, Optional[str]]:
    return {n.name: n.path for n in tree_libraries(root)[1:] if "ld-linux" not in n.name}


def by_name(root: DepNode) -> dict[str, DepNode]:
    return {n.name: n for n in tree_libraries(root)}


def deps_of(path: Path, llp: str = "") -> DepNode:
    r = static_deps(str(path), LiveELFWorld(), {"LD_LIBRARY_PATH": llp} if llp else {})
    assert r.tree is not None
    return r.tree


# --- each reason, on generated layouts, against the real ld.so ----------------------------------------------
@linux
def test_rpath_and_the_rpath_of_the_loader_above(pool, tmp_path):
    """libdlta (DT_RPATH $ORIGIN/../d0) needs libdltb (no paths), which needs libdltc: ld.so finds both with
    libdlta's DT_RPATH, libdltc as the RPATH of libdlta.so (its loader's), libc through ld.so.cache."""
    L = layout(tmp_path, pool, {"d1/libdlta.so": "a11", "d0/libdltb.so": "b01", "d0/libdltc.so": "c0"})
    tree = deps_of(L / "d1" / "libdlta.so")
    n = by_name(tree)
    assert (n["libdltb.so"].reason, n["libdltb.so"].entry) == ("rpath", "$ORIGIN/../d0")
    assert (n["libdltc.so"].reason, n["libdltc.so"].owner) == ("rpath", str(L / "d1" / "libdlta.so"))
    assert n["libc.so.6"].reason == "ld.so.cache"
    lines = tree_lines(tree)
    assert f"├── libdltb.so => {L}/d1/../d0/libdltb.so [rpath $ORIGIN/../d0]" in lines, lines
    assert any(x.endswith(f"libdltc.so => {L}/d1/../d0/libdltc.so [rpath of libdlta.so $ORIGIN/../d0]") for x in lines)
    assert tree_map(tree) == ldd(str(L / "d1" / "libdlta.so"))


@linux
def test_runpath_ld_library_path_and_not_found(pool, tmp_path):
    """libdlta (DT_RUNPATH $ORIGIN/../d1) needs libdltb, found by that RUNPATH; libdltb needs libdltc, which a
    RUNPATH does not reach (direct only): LD_LIBRARY_PATH finds it; without it, "not found" where the search
    stops, with every folder tried and its rule, and the failing branch drawn first."""
    L = layout(tmp_path, pool, {"d2/libdlta.so": "a31", "d1/libdltb.so": "b01", "d3/libdltc.so": "c0"})
    target = L / "d2" / "libdlta.so"
    llp = str(L / "d3")
    tree = deps_of(target, llp)
    n = by_name(tree)
    assert (n["libdltb.so"].reason, n["libdltb.so"].entry) == ("runpath", "$ORIGIN/../d1")
    assert n["libdltc.so"].reason == "LD_LIBRARY_PATH" and n["libdltc.so"].path == f"{llp}/libdltc.so"
    assert tree_map(tree) == ldd(str(target), {"LD_LIBRARY_PATH": llp})
    lines = tree_lines(tree)
    assert any(x.endswith(f"libdltc.so => {llp}/libdltc.so [LD_LIBRARY_PATH]") for x in lines), lines

    (L / "d3" / "libdltc.so").unlink()
    tree = deps_of(target)
    assert tree_map(tree) == ldd(str(target)) and tree_map(tree)["libdltc.so"] is None
    assert [k.name for k in tree.children][0] == "libdltb.so" and tree.children[0].fails  # (the failing branch first)
    (gone,) = [k for k in tree.children[0].children if k.path is None]
    assert gone.cause == "not_found" and gone.tried
    # (libdlta's RUNPATH is not its dependencies': the cache, which has no entry, then the default folders)
    assert {c.rule for c in gone.tried} == {"system search path"} and gone.steps == ("cache", "system search path")
    lines = tree_lines(tree)
    i = lines.index("│   ├── libdltc.so ✗ not found")  # (libdltb's libc.so.6 after it)
    assert lines[i + 1] == "│   │   ┊ ld.so looked in, in this order:"
    assert re.fullmatch(r"│   │   ┊   ld\.so\.cache +\[ld\.so\.cache\] +no entry for it", lines[i + 2]), lines
    assert any("[default path]" in x and "/usr/lib/x86_64-linux-gnu" in x for x in lines[i + 2:]), lines


@linux
def test_a_failing_branch_is_drawn_first_and_a_library_drawn_before_is_not_expanded(pool, tmp_path):
    """libdlta (RUNPATH $ORIGIN) needs libdltb, and libdltb (no paths) libdltc, missing: ld.so's breadth-first
    order tries libc.so.6 (libdlta's second need) before; the tree puts libdltb's branch first, and libc.so.6,
    under both, is drawn once with its reason and then "(shown above)"."""
    L = layout(tmp_path, pool, {"d0/libdlta.so": "a41", "d0/libdltb.so": "b01"})
    tree = deps_of(L / "d0" / "libdlta.so")
    assert [k.name for k in tree.children] == ["libdltb.so", "libc.so.6"]
    lines = tree_lines(tree)
    assert sum("libc.so.6 =>" in x for x in lines) == 1 and sum("libc.so.6 (shown above)" in x for x in lines) == 1
    assert lines[1].startswith("├── libdltb.so => ") and lines[1].endswith("[runpath $ORIGIN]")


@linux
def test_the_tree_is_bounded_in_depth_and_width(pool, tmp_path, monkeypatch):
    """limits.py tree_depth and tree_width (dlltrace --limit): what they leave out is one line; a library the depth
    cut is drawn whole where it comes again higher up, and "(shown above)" never names one not drawn."""
    L = layout(tmp_path, pool, {"d1/libdlta.so": "a11", "d0/libdltb.so": "b01", "d0/libdltc.so": "c0"})
    monkeypatch.setenv("DLLTRACE_LIMITS", "tree_depth=1")
    lines = tree_lines(deps_of(L / "d1" / "libdlta.so"))
    assert any("below (past tree_depth: dlltrace --limit tree_depth=N draws more)" in x for x in lines), lines
    assert not any("libdltc.so" in x for x in lines)
    monkeypatch.setenv("DLLTRACE_LIMITS", "tree_width=1")
    lines = tree_lines(deps_of(L / "d1" / "libdlta.so"))
    assert lines[1].startswith("├── libdltb.so") and lines[-1] == "└── … 1 more (past tree_width: dlltrace --limit tree_width=N draws more)"
    for path in real_libraries():
        for depth in ("1", "2", "3"):
            monkeypatch.setenv("DLLTRACE_LIMITS", f"tree_depth={depth}")
            drawn: set[str] = set()
            for x in tree_lines(deps_of(Path(path))):
                m = re.search(r"(?:── |^)(\S+) (=>|\(shown above\))", x)
                if m and m.group(2) == "=>":
                    drawn.add(m.group(1))
                elif m:
                    assert m.group(1) in drawn, (path, depth, x)


def test_default_path_when_the_cache_has_no_answer():
    """A library no RPATH, LD_LIBRARY_PATH, RUNPATH nor ld.so.cache names, found in a default folder: [default path];
    a name with a slash: [direct]."""
    sys_ = LinuxSystem(hwcaps=("",))
    w = VirtualELFWorld({"/w/libtop.so": ELFFacts(needed=("libz.so.1", "/w/sub/libx.so")),
                         "/usr/lib/x86_64-linux-gnu/libz.so.1": ELFFacts(), "/w/sub/libx.so": ELFFacts()}, system=sys_)
    tree = static_deps("/w/libtop.so", w).tree
    assert tree is not None
    assert [(k.name, k.reason, k.path) for k in tree.children] == [
        ("libz.so.1", "default path", "/usr/lib/x86_64-linux-gnu/libz.so.1"), ("/w/sub/libx.so", "direct", "/w/sub/libx.so")]
    assert tree_lines(tree)[1] == "├── libz.so.1 => /usr/lib/x86_64-linux-gnu/libz.so.1 [default path]"


# --- real system libraries, against ldd and lddtree --------------------------------------------------------
REAL = ("libgtk-x11-2.0.so.0", "libgtk-3.so.0", "libpython3.11.so.1.0", "libxml2.so.2", "libcairo.so.2")


def real_libraries() -> list[str]:
    w = LiveELFWorld()
    got = [p for p in (w.cache_lookup(n) for n in REAL) if p]
    return got


@linux
def test_a_real_library_s_tree_is_ldd_s_libraries_at_ldd_s_paths():
    libs = real_libraries()
    assert libs, f"none of {REAL} on this machine (tools/setup.sh --tests installs libxml2)"
    deepest = 0
    for path in libs:
        tree = deps_of(Path(path))
        assert not any(n.path is None for n in tree_libraries(tree))
        assert tree_map(tree) == ldd(path), path
        deepest = max(deepest, depth(tree))
    assert deepest >= 3  # (libxml2 -> libicuuc -> libstdc++ -> libm -> libc)


def depth(n: DepNode) -> int:
    return 1 + max((depth(k) for k in n.children), default=0)


def run_lddtree(path: str) -> subprocess.CompletedProcess:
    """lddtree -a PATH, by this Python (Debian's lddtree is a Python script needing pyelftools, which dlltrace
    needs too: `python3` on PATH may be another one, pyenv's)."""
    exe = shutil.which("lddtree")
    assert exe is not None
    r = subprocess.run([sys.executable, exe, "-a", path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def lddtree(path: str) -> dict[str, Optional[str]]:
    """pax-utils' lddtree -a (every library, at each place it is needed): name -> path."""
    r = run_lddtree(path)
    out: dict[str, Optional[str]] = {}
    for line in r.stdout.splitlines()[1:]:
        m = re.match(r"^\s+(\S+) => (.+)$", line)
        if m and "ld-linux" not in m.group(1):
            out[m.group(1)] = None if m.group(2) == "not found" else m.group(2)
    return out


@linux
def test_a_real_library_s_tree_has_lddtree_s_libraries_and_edges():
    """lddtree reads ld.so.conf where ld.so reads its cache, and prints a path with its links resolved
    (realpath): the same libraries, each at the same file, and each library's children the same set."""
    need("lddtree")
    for path in real_libraries():
        tree = deps_of(Path(path))
        ours = {k: os.path.realpath(v) if v else v for k, v in tree_map(tree).items()}
        theirs = {k: os.path.realpath(v) if v else v for k, v in lddtree(path).items()}
        assert ours == theirs, path
        # the edges: each library's DT_NEEDED, as lddtree -a draws them under it
        r = run_lddtree(path)
        depth = [(len(m.group(1)) // 4, m.group(2)) for m in
                 (re.match(r"^((?:    )*)(\S+) =>", x) for x in r.stdout.splitlines()[1:]) if m]
        theirs_edges: dict[str, set[str]] = {}
        stack: list[str] = [os.path.basename(path)]
        for d, name in depth:
            del stack[d:]
            theirs_edges.setdefault(stack[-1], set()).add(name)
            stack.append(name)
        ours_edges: dict[str, set[str]] = {}

        def walk(n: DepNode) -> None:
            if n.children:
                ours_edges.setdefault(n.name, set()).update(k.name for k in n.children)
            for k in n.children:
                walk(k)

        walk(tree)
        ours_edges[os.path.basename(path)] = ours_edges.pop(tree.name, set())
        for lib, kids in ours_edges.items():
            assert kids == theirs_edges.get(lib, set()), (path, lib)


# --- the commands --------------------------------------------------------------------------------------------
def dlltrace(*args: str, cwd: Path, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlltrace", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "tracer"), **(env or {})}, timeout=300)


@linux
def test_deps_draws_the_tree_in_text_markdown_and_json(pool, tmp_path):
    import jsonschema

    L = layout(tmp_path, pool, {"d2/libdlta.so": "a31", "d1/libdltb.so": "b01"})
    target = str(L / "d2" / "libdlta.so")
    r = dlltrace("deps", target, cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0] == f"dlltrace deps {target}: 1 problem(s)" and lines[2] == target
    assert f"├── libdltb.so => {L}/d2/../d1/libdltb.so [runpath $ORIGIN/../d1]" in lines
    assert "│   ├── libdltc.so ✗ not found" in lines and "[default path]" in r.stdout
    md = dlltrace("deps", target, "--markdown", cwd=tmp_path).stdout
    assert md.startswith("```") and "libdltc.so ✗ not found" in md
    doc = json.loads(dlltrace("deps", target, "--json", cwd=tmp_path).stdout)
    schema = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "static-linux-v1.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    b = doc["tree"]["children"][0]
    assert (b["name"], b["reason"], b["entry"]) == ("libdltb.so", "runpath", "$ORIGIN/../d1")
    assert b["children"][0]["name"] == "libdltc.so" and b["children"][0]["cause"] == "not_found"


def test_the_tree_schema_is_the_committed_one():
    from dlltrace.render.linux_tree import tree_schema

    schema = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "static-linux-v1.json").read_text(encoding="utf-8"))
    assert schema["$defs"]["DepNode"] == tree_schema()
    assert tree_dict(DepNode("x"))["children"] == []


@linux
def test_the_report_of_a_trace_draws_the_failed_call_s_tree(pool, tmp_path):
    """ctypes.CDLL of libdlta.so (RUNPATH $ORIGIN/../d1), whose libdltb.so needs libdltc.so, missing: the report
    draws the call's tree (libdltb.so [runpath $ORIGIN/../d1], libdltc.so ✗ not found, libc.so.6 already loaded
    by the program), in text and Markdown, and its JSON (`deps` of the call) validates against its schema."""
    import jsonschema

    need("gcc")
    L = layout(tmp_path, pool, {"d2/libdlta.so": "a31", "d1/libdltb.so": "b01"})
    code = f"import ctypes; ctypes.CDLL({str(L / 'd2' / 'libdlta.so')!r})"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path).stdout
    lines = text.splitlines()
    i = lines.index("  Dependency tree (the failing branch first):")
    # (the evidence in full after the folders searched and what to do: a tree can be long)
    assert any(line.startswith("  Where ld.so looked for libdltc.so") for line in lines[:i]), text
    assert lines[i + 1:i + 5] == [f"    {L}/d2/libdlta.so",
                                  f"    ├── libdltb.so => {L}/d2/../d1/libdltb.so [runpath $ORIGIN/../d1]",
                                  "    │   └── libdltc.so ✗ not found",
                                  "    └── libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 [already loaded]"], text
    md = dlltrace("report", "t.jsonl", "--markdown", cwd=tmp_path).stdout
    assert "    │   └── libdltc.so ✗ not found" in md
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path).stdout)
    schema = json.loads((ROOT / "tracer" / "dlltrace" / "schemas" / "report-linux-v1.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    tree = doc["failed"][doc["fatal"]]["deps"]
    assert [(k["name"], k["reason"]) for k in tree["children"]] == [("libdltb.so", "runpath"), ("libc.so.6", "loaded")]
    assert tree["children"][0]["children"][0]["cause"] == "not_found"


def test_rule_reason():
    """The reason of a library found is the search step of the file found (libtree's tag), with whose DT_RPATH or
    DT_RUNPATH it was; an object already loaded is "loaded"; a lookup that found nothing has none."""
    from dlltrace.loader.linux.engine import Lookup, SearchGroup
    from dlltrace.loader.linux.tree import rule_reason
    from dlltrace.model import Candidate

    def lk(*groups: SearchGroup, how: str = "search") -> Lookup:
        return Lookup("libx.so", "/a/liba.so", list(groups), "/p/libx.so", how)

    miss = SearchGroup("RPATH", "/a/libtop.so", tried=[Candidate("/r/libx.so", "RPATH of /a/libtop.so", "not_there")])
    assert rule_reason(lk(miss, SearchGroup("RPATH", "/a/liba.so", tried=[
        Candidate("/p/libx.so", "RPATH of /a/liba.so", "found")]))) == ("rpath", "/a/liba.so")
    assert rule_reason(lk(SearchGroup("RUNPATH", "/a/liba.so", tried=[Candidate("/p/libx.so", "", "found")]))) == \
        ("runpath", "/a/liba.so")
    for what, tag in (("LD_LIBRARY_PATH", "LD_LIBRARY_PATH"), ("cache", "ld.so.cache"),
                      ("system search path", "default path"), ("path", "direct")):
        assert rule_reason(lk(miss, SearchGroup(what, tried=[Candidate("/p/libx.so", what, "found")]))) == (tag, "")
    assert rule_reason(lk(how="already_loaded")) == ("loaded", "")
    assert rule_reason(lk(miss)) == ("", "")


@linux
def test_a_relative_path_s_origin_is_the_current_folder_of_that_moment(pool, tmp_path):
    """ctypes.CDLL('app/d2/libdlta.so'), a relative path, made after os.chdir: ld.so opens it from the current
    folder of that moment and makes its $ORIGIN from it (glibc _dl_get_origin), so libdlta.so's RUNPATH
    $ORIGIN/../d1 finds libdltb.so, and the leaf is libdltc.so (missing). The recorder writes that folder
    (`cwd` on the LA_SER_ORIG event); a replay that took "/" for it blamed libdltb.so."""
    need("gcc")
    L = layout(tmp_path, pool, {"d2/libdlta.so": "a31", "d1/libdltb.so": "b01"})
    (tmp_path / "elsewhere").mkdir()
    code = f"import ctypes, os; os.chdir({str(tmp_path)!r}); ctypes.CDLL('L/d2/libdlta.so')"
    r = dlltrace("run", "-o", "t.jsonl", "--", sys.executable, "-c", code, cwd=tmp_path / "elsewhere")
    assert r.returncode == 1, r.stderr[-2000:]
    assert "libdltc.so" in r.stderr  # (the program's own error names the real leaf)
    events = [json.loads(x) for x in gzip_or_text(tmp_path / "elsewhere" / "t.jsonl").splitlines() if x.strip()]
    orig = [e for e in events if e.get("ev") == "objsearch" and e.get("name") == "L/d2/libdlta.so"]
    assert orig and orig[0]["cwd"] == str(tmp_path)
    start = next(e for e in events if e.get("ev") == "audit_start")
    assert start["cwd"] == str(tmp_path / "elsewhere")
    doc = json.loads(dlltrace("report", "t.jsonl", "--json", cwd=tmp_path / "elsewhere").stdout)
    assert doc["fatal"] is not None, doc
    call = doc["failed"][doc["fatal"]]
    assert call["leaf"]["name"] == "libdltc.so", call
    assert [(k["name"], k["reason"]) for k in call["deps"]["children"]] == [("libdltb.so", "runpath"),
                                                                            ("libc.so.6", "loaded")]
    text = dlltrace("report", "t.jsonl", cwd=tmp_path / "elsewhere").stdout
    assert "libdltb.so => " + str(L) + "/d2/../d1/libdltb.so [runpath $ORIGIN/../d1]" in text, text


def gzip_or_text(p: Path) -> str:
    import gzip

    data = p.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
