"""The graph view as a WebGL plotly figure: a laid-out view, coloured by kind or by a schedule.

:func:`graph_view_figure` draws a :class:`~remat_core.analysis.GraphView` at the positions of its
:class:`~remat_core.analysis.Layout` with ``Scattergl`` traces (WebGL: 10,000 nodes pan and zoom
smoothly): one trace for the edges, then one trace per colour (a node kind, or a schedule status
such as recomputed, resident, freed), so the legend names the colours and hides or shows them.
A module drawn as one node is a diamond, a pinned tensor a square, an op a circle; markers grow
with bytes. Every node trace carries the view node's index as ``customdata``:
:func:`clicked_index` reads it back from a click. Names come from files, so every text goes
through :func:`~remat_core.viz.palette.plotly_text`; ids appear only in the hover's details.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis import FORWARD_BAND, SCHEDULE_STATUSES, STEP_STATUSES, GraphView, Layout, ViewNode, ViewStatus
from ..graph import NODE_KINDS, format_bytes
from .palette import HIGHLIGHT_COLOR, RECOMPUTE_COLOR, base_layout, kind_color, plotly_text

SCHEDULE_COLORS = (RECOMPUTE_COLOR, "#4e79a7", "#9c89b8", "#d9d9d9")
"""Colours of :data:`~remat_core.analysis.SCHEDULE_STATUSES`, in its order: recomputed, computed once,
always resident, never computed."""
STEP_COLORS = ("#e15759", RECOMPUTE_COLOR, "#59a14f", "#b0b0b0", "#ececec", "#9c89b8")
"""Colours of :data:`~remat_core.analysis.STEP_STATUSES`, in its order: computed at this step, resident and
recomputed, resident, freed, not computed yet, always resident."""
STATUS_COLORS = {**dict(zip(SCHEDULE_STATUSES, SCHEDULE_COLORS)), **dict(zip(STEP_STATUSES, STEP_COLORS))}
"""Schedule status -> colour (recomputation keeps its colour from every other figure)."""

EDGE_TRACE = "edges"
SELECTED_EDGE_TRACE = "edges of the selected node"
NAMES_TRACE = "names"
MARKED_TRACE = "highlighted"
FOCUS_TRACE = "selected"
_TEXT_SIDES = ("top center", "bottom center")
"""A name goes above its marker, or below when a name already written took the space above."""
_TEXT_HEIGHT_PX = 12.0
_TEXT_OFFSET_PX = 11.0
"""A name's box: this high, its centre this far above (or below) its marker's centre."""
_MARGINS_PX = 80
"""The chart's height less its plot area's: the top and bottom margins and the legend."""
ASSUMED_WIDTH_PX = 500
"""Names and markers are sized for a chart about this wide (the page's main column in a 1024-pixel window;
wider charts show the same names with more room)."""
ZOOM_HALF_WIDTH = 10.0
"""A zoom shows at least this many layers either side of what it is on."""
CHAR_PX = 6.0
"""Names are 10 px text: about this wide per character."""
LABELS_UP_TO = 150
"""Views with at most this many nodes name the modules of the middle band (the forward pass) beside their
markers; the names of the rest are in the hover (and found by the search)."""
ALL_NAMED_UP_TO = 40
"""Views with at most this many nodes name every node beside its marker."""
SHORT_LABEL = 26
EDGE_COLOR = "#c8c8c8"
SELECTED_EDGE_COLOR = "#333333"
SYMBOLS = {"group": "diamond", "pinned": "square", "op": "circle"}
_PASS_MARK = re.compile(r" \((?:fwd|bwd)\)(?= #\d+$|$)")


def node_size(mem: np.ndarray | float, largest: float, smallest_px: float = 7.0, largest_px: float = 26.0):
    """Marker size in pixels by the square root of bytes (area follows memory), ``smallest_px`` to ``largest_px``."""
    if largest <= 0:
        return np.full_like(np.asarray(mem, dtype=float), smallest_px)
    return smallest_px + (largest_px - smallest_px) * np.sqrt(np.asarray(mem, dtype=float) / largest)


def shape_text(shape: Any) -> str:
    """``(4, 64, 56, 56)``; a tuple of shapes for an op with several outputs."""
    if isinstance(shape, tuple):
        return "(" + ", ".join(shape_text(s) for s in shape) + ")"
    return str(shape)


def node_facts(node: ViewNode) -> list[str]:
    """Plain-text lines about a view node: its name first, then op, shape, bytes, cost, module, kind, id."""
    lines = [node.label]
    if node.group is not None:
        lines.append(f"{node.size:,} nodes · {format_bytes(node.mem)} · cost {node.cost:.4g}")
        return lines
    if node.op:
        lines.append(f"op: {node.op}")
    if node.shape is not None:
        lines.append(f"shape: {shape_text(node.shape)}")
    lines.append(f"bytes: {format_bytes(node.mem)} ({node.mem:,}) · cost: {node.cost:.4g}")
    if node.module:
        lines.append(f"module: {node.module}")
    lines.append(f"kind: {node.kind}" + (" (pinned)" if node.pinned else ""))
    if node.label != node.id:
        lines.append(f"id: {node.id}")
    return lines


def _symbol(node: ViewNode) -> str:
    return SYMBOLS["group"] if node.group is not None else SYMBOLS["pinned"] if node.pinned else SYMBOLS["op"]


def drawn_name(node: ViewNode) -> str:
    """The short name written beside a marker (the band already says forward or backward): a module's last
    part (with its parent's when that part is a number: ``layer1.0``), an op's label with its module path
    shortened the same way and its pass mark left out, cut to :data:`SHORT_LABEL`."""
    if node.group is not None:
        return short_label(_short_module(node.module) if node.module else node.label)
    name = _PASS_MARK.sub("", node.label)
    if node.module and name.startswith(node.module):
        name = _short_module(node.module) + name[len(node.module):]
    return short_label(name)


def _short_module(path: str) -> str:
    parts = path.split(".")
    return ".".join(parts[-2:]) if len(parts) > 1 and parts[-1].isdigit() else parts[-1]


def short_label(label: str, limit: int = SHORT_LABEL) -> str:
    """``label`` cut to ``limit`` characters with an ellipsis (the full name stays in the hover)."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _status_lines(status: ViewStatus, k: int, node: ViewNode) -> list[str]:
    if node.group is None:
        name = status.statuses[status.status[k]]
        computed = int(status.computes[k])
        return [f"{name}" + (f" · computed {computed}×" if computed > 1 else "")]
    parts = [f"{int(c):,} {name}" for name, c in zip(status.statuses, status.counts[k]) if c]
    return [", ".join(parts)]


def _hover(node: ViewNode, extra: Sequence[str]) -> str:
    facts = node_facts(node)
    head, details = facts[0], facts[1:]
    hint = ["click to open"] if node.group is not None else ["click for details and the Why page"]
    return "<br>".join([f"<b>{plotly_text(head)}</b>", *(plotly_text(t) for t in [*extra, *details, *hint])])


def graph_view_figure(view: GraphView, layout: Layout, *, status: ViewStatus | None = None,
                      selected: int | None = None, focus: Collection[int] = (), marked: Collection[int] = (),
                      title: str | None = None, height: int | None = None, uirevision: str | None = None) -> go.Figure:
    """The view drawn at the layout's positions.

    Parameters
    ----------
    view, layout : GraphView, Layout
    status : ViewStatus, optional
        A schedule's statuses per view node: nodes are coloured by status (one trace and legend
        entry each, in the order of ``status.statuses``); default: by kind.
    selected : int, optional
        A view node to ring, its edges drawn dark (the clicked or found node).
    focus : collection of int
        View nodes to zoom to (the selected node and its neighbourhood, or the parts of a module just
        opened); they are named beside their markers however many nodes the view has.
    marked : collection of int
        View nodes to ring (a decomposition's bag).
    title : str, optional
        Shown at the top right (what the colours are of: the solver and budget).
    height : int, optional
        Pixels; default grows with the layout's rows (420 to 820).
    uirevision : str, optional
        Plotly keeps the user's pan and zoom while this stays the same.

    Returns
    -------
    plotly.graph_objects.Figure
        Traces :data:`EDGE_TRACE`, optionally :data:`SELECTED_EDGE_TRACE`, then per colour one trace per
        marker symbol (named after the colour, one legend entry per colour; ``customdata``: view node
        index), then :data:`NAMES_TRACE` (the names written beside markers), :data:`MARKED_TRACE` and
        :data:`FOCUS_TRACE` when there are any.
    """
    n = len(view.nodes)
    x = layout.x.astype(np.float32)
    y = layout.y.astype(np.float32)
    zoomed = np.asarray(sorted(k for k in focus if 0 <= k < n), dtype=np.int64)
    window = _zoom_window(x, y, zoomed)
    shown_width = (window[0][1] - window[0][0]) if window else float(x.max(initial=0) - x.min(initial=0)) + 1
    fig = go.Figure()
    fig.add_trace(_edges(view, x, y, EDGE_TRACE, EDGE_COLOR, 0.8, np.ones(len(view.edges), dtype=bool)))
    if selected is not None:
        touching = (view.edges[:, 0] == selected) | (view.edges[:, 1] == selected)
        fig.add_trace(_edges(view, x, y, SELECTED_EDGE_TRACE, SELECTED_EDGE_COLOR, 2.0, touching))

    names, colors, category, extra = _colouring(view, status)
    mem = np.array([v.mem for v in view.nodes], dtype=float)
    sizes = node_size(mem, float(mem.max(initial=0)),
                      largest_px=float(np.clip(0.9 * ASSUMED_WIDTH_PX / shown_width, 8.0, 26.0)))
    symbol = np.array([_symbol(v) for v in view.nodes])
    for c, (name, color) in enumerate(zip(names, colors)):
        first = True
        for shape in SYMBOLS.values():  # one trace per symbol: plotly checks a list of symbols one by one
            members = np.flatnonzero((category == c) & (symbol == shape))
            if not len(members):
                continue
            fig.add_trace(go.Scattergl(
                x=x[members], y=y[members], mode="markers", name=name, legendgroup=name, showlegend=first,
                customdata=members, hovertext=[_hover(view.nodes[k], extra[k]) for k in members], hoverinfo="text",
                marker={"color": color, "size": sizes[members], "symbol": shape,
                        "line": {"width": 1, "color": "#555555"}},
                unselected={"marker": {"opacity": 1}}, selected={"marker": {"opacity": 1}}))
            first = False

    is_group = np.array([v.group is not None for v in view.nodes], dtype=bool)
    named = (layout.band == FORWARD_BAND) & is_group if n <= LABELS_UP_TO else np.zeros(n, dtype=bool)
    named |= n <= ALL_NAMED_UP_TO
    named[zoomed] = True
    beside = [drawn_name(v) if named[k] else "" for k, v in enumerate(view.nodes)]
    rows = float(y.max(initial=0) - y.min(initial=0)) + 1
    chart_height = height or int(min(max(160 + 24 * rows, 420), 820))
    shown_height = (window[1][1] - window[1][0]) if window else rows + 1
    side = _text_sides(x, y, beside, shown_width, shown_height, chart_height - _MARGINS_PX, first=zoomed)
    written = np.flatnonzero(side >= 0)
    if len(written):  # a trace of its own: a legend entry of a trace with text shows its first text
        fig.add_trace(go.Scattergl(x=x[written], y=y[written], mode="text", name=NAMES_TRACE, showlegend=False,
                                   hoverinfo="skip", text=[beside[k] for k in written],  # WebGL text: no HTML
                                   textposition=[_TEXT_SIDES[side[k]] for k in written],
                                   textfont={"size": 10, "color": "#444444"}))
    rings = [k for k in marked if 0 <= k < n]
    if rings:
        fig.add_trace(_ring(x, y, sizes, rings, MARKED_TRACE, HIGHLIGHT_COLOR, 3))
    if selected is not None and 0 <= selected < n:
        fig.add_trace(_ring(x, y, sizes, [selected], FOCUS_TRACE, "#111111", 3))

    axis = {"visible": False, "zeroline": False, "showgrid": False}
    xaxis = {**axis, "range": list(window[0])} if window else axis
    yaxis = {**axis, "range": list(window[1])} if window else axis
    legend_title = ("Schedule" if status.step is None else f"After step {status.step}") if status else "Kind"
    fig.update_layout(**base_layout(
        height=chart_height, xaxis=xaxis, yaxis=yaxis, dragmode="pan",
        hovermode="closest", clickmode="event+select", uirevision=uirevision,
        title={"text": plotly_text(title), "font": {"size": 13}, "x": 0.99, "xanchor": "right"} if title else None,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "xanchor": "left",
                "title": {"text": legend_title + ":"}, "itemsizing": "constant"}))
    return fig


