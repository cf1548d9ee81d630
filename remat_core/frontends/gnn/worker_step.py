"""One worker's training step as a graph and a schedule, from the partition's sizes alone: what the one simulator
needs to say how much memory each worker holds, vanilla or SAR, before anything runs.

The step is recorded as :mod:`remat_core.run.distributed` runs it: every tensor it allocates is a node (its bytes,
its FLOPs, what it reads), every ``del`` and every release by autograd a free, in the order they happen; in-place
accumulations allocate nothing. Fetched rows are nodes of their own (``op="gnn.fetch"``, ``"gnn.refetch"``), as
are the send buffers and the gradients that travel home (``"gnn.send"``, ``"gnn.gradient_home"``), so the
simulated timeline shows each round. Tensors far smaller than a node's rows (parameters' gradients of narrow
layers, scalars, boolean masks) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...graph import ComputeGraph, Node
from .partition import Partition

GNN_MODELS = {"graphsage": "mean", "gcn": "gcn", "gat": "attention"}
"""The GNNs that run across workers, and how each aggregates."""
WORKER_MODES = ("vanilla", "sar")
FLOAT = 4
GRADIENT_PIECES = 4
"""SAR's weighted sums send each round's gradient home in this many pieces of rows: a quarter block in flight
each way instead of two whole blocks, for four times the messages (each still thousands of rows)."""
"""Bytes per value (float32)."""
TRAFFIC_OPS = {"gnn.fetch": "forward", "gnn.refetch": "refetch", "gnn.gradient_home": "backward"}
"""Node ops that are bytes received from a peer, and what they carry (as the real run's byte counters name it)."""
SENT_OPS = {"gnn.send": "rows", "gnn.gradient_out": "backward"}
"""Node ops that are bytes sent to a peer: rows it fetches (forward or refetch), gradients of rows it sent."""


@dataclass(frozen=True)
class GnnModel:
    """A zoo GNN's architecture: ``layers`` message-passing layers of ``width`` hidden units (GAT: ``heads`` heads
    of ``width // heads`` channels; one head at the output)."""

    name: str
    features: int
    classes: int
    width: int = 64
    layers: int = 2
    heads: int = 4

    def __post_init__(self) -> None:
        if self.name not in GNN_MODELS:
            raise ValueError(f"unknown GNN {self.name!r}; use one of {', '.join(GNN_MODELS)}")

    @property
    def aggregation(self) -> str:
        return GNN_MODELS[self.name]

    def widths(self) -> list[int]:
        """Each layer's input width, then the output's."""
        if self.name == "gat":
            hidden = self.width // self.heads * self.heads
            return [self.features] + [hidden] * (self.layers - 1) + [self.classes]
        return [self.features] + [self.width] * (self.layers - 1) + [self.classes]

    def attention_shapes(self) -> list[tuple[int, int]]:
        """(heads, channels) of each GAT layer."""
        channels = self.width // self.heads
        return [(self.heads, channels)] * (self.layers - 1) + [(1, self.classes)]


def edge_weights(partition: Partition, aggregation: str) -> tuple[np.ndarray, np.ndarray]:
    """The edges each layer aggregates (with GCN's self-loops) and their weights, for the whole graph."""
    graph = partition.graph
    src, dst = graph.edges
    n = graph.nodes
    if aggregation == "gcn":
        loops = np.arange(n)
        src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
        norm = 1 / np.sqrt(np.maximum(np.bincount(dst, minlength=n), 1))
        return np.stack([src, dst]), (norm[src] * norm[dst]).astype(np.float32)
    if aggregation == "mean":
        return np.stack([src, dst]), (1 / np.maximum(np.bincount(dst, minlength=n), 1))[dst].astype(np.float32)
    return np.stack([src, dst]), np.ones(src.size, dtype=np.float32)


@dataclass(frozen=True)
class WorkerSizes:
    """What one worker's step allocates depends on: its rows, and per peer the rows fetched, edges aggregated and
    rows sent."""

    rank: int
    workers: int
    nodes: int
    fetched: dict[int, int]
    edges: dict[int, int]
    sent: dict[int, int] = field(default_factory=dict)

    def rounds(self):
        """(to, source) of rounds 1..N-1: SAR's ring shifts."""
        for r in range(1, self.workers):
            yield (self.rank + r) % self.workers, (self.rank - r) % self.workers


def worker_sizes(partition: Partition, aggregation: str) -> list[WorkerSizes]:
    """Every worker's sizes under ``partition`` for a model that aggregates by ``aggregation``."""
    edges, _ = edge_weights(partition, aggregation)
    owner, k, n = partition.owner, partition.workers, partition.graph.nodes
    src, dst = edges
    pair = owner[dst] * k + owner[src]  # (receiving worker, source worker) of each edge
    edge_counts = np.bincount(pair, minlength=k * k).reshape(k, k)
    needed = np.unique(owner[dst] * n + src)  # (receiving worker, source node), once each
    fetched = np.zeros((k, k), dtype=np.int64)
    np.add.at(fetched, (needed // n, owner[needed % n]), 1)
    counts = np.bincount(owner, minlength=k)
    return [WorkerSizes(p, k, int(counts[p]), {q: int(fetched[p, q]) for q in range(k) if q != p},
                        {q: int(edge_counts[p, q]) for q in range(k)},
                        {t: int(fetched[t, p]) for t in range(k) if t != p}) for p in range(k)]


def piece_bounds(rows: int, pieces: int) -> list[tuple[int, int]]:
    """``pieces`` near-equal row ranges of a block of ``rows`` rows (empty ones when it has fewer): sender and
    receiver know the same sizes, so both cut a block at the same rows."""
    return [(rows * i // pieces, rows * (i + 1) // pieces) for i in range(pieces)]


class _Recorder:
    """Nodes, edges and ops in the order the step allocates and frees."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.edges: list[tuple[str, str]] = []
        self.ops: list[tuple[str, str]] = []
        self.count = 0

    def new(self, name: str, mem: int, reads=(), *, kind: str = "forward", op: str = "gnn.compute",
            cost: float = 0.0, transient: int = 0, layer: int | None = None) -> str:
        self.count += 1
        node_id = f"{self.count}:{name}"
        module = f"layer{layer}" if layer is not None else None
        self.nodes.append(Node(node_id, int(mem), float(cost), kind=kind, op=op, transient=int(transient),
                               module=module, label=name))
        self.edges += [(r, node_id) for r in reads if r is not None]
        self.ops.append(("compute", node_id))
        return node_id

    def pinned(self, name: str, mem: int, kind: str = "input") -> str:
        self.nodes.append(Node(name, int(mem), 0.0, kind=kind, pinned=True, label=name))
        return name

    def free(self, *ids: str | None) -> None:
        self.ops += [("free", i) for i in ids if i is not None]


@dataclass
class WorkerStep:
    """One worker's step: the graph, the recorded ops, and its sizes."""

    graph: ComputeGraph
    ops: list[tuple[str, str]]
    sizes: WorkerSizes
    mode: str
    chunk: int | None


def worker_step(sizes: WorkerSizes, model: GnnModel, mode: str, chunk: int | None = None) -> WorkerStep:
    """The step worker ``sizes.rank`` runs, recorded as a graph and its ops (see the module notes).

    ``chunk``: SAR's attention processes at most this many edges at a time (None: a shard's edges at once)."""
    if mode not in WORKER_MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(WORKER_MODES)}")
    rec = _Recorder()
    n = sizes.nodes
    widths = model.widths()
    x = rec.pinned("features", n * widths[0] * FLOAT)
    builder = _STEPS[model.name](rec, sizes, model, mode, chunk)
    logits, backward_layers = builder.forward(x)
    log_probs = rec.new("log_softmax", n * model.classes * FLOAT, [logits], op="aten._log_softmax")
    rec.free(logits)
    loss = rec.new("loss", FLOAT, [log_probs], kind="loss", op="aten.nll_loss")
    grad_nll = rec.new("nll_loss_backward", n * model.classes * FLOAT, [loss], kind="backward")
    grad = rec.new("log_softmax_backward", n * model.classes * FLOAT, [grad_nll, log_probs], kind="backward")
    rec.free(grad_nll, log_probs)
    grads = builder.backward(grad, backward_layers)
    end = rec.new("step_end", 0, [loss, *grads], kind="backward", op="step_end")
    rec.free(end, loss, *grads)
    name = f"{model.name}-{mode}-worker{sizes.rank}-of-{sizes.workers}"
    graph = ComputeGraph(rec.nodes, rec.edges, outputs=[end], name=name)
    return WorkerStep(graph, rec.ops, sizes, mode, chunk)


class _Step:
    def __init__(self, rec: _Recorder, sizes: WorkerSizes, model: GnnModel, mode: str, chunk: int | None):
        self.rec, self.sizes, self.model, self.mode, self.chunk = rec, sizes, model, mode, chunk
        self.n = sizes.nodes

    def param_grad(self, layer: int, count: int, reads) -> str:
        return self.rec.new(f"layer{layer}.weight_grad", count * FLOAT, reads, kind="backward", op="param_grad",
                            layer=layer)

    def fetch(self, layer: int, to: int, source: int, width: int, reads, what: str = "gnn.fetch") -> str:
        """A round's send buffer (freed once sent) and the rows it receives."""
        rec = self.rec
        send = rec.new(f"send to {to}", self.sizes.sent[to] * width * FLOAT, reads, op="gnn.send", layer=layer,
                       kind="forward" if what == "gnn.fetch" else "backward")
        rows = rec.new(f"rows from {source}", self.sizes.fetched[source] * width * FLOAT, [send], op=what,
                       layer=layer, kind="forward" if what == "gnn.fetch" else "backward")
        rec.free(send)
        return rows

    def send_home(self, layer: int, to: int, width: int, reads, rows: int | None = None) -> None:
        """A block's gradient (or ``rows`` of it) sent to its owner while the peer's comes in (added in place, then
        freed)."""
        rows = self.sizes.sent[to] if rows is None else rows
        got = self.rec.new(f"gradient from {to}", rows * width * FLOAT, reads, kind="backward",
                           op="gnn.gradient_home", layer=layer)
        self.rec.free(got)


class _WeightedSumStep(_Step):
    """GraphSAGE (mean) and GCN: :class:`~remat_core.run.distributed.layers.WeightedSum` between linear layers."""

    def aggregate(self, layer: int, x: str, width: int, needs_grad: bool) -> tuple[str, dict]:
        """The weighted sum's forward; vanilla keeps the fetched rows when autograd records the layer (its input
        needs a gradient: not for GraphSAGE's first layer, whose input is the features)."""
        rec, sizes = self.rec, self.sizes
        out = rec.new("aggregate", self.n * width * FLOAT, [x], op="gnn.aggregate", layer=layer,
                      cost=2 * sizes.edges[sizes.rank] * width)
        halo = {}
        for to, source in sizes.rounds():
            rows = self.fetch(layer, to, source, width, [x])
            rec.new("aggregate rows", 0, [rows, out], op="gnn.aggregate", layer=layer,
                    cost=2 * sizes.edges[source] * width)
            if self.mode == "vanilla" and needs_grad:
                halo[source] = rows
            else:
                rec.free(rows)
        return out, halo

    def aggregate_backward(self, layer: int, grad: str, halo: dict, width: int) -> str:
        rec, sizes = self.rec, self.sizes
        grad_x = rec.new("aggregate_backward", self.n * width * FLOAT, [grad], kind="backward",
                         op="gnn.aggregate_backward", layer=layer, cost=2 * sizes.edges[sizes.rank] * width)
        pieces = 1 if self.mode == "vanilla" else GRADIENT_PIECES
        for to, source in sizes.rounds():
            for (start, end), (got_start, got_end) in zip(piece_bounds(sizes.fetched[source], pieces),
                                                          piece_bounds(sizes.sent[to], pieces)):
                back = rec.new(f"gradient for {source}", (end - start) * width * FLOAT, [grad], kind="backward",
                               op="gnn.gradient_out", layer=layer, cost=2 * sizes.edges[source] * width / pieces)
                self.send_home(layer, to, width, [back], got_end - got_start)
                rec.free(back)
        rec.free(*halo.values())
        return grad_x

    def forward(self, x: str):
        rec, n, widths, last = self.rec, self.n, self.model.widths(), self.model.layers - 1
        saved = []
        for k in range(self.model.layers):
            d_in, d_out = widths[k], widths[k + 1]
            if self.model.name == "graphsage":
                own = rec.new("own", n * d_out * FLOAT, [x], op="aten.addmm", layer=k, cost=2 * n * d_in * d_out)
                agg, halo = self.aggregate(k, x, d_in, k > 0)
                neighbours = rec.new("neighbours", n * d_out * FLOAT, [agg], op="aten.mm", layer=k,
                                     cost=2 * n * d_in * d_out)
                out = rec.new("sum", n * d_out * FLOAT, [own, neighbours], op="aten.add", layer=k)
                rec.free(own, neighbours)
                saved.append({"x": x, "agg": agg, "halo": halo})
            else:
                h = rec.new("linear", n * d_out * FLOAT, [x], op="aten.addmm", layer=k, cost=2 * n * d_in * d_out)
                out, halo = self.aggregate(k, h, d_out, True)
                rec.free(h)
                saved.append({"x": x, "halo": halo})
            if k < last:
                relu = rec.new("relu", n * d_out * FLOAT, [out], op="aten.relu", layer=k)
                rec.free(out)
                out = relu
            x = out
        return x, saved

    def backward(self, grad: str, saved: list) -> list[str]:
        rec, n, widths, last = self.rec, self.n, self.model.widths(), self.model.layers - 1
        grads = []
        for k in reversed(range(self.model.layers)):
            d_in, d_out = widths[k], widths[k + 1]
            layer = saved[k]
            if k < last:
                relu_out = saved[k + 1]["x"]
                g = rec.new("relu_backward", n * d_out * FLOAT, [grad, relu_out], kind="backward",
                            op="aten.threshold_backward", layer=k)
                rec.free(grad, relu_out)
                grad = g
            needs_input_grad = k > 0
            if self.model.name == "graphsage":
                grads.append(self.param_grad(k, d_in * d_out, [grad, layer["agg"]]))
                if needs_input_grad:
                    grad_agg = rec.new("neighbours_backward", n * d_in * FLOAT, [grad], kind="backward",
                                       op="aten.mm", layer=k, cost=2 * n * d_in * d_out)
                    rec.free(layer["agg"])
                    grad_x = self.aggregate_backward(k, grad_agg, layer["halo"], d_in)
                    rec.free(grad_agg)
                    grad_own = rec.new("own_backward", n * d_in * FLOAT, [grad], kind="backward", op="aten.mm",
                                       layer=k, cost=2 * n * d_in * d_out)
                    grads.append(self.param_grad(k, d_in * d_out + d_out, [grad, layer["x"]]))
                    rec.free(grad, grad_own)  # added into grad_x in place
                    grad = grad_x
                else:
                    rec.free(layer["agg"])
                    grads.append(self.param_grad(k, d_in * d_out + d_out, [grad, layer["x"]]))
                    rec.free(grad)
            else:
                grad_h = self.aggregate_backward(k, grad, layer["halo"], d_out)
                rec.free(grad)
                grads.append(self.param_grad(k, d_in * d_out + d_out, [grad_h, layer["x"]]))
                if needs_input_grad:
                    grad = rec.new("linear_backward", n * d_in * FLOAT, [grad_h], kind="backward", op="aten.mm",
                                   layer=k, cost=2 * n * d_in * d_out)
                rec.free(grad_h)
        return grads


_STEPS = {"graphsage": _WeightedSumStep, "gcn": _WeightedSumStep}


class _AttentionStep(_Step):
    """GAT: :class:`~remat_core.run.distributed.layers.Attention` between linear layers."""

    def chunks(self, edges: int) -> list[int]:
        step = edges if self.mode == "vanilla" or not self.chunk else self.chunk
        return [min(step, edges - start) for start in range(0, edges, max(step, 1))]

    def edge_weights(self, layer: int, edges: int, heads: int, reads_el, er: str, largest: str) -> tuple[str, str]:
        """``_logits`` then ``_weights``: (logits, weights), each E x heads."""
        rec = self.rec
        per_edge = edges * heads * FLOAT
        pre = rec.new("logits", per_edge, [reads_el, er], op="gnn.attention", layer=layer, transient=per_edge,
                      cost=2 * edges * heads)
        weights = rec.new("weights", per_edge, [pre, largest], op="gnn.attention", layer=layer, transient=per_edge,
                          cost=4 * edges * heads)
        return pre, weights

    def forward(self, x: str):
        rec, n, sizes, widths, last = self.rec, self.n, self.sizes, self.model.widths(), self.model.layers - 1
        saved = []
        for k, (heads, channels) in enumerate(self.model.attention_shapes()):
            hc, d_in = heads * channels, widths[k]
            z = rec.new("z", n * hc * FLOAT, [x], op="aten.mm", layer=k, cost=2 * n * d_in * hc)
            el = rec.new("el", n * heads * FLOAT, [z], op="aten.sum", layer=k, transient=n * hc * FLOAT)
            er = rec.new("er", n * heads * FLOAT, [z], op="aten.sum", layer=k, transient=n * hc * FLOAT)
            largest = rec.new("largest", n * heads * FLOAT, [el], op="gnn.attention", layer=k)
            num = rec.new("numerator", n * hc * FLOAT, [z], op="gnn.attention", layer=k)
            den = rec.new("denominator", n * heads * FLOAT, [el], op="gnn.attention", layer=k)
            halo, kept = {}, []
            if self.mode == "vanilla":
                blocks = [(sizes.rank, z, el)]
                for to, source in sizes.rounds():
                    halo[source] = (self.fetch(k, to, source, hc, [z]), self.fetch(k, to, source, heads, [el]))
                    blocks.append((source, *halo[source]))
                logits = []
                for source, _, el_rows in blocks:
                    edges = sizes.edges[source]
                    pre = rec.new("logits", edges * heads * FLOAT, [el_rows, er], op="gnn.attention", layer=k,
                                  transient=edges * heads * FLOAT, cost=2 * edges * heads)
                    rec.new("largest logit", 0, [pre, largest], op="gnn.attention", layer=k,
                            transient=edges * heads * FLOAT, cost=2 * edges * heads)
                    logits.append(pre)
                for (source, z_rows, _), pre in zip(blocks, logits):
                    edges = sizes.edges[source]
                    weights = rec.new("weights", edges * heads * FLOAT, [pre, largest], op="gnn.attention", layer=k,
                                      transient=edges * heads * FLOAT, cost=4 * edges * heads)
                    messages = rec.new("messages", edges * hc * FLOAT, [z_rows], op="gnn.attention", layer=k)
                    rec.new("weighted messages", 0, [messages, weights, num], op="gnn.attention", layer=k,
                            transient=edges * hc * FLOAT, cost=2 * edges * hc)
                    kept.append((pre, weights, messages))
            else:
                for source, to in [(sizes.rank, None)] + [(s, t) for t, s in sizes.rounds()]:
                    el_rows = el if to is None else self.fetch(k, to, source, heads, [el])
                    for edges in self.chunks(sizes.edges[source]):
                        pre = rec.new("logits", edges * heads * FLOAT, [el_rows, er], op="gnn.attention", layer=k,
                                      transient=edges * heads * FLOAT, cost=2 * edges * heads)
                        rec.new("largest logit", 0, [pre, largest], op="gnn.attention", layer=k,
                                transient=edges * heads * FLOAT, cost=2 * edges * heads)
                        rec.free(pre)
                    if to is not None:
                        rec.free(el_rows)
                for source, to in [(sizes.rank, None)] + [(s, t) for t, s in sizes.rounds()]:
                    if to is None:
                        z_rows, el_rows = z, el
                    else:
                        z_rows = self.fetch(k, to, source, hc, [z])
                        el_rows = self.fetch(k, to, source, heads, [el])
                    for edges in self.chunks(sizes.edges[source]):
                        pre, weights = self.edge_weights(k, edges, heads, el_rows, er, largest)
                        rec.free(pre)
                        for _ in range(heads):  # one head's messages at a time
                            messages = rec.new("messages", edges * channels * FLOAT, [z_rows, weights, num],
                                               op="gnn.attention", layer=k, cost=2 * edges * channels)
                            rec.free(messages)
                        rec.free(weights)
                    if to is not None:
                        rec.free(z_rows, el_rows)
            out = rec.new("attention", n * hc * FLOAT, [num, den], op="gnn.attention", layer=k)
            rec.free(num)
            saved.append({"x": x, "z": z, "el": el, "er": er, "largest": largest, "den": den, "out": out,
                          "halo": halo, "kept": kept})
            if k < last:
                x = rec.new("elu", n * hc * FLOAT, [out], op="aten.elu", layer=k)
            else:
                x = rec.new("mean over heads", n * channels * FLOAT, [out], op="aten.mean", layer=k)
        return x, saved

    def edge_gradients(self, layer: int, edges: int, heads: int, hc: int, rows, kept, common) -> None:
        """``_edge_gradients``: one block of edges' share, added in place into the gradients ``common`` names."""
        rec = self.rec
        z_rows, el_rows = rows
        er, largest, grad_num, grad_den, *into = common
        if kept is None:
            pre, weights = self.edge_weights(layer, edges, heads, el_rows, er, largest)
            messages = None
        else:
            pre, weights, messages = kept
        channels = hc // heads
        grad_weights = rec.new("weight gradients", edges * heads * FLOAT, [grad_den], kind="backward",
                               op="gnn.attention_backward", layer=layer)
        for _ in range(heads):  # one head at a time, as the forward
            grad_messages = rec.new("message gradients", edges * channels * FLOAT, [grad_num], kind="backward",
                                    op="gnn.attention_backward", layer=layer)
            head_messages = messages if messages is not None else rec.new(
                "messages", edges * channels * FLOAT, [z_rows], op="gnn.attention", kind="backward", layer=layer)
            rec.new("weight gradients added", 0, [grad_messages, head_messages, grad_weights], kind="backward",
                    op="gnn.attention_backward", layer=layer, transient=edges * FLOAT, cost=2 * edges * channels)
            if messages is None:
                rec.free(head_messages)
            rec.new("row gradients", 0, [grad_messages, weights, *into], kind="backward",
                    op="gnn.attention_backward", layer=layer, cost=2 * edges * channels)
            rec.free(grad_messages)
        rec.free(messages, weights)
        grad_pre = rec.new("logit gradients", edges * heads * FLOAT, [grad_weights, pre], kind="backward",
                           op="gnn.attention_backward", layer=layer, cost=4 * edges * heads)
        rec.free(grad_weights, pre)
        rec.new("logit gradients added", 0, [grad_pre, *into], kind="backward", op="gnn.attention_backward",
                layer=layer, cost=2 * edges * heads)
        rec.free(grad_pre)

    def backward(self, grad: str, saved: list) -> list[str]:
        rec, n, sizes, widths, last = self.rec, self.n, self.sizes, self.model.widths(), self.model.layers - 1
        grads = []
        for k, (heads, channels) in reversed(list(enumerate(self.model.attention_shapes()))):
            hc, d_in, layer = heads * channels, widths[k], saved[k]
            if k < last:
                g = rec.new("elu_backward", n * hc * FLOAT, [grad, saved[k + 1]["x"]], kind="backward",
                            op="aten.elu_backward", layer=k)
                rec.free(grad, saved[k + 1]["x"])
                grad = g
            else:
                g = rec.new("mean_backward", n * hc * FLOAT, [grad], kind="backward", op="aten.mean", layer=k)
                rec.free(grad)
                grad = g
            grad_num = rec.new("numerator gradient", n * hc * FLOAT, [grad, layer["den"]], kind="backward",
                               op="gnn.attention_backward", layer=k)
            grad_den = rec.new("denominator gradient", n * heads * FLOAT, [grad, layer["out"], layer["den"]],
                               kind="backward", op="gnn.attention_backward", layer=k, transient=n * hc * FLOAT)
            grad_z = rec.new("z gradient", n * hc * FLOAT, [grad_num], kind="backward", op="gnn.attention_backward",
                             layer=k)
            grad_el = rec.new("el gradient", n * heads * FLOAT, [grad_num], kind="backward",
                              op="gnn.attention_backward", layer=k)
            grad_er = rec.new("er gradient", n * heads * FLOAT, [grad_num], kind="backward",
                              op="gnn.attention_backward", layer=k)
            common = (layer["er"], layer["largest"], grad_num, grad_den, grad_z, grad_el, grad_er)
            kept = list(layer["kept"])
            for edges in self.chunks(sizes.edges[sizes.rank]):
                self.edge_gradients(k, edges, heads, hc, (layer["z"], layer["el"]), kept.pop(0) if kept else None,
                                    common)
            for to, source in sizes.rounds():
                if self.mode == "vanilla":
                    rows = layer["halo"][source]
                else:
                    rows = (self.fetch(k, to, source, hc, [layer["z"]], "gnn.refetch"),
                            self.fetch(k, to, source, heads, [layer["el"]], "gnn.refetch"))
                grad_rows = (rec.new("fetched z gradient", sizes.fetched[source] * hc * FLOAT, [grad_num],
                                     kind="backward", op="gnn.gradient_out", layer=k),
                             rec.new("fetched el gradient", sizes.fetched[source] * heads * FLOAT, [grad_num],
                                     kind="backward", op="gnn.gradient_out", layer=k))
                shard_common = (*common[:4], *grad_rows, grad_er)
                for edges in self.chunks(sizes.edges[source]):
                    self.edge_gradients(k, edges, heads, hc, rows, kept.pop(0) if kept else None, shard_common)
                rec.free(*rows)
                self.send_home(k, to, hc, [grad_rows[0]])
                self.send_home(k, to, heads, [grad_rows[1]])
                rec.free(*grad_rows)
            rec.free(grad, grad_num, grad_den, layer["largest"], layer["den"], layer["out"])
            # el and er: (z * a).sum(-1); their backward multiplies the gradient back out to z's shape
            for g_part in (grad_er, grad_el):
                part = rec.new("attention vector backward", n * hc * FLOAT, [g_part, layer["z"]], kind="backward",
                               op="aten.mul", layer=k, transient=n * hc * FLOAT)
                rec.free(g_part)
                rec.new("z gradient added", 0, [part, grad_z], kind="backward", op="aten.add_", layer=k)
                rec.free(part)
            rec.free(layer["el"], layer["er"], layer["z"])
            grads.append(self.param_grad(k, d_in * hc + 2 * hc, [grad_z, layer["x"]]))
            if k > 0:
                grad = rec.new("linear_backward", n * d_in * FLOAT, [grad_z], kind="backward", op="aten.mm",
                               layer=k, cost=2 * n * d_in * hc)
            rec.free(grad_z)
        return grads


_STEPS["gat"] = _AttentionStep
