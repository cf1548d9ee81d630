"""VGG-16 (configuration D of Simonyan & Zisserman 2015), without batch norm."""

from __future__ import annotations

import torch
from torch import nn

from ._common import IMAGENET_CLASSES, imagenet_classifier, init_conv_net

POOL = "M"
VGG16_LAYERS = (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512, POOL)
"""Configuration D: 3x3 convolutions of these widths, ``M`` for a 2x2 max-pool."""


class VGG(nn.Module):
    """Convolutional ``features``, a 7x7 adaptive average pool, a three-layer ``classifier``."""

    def __init__(self, layers=VGG16_LAYERS, num_classes: int = IMAGENET_CLASSES, dropout: float = 0.5):
        super().__init__()
        features: list[nn.Module] = []
        channels = 3
        for width in layers:
            if width == POOL:
                features.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                features += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.ReLU()]
                channels = width
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(channels * 7 * 7, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, num_classes))
        init_conv_net(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


MODELS = (
    imagenet_classifier("vgg16", "VGG-16 (configuration D), 224x224 ImageNet classifier", VGG, 138_357_544,
                        "Simonyan & Zisserman 2015, configuration D (torchvision vgg16: 138,357,544)"),
)
