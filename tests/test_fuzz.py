"""Fuzzing `dlltrace simulate` and `dlltrace report` (issue 10 item 2: no traceback on any input).

Each case is a fixture scenario (fixtures/scenarios/*.toml) or trace (fixtures/traces/*.jsonl)
mutated a few times: type swaps, deletions, huge and negative numbers, deep nesting, lone
surrogates, control characters, truncated lines, duplicated lines and keys, bytes that are not
UTF-8. The command runs in this process (dlltrace.cli.main) with stdout and stderr as a UTF-8
terminal would have them (strict UTF-8 streams, not a tty, or a tty for some cases), and each run
must end with a documented exit code, no traceback, and the documented stderr: nothing on success,
one `dlltrace: ` line for an error, and for a damaged trace (exit 3, `report` still reports) one
`dlltrace: warning: ` line per damaged line (at most ten, then a count) — one line each. Text and
Markdown output hold no raw control character, JSON output parses.

Seeded and reproducible: case i of a kind draws from random.Random(f"{seed}/{kind}/{i}"). The seed
is DLLTRACE_FUZZ_SEED (default SEED) and is printed in the summary line; a failing case is saved and
printed with the command that re-runs it alone:
    DLLTRACE_FUZZ_SEED=N DLLTRACE_FUZZ_CASE=trace:123 .venv/bin/pytest -q tests/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest

from dlltrace import cli, errors
from test_schemas import VALUES, mutate, nudges, read

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml"))
TRACES = sorted((ROOT / "fixtures" / "traces").glob("*.jsonl"))

SEED = 20261201
N_SCENARIOS = int(os.environ.get("DLLTRACE_FUZZ_SCENARIOS", "8000"))  # (the suite under 20 minutes: 10,000 each took 270 s)
N_TRACES = int(os.environ.get("DLLTRACE_FUZZ_TRACES", "8000"))

# the documented exit codes (README "Exit codes", dlltrace/errors.py) of each command
SIMULATE_CODES = {0, errors.EXIT_USAGE} | ({getattr(errors, "EXIT_SIMULATED_FAILURE")}
                                           if hasattr(errors, "EXIT_SIMULATED_FAILURE") else set())
REPORT_CODES = {0, errors.EXIT_USAGE, errors.EXIT_BAD_TRACE}

# what no text or Markdown output may hold raw: C0/C1 controls but newline and tab, lone surrogates
UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")

# strings that are legal in a Windows name and hostile to a terminal or an encoder
HOSTILE = ["\udc80", "\ud800", "\udfff", "\ud83d", "\x1b[31m", "\x1b]0;title\x07", "\x00", "\r", "\x9b2J", "\x7f",
           "\u202e", "\ufeff", "\U0001f600", "\u00e9", "%s", "{0}", "[bold]x[/bold]", ":smile:", "\\", "\\\\?\\", "\t"]


def seed() -> int:
    return int(os.environ.get("DLLTRACE_FUZZ_SEED", str(SEED)))


def only() -> tuple[str, int] | None:
    """DLLTRACE_FUZZ_CASE=kind:i runs that one case."""
    v = os.environ.get("DLLTRACE_FUZZ_CASE")
    if not v:
        return None
    kind, _, i = v.partition(":")
    return kind, int(i)


class Terminal(io.TextIOWrapper):
    """A stream like a UTF-8 terminal's: strict UTF-8 (sys.stdout's default outside the C locale);
    isatty as asked (rich then prints in colour)."""

    def __init__(self, tty: bool = False):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n", write_through=True)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8")  # (raises on bytes that are not UTF-8: a failure)


def run_cli(argv: list[str], tty: bool = False) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr, the traceback of an exception that escaped main, else "")."""
    out, err = Terminal(tty), Terminal()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    escaped = ""
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:
        rc, escaped = -1, traceback.format_exc()
    finally:
        sys.stdout, sys.stderr = old
    try:
        return rc, out.text(), err.text(), escaped
    except UnicodeDecodeError as e:
        return rc, "", "", f"output is not UTF-8: {e}"


