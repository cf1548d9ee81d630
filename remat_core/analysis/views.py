"""What to draw of a graph: every node, one node per module group, or one node's neighbourhood.

A training graph of a real model has thousands of nodes; a browser cannot lay out and draw that
many and stay responsive. A :class:`GraphView` is the drawable summary the DAG figure takes:
- :func:`full_view`: every node (small graphs);
- :func:`module_view`: one node per (module path prefix, pass): the forward ops of ``layer3`` are one
  node, its backward ops another, its parameters a third, so the view still reads left to right;
- :func:`neighbourhood_view`: the nodes within a few edges of one node (any graph size).

Views are for drawing only: solvers always run on the full graph.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..graph import ComputeGraph
from .summary import module_prefix

MAX_DRAWN_NODES = 3000
"""More nodes than this are not drawn: the page offers a module view or a neighbourhood instead."""

_PASS_OF_KIND = {"input": "inputs", "param": "parameters", "buffer": "buffers", "forward": "forward",
                 "loss": "forward", "backward": "backward", "other": "other"}


@dataclass(frozen=True)
class ViewNode:
    """One drawn node: a graph node, or a group of them."""

    id: str
    label: str
    kind: str
    mem: int
    cost: float
    members: tuple[str, ...]
    order: int
    op: str | None = None
    shape: tuple | None = None
    module: str | None = None
    pinned: bool = False


@dataclass(frozen=True)
class GraphView:
    """A drawable view of a graph.

    Attributes
    ----------
    name : str
        The graph's name.
    level : str
        ``"op"``, ``"module"`` or ``"neighbourhood"``.
    nodes : tuple of ViewNode
    edges : tuple of (str, str)
        Between view node ids, without self-loops.
    member_of : mapping of str to str
        Graph node id -> the view node that holds it (only the nodes in the view).
    graph_nodes : int
        How many nodes the whole graph has.
    """

    name: str
    level: str
    nodes: tuple[ViewNode, ...]
    edges: tuple[tuple[str, str], ...]
    member_of: Mapping[str, str]
    graph_nodes: int

    def view_ids_of(self, graph_ids: Iterable[str]) -> set[str]:
        """The view nodes holding any of these graph nodes (those outside the view are ignored)."""
        return {self.member_of[i] for i in graph_ids if i in self.member_of}


def full_view(graph: ComputeGraph) -> GraphView:
    """Every node of ``graph``, as it is."""
    position = {i: p for p, i in enumerate(graph.topo_idx)}
    nodes = tuple(ViewNode(id=n.id, label=n.display_name, kind=n.kind, mem=n.mem, cost=n.cost, members=(n.id,),
                           order=position[i], op=n.op, shape=n.shape, module=n.module, pinned=n.pinned)
                  for i, n in enumerate(graph.nodes))
    return GraphView(graph.name, "op", nodes, tuple(graph.edges), {n.id: n.id for n in graph.nodes}, len(graph))


def module_view(graph: ComputeGraph, depth: int = 1) -> GraphView:
    """One node per (module prefix, pass): forward, backward, parameters, buffers, inputs.

    Parameters
    ----------
    graph : ComputeGraph
    depth : int
        Parts of the dotted module path that make a group (``layer3.1`` at 2).

    Returns
    -------
    GraphView
        A group's ``mem`` and ``cost`` are its members' totals; its kind is its members' most
        common kind; its ``order`` is its first member's topological position.
    """
    position = {i: p for p, i in enumerate(graph.topo_idx)}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, node in enumerate(graph.nodes):
        groups.setdefault((module_prefix(node.module, depth), _PASS_OF_KIND[node.kind]), []).append(i)
    member_of: dict[str, str] = {}
    nodes = []
    for (module, stage), members in groups.items():
        view_id = f"{module} [{stage}]"
        kinds = Counter(graph.nodes[i].kind for i in members)
        for i in members:
            member_of[graph.ids[i]] = view_id
        nodes.append(ViewNode(id=view_id, label=f"{module} · {stage}", kind=kinds.most_common(1)[0][0],
                              mem=sum(graph.mem[i] for i in members), cost=sum(graph.cost[i] for i in members),
                              members=tuple(graph.ids[i] for i in members),
                              order=min(position[i] for i in members), module=module,
                              pinned=all(graph.pinned[i] for i in members)))
    edges = dict.fromkeys((member_of[u], member_of[v]) for u, v in graph.edges if member_of[u] != member_of[v])
    return GraphView(graph.name, "module", tuple(sorted(nodes, key=lambda n: n.order)), tuple(edges), member_of,
                     len(graph))


def neighbourhood_view(graph: ComputeGraph, centre: str, hops: int = 2, limit: int = MAX_DRAWN_NODES) -> GraphView:
    """The nodes within ``hops`` edges of ``centre`` (either direction), nearest first, at most ``limit``.

    Raises
    ------
    GraphError
        For an id the graph does not have.
    """
    start = graph.index[graph.node(centre).id]
    distance = {start: 0}
    queue = deque([start])
    while queue and len(distance) < limit:
        i = queue.popleft()
        if distance[i] == hops:
            continue
        for j in (*graph.pred_idx[i], *graph.succ_idx[i]):
            if j not in distance and len(distance) < limit:
                distance[j] = distance[i] + 1
                queue.append(j)
    whole = full_view(graph)
    kept = {graph.ids[i] for i in distance}
    nodes = tuple(n for n in whole.nodes if n.id in kept)
    edges = tuple((u, v) for u, v in graph.edges if u in kept and v in kept)
    return GraphView(graph.name, "neighbourhood", nodes, edges, {i: i for i in kept}, len(graph))
