"""Exhaustive search on tiny graphs: the optimum over every valid schedule, and the smallest peak of any.

A state is the set of resident tensors and the set of outputs computed so far; ``compute v`` (its
inputs resident, memory within the budget) costs ``cost(v)``, ``free v`` costs nothing. Dijkstra
over these states finds the cheapest schedule (any order, any recomputation) or proves that none
fits; the same search on the largest memory along the way finds the smallest peak. Exponential in
the number of nodes: refused (None) beyond :data:`MAX_NODES` nodes to compute, :data:`MAX_STATES`
states, or the deadline.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from ...graph import ComputeGraph
from ...schedule import COMPUTE, FREE, Op
from ..deadline import Deadline

MAX_NODES = 14
"""Largest number of nodes to compute the search takes on."""
MAX_STATES = 60_000
"""States the search may settle before it gives up (about a second of Python)."""


@dataclass(frozen=True)
class Exhaustive:
    """A finished search: ``ops`` is None when no schedule fits (proved); ``value`` is the optimum cost or peak."""

    ops: list[Op] | None
    value: float


def cheapest_schedule(graph: ComputeGraph, budget: int, deadline: Deadline) -> Exhaustive | None:
    """The cheapest valid schedule with peak <= ``budget``, proved; None when the graph is too big or time runs out."""
    return _search(graph, budget, deadline, by_peak=False)


def smallest_peak(graph: ComputeGraph, deadline: Deadline) -> Exhaustive | None:
    """A schedule with the smallest peak any valid schedule reaches (the peak is ``value``); None as above."""
    return _search(graph, None, deadline, by_peak=True)


def _search(graph: ComputeGraph, budget: int | None, deadline: Deadline, by_peak: bool) -> Exhaustive | None:
    needed = sorted(graph.needed_idx)
    if len(needed) > MAX_NODES:
        return None
    bit = {v: 1 << k for k, v in enumerate(needed)}
    inputs = [sum(bit[p] for p in graph.pred_idx[v] if not graph.pinned[p]) for v in needed]
    mem = [graph.mem[v] for v in needed]
    cost = [graph.cost[v] for v in needed]
    outputs = {v: 1 << k for k, v in enumerate(graph.output_idx)}
    output_bit = [outputs.get(v, 0) for v in needed]
    goal = (1 << len(outputs)) - 1
    start = (0, 0)
    base = graph.pinned_bytes
    if budget is not None and base > budget:
        return Exhaustive(None, float("inf"))
    settled: dict[tuple[int, int], tuple[tuple[int, int] | None, Op | None]] = {}
    best = {start: float(base if by_peak else 0.0)}
    queue = [(best[start], 0, start, base, None, None)]
    pushed = 1
    while queue:
        value, _, state, memory, parent, op = heapq.heappop(queue)
        if state in settled:
            continue
        settled[state] = (parent, op)
        if state[1] == goal:
            return Exhaustive(_ops_to(settled, state), value)
        if len(settled) > MAX_STATES or (len(settled) % 512 == 0 and deadline.expired()):
            return None
        resident, done = state
        for k, v in enumerate(needed):
            b = 1 << k
            if resident & b:
                step = ((resident & ~b, done), memory - mem[k], value, (FREE, graph.ids[v]))
            elif resident & inputs[k] == inputs[k] and (budget is None or memory + mem[k] <= budget):
                grown = memory + mem[k]
                step = ((resident | b, done | output_bit[k]), grown,
                        max(value, grown) if by_peak else value + cost[k], (COMPUTE, graph.ids[v]))
            else:
                continue
            following, following_memory, following_value, following_op = step
            if following not in settled and following_value < best.get(following, float("inf")):
                best[following] = following_value
                pushed += 1
                heapq.heappush(queue, (following_value, pushed, following, following_memory, state, following_op))
    return Exhaustive(None, float("inf"))


def _ops_to(settled: dict, state: tuple[int, int]) -> list[Op]:
    ops: list[Op] = []
    parent, op = settled[state]
    while op is not None:
        ops.append(op)
        parent, op = settled[parent]
    return ops[::-1]
