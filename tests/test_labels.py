"""Labels people read: unique, module path and op, pass marked, read back from a link."""

import pytest
from hypothesis import given
from strategies import compute_graphs

from remat_core.graph import ComputeGraph, Node, node_by_label, node_label, node_labels, training_chain


def test_every_label_is_unique_and_names_module_op_and_pass():
    nodes = [Node("p", 4, 0, kind="param", pinned=True, module="layer1.conv", label="layer1.conv.weight"),
             Node("c1", 8, 1, kind="forward", module="layer1.conv", op="aten.convolution"),
             Node("c2", 8, 1, kind="forward", module="layer1.conv", op="aten.convolution"),
             Node("g", 8, 2, kind="backward", module="layer1.conv", op="aten.convolution_backward", label="conv_bw[0]"),
             Node("m", 8, 1, kind="forward", module="layer2.conv", label="conv fwd"),
             Node("t", 8, 1, kind="forward", module="fc", label="fc fwd")]  # a top-level module reads the same way
    graph = ComputeGraph(nodes, [("p", "c1"), ("c1", "c2"), ("c2", "g"), ("c2", "m"), ("m", "t")], outputs=["g", "t"])
    labels = node_labels(graph)
    assert labels == {"p": "layer1.conv.weight (param)", "c1": "layer1.conv · convolution (fwd)",
                      "c2": "layer1.conv · convolution (fwd) #2", "g": "layer1.conv · conv_bw[0] (bwd)",
                      "m": "layer2.conv · fwd", "t": "fc · fwd"}
    assert node_label(graph, "c2") == labels["c2"]


@given(compute_graphs())
def test_labels_are_unique_on_any_graph_and_read_back(graph):
    labels = node_labels(graph)
    assert len(set(labels.values())) == len(graph)
    for node_id, label in labels.items():
        assert node_by_label(graph, label) == node_id


def test_a_link_may_name_a_tensor_by_id_and_an_unknown_name_finds_nothing():
    graph = training_chain(3, mem=10)
    assert node_by_label(graph, "f2") == "f2"
    assert node_by_label(graph, node_label(graph, "f2")) == "f2"
    assert node_by_label(graph, "no such tensor") is None


@pytest.mark.parametrize("clash", ["a (fwd) #2"])
def test_a_label_that_already_reads_like_a_numbered_one_stays_unique(clash):
    nodes = [Node("x", 1, 0, kind="forward", label="a"), Node("y", 1, 0, kind="forward", label="a"),
             Node("z", 1, 0, kind="forward", label=clash)]
    graph = ComputeGraph(nodes, [], outputs=["x", "y", "z"])
    assert len(set(node_labels(graph).values())) == 3
