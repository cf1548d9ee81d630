"""DenseNet-121 (Huang et al. 2017), growth rate 32, torchvision's layout and module names."""

from __future__ import annotations

import torch
from torch import nn

from ._common import IMAGENET_CLASSES, imagenet_classifier, init_conv_net

DENSENET121_BLOCKS = (6, 12, 24, 16)


class DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (to ``bn_size * growth`` channels), BN-ReLU-3x3 conv (to ``growth``)."""

    def __init__(self, in_ch: int, growth: int, bn_size: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(in_ch, bn_size * growth, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, kernel_size=3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class DenseBlock(nn.ModuleDict):
    """Each layer reads the concatenation of the block input and every earlier layer's output."""

    def __init__(self, num_layers: int, in_ch: int, growth: int, bn_size: int):
        super().__init__({f"denselayer{i + 1}": DenseLayer(in_ch + i * growth, growth, bn_size)
                          for i in range(num_layers)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """BN, ReLU, 1x1 conv halving the channels, 2x2 average pool."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(in_ch)
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """Stem, dense blocks separated by transitions, a final BN, global pool, ``classifier``."""

    def __init__(self, blocks=DENSENET121_BLOCKS, growth: int = 32, init_features: int = 64, bn_size: int = 4,
                 num_classes: int = IMAGENET_CLASSES):
        super().__init__()
        self.features = nn.Sequential()
        self.features.add_module("conv0", nn.Conv2d(3, init_features, kernel_size=7, stride=2, padding=3, bias=False))
        self.features.add_module("norm0", nn.BatchNorm2d(init_features))
        self.features.add_module("relu0", nn.ReLU())
        self.features.add_module("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        channels = init_features
        for i, num_layers in enumerate(blocks):
            self.features.add_module(f"denseblock{i + 1}", DenseBlock(num_layers, channels, growth, bn_size))
            channels += num_layers * growth
            if i != len(blocks) - 1:
                self.features.add_module(f"transition{i + 1}", Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.relu = nn.ReLU()
        self.classifier = nn.Linear(channels, num_classes)
        init_conv_net(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.relu(self.features(x)), 1)
        return self.classifier(torch.flatten(x, 1))


MODELS = (
    imagenet_classifier("densenet121", "DenseNet-121 (growth 32), 224x224 ImageNet classifier", DenseNet,
                        7_978_856, "Huang et al. 2017, Table 1 (torchvision densenet121: 7,978,856)"),
)