def problems(command: str, rc: int, out: str, err: str, escaped: str, fmt: str, tty: bool) -> list[str]:
    """What is wrong with one run (nothing: an empty list)."""
    bad: list[str] = []
    if escaped:
        return [f"an exception escaped main: {escaped[-1500:]}"]
    if "Traceback" in err:  # (not in stdout: a trace may record a Python error's text, and the report quote it)
        bad.append("a traceback was printed")
    codes = SIMULATE_CODES if command == "simulate" else REPORT_CODES
    if rc not in codes:
        bad.append(f"exit code {rc} is not one of the documented {sorted(codes)}")
    lines = err.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if rc in (0, 1) and command == "simulate" or rc == 0 and command == "report":
        if err:
            bad.append(f"stderr is not empty on success: {err[:300]!r}")
    elif rc == errors.EXIT_BAD_TRACE and command == "report" and len(lines) > 1:
        # a damaged trace: one warning line per damaged line (ten, then a count), then the report, or
        # one error line when nothing could be reported (no traced process)
        warned = lines[:-1] if not lines[-1].startswith("dlltrace: warning: ") else lines
        if len(warned) > 11 or not all(ln.startswith("dlltrace: warning: ") for ln in warned) or not (
                lines[-1].startswith("dlltrace: ")):
            bad.append(f"stderr is not warning lines (at most eleven) and at most one error line: {err[:300]!r}")
    elif len(lines) != 1 or not lines[0].startswith("dlltrace: "):
        bad.append(f"stderr is not one `dlltrace: ` line: {err[:300]!r}")
    if any(UNSEEN.search(ln) for ln in lines):
        bad.append(f"stderr holds a raw control character or surrogate: {err[:300]!r}")
    if fmt == "json" and rc in (0, 1, errors.EXIT_BAD_TRACE) and out:
        try:
            json.loads(out)
        except ValueError as e:
            bad.append(f"--json output does not parse: {e}")
    elif not tty and UNSEEN.search(out):
        m = UNSEEN.search(out)
        assert m is not None
        bad.append(f"the output holds a raw {m.group()!r}: {out[max(m.start() - 80, 0):m.end() + 40]!r}")
    return bad


# --- mutations --------------------------------------------------------------------------------------------


def hostile_string(v: str, rng: random.Random) -> str:
    h = rng.choice(HOSTILE)
    at = rng.randrange(len(v) + 1)
    return v[:at] + h + v[at:]


def deep_value(rng: random.Random):
    v: object = rng.choice(["x", 1, {}, []])
    for _ in range(rng.choice((50, 1000, 5000))):
        v = [v] if rng.random() < 0.7 else {"a": v}
    return v


def fuzz_value(v, rng: random.Random):
    """A value in place of `v`: near it, of another type, hostile, huge, negative, deeply nested."""
    r = rng.random()
    if r < 0.3:
        return copy.deepcopy(rng.choice(VALUES))
    if r < 0.55:
        return rng.choice(nudges(v))
    if r < 0.75 and type(v) is str:
        return hostile_string(v, rng)
    if r < 0.85:
        return rng.choice([-1, -(2 ** 63), 2 ** 63, 2 ** 64 + 1, 10 ** 400, -10 ** 30, 0.5, 1e308, -0.0, True, None])
    if r < 0.9:
        return deep_value(rng)
    return rng.choice(["", [], {}, [v, v], {"v": v}])


def spots(doc, depth: int = 12) -> list:
    """(parent, key) of every value in `doc` down to `depth` levels (not into a deeply nested value)."""
    out, todo = [], [(doc, 0)]
    while todo:
        node, d = todo.pop()
        for k, v in (node.items() if isinstance(node, dict) else enumerate(node)):
            out.append((node, k, None))
            if isinstance(v, (dict, list)) and d < depth:
                todo.append((v, d + 1))
    return out


