"""A graph seen as a chain of links: what chain methods (Chen, Griewank, Rotor) need to know about it.

Chain methods were designed for a sequence of layers: forward steps ``x_{k-1} -> x_k`` and a
backward pass that needs the layers' values in reverse order. This module turns any valid graph
into that shape and measures it; :mod:`.plans` builds schedules on it.

1. *Forward and backward.* The backward part is every needed node of kind ``backward`` and every
   node that depends on one; the forward part is the rest (a graph with no backward node is all
   forward). Pinned nodes are outside both: always resident.
2. *Boundaries.* Along the forward part's topological order, the gap after position ``g`` is
   crossed by the *live set* ``A_g``: forward values computed at or before ``g`` and read by a
   forward node after it. A gap crossed by at most the node just before it is a cut vertex of the
   order, an articulation point that splits the forward graph into a before and an after (the
   candidates Checkmate uses for Chen's baselines). In the *linearised* graph every gap is a
   boundary and keeps its whole live set (what Checkmate does where there are too few
   articulation points); :func:`chains` gives solvers both.
3. *Links.* Chosen boundaries cut the forward order into links ``1..L``; ``A_k`` is the live
   set after link ``k`` (``A_0`` is empty: only pinned inputs precede link 1).
4. *Backward groups.* Each backward node joins the latest group at which all it reads is at hand:
   a value of link ``k`` is at hand in groups ``<= k`` (as part of link ``k``'s tape, or kept from
   it) and in the groups of the later links whose input boundary it crosses (a skip connection);
   a backward node also runs no later than the backward nodes it reads. Groups run from ``L`` down
   to ``1``. ``T_k``, the *tape* of link ``k``, is what groups ``<= k`` read from link ``k`` (plus
   link ``k``'s forward outputs); ``D_k``, the *frontier*, is what is resident on entry to group
   ``k`` besides ``A_{k-1}`` and ``T_k`` (gradients of later groups and tapes of later links that
   earlier groups still read).
5. *Figures.* :class:`LinkFigures` gives the bytes and costs of each step a plan can take on a
   link (advance, tape, recompute, backward), measured by :func:`local_peak`.

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
from typing import Iterable, Sequence

from ...graph import ComputeGraph, node_labels
from ...schedule import needed_topological_order

SEGMENTATIONS = ("auto", "articulation", "linear")
"""How boundaries are found: at cut vertices, at every gap, or both tried ("auto": see :func:`chains`)."""


# -- the chain --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    """One link of a chain (node indices of the graph).

    Attributes
    ----------
    index : int
        1-based position in the chain.
    forward : tuple of int
        The link's forward nodes, in topological order.
    advance : tuple of int
        The forward nodes needed to produce the checkpoint ``A_k`` (an advance computes only these).
    leaf : tuple of int
        The forward nodes needed to produce the tape ``T_k``.
    taped : tuple of int
        The forward nodes needed for both (what :class:`Tape` computes).
    tape : frozenset of int
        ``T_k``: values of this link that backward groups ``<= k`` read, and forward outputs.
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
    """A graph cut into links; see the module docstring.

    Attributes
    ----------
    graph : ComputeGraph
    segmentation : str
        "articulation" (boundaries are cut vertices) or "linear" (live sets of a linearisation).
    links : tuple of Link
        Links ``1..L`` (``links[k - 1]`` is link ``k``).
    boundaries : tuple of frozenset of int
        ``A_0..A_L``: the values kept at each boundary (``A_0`` and ``A_L`` are empty).
    frontier_bytes : tuple of int
        ``|D_k|`` for ``k = 1..L`` (index ``k - 1``).
    """

    graph: ComputeGraph
    segmentation: str
    links: tuple[Link, ...]
    boundaries: tuple[frozenset[int], ...]
    frontier_bytes: tuple[int, ...]
    _minread: dict[int, int]

    @property
    def length(self) -> int:
        """L, the number of links."""
        return len(self.links)

    def link(self, k: int) -> Link:
        """Link ``k`` (1-based)."""
        return self.links[k - 1]

    def boundary_bytes(self, k: int) -> int:
        """``|A_k|`` in bytes."""
        mem = self.graph.mem
        return sum(mem[v] for v in self.boundaries[k])

    def boundary_label(self, k: int) -> str:
        """The checkpoint after link ``k``, named by its tensors' labels (at most three)."""
        return self._labels[k]

    @cached_property
    def _labels(self) -> tuple[str, ...]:
        ids, node_names = self.graph.ids, node_labels(self.graph)
        labels = []
        for boundary in self.boundaries:
            names = sorted(node_names[ids[v]] for v in boundary)
            more = f", +{len(names) - 3} more" if len(names) > 3 else ""
            labels.append("{" + ", ".join(names[:3]) + more + "}" if names else "(the pinned inputs)")
        return tuple(labels)

    def read_later(self, value: int, group: int) -> bool:
        """Whether a backward group before ``group`` (executed after it) still reads ``value``."""
        return self._minread.get(value, math.inf) < group

    @cached_property
    def figures(self) -> "LinkFigures":
        """Memory and cost of each step of a plan on this chain (see :class:`LinkFigures`)."""
        return _link_figures(self)


