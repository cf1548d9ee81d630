"""Figures for the explorer, built without Streamlit: plotly figures, Apache ECharts options (the Learn page's
step figures) and self-contained pyvis HTML.

Each builder takes the core objects (a graph, a simulated schedule, a Pareto curve, a view, bags)
and returns a figure that tests can inspect and the app can render.
"""

from .dag import dag_html, layered_positions
from .decomposition import path_strip_figure, tree_of_bags_figure
from .lesson import (LEGEND, LessonGraph, SeparatorTreeChart, TimelineChart, compute_counts_figure,
                     memory_curves_figure)
from .memory import module_memory_figure
from .palette import KIND_COLORS, RECOMPUTE_COLOR, ByteUnit, unit_for
from .pareto import LOWER_BOUND, MARK_LINES, PEAK, pareto_figure
from .timeline import lifetime_candidates, lifetime_chart, memory_timeline_figure

__all__ = ["KIND_COLORS", "LEGEND", "LOWER_BOUND", "MARK_LINES", "PEAK", "RECOMPUTE_COLOR", "ByteUnit", "LessonGraph",
           "SeparatorTreeChart", "TimelineChart", "compute_counts_figure", "dag_html", "layered_positions",
           "lifetime_candidates", "lifetime_chart", "memory_curves_figure", "memory_timeline_figure",
           "module_memory_figure", "pareto_figure", "path_strip_figure", "tree_of_bags_figure", "unit_for"]
