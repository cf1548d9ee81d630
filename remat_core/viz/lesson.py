"""The Learn page's figures: the graph with one recursion call drawn on it, the separator tree with the
open calls' frames, and several schedules of one graph compared (memory over steps, computations per
tensor).

A step of a walk-through must redraw fast (a Next click), so the step figures are built once per
walk-through as plotly dicts and patched per step: :class:`LessonGraph` keeps the layout, edges and
node styles of the graph and gives the figure at a step (:meth:`LessonGraph.at`);
:func:`separator_tree_at` outlines frames on a separator tree built once. Clickable: tensors carry
their node id in ``customdata`` (trace :data:`TENSORS`), bags their index (trace ``"bags"``).
"""

from __future__ import annotations

import math
from typing import Collection, Mapping, Sequence

import plotly.graph_objects as go

from ..analysis import full_view
from ..graph import ComputeGraph, format_bytes, node_labels
from ..schedule import Schedule, simulation_of
from .dag import X_SPACING, Y_SPACING, layered_positions
from .decomposition import BAG_COLOR
from .palette import (BUDGET_COLOR, DIMMED_COLOR, GRID, HIGHLIGHT_COLOR, RECOMPUTE_COLOR, base_layout, kind_color,
                      plotly_text, unit_for)

TENSORS = "tensors"
"""The graph figure's node trace: ``customdata`` holds each node's id."""
COMPUTED = "computed in this step"
CALL_EDGES = "edges of this call"
RESIDENT_COLOR = "#222222"
FIRST_COMPUTE_COLOR = "#222222"
BAG_RING = 4
RESIDENT_RING = 2
SOLVER_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2")


class LessonGraph:
    """The graph laid out once (left to right, as the Graph page draws it), drawn per step as a plotly dict.

    Parameters
    ----------
    graph : ComputeGraph
    height : int
        Pixels.
    """

    def __init__(self, graph: ComputeGraph, height: int = 380):
        self.graph = graph
        labels = node_labels(graph)
        positions = folded_positions(graph)
        self.ids = list(graph.ids)
        self.x = [positions[i][0] for i in self.ids]
        self.y = [positions[i][1] for i in self.ids]
        self.where = {i: k for k, i in enumerate(self.ids)}
        self.labels = [labels[i] for i in self.ids]
        largest = max(graph.mem, default=0) or 1
        self.sizes = [9 + 15 * math.sqrt(m / largest) for m in graph.mem]
        self.colors = [kind_color(n.kind) for n in graph.nodes]
        self.symbols = ["square" if n.pinned else "circle" for n in graph.nodes]
        self.pinned = {n.id for n in graph.nodes if n.pinned}
        self.edges = list(graph.edges)
        hover = [plotly_text(f"{labels[n.id]}\n{n.kind}{' (pinned)' if n.pinned else ''} · {format_bytes(n.mem)}"
                             f"\nid: {n.id}").replace("\n", "<br>") for n in graph.nodes]
        self.hover = hover
        xs, ys = self._segments(self.edges)
        self.layout = base_layout(
            height=height, showlegend=True, dragmode="pan", clickmode="event+select", hovermode="closest",
            margin={"l": 10, "r": 10, "t": 10, "b": 10},
            legend={"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0, "xanchor": "left",
                    "font": {"size": 11}, "itemclick": False, "itemdoubleclick": False},
            xaxis={"visible": False}, yaxis={"visible": False})
        self.base_edges = {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": "edges",
                           "line": {"color": "#d0d0d0", "width": 1}, "hoverinfo": "skip", "showlegend": False}
        self.legend = [_legend_marker("subgraph of this call", "circle", "#4e79a7", None),
                       _legend_marker("separator bag (kept resident)", "circle", "white", HIGHLIGHT_COLOR, BAG_RING),
                       _legend_marker("resident", "circle", "white", RESIDENT_COLOR, RESIDENT_RING),
                       _legend_marker("computed in this step", "star", FIRST_COMPUTE_COLOR, None),
                       _legend_marker("recomputed in this step", "star", RECOMPUTE_COLOR, None),
                       _legend_marker("outside the call", "circle", DIMMED_COLOR, None)]

    def _segments(self, edges: Collection[tuple[str, str]]) -> tuple[list, list]:
        xs: list = []
        ys: list = []
        for u, v in edges:
            a, b = self.where[u], self.where[v]
            xs += [self.x[a], self.x[b], None]
            ys += [self.y[a], self.y[b], None]
        return xs, ys

    def at(self, *, subgraph: Collection[str] = (), bag: Collection[str] = (), resident: Collection[str] = (),
           computed: Mapping[str, int] | None = None, selected: str | None = None) -> dict:
        """The figure at one step.

        Parameters
        ----------
        subgraph : collection of str
            The call's subgraph: drawn in colour (with the pinned tensors), everything else dimmed;
            empty: nothing dimmed.
        bag : collection of str
            The call's separator bag: an amber ring.
        resident : collection of str
            Tensors resident after the step: a dark ring.
        computed : mapping of str to int
            Tensors computed in the step and which computation it was (> 1: a recomputation,
            in the recompute colour): stars, labelled.
        selected : str, optional
            A tensor picked by a click: drawn larger.
        """
        inside = set(subgraph)
        bag_set, resident_set = set(bag), set(resident)
        colors, lines, widths, sizes = [], [], [], []
        for k, node in enumerate(self.ids):
            shown = not inside or node in inside or node in bag_set or node in resident_set or node in self.pinned
            colors.append(self.colors[k] if shown else DIMMED_COLOR)
            if node in bag_set:
                lines.append(HIGHLIGHT_COLOR)
                widths.append(BAG_RING)
            elif node in resident_set and node not in self.pinned:
                lines.append(RESIDENT_COLOR)
                widths.append(RESIDENT_RING)
            else:
                lines.append("white")
                widths.append(0.5)
            sizes.append(self.sizes[k] * (1.6 if node == selected else 1.0))
        tensors = {"type": "scatter", "x": self.x, "y": self.y, "mode": "markers", "name": TENSORS,
                   "customdata": self.ids, "hovertext": self.hover, "hoverinfo": "text", "showlegend": False,
                   "marker": {"color": colors, "size": sizes, "symbol": self.symbols,
                              "line": {"color": lines, "width": widths}}}
        call_edges = [(u, v) for u, v in self.edges if v in inside and (u in inside or u in resident_set)]
        xs, ys = self._segments(call_edges)
        traces = [self.base_edges,
                  {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": CALL_EDGES,
                   "line": {"color": "#7a7a7a", "width": 1.6}, "hoverinfo": "skip", "showlegend": False},
                  tensors]
        done = computed or {}
        if done:
            at = [self.where[n] for n in done]
            traces.append({"type": "scatter", "x": [self.x[k] for k in at], "y": [self.y[k] for k in at],
                           "mode": "markers+text", "name": COMPUTED, "customdata": [self.ids[k] for k in at],
                           "text": [plotly_text(self.labels[k]) for k in at], "textposition": "top center",
                           "textfont": {"size": 11}, "hoverinfo": "skip", "showlegend": False,
                           "marker": {"symbol": "star", "size": 18, "line": {"width": 0},
                                      "color": [RECOMPUTE_COLOR if done[n] > 1 else FIRST_COMPUTE_COLOR
                                                for n in done]}})
        return {"data": traces + self.legend, "layout": self.layout}


