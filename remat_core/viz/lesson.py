"""The Learn page's figures: the graph with one recursion call drawn on it, the separator tree with the open
calls' frames, the memory timeline at a step (ECharts options), and several schedules of one graph
compared (plotly figures).

A step of a walk-through must redraw fast (a Next click). The three step figures are Apache ECharts
option dicts (plain JSON: the app draws them with ``st.echarts_chart``, which updates a keyed chart in
place, on a canvas, where a plotly chart is mounted again for every new figure). Each is laid out once
per walk-through by a class whose ``at`` method gives the option at one step: :class:`LessonGraph`,
:class:`SeparatorTreeChart`, :class:`TimelineChart`. Clicks come back as ECharts selections (series
index and data indices): :meth:`LessonGraph.tensor_at`, the bag index itself, and
:meth:`TimelineChart.op_at` turn them into a tensor, a bag and an op.

Texts the charts show (labels, titles) are plain text in ECharts; tooltips are HTML, so names from
files are escaped there (:func:`tooltip_text`).
"""

from __future__ import annotations

import math
from typing import Collection, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis import full_view, layered_layout
from ..graph import ComputeGraph, format_bytes, node_labels
from ..schedule import Schedule, describe_op, memory_by_kind, occurrences, simulation_of
from .decomposition import BAG_COLOR, tree_layout
from .palette import (BUDGET_COLOR, CURSOR_COLOR, DIMMED_COLOR, FONT_FAMILY, GRID, HIGHLIGHT_COLOR, RECOMPUTE_COLOR,
                      base_layout, kind_color, plotly_text, unit_for)
from .timeline import drawn_steps

RESIDENT_COLOR = "#222222"
FIRST_COMPUTE_COLOR = "#222222"
BAG_RING = 4
RESIDENT_RING = 2
SOLVER_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2")
MARGIN = 24
"""Pixels around a graph's or a tree's drawing (its grid's ``left``, ``top``, ``right``, ``bottom``)."""
NODES_SERIES = "tensors"
"""The graph's clickable series: one point per tensor, in graph order."""
STEPS_SERIES = "steps"
"""The timeline's clickable series: one point per drawn op."""

LEGEND = (("subgraph of this call", "● in colour"), ("separator bag, kept resident", "amber ring"),
          ("resident", "dark ring"), ("computed in this step", "dark ★"), ("recomputed in this step", "orange ★"),
          ("outside the call", "grey"), ("pinned (parameters, inputs)", "■"))
"""What the graph's marks mean (the page writes it beside the chart)."""


def tooltip_text(*lines: str) -> str:
    """Lines for an ECharts tooltip, which reads HTML and ``{...}`` templates: names from files escaped."""
    return "<br/>".join(plotly_text(line).replace("{", "&#123;").replace("}", "&#125;") for line in lines)


def _base(**option) -> dict:
    return {"animation": False, "textStyle": {"fontFamily": FONT_FAMILY}, "tooltip": {"trigger": "item",
                                                                                      "confine": True}, **option}


