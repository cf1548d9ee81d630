"""A plan in SAC's own terms, said in the user's own modules: which module calls are checkpoint regions and which
of their ops save their outputs, by op and occurrence (what :mod:`.policy_runtime` installs).

A :class:`~remat_core.schedule.sac_program.SacPlan` names FX ops of the traced step. Each of its regions must be
one call of one module (:func:`~remat_core.frontends.tracing.eager_ops.region_module`); its saved ops are said as
the module's own forward shows them to a policy (:func:`~remat_core.frontends.tracing.eager_ops.eager_ops`). A
saved op SAC cannot cache in eager PyTorch (an in-place op's output, or one mutated in place later) is left
recomputed and listed in :attr:`ModulePolicy.dropped`; the SAC planner plans around them, so its plans drop none.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import torch

from ..errors import ExecutionError, NotModuleBounded
from ..graph import ComputeGraph
from ..schedule import Schedule
from ..schedule.eager_match import eager_ops, op_behind, region_module
from ..schedule.sac_program import SAC_PLAN, SacPlan, forward_ops, forward_returns
from .policy_runtime import install, uninstall


@dataclass(frozen=True)
class ModulePolicy:
    """A SAC plan on the model's own modules.

    Attributes
    ----------
    regions : mapping of str to mapping of str to tuple of int
        Module path -> op name -> the occurrences (in one call of the module's forward) whose outputs are saved.
    early_stop : bool
        Whether a region's recomputation stops after the last op it needs (PyTorch's default).
    dropped : tuple of str
        Traced ops the plan saves that SAC cannot cache in the eager forward (left recomputed), by FX name.
    """

    regions: Mapping[str, Mapping[str, tuple[int, ...]]]
    early_stop: bool = True
    dropped: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The regions as plain data (what a policy file writes down)."""
        return {path: {op: list(occurrences) for op, occurrences in saved.items()}
                for path, saved in self.regions.items()}


def sac_plan_of(schedule: Schedule) -> SacPlan:
    """The SAC plan ``schedule`` was made as; :class:`NotModuleBounded` for a schedule made tensor by tensor."""
    data = schedule.solver_info.get(SAC_PLAN)
    if data is None:
        raise NotModuleBounded(f"the schedule of {schedule.solver!r} frees and recomputes single tensors, not "
                               f"checkpoint regions; plan with solver='sac-planner' (the default of via='sac'), whose "
                               f"regions are the model's modules")
    return SacPlan.from_json(data)


def module_policy(graph: ComputeGraph, schedule: Schedule) -> ModulePolicy:
    """The SAC plan of ``schedule`` on the modules of the model traced as ``graph`` (see the module notes); kept on
    the graph.

    Raises
    ------
    NotModuleBounded
        For a schedule not made as a SAC plan, or a region that is not one call of one module (named, with the
        modules whose ops it holds).
    ExecutionError
        For a graph with no model traced here.
    """
    plan = sac_plan_of(schedule)
    if not graph.attachments.executable:
        raise ExecutionError(f"graph {graph.name!r} has no model traced here to install the plan on")
    graph = graph.attachments.op_graph or graph
    return graph.memo(f"module policy {plan.to_json()}", lambda: _module_policy(graph, plan))


def _module_policy(graph: ComputeGraph, plan: SacPlan) -> ModulePolicy:
    nodes = forward_ops(graph, forward_returns(graph, loss=True))
    position = {node.name: k for k, node in enumerate(nodes)}
    spans = {}
    for first, last in plan.regions:
        start, end = position[first], position[last] + 1
        spans[region_module(graph, nodes, start, end)] = (start, end)
    seen = eager_ops(graph, list(spans))
    regions, dropped = {}, []
    for path, (start, end) in spans.items():
        occurrences: dict[str, list[int]] = {}
        for node in nodes[start:end]:
            if node.name not in plan.saved:
                continue
            eager = seen[path].get(op_behind(node).name)
            if eager is None or not eager.cachable:
                dropped.append(node.name)
            else:
                occurrences.setdefault(eager.op, []).append(eager.occurrence)
        regions[path] = {op: tuple(sorted(set(occ))) for op, occ in occurrences.items()}
    return ModulePolicy(regions, plan.early_stop, tuple(dropped))


@contextlib.contextmanager
def installed_on(model: torch.nn.Module, policy: ModulePolicy) -> Iterator[torch.nn.Module]:
    """``policy`` installed on ``model`` for the block, then taken off (the model as it was)."""
    install(model, policy.regions, policy.early_stop)
    try:
        yield model
    finally:
        uninstall(model)

