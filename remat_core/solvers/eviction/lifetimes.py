"""Lifetime splitting: recompute what the over-budget steps can best do without.

A schedule here is a *compute sequence*: node computations in execution order, recomputations
allowed, each tensor freed right after its last reader (:func:`~remat_core.schedule.ops_from_computes`
turns it into ops). Each computation starts an *instance* of its tensor, alive from its
computation to its last reader. Memory during the computation at position ``t`` is the pinned
bytes plus every instance alive at ``t``.

:class:`Timeline` holds one sequence with its instances and memory profile; :func:`split_lifetimes`
starts from one computation per node (checkpoint-all, in a given topological order) and removes
memory where the profile is over the budget by *splitting lifetimes*: an instance of ``v`` read at
positions ``r_1 < ... < r_k`` is freed after ``r_j`` and ``v`` is recomputed just before
``r_{j+1}``. That frees ``mem(v)`` over the gap. The recomputation reads ``v``'s inputs then, so an
input already freed is either kept alive until then (its lifetime extended) or recomputed too. A
split of the gap between the computation and the first reader costs nothing: it moves the
computation later.

Each round scores every split whose gap covers an over-budget step by (memory-steps removed above
the budget) / (cost added) and applies the best ones whose effects do not overlap; it stops when the
profile fits. A final pass undoes every recomputation that is no longer needed. The greedy sees the
whole profile at once (which steps are over, by how much, and which inputs are still alive there),
so on wide graphs it recomputes cheap tensors whose inputs are at hand instead of evicting online
and recomputing long chains as DTR does.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...graph import ComputeGraph
from ..deadline import Deadline


@dataclass(frozen=True)
class Split:
    """One lifetime split, scored on the profile it was found on.

    Attributes
    ----------
    node : int
        The node recomputed (or moved, for a gap that starts at its computation).
    instance : int
        Uid of the computation whose lifetime is split (see :class:`Timeline`).
    reader : int
        Uid of the computation the recomputation goes before (in the gap, up to its reader).
    moved : bool
        The gap starts at the computation itself: the computation moves to ``reader``.
    recomputed : tuple of int
        Inputs of ``node`` recomputed with it, in topological order (the others stay alive).
    cost : float
        Cost added.
    gain : float
        Memory-steps above the budget removed.
    span : tuple of int
        Uids of the first and last computation whose memory the split changes.
    """

    node: int
    instance: int
    reader: int
    moved: bool
    recomputed: tuple[int, ...]
    cost: float
    gain: float
    span: tuple[int, int]


class Timeline:
    """A compute sequence, its instances and its memory profile.

    Parameters
    ----------
    graph : ComputeGraph
    sequence : sequence of int
        Node indices in execution order; every non-pinned input of a computation was computed
        earlier.
    uids : sequence of int, optional
        A name for each computation that stays the same while others are inserted or removed
        (default: the positions).
    """

    def __init__(self, graph: ComputeGraph, sequence: Sequence[int], uids: Sequence[int] | None = None):
        self.graph = graph
        self.sequence = list(sequence)
        self.uids = list(uids) if uids is not None else list(range(len(self.sequence)))
        inputs = _computed_inputs(graph)
        current: dict[int, int] = {}
        self.reads: list[list[int]] = [[] for _ in self.sequence]
        self.computes: dict[int, list[int]] = {}
        for t, v in enumerate(self.sequence):
            for p in inputs[v]:
                self.reads[current[p]].append(t)
            current[v] = t
            self.computes.setdefault(v, []).append(t)
        self.end = [r[-1] if r else t for t, r in enumerate(self.reads)]
        mem = np.array([graph.mem[v] for v in self.sequence], dtype=np.int64)
        change = np.zeros(len(self.sequence) + 1, dtype=np.int64)
        np.add.at(change, np.arange(len(self.sequence)), mem)
        np.add.at(change, np.array(self.end, dtype=np.int64) + 1, -mem)
        self.memory = np.cumsum(change)[:-1] + graph.pinned_bytes
        self.cost = float(sum(graph.cost[v] for v in self.sequence))

    @property
    def peak(self) -> int:
        return int(self.memory.max()) if len(self.memory) else self.graph.pinned_bytes

    def instance_before(self, node: int, position: int) -> int:
        """Position of the last computation of ``node`` before ``position``."""
        computes = self.computes[node]
        return computes[bisect_left(computes, position) - 1]

    def recomputations(self) -> list[int]:
        """Positions of the computations that are not a node's first."""
        return [t for positions in self.computes.values() for t in positions[1:]]


