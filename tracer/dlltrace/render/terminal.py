"""The console a command prints its text on (issue 26 item 2): colour as `--color` and NO_COLOR say, the
width of the terminal.

- `--color auto` (the default): colour on a terminal, unless NO_COLOR is set to a non-empty value
  (https://no-color.org); then no escape code at all (no colour, no bold);
- `--color never`: no escape code at all, on a terminal too (the text is still wrapped to its width);
- `--color always`: colour even on a pipe or a file (`| less -R`), whatever NO_COLOR says (an option given
  on the command line wins over the environment, as no-color.org asks).

The width: a terminal's own (or COLUMNS); on a pipe, COLUMNS when it is set, else `plain_width` (the
report: WIDE, no line wrapped).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Optional, TextIO

from dlltrace.render.explained import WIDE

if TYPE_CHECKING:
    from rich.console import Console

COLOR_CHOICES = ("auto", "always", "never")


def is_terminal(stream: Optional[TextIO] = None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # (closed, or not a real stream)
        return False


def colour_wanted(color: str = "auto", stream: Optional[TextIO] = None) -> bool:
    """Whether the text is coloured: `--color`, NO_COLOR, and whether `stream` is a terminal."""
    if color == "always":
        return True
    if color == "never" or os.environ.get("NO_COLOR", ""):
        return False
    return is_terminal(stream)


def styled_output(color: str = "auto", stream: Optional[TextIO] = None) -> bool:
    """Whether a command prints its text through the terminal console (terminal_console: wrapped, in
    styles) rather than as plain lines: on a terminal, or with `--color always`."""
    return color == "always" or is_terminal(stream)


def terminal_console(color: str = "auto", stream: Optional[TextIO] = None, plain_width: Optional[int] = None) -> "Console":
    """The rich Console for `stream` (stdout): coloured as colour_wanted says (else no escape code at all),
    as wide as the terminal (on a pipe: COLUMNS, else `plain_width`)."""
    from rich.console import Console

    stream = sys.stdout if stream is None else stream
    tty = is_terminal(stream)
    width: Optional[int] = None
    if not tty:
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else (plain_width or WIDE)

    def console(color_system: Optional[str], coloured: bool) -> "Console":
        return Console(file=stream, highlight=False, markup=False, emoji=False, width=width,
                       color_system=color_system, force_terminal=tty or coloured, no_color=not coloured)  # type: ignore[arg-type]

    if not colour_wanted(color, stream):
        return console(None, False)
    coloured = console("auto", True)
    if coloured.color_system is None:  # (--color always with TERM=dumb: the 16 standard colours)
        coloured = console("standard", True)
    return coloured
