"""Where a model's memory goes: a bar chart of bytes per module, stacked by kind."""

from __future__ import annotations

import plotly.graph_objects as go

from ..analysis import memory_by_module
from ..graph import NODE_KINDS, ComputeGraph
from .palette import GRID, base_layout, kind_color, plotly_text, unit_for



def module_memory_figure(graph: ComputeGraph, depth: int = 1, top: int = 24, height: int | None = None) -> go.Figure:
    """Horizontal bars: bytes per module group (parameters, buffers, activations...), stacked by kind.

    Parameters
    ----------
    graph : ComputeGraph
    depth : int
        Parts of the dotted module path that make a group.
    top : int
        Show the ``top`` largest groups; the rest are summed into one bar.
    height : int, optional

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per kind present (named after the kind). A graph whose nodes carry no module
        paths has one group, ``(no module)``.
    """
    groups = memory_by_module(graph, depth)
    ranked = sorted(groups, key=lambda g: -sum(groups[g].values()))
    shown = ranked[:top]
    rest = ranked[top:]
    rows = {g: groups[g] for g in shown}
    if rest:
        merged: dict[str, int] = {}
        for g in rest:
            for kind, size in groups[g].items():
                merged[kind] = merged.get(kind, 0) + size
        rows[f"(other modules: {len(rest)})"] = merged
    largest = max((sum(v.values()) for v in rows.values()), default=1)
    unit = unit_for(largest)
    labels = [plotly_text(g) for g in rows]
    fig = go.Figure()
    for kind in NODE_KINDS:
        values = [rows[g].get(kind, 0) / unit.size for g in rows]
        if any(values):
            fig.add_trace(go.Bar(orientation="h", name=kind, y=labels, x=values, marker={"color": kind_color(kind)},
                                 hovertemplate=f"%{{y}}<br>{kind}: %{{x:.4g}} {unit.name}<extra></extra>"))
    fig.update_layout(**base_layout(
        height=height or max(240, 26 * len(rows) + 120), barmode="stack", legend={"traceorder": "normal",
                                                                                  "orientation": "h", "y": 1.02,
                                                                                  "yanchor": "bottom", "x": 0},
        xaxis={**GRID, "title": f"bytes ({unit.name})"},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(labels)), "automargin": True}))
    return fig
