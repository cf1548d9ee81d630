"""Small models the tracer tests build themselves: every op family the zoo uses, in a few KB."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from remat_core.frontends.losses import LossSetup, cross_entropy


class SmallCNN(nn.Module):
    """Conv, BatchNorm, ReLU, max-pool, a residual block, global average pool, linear head."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.act(self.bn(self.conv(x))))
        x = self.act(self.block(x) + x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TinyAttention(nn.Module):
    """Embedding, LayerNorm, single-head softmax attention, residual, GELU MLP, mean pool, classifier."""

    def __init__(self, vocab: int = 50, width: int = 16, classes: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        x = x + self.proj(attn @ v)
        x = x + self.mlp(x)
        return self.head(x.mean(dim=1))


class ResidualBlock(nn.Module):
    """LayerNorm, Linear to four times the width, GELU, Linear back, added to the residual stream."""

    def __init__(self, width: int):
        super().__init__()
        self.norm, self.up, self.act, self.down = (nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(),
                                                   nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.act(self.up(self.norm(x))))


class ResidualMLP(nn.Module):
    """Residual blocks and a linear head: the model torch's activation-memory budget was measured on."""

    def __init__(self, width: int = 64, depth: int = 12, outputs: int = 1):
        super().__init__()
        self.blocks = nn.Sequential(*[ResidualBlock(width) for _ in range(depth)])
        self.head = nn.Linear(width, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def residual_mlp(width: int = 64, depth: int = 12, outputs: int = 1, batch: int = 8,
                 tokens: int = 4) -> tuple[nn.Module, torch.Tensor]:
    """A :class:`ResidualMLP` and an input of ``batch`` x ``tokens`` vectors."""
    torch.manual_seed(0)
    return ResidualMLP(width, depth, outputs), torch.randn(batch, tokens, width)


def small_cnn(batch: int = 4, size: int = 8) -> tuple[nn.Module, tuple[torch.Tensor], LossSetup]:
    torch.manual_seed(0)
    return SmallCNN(), (torch.randn(batch, 3, size, size),), cross_entropy(torch.randint(0, 5, (batch,)))


def tiny_attention(batch: int = 2, length: int = 6) -> tuple[nn.Module, tuple[torch.Tensor], LossSetup]:
    torch.manual_seed(0)
    return (TinyAttention(), (torch.randint(0, 50, (batch, length)),),
            cross_entropy(torch.randint(0, 3, (batch,))))


def mlp() -> tuple[nn.Module, tuple[torch.Tensor], None]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), (torch.randn(5, 4),), None
