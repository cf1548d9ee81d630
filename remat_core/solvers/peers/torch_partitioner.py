"""``torch-partitioner``: PyTorch's own min-cut partitioner under an activation-memory budget, as a peer.

What ``torch.compile`` users pick for activation memory is AOTAutograd's
``min_cut_rematerialization_partition`` with ``torch._functorch.config.activation_memory_budget``:
a fraction between 0 (save only the inputs, recompute the whole forward in the backward) and 1
(the runtime-optimised cut). Below 1 it solves a 0-1 knapsack (``dp``, ``greedy`` or ``ilp``) over
the forward ops it would otherwise refuse to recompute (matmuls, convolutions, reductions, random
ops), keeping the most runtime within ``fraction x`` the activation bytes, then cuts the joint
graph again with the rest allowed to recompute. What it saves is a set of forward tensors; the
backward recomputes every other forward tensor it needs, each once, just before it is first read.

Two ways onto our graphs, and ``solver_info["mode"]`` says which was taken:

- **traced** (a graph traced from PyTorch here: the zoo, ``--model``, ``.pt2``): torch's own
  partitioner runs on the very joint FX graph the graph was built from
  (``graph.attachments.binding``), and the FX values it saves are mapped onto our nodes
  through the tracer's storage binding (a view saves its base; module-level graphs keep a group
  when torch saves any tensor of it). Torch's defaults hold, with CSE off so that its nodes stay
  ours one for one.
- **sizes** (a graph read from a file: no FX graph behind it): the partitioner's rules applied to
  our sizes and costs. Every forward node the backward needs is a knapsack candidate (nothing says
  which ops are cheap pointwise ones, so none is recomputed for free), its size normalised by the
  bytes no recomputation keeps and its cost as the runtime; torch's knapsack function picks those
  to keep, and the min cut of torch's flow network (a node's capacity its bytes x 1.1 per step
  from the backward, kept candidates and pinned nodes tied to the source, backward nodes to the
  sink) gives the saved set.

Either way the saved set becomes a schedule (forward in order, each backward node preceded by the
recomputation of the unsaved forward tensors it needs, frees after the last reader) that our
simulator measures. Torch's fraction is a ratio of *its* estimate of activation bytes, not a byte
bound, and its peak is not monotone in it (measured: a residual MLP keeps 0.55 of eager's peak
at 0.5 and 0.81 at 0.2). So the fraction is searched: a grid of eighths, then bisection wherever
two neighbouring fractions give different peaks (torch's own Pareto plot,
``visualize_memory_budget_pareto``, bisects the same way) down to 1/32. The curve is kept on the graph, so a
budget sweep pays for it once; the solver returns the largest fraction whose simulated peak fits
the budget, and falls back on torch's ``default_partition`` (save everything, recompute nothing:
checkpoint-all) when no fraction fits but that does.

References
----------
PyTorch, ``torch/_functorch/partitioners.py`` (``min_cut_rematerialization_partition``,
``choose_saved_values_set``, ``solve_min_cut``) and
``torch/_functorch/_activation_checkpointing/knapsack.py``, torch 2.13.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ...errors import InfeasibleBudget
from ...graph import TRACED, ComputeGraph
from ...schedule import (Op, Reason, Schedule, checkpoint_all_ops, needed_topological_order, ops_from_computes, reason,
                         simulate)
from ..registry import Option, SolverTags, register

KNAPSACKS = ("dp", "greedy", "ilp")
"""Torch's names of its knapsack solvers (``activation_memory_budget_solver``)."""

GRID = 8
"""The search evaluates fractions 0, 1/8, ..., 1 first."""

RESOLUTION = 1 / 32
"""Where two neighbouring fractions give different peaks, bisection goes down to intervals this narrow."""

DIST_BASE, DIST_CAP = 1.1, 100
"""Torch's bias towards saving tensors near the backward: a node's capacity is its bytes x
1.1 ** min(distance from the backward, 100)."""

_RULE = "torch-partitioner"


@dataclass(frozen=True)
class CurvePoint:
    """One evaluated partition: the fraction (None for ``default_partition``), what it saves, its schedule."""

    fraction: float | None
    saved: frozenset[int]
    ops: tuple[Op, ...]
    reasons: tuple[Reason | None, ...]
    peak: int
    cost: float


@dataclass(frozen=True)
class Curve:
    """Every partition the search evaluated on one graph, in increasing fraction (default partition last)."""

    mode: str
    points: tuple[CurvePoint, ...]


