"""Turn a captured joint FX graph into an op-level :class:`~remat_core.graph.compute_graph.ComputeGraph`.

Memory model
------------
A graph node is one *storage*: the tensor an op allocates. So that the simulator, which knows
nothing of aliasing, counts every byte once:

- A view or alias (``view``, ``t``, ``expand``, ``transpose``, ``detach``, ``split``, slicing, a
  second placeholder bound to a tied weight...) allocates nothing: it becomes no node, and whoever
  reads it reads the node that owns the storage, which must therefore be resident. Aliasing is
  read off the FakeTensors themselves (two values share a storage), so it covers every op,
  including those whose schema hides the alias (``_unsafe_view``).
- A multi-output op (BatchNorm returns its output and two statistics, ``convolution_backward``
  three gradients) becomes one node per output it produces (the ``getitem`` nodes of the FX graph),
  each owning its own bytes and reading the op's inputs, so each output lives exactly as long as
  its own readers need it. The op's cost is shared among those nodes in proportion to their bytes.
- ``mem`` is the storage's size in bytes. What is stored is what the joint graph computes:
  dropout keeps ``native_dropout``'s bool mask, as a compiled step or eager CUDA does (eager CPU
  alone keeps a mask in the input's dtype, see ARCHITECTURE.md).
- ``transient`` is what the op's kernel holds beyond its outputs while it runs, measured on the
  tracing device (:mod:`.kernel_memory`): its peak less the outputs that become nodes (an output no
  node owns is allocated and dropped inside the op: transient too). The outputs of one multi-output
  op share a ``kernel`` name: one call allocates them all, and the simulator counts the ones not
  resident while it runs.

Kinds and outputs
-----------------
Parameters (``param``), buffers (``buffer``) and user inputs and loss targets (``input``) are
pinned. Ops are ``forward`` or ``backward`` by AOTAutograd's ``partitioner_tag``; the forward ops of
the loss function are ``loss``. The gradient seed (the joint graph's tangent, ``ones_like(loss)``)
is a ``backward`` node that reads the loss value, so the loss is computed before the backward pass
starts, as in ``loss.backward()``. When a parameter is used under two names (tied embeddings) the
joint graph returns one gradient per name; a synthetic ``backward`` node adds the later ones into the
first, in place, as autograd's ``AccumulateGrad`` does into ``.grad`` (it allocates nothing: 0
bytes). The outputs are the parameter gradients and the *end of the step*, a node of 0 bytes
(kind ``other``) that reads every gradient, the model's outputs and the loss: a training step
``out = model(x); loss = loss_fn(out, y); loss.backward()`` keeps each gradient in ``.grad`` from the
moment autograd produces it until the optimizer uses it, and its caller holds ``out`` and ``loss``
until the step is over, so every schedule keeps them to the end too. A buffer's new value (BatchNorm's
running statistics, its batch counter) is written back into the buffer, as eager BatchNorm does in
place, so it is merged into the buffer's pinned node: it allocates nothing, and readers of the new
value read the buffer. (The FX graph computes it functionally; ``FxBinding.buffer_updates`` says
which FX node to copy back.)

Every node has ``module`` (the ``nn.Module`` call it ran in, ``layer3.1.conv2``; ``""`` for the
model's own forward; ``<loss>`` for the loss function) and a short ``label``. The module comes from
the tracer's own annotation (:mod:`.capture`), else from the ``nn_module_stack`` torch.export
recorded (a ``.pt2`` program); ops that autograd adds with no module (gradient accumulation) get
the common module prefix of their inputs.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import torch
from torch import fx
from torch.multiprocessing.reductions import StorageWeakRef

from ...errors import TraceError
from ...graph import Attachments, ComputeGraph, Node
from .capture import CALL_KEY, LOSS_MODULE, MODEL_PREFIX, MODULE_KEY, PHASE_KEY, JointGraph
from .costs import accumulation_cost, op_cost, seed_cost
from .kernel_memory import KernelMemory


@dataclass(frozen=True)
class FxBinding:
    """How a traced graph maps onto its FX joint graph; ``graph.attachments.binding``.

    Attributes
    ----------
    graph_module : torch.fx.GraphModule
        The joint graph, called as ``graph_module(primals,
        tangents)``: two lists in placeholder order, ``primals_*`` (parameters, buffers, inputs,
        loss targets: see each placeholder's ``meta["desc"]``) and ``tangents_*`` (the gradient
        seed, ``ones_like(loss)``). It returns ``(forward_outputs, gradients)``: buffer updates and
        the loss, then one gradient per input (None for buffers, inputs and untrained parameters),
        in the order ``graph_module.graph.output_node().meta["desc"]`` describes them.
    producer : mapping of str to str
        Graph node id -> the FX node whose value it is: a placeholder for pinned nodes and the
        gradient seed, the ``getitem`` for one output of a multi-output op, the op itself otherwise.
        Synthetic accumulation nodes have none (see ``accumulations``).
    storage : mapping of str to tuple of str
        FX node name -> the graph node(s) holding the storage its value lives in. A view maps to
        its base's owner; a multi-output op to its outputs' nodes; a non-tensor value to ``()``.
    accumulations : mapping of str to tuple of str
        Synthetic node id -> the FX nodes whose values it sums (the gradients of a tied parameter).
    module_calls : mapping of str to int
        Graph node id -> which call of its module it ran in (0 for the first call).
    module_types : mapping of str to str
        Module path -> class name.
    loss : str
        Graph node id holding the loss value.
    param_grads : mapping of str to str
        Parameter name -> graph node id of its gradient (the graph's outputs).
    buffer_updates : mapping of str to str
        Buffer name -> FX node computing its new value (merged into the buffer's node).
    module_of : mapping of str to str
        FX node name -> the module path it ran in (``""``: the model's own forward).
    blocks : tuple of str
        The model's blocks: its declared ones (a Hugging Face model's layers), else its repeated modules
        (:func:`repeated_blocks`), outermost first; empty when it has none.
    """

    graph_module: fx.GraphModule
    producer: Mapping[str, str]
    storage: Mapping[str, tuple[str, ...]]
    accumulations: Mapping[str, tuple[str, ...]]
    module_calls: Mapping[str, int]
    module_types: Mapping[str, str]
    loss: str
    param_grads: Mapping[str, str]
    buffer_updates: Mapping[str, str]
    module_of: Mapping[str, str] = field(default_factory=dict)
    blocks: tuple[str, ...] = ()


def repeated_blocks(module_types: Mapping[str, str]) -> tuple[str, ...]:
    """The repeated modules of a model, from its module paths: the numbered children of one container
    (``layer1.0``, ``layer1.1``) when at least two share a class, outermost only, in the model's order."""
    children: dict[str, list[str]] = {}
    for path in module_types:
        parent, _, last = path.rpartition(".")
        if last.isdigit() and path:
            children.setdefault(parent, []).append(path)
    found = [path for members in children.values() if len(members) >= 2
             for path in members if sum(module_types[m] == module_types[path] for m in members) >= 2]
    outermost = [p for p in found if not any(p.startswith(q + ".") for q in found if q != p)]
    order = {path: k for k, path in enumerate(module_types)}
    return tuple(sorted(outermost, key=order.__getitem__))


@dataclass
class _Draft:
    """A node under construction (labels of tied parameters are completed after the walk)."""

    id: str
    mem: int
    cost: float
    kind: str
    pinned: bool
    op: str | None
    shape: tuple | None
    dtype: str | None
    module: str
    label: str
    preds: list[str] = field(default_factory=list)
    transient: int = 0
    kernel: str | None = None

    def node(self) -> Node:
        return Node(id=self.id, mem=self.mem, cost=self.cost, kind=self.kind, pinned=self.pinned, op=self.op,
                    shape=self.shape, dtype=self.dtype, module=self.module, label=self.label,
                    transient=self.transient, kernel=self.kernel)


def joint_to_graph(joint: JointGraph, cost: str, measured: Mapping[str, float] | None = None,
                   name: str | None = None, kernels: KernelMemory | None = None, sac_op_seconds: float = 0.0
                   ) -> ComputeGraph:
    """Build the op-level training graph of a captured step.

    Parameters
    ----------
    joint : JointGraph
    cost : str
        A cost model of :data:`~remat_core.frontends.tracing.costs.COST_MODELS`.
    measured : mapping, optional
        FX node name -> seconds, required for ``cost="measured"``.
    name : str, optional
        Graph name (default: the traced source).
    sac_op_seconds : float
        What SAC's policy adds per op (:attr:`~remat_core.graph.Attachments.sac_op_seconds`).
    kernels : KernelMemory, optional
        What each op's kernel allocates (:func:`~.kernel_memory.measure_kernel_memory`): the nodes'
        ``transient`` bytes (0 without it).

    Returns
    -------
    ComputeGraph
        With ``attachments.binding`` (:class:`FxBinding`, its ``graph_module`` the joint graph) and
        ``attachments.joint`` (the :class:`JointGraph`: the model and example inputs whose real values an
        executor runs the graph on).

    Raises
    ------
    TraceError
        When no parameter gets a gradient, or the joint graph lacks its loss.
    """
    builder = _GraphBuilder(joint, cost, measured, kernels)
    builder.sac_op_seconds = sac_op_seconds
    return builder.build(name or joint.source)


class _GraphBuilder:
    """One walk over the FX nodes in execution order (see the module docstring for the rules)."""

    def __init__(self, joint: JointGraph, cost: str, measured: Mapping[str, float] | None,
                 kernels: KernelMemory | None = None):
        self.joint = joint
        self.kernels = kernels
        self.sac_op_seconds = 0.0
        self.cost = cost
        self.measured = measured
        self.gm = joint.graph_module
        self.drafts: list[_Draft] = []
        self.by_id: dict[str, _Draft] = {}
        self.owner: dict[StorageWeakRef, str] = {}
        self.storage: dict[str, tuple[str, ...]] = {}
        self.producer: dict[str, str] = {}
        self.module_of: dict[str, str] = {}
        self.raw_call_of: dict[str, Any] = {}
        self.names_of_pinned: dict[str, list[str]] = {}
        self.element_share: dict[str, dict[int, float]] = {}
        output = self.gm.graph.output_node()
        self.out_descs = output.meta.get("desc") or []
        self.out_args = list(output.args[0])
        self.loss_fx = next((a for d, a in zip(self.out_descs, self.out_args)
                             if type(d).__name__ == "PlainAOTOutput"), None)
        if self.loss_fx is None:
            raise TraceError(joint.source, "the traced step returned no loss", hint="the model's loss must be "
                                                                                    "the step's only output")
        self.tangent: fx.Node | None = None
        self.placeholder_of = {node.meta["desc"].target: node.name
                               for node in self.gm.graph.find_nodes(op="placeholder")
                               if hasattr(node.meta.get("desc"), "target")}
        self.buffer_update_of: dict[str, str] = {}  # FX node -> buffer placeholder it is written back to
        for desc, arg in zip(self.out_descs, self.out_args):
            if arg is not None and type(desc).__name__ == "InputMutationAOTOutput":
                self.buffer_update_of[arg.name] = self.placeholder_of[desc.mutated_input.target]

    # -- the walk ----------------------------------------------------------------------------

    def build(self, name: str) -> ComputeGraph:
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "get_attr":
                self._constant(node)
            elif node.op == "call_function":
                self._call(node)
            if node is self.loss_fx and self.tangent is not None:
                self._seed()
        outputs, param_grads, buffer_updates, accumulations = self._outputs()
        outputs.append(self._step_end(outputs, accumulations))
        if self.kernels is not None:
            self._set_transients()
        for node_id, names in self.names_of_pinned.items():
            self.by_id[node_id].label = " = ".join(names)
        nodes = [d.node() for d in self.drafts]
        edges = [(p, d.id) for d in self.drafts for p in d.preds]
        binding = FxBinding(
            graph_module=self.gm, producer=MappingProxyType(self.producer),
            storage=MappingProxyType(self.storage), accumulations=MappingProxyType(accumulations),
            module_calls=MappingProxyType(self._module_calls()), module_types=self.joint.module_types,
            loss=self._single_owner(self.loss_fx, "the loss"), param_grads=MappingProxyType(param_grads),
            buffer_updates=MappingProxyType(buffer_updates), module_of=MappingProxyType(dict(self.module_of)),
            blocks=self.joint.blocks or repeated_blocks(self.joint.module_types))
        return ComputeGraph(nodes, edges, outputs, name=name,
                            attachments=Attachments(binding=binding, joint=self.joint,
                                                    sac_op_seconds=self.sac_op_seconds))

    def _add(self, draft: _Draft, fx_name: str | None, position: int | None = None) -> None:
        if position is None:
            self.drafts.append(draft)
        else:
            self.drafts.insert(position, draft)
        self.by_id[draft.id] = draft
        if fx_name is not None:
            self.producer[draft.id] = fx_name

    # -- placeholders and constants ----------------------------------------------------------

    def _placeholder(self, node: fx.Node) -> None:
        desc = node.meta.get("desc")
        kind = type(desc).__name__
        value = node.meta["val"]
        if kind == "TangentAOTInput":
            self.tangent = node
            self.module_of[node.name] = LOSS_MODULE
            return
        if kind == "ParamAOTInput":
            pinned_kind, label = "param", desc.target.removeprefix(MODEL_PREFIX)
            module = label.rpartition(".")[0]
        elif kind == "BufferAOTInput":
            pinned_kind, label = "buffer", desc.target.removeprefix(MODEL_PREFIX)
            module = label.rpartition(".")[0]
        elif kind == "PlainAOTInput" and desc.idx < self.joint.num_model_inputs:
            pinned_kind, label, module = "input", f"input {desc.idx}", ""
        elif kind == "PlainAOTInput":
            pinned_kind, label, module = "input", f"target {desc.idx - self.joint.num_model_inputs}", LOSS_MODULE
        else:
            pinned_kind, label, module = "input", str(desc), ""
        self.module_of[node.name] = module
        ref = StorageWeakRef(value.untyped_storage())
        if ref in self.owner:  # a tied weight: the same storage under a second name
            first = self.owner[ref]
            self.storage[node.name] = (first,)
            self.names_of_pinned[first].append(label)
            return
        self.owner[ref] = node.name
        self.storage[node.name] = (node.name,)
        self.names_of_pinned[node.name] = [label]
        self._add(_Draft(node.name, _storage_bytes(value), 0.0, pinned_kind, True, None, _shape(value),
                         _dtype(value), module, label), node.name)

    def _constant(self, node: fx.Node) -> None:
        value = node.meta.get("val")
        self.module_of[node.name] = ""
        if not isinstance(value, torch.Tensor):
            self.storage[node.name] = ()
            return
        self.owner[StorageWeakRef(value.untyped_storage())] = node.name
        self.storage[node.name] = (node.name,)
        self._add(_Draft(node.name, _storage_bytes(value), 0.0, "buffer", True, None, _shape(value), _dtype(value),
                         "", str(node.target)), node.name)

    def _seed(self) -> None:
        """The gradient seed ``ones_like(loss)``: a backward node reading the loss value."""
        tangent = self.tangent
        value = tangent.meta["val"]
        self.storage[tangent.name] = (tangent.name,)
        self.owner[StorageWeakRef(value.untyped_storage())] = tangent.name
        self._add(_Draft(tangent.name, _storage_bytes(value), seed_cost(self.cost, value), "backward", False,
                         "aten.ones_like", _shape(value), _dtype(value), LOSS_MODULE, "loss grad seed",
                         list(self.storage[self.loss_fx.name])), tangent.name)

    # -- ops ---------------------------------------------------------------------------------

    def _call(self, node: fx.Node) -> None:
        self._place_in_module(node)
        value = node.meta.get("val")
        if node.name in self.buffer_update_of:
            self.storage[node.name] = self.storage[self.buffer_update_of[node.name]]
        elif node.target is operator.getitem:
            self._element(node, value)
        elif isinstance(value, (tuple, list)):
            self._multi_output(node, value)
        elif isinstance(value, torch.Tensor) and self._claims_storage(node, value):
            self._add(self._op_draft(node, node.name, _storage_bytes(value), self._cost_of(node), value,
                                     _op_label(node), self._reads(node)), node.name)
        elif not isinstance(value, torch.Tensor):
            self.storage[node.name] = ()

    def _claims_storage(self, node: fx.Node, value: torch.Tensor) -> bool:
        """True if the value allocates a new storage (node owns it); a view maps to its base's owner."""
        ref = StorageWeakRef(value.untyped_storage())
        if ref in self.owner:
            self.storage[node.name] = (self.owner[ref],)
            return False
        self.owner[ref] = node.name
        self.storage[node.name] = (node.name,)
        return True

    def _multi_output(self, node: fx.Node, value: tuple | list) -> None:
        """Record how the op's cost splits among the outputs its ``getitem`` users will own."""
        used = sorted({u.args[1] for u in node.users
                       if u.target is operator.getitem and u.name not in self.buffer_update_of})
        fresh = {i: _storage_bytes(value[i]) for i in used if isinstance(value[i], torch.Tensor)
                 and StorageWeakRef(value[i].untyped_storage()) not in self.owner}
        total_cost = self._cost_of(node)
        total_bytes = sum(fresh.values())
        if self.cost == "unit":
            self.element_share[node.name] = {i: 1.0 for i in fresh}
        else:
            self.element_share[node.name] = {
                i: total_cost * (b / total_bytes if total_bytes else 1.0 / len(fresh)) for i, b in fresh.items()}
        self.storage[node.name] = ()

    def _element(self, node: fx.Node, value: Any) -> None:
        base, index = node.args
        if not isinstance(value, torch.Tensor):
            self.storage[node.name] = ()
            return
        if not self._claims_storage(node, value):
            return
        self.storage[base.name] = self.storage[base.name] + (node.name,)
        share = self.element_share.get(base.name, {}).get(index, 0.0)
        self._add(self._op_draft(base, node.name, _storage_bytes(value), share, value,
                                 f"{_op_label(base)}[{index}]", self._reads(base)), node.name)

    def _op_draft(self, op_node: fx.Node, node_id: str, mem: int, cost: float, value: torch.Tensor, label: str,
                  preds: list[str]) -> _Draft:
        return _Draft(node_id, mem, cost, _kind(op_node), False, _op_name(op_node), _shape(value), _dtype(value),
                      self.module_of[op_node.name], label, preds)

    def _cost_of(self, node: fx.Node) -> float:
        return op_cost(node, self.cost, self.measured)

    def _reads(self, node: fx.Node) -> list[str]:
        """Graph nodes an op reads: the owners of every tensor argument's storage."""
        return list(dict.fromkeys(owner for arg in node.all_input_nodes for owner in self.storage[arg.name]))

    def _place_in_module(self, node: fx.Node) -> None:
        custom = node.meta.get("custom") or {}
        stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
        if MODULE_KEY in custom:
            self.module_of[node.name] = custom[MODULE_KEY]
            self.raw_call_of[node.name] = (custom[MODULE_KEY], custom.get(CALL_KEY, 0))
            return
        if stack:  # recorded by torch.export: {key: (path, type)}, innermost last; the key tells calls apart
            key, (path, _) = list(stack.items())[-1]
            self.module_of[node.name] = path
            self.raw_call_of[node.name] = (path, key)
            return
        if node.target is operator.getitem:
            base = node.args[0]
            self.module_of[node.name] = self.module_of[base.name]
            self.raw_call_of[node.name] = self.raw_call_of.get(base.name)
            return
        sources = [a for a in node.all_input_nodes if a.op != "placeholder"] or node.all_input_nodes
        module = _common_prefix(self.module_of[a.name] for a in sources)
        self.module_of[node.name] = module
        self.raw_call_of[node.name] = next((self.raw_call_of.get(a.name) for a in sources
                                            if self.module_of[a.name] == module), None)

    def _module_calls(self) -> dict[str, int]:
        """Number each module's calls 0, 1, 2... in order of first appearance."""
        numbering: dict[tuple[str, Any], int] = {}
        per_module: dict[str, int] = {}
        calls: dict[str, int] = {}
        for draft in self.drafts:
            raw = self.raw_call_of.get(draft.id)
            if draft.pinned or raw is None:
                calls[draft.id] = 0
                continue
            if raw not in numbering:
                numbering[raw] = per_module.get(raw[0], 0)
                per_module[raw[0]] = numbering[raw] + 1
            calls[draft.id] = numbering[raw]
        return calls

    # -- outputs -----------------------------------------------------------------------------

    def _outputs(self) -> tuple[list[str], dict[str, str], dict[str, str], dict[str, tuple[str, ...]]]:
        grads_of: dict[str, list[tuple[str, fx.Node]]] = {}
        buffer_updates: dict[str, str] = {}
        for desc, arg in zip(self.out_descs, self.out_args):
            kind = type(desc).__name__
            if arg is None:
                continue
            if kind == "GradAOTOutput" and type(desc.grad_of).__name__ == "ParamAOTInput":
                name = desc.grad_of.target.removeprefix(MODEL_PREFIX)
                param = self.storage[self.placeholder_of[desc.grad_of.target]][0]
                grads_of.setdefault(param, []).append((name, arg))
            elif kind == "InputMutationAOTOutput":
                buffer_updates[desc.mutated_input.target.removeprefix(MODEL_PREFIX)] = arg.name
        if not grads_of:
            raise TraceError(self.joint.source, "no parameter receives a gradient from the loss",
                             hint="the model needs parameters with requires_grad=True that the loss depends on")
        outputs: list[str] = []
        param_grads: dict[str, str] = {}
        accumulations: dict[str, tuple[str, ...]] = {}
        for param, contributions in grads_of.items():
            owned = [(self._single_owner(arg, f"the gradient of {name}"), name, arg) for name, arg in contributions]
            if len(owned) > 1:  # a tied parameter: its gradients in the order autograd's engine adds them
                owned.sort(key=lambda o: self.drafts.index(self.by_id[o[0]]))
            contributions = [(name, arg) for _, name, arg in owned]
            owners = list(dict.fromkeys(owner for owner, _, _ in owned))
            if len(owners) == 1:
                grad = owners[0]
            else:
                grad = self._accumulate(param, owners, contributions)
                accumulations[grad] = tuple(arg.name for _, arg in contributions)
            outputs.append(grad)
            for name, _ in contributions:
                param_grads[name] = grad
        return outputs, param_grads, buffer_updates, accumulations

    def _accumulate(self, param: str, owners: list[str], contributions: list[tuple[str, fx.Node]]) -> str:
        """A synthetic node summing a tied parameter's gradients (``owners``, their storages, and ``contributions``
        in the order they arrive), placed after the last of them. As autograd's engine does: into the first
        gradient's storage in place (0 bytes) when that gradient is a tensor of its own; when it is a view (``t``
        of a weight gradient, as a tied output layer's is), its storage is shared with its base and the sum is a
        new tensor of the parameter's size."""
        pinned = self.by_id[param]
        node_id = f"{param}_grad_sum"
        first_arg = contributions[0][1]
        in_place = first_arg.name == owners[0]
        position = self.drafts.index(self.by_id[owners[-1]]) + 1
        names = [name for name, _ in contributions]
        self._add(_Draft(node_id, 0 if in_place else pinned.mem,
                         accumulation_cost(self.cost, first_arg.meta["val"], len(owners)),
                         "backward", False, "aten.add_" if in_place else "aten.add", pinned.shape, pinned.dtype,
                         pinned.module, f"grad sum ({', '.join(names)})", owners), None, position)
        return node_id

    def _step_end(self, gradients: list[str], accumulations: Mapping[str, tuple[str, ...]]) -> str:
        """The end of the step (see the module notes): reads every gradient (a tied parameter's first one, whose
        storage holds the sum, too), the model's outputs and the loss."""
        node_id = "step_end"
        while node_id in self.by_id:
            node_id += "_"
        held = list(gradients)
        for grad in gradients:
            if grad in accumulations and self.by_id[grad].op == "aten.add_":  # summed into the first's storage
                held.append(self.by_id[grad].preds[0])
        loss = self._single_owner(self.loss_fx, "the loss")
        model_outputs = [p for d in self.drafts if d.kind == "loss" for p in d.preds
                         if not self.by_id[p].pinned and self.by_id[p].kind == "forward"]
        self._add(_Draft(node_id, 0, 0.0, "other", False, None, None, None, "",
                         "end of step (gradients, outputs and loss held until here)",
                         list(dict.fromkeys(held + model_outputs + [loss]))), None)
        return node_id

    def _set_transients(self) -> None:
        """Each op node's transient bytes from its kernel's measurement (see the module notes)."""
        fx_nodes = {n.name: n for n in self.gm.graph.nodes}
        outputs_of: dict[str, dict[int, _Draft]] = {}
        for draft in self.drafts:
            fx_name = self.producer.get(draft.id)
            if draft.pinned or fx_name is None:
                continue
            node = fx_nodes[fx_name]
            if node.target is operator.getitem:
                outputs_of.setdefault(node.args[0].name, {})[node.args[1]] = draft
            elif node.op == "call_function":
                outputs_of.setdefault(fx_name, {})[0] = draft
        for op, drafts in outputs_of.items():
            if len(drafts) > 1:
                for draft in drafts.values():
                    draft.kernel = op
            measured = self.kernels.ops.get(op)
            if measured is None:
                continue
            transient = max(measured.peak - sum(draft.mem for draft in drafts.values()), 0)
            for draft in drafts.values():
                draft.transient = transient

    def _single_owner(self, arg: fx.Node, what: str) -> str:
        owners = self.storage.get(arg.name, ())
        if len(owners) != 1 or self.by_id[owners[0]].pinned:
            raise TraceError(self.joint.source, f"{what} ({arg.name}) is not a tensor the step computes",
                             hint="the loss and every gradient must be computed by the step, not be one of its "
                                  "inputs")
        return owners[0]


# -- small helpers ----------------------------------------------------------------------------

def _storage_bytes(value: torch.Tensor) -> int:
    return int(value.untyped_storage().nbytes())


def _shape(value: Any) -> tuple | None:
    return tuple(int(s) for s in value.shape) if isinstance(value, torch.Tensor) else None


def _dtype(value: Any) -> str | None:
    return str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None


def _op_name(node: fx.Node) -> str:
    """``aten.convolution``: the op without its overload."""
    return str(getattr(node.target, "overloadpacket", node.target))


def _op_label(node: fx.Node) -> str:
    packet = getattr(node.target, "overloadpacket", None)
    return (packet.__name__ if packet is not None else getattr(node.target, "__name__", str(node.target))).lstrip("_")


def _kind(node: fx.Node) -> str:
    if node.meta.get("partitioner_tag") == "is_backward" or node.meta.get("autograd_backward"):
        return "backward"
    custom = node.meta.get("custom") or {}
    return "loss" if custom.get(PHASE_KEY) == "loss" else "forward"


def _common_prefix(paths: Iterable[str]) -> str:
    """Longest common dotted prefix: ``a.b.c`` and ``a.b.d`` -> ``a.b``; nothing in common -> ``""``."""
    split = [p.split(".") if p else [] for p in paths]
    if not split:
        return ""
    common: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)
