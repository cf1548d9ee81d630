"""``checkmate-lp``: Checkmate's LP relaxation with two-phase rounding, and the LP lower bound.

The LP relaxation of Checkmate's MILP (:mod:`remat_core.solvers.stage_models.checkmate_model`) is solved
once; its optimum is a lower bound on the cost of every frontier-advancing schedule in the
graph's fixed topological order (:func:`lp_relaxation_value`), not on every schedule: one in another
order can cost less. A schedule is then made by two-phase
rounding: round the fractional ``S`` (what to keep between stages) to 0/1, then *repair* ``R``:
the cheapest recomputations that make the rounded ``S`` valid. Rounding ignores the memory rows,
so a rounded schedule may overflow the budget; as Checkmate does, the LP is then solved again at a
budget shrunk by a factor ``1 - epsilon`` and rounded again, until a rounding fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InfeasibleBudget, SearchStopped
from ...graph import ComputeGraph
from ...schedule import Schedule, checkpoint_all_cost, checkpoint_all_peak
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..deadline import Deadline, TimeUp
from ..registry import Option, SolverTags, register
from .checkmate_model import CheckmateModel, ModelSize, check_model_size
from .grid import DEFAULT_TIME_LIMIT, StageCompute, StageGrid, computes_from_matrix, measure, stage_grid, stage_schedule

DEFAULT_MAX_NODES = 500
"""Largest number of nodes to compute for which the O(n^2) model is built."""

SWEEP_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Checkmate's deterministic rounding: keep ``S[t, i]`` when it is at least the threshold."""

_RULE = "checkmate-lp"
_BECAUSE = "the rounded LP relaxation keeps memory under budget"


@dataclass
class Rounding:
    """The outcome of LP rounding: the best schedule that fits, and what it took.

    Attributes
    ----------
    computes : list of (stage, position) or None
        The cheapest rounded schedule within budget (None: no rounding fitted).
    cost, peak : float, int
        Its simulated cost and peak (inf / None without one).
    lp_lower_bound : float or None
        LP optimum at the full budget (``inf``: the relaxation is infeasible; None: not solved
        within the time limit).
    smallest_peak : int or None
        The smallest peak of any rounded schedule, fitting or not: a budget known to be feasible.
    attempts : list of dict
        One entry per LP solved: its budget, status, seconds and the best rounding it gave.
    model_size : ModelSize or None
        Size of the first LP.
    picked : dict or None
        The rounding that gave ``computes`` (its threshold or sample) and its LP's budget.
    stopped : bool
        The deadline passed before the retries were done.
    """

    computes: list[StageCompute] | None = None
    cost: float = math.inf
    peak: int | None = None
    lp_lower_bound: float | None = None
    smallest_peak: int | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    model_size: ModelSize | None = None
    picked: dict[str, Any] | None = None
    stopped: bool = False


def repair_r(grid: StageGrid, s: np.ndarray) -> np.ndarray:
    """The cheapest ``R`` that makes a 0/1 ``S`` valid (Checkmate's second rounding phase).

    ``R[t, t] = 1``; ``R[t, i] = 1`` where ``S[t+1, i]`` keeps a tensor that stage ``t`` did not
    receive; then, from the frontier backwards within each stage, every input of a computed node
    that is not kept is recomputed too.
    """
    n = grid.n
    r = np.eye(n, dtype=np.int8)
    r[:-1] |= (s[1:] > s[:-1]).astype(np.int8)
    for t in range(n):
        for k in range(t, -1, -1):
            if r[t, k]:
                for i in grid.preds[k]:
                    if not s[t, i]:
                        r[t, i] = 1
    return r


def _roundings(s: np.ndarray, method: str, samples: int, rng: np.random.Generator):
    """Candidate 0/1 ``S`` matrices: Checkmate's threshold sweep, or independent random roundings."""
    if method == "sweep":
        for threshold in SWEEP_THRESHOLDS:
            yield {"threshold": threshold}, (s >= threshold - 1e-9).astype(np.int8)
    else:
        for sample in range(samples):
            yield {"sample": sample}, (rng.random(s.shape) < s).astype(np.int8)


