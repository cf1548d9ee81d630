"""ResNet-18 and ResNet-50 (He et al. 2016), torchvision's layout and module names."""

from __future__ import annotations

import torch
from torch import nn

from ._common import IMAGENET_CLASSES, imagenet_classifier, init_conv_net


def conv3x3(in_ch: int, out_ch: int, stride: int = 1, groups: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=stride, padding=1, groups=groups, bias=False)


def conv1x1(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(self, in_ch: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = conv3x3(in_ch, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.conv2 = conv3x3(width, width)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, as in torchvision's "ResNet v1.5"), 1x1 expand, residual."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = conv1x1(in_ch, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, width * self.expansion)
        self.bn3 = nn.BatchNorm2d(width * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Stem (7x7 conv, max-pool), four stages of blocks, global average pool, ``fc``."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], blocks_per_stage: tuple[int, ...],
                 num_classes: int = IMAGENET_CLASSES):
        super().__init__()
        self.in_ch = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for stage, (count, width) in enumerate(zip(blocks_per_stage, (64, 128, 256, 512)), start=1):
            setattr(self, f"layer{stage}", self._stage(block, width, count, stride=1 if stage == 1 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        init_conv_net(self)

    def _stage(self, block, width: int, count: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.in_ch != width * block.expansion:
            downsample = nn.Sequential(conv1x1(self.in_ch, width * block.expansion, stride),
                                       nn.BatchNorm2d(width * block.expansion))
        layers = [block(self.in_ch, width, stride, downsample)]
        self.in_ch = width * block.expansion
        layers += [block(self.in_ch, width) for _ in range(1, count)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2))


def resnet50() -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3))


MODELS = (
    imagenet_classifier("resnet18", "ResNet-18, 224x224 ImageNet classifier", resnet18, 11_689_512,
                        "He et al. 2016, Table 1 (torchvision resnet18: 11,689,512)"),
    imagenet_classifier("resnet50", "ResNet-50 (bottleneck blocks), 224x224 ImageNet classifier", resnet50,
                        25_557_032, "He et al. 2016, Table 1 (torchvision resnet50: 25,557,032)"),
)
