"""The front door to every solver: :func:`solve` (a schedule or an exception), :func:`solve_outcome` (the
same solve as one :class:`~remat_core.solvers.outcome.SolveOutcome`) and :func:`sweep`.

Both check the budget and the options, call the registered solver, then simulate what it returned:
the simulator, never the solver, measures peak and cost. Every function here takes
``(graph, budget, solver, time_limit, **options)`` in that order.
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Any, Iterable

from ..errors import (BudgetError, InfeasibleBudget, InvalidSchedule, RematError, SearchStopped, SolverOptionError,
                      first_line)
from ..graph import ComputeGraph, with_workspaces, without_workspaces
from ..schedule import (AllocatorConfig, Link, Schedule, checkpoint_all_peak, measure_indexed, memory_lower_bound,
                         replay, schedule_stats, simulate)
from .outcome import FAILED, FEASIBLE, INFEASIBLE, REFUSED, STOPPED, SolveOutcome
from .registry import SolverSpec, get_solver
from .retry import Shrink, solve_until

DEFAULT_SOLVER = "auto"
RETRIES = 3
"""Times a solver is asked again for less when its schedule, read back from the workspace view, is over the budget
(:func:`~remat_core.solvers.retry.solve_until`)."""
RESERVED_TRIES = 8
"""Solves, each for less, for a schedule whose replayed reserved bytes fit the budget."""


def solve(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, *,
          allocator: AllocatorConfig | None = None, link: Link | None = None, **options: Any) -> Schedule:
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
    allocator : AllocatorConfig, optional
        Plan against *reserved* bytes: the budget holds what PyTorch's caching allocator with these
        settings reserves when it serves the schedule's allocations (:func:`~remat_core.schedule.replay`),
        rounding, pools and fragmentation included. The solver is asked again with less, up to
        :data:`RETRIES` times, while the replayed reserved peak is over the budget.
    link : Link, optional
        A transfer lane to the host: solvers that offload (tag ``offloads``) may copy tensors out and
        back over it and minimise the makespan; every schedule is timed over it (``stats`` gain
        ``makespan``, the stalls, the host peak and the bytes moved).
    **options
        The solver's declared options.

    Returns
    -------
    Schedule
        With ``stats`` measured by the simulator (peak, cost, computes, recomputes, overhead,
        solve_seconds; with ``allocator``, also peak_reserved and peak_allocated from the replay; with
        ``link``, the transfer lane's figures) and
        ``simulation`` attached.

    Raises
    ------
    BudgetError
        If the budget is not a non-negative whole number of bytes.
    UnknownSolver, SolverOptionError
        For a solver or option that does not exist.
    InfeasibleBudget
        If no schedule the solver can build fits; below :func:`memory_lower_bound` no solver can.
        :class:`~remat_core.errors.SearchStopped` (a subclass) when a search reached its time limit
        before it found one.
    InvalidSchedule
        If the solver returned a schedule that breaks a simulator rule or the budget (a solver bug).
    """
    spec = get_solver(solver)
    budget = check_budget(budget)
    check_time_limit(time_limit)
    bound_options = spec.bind(options)
    if spec.tags.offloads:
        bound_options["link"] = link
    if spec.tags.needs_traced_model and not graph.attachments.executable:
        raise SolverOptionError(f"not applicable: {solver} is a policy over a model's blocks and ops, so it needs a "
                                f"model traced here (the zoo, --model, a .pt2 file); graph {graph.name!r} carries "
                                f"sizes and costs only")
    lower = memory_lower_bound(graph)
    if budget < lower:
        raise InfeasibleBudget(budget, checkpoint_all_peak(graph), solver,
                               f"below the lower bound of {lower:,} bytes that any schedule needs")
    started = time.perf_counter()
    reserved: dict[str, int] = {}
    try:
        if allocator is None:
            schedule = _solved_with_workspaces(spec, graph, budget, time_limit, bound_options, link)
        else:
            schedule, reserved = _solved_within_reserved(spec, graph, budget, time_limit, bound_options,
                                                         allocator, link)
    except InfeasibleBudget as e:
        raise type(e)(e.budget, e.smallest_feasible, e.solver or solver, e.detail) from None
    seconds = time.perf_counter() - started
    try:
        result = simulate(graph, schedule, budget=budget, link=link)
    except InvalidSchedule as e:
        raise InvalidSchedule(e.step, e.op, f"solver '{solver}' returned a bad schedule: {e.reason}") from None
    stats = {**schedule_stats(graph, result), **reserved, "solve_seconds": seconds}
    if allocator is not None:
        schedule = schedule.with_updates(solver_info={**schedule.solver_info, "memory": "reserved",
                                                      "allocator": allocator.text()})
    if link is not None:
        schedule = schedule.with_updates(solver_info={**schedule.solver_info, "link": link.describe()})
    return schedule.with_updates(graph=graph.name, solver=solver, budget=budget, stats=stats, simulation=result)


