"""The jobs the explorer runs in its lanes' worker processes: solves, sweeps, LP bounds, runs on real tensors.

Each is ``job(report, graph, *args)`` (see :mod:`.process`): the worker hands it the graph, rebuilt
once per worker from its ``remat-graph`` document (attachments such as a traced FX module stay in
the app's process; no solver reads them), and a reporter for its progress. This module imports no
Streamlit and takes only plain, picklable data. Every solve goes through :func:`solve_graph`, the one
solve path of the explorer.

A run on real tensors needs the model behind the graph: the job gets the model's ``rebuild`` (see
:class:`explorer.state.Model`), traces it once in its worker and keeps it beside the graph.
"""

from __future__ import annotations

import os
import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

from remat_core import ComputeGraph, InfeasibleBudget, RematError, Schedule
from remat_core.analysis import LP_AVAILABLE, CurvePoint, feasible_point, infeasible_point, lp_lower_bound
from remat_core.graph import format_bytes
from remat_core.run import TensorCheck, check_on_tensors
from remat_core.store import solve_stored

from .job import PortableGraph
from .process import Reporter, kept

KEPT_MODELS = 2
"""Traced models kept by the execution worker (each holds its weights and example inputs)."""
_models: OrderedDict[str, ComputeGraph] = OrderedDict()

Options = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Outcome:
    """A solve's result as the pages need it: a schedule's figures and the schedule itself, or why there is none.

    The schedule crosses from the worker and is kept packed (pickled bytes, a fifth of its size as
    Python objects: a 10,000-node graph's schedule is 2.4 MB packed, 12 MB unpacked), and unpacked on
    first use of :attr:`schedule`: the Schedule page needs only its ``stats``, so a slider move never
    pays for unpacking, and the kept results take less memory.

    Attributes
    ----------
    packed : bytes or None
        The schedule, pickled (None without one).
    stats, solver_info : mapping
        The schedule's measured stats and what its solver reported (empty without one).
    ops : int
        How many ops the schedule has (0 without one).
    infeasible : str or None
        Why the budget is infeasible (the solver's detail, else the whole
        :class:`~remat_core.InfeasibleBudget` message).
    smallest_feasible : int or None
        The smallest budget the solver *named* as feasible (its claim, not yet simulated).
    error : str or None
        Any other :class:`~remat_core.RematError` (a bad option, a solver bug caught by the
        simulator), or why the job ended without a result (cancelled, stopped at its time limit).
    """

    packed: bytes | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    solver_info: Mapping[str, Any] = field(default_factory=dict)
    ops: int = 0
    infeasible: str | None = None
    smallest_feasible: int | None = None
    error: str | None = None

    @classmethod
    def of(cls, schedule: Schedule) -> "Outcome":
        """The outcome of a solve that found ``schedule`` (kept unpacked too, until the outcome is pickled)."""
        outcome = cls(packed=pickle.dumps(schedule, protocol=pickle.HIGHEST_PROTOCOL), stats=dict(schedule.stats),
                      solver_info=dict(schedule.solver_info), ops=len(schedule))
        outcome.__dict__["schedule"] = schedule  # what cached_property would store
        return outcome

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the unpacked schedule: it travels packed."""
        return {name: value for name, value in self.__dict__.items() if name != "schedule"}

    @property
    def feasible(self) -> bool:
        """Whether there is a schedule (without unpacking it)."""
        return self.packed is not None

    @cached_property
    def schedule(self) -> Schedule | None:
        """The schedule, unpacked on first use (None without one)."""
        return pickle.loads(self.packed) if self.packed is not None else None


def portable(graph: ComputeGraph) -> PortableGraph:
    """The graph as jobs take it (its document is built once per graph)."""
    return graph.content_hash, graph.memo("remat-graph document", graph.to_json)


def solve_graph(graph: ComputeGraph, solver: str, budget: int, options: Options,
                time_limit: float | None) -> Outcome:
    """:func:`remat_core.solve` at one budget, through the results store the command line uses (a solve done
    there is read back, and one done here is there), as an :class:`Outcome`: the explorer's one solve path.

    Infeasibility and other package errors become the outcome's fields; any other exception is a
    bug and propagates (the job fails with it).
    """
    try:
        return Outcome.of(solve_stored(graph, budget, solver, time_limit=time_limit, **dict(options)))
    except InfeasibleBudget as e:
        return Outcome(infeasible=e.detail or str(e), smallest_feasible=e.smallest_feasible)
    except RematError as e:
        return Outcome(error=str(e))


def solve_job(report: Reporter, graph: ComputeGraph, solver: str, budget: int, options: Options,
              time_limit: float | None) -> Outcome:
    """One solve (:func:`solve_graph`)."""
    report.step(0, 1, format_bytes(budget))
    return solve_graph(graph, solver, budget, options, time_limit)


class SweepFailed(RematError):
    """A sweep's solve at one budget failed for a reason other than infeasibility (the budget named)."""


def sweep_job(report: Reporter, graph: ComputeGraph, solver: str, budgets: Sequence[int], options: Options,
              time_limit: float | None) -> tuple[CurvePoint, ...]:
    """The Pareto sweep of ``solver``: one :func:`solve_graph` per budget, in order, each point reported
    as it lands (the page draws the curve as it grows)."""
    points = []
    for done, budget in enumerate(budgets):
        report.step(done, len(budgets), format_bytes(budget))
        started = time.perf_counter()
        outcome = solve_graph(graph, solver, budget, options, time_limit)
        seconds = time.perf_counter() - started
        if outcome.error is not None:
            raise SweepFailed(f"at {format_bytes(budget)}: {outcome.error}")
        point = (feasible_point(outcome.schedule, budget, seconds) if outcome.feasible
                 else infeasible_point(budget, seconds, outcome.smallest_feasible))
        report.partial(point)
        points.append(point)
    return tuple(points)


def lp_bound(graph: ComputeGraph, budget: int, time_limit: float | None) -> float | None:
    """Checkmate's LP bound at ``budget`` as an overhead over checkpoint-all (None where there is none:
    the relaxation is infeasible, unproven in time, or refuses the graph)."""
    bound = lp_lower_bound(graph, budget, time_limit)
    return bound.overhead if bound.status == LP_AVAILABLE else None


def lp_bounds_job(report: Reporter, graph: ComputeGraph, budgets: Sequence[int],
                  time_limit: float | None) -> tuple[tuple[int, float | None], ...]:
    """:func:`lp_bound` at each budget, each reported as it lands: ``((budget, overhead or None), ...)``."""
    bounds = []
    for done, budget in enumerate(budgets):
        report.step(done, len(budgets), format_bytes(budget))
        bounds.append((budget, lp_bound(graph, budget, time_limit)))
        report.partial(bounds[-1])
    return tuple(bounds)


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


def tensor_check_job(report: Reporter, graph: ComputeGraph, rebuild: Callable[[], ComputeGraph],
                     schedule: Schedule) -> CheckOutcome:
    """:func:`remat_core.run.tensor_check.check_on_tensors` on the model ``rebuild`` traces (once per graph
    in this process, checked to be ``graph``); package errors become a :class:`CheckOutcome`."""
    from remat_core.run import with_model_of  # PyTorch: only the execution worker loads it

    try:
        traced = kept(_models, graph.content_hash, lambda: with_model_of(graph, rebuild()), KEPT_MODELS)
        return CheckOutcome(check=check_on_tensors(traced, schedule))
    except RematError as e:
        return CheckOutcome(error=str(e))
