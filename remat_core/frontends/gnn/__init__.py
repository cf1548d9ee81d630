"""Graphs too big for one machine: the graphs a GNN trains on, and how they split across workers.

In: a generated graph (R-MAT, with node features and labels, from a seed) or one a user has on disk (an edge list,
an ``.npz`` or ``.pt`` of arrays). Out: :class:`GnnGraph`, and its :class:`Partition` across N workers (METIS
through ``pymetis``, or random as the baseline) with the edge cut, the balance and each worker's halo: the
remote nodes whose features it needs. This is the ground SAR (sequential aggregation and rematerialization,
Mostafa 2022) stands on. Pure numpy (``pymetis`` for METIS, ``torch`` only to read a ``.pt`` file).
"""

from .graphs import GnnGraph, read_gnn_graph, rmat_graph
from .partition import PARTITIONERS, Partition, partition_graph

__all__ = ["GnnGraph", "PARTITIONERS", "Partition", "partition_graph", "read_gnn_graph", "rmat_graph"]
