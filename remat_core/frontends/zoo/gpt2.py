"""GPT-2 small (Radford et al. 2019) as a language model with tied input/output embeddings; depth configurable.

Module names follow the reference implementation (``h.3.attn.c_attn``...). The reference stores its
projections as ``Conv1D`` (a transposed ``Linear``); ``nn.Linear`` has the same parameters.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..losses import token_cross_entropy
from ._attention import attention, merge_heads, split_heads
from ._spec import ModelOption, ModelSpec, batch_option

GPT2_VOCAB = 50257
GPT2_POSITIONS = 1024
GPT2_WIDTH = 768
GPT2_HEADS = 12
GPT2_LAYERS = 12
GPT2_LN_EPS = 1e-5
GPT2_DROPOUT = 0.1


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(GPT2_WIDTH, 3 * GPT2_WIDTH)
        self.c_proj = nn.Linear(GPT2_WIDTH, GPT2_WIDTH)
        self.attn_dropout = nn.Dropout(GPT2_DROPOUT)
        self.resid_dropout = nn.Dropout(GPT2_DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (split_heads(t, GPT2_HEADS) for t in self.c_attn(x).split(GPT2_WIDTH, dim=2))
        return self.resid_dropout(self.c_proj(merge_heads(attention(q, k, v, self.attn_dropout, causal=True))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(GPT2_WIDTH, 4 * GPT2_WIDTH)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * GPT2_WIDTH, GPT2_WIDTH)
        self.dropout = nn.Dropout(GPT2_DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(GPT2_WIDTH, eps=GPT2_LN_EPS)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(GPT2_WIDTH, eps=GPT2_LN_EPS)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    """Token + position embeddings, ``depth`` blocks, final LayerNorm, logits through the tied embedding."""

    def __init__(self, depth: int = GPT2_LAYERS):
        super().__init__()
        self.wte = nn.Embedding(GPT2_VOCAB, GPT2_WIDTH)
        self.wpe = nn.Embedding(GPT2_POSITIONS, GPT2_WIDTH)
        self.drop = nn.Dropout(GPT2_DROPOUT)
        self.h = nn.ModuleList(Block() for _ in range(depth))
        self.ln_f = nn.LayerNorm(GPT2_WIDTH, eps=GPT2_LN_EPS)
        self.lm_head = nn.Linear(GPT2_WIDTH, GPT2_VOCAB, bias=False)
        self._init_weights(depth)
        self.lm_head.weight = self.wte.weight

    def _init_weights(self, depth: int) -> None:
        """Normal(0, 0.02) weights; residual projections scaled by 1/sqrt(2*depth) as in the paper."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * depth) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt2_param_count(depth: int) -> int:
    """Token and position embeddings + depth x 7,087,872 per block + final LayerNorm (head tied)."""
    embeddings = (GPT2_VOCAB + GPT2_POSITIONS) * GPT2_WIDTH
    per_block = (4 * GPT2_WIDTH + GPT2_WIDTH * 3 * GPT2_WIDTH + 3 * GPT2_WIDTH + GPT2_WIDTH * GPT2_WIDTH + GPT2_WIDTH
                 + 2 * GPT2_WIDTH * 4 * GPT2_WIDTH + 4 * GPT2_WIDTH + GPT2_WIDTH)
    return embeddings + depth * per_block + 2 * GPT2_WIDTH


def build_gpt2(generator: torch.Generator, batch_size: int, seq_len: int, depth: int):
    tokens = torch.randint(0, GPT2_VOCAB, (batch_size, seq_len + 1), generator=generator)
    return GPT2LMHeadModel(depth), (tokens[:, :-1].contiguous(),), token_cross_entropy(tokens[:, 1:].contiguous())


MODELS = (
    ModelSpec("gpt2", "GPT-2 small (768 wide, 12 heads) language model, tied embeddings", build_gpt2,
              (batch_option(8),
               ModelOption("seq_len", 128, 1, GPT2_POSITIONS, "input_size", "tokens per sequence"),
               ModelOption("depth", GPT2_LAYERS, 1, 48, "depth", "transformer blocks")),
              reference_params=124_439_808,
              reference="Radford et al. 2019, GPT-2 small (Hugging Face gpt2: 124,439,808 with the LM head tied "
                        "to the token embedding)"),
)
