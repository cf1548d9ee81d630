"""Solves, sweeps, LP bounds and runs on real tensors as jobs in the lanes, kept by key; and "fits at".

Results are kept by (the graph's content hash, solver, budget, options, time limit), so that every
page and session shares them. A solve asked for by the budget slider is submitted with
``latest=True``: it supersedes the queued solves of the same model, solver and settings (only the
latest slider position is computed). A sweep is one job whose progress is the budgets it has
solved; its points arrive one by one, so the Pareto chart and the estimates grow as it runs.

Every job has a time limit (the solver's, per step, plus :data:`JOB_MARGIN_SECONDS`) and a heartbeat
allowance (the solver's time limit plus :data:`STEP_MARGIN_SECONDS`): a step that runs on past it
stops the worker's heartbeat, and 30 s later the job is shown as stalled.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from remat_core import ComputeGraph, Schedule, SolveOutcome, get_solver
from remat_core.analysis import ParetoCurve, sweep_budgets
from remat_core.graph import format_bytes
from remat_core.run import TensorCheck
from remat_core.schedule import checkpoint_all_cost
from remat_core.solvers import FAILED, MAX_POLICY_SETTINGS

from ..state import Model
from . import tasks
from .job import Job, JobState
from .lanes import search_sweep_lane, solve_lane, solver_sweep_lane, torch_lane
from .tasks import Options, portable

SWEEP_POINTS = 14
SEARCH_SWEEP_POINTS = 6
"""Searching solvers take seconds per budget: their curves get fewer points."""
SWEEP_WAIT_SECONDS = 2.0
""":func:`sweep_status` waits this long by default before reporting how far a sweep got."""
STEP_MARGIN_SECONDS = 10.0
"""The heartbeat vouches for a step this long beyond the solver's time limit."""
REBUILD_MARGIN_SECONDS = 240.0
"""A job whose worker traces the model again first (a policy over its blocks and ops) is allowed this much more."""
JOB_MARGIN_SECONDS = 60.0
"""A job may run this long per step beyond the solver's time limit (rebuilding the graph, simulating,
a heuristic that ignores the time limit) before its lane stops it."""
LONGEST_WAIT_SECONDS = 900.0
"""``awaited_solve(wait=None)`` gives up after this long (a job queued behind many others)."""
TENSOR_RUN_SECONDS = 900.0
"""A run on real tensors (starting PyTorch, tracing the model, running it op by op) is stopped after this."""

__all__ = ["FitsAt", "SweepStatus", "awaited_solve", "best_possible", "fits_at", "know_model", "lp_bounds_job",
           "once_threshold_job",
           "options_key", "outcome_of", "solve_job", "solve_key", "start_tensor_check", "sweep_grid", "sweep_job",
           "sweep_status", "tensor_check_job", "tensor_check_status"]

KEPT_REBUILDS = 16
"""Models whose rebuild the jobs know (the sessions' models, the most recently seen kept)."""
_rebuilds: OrderedDict[str, Callable[[], ComputeGraph]] = OrderedDict()
_rebuilds_lock = threading.Lock()


def know_model(model: Model) -> None:
    """Let the jobs trace ``model`` again where a solver needs the model behind its graph (a policy over its
    blocks and ops, tagged ``needs_traced_model``): graphs travel to the workers as documents, without it."""
    if model.rebuild is None:
        return
    with _rebuilds_lock:
        _rebuilds[model.key] = model.rebuild
        _rebuilds.move_to_end(model.key)
        while len(_rebuilds) > KEPT_REBUILDS:
            _rebuilds.popitem(last=False)


def _rebuild_for(graph: ComputeGraph, solver: str) -> Callable[[], ComputeGraph] | None:
    """The rebuild a solve of ``solver`` on ``graph`` takes: the model's, where the solver needs it and it is known."""
    if not get_solver(solver).tags.needs_traced_model:
        return None
    with _rebuilds_lock:
        return _rebuilds.get(graph.content_hash)


def options_key(options: dict[str, Any]) -> Options:
    """Options as a sorted tuple: hashable, and equal for equal choices."""
    return tuple(sorted(options.items()))