@register("torch-partitioner",
          "PyTorch's own min-cut partitioner (activation_memory_budget with a dp/greedy/ilp knapsack), the "
          "largest budget fraction whose schedule fits; on traced models it runs on their joint FX graph.",
          tags=SolverTags(uses_traced_graph=True),
          options=(Option("knapsack", str, "dp", "torch's knapsack solver for the memory budget", choices=KNAPSACKS),),
          reference="PyTorch, torch/_functorch/partitioners.py: min_cut_rematerialization_partition, torch 2.13")
def torch_partitioner(graph: ComputeGraph, budget: int, *, time_limit: float | None = None,
                      knapsack: str = "dp") -> Schedule:
    """Torch's partition at the largest ``activation_memory_budget`` fraction whose schedule fits ``budget``.

    Parameters
    ----------
    graph : ComputeGraph
    budget : int
        Bytes, pinned memory included.
    time_limit : float, optional
        Ignored: the whole fraction curve is evaluated (and kept on the graph), so that a refusal's
        named budget is met when asked again.
    knapsack : {"dp", "greedy", "ilp"}
        Torch's knapsack solver.

    Returns
    -------
    Schedule
        ``solver_info``: ``mode`` (``traced`` or ``sizes``), ``fraction`` (None: the default
        partition), ``partition``, ``knapsack``, ``saved`` and ``recomputed`` node counts,
        ``fractions_tried`` and ``curve`` (``[fraction, peak, cost]`` of every distinct partition).

    Raises
    ------
    InfeasibleBudget
        When no evaluated partition fits; the smallest peak among them is the named budget.
    """
    del time_limit
    curve = torch_partition_curve(graph, knapsack)
    fitting = [p for p in curve.points if p.peak <= budget]
    if not fitting:
        smallest = min(p.peak for p in curve.points)
        raise InfeasibleBudget(budget, smallest, _RULE,
                               f"no activation_memory_budget fraction of torch's partitioner ({curve.mode} mode, "
                               f"knapsack {knapsack}) gives a schedule that fits; its smallest peak is "
                               f"{smallest:,} bytes")
    best = max(fitting, key=lambda p: -1.0 if p.fraction is None else p.fraction)
    recomputed = sum(1 for action, _ in best.ops if action == "compute") - len(graph.needed_idx)
    info = {"mode": curve.mode, "fraction": best.fraction,
            "partition": "default_partition" if best.fraction is None else "min_cut_rematerialization_partition",
            "knapsack": knapsack, "saved": len(best.saved), "recomputed": max(recomputed, 0),
            "fractions_tried": sum(1 for p in curve.points if p.fraction is not None),
            "curve": [[p.fraction, p.peak, p.cost] for p in curve.points]}
    return Schedule.from_ops(best.ops, best.reasons, solver_info=info)


def torch_partition_curve(graph: ComputeGraph, knapsack: str = "dp") -> Curve:
    """Torch's partition at every fraction the search visits, simulated; kept on the graph (``graph.memo``)."""
    if knapsack not in KNAPSACKS:
        raise ValueError(f"knapsack must be one of {', '.join(KNAPSACKS)}, got {knapsack!r}")
    return graph.memo(f"torch-partitioner curve ({knapsack})", lambda: _search(graph, knapsack))


# -- the search over fractions ---------------------------------------------------------------------

def _search(graph: ComputeGraph, knapsack: str) -> Curve:
    mode = graph.attachments.mode
    phases = _Phases(graph)
    saved_at = _traced_partitioner(graph, knapsack) if mode == TRACED else _sizes_partitioner(graph, phases, knapsack)
    by_saved: dict[frozenset[int], CurvePoint] = {}
    found: dict[float, CurvePoint] = {}

    def evaluate(fraction: float) -> CurvePoint:
        if fraction not in found:
            saved = saved_at(fraction)
            if saved not in by_saved:
                ops, reasons = phases.schedule(saved, fraction)
                result = simulate(graph, ops)
                by_saved[saved] = CurvePoint(fraction, saved, tuple(ops), tuple(reasons), result.peak, result.cost)
            point = by_saved[saved]
            found[fraction] = CurvePoint(fraction, saved, point.ops, point.reasons, point.peak, point.cost)
        return found[fraction]

    grid = [k / GRID for k in range(GRID + 1)]
    intervals = list(zip(grid, grid[1:]))
    while intervals:
        low, high = intervals.pop()
        if evaluate(low).peak == evaluate(high).peak or high - low <= RESOLUTION:
            continue
        middle = (low + high) / 2
        intervals += [(low, middle), (middle, high)]
    ops, reasons = checkpoint_all_ops(graph)
    result = simulate(graph, ops)
    default = CurvePoint(None, frozenset(phases.read_by_backward), tuple(ops), tuple(reasons), result.peak, result.cost)
    return Curve(mode, (*(found[f] for f in sorted(found)), default))


