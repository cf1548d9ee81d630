"""A plan inside ``torch.compile``: our choices handed to Inductor's partitioner as its knapsack.

AOTAutograd's min-cut partitioner, under an ``activation_memory_budget`` below 1, asks a knapsack
solver which of the forward ops it would rather not recompute (matmuls, convolutions, reductions,
random ops) to save; torch 2.13 takes a custom one
(:class:`torch._inductor.custom_graph_pass.CustomKnapsackSolver`, set as
``torch._functorch.config.activation_memory_budget_solver``). :class:`PlanKnapsack` answers with
the plan: save what the plan keeps, recompute what it frees. To know which of its nodes is which
of ours, every forward op of the compiled step runs inside
``torch.fx.traceback.annotate({"remat_node": name})``; the annotation survives Dynamo, AOTAutograd
and Inductor's decompositions onto every node of the joint graph the partitioner sees.

Torch asks the knapsack about some ops only, so it also tags the others with the plan's choice (see
:class:`PlanKnapsack`). Before answering, it runs torch's final cut itself (``solve_min_cut`` with
the same options) and reports each tensor the plan recomputes that torch saves anyway, and each op
it could not match, as uncontrolled: saved, with its bytes.
"""

from __future__ import annotations

import functools
import operator
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx.traceback as fx_traceback
from torch import fx
from torch._inductor.custom_graph_pass import CustomKnapsackSolver

from ..errors import ExecutionError, first_line
from ..graph import node_label
from ..solvers import failure_dumps_kept_out
from ..schedule.decisions import RECOMPUTE, PlanDecisions
from ..schedule.sac_program import ForwardProgram, Uncontrolled
from .executor import draws_random

ANNOTATION = "remat_node"
"""Key of ``node.meta["custom"]`` naming the traced FX node an op of the compiled step comes from."""

BUDGET = 1e-6
"""The ``activation_memory_budget`` the step is compiled under: below every ratio the partitioner
could reach without its knapsack, so that it always asks it (0 itself means "save the inputs only",
with no knapsack)."""


class PlanKnapsack(CustomKnapsackSolver):
    """Inductor's knapsack answered by a plan: save the ops the plan keeps, recompute the others.

    Torch asks only about the ops it would not recompute by itself; its final min cut decides the
    rest (cheap pointwise ops, recomputed whenever that saves bytes, so that a tensor the plan keeps
    across the forward, a residual stream say, would be recomputed in the backward together with
    everything before it). So the knapsack also tags every other forward op of the joint graph with
    the plan's choice, as selective activation checkpointing tags them under ``torch.compile``
    (``node.meta["recompute"]``: ``MUST_SAVE`` or ``PREFER_RECOMPUTE``), and torch's final cut honours
    the tags. Inductor turns dropout into random numbers drawn from saved seeds, which recompute to
    the same mask, so those follow the plan; a random op it keeps as it is (aten's dropout, under
    ``fallback_random``) is saved and reported: torch's partitioner replays its RNG only when it saw a
    recomputable one before asking, so a recomputed one would draw a new mask. A multi-output op is
    not tagged itself (a tuple is neither saved nor recomputed): its items share its decision.

    Attributes
    ----------
    calls : int
        How many times the partitioner asked.
    saved, recomputed : int
        Ops answered or tagged each way (over all calls).
    uncontrolled : list of Uncontrolled
        What could not go as planned: random ops the plan recomputes, ops with no traced op behind
        them, tensors the plan recomputes that torch's final cut saves anyway.
    """

    def __init__(self, program: ForwardProgram, decisions: PlanDecisions):
        self.program = program
        self.decisions = decisions
        self.calls = self.saved = self.recomputed = 0
        self.uncontrolled: list[Uncontrolled] = []
        self._reported: set[str] = set()

    def __call__(self, memory: list[float], joint_graph: fx.Graph, max_memory: float, node_info: Any,
                 all_recomputable_banned_nodes: list[fx.Node]) -> tuple[list[int], list[int]]:
        from torch.utils.checkpoint import CheckpointPolicy

        self.calls += 1
        recompute_nodes = set()
        for node in joint_graph.nodes:
            if node.op != "call_function" or not node_info.is_required_fw(node):
                continue
            keep = self._keeps(node)
            if not keep:
                recompute_nodes.add(node)
            if isinstance(node.meta.get("val"), torch.Tensor):  # a tuple is neither saved nor recomputed: its items are
                node.meta["recompute"] = CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
        save = [k for k, n in enumerate(all_recomputable_banned_nodes) if n not in recompute_nodes]
        recompute = [k for k, n in enumerate(all_recomputable_banned_nodes) if n in recompute_nodes]
        self.saved += sum(1 for n in joint_graph.nodes if n.meta.get("recompute") == CheckpointPolicy.MUST_SAVE)
        self.recomputed += len(recompute_nodes)
        self._report_what_torch_saves_anyway(joint_graph, node_info,
                                             [all_recomputable_banned_nodes[k] for k in recompute])
        return save, recompute

    def uuid(self) -> None:
        """None: Inductor must not reuse a step compiled for another plan (and must ask again)."""
        return None

    def __deepcopy__(self, memo: dict) -> "PlanKnapsack":
        """Itself: Dynamo deep-copies the config it is set in for its logs, and a copy would drag the
        traced graph's FakeTensors along (torch forbids reading their data)."""
        return self

    @functools.cached_property
    def _known(self) -> frozenset[str]:
        return frozenset(n.name for n in self.program.nodes)

    def _keeps(self, node: fx.Node) -> bool:
        """Whether the plan keeps ``node``'s value; ops the plan cannot speak for are kept and reported (once)."""
        name = _traced_name(node)
        source = node.args[0] if node.target is operator.getitem else node  # an item shares its op's fate
        if name not in self._known:
            self._report(node.name, source, "an op of the compiled step with no traced op behind it")
            return True
        if name in self.program.saved:
            return True
        if draws_random(source):
            self._report(self._label(name), source, "a random op: the compiled step would draw a new mask when "
                                                    "recomputing it")
            return True
        return False

    def _report(self, tensor: str, source: fx.Node, reason: str) -> None:
        if source.name not in self._reported:
            self._reported.add(source.name)
            self.uncontrolled.append(Uncontrolled(tensor, _bytes_of(source), reason))

    def _label(self, name: str) -> str:
        owners = self.decisions.graph.attachments.binding.storage.get(name, ())
        return node_label(self.decisions.graph, owners[0]) if owners else name

    def _report_what_torch_saves_anyway(self, joint_graph: fx.Graph, node_info: Any,
                                        recompute: Sequence[fx.Node]) -> None:
        """Torch's next step, run here first: its final cut with our recomputations allowed. Each tensor
        it saves that the plan recomputes is uncontrolled."""
        from torch._functorch import config
        from torch._functorch.partitioners import MinCutOptions, solve_min_cut
        from torch.utils._ordered_set import OrderedSet

        options = MinCutOptions(ban_if_used_far_apart=False, ban_if_long_fusible_chains=False,
                                ban_if_materialized_backward=False, ban_if_not_in_allowlist=False,
                                ban_if_reduction=config.ban_recompute_reductions)
        saved_values, _ = solve_min_cut(joint_graph, node_info, options, OrderedSet(recompute))
        for value in saved_values:
            name = _traced_name(value)
            if name in self._known and name not in self.program.saved and \
                    any(self.decisions.of(o) == RECOMPUTE for o in
                        self.decisions.graph.attachments.binding.storage.get(name, ())):
                self.uncontrolled.append(Uncontrolled(
                    self._label(name), _bytes_of(value),
                    "the plan recomputes it, but torch's min cut saves it"))


