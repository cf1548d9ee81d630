"""Graph and schedule files: remat-graph JSON, Checkmate node-link JSON, and every bad-file message."""

import json

import pytest

from remat_core import GraphError, ScheduleFormatError, load_graph, load_schedule, parse_graph, save_graph, solve
from remat_core.graph.generators import training_chain
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
     "unknown target node '5'"),
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
    assert back.ops == s.ops and back.budget == s.budget and back.solver == "checkpoint-all"
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
