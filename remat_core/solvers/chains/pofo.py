"""``pofo``: Rotor's plans with an offload choice for every input a plan keeps (Beaumont et al., POFO).

Rotor keeps the input of a segment on the device while the rest of the chain runs and its backward
comes back to it. POFO may instead copy that input to the host over the transfer lane, drop it from
the device, and bring it back before its backward group needs it; the copies run beside the compute
lane and cost only what they do not hide. The family: every plan of :mod:`.rotor`, where each Tape
and each Split may offload what it keeps for its own groups (:func:`.plans.offloaded_input`):

- the offload is issued when the Tape or Split starts (a tensor copied once keeps its host copy,
  so a later plan from the same checkpoint drops and prefetches it without copying it out again);
- the device copy is freed once the step's own links are computed: the compute lane waits for the
  offload there, for ``max(0, copy - forward time)``;
- the prefetch is issued either before the backward group run just before the step's own (EARLY:
  it holds its bytes during that group and hides behind it, waiting ``max(0, copy - that group's
  backward time)``) or right before the step's own group (LATE: no extra bytes, the whole copy
  waited for).

Under these rules every offload ends before the next plan starts and every prefetch inside one
backward group, so the lanes are idle at the bounds of every sub-plan and the dynamic program keeps
Rotor's state (first link, last link, memory level) plus one bit, whether the first link's input
already has a host copy. Its predicted makespan is what :func:`~remat_core.schedule.simulate`
measures for its schedule over the same :class:`~remat_core.schedule.Link`, exactly on chains
(where the link figures are exact; tested against brute force over the family); elsewhere the
simulator has the last word, and the recompute-only plans of Rotor's table are measured beside
it, so ``pofo`` never takes longer than ``rotor``. Without a link nothing can be offloaded and
``pofo`` is ``rotor``.

POFO's own dynamic program (and ColossalAI's port of it) also carries the bytes still being copied
from one stage to the next, at the price of an estimated backward time no simulator reproduces;
here a copy overlaps the step that issued it, which keeps the prediction exact.

References
----------
Beaumont, Eyraud-Dubois, Shilova, "Efficient Combination of Rematerialization and Offloading for
Training DNNs", NeurIPS 2021 (POFO).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...graph import ComputeGraph
from ...schedule import OFFLOAD, PREFETCH, Link, Schedule
from ..checkpoint_all import checkpoint_all_if_it_fits
from ..registry import SolverTags, register
from .chain import Chain, chains
from .plan_table import TABLE_OPTIONS, LevelledTable, memory_levels, plan_table, shifted, table_candidates
from .plans import EARLY, KEEP, LATE, SEGMENTATION_OPTION, Leaf, Plan, Split, Tape, best_candidate, offloaded_input

_LEAF, _TAPE, _NONE = -1, -2, -3
_MODES = (KEEP, EARLY, LATE)


@dataclass(frozen=True, eq=False)
class OffloadTable(LevelledTable):
    """The best offloading plan for every sub-chain, memory level and host-copy bit.

    ``cost[s, t, h, m]`` is the least makespan of running groups ``t..s`` with ``A_{s-1}`` and the
    frontier ``D_t`` resident and ``m`` memory levels in all, where ``h`` says whether what a step
    from ``s`` would offload already has a host copy. ``choice`` is as in :class:`.plan_table.PlanTable`
    (-1 leaf, -2 tape, ``j`` split after link ``j``, -3 impossible) and ``mode`` indexes
    (keep, early, late).
    """

    chain: Chain
    link: Link
    slot: int
    cost: np.ndarray
    choice: np.ndarray
    mode: np.ndarray
    tape_shift: np.ndarray
    split_shift: np.ndarray

    @property
    def top(self) -> np.ndarray:
        """The least makespan of the whole chain at each memory level."""
        return self.cost[1, self.chain.length, 0]

    def plan(self, level: int) -> Plan:
        """The best plan for the whole chain at ``level`` (which must be feasible)."""
        return self._plan(1, self.chain.length, 0, level)

    def _plan(self, s: int, t: int, h: int, m: int) -> Plan:
        how, mode = int(self.choice[s, t, h, m]), int(self.mode[s, t, h, m])
        if how == _LEAF:
            return Leaf(t)
        if how == _TAPE:
            return Tape(s, self._plan(s + 1, t, 0, m - int(self.tape_shift[s, mode])), _MODES[mode])
        if how == _NONE:
            raise ValueError(f"no plan for links {s}..{t} at memory level {m}")
        left_h = 1 if mode else h
        return Split(s, how, self._plan(how + 1, t, 0, m - int(self.split_shift[s, how, mode])),
                     self._plan(s, how, left_h, m), _MODES[mode])


def offload_table(chain: Chain, link: Link, memory_slots: int) -> OffloadTable:
    """Fill POFO's dynamic program for ``chain`` over ``link`` (cached on the graph)."""
    key = (f"offload-table:{id(chain)}:{memory_slots}:{link.to_host}:{link.to_device}:{link.latency}:"
           f"{link.full_duplex}")
    return chain.graph.memo(key, lambda: _fill(chain, link, memory_slots))


