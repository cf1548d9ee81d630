"""Loss set-ups: how a training step turns a model's output into one scalar.

A :class:`LossSetup` pairs a loss function with the target tensors it needs; the tracer makes the
targets graph inputs and tags the loss function's ops as kind ``loss``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class LossSetup:
    """A loss function and its targets.

    Parameters
    ----------
    name : str
        Short name for labels (``cross_entropy``).
    fn : callable
        ``fn(output, *targets) -> scalar tensor``.
    targets : tuple of torch.Tensor
        Extra inputs of the loss (class labels, next tokens...).
    """

    name: str
    fn: Callable[..., torch.Tensor]
    targets: tuple[torch.Tensor, ...] = ()


def cross_entropy(labels: torch.Tensor) -> LossSetup:
    """Mean cross-entropy of logits ``(N, C, ...)`` against integer ``labels`` ``(N, ...)``."""
    return LossSetup("cross_entropy", F.cross_entropy, (labels,))


def _token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def token_cross_entropy(labels: torch.Tensor) -> LossSetup:
    """Mean cross-entropy of per-token logits ``(B, T, V)`` against token ids ``(B, T)``.

    The labels are the already shifted next tokens, as a language-model training step feeds them.
    """
    return LossSetup("token_cross_entropy", _token_cross_entropy, (labels,))


def _sum_of_outputs(output) -> torch.Tensor:
    tensors = [output] if isinstance(output, torch.Tensor) else [t for t in output if isinstance(t, torch.Tensor)]
    return torch.stack([t.sum() for t in tensors]).sum() if len(tensors) > 1 else tensors[0].sum()


SUM_OF_OUTPUTS = LossSetup("sum", _sum_of_outputs)
"""The surrogate loss used when none is given for a non-scalar output: the sum of every output
element, whose gradient seeds every output with ones (the backward pass has the same shape as for
any other loss)."""
