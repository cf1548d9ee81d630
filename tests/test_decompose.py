"""Tree and path decompositions: known widths, the three properties, separator trees, JSON, errors."""

import math

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs, structured_graphs, training_graphs

from remat_core import ComputeGraph, DecompositionError, Node
from remat_core.decompose import (EXACT_MAX_VERTICES, PATH_METHODS, TREE_HEURISTICS, Decomposition, decompose,
                                  path_decomposition, separator_tree, tree_decomposition, validate)
from remat_core.decompose._skeleton import skeleton
from remat_core.decompose.path import OrderingProfile, ordering_bags
from remat_core.graph.generators import cycle, grid, k_tree, random_dag, random_tree, series_parallel, training_chain


def every_decomposition(graph):
    for heuristic in ("min_degree", "min_fill"):
        yield tree_decomposition(graph, heuristic)
    for method in PATH_METHODS:
        yield path_decomposition(graph, method)


# -- exact treewidth equals the known width ---------------------------------------------------------

@pytest.mark.parametrize("n,seed", [(2, 0), (15, 1), (30, 2), (40, 3)])
def test_exact_treewidth_of_trees_is_one(n, seed):
    assert tree_decomposition(random_tree(n, seed=seed), "exact").width == 1


@pytest.mark.parametrize("n", [3, 4, 9, 40])
def test_exact_treewidth_of_cycles_is_two(n):
    assert tree_decomposition(cycle(n), "exact").width == 2


@pytest.mark.parametrize("k,n,seed", [(1, 12, 0), (2, 20, 1), (3, 25, 2), (4, 30, 3), (6, 40, 4)])
def test_exact_treewidth_of_k_trees_is_k(k, n, seed):
    d = tree_decomposition(k_tree(n, k, seed=seed), "exact")
    assert d.width == k and d.info["treewidth"] == k


@pytest.mark.parametrize("rows,cols", [(2, 2), (2, 7), (3, 3), (3, 6), (4, 4), (4, 5), (5, 5)])
def test_exact_treewidth_of_grids_is_min_side(rows, cols):
    assert tree_decomposition(grid(rows, cols), "exact").width == min(rows, cols)


def test_exact_treewidth_of_a_clique():
    nodes = [Node(f"q{i}", 1, 1.0) for i in range(7)]
    edges = [(f"q{i}", f"q{j}") for j in range(7) for i in range(j)]
    assert tree_decomposition(ComputeGraph(nodes, edges), "exact").width == 6


@settings(max_examples=25)
@given(compute_graphs(max_nodes=12))
def test_exact_is_at_most_every_heuristic_and_agrees_with_brute_force(graph):
    exact = tree_decomposition(graph, "exact")
    validate(exact, graph)
    for heuristic in ("min_degree", "min_fill"):
        assert exact.width <= tree_decomposition(graph, heuristic).width
    assert exact.width == _brute_force_treewidth(graph)


def _brute_force_treewidth(graph):
    """Treewidth by the subset recurrence TW(S) = min over v in S of max(TW(S - v), |Q(S - v, v)|).

    Q(S, v): vertices outside S + {v} that v reaches through S (its degree when eliminated after S).
    Exponential in the vertex count: tiny graphs only.
    """
    sk = skeleton(graph)
    n = len(sk)
    if n <= 1:
        return 0

    def q(eliminated, v):
        seen, stack, found = {v}, [v], set()
        while stack:
            for w in sk.neighbours[stack.pop()]:
                if w in seen:
                    continue
                seen.add(w)
                if eliminated >> w & 1:
                    stack.append(w)
                else:
                    found.add(w)
        return len(found)

    best = {0: -1}
    for mask in range(1, 1 << n):
        best[mask] = min(max(best[mask & ~(1 << v)], q(mask & ~(1 << v), v))
                         for v in range(n) if mask >> v & 1)
    return best[(1 << n) - 1]


def test_exact_refuses_large_graphs_and_names_the_alternatives():
    with pytest.raises(DecompositionError, match=rf"limited to {EXACT_MAX_VERTICES}.*min_fill"):
        tree_decomposition(training_chain(30), "exact")


def test_pinned_nodes_are_left_out():
    g = training_chain(6)
    for d in every_decomposition(g):
        assert all("x" not in bag for bag in d.bags)
        assert sum(len(b) > 0 for b in d.bags) == len(d)


