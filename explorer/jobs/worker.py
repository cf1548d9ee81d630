"""The jobs the explorer runs in worker processes: exact solves, sweep points, and runs on real tensors.

They run in separate processes (see :mod:`explorer.jobs.runner`) so that a solver that computes for
seconds holds no lock the app's own thread needs. This module imports no Streamlit and takes
only plain, picklable data: a graph travels as its ``remat-graph`` document with its content
hash, and each worker process rebuilds a graph once and keeps it (attachments such as a traced FX
module stay in the app's process; no solver reads them). A run on real tensors needs the model
behind the graph: the job gets the model's ``rebuild`` (see :class:`explorer.state.Model`), traces
it once in its worker and keeps it beside the graph.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from remat_core import ComputeGraph, InfeasibleBudget, RematError, Schedule
from remat_core.analysis import LP_AVAILABLE, CurvePoint, lp_lower_bound, solve_point
from remat_core.run import TensorCheck, check_on_tensors
from remat_core.store import solve_stored

KEPT_GRAPHS = 8
_graphs: OrderedDict[str, ComputeGraph] = OrderedDict()
KEPT_MODELS = 2
"""Traced models kept by the execution worker (each holds its weights and example inputs)."""
_models: OrderedDict[str, ComputeGraph] = OrderedDict()

PortableGraph = tuple[str, Mapping[str, Any]]
"""A graph as a job takes it: ``(content hash, remat-graph document)``."""


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


def portable(graph: ComputeGraph) -> PortableGraph:
    """The graph as jobs take it (its document is built once per graph)."""
    return graph.content_hash, graph.memo("remat-graph document", graph.to_json)


def _kept(cache: OrderedDict, key: str, build: Callable[[], Any], size: int) -> Any:
    """``cache[key]``, built on first use; the least recently used entries beyond ``size`` dropped."""
    if key not in cache:
        cache[key] = build()
        while len(cache) > size:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return cache[key]


def _graph(source: PortableGraph) -> ComputeGraph:
    key, doc = source
    return _kept(_graphs, key, lambda: ComputeGraph.from_json(doc), KEPT_GRAPHS)


def outcome_job(source: PortableGraph, solver: str, budget: int, options: tuple[tuple[str, Any], ...],
                time_limit: float | None) -> Outcome:
    """:func:`remat_core.solve` at one budget, through the results store the command line uses (a solve done
    there is read back, and one done here is there); infeasibility and other package errors become an
    :class:`Outcome`."""
    try:
        return Outcome(schedule=solve_stored(_graph(source), budget, solver, time_limit=time_limit, **dict(options)))
    except InfeasibleBudget as e:
        return Outcome(infeasible=e.detail or str(e), smallest_feasible=e.smallest_feasible)
    except RematError as e:
        return Outcome(error=str(e))


def sweep_point_job(source: PortableGraph, solver: str, budget: int, options: tuple[tuple[str, Any], ...],
                    time_limit: float | None) -> CurvePoint:
    """One point of a Pareto sweep (:func:`remat_core.analysis.pareto.solve_point`)."""
    return solve_point(_graph(source), solver, budget, time_limit, **dict(options))


def lp_bound_job(source: PortableGraph, budget: int, time_limit: float | None) -> float | None:
    """Checkmate's LP bound at ``budget`` as an overhead over checkpoint-all (None where there is none:
    the relaxation is infeasible, unproven in time, or refuses the graph)."""
    bound = lp_lower_bound(_graph(source), budget, time_limit)
    return bound.overhead if bound.status == LP_AVAILABLE else None


@dataclass(frozen=True)
class CheckOutcome:
    """A run on real tensors as the Timeline page needs it: the check, or why there is none."""

    check: TensorCheck | None = None
    error: str | None = None


def share_cores() -> None:
    """Initialise the execution worker: PyTorch's intra-op threads get half the CPU cores, the rest
    stay with the app and the solver workers (oversubscribed threads made runs several times slower)."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


def tensor_check_job(source: PortableGraph, rebuild: Callable[[], ComputeGraph], schedule: Schedule) -> CheckOutcome:
    """:func:`remat_core.run.tensor_check.check_on_tensors` on the model ``rebuild`` traces (once per graph
    in this process, checked to be the graph of ``source``); package errors become a :class:`CheckOutcome`."""
    from remat_core.run import with_model_of  # PyTorch: only the execution worker loads it

    try:
        graph = _kept(_models, source[0], lambda: with_model_of(_graph(source), rebuild()), KEPT_MODELS)
        return CheckOutcome(check=check_on_tensors(graph, schedule))
    except RematError as e:
        return CheckOutcome(error=str(e))
