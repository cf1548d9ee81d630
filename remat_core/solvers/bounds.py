"""Lower bounds on the peak of every valid schedule: what ``auto`` proves a budget infeasible with.

:func:`~remat_core.schedule.memory_lower_bound` counts, for each node, the node and its inputs
resident together. One step further back is still a proof: when ``v`` is computed its inputs are
resident, and one of them, ``p``, was the last to be (re)computed; while ``p`` was computed the
other inputs of ``v`` were already resident (they stay until ``v``) and so were ``p``'s own inputs.
"""

from __future__ import annotations

from ..graph import ComputeGraph
from ..schedule import memory_lower_bound


def peak_lower_bound(graph: ComputeGraph) -> int:
    """A lower bound on the peak (bytes, pinned included) of every valid schedule of ``graph``.

    The larger of :func:`~remat_core.schedule.memory_lower_bound` and, over every node ``v`` to
    compute with computed inputs ``P``, ``min over p in P of mem(P | inputs(p)) + transient(p)`` plus
    the pinned bytes (the moment the last of ``v``'s inputs is computed, its kernel's transient bytes
    held). O(sum over v of |P| x in-degree).
    """
    def compute() -> int:
        mem, pinned, transient = graph.mem, graph.pinned, graph.transient
        inputs = [[p for p in preds if not pinned[p]] for preds in graph.pred_idx]
        best = memory_lower_bound(graph)
        for v in graph.needed_idx:
            own = set(inputs[v])
            if not own:
                continue
            last = min(sum(mem[q] for q in own.union(inputs[p])) + transient[p] for p in own)
            best = max(best, graph.pinned_bytes + last)
        return best
    return graph.memo("peak_lower_bound", compute)
