"""ComputeGraph: construction, validation messages, derived facts, JSON round trip."""

import json
from dataclasses import FrozenInstanceError

import networkx as nx
import pytest

from remat_core import ComputeGraph, GraphError, Node
from remat_core.graph import Attachments
from remat_core.graph.generators import training_chain


def small_graph(**kwargs):
    nodes = [Node("x", 4096, 0, "input", True), Node("w", 100, 0, "param", True),
             Node("fc1", 8192, 1.3e6, "forward", op="aten.mm", shape=(32, 64), dtype="float32", module="fc1"),
             Node("relu", 8192, 10, "forward"), Node("out", 4, 5, "loss")]
    edges = [("x", "fc1"), ("w", "fc1"), ("fc1", "relu"), ("relu", "out")]
    return ComputeGraph(nodes, edges, **kwargs)


def test_defaults_outputs_are_non_pinned_sinks():
    g = small_graph()
    assert g.outputs == ("out",)
    assert g.preds("fc1") == ("x", "w")
    assert g.succs("fc1") == ("relu",)
    assert g.pinned_bytes == 4196
    assert len(g) == 5 and "relu" in g and "nope" not in g


def test_pinned_sink_is_not_a_default_output():
    g = ComputeGraph([Node("x", 1, 0, "input", True), Node("a", 1, 1)], [])
    assert g.outputs == ("a",)


def test_duplicate_edges_are_merged():
    g = ComputeGraph([Node("a", 1, 1), Node("b", 1, 1)], [("a", "b"), ("a", "b")])
    assert g.edges == (("a", "b"),)
    assert g.preds("b") == ("a",)


def test_topological_order_keeps_given_order_where_possible():
    g = ComputeGraph([Node("c", 1, 1), Node("a", 1, 1), Node("b", 1, 1)], [("a", "b")])
    assert g.topological_order() == ("c", "a", "b")
    g2 = ComputeGraph([Node("b", 1, 1), Node("a", 1, 1)], [("a", "b")])
    assert g2.topological_order() == ("a", "b")


def test_nx_view_is_frozen_and_complete():
    g = small_graph()
    d = g.nx
    assert isinstance(d, nx.DiGraph) and nx.is_frozen(d)
    assert d.nodes["fc1"]["mem"] == 8192 and d.nodes["fc1"]["op"] == "aten.mm"
    assert set(d.edges) == set(g.edges)
    with pytest.raises(nx.NetworkXError):
        d.add_node("z")


def test_content_hash_is_stable_and_sensitive():
    assert small_graph().content_hash == small_graph().content_hash
    other = ComputeGraph([Node("x", 4096, 0, "input", True), Node("fc1", 8193, 1.3e6)], [("x", "fc1")])
    assert other.content_hash != small_graph().content_hash


def test_attachments_are_kept_but_not_serialised():
    marker = object()
    g = small_graph(attachments=Attachments(joint=marker))
    assert g.attachments.joint is marker and not g.attachments.executable
    assert "joint" not in json.dumps(g.to_json())
    assert g.content_hash == small_graph().content_hash
    with pytest.raises(FrozenInstanceError):
        g.attachments.binding = 1
    with pytest.raises(TypeError, match="Attachments"):
        small_graph(attachments={"fx": marker})  # no untyped side channel


def test_json_round_trip_keeps_everything():
    g = small_graph()
    doc = json.loads(json.dumps(g.to_json()))
    back = ComputeGraph.from_json(doc)
    assert back.nodes == g.nodes
    assert back.edges == g.edges and back.outputs == g.outputs
    assert back.content_hash == g.content_hash
    assert back.node("fc1").shape == (32, 64)


def test_needed_nodes_are_output_ancestors():
    nodes = [Node("x", 1, 0, "input", True), Node("a", 1, 1), Node("b", 1, 1), Node("dead", 1, 1)]
    g = ComputeGraph(nodes, [("x", "a"), ("a", "b"), ("a", "dead")], outputs=["b"])
    assert {g.ids[i] for i in g.needed_idx} == {"a", "b"}


def test_generated_training_chain_shape():
    g = training_chain(4)
    assert len(g) == 1 + 4 + 1 + 4
    assert set(g.outputs) == {"b1", "b2", "b3", "b4"}
    assert g.preds("b1") == ("b2", "x")


