"""Graph and schedule files: remat-graph JSON, Checkmate node-link JSON, and every bad-file message."""

import json

import pytest

from remat_core import GraphError, ScheduleFormatError, load_graph, load_schedule, parse_graph, save_graph, solve
from remat_core.graph.generators import random_layered, training_chain
from remat_core.schedule.io import save_schedule


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


SPEC_EXAMPLE = {"format": "remat-graph", "version": 1, "name": "mlp-b32",
                "nodes": [{"id": "x", "mem": 4096, "cost": 0, "kind": "input", "pinned": True},
                          {"id": "fc1", "mem": 8192, "cost": 1.3e6, "kind": "forward", "op": "aten.mm"}],
                "edges": [["x", "fc1"]], "outputs": ["fc1"]}


def test_reads_the_documented_example(tmp_path):
    g = load_graph(write(tmp_path, "g.json", SPEC_EXAMPLE))
    assert g.name == "mlp-b32" and g.outputs == ("fc1",)
    assert g.node("x").pinned and g.node("fc1").op == "aten.mm" and g.node("fc1").mem == 8192


def test_save_and_load_round_trip(tmp_path):
    g = training_chain(5, mem=7)
    save_graph(g, tmp_path / "c.json")
    back = load_graph(tmp_path / "c.json")
    assert back.content_hash == g.content_hash


def node_link_doc():
    # A tiny Checkmate-style training graph: two forward layers, a loss, two backward nodes.
    names = ["conv1", "conv2", "Loss", "grad_conv2", "grad_conv1"]
    return {"directed": True, "multigraph": False, "graph": {"name": "tiny_train"},
            "nodes": [{"id": i, "name": n, "cost_cpu": 10 + i, "cost_ram": 100 * (i + 1), "backward": i >= 2}
                      for i, n in enumerate(names)],
            "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 2, "target": 3},
                      {"source": 0, "target": 3}, {"source": 3, "target": 4}]}


def test_reads_checkmate_node_link(tmp_path):
    g = load_graph(write(tmp_path, "tiny_train_nx.json", node_link_doc()))
    assert g.name == "tiny_train"
    assert g.ids == ("0", "1", "2", "3", "4")
    assert g.node("0").label == "conv1" and g.node("0").mem == 100 and g.node("0").cost == 10
    assert not any(n.pinned for n in g.nodes)
    assert [n.kind for n in g.nodes] == ["forward", "forward", "loss", "backward", "backward"]
    assert set(g.outputs) == {"2", "3", "4"}  # every backward node plus every sink


def test_node_link_sinks_are_outputs_even_when_forward(tmp_path):
    doc = node_link_doc()
    doc["nodes"].append({"id": 9, "name": "aux", "cost_cpu": 1, "cost_ram": 1, "backward": False})
    doc["links"].append({"source": 0, "target": 9})
    g = load_graph(write(tmp_path, "aux.json", doc))
    assert "9" in g.outputs


def test_node_link_with_edges_key_and_no_graph_name(tmp_path):
    doc = node_link_doc()
    doc["edges"] = doc.pop("links")
    del doc["graph"]
    g = load_graph(write(tmp_path, "named_by_file.json", doc))
    assert g.name == "named_by_file" and len(g.edges) == 5


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({"hello": 1}, "unrecognised graph document"),
    ({"format": "something-else", "version": 1, "nodes": []}, "unknown format 'something-else'"),
    ({"format": "remat-graph", "version": 7, "nodes": [], "edges": []}, "unsupported remat-graph version 7"),
    ({"format": "remat-graph", "version": 1, "nodes": [], "edges": []}, "empty"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "cost": 1}], "edges": []}, "node 'a': missing \"mem\""),
    ({"format": "remat-graph", "version": 1, "nodes": [{"mem": 1, "cost": 1}], "edges": []}, "node #0"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "mem": "x", "cost": 1}], "edges": []},
     "node 'a': mem must be"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "mem": 1, "cost": 1}], "edges": [["a", "b"]]},
     "unknown target node 'b'"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "mem": 1, "cost": 1}], "edges": [["a"]]},
     "malformed edge"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "mem": 1, "cost": 1}], "edges": [],
      "outputs": ["zz"]}, "unknown output 'zz'"),
    ({"nodes": [{"id": 0, "name": "a", "cost_cpu": 1}], "links": []}, "missing \"cost_ram\""),
    ({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1}], "links": [{"source": 0, "target": 5}]},
     "link #0: its target 5 is not a node"),
    ({"directed": False, "nodes": [], "links": []}, "undirected"),
    ({"format": "remat-graph", "version": 1, "nodes": [{"id": "a", "mem": 1, "cost": 1, "shape": "32x64"}]},
     r"node 'a': shape must be a list of non-negative integers \(\[32, 64\]"),
    ("[" * 100_000 + "]" * 100_000, "nests JSON arrays or objects too deeply"),
])
def test_bad_graph_files_say_what_is_wrong(tmp_path, content, message):
    path = write(tmp_path, "bad.json", content)
    with pytest.raises(GraphError, match=message) as info:
        load_graph(path)
    assert "bad.json" in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(GraphError, match="graph file not found"):
        load_graph(tmp_path / "nope.json")