# -- forward and backward, and a saved set as a schedule -------------------------------------------

class _Phases:
    """The needed nodes split as torch splits a joint graph: the forward (no backward node upstream)
    and the backward (backward nodes and everything downstream of one)."""

    def __init__(self, graph: ComputeGraph):
        self.graph = graph
        order = needed_topological_order(graph)
        backward: set[int] = set()
        for i in order:
            if graph.nodes[i].kind == "backward" or any(p in backward for p in graph.pred_idx[i]):
                backward.add(i)
        self.forward = [i for i in order if i not in backward]
        self.backward = [i for i in order if i in backward]
        self.is_forward = set(self.forward)
        self.is_backward = backward
        self.read_by_backward = {p for b in self.backward for p in graph.pred_idx[b] if p in self.is_forward}

    def distance_from_backward(self) -> dict[int, float]:
        """Torch's ``dist_from_bw`` of each forward node: 1 when a backward node reads it, one more per
        forward step away; infinite when no backward node needs it."""
        graph, distance = self.graph, {}
        for i in reversed(self.forward):
            steps = [0 if s in self.is_backward else distance[s] for s in graph.succ_idx[i]
                     if s in self.is_backward or s in self.is_forward]
            distance[i] = min(steps, default=math.inf) + 1
        return distance

    def schedule(self, saved: frozenset[int], fraction: float) -> tuple[list[Op], list[Reason | None]]:
        """Forward in order; before each backward node, the unsaved forward tensors it needs recomputed
        (each once, inputs first); every tensor freed after its last reader."""
        graph, pred_idx = self.graph, self.graph.pred_idx
        computes: list[int] = []
        reasons: list[Reason | None] = []
        forward_reason = reason("computed in the forward pass", rule=_RULE)
        for i in self.forward:
            computes.append(i)
            reasons.append(forward_reason)
        recomputed: set[int] = set()
        backward_reason = reason("computed in the backward pass", rule=_RULE)
        why = (f"torch's partitioner does not save it at activation_memory_budget={fraction:g}: the backward "
               f"recomputes it")
        for b in self.backward:
            for p in pred_idx[b]:
                if p in self.is_forward and p not in saved and p not in recomputed:
                    for node in self._inputs_first(p, saved, recomputed):
                        computes.append(node)
                        reasons.append(reason(why, rule=_RULE, consumer=graph.ids[b]))
            computes.append(b)
            reasons.append(backward_reason)
        ops, out_reasons = ops_from_computes(graph, computes, reasons)
        return ops, out_reasons

    def _inputs_first(self, start: int, saved: frozenset[int], done: set[int]) -> list[int]:
        """``start`` and the unsaved forward tensors it needs that are not yet recomputed, inputs first."""
        pred_idx, order = self.graph.pred_idx, []
        stack = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in done:
                continue
            done.add(node)
            stack.append((node, True))
            stack.extend((p, False) for p in pred_idx[node] if p in self.is_forward and p not in saved
                         and p not in done)
        return order


# -- sizes mode: torch's knapsack and min cut on our sizes and costs -------------------------------

def _sizes_partitioner(graph: ComputeGraph, phases: _Phases, knapsack: str) -> Callable[[float], frozenset[int]]:
    """``fraction -> saved set`` by the partitioner's rules, on the graph's own sizes and costs."""
    from torch._functorch._activation_checkpointing import knapsack as torch_knapsack

    solve_knapsack = {"dp": torch_knapsack.dp_knapsack, "greedy": torch_knapsack.greedy_knapsack,
                      "ilp": torch_knapsack.ilp_knapsack}[knapsack]
    distance = phases.distance_from_backward()
    needed_by_backward = [i for i in phases.forward if distance[i] < math.inf]
    no_recompute = frozenset(phases.read_by_backward)
    activation_bytes = sum(graph.mem[i] for i in no_recompute if not graph.pinned[i])
    free = [i for i in needed_by_backward if graph.mem[i] == 0]  # saving them costs nothing
    candidates = sorted((i for i in needed_by_backward if graph.mem[i] > 0), key=lambda i: -graph.mem[i])

    def saved_at(fraction: float) -> frozenset[int]:
        if fraction >= 1 or not candidates or activation_bytes == 0:
            return no_recompute
        if fraction <= 0:
            return frozenset()  # torch saves the inputs only
        _, keep, _ = solve_knapsack([graph.mem[i] / activation_bytes for i in candidates],
                                    [float(graph.cost[i]) for i in candidates], fraction)
        return _min_cut(graph, phases, distance, {candidates[k] for k in keep} | set(free))

    return saved_at


