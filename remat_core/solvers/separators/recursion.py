"""The recursion the treewidth and pathwidth solvers share: rematerialize over a separator hierarchy.

A :class:`Hierarchy` is a rooted tree of vertex sets ("bags") with the separation property of a
decomposition's separator tree: the vertices below a child are cut off from the rest of the graph
by the bags above it. ``remat(X, keep, touch)`` makes ``keep`` resident and computes every vertex of
``touch`` (outputs) at least once:

1. S = the not-resident ancestors of ``keep`` and ``touch`` reached through not-resident vertices;
   target = S ∩ bag(X), in topological order.
2. Leaf (or, when budget-aware, a subproblem whose checkpoint-all footprint fits the memory left):
   compute S in topological order, freeing each vertex after its last reader in S (``keep`` stays).
3. Otherwise, for each v in target: for each child C, ``remat(C, preds(v) ∩ below(C))``; compute
   v; free the predecessors those calls brought in. Then, for each child C,
   ``remat(C, keep ∩ below(C), touch ∩ below(C))``. Then free target minus ``keep``.

The top call touches the graph's outputs and keeps nothing. Pinned nodes are always resident and
never requested. See ``docs/algorithms.md`` for the memory and compute bounds of the pure schedule
(:func:`pure_bounds`) and their proofs.

Reasons are recorded as compact tuples while the recursion runs and turned into the foundation's
reason objects at the end (:func:`materialize_reasons`): compute ops get ``rule``
(``separator-request``, ``separator-leaf``, ``fits-budget``), ``bag`` (the separator bag whose
request opened the frame), ``consumer`` (the vertex whose inputs were requested), ``depth``,
``occurrence`` (1: first computation) and ``frame`` (the bag of the frame that computed it) or
``segment``; frees get ``rule`` (``request-served``, ``frame-done``, ``frame-release``,
``last-use``), ``bag`` and ``consumer``. ARCHITECTURE.md documents the fields for the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...decompose import Decomposition, SeparatorTree, separator_tree
from ...errors import InfeasibleBudget, SolverLimitExceeded
from ...graph import ComputeGraph, node_labels
from ...schedule import (COMPUTE, FREE, PassReason, Schedule, checkpoint_all_cost, checkpoint_all_ops,
                         checkpoint_all_peak, evict_to_budget_indexed, measure_indexed, reason, tighten_indexed)
from ..deadline import Deadline

IndexedOp = tuple[str, int]

DEFAULT_MAX_COMPUTES = 2_000_000
"""Compute ops the recursion may emit before it stops with :class:`SolverLimitExceeded`."""

PURE_REUSE_COMPUTES_PER_NODE = 40
"""A budget-aware run also replays the pure recursion when it is at most this many computes per node."""


@dataclass(frozen=True)
class Hierarchy:
    """A separator hierarchy over graph node indices.

    Attributes
    ----------
    bags : tuple of tuple of int
        Per hierarchy node, the graph indices in its bag (never pinned).
    children : tuple of tuple of int
        Per node, its children (in the order the recursion visits them).
    root : int
    names : tuple of Mapping
        Per node, the reason fields that name it (``{"frame": 7}``, ``{"segment": 2}``).
    request_bags : tuple of (int or Mapping)
        Per node, the decomposition bag id that its requests are reported under: an int, or a
        mapping from consumer index to bag id (a root made of several cut bags).
    """

    bags: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    root: int
    names: tuple[Mapping[str, Any], ...]
    request_bags: tuple[Any, ...]
    depth: tuple[int, ...] = field(init=False)
    chain: tuple[tuple[int, ...], ...] = field(init=False)
    bag_sets: tuple[frozenset[int], ...] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.bags)
        depth = [0] * n
        chain: list[tuple[int, ...]] = [()] * n
        chain[self.root] = (self.root,)
        stack = [self.root]
        while stack:
            x = stack.pop()
            for c in self.children[x]:
                depth[c] = depth[x] + 1
                chain[c] = chain[x] + (c,)
                stack.append(c)
        object.__setattr__(self, "depth", tuple(depth))
        object.__setattr__(self, "chain", tuple(chain))
        object.__setattr__(self, "bag_sets", tuple(frozenset(b) for b in self.bags))

    @property
    def height(self) -> int:
        """The largest depth (0: the root alone)."""
        return max(self.depth)

    def homes(self, size: int) -> list[int]:
        """Per graph index, the highest node whose bag holds it (-1 where none does)."""
        home = [-1] * size
        order = sorted(range(len(self.bags)), key=self.depth.__getitem__)
        for x in order:
            for v in self.bags[x]:
                if home[v] < 0:
                    home[v] = x
        return home

    def request_bag(self, x: int, consumer: int | None) -> int | None:
        """The decomposition bag that node x's requests for ``consumer`` are reported under."""
        label = self.request_bags[x]
        if isinstance(label, Mapping):
            return label.get(consumer) if consumer is not None else None
        return label


