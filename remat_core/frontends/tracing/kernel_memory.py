"""What each op's kernel allocates while it runs, measured on the device that traces.

A training step holds more than its tensors: a convolution's kernel allocates a workspace, a
convolution's backward or BatchNorm's backward temporaries the size of its input, a multi-output
op all its outputs at once. :func:`measure_kernel_memory` runs every ATen op of the joint graph
once, on its own, on tensors of the traced shapes, dtypes and strides on the device the model lives
on, and records the most bytes it held at once (``peak``) and the bytes of each output it returned.
The graph builder turns that into the nodes' ``transient`` bytes (:mod:`.to_graph`).

- Inputs are made up: floating-point tensors random, integer and bool tensors zeros (a valid index,
  class or mask everywhere), so nothing of the model is read or changed.
- Ops with the same target and arguments (shapes, dtypes, strides, the other values) are run once
  per process (:data:`KEPT_MEASUREMENTS`): the repeated blocks of a network cost nothing more.
- On the CPU the bytes come from PyTorch's profiler (``profile_memory=True``): every allocation and
  free the CPU allocator reports during the op, from any thread, by time; on CUDA from the caching
  allocator's own counters (``max_memory_allocated``).
- An op that cannot run on made-up inputs (a data-dependent shape, a custom op that checks its
  values) is left unmeasured: its nodes get no transient bytes, and the graph says which ops those
  were (``KernelMemory.unmeasured``).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import fx
from torch.utils._pytree import tree_leaves, tree_map

from ..stderr import quiet_stderr

KEPT_MEASUREMENTS = 8192
"""Op measurements kept per process (by op and arguments), the least recently used dropped first."""
_RANGE = "remat_core.kernel"


@dataclass(frozen=True)
class OpMemory:
    """One op run on its own: the most bytes it held at once, and the bytes of each output it returned.

    ``outputs`` has one entry per output (index order; 0 for a non-tensor or an output that is a view of
    an input), a single entry for a single-tensor result.
    """

    peak: int
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class KernelMemory:
    """What :func:`measure_kernel_memory` found: FX node name -> :class:`OpMemory`, and the ops it could not run."""

    ops: Mapping[str, OpMemory]
    unmeasured: tuple[str, ...]
    device: str


_measured: OrderedDict[tuple, OpMemory] = OrderedDict()


def measure_kernel_memory(graph_module: fx.GraphModule) -> KernelMemory:
    """Run every ``call_function`` op of ``graph_module`` (but ``getitem``) once on its own (see the module notes)."""
    nodes = [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
             and isinstance(n.meta.get("val"), (torch.Tensor, tuple, list))]
    device = _device_of(graph_module)
    if device is None:
        return KernelMemory({}, tuple(n.name for n in nodes), "meta")
    keys = {n.name: op_key(n, device) for n in nodes}
    todo = [n for n in nodes if keys[n.name] not in _measured]
    unmeasured: list[str] = []
    if todo:
        found, failed = (_measure_cuda if device.type == "cuda" else _measure_cpu)(todo, device)
        for node in todo:
            if node.name in found:
                _measured[keys[node.name]] = found[node.name]
        unmeasured = [n.name for n in todo if n.name in failed]
        while len(_measured) > KEPT_MEASUREMENTS:
            _measured.popitem(last=False)
    ops = {}
    for node in nodes:
        key = keys[node.name]
        if key in _measured:
            _measured.move_to_end(key)
            ops[node.name] = _measured[key]
    return KernelMemory(ops, tuple(unmeasured), device.type)


def _device_of(graph_module: fx.GraphModule) -> torch.device | None:
    for node in graph_module.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            return None if value.device.type == "meta" else value.device
    return torch.device("cpu")


def _signature(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), str(value.dtype))
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _signature(v)) for k, v in value.items()))
    return repr(value)


def _fake_arguments(node: fx.Node) -> tuple[tuple, dict]:
    return tree_map(lambda a: a.meta.get("val") if isinstance(a, fx.Node) else a, (node.args, node.kwargs))


def op_key(node: fx.Node, device: torch.device) -> tuple:
    """What an op's measurements depend on: the device, its target, its arguments' shapes, strides, dtypes and
    other values."""
    args, kwargs = _fake_arguments(node)
    return device.type, str(node.target), _signature(args), _signature(kwargs)


def _made_up(value: Any, device: torch.device) -> Any:
    """A real tensor like the FakeTensor ``value`` (shape, strides, dtype) on ``device``; other values as they are."""
    if not isinstance(value, torch.Tensor):
        return value
    size = sum((s - 1) * st for s, st in zip(value.shape, value.stride())) + 1 if value.numel() else 0
    if value.dtype.is_floating_point or value.dtype.is_complex:
        flat = torch.randn(size, dtype=value.dtype, device=device)
    else:
        flat = torch.zeros(size, dtype=value.dtype, device=device)
    return flat.as_strided(tuple(value.shape), tuple(value.stride()))


def _inputs(node: fx.Node, device: torch.device) -> tuple[tuple, dict]:
    args, kwargs = _fake_arguments(node)
    return tree_map(lambda v: _made_up(v, device), (args, kwargs))


def _output_bytes(result: Any, inputs: Any) -> tuple[int, ...]:
    """Bytes of each output's storage that is new (not an input's)."""
    held = {t.untyped_storage().data_ptr() for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)}
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    sizes = []
    for value in outputs:
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() not in held:
            sizes.append(int(value.untyped_storage().nbytes()))
        else:
            sizes.append(0)
    return tuple(sizes)


def _measure_cpu(nodes: list[fx.Node], device: torch.device) -> tuple[dict[str, OpMemory], set[str]]:
    """Every op once under the profiler, each in a ``record_function`` range; peaks from the allocation events
    inside each range's time span (any thread)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    outputs: dict[str, tuple[int, ...]] = {}
    failed: set[str] = set()
    with quiet_stderr():
        profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False)
        profiler.__enter__()
    try:
        with torch.no_grad():
            for node in nodes:
                try:
                    args, kwargs = _inputs(node, device)
                except (RuntimeError, ValueError, TypeError):
                    failed.add(node.name)
                    continue
                try:
                    with record_function(f"{_RANGE}:{node.name}"):
                        result = node.target(*args, **kwargs)
                except Exception:  # noqa: BLE001 - an op that cannot run on made-up inputs is left unmeasured
                    failed.add(node.name)
                    continue
                outputs[node.name] = _output_bytes(result, (args, kwargs))
                del result, args, kwargs
    finally:
        with quiet_stderr():
            profiler.__exit__(None, None, None)
    spans, events = _ranges_and_memory_events(profiler)
    found = {}
    for name, sizes in outputs.items():
        start, end = spans.get(name, (None, None))
        if start is None:
            failed.add(name)
            continue
        running = peak = 0
        for time, size in events:
            if time < start:
                continue
            if time > end:
                break
            running += size
            peak = max(peak, running)
        found[name] = OpMemory(peak, sizes)
    return found, failed


