"""Text that fits a terminal of any width without cutting a name (issue 26 item 2).

A line is broken at spaces; a word longer than the room left (a path, a fix's call holding a path) is
broken right after a path separator (`\\` or `/`, a run of them: `C:\\\\x` in a call's string literal), never
inside a name: a DLL name, a folder's name and a word stay whole. A piece with no separator that is
wider than the whole line (a DLL name longer than the terminal) stands alone on its line, unindented,
and is the only line wider than the terminal.

- wrap_ranges: where a string is broken (the slices of each line, and each line's indent);
- wrap_text: a line of the report (a rich Text, its styles kept) wrapped, continuation lines indented under it;
- Grid: a table without borders (the places searched, the fixes, a tree's label, the CUDA table) whose
  columns shrink to the terminal; when even the narrowest columns that keep every word whole do not fit,
  each row is printed as a wrapped paragraph instead (its cells two spaces apart);
- Chain: the module chain as a tree, its folder column wrapped.

explained.print_blocks lays these out for the console's width; block_lines (a pipe, -o) at WIDE: unwrapped.

Widths are terminal cells (rich.cells.cell_len: a CJK character is two). rich is imported where it is
used, as explained.py does: importing this module costs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.measure import Measurement
    from rich.text import Text

SEPARATORS = "\\/"
MAX_WRAPPED = 4096  # characters of a line wrapped; a longer one (a hostile trace's name) is printed whole
# A word: a Windows path with the spaces of its folders' names (C:\Program Files\NVIDIA GPU Computing Toolkit\
# CUDA, after any characters that stick to it: L"C:\\...), broken only at its separators; else what is between
# two spaces. A folder's name holds no character Windows forbids in a name (`"`, `:`, ...), so the path ends
# before the words after it; its last name ends at a space (a DLL name with a space in it may be broken there).
_NAME = r'[^\\/:*?"<>|\s]+'
_WORD = re.compile(rf"\S*?(?:[A-Za-z]:\\+|\\\\)(?:{_NAME}(?: {_NAME})*\\+)*\S*|\S+")


def _len(s: str) -> int:
    from rich.cells import cell_len
    return cell_len(s)


def cuts(word: str) -> list[int]:
    """The places a word may be broken: right after each run of path separators, inside the word."""
    return [i for i in range(1, len(word)) if word[i - 1] in SEPARATORS and word[i] not in SEPARATORS + " "]


def units(text: str) -> list[str]:
    """The pieces no line break may cut: each word, or each piece of it between two cuts."""
    out: list[str] = []
    for m in _WORD.finditer(text):
        w = m.group()
        at = [0, *cuts(w), len(w)]
        out += [w[a:b] for a, b in zip(at, at[1:])]
    return out


def narrowest(text: str) -> int:
    """The narrowest width `text` can be wrapped to without a name cut: its widest unit."""
    return max((_len(u) for u in units(text)), default=0)


@dataclass(frozen=True)
class Line:
    """One line of a wrapped string: `indent` spaces, then text[start:end]."""

    indent: int
    start: int
    end: int


def wrap_ranges(text: str, width: int, hang: Optional[int] = None) -> list[Line]:
    """Where `text` is broken to fit `width` cells: its own leading spaces indent its first line, `hang`
    (default: those spaces + 2) the next ones. Breaks at spaces (which are dropped), else right after a
    path separator; a piece that fits no line stands alone, unindented."""
    if len(text) > MAX_WRAPPED:  # (finding cuts is quadratic in a word's length: such a line is left to the terminal)
        return [Line(0, 0, len(text))]
    lead = len(text) - len(text.lstrip(" "))
    hang = lead + 2 if hang is None else hang
    hang = max(0, min(hang, width // 3))  # (a deep indent on a narrow terminal: the text keeps most of the line)
    if not text.strip():
        return [Line(0, 0, 0)]
    out: list[Line] = []
    indent = min(lead, max(0, width - 1))
    start: Optional[int] = None  # the current line's first character
    end = 0

    def emit(a: int, b: int) -> None:
        nonlocal indent, start
        piece = _len(text[a:b])
        out.append(Line(indent if indent + piece <= width else 0, a, b))
        indent, start = hang, None

    for m in _WORD.finditer(text):
        ws, we = m.start(), m.end()
        while ws < we:
            if start is None:
                room = width - indent
                if _len(text[ws:we]) <= room:
                    start, end, ws = ws, we, we
                    continue
                cut = _cut(text, ws, we, room)
                emit(ws, cut)
                ws = cut
                continue
            room = width - indent
            if _len(text[start:we]) <= room:
                end, ws = we, we
                continue
            if _len(text[ws:we]) > width - hang:  # longer than any line: fill this one up to a separator
                cut = _cut(text, ws, we, room - _len(text[start:ws]), overflow=False)
                if cut > ws:
                    emit(start, cut)
                    ws = cut
                    continue
            emit(start, end)
    if start is not None:
        emit(start, end)
    return out


def wrap_plain(text: str, width: int) -> str:
    """Plain lines (the Linux report, render/linux.py) wrapped to `width` cells, line by line (wrap_ranges:
    each line's continuation under its own indent + 2, at spaces and path separators, never inside a name)."""
    out: list[str] = []
    for line in text.split("\n"):
        out += [" " * ln.indent + line[ln.start:ln.end] for ln in wrap_ranges(line, width)]
    return "\n".join(out)


def _cut(text: str, ws: int, we: int, room: int, overflow: bool = True) -> int:
    """Where the word text[ws:we] is cut to fit `room` cells: after the last separator that fits; none fits:
    after the first one (`overflow`: the piece stands alone), or ws (nothing of it fits)."""
    at = [ws + i for i in cuts(text[ws:we])]
    fit = [p for p in at if _len(text[ws:p]) <= room]
    if fit:
        return fit[-1]
    if not overflow:
        return ws
    return at[0] if at else we


def wrap_text(text: "Text", width: int, hang: Optional[int] = None) -> list["Text"]:
    """A rich Text wrapped (wrap_ranges), each line a Text with its styles."""
    from rich.text import Text
    lines = []
    for ln in wrap_ranges(text.plain, width, hang):
        piece = text[ln.start:ln.end]
        lines.append(Text.assemble(" " * ln.indent, piece, no_wrap=True, overflow="ignore", end="\n"))
    return lines


def _cleaned(t: "Text", clean: Callable[[str], str]) -> "Text":
    from rich.text import Text
    return Text(clean(t.plain), style=t.style)


@dataclass
class Grid:
    """Rows of cells (rich Texts) in columns `gap` cells apart, without borders; `justify`: "left" or "right"
    per column; `min_widths`: a column's least width; `first`: the first column's fixed width (a tree's
    labels, aligned whatever their depth); `header`: a first row in bold."""

    justify: Sequence[str]
    gap: int = 2
    min_widths: Sequence[int] = ()
    first: Optional[int] = None
    indent: int = 0
    rows: list[list["Text"]] = field(default_factory=list)
    header: Optional[list["Text"]] = None

    def add_row(self, *cells: "Text") -> None:
        self.rows.append(list(cells))

    def cleaned(self, clean: Optional[Callable[[str], str]]) -> "Grid":
        """The same grid, `clean` applied to each cell's text (redaction: before the layout, which it may change)."""
        if clean is None:
            return self
        return replace(self, rows=[[_cleaned(c, clean) for c in r] for r in self.rows],
                       header=[_cleaned(c, clean) for c in self.header] if self.header else None)

    def _all(self) -> list[list["Text"]]:
        return ([self.header] if self.header else []) + self.rows

    def _widths(self) -> tuple[list[int], list[int]]:
        """Each column's natural width (its widest cell) and narrowest (its widest unit)."""
        n = len(self.justify)
        natural = [max((_len(r[c].plain) for r in self._all() if c < len(r)), default=0) for c in range(n)]
        least = [max((narrowest(r[c].plain) for r in self._all() if c < len(r)), default=0) for c in range(n)]
        for c, w in enumerate(self.min_widths):
            natural[c], least[c] = max(natural[c], w), max(least[c], w)
        if self.first is not None and n:
            natural[0] = least[0] = max(self.first, least[0])
        return natural, least

    def __rich_measure__(self, console: "Console", options: "ConsoleOptions") -> "Measurement":
        from rich.measure import Measurement
        natural, least = self._widths()
        gaps = self.gap * max(0, len(natural) - 1)
        stacked = max((narrowest(" ".join(c.plain for c in r)) for r in self._all()), default=0)
        return Measurement(self.indent + min(sum(least) + gaps, stacked), self.indent + sum(natural) + gaps)

    def __rich_console__(self, console: "Console", options: "ConsoleOptions") -> Iterator["Text"]:
        yield from self.lines(options.max_width)

    def lines(self, width: int, ascii_only: bool = False) -> list["Text"]:
        """The grid's lines at `width` cells, each indented (but a line holding a piece wider than the width)."""
        from rich.text import Text
        return [Text.assemble(" " * self.indent, line, no_wrap=True, overflow="ignore", end="\n")
                if _len(line.plain) + self.indent <= width else line
                for line in self._lines(max(1, width - self.indent))]

    def _lines(self, width: int) -> list["Text"]:
        from rich.text import Text
        natural, least = self._widths()
        gaps = self.gap * max(0, len(natural) - 1)
        if sum(least) + gaps > width:  # no columns keep every word whole: each row a wrapped paragraph
            out: list[Text] = []
            for r in self._all():
                row = Text(" " * self.gap).join(c for c in r if c.plain)
                out += wrap_text(row, width, 2)
            return out
        widths = list(natural)
        excess = sum(widths) + gaps - width
        while excess > 0:  # the widest column that may shrink gives one cell, until the row fits
            c = max((k for k in range(len(widths)) if widths[k] > least[k]), key=lambda k: widths[k])
            widths[c] -= 1
            excess -= 1
        out = []
        rows: list[tuple[bool, list[Text]]] = [(False, x) for x in self.rows]
        if self.header:
            rows.insert(0, (True, self.header))
        for bold, r in rows:
            cells = [wrap_text(r[c], widths[c], 0) if c < len(r) else [] for c in range(len(widths))]
            height = max((len(x) for x in cells), default=0)
            for i in range(height):
                line = Text(no_wrap=True, overflow="ignore", end="\n")
                for c, w in enumerate(widths):
                    piece = cells[c][i] if i < len(cells[c]) else Text()
                    piece.end = ""
                    pad = " " * max(0, w - _len(piece.plain))
                    if c:
                        line.append(" " * self.gap)
                    if self.justify[c] == "right":
                        line.append(pad)
                    line.append_text(piece)
                    if self.justify[c] != "right":
                        line.append(pad)
                if bold:
                    line.stylize("bold")
                line.rstrip()
                out.append(line)
        return out


@dataclass
class Chain:
    """The module chain (each module imports the next) as a tree: a module's name, then its folder and rule
    (or ✗ and its cause) aligned in one column whatever the depth; under a narrow terminal the second column
    wraps (a Grid per node, its first column as wide as the deepest name needs)."""

    nodes: list[tuple["Text", "Text"]]
    indent: int = 4
    guide_style: str = ""

    def cleaned(self, clean: Optional[Callable[[str], str]]) -> "Chain":
        if clean is None:
            return self
        return replace(self, nodes=[(_cleaned(a, clean), _cleaned(b, clean)) for a, b in self.nodes])

    def lines(self, width: int, ascii_only: bool = False) -> list["Text"]:
        """The chain's lines at `width` cells; `ascii_only` (a console whose code page has no box characters):
        the guide drawn as rich draws it there."""
        from rich.text import Text
        first = max((_len(name.plain) + 4 * d for d, (name, _) in enumerate(self.nodes)), default=0)
        out: list[Text] = []
        for d, (name, mark) in enumerate(self.nodes):
            label = Grid(("left", "left"), gap=3, first=first - 4 * d)
            label.add_row(name, mark)
            guide = "    " * (d - 1) + ("`-- " if ascii_only else "└── ") if d else ""
            under = "    " * d
            room = width - self.indent - 4 * d
            for k, line in enumerate(label.lines(max(1, room))):
                prefix = Text(" " * self.indent)
                prefix.append(guide if k == 0 else under, style=self.guide_style)
                line.end = ""
                whole = Text.assemble(prefix, line, no_wrap=True, overflow="ignore", end="\n")
                out.append(whole if _len(whole.plain) <= width or k == 0 else line)
        return out

    def __rich_console__(self, console: "Console", options: "ConsoleOptions") -> Iterator["Text"]:
        yield from self.lines(options.max_width)
