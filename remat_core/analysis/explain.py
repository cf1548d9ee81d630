"""Why is this tensor recomputed? Answers read off a simulated schedule and its recorded reasons.

Three questions the explorer's "Why recomputed?" page asks:

- :func:`explain_tensor`: for each computation of a tensor, the reason the solver recorded with
  that compute op, which reader needed it (the first reader computed while it stayed resident),
  the free that removed it before (and that free's recorded reason: an eviction rule, a separator
  bag...), and the memory at that moment.
- :func:`smallest_budget_computed_once`: the smallest budget at which a solver computes it once.
- :func:`schedule_diff`: which tensors change from kept to recomputed between two schedules (two
  budgets, two solvers).

Nothing here re-judges a schedule: it replays the ops the simulator already accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import GraphError, InfeasibleBudget
from ..graph import ComputeGraph, Node, format_bytes, node_labels
from ..schedule import COMPUTE, FREE, Reason, Schedule, ordinal, simulation_of
from ..solvers import solve


@dataclass(frozen=True)
class Computation:
    """One computation of a tensor in a schedule.

    Attributes
    ----------
    tensor : str
    occurrence : int
        1 for the first computation, 2 for the first recomputation, ...
    step : int
        Index of the compute op.
    reason : dict or None
        What the solver recorded with this compute op.
    needed_by : str or None
        The first reader of the tensor computed while this copy stayed resident: the consumer it
        was (re)computed for. None when no reader came (an output, or a wasted computation).
    needed_by_step : int or None
    freed_step : int or None
        The free op that ended the previous stay (None for the first computation).
    freed_reason : dict or None
        What the solver recorded with that free (an eviction rule, a separator bag...).
    freed_at_memory : int or None
        Memory just before that free: how full memory was when the tensor had to go.
    memory_before, memory_after : int
        Memory just before and just after this compute op, in bytes.
    end_step : int or None
        The free that ends this stay (None: resident to the end).
    """

    tensor: str
    occurrence: int
    step: int
    reason: Reason | None
    needed_by: str | None
    needed_by_step: int | None
    freed_step: int | None
    freed_reason: Reason | None
    freed_at_memory: int | None
    memory_before: int
    memory_after: int
    end_step: int | None

    @property
    def is_recomputation(self) -> bool:
        """Whether this is a second or later computation."""
        return self.occurrence > 1

    @property
    def recorded_consumer(self) -> str | None:
        """The consumer the solver named in its reason (``reason["consumer"]``), if it named one."""
        value = (self.reason or {}).get("consumer")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class TensorExplanation:
    """Every computation of one tensor in one schedule."""

    node: Node
    computations: tuple[Computation, ...]
    readers: tuple[str, ...]
    is_output: bool
    budget: int | None
    solver: str

    @property
    def times_computed(self) -> int:
        return len(self.computations)


def recomputed_tensors(graph: ComputeGraph, schedule: Schedule) -> list[tuple[str, int]]:
    """Tensors the schedule computes more than once: ``[(id, count), ...]``, most computations first,
    then the largest (the recomputations that cost the most memory traffic)."""
    counts = simulation_of(schedule).compute_counts
    return sorted(((n, c) for n, c in counts.items() if c > 1), key=lambda item: (-item[1], -graph.node(item[0]).mem,
                                                                                   item[0]))


def explain_tensor(graph: ComputeGraph, schedule: Schedule, tensor: str) -> TensorExplanation:
    """Each computation of ``tensor`` in ``schedule``, with its reason and its context.

    Parameters
    ----------
    graph : ComputeGraph
        The graph the schedule was solved for.
    schedule : Schedule
        A simulated schedule (from :func:`remat_core.solve`).
    tensor : str
        A node id.

    Returns
    -------
    TensorExplanation

    Raises
    ------
    GraphError
        For an id the graph does not have.
    ScheduleFormatError
        For a schedule without a simulation.

    Notes
    -----
    One pass over the ops, O(ops + readers): a computation's ``needed_by`` is the first compute op
    of a successor of the tensor between this compute and the free that ends the stay.
    """
    node = graph.node(tensor)
    result = simulation_of(schedule)
    readers = set(graph.succs(tensor))
    memory = result.memory
    computations: list[Computation] = []
    open_index: int | None = None
    last_free: tuple[int, Reason | None, int] | None = None
    pending_reader: dict[str, Any] = {}

    def memory_before(step: int) -> int:
        return memory[step - 1] if step > 0 else result.start_memory

    for step, (action, target) in enumerate(result.ops):
        if target == tensor:
            if action == COMPUTE:
                pending_reader = {"needed_by": None, "needed_by_step": None}
                freed_step, freed_reason, freed_at = last_free if last_free else (None, None, None)
                computations.append(Computation(
                    tensor=tensor, occurrence=len(computations) + 1, step=step, reason=schedule.reason_at(step),
                    needed_by=None, needed_by_step=None, freed_step=freed_step, freed_reason=freed_reason,
                    freed_at_memory=freed_at, memory_before=memory_before(step), memory_after=memory[step],
                    end_step=None))
                open_index = len(computations) - 1
            elif action == FREE and open_index is not None:
                computations[open_index] = replace(computations[open_index], end_step=step, **pending_reader)
                last_free = (step, schedule.reason_at(step), memory_before(step))
                open_index = None
        elif action == COMPUTE and open_index is not None and target in readers \
                and pending_reader.get("needed_by") is None:
            pending_reader = {"needed_by": target, "needed_by_step": step}
    if open_index is not None:
        computations[open_index] = replace(computations[open_index], **pending_reader)
    return TensorExplanation(node=node, computations=tuple(computations), readers=graph.succs(tensor),
                             is_output=tensor in graph.outputs, budget=schedule.budget, solver=schedule.solver)


BYTE_FIELDS = frozenset({"memory", "footprint", "bytes", "mem"})
"""Reason fields that hold bytes: shown formatted (``6 MiB``)."""
_BYTES_IN_TEXT = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+) bytes\b")


def describe_reason(reason: Reason | None, context: str = "", graph: ComputeGraph | None = None) -> str:
    """A reason as one sentence: its text with byte counts formatted, then in brackets its rule and the
    structured fields the text (or ``context``, the sentence around it) does not already say.

    With ``graph``, fields that name nodes of it (``consumer``, a list of ids) are shown by their
    labels (:func:`remat_core.graph.node_labels`), as solvers' texts name them."""
    if not reason:
        return "the solver recorded no reason"
    raw = str(reason.get("text", "")).strip()
    text = _BYTES_IN_TEXT.sub(lambda m: format_bytes(int(m.group(1).replace(",", ""))), raw) or "no text"
    said = f"{context} {raw} {text}"
    fields = named_fields(reason, graph) if graph is not None else reason
    extra = [f"{key} {_field_value(key, value)}" for key, value in fields.items()
             if key not in ("text", "rule") and value is not None and not _already_said(key, value, said)]
    tail = "; ".join(part for part in (str(reason.get("rule") or ""), ", ".join(extra)) if part)
    return f"{text} ({tail})" if tail else text