def folded_positions(graph: ComputeGraph) -> dict[str, tuple[float, float]]:
    """x, y of every node: the Graph page's layers (left to right), with a training graph folded at its loss.

    The backward pass runs the forward pass in reverse, so backward nodes are mirrored around the
    last forward level and drawn below the forward ones: a layer's gradient sits under the layer,
    and a training chain reads as the ladder it is.
    """
    laid = layered_positions(full_view(graph))
    xy = {i: (x / X_SPACING, -y / Y_SPACING) for i, (x, y) in laid.items()}
    backward = {n.id for n in graph.nodes if n.kind == "backward"}
    ahead = [xy[n.id] for n in graph.nodes if n.id not in backward]
    if not backward or not ahead:
        return xy
    fold = max(x for x, _ in ahead)
    lowest = min(y for _, y in ahead)
    highest_back = max(xy[i][1] for i in backward)
    return {i: ((2 * fold - x, y - (highest_back - lowest) - 1.5) if i in backward else (x, y))
            for i, (x, y) in xy.items()}


def _legend_marker(name: str, symbol: str, color: str, ring: str | None, width: float = 0) -> dict:
    """A legend entry only (no point drawn)."""
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": name, "hoverinfo": "skip",
            "marker": {"symbol": symbol, "size": 11, "color": color,
                       "line": {"color": ring or color, "width": width}}}


def separator_tree_at(base: dict, *, open_frames: Sequence[int] = (), frame: int | None = None) -> dict:
    """A separator tree figure (:func:`~remat_core.viz.decomposition.tree_of_bags_figure` as a dict) with
    the frames of the open calls ringed and the current call's frame outlined in amber."""
    bags = next(t for t in base["data"] if t.get("name") == "bags")
    x, y = list(bags["x"]), list(bags["y"])
    traces = list(base["data"])
    stack = [f for f in open_frames if f != frame]
    if stack:
        traces.append({"type": "scatter", "x": [x[f] for f in stack], "y": [y[f] for f in stack], "mode": "markers",
                       "name": "open calls", "hoverinfo": "skip", "showlegend": False,
                       "marker": {"size": 26, "color": "rgba(0,0,0,0)", "line": {"color": RESIDENT_COLOR,
                                                                                 "width": 2}}})
    if frame is not None and 0 <= frame < len(x):
        traces.append({"type": "scatter", "x": [x[frame]], "y": [y[frame]], "mode": "markers",
                       "name": "this call's bag", "hoverinfo": "skip", "showlegend": False,
                       "marker": {"size": 32, "color": "rgba(0,0,0,0)", "line": {"color": HIGHLIGHT_COLOR,
                                                                                 "width": 5}}})
    return {"data": traces, "layout": base["layout"]}


