"""The stage grid that Checkmate and Moccasin share, and the one conversion from stages to ops.

Both formulations fix a topological order ``v_0 .. v_{n-1}`` of the nodes to compute and split a
schedule into ``n`` *stages*: stage ``t`` ends with the first computation of ``v_t`` (the
*frontier* advances by one node per stage) and may, before it, recompute earlier nodes
``v_i`` (``i < t``) in the same order, each at most once. A schedule in this form is a set of
*stage computes* ``(t, i)``; Checkmate writes it as the 0/1 matrix ``R[t, i]``.

Freeing is not a decision: given the computes, the memory-optimal frees are forced. Each
computation of a node starts an *instance* of its tensor; the instance is read by the computes of
its successors up to the node's next computation, and it is freed right after its last reader
(right after its own computation when nobody reads it). :func:`stage_ops` emits exactly that
schedule, with a reason on every op; :func:`stage_matrices` gives the matching ``R`` and minimal
``S`` (``S[t, i]``: an instance of ``v_i`` is kept from an earlier stage into stage ``t``), from
which Checkmate's memory accounting equals the simulator's, step by step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ...graph import ComputeGraph, node_labels
from ...schedule import (COMPUTE, FREE, Op, Reason, Schedule, needed_topological_order, reason, simulate)

DEFAULT_TIME_LIMIT = 60.0
"""Seconds the solvers that search this grid may spend when no ``time_limit`` is given."""

StageCompute = tuple[int, int]
"""``(stage, position)``: the node at ``position`` of the fixed order is computed in ``stage``."""


@dataclass(frozen=True, eq=False)
class StageGrid:
    """A graph seen through a fixed topological order of the nodes it must compute.

    Attributes
    ----------
    graph : ComputeGraph
    order : tuple of int
        Node index (into ``graph.nodes``) at each position: the graph's topological order
        restricted to the nodes some output needs. Pinned nodes are left out: they are resident
        throughout and count as a constant (``graph.pinned_bytes``).
    preds, succs : tuple of tuple of int
        Positions of the non-pinned predecessors and of the successors of each position.
    mem : numpy.ndarray of int64
        Bytes of each position's output.
    cost : numpy.ndarray of float64
        Cost of computing each position.
    last_useful_stage : numpy.ndarray of int64
        The last stage in which computing or keeping a position can matter: the largest position
        among the node and its descendants. After it nothing that the node feeds is computed for
        the first time, so a recomputation or a kept copy could serve nobody.
    """

    graph: ComputeGraph
    order: tuple[int, ...]
    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]
    mem: np.ndarray
    cost: np.ndarray
    last_useful_stage: np.ndarray

    @property
    def n(self) -> int:
        """Number of positions (and of stages)."""
        return len(self.order)

    def free_budget(self, budget: int) -> int:
        """Bytes left for computed tensors once the pinned nodes are resident."""
        return budget - self.graph.pinned_bytes

    def node_id(self, position: int) -> str:
        """The id of the node at ``position``."""
        return self.graph.ids[self.order[position]]


def stage_grid(graph: ComputeGraph, order: Sequence[int] | None = None) -> StageGrid:
    """The graph's :class:`StageGrid` over its topological order (built once per graph), or over ``order``.

    ``order``: another topological order of the nodes to compute (node indices), for instance the
    order in which a schedule first computes them (that schedule is then in the grid's stage form).
    """
    if order is None:
        return graph.memo("stage_grid", lambda: _build_grid(graph, needed_topological_order(graph)))
    return _build_grid(graph, order)


def _build_grid(graph: ComputeGraph, nodes: Sequence[int]) -> StageGrid:
    order = tuple(nodes)
    position = {node: p for p, node in enumerate(order)}
    preds = tuple(tuple(sorted(position[j] for j in graph.pred_idx[i] if not graph.pinned[j])) for i in order)
    succs_lists: list[list[int]] = [[] for _ in order]
    for p, ps in enumerate(preds):
        for q in ps:
            succs_lists[q].append(p)
    last = np.arange(len(order), dtype=np.int64)
    for p in range(len(order) - 1, -1, -1):
        for s in succs_lists[p]:
            last[p] = max(last[p], last[s])
    return StageGrid(graph=graph, order=order, preds=preds, succs=tuple(tuple(s) for s in succs_lists),
                     mem=np.array([graph.mem[i] for i in order], dtype=np.int64),
                     cost=np.array([graph.cost[i] for i in order], dtype=np.float64),
                     last_useful_stage=last)


def checkpoint_all_computes(grid: StageGrid) -> list[StageCompute]:
    """Every node once, in its own stage: ``R`` is the identity."""
    return [(t, t) for t in range(grid.n)]


def computes_from_matrix(r: np.ndarray) -> list[StageCompute]:
    """The stage computes of a (possibly fractional, already rounded) ``R`` matrix: entries > 0.5."""
    stages, positions = np.nonzero(np.tril(np.asarray(r)) > 0.5)
    return sorted(zip(stages.tolist(), positions.tolist()))


def computes_from_ops(grid: StageGrid, ops: Iterable[Op]) -> list[StageCompute] | None:
    """The stage computes of a schedule from any solver, or None when it is not frontier-advancing.

    A schedule is in stage form when its first computations follow the grid's order: each
    recomputation then belongs to the stage of the next first computation. A node recomputed twice
    in one stage is kept instead (one compute), recomputations after the last first computation
    serve no one and are dropped, and nodes no output needs are skipped. The frees are not read:
    the conversion frees each tensor after its last reader, so the result's peak can differ from the
    schedule's; :func:`measure` says what it is.
    """
    position = {grid.graph.ids[node]: p for p, node in enumerate(grid.order)}
    frontier = 0
    seen = [False] * grid.n
    computes: set[StageCompute] = set()
    for action, node in ops:
        p = position.get(node)
        if action != COMPUTE or p is None or frontier == grid.n:
            continue
        if p == frontier:
            computes.add((p, p))
            seen[p] = True
            frontier += 1
        elif seen[p]:
            computes.add((frontier, p))
        else:
            return None
    return sorted(computes) if frontier == grid.n else None


@dataclass(frozen=True)
class _Instances:
    """Who reads each computation (instance) of a stage-compute sequence."""

    first_reader: tuple[int | None, ...]  # index into the sequence of the first reader, or None
    last_reader: tuple[int | None, ...]


def _instances(grid: StageGrid, computes: Sequence[StageCompute]) -> _Instances:
    current: dict[int, int] = {}
    first: list[int | None] = [None] * len(computes)
    last: list[int | None] = [None] * len(computes)
    for c, (_, p) in enumerate(computes):
        for q in grid.preds[p]:
            inst = current.get(q)
            if inst is None:
                raise ValueError(f"stage computes are not a valid schedule: {grid.node_id(p)} is computed before its "
                                 f"predecessor {grid.node_id(q)} was ever computed")
            if first[inst] is None:
                first[inst] = c
            last[inst] = c
        current[p] = c
    return _Instances(tuple(first), tuple(last))


def _checked_computes(grid: StageGrid, computes: Iterable[StageCompute]) -> list[StageCompute]:
    """The computes in order, checked frontier-advancing, with recomputations nobody reads dropped.

    Dropping a recomputation whose result is never read lowers cost and memory and changes no
    other instance; it can leave a predecessor's recomputation unread in turn, hence the loop.
    """
    ordered = sorted(set(computes))
    frontier = [t for t, p in ordered if t == p]
    if frontier != list(range(grid.n)):
        raise ValueError("stage computes must compute every position in its own stage (frontier-advancing)")
    if any(p > t for t, p in ordered):
        raise ValueError("stage computes may only recompute earlier positions (position <= stage)")
    while True:
        readers = _instances(grid, ordered)
        unread = {c for c, (t, p) in enumerate(ordered) if t != p and readers.first_reader[c] is None}
        if not unread:
            return ordered
        ordered = [sc for c, sc in enumerate(ordered) if c not in unread]


def stage_ops(grid: StageGrid, computes: Iterable[StageCompute], *, rule: str,
              because: str) -> tuple[list[Op], list[Reason]]:
    """Ops for a stage-compute sequence: each compute, then every tensor freed after its last reader.

    Parameters
    ----------
    grid : StageGrid
    computes : iterable of (stage, position)
        Frontier-advancing: ``(t, t)`` for every stage, and recomputations ``(t, i)`` with
        ``i < t``; every predecessor of a compute must have been computed earlier in the sequence
        (ordered by stage, then position).
    rule : str
        The ``rule`` field of compute reasons; frees get ``rule + "-free"``.
    because : str
        Completes "recomputed in stage t because ..." (the solver's own words).

    Returns
    -------
    ops, reasons
        Parallel lists. Recomputations name their first reader (``consumer``) and the stage;
        frees name the last reader of the freed instance.

    Raises
    ------
    ValueError
        If the computes are not frontier-advancing or read a node never computed (a solver bug).
    """
    ordered = _checked_computes(grid, computes)
    readers = _instances(grid, ordered)
    frees_after: dict[int, list[int]] = {}
    for c, last in enumerate(readers.last_reader):
        frees_after.setdefault(c if last is None else last, []).append(c)
    ops: list[Op] = []
    reasons: list[Reason] = []
    labels = node_labels(grid.graph)
    for c, (t, p) in enumerate(ordered):
        node = grid.node_id(p)
        ops.append((COMPUTE, node))
        first = readers.first_reader[c]
        consumer = grid.node_id(ordered[first][1]) if first is not None else None
        if t == p:
            reasons.append(reason(f"stage {t}: the frontier reaches {labels[node]}, computed for the first time",
                                  rule=rule, stage=t, consumer=consumer))
        else:
            reasons.append(reason(f"recomputed in stage {t} for {labels.get(consumer, 'no reader')} because "
                                  f"{because}", rule=rule, stage=t, consumer=consumer))
        for inst in sorted(frees_after.get(c, ()), key=lambda i: (i == c, ordered[i][1])):
            freed = grid.node_id(ordered[inst][1])
            ops.append((FREE, freed))
            if inst == c:
                reasons.append(reason(f"nothing reads {labels[freed]} before it is needed again",
                                      rule=f"{rule}-free", stage=t))
            else:
                reasons.append(reason(f"last read by {labels[node]} until {labels[freed]} is next computed",
                                      rule=f"{rule}-free", stage=t, consumer=node))
    return ops, reasons


def stage_matrices(grid: StageGrid, computes: Iterable[StageCompute]) -> tuple[np.ndarray, np.ndarray]:
    """``R`` and the minimal ``S`` of a stage-compute sequence (0/1 ``int8`` matrices, ``n x n``).

    ``S[t, i] = 1`` exactly when an instance of position ``i`` computed before stage ``t`` is read
    in stage ``t`` or later: what the free-after-last-reader schedule of :func:`stage_ops` keeps.
    With these ``S``, Checkmate's memory accounting equals the simulated memory at every compute.
    """
    ordered = _checked_computes(grid, computes)
    readers = _instances(grid, ordered)
    n = grid.n
    r = np.zeros((n, n), dtype=np.int8)
    s = np.zeros((n, n), dtype=np.int8)
    for c, (t, p) in enumerate(ordered):
        r[t, p] = 1
        last = readers.last_reader[c]
        if last is not None:
            s[t + 1: ordered[last][0] + 1, p] = 1
    return r, s


def instance_spans(grid: StageGrid, computes: Iterable[StageCompute]) -> list[tuple[StageCompute, StageCompute]]:
    """For each compute, in order: ``(the compute, its last reader)`` (itself when nobody reads it)."""
    ordered = _checked_computes(grid, computes)
    readers = _instances(grid, ordered)
    return [(ordered[c], ordered[c if last is None else last]) for c, last in enumerate(readers.last_reader)]


def measure(grid: StageGrid, computes: Iterable[StageCompute]) -> tuple[int, float]:
    """``(peak, cost)`` of a stage-compute sequence, as the simulator measures its :func:`stage_ops`."""
    ops, _ = stage_ops(grid, computes, rule="stages", because="")
    result = simulate(grid.graph, ops)
    return result.peak, result.cost


def stage_peaks(grid: StageGrid, computes: Iterable[StageCompute]) -> np.ndarray:
    """The largest memory (bytes, pinned included) during each stage of a stage-compute sequence's ops."""
    ordered = _checked_computes(grid, computes)
    ops, _ = stage_ops(grid, ordered, rule="stages", because="")
    memory = simulate(grid.graph, ops).memory
    peaks = np.full(grid.n, grid.graph.pinned_bytes, dtype=np.int64)
    stage = -1
    count = 0
    for (action, _), used in zip(ops, memory):
        if action == COMPUTE:
            stage = ordered[count][0]
            count += 1
        peaks[stage] = max(peaks[stage], used)
    return peaks


def stage_schedule(grid: StageGrid, computes: Iterable[StageCompute], *, rule: str, because: str,
                   solver_info: dict[str, Any]) -> Schedule:
    """The :class:`~remat_core.schedule.schedule.Schedule` of a stage-compute sequence (ops by :func:`stage_ops`)."""
    ops, reasons = stage_ops(grid, computes, rule=rule, because=because)
    return Schedule.from_ops(ops, reasons, solver_info=solver_info)
