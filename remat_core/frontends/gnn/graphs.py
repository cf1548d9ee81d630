"""The graphs a GNN trains on: nodes with features and labels, directed edges ``src -> dst`` (a message from src
aggregated at dst), generated with a realistic degree skew or read from disk. Nothing is downloaded."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import GraphError

GRAPH500 = (0.57, 0.19, 0.19)
"""R-MAT's quadrant probabilities a, b, c (d = 1 - a - b - c) of the Graph500 benchmark: a heavy-tailed degree skew."""
UNIFORM = (0.25, 0.25, 0.25)
"""Equal quadrants: no degree skew (an Erdos-Renyi-like graph), where every worker needs most others' rows."""
SKEWS = {"graph500": GRAPH500, "uniform": UNIFORM}
RMAT_SETTINGS = {"nodes": int, "edges": int, "features": int, "classes": int, "seed": int, "skew": str}


@dataclass(frozen=True, eq=False)
class GnnGraph:
    """A graph for full-batch GNN training.

    Attributes
    ----------
    name : str
    edges : numpy.ndarray, shape (2, E), int64
        ``edges[0]`` sources, ``edges[1]`` destinations; no self-loops, no duplicates.
    features : numpy.ndarray, shape (N, F), float32
    labels : numpy.ndarray, shape (N,), int64
        Classes ``0..classes-1``.
    """

    name: str
    edges: np.ndarray
    features: np.ndarray
    labels: np.ndarray

    @property
    def nodes(self) -> int:
        return int(self.features.shape[0])

    @property
    def edge_count(self) -> int:
        return int(self.edges.shape[1])

    @property
    def classes(self) -> int:
        return int(self.labels.max(initial=-1)) + 1

    def in_degrees(self) -> np.ndarray:
        return np.bincount(self.edges[1], minlength=self.nodes)

    def describe(self) -> dict:
        degrees = self.in_degrees()
        return {"name": self.name, "nodes": self.nodes, "edges": self.edge_count,
                "features": int(self.features.shape[1]),
                "classes": self.classes, "max_in_degree": int(degrees.max(initial=0)),
                "mean_in_degree": float(degrees.mean()) if self.nodes else 0.0}


