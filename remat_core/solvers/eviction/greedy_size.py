"""``greedy-size``: XLA's size-greedy rematerialization pass (``HloRematerialization``), simulated.

XLA walks a fixed instruction sequence (here the graph's topological order) tracking the live
tensors. Wherever the next instruction would push memory over the limit, it picks, among the live
tensors the instruction does not read, the one whose rematerialization saves the most memory, and
repeats until the instruction fits:

- a tensor none of whose readers has run yet is *moved*: its computation is deleted and redone just
  before its first reader (cost 0 in XLA's ranking, so moves come first);
- otherwise it is *rematerialized*: freed now and recomputed just before its next reader. XLA's
  cost is ``memory_limit / memory_reduced``: the biggest saving wins, whatever the compute cost
  (hence "size-greedy").

A recomputation reads its inputs then, so only tensors whose inputs are still resident qualify
(their lifetimes are extended to the recomputation, as XLA does), and a tensor some pending
computation at the current position reads does not (which also keeps the walk from undoing its
own work). The recomputation itself is one more instruction of the walk and may trigger more.

This is the baseline of Kumar et al. (the seed paper), which compares against XLA's greedy
heuristic.

References
----------
XLA, ``xla/service/hlo_rematerialization.cc`` (``MemoryUsageTracker::RematerializationCost``,
``MemoryReducedIfRematerialized``), TensorFlow/OpenXLA.
Kumar, Purohit, Svitkina, Vee, Wang, "Efficient Rematerialization for Deep Networks",
NeurIPS 2019 (the comparison with XLA's greedy rematerialization).
"""

from __future__ import annotations

import heapq
import itertools

from ...errors import InfeasibleBudget
from ...graph import ComputeGraph, node_labels
from ...schedule import COMPUTE, FREE, Op, Reason, Schedule, checkpoint_all_peak, needed_topological_order, reason
from ..registry import Option, SolverTags, register

_RULE = "greedy-size"


