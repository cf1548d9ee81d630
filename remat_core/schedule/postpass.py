"""Schedule-to-schedule passes that any solver may run on its ops before returning them.

- :func:`tighten`: drop every compute whose value is never read before it is freed (unless it is
  an output's only computation), and move every free to right after the tensor's last reader.
  Memory never rises at any step and cost never rises.
- :func:`evict_to_budget`: replay a valid schedule under a memory budget, evicting resident tensors
  when a compute would go over (first those with no further use, else the least cost per byte, the
  furthest next use breaking ties) and recomputing an evicted tensor when a later op needs it
  (recursively, like DTR). Its result is :func:`tighten`-ed.

Both take and return ``(ops, reasons)`` over node ids; ``*_indexed`` variants work on
``(action, node index)`` ops for solvers that build schedules on the graph's index arrays. Reasons
are carried through untouched where an op keeps its meaning and replaced where the pass changes it
(``rule`` ``last-use``, ``evict`` or ``evict-recompute``). The indexed variants record their own
reasons as compact :class:`PassReason` tuples (one dict per op would dominate their run time);
:func:`reason_objects` turns them into reason objects.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from typing import Any, NamedTuple, Sequence

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph, node_labels
from .schedule import COMPUTE, FREE, Op, Reason, reason

IndexedOp = tuple[str, int]


class PassReason(NamedTuple):
    """A reason a pass gave an op, kept compact until :meth:`to_reason`.

    ``rule`` is ``last-use`` (``other``: the last reader, or None), ``evict`` (``other``: the node
    that needed the room; ``step``: the source step that needs the tensor next) or
    ``evict-recompute`` (``other``: the consumer).
    """

    rule: str
    node: int
    other: int | None = None
    step: int | None = None

    def to_reason(self, graph: ComputeGraph) -> Reason:
        ids = graph.ids
        labels = node_labels(graph)
        other = ids[self.other] if self.other is not None else None
        name = labels[other] if other is not None else None
        if self.rule == "evict":
            return reason(f"evicted to make room for {name} within the budget: cheapest to recompute per byte "
                          f"({graph.cost[self.node]:g} per {graph.mem[self.node]:,} bytes), next needed at source step "
                          f"{self.step}", rule="evict", consumer=other)
        if self.rule == "evict-recompute":
            return reason(f"recomputed for consumer {name}: it had been evicted to fit the budget",
                          rule="evict-recompute", consumer=other)
        if other is not None:
            return reason(f"freed right after its last reader {name}", rule="last-use", consumer=other)
        return reason(f"{labels[ids[self.node]]} has no further reader", rule="last-use")


def reason_objects(graph: ComputeGraph, reasons: Sequence[Any]) -> list[Any]:
    """``reasons`` with every :class:`PassReason` turned into a reason object (others unchanged)."""
    return [r.to_reason(graph) if isinstance(r, PassReason) else r for r in reasons]


def tighten(graph: ComputeGraph, ops: Sequence[Op],
            reasons: Sequence[Reason | None] | None = None) -> tuple[list[Op], list[Reason | None]]:
    """Drop useless computes and free every tensor right after its last reader.

    Parameters
    ----------
    graph : ComputeGraph
    ops : sequence of (str, str)
        A valid schedule (the simulator would accept it).
    reasons : sequence, optional
        Parallel to ``ops``.

    Returns
    -------
    ops, reasons
        A valid schedule whose memory after every kept op is at most the original's at that op
        and whose cost is at most the original's. A tensor still resident at the end is freed
        after its last reader too.

    Notes
    -----
    One backward pass finds, for each stay of a tensor, its last reader among the computes kept
    (a compute dropped later in time no longer counts as a reader, so drops cascade to its
    inputs); one forward pass emits the kept computes and places each free. O(ops + reads).
    """
    idx_ops, idx_reasons = _to_indexed(graph, ops, reasons)
    out_ops, out_reasons = tighten_indexed(graph, idx_ops, idx_reasons)
    return _to_ids(graph, out_ops), reason_objects(graph, out_reasons)


def evict_to_budget(graph: ComputeGraph, ops: Sequence[Op], reasons: Sequence[Reason | None] | None,
                    budget: int, solver: str = "", reuse: bool = False) -> tuple[list[Op], list[Reason | None]]:
    """Replay ``ops`` within ``budget``: evict when a compute would go over, recompute on demand.

    Parameters
    ----------
    graph : ComputeGraph
    ops : sequence of (str, str)
        A valid schedule (any peak).
    reasons : sequence, optional
    budget : int
        Bytes, pinned memory included.
    solver : str
        Named in the error.
    reuse : bool
        Treat the source as a sequence of demands: its frees become advice (a tensor stays while it
        has a later reader and the budget has room) and its recomputation of a tensor still
        resident is skipped. With room to spare this removes recomputation; at a budget of the
        checkpoint-all peak or more it computes each node once.

    Returns
    -------
    ops, reasons
        A valid schedule with peak <= ``budget``, tightened.

    Raises
    ------
    InfeasibleBudget
        When a compute cannot get room: everything left resident is needed by it or by the
        recomputation in progress.

    Notes
    -----
    Victims are chosen among resident, unlocked tensors of non-zero size: a tensor with no
    further use is freed as soon as its last reader runs; otherwise the least ``cost / mem`` goes
    first, the furthest next use breaking ties (Belady's rule). A tensor evicted and needed again
    is recomputed just before its reader, its own evicted inputs first.

    References
    ----------
    M. Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021.
    """
    idx_ops, idx_reasons = _to_indexed(graph, ops, reasons)
    out_ops, out_reasons = evict_to_budget_indexed(graph, idx_ops, idx_reasons, budget, solver, reuse)
    return _to_ids(graph, out_ops), reason_objects(graph, out_reasons)


def _to_indexed(graph: ComputeGraph, ops: Sequence[Op],
                reasons: Sequence[Reason | None] | None) -> tuple[list[IndexedOp], list[Reason | None]]:
    index = graph.index
    return ([(a, index[v]) for a, v in ops],
            list(reasons) if reasons is not None else [None] * len(ops))


def _to_ids(graph: ComputeGraph, ops: Sequence[IndexedOp]) -> list[Op]:
    ids = graph.ids
    return [(a, ids[v]) for a, v in ops]


# -- tighten ----------------------------------------------------------------------------------------

def tighten_indexed(graph: ComputeGraph, ops: Sequence[IndexedOp],
                    reasons: Sequence[Any]) -> tuple[list[IndexedOp], list[Any]]:
    """:func:`tighten` on ``(action, node index)`` ops."""
    n_ops = len(ops)
    pair = [-1] * n_ops
    open_at: dict[int, int] = {}
    first_compute: dict[int, int] = {}
    for i, (action, v) in enumerate(ops):
        if action == COMPUTE:
            open_at[v] = i
            first_compute.setdefault(v, i)
        else:
            c = open_at.pop(v)
            pair[c], pair[i] = i, c
    outputs = set(graph.output_idx)
    pinned, preds = graph.pinned, graph.pred_idx
    keep = [True] * n_ops
    last_read = [-1] * n_ops
    stay = dict(open_at)  # node -> compute position of the stay that the backward walk is inside
    kept_later: set[int] = set()
    for i in range(n_ops - 1, -1, -1):
        action, v = ops[i]
        if action == FREE:
            stay[v] = pair[i]
            continue
        del stay[v]
        useful = last_read[i] >= 0 or (v in outputs and v not in kept_later and first_compute[v] == i)
        if not useful:
            keep[i] = False
            if pair[i] >= 0:
                keep[pair[i]] = False
            continue
        kept_later.add(v)
        for p in preds[v]:
            if not pinned[p]:
                c = stay[p]
                if last_read[c] < 0:
                    last_read[c] = i
    kept_computes_before = [0] * (n_ops + 1)
    for i, (action, _) in enumerate(ops):
        kept_computes_before[i + 1] = kept_computes_before[i] + (action == COMPUTE and keep[i])
    frees_after: dict[int, list[int]] = {}
    for c in range(n_ops):
        if ops[c][0] == COMPUTE and keep[c]:
            frees_after.setdefault(max(c, last_read[c]), []).append(c)
    out_ops: list[IndexedOp] = []
    out_reasons: list[Any] = []
    for i, (action, v) in enumerate(ops):
        if action == FREE or not keep[i]:
            continue
        out_ops.append((action, v))
        out_reasons.append(reasons[i])
        for c in frees_after.get(i, ()):
            u = ops[c][1]
            f = pair[c]
            out_ops.append((FREE, u))
            if f >= 0 and (kept_computes_before[f] == kept_computes_before[i + 1] or _is_eviction(reasons[f])):
                out_reasons.append(reasons[f])  # it kept its place, or it is an eviction (still why it goes)
            else:
                out_reasons.append(PassReason("last-use", u, v if last_read[c] >= 0 else None))
    return out_ops, out_reasons


def _is_eviction(why: Any) -> bool:
    rule = why.rule if isinstance(why, PassReason) else why.get("rule") if isinstance(why, dict) else None
    return rule == "evict"


# -- evict to budget --------------------------------------------------------------------------------

def evict_to_budget_indexed(graph: ComputeGraph, ops: Sequence[IndexedOp], reasons: Sequence[Any], budget: int,
                            solver: str = "", reuse: bool = False) -> tuple[list[IndexedOp], list[Any]]:
    """:func:`evict_to_budget` on ``(action, node index)`` ops."""
    replay = _EvictingReplay(graph, ops, reasons, budget, solver, reuse)
    replay.run()
    return tighten_indexed(graph, replay.ops, replay.reasons)


class _EvictingReplay:
    """State of one replay: the resident set, the eviction heap and the ops emitted so far."""

    def __init__(self, graph: ComputeGraph, ops: Sequence[IndexedOp], reasons: Sequence[Any], budget: int,
                 solver: str, reuse: bool):
        self.graph = graph
        self.reuse = reuse
        self.source = ops
        self.source_reasons = reasons
        self.budget = budget
        self.solver = solver
        self.resident = bytearray(1 if p else 0 for p in graph.pinned)
        self.memory = graph.pinned_bytes
        self.locks = [0] * len(graph)
        self.topo_position = [0] * len(graph)
        for position, v in enumerate(graph.topo_idx):
            self.topo_position[v] = position
        self.version = [0] * len(graph)
        self.heap: list[tuple[float, int, int, int]] = []
        self.ops: list[IndexedOp] = []
        self.reasons: list[Any] = []
        self.reads: list[list[int]] = [[] for _ in range(len(graph))]
        self.computes: list[list[int]] = [[] for _ in range(len(graph))]
        for i, (action, v) in enumerate(ops):
            if action == COMPUTE:
                self.computes[v].append(i)
                for p in graph.pred_idx[v]:
                    self.reads[p].append(i)

    def next_use(self, t: int, step: int) -> int | None:
        """The next source step after ``step`` that reads t's current value (None: no further use)."""
        reads = self.reads[t]
        k = bisect_right(reads, step)
        if k == len(reads):
            return None
        if self.reuse:
            return reads[k]  # a later source recompute of t is skipped while t stays resident
        computes = self.computes[t]
        j = bisect_right(computes, step)
        if j < len(computes) and computes[j] < reads[k]:
            return None  # the source computes t afresh before reading it again
        return reads[k]

    def run(self) -> None:
        for step, (action, v) in enumerate(self.source):
            if action == FREE:
                if self.resident[v] and not self.reuse:
                    self._free(v, self.source_reasons[step])
                continue
            if self.resident[v]:
                if not self.reuse:
                    raise AssertionError(f"replay kept '{self.graph.ids[v]}' resident past its source free")
                for p in self.graph.pred_idx[v]:  # a skipped recompute: its reads are done
                    if not self.graph.pinned[p]:
                        self._settle(p, step, v)
                continue
            self._materialize(v, step, self.source_reasons[step])

    def _materialize(self, target: int, step: int, target_reason: Any) -> None:
        """Compute ``target`` at source step ``step``, recomputing its evicted ancestors first.

        The evicted ancestors (reached through not-resident nodes) are computed in a depth-first
        post-order from the target, each input locked until its last reader among them has run:
        linear in their number (recomputing each input separately could be exponential: a grid's
        paths), and one input's recomputation finishes before the next begins, so their working
        sets do not pile up.
        """
        graph = self.graph
        pinned, preds, position = graph.pinned, graph.pred_idx, self.topo_position
        order: list[int] = []
        seen = {target}
        stack = [(target, iter(sorted(preds[target], key=position.__getitem__, reverse=True)))]
        while stack:
            node, pending = stack[-1]
            for p in pending:
                if not pinned[p] and not self.resident[p] and p not in seen:
                    seen.add(p)
                    stack.append((p, iter(sorted(preds[p], key=position.__getitem__, reverse=True))))
                    break
            else:
                stack.pop()
                order.append(node)
        first_reader: dict[int, int] = {}
        for v in order:
            for p in preds[v]:
                if not pinned[p]:
                    self.locks[p] += 1
                    first_reader.setdefault(p, v)
        for v in order:
            self._make_room(v)
            self.ops.append((COMPUTE, v))
            if v == target:
                self.reasons.append(target_reason)
            else:
                self.reasons.append(PassReason("evict-recompute", v, first_reader[v]))
            self.resident[v] = 1
            self.memory += graph.mem[v]
            for p in preds[v]:
                if not pinned[p]:
                    self.locks[p] -= 1
                    self._settle(p, step, v)
        # the target's own reader is in the future; a recomputed node's readers ran above
        self._settle(target, step, target)

    def _settle(self, t: int, step: int, reader: int) -> None:
        if not self.resident[t] or self.locks[t]:
            return
        upcoming = self.next_use(t, step)
        if upcoming is None:
            self._free(t, PassReason("last-use", t, reader))
            return
        self.version[t] += 1
        mem = self.graph.mem[t]
        if mem > 0:
            heapq.heappush(self.heap, (self.graph.cost[t] / mem, -upcoming, t, self.version[t]))

    def _make_room(self, node: int) -> None:
        graph = self.graph
        need = graph.mem[node]
        skipped = []
        while self.memory + need > self.budget:
            if not self.heap:
                for entry in skipped:
                    heapq.heappush(self.heap, entry)
                raise InfeasibleBudget(self.budget, None, self.solver,
                                       f"eviction found no room to compute '{graph.ids[node]}': every resident tensor "
                                       f"is an input of it or of the recomputation in progress")
            entry = heapq.heappop(self.heap)
            _, _, t, version = entry
            if not self.resident[t] or version != self.version[t]:
                continue
            if self.locks[t]:
                skipped.append(entry)
                continue
            self._free(t, PassReason("evict", t, node, -entry[1]))
        for entry in skipped:
            heapq.heappush(self.heap, entry)

    def _free(self, t: int, why: Any) -> None:
        self.ops.append((FREE, t))
        self.reasons.append(why)
        self.resident[t] = 0
        self.memory -= self.graph.mem[t]
        self.version[t] += 1