def _min_cut(graph: ComputeGraph, phases: _Phases, distance: Mapping[int, float], banned: set[int]) -> frozenset[int]:
    """Torch's flow network on our graph (``solve_min_cut``): each forward node a capacity edge
    ``in -> out`` of its bytes x 1.1 ** distance, banned (kept) nodes and pinned ones fed from the
    source, backward nodes drained to the sink; the cut edges are the saved tensors."""
    import networkx as nx

    flow = nx.DiGraph()
    flow.add_nodes_from(("source", "sink"))
    for i in phases.forward:
        if i in banned:
            flow.add_edge("source", (i, "in"), capacity=math.inf)
        steps = distance[i] if distance[i] < math.inf else DIST_CAP
        flow.add_edge((i, "in"), (i, "out"), capacity=graph.mem[i] * DIST_BASE ** max(min(steps, DIST_CAP), 1))
        for p in graph.pred_idx[i]:
            source = "source" if graph.pinned[p] else (p, "out")
            flow.add_edge(source, (i, "in"), capacity=math.inf)
    for b in phases.backward:
        for p in graph.pred_idx[b]:
            if p in phases.is_forward:
                flow.add_edge((p, "out"), "sink", capacity=math.inf)
    _, (reachable, _) = nx.minimum_cut(flow, "source", "sink")
    return frozenset(i for i in phases.forward if (i, "in") in reachable and (i, "out") not in reachable)


# -- traced mode: torch's partitioner on the joint FX graph ----------------------------------------

def _traced_partitioner(graph: ComputeGraph, knapsack: str) -> Callable[[float], frozenset[int]]:
    """``fraction -> saved set``: torch's ``min_cut_rematerialization_partition`` on a copy of the joint
    graph, its saved FX values mapped onto ``graph``'s nodes."""
    from torch._functorch import config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    binding = (graph.attachments.op_graph or graph).attachments.binding
    joint = binding.graph_module
    descs = [type(d).__name__ for d in joint.graph.output_node().meta["desc"]]
    forward_outputs = descs.index("GradAOTOutput") if "GradAOTOutput" in descs else len(descs)
    groups: Mapping[str, Any] | None = graph.attachments.groups
    group_of = {member: group for group, members in groups.items() for member in members} if groups else None

    def saved_at(fraction: float) -> frozenset[int]:
        module = _fresh_copy(joint)  # the partitioner edits the graph it is given
        with config.patch(activation_memory_budget=fraction, activation_memory_budget_solver=knapsack, cse=False), \
                failure_dumps_kept_out():
            forward, _ = min_cut_rematerialization_partition(module, None, num_fwd_outputs=forward_outputs)
        saved_values = forward.graph.output_node().args[0][forward_outputs:]
        owners = {owner for value in saved_values for owner in binding.storage.get(value.name, ())}
        if group_of is not None:
            owners = {group_of[o] for o in owners if o in group_of}
        return frozenset(graph.index[o] for o in owners if o in graph.index and not graph.pinned[graph.index[o]])

    return saved_at


def _fresh_copy(module: Any) -> Any:
    """A new GraphModule over a copy of ``module``'s graph: new nodes, their ``meta`` dicts copied (the
    FakeTensors in them shared, not deep-copied: torch forbids reading a FakeTensor's data)."""
    from torch import fx

    graph = fx.Graph()
    value, output = graph.graph_copy(module.graph, {}, return_output_node=True)
    graph.output(value).meta = copy.copy(output.meta)
    return fx.GraphModule(module, graph)


@contextmanager
def failure_dumps_kept_out() -> Iterator[None]:
    """Keep torch's min-cut failure dumps out of the working directory while the block runs.

    When the partitioner's cut fails it writes ``min_cut_failed_graph.txt`` (then ``_1``, ``_2``...) into
    the current directory before it raises: a user's directory would fill with them. Inside the block
    they go to a temporary directory removed afterwards; the failure itself still raises, with torch's
    message (which names the infinite-capacity path). A torch without that helper is left alone.
    """
    from torch._functorch import partitioners

    original = getattr(partitioners, "_get_unique_path", None)
    if original is None:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="remat-min-cut-") as folder:
        partitioners._get_unique_path = lambda base, extension: original(os.path.join(folder, base), extension)
        try:
            yield
        finally:
            partitioners._get_unique_path = original
