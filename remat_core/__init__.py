"""Remat Explorer's solver package: training graphs, schedules, solvers and the one simulator.

The front door::

    from remat_core import load_graph, solve, simulate
    graph = load_graph("model.json")
    schedule = solve(graph, budget=512 * 2**20, solver="checkpoint-all")
    print(schedule.stats["peak"], schedule.stats["overhead"])
"""

from .budget import format_bytes, parse_budget
from .errors import (BudgetError, DecompositionError, GraphError, InfeasibleBudget, InvalidSchedule, RematError,
                     ScheduleFormatError, SolverLimitExceeded, SolverOptionError, UnknownSolver)
from .graph import NODE_KINDS, ComputeGraph, Node
from .io import load_graph, load_schedule, parse_graph, save_graph, save_schedule
from .schedule import Schedule
from .simulate import (SimulationResult, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound,
                       simulate)
from .solvers import SweepRow, get_solver, list_solvers, solve, sweep

__all__ = ["BudgetError", "ComputeGraph", "DecompositionError", "GraphError", "InfeasibleBudget", "InvalidSchedule",
           "NODE_KINDS", "Node", "RematError", "Schedule", "ScheduleFormatError", "SimulationResult",
           "SolverLimitExceeded", "SolverOptionError", "SweepRow", "UnknownSolver", "checkpoint_all_cost",
           "checkpoint_all_peak", "format_bytes", "get_solver", "list_solvers", "load_graph", "load_schedule",
           "memory_lower_bound", "parse_budget", "parse_graph", "save_graph", "save_schedule", "simulate", "solve",
           "sweep"]

# Getting real models in. Importing onnx_import registers its ``.onnx`` loader with load_graph;
# the tracer (remat_core.trace) and the zoo (remat_core.zoo) need PyTorch and are imported on demand.
from . import onnx_import  # noqa: E402,F401
from .backward import with_backward  # noqa: E402
from .errors import TraceError, ZooError  # noqa: E402

__all__ += ["TraceError", "ZooError", "with_backward"]