def solve_key(graph: ComputeGraph, budget: int, solver: str, options: Options, time_limit: float | None) -> tuple:
    """What a solve's result is kept under: the graph's content hash, the budget, solver, options and time limit."""
    return graph.content_hash, int(budget), solver, options, time_limit


def _setting(graph: ComputeGraph, solver: str, options: Options, time_limit: float | None) -> tuple:
    """One solver at one setting on one graph: a supersede group, and what "fits at" is known for."""
    return graph.content_hash, solver, options, time_limit


def _limits(time_limit: float | None, steps: int = 1, rebuild: Callable[[], ComputeGraph] | None = None
            ) -> dict[str, float]:
    """A job's time limit and heartbeat allowance; with a ``rebuild``, its worker traces the model first (a minute
    for ResNet-50 at op level on two busy cores): :data:`REBUILD_MARGIN_SECONDS` more of both."""
    limit = time_limit or 0.0
    tracing = REBUILD_MARGIN_SECONDS if rebuild is not None else 0.0
    return {"time_limit": steps * (limit + JOB_MARGIN_SECONDS) + tracing,
            "step_allowance": limit + STEP_MARGIN_SECONDS + tracing}


# -- "fits at": the smallest budget at which a solver's schedule was confirmed ------------------------

@dataclass(frozen=True)
class FitsAt:
    """The smallest budget at which the simulator confirmed a schedule of one solver, and that schedule's peak."""

    budget: int
    peak: int

    def __str__(self) -> str:
        return format_bytes(self.budget)


_confirmed: dict[tuple, FitsAt] = {}
_confirmed_lock = threading.Lock()


def _confirm(setting: tuple, budget: int, peak: int) -> None:
    with _confirmed_lock:
        known = _confirmed.get(setting)
        if known is None or budget < known.budget:
            _confirmed[setting] = FitsAt(budget, peak)


def _confirm_outcome(setting: tuple, budget: int, outcome: SolveOutcome) -> None:
    if outcome.feasible:
        _confirm(setting, budget, outcome.stats["peak"])


def _confirm_points(setting: tuple, points) -> None:
    for point in points:
        if point.feasible:
            _confirm(setting, point.budget, point.peak)


def fits_at(graph: ComputeGraph, solver: str, options: Options, time_limit: float | None) -> FitsAt | None:
    """Where ``solver`` fits: the smallest budget at which one of its schedules (a solve, or a sweep's point,
    finished or still arriving) was confirmed by the simulator; None while none is known.

    What every page says "fits at" means. A budget a solver only *names* as feasible when it refuses
    another (``SolveOutcome.smallest_feasible``) is its claim, not a confirmed schedule, and is not counted.
    """
    setting = _setting(graph, solver, options, time_limit)
    sweep = solver_sweep_lane(solver).find(_sweep_key(graph, solver, options, time_limit))
    if sweep is not None:
        _confirm_points(setting, list(sweep.partial))
    with _confirmed_lock:
        return _confirmed.get(setting)


# -- solves ------------------------------------------------------------------------------------------

def solve_job(graph: ComputeGraph, budget: int, solver: str, options: Options, time_limit: float | None,
              latest: bool = False) -> Job:
    """The job of one solve (started unless it is kept). ``latest``: it supersedes the queued solves of this
    solver at this setting on this graph (the slider's newest position wins)."""
    setting = _setting(graph, solver, options, time_limit)
    rebuild = _rebuild_for(graph, solver)
    return solve_lane(solver).submit(
        solve_key(graph, budget, solver, options, time_limit), tasks.solve_task, solver, int(budget), options,
        time_limit, rebuild, graph=portable(graph), label=f"{solver} at {format_bytes(budget)}",
        group=setting if latest else None, on_done=partial(_confirm_outcome, setting, int(budget)),
        **_limits(time_limit, rebuild=rebuild))


def outcome_of(job: Job) -> SolveOutcome | None:
    """A solve job's outcome: its result once done, a failed outcome saying why there is none once it ended
    otherwise (cancelled, stopped, the worker died), None meanwhile."""
    if not job.final:
        return None
    if job.state is JobState.DONE:
        return job.result
    solver, budget = job.args[0], job.args[1]
    return SolveOutcome(solver, budget, FAILED, detail=f"the solve {job.describe_end()}", seconds=job.elapsed())


