"""Every solver, behind one front door.

Each module in this package registers its solvers with :func:`~remat_core.solvers.base.register`;
importing the package imports them all, so the registry is built from the modules themselves.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._checkmate_model import highs_left_running
from .api import DEFAULT_SOLVER, SweepRow, check_budget, solve, sweep
from .base import REGISTRY, Option, SolverSpec, get_solver, register, solver_names

_INFRASTRUCTURE = {"api", "base"}
_LISTED_FIRST = ("auto", "checkpoint_all")
"""The default solver, then the baseline; the others follow in alphabetical order of their modules."""

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in _INFRASTRUCTURE and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")


def _listing_key(item: tuple[int, SolverSpec]) -> tuple[int, str, int]:
    """The first modules first, the others by module name; a module's solvers in registration order."""
    position, spec = item
    module = spec.function.__module__.rsplit(".", 1)[-1]
    first = _LISTED_FIRST.index(module) if module in _LISTED_FIRST else len(_LISTED_FIRST)
    return first, module, position


# registration follows the imports (a module that imports another registers after it), so order here
_listed = [spec for _, spec in sorted(enumerate(REGISTRY.values()), key=_listing_key)]
REGISTRY.clear()
REGISTRY.update((spec.name, spec) for spec in _listed)


def list_solvers() -> list[SolverSpec]:
    """Every registered solver, in registration order."""
    return list(REGISTRY.values())


__all__ = ["DEFAULT_SOLVER", "Option", "REGISTRY", "SolverSpec", "SweepRow", "check_budget", "get_solver",
           "highs_left_running", "list_solvers", "register", "solve", "solver_names", "sweep"]
