"""The Distributed page: a GNN's partition, each worker's simulated memory under vanilla and SAR, the choices in the
URL, an uploaded graph, and a run of the real workers with measured beside simulated."""

from __future__ import annotations

import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.jobs.distributed import find_run
from explorer.jobs.lanes import stop_background_work
from explorer.state.gnn import CHOICE, GnnChoice

TIMEOUT = 120
SMALL = "rmat:nodes=1500,edges=12000,skew=uniform"


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    yield
    stop_background_work()


def distributed_page(**params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update({"gnn_graph": SMALL, **params})
    at.run()
    at.switch_page("app_pages/distributed.py").run()
    assert not at.exception, at.exception
    return at


def test_the_page_shows_the_partition_and_each_mode_per_worker():
    at = distributed_page(gnn="gat", gnn_workers="3")
    labels = [m.label for m in at.metric]
    assert {"Edge cut", "Node balance", "Budget per worker: vanilla", "Budget per worker: sar"} <= set(labels)
    sar = next(m for m in at.metric if m.label == "Budget per worker: sar")
    assert "of vanilla's" in str(sar.proto.delta)
    assert len(at.dataframe[0].value) == 3  # one row per worker
    assert at.query_params["gnn"] == "gat" and at.query_params["gnn_workers"] == "3"


def test_a_bad_link_keeps_the_defaults_and_says_why():
    at = distributed_page(gnn="mlp", gnn_workers="99")
    warnings = " ".join(w.value for w in at.warning)
    assert "gnn='mlp'" in warnings and "gnn\\_workers='99'" in warnings  # plain() escapes markdown
    assert at.session_state[CHOICE].model == GnnChoice.model and not at.error


def test_a_graph_that_does_not_fit_the_workers_is_refused_with_a_way_back():
    at = distributed_page(gnn_graph="rmat:nodes=3,edges=4", gnn_workers="16")
    assert at.error and "at most one worker per node" in at.error[0].value
    at.button[-1].click().run()
    assert at.session_state[CHOICE].graph == GnnChoice.graph


def test_the_real_workers_run_from_the_page():
    at = distributed_page(gnn="graphsage", gnn_workers="2")
    next(b for b in at.button if b.label == "Run the workers").click().run()
    key = (at.session_state[CHOICE],)
    deadline = time.monotonic() + TIMEOUT
    while not find_run(key).final and time.monotonic() < deadline:
        time.sleep(0.5)
    assert find_run(key).done, find_run(key).describe_end()
    at.run()
    table = at.dataframe[-1].value
    assert set(table["gradients"]) == {"equal"}
    assert all(0.9 <= float(r) <= 1.1 for r in table["measured / simulated"])


def test_an_uploaded_edge_list_is_partitioned(tmp_path, monkeypatch):
    monkeypatch.setenv("REMAT_UPLOAD_DIR", str(tmp_path / "uploads"))
    from explorer.state.gnn import keep_upload, load_graph

    rng = np.random.default_rng(0)
    text = "\n".join(f"{a} {b}" for a, b in rng.integers(0, 300, (2000, 2)) if a != b)
    spec = keep_upload("mine.txt", text.encode())
    assert spec.startswith("upload:") and load_graph(spec).nodes <= 300
    at = distributed_page(gnn_graph=spec, gnn_workers="2")
    assert not at.error and "mine" in str(next(m for m in at.metric if m.label == "Nodes").proto.help)
