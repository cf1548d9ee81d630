"""Hugging Face ``transformers`` architectures, built from their config classes in code: the models users train.

No weights, no hub, no download: each entry builds ``<Model>(<Config>(...))`` with random weights (the
zoo seeds the RNG) at small sizes that train one step on a CPU in seconds, and a loss that reads the
``ModelOutput``'s ``.logits``, as a training loop writes it. ``transformers`` is imported when one is built.
Their module level is their decoder or encoder layers (the blocks Hugging Face's own gradient
checkpointing wraps).

- ``hf-llama``: ``LlamaForCausalLM`` (grouped-query attention, RoPE, SwiGLU), next-token loss;
- ``hf-gpt2``: ``GPT2LMHeadModel``, next-token loss;
- ``hf-bert``: ``BertForSequenceClassification``, two classes;
- ``hf-vit``: ``ViTForImageClassification``, ten classes;
- ``hf-t5``: ``T5ForConditionalGeneration`` (encoder-decoder), fed by keyword (``input_ids``,
  ``decoder_input_ids``), next-token loss on the decoder.

The parameter counts are those of the built models at the default options (``transformers`` 5.x).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch.nn import functional as F

from ...errors import ZooError
from ..losses import LossSetup
from ._spec import ModelOption, ModelSpec, batch_option

VOCAB = 4000
"""The vocabulary of the language models: small, so that the logits do not dwarf the layers on a CPU."""
CLASSES = {"hf-bert": 2, "hf-vit": 10}
PATCH = 8
"""ViT's patch side, in pixels (the image side must be a multiple of it)."""


def _transformers() -> Any:
    try:
        return importlib.import_module("transformers")
    except ImportError as error:
        raise ZooError(f"the Hugging Face models need the transformers package ({error}); install it with "
                       f"pip install 'transformers>=5,<6' (make run and make test do)") from error


def _check_heads(model: str, hidden: int, heads: int, kv_heads: int | None = None) -> None:
    if hidden % heads:
        raise ZooError(f"model '{model}': hidden={hidden} is not a multiple of heads={heads}; pick a hidden size "
                       f"that the heads divide (for heads={heads}: {heads * max(1, round(hidden / heads))})")
    if kv_heads is not None and heads % kv_heads:
        raise ZooError(f"model '{model}': heads={heads} is not a multiple of kv_heads={kv_heads}; grouped-query "
                       f"attention shares each key-value head among a whole number of query heads")


def next_token_loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a language model's ``output.logits`` ``(B, T, V)`` against the next tokens ``(B, T)``."""
    logits = output.logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def classification_loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a classifier's ``output.logits`` ``(B, C)`` against the labels ``(B,)``."""
    return F.cross_entropy(output.logits, labels)


def _tokens(generator: torch.Generator, batch_size: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, VOCAB, (batch_size, seq_len + 1), generator=generator)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def build_llama(generator: torch.Generator, batch_size: int, seq_len: int, layers: int, hidden: int, heads: int,
                kv_heads: int):
    _check_heads("hf-llama", hidden, heads, kv_heads)
    hf = _transformers()
    config = hf.LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=-(-8 * hidden // 3 // 64) * 64,
                            num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                            max_position_embeddings=max(seq_len, 2048), use_cache=False)
    ids, labels = _tokens(generator, batch_size, seq_len)
    return hf.LlamaForCausalLM(config), (ids,), LossSetup("next_token_cross_entropy", next_token_loss, (labels,))


def build_gpt2(generator: torch.Generator, batch_size: int, seq_len: int, layers: int, hidden: int, heads: int):
    _check_heads("hf-gpt2", hidden, heads)
    hf = _transformers()
    config = hf.GPT2Config(vocab_size=VOCAB, n_positions=max(seq_len, 1024), n_embd=hidden, n_layer=layers,
                           n_head=heads, bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, use_cache=False)
    ids, labels = _tokens(generator, batch_size, seq_len)
    return hf.GPT2LMHeadModel(config), (ids,), LossSetup("next_token_cross_entropy", next_token_loss, (labels,))


def build_bert(generator: torch.Generator, batch_size: int, seq_len: int, layers: int, hidden: int, heads: int):
    _check_heads("hf-bert", hidden, heads)
    hf = _transformers()
    config = hf.BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=4 * hidden, max_position_embeddings=max(seq_len, 512),
                           num_labels=CLASSES["hf-bert"])
    ids = torch.randint(0, VOCAB, (batch_size, seq_len), generator=generator)
    labels = torch.randint(0, CLASSES["hf-bert"], (batch_size,), generator=generator)
    return (hf.BertForSequenceClassification(config), (ids,),
            LossSetup("cross_entropy", classification_loss, (labels,)))