def mutate_doc(doc, rng: random.Random):
    """One to three changes anywhere in a parsed document (a scenario or one event)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice((1, 1, 2, 3))):
        spots_ = spots(doc)
        if not spots_:
            break
        parent, k, _ = rng.choice(spots_)
        r = rng.random()
        if r < 0.7:
            parent[k] = fuzz_value(parent[k], rng)
        elif r < 0.85:
            del parent[k]
        elif isinstance(parent, dict):
            parent[rng.choice(["bogus", "ev", "pid", "path", "name", "imports", "flags"])] = fuzz_value("x", rng)
        else:
            parent.insert(rng.randrange(len(parent) + 1), fuzz_value(parent[k], rng))
    return doc


def mutate_text(text: str, rng: random.Random) -> bytes:
    """Changes to the file as text: lines truncated, dropped, doubled or swapped, a key written twice,
    control characters, bytes that are not UTF-8, the file cut short."""
    lines = text.split("\n")
    for _ in range(rng.choice((1, 1, 2, 3))):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        line = lines[i]
        r = rng.random()
        if r < 0.2:
            lines[i] = line[:rng.randrange(len(line) + 1)]
        elif r < 0.3:
            del lines[i]
        elif r < 0.4:
            lines.insert(i, line)
        elif r < 0.5:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], line
        elif r < 0.65:  # a key written twice (JSON: the last one wins; TOML: an error)
            m = re.search(r'"(\w+)"\s*:\s*("[^"]*"|-?\d+|null|true|false)', line) or re.match(r"(\w+)\s*=\s*(.*)", line)
            if m is not None:
                dup = (f'"{m.group(1)}":{m.group(2)},' if line.lstrip().startswith("{") else f"\n{m.group(0)}")
                lines[i] = (line.replace("{", "{" + dup, 1) if line.lstrip().startswith("{") else line + dup)
        elif r < 0.8:
            at = rng.randrange(len(line) + 1)
            lines[i] = line[:at] + rng.choice(["\\u001b[31m", "\\udc80", "\\ud800\\ud800", "\x00", "\x1b", "\\u0000",
                                               "\\\\", "\\", '"', "{", "]", "\\u12", "9" * 5000]) + line[at:]
        elif r < 0.9:
            text_now = "\n".join(lines)
            return text_now[:rng.randrange(len(text_now) + 1)].encode("utf-8", "surrogatepass")
        else:
            data = "\n".join(lines).encode("utf-8")
            at = rng.randrange(len(data) + 1)
            return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xb2\x80", b"\x80\x80", b"\xef\xbb\xbf"]) + data[at:]
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def rename_everywhere(text: str, rng: random.Random) -> str:
    """A DLL's name changed in the whole file (a trace or a JSON scenario; so that the replay meets it
    everywhere it is used), to one with a lone surrogate or a control character in it, as a JSON escape."""
    names = sorted(re.findall(r"(?<=[\\\\\"])[A-Za-z0-9_+-][A-Za-z0-9_.+-]*\.(?:dll|pyd|exe)(?![\w.+-])", text))  # (each as often as it is used)
    if not names:
        return text
    name = rng.choice(names)
    extra = rng.choice(["\\udc80", "\\ud800", "\\u001b[31m", "\\u0007", "\\u009b", "\\r", "\\u0000", "\\udfff\\ud800"])
    return re.sub(r"(?<=[\\\\\"])" + re.escape(name) + r"(?![\w.+-])", lambda m: name[:1] + extra + name[1:], text)


_SCENARIO_BASES: list = []
_TRACE_TEXTS: list = []


@contextlib.contextmanager
def deep_enough():
    """Recursion enough to copy and write the deeply nested values deep_value makes (5,000 levels)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 30_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def scenario_case(i: int, s: int) -> tuple[bytes, str]:
    """(the file's bytes, its suffix) of scenario case i."""
    rng = random.Random(f"{s}/scenario/{i}")
    if not _SCENARIO_BASES:
        _SCENARIO_BASES.extend((p.read_text(encoding="utf-8"), read(p)) for p in SCENARIOS)
    text, doc = rng.choice(_SCENARIO_BASES)
    r = rng.random()
    if r < 0.001:  # an import chain past the depth Python's default recursion limit allowed (328 levels)
        return json.dumps(chain(rng.randrange(330, 420), missing=rng.random() < 0.5)).encode(), ".json"
    if r < 0.06:  # a DLL renamed everywhere to a name with a lone surrogate or a control character
        return rename_everywhere(json.dumps(doc), rng).encode("utf-8"), ".json"
    if r < 0.2:
        return mutate_text(text, rng), ".toml"
    if r < 0.35:
        return mutate_text(json.dumps(doc, indent=rng.choice((None, 1))), rng), ".json"
    with deep_enough():
        doc = mutate(doc, rng) if r < 0.55 else mutate_doc(doc, rng)
        if rng.random() < 0.1 and isinstance(doc, dict) and isinstance(doc.get("file"), list) and doc["file"]:
            doc["file"].append(copy.deepcopy(rng.choice(doc["file"])))  # a file described twice
        data = json.dumps(doc, ensure_ascii=rng.random() < 0.7)
    return data.encode("utf-8", "surrogatepass"), ".json"


