"""What a graph holds, in the figures the explorer's Model page and sidebar show.

Plain data computed once per graph (memoised on the immutable graph): node counts by kind, bytes
of parameters, buffers, inputs and activations, the checkpoint-all peak and the lower bound, and
memory grouped by module path.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from ..graph import NODE_KINDS, ComputeGraph
from ..schedule import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound

NO_MODULE = "(no module)"
"""The group of nodes that carry no ``module`` path (generated graphs, most JSON files)."""


@dataclass(frozen=True)
class GraphSummary:
    """The sizes of a graph.

    Attributes
    ----------
    name : str
    nodes, edges, outputs : int
    nodes_by_kind : mapping of str to int
        Every kind present, in :data:`~remat_core.graph.compute_graph.NODE_KINDS` order.
    bytes_by_kind : mapping of str to int
        Total ``mem`` per kind.
    param_bytes, buffer_bytes, input_bytes : int
        Pinned memory by role (parameters, buffers such as running statistics, user inputs).
    pinned_bytes : int
        All pinned memory (resident for the whole step).
    activation_bytes : int
        Total ``mem`` of the nodes a schedule computes (forward, loss, backward...): what
        rematerialization trades against compute.
    checkpoint_all_peak, lower_bound : int
        Peak of the no-recomputation schedule, and the bound no schedule can go below.
    checkpoint_all_cost : float
        Cost of computing each needed node once.
    has_modules : bool
        Whether any node carries a ``module`` path.
    transient_nodes : int
        Nodes whose kernel allocates temporaries or workspace beyond its output while it runs.
    largest_transient : int
        The most bytes one kernel holds that way (0: none measured).
    multi_output_calls : int
        Calls that compute several nodes at once (each call allocates all of them).
    """

    name: str
    nodes: int
    edges: int
    outputs: int
    nodes_by_kind: Mapping[str, int]
    bytes_by_kind: Mapping[str, int]
    param_bytes: int
    buffer_bytes: int
    input_bytes: int
    pinned_bytes: int
    activation_bytes: int
    checkpoint_all_peak: int
    lower_bound: int
    checkpoint_all_cost: float
    has_modules: bool
    transient_nodes: int = 0
    largest_transient: int = 0
    multi_output_calls: int = 0


def graph_summary(graph: ComputeGraph) -> GraphSummary:
    """The sizes of ``graph`` (computed once per graph)."""
    return graph.memo("summary", lambda: _summary_core(graph))


def _summary_core(graph: ComputeGraph) -> GraphSummary:
    counts = Counter(n.kind for n in graph.nodes)
    sizes: Counter[str] = Counter()
    pinned_by_kind: Counter[str] = Counter()
    for node in graph.nodes:
        sizes[node.kind] += node.mem
        if node.pinned:
            pinned_by_kind[node.kind] += node.mem
    computed = sum(graph.mem[i] for i in graph.needed_idx)
    return GraphSummary(
        name=graph.name, nodes=len(graph), edges=len(graph.edges), outputs=len(graph.outputs),
        nodes_by_kind={k: counts[k] for k in NODE_KINDS if counts[k]},
        bytes_by_kind={k: sizes[k] for k in NODE_KINDS if counts[k]},
        param_bytes=pinned_by_kind["param"], buffer_bytes=pinned_by_kind["buffer"],
        input_bytes=pinned_by_kind["input"], pinned_bytes=graph.pinned_bytes, activation_bytes=computed,
        checkpoint_all_peak=checkpoint_all_peak(graph), lower_bound=memory_lower_bound(graph),
        checkpoint_all_cost=checkpoint_all_cost(graph), has_modules=any(n.module for n in graph.nodes),
        transient_nodes=sum(1 for t in graph.transient if t), largest_transient=max(graph.transient, default=0),
        multi_output_calls=len({n.kernel for n in graph.nodes if n.kernel}))


def kernel_memory_rows(graph: ComputeGraph, limit: int = 50) -> list[dict[str, object]]:
    """The nodes whose kernels hold the most beyond their outputs while they run, largest first: node id, bytes
    held that way, the output's own bytes, and the other outputs of its call (a multi-output op)."""
    siblings = graph.siblings
    held = sorted((i for i, t in enumerate(graph.transient) if t or siblings[i]),
                  key=lambda i: -(graph.transient[i] + sum(graph.mem[j] for j in siblings[i])))
    return [{"node": graph.ids[i], "transient": graph.transient[i], "output": graph.mem[i],
             "call_outputs": len(siblings[i]) + 1, "siblings_bytes": sum(graph.mem[j] for j in siblings[i])}
            for i in held[:limit]]


def module_prefix(module: str | None, depth: int) -> str:
    """The first ``depth`` parts of a dotted module path (``layer3.1.conv2`` -> ``layer3.1`` at 2).

    A node without a module belongs to :data:`NO_MODULE`; ``depth`` 0 or less keeps the whole path.
    """
    if not module:
        return NO_MODULE
    if depth <= 0:
        return module
    return ".".join(module.split(".")[:depth])


def memory_by_module(graph: ComputeGraph, depth: int = 1) -> dict[str, dict[str, int]]:
    """Bytes per module group and kind: ``{"layer1": {"param": ..., "forward": ...}, ...}``.

    Parameters
    ----------
    graph : ComputeGraph
    depth : int
        How many parts of the dotted module path make a group (1: top-level children).

    Returns
    -------
    dict
        Groups in order of first appearance in the graph; each maps the kinds present to bytes.
    """
    groups: dict[str, Counter[str]] = {}
    for node in graph.nodes:
        groups.setdefault(module_prefix(node.module, depth), Counter())[node.kind] += node.mem
    return {name: {k: kinds[k] for k in NODE_KINDS if kinds[k]} for name, kinds in groups.items()}


def in_module(module: str | None, group: str) -> bool:
    """Whether a node of module path ``module`` belongs to group ``group`` (the path or one inside it)."""
    return bool(module) and (module == group or module.startswith(group + "."))


def module_groups(graph: ComputeGraph, max_depth: int = 2) -> list[str]:
    """The module paths to filter a graph's nodes by: every prefix of up to ``max_depth`` parts of a
    node's module, in order of first appearance (``layer1``, ``layer1.0``, ``layer1.1``, ``layer2``...)."""
    groups: dict[str, None] = {}
    for node in graph.nodes:
        if node.module:
            for depth in range(1, max_depth + 1):
                groups.setdefault(module_prefix(node.module, depth), None)
    return list(groups)
