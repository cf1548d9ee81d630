"""A multi-layer perceptron on flattened 28x28 images: the smallest zoo model."""

from __future__ import annotations

import torch
from torch import nn

from ..losses import cross_entropy
from ._spec import ModelOption, ModelSpec, batch_option

MNIST_FEATURES = 28 * 28
MNIST_CLASSES = 10


class MLP(nn.Module):
    """``depth`` hidden ``Linear + ReLU`` layers of ``width`` units, then a linear classifier."""

    def __init__(self, in_features: int, width: int, depth: int, num_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        features = in_features
        for _ in range(depth):
            layers += [nn.Linear(features, width), nn.ReLU()]
            features = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(x))


def mlp_param_count(width: int, depth: int, in_features: int = MNIST_FEATURES, num_classes: int = MNIST_CLASSES) -> int:
    """Closed form: ``(in*w + w) + (depth-1)(w*w + w) + (w*classes + classes)``."""
    return (in_features * width + width) + (depth - 1) * (width * width + width) + (width * num_classes + num_classes)


def build_mlp(generator: torch.Generator, batch_size: int, depth: int, width: int):
    module = MLP(MNIST_FEATURES, width, depth, MNIST_CLASSES)
    x = torch.randn(batch_size, MNIST_FEATURES, generator=generator)
    labels = torch.randint(0, MNIST_CLASSES, (batch_size,), generator=generator)
    return module, (x,), cross_entropy(labels)


MODELS = (
    ModelSpec("mlp", "MLP on flattened 28x28 images (784 -> width x depth -> 10)", build_mlp,
              (batch_option(64),
               ModelOption("depth", 3, 1, 64, "depth", "hidden layers"),
               ModelOption("width", 1024, 1, 16384, "width", "units per hidden layer")),
              reference_params=mlp_param_count(1024, 3),
              reference="closed form (784*w + w) + (depth-1)(w*w + w) + (10*w + 10); 2,913,290 at w=1024, depth=3"),
)
