"""with_backward: the reverse-mode structure it adds to forward-only graphs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remat_core import checkpoint_all_peak, simulate, solve
from remat_core.errors import GraphError
from remat_core.graph.backward import LOSS_BYTES, with_backward
from remat_core.graph.compute_graph import ComputeGraph, Node
from remat_core.graph.generators import chain, training_chain
from remat_core.schedule import checkpoint_all_ops


def mlp_forward() -> ComputeGraph:
    """x -> h = x @ w1 -> a = relu(h) -> y = a @ w2 (w1, w2 trainable)."""
    nodes = [Node("x", 40, 0, "input", True), Node("w1", 80, 0, "param", True), Node("w2", 24, 0, "param", True),
             Node("h", 60, 6.0, "forward"), Node("a", 60, 1.0, "forward"), Node("y", 20, 3.0, "forward")]
    edges = [("x", "h"), ("w1", "h"), ("h", "a"), ("a", "y"), ("w2", "y")]
    return ComputeGraph(nodes, edges, name="mlp")


def test_structure_follows_reverse_mode():
    g = with_backward(mlp_forward())
    assert g.node("loss").kind == "loss" and g.node("loss").mem == LOSS_BYTES and g.preds("loss") == ("y",)
    assert [n.id for n in g.nodes if n.kind == "backward"] == ["loss:grad", "y:grad", "w2:grad", "a:grad",
                                                                "w1:grad"]
    assert set(g.preds("y:grad")) == {"loss:grad", "a", "w2", "y"}  # output grad, inputs, output
    assert set(g.preds("w2:grad")) == {"loss:grad", "a", "w2", "y"}
    assert set(g.preds("a:grad")) == {"y:grad", "h", "a"}
    assert set(g.preds("w1:grad")) == {"a:grad", "x", "w1", "h"}  # x needs no gradient: no h:grad
    assert "h:grad" not in g and g.outputs == ("w2:grad", "w1:grad")
    assert g.node("y:grad").mem == 60 and g.node("w2:grad").mem == 24 and g.node("a:grad").mem == 60


def test_backward_costs_twice_the_forward_split_by_bytes():
    g = with_backward(mlp_forward())
    assert g.node("y:grad").cost + g.node("w2:grad").cost == pytest.approx(2 * 3.0)
    assert g.node("y:grad").cost / g.node("w2:grad").cost == pytest.approx(60 / 24)
    assert g.node("w1:grad").cost == 2 * 6.0 and g.node("a:grad").cost == 2 * 1.0
    tripled = with_backward(mlp_forward(), backward_cost_factor=3.0)
    assert sum(n.cost for n in tripled.nodes if n.kind == "backward") == pytest.approx(3 * 10.0)


def test_a_shared_parameter_accumulates_its_gradient_in_a_chain():
    nodes = [Node("x", 8, 0, "input", True), Node("w", 4, 0, "param", True),
             Node("f1", 8, 1.0, "forward"), Node("f2", 8, 1.0, "forward")]
    g = with_backward(ComputeGraph(nodes, [("x", "f1"), ("w", "f1"), ("f1", "f2"), ("w", "f2")]))
    assert g.outputs == ("w:grad",)
    assert set(g.preds("w:grad#1")) == {"loss:grad", "f1", "w", "f2"}
    assert set(g.preds("w:grad")) == {"f2:grad", "x", "w", "f1", "w:grad#1"}
    simulate(g, checkpoint_all_ops(g, explain=False)[0])


def test_an_existing_loss_is_kept_and_attributes_survive():
    forward = ComputeGraph([Node("x", 4, 0, "input", True), Node("w", 4, 0, "param", True),
                            Node("f1", 4, 2.0, "forward"),
                            Node("f2", 4, 2.0, "forward", module="layer", label="matmul"),
                            Node("L", 4, 1.0, "loss")], [("x", "f1"), ("w", "f1"), ("f1", "f2"), ("f2", "L")])
    g = with_backward(forward)
    assert "loss" not in g and g.node("L:grad").kind == "backward" and g.outputs == ("w:grad",)
    assert g.node("f2") == forward.node("f2") and g.node("f2:grad").module == "layer"
    assert g.node("f2:grad").label == "grad matmul"


def test_ids_never_collide():
    forward = ComputeGraph([Node("w", 4, 0, "param", True), Node("loss", 4, 1.0, "forward"),
                            Node("loss:grad", 4, 1.0, "forward")], [("w", "loss"), ("loss", "loss:grad")])
    g = with_backward(forward)
    assert len(set(g.ids)) == len(g) and g.node("loss'").kind == "loss"


@pytest.mark.parametrize("make,kwargs,message", [
    (lambda: training_chain(3), {}, "already has backward nodes"),
    (lambda: chain(3), {}, "no trainable parameters"),
    (lambda: chain(3), {"trainable": ["f1"]}, "'f1' is not pinned"),
    (lambda: chain(3), {"trainable": ["nope"]}, "unknown node 'nope'"),
    (mlp_forward, {"backward_cost_factor": -1}, "backward_cost_factor must be a finite number >= 0"),
    (lambda: ComputeGraph([Node("w", 4, 0, "param", True), Node("x", 4, 0, "input", True),
                           Node("f", 4, 1.0, "forward")], [("x", "f")]), {}, "depends on no trainable"),
])
def test_bad_input_says_what_would_work(make, kwargs, message):
    with pytest.raises(GraphError, match=message):
        with_backward(make(), **kwargs)


def test_nodes_the_loss_does_not_read_get_no_gradient():
    forward = ComputeGraph([Node("x", 4, 0, "input", True), Node("w", 4, 0, "param", True),
                            Node("used", 4, 1.0, "forward"), Node("unused", 4, 1.0, "forward")],
                           [("x", "used"), ("w", "used"), ("w", "unused")], outputs=["used"])
    g = with_backward(forward)
    assert g.outputs == ("w:grad",) and set(g.preds("w:grad")) == {"loss:grad", "x", "w", "used"}
    assert not any("unused" in n.id for n in g.nodes if n.kind == "backward")


def test_trainable_inputs_may_be_named():
    g = with_backward(chain(3), trainable=["x"])
    assert g.outputs == ("x:grad",) and g.node("x:grad").mem == g.node("x").mem


@st.composite
def forward_graphs(draw):
    """Random forward DAGs over a few pinned params and inputs."""
    n_params = draw(st.integers(1, 3))
    nodes = [Node(f"w{k}", draw(st.integers(0, 40)), 0.0, "param", True) for k in range(n_params)]
    nodes.append(Node("x", draw(st.integers(0, 40)), 0.0, "input", True))
    edges = []
    for j in range(draw(st.integers(1, 12))):
        earlier = [n.id for n in nodes]
        reads = draw(st.lists(st.sampled_from(earlier), min_size=1, max_size=3, unique=True))
        nodes.append(Node(f"v{j}", draw(st.integers(0, 40)), float(draw(st.integers(0, 9))), "forward"))
        edges += [(u, f"v{j}") for u in reads]
    return ComputeGraph(nodes, edges, name="random-forward")


@given(forward_graphs())
def test_random_forward_graphs_become_valid_training_graphs(forward):
    read_params = {n.id for n in forward.nodes if n.kind == "param" and forward.succs(n.id)}
    if not read_params:
        with pytest.raises(GraphError, match="depends on no trainable"):
            with_backward(forward)
        return
    g = with_backward(forward)
    simulate(g, checkpoint_all_ops(g, explain=False)[0])
    solve(g, checkpoint_all_peak(g), "checkpoint-all")
    assert {o.removesuffix(":grad") for o in g.outputs} == read_params  # every sink feeds the loss
    assert all(g.node(o).mem == g.node(o.removesuffix(":grad")).mem for o in g.outputs)
    requires = set(read_params)
    for node_id in forward.topological_order():
        if not forward.node(node_id).pinned and requires & set(forward.preds(node_id)):
            requires.add(node_id)
    for v in requires - read_params:
        if f"{v}:grad" in g:
            assert {v, *forward.preds(v)} <= set(g.preds(f"{v}:grad"))  # reads its inputs and its output
    expected = 2.0 * sum(forward.node(v).cost for v in requires - read_params)
    assert sum(n.cost for n in g.nodes if n.kind == "backward") == pytest.approx(expected)