def awaited_solve(graph: ComputeGraph, budget: int, solver: str, options: Options, time_limit: float | None,
                  wait: float | None = None, latest: bool = False) -> SolveOutcome | None:
    """The solve at ``budget``, computed once in the background and kept.

    ``wait=None`` blocks until it has ended (an error outcome after :data:`LONGEST_WAIT_SECONDS`); a
    number waits at most that many seconds and returns None if it is still queued or running.
    """
    job = solve_job(graph, budget, solver, options, time_limit, latest=latest)
    job.wait(LONGEST_WAIT_SECONDS if wait is None else max(wait, 0.0))
    outcome = outcome_of(job)
    if outcome is None and wait is None:
        return SolveOutcome(solver, budget, FAILED, detail=f"the solve did not finish within "
                            f"{LONGEST_WAIT_SECONDS:.0f} s (it is queued behind other work); look again later, or set "
                            f"a shorter time limit")
    return outcome


# -- sweeps and LP bounds --------------------------------------------------------------------------------

def _sweep_key(graph: ComputeGraph, solver: str, options: Options, time_limit: float | None) -> tuple:
    return graph.content_hash, "sweep", solver, options, time_limit


def sweep_grid(graph: ComputeGraph, solver: str) -> list[int]:
    """The budgets a sweep of ``solver`` solves (fewer for a searching solver)."""
    return sweep_budgets(graph, SEARCH_SWEEP_POINTS if get_solver(solver).searching else SWEEP_POINTS)


def sweep_job(graph: ComputeGraph, solver: str, options: Options, time_limit: float | None) -> Job:
    """The job of ``solver``'s Pareto sweep on ``graph`` (started unless it is kept): over budgets, or for a fixed
    policy over the settings users meet it at (:func:`~explorer.jobs.tasks.policy_points_task`)."""
    setting = _setting(graph, solver, options, time_limit)
    rebuild = _rebuild_for(graph, solver)
    if not get_solver(solver).tags.follows_budget:
        return solver_sweep_lane(solver).submit(
            _sweep_key(graph, solver, options, time_limit), tasks.policy_points_task, solver, options, time_limit,
            rebuild, graph=portable(graph), label=f"{solver} at each setting",
            on_done=partial(_confirm_points, setting), **_limits(time_limit, MAX_POLICY_SETTINGS, rebuild))
    budgets = tuple(sweep_grid(graph, solver))
    return solver_sweep_lane(solver).submit(
        _sweep_key(graph, solver, options, time_limit), tasks.sweep_task, solver, budgets, options, time_limit,
        rebuild, graph=portable(graph), label=f"Pareto sweep of {solver}", total=len(budgets),
        on_done=partial(_confirm_points, setting), **_limits(time_limit, len(budgets), rebuild))


@dataclass(frozen=True)
class SweepStatus:
    """Where a sweep stands.

    Attributes
    ----------
    curve : ParetoCurve or None
        The whole curve, once the sweep is done.
    partial : ParetoCurve or None
        The points solved so far (all of them once done; None before the first).
    done, total : int
        Budgets solved, of how many.
    error : str or None
        Why the sweep ended without a curve (a solve failed, it was cancelled or stopped).
    job : Job
    """

    curve: ParetoCurve | None
    partial: ParetoCurve | None
    done: int
    total: int
    error: str | None
    job: Job


def _curve(solver: str, options: Options, graph: ComputeGraph, points) -> ParetoCurve | None:
    if not points:
        return None
    return ParetoCurve(solver=solver, options=dict(options), points=tuple(sorted(points, key=lambda p: p.budget)),
                       base_cost=checkpoint_all_cost(graph))


def sweep_status(graph: ComputeGraph, solver: str, options: Options, time_limit: float | None,
                 wait: float = SWEEP_WAIT_SECONDS) -> SweepStatus:
    """Start (or find) the Pareto sweep of ``solver`` on ``graph``, waiting up to ``wait`` seconds for it."""
    job = sweep_job(graph, solver, options, time_limit)
    if wait > 0:
        job.wait(wait)
    points = list(job.result) if job.done else list(job.partial)
    error = None
    if job.final and not job.done:
        error = str(job.error) if job.state is JobState.FAILED else f"the sweep {job.describe_end()}"
    curve = _curve(solver, options, graph, points)
    return SweepStatus(curve if job.done else None, curve, len(points), job.progress.total, error, job)


