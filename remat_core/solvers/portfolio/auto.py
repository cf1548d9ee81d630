"""``auto``, the default solver: a portfolio that returns the best schedule it finds within the time limit.

Phases, each recorded in ``solver_info["phases"]`` with its result and time:

1. **proofs first**: a budget below :func:`~remat_core.solvers.bounds.peak_lower_bound` is refused
   as proved infeasible; when checkpoint-all fits it is returned, proved optimal; a tiny graph is
   solved by exhaustive search (:mod:`~remat_core.solvers.portfolio.exhaustive`: the optimum over every
   schedule, or a proof that none fits, with the smallest peak any schedule reaches).
2. **quick**: greedy lifetime splitting from checkpoint-all in the graph's order and in a
   memory-aware one (:mod:`~remat_core.solvers.eviction.lifetime_split`), then every quick heuristic of the
   portfolio (:mod:`remat_core.solvers.quick`: every solver tagged ``quick``): something good within about a
   second on graphs of a thousand nodes.
3. **improve**: large-neighbourhood search on the best compute sequence
   (:func:`~remat_core.solvers.eviction.lifetimes.ruin_and_recreate`): remove the recomputations of a window
   or of a few nodes and let the greedy redo them with jittered scores; keep what is cheaper.
4. **exact**: when the graph has at most ``exact_max_nodes`` nodes to compute, Checkmate's MILP
   (:func:`~remat_core.solvers.stage_models.checkmate_milp.fixed_order_milp`) from the best schedule that is in
   its form (frontier-advancing in the graph's order), for the time left: it returns something
   cheaper or proves the best one optimal among the schedules of that order.

5. **offload**, only when the solve is given a transfer lane (``--bandwidth``): every solver tagged
   ``offloads`` that does not search (``pofo``; the MILP's offload model is ``checkmate-milp`` with a link) at the
   budget over that lane; its schedule wins when its makespan is shorter.
   Every phase is then judged by the makespan the simulator measures over the lane, which for a
   schedule without copies is its cost. Without a lane ``auto`` never offloads.

It stops early when a phase proves the best schedule optimal, when the improvement stalls and no
exact phase applies, and at the time limit (``stopped_at_time_limit``). Every cost is the
simulator's. ``solver_info``: ``winner`` (the phase and solver whose schedule is returned),
``phases``, ``lower_bound`` with ``gap`` and ``gap_scope`` (the bound over every schedule, or the
MILP's over the schedules of the graph's order when that is the class the winner belongs to and the
MILP ran), ``peak_lower_bound``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ...errors import InfeasibleBudget, SearchStopped
from ...graph import ComputeGraph
from ...schedule import Link, Schedule, checkpoint_all_cost, checkpoint_all_ops, checkpoint_all_peak, simulate
from ..bounds import peak_lower_bound
from ..deadline import Deadline
from ..eviction.lifetime_split import lifetime_split_timelines, timeline_schedule
from ..eviction.lifetimes import Timeline, ruin_and_recreate
from ..quick import run_quick_heuristics
from ..front_door import solve_outcome
from ..registry import Option, SolverTags, find_solvers, register
from ..stage_models.checkmate_milp import fixed_order_milp
from ..stage_models.checkmate_model import relative_gap
from ..stage_models.grid import (DEFAULT_TIME_LIMIT, StageCompute, StageGrid, computes_from_ops, measure, stage_grid,
                                 stage_schedule)
from .exhaustive import cheapest_schedule, smallest_peak

EXACT_MAX_NODES = 400
"""Default size (nodes to compute) up to which the MILP runs: its model has O(n^2) variables."""
QUICK_SHARE = 0.4
"""Share of the time limit the quick phase may use (lifetime splitting first, then the other heuristics)."""
OPTIMALITY_TOLERANCE = 1e-4
"""A relative gap to the lower bound at or below which the best is taken as optimal and the search stops
(HiGHS's default ``mip_rel_gap``)."""

_ALL_SCHEDULES = "all schedules"
_FIXED_ORDER = "frontier-advancing schedules of the order the MILP searched (the best schedule's first computations)"


@dataclass
class _Portfolio:
    """The best schedule so far, and what every phase did."""

    graph: ComputeGraph
    budget: int
    deadline: Deadline
    best: Schedule | None = None
    best_cost: float = math.inf
    winner: str = ""
    timeline: Timeline | None = None  # the best result as a compute sequence, when it has one
    phases: list[dict[str, Any]] = field(default_factory=list)
    floors: list[int] = field(default_factory=list)  # peaks lifetime splitting reaches whatever the budget
    link: Link | None = None  # the transfer lane: schedules are judged by their makespan over it

    def optimal(self, lower_bound: float) -> bool:
        """Whether the best is within :data:`OPTIMALITY_TOLERANCE` of ``lower_bound`` (checkpoint-all's cost)."""
        return self.best_cost <= lower_bound * (1 + OPTIMALITY_TOLERANCE)

    def offer(self, phase: str, schedule: Schedule | None, seconds: float, detail: str = "",
              timeline: Timeline | None = None) -> None:
        """Record a phase's result; its schedule becomes the best when it fits and costs less."""
        entry: dict[str, Any] = {"phase": phase, "seconds": round(seconds, 4)}
        if schedule is None:
            entry.update(status="no schedule", detail=detail)
        else:
            result = simulate(self.graph, schedule, link=self.link)
            fits = result.peak <= self.budget
            entry.update(status="fits" if fits else "over budget", cost=result.cost, peak=result.peak,
                         overhead=_overhead(self.graph, result.cost))
            if self.link is not None:
                entry["makespan"] = result.makespan
            if detail:
                entry["detail"] = detail
            if fits and result.makespan < self.best_cost * (1 - 1e-12):
                self.best, self.best_cost, self.winner = schedule, result.makespan, phase
                self.timeline = timeline
        self.phases.append(entry)


@register("auto", "The default: the best schedule found in the time limit. Quick heuristics (lifetime splitting "
                  "first), then large-neighbourhood search, then Checkmate's MILP from the best when the graph is small "
                  "enough; proves infeasibility below a lower bound; solver_info names the winner, each phase and the "
                  "gap.",
          tags=SolverTags(searching=True, offloads=True, test_options={"stall": 3, "exact_max_nodes": 24}),
          options=(Option("exact_max_nodes", int, EXACT_MAX_NODES, "run the MILP when the graph has at most this many "
                                                                   "nodes to compute (0: never)", low=0, high=100000),
                   Option("stall", int, 30, "large-neighbourhood rounds without a gain before it stops", low=0,
                          high=100000),
                   Option("seed", int, 0, "random seed of the large-neighbourhood search", low=0, high=2 ** 31 - 1)),
          reference="Checkmate (Jain et al., MLSys 2020), Moccasin (Bartan et al., ICML 2023), DTR (Kirisame et al., "
                    "ICLR 2021); ruin-and-recreate large-neighbourhood search (Shaw 1998; Schrimpf et al. 2000)")
def auto(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, exact_max_nodes: int = EXACT_MAX_NODES,
         stall: int = 30, seed: int = 0, link: Link | None = None) -> Schedule:
    """The best schedule the portfolio finds within ``time_limit`` (default 60 s); with ``link``, of least makespan
    over it, offloading solvers included.

    Raises
    ------
    InfeasibleBudget
        Proved: the budget is below :func:`~remat_core.solvers.bounds.peak_lower_bound` (the smallest
        feasible budget named is the least lifetime splitting meets aiming at that bound), or the
        exhaustive search of a tiny graph found no schedule (the smallest feasible budget is then
        exact). Otherwise (no phase found a schedule in time), not a proof: the message says so
        and gives the proved bound, and the smallest feasible budget named is the floor of
        lifetime splitting, which ``auto`` meets.
    """
    deadline = Deadline(DEFAULT_TIME_LIMIT if time_limit is None else time_limit)
    bound = peak_lower_bound(graph)
    if budget < bound:
        raise InfeasibleBudget(budget, _budget_met_near(graph, bound, deadline), "auto",
                               f"proved: every schedule needs at least {bound:,} bytes (the last input of some node is "
                               f"computed while its other inputs are resident)")
    base_cost = checkpoint_all_cost(graph)
    if checkpoint_all_peak(graph) <= budget:
        ops, reasons = checkpoint_all_ops(graph)
        return Schedule.from_ops(ops, reasons, solver_info={
            "winner": "checkpoint-all", "phases": [], "lower_bound": base_cost, "gap": 0.0,
            "gap_scope": _ALL_SCHEDULES, "peak_lower_bound": bound,
            "proof": "checkpoint-all fits: computing every needed node once is a lower bound"})
    portfolio = _Portfolio(graph, budget, deadline, link=link)
    exhaustive = _exhaustive_phase(portfolio)
    fixed_order = None
    if exhaustive is None:
        exact_follows = stage_grid(graph).n <= exact_max_nodes
        _quick_phases(portfolio)
        if not portfolio.optimal(base_cost):
            _improve_phase(portfolio, stall, seed, exact_follows)
        fixed_order = _exact_phase(portfolio) if exact_follows and not portfolio.optimal(base_cost) else None
    if link is not None and not portfolio.optimal(base_cost):
        _offload_phase(portfolio)
    if exhaustive is not None and portfolio.winner == "exhaustive search":
        return exhaustive
    return _result(portfolio, bound, fixed_order)


def _offload_phase(portfolio: _Portfolio) -> None:
    """Every offloading solver that does not search, at the budget, over the portfolio's transfer lane."""
    for spec in find_solvers(offloads=True, searching=False):
        limit = portfolio.deadline.left() if portfolio.deadline.limited else None
        if portfolio.deadline.expired():
            portfolio.phases.append({"phase": spec.name, "seconds": 0.0, "status": "skipped",
                                     "detail": "the time limit had passed"})
            continue
        answer = solve_outcome(portfolio.graph, portfolio.budget, spec.name, limit or None, link=portfolio.link)
        portfolio.offer(spec.name, answer.schedule, answer.seconds, answer.detail)


def _budget_met_near(graph: ComputeGraph, bound: int, deadline: Deadline) -> int:
    """The smallest budget lifetime splitting aimed at ``bound`` meets (from either order), which ``auto`` meets
    too; checkpoint-all's peak when splitting is out of time."""
    met = [checkpoint_all_peak(graph)]
    for name in ("memory", "graph"):
        outcome, = lifetime_split_timelines(graph, bound, name, deadline)
        met.append(outcome.timeline.peak if outcome.timeline.peak <= bound else outcome.floor or met[0])
    return min(met)


def _exhaustive_phase(portfolio: _Portfolio) -> Schedule | None:
    """On a tiny graph: the optimum over every schedule, or a proof that none fits (None: not tiny enough)."""
    graph, budget, deadline = portfolio.graph, portfolio.budget, portfolio.deadline
    started = time.perf_counter()
    found = cheapest_schedule(graph, budget, deadline)
    if found is None:
        return None
    if found.ops is None:
        lowest = smallest_peak(graph, deadline)
        smallest = int(lowest.value) if lowest is not None and lowest.ops is not None else None
        raise InfeasibleBudget(budget, smallest, "auto",
                               "proved by exhaustive search: no schedule fits" +
                               (f"; the smallest peak any schedule reaches is {smallest:,} bytes" if smallest else ""))
    schedule = Schedule.from_ops(found.ops)
    portfolio.offer("exhaustive search", schedule, time.perf_counter() - started)
    return schedule.with_updates(solver_info={
        "winner": "exhaustive search", "phases": portfolio.phases, "lower_bound": found.value, "gap": 0.0,
        "gap_scope": _ALL_SCHEDULES, "peak_lower_bound": peak_lower_bound(graph),
        "proof": "exhaustive search over every schedule"})



def _quick_phases(portfolio: _Portfolio) -> None:
    """Lifetime splitting from two orders, then the other quick heuristics, within :data:`QUICK_SHARE` of the time
    (the heuristics within the whole time limit when splitting found nothing)."""
    graph, budget = portfolio.graph, portfolio.budget
    deadline = portfolio.deadline.within(portfolio.deadline.left() * QUICK_SHARE)
    for name in ("memory", "graph"):
        started = time.perf_counter()
        outcome, = lifetime_split_timelines(graph, budget, name, deadline)
        timeline = outcome.timeline
        fits = timeline.peak <= budget
        schedule = timeline_schedule(timeline, {"order": name}) if fits else None
        portfolio.offer(f"lifetime-split ({name} order)", schedule, time.perf_counter() - started,
                        "" if fits else f"splitting towards the lower bound reaches {outcome.floor:,} bytes",
                        timeline if fits else None)
        if outcome.floor is not None and outcome.floor > budget:
            portfolio.floors.append(outcome.floor)
        if portfolio.optimal(checkpoint_all_cost(graph)):
            return
    if portfolio.best is None:  # splitting used the quick share and found nothing: the heuristics get the rest
        deadline = portfolio.deadline
    for answer in run_quick_heuristics(graph, budget, exclude=("lifetime-split",), deadline=deadline):
        portfolio.offer(answer.solver, answer.schedule, answer.seconds, answer.detail)


def _improve_phase(portfolio: _Portfolio, stall: int, seed: int, exact_phase_follows: bool) -> None:
    """Large-neighbourhood search on the best compute sequence (lifetime splitting's, or the best schedule's computes).

    When the MILP follows, the search gets a third of the time left and the MILP the rest.
    """
    if portfolio.best is None or stall == 0 or portfolio.deadline.expired():
        return
    graph, budget = portfolio.graph, portfolio.budget
    timeline = portfolio.timeline or Timeline(graph, [graph.index[node] for action, node in portfolio.best.ops
                                                      if action == "compute"])
    deadline = portfolio.deadline.within(portfolio.deadline.left() / 3) if exact_phase_follows else portfolio.deadline
    started = time.perf_counter()
    improved, rounds = ruin_and_recreate(timeline, budget, deadline, seed=seed, stall=stall)
    seconds = time.perf_counter() - started
    if improved is timeline:
        portfolio.phases.append({"phase": "large-neighbourhood search", "seconds": round(seconds, 4),
                                 "status": "no gain", "detail": f"{rounds} rounds"})
        return
    portfolio.offer("large-neighbourhood search", timeline_schedule(improved, {"rounds": rounds}), seconds,
                    f"{rounds} rounds", improved)


def _exact_phase(portfolio: _Portfolio) -> dict[str, Any] | None:
    """Checkmate's MILP from the best schedule, over the order of its first computations, for the time left.

    Any topological order has a stage grid; in the order in which a schedule first computes the
    nodes, that schedule is in the MILP's form, so the MILP starts from it and searches the schedules
    that keep its order of first computations. Returns the MILP's bound and gap for that order.
    """
    budget, deadline = portfolio.budget, portfolio.deadline
    if deadline.expired():
        portfolio.phases.append({"phase": "checkmate-milp", "seconds": 0.0, "status": "skipped",
                                 "detail": "the time limit had passed"})
        return None
    started = time.perf_counter()
    grid, start = _in_stage_form(portfolio)
    result = fixed_order_milp(grid, budget, deadline, start)
    schedule = None
    if result.computes is not None:
        schedule = stage_schedule(grid, result.computes, rule="milp", because="the MILP keeps memory under budget",
                                  solver_info=result.info)
    portfolio.offer("checkmate-milp", schedule, time.perf_counter() - started, result.refusal)
    portfolio.phases[-1].update(milp_status=result.info.get("status"), lower_bound=result.bound,
                                mip_gap=result.info.get("mip_gap"))
    if result.computes is None or result.bound is None:
        return None
    return {"lower_bound": result.bound, "cost": result.cost, "optimal": result.info.get("exact", False),
            "grid": grid}


def _in_stage_form(portfolio: _Portfolio) -> tuple[StageGrid, tuple[list[StageCompute], float] | None]:
    """A stage grid over the best schedule's order of first computations, and that schedule in its form.

    Falls back to the graph's order without a start when the conversion (each tensor freed after
    its last reader, a node recomputed twice in a stage kept instead) goes over the budget.
    """
    graph = portfolio.graph
    if portfolio.best is not None:
        firsts = list(dict.fromkeys(graph.index[node] for action, node in portfolio.best.ops if action == "compute"))
        grid = stage_grid(graph, [v for v in firsts if v in graph.needed_idx])
        computes = computes_from_ops(grid, portfolio.best.ops)
        if computes is not None:
            peak, cost = measure(grid, computes)
            if peak <= portfolio.budget:
                return grid, (computes, cost)
    return stage_grid(graph), None


def _result(portfolio: _Portfolio, bound: int, fixed_order: dict[str, Any] | None) -> Schedule:
    graph, budget, deadline = portfolio.graph, portfolio.budget, portfolio.deadline
    if portfolio.best is None:
        # a budget auto is sure to meet: what the budget-independent descent of lifetime splitting reaches
        smallest = min(portfolio.floors, default=checkpoint_all_peak(graph))
        why = "stopped at the time limit before any phase found a schedule" if deadline.expired() else \
            f"no phase found a schedule ({', '.join(s['phase'] for s in portfolio.phases)})"
        raise (SearchStopped if deadline.expired() else InfeasibleBudget)(
            budget, smallest, "auto", f"{why}; not proved infeasible: every schedule needs at "
                                                         f"least {bound:,} bytes, no more is proved")
    lower = checkpoint_all_cost(graph)
    scope = _ALL_SCHEDULES
    info: dict[str, Any] = {"winner": portfolio.winner, "phases": portfolio.phases, "peak_lower_bound": bound,
                            "time_limit": round(deadline.end - deadline.started, 4)}
    if fixed_order is not None:
        grid = fixed_order.pop("grid")
        info["fixed_order"] = {**fixed_order, "gap": relative_gap(fixed_order["cost"], fixed_order["lower_bound"]),
                               "scope": _FIXED_ORDER}
        in_order = not portfolio.best.has_transfers and computes_from_ops(grid, portfolio.best.ops) is not None
        if in_order and fixed_order["lower_bound"] > lower:
            lower, scope = fixed_order["lower_bound"], _FIXED_ORDER
    info.update(lower_bound=lower, gap=relative_gap(portfolio.best_cost, lower), gap_scope=scope)
    if deadline.expired():
        info["stopped_at_time_limit"] = True
    return portfolio.best.with_updates(solver_info={**portfolio.best.solver_info, **info})


def _overhead(graph: ComputeGraph, cost: float) -> float:
    base = checkpoint_all_cost(graph)
    return cost / base - 1.0 if base > 0 else 0.0