def trace_case(i: int, s: int) -> bytes:
    rng = random.Random(f"{s}/trace/{i}")
    if not _TRACE_TEXTS:
        _TRACE_TEXTS.extend(p.read_text(encoding="utf-8") for p in TRACES)
    text = rng.choice(_TRACE_TEXTS)
    if rng.random() < 0.25:
        text = rename_everywhere(text, rng)
    r = rng.random()
    if r < 0.4:
        return mutate_text(text, rng)
    lines = text.split("\n")
    for _ in range(rng.choice((1, 1, 2, 3))):
        k = 0 if rng.random() < 0.05 else rng.randrange(len(lines))
        with deep_enough():
            try:
                obj = json.loads(lines[k])
            except (ValueError, RecursionError):
                continue
            obj = mutate_doc(obj, rng)
            lines[k] = json.dumps(obj, ensure_ascii=rng.random() < 0.8, separators=(",", ":"))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


# --- the runs ----------------------------------------------------------------------------------------------


def fuzz_chunk(job: tuple[str, list[int], str, str]) -> tuple[str, Counter, list[str]]:
    """Run the cases `indices` of `kind`, their files in `work`; a failing case's input is kept in
    `keep`. (kind, exit code counts, failures)."""
    kind, indices, work, keep = job
    s = seed()
    counts: Counter = Counter()
    failures: list[str] = []
    build = cli.build_parser
    parser = build()
    cli.build_parser = lambda: parser  # (the same parser each run: building it is a third of a small case's time)
    try:
        run_cases(kind, indices, work, keep, s, counts, failures)
    finally:
        cli.build_parser = build
    return kind, counts, failures


def run_cases(kind: str, indices: list[int], work: str, keep: str, s: int, counts: Counter, failures: list[str]) -> None:
    for i in indices:
        rng = random.Random(f"{s}/{kind}/{i}/argv")
        if kind == "scenario":
            data, suffix = scenario_case(i, s)
            f = Path(work) / f"case{suffix}"
            argv = ["simulate", str(f)] + (["--json"] if rng.random() < 0.4 else [])
        else:
            data = trace_case(i, s)
            f = Path(work) / "case.jsonl"
            argv = ["report", str(f)] + rng.choice([[], [], ["--json"], ["--json"], ["--json"], ["--markdown"],
                                                    ["--markdown"], ["--markdown"], ["--all"], ["--redact"]])
        f.write_bytes(data)
        tty = rng.random() < 0.1 and "--json" not in argv and "--markdown" not in argv
        fmt = "json" if "--json" in argv else "markdown" if "--markdown" in argv else "text"
        rc, out, err, escaped = run_cli(argv, tty=tty)
        counts[rc] += 1
        bad = problems(argv[0], rc, out, err, escaped, fmt, tty)
        if bad:
            kept = Path(keep) / f"failing-{kind}-{i}{f.suffix}"
            kept.write_bytes(data)
            failures.append(f"{kind} case {i} (seed {s}; re-run: DLLTRACE_FUZZ_SEED={s} DLLTRACE_FUZZ_CASE={kind}:{i} "
                            f".venv/bin/pytest -q tests/test_fuzz.py; input kept in {kept}; argv {argv[:1] + argv[2:]}"
                            f"{' on a tty' if tty else ''}): {'; '.join(bad)}\n  input: {data[:600]!r}")


WORKERS = 2  # the fuzz's share of a CI machine: two processes (fork), each half the cases


def jobs(work: list[str], keep: str) -> list[tuple[str, list[int], str, str]]:
    one = only()
    if one is not None:
        return [(one[0], [one[1]], work[0], keep)]
    out = []
    for kind, n in (("scenario", N_SCENARIOS), ("trace", N_TRACES)):
        for w in range(WORKERS):
            out.append((kind, list(range(w, n, WORKERS)), work[w], keep))
    return out