class LessonGraph:
    """The graph laid out once (left to right, folded at the loss), drawn per step as an ECharts option.

    Parameters
    ----------
    graph : ComputeGraph
    """

    def __init__(self, graph: ComputeGraph):
        labels = node_labels(graph)
        positions = folded_positions(graph)
        self.ids = list(graph.ids)
        self.labels = [labels[i] for i in self.ids]
        self.where = {i: k for k, i in enumerate(self.ids)}
        largest = max(graph.mem, default=0) or 1
        self.nodes = [{"name": labels[n.id], "value": list(positions[n.id]), "symbol": "rect" if n.pinned else "circle",
                       "symbolSize": round(10 + 14 * math.sqrt(n.mem / largest), 1),
                       "tooltip": {"formatter": tooltip_text(
                           labels[n.id], f"{n.kind}{' (pinned)' if n.pinned else ''} · {format_bytes(n.mem)}",
                           f"id: {n.id}")}} for n in graph.nodes]
        self.colors = [kind_color(n.kind) for n in graph.nodes]
        self.pinned = {n.id for n in graph.nodes if n.pinned}
        self.edges = [(self.where[u], self.where[v]) for u, v in graph.edges]
        self.axes = _hidden_axes([p for p in positions.values()])

    def tensor_at(self, index: int) -> str | None:
        """The node id of data index ``index`` of the tensors' series (a click's selection)."""
        return self.ids[index] if 0 <= index < len(self.ids) else None

    def at(self, *, subgraph: Collection[str] = (), bag: Collection[str] = (), resident: Collection[str] = (),
           computed: Mapping[str, int] | None = None, selected: str | None = None) -> dict:
        """The option at one step.

        Parameters
        ----------
        subgraph : collection of str
            The call's subgraph: drawn in colour (with the pinned tensors and what is resident),
            everything else grey; empty: nothing grey.
        bag : collection of str
            The call's separator bag: an amber ring.
        resident : collection of str
            Tensors resident after the step: a dark ring.
        computed : mapping of str to int
            Tensors computed in the step and which computation it was (> 1: a recomputation, in
            the recompute colour): stars, labelled.
        selected : str, optional
            A tensor picked by a click: drawn larger.
        """
        inside, bag_set, resident_set = set(subgraph), set(bag), set(resident)
        done = computed or {}
        data = []
        for k, (node, base) in enumerate(zip(self.ids, self.nodes)):
            shown = not inside or node in inside or node in bag_set or node in resident_set or node in self.pinned
            color = self.colors[k] if shown else DIMMED_COLOR
            ring, width = ((HIGHLIGHT_COLOR, BAG_RING) if node in bag_set else
                           (RESIDENT_COLOR, RESIDENT_RING) if node in resident_set and node not in self.pinned else
                           ("#ffffff", 0.5))
            item = {**base, "itemStyle": {"color": color, "borderColor": ring, "borderWidth": width}}
            if node in done:
                item.update(symbol="path://M50,0 L61,35 L98,35 L68,57 L79,91 L50,70 L21,91 L32,57 L2,35 L39,35 Z",
                            symbolSize=base["symbolSize"] + 10,
                            itemStyle={"color": RECOMPUTE_COLOR if done[node] > 1 else FIRST_COMPUTE_COLOR,
                                       "borderColor": ring, "borderWidth": width},
                            label={"show": True, "position": "top", "fontSize": 11, "formatter": "{b}"})
            if node == selected:
                item["symbolSize"] = item["symbolSize"] * 1.5
            data.append(item)
        ours = [(a, b) for a, b in self.edges
                if self.ids[b] in inside and (self.ids[a] in inside or self.ids[a] in resident_set)]
        return _base(series=[_edge_series(self.nodes, self.edges, "#dddddd", 1), _edge_series(self.nodes, ours, "#7a7a7a", 1.6),
                             {"type": "scatter", "name": NODES_SERIES, "selectedMode": "single", "data": data,
                              "label": {"show": False}, "labelLayout": {"hideOverlap": True},
                              "emphasis": {"disabled": True},
                              "select": {"itemStyle": {"borderColor": "#000000", "borderWidth": 4}}}], **self.axes)

    nodes_series_index = 2
    """The position of the clickable tensors' series among the option's series (after two of edges)."""


def folded_positions(graph: ComputeGraph) -> dict[str, tuple[float, float]]:
    """x, y of every node: the Graph page's layers (left to right), with a training graph folded at its loss.

    The backward pass runs the forward pass in reverse, so backward nodes are mirrored around the
    last forward level and drawn below the forward ones: a layer's gradient sits under the layer,
    and a training chain reads as the ladder it is. y grows upwards.
    """
    view = full_view(graph)
    layout = layered_layout(view)
    xy = {node.id: (float(x), float(y)) for node, x, y in zip(view.nodes, layout.x, layout.y)}
    backward = {n.id for n in graph.nodes if n.kind == "backward"}
    ahead = [xy[n.id] for n in graph.nodes if n.id not in backward]
    if not backward or not ahead:
        return xy
    fold = max(x for x, _ in ahead)
    lowest = min(y for _, y in ahead)
    highest_back = max(xy[i][1] for i in backward)
    return {i: ((2 * fold - x, y - (highest_back - lowest) - 1.5) if i in backward else (x, y))
            for i, (x, y) in xy.items()}


