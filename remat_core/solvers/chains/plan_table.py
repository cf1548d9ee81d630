"""The dynamic program over plans: Rotor's table, and Griewank's (binomial splits, unit steps).

For every sub-chain ``s..t`` and memory level ``m`` the table holds the cheapest plan (see
:class:`PlanTable`); a solver reads the plan at its budget's level and the simulator measures it.

References
----------
Beaumont, Eyraud-Dubois, Herrmann, Joly, Shilova, "Optimal checkpointing for heterogeneous chains:
how to train deep neural networks with limited memory", arXiv:1911.13214, 2019 (Rotor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ...graph import ComputeGraph
from ...schedule import Link, Schedule, checkpoint_all_peak
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..registry import Option
from .chain import Chain, chains
from .plans import Candidate, Leaf, Plan, Split, Tape, best_candidate, measure_plan

TABLE_OPTIONS = (
    Option("max_links", int, 64, "merge links beyond this many (the table costs O(L^3 x memory_slots))",
           low=1, high=512),
    Option("memory_slots", int, 400, "memory levels of the table, up to the checkpoint-all peak", low=8,
           high=100000),
)
"""The options of the table solvers (``rotor``, ``griewank``), besides the segmentation."""


_LEAF, _TAPE, _NONE = -1, -2, -3

SplitSizes = Callable[[int], Sequence[int]]
"""``sizes(l)``: how many links a Split of an ``l``-link sub-chain may advance (``1 <= m < l``)."""


class LevelledTable:
    """What the tables over memory levels share: ``slot`` bytes per level and ``top``, the whole chain's least
    cost at each level; :func:`table_candidates` reads plans off them."""

    slot: int

    @property
    def top(self) -> np.ndarray:
        raise NotImplementedError

    @property
    def levels(self) -> int:
        """The top memory level (the checkpoint-all peak, pinned bytes excluded)."""
        return len(self.top) - 1

    def level(self, free_bytes: int) -> int:
        """The lowest memory level covering ``free_bytes`` (budget minus pinned bytes), capped at the top.

        Rounding up may name a plan slightly over the budget; :func:`table_candidates` measures it
        and steps down until the simulator agrees.
        """
        return min(self.levels, max(-1, -(-free_bytes // self.slot)))


@dataclass(frozen=True, eq=False)
class PlanTable(LevelledTable):
    """The best plan for every sub-chain and memory level: Rotor's dynamic program.

    ``cost[s, t, m]`` is the least cost of running groups ``t..s`` with ``A_{s-1}`` and the frontier
    ``D_t`` resident and ``m`` memory levels in all (inf: impossible):

    - Leaf: ``cost[t, t, m]`` = recompute link ``t``'s tape + group ``t``, if both peaks fit;
    - Tape: link ``s`` taped + ``cost[s+1, t, m - kept]`` + group ``s``;
    - Split after ``j``: advance ``s..j`` + ``cost[j+1, t, m - |A_{s-1}|]`` + ``cost[s, j, m]``.

    Sizes are rounded up to whole levels, so a plan the table accepts needs no more than it says
    (on chains, where the link figures are exact).

    Attributes
    ----------
    chain : Chain
    slot : int
        Bytes per memory level.
    cost, choice : ndarray, shape (L + 2, L + 2, levels + 1)
        ``choice``: -1 leaf, -2 tape, ``j >= 1`` split after link ``j``, -3 impossible.
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
    def top(self) -> np.ndarray:
        """The least cost of the whole chain at each memory level."""
        return self.cost[1, self.chain.length]

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
            raise ValueError(f"no plan for links {s}..{t} at memory level {m}")
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
        Count one per link computed (advance, tape or leaf) and nothing for backward groups,
        instead of the nodes' costs: revolve's objective, the number of forward steps.
    split_sizes : callable, optional
        Restrict Splits of an ``l``-link sub-chain to these advance lengths (default: all).

    Returns
    -------
    PlanTable
    """
    key = f"plan-table:{id(chain)}:{memory_slots}:{unit_steps}:{getattr(split_sizes, '__qualname__', None)}"
    return chain.graph.memo(key, lambda: _fill(chain, memory_slots, unit_steps, split_sizes))


def memory_levels(graph: ComputeGraph, memory_slots: int) -> tuple[int, int]:
    """``(slot, levels)``: the bytes of one memory level and the top level (the checkpoint-all peak, pinned bytes
    excluded), for at most about ``memory_slots`` levels.

    Levels are multiples of the sizes' common divisor: when that many levels fit in ``memory_slots``,
    every size is a whole number of levels and a table over them is exact.
    """
    free_peak = max(1, checkpoint_all_peak(graph) - graph.pinned_bytes)
    unit = math.gcd(*(graph.mem[v] for v in graph.needed_idx)) or 1
    slot = unit * max(1, -(-free_peak // (memory_slots * unit)))
    return slot, -(-free_peak // slot)


def shifted(values: np.ndarray, by: int) -> np.ndarray:
    """``values[..., m - by]`` (inf below ``by``): a sub-plan given ``by`` fewer levels."""
    levels = values.shape[-1] - 1
    out = np.full(values.shape, np.inf)
    if by <= levels:
        out[..., by:] = values[..., : levels + 1 - by]
    return out


def _fill(chain: Chain, memory_slots: int, unit_steps: bool, split_sizes: SplitSizes | None) -> PlanTable:
    graph, fig, length = chain.graph, chain.figures, chain.length
    slot, levels = memory_levels(graph, memory_slots)

    def up(x: float) -> int:
        return -(-int(x) // slot)

    def step(value: float, nodes: Sequence[int]) -> float:
        return (1.0 if nodes else 0.0) if unit_steps else value

    advance = [0.0] + [step(fig.advance_cost[k], chain.link(k).advance) for k in range(1, length + 1)]
    taped = [0.0] + [step(fig.tape_cost[k], chain.link(k).taped) for k in range(1, length + 1)]
    leaf = [0.0] + [step(fig.leaf_cost[k], chain.link(k).leaf) for k in range(1, length + 1)]
    backward = [0.0] * (length + 1) if unit_steps else list(fig.backward_cost)
    advanced = np.cumsum(advance)  # advanced[j] - advanced[s - 1]: advancing links s..j

    ms = np.arange(levels + 1)
    cost = np.full((length + 2, length + 2, levels + 1), np.inf)
    choice = np.full(cost.shape, _NONE, dtype=np.int32)
    tape_shift = np.zeros(length + 2, dtype=np.int64)
    split_shift = np.zeros(length + 2, dtype=np.int64)
    for s in range(1, length + 1):
        tape_shift[s] = up(fig.boundary[s - 1] + fig.tape_extra[s] - fig.boundary[s])
        split_shift[s] = up(fig.boundary[s - 1])

    for t in range(1, length + 1):
        frontier = fig.frontier[t]
        need = up(max(frontier + fig.leaf_peak[t], fig.backward_peak[t]))
        cost[t, t] = np.where(ms >= need, leaf[t] + backward[t], np.inf)
        choice[t, t] = np.where(ms >= need, _LEAF, _NONE)
        for s in range(t - 1, 0, -1):
            best = np.full(levels + 1, np.inf)
            how = np.full(levels + 1, _NONE, dtype=np.int32)
            if chain.link(s).tape:
                need = up(max(frontier + fig.tape_peak[s], fig.backward_peak[s]))
                value = taped[s] + shifted(cost[s + 1, t], int(tape_shift[s])) + backward[s]
                best = np.where(ms >= need, value, np.inf)
                how = np.where(np.isfinite(best), _TAPE, how)
            sizes = range(1, t - s + 1) if split_sizes is None else split_sizes(t - s + 1)
            js = np.array(sorted({s + m - 1 for m in sizes if 1 <= m <= t - s}), dtype=np.int64)
            if js.size:
                # advancing s..j: A_{s-1} stays, each later link frees its input after use
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


def table_candidates(graph: ComputeGraph, table: LevelledTable, budget: int, solver: str, link: Link | None = None,
                     **info) -> Iterator[Candidate]:
    """Measured plans of the table: the one at the budget's level, then lower levels while the simulator disagrees.

    Below the table's smallest feasible level, its smallest plan is still measured: the figures
    are conservative off chains, and the plan may fit after all.
    """
    top = table.top
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
        candidate = measure_plan(table.chain, plan, solver, link, memory_level=m, slot_bytes=table.slot,
                                 predicted=float(top[m]), links=table.chain.length,
                                 segmentation=table.chain.segmentation, **info)
        yield candidate
        if candidate.peak <= budget:
            return




def solve_with_table(graph: ComputeGraph, budget: int, solver: str, *, segmentation: str, max_links: int,
                     memory_slots: int, unit_steps: bool = False, split_sizes: SplitSizes | None = None,
                     merge_tail: bool = False) -> Schedule:
    """The table solvers' common body: checkpoint-all if it fits, else the tables' plans at the budget, measured.

    With ``segmentation="auto"`` there is a table per segmentation and the cheapest plan that fits wins.

    Raises
    ------
    InfeasibleBudget
        When no plan of the table fits (the smallest measured peak is reported).
    """
    fits = checkpoint_all_if_it_fits(graph, budget, solver)
    if fits is not None:
        return fits
    tables = [plan_table(chain, memory_slots, unit_steps, split_sizes)
              for chain in chains(graph, segmentation, max_links, merge_tail)]
    candidates = (c for table in tables for c in table_candidates(graph, table, budget, solver))
    links = " or ".join(f"{t.chain.length} links ({t.chain.segmentation})" for t in tables)
    return best_candidate(graph, budget, solver, candidates, f"no plan of the table over {links} fits")
