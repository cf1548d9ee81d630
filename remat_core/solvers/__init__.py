"""The solvers package: every solver, by family, behind one front door.

In: a :class:`~remat_core.graph.ComputeGraph`, a budget in bytes, a solver's name and its options.
Out: a :class:`~remat_core.schedule.Schedule` measured by the simulator (:func:`solve`), or the same
solve as one :class:`SolveOutcome` (:func:`solve_outcome`: a schedule, or why there is none).
Imports :mod:`remat_core.graph`, :mod:`remat_core.schedule` and :mod:`remat_core.decompose`.

Families, one subpackage each (its docstring says what its solvers share and guarantee):
:mod:`.stage_models` (Checkmate's MILP and LP, Moccasin's CP-SAT), :mod:`.eviction` (DTR and its
relatives, XLA's greedy, lifetime splitting), :mod:`.chains` (Chen, Griewank, Rotor),
:mod:`.separators` (the treewidth and pathwidth recursions of Kumar et al.), :mod:`.portfolio`
(``auto``) and :mod:`.peers` (PyTorch's partitioner); ``checkpoint-all``, the baseline, sits here.
Shared pieces sit here too: :mod:`.registry` (the registry and its tags), :mod:`.front_door`,
:mod:`.outcome`, :mod:`.quick` (the quick heuristics as one portfolio, found by tag),
:mod:`.deadline` and :mod:`.bounds`.

Every module below this package is imported here, so a solver registers wherever it lives; what kind
of solver it is comes from its tags (:func:`find_solvers`), never from a list of names.
"""

from __future__ import annotations

import importlib
import pkgutil

from .front_door import DEFAULT_SOLVER, check_budget, check_time_limit, solve, solve_outcome, sweep
from .peers.torch_partitioner import failure_dumps_kept_out
from .outcome import FAILED, FEASIBLE, INFEASIBLE, REFUSED, STATUSES, STOPPED, SolveOutcome
from .registry import (MAX_POLICY_SETTINGS, REGISTRY, Option, SolverSpec, SolverTags, family_description,
                       find_solvers, get_solver, register, solver_names)
from .separators.trace import RecursionCall, RecursionTrace, recursion_decomposition, trace_recursion
from .stage_models.checkmate_lp import lp_relaxation_value
from .stage_models.checkmate_model import highs_left_running

_LISTED_FIRST = ("auto", "checkpoint_all")
"""The default solver, then the baseline; the others follow in alphabetical order of their modules."""

for _module in sorted(m.name for m in pkgutil.walk_packages(__path__, prefix=f"{__name__}.")):
    importlib.import_module(_module)


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


def families() -> list[str]:
    """The families of the registered solvers, in the order their first solver is listed."""
    return list(dict.fromkeys(spec.family for spec in REGISTRY.values()))


__all__ = ["DEFAULT_SOLVER", "FAILED", "FEASIBLE", "INFEASIBLE", "MAX_POLICY_SETTINGS", "Option", "REFUSED", "REGISTRY", "RecursionCall",
           "RecursionTrace", "STATUSES", "STOPPED", "SolveOutcome", "SolverSpec", "SolverTags", "check_budget",
           "check_time_limit", "failure_dumps_kept_out", "families", "family_description", "find_solvers", "get_solver", "highs_left_running",
           "list_solvers", "lp_relaxation_value", "recursion_decomposition", "register", "solve", "solve_outcome", "solver_names", "sweep",
           "trace_recursion"]
