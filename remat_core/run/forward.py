"""A traced step's forward as eager PyTorch ops, with a plan installed as selective activation checkpointing.

The tracer keeps the step's joint graph at ATen level. Its forward ops, called one by one on the
model's real parameters with autograd on, are the model's own forward (the same ops, the same
gradients: autograd derives the backward). A plan (:class:`~remat_core.run.decisions.PlanDecisions`)
goes in through PyTorch's selective activation checkpointing (SAC,
:func:`torch.utils.checkpoint.create_selective_checkpoint_contexts`):

- **Regions.** A checkpoint region recomputes in one run, the first time the backward needs one
  of its tensors, and keeps its inputs alive until its backward is over (what that holds, step by
  step: :mod:`.sac_route`). The forward is cut so that the largest
  region's recomputation plus the bytes the cuts keep alive (tensors crossing a cut that the plan
  would have freed) is smallest (:func:`_regions`); every piece holding a tensor the plan
  recomputes becomes one non-reentrant :func:`torch.utils.checkpoint.checkpoint` region, the
  other pieces run plainly. A plan that recomputes in many small bursts (each tensor just before
  it is read, as torch's partitioner does) costs some of its savings this way.
- **Policy.** Inside a region an op is ``MUST_SAVE`` when the plan keeps (one of) its output
  tensor(s), else ``PREFER_RECOMPUTE``; a view follows the tensor whose storage it shares.
- **Random ops** (dropout) restore, when recomputed, the RNG state they drew from in the forward,
  so the mask is the same; with a ``seed`` each draws from its own stream seeded by its position
  in the joint graph, as :func:`remat_core.run.executor.execute` does, so every way of running
  the step draws the same masks. A recomputation leaves the RNG as it found it. Checkpoint's own
  ``preserve_rng_state`` is off: it would keep a copy of the RNG state (5 KB on the CPU) for every
  region from the forward to its recomputation, for regions with no random op too.

What SAC cannot follow is reported as :class:`Uncontrolled` (the tensor, its bytes, why): a tensor
the plan frees but the caller is handed (a model output) stays alive.
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import fx
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from ..graph import node_label
from .decisions import KEEP, RECOMPUTE, PlanDecisions
from .executor import SEED_STRIDE, draws_random
from .report import Uncontrolled

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
    """

    graph_module: fx.GraphModule
    nodes: tuple[fx.Node, ...]
    returns: tuple[str, ...]
    saved: frozenset[str]
    regions: tuple[Region, ...]
    last_read: Mapping[str, int]
    uncontrolled: tuple[Uncontrolled, ...]

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
    wanted = _ancestors(gm, returns)
    nodes = tuple(n for n in gm.graph.nodes if n.name in wanted and n.op in ("call_function", "get_attr"))

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


def run_forward(program: ForwardProgram, values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True, on_value: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Run the forward ops on real ``values`` (placeholder name -> tensor) with autograd, as the plan says.

    Parameters
    ----------
    program : ForwardProgram
    values : mapping
        A value for every placeholder the ops read (parameters, buffers, inputs).
    seed : int, optional
        Random ops draw from per-op streams of this seed (None: from the global RNG).
    plan : bool
        False: every region runs plainly (eager autograd, nothing recomputed).
    on_value : callable, optional
        Called with each op's FX name and value as the forward (not a recomputation) makes it.

    Returns
    -------
    dict
        FX name -> value, for ``program.returns``.
    """
    positions = {n.name: k for k, n in enumerate(program.graph_module.graph.nodes)}
    fetch = fx.Interpreter(program.graph_module).fetch_attr
    env: dict[str, Any] = dict(values)
    current: list[fx.Node] = []

    def policy(ctx, func, *args, **kwargs) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE if current[-1].name in program.saved else CheckpointPolicy.PREFER_RECOMPUTE

    context = functools.partial(create_selective_checkpoint_contexts, policy)
    for region in program.regions:
        run = _region_function(program.nodes[region.start:region.end], region, env, fetch, current,
                               positions, seed, on_value)
        inputs = [env[name] for name in region.inputs]
        if plan and region.checkpointed:
            outputs = checkpoint(run, *inputs, use_reentrant=False, context_fn=context,
                                 preserve_rng_state=False)  # random ops draw as before on their own
        else:
            outputs = run(*inputs)
        env.update(zip(region.outputs, outputs))
        for name in region.inputs:
            if program.last_read[name] < region.end:
                del env[name]
    return {name: env[name] for name in program.returns}


def write_buffer_updates(model: Any, updates: Mapping[str, str], returned: Mapping[str, Any]) -> None:
    """Copy each buffer's new value (BatchNorm's running statistics: ``updates`` maps buffer name -> FX
    name) into the buffer, as eager BatchNorm does in place. Through ``.data``: autograd saved the old
    buffer for the backward (which does not read it in training) and must not see a new version."""
    for name, fx_name in updates.items():
        model.get_buffer(name).data.copy_(returned[fx_name])


def _region_function(nodes: Sequence[fx.Node], region: Region, env: Mapping[str, Any],
                     fetch: Callable[[str], Any], current: list[fx.Node], positions: Mapping[str, int],
                     seed: int | None, on_value: Callable[[str, Any], None] | None = None) -> Callable[..., tuple]:
    """The region's ops as one function of its inputs (called again by checkpoint to recompute)."""
    rng_states: dict[str, torch.Tensor] = {}
    random_devices = {_device_of(n) for n in nodes if draws_random(n)}

    def run(*inputs: Any) -> tuple:
        recomputing = run.calls > 0  # checkpoint calls a region again to recompute it
        run.calls += 1
        if not recomputing or not random_devices:
            return ops(inputs, recomputing)
        states = {device: _rng_state(device) for device in random_devices}
        try:  # a recomputation restores its random ops' states: the RNG the backward goes on with is left as it was
            return ops(inputs, recomputing)
        finally:
            for device, state in states.items():
                _set_rng_state(device, state)

    def ops(inputs: tuple, recomputing: bool) -> tuple:
        local = dict(zip(region.inputs, inputs))
        read = lambda a: local[a.name] if a.name in local else env[a.name]  # noqa: E731
        for node, done in zip(nodes, region.done_after):
            current.append(node)
            if node.op == "get_attr":
                local[node.name] = fetch(node.target)
            else:
                if draws_random(node):
                    _draw_as_before(node, rng_states, recomputing, seed, positions)
                local[node.name] = node.target(*fx.node.map_arg(node.args, read), **fx.node.map_arg(node.kwargs, read))
            if on_value is not None and not recomputing:
                on_value(node.name, local[node.name])
            current.pop()
            for name in done:
                local.pop(name, None)
        return tuple(local[name] for name in region.outputs)

    run.calls = 0
    return run


