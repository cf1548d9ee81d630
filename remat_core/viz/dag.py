"""The DAG as a self-contained pyvis page: left to right in topological order, coloured by kind.

The page embeds vis-network inline (``cdn_resources="in_line"``) and pyvis's one remote
stylesheet/script pair (bootstrap, used only by menus this figure does not turn on) is removed, so
the HTML works offline inside an iframe. Node names come from user files: pyvis writes them into
the page with Jinja's ``tojson`` (which escapes ``<``, ``>``, ``&`` and ``'``), tooltips are plain
text (vis-network sets them with ``innerText``), and the few values this module writes into
scripts itself go through :func:`script_json`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Collection, Mapping

from pyvis.network import Network

from ..analysis import GraphView, ViewNode
from ..graph import format_bytes
from .palette import DIMMED_COLOR, FONT_FAMILY, HIGHLIGHT_COLOR, kind_color

X_SPACING = 150
Y_SPACING = 80
LONG_EDGE_ROUNDNESS = 0.25
MAX_FIT_WIDTH = 40 * X_SPACING
"""Wider drawings open at :data:`START_SCALE` on their first (leftmost) levels instead of fitted."""
START_SCALE = 0.6
LABELS_UP_TO = 400
"""Views with more nodes are drawn without labels (names stay in the tooltips)."""

_REMOTE_TAG = re.compile(r"<(?:link|script)\b[^>]*\b(?:href|src)\s*=\s*[\"']https?://[^>]*>(?:\s*</script>)?",
                         re.IGNORECASE)
_EMPTY_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>")
_REMOTE_REFERENCE = re.compile(r"\b(?:href|src)\s*=\s*[\"']https?://", re.IGNORECASE)


def layered_positions(view: GraphView) -> dict[str, tuple[float, float]]:
    """x, y of every view node: x by topological level, y stacked within a level.

    Notes
    -----
    A computed node's level is the longest path to it over edges that go forward in topological
    order (a module view may have edges backwards between groups: they do not push levels). A
    pinned node (parameter, input) sits one level before its first reader, so parameters appear
    next to the layer that uses them, not in one tall column at the start. Within a level, pinned
    nodes come first, then nodes in topological order, centred on y = 0.
    """
    order = {n.id: n.order for n in view.nodes}
    pinned = {n.id for n in view.nodes if n.pinned}
    preds: dict[str, list[str]] = {n.id: [] for n in view.nodes}
    succs: dict[str, list[str]] = {n.id: [] for n in view.nodes}
    for u, v in view.edges:
        if order[u] < order[v]:
            preds[v].append(u)
            succs[u].append(v)
    level: dict[str, int] = {}
    for node in sorted(view.nodes, key=lambda n: n.order):
        if node.id in pinned:
            continue
        level[node.id] = max((level[u] + 1 for u in preds[node.id] if u in level), default=0)
    for node in view.nodes:
        if node.id in pinned:
            readers = [level[v] for v in succs[node.id] if v in level]
            level[node.id] = min(readers) - 1 if readers else 0
    columns: dict[int, list[ViewNode]] = {}
    for node in view.nodes:
        columns.setdefault(level[node.id], []).append(node)
    positions = {}
    for x, members in columns.items():
        members.sort(key=lambda n: (not n.pinned, n.order))
        top = -(len(members) - 1) / 2
        for k, node in enumerate(members):
            positions[node.id] = (x * X_SPACING, (top + k) * Y_SPACING)
    return positions


def node_tooltip(node: ViewNode) -> str:
    """Plain-text tooltip: name, op, shape, bytes, cost, module, kind (and group size)."""
    lines = [node.label]
    if node.label != node.id:
        lines.append(f"id: {node.id}")
    if node.op:
        lines.append(f"op: {node.op}")
    if node.shape is not None:
        lines.append(f"shape: {_shape_text(node.shape)}")
    lines.append(f"bytes: {format_bytes(node.mem)} ({node.mem:,})")
    lines.append(f"cost: {node.cost:.4g}")
    if node.module:
        lines.append(f"module: {node.module}")
    lines.append(f"kind: {node.kind}" + (" (pinned)" if node.pinned else ""))
    if len(node.members) > 1:
        lines.append(f"{len(node.members)} nodes in this group")
    # pyvis switches to an innerHTML popup when any title contains "href"; a zero-width joiner
    # keeps every tooltip on vis-network's plain-text path.
    return "\n".join(lines).replace("href", "hr\u200def")


def _shape_text(shape: Any) -> str:
    if isinstance(shape, tuple):
        return "(" + ", ".join(_shape_text(s) for s in shape) + ")"
    return str(shape)


def node_size(mem: int, largest: int) -> float:
    """Marker size: 8 px for an empty tensor to 36 px for the largest, by the square root of bytes."""
    return 8.0 + 28.0 * math.sqrt(mem / largest) if largest > 0 else 8.0


def script_json(value: Any) -> str:
    """JSON safe to place inside a ``<script>`` element (``<``, ``>``, ``&`` escaped as unicode)."""
    return (json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def dag_html(view: GraphView, *, highlight: Collection[str] = (), focus: str | None = None,
             colors: Mapping[str, str] | None = None, height_px: int = 620) -> str:
    """A self-contained HTML page drawing ``view`` with vis-network.

    Parameters
    ----------
    view : GraphView
    highlight : collection of str
        View node ids to emphasise (the others are dimmed): a selected bag's vertices, the tensors
        resident at a step.
    focus : str, optional
        A view node id to select and centre on (the node search). Without one, a drawing too
        long to fit legibly opens on its first levels (scroll to zoom out).
    colors : mapping of str to str, optional
        Colour overrides per view node id (recomputed tensors, say); default: colour by kind.
    height_px : int
        Canvas height.

    Returns
    -------
    str
        The page; it references no remote resource.

    Raises
    ------
    KeyError
        For a ``focus`` that is not in the view.
    """
    if focus is not None and focus not in {n.id for n in view.nodes}:
        raise KeyError(f"focus node {focus!r} is not in this view")
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
        net.add_node(node.id, label=_short_label(node.label) if show_labels else " ", title=node_tooltip(node),
                     x=x, y=y, size=node_size(node.mem, largest), shape="square" if node.pinned else "dot",
                     color={"background": color, "border": border,
                            "highlight": {"background": color, "border": "#000000"}},
                     borderWidth=3 if node.id in emphasised else 1, physics=False)
    for u, v in view.edges:
        net.add_edge(u, v, **_edge_shape(positions[u], positions[v]))
    net.set_options(json.dumps(_options()))
    html = net.generate_html()
    html = _EMPTY_HEADING.sub("", _REMOTE_TAG.sub("", html))
    if focus is not None:
        html = html.replace("</body>", f"<script>network.selectNodes([{script_json(focus)}]);"
                                       f"network.focus({script_json(focus)}, {{scale: 1.0}});</script></body>")
    elif _too_wide_to_fit(positions):
        left = min(x for x, _ in positions.values())
        html = html.replace("</body>", "<script>(function () { var scale = " + script_json(START_SCALE) + ";"
                            " var width = document.getElementById('mynetwork').clientWidth;"
                            " network.moveTo({position: {x: " + script_json(left) + " + width / (2 * scale) - 40,"
                            " y: 0}, scale: scale}); })();</script></body>")
    remote = _REMOTE_REFERENCE.search(html)
    if remote:
        raise RuntimeError(f"pyvis output still references a remote resource near {html[remote.start():][:80]!r}; "
                           f"the DAG page must work offline")
    return html


def _too_wide_to_fit(positions: Mapping[str, tuple[float, float]]) -> bool:
    """Whether fitting the whole drawing in view would shrink the nodes to dots (a long, flat graph)."""
    xs = [x for x, _ in positions.values()]
    ys = [y for _, y in positions.values()]
    return max(xs) - min(xs) > MAX_FIT_WIDTH and max(xs) - min(xs) > 6 * (max(ys) - min(ys) + Y_SPACING)


def _edge_shape(start: tuple[float, float], end: tuple[float, float]) -> dict[str, Any]:
    """Straight between neighbouring levels; an arc over the levels it skips, so long edges (an
    activation read by its gradient, a parameter read by the backward pass) do not hide under
    the chain of short ones."""
    span = abs(end[0] - start[0]) / X_SPACING
    if span <= 1:
        return {}
    return {"smooth": {"enabled": True, "type": "curvedCW", "roundness": LONG_EDGE_ROUNDNESS}}


def _short_label(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _options() -> dict[str, Any]:
    return {"physics": {"enabled": False},
            "interaction": {"hover": True, "tooltipDelay": 80, "navigationButtons": False, "multiselect": True},
            "nodes": {"font": {"face": FONT_FAMILY, "size": 13, "color": "#333333"}},
            "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "color": {"color": "#a0a0a0",
                      "highlight": "#333333"}, "smooth": False, "width": 1},
            "layout": {"improvedLayout": False}}
