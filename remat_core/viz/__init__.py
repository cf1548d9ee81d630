"""Figures for the explorer, built without Streamlit: plotly figures, Apache ECharts options (the Learn page's
step figures) and self-contained pyvis HTML.

The graph view (``graph_view``: WebGL, levels of detail, a schedule's colours) draws big graphs;
``dag`` draws one tensor's neighbourhood as a pyvis page a person can drag apart (the Why page);
``memory_map`` draws where in the address space each tensor lives under the caching-allocator model;
``transfers`` the copies of a schedule timed over a host link, step by step under its memory timeline.

Each builder takes the core objects (a graph, a simulated schedule, a Pareto curve, a view, bags)
and returns a figure that tests can inspect and the app can render.
"""

from .dag import ROLE_COLORS, neighbourhood_html
from .decomposition import bag_label, path_strip_figure, separator_tree_figure, tree_of_bags_figure
from .graph_view import STATUS_COLORS, clicked_index, graph_view_figure, node_facts
from .lesson import (LEGEND, LessonGraph, SeparatorTreeChart, TimelineChart, compute_counts_figure,
                     memory_curves_figure)
from .memory import module_memory_figure
from .memory_map import memory_map_figure, tensor_color
from .palette import KIND_COLORS, RECOMPUTE_COLOR, ByteUnit, unit_for
from .pareto import LOWER_BOUND, MARK_LINES, PEAK, pareto_figure
from .timeline import lifetime_candidates, lifetime_chart, memory_timeline_figure
from .transfers import transfer_lane_figure

__all__ = ["KIND_COLORS", "LEGEND", "LOWER_BOUND", "MARK_LINES", "PEAK", "RECOMPUTE_COLOR", "STATUS_COLORS", "bag_label",
           "ByteUnit", "LessonGraph", "SeparatorTreeChart", "TimelineChart", "clicked_index", "compute_counts_figure",
           "graph_view_figure", "neighbourhood_html", "ROLE_COLORS", "lifetime_candidates", "lifetime_chart", "memory_curves_figure",
           "memory_map_figure", "memory_timeline_figure", "module_memory_figure", "node_facts", "pareto_figure", "path_strip_figure",
           "separator_tree_figure", "tensor_color", "transfer_lane_figure", "tree_of_bags_figure", "unit_for"]