def round_lp(grid: StageGrid, budget: int, *, deadline: Deadline, rounding: str = "sweep", samples: int = 20,
             epsilon: float = 0.1, retries: int = 5, seed: int = 0) -> Rounding:
    """Solve the LP at ``budget``, round it, and shrink the LP's budget until a rounding fits.

    Parameters
    ----------
    grid : StageGrid
    budget : int
        Bytes, pinned memory included. Roundings are always judged against this budget.
    deadline : Deadline
        When to stop, building and solving the LPs included (with what is found by then).
    rounding : {"sweep", "randomized"}
        Checkmate's deterministic threshold sweep, or ``samples`` random roundings
        (``S[t, i] = 1`` with probability ``S*[t, i]``).
    samples, seed : int
        For randomized rounding.
    epsilon : float
        Each retry solves the LP at ``budget * (1 - epsilon) ** attempt`` (free bytes only).
    retries : int
        Retries after the first LP.

    Returns
    -------
    Rounding
    """
    rng = np.random.default_rng(seed)
    result = Rounding()
    free = grid.free_budget(budget)
    for attempt in range(retries + 1):
        if deadline.expired():
            result.stopped = True
            break
        lp_free = int(free * (1.0 - epsilon) ** attempt)
        try:
            model = CheckmateModel(grid, lp_free, integral=False, deadline=deadline)
        except TimeUp:
            result.stopped = True
            break
        if result.model_size is None:
            result.model_size = model.size()
        solution = model.solve(deadline.left())
        entry: dict[str, Any] = {"lp_budget": lp_free + grid.graph.pinned_bytes, "status": solution.status,
                                 "seconds": round(solution.seconds, 4)}
        result.attempts.append(entry)
        if attempt == 0:
            result.lp_lower_bound = math.inf if solution.status == "infeasible" else solution.bound
        if solution.s is None or solution.bound is None:
            break
        for label, s in _roundings(solution.s, rounding, samples, rng):
            computes = computes_from_matrix(repair_r(grid, s))
            peak, cost = measure(grid, computes)
            result.smallest_peak = peak if result.smallest_peak is None else min(result.smallest_peak, peak)
            if peak <= budget and cost < result.cost:
                result.computes, result.cost, result.peak = computes, cost, peak
                result.picked = {**label, "lp_budget": entry["lp_budget"]}
                entry["best_rounding_cost"] = cost
        if result.computes is not None:
            break
    return result


def lp_relaxation_value(graph: ComputeGraph, budget: int, time_limit: float | None = None) -> float | None:
    """The LP relaxation's optimum: a lower bound on the cost of the frontier-advancing schedules of the fixed order.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Seconds for the LP (default :data:`DEFAULT_TIME_LIMIT`).

    Returns
    -------
    float or None
        The bound; ``math.inf`` when even the relaxation is infeasible (no frontier-advancing
        schedule in the graph's topological order fits the budget); None when the LP was not
        solved to optimality within the time limit (no bound is proven).

    Notes
    -----
    The bound covers the schedules Checkmate's MILP can express: every node first computed in the
    graph's topological order, recomputations within a stage in that order, each at most once per
    stage. It is not a bound over all schedules: a schedule in another order may cost less (the
    heuristics' often do). It never exceeds the MILP optimum in this order, and is at least the
    checkpoint-all cost (each needed node computed once).

    Raises
    ------
    SolverOptionError
        If the graph has more than :data:`DEFAULT_MAX_NODES` nodes to compute.
    """
    grid = stage_grid(graph)
    check_model_size(grid, DEFAULT_MAX_NODES, "lp_relaxation_value")
    if grid.free_budget(budget) < 0:
        return math.inf
    deadline = Deadline(DEFAULT_TIME_LIMIT if time_limit is None else time_limit)
    try:
        model = CheckmateModel(grid, grid.free_budget(budget), integral=False, deadline=deadline)
    except TimeUp:
        return None
    solution = model.solve(deadline.left())
    if solution.status == "infeasible":
        return math.inf
    return solution.bound


@register("checkmate-lp", "Checkmate's LP relaxation with two-phase rounding (round S, repair R), retried at "
                          "shrinking budgets; solver_info['lp_lower_bound'] bounds the frontier-advancing schedules of "
                          "the fixed topological order (not all schedules).",
          tags=SolverTags(searching=True, meets_named_budget=False, test_options={"retries": 1}),
          options=(Option("rounding", str, "sweep", "'sweep': thresholds 0.1..0.9 on S; 'randomized': random "
                                                    "roundings", choices=("sweep", "randomized")),
                   Option("samples", int, 20, "random roundings per LP (randomized rounding)", low=1, high=10000),
                   Option("epsilon", float, 0.1, "relative budget shrink of each retry", low=0.001, high=0.9),
                   Option("retries", int, 5, "LP re-solves at shrunk budgets when no rounding fits", low=0,
                          high=100),
                   Option("seed", int, 0, "random seed (randomized rounding)", low=0, high=2 ** 31 - 1),
                   Option("max_nodes", int, DEFAULT_MAX_NODES, "refuse graphs with more nodes to compute", low=1,
                          high=100000)),
          reference="Jain et al., Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization, "
                    "MLSys 2020")
