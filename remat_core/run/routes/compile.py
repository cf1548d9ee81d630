"""``compile``: the traced forward through ``torch.compile``, the plan answering Inductor's partitioner.

The plan is handed to the partitioner as its knapsack (:mod:`remat_core.run.compiled`); Inductor's own
fusions and recomputation still decide what the compiled step holds, so this route is measured, not
planned for: it is not kept to the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .base import Forward, Route, RouteRun, register_route

if TYPE_CHECKING:
    from ..installed import InstalledPlan
    from ..step import TracedStep


@register_route
class Compiled(Route):
    name = "compile"
    summary = "torch.compile with the plan in Inductor's partitioner (needs a C++ compiler)"
    keeps_budget = False
    over_budget_reason = ("torch.compile is not planned for: Inductor's own fusions and recomputation decide what "
                          "the compiled step holds; --via plan or sac keep the budget")

    def ready(self) -> None:
        from ..compiled import check_compiler

        check_compiler()

    def forward(self, installed: "InstalledPlan", values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True) -> Forward:
        from ..compiled import compile_failures_reported, compiled_step, partitioner_settings

        arguments = [values[name] for name in installed.program.placeholders]
        function = installed.kept.get(self.name)
        if function is not None:
            return Forward(dict(zip(installed.program.returns, function(*arguments))))
        function, knapsack = compiled_step(installed.program, installed.decisions)
        with compile_failures_reported(), partitioner_settings(knapsack):
            returned = function(*arguments)  # the first call compiles
        installed.kept[self.name] = function
        return Forward(dict(zip(installed.program.returns, returned)), uncontrolled=tuple(knapsack.uncontrolled))

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        import torch

        from ..compiled import compile_failures_reported, compiled_step, partitioner_settings
        from ..measure import measure_step

        torch._dynamo.reset()  # or a step compiled for another plan is reused
        function, knapsack = compiled_step(step.installed.program, step.installed.decisions)
        arguments = [step.values[name] for name in step.installed.program.placeholders]

        def run() -> None:
            step.finish(dict(zip(step.installed.program.returns, function(*arguments))))

        with compile_failures_reported(), partitioner_settings(knapsack):
            measured = measure_step(run, step.model, step.device, timing_runs, warm_up=True)
        return RouteRun(measured, uncontrolled=tuple(knapsack.uncontrolled),
                        details={"knapsack_calls": knapsack.calls, "knapsack_saved": knapsack.saved,
                                 "knapsack_recomputed": knapsack.recomputed})

    def comparable(self, has_random_ops: bool) -> bool:
        return not has_random_ops  # the compiled step draws its own dropout masks

    def notes(self, measured_peak: int, simulated_peak: int, comparable: bool) -> list[str]:
        notes = []
        if measured_peak > simulated_peak:
            notes.append("the compiled backward is one function: torch recomputes each dropped tensor once, where the "
                         "plan may recompute in stages, and Inductor's kernels allocate as they are generated")
        if not comparable:
            notes.append("gradients not compared: the compiled step draws its own dropout masks")
        return notes

