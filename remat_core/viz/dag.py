"""One tensor's neighbourhood as a self-contained pyvis page: a physics view a person can drag apart.

The Why page draws it around the tensor being explained (:func:`remat_core.analysis.tensor_neighbourhood`:
its producers and consumers a few hops away, and what the schedule recomputes with it). A few dozen
nodes, laid out by vis-network's physics and then left still, so that a node dragged stays where it
is dropped: where a fixed layout of thousands of nodes (the Graph page's) would not let one look at
the knot around one tensor. The page embeds vis-network inline (``cdn_resources="in_line"``) and
pyvis's one remote stylesheet/script pair (bootstrap, for menus this figure does not turn on) is
removed, so the HTML works offline inside an iframe. Names come from user files: pyvis writes them
into the page with Jinja's ``tojson`` (which escapes ``<``, ``>``, ``&`` and ``'``), and tooltips are
plain text (vis-network sets them with ``innerText``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyvis.network import Network

from ..analysis import CONSUMER, PRODUCER, RECOMPUTED_WITH, TENSOR, Neighbourhood
from ..graph import ComputeGraph, format_bytes, node_labels
from .graph_view import node_size, short_label
from .palette import FONT_FAMILY, HIGHLIGHT_COLOR, KIND_COLORS, RECOMPUTE_COLOR

ROLE_COLORS = {TENSOR: HIGHLIGHT_COLOR, PRODUCER: KIND_COLORS["forward"], CONSUMER: KIND_COLORS["backward"],
               RECOMPUTED_WITH: RECOMPUTE_COLOR}
"""A node's fill by what it is to the tensor (the legend under the figure names them)."""
LABEL_CHARACTERS = 30

_REMOTE_TAG = re.compile(r"<(?:link|script)\b[^>]*\b(?:href|src)\s*=\s*[\"']https?://[^>]*>(?:\s*</script>)?",
                         re.IGNORECASE)
_EMPTY_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>")
_REMOTE_REFERENCE = re.compile(r"\b(?:href|src)\s*=\s*[\"']https?://", re.IGNORECASE)


def _tooltip(graph: ComputeGraph, hood: Neighbourhood, node_id: str, label: str) -> str:
    """Plain text: the name, what it is to the tensor, how often it is computed, its size and op."""
    node = graph.node(node_id)
    lines = [label, f"{hood.roles[node_id]} · computed {hood.computes[node_id]}×",
             f"{format_bytes(node.mem)} · {node.kind}" + (f" · {node.op}" if node.op else "")]
    # pyvis switches to an innerHTML popup when any title contains "href"; a zero-width joiner keeps
    # every tooltip on vis-network's plain-text path.
    return "\n".join(lines).replace("href", "hr\u200def")


def neighbourhood_html(graph: ComputeGraph, hood: Neighbourhood, height_px: int = 440) -> str:
    """A self-contained HTML page drawing ``hood``: the tensor ringed, nodes coloured by role (:data:`ROLE_COLORS`),
    sized by bytes, labelled by name, arrows from producer to reader; drag a node to move it.

    Returns
    -------
    str
        The page; it references no remote resource.
    """
    labels = node_labels(graph)
    largest = max((graph.node(n).mem for n in hood.nodes), default=0)
    net = Network(height=f"{height_px}px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff")
    for node_id in hood.nodes:
        role = hood.roles[node_id]
        color = ROLE_COLORS[role]
        net.add_node(node_id, label=short_label(labels[node_id], LABEL_CHARACTERS),
                     title=_tooltip(graph, hood, node_id, labels[node_id]),
                     size=float(node_size(graph.node(node_id).mem, largest, 8.0, 30.0)),
                     shape="star" if role == TENSOR else "dot",
                     color={"background": color, "border": "#000000" if hood.computes[node_id] > 1 else color,
                            "highlight": {"background": color, "border": "#000000"}},
                     borderWidth=3 if hood.computes[node_id] > 1 else 1)
    for u, v in hood.edges:
        net.add_edge(u, v)
    net.set_options(json.dumps(_options()))
    html = _EMPTY_HEADING.sub("", _REMOTE_TAG.sub("", net.generate_html()))
    remote = _REMOTE_REFERENCE.search(html)
    if remote:
        raise RuntimeError(f"pyvis output still references a remote resource near {html[remote.start():][:80]!r}; "
                           f"the neighbourhood page must work offline")
    return html


def _options() -> dict[str, Any]:
    """Physics until the layout settles (then still: a dragged node stays put), hover tooltips, arrows."""
    return {"physics": {"enabled": True, "solver": "forceAtlas2Based",
                        "forceAtlas2Based": {"gravitationalConstant": -60, "springLength": 110},
                        "stabilization": {"enabled": True, "iterations": 300, "fit": True}},
            "interaction": {"hover": True, "tooltipDelay": 80, "dragNodes": True, "navigationButtons": False},
            "nodes": {"font": {"face": FONT_FAMILY, "size": 13, "color": "#333333"}},
            "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "color": {"color": "#a0a0a0",
                      "highlight": "#333333"}, "smooth": {"enabled": True, "type": "continuous"}, "width": 1}}
