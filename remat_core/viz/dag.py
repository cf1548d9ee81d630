"""A small DAG as a self-contained pyvis page (the Learn page's example), laid out like the graph view.

Big graphs are drawn by :mod:`remat_core.viz.graph_view` (WebGL, levels of detail); this page suits
a few dozen nodes with arrows and labels. The page embeds vis-network inline
(``cdn_resources="in_line"``) and pyvis's one remote stylesheet/script pair (bootstrap, used only by
menus this figure does not turn on) is removed, so the HTML works offline inside an iframe. Node
names come from user files: pyvis writes them into the page with Jinja's ``tojson`` (which escapes
``<``, ``>``, ``&`` and ``'``), and tooltips are plain text (vis-network sets them with ``innerText``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Mapping

from pyvis.network import Network

from ..analysis import GraphView, ViewNode, layered_layout
from .graph_view import node_facts, node_size, short_label
from .palette import DIMMED_COLOR, FONT_FAMILY, HIGHLIGHT_COLOR, kind_color

X_SPACING = 150
Y_SPACING = 80
LONG_EDGE_ROUNDNESS = 0.25
LABELS_UP_TO = 400
"""Views with more nodes are drawn without labels (names stay in the tooltips)."""

_REMOTE_TAG = re.compile(r"<(?:link|script)\b[^>]*\b(?:href|src)\s*=\s*[\"']https?://[^>]*>(?:\s*</script>)?",
                         re.IGNORECASE)
_EMPTY_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>")
_REMOTE_REFERENCE = re.compile(r"\b(?:href|src)\s*=\s*[\"']https?://", re.IGNORECASE)


def layered_positions(view: GraphView) -> dict[str, tuple[float, float]]:
    """x, y in pixels of every view node, from :func:`remat_core.analysis.layered_layout` (y grows downwards here)."""
    layout = layered_layout(view)
    return {node.id: (float(x) * X_SPACING, -float(y) * Y_SPACING)
            for node, x, y in zip(view.nodes, layout.x, layout.y)}


def node_tooltip(node: ViewNode) -> str:
    """Plain-text tooltip: the node's facts, one per line (see :func:`~remat_core.viz.graph_view.node_facts`)."""
    # pyvis switches to an innerHTML popup when any title contains "href"; a zero-width joiner
    # keeps every tooltip on vis-network's plain-text path.
    return "\n".join(node_facts(node)).replace("href", "hr\u200def")


def dag_html(view: GraphView, *, highlight: Collection[str] = (), colors: Mapping[str, str] | None = None,
             height_px: int = 620) -> str:
    """A self-contained HTML page drawing ``view`` with vis-network.

    Parameters
    ----------
    view : GraphView
    highlight : collection of str
        View node ids to emphasise (the others are dimmed): a selected bag's vertices, the tensors
        resident at a step.
    colors : mapping of str to str, optional
        Colour overrides per view node id (recomputed tensors, say); default: colour by kind.
    height_px : int
        Canvas height.

    Returns
    -------
    str
        The page; it references no remote resource.
    """
    positions = layered_positions(view)
    largest = max((n.mem for n in view.nodes), default=0)
    show_labels = len(view.nodes) <= LABELS_UP_TO
    emphasised = set(highlight)
    overrides = colors or {}
    net = Network(height=f"{height_px}px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff")
    for node in view.nodes:
        x, y = positions[node.id]
        color = overrides.get(node.id, kind_color(node.kind))
        if emphasised and node.id not in emphasised:
            color = DIMMED_COLOR
        border = HIGHLIGHT_COLOR if node.id in emphasised else color
        net.add_node(node.id, label=short_label(node.label, 28) if show_labels else " ", title=node_tooltip(node),
                     x=x, y=y, size=float(node_size(node.mem, largest, 8.0, 36.0)),
                     shape="square" if node.pinned else "dot",
                     color={"background": color, "border": border,
                            "highlight": {"background": color, "border": "#000000"}},
                     borderWidth=3 if node.id in emphasised else 1, physics=False)
    for u, v in view.edges.tolist():
        first, second = view.nodes[u].id, view.nodes[v].id
        net.add_edge(first, second, **_edge_shape(positions[first], positions[second]))
    net.set_options(json.dumps(_options()))
    html = net.generate_html()
    html = _EMPTY_HEADING.sub("", _REMOTE_TAG.sub("", html))
    remote = _REMOTE_REFERENCE.search(html)
    if remote:
        raise RuntimeError(f"pyvis output still references a remote resource near {html[remote.start():][:80]!r}; "
                           f"the DAG page must work offline")
    return html


def _edge_shape(start: tuple[float, float], end: tuple[float, float]) -> dict[str, Any]:
    """Straight between neighbouring levels; an arc over the levels it skips, so long edges (an
    activation read by its gradient, a parameter read by the backward pass) do not hide under
    the chain of short ones."""
    span = abs(end[0] - start[0]) / X_SPACING
    if span <= 1:
        return {}
    return {"smooth": {"enabled": True, "type": "curvedCW", "roundness": LONG_EDGE_ROUNDNESS}}


def _options() -> dict[str, Any]:
    return {"physics": {"enabled": False},
            "interaction": {"hover": True, "tooltipDelay": 80, "navigationButtons": False, "multiselect": True},
            "nodes": {"font": {"face": FONT_FAMILY, "size": 13, "color": "#333333"}},
            "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "color": {"color": "#a0a0a0",
                      "highlight": "#333333"}, "smooth": False, "width": 1},
            "layout": {"improvedLayout": False}}
