"""Generators of graphs with known structure."""

import pytest

from remat_core.graph.generators import cycle, grid, k_tree, random_tree, series_parallel


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
