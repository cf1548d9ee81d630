"""``sac``: the traced forward run by autograd with the plan installed as selective activation checkpointing.

Checkpoint regions recompute in one run and keep their inputs until their backward is over, so a step
through SAC holds more than the plan; the route is planned for what it holds
(:func:`sac_aware_schedule`) and its simulated peak is that of its own ops
(:func:`~remat_core.schedule.sac_route.sac_route_ops`), not the plan's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...errors import InfeasibleBudget, NotModuleBounded
from ...schedule import memory_lower_bound
from ...schedule.sac_route import sac_route_peak
from ...solvers.retry import Bisection, solve_until
from .base import Forward, Plan, Route, RouteRun, register_route

RETRIES = 6
"""Solves of a bisection for a plan the route keeps, after the first, before the route is said to be unable to keep
the budget."""

if TYPE_CHECKING:
    from ...graph import ComputeGraph
    from ...schedule import Schedule
    from ..installed import InstalledPlan
    from ..module_policy import ModulePolicy
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
    planner = "sac-planner"

    def plan(self, graph: "ComputeGraph", budget: int, solve: Callable[[int], "Schedule"],
             returns: Sequence[str] | None = None) -> Plan:
        schedule, peak = sac_aware_schedule(graph, budget, solve, returns)
        return Plan(schedule, peak)

    def on_modules(self, installed: "InstalledPlan") -> "ModulePolicy | None":
        """A plan made in SAC's terms whose regions are module calls and whose saved ops SAC can cache in the eager
        forward (:func:`~remat_core.run.module_policy.module_policy`): on the model's own modules. Any other plan
        runs as the traced program, which follows it exactly."""
        from ..module_policy import module_policy

        if "module policy" not in installed.kept:
            try:
                policy = module_policy(installed.graph, installed.schedule)
            except NotModuleBounded:
                policy = None
            installed.kept["module policy"] = policy if policy is None or not policy.dropped else None
        return installed.kept["module policy"]

    def forward(self, installed: "InstalledPlan", values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True) -> Forward:
        from ..forward import run_forward

        return Forward(run_forward(installed.program, values, seed=seed, plan=plan))

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        from ...schedule import simulate
        from ...schedule.sac_route import sac_policy_cost, sac_route_ops
        from ..measure import measure_step

        installed = step.installed
        policy = self.on_modules(installed)
        if policy is None:
            run = super().measure(step, timing_runs)
        else:
            run = RouteRun(measure_step(step.own_step(policy), step.model, step.device, timing_runs, warm_up=True),
                           own_forward=True, policy_cost=sac_policy_cost(installed.decisions.graph, installed.program))
        run.simulated = simulate(installed.decisions.graph, sac_route_ops(installed.decisions.graph, installed.program))
        run.details = {"regions": len(installed.program.regions),
                       "checkpointed_regions": installed.program.checkpointed_regions,
                       "plan_recompute_bursts": installed.decisions.bursts,
                       "plan_simulated_peak": step.simulated.peak - step.graph.pinned_bytes,
                       "installed_on": ("the model's own modules: " + ", ".join(policy.regions) if policy is not None
                                        else "the traced program")}
        return run


def sac_aware_schedule(graph: ComputeGraph, budget: int, solve: Callable[[int], Schedule],
                       returns: Sequence[str] | None = None) -> tuple[Schedule, int]:
    """A schedule whose SAC route keeps ``budget``: ``solve(budget)`` first; when its route peaks over the budget,
    a bisection of the budget asked of the solver, between the graph's lower bound and ``budget``, for the largest
    (least recomputing) one whose route fits, in at most :data:`RETRIES` more solves
    (:func:`~remat_core.solvers.retry.solve_until`). Returns the schedule and its route's peak.

    Raises
    ------
    InfeasibleBudget
        When no schedule the solver finds keeps the budget once SAC runs it (the message says what its route peaked
        at and why).
    """
    search = solve_until(solve, budget, lambda schedule: sac_route_peak(graph, schedule, returns)[0],
                         Bisection(memory_lower_bound(graph), RETRIES, max(1, budget // 1000)))
    if search.accepted is not None:
        return search.accepted.schedule, search.accepted.peak
    best = search.best_rejected
    raise InfeasibleBudget(budget, None, best.schedule.solver,
                           f"run through selective activation checkpointing its plans peak at {best.peak:,} bytes "
                           f"at best: a checkpoint region recomputes in one run and keeps its inputs until its "
                           f"backward is over, so SAC holds more than the plan; a larger budget, or the op-by-op "
                           f"replay (--via plan), keeps it")
