"""``treewidth``: TW-Remat, the treewidth recursion of Kumar et al. (NeurIPS 2019).

A tree decomposition of the graph's skeleton (pinned nodes left out) is turned into its balanced
separator tree (centroid bags at the top); the shared recursion in :mod:`.recursion`
rematerializes over it. With width k and N bags, the pure schedule holds O((k + in-degree) log N)
tensors and computes each node at most (k + 2)^depth times; budget-aware, it stops recursing where
the budget allows and falls back to eviction where it does not, and when no schedule over its own
decomposition fits, to the cheapest quick heuristic that fits (see ``docs/algorithms.md``).
"""

from __future__ import annotations

from typing import Any

from ...decompose import TREE_HEURISTICS, Decomposition, tree_decomposition
from ...graph import ComputeGraph
from ...schedule import Schedule
from ..deadline import Deadline
from ..quick import separator_fallback
from ..registry import Option, SolverTags, register
from .recursion import DEFAULT_MAX_COMPUTES, decomposition_hierarchy, solve_over_hierarchy

REFERENCE = ("R. Kumar, M. Purohit, Z. Svitkina, E. Vee, J. R. Wang, \"Efficient Rematerialization for Deep "
             "Networks\", NeurIPS 2019")

BUDGET_AWARE = Option("budget_aware", bool, True,
                      "stop recursing where a subproblem fits the memory left, and evict where still over; "
                      "false: the paper's pure schedule (InfeasibleBudget if its peak is over)")
FALLBACK = Option("fallback", bool, True,
                  "budget-aware: when no schedule over this decomposition fits, return the cheapest schedule of "
                  "the other separator solvers and the eviction and chain heuristics that fits (strategy "
                  "'fallback: NAME'); false: refuse the budget")
MAX_COMPUTES = Option("max_recursion_computes", int, DEFAULT_MAX_COMPUTES,
                      "compute ops the recursion may emit (its recomputation grows like n^O(log width))", low=1)


@register("treewidth", "TW-Remat: recursion over a tree decomposition's balanced separator tree (Kumar et al.).",
          tags=SolverTags(quick=True, traceable_recursion=True, budget_monotone=True,
                         portfolio_options={"fallback": False}),
          reference=REFERENCE,
          options=(BUDGET_AWARE,
                   Option("heuristic", str, "min_degree", "tree decomposition method", choices=TREE_HEURISTICS),
                   MAX_COMPUTES, FALLBACK))
def treewidth(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, budget_aware: bool = True,
              heuristic: str = "min_degree", max_recursion_computes: int = DEFAULT_MAX_COMPUTES,
              fallback: bool = True) -> Schedule:
    """TW-Remat within ``budget`` bytes.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
    time_limit : float, optional
        Once it passes, no further candidate plan (post-pass replay) is built and the cheapest so far
        is returned; the recursion's size is bounded by ``max_recursion_computes``.
    budget_aware : bool
    heuristic : {"min_degree", "min_fill", "exact"}
    max_recursion_computes : int
    fallback : bool
        Budget-aware: when no schedule over the decomposition fits, return the cheapest schedule
        of the other separator solvers and the eviction and chain heuristics that fits
        (:func:`~remat_core.solvers.quick.separator_fallback`).

    Returns
    -------
    Schedule
        ``solver_info`` holds the decomposition's width, bag count, time and the strategy used.

    Raises
    ------
    InfeasibleBudget
        Pure: the recursion's peak is over the budget. Budget-aware: no schedule over the
        decomposition fits, nor (with ``fallback``) any quick heuristic's.
    DecompositionError
        ``heuristic="exact"`` on a graph above the exact method's limit.

    References
    ----------
    Kumar et al., NeurIPS 2019 (TW-Remat).
    """
    deadline = Deadline(time_limit)
    decomposition = tree_decomposition(graph, heuristic)
    _, hierarchy = decomposition_hierarchy(graph, decomposition, "treewidth")
    info = decomposition_info(decomposition, "heuristic", heuristic)
    return separator_fallback(graph, budget, "treewidth", lambda: solve_over_hierarchy(
        graph, budget, hierarchy, solver="treewidth", budget_aware=budget_aware, max_computes=max_recursion_computes,
        info=info, deadline=deadline), enabled=budget_aware and fallback, info=info, deadline=deadline)


def decomposition_info(decomposition: Decomposition, option: str, value: str) -> dict[str, Any]:
    """The ``solver_info`` the separator solvers share: which decomposition (and the option that chose
    it, as given), its width, bags and time."""
    return {"decomposition": decomposition.kind, option: value, "width": decomposition.width,
            "bags": len(decomposition), "decomposition_seconds": decomposition.seconds}
