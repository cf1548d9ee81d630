"""A plan made ready to run through autograd: what every route that installs a plan in PyTorch builds first.

A training step measured with a plan (:func:`remat_core.run.step.train_step`) and the drop-in module
(:func:`remat_core.run.rematerialized.rematerialize`) need the same state: the plan read per forward
tensor, the traced forward cut into checkpoint regions, the values the plan offloads, the joint graph's
placeholders and the buffers the forward writes back. :class:`InstalledPlan` builds it once, from the
traced graph and the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from ..frontends import real_placeholder_values
from ..graph import ComputeGraph
from ..schedule import Schedule
from ..schedule.decisions import PlanDecisions, plan_decisions
from ..schedule.sac_program import ForwardProgram, schedule_program
from .forward import write_buffer_updates
from .offload_hooks import offloaded_values

@dataclass
class InstalledPlan:
    """A schedule of a traced graph as the forward program autograd runs (see the module notes).

    Attributes
    ----------
    graph : ComputeGraph
        The traced graph (op or module level).
    schedule : Schedule
    decisions : PlanDecisions
        The plan per forward tensor, at the op level.
    program : ForwardProgram
        The forward ops computing ``returns``, cut into checkpoint regions: as the schedule's own
        :class:`~remat_core.schedule.sac_program.SacPlan` says when it was made in SAC's terms
        (``solver_info["sac_plan"]``), else as its decisions allow.
    offloaded : mapping
        The FX values whose storage the plan offloads (:func:`~.offload_hooks.offloaded_values`).
    placeholders : list of str
        The joint graph's placeholder names, in order.
    buffer_updates : mapping of str to str
        Buffer name -> the FX value of its new value.
    kept : dict
        What a route keeps between runs of the same plan (the compiled function).
    """

    graph: ComputeGraph
    schedule: Schedule
    returns: Sequence[str]
    decisions: PlanDecisions = field(init=False)
    program: ForwardProgram = field(init=False)
    offloaded: Mapping[str, tuple[str, Any]] = field(init=False)
    placeholders: list[str] = field(init=False)
    buffer_updates: Mapping[str, str] = field(init=False)
    kept: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        binding = self.graph.attachments.binding
        self.decisions = plan_decisions(self.graph, self.schedule.ops)
        self.program = schedule_program(self.decisions, self.schedule.solver_info, list(self.returns))
        self.offloaded = offloaded_values(self.decisions, binding, self.program.nodes)
        self.placeholders = [n.name for n in binding.graph_module.graph.find_nodes(op="placeholder")]
        self.buffer_updates = dict(binding.buffer_updates)

    @property
    def joint(self) -> Any:
        """The traced :class:`~remat_core.frontends.tracing.capture.JointGraph` (the model, its example inputs)."""
        return self.graph.attachments.joint

    def values(self, joint: Any, purpose: str, hint: str) -> dict[str, Any]:
        """Placeholder name -> real value for a run on ``joint``'s model and inputs (``purpose`` and ``hint`` word
        the error when one has none)."""
        return dict(zip(self.placeholders, real_placeholder_values(joint, purpose, hint)))

    def write_buffers(self, model: torch.nn.Module, returned: Mapping[str, Any]) -> None:
        """The forward's buffer updates copied into ``model``'s buffers, as eager BatchNorm does in place."""
        write_buffer_updates(model, self.buffer_updates, returned)


def device_of(values: Mapping[str, Any]) -> torch.device:
    """Where a run's tensors live (the first tensor's device; the CPU when there is none)."""
    return next((v.device for v in values.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