def test_fuzz_simulate_and_report(tmp_path, summary):
    import multiprocessing
    import tempfile

    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None  # (fast small files)
    work = [tempfile.mkdtemp(prefix="dlltrace-fuzz-", dir=shm or tmp_path) for _ in range(WORKERS)]
    todo = jobs(work, str(tmp_path))
    start = time.perf_counter()
    try:
        if "fork" in multiprocessing.get_all_start_methods() and len(todo) > 1:
            with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
                done = pool.map(fuzz_chunk, todo, chunksize=1)
        else:
            done = [fuzz_chunk(j) for j in todo]
    finally:
        import shutil
        for w in work:
            shutil.rmtree(w, ignore_errors=True)
    took = time.perf_counter() - start
    per_kind: dict[str, Counter] = {"scenario": Counter(), "trace": Counter()}
    failures: list[str] = []
    for kind, c, f in done:
        per_kind[kind].update(c)
        failures.extend(f)
    counts = per_kind["scenario"] + per_kind["trace"]
    ran = {k: sum(c.values()) for k, c in per_kind.items()}
    escaped = sum(1 for f in failures if "an exception escaped main" in f or "a traceback was printed" in f)
    line = (f"fuzz (seed {seed()}): {ran['scenario']} scenario mutations, {ran['trace']} trace mutations, "
            f"{escaped} tracebacks, {len(failures)} failing; exit codes {dict(sorted(counts.items()))} "
            f"(simulate {dict(sorted(per_kind['scenario'].items()))}, report {dict(sorted(per_kind['trace'].items()))}) "
            f"in {took:.0f} s")
    summary["fuzz"] = line
    print(line)
    for f in failures[:5]:
        print(f)
    assert not failures, f"{len(failures)} failing cases; the first: {failures[0]}"
    if only() is None:
        # the mutations reach every documented outcome, not only the first refusal
        sc, tr = per_kind["scenario"], per_kind["trace"]
        assert sc[errors.EXIT_USAGE] > N_SCENARIOS // 4 and sc[0] + sc[1] > N_SCENARIOS // 20, sc
        assert tr[errors.EXIT_BAD_TRACE] > N_TRACES // 4 and tr[0] > N_TRACES // 20, tr


# --- the inputs of issue 10 item 2, one by one ---------------------------------------------------------------


def chain(n: int, missing: bool) -> dict:
    """d0.dll imports d1.dll ... imports d{n}.dll (absent when `missing`)."""
    files = [{"path": f"C:\\app\\d{i}.dll", "imports": [f"d{i + 1}.dll"]} for i in range(n)]
    if not missing:
        files.append({"path": f"C:\\app\\d{n}.dll"})
    return {"process": {"exe": "C:\\app\\h.exe"}, "file": files,
            "call": [{"op": "LoadLibraryExW", "name": "d0.dll", "flags": 0}]}


@pytest.mark.parametrize("fmt, levels", [("text", 10_000), ("json", 500)])
def test_a_deep_import_chain_is_simulated(tmp_path, fmt, levels):
    # (JSON at 500 levels: its indent=2 makes the output grow with the square of the depth, 3 GB at 10,000)
    f = tmp_path / "deep.json"
    f.write_text(json.dumps(chain(levels, missing=False)))
    rc, out, err, escaped = run_cli(["simulate", str(f)] + (["--json"] if fmt == "json" else []))
    assert not escaped and rc == 0 and err == "", (rc, err, escaped)
    if fmt == "json":
        sys_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            doc = json.loads(out)
        finally:
            sys.setrecursionlimit(sys_limit)
        node, depth = doc["calls"][0]["tree"], 0
        while node["children"]:
            node, depth = node["children"][0], depth + 1
        assert (doc["error"], depth, node["name"]) == (0, levels, f"d{levels}.dll")
    else:
        assert out.rstrip().endswith("1 load simulated, 0 failed"), out[-300:]


