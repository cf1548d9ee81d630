"""Loss set-ups: how a training step turns a model's output into one scalar.

A :class:`LossSetup` pairs a loss function with the target tensors it needs; the tracer makes the
targets graph inputs and tags the loss function's ops as kind ``loss``. :func:`as_loss_setup` turns
the forms a user writes (a callable over the output, a callable or ``nn`` loss module over the output
and targets) into one.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import CellType, FunctionType
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_leaves
from torch import nn
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
    """Every output element summed: the tensors among the output's leaves (a tuple, a list, a dict, a registered
    container such as a Hugging Face ``ModelOutput``)."""
    tensors = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]
    return torch.stack([t.sum() for t in tensors]).sum() if len(tensors) > 1 else tensors[0].sum()


SUM_OF_OUTPUTS = LossSetup("sum", _sum_of_outputs)
"""The surrogate loss used when none is given for a non-scalar output: the sum of every output
element, whose gradient seeds every output with ones (the backward pass has the same shape as for
any other loss)."""


LOSS_FORMS = ("give the loss as loss(output) (a function, or a lambda over the labels it captures), as loss(output, "
              "*targets) with the targets beside it (a function or an nn loss module such as nn.CrossEntropyLoss()), "
              "or as LossSetup(name, fn, targets)")
"""What :func:`as_loss_setup` takes, for hints."""


def as_loss_setup(loss: Any, targets: torch.Tensor | Sequence[torch.Tensor] = ()) -> LossSetup | None:
    """The :class:`LossSetup` of a loss in any form a user writes.

    Parameters
    ----------
    loss : LossSetup, callable, nn.Module or None
        ``loss(output)`` (a function, or a lambda over tensors it captures, such as
        ``lambda out: F.cross_entropy(out, labels)``), ``loss(output, *targets)`` (a function or a
        loss module such as ``nn.CrossEntropyLoss()``) with ``targets`` given, a :class:`LossSetup`, or
        None (the tracer's default: a scalar output is the loss, else every element is summed).
    targets : tensor or sequence of tensors
        The loss's further arguments, when it takes them.

    Tensors a function's closure captures (the labels of the lambda above) become targets too: a
    step reads them as inputs, as the tracer requires, and the function sees them as it was written.

    Raises
    ------
    TypeError
        A loss that is not callable, targets that are not tensors, or targets beside a LossSetup
        (which carries its own).
    """
    targets = (targets,) if isinstance(targets, torch.Tensor) else tuple(targets)
    if any(not isinstance(t, torch.Tensor) for t in targets):
        raise TypeError(f"loss targets must be tensors, got {', '.join(type(t).__name__ for t in targets)}")
    if loss is None:
        if targets:
            raise TypeError("targets were given without a loss to take them")
        return None
    if isinstance(loss, LossSetup):
        if targets:
            raise TypeError("a LossSetup carries its own targets: give them to LossSetup(name, fn, targets), "
                            "not beside it")
        return loss
    if not callable(loss):
        raise TypeError(f"the loss is a {type(loss).__name__}, not a callable, an nn loss module or a LossSetup")
    name = type(loss).__name__ if isinstance(loss, nn.Module) else getattr(loss, "__name__", "loss")
    check_loss_arity(loss, name, len(targets))
    cells = (loss.__closure__ or ()) if isinstance(loss, FunctionType) else ()
    captured = [cell for cell in cells if isinstance(_contents(cell), torch.Tensor)]
    scope = loss.__globals__ if isinstance(loss, FunctionType) else {}
    names = [n for n in dict.fromkeys(loss.__code__.co_names) if isinstance(scope.get(n), torch.Tensor)] \
        if isinstance(loss, FunctionType) else []
    if not captured and not names:
        return LossSetup(name, loss, targets)
    return LossSetup(name, _ClosureLifted(loss, tuple(captured), tuple(names), len(targets)),
                     targets + tuple(cell.cell_contents for cell in captured) + tuple(scope[n] for n in names))


def check_loss_arity(fn: Callable[..., Any], name: str, targets: int) -> None:
    """Refuse a loss that cannot be called as ``fn(output, *targets)`` with ``targets`` targets (TypeError).

    A loss module is checked by its ``forward``; a callable without a signature (a builtin) passes.
    """
    try:
        signature = inspect.signature(fn.forward if isinstance(fn, nn.Module) else fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*range(1 + targets))
    except TypeError as error:
        needs = sum(1 for p in signature.parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
        raise TypeError(f"the loss {name!r} cannot be called with the model's output and {targets} target(s) "
                        f"({error}): it takes the output and {max(needs - 1, 0)} target(s)") from None


def _contents(cell: CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled
        return None


class _ClosureLifted:
    """A loss function whose captured tensors (in its closure, or globals of its module it names, as a script's
    ``labels``) are passed in as further targets.

    A trace runs the step on stand-in tensors; a tensor the loss captured would be a real one among
    them. Called as ``(output, *targets, *captured, *globals)``, it puts the captured values passed in into the
    function's closure cells for the call and restores the user's own afterwards, and calls a copy of the function
    whose globals have the named tensors replaced (the module's own are never touched).
    """

    def __init__(self, function: FunctionType, cells: tuple[CellType, ...], global_names: tuple[str, ...],
                 given: int):
        self.function = function
        self.cells = cells
        self.global_names = global_names
        self.given = given
        self.__name__ = getattr(function, "__name__", "loss")

    def __call__(self, output: Any, *targets: torch.Tensor) -> torch.Tensor:
        own, lifted = targets[: self.given], targets[self.given:]
        in_cells, in_globals = lifted[:len(self.cells)], lifted[len(self.cells):]
        function = self.function
        if self.global_names:
            function = FunctionType(function.__code__, {**function.__globals__, **dict(zip(self.global_names,
                                                                                          in_globals))},
                                    function.__name__, function.__defaults__, function.__closure__)
            function.__kwdefaults__ = self.function.__kwdefaults__
        saved = [cell.cell_contents for cell in self.cells]
        try:
            for cell, value in zip(self.cells, in_cells):
                cell.cell_contents = value
            return function(output, *own)
        finally:
            for cell, value in zip(self.cells, saved):
                cell.cell_contents = value
