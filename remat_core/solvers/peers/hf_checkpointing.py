"""``hf-checkpointing``: Hugging Face's one line, ``model.gradient_checkpointing_enable()``, as a peer.

Hugging Face wraps the forward of every decoder or encoder layer (each ``GradientCheckpointingLayer``; with
``every_n_layers=n``, every n-th of them, counting from the first) in ``torch.utils.checkpoint`` without a
policy: a layer keeps only its inputs, and the backward re-runs it whole (up to the last op whose output it
needs: PyTorch's early stop). On another model the same is done to its repeated blocks, found from the module
paths. The policy is fixed: it does not follow a budget; refused below the peak it holds.

References
----------
Hugging Face transformers, ``PreTrainedModel.activation_checkpointing_enable`` and
``modeling_layers.GradientCheckpointingLayer`` (5.x).
"""

from __future__ import annotations

from ...errors import SolverOptionError
from ...graph import ComputeGraph
from ...schedule import Schedule
from ...schedule.sac_program import SacPlan
from ..registry import MAX_POLICY_SETTINGS, Option, SolverTags, register
from ..sac_plans import blocks, checkpointed_blocks, policy_schedule, region_names, traced_forward

NAME = "hf-checkpointing"


def every_n_settings(graph: ComputeGraph) -> list[dict[str, int]]:
    """``every`` = 1, 2, ... up to the number of blocks (at most
    :data:`~remat_core.solvers.registry.MAX_POLICY_SETTINGS`): the policy as users set it. A model without blocks
    (or not traced here) gets the default alone, whose solve then says why the policy does not apply."""
    if not graph.attachments.executable:
        return [{}]
    try:
        _, nodes, _ = traced_forward(graph, NAME)
        count = len(blocks(graph, nodes, NAME))
    except SolverOptionError:
        count = 1
    return [{"every": n} for n in range(1, min(count, MAX_POLICY_SETTINGS) + 1)]


@register(NAME, "Hugging Face's gradient_checkpointing_enable: every layer (or every n-th) checkpointed whole; "
                "on other models their repeated blocks. A fixed policy, refused below its own peak.",
          tags=SolverTags(uses_traced_graph=True, needs_traced_model=True, follows_budget=False, sees_transients=True,
                          budget_monotone=True),
          options=(Option("every", int, 1, "checkpoint every n-th layer, from the first (Hugging Face's "
                                           "every_n_layers)", low=1, high=1024),),
          reference="Hugging Face transformers 5.x, PreTrainedModel.activation_checkpointing_enable(every_n_layers)",
          settings=every_n_settings)
def hf_checkpointing(graph: ComputeGraph, budget: int, *, time_limit: float | None = None, every: int = 1) -> Schedule:
    """Every ``every``-th block checkpointed whole (no op inside saves), the rest run plainly."""
    del time_limit
    graph, nodes, returns = traced_forward(graph, NAME)
    chosen = checkpointed_blocks(nodes, blocks(graph, nodes, NAME), every)
    plan = SacPlan(region_names(nodes, chosen))
    what = f"{len(chosen)} layer(s) checkpointed whole" + (f" (every {every})" if every > 1 else "")
    return policy_schedule(graph, budget, plan, returns, NAME, what,
                           {"policy": "gradient_checkpointing_enable", "every_n_layers": every,
                            "checkpointed": [block for block, _ in chosen]})