class _Walk:
    """The state of XLA's walk: pending instructions, live tensors, emitted ops."""

    def __init__(self, graph: ComputeGraph, budget: int, max_computes: int):
        self.graph, self.budget, self.max_computes = graph, budget, max_computes
        labels = node_labels(graph)
        self.names = [labels[i] for i in graph.ids]  # reasons name tensors for people
        pinned = graph.pinned
        self.order = needed_topological_order(graph)
        self.preds = [tuple(u for u in graph.pred_idx[v] if not pinned[u]) for v in range(len(graph))]
        # Pending instructions, smallest key first: (base position, sub-order, serial, node, kind, detail).
        # A recomputation inserted before a reader at base position q gets (q, -k): after everything
        # before q, before what is already queued at q.
        self.queue: list[tuple] = []
        self.serial = itertools.count()
        self.inserted = itertools.count(1)
        self.pending_reads = [0] * len(graph)       # queued instructions that read each tensor
        self.readers: list[list[tuple]] = [[] for _ in range(len(graph))]  # their queue keys (heaps)
        self.resident: dict[int, int] = {}          # tensor -> index of its live compute op
        self.read_since_compute: dict[int, bool] = {}
        self.memory = graph.pinned_bytes
        self.computes = 0
        self.ops: list[Op | None] = []
        self.reasons: list[Reason | None] = []
        # Live tensors by size, largest first: (-mem, op index, tensor), cleaned lazily. The second
        # heap holds those not read since their computation (candidates for a move).
        self.by_size: list[tuple[int, int, int]] = []
        self.unread_by_size: list[tuple[int, int, int]] = []
        for position, v in enumerate(self.order):
            self._enqueue((position, 0), v, "first", None)

    def _enqueue(self, key: tuple[int, int], v: int, kind: str, detail) -> None:
        entry = (key[0], key[1], next(self.serial), v)
        heapq.heappush(self.queue, (*entry, kind, detail))
        for u in self.preds[v]:
            self.pending_reads[u] += 1
            heapq.heappush(self.readers[u], entry)

    def _free(self, v: int, text: str, **fields) -> None:
        del self.resident[v]
        self.memory -= self.graph.mem[v]
        self.ops.append((FREE, self.graph.ids[v]))
        self.reasons.append(reason(text, **fields))

    def run(self) -> Schedule:
        graph, ids = self.graph, self.graph.ids
        while self.queue:
            position, _, _, v, kind, detail = heapq.heappop(self.queue)
            missing = [u for u in self.preds[v] if u not in self.resident]
            if missing:
                raise RuntimeError(f"greedy-size walk bug: {ids[v]} is due but {ids[missing[0]]} is not resident")
            while self.memory + graph.mem[v] > self.budget:
                self._make_room(v, position)
            self.computes += 1
            if self.computes > self.max_computes:
                raise InfeasibleBudget(self.budget, checkpoint_all_peak(graph), _RULE,
                                       f"gave up after {self.max_computes:,} computations")
            self.resident[v] = len(self.ops)
            self.read_since_compute[v] = False
            self.memory += graph.mem[v]
            heapq.heappush(self.by_size, (-graph.mem[v], len(self.ops), v))
            heapq.heappush(self.unread_by_size, (-graph.mem[v], len(self.ops), v))
            self.ops.append((COMPUTE, ids[v]))
            self.reasons.append(self._compute_reason(v, kind, detail))
            for u in self.preds[v]:
                self.pending_reads[u] -= 1
                heapq.heappop(self.readers[u])  # the instruction being run has the smallest key of all
                self.read_since_compute[u] = True
            for u in dict.fromkeys(self.preds[v]):
                if not self.pending_reads[u]:
                    self._free(u, f"last read by {self.names[v]}", rule="last-use", consumer=ids[v])
            if not self.pending_reads[v]:
                self._free(v, f"{self.names[v]} has no later reader", rule="last-use")
        ops = [op for op in self.ops if op is not None]
        reasons = [r for op, r in zip(self.ops, self.reasons) if op is not None]
        moves = sum(1 for r in reasons if r and r.get("rule") == f"{_RULE}-move")
        remats = sum(1 for r in reasons if r and r.get("rule") == f"{_RULE}-remat")
        return Schedule.from_ops(ops, reasons, solver_info={"moves": moves, "rematerializations": remats})

    def _compute_reason(self, v: int, kind: str, detail) -> Reason:
        name = self.names[v]
        if kind == "first":
            return reason(f"{name} computed in topological order", rule=f"{_RULE}-compute")
        consumer = self.graph.ids[detail["reader"]]
        reader = self.names[detail["reader"]]
        if kind == "move":
            return reason(f"{name} moved next to its first reader {reader} (a zero-cost move: computed later, "
                          f"not twice)", rule=f"{_RULE}-move", consumer=consumer)
        return reason(f"{name} rematerialized for {reader}: freed at memory {detail['memory']:,} bytes as the "
                      f"largest live tensor", rule=f"{_RULE}-remat", consumer=consumer)

    def _eligible(self, u: int, due: int, position: int) -> bool:
        """Can ``u`` be moved or rematerialized before computing ``due`` at base ``position``?"""
        if u == due or u in self.preds[due] or self.graph.mem[u] == 0 or not self.readers[u]:
            return False
        if self.readers[u][0][0] <= position:
            return False  # read at the current position: freeing it now would only be undone
        return all(p in self.resident for p in self.preds[u])

    def _largest_eligible(self, heap: list, unread_only: bool, due: int, position: int) -> int | None:
        """The largest eligible tensor of ``heap``; entries no longer valid are dropped for good."""
        skipped, found = [], None
        while heap:
            entry = heapq.heappop(heap)
            _, op_index, u = entry
            if self.resident.get(u) != op_index or (unread_only and self.read_since_compute[u]):
                continue  # freed, recomputed or read since
            skipped.append(entry)
            if self._eligible(u, due, position):
                found = u
                break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def _make_room(self, due: int, position: int) -> None:
        """Move or rematerialize the largest eligible live tensor (moves first), as XLA ranks them."""
        graph, ids = self.graph, self.graph.ids
        victim = self._largest_eligible(self.unread_by_size, True, due, position)
        is_move = victim is not None
        if victim is None:
            victim = self._largest_eligible(self.by_size, False, due, position)
        if victim is None:
            raise InfeasibleBudget(self.budget, checkpoint_all_peak(graph), _RULE,
                                   f"computing '{ids[due]}' needs {graph.mem[due]:,} more bytes with {self.memory:,} "
                                   f"in use, and no live tensor can be rematerialized")
        first = self.readers[victim][0]
        reader, memory = first[3], self.memory
        new_key = (first[0], -next(self.inserted))
        if is_move:
            op_index = self.resident.pop(victim)
            self.ops[op_index] = None  # the earlier computation is deleted, not repeated
            self.reasons[op_index] = None
            self.memory -= graph.mem[victim]
            self.computes -= 1
            self._enqueue(new_key, victim, "move", {"reader": reader})
        else:
            self._free(victim, f"freed for rematerialization: largest live tensor ({graph.mem[victim]:,} bytes) "
                               f"not needed until {self.names[reader]}; computing {self.names[due]} would exceed the "
                               f"budget",
                       rule=f"{_RULE}-evict", score=graph.mem[victim], memory=memory, consumer=ids[due])
            self._enqueue(new_key, victim, "remat", {"reader": reader, "memory": memory})


@register("greedy-size", "XLA's size-greedy rematerialization: at each over-budget point, move or recompute the "
                         "largest live tensor before its next use.",
          tags=SolverTags(quick=True),
          options=(Option("max_recompute_factor", int, 10, "give up after this many computations per node",
                          low=1, high=100000),),
          reference="XLA HloRematerialization; compared against in Kumar et al., NeurIPS 2019")
def greedy_size(graph: ComputeGraph, budget: int, *, time_limit: float | None = None,
                max_recompute_factor: int = 10) -> Schedule:
    """XLA's greedy rematerialization over the topological order.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: one walk.
    max_recompute_factor : int
        Give up after ``factor x nodes`` computations.

    Returns
    -------
    Schedule
        Moves and rematerializations carry reasons (``greedy-size-move``, ``greedy-size-remat``,
        ``greedy-size-evict`` with the memory at the decision); ``solver_info`` counts them.

    Raises
    ------
    InfeasibleBudget
        When an instruction cannot fit and no live tensor qualifies (the checkpoint-all peak, at
        which the walk changes nothing, is reported as feasible).

    References
    ----------
    XLA ``HloRematerialization``; Kumar et al., NeurIPS 2019.
    """
    del time_limit
    return _Walk(graph, budget, max(1, max_recompute_factor * len(graph.needed_idx))).run()
