"""Everything expensive, cached by the graph's content hash.

Exact solves and Pareto sweeps run in worker processes (:class:`BackgroundRunner`, one per kind,
held by ``st.cache_resource``) and their results are kept by key, so that a page can show an
estimate while an exact solve runs, and a solver computing for seconds neither freezes the app nor
slows its thread (a worker thread would share the interpreter lock with it). A sweep is one job
per budget, so its progress is the number of finished points. ``st.cache_data`` holds figures and
HTML; arguments that cannot be hashed (the graph) carry a leading ``_`` and the content hash
stands in for them in the key.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.pool import AsyncResult
from typing import Any, Callable

import streamlit as st

from remat_core import ComputeGraph, RematError, Schedule, get_solver
from remat_core.analysis import ParetoCurve, full_view, module_view, neighbourhood_view, sweep_budgets
from remat_core.schedule import checkpoint_all_cost, simulation_of
from remat_core.viz import dag_html, lifetime_candidates, lifetime_chart, memory_timeline_figure

from .state import Model
from .worker import (CheckOutcome, Outcome, lp_bound_job, outcome_job, portable, share_cores, sweep_point_job,
                     tensor_check_job)

SWEEP_POINTS = 14
EXACT_SWEEP_POINTS = 6
"""Exact solvers take seconds per budget: their curves get fewer points."""
SWEEP_WAIT_SECONDS = 2.0
"""A page waits this long for a sweep before showing its progress and polling instead."""
KEPT_JOBS = 512
LONGEST_WAIT_SECONDS = 900.0
"""``solve_outcome(wait=None)`` gives up after this long (a worker that died leaves its job unanswered)."""
WAIT_MARGIN_SECONDS = 10.0
"""A page waiting on a solve gives it its time limit plus this (queueing behind other solves, simulating,
sending the schedule back) before saying it is still running."""
SOLVE_WAIT_SECONDS = 0.15
"""The Schedule page waits this long for the exact solve at a new budget before showing the sweep's
estimate and polling for the exact result."""

__all__ = ["Outcome", "SOLVE_WAIT_SECONDS", "SolveStillRunning", "SweepStatus", "best_possible", "computes_at",
           "dag_page", "lifetime_figure", "memory_figure", "options_key", "solve_outcome", "solve_wait_seconds",
           "sweep_status"]


def options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Options as a sorted tuple: hashable, and equal for equal choices."""
    return tuple(sorted(options.items()))


class BackgroundRunner:
    """Jobs run in one worker process and kept by key, shared by every session of this server.

    Submitting a key already known returns the job that is running or done, so a second visitor,
    a page switch or a slider coming back finds it ready. At most :data:`KEPT_JOBS` finished jobs
    are kept, the least recently asked for dropped first. The worker is started with ``spawn``
    (the server has threads, which ``fork`` must not copy) and stopped when the server exits.
    """

    def __init__(self, name: str, initializer: Callable[[], None] | None = None) -> None:
        self.name = name
        self._pool = multiprocessing.get_context("spawn").Pool(processes=1, initializer=initializer)
        self._jobs: OrderedDict[tuple, AsyncResult] = OrderedDict()
        self._lock = threading.Lock()
        atexit.register(self._pool.terminate)

    def stop(self) -> None:
        """Stop the worker now, dropping every job (running or kept)."""
        with self._lock:
            self._pool.terminate()
            self._jobs.clear()

    def find(self, key: tuple) -> AsyncResult | None:
        """The job kept under ``key`` (running or done), or None if none was submitted (or it was dropped)."""
        with self._lock:
            return self._jobs.get(key)

    def forget(self, key: tuple) -> None:
        """Drop the job kept under ``key`` (a later submit runs it again)."""
        with self._lock:
            self._jobs.pop(key, None)

    def submit(self, key: tuple, job: Callable[..., Any], *args: Any) -> AsyncResult:
        """The job's handle, starting ``job(*args)`` in the worker unless that key is running or done."""
        with self._lock:
            if key in self._jobs:
                self._jobs.move_to_end(key)
                return self._jobs[key]
            self._jobs[key] = self._pool.apply_async(job, args)
            finished = [k for k, j in self._jobs.items() if j.ready()]
            while len(self._jobs) > KEPT_JOBS and finished:
                del self._jobs[finished.pop(0)]
            return self._jobs[key]


