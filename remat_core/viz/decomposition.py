"""Decompositions drawn to be read: bags named by their members, the widest bag marked.

The builders take plain data (bags as collections of node ids, tree edges as pairs of bag indices,
a separator tree's parents) and ``labels`` (node id -> the name people read, from
:func:`remat_core.graph.node_labels`), so that any decomposition can be drawn:

- :func:`tree_of_bags_figure`: a tree decomposition, one marker per bag (WebGL: thousands of bags);
- :func:`separator_tree_figure`: the separator tree a solver recurses on, as an icicle that opens
  :data:`SEPARATOR_LEVELS` levels at a time (click a bag to open the tree below it, the bar above
  to go back up): a tree of thousands of bags stays readable;
- :func:`path_strip_figure`: a path decomposition as a strip of bags over the graph's order.

A bag is named by its members (:func:`bag_label`: their common module path once, then their names,
cut short) with every name in its tooltip (:func:`bag_hover`). The widest bag (the first, when
several are as wide) is red and named in a note. Bags are clickable in the explorer (``customdata`` holds the bag index) and a selected bag
is outlined. Names come from files: every text goes through
:func:`~remat_core.viz.palette.plotly_text`.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Collection, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .graph_view import short_label
from .palette import GRID, HIGHLIGHT_COLOR, base_layout, plotly_text

BAG_COLOR = "#4e79a7"
WIDEST_COLOR = "#e15759"
MAX_LISTED = 40
"""A bag's tooltip lists this many names, then says how many more."""
BAG_LABEL_CHARS = 40
NAMED_UP_TO = 40
"""At most this many bags are named in place (spread over the figure); every bag is named in its tooltip."""
BARS_UP_TO = 300
"""A path strip with more bags draws their sizes as a line instead of bars."""
MARKERS_UP_TO = 2000
"""... with a marker per bag up to this many bags (SVG markers: more would slow the page down)."""
ROW_NAMES_UP_TO = 60
SEPARATOR_LEVELS = 4
SEPARATOR_BAGS_DRAWN = 400
"""The separator tree draws whole levels while it has at most this many bags (its top: what the recursion meets
first); a bag picked elsewhere is drawn with the tree below it."""
STRIP_TICKS = 10
"""The path strip names this many bags along its axis."""


def _names(bag: Collection[str], labels: Mapping[str, str] | None) -> list[str]:
    return [labels.get(v, v) if labels else v for v in bag]


def bag_label(bag: Collection[str], labels: Mapping[str, str] | None = None, limit: int = BAG_LABEL_CHARS) -> str:
    """A bag named by its members, cut to ``limit`` characters: ``layer1.0: conv1 · convolution (fwd), bn1 · …``.

    The dotted module path all members' names start with is written once, before a colon.
    """
    names = _names(bag, labels)
    if not names:
        return "(empty)"
    common = os.path.commonprefix(names) if len(names) > 1 else ""
    common = common[: common.rfind(".") + 1] if "." in common else ""
    if common:
        text = f"{common[:-1]}: " + ", ".join(n[len(common):] for n in names)
    else:
        text = ", ".join(names)
    return short_label(text, limit)


def bag_hover(index: int, bag: Collection[str], labels: Mapping[str, str] | None = None) -> str:
    """Tooltip of a bag: its index and size, then every member's name on a line (:data:`MAX_LISTED` at most)."""
    names = _names(bag, labels)
    lines = [plotly_text(n) for n in names[:MAX_LISTED]]
    if len(names) > MAX_LISTED:
        lines.append(f"… and {len(names) - MAX_LISTED} more")
    return f"<b>bag {index}</b> · {len(names)} vertices<br>" + "<br>".join(lines)


def _widest_note(bags: Sequence[Collection[str]], labels: Mapping[str, str] | None) -> tuple[int, str]:
    """The first widest bag and a note naming it and the width (largest bag size minus one)."""
    sizes = [len(b) for b in bags]
    widest = int(np.argmax(sizes)) if sizes else -1
    if widest < 0:
        return widest, "no bags"
    return widest, plotly_text(f"width {sizes[widest] - 1}: widest bag {widest} ({sizes[widest]} vertices), "
                               f"{bag_label(bags[widest], labels, 60)}")


def landmarks(positions: Sequence[tuple[float, float]], count: int = NAMED_UP_TO) -> list[int]:
    """Indices of at most ``count`` points spread evenly over the drawing (all of them when there are few):
    the bags named beside their markers, so every part of a big figure says what it holds."""
    if len(positions) <= count:
        return list(range(len(positions)))
    along = sorted(range(len(positions)), key=lambda i: positions[i])
    return [along[round(k * (len(along) - 1) / (count - 1))] for k in range(count)]


