"""The one simulator: every rule, the measured figures, the lower bound."""

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import compute_graphs

from remat_core import (ComputeGraph, InvalidSchedule, Node, checkpoint_all_cost, checkpoint_all_peak,
                        memory_lower_bound, simulate)
from remat_core.graph.generators import random_dag, training_chain


@pytest.fixture
def g():
    # x (pinned, 10) -> a (100) -> b (20) -> c (5);  a -> c
    nodes = [Node("x", 10, 0, "input", True), Node("a", 100, 1.0), Node("b", 20, 2.0), Node("c", 5, 4.0)]
    return ComputeGraph(nodes, [("x", "a"), ("a", "b"), ("b", "c"), ("a", "c")])


def test_measures_peak_cost_and_timeline(g):
    ops = [("compute", "a"), ("compute", "b"), ("compute", "c"), ("free", "a"), ("free", "b")]
    r = simulate(g, ops)
    assert r.start_memory == 10
    assert r.memory == (110, 130, 135, 35, 15)
    assert r.peak == 135 and r.peak_step == 2
    assert r.cost == 7.0
    assert r.computes == 3 and r.recomputes == 0
    assert dict(r.compute_counts) == {"a": 1, "b": 1, "c": 1}


def test_recomputation_is_counted(g):
    ops = [("compute", "a"), ("compute", "b"), ("free", "a"), ("compute", "a"), ("compute", "c")]
    r = simulate(g, ops)
    assert r.compute_counts["a"] == 2 and r.recomputes == 1 and r.recomputed_nodes == ("a",)
    assert r.cost == 1 + 2 + 1 + 4
    assert r.summary() == {"valid": True, "peak": 135, "cost": 8.0, "computes": 4, "recomputes": 1}


def test_peak_counts_pinned_memory_only_schedule():
    g = ComputeGraph([Node("x", 10, 0, "input", True), Node("a", 0, 1.0)], [("x", "a")])
    r = simulate(g, [("compute", "a")])
    assert r.peak == 10 and r.peak_step == -1


def test_lifetimes_and_resident_sets(g):
    ops = [("compute", "a"), ("compute", "b"), ("free", "a"), ("compute", "a"), ("compute", "c"), ("free", "b")]
    r = simulate(g, ops)
    assert r.lifetimes == (("a", 0, 2, 1), ("b", 1, 5, 1), ("a", 3, None, 2), ("c", 4, None, 1))
    assert r.resident_after(g, -1) == ["x"]
    assert r.resident_after(g, 2) == ["x", "b"]
    assert r.resident_after(g, 5) == ["x", "a", "c"]


@pytest.mark.parametrize("ops, step, message", [
    ([("compute", "b")], 0, "predecessor(s) of 'b' not resident: 'a'"),
    ([("compute", "x")], 0, "'x' is pinned"),
    ([("free", "x")], 0, "'x' is pinned"),
    ([("compute", "a"), ("compute", "a")], 1, "already resident"),
    ([("free", "a")], 0, "not resident"),
    ([("compute", "a"), ("free", "a"), ("free", "a")], 2, "not resident"),
    ([("compute", "zz")], 0, "unknown node 'zz'"),
    ([("evict", "a")], 0, "unknown action 'evict'"),
    ([("compute", "a"), ("compute", "b")], 2, "output(s) never computed: 'c'"),
    ([], 0, "output(s) never computed"),
])
def test_every_rule_names_the_step(g, ops, step, message):
    with pytest.raises(InvalidSchedule) as info:
        simulate(g, ops)
    assert info.value.step == step
    assert message in info.value.reason
    assert f"step {step}" in str(info.value) or "end of schedule" in str(info.value)


def test_budget_violation_is_reported_where_it_happens(g):
    ops = [("compute", "a"), ("compute", "b"), ("compute", "c")]
    with pytest.raises(InvalidSchedule) as info:
        simulate(g, ops, budget=120)
    assert info.value.step == 1 and "exceeds the budget" in info.value.reason
    assert simulate(g, ops, budget=135).peak == 135


