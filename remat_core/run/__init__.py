"""The run package: schedules on real tensors, out of the simulator and into PyTorch.

In: a traced graph (with its model attached) and a schedule. Out: an execution op by op with the
real bytes after every op and the gradients (``execute``), and its check against checkpoint-all's
gradients and the simulator's memory (``tensor_check``); the route table (``routes``: every way a plan runs
in PyTorch, replayed, as selective activation checkpointing, compiled, offloaded); one real training step
through a route, measured against eager PyTorch (``step.train_step``, ``StepReport``); and ``rematerialize``,
a module traced, solved and installed once. Imports
:mod:`remat_core.graph`, :mod:`remat_core.schedule`, :mod:`remat_core.frontends` and
:mod:`remat_core.solvers`. PyTorch loads on first use of a name that needs it (``_LAZY_IMPORTS``).
"""

from __future__ import annotations

import importlib
from typing import Any

from .report import StepReport, Uncontrolled
from .routes import ROUTES, Route, get_route, route_names
from .tensor_check import GRADIENT_TOLERANCE, TensorCheck, check_on_tensors

_LAZY_IMPORTS = {
    "ExecutionResult": ".executor",
    "execute": ".executor",
    "gradient_difference": ".executor",
    "reference_gradients": ".executor",
    "RematerializedModule": ".rematerialized",
    "rematerialize": ".rematerialized",
    "train_step": ".step",
}
"""Names whose modules import PyTorch: loaded on first use."""

__all__ = ["check_on_tensors", "execute", "ExecutionResult", "get_route", "gradient_difference", "GRADIENT_TOLERANCE",
           "reference_gradients", "RematerializedModule", "rematerialize", "Route", "ROUTES", "route_names",
           "StepReport", "TensorCheck", "train_step", "Uncontrolled"]


def __getattr__(name: str) -> Any:
    """A PyTorch-bound name, loaded on first use."""
    if name in _LAZY_IMPORTS:
        return getattr(importlib.import_module(_LAZY_IMPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