def _colouring(view: GraphView, status: ViewStatus | None) -> tuple[list[str], list[str], np.ndarray, list[list[str]]]:
    """The colours' names and colours, each view node's colour (an index into them), and its status lines."""
    if status is not None:
        names = list(status.statuses)
        return (names, [STATUS_COLORS[s] for s in names], status.status,
                [_status_lines(status, k, node) for k, node in enumerate(view.nodes)])
    names = list(NODE_KINDS)
    return (names, [kind_color(k) for k in names],
            np.array([NODE_KINDS.index(v.kind) for v in view.nodes], dtype=np.int64), [[] for _ in view.nodes])


def _zoom_window(x: np.ndarray, y: np.ndarray, zoomed: np.ndarray):
    """The x and y ranges that show the ``zoomed`` nodes with some room around them (None: show everything)."""
    if not len(zoomed):
        return None
    low_x, high_x = float(x[zoomed].min()), float(x[zoomed].max())
    low_y, high_y = float(y[zoomed].min()), float(y[zoomed].max())
    half_width = max(ZOOM_HALF_WIDTH, (high_x - low_x) / 2 + 2)
    half_height = max(8.0, (high_y - low_y) / 2 + 2)
    centre_x, centre_y = (low_x + high_x) / 2, (low_y + high_y) / 2
    return (centre_x - half_width, centre_x + half_width), (centre_y - half_height, centre_y + half_height)


