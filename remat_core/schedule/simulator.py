"""The one simulator: the only judge of every schedule, whoever made it.

Memory model
------------
- Start: the resident set is the pinned nodes; memory is their total ``mem``; peak is that.
- ``compute v``: v is not pinned, not resident, and every predecessor of v is resident. Memory
  grows by ``mem(v)``; while v's op runs its kernel also holds ``transient(v)`` bytes (workspace,
  temporaries) and, for an output of a multi-output op, the op's other outputs that are not resident
  (one call allocates them all; those the schedule does not keep are dropped when it returns), so
  the peak is updated with all of that; ``cost(v)`` is added to the total cost. An output computed
  right after a sibling of the same call (the op before it computed one) comes from that call:
  nothing runs again, and nothing more is held.
- ``free v``: v is resident and not pinned. Memory shrinks by ``mem(v)``.
- At the end every output has been computed at least once (it may have been freed since).

Any violation raises :class:`~remat_core.errors.InvalidSchedule` naming the step, the op and the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from ..errors import InvalidSchedule
from ..graph import ComputeGraph
from .ops import free_after_last_use, needed_topological_order
from .schedule import COMPUTE, FREE, Op, Schedule


class Lifetime(NamedTuple):
    """One stay of a tensor in memory: computed at step ``start``, freed at ``end`` (None: never)."""

    node: str
    start: int
    end: int | None
    occurrence: int  # 1 for the first computation, 2 for the first recomputation, ...


@dataclass(frozen=True)
class SimulationResult:
    """What the simulator measured.

    Attributes
    ----------
    peak : int
        The largest memory reached, in bytes (at least the pinned bytes), an op's transient bytes
        included while it runs.
    peak_step : int
        The op at which the peak was first reached (-1: before any op, only pinned memory).
    cost : float
        Sum of ``cost`` over every compute op (recomputations included).
    start_memory : int
        Pinned bytes: memory before the first op.
    memory : tuple of int
        Memory after each op: the timeline the app animates.
    transient : tuple of int
        Bytes each op's kernel held beyond its memory after it while it ran (its workspace and the
        op's other outputs the schedule does not hold; 0 for frees and ops without any): the memory
        *during* op ``i`` is ``memory[i] + transient[i]``. Empty when no op held any.
    compute_counts : mapping of str to int
        How many times each computed node was computed.
    ops : tuple of (str, str)
        The ops simulated.
    """

    peak: int
    peak_step: int
    cost: float
    start_memory: int
    memory: tuple[int, ...]
    compute_counts: Mapping[str, int]
    ops: tuple[Op, ...]
    transient: tuple[int, ...] = ()

    @property
    def computes(self) -> int:
        """Number of compute ops."""
        return sum(self.compute_counts.values())

    @property
    def recomputes(self) -> int:
        """Compute ops beyond the first computation of each node."""
        return self.computes - len(self.compute_counts)

    @property
    def recomputed_nodes(self) -> tuple[str, ...]:
        """Nodes computed more than once."""
        return tuple(n for n, c in self.compute_counts.items() if c > 1)

    def summary(self) -> dict[str, Any]:
        """The figures the CLI and the app report."""
        return {"valid": True, "peak": self.peak, "cost": self.cost, "computes": self.computes,
                "recomputes": self.recomputes}

    @cached_property
    def lifetimes(self) -> tuple[Lifetime, ...]:
        """Every stay of every tensor in memory, in order of computation."""
        open_at: dict[str, int] = {}
        seen: dict[str, int] = {}
        done: list[Lifetime] = []
        for step, (action, node) in enumerate(self.ops):
            if action == COMPUTE:
                open_at[node] = step
                seen[node] = seen.get(node, 0) + 1
            else:
                done.append(Lifetime(node, open_at.pop(node), step, seen[node]))
        done.extend(Lifetime(n, s, None, seen[n]) for n, s in open_at.items())
        done.sort(key=lambda life: life.start)
        return tuple(done)

    def resident_after(self, graph: ComputeGraph, step: int) -> list[str]:
        """Ids resident right after op ``step`` (pinned nodes included); step -1 is the start."""
        resident = {n.id for n in graph.nodes if n.pinned}
        for action, node in self.ops[: step + 1]:
            if action == COMPUTE:
                resident.add(node)
            else:
                resident.discard(node)
        return [i for i in graph.ids if i in resident]


def simulate(graph: ComputeGraph, schedule: Schedule | Iterable[Op], budget: int | None = None) -> SimulationResult:
    """Run a schedule against the memory model and measure it.

    Parameters
    ----------
    graph : ComputeGraph
    schedule : Schedule or iterable of (action, node id)
    budget : int, optional
        When given, memory above it is also a violation (reported at the step it happens).

    Returns
    -------
    SimulationResult

    Raises
    ------
    InvalidSchedule
        At the first op that breaks a rule, or at the end if an output was never computed.
    """
    ops = schedule.ops if isinstance(schedule, Schedule) else tuple((str(a), str(n)) for a, n in schedule)
    index = graph.index
    indexed = []
    for step, (action, node) in enumerate(ops):
        i = index.get(node)
        if i is None:
            raise InvalidSchedule(step, (action, node), f"unknown node {node!r}: the graph has no node with that id")
        indexed.append((action, i))
    peak, peak_step, cost, timeline, counts, held = _simulate_core(graph, indexed, budget)
    ids = graph.ids
    compute_counts = {ids[i]: c for i, c in enumerate(counts) if c}
    return SimulationResult(peak=peak, peak_step=peak_step, cost=cost, start_memory=graph.pinned_bytes,
                            memory=tuple(timeline), compute_counts=compute_counts, ops=ops,
                            transient=tuple(held) if any(held) else ())


def measure_indexed(graph: ComputeGraph, ops: Sequence[tuple[str, int]], budget: int | None = None) -> tuple[int, float]:
    """``(peak, cost)`` of ops on node indices (a solver's working form), by the same rules as :func:`simulate`.

    Raises
    ------
    InvalidSchedule
        As :func:`simulate` does (the op is reported with the node's id).
    """
    peak, _, cost, _, _, _ = _simulate_core(graph, ops, budget)
    return peak, cost


def _simulate_core(graph: ComputeGraph, ops: Sequence[tuple[str, int]],
                   budget: int | None) -> tuple[int, int, float, list[int], list[int], list[int]]:
    """The one simulator's loop over index ops: peak, its step, cost, memory after each op, computes per node,
    and what each op's kernel held beyond the memory after it."""
    mem = graph.mem
    transient = graph.transient
    siblings = graph.siblings
    cost = graph.cost
    pinned = graph.pinned
    preds = graph.pred_idx
    ids = graph.ids
    resident = bytearray(1 if p else 0 for p in pinned)
    counts = [0] * len(graph)
    memory = graph.pinned_bytes
    peak, peak_step = memory, -1
    total_cost = 0.0
    timeline = [0] * len(ops)
    held = [0] * len(ops)
    previous = -1  # the node the op before computed (-1 after a free)
    for step, (action, i) in enumerate(ops):
        if action == COMPUTE:
            if pinned[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is pinned: pinned nodes are always resident "
                                                              f"and never computed")
            if resident[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is already resident; free it before "
                                                              f"computing it again")
            missing = [j for j in preds[i] if not resident[j]]
            if missing:
                names = ", ".join(f"'{ids[j]}'" for j in missing[:5]) + (" ..." if len(missing) > 5 else "")
                raise InvalidSchedule(step, (action, ids[i]), f"predecessor(s) of '{ids[i]}' not resident: {names}; "
                                                              f"compute them first")
            resident[i] = 1
            memory += mem[i]
            total_cost += cost[i]
            counts[i] += 1
            if previous >= 0 and previous in siblings[i]:  # taken from the call that computed its sibling
                extra = 0
            else:
                extra = transient[i] + sum(mem[j] for j in siblings[i] if not resident[j])
            held[step] = extra
            during = memory + extra
            previous = i
            if during > peak:
                peak, peak_step = during, step
            if budget is not None and during > budget:
                inside = f" ({extra:,} of them held by the kernel while it runs)" if extra else ""
                raise InvalidSchedule(step, (action, ids[i]), f"memory {during:,} bytes{inside} exceeds the budget "
                                                              f"of {budget:,} bytes")
        elif action == FREE:
            if pinned[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is pinned: pinned nodes are never freed")
            if not resident[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is not resident, so it cannot be freed")
            resident[i] = 0
            memory -= mem[i]
            previous = -1
        else:
            raise InvalidSchedule(step, (action, ids[i]), f"unknown action {action!r}; expected \"{COMPUTE}\" or "
                                                          f"\"{FREE}\"")
        timeline[step] = memory
    never = [ids[o] for o in graph.output_idx if counts[o] == 0]
    if never:
        names = ", ".join(f"'{n}'" for n in never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
        raise InvalidSchedule(len(ops), None, f"output(s) never computed: {names}")
    return peak, peak_step, total_cost, timeline, counts, held


def checkpoint_all_ops(graph: ComputeGraph, explain: bool = True):
    """The checkpoint-all schedule: the graph's topological order, each tensor freed after its last use."""
    return free_after_last_use(graph, needed_topological_order(graph), explain=explain)


def checkpoint_all_peak(graph: ComputeGraph) -> int:
    """Peak memory of the checkpoint-all schedule (no recomputation), in bytes."""
    return graph.memo("checkpoint_all_peak",
                      lambda: simulate(graph, checkpoint_all_ops(graph, explain=False)[0]).peak)


def checkpoint_all_cost(graph: ComputeGraph) -> float:
    """Cost of computing every needed node exactly once: the baseline for cost overheads."""
    return graph.memo("checkpoint_all_cost", lambda: sum(graph.cost[i] for i in graph.needed_idx))


def memory_lower_bound(graph: ComputeGraph) -> int:
    """A lower bound on the peak of any valid schedule, in bytes.

    Computing a node needs the pinned nodes, the node itself, its kernel's transient bytes and its
    non-pinned predecessors all resident at once (and a multi-output op's first call all its
    outputs); the bound is the largest such sum over every node that must be computed (the outputs
    and their ancestors).
    """
    def compute() -> int:
        pinned, mem, transient, siblings = graph.pinned, graph.mem, graph.transient, graph.siblings
        best = 0
        for i in graph.needed_idx:
            best = max(best, mem[i] + transient[i] + sum(mem[j] for j in siblings[i])
                       + sum(mem[j] for j in graph.pred_idx[i] if not pinned[j]))
        return graph.pinned_bytes + best
    return graph.memo("memory_lower_bound", compute)


def schedule_stats(graph: ComputeGraph, result: SimulationResult) -> dict[str, Any]:
    """The stats :func:`remat_core.solve` attaches: measured figures plus the checkpoint-all baseline."""
    base_cost = checkpoint_all_cost(graph)
    return {"peak": result.peak, "cost": result.cost, "computes": result.computes,
            "recomputes": result.recomputes, "recomputed_nodes": len(result.recomputed_nodes),
            "checkpoint_all_peak": checkpoint_all_peak(graph), "checkpoint_all_cost": base_cost,
            "overhead": (result.cost / base_cost - 1.0) if base_cost > 0 else 0.0}

