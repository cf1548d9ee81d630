"""Pieces several zoo families share: image inputs, torchvision-style initialisation."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ..losses import LossSetup, cross_entropy
from ._spec import ModelSpec, batch_option, image_size_option

IMAGENET_CLASSES = 1000


def image_classification_inputs(generator: torch.Generator, batch_size: int, image_size: int, channels: int = 3,
                                num_classes: int = IMAGENET_CLASSES) -> tuple[tuple[torch.Tensor], LossSetup]:
    """A random image batch ``(B, C, S, S)`` and random class labels, with a cross-entropy loss."""
    images = torch.randn(batch_size, channels, image_size, image_size, generator=generator)
    labels = torch.randint(0, num_classes, (batch_size,), generator=generator)
    return (images,), cross_entropy(labels)


def init_conv_net(module: nn.Module) -> None:
    """Kaiming-normal convolutions (fan-out), unit/zero norm layers, small normal linear weights.

    The usual initialisation of ImageNet CNNs (He et al. 2015); weights are random, only their
    shapes matter to the tracer, but a sensible init keeps real-tensor checks numerically tame.
    """
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)


IMAGENET_BATCH = 32


def imagenet_classifier(name: str, description: str, model: type[nn.Module] | Callable[[], nn.Module],
                        reference_params: int, reference: str, minimum_size: int = 32) -> ModelSpec:
    """The spec of a 224x224 ImageNet classifier: options ``batch_size`` and ``image_size``,
    random images and labels, cross-entropy."""
    def build(generator: torch.Generator, batch_size: int, image_size: int):
        inputs, loss = image_classification_inputs(generator, batch_size, image_size)
        return model(), inputs, loss

    return ModelSpec(name, description, build, (batch_option(IMAGENET_BATCH), image_size_option(minimum=minimum_size)),
                     reference_params=reference_params, reference=reference)