def _text_sides(x: np.ndarray, y: np.ndarray, names: Sequence[str], x_span: float, y_span: float,
                plot_height_px: float, first: Collection[int] = ()) -> np.ndarray:
    """Per node, where its name goes: 0 above, 1 below, -1 nowhere (no name, or it would overlap a name written).

    Each name is a box of text (:data:`_TEXT_HEIGHT_PX` high, :data:`CHAR_PX` per character) above its
    marker, or below when that overlaps a name already written; the nodes in ``first`` (those zoomed to)
    are placed before the rest, each set along rows from left to right. Pixels are estimated for a chart
    :data:`ASSUMED_WIDTH_PX` wide showing ``x_span`` layers and ``plot_height_px`` high showing ``y_span``
    rows: rows closer than two lines of text (a tall graph in a chart of bounded height, as when modules
    are opened) no longer take a name above and one below their neighbours' without a check.
    """
    side = np.full(len(names), -1, dtype=np.int64)
    px_x = ASSUMED_WIDTH_PX / max(x_span, 1e-9)
    px_y = plot_height_px / max(y_span, 1e-9)
    boxes = np.empty((len(names), 4))  # the names written so far (the first ``placed``): left, right, bottom, top
    placed = 0
    wanted = np.zeros(len(names), dtype=bool)
    wanted[list(first)] = True
    for k in np.lexsort((x, y, ~wanted)):
        if not names[k]:
            continue
        half = (CHAR_PX * len(names[k]) + 6) / 2
        centre_x, centre_y = float(x[k]) * px_x, float(y[k]) * px_y
        for s, offset in ((0, _TEXT_OFFSET_PX), (1, -_TEXT_OFFSET_PX)):
            box = (centre_x - half, centre_x + half, centre_y + offset - _TEXT_HEIGHT_PX / 2,
                   centre_y + offset + _TEXT_HEIGHT_PX / 2)
            written = boxes[:placed]
            if not np.any((written[:, 0] < box[1]) & (box[0] < written[:, 1]) & (written[:, 2] < box[3]) &
                          (box[2] < written[:, 3])):
                side[k] = s
                boxes[placed] = box
                placed += 1
                break
    return side


