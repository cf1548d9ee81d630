"""A simulated schedule, step by step: memory by kind, which computation each op is, what is resident.

The figures in :mod:`remat_core.viz.timeline` and the app's step inspector read these. They take the
:class:`~remat_core.schedule.simulator.SimulationResult` that :func:`remat_core.solve` attached, so nothing
here judges a schedule; it only replays one that the simulator already accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..errors import ScheduleFormatError
from ..graph import NODE_KINDS, ComputeGraph, node_label
from .schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, Schedule
from .simulator import SimulationResult


@dataclass(frozen=True)
class KindTimeline:
    """Resident bytes of each node kind after every op.

    Attributes
    ----------
    kinds : tuple of str
        The kinds present, in :data:`~remat_core.graph.compute_graph.NODE_KINDS` order.
    start : mapping of str to int
        Bytes per kind before the first op (the pinned nodes).
    by_kind : numpy.ndarray
        Shape ``(len(ops), len(kinds))``: bytes of each kind resident after each op.
    total : numpy.ndarray
        Shape ``(len(ops),)``: the simulator's memory after each op (the row sums of ``by_kind``).
    """

    kinds: tuple[str, ...]
    start: Mapping[str, int]
    by_kind: np.ndarray
    total: np.ndarray


def simulation_of(schedule: Schedule) -> SimulationResult:
    """The simulation :func:`remat_core.solve` attached to ``schedule``.

    Raises
    ------
    ScheduleFormatError
        For a schedule that was never simulated (read from a file, built by hand): run it through
        :func:`remat_core.schedule.simulator` or :func:`remat_core.solve` first.
    """
    if schedule.simulation is None:
        raise ScheduleFormatError("this schedule carries no simulation; get it from remat_core.solve() or attach "
                                  "simulate(graph, schedule) with schedule.with_updates(simulation=...)")
    return schedule.simulation


def memory_by_kind(graph: ComputeGraph, result: SimulationResult) -> KindTimeline:
    """Split the simulated memory timeline by node kind.

    Parameters
    ----------
    graph : ComputeGraph
        The graph the schedule was simulated on.
    result : SimulationResult

    Returns
    -------
    KindTimeline

    Notes
    -----
    One pass over the ops: each compute (and prefetch) adds ``mem`` to its kind's column and each free
    removes it, then a cumulative sum gives the resident bytes per kind, O(ops x kinds).
    """
    present = {n.kind for n in graph.nodes}
    kinds = tuple(k for k in NODE_KINDS if k in present)
    column = {k: c for c, k in enumerate(kinds)}
    node_column = np.fromiter((column[n.kind] for n in graph.nodes), dtype=np.int64, count=len(graph))
    mem = np.asarray(graph.mem, dtype=np.int64)
    start = np.zeros(len(kinds), dtype=np.int64)
    np.add.at(start, node_column[np.asarray(graph.pinned, dtype=bool)], mem[np.asarray(graph.pinned, dtype=bool)])
    delta = np.zeros((len(result.ops), len(kinds)), dtype=np.int64)
    if result.ops:
        index = graph.index
        nodes = np.fromiter((index[n] for _, n in result.ops), dtype=np.int64, count=len(result.ops))
        sign = {COMPUTE: 1, PREFETCH: 1, FREE: -1, OFFLOAD: 0}  # an offload's device copy stays until its free
        signs = np.fromiter((sign[a] for a, _ in result.ops), dtype=np.int64, count=len(result.ops))
        delta[np.arange(len(result.ops)), node_column[nodes]] = signs * mem[nodes]
    by_kind = np.cumsum(delta, axis=0) + start
    return KindTimeline(kinds=kinds, start={k: int(start[c]) for k, c in column.items()}, by_kind=by_kind,
                        total=by_kind.sum(axis=1) if len(kinds) else np.zeros(len(result.ops), dtype=np.int64))


def occurrences(result: SimulationResult) -> tuple[int, ...]:
    """Per op: which computation of its tensor it is (1 = first) for a compute, or is ending for a free."""
    seen: dict[str, int] = {}
    out = []
    for action, node in result.ops:
        if action == COMPUTE:
            seen[node] = seen.get(node, 0) + 1
        out.append(seen.get(node, 0))
    return tuple(out)


def ordinal(n: int) -> str:
    """``1`` -> ``'1st'``, ``2`` -> ``'2nd'``, ``11`` -> ``'11th'``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe_op(graph: ComputeGraph, result: SimulationResult, step: int, occurrence: int) -> str:
    """One line naming op ``step`` by its tensor's label: ``'compute layer 3 (fwd) (2nd computation)'``,
    ``'free layer 3 (fwd)'``, ``'offload layer 3 (fwd) to the host'`` or ``'prefetch layer 3 (fwd) from the host'``."""
    action, node = result.ops[step]
    name = node_label(graph, node)
    if action == COMPUTE:
        return f"compute {name}" + (f" ({ordinal(occurrence)} computation)" if occurrence > 1 else "")
    if action == OFFLOAD:
        return f"offload {name} to the host"
    if action == PREFETCH:
        return f"prefetch {name} from the host"
    return f"free {name}"