def build_vit(generator: torch.Generator, batch_size: int, image_size: int, layers: int, hidden: int, heads: int):
    _check_heads("hf-vit", hidden, heads)
    hf = _transformers()
    config = hf.ViTConfig(image_size=image_size, patch_size=PATCH, hidden_size=hidden, num_hidden_layers=layers,
                          num_attention_heads=heads, intermediate_size=4 * hidden, num_labels=CLASSES["hf-vit"])
    images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
    labels = torch.randint(0, CLASSES["hf-vit"], (batch_size,), generator=generator)
    return (hf.ViTForImageClassification(config), (images,),
            LossSetup("cross_entropy", classification_loss, (labels,)))


def build_t5(generator: torch.Generator, batch_size: int, seq_len: int, layers: int, hidden: int, heads: int):
    _check_heads("hf-t5", hidden, heads)
    hf = _transformers()
    config = hf.T5Config(vocab_size=VOCAB, d_model=hidden, d_kv=hidden // heads, d_ff=4 * hidden, num_layers=layers,
                         num_decoder_layers=layers, num_heads=heads, use_cache=False, decoder_start_token_id=0,
                         pad_token_id=0, eos_token_id=1)
    ids = torch.randint(0, VOCAB, (batch_size, seq_len), generator=generator)
    decoder_ids, labels = _tokens(generator, batch_size, seq_len)
    return (hf.T5ForConditionalGeneration(config), {"input_ids": ids, "decoder_input_ids": decoder_ids},
            LossSetup("next_token_cross_entropy", next_token_loss, (labels,)))


def _sizes(layers: int, hidden: int, heads: int) -> tuple[ModelOption, ...]:
    return (ModelOption("layers", layers, 1, 64, "depth", "decoder or encoder layers"),
            ModelOption("hidden", hidden, 16, 8192, "width", "hidden size (a multiple of the heads)"),
            ModelOption("heads", heads, 1, 128, "heads", "attention heads"))


def _seq_len(default: int) -> ModelOption:
    return ModelOption("seq_len", default, 1, 4096, "input_size", "tokens per sequence")


_BUILT_FROM = "built from its config in code at the default options, counted (transformers 5.x)"

MODELS = (
    ModelSpec("hf-llama", "Hugging Face LlamaForCausalLM: grouped-query attention, RoPE, SwiGLU (vocab 4000)",
              build_llama,
              (batch_option(4), _seq_len(256), *_sizes(6, 384, 6),
               ModelOption("kv_heads", 2, 1, 128, "heads", "key-value heads (grouped-query attention)")),
              reference_params=12_514_176, reference=f"LlamaForCausalLM(LlamaConfig(...)) {_BUILT_FROM}"),
    ModelSpec("hf-gpt2", "Hugging Face GPT2LMHeadModel, tied embeddings (vocab 4000)", build_gpt2,
              (batch_option(4), _seq_len(128), *_sizes(4, 256, 4)),
              reference_params=4_445_696, reference=f"GPT2LMHeadModel(GPT2Config(...)) {_BUILT_FROM}"),
    ModelSpec("hf-bert", "Hugging Face BertForSequenceClassification, two classes (vocab 4000)", build_bert,
              (batch_option(4), _seq_len(128), *_sizes(4, 256, 4)),
              reference_params=4_381_442, reference=f"BertForSequenceClassification(BertConfig(...)) {_BUILT_FROM}"),
    ModelSpec("hf-vit", "Hugging Face ViTForImageClassification, 8-pixel patches, ten classes", build_vit,
              (batch_option(4),
               ModelOption("image_size", 64, PATCH, 1024, "input_size", "input image side, in pixels",
                           multiple_of=PATCH),
               *_sizes(4, 256, 4)),
              reference_params=3_228_426, reference=f"ViTForImageClassification(ViTConfig(...)) {_BUILT_FROM}"),
    ModelSpec("hf-t5", "Hugging Face T5ForConditionalGeneration, encoder-decoder (vocab 4000)", build_t5,
              (batch_option(4), _seq_len(128), *_sizes(4, 256, 4)),
              reference_params=8_369_920, reference=f"T5ForConditionalGeneration(T5Config(...)) {_BUILT_FROM}"),
)
