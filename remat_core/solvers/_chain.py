"""A graph seen as a chain of stages, and the plans that chain methods (Chen, Griewank, Rotor) build on it.

Chain methods were designed for a sequence of layers: forward steps ``x_{k-1} -> x_k`` and a
backward pass that needs the layers' values in reverse order. This module turns any valid graph
into that shape and turns a plan on the chain back into graph ops.

The chain
---------
1. *Forward and backward.* The backward part is every needed node of kind ``backward`` and every
   node that depends on one; the forward part is the rest (a graph with no backward node is all
   forward). Pinned nodes are outside both: always resident.
2. *Boundaries.* Along the forward part's topological order, the gap after position ``g`` is
   crossed by the *live set* ``A_g``: forward values computed at or before ``g`` and read by a
   forward node after it. A gap crossed by at most the node just before it is a cut vertex of the
   order, an articulation point that splits the forward graph into a before and an after (the
   candidates Checkmate uses for Chen's baselines). When there are too few, every gap is a
   candidate and a boundary keeps its whole live set (the *linearised* graph).
3. *Stages.* Chosen boundaries cut the forward order into stages ``1..L``; ``A_k`` is the live
   set after stage ``k`` (``A_0`` is empty: only pinned inputs precede stage 1).
4. *Backward groups.* Each backward node joins the latest group at which all it reads is at hand:
   a value of stage ``k`` is at hand in groups ``<= k`` (as part of stage ``k``'s tape, or kept from
   it) and in the groups of the later stages whose input boundary it crosses (a skip connection);
   a backward node also runs no later than the backward nodes it reads. Groups run from ``L`` down
   to ``1``. ``T_k``, the *tape* of stage ``k``, is what groups ``<= k`` read from
   stage ``k`` (plus stage ``k``'s forward outputs); ``D_k``, the *frontier*, is what is resident
   on entry to group ``k`` besides ``A_{k-1}`` and ``T_k`` (gradients of later groups and tapes of
   later stages that earlier groups still read).

Plans
-----
A plan says how to run the groups ``t, t-1, ..., s`` with ``A_{s-1}`` resident:

- :class:`Leaf` ``(t)``: recompute stage ``t``'s tape from ``A_{t-1}`` (if it has one), run group ``t``.
- :class:`Tape` ``(s, rest)``: compute stage ``s`` keeping its tape, run ``rest`` (stages
  ``s+1..t``), then group ``s``.
- :class:`Split` ``(s, j, right, left)``: advance through stages ``s..j`` keeping only the
  checkpoint ``A_j``, run ``right`` (stages ``j+1..t``), then ``left`` (stages ``s..j``).

Revolve's binomial splits, Rotor's dynamic program and Chen's segments are all such trees.
:func:`plan_computes` flattens one into computations and
:func:`~remat_core.scheduling.ops_from_computes` frees every instance after its last reader.

References
----------
Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost", arXiv:1604.06174, 2016.
Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization", MLSys 2020
(articulation points and linearisation for the Chen baselines on general graphs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Iterator, Sequence, Union

import numpy as np

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import Reason, Schedule, reason
from ..scheduling import needed_topological_order, ops_from_computes
from ..simulate import checkpoint_all_ops, checkpoint_all_peak, simulate

SEGMENTATIONS = ("auto", "articulation", "linear")
"""How boundaries are found: cut vertices when there are enough ("auto"), always, or every gap."""


# -- the chain --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    """One stage of a chain (node indices of the graph).

    Attributes
    ----------
    index : int
        1-based position in the chain.
    forward : tuple of int
        The stage's forward nodes, in topological order.
    advance : tuple of int
        The forward nodes needed to produce the checkpoint ``A_k`` (an advance computes only these).
    leaf : tuple of int
        The forward nodes needed to produce the tape ``T_k``.
    taped : tuple of int
        The forward nodes needed for both (what :class:`Tape` computes).
    tape : frozenset of int
        ``T_k``: values of this stage that backward groups ``<= k`` read, and forward outputs.
    backward : tuple of int
        Group ``k``: backward nodes, in topological order.
    """

    index: int
    forward: tuple[int, ...]
    advance: tuple[int, ...]
    leaf: tuple[int, ...]
    taped: tuple[int, ...]
    tape: frozenset[int]
    backward: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Chain:
    """A graph cut into stages; see the module docstring.

    Attributes
    ----------
    graph : ComputeGraph
    segmentation : str
        "articulation" (boundaries are cut vertices) or "linear" (live sets of a linearisation).
    stages : tuple of Stage
        Stages ``1..L`` (``stages[k - 1]`` is stage ``k``).
    boundaries : tuple of frozenset of int
        ``A_0..A_L``: the values kept at each boundary (``A_0`` and ``A_L`` are empty).
    frontier_bytes : tuple of int
        ``|D_k|`` for ``k = 1..L`` (index ``k - 1``).
    """

    graph: ComputeGraph
    segmentation: str
    stages: tuple[Stage, ...]
    boundaries: tuple[frozenset[int], ...]
    frontier_bytes: tuple[int, ...]
    _minread: dict[int, int]

    @property
    def length(self) -> int:
        """L, the number of stages."""
        return len(self.stages)

    def stage(self, k: int) -> Stage:
        """Stage ``k`` (1-based)."""
        return self.stages[k - 1]

    def boundary_bytes(self, k: int) -> int:
        """``|A_k|`` in bytes."""
        mem = self.graph.mem
        return sum(mem[v] for v in self.boundaries[k])

    def boundary_label(self, k: int) -> str:
        """The checkpoint after stage ``k``, named by its tensors (at most three)."""
        return self._labels[k]

    @cached_property
    def _labels(self) -> tuple[str, ...]:
        ids = self.graph.ids
        labels = []
        for boundary in self.boundaries:
            names = sorted(ids[v] for v in boundary)
            more = f", +{len(names) - 3} more" if len(names) > 3 else ""
            labels.append("{" + ", ".join(names[:3]) + more + "}" if names else "(the pinned inputs)")
        return tuple(labels)

    def read_later(self, value: int, group: int) -> bool:
        """Whether a backward group before ``group`` (executed after it) still reads ``value``."""
        return self._minread.get(value, math.inf) < group

    @cached_property
    def figures(self) -> "StageFigures":
        """Memory and cost of each step of a plan on this chain (see :class:`StageFigures`)."""
        return _stage_figures(self)


def linear_chain(graph: ComputeGraph, segmentation: str = "auto", max_stages: int | None = None,
                 merge_tail: bool = False) -> Chain:
    """The graph as a chain of stages (cached on the graph).

    Parameters
    ----------
    graph : ComputeGraph
    segmentation : {"auto", "articulation", "linear"}
        Boundaries at cut vertices of the forward order ("articulation"), at every gap with its
        whole live set ("linear"), or cut vertices when there are at least ``sqrt`` of the forward
        nodes of them, else every gap ("auto").
    max_stages : int, optional
        Merge stages until there are at most this many, keeping in each stretch of equal forward
        cost the boundary with the smallest live set.
    merge_tail : bool
        Merge the stages after the last one a backward group needs (the loss, a forward-only tail)
        into it. Revolve wants this: those stages are part of the turn from forward to backward,
        not steps to reverse. Rotor does not: finer stages give it more to choose from.

    Returns
    -------
    Chain
    """
    if segmentation not in SEGMENTATIONS:
        raise ValueError(f"segmentation must be one of {', '.join(SEGMENTATIONS)}, got {segmentation!r}")
    return graph.memo(f"chain:{segmentation}:{max_stages}:{merge_tail}",
                      lambda: _build_chain(graph, segmentation, max_stages, merge_tail))


def _forward_backward(graph: ComputeGraph) -> tuple[list[int], list[int]]:
    """The needed nodes split into forward and backward parts, each in topological order."""
    order = needed_topological_order(graph)
    backward: set[int] = set()
    for v in order:
        if graph.nodes[v].kind == "backward" or any(p in backward for p in graph.pred_idx[v]):
            backward.add(v)
    forward = [v for v in order if v not in backward]
    if not forward:
        return order, []
    return forward, [v for v in order if v in backward]


def _build_chain(graph: ComputeGraph, segmentation: str, max_stages: int | None, merge_tail: bool) -> Chain:
    forward, backward = _forward_backward(graph)
    position = {v: p for p, v in enumerate(forward)}
    in_forward = position.__contains__
    last_forward_reader = [-1] * len(forward)
    for p, v in enumerate(forward):
        for u in graph.pred_idx[v]:
            if in_forward(u):
                last_forward_reader[position[u]] = p
    gaps, cut_gaps, live_bytes = _gaps(graph, forward, last_forward_reader)
    enough = max(1, math.isqrt(len(forward)))
    if segmentation == "articulation" or (segmentation == "auto" and len(cut_gaps) >= enough):
        used, candidates = "articulation", cut_gaps
    else:
        used, candidates = "linear", gaps
    chosen = _choose_boundaries(graph, forward, candidates, live_bytes, max_stages)
    stage_of, boundaries = _stages_of(forward, last_forward_reader, chosen)
    group = _backward_groups(graph, backward, stage_of, _available_until(forward, last_forward_reader, stage_of))
    last_needed = max(group.values(), default=1)
    if merge_tail and last_needed < len(chosen) + 1:
        chosen = chosen[: last_needed - 1]
        stage_of, boundaries = _stages_of(forward, last_forward_reader, chosen)
    length = len(chosen) + 1
    starts = [0] + [g + 1 for g in chosen]
    ends = [g + 1 for g in chosen] + [len(forward)]
    minread: dict[int, int] = {}
    for b in backward:
        for u in graph.pred_idx[b]:
            if not graph.pinned[u]:
                minread[u] = min(minread.get(u, math.inf), group[b])
    outputs = set(graph.output_idx)
    stages = []
    for k, (a, b) in enumerate(zip(starts, ends), start=1):
        nodes = forward[a:b]
        tape = frozenset(v for v in nodes if minread.get(v, math.inf) <= k or v in outputs)
        checkpoint = boundaries[k] & frozenset(nodes)
        stages.append(Stage(k, tuple(nodes), _within_stage_ancestors(graph, nodes, checkpoint),
                            _within_stage_ancestors(graph, nodes, tape),
                            _within_stage_ancestors(graph, nodes, tape | checkpoint), tape,
                            tuple(v for v in backward if group[v] == k)))
    frontier = _frontier_bytes(graph, length, minread, stage_of, group)
    return Chain(graph, used, tuple(stages), tuple(boundaries), frontier, minread)


def _gaps(graph: ComputeGraph, forward: Sequence[int], last_forward_reader: Sequence[int]
          ) -> tuple[list[int], list[int], list[int]]:
    """Every gap of the forward order, the cut gaps among them, and the bytes of each gap's live set."""
    n = len(forward)
    opened = [0] * n  # bytes that start crossing at gap p (value at p read after p)
    closed = [0] * n  # bytes that stop crossing after gap p - 1
    crossing_count_delta = [0] * (n + 1)
    for p, v in enumerate(forward):
        last = last_forward_reader[p]
        if last > p:
            opened[p] += graph.mem[v]
            closed[last] += graph.mem[v]
            crossing_count_delta[p] += 1
            crossing_count_delta[last] -= 1
    live_bytes, cuts = [], []
    running_bytes = running_count = 0
    for p in range(n - 1):
        running_bytes += opened[p] - closed[p]
        running_count += crossing_count_delta[p]
        live_bytes.append(running_bytes)
        own = 1 if last_forward_reader[p] > p else 0
        if running_count - own == 0:
            cuts.append(p)
    return list(range(n - 1)), cuts, live_bytes