# -- path decompositions -------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 5, 20, 100, 400])
def test_a_chain_training_graph_gets_constant_path_width(n):
    d = path_decomposition(training_chain(n))
    validate(d, training_chain(n))
    assert d.width == 2  # a ladder: forward and backward interleave


def test_path_width_is_not_the_topological_live_set():
    g = training_chain(200)
    topo_live = max(_live_sets_along_topological_order(g))
    assert topo_live > 150 and path_decomposition(g).width <= 2


def _live_sets_along_topological_order(graph):
    order = [i for i in graph.topo_idx if not graph.pinned[i]]
    position = {v: p for p, v in enumerate(order)}
    last = {v: max([position[v]] + [position[s] for s in graph.succ_idx[v]]) for v in order}
    return [sum(1 for u in order[: p + 1] if last[u] >= p) for p in range(len(order))]


@pytest.mark.parametrize("rows,cols", [(2, 9), (3, 5), (4, 4), (4, 7)])
def test_path_width_of_small_grids_is_min_side(rows, cols):
    assert path_decomposition(grid(rows, cols)).width == min(rows, cols)


@pytest.mark.parametrize("k,n,seed", [(2, 60, 0), (3, 120, 1), (4, 200, 2)])
def test_from_tree_width_meets_its_bound(k, n, seed):
    g = k_tree(n, k, seed=seed)
    tree = tree_decomposition(g)
    path = path_decomposition(g, "from_tree", local_search_moves=0)
    bound = (tree.width + 1) * (math.floor(math.log2(len(tree))) + 1) - 1
    assert tree.width == k and path.width <= bound


@settings(max_examples=30)
@given(structured_graphs())
def test_path_width_is_at_least_the_treewidth(graph):
    exact = tree_decomposition(graph, "exact").width
    for method in PATH_METHODS:
        assert path_decomposition(graph, method).width >= exact


def test_ordering_profile_matches_the_bags():
    g = random_dag(30, 0.2, seed=4)
    sk = skeleton(g)
    order = list(range(len(sk)))[::-1]
    sizes = OrderingProfile(sk).sizes(order)
    assert [len(b) for b in ordering_bags(sk, order)] == sizes.tolist()


def test_best_is_no_wider_than_either_method():
    g = series_parallel(150, seed=3)
    best = path_decomposition(g, "best")
    assert best.width <= min(path_decomposition(g, m).width for m in ("vertex_separation", "from_tree"))
    assert set(best.info["candidate_widths"]) == {"vertex_separation", "from_tree"}


# -- the three properties ------------------------------------------------------------------------------

@given(compute_graphs(max_nodes=18))
def test_every_decomposition_passes_validate_on_random_dags(graph):
    for d in every_decomposition(graph):
        validate(d, graph)
        assert d.seconds >= 0 and d.width >= 0


@given(structured_graphs())
def test_every_decomposition_passes_validate_on_structured_graphs(graph):
    for d in every_decomposition(graph):
        validate(d, graph)


@given(training_graphs())
def test_every_decomposition_passes_validate_on_training_graphs(graph):
    for d in every_decomposition(graph):
        validate(d, graph)


@pytest.mark.parametrize("g", [random_dag(300, 0.02, seed=1), k_tree(500, 5, seed=2), grid(12, 30)],
                         ids=lambda g: g.name)
def test_validate_passes_on_larger_graphs(g):
    for d in every_decomposition(g):
        validate(d, g)


def _decomposition(bags, edges, kind="tree"):
    return Decomposition(kind, tuple(tuple(b) for b in bags), tuple(edges), "hand", 0.0)


def test_validate_names_each_broken_property():
    g = cycle(4)  # c0-c1-c2-c3-c0
    good = _decomposition([["c0", "c1", "c2"], ["c0", "c2", "c3"]], [(0, 1)])
    validate(good, g)
    with pytest.raises(DecompositionError, match="property 1.*'c3'"):
        validate(_decomposition([["c0", "c1", "c2"]], []), g)
    with pytest.raises(DecompositionError, match="property 2.*'c2' -> 'c3'"):
        validate(_decomposition([["c0", "c1", "c2"], ["c0", "c3"]], [(0, 1)]), g)
    with pytest.raises(DecompositionError, match="property 3.*'c0'"):
        validate(_decomposition([["c0", "c1"], ["c1", "c2", "c3"], ["c0", "c3"]], [(0, 1), (1, 2)]), g)
    with pytest.raises(DecompositionError, match="tree"):
        validate(_decomposition([["c0", "c1", "c2"], ["c0", "c2", "c3"]], []), g)
    with pytest.raises(DecompositionError, match="cycle"):
        validate(_decomposition([["c0", "c1", "c2"], ["c0", "c2", "c3"], ["c0"], ["c1"]], [(0, 1), (1, 2), (2, 0)]), g)
    with pytest.raises(DecompositionError, match="consecutive"):
        validate(_decomposition([["c0", "c1", "c2"], ["c0", "c2", "c3"], ["c0"]], [(0, 2), (1, 2)], "path"), g)
    with pytest.raises(DecompositionError, match="no node of graph"):
        validate(_decomposition([["c0", "zz"]], []), g)


