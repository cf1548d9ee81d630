"""The Distributed page's choices and what they take to compute, cached with bounds.

The choices live in the URL beside the session's (``gnn``, ``gnn_graph``, ``gnn_workers``, ``gnn_partition``,
``gnn_width``), so a reload or a shared link shows the same partition. ``gnn_graph`` is a generated graph's recipe
(``rmat:nodes=..,edges=..,skew=..``) or ``upload:<sha256>`` for a file kept in the upload store
(:mod:`.uploads`), read again after a reload.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from remat_core import GraphError
from remat_core.frontends.gnn import (GNN_MODELS, PARTITIONERS, GnnGraph, GnnModel, Partition, gnn_graph,
                                      partition_graph, worker_sizes)
from remat_core.run.distributed import best_chunk, simulate_workers

from .uploads import StoredUpload, is_upload_key, upload_store

CHOICE = "distributed_choice"
"""Session key: the page's :class:`GnnChoice`."""
DEFAULT_GRAPH = "rmat:nodes=20000,edges=200000,skew=uniform"
UPLOAD_PREFIX = "upload:"
UPLOAD_LEVEL = "gnn-graph"
"""How a GNN graph's upload is marked in the upload store (beside the Model page's uploads)."""
GRAPH_SUFFIXES = (".txt", ".edges", ".el", ".csv", ".tsv", ".npz", ".pt")
MAX_EDGES = 5_000_000
"""The largest graph the page simulates (a few seconds per mode at 2M edges on two cores)."""
MAX_WORKERS = 16


@dataclass(frozen=True)
class GnnChoice:
    """What the page shows: a GNN on a graph split across workers."""

    model: str = "graphsage"
    graph: str = DEFAULT_GRAPH
    workers: int = 4
    partitioner: str = "metis"
    width: int = 64

    def to_url(self) -> dict[str, str]:
        return {"gnn": self.model, "gnn_graph": self.graph, "gnn_workers": str(self.workers),
                "gnn_partition": self.partitioner, "gnn_width": str(self.width)}


def choice_from_url(params) -> tuple[GnnChoice, list[str]]:
    """The choice a URL names, each bad parameter left at its default with the reason."""
    problems = []
    values = {}
    model = params.get("gnn", GnnChoice.model)
    if model in GNN_MODELS:
        values["model"] = model
    else:
        problems.append(f"gnn={model!r} is not a GNN of the zoo ({', '.join(GNN_MODELS)})")
    if "gnn_graph" in params:
        values["graph"] = params["gnn_graph"]
    for name, key, low, high in (("workers", "gnn_workers", 1, MAX_WORKERS), ("width", "gnn_width", 1, 4096)):
        text = params.get(key)
        if text is None:
            continue
        if text.isdigit() and low <= int(text) <= high:
            values[name] = int(text)
        else:
            problems.append(f"{key}={text!r} is not a whole number from {low} to {high}")
    partitioner = params.get("gnn_partition", GnnChoice.partitioner)
    if partitioner in PARTITIONERS:
        values["partitioner"] = partitioner
    else:
        problems.append(f"gnn_partition={partitioner!r}; use {' or '.join(PARTITIONERS)}")
    return GnnChoice(**values), problems


def current_choice() -> tuple[GnnChoice, list[str]]:
    """The session's choice; on its first visit, the URL's (with what in it could not be used, and why)."""
    if CHOICE in st.session_state:
        return st.session_state[CHOICE], []
    choice, problems = choice_from_url(st.query_params)
    st.session_state[CHOICE] = choice
    return choice, problems


def set_choice(**changes) -> GnnChoice:
    """Change the session's choice and put it in the URL."""
    choice = GnnChoice(**{**st.session_state[CHOICE].__dict__, **changes})
    st.session_state[CHOICE] = choice
    st.query_params.update(choice.to_url())
    return choice