def _live_set(forward: Sequence[int], last_forward_reader: Sequence[int], gap: int) -> frozenset[int]:
    return frozenset(forward[p] for p in range(gap + 1) if last_forward_reader[p] > gap)


def _stages_of(forward: Sequence[int], last_forward_reader: Sequence[int], chosen: Sequence[int]
               ) -> tuple[dict[int, int], list[frozenset[int]]]:
    """Stage of each forward node, and the boundaries ``A_0..A_L``, for boundaries after the ``chosen`` gaps."""
    stage_of: dict[int, int] = {}
    ends = [g + 1 for g in chosen] + [len(forward)]
    start = 0
    for k, end in enumerate(ends, start=1):
        for v in forward[start:end]:
            stage_of[v] = k
        start = end
    boundaries = [frozenset()] + [_live_set(forward, last_forward_reader, g) for g in chosen] + [frozenset()]
    return stage_of, boundaries


def _choose_boundaries(graph: ComputeGraph, forward: Sequence[int], candidates: Sequence[int],
                       live_bytes: Sequence[int], max_stages: int | None) -> list[int]:
    """At most ``max_stages - 1`` candidate gaps: in each stretch of equal forward cost, the smallest live set."""
    if max_stages is None or len(candidates) + 1 <= max_stages:
        return list(candidates)
    if max_stages <= 1:
        return []
    weights = [graph.cost[v] for v in forward]
    if not any(weights):
        weights = [1.0] * len(forward)
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    windows = max_stages - 1
    best: dict[int, int] = {}
    for g in candidates:
        window = min(windows - 1, int(cumulative[g] / total * windows)) if total > 0 else 0
        if window not in best or live_bytes[g] < live_bytes[best[window]]:
            best[window] = g
    return sorted(best.values())