def lp_bounds_job(graph: ComputeGraph, time_limit: float | None) -> Job:
    """The job of Checkmate's LP bound at each of a searching sweep's budgets (started unless kept)."""
    budgets = tuple(sweep_budgets(graph, SEARCH_SWEEP_POINTS))
    return search_sweep_lane().submit((graph.content_hash, "lp-bounds", time_limit), tasks.lp_bounds_task, budgets,
                                      time_limit, graph=portable(graph), label="Checkmate's LP bounds",
                                      total=len(budgets), **_limits(time_limit, len(budgets)))


def best_possible(graph: ComputeGraph, time_limit: float | None) -> list[tuple[int, float]]:
    """Checkmate's LP lower bound on the overhead at each sweep budget known so far: ``[(budget, overhead), ...]``.

    Budgets whose LP has not finished, or has no bound (infeasible relaxation, unproven in time, a
    graph too large for the LP), are left out.
    """
    job = lp_bounds_job(graph, time_limit)
    bounds = job.result if job.done else list(job.partial)
    return [(budget, overhead) for budget, overhead in bounds if overhead is not None]


# -- where a tensor stops being recomputed -----------------------------------------------------------------------

def _once_key(graph: ComputeGraph, solver: str, tensor: str, options: Options, time_limit: float | None) -> tuple:
    return graph.content_hash, "once", solver, tensor, options, time_limit


def once_threshold_job(graph: ComputeGraph, solver: str, tensor: str, options: Options, time_limit: float | None,
                       start: bool = True) -> Job | None:
    """The job that finds from which budget ``solver`` computes ``tensor`` once, in the solver's sweep lane (Cancel
    and progress as for a sweep; its solves go through the results store, the sweep's answers are reused when the
    sweep is done). ``start=False``: only a job already kept (None if there is none)."""
    lane = solver_sweep_lane(solver)
    key = _once_key(graph, solver, tensor, options, time_limit)
    if not start:
        return lane.find(key)
    budgets = tuple(sweep_grid(graph, solver))
    sweep = sweep_status(graph, solver, options, time_limit, wait=0)
    known = tuple((p.budget, (p.recomputed.get(tensor, 1) if p.feasible else None))
                  for p in (sweep.curve.points if sweep.curve is not None else ()))
    steps = len(budgets) + tasks.ONCE_REFINE_STEPS
    rebuild = _rebuild_for(graph, solver)
    return lane.submit(key, tasks.once_threshold_task, solver, tensor, budgets, known, options, time_limit,
                       rebuild, graph=portable(graph), label=f"where {solver} stops recomputing it", total=steps,
                       **_limits(time_limit, steps, rebuild))


# -- runs on real tensors -------------------------------------------------------------------------------------

def start_tensor_check(model: Model, schedule: Schedule, key: tuple) -> Job:
    """Run ``schedule`` on the real tensors of ``model`` in the torch lane, kept under ``key`` (see
    :func:`solve_key`); a run under that key that is running or succeeded is not started again, one
    that failed or was cancelled is (pressing the button again retries it)."""
    if model.rebuild is None:
        raise ValueError("start_tensor_check needs a model with a rebuild; check why_not_runnable first")
    lane = torch_lane()
    kept = lane.find(key)
    if kept is not None and kept.final and not kept.done:
        lane.forget(key)
    return lane.submit(key, tasks.tensor_check_task, model.rebuild, schedule, graph=portable(model.graph),
                       label="the run on real tensors", time_limit=TENSOR_RUN_SECONDS)


def tensor_check_job(key: tuple) -> Job | None:
    """The run on real tensors kept under ``key`` (None if none was started)."""
    return torch_lane().find(key)


def tensor_check_status(key: tuple, wait: float = 0) -> tuple[bool, TensorCheck | None, str | None]:
    """Whether a run was started under ``key``; its check once done; why there is none once it ended otherwise
    (waiting up to ``wait`` seconds). Both are None while it runs."""
    job = tensor_check_job(key)
    if job is None:
        return False, None, None
    job.wait(wait)
    if job.done:
        return True, job.result, None
    return True, None, f"the run {job.describe_end()}" if job.final else None
