"""Coarsen an op-level graph to module level: one node per module call per pass.

Ops are grouped by ``(module, call, pass)``: the ``nn.Module`` call they ran in (``layer1.0.conv1``,
its first call), and whether they are forward, loss or backward. A model that declares its blocks (a Hugging
Face model's decoder or encoder layers, :attr:`~.capture.JointGraph.blocks`) is grouped at them: every op
inside ``model.layers.3`` is of that module. A group's tensors share one
lifetime, so two kinds of tensor are split off into groups of their own, or a small tensor would
keep a big one alive:

- ``:saved``: forward tensors that only the backward pass reads (BatchNorm's batch statistics,
  dropout's mask, max-pool's indices); the call's output is freed when the forward no longer needs
  it, while these stay for the backward;
- ``:grads``: the graph's outputs (the parameter gradients), resident to the end, apart from the
  activation gradients of the same call;
- the end of the step (the traced graph's node that holds the gradients, outputs and loss to the
  end) stays a node of its own, ``step_end``.

Pinned nodes are grouped by module and kind (``layer1.0.bn1:params``, ``layer1.0.bn1:buffers``).
A group is one node whose

- ``mem`` is the bytes leaving the group: the members read by another group or that are outputs
  (a group's internal temporaries live and die inside it);
- ``transient`` is what running the group holds beyond that at its busiest moment: its members in
  order, each freed after its last reader inside the group, each member's own transient bytes
  counted while it runs (the executor runs a group exactly so);
- ``cost`` is the sum of its members' costs;
- predecessors are the groups its members read.

Grouping must keep the graph acyclic. Walking the ops in topological order, an op joins the latest
group of its key only if every group it reads from is that group or was opened before it; otherwise
it opens a new group of the same key. All edges between groups then go from an earlier group to a
later one, so the result is a DAG. The rule rarely splits a call (when autograd interleaves two
calls' backward ops with a dependency between them), and the ``#2`` suffix of the node id shows it.

Notes
-----
One pass over the nodes and their edges: O(V + E).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from ...graph import ComputeGraph, Node

PASS_NAMES = {"forward": "fwd", "loss": "loss", "backward": "bwd"}
PINNED_GROUP_NAMES = {"param": "params", "buffer": "buffers", "input": "inputs"}
OUT, SAVED, GRADS, END = "out", "saved", "grads", "end"
"""Roles of a group: a pass's ordinary tensors, forward tensors kept only for backward, outputs, the step's end."""
END_ID = "step_end"
ROOT_NAME = "(model)"


@dataclass
class _Group:
    key: tuple
    index: int
    module: str
    kind: str
    pinned: bool
    role: str | None
    members: list[int] = field(default_factory=list)


def coarsen_by_module(graph: ComputeGraph) -> ComputeGraph:
    """The module-level graph of an op-level graph.

    Parameters
    ----------
    graph : ComputeGraph
        Nodes carry ``module`` (None counts as the model itself) and ``kind``. When the graph came
        from the tracer, ``attachments.binding.module_calls`` separates the calls of a module
        used more than once (a shared activation); without it, a module's calls merge wherever the
        acyclicity rule allows.

    Returns
    -------
    ComputeGraph
        Node ids ``<module>:<pass>`` (``layer1.0.conv1:fwd``, ``layer1.0.conv1:bwd``,
        ``layer1.0.bn1:saved``, ``layer1.0.conv1:grads``, ``<loss>:loss``, ``layer1.0.conv1:params``),
        with ``#n`` for the n-th node of a module and pass (a module called more than once, or a
        call the acyclicity rule split). The op is the module's class name when known.
        Attachments: the input graph's, with ``groups`` (node id -> op-level ids) and ``op_graph`` (the
        input graph).
    """
    binding, joint = graph.attachments.binding, graph.attachments.joint
    calls = binding.module_calls if binding is not None else {}
    module_types = binding.module_types if binding is not None else {}
    groups, group_of = _group(graph, calls, joint.blocks if joint is not None else ())
    return _build(graph, groups, group_of, module_types)


def enclosing_block(module: str, blocks: tuple[str, ...]) -> str | None:
    """The block ``module`` lies in (itself, or the one whose path prefixes it), if any."""
    return next((b for b in blocks if module == b or module.startswith(b + ".")), None)


def _group(graph: ComputeGraph, calls, blocks: tuple[str, ...] = ()) -> tuple[list[_Group], list[int]]:
    nodes = graph.nodes
    groups: list[_Group] = []
    group_of = [-1] * len(nodes)
    latest: dict[tuple, int] = {}
    outputs = set(graph.output_idx)
    for i in graph.topo_idx:
        node = nodes[i]
        module = node.module or ""
        module = enclosing_block(module, blocks) or module
        if node.pinned:
            key = ("pinned", module, node.kind)
        else:
            key = (module, calls.get(node.id, 0), node.kind, _role(graph, i, outputs))
        g = latest.get(key)
        if g is None or not _may_join(graph, i, g, group_of, groups):
            g = len(groups)
            groups.append(_Group(key, g, module, node.kind, node.pinned, None if node.pinned else key[-1]))
            latest[key] = g
        groups[g].members.append(i)
        group_of[i] = g
    return groups, group_of


def _role(graph: ComputeGraph, i: int, outputs: set[int]) -> str:
    """``end`` for the step's end, ``grads`` for an output, ``saved`` for a forward tensor only backward nodes
    read, else ``out``."""
    if i in outputs and graph.nodes[i].kind == "other" and not graph.succ_idx[i]:
        return END
    if i in outputs:
        return GRADS
    readers = graph.succ_idx[i]
    if graph.nodes[i].kind != "backward" and readers and all(graph.nodes[j].kind == "backward" for j in readers):
        return SAVED
    return OUT


def _may_join(graph: ComputeGraph, i: int, g: int, group_of: list[int], groups: list[_Group]) -> bool:
    """Node i may join group g if everything it reads is in g, pinned, or in a group opened before g."""
    for j in graph.pred_idx[i]:
        h = group_of[j]
        if h != g and not groups[h].pinned and h > g:
            return False
    return True


def _build(graph: ComputeGraph, groups: list[_Group], group_of: list[int], module_types) -> ComputeGraph:
    nodes = graph.nodes
    outputs = set(graph.output_idx)
    ids = _group_ids(groups)
    coarse: list[Node] = []
    for group, gid in zip(groups, ids):
        leaving = [i for i in group.members
                   if group.pinned or i in outputs or any(group_of[s] != group.index for s in graph.succ_idx[i])]
        only = nodes[leaving[0]] if len(leaving) == 1 else None
        mem = sum(graph.mem[i] for i in leaving)
        coarse.append(Node(
            id=gid, mem=mem, cost=sum(graph.cost[i] for i in group.members),
            kind=group.kind, pinned=group.pinned,
            op=None if group.pinned else module_types.get(group.module),
            shape=only.shape if only is not None else None, dtype=only.dtype if only is not None else None,
            module=group.module, label=_label(group, gid),
            transient=0 if group.pinned else max(0, _busiest(graph, group.members, set(leaving)) - mem)))
    edges = {(ids[group_of[graph.index[u]]], ids[group_of[graph.index[v]]]) for u, v in graph.edges}
    edges = sorted((u, v) for u, v in edges if u != v)
    out_ids = list(dict.fromkeys(ids[group_of[i]] for i in graph.output_idx))
    members = MappingProxyType({gid: tuple(nodes[i].id for i in g.members) for g, gid in zip(groups, ids)})
    return ComputeGraph(coarse, edges, out_ids, name=graph.name, attachments=graph.attachments.coarsened(members, graph))


def _busiest(graph: ComputeGraph, members: list[int], leaving: set[int]) -> int:
    """The most bytes of a group's own members held at once while it runs: members in topological order (the
    order ``members`` is in), each freed after its last reader inside the group unless it leaves the group, each
    member's transient bytes counted while it runs."""
    inside = set(members)
    last_reader: dict[int, int] = {}
    for i in members:
        for j in graph.pred_idx[i]:
            if j in inside:
                last_reader[j] = i
    held = busiest = 0
    for i in members:
        held += graph.mem[i]
        busiest = max(busiest, held + graph.transient[i])
        for j in graph.pred_idx[i]:
            if last_reader.get(j) == i and j not in leaving:
                held -= graph.mem[j]
        if i not in last_reader and i not in leaving:
            held -= graph.mem[i]
    return busiest


def _group_ids(groups: list[_Group]) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for group in groups:
        if group.role == END:
            ids.append(END_ID)
            continue
        if group.pinned:
            suffix = PINNED_GROUP_NAMES.get(group.kind, group.kind)
        elif group.role == OUT:
            suffix = PASS_NAMES.get(group.kind, group.kind)
        else:
            suffix = group.role
        base = f"{group.module or ROOT_NAME}:{suffix}"
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return ids


def _label(group: _Group, gid: str) -> str:
    """``conv1 fwd``: the module's last name and the pass (the full path is in ``module``)."""
    if group.role == END:
        return "end of step"
    name = group.module.rpartition(".")[2] if group.module else ROOT_NAME
    return f"{name} {gid.rpartition(':')[2]}"
