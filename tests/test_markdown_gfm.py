"""The Markdown report as GitHub shows it (issue 26 item 3): rendered with GitHub's own cmark-gfm (the cmarkgfm
binding, 0.29.0.gfm.13, a test extra already: GFM's tables, strikethrough, autolinks, tag filter, task lists;
raw HTML kept, as GitHub keeps the report's <details>), its text read back from the HTML, and compared with the
text report of the same trace:

- every DLL name, path and fix of the incident shown in full (its leaf, chain, the folders searched, where the
  leaf was found, what is missing next, every fix and its further steps) reads in the HTML exactly as the text
  report says it (whitespace as a browser shows it: runs of it as one space): no `\\_` shown, no emphasis
  eating a `*`, no code span cut by a backtick in a name;
- and the other way: every DLL name in the HTML's text is one the text report names, every path in it one
  the text report holds (nothing mangled anywhere in the document);
- for every trace of fixtures/traces/, and for traces whose names hold what Markdown gives a meaning to
  (`_`, `*`, `**a*b**`, backticks, `~~`, `|`, `<`, `&`, `[`, `@`, `\\`, `#`);
- the Markdown stays under GitHub's 65,536-character body limit: the biggest fixture, and generated ones
  (thousands of failures; a trace whose every name is long and hostile).
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest

from dlltrace import winpath
from dlltrace.diagnosis.analysis import judged_incidents
from dlltrace.render.explained import as_typed, fix_notes
from dlltrace.render.fixwords import fix_text
from dlltrace.render.markdown import markdown_report
from dlltrace.render.cuda import cuda_markdown, cuda_table_of_trace, cuda_text
from dlltrace.render.text import explained_incident, text_report
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "fixtures" / "traces").glob("s*.jsonl"))
GITHUB_BODY_LIMIT = 65_536
DLL = re.compile(r"[^\s\\/\"'(),:;`|<>]+\.(?:dll|pyd|exe)(?![\w.])", re.I)
PATH = re.compile(r"[A-Za-z]:\\[^\s\"'`|<>]*")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_markdown_cap import failing_trace  # noqa: E402  (thousands of failures, as the cap tests make them)
from test_markdown_escape import pe, trace_named  # noqa: E402  (a failing program whose names hold `name`)


class TextOf(HTMLParser):
    """The text a reader sees in rendered HTML: every text node (code spans too), blocks on lines of their own."""

    BLOCKS = {"p", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "summary", "details", "pre", "ul", "ol",
              "table", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)
        if tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        self.parts.append(data)


def github(md: str) -> tuple[str, list[str]]:
    """The Markdown as GitHub renders it: its HTML's text (whitespace runs as one space, per line; the invisible
    WORD JOINER after an `@`, which keeps GitHub from making a mention, left out) and tags."""
    p = TextOf()
    p.feed(cmarkgfm.github_flavored_markdown_to_html(md, options=cmarkgfm.Options.CMARK_OPT_UNSAFE))
    lines = [" ".join(line.split()) for line in "".join(p.parts).replace("\u2060", "").split("\n")]
    return "\n".join(line for line in lines if line), p.tags


def one_space(s: str) -> str:
    return " ".join(s.split())


def shown_in_full(trace, incs, replays):
    """What the text report says of the incident the Markdown explains in full (its first): the DLL names,
    the paths and the fixes, each as the text report writes it."""
    failed = [i for i in incs if i.real_failure]
    failed.sort(key=lambda i: i.verdict is None or i.verdict.fate != "fatal")
    if not failed:
        return None
    inc = failed[0]
    e = explained_incident(inc)
    res = inc.first.result
    names = [winpath.basename(n) for n in res.chain]
    if res.leaf:
        names.append(res.leaf.name)
    names += [a.name for a in e.also_missing] + [n for a in e.also_missing for n in a.chain]
    paths = [winpath.dirname(c.path) for lk in e.looked for c in lk.candidates]
    paths += [c.path for c in res.found_elsewhere[:2]]
    leaf = res.leaf.name if res.leaf else ""
    fixes = []
    for f in e.fixes:  # (the text report writes code in backticks where the Markdown has a code span: compared
        # without them, as GitHub shows the code span's text)
        fixes.append((as_typed(fix_text(f)), as_typed(fix_text(f, code=lambda c: c))))
        fixes += [(note, note.replace(f"`{f.before}`", f.before) if f.before else note) for note, _ in fix_notes(f, leaf)]
    return names, paths, fixes


def check_against_text(trace_path: Path) -> tuple[str, str]:
    """The Markdown and text reports of a trace: every DLL name, path and fix of the incident read in the
    HTML as the text report has them, and nothing in the HTML mangled."""
    trace = read_trace(str(trace_path))
    replays, incs = judged_incidents(trace)
    # (as `report --markdown` and `report` print them: render/summary.py, with the CUDA table when it has a mismatch)
    cuda = cuda_table_of_trace(trace)
    mismatch = cuda is not None and cuda.mismatches
    md = markdown_report(trace, incs, replays) + ("\n" + cuda_markdown(cuda, level=3) if mismatch else "")
    text = text_report(trace, incs, replays) + ("\n\n" + cuda_text(cuda) if mismatch else "")
    html, tags = github(md)
    assert len(md) < GITHUB_BODY_LIMIT
    assert tags.count("details") == tags.count("/details") and "a" not in tags and "img" not in tags
    flat_text, flat_html = one_space(text), one_space(html)
    full = shown_in_full(trace, incs, replays)
    if full is not None:
        names, paths, fixes = full
        if "(cut here to fit a GitHub issue" in md:  # (one failure larger than an issue: its details were cut)
            names, paths, fixes = names[-1:], [], []
        for in_text, in_html in [*((x, x) for x in [*names, *paths]), *fixes]:
            assert one_space(in_text) in flat_text, ("not in the text report", in_text)
            assert one_space(in_html) in flat_html, ("not in the HTML as in the text report", in_html, md)
    # the other way: every DLL name and path in the HTML is one the text report has (or, for a failure the
    # text report lists a line each, past the first 25, the leaf it failed on: `report --all` explains it)
    text_names = set(DLL.findall(text)) | {i.first.result.leaf.name for i in incs if i.first.result.leaf}
    for name in DLL.findall(html):
        assert name in text_names, ("a name the text report does not have", name, md)
    for path in PATH.findall(html):
        path = path.rstrip(".,;:)")
        assert path in text or path in flat_text, ("a path the text report does not have", path, md)
    return md, html


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_every_fixture_reads_on_github_as_in_the_text_report(trace):
    md, html = check_against_text(trace)
    assert "\\_" not in html and "\\*" not in html  # (no escape shown as it is)


HOSTILE = ["a_b_c", "_lead", "trail_", "x*y*z", "**bold*in**", "a`b", "``x", "~~s~~", "a|b", "<b>", "&amp;",
           "[x](y)", "@everyone", "#1", "__init__", "*", "_", "a__b__c", "x~y", "1.", "- x", "a  b", "x_*y*_z"]
IN_WORDS = [*HOSTILE, "a\\_b", "C:\\x\\_y", "\\", "x\\", "\\*"]  # (a backslash: in words, never in a DLL name)


@pytest.mark.parametrize("name", HOSTILE)
def test_names_markdown_gives_a_meaning_read_as_they_are(tmp_path, name):
    md, html = check_against_text(trace_named(tmp_path / "t.jsonl", name))
    assert one_space(f"dep0{name}x.dll") in one_space(html), (name, md, html)


def found_elsewhere(path: Path, name: str) -> Path:
    """trace_named's program, its missing DLL installed in a folder on PATH named after `name` too (which this
    load does not search): found elsewhere, and fixes whose code and words hold the name."""
    trace_named(path, name)
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    tools = f"C:\\tools {name}\\bin"
    for ev in events:
        if ev.get("ev") == "env":
            ev["vars"]["PATH"] += ";" + tools
    events.append({"ev": "file", "path": f"{tools}\\dep0{name}x.dll", "kind": "pe", "pe": pe(["kernel32.dll"]),
                   "pid": 100, "seq": 0, "tid": 0, "t": 0})
    path.write_text("\n".join(json.dumps(x) for x in events) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_fixes_holding_such_names_read_as_they_are(tmp_path, name):
    md, html = check_against_text(found_elsewhere(tmp_path / "t.jsonl", name))
    assert "Suggested fix:" in html and one_space(f"C:\\tools {name}\\bin\\dep0{name}x.dll") in one_space(html), md


def test_the_escapes_that_github_would_show():
    """Where Markdown is not read (a code span, an HTML block: <summary>), a backslash escape shows as it is;
    the report puts escaped prose in neither."""
    from dlltrace.render.escape import escape_code_span, escape_prose

    for name in IN_WORDS:
        assert github(escape_code_span(name))[0] == one_space(name), name
        assert github(f"x {escape_prose(name, line_start=False)}")[0] == one_space(f"x {name}"), name
        assert github(escape_prose(name))[0] == one_space(name), name


def test_the_biggest_fixture_fits_a_github_issue():
    sizes = {}
    for t in TRACES:
        trace = read_trace(str(t))
        replays, incs = judged_incidents(trace)
        sizes[t.name] = len(markdown_report(trace, incs, replays))
    biggest = max(sizes, key=sizes.__getitem__)
    assert 3000 < sizes[biggest] < GITHUB_BODY_LIMIT, sizes


def test_a_huge_trace_of_hostile_long_names_fits_and_reads_whole(tmp_path):
    """1,000 failures whose every DLL name holds 80 characters Markdown escapes (each `*` or `_` written as
    two): the budget counts the escaped text, so it still fits (capped, and saying so), and every name of the
    incident and of the failures listed reads whole on GitHub. (tests/test_markdown_cap.py: the other shapes
    of a huge trace, plain names.)"""
    plain = failing_trace(tmp_path / "plain.jsonl", 1000)
    path = tmp_path / "hostile.jsonl"
    path.write_text(plain.read_text(encoding="utf-8").replace("dep", "*_" * 40 + "dep"), encoding="utf-8")
    md, html = check_against_text(path)
    assert len(md) < GITHUB_BODY_LIMIT and len(md.encode("utf-8")) < GITHUB_BODY_LIMIT and "left out" in md
    listed = re.findall(r"(?:\*_){40}dep[a-z]+\.dll", html)
    assert len(set(listed)) > 50 and ("*_" * 40 + "depa.dll") in listed