@dataclass(frozen=True)
class PureBounds:
    """What the pure recursion (no budget awareness) is proven to stay within on one graph.

    Attributes
    ----------
    memory : int
        Bytes: pinned + the largest, over root-to-node paths, of the sum of ``mem(bag) + m_R`` over
        the path's inner nodes plus ``mem(bag)`` of its last node, where ``m_R`` is the largest
        input set ``mem(preds(v))`` of a needed vertex.
    calls : tuple of int
        Per hierarchy node, the most frames that can open at it.
    computes : dict of int to int
        Per needed vertex, the most times it can be computed: ``calls[home(v)]``.
    """

    memory: int
    calls: tuple[int, ...]
    computes: dict[int, int]


def pure_bounds(graph: ComputeGraph, hierarchy: Hierarchy) -> PureBounds:
    """The memory and per-vertex compute bounds of the pure recursion on ``graph`` (see the module notes).

    Notes
    -----
    ``calls[root] = 1`` and ``calls[C] = calls[X] * (a_C + 1)`` for a child C of X, where ``a_C`` is
    the number of vertices of bag(X) with an input whose home lies below C: each such vertex opens
    at most one frame at C per frame of X (phase 1), and phase 2 opens one more.
    """
    mem, pinned = graph.mem, graph.pinned
    needed = graph.needed_idx
    request = max((sum(mem[p] for p in graph.pred_idx[v] if not pinned[p]) for v in needed), default=0)
    bag_mem = [sum(mem[v] for v in bag) for bag in hierarchy.bags]
    home = hierarchy.homes(len(graph))
    calls = [0] * len(hierarchy.bags)
    calls[hierarchy.root] = 1
    worst = 0
    stack = [(hierarchy.root, 0)]
    while stack:
        x, above = stack.pop()
        kids = hierarchy.children[x]
        if not kids:
            worst = max(worst, above + bag_mem[x])
            continue
        for c in kids:
            senders = sum(1 for v in hierarchy.bags[x]
                          if any(not pinned[p] and home[p] >= 0 and c in hierarchy.chain[home[p]]
                                 for p in graph.pred_idx[v]))
            calls[c] = calls[x] * (senders + 1)
            stack.append((c, above + bag_mem[x] + request))
    computes = {v: calls[home[v]] for v in needed}
    return PureBounds(graph.pinned_bytes + worst, tuple(calls), computes)


@dataclass
class CallRecord:
    """One call ``remat(X, keep, touch)`` as it opened (graph indices), kept when a run records its calls.

    Attributes
    ----------
    parent : int or None
        The call that opened it (its position in the record), None for the top call.
    node : int
        The hierarchy node X (a separator-tree bag for TW-Remat and PW-Remat).
    depth : int
    keep, touch : tuple of int
        What the caller asked for: tensors to leave resident, outputs to compute.
    closure : tuple of int
        S, in topological order: every tensor the call (with the calls it opens) computes.
    rule : str
        ``separator-request`` (recurses into its children), ``separator-leaf`` or ``fits-budget``.
    requester : int or None
        The separator bag whose request opened it (None: the top call).
    consumer : int or None
        The tensor whose inputs it brings in (None: phase 2, or the top call).
    first_op, end_op : int
        Its ops (and those of the calls it opens) are ``ops[first_op:end_op]``.
    """

    parent: int | None
    node: int
    depth: int
    keep: tuple[int, ...]
    touch: tuple[int, ...]
    closure: tuple[int, ...]
    rule: str
    requester: int | None
    consumer: int | None
    first_op: int
    end_op: int = -1