def test_a_failing_import_chain_of_400_levels_is_explained(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text(json.dumps(chain(400, missing=True)))
    rc, out, err, escaped = run_cli(["simulate", str(f)])
    assert not escaped and rc in SIMULATE_CODES - {errors.EXIT_USAGE} and err == "", (rc, err, escaped)
    assert "d400.dll was not found — it is needed by d399.dll" in out, out[:500]


def test_an_import_chain_past_the_limit_is_one_line(tmp_path):
    from dlltrace.deep import MAX_IMPORT_DEPTH

    f = tmp_path / "deep.json"
    f.write_text(json.dumps(chain(MAX_IMPORT_DEPTH + 10, missing=False)))
    rc, out, err, escaped = run_cli(["simulate", str(f)])
    assert not escaped and (rc, out) == (errors.EXIT_USAGE, ""), (rc, err, escaped)
    assert err == f"dlltrace: {f}: an import chain deeper than {MAX_IMPORT_DEPTH} levels is not simulated\n"


def surrogate_trace(tmp_path: Path, extra: str) -> Path:
    text = (ROOT / "fixtures" / "traces" / "s1.jsonl").read_text(encoding="utf-8")
    f = tmp_path / "sur.jsonl"
    f.write_text(text.replace("_ext.cp311", "_ext" + extra + ".cp311"), encoding="utf-8")
    return f


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "tty"])
def test_a_lone_surrogate_in_a_trace_round_trips(tmp_path, fmt):
    f = surrogate_trace(tmp_path, "\\udc80")
    argv = ["report", str(f)] + ({"json": ["--json"], "markdown": ["--markdown"]}.get(fmt, []))
    rc, out, err, escaped = run_cli(argv, tty=fmt == "tty")
    assert not escaped and rc == 0 and err == "", (rc, err, escaped)
    if fmt == "json":
        doc = json.loads(out)  # the escape \udc80 again: the same name
        assert doc["calls"][0]["name"].endswith("\\_ext\udc80.cp311-win_amd64.pyd")
        assert "\\udc80" in out
    else:
        assert "_ext\\udc80.cp311-win_amd64.pyd" in out and "\udc80" not in out


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_control_characters_in_a_trace_are_escaped(tmp_path, fmt):
    f = surrogate_trace(tmp_path, "\\u001b[31m\\u0000")
    argv = ["report", str(f)] + ({"json": ["--json"], "markdown": ["--markdown"]}.get(fmt, []))
    rc, out, err, escaped = run_cli(argv)
    assert not escaped and rc == 0 and err == "", (rc, err, escaped)
    assert "\x1b" not in out and "\x00" not in out
    if fmt == "json":
        assert json.loads(out)["calls"][0]["name"].endswith("\\_ext\x1b[31m\x00.cp311-win_amd64.pyd")
    else:
        assert "_ext\\x1b[31m\\x00.cp311-win_amd64.pyd" in out


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_lone_surrogate_in_a_json_scenario(tmp_path, fmt):
    doc = {"process": {"exe": "C:\\app\\h.exe"},
           "file": [{"path": "C:\\app\\d0.dll", "imports": ["d\udc801.dll"]},
                    {"path": "C:\\app\\d\udc801.dll", "imports": ["d\udc802.dll"]}],
           "call": [{"op": "LoadLibraryExW", "name": "d0.dll", "flags": 0}]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(doc))
    rc, out, err, escaped = run_cli(["simulate", str(f)] + (["--json"] if fmt == "json" else []))
    assert not escaped and rc in SIMULATE_CODES - {errors.EXIT_USAGE} and err == "", (rc, err, escaped)
    if fmt == "json":
        assert json.loads(out)["calls"][0]["chain"] == ["d0.dll", "d\udc801.dll", "d\udc802.dll"]
    else:
        assert "d\\udc802.dll was not found" in out and "\udc80" not in out


def test_the_fuzz_is_reproducible():
    assert [scenario_case(i, 7) for i in range(30)] == [scenario_case(i, 7) for i in range(30)]
    assert [trace_case(i, 7) for i in range(30)] == [trace_case(i, 7) for i in range(30)]
    assert len({trace_case(i, 7) for i in range(30)}) > 25


