"""The ops eager PyTorch shows a selective-checkpoint policy inside one module call.

The traced step is functional (no in-place ops) and decomposed as AOTAutograd traced it; the model's own forward,
run through SAC, shows a policy the ops eager PyTorch dispatches: in-place ops (``relu_``, dropout's
``bernoulli_``), BatchNorm's eager kernel, no ``getitem``. :func:`record_module_calls` runs each named module's
forward once through the very checkpoint a policy uses and records what the policy is shown, with the storages
each op read, wrote in place and handed out (:mod:`remat_core.schedule.eager_match` matches them to the traced
ops). :meth:`~remat_core.frontends.tracing.capture.JointGraph.eager_calls` is the way in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from ...errors import NotModuleBounded

CACHE_ARGUMENTS = ("past_key_values", "past_key_value", "layer_past", "cache")
"""The key-value cache a layer is handed, dropped in a checkpoint as the installed plan drops it."""


@dataclass(frozen=True)
class EagerRecord:
    """One op SAC showed the policy: the op, the storages it read, wrote in place and handed out."""

    op: str
    """The op's name (``aten.relu_.default``)."""
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    outputs: tuple[int, ...]


def _storage(value: Any) -> int | None:
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return value.untyped_storage().data_ptr()
    return None


def record_module_calls(joint: Any, paths: Sequence[str]) -> dict[str, list[EagerRecord]]:
    """Run the model's forward once (on the joint's example inputs, its RNG state kept) with each module ``paths``
    names in a checkpoint whose policy records the ops it is shown (and recomputes them all): module path -> its
    call's ops; :class:`NotModuleBounded` for a module called more than once."""
    model = joint.model
    recorded: dict[str, list[list[EagerRecord]]] = {path: [] for path in paths}

    def wrap(path: str, forward: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            ops: list[EagerRecord] = []
            recorded[path].append(ops)

            def policy(ctx: Any, func: Any, *op_args: Any, **op_kwargs: Any) -> CheckpointPolicy:
                arguments = getattr(getattr(func, "_schema", None), "arguments", ())
                writes = tuple(s for argument, value in zip(arguments, op_args)
                               if argument.alias_info is not None and argument.alias_info.is_write
                               and (s := _storage(value)) is not None)
                reads = tuple(s for leaf in tree_leaves((op_args, op_kwargs)) if (s := _storage(leaf)) is not None)
                outputs = tuple(s for leaf in tree_leaves(ctx.op_output) if (s := _storage(leaf)) is not None)
                ops.append(EagerRecord(str(func), reads, writes, outputs))
                return CheckpointPolicy.PREFER_RECOMPUTE

            for name in CACHE_ARGUMENTS:  # as the installed checkpoint runs it (remat_core.run.policy_runtime)
                if kwargs.get(name) is not None:
                    kwargs[name] = None
            if kwargs.get("use_cache"):
                kwargs["use_cache"] = False
            return checkpoint(forward, *args, use_reentrant=False, preserve_rng_state=True,
                              context_fn=lambda: create_selective_checkpoint_contexts(policy), **kwargs)
        return run

    modules = [(path, model.get_submodule(path) if path else model) for path in paths]
    own = [vars(module).get("forward") for _, module in modules]
    for path, module in modules:
        module.forward = wrap(path, module.forward)
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            output = joint.call_model(model, joint.inputs[:joint.num_model_inputs])
            del output
    finally:
        for (_, module), forward in zip(modules, own):
            if forward is None:
                del module.forward
            else:
                module.forward = forward
    for path, calls in recorded.items():
        if len(calls) != 1:
            raise NotModuleBounded(f"module {path!r} runs {len(calls)} times in one forward: a plan region is one "
                                   f"module call")
    return {path: calls[0] for path, calls in recorded.items()}
