"""``rematerialize``: a module's training step traced, solved and installed once, behind a drop-in module.

The returned module computes the same outputs and parameter gradients as the original. Through SAC, a plan whose
regions are module calls (the SAC planner's, the default) is installed on the module's own submodules
(:mod:`remat_core.run.module_policy`): checkpoints around those calls with a per-op policy inside, so that the
module's own forward runs, at its own speed; any other plan runs as the traced step's forward ops with the plan
installed as selective activation checkpointing (:mod:`remat_core.run.forward`). ``compile`` compiles them with ``torch.compile`` and the plan in Inductor's
partitioner (:mod:`remat_core.run.compiled`), so its training step holds what the plan promises. It shares the
original's parameters and buffers (the original is its ``module`` attribute), so an optimizer
built on either trains both.

The plan is made for one input shape, one device and the mode the module was in (``train()`` for
dropout and batch statistics): other shapes are refused with a message, and a forward in another
mode, or with gradients off (evaluation), runs the original module unchanged.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.fx.traceback as fx_traceback
from torch import nn
from torch.utils import _pytree as pytree

from ..errors import ExecutionError, TraceError
from ..frontends import LossSetup, trace_training_graph
from ..frontends.losses import as_loss_setup
from ..graph import ComputeGraph, format_bytes, parse_budget
from ..schedule import Link, Schedule, checkpoint_all_peak
from ..schedule.links import parse_link
from ..schedule.sac_program import OUTPUT_TAG, ForwardProgram, forward_returns
from ..store import CONFIGURED, simulated, stored_schedule
from .installed import InstalledPlan
from .module_policy import ModulePolicy, installed_on
from .plan_file import load_plan, save_plan
from .progress import PlanningProgress
from .report import Uncontrolled
from .routes import Route, get_route, route_names

NOTICEABLE = 0.05
"""Tensors the plan frees that the caller keeps are worth a warning above this share of the planned peak."""


def rematerialize(module: nn.Module, example_inputs: Any, budget: int | str = "50%", solver: str | None = None,
                  loss: LossSetup | Callable[..., torch.Tensor] | nn.Module | None = None, *,
                  targets: torch.Tensor | Sequence[torch.Tensor] = (), via: str = "sac",
                  bandwidth: str | Link | None = None, plan: str | Path | None = None,
                  store: Any = CONFIGURED) -> "RematerializedModule":
    """``module`` as a drop-in module whose training step follows a rematerialization plan.

    Parameters
    ----------
    module : torch.nn.Module
        The model, in the mode it trains in.
    example_inputs : tensor, sequence of tensors, or mapping of str to tensor
        Inputs of the shapes (and device) it will be trained on, by position or by keyword
        (``{"input_ids": ids, "attention_mask": mask}``: the module is then called with them as keywords).
    budget : int or str
        Bytes (``123456``), bytes with a unit (``"1.5GiB"``) or a percent of the checkpoint-all
        peak (``"50%"``), weights and inputs included, as everywhere in Remat Explorer.
    solver : str, optional
        A solver of the registry (``python -m remat_core solvers``); default: the route's own planner
        (``sac-planner`` for ``via="sac"``: the plan SAC can follow, priced by measured op times).
    loss : LossSetup, callable, nn.Module or None
        The loss the plan is made for (its backward shapes the plan), in any form a training loop writes it
        (:func:`~remat_core.frontends.losses.as_loss_setup`): ``loss(output)``, a closure over the labels it
        captures (``lambda out: F.cross_entropy(out.logits.flatten(0, 1), labels.flatten())``),
        ``loss(output, *targets)`` or an ``nn`` loss module with ``targets``, a
        :class:`~remat_core.frontends.losses.LossSetup`, or None (a scalar output is the loss, otherwise the sum
        of every output element). A ``ModelOutput`` reaches it as the model returns it.
    targets : tensor or sequence of tensors
        The loss's further arguments, when it takes them.
    via : {"sac", "compile", "offload"}
        How the plan is installed: selective activation checkpointing (eager), ``torch.compile``
        with the plan as Inductor's partitioner's knapsack (compiled on the first training forward;
        on a CPU it needs a C++ compiler), or SAC with the plan's offloads as saved-tensor hooks
        (:mod:`remat_core.run.offload_hooks`; a copy stream on CUDA, nothing moves on a CPU). ``sac`` is
        planned for what SAC holds and keeps the budget; ``compile`` is not: Inductor's fusions and its
        own recomputation decide what the compiled step holds, up to 1.46x the budget on the zoo
        (``execute --via compile`` measures it and warns; docs/fidelity.md).
    bandwidth : str or Link, optional
        The transfer lane to the host an offloading solver (``pofo``, ``auto``) plans copies over:
        a :class:`~remat_core.schedule.Link`, a preset (``"pcie4"``) or a rate (``"12GB/s"``, read with
        the tracer's FLOP costs at 14 TFLOP/s: with a link the plan is priced in FLOPs, without one by the op times
        measured here). ``via="offload"`` needs it.
    plan : str or Path, optional
        A file the plan is saved to, and read back from at the next call (:mod:`remat_core.run.plan_file`): refused,
        naming what differs, when it was made for another graph, route or budget.
    store : ResultStore, None or "configured"
        Where solves are kept (:func:`remat_core.store.stored_solve`): by default the results store ``REMAT_STORE``
        names, so that a second start of a script finds its plan there in well under a second; None plans anew.

    Returns
    -------
    RematerializedModule

    Raises
    ------
    TraceError
        For a model that cannot be traced (the message names the op and the module), or a loss in no form above.
    BudgetError, InfeasibleBudget
        For budget text that cannot be read, or a budget no schedule of the solver fits (below the
        lower bound, the message gives it).
    UnknownSolver, SolverOptionError
    ExecutionError
        For another ``via``, or ``compile`` without a working compiler.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(8)])
    >>> remat = rematerialize(net, torch.randn(32, 64), budget="50%")
    >>> remat(torch.randn(32, 64)).sum().backward()
    """
    if not isinstance(module, nn.Module):
        raise TraceError(type(module).__name__, f"expected a torch.nn.Module, got {type(module).__name__}",
                         hint="wrap a function in an nn.Module whose forward calls it")
    installable = route_names(installs_module=True)
    if via not in installable:
        raise ExecutionError(f"rematerialize installs a plan via {' or '.join(map(repr, installable))}, not "
                             f"{via!r}")
    route = get_route(via)
    link = parse_link(bandwidth) if isinstance(bandwidth, str) else bandwidth
    route.check(link)
    try:
        setup = as_loss_setup(loss, targets)
    except TypeError as e:
        raise TraceError(type(module).__name__, str(e), hint="pass loss=lambda out: ..., loss=fn with targets=..., "
                                                             "an nn loss module with targets=..., or a LossSetup") from None
    tags = _OutputTags(setup)
    name = type(module).__name__
    with PlanningProgress(name) as progress:
        # op times as measured here price the plan; a link's rates are read against FLOP costs (see bandwidth)
        cost = "measured" if link is None else "flops"
        progress.phase(f"tracing ({cost} costs)")
        graph = trace_training_graph(module, example_inputs, LossSetup(tags.name, tags, tags.targets), name=name,
                                     cost=cost)
        if missing := tags.missing(graph):  # outputs the loss does not read (``out.loss``: not the logits)
            tags.keep = missing
            graph = trace_training_graph(module, example_inputs, LossSetup(tags.name, tags, tags.targets),
                                         name=name, cost=cost)
        solver = solver or route.default_solver(graph)
        asked = parse_budget(budget, checkpoint_all_peak(graph)) if isinstance(budget, str) else budget
        returns = forward_returns(graph, loss=False)
        if plan is not None and Path(plan).exists():
            progress.phase(f"reading the plan in {plan}")
            saved = load_plan(plan, graph, via, asked)
            planned = route.plan(graph, asked, lambda b: simulated(graph, saved, b, 0.0, link=link), returns)
        else:
            progress.phase(f"solving with {solver} for via={via!r}")
            planned = route.plan(graph, asked, lambda b: stored_schedule(graph, b, solver, store=store, link=link),
                                 returns)
            if plan is not None:
                save_plan(plan, graph, planned.schedule, via, asked, solver, planned.promised_peak)
    return RematerializedModule(module, graph, planned.schedule, tags, route, planned.promised_peak, asked)


class RematerializedModule(nn.Module):
    """A module whose training forward runs with a plan installed (see :func:`rematerialize`).

    Attributes
    ----------
    module : nn.Module
        The original module (parameters and buffers shared).
    graph : ComputeGraph
        The traced training step.
    schedule : Schedule
        The plan, as solved and simulated (its ``budget`` is the one the solver was asked for: less than
        :attr:`budget` where the route retried for less).
    budget : int
        The budget asked for, in bytes.
    promised_peak : int
        The peak the step keeps, weights included: for ``sac`` the simulated peak of what SAC does with
        the plan (its regions recompute in one run: :mod:`remat_core.run.sac_route`), at most the budget;
        for ``compile`` the plan's.
    program : ForwardProgram
        The forward ops and their checkpoint regions.
    on_modules : ModulePolicy or None
        The plan as installed on ``module``'s own submodules (checkpoints around the module calls that bound its
        regions, a per-op policy inside each), when the route runs it there: the forward is then ``module``'s own,
        at its own speed (:meth:`export_policy` writes it down); None: the traced forward ops run.
    route : Route
        How the plan is installed (:mod:`remat_core.run.routes`: ``sac``, ``compile`` or ``offload``).
    """

    def __init__(self, module: nn.Module, graph: ComputeGraph, schedule: Schedule, tags: "_OutputTags", route: Route,
                 promised_peak: int, budget: int):
        super().__init__()
        self.budget = budget
        self.module = module
        self.graph = graph
        self.schedule = schedule
        self.route = route
        self.promised_peak = promised_peak
        self._installed = InstalledPlan(graph, schedule, forward_returns(graph, loss=False))
        self.program: ForwardProgram = self._installed.program
        self.on_modules: ModulePolicy | None = route.on_modules(self._installed)
        returns = self.program.returns
        self._outputs = returns[:len(returns) - len(self._installed.buffer_updates)]
        self._joint = graph.attachments.joint
        self._spec, self._constants = tags.spec, tags.constants
        self._traced_training = module.training
        self._shapes = [(tuple(t.shape), t.dtype, t.device) for t in self._joint.inputs[:self._joint.num_model_inputs]]
        self._warn_about(self.program.uncontrolled, stacklevel=4)

    @property
    def via(self) -> str:
        """The route's name."""
        return self.route.name

    def forward(self, *inputs: torch.Tensor, **named: torch.Tensor) -> Any:
        if not torch.is_grad_enabled() or self.training != self._traced_training:
            return self.module(*inputs, **named)
        ordered = self._in_order(inputs, named)
        self._check(ordered)
        if self.on_modules is not None:  # the plan on the module's own submodules: its own forward runs it
            with installed_on(self.module, self.on_modules):
                return self.module(*inputs, **named)
        inputs = ordered
        joint = replace(self._joint, model=self.module,
                        inputs=(*inputs, *self._joint.inputs[self._joint.num_model_inputs:]))
        forward = self.route.forward(self._installed, self._installed.values(joint, "run the rematerialized module",
                                                                             "pass real tensors"))
        if forward.uncontrolled:
            self._warn_about(forward.uncontrolled, stacklevel=3)
        self._installed.write_buffers(self.module, forward.returned)
        leaves = iter(forward.returned[name] for name in self._outputs)
        return pytree.tree_unflatten([next(leaves) if c is _TENSOR else c for c in self._constants], self._spec)

    def export_policy(self, path: str | Path, format: str = "torch") -> Path:
        """Write the plan to ``path`` as a file a training script runs without this package (format ``torch``: one
        Python file needing only torch, with ``apply(model)`` and ``PREDICTED_PEAK_BYTES``; ``hf`` or
        ``torchtitan``: their own settings, where the plan is one of them): :mod:`remat_core.run.policy_export`.

        Raises
        ------
        NotModuleBounded
            For a plan whose regions are not module calls (the message offers the nearest one that is, with both
            peaks).
        ExecutionError
            For a format the plan is not expressible in.
        """
        from .policy_export import export_policy

        nearest = None if self.schedule.solver == "sac-planner" else (
            lambda: stored_schedule(self.graph, self.budget, "sac-planner", store=None))
        return export_policy(self.graph, self.schedule, path, budget=self.budget, promised_peak=self.promised_peak,
                             format=format, nearest=nearest)

    def _warn_about(self, uncontrolled: Sequence[Uncontrolled], stacklevel: int) -> None:
        """A warning when what the plan frees but the step keeps is more than a trifle of the planned peak."""
        extra = sum(u.bytes for u in uncontrolled)
        planned = self.promised_peak - self.graph.pinned_bytes
        if extra > NOTICEABLE * planned:
            warnings.warn(f"rematerialize: {len(uncontrolled)} tensor(s) the plan frees stay alive "
                          f"({format_bytes(extra)} more than the planned {format_bytes(planned)}): "
                          + "; ".join(f"{u.tensor}: {u.reason}" for u in uncontrolled[:3]), stacklevel=stacklevel)

    def _in_order(self, positional: tuple[Any, ...], named: dict[str, Any]) -> tuple[Any, ...]:
        """The inputs in the traced step's order: those traced by position, then those traced by keyword."""
        names = self._joint.input_names
        if set(named) != set(names) or len(positional) != len(self._shapes) - len(names):
            traced = [f"{len(self._shapes) - len(names)} by position"] + ([f"{', '.join(names)} by keyword"]
                                                                            if names else [])
            raise ValueError(f"the plan was traced with inputs {' and '.join(traced)}, got {len(positional)} by "
                             f"position{' and ' + ', '.join(named) + ' by keyword' if named else ''}; call it as it "
                             f"was traced (a plan holds for one way of calling)")
        return (*positional, *(named[n] for n in names))

    def _check(self, inputs: Sequence[Any]) -> None:
        got = [(tuple(t.shape), t.dtype, t.device) if isinstance(t, torch.Tensor) else type(t).__name__
               for t in inputs]
        if got != self._shapes:
            raise ValueError(f"the plan was made for inputs {_describe(self._shapes)}, got {_describe(got)}; call "
                             f"rematerialize again with example inputs of these shapes (a plan holds for one shape)")