class SeparatorTreeChart:
    """A separator tree drawn once (root on top, bags numbered), per step as an ECharts option with the open
    calls' bags ringed and the current call's bag in amber. A click's data index is the bag's index.

    Parameters
    ----------
    bags : sequence of collections of str
        Node ids per bag (the decomposition's).
    parent : sequence of int
        Per bag, its parent in the separator tree (-1 for the root).
    root : int
    labels : mapping of str to str
        Node id -> label, for the tooltips.
    """

    def __init__(self, bags: Sequence[Collection[str]], parent: Sequence[int], root: int,
                 labels: Mapping[str, str]):
        self.edges = [(p, c) for c, p in enumerate(parent) if p >= 0]
        positions = tree_layout(len(bags), self.edges, root)
        self.nodes = []
        for b, bag in enumerate(bags):
            names = sorted(labels.get(v, v) for v in bag)
            self.nodes.append({"name": f"bag {b}", "value": [positions[b][0], positions[b][1]],
                               "symbolSize": 16 + 2 * min(len(bag), 8),
                               "label": {"show": True, "position": "inside", "color": "#ffffff", "fontSize": 10,
                                         "formatter": str(b)},
                               "tooltip": {"formatter": tooltip_text(f"bag {b} · {len(names)} tensors",
                                                                     *names[:12])}})
        self.axes = _hidden_axes(list(positions.values()))

    def at(self, *, open_frames: Sequence[int] = (), frame: int | None = None) -> dict:
        """The option with ``open_frames`` ringed and ``frame`` (the current call's bag) in amber."""
        stack = set(open_frames)
        data = []
        for b, base in enumerate(self.nodes):
            ring, width = ((HIGHLIGHT_COLOR, 5) if b == frame else (RESIDENT_COLOR, 2) if b in stack
                           else ("#ffffff", 0.5))
            data.append({**base, "itemStyle": {"color": BAG_COLOR, "borderColor": ring, "borderWidth": width}})
        return _base(series=[_edge_series(self.nodes, self.edges, "#bbbbbb", 1),
                             {"type": "scatter", "name": "bags", "selectedMode": "single", "data": data,
                              "labelLayout": {"hideOverlap": True}, "emphasis": {"disabled": True},
                              "select": {"itemStyle": {"borderColor": "#000000"}}}],
                     **self.axes)

    nodes_series_index = 1
    """The position of the clickable bags' series among the option's series (its data indices are bags)."""


def _hidden_axes(points: Sequence[Sequence[float]], pad: float = 0.6) -> dict:
    """Value axes out of sight, spanning the points with some room: the grid a drawing of nodes sits on."""
    xs = [p[0] for p in points] or [0.0]
    ys = [p[1] for p in points] or [0.0]
    return {"grid": {"left": MARGIN, "right": MARGIN, "top": MARGIN, "bottom": MARGIN},
            "xAxis": {"type": "value", "show": False, "min": min(xs) - pad, "max": max(xs) + pad},
            "yAxis": {"type": "value", "show": False, "min": min(ys) - pad, "max": max(ys) + pad}}


def _edge_series(nodes: Sequence[Mapping], edges: Sequence[tuple[int, int]], color: str, width: float) -> dict:
    """Edges between nodes (their ``value`` is x, y) as one line series, broken between edges."""
    points: list = []
    for a, b in edges:
        points += [nodes[a]["value"], nodes[b]["value"], "-"]
    return {"type": "line", "silent": True, "symbol": "none", "data": points, "connectNulls": False,
            "lineStyle": {"color": color, "width": width}, "tooltip": {"show": False}, "z": 1}


