"""``dtr``, ``dtr-eq``, ``lru``, ``largest-first``: online eviction, simulated (Kirisame et al., 2021).

Dynamic Tensor Rematerialization treats memory as a cache. The graph runs in topological order;
before a node is computed, every input that is not resident is recomputed first, recursively
(*on demand*); when the new tensor would not fit the budget, resident tensors are evicted one at
a time, the one with the smallest score first, until it does. A tensor no later node reads (and
no evicted tensor needs to be recomputed from) is freed at once, so at a budget that admits the
checkpoint-all schedule nothing is ever evicted.

One engine (:class:`EvictionEngine`) runs every heuristic; they differ only in the score
(:class:`EvictionPolicy`):

- ``dtr``: ``h_DTR(t) = (c(t) + c(e*(t))) / (m(t) * s(t))``, with ``c`` the compute cost, ``m`` the
  size, ``s`` the staleness (steps since last use) and ``e*(t)`` the *evicted neighbourhood*: the
  evicted tensors that would have to be recomputed to recompute ``t`` (its ancestors through
  evicted tensors, plus the dead parents among them, recomputed too) or that need ``t`` to be
  recomputed (its descendants through evicted tensors).
- ``dtr-eq``: the paper's cheap approximation: evicted tensors are merged into equivalence classes
  with their evicted neighbours (union-find, each class keeping its total cost), and ``e*(t)`` is
  the union of the classes next to ``t`` plus ``t``'s dead parents. Classes are never split when a
  member is recomputed, so on the evicted tensors the estimate can only be too high; the dead
  parents of evicted ancestors, which ``dtr`` counts, are not seen.
- ``lru``: the tensor unused for longest. ``largest-first``: the biggest tensor (oldest first on ties).

Speed: candidates are kept in an array with O(1) insertion and removal and scored with numpy.
For ``dtr`` the cost of each tensor's direct evicted and dead neighbours is maintained
incrementally; it bounds each score from below, so exact neighbourhoods (cached, and invalidated
only where a state change can reach) are computed for candidates in increasing order of the
bound until it exceeds the best exact score. For ``dtr-eq`` every tensor's class is kept in an
array, so all candidates' estimates are one gather, de-duplication and sum.

References
----------
Kirisame, Lyubomirsky, Haan, Brennan, He, Roesch, Chen, Tatlock, "Dynamic Tensor
Rematerialization", ICLR 2021.
"""

from __future__ import annotations

import numpy as np

from ...errors import InfeasibleBudget
from ...graph import ComputeGraph, node_labels
from ...schedule import COMPUTE, FREE, Op, Reason, Schedule, checkpoint_all_peak, needed_topological_order, reason
from ..registry import Option, SolverTags, register

UNCOMPUTED, RESIDENT, EVICTED, DEAD = 0, 1, 2, 3
"""Tensor states: never computed; in memory; evicted (may be recomputed); freed for good (no reader left)."""

_REFERENCE = "Kirisame et al., Dynamic Tensor Rematerialization, ICLR 2021"


class EvictionPolicy:
    """How an :class:`EvictionEngine` picks the tensor to evict. Subclasses set ``name`` and ``choose``."""

    name = ""
    uses_neighbourhood = False
    """Whether the engine must keep :attr:`EvictionEngine.neighbour_cost` up to date for it."""

    def attach(self, engine: "EvictionEngine") -> None:
        """Called once by the engine before it runs: set up per-tensor structures."""

    def on_change(self, engine: "EvictionEngine", v: int, before: int) -> None:
        """Called after tensor ``v`` changed state (from ``before`` to ``engine.state[v]``)."""

    def choose(self, engine: "EvictionEngine", candidates: np.ndarray) -> tuple[int, float]:
        """The victim among ``candidates`` (resident, evictable, unlocked: never empty) and its score."""
        raise NotImplementedError

    def explain(self, score: float, count: int) -> str:
        """Why the victim was chosen, for its ``free`` op."""
        raise NotImplementedError


