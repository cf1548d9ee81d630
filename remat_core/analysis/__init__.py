"""The analysis stage: questions asked of many simulated schedules.

In: a graph and the solvers. Out: comparisons of solvers x budgets (with Checkmate's LP bound),
Pareto curves, why a tensor is recomputed and two schedules' difference, teaching walkthroughs,
a graph's summary, and the views of a big graph to draw. Imports :mod:`remat_core.graph`,
:mod:`remat_core.schedule`, :mod:`remat_core.decompose` and :mod:`remat_core.solvers`.
"""

from .comparison import LP_AVAILABLE, ComparisonRow, compare, lp_lower_bound, pareto_optimal, sweep_budgets
from .explain import (CHANGE_ORDER, OnceThreshold, TensorChange, describe_computation, describe_reason, explain_tensor,
    recomputed_tensors, schedule_diff, smallest_budget_computed_once)
from .pareto import CurvePoint, ParetoCurve, curve_table, feasible_point, infeasible_point, reported_gap
from .summary import graph_summary, in_module, memory_by_module, module_groups
from .views import MAX_DRAWN_NODES, GraphView, ViewNode, full_view, module_view, neighbourhood_view
from .walkthrough import step_title, walkthrough_steps

__all__ = ["CHANGE_ORDER", "compare", "ComparisonRow", "curve_table", "CurvePoint", "describe_computation",
           "describe_reason", "explain_tensor", "feasible_point", "full_view", "graph_summary", "GraphView", "in_module",
           "infeasible_point", "LP_AVAILABLE", "lp_lower_bound", "MAX_DRAWN_NODES", "memory_by_module", "module_groups",
           "module_view", "neighbourhood_view", "OnceThreshold", "pareto_optimal", "ParetoCurve",
           "recomputed_tensors", "reported_gap", "schedule_diff", "smallest_budget_computed_once",
           "step_title", "sweep_budgets", "TensorChange", "ViewNode", "walkthrough_steps"]