def _backward_groups(graph: ComputeGraph, backward: Sequence[int], stage_of: dict[int, int],
                     available_until: dict[int, int]) -> dict[int, int]:
    """Group of every backward node: the latest stage at which everything it reads is still at hand.

    A forward value of stage ``j`` is at hand in group ``k <= j`` (inside stage ``j``, or kept from
    it), and up to the last stage whose forward nodes read it (it is in the boundary before each
    of them): ``k <= available_until[u]``. A backward node also runs no later than the backward
    nodes it reads. A node constrained by neither (it reads only pinned inputs) joins the latest
    group any other node has, so that it runs as soon as the backward pass starts.
    """
    wanted: dict[int, int | None] = {}
    for b in backward:
        constraints = [wanted[u] for u in graph.pred_idx[b] if u in wanted and wanted[u] is not None]
        constraints += [available_until[u] for u in graph.pred_idx[b] if u in stage_of]
        wanted[b] = min(constraints) if constraints else None
    latest = max((g for g in wanted.values() if g is not None), default=1)
    return {b: latest if g is None else g for b, g in wanted.items()}


def _available_until(forward: Sequence[int], last_forward_reader: Sequence[int], stage_of: dict[int, int]
                     ) -> dict[int, int]:
    """For each forward value: the last stage that has it at hand (its own, or that of its last forward reader)."""
    return {v: stage_of[forward[max(p, last_forward_reader[p])]] for p, v in enumerate(forward)}


