"""Solves through the results store: read before solving, write after.

:func:`stored_solve` is the one path every user of the store takes (the ``solve`` command,
:mod:`remat_core.batch` for ``compare``, ``sweep`` and ``study``, the explorer's solve job) and
answers with a :class:`~remat_core.solvers.SolveOutcome`, as
:func:`~remat_core.solvers.solve_outcome` does. A stored schedule is never trusted as stored:
:func:`simulated` runs it through the one simulator with the budget enforced before it is returned,
and one that no longer simulates (the graph's ids or the simulator's rules changed under it) is
dropped, with a warning, and solved again. Stored infeasibility is returned as stored (there is no
schedule to check).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..errors import InvalidSchedule, ScheduleFormatError
from ..graph import ComputeGraph
from ..schedule import AllocatorConfig, Link, Schedule, replay, schedule_stats, simulate
from ..solvers import DEFAULT_SOLVER, FEASIBLE, INFEASIBLE, SolveOutcome, solve_outcome
from .database import ResultStore, StoredResult
from .keys import ResultKey, result_key
from .location import store_path

FROM_STORE, STORED_AT = "from_store", "stored_at"
"""``solver_info`` keys of a schedule read from the store: True, and when it was stored (ISO 8601 UTC)."""
CONFIGURED = "configured"
"""``stored_solve(store=CONFIGURED)``: the store this process is configured with (:func:`configured_store`)."""

_log = logging.getLogger(__name__)
_open_stores: dict[str, ResultStore] = {}


def configured_store() -> ResultStore | None:
    """The store ``REMAT_STORE`` names, else the default one (None when ``REMAT_STORE=off``), opened once per
    process and path."""
    path = store_path()
    if path is None:
        return None
    key = str(path)
    if key not in _open_stores:
        _open_stores[key] = ResultStore(path)
    return _open_stores[key]


def simulated(graph: ComputeGraph, schedule: Schedule, budget: int, solve_seconds: float,
              allocator: AllocatorConfig | None = None, link: Link | None = None) -> Schedule:
    """``schedule`` measured again by the simulator (budget enforced), as :func:`remat_core.solve` returns one
    (with ``allocator``, its reserved and allocated peaks replayed again too; with ``link``, timed over it).

    Raises
    ------
    InvalidSchedule
        When it breaks a rule or the budget on ``graph``.
    """
    result = simulate(graph, schedule, budget=budget, link=link)
    stats = {**schedule_stats(graph, result), "solve_seconds": solve_seconds}
    if allocator is not None:
        stats.update(replay(graph, schedule, allocator).peaks)
    return schedule.with_updates(graph=graph.name, budget=budget, simulation=result, stats=stats)


def lookup(store: ResultStore, graph: ComputeGraph, key: ResultKey,
           allocator: AllocatorConfig | None = None, link: Link | None = None) -> SolveOutcome | None:
    """The outcome stored under ``key``, its schedule simulated again (None: not stored, or dropped)."""
    stored = store.get(key)
    if stored is None:
        return None
    common = {"seconds": stored.seconds, "from_store": True}
    if stored.status == INFEASIBLE:
        return SolveOutcome(key.solver, key.budget, INFEASIBLE, smallest_feasible=stored.smallest_feasible,
                            detail=stored.detail, **common)
    try:
        schedule = simulated(graph, Schedule.from_json(stored.schedule), key.budget, stored.seconds, allocator, link)
    except (InvalidSchedule, ScheduleFormatError) as e:
        _log.warning("warning: dropped the stored %s schedule of %s at %s bytes: it no longer simulates (%s); "
                     "solving again", key.solver, graph.name, f"{key.budget:,}", e)
        store.drop(key)
        return None
    info = {**schedule.solver_info, FROM_STORE: True,
            STORED_AT: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stored.created))}
    return SolveOutcome(key.solver, key.budget, FEASIBLE, schedule.with_updates(solver_info=info), **common)


def stored_schedule(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
                    *, store: ResultStore | str | None = CONFIGURED, link: Link | None = None,
                    **options: Any) -> Schedule:
    """:func:`stored_solve`'s schedule, or the error :func:`~remat_core.solve` raises where there is none: a
    drop-in ``solve`` that plans once per graph, budget, solver and options (a second start reads the plan back)."""
    return stored_solve(graph, budget, solver, time_limit, store=store, link=link, **options).schedule_or_raise()


def record(store: ResultStore, graph: ComputeGraph, key: ResultKey, outcome: SolveOutcome) -> None:
    """Store a fresh feasible or infeasible outcome (a search stopped at its time limit, a refusal and a
    failure are not results to keep)."""
    if outcome.from_store or outcome.status not in (FEASIBLE, INFEASIBLE):
        return
    document = outcome.schedule.to_json() if outcome.schedule is not None else None
    store.put(key, graph.name, StoredResult(outcome.status, document, outcome.smallest_feasible, outcome.detail,
                                            outcome.seconds))


def stored_solve(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, *,
                 store: ResultStore | str | None = CONFIGURED, spent: float = 0.0,
                 allocator: AllocatorConfig | None = None, link: Link | None = None, **options: Any) -> SolveOutcome:
    """:func:`~remat_core.solvers.solve_outcome` through a results store: the stored outcome of this solve if
    there is one, else solved here and stored.

    ``store``: a :class:`ResultStore`, None (no store), or :data:`CONFIGURED` (the one ``REMAT_STORE``
    or the default path names). ``spent``: seconds of ``time_limit`` already used before the call
    (reading the graph): the solve gets the rest, and the result is keyed by the limit as asked, so
    that the same command finds it again. A schedule from the store carries
    ``solver_info["from_store"]`` and ``["stored_at"]``.

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        Before anything is read or solved, as :func:`~remat_core.solvers.solve_outcome` does.
    """
    chosen = configured_store() if isinstance(store, str) and store == CONFIGURED else store
    key = result_key(graph, budget, solver, time_limit, options, allocator, link)
    if chosen is not None:
        hit = lookup(chosen, graph, key, allocator, link)
        if hit is not None:
            return hit
    left = time_limit if time_limit is None else max(time_limit - spent, min(time_limit, 0.01))
    outcome = solve_outcome(graph, budget, solver, left, allocator=allocator, link=link, **options)
    if chosen is not None:
        record(chosen, graph, key, outcome)
    return outcome
