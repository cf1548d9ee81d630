"""Trace real PyTorch models into joint forward+backward training graphs.

The front door of the tracer. :func:`trace_training_graph` captures one training step of a module
at ATen level with FakeTensors (:mod:`remat_core.frontends.tracing.capture`), builds the op-level graph with
views merged into their storage owners (:mod:`remat_core.frontends.tracing.to_graph`), costs every node
(:mod:`remat_core.frontends.tracing.costs`) and, for ``level="module"``, coarsens it to one node per module
call per pass (:mod:`remat_core.frontends.tracing.coarsen`). :func:`trace_zoo_model` does the same for a
model of :mod:`remat_core.frontends.zoo`.

What the graph keeps beside itself (``graph.attachments``, a :class:`~remat_core.graph.Attachments`, not in
its JSON or hash): the :class:`~remat_core.frontends.tracing.to_graph.FxBinding` (every graph node's FX node,
every FX node's storage owners, the joint ``torch.fx.GraphModule``), the
:class:`~remat_core.frontends.tracing.capture.JointGraph` (the model and the example inputs a schedule runs
on) and, at module level, the groups and the op-level graph they were coarsened from.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn

from ..errors import TraceError
from ..graph import COST_MODELS, ComputeGraph, DEFAULT_REPEATS, FLOPS_PER_BYTE
from .losses import LOSS_FORMS, LossSetup, as_loss_setup
from .tracing.capture import LOSS_MODULE, ModelRunner, capture_joint_graph
from .tracing.coarsen import coarsen_by_module
from .tracing.costs import check_cost_model, measure_op_times, sac_policy_seconds
from .tracing.kernel_memory import measure_kernel_memory
from .tracing.to_graph import FxBinding, joint_to_graph

LEVELS = ("op", "module")


def trace_training_graph(module: nn.Module, example_inputs: Sequence[torch.Tensor] | torch.Tensor,
                         loss: LossSetup | Callable[..., torch.Tensor] | None = None, level: str = "op", *,
                         cost: str = "flops", name: str | None = None,
                         measure_repeats: int = DEFAULT_REPEATS, kernel_memory: bool = True) -> ComputeGraph:
    """The training graph of one step of ``module``: forward, loss, backward, parameter gradients.

    Parameters
    ----------
    module : torch.nn.Module
        The model, in the mode it trains in (``train()``: dropout on, batch statistics).
    example_inputs : tensor, sequence of tensors, or mapping of str to tensor
        Inputs of ``module``, by position or by keyword (``{"input_ids": ids, "decoder_input_ids": ...}``). Only their shapes and dtypes matter (FakeTensors carry
        the trace), except for ``cost="measured"``.
    loss : LossSetup, callable or None
        How the output becomes a scalar: a :class:`~remat_core.frontends.losses.LossSetup` (function and
        targets; the targets become graph inputs), a callable ``loss(output) -> scalar``, or None
        (a scalar output is the loss; otherwise every output element is summed).
    level : {"op", "module"}
        ``op``: one node per ATen op (what the solvers are best on). ``module``: one node per
        module call per pass (readable for big models).
    cost : {"flops", "unit", "bytes", "measured"}
        The cost model (see :mod:`remat_core.graph.cost_models`).
    name : str, optional
        Graph name; default: the module's class name.
    measure_repeats : int
        Timed runs per op for ``cost="measured"`` (the median is kept).
    kernel_memory : bool
        Measure what each op's kernel allocates beyond its outputs while it runs (every op run once
        on made-up tensors of the traced shapes, on the model's device: :mod:`remat_core.frontends.
        tracing.kernel_memory`), the nodes' ``transient`` bytes. False: none (0 on every node).

    Returns
    -------
    ComputeGraph
        Pinned ``param``/``buffer``/``input`` nodes; ``forward``, ``loss`` and ``backward`` nodes;
        outputs are the parameter gradients. Every node has ``module``, ``label``, ``op``; op-level
        nodes also ``shape`` and ``dtype``.

    Raises
    ------
    TraceError
        When the model cannot be traced (the message names the op and module when known, with a
        hint), or for a bad ``level`` or ``cost``.

    Notes
    -----
    Memory: ``mem`` is the bytes of the storage a node allocates; views and aliases are merged
    into their storage owner, and multi-output ops give one node per output, so the checkpoint-all
    peak of the graph counts every byte of a real training step once (see
    :mod:`remat_core.frontends.tracing.to_graph`). Dropout masks are bool (1 byte per element), as a compiled
    step or eager CUDA keeps them; eager PyTorch on the CPU keeps them in the input's dtype (4 bytes
    for float32), so there a model with dropout saves more than the graph holds.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> g = trace_training_graph(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), torch.randn(2, 4))
    >>> sorted({n.kind for n in g.nodes})
    ['backward', 'forward', 'input', 'loss', 'param']
    >>> len(g.outputs)  # two weights, two biases
    4
    """
    source = name or type(module).__name__
    return _trace_impl(module, example_inputs, loss, level, cost, source, measure_repeats, kernel_memory=kernel_memory)


def trace_zoo_model(model: str, batch_size: int | None = None, *, level: str = "op", cost: str = "flops",
                    measure_repeats: int = DEFAULT_REPEATS, kernel_memory: bool = True, **options: Any) -> ComputeGraph:
    """Build a :mod:`remat_core.frontends.zoo` model and trace its training step.

    Parameters
    ----------
    model : str
        A zoo name (:func:`remat_core.frontends.zoo.list_models`).
    batch_size : int, optional
        The model's default when None.
    level, cost, measure_repeats, kernel_memory
        As for :func:`trace_training_graph`.
    **options
        The model's other declared options (``image_size``, ``seq_len``, ``depth``...).

    Raises
    ------
    ZooError
        For an unknown model or a bad option.
    TraceError
        When tracing fails.
    """
    from .zoo import build_model

    built = build_model(model, batch_size, **options)
    settings = ", ".join(f"{k}={v}" for k, v in built.options.items())
    return _trace_impl(built.module, built.example_inputs, built.loss, level, cost, f"{model} ({settings})",
                       measure_repeats, kernel_memory=kernel_memory)


def _trace_impl(module: nn.Module, example_inputs: Sequence[torch.Tensor] | torch.Tensor,
                loss: LossSetup | Callable[..., torch.Tensor] | None, level: str, cost: str, source: str,
                measure_repeats: int, run: ModelRunner | None = None, kernel_memory: bool = True) -> ComputeGraph:
    """Validate the settings, capture, measure the kernels, build, cost, coarsen (``run``: see
    :func:`capture_joint_graph`)."""
    if not isinstance(module, nn.Module):
        raise TraceError(source, f"expected a torch.nn.Module, got {type(module).__name__}",
                         hint="wrap a function in an nn.Module whose forward calls it")
    if level not in LEVELS:
        raise TraceError(source, f"unknown level {level!r}", hint=f"use one of {', '.join(LEVELS)}")
    check_cost_model(cost, source)
    if isinstance(measure_repeats, bool) or not isinstance(measure_repeats, int) or measure_repeats < 1:
        raise TraceError(source, f"measure_repeats must be a positive integer, got {measure_repeats!r}")
    inputs = dict(example_inputs) if isinstance(example_inputs, Mapping) else \
        (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    values = inputs.values() if isinstance(inputs, dict) else inputs
    if any(t.is_meta for t in [*module.parameters(), *module.buffers()]
           if isinstance(t, torch.Tensor)) or any(isinstance(t, torch.Tensor) and t.is_meta for t in values):
        raise TraceError(source, "the model or its inputs are on the meta device, where some autograd formulas "
                                 "(cross-entropy's) are missing",
                         hint="build it on the CPU: the trace runs on FakeTensors anyway, with no real memory or "
                              "compute")
    try:
        loss = as_loss_setup(loss)
    except TypeError as error:
        raise TraceError(source, str(error), hint=LOSS_FORMS) from None
    joint = capture_joint_graph(module, inputs, loss, source, run)
    measured = measure_op_times(joint, measure_repeats) if cost == "measured" else None
    kernels = measure_kernel_memory(joint.graph_module) if kernel_memory else None
    overhead = sac_policy_seconds(joint) if cost == "measured" else 0.0
    graph = joint_to_graph(joint, cost, measured, name=source, kernels=kernels, sac_op_seconds=overhead)
    return coarsen_by_module(graph) if level == "module" else graph


__all__ = ["COST_MODELS", "FLOPS_PER_BYTE", "FxBinding", "LEVELS", "LOSS_MODULE", "trace_training_graph",
           "trace_zoo_model"]