def chains(graph: ComputeGraph, segmentation: str, max_links: int | None = None,
           merge_tail: bool = False) -> list[Chain]:
    """The chains a solver should try: one per segmentation, both for "auto" (when they differ).

    Neither segmentation is better on every graph: cut vertices give few coarse links with small
    boundaries, the linearisation many fine links whose boundaries carry the skip connections.
    Chain solvers measure a schedule on each and keep the cheapest within the budget.

    Raises
    ------
    ValueError
        For a segmentation that is not one of :data:`SEGMENTATIONS`.
    """
    if segmentation not in SEGMENTATIONS:
        raise ValueError(f"segmentation must be one of {', '.join(SEGMENTATIONS)}, got {segmentation!r}")
    names = ("articulation", "linear") if segmentation == "auto" else (segmentation,)
    out: list[Chain] = []
    for name in names:
        chain = linear_chain(graph, name, max_links, merge_tail)
        if all(chain.boundaries != other.boundaries for other in out):
            out.append(chain)
    return out


def linear_chain(graph: ComputeGraph, segmentation: str = "articulation", max_links: int | None = None,
                 merge_tail: bool = False) -> Chain:
    """The graph as a chain of links (cached on the graph).

    Parameters
    ----------
    graph : ComputeGraph
    segmentation : {"articulation", "linear"}
        Boundaries at cut vertices of the forward order ("articulation"), or at every gap, each
        keeping its whole live set ("linear").
    max_links : int, optional
        Merge links until there are at most this many, keeping in each stretch of equal forward
        cost the boundary with the smallest live set.
    merge_tail : bool
        Merge the links after the last one a backward group needs (the loss, a forward-only tail)
        into it. Revolve wants this: those links are part of the turn from forward to backward,
        not steps to reverse. Rotor does not: finer links give it more to choose from.

    Returns
    -------
    Chain
    """
    if segmentation not in SEGMENTATIONS[1:]:
        raise ValueError(f"segmentation must be 'articulation' or 'linear', got {segmentation!r}")
    return graph.memo(f"chain:{segmentation}:{max_links}:{merge_tail}",
                      lambda: _build_chain(graph, segmentation, max_links, merge_tail))


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


