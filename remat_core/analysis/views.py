"""What to draw of a graph: levels of detail over the tree of its modules.

A real model's training graph has thousands of nodes; drawn one by one it is a hairball. Its nodes
form a hierarchy, and a :class:`GraphView` cuts through it:

- a node's **groups** are the prefixes of its dotted module path (``layer3`` holds ``layer3.1``,
  which holds ``layer3.1.conv2``). Nodes without a module path (generated graphs, most files) are
  grouped instead into **runs** of consecutive nodes in topological order, a few levels deep (about
  :data:`RUNS_PER_GROUP` parts per level), so that every graph has levels of detail;
- a group is drawn as one node per pass (forward, backward, parameters, buffers, inputs), so a
  collapsed module still reads forward then backward;
- :func:`graph_view` opens the groups in ``expanded`` (their subgroups and their own nodes are
  drawn) and draws every other group as one node; :func:`default_expansion` opens whole levels
  while the view stays under :data:`DEFAULT_VIEW_NODES` nodes; :func:`full_view` is every node.

Views are for drawing only: solvers always run on the full graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

import numpy as np

from ..graph import NODE_KINDS, ComputeGraph, node_labels

DEFAULT_VIEW_NODES = 150
"""A view opens whole levels of the hierarchy while it stays at most this many nodes: readable at a glance."""
MAX_DRAWN_NODES = 20_000
"""More nodes than this are not drawn as one view (WebGL draws 10,000 smoothly; the page's data grows
with every node): open fewer groups."""
RUNS_PER_GROUP = 12
"""About this many parts per level when nodes without a module path are grouped into runs."""

PASSES = {"input": "inputs", "param": "parameters", "buffer": "buffers", "forward": "forward", "loss": "forward",
          "backward": "backward", "other": "other"}
"""Node kind -> the pass a group is split by (the loss is drawn with the forward pass)."""
_RUN_KEY = "runs:{pass_}:{level}:{index}"


@dataclass(frozen=True)
class Group:
    """A module (or a run of nodes without one) that a view may draw as one node per pass.

    Attributes
    ----------
    path : str
        Its key: the dotted module path, or an internal key for a run.
    label : str
        The name people read: the module path, or ``first … last`` (the labels of a run's ends).
    depth : int
        1 for the top level.
    parent : str or None
        The group holding it (None at the top level).
    size : int
        Graph nodes in it, every pass.
    first : int
        Topological position of its first node.
    """

    path: str
    label: str
    depth: int
    parent: str | None
    size: int
    first: int


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """The groups of a graph (see the module docstring).

    Attributes
    ----------
    chains : tuple of tuple of str
        Per graph node index, the paths of the groups holding it, outermost first.
    passes : tuple of str
        Per graph node index, its pass (:data:`PASSES`).
    groups : mapping of str to Group
        Every group, in order of its first node.
    children : mapping of (str or None) to tuple of str
        The subgroups of a group (None: the top level), in order of their first nodes.
    runs : frozenset of str
        The groups that are runs of nodes without a module path (the others are modules).
    """

    chains: tuple[tuple[str, ...], ...]
    passes: tuple[str, ...]
    groups: Mapping[str, Group]
    children: Mapping[str | None, tuple[str, ...]]
    runs: frozenset[str]

    @cached_property
    def depth(self) -> int:
        """The deepest chain: at this depth every node is drawn on its own."""
        return max((len(c) for c in self.chains), default=0)

    @cached_property
    def view_sizes(self) -> tuple[int, ...]:
        """How many nodes the view opened to depth d has, for d = 0 (top level) .. :attr:`depth` (every node)."""
        sizes = []
        for depth in range(self.depth + 1):
            groups = {(pass_, chain[depth]) for chain, pass_ in zip(self.chains, self.passes) if len(chain) > depth}
            sizes.append(len(groups) + sum(len(chain) <= depth for chain in self.chains))
        return tuple(sizes)

    def members(self, path: str) -> np.ndarray:
        """The graph node indices inside group ``path`` (every pass, subgroups included)."""
        return np.array([i for i, chain in enumerate(self.chains) if path in chain], dtype=np.int64)

    def ancestors(self, path: str) -> tuple[str, ...]:
        """The groups holding group ``path``, outermost first (not ``path`` itself)."""
        found = []
        parent = self.groups[path].parent
        while parent is not None:
            found.append(parent)
            parent = self.groups[parent].parent
        return tuple(reversed(found))


def hierarchy(graph: ComputeGraph) -> Hierarchy:
    """The groups of ``graph``: module paths, and runs of the nodes without one (computed once per graph)."""
    return graph.memo("view_hierarchy", lambda: _build_hierarchy(graph))


def _run_sizes(count: int) -> tuple[int, ...]:
    """Sizes of the nested runs, outermost first, that split ``count`` nodes about
    :data:`RUNS_PER_GROUP` ways per level (each size a multiple of the next, so runs nest)."""
    if count <= RUNS_PER_GROUP:
        return ()
    levels = math.ceil(math.log(count) / math.log(RUNS_PER_GROUP))
    branching = math.ceil(count ** (1 / levels))
    return tuple(branching ** (levels - level) for level in range(1, levels))


def run_label(first: str, last: str) -> str:
    """The name of a run of nodes from its ends' labels, saying once what they share:
    ``layer 1 (fwd)`` and ``layer 81 (fwd)`` give ``layer 1 … 81 (fwd)``."""
    if first == last:
        return first
    first_words, last_words = first.split(" "), last.split(" ")
    head = 0
    while head < min(len(first_words), len(last_words)) - 1 and first_words[head] == last_words[head]:
        head += 1
    tail = 0
    while tail < min(len(first_words), len(last_words)) - head - 1 and first_words[-1 - tail] == last_words[-1 - tail]:
        tail += 1
    end = len(last_words) - tail
    shared_tail = " ".join(last_words[end:])
    return " ".join(first_words[:len(first_words) - tail]) + " … " + " ".join(last_words[head:end]) + \
        (f" {shared_tail}" if shared_tail else "")


def _build_hierarchy(graph: ComputeGraph) -> Hierarchy:
    position = topological_positions(graph)
    labels = node_labels(graph)
    passes = tuple(PASSES[n.kind] for n in graph.nodes)
    chains: list[tuple[str, ...]] = [()] * len(graph)
    run_labels: dict[str, str] = {}
    loose: dict[str, list[int]] = {}
    for i, node in enumerate(graph.nodes):
        if node.module:
            parts = node.module.split(".")
            chains[i] = tuple(".".join(parts[:k]) for k in range(1, len(parts) + 1))
        else:
            loose.setdefault(passes[i], []).append(i)
    for pass_, members in loose.items():
        members.sort(key=lambda i: position[i])
        sizes = _run_sizes(len(members))
        for rank, i in enumerate(members):
            chains[i] = tuple(_RUN_KEY.format(pass_=pass_, level=level, index=rank // size)
                              for level, size in enumerate(sizes, 1))
        for level, size in enumerate(sizes, 1):
            for start in range(0, len(members), size):
                key = _RUN_KEY.format(pass_=pass_, level=level, index=start // size)
                run_labels[key] = run_label(labels[graph.ids[members[start]]],
                                            labels[graph.ids[members[min(start + size, len(members)) - 1]]])
    size: dict[str, int] = {}
    first: dict[str, int] = {}
    parent: dict[str, str | None] = {}
    depth_of: dict[str, int] = {}
    for i, chain in enumerate(chains):
        for depth, path in enumerate(chain):
            size[path] = size.get(path, 0) + 1
            first[path] = min(first.get(path, position[i]), position[i])
            parent.setdefault(path, chain[depth - 1] if depth else None)
            depth_of.setdefault(path, depth + 1)
    ordered = sorted(size, key=lambda p: (first[p], p))
    groups = {p: Group(p, run_labels.get(p, p), depth_of[p], parent[p], size[p], first[p]) for p in ordered}
    children: dict[str | None, list[str]] = {}
    for p in ordered:
        children.setdefault(parent[p], []).append(p)
    return Hierarchy(tuple(chains), passes, groups, {k: tuple(v) for k, v in children.items()}, frozenset(run_labels))


def topological_positions(graph: ComputeGraph) -> np.ndarray:
    """Per graph node index, its position in the graph's topological order."""
    def build() -> np.ndarray:
        position = np.empty(len(graph), dtype=np.int64)
        position[np.asarray(graph.topo_idx, dtype=np.int64)] = np.arange(len(graph))
        return position
    return graph.memo("topological_positions", build)


def edge_index(graph: ComputeGraph) -> tuple[np.ndarray, np.ndarray]:
    """The graph's edges as two arrays of node indices (sources, targets)."""
    def build() -> tuple[np.ndarray, np.ndarray]:
        index = graph.index
        pairs = np.array([(index[u], index[v]) for u, v in graph.edges], dtype=np.int64).reshape(-1, 2)
        return pairs[:, 0].copy(), pairs[:, 1].copy()
    return graph.memo("edge_index", build)


@dataclass(frozen=True)
class ViewNode:
    """One drawn node: a graph node, or a group of them (one pass of a module or run).

    ``group`` is the group's path (None for a graph node; ``module`` is that path for a module, None
    for a run of nodes without one); ``size`` the graph nodes it stands for;
    ``order`` the topological position of its first node; ``mem`` and ``cost`` its nodes' totals; its
    kind is its nodes' most common kind; it is pinned when all its nodes are.
    """

    id: str
    label: str
    kind: str
    mem: int
    cost: float
    size: int
    order: int
    pinned: bool
    group: str | None = None
    op: str | None = None
    shape: tuple | None = None
    module: str | None = None


@dataclass(frozen=True, eq=False)
class GraphView:
    """A drawable view of a graph.

    Attributes
    ----------
    nodes : tuple of ViewNode
        In topological order of their first graph node.
    edges : numpy.ndarray
        ``(m, 2)`` view node indices, each pair once, without self-loops (two groups may read each
        other: both directions are kept).
    member_of : numpy.ndarray
        Graph node index -> the index of the view node that holds it.
    expanded : frozenset of str
        The groups opened in this view.
    """

    nodes: tuple[ViewNode, ...]
    edges: np.ndarray
    member_of: np.ndarray
    expanded: frozenset[str]

    def members(self, k: int) -> np.ndarray:
        """The graph node indices that view node ``k`` stands for."""
        return np.flatnonzero(self.member_of == k)

    def view_indices_of(self, graph: ComputeGraph, graph_ids: Iterable[str]) -> set[int]:
        """The view nodes holding any of these graph nodes (ids the graph does not have are ignored)."""
        return {int(self.member_of[graph.index[i]]) for i in graph_ids if i in graph.index}


def graph_view(graph: ComputeGraph, expanded: Iterable[str] = ()) -> GraphView:
    """The view of ``graph`` with the groups in ``expanded`` opened and every other group drawn as one node per pass.

    A group is drawn only when its parent is open (or it is at the top level); a group of one node
    is drawn as that node. Paths that are not groups of this graph are ignored.
    """
    tree = hierarchy(graph)
    opened = frozenset(p for p in expanded if p in tree.groups)
    slot_of: dict[object, int] = {}
    unit = np.empty(len(graph), dtype=np.int64)
    for i, chain in enumerate(tree.chains):
        key: object = i
        for path in chain:
            if path not in opened:
                key = (tree.passes[i], path)
                break
        unit[i] = slot_of.setdefault(key, len(slot_of))
    slots = len(slot_of)
    position = topological_positions(graph)
    first = np.full(slots, len(graph), dtype=np.int64)
    np.minimum.at(first, unit, position)
    rank = np.empty(slots, dtype=np.int64)
    by_first = np.argsort(first, kind="stable")
    rank[by_first] = np.arange(slots)
    member_of = rank[unit]
    size = np.bincount(member_of, minlength=slots)
    mem = np.bincount(member_of, weights=np.asarray(graph.mem, dtype=float), minlength=slots)
    cost = np.bincount(member_of, weights=np.asarray(graph.cost, dtype=float), minlength=slots)
    pinned = np.bincount(member_of, weights=np.asarray(graph.pinned, dtype=float), minlength=slots) == size
    kind_code = np.array([NODE_KINDS.index(n.kind) for n in graph.nodes], dtype=np.int64)
    kinds = np.bincount(member_of * len(NODE_KINDS) + kind_code,
                        minlength=slots * len(NODE_KINDS)).reshape(slots, len(NODE_KINDS)).argmax(axis=1)
    keys = list(slot_of)
    labels = node_labels(graph)
    nodes = []
    for k, slot in enumerate(by_first):
        key = keys[slot]
        if size[k] == 1:
            nodes.append(_leaf(graph, labels, int(graph.topo_idx[first[slot]])))
            continue
        pass_, path = key
        group = tree.groups[path]
        label = group.label if path in tree.runs else f"{group.label} · {pass_}"
        nodes.append(ViewNode(id=f"{path} [{pass_}]", label=label, kind=NODE_KINDS[kinds[k]], mem=int(mem[k]),
                              cost=float(cost[k]), size=int(size[k]), order=int(first[slot]), pinned=bool(pinned[k]),
                              group=path, module=None if path in tree.runs else path))
    source, target = edge_index(graph)
    ends_from, ends_to = member_of[source], member_of[target]
    between = ends_from != ends_to
    pairs = np.unique(ends_from[between] * slots + ends_to[between])
    edges = np.stack([pairs // slots, pairs % slots], axis=1) if slots else np.empty((0, 2), dtype=np.int64)
    return GraphView(tuple(nodes), edges, member_of, opened)


def view_node(graph: ComputeGraph, node_id: str) -> ViewNode:
    """Graph node ``node_id`` as a view node of its own (its facts, whatever view it is drawn in).

    Raises
    ------
    GraphError
        For an id the graph does not have.
    """
    return _leaf(graph, node_labels(graph), graph.index[graph.node(node_id).id])


def _leaf(graph: ComputeGraph, labels: Mapping[str, str], i: int) -> ViewNode:
    node = graph.nodes[i]
    return ViewNode(id=node.id, label=labels[node.id], kind=node.kind, mem=node.mem, cost=node.cost, size=1,
                    order=int(topological_positions(graph)[i]), pinned=node.pinned, op=node.op, shape=node.shape, module=node.module)


def full_view(graph: ComputeGraph) -> GraphView:
    """Every node of ``graph`` on its own."""
    return graph_view(graph, hierarchy(graph).groups)


def expanded_to_depth(graph: ComputeGraph, depth: int) -> frozenset[str]:
    """The groups to open so that the view shows the hierarchy down to ``depth`` (0: the top level)."""
    return frozenset(p for p, g in hierarchy(graph).groups.items() if g.depth <= depth)


def default_expansion(graph: ComputeGraph, max_nodes: int = DEFAULT_VIEW_NODES) -> frozenset[str]:
    """Whole levels opened, as deep as the view stays at most ``max_nodes`` nodes (at least the top level)."""
    sizes = hierarchy(graph).view_sizes
    depth = max((d for d, n in enumerate(sizes) if n <= max_nodes), default=0)
    return expanded_to_depth(graph, depth)


def expand(graph: ComputeGraph, expanded: Iterable[str], path: str) -> frozenset[str]:
    """``expanded`` with group ``path`` opened, with the groups holding it and, while a group opens onto a
    single subgroup and nothing else, that subgroup too (so a click always shows something new)."""
    tree = hierarchy(graph)
    opened = set(expanded) | set(tree.ancestors(path)) | {path}
    while len(tree.children.get(path, ())) == 1 and tree.groups[path].size == tree.groups[tree.children[path][0]].size:
        path = tree.children[path][0]
        opened.add(path)
    return frozenset(opened)


def collapse(graph: ComputeGraph, expanded: Iterable[str], path: str) -> frozenset[str]:
    """``expanded`` with group ``path`` and every group inside it closed."""
    tree = hierarchy(graph)
    return frozenset(p for p in expanded if p != path and path not in tree.ancestors(p))


def reveal(graph: ComputeGraph, expanded: Iterable[str], node_id: str) -> frozenset[str]:
    """``expanded`` with every group holding graph node ``node_id`` opened, so that the node is drawn on its own."""
    return frozenset(expanded) | set(hierarchy(graph).chains[graph.index[graph.node(node_id).id]])


def selection_focus(graph: ComputeGraph, view: GraphView,
                    target: tuple[str, str] | None) -> tuple[int | None, frozenset[int]]:
    """Where a selection is in a view: the view node to ring, and the view nodes to zoom to.

    ``target`` is ``("node", id)`` (ringed where it is drawn, itself or the closed group holding it,
    zoomed with its neighbours) or ``("group", path)`` (a closed module: ringed with its neighbours;
    an open one: its parts, nothing ringed; one inside a closed module: neither).
    """
    if target is None:
        return None, frozenset()
    kind, key = target
    if kind == "group" and key in view.expanded:
        return None, frozenset(np.unique(view.member_of[hierarchy(graph).members(key)]).tolist())
    if kind == "node":
        selected = int(view.member_of[graph.index[key]])
    else:
        selected = next((k for k, n in enumerate(view.nodes) if n.group == key), None)
        if selected is None:
            return None, frozenset()
    touching = (view.edges[:, 0] == selected) | (view.edges[:, 1] == selected)
    return selected, frozenset({selected, *view.edges[touching].ravel().tolist()})


def find(graph: ComputeGraph, text: str, limit: int | None = 50) -> list[tuple[str, str]]:
    """Modules and nodes whose name contains ``text`` (any case): ``("group", path)`` or ``("node", id)``.

    Exact names come first, then names starting with ``text``, then the rest; groups before nodes,
    then in topological order. A node is found by its label or its id. At most ``limit`` (None: all).
    """
    wanted = text.strip().lower()
    if not wanted:
        return []
    tree = hierarchy(graph)
    labels = node_labels(graph)
    position = topological_positions(graph)
    found = []
    for path, group in tree.groups.items():
        if path in tree.runs:
            continue  # a run is named after its ends: its nodes are found instead
        found.append((_closeness(group.label.lower(), wanted), 0, group.first, ("group", path)))
    for i, node_id in enumerate(graph.ids):
        closeness = min(_closeness(labels[node_id].lower(), wanted), _closeness(node_id.lower(), wanted))
        found.append((closeness, 1, int(position[i]), ("node", node_id)))
    return [match for closeness, *_, match in sorted(m for m in found if m[0] < 3)][:limit]


def _closeness(name: str, wanted: str) -> int:
    """0: the name is ``wanted``; 1: starts with it; 2: contains it; 3: does not contain it."""
    if name == wanted:
        return 0
    if name.startswith(wanted):
        return 1
    return 2 if wanted in name else 3