def _solved_within_reserved(spec: SolverSpec, graph: ComputeGraph, budget: int, time_limit: float | None,
                            options: dict[str, Any], allocator: AllocatorConfig, link: Link | None
                            ) -> tuple[Schedule, dict[str, int]]:
    """A schedule whose allocations, replayed through the caching allocator, reserve at most ``budget`` bytes:
    solved for the bytes the tensors hold, then asked again with less (what the replay reserved above the
    budget, at least a tenth of the way to the lower bound), in :data:`RESERVED_TRIES` solves at most; with the
    replay's peaks."""
    replays: dict[int, Any] = {}

    def reserved(schedule: Schedule) -> int:
        replays[id(schedule)] = replay(graph, schedule, allocator)
        return replays[id(schedule)].peak_reserved

    search = solve_until(lambda asked: _solved_with_workspaces(spec, graph, asked, time_limit, options, link),
                         budget, reserved, Shrink(memory_lower_bound(graph), RESERVED_TRIES, least_part=10))
    if search.accepted is not None:
        return search.accepted.schedule, replays[id(search.accepted.schedule)].peaks
    last = replays[id(search.best_rejected.schedule)]
    settings = f" ({allocator.text()})" if allocator.text() else ""
    raise InfeasibleBudget(budget, None, "", f"the caching allocator{settings} reserves {last.peak_reserved:,} "
                                             f"bytes for the best schedule found (rounding, segments and "
                                             f"fragmentation over the {last.peak_allocated:,} bytes it hands out)")


def _solved_with_workspaces(spec: SolverSpec, graph: ComputeGraph, budget: int, time_limit: float | None,
                            options: dict[str, Any], link: Link | None = None) -> Schedule:
    """The solver's schedule of ``graph``: solved on the graph with what each kernel holds while it runs as a
    workspace node (:func:`~remat_core.graph.with_workspaces`), so that every solver plans for it, then read
    back onto ``graph``'s own nodes (a solver tagged ``sees_transients`` gets ``graph`` itself).

    A schedule that computes a multi-output op's outputs apart holds more than the workspace view shows
    (each call allocates every output): when the simulator finds it over the budget, the solver is asked
    again with that much less, in :data:`RETRIES` more solves at most.
    """
    function = spec.function
    expanded = graph if spec.tags.sees_transients else with_workspaces(graph)
    if expanded is graph:
        return function(graph, budget, time_limit=time_limit, **options)

    def solved(asked: int) -> Schedule:
        schedule = function(expanded, asked, time_limit=time_limit, **options)
        ops, reasons = without_workspaces(graph, schedule.ops, schedule.reasons)
        return Schedule.from_ops(ops, reasons, solver_info=schedule.solver_info)

    def peak(schedule: Schedule) -> int:
        return measure_indexed(graph, [(a, graph.index[v]) for a, v in schedule.ops], link=link)[0]

    search = solve_until(solved, budget, peak, Shrink(memory_lower_bound(expanded), RETRIES + 1))
    if search.accepted is not None:
        return search.accepted.schedule
    raise InfeasibleBudget(budget, None, "", f"its schedules compute a multi-output op's outputs apart, and each "
                                             f"call of the op allocates all of them: the best one peaks at "
                                             f"{search.best_rejected.peak:,} bytes")


