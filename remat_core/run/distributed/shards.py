"""One worker's share of a partitioned graph, as its step reads it.

Worker ``p`` owns its nodes (their features, labels and the edges into them). The edges into its nodes
fall into one *shard* per source worker ``q`` (SAR's N x N shards): shard ``q`` aggregates the rows of
``q``'s nodes that ``p`` needs (its halo from ``q``) into ``p``'s nodes. For every peer ``t`` the worker
also knows which of its own rows ``t`` needs (``send_rows[t]``): what it sends when ``t`` fetches.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass, replace

import numpy as np
import torch

from ...frontends.gnn import Partition, edge_weights

@dataclass
class Shard:
    """The edges from one source worker's nodes into this worker's nodes.

    Attributes
    ----------
    source : int
    rows : torch.Tensor
        The source's nodes this worker needs, as the source's local row numbers (sorted); for the worker's own
        shard, all its rows.
    src, dst : torch.Tensor
        Per edge: the row in ``rows`` order (the fetched block) and the local destination.
    matrix, matrix_t : torch.Tensor or None
        For the weighted sums (mean, gcn): ``dst x rows`` as a CSR matrix with the edge weights, and its
        transpose (the backward pass sends ``matrix_t @ grad`` back).
    """

    source: int
    rows: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    matrix: torch.Tensor | None = None
    matrix_t: torch.Tensor | None = None

    @property
    def size(self) -> int:
        """Rows fetched from the source."""
        return int(self.rows.numel())

    @property
    def edges(self) -> int:
        return int(self.src.numel())


@dataclass
class WorkerShards:
    """Everything worker ``rank`` holds before a step: its rows, labels, shards and what peers need from it."""

    rank: int
    workers: int
    nodes: np.ndarray
    total_nodes: int
    features: torch.Tensor
    labels: torch.Tensor
    shards: dict[int, Shard]
    send_rows: dict[int, torch.Tensor]

    @property
    def local(self) -> Shard:
        return self.shards[self.rank]

    def to_dtype(self, dtype: torch.dtype) -> "WorkerShards":
        """A copy whose features and edge weights are ``dtype`` (the gradient check runs in float64)."""
        def convert(m):
            return None if m is None else torch.sparse_csr_tensor(m.crow_indices(), m.col_indices(),
                                                                   m.values().to(dtype), m.shape)

        shards = {q: replace(s, matrix=convert(s.matrix), matrix_t=convert(s.matrix_t))
                  for q, s in self.shards.items()}
        return replace(self, features=self.features.to(dtype), shards=shards)

    def resident_bytes(self) -> int:
        """Bytes held across steps: features, labels, edge indices and matrices (not counted in a step's peak)."""
        tensors = [self.features, self.labels, *self.send_rows.values()]
        for shard in self.shards.values():
            tensors += [shard.rows, shard.src, shard.dst]
            for m in (shard.matrix, shard.matrix_t):
                if m is not None:
                    tensors += [m.crow_indices(), m.col_indices(), m.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


def worker_shards(partition: Partition, rank: int, aggregation: str) -> WorkerShards:
    """Worker ``rank``'s share of ``partition`` for a model that aggregates by ``aggregation``."""
    graph, owner, k = partition.graph, partition.owner, partition.workers
    local_index = np.zeros(graph.nodes, dtype=np.int64)
    for p in range(k):
        mine = np.flatnonzero(owner == p)
        local_index[mine] = np.arange(mine.size)
    edges, weights = edge_weights(partition, aggregation)
    src, dst = edges
    mine = np.flatnonzero(owner == rank)
    shards: dict[int, Shard] = {}
    into = owner[dst] == rank
    for q in range(k):
        chosen = np.flatnonzero(into & (owner[src] == q))
        if q == rank:  # the worker's own rows, all of them, in place: nothing is fetched
            rows, position = np.arange(mine.size), local_index[src[chosen]]
        else:
            rows, position = np.unique(local_index[src[chosen]], return_inverse=True)
        shard = Shard(q, torch.as_tensor(rows), torch.as_tensor(position.reshape(-1)),
                      torch.as_tensor(local_index[dst[chosen]]))
        if aggregation != "attention":
            shard.matrix, shard.matrix_t = _csr(shard.dst, shard.src, weights[chosen], mine.size, rows.size)
        shards[q] = shard
    send_rows = {}
    for t in range(k):  # the rows of ours that worker t fetches: the sources of edges from us into t
        if t == rank:
            continue
        chosen = (owner[dst] == t) & (owner[src] == rank)
        send_rows[t] = torch.as_tensor(np.unique(local_index[src[chosen]]))
    return WorkerShards(rank, k, mine, graph.nodes, torch.as_tensor(graph.features[mine]),
                        torch.as_tensor(graph.labels[mine]), shards, send_rows)


def _csr(rows: torch.Tensor, cols: torch.Tensor, values: np.ndarray, height: int, width: int):
    """``height x width`` CSR matrices ``M[rows, cols] = values`` and its transpose, with 32-bit indices where they
    fit (the CPU kernel converts 64-bit ones to 32 bits on every product: a copy of the indices per call)."""
    matrices = []
    for r, c, h, w in ((rows, cols, height, width), (cols, rows, width, height)):
        order = np.lexsort((c.numpy(), r.numpy()))
        crow = np.concatenate([[0], np.cumsum(np.bincount(r.numpy(), minlength=h))])
        index = torch.int32 if max(len(order), h, w) < 2 ** 31 else torch.int64
        with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state": CSR @ dense is all we use
            warnings.simplefilter("ignore", UserWarning)
            matrices.append(torch.sparse_csr_tensor(torch.as_tensor(crow, dtype=index),
                                                    torch.as_tensor(c.numpy()[order], dtype=index),
                                                    torch.as_tensor(values[order]), (h, w)))
    return matrices[0], matrices[1]
