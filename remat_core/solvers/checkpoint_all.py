"""``checkpoint-all``: keep everything, recompute nothing.

The graph's topological order, each tensor freed right after its last reader. It is the cost
baseline every other solver is compared with, and its peak is what a plain training step uses.
"""

from __future__ import annotations

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import Schedule, checkpoint_all_ops, checkpoint_all_peak
from .base import register


@register("checkpoint-all", "Topological order, free after last use, no recomputation (the baseline).", exact=False)
def checkpoint_all(graph: ComputeGraph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """The checkpoint-all schedule, or :class:`InfeasibleBudget` when its peak exceeds ``budget``."""
    del time_limit  # nothing to search
    peak = checkpoint_all_peak(graph)
    if peak > budget:
        raise InfeasibleBudget(budget, peak, "checkpoint-all", "checkpoint-all never recomputes")
    ops, reasons = checkpoint_all_ops(graph)
    return Schedule.from_ops(ops, reasons)
