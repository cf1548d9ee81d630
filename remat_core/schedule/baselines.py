"""The baselines every schedule is measured against: checkpoint-all (no recomputation) and the memory lower bound,
and the stats the front door attaches to a simulated schedule."""

from __future__ import annotations

from typing import Any

from ..graph import ComputeGraph
from .ops import free_after_last_use, needed_topological_order
from .simulator import SimulationResult, simulate


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
    """The stats :func:`remat_core.solve` attaches: measured figures plus the checkpoint-all baseline, and for a
    schedule timed over a link its transfer lane's (:meth:`Timing.summary`: makespan, stalls, host peak, bytes)."""
    base_cost = checkpoint_all_cost(graph)
    lane = result.timing.summary() if result.timing is not None else {}
    return {"peak": result.peak, "cost": result.cost, "computes": result.computes,
            "recomputes": result.recomputes, "recomputed_nodes": len(result.recomputed_nodes),
            "checkpoint_all_peak": checkpoint_all_peak(graph), "checkpoint_all_cost": base_cost,
            "overhead": (result.cost / base_cost - 1.0) if base_cost > 0 else 0.0, **lane}

