"""``coop``, ``dtr-slab``, ``dte-slab``: eviction in an address space (Zhang et al., NeurIPS 2023).

DTR and its relatives count bytes: a tensor fits when the bytes in use plus its own are within the
budget. A device does not work that way: a tensor needs one *contiguous* free range, and evicting
tensors scattered over the address space frees bytes that no request can use (fragmentation).
Coop ("Coop: Memory is not a Commodity") runs the graph in one slab of the budget's size, every
tensor at an address (sizes rounded up to 512 bytes, best fit, freed ranges merged with their free
neighbours), and when a tensor does not fit:

- ``coop`` slides a window over the slab in address order and evicts the cheapest run of adjacent
  ranges (free ranges cost nothing; a pinned tensor or an input of the op in progress ends a run)
  that frees enough contiguous bytes; a tensor's cost is its compute cost plus that of its evicted
  neighbourhood, over its staleness (no size term: the window holds the size). Outputs of ops with a
  high cost density (compute cost per byte above the graph's median) are placed at the low end of the
  range they get, the others at the high end, so cheap tensors gather together and a window of them
  is cheap to evict (Coop's "cost-aware grouping").
- ``dtr-slab``: DTR's score, ``(c + c(e*)) / (m x s)``, one tensor at a time until a range fits.
- ``dte-slab``: the same with ``m`` replaced by the contiguous free bytes the eviction would create
  (the tensor plus its free neighbours), Coop's DTE baseline.

Tensors the step holds to its end (the graph's outputs: gradients accumulate into ``.grad``; the model's
outputs and loss go to the caller) are never evicted, as in Coop, and are placed at the top of the slab (the
highest free range that holds them), so that they do not cut the range evictions can free; nothing else is
placed in the open space at the top by Coop's grouping.

All three report Coop's fragmentation metric (``solver_info["fragmentation"]``): at every
allocation that had to evict, the free bytes in the slab over the budget after the evictions, averaged.
The schedule they return is checked by the simulator, which counts bytes: its peak is at most the
budget because the slab is.

References
----------
Zhang, Ma, Liu, Yuan, "Coop: Memory is not a Commodity", NeurIPS 2023; the algorithm as in OneFlow's
``oneflow/core/vm/remat/allocator.cpp``.
"""

from __future__ import annotations

import bisect

import numpy as np

from ...graph import ComputeGraph
from ...schedule import Schedule
from ...errors import InfeasibleBudget
from ..registry import SolverTags, register
from .dtr import _MAX_COMPUTES, DTR, EvictionEngine, EvictionPolicy

ALIGNMENT = 512
"""Bytes every range is rounded up to (CUDA's allocation alignment, as in Coop's slab)."""
FREE_RANGE = -1

_REFERENCE = "Zhang, Ma, Liu, Yuan, Coop: Memory is not a Commodity, NeurIPS 2023"


def aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


class Slab:
    """One range of ``size`` bytes cut into address-ordered pieces, each free or one tensor's."""

    def __init__(self, size: int):
        self.size = size
        self.starts: list[int] = [0]
        self.lengths: list[int] = [size]
        self.owners: list[int] = [FREE_RANGE]
        self.address: dict[int, int] = {}

    def best_fit(self, length: int) -> int | None:
        """The index of the smallest free piece of at least ``length`` bytes (lowest address on ties)."""
        best, best_length = None, None
        for k, owner in enumerate(self.owners):
            if owner == FREE_RANGE and self.lengths[k] >= length and (best_length is None
                                                                      or self.lengths[k] < best_length):
                best, best_length = k, self.lengths[k]
        return best

    def top_fit(self, length: int) -> int | None:
        """The index of the highest free piece of at least ``length`` bytes."""
        return next((k for k in range(len(self.owners) - 1, -1, -1)
                     if self.owners[k] == FREE_RANGE and self.lengths[k] >= length), None)

    def place(self, k: int, tensor: int, length: int, high: bool) -> None:
        """Give ``tensor`` ``length`` bytes of free piece ``k``, at its low or high end."""
        start, rest = self.starts[k], self.lengths[k] - length
        if rest == 0:
            self.owners[k] = tensor
        elif high:
            self.lengths[k] = rest
            self._insert(k + 1, start + rest, length, tensor)
        else:
            self.owners[k], self.lengths[k] = tensor, length
            self._insert(k + 1, start + length, rest, FREE_RANGE)
        self.address[tensor] = start + rest if high and rest else start

    def release(self, tensor: int) -> None:
        """Free ``tensor``'s piece and merge it with its free neighbours."""
        k = bisect.bisect_left(self.starts, self.address.pop(tensor))
        self.owners[k] = FREE_RANGE
        if k + 1 < len(self.owners) and self.owners[k + 1] == FREE_RANGE:
            self.lengths[k] += self.lengths[k + 1]
            self._delete(k + 1)
        if k > 0 and self.owners[k - 1] == FREE_RANGE:
            self.lengths[k - 1] += self.lengths[k]
            self._delete(k)

    def grow(self, length: int) -> None:
        """``length`` more free bytes at the top (merged with a free last piece)."""
        if self.owners[-1] == FREE_RANGE:
            self.lengths[-1] += length
        else:
            self._insert(len(self.owners), self.size, length, FREE_RANGE)
        self.size += length

    def free_bytes(self) -> int:
        return sum(length for length, owner in zip(self.lengths, self.owners) if owner == FREE_RANGE)

    def free_around(self, tensor: int) -> int:
        """The free bytes right below and right above ``tensor``'s piece."""
        k = bisect.bisect_left(self.starts, self.address[tensor])
        below = self.lengths[k - 1] if k > 0 and self.owners[k - 1] == FREE_RANGE else 0
        above = self.lengths[k + 1] if k + 1 < len(self.owners) and self.owners[k + 1] == FREE_RANGE else 0
        return below + above

    def _insert(self, k: int, start: int, length: int, owner: int) -> None:
        self.starts.insert(k, start)
        self.lengths.insert(k, length)
        self.owners.insert(k, owner)

    def _delete(self, k: int) -> None:
        del self.starts[k], self.lengths[k], self.owners[k]


