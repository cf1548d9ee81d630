"""Run a schedule on real tensors: the proof that a schedule computes the right gradients.

The tracer keeps the joint forward+backward FX graph beside every traced graph
(``graph.attachments``: ``fx_binding`` maps graph nodes to FX nodes, ``joint`` holds the model and
example inputs). :func:`execute` walks a schedule op by op: ``compute v`` evaluates the FX node
whose value v is (reading only values that are resident), ``free v`` drops it and every view of
it. It records the parameter gradients, the loss, and the bytes really held after each op (unique
storages of every live tensor), so the simulator's memory model can be checked against real
allocations.

Semantics
---------
- Views and aliases own no graph node (the tracer merged them into their storage owner). The
  executor evaluates a view when a reader needs it, from its resident base, and keeps it while
  the base is resident.
- A multi-output op is one graph node per output; computing one output runs the op and keeps only
  that output (the op's result is reused by the computations of its other outputs right after it,
  so consecutive outputs of one op run it once; any other op drops it, so that no output the
  schedule has not computed stays held: the simulator counts a call the same way).
- Random ops (dropout) are seeded per FX node, so a recomputation draws the same mask as the
  first computation, as PyTorch's activation checkpointing preserves RNG state. The caller's RNG
  state is restored afterwards.
- Module-level graphs are executed through their op-level graph: ``compute G`` computes G's
  members in order (temporaries freed after their last use inside G), ``free G`` frees the members
  that were still held.
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import fx

from ..errors import ExecutionError
from ..frontends import MODEL_PREFIX, real_placeholder_values
from ..graph import ComputeGraph
from ..schedule import (COMPUTE, FREE, OFFLOAD, TRANSFERS, Link, Op, Schedule, checkpoint_all_ops, simulate,
                        to_op_level)


SEED_STRIDE = 1_000_003
"""With a seed, the random op at position p of the joint graph draws from seed * stride + p: every way of running
the step (replayed, through SAC, recomputed) draws the same masks."""


def draws_random(node: fx.Node) -> bool:
    """Whether an FX node's op draws from the RNG (dropout's mask, ``bernoulli``)."""
    return torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


@dataclass(frozen=True)
class ExecutionResult:
    """What running a schedule on real tensors gave.

    Attributes
    ----------
    gradients : mapping of str to torch.Tensor
        Parameter name -> its gradient (tied parameters share one tensor).
    loss : float
        The loss value of the step.
    memory : tuple of int
        Bytes held after each op of the executed (op-level) schedule, pinned tensors included.
    simulated_memory : tuple of int
        The simulator's memory after each of those ops, for comparison.
    schedule_memory : tuple of int
        Bytes held after each op of the schedule as given: the same as ``memory`` at op level; for
        a module-level schedule, what is held once each group op's members have run (or been freed).
    computes : int
        Compute ops executed (recomputations included).
    seconds : float
        Wall time of the run.
    """

    gradients: Mapping[str, torch.Tensor]
    loss: float
    memory: tuple[int, ...]
    simulated_memory: tuple[int, ...]
    schedule_memory: tuple[int, ...]
    computes: int
    seconds: float

    @property
    def peak(self) -> int:
        """Largest real memory held after any op."""
        return max(self.memory, default=0)

    @property
    def simulated_peak(self) -> int:
        """The simulator's peak for the same ops."""
        return max(self.simulated_memory, default=0)


def execute(graph: ComputeGraph, schedule: Schedule | list[Op], *, seed: int = 0,
            measure_memory: bool = True) -> ExecutionResult:
    """Run ``schedule`` on the real model behind ``graph``.

    Parameters
    ----------
    graph : ComputeGraph
        A graph from :func:`remat_core.frontends.trace.trace_training_graph` (op or module level).
    schedule : Schedule or list of ops
        Any valid schedule of ``graph`` (it is simulated first).
    seed : int
        Base seed of the per-op RNG streams of random ops.
    measure_memory : bool
        Record the bytes held after each op.

    An ``offload`` keeps a host copy of the tensor's values (on a CPU the values themselves: the host
    is the device, nothing moves) and a ``prefetch`` brings them back; the bytes held count the
    device's only, as the simulator does.

    Raises
    ------
    ExecutionError
        When the graph carries no traced model, or an op fails on real tensors.
    InvalidSchedule
        When the schedule breaks a simulator rule.
    """
    ops = schedule.ops if isinstance(schedule, Schedule) else tuple(schedule)
    link = Link(math.inf, math.inf) if any(action in TRANSFERS for action, _ in ops) else None  # order, not time
    simulate(graph, ops, link=link)
    op_graph, op_ops, ends = to_op_level(graph, ops)
    simulated = simulate(op_graph, op_ops, link=link)
    runner = _Runner(op_graph, seed)
    started = time.perf_counter()
    memory = []
    held_before = runner.resident_bytes()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for step, (action, node) in enumerate(op_ops):
            if action == COMPUTE:
                runner.compute(node, step)
            elif action == FREE:
                runner.free(node)
            elif action == OFFLOAD:
                runner.offload(node)
            else:
                runner.prefetch(node)
            if measure_memory:
                memory.append(runner.resident_bytes())
    seconds = time.perf_counter() - started
    schedule_memory = tuple(memory[end - 1] if end else held_before for end in ends) if measure_memory else ()
    return ExecutionResult(gradients=runner.gradients(), loss=runner.loss_value(), memory=tuple(memory),
                           simulated_memory=simulated.memory if measure_memory else (),
                           schedule_memory=schedule_memory, computes=simulated.computes, seconds=seconds)


