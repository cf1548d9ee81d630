"""The frontends: real models and files in, :class:`~remat_core.graph.ComputeGraph` out.

A training step of a PyTorch module traced on FakeTensors (``trace``, its passes in ``tracing/``),
the in-house model zoo (``zoo/``), ONNX files, ``.pt2`` programs (checked by ``pt2_safety`` before
torch loads them), loss set-ups, ``sources`` (a model named on the command line), and ``gnn/``: the graphs
a GNN trains on (generated or read) and their partitions across workers. Imports
:mod:`remat_core.graph` and :mod:`remat_core.errors`.

PyTorch is heavy: the names that need it load on first use (``_LAZY_IMPORTS``), so importing
this package (or :mod:`remat_core`) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from .gnn import GnnGraph, Partition, partition_graph, read_gnn_graph, rmat_graph
from .onnx_import import load_onnx
from .sources import trace_source
from .stderr import quiet_stderr
from .tracing.attach import structural_difference, structural_fingerprint, with_model_of

_LAZY_IMPORTS = {
    "LEVELS": ".trace",
    "LossSetup": ".losses",
    "MODEL_PREFIX": ".tracing.capture",
    "REGISTRY": ".zoo",
    "build_model": ".zoo",
    "coarsen_by_module": ".tracing.coarsen",
    "get_spec": ".zoo",
    "list_models": ".zoo",
    "param_count": ".zoo",
    "parse_pt2": ".pt2_import",
    "real_placeholder_values": ".tracing.capture",
    "trace_training_graph": ".trace",
    "trace_zoo_model": ".trace",
}
"""Names whose modules import PyTorch: loaded on first use."""

__all__ = ["build_model", "coarsen_by_module", "get_spec", "GnnGraph", "LEVELS", "list_models", "load_onnx",
           "LossSetup", "Partition", "partition_graph", "read_gnn_graph", "rmat_graph",
           "MODEL_PREFIX", "param_count", "parse_pt2", "quiet_stderr", "real_placeholder_values", "REGISTRY",
           "trace_source",
           "structural_difference", "structural_fingerprint", "trace_training_graph", "trace_zoo_model",
           "with_model_of"]


def __getattr__(name: str) -> Any:
    """A PyTorch-bound name, loaded on first use."""
    if name in _LAZY_IMPORTS:
        return getattr(importlib.import_module(_LAZY_IMPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
