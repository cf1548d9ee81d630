"""``offload``: the ``sac`` forward with the plan's offloads installed as saved-tensor hooks.

The tensors the plan offloads go to the host when autograd saves them and come back, prefetched on a
side stream, before the backward reads them (:mod:`remat_core.run.offload_hooks`). On a CPU the host is
the device: nothing moves, and the offloaded bytes stay where they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ...graph import format_bytes, node_label
from ..report import BUDGET_SLACK, Uncontrolled
from .base import Forward, Route, RouteRun, register_route

if TYPE_CHECKING:
    from ...schedule.sac_program import ForwardProgram
    from ..installed import InstalledPlan
    from ..step import TracedStep


@register_route
class Offload(Route):
    name = "offload"
    summary = "sac with the plan's offloads as saved-tensor hooks (needs --bandwidth)"
    needs_link = True
    peak_gap = ("on a CPU the offloaded tensors never leave (the host is the device), so the measured peak holds "
                "them; on CUDA, autograd's own bookkeeping, a kernel that allocated otherwise than when it was "
                "measured, or a prefetch issued earlier than planned")

    def forward(self, installed: "InstalledPlan", values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True) -> Forward:
        import torch

        from ..forward import run_forward
        from ..installed import device_of
        from ..offload_hooks import OffloadHooks

        hooks = OffloadHooks(installed.offloaded, device_of(values))
        with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack):
            returned = run_forward(installed.program, values, seed=seed, plan=plan, on_value=hooks.produced)
        return Forward(returned, before_backward=hooks.start_backward, hooks=hooks)

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        from ..measure import measure_step

        forwards: list[Forward] = []
        measured = measure_step(step.runner(self, forwards), step.model, step.device, timing_runs)
        hooks = forwards[-1].hooks
        installed = step.installed
        graph = installed.decisions.graph
        missed = tuple(Uncontrolled(node_label(graph, node), graph.node(node).mem,
                                    _why_not_offloaded(installed.program, [n for n, (owner, _) in
                                                                           installed.offloaded.items()
                                                                           if owner == node]))
                       for node in hooks.missed())
        timing = step.simulated.timing
        return RouteRun(measured, uncontrolled=installed.program.uncontrolled + missed,
                        details={**hooks.summary(), "simulated_host_peak": timing.host_peak if timing else 0,
                                 "simulated_makespan": step.simulated.makespan,
                                 "plan_offloaded_nodes": len(installed.decisions.offloaded)})


    def over_budget(self, held: int, budget: int, details: Mapping[str, Any]) -> str | None:
        """On a CPU nothing moves, so what the plan offloads stays: the step is judged against the budget plus the
        host bytes the plan holds at its peak, and the warning says so."""
        moved = str(details.get("transfers", "")).startswith("copies")
        stayed = 0 if moved else int(details.get("simulated_host_peak", 0))
        if not stayed or held <= budget * (1 + BUDGET_SLACK):
            return super().over_budget(held, budget, details)
        within = held <= (budget + stayed) * (1 + BUDGET_SLACK)
        return (f"the step held {format_bytes(held)} with the weights and inputs, {held / budget:.2f}x the budget of "
                f"{format_bytes(budget)}: on a CPU the host is the device, so the {format_bytes(stayed)} the plan "
                f"offloads at its peak stayed; against the budget plus what stayed ({format_bytes(budget + stayed)}) "
                f"it held {held / (budget + stayed):.2f}x" + ("" if within else f": {self.over_budget_reason}"))


def _why_not_offloaded(program: "ForwardProgram", names: list[str]) -> str:
    """Why the hooks never saw a value the plan offloads (FX ``names``: it and its views) saved for the backward."""
    positions = [k for k, node in enumerate(program.nodes) if node.name in names]
    if any(region.checkpointed and region.start <= p < region.end for region in program.regions for p in positions):
        return ("made inside a checkpoint region that recomputes: SAC keeps what the region saves in its own cache, "
                "beyond saved-tensor hooks, so it stays on the device")
    return "no op saves it for the backward (only views of it, or nothing): there was nothing to offload"
