"""A schedule as a story told step by step, for teaching (the explorer's Learn page).

Two kinds of walk-through:

- :func:`walkthrough_steps`, for any solver: a step is one compute op and the frees that follow
  it, or, when the solver records which call of its recursion emitted a compute (a ``call`` field
  in its reason, or the ``frame`` and ``depth`` of the separator recursion's reasons), all the
  consecutive computes of one call and their frees.
- :func:`recursion_walk`, for the recursion of TW-Remat and PW-Remat recorded call by call
  (:func:`remat_core.solvers.trace_recursion`): a step is a call opening (what it was asked for,
  its subgraph, its separator bag, what it will recompute and why) or a run of ops one call emits
  between the calls it opens. Each step knows its call, so a learner sees the whole call at every
  step: depth, parent, the subgraph, the bag kept resident.

Every step carries the memory after it and the running peak and cost: enough to draw the DAG and a
memory timeline that grows as the steps advance. Texts name tensors by their labels
(:func:`remat_core.graph.node_labels`), never by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any, Mapping, Sequence

from ..graph import ComputeGraph, node_labels
from ..schedule import COMPUTE, Reason, Schedule, occurrences, ordinal, schedule_stats, simulate, simulation_of
from ..solvers import RecursionCall, RecursionTrace

LISTED = 4
"""Names listed in a step's title before "and N more"."""