def _within_stage_ancestors(graph: ComputeGraph, nodes: Sequence[int], targets: frozenset[int]) -> tuple[int, ...]:
    """The stage's nodes that ``targets`` (nodes of the stage) depend on within it, targets included."""
    inside = set(nodes)
    needed = set()
    stack = [t for t in targets if t in inside]
    while stack:
        v = stack.pop()
        if v in needed:
            continue
        needed.add(v)
        stack.extend(u for u in graph.pred_idx[v] if u in inside and u not in needed)
    return tuple(v for v in nodes if v in needed)


def _frontier_bytes(graph: ComputeGraph, length: int, minread: dict[int, int], stage_of: dict[int, int],
                    group: dict[int, int]) -> tuple[int, ...]:
    """``|D_k|``: a value made by stage/group ``j`` and read by group ``r < j`` is in ``D_r .. D_{j-1}``."""
    delta = [0] * (length + 2)
    for v, r in minread.items():
        made = group.get(v, stage_of.get(v))
        if made is not None and r < made:
            delta[r] += graph.mem[v]
            delta[made] -= graph.mem[v]
    out, running = [], 0
    for k in range(1, length + 1):
        running += delta[k]
        out.append(running)
    return tuple(out)


# -- memory and cost of each step of a plan ---------------------------------------------------------

@dataclass(frozen=True)
class StageFigures:
    """Bytes and costs of the steps of a chain, all arrays indexed by stage ``k`` (index 0 unused).

    Peaks are absolute local peaks of one step (:func:`local_peak`), counting what is resident when
    it starts; the frontier ``D_k`` is added by the caller where it is resident, except in
    ``backward_peak``, which includes it.
    """

    boundary: tuple[int, ...]      # |A_k|, k = 0..L
    frontier: tuple[int, ...]      # |D_k|
    advance_first: tuple[int, ...]  # peak of advancing stage k with A_{k-1} kept
    advance_next: tuple[int, ...]   # peak of advancing stage k, A_{k-1} freed after its last read
    tape_peak: tuple[int, ...]      # peak of computing stage k keeping its tape (Tape)
    tape_extra: tuple[int, ...]     # bytes a Tape keeps beyond A_{k-1}: T_k and stage k's part of A_k
    leaf_peak: tuple[int, ...]      # peak of recomputing stage k's tape (Leaf)
    backward_peak: tuple[int, ...]  # peak of group k, D_k included
    advance_cost: tuple[float, ...]
    tape_cost: tuple[float, ...]
    leaf_cost: tuple[float, ...]
    backward_cost: tuple[float, ...]


