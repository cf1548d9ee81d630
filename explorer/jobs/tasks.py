"""The tasks the explorer's lanes run in their worker processes: solves, sweeps, LP bounds, runs on real tensors.

Each is ``task(report, graph, *args)`` (a job of the worker layer, :mod:`remat_core.batch.worker`):
the worker hands it the graph, rebuilt once per worker from its ``remat-graph`` document
(a traced model stays in the app's process: a solver that reads one, ``torch-partitioner``, runs on the sizes
there, and the store keys that answer apart from the traced one), and a
reporter for its progress. This module imports no Streamlit and takes only plain, picklable data.
Every solve goes through :func:`solve_graph`, the one solve path of the explorer: the results store
(:func:`remat_core.store.stored_solve`), answering with a :class:`~remat_core.SolveOutcome` whose
schedule crosses back packed.

A run on real tensors, and a solve by a policy over a model's blocks and ops (a solver tagged
``needs_traced_model``), need the model behind the graph: the task gets the model's ``rebuild`` (see
:class:`explorer.state.Model`), traces it once in its worker and keeps it beside the graph (:func:`with_model`).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from remat_core import ComputeGraph, RematError, Schedule, SolveOutcome, get_solver
from remat_core.analysis import (LP_AVAILABLE, UNLIMITED_BUDGET, CurvePoint, OnceThreshold, curve_point,
                                 lp_lower_bound, policy_point, setting_label,
                                 smallest_budget_computed_once)
from remat_core.batch import GraphCache, Reporter
from remat_core.frontends import with_model_of
from remat_core.graph import format_bytes
from remat_core.run import TensorCheck, check_on_tensors
from remat_core.solvers import FAILED
from remat_core.store import stored_solve

from .job import PortableGraph

KEPT_MODELS = 2
"""Traced models kept by a worker (each holds its weights and example inputs)."""
_models = GraphCache(KEPT_MODELS)

Options = tuple[tuple[str, Any], ...]
"""Solver options as a sorted tuple of pairs: hashable, and equal for equal choices."""


def portable(graph: ComputeGraph) -> PortableGraph:
    """The graph as jobs take it (its document is built once per graph)."""
    return graph.content_hash, graph.memo("remat-graph document", graph.to_json)


def with_model(graph: ComputeGraph, rebuild: Callable[[], ComputeGraph] | None) -> ComputeGraph:
    """The graph with the model ``rebuild`` traces behind it (traced once per graph in this worker, checked to be
    ``graph``); ``graph`` itself where there is no ``rebuild``."""
    if rebuild is None:
        return graph
    return _models.get(graph.content_hash, lambda: with_model_of(graph, rebuild()))


def solve_graph(graph: ComputeGraph, solver: str, budget: int, options: Options,
                time_limit: float | None) -> SolveOutcome:
    """The solve at one budget through the results store the command line uses (a solve done there is read
    back, and one done here is there): the explorer's one solve path."""
    return stored_solve(graph, budget, solver, time_limit, **dict(options))


def solve_task(report: Reporter, graph: ComputeGraph, solver: str, budget: int, options: Options,
               time_limit: float | None, rebuild: Callable[[], ComputeGraph] | None = None) -> SolveOutcome:
    """One solve (:func:`solve_graph`), on the model ``rebuild`` traces where it is given."""
    report.step(0, 1, format_bytes(budget))
    return solve_graph(with_model(graph, rebuild), solver, budget, options, time_limit)


class SweepFailed(RematError):
    """A sweep's solve at one budget failed for a reason other than infeasibility (the budget named)."""


def sweep_task(report: Reporter, graph: ComputeGraph, solver: str, budgets: Sequence[int], options: Options,
               time_limit: float | None, rebuild: Callable[[], ComputeGraph] | None = None) -> tuple[CurvePoint, ...]:
    """The Pareto sweep of ``solver``: one :func:`solve_graph` per budget, in order, each point reported
    as it lands (the page draws the curve as it grows); on the model ``rebuild`` traces where it is given."""
    graph = with_model(graph, rebuild)
    points = []
    for done, budget in enumerate(budgets):
        report.step(done, len(budgets), format_bytes(budget))
        outcome = solve_graph(graph, solver, budget, options, time_limit)
        if outcome.status == FAILED:
            raise SweepFailed(f"at {format_bytes(budget)}: {outcome.message}")
        point = curve_point(outcome)
        report.partial(point)
        points.append(point)
    return tuple(points)


