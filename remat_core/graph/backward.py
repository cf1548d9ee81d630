"""Turn a forward-only graph (from ONNX, or a user's JSON) into a training graph.

Reverse mode, as autograd builds it
-----------------------------------
Trainable tensors are the pinned nodes of kind ``param`` (or the ``trainable`` ids given). A node
*requires grad* if it is trainable or reads a node that requires grad. Then:

1. **Loss.** If the graph's only output is a ``loss`` node, it is the loss. Otherwise a ``loss``
   node is added that reads every output (a scalar: :data:`LOSS_BYTES` bytes, cost 0: a reduction,
   negligible next to the model).
2. **Gradient nodes.** For each forward node ``v`` the loss depends on (the loss included) with an
   input that requires grad, in reverse topological order, a ``backward`` node ``v:grad`` holds
   the gradients with respect to v's non-pinned inputs that require grad (``mem`` = their bytes).
   It reads

   - the gradients of v's output: ``c:grad`` for every consumer ``c`` of v (their sum is v's
     output gradient; v is the loss: nothing),
   - v's inputs and v's output, which backward formulas need (``d(x*w)/dx = w``, ``relu'`` from
     its output): so every forward tensor stays live until its gradient is computed, which is what
     makes training memory-hungry.

   A node whose only trainable inputs are parameters has no ``v:grad`` (nothing to propagate).
3. **Parameter gradients.** For a parameter ``p`` read by ``v``, a ``backward`` node computes v's
   contribution to p's gradient from the same three things (``dW = x^T dy``) and adds the previous
   contribution, as autograd accumulates into ``p.grad``: a chain ``p:grad#1, p:grad#2, ...,
   p:grad`` over p's readers in backward order (``p:grad`` alone when p has one reader), each
   holding ``mem(p)`` bytes. The last link of each chain is a graph output, in the order the
   backward pass completes them.
4. **Costs.** Each forward node's backward costs ``backward_cost_factor`` times its forward cost
   (2 by default: the input gradient and the weight gradient each cost about one forward), shared
   between ``v:grad`` and v's parameter-gradient links in proportion to their bytes, the same rule
   the tracer applies to multi-output ops.

The forward part is kept as it was (ids, order, attributes); backward nodes follow it in the
order reverse mode runs them.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..errors import GraphError
from .compute_graph import ComputeGraph, Node
from .labels import short_name

DEFAULT_BACKWARD_COST_FACTOR = 2.0
LOSS_BYTES = 4
"""A float32 scalar."""
LOSS_ID = "loss"


def with_backward(graph: ComputeGraph, *, backward_cost_factor: float = DEFAULT_BACKWARD_COST_FACTOR,
                  trainable: Iterable[str] | None = None) -> ComputeGraph:
    """The training graph of a forward-only graph (see the module docstring for its structure).

    Parameters
    ----------
    graph : ComputeGraph
        A forward graph: no ``backward`` nodes; its outputs are what the loss reads.
    backward_cost_factor : float
        Backward cost of a node, as a multiple of its forward cost (>= 0).
    trainable : iterable of str, optional
        Ids of the pinned nodes to train. Default: every pinned node of kind ``param``.

    Returns
    -------
    ComputeGraph
        The forward nodes, a loss, gradient nodes, parameter-gradient chains; outputs are the
        parameter gradients. Attachments are carried over.

    Raises
    ------
    GraphError
        If the graph already has backward nodes, has nothing trainable, names an unknown or
        unpinned trainable node, or the factor is negative.

    Examples
    --------
    >>> from remat_core.graph.compute_graph import ComputeGraph, Node
    >>> fwd = ComputeGraph([Node("x", 8, 0, "input", True), Node("w", 4, 0, "param", True),
    ...                     Node("y", 8, 1.0, "forward")], [("x", "y"), ("w", "y")])
    >>> train = with_backward(fwd)
    >>> train.outputs, [n.id for n in train.nodes if n.kind == "backward"]
    (('w:grad',), ['loss:grad', 'w:grad'])
    """
    return _BackwardBuilder(graph, _check_factor(backward_cost_factor), _trainable(graph, trainable)).build()


def _check_factor(factor: float) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor < 0:
        raise GraphError(f"backward_cost_factor must be a finite number >= 0, got {factor!r}")
    return float(factor)


def _trainable(graph: ComputeGraph, trainable: Iterable[str] | None) -> frozenset[str]:
    backward = [n.id for n in graph.nodes if n.kind == "backward"]
    if backward:
        raise GraphError(f"graph '{graph.name}' already has backward nodes (e.g. '{backward[0]}'); with_backward "
                         f"takes a forward-only graph")
    if trainable is None:
        chosen = frozenset(n.id for n in graph.nodes if n.pinned and n.kind == "param")
        if not chosen:
            raise GraphError(f"graph '{graph.name}' has no trainable parameters: no pinned node has kind 'param'; "
                             f"mark the weights as kind 'param' or name them with trainable=[...]")
        return chosen
    chosen = frozenset(trainable)
    for node_id in sorted(chosen):
        if not graph.node(node_id).pinned:
            raise GraphError(f"trainable node '{node_id}' is not pinned; only pinned nodes (weights) can be trained")
    if not chosen:
        raise GraphError("trainable=[] names nothing to train; name at least one pinned node")
    return chosen


class _BackwardBuilder:
    """Appends the backward pass to a copy of the forward nodes and edges."""

    def __init__(self, graph: ComputeGraph, factor: float, trainable: frozenset[str]):
        self.graph = graph
        self.factor = factor
        self.trainable = trainable
        self.taken = set(graph.ids)
        self.nodes: list[Node] = list(graph.nodes)
        self.by_id: dict[str, Node] = {n.id: n for n in graph.nodes}
        self.preds: dict[str, list[str]] = {n.id: list(graph.preds(n.id)) for n in graph.nodes}
        self.forward_readers: dict[str, list[str]] = {n.id: list(graph.succs(n.id)) for n in graph.nodes}
        self.grad_of: dict[str, str] = {}
        self.links_of: dict[str, list[str]] = {p: [] for p in trainable}
        self.outputs: list[str] = []  # the finished chains, in the order backward completes them

    def build(self) -> ComputeGraph:
        order = list(self.graph.topological_order())
        loss = self._loss()
        if loss not in self.graph.index:
            order.append(loss)
        requires = self._requires_grad(order)
        self.feeds_loss = self._ancestors(loss)
        for v in reversed(order):
            if v in self.feeds_loss and not self.by_id[v].pinned and any(requires[u] for u in self.preds[v]):
                self._gradient_of(v, requires)
        if not self.outputs:
            raise GraphError(f"graph '{self.graph.name}': the loss depends on no trainable parameter")
        edges = [(u, v) for v, us in self.preds.items() for u in us]
        return ComputeGraph(self.nodes, edges, self.outputs, name=self.graph.name,
                            attachments=self.graph.attachments)

    def _loss(self) -> str:
        outputs = self.graph.outputs
        if len(outputs) == 1 and self.graph.node(outputs[0]).kind == "loss":
            return outputs[0]
        loss = self._fresh(LOSS_ID)
        self._add(Node(loss, LOSS_BYTES, 0.0, "loss", op="loss", shape=(), dtype="float32", module="",
                       label="loss"), list(outputs))
        for output in outputs:
            self.forward_readers[output].append(loss)
        self.forward_readers[loss] = []
        return loss

    def _ancestors(self, loss: str) -> set[str]:
        """The loss and every node it depends on: only they receive gradients."""
        seen = {loss}
        stack = [loss]
        while stack:
            for u in self.preds[stack.pop()]:
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
        return seen

    def _requires_grad(self, order: list[str]) -> dict[str, bool]:
        requires: dict[str, bool] = {}
        for v in order:
            node = self.by_id[v]
            requires[v] = v in self.trainable or (not node.pinned and any(requires[u] for u in self.preds[v]))
        return requires

    def _gradient_of(self, v: str, requires: dict[str, bool]) -> None:
        """``v:grad`` for v's activation inputs, one chain link per trainable parameter v reads."""
        node = self.by_id[v]
        reads = [self.grad_of[c] for c in self.forward_readers[v] if c in self.grad_of] + self.preds[v] + [v]
        activations = [u for u in self.preds[v] if requires[u] and not self.by_id[u].pinned]
        params = [u for u in self.preds[v] if u in self.trainable]
        parts = ([sum(self.by_id[u].mem for u in activations)] if activations else []) + \
                [self.by_id[p].mem for p in params]
        costs = _shares(self.factor * node.cost, parts)
        if activations:
            grad = self._fresh(f"{v}:grad")
            self._add(Node(grad, parts[0], costs.pop(0), "backward", op="gradient", module=node.module,
                           label=f"grad {short_name(node) or node.id}"), reads)
            self.grad_of[v] = grad
        for p, cost in zip(params, costs):
            self._parameter_link(p, cost, reads)

    def _parameter_link(self, p: str, cost: float, reads: list[str]) -> None:
        """The next link of p's gradient chain; the last one (all readers done) is ``p:grad``."""
        param = self.by_id[p]
        links = self.links_of[p]
        readers = sum(1 for c in self.forward_readers[p] if c in self.feeds_loss)
        last = len(links) + 1 == readers
        link = self._fresh(f"{p}:grad" if last else f"{p}:grad#{len(links) + 1}")
        self._add(Node(link, param.mem, cost, "backward", op="gradient", shape=param.shape, dtype=param.dtype,
                       module=param.module, label=f"grad {short_name(param) or param.id}"), reads + links[-1:])
        links.append(link)
        if last:
            self.outputs.append(link)

    def _fresh(self, base: str) -> str:
        candidate = base
        while candidate in self.taken:
            candidate += "'"
        self.taken.add(candidate)
        return candidate

    def _add(self, node: Node, reads: list[str]) -> None:
        self.nodes.append(node)
        self.by_id[node.id] = node
        self.preds[node.id] = list(dict.fromkeys(reads))


def _shares(total: float, sizes: list[int]) -> list[float]:
    """``total`` split in proportion to ``sizes``, equally if every size is 0."""
    if not sizes:
        return []
    whole = sum(sizes)
    return [total * s / whole for s in sizes] if whole else [total / len(sizes)] * len(sizes)
