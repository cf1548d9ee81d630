"""The front door to every solver: :func:`solve` and :func:`sweep`.

``solve`` checks the budget and the options, calls the registered solver, then simulates what it
returned: the simulator, never the solver, measures peak and cost.
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Any, Iterable, NamedTuple

from ..errors import BudgetError, InfeasibleBudget, InvalidSchedule
from ..graph import ComputeGraph
from ..schedule import Schedule, checkpoint_all_peak, memory_lower_bound, schedule_stats, simulate
from .base import get_solver

DEFAULT_SOLVER = "auto"


def solve(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
          **options: Any) -> Schedule:
    """A schedule of ``graph`` whose peak memory is at most ``budget`` bytes.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Memory budget in bytes, pinned memory included.
    solver : str
        A name from the registry (:func:`remat_core.solvers.list_solvers`).
    time_limit : float, optional
        Seconds the solver may spend (solvers that search use it; others ignore it).
    **options
        The solver's declared options.

    Returns
    -------
    Schedule
        With ``stats`` measured by the simulator (peak, cost, computes, recomputes, overhead,
        solve_seconds) and ``simulation`` attached.

    Raises
    ------
    BudgetError
        If the budget is not a non-negative whole number of bytes.
    UnknownSolver, SolverOptionError
        For a solver or option that does not exist.
    InfeasibleBudget
        If no schedule the solver can build fits; below :func:`memory_lower_bound` no solver can.
    InvalidSchedule
        If the solver returned a schedule that breaks a simulator rule or the budget (a solver bug).
    """
    spec = get_solver(solver)
    budget = check_budget(budget)
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real)
                                   or not time_limit > 0):
        raise BudgetError(f"time_limit must be a positive number of seconds or None, got {time_limit!r}")
    bound_options = spec.bind(options)
    lower = memory_lower_bound(graph)
    if budget < lower:
        raise InfeasibleBudget(budget, checkpoint_all_peak(graph), solver,
                               f"below the lower bound of {lower:,} bytes that any schedule needs")
    started = time.perf_counter()
    schedule = spec.function(graph, budget, time_limit=time_limit, **bound_options)
    seconds = time.perf_counter() - started
    try:
        result = simulate(graph, schedule, budget=budget)
    except InvalidSchedule as e:
        raise InvalidSchedule(e.step, e.op, f"solver '{solver}' returned a bad schedule: {e.reason}") from None
    stats = {**schedule_stats(graph, result), "solve_seconds": seconds}
    return schedule.with_updates(graph=graph.name, solver=solver, budget=budget, stats=stats, simulation=result)


def check_budget(budget: Any) -> int:
    """``budget`` as an int number of bytes; :class:`BudgetError` unless it is a whole number >= 0."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not math.isfinite(budget):
        raise BudgetError(f"budget must be a whole number of bytes, got {budget!r}")
    if budget < 0 or budget != int(budget):
        raise BudgetError(f"budget must be a non-negative whole number of bytes, got {budget!r}")
    return int(budget)


class SweepRow(NamedTuple):
    """One point of a budget sweep; ``peak`` and ``cost`` are None where the budget was infeasible."""

    budget: int
    peak: int | None
    cost: float | None
    seconds: float


def sweep(graph: ComputeGraph, solver: str, budgets: Iterable[int], time_limit: float | None = None,
          **options: Any) -> list[SweepRow]:
    """Solve at each budget: one (budget, peak, cost, seconds) row per budget, in the order given."""
    rows = []
    for budget in budgets:
        started = time.perf_counter()
        try:
            schedule = solve(graph, budget, solver, time_limit=time_limit, **options)
        except InfeasibleBudget:
            rows.append(SweepRow(check_budget(budget), None, None, time.perf_counter() - started))
            continue
        rows.append(SweepRow(schedule.budget, schedule.stats["peak"], schedule.stats["cost"],
                             time.perf_counter() - started))
    return rows
