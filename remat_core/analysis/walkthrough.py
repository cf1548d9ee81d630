"""A schedule as a story told step by step, for teaching (the explorer's Learn page).

A step is one compute op and the frees that follow it, or, when the solver records which call of
its recursion emitted a compute (a ``call`` field in its reason, or the ``frame`` and ``depth`` of
the separator recursion's reasons), all the consecutive computes of one call and their frees. Each
step carries what was computed and freed, the recorded reasons, the recursion depth and bag when
the solver gave them, and the memory after it: enough to draw the DAG and a memory timeline that
grows as the steps advance. It works for any solver: one
that records nothing still gets one step per computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..graph import ComputeGraph
from ..schedule import COMPUTE, Reason, Schedule, occurrences, ordinal, simulation_of


@dataclass(frozen=True)
class WalkStep:
    """One step of a walk-through.

    Attributes
    ----------
    index : int
        Position in the walk-through.
    first_op, last_op : int
        The ops this step covers (inclusive).
    computed : tuple of (str, int)
        Tensors computed, with which computation of each it was (1 = first).
    freed : tuple of str
        Tensors freed.
    reasons : tuple of dict
        The reasons recorded with these ops (those that have one).
    call : Any
        The recursion call the step belongs to (``reason["call"]``, else ``(frame, depth)``), if
        the solver named one.
    frame : Any
        The separator-tree node (bag) whose frame ran the step (``reason["frame"]``), if named.
    depth : int or None
        The recursion depth the solver named (``reason["depth"]``), if any.
    bag : Any
        The bag the solver named (``reason["bag"]``), if any.
    memory : int
        Bytes resident after the step.
    """

    index: int
    first_op: int
    last_op: int
    computed: tuple[tuple[str, int], ...]
    freed: tuple[str, ...]
    reasons: tuple[Reason, ...]
    call: Any
    frame: Any
    depth: int | None
    bag: Any
    memory: int

    @property
    def recomputes(self) -> bool:
        """Whether the step recomputes some tensor."""
        return any(k > 1 for _, k in self.computed)


def walkthrough_steps(schedule: Schedule) -> list[WalkStep]:
    """Cut a simulated schedule into teaching steps (see the module notes).

    Raises
    ------
    ScheduleFormatError
        For a schedule without a simulation.
    """
    result = simulation_of(schedule)
    occurrence = occurrences(result)
    groups: list[list[int]] = []
    current: Any = None
    for step, (action, _) in enumerate(result.ops):
        if action == COMPUTE or not groups:
            key = call_key(schedule.reason_at(step))
            if not groups or key is None or key != current:
                groups.append([])
            current = key
        groups[-1].append(step)
    steps = []
    for index, ops in enumerate(groups):
        reasons = tuple(r for r in (schedule.reason_at(s) for s in ops) if r)
        lead = schedule.reason_at(ops[0]) or {}
        steps.append(WalkStep(
            index=index, first_op=ops[0], last_op=ops[-1],
            computed=tuple((result.ops[s][1], occurrence[s]) for s in ops if result.ops[s][0] == COMPUTE),
            freed=tuple(result.ops[s][1] for s in ops if result.ops[s][0] != COMPUTE), reasons=reasons,
            call=call_key(lead), frame=lead.get("frame"), depth=lead.get("depth"), bag=lead.get("bag"),
            memory=result.memory[ops[-1]]))
    return steps


def call_key(reason: Reason | None) -> Any:
    """Which recursion call a compute belongs to: ``reason["call"]``, else ``(frame, depth)``, else None."""
    if not reason:
        return None
    if reason.get("call") is not None:
        return reason["call"]
    if reason.get("frame") is not None:
        return (reason["frame"], reason.get("depth"))
    return None


def step_title(graph: ComputeGraph, step: WalkStep) -> str:
    """A heading for a step: what it computes (and recomputes), or what it frees."""
    if step.computed:
        names = [graph.node(n).display_name + (f" ({ordinal(k)} time)" if k > 1 else "") for n, k in step.computed]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return ("recompute " if step.recomputes else "compute ") + shown
    names = [graph.node(n).display_name for n in step.freed]
    return "free " + ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
