"""Solve again for less until a judge accepts: the one retry rule of every planner that holds a solver to more
than the simulated peak.

A solver plans for the simulator's memory model. Some callers hold its schedule to a stricter measure:
the front door to the schedule read back onto a graph with workspace nodes, or to the caching allocator's
reserved bytes; the SAC route to what selective activation checkpointing really holds. Each asks the same
question, :func:`solve_until` answers it: solve at the budget; while the judge's peak is over the budget,
ask the solver for less, by a :class:`Shrink` (the excess, at least a part of the way to the lower bound)
or a :class:`Bisection` (the largest budget asked whose schedule is accepted). Solves are kept by the
budget asked, so none is made twice, and the search stops as soon as its rule accepts a schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import InfeasibleBudget
from ..schedule import Schedule


@dataclass(frozen=True)
class Judged:
    """A schedule solved for ``asked`` bytes, and the peak the judge measured for it."""

    asked: int
    schedule: Schedule
    peak: int


@dataclass(frozen=True)
class Shrink:
    """Ask again for the judge's excess less (at least a ``least_part``-th of the way left to ``lower``), down to
    ``lower``; accept the first schedule the judge keeps within the budget.

    Parameters
    ----------
    lower : int
        The least budget worth asking (the graph's lower bound): asked once, then the search stops.
    tries : int
        Solves in all, the first one included.
    least_part : int
        Each retry asks at least ``1 / least_part`` of the distance to ``lower`` less (0: the excess alone).
    """

    lower: int
    tries: int
    least_part: int = 0

    def next_ask(self, asked: int, peak: int, budget: int) -> int | None:
        """The budget to ask next after ``asked`` gave a schedule judged at ``peak``; None: stop."""
        if asked <= self.lower:
            return None
        least = (asked - self.lower) // self.least_part if self.least_part else 0
        return max(self.lower, asked - max(peak - budget, least))


@dataclass(frozen=True)
class Bisection:
    """After a rejected first solve, bisect the budget asked between ``lower`` and the budget for the largest one
    whose schedule the judge keeps (the one recomputing least), until the interval is ``resolution`` wide.

    Parameters
    ----------
    lower : int
        The bottom of the interval (the graph's lower bound): an infeasible ask raises it.
    tries : int
        Solves after the first one.
    resolution : int
        The search stops once the interval is this narrow.
    """

    lower: int
    tries: int
    resolution: int


@dataclass
class Search:
    """What :func:`solve_until` found: the schedule accepted, if any, and the best one rejected (least peak)."""

    accepted: Judged | None
    best_rejected: Judged | None
    made: dict[int, Judged] = field(default_factory=dict, repr=False)
    """Every solve, by the budget asked."""


def solve_until(solve: Callable[[int], Schedule], budget: int, judge: Callable[[Schedule], int],
                rule: Shrink | Bisection, *, first: int | None = None) -> Search:
    """Ask ``solve`` for ``budget`` bytes and then, while ``judge`` measures the schedule over ``budget``, for less,
    as ``rule`` says.

    Parameters
    ----------
    solve : callable
        ``solve(asked) -> Schedule``; may raise :class:`~remat_core.errors.InfeasibleBudget` (a :class:`Shrink`
        lets it propagate; a :class:`Bisection` reads it as "asked too little").
    budget : int
        What the judge holds the schedule to.
    judge : callable
        ``judge(schedule) -> peak``: the bytes the caller's measure says the schedule holds.
    rule : Shrink or Bisection
    first : int, optional
        The first budget asked (default ``budget``): a solver whose own estimates err may be asked for more.

    Returns
    -------
    Search
        ``accepted`` is None when no schedule solved kept the budget.
    """
    made: dict[int, Judged] = {}
    best: list[Judged] = []

    def attempt(asked: int) -> Judged:
        if asked not in made:
            schedule = solve(asked)
            made[asked] = Judged(asked, schedule, judge(schedule))
            if made[asked].peak > budget and (not best or made[asked].peak < best[0].peak):
                best[:] = [made[asked]]
        return made[asked]

    def found(accepted: Judged | None) -> Search:
        return Search(accepted, best[0] if best else None, made)

    start = budget if first is None else first
    opening = attempt(start)
    if opening.peak <= budget:
        return found(opening)
    if isinstance(rule, Shrink):
        asked, peak = start, opening.peak
        for _ in range(rule.tries - 1):
            following = rule.next_ask(asked, peak, budget)
            if following is None:
                break
            judged = attempt(following)
            if judged.peak <= budget:
                return found(judged)
            asked, peak = following, judged.peak
        return found(None)
    low, high, accepted = rule.lower, start, None
    for _ in range(rule.tries):
        if high - low <= rule.resolution:
            break
        asked = (low + high) // 2
        try:
            judged = attempt(asked)
        except InfeasibleBudget:
            low = asked
            continue
        if judged.peak <= budget:
            accepted, low = judged, asked
        else:
            high = asked
    return found(accepted)


__all__ = ["Bisection", "Judged", "Search", "Shrink", "solve_until"]
