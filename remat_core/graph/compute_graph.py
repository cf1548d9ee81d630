"""The training-graph model: an immutable DAG of tensor-producing operations.

A :class:`ComputeGraph` node is one operation and the tensor it produces; an edge ``u -> v`` says
that v reads u's output. Pinned nodes (inputs, parameters, buffers) are resident from start to end,
are never computed or freed, still count toward memory, and have no predecessors. ``outputs`` are
the nodes a schedule must compute at least once. A node's ``transient`` bytes are what its kernel
allocates beyond its outputs while it runs (a workspace, temporaries), freed before it returns: they
count at the step that computes it, and only there. Nodes with the same ``kernel`` are the outputs of
one call of a multi-output op: the call allocates them all at once (see the simulator).

The graph validates itself once, on construction, and never changes afterwards (setting or
deleting an attribute raises :class:`AttributeError`), so derived facts (topological order,
ancestors, the content hash) are computed once and cached. Integer indices
(``graph.index[id]``) and the parallel arrays ``mem``, ``cost``, ``pinned``, ``pred_idx``,
``succ_idx`` are the fast path that the simulator and solvers use.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import numbers
from dataclasses import dataclass, fields, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping

import networkx as nx

from ..errors import GraphError
from .attachments import NONE as NO_ATTACHMENTS
from .attachments import Attachments

NODE_KINDS = ("input", "param", "buffer", "forward", "loss", "backward", "other")
"""Every kind a node may have. Pinned nodes are usually ``input``, ``param`` or ``buffer``."""

GRAPH_FORMAT = "remat-graph"
GRAPH_FORMAT_VERSION = 1

_OPTIONAL_FIELDS = ("op", "shape", "dtype", "module", "label", "kernel")
_DEFAULTED_FIELDS = {"transient": 0}
"""Fields written to JSON only when they differ from their default (older documents read as the default)."""

MAX_NODE_BYTES = 2**50
"""The most bytes one node may hold (1 PiB): no accelerator or host holds a tensor near this size, so a
larger ``mem`` is a unit mistake or a damaged file."""
MAX_GRAPH_BYTES = 2**53
"""The most bytes all nodes may hold together (8 PiB): every sum of sizes then stays exact as a double
(numpy's float64, the browser's numbers), so peaks and budgets never round or overflow."""
MAX_NODE_COST = 1e18
"""The largest ``cost`` of one node: 10**18 FLOPs is about a quarter hour of a whole 2024 GPU on one op;
costs in seconds or bytes moved are far smaller. Larger values are a unit mistake, and LP/MILP solvers
read coefficients near 1e20 as infinite."""


@dataclass(frozen=True, slots=True)
class Node:
    """One operation and the tensor it produces.

    Parameters
    ----------
    id : str
        Unique name of the node.
    mem : int
        Bytes of the node's output (>= 0).
    cost : float
        Time or FLOPs to compute it (>= 0, finite).
    kind : str
        One of :data:`NODE_KINDS`.
    pinned : bool
        Always resident, never computed or freed (inputs, parameters).
    op, shape, dtype, module, label : optional
        The operator (``aten.mm``), output shape, dtype, the ``nn.Module`` path it came from, and a
        short display label.
    transient : int
        Bytes the op allocates beyond its outputs while it runs (its kernel's workspace and
        temporaries), freed before it returns: counted at the step that computes the node. 0 when
        unknown or none (graphs from files, ops that allocate only their output).
    kernel : str, optional
        For an output of a multi-output op (BatchNorm's output and statistics, a convolution's three
        gradients): a name shared by the op's other outputs. One call of the op allocates them all.
    """

    id: str
    mem: int
    cost: float
    kind: str = "other"
    pinned: bool = False
    op: str | None = None
    shape: tuple | None = None
    dtype: str | None = None
    module: str | None = None
    label: str | None = None
    transient: int = 0
    kernel: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The node as a ``remat-graph`` node object (optional fields only when set)."""
        out: dict[str, Any] = {"id": self.id, "mem": self.mem, "cost": self.cost, "kind": self.kind,
                               "pinned": self.pinned}
        for name in _OPTIONAL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = _shape_to_json(value) if name == "shape" else value
        for name, default in _DEFAULTED_FIELDS.items():
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        return out

    @property
    def display_name(self) -> str:
        """The label when there is one, else the id."""
        return self.label or self.id