def split_lifetimes(graph: ComputeGraph, budget: int, sequence: Sequence[int], deadline: Deadline,
                    noise: float = 0.0, seed: int = 0) -> Timeline:
    """A compute sequence whose memory stays within ``budget``, by greedy lifetime splitting.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    sequence : sequence of int
        The compute sequence to start from (it may be over the budget): a topological order of
        the nodes to compute (checkpoint-all), or a schedule to repair.
    deadline : Deadline
        Gives up when it passes.
    noise : float
        Multiplies each score by a random factor in ``[1 - noise, 1 + noise]`` (0: deterministic),
        so that repeated runs explore different splits.
    seed : int

    Returns
    -------
    Timeline
        Within the budget, with every recomputation that became useless undone; or, when no split
        reduces the memory above the budget any more or the deadline passes, the timeline with
        the lowest peak reached (over the budget: the caller checks ``peak``).
    """
    timeline = lowest = Timeline(graph, sequence)
    splitter = _Splitter(graph, budget, noise, seed)
    while timeline.peak > budget:
        splits = splitter.best(timeline) if not deadline.expired() else []
        if not splits and splitter.deepen():
            continue
        if not splits:
            return lowest
        timeline = splitter.apply(timeline, splits)
        if timeline.peak < lowest.peak:
            lowest = timeline
    return undo_needless_recomputations(timeline, budget, deadline)


def undo_needless_recomputations(timeline: Timeline, budget: int, deadline: Deadline) -> Timeline:
    """Remove recomputations, dearest first, as long as the memory stays within ``budget``.

    Without the recomputation at ``x`` its readers read the previous instance, which then stays
    alive from its last reader to ``x``: that is the only memory the removal adds (the inputs ``x``
    read may be freed earlier), so each removal is checked on that stretch of the profile.
    """
    graph = timeline.graph
    # (node, occurrence): later occurrences of a node first, so removing one never renumbers those left
    candidates = sorted(((v, k) for v, positions in timeline.computes.items() for k in range(1, len(positions))),
                        key=lambda c: (-graph.cost[c[0]], c[0], -c[1]))
    for node, occurrence in candidates:
        if deadline.expired():
            break
        position = timeline.computes[node][occurrence]
        previous = timeline.computes[node][occurrence - 1]
        stretch = timeline.memory[timeline.end[previous] + 1:position]
        if stretch.size == 0 or int(stretch.max()) + graph.mem[node] <= budget:
            timeline = Timeline(graph, timeline.sequence[:position] + timeline.sequence[position + 1:],
                                timeline.uids[:position] + timeline.uids[position + 1:])
    return timeline


