"""A graph whose kernels' transient bytes are nodes of their own: how every solver sees transient memory.

A node's ``transient`` bytes are held only while its op runs, and one call of a multi-output op
allocates all its outputs at once. Rather than teach each solver's own memory model about them, the
solvers' front door hands every solver :func:`with_workspaces`: each node ``v`` whose op holds more
than its output while it runs gets a *workspace* node ``w`` of those bytes, cost 0, that reads ``v``'s
inputs and that ``v`` reads: its transient bytes, and for the first output of a multi-output op (in
the graph's order) the op's other outputs too. Computing ``v`` then needs ``w`` resident, so any
schedule of this graph holds ``w``'s bytes while ``v`` is computed, as the kernel does; freeing ``w``
after its last reader (``v``) gives it back right after. Dropping the workspace ops
(:func:`without_workspaces`) gives a schedule of the original graph. When its outputs are computed
in the graph's order (as every schedule computes them unless it has reason not to), the simulator's
peak for it is at most the one the solver planned for; the front door checks, and asks again for
less when it is not.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .compute_graph import ComputeGraph, Node

WORKSPACE_SUFFIX = "::workspace"
"""What a workspace node's id adds to its op's (with a number after it if that id is taken)."""


def with_workspaces(graph: ComputeGraph) -> ComputeGraph:
    """``graph`` itself when no node has transient bytes; else the graph with a workspace node before each
    node that has some (kept on ``graph``: built once)."""
    if not any(graph.transient) and not any(graph.siblings):
        return graph
    return graph.memo("with workspaces", lambda: _expanded(graph))


def _workspace_bytes(graph: ComputeGraph, i: int) -> int:
    """What node ``i``'s kernel holds beyond its output while it runs, as a solver sees it: its transient bytes,
    and for the first of a multi-output op's outputs, the others (the call that computes it allocates them)."""
    siblings = graph.siblings[i]
    extra = sum(graph.mem[j] for j in siblings) if siblings and i < min(siblings) else 0
    return graph.transient[i] + extra


def _expanded(graph: ComputeGraph) -> ComputeGraph:
    taken = set(graph.ids)
    nodes: list[Node] = []
    edges = [(u, v) for u, v in graph.edges]
    for i, node in enumerate(graph.nodes):
        held = _workspace_bytes(graph, i)
        if held:
            workspace = _fresh(f"{node.id}{WORKSPACE_SUFFIX}", taken)
            nodes.append(Node(workspace, held, 0.0, node.kind, False, node.op, None, None, node.module,
                              f"{node.display_name} · workspace"))
            edges += [(p, workspace) for p in graph.preds(node.id)] + [(workspace, node.id)]
        node = Node(node.id, node.mem, node.cost, node.kind, node.pinned, node.op, node.shape, node.dtype,
                    node.module, node.label)
        nodes.append(node)
    return ComputeGraph(nodes, edges, graph.outputs, name=graph.name, attachments=graph.attachments)


def _fresh(wanted: str, taken: set[str]) -> str:
    name, k = wanted, 1
    while name in taken:
        k += 1
        name = f"{wanted}{k}"
    taken.add(name)
    return name


def without_workspaces(graph: ComputeGraph, ops: Sequence[tuple[str, str]],
                       reasons: Iterable | None) -> tuple[list[tuple[str, str]], list | None]:
    """The ops (and parallel reasons) of a schedule of :func:`with_workspaces` ``(graph)`` that touch ``graph``'s
    own nodes."""
    known = graph.index
    keep = [k for k, (_, node) in enumerate(ops) if node in known]
    if reasons is None:
        return [ops[k] for k in keep], None
    listed = list(reasons)
    return [ops[k] for k in keep], [listed[k] for k in keep]