def rmat_graph(nodes: int, edges: int, *, features: int = 64, classes: int = 16, seed: int = 0,
               probabilities: tuple[float, float, float] = GRAPH500, symmetric: bool = True,
               drop_isolated: bool = True) -> GnnGraph:
    """An R-MAT graph (Chakrabarti, Zhan, Faloutsos 2004) with about ``edges`` edges among ``nodes`` nodes.

    Each edge picks its quadrant of the adjacency matrix level by level with ``probabilities`` (a, b, c; d is
    the rest), which gives the power-law degrees of real graphs. Self-loops and duplicates are dropped (edges
    are drawn until about ``edges`` remain, or a few rounds have passed), then nodes no edge touches (R-MAT
    leaves many) are dropped and the rest renumbered (``drop_isolated=False`` keeps all ``nodes``).
    ``symmetric``: every edge both ways (messages flow
    both ways, as on citation and product graphs); ``edges`` then counts directed edges. Features are standard
    normal; labels are a random linear function of them, so that a model can learn them.

    Raises
    ------
    GraphError
        For sizes that are not positive, more edges than the nodes can hold, or bad probabilities.
    """
    if nodes < 2 or edges < 1:
        raise GraphError(f"an R-MAT graph needs at least 2 nodes and 1 edge, got nodes={nodes}, edges={edges}")
    if edges > nodes * (nodes - 1):
        raise GraphError(f"{edges:,} edges do not fit among {nodes:,} nodes without duplicates (at most "
                         f"{nodes * (nodes - 1):,})")
    a, b, c = probabilities
    if min(a, b, c) < 0 or a + b + c >= 1:
        raise GraphError(f"R-MAT probabilities a, b, c must be non-negative with a + b + c < 1, got {probabilities}")
    if features < 1 or classes < 2:
        raise GraphError(f"features must be at least 1 and classes at least 2, got {features} and {classes}")
    rng = np.random.default_rng(seed)
    scale = max(1, math.ceil(math.log2(nodes)))
    wanted = edges // 2 if symmetric else edges
    found = np.zeros((0,), dtype=np.int64)
    for _ in range(8):
        draw = int((wanted - found.size) * 1.3) + 16
        src = np.zeros(draw, dtype=np.int64)
        dst = np.zeros(draw, dtype=np.int64)
        for level in range(scale):
            r = rng.random(draw)
            right = (r >= a) & (r < a + b) | (r >= a + b + c)
            down = r >= a + b
            src |= down.astype(np.int64) << level
            dst |= right.astype(np.int64) << level
        keep = (src < nodes) & (dst < nodes) & (src != dst)
        keys = src[keep] * nodes + dst[keep]
        if symmetric:
            keys = np.minimum(keys, (keys % nodes) * nodes + keys // nodes)  # one key per unordered pair
        found = np.unique(np.concatenate([found, keys]))
        if found.size >= wanted:
            break
    found = rng.permutation(found)[:wanted]
    src, dst = found // nodes, found % nodes
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return _with_data(f"rmat-{nodes}-{edges}-s{seed}", np.stack([src, dst]), nodes, features, classes, rng,
                      drop_isolated)


def gnn_graph(text: str) -> GnnGraph:
    """The graph a text names: ``rmat:nodes=N,edges=E[,features=F,classes=C,seed=S,skew=graph500|uniform]``
    (generated, :func:`rmat_graph`), or a file :func:`read_gnn_graph` reads.

    Raises
    ------
    GraphError
        For a setting that is not one of R-MAT's, a value of the wrong kind, or a file that cannot be read.
    """
    if not text.startswith("rmat:") and text != "rmat":
        return read_gnn_graph(text)
    settings: dict = {"nodes": 100_000, "edges": 1_000_000}
    for part in filter(None, text.partition(":")[2].split(",")):
        name, _, value = (t.strip() for t in part.partition("="))
        if name not in RMAT_SETTINGS:
            raise GraphError(f"{text}: unknown R-MAT setting {name!r}; use {', '.join(RMAT_SETTINGS)}")
        if name == "skew":
            if value not in SKEWS:
                raise GraphError(f"{text}: skew={value!r}; use {' or '.join(SKEWS)}")
            settings["probabilities"] = SKEWS[value]
        elif not value.isdigit():
            raise GraphError(f"{text}: {name}={value!r} is not a whole number")
        else:
            settings[name] = int(value)
    return rmat_graph(settings.pop("nodes"), settings.pop("edges"), **settings)


def _with_data(name: str, edges: np.ndarray, nodes: int, features: int, classes: int, rng,
               drop_isolated: bool = True) -> GnnGraph:
    """The graph on the nodes its edges touch (renumbered; all ``nodes`` unless ``drop_isolated``), with random
    features and learnable labels."""
    used = np.unique(edges) if drop_isolated else np.arange(nodes)
    renumber = np.full(nodes, -1, dtype=np.int64)
    renumber[used] = np.arange(used.size)
    x = rng.standard_normal((used.size, features)).astype(np.float32)
    y = np.argmax(x @ rng.standard_normal((features, classes)), axis=1).astype(np.int64)
    return GnnGraph(name, renumber[edges], x, y)


def read_gnn_graph(path: str | Path, features: int = 64, classes: int = 16, seed: int = 0) -> GnnGraph:
    """A graph a user has on disk.

    - an edge list (``.txt``, ``.edges``, ``.el``, ``.csv``, ``.tsv``): two node ids per line (``#``/``%`` comments,
      commas, tabs or spaces), each line an edge ``src dst``; features and labels are made as for
      :func:`rmat_graph` (``features``, ``classes``, ``seed``);
    - ``.npz`` or ``.pt``: arrays ``edge_index`` (2 x E) and, if present, ``x`` (or ``node_feat``) and ``y`` (or
      ``node_label``), as PyG's ``Data`` and OGB's raw files hold them (``.pt``: a dict of tensors or arrays).

    Self-loops and duplicate edges are dropped; nodes no edge touches are kept only when the file gives features.

    Raises
    ------
    GraphError
        Naming the file and what was wrong with it.
    """
    path = Path(path)
    if not path.exists():
        raise GraphError(f"{path}: no such file")
    suffix = path.suffix.lower()
    rng = np.random.default_rng(seed)
    if suffix in (".npz", ".pt"):
        arrays = _arrays(path)
        if "edge_index" not in arrays:
            raise GraphError(f"{path}: no 'edge_index' array (found {', '.join(sorted(arrays)) or 'none'}); save "
                             f"the edges as a 2 x E array named edge_index")
        edges = np.asarray(arrays["edge_index"], dtype=np.int64)
        x = next((arrays[k] for k in ("x", "node_feat") if k in arrays), None)
        y = next((arrays[k] for k in ("y", "node_label") if k in arrays), None)
    elif suffix in (".txt", ".edges", ".el", ".csv", ".tsv"):
        edges, x, y = _edge_list(path), None, None
    else:
        raise GraphError(f"{path}: unknown graph file type {suffix or '(none)'}; use an edge list (.txt, .edges, "
                         f".el, .csv, .tsv), .npz or .pt")
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.size == 0 or edges.min() < 0:
        raise GraphError(f"{path}: edge_index must be a non-empty 2 x E array of node ids >= 0, got shape "
                         f"{edges.shape}")
    edges = _simple(edges)
    if x is None:
        return _with_data(path.stem, edges, int(edges.max()) + 1, features, classes, rng)
    x = np.asarray(x, dtype=np.float32).reshape(len(x), -1)
    if edges.max() >= len(x):
        raise GraphError(f"{path}: an edge names node {int(edges.max())}, but the features have {len(x)} rows")
    if y is None:
        y = np.argmax(x @ rng.standard_normal((x.shape[1], classes)), axis=1)
    y = np.asarray(y, dtype=np.int64).reshape(-1)
    if len(y) != len(x):
        raise GraphError(f"{path}: {len(y)} labels for {len(x)} nodes")
    return GnnGraph(path.stem, edges, x, y)


def _arrays(path: Path) -> dict:
    if path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    import torch  # a .pt file: only torch reads it

    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a bad file here
        raise GraphError(f"{path}: not a dict of tensors torch can load safely ({type(e).__name__}: {e})") from None
    if not isinstance(loaded, dict):
        raise GraphError(f"{path}: holds a {type(loaded).__name__}; save a dict such as {{'edge_index': ..., 'x': ..., "
                         f"'y': ...}} (PyG: data.to_dict())")
    return {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in loaded.items()}


def _edge_list(path: Path) -> np.ndarray:
    pairs = []
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            text = line.split("#", 1)[0].split("%", 1)[0].replace(",", " ").split()
            if not text:
                continue
            if len(text) < 2 or not (text[0].isdigit() and text[1].isdigit()):
                raise GraphError(f"{path}:{number}: expected two node ids (non-negative integers), got "
                                 f"{line.strip()!r}")
            pairs.append((int(text[0]), int(text[1])))
    if not pairs:
        raise GraphError(f"{path}: no edges")
    return np.asarray(pairs, dtype=np.int64).T


def _simple(edges: np.ndarray) -> np.ndarray:
    """No self-loops, no duplicates, in (dst, src) order."""
    edges = edges[:, edges[0] != edges[1]]
    n = int(edges.max()) + 1
    keys = np.unique(edges[1] * n + edges[0])
    return np.stack([keys % n, keys // n])
