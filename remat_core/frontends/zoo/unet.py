"""U-Net (Ronneberger et al. 2015): the original 64..1024-channel encoder-decoder, padded convolutions."""

from __future__ import annotations

import torch
from torch import nn

from ..losses import cross_entropy
from ._common import init_conv_net
from ._spec import ModelSpec, batch_option, image_size_option

UNET_WIDTHS = (64, 128, 256, 512, 1024)
UNET_IN_CHANNELS = 1
UNET_CLASSES = 2


class DoubleConv(nn.Sequential):
    """Two 3x3 convolutions, each followed by ReLU (no batch norm, as in the paper)."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__(nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.ReLU())


class Up(nn.Module):
    """2x2 up-convolution halving the channels, concatenation with the skip, then a double conv."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_ch, in_ch // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_ch, out_ch)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    """Four 2x max-pool downsamplings, four up-convolutions with skips, a 1x1 classifier per pixel.

    The paper's convolutions are unpadded (572x572 in, 388x388 out, skips cropped); these are padded
    so the output matches the input size. Padding changes no parameter.
    """

    def __init__(self, in_channels: int = UNET_IN_CHANNELS, num_classes: int = UNET_CLASSES, widths=UNET_WIDTHS):
        super().__init__()
        self.inc = DoubleConv(in_channels, widths[0])
        self.pool = nn.MaxPool2d(2)
        self.down = nn.ModuleList(DoubleConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.up = nn.ModuleList(Up(b, a) for a, b in zip(reversed(widths[:-1]), reversed(widths[1:])))
        self.outc = nn.Conv2d(widths[0], num_classes, kernel_size=1)
        init_conv_net(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.inc(x)]
        for block in self.down:
            skips.append(block(self.pool(skips[-1])))
        x = skips.pop()
        for block in self.up:
            x = block(x, skips.pop())
        return self.outc(x)


def build_unet(generator: torch.Generator, batch_size: int, image_size: int):
    images = torch.randn(batch_size, UNET_IN_CHANNELS, image_size, image_size, generator=generator)
    masks = torch.randint(0, UNET_CLASSES, (batch_size, image_size, image_size), generator=generator)
    return UNet(), (images,), cross_entropy(masks)


MODELS = (
    ModelSpec("unet", "U-Net segmentation net (1 channel in, 2 classes per pixel)", build_unet,
              (batch_option(4), image_size_option(default=256, minimum=16, multiple_of=16)),
              reference_params=31_030_658,
              reference="Ronneberger et al. 2015, Fig. 1: 23 convolutions, 64..1024 channels, 2x2 up-convolutions, "
                        "1 input channel, 2 classes (31,030,658 weights and biases)"),
)