def step_ready(figure: go.Figure) -> dict:
    """A figure as a plain dict to patch per step, without plotly's default template (the app applies its
    theme): validating the template costs ten times the rest of such a figure, on every step."""
    out = figure.to_dict()
    out["layout"].pop("template", None)
    return out


def numbered_bags(figure: go.Figure) -> dict:
    """A tree-of-bags figure as a step-ready dict whose bags read their index (``bag 5`` in the texts)
    instead of their size."""
    out = step_ready(figure)
    for trace in out["data"]:
        if trace.get("name") == "bags":
            trace["text"] = [str(i) for i in range(len(trace["x"]))]
            trace["mode"] = "markers+text"
            trace["marker"]["color"] = BAG_COLOR  # a frame is a frame: no widest-bag colour here
    return out


def compute_counts_figure(graph: ComputeGraph, schedules: Mapping[str, Schedule], height: int = 320) -> go.Figure:
    """How many times each schedule computes each tensor: one bar group per tensor (graph order), one
    colour per schedule; tensors every schedule computes once are left out.

    Parameters
    ----------
    graph : ComputeGraph
    schedules : mapping of str to Schedule
        Simulated schedules by name (solver).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per schedule, named after it; ``customdata`` holds node ids.
    """
    labels = node_labels(graph)
    counts = {name: simulation_of(s).compute_counts for name, s in schedules.items()}
    shown = [i for i in graph.ids if any(c.get(i, 0) > 1 for c in counts.values())]
    fig = go.Figure()
    for k, (name, count) in enumerate(counts.items()):
        fig.add_trace(go.Bar(name=name, x=[plotly_text(labels[i]) for i in shown], y=[count.get(i, 0) for i in shown],
                             customdata=shown, marker={"color": SOLVER_COLORS[k % len(SOLVER_COLORS)]},
                             hovertemplate="%{x}: computed %{y}×<extra>" + plotly_text(name) + "</extra>"))
    fig.update_layout(**base_layout(
        height=height, barmode="group", margin={"l": 50, "r": 10, "t": 40, "b": 10},
        xaxis={**GRID, "automargin": True, "tickangle": -35, "tickfont": {"size": 10}},
        yaxis={**GRID, "title": "computations", "dtick": 1, "rangemode": "tozero"}))
    return fig


def memory_curves_figure(schedules: Mapping[str, Schedule], budget: int | None = None, height: int = 300) -> go.Figure:
    """The memory of several schedules of one graph over their steps, one line each (with the budget line).

    Returns
    -------
    plotly.graph_objects.Figure
        One line trace per schedule, named after it, and ``"budget"`` when a budget is given.
    """
    results = {name: simulation_of(s) for name, s in schedules.items()}
    top = max([r.peak for r in results.values()] + [budget or 0, 1])
    unit = unit_for(top)
    fig = go.Figure()
    for k, (name, result) in enumerate(results.items()):
        memory = [result.start_memory, *result.memory]
        fig.add_trace(go.Scatter(x=list(range(-1, len(result.memory))), y=[m / unit.size for m in memory],
                                 name=f"{name} (peak {format_bytes(result.peak)})", mode="lines",
                                 line={"color": SOLVER_COLORS[k % len(SOLVER_COLORS)], "width": 2, "shape": "hv"},
                                 hovertemplate=f"%{{y:.4g}} {unit.name}<extra>{plotly_text(name)} · step %{{x}}"
                                               f"</extra>"))
    if budget:
        longest = max((len(r.memory) for r in results.values()), default=1)
        fig.add_trace(go.Scatter(x=[-1, longest], y=[budget / unit.size] * 2, name="budget", mode="lines",
                                 line={"color": BUDGET_COLOR, "dash": "dash", "width": 1.5}, hoverinfo="skip"))
    fig.update_layout(**base_layout(
        height=height, margin={"l": 60, "r": 10, "t": 40, "b": 40},
        xaxis={**GRID, "title": "step (op index)"},
        yaxis={**GRID, "title": f"resident memory ({unit.name})", "rangemode": "tozero"}))
    return fig
