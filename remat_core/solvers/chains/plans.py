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

import bisect
import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Union

from ...errors import InfeasibleBudget
from ...graph import ComputeGraph, node_labels
from ...schedule import (FREE, OFFLOAD, PREFETCH, Link, Op, Reason, Schedule, checkpoint_all_peak, ops_from_computes,
                         reason, simulate, useful_computations)
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


KEEP, EARLY, LATE = "", "early", "late"
"""What a Tape or Split does with the input it keeps (:func:`offloaded_input`): keep it on the device, or offload
it and prefetch it during the backward group run just before its own (EARLY) or right before it (LATE)."""


@dataclass(frozen=True)
class Tape:
    """Compute link ``s`` keeping its tape, run ``rest`` (links ``s+1..t``), then group ``s``."""

    s: int
    rest: "Plan"
    offload: str = KEEP


@dataclass(frozen=True)
class Split:
    """Advance through links ``s..j`` keeping checkpoint ``A_j``; run ``right`` (``j+1..t``), then ``left`` (``s..j``)."""

    s: int
    j: int
    right: "Plan"
    left: "Plan"
    offload: str = KEEP


Plan = Union[Leaf, Tape, Split]

Transfers = dict[int, list[tuple[Op, Reason]]]
"""Ops to place before the computation at each position (see :func:`~remat_core.schedule.ops_from_computes`)."""


def offloaded_input(chain: Chain, step: Tape | Split) -> frozenset[int]:
    """What a Tape or Split may offload while the rest of its plan runs: the values of ``A_{s-1}`` it keeps for its
    own backward groups that nothing in between reads (not in the checkpoint ``A_j`` it advances to, nor, for a
    Tape, in ``A_s``)."""
    before = chain.boundaries[step.s - 1]
    if isinstance(step, Split):
        return before - chain.boundaries[step.j]
    return frozenset(v for v in before if chain.read_later(v, step.s + 1)) - chain.boundaries[step.s]


@dataclass
class _Move:
    """A Tape's or Split's offload of its kept input: where its ops go in the computations (positions)."""

    step: Tape | Split
    moved: frozenset[int]
    what: str
    start: int
    free: int = -1
    back: int = 0
    prefetch: int = -1
    prefetch_order: int = -1  # when the prefetch's position was reached: prefetches at one position go in this order


def plan_computes(chain: Chain, plan: Plan, solver: str, transfers: Transfers | None = None
                  ) -> tuple[list[int], list[Reason]]:
    """The computations of a plan, in order, each with a reason naming its link, segment and checkpoint.

    Rules: ``<solver>-advance`` (towards a checkpoint), ``<solver>-tape`` (a link computed to keep
    its values for its backward group), ``<solver>-backward`` (a backward group). A Tape or Split that
    offloads its kept input (:func:`offloaded_input`) adds to ``transfers``: ``offload`` before its
    first computation (unless a host copy was made earlier), ``free`` after its own link(s), and
    ``prefetch`` before the backward group run just before its own (EARLY) or before its own (LATE);
    rules ``<solver>-offload``, ``<solver>-free``, ``<solver>-prefetch``. A value the rest of its own
    plan does not read again (off chains, a link may not need all of its input) is not moved.
    """
    computes: list[int] = []
    reasons: list[Reason] = []
    seen: set[int] = set()
    moves: list[_Move] = []
    reached = itertools.count()
    prefetch_before_group: dict[int, list[_Move]] = {}
    graph = chain.graph
    labels = node_labels(graph)
    names = [labels[i] for i in graph.ids]

    def send_out(step: Tape | Split, what: str) -> _Move | None:
        if step.offload == KEEP or not offloaded_input(chain, step):
            return None
        if transfers is None:
            raise ValueError("this plan offloads: pass a transfers mapping to plan_computes")
        moves.append(_Move(step, offloaded_input(chain, step), what, len(computes)))
        return moves[-1]

    def free_and_return(move: _Move | None, back: int, stack: list) -> None:
        if move is None:
            return
        move.free, move.back = len(computes), back
        if move.step.offload == EARLY:
            prefetch_before_group.setdefault(back, []).append(move)
        else:
            stack.append(("prefetch", move))

    def emit(nodes: Iterable[int], text: Callable[[str, str], str], **fields) -> None:
        for v in nodes:
            verb = "recomputed" if v in seen else "computed"
            seen.add(v)
            computes.append(v)
            reasons.append(reason(text(verb, names[v]), **fields))

    def backward(k: int) -> None:
        for move in prefetch_before_group.pop(k, ()):
            move.prefetch, move.prefetch_order = len(computes), next(reached)
        emit(chain.link(k).backward, lambda verb, v: f"backward group {k}: {v} {verb}",
             rule=f"{solver}-backward", link=k)

    # An explicit stack instead of recursion: plans on long chains nest deeply.
    stack: list[tuple[str, object]] = [("plan", plan)]
    while stack:
        what, item = stack.pop()
        if what == "backward":
            backward(item)
            continue
        if what == "prefetch":
            item.prefetch, item.prefetch_order = len(computes), next(reached)
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
            move = send_out(item, f"link {k} is taped")
            emit(chain.link(k).taped, lambda verb, v: f"{v} {verb} in link {k}, kept for backward group {k}",
                 rule=f"{solver}-tape", link=k, checkpoint=chain.boundary_label(k - 1))
            stack.append(("backward", k))
            free_and_return(move, k + 1, stack)
            stack.append(("plan", item.rest))
        else:
            target = chain.boundary_label(item.j)
            start = chain.boundary_label(item.s - 1)
            move = send_out(item, f"links {item.s}..{item.j} advance")
            for k in range(item.s, item.j + 1):
                emit(chain.link(k).advance,
                     lambda verb, v, k=k: f"{v} {verb} advancing link {k} from checkpoint {start} to checkpoint "
                                          f"{target} (segment {item.s}..{item.j})",
                     rule=f"{solver}-advance", link=k, segment=[item.s, item.j], checkpoint=target)
            stack.append(("plan", item.left))
            free_and_return(move, item.j + 1, stack)
            stack.append(("plan", item.right))
    if moves:
        _place_moves(graph, computes, moves, names, solver, transfers)
    return computes, reasons


