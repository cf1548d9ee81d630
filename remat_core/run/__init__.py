"""The run stage: schedules on real tensors, out of the simulator and into PyTorch.

In: a traced graph (with its model attached) and a schedule. Out: an execution op by op with the
real bytes after every op and the gradients (``execute``), and its check against checkpoint-all's
gradients and the simulator's memory (``tensor_check``). Imports :mod:`remat_core.graph`,
:mod:`remat_core.schedule` and :mod:`remat_core.frontends`. PyTorch loads on first use of a name
that needs it (``_LAZY_IMPORTS``).
"""

from __future__ import annotations

import importlib
from typing import Any

from .tensor_check import GRADIENT_TOLERANCE, TensorCheck, check_on_tensors

_LAZY_IMPORTS = {
    "ExecutionResult": ".executor",
    "execute": ".executor",
    "gradient_difference": ".executor",
    "is_executable": ".executor",
    "reference_gradients": ".executor",
    "with_model_of": ".executor",
}
"""Names whose modules import PyTorch: loaded on first use."""

__all__ = ["check_on_tensors", "execute", "ExecutionResult", "gradient_difference", "GRADIENT_TOLERANCE",
           "is_executable", "reference_gradients", "TensorCheck", "with_model_of"]


def __getattr__(name: str) -> Any:
    """A PyTorch-bound name, loaded on first use."""
    if name in _LAZY_IMPORTS:
        return getattr(importlib.import_module(_LAZY_IMPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
