"""Solves through the results store: read before solving, write after.

:func:`solve_through_store` is the one path every user of the store takes (the ``solve`` command,
:mod:`remat_core.batch` for ``compare``, ``sweep`` and ``study``, the explorer's solve job through
:func:`solve_stored`). A stored schedule is never trusted as stored: :func:`simulated` runs it
through the one simulator with the budget enforced before it is returned, and one that no longer
simulates (the graph's ids or the simulator's rules changed under it) is dropped, with a warning,
and solved again. Stored infeasibility is returned as stored (there is no schedule to check).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..analysis import FEASIBLE, INFEASIBLE, SolveOutcome, attempt_solve
from ..errors import InvalidSchedule, ScheduleFormatError
from ..graph import ComputeGraph
from ..schedule import Schedule, schedule_stats, simulate
from ..solvers import DEFAULT_SOLVER
from .database import StoredResult, ResultStore
from .keys import ResultKey, result_key
from .location import store_path

FROM_STORE, STORED_AT = "from_store", "stored_at"
"""``solver_info`` keys of a schedule read from the store: True, and when it was stored (ISO 8601 UTC)."""
CONFIGURED = "configured"
"""``solve_stored(store=CONFIGURED)``: the store this process is configured with (:func:`configured_store`)."""

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


def simulated(graph: ComputeGraph, schedule: Schedule, budget: int, solve_seconds: float) -> Schedule:
    """``schedule`` measured again by the simulator (budget enforced), as :func:`remat_core.solve` returns one.

    Raises
    ------
    InvalidSchedule
        When it breaks a rule or the budget on ``graph``.
    """
    result = simulate(graph, schedule, budget=budget)
    return schedule.with_updates(graph=graph.name, budget=budget, simulation=result,
                                 stats={**schedule_stats(graph, result), "solve_seconds": solve_seconds})


def lookup(store: ResultStore, graph: ComputeGraph, key: ResultKey) -> SolveOutcome | None:
    """The outcome stored under ``key``, its schedule simulated again (None: not stored, or dropped)."""
    stored = store.get(key)
    if stored is None:
        return None
    common = {"solver": key.solver, "budget": key.budget, "seconds": stored.seconds, "from_store": True}
    if stored.status == INFEASIBLE:
        return SolveOutcome(status=INFEASIBLE, smallest_feasible=stored.smallest_feasible, detail=stored.detail,
                            **common)
    try:
        schedule = simulated(graph, Schedule.from_json(stored.schedule), key.budget, stored.seconds)
    except (InvalidSchedule, ScheduleFormatError) as e:
        _log.warning("warning: dropped the stored %s schedule of %s at %s bytes: it no longer simulates (%s); "
                     "solving again", key.solver, graph.name, f"{key.budget:,}", e)
        store.drop(key)
        return None
    info = {**schedule.solver_info, FROM_STORE: True,
            STORED_AT: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stored.created))}
    return SolveOutcome(status=FEASIBLE, schedule=schedule.with_updates(solver_info=info), **common)


def record(store: ResultStore, graph: ComputeGraph, key: ResultKey, outcome: SolveOutcome) -> None:
    """Store a fresh feasible or infeasible outcome (refusals and failures are not results to keep)."""
    if outcome.from_store or outcome.status not in (FEASIBLE, INFEASIBLE):
        return
    document = outcome.schedule.to_json() if outcome.schedule is not None else None
    store.put(key, graph.name, StoredResult(outcome.status, document, outcome.smallest_feasible, outcome.detail,
                                            outcome.seconds))


def solve_through_store(store: ResultStore | None, graph: ComputeGraph, solver: str, budget: int,
                        time_limit: float | None = None, **options: Any) -> SolveOutcome:
    """The stored outcome of this solve if there is one, else solved here (and stored).

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        Before anything is read or solved. A refused graph is an outcome, as in
        :func:`remat_core.analysis.attempt_solve`.
    """
    key = result_key(graph, solver, budget, time_limit, options)
    if store is not None:
        hit = lookup(store, graph, key)
        if hit is not None:
            return hit
    outcome = attempt_solve(graph, solver, budget, time_limit, **options)
    if store is not None:
        record(store, graph, key, outcome)
    return outcome


def solve_stored(graph: ComputeGraph, budget: int, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, *,
                 store: ResultStore | str | None = CONFIGURED, **options: Any) -> Schedule:
    """:func:`remat_core.solve` through a results store (by default the one this process is configured with).

    A schedule from the store carries ``solver_info["from_store"]`` and ``["stored_at"]``; a stored
    infeasible budget raises :class:`~remat_core.InfeasibleBudget` as the solve did.
    """
    chosen = configured_store() if store == CONFIGURED else store
    return solve_through_store(chosen, graph, solver, budget, time_limit, **options).schedule_or_raise()
