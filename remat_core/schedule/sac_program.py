"""What selective activation checkpointing is asked to do: a traced step's forward cut into checkpoint regions,
and which ops in them save their outputs.

A plan of compute and free ops (:mod:`.decisions`: keep, recompute or transient per forward tensor) or a
plan made in SAC's own terms (regions and saved ops, by a solver) becomes a :class:`ForwardProgram`: the
forward FX ops that compute the step's returns, in order, cut into :class:`Region` s, the saved set and what
SAC cannot follow (:class:`Uncontrolled`). :mod:`remat_core.run.forward` runs it on real tensors;
:mod:`.sac_route` says, as ops the simulator judges, what a step with it holds and recomputes.

Torch-free: the FX nodes come from the graph's attachments (``graph.attachments.binding``) and are only read.

- **Regions.** A checkpoint region recomputes in one run, the first time the backward needs one
  of its tensors, and keeps its inputs alive until its backward is over. From a plan of ops, the forward
  is cut so that the largest region's recomputation plus the bytes the cuts keep alive (tensors crossing a
  cut that the plan would have freed) is smallest (:func:`_regions`); every piece holding a tensor the plan
  recomputes becomes one checkpointed region, the other pieces run plainly.
- **Policy.** Inside a region an op is ``MUST_SAVE`` when the plan keeps (one of) its output
  tensor(s), else ``PREFER_RECOMPUTE``; a view follows the tensor whose storage it shares.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..graph import ComputeGraph, node_label
from .decisions import KEEP, RECOMPUTE, PlanDecisions

@dataclass(frozen=True)
class Uncontrolled:
    """A tensor the plan frees that the way of running the step keeps (it falls back to saving it)."""

    tensor: str
    bytes: int
    reason: str

    def summary(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "bytes": self.bytes, "reason": self.reason}



OUTPUT_TAG = "remat_output"
"""Key of ``node.meta["custom"]`` marking the alias of the model's i-th output tensor in a traced step (set by
:func:`remat_core.run.rematerialized.rematerialize`, which hands the outputs back in that order)."""


def forward_returns(graph: ComputeGraph, *, loss: bool) -> list[str]:
    """The FX values a traced step's forward hands back: the loss (``loss=True``: a training step measured here,
    which runs the backward from it), the model's outputs (held by the caller to the step's end) and the buffer
    updates.

    The outputs are in the order the model returns them when the trace tagged them (:data:`OUTPUT_TAG`), else in
    the order the step's end reads them.
    """
    graph = graph.attachments.op_graph or graph  # a module-level graph's step is its op-level graph's
    binding = graph.attachments.binding
    tagged = {node.meta["custom"][OUTPUT_TAG]: node.args[0].name
              for node in binding.graph_module.graph.nodes if OUTPUT_TAG in (node.meta.get("custom") or {})}
    if tagged:
        outputs = [tagged[i] for i in range(len(tagged))]
    else:
        end = next(o for o in graph.outputs if graph.node(o).kind == "other")  # the end of the step holds these
        outputs = [binding.producer[n] for n in graph.preds(end) if graph.node(n).kind == "forward"]
    return [*([binding.producer[binding.loss]] if loss else []), *outputs, *binding.buffer_updates.values()]


@dataclass(frozen=True)
class Region:
    """Forward ops ``nodes[start:end]``, their inputs from earlier ops and the values they hand on."""

    start: int
    end: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    checkpointed: bool
    done_after: tuple[tuple[str, ...], ...]
    """For each op of the region: the values (its inputs or its own) nothing reads after it, dropped then."""


@dataclass(frozen=True)
class ForwardProgram:
    """The forward ops of a traced step that compute ``returns``, cut into regions by a plan.

    Attributes
    ----------
    graph_module : torch.fx.GraphModule
        The joint graph the ops come from.
    nodes : tuple of torch.fx.Node
        The forward ops, in order.
    returns : tuple of str
        FX names of the values :func:`run_forward` returns.
    saved : frozenset of str
        FX names of the ops whose outputs a checkpoint region saves (``MUST_SAVE``).
    regions : tuple of Region
    last_read : mapping of str to int
        FX name -> position of its last reader among ``nodes`` (``len(nodes)`` when returned).
    uncontrolled : tuple of Uncontrolled
    early_stop : bool
        A region's recomputation stops after the last op that saved a tensor the backward reads (PyTorch's
        default); False: it re-runs the whole region (torchtitan's setting).
    """

    graph_module: Any
    nodes: tuple[Any, ...]
    returns: tuple[str, ...]
    saved: frozenset[str]
    regions: tuple[Region, ...]
    last_read: Mapping[str, int]
    uncontrolled: tuple[Uncontrolled, ...]
    early_stop: bool = True

    @property
    def checkpointed_regions(self) -> int:
        return sum(r.checkpointed for r in self.regions)

    def region_at(self, position: int) -> int:
        """The index of the region holding the op at ``position`` among :attr:`nodes`."""
        return bisect.bisect_right([r.start for r in self.regions], position) - 1

    @property
    def placeholders(self) -> list[str]:
        """The joint graph's placeholders the ops read (weights, buffers, inputs), in graph order."""
        read = {a.name for n in self.nodes for a in n.all_input_nodes}
        return [n.name for n in self.graph_module.graph.find_nodes(op="placeholder") if n.name in read]


@dataclass(frozen=True)
class SacPlan:
    """A plan in SAC's own terms: which spans of the forward ops are checkpoint regions, and which ops in them save
    their outputs (``MUST_SAVE``; the others ``PREFER_RECOMPUTE``).

    Attributes
    ----------
    regions : tuple of (str, str)
        Checkpointed spans of the forward ops, each by the FX names of its first and last op (as
        :func:`forward_ops` orders them), in order and disjoint; every op outside them runs plainly (autograd
        saves what it needs).
    saved : frozenset of str
        FX names of the ops inside the regions that save their outputs.
    early_stop : bool
        Whether a region's recomputation stops at the last op that saved a tensor (see :class:`ForwardProgram`).
    """

    regions: tuple[tuple[str, str], ...]
    saved: frozenset[str] = frozenset()
    early_stop: bool = True

    def to_json(self) -> dict[str, Any]:
        """The plan as plain data (a schedule's ``solver_info["sac_plan"]``)."""
        return {"regions": [list(r) for r in self.regions], "saved": sorted(self.saved),
                "early_stop": self.early_stop}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SacPlan":
        """The plan :meth:`to_json` wrote (ValueError for anything else)."""
        try:
            return cls(tuple((str(a), str(b)) for a, b in data["regions"]), frozenset(map(str, data["saved"])),
                       bool(data.get("early_stop", True)))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a SAC plan: {e}; expected regions, saved and early_stop") from None


def span_names(nodes: Sequence[Any], start: int, end: int) -> tuple[str, str]:
    """The ``(first, last)`` FX names of the ops ``nodes[start:end]``: a :class:`SacPlan` region."""
    return nodes[start].name, nodes[end - 1].name


SAC_PLAN = "sac_plan"
"""The ``solver_info`` key of a schedule made in SAC's own terms: its :class:`SacPlan` (``to_json``), which the SAC
route installs as it is."""


def forward_ops(graph: ComputeGraph, returns: Sequence[str]) -> tuple[Any, ...]:
    """The FX ops of a traced step's forward that compute ``returns``, in order (what a program runs)."""
    gm = graph.attachments.binding.graph_module
    wanted = _ancestors(gm, returns)
    return tuple(n for n in gm.graph.nodes if n.name in wanted and n.op in ("call_function", "get_attr"))


def block_spans(graph: ComputeGraph, nodes: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """Block path -> the positions ``[start, end)`` of its ops among ``nodes`` (the model's blocks,
    :attr:`~remat_core.frontends.tracing.to_graph.FxBinding.blocks`; a block with no forward op is left out)."""
    binding = graph.attachments.binding
    spans: dict[str, tuple[int, int]] = {}
    for k, node in enumerate(nodes):
        module = binding.module_of.get(node.name, "")
        block = next((b for b in binding.blocks if module == b or module.startswith(b + ".")), None)
        if block is not None:
            start, end = spans.get(block, (k, k + 1))
            spans[block] = (min(start, k), max(end, k + 1))
    return spans


def program_of_plan(graph: ComputeGraph, returns: Sequence[str], plan: SacPlan) -> ForwardProgram:
    """The forward program that installs ``plan`` (on an op-level traced graph) as it says.

    Raises
    ------
    ValueError
        For a region naming an op the forward does not run, or regions that are not disjoint spans in order.
    """
    graph = graph.attachments.op_graph or graph
    nodes = forward_ops(graph, returns)
    position = {node.name: k for k, node in enumerate(nodes)}
    edges, previous = [0], 0
    checkpointed = []
    for first, last in plan.regions:
        if first not in position or last not in position:
            raise ValueError(f"SAC plan region {first}..{last}: {first if first not in position else last} is not an "
                             f"op of this step's forward (a plan made for another graph?)")
        start, end = position[first], position[last] + 1
        if not previous <= start < end:
            raise ValueError(f"SAC plan region {first}..{last} does not come after the region before it")
        if start > previous:
            edges.append(start)
            checkpointed.append(False)
        edges.append(end)
        checkpointed.append(True)
        previous = end
    if previous < len(nodes):
        edges.append(len(nodes))
        checkpointed.append(False)
    last_read = _last_reads(nodes, set(returns))
    regions = _build_regions(nodes, last_read, edges, checkpointed)
    inside = {node.name for r in regions if r.checkpointed for node in nodes[r.start:r.end]}
    return ForwardProgram(graph.attachments.binding.graph_module, nodes, tuple(returns), plan.saved & inside, regions,
                          last_read, (), plan.early_stop)


def schedule_program(decisions: PlanDecisions, solver_info: Mapping[str, Any], returns: Sequence[str]
                     ) -> ForwardProgram:
    """The program a schedule runs as through SAC: its own :class:`SacPlan` when a solver made it in SAC's terms
    (``solver_info["sac_plan"]``), else the regions its ``decisions`` allow (:func:`forward_program`)."""
    plan = solver_info.get(SAC_PLAN)
    if plan is not None:
        return program_of_plan(decisions.graph, returns, SacPlan.from_json(plan))
    return forward_program(decisions, returns)


def forward_program(decisions: PlanDecisions, returns: Sequence[str]) -> ForwardProgram:
    """The forward ops computing the FX values ``returns``, cut into regions as ``decisions`` allow.

    Parameters
    ----------
    decisions : PlanDecisions
        Of an op-level traced graph (its ``fx_binding`` gives the joint graph and the storages).
    returns : sequence of str
        FX node names to compute (the loss, model outputs, buffer updates).
    """
    graph = decisions.graph
    binding = graph.attachments.binding
    gm = binding.graph_module
    nodes = forward_ops(graph, returns)

    def freed_owners(name: str) -> list[str]:
        return [o for o in binding.storage.get(name, ()) if decisions.of(o) not in (None, KEEP)]

    saved = frozenset(n.name for n in nodes if not freed_owners(n.name)
                      or any(decisions.of(o) == KEEP for o in binding.storage.get(n.name, ())))
    last_read = _last_reads(nodes, set(returns))
    regions = _regions(nodes, last_read, *_region_costs(nodes, last_read, set(returns), freed_owners, decisions))
    uncontrolled = tuple(Uncontrolled(node_label(graph, owner), graph.node(owner).mem,
                                      "the plan frees it, but it is handed to the caller")
                         for name in dict.fromkeys(returns) for owner in freed_owners(name))
    return ForwardProgram(gm, nodes, tuple(returns), saved, regions, last_read, uncontrolled)


def _ancestors(gm: Any, names: Sequence[str]) -> set[str]:
    by_name = {n.name: n for n in gm.graph.nodes}
    seen: set[str] = set()
    stack = [by_name[name] for name in names]
    while stack:
        node = stack.pop()
        if node.name not in seen:
            seen.add(node.name)
            stack.extend(node.all_input_nodes)
    return seen


def _last_reads(nodes: Sequence[Any], returns: set[str]) -> dict[str, int]:
    """FX name -> position of its last reader among ``nodes`` (its own position if none reads it;
    ``len(nodes)`` for a returned value)."""
    position = {n.name: k for k, n in enumerate(nodes)}
    last_read = {n.name: (len(nodes) if n.name in returns else k) for k, n in enumerate(nodes)}
    for k, node in enumerate(nodes):
        for source in node.all_input_nodes:
            if source.name in position:
                last_read[source.name] = max(last_read[source.name], k)
    return last_read


def _region_costs(nodes: Sequence[Any], last_read: Mapping[str, int], returns: set[str],
                  freed_owners: Callable[[str], list[str]], decisions: PlanDecisions) -> tuple[list[int], list[int]]:
    """Per op, the bytes of the tensors it computes that the plan recomputes; per cut after an op, the
    bytes of the tensors crossing it that the plan frees (a region input stays alive). A tensor is
    spanned from its first op to its last reader (a returned one is kept anyway: no span)."""
    position = {n.name: k for k, n in enumerate(nodes)}
    spans: dict[str, tuple[int, int]] = {}
    for node in nodes:
        here = position[node.name]
        reach = here if node.name in returns else last_read[node.name]
        for owner in freed_owners(node.name):
            first, last = spans.get(owner, (here, here))
            spans[owner] = (min(first, here), max(last, reach))
    recompute_bytes = [0] * len(nodes)
    crossing = [0] * (len(nodes) + 1)  # a difference array over the cuts
    for owner, (first, last) in spans.items():
        mem = decisions.graph.node(owner).mem
        if decisions.of(owner) == RECOMPUTE:
            recompute_bytes[first] += mem
        crossing[first] += mem
        crossing[last] -= mem
    return recompute_bytes, list(itertools.accumulate(crossing))[:-1]


def _regions(nodes: Sequence[Any], last_read: Mapping[str, int], recompute_bytes: Sequence[int],
             cut_bytes: Sequence[int]) -> tuple[Region, ...]:
    """Cut the ops into checkpoint regions.

    A region recomputes in one run, so its recomputed tensors (``recompute_bytes`` per op) are
    alive together when the backward reaches it; a cut after op k makes the tensors crossing it
    region inputs, alive until the region's backward is over, which costs the bytes the plan freed among them
    (``cut_bytes[k]``). The cuts minimise the estimated extra peak, the largest region's
    recomputation plus every cut's cost: for each bound on a region's recomputation (a geometric
    grid between the largest single op's and the total) the cheapest cuts under it are found by
    dynamic programming (a sliding-window minimum, linear in the ops), and the best bound is kept.
    """
    n = len(nodes)
    total = sum(recompute_bytes)
    cuts = [0, n] if total == 0 else _cheapest_cuts(recompute_bytes, cut_bytes, total)
    return _build_regions(nodes, last_read, cuts, [any(recompute_bytes[a:b]) for a, b in zip(cuts, cuts[1:])])


def _build_regions(nodes: Sequence[Any], last_read: Mapping[str, int], cuts: Sequence[int],
                   checkpointed: Sequence[bool]) -> tuple[Region, ...]:
    """The regions between consecutive ``cuts`` (0, ..., n), each checkpointed as ``checkpointed`` says."""
    position = {node.name: k for k, node in enumerate(nodes)}
    regions = []
    for (start, stop), ckpt in zip(zip(cuts, cuts[1:]), checkpointed):
        inside = {node.name for node in nodes[start:stop]}
        inputs = dict.fromkeys(s.name for node in nodes[start:stop] for s in node.all_input_nodes
                               if s.name in position and s.name not in inside)
        outputs = tuple(sorted((name for name in inside if last_read[name] >= stop), key=position.__getitem__))
        done_after = tuple(tuple(name for name in (*dict.fromkeys(s.name for s in node.all_input_nodes), node.name)
                                 if name in position and last_read[name] == k and name not in outputs)
                           for k, node in enumerate(nodes[start:stop], start))
        regions.append(Region(start, stop, tuple(inputs), outputs, checkpointed=ckpt, done_after=done_after))
    return tuple(regions)


_BOUNDS = 24
"""Bounds on a region's recomputation tried by :func:`_regions`."""


def _cheapest_cuts(recompute_bytes: Sequence[int], cut_bytes: Sequence[int], total: int) -> list[int]:
    """Region boundaries (0, ..., n) minimising max region recomputation + total cut cost."""
    n = len(recompute_bytes)
    prefix = list(itertools.accumulate(recompute_bytes, initial=0))
    smallest = max(recompute_bytes)
    bounds = sorted({int(smallest * (total / smallest) ** (j / _BOUNDS)) for j in range(_BOUNDS + 1)} | {total})
    best: tuple[float, list[int]] = (math.inf, [0, n])
    for bound in bounds:
        cost, starts = _cuts_under(prefix, cut_bytes, bound)
        if cost + bound < best[0]:
            best = (cost + bound, starts)
    return best[1]


def _cuts_under(prefix: Sequence[int], cut_bytes: Sequence[int], bound: int) -> tuple[float, list[int]]:
    """The cheapest cuts such that no region recomputes more than ``bound`` bytes: ``f[b]`` is the
    cheapest cost of cutting ops ``[0, b)`` into regions, a region ``[a, b)`` allowed when it
    recomputes at most ``bound``; a region starting at ``a > 0`` pays ``cut_bytes[a - 1]``."""
    n = len(prefix) - 1
    f = [math.inf] * (n + 1)
    start_of = [0] * (n + 1)
    f[0] = 0.0
    window: collections.deque[int] = collections.deque()  # region starts, by increasing entry cost
    low = 0
    for b in range(1, n + 1):
        a = b - 1
        entry = f[a] + (cut_bytes[a - 1] if a > 0 else 0)
        while window and f[window[-1]] + (cut_bytes[window[-1] - 1] if window[-1] > 0 else 0) >= entry:
            window.pop()
        window.append(a)
        while prefix[b] - prefix[low] > bound:
            low += 1
        while window and window[0] < low:
            window.popleft()
        if window:
            first = window[0]
            f[b] = f[first] + (cut_bytes[first - 1] if first > 0 else 0)
            start_of[b] = first
    if f[n] == math.inf:
        return math.inf, [0, n]
    starts, b = [n], n
    while b > 0:
        b = start_of[b]
        starts.append(b)
    return f[n], starts[::-1]
