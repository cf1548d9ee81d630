"""``chen-sqrt`` and ``chen-greedy``: segment checkpointing (Chen et al., 2016).

The forward pass is cut into segments; only each segment's output (its checkpoint) is kept. The
backward pass walks the segments in reverse: each segment is recomputed once from the checkpoint
before it, its values kept while its backward runs, then freed. Memory is about the checkpoints
plus one segment; the cost is about one extra forward pass.

On a general graph the segments are made of links of :mod:`.chain`: cut vertices of the forward
order (articulation points), or the gaps of a linearisation when there are too few, which is how
Checkmate ran these baselines on non-linear networks (``segmentation="auto"`` tries both and
keeps the cheaper schedule).

- ``chen-sqrt`` checkpoints every ``ceil(sqrt(L))``-th of the ``L`` links: one fixed point on the
  memory/compute curve, used whatever the budget (infeasible when its peak exceeds it).
- ``chen-greedy`` is Chen's greedy rule: walk the links, adding up their memory, and checkpoint
  when the running sum passes a threshold ``b``. It tries a range of thresholds and returns the
  cheapest schedule within the budget.

References
----------
Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost", arXiv:1604.06174, 2016.
Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization", MLSys 2020.
"""

from __future__ import annotations

import math
from typing import Sequence

from ...graph import ComputeGraph
from ...schedule import Schedule
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..registry import Option, SolverTags, register
from .chain import Chain, chains
from .plans import SEGMENTATION_OPTION, Candidate, Plan, Split, best_candidate, measure_plan, tape_chain

_REFERENCE = "Chen, Xu, Zhang, Guestrin, Training Deep Nets with Sublinear Memory Cost, arXiv:1604.06174, 2016"


def segment_plan(chain: Chain, checkpoints: Sequence[int]) -> Plan:
    """Chen's plan: keep the boundaries after the given links, recompute each segment once for its backward.

    Parameters
    ----------
    chain : Chain
    checkpoints : sequence of int
        Link indices ``c`` (``1 <= c < L``, increasing) after which the boundary ``A_c`` is kept.
    """
    starts = [1] + [c + 1 for c in checkpoints]
    ends = [c for c in checkpoints] + [chain.length]
    plan = tape_chain(starts[-1], ends[-1])
    for s, j in reversed(list(zip(starts[:-1], ends[:-1]))):
        plan = Split(s, j, plan, tape_chain(s, j))
    return plan


def sqrt_checkpoints(length: int) -> list[int]:
    """Every ``ceil(sqrt(L))``-th link: about ``sqrt(L)`` segments of ``sqrt(L)`` links."""
    step = max(1, math.isqrt(length - 1) + 1 if length > 1 else 1)
    return list(range(step, length, step))


def greedy_checkpoints(link_bytes: Sequence[int], threshold: float) -> list[int]:
    """Chen's greedy rule: checkpoint after a link when the segment's memory so far exceeds ``threshold``."""
    checkpoints, running = [], 0
    for k, size in enumerate(link_bytes[:-1], start=1):
        running += size
        if running > threshold:
            checkpoints.append(k)
            running = 0
    return checkpoints


def _link_bytes(chain: Chain) -> list[int]:
    mem = chain.graph.mem
    return [sum(mem[v] for v in link.forward) for link in chain.links]


def _greedy_candidates(chain: Chain, thresholds: int) -> list[Candidate]:
    """Chen's greedy segmentation at a geometric range of thresholds (distinct segmentations only)."""
    sizes = _link_bytes(chain)
    low, high = max(1, min((s for s in sizes if s > 0), default=1)), max(1, sum(sizes))
    values = [low * (high / low) ** (i / (thresholds - 1)) for i in range(thresholds)] if high > low else [low]
    seen: set[tuple[int, ...]] = set()
    out = []
    for threshold in sorted(values):
        checkpoints = tuple(greedy_checkpoints(sizes, threshold))
        if checkpoints in seen:
            continue
        seen.add(checkpoints)
        out.append(measure_plan(chain, segment_plan(chain, checkpoints), "chen-greedy", threshold=threshold,
                                checkpoints=len(checkpoints), segmentation=chain.segmentation))
    return out


@register("chen-sqrt", "Chen's sqrt(n) segments: checkpoint every sqrt(L)-th link boundary (articulation points "
                       "or a linearisation), recompute each segment once.",
          tags=SolverTags(quick=True, budget_monotone=True), options=(SEGMENTATION_OPTION,), reference=_REFERENCE)
def chen_sqrt(graph: ComputeGraph, budget: int, *, time_limit: float | None = None,
              segmentation: str = "auto") -> Schedule:
    """Chen's sqrt(n) checkpointing.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: nothing is searched.
    segmentation : {"auto", "articulation", "linear"}
        How link boundaries are found (:func:`.chain.chains`; "auto" tries both).

    Returns
    -------
    Schedule
        The checkpoint-all schedule when the budget admits it, else the sqrt(n) schedule.

    Raises
    ------
    InfeasibleBudget
        When the sqrt(n) schedule's peak exceeds the budget (its peak is the smallest feasible one
        reported).

    References
    ----------
    Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016, section 4.1.
    """
    del time_limit
    fits = checkpoint_all_if_it_fits(graph, budget, "chen-sqrt")
    if fits is not None:
        return fits
    candidates = [graph.memo(f"chen-sqrt:{chain.segmentation}", lambda chain=chain: measure_plan(
        chain, segment_plan(chain, sqrt_checkpoints(chain.length)), "chen-sqrt",
        checkpoints=len(sqrt_checkpoints(chain.length)), segmentation=chain.segmentation))
        for chain in chains(graph, segmentation)]
    needs = " or ".join(f"{c.peak:,} bytes ({c.info['segmentation']})" for c in candidates)
    return best_candidate(graph, budget, "chen-sqrt", candidates, f"the sqrt(n) segmentation needs {needs}")


@register("chen-greedy", "Chen's greedy segments: checkpoint when a segment's memory passes a threshold; the "
                         "cheapest threshold within the budget.",
          tags=SolverTags(quick=True, budget_monotone=True),
          options=(SEGMENTATION_OPTION, Option("thresholds", int, 40, "segment-memory thresholds tried (geometric range)",
                                         low=2, high=1000)),
          reference=_REFERENCE)
def chen_greedy(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, segmentation: str = "auto",
                thresholds: int = 40) -> Schedule:
    """Chen's greedy checkpointing, over a range of segment-memory thresholds.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: the thresholds tried are fixed.
    segmentation : {"auto", "articulation", "linear"}
        How link boundaries are found (:func:`.chain.chains`; "auto" tries both).
    thresholds : int
        How many thresholds to try, geometrically spaced from the smallest link's memory to the
        whole forward pass's (each distinct segmentation is simulated once and cached).

    Returns
    -------
    Schedule
        Checkpoint-all when it fits; else the cheapest greedy segmentation within the budget.

    Raises
    ------
    InfeasibleBudget
        When no threshold's schedule fits (the lowest peak among them is reported).

    References
    ----------
    Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016, Algorithm 2 (greedy
    memory planning with a budget ``B``), with the threshold swept as in Checkmate's baselines.
    """
    del time_limit
    fits = checkpoint_all_if_it_fits(graph, budget, "chen-greedy")
    if fits is not None:
        return fits
    candidates = [c for chain in chains(graph, segmentation) for c in graph.memo(
        f"chen-greedy:{chain.segmentation}:{thresholds}", lambda chain=chain: _greedy_candidates(chain, thresholds))]
    return best_candidate(graph, budget, "chen-greedy", candidates,
                          f"none of {len(candidates)} greedy segmentations fits")