def _stage_figures(chain: Chain) -> StageFigures:
    """Memory and cost of advancing, taping, recomputing and running the backward of each stage."""
    graph, mem = chain.graph, chain.graph.mem
    n = chain.length
    cols: dict[str, list] = {name: [0] * (n + 1) for name in (
        "advance_first", "advance_next", "tape_peak", "tape_extra", "leaf_peak", "backward_peak",
        "advance_cost", "tape_cost", "leaf_cost", "backward_cost")}
    for stage in chain.stages:
        k = stage.index
        before, after = chain.boundaries[k - 1], chain.boundaries[k]
        own_after = after & frozenset(stage.forward)
        cols["advance_first"][k] = local_peak(graph, stage.advance, before, before | own_after)
        cols["advance_next"][k] = local_peak(graph, stage.advance, before, after)
        # After its last reader in a step, an instance of A_{k-1} is needed again only by a backward
        # group (later work recomputes what it needs): keep only what groups k and earlier read.
        input_for_groups = frozenset(v for v in before if chain.read_later(v, k + 1))
        cols["tape_peak"][k] = local_peak(graph, stage.taped, before,
                                          (before & after) | input_for_groups | stage.tape | own_after)
        cols["tape_extra"][k] = sum(mem[v] for v in stage.tape | own_after)
        cols["leaf_peak"][k] = local_peak(graph, stage.leaf, before, input_for_groups | stage.tape)
        read = {u for b in stage.backward for u in graph.pred_idx[b] if not graph.pinned[u]}
        frontier_read = {u for u in read if u not in before and u not in stage.tape and u not in stage.backward}
        unread_frontier = chain.frontier_bytes[k - 1] - sum(mem[u] for u in frontier_read)
        resident = before | stage.tape | frozenset(frontier_read)
        keep = frozenset(v for v in (*resident, *stage.backward) if chain.read_later(v, k))
        cols["backward_peak"][k] = unread_frontier + local_peak(graph, stage.backward, resident, keep)
        cols["advance_cost"][k] = sum(graph.cost[v] for v in stage.advance)
        cols["tape_cost"][k] = sum(graph.cost[v] for v in stage.taped)
        cols["leaf_cost"][k] = sum(graph.cost[v] for v in stage.leaf)
        cols["backward_cost"][k] = sum(graph.cost[v] for v in stage.backward)
    boundary = tuple(chain.boundary_bytes(k) for k in range(n + 1))
    frontier = (0,) + chain.frontier_bytes
    return StageFigures(boundary, frontier, **{name: tuple(values) for name, values in cols.items()})


def local_peak(graph: ComputeGraph, sequence: Sequence[int], resident: Iterable[int], keep: Iterable[int]) -> int:
    """Peak bytes of computing ``sequence`` once from ``resident``, freeing what is not kept after its last read.

    Values of ``resident`` that the sequence never reads and that are not kept are not counted.
    """
    mem, pinned = graph.mem, graph.pinned
    keep = set(keep)
    last_read: dict[int, int] = {}
    for position, v in enumerate(sequence):
        for u in graph.pred_idx[v]:
            if not pinned[u]:
                last_read[u] = position
    live = {v for v in resident if v in keep or v in last_read}
    memory = sum(mem[v] for v in live)
    peak = memory
    frees_at: dict[int, list[int]] = {}
    for v, position in last_read.items():
        if v not in keep:
            frees_at.setdefault(position, []).append(v)
    for position, v in enumerate(sequence):
        memory += mem[v]
        live.add(v)
        peak = max(peak, memory)
        for u in frees_at.get(position, ()):
            if u in live:
                live.discard(u)
                memory -= mem[u]
        if v not in keep and v not in last_read and v in live:
            live.discard(v)
            memory -= mem[v]
    return peak


# -- plans ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Leaf:
    """Recompute stage ``t``'s tape from ``A_{t-1}`` (when it has one), then run group ``t``."""

    t: int


@dataclass(frozen=True)
class Tape:
    """Compute stage ``s`` keeping its tape, run ``rest`` (stages ``s+1..t``), then group ``s``."""

    s: int
    rest: "Plan"


