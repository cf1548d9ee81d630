"""``checkmate-milp``: Checkmate's optimal rematerialization MILP, solved with HiGHS.

The model (:mod:`remat_core.solvers.stage_models.checkmate_model`) chooses, for every stage of the graph's
fixed topological order, which nodes to recompute (``R``) and keep (``S``), with frees (``FREE``)
and memory (``U``) tracked exactly as the simulator counts them. HiGHS solves it from a warm start
under a time limit; the best schedule found is returned with its MIP gap.

With a transfer lane (``link``, tag ``offloads``) it solves twice within its time limit: as above, in half
of it, then the model with offload and prefetch decisions (:mod:`.offload_stages`) from that schedule, and
returns the one the simulator times faster over the link.

What the fixed order restricts: the first computation of every node follows the graph's
topological order (one new node per stage), recomputations inside a stage follow the same order,
and a node is recomputed at most once per stage. A schedule outside that family (another first
order, or a node recomputed twice between two frontier steps) may be cheaper or fit a smaller
budget; "optimal", ``exact``, ``mip_gap`` and ``lower_bound`` here hold among frontier-advancing
schedules of this order only. So that the solver is never above a heuristic, the quick heuristics'
schedules (any order) compete: a cheaper one is returned instead, with the MILP's own result kept
in ``solver_info["fixed_order"]`` (``any_order=False``: the fixed-order result alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InfeasibleBudget, SearchStopped
from ...graph import ComputeGraph
from ...schedule import Link, Schedule, checkpoint_all_peak
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..deadline import Deadline, TimeUp
from ..outcome import SolveOutcome
from ..quick import ANY_ORDER, prefer_cheaper_heuristic, run_quick_heuristics
from ..registry import Option, SolverTags, register
from .checkmate_lp import round_lp
from .checkmate_model import CheckmateModel, check_model_size, relative_gap
from .grid import (DEFAULT_TIME_LIMIT, StageCompute, StageGrid, checkpoint_all_computes, computes_from_matrix, measure,
                   stage_grid, stage_peaks, stage_schedule)
from .offload_stages import faster_with_offloads, highs_transfers
from .warm_start import best_stage_start

DEFAULT_MAX_NODES = 400
"""Largest number of nodes to compute for which the MILP is built (O(n^2) variables)."""

WARM_STARTS = ("auto", "greedy", "lp-rounding", "none")

_RULE = "milp"
_BECAUSE = "the MILP keeps memory under budget"


def _warm_start(grid: StageGrid, budget: int, how: str, deadline: Deadline, attempts: list[SolveOutcome]) -> tuple[
        tuple[list[StageCompute], float] | None, dict[str, Any]]:
    """A schedule in the MILP's form that fits the budget, and its cost, to start HiGHS from (None: none found).

    ``greedy``: :func:`~remat_core.solvers.stage_models.warm_start.greedy_stage_schedule`; ``lp-rounding``:
    Checkmate's rounded LP; ``auto``: the cheapest of the greedy and the quick heuristics'
    schedules (``attempts``) in stage form (:func:`~remat_core.solvers.stage_models.warm_start.best_stage_start`),
    then the rounded LP if none fits. Stops at ``deadline`` with what it has.
    """
    if how in ("auto", "greedy"):
        start = best_stage_start(grid, budget, attempts if how == "auto" else (), deadline=deadline)
        if start is not None:
            computes, source, cost = start
            return (computes, cost), {"warm_start": source, "warm_start_cost": cost}
        if how == "greedy":
            return None, {"warm_start": None}
    if how in ("auto", "lp-rounding"):
        rounding = round_lp(grid, budget, deadline=deadline)
        info: dict[str, Any] = {"warm_start": "lp-rounding" if rounding.computes is not None else None,
                                "lp_lower_bound": rounding.lp_lower_bound}
        if rounding.computes is None:
            return None, info
        info["warm_start_cost"] = rounding.cost
        return (rounding.computes, rounding.cost), info
    return None, {"warm_start": None}


@register("checkmate-milp", "Checkmate's MILP (R, S, FREE, U over frontier-advancing stages of the topological "
                            "order), HiGHS from a warm start; optimal in that order when the MIP gap reaches 0.",
          tags=SolverTags(exact=True, meets_named_budget=False, offloads=True),
          options=(Option("mip_gap", float, 0.0, "stop once the relative MIP gap is at most this", low=0.0,
                          high=1.0),
                   Option("warm_start", str, "auto", "MIP start: 'greedy' (a quick frontier-advancing schedule), "
                                                     "'lp-rounding' (Checkmate's rounded LP), 'auto' (the best of "
                                                     "the greedy and the heuristic solvers, else LP rounding) or "
                                                     "'none'", choices=WARM_STARTS),
                   Option("warm_start_share", float, 0.25, "share of the time limit the warm start may use",
                          low=0.01, high=0.9),
                   Option("max_nodes", int, DEFAULT_MAX_NODES, "refuse graphs with more nodes to compute", low=1,
                          high=100000),
                   ANY_ORDER),
          reference="Jain et al., Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization, "
                    "MLSys 2020")
def checkmate_milp(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, mip_gap: float = 0.0,
                   warm_start: str = "auto", warm_start_share: float = 0.25,
                   max_nodes: int = DEFAULT_MAX_NODES, any_order: bool = True, link: Link | None = None) -> Schedule:
    """Checkmate's MILP: the cheapest frontier-advancing schedule of the topological order.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Seconds in all (default :data:`~remat_core.solvers.stage_models.grid.DEFAULT_TIME_LIMIT`).
    mip_gap : float
        HiGHS stops when the relative gap between its best schedule and its lower bound is at
        most this (0: prove optimality).
    warm_start : {"auto", "greedy", "lp-rounding", "none"}
        The MIP start. When checkpoint-all fits, it is optimal (every needed node computed once is
        a lower bound) and is returned at once with gap 0. Otherwise ``greedy`` starts HiGHS from
        :func:`~remat_core.solvers.stage_models.warm_start.greedy_stage_schedule`, ``lp-rounding`` from
        Checkmate's rounded LP (:func:`~remat_core.solvers.stage_models.checkmate_lp.round_lp`), and ``auto``
        from the cheapest of the greedy and the heuristic solvers' schedules that are in the
        MILP's form (:func:`~remat_core.solvers.stage_models.warm_start.best_stage_start`: DTR's usually),
        or the rounded LP when none fits.
    warm_start_share : float
        Share of the time limit the warm start may use.
    max_nodes : int
        Refuse larger graphs (the model has O(n^2) variables).
    any_order : bool
        Return a quick heuristic's schedule (any order) when it costs less than the MILP's, or
        when the MILP finds none (:func:`~remat_core.solvers.quick.prefer_cheaper_heuristic`).
    link : Link, optional
        A transfer lane to the host: the recompute-only search gets half the time, the MILP with
        offloads the rest, and the faster schedule over the link is returned (``solver_info``
        ``offload``: the offload model's status and objective).

    Returns
    -------
    Schedule
        The MILP's schedule: ``solver_info`` holds ``status`` (HiGHS's), ``mip_gap``,
        ``lower_bound`` (HiGHS's dual bound), ``exact`` (gap 0: optimal for this order), the warm
        start and its cost, the model size, and ``incumbents``: ``[seconds since the call,
        objective]`` of each improving solution; all of these hold for this order only. A
        heuristic's schedule: ``source`` (its name), ``exact`` False, ``why``, ``source_info``, and
        ``fixed_order``: the MILP's own ``solver_info`` with its ``cost``, or its ``refusal``.

    Raises
    ------
    InfeasibleBudget
        When HiGHS proves that no frontier-advancing schedule of this order fits, or finds none
        within the time limit (the detail says which), and no quick heuristic fits either
        (``any_order``).
    SolverOptionError
        If the graph is larger than ``max_nodes``.

    Notes
    -----
    The time limit bounds the whole call: the quick heuristics, the warm start (at most
    ``warm_start_share`` of it), building the model and HiGHS, which runs in a thread and is left
    behind if it has not stopped a second after the limit (it checks its own limit only now and
    then: a 60 s limit was seen to end after 92 to 125 s). The MILP has O(n^2) variables (only
    ``R`` integral, see the model's notes) and O(n (n + |E|)) rows. HiGHS's solution is turned into ops by the shared stage conversion (each
    tensor freed right after its last reader) and simulated; the warm start is kept if HiGHS's
    schedule is not better.

    References
    ----------
    P. Jain, A. Jain, A. Nrusimha, A. Gholami, P. Abbeel, K. Keutzer, I. Stoica, J. Gonzalez.
    "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization". MLSys 2020.
    """
    grid = stage_grid(graph)
    check_model_size(grid, max_nodes, "checkmate-milp")
    deadline = Deadline(DEFAULT_TIME_LIMIT if time_limit is None else time_limit)
    if link is not None:
        recomputed = checkmate_milp(graph, budget, time_limit=max(deadline.left() / 2, 0.01), mip_gap=mip_gap,
                                    warm_start=warm_start, warm_start_share=warm_start_share, max_nodes=max_nodes,
                                    any_order=any_order)
        return faster_with_offloads(grid, budget, recomputed, link, deadline, highs_transfers(mip_gap))
    base_info: dict[str, Any] = {"time_limit": deadline.end - deadline.started, "order": "graph topological order",
                                 "stages": grid.n}
    trivial = checkpoint_all_if_it_fits(graph, budget, "checkmate-milp", **{**base_info, "mip_gap": 0.0})
    if trivial is not None:
        return trivial
    attempts = run_quick_heuristics(graph, budget, deadline=deadline) if any_order or warm_start == "auto" else []

    def search() -> Schedule:
        start, info = _warm_start(grid, budget, warm_start, deadline.within(deadline.left() * warm_start_share),
                                  attempts)
        result = fixed_order_milp(grid, budget, deadline, start, mip_gap)
        if result.computes is None:
            stopped = result.info.get("stopped_at_time_limit") or "within the time limit" in result.refusal
            error = SearchStopped if stopped else InfeasibleBudget
            raise error(budget, checkpoint_all_peak(graph), "checkmate-milp", result.refusal)
        return stage_schedule(grid, result.computes, rule=_RULE, because=_BECAUSE,
                              solver_info={**base_info, **info, **result.info})

    if not any_order:
        return search()
    return prefer_cheaper_heuristic(graph, budget, "checkmate-milp", search, attempts, base_info)


@dataclass
class MilpResult:
    """What :func:`fixed_order_milp` found.

    Attributes
    ----------
    computes : list of (stage, position) or None
        The cheapest schedule in the MILP's form within the budget: HiGHS's or the start's.
    cost : float
        Its simulated cost (inf without one).
    bound : float or None
        HiGHS's lower bound over the frontier-advancing schedules of the order.
    info : dict
        For ``solver_info``: status, model size, seconds, incumbents, ``mip_gap``, ``exact``,
        ``objective``, ``lower_bound``, and ``stopped_at_time_limit`` when the deadline cut it short.
    refusal : str
        Why there is no schedule (when ``computes`` is None).
    """

    computes: list[StageCompute] | None
    cost: float
    bound: float | None
    info: dict[str, Any]
    refusal: str = ""


def fixed_order_milp(grid: StageGrid, budget: int, deadline: Deadline,
                     start: tuple[list[StageCompute], float] | None, mip_gap: float = 0.0) -> MilpResult:
    """Checkmate's MILP from ``start`` (computes, cost), until ``deadline``: the best frontier-advancing schedule found.

    The memory of a stage is modelled only where it can bind (constraint generation): first the
    stages where checkpoint-all or the start goes over 98 % of the budget; when HiGHS's optimum
    overflows another stage, that stage is added and the MILP solved again. Each relaxed optimum
    is a lower bound, and the first that fits every stage is the optimum: the model is smaller
    where most stages never come near the budget. The start is returned when HiGHS finds nothing
    cheaper; building the model stops at the deadline too.
    """
    info: dict[str, Any] = {"rounds": []}
    best, best_cost = (start[0], start[1]) if start is not None else (None, math.inf)
    stages = _binding_stages(grid, budget, best)
    bound: float | None = None
    solution = None
    while True:
        try:
            model = CheckmateModel(grid, grid.free_budget(budget), integral=True, deadline=deadline,
                                   memory_stages=stages)
            vector = model.start_vector(best) if best is not None else None
        except TimeUp:
            info["stopped_at_time_limit"] = True
            info["status"] = "time_limit (building the model)"
            break
        offset = deadline.elapsed()
        solution = model.solve(deadline.left(), mip_gap=mip_gap, start=vector)
        info["rounds"].append({"memory_stages": len(stages), **model.size().as_dict(), "status": solution.status,
                               "seconds": round(solution.seconds, 4), "lower_bound": solution.bound})
        info.update(**model.size().as_dict(), status=solution.status, incumbents=info.get("incumbents", []) + [
            [round(offset + seconds, 4), value] for seconds, value in solution.incumbents])
        if solution.bound is not None:
            bound = solution.bound if bound is None else max(bound, solution.bound)
        if solution.r is None:
            break
        computes = computes_from_matrix(solution.r)
        peaks = stage_peaks(grid, computes)
        overflow = {t for t in np.flatnonzero(peaks > budget).tolist() if t not in stages}
        if not overflow:
            if peaks.max() > budget:
                info["numerical_note"] = (f"HiGHS's schedule peaks at {int(peaks.max()):,} bytes, over the budget within "
                                          f"solver tolerance; it was discarded")
            else:
                cost = measure(grid, computes)[1]
                if cost < best_cost:
                    best, best_cost = computes, cost
            break
        if solution.status != "optimal":  # its schedule overflows a stage left out, and there is no time to add it
            break
        stages = stages | overflow
    if solution is None or solution.status == "time_limit":
        info["stopped_at_time_limit"] = True
    if best is None:
        refusal = ("HiGHS proved that no frontier-advancing schedule of the topological order fits"
                   if solution is not None and solution.status == "infeasible" else
                   "HiGHS found no schedule within the time limit; raise the time limit")
        return MilpResult(None, math.inf, bound, info, refusal)
    info.update(lower_bound=bound, memory_stages=len(stages))
    gap = relative_gap(best_cost, bound)
    info.update(mip_gap=gap, exact=gap == 0.0, objective=best_cost)
    return MilpResult(best, best_cost, bound, info)


def _binding_stages(grid: StageGrid, budget: int, start: list[StageCompute] | None) -> frozenset[int]:
    """Stages whose memory may bind: where checkpoint-all or the start goes over 98 % of the budget."""
    near = grid.graph.pinned_bytes + 0.98 * grid.free_budget(budget)
    peaks = stage_peaks(grid, checkpoint_all_computes(grid))
    if start is not None:
        peaks = np.maximum(peaks, stage_peaks(grid, start))
    return frozenset(np.flatnonzero(peaks >= near).tolist())
