"""Plans on a link chain, and from a plan to a measured schedule.

A plan says how to run the backward groups ``t, t-1, ..., s`` of a :class:`.chain.Chain` with
``A_{s-1}`` resident:

- :class:`Leaf` ``(t)``: recompute link ``t``'s tape from ``A_{t-1}`` (if it has one), run group ``t``.
- :class:`Tape` ``(s, rest)``: compute link ``s`` keeping its tape, run ``rest`` (links
  ``s+1..t``), then group ``s``.
- :class:`Split` ``(s, j, right, left)``: advance through links ``s..j`` keeping only the
  checkpoint ``A_j``, run ``right`` (links ``j+1..t``), then ``left`` (links ``s..j``).

Chen's segments, revolve's binomial splits and Rotor's dynamic program are all such trees.
:func:`plan_computes` flattens one into computations (each with a reason naming its link,
segment and checkpoint), :func:`~remat_core.schedule.ops.ops_from_computes` frees every instance
after its last reader, and :func:`measure_plan` simulates the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Union

from ...errors import InfeasibleBudget
from ...graph import ComputeGraph, node_labels
from ...schedule import Reason, Schedule, checkpoint_all_peak, ops_from_computes, reason, simulate
from ..registry import Option
from .chain import SEGMENTATIONS, Chain

SEGMENTATION_OPTION = Option(
    "segmentation", str, "auto", "link boundaries: cut vertices of the forward order ('articulation'), every gap "
                                 "of a linearisation ('linear'), or both, keeping the cheaper schedule ('auto')",
    choices=SEGMENTATIONS)
"""The option every chain solver takes (see :func:`.chain.chains`)."""


# -- plans ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Leaf:
    """Recompute link ``t``'s tape from ``A_{t-1}`` (when it has one), then run group ``t``."""

    t: int


@dataclass(frozen=True)
class Tape:
    """Compute link ``s`` keeping its tape, run ``rest`` (links ``s+1..t``), then group ``s``."""

    s: int
    rest: "Plan"


@dataclass(frozen=True)
class Split:
    """Advance through links ``s..j`` keeping checkpoint ``A_j``; run ``right`` (``j+1..t``), then ``left`` (``s..j``)."""

    s: int
    j: int
    right: "Plan"
    left: "Plan"


Plan = Union[Leaf, Tape, Split]


def plan_computes(chain: Chain, plan: Plan, solver: str) -> tuple[list[int], list[Reason]]:
    """The computations of a plan, in order, each with a reason naming its link, segment and checkpoint.

    Rules: ``<solver>-advance`` (towards a checkpoint), ``<solver>-tape`` (a link computed to keep
    its values for its backward group), ``<solver>-backward`` (a backward group).
    """
    computes: list[int] = []
    reasons: list[Reason] = []
    seen: set[int] = set()
    labels = node_labels(chain.graph)
    names = [labels[i] for i in chain.graph.ids]

    def emit(nodes: Iterable[int], text: Callable[[str, str], str], **fields) -> None:
        for v in nodes:
            verb = "recomputed" if v in seen else "computed"
            seen.add(v)
            computes.append(v)
            reasons.append(reason(text(verb, names[v]), **fields))

    def backward(k: int) -> None:
        emit(chain.link(k).backward, lambda verb, v: f"backward group {k}: {v} {verb}",
             rule=f"{solver}-backward", link=k)

    # An explicit stack instead of recursion: plans on long chains nest deeply.
    stack: list[tuple[str, object]] = [("plan", plan)]
    while stack:
        what, item = stack.pop()
        if what == "backward":
            backward(item)
            continue
        if isinstance(item, Leaf):
            k = item.t
            start = chain.boundary_label(k - 1)
            emit(chain.link(k).leaf, lambda verb, v: f"{v} {verb} in link {k} from checkpoint {start} for "
                                                      f"backward group {k}",
                 rule=f"{solver}-tape", link=k, checkpoint=start)
            backward(k)
        elif isinstance(item, Tape):
            k = item.s
            emit(chain.link(k).taped, lambda verb, v: f"{v} {verb} in link {k}, kept for backward group {k}",
                 rule=f"{solver}-tape", link=k, checkpoint=chain.boundary_label(k - 1))
            stack.append(("backward", k))
            stack.append(("plan", item.rest))
        else:
            target = chain.boundary_label(item.j)
            start = chain.boundary_label(item.s - 1)
            for k in range(item.s, item.j + 1):
                emit(chain.link(k).advance,
                     lambda verb, v, k=k: f"{v} {verb} advancing link {k} from checkpoint {start} to checkpoint "
                                          f"{target} (segment {item.s}..{item.j})",
                     rule=f"{solver}-advance", link=k, segment=[item.s, item.j], checkpoint=target)
            stack.append(("plan", item.left))
            stack.append(("plan", item.right))
    return computes, reasons


def tape_chain(s: int, t: int) -> Plan:
    """Links ``s..t`` computed once, each keeping its tape, then their groups in reverse (one Chen segment)."""
    plan: Plan = Leaf(t)
    for k in range(t - 1, s - 1, -1):
        plan = Tape(k, plan)
    return plan


# -- from a plan to a measured schedule -------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """A plan turned into ops, with the peak and cost the simulator measured."""

    ops: tuple
    reasons: tuple
    peak: int
    cost: float
    info: dict


def measure_plan(chain: Chain, plan: Plan, solver: str, **info) -> Candidate:
    """Flatten ``plan`` into ops (frees after last reads) and simulate them."""
    computes, reasons = plan_computes(chain, plan, solver)
    ops, op_reasons = ops_from_computes(chain.graph, computes, reasons, free_rule=f"{solver}-free")
    result = simulate(chain.graph, ops)
    return Candidate(tuple(ops), tuple(op_reasons), result.peak, result.cost, info)


def best_candidate(graph: ComputeGraph, budget: int, solver: str, candidates: Iterable[Candidate],
                   detail: str) -> Schedule:
    """The cheapest candidate within the budget as a schedule; :class:`InfeasibleBudget` if none fits.

    The smallest feasible budget reported is the lowest measured peak among the candidates (or the
    checkpoint-all peak, which always works).
    """
    best = None
    smallest = checkpoint_all_peak(graph)
    for candidate in candidates:
        smallest = min(smallest, candidate.peak)
        if candidate.peak <= budget and (best is None or candidate.cost < best.cost):
            best = candidate
    if best is None:
        raise InfeasibleBudget(budget, smallest, solver, detail)
    return Schedule.from_ops(best.ops, best.reasons, solver_info=dict(best.info))
