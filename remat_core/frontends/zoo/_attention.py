"""Multi-head attention written out in matmuls, as the reference BERT and GPT-2 code computes it.

The explicit ``softmax(Q K^T / sqrt(d)) V`` keeps the ``(B, heads, T, T)`` score and probability
tensors in the graph, the activations that make transformers memory-hungry in training.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``(B, T, H*D) -> (B, H, T, D)``."""
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, D) -> (B, T, H*D)``."""
    batch, heads, length, depth = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * depth)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: nn.Dropout,
              causal: bool = False) -> torch.Tensor:
    """Scaled dot-product attention on ``(B, H, T, D)`` tensors, optionally causal."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        length = q.shape[-2]
        future = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    return torch.matmul(dropout(torch.softmax(scores, dim=-1)), v)