def keep_upload(name: str, data: bytes) -> str:
    """Keep an uploaded graph file in the upload store; its ``gnn_graph`` value (``upload:<sha256>``).

    Raises
    ------
    GraphError
        For a file type the reader does not know, or a file that does not parse (nothing is kept then).
    """
    suffix = Path(name).suffix.lower()
    if suffix not in GRAPH_SUFFIXES:
        raise GraphError(f"{name}: not a graph file the Distributed page reads; upload an edge list (.txt, .edges, "
                         f".el, .csv, .tsv), .npz or .pt")
    key = hashlib.sha256(data).hexdigest()
    _read_file(name, data)  # refuse a file that does not parse before keeping it
    upload_store().put(key, StoredUpload(name, data, False, UPLOAD_LEVEL))
    return UPLOAD_PREFIX + key


def _read_file(name: str, data: bytes) -> GnnGraph:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(name).name
        path.write_bytes(data)
        graph = gnn_graph(str(path))
    return graph


@st.cache_resource(max_entries=4, show_spinner="Building the graph…")
def load_graph(spec: str) -> GnnGraph:
    """The graph ``spec`` names (see the module notes).

    Raises
    ------
    GraphError
        For a recipe or an upload that cannot be read, or a graph larger than :data:`MAX_EDGES`.
    """
    if spec.startswith(UPLOAD_PREFIX):
        key = spec[len(UPLOAD_PREFIX):]
        if not is_upload_key(key):
            raise GraphError(f"gnn_graph={spec!r}: an upload is named by its SHA-256 (64 hexadecimal digits)")
        stored = upload_store().get(key)
        if stored is None:
            raise GraphError("the uploaded graph this link names is not on this server any more; upload it again")
        graph = _read_file(stored.name, stored.data)
    elif spec.startswith("rmat"):
        graph = gnn_graph(spec)
    else:
        raise GraphError(f"gnn_graph={spec!r}: use a recipe rmat:nodes=N,edges=E[,skew=uniform|graph500] or upload "
                         f"a file")
    if graph.edge_count > MAX_EDGES:
        raise GraphError(f"{graph.edge_count:,} edges: the page simulates graphs of up to {MAX_EDGES:,} edges; the "
                         f"command `python -m remat_core distributed` takes any size")
    return graph


@st.cache_resource(max_entries=8, show_spinner="Partitioning…")
def load_partition(spec: str, workers: int, method: str) -> Partition:
    return partition_graph(load_graph(spec), workers, method)


@st.cache_resource(max_entries=8, show_spinner="Simulating every worker's step…")
def simulated_modes(spec: str, workers: int, method: str, model: GnnModel) -> dict:
    """Each worker simulated under vanilla, SAR and (GAT) SAR with the best edge chunk: ``{label: (chunk,
    workers)}``."""
    partition = load_partition(spec, workers, method)
    modes = {"vanilla": (None, simulate_workers(partition, model, "vanilla")),
             "sar": (None, simulate_workers(partition, model, "sar"))}
    if model.aggregation == "attention":
        chunk, chunked = best_chunk(partition, model)
        if chunk is not None:
            modes["sar + chunks"] = (chunk, chunked)
    return modes


def model_for(choice: GnnChoice, graph: GnnGraph) -> GnnModel:
    return GnnModel(choice.model, int(graph.features.shape[1]), max(graph.classes, 2), choice.width,
                    heads=min(4, choice.width))


def halo_table(partition: Partition, model: GnnModel) -> list[dict]:
    """Per worker: its nodes, the edges it aggregates, the remote rows it fetches each layer, its peers."""
    rows = []
    for sizes in worker_sizes(partition, model.aggregation):
        rows.append({"worker": sizes.rank, "nodes": sizes.nodes, "edges in": sum(sizes.edges.values()),
                     "halo (remote rows)": sum(sizes.fetched.values()),
                     "largest shard (rows)": max(sizes.fetched.values(), default=0),
                     "rows it sends": sum(sizes.sent.values())})
    return rows
