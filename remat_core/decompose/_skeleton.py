"""The undirected skeleton every decomposition is of: the graph's edges, pinned nodes left out.

Pinned nodes are resident for the whole schedule, so they never constrain the order in which the
other tensors live and die; dropping them is what keeps a training graph's width small (every layer
reads its parameters, and they would otherwise join every bag).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from ..graph import ComputeGraph


@dataclass(frozen=True)
class Skeleton:
    """The skeleton with its own dense numbering ``0 .. len(vertices) - 1``.

    Attributes
    ----------
    vertices : tuple of int
        Graph indices of the non-pinned nodes, in graph order; local vertex ``u`` is
        ``graph.nodes[vertices[u]]``.
    neighbours : tuple of tuple of int
        Local adjacency lists (sorted, no self loops, no duplicates).
    """

    vertices: tuple[int, ...]
    neighbours: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.vertices)

    @property
    def edge_count(self) -> int:
        """Number of undirected edges."""
        return sum(len(n) for n in self.neighbours) // 2

    def to_networkx(self) -> nx.Graph:
        """An undirected networkx graph on the local numbering."""
        g = nx.Graph()
        g.add_nodes_from(range(len(self.vertices)))
        g.add_edges_from((u, w) for u, nbrs in enumerate(self.neighbours) for w in nbrs if u < w)
        return g


def skeleton(graph: ComputeGraph) -> Skeleton:
    """The skeleton of ``graph`` (computed once per graph and cached on it)."""
    return graph.memo("decompose.skeleton", lambda: _build(graph))


def _build(graph: ComputeGraph) -> Skeleton:
    pinned = graph.pinned
    vertices = tuple(i for i in range(len(graph)) if not pinned[i])
    local = {g: u for u, g in enumerate(vertices)}
    adjacency: list[set[int]] = [set() for _ in vertices]
    for v, preds in enumerate(graph.pred_idx):
        if pinned[v]:
            continue
        lv = local[v]
        for p in preds:
            if not pinned[p]:
                lp = local[p]
                adjacency[lv].add(lp)
                adjacency[lp].add(lv)
    return Skeleton(vertices, tuple(tuple(sorted(a)) for a in adjacency))