def test_directory_is_not_a_graph(tmp_path):
    with pytest.raises(GraphError, match="not a file"):
        load_graph(tmp_path)


def test_binary_garbage(tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(GraphError, match="not a UTF-8 text file"):
        load_graph(path)


def test_parse_graph_from_bytes():
    g = parse_graph(json.dumps(SPEC_EXAMPLE).encode(), "upload.json")
    assert g.name == "mlp-b32"


def test_schedule_round_trip(tmp_path):
    g = training_chain(3)
    s = solve(g, 10**6)
    save_schedule(s, tmp_path / "s.json")
    back = load_schedule(tmp_path / "s.json")
    assert back.ops == s.ops and back.budget == s.budget and back.solver == "auto"
    assert back.reasons == s.reasons and back.stats["peak"] == s.stats["peak"]


@pytest.mark.parametrize("content, message", [
    ("nope", "not valid JSON"),
    ({"format": "remat-graph"}, "not a remat-schedule"),
    ({"format": "remat-schedule", "version": 2, "ops": []}, "unsupported remat-schedule version 2"),
    ({"format": "remat-schedule", "version": 1}, "\"ops\" must be a list"),
    ({"format": "remat-schedule", "version": 1, "ops": [["compute"]]}, "op #0"),
    ({"format": "remat-schedule", "version": 1, "ops": [], "budget": -5}, "budget"),
    ({"format": "remat-schedule", "version": 1, "ops": [["compute", "a"]], "reasons": []}, "parallel"),
    ({"format": "remat-schedule", "version": 1, "ops": [], "stats": [1, 2]},
     "\"stats\" must be a JSON object of names to values, or absent; got a list"),
    ({"format": "remat-schedule", "version": 1, "ops": [], "solver_info": "fast"}, "\"solver_info\" must be a JSON"),
    ("{\"a\": " * 100_000 + "1" + "}" * 100_000, "nests JSON arrays or objects too deeply"),
])
def test_bad_schedule_files(tmp_path, content, message):
    with pytest.raises(ScheduleFormatError, match=message):
        load_schedule(write(tmp_path, "s.json", content))


def test_missing_schedule_file(tmp_path):
    with pytest.raises(ScheduleFormatError, match="not found"):
        load_schedule(tmp_path / "none.json")


def moccasin_doc():
    """A small graph in the shape of Moccasin's random_layered files: no ids, tags naming the fields,
    links keyed "0"/"1", a topological order that is not the node list's, and fields we ignore."""
    return {"directed": True, "multigraph": False,
            "graph": {"name": "random_layered_n5", "pos": {"0": [0, 0], "2": [0, -1], "3": [1, -1], "4": [0, -2],
                                                           "1": [0, -3]},
                      "source_node": 0, "target_node": 1, "node_output_cost_tag": "out_cost",
                      "node_output_block_tag": "output_blocks", "node_param_cost_tag": "param_cost",
                      "node_input_cost_tag": "input_cost", "node_duration_tag": "duration", "edge_cost_tag": "edge_cost",
                      "max_cost": 1, "inset_state": [], "order": [0, 3, 2, 4, 1]},
            "nodes": [{"out_cost": 790, "param_cost": 0, "duration": 0, "name": 0},
                      {"out_cost": 4920, "param_cost": 0, "duration": 0, "name": 1},
                      {"out_cost": 1950, "param_cost": 0, "duration": 514, "name": 2},
                      {"out_cost": 1980, "param_cost": 64, "duration": 896, "name": 3},
                      {"out_cost": 5320, "param_cost": 0, "duration": 955, "name": 4}],
            "links": [{"0": 0, "1": 2}, {"0": 0, "1": 3}, {"0": 2, "1": 4}, {"0": 3, "1": 4}, {"0": 0, "1": 4},
                      {"0": 4, "1": 1}]}


def test_reads_moccasin_random_layered_files(tmp_path):
    g = load_graph(write(tmp_path, "random_layered_n5.json", moccasin_doc()))
    assert g.name == "random_layered_n5"
    computed = [n for n in g.nodes if not n.pinned]
    assert [n.id for n in computed] == ["0", "3", "2", "4", "1"]  # taken in the file's order
    assert g.topological_order() == ("3.params", "0", "3", "2", "4", "1")
    assert g.node("4").mem == 5320 and g.node("4").cost == 955 and g.node("1").cost == 0
    assert all(n.kind == "forward" for n in computed) and g.outputs == ("1",)
    params = g.node("3.params")  # param_cost becomes a pinned parameter read by its node
    assert params.pinned and params.kind == "param" and params.mem == 64 and set(g.preds("3")) == {"0", "3.params"}
    assert set(g.edges) >= {("0", "2"), ("4", "1"), ("0", "4")}


@pytest.mark.parametrize("change, message", [
    (lambda d: d["nodes"][2].pop("out_cost"), r"node '2' \(node #2: it has no \"id\"\): missing \"out_cost\" "
                                              r"\(the node's output memory, a whole number of bytes; the field "
                                              r"graph.node_output_cost_tag names\)"),
    (lambda d: d["nodes"][3].update(duration="fast"), r"node '3'.*\"duration\" must be a number >= 0 \(the node's "
                                                      r"compute cost.*node_duration_tag names\), got 'fast'"),
    (lambda d: d["nodes"][4].update(out_cost=12.5), r"\"out_cost\" must be a whole number of bytes"),
    (lambda d: d["nodes"][4].update(param_cost=-1), r"\"param_cost\" must be a number >= 0"),
    (lambda d: d["links"][3].pop("1"), r"link #3: missing \"1\" \(its target node"),
    (lambda d: d["links"][0].update({"0": 9}), r"link #0: its source 9 is not a node"),
    (lambda d: d["graph"].pop("node_duration_tag"), r"graph.node_duration_tag \(the node field holding each "
                                                    r"node's compute cost"),
    (lambda d: d["graph"].update(node_output_cost_tag=3), r"graph.node_output_cost_tag must name a node field"),
    (lambda d: d["graph"].update(order=[0, 2, 4, 1]), r"graph.order must list every node exactly once.*'3' is "
                                                      r"missing"),
    (lambda d: d["graph"].update(order=[0, 4, 2, 3, 1]), r"graph.order is not a topological order: '4' comes before "
                                                         r"its input"),
    (lambda d: d["graph"].update(order=[0, 3, 2, 4, 7]), r"graph.order names '7', which is not a node"),
])
def test_bad_moccasin_files_name_the_field(tmp_path, change, message):
    doc = moccasin_doc()
    change(doc)
    with pytest.raises(GraphError, match=message) as info:
        load_graph(write(tmp_path, "bad_layered.json", doc))
    assert "bad_layered.json" in str(info.value)


def test_moccasin_writer_round_trips_a_generated_graph(tmp_path):
    g = random_layered(60, seed=4)
    save_graph(g, tmp_path / "g.json", format="moccasin")
    doc = json.loads((tmp_path / "g.json").read_text())
    assert "id" not in doc["nodes"][0] and set(doc["links"][0]) == {"0", "1"}
    assert doc["graph"]["node_output_cost_tag"] == "out_cost" and len(doc["graph"]["order"]) == 60
    assert load_graph(tmp_path / "g.json").content_hash == g.content_hash
    with_params = load_graph(write(tmp_path, "m.json", moccasin_doc()))
    save_graph(with_params, tmp_path / "again.json", format="moccasin")  # nodes renumbered in the file's order

    def described(graph):
        return sorted((n.display_name, n.mem, n.cost, n.kind, n.pinned) for n in graph.nodes)
    assert described(load_graph(tmp_path / "again.json")) == described(with_params)


def test_moccasin_writer_refuses_what_the_format_cannot_hold(tmp_path):
    with pytest.raises(GraphError, match="pinned node 'x' is read by 2 nodes"):  # f1 and b1 read the input
        save_graph(training_chain(4), tmp_path / "c.json", format="moccasin")
    with pytest.raises(GraphError, match="unknown graph file format 'dot'"):
        save_graph(random_layered(10), tmp_path / "c.json", format="dot")
