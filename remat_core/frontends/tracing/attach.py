"""A traced model attached to a graph that travelled without it (read from JSON, sent to a worker).

A graph's attachments (the model, its joint FX graph: :class:`~remat_core.graph.Attachments`) never travel
with its JSON. Tracing the model again gives them back; :func:`with_model_of` checks that the two are the
same graph before it puts them together. Torch-free: it compares nodes only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ...errors import ExecutionError
from ...graph import ComputeGraph


def with_model_of(graph: ComputeGraph, traced: ComputeGraph) -> ComputeGraph:
    """``graph`` with the model behind ``traced`` attached, once they are checked to be the same graph.

    A traced graph's model does not travel with its JSON (to another process, say); tracing the
    model again gives it back. Nodes, sizes, edges and outputs must agree; costs may differ
    (``measured`` costs are timings of one run), and execution does not read them.

    Parameters
    ----------
    graph : ComputeGraph
        The graph a schedule was made for (read from JSON, say).
    traced : ComputeGraph
        The same model traced again, with its attachments.

    Returns
    -------
    ComputeGraph
        ``traced`` itself when the two are identical, else ``graph``'s nodes with ``traced``'s attachments.

    Raises
    ------
    ExecutionError
        When ``traced`` has no model behind it, or is not the same graph.
    """
    if not traced.attachments.executable:
        raise ExecutionError(f"graph {traced.name!r} has no traced model to attach: trace it with remat_core.frontends.trace")
    if traced.content_hash == graph.content_hash:
        return traced
    if (what := structural_difference(graph, traced)) is not None:
        raise ExecutionError(f"the model traced again ({traced.name!r}) differs from graph {graph.name!r} in its "
                             f"{what}, so the schedule cannot be run on it; trace the model again in this process")
    return ComputeGraph(graph.nodes, graph.edges, graph.outputs, name=graph.name, attachments=traced.attachments)


def _aspects(graph: ComputeGraph) -> dict[str, Any]:
    """What a schedule of the graph depends on, by name: costs aside (measured costs are timings of one run)."""
    return {"node ids": graph.ids, "sizes": graph.mem, "pinned nodes": graph.pinned, "edges": graph.edges,
            "outputs": graph.outputs}


def structural_difference(graph: ComputeGraph, other: ComputeGraph) -> str | None:
    """What a schedule of ``graph`` depends on that ``other`` has otherwise (its node ids, sizes, pinned nodes,
    edges or outputs), in words; None when a schedule of one runs on the other."""
    theirs = _aspects(other)
    return next((what for what, mine in _aspects(graph).items() if mine != theirs[what]), None)


def structural_fingerprint(graph: ComputeGraph) -> dict[str, str]:
    """A digest of each thing :func:`structural_difference` compares, so that a saved plan can say which differs
    without keeping the graph."""
    return {what: hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16] for what, value in _aspects(graph).items()}
