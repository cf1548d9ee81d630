"""A schedule checked on real tensors: its gradients against checkpoint-all's, its real memory against the simulator's.

:func:`check_on_tensors` runs a schedule of a traced graph with :func:`remat_core.run.executor.execute`,
compares the parameter gradients with those of the checkpoint-all schedule (computed once per
graph and kept on it), and keeps the real bytes held after every op beside the simulator's. The
result holds no tensors, so it travels between processes (the explorer runs it in a worker) and
prints as JSON (the CLI's ``execute``). Importing this module does not import PyTorch (the CLI and
the explorer's worker read its constants and types); running a check does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..graph import ComputeGraph
from ..schedule import Schedule, simulate

GRADIENT_TOLERANCE = 1e-4
"""Largest gradient difference that still counts as a match, relative to the largest reference gradient.

Recomputation runs the same ops on the same values, so the gradients are usually bit-identical;
the tolerance leaves room for kernels whose float sums depend on the memory layout."""


@dataclass(frozen=True)
class TensorCheck:
    """What running one schedule on real tensors showed.

    Attributes
    ----------
    gradients_match : bool
        ``max_gradient_difference <= tolerance * max_gradient``.
    max_gradient_difference : float
        Largest absolute difference from checkpoint-all's parameter gradients.
    max_gradient : float
        Largest absolute checkpoint-all gradient (the scale of the tolerance).
    tolerance : float
        The relative tolerance used.
    loss : float
        The step's loss.
    measured_memory : tuple of int
        Real bytes held after each op of the schedule (pinned tensors included).
    simulated_memory : tuple of int
        The simulator's memory after each op of the schedule.
    measured_peak : int
        Largest real memory held after any executed op (between ops: the storages of live tensors);
        for a module-level schedule the ops inside each group count too, so it can exceed
        ``max(measured_memory)``.
    simulated_peak : int
        The simulator's largest memory after an op, the same count. What an op's kernel holds while it
        runs (the nodes' transient bytes) comes on top of both: the schedule's peak counts it, and
        ``execute --via plan`` measures it with the profiler.
    memory_matches_simulator : bool
        Whether the real bytes equal the simulator's after every executed op (at op level).
    computes : int
        Compute ops executed (recomputations included; op level).
    seconds : float
        Wall time of the run (the checkpoint-all reference not included).
    """

    gradients_match: bool
    max_gradient_difference: float
    max_gradient: float
    tolerance: float
    loss: float
    measured_memory: tuple[int, ...]
    simulated_memory: tuple[int, ...]
    measured_peak: int
    simulated_peak: int
    memory_matches_simulator: bool
    computes: int
    seconds: float

    @property
    def memory_gap(self) -> int:
        """Largest difference in bytes between the real and the simulated memory after an op of the schedule."""
        return max((abs(m - s) for m, s in zip(self.measured_memory, self.simulated_memory)), default=0)

    def summary(self) -> dict[str, Any]:
        """Every field but the per-op memory, as plain JSON values."""
        fields = asdict(self)
        del fields["measured_memory"], fields["simulated_memory"]
        return fields


def check_on_tensors(graph: ComputeGraph, schedule: Schedule, *, tolerance: float = GRADIENT_TOLERANCE,
                     seed: int = 0) -> TensorCheck:
    """Run ``schedule`` on the model behind ``graph`` and compare it with checkpoint-all.

    Parameters
    ----------
    graph : ComputeGraph
        A traced graph (op or module level), see :func:`remat_core.run.executor.is_executable`.
    schedule : Schedule
        A schedule of ``graph`` (simulated here if it is not yet).
    tolerance : float
        Relative tolerance on the gradients (see :data:`GRADIENT_TOLERANCE`).
    seed : int
        Seed of random ops (dropout), the same for the schedule and the reference.

    Returns
    -------
    TensorCheck

    Raises
    ------
    ExecutionError
        When the graph has no model behind it or an op fails on real tensors.
    InvalidSchedule
        When the schedule breaks a simulator rule.

    Notes
    -----
    The checkpoint-all gradients are kept on the graph (``graph.memo``), so checking a second
    schedule of the same graph costs one execution, not two.
    """
    from .executor import execute, gradient_difference, reference_gradients

    simulated = schedule.simulation if schedule.simulation is not None else simulate(graph, schedule)
    result = execute(graph, schedule, seed=seed)
    reference = graph.memo(f"checkpoint-all gradients, seed {seed}", lambda: reference_gradients(graph, seed=seed))
    difference = gradient_difference(result.gradients, reference)
    scale = max((float(g.abs().max()) for g in reference.values() if g.numel()), default=0.0)
    return TensorCheck(gradients_match=difference <= tolerance * max(scale, 1e-12), max_gradient_difference=difference,
                       max_gradient=scale, tolerance=tolerance, loss=result.loss,
                       measured_memory=result.schedule_memory, simulated_memory=tuple(simulated.memory),
                       measured_peak=result.peak, simulated_peak=max(result.simulated_memory, default=0),
                       memory_matches_simulator=result.memory == result.simulated_memory,
                       computes=result.computes, seconds=result.seconds)