@dataclass(frozen=True)
class Split:
    """Advance through stages ``s..j`` keeping checkpoint ``A_j``; run ``right`` (``j+1..t``), then ``left`` (``s..j``)."""

    s: int
    j: int
    right: "Plan"
    left: "Plan"


Plan = Union[Leaf, Tape, Split]


def plan_span(plan: Plan) -> tuple[int, int]:
    """The stages ``(s, t)`` a plan covers."""
    if isinstance(plan, Leaf):
        return plan.t, plan.t
    if isinstance(plan, Tape):
        return plan.s, plan_span(plan.rest)[1]
    return plan.s, plan_span(plan.right)[1]


def plan_computes(chain: Chain, plan: Plan, solver: str) -> tuple[list[int], list[Reason]]:
    """The computations of a plan, in order, each with a reason naming its stage, segment and checkpoint.

    Rules: ``<solver>-advance`` (towards a checkpoint), ``<solver>-tape`` (a stage computed to keep
    its values for its backward group), ``<solver>-backward`` (a backward group).
    """
    computes: list[int] = []
    reasons: list[Reason] = []
    seen: set[int] = set()
    ids = chain.graph.ids

    def emit(nodes: Iterable[int], text: Callable[[str, str], str], **fields) -> None:
        for v in nodes:
            verb = "recomputed" if v in seen else "computed"
            seen.add(v)
            computes.append(v)
            reasons.append(reason(text(verb, ids[v]), **fields))

    def backward(k: int) -> None:
        emit(chain.stage(k).backward, lambda verb, v: f"backward group {k}: {v} {verb}",
             rule=f"{solver}-backward", stage=k)

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
            emit(chain.stage(k).leaf, lambda verb, v: f"{v} {verb} in stage {k} from checkpoint {start} for "
                                                      f"backward group {k}",
                 rule=f"{solver}-tape", stage=k, checkpoint=start)
            backward(k)
        elif isinstance(item, Tape):
            k = item.s
            emit(chain.stage(k).taped, lambda verb, v: f"{v} {verb} in stage {k}, kept for backward group {k}",
                 rule=f"{solver}-tape", stage=k, checkpoint=chain.boundary_label(k - 1))
            stack.append(("backward", k))
            stack.append(("plan", item.rest))
        else:
            target = chain.boundary_label(item.j)
            start = chain.boundary_label(item.s - 1)
            for k in range(item.s, item.j + 1):
                emit(chain.stage(k).advance,
                     lambda verb, v, k=k: f"{v} {verb} advancing stage {k} from checkpoint {start} to checkpoint "
                                          f"{target} (segment {item.s}..{item.j})",
                     rule=f"{solver}-advance", stage=k, segment=[item.s, item.j], checkpoint=target)
            stack.append(("plan", item.left))
            stack.append(("plan", item.right))
    return computes, reasons


def tape_chain(s: int, t: int) -> Plan:
    """Stages ``s..t`` computed once, each keeping its tape, then their groups in reverse (one Chen segment)."""
    plan: Plan = Leaf(t)
    for k in range(t - 1, s - 1, -1):
        plan = Tape(k, plan)
    return plan


# -- the dynamic program over plans (Rotor; Griewank restricted to binomial splits) -----------------

_LEAF, _TAPE, _NONE = -1, -2, -3

SplitSizes = Callable[[int], Sequence[int]]
"""``sizes(l)``: how many stages a Split of an ``l``-stage sub-chain may advance (``1 <= m < l``)."""


