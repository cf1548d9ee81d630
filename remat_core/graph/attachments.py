"""What a traced graph keeps beside itself: the model and the joint FX graph it came from.

A graph read from a file (JSON, ONNX) has sizes and costs only. A graph traced in this process also
carries the objects that let a schedule run on real tensors and let a peer's own partitioner run on
the very FX graph the nodes were built from. They are Python objects (an ``nn.Module``, a
``torch.fx.GraphModule``), so they are neither serialised nor part of the content hash: two graphs
with the same nodes are equal whatever they carry. Whoever keys an answer on a graph must therefore
add what the answer read from here (:attr:`Attachments.mode`), as the results store does for the
solvers tagged ``uses_traced_graph``.

This module imports nothing of PyTorch; the fields are typed loosely for that reason and documented
with the types the tracer puts there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .compute_graph import ComputeGraph

TRACED, SIZES = "traced", "sizes"
""":attr:`Attachments.mode`: a traced model behind the graph, or sizes and costs alone."""


@dataclass(frozen=True)
class Attachments:
    """The objects a traced graph carries (all None for a graph read from a file).

    Attributes
    ----------
    binding : FxBinding or None
        :class:`remat_core.frontends.tracing.to_graph.FxBinding`: graph node <-> FX node, storages,
        module calls; ``binding.graph_module`` is the joint forward+backward ``torch.fx.GraphModule``.
    joint : JointGraph or None
        :class:`remat_core.frontends.tracing.capture.JointGraph`: the model and the example inputs whose
        real values a schedule runs on.
    groups : mapping of str to tuple of str, or None
        Module-level graphs: node id -> the op-level node ids it stands for.
    op_graph : ComputeGraph or None
        Module-level graphs: the op-level graph they were coarsened from.
    sac_op_seconds : float
        What a selective-checkpoint policy adds to each op it is asked about, in the units of the node costs:
        measured here for measured costs (SAC's Python dispatch mode, once as the forward caches and once as the
        recomputation replays), 0 for the other cost models (they count work, not Python).
    """

    binding: Any = None
    joint: Any = None
    groups: Mapping[str, tuple[str, ...]] | None = None
    op_graph: "ComputeGraph | None" = None
    sac_op_seconds: float = 0.0

    def __bool__(self) -> bool:
        """Whether anything is attached."""
        return any(value is not None for value in (self.binding, self.joint, self.groups, self.op_graph))

    @property
    def executable(self) -> bool:
        """Whether a model is behind the graph to run a schedule on (traced here, not read from a file)."""
        return self.binding is not None and self.joint is not None

    @property
    def executable_ops(self) -> bool:
        """Whether the graph is a model traced here at op level: what a policy over the model's blocks and ops
        (a solver tagged ``needs_traced_model``) plans on."""
        return self.executable and self.groups is None

    @property
    def mode(self) -> str:
        """:data:`TRACED` when the op-level graph behind this one carries its FX graph, else :data:`SIZES`."""
        behind = self.op_graph.attachments if self.op_graph is not None else self
        return TRACED if behind.binding is not None else SIZES

    def coarsened(self, groups: Mapping[str, tuple[str, ...]], op_graph: "ComputeGraph") -> "Attachments":
        """These attachments on a module-level graph made from ``op_graph``."""
        return replace(self, groups=groups, op_graph=op_graph)


NONE = Attachments()
"""A graph with nothing attached."""