def stop_background_work() -> None:
    """Stop every worker and forget their results; the next request starts fresh workers."""
    for runner in (solve_runner, sweep_runner, exact_sweep_runner, execute_runner):
        runner().stop()
        runner.clear()


def _result(job: AsyncResult, wait: float | None) -> Any:
    """The job's result, waiting up to ``wait`` seconds (None: up to :data:`LONGEST_WAIT_SECONDS`);
    None if it is not done by then.

    A job's exception is raised here, in the app's process.
    """
    job.wait(LONGEST_WAIT_SECONDS if wait is None else max(wait, 0))
    return job.get() if job.ready() else None


@st.cache_resource
def solve_runner() -> BackgroundRunner:
    """The exact solves of this server process."""
    return BackgroundRunner("solve")


@st.cache_resource
def sweep_runner() -> BackgroundRunner:
    """The Pareto sweeps of the heuristic solvers (their own worker, beside the solves)."""
    return BackgroundRunner("sweep")


@st.cache_resource
def exact_sweep_runner() -> BackgroundRunner:
    """The Pareto sweeps of the exact solvers and the LP bounds (seconds to minutes per point: a worker
    of their own, so that a MILP sweep or an LP never holds up the heuristics' curves)."""
    return BackgroundRunner("exact-sweep")


@st.cache_resource
def execute_runner() -> BackgroundRunner:
    """Schedules run on real tensors (PyTorch in a worker of its own, on half the cores)."""
    return BackgroundRunner("execute", initializer=share_cores)


def solve_key(graph: ComputeGraph, solver: str, budget: int, options: tuple, time_limit: float | None) -> tuple:
    """What a solve's result is kept under: the graph's content hash, the solver, budget, options and time limit."""
    return graph.content_hash, solver, int(budget), options, time_limit


def solve_outcome(graph: ComputeGraph, solver: str, budget: int, options: tuple, time_limit: float | None,
                  wait: float | None = None) -> Outcome | None:
    """The solve at ``budget``, computed once in the background and kept.

    ``wait=None`` blocks until it is done (an error outcome after :data:`LONGEST_WAIT_SECONDS`); a
    number waits at most that many seconds and returns None if the solve is still running (the
    Schedule page then shows the sweep's estimate).
    """
    key = solve_key(graph, solver, budget, options, time_limit)
    job = solve_runner().submit(key, outcome_job, portable(graph), solver, int(budget), options, time_limit)
    outcome = _result(job, wait)
    if outcome is None and wait is None:
        return Outcome(error=f"the solve did not finish within {LONGEST_WAIT_SECONDS:.0f} s (its worker may have "
                             f"stopped); reload the page to start a fresh one, or set a shorter time limit")
    return outcome


def solve_wait_seconds(time_limit: float | None) -> float:
    """How long a page waits for one solve: its time limit plus :data:`WAIT_MARGIN_SECONDS`."""
    return (time_limit or 0.0) + WAIT_MARGIN_SECONDS


class SolveStillRunning(Exception):
    """A solve waited for :func:`solve_wait_seconds` is still running (queued, or slower than its limit)."""


def computes_at(graph: ComputeGraph, solver: str, tensor: str, options: tuple, time_limit: float | None):
    """``budget -> how many times the solver computes tensor`` (None: infeasible), through the kept solves.

    Raises :class:`SolveStillRunning` when a solve is not done within :func:`solve_wait_seconds`.
    """
    def count(budget: int) -> int | None:
        outcome = solve_outcome(graph, solver, int(budget), options, time_limit, wait=solve_wait_seconds(time_limit))
        if outcome is None:
            raise SolveStillRunning(f"the solve at {int(budget):,} bytes is still running")
        if outcome.schedule is None:
            return None
        return simulation_of(outcome.schedule).compute_counts.get(tensor, 0)
    return count


@dataclass(frozen=True)
class SweepStatus:
    """Where a sweep stands: its curve once done, else how many of its budgets are solved; ``error`` if one failed."""

    curve: ParetoCurve | None
    done: int
    total: int
    error: str | None = None