def _place_moves(graph: ComputeGraph, computes: list[int], moves: list[_Move], names: list[str], solver: str,
                 transfers: Transfers) -> None:
    """Each move's offload, free and prefetch ops at its positions, for the values its plan reads again (a value
    copied once keeps its host copy: it is not offloaded twice)."""
    kept = useful_computations(graph, computes)
    computed_at: dict[int, list[int]] = {}
    read_at: dict[int, list[int]] = {}
    for position, v in enumerate(computes):
        if kept[position]:
            computed_at.setdefault(v, []).append(position)
            for u in graph.pred_idx[v]:
                read_at.setdefault(u, []).append(position)

    def first(positions: list[int], at: int) -> int:
        k = bisect.bisect_left(positions, at)
        return positions[k] if k < len(positions) else len(computes)

    on_host: set[int] = set()
    placed: list[tuple[int, int, list[tuple[Op, Reason]]]] = []  # (position, order, ops)
    for move in moves:
        step = move.step
        back_in = [v for v in sorted(move.moved)
                   if first(read_at.get(v, []), move.prefetch) < first(computed_at.get(v, []), move.start)]
        if not back_in:
            continue

        def ops(action: str, nodes: Iterable[int], text: Callable[[str], str]) -> list[tuple[Op, Reason]]:
            return [((action, graph.ids[v]), reason(text(names[v]), rule=f"{solver}-{action}", link=step.s))
                    for v in nodes]

        fresh = [v for v in back_in if v not in on_host]
        on_host.update(fresh)
        when = "during" if step.offload == EARLY else "after"
        placed += [
            (move.start, -1, ops(OFFLOAD, fresh, lambda v: f"{v} offloaded to the host while {move.what} runs, for "
                                                           f"backward group {step.s}")),
            (move.free, -1, ops(FREE, back_in, lambda v: f"{v} dropped from the device after {move.what}: its host "
                                                         f"copy waits for backward group {step.s}")),
            (move.prefetch, move.prefetch_order, ops(PREFETCH, back_in, lambda v: f"{v} prefetched {when} backward "
                                                                                  f"group {move.back} for backward "
                                                                                  f"group {step.s}"))]
    for position, _, moved in sorted(placed, key=lambda entry: entry[:2]):  # stable: moves in execution order
        if moved:
            transfers.setdefault(position, []).extend(moved)


def tape_chain(s: int, t: int) -> Plan:
    """Links ``s..t`` computed once, each keeping its tape, then their groups in reverse (one Chen segment)."""
    plan: Plan = Leaf(t)
    for k in range(t - 1, s - 1, -1):
        plan = Tape(k, plan)
    return plan


# -- from a plan to a measured schedule -------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """A plan turned into ops, with the peak and cost the simulator measured (the cost is the makespan when it was
    measured over a transfer lane)."""

    ops: tuple
    reasons: tuple
    peak: int
    cost: float
    info: dict


def measure_plan(chain: Chain, plan: Plan, solver: str, link: Link | None = None, **info) -> Candidate:
    """Flatten ``plan`` into ops (frees after last reads, transfers where it offloads) and simulate them, over
    ``link`` when given."""
    transfers: Transfers = {}
    computes, reasons = plan_computes(chain, plan, solver, transfers)
    ops, op_reasons = ops_from_computes(chain.graph, computes, reasons, free_rule=f"{solver}-free", before=transfers)
    result = simulate(chain.graph, ops, link=link)
    return Candidate(tuple(ops), tuple(op_reasons), result.peak, result.makespan, info)


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