def _draw_as_before(node: fx.Node, states: dict[str, torch.Tensor], recomputing: bool, seed: int | None,
                    positions: Mapping[str, int]) -> None:
    """Before a random op: seed it (first run, with a seed) and keep the RNG state, or restore it (recomputation)."""
    device = _device_of(node)
    if recomputing and node.name in states:
        _set_rng_state(device, states[node.name])
        return
    if seed is not None:
        torch.manual_seed(seed * SEED_STRIDE + positions[node.name])
    states[node.name] = _rng_state(device)


def _device_of(node: fx.Node) -> torch.device:
    value = node.meta.get("val")
    value = value[0] if isinstance(value, (tuple, list)) else value
    return value.device if isinstance(value, torch.Tensor) else torch.device("cpu")


def _rng_state(device: torch.device) -> torch.Tensor:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def _set_rng_state(device: torch.device, state: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def _ancestors(gm: fx.GraphModule, names: Sequence[str]) -> set[str]:
    by_name = {n.name: n for n in gm.graph.nodes}
    seen: set[str] = set()
    stack = [by_name[name] for name in names]
    while stack:
        node = stack.pop()
        if node.name not in seen:
            seen.add(node.name)
            stack.extend(node.all_input_nodes)
    return seen


def _last_reads(nodes: Sequence[fx.Node], returns: set[str]) -> dict[str, int]:
    """FX name -> position of its last reader among ``nodes`` (its own position if none reads it;
    ``len(nodes)`` for a returned value)."""
    position = {n.name: k for k, n in enumerate(nodes)}
    last_read = {n.name: (len(nodes) if n.name in returns else k) for k, n in enumerate(nodes)}
    for k, node in enumerate(nodes):
        for source in node.all_input_nodes:
            if source.name in position:
                last_read[source.name] = max(last_read[source.name], k)
    return last_read


def _region_costs(nodes: Sequence[fx.Node], last_read: Mapping[str, int], returns: set[str],
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


def _regions(nodes: Sequence[fx.Node], last_read: Mapping[str, int], recompute_bytes: Sequence[int],
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
    position = {node.name: k for k, node in enumerate(nodes)}
    regions = []
    for start, stop in zip(cuts, cuts[1:]):
        inside = {node.name for node in nodes[start:stop]}
        inputs = dict.fromkeys(s.name for node in nodes[start:stop] for s in node.all_input_nodes
                               if s.name in position and s.name not in inside)
        outputs = tuple(sorted((name for name in inside if last_read[name] >= stop), key=position.__getitem__))
        done_after = tuple(tuple(name for name in (*dict.fromkeys(s.name for s in node.all_input_nodes), node.name)
                                 if name in position and last_read[name] == k and name not in outputs)
                           for k, node in enumerate(nodes[start:stop], start))
        regions.append(Region(start, stop, tuple(inputs), outputs,
                              checkpointed=any(recompute_bytes[start:stop]), done_after=done_after))
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
