"""Generators of graphs with known structure."""

import math

import pytest

from remat_core.graph.generators import cycle, grid, k_tree, random_layered, random_tree, series_parallel


def test_sizes_and_edges():
    assert len(random_tree(20, seed=3).edges) == 19
    assert len(cycle(7).edges) == 7 and len(cycle(2).edges) == 1
    g = grid(3, 4)
    assert len(g) == 12 and len(g.edges) == 3 * 3 + 2 * 4 and g.outputs == ("g2_3",)
    k = k_tree(30, 4, seed=1)
    assert len(k.edges) == 4 * 5 // 2 + (30 - 5) * 4
    sp = series_parallel(25, seed=2)
    assert len(sp) == 25 and sp.outputs == ("t",)


def test_generators_are_deterministic_for_a_seed():
    assert k_tree(40, 3, seed=7).edges == k_tree(40, 3, seed=7).edges
    assert series_parallel(40, seed=7).edges == series_parallel(40, seed=7).edges


@pytest.mark.parametrize("call", [lambda: k_tree(3, 3), lambda: k_tree(10, 0), lambda: series_parallel(1),
                                  lambda: grid(0, 3), lambda: random_tree(0)])
def test_bad_sizes_are_refused(call):
    with pytest.raises(ValueError, match="needs"):
        call()


def layer(graph, node_id):
    return int(graph.node(node_id).label.split()[1])


@pytest.mark.parametrize("n, seed", [(3, 0), (40, 1), (250, 2)])
@pytest.mark.parametrize("order", ["depth-first", "layers"])
def test_random_layered_has_one_source_one_sink_and_layered_edges(n, seed, order):
    g = random_layered(n, seed=seed, order=order)
    assert len(g) == n and not any(g.pinned)
    sources = [v for v in g.ids if not g.preds(v)]
    sinks = [v for v in g.ids if not g.succs(v)]
    assert len(sources) == 1 and layer(g, sources[0]) == 0
    assert sinks == list(g.outputs) and layer(g, sinks[0]) == max(layer(g, v) for v in g.ids)
    assert all(layer(g, u) < layer(g, v) for u, v in g.edges)
    assert g.ids == g.topological_order()  # ids number the nodes in the order checkpoint-all runs
    if order == "layers":
        assert [layer(g, v) for v in g.ids] == sorted(layer(g, v) for v in g.ids)


def test_random_layered_follows_moccasins_parameters():
    g = random_layered(500, width=0.36, seed=3)
    depth = max(layer(g, v) for v in g.ids)
    assert abs(depth - 1 - math.ceil(math.sqrt(500 * (1 / 0.36 - 1)))) <= 8  # about L = ceil(sqrt(n (1/W - 1))) layers
    skips = [(u, v) for u, v in g.edges if layer(g, v) - layer(g, u) >= 2]
    assert 0.05 < len(skips) / len(g.edges) <= 0.14 + 1e-9  # duplicates merged: at most scd of the edges
    assert g.name == "random_layered_n500_w0.36_nlv0.75_ed0.2_scd0.14_s3"
    assert all(n.mem % 10 == 0 and 10 <= n.mem <= 6200 for n in g.nodes)
    assert all(1 <= n.cost <= 1000 for n in g.nodes if g.preds(n.id) and g.succs(n.id))
    assert random_layered(500, width=0.36, seed=3).edges == g.edges
    assert random_layered(500, width=0.36, seed=4).edges != g.edges
    no_skips = random_layered(200, width=0.3, skip_density=0.0, seed=1)
    assert all(layer(no_skips, v) - layer(no_skips, u) == 1 for u, v in no_skips.edges)


@pytest.mark.parametrize("kwargs, message", [
    ({"n": 2}, "n >= 3"), ({"n": 50, "width": 1.5}, "width must be a number in"),
    ({"n": 50, "edge_density": -0.1}, "edge_density must be"), ({"n": 50, "skip_density": 1.0}, "skip_density must be"),
    ({"n": 50, "layer_variance": 1}, "layer_variance must be"), ({"n": 50, "order": "random"}, "order must be one of"),
])
def test_random_layered_refuses_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_layered(**kwargs)
