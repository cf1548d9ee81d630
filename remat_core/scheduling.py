"""Building blocks that solvers share to turn an evaluation order into ops.

These emit ops; they never judge them. Every schedule still goes through the simulator.
"""

from __future__ import annotations

from typing import Sequence

from .graph import ComputeGraph
from .schedule import COMPUTE, FREE, Op, Reason, reason


def needed_topological_order(graph: ComputeGraph) -> list[int]:
    """The graph's topological order restricted to the nodes some output needs (as indices)."""
    needed = graph.needed_idx
    return [i for i in graph.topo_idx if i in needed]


def free_after_last_use(graph: ComputeGraph, order: Sequence[int],
                        explain: bool = True) -> tuple[list[Op], list[Reason | None] | None]:
    """Compute each node of ``order`` once and free every tensor right after its last reader.

    Parameters
    ----------
    graph : ComputeGraph
    order : sequence of int
        Node indices, a topological order of the nodes to compute (each non-pinned predecessor of
        a node must come before it). Pinned nodes are skipped.
    explain : bool
        Attach a reason to every op.

    Returns
    -------
    ops, reasons
        A schedule with no recomputation. A node nobody in ``order`` reads (a sink, an output) is
        freed right after it is computed.
    """
    position = {i: p for p, i in enumerate(order)}
    last_reader: dict[int, int] = {}
    for i in order:
        for j in graph.pred_idx[i]:
            if not graph.pinned[j]:
                last_reader[j] = i
    frees_after: dict[int, list[int]] = {}
    for j, i in last_reader.items():
        frees_after.setdefault(i, []).append(j)
    ids = graph.ids
    ops: list[Op] = []
    reasons: list[Reason | None] = []
    for i in order:
        if graph.pinned[i]:
            continue
        ops.append((COMPUTE, ids[i]))
        if explain:
            reasons.append(reason("computed once, in topological order", rule="topological-order"))
        dead = sorted(frees_after.get(i, ()), key=position.__getitem__)
        if i not in last_reader:
            dead.append(i)
        for j in dead:
            ops.append((FREE, ids[j]))
            if explain:
                if j == i:
                    reasons.append(reason(f"{ids[i]} has no later reader", rule="last-use", consumer=None))
                else:
                    reasons.append(reason(f"last read by {ids[i]}", rule="last-use", consumer=ids[i]))
    return ops, (reasons if explain else None)
