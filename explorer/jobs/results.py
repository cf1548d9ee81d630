"""Solves, sweeps, LP bounds and runs on real tensors, as jobs in the workers, kept by key.

Results are kept by (the graph's content hash, solver, budget, options, time limit), so that a page
can show an estimate while an exact solve runs and every page and session shares them. A sweep is
one job per budget, so its progress is the number of finished points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remat_core import ComputeGraph, RematError, Schedule, get_solver
from remat_core.analysis import ParetoCurve, sweep_budgets
from remat_core.schedule import checkpoint_all_cost, simulation_of

from ..state import Model
from .runner import (LONGEST_WAIT_SECONDS, exact_sweep_runner, execute_runner, job_result, solve_runner,
                     sweep_runner)
from .worker import CheckOutcome, Outcome, lp_bound_job, outcome_job, portable, sweep_point_job, tensor_check_job

SWEEP_POINTS = 14
EXACT_SWEEP_POINTS = 6
"""Exact solvers take seconds per budget: their curves get fewer points."""
SWEEP_WAIT_SECONDS = 2.0
"""A page waits this long for a sweep before showing its progress and polling instead."""
WAIT_MARGIN_SECONDS = 10.0
"""A page waiting on a solve gives it its time limit plus this (queueing behind other solves, simulating,
sending the schedule back) before saying it is still running."""
SOLVE_WAIT_SECONDS = 0.15
"""The Schedule page waits this long for the exact solve at a new budget before showing the sweep's
estimate and polling for the exact result."""

__all__ = ["Outcome", "SOLVE_WAIT_SECONDS", "SolveStillRunning", "SweepStatus", "best_possible", "computes_at",
           "options_key", "solve_outcome", "solve_wait_seconds", "start_tensor_check", "sweep_status",
           "tensor_check_status"]


def options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Options as a sorted tuple: hashable, and equal for equal choices."""
    return tuple(sorted(options.items()))


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
    outcome = job_result(job, wait)
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
        points = [job_result(job, 0) for job in jobs]
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
        overhead = job_result(job, 0)
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
    return True, job_result(job, wait)
