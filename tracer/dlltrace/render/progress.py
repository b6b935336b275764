"""The progress bar of `dlltrace report` on a big trace (issue 10 item 7).

    bar = ProgressBar.for_stderr()       # None unless stderr is a terminal
    trace = read_trace(path, progress=bar.reading if bar else None)
    with bar or contextlib.nullcontext():
        out = produce(trace, fmt, progress=bar.replaying if bar else None)

The reader and the replay call back now and then with (done, total): bytes of the file read, then
events replayed. Nothing is shown for the first AFTER seconds (a small trace is reported before the
bar would be seen); after that, a rich progress bar on stderr, transient (it is erased when the report
is printed). Never on a pipe or a file: `for_stderr` gives a bar only when stderr is a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

AFTER = 1.0  # seconds before the bar appears


class ProgressBar:
    def __init__(self, stream: TextIO, after: float = AFTER):
        self.stream = stream
        self.after = after
        self.start = time.monotonic()
        self._progress: Any = None  # rich.progress.Progress, once shown
        self._task: Any = None
        self._phase = ""

    @classmethod
    def for_stderr(cls) -> Optional["ProgressBar"]:
        """A bar on stderr when it is a terminal, else None (a pipe or a file never gets one)."""
        err = sys.stderr
        try:
            tty = err is not None and err.isatty()
        except (AttributeError, ValueError):  # (closed, or not a real stream)
            tty = False
        return cls(err) if tty else None

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def reading(self, done: int, total: int) -> None:
        """read_trace's callback: bytes of the file read."""
        self._update("reading the trace", done, total)

    def replaying(self, done: int, total: int) -> None:
        """analyse's callback: events replayed."""
        self._update("replaying the loads", done, total)

    def _update(self, phase: str, done: int, total: int) -> None:
        if self._progress is None:
            if time.monotonic() - self.start < self.after:
                return
            self._show(phase, done, total)
        elif phase != self._phase:
            self._progress.reset(self._task, total=max(total, 1), completed=done, description=phase)
        else:
            self._progress.update(self._task, total=max(total, 1), completed=done)
        self._phase = phase

    def _show(self, phase: str, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, highlight=False, markup=False, emoji=False)
        self._progress = Progress(TextColumn("dlltrace: {task.description}"), BarColumn(), TaskProgressColumn(),
                                  TimeElapsedColumn(), console=console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(phase, total=max(total, 1), completed=done)

    def close(self) -> None:
        """Erase the bar (before the report is printed)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
