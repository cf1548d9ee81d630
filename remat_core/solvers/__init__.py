"""Every solver, behind one front door.

Each module in this package registers its solvers with :func:`~remat_core.solvers.base.register`;
importing the package imports them all, so the registry is built from the modules themselves.
"""

from __future__ import annotations

import importlib
import pkgutil

from .api import DEFAULT_SOLVER, SweepRow, check_budget, solve, sweep
from .base import REGISTRY, Option, SolverSpec, get_solver, register, solver_names
from .recursion_trace import TRACED_SOLVERS, RecursionCall, RecursionTrace, trace_recursion

_INFRASTRUCTURE = {"api", "base", "recursion_trace"}
_BASELINE_FIRST = "checkpoint_all"

for _module in sorted((m.name for m in pkgutil.iter_modules(__path__)), key=lambda m: (m != _BASELINE_FIRST, m)):
    if _module not in _INFRASTRUCTURE and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")


def list_solvers() -> list[SolverSpec]:
    """Every registered solver, in registration order."""
    return list(REGISTRY.values())


__all__ = ["DEFAULT_SOLVER", "Option", "REGISTRY", "RecursionCall", "RecursionTrace", "SolverSpec", "SweepRow",
           "TRACED_SOLVERS", "check_budget", "get_solver", "list_solvers", "register", "solve", "solver_names", "sweep",
           "trace_recursion"]