_TENSOR = object()
"""Placeholder for a tensor leaf among the output's leaves."""


class _OutputTags:
    """The loss the plan is traced with, after tagging each tensor the model returns.

    Each output tensor goes through ``aten.alias`` inside ``annotate({OUTPUT_TAG: i})``: a view, so
    the graph gains no node, and the traced step marks which FX value the drop-in module returns.
    """

    def __init__(self, loss: LossSetup | None):
        self.loss = loss.fn if loss is not None else None
        self.targets = tuple(loss.targets) if loss is not None else ()
        self.name = loss.name if loss is not None else "sum"
        self.spec: pytree.TreeSpec | None = None
        self.constants: list[Any] = []
        self.count = 0
        self.keep: set[int] = set()
        """Outputs the loss does not read, kept in the traced step by a term of nothing (``0 * out.sum()``)."""

    def missing(self, graph: ComputeGraph) -> set[int]:
        """The tagged outputs the trace dropped: nothing in the step read them."""
        found = {node.meta["custom"][OUTPUT_TAG] for node in graph.attachments.binding.graph_module.graph.nodes
                 if OUTPUT_TAG in (node.meta.get("custom") or {})}
        return set(range(self.count)) - found

    def __call__(self, output: Any, *targets: torch.Tensor) -> torch.Tensor:
        leaves, self.spec = pytree.tree_flatten(output)
        self.constants, tagged, count = [], [], 0
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                with fx_traceback.annotate({OUTPUT_TAG: count}):
                    leaf = torch.ops.aten.alias.default(leaf)
                count += 1
                self.constants.append(_TENSOR)
            else:
                self.constants.append(leaf)
            tagged.append(leaf)
        self.count = count
        output = pytree.tree_unflatten(tagged, self.spec)
        if self.loss is None:
            tensors = [t for t in tagged if isinstance(t, torch.Tensor)]
            return sum(t.sum() for t in tensors) if tensors else output
        loss = self.loss(output, *targets)
        # a loss the model returns (``out.loss``) is also an output the module hands back: the step's loss is a
        # copy, so that the output stays a value of its own
        loss = loss.clone() if any(loss is t for t in tagged) else loss
        tensors = [t for t in tagged if isinstance(t, torch.Tensor)]
        for i in sorted(self.keep):
            if tensors[i].is_floating_point():
                loss = loss + 0 * tensors[i].sum()
        return loss


def _describe(shapes: Sequence[Any]) -> str:
    return "(" + ", ".join(f"{list(s[0])} {str(s[1]).removeprefix('torch.')} on {s[2]}" if isinstance(s, tuple) else s
                           for s in shapes) + ")"