def named_fields(reason: Reason, graph: ComputeGraph) -> dict[str, Any]:
    """The reason's fields with node ids (alone or in a list) replaced by the nodes' labels."""
    labels = node_labels(graph)

    def name(value: Any) -> Any:
        if isinstance(value, str):
            return labels.get(value, value)
        if isinstance(value, (list, tuple)):
            return [name(v) for v in value]
        return value
    return {key: value if key in ("text", "rule") else name(value) for key, value in reason.items()}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_value(key: str, value: Any) -> str:
    return format_bytes(value) if key in BYTE_FIELDS and _is_count(value) else _short(value)


def _already_said(key: str, value: Any, text: str) -> bool:
    """Whether ``text`` states this field: a name or float as written, a count next to its key (``bag 7``,
    ``4 candidates``), a large number as written (``1,048,576``), bytes formatted."""
    if isinstance(value, str):
        forms = [value]
    elif isinstance(value, float):
        forms = [f"{value:.4g}", str(value)]
    elif _is_count(value):
        forms = [f"{key} {value}", f"{value} {key}", f"{key}={value}"] + ([f"{value:,}"] if value >= 1000 else [])
        if key in BYTE_FIELDS:
            forms.append(format_bytes(value))
    else:
        return False
    return any(re.search(rf"(?<![\w.]){re.escape(form)}(?![\w])", text) for form in forms)


