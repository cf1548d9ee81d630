"""One tensor's neighbourhood under a schedule: what a person debugging its recomputation looks at.

Around a tensor: the tensors it is computed from and the ones that read it (a few hops each way,
parameters left out: they are always resident and would crowd the picture), and the tensors a
schedule recomputes *with* it: those computed again in the same run of computations as one of its
recomputations (a solver that drops a tensor usually drops its producers too, and brings them back
together). A few dozen nodes at most, the closest kept: small enough to draw and drag
(:func:`remat_core.viz.neighbourhood_html`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..graph import ComputeGraph
from ..schedule import COMPUTE, SimulationResult

TENSOR, PRODUCER, CONSUMER, RECOMPUTED_WITH = "tensor", "producer", "consumer", "recomputed with it"
ROLES = (TENSOR, PRODUCER, CONSUMER, RECOMPUTED_WITH)
"""What a node of the neighbourhood is to the tensor (a node that is both keeps the first that applies)."""


@dataclass(frozen=True)
class Neighbourhood:
    """A tensor and the nodes around it.

    Attributes
    ----------
    tensor : str
    nodes : tuple of str
        Node ids, the tensor first, then by distance (hops) from it.
    edges : tuple of (str, str)
        The graph's edges between those nodes.
    roles : mapping of str to str
        Per node, one of :data:`ROLES`.
    computes : mapping of str to int
        Per node, how many times the schedule computes it.
    hops : mapping of str to int
        Per node, its distance from the tensor (0 for itself; recomputed-with nodes beyond the hops drawn
        count one more than the farthest).
    left_out : int
        Nodes within the hops (or recomputed with it) left out to keep the picture small.
    """

    tensor: str
    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    roles: Mapping[str, str]
    computes: Mapping[str, int]
    hops: Mapping[str, int]
    left_out: int


def recomputed_with(graph: ComputeGraph, simulation: SimulationResult, tensor: str) -> list[str]:
    """Tensors recomputed in the same run of computations (no free between them ends a run) as a recomputation
    of ``tensor``, in the order the schedule computes them."""
    seen: dict[str, int] = {}
    together: dict[str, None] = {}
    run: list[str] = []
    holds_tensor_recompute = False
    for action, node in simulation.ops:
        if action == COMPUTE:
            seen[node] = seen.get(node, 0) + 1
            run.append(node)
            holds_tensor_recompute |= node == tensor and seen[node] > 1
            continue
        if holds_tensor_recompute:
            together.update((n, None) for n in run if n != tensor and seen[n] > 1)
        run, holds_tensor_recompute = [], False
    if holds_tensor_recompute:
        together.update((n, None) for n in run if n != tensor and seen[n] > 1)
    return list(together)


def tensor_neighbourhood(graph: ComputeGraph, simulation: SimulationResult, tensor: str, hops: int = 2,
                         limit: int = 40) -> Neighbourhood:
    """The neighbourhood of ``tensor`` under the simulated schedule (see the module notes).

    Raises
    ------
    KeyError
        When the graph has no node ``tensor``.
    """
    if tensor not in graph.index:
        raise KeyError(f"the graph has no node {tensor!r}")
    nx_graph = graph.nx
    distance: dict[str, int] = {tensor: 0}
    roles: dict[str, str] = {tensor: TENSOR}
    for role, step in ((PRODUCER, nx_graph.predecessors), (CONSUMER, nx_graph.successors)):
        frontier = [tensor]
        for hop in range(1, hops + 1):
            frontier = [n for v in frontier for n in step(v) if n not in distance and not graph.node(n).pinned]
            for n in frontier:
                distance.setdefault(n, hop)
                roles.setdefault(n, role)
    for n in recomputed_with(graph, simulation, tensor):
        distance.setdefault(n, hops + 1)
        roles.setdefault(n, RECOMPUTED_WITH)
    ranked = sorted(distance, key=lambda n: (distance[n], graph.index[n]))
    kept = ranked[:max(1, limit)]
    chosen = set(kept)
    edges = tuple((u, v) for u, v in nx_graph.subgraph(kept).edges if u in chosen and v in chosen)
    counts = simulation.compute_counts
    return Neighbourhood(tensor, tuple(kept), edges, {n: roles[n] for n in kept},
                         {n: counts.get(n, 0) for n in kept}, {n: distance[n] for n in kept}, len(ranked) - len(kept))
