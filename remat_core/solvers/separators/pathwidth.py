"""``pathwidth`` and ``pathwidth-linear``: rematerialization over a path decomposition.

``pathwidth`` is the treewidth recursion over a path decomposition's separator tree (the middle
bag first, the two halves below). ``pathwidth-linear`` cuts the path into about sqrt(n / (k + 1))
segments at cut bags, keeps the cut bags' vertices resident, and recomputes inside one segment at
a time: Chen et al.'s sqrt(n) checkpointing generalised from chains to any graph with a narrow path
decomposition. Each vertex is computed at most ``2(k + 1) + 1`` times (O(1) in n for a bounded
width k; at most 3 on training chains, measured) and the peak is about ``mem(cut bags) + largest
segment`` (see ``docs/algorithms.md``).
"""

from __future__ import annotations

import math

from ...decompose import PATH_METHODS, Decomposition, path_decomposition
from ...errors import InfeasibleBudget
from ...graph import ComputeGraph
from ...schedule import Schedule, checkpoint_all_peak
from ..deadline import Deadline
from ..quick import separator_fallback
from ..registry import Option, SolverTags, register
from .recursion import (DEFAULT_MAX_COMPUTES, decomposition_hierarchy, plan_over_hierarchy, schedule_from_plan,
                        segment_hierarchy, solve_over_hierarchy)
from .treewidth import BUDGET_AWARE, FALLBACK, MAX_COMPUTES, REFERENCE, decomposition_info

METHOD = Option("method", str, "best", "path decomposition method", choices=PATH_METHODS)


@register("pathwidth", "PW-Remat: the separator recursion over a path decomposition (middle bag first).",
          tags=SolverTags(quick=True, traceable_recursion=True, budget_monotone=True,
                         portfolio_options={"fallback": False}),
          reference=REFERENCE, options=(BUDGET_AWARE, METHOD, MAX_COMPUTES, FALLBACK))
def pathwidth(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, budget_aware: bool = True,
              method: str = "best", max_recursion_computes: int = DEFAULT_MAX_COMPUTES,
              fallback: bool = True) -> Schedule:
    """PW-Remat within ``budget`` bytes (options as for ``treewidth``, ``method`` picks the path search).

    Raises
    ------
    InfeasibleBudget
        Pure: the recursion's peak is over the budget. Budget-aware: no schedule over the
        decomposition fits, nor (with ``fallback``) any quick heuristic's.
    """
    deadline = Deadline(time_limit)
    decomposition = path_decomposition(graph, method)
    _, hierarchy = decomposition_hierarchy(graph, decomposition, "pathwidth")
    info = decomposition_info(decomposition, "method", method)
    return separator_fallback(graph, budget, "pathwidth", lambda: solve_over_hierarchy(
        graph, budget, hierarchy, solver="pathwidth", budget_aware=budget_aware, max_computes=max_recursion_computes,
        info=info, deadline=deadline), enabled=budget_aware and fallback, info=info, deadline=deadline)


@register("pathwidth-linear", "Cut a path decomposition into ~sqrt(n) segments, keep the cut bags, recompute one "
                              "segment at a time (each node at most 2(width+1)+1 times: O(1) in n for a bounded "
                              "width).",
          tags=SolverTags(quick=True, budget_monotone=True, portfolio_options={"fallback": False}),
          reference=REFERENCE + "; T. Chen et al., \"Training Deep Nets with Sublinear Memory Cost\", 2016",
          options=(BUDGET_AWARE, METHOD,
                   Option("segments", int, 0, "number of segments (0: sqrt(n / (width + 1)), or, budget-aware, "
                                              "the cheapest that fits)", low=0),
                   FALLBACK))
def pathwidth_linear(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, budget_aware: bool = True,
                     method: str = "best", segments: int = 0, fallback: bool = True) -> Schedule:
    """The segment scheme within ``budget`` bytes.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
    time_limit : float, optional
        Once it passes, no further segment count or candidate plan is tried.
    budget_aware : bool
        Pure: one run with ``segments`` (or the sqrt rule). Budget-aware: with ``segments=0``, try
        a range of segment counts and keep the cheapest schedule that fits (after the post-passes).
    method : str
        Path decomposition method.
    segments : int
    fallback : bool
        As for ``treewidth``.

    Raises
    ------
    InfeasibleBudget
        When no segment count gives a schedule within the budget, nor (budget-aware, with
        ``fallback``) any quick heuristic.
    """
    deadline = Deadline(time_limit)
    decomposition = path_decomposition(graph, method)
    info = decomposition_info(decomposition, "method", method)
    return separator_fallback(graph, budget, "pathwidth-linear", lambda: _segment_schedule(
        graph, budget, decomposition, budget_aware, segments, info, deadline), enabled=budget_aware and fallback,
        info=info, deadline=deadline)


def _segment_schedule(graph: ComputeGraph, budget: int, decomposition: Decomposition, budget_aware: bool,
                      segments: int, info: dict, deadline: Deadline) -> Schedule:
    """The cheapest segment-scheme schedule that fits over the segment counts tried (InfeasibleBudget: none)."""
    vertices = sum(1 for p in graph.pinned if not p)
    rule = max(1, round(math.sqrt(vertices / (decomposition.width + 1))))
    if segments or not budget_aware or budget >= checkpoint_all_peak(graph):
        counts = [segments or rule]
    else:
        counts = _segment_counts(len(decomposition), rule)
    best = None
    smallest: int | None = None
    failures: list[str] = []
    for count in counts:
        if deadline.expired() and (best is not None or failures):
            failures.append(f"{count} segments: skipped at the time limit")
            continue
        hierarchy, cuts = segment_hierarchy(graph, decomposition, count)
        try:
            plan = plan_over_hierarchy(graph, budget, hierarchy, solver="pathwidth-linear", budget_aware=budget_aware,
                                       max_computes=DEFAULT_MAX_COMPUTES, other_sources=count == counts[-1],
                                       deadline=deadline)
        except InfeasibleBudget as e:
            failures.append(f"{count} segments: {e.detail}")
            if e.smallest_feasible is not None:
                smallest = e.smallest_feasible if smallest is None else min(smallest, e.smallest_feasible)
            continue
        if best is None or plan.cost < best[0].cost:
            best = (plan, hierarchy, cuts)
    if best is None:
        raise InfeasibleBudget(budget, smallest, "pathwidth-linear", "; ".join(failures))
    plan, hierarchy, cuts = best
    return schedule_from_plan(graph, hierarchy, plan, {**info, "segments": len(cuts) + 1, "cut_bags": cuts})


def _segment_counts(bags: int, rule: int) -> list[int]:
    """Segment counts a budget-aware run compares: 1, and the sqrt rule times 1/8 .. 4 (at most bags / 2).

    The sqrt rule comes last: its run also schedules the pure recursion and checkpoint-all as
    further sources (once for all counts).
    """
    counts = {1}
    for scale in (0.125, 0.25, 0.5, 2.0, 4.0):
        count = int(round(rule * scale))
        if 2 <= count <= max(2, bags // 2):
            counts.add(count)
    counts.discard(rule)
    return sorted(counts) + [rule]