def _build_chain(graph: ComputeGraph, segmentation: str, max_links: int | None, merge_tail: bool) -> Chain:
    forward, backward = _forward_backward(graph)
    position = {v: p for p, v in enumerate(forward)}
    in_forward = position.__contains__
    last_forward_reader = [-1] * len(forward)
    for p, v in enumerate(forward):
        for u in graph.pred_idx[v]:
            if in_forward(u):
                last_forward_reader[position[u]] = p
    gaps, cut_gaps, live_bytes = _gaps(graph, forward, last_forward_reader)
    candidates = cut_gaps if segmentation == "articulation" else gaps
    chosen = _choose_boundaries(graph, forward, candidates, live_bytes, max_links)
    link_of, boundaries = _links_of(forward, last_forward_reader, chosen)
    group = _backward_groups(graph, backward, link_of, _available_until(forward, last_forward_reader, link_of))
    last_needed = max(group.values(), default=1)
    if merge_tail and last_needed < len(chosen) + 1:
        chosen = chosen[: last_needed - 1]
        link_of, boundaries = _links_of(forward, last_forward_reader, chosen)
    length = len(chosen) + 1
    starts = [0] + [g + 1 for g in chosen]
    ends = [g + 1 for g in chosen] + [len(forward)]
    minread: dict[int, int] = {}
    for b in backward:
        for u in graph.pred_idx[b]:
            if not graph.pinned[u]:
                minread[u] = min(minread.get(u, math.inf), group[b])
    outputs = set(graph.output_idx)
    links = []
    for k, (a, b) in enumerate(zip(starts, ends), start=1):
        nodes = forward[a:b]
        tape = frozenset(v for v in nodes if minread.get(v, math.inf) <= k or v in outputs)
        checkpoint = boundaries[k] & frozenset(nodes)
        links.append(Link(k, tuple(nodes), _within_link_ancestors(graph, nodes, checkpoint),
                            _within_link_ancestors(graph, nodes, tape),
                            _within_link_ancestors(graph, nodes, tape | checkpoint), tape,
                            tuple(v for v in backward if group[v] == k)))
    frontier = _frontier_bytes(graph, length, minread, link_of, group)
    return Chain(graph, segmentation, tuple(links), tuple(boundaries), frontier, minread)


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


def _links_of(forward: Sequence[int], last_forward_reader: Sequence[int], chosen: Sequence[int]
               ) -> tuple[dict[int, int], list[frozenset[int]]]:
    """Link of each forward node, and the boundaries ``A_0..A_L``, for boundaries after the ``chosen`` gaps."""
    link_of: dict[int, int] = {}
    ends = [g + 1 for g in chosen] + [len(forward)]
    start = 0
    for k, end in enumerate(ends, start=1):
        for v in forward[start:end]:
            link_of[v] = k
        start = end
    boundaries = [frozenset()] + [_live_set(forward, last_forward_reader, g) for g in chosen] + [frozenset()]
    return link_of, boundaries


def _choose_boundaries(graph: ComputeGraph, forward: Sequence[int], candidates: Sequence[int],
                       live_bytes: Sequence[int], max_links: int | None) -> list[int]:
    """At most ``max_links - 1`` candidate gaps: in each stretch of equal forward cost, the smallest live set."""
    if max_links is None or len(candidates) + 1 <= max_links:
        return list(candidates)
    if max_links <= 1:
        return []
    weights = [graph.cost[v] for v in forward]
    if not any(weights):
        weights = [1.0] * len(forward)
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    windows = max_links - 1
    best: dict[int, int] = {}
    for g in candidates:
        window = min(windows - 1, int(cumulative[g] / total * windows)) if total > 0 else 0
        if window not in best or live_bytes[g] < live_bytes[best[window]]:
            best[window] = g
    return sorted(best.values())


def _backward_groups(graph: ComputeGraph, backward: Sequence[int], link_of: dict[int, int],
                     available_until: dict[int, int]) -> dict[int, int]:
    """Group of every backward node: the latest link at which everything it reads is still at hand.

    A forward value of link ``j`` is at hand in group ``k <= j`` (inside link ``j``, or kept from
    it), and up to the last link whose forward nodes read it (it is in the boundary before each
    of them): ``k <= available_until[u]``. A backward node also runs no later than the backward
    nodes it reads. A node constrained by neither (it reads only pinned inputs) joins the latest
    group any other node has, so that it runs as soon as the backward pass starts.
    """
    wanted: dict[int, int | None] = {}
    for b in backward:
        constraints = [wanted[u] for u in graph.pred_idx[b] if u in wanted and wanted[u] is not None]
        constraints += [available_until[u] for u in graph.pred_idx[b] if u in link_of]
        wanted[b] = min(constraints) if constraints else None
    latest = max((g for g in wanted.values() if g is not None), default=1)
    return {b: latest if g is None else g for b, g in wanted.items()}


def _available_until(forward: Sequence[int], last_forward_reader: Sequence[int], link_of: dict[int, int]
                     ) -> dict[int, int]:
    """For each forward value: the last link that has it at hand (its own, or that of its last forward reader)."""
    return {v: link_of[forward[max(p, last_forward_reader[p])]] for p, v in enumerate(forward)}


def _within_link_ancestors(graph: ComputeGraph, nodes: Sequence[int], targets: frozenset[int]) -> tuple[int, ...]:
    """The link's nodes that ``targets`` (nodes of the link) depend on within it, targets included."""
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


