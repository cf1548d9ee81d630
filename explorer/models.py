"""Where models come from: the built-in default, generated graphs, and uploaded files.

Uploads are parsed, never executed: graph JSON through :func:`remat_core.parse_graph`, other types
only through a loader registered for their suffix (``remat_core.io.register_graph_loader``). No
pickle, no user Python.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from remat_core import ComputeGraph, GraphError, parse_graph
from remat_core.budget import format_bytes
from remat_core.generators import random_dag, training_chain
from remat_core.io import registered_graph_suffixes

from .state import Model

MAX_UPLOAD_BYTES = 64 * 2**20
"""Larger files are refused before they are parsed."""
MAX_MODEL_NODES = 100_000
"""Larger graphs are refused: the explorer solves and draws interactively; use the CLI for them."""
JSON_SUFFIXES = (".json",)

DEFAULT_CHAIN_LAYERS = 24
DEFAULT_CHAIN_MEM = 4 * 2**20


def upload_suffixes() -> tuple[str, ...]:
    """File types an upload may be: JSON graphs, plus every suffix with a registered loader."""
    return JSON_SUFFIXES + registered_graph_suffixes()


@st.cache_resource(show_spinner=False)
def default_model() -> Model:
    """The model a new session opens on: the training graph of a 24-layer chain."""
    graph = training_chain(DEFAULT_CHAIN_LAYERS, mem=DEFAULT_CHAIN_MEM, name="training-chain-24")
    return Model(graph, "generated: training graph of a 24-layer chain (4 MiB per activation)")


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_training_chain(layers: int, mem: int) -> Model:
    graph = training_chain(layers, mem=mem)
    return Model(graph, f"generated: training graph of a {layers}-layer chain ({format_bytes(mem)} per activation)")


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_random_dag(nodes: int, edge_probability: float, seed: int) -> Model:
    graph = random_dag(nodes, edge_probability=edge_probability, max_mem=64 * 2**20, seed=seed)
    return Model(graph, f"generated: random DAG, {nodes} nodes, edge probability {edge_probability:g}, seed {seed}")


def model_from_upload(name: str, data: bytes) -> Model:
    """Parse an uploaded file into a model.

    Raises
    ------
    GraphError
        For a file too large, of a type no loader reads, not parseable, not a valid graph, or with
        more nodes than the explorer handles; the message says what would work.
    """
    suffix = Path(name).suffix.lower()
    accepted = upload_suffixes()
    if suffix not in accepted:
        raise GraphError(f"{name}: files of type '{suffix or 'none'}' are not read here; upload one of "
                         f"{', '.join(accepted)} (a remat-graph or Checkmate/Moccasin node-link JSON)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise GraphError(f"{name} is {format_bytes(len(data))}, more than the {format_bytes(MAX_UPLOAD_BYTES)} the "
                         f"explorer reads; use the command line (python -m remat_core) for it")
    graph = parse_graph(data, name)
    check_size(graph, name)
    return Model(graph, f"uploaded: {name}")


def check_size(graph: ComputeGraph, source: str) -> None:
    """Refuse graphs with more than :data:`MAX_MODEL_NODES` nodes (a :class:`GraphError` saying so)."""
    if len(graph) > MAX_MODEL_NODES:
        raise GraphError(f"{source}: {len(graph):,} nodes is more than the {MAX_MODEL_NODES:,} the explorer "
                         f"handles interactively; coarsen it to module level or use the command line")
