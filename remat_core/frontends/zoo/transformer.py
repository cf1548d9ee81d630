"""A BERT-base encoder (Devlin et al. 2019) with a sequence-classification head; depth configurable.

Module names follow the reference implementation (``encoder.layer.3.attention.self.query``...), so
traced graphs group the way BERT users expect.
"""

from __future__ import annotations

import torch
from torch import nn

from ..losses import cross_entropy
from ._attention import attention, merge_heads, split_heads
from ._spec import ModelOption, ModelSpec, batch_option

BERT_VOCAB = 30522
BERT_MAX_POSITIONS = 512
BERT_TYPE_VOCAB = 2
BERT_HIDDEN = 768
BERT_HEADS = 12
BERT_FFN = 3072
BERT_LAYERS = 12
BERT_LN_EPS = 1e-12
BERT_DROPOUT = 0.1
NUM_LABELS = 2


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(BERT_VOCAB, BERT_HIDDEN)
        self.position_embeddings = nn.Embedding(BERT_MAX_POSITIONS, BERT_HIDDEN)
        self.token_type_embeddings = nn.Embedding(BERT_TYPE_VOCAB, BERT_HIDDEN)
        self.LayerNorm = nn.LayerNorm(BERT_HIDDEN, eps=BERT_LN_EPS)
        self.dropout = nn.Dropout(BERT_DROPOUT)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(torch.zeros_like(input_ids)))
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.key = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.value = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.dropout = nn.Dropout(BERT_DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (split_heads(proj(x), BERT_HEADS) for proj in (self.query, self.key, self.value))
        return merge_heads(attention(q, k, v, self.dropout))


class ResidualOutput(nn.Module):
    """Dense projection, dropout, residual add, LayerNorm (post-norm, as in BERT)."""

    def __init__(self, in_features: int):
        super().__init__()
        self.dense = nn.Linear(in_features, BERT_HIDDEN)
        self.LayerNorm = nn.LayerNorm(BERT_HIDDEN, eps=BERT_LN_EPS)
        self.dropout = nn.Dropout(BERT_DROPOUT)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.self = SelfAttention()
        self.output = ResidualOutput(BERT_HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x), x)


class Intermediate(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(BERT_HIDDEN, BERT_FFN)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(x))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.intermediate = Intermediate()
        self.output = ResidualOutput(BERT_FFN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.layer = nn.ModuleList(EncoderLayer() for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class Pooler(nn.Module):
    """Dense + tanh on the first token's hidden state."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x[:, 0]))


class BertForSequenceClassification(nn.Module):
    """Embeddings, ``depth`` post-norm encoder layers, pooler, dropout, linear classifier."""

    def __init__(self, depth: int = BERT_LAYERS, num_labels: int = NUM_LABELS):
        super().__init__()
        self.embeddings = Embeddings()
        self.encoder = Encoder(depth)
        self.pooler = Pooler()
        self.dropout = nn.Dropout(BERT_DROPOUT)
        self.classifier = nn.Linear(BERT_HIDDEN, num_labels)
        self.apply(_init_bert_weights)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(self.embeddings(input_ids))
        return self.classifier(self.dropout(self.pooler(hidden)))


def _init_bert_weights(module: nn.Module) -> None:
    """Normal(0, 0.02) weights and zero biases (BERT's initializer_range); LayerNorms keep their unit init."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    if isinstance(module, nn.Linear):
        nn.init.zeros_(module.bias)


def bert_param_count(depth: int) -> int:
    """Embeddings + depth x 7,087,872 per layer + pooler + 2-way classifier."""
    embeddings = (BERT_VOCAB + BERT_MAX_POSITIONS + BERT_TYPE_VOCAB) * BERT_HIDDEN + 2 * BERT_HIDDEN
    per_layer = (4 * (BERT_HIDDEN * BERT_HIDDEN + BERT_HIDDEN) + 2 * BERT_HIDDEN * BERT_FFN + BERT_FFN + BERT_HIDDEN
                 + 4 * BERT_HIDDEN)
    pooler = BERT_HIDDEN * BERT_HIDDEN + BERT_HIDDEN
    return embeddings + depth * per_layer + pooler + BERT_HIDDEN * NUM_LABELS + NUM_LABELS


def build_transformer(generator: torch.Generator, batch_size: int, seq_len: int, depth: int):
    tokens = torch.randint(0, BERT_VOCAB, (batch_size, seq_len), generator=generator)
    labels = torch.randint(0, NUM_LABELS, (batch_size,), generator=generator)
    return BertForSequenceClassification(depth), (tokens,), cross_entropy(labels)


MODELS = (
    ModelSpec("transformer", "BERT-base encoder (768 wide, 12 heads) with a 2-way classification head",
              build_transformer,
              (batch_option(8),
               ModelOption("seq_len", 128, 1, BERT_MAX_POSITIONS, "input_size", "tokens per sequence"),
               ModelOption("depth", BERT_LAYERS, 1, 48, "depth", "encoder layers")),
              reference_params=109_483_778,
              reference="Devlin et al. 2019, BERT-base: 109,482,240 encoder + pooler parameters (Hugging Face "
                        "BertModel, bert-base-uncased) + a 768x2 classifier = 109,483,778 "
                        "(BertForSequenceClassification, num_labels=2)"),
)