def sweep_status(graph: ComputeGraph, solver: str, options: tuple, time_limit: float | None,
                 wait: float = SWEEP_WAIT_SECONDS) -> SweepStatus:
    """Start (or find) the Pareto sweep of ``solver`` on ``graph``: one job per budget of its grid.

    Waits up to ``wait`` seconds for the whole sweep before reporting how far it got.
    """
    exact = get_solver(solver).exact
    runner = exact_sweep_runner() if exact else sweep_runner()
    budgets = sweep_budgets(graph, EXACT_SWEEP_POINTS if exact else SWEEP_POINTS)
    source = portable(graph)
    jobs = [runner.submit(solve_key(graph, solver, b, options, time_limit), sweep_point_job, source, solver, b,
                          options, time_limit) for b in budgets]
    if wait > 0 and jobs:
        jobs[-1].wait(wait)
    try:
        points = [_result(job, 0) for job in jobs]
    except RematError as e:
        return SweepStatus(None, sum(j.ready() for j in jobs), len(jobs), error=str(e))
    done = sum(p is not None for p in points)
    if done < len(jobs):
        return SweepStatus(None, done, len(jobs))
    curve = ParetoCurve(solver=solver, options=dict(options), points=tuple(sorted(points, key=lambda p: p.budget)),
                        base_cost=checkpoint_all_cost(graph))
    return SweepStatus(curve, done, len(jobs))


def best_possible(graph: ComputeGraph, time_limit: float | None) -> list[tuple[int, float]]:
    """Checkmate's LP lower bound on the overhead at each sweep budget: ``[(budget, overhead), ...]``.

    The budgets whose LP is still running, or has no bound (infeasible relaxation, unproven in
    time, a graph too large for the LP), are left out. Computed in the exact-sweep worker, one LP
    per budget (an LP over a 200-node graph takes over a minute on two cores).
    """
    runner = exact_sweep_runner()
    source = portable(graph)
    bounds = []
    for budget in sweep_budgets(graph, EXACT_SWEEP_POINTS):
        job = runner.submit((graph.content_hash, "lp-bound", budget, time_limit), lp_bound_job, source, budget,
                            time_limit)
        overhead = _result(job, 0)
        if overhead is not None:
            bounds.append((budget, overhead))
    return bounds


# -- runs on real tensors ---------------------------------------------------------------------------

def start_tensor_check(model: Model, schedule: Schedule, key: tuple) -> None:
    """Run ``schedule`` on the real tensors of ``model`` in the execution worker, kept under ``key``
    (see :func:`solve_key`); a run under that key that is running or succeeded is not started again,
    one that failed is (pressing the button again retries it)."""
    if model.rebuild is None:
        raise ValueError("start_tensor_check needs a model with a rebuild; check why_not_runnable first")
    runner = execute_runner()
    kept = runner.find(key)
    if kept is not None and kept.ready() and kept.get().error is not None:
        runner.forget(key)
    runner.submit(key, tensor_check_job, portable(model.graph), model.rebuild, schedule)


def tensor_check_status(key: tuple, wait: float = 0) -> tuple[bool, CheckOutcome | None]:
    """Whether a run was started under ``key``, and its outcome once done (waiting up to ``wait`` seconds)."""
    job = execute_runner().find(key)
    if job is None:
        return False, None
    return True, _result(job, wait)


# -- figures and views ------------------------------------------------------------------------------

@st.cache_data(max_entries=32, show_spinner=False)
def memory_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                  time_limit: float | None, measured: tuple[int, ...] | None = None) -> dict:
    """The animated memory timeline of one solve (with the ``measured`` bytes after each op, when the
    schedule was run on real tensors), as a plotly dict."""
    return memory_timeline_figure(_graph, _feasible(_graph, solver, budget, options, time_limit),
                                  measured=measured).to_dict()


@st.cache_data(max_entries=32, show_spinner=False)
def lifetime_figure(graph_key: str, _graph: ComputeGraph, solver: str, budget: int, options: tuple,
                    time_limit: float | None, max_rows: int, recomputed_only: bool,
                    module: str | None) -> tuple[dict, int]:
    """The lifetime chart of one solve (rows as :func:`remat_core.viz.timeline.lifetime_candidates` picks
    them) as a plotly dict, and how many tensors could be shown."""
    schedule = _feasible(_graph, solver, budget, options, time_limit)
    total = len(lifetime_candidates(_graph, schedule, recomputed_only, module))
    return lifetime_chart(_graph, schedule, max_rows=max_rows, recomputed_only=recomputed_only,
                          module=module).to_dict(), total


def _feasible(graph: ComputeGraph, solver: str, budget: int, options: tuple, time_limit: float | None) -> Schedule:
    outcome = solve_outcome(graph, solver, budget, options, time_limit)
    if outcome.schedule is None:
        raise ValueError("the timeline figures need a feasible solve; check solve_outcome first")
    return outcome.schedule


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