def test_facts_with_a_lone_surrogate_are_written_as_escapes(tmp_path):
    # what `dlltrace run` appends (files.event_lines): a lone surrogate as its \udXXX escape, the
    # rest raw UTF-8; the reader gets the same name back
    from dlltrace.trace.files import event_lines
    from dlltrace.trace.reader import read_trace

    name = "C:\\app\\a\udc80\ud800é.dll"
    data = event_lines([{"ev": "file", "pid": 1, "seq": 0, "tid": 0, "t": 0, "path": name, "exists": False}])
    assert b"\\udc80\\ud800" in data and "é".encode() in data
    header = (ROOT / "fixtures" / "traces" / "s1.jsonl").read_text(encoding="utf-8").split("\n")[0]
    f = tmp_path / "t.jsonl"
    f.write_bytes(header.encode() + b"\n" + data)
    assert [e["path"] for e in read_trace(f).events if e["ev"] == "file"] == [name]


def test_visible_escapes_what_a_terminal_would_obey():
    from dlltrace.render.explained import Styled, style_of, visible

    assert visible("C:\\a\x1b[31m\x00\r\x9b\udc80b.dll\tx\ny") == "C:\\a\\x1b[31m\\x00\\r\\x9b\\udc80b.dll\tx\ny"
    line = visible(Styled("\x1b", "failure"))
    assert line == "\\x1b" and style_of(line) == "failure"
    plain = "C:\\Program Files\\é ✓"
    assert visible(plain) is plain


def test_nesting_a_million_levels_deep_is_one_line(tmp_path):
    # past the raised recursion limit, in the worker thread's big stack: a RecursionError the readers
    # turn into their one line (a stack too small for the limit would crash the process here)
    n = 1_000_000
    f = tmp_path / "deep.json"
    f.write_text('{"process": {"exe": "C:\\\\a.exe"}, "expect": {"chain": ' + "[" * n + "]" * n + "}}")
    rc, out, err, escaped = run_cli(["simulate", str(f)])
    assert not escaped and (rc, out, err) == (errors.EXIT_USAGE, "", f"dlltrace: {f}: nested too deeply to read\n")
    lines = (ROOT / "fixtures" / "traces" / "s1.jsonl").read_text(encoding="utf-8").split("\n")
    t = tmp_path / "deep.jsonl"
    t.write_text("\n".join(lines[:3] + ['{"ev":"x","pid":1,"seq":1,"a":' + "[" * n + "]" * n + "}"] + lines[3:]))
    rc, out, err, escaped = run_cli(["report", str(t), "--json"])
    assert not escaped and rc == errors.EXIT_BAD_TRACE and json.loads(out)["failed"], (rc, err)
    assert err == f"dlltrace: warning: {t}: line 4: unreadable line skipped\n"


def test_run_appends_facts_to_a_trace_with_a_lone_surrogate(tmp_path):
    """`dlltrace run`'s last step (runner.append_facts) on a trace whose LoadLibraryW name has a lone
    surrogate: no UnicodeEncodeError, and the name reads back the same (it failed with a traceback)."""
    import json as _json

    from dlltrace.runner import append_facts
    from dlltrace.trace.files import header_line
    from dlltrace.trace.reader import read_trace

    name = "C:\\x\\bad\udc80.dll"
    p = tmp_path / "t.jsonl"
    head = header_line("wine", ["prog\udcff.exe"])  # (an argument that was not UTF-8)
    events = [{"ev": "process", "seq": 1, "pid": 7, "tid": 1, "t": 0, "ppid": 1, "exe": "C:\\x\\host.exe", "hooks": []},
              {"ev": "load_begin", "seq": 2, "pid": 7, "tid": 1, "t": 1, "api": "LoadLibraryW", "name": name, "flags": 0,
               "parent": None, "depth": 0, "ctx": None, "caller": None},
              {"ev": "load_end", "seq": 3, "pid": 7, "tid": 1, "t": 2, "load": 2, "result": None, "error": 126,
               "status": 0xC0000135, "path": None}]
    p.write_text(head + "".join(_json.dumps(e) + "\n" for e in events), encoding="ascii")
    trace = read_trace(p)
    got = append_facts(p, trace, wine=False)
    assert [ld.name for ld in got.loads(7)] == [name]
    again = read_trace(p)
    assert [ld.name for ld in again.loads(7)] == [name] and again.warnings == []
    assert again.header is not None
