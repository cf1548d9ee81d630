"""MobileNet-V2 (Sandler et al. 2018), width multiplier 1.0, torchvision's layout."""

from __future__ import annotations

import torch
from torch import nn

from ._common import IMAGENET_CLASSES, imagenet_classifier, init_conv_net

INVERTED_RESIDUAL_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                              (6, 160, 3, 2), (6, 320, 1, 1))
"""Table 2 of the paper: (expansion t, output channels c, repeats n, first stride s)."""


class ConvBNReLU6(nn.Sequential):
    """Convolution without bias, batch norm, ReLU6."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(nn.Conv2d(in_ch, out_ch, kernel_size, stride, (kernel_size - 1) // 2, groups=groups,
                                   bias=False),
                         nn.BatchNorm2d(out_ch), nn.ReLU6())


class InvertedResidual(nn.Module):
    """1x1 expand (unless t = 1), 3x3 depthwise, 1x1 linear projection; residual when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, expansion: int):
        super().__init__()
        hidden = in_ch * expansion
        self.use_residual = stride == 1 and in_ch == out_ch
        layers: list[nn.Module] = [] if expansion == 1 else [ConvBNReLU6(in_ch, hidden, kernel_size=1)]
        layers += [ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    """Stem, seventeen inverted residual blocks, a 1x1 conv to 1280 channels, dropout + linear."""

    def __init__(self, num_classes: int = IMAGENET_CLASSES, last_channels: int = 1280, dropout: float = 0.2):
        super().__init__()
        channels = 32
        features: list[nn.Module] = [ConvBNReLU6(3, channels, stride=2)]
        for expansion, out_ch, repeats, stride in INVERTED_RESIDUAL_SETTINGS:
            for i in range(repeats):
                features.append(InvertedResidual(channels, out_ch, stride if i == 0 else 1, expansion))
                channels = out_ch
        features.append(ConvBNReLU6(channels, last_channels, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last_channels, num_classes))
        init_conv_net(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


MODELS = (
    imagenet_classifier("mobilenet_v2", "MobileNet-V2 (width 1.0), 224x224 ImageNet classifier", MobileNetV2,
                        3_504_872, "Sandler et al. 2018, Table 2, width 1.0 (torchvision mobilenet_v2: 3,504,872)"),
)
