"""Time limits that hold: one wall-clock deadline per solve, which every phase of a solver checks.

A solver makes a :class:`Deadline` from its ``time_limit`` when it starts; model building, warm
starts and portfolios check it between steps, and the C solvers (HiGHS, CP-SAT) get what is left
(:meth:`Deadline.left`). Wall-clock time, not CPU time: on a loaded machine the user waits as long.
"""

from __future__ import annotations

import math
import time


class TimeUp(Exception):
    """The deadline passed in the middle of a step that has no partial answer (building a model).

    Internal to the solvers: each catches it and returns the best schedule it has, or says it
    stopped at the time limit.
    """


class Deadline:
    """The moment a solve must end.

    Parameters
    ----------
    seconds : float or None
        From now; None: no limit.
    """

    def __init__(self, seconds: float | None):
        self.started = time.perf_counter()
        self.end = math.inf if seconds is None else self.started + float(seconds)

    @property
    def limited(self) -> bool:
        return math.isfinite(self.end)

    def left(self) -> float:
        """Seconds until the deadline (``inf`` without one, never below 0)."""
        return max(self.end - time.perf_counter(), 0.0) if self.limited else math.inf

    def elapsed(self) -> float:
        """Seconds since the deadline was set."""
        return time.perf_counter() - self.started

    def expired(self) -> bool:
        return self.limited and time.perf_counter() >= self.end

    def check(self) -> None:
        """:class:`TimeUp` when the deadline has passed."""
        if self.expired():
            raise TimeUp()

    def within(self, seconds: float) -> "Deadline":
        """A deadline ``seconds`` from now, or this one if it comes first."""
        sooner = Deadline(seconds)
        sooner.started = self.started
        sooner.end = min(sooner.end, self.end)
        return sooner