def _frontier_bytes(graph: ComputeGraph, length: int, minread: dict[int, int], link_of: dict[int, int],
                    group: dict[int, int]) -> tuple[int, ...]:
    """``|D_k|``: a value made by link/group ``j`` and read by group ``r < j`` is in ``D_r .. D_{j-1}``."""
    delta = [0] * (length + 2)
    for v, r in minread.items():
        made = group.get(v, link_of.get(v))
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
class LinkFigures:
    """Bytes and costs of the steps of a chain, all arrays indexed by link ``k`` (index 0 unused).

    Peaks are absolute local peaks of one step (:func:`local_peak`), counting what is resident when
    it starts; the frontier ``D_k`` is added by the caller where it is resident, except in
    ``backward_peak``, which includes it.
    """

    boundary: tuple[int, ...]      # |A_k|, k = 0..L
    frontier: tuple[int, ...]      # |D_k|
    advance_first: tuple[int, ...]  # peak of advancing link k with A_{k-1} kept
    advance_next: tuple[int, ...]   # peak of advancing link k, A_{k-1} freed after its last read
    tape_peak: tuple[int, ...]      # peak of computing link k keeping its tape (Tape)
    tape_extra: tuple[int, ...]     # bytes a Tape keeps beyond A_{k-1}: T_k and link k's part of A_k
    leaf_peak: tuple[int, ...]      # peak of recomputing link k's tape (Leaf)
    backward_peak: tuple[int, ...]  # peak of group k, D_k included
    advance_cost: tuple[float, ...]
    tape_cost: tuple[float, ...]
    leaf_cost: tuple[float, ...]
    backward_cost: tuple[float, ...]


def _link_figures(chain: Chain) -> LinkFigures:
    """Memory and cost of advancing, taping, recomputing and running the backward of each link."""
    graph, mem = chain.graph, chain.graph.mem
    n = chain.length
    cols: dict[str, list] = {name: [0] * (n + 1) for name in (
        "advance_first", "advance_next", "tape_peak", "tape_extra", "leaf_peak", "backward_peak",
        "advance_cost", "tape_cost", "leaf_cost", "backward_cost")}
    for link in chain.links:
        k = link.index
        before, after = chain.boundaries[k - 1], chain.boundaries[k]
        own_after = after & frozenset(link.forward)
        cols["advance_first"][k] = local_peak(graph, link.advance, before, before | own_after)
        cols["advance_next"][k] = local_peak(graph, link.advance, before, after)
        # After its last reader in a step, an instance of A_{k-1} is needed again only by a backward
        # group (later work recomputes what it needs): keep only what groups k and earlier read.
        input_for_groups = frozenset(v for v in before if chain.read_later(v, k + 1))
        cols["tape_peak"][k] = local_peak(graph, link.taped, before,
                                          (before & after) | input_for_groups | link.tape | own_after)
        cols["tape_extra"][k] = sum(mem[v] for v in link.tape | own_after)
        cols["leaf_peak"][k] = local_peak(graph, link.leaf, before, input_for_groups | link.tape)
        read = {u for b in link.backward for u in graph.pred_idx[b] if not graph.pinned[u]}
        frontier_read = {u for u in read if u not in before and u not in link.tape and u not in link.backward}
        unread_frontier = chain.frontier_bytes[k - 1] - sum(mem[u] for u in frontier_read)
        resident = before | link.tape | frozenset(frontier_read)
        keep = frozenset(v for v in (*resident, *link.backward) if chain.read_later(v, k))
        cols["backward_peak"][k] = unread_frontier + local_peak(graph, link.backward, resident, keep)
        cols["advance_cost"][k] = sum(graph.cost[v] for v in link.advance)
        cols["tape_cost"][k] = sum(graph.cost[v] for v in link.taped)
        cols["leaf_cost"][k] = sum(graph.cost[v] for v in link.leaf)
        cols["backward_cost"][k] = sum(graph.cost[v] for v in link.backward)
    boundary = tuple(chain.boundary_bytes(k) for k in range(n + 1))
    frontier = (0,) + chain.frontier_bytes
    return LinkFigures(boundary, frontier, **{name: tuple(values) for name, values in cols.items()})


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
