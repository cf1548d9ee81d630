"""One module of a model as a graph of its own: what the Learn page steps through on the user's model.

:func:`module_subgraph` keeps the nodes computed inside a module path (forward and backward), turns
the tensors they read from the rest of the model into pinned inputs (the rest of the model holds
them while the module runs), and makes outputs of the kept tensors the rest of the model reads.
Ids, labels, sizes and costs are kept, so names read as they do on the whole model.
"""

from __future__ import annotations

from ..errors import GraphError
from ..graph import ComputeGraph, Node
from ..graph.labels import short_name
from .summary import in_module


def module_subgraph(graph: ComputeGraph, module: str) -> ComputeGraph:
    """The part of ``graph`` computed in ``module`` (or a module inside it), as a graph of its own.

    Parameters
    ----------
    graph : ComputeGraph
    module : str
        A module path (``layer1.0``), as in the nodes' ``module`` field.

    Returns
    -------
    ComputeGraph
        Named ``<graph> · <module>``. Kept nodes are the computed (not pinned) nodes of the module
        and the pinned nodes only they read. A tensor they read from elsewhere becomes a pinned
        node of kind ``input`` with its id, size and module; pinned nodes stay as they are.
        Outputs: kept nodes read outside the module, and the graph's outputs among them.

    Raises
    ------
    GraphError
        When no computed node belongs to ``module`` (the message names some modules that do).
    """
    inside = [n for n in graph.nodes if not n.pinned and in_module(n.module, module)]
    if not inside:
        known = sorted({n.module for n in graph.nodes if n.module and not n.pinned})[:6]
        raise GraphError(f"graph '{graph.name}' computes nothing in module '{module}'; modules with computed "
                         f"nodes include {', '.join(known) or 'none (this graph has no module paths)'}")
    kept = {n.id for n in inside}
    boundary: dict[str, Node] = {}
    for node in inside:
        for p in graph.preds(node.id):
            if p not in kept and p not in boundary:
                source = graph.node(p)
                boundary[p] = source if source.pinned else Node(
                    p, source.mem, 0.0, "input", True, shape=source.shape, dtype=source.dtype, module=source.module,
                    label=short_name(source))
    outputs = [n.id for n in inside
               if n.id in graph.outputs or any(s not in kept for s in graph.succs(n.id))]
    nodes = [boundary[n.id] if n.id in boundary else n for n in graph.nodes if n.id in kept or n.id in boundary]
    edges = [(u, v) for u, v in graph.edges if v in kept and (u in kept or u in boundary)]
    return ComputeGraph(nodes, edges, outputs=outputs or [inside[-1].id], name=f"{graph.name} · {module}")
