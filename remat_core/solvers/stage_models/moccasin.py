"""``moccasin``: Moccasin's constraint program over retention intervals (OR-Tools CP-SAT).

Moccasin keeps Checkmate's frontier-advancing stages of a fixed topological order but replaces the
O(n^2) 0/1 matrices with a few *retention intervals* per node: interval ``c`` of node ``v`` starts
when ``v`` is (re)computed and ends when that copy is dropped. Time is the sequence of *events*
``(stage s, position p)``, ``p <= s``, in lexicographic order (``event = s (s + 1) / 2 + p``), so an
interval of ``v`` can only start at one of ``v``'s own events, and a schedule is the list of
present intervals sorted by start. With ``C`` intervals per node the model has O(C n) integer
variables and O(C^2 |E|) Booleans, against Checkmate's O(n^2).

Model (Bartan et al. 2023, section 4), for every node ``v`` and interval ``c < C``:

- ``start[v][0] = event(pos v, pos v)``, ``present[v][0] = 1``: the first computation is the
  frontier's; later intervals start at ``event(s, pos v)`` for a later stage ``s``, are optional,
  and are ordered (``present[v][c] -> present[v][c-1]``, ``end[v][c-1] <= start[v][c]``).
- Precedence: for each edge ``u -> v`` and each present interval ``c`` of ``v``, some present
  interval ``d`` of ``u`` covers the compute event: ``start[u][d] < start[v][c] < end[u][d]``
  (a Boolean ``serves[u, d, v, c]`` per pair).
- Memory: ``cumulative`` of all intervals ``[start, end)`` with demand ``mem(v)`` and capacity
  ``budget - pinned``. At the event where ``v`` is computed, the intervals alive are ``v`` itself
  and every copy still to be read, which is what the simulator counts after ``compute v``.
- Objective: the cost of the optional intervals (recomputations).

Search, as in Moccasin's code: when no schedule is known to fit, phase 1 drops the budget and
minimises ``max(peak, budget)`` (the cumulative's capacity is a variable) from a complete
checkpoint-all hint; its first schedule that fits is the complete hint of phase 2, which adds
``peak <= budget`` and minimises cost. A quick greedy schedule that already fits skips phase 1.

What it restricts: Checkmate's fixed order (see :mod:`~remat_core.solvers.stage_models.checkmate_milp`), and
at most ``C`` computations of each node. With ``C`` at least the number of stages it is exactly
Checkmate's problem. As for ``checkmate-milp``, the quick heuristics' schedules (any order)
compete: a cheaper one is returned instead, the CP's own result kept in
``solver_info["fixed_order"]`` (``any_order=False``: the CP's result alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...errors import InfeasibleBudget, SearchStopped
from ...graph import ComputeGraph
from ...schedule import Link, Schedule, checkpoint_all_peak
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..deadline import Deadline, TimeUp
from ..outcome import SolveOutcome
from ..quick import ANY_ORDER, prefer_cheaper_heuristic, run_quick_heuristics
from ..registry import Option, SolverTags, register
from .grid import (DEFAULT_TIME_LIMIT, StageCompute, StageGrid, checkpoint_all_computes, instance_spans, measure,
                   stage_grid, stage_schedule)
from .offload_stages import cpsat_transfers, faster_with_offloads
from .warm_start import best_stage_start

_COST_RESOLUTION = 10 ** 6
_RULE = "moccasin"
_BECAUSE = "Moccasin's retention intervals keep memory under budget"


def event(stage: int, position: int) -> int:
    """The time index of computing ``position`` in ``stage`` (``position <= stage``)."""
    return stage * (stage + 1) // 2 + position


def stage_of_event(value: int) -> StageCompute:
    """``(stage, position)`` of an event: the inverse of :func:`event`."""
    stage = (math.isqrt(8 * value + 1) - 1) // 2
    return stage, value - stage * (stage + 1) // 2


@dataclass(frozen=True)
class IntegerCosts:
    """Node costs as integers for CP-SAT: ``integer = round(cost * scale)``."""

    values: np.ndarray
    scale: float
    rounded: bool  # some cost was not a whole number of 1/scale


def integer_costs(cost: np.ndarray) -> IntegerCosts:
    """Exact integers when costs have at most 6 decimals, else costs rescaled so the largest is 10**6."""
    for digits in range(7):
        scaled = cost * 10 ** digits
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, scaled)) and scaled.max(
                initial=0.0) < 2 ** 40:
            return IntegerCosts(np.round(scaled).astype(np.int64), float(10 ** digits), False)
    scale = _COST_RESOLUTION / float(cost.max())
    return IntegerCosts(np.round(cost * scale).astype(np.int64), scale, True)


class _IntervalModel:
    """The CP-SAT model of one graph and budget (variables kept for reading the solution back)."""

    def __init__(self, grid: StageGrid, free_budget: int, intervals: int, deadline: Deadline | None = None):
        from ortools.sat.python import cp_model
        self.grid = grid
        self.deadline = deadline or Deadline(None)
        self.cp = cp_model
        self.model = cp_model.CpModel()
        self.costs = integer_costs(grid.cost)
        nonzero = grid.mem[grid.mem > 0]
        self.gcd = int(np.gcd.reduce(nonzero)) if nonzero.size else 1
        self.start: list[list[Any]] = []
        self.end: list[list[Any]] = []
        self.size: list[list[Any]] = []
        self.present: list[list[Any]] = []
        self.serves: dict[tuple[int, int, int, int], Any] = {}
        intervals_made, demands = self._add_intervals(intervals)
        self._add_precedences()
        self.capacity = max(free_budget // self.gcd, 0)
        self.most = max(sum(demands), self.capacity)  # every interval alive at once
        self.footprint = self.model.new_int_var(0, self.most, "footprint")
        self.model.add_cumulative(intervals_made, demands, self.footprint)
        # each optional interval (a recomputation): its presence and its node
        self.recomputations = [(self.present[p][c], p) for p in range(grid.n) for c in range(1, len(self.present[p]))]

    def _add_intervals(self, intervals: int) -> tuple[list[Any], list[int]]:
        """Up to ``intervals`` ordered retention intervals per node; returns them and their demands."""
        grid, model, cp_model = self.grid, self.model, self.cp
        useful = grid.last_useful_stage
        made, demands = [], []
        for p in range(grid.n):
            self.deadline.check()
            last_read = max((event(int(useful[j]), j) for j in grid.succs[p]), default=event(p, p)) + 1
            later = [event(s, p) for s in range(p + 1, int(useful[p]) + 1)]
            starts, ends, sizes, presents = [], [], [], []
            for c in range(min(intervals, 1 + len(later))):
                if c == 0:
                    start, present = model.new_constant(event(p, p)), model.new_constant(1)
                else:
                    start = model.new_int_var_from_domain(cp_model.Domain.FromValues(later), f"start_{p}_{c}")
                    present = model.new_bool_var(f"present_{p}_{c}")
                    model.add_implication(present, presents[c - 1])
                    model.add(ends[c - 1] <= start).only_enforce_if(present)
                lowest = event(p, p) if c == 0 else later[0]
                highest = max(last_read, lowest + 1)
                end = model.new_int_var(lowest + 1, highest, f"end_{p}_{c}")
                size = model.new_int_var(1, highest - lowest, f"size_{p}_{c}")
                made.append(model.new_optional_interval_var(start, size, end, present, f"interval_{p}_{c}"))
                demands.append(int(grid.mem[p]) // self.gcd)
                starts.append(start)
                ends.append(end)
                sizes.append(size)
                presents.append(present)
            self.start.append(starts)
            self.end.append(ends)
            self.size.append(sizes)
            self.present.append(presents)
        return made, demands

    def _add_precedences(self) -> None:
        """Each present interval of ``v`` is computed while some interval of each input is alive."""
        model = self.model
        for v in range(self.grid.n):
            self.deadline.check()
            for u in self.grid.preds[v]:
                for c in range(len(self.start[v])):
                    serves = []
                    for d in range(len(self.start[u])):
                        x = model.new_bool_var(f"serves_{u}_{d}_{v}_{c}")
                        self.serves[(u, d, v, c)] = x
                        model.add_implication(x, self.present[u][d])
                        model.add(self.start[u][d] < self.start[v][c]).only_enforce_if(x)
                        model.add(self.start[v][c] < self.end[u][d]).only_enforce_if(x)
                        serves.append(x)
                    model.add_bool_or(serves).only_enforce_if(self.present[v][c])

    def minimize_peak(self, hinted_peak: int) -> None:
        """Moccasin's first phase: no budget, minimise ``max(peak, budget)`` to find a schedule that fits.

        ``hinted_peak`` (units) is the peak of the hinted schedule, so the hint stays complete.
        """
        excess = self.model.new_int_var(self.capacity, self.most, "peak_or_budget")
        self.model.add(excess >= self.footprint)
        self.model.add_hint(excess, max(hinted_peak, self.capacity))
        self.model.minimize(excess)

    def minimize_cost(self) -> None:
        """The problem itself: peak within budget, minimise the cost of recomputations."""
        self.model.add(self.footprint <= self.capacity)
        self.model.minimize(sum(int(self.costs.values[p]) * present for present, p in self.recomputations)
                            if self.recomputations else 0)

    def hint_solution(self, solver) -> None:
        """Hint every variable with its value in the solver's last solution."""
        self.model.clear_hints()
        for index in range(len(self.model.proto.variables)):
            var = self.model.get_int_var_from_proto_index(index)
            self.model.add_hint(var, solver.value(var))

    def hint(self, computes: list[StageCompute]) -> None:
        """Hint a stage-compute sequence: each node's computations become its intervals, in order.

        Every variable gets a value (a complete hint). A node computed more often than it has
        intervals keeps only its first ones (the hint is then infeasible).
        """
        spans: dict[int, list[tuple[int, int]]] = {}
        for (t, p), (last_t, last_p) in instance_spans(self.grid, computes):
            spans.setdefault(p, []).append((event(t, p), event(last_t, last_p) + 1))
        for p in range(self.grid.n):
            mine = spans.get(p, [])
            for c in range(len(self.start[p])):
                present = c < len(mine)
                if present:
                    begin, end = mine[c]
                else:  # an absent interval: the smallest values its domains allow
                    begin = self.start[p][c].proto.domain[0]
                    end = begin + 1
                if c > 0:
                    self.model.add_hint(self.present[p][c], present)
                    self.model.add_hint(self.start[p][c], begin)
                self.model.add_hint(self.end[p][c], end)
                self.model.add_hint(self.size[p][c], end - begin)
        peak = measure(self.grid, computes)[0] - self.grid.graph.pinned_bytes
        self.model.add_hint(self.footprint, peak // self.gcd)
        for (u, d, v, c), x in self.serves.items():
            both = d < len(spans.get(u, [])) and c < len(spans.get(v, []))
            if both:
                u_begin, u_end = spans[u][d]
                v_begin = spans[v][c][0]
                both = u_begin < v_begin < u_end
            self.model.add_hint(x, both)

    def computes(self, solver) -> list[StageCompute]:
        """The stage computes of the solver's current solution."""
        out = []
        for p in range(self.grid.n):
            for c in range(len(self.start[p])):
                if c == 0 or solver.boolean_value(self.present[p][c]):
                    out.append(stage_of_event(int(solver.value(self.start[p][c]))))
        return sorted(out)

    def variable_count(self) -> int:
        return len(self.model.proto.variables)


@register("moccasin", "Moccasin's CP (retention intervals per node, cumulative memory) over Checkmate's stages, "
                      "OR-Tools CP-SAT with a time limit: O(n) variables, at most `intervals` computes per node.",
          tags=SolverTags(searching=True, meets_named_budget=False, offloads=True, test_options={"workers": 1}),
          options=(Option("intervals", int, 2, "retention intervals (computations) allowed per node", low=1,
                          high=64),
                   Option("workers", int, 2, "CP-SAT search workers", low=1, high=64),
                   Option("seed", int, 0, "CP-SAT random seed", low=0, high=2 ** 31 - 1),
                   Option("hint", bool, True, "start from the best quick schedule (greedy or heuristic) with at "
                                              "most `intervals` computes per node when one fits (else Moccasin's "
                                              "phase 1 first)"),
                   ANY_ORDER),
          reference="Bartan, Li, Teague, Lott, Dilkina, Moccasin: Efficient Tensor Rematerialization for Neural "
                    "Networks, ICML 2023")
def moccasin(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, intervals: int = 2,
             workers: int = 2, seed: int = 0, hint: bool = True, any_order: bool = True,
             link: Link | None = None) -> Schedule:
    """Moccasin: the cheapest schedule with at most ``intervals`` computations per node.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Seconds in all (default :data:`~remat_core.solvers.stage_models.grid.DEFAULT_TIME_LIMIT`).
    intervals : int
        ``C``: retention intervals per node (Moccasin's default is 2).
    workers, seed : int
        CP-SAT's parallel workers and random seed.
    hint : bool
        Hint the cheapest schedule of :func:`~remat_core.solvers.stage_models.warm_start.best_stage_start`
        (the greedy or a heuristic solver's) with at most ``C`` computations per node that fits;
        CP-SAT's schedule is returned only when it is cheaper, so moccasin is never worse than its
        hint. When none fits (or ``hint`` is false), Moccasin's
        phase 1 runs first: no budget, minimise ``max(peak, budget)`` from checkpoint-all, and the
        first schedule that fits becomes the hint of the real search.
    any_order : bool
        As for ``checkmate-milp``: a quick heuristic's schedule (any order) is returned when it
        costs less than the CP's, or when the CP finds none.
    link : Link, optional
        A transfer lane: the search above gets half the time, then CP-SAT solves Checkmate's stage
        model with offload and prefetch decisions (:mod:`.offload_stages`) from its schedule, and
        the faster of the two over the link is returned.

    Returns
    -------
    Schedule
        The CP's schedule: ``solver_info`` holds ``status`` (CP-SAT's), ``objective`` and
        ``lower_bound`` (in cost units), ``gap``, ``exact`` (proved optimal within ``C``
        intervals of this order), ``cost_scale`` and ``objective_rounded`` (when costs had to be
        rounded to integers), and ``incumbents``: ``[seconds since the call, cost]`` of each
        solution CP-SAT found (its true cost, not the rounded objective). A heuristic's schedule:
        ``source``, ``exact`` False, ``why``, ``source_info`` and ``fixed_order`` (the CP's own
        ``solver_info`` and ``cost``, or its ``refusal``).

    Raises
    ------
    InfeasibleBudget
        When CP-SAT proves no schedule with ``C`` intervals fits, or finds none in time, and no
        quick heuristic fits either (``any_order``).

    Notes
    -----
    When checkpoint-all fits it is returned at once: it is optimal. Both phases share one time
    limit; ``phase1_seconds`` in ``solver_info`` says what phase 1 took. The model has ``C`` intervals
    per node (fewer where later computations could serve no one), ``C^2`` Booleans per edge, and
    one cumulative constraint; the solution's intervals become stage computes, and the shared
    conversion frees every tensor right after its last reader.

    References
    ----------
    B. Bartan, H. Li, H. Teague, C. Lott, B. Dilkina. "Moccasin: Efficient Tensor
    Rematerialization for Neural Networks". ICML 2023.
    """
    deadline = Deadline(DEFAULT_TIME_LIMIT if time_limit is None else time_limit)
    grid = stage_grid(graph)
    if link is not None:
        recomputed = moccasin(graph, budget, time_limit=max(deadline.left() / 2, 0.01), intervals=intervals,
                              workers=workers, seed=seed, hint=hint, any_order=any_order)
        return faster_with_offloads(grid, budget, recomputed, link, deadline, cpsat_transfers(workers, seed),
                                    rule=_RULE)
    limit = deadline.end - deadline.started
    base = {"intervals": intervals, "time_limit": limit, "order": "graph topological order", "stages": grid.n}
    trivial = checkpoint_all_if_it_fits(graph, budget, "moccasin", **{**base, "gap": 0.0})
    if trivial is not None:
        return trivial
    attempts = run_quick_heuristics(graph, budget, deadline=deadline) if hint or any_order else []

    def search() -> Schedule:
        return _search(grid, budget, deadline, intervals, workers, seed, hint, attempts, base)

    if not any_order:
        return search()
    return prefer_cheaper_heuristic(graph, budget, "moccasin", search, attempts, base)


def _search(grid: StageGrid, budget: int, deadline: Deadline, intervals: int, workers: int, seed: int,
            hint: bool, attempts: list[SolveOutcome], base: dict[str, Any]) -> Schedule:
    """CP-SAT from the hint (or phase 1): the best schedule with at most ``intervals`` computes per node found.

    Everything stops at ``deadline``: building the model (then the hint, if any, is returned),
    phase 1 and the search (each given the time left).
    """
    graph = grid.graph
    limit = base["time_limit"]
    start = best_stage_start(grid, budget, attempts, max_computes=intervals, deadline=deadline) if hint else None
    try:
        model = _IntervalModel(grid, grid.free_budget(budget), intervals, deadline)
    except TimeUp:
        if start is None:
            raise SearchStopped(budget, checkpoint_all_peak(graph), "moccasin",
                                f"stopped at the time limit of {limit:g} s while building the model; raise the "
                                   f"time limit") from None
        return stage_schedule(grid, start[0], rule=_RULE, because=_BECAUSE, solver_info={
            **base, "hint": start[1], "hint_cost": start[2], "objective": start[2], "exact": False,
            "stopped_at_time_limit": True,
            "kept_hint": "the time limit passed while the model was being built"})
    constant = float(grid.cost.sum())
    info: dict[str, Any] = {**base, "variables": model.variable_count(), "cost_scale": model.costs.scale,
                            "objective_rounded": model.costs.rounded, "hint": start[1] if start else None}
    if start is None:
        info["phase1_seconds"] = _phase1(model, graph, budget, deadline.left(), workers, seed, intervals, limit)
        info["hint"] = "phase 1"
    else:
        info["hint_cost"] = start[2]
        model.hint(start[0])
    model.minimize_cost()
    offset = deadline.elapsed()
    solver = _solver(model, deadline.left(), workers, seed)
    incumbents = _incumbent_recorder(model.cp, offset, constant, model.recomputations, grid.cost)
    status = solver.solve(model.model, incumbents)
    info.update(status=solver.status_name(status).lower(), cp_seconds=round(solver.wall_time, 4),
                incumbents=incumbents.found)
    if status not in (model.cp.OPTIMAL, model.cp.INFEASIBLE) and deadline.expired():
        info["stopped_at_time_limit"] = True
    solved = status in (model.cp.OPTIMAL, model.cp.FEASIBLE)
    if not solved and start is None:
        detail = (f"CP-SAT proved that no schedule with at most {intervals} computations per node fits; "
                  f"try more intervals" if status == model.cp.INFEASIBLE else
                  f"CP-SAT found no schedule within {limit:g} s (status {info['status']}); raise the time limit")
        error = InfeasibleBudget if status == model.cp.INFEASIBLE else SearchStopped
        raise error(budget, checkpoint_all_peak(graph), "moccasin", detail)
    lower = constant + solver.best_objective_bound / model.costs.scale if solved else None
    if solved:
        computes = model.computes(solver)
        objective = measure(grid, computes)[1]
        if start is None or objective <= start[2]:
            info.update(objective=objective, lower_bound=lower, gap=_gap(objective, lower, status == model.cp.OPTIMAL),
                        exact=status == model.cp.OPTIMAL)
            return stage_schedule(grid, computes, rule=_RULE, because=_BECAUSE, solver_info=info)
    computes, objective = start[0], start[2]
    info.update(objective=objective, lower_bound=lower, gap=_gap(objective, lower, False), exact=False,
                kept_hint=f"CP-SAT found nothing cheaper than its hint ({start[1]}) within {limit:g} s")
    return stage_schedule(grid, computes, rule=_RULE, because=_BECAUSE, solver_info=info)


def _gap(objective: float, lower: float | None, optimal: bool) -> float | None:
    """Relative gap of ``objective`` over CP-SAT's bound (0 when proved optimal, None without a bound)."""
    if optimal:
        return 0.0
    if lower is None:
        return None
    return max(objective - lower, 0.0) / max(objective, 1e-300)


def _solver(model: _IntervalModel, seconds: float, workers: int, seed: int):
    solver = model.cp.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    # CP-SAT's presolve spends tens of seconds on the half-reified precedences over these sparse
    # event domains at a few hundred nodes (40 s at 300, before the first solution; 4 s without)
    # and the search finds schedules as good without it: measured in bench/exact_solvers.py.
    solver.parameters.cp_model_presolve = False
    return solver


def _phase1(model: _IntervalModel, graph: ComputeGraph, budget: int, seconds: float, workers: int, seed: int,
            intervals: int, limit: float) -> float:
    """Moccasin's phase 1: minimise the peak from checkpoint-all until a schedule fits, then hint it.

    Returns the seconds it took. Raises :class:`InfeasibleBudget` when no schedule that fits was
    found (proved, when CP-SAT's smallest peak is optimal), with the smallest peak it reached.
    The greedy's over-budget schedules were measured to start this search in worse places than
    checkpoint-all.
    """
    model.hint(checkpoint_all_computes(model.grid))
    model.minimize_peak((checkpoint_all_peak(graph) - graph.pinned_bytes) // model.gcd)
    solver = _solver(model, seconds, workers, seed)
    status = solver.solve(model.model)
    found = status in (model.cp.OPTIMAL, model.cp.FEASIBLE)
    if found and solver.value(model.footprint) <= model.capacity:
        model.hint_solution(solver)
        return round(solver.wall_time, 4)
    smallest = checkpoint_all_peak(graph)
    if found:
        smallest = min(smallest, solver.value(model.footprint) * model.gcd + graph.pinned_bytes)
    if status == model.cp.OPTIMAL:
        detail = (f"CP-SAT proved that with at most {intervals} computations per node the peak is at least "
                  f"{smallest:,} bytes; try more intervals")
    else:
        detail = (f"CP-SAT found no schedule with at most {intervals} computations per node within {limit:g} s; "
                  f"raise the time limit or the intervals")
    raise InfeasibleBudget(budget, smallest, "moccasin", detail)


def _incumbent_recorder(cp_model, offset: float, constant: float, recomputations: list[tuple[Any, int]],
                        cost: Sequence[float]):
    """A CP-SAT solution callback that records ``[seconds since the call, cost]`` per solution.

    ``offset`` is the time spent before this solve (greedy, model, phase 1); CP-SAT's own clock
    starts at zero. The cost is ``constant`` (every node once) plus the true ``cost`` of the node of
    each present recomputation, not CP-SAT's objective, whose costs may be rounded to integers. The class is
    built here because ortools is imported only when moccasin runs.
    """
    class Incumbents(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[list[float]] = []

        def on_solution_callback(self) -> None:
            total = constant + sum(float(cost[p]) for present, p in recomputations if self.boolean_value(present))
            self.found.append([round(offset + self.wall_time, 4), total])

    return Incumbents()