class TimelineChart:
    """A schedule's memory over its steps, stacked by kind, drawn once; per step as an ECharts option with the
    cursor after that step's op, the steps after it greyed, a range of ops shaded (one call's) and the op
    named in the title. A click on the ``steps`` series gives the op (:meth:`op_at`).

    Parameters
    ----------
    graph : ComputeGraph
    schedule : Schedule
        Simulated.
    budget : int, optional
        Drawn as a dashed line.
    """

    def __init__(self, graph: ComputeGraph, schedule: Schedule, budget: int | None = None):
        result = simulation_of(schedule)
        kinds = memory_by_kind(graph, result)
        self.graph, self.result = graph, result
        self.occurrence = occurrences(result)
        self.n_ops = len(result.ops)
        top = max(result.peak, budget or 0, 1)
        self.unit = unit_for(top)
        self.steps = [int(s) for s in drawn_steps(kinds.total)]
        size = self.unit.size
        series = [{"type": "line", "name": kind, "stack": "memory", "symbol": "none", "silent": True,
                   "areaStyle": {"color": kind_color(kind), "opacity": 0.9},
                   "lineStyle": {"width": 0.5, "color": kind_color(kind)}, "itemStyle": {"color": kind_color(kind)},
                   "data": [[s, round(float(kinds.by_kind[s, c]) / size, 6)] for s in self.steps]}
                  for c, kind in enumerate(kinds.kinds)]
        if budget:
            series.append({"type": "line", "name": "budget", "symbol": "none", "silent": True,
                           "lineStyle": {"color": BUDGET_COLOR, "type": "dashed", "width": 1.5},
                           "itemStyle": {"color": BUDGET_COLOR},
                           "data": [[0, budget / size], [max(self.n_ops - 1, 1), budget / size]]})
        self.points = [{"value": [s, round(float(kinds.total[s]) / size, 6)],
                        "tooltip": {"formatter": tooltip_text(self._note(s))}} for s in self.steps]
        self.series = series
        grid_lines = {"lineStyle": {"color": "#eeeeee"}}
        self.axes = {"xAxis": {"type": "value", "min": 0, "max": max(self.n_ops - 1, 1), "name": "op (schedule order)",
                               "nameLocation": "middle", "nameGap": 26, "splitLine": grid_lines},
                     "yAxis": {"type": "value", "min": 0, "max": round(top / size * 1.08, 6),
                               "name": f"resident ({self.unit.name})", "nameLocation": "middle", "nameGap": 40,
                               "splitLine": grid_lines},  # named along the axis: the legend holds the top
                     "grid": {"left": 60, "right": 16, "top": 56, "bottom": 44},
                     "legend": {"top": 24, "right": 0, "data": [s["name"] for s in series]}}

    def _note(self, step: int) -> str:
        if step < 0 or not self.n_ops:
            return "before the first op"
        name = describe_op(self.graph, self.result, step, self.occurrence[step])
        return f"op {step}: {name} · {format_bytes(self.result.memory[step])}"

    def op_at(self, index: int) -> int | None:
        """The op of data index ``index`` of the ``steps`` series (a click's selection)."""
        return self.steps[index] if 0 <= index < len(self.steps) else None

    @property
    def steps_series_index(self) -> int:
        """The position of the clickable ``steps`` series among the option's series."""
        return len(self.series)

    def at(self, step: int, span: tuple[int, int] | None = None) -> dict:
        """The option with the cursor after op ``step`` (-1: before the first op) and ops ``span[0]`` to
        ``span[1] - 1`` shaded."""
        at = max(0, min(step, self.n_ops - 1))
        last = max(self.n_ops - 1, 1)
        areas = [[{"xAxis": at, "itemStyle": {"color": "rgba(255,255,255,0.82)"}}, {"xAxis": last}]] \
            if step < self.n_ops - 1 else []
        if span is not None and span[1] > span[0]:
            areas.append([{"xAxis": span[0] - 0.5, "itemStyle": {"color": "rgba(255,191,0,0.18)"}},
                          {"xAxis": span[1] - 0.5}])
        steps = {"type": "scatter", "name": STEPS_SERIES, "data": self.points, "symbolSize": 7, "z": 5,
                 "selectedMode": "single", "itemStyle": {"color": "rgba(0,0,0,0.02)"},
                 "select": {"itemStyle": {"color": CURSOR_COLOR}},
                 "markLine": {"silent": True, "symbol": "none", "label": {"show": False},
                              "lineStyle": {"color": CURSOR_COLOR, "width": 1.5, "type": "solid"},
                              "data": [{"xAxis": at}]},
                 "markArea": {"silent": True, "data": areas}}
        return _base(title={"text": self._note(step), "left": 0, "top": 0,
                            "textStyle": {"fontSize": 13, "fontWeight": "normal", "color": CURSOR_COLOR}},
                     series=[*self.series, steps], **self.axes)


# -- several schedules of one graph ------------------------------------------------------------------------

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
        memory = np.asarray([result.start_memory, *result.memory], dtype=float) / unit.size
        fig.add_trace(go.Scatter(x=list(range(-1, len(result.memory))), y=memory,
                                 name=f"{name} (peak {format_bytes(result.peak)})", mode="lines",
                                 line={"color": SOLVER_COLORS[k % len(SOLVER_COLORS)], "width": 2, "shape": "hv"},
                                 hovertemplate=f"%{{y:.4g}} {unit.name}<extra>{plotly_text(name)} · op %{{x}}"
                                               f"</extra>"))
    if budget:
        longest = max((len(r.memory) for r in results.values()), default=1)
        fig.add_trace(go.Scatter(x=[-1, longest], y=[budget / unit.size] * 2, name="budget", mode="lines",
                                 line={"color": BUDGET_COLOR, "dash": "dash", "width": 1.5}, hoverinfo="skip"))
    fig.update_layout(**base_layout(
        height=height, margin={"l": 60, "r": 10, "t": 40, "b": 40},
        xaxis={**GRID, "title": "op (schedule order)"},
        yaxis={**GRID, "title": f"resident memory ({unit.name})", "rangemode": "tozero"}))
    return fig
