"""Everything expensive, cached by the graph's content hash.

``st.cache_data`` holds results (schedules, figures, HTML), ``st.cache_resource`` the shared
background sweep runner. Arguments that cannot be hashed (the graph) carry a leading ``_`` and
the content hash stands in for them in the key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import streamlit as st

from remat_core import ComputeGraph, InfeasibleBudget, RematError, Schedule, get_solver, solve
from remat_core.pareto import ParetoCurve, budget_grid, pareto_curve
from remat_core.timeline import simulation_of
from remat_core.views import full_view, module_view, neighbourhood_view
from remat_core.viz import dag_html, lifetime_chart, memory_timeline_figure

SWEEP_POINTS = 14
EXACT_SWEEP_POINTS = 6
"""Exact solvers take seconds per budget: their curves get fewer points."""
SWEEP_WAIT_SECONDS = 2.0
"""A page waits this long for a sweep before showing its progress and polling instead."""
KEPT_SWEEPS = 48


@dataclass(frozen=True)
class Outcome:
    """A solve's result as the pages need it: a schedule, or why there is none.

    Attributes
    ----------
    schedule : Schedule or None
    infeasible : str or None
        Why the budget is infeasible (the solver's detail, else the whole
        :class:`~remat_core.InfeasibleBudget` message).
    smallest_feasible : int or None
        The smallest budget the solver named as feasible.
    error : str or None
        Any other :class:`~remat_core.RematError` (a bad option, a solver bug caught by the simulator).
    """

    schedule: Schedule | None = None
    infeasible: str | None = None
    smallest_feasible: int | None = None
    error: str | None = None


def options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Options as a sorted tuple: hashable, and equal for equal choices."""
    return tuple(sorted(options.items()))


@st.cache_data(max_entries=256, show_spinner=False)
def solve_outcome(graph_key: str, _graph: ComputeGraph, solver: str, budget: int,
                  options: tuple[tuple[str, Any], ...], time_limit: float | None) -> Outcome:
    """:func:`remat_core.solve` at one budget, cached; infeasibility and errors become an :class:`Outcome`."""
    del graph_key  # the cache key of _graph
    try:
        return Outcome(schedule=solve(_graph, budget, solver, time_limit=time_limit, **dict(options)))
    except InfeasibleBudget as e:
        return Outcome(infeasible=e.detail or str(e), smallest_feasible=e.smallest_feasible)
    except RematError as e:
        return Outcome(error=str(e))


def computes_at(graph: ComputeGraph, solver: str, tensor: str, options: tuple, time_limit: float | None):
    """``budget -> how many times the solver computes tensor`` (None: infeasible), through the solve cache."""
    def count(budget: int) -> int | None:
        outcome = solve_outcome(graph.content_hash, graph, solver, int(budget), options, time_limit)
        if outcome.schedule is None:
            return None
        return simulation_of(outcome.schedule).compute_counts.get(tensor, 0)
    return count


# -- background sweeps ------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepStatus:
    """Where a sweep stands: its curve once done, else how far it got; ``error`` if it failed."""

    curve: ParetoCurve | None
    done: int
    total: int
    error: str | None = None


class SweepRunner:
    """Runs Pareto sweeps one at a time on a background thread, shared by every session.

    Sweeps are keyed by graph hash, solver, options and time limit; a finished sweep is kept (the
    oldest dropped beyond :data:`KEPT_SWEEPS`), so a second visitor or a page switch finds it ready.
    """

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="remat-sweep")
        self._futures: OrderedDict[tuple, Future] = OrderedDict()
        self._progress: dict[tuple, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def submit(self, graph: ComputeGraph, solver: str, options: tuple, time_limit: float | None) -> tuple:
        """Start the sweep unless it is running or done; returns its key."""
        key = (graph.content_hash, solver, options, time_limit)
        with self._lock:
            if key in self._futures:
                self._futures.move_to_end(key)
                return key
            points = EXACT_SWEEP_POINTS if get_solver(solver).exact else SWEEP_POINTS
            budgets = budget_grid(graph, points)
            self._progress[key] = (0, len(budgets))

            def report(done: int, total: int) -> None:
                self._progress[key] = (done, total)
            self._futures[key] = self._executor.submit(pareto_curve, graph, solver, budgets, time_limit, report,
                                                       **dict(options))
            self._drop_old()
        return key

    def status(self, key: tuple, wait: float = 0.0) -> SweepStatus:
        """The sweep's status, waiting up to ``wait`` seconds for it to finish."""
        future = self._futures[key]
        try:
            curve = future.result(timeout=wait) if wait > 0 else (future.result() if future.done() else None)
        except TimeoutError:
            curve = None
        except RematError as e:
            done, total = self._progress[key]
            return SweepStatus(None, done, total, error=str(e))
        done, total = self._progress[key]
        return SweepStatus(curve, done, total)

    def _drop_old(self) -> None:
        finished = [k for k, f in self._futures.items() if f.done()]
        while len(self._futures) > KEPT_SWEEPS and finished:
            key = finished.pop(0)
            del self._futures[key]
            del self._progress[key]


@st.cache_resource
def sweep_runner() -> SweepRunner:
    """The one sweep runner of this server process."""
    return SweepRunner()


def sweep_status(graph: ComputeGraph, solver: str, options: tuple, time_limit: float | None,
                 wait: float = SWEEP_WAIT_SECONDS) -> SweepStatus:
    """Start (or find) the sweep of ``solver`` on ``graph`` and report on it."""
    runner = sweep_runner()
    return runner.status(runner.submit(graph, solver, options, time_limit), wait=wait)


# -- figures and views ------------------------------------------------------------------------------

@st.cache_data(max_entries=32, show_spinner=False)
def timeline_figures(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                     time_limit: float | None, lifetime_rows: int) -> tuple[dict, dict]:
    """The animated memory timeline and the lifetime chart of one solve, as plotly dicts."""
    outcome = solve_outcome(graph_key, _graph, solver, budget, options, time_limit)
    if outcome.schedule is None:
        raise ValueError("timeline_figures needs a feasible solve; check solve_outcome first")
    return (memory_timeline_figure(_graph, outcome.schedule).to_dict(),
            lifetime_chart(_graph, outcome.schedule, max_rows=lifetime_rows).to_dict())


@st.cache_data(max_entries=24, show_spinner=False)
def dag_page(graph_key: str, _graph: ComputeGraph, level: str, depth: int, centre: str | None, hops: int,
             highlight: tuple[str, ...], focus: str | None) -> tuple[str, int]:
    """The DAG's HTML for one view (``op``, ``module`` or ``neighbourhood``) and how many nodes it draws."""
    del graph_key
    if level == "module":
        view = module_view(_graph, depth)
    elif level == "neighbourhood":
        view = neighbourhood_view(_graph, centre, hops)
    else:
        view = full_view(_graph)
    marked = view.view_ids_of(highlight)
    target = view.member_of.get(focus) if focus else None
    return dag_html(view, highlight=marked, focus=target), len(view.nodes)
