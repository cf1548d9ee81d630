"""A plan shipped as a file a training script runs without this package: plain PyTorch, Hugging Face's switch or
torchtitan's settings.

- ``torch``: one Python file that needs only torch. Its docstring gives the budget, the predicted peak and step
  time, and the model and inputs the plan was made for; it defines ``REGIONS`` (module path -> the ops saved, by
  op and occurrence), ``PREDICTED_PEAK_BYTES`` and ``apply(model)``, which installs the plan on the user's own
  module in place (:mod:`.policy_runtime`, whose source the file carries) and returns it, and ``remove(model)``.
- ``hf``: the ``gradient_checkpointing_enable`` / ``activation_checkpointing_enable(every_n_layers=n)`` call, where
  the plan checkpoints every n-th layer whole and saves nothing inside.
- ``torchtitan``: the ``[activation_checkpoint]`` settings (``mode = "full"``, ``selective_ac_option = "n"`` or
  ``"op"``), where the plan is one of them.

A plan whose regions are not module calls cannot be installed on modules; the refusal names the region and the
nearest plan that can (the SAC planner's at the same budget), with both peaks.
"""

from __future__ import annotations

import inspect
import pprint
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import ExecutionError, NotModuleBounded, RematError
from ..graph import ComputeGraph, format_bytes
from ..schedule import Schedule, checkpoint_all_cost, simulate
from ..schedule.sac_program import SacPlan, block_spans, forward_ops, forward_returns, program_of_plan
from ..schedule.sac_route import sac_policy_cost, sac_route_ops
from .policy_formats import FORMATS
from .policy_runtime import install as _install
from .module_policy import ModulePolicy, module_policy, sac_plan_of


@dataclass(frozen=True)
class PlanFacts:
    """What a policy file says about the plan it carries."""

    model: str
    inputs: str
    budget: int
    predicted_peak: int
    pinned: int
    predicted_step: float
    """Predicted step time over the eager step's."""
    solver: str


def export_policy(graph: ComputeGraph, schedule: Schedule, path: str | Path, *, budget: int, promised_peak: int,
                  format: str = "torch", nearest: Callable[[], Schedule] | None = None) -> Path:
    """Write ``schedule``'s plan to ``path`` in ``format`` (see the module notes); returns the path.

    Parameters
    ----------
    nearest : callable, optional
        The plan at module boundaries to offer when ``schedule``'s regions are not module calls (its peak is named).

    Raises
    ------
    NotModuleBounded
        For a plan not installable on modules (a region not one module call, or a plan of single tensors).
    ExecutionError
        For a format the plan is not expressible in (saying why and what would work), or an unknown format.
    """
    if format not in FORMATS:
        raise ExecutionError(f"unknown policy format {format!r}; use one of {', '.join(FORMATS)}")
    try:
        facts = plan_facts(graph, schedule, budget, promised_peak)
        if format != "torch":  # their own mechanisms: the plan must be one of their settings
            text = {"hf": hf_policy_source, "torchtitan": torchtitan_policy_source}[format](graph, schedule, facts)
        else:
            policy = module_policy(graph, schedule)
            if policy.dropped:
                raise NotModuleBounded(f"{len(policy.dropped)} op(s) the plan saves cannot be cached by SAC in the "
                                       f"model's own forward (in-place, or mutated later: "
                                       f"{', '.join(policy.dropped[:3])}); solver='sac-planner' plans around them")
            text = torch_policy_source(policy, facts)
    except NotModuleBounded as refusal:
        raise NotModuleBounded(f"{refusal}{_nearest_note(graph, schedule, nearest)}") from None
    target = Path(path)
    target.write_text(text)
    return target


