"""The deployed peers run for real, each through its own mechanism, on the same meter as our routes.

A peer's solver (:mod:`remat_core.solvers.peers`) writes down what its mechanism holds and recomputes, for the
simulator. This module runs the mechanism itself on the traced model's own forward (not our traced program), so
that the two can be compared:

- ``hf-checkpointing``: Hugging Face's ``activation_checkpointing_enable`` (``gradient_checkpointing_enable``
  before 5.x) with ``use_reentrant=False`` and ``every_n_layers``; on another model, ``torch.utils.checkpoint``
  around the forward of the blocks the schedule names;
- ``torchtitan-sac``: every block's forward in a non-reentrant checkpoint with torchtitan's op policy
  (``create_selective_checkpoint_contexts``, ``early_stop=False``);
- ``torch-auto-sac``: each module PyTorch's ``sac_milp`` picked in a non-reentrant checkpoint whose policy replays
  the op list ``get_optimal_checkpointing_policy_per_module`` chose;
- ``torch-partitioner``: the model under ``torch.compile`` with ``activation_memory_budget`` at the fraction the
  schedule was found at.

Each installs itself for the measurement and is taken off afterwards, leaving the model as it was. The step is
the model's own training step (``out = model(x)``, the loss, ``loss.backward()``), seeded the same way for the
peer and for eager PyTorch, so that dropout draws the same masks and the gradients compare.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from ..errors import ExecutionError, first_line
from ..graph import ComputeGraph
from ..schedule import Schedule
from .executor import gradient_difference
from .installed import device_of
from .measure import measure_step
from .tensor_check import GRADIENT_TOLERANCE


@dataclass(frozen=True)
class PeerRun:
    """One training step through a peer's own mechanism, and the eager step beside it (bytes above the weights and
    inputs, by the one meter)."""

    solver: str
    mechanism: str
    measured_peak: int
    simulated_peak: int
    eager_peak: int
    step_seconds: float
    eager_step_seconds: float
    gradients_equal: bool
    max_grad_diff: float

    def summary(self) -> dict[str, Any]:
        return asdict(self)


Mechanism = Callable[[nn.Module, Schedule, Any], "contextlib.AbstractContextManager[str]"]
"""``mechanism(model, schedule, joint)``: a context manager that installs the peer on ``model`` and yields what it
installed, in words."""

MECHANISMS: dict[str, Mechanism] = {}


def _mechanism(name: str) -> Callable[[Mechanism], Mechanism]:
    def register(function: Mechanism) -> Mechanism:
        MECHANISMS[name] = contextlib.contextmanager(function)
        return MECHANISMS[name]
    return register


def measure_peer(graph: ComputeGraph, schedule: Schedule, *, seed: int = 0, timing_runs: int = 1,
                 tolerance: float = GRADIENT_TOLERANCE) -> PeerRun:
    """Train the model behind ``graph`` one step through the mechanism of the peer that made ``schedule``.

    Raises
    ------
    ExecutionError
        For a graph with no model, or a schedule no peer's mechanism runs.
    """
    if not graph.attachments.executable:
        raise ExecutionError(f"graph {graph.name!r} has no model traced here to run {schedule.solver!r} on")
    if schedule.solver not in MECHANISMS:
        raise ExecutionError(f"no mechanism of its own runs {schedule.solver!r}; the peers that have one: "
                             f"{', '.join(MECHANISMS)}")
    joint = graph.attachments.joint
    model = joint.model
    device = device_of({"input": joint.inputs[0]} if joint.inputs else {})

    def step() -> None:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            joint.eager_step()

    eager = measure_step(step, model, device, timing_runs, warm_up=True)
    with MECHANISMS[schedule.solver](model, schedule, joint) as mechanism:
        try:
            measured = measure_step(step, model, device, timing_runs, warm_up=True)
        except RuntimeError as e:  # the peer's own mechanism refusing this model (SAC's cache check, say)
            raise ExecutionError(f"{schedule.solver}'s own mechanism ({mechanism}) failed on {graph.name!r}: "
                                 f"{first_line(e)}") from e
    scale = max((float(g.abs().max()) for g in eager.gradients.values() if g.numel()), default=0.0)
    difference = gradient_difference(measured.gradients, eager.gradients)
    simulated = (schedule.simulation.peak if schedule.simulation is not None else schedule.stats["peak"])
    return PeerRun(schedule.solver, mechanism, measured.peak, simulated - graph.pinned_bytes, eager.peak,
                   measured.seconds, eager.seconds, difference <= tolerance * max(scale, 1e-12), difference)


# -- Hugging Face's gradient checkpointing ----------------------------------------------------------------

def _pretrained(model: nn.Module) -> Any:
    """The Hugging Face model in ``model`` (itself or a submodule), if there is one."""
    base = getattr(sys.modules.get("transformers"), "PreTrainedModel", None)
    if base is None:
        return None
    return next((m for m in model.modules() if isinstance(m, base)), None)


@_mechanism("hf-checkpointing")
def _hf_checkpointing(model: nn.Module, schedule: Schedule, joint: Any) -> Iterator[str]:
    every = int(schedule.solver_info.get("every_n_layers", 1))
    hf = _pretrained(model)
    if hf is not None and getattr(hf, "supports_gradient_checkpointing", False):
        enable = getattr(hf, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False}, every_n_layers=every)
            disable = hf.activation_checkpointing_disable
        else:
            hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            disable = hf.gradient_checkpointing_disable
        try:
            yield f"{type(hf).__name__}.activation_checkpointing_enable(every_n_layers={every}, use_reentrant=False)"
        finally:
            disable()
        return
    with _wrapped_forwards(model, schedule.solver_info.get("checkpointed", ()),
                           lambda forward: functools.partial(checkpoint, forward, use_reentrant=False)):
        yield f"torch.utils.checkpoint(use_reentrant=False) around {len(schedule.solver_info['checkpointed'])} block(s)"


@contextlib.contextmanager
def _wrapped_forwards(model: nn.Module, paths: Any, wrap: Callable[[Callable], Callable]) -> Iterator[None]:
    """Each named submodule's ``forward`` replaced by ``wrap(forward)`` for the block, then restored."""
    modules = [model.get_submodule(path) for path in paths]
    for module in modules:
        module.forward = wrap(module.forward)
    try:
        yield
    finally:
        for module in modules:
            del module.forward  # the instance attribute goes; the class's forward is back