def solve_outcome(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, *,
                  allocator: AllocatorConfig | None = None, link: Link | None = None, **options: Any) -> SolveOutcome:
    """:func:`solve` as one value: a feasible outcome with its schedule, or why there is none.

    An infeasible budget, a search stopped at its time limit, a graph the solver refuses and a
    solve that fails with a :class:`~remat_core.RematError` (a decomposition a method refused, a
    solver's declared limit; a bad schedule the simulator caught is a solver bug, marked
    ``internal``) all become outcomes, so that a table of solves, a store or a
    worker never loses the others to one of them.

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        Before anything is solved: a typo is never an outcome.
    Exception
        Anything else is a bug of this package and propagates (a worker turns it into a failed
        outcome marked ``internal``: :func:`remat_core.batch.solve_cell`).
    """
    spec = get_solver(solver)
    check_budget(budget)
    check_time_limit(time_limit)
    spec.bind(options)
    started = time.perf_counter()

    def ended(status: str, **fields: Any) -> SolveOutcome:
        return SolveOutcome(solver, int(budget), status, seconds=time.perf_counter() - started, **fields)

    try:
        schedule = solve(graph, budget, solver, time_limit=time_limit, allocator=allocator, link=link, **options)
    except SearchStopped as e:
        return ended(STOPPED, smallest_feasible=e.smallest_feasible, detail=e.detail)
    except InfeasibleBudget as e:
        return ended(INFEASIBLE, smallest_feasible=e.smallest_feasible, detail=e.detail)
    except SolverOptionError as e:  # a solver that refuses this graph (too large for its formulation)
        return ended(REFUSED, detail=str(e))
    except InvalidSchedule as e:  # the solver's schedule broke a rule: a bug of the solver
        return ended(FAILED, detail=f"{type(e).__name__}: {first_line(e)}", internal=True)
    except RematError as e:  # a decomposition a method refused, a solver's declared limit, ...
        return ended(FAILED, detail=f"{type(e).__name__}: {first_line(e)}")
    return SolveOutcome(solver, schedule.budget, FEASIBLE, schedule, seconds=schedule.stats["solve_seconds"])


def check_budget(budget: Any) -> int:
    """``budget`` as an int number of bytes; :class:`BudgetError` unless it is a whole number >= 0."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not math.isfinite(budget):
        raise BudgetError(f"budget must be a whole number of bytes, got {budget!r}")
    if budget < 0 or budget != int(budget):
        raise BudgetError(f"budget must be a non-negative whole number of bytes, got {budget!r}")
    return int(budget)


def check_time_limit(time_limit: Any) -> None:
    """:class:`BudgetError` unless ``time_limit`` is None or a positive number of seconds."""
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real)
                                   or not time_limit > 0):
        raise BudgetError(f"time_limit must be a positive number of seconds or None, got {time_limit!r}")


def sweep(graph: ComputeGraph, budgets: Iterable[int], solver: str = DEFAULT_SOLVER, time_limit: float | None = None, *,
          allocator: AllocatorConfig | None = None, link: Link | None = None, **options: Any) -> list[SolveOutcome]:
    """:func:`solve_outcome` at each budget, in the order given."""
    return [solve_outcome(graph, budget, solver, time_limit, allocator=allocator, link=link, **options)
            for budget in budgets]


__all__ = ["DEFAULT_SOLVER", "FAILED", "FEASIBLE", "INFEASIBLE", "REFUSED", "STOPPED", "check_budget",
           "check_time_limit", "solve", "solve_outcome", "sweep"]
