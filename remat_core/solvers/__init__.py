"""Every solver, behind one front door.

Each module in this package registers its solvers with :func:`~remat_core.solvers.base.register`;
importing the package imports them all, so the registry is built from the modules themselves.
"""

from __future__ import annotations

import importlib
import pkgutil

from .api import DEFAULT_SOLVER, SweepRow, check_budget, solve, sweep
from .base import REGISTRY, Option, SolverSpec, get_solver, register, solver_names

_INFRASTRUCTURE = {"api", "base"}
_LISTED_FIRST = ("auto", "checkpoint_all")
"""The default solver, then the baseline; the others follow in alphabetical order of their modules."""

for _module in sorted((m.name for m in pkgutil.iter_modules(__path__)),
                      key=lambda m: (_LISTED_FIRST.index(m) if m in _LISTED_FIRST else len(_LISTED_FIRST), m)):
    if _module not in _INFRASTRUCTURE and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")


def list_solvers() -> list[SolverSpec]:
    """Every registered solver, in registration order."""
    return list(REGISTRY.values())


__all__ = ["DEFAULT_SOLVER", "Option", "REGISTRY", "SolverSpec", "SweepRow", "check_budget", "get_solver",
           "list_solvers", "register", "solve", "solver_names", "sweep"]