def _to_host(value: Any) -> tuple[Any, torch.device | None]:
    """A host copy of ``value`` and the device to bring it back to (a CPU tensor is its own host copy)."""
    if not isinstance(value, torch.Tensor):
        return value, None
    return (value if value.device.type == "cpu" else value.to("cpu")), value.device


def reference_gradients(graph: ComputeGraph, *, seed: int = 0) -> Mapping[str, torch.Tensor]:
    """Gradients of the checkpoint-all schedule: what every other schedule must reproduce."""
    return execute(graph, checkpoint_all_ops(graph, explain=False)[0], seed=seed, measure_memory=False).gradients


def gradient_difference(result: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]) -> float:
    """Largest absolute difference between two sets of gradients (``result`` must have every parameter of
    ``reference``; :class:`ExecutionError` naming the ones it lacks)."""
    missing = sorted(set(reference) - set(result))
    if missing:
        raise ExecutionError(f"no gradient for {', '.join(missing[:5])}")
    return max((float((result[k] - reference[k]).abs().max()) for k in reference if reference[k].numel()),
               default=0.0)


class _Runner:
    """The live state of one execution: values of resident FX nodes, keyed by the graph node owning them."""

    def __init__(self, graph: ComputeGraph, seed: int):
        if not graph.attachments.executable:
            raise ExecutionError(f"graph {graph.name!r} was not traced from a PyTorch model here, so there are no "
                                 f"real tensors to run it on; trace it with remat_core.frontends.trace (a graph read from a "
                                 f"file can only be simulated)")
        binding, joint = graph.attachments.binding, graph.attachments.joint
        self.graph = graph
        self.binding = binding
        self.seed = seed
        self.fx_nodes: dict[str, fx.Node] = {n.name: n for n in binding.graph_module.graph.nodes}
        self.position = {name: i for i, name in enumerate(self.fx_nodes)}
        self.producers = set(binding.producer.values())
        placeholders = binding.graph_module.graph.find_nodes(op="placeholder")
        values = real_placeholder_values(joint, "execute the schedule", "trace the model with real weights")
        # The gradient seed is made on the CPU; a model traced on a GPU needs it there.
        self.placeholder_values = {node.name: value.to(node.meta["val"].device)
                                   for node, value in zip(placeholders, values)}
        self.env: dict[str, Any] = {}
        self.held_by: dict[str, list[str]] = {}
        self.storage_refs: dict[int, list[int]] = {}  # data_ptr -> [live references, nbytes]
        self.held_bytes = 0
        self.last_tuple: tuple[str, Any] | None = None
        self.host: dict[str, list[tuple[str, Any]]] = {}  # node -> its values' host copies (offloaded)
        self.computed: set[str] = set()
        self.loss: float | None = None
        self.grad_values: dict[str, torch.Tensor] = {}
        self.grads_of_owner = self._gradient_outputs()
        self.fetch_attr = fx.Interpreter(binding.graph_module).fetch_attr
        for node in graph.nodes:
            if node.pinned:
                name = binding.producer[node.id]
                self.held_by[node.id] = []
                self._hold(node.id, name, self._pinned_value(name))

    def _pinned_value(self, fx_name: str) -> Any:
        node = self.fx_nodes[fx_name]
        if node.op == "get_attr":
            return self.fetch_attr(node.target)
        return self.placeholder_values[fx_name]

    # -- ops ------------------------------------------------------------------------------------

    def compute(self, node_id: str, step: int) -> None:
        accumulated = self.binding.accumulations.get(node_id)
        if node_id not in self.binding.producer and accumulated is None:  # the end of the step: it reads, computes nothing
            value, key = None, f"{node_id}:end"
        elif accumulated is not None:  # as autograd's engine sums them: see the tracer's ``_accumulate``
            values = [self._value(self.fx_nodes[name], node_id) for name in accumulated]
            key = f"{node_id}:sum"
            in_place = self.graph.node(node_id).op == "aten.add_"
            value = values[0] if in_place else values[0] + values[1]
            for other in values[1 if in_place else 2:]:
                value.add_(other)
        else:
            key = self.binding.producer[node_id]
            node = self.fx_nodes[key]
            self._forget_other_tuples(node)
            value = self.placeholder_values[key] if node.op == "placeholder" else self._evaluate(node, node_id)
        self.held_by[node_id] = []
        self._hold(node_id, key, value)
        if node_id not in self.computed:
            self.computed.add(node_id)
            if node_id == self.binding.loss:
                self.loss = float(value)
            for name, fx_node in self.grads_of_owner.get(node_id, ()):
                gradient = value if fx_node is None else self._value(fx_node, node_id)
                self.grad_values[name] = gradient

    def _forget_other_tuples(self, node: fx.Node) -> None:
        """Drop the kept result of a multi-output op unless ``node`` is one of its outputs: kept longer, it would hold
        outputs the schedule has not computed (yet, or at all), which the simulator does not count."""
        base = node.args[0].name if node.target is operator.getitem else None
        if self.last_tuple is not None and self.last_tuple[0] != base:
            self.last_tuple = None

    def _gradient_outputs(self) -> dict[str, list[tuple[str, fx.Node | None]]]:
        """Graph node -> (parameter name, FX value of its gradient) for the gradients it holds.

        The FX graph may return a view of the node's storage (a bias gradient reshaped), so the
        gradient is read through that FX value; a tied parameter's gradient is the synthetic sum.
        """
        output = self.binding.graph_module.graph.output_node()
        fx_of_param = {desc.grad_of.target.removeprefix(MODEL_PREFIX): arg
                       for desc, arg in zip(output.meta["desc"], output.args[0])
                       if type(desc).__name__ == "GradAOTOutput" and arg is not None}
        owners: dict[str, list[tuple[str, fx.Node | None]]] = {}
        for name, node_id in self.binding.param_grads.items():
            summed = node_id in self.binding.accumulations
            owners.setdefault(node_id, []).append((name, None if summed else fx_of_param[name]))
        return owners

    def free(self, node_id: str) -> None:
        self.last_tuple = None  # a call's other outputs are taken only by computations right after it (as simulated)
        for key in self.held_by.pop(node_id):
            value = self.env.pop(key)
            if isinstance(value, torch.Tensor):
                ref = self.storage_refs[value.untyped_storage().data_ptr()]
                ref[0] -= 1
                if ref[0] == 0:
                    self.held_bytes -= ref[1]
                    del self.storage_refs[value.untyped_storage().data_ptr()]

    def offload(self, node_id: str) -> None:
        """Keep a host copy of the node's values (on a CPU the values themselves, not counted as held)."""
        self.host[node_id] = [(key, *_to_host(self.env[key])) for key in self.held_by[node_id]]

    def prefetch(self, node_id: str) -> None:
        """Bring the node's values back from their host copy."""
        self.held_by[node_id] = []
        for key, value, device in self.host[node_id]:
            self._hold(node_id, key, value.to(device) if device is not None else value)

    def _hold(self, owner: str, key: str, value: Any) -> None:
        """Keep FX value ``key`` alive while graph node ``owner`` is resident, counting its storage once."""
        self.env[key] = value
        self.held_by[owner].append(key)
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            ref = self.storage_refs.setdefault(storage.data_ptr(), [0, storage.nbytes()])
            if ref[0] == 0:
                self.held_bytes += ref[1]
            ref[0] += 1

    # -- evaluation -----------------------------------------------------------------------------

    def _value(self, node: fx.Node, reader: str) -> Any:
        """The value of FX node ``node`` as an argument of graph node ``reader``."""
        if node.name in self.env:
            return self.env[node.name]
        if node.name in self.producers:
            raise ExecutionError(f"computing '{reader}' needs FX value {node.name}, whose graph node is not "
                                 f"resident (the tracer's binding and the schedule disagree)")
        if self.last_tuple is not None and self.last_tuple[0] == node.name:
            return self.last_tuple[1]
        if node.op == "placeholder":  # a second name of a pinned tensor (tied weights)
            value = self.placeholder_values[node.name]
        else:
            value = self._evaluate(node, reader)
        owners = self.binding.storage.get(node.name, ())
        if len(owners) > 1:
            self.last_tuple = (node.name, value)
        elif len(owners) == 1 and self._is_view_of_resident(value, owners[0]):
            self._hold(owners[0], node.name, value)
        return value

    def _is_view_of_resident(self, value: Any, owner: str) -> bool:
        if not isinstance(value, torch.Tensor) or owner not in self.held_by:
            return False
        base = self.env[self.held_by[owner][0]]
        return isinstance(base, torch.Tensor) and value.untyped_storage().data_ptr() == \
            base.untyped_storage().data_ptr()

    def _evaluate(self, node: fx.Node, reader: str) -> Any:
        if node.op == "get_attr":
            return self.fetch_attr(node.target)
        if node.op != "call_function":
            raise ExecutionError(f"cannot evaluate FX node {node.name} ({node.op}) for '{reader}'")
        args = fx.node.map_arg(node.args, lambda a: self._value(a, reader))
        kwargs = fx.node.map_arg(node.kwargs, lambda a: self._value(a, reader))
        if draws_random(node):
            torch.manual_seed(self.seed * SEED_STRIDE + self.position[node.name])
        try:
            return node.target(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError) as e:
            raise ExecutionError(f"op {node.target} (FX node {node.name}, for graph node '{reader}') failed on "
                                 f"real tensors: {e}") from e

    # -- measurements ---------------------------------------------------------------------------

    def resident_bytes(self) -> int:
        return self.held_bytes

    def gradients(self) -> dict[str, torch.Tensor]:
        return dict(self.grad_values)

    def loss_value(self) -> float:
        return self.loss