def plan_facts(graph: ComputeGraph, schedule: Schedule, budget: int, promised_peak: int) -> PlanFacts:
    """The model, inputs, budget, predicted peak and step time of ``schedule``'s plan."""
    joint = graph.attachments.joint
    graph = graph.attachments.op_graph or graph
    returns = forward_returns(graph, loss=True)
    program = program_of_plan(graph, returns, sac_plan_of(schedule))
    simulated = simulate(graph, sac_route_ops(graph, program))
    baseline = checkpoint_all_cost(graph)
    step = (simulated.cost + sac_policy_cost(graph, program)) / baseline if baseline > 0 else 1.0
    names = joint.input_names
    shown = joint.inputs[:joint.num_model_inputs]
    positional = len(shown) - len(names)
    inputs = ", ".join([*(_shape(t) for t in shown[:positional]),
                        *(f"{n}={_shape(t)}" for n, t in zip(names, shown[positional:]))])
    return PlanFacts(type(joint.model).__name__, inputs, budget, promised_peak, graph.pinned_bytes, step,
                     schedule.solver)


def _shape(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}[{', '.join(map(str, value.shape))}] on {value.device}"
    return type(value).__name__


def _header(facts: PlanFacts, what: str) -> list[str]:
    return [f"{what} for {facts.model}, made by Remat Explorer (solver {facts.solver}) with torch {torch.__version__}.",
            "",
            f"Budget: {format_bytes(facts.budget)} ({facts.budget:,} bytes), weights and inputs included.",
            f"Predicted peak: {format_bytes(facts.predicted_peak)} ({facts.predicted_peak:,} bytes; "
            f"{format_bytes(facts.predicted_peak - facts.pinned)} above the weights and inputs).",
            f"Predicted step time: {facts.predicted_step:.2f}x the eager step.",
            f"Made for: {facts.model}({facts.inputs}) in training mode; other shapes hold other peaks."]


def torch_policy_source(policy: ModulePolicy, facts: PlanFacts) -> str:
    """The torch-only policy file (see the module notes)."""
    regions = policy.to_json()
    saved = sum(len(occ) for ops in regions.values() for occ in ops.values())
    docstring = [*_header(facts, "Rematerialization policy"), "",
                 f"It checkpoints {len(regions)} module call(s) (torch.utils.checkpoint, use_reentrant=False) and "
                 f"saves {saved} op output(s) inside them,",
                 "named by op and occurrence in the module's forward; the rest of a region is recomputed in the "
                 "backward.", "",
                 "Use::", "", "    import policy", "    policy.apply(model)  # in place; returns the model",
                 "    policy.remove(model)  # the model's own forwards back"]
    runtime = inspect.getsource(inspect.getmodule(_install))  # the runtime this package installs with, as it is
    body = runtime.split('"""', 2)[2].replace("from __future__ import annotations\n", "", 1).strip("\n")
    return "\n".join(['"""' + "\n".join(docstring) + '\n"""', "", "from __future__ import annotations", "",
                      f"PREDICTED_PEAK_BYTES = {facts.predicted_peak}",
                      '"""The peak the plan holds, weights and inputs included."""',
                      f"PREDICTED_ACTIVATION_BYTES = {facts.predicted_peak - facts.pinned}",
                      '"""The peak above the weights and inputs."""',
                      f"BUDGET_BYTES = {facts.budget}", f"EARLY_STOP = {policy.early_stop}",
                      f"REGIONS = {pprint.pformat(regions, width=116, sort_dicts=False)}",
                      '"""Module path -> op -> the occurrences in one call of its forward whose outputs are saved."""',
                      "", body, "", "",
                      "def apply(model: torch.nn.Module) -> torch.nn.Module:",
                      '    """Install the plan on ``model`` (the model it was made for) in place; returns it."""',
                      "    return install(model, REGIONS, EARLY_STOP)", "", "",
                      "def remove(model: torch.nn.Module) -> torch.nn.Module:",
                      '    """Take the plan off ``model``; returns it."""',
                      "    return uninstall(model)", ""])