def policy_points_task(report: Reporter, graph: ComputeGraph, solver: str, options: Options, time_limit: float | None,
                       rebuild: Callable[[], ComputeGraph] | None = None) -> tuple[CurvePoint, ...]:
    """A fixed policy's "sweep": one solve per setting it is met at (Hugging Face's every n), each without a budget
    to keep and placed at the peak it holds (:func:`~remat_core.analysis.policy_point`), reported as it lands."""
    graph = with_model(graph, rebuild)
    settings = get_solver(solver).policy_settings(graph)
    points = []
    for done, setting in enumerate(settings):
        report.step(done, len(settings), setting_label(setting))
        outcome = solve_graph(graph, solver, UNLIMITED_BUDGET, tuple(sorted({**dict(options), **setting}.items())),
                              time_limit)
        if outcome.status == FAILED:
            raise SweepFailed(outcome.message)
        points.append(policy_point(outcome, setting))
        report.partial(points[-1])
    return tuple(points)


def lp_bound(graph: ComputeGraph, budget: int, time_limit: float | None) -> float | None:
    """Checkmate's LP bound at ``budget`` as an overhead over checkpoint-all (None where there is none:
    the relaxation is infeasible, unproven in time, or refuses the graph)."""
    bound = lp_lower_bound(graph, budget, time_limit)
    return bound.overhead if bound.status == LP_AVAILABLE else None


def lp_bounds_task(report: Reporter, graph: ComputeGraph, budgets: Sequence[int],
                   time_limit: float | None) -> tuple[tuple[int, float | None], ...]:
    """:func:`lp_bound` at each budget, each reported as it lands: ``((budget, overhead or None), ...)``."""
    bounds = []
    for done, budget in enumerate(budgets):
        report.step(done, len(budgets), format_bytes(budget))
        bounds.append((budget, lp_bound(graph, budget, time_limit)))
        report.partial(bounds[-1])
    return tuple(bounds)


ONCE_REFINE_STEPS = 6
"""Bisection solves :func:`once_threshold_task` adds between the grid's budgets (see
:func:`~remat_core.analysis.smallest_budget_computed_once`)."""


def once_threshold_task(report: Reporter, graph: ComputeGraph, solver: str, tensor: str, budgets: Sequence[int],
                        known: tuple[tuple[int, int | None], ...], options: Options,
                        time_limit: float | None, rebuild: Callable[[], ComputeGraph] | None = None) -> OnceThreshold:
    """The smallest budget from which ``solver`` computes ``tensor`` once: the grid ``budgets`` (answers in
    ``known``, a sweep's, are not solved again; the rest go through the results store), then bisection. Each
    solve is a step of its progress."""
    graph = with_model(graph, rebuild)
    answers = dict(known)
    total = len(set(budgets) - set(answers)) + ONCE_REFINE_STEPS
    solved = 0

    def computes_at(budget: int) -> int | None:
        nonlocal solved
        if budget in answers:
            return answers[budget]
        report.step(min(solved, total - 1), total, format_bytes(budget))
        outcome = solve_graph(graph, solver, budget, options, time_limit)
        solved += 1
        if outcome.status == FAILED:
            raise SweepFailed(f"at {format_bytes(budget)}: {outcome.message}")
        answers[budget] = outcome.schedule.simulation.compute_counts.get(tensor, 0) if outcome.feasible else None
        return answers[budget]

    span = max(budgets) - min(budgets) if budgets else 0
    return smallest_budget_computed_once(tensor, solver, budgets, computes_at, refine_steps=ONCE_REFINE_STEPS,
                                         tolerance=max(1, span // 200))


def share_cores() -> None:
    """Initialise the execution worker: PyTorch's intra-op threads get half the CPU cores, the rest
    stay with the app and the solver workers (oversubscribed threads made runs several times slower)."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


def tensor_check_task(report: Reporter, graph: ComputeGraph, rebuild: Callable[[], ComputeGraph],
                      schedule: Schedule) -> TensorCheck:
    """:func:`remat_core.run.tensor_check.check_on_tensors` on the model ``rebuild`` traces (once per graph
    in this process, checked to be ``graph``); a package error fails the job with its message."""
    return check_on_tensors(with_model(graph, rebuild), schedule)
