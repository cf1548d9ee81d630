"""Graphs too big for one machine: the graphs a GNN trains on, and how they split across workers.

In: a generated graph (R-MAT, with node features and labels, from a seed) or one a user has on disk (an edge list,
an ``.npz`` or ``.pt`` of arrays). Out: :class:`GnnGraph`, and its :class:`Partition` across N workers (METIS
through ``pymetis``, or random as the baseline) with the edge cut, the balance and each worker's halo: the
remote nodes whose features it needs. This is the ground SAR (sequential aggregation and rematerialization,
Mostafa 2022) stands on. And each worker's training step, vanilla or SAR, recorded as a graph and its ops from
the partition's sizes alone (``worker_step``): what the simulator needs to say what each worker holds before
anything runs. Pure numpy (``pymetis`` for METIS, ``torch`` only to read a ``.pt`` file).
"""

from .graphs import SKEWS, GnnGraph, gnn_graph, read_gnn_graph, rmat_graph
from .partition import PARTITIONERS, Partition, partition_graph
from .worker_step import (GNN_MODELS, GRADIENT_PIECES, SENT_OPS, TRAFFIC_OPS, WORKER_MODES, GnnModel, WorkerSizes,
                          WorkerStep, edge_weights, piece_bounds, worker_sizes, worker_step)

__all__ = ["edge_weights", "GNN_MODELS", "GRADIENT_PIECES", "gnn_graph", "GnnGraph", "GnnModel", "PARTITIONERS",
           "Partition", "partition_graph", "piece_bounds", "read_gnn_graph", "rmat_graph", "SENT_OPS", "SKEWS",
           "TRAFFIC_OPS", "WORKER_MODES", "WorkerSizes", "WorkerStep", "worker_sizes", "worker_step"]