# -- torchtitan's selective op policy ---------------------------------------------------------------------

def _resolve(name: str) -> Any:
    """``"aten.mm.default"`` -> ``torch.ops.aten.mm.default``; ``"higher_order.flex_attention"`` -> the HOP; None
    when this torch has no such op."""
    root: Any = torch.ops
    for part in name.split("."):
        root = getattr(root, part, None)
        if root is None:
            return None
    return root


def titan_policy(save_list: Any, mm_ops: Any) -> Callable[[], Any]:
    """torchtitan's op policy as a ``context_fn`` (see :mod:`remat_core.solvers.peers.torchtitan_sac`): a fresh
    count of matmuls for each forward and each recomputation."""
    saves = {op for op in map(_resolve, save_list) if op is not None}
    mms = {op for op in map(_resolve, mm_ops) if op is not None}

    def context() -> Any:
        counts = {"forward": 0, "recompute": 0}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            if (func == torch.ops.aten._to_copy.default and args and "cuda" in str(args[0].device)
                    and str(kwargs.get("device")) == "cpu"):
                return CheckpointPolicy.MUST_SAVE
            mode = "recompute" if ctx.is_recompute else "forward"
            if func in mms:
                counts[mode] += 1
            if func in saves:
                if func in mms and counts[mode] % 2 == 0:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)
    return context


@_mechanism("torchtitan-sac")
def _torchtitan(model: nn.Module, schedule: Schedule, joint: Any) -> Iterator[str]:
    from ..solvers.sac_plans import MM_OPS, SAVE_LIST

    context = titan_policy(SAVE_LIST, MM_OPS)
    blocks = schedule.solver_info.get("checkpointed", ())
    with _wrapped_forwards(model, blocks, lambda forward: functools.partial(
            checkpoint, forward, use_reentrant=False, context_fn=context, early_stop=False, preserve_rng_state=True)):
        yield f"torchtitan's selective op policy on {len(blocks)} block(s) (early_stop=False)"


# -- PyTorch's automatic SAC ------------------------------------------------------------------------------

def op_list_policy(decisions: list[int]) -> Callable[[], Any]:
    """A ``context_fn`` replaying a per-op save list (1 save, 0 recompute) in the order SAC's policy sees the ops,
    the ops PyTorch's estimator skips left out of the count (as ``get_optimal_checkpointing_policy_per_module``
    counts them); a fresh count for each forward and each recomputation."""
    from torch.distributed._tools.sac_estimator import OPS_TO_ALWAYS_SKIP

    def context() -> Any:
        counts = {"forward": 0, "recompute": 0}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            if func in OPS_TO_ALWAYS_SKIP:
                return CheckpointPolicy.PREFER_RECOMPUTE
            mode = "recompute" if ctx.is_recompute else "forward"
            index = counts[mode]
            counts[mode] += 1
            save = index < len(decisions) and decisions[index]
            return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)
    return context


@_mechanism("torch-auto-sac")
def _auto_sac(model: nn.Module, schedule: Schedule, joint: Any) -> Iterator[str]:
    policies = schedule.solver_info.get("op_policies", {})
    with contextlib.ExitStack() as stack:
        for path, decisions in policies.items():
            context = op_list_policy(decisions)
            stack.enter_context(_wrapped_forwards(model, [path], lambda forward, context=context: functools.partial(
                checkpoint, forward, use_reentrant=False, context_fn=context)))
        yield f"PyTorch's per-op SAC policies on {len(policies)} module(s)"


# -- torch.compile's partitioner under an activation memory budget ------------------------------------------

@_mechanism("torch-partitioner")
def _partitioner(model: nn.Module, schedule: Schedule, joint: Any) -> Iterator[str]:
    from torch._functorch import config

    fraction = schedule.solver_info.get("fraction")
    torch._dynamo.reset()
    compiled = torch.compile(model)
    original = joint.model
    try:
        with config.patch(activation_memory_budget=1.0 if fraction is None else fraction):
            object.__setattr__(joint, "model", compiled)
            yield f"torch.compile with activation_memory_budget={1.0 if fraction is None else fraction:g}"
    finally:
        object.__setattr__(joint, "model", original)
        torch._dynamo.reset()


__all__ = ["MECHANISMS", "PeerRun", "measure_peer", "titan_policy"]