class _DTRScore(EvictionPolicy):
    """``(c(t) + neighbourhood cost) / (m(t) * s(t))``, smallest first, by bound-and-refine.

    The cost of each tensor's direct evicted and dead neighbours (kept by the engine) bounds the
    neighbourhood cost from below; exact costs are computed in increasing order of the bound until
    the bound reaches the best exact score.
    """

    uses_neighbourhood = True

    def neighbourhood_cost(self, engine: "EvictionEngine", t: int) -> float:
        raise NotImplementedError

    def weight(self, engine: "EvictionEngine", candidates: np.ndarray) -> np.ndarray:
        """The score's denominator: memory x staleness."""
        return engine.mem[candidates] * (engine.clock - engine.last_use[candidates] + 1)

    def choose(self, engine, candidates):
        weight = self.weight(engine, candidates)
        bound = (engine.cost[candidates] + engine.neighbour_cost[candidates]) / weight
        best, victim = np.inf, int(candidates[np.argmin(bound)])
        for i in np.argsort(bound, kind="stable"):
            if bound[i] >= best:
                break
            t = int(candidates[i])
            score = (engine.cost[t] + self.neighbourhood_cost(engine, t)) / weight[i]
            if score < best:
                best, victim = score, t
        return victim, float(best)


class DTR(_DTRScore):
    """``h_DTR`` with the exact evicted neighbourhood.

    ``e*(t)``: the evicted tensors from which ``t`` is reached through evicted tensors (recomputing
    ``t`` recomputes them), the dead parents of ``t`` and of those (recomputed too, counted at their
    own cost), and the evicted tensors reached from ``t`` through evicted tensors (their
    recomputation needs ``t``).

    Each tensor's neighbourhood cost is cached; a state change of ``x`` invalidates only the
    resident tensors reached from ``x`` through evicted tensors, downwards and upwards.
    """

    name = "dtr"

    def attach(self, engine):
        self.cached = np.full(len(engine.state), np.nan)

    def on_change(self, engine, v, before):
        state, cached = engine.state, self.cached
        cached[v] = np.nan
        for neighbours in (engine.succs, engine.preds):
            seen = {v}
            stack = list(neighbours[v])
            while stack:
                w = stack.pop()
                if w in seen:
                    continue
                seen.add(w)
                if state[w] == RESIDENT:
                    cached[w] = np.nan
                elif state[w] == EVICTED:
                    stack.extend(neighbours[w])

    def neighbourhood_cost(self, engine, t):
        if not np.isnan(self.cached[t]):
            return float(self.cached[t])
        state, cost, preds, succs = engine.state, engine.cost, engine.preds, engine.succs
        seen = {t}
        total = 0.0
        stack = [t]
        while stack:  # evicted ancestors, and the dead parents of t and of them
            for u in preds[stack.pop()]:
                if u not in seen and state[u] in (EVICTED, DEAD):
                    seen.add(u)
                    total += cost[u]
                    if state[u] == EVICTED:
                        stack.append(u)
        stack = [t]
        while stack:  # evicted descendants
            for w in succs[stack.pop()]:
                if w not in seen and state[w] == EVICTED:
                    seen.add(w)
                    total += cost[w]
                    stack.append(w)
        self.cached[t] = total
        return total

    def explain(self, score, count):
        return f"evicted: h_DTR={score:.4g} smallest among {count} candidates"


