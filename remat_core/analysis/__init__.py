"""The analysis package: questions asked of many simulated schedules.

In: a graph and the solvers' outcomes. Out: comparisons of solvers x budgets (with Checkmate's LP bound),
Pareto curves, why a tensor is recomputed (or offloaded) and two schedules' difference, teaching walkthroughs,
a graph's summary, the views of a big graph to draw (levels of detail over its modules), their
layered layout, and a schedule's statuses laid over them. Imports :mod:`remat_core.graph`,
:mod:`remat_core.schedule`, :mod:`remat_core.decompose` and :mod:`remat_core.solvers`.
"""

from .comparison import (LP_AVAILABLE, LP_UNPROVEN, Attempt, Bound, ComparisonRow, LowerBound, compare, lp_lower_bound,
                         pareto_optimal, sweep_budgets)
from .explain import (CHANGE_ORDER, OnceThreshold, TensorChange, describe_computation, describe_reason, explain_tensor,
    recomputed_tensors, schedule_diff, smallest_budget_computed_once)
from .layout import FORWARD_BAND, Layout, layered_layout
from .offloads import OffloadStory, lane_clock, offload_story
from .neighbourhood import (CONSUMER, PRODUCER, RECOMPUTED_WITH, ROLES, TENSOR, Neighbourhood, recomputed_with,
                            tensor_neighbourhood)
from .overlay import SCHEDULE_STATUSES, STEP_STATUSES, NodeStatus, ViewStatus, schedule_status
from .pareto import (UNLIMITED_BUDGET, CurvePoint, ParetoCurve, curve_point, curve_table, feasible_point,
                     infeasible_point, policy_point, policy_points, reported_gap, setting_label, solve_point,
                     time_overhead)
from .subgraph import module_subgraph
from .summary import graph_summary, in_module, kernel_memory_rows, memory_by_module, module_groups
from .views import (DEFAULT_VIEW_NODES, MAX_DRAWN_NODES, GraphView, Hierarchy, ViewNode, collapse, default_expansion,
    expand, expanded_to_depth, find, full_view, graph_view, hierarchy, reveal, selection_focus, topological_positions,
    view_node)
from .walkthrough import (RecursionWalk, WalkStep, call_title, describe_call, recursion_walk, step_title,
    walk_step_title, walkthrough_steps)

__all__ = ["Attempt", "CONSUMER", "Neighbourhood", "PRODUCER", "RECOMPUTED_WITH", "ROLES", "TENSOR",
           "recomputed_with", "tensor_neighbourhood", "call_title", "CHANGE_ORDER", "collapse", "compare", "ComparisonRow", "curve_point", "curve_table",
           "CurvePoint", "default_expansion", "DEFAULT_VIEW_NODES", "describe_call", "describe_computation",
           "describe_reason", "expand", "expanded_to_depth", "explain_tensor", "feasible_point", "find", "FORWARD_BAND",
           "full_view", "graph_summary", "graph_view", "kernel_memory_rows", "GraphView", "Hierarchy", "hierarchy", "in_module",
           "infeasible_point", "layered_layout", "Layout", "LP_AVAILABLE", "LP_UNPROVEN", "Bound", "LowerBound", "lp_lower_bound", "MAX_DRAWN_NODES",
           "memory_by_module", "module_groups", "module_subgraph", "NodeStatus", "OffloadStory", "offload_story",
           "lane_clock", "OnceThreshold", "pareto_optimal",
           "ParetoCurve", "recomputed_tensors", "recursion_walk", "RecursionWalk", "reported_gap", "reveal",
           "schedule_diff", "schedule_status", "SCHEDULE_STATUSES", "selection_focus", "smallest_budget_computed_once",
           "solve_point", "policy_point", "policy_points", "setting_label", "UNLIMITED_BUDGET", "STEP_STATUSES", "time_overhead", "step_title", "sweep_budgets", "TensorChange", "topological_positions",
           "view_node", "ViewNode", "ViewStatus", "walk_step_title", "WalkStep", "walkthrough_steps"]
