"""``sac``: the traced forward run by autograd with the plan installed as selective activation checkpointing.

Checkpoint regions recompute in one run and keep their inputs until their backward is over, so a step
through SAC holds more than the plan; the route is planned for what it holds
(:func:`~remat_core.run.sac_route.sac_aware_schedule`) and its simulated peak is that of its own ops
(:func:`~remat_core.run.sac_route.sac_route_ops`), not the plan's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .base import Forward, Plan, Route, RouteRun, register_route

if TYPE_CHECKING:
    from ...graph import ComputeGraph
    from ...schedule import Schedule
    from ..installed import InstalledPlan
    from ..step import TracedStep


@register_route
class SelectiveCheckpointing(Route):
    name = "sac"
    summary = "selective activation checkpointing: save what the plan keeps, recompute what it frees"
    peak_gap = ("the simulated peak is of what SAC does with the plan (its regions recompute in one run), so the "
                "difference is autograd's own bookkeeping or a kernel that allocated otherwise than when it was "
                "measured")
    over_budget_reason = ("a kernel or autograd's bookkeeping held more than the route simulated; --via plan keeps "
                          "the budget")

    def plan(self, graph: "ComputeGraph", budget: int, solve: Callable[[int], "Schedule"],
             returns: Sequence[str] | None = None) -> Plan:
        from ..sac_route import sac_aware_schedule

        schedule, peak = sac_aware_schedule(graph, budget, solve, returns)
        return Plan(schedule, peak)

    def forward(self, installed: "InstalledPlan", values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True) -> Forward:
        from ..forward import run_forward

        return Forward(run_forward(installed.program, values, seed=seed, plan=plan))

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        from ...schedule import simulate
        from ..sac_route import sac_route_ops

        run = super().measure(step, timing_runs)
        installed = step.installed
        run.simulated = simulate(installed.decisions.graph, sac_route_ops(installed.decisions, installed.program))
        run.details = {"regions": len(installed.program.regions),
                       "checkpointed_regions": installed.program.checkpointed_regions,
                       "plan_recompute_bursts": installed.decisions.bursts,
                       "plan_simulated_peak": step.simulated.peak - step.graph.pinned_bytes}
        return run