class DTREquivalence(EvictionPolicy):
    """``h_DTR`` with ``e*`` approximated by union-find classes of evicted tensors.

    Each class keeps its members' total cost. A tensor's estimate is the sum over the distinct
    classes of its evicted neighbours, plus its dead parents. Every tensor's class is kept in an
    array (a union relabels the smaller class), so the scores of all candidates are computed at
    once: gather their neighbours, keep the evicted ones, drop repeated (candidate, class) pairs
    and add up the class costs.
    """

    name = "dtr-eq"

    def attach(self, engine):
        preds, succs = engine.preds, engine.succs
        size = len(preds)
        self.root = np.arange(size)
        self.members: list[list[int]] = [[v] for v in range(size)]
        self.class_cost = np.zeros(size)
        self.counted = [False] * size
        neighbours = [(*((u, True) for u in preds[v]), *((w, False) for w in succs[v])) for v in range(size)]
        self.offsets = np.cumsum([0] + [len(n) for n in neighbours])
        self.neighbour = np.array([u for n in neighbours for u, _ in n], dtype=np.int64)
        self.is_parent = np.array([p for n in neighbours for _, p in n], dtype=bool)

    def _union(self, a: int, b: int) -> None:
        ra, rb = int(self.root[a]), int(self.root[b])
        if ra == rb:
            return
        if len(self.members[ra]) < len(self.members[rb]):
            ra, rb = rb, ra
        moved = self.members[rb]
        self.root[moved] = ra
        self.members[ra].extend(moved)
        self.members[rb] = []
        self.class_cost[ra] += self.class_cost[rb]

    def on_change(self, engine, v, before):
        if engine.state[v] != EVICTED:
            return  # classes are never split: a recomputed tensor keeps its class and its cost in it
        if not self.counted[v]:
            self.counted[v] = True
            self.class_cost[self.root[v]] += engine.cost[v]
        for u in self.neighbour[self.offsets[v]: self.offsets[v + 1]]:
            if engine.state[u] == EVICTED:
                self._union(v, int(u))

    def neighbourhood_costs(self, engine: "EvictionEngine", candidates: np.ndarray) -> np.ndarray:
        """The estimated ``c(e*(t))`` of every candidate ``t``."""
        starts = self.offsets[candidates]
        counts = self.offsets[candidates + 1] - starts
        rows = np.repeat(np.arange(candidates.size), counts)
        slots = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        neighbours = self.neighbour[slots]
        state = engine.state[neighbours]
        evicted = state == EVICTED
        pairs = np.unique(rows[evicted] * len(self.root) + self.root[neighbours[evicted]])
        classes = np.bincount(pairs // len(self.root), weights=self.class_cost[pairs % len(self.root)],
                              minlength=candidates.size)
        dead = (state == DEAD) & self.is_parent[slots]
        parents = np.bincount(rows[dead], weights=engine.cost[neighbours[dead]], minlength=candidates.size)
        return classes + parents

    def choose(self, engine, candidates):
        staleness = engine.clock - engine.last_use[candidates] + 1
        scores = (engine.cost[candidates] + self.neighbourhood_costs(engine, candidates)) / (
            engine.mem[candidates] * staleness)
        i = int(np.argmin(scores))
        return int(candidates[i]), float(scores[i])

    def explain(self, score, count):
        return f"evicted: h_DTR^eq={score:.4g} smallest among {count} candidates (union-find neighbourhood)"


class LRU(EvictionPolicy):
    """Least recently used first."""

    name = "lru"

    def choose(self, engine, candidates):
        i = int(np.argmin(engine.last_use[candidates]))
        return int(candidates[i]), float(engine.clock - engine.last_use[candidates[i]])

    def explain(self, score, count):
        return f"evicted: least recently used (idle for {score:.0f} steps) among {count} candidates"


class LargestFirst(EvictionPolicy):
    """Largest tensor first; among equals, the least recently used."""

    name = "largest-first"

    def choose(self, engine, candidates):
        i = int(np.lexsort((engine.last_use[candidates], -engine.mem[candidates]))[0])
        return int(candidates[i]), float(engine.mem[candidates[i]])

    def explain(self, score, count):
        return f"evicted: largest resident tensor ({score:,.0f} bytes) among {count} candidates"


