"""Full-batch GNN training across workers: simulated from the partition's sizes, and run for real, vanilla
domain-parallel or SAR.

In: a :class:`~remat_core.frontends.gnn.GnnGraph`, its :class:`~remat_core.frontends.gnn.Partition` and a zoo GNN.
Out: ``simulate_workers`` (torch-free): each worker's simulated peak, traffic and FLOPs; ``run_distributed``: a
:class:`DistributedRun`, each worker's measured peak (the one meter), bytes sent and received, step time, and
whether the summed gradients equal a single-process step on the whole graph. Modules: ``simulated``, ``shards``
(a worker's share of the graph), ``ring`` (SAR's point-to-point rounds), ``layers`` (the message passing as
autograd Functions), ``worker`` (one worker's steps), ``launch`` (processes or Ray actors, watched and stopped by
their id). PyTorch loads on first use of a name that needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

from .simulated import CHUNK_CANDIDATES, SimulatedWorker, best_chunk, simulate_workers

_LAZY_IMPORTS = {"BACKENDS": ".launch", "DistributedRun": ".launch", "free_port": ".launch",
                 "GRADIENT_TOLERANCE": ".launch", "run_distributed": ".launch"}

__all__ = ["BACKENDS", "best_chunk", "CHUNK_CANDIDATES", "DistributedRun", "free_port", "GRADIENT_TOLERANCE",
           "run_distributed", "SimulatedWorker", "simulate_workers"]


def __getattr__(name: str) -> Any:
    """A PyTorch-bound name, loaded on first use."""
    if name in _LAZY_IMPORTS:
        return getattr(importlib.import_module(_LAZY_IMPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
