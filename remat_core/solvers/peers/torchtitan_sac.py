"""``torchtitan-sac``: torchtitan's selective activation checkpointing by op (``mode = "selective"``,
``selective_ac_option = "op"``), as a peer.

torchtitan wraps every transformer block (here: each of the model's blocks) in a non-reentrant checkpoint with
``early_stop=False`` (a block re-runs whole) and a policy that sees each op as the forward runs it:

- an op whose target is in the save list is ``MUST_SAVE``, except every second ``mm`` (or ``linear``) of the
  block, counted in order, which is ``PREFER_RECOMPUTE``;
- a copy from CUDA to the CPU is ``MUST_SAVE``;
- every other op is ``PREFER_RECOMPUTE``.

The save list is the partitioner's compute-intensive ops (``get_default_op_list().compute_intensive_ops``:
``mm``, ``addmm``, ``bmm``, convolutions, the efficient and flash attention kernels...) with the SDPA variants,
``max``, ``linear``, ``topk``, FlexAttention and the collectives torchtitan adds. A fixed policy: refused below
the peak it holds.

References
----------
torchtitan, ``torchtitan/distributed/activation_checkpoint.py`` (``_get_default_save_ops``,
``SelectiveAC._wrap_block``), read at commit b5bcd76.
"""

from __future__ import annotations

from typing import Any

from ...graph import ComputeGraph
from ...schedule import Schedule
from ...schedule.sac_program import SacPlan
from ..registry import SolverTags, register
from .block_policies import blocks, policy_schedule, region_names, traced_forward

NAME = "torchtitan-sac"

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


def policy_saves(nodes: Any) -> set[str]:
    """The FX names of the ops torchtitan's policy saves among one block's forward ops, in order."""
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


@register(NAME, "torchtitan's selective op checkpointing: every block checkpointed, matmuls, attention and the "
                "other compute-intensive ops saved but every second mm. A fixed policy, refused below its own peak.",
          tags=SolverTags(uses_traced_graph=True, needs_traced_model=True, follows_budget=False, sees_transients=True,
                          budget_monotone=True),
          reference="torchtitan, torchtitan/distributed/activation_checkpoint.py: SelectiveAC (op mode)")
def torchtitan_sac(graph: ComputeGraph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """Every block checkpointed under torchtitan's op policy (see the module notes)."""
    del time_limit
    graph, nodes, returns = traced_forward(graph, NAME)
    chosen = list(blocks(graph, nodes, NAME).items())
    saved = set().union(*(policy_saves(nodes[start:end]) for _, (start, end) in chosen))
    plan = SacPlan(region_names(nodes, chosen), frozenset(saved), early_stop=False)
    return policy_schedule(graph, budget, plan, returns, NAME,
                           f"{len(chosen)} block(s) checkpointed, {len(saved)} op(s) saved by its op policy",
                           {"policy": "selective op", "checkpointed": [block for block, _ in chosen]})