def _shape_to_json(shape: Any) -> Any:
    if isinstance(shape, tuple):
        return [_shape_to_json(s) for s in shape]
    return shape


_SHAPE_HELP = "a list of non-negative integers ([32, 64]; [] for a scalar), or a list of such lists for tuple outputs"


def _check_shape(node_id: str, shape: Any) -> tuple | None:
    """``shape`` as a tuple of dims (or of dim tuples, for tuple outputs); lists are accepted, anything
    else is refused, so that every reader (JSON, the app's tooltips) can trust it."""
    if shape is None:
        return None
    if isinstance(shape, (list, tuple)):
        if all(_is_dim(d) for d in shape):
            return tuple(shape)
        if all(isinstance(s, (list, tuple)) and all(_is_dim(d) for d in s) for s in shape):
            return tuple(tuple(s) for s in shape)
    raise GraphError(f"node '{node_id}': shape must be {_SHAPE_HELP}, got {_short(shape)}")


def _is_dim(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_mem(node_id: str, value: Any, field: str = "mem") -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0 \
            or value != int(value):
        raise GraphError(f"node '{node_id}': {field} must be a non-negative integer number of bytes, got "
                         f"{_short(value)}")
    if value > MAX_NODE_BYTES:
        raise GraphError(f"node '{node_id}': {field} {_short(value)} bytes is more than the {MAX_NODE_BYTES} (1 PiB) "
                         f"one op may hold; no real tensor is that large: is the size in bytes?")
    return int(value)


def _check_cost(node_id: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise GraphError(f"node '{node_id}': cost must be a non-negative finite number, got {_short(value)}")
    if value > MAX_NODE_COST:
        raise GraphError(f"node '{node_id}': cost {_short(value)} is more than the {MAX_NODE_COST:.0e} one op may "
                         f"cost (FLOPs, seconds or bytes moved); no real op costs that much: check the unit")
    return float(value)


def _checked_node(node: Node) -> Node:
    if not isinstance(node.id, str) or not node.id:
        raise GraphError(f"node id must be a non-empty string, got {node.id!r}")
    mem = _check_mem(node.id, node.mem)
    transient = _check_mem(node.id, node.transient, "transient")
    cost = _check_cost(node.id, node.cost)
    if node.kind not in NODE_KINDS:
        raise GraphError(f"node '{node.id}': unknown kind {node.kind!r}; expected one of {', '.join(NODE_KINDS)}")
    if not isinstance(node.pinned, bool):
        raise GraphError(f"node '{node.id}': pinned must be true or false, got {node.pinned!r}")
    if transient and node.pinned:
        raise GraphError(f"node '{node.id}': a pinned node is never computed, so it has no transient bytes "
                         f"(got {transient})")
    return replace(node, mem=mem, cost=cost, transient=transient, shape=_check_shape(node.id, node.shape))


class ComputeGraph:
    """An immutable, validated DAG of tensors.

    Parameters
    ----------
    nodes : iterable of Node
        The nodes, in a meaningful order (execution order for traced graphs); that order breaks
        ties in :meth:`topological_order`.
    edges : iterable of (str, str)
        ``(u, v)``: v reads u's output. Repeated edges are merged.
    outputs : iterable of str, optional
        Nodes that must be computed. Default: every sink that is not pinned.
    name : str
        A display name.
    attachments : Attachments, optional
        What a traced graph carries beside itself (the model, its joint FX graph:
        :class:`~remat_core.graph.attachments.Attachments`); not part of the JSON or the content hash.

    Raises
    ------
    GraphError
        For an empty graph, a duplicate id, a bad mem/cost/kind/shape (a mem over
        :data:`MAX_NODE_BYTES` or a cost over :data:`MAX_NODE_COST` included; the message names the
        node and the field), more than :data:`MAX_GRAPH_BYTES` in all, an edge to an unknown node, a
        pinned node with predecessors, a cycle (one cycle is named), or an unknown/pinned output.

    Notes
    -----
    Immutable once built: setting or deleting any attribute raises :class:`AttributeError`
    (the cached facts and ``content_hash`` would go stale); build a new graph instead. ``memo``
    is the one sanctioned cache, for values derived from the graph.
    """

    def __init__(self, nodes: Iterable[Node], edges: Iterable[tuple[str, str]], outputs: Iterable[str] | None = None,
                 name: str = "graph", attachments: Attachments | None = None):
        self.name = str(name)
        node_list = [_checked_node(n) for n in nodes]
        if not node_list:
            raise GraphError("the graph is empty: it needs at least one node")
        index: dict[str, int] = {}
        for i, node in enumerate(node_list):
            if node.id in index:
                raise GraphError(f"duplicate node id '{node.id}' (node ids must be unique)")
            index[node.id] = i
        _check_total_bytes(self.name, node_list)
        self._nodes = tuple(node_list)
        self._index = index

        preds: list[list[int]] = [[] for _ in node_list]
        succs: list[list[int]] = [[] for _ in node_list]
        seen: set[tuple[int, int]] = set()
        edge_list: list[tuple[str, str]] = []
        for edge in edges:
            u, v = _edge_ends(edge)
            if u not in index:
                raise GraphError(f"edge {u!r} -> {v!r}: unknown source node {u!r}")
            if v not in index:
                raise GraphError(f"edge {u!r} -> {v!r}: unknown target node {v!r}")
            key = (index[u], index[v])
            if key in seen:
                continue
            seen.add(key)
            edge_list.append((u, v))
            preds[key[1]].append(key[0])
            succs[key[0]].append(key[1])
        for i, node in enumerate(node_list):
            if node.pinned and preds[i]:
                first = node_list[preds[i][0]].id
                raise GraphError(f"pinned node '{node.id}' has a predecessor ('{first}'); pinned nodes (inputs, "
                                 f"parameters) are always resident and must have no incoming edges")
        self._edges = tuple(edge_list)
        self.pred_idx: tuple[tuple[int, ...], ...] = tuple(tuple(p) for p in preds)
        self.succ_idx: tuple[tuple[int, ...], ...] = tuple(tuple(s) for s in succs)
        self.mem: tuple[int, ...] = tuple(n.mem for n in node_list)
        self.transient: tuple[int, ...] = tuple(n.transient for n in node_list)
        calls: dict[str, list[int]] = {}
        for i, node in enumerate(node_list):
            if node.kernel is not None:
                calls.setdefault(node.kernel, []).append(i)
        siblings: list[tuple[int, ...]] = [()] * len(node_list)
        for members in calls.values():
            for i in members:
                siblings[i] = tuple(j for j in members if j != i)
        self.siblings: tuple[tuple[int, ...], ...] = tuple(siblings)
        """Per node, the other outputs of its kernel call (nodes with the same ``kernel``)."""
        self.cost: tuple[float, ...] = tuple(n.cost for n in node_list)
        self.pinned: tuple[bool, ...] = tuple(n.pinned for n in node_list)
        self._topo = self._topological_indices()

        if outputs is None:
            out_idx = [i for i in range(len(node_list)) if not succs[i] and not node_list[i].pinned]
            if not out_idx:
                raise GraphError("the graph has no outputs: every sink is pinned; name the outputs explicitly")
        else:
            out_idx = []
            for o in outputs:
                if o not in index:
                    raise GraphError(f"unknown output {o!r}: no node has that id")
                if node_list[index[o]].pinned:
                    raise GraphError(f"output '{o}' is pinned; pinned nodes are never computed, so they cannot be "
                                     f"outputs")
                if index[o] not in out_idx:
                    out_idx.append(index[o])
            if not out_idx:
                raise GraphError("the graph's output list is empty; name at least one node to compute")
        self.output_idx: tuple[int, ...] = tuple(out_idx)
        if attachments is not None and not isinstance(attachments, Attachments):
            raise TypeError(f"attachments must be an Attachments, got {type(attachments).__name__}")
        self._attachments = attachments if attachments is not None else NO_ATTACHMENTS
        self._memo: dict[str, Any] = {}
        self._frozen = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(f"ComputeGraph is immutable: cannot set {name!r} (cached facts and content_hash would "
                                 f"go stale); build a new ComputeGraph instead")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ComputeGraph is immutable: cannot delete {name!r}")

    # -- construction helpers -------------------------------------------------------------------

    def _topological_indices(self) -> tuple[int, ...]:
        """Kahn's algorithm, smallest node index first; names one cycle if there is one."""
        indegree = [len(p) for p in self.pred_idx]
        ready = [i for i, d in enumerate(indegree) if d == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for j in self.succ_idx[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    heapq.heappush(ready, j)
        if len(order) < len(self._nodes):
            left = [i for i, d in enumerate(indegree) if d > 0]
            sub = nx.DiGraph((self._nodes[u].id, self._nodes[v].id) for v in left for u in self.pred_idx[v]
                             if indegree[u] > 0)
            cycle = [u for u, _ in nx.find_cycle(sub)]
            raise GraphError("the graph has a cycle: " + " -> ".join(cycle + [cycle[0]]))
        return tuple(order)

    # -- accessors --------------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes, in the order given."""
        return self._nodes

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        """The edges ``(u, v)``, duplicates merged."""
        return self._edges

    @property
    def outputs(self) -> tuple[str, ...]:
        """Ids of the nodes every schedule must compute."""
        return tuple(self._nodes[i].id for i in self.output_idx)

    @cached_property
    def index(self) -> Mapping[str, int]:
        """Node id -> position in :attr:`nodes` (read-only)."""
        return MappingProxyType(self._index)

    @cached_property
    def ids(self) -> tuple[str, ...]:
        """Node ids, in the order given."""
        return tuple(n.id for n in self._nodes)

    @property
    def attachments(self) -> Attachments:
        """What the graph carries beside itself (not serialised, not hashed; empty for a graph read from a file)."""
        return self._attachments

    def node(self, node_id: str) -> Node:
        """The node with this id; a :class:`GraphError` naming it if there is none."""
        try:
            return self._nodes[self._index[node_id]]
        except KeyError:
            raise GraphError(f"unknown node {node_id!r}") from None

    def preds(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes whose outputs ``node_id`` reads."""
        return tuple(self._nodes[j].id for j in self.pred_idx[self._index_of(node_id)])

    def succs(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes that read ``node_id``'s output."""
        return tuple(self._nodes[j].id for j in self.succ_idx[self._index_of(node_id)])

    def _index_of(self, node_id: str) -> int:
        try:
            return self._index[node_id]
        except KeyError:
            raise GraphError(f"unknown node {node_id!r}") from None

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._index

    def __repr__(self) -> str:
        return (f"ComputeGraph(name={self.name!r}, nodes={len(self)}, edges={len(self._edges)}, "
                f"outputs={len(self.output_idx)})")

    # -- derived facts (computed once) ----------------------------------------------------------

    def topological_order(self) -> tuple[str, ...]:
        """A topological order that keeps the given node order wherever the edges allow."""
        return tuple(self._nodes[i].id for i in self._topo)

    @property
    def topo_idx(self) -> tuple[int, ...]:
        """:meth:`topological_order` as node indices."""
        return self._topo

    @cached_property
    def needed_idx(self) -> frozenset[int]:
        """Indices of the non-pinned nodes some output depends on (outputs included).

        Only these are ever computed: a node that is no output's ancestor is never needed.
        """
        needed: set[int] = set()
        stack = list(self.output_idx)
        while stack:
            i = stack.pop()
            if i in needed:
                continue
            needed.add(i)
            stack.extend(j for j in self.pred_idx[i] if not self.pinned[j] and j not in needed)
        return frozenset(needed)

    @cached_property
    def pinned_bytes(self) -> int:
        """Total memory of the pinned nodes: resident for the whole schedule."""
        return sum(m for m, p in zip(self.mem, self.pinned) if p)

    @cached_property
    def nx(self) -> nx.DiGraph:
        """A frozen networkx DiGraph with every node attribute; edges point from producer to reader."""
        g = nx.DiGraph(name=self.name)
        for n in self._nodes:
            g.add_node(n.id, **{f.name: getattr(n, f.name) for f in fields(Node) if f.name != "id"})
        g.add_edges_from(self._edges)
        return nx.freeze(g)

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON (name included): a stable key for caches."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """Cache a derived value on this (immutable) graph: ``compute()`` runs once per key."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # -- serialisation --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The graph as a ``remat-graph`` v1 document (attachments left out)."""
        return {"format": GRAPH_FORMAT, "version": GRAPH_FORMAT_VERSION, "name": self.name,
                "nodes": [n.to_json() for n in self._nodes],
                "edges": [list(e) for e in self._edges],
                "outputs": list(self.outputs)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "ComputeGraph":
        """Build a graph from a ``remat-graph`` v1 document.

        Raises
        ------
        GraphError
            When the document is not a ``remat-graph`` v1 object or any node/edge is malformed.
        """
        if not isinstance(doc, Mapping):
            raise GraphError(f"a remat-graph document must be a JSON object, got {type(doc).__name__}")
        if doc.get("format") != GRAPH_FORMAT:
            raise GraphError(f"not a remat-graph document: expected \"format\": \"{GRAPH_FORMAT}\", "
                             f"got {doc.get('format')!r}")
        if doc.get("version") != GRAPH_FORMAT_VERSION:
            raise GraphError(f"unsupported remat-graph version {doc.get('version')!r}; this tool reads version "
                             f"{GRAPH_FORMAT_VERSION}")
        raw_nodes = doc.get("nodes")
        if not isinstance(raw_nodes, list):
            raise GraphError("remat-graph: \"nodes\" must be a list of node objects")
        raw_edges = doc.get("edges", [])
        if not isinstance(raw_edges, list):
            raise GraphError("remat-graph: \"edges\" must be a list of [source, target] pairs")
        outputs = doc.get("outputs")
        if outputs is not None and (not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs)):
            raise GraphError("remat-graph: \"outputs\" must be a list of node ids (strings)")
        return cls([_node_from_json(i, raw) for i, raw in enumerate(raw_nodes)], raw_edges, outputs,
                   name=str(doc.get("name", "graph")))


def _check_total_bytes(name: str, nodes: list[Node]) -> None:
    total = sum(n.mem + n.transient for n in nodes)
    if total > MAX_GRAPH_BYTES:
        largest = sorted(nodes, key=lambda n: -n.mem)[:3]
        raise GraphError(f"graph '{name}': its nodes hold {total} bytes together, more than the {MAX_GRAPH_BYTES} "
                         f"(8 PiB) a graph may hold; the largest: "
                         + ", ".join(f"node '{n.id}' mem {n.mem}" for n in largest) + ". Are the sizes in bytes?")


def _edge_ends(edge: Any) -> tuple[str, str]:
    if isinstance(edge, (list, tuple)) and len(edge) == 2 and all(isinstance(x, str) for x in edge):
        return edge[0], edge[1]
    raise GraphError(f"malformed edge {edge!r}: an edge is a pair of node ids, [source, target]")


def _node_from_json(position: int, raw: Any) -> Node:
    if not isinstance(raw, Mapping):
        raise GraphError(f"node #{position}: expected an object with id, mem, cost; got {raw!r}")
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise GraphError(f"node #{position}: \"id\" must be a non-empty string, got {node_id!r}")
    for key in ("mem", "cost"):
        if key not in raw:
            raise GraphError(f"node '{node_id}': missing \"{key}\"")
    for key in ("op", "dtype", "module", "label", "kernel"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise GraphError(f"node '{node_id}': \"{key}\" must be a string, got {raw[key]!r}")
    return Node(id=node_id, mem=raw["mem"], cost=raw["cost"], kind=raw.get("kind", "other"),
                pinned=raw.get("pinned", False), op=raw.get("op"), shape=raw.get("shape"),
                dtype=raw.get("dtype"), module=raw.get("module"), label=raw.get("label"),
                transient=raw.get("transient", 0), kernel=raw.get("kernel"))
