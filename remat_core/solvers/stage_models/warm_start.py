"""Quick frontier-advancing schedules under a budget: the warm starts of the exact solvers.

:func:`best_stage_start` is what the exact solvers start from: the cheapest of this module's greedy
and of the quick heuristics' schedules (the quick portfolio, :mod:`remat_core.solvers.quick`) that are in stage form.

The greedy (:func:`greedy_stage_schedule`):
Walk the stages of the fixed order. In stage ``t``, recompute the missing ancestors of ``v_t``
(in the order, each once) and then ``v_t``; before each compute, while the new tensor would not
fit, evict the resident tensor that is cheapest to recompute per byte among those this stage no
longer reads, counting in the cost the inputs it would have to recompute too (as DTR's
evicted-neighbourhood heuristic does, here along every path). A tensor is dropped for good once no later stage can use it.
The result has the form Checkmate's MILP and Moccasin's CP search over, so it is a valid MIP start
or hint; it is no optimum, and it gives up (None) when even the protected tensors do not fit.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..deadline import Deadline
from ..outcome import SolveOutcome
from .grid import StageCompute, StageGrid, computes_from_ops, measure


def best_stage_start(grid: StageGrid, budget: int, attempts: Iterable[SolveOutcome] = (),
                     max_computes: int | None = None,
                     deadline: Deadline | None = None) -> tuple[list[StageCompute], str, float] | None:
    """The cheapest stage-form schedule that fits ``budget``: ``(computes, source, cost)``, or None.

    Tries :func:`greedy_stage_schedule` and the schedule of every attempt
    (:func:`~remat_core.solvers.quick.run_quick_heuristics`) that converts (:func:`~.grid.computes_from_ops`),
    fits after the conversion, and computes no node more than ``max_computes`` times. The eviction
    solvers run in the grid's topological order, so their schedules always convert; the others'
    do when their first computations happen to follow it. ``source`` names the winner ("greedy" or
    the solver's name). The greedy's refinements stop at ``deadline``.
    """
    candidates: list[tuple[list[StageCompute], str]] = []
    greedy = greedy_stage_schedule(grid, budget, max_computes=max_computes, deadline=deadline)
    if greedy is not None:
        candidates.append((greedy, "greedy"))
    for attempt in attempts:
        if attempt.schedule is None:
            continue
        computes = computes_from_ops(grid, attempt.schedule.ops)
        if computes is not None:
            candidates.append((computes, attempt.solver))
    best = None
    for computes, source in candidates:
        if max_computes is not None and max(_computes_per_node(computes).values()) > max_computes:
            continue
        peak, cost = measure(grid, computes)
        if peak <= budget and (best is None or cost < best[2]):
            best = (computes, source, cost)
    return best


def _computes_per_node(computes: list[StageCompute]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for _, p in computes:
        counts[p] = counts.get(p, 0) + 1
    return counts


def greedy_stage_schedule(grid: StageGrid, budget: int, refinements: int = 6, max_computes: int | None = None,
                          deadline: Deadline | None = None) -> list[StageCompute] | None:
    """Stage computes whose converted schedule fits ``budget`` (bytes, pinned included), or None.

    ``max_computes`` caps the computations of each node (a node computed that often is never
    evicted again), so the result fits Moccasin's ``C`` intervals.

    The greedy tracks memory without the early frees the final conversion makes (a tensor it will
    evict later was really freed after its last read), so its schedules peak below the budget it
    is given. A bisection over that internal budget, between ``budget`` and the checkpoint-all
    need, keeps the cheapest schedule whose measured peak fits; it stops early at ``deadline``.

    Notes
    -----
    Each greedy pass is O(n) stages with an O(n + |E|) estimate per eviction; ``refinements``
    passes follow the first.
    """
    best = _greedy_pass(grid, grid.free_budget(budget), max_computes)
    if best is None:
        return None
    best_cost = measure(grid, best)[1]
    low, high = grid.free_budget(budget), int(grid.mem.sum())
    for _ in range(refinements):
        if high - low <= 1 or (deadline is not None and deadline.expired()):
            break
        middle = (low + high) // 2
        computes = _greedy_pass(grid, middle, max_computes)
        peak, cost = measure(grid, computes) if computes is not None else (None, math.inf)
        if peak is not None and peak <= budget:
            low = middle
            if cost < best_cost:
                best, best_cost = computes, cost
        else:
            high = middle
    return best


def _greedy_pass(grid: StageGrid, free: int, max_computes: int | None) -> list[StageCompute] | None:
    """One greedy pass with ``free`` bytes of tracked memory for computed tensors (None: gave up)."""
    n = grid.n
    mem, useful = grid.mem, grid.last_useful_stage
    resident = [False] * n
    times = [0] * n
    cap = max_computes if max_computes is not None else n + 1
    used = 0
    computes: list[StageCompute] = []
    for t in range(n):
        plan = _missing_closure(grid, t, resident)
        for step, p in enumerate(plan):
            still_read = {q for later in plan[step:] for q in grid.preds[later]}
            while used + mem[p] > free:
                victims = [q for q in range(t + 1) if resident[q] and q not in still_read and times[q] < cap]
                if not victims:
                    return None
                estimate = _recompute_estimates(grid, resident, t)
                victim = min(victims, key=lambda q: (estimate[q] / max(int(mem[q]), 1), -int(mem[q]), q))
                resident[victim] = False
                used -= mem[victim]
            resident[p] = True
            used += mem[p]
            times[p] += 1
            computes.append((t, p))
        for q in range(n):
            if resident[q] and useful[q] <= t:
                resident[q] = False
                used -= mem[q]
    return computes


def _missing_closure(grid: StageGrid, t: int, resident: list[bool]) -> list[int]:
    """``t`` and every ancestor it needs that is not resident, in the fixed order."""
    plan = {t}
    stack = [t]
    while stack:
        p = stack.pop()
        for q in grid.preds[p]:
            if not resident[q] and q not in plan:
                plan.add(q)
                stack.append(q)
    return sorted(plan)


def _recompute_estimates(grid: StageGrid, resident: list[bool], t: int) -> list[float]:
    """What recomputing each position up to ``t`` would cost now: its own cost plus the estimates of
    its inputs that are not resident (shared ancestors are counted once per path, an overestimate)."""
    estimate = [0.0] * (t + 1)
    for p in range(t + 1):
        estimate[p] = float(grid.cost[p]) + sum(estimate[q] for q in grid.preds[p] if not resident[q])
    return estimate
