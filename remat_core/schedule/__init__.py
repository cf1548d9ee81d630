"""The schedule package: a plan of compute/free ops (and offload/prefetch copies on a transfer lane), and the one
simulator that measures it.

In: a :class:`~remat_core.graph.ComputeGraph` and ops. Out: :class:`Schedule` (ops, reasons,
measured stats, ``remat-schedule`` JSON), :func:`simulate` (the only judge of peak and cost),
the baselines (checkpoint-all, the memory lower bound), the building blocks solvers share to turn
computations into ops, post-passes (tighten, evict to a budget), the step-by-step timeline, and
the replay of a schedule's allocations through a model of PyTorch's CUDA caching allocator
(reserved bytes, fragmentation, every block's address: :mod:`.allocator`), a module-level schedule read
at the op level (:mod:`.levels`), and what selective activation checkpointing does with a plan of a traced
step: the plan per forward tensor (:mod:`.decisions`), the forward cut into regions with saved ops
(:mod:`.sac_program`), and the ops a step through SAC performs (:mod:`.sac_route`), read from the traced
graph's attachments without importing PyTorch.
Imports :mod:`remat_core.graph` and :mod:`remat_core.errors`.
"""

from .allocator import (AllocatorConfig, AllocatorReplay, AllocatorSettingError, OutOfMemory, memory_viz_snapshot,
                        replay, snapshot_pickle)
from .io import load_schedule, save_schedule
from .levels import to_op_level
from .ops import needed_topological_order, ops_from_computes, useful_computations
from .postpass import PassReason, evict_to_budget_indexed, tighten_indexed
from .schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, TRANSFERS, Op, Reason, Schedule, reason
from .baselines import (checkpoint_all_cost, checkpoint_all_ops, checkpoint_all_peak, memory_lower_bound,
                        schedule_stats)
from .simulator import Link, SimulationResult, Timing, measure_indexed, simulate
from .timeline import describe_op, memory_by_kind, occurrences, ordinal, simulation_of

__all__ = ["AllocatorConfig", "AllocatorReplay", "AllocatorSettingError", "checkpoint_all_cost", "checkpoint_all_ops", "checkpoint_all_peak",
           "COMPUTE", "describe_op", "evict_to_budget_indexed", "FREE", "Link", "load_schedule", "measure_indexed",
           "memory_by_kind", "memory_lower_bound", "memory_viz_snapshot", "needed_topological_order", "occurrences", "OFFLOAD",
           "Op", "OutOfMemory", "ops_from_computes", "ordinal", "PassReason", "PREFETCH", "Reason", "reason", "replay",
           "save_schedule", "Schedule", "snapshot_pickle", "schedule_stats", "simulate", "simulation_of", "SimulationResult",
           "tighten_indexed", "Timing", "to_op_level", "TRANSFERS", "useful_computations"]
