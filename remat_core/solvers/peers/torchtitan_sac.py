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

from ...graph import ComputeGraph
from ...schedule import Schedule
from ...schedule.sac_program import SacPlan
from ..registry import SolverTags, register
from ..sac_plans import blocks, policy_schedule, region_names, saved_by_op_list, traced_forward

NAME = "torchtitan-sac"

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
    saved = set().union(*(saved_by_op_list(nodes[start:end]) for _, (start, end) in chosen))
    plan = SacPlan(region_names(nodes, chosen), frozenset(saved), early_stop=False)
    return policy_schedule(graph, budget, plan, returns, NAME,
                           f"{len(chosen)} block(s) checkpointed, {len(saved)} op(s) saved by its op policy",
                           {"policy": "selective op", "checkpointed": [block for block, _ in chosen]})
