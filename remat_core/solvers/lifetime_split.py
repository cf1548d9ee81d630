"""``lifetime-split``: start from checkpoint-all and recompute what the over-budget steps can best do without.

The greedy of :mod:`remat_core.solvers._lifetimes`: over the memory profile of checkpoint-all (in
the graph's topological order and in a memory-aware one), split the lifetimes whose absence over
the over-budget steps removes the most memory per unit of recompute cost, until the profile fits;
then undo every recomputation that is no longer needed. Offline and global, unlike DTR's online
eviction: it recomputes a tensor where its inputs are still at hand, or keeps an input alive a
little longer, instead of evicting and later recomputing long chains.
"""

from __future__ import annotations

from typing import Any

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import Reason, Schedule, needed_topological_order, ops_from_computes, reason
from ._lifetimes import Timeline, memory_aware_order, split_lifetimes
from ._time import Deadline
from .base import Option, register

ORDERS = ("graph", "memory", "both")

_RULE = "lifetime-split"


def lifetime_split_timelines(graph: ComputeGraph, budget: int, order: str, deadline: Deadline) -> list[tuple[str, Timeline]]:
    """``(order name, timeline)`` for each starting order: within the budget, or the lowest peak reached."""
    nodes = needed_topological_order(graph)
    starts = {"graph": lambda: nodes, "memory": lambda: memory_aware_order(graph, nodes)}
    names = ("graph", "memory") if order == "both" else (order,)
    return [(name, split_lifetimes(graph, budget, starts[name](), deadline)) for name in names]


def timeline_schedule(timeline: Timeline, solver_info: dict[str, Any], rule: str = _RULE) -> Schedule:
    """A timeline's ops (each tensor freed after its last reader), with a reason for every computation."""
    graph = timeline.graph
    seen: set[int] = set()
    reasons: list[Reason] = []
    for v in timeline.sequence:
        if v in seen:
            reasons.append(reason(f"recomputed: keeping {graph.ids[v]} from its previous reader to this one would hold "
                                  f"{graph.mem[v]:,} bytes through steps that were over the budget", rule=rule))
        else:
            reasons.append(reason("first computation", rule=rule))
            seen.add(v)
    ops, op_reasons = ops_from_computes(graph, timeline.sequence, reasons, free_rule=f"{rule}-free")
    return Schedule.from_ops(ops, op_reasons, solver_info=solver_info)


@register("lifetime-split", "Greedy lifetime splitting from checkpoint-all (graph and memory-aware orders): recompute the "
                            "tensors whose absence over the over-budget steps frees most memory per unit of cost.",
          exact=False,
          options=(Option("order", str, "both", "starting order: 'graph' (the graph's topological order), 'memory' "
                                                "(always the ready node that adds least memory) or 'both' (the "
                                                "cheaper result)", choices=ORDERS),))
def lifetime_split(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, order: str = "both") -> Schedule:
    """The cheapest schedule greedy lifetime splitting finds from the chosen starting order(s).

    Raises
    ------
    InfeasibleBudget
        When no split lowers the memory above the budget any further (or the time limit passes
        first), with the lowest peak reached as the smallest known feasible budget.
    """
    deadline = Deadline(time_limit)
    results = lifetime_split_timelines(graph, budget, order, deadline)
    fitting = [(name, t) for name, t in results if t.peak <= budget]
    if not fitting:
        lowest = min(t.peak for _, t in results)
        why = ("stopped at the time limit" if deadline.expired() else
               "no lifetime split lowers the memory above the budget any further")
        raise InfeasibleBudget(budget, lowest, _RULE, f"{why}; lowest peak reached {lowest:,} bytes")
    name, best = min(fitting, key=lambda item: item[1].cost)
    info = {"order": name, "recomputations": len(best.sequence) - len(set(best.sequence)),
            "costs": {n: t.cost for n, t in fitting}}
    return timeline_schedule(best, info)
