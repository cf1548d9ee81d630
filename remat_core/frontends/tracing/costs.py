"""What an op of a traced graph costs, under each of :data:`~remat_core.graph.cost_models.COST_MODELS`.

- ``flops``: PyTorch's own formulas, :data:`torch.utils.flop_counter.flop_registry`, evaluated on
  the op's FakeTensor shapes; ops without a formula (elementwise ops, norms, pooling, softmax...) are
  memory-bound and get their memory traffic times :data:`~remat_core.graph.cost_models.FLOPS_PER_BYTE`.
- ``unit``: 1 per node. ``bytes``: bytes read plus written.
- ``measured``: seconds, the median of timed runs of each op on real tensors (CUDA events on a GPU), kept on disk
  by op and shape (:mod:`.op_times`): memory-bound ops cost what they take, and a second trace costs nothing.

A view moves no data and costs nothing in any model (views are merged into their storage owner
anyway). A multi-output op's cost is shared among the nodes of its outputs in proportion to their
bytes (see :mod:`.to_graph`), except under ``unit``, where each output node counts 1.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Mapping

import torch
from torch import fx
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from ...errors import TraceError
from ...graph import COST_MODELS, DEFAULT_REPEATS, FLOPS_PER_BYTE
from .capture import JointGraph, real_placeholder_values
from .kernel_memory import op_key
from .op_times import op_times, setting

def check_cost_model(cost: str, source: str) -> str:
    """The name, if it is a known cost model; a :class:`TraceError` listing them if not."""
    if cost not in COST_MODELS:
        raise TraceError(source, f"unknown cost model {cost!r}", hint=f"use one of {', '.join(COST_MODELS)}")
    return cost


def value_bytes(value: Any) -> int:
    """Bytes of every tensor in a value (a tensor, or a tuple/list of them; other leaves count 0)."""
    return sum(t.numel() * t.element_size() for t in tree_leaves(value) if isinstance(t, torch.Tensor))


def traffic_bytes(node: fx.Node) -> int:
    """Bytes an op reads (its tensor arguments) plus bytes it writes (its outputs)."""
    read = sum(value_bytes(arg.meta.get("val")) for arg in node.all_input_nodes)
    return read + value_bytes(node.meta.get("val"))


def op_flops(node: fx.Node) -> int | None:
    """FLOPs of an ATen op by PyTorch's formula for it, None when there is no formula.

    One formula is corrected: torch 2.13's ``convolution_backward`` ignores ``groups`` in its weight
    gradient term, counting a depthwise convolution's weight gradient as a dense one (``groups``
    times too many: MobileNet's backward would cost 20x its forward). That term is divided by
    ``groups`` here, which makes it equal to the forward convolution's FLOPs, as it should be.
    """
    packet = getattr(node.target, "overloadpacket", None)
    formula = flop_registry.get(packet) if packet is not None else None
    if formula is None:
        return None
    args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda arg: arg.meta.get("val"))
    out_val = node.meta.get("val")
    if packet is torch.ops.aten.convolution_backward:
        return _grouped_convolution_backward_flops(formula, args, kwargs, out_val)
    return int(formula(*args, out_val=out_val, **kwargs))


_CONV_BACKWARD_GROUPS, _CONV_BACKWARD_MASK = 9, 10
"""Positions of ``groups`` and ``output_mask`` in ``aten.convolution_backward``'s schema."""


def _grouped_convolution_backward_flops(formula: Any, args: tuple, kwargs: dict, out_val: Any) -> int:
    groups = args[_CONV_BACKWARD_GROUPS]
    mask = list(args[_CONV_BACKWARD_MASK])

    def part(index: int) -> int:
        only = [i == index and mask[i] for i in range(len(mask))]
        patched = args[:_CONV_BACKWARD_MASK] + (only,) + args[_CONV_BACKWARD_MASK + 1:]
        return int(formula(*patched, out_val=out_val, **kwargs))

    return part(0) + part(1) // groups


def op_cost(node: fx.Node, cost: str, measured: Mapping[str, float] | None = None) -> float:
    """Cost of one FX op under a cost model (``measured`` needs the times of :func:`measure_op_times`)."""
    if cost == "unit":
        return 1.0
    if cost == "bytes":
        return float(traffic_bytes(node))
    if cost == "measured":
        return measured[node.name]
    flops = op_flops(node)
    return float(flops) if flops is not None else FLOPS_PER_BYTE * traffic_bytes(node)


def seed_cost(cost: str, value: torch.Tensor) -> float:
    """Cost of the gradient seed ``ones_like(loss)``: it writes the loss's bytes and reads nothing."""
    return _synthetic_cost(cost, value_bytes(value), lambda: (), lambda: torch.ones(value.shape, dtype=value.dtype))


def accumulation_cost(cost: str, value: torch.Tensor, count: int) -> float:
    """Cost of summing ``count`` gradients shaped like ``value`` (reads ``count``, writes one)."""
    return _synthetic_cost(cost, (count + 1) * value_bytes(value),
                           lambda: [torch.zeros(value.shape, dtype=value.dtype) for _ in range(count)],
                           lambda first, *rest: sum(rest, first))