class EvictionEngine:
    """Runs a graph in topological order under a budget, evicting by ``policy`` and recomputing on demand.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    policy : EvictionPolicy
    max_computes : int
        Give up (:class:`InfeasibleBudget`) after this many computations: near the smallest
        feasible budget, eviction can thrash.
    """

    def __init__(self, graph: ComputeGraph, budget: int, policy: EvictionPolicy, max_computes: int):
        self.graph, self.budget, self.policy, self.max_computes = graph, budget, policy, max_computes
        labels = node_labels(graph)
        self.names = [labels[i] for i in graph.ids]  # reasons name tensors for people
        n = len(graph)
        needed = graph.needed_idx
        pinned = graph.pinned
        self.preds = [tuple(u for u in graph.pred_idx[v] if not pinned[u]) for v in range(n)]
        self.succs = [tuple(w for w in graph.succ_idx[v] if w in needed) for v in range(n)]
        self.mem = np.array(graph.mem, dtype=float)
        self.cost = np.array(graph.cost, dtype=float)
        self.state = np.array([RESIDENT if p else UNCOMPUTED for p in pinned], dtype=np.int8)
        self.pending = [len(s) for s in self.succs]  # readers not computed yet
        self.evicted_children = [0] * n
        self.locks = np.zeros(n, dtype=np.int32)
        self.last_use = np.zeros(n, dtype=np.int64)
        self.neighbour_cost = np.zeros(n)
        self.clock = 0
        self.memory = graph.pinned_bytes
        self.computes = 0
        self._slots = np.empty(n, dtype=np.int64)  # resident evictable tensors, in _slots[:_count]
        self._slot_of = np.full(n, -1, dtype=np.int64)
        self._count = 0
        self.ops: list[Op] = []
        self.reasons: list[Reason] = []
        policy.attach(self)

    # -- the resident, evictable set ------------------------------------------------------------

    def _add(self, v: int) -> None:
        if self.mem[v] > 0:
            self._slots[self._count] = v
            self._slot_of[v] = self._count
            self._count += 1

    def _remove(self, v: int) -> None:
        i = self._slot_of[v]
        if i < 0:
            return
        last = self._slots[self._count - 1]
        self._slots[i] = last
        self._slot_of[last] = i
        self._slot_of[v] = -1
        self._count -= 1

    # -- state changes ----------------------------------------------------------------------------

    def _neighbours_see(self, v: int, parent_side: float, child_side: float) -> None:
        """Add ``v``'s cost to its neighbours' neighbourhood bound: as a non-resident parent, as an evicted child."""
        if not self.policy.uses_neighbourhood:
            return
        c = self.cost[v]
        if parent_side:
            for w in self.succs[v]:
                self.neighbour_cost[w] += parent_side * c
        if child_side:
            for u in self.preds[v]:
                self.neighbour_cost[u] += child_side * c

    def _release_if_dead(self, v: int, consumer: int | None) -> None:
        """Free ``v`` for good when no later node reads it and no evicted tensor needs it."""
        if (self.state[v] == RESIDENT and not self.pending[v] and not self.evicted_children[v]
                and not self.locks[v] and not self.graph.pinned[v]):
            self.state[v] = DEAD
            self.memory -= self.graph.mem[v]
            self._remove(v)
            self.vacate(v)
            self._neighbours_see(v, 1, 0)
            self.policy.on_change(self, v, RESIDENT)
            self.ops.append((FREE, self.graph.ids[v]))
            if consumer is None:
                self.reasons.append(reason(f"{self.names[v]} has no later reader", rule="last-use"))
            else:
                self.reasons.append(reason(f"last read by {self.names[consumer]}", rule="last-use",
                                           consumer=self.graph.ids[consumer]))

    def _evict_one(self, needing: int) -> None:
        candidates = self._slots[: self._count]
        candidates = candidates[self.locks[candidates] == 0]
        if candidates.size == 0:
            self._no_room(needing)
        victim, score = self.policy.choose(self, candidates)
        self.evict(victim, needing, self.policy.explain(score, int(candidates.size)), score=score,
                   candidates=int(candidates.size))

    def _no_room(self, needing: int) -> None:
        name = self.graph.ids[needing]
        raise InfeasibleBudget(self.budget, self.surely_feasible(), self.policy.name,
                               f"computing '{name}' needs {self.graph.mem[needing]:,} more bytes with "
                               f"{self.memory:,} in use, and every resident tensor is an input of the "
                               f"computation in progress")

    def evict(self, victim: int, needing: int, why: str, **fields) -> None:
        """Free ``victim`` (resident, evictable, unlocked) to make room for ``needing``; ``why`` starts its reason."""
        memory = self.memory
        self.state[victim] = EVICTED
        self.memory -= self.graph.mem[victim]
        self._remove(victim)
        self.vacate(victim)
        for u in self.preds[victim]:
            self.evicted_children[u] += 1
        self._neighbours_see(victim, 1, 1)
        self.policy.on_change(self, victim, RESIDENT)
        self.ops.append((FREE, self.graph.ids[victim]))
        self.reasons.append(reason(why + f", to make room for {self.names[needing]}", rule=f"{self.policy.name}-evict",
                                   memory=memory, consumer=self.graph.ids[needing], **fields))

    # -- where tensors live: counted bytes here, a slab of addresses in :mod:`.slab` ----------------

    def surely_feasible(self) -> int:
        """A budget at which this engine never evicts (named in its refusals): the checkpoint-all peak."""
        return checkpoint_all_peak(self.graph)

    def make_room(self, v: int) -> None:
        """Evict until ``v`` fits (here: until the bytes in use plus ``v``'s are within the budget)."""
        while self.memory + self.graph.mem[v] > self.budget:
            self._evict_one(v)

    def vacate(self, v: int) -> None:
        """``v`` left memory (freed or evicted): nothing to do when memory is only counted."""

    def _compute(self, v: int, consumer: int | None) -> None:
        """Compute ``v`` (its inputs are resident and locked): make room, record the op, update the states."""
        mem = self.graph.mem[v]
        self.make_room(v)
        self.computes += 1
        if self.computes > self.max_computes:
            raise InfeasibleBudget(self.budget, self.surely_feasible(), self.policy.name,
                                   f"gave up after {self.max_computes:,} computations: at this budget eviction "
                                   f"thrashes")
        before = int(self.state[v])
        self.state[v] = RESIDENT
        self.memory += mem
        self._add(v)
        name = self.names[v]
        self.ops.append((COMPUTE, self.graph.ids[v]))
        if before == UNCOMPUTED:
            self.reasons.append(reason(f"{name} computed in topological order", rule=f"{self.policy.name}-compute"))
        else:
            who = self.names[consumer] if consumer is not None else "the graph's outputs"
            self.reasons.append(reason(f"{name} recomputed on demand: {who} needs it",
                                       consumer=self.graph.ids[consumer] if consumer is not None else None,
                                       rule=f"{self.policy.name}-recompute"))
            if before == EVICTED:
                for u in self.preds[v]:
                    self.evicted_children[u] -= 1
                self._neighbours_see(v, -1, -1)
            else:
                self._neighbours_see(v, -1, 0)
            self.policy.on_change(self, v, before)
        self.clock += 1
        self.last_use[v] = self.clock
        for u in self.preds[v]:
            self.last_use[u] = self.clock
        if before == UNCOMPUTED:
            for u in self.preds[v]:
                self.pending[u] -= 1

    def materialize(self, target: int) -> None:
        """Compute ``target`` for the first time, recomputing missing inputs on demand (recursively).

        As in the paper's ``PerformOp``, the inputs are taken in order: each is recomputed if it is
        not resident, then locked, so an input further down the list may still be evicted (and
        recomputed when its turn comes) while an earlier one is being recomputed.
        """
        # Frames: [node, consumer, locked inputs, next input]. An explicit stack: chains can be long.
        stack: list[list] = [[target, None, [], 0]]
        while stack:
            frame = stack[-1]
            v, _, locked, i = frame
            inputs = self.preds[v]
            if i < len(inputs):
                u = inputs[i]
                if self.state[u] == RESIDENT:
                    self.locks[u] += 1
                    locked.append(u)
                    frame[3] = i + 1
                else:
                    stack.append([u, v, [], 0])
                continue
            self._compute(v, frame[1])
            stack.pop()
            for u in locked:
                self.locks[u] -= 1
            for u in locked:
                self._release_if_dead(u, v)
            if not stack:
                self._release_if_dead(v, None)

    def run(self) -> Schedule:
        """The whole graph, in topological order; the schedule of everything that happened."""
        for v in needed_topological_order(self.graph):
            self.materialize(v)
        return Schedule.from_ops(self.ops, self.reasons, solver_info={
            "policy": self.policy.name, "computes": self.computes,
            "evictions": sum(1 for r in self.reasons if r["rule"] == f"{self.policy.name}-evict")})


