"""What a schedule decides for each forward tensor of a traced step: keep it, recompute it, or let it go.

PyTorch's own mechanisms speak in these terms, not in compute/free ops: selective activation
checkpointing asks *save or recompute* per op, Inductor's partitioner asks *save or recompute* per
forward node. A schedule is read at the op level (a module-level schedule through the op-level
graph it was coarsened from) and split where the backward pass starts (its first compute of a
``backward`` node):

- ``keep``: computed once and resident when the backward starts (the plan saves it);
- ``recompute``: computed again, or first, after the backward started;
- ``transient``: computed in the forward and freed before the backward, never needed again.

A tensor the schedule offloads in the forward (and prefetches for the backward) is ``keep``: it is
saved, on the host for a while; :attr:`PlanDecisions.offloaded` names them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from ..graph import ComputeGraph
from .levels import to_op_level
from .schedule import COMPUTE, FREE, OFFLOAD, PREFETCH, Op

KEEP, RECOMPUTE, TRANSIENT = "keep", "recompute", "transient"
FORWARD_KINDS = ("forward", "loss")


@dataclass(frozen=True)
class PlanDecisions:
    """Per forward node of an op-level traced graph: :data:`KEEP`, :data:`RECOMPUTE` or :data:`TRANSIENT`.

    Attributes
    ----------
    graph : ComputeGraph
        The op-level graph the decisions are about (the graph itself, or a module-level graph's ``op_graph``).
    choice : mapping of str to str
        Forward node id -> its decision.
    bursts : int
        Runs of consecutive recomputations in the backward: how many times the plan goes back to
        recompute (a checkpoint region recomputes in one run).
    offloaded : frozenset of str
        Forward nodes the schedule copies to the host before the backward starts.
    """

    graph: ComputeGraph
    choice: Mapping[str, str]
    bursts: int
    offloaded: frozenset[str] = frozenset()

    def of(self, node_id: str) -> str | None:
        """The decision for ``node_id``; None for pinned and backward nodes."""
        return self.choice.get(node_id)

    def count(self, decision: str) -> int:
        return sum(1 for d in self.choice.values() if d == decision)


def plan_decisions(graph: ComputeGraph, ops: tuple[Op, ...]) -> PlanDecisions:
    """Read ``ops`` (a valid schedule of ``graph``) as keep / recompute / transient per forward node."""
    op_graph, op_ops, _ = to_op_level(graph, ops)
    kinds = {n.id: n.kind for n in op_graph.nodes}
    boundary = next((k for k, (action, node) in enumerate(op_ops) if action == COMPUTE and kinds[node] == "backward"),
                    len(op_ops))
    computes = Counter(node for action, node in op_ops if action == COMPUTE and kinds[node] in FORWARD_KINDS)
    resident: set[str] = set()
    offloaded = {node for action, node in op_ops[:boundary] if action == OFFLOAD}
    for action, node in op_ops[:boundary]:
        if action in (COMPUTE, PREFETCH):
            resident.add(node)
        elif action == FREE:
            resident.discard(node)
    early = {node for action, node in op_ops[:boundary] if action == COMPUTE}
    choice: dict[str, str] = {}
    for node, count in computes.items():
        if count > 1 or node not in early:
            choice[node] = RECOMPUTE
        elif node in resident or node in offloaded:
            choice[node] = KEEP
        else:
            choice[node] = TRANSIENT
    bursts, in_burst = 0, False
    for action, node in op_ops[boundary:]:
        if action != COMPUTE:
            continue
        recomputing = kinds[node] in FORWARD_KINDS
        bursts += recomputing and not in_burst
        in_burst = recomputing
    return PlanDecisions(op_graph, choice, bursts, frozenset(offloaded))
