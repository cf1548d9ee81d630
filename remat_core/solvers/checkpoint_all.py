"""``checkpoint-all``: keep everything, recompute nothing.

The graph's topological order, each tensor freed right after its last reader. It is the cost
baseline every other solver is compared with, and its peak is what a plain training step uses.
"""

from __future__ import annotations

from typing import Any

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import Schedule, checkpoint_all_cost, checkpoint_all_ops, checkpoint_all_peak, reason
from .registry import SolverTags, register


@register("checkpoint-all", "Topological order, free after last use, no recomputation (the baseline).",
          tags=SolverTags(budget_monotone=True))
def checkpoint_all(graph: ComputeGraph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """The checkpoint-all schedule, or :class:`InfeasibleBudget` when its peak exceeds ``budget``."""
    del time_limit  # nothing to search
    peak = checkpoint_all_peak(graph)
    if peak > budget:
        raise InfeasibleBudget(budget, peak, "checkpoint-all", "checkpoint-all never recomputes")
    ops, reasons = checkpoint_all_ops(graph)
    return Schedule.from_ops(ops, reasons)


def checkpoint_all_if_it_fits(graph: ComputeGraph, budget: int, solver: str, **solver_info: Any) -> Schedule | None:
    """Checkpoint-all, proved optimal, when its peak fits ``budget``; None otherwise (every other solver asks first).

    Computing every needed node once is a lower bound on any schedule's cost, and checkpoint-all
    reaches it, so there is nothing to search. Its reasons name ``solver``; ``solver_info`` is kept and
    completed with the proof.
    """
    if checkpoint_all_peak(graph) > budget:
        return None
    ops, reasons = checkpoint_all_ops(graph)
    note = reason(f"the budget admits checkpoint-all: {solver} keeps every tensor and recomputes nothing",
                  rule=f"{solver}-checkpoint-all")
    reasons = [note if r is not None and r.get("rule") == "topological-order" else r for r in reasons]
    cost = checkpoint_all_cost(graph)
    return Schedule.from_ops(ops, reasons, solver_info={
        **solver_info, "strategy": "checkpoint-all", "status": "optimal", "objective": cost, "lower_bound": cost,
        "exact": True, "proof": "checkpoint-all fits: computing every needed node once is a lower bound"})