_MAX_COMPUTES = Option("max_recompute_factor", int, 10, "give up after this many computations per node (eviction "
                                                        "can thrash near the smallest feasible budget)",
                       low=1, high=100000)


def _run(graph: ComputeGraph, budget: int, policy: EvictionPolicy, factor: int) -> Schedule:
    return EvictionEngine(graph, budget, policy, max(1, factor * len(graph.needed_idx))).run()


@register("dtr", "Dynamic Tensor Rematerialization, simulated: evict the smallest h_DTR = (cost + evicted "
                 "neighbourhood) / (memory x staleness), recompute on demand.",
          tags=SolverTags(quick=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def dtr(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
        ) -> Schedule:
    """DTR with the exact evicted neighbourhood.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: DTR is one pass.
    max_recompute_factor : int
        Give up after ``factor x nodes`` computations.

    Returns
    -------
    Schedule
        Every op with a reason: evictions give the score, the memory at that moment and the
        tensor that needed room; recomputations name the consumer.

    Raises
    ------
    InfeasibleBudget
        When a computation's inputs alone leave no room, or eviction thrashes (the checkpoint-all
        peak, where DTR never evicts, is reported as feasible).

    References
    ----------
    Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, section 3 (h_DTR).
    """
    del time_limit
    return _run(graph, budget, DTR(), max_recompute_factor)


@register("dtr-eq", "DTR with the union-find approximation of the evicted neighbourhood (equivalence classes).",
          tags=SolverTags(quick=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def dtr_eq(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
           ) -> Schedule:
    """DTR with ``e*`` approximated by equivalence classes of evicted tensors (see :class:`DTREquivalence`).

    Parameters and errors as :func:`dtr`.

    References
    ----------
    Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, section 4 (h_DTR^eq).
    """
    del time_limit
    return _run(graph, budget, DTREquivalence(), max_recompute_factor)


@register("lru", "Evict the least recently used tensor, recompute on demand (the DTR engine).",
          tags=SolverTags(quick=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def lru(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
        ) -> Schedule:
    """Least-recently-used eviction on the DTR engine (a baseline of the DTR paper). Parameters as :func:`dtr`."""
    del time_limit
    return _run(graph, budget, LRU(), max_recompute_factor)


@register("largest-first", "Evict the largest resident tensor, recompute on demand (the DTR engine).",
          tags=SolverTags(quick=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def largest_first(graph: ComputeGraph, budget: int, *, time_limit: float | None = None,
                  max_recompute_factor: int = 10) -> Schedule:
    """Largest-first eviction on the DTR engine (a baseline of the DTR paper). Parameters as :func:`dtr`."""
    del time_limit
    return _run(graph, budget, LargestFirst(), max_recompute_factor)
