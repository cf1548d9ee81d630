"""The recursion the Learn page steps through: a correct recursion, call by call, measured by the simulator."""

import pytest
from hypothesis import given, settings
from strategies import compute_graphs

from remat_core import GraphError, solve
from remat_core.analysis import (call_title, describe_call, module_subgraph, recursion_walk, walk_step_title,
                                 walkthrough_steps)
from remat_core.graph import node_labels, training_chain
from remat_core.graph.generators import residual_training_net, unet_training_graph
from remat_core.schedule import checkpoint_all_peak, simulate
from remat_core.solvers import find_solvers, trace_recursion

EXAMPLES = {"chain": training_chain(12, mem=4), "residual": residual_training_net(3, mem=4),
            "unet": unet_training_graph(2, mem=16)}

TRACED_SOLVERS = [spec.name for spec in find_solvers(traceable_recursion=True)]


def assert_correct_walk(graph, trace):
    """Every needed node computed; each call's subgraph, span and frame inside its parent's; steps cover
    every op once; the walk's final peak and cost are the simulator's."""
    walk = recursion_walk(graph, trace)
    needed = {graph.ids[i] for i in graph.needed_idx}
    counts = walk.schedule.simulation.compute_counts
    assert needed <= set(counts)
    calls = walk.calls
    if needed:
        assert calls[0].parent is None and set(calls[0].subgraph) == needed
    for call in calls:
        assert set(call.targets) <= set(call.subgraph)
        if call.parent is None:
            continue
        parent = calls[call.parent]
        assert set(call.subgraph) <= set(parent.subgraph)
        assert parent.first_op <= call.first_op <= call.end_op <= parent.end_op
        assert call.frame in trace.separators.children[parent.frame] and call.depth == parent.depth + 1
        assert call.index in parent.children
    for op, call in enumerate(trace.op_calls):
        assert calls[call].first_op <= op < calls[call].end_op
    assert [op for step in walk.steps for op in step.ops] == list(range(len(trace.schedule)))
    assert sorted(s.call for s in walk.steps if s.opens) == [c.index for c in calls]
    result = simulate(graph, trace.schedule)
    if walk.steps:
        assert walk.steps[-1].peak == result.peak == walk.schedule.stats["peak"]
        assert walk.steps[-1].cost == pytest.approx(result.cost)
    assert all(a.peak <= b.peak and a.cost <= b.cost for a, b in zip(walk.steps, walk.steps[1:]))
    for call, again in zip(calls, walk.recomputations):
        for r in again:
            assert r.tensor in call.subgraph and r.freed_op < call.first_op
            assert trace.schedule.ops[r.freed_op] == ("free", r.tensor)
    return walk


@pytest.mark.parametrize("solver", TRACED_SOLVERS)
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_walk_of_each_example_is_a_correct_recursion_and_the_solvers_own(example, solver):
    graph = EXAMPLES[example]
    trace = trace_recursion(graph, solver)
    walk = assert_correct_walk(graph, trace)
    assert trace.schedule.ops == solve(graph, 10**12, solver, budget_aware=False).ops
    assert any(walk.recomputations) and len(walk.steps) > len(walk.calls)
    assert walk.first_call_in_frame(trace.separators.root) == 0


@pytest.mark.parametrize("solver", TRACED_SOLVERS)
def test_with_a_budget_subproblems_that_fit_are_not_recursed_into(solver):
    graph = EXAMPLES["residual"]
    at_peak = trace_recursion(graph, solver, budget=checkpoint_all_peak(graph))
    assert [c.rule for c in at_peak.calls] == ["fits-budget"]
    assert_correct_walk(graph, at_peak)
    between = trace_recursion(graph, solver, budget=int(checkpoint_all_peak(graph) * 0.8))
    assert "fits-budget" in {c.rule for c in between.calls}
    assert_correct_walk(graph, between)


@settings(max_examples=40, deadline=None)
@given(compute_graphs(max_nodes=16))
def test_the_walk_is_a_correct_recursion_on_any_graph(graph):
    for solver in TRACED_SOLVERS:
        assert_correct_walk(graph, trace_recursion(graph, solver))


def test_steps_and_calls_read_in_labels_never_ids():
    graph = EXAMPLES["unet"]
    walk = recursion_walk(graph, trace_recursion(graph, "treewidth"))
    labels = node_labels(graph)
    texts = [walk_step_title(graph, walk, s) for s in walk.steps]
    for call in range(len(walk.calls)):
        texts += [call_title(graph, walk, call), *describe_call(graph, walk, call)]
    words = {w.strip(",.;:()") for t in texts for w in t.split()}
    assert not {i for i in graph.ids if i not in labels.values()} & words
    recomputing = next(c for c, again in enumerate(walk.recomputations) if again)
    said = " ".join(describe_call(graph, walk, recomputing))
    assert "will recompute" in said and labels[walk.recomputations[recomputing][0].tensor] in said


def test_a_node_click_finds_the_calls_that_compute_it_and_an_op_its_step():
    graph = EXAMPLES["chain"]
    walk = recursion_walk(graph, trace_recursion(graph, "pathwidth"))
    counts = walk.schedule.simulation.compute_counts
    for tensor, count in counts.items():
        calls = walk.calls_computing(tensor)
        assert len(calls) == count
        assert all(tensor in walk.calls[c].targets for c in calls)
    for step in walk.steps:
        for op in step.ops:
            assert walk.step_of_op(op) == step.index


def test_a_schedule_without_recorded_calls_walks_one_computation_at_a_time():
    graph = EXAMPLES["chain"]
    schedule = solve(graph, checkpoint_all_peak(graph), "chen-sqrt")
    steps = walkthrough_steps(graph, schedule)
    assert steps[-1].peak == schedule.stats["peak"] and steps[-1].cost == pytest.approx(schedule.stats["cost"])


def test_a_module_of_a_model_is_a_graph_of_its_own():
    graph = residual_training_net(2, mem=4)
    block = module_subgraph(graph, "block1")
    kept = {n.id for n in block.nodes if not n.pinned}
    assert kept == {n.id for n in graph.nodes if not n.pinned and (n.module or "").startswith("block1")}
    assert all(block.node(i).pinned for i in block.ids if i not in kept)  # what the rest of the model holds
    assert node_labels(block)[next(iter(kept))] == node_labels(graph)[next(iter(kept))]
    assert_correct_walk(block, trace_recursion(block, "treewidth"))
    with pytest.raises(GraphError, match="computes nothing in module 'nope'.*block1"):
        module_subgraph(graph, "nope")