def _short(value: Any, limit: int = 8) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [str(v) for v in value]
        shown = ", ".join(items[:limit])
        return "{" + shown + (f", ... {len(items) - limit} more" if len(items) > limit else "") + "}"
    return str(value)


def describe_computation(graph: ComputeGraph, c: Computation, budget: int | None) -> str:
    """A paragraph for one computation, in the words the explorer shows (each reason's fields only where
    the paragraph does not say them already)."""
    labels = node_labels(graph)
    parts = [f"{ordinal(c.occurrence)} computation of {labels[c.tensor]}, at step {c.step}."]
    if c.freed_step is not None:
        freed = f"It had been freed at step {c.freed_step} with {format_bytes(c.freed_at_memory)} in use"
        parts.append(f"{freed}: {describe_reason(c.freed_reason, freed, graph)}.")
    if c.needed_by is not None:
        parts.append(f"Needed by {labels[c.needed_by]} (step {c.needed_by_step}).")
    elif c.tensor in graph.outputs:
        parts.append("It is an output of the graph.")
    else:
        parts.append("No reader was computed while it stayed resident.")
    used = f"Memory {format_bytes(c.memory_before)} -> {format_bytes(c.memory_after)}"
    if budget:
        used += f" of a {format_bytes(budget)} budget ({c.memory_after / budget:.0%})"
    parts.append(used + ".")
    parts.append(f"Solver's reason: {describe_reason(c.reason, ' '.join(parts), graph)}.")
    return " ".join(parts)


# -- the smallest budget that computes a tensor once -----------------------------------------------

@dataclass(frozen=True)
class OnceThreshold:
    """Where a solver stops recomputing a tensor.

    Attributes
    ----------
    tensor, solver : str
    budget : int or None
        The smallest budget checked at which the tensor is computed once, with every larger
        budget checked also computing it once. None: even the largest budget checked recomputes it.
    below : int or None
        The largest budget checked under ``budget`` (recomputed there, or infeasible).
    recomputed_below : bool
        Whether some checked budget recomputed it; False means every feasible budget checked
        computes it once (it is never the tensor a solver gives up).
    checked : int
        How many budgets were looked at (grid points plus refinement solves).
    """

    tensor: str
    solver: str
    budget: int | None
    below: int | None
    recomputed_below: bool
    checked: int


def smallest_budget_computed_once(tensor: str, solver: str, budgets: Sequence[int],
                                  computes_at: Callable[[int], int | None], refine_steps: int = 6,
                                  tolerance: int = 1) -> OnceThreshold:
    """The smallest budget from which ``solver`` computes ``tensor`` exactly once.

    Parameters
    ----------
    tensor, solver : str
    budgets : sequence of int
        A grid to look at first (a sweep's budgets, whose answers are cheap).
    computes_at : callable
        ``computes_at(budget)``: how many times the solver's schedule at ``budget`` computes the
        tensor, None when that budget is infeasible.
    refine_steps : int
        Bisection steps between the last grid budget that recomputes it and the first from which it
        is computed once (each one solve).
    tolerance : int
        Stop refining once the interval is this many bytes wide.

    Returns
    -------
    OnceThreshold

    Notes
    -----
    A solver need not be monotone in the budget; the grid is scanned from the top for the longest
    run of budgets that compute the tensor once, and the refinement assumes the answer changes
    once between the two budgets around that run's start. The result is exact for what was
    checked, not a proof about budgets in between.
    """
    grid = sorted(set(int(b) for b in budgets))
    if not grid:
        raise ValueError("smallest_budget_computed_once needs at least one budget to look at")
    answers = [computes_at(b) for b in grid]
    checked = len(grid)
    recomputed = any(a is not None and a > 1 for a in answers)
    start = len(grid)
    while start > 0 and answers[start - 1] == 1:
        start -= 1
    if start == len(grid):
        return OnceThreshold(tensor, solver, None, grid[-1], recomputed, checked)
    high = grid[start]
    low = grid[start - 1] if start > 0 else None
    if low is not None:
        for _ in range(refine_steps):
            if high - low <= tolerance:
                break
            middle = (low + high) // 2
            answer = computes_at(middle)
            checked += 1
            if answer == 1:
                high = middle
            else:
                recomputed = recomputed or (answer is not None and answer > 1)
                low = middle
    return OnceThreshold(tensor, solver, high, low, recomputed, checked)