def ruin_and_recreate(timeline: Timeline, budget: int, deadline: Deadline, seed: int = 0,
                      stall: int = 30) -> tuple[Timeline, int]:
    """Large-neighbourhood search on a timeline within the budget: ``(the best timeline found, rounds run)``.

    Each round *ruins* the best timeline (removes every recomputation in a random window around
    one of them, or every recomputation of a few random nodes), which puts it back over the
    budget, and *recreates* it with :func:`split_lifetimes`, scores jittered by 30 % so that each
    round tries other splits. A cheaper result within the budget replaces the best. Stops at the
    deadline or after ``stall`` rounds in a row without a gain.
    """
    graph = timeline.graph
    rng = random.Random(seed)
    best, rounds, fruitless = timeline, 0, 0
    while fruitless < stall and not deadline.expired():
        recomputed = best.recomputations()
        if not recomputed:
            break
        if rng.random() < 0.5:
            centre = rng.choice(recomputed)
            half = rng.randint(4, max(4, len(best.sequence) // 12))
            ruined = {t for t in recomputed if abs(t - centre) <= half}
        else:
            nodes = set(rng.sample(sorted({best.sequence[t] for t in recomputed}), k=max(1, len(recomputed) // 8)))
            ruined = {t for t in recomputed if best.sequence[t] in nodes}
        start = [v for t, v in enumerate(best.sequence) if t not in ruined]
        candidate = split_lifetimes(graph, budget, start, deadline, noise=0.3, seed=rng.randrange(2 ** 31))
        rounds += 1
        if candidate.peak <= budget and candidate.cost < best.cost * (1 - 1e-12):
            best, fruitless = candidate, 0
        else:
            fruitless += 1
    return best, rounds


_KEEP = 0.8
"""Each round applies, besides the best split, every other split scoring at least this share of the best
whose span overlaps none chosen before (one split per round was measured to give the same costs, slower)."""


CLOSURE_LIMITS = (0, 12, 48, None)
"""Most dead ancestors a split recomputes along with its node beyond its inputs: none while that is
enough, more (None: any number) each time no split helps (long chains are rarely worth it, and costly to
score)."""


class _Splitter:
    """Finds and applies the best splits round after round, remembering what it scored.

    A split changes memory and instance ends only within its span, so a split scored earlier
    whose span meets none applied since scores the same: scores are kept by the uids of the
    computation and the reader, and forgotten when a split is applied over their span.
    """

    def __init__(self, graph: ComputeGraph, budget: int, noise: float, seed: int):
        self.graph = graph
        self.budget = budget
        self.noise = noise
        self.rng = random.Random(seed)
        self.topo_rank = _topological_rank(graph)
        self.scored: dict[tuple[int, int], tuple[int, list[Split]]] = {}  # key -> (uid where its span starts, splits)
        self.depth = 0  # index into CLOSURE_LIMITS

    def deepen(self) -> bool:
        """Allow longer chains of dead ancestors (forgetting every score); False when there is no longer limit."""
        if self.depth + 1 >= len(CLOSURE_LIMITS):
            return False
        self.depth += 1
        self.scored.clear()
        return True

    def best(self, timeline: Timeline) -> list[Split]:
        """The best-scoring splits, with no two spans overlapping.

        Candidates are ranked by a bound first: a split of ``v`` over a gap removes at most
        ``min(mem(v) x the over-budget steps in the gap, the excess there)``, at the cost of ``v``
        (nothing for a moved computation). Exact gains are computed (or recalled) in that order
        until the bound falls below what is already kept.
        """
        memory, budget, uids = timeline.memory, self.budget, timeline.uids
        over_before = np.concatenate(([0], np.cumsum(memory > budget)))
        excess_before = np.concatenate(([0], np.cumsum(np.maximum(memory - budget, 0))))
        floor = 1e-9 * max(timeline.cost, 1e-12)
        mem, cost = self.graph.mem, self.graph.cost
        bounds = []
        for instance, v in enumerate(timeline.sequence):
            end = timeline.end[instance]
            if end - instance < 2 or over_before[end] == over_before[instance + 1]:
                continue
            uses = [instance, *timeline.reads[instance]]
            for j in range(len(uses) - 1):
                first, b = (uses[j], uses[j + 1]) if j == 0 else (uses[j] + 1, uses[j + 1])
                count = over_before[b] - over_before[first]
                if count:
                    gain = min(mem[v] * count, excess_before[b] - excess_before[first])
                    bounds.append((gain / max(0.0 if j == 0 else cost[v], floor), instance, j == 0, first, b))
        bounds.sort(reverse=True)
        found: list[tuple[float, Split]] = []
        best = 0.0
        for bound, instance, moved, first, b in bounds:
            if bound * (1 + self.noise) < _KEEP * best:
                break
            key = (uids[instance], uids[b])
            if key not in self.scored:
                lowest, splits = self._exact(timeline, instance, moved, first, b, excess_before, over_before)
                self.scored[key] = (uids[lowest], [s for s in splits if s.gain > 0])
            for split in self.scored[key][1]:
                score = split.gain / max(split.cost, floor)
                if self.noise:
                    score *= 1 + self.noise * (2 * self.rng.random() - 1)
                found.append((score, split))
                best = max(best, score)
        position = {uid: t for t, uid in enumerate(uids)}
        taken: list[tuple[int, int]] = []
        chosen: list[Split] = []
        for score, split in sorted(found, key=lambda item: item[0], reverse=True):
            if score < _KEEP * best:
                break
            low, high = position[split.span[0]], position[split.span[1]]
            if all(high < t[0] or low > t[1] for t in taken):
                taken.append((low, high))
                chosen.append(split)
        return chosen

    def _exact(self, timeline: Timeline, instance: int, moved: bool, first: int, b: int, excess_before: np.ndarray,
               over_before: np.ndarray) -> tuple[int, list[Split]]:
        """The splits of ``instance`` over the gap ``[first, b)``: the first position they change, and the variants.

        Where: just before the reader ``b``; or right after the last over-budget step of the gap (the
        inputs are kept alive for less long) and at the step after it with the least memory (room
        for the recomputation). What: the dead inputs kept alive until then; recomputed too (their
        own dead inputs kept alive); or every dead ancestor recomputed (the chain back to what is
        alive). The inserted computations are simulated on top of the memory crossing into their
        position.
        """
        graph, memory, sequence, uids, budget = self.graph, timeline.memory, timeline.sequence, timeline.uids, self.budget
        mem, cost = graph.mem, graph.cost
        inputs = _computed_inputs(graph)
        v = sequence[instance]
        positions = [b]
        last_over = first + int(np.flatnonzero(memory[first:b] > budget)[-1]) if over_before[b] > over_before[first] else b
        if last_over + 1 < b:
            crossing = memory[last_over + 1:b + 1] - np.array([mem[u] for u in sequence[last_over + 1:b + 1]])
            positions += [last_over + 1, last_over + 1 + int(np.argmin(crossing))]
        splits, lowest = [], b
        for q in dict.fromkeys(positions):
            dead = _dead_inputs(timeline, inputs[v], q)
            variants: list[tuple[tuple[int, ...], list[tuple[int, int]]]] = [((), dead)]
            if dead:
                one_level = tuple(sorted((p for p, _ in dead), key=self.topo_rank.__getitem__))
                kept: dict[int, int] = {}
                for p in one_level:
                    kept.update((u, e) for u, e in _dead_inputs(timeline, inputs[p], q) if u not in one_level)
                variants.append((one_level, list(kept.items())))
                if kept and CLOSURE_LIMITS[self.depth] != 0:
                    closure = self._dead_closure(timeline, v, q)
                    if closure is not None:
                        variants.append((closure, []))
            crossing_q = int(memory[q]) - mem[sequence[q]]  # alive into q's computation, v's old instance included
            for recomputed, extended in variants:
                changes = [(first, q, -mem[v])] + [(e + 1, q, mem[p]) for p, e in extended]
                low = min(c[0] for c in changes)
                lowest = min(lowest, low)
                delta = np.zeros(q - low, dtype=np.int64)
                for start, stop, amount in changes:
                    delta[start - low:stop - low] += amount
                after = int(np.maximum(memory[low:q] + delta - budget, 0).sum())
                base = crossing_q - mem[v] + sum(mem[p] for p, _ in extended)
                after += sum(max(base + level - budget, 0) for level in _chain_levels(graph, recomputed, v))
                gain = float(excess_before[q] - excess_before[low] - after)
                added = (0.0 if moved else cost[v]) + sum(cost[p] for p in recomputed)
                splits.append(Split(v, uids[instance], uids[q], moved, recomputed, added, gain, (uids[low], uids[q])))
        return lowest, splits

    def _dead_closure(self, timeline: Timeline, v: int, b: int) -> tuple[int, ...] | None:
        """Every ancestor of ``v`` reached through inputs whose last instance before ``b`` has ended, in
        topological order; None past the current limit of :data:`CLOSURE_LIMITS`."""
        inputs = _computed_inputs(self.graph)
        found: set[int] = set()
        stack = [p for p, _ in _dead_inputs(timeline, inputs[v], b)]
        while stack:
            p = stack.pop()
            if p not in found:
                found.add(p)
                limit = CLOSURE_LIMITS[self.depth]
                if limit is not None and len(found) > limit:
                    return None
                stack.extend(q for q, _ in _dead_inputs(timeline, inputs[p], b))
        return tuple(sorted(found, key=self.topo_rank.__getitem__))

    def apply(self, timeline: Timeline, splits: Sequence[Split]) -> Timeline:
        """The timeline with ``splits`` applied (spans apart); new computations get new uids.

        The scores whose span meets an applied split's are forgotten first.
        """
        position = {uid: t for t, uid in enumerate(timeline.uids)}
        spans = [(position[s.span[0]], position[s.span[1]]) for s in splits]
        for key, (low, _) in list(self.scored.items()):
            first, last = position[low], position[key[1]]
            if any(first <= end and last >= start for start, end in spans):
                del self.scored[key]
        sequence, uids = list(timeline.sequence), list(timeline.uids)
        fresh = max(uids, default=-1) + 1
        for split in sorted(splits, key=lambda s: position[s.reader], reverse=True):
            at = position[split.reader]
            inserted = [*split.recomputed, split.node]
            sequence[at:at] = inserted
            uids[at:at] = range(fresh, fresh + len(inserted))
            fresh += len(inserted)
            if split.moved:
                del sequence[position[split.instance]]
                del uids[position[split.instance]]
        return Timeline(timeline.graph, sequence, uids)


def _chain_levels(graph: ComputeGraph, chain: Sequence[int], node: int) -> list[int]:
    """Memory added during each computation of ``chain`` then ``node``, each chain member freed after its
    last reader among them (``node`` stays)."""
    inputs = _computed_inputs(graph)
    order = [*chain, node]
    last_reader = {}
    for position, u in enumerate(order):
        for p in inputs[u]:
            last_reader[p] = position
    levels, alive = [], 0
    for position, u in enumerate(order):
        alive += graph.mem[u]
        levels.append(alive)
        alive -= sum(graph.mem[p] for p in inputs[u] if p in last_reader and last_reader[p] == position
                     and p != node and p in chain)
    return levels


def _dead_inputs(timeline: Timeline, inputs: Sequence[int], position: int) -> list[tuple[int, int]]:
    """``(input, end of its last instance)`` for each input whose last instance before ``position`` has ended."""
    dead = []
    for p in inputs:
        instance = timeline.instance_before(p, position)
        if timeline.end[instance] < position:
            dead.append((p, timeline.end[instance]))
    return dead


def _computed_inputs(graph: ComputeGraph) -> tuple[tuple[int, ...], ...]:
    """Each node's non-pinned predecessors (pinned ones are always resident)."""
    return graph.memo("computed_inputs", lambda: tuple(
        tuple(p for p in preds if not graph.pinned[p]) for preds in graph.pred_idx))


def _topological_rank(graph: ComputeGraph) -> list[int]:
    rank = [0] * len(graph)
    for position, v in enumerate(graph.topo_idx):
        rank[v] = position
    return rank


def memory_aware_order(graph: ComputeGraph, nodes: Sequence[int]) -> list[int]:
    """A topological order of ``nodes`` that keeps little alive: always the ready node that adds least.

    A node adds its own size, unless nothing reads it, less the inputs it is the last reader of;
    ties go to the earlier node of the graph's order. O(n^2) in the worst case (a scan of the
    ready nodes per step).
    """
    needed = set(nodes)
    inputs = _computed_inputs(graph)
    rank = _topological_rank(graph)
    readers_left = [sum(1 for s in graph.succ_idx[v] if s in needed) for v in range(len(graph))]
    waiting = {v: sum(1 for p in inputs[v] if p in needed) for v in needed}
    ready = {v for v, count in waiting.items() if count == 0}
    order = []
    mem = graph.mem
    while ready:
        def added(v: int) -> tuple[int, int]:
            freed = sum(mem[p] for p in inputs[v] if readers_left[p] == 1)
            return (mem[v] if readers_left[v] else 0) - freed, rank[v]
        v = min(ready, key=added)
        ready.remove(v)
        order.append(v)
        for p in inputs[v]:
            readers_left[p] -= 1
        for w in graph.succ_idx[v]:
            if w in waiting:
                waiting[w] -= 1
                if waiting[w] == 0:
                    ready.add(w)
    return order