@pytest.mark.parametrize("nodes, edges, outputs, message", [
    ([], [], None, "empty"),
    ([Node("a", 1, 1), Node("a", 2, 1)], [], None, "duplicate node id 'a'"),
    ([Node("a", -1, 1)], [], None, "node 'a': mem must be a non-negative integer"),
    ([Node("a", 1.5, 1)], [], None, "node 'a': mem must be a non-negative integer"),
    ([Node("a", "big", 1)], [], None, "node 'a': mem must be"),
    ([Node("a", True, 1)], [], None, "node 'a': mem must be"),
    ([Node("a", 1, -3)], [], None, "node 'a': cost must be a non-negative finite number"),
    ([Node("a", 1, float("nan"))], [], None, "node 'a': cost must be"),
    ([Node("a", 1, "slow")], [], None, "node 'a': cost must be"),
    ([Node("a", 1, 1, kind="weird")], [], None, "node 'a': unknown kind 'weird'"),
    ([Node("a", 1, 1)], [("a", "zzz")], None, "unknown target node 'zzz'"),
    ([Node("a", 1, 1)], [("qq", "a")], None, "unknown source node 'qq'"),
    ([Node("a", 1, 1), Node("p", 1, 0, "param", True)], [("a", "p")], None, "pinned node 'p' has a predecessor ('a')"),
    ([Node("a", 1, 1)], [], ["b"], "unknown output 'b'"),
    ([Node("p", 1, 0, "param", True)], [], None, "no outputs"),
    ([Node("p", 1, 0, "param", True), Node("a", 1, 1)], [], ["p"], "output 'p' is pinned"),
    ([Node("a", 1, 1)], [("a",)], None, "malformed edge"),
])
def test_bad_graphs_are_refused_with_a_clear_message(nodes, edges, outputs, message):
    with pytest.raises(GraphError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ComputeGraph(nodes, edges, outputs)


def test_cycle_is_named():
    nodes = [Node("x", 1, 0, "input", True), Node("a", 1, 1), Node("b", 1, 1), Node("c", 1, 1), Node("d", 1, 1)]
    edges = [("x", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
    with pytest.raises(GraphError) as info:
        ComputeGraph(nodes, edges)
    message = str(info.value)
    assert "cycle" in message
    cycle = message.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


def test_self_loop_is_a_cycle():
    with pytest.raises(GraphError, match="cycle: a -> a"):
        ComputeGraph([Node("a", 1, 1)], [("a", "a")])


def test_unknown_node_lookup_names_it():
    with pytest.raises(GraphError, match="unknown node 'nope'"):
        small_graph().node("nope")


@pytest.mark.parametrize("name, value", [("name", "renamed"), ("mem", (1, 2, 3, 4, 5)), ("output_idx", ()),
                                         ("content_hash", "0" * 64), ("_memo", {}), ("brand_new", 1)])
def test_attributes_cannot_be_set_once_built(name, value):
    g = small_graph()
    digest = g.content_hash
    with pytest.raises(AttributeError, match="immutable"):
        setattr(g, name, value)
    with pytest.raises(AttributeError, match="immutable"):
        delattr(g, "name")
    assert g.name == "graph" and g.content_hash == digest == small_graph().content_hash


def test_index_is_read_only_and_memo_still_caches():
    g = small_graph()
    with pytest.raises(TypeError):
        g.index["fc1"] = 0
    calls = []
    assert g.memo("k", lambda: calls.append(1) or 42) == 42 == g.memo("k", lambda: calls.append(1) or 0)
    assert calls == [1]


@pytest.mark.parametrize("shape, expected", [([2, 3], (2, 3)), ([], ()), ([[2], [4, 5]], ((2,), (4, 5))),
                                             ((1, 0), (1, 0))])
def test_shapes_are_lists_of_dims_or_of_dim_lists(shape, expected):
    assert ComputeGraph([Node("a", 1, 1, shape=shape)], []).node("a").shape == expected


@pytest.mark.parametrize("shape", ["32x64", {"rows": 2}, [2, -1], [2.5], [True], [[2], 3], [[[2]]], 7])
def test_bad_shapes_are_refused_naming_node_and_form(shape):
    with pytest.raises(GraphError, match=r"node 'a': shape must be a list of non-negative integers \(\[32, 64\]"):
        ComputeGraph([Node("a", 1, 1, shape=shape)], [])
