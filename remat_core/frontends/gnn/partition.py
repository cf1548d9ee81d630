"""A graph split across N workers: which worker owns each node, and what that costs each worker.

Worker ``p`` owns its nodes' features and the edges into them; to aggregate it needs the features of every
remote source of those edges, its *halo*: vanilla domain-parallel training fetches the whole halo for each
layer and keeps it for the backward pass, SAR fetches it one remote worker at a time. METIS (through
``pymetis``) cuts few edges; a random partition is the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import GraphError
from .graphs import GnnGraph

PARTITIONERS = ("metis", "random")


@dataclass(frozen=True, eq=False)
class Partition:
    """Node -> worker, and the figures users compare partitions by.

    Attributes
    ----------
    graph : GnnGraph
    owner : numpy.ndarray, shape (N,), int64
        The worker of each node.
    method : str
    """

    graph: GnnGraph
    owner: np.ndarray
    method: str

    @property
    def workers(self) -> int:
        return int(self.owner.max(initial=-1)) + 1

    def nodes_of(self, worker: int) -> np.ndarray:
        return np.flatnonzero(self.owner == worker)

    def edge_cut(self) -> float:
        """The share of edges whose ends live on different workers."""
        src, dst = self.graph.edges
        return float(np.mean(self.owner[src] != self.owner[dst])) if src.size else 0.0

    def node_counts(self) -> np.ndarray:
        return np.bincount(self.owner, minlength=self.workers)

    def edge_counts(self) -> np.ndarray:
        """Edges into each worker's nodes (what it aggregates)."""
        return np.bincount(self.owner[self.graph.edges[1]], minlength=self.workers)

    def halo(self, worker: int, source: int | None = None) -> np.ndarray:
        """The remote nodes whose features ``worker`` needs (sources of edges into its nodes), or only those of
        ``source``."""
        src, dst = self.graph.edges
        into = self.owner[dst] == worker
        remote = src[into & (self.owner[src] != worker)]
        if source is not None:
            remote = remote[self.owner[remote] == source]
        return np.unique(remote)

    def halo_counts(self) -> np.ndarray:
        """``[p, q]``: how many of worker q's nodes worker p needs (0 on the diagonal)."""
        src, dst = self.graph.edges
        n, k = self.graph.nodes, self.workers
        pairs = np.unique(self.owner[dst] * n + src)  # (receiving worker, source node), once each
        receiver, node = pairs // n, pairs % n
        counts = np.zeros((k, k), dtype=np.int64)
        np.add.at(counts, (receiver, self.owner[node]), 1)
        np.fill_diagonal(counts, 0)
        return counts

    def summary(self) -> dict:
        nodes, edges, halo = self.node_counts(), self.edge_counts(), self.halo_counts().sum(axis=1)
        return {"method": self.method, "workers": self.workers, "edge_cut": self.edge_cut(),
                "node_balance": float(nodes.max() / nodes.mean()) if nodes.size else 1.0,
                "edge_balance": float(edges.max() / max(edges.mean(), 1e-12)) if edges.size else 1.0,
                "per_worker": [{"worker": p, "nodes": int(nodes[p]), "edges_in": int(edges[p]), "halo": int(halo[p])}
                               for p in range(self.workers)]}


def partition_graph(graph: GnnGraph, workers: int, method: str = "metis", *, seed: int = 0,
                    balance: str = "edges") -> Partition:
    """Split ``graph`` across ``workers``.

    Parameters
    ----------
    method : {"metis", "random"}
        METIS's k-way partition of the symmetrised graph (``pymetis``), or each node to a uniformly random worker.
    balance : {"edges", "nodes"}
        What METIS balances: the edges each worker aggregates (node weights = in-degree + 1; on skewed graphs
        an unweighted METIS hands one worker most of the edges) or the node counts.

    Raises
    ------
    GraphError
        For fewer than one worker, more workers than nodes, or an unknown method or balance.
    """
    if workers < 1 or workers > graph.nodes:
        raise GraphError(f"workers must be between 1 and the {graph.nodes:,} nodes, got {workers}")
    if method not in PARTITIONERS:
        raise GraphError(f"unknown partitioner {method!r}; use one of {', '.join(PARTITIONERS)}")
    if balance not in ("edges", "nodes"):
        raise GraphError(f"balance must be 'edges' or 'nodes', got {balance!r}")
    if workers == 1:
        return Partition(graph, np.zeros(graph.nodes, dtype=np.int64), method)
    if method == "random":
        owner = np.random.default_rng(seed).integers(0, workers, graph.nodes)
        return Partition(graph, _every_worker_used(owner, workers), method)
    import pymetis  # loaded for a METIS partition only

    n = graph.nodes
    src, dst = graph.edges
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    a, b = keys // n, keys % n
    xadj = np.concatenate([[0], np.cumsum(np.bincount(a, minlength=n))]).astype(np.int64)
    weights = (graph.in_degrees() + 1).tolist() if balance == "edges" else None
    options = pymetis.Options(seed=seed)
    _, parts = pymetis.part_graph(workers, pymetis.CSRAdjacency(xadj, b.astype(np.int64)), vweights=weights,
                                  options=options)
    return Partition(graph, _every_worker_used(np.asarray(parts, dtype=np.int64), workers), method)


def _every_worker_used(owner: np.ndarray, workers: int) -> np.ndarray:
    """Give an empty worker a node from the largest one (tiny graphs): every worker has work."""
    owner = owner.copy()
    for p in range(workers):
        if not np.any(owner == p):
            largest = int(np.argmax(np.bincount(owner, minlength=workers)))
            owner[np.flatnonzero(owner == largest)[0]] = p
    return owner