def placed_extent(graph: ComputeGraph, schedule: Schedule) -> int:
    """The smallest slab a fixed schedule fits in when its tensors are placed best fit, in order, at the low end of
    the piece they get (sizes rounded to :data:`ALIGNMENT`; pinned tensors first): how far up the addresses go.

    This is what a static (byte-counting) schedule needs at addresses, to set beside a slab solver's slab.
    """
    lengths = [aligned(m) if m > 0 else 0 for m in graph.mem]
    slab = Slab(sum(lengths) + ALIGNMENT)
    extent = 0

    def place(v: int) -> None:
        nonlocal extent
        if lengths[v] and v not in slab.address:
            k = slab.best_fit(lengths[v])
            if k is None:  # fragmented past the room given: more room above
                slab.grow(lengths[v])
                k = slab.best_fit(lengths[v])
            slab.place(k, v, lengths[v], high=False)
            extent = max(extent, slab.address[v] + lengths[v])

    for v, pinned in enumerate(graph.pinned):
        if pinned:
            place(v)
    for action, node in schedule.ops:
        v = graph.index[node]
        if action == "compute":
            place(v)
        elif v in slab.address:
            slab.release(v)
    return extent


class SlabEngine(EvictionEngine):
    """The DTR engine with every tensor at an address in one slab of the budget's size.

    ``window``: evict by Coop's sliding window; else one tensor at a time by ``policy``.
    """

    def __init__(self, graph: ComputeGraph, budget: int, policy: EvictionPolicy, max_computes: int,
                 window: bool, grouping: bool):
        super().__init__(graph, budget, policy, max_computes)
        self.window, self.grouping = window, grouping
        self.slab = Slab(budget)
        self.lengths = [aligned(m) if m > 0 else 0 for m in graph.mem]
        needed = [v for v in graph.needed_idx if not graph.pinned[v] and graph.mem[v] > 0]
        density = {v: graph.cost[v] / graph.mem[v] for v in needed}
        threshold = float(np.median(list(density.values()))) if density else 0.0
        self.cheap = {v for v, d in density.items() if d < threshold}
        self.fragmentation: list[float] = []
        self.window_steps = 0
        ends = [v for v in graph.output_idx if graph.nodes[v].kind == "other"]
        self.held = set(graph.output_idx) | {u for v in ends for u in graph.pred_idx[v]}
        for v, pinned in enumerate(graph.pinned):
            if pinned and self.lengths[v]:
                k = self.slab.best_fit(self.lengths[v])
                if k is None:
                    raise InfeasibleBudget(budget, self.surely_feasible(), policy.name,
                                           f"the pinned tensors alone, each at an address rounded to {ALIGNMENT} "
                                           f"bytes, do not fit in a slab of {budget:,} bytes")
                self.slab.place(k, v, self.lengths[v], high=False)

    def _add(self, v: int) -> None:
        """Only tensors a step may drop are candidates: not the graph's outputs nor what its end holds (gradients
        accumulate into ``.grad`` and outputs go to the caller: as in Coop, they cannot be evicted)."""
        if v not in self.held:
            super()._add(v)

    def surely_feasible(self) -> int:
        """A slab that holds every tensor the graph computes, and the pinned ones, at once: nothing is ever evicted
        (the free range above what was placed is always one piece large enough for the rest)."""
        return sum(self.lengths[v] for v in range(len(self.lengths))
                   if self.graph.pinned[v] or v in self.graph.needed_idx)

    def make_room(self, v: int) -> None:
        length = self.lengths[v]
        if not length:
            return
        fit = self.slab.top_fit if v in self.held else self.slab.best_fit
        k = fit(length)
        if k is None:
            while k is None:
                self._evict_window(v, length) if self.window else self._evict_one(v)
                k = fit(length)
            self.fragmentation.append(self.slab.free_bytes() / self.budget)
        topmost = k == self.slab.top_fit(1)  # the open space at the top is kept for what the step holds
        self.slab.place(k, v, length, high=v in self.held or (self.grouping and v in self.cheap and not topmost))

    def vacate(self, v: int) -> None:
        if v in self.slab.address:
            self.slab.release(v)

    def _evictable(self, owner: int) -> bool:
        return owner != FREE_RANGE and self._slot_of[owner] >= 0 and self.locks[owner] == 0

    def _window_cost(self, owner: int) -> float:
        staleness = self.clock - self.last_use[owner] + 1
        return (self.cost[owner] + self.policy.neighbourhood_cost(self, owner)) / staleness

    def _evict_window(self, needing: int, length: int) -> None:
        """Evict the cheapest run of adjacent free or evictable pieces that spans ``length`` bytes."""
        slab = self.slab
        owners, lengths = slab.owners, slab.lengths
        best, best_cost = None, float("inf")
        start, span, cost = 0, 0, 0.0
        for end in range(len(owners)):
            owner = owners[end]
            self.window_steps += 1
            if owner != FREE_RANGE and not self._evictable(owner):
                start, span, cost = end + 1, 0, 0.0
                continue
            span += lengths[end]
            cost += self._window_cost(owner) if owner != FREE_RANGE else 0.0
            while span - lengths[start] >= length:  # the run is longer than it needs: drop its first piece
                span -= lengths[start]
                cost -= self._window_cost(owners[start]) if owners[start] != FREE_RANGE else 0.0
                start += 1
            if span >= length and cost < best_cost:
                best, best_cost = (start, end), cost
        if best is None:
            self._no_room(needing)
        victims = [o for o in owners[best[0]: best[1] + 1] if o != FREE_RANGE]
        for victim in victims:
            self.evict(victim, needing, f"evicted: in the cheapest window of {len(victims)} adjacent tensors "
                                        f"(cost {best_cost:.4g}) that frees {length:,} contiguous bytes",
                       score=best_cost, candidates=len(victims))

    def run(self) -> Schedule:
        schedule = super().run()
        info = {**schedule.solver_info, "slab": self.budget,
                "fragmentation": float(np.mean(self.fragmentation)) if self.fragmentation else 0.0,
                "evicting_allocations": len(self.fragmentation)}
        if self.window:
            info["window_steps"] = self.window_steps
        return schedule.with_updates(solver_info=info)


