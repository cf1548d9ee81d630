"""The true optimum of tiny rematerialization problems, by exhaustive search (for tests only).

Dijkstra over states (resident set, outputs computed so far): ``compute v`` costs ``cost(v)`` and
is allowed when v's predecessors are resident and memory stays within the budget; ``free v`` costs
nothing. Any evaluation order is allowed, so this is the optimum over every valid schedule.
Exponential: keep graphs to about a dozen nodes.
"""

from __future__ import annotations

import heapq
import math

from remat_core import ComputeGraph


def optimal_cost(graph: ComputeGraph, budget: int) -> float:
    """Least total cost of any valid schedule with peak <= budget (``math.inf`` if none fits)."""
    needed = sorted(graph.needed_idx)
    if len(needed) > 16:
        raise ValueError(f"brute force is for tiny graphs; this one needs {len(needed)} nodes computed")
    bit = {v: 1 << k for k, v in enumerate(needed)}
    pred_mask = [sum(bit[u] for u in graph.pred_idx[v] if not graph.pinned[u]) for v in needed]
    mem = [graph.mem[v] for v in needed]
    cost = [graph.cost[v] for v in needed]
    out_bit = {v: 1 << k for k, v in enumerate(graph.output_idx)}
    is_output = [out_bit.get(v, 0) for v in needed]
    goal = (1 << len(graph.output_idx)) - 1
    base = graph.pinned_bytes
    if base > budget:
        return math.inf
    best: dict[tuple[int, int], float] = {(0, 0): 0.0}
    queue = [(0.0, 0, 0, base)]
    while queue:
        total, resident, done, memory = heapq.heappop(queue)
        if done == goal:
            return total
        if best.get((resident, done), math.inf) < total:
            continue
        for k in range(len(needed)):
            b = 1 << k
            if resident & b:
                step = (total, resident & ~b, done, memory - mem[k])
            elif resident & pred_mask[k] == pred_mask[k] and memory + mem[k] <= budget:
                step = (total + cost[k], resident | b, done | is_output[k], memory + mem[k])
            else:
                continue
            key = (step[1], step[2])
            if step[0] < best.get(key, math.inf):
                best[key] = step[0]
                heapq.heappush(queue, step)
    return math.inf
