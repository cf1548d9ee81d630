"""A schedule as a story told step by step, for teaching (the explorer's Learn page).

A step is one compute op and the frees that follow it, or, when the solver records which call of
its recursion emitted an op (a ``call`` field in the reasons, as a recursive solver does), all the
consecutive ops of one call. Each step carries what was computed and freed, the recorded reasons,
the recursion depth and bag when the solver gave them, and the resident set after it: enough to
draw the DAG and a memory timeline that grows as the steps advance. It works for any solver: one
that records nothing still gets one step per computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .graph import ComputeGraph
from .schedule import COMPUTE, Reason, Schedule
from .timeline import occurrences, ordinal, simulation_of


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
        The recursion call the solver named (``reason["call"]``), if any.
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
    previous_call: Any = None
    for step in range(len(result.ops)):
        call = (schedule.reason_at(step) or {}).get("call")
        if _starts_group(result.ops, groups, step, call, previous_call):
            groups.append([])
        groups[-1].append(step)
        previous_call = call
    steps = []
    for index, ops in enumerate(groups):
        reasons = tuple(r for r in (schedule.reason_at(s) for s in ops) if r)
        lead = next((r for r in reasons if "call" in r or "depth" in r or "bag" in r), reasons[0] if reasons else {})
        steps.append(WalkStep(
            index=index, first_op=ops[0], last_op=ops[-1],
            computed=tuple((result.ops[s][1], occurrence[s]) for s in ops if result.ops[s][0] == COMPUTE),
            freed=tuple(result.ops[s][1] for s in ops if result.ops[s][0] != COMPUTE), reasons=reasons,
            call=lead.get("call"), depth=lead.get("depth"), bag=lead.get("bag"), memory=result.memory[ops[-1]]))
    return steps


def _starts_group(ops, groups: list[list[int]], step: int, call: Any, previous_call: Any) -> bool:
    """A new step at a change of recursion call, else at each compute op."""
    if not groups:
        return True
    if call is not None or previous_call is not None:
        return call != previous_call
    return ops[step][0] == COMPUTE and any(ops[s][0] == COMPUTE for s in groups[-1])


def step_title(graph: ComputeGraph, step: WalkStep) -> str:
    """A heading for a step: what it computes (and recomputes), or what it frees."""
    if step.computed:
        names = [graph.node(n).display_name + (f" ({ordinal(k)} time)" if k > 1 else "") for n, k in step.computed]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return ("recompute " if step.recomputes else "compute ") + shown
    names = [graph.node(n).display_name for n in step.freed]
    return "free " + ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