class DTE(DTR):
    """DTR's score with the freed contiguous range (the tensor and its free neighbours) in place of its size."""

    name = "dte-slab"

    def weight(self, engine, candidates):
        room = engine.mem[candidates] + np.array([engine.slab.free_around(int(t)) for t in candidates], dtype=float)
        return room * (engine.clock - engine.last_use[candidates] + 1)

    def explain(self, score, count):
        return f"evicted: h_DTE={score:.4g} smallest among {count} candidates (size with its free neighbours)"


class _Named(DTR):
    """DTR's policy under the name of the solver that runs it (the name is in every reason's rule)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name


def _run_on_slab(graph: ComputeGraph, budget: int, policy: EvictionPolicy, factor: int, window: bool) -> Schedule:
    engine = SlabEngine(graph, budget, policy, max(1, factor * len(graph.needed_idx)), window=window,
                        grouping=window)
    return engine.run()


@register("coop", "Coop: every tensor at an address in a slab of the budget's size; when one does not fit, evict "
                  "the cheapest window of adjacent tensors that frees a contiguous range (cost-aware grouping).",
          tags=SolverTags(addressed=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def coop(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
         ) -> Schedule:
    """Coop's sliding-window eviction in an address-ordered slab, recomputing on demand.

    Parameters and errors as :func:`~remat_core.solvers.eviction.dtr.dtr`; ``solver_info`` adds the
    slab's size, Coop's fragmentation metric, the number of allocations that evicted and the window's steps.
    """
    del time_limit
    return _run_on_slab(graph, budget, _Named("coop"), max_recompute_factor, window=True)


@register("dtr-slab", "DTR in an address-ordered slab of the budget's size: evict by h_DTR one tensor at a time "
                      "until a contiguous range fits (Coop's DTR baseline).",
          tags=SolverTags(addressed=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def dtr_slab(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
             ) -> Schedule:
    """DTR on Coop's slab. Parameters as :func:`coop`."""
    del time_limit
    return _run_on_slab(graph, budget, _Named("dtr-slab"), max_recompute_factor, window=False)


@register("dte-slab", "DTE in an address-ordered slab: DTR's score over the contiguous bytes an eviction frees "
                      "(Coop's DTE baseline).",
          tags=SolverTags(addressed=True), options=(_MAX_COMPUTES,), reference=_REFERENCE)
def dte_slab(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, max_recompute_factor: int = 10
             ) -> Schedule:
    """DTE on Coop's slab. Parameters as :func:`coop`."""
    del time_limit
    return _run_on_slab(graph, budget, DTE(), max_recompute_factor, window=False)
