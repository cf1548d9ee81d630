"""A plan in SAC's own terms installed on the user's own modules, with nothing but torch.

This module imports only torch (and the standard library): :func:`remat_core.run.module_policy.export_policy`
copies its source into the policy file a user ships, so that what runs in their script is the code measured here.

A plan is a mapping of module path (as ``model.get_submodule`` reads it) to the ops of that module's forward
whose outputs are saved, each op by name and by occurrence (``{"aten.mm.default": [0, 2]}``: the first and third
``mm`` of the call). :func:`install` wraps each named module's ``forward`` in a non-reentrant
``torch.utils.checkpoint.checkpoint`` whose selective-checkpoint policy saves those ops (``MUST_SAVE``) and
recomputes the others (``PREFER_RECOMPUTE``); a module saving nothing gets a plain checkpoint (the same, without a
policy asked at every op); :func:`uninstall` puts the modules' own forwards back.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

INSTALLED = "_remat_policy_forward"
"""The attribute marking a module whose forward a plan wraps (its value: the forward the module itself held
before, or None when it ran its class's)."""


def resolve_op(name: str) -> Any:
    """``"aten.mm.default"`` -> ``torch.ops.aten.mm.default``; ValueError naming it when this torch has no such op."""
    root: Any = torch.ops
    for part in name.split("."):
        root = getattr(root, part, None)
        if root is None:
            raise ValueError(f"this torch ({torch.__version__}) has no op {name!r}; the plan was made with another "
                             f"torch: make it again with this one")
    return root


def selective_context(saved: Mapping[str, Sequence[int]]) -> Callable[[], Any]:
    """A ``context_fn`` for ``checkpoint``: the ops ``saved`` names (by occurrence within one call) are
    ``MUST_SAVE``, every other op ``PREFER_RECOMPUTE``; each call counts afresh (and a recomputation apart, for a
    torch that asks the policy during recomputation too)."""
    wanted = {resolve_op(name): frozenset(occurrences) for name, occurrences in saved.items()}

    def context() -> Any:
        counts: dict[tuple[bool, Any], int] = {}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            key = (bool(ctx.is_recompute), func)
            occurrence = counts.get(key, 0)
            counts[key] = occurrence + 1
            if occurrence in wanted.get(func, ()):
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)
    return context


def install(model: torch.nn.Module, regions: Mapping[str, Mapping[str, Sequence[int]]], early_stop: bool = True
            ) -> torch.nn.Module:
    """Wrap the forward of each module ``regions`` names (path -> saved ops) in a selective checkpoint, in place;
    returns ``model``.

    Raises
    ------
    ValueError
        For a path that is not a submodule of ``model`` (a plan made for another model), or a module a plan is
        already installed on.
    """
    modules = []
    for path, saved in regions.items():
        try:
            module = model.get_submodule(path) if path else model
        except AttributeError:
            raise ValueError(f"the plan checkpoints module {path!r}, which {type(model).__name__} does not have: the "
                             f"plan was made for another model") from None
        if INSTALLED in vars(module):
            raise ValueError(f"a plan is already installed on {path or 'the model'!r}; call uninstall(model) first")
        modules.append((module, {"context_fn": selective_context(saved)} if any(saved.values()) else {}))
    for module, policy in modules:  # a region saving nothing is a plain checkpoint: no policy to ask per op
        own = vars(module).get("forward")
        module.forward = _checkpointed(module.forward, use_reentrant=False, early_stop=early_stop,
                                       preserve_rng_state=True, **policy)
        setattr(module, INSTALLED, own)
    return model


CACHE_ARGUMENTS = ("past_key_values", "past_key_value", "layer_past", "cache")
"""Keyword arguments through which a layer is handed a key-value cache it writes into (Hugging Face's names)."""


def _checkpointed(forward: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``forward`` run under ``checkpoint(..., **options)``, without the key-value cache a layer would be handed: the
    recomputation would write it a second time and see other shapes (Hugging Face's own checkpointing drops it
    too; a training step does not read it)."""
    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        for name in CACHE_ARGUMENTS:
            if kwargs.get(name) is not None:
                kwargs[name] = None
        if kwargs.get("use_cache"):
            kwargs["use_cache"] = False
        return checkpoint(forward, *args, **options, **kwargs)
    return run


def uninstall(model: torch.nn.Module) -> torch.nn.Module:
    """Every module of ``model`` back to the forward it had before :func:`install`; returns ``model``."""
    for module in model.modules():
        if INSTALLED in vars(module):
            own = vars(module).pop(INSTALLED)
            if own is None:
                del module.forward  # the class's forward is back
            else:
                module.forward = own
    return model
