"""A hand-written schedule with a recomputation, for tests that need one whatever solvers exist.

On the training graph of a 3-layer chain it frees ``f1`` right after ``f2`` is computed and
recomputes it for the gradient ``b2``. The schedule is simulated (never trusted): tests get it with
its ``stats`` and ``simulation`` attached exactly as :func:`remat_core.solve` would attach them.
"""

from __future__ import annotations

from remat_core import Schedule, simulate
from remat_core.schedule import COMPUTE, FREE
from remat_core.graph.generators import training_chain
from remat_core.schedule.schedule import reason
from remat_core.schedule import schedule_stats

RECOMPUTE_OPS = (
    ("compute", "f1"), ("compute", "f2"), ("free", "f1"), ("compute", "f3"), ("compute", "loss"), ("free", "f3"),
    ("compute", "b3"), ("free", "loss"), ("free", "f2"), ("compute", "f1"), ("compute", "b2"), ("free", "b3"),
    ("free", "f1"), ("compute", "b1"), ("free", "b2"), ("free", "b1"),
)


def chain3():
    return training_chain(3, mem=10, name="chain-3")


def simulated(graph, ops, reasons=None, budget=None, solver="hand-written") -> Schedule:
    """``ops`` as a schedule with the simulator's stats and result attached."""
    schedule = Schedule.from_ops(ops, reasons, graph=graph.name, solver=solver, budget=budget)
    result = simulate(graph, schedule, budget=budget)
    return schedule.with_updates(stats=schedule_stats(graph, result), simulation=result)


def recompute_schedule(graph=None) -> Schedule:
    """f1 evicted at step 2 (reason rule ``evict``, bag ``{f1, f2}``) and recomputed at step 9 for b2."""
    graph = graph or chain3()
    reasons = [None] * len(RECOMPUTE_OPS)
    reasons[2] = reason("evicted to make room", rule="evict", bag=["f1", "f2"])
    reasons[9] = reason("recomputed for b2", rule="recompute", consumer="b2")
    return simulated(graph, RECOMPUTE_OPS, reasons, budget=40)


def recompute_on_demand(graph):
    """Minimal-memory schedule: after each node in topological order free everything, recomputing on demand.

    Every node but the first few is recomputed, many times: the hardest test of recomputation.
    """
    resident = {n.id for n in graph.nodes if n.pinned}
    ops = []

    def materialize(node):
        if node in resident:
            return
        for pred in graph.preds(node):
            materialize(pred)
        ops.append((COMPUTE, node))
        resident.add(node)

    for index in graph.topo_idx:
        if index not in graph.needed_idx:
            continue
        materialize(graph.ids[index])
        for node in sorted(resident - {n.id for n in graph.nodes if n.pinned}):
            ops.append((FREE, node))
            resident.discard(node)
    return ops
