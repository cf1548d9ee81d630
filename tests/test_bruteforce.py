"""The brute-force optimum agrees with what we know by hand, and with checkpoint-all."""

import math

from hypothesis import given
from strategies import compute_graphs

from bruteforce import optimal_cost
from remat_core import ComputeGraph, Node, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound
from remat_core.graph.generators import training_chain


def test_chain_with_room_costs_each_node_once():
    g = training_chain(3)
    assert optimal_cost(g, checkpoint_all_peak(g)) == checkpoint_all_cost(g)


def test_tight_budget_forces_recomputation():
    # x -> a -> b -> c, and d reads a and c: keeping a alive costs memory, recomputing it costs 1.
    nodes = [Node("x", 0, 0, "input", True), Node("a", 10, 1), Node("b", 10, 1), Node("c", 10, 1), Node("d", 1, 1)]
    g = ComputeGraph(nodes, [("x", "a"), ("a", "b"), ("b", "c"), ("a", "d"), ("c", "d")])
    assert checkpoint_all_peak(g) == 30
    assert optimal_cost(g, 30) == 4
    assert optimal_cost(g, 29) == 5  # a, b and c do not fit together
    # with 21 bytes, a cannot stay beside b and c: compute a, b, free a, c, free b, recompute a, d
    assert optimal_cost(g, 21) == 5
    assert optimal_cost(g, 20) == math.inf


@given(compute_graphs(max_nodes=8))
def test_optimum_is_between_bounds(graph):
    peak = checkpoint_all_peak(graph)
    assert optimal_cost(graph, peak) <= checkpoint_all_cost(graph)
    assert optimal_cost(graph, peak) >= checkpoint_all_cost(graph) - 1e-9  # every needed node at least once
    assert optimal_cost(graph, memory_lower_bound(graph) - 1) == math.inf