def test_output_may_be_freed_after_computation(g):
    ops = [("compute", "a"), ("compute", "b"), ("compute", "c"), ("free", "c"), ("free", "b"), ("free", "a")]
    assert simulate(g, ops).memory[-1] == 10


def test_lower_bound_and_checkpoint_all(g):
    # computing c needs x + a + b + c = 10 + 100 + 20 + 5
    assert memory_lower_bound(g) == 135
    assert checkpoint_all_peak(g) == 135
    assert checkpoint_all_cost(g) == 7.0


def test_lower_bound_ignores_nodes_no_output_needs():
    nodes = [Node("x", 1, 0, "input", True), Node("a", 1, 1), Node("huge", 10**9, 1), Node("b", 1, 1)]
    g = ComputeGraph(nodes, [("x", "a"), ("a", "huge"), ("a", "b")], outputs=["b"])
    assert memory_lower_bound(g) == 3
    assert checkpoint_all_peak(g) == 3
    assert checkpoint_all_cost(g) == 2


def test_checkpoint_all_on_training_chain():
    g = training_chain(6, mem=1)
    # the peak is reached when the loss is computed: the pinned input, the six activations and the
    # loss; f6 is freed right after (only the loss reads it), so each gradient then takes its place
    assert checkpoint_all_peak(g) == 1 + 6 + 1
    assert memory_lower_bound(g) == 1 + 3  # b_i with its two inputs, plus x


def resident_set_peak(graph: ComputeGraph) -> int:
    """Checkpoint-all's peak worked out from resident sets, without the simulator or its schedule.

    The nodes to compute are the outputs and their non-pinned ancestors (networkx), in the graph's
    topological order. Node u is resident from its own position to its last use: the position of its
    last reader among those nodes, or its own position when nothing computed reads it. When node k
    is computed, memory is the pinned bytes plus every u computed so far whose last use is at or
    after k; the peak is the largest of these (or the pinned bytes alone).
    """
    dag = graph.nx
    pinned = {n.id for n in graph.nodes if n.pinned}
    needed = set(graph.outputs).union(*(nx.ancestors(dag, o) for o in graph.outputs)) - pinned
    order = [v for v in graph.topological_order() if v in needed]
    position = {v: k for k, v in enumerate(order)}
    last_use = {v: max((position[w] for w in dag.successors(v) if w in needed), default=position[v]) for v in order}
    pinned_bytes = sum(graph.node(v).mem for v in pinned)
    at_compute = [sum(graph.node(u).mem for u in order[: k + 1] if last_use[u] >= k) for k in range(len(order))]
    return pinned_bytes + max(at_compute, default=0)


@st.composite
def generated_dags(draw) -> ComputeGraph:
    """:func:`remat_core.graph.generators.random_dag` over its parameters (sparse to dense, with or without inputs)."""
    return random_dag(draw(st.integers(1, 30)), edge_probability=draw(st.floats(0.0, 1.0)),
                      max_mem=draw(st.integers(1, 100)), pinned_inputs=draw(st.integers(0, 3)),
                      seed=draw(st.integers(0, 10**6)))


@given(st.one_of(generated_dags(), compute_graphs()))
def test_checkpoint_all_peak_equals_the_resident_set_peak(graph):
    """The simulator's checkpoint-all peak against an independent count (``compute_graphs`` adds
    zero-byte nodes and outputs that leave some nodes unneeded)."""
    assert checkpoint_all_peak(graph) == resident_set_peak(graph)


def test_resident_set_peak_by_hand(g):
    # x (10) stays; a (100) is read by b and c, b (20) by c: all three resident when c (5) is computed
    assert resident_set_peak(g) == 135
    assert resident_set_peak(training_chain(6, mem=1)) == 8