def test_validate_refuses_pinned_nodes_in_bags():
    g = training_chain(2)
    with pytest.raises(DecompositionError, match="pinned node 'x'"):
        validate(_decomposition([["x", "f1", "f2", "loss", "b2", "b1"]], []), g)


# -- separator trees -----------------------------------------------------------------------------------

@given(structured_graphs(max_nodes=40))
def test_separator_trees_are_balanced(graph):
    for d in every_decomposition(graph):
        tree = separator_tree(d)
        n = len(d)
        assert tree.height <= math.floor(math.log2(n))
        assert sorted(b for b in range(n) if tree.parent[b] < 0) == [tree.root]
        assert sum(len(c) for c in tree.children) == n - 1
        _check_pieces_are_connected_and_at_most_half(d, tree)


def _check_pieces_are_connected_and_at_most_half(d, tree):
    t = nx.Graph()
    t.add_nodes_from(range(len(d)))
    t.add_edges_from(d.edges)

    def below(b):
        out, stack = [], [b]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(tree.children[x])
        return out

    for b in range(len(d)):
        for c in tree.children[b]:
            piece = below(c)
            assert nx.is_connected(t.subgraph(piece))
            assert len(piece) <= len(below(b)) // 2


def test_path_separator_tree_starts_at_the_middle_bag():
    d = path_decomposition(training_chain(40))
    tree = separator_tree(d)
    assert tree.root == (len(d) - 1) // 2
    assert tree.to_json()["height"] == tree.height


# -- JSON, front door, errors, caching ---------------------------------------------------------------

@pytest.mark.parametrize("kind", ["tree", "path"])
def test_json_round_trip(kind):
    g = series_parallel(30, seed=1)
    d = decompose(g, kind)
    doc = d.to_json(separator_tree(d))
    assert doc["width"] == d.width and doc["kind"] == kind and len(doc["bags"]) == len(d)
    assert doc["separator_tree"]["root"] == separator_tree(d).root
    assert Decomposition.from_json(doc) == d


@pytest.mark.parametrize("doc,match", [
    ([], "JSON object"),
    ({"format": "remat-graph", "version": 1}, "not a remat-decomposition"),
    ({"format": "remat-decomposition", "version": 1, "kind": "tree", "bags": [[1]]}, "lists of node ids"),
    ({"format": "remat-decomposition", "version": 1, "kind": "tree", "bags": [], "edges": [[0]]}, "pairs"),
    ({"format": "remat-decomposition", "version": 1, "kind": "blob", "bags": []}, "unknown decomposition kind"),
])
def test_bad_json_is_refused(doc, match):
    with pytest.raises(DecompositionError, match=match):
        Decomposition.from_json(doc)


def test_unknown_methods_are_refused():
    g = cycle(5)
    with pytest.raises(DecompositionError, match="min_degree, min_fill, exact"):
        tree_decomposition(g, "greedy")
    with pytest.raises(DecompositionError, match="best, vertex_separation, from_tree"):
        path_decomposition(g, "live_sets")
    with pytest.raises(DecompositionError, match="kind"):
        decompose(g, "forest")
    with pytest.raises(DecompositionError, match="local_search_moves"):
        path_decomposition(g, local_search_moves=-1)
    assert set(TREE_HEURISTICS) == {"min_degree", "min_fill", "exact"}


def test_decompositions_are_cached_on_the_graph():
    g = k_tree(50, 3)
    assert tree_decomposition(g) is tree_decomposition(g)
    assert path_decomposition(g) is path_decomposition(g)


@settings(max_examples=10)
@given(st.integers(0, 50))
def test_path_decomposition_is_deterministic_for_a_seed(seed):
    g = series_parallel(40, seed=seed)
    a = path_decomposition(g, seed=seed)
    b = path_decomposition(ComputeGraph(g.nodes, g.edges, g.outputs, name=g.name), seed=seed)
    assert a.bags == b.bags
