"""The in-house model zoo: reference architectures written with ``torch.nn``, random weights.

Every family module (``resnet.py``, ``gpt2.py``...) exports ``MODELS``, a tuple of
:class:`~remat_core.frontends.zoo._spec.ModelSpec`; importing this package collects them, so the registry is
built from the modules themselves. Builds are deterministic: the same name, options and seed give
the same weights and inputs, and the global RNG is left as it was.

Examples
--------
>>> from remat_core.frontends.zoo import build_model
>>> m = build_model("mlp", batch_size=4, depth=2, width=16)
>>> tuple(m.example_inputs[0].shape), m.loss.name
((4, 784), 'cross_entropy')
"""

from __future__ import annotations

import importlib
import pkgutil
from types import MappingProxyType
from typing import Any, Mapping

import torch

from ...errors import ZooError
from ._spec import OPTION_ROLES, ModelOption, ModelSpec, ZooModel

DEFAULT_SEED = 0


def _collect() -> Mapping[str, ModelSpec]:
    specs: dict[str, ModelSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        for spec in importlib.import_module(f"{__name__}.{info.name}").MODELS:
            if spec.name in specs:
                raise ImportError(f"zoo model {spec.name!r} is declared twice (second time in {info.name}.py)")
            specs[spec.name] = spec
    return MappingProxyType(specs)


REGISTRY: Mapping[str, ModelSpec] = _collect()
"""Zoo name -> spec, for every model the family modules declare."""


def list_models() -> list[str]:
    """Names of every zoo model, sorted."""
    return sorted(REGISTRY)


def get_spec(name: str) -> ModelSpec:
    """The spec of a zoo model.

    Raises
    ------
    ZooError
        For a name the zoo does not have; the message lists the ones it has.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise ZooError(f"unknown zoo model {name!r}; available: {', '.join(list_models())}") from None


def build_model(name: str, batch_size: int | None = None, *, seed: int = DEFAULT_SEED,
                device: str | torch.device = "cpu", **options: Any) -> ZooModel:
    """Build a zoo model with its example inputs and loss.

    Parameters
    ----------
    name : str
        A name from :func:`list_models`.
    batch_size : int, optional
        Examples per step; the model's default when None.
    seed : int
        Seeds the weights, inputs and targets.
    device : str or torch.device
        Where the weights and inputs live. ``"meta"`` builds shapes only, without memory or
        initialisation work: enough to count parameters (tracing needs CPU tensors).
    **options
        Any other option the model declares (``image_size``, ``seq_len``, ``depth``, ``width``).

    Returns
    -------
    ZooModel
        The module (in training mode), its example inputs, its :class:`~remat_core.frontends.losses.LossSetup`
        and the resolved options.

    Raises
    ------
    ZooError
        For an unknown name, an option the model does not declare, or a value outside its range.
    """
    spec = get_spec(name)
    if batch_size is not None:
        options["batch_size"] = batch_size
    resolved = spec.resolve(options)
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        module, inputs, loss = spec.builder(generator, **resolved)
    module.train()
    inputs = dict(inputs) if isinstance(inputs, Mapping) else tuple(inputs)
    return ZooModel(name=name, module=module, example_inputs=inputs, loss=loss,
                    options=MappingProxyType(resolved))


def param_count(module: torch.nn.Module) -> int:
    """Number of parameters, each shared tensor counted once (tied embeddings count once)."""
    return sum(p.numel() for p in module.parameters())


__all__ = ["DEFAULT_SEED", "OPTION_ROLES", "REGISTRY", "ModelOption", "ModelSpec", "ZooModel", "build_model",
           "get_spec", "list_models", "param_count"]
