"""A grid of solves through a results store and a backend: what is stored is read, the rest solved, each
result stored as it arrives.

:func:`run_grid` is the one loop behind ``compare``, ``sweep`` and ``study``: it keys every cell
first (so an unknown solver or option fails before anything runs), reads the store, sends the
missing cells to the backend, and simulates every schedule that comes back in this process (a
worker's word is not taken for its peak and cost, as a stored one is not) before storing it.
:func:`compare_on` is :func:`remat_core.analysis.compare` over such a grid, its LP bounds read from
and written to the same store (:func:`stored_lp_bound`).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Callable, Mapping, Sequence

from ..analysis import LP_UNPROVEN, Bound, ComparisonRow, LowerBound, compare, lp_lower_bound
from ..errors import InvalidSchedule
from ..graph import ComputeGraph
from ..schedule import Link
from ..solvers import FAILED, SolveOutcome, solver_names
from ..store import ResultKey, ResultStore, StoredResult, lookup, package_version, record, result_key, simulated
from .backends import Backend
from .cells import Cell

OnResult = Callable[[Cell, SolveOutcome], None]
"""Called with each result as it is had (from the store or solved), e.g. to draw a progress bar."""
LP_BOUND_ENTRY = "lp-bound"
"""The store's solver column for Checkmate's LP bound at a budget (its cost column holds the bound)."""


def run_grid(graphs: Mapping[str, ComputeGraph], cells: Sequence[Cell], backend: Backend,
             store: ResultStore | None, on_result: OnResult | None = None) -> dict[Cell, SolveOutcome]:
    """Every cell's outcome: from ``store`` when it holds the cell, else solved on ``backend`` and stored.

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        For a cell that names no solver or option (before anything is read or solved).
    BackendError
        When the backend breaks (the results that arrived before are stored).
    """
    keys = {cell: result_key(graphs[cell.graph], cell.budget, cell.solver, cell.time_limit, dict(cell.options),
                             link=cell.link)
            for cell in cells}
    results: dict[Cell, SolveOutcome] = {}

    def arrived(cell: Cell, outcome: SolveOutcome) -> None:
        results[cell] = outcome
        if on_result is not None:
            on_result(cell, outcome)

    missing = []
    for cell, key in keys.items():
        hit = lookup(store, graphs[cell.graph], key, link=cell.link) if store is not None else None
        if hit is None:
            missing.append(cell)
        else:
            arrived(cell, hit)
    for cell, outcome in backend.run(graphs, missing):
        graph = graphs[cell.graph]
        outcome = _checked(graph, cell, outcome)
        if store is not None:
            record(store, graph, keys[cell], outcome)
        arrived(cell, outcome)
    return results


def _checked(graph: ComputeGraph, cell: Cell, outcome: SolveOutcome) -> SolveOutcome:
    """A worker's outcome with its schedule simulated here; one that does not simulate becomes a failure."""
    if not outcome.feasible or outcome.schedule.simulation is not None:
        return outcome
    try:
        return outcome.replace(schedule=simulated(graph, outcome.schedule, cell.budget, outcome.seconds,
                                                  link=cell.link))
    except InvalidSchedule as e:
        return outcome.replace(status=FAILED, schedule=None, detail=f"InvalidSchedule: {e}")


def compare_on(backend: Backend, store: ResultStore | None, graph: ComputeGraph, budgets: Sequence[int],
               solvers: Sequence[str] | None = None, time_limit: float | None = None, lower_bound: bool = True,
               on_result: OnResult | None = None, link: Link | None = None) -> list[ComparisonRow]:
    """:func:`remat_core.analysis.compare` with its solves read from ``store`` or run on ``backend`` (over ``link``,
    a transfer lane, when given).

    The LP bounds (``lower_bound``) come from ``store`` too, or are computed in this process, one per budget.
    """
    names = list(solvers) if solvers is not None else solver_names()
    cells = [Cell(graph.content_hash, int(budget), name, time_limit, link=link) for budget in budgets for name in names]
    outcomes = run_grid({graph.content_hash: graph}, cells, backend, store, on_result)
    return compare(graph, budgets, names, time_limit, lower_bound,
                   attempt=lambda g, budget, solver, limit: outcomes[Cell(g.content_hash, int(budget), solver, limit,
                                                                          link=link)],
                   bound=stored_lp_bound(store))


def stored_lp_bound(store: ResultStore | None) -> Bound:
    """:func:`~remat_core.analysis.lp_lower_bound` through ``store``: read when stored (keyed by graph, budget, time
    limit and version, as a solve is), else computed and stored, unless the LP stopped at its time limit."""
    def bound(graph: ComputeGraph, budget: int, time_limit: float | None) -> LowerBound:
        key = ResultKey(graph.content_hash, LP_BOUND_ENTRY, "{}", int(budget),
                        None if time_limit is None else float(time_limit), package_version())
        hit = store.get(key) if store is not None else None
        if hit is not None and isinstance(hit.schedule, dict) and isinstance(hit.schedule.get("lower_bound"), dict):
            return LowerBound(**hit.schedule["lower_bound"])
        started = time.perf_counter()
        found = lp_lower_bound(graph, budget, time_limit)
        if store is not None and found.status != LP_UNPROVEN:
            document = {"lower_bound": asdict(found), "stats": {"cost": found.value, "overhead": found.overhead}}
            store.put(key, graph.name, StoredResult(found.status, document, seconds=time.perf_counter() - started))
        return found
    return bound
