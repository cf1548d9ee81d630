"""``lifetime-split``: start from checkpoint-all and recompute what the over-budget steps can best do without.

The greedy of :mod:`remat_core.solvers.eviction.lifetimes`: over the memory profile of checkpoint-all (in
the graph's topological order and in a memory-aware one), split the lifetimes whose absence over
the over-budget steps removes the most memory per unit of recompute cost, until the profile fits;
then undo every recomputation that is no longer needed. Offline and global, unlike DTR's online
eviction: it recomputes a tensor where its inputs are still at hand, or keeps an input alive a
little longer, instead of evicting and later recomputing long chains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import InfeasibleBudget, SearchStopped
from ...graph import ComputeGraph, node_labels
from ...schedule import Reason, Schedule, needed_topological_order, ops_from_computes, reason
from ..bounds import peak_lower_bound
from ..deadline import Deadline
from ..registry import Option, SolverTags, register
from .lifetimes import Timeline, memory_aware_order, split_lifetimes, undo_needless_recomputations

ORDERS = ("graph", "memory", "both")

_RULE = "lifetime-split"


@dataclass(frozen=True)
class SplitOutcome:
    """Lifetime splitting from one starting order.

    Attributes
    ----------
    order : str
        ``graph`` or ``memory``.
    timeline : Timeline
        Within the budget when one was found; else the lowest peak reached.
    floor : int or None
        When the split aimed at the budget got stuck: the lowest peak of the descent towards the
        peak lower bound, which does not depend on the budget (so splitting from this order meets
        every budget from there up).
    """

    order: str
    timeline: Timeline
    floor: int | None = None


def lifetime_split_timelines(graph: ComputeGraph, budget: int, order: str, deadline: Deadline) -> list[SplitOutcome]:
    """Lifetime splitting from each starting order (``graph``, ``memory`` or ``both``).

    Splitting aimed at the budget can get stuck where aiming lower would not (the greedy is not
    monotone in the budget). Then the descent aimed at :func:`~remat_core.solvers.bounds.peak_lower_bound`
    runs: its path is the same whatever the budget, so its lowest peak (``floor``) is a budget
    this solver always meets, and when that is within the budget, that timeline (its needless
    recomputations undone) is the result.
    """
    nodes = needed_topological_order(graph)
    starts = {"graph": lambda: nodes, "memory": lambda: memory_aware_order(graph, nodes)}
    outcomes = []
    for name in (("memory", "graph") if order == "both" else (order,)):
        start = starts[name]()
        aimed = split_lifetimes(graph, budget, start, deadline)
        if aimed.peak <= budget:
            outcomes.append(SplitOutcome(name, aimed))
            continue
        lowest = split_lifetimes(graph, peak_lower_bound(graph), start, deadline)
        if lowest.peak <= budget:
            lowest = undo_needless_recomputations(lowest, budget, deadline)
        outcomes.append(SplitOutcome(name, lowest if lowest.peak <= budget else aimed, floor=lowest.peak))
    return outcomes


def timeline_schedule(timeline: Timeline, solver_info: dict[str, Any], rule: str = _RULE) -> Schedule:
    """A timeline's ops (each tensor freed after its last reader), with a reason for every computation."""
    graph = timeline.graph
    labels = node_labels(graph)  # reasons' texts are read by people: nodes by their labels
    seen: set[int] = set()
    reasons: list[Reason] = []
    for v in timeline.sequence:
        if v in seen:
            reasons.append(reason(f"recomputed: keeping {labels[graph.ids[v]]} from its previous reader to this one would hold "
                                  f"{graph.mem[v]:,} bytes through steps that were over the budget", rule=rule))
        else:
            reasons.append(reason("first computation", rule=rule))
            seen.add(v)
    ops, op_reasons = ops_from_computes(graph, timeline.sequence, reasons, free_rule=f"{rule}-free")
    return Schedule.from_ops(ops, op_reasons, solver_info=solver_info)


@register("lifetime-split", "Greedy lifetime splitting from checkpoint-all (graph and memory-aware orders): recompute the "
                            "tensors whose absence over the over-budget steps frees most memory per unit of cost.",
          tags=SolverTags(quick=True),
          options=(Option("order", str, "both", "starting order: 'graph' (the graph's topological order), 'memory' "
                                                "(always the ready node that adds least memory) or 'both' (the "
                                                "cheaper result)", choices=ORDERS),))
def lifetime_split(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, order: str = "both") -> Schedule:
    """The cheapest schedule greedy lifetime splitting finds from the chosen starting order(s).

    Raises
    ------
    InfeasibleBudget
        When no split lowers the memory to the budget (or the time limit passes first), with the
        lowest peak of the descent towards the lower bound as the smallest known feasible budget
        (solving at it succeeds).
    """
    deadline = Deadline(time_limit)
    outcomes = lifetime_split_timelines(graph, budget, order, deadline)
    fitting = [o for o in outcomes if o.timeline.peak <= budget]
    if not fitting:
        floor = min(o.floor for o in outcomes)
        why = ("stopped at the time limit" if deadline.expired() else
               "no lifetime split lowers the memory above the budget any further")
        raise (SearchStopped if deadline.expired() else InfeasibleBudget)(
            budget, floor, _RULE, f"{why}; splitting towards the lower bound reaches {floor:,} bytes")
    best = min(fitting, key=lambda o: o.timeline.cost)
    info = {"order": best.order, "recomputations": len(best.timeline.sequence) - len(set(best.timeline.sequence)),
            "costs": {o.order: o.timeline.cost for o in fitting}}
    return timeline_schedule(best.timeline, info)
