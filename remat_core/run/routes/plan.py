"""``plan``: the schedule replayed op by op, every compute and free as the simulator ran them.

The executor (:func:`remat_core.run.executor.execute`) evaluates each FX node a compute names and drops
each value a free names, so the step holds exactly the simulated tensors and each op's measured kernel
memory. It computes its own gradients: there is no module to install it in. Interpreting the ops costs time of
its own, per op: calibrated once per model by replaying checkpoint-all, and priced in the predicted step time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ...schedule import checkpoint_all_ops
from .base import Mechanism, Route, RouteRun, register_route

if TYPE_CHECKING:
    from ..step import TracedStep


@register_route
class Replay(Route):
    name = "plan"
    summary = "replay the schedule op by op (default)"
    installs_module = False
    peak_gap = ("the replay holds exactly the simulated tensors and each op's measured kernel memory, so the "
                "difference is a kernel that allocated otherwise than when it was measured")

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        import torch

        from ..executor import execute
        from ..measure import measure_step

        replays = []

        def replay() -> Mapping[str, torch.Tensor]:
            replays.append(execute(step.graph, step.installed.schedule, seed=step.seed))
            return replays[-1].gradients

        measured = measure_step(replay, step.model, step.device, timing_runs)
        held = replays[0]
        baseline = checkpoint_all_ops(step.graph, explain=False)[0]
        baseline_seconds = step.graph.memo(
            f"checkpoint-all replay seconds, seed {step.seed}, weights {step.weights_version()}, {timing_runs} "
            f"timing runs",
            lambda: measure_step(lambda: execute(step.graph, baseline, seed=step.seed).gradients, step.model,
                                 step.device, timing_runs).seconds)
        return RouteRun(measured, details={"held_peak": held.peak - step.graph.pinned_bytes,
                                           "memory_matches_simulator": held.memory == held.simulated_memory},
                        mechanism=Mechanism(baseline_seconds, len(baseline), len(step.installed.schedule.ops)))
