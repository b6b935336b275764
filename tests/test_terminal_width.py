"""The report on a terminal of any width (issue 26 item 2; render/wrap.py): every fixture the report and simulate
tests use (fixtures/traces/s*.jsonl, the recorded and handwritten traces, with --all; fixtures/scenarios/s*.toml)
printed at 60, 80 and 120 columns as a terminal shows it (explained.print_blocks), and compared with the same
report unwrapped (what a pipe gets):

- no line is wider than the terminal, but a piece that no break can make narrower (a name longer than the
  line), which then stands alone on its line;
- no name is ever cut: the narrow text holds exactly the words of the unwrapped one, each path in them split
  only right after a separator (the same multiset of unbreakable pieces, render/wrap.py units);
- every DLL name and every path of the diagnosis (read from the JSON report, not from the text) that the
  report shows reads whole: a DLL name on one line, a path once its wrapped lines are joined at separators;
  so does every word holding a path (a fix's call: `AddDllDirectory(L"C:\\\\x")`).
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from dlltrace.commands.simulate import scenario_blocks
from dlltrace.render.calls import results_dict
from dlltrace.render.explained import block_lines, print_blocks
from dlltrace.render.scenario import explain_scenario
from dlltrace.render.summary import produce, produce_blocks
from dlltrace.render.wrap import SEPARATORS, cuts, units, wrap_ranges
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "fixtures" / "traces").glob("s*.jsonl"))
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("s*.toml"))
FIXTURES = [*TRACES, *SCENARIOS]
WIDTHS = [60, 80, 120]
DLL = re.compile(r"[^\s\\/\"'(),:;`]+\.(?:dll|pyd|exe)(?![\w.])", re.I)
WIN_PATH = re.compile(r"(?:[A-Za-z]:\\|\\\\)\S")
GUIDE = re.compile(r"^\s*(?:└── |`-- )?")


def test_the_fixtures_are_all_there():
    assert len(TRACES) == 10 and len(SCENARIOS) == 11


@lru_cache(maxsize=None)
def rendered(path: Path):
    """(blocks, the unwrapped lines, the JSON document) of a fixture: its report with --all, or its simulation."""
    if path.suffix == ".jsonl":
        trace = read_trace(str(path))
        blocks = produce_blocks(trace, everything=True)
        doc = json.loads(produce(trace, "json", everything=True))
    else:
        scenario, results = explain_scenario(str(path))
        blocks = scenario_blocks(scenario.description, results)
        doc = results_dict(results, kind="simulate", source=str(path), description=scenario.description)
    return blocks, block_lines(blocks), doc


def on_terminal(blocks, width: int) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False,
                      highlight=False, markup=False, emoji=False)
    print_blocks(blocks, console)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def strings(doc) -> list[str]:
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in strings(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in strings(v)]
    return [doc] if isinstance(doc, str) else []


def names_and_paths(doc, shown: str) -> tuple[set[str], set[str]]:
    """The DLL names and the Windows paths the diagnosis holds (its JSON) that the report shows."""
    names, paths = set(), set()
    for s in strings(doc):
        if WIN_PATH.match(s) and s in shown:
            paths.add(s)
        for m in DLL.finditer(s):
            if m.group() in shown:
                names.add(m.group())
    return names, paths


def found(piece: str, lines: list[str]) -> bool:
    """Whether `piece` is in the lines, whole or wrapped: each wrapped part ends a line's cell right after a
    separator (a space or the line's end follows it), and the rest starts a cell of the next line."""
    for k, line in enumerate(lines):
        s = line.find(piece[0])
        while s != -1:
            if _match(piece, lines, k, s):
                return True
            s = line.find(piece[0], s + 1)
    return False


def _match(piece: str, lines: list[str], k: int, s: int) -> bool:
    line = lines[k]
    n = 0
    while n < len(piece) and s + n < len(line) and line[s + n] == piece[n]:
        n += 1
    if n == len(piece):
        return True
    if n == 0 or piece[n - 1] not in SEPARATORS or piece[n] in SEPARATORS or line[s + n:s + n + 1] not in ("", " "):
        return False
    if k + 1 == len(lines):
        return False
    rest, nxt = piece[n:], lines[k + 1]
    t = nxt.find(rest[0])
    while t != -1:
        if (t == 0 or nxt[t - 1] == " ") and _match(rest, lines, k + 1, t):
            return True
        t = nxt.find(rest[0], t + 1)
    return False


def pieces(lines: list[str]) -> Counter:
    """The unbreakable pieces of the lines, split at spaces too (a line that goes on with a path's folder
    "NVIDIA GPU Computing Toolkit\\" does not show it is a path: `found` checks the paths whole)."""
    return Counter(w for line in lines for u in units(line) for w in u.split())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_at_every_width(fixture, width):
    blocks, wide, doc = rendered(fixture)
    lines = on_terminal(blocks, width)
    whole = "\n".join(wide)
    # no line wider than the terminal, but a single piece no break can narrow, alone on its line
    for line in lines:
        if cell_len(line) > width:
            alone = line[GUIDE.match(line).end():]
            assert len(units(alone)) == 1 and not cuts(alone), (width, line)
    # no name cut: the same words, paths split only at their separators
    assert pieces(lines) == pieces(wide), (pieces(lines) - pieces(wide), pieces(wide) - pieces(lines))
    # every DLL name as many times as unwrapped, each on one line
    assert Counter(DLL.findall("\n".join(lines))) == Counter(DLL.findall(whole))
    names, paths = names_and_paths(doc, whole)
    assert names and (paths or fixture.suffix == ".toml"), (names, paths)
    for name in names:
        assert any(name in line for line in lines), name
    # every path of the diagnosis, and every word holding one (a fix's call), whole once joined at separators
    words = {w for line in wide for w in line.split() if any(c in w for c in SEPARATORS)}
    for p in sorted(paths | words):
        assert found(p, lines), (width, p, "\n".join(lines))
    if width < max(map(cell_len, wide)):
        assert len(lines) > len(wide)  # (it did wrap)


def test_a_path_wraps_after_its_separators_and_a_long_name_stands_alone():
    text = "  Copy C:\\Users\\me\\venv\\Lib\\site-packages\\torch\\lib\\cudnn_ops_infer64_8.dll into C:\\x"
    lines = [text[ln.start:ln.end] for ln in wrap_ranges(text, 30)]
    assert lines == ["Copy C:\\Users\\me\\venv\\Lib\\", "site-packages\\torch\\lib\\",
                     "cudnn_ops_infer64_8.dll", "into C:\\x"], lines
    assert [ln.indent for ln in wrap_ranges(text, 30)] == [2, 4, 4, 4]
    name = "a_dll_name_longer_than_the_terminal_itself.dll"
    ranges = wrap_ranges(f"  ✗ {name} was not found", 20)
    got = [(ln.indent, f"  ✗ {name} was not found"[ln.start:ln.end]) for ln in ranges]
    assert got == [(2, "✗"), (0, name), (4, "was not found")], got  # (alone, unindented)
    spaced = "  Found C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.8\\bin\\cublas64_11.dll (x64)"
    got = [spaced[ln.start:ln.end] for ln in wrap_ranges(spaced, 40)]
    assert got == ["Found C:\\Program Files\\", "NVIDIA GPU Computing Toolkit\\CUDA\\", "v11.8\\bin\\cublas64_11.dll (x64)"], got
    doubled = 'AddDllDirectory(L"C:\\\\dlltrace-cases\\\\s1\\\\CUDA\\\\v12.1\\\\bin")'
    got = [doubled[ln.start:ln.end] for ln in wrap_ranges(doubled, 30)]
    assert "".join(got) == doubled and all(g.endswith("\\\\") for g in got[:-1]), got  # (never inside a `\\`)


@pytest.mark.parametrize("fixture", TRACES[:3], ids=lambda p: p.name)
def test_the_summary_of_run_on_a_terminal_is_its_plain_summary_wrapped(fixture):
    """What `dlltrace run` prints at its end on a terminal (summary_blocks, on stderr) says what it says on a pipe
    (summarize), wrapped: the same pieces, every line within 60 columns."""
    from dlltrace.render.summary import summarize, summary_blocks

    trace = read_trace(str(fixture))
    lines = on_terminal(summary_blocks(trace), 60)
    plain = summarize(trace).split("\n")
    assert pieces(lines) == pieces(plain) and "trace saved to" in " ".join(lines[:3])
    assert all(cell_len(line) <= 60 for line in lines), lines


@pytest.mark.parametrize("width", WIDTHS)
def test_the_cuda_table_at_every_width(width):
    """`dlltrace cuda` (and a report whose trace shows a CUDA mismatch): the stack table of the s1 scenario, its
    toolkit folders under C:\\Program Files\\NVIDIA GPU Computing Toolkit, at every width."""
    from dlltrace.diagnosis.cuda import cuda_table, facts_of_scenario
    from dlltrace.diagnosis.scenario import load_scenario
    from dlltrace.render.cuda import cuda_blocks

    blocks = cuda_blocks(cuda_table(facts_of_scenario(load_scenario(ROOT / "fixtures" / "scenarios" / "s1.toml"))))
    wide, lines = block_lines(blocks), on_terminal(blocks, width)
    assert pieces(lines) == pieces(wide)
    for line in lines:
        assert cell_len(line) <= width or len(units(line[GUIDE.match(line).end():])) == 1, line
    paths = {m.group() for line in wide for m in WIN_PATH.finditer(line)}
    for p in {w for line in wide for w in units(line) if any(c in w for c in SEPARATORS)}:
        assert any(p in line for line in lines), p  # (each piece of a path on one line)
    assert any("Program Files" in line for line in wide) and paths


@pytest.mark.parametrize("width", [60, 80, 120])
def test_deps_and_check_of_a_real_wheel_at_every_width(width):
    """`deps` and `check` of h5py's real wheel (its DLLs under h5py\\, long .pyd names) with the width a terminal
    gives (COLUMNS): no line wider than the width but a single unbreakable piece, and every DLL and .pyd name the
    unwrapped output shows is whole on some line (rich folded the wheel's path and the table's names mid-name)."""
    import os
    import subprocess
    import sys

    import realwheels

    w = realwheels.wheel_or_skip("h5py")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root / "tracer"), "COLUMNS": str(width)}
    for command in ("deps", "check"):
        run = subprocess.run([sys.executable, "-m", "dlltrace", command, str(w), "--no-vc-runtime"],
                             capture_output=True, text=True, env=env, timeout=300)
        lines = run.stdout.splitlines()
        assert run.returncode == 0 and lines, run.stderr[-2000:]
        for ln in lines:
            assert cell_len(ln) <= width or len(ln.split()) == 1, (width, ln)
        wide = subprocess.run([sys.executable, "-m", "dlltrace", command, str(w), "--no-vc-runtime"],
                              capture_output=True, text=True, env={**env, "COLUMNS": "1000"}, timeout=300).stdout
        names = set(re.findall(r"[\w.-]+\.(?:dll|pyd)\b", wide, re.I))  # (every name the report shows, unwrapped)
        assert len(names) > 5
        words = {x.strip(",()[]") for ln in lines for x in re.split(r"[\s\\/]+", ln)}
        assert names <= words, (command, width, sorted(names - words))


def test_a_line_too_long_to_wrap_is_printed_whole_and_soon():
    """Finding where to cut a word is quadratic in its length: a line of more than MAX_WRAPPED characters (a hostile
    trace's 10,000-folder path) is left whole to the terminal, at once; a line just within it is still wrapped."""
    from dlltrace.render.wrap import MAX_WRAPPED, wrap_plain, wrap_ranges

    long = ("/" + "a" * 40) * 1000  # (wrapping it took more than a minute)
    assert wrap_ranges(long, 80) == [type(wrap_ranges("x", 80)[0])(0, 0, len(long))]
    assert wrap_plain(long, 80) == long
    within = ("/" + "a" * 40) * (MAX_WRAPPED // 41)
    assert len(within) <= MAX_WRAPPED and max(map(len, wrap_plain(within, 80).split("\n"))) <= 80
