"""Untrusted strings, escaped for where they are printed: the one place each context's escaping is written.

A trace is a stranger's file (a bug report's attachment): every name in it (a DLL, a folder, a module, a
command line, an exception's message) may be chosen to fake or inject something. Each renderer puts such a
string through the function of its context, never raw:

- escape_terminal: a name in the text report (a line, a table cell, a tree label). A newline, a carriage
  return, a tab, any other C0/C1 control (ESC of an ANSI sequence), a lone surrogate and the bidi controls
  are shown as their Python escapes (`\\n`, `\\x1b`, `\\u202e`): a name cannot fake a report line, move the
  cursor, or reorder what a terminal shows.
- escape_code_span: a name as Markdown code (`` `C:\\x\\a.dll` ``): fenced with one backtick more than the
  longest run of backticks in it, padded with a space when it starts or ends with a backtick (CommonMark
  strips one); newlines, controls and bidi controls shown as escapes, as in the terminal.
- escape_code_block: lines as a fenced Markdown code block: the fence longer than any backtick run in them.
- escape_prose: a name (or plain words holding names) in Markdown running text. Every character Markdown or
  GitHub gives a meaning is neutralised: ASCII punctuation that makes emphasis, code, links, images, tables,
  strikethrough, headings, lists or quotes is backslash-escaped (`\\*`, `\\[`, `\\|`, ...; a backslash only
  before punctuation or at the end: `C:\\x` stays as it is typed); `<` too (`\\<img onerror=...>`: shown,
  never HTML; a backslash rather than `&lt;`, so that a redaction's placeholder `\\<user>` is still
  one for the redaction's last pass over the printed report, trace/redact.py), and `&` (`\\&amp;`: no
  entity); an `@` is followed by U+2060 WORD JOINER (invisible; GitHub makes no mention of
  `@\\u2060everyone`, nor an email link); `://` and `www.` are broken with a backslash (`http\\://`, `www\\.`: GFM makes no autolink), and the
  escapes of escape_terminal (no raw newline: no heading, list or task list can start).
- escape_table_cell: inline Markdown (from escape_prose or escape_code_span) as a GFM table cell: each `|`
  escaped (a GFM table splits a row at every `|` not escaped, inside a code span too; the table removes the
  backslash before the code span is read, so a code span shows the name as it is).

What GitHub does beyond CommonMark and GFM and no renderer here models (`#123` issue references, `:emoji:`
shortcodes, commit hashes) makes links to this repository's own issues or an emoji: not escaped.
"""

from __future__ import annotations

import re

# What a terminal or a Markdown renderer would obey rather than show: the C0 and C1 controls (newline, tab
# and carriage return too), DEL, lone UTF-16 surrogates (legal in a Windows name), the bidi controls
# (U+200E/F marks, U+202A-E embeddings and overrides, U+2066-9 isolates, U+061C the Arabic letter mark)
# and the Unicode line and paragraph separators.
_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# the same but newline and tab: the escapes applied to whole lines a renderer made (explained.visible)
_UNSEEN_IN_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                              "\u2028\u2029]")


def _escape(m: "re.Match[str]") -> str:
    c = m.group()
    if c in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def escape_terminal(text: str) -> str:
    """A name as the terminal (and the text report) shows it: every control character (newline, CR and tab
    too), lone surrogate and bidi control as its escape (`\\n`, `\\x1b`, `\\udc80`, `\\u202e`)."""
    return _UNSEEN.sub(_escape, text) if _UNSEEN.search(text) else text


def escape_lines(text: str) -> str:
    """Text a renderer made, whose newlines and tabs are its own: every other control, lone surrogate and bidi
    control escaped (the last net under the names, which escape_terminal escaped where they were put)."""
    return _UNSEEN_IN_LINES.sub(_escape, text) if _UNSEEN_IN_LINES.search(text) else text


def escape_code_span(text: str) -> str:
    """`text` as a Markdown code span: shown exactly (escapes for controls and bidi controls), whatever
    backticks it holds."""
    text = escape_terminal(text)
    if not text:
        return "` `"
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escape_code_block(lines: list[str], info: str = "") -> list[str]:
    """Lines as a fenced Markdown code block: each line through escape_terminal (none can end the block or
    hold a raw control), the fence one backtick longer than any run of backticks in them (at least three)."""
    shown = [escape_terminal(line) for line in lines]
    longest = max((len(run) for line in shown for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *shown, fence]


_ALNUM = re.compile(r"[A-Za-z0-9]")
_ASCII_PUNCT = re.compile(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")


def escape_prose(text: str, line_start: bool = True, line_end: bool = True) -> str:
    """`text` (a name, or plain words that hold names) as Markdown running text: shown as it is, nothing in
    it read as Markdown, HTML, a link or a mention (the module's docstring says how). `line_start`: it may
    begin a line (a list item, a quote, a setext underline, an indented code block are escaped too); False
    for a table cell or after words of the line. `line_end`: it may end a line (a space last is `&#32;`)."""
    text = escape_terminal(text)
    out: list[str] = []
    n = len(text)
    for i, c in enumerate(text):
        if c == "@":
            out.append("@\u2060")
        elif c == "\\":
            # a backslash before punctuation (the name's, or ours after the name's end) is escaped, so that it
            # escapes nothing; before a letter it is a backslash already (C:\x stays as it is typed)
            out.append("\\\\" if i == n - 1 or _ASCII_PUNCT.match(text[i + 1]) else c)
        elif c in "`*[]!#|~{}<&":
            out.append("\\" + c)
        elif c == "_":
            # an underscore between two letters or digits opens and closes no emphasis (CommonMark's
            # flanking rules): left as it is (DLL_LOAD_DIR)
            inner = 0 < i < n - 1 and _ALNUM.match(text[i - 1]) and _ALNUM.match(text[i + 1])
            out.append(c if inner else "\\_")
        elif c == ":" and text.startswith("//", i + 1):
            out.append("\\:")  # (a GFM autolink: http://, https://, ftp://)
        elif c == "." and i >= 3 and text[i - 3:i].lower() == "www":
            out.append("\\.")  # (a GFM autolink: www.)
        else:
            out.append(c)
    if line_start and text:
        lead = re.match(r"\d+[.)]", text)  # (an ordered list item)
        if lead:
            out[lead.end() - 1] = "\\" + out[lead.end() - 1]
        elif text[0] in "-+=>":  # (a list item, a setext underline, a thematic break, a quote)
            out[0] = "\\" + out[0]
        elif text[0] in " \t":  # (four spaces: an indented code block)
            out[0] = "&#32;"
    escaped = "".join(out)
    # (a space last: two of them at a line's end make a hard line break)
    return escaped[:-1] + "&#32;" if line_end and escaped.endswith(" ") else escaped


def escape_table_cell(markdown: str) -> str:
    """Inline Markdown (escape_prose's or escape_code_span's) as a GFM table cell: each `|` escaped."""
    return markdown.replace("|", "\\|")


def markdown_paragraphs(text: str) -> str:
    """Lines of words (a renderer's, holding names) as Markdown paragraphs, one a line, each escaped (escape_prose)."""
    return "\n\n".join(escape_prose(line) for line in text.split("\n") if line)