def computes_by_solving(graph: ComputeGraph, solver: str, tensor: str, time_limit: float | None = None,
                        **options: Any) -> Callable[[int], int | None]:
    """A ``computes_at`` for :func:`smallest_budget_computed_once` that solves at each budget asked."""
    graph.node(tensor)

    def computes_at(budget: int) -> int | None:
        try:
            schedule = solve(graph, budget, solver, time_limit=time_limit, **options)
        except InfeasibleBudget:
            return None
        return simulation_of(schedule).compute_counts.get(tensor, 0)
    return computes_at


# -- two schedules side by side --------------------------------------------------------------------

KEPT_TO_RECOMPUTED = "kept at A, recomputed at B"
RECOMPUTED_TO_KEPT = "recomputed at A, kept at B"
MORE_AT_B = "recomputed more at B"
FEWER_AT_B = "recomputed less at B"
CHANGE_ORDER = (KEPT_TO_RECOMPUTED, RECOMPUTED_TO_KEPT, MORE_AT_B, FEWER_AT_B)


@dataclass(frozen=True)
class TensorChange:
    """A tensor computed a different number of times by two schedules."""

    tensor: str
    computes_a: int
    computes_b: int
    mem: int

    @property
    def change(self) -> str:
        """One of :data:`CHANGE_ORDER`."""
        if self.computes_a <= 1 < self.computes_b:
            return KEPT_TO_RECOMPUTED
        if self.computes_b <= 1 < self.computes_a:
            return RECOMPUTED_TO_KEPT
        return MORE_AT_B if self.computes_b > self.computes_a else FEWER_AT_B


def schedule_diff(graph: ComputeGraph, schedule_a: Schedule, schedule_b: Schedule) -> list[TensorChange]:
    """The tensors two schedules of one graph compute a different number of times.

    Returns
    -------
    list of TensorChange
        Ordered by kind of change (:data:`CHANGE_ORDER`), then largest tensor first.

    Raises
    ------
    GraphError
        When a schedule names a node the graph does not have (they are of different graphs).
    """
    counts_a = simulation_of(schedule_a).compute_counts
    counts_b = simulation_of(schedule_b).compute_counts
    changes = []
    for tensor in _union(counts_a, counts_b):
        if tensor not in graph:
            raise GraphError(f"schedule_diff: the schedules compute {tensor!r}, which graph '{graph.name}' does not "
                             f"have; compare two schedules of the same graph")
        a, b = counts_a.get(tensor, 0), counts_b.get(tensor, 0)
        if a != b:
            changes.append(TensorChange(tensor, a, b, graph.node(tensor).mem))
    order = {c: k for k, c in enumerate(CHANGE_ORDER)}
    return sorted(changes, key=lambda c: (order[c.change], -c.mem, c.tensor))


def _union(a: Mapping[str, int], b: Mapping[str, int]) -> Iterable[str]:
    return list(dict.fromkeys([*a, *b]))