@dataclass(frozen=True)
class WalkStep:
    """One step of a walk-through.

    Attributes
    ----------
    index : int
        Position in the walk-through.
    first_op, last_op : int
        The ops this step covers (inclusive); ``last_op = first_op - 1`` for a step without ops
        (a recursion call opening, before its first op).
    computed : tuple of (str, int)
        Tensors computed, with which computation of each it was (1 = first).
    freed : tuple of str
        Tensors freed.
    reasons : tuple of dict
        The reasons recorded with these ops (those that have one).
    call : Any
        The recursion call the step belongs to (``reason["call"]``, else ``(frame, depth)``), if
        the solver named one; for a :func:`recursion_walk`, the call's index.
    frame : Any
        The separator-tree node (bag) whose frame ran the step (``reason["frame"]``), if named.
    depth : int or None
        The recursion depth the solver named (``reason["depth"]``), if any.
    bag : Any
        The bag the solver named (``reason["bag"]``), if any.
    memory : int
        Bytes resident after the step.
    peak : int
        The largest memory reached so far (pinned bytes included).
    cost : float
        The compute cost spent so far.
    opens : bool
        Whether the step opens its call (a :func:`recursion_walk` step).
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
    peak: int = 0
    cost: float = 0.0
    opens: bool = False

    @property
    def recomputes(self) -> bool:
        """Whether the step recomputes some tensor."""
        return any(k > 1 for _, k in self.computed)

    @property
    def ops(self) -> range:
        """The op indices the step covers (empty for a call opening before its first op)."""
        return range(self.first_op, self.last_op + 1)


class _Running:
    """Memory, running peak and running cost after each op of a simulated schedule (-1: the start)."""

    def __init__(self, graph: ComputeGraph, schedule: Schedule):
        result = simulation_of(schedule)
        self.result = result
        self.occurrence = occurrences(result)
        cost = graph.cost
        index = graph.index
        self.peaks = list(accumulate(result.memory, max, initial=result.start_memory))
        self.costs = list(accumulate((cost[index[n]] if a == COMPUTE else 0.0 for a, n in result.ops), initial=0.0))

    def step(self, schedule: Schedule, index: int, ops: Sequence[int], call: Any, lead: Mapping[str, Any],
             opens: bool = False, first_op: int | None = None) -> WalkStep:
        result = self.result
        first = ops[0] if ops else int(first_op or 0)
        last = ops[-1] if ops else first - 1
        return WalkStep(
            index=index, first_op=first, last_op=last,
            computed=tuple((result.ops[s][1], self.occurrence[s]) for s in ops if result.ops[s][0] == COMPUTE),
            freed=tuple(result.ops[s][1] for s in ops if result.ops[s][0] != COMPUTE),
            reasons=tuple(r for r in (schedule.reason_at(s) for s in ops) if r), call=call,
            frame=lead.get("frame"), depth=lead.get("depth"), bag=lead.get("bag"),
            memory=result.memory[last] if last >= 0 else result.start_memory,
            peak=self.peaks[last + 1], cost=self.costs[last + 1], opens=opens)


def walkthrough_steps(graph: ComputeGraph, schedule: Schedule) -> list[WalkStep]:
    """Cut a simulated schedule of ``graph`` into teaching steps (see the module notes).

    Raises
    ------
    ScheduleFormatError
        For a schedule without a simulation.
    """
    running = _Running(graph, schedule)
    groups: list[list[int]] = []
    current: Any = None
    for step, (action, _) in enumerate(running.result.ops):
        if action == COMPUTE or not groups:
            key = call_key(schedule.reason_at(step))
            if not groups or key is None or key != current:
                groups.append([])
            current = key
        groups[-1].append(step)
    steps = []
    for index, ops in enumerate(groups):
        lead = schedule.reason_at(ops[0]) or {}
        steps.append(running.step(schedule, index, ops, call_key(lead), lead))
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


def listed(names: Sequence[str], limit: int = LISTED) -> str:
    """``a, b, c and 2 more``."""
    if not names:
        return "nothing"
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def step_title(graph: ComputeGraph, step: WalkStep, doer: bool = False) -> str:
    """A heading for a step: what it computes (and recomputes), or what it frees; with ``doer``, the verb
    agrees with a subject put before it ("call 3 computes ...")."""
    labels = node_labels(graph)
    s = "s" if doer else ""
    if step.computed:
        names = [labels[n] + (f" ({ordinal(k)} time)" if k > 1 else "") for n, k in step.computed]
        return ("recompute" if step.recomputes else "compute") + f"{s} " + listed(names)
    if step.freed:
        return f"free{s} " + listed([labels[n] for n in step.freed])
    return "no op"


# -- the recursion, call by call -------------------------------------------------------------------

@dataclass(frozen=True)
class Recomputation:
    """A tensor a call will compute again: computed before the call opened, and freed since.

    Attributes
    ----------
    tensor : str
    freed_op : int
        The free that removed it last before the call opened.
    freed_by : int or None
        The call that emitted that free.
    freed_reason : dict or None
        That free's recorded reason (request served, frame done...).
    """

    tensor: str
    freed_op: int
    freed_by: int | None
    freed_reason: Reason | None


@dataclass(frozen=True)
class RecursionWalk:
    """A traced recursion, simulated, cut into steps (see the module notes).

    Attributes
    ----------
    trace : RecursionTrace
    schedule : Schedule
        The trace's schedule with the simulator's ``stats`` and ``simulation`` attached.
    steps : tuple of WalkStep
        ``step.call`` is the index of the call the step belongs to.
    recomputations : tuple of tuple of Recomputation
        Per call, the tensors of its subgraph computed before it opened (it computes them again).
    """

    trace: RecursionTrace
    schedule: Schedule
    steps: tuple[WalkStep, ...]
    recomputations: tuple[tuple[Recomputation, ...], ...]

    @property
    def calls(self) -> tuple[RecursionCall, ...]:
        return self.trace.calls

    @cached_property
    def occurrence(self) -> tuple[int, ...]:
        """Per op, which computation of its tensor it is (see :func:`remat_core.schedule.occurrences`)."""
        return occurrences(simulation_of(self.schedule))

    @cached_property
    def first_step(self) -> dict[int, int]:
        """Call index -> the step that opens it."""
        return {s.call: s.index for s in reversed(self.steps) if s.opens}

    @cached_property
    def computing_steps(self) -> dict[str, tuple[int, ...]]:
        """Tensor id -> the steps that compute it, in order."""
        found: dict[str, list[int]] = {}
        for s in self.steps:
            for tensor, _ in s.computed:
                found.setdefault(tensor, []).append(s.index)
        return {t: tuple(v) for t, v in found.items()}

    def calls_computing(self, tensor: str) -> tuple[int, ...]:
        """The calls whose own ops compute ``tensor``, in order (one per computation)."""
        return tuple(self.steps[s].call for s in self.computing_steps.get(tensor, ()))

    def first_call_in_frame(self, frame: int) -> int | None:
        """The first call that works in separator bag ``frame`` (None: the recursion never opens it)."""
        return next((c.index for c in self.calls if c.frame == frame), None)

    def step_of_op(self, op: int) -> int:
        """The step holding op ``op`` (the last step for an op past the end)."""
        for s in self.steps:
            if s.first_op <= op <= s.last_op:
                return s.index
        return len(self.steps) - 1

    def ancestors(self, call: int) -> tuple[int, ...]:
        """The calls open while ``call`` runs, top call first (``call`` itself last)."""
        chain = []
        at: int | None = call
        while at is not None:
            chain.append(at)
            at = self.calls[at].parent
        return tuple(reversed(chain))


def recursion_walk(graph: ComputeGraph, trace: RecursionTrace) -> RecursionWalk:
    """Simulate a traced recursion and cut it into steps: call openings and each call's runs of ops.

    A call's opening is a step of its own when the call opens another call before its first op;
    otherwise it shares a step with its first run of ops. After a call it opened returns, the
    call's next run of ops is a new step.

    Raises
    ------
    InvalidSchedule
        If the recursion's schedule breaks a simulator rule (a bug in the recursion).
    """
    result = simulate(graph, trace.schedule)
    schedule = trace.schedule.with_updates(stats=schedule_stats(graph, result), simulation=result)
    running = _Running(graph, schedule)
    runs: list[tuple[int, list[int]]] = []
    for op, call in enumerate(trace.op_calls):
        if runs and runs[-1][0] == call:
            runs[-1][1].append(op)
        else:
            runs.append((call, [op]))
    steps: list[WalkStep] = []
    calls = trace.calls
    opened = 0

    def lead_of(call: RecursionCall) -> dict[str, Any]:
        return {"frame": call.frame, "depth": call.depth, "bag": call.requester}

    def open_calls(position: int) -> None:
        nonlocal opened
        while opened < len(calls) and calls[opened].first_op <= position:
            call = calls[opened]
            steps.append(running.step(schedule, len(steps), [], call.index, lead_of(call), opens=True,
                                      first_op=call.first_op))
            opened += 1

    for call, ops in runs:
        open_calls(ops[0])
        last = steps[-1] if steps else None
        if last is not None and last.opens and last.call == call and not last.ops:
            steps[-1] = running.step(schedule, last.index, ops, call, lead_of(calls[call]), opens=True)
        else:
            steps.append(running.step(schedule, len(steps), ops, call, lead_of(calls[call])))
    open_calls(len(result.ops))
    return RecursionWalk(trace, schedule, tuple(steps), _recomputations(schedule, trace))


def _recomputations(schedule: Schedule, trace: RecursionTrace) -> tuple[tuple[Recomputation, ...], ...]:
    """Per call, the tensors of its subgraph already computed when it opened, with the free that removed them."""
    ops = schedule.ops
    order = sorted(trace.calls, key=lambda c: c.first_op)
    computed: set[str] = set()
    last_free: dict[str, int] = {}
    found: dict[int, tuple[Recomputation, ...]] = {}
    position = 0
    for call in order:
        for op in range(position, call.first_op):
            action, tensor = ops[op]
            if action == COMPUTE:
                computed.add(tensor)
            else:
                last_free[tensor] = op
        position = max(position, call.first_op)
        found[call.index] = tuple(
            Recomputation(t, last_free[t], trace.op_calls[last_free[t]], schedule.reason_at(last_free[t]))
            for t in call.subgraph if t in computed)
    return tuple(found[c.index] for c in trace.calls)


# -- words ---------------------------------------------------------------------------------------------

RULE_WORDS = {
    "separator-request": "computes its bag's tensors of the subgraph in order and keeps them until it ends; for "
                         "each, it first asks the child pieces for its inputs, then hands the rest of its request "
                         "to the children",
    "separator-leaf": "works in a leaf bag: it computes the subgraph in order, freeing each tensor after its last "
                      "reader",
    "fits-budget": "finds the subgraph fits the memory left: it computes it in order without recursing",
}
"""What a call does, by its rule."""


def call_title(graph: ComputeGraph, walk: RecursionWalk, call: int) -> str:
    """``call 3 · depth 1 · bag 5 · opened by call 0 for the inputs of grad 4 (bwd)``."""
    c = walk.calls[call]
    labels = node_labels(graph)
    if c.parent is None:
        origin = "the top call"
    elif c.consumer is not None:
        origin = f"opened by call {c.parent} for the inputs of {labels[c.consumer]}"
    else:
        origin = f"opened by call {c.parent} to finish its request"
    return f"call {c.index} · depth {c.depth} · bag {c.frame} · {origin}"


def describe_call(graph: ComputeGraph, walk: RecursionWalk, call: int) -> list[str]:
    """The whole call in sentences: what it was asked, its subgraph, its bag, what it recomputes and why."""
    c = walk.calls[call]
    labels = node_labels(graph)
    names = [labels[t] for t in c.subgraph]
    asked = []
    if c.keep:
        asked.append(f"leave {listed([labels[t] for t in c.keep])} resident")
    if c.touch:
        asked.append(f"compute the outputs {listed([labels[t] for t in c.touch])}")
    plural = "s" if len(names) != 1 else ""
    lines = [f"Asked to {' and '.join(asked) or 'do nothing'}. Its subgraph: the {len(names)} tensor{plural} not "
             f"resident that this needs ({listed(names, 8)})."]
    bag = [labels[t] for t in c.bag]
    lines.append(f"It {RULE_WORDS.get(c.rule, c.rule)}. Separator bag {c.frame}: {listed(bag, 8)}"
                 + (f"; it computes {listed([labels[t] for t in c.targets])} itself."
                    if c.rule == "separator-request" else "."))
    again = walk.recomputations[call]
    if again:
        reasons = []
        for r in again[:LISTED]:
            by = f"call {r.freed_by}" if r.freed_by is not None else "an earlier call"
            why = str((r.freed_reason or {}).get("text") or "freed")
            reasons.append(f"{labels[r.tensor]} ({by}: {why})")
        more = f" and {len(again) - LISTED} more" if len(again) > LISTED else ""
        lines.append(f"It will recompute {len(again)} tensor{'s' if len(again) != 1 else ''} computed before and "
                     f"freed since (only the bags of the open calls stay resident): {'; '.join(reasons)}{more}.")
    else:
        lines.append("Nothing in its subgraph was computed before: it recomputes nothing.")
    return lines


def walk_step_title(graph: ComputeGraph, walk: RecursionWalk, step: WalkStep) -> str:
    """A heading for a recursion step: the call opening, or what it computes on its return."""
    c = walk.calls[step.call]
    if step.opens and not step.ops:
        child = next((k for k in c.children if walk.calls[k].first_op == step.first_op), None)
        ask = f"; it asks call {child} first" if child is not None else ""
        return f"call {c.index} opens in bag {c.frame}{ask}"
    head = f"call {c.index} opens in bag {c.frame} and " if step.opens else f"call {c.index} (bag {c.frame}) "
    return head + step_title(graph, step, doer=True)
