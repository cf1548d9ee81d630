"""GoogLeNet / Inception-v1 (Szegedy et al. 2015) as torchvision builds it, without auxiliary heads."""

from __future__ import annotations

import torch
from torch import nn

from ._common import IMAGENET_CLASSES, imagenet_classifier, init_conv_net


class BasicConv2d(nn.Sequential):
    """Convolution without bias, batch norm (eps 1e-3), ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_ch, eps=0.001)
        self.relu = nn.ReLU()


class Inception(nn.Module):
    """Four parallel branches concatenated: 1x1; 1x1 -> 3x3; 1x1 -> 3x3; 3x3 max-pool -> 1x1.

    The third branch is the paper's "5x5" branch; torchvision (and so the published parameter count)
    uses a 3x3 kernel there.
    """

    def __init__(self, in_ch: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int):
        super().__init__()
        self.branch1 = BasicConv2d(in_ch, ch1x1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(in_ch, ch3x3red, 1), BasicConv2d(ch3x3red, ch3x3, 3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(in_ch, ch5x5red, 1), BasicConv2d(ch5x5red, ch5x5, 3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                     BasicConv2d(in_ch, pool_proj, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


INCEPTION_BLOCKS = {
    "inception3a": (192, 64, 96, 128, 16, 32, 32), "inception3b": (256, 128, 128, 192, 32, 96, 64),
    "inception4a": (480, 192, 96, 208, 16, 48, 64), "inception4b": (512, 160, 112, 224, 24, 64, 64),
    "inception4c": (512, 128, 128, 256, 24, 64, 64), "inception4d": (512, 112, 144, 288, 32, 64, 64),
    "inception4e": (528, 256, 160, 320, 32, 128, 128),
    "inception5a": (832, 256, 160, 320, 32, 128, 128), "inception5b": (832, 384, 192, 384, 48, 128, 128),
}
"""Table 1 of the paper: (input, #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj)."""


class GoogLeNet(nn.Module):
    """Stem, nine inception blocks with max-pools between stages, global pool, dropout, ``fc``."""

    def __init__(self, num_classes: int = IMAGENET_CLASSES, dropout: float = 0.2):
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, 7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, 1)
        self.conv3 = BasicConv2d(64, 192, 3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        blocks = {name: Inception(*cfg) for name, cfg in INCEPTION_BLOCKS.items()}
        self.inception3a, self.inception3b = blocks["inception3a"], blocks["inception3b"]
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a, self.inception4b, self.inception4c = (blocks["inception4a"], blocks["inception4b"],
                                                                blocks["inception4c"])
        self.inception4d, self.inception4e = blocks["inception4d"], blocks["inception4e"]
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a, self.inception5b = blocks["inception5a"], blocks["inception5b"]
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(1024, num_classes)
        init_conv_net(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool2(self.conv3(self.conv2(self.maxpool1(self.conv1(x)))))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4e(self.inception4d(self.inception4c(self.inception4b(self.inception4a(x)))))
        x = self.inception5b(self.inception5a(self.maxpool4(x)))
        return self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))


MODELS = (
    imagenet_classifier("inception", "GoogLeNet (Inception-v1, batch-norm variant), 224x224 ImageNet classifier",
                        GoogLeNet, 6_624_904,
                        "Szegedy et al. 2015, Table 1, as torchvision builds it without auxiliary classifiers "
                        "(torchvision googlenet: 6,624,904)", minimum_size=64),
)
