"""A traced step's forward as eager PyTorch ops, with a plan installed as selective activation checkpointing.

The tracer keeps the step's joint graph at ATen level. Its forward ops, called one by one on the
model's real parameters with autograd on, are the model's own forward (the same ops, the same
gradients: autograd derives the backward). The program (:class:`~remat_core.schedule.sac_program.ForwardProgram`:
the ops cut into regions, the ops that save their outputs) goes in through PyTorch's selective activation
checkpointing (:func:`torch.utils.checkpoint.create_selective_checkpoint_contexts`): each checkpointed region is
one non-reentrant :func:`torch.utils.checkpoint.checkpoint`, its saved ops ``MUST_SAVE``, the others
``PREFER_RECOMPUTE``; the other regions run plainly.

**Random ops** (dropout) restore, when recomputed, the RNG state they drew from in the forward,
so the mask is the same; with a ``seed`` each draws from its own stream seeded by its position
in the joint graph, as :func:`remat_core.run.executor.execute` does, so every way of running
the step draws the same masks. A recomputation leaves the RNG as it found it. Checkpoint's own
``preserve_rng_state`` is off: it would keep a copy of the RNG state for every region from the forward to
its recomputation, for regions with no random op too.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import fx
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from ..schedule.sac_program import ForwardProgram, Region
from .executor import SEED_STRIDE, draws_random

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
            saves = any(node.name in program.saved for node in program.nodes[region.start:region.end])
            outputs = checkpoint(run, *inputs, use_reentrant=False, preserve_rng_state=False,  # random ops redraw alike
                                 early_stop=program.early_stop,
                                 **({"context_fn": context} if saves else {}))  # nothing saved: no policy to ask
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


