"""What every zoo entry declares: its options, its reference size, and what a build returns.

The app builds its widgets from :class:`ModelOption` (name, range, role), the CLI validates
``--batch`` against the same declaration, and the tests check :attr:`ModelSpec.reference_params`
against the module each spec builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ...errors import ZooError
from ..losses import LossSetup

OPTION_ROLES = ("batch", "input_size", "depth", "width", "heads")
"""What an option means to the app: the batch size, the input size, the depth, the width or the attention heads."""


@dataclass(frozen=True)
class ModelOption:
    """One integer knob of a zoo model.

    Parameters
    ----------
    name : str
        Keyword the builder takes (``batch_size``, ``image_size``, ``seq_len``, ``depth``...).
    default : int
        Value used when the caller gives none; the reference parameter count holds at the defaults.
    minimum, maximum : int
        Inclusive range.
    role : str
        One of :data:`OPTION_ROLES`.
    help : str
        One line for a tooltip or ``--help``.
    multiple_of : int
        The value must be a multiple of this (U-Net's input side must survive four 2x poolings).
    """

    name: str
    default: int
    minimum: int
    maximum: int
    role: str
    help: str
    multiple_of: int = 1

    def check(self, model: str, value: Any) -> int:
        """The value as an int; a :class:`ZooError` naming the option and its range if it is bad."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ZooError(f"model '{model}': option {self.name} must be an integer, got {value!r}")
        if not self.minimum <= value <= self.maximum or value % self.multiple_of:
            step = f" and a multiple of {self.multiple_of}" if self.multiple_of > 1 else ""
            raise ZooError(f"model '{model}': option {self.name}={value} is out of range; use "
                           f"{self.minimum}..{self.maximum}{step} (default {self.default})")
        return value


def batch_option(default: int) -> ModelOption:
    """The batch-size option every zoo model has."""
    return ModelOption("batch_size", default, 1, 4096, "batch", "examples per training step")


def image_size_option(default: int = 224, minimum: int = 32, multiple_of: int = 1) -> ModelOption:
    """Side of the square input image, in pixels."""
    return ModelOption("image_size", default, minimum, 1024, "input_size", "input image side, in pixels",
                       multiple_of=multiple_of)


@dataclass(frozen=True)
class ZooModel:
    """A built zoo model: everything one training step needs.

    Attributes
    ----------
    name : str
        The zoo name it was built from.
    module : torch.nn.Module
        The model, in training mode, with deterministic random weights.
    example_inputs : tuple of torch.Tensor, or mapping of str to torch.Tensor
        Inputs of ``module`` (real tensors of the declared shape), by position or by keyword.
    loss : LossSetup
        How the output becomes a scalar loss, with the targets it needs.
    options : mapping
        Every option's value, defaults filled in.
    """

    name: str
    module: nn.Module
    example_inputs: tuple[torch.Tensor, ...] | Mapping[str, torch.Tensor]
    loss: LossSetup
    options: Mapping[str, int]

    def forward(self) -> Any:
        """The module on its example inputs, by keyword where they are named (a training loop's ``model(**batch)``)."""
        if isinstance(self.example_inputs, Mapping):
            return self.module(**self.example_inputs)
        return self.module(*self.example_inputs)


Builder = Callable[..., tuple[nn.Module, tuple[torch.Tensor, ...], LossSetup]]
"""``builder(generator, **options) -> (module, example_inputs, loss)``; weights come from the global
RNG (seeded by :func:`remat_core.frontends.zoo.build_model`), inputs and targets from ``generator``."""


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry.

    Parameters
    ----------
    name : str
        Registry key (``resnet50``).
    description : str
        One line for listings.
    builder : Builder
        Builds the module, its example inputs and its loss.
    options : tuple of ModelOption
        Every option the builder takes; ``batch_size`` first.
    reference_params : int
        Parameter count at the default options (shared weights counted once), equal to the
        published architecture's.
    reference : str
        Where that count comes from.
    """

    name: str
    description: str
    builder: Builder = field(repr=False)
    options: tuple[ModelOption, ...]
    reference_params: int
    reference: str

    @property
    def defaults(self) -> Mapping[str, int]:
        """Option name -> default value."""
        return MappingProxyType({o.name: o.default for o in self.options})

    def option(self, name: str) -> ModelOption:
        """The declared option of that name; a :class:`ZooError` listing the declared ones if none."""
        for opt in self.options:
            if opt.name == name:
                return opt
        raise ZooError(f"model '{self.name}' has no option {name!r}; its options are "
                       f"{', '.join(o.name for o in self.options)}")

    def resolve(self, given: Mapping[str, Any]) -> dict[str, int]:
        """Every option's value: the given ones checked against their declaration, defaults for the rest."""
        for name in given:
            self.option(name)
        return {o.name: o.check(self.name, given[o.name]) if o.name in given else o.default for o in self.options}
