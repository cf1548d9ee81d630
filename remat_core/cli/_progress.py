"""A progress bar for grids of solves: done of total, how many came from the store, rate and time left.

On a terminal it redraws one line (at most every 0.2 s, and at the end); into a file or a pipe it
writes a line at every tenth of the way, so logs show progress without a line per solve.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..batch import Cell
from ..solvers import SolveOutcome

BAR_WIDTH = 24
REDRAW_SECONDS = 0.2


class ProgressBar:
    """Call it with each result (an :data:`remat_core.batch.OnResult`); :meth:`finish` ends the line."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total, self.label = total, label
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty()
        self.done = self.stored = 0
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._tenths = 0

    def __call__(self, cell: Cell, outcome: SolveOutcome) -> None:
        self.done += 1
        self.stored += outcome.from_store
        last = self.done == self.total
        if self.terminal:
            if last or time.monotonic() - self._drawn_at >= REDRAW_SECONDS:
                self.stream.write("\r" + self.line())
                self.stream.flush()
                self._drawn_at = time.monotonic()
        elif last or self.done * 10 // max(self.total, 1) > self._tenths:
            self._tenths = self.done * 10 // max(self.total, 1)
            self.stream.write(self.line() + "\n")

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        solved = self.done - self.stored
        rate = solved / elapsed
        left = self.total - self.done
        eta = "0:00" if not left else _clock(left / rate) if rate > 0 else "?"
        filled = BAR_WIDTH * self.done // max(self.total, 1)
        return (f"{self.label} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {self.done}/{self.total} "
                f"({self.stored} from the store)  {rate:.2f} solves/s  ETA {eta}")

    def finish(self) -> None:
        if self.terminal and self.done:
            self.stream.write("\n")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