def _synthetic_cost(cost: str, traffic: int, make_inputs: Callable[[], Any], run: Callable[..., Any]) -> float:
    """Cost of an op the tracer adds itself (no FX node, no FLOP formula: it is memory-bound)."""
    if cost == "unit":
        return 1.0
    if cost == "bytes":
        return float(traffic)
    if cost == "flops":
        return FLOPS_PER_BYTE * traffic
    inputs = make_inputs()
    first = inputs[0] if inputs else run()
    key = f"{setting(first.device)} synthetic {traffic} bytes {first.dtype} {len(inputs)} inputs"
    cache = op_times()
    kept = cache.get([key]) if cache is not None else {}
    if key in kept:
        return kept[key]
    run(*inputs)
    samples = []
    for _ in range(DEFAULT_REPEATS):
        start = time.perf_counter()
        run(*inputs)
        samples.append(time.perf_counter() - start)
    if cache is not None:
        cache.put({key: statistics.median(samples)})
    return statistics.median(samples)


def measure_op_times(joint: JointGraph, repeats: int = DEFAULT_REPEATS) -> dict[str, float]:
    """Every op's time in seconds, by FX node name: read from the op-time cache (:mod:`.op_times`) where it holds the
    op (by target, argument shapes and dtypes, device, threads and torch build), else measured.

    Measuring runs the joint graph once on real tensors, each op once to warm up, then ``repeats`` more times (on
    CUDA timed with CUDA events); its time is the median. Parameters and buffers are the model's own tensors,
    inputs and targets the example ones, the gradient seed is ones; the graph is functional, so nothing of the
    model is modified. When the cache holds every op, nothing runs.

    Raises
    ------
    TraceError
        When the model or its inputs hold no real data (meta tensors).
    """
    values = real_placeholder_values(joint, "time ops", hint="use --cost flops, bytes or unit")
    device = next((v.device for v in values if isinstance(v, torch.Tensor)), torch.device("cpu"))
    nodes = [n for n in joint.graph_module.graph.nodes if n.op == "call_function"]
    where = setting(device)
    keys = {n.name: f"{where} {op_key(n, device)!r}" for n in nodes}
    cache = op_times()
    known = cache.get(keys.values()) if cache is not None else {}
    if all(key in known for key in keys.values()):
        return {name: known[key] for name, key in keys.items()}
    timer = _TimingInterpreter(joint.graph_module, repeats, {n for n, key in keys.items() if key not in known},
                               device)
    with torch.no_grad():
        timer.run(*values)
    measured: dict[str, float] = {}
    for name, seconds in timer.times.items():  # ops alike cost alike: the first measurement of a key holds
        measured.setdefault(keys[name], seconds)
    if cache is not None:
        cache.put(measured)
    return {name: known.get(key, measured.get(key, 0.0)) for name, key in keys.items()}


SAC_PROBE_OPS = 200
"""Ops in the chain :func:`sac_policy_seconds` times."""


def sac_policy_seconds(joint: JointGraph) -> float:
    """What a selective-checkpoint policy adds to each op of a region, in seconds, on the device of ``joint``'s inputs:
    a chain of small ops checkpointed with a policy that recomputes all, against the same chain plainly checkpointed
    (SAC's Python dispatch mode as the forward caches and the recomputation replays), the fastest of a few runs;
    kept in the op-time cache."""
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    device = next((t.device for t in joint.inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))
    key = f"{setting(device)} sac policy per op, {SAC_PROBE_OPS}-op chain"
    cache = op_times()
    kept = cache.get([key]) if cache is not None else {}
    if key in kept:
        return kept[key]
    start = torch.ones(8, device=device, requires_grad=True)

    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(SAC_PROBE_OPS):
            x = x * 1.0
        return x

    def context() -> Any:
        return create_selective_checkpoint_contexts(lambda ctx, func, *a, **k: CheckpointPolicy.PREFER_RECOMPUTE)

    def fastest(**policy: Any) -> float:
        best = math.inf
        for _ in range(DEFAULT_REPEATS + 2):
            began = time.perf_counter()
            checkpoint(chain, start, use_reentrant=False, **policy).sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            best = min(best, time.perf_counter() - began)
        return best

    seconds = max(0.0, (fastest(context_fn=context) - fastest()) / SAC_PROBE_OPS)
    if cache is not None:
        cache.put({key: seconds})
    return seconds


class _TimingInterpreter(fx.Interpreter):
    """Runs the graph node by node and records the median time of each ``call_function`` node in ``timed``."""

    def __init__(self, module: fx.GraphModule, repeats: int, timed: set[str], device: torch.device):
        super().__init__(module)
        self.repeats = repeats
        self.timed = timed
        self.cuda = device.type == "cuda"
        self.times: dict[str, float] = {}

    def run_node(self, node: fx.Node) -> Any:
        result = super().run_node(node)
        if node.op == "call_function" and node.name in self.timed:
            samples = []
            for _ in range(self.repeats):
                if self.cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    super().run_node(node)
                    end.record()
                    end.synchronize()
                    samples.append(start.elapsed_time(end) / 1e3)
                else:
                    started = time.perf_counter()
                    super().run_node(node)
                    samples.append(time.perf_counter() - started)
            self.times[node.name] = statistics.median(samples)
        return result