class SeparatorRemat:
    """One run of the recursion over a hierarchy, emitting ``(action, index)`` ops and compact reasons.

    Parameters
    ----------
    graph : ComputeGraph
    hierarchy : Hierarchy
    budget : int or None
        With a budget, a subproblem whose checkpoint-all footprint fits the memory left is scheduled
        without recomputation (rule ``fits-budget``); None runs the pure recursion.
    max_computes : int
        Stop with :class:`SolverLimitExceeded` past this many compute ops.
    solver : str
        Named in that error.
    deadline : Deadline, optional
        Stop with :class:`SolverLimitExceeded` once it passes (checked every 1,024 compute ops).
    record : bool
        Keep every call (:attr:`calls`, a :class:`CallRecord` each) and which call emitted each op
        (:attr:`op_calls`): the Learn page's walkthrough. Off for solving.
    """

    def __init__(self, graph: ComputeGraph, hierarchy: Hierarchy, budget: int | None,
                 max_computes: int = DEFAULT_MAX_COMPUTES, solver: str = "", deadline: Deadline | None = None,
                 record: bool = False):
        self.graph = graph
        self.h = hierarchy
        self.budget = budget
        self.max_computes = max_computes
        self.solver = solver
        self.deadline = deadline
        n = len(graph)
        self.resident = bytearray(1 if p else 0 for p in graph.pinned)
        self.computed = bytearray(n)
        self.memory = graph.pinned_bytes
        self.home = hierarchy.homes(n)
        self.topo_position = [0] * n
        for position, v in enumerate(graph.topo_idx):
            self.topo_position[v] = position
        self.ops: list[IndexedOp] = []
        self.reasons: list[tuple] = []
        self.computes = 0
        self.calls: list[CallRecord] | None = [] if record else None
        self.op_calls: list[int] = []
        self._open: list[int] = []

    def run(self) -> tuple[list[IndexedOp], list[tuple]]:
        """The whole schedule: the top call touches every output."""
        self._remat(self.h.root, [], list(self.graph.output_idx), None, None)
        return self.ops, self.reasons

    # -- the recursion ------------------------------------------------------------------------------

    def _remat(self, x: int, keep: list[int], touch: list[int], requester: int | None,
               consumer: int | None) -> None:
        """One call: steps 1-3 of the module notes."""
        resident, computed = self.resident, self.computed
        keep = [v for v in keep if not resident[v]]
        touch = [v for v in touch if not computed[v]]
        if not keep and not touch:
            return
        closure = self._closure(keep + touch)
        h = self.h
        leaf = not h.children[x]
        rule = "separator-request"
        plan: list[tuple[str, int, int | None]] = []
        footprint = 0
        if leaf or self.budget is not None:
            plan, footprint = self._plan(closure, set(keep))
            fits = self.budget is not None and self.memory + footprint <= self.budget
            if leaf or fits:
                rule = "fits-budget" if fits else "separator-leaf"
        if self.calls is not None:
            self._open_call(x, keep, touch, closure, rule, requester, consumer)
        if rule == "separator-request":
            self._recurse(x, keep, touch, closure, requester, consumer)
        else:
            self._emit_plan(plan, (rule, requester, consumer, h.depth[x], x, footprint if rule == "fits-budget"
                                   else None))
        if self.calls is not None:
            self.calls[self._open.pop()].end_op = len(self.ops)

    def _open_call(self, x: int, keep: list[int], touch: list[int], closure: list[int], rule: str,
                   requester: int | None, consumer: int | None) -> None:
        assert self.calls is not None
        self.calls.append(CallRecord(self._open[-1] if self._open else None, x, self.h.depth[x], tuple(keep),
                                     tuple(touch), tuple(closure), rule, requester, consumer, len(self.ops)))
        self._open.append(len(self.calls) - 1)

    def _recurse(self, x: int, keep: list[int], touch: list[int], closure: list[int], requester: int | None,
                 consumer: int | None) -> None:
        """Step 3 of the module notes: phase 1 over the bag's targets, phase 2 into the children."""
        h = self.h
        resident, computed = self.resident, self.computed
        bag = h.bag_sets[x]
        target = [v for v in closure if v in bag]
        depth = h.depth[x]
        pinned, preds = self.graph.pinned, self.graph.pred_idx
        kept = set(keep)
        keep_by_child = self._group(x, [v for v in keep if v not in bag])
        touch_by_child = self._group(x, [v for v in touch if v not in bag])
        release = self._release_points(x, closure, target, kept, keep_by_child.keys() | touch_by_child.keys())
        for i, v in enumerate(target):
            asking = h.request_bag(x, v)
            groups: dict[int, list[int]] = {}
            for p in preds[v]:
                if not pinned[p] and not resident[p]:
                    groups.setdefault(self._child_toward(x, p), []).append(p)
            brought: list[int] = []
            for c in h.children[x]:
                if c in groups:
                    self._remat(c, groups[c], [], asking, v)
                    brought += groups[c]
            self._compute(v, ("separator-request", requester, consumer, depth, x, None))
            for p in brought:
                self._free(p, ("request-served", asking, v))
            self._release_targets(x, release.get(i, ()), v)
        passing = h.request_bag(x, consumer)
        for j, c in enumerate(h.children[x]):
            if c in keep_by_child or c in touch_by_child:
                self._remat(c, keep_by_child.get(c, []), [v for v in touch_by_child.get(c, []) if not computed[v]],
                            passing, consumer)
            self._release_targets(x, release.get(len(target) + j, ()), None)
        self._release_targets(x, release.get(None, ()), None)

    def _release_points(self, x: int, closure: list[int], target: list[int], kept: set[int],
                        phase_two: set[int]) -> dict[int | None, list[int]]:
        """When each target vertex of frame x may be freed: after which event (None: at the frame's end).

        Events are ``i`` (phase 1, target[i]) and ``len(target) + j`` (phase 2, the j-th child). Pure:
        every target waits for the frame's end, as the paper states it. Budget-aware: a target goes
        right after the last event that can read it: the last target reading it, or the last call
        into a child whose subtree holds a reader (calls predicted from the frame's start, a superset
        of the calls that happen). Only members of the closure are ever computed in the frame, so no
        later event needs it, and the ops are those of the paper's schedule with frees moved earlier.
        """
        if self.budget is None:
            return {None: [v for v in target if v not in kept]}
        h = self.h
        bag = h.bag_sets[x]
        position = {v: i for i, v in enumerate(target)}
        children = h.children[x]
        last_call = {c: len(target) + j for j, c in enumerate(children) if c in phase_two}
        pinned, preds, resident = self.graph.pinned, self.graph.pred_idx, self.resident
        for i in range(len(target) - 1, -1, -1):
            for p in preds[target[i]]:
                if not pinned[p] and not resident[p] and p not in bag:
                    last_call.setdefault(self._child_toward(x, p), i)
        inside = set(closure)
        release: dict[int | None, list[int]] = {}
        for i, t in enumerate(target):
            if t in kept:
                continue
            last = i
            for s in self.graph.succ_idx[t]:
                if s in inside:
                    last = max(last, position[s] if s in bag else last_call.get(self._child_toward(x, s), i))
            release.setdefault(last, []).append(t)
        return release

    def _release_targets(self, x: int, vertices: Sequence[int], reader: int | None) -> None:
        rule = "frame-done" if self.budget is None else "frame-release"
        for v in vertices:
            if self.resident[v]:
                self._free(v, (rule, self.h.request_bag(x, v), reader))

    def _child_toward(self, x: int, v: int) -> int:
        """The child of x whose subtree holds v's home."""
        chain = self.h.chain[self.home[v]]
        depth = self.h.depth[x]
        if len(chain) <= depth + 1 or chain[depth] != x:
            raise AssertionError(f"vertex '{self.graph.ids[v]}' is needed below separator node {x} but its home "
                                 f"is not below it: the hierarchy does not separate the graph")
        return chain[depth + 1]

    def _group(self, x: int, vertices: Sequence[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for v in vertices:
            groups.setdefault(self._child_toward(x, v), []).append(v)
        return groups

    # -- building blocks ----------------------------------------------------------------------------

    def _closure(self, seeds: Sequence[int]) -> list[int]:
        """Not-resident, non-pinned ancestors of ``seeds`` (seeds included) through not-resident nodes."""
        resident, pinned, preds = self.resident, self.graph.pinned, self.graph.pred_idx
        seen = set(seeds)
        stack = list(seen)
        while stack:
            v = stack.pop()
            for p in preds[v]:
                if p not in seen and not resident[p] and not pinned[p]:
                    seen.add(p)
                    stack.append(p)
        return sorted(seen, key=self.topo_position.__getitem__)

    def _plan(self, closure: list[int], keep: set[int]) -> tuple[list[tuple[str, int, int | None]], int]:
        """Checkpoint-all over ``closure``: ops (with the reader behind each free) and the peak extra bytes."""
        preds, mem = self.graph.pred_idx, self.graph.mem
        inside = set(closure)
        last: dict[int, int] = {}
        for v in closure:
            for p in preds[v]:
                if p in inside:
                    last[p] = v
        plan: list[tuple[str, int, int | None]] = []
        live = peak = 0
        for v in closure:
            plan.append((COMPUTE, v, None))
            live += mem[v]
            peak = max(peak, live)
            for p in preds[v]:
                if last.get(p) == v and p not in keep:
                    plan.append((FREE, p, v))
                    live -= mem[p]
            if v not in last and v not in keep:
                plan.append((FREE, v, None))
                live -= mem[v]
        return plan, peak

    def _emit_plan(self, plan: list[tuple[str, int, int | None]], why: tuple) -> None:
        asking = why[1]
        for action, v, reader in plan:
            if action == COMPUTE:
                self._compute(v, why)
            else:
                self._free(v, ("last-use", asking, reader))

    def _compute(self, v: int, why: tuple) -> None:
        self.computes += 1
        if self.deadline is not None and self.computes % 1024 == 0 and self.deadline.expired():
            raise SolverLimitExceeded(f"solver '{self.solver}': the separator recursion stopped at the time limit "
                                      f"after {self.computes:,} compute ops")
        if self.computes > self.max_computes:
            raise SolverLimitExceeded(f"solver '{self.solver}': the separator recursion passed {self.max_computes:,} "
                                      f"compute ops on graph '{self.graph.name}' ({len(self.graph)} nodes, separator "
                                      f"height {self.h.height}, widest bag {max(map(len, self.h.bags))}); its "
                                      f"recomputation grows like n^O(log width). Raise max_recursion_computes, use "
                                      f"budget_aware=True with a larger budget, or another solver")
        self.ops.append((COMPUTE, v))
        self.reasons.append(("c",) + why)
        if self.calls is not None:
            self.op_calls.append(self._open[-1])
        self.resident[v] = 1
        self.computed[v] = 1
        self.memory += self.graph.mem[v]

    def _free(self, v: int, why: tuple) -> None:
        self.ops.append((FREE, v))
        self.reasons.append(("f",) + why)
        if self.calls is not None:
            self.op_calls.append(self._open[-1])
        self.resident[v] = 0
        self.memory -= self.graph.mem[v]


def materialize_reasons(graph: ComputeGraph, hierarchy: Hierarchy, ops: Sequence[IndexedOp],
                        reasons: Sequence[Any], op_calls: Sequence[int] | None = None) -> list[dict[str, Any] | None]:
    """Turn the recursion's compact reasons (and any post-pass reasons, kept as they are) into reason objects.

    Texts name tensors by their labels (:func:`~remat_core.graph.node_labels`); the ``consumer``
    field keeps the id. With ``op_calls`` (a recorded run), each reason also gets ``call``: the
    position of the call that emitted the op.
    """
    ids = graph.ids
    labels = node_labels(graph)
    names = [labels[i] for i in ids]
    seen = [0] * len(graph)
    out: list[dict[str, Any] | None] = []
    for step, ((action, v), why) in enumerate(zip(ops, reasons)):
        if action == COMPUTE:
            seen[v] += 1
        if isinstance(why, PassReason):
            out.append(why.to_reason(graph))
            continue
        if not isinstance(why, tuple):
            out.append(why)
            continue
        made = _compute_reason(ids, names, hierarchy, why, seen[v]) if why[0] == "c" else _free_reason(ids, names, why)
        if op_calls is not None:
            made["call"] = op_calls[step]
        out.append(made)
    return out


def _compute_reason(ids: Sequence[str], names: Sequence[str], h: Hierarchy, why: tuple,
                    occurrence: int) -> dict[str, Any]:
    _, rule, asking, consumer, depth, frame, footprint = why
    verb = "recomputed" if occurrence > 1 else "computed"
    who = f"consumer {names[consumer]}" if consumer is not None else "the graph's outputs"
    by = f", requested by separator bag {asking}" if asking is not None else " at the top separator frame"
    name = dict(h.names[frame])
    where = ", ".join(f"{k} {v}" for k, v in name.items())
    if rule == "fits-budget":
        text = f"{verb} for {who}{by}: the subproblem fits the budget ({footprint:,} bytes), so no further recursion"
    elif rule == "separator-leaf":
        text = f"{verb} for {who}{by} (leaf: {where})"
    else:
        text = f"{verb} for {who}{by} ({where}, depth {depth})"
    return reason(text, rule=rule, bag=asking, consumer=ids[consumer] if consumer is not None else None,
                  depth=depth, occurrence=occurrence, footprint=footprint, **name)


def _free_reason(ids: Sequence[str], names: Sequence[str], why: tuple) -> dict[str, Any]:
    _, rule, bag, consumer = why
    c = names[consumer] if consumer is not None else None
    if rule == "request-served":
        text = f"freed after {c} read it: brought in for {c} by separator bag {bag}"
    elif rule == "frame-done":
        text = f"separator bag {bag}'s frame is done and its caller did not ask to keep it"
    elif rule == "frame-release":
        text = (f"nothing left in separator bag {bag}'s frame reads it" + (f" after {c}" if c is not None else "")
                + " and its caller did not ask to keep it")
    elif c is not None:
        text = f"last read by {c} within the subproblem"
    else:
        text = "no reader within the subproblem"
    return reason(text, rule=rule, bag=bag, consumer=ids[consumer] if consumer is not None else None)


# -- hierarchies from decompositions --------------------------------------------------------------

def separator_hierarchy(graph: ComputeGraph, decomposition: Decomposition, separators: SeparatorTree) -> Hierarchy:
    """The hierarchy of a decomposition's separator tree: one node per bag, named by its position."""
    bags = decomposition.bag_indices(graph)
    names = tuple({"frame": b} for b in range(len(bags)))
    return Hierarchy(bags, separators.children, separators.root, names, tuple(range(len(bags))))


def decomposition_hierarchy(graph: ComputeGraph, decomposition: Decomposition,
                            solver: str) -> tuple[SeparatorTree, Hierarchy]:
    """The separator tree of ``decomposition`` and its hierarchy, built once per graph, solver and method."""
    def build() -> tuple[SeparatorTree, Hierarchy]:
        separators = separator_tree(decomposition)
        return separators, separator_hierarchy(graph, decomposition, separators)
    return graph.memo(f"solvers.{solver}.hierarchy.{decomposition.method}", build)


def segment_hierarchy(graph: ComputeGraph, decomposition: Decomposition, segments: int) -> tuple[Hierarchy, list[int]]:
    """The two-level hierarchy of ``pathwidth-linear``: the cut bags at the root, the segments below.

    The path's bags are cut at ``segments - 1`` bags chosen so that each segment introduces about
    the same number of vertices; the root's bag is the union of the cut bags and each segment's leaf
    bag is the rest of its bags. Returns the hierarchy and the cut bag positions.
    """
    bags = decomposition.bag_indices(graph)
    cuts = _cut_positions(bags, segments)
    cut_vertices: dict[int, int] = {}
    for b in cuts:
        for v in bags[b]:
            cut_vertices.setdefault(v, b)
    pieces: list[tuple[int, ...]] = []
    bounds = [-1] + cuts + [len(bags)]
    for lo, hi in zip(bounds, bounds[1:]):
        inside = {v for b in range(lo + 1, hi) for v in bags[b] if v not in cut_vertices}
        pieces.append(tuple(sorted(inside)))
    leaves = [p for p in pieces if p]
    root_bag = tuple(sorted(cut_vertices))
    all_bags = (root_bag,) + tuple(leaves)
    children = (tuple(range(1, len(all_bags))),) + ((),) * len(leaves)
    names = ({"frame": "cut bags"},) + tuple({"segment": j} for j in range(len(leaves)))
    request = (dict(cut_vertices),) + tuple(None for _ in leaves)
    return Hierarchy(all_bags, children, 0, names, request), cuts


def _cut_positions(bags: Sequence[Sequence[int]], segments: int) -> list[int]:
    """Bag positions that split the path into ``segments`` runs introducing about equal vertex counts."""
    if segments <= 1 or len(bags) < 3:
        return []
    introduced = [len(bags[0])] + [len(set(bags[i]) - set(bags[i - 1])) for i in range(1, len(bags))]
    total = sum(introduced)
    cuts: list[int] = []
    running = 0
    for i in range(1, len(bags) - 1):
        running += introduced[i - 1]
        if running >= total * (len(cuts) + 1) / segments and (not cuts or i > cuts[-1] + 1):
            cuts.append(i)
            if len(cuts) == segments - 1:
                break
    return cuts


# -- the driver both solvers share ----------------------------------------------------------------

@dataclass(frozen=True)
class HierarchyPlan:
    """A schedule over indices that fits the budget, how it was made, and what it measures."""

    ops: list[IndexedOp]
    reasons: list[Any]
    strategy: str
    peak: int
    cost: float


def plan_over_hierarchy(graph: ComputeGraph, budget: int, hierarchy: Hierarchy, *, solver: str,
                        budget_aware: bool, max_computes: int, other_sources: bool = True,
                        deadline: Deadline | None = None) -> HierarchyPlan:
    """Run the recursion (and, budget-aware, the post-passes) and return the cheapest plan that fits.

    Pure (``budget_aware=False``): the recursion exactly as the paper states it; InfeasibleBudget
    when its peak exceeds the budget (its peak is then the smallest feasible budget it knows).

    Budget-aware, three sources are scheduled: the recursion with the fits-budget rule; the pure
    recursion (when it stays under :data:`PURE_REUSE_COMPUTES_PER_NODE` computes per node); and
    checkpoint-all. Each source yields candidates: itself, tightened, if it fits; its ops replayed
    as demands that reuse whatever the budget can hold (:func:`~remat_core.schedule.postpass.evict_to_budget`
    with ``reuse=True``: cost falls smoothly towards checkpoint-all as the budget grows); and, when
    it is over budget, the eviction post-pass on it. The cheapest candidate that fits wins and
    ``strategy`` names it; InfeasibleBudget only when none fits. The pure recursion's demands do not
    depend on the budget, which keeps the answer close to monotone in the budget. A recursion past
    ``max_computes`` is replaced by checkpoint-all (the strategy says so). ``other_sources=False``
    schedules the budget-aware recursion alone (for a caller that compares several hierarchies and
    adds the other sources once). Once ``deadline`` has passed no further candidate is built: the
    cheapest so far is returned (each replay takes up to seconds on a wide graph of a thousand
    nodes, where eviction thrashes).

    Raises
    ------
    InfeasibleBudget
        With the smallest peak of a valid schedule the attempts built.
    """
    if not budget_aware:
        ops, why = SeparatorRemat(graph, hierarchy, None, max_computes, solver, deadline).run()
        peak, cost = measure_indexed(graph, ops)
        if peak > budget:
            raise InfeasibleBudget(budget, peak, solver, f"the pure recursion (budget_aware=False) peaks at {peak:,} "
                                                         f"bytes; budget_aware=True adapts to the budget")
        return HierarchyPlan(ops, why, "pure recursion", peak, cost)
    baseline = checkpoint_all_cost(graph)
    sources = []  # (name, ops, reasons, passes): the passes worth running on each source
    try:
        sources.append(("recursion",) + SeparatorRemat(graph, hierarchy, budget, max_computes, solver, deadline).run()
                       + (("tighten", "reuse", "evict"),))
    except SolverLimitExceeded as limit:
        sources.append((f"checkpoint-all ({limit})",) + _indexed_checkpoint_all(graph) + (("tighten", "evict"),))
    candidates: list[HierarchyPlan] = []
    failures: list[str] = []
    smallest = checkpoint_all_peak(graph)
    pure_cap = min(max_computes, PURE_REUSE_COMPUTES_PER_NODE * len(graph))
    while sources:
        name, source_ops, source_why, passes = sources.pop(0)
        if "tighten" in passes:
            tight, tight_why = tighten_indexed(graph, source_ops, source_why)
            peak, cost = measure_indexed(graph, tight)
            smallest = min(smallest, peak)
            if peak <= budget:
                candidates.append(HierarchyPlan(tight, tight_why, name, peak, cost))
                if cost <= baseline:
                    break  # nothing is cheaper than computing each node once
                passes = tuple(p for p in passes if p != "evict")
        for kind in passes:
            if kind == "tighten":
                continue
            if deadline is not None and deadline.expired():
                failures.append("stopped at the time limit")
                break
            reuse = kind == "reuse"
            strategy = f"{name}, reusing what the budget can hold" if reuse else f"{name} + eviction post-pass"
            try:
                ops, why = evict_to_budget_indexed(graph, source_ops, source_why, budget, solver, reuse=reuse)
            except InfeasibleBudget as e:
                failures.append(f"{strategy}: {e.detail}")
                continue
            candidates.append(HierarchyPlan(ops, why, strategy, *measure_indexed(graph, ops)))
        if name == "recursion" and other_sources and not (deadline is not None and deadline.expired()):
            try:
                sources.append(("pure recursion",) + SeparatorRemat(graph, hierarchy, None, pure_cap, solver,
                                                                    deadline).run()
                               + (("tighten", "reuse"),))
            except SolverLimitExceeded as limit:
                failures.append(f"pure recursion: skipped ({limit})")
            sources.append(("checkpoint-all",) + _indexed_checkpoint_all(graph) + (("evict",),))
    if not candidates:
        raise InfeasibleBudget(budget, smallest, solver, "; ".join(failures))
    return min(candidates, key=lambda plan: plan.cost)


def schedule_from_plan(graph: ComputeGraph, hierarchy: Hierarchy, plan: HierarchyPlan,
                       info: Mapping[str, Any]) -> Schedule:
    """The plan as a :class:`~remat_core.schedule.schedule.Schedule` with reason objects and ``solver_info``."""
    ids = graph.ids
    solver_info = {**info, "separator_height": hierarchy.height, "strategy": plan.strategy}
    return Schedule.from_ops([(a, ids[v]) for a, v in plan.ops], materialize_reasons(graph, hierarchy, plan.ops,
                                                                                      plan.reasons),
                             solver_info=solver_info)


def solve_over_hierarchy(graph: ComputeGraph, budget: int, hierarchy: Hierarchy, *, solver: str,
                         budget_aware: bool, max_computes: int, info: Mapping[str, Any],
                         deadline: Deadline | None = None) -> Schedule:
    """:func:`plan_over_hierarchy`, then :func:`schedule_from_plan`."""
    plan = plan_over_hierarchy(graph, budget, hierarchy, solver=solver, budget_aware=budget_aware,
                               max_computes=max_computes, deadline=deadline)
    return schedule_from_plan(graph, hierarchy, plan, info)


def _indexed_checkpoint_all(graph: ComputeGraph) -> tuple[list[IndexedOp], list[Any]]:
    id_ops, why = checkpoint_all_ops(graph)
    return [(a, graph.index[v]) for a, v in id_ops], why
