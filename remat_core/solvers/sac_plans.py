"""Plans in SAC's own terms over a traced model's blocks, written down as the ops a step through SAC performs,
for the one simulator to judge: what the deployed checkpointing policies (:mod:`.peers`) and our SAC planner
(:mod:`.sac`) share.

Hugging Face's ``gradient_checkpointing_enable`` and torchtitan's selective op policy checkpoint a model's
blocks (its decoder or encoder layers; for other models, its repeated modules) and decide, op by op, what a
region saves. :func:`policy_schedule` turns such a decision (a :class:`~remat_core.schedule.sac_program.SacPlan`)
into the schedule :func:`~remat_core.schedule.sac_route.sac_route_ops` says the step performs: its peak is
what the policy holds, its cost what it computes and recomputes. The plan itself travels in the schedule's
``solver_info["sac_plan"]``, so that ``execute --via sac`` installs exactly it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import InfeasibleBudget, SolverOptionError
from ..graph import ComputeGraph
from ..schedule import COMPUTE, Schedule, reason, simulate
from ..schedule.sac_program import (SAC_PLAN, SacPlan, block_spans, forward_ops, forward_returns, program_of_plan,
                                    span_names)
from ..schedule.sac_route import sac_policy_cost, sac_route_ops

FORWARD_KINDS = ("forward", "loss")

PARTITIONER_COMPUTE_INTENSIVE = ("aten.mm.default", "aten.addmm.default", "aten.bmm.default",
                                 "aten.convolution.default", "aten.convolution_backward.default",
                                 "aten._scaled_dot_product_efficient_attention.default",
                                 "aten._scaled_dot_product_flash_attention.default", "aten._scaled_mm.default",
                                 "aten.upsample_bilinear2d.default", "aten._efficient_attention_forward.default",
                                 "aten._flash_attention_forward.default")
"""torch 2.13's ``get_default_op_list().compute_intensive_ops``, by overload (torchtitan takes each ``.default``)."""
TORCHTITAN_EXTRA = ("aten._scaled_dot_product_cudnn_attention.default",
                    "aten._scaled_dot_product_attention_math.default",
                    "aten._scaled_dot_product_fused_attention_overrideable.default", "aten.max.default",
                    "higher_order.flex_attention", "aten.linear.default", "aten.topk.default",
                    "_c10d_functional.reduce_scatter_tensor.default", "_c10d_functional.all_to_all_single.default")
"""The ops torchtitan adds to the save list (the SDPA variants, max for low precision's scales, FlexAttention,
linear, topk, the collectives)."""
SAVE_LIST = frozenset(PARTITIONER_COMPUTE_INTENSIVE + TORCHTITAN_EXTRA)
MM_OPS = frozenset({"aten.mm.default", "aten.linear.default"})
"""The ops whose every second occurrence in a block is recomputed."""


def saved_by_op_list(nodes: Any) -> set[str]:
    """The FX names of the ops torchtitan's selective op policy saves among one block's forward ops, in order: every
    op of :data:`SAVE_LIST` but every second ``mm`` (see :mod:`.peers.torchtitan_sac`)."""
    saved, mm_count = set(), 0
    for node in nodes:
        target = str(node.target)
        if target in MM_OPS:
            mm_count += 1
        if target == "aten._to_copy.default" and _cuda_to_cpu(node):
            saved.add(node.name)
        elif target in SAVE_LIST and not (target in MM_OPS and mm_count % 2 == 0):
            saved.add(node.name)
    return saved


def _cuda_to_cpu(node: Any) -> bool:
    source = node.args[0].meta.get("val") if node.args and hasattr(node.args[0], "meta") else None
    device = node.kwargs.get("device")
    return getattr(getattr(source, "device", None), "type", None) == "cuda" and str(device) == "cpu"


EXPENSIVE_OPS = SAVE_LIST | {"aten._scaled_dot_product_flash_attention_for_cpu.default"}
"""The ops whose outputs cost most to recompute, the CPU's attention kernel among them."""


def traced_forward(graph: ComputeGraph, solver: str) -> tuple[ComputeGraph, Sequence[Any], list[str]]:
    """The op-level traced graph, its forward ops and their returns; :class:`SolverOptionError` (a refusal, shown as
    not applicable) for a module-level graph (the front door refuses one with no model traced here)."""
    if graph.attachments.groups is not None:
        raise SolverOptionError(f"not applicable: {solver} decides op by op, and graph {graph.name!r} is at module "
                                f"level; trace it at op level (--level op)")
    returns = forward_returns(graph, loss=True)
    return graph, forward_ops(graph, returns), returns


def blocks(graph: ComputeGraph, nodes: Sequence[Any], solver: str) -> dict[str, tuple[int, int]]:
    """The model's blocks with their forward ops' spans; :class:`SolverOptionError` when it has none."""
    spans = block_spans(graph, nodes)
    if not spans:
        raise SolverOptionError(f"not applicable: {solver} checkpoints a model's blocks (its decoder or encoder layers, "
                                f"or a module repeated in a container), and {graph.name!r} has none")
    return spans


def policy_schedule(graph: ComputeGraph, budget: int, plan: SacPlan, returns: Sequence[str], solver: str,
                    what: str, info: Mapping[str, Any]) -> Schedule:
    """The schedule of a fixed policy: the ops SAC performs with ``plan``, each recomputation's reason naming
    ``what`` the policy does; refused below the peak it holds, which it names (it does not follow a budget)."""
    program = program_of_plan(graph, returns, plan)
    ops = sac_route_ops(graph, program)
    simulated = simulate(graph, ops)
    policy_seconds = sac_policy_cost(graph, program)
    peak = simulated.peak
    if peak > budget:
        raise InfeasibleBudget(budget, peak, solver, f"{solver} does not follow a budget: {what} holds {peak:,} "
                                                     f"bytes")
    binding = graph.attachments.binding
    block_of = {owner: block for block, (start, end) in block_spans(graph, program.nodes).items()
                for node in program.nodes[start:end] for owner in binding.storage.get(node.name, ())}
    kinds = {n.id: n.kind for n in graph.nodes}
    seen: set[str] = set()
    reasons = []
    for action, node in ops:
        again = action == COMPUTE and node in seen and kinds[node] in FORWARD_KINDS
        seen.add(node)
        reasons.append(reason(f"recomputed by {solver}: {what}; {block_of.get(node, 'its block')} re-runs in the "
                              f"backward", rule="policy-recompute", block=block_of.get(node)) if again else None)
    return Schedule.from_ops(ops, reasons, solver_info={**info, SAC_PLAN: plan.to_json(),
                                                        "regions": len(plan.regions), "saved_ops": len(plan.saved),
                                                        "policy_peak": peak,
                                                        "policy_cost": simulated.cost + policy_seconds,
                                                        "sac_policy_cost": policy_seconds})


def checkpointed_blocks(nodes: Sequence[Any], spans: Mapping[str, tuple[int, int]], every: int
                        ) -> list[tuple[str, tuple[int, int]]]:
    """Every ``every``-th block (the first, then each ``every`` on), as Hugging Face's ``every_n_layers`` counts."""
    return [(block, span) for k, (block, span) in enumerate(spans.items()) if k % every == 0]


def region_names(nodes: Sequence[Any], chosen: Sequence[tuple[str, tuple[int, int]]]) -> tuple[tuple[str, str], ...]:
    """The :class:`SacPlan` regions of the chosen blocks."""
    return tuple(span_names(nodes, start, end) for _, (start, end) in chosen)