def checkmate_lp(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, rounding: str = "sweep",
                 samples: int = 20, epsilon: float = 0.1, retries: int = 5, seed: int = 0,
                 max_nodes: int = DEFAULT_MAX_NODES) -> Schedule:
    """Checkmate's approximation: LP relaxation, two-phase rounding, budget shrinking.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Seconds for the whole call, building the LPs included (default :data:`DEFAULT_TIME_LIMIT`).
    rounding, samples, epsilon, retries, seed
        See :func:`round_lp`.
    max_nodes : int
        Refuse larger graphs (the model has O(n^2) variables).

    Returns
    -------
    Schedule
        The cheapest rounded schedule within budget. ``solver_info`` holds ``lp_lower_bound``
        (the LP optimum at the full budget: a bound for this order only), the rounding picked,
        and one entry per LP solved.

    Raises
    ------
    InfeasibleBudget
        When the LP relaxation is infeasible, or no rounding fits after every retry; the smallest
        feasible budget given is the smallest peak of any rounding (or the checkpoint-all peak).
    SolverOptionError
        If the graph is larger than ``max_nodes``.

    Notes
    -----
    When checkpoint-all fits it is returned at once, proved optimal (computing every needed node
    once is a lower bound, so the LP's optimum is its cost): rounding the LP could otherwise miss
    it and refuse a budget that checkpoint-all meets. Steps: build the LP (O(n^2) variables,
    O(n (n + |E|)) rows); solve it with HiGHS; round ``S`` (threshold sweep or random), repair ``R``
    (:func:`repair_r`), simulate each rounding; if none fits, shrink the LP's budget by
    ``1 - epsilon`` and repeat, at most ``retries`` times.

    References
    ----------
    P. Jain, A. Jain, A. Nrusimha, A. Gholami, P. Abbeel, K. Keutzer, I. Stoica, J. Gonzalez.
    "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization". MLSys 2020,
    section 5 (two-phase rounding).
    """
    grid = stage_grid(graph)
    check_model_size(grid, max_nodes, "checkmate-lp")
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    deadline = Deadline(limit)
    trivial = checkpoint_all_if_it_fits(graph, budget, "checkmate-lp", **{
        "lp_lower_bound": checkpoint_all_cost(graph), "time_limit": limit, "order": "graph topological order",
        "stages": grid.n})
    if trivial is not None:
        return trivial
    result = round_lp(grid, budget, deadline=deadline, rounding=rounding, samples=samples, epsilon=epsilon,
                      retries=retries, seed=seed)
    info = {"lp_lower_bound": result.lp_lower_bound, "attempts": result.attempts, "rounding": result.picked,
            "time_limit": limit, "order": "graph topological order", "stages": grid.n,
            **(result.model_size.as_dict() if result.model_size else {}),
            **({"stopped_at_time_limit": True} if result.stopped else {})}
    if result.computes is None:
        known = [p for p in (result.smallest_peak, checkpoint_all_peak(graph)) if p is not None and p > budget]
        if result.lp_lower_bound == math.inf:
            why = "the LP relaxation is infeasible: no frontier-advancing schedule in the topological order fits"
        elif result.stopped or any(a["status"].startswith("time_limit") for a in result.attempts):
            why = f"stopped at the time limit of {limit:g} s before a rounding fitted; raise the time limit"
        else:
            why = f"no rounding fitted after {len(result.attempts)} LP solve(s)"
        stopped = result.lp_lower_bound != math.inf and (result.stopped or any(
            a["status"].startswith("time_limit") for a in result.attempts))
        raise (SearchStopped if stopped else InfeasibleBudget)(budget, min(known) if known else None, "checkmate-lp",
                                                               why)
    return stage_schedule(grid, result.computes, rule=_RULE, because=_BECAUSE, solver_info=info)