@dataclass(frozen=True, eq=False)
class PlanTable:
    """The best plan for every sub-chain and memory level: Rotor's dynamic program.

    ``cost[s, t, m]`` is the least cost of running groups ``t..s`` with ``A_{s-1}`` and the frontier
    ``D_t`` resident and ``m`` memory levels in all (inf: impossible):

    - Leaf: ``cost[t, t, m]`` = recompute stage ``t``'s tape + group ``t``, if both peaks fit;
    - Tape: stage ``s`` taped + ``cost[s+1, t, m - kept]`` + group ``s``;
    - Split after ``j``: advance ``s..j`` + ``cost[j+1, t, m - |A_{s-1}|]`` + ``cost[s, j, m]``.

    Sizes are rounded up to whole levels, so a plan the table accepts needs no more than it says
    (on chains, where the stage figures are exact).

    Attributes
    ----------
    chain : Chain
    slot : int
        Bytes per memory level.
    cost, choice : ndarray, shape (L + 2, L + 2, levels + 1)
        ``choice``: -1 leaf, -2 tape, ``j >= 1`` split after stage ``j``, -3 impossible.
    tape_shift, split_shift : ndarray
        Levels a Tape at ``s`` and a Split from ``s`` take from the rest of the plan.
    """

    chain: Chain
    slot: int
    cost: np.ndarray
    choice: np.ndarray
    tape_shift: np.ndarray
    split_shift: np.ndarray

    @property
    def levels(self) -> int:
        """The top memory level (the checkpoint-all peak, pinned bytes excluded)."""
        return self.cost.shape[2] - 1

    def level(self, free_bytes: int) -> int:
        """The lowest memory level covering ``free_bytes`` (budget minus pinned bytes), capped at the top.

        Rounding up may name a plan slightly over the budget; :func:`table_candidates` measures it
        and steps down until the simulator agrees.
        """
        return min(self.levels, max(-1, -(-free_bytes // self.slot)))

    def plan(self, level: int) -> Plan:
        """The best plan for the whole chain at ``level`` (which must be feasible)."""
        return self._plan(1, self.chain.length, level)

    def _plan(self, s: int, t: int, m: int) -> Plan:
        how = int(self.choice[s, t, m])
        if how == _LEAF:
            return Leaf(t)
        if how == _TAPE:
            return Tape(s, self._plan(s + 1, t, m - int(self.tape_shift[s])))
        if how == _NONE:
            raise ValueError(f"no plan for stages {s}..{t} at memory level {m}")
        return Split(s, how, self._plan(how + 1, t, m - int(self.split_shift[s])), self._plan(s, how, m))


def plan_table(chain: Chain, memory_slots: int, unit_steps: bool = False,
               split_sizes: SplitSizes | None = None) -> PlanTable:
    """Fill the dynamic program for ``chain`` (cached on the graph).

    Parameters
    ----------
    chain : Chain
    memory_slots : int
        Memory levels up to the checkpoint-all peak (minus pinned bytes). A level is a multiple of
        the greatest common divisor of the tensor sizes; when the peak is at most ``memory_slots``
        such divisors, a level is exactly one and the table is exact.
    unit_steps : bool
        Count one per stage computed (advance, tape or leaf) and nothing for backward groups,
        instead of the nodes' costs: revolve's objective, the number of forward steps.
    split_sizes : callable, optional
        Restrict Splits of an ``l``-stage sub-chain to these advance lengths (default: all).

    Returns
    -------
    PlanTable
    """
    key = f"plan-table:{id(chain)}:{memory_slots}:{unit_steps}:{getattr(split_sizes, '__qualname__', None)}"
    return chain.graph.memo(key, lambda: _fill(chain, memory_slots, unit_steps, split_sizes))


def _fill(chain: Chain, memory_slots: int, unit_steps: bool, split_sizes: SplitSizes | None) -> PlanTable:
    graph, fig, length = chain.graph, chain.figures, chain.length
    free_peak = max(1, checkpoint_all_peak(graph) - graph.pinned_bytes)
    # Levels are multiples of the sizes' common divisor: when that many levels fit in
    # memory_slots, every size is a whole number of levels and the table is exact.
    unit = math.gcd(*(graph.mem[v] for v in graph.needed_idx)) or 1
    slot = unit * max(1, -(-free_peak // (memory_slots * unit)))
    levels = -(-free_peak // slot)

    def up(x: float) -> int:
        return -(-int(x) // slot)

    def step(value: float, nodes: Sequence[int]) -> float:
        return (1.0 if nodes else 0.0) if unit_steps else value

    advance = [0.0] + [step(fig.advance_cost[k], chain.stage(k).advance) for k in range(1, length + 1)]
    taped = [0.0] + [step(fig.tape_cost[k], chain.stage(k).taped) for k in range(1, length + 1)]
    leaf = [0.0] + [step(fig.leaf_cost[k], chain.stage(k).leaf) for k in range(1, length + 1)]
    backward = [0.0] * (length + 1) if unit_steps else list(fig.backward_cost)
    advanced = np.cumsum(advance)  # advanced[j] - advanced[s - 1]: advancing stages s..j

    ms = np.arange(levels + 1)
    cost = np.full((length + 2, length + 2, levels + 1), np.inf)
    choice = np.full(cost.shape, _NONE, dtype=np.int32)
    tape_shift = np.zeros(length + 2, dtype=np.int64)
    split_shift = np.zeros(length + 2, dtype=np.int64)
    for s in range(1, length + 1):
        tape_shift[s] = up(fig.boundary[s - 1] + fig.tape_extra[s] - fig.boundary[s])
        split_shift[s] = up(fig.boundary[s - 1])

    def shifted(values: np.ndarray, by: int) -> np.ndarray:
        """``values[..., m - by]`` (inf below ``by``): a sub-plan given ``by`` fewer levels."""
        out = np.full(values.shape, np.inf)
        if by <= levels:
            out[..., by:] = values[..., : levels + 1 - by]
        return out

    for t in range(1, length + 1):
        frontier = fig.frontier[t]
        need = up(max(frontier + fig.leaf_peak[t], fig.backward_peak[t]))
        cost[t, t] = np.where(ms >= need, leaf[t] + backward[t], np.inf)
        choice[t, t] = np.where(ms >= need, _LEAF, _NONE)
        for s in range(t - 1, 0, -1):
            best = np.full(levels + 1, np.inf)
            how = np.full(levels + 1, _NONE, dtype=np.int32)
            if chain.stage(s).tape:
                need = up(max(frontier + fig.tape_peak[s], fig.backward_peak[s]))
                value = taped[s] + shifted(cost[s + 1, t], int(tape_shift[s])) + backward[s]
                best = np.where(ms >= need, value, np.inf)
                how = np.where(np.isfinite(best), _TAPE, how)
            sizes = range(1, t - s + 1) if split_sizes is None else split_sizes(t - s + 1)
            js = np.array(sorted({s + m - 1 for m in sizes if 1 <= m <= t - s}), dtype=np.int64)
            if js.size:
                # advancing s..j: A_{s-1} stays, each later stage frees its input after use
                peaks = np.maximum.accumulate([fig.advance_first[s]] + [fig.boundary[s - 1] + fig.advance_next[k]
                                                                        for k in range(s + 1, t)])
                needs = np.array([up(frontier + peaks[j - s]) for j in js])
                values = ((advanced[js] - advanced[s - 1])[:, None]
                          + shifted(cost[js + 1, t], int(split_shift[s])) + cost[s, js])
                values = np.where(ms[None, :] >= needs[:, None], values, np.inf)
                pick = np.argmin(values, axis=0)
                value = values[pick, ms]
                better = value < best
                best, how = np.where(better, value, best), np.where(better, js[pick], how)
            cost[s, t], choice[s, t] = best, how
    return PlanTable(chain, slot, cost, choice, tape_shift, split_shift)


def table_candidates(graph: ComputeGraph, table: PlanTable, budget: int, solver: str, **info) -> Iterator[Candidate]:
    """Measured plans of the table: the one at the budget's level, then lower levels while the simulator disagrees.

    Below the table's smallest feasible level, its smallest plan is still measured: the figures
    are conservative off chains, and the plan may fit after all.
    """
    top = table.cost[1, table.chain.length]
    feasible = np.flatnonzero(np.isfinite(top))
    if feasible.size == 0:
        return
    lowest = int(feasible[0])
    level = max(lowest, table.level(budget - graph.pinned_bytes))
    previous = None
    for m in range(level, lowest - 1, -1):
        if not np.isfinite(top[m]):
            continue
        plan = table.plan(m)
        if plan == previous:
            continue
        previous = plan
        candidate = measure_plan(table.chain, plan, solver, memory_level=m, slot_bytes=table.slot,
                                 predicted=float(top[m]), stages=table.chain.length,
                                 segmentation=table.chain.segmentation, **info)
        yield candidate
        if candidate.peak <= budget:
            return


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


def checkpoint_all_if_it_fits(graph: ComputeGraph, budget: int, solver: str) -> Schedule | None:
    """The checkpoint-all schedule when the budget admits it: a chain method then has nothing to recompute."""
    if checkpoint_all_peak(graph) > budget:
        return None
    ops, reasons = checkpoint_all_ops(graph)
    note = reason(f"the budget admits checkpoint-all: {solver} keeps every tensor and recomputes nothing",
                  rule=f"{solver}-checkpoint-all")
    reasons = [note if r is not None and r.get("rule") == "topological-order" else r for r in reasons]
    return Schedule.from_ops(ops, reasons, solver_info={"strategy": "checkpoint-all"})


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