def tree_layout(n_bags: int, edges: Sequence[tuple[int, int]], root: int = 0) -> dict[int, tuple[float, float]]:
    """x, y of each bag of a tree (or forest): root at the top, leaves spread evenly below.

    Leaves take consecutive x positions in depth-first order and a parent sits above the middle of
    its children; y is minus the depth. Bags not reached from ``root`` start trees of their own,
    placed to the right.
    """
    neighbours: dict[int, list[int]] = {b: [] for b in range(n_bags)}
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    positions: dict[int, tuple[float, float]] = {}
    next_leaf = 0.0
    for start in [root] + [b for b in range(n_bags) if b != root]:
        if start in positions or not 0 <= start < n_bags:
            continue
        depth = {start: 0}
        parent = {start: -1}
        order = []
        queue = deque([start])
        while queue:
            b = queue.popleft()
            order.append(b)
            for c in neighbours[b]:
                if c not in depth:
                    depth[c], parent[c] = depth[b] + 1, b
                    queue.append(c)
        children: dict[int, list[int]] = {b: [] for b in order}
        for b in order[1:]:
            children[parent[b]].append(b)
        stack = [(start, False)]
        while stack:
            b, expanded = stack.pop()
            if not children[b]:
                positions[b] = (next_leaf, -depth[b])
                next_leaf += 1
            elif expanded:
                xs = [positions[c][0] for c in children[b]]
                positions[b] = ((min(xs) + max(xs)) / 2, -depth[b])
            else:
                stack.append((b, True))
                stack.extend((c, False) for c in reversed(children[b]))
    return positions


