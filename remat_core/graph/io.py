"""Reading and writing graph and schedule files.

Graphs come as ``remat-graph`` v1 JSON (see ``docs/remat-graph.schema.json``) or as the networkx
node-link JSON in which Checkmate and Moccasin publish their benchmark graphs; the reader tells
them apart by their keys. Schedules are ``remat-schedule`` v1 JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import GraphError
from .compute_graph import GRAPH_FORMAT, ComputeGraph, Node

MAX_GRAPH_FILE_BYTES = 200 * 1024 * 1024
"""Larger graph files are refused rather than read into memory."""

GraphLoader = Callable[[bytes, str], ComputeGraph]
_LOADERS_BY_SUFFIX: dict[str, GraphLoader] = {}


def register_graph_loader(suffix: str, loader: GraphLoader) -> None:
    """Teach :func:`load_graph` a file type by its suffix (``.onnx``, say).

    ``loader(data, source)`` receives the file's bytes and a display name for messages.
    """
    _LOADERS_BY_SUFFIX[suffix.lower()] = loader


def registered_graph_suffixes() -> tuple[str, ...]:
    """Suffixes with a registered loader (``.onnx``...), sorted; JSON files need none."""
    return tuple(sorted(_LOADERS_BY_SUFFIX))


def load_graph(path: str | Path) -> ComputeGraph:
    """Read a graph file: ``remat-graph`` JSON, Checkmate/Moccasin node-link JSON, or a registered type.

    Raises
    ------
    GraphError
        For a missing or unreadable file, malformed JSON, or an invalid graph (the message names
        the file and the offending node or edge).
    """
    path = Path(path)
    if not path.exists():
        raise GraphError(f"graph file not found: {path}")
    if not path.is_file():
        raise GraphError(f"not a file: {path} (expected a .json graph file)")
    size = path.stat().st_size
    if size > MAX_GRAPH_FILE_BYTES:
        raise GraphError(f"{path}: file is {size:,} bytes, more than the {MAX_GRAPH_FILE_BYTES:,} bytes this tool "
                         f"reads")
    return parse_graph(path.read_bytes(), path.name)


def parse_graph(data: bytes | str, source: str = "graph.json") -> ComputeGraph:
    """Parse graph file contents; ``source`` (a file name) picks the loader and names the file in errors."""
    suffix = Path(source).suffix.lower()
    loader = _LOADERS_BY_SUFFIX.get(suffix)
    if loader is not None:
        raw = data.encode() if isinstance(data, str) else data
        return loader(raw, source)
    doc = parse_json_text(data, source, GraphError)
    default_name = Path(source).stem or "graph"
    try:
        return graph_from_document(doc, default_name)
    except GraphError as e:
        raise GraphError(f"{source}: {e}") from None


def graph_from_document(doc: Any, default_name: str = "graph") -> ComputeGraph:
    """Build a graph from a parsed JSON document of either supported format."""
    if not isinstance(doc, Mapping):
        raise GraphError(f"expected a JSON object, got {type(doc).__name__}")
    if "format" in doc:
        if doc["format"] != GRAPH_FORMAT:
            raise GraphError(f"unknown format {doc['format']!r}; expected \"{GRAPH_FORMAT}\"")
        if "name" not in doc:
            doc = {**doc, "name": default_name}
        return ComputeGraph.from_json(doc)
    if isinstance(doc.get("nodes"), list) and ("links" in doc or "edges" in doc):
        return graph_from_node_link(doc, default_name)
    raise GraphError("unrecognised graph document: expected a remat-graph (an object with \"format\": "
                     "\"remat-graph\") or a networkx node-link graph (an object with \"nodes\" and \"links\")")


def graph_from_node_link(doc: Mapping[str, Any], default_name: str = "graph") -> ComputeGraph:
    """Read a Checkmate/Moccasin node-link graph.

    Node ids are the node-link ids as strings, ``name`` is the label, ``cost_ram`` the memory and
    ``cost_cpu`` the cost. No node is pinned (those graphs leave parameters out). The outputs are
    every ``backward`` node plus every sink, since Checkmate's schedules compute every gradient. A
    node called ``loss`` (any case) gets kind ``loss``; other nodes are ``backward`` or ``forward``.
    """
    if doc.get("directed") is False:
        raise GraphError("node-link graph is undirected (\"directed\": false); a training graph must be directed")
    raw_nodes = doc["nodes"]
    raw_links = doc.get("links", doc.get("edges"))
    if not isinstance(raw_links, list):
        raise GraphError("node-link graph: \"links\" must be a list of {\"source\", \"target\"} objects")
    nodes: list[Node] = []
    backward: list[str] = []
    for position, raw in enumerate(raw_nodes):
        if not isinstance(raw, Mapping) or "id" not in raw:
            raise GraphError(f"node-link node #{position}: expected an object with an \"id\", got {raw!r}")
        node_id = str(raw["id"])
        for key in ("cost_ram", "cost_cpu"):
            if key not in raw:
                raise GraphError(f"node-link node '{node_id}': missing \"{key}\" (Checkmate graphs give cost_ram "
                                 f"in bytes and cost_cpu as compute cost)")
        name = raw.get("name")
        is_backward = bool(raw.get("backward", False))
        if isinstance(name, str) and name.lower() == "loss":
            kind = "loss"
        else:
            kind = "backward" if is_backward else "forward"
        if is_backward:
            backward.append(node_id)
        nodes.append(Node(id=node_id, mem=raw["cost_ram"], cost=raw["cost_cpu"], kind=kind,
                          label=str(name) if name is not None else None))
    edges = []
    for position, link in enumerate(raw_links):
        if not isinstance(link, Mapping) or "source" not in link or "target" not in link:
            raise GraphError(f"node-link link #{position}: expected {{\"source\": ..., \"target\": ...}}, got {link!r}")
        edges.append((str(link["source"]), str(link["target"])))
    has_succ = {u for u, _ in edges}
    outputs = list(dict.fromkeys(backward + [n.id for n in nodes if n.id not in has_succ]))
    graph_meta = doc.get("graph")
    name = graph_meta.get("name") if isinstance(graph_meta, Mapping) and graph_meta.get("name") else default_name
    return ComputeGraph(nodes, edges, outputs, name=str(name))


def save_graph(graph: ComputeGraph, path: str | Path) -> None:
    """Write ``graph`` as ``remat-graph`` v1 JSON."""
    Path(path).write_text(json.dumps(graph.to_json(), indent=1) + "\n")


def parse_json_text(data: bytes | str, source: str, error: type[Exception]) -> Any:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise error(f"{source} is not a UTF-8 text file (expected JSON)") from None
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise error(f"{source} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise error(f"{source} nests JSON arrays or objects too deeply for Python's parser; graph and schedule "
                    f"files need only a few levels (a node's shape is the deepest: a list of lists)") from None
