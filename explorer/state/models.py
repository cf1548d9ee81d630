"""Where models come from: the built-in default, generated graphs, uploaded files, and links.

Uploads are parsed, never executed: graph JSON through :func:`remat_core.parse_graph`, other types
only through a loader registered for their suffix (``remat_core.graph.io.register_graph_loader``). No
pickle, no user Python. An accepted upload is kept in the on-disk store (:mod:`.uploads`) under its
graph's content hash, which is the name a link gives it.

Every model the app makes carries that name (``Model.source``): a zoo model (:mod:`.zoo`), a generated
graph's recipe (``training-chain:layers=24,activation=4MiB``, ``random-dag:nodes=60,edge_probability=0.08,
seed=0``) or an upload's content hash; :func:`model_from_source` turns it back into the model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import streamlit as st

from remat_core import BudgetError, ComputeGraph, GraphError, RematError, parse_budget, parse_graph
from remat_core.frontends import parse_pt2
from remat_core.graph import (budget_text, format_bytes, random_dag, registered_graph_suffixes, training_chain,
                              with_backward)

from .links import source_settings
from .session import Model
from .uploads import StoredUpload, is_upload_key, upload_store
from .zoo import default_zoo_model, is_zoo_name, zoo_model_from_link

LOG = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 64 * 2**20
"""Larger files are refused before they are parsed."""
MAX_MODEL_NODES = 100_000
"""Larger graphs are refused: the explorer solves and draws interactively; use the CLI for them."""
JSON_SUFFIXES = (".json",)
PT2_SUFFIX = ".pt2"
LEVEL_CHOICES = ("op", "module")
"""The levels a ``.pt2`` export may be traced at."""


@dataclass(frozen=True)
class Bounds:
    """The range of a generated graph's setting, and its default: the Model page's inputs and links share it."""

    low: int | float
    high: int | float
    default: int | float

    def check(self, name: str, value: float) -> float:
        if not self.low <= value <= self.high:
            raise GraphError(f"{name} {value:g} is out of range: it goes from {self.low:g} to {self.high:g}")
        return value


TRAINING_CHAIN = "training-chain"
RANDOM_DAG = "random-dag"
CHAIN_LAYERS = Bounds(1, 2000, 24)
CHAIN_ACTIVATION_MIB = Bounds(0.01, 4096.0, 4.0)
DAG_NODES = Bounds(1, 3000, 60)
DAG_EDGE_PROBABILITY = Bounds(0.0, 1.0, 0.08)
DAG_SEED = Bounds(0, 10**6, 0)
DAG_MAX_MEM = 64 * 2**20


def activation_bytes(mib: float) -> int:
    """The bytes of ``mib`` MiB as its decimal text reads (``0.01`` MiB is 10485 bytes, as ``0.01MiB`` in a link)."""
    return parse_budget(f"{mib!r}MiB")


def upload_suffixes() -> tuple[str, ...]:
    """File types an upload may be: JSON graphs, every suffix with a registered loader, ``.pt2`` exports."""
    return JSON_SUFFIXES + tuple(sorted(set(registered_graph_suffixes()) | {PT2_SUFFIX}))


@st.cache_resource(show_spinner=False)
def default_model() -> Model:
    """The model a new session opens on: a ResNet-18 from the zoo (see :func:`explorer.state.zoo.default_zoo_model`)."""
    return default_zoo_model()


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_training_chain(layers: int, mem: int) -> Model:
    """The training graph of a ``layers``-layer chain, ``mem`` bytes per activation (GraphError out of range)."""
    CHAIN_LAYERS.check("layers", layers)
    if not activation_bytes(CHAIN_ACTIVATION_MIB.low) <= mem <= activation_bytes(CHAIN_ACTIVATION_MIB.high):
        raise GraphError(f"activation {format_bytes(mem)} is out of range: it goes from {CHAIN_ACTIVATION_MIB.low:g} "
                         f"MiB to {CHAIN_ACTIVATION_MIB.high:g} MiB")
    graph = training_chain(layers, mem=mem)
    return Model(graph, f"generated: training graph of a {layers}-layer chain ({format_bytes(mem)} per activation)",
                 source=f"{TRAINING_CHAIN}:layers={layers},activation={budget_text(mem, 'MiB')}")


@st.cache_resource(show_spinner=False, max_entries=16)
def generated_random_dag(nodes: int, edge_probability: float, seed: int) -> Model:
    """A forward-only random DAG (GraphError for settings out of range)."""
    DAG_NODES.check("nodes", nodes)
    DAG_EDGE_PROBABILITY.check("edge probability", edge_probability)
    DAG_SEED.check("seed", seed)
    graph = random_dag(nodes, edge_probability=edge_probability, max_mem=DAG_MAX_MEM, seed=seed)
    return Model(graph, f"generated: random DAG, {nodes} nodes, edge probability {edge_probability:g}, seed {seed}",
                 source=f"{RANDOM_DAG}:nodes={nodes},edge_probability={edge_probability!r},seed={seed}")


def model_from_upload(name: str, data: bytes, add_backward: bool = True, level: str = "op") -> Model:
    """Parse an uploaded file into a model (not kept: see :func:`accept_upload`).

    Parameters
    ----------
    name : str
        The file's name: its suffix picks the reader.
    data : bytes
    add_backward : bool
        For a forward-only graph (ONNX, a forward JSON) with parameters: add the backward pass with
        ``remat_core.with_backward`` so that it is a training graph. A graph with no parameters has
        nothing to differentiate and is kept as it is (its origin says so).
    level : {"op", "module"}
        The level a ``.pt2`` export is traced at.

    Raises
    ------
    RematError
        A :class:`GraphError` for a file too large, of a type no reader takes, not parseable, not
        a valid graph (sizes and costs beyond what a real model has included), or with more nodes than
        the explorer handles; a ``TraceError`` for a ``.pt2`` export the tracer cannot handle. Each
        message says what would work.
    """
    suffix = Path(name).suffix.lower()
    accepted = upload_suffixes()
    if suffix not in accepted:
        raise GraphError(f"{name}: files of type '{suffix or 'none'}' are not read here; upload one of "
                         f"{', '.join(accepted)} (a remat-graph or Checkmate/Moccasin node-link JSON)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise GraphError(f"{name} is {format_bytes(len(data))}, more than the {format_bytes(MAX_UPLOAD_BYTES)} the "
                         f"explorer reads; use the command line (python -m remat_core) for it")
    if level not in LEVEL_CHOICES:
        raise GraphError(f"unknown level {level!r}; use one of {', '.join(LEVEL_CHOICES)}")
    rebuild = partial(parse_pt2, data, level=level, name=Path(name).stem) if suffix == PT2_SUFFIX else None
    graph = rebuild() if rebuild is not None else parse_graph(data, name)
    origin = f"uploaded: {name}"
    if add_backward and not any(n.kind == "backward" for n in graph.nodes):
        if any(n.pinned and n.kind == "param" for n in graph.nodes):
            graph = with_backward(graph)
            origin += " (forward only: backward pass added)"
        else:
            origin += " (no parameters, so no backward pass to add: explored as it is)"
    check_size(graph, name)
    return Model(graph, origin, rebuild=rebuild, source=graph.content_hash)


def accept_upload(name: str, data: bytes, add_backward: bool = True, level: str = "op") -> tuple[Model, str | None]:
    """:func:`model_from_upload`, then kept in the upload store so that links and reloads find it.

    Returns the model and, when it could not be kept, why (it still works in this tab).

    Raises
    ------
    RematError
        As :func:`model_from_upload`.
    """
    model = model_from_upload(name, data, add_backward, level)
    try:
        kept = upload_store().put(model.key, StoredUpload(name, data, add_backward, level))
    except OSError as e:
        LOG.warning("could not keep the upload %s in the store", name, exc_info=e)
        return model, f"it could not be kept on the server ({e.strerror or e}), so a reload or a link will not find it"
    if not kept:
        return model, "it is larger than the server's upload store, so a reload or a link will not find it"
    return model, None


@st.cache_resource(show_spinner="Reading the stored upload…", max_entries=8)
def stored_model(key: str) -> Model:
    """The upload kept under content hash ``key``, read again as it was read first.

    Raises
    ------
    GraphError
        When no upload is kept under ``key`` on this server, or it is damaged or reads differently now.
    """
    upload = upload_store().get(key)
    if upload is None:
        raise GraphError(f"no upload with content hash {key[:12]}… is kept on this server (uploads stay on the "
                         f"server that received them, the least recently used going first when the store is "
                         f"full); upload the file again")
    model = model_from_upload(upload.name, upload.data, upload.add_backward, upload.level)
    if model.key != key:
        raise GraphError(f"the stored upload {upload.name} reads as another graph now (content hash "
                         f"{model.key[:12]}…, not {key[:12]}…); upload the file again")
    return model


def model_from_source(source: str, level: str | None = None) -> Model:
    """The model a link names (``Model.source``): a zoo model at ``level``, a generated graph, or an upload.

    Raises
    ------
    RematError
        A :class:`GraphError` for a name that is none of those (saying what a link may name) or settings out
        of range; ``ZooError``/``TraceError`` for a zoo model that cannot be built or traced.
    """
    if is_upload_key(source):
        return stored_model(source)
    family, settings = source_settings(source)
    if is_zoo_name(family):
        return zoo_model_from_link(family, settings, level)
    if family == TRAINING_CHAIN:
        layers = _setting(source, settings, "layers", int)
        try:
            mem = parse_budget(settings.get("activation", ""))
        except BudgetError as e:
            raise GraphError(f"{source}: activation must be a size such as 4MiB ({e})") from None
        return generated_training_chain(layers, mem)
    if family == RANDOM_DAG:
        return generated_random_dag(_setting(source, settings, "nodes", int),
                                    _setting(source, settings, "edge_probability", float),
                                    _setting(source, settings, "seed", int))
    raise GraphError(f"unknown model {source!r}: a link names a zoo model (resnet18, or resnet18:batch_size=8 for "
                     f"other options), a generated graph ({TRAINING_CHAIN}:layers=24,activation=4MiB or "
                     f"{RANDOM_DAG}:nodes=60,edge_probability=0.08,seed=0) or an upload's content hash")


def _setting(source: str, settings: dict[str, str], name: str, kind: type) -> int | float:
    try:
        value = kind(settings[name])
    except KeyError:
        raise GraphError(f"{source}: {name}= is missing") from None
    except ValueError:
        raise GraphError(f"{source}: {name}={settings[name]!r} is not a {'whole ' if kind is int else ''}number") \
            from None
    if kind is float and value != value:
        raise GraphError(f"{source}: {name}={settings[name]!r} is not a number")
    return value


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
