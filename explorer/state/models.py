"""Where models come from: the built-in default, generated graphs, and uploaded files.

Uploads are parsed, never executed: graph JSON through :func:`remat_core.parse_graph`, other types
only through a loader registered for their suffix (``remat_core.graph.io.register_graph_loader``). No
pickle, no user Python.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import streamlit as st

from remat_core import ComputeGraph, GraphError, RematError, parse_graph
from remat_core.frontends import parse_pt2
from remat_core.graph import format_bytes, random_dag, registered_graph_suffixes, training_chain, with_backward

from .session import Model
from .zoo import default_zoo_model

LOG = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 64 * 2**20
"""Larger files are refused before they are parsed."""
MAX_MODEL_NODES = 100_000
"""Larger graphs are refused: the explorer solves and draws interactively; use the CLI for them."""
JSON_SUFFIXES = (".json",)
PT2_SUFFIX = ".pt2"


def upload_suffixes() -> tuple[str, ...]:
    """File types an upload may be: JSON graphs, every suffix with a registered loader, ``.pt2`` exports."""
    return JSON_SUFFIXES + tuple(sorted(set(registered_graph_suffixes()) | {PT2_SUFFIX}))


@st.cache_resource(show_spinner=False)
def default_model() -> Model:
    """The model a new session opens on: a ResNet-18 from the zoo (see :func:`explorer.state.zoo.default_zoo_model`)."""
    return default_zoo_model()


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_training_chain(layers: int, mem: int) -> Model:
    graph = training_chain(layers, mem=mem)
    return Model(graph, f"generated: training graph of a {layers}-layer chain ({format_bytes(mem)} per activation)")


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_random_dag(nodes: int, edge_probability: float, seed: int) -> Model:
    graph = random_dag(nodes, edge_probability=edge_probability, max_mem=64 * 2**20, seed=seed)
    return Model(graph, f"generated: random DAG, {nodes} nodes, edge probability {edge_probability:g}, seed {seed}")


def model_from_upload(name: str, data: bytes, add_backward: bool = True, level: str = "op") -> Model:
    """Parse an uploaded file into a model.

    Parameters
    ----------
    name : str
        The file's name: its suffix picks the reader.
    data : bytes
    add_backward : bool
        For a forward-only graph (ONNX, a forward JSON): add the backward pass with
        ``remat_core.with_backward`` so that it is a training graph.
    level : {"op", "module"}
        The level a ``.pt2`` export is traced at.

    Raises
    ------
    RematError
        A :class:`GraphError` for a file too large, of a type no reader takes, not parseable, not
        a valid graph, or with more nodes than the explorer handles; a ``TraceError`` for a
        ``.pt2`` export the tracer cannot handle. Each message says what would work.
    """
    suffix = Path(name).suffix.lower()
    accepted = upload_suffixes()
    if suffix not in accepted:
        raise GraphError(f"{name}: files of type '{suffix or 'none'}' are not read here; upload one of "
                         f"{', '.join(accepted)} (a remat-graph or Checkmate/Moccasin node-link JSON)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise GraphError(f"{name} is {format_bytes(len(data))}, more than the {format_bytes(MAX_UPLOAD_BYTES)} the "
                         f"explorer reads; use the command line (python -m remat_core) for it")
    rebuild = partial(parse_pt2, data, level=level, name=Path(name).stem) if suffix == PT2_SUFFIX else None
    graph = rebuild() if rebuild is not None else parse_graph(data, name)
    origin = f"uploaded: {name}"
    if add_backward and not any(n.kind == "backward" for n in graph.nodes):
        graph = with_backward(graph)
        origin += " (forward only: backward pass added)"
    check_size(graph, name)
    return Model(graph, origin, rebuild=rebuild)


def check_size(graph: ComputeGraph, source: str) -> None:
    """Refuse graphs with more than :data:`MAX_MODEL_NODES` nodes (a :class:`GraphError` saying so)."""
    if len(graph) > MAX_MODEL_NODES:
        raise GraphError(f"{source}: {len(graph):,} nodes is more than the {MAX_MODEL_NODES:,} the explorer "
                         f"handles interactively; coarsen it to module level or use the command line")


def failure_message(error: Exception) -> str:
    """What to tell the user when a model could not be loaded or traced, whatever broke, so that the page can
    say it and keep the previous model: a :class:`RematError`'s own message (it says what would work), else
    the failure named (logged with its traceback for whoever runs the app)."""
    if isinstance(error, RematError):
        return str(error)
    LOG.warning("loading a model failed", exc_info=error)
    if isinstance(error, MemoryError):
        return "ran out of memory; try a smaller model, batch or input size, or the module level"
    return f"an unexpected {type(error).__name__} ({error}); the file or model may use something the tracer or " \
           f"importer does not handle"