def _edges(view: GraphView, x: np.ndarray, y: np.ndarray, name: str, color: str, width: float,
           chosen: np.ndarray) -> go.Scattergl:
    """The chosen edges as one line trace, segments separated by gaps (NaN)."""
    ends = view.edges[chosen]
    xs = np.full(3 * len(ends), np.nan, dtype=np.float32)
    ys = np.full(3 * len(ends), np.nan, dtype=np.float32)
    xs[0::3], xs[1::3] = x[ends[:, 0]], x[ends[:, 1]]
    ys[0::3], ys[1::3] = y[ends[:, 0]], y[ends[:, 1]]
    return go.Scattergl(x=xs, y=ys, mode="lines", name=name, line={"color": color, "width": width},
                        hoverinfo="skip", showlegend=False, connectgaps=False)


def _ring(x: np.ndarray, y: np.ndarray, sizes: np.ndarray, members: Sequence[int], name: str, color: str,
          width: float) -> go.Scattergl:
    members = np.asarray(members, dtype=np.int64)
    return go.Scattergl(x=x[members], y=y[members], mode="markers", name=name, hoverinfo="skip", showlegend=False,
                        marker={"size": sizes[members] + 10, "color": "rgba(0,0,0,0)",
                                "line": {"color": color, "width": width}})


def clicked_index(point: Any) -> int | None:
    """The index a clicked point carries in its ``customdata`` (a view node, a bag), read from a Streamlit
    selection point; None for a point without one (an edge, a name)."""
    data = point.get("customdata") if isinstance(point, dict) else None
    if isinstance(data, (list, tuple)):
        data = data[0] if data else None
    if isinstance(data, bool) or not isinstance(data, (int, float, np.integer, np.floating)):
        return None
    return int(data)
