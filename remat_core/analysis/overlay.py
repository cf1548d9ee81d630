"""A simulated schedule laid over a view: what it keeps, recomputes and frees, overall or at one step.

:func:`schedule_status` gives every graph node a status (whole run: recomputed, computed once,
always resident, never computed; at a step: computed at that step, resident, freed, not computed
yet...); :meth:`NodeStatus.in_view` counts them per view node, where a group takes the first
status in :attr:`NodeStatus.statuses` that any of its nodes has (a group holding a recomputed
tensor reads as recomputed). Vectorised: a 20,000-op schedule at one step takes milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import ComputeGraph
from ..schedule import COMPUTE, SimulationResult
from .views import GraphView

RECOMPUTED, COMPUTED_ONCE, ALWAYS_RESIDENT, NEVER_COMPUTED = "recomputed", "computed once", "always resident", \
    "never computed"
SCHEDULE_STATUSES = (RECOMPUTED, COMPUTED_ONCE, ALWAYS_RESIDENT, NEVER_COMPUTED)
"""A node over the whole schedule, in the order a group takes them."""
THIS_STEP, RESIDENT_RECOMPUTED, RESIDENT, FREED, NOT_YET = "computed at this step", "resident, recomputed", \
    "resident", "freed", "not computed yet"
STEP_STATUSES = (THIS_STEP, RESIDENT_RECOMPUTED, RESIDENT, FREED, NOT_YET, ALWAYS_RESIDENT)
"""A node right after one step: kept in memory, freed (computed before, not resident now), or not reached."""


@dataclass(frozen=True, eq=False)
class NodeStatus:
    """A status per graph node (see the module docstring).

    Attributes
    ----------
    statuses : tuple of str
        The names, in the order a group takes them.
    status : numpy.ndarray of int
        Per graph node index, an index into ``statuses``.
    computes : numpy.ndarray of int
        Per graph node index, its computations (up to ``step`` when there is one).
    resident_bytes : int or None
        Memory right after ``step`` (None for the whole run).
    step : int or None
        The op index, or None for the whole run.
    """

    statuses: tuple[str, ...]
    status: np.ndarray
    computes: np.ndarray
    resident_bytes: int | None
    step: int | None

    def in_view(self, view: GraphView) -> "ViewStatus":
        """The statuses counted per view node."""
        kinds = len(self.statuses)
        slots = len(view.nodes)
        counts = np.bincount(view.member_of * kinds + self.status, minlength=slots * kinds).reshape(slots, kinds)
        return ViewStatus(self.statuses, (counts > 0).argmax(axis=1), counts,
                          np.bincount(view.member_of, weights=self.computes, minlength=slots).astype(np.int64),
                          self.resident_bytes, self.step)


@dataclass(frozen=True, eq=False)
class ViewStatus:
    """:class:`NodeStatus` per view node: ``status`` (the first status any member has), ``counts``
    (members per status, one column per name of ``statuses``) and ``computes`` (members' computations)."""

    statuses: tuple[str, ...]
    status: np.ndarray
    counts: np.ndarray
    computes: np.ndarray
    resident_bytes: int | None
    step: int | None


def schedule_status(graph: ComputeGraph, simulation: SimulationResult, step: int | None = None) -> NodeStatus:
    """Every node's status under a simulated schedule: over the whole run, or right after op ``step``.

    Raises
    ------
    ValueError
        For a step outside the schedule's ops.
    """
    pinned = np.asarray(graph.pinned, dtype=bool)
    nodes = np.array([graph.index[node] for _, node in simulation.ops], dtype=np.int64)
    computing = np.array([action == COMPUTE for action, _ in simulation.ops], dtype=bool)
    if step is None:
        computes = np.bincount(nodes[computing], minlength=len(graph))
        code = SCHEDULE_STATUSES.index
        status = np.select([pinned, computes > 1, computes == 1], [code(ALWAYS_RESIDENT), code(RECOMPUTED),
                                                                  code(COMPUTED_ONCE)], default=code(NEVER_COMPUTED))
        return NodeStatus(SCHEDULE_STATUSES, status, computes, None, None)
    if not 0 <= step < len(nodes):
        raise ValueError(f"step {step} is outside this schedule's {len(nodes)} ops (0 to {len(nodes) - 1})")
    done = slice(0, step + 1)
    computes = np.bincount(nodes[done][computing[done]], minlength=len(graph))
    last = np.full(len(graph), -1, dtype=np.int64)
    np.maximum.at(last, nodes[done], np.arange(step + 1))
    resident = (last >= 0) & computing[np.maximum(last, 0)]
    current = np.zeros(len(graph), dtype=bool)
    current[nodes[step]] = computing[step]
    code = STEP_STATUSES.index
    status = np.select([current, pinned, resident & (computes > 1), resident, last >= 0],
                       [code(THIS_STEP), code(ALWAYS_RESIDENT), code(RESIDENT_RECOMPUTED), code(RESIDENT), code(FREED)],
                       default=code(NOT_YET))
    return NodeStatus(STEP_STATUSES, status, computes, int(simulation.memory[step]), step)
