"""Figures for the explorer, built without Streamlit: plotly figures and self-contained pyvis HTML.

Each builder takes the core objects (a graph, a simulated schedule, a Pareto curve, a view, bags)
and returns a figure that tests can inspect and the app can render.
"""

from .dag import dag_html, layered_positions
from .decomposition import path_strip_figure, tree_of_bags_figure
from .lesson import (LessonGraph, compute_counts_figure, memory_curves_figure, numbered_bags,
                     separator_tree_at, step_ready)
from .memory import module_memory_figure
from .palette import KIND_COLORS, RECOMPUTE_COLOR, ByteUnit, unit_for
from .pareto import LOWER_BOUND, MARK_LINES, PEAK, pareto_figure
from .timeline import lifetime_candidates, lifetime_chart, memory_timeline_figure, timeline_at

__all__ = ["KIND_COLORS", "LOWER_BOUND", "MARK_LINES", "PEAK", "RECOMPUTE_COLOR", "ByteUnit", "LessonGraph",
           "compute_counts_figure", "dag_html", "layered_positions", "lifetime_candidates", "lifetime_chart",
           "memory_curves_figure", "memory_timeline_figure", "module_memory_figure", "numbered_bags",
           "pareto_figure", "path_strip_figure", "separator_tree_at", "step_ready", "timeline_at", "tree_of_bags_figure",
           "unit_for"]
