"""Remat Explorer's solver package: training graphs, schedules, solvers and the one simulator.

The front door::

    from remat_core import load_graph, solve, simulate
    graph = load_graph("model.json")
    schedule = solve(graph, budget=512 * 2**20, solver="checkpoint-all")
    print(schedule.stats["peak"], schedule.stats["overhead"])

A module trained with a plan (loads PyTorch on first use)::

    from remat_core import rematerialize
    model = rematerialize(model, example_inputs, budget="50%", solver="rotor")

The subpackages follow the data flow (``ARCHITECTURE.md`` draws it): ``frontends`` (models and
files in) -> ``graph`` -> ``decompose`` -> ``solvers`` -> ``schedule`` (and its simulator) ->
``analysis`` -> ``viz``, with ``run`` taking schedules back to PyTorch and ``cli`` on top.
"""

import importlib
from typing import Any

from .errors import (BudgetError, DecompositionError, GraphError, InfeasibleBudget, InvalidSchedule, RematError,
                     ScheduleFormatError, SearchStopped, SolverLimitExceeded, SolverOptionError, TraceError,
                     UnknownSolver, ZooError)
from .graph import (NODE_KINDS, ComputeGraph, Node, format_bytes, load_graph, parse_budget, parse_graph, save_graph,
                    with_backward)
from .schedule import (Schedule, SimulationResult, checkpoint_all_cost, checkpoint_all_peak, load_schedule,
                       memory_lower_bound, save_schedule, simulate)
from .solvers import SolveOutcome, get_solver, list_solvers, solve, solve_outcome, sweep

# Importing the frontends registers the ``.onnx`` loader of load_graph; the tracer and the zoo
# need PyTorch and load on first use (remat_core.frontends).
from . import frontends  # noqa: E402,F401  isort: skip

__all__ = ["BudgetError", "ComputeGraph", "DecompositionError", "GraphError", "InfeasibleBudget", "InvalidSchedule",
           "NODE_KINDS", "Node", "RematError", "Schedule", "ScheduleFormatError", "SearchStopped", "SimulationResult",
           "SolveOutcome", "SolverLimitExceeded", "SolverOptionError", "TraceError", "UnknownSolver", "ZooError",
           "checkpoint_all_cost", "checkpoint_all_peak", "format_bytes", "get_solver", "list_solvers", "load_graph",
           "load_schedule", "memory_lower_bound", "parse_budget", "parse_graph", "save_graph", "save_schedule",
           "rematerialize", "simulate", "solve", "solve_outcome", "sweep", "with_backward"]

_LAZY_IMPORTS = {"rematerialize": ".run"}
"""Names that need PyTorch: loaded on first use, so that ``import remat_core`` does not import it."""


def __getattr__(name: str) -> Any:
    """A PyTorch-bound name, loaded on first use."""
    if name in _LAZY_IMPORTS:
        return getattr(importlib.import_module(_LAZY_IMPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
