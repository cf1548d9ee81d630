"""Reading and writing graph and schedule files.

Graphs come as ``remat-graph`` v1 JSON (see ``docs/remat-graph.schema.json``) or as the networkx
node-link JSON in which Checkmate and Moccasin publish their benchmark graphs; the reader tells
them apart by their keys. Schedules are ``remat-schedule`` v1 JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _NodeLinkFields:
    """Which node fields hold what, and how links name their ends, in one node-link file."""

    memory: str
    cost: str
    params: str | None
    tagged: bool  # Moccasin's style: the graph's tags name the fields

    def describe(self, field: str) -> str:
        """What a field means, for messages (the tag that names it, in Moccasin's style)."""
        tag = {self.memory: "node_output_cost_tag", self.cost: "node_duration_tag", self.params: "node_param_cost_tag"}[field]
        meaning = _TAG_MEANINGS[tag].replace("each node's", "the node's")
        return f"{meaning}; the field graph.{tag} names" if self.tagged else meaning


MOCCASIN_TAGS = {"node_output_cost_tag": "out_cost", "node_duration_tag": "duration", "node_param_cost_tag": "param_cost"}
"""The graph tags of Moccasin's node-link files and the field names its published graphs give them."""
_TAG_MEANINGS = {"node_output_cost_tag": "each node's output memory, a whole number of bytes",
                 "node_duration_tag": "each node's compute cost, a number >= 0",
                 "node_param_cost_tag": "each node's parameter memory, a whole number of bytes"}


def graph_from_node_link(doc: Mapping[str, Any], default_name: str = "graph") -> ComputeGraph:
    """Read a node-link graph as Checkmate or Moccasin publish their benchmark graphs.

    Nodes are keyed by their ``id``, or by their position in the list when they have none (as
    networkx's ``node_link_graph`` does; Moccasin's files carry no ids); node ids are those keys
    as strings, and ``name`` is the label. Links name their ends ``source``/``target`` or, in
    Moccasin's files, ``"0"``/``"1"``. Fields: Checkmate's ``cost_ram`` (memory) and ``cost_cpu``
    (cost); in Moccasin's files the graph's tags name them (``node_output_cost_tag``: memory,
    ``node_duration_tag``: cost, ``node_param_cost_tag``: parameter memory, which becomes a pinned
    ``param`` node feeding the node), ``order`` is a topological order (the nodes are taken in it,
    so checkpoint-all runs in it), and every node is a plain ``forward`` computation (the random
    layered graphs are compute DAGs, not training graphs). Checkmate's training graphs mark
    ``backward`` nodes; a node called ``loss`` gets kind ``loss``. Nothing else is pinned; the
    outputs are every ``backward`` node plus every sink.

    Raises
    ------
    GraphError
        Naming the node, link or graph field that is missing or wrong and what it should hold.
    """
    if doc.get("directed") is False:
        raise GraphError("node-link graph is undirected (\"directed\": false); a compute graph must be directed")
    meta = doc.get("graph")
    meta = meta if isinstance(meta, Mapping) else {}
    fields = _node_link_fields(meta)
    raw_links = doc.get("links", doc.get("edges"))
    if not isinstance(raw_links, list):
        raise GraphError("node-link graph: \"links\" must be a list of links ({\"source\": ..., \"target\": ...}, or "
                         "{\"0\": ..., \"1\": ...} in Moccasin's files)")
    nodes: dict[str, Node] = {}
    params: list[tuple[Node, str]] = []  # (pinned parameter node, the node it feeds)
    backward: list[str] = []
    for position, raw in enumerate(doc["nodes"]):
        if not isinstance(raw, Mapping):
            raise GraphError(f"node-link node #{position}: expected an object, got {raw!r}")
        node_id = str(raw.get("id", position))
        where = f"node-link node '{node_id}'" + ("" if "id" in raw else f" (node #{position}: it has no \"id\")")
        name = raw.get("name")
        mem = _whole_bytes(raw, fields.memory, where, fields)
        is_backward = bool(raw.get("backward", False))
        kind = ("loss" if isinstance(name, str) and name.lower() == "loss" else
                "backward" if is_backward else "forward")
        if is_backward:
            backward.append(node_id)
        label = str(name) if name is not None and str(name) != node_id else None
        nodes[node_id] = Node(id=node_id, mem=mem, cost=_cost(raw, fields.cost, where, fields), kind=kind,
                              label=label)
        if fields.params is not None and raw.get(fields.params, 0) != 0:
            params.append((Node(id=f"{node_id}.params", mem=_whole_bytes(raw, fields.params, where, fields), cost=0.0,
                                kind="param", pinned=True, label=f"{label or node_id} params"), node_id))
    edges = [(param.id, owner) for param, owner in params]
    for position, link in enumerate(raw_links):
        edges.append(_link_ends(link, position, nodes))
    has_succ = {u for u, _ in edges}
    outputs = list(dict.fromkeys(backward + [i for i in nodes if i not in has_succ]))
    ordered = _in_given_order(nodes, meta.get("order"), edges) if "order" in meta else list(nodes.values())
    name = meta.get("name") or default_name
    return ComputeGraph([param for param, _ in params] + ordered, edges, outputs, name=str(name))


def _node_link_fields(meta: Mapping[str, Any]) -> _NodeLinkFields:
    """Checkmate's field names, or the ones a Moccasin file's graph tags name."""
    given = {tag: meta[tag] for tag in MOCCASIN_TAGS if tag in meta}
    if not given:
        return _NodeLinkFields("cost_ram", "cost_cpu", None, tagged=False)
    for tag in ("node_output_cost_tag", "node_duration_tag"):
        if tag not in given:
            raise GraphError(f"node-link graph: graph.{', graph.'.join(given)} given but not graph.{tag} (the node "
                             f"field holding {_TAG_MEANINGS[tag]}; Moccasin's graphs use \"{MOCCASIN_TAGS[tag]}\")")
    for tag, value in given.items():
        if not isinstance(value, str) or not value:
            raise GraphError(f"node-link graph: graph.{tag} must name a node field (a string such as "
                             f"\"{MOCCASIN_TAGS[tag]}\"), got {value!r}")
    return _NodeLinkFields(given["node_output_cost_tag"], given["node_duration_tag"], given.get("node_param_cost_tag"),
                           tagged=True)


def _number(raw: Mapping[str, Any], field: str, where: str, fields: _NodeLinkFields) -> float:
    if field not in raw:
        raise GraphError(f"{where}: missing \"{field}\" ({fields.describe(field)})")
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise GraphError(f"{where}: \"{field}\" must be a number >= 0 ({fields.describe(field)}), got {value!r}")
    return value


def _whole_bytes(raw: Mapping[str, Any], field: str, where: str, fields: _NodeLinkFields) -> float:
    """The field checked as the file spells it; the graph converts it to bytes and checks its size."""
    value = _number(raw, field, where, fields)
    if value != int(value):
        raise GraphError(f"{where}: \"{field}\" must be a whole number of bytes ({fields.describe(field)}), got "
                         f"{value!r}")
    return value


def _cost(raw: Mapping[str, Any], field: str, where: str, fields: _NodeLinkFields) -> float:
    return float(_number(raw, field, where, fields))


def _link_ends(link: Any, position: int, nodes: Mapping[str, Node]) -> tuple[str, str]:
    """``(source id, target id)`` of a link keyed ``source``/``target`` or ``"0"``/``"1"``."""
    keys = ("source", "target") if isinstance(link, Mapping) and ("source" in link or "target" in link) else ("0", "1")
    if not isinstance(link, Mapping):
        raise GraphError(f"node-link link #{position}: expected an object such as {{\"source\": 0, \"target\": 1}}, "
                         f"got {link!r}")
    ends = []
    for key, role in zip(keys, ("source", "target")):
        if key not in link:
            raise GraphError(f"node-link link #{position}: missing \"{key}\" (its {role} node; links name their ends "
                             f"\"source\" and \"target\", or \"0\" and \"1\" in Moccasin's files), got {link!r}")
        end = str(link[key])
        if end not in nodes:
            raise GraphError(f"node-link link #{position}: its {role} {link[key]!r} is not a node (nodes without an "
                             f"\"id\" are numbered by their position, from 0)")
        ends.append(end)
    return ends[0], ends[1]


def _in_given_order(nodes: Mapping[str, Node], order: Any, edges: list[tuple[str, str]]) -> list[Node]:
    """The nodes in the file's ``order``, checked to be every node once, inputs first."""
    if not isinstance(order, list):
        raise GraphError(f"node-link graph: graph.order must be a list of node ids (a topological order), got "
                         f"{type(order).__name__}")
    ids = [str(v) for v in order]
    unknown = [v for v in ids if v not in nodes]
    if unknown:
        raise GraphError(f"node-link graph: graph.order names {unknown[0]!r}, which is not a node")
    if len(set(ids)) != len(ids) or len(ids) != len(nodes):
        missing = [v for v in nodes if v not in set(ids)]
        raise GraphError(f"node-link graph: graph.order must list every node exactly once ({len(ids)} entries for "
                         f"{len(nodes)} nodes" + (f"; '{missing[0]}' is missing" if missing else "") + ")")
    position = {v: k for k, v in enumerate(ids)}
    for u, v in edges:
        if u in position and position[u] > position[v]:
            raise GraphError(f"node-link graph: graph.order is not a topological order: '{v}' comes before its input "
                             f"'{u}'")
    return [nodes[v] for v in ids]


GRAPH_FILE_FORMATS = ("remat-graph", "moccasin")
"""What :func:`save_graph` writes: our own format, or Moccasin's node-link JSON."""


def save_graph(graph: ComputeGraph, path: str | Path, format: str = "remat-graph") -> None:
    """Write ``graph`` as ``remat-graph`` v1 JSON, or in Moccasin's node-link format (:func:`moccasin_document`)."""
    if format not in GRAPH_FILE_FORMATS:
        raise GraphError(f"unknown graph file format {format!r}; expected one of {', '.join(GRAPH_FILE_FORMATS)}")
    doc = graph.to_json() if format == "remat-graph" else moccasin_document(graph)
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def moccasin_document(graph: ComputeGraph) -> dict[str, Any]:
    """The graph as Moccasin's node-link JSON, which :func:`parse_graph` reads back.

    Nodes are listed in graph order without ids (each is its position), ``name`` is the label
    (or the id), links are ``{"0": source, "1": target}``, and the graph's tags name the fields
    (``out_cost``: memory, ``duration``: cost, ``param_cost``: the bytes of the pinned nodes only
    that node reads); ``order`` is the topological order checkpoint-all runs in.

    Raises
    ------
    GraphError
        When the format cannot hold the graph: a pinned node read by several nodes (Moccasin's
        format has parameters per node only), or outputs other than what a reader infers (every
        sink, plus every backward node).
    """
    computed = [i for i, node in enumerate(graph.nodes) if not node.pinned]
    position = {i: k for k, i in enumerate(computed)}
    param_bytes = [0] * len(graph)
    for i, node in enumerate(graph.nodes):
        if node.pinned:
            readers = graph.succ_idx[i]
            if len(readers) != 1:
                raise GraphError(f"pinned node '{node.id}' is read by {len(readers)} nodes; Moccasin's format keeps "
                                 f"parameters per node (param_cost), so only a pinned node read by exactly one node "
                                 f"fits: write remat-graph instead")
            param_bytes[readers[0]] += node.mem
    implied = {i for i in computed if not graph.succ_idx[i] or graph.nodes[i].kind == "backward"}
    if implied != set(graph.output_idx):
        raise GraphError("the graph's outputs are not its sinks (and backward nodes), which is all Moccasin's format "
                         "can say: write remat-graph instead")
    sources = [position[i] for i in computed if not any(not graph.pinned[p] for p in graph.pred_idx[i])]
    sinks = [position[i] for i in computed if not graph.succ_idx[i]]
    meta: dict[str, Any] = {"name": graph.name, **({"source_node": sources[0]} if len(sources) == 1 else {}),
                            **({"target_node": sinks[0]} if len(sinks) == 1 else {}), **MOCCASIN_TAGS,
                            "order": [position[i] for i in graph.topo_idx if not graph.pinned[i]]}
    nodes = [{MOCCASIN_TAGS["node_output_cost_tag"]: graph.mem[i],
              MOCCASIN_TAGS["node_param_cost_tag"]: param_bytes[i],
              MOCCASIN_TAGS["node_duration_tag"]: graph.cost[i], "name": graph.nodes[i].label or graph.ids[i]}
             for i in computed]
    index = graph.index
    links = [{"0": position[index[u]], "1": position[index[v]]} for u, v in graph.edges if not graph.pinned[index[u]]]
    return {"directed": True, "multigraph": False, "graph": meta, "nodes": nodes, "links": links}


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