def _copy_time(graph: ComputeGraph, link: Link, action: str, nodes: frozenset[int]) -> float:
    """Time the lane takes to copy ``nodes`` one after the other."""
    return sum(link.duration(action, graph.mem[v]) for v in nodes)


def _fill(chain: Chain, link: Link, memory_slots: int) -> OffloadTable:
    graph, fig, length = chain.graph, chain.figures, chain.length
    mem = graph.mem
    slot, levels = memory_levels(graph, memory_slots)

    def up(x: float) -> int:
        return -(-int(x) // slot)

    advanced = np.cumsum([0.0] + [fig.advance_cost[k] for k in range(1, length + 1)])
    back = list(fig.backward_cost) + [0.0]
    backward_need = [0] + [up(fig.backward_peak[k]) for k in range(1, length + 1)] + [0]

    # Splits: what each (s, j) offloads, its copy times and the levels the right part gets per mode.
    split_shift = np.zeros((length + 2, length + 2, 3), dtype=np.int64)
    split_moved = np.zeros((length + 2, length + 2), dtype=np.int64)   # levels of the offloaded input
    split_out = np.zeros((length + 2, length + 2))
    split_in = np.zeros((length + 2, length + 2))
    for s in range(1, length + 1):
        for j in range(s, length):
            moved = offloaded_input(chain, Split(s, j, Leaf(j + 1), Leaf(j)))
            nbytes = sum(mem[v] for v in moved)
            split_shift[s, j, 0] = up(fig.boundary[s - 1])
            split_shift[s, j, 1:] = up(fig.boundary[s - 1] - nbytes) if moved else split_shift[s, j, 0]
            split_moved[s, j] = up(nbytes) if moved else -1
            split_out[s, j] = _copy_time(graph, link, OFFLOAD, moved)
            split_in[s, j] = _copy_time(graph, link, PREFETCH, moved)
    tape_shift = np.zeros((length + 2, 3), dtype=np.int64)
    tape_moved = np.full(length + 2, -1, dtype=np.int64)
    tape_out = np.zeros(length + 2)
    tape_in = np.zeros(length + 2)
    for s in range(1, length + 1):
        kept = fig.boundary[s - 1] + fig.tape_extra[s] - fig.boundary[s]
        tape_shift[s, :] = up(kept)
        moved = offloaded_input(chain, Tape(s, Leaf(s + 1)))
        if moved and s < length:
            nbytes = sum(mem[v] for v in moved)
            tape_shift[s, 1:] = max(0, up(kept - nbytes))
            tape_moved[s] = up(nbytes)
            tape_out[s] = _copy_time(graph, link, OFFLOAD, moved)
            tape_in[s] = _copy_time(graph, link, PREFETCH, moved)

    ms = np.arange(levels + 1)
    shape = (length + 2, length + 2, 2, levels + 1)
    cost = np.full(shape, np.inf)
    choice = np.full(shape, _NONE, dtype=np.int32)
    mode = np.zeros(shape, dtype=np.int8)
    for t in range(1, length + 1):
        frontier = fig.frontier[t]
        need = up(max(frontier + fig.leaf_peak[t], fig.backward_peak[t]))
        for h in (0, 1):
            cost[t, t, h] = np.where(ms >= need, fig.leaf_cost[t] + back[t], np.inf)
            choice[t, t, h] = np.where(ms >= need, _LEAF, _NONE)
        for s in range(t - 1, 0, -1):
            rest = cost[s + 1, t, 0]
            js = np.arange(s, t)
            peaks = np.maximum.accumulate([fig.advance_first[s]] + [fig.boundary[s - 1] + fig.advance_next[k]
                                                                    for k in range(s + 1, t)])
            advance_need = np.array([up(frontier + p) for p in peaks])
            advance_time = advanced[js] - advanced[s - 1]
            for h in (0, 1):
                options, kinds, modes = [], [], []
                if chain.link(s).tape:
                    tape_need = up(max(frontier + fig.tape_peak[s], fig.backward_peak[s]))
                    base = fig.tape_cost[s] + back[s]
                    for k, name in enumerate(_MODES):
                        if k and tape_moved[s] < 0:
                            continue
                        right = shifted(rest, int(tape_shift[s, k]))
                        value = base + right
                        if k:
                            stall = 0.0 if h else max(0.0, tape_out[s] - fig.tape_cost[s])
                            if name == EARLY:
                                hold = int(tape_shift[s, k]) + backward_need[s + 1] + int(tape_moved[s])
                                value = np.where(ms >= hold, value + max(0.0, tape_in[s] - back[s + 1]), np.inf)
                            else:
                                value = value + tape_in[s]
                            value = value + stall
                        options.append(np.where(ms >= tape_need, value, np.inf)[None, :])
                        kinds.append([_TAPE])
                        modes.append([k])
                for k, name in enumerate(_MODES):
                    movable = js[split_moved[s, js] >= 0] if k else js
                    if movable.size == 0:
                        continue
                    index = movable - s
                    right = np.stack([shifted(cost[j + 1, t, 0], int(split_shift[s, j, k])) for j in movable])
                    left = cost[s, movable, 1 if k else h]
                    value = advance_time[index, None] + right + left
                    if k:
                        stall = np.zeros(movable.size) if h else np.maximum(
                            0.0, split_out[s, movable] - advance_time[index])
                        if name == EARLY:
                            hold = split_shift[s, movable, k] + np.array([backward_need[j + 1] for j in movable]) \
                                + split_moved[s, movable]
                            hidden = np.maximum(0.0, split_in[s, movable] - np.array([back[j + 1] for j in movable]))
                            value = np.where(ms[None, :] >= hold[:, None], value + hidden[:, None], np.inf)
                        else:
                            value = value + split_in[s, movable][:, None]
                        value = value + stall[:, None]
                    options.append(np.where(ms[None, :] >= advance_need[index][:, None], value, np.inf))
                    kinds.append(list(movable))
                    modes.append([k] * movable.size)
                values = np.concatenate(options)
                pick = np.argmin(values, axis=0)
                best = values[pick, ms]
                feasible = np.isfinite(best)
                kind_of = np.concatenate([np.asarray(k) for k in kinds])[pick]
                mode_of = np.concatenate([np.asarray(k) for k in modes])[pick]
                cost[s, t, h] = best
                choice[s, t, h] = np.where(feasible, kind_of, _NONE)
                mode[s, t, h] = np.where(feasible, mode_of, 0)
    return OffloadTable(chain, link, slot, cost, choice, mode, tape_shift, split_shift)


@register("pofo", "POFO: Rotor's dynamic program with an offload choice for every input a plan keeps, the copies "
                  "hidden behind compute on the transfer lane; Rotor when no bandwidth is given.",
          tags=SolverTags(offloads=True, without_link="rotor"),
          options=(SEGMENTATION_OPTION, *TABLE_OPTIONS),
          reference="Beaumont, Eyraud-Dubois, Shilova, Efficient Combination of Rematerialization and Offloading "
                    "for Training DNNs, NeurIPS 2021")
def pofo(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, link: Link | None = None,
         segmentation: str = "auto", max_links: int = 64, memory_slots: int = 400) -> Schedule:
    """The plan of least makespan on the link chain at this budget, offloading over ``link``.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: the tables are filled in full.
    link : Link, optional
        The transfer lane (None: recompute only, Rotor's plans).
    segmentation, max_links, memory_slots
        As for ``rotor``.

    Returns
    -------
    Schedule
        Checkpoint-all when it fits; else the measured plan of least makespan among the offload
        table's and Rotor's at the budget. ``solver_info`` gives the level and the table's
        predicted makespan.

    Raises
    ------
    InfeasibleBudget
        When no plan of either table fits.
    """
    del time_limit
    fits = checkpoint_all_if_it_fits(graph, budget, "pofo")
    if fits is not None:
        return fits
    found = chains(graph, segmentation, max_links)
    candidates = []
    for chain in found:
        if link is not None:
            candidates.extend(table_candidates(graph, offload_table(chain, link, memory_slots), budget, "pofo", link,
                                               offload=True))
        candidates.extend(table_candidates(graph, plan_table(chain, memory_slots), budget, "pofo", link,
                                           offload=False))
    links = " or ".join(f"{c.length} links ({c.segmentation})" for c in found)
    return best_candidate(graph, budget, "pofo", candidates, f"no plan of the tables over {links} fits")
