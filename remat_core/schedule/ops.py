"""Building blocks that solvers share to turn an evaluation order into ops.

These emit ops; they never judge them. Every schedule still goes through the simulator.
"""

from __future__ import annotations

import itertools
from typing import Mapping, Sequence

from ..graph import ComputeGraph, node_labels
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
    computes = [i for i in order if not graph.pinned[i]]
    reasons = [reason("computed once, in topological order", rule="topological-order")] * len(computes)
    return ops_from_computes(graph, computes, reasons if explain else None, drop_unread=False)


def ops_from_computes(graph: ComputeGraph, computes: Sequence[int], reasons: Sequence[Reason | None] | None = None,
                      free_rule: str = "last-use", drop_unread: bool = True,
                      before: Mapping[int, Sequence[tuple[Op, Reason | None]]] | None = None
                      ) -> tuple[list[Op], list[Reason | None] | None]:
    """Ops for a sequence of computations (recomputations allowed), freeing each tensor as early as possible.

    Each computation of a node starts an *instance* of its tensor. The instance is read by the
    computations of the node's successors up to the node's next computation, and is freed right
    after its last reader (right after its own computation when nothing reads it). Given the
    computations, these frees are the memory-optimal ones, so a solver only has to choose what to
    compute and when. A recomputation that nothing reads is useless and is dropped (which can make
    a predecessor's recomputation unread in turn); the first computation of an output is kept.

    Parameters
    ----------
    graph : ComputeGraph
    computes : sequence of int
        Node indices in execution order. Every non-pinned predecessor of a node must have been
        computed earlier in the sequence.
    reasons : sequence of dict or None, optional
        Parallel to ``computes``: why each computation happens. A reason without a ``consumer``
        gets the first reader of the instance.
    free_rule : str
        The ``rule`` of the reasons given to the frees.
    drop_unread : bool
        Drop the recomputations nothing reads (False: keep every computation given).
    before : mapping of int to list of (op, reason), optional
        Ops placed right before the computation at a position (after the frees that end the one
        before it): the transfers of an offloading plan. Those of a dropped computation go before
        the next one kept, those of a position past the end after the last op.

    Returns
    -------
    ops, reasons
        Parallel lists (reasons is None when none were given).

    Raises
    ------
    ValueError
        When a node is computed before one of its predecessors ever was (a solver bug).
    """
    placed: dict[int, list[tuple[Op, Reason | None]]] = {}
    if drop_unread:
        keep = useful_computations(graph, computes)
        if before:
            kept_at = list(itertools.accumulate(keep, initial=0))  # kept computations before each position
            for position in sorted(before):
                placed.setdefault(kept_at[min(position, len(keep))], []).extend(before[position])
        computes = [c for c, k in zip(computes, keep) if k]
        if reasons is not None:
            reasons = [r for r, k in zip(reasons, keep) if k]
    elif before:
        placed = {position: list(ops) for position, ops in before.items()}
    first_reader, last_reader, recomputed = _instance_readers(graph, computes)
    frees_after: dict[int, list[int]] = {}
    for position, last in enumerate(last_reader):
        frees_after.setdefault(position if last is None else last, []).append(position)
    ids = graph.ids
    labels = node_labels(graph) if reasons is not None else {}
    ops: list[Op] = []
    out_reasons: list[Reason | None] = []

    def place(position: int) -> None:
        for op, why in placed.get(position, ()):
            ops.append(op)
            if reasons is not None:
                out_reasons.append(why)

    for position, node in enumerate(computes):
        place(position)
        ops.append((COMPUTE, ids[node]))
        if reasons is not None:
            given = reasons[position]
            first = first_reader[position]
            if given is not None and "consumer" not in given and first is not None:
                given = {**given, "consumer": ids[computes[first]]}
            out_reasons.append(given)
        for instance in frees_after.get(position, ()):
            freed = ids[computes[instance]]
            ops.append((FREE, freed))
            if reasons is not None:
                name = labels[freed]
                until = f" until {name} is next computed" if recomputed[instance] else ""
                if instance == position:
                    text = f"nothing reads {name}{until}" if until else f"{name} has no later reader"
                    out_reasons.append(reason(text, rule=free_rule))
                else:
                    out_reasons.append(reason(f"last read by {labels[ids[node]]}{until}", rule=free_rule,
                                              consumer=ids[node]))
    for position in sorted(p for p in placed if p >= len(computes)):
        place(position)
    return ops, (out_reasons if reasons is not None else None)


def _instance_readers(graph: ComputeGraph, computes: Sequence[int]
                      ) -> tuple[list[int | None], list[int | None], list[bool]]:
    """For each computation: the positions of the first and last readers of its instance, and whether
    the node is computed again later."""
    current: dict[int, int] = {}
    first: list[int | None] = [None] * len(computes)
    last: list[int | None] = [None] * len(computes)
    again = [False] * len(computes)
    pinned, preds, ids = graph.pinned, graph.pred_idx, graph.ids
    for position, node in enumerate(computes):
        for p in preds[node]:
            if pinned[p]:
                continue
            instance = current.get(p)
            if instance is None:
                raise ValueError(f"computation #{position} of '{ids[node]}' reads '{ids[p]}', which was never "
                                 f"computed before it")
            if first[instance] is None:
                first[instance] = position
            last[instance] = position
        if node in current:
            again[current[node]] = True
        current[node] = position
    return first, last, again


def useful_computations(graph: ComputeGraph, computes: Sequence[int]) -> list[bool]:
    """Which computations to keep: those a kept computation reads, and the first computation of each output."""
    pinned, preds = graph.pinned, graph.pred_idx
    current: dict[int, int] = {}
    reads: list[list[int]] = []
    readers = [0] * len(computes)
    protected = [False] * len(computes)
    outputs = set(graph.output_idx)
    for position, node in enumerate(computes):
        instances = [current[p] for p in preds[node] if not pinned[p] and p in current]
        for instance in instances:
            readers[instance] += 1
        reads.append(instances)
        current[node] = position
        if node in outputs:
            outputs.discard(node)
            protected[position] = True
    keep = [True] * len(computes)
    unread = [p for p in range(len(computes)) if readers[p] == 0 and not protected[p]]
    while unread:
        position = unread.pop()
        keep[position] = False
        for instance in reads[position]:
            readers[instance] -= 1
            if readers[instance] == 0 and not protected[instance]:
                unread.append(instance)
    return keep
