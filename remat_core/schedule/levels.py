"""A module-level schedule read at the op level: what each group op stands for, op by op.

A module-level graph (:func:`remat_core.frontends.coarsen_by_module`) keeps the op-level graph it was
coarsened from and each node's members (``graph.attachments``). Whatever runs a schedule on real
tensors, or reads it per forward tensor, reads it at that level: ``compute G`` computes G's members in
order (temporaries freed after their last reader inside G), ``free G`` frees the members still held.
"""

from __future__ import annotations

from ..graph import ComputeGraph
from .schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, Op


def to_op_level(graph: ComputeGraph, ops: tuple[Op, ...]
                 ) -> tuple[ComputeGraph, tuple[Op, ...], tuple[int, ...]]:
    """A module-level schedule as ops of the op-level graph it was coarsened from, with, for each op
    of the schedule, how many op-level ops have been emitted once it is done."""
    groups = graph.attachments.groups
    if groups is None:
        return graph, tuple(ops), tuple(range(1, len(ops) + 1))
    op_graph: ComputeGraph = graph.attachments.op_graph
    topo_position = {i: p for p, i in enumerate(op_graph.topo_idx)}
    outputs = set(op_graph.outputs)
    expanded: list[Op] = []
    ends: list[int] = []
    held: dict[str, list[str]] = {}
    offloaded: dict[str, list[str]] = {}
    for action, group in ops:
        members = groups[group]
        if action == FREE:
            expanded.extend((FREE, m) for m in held.pop(group))
        elif action == OFFLOAD:
            offloaded[group] = list(held[group])
            expanded.extend((OFFLOAD, m) for m in held[group])
        elif action == PREFETCH:
            held[group] = offloaded[group]
            expanded.extend((PREFETCH, m) for m in held[group])
        else:
            member_set = set(members)
            order = sorted((op_graph.index[m] for m in members), key=topo_position.__getitem__)
            leaving = [m for m in members if m in outputs or any(s not in member_set for s in op_graph.succs(m))]
            expanded.extend(_group_ops(op_graph, order, set(leaving)))
            held[group] = leaving
        ends.append(len(expanded))
    return op_graph, tuple(expanded), tuple(ends)


def _group_ops(op_graph: ComputeGraph, order: list[int], leaving: set[str]) -> list[Op]:
    """Compute a group's members in order; free each temporary after its last reader in the group."""
    ids = op_graph.ids
    position = {i: p for p, i in enumerate(order)}
    last_reader: dict[int, int] = {}
    for i in order:
        for j in op_graph.pred_idx[i]:
            if j in position:
                last_reader[j] = i
    ops: list[Op] = []
    for i in order:
        ops.append((COMPUTE, ids[i]))
        ops.extend((FREE, ids[j]) for j in op_graph.pred_idx[i]
                   if last_reader.get(j) == i and ids[j] not in leaving)
        if i not in last_reader and ids[i] not in leaving:
            ops.append((FREE, ids[i]))
    return ops
