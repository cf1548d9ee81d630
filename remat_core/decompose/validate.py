"""The checker: does a decomposition really decompose the graph's skeleton?"""

from __future__ import annotations

from ..errors import DecompositionError
from ..graph import ComputeGraph
from .model import Decomposition


def validate(decomposition: Decomposition, graph: ComputeGraph) -> None:
    """Check the three properties of a tree (or path) decomposition of ``graph``'s skeleton.

    1. Every non-pinned node is in some bag (and no bag holds a pinned or unknown node).
    2. Every edge between two non-pinned nodes has both ends in some bag.
    3. The bags holding any one node form a connected subtree (for a path: a contiguous run).

    The bag structure itself must be a tree on the bags (a path ``0 - 1 - ... - N-1`` for
    ``kind="path"``).

    Raises
    ------
    DecompositionError
        Naming the first property broken and the node, edge or bags involved.
    """
    bags = decomposition.bag_indices(graph)
    _check_structure(decomposition)
    pinned, ids = graph.pinned, graph.ids
    holders: list[list[int]] = [[] for _ in range(len(graph))]
    for b, bag in enumerate(bags):
        if len(set(bag)) != len(bag):
            raise DecompositionError(f"bag {b} lists a node twice")
        for v in bag:
            if pinned[v]:
                raise DecompositionError(f"bag {b} holds pinned node '{ids[v]}'; decompositions leave pinned nodes out")
            holders[v].append(b)
    for v in range(len(graph)):
        if not pinned[v] and not holders[v]:
            raise DecompositionError(f"property 1 (every vertex in a bag) fails: node '{ids[v]}' is in no bag")
    bag_sets = [set(bag) for bag in bags]
    for v, preds in enumerate(graph.pred_idx):
        for u in preds:
            if pinned[u] or pinned[v]:
                continue
            fewer, other = (u, v) if len(holders[u]) <= len(holders[v]) else (v, u)
            if not any(other in bag_sets[b] for b in holders[fewer]):
                raise DecompositionError(f"property 2 (every edge in a bag) fails: no bag holds both ends of edge "
                                         f"'{ids[u]}' -> '{ids[v]}'")
    inside = [0] * len(graph)
    for a, b in decomposition.edges:
        for v in bag_sets[a] & bag_sets[b]:
            inside[v] += 1
    for v in range(len(graph)):
        if holders[v] and inside[v] != len(holders[v]) - 1:
            shape = "contiguous run" if decomposition.kind == "path" else "connected subtree"
            raise DecompositionError(f"property 3 (connectivity) fails: the bags holding '{ids[v]}' "
                                     f"({', '.join(map(str, holders[v][:8]))}{' ...' if len(holders[v]) > 8 else ''}) "
                                     f"do not form a {shape}")


def _check_structure(decomposition: Decomposition) -> None:
    n = len(decomposition.bags)
    edges = decomposition.edges
    for a, b in edges:
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise DecompositionError(f"tree edge ({a}, {b}) does not join two different bags among the {n} bags")
    if decomposition.kind == "path":
        if sorted(tuple(sorted(e)) for e in edges) != [(i, i + 1) for i in range(n - 1)]:
            raise DecompositionError("a path decomposition's edges must be exactly (i, i + 1) for consecutive bags")
        return
    if n and len(edges) != n - 1:
        raise DecompositionError(f"the bags must form a tree: {n} bags need {n - 1} edges, got {len(edges)}")
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            raise DecompositionError(f"the bags must form a tree, but edge ({a}, {b}) closes a cycle")
        parent[ra] = rb