def tree_of_bags_figure(bags: Sequence[Collection[str]], edges: Sequence[tuple[int, int]], *, root: int = 0,
                        labels: Mapping[str, str] | None = None, selected: int | None = None,
                        height: int | None = None, horizontal: bool = False) -> go.Figure:
    """A tree of bags: one marker per bag (size by bag size, the widest in red), lines for tree edges.

    Parameters
    ----------
    bags : sequence of collections of str
        Node ids per bag.
    edges : sequence of (int, int)
        Tree edges between bag indices.
    root : int
        The bag drawn first (at the top, or on the left when ``horizontal``).
    labels : mapping, optional
        Node id -> name, for the bags' names.
    selected : int, optional
        A bag to outline.
    height : int, optional
        Pixels; default enough for the tree's breadth when drawn sideways (14 px per leaf,
        320 to 720), else 420.
    horizontal : bool
        Root on the left and depth to the right (for the long, path-like tree decompositions of
        training graphs); default root on top.

    Returns
    -------
    plotly.graph_objects.Figure
        Traces ``"tree edges"`` and ``"bags"`` (``customdata`` = bag index; every bag named beside its
        marker when there are at most :data:`NAMED_UP_TO`, else that many spread over the drawing),
        and ``"selected bag"`` when one is selected; a note names the widest bag.
    """
    positions = tree_layout(len(bags), edges, root)
    if horizontal:
        positions = {b: (-y, x) for b, (x, y) in positions.items()}
    if height is None:
        leaves = max((y for _, y in positions.values()), default=0) + 1 if horizontal else 0
        height = min(max(320, 14 * int(leaves) + 60), 720) if horizontal else 420
    sizes = [len(b) for b in bags]
    widest, note = _widest_note(bags, labels)
    scale = 4 if len(bags) <= 60 else 2
    xs = np.full(3 * len(edges), np.nan)
    ys = np.full(3 * len(edges), np.nan)
    for k, (a, b) in enumerate(edges):
        (xs[3 * k], ys[3 * k]), (xs[3 * k + 1], ys[3 * k + 1]) = positions[a], positions[b]
    named = set(landmarks([positions[i] for i in range(len(bags))], min(NAMED_UP_TO, height // 40))) | {widest}
    fig = go.Figure()
    fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", name="tree edges", line={"color": "#bbbbbb", "width": 1},
                               hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scattergl(
        x=[positions[i][0] for i in range(len(bags))], y=[positions[i][1] for i in range(len(bags))],
        mode="markers+text", name="bags",
        text=[bag_label(b, labels, 28) if i in named else "" for i, b in enumerate(bags)],  # WebGL text: no HTML
        textposition="middle right" if horizontal else "bottom center", textfont={"size": 10, "color": "#444444"},
        customdata=list(range(len(bags))), hovertext=[bag_hover(i, b, labels) for i, b in enumerate(bags)],
        hoverinfo="text", showlegend=False, unselected={"marker": {"opacity": 1}},
        marker={"size": [8 + scale * min(s, 8) for s in sizes], "line": {"width": 0},
                "color": [WIDEST_COLOR if i == widest else BAG_COLOR for i in range(len(bags))]}))
    if selected is not None and 0 <= selected < len(bags):
        x, y = positions[selected]
        fig.add_trace(go.Scattergl(x=[x], y=[y], mode="markers", name="selected bag", hoverinfo="skip",
                                   showlegend=False, marker={"size": 20 + scale * min(sizes[selected], 8),
                                                             "color": "rgba(0,0,0,0)",
                                                             "line": {"color": HIGHLIGHT_COLOR, "width": 4}}))
    annotations = []
    if widest >= 0:
        annotations.append({"x": positions[widest][0], "y": positions[widest][1], "text": note, "showarrow": True,
                            "arrowhead": 2, "ax": 30, "ay": -30, "font": {"color": WIDEST_COLOR, "size": 12},
                            "bgcolor": "rgba(255,255,255,0.85)"})
    fig.update_layout(**base_layout(
        height=height, xaxis={"visible": False}, yaxis={"visible": False}, dragmode="pan", clickmode="event+select",
        annotations=annotations, margin={"l": 10, "r": 10, "t": 10, "b": 10}))
    return fig


def separator_tree_figure(bags: Sequence[Collection[str]], parent: Sequence[int], *,
                          labels: Mapping[str, str] | None = None, selected: int | None = None,
                          top: int | None = None, levels: int = SEPARATOR_LEVELS,
                          max_bags: int = SEPARATOR_BAGS_DRAWN, height: int = 420) -> go.Figure:
    """A separator tree as an icicle: a separator on top, the separators of the pieces below it.

    Each bag is a box as wide as the vertices in its part of the tree, named by its members;
    ``levels`` levels show at once and clicking a bag opens the tree below it (the bar above goes
    back up). The tree is drawn from ``top`` (default: its root) down, whole levels at a time while
    at most ``max_bags`` bags are drawn (a box whose parts are left out says how many bags it still
    holds): a browser draws thousands of boxes slowly. The widest bag is red, a selected one amber.

    Parameters
    ----------
    bags : sequence of collections of str
    parent : sequence of int
        Per bag, its parent in the separator tree (-1 for the root).

    Returns
    -------
    plotly.graph_objects.Figure
        One ``icicle`` trace (``ids`` = bag indices as text, ``customdata`` = bag index); the title
        names the widest bag.
    """
    children: dict[int, list[int]] = {b: [] for b in range(len(bags))}
    for child, up in enumerate(parent):
        if up >= 0:
            children[up].append(child)
    start = top if top is not None and 0 <= top < len(bags) else next((b for b, up in enumerate(parent) if up < 0), 0)
    below = _subtree_sizes(bags, children, start)
    drawn = [start]
    level = [start]
    while level and len(drawn) + sum(len(children[b]) for b in level) <= max_bags:
        level = [c for b in level for c in children[b]]
        drawn += level
    shown = set(drawn)
    widest, note = _widest_note(bags, labels)
    hidden = {b: below[b][1] - 1 for b in drawn if children[b] and children[b][0] not in shown}
    fig = go.Figure(go.Icicle(
        ids=[str(b) for b in drawn], parents=["" if b == start else str(parent[b]) for b in drawn],
        labels=[plotly_text(bag_label(bags[b], labels, 60)) for b in drawn], values=[below[b][0] for b in drawn],
        branchvalues="total", maxdepth=levels, customdata=drawn,
        hovertext=[bag_hover(b, bags[b], labels) + (f"<br>… {hidden[b]} more bags below it" if b in hidden else "")
                   for b in drawn],
        hoverinfo="text", textinfo="label", tiling={"orientation": "v"}, root={"color": "white"},
        marker={"colors": [HIGHLIGHT_COLOR if b == selected else WIDEST_COLOR if b == widest else BAG_COLOR
                           for b in drawn], "line": {"color": "white", "width": 1}},
        name="separator tree"))
    fig.update_layout(**base_layout(height=height, margin={"l": 10, "r": 10, "t": 36, "b": 10},
                                    title={"text": note, "font": {"size": 13, "color": WIDEST_COLOR}}))
    return fig


def _subtree_sizes(bags: Sequence[Collection[str]], children: Mapping[int, Sequence[int]],
                   start: int) -> dict[int, tuple[int, int]]:
    """Per bag under ``start``: (vertices in the bags of its subtree, bags in its subtree)."""
    order = [start]
    for b in order:
        order.extend(children[b])
    totals: dict[int, tuple[int, int]] = {}
    for b in reversed(order):
        vertices, count = len(bags[b]), 1
        for c in children[b]:
            vertices, count = vertices + totals[c][0], count + totals[c][1]
        totals[b] = (vertices, count)
    return totals


def path_strip_figure(bags: Sequence[Collection[str]], *, labels: Mapping[str, str] | None = None,
                      order: Mapping[str, int] | None = None, selected: int | None = None,
                      height: int = 460) -> go.Figure:
    """A path decomposition as a strip of bags over the graph's order.

    On top, the strip: one bar per bag, left to right, as tall as the bag (the widest red, named
    in a note; bags named inside their bars when there are few, and :data:`STRIP_TICKS` of them
    along the axis). Below, one row per vertex at its
    position in the graph's order (``order``: node id -> position; default: first bag), a line over
    the bags that hold it: in a valid path decomposition those bags are consecutive, so the bags
    sweep over the graph as they go right, and the lines crossing a column are that bag.

    Returns
    -------
    plotly.graph_objects.Figure
        Traces ``"bag sizes"`` (``customdata`` = bag index) and ``"vertices"``; the widest bag (and a
        selected one) is a shaded column.
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, bag in enumerate(bags):
        for v in bag:
            first.setdefault(v, i)
            last[v] = i
    position = order if order is not None else {v: k for k, v in enumerate(sorted(first, key=first.get))}
    rows = sorted(first, key=lambda v: (position.get(v, 0), v))
    sizes = [len(b) for b in bags]
    widest, note = _widest_note(bags, labels)
    named = len(bags) <= NAMED_UP_TO
    hover = [bag_hover(i, b, labels) for i, b in enumerate(bags)]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.3, 0.7], vertical_spacing=0.04)
    colors = [WIDEST_COLOR if i == widest else BAG_COLOR for i in range(len(bags))]
    if len(bags) <= BARS_UP_TO:
        strip = go.Bar(x=list(range(len(bags))), y=sizes, marker={"color": colors}, name="bag sizes",
                       customdata=list(range(len(bags))), hovertext=hover, hoverinfo="text", showlegend=False,
                       text=[plotly_text(bag_label(b, labels, 30)) for b in bags] if named else None,
                       textposition="inside", insidetextanchor="start", textangle=-90, textfont={"size": 10})
    else:
        strip = go.Scatter(x=list(range(len(bags))), y=sizes, name="bag sizes",
                           mode="lines+markers" if len(bags) <= MARKERS_UP_TO else "lines",
                           line={"color": BAG_COLOR, "width": 1, "shape": "hv"},
                           marker={"color": colors, "size": 3}, customdata=list(range(len(bags))),
                           hovertext=hover, hoverinfo="text", showlegend=False)
    fig.add_trace(strip, row=1, col=1)
    xs = np.full(3 * len(rows), np.nan)
    ys = np.full(3 * len(rows), np.nan)
    xs[0::3] = [first[v] - 0.4 for v in rows]
    xs[1::3] = [last[v] + 0.4 for v in rows]
    ys[0::3] = ys[1::3] = [position.get(v, 0) for v in rows]
    names = [plotly_text(labels.get(v, v) if labels else v) for v in rows]
    vertex_hover = [f"{name}: bags {first[v]}–{last[v]}" for v, name in zip(rows, names)]
    # SVG, not WebGL: one path element however many vertices, and it draws inside a tab that opens later
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="vertices", line={"color": BAG_COLOR, "width": 3},
                               hovertext=[t for h in vertex_hover for t in (h, h, None)], hoverinfo="text",
                               showlegend=False), row=2, col=1)
    shapes = []
    for bag, color in ((widest, "rgba(225,87,89,0.15)"), (selected, "rgba(255,191,0,0.3)")):
        if bag is not None and 0 <= bag < len(bags):
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": bag - 0.5, "x1": bag + 0.5,
                           "y0": 0, "y1": 1, "fillcolor": color, "line": {"width": 0}, "layer": "below"})
    if selected is not None and 0 <= selected < len(bags):
        shapes[-1]["line"] = {"color": HIGHLIGHT_COLOR, "width": 2}
    fig.update_layout(**base_layout(
        height=height, shapes=shapes, bargap=0.1, dragmode="pan", clickmode="event+select",
        title={"text": note, "font": {"size": 13, "color": WIDEST_COLOR}}, margin={"l": 60, "r": 20, "t": 40,
                                                                                     "b": 40}))
    fig.update_yaxes(title_text="bag size", rangemode="tozero", row=1, col=1, **GRID)
    labelled = len(rows) <= ROW_NAMES_UP_TO
    fig.update_yaxes(title_text="graph order", autorange="reversed", row=2, col=1, **GRID,
                     tickmode="array" if labelled else "auto",
                     tickvals=[position.get(v, 0) for v in rows] if labelled else None,
                     ticktext=names if labelled else None)
    ticks = landmarks([(float(i), 0.0) for i in range(len(bags))], STRIP_TICKS)
    fig.update_xaxes(title_text="bag", row=2, col=1, tickmode="array", tickvals=ticks, tickangle=-30,
                     ticktext=[plotly_text(f"{i} · {bag_label(bags[i], labels, 22)}") for i in ticks], **GRID)
    return fig
