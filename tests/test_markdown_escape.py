"""Names from a trace inject nothing (issue 28, item 7; render/escape.py): whatever a DLL, a folder, a module,
a command line or an exception's message is named, the Markdown report renders (GFM, as GitHub does:
cmarkgfm) to the same structure as for a plain name (the same tags, the same table rows and cells, no link,
no image, no heading), and the text report has the same lines, none holding a raw control or bidi control."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlltrace.diagnosis.analysis import judged_incidents
from dlltrace.render.escape import (escape_code_block, escape_code_span, escape_prose, escape_table_cell,
                                    escape_terminal)
from dlltrace.render.markdown import markdown_report
from dlltrace.render.text import text_report
from dlltrace.trace.reader import read_trace

APP = "C:\\app"
SYS32 = "C:\\Windows\\System32"


def pe(imports=()) -> dict:
    return {"machine": "x64", "is_dll": True, "imports": [{"dll": i, "names": [], "ordinals": []} for i in imports],
            "delay_imports": [], "exports": ["f"], "export_ordinals": [], "forwarders": {},
            "dependent_load_flags": 0, "file_version": None}


def trace_named(path: Path, name: str) -> Path:
    """A Python program whose extension (in a folder named after `name`) fails to load: its dependency (named
    after `name`) is nowhere; the program ends on the ImportError, whose message and the command line hold
    the name too. A second extension fails the same way, which the program goes past."""
    lib = f"{APP}\\x{name}x"
    seq, out = 0, []

    def ev(kind, **f):
        nonlocal seq
        seq += 1
        out.append({"ev": kind, "seq": seq, "pid": 100, "tid": 101, "t": seq * 1000, **f})
        return seq

    ev("process", ppid=1, exe=APP + "\\python.exe", cmdline=f"python.exe {name}.py", shim="C:\\s.dll",
       shim_version="0.1.0", via="python", hooks=[])
    ev("env", exe=APP + "\\python.exe", cwd=APP, vars={"PATH": f"{APP};{SYS32};C:\\Windows"},
       dll_directory=None, user_dirs=None, default_dirs=None, known_dlls=["kernel32.dll"], safe_dll_search_mode=None,
       system32=SYS32, windows="C:\\Windows", windows_version="10.0.19045", machine="x64", wine=None,
       modules=[APP + "\\python.exe", SYS32 + "\\ntdll.dll", SYS32 + "\\kernel32.dll"])
    files = []
    for i in range(2):
        mod = f"{lib}\\m{i}.pyd"
        dep = f"dep{i}{name}x.dll"
        ctx = ev("py_import", module=f"pkg.m{i}")
        b = ev("load_begin", api="LoadLibraryExW", name=mod, flags=0x1100, parent=None, depth=0, ctx=ctx,
               caller=APP + "\\python311.dll")
        ev("probe", load=b, op="open", path="\\??\\" + mod, status=0, handle="0x10")
        for d in (lib, APP, SYS32):
            ev("probe", load=b, op="open", path=f"\\??\\{d}\\{dep}", status=0xC0000034)
        ev("load_end", load=b, result=None, error=126, status=0xC0000135, path=None)
        files += [{"ev": "file", "path": f"{d}\\{dep}", "kind": "missing"} for d in (lib, APP, SYS32)]
        files.append({"ev": "file", "path": mod, "kind": "pe", "pe": pe([dep, "kernel32.dll"])})
    files.append({"ev": "file", "path": SYS32 + "\\kernel32.dll", "kind": "pe", "pe": pe()})
    ev("py_exception", type="ImportError", message=f"DLL load failed while importing m0 ({name}): "
       "The specified module could not be found.", module="pkg.m0", path=None, winerror=None, causes=[])
    out.append({"ev": "exit", "seq": 0, "pid": 100, "tid": 0, "t": seq * 1000 + 1, "code": 1, "by": "launcher"})
    out += [{**f, "pid": 100, "seq": 0, "tid": 0, "t": 0} for f in files]
    header = {"format": "dlltrace-trace", "version": 1, "tool": "tests/test_markdown_escape.py", "created": None,
              "platform": "windows"}
    path.write_text("\n".join(json.dumps(x) for x in [header, *out]) + "\n", encoding="utf-8")
    return path


def reports(tmp: Path, name: str) -> tuple[str, str]:
    trace = read_trace(str(trace_named(tmp / "t.jsonl", name)))
    replays, incs = judged_incidents(trace)
    return markdown_report(trace, incs, replays), text_report(trace, incs, replays)


class Shape(HTMLParser):
    """The tags of a rendered document, in order (their text left out), and whether any is a link or an image."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)

    def handle_comment(self, data):  # (cmark's "raw HTML omitted")
        self.tags.append("!--")


def shape(markdown: str) -> list[str]:
    p = Shape()
    # (unsafe: raw HTML kept, as GitHub keeps the report's own <details>; a name's HTML would show)
    p.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=cmarkgfm.Options.CMARK_OPT_UNSAFE))
    return p.tags


PLAIN = "plain"
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = ["a`b", "``x", "`", "a|b", "x\n# heading\n- [ ] task", "<img src=x onerror=alert(1)>", "@everyone",
           "[x](javascript:alert(1))", "www.evil.example http://evil.example a@b.example", "*em* _u_ ~~s~~",
           "1. x", "    code", "x  ", "\u202eexe.txt", "\r\n", "</details>", "<details>", "&lt;b&gt;", "\\", "x\\",
           "-", "=", "> quote", "***", "x\u2066y", "!", "&copy;", "<", "\\`", " `a` ", "|---|---|"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    md, text = reports(tmp_path_factory.mktemp("plain"), PLAIN)
    return shape(md), text.count("\n")


def check(tmp: Path, name: str, plain) -> None:
    md, text = reports(tmp, name)
    tags = shape(md)
    assert "a" not in tags and "img" not in tags and "!--" not in tags, (name, md)
    assert tags == plain[0], (name, md)
    assert not BIDI.search(md) and not BIDI.search(text), name
    assert not RAW_CONTROL.search(md) and not RAW_CONTROL.search(text), name
    assert text.count("\n") == plain[1], (name, text)  # (no line faked by a newline in a name)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_injects_nothing(tmp_path, plain, name):
    check(tmp_path, name, plain)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(blacklist_characters="\\/", blacklist_categories=("Cs",)), min_size=1,
                    max_size=24))
def test_any_name_renders_to_the_structure_of_a_plain_one(tmp_path, plain, name):
    check(tmp_path, name, plain)


def test_the_escapes_one_by_one():
    assert escape_code_span("a`b") == "``a`b``"
    assert escape_code_span("`x") == "`` `x ``"
    assert escape_code_span("a\nb\u202e") == "`a\\nb\\u202e`"
    assert escape_table_cell(escape_code_span("a|b")) == "`a\\|b`"
    assert escape_prose("<img onerror=x>") == "\\<img onerror=x>"
    assert escape_prose("@everyone") == "@\u2060everyone"
    assert escape_prose("[x](javascript:y)") == "\\[x\\](javascript:y)"
    assert escape_prose("http://x www.y") == "http\\://x www\\.y"
    assert escape_prose("C:\\x\\DLL_LOAD_DIR") == "C:\\x\\DLL_LOAD_DIR"  # (as typed: nothing to escape)
    assert escape_terminal("a\nb\x1b[2J\u202e") == "a\\nb\\x1b[2J\\u202e"
    assert escape_code_block(["```", "x"]) == ["````", "```", "x", "````"]
