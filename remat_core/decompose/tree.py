"""Tree decompositions of a graph's skeleton: networkx's elimination heuristics, or an exact method.

``min_degree`` and ``min_fill`` are networkx's ``treewidth_min_degree`` / ``treewidth_min_fill_in``
(elimination orderings chosen greedily). ``exact`` is :func:`.exact.exact_tree_decomposition`, for
skeletons of at most :data:`.exact.EXACT_MAX_VERTICES` vertices. Every result is reduced: no bag is
a subset of a neighbouring bag, so the number of bags is at most the number of vertices.
"""

from __future__ import annotations

import time

from networkx.algorithms.approximation import treewidth_min_degree, treewidth_min_fill_in

from ..errors import DecompositionError
from ..graph import ComputeGraph
from ._skeleton import Skeleton, skeleton
from .exact import exact_tree_decomposition
from .model import Decomposition, bags_in_graph_order

TREE_HEURISTICS = ("min_degree", "min_fill", "exact")
"""The methods :func:`tree_decomposition` takes."""

_NETWORKX = {"min_degree": treewidth_min_degree, "min_fill": treewidth_min_fill_in}


def tree_decomposition(graph: ComputeGraph, heuristic: str = "min_degree") -> Decomposition:
    """A tree decomposition of ``graph``'s undirected skeleton, pinned nodes left out.

    Parameters
    ----------
    graph : ComputeGraph
    heuristic : {"min_degree", "min_fill", "exact"}
        ``min_degree`` is fastest (about linear); ``min_fill`` is often narrower and slower
        (quadratic-ish); ``exact`` finds the treewidth itself, for small skeletons only.

    Returns
    -------
    Decomposition
        ``kind="tree"``, reduced (no bag inside a neighbouring bag), with the width and the seconds
        the method took. Cached on the graph per heuristic.

    Raises
    ------
    DecompositionError
        For an unknown heuristic, or ``exact`` on a skeleton above its size limit or beyond its
        search budget (the message says which heuristic to use instead).

    Notes
    -----
    An elimination ordering ``v1 .. vn`` gives the bags ``{v_i} + N_i(v_i)`` (neighbours still
    present when v_i is eliminated, fill edges included); the width is the largest such degree.
    networkx connects each bag to one holding its neighbourhood, which is a tree decomposition.

    References
    ----------
    H. L. Bodlaender and A. M. C. A. Koster, "Treewidth computations I. Upper bounds",
    Information and Computation 208(3), 2010.
    """
    if heuristic not in TREE_HEURISTICS:
        raise DecompositionError(f"unknown tree decomposition heuristic {heuristic!r}; expected one of "
                                 f"{', '.join(TREE_HEURISTICS)}")
    return graph.memo(f"decompose.tree.{heuristic}", lambda: _tree_decomposition_impl(graph, heuristic))


def _tree_decomposition_impl(graph: ComputeGraph, heuristic: str) -> Decomposition:
    sk = skeleton(graph)
    started = time.perf_counter()
    if heuristic == "exact":
        local_bags, local_edges, info = exact_tree_decomposition(sk)
    else:
        local_bags, local_edges = _networkx_decomposition(sk, heuristic)
        info = {}
    local_bags, local_edges = reduce_tree(local_bags, local_edges)
    seconds = time.perf_counter() - started
    return Decomposition("tree", bags_in_graph_order(graph, sk.vertices, local_bags), tuple(local_edges), heuristic,
                         seconds, graph.name, info)


def _networkx_decomposition(sk: Skeleton, heuristic: str) -> tuple[list[frozenset[int]], list[tuple[int, int]]]:
    _, tree = _NETWORKX[heuristic](sk.to_networkx())
    bags = list(tree.nodes)
    position = {bag: i for i, bag in enumerate(bags)}
    return bags, [(position[a], position[b]) for a, b in tree.edges]


def reduce_tree(bags: list[frozenset[int]], edges: list[tuple[int, int]]) -> tuple[list[frozenset[int]],
                                                                                    list[tuple[int, int]]]:
    """Contract every tree edge whose one bag is a subset of the other, until none is left.

    The result is still a tree decomposition of the same width (contracting such an edge keeps
    every vertex's bags connected), and has at most as many bags as the graph has vertices.
    """
    adjacency: list[set[int]] = [set() for _ in bags]
    for a, b in edges:
        adjacency[a].add(b)
        adjacency[b].add(a)
    alive = [True] * len(bags)
    work = list(range(len(bags)))
    while work:
        a = work.pop()
        if not alive[a]:
            continue
        into = next((b for b in adjacency[a] if bags[a] <= bags[b]), None)
        if into is None:
            continue
        for c in adjacency[a]:
            if c != into:
                adjacency[c].discard(a)
                adjacency[c].add(into)
                adjacency[into].add(c)
                work.append(c)
        adjacency[into].discard(a)
        adjacency[a] = set()
        alive[a] = False
        work.append(into)
    keep = [i for i in range(len(bags)) if alive[i]]
    renumber = {old: new for new, old in enumerate(keep)}
    new_edges = sorted({(min(renumber[a], renumber[b]), max(renumber[a], renumber[b]))
                        for a in keep for b in adjacency[a]})
    return [bags[i] for i in keep], new_edges