def per_layer(graph: ComputeGraph, schedule: Schedule) -> int | None:
    """``n`` when the plan checkpoints every ``n``-th of the model's blocks (from the first) whole and saves nothing
    inside them, as Hugging Face's ``every_n_layers`` and torchtitan's ``selective_ac_option = "n"`` do; else None."""
    plan = sac_plan_of(schedule)
    blocks = _block_regions(graph)
    if plan.saved or not plan.regions or not set(plan.regions) <= set(blocks):
        return None
    chosen = [k for k, region in enumerate(blocks) if region in set(plan.regions)]
    for n in range(1, len(blocks) + 1):
        if chosen == list(range(0, len(blocks), n)):
            return n
    return None


def _block_regions(graph: ComputeGraph) -> list[tuple[str, str]]:
    graph = graph.attachments.op_graph or graph
    nodes = forward_ops(graph, forward_returns(graph, loss=True))
    return [(nodes[start].name, nodes[end - 1].name) for start, end in block_spans(graph, nodes).values()]


def hf_policy_source(graph: ComputeGraph, schedule: Schedule, facts: PlanFacts) -> str:
    """Hugging Face's call for a per-layer plan; :class:`ExecutionError` saying why not otherwise."""
    n = per_layer(graph, schedule)
    if n is None or not graph.attachments.joint.blocks:
        raise ExecutionError("the plan is not Hugging Face's: it "
                             + ("saves ops inside its regions or checkpoints other than every n-th layer"
                                if graph.attachments.joint.blocks else "is for a model with no Hugging Face layers")
                             + "; export it as format='torch' (a torch-only file with apply(model))")
    lines = [f"# {line}" if line else "#" for line in _header(facts, "Hugging Face checkpointing")]
    call = ("model.activation_checkpointing_enable(activation_checkpointing_kwargs={'use_reentrant': False}, "
            f"every_n_layers={n})")
    return "\n".join([*lines, "# transformers 5.x; before, for every layer only:",
                      "#   model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})",
                      call, ""])


def torchtitan_policy_source(graph: ComputeGraph, schedule: Schedule, facts: PlanFacts) -> str:
    """torchtitan's ``[activation_checkpoint]`` settings for a plan that is one of them; :class:`ExecutionError`
    otherwise."""
    from ..solvers.sac_plans import saved_by_op_list

    n = per_layer(graph, schedule)
    if n is not None:
        settings = ['mode = "full"'] if n == 1 else ['mode = "selective"', f'selective_ac_option = "{n}"']
    else:
        plan = sac_plan_of(schedule)
        op_graph = graph.attachments.op_graph or graph
        nodes = forward_ops(op_graph, forward_returns(op_graph, loss=True))
        spans = list(block_spans(op_graph, nodes).values())
        titan = SacPlan(tuple(_block_regions(graph)),
                        frozenset().union(*(saved_by_op_list(nodes[a:b]) for a, b in spans)) if spans else frozenset())
        if plan.regions != titan.regions or plan.saved != titan.saved:
            raise ExecutionError("the plan is not one of torchtitan's settings (full, every n-th layer, or its op "
                                 "policy on every layer); export it as format='torch' (a torch-only file with "
                                 "apply(model))")
        settings = ['mode = "selective"', 'selective_ac_option = "op"', "early_stop = false"]
    lines = [f"# {line}" if line else "#" for line in _header(facts, "torchtitan activation checkpointing")]
    return "\n".join([*lines, "[activation_checkpoint]", *settings, ""])


def _nearest_note(graph: ComputeGraph, schedule: Schedule, nearest: Callable[[], Schedule] | None) -> str:
    """The nearest plan at module boundaries, with both peaks, for a refusal (empty when there is none)."""
    if nearest is None:
        return ""
    try:
        other = nearest()
        module_policy(graph, other)
    except RematError as e:
        return f"; no plan at module boundaries fits the budget either ({e})"
    ours = schedule.simulation.peak if schedule.simulation is not None else schedule.stats["peak"]
    theirs = other.simulation.peak if other.simulation is not None else other.stats["peak"]
    return (f"; the nearest plan at module boundaries ({other.solver} at the same budget) peaks at "
            f"{format_bytes(theirs)} against this plan's {format_bytes(ours)}: plan with solver={other.solver!r}")


__all__ = ["FORMATS", "export_policy", "per_layer", "plan_facts"]