def _ranges_and_memory_events(profiler) -> tuple[dict[str, tuple[int, int]], list[tuple[int, int]]]:
    spans: dict[str, tuple[int, int]] = {}
    events: list[tuple[int, int]] = []
    for event in profiler.profiler.kineto_results.events():
        name = event.name()
        if name.startswith(_RANGE + ":"):
            spans[name.removeprefix(_RANGE + ":")] = (event.start_ns(), event.start_ns() + event.duration_ns())
        elif name == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU:
            events.append((event.start_ns(), event.nbytes()))
    events.sort()
    return spans, events


def _measure_cuda(nodes: list[fx.Node], device: torch.device) -> tuple[dict[str, OpMemory], set[str]]:
    """Every op once, its peak from the caching allocator's counters (reset before each op)."""
    found: dict[str, OpMemory] = {}
    failed: set[str] = set()
    with torch.no_grad():
        for node in nodes:
            try:
                args, kwargs = _inputs(node, device)
                torch.cuda.synchronize(device)
                before = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
                result = node.target(*args, **kwargs)
                torch.cuda.synchronize(device)
            except Exception:  # noqa: BLE001 - an op that cannot run on made-up inputs is left unmeasured
                failed.add(node.name)
                continue
            found[node.name] = OpMemory(torch.cuda.max_memory_allocated(device) - before,
                                        _output_bytes(result, (args, kwargs)))
            del result, args, kwargs
    return found, failed
