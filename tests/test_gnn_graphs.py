"""The graphs a GNN trains on, generated or read, and their partitions across workers."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from remat_core import GraphError
from remat_core.frontends.gnn import partition_graph, read_gnn_graph, rmat_graph


def test_rmat_is_seeded_simple_symmetric_and_skewed():
    graph = rmat_graph(5000, 40000, features=8, classes=4, seed=3)
    again = rmat_graph(5000, 40000, features=8, classes=4, seed=3)
    assert np.array_equal(graph.edges, again.edges) and np.array_equal(graph.features, again.features)
    assert not np.array_equal(graph.edges, rmat_graph(5000, 40000, features=8, classes=4, seed=4).edges)
    src, dst = graph.edges
    assert graph.edge_count == 40000 and not np.any(src == dst)
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert len(pairs) == graph.edge_count and all((d, s) in pairs for s, d in pairs)  # both ways, once each
    assert graph.nodes <= 5000 and np.all(graph.in_degrees() > 0)  # untouched nodes dropped
    degrees = graph.in_degrees()
    assert degrees.max() > 20 * degrees.mean()  # a heavy tail, as R-MAT is for
    assert graph.features.shape == (graph.nodes, 8) and graph.features.dtype == np.float32
    assert set(np.unique(graph.labels)) <= set(range(4)) and graph.classes >= 2


@pytest.mark.parametrize("kwargs, message", [
    ({"nodes": 1, "edges": 5}, "at least 2 nodes"),
    ({"nodes": 10, "edges": 100}, "do not fit"),
    ({"nodes": 10, "edges": 5, "probabilities": (0.5, 0.3, 0.3)}, "a \\+ b \\+ c < 1"),
    ({"nodes": 10, "edges": 5, "classes": 1}, "classes at least 2")])
def test_bad_rmat_settings_say_what_would_work(kwargs, message):
    with pytest.raises(GraphError, match=message):
        rmat_graph(**kwargs)


def test_files_a_user_has_are_read(tmp_path):
    (tmp_path / "g.txt").write_text("# an edge list\n0 1\n1,2\n2\t0\n2 2\n0 1\n\n% comment\n5 0\n")
    listed = read_gnn_graph(tmp_path / "g.txt", features=4, classes=3)
    assert listed.nodes == 4 and listed.edge_count == 4  # node ids 0, 1, 2, 5 renumbered; self-loop and dup gone
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([0, 1, 0, 1, 0, 1])
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    np.savez(tmp_path / "g.npz", edge_index=edges, x=x, y=y)
    torch.save({"edge_index": torch.tensor(edges), "node_feat": torch.tensor(x), "node_label": torch.tensor(y)},
               tmp_path / "g.pt")
    for name in ("g.npz", "g.pt"):
        graph = read_gnn_graph(tmp_path / name)
        assert graph.nodes == 6 and graph.edge_count == 4  # node 5 has features: kept
        assert np.array_equal(graph.features, x) and np.array_equal(graph.labels, y)


@pytest.mark.parametrize("name, content, message", [
    ("bad.txt", "0 a\n", "expected two node ids"),
    ("empty.txt", "# nothing\n", "no edges"),
    ("g.json", "{}", "unknown graph file type"),
    ("missing.txt", None, "no such file")])
def test_bad_graph_files_say_what_was_wrong(tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_text(content)
    with pytest.raises(GraphError, match=message):
        read_gnn_graph(tmp_path / name)


def test_a_npz_without_edges_or_with_too_few_features_is_refused(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros((3, 2)))
    with pytest.raises(GraphError, match="no 'edge_index'"):
        read_gnn_graph(tmp_path / "a.npz")
    np.savez(tmp_path / "b.npz", edge_index=np.array([[0], [7]]), x=np.zeros((3, 2)))
    with pytest.raises(GraphError, match="features have 3 rows"):
        read_gnn_graph(tmp_path / "b.npz")


def test_a_partition_counts_what_each_worker_holds_and_needs():
    graph = rmat_graph(3000, 30000, features=4, seed=1)
    metis, rand = partition_graph(graph, 4, "metis"), partition_graph(graph, 4, "random")
    for partition in (metis, rand):
        assert partition.workers == 4 and partition.node_counts().sum() == graph.nodes
        assert partition.edge_counts().sum() == graph.edge_count
        counts = partition.halo_counts()
        for p in range(4):
            for q in range(4):
                expected = partition.halo(p, q).size if p != q else 0
                assert counts[p, q] == expected
            assert counts[p].sum() == partition.halo(p).size
            assert not np.isin(partition.halo(p), partition.nodes_of(p)).any()
    assert metis.edge_cut() < rand.edge_cut()
    assert metis.summary()["edge_balance"] < 1.2  # METIS weighted by in-degree balances the edges
    assert partition_graph(graph, 1).edge_cut() == 0.0


def test_a_bad_partition_request_is_refused():
    graph = rmat_graph(100, 400, features=2, seed=0)
    with pytest.raises(GraphError, match="workers must be between 1"):
        partition_graph(graph, 0)
    with pytest.raises(GraphError, match="unknown partitioner"):
        partition_graph(graph, 2, "spectral")


def test_the_partition_command_reports_as_json():
    out = subprocess.run([sys.executable, "-m", "remat_core", "partition", "rmat:nodes=2000,edges=16000,seed=2",
                          "--workers", "3", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["workers"] == 3 and len(report["per_worker"]) == 3 and 0 < report["edge_cut"] < 1
    assert sum(w["nodes"] for w in report["per_worker"]) == report["graph"]["nodes"]
    bad = subprocess.run([sys.executable, "-m", "remat_core", "partition", "rmat:nodez=5"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "unknown R-MAT setting 'nodez'" in bad.stderr
