"""``rotor``: optimal checkpointing of heterogeneous chains by dynamic programming (Beaumont et al.).

Revolve assumes every step costs and weighs the same. Rotor's dynamic program takes each link's
own forward and backward cost, checkpoint size, tape size and peak, and finds the cheapest way to
run the backward groups ``t..s`` in reverse within ``m`` bytes:

    C(t, t, m) = recompute link t's tape, run group t                                     (Leaf)
    C(s, t, m) = min( link s taped + C(s+1, t, m - kept) + group s,                        (Tape)
                      min_{s <= j < t} advance s..j + C(j+1, t, m - |A_{s-1}|) + C(s, j, m) ) (Split)

each term allowed only when its peak fits ``m``, with the gradient frontier resident on entry to
group ``t`` counted in every peak (:class:`.plan_table.PlanTable`). The table is filled once per graph
for every memory level up to the checkpoint-all peak, so a budget sweep costs one table. On a
chain (one tensor per link) the figures are exact and the result is optimal over all schedules;
on other graphs the links of :mod:`.chain` are an approximation and the simulator has the last
word.

References
----------
Beaumont, Eyraud-Dubois, Herrmann, Joly, Shilova, "Optimal checkpointing for heterogeneous chains:
how to train deep neural networks with limited memory", arXiv:1911.13214, 2019 (Rotor).
"""

from __future__ import annotations

from ...graph import ComputeGraph
from ...schedule import Schedule
from ..registry import SolverTags, register
from .plan_table import TABLE_OPTIONS, solve_with_table
from .plans import SEGMENTATION_OPTION


@register("rotor", "Rotor's dynamic program for heterogeneous chains (per-link costs, checkpoint and tape sizes); "
                   "optimal on chains.",
          tags=SolverTags(quick=True),
          options=(SEGMENTATION_OPTION, *TABLE_OPTIONS),
          reference="Beaumont et al., Optimal checkpointing for heterogeneous chains, arXiv:1911.13214, 2019")
def rotor(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, segmentation: str = "auto",
          max_links: int = 64, memory_slots: int = 400) -> Schedule:
    """Rotor: the cheapest plan on the link chain at this budget.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: the table is filled in full.
    segmentation : {"auto", "articulation", "linear"}
        How link boundaries are found (:func:`.chain.chains`; "auto" tries both).
    max_links : int
        Links beyond this many are merged.
    memory_slots : int
        Memory levels of the table.

    Returns
    -------
    Schedule
        Checkpoint-all when it fits; else the table's plan at the budget's level. ``solver_info``
        gives the level, the bytes per level and the table's predicted cost.

    Raises
    ------
    InfeasibleBudget
        When no plan of the table fits (the smallest measured peak is reported).

    References
    ----------
    Beaumont et al., "Optimal checkpointing for heterogeneous chains", 2019.
    """
    del time_limit
    return solve_with_table(graph, budget, "rotor", segmentation=segmentation, max_links=max_links,
                            memory_slots=memory_slots)