def compiled_step(program: ForwardProgram, decisions: PlanDecisions) -> tuple[Callable[..., tuple], PlanKnapsack]:
    """``program``'s forward as one ``torch.compile``-d function of ``program.placeholders`` (in that order),
    returning ``program.returns``, and the knapsack that will answer Inductor's partitioner when it is first
    called.

    The function must first be called inside :func:`partitioner_settings` (that call compiles)."""
    graph = fx.Graph()
    env: dict[str, fx.Node] = {name: graph.placeholder(name) for name in program.placeholders}
    for node in program.nodes:
        copied = graph.node_copy(node, lambda n: env[n.name])
        copied.meta = {}  # the tracer's FakeTensors must not meet Dynamo's own fake mode
        if isinstance(node.target, torch._ops.OpOverload):
            copied.target = _annotated(node.name, node.target)
        env[node.name] = copied
    graph.output(tuple(env[name] for name in program.returns))
    module = fx.GraphModule(program.graph_module, graph)
    return torch.compile(module, fullgraph=True), PlanKnapsack(program, decisions)


@contextmanager
def partitioner_settings(knapsack: PlanKnapsack) -> Iterator[None]:
    """The settings a compile must run under for ``knapsack`` to be asked (torch's failure dumps kept out of the
    working directory)."""
    from torch._functorch import config

    with config.patch(activation_memory_budget=BUDGET, activation_memory_budget_solver=knapsack), \
            failure_dumps_kept_out():
        yield


def check_compiler() -> None:
    """:class:`ExecutionError` unless Inductor finds a C++ compiler for its CPU kernels."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as error:  # torch raises its own InvalidCxxCompiler, or whatever the probe hit
        raise ExecutionError(f"--via compile needs a working C++ compiler for Inductor's CPU kernels, and none was "
                             f"found ({type(error).__name__}: {first_line(error, 200)}); install g++ (or set "
                             f"CXX), or use --via plan or --via sac") from error


@contextmanager
def compile_failures_reported() -> Iterator[None]:
    """A compile inside the block that fails for want of a working compiler raises an :class:`ExecutionError`
    saying so (torch raises its own wrappers of the cause); any other failure propagates as it is."""
    from torch._inductor.exc import CppCompileError, InvalidCxxCompiler

    try:
        yield
    except Exception as error:
        chain, seen = error, set()
        while chain is not None and id(chain) not in seen:
            seen.add(id(chain))
            if isinstance(chain, (CppCompileError, InvalidCxxCompiler)):
                raise ExecutionError(f"torch.compile could not build the step's C++ kernels "
                                     f"({type(chain).__name__}: {first_line(chain, 200)}); check the C++ compiler "
                                     f"(CXX), or use --via plan or --via sac") from error
            chain = chain.__cause__ or chain.__context__
        raise


def _annotated(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` run inside ``annotate({ANNOTATION: name})``."""
    def call(*args: Any, **kwargs: Any) -> Any:
        with fx_traceback.annotate({ANNOTATION: name}):
            return op(*args, **kwargs)
    call.__name__ = f"annotated_{name}"
    return call


def _traced_name(node: fx.Node) -> str | None:
    return (node.meta.get("custom") or {}).get(ANNOTATION)


def _bytes_of(node: fx.Node) -> int:
    from torch._functorch.partitioners import _size_of

    return int(_size_of(node))
