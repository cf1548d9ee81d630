"""Decompositions drawn: a tree decomposition as a tree of bags, a path decomposition as a strip.

The builders take plain data (bags as collections of node ids, tree edges as pairs of bag
indices) so that any decomposition can be drawn: the tree decomposition, the separator tree a
solver recurses on, a path decomposition. Bags are clickable in the explorer (``customdata`` holds
the bag index) and a selected bag is outlined.
"""

from __future__ import annotations

from collections import deque
from typing import Collection, Mapping, Sequence

import plotly.graph_objects as go

from .palette import GRID, HIGHLIGHT_COLOR, base_layout, plotly_text

BAG_COLOR = "#4e79a7"
WIDEST_COLOR = "#e15759"
MAX_LISTED = 12


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


def _bag_text(index: int, bag: Collection[str], labels: Mapping[str, str] | None) -> str:
    names = sorted(labels.get(v, v) if labels else v for v in bag)
    more = f", … {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    listed = ", ".join(names[:MAX_LISTED]) + more
    return plotly_text(f"bag {index} · {len(names)} vertices: {listed}")


def tree_of_bags_figure(bags: Sequence[Collection[str]], edges: Sequence[tuple[int, int]], *, root: int = 0,
                        labels: Mapping[str, str] | None = None, selected: int | None = None,
                        title: str | None = None, height: int | None = None, horizontal: bool = False) -> go.Figure:
    """A tree of bags: one marker per bag (size by bag size, the widest in red), lines for tree edges.

    Parameters
    ----------
    bags : sequence of collections of str
        Node ids per bag.
    edges : sequence of (int, int)
        Tree edges between bag indices.
    root : int
        The bag drawn at the top (a separator tree's root).
    labels : mapping, optional
        Node id -> display name, for the hover text.
    selected : int, optional
        A bag to outline.
    title : str, optional
    height : int, optional
        Pixels; default enough for the tree's breadth when drawn sideways (14 px per leaf,
        320 to 1400), else 420.
    horizontal : bool
        Root on the left and depth to the right (for the long, path-like tree decompositions of
        training graphs); default root on top (separator trees, which are shallow).

    Returns
    -------
    plotly.graph_objects.Figure
        Traces ``"tree edges"`` and ``"bags"`` (``customdata`` = bag index), and ``"selected bag"``
        when one is selected.
    """
    positions = tree_layout(len(bags), edges, root)
    if horizontal:
        positions = {b: (-y, x) for b, (x, y) in positions.items()}
    if height is None:
        leaves = max((y for _, y in positions.values()), default=0) + 1 if horizontal else 0
        height = min(max(320, 14 * int(leaves) + 60), 1400) if horizontal else 420
    widest = max((len(b) for b in bags), default=0)
    scale = 4 if len(bags) <= 60 else 2
    xs, ys = [], []
    for a, b in edges:
        xs += [positions[a][0], positions[b][0], None]
        ys += [positions[a][1], positions[b][1], None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="tree edges", line={"color": "#bbbbbb", "width": 1},
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(
        x=[positions[i][0] for i in range(len(bags))], y=[positions[i][1] for i in range(len(bags))],
        mode="markers+text" if len(bags) <= 40 else "markers", name="bags",
        text=[str(len(b)) for b in bags], textposition="middle center", textfont={"color": "white", "size": 10},
        customdata=list(range(len(bags))), hovertext=[_bag_text(i, b, labels) for i, b in enumerate(bags)],
        hoverinfo="text", showlegend=False,
        marker={"size": [8 + scale * min(len(b), 8) for b in bags], "line": {"width": 0},
                "color": [WIDEST_COLOR if len(b) == widest else BAG_COLOR for b in bags]}))
    if selected is not None and 0 <= selected < len(bags):
        x, y = positions[selected]
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name="selected bag", hoverinfo="skip",
                                 showlegend=False, marker={"size": 20 + scale * min(len(bags[selected]), 8),
                                                           "color": "rgba(0,0,0,0)",
                                                           "line": {"color": HIGHLIGHT_COLOR, "width": 4}}))
    fig.update_layout(**base_layout(
        height=height, title={"text": plotly_text(title), "font": {"size": 14}} if title else None,
        xaxis={"visible": False}, yaxis={"visible": False}, dragmode="pan", clickmode="event+select",
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10}))
    return fig


def path_strip_figure(bags: Sequence[Collection[str]], *, labels: Mapping[str, str] | None = None,
                      selected: int | None = None, title: str | None = None, height: int = 420) -> go.Figure:
    """A path decomposition as a strip: bags left to right, one row per vertex, a bar over its bags.

    In a valid path decomposition the bags holding a vertex are consecutive, so each row is one
    bar, from the first bag holding the vertex to the last; the number of bars crossing a column
    is that bag's size. Rows are ordered by first bag.

    Returns
    -------
    plotly.graph_objects.Figure
        Traces ``"vertices"`` (the bars) and ``"bag sizes"`` (bag sizes on the right axis,
        ``customdata`` = bag index); a selected bag is a highlighted column (a layout shape).
    """
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, bag in enumerate(bags):
        for v in bag:
            first.setdefault(v, i)
            last[v] = i
    rows = sorted(first, key=lambda v: (first[v], last[v], v))
    names = [plotly_text(labels.get(v, v) if labels else v) for v in rows]
    xs, ys, hover = [], [], []
    for v, name in zip(rows, names):
        xs += [first[v] - 0.4, last[v] + 0.4, None]
        ys += [name, name, None]
        hover += [f"{name}: bags {first[v]}–{last[v]}"] * 2 + [None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="vertices", line={"color": BAG_COLOR, "width": 6},
                             hovertext=hover, hoverinfo="text", showlegend=False))
    fig.add_trace(go.Scatter(x=list(range(len(bags))), y=[len(b) for b in bags], name="bag sizes", yaxis="y2",
                             mode="lines", line={"color": WIDEST_COLOR, "width": 1.5},
                             customdata=list(range(len(bags))),
                             hovertext=[_bag_text(i, b, labels) for i, b in enumerate(bags)], hoverinfo="text"))
    shapes = []
    if selected is not None and 0 <= selected < len(bags):
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": selected - 0.5, "x1": selected + 0.5,
                       "y0": 0, "y1": 1, "fillcolor": "rgba(255,191,0,0.25)", "line": {"color": HIGHLIGHT_COLOR}})
    fig.update_layout(**base_layout(
        height=height, shapes=shapes, title={"text": plotly_text(title), "font": {"size": 14}} if title else None,
        xaxis={**GRID, "title": "bag"},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(names)), "showticklabels": len(rows) <= 60,
               "title": "vertices", "automargin": True},
        yaxis2={"overlaying": "y", "side": "right", "title": "bag size", "rangemode": "tozero", "showgrid": False,
                "tickformat": "d", "dtick": max(1, max((len(b) for b in bags), default=1) // 6)}))
    return fig
