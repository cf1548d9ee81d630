"""Why a tensor is offloaded: when it leaves the device and comes back, what recomputing it instead would have cost,
and how much of its copies the computation hid (a schedule timed over a host link)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import ComputeGraph, node_label
from ..schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, TRANSFERS, Schedule, SimulationResult, simulation_of


def lane_clock(result: SimulationResult) -> np.ndarray:
    """Per op, the compute lane's clock when the op is reached (before any wait): where a wait is measured from."""
    end = result.timing.end
    clock = np.zeros(len(result.ops))
    now = 0.0
    for step, (action, _) in enumerate(result.ops):
        clock[step] = now
        if action not in TRANSFERS:
            now = end[step]
    return clock


@dataclass(frozen=True)
class OffloadStory:
    """One tensor's trip to the host and back (steps are op indices; times in the graph's cost units).

    Attributes
    ----------
    tensor : str
    offloaded_at, dropped_at, back_at, read_at : int or None
        The offload, the free of the device copy, the prefetch, and the first computation reading it after.
    copy_out, copy_back : float
        How long each copy took.
    waited_out, waited_back : float
        How long the compute lane waited for them: at the free, and at the read.
    recompute_cost : float
        What recomputing it at the read would have cost: it and every ancestor not resident then.
    recompute_ops : int
        How many ops that is.
    """

    tensor: str
    offloaded_at: int
    dropped_at: int | None
    back_at: int | None
    read_at: int | None
    copy_out: float
    copy_back: float
    waited_out: float
    waited_back: float
    recompute_cost: float
    recompute_ops: int

    def sentence(self, graph: ComputeGraph) -> str:
        """The story in one paragraph."""
        name = node_label(graph, self.tensor)
        if self.back_at is None:
            return f"{name} is copied to the host at step {self.offloaded_at} and not brought back."
        hidden = (self.copy_out - self.waited_out) + (self.copy_back - self.waited_back)
        waits = self.waited_out + self.waited_back
        return (f"{name} is offloaded at step {self.offloaded_at} (dropped from the device at step {self.dropped_at}) "
                f"and back at step {self.back_at}, read at step {self.read_at}, because recomputing it there would "
                f"cost {self.recompute_cost:.4g} ({self.recompute_ops} op{'s' if self.recompute_ops != 1 else ''}: "
                f"it and the inputs no longer resident), while its copies ({self.copy_out:.4g} out, "
                f"{self.copy_back:.4g} back) hide {hidden:.4g} behind the computation"
                + (f" and make it wait {waits:.4g}." if waits > 1e-12 else " and make it wait for nothing."))


def offload_story(graph: ComputeGraph, schedule: Schedule, tensor: str) -> OffloadStory | None:
    """The first trip of ``tensor`` to the host in ``schedule`` (None when it is never offloaded, or the schedule
    was simulated without a link, so that its copies have no times)."""
    result = simulation_of(schedule)
    if result.timing is None:
        return None
    ops = result.ops
    offloaded = next((k for k, op in enumerate(ops) if op == (OFFLOAD, tensor)), None)
    if offloaded is None:
        return None

    def after(k: int | None, wanted) -> int | None:
        if k is None:
            return None
        return next((j for j in range(k + 1, len(ops)) if wanted(ops[j])), None)

    dropped = after(offloaded, lambda op: op == (FREE, tensor))
    back = after(dropped, lambda op: op == (PREFETCH, tensor))
    readers = set(graph.succs(tensor))
    read = after(back, lambda op: op[0] == COMPUTE and op[1] in readers)
    start, end = result.timing.start, result.timing.end
    clock = lane_clock(result)

    def waited(k: int | None) -> float:
        return max(0.0, start[k] - clock[k]) if k is not None else 0.0

    cost, count = _recompute_cost(graph, result, tensor, read if read is not None else len(ops))
    return OffloadStory(tensor, offloaded, dropped, back, read, end[offloaded] - start[offloaded],
                        (end[back] - start[back]) if back is not None else 0.0,
                        min(waited(dropped), end[offloaded] - start[offloaded]),
                        min(waited(read), (end[back] - start[back]) if back is not None else 0.0), cost, count)


def _recompute_cost(graph: ComputeGraph, result: SimulationResult, tensor: str, step: int) -> tuple[float, int]:
    """The cost of computing ``tensor`` again right before op ``step``, from what is resident then."""
    resident = set(result.resident_after(graph, step - 1))
    index, cost = graph.index, graph.cost
    needed, stack = set(), [tensor]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        stack.extend(p for p in graph.preds(node) if p not in resident and not graph.node(p).pinned)
    return float(sum(cost[index[n]] for n in needed)), len(needed)
