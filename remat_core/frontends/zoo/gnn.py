"""Graph neural networks trained full-batch on one machine: GraphSAGE (mean), GCN and GAT on an R-MAT graph.

Message passing is written with dense ops on the edge list (``index_select`` of the sources, ``scatter_add`` into
the destinations), so that the tracer captures it like any model: the per-edge tensors a layer makes (the
gathered messages; GAT's attention logits and its E x heads x channels weighted messages) are nodes of the joint
graph, as on one machine without sparse kernels. ``scatter_add``, not ``index_add``: eager autograd's
``index_add`` keeps its whole source (E x width) for the backward, which needs only its shape.

The graph, its features and labels come from :func:`~remat_core.frontends.gnn.rmat_graph` with the build's seed:
``batch_size`` is the number of nodes, ten edges per node, both ways (nodes R-MAT leaves untouched stay, with
their own features only). Measured on this CPU at 3,000 nodes: the simulated checkpoint-all peak is the eager
step's within 0.4% (graphsage) and 3% (gcn); GAT's eager step holds 24% more than its traced step: the tensors
eager autograd saves are as the traced step keeps them, so the difference arises in eager's backward (where,
not pinned down yet). Replayed by the plan route, the traced GAT step measures what the simulator says.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..gnn import rmat_graph
from ..losses import cross_entropy
from ._spec import ModelOption, ModelSpec

EDGES_PER_NODE = 10
CLASSES = 16


def _sum_into(nodes: int, dst: torch.Tensor, messages: torch.Tensor) -> torch.Tensor:
    """Each node's sum of the messages of the edges into it (``messages``: one row per edge)."""
    index = dst.view(-1, *([1] * (messages.dim() - 1))).expand_as(messages)
    return messages.new_zeros((nodes, *messages.shape[1:])).scatter_add(0, index, messages)


def _mean_of_neighbours(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, inverse_degree: torch.Tensor):
    """The mean of each node's in-neighbours' rows (zero for a node without any)."""
    return _sum_into(x.shape[0], dst, x.index_select(0, src)) * inverse_degree


class GraphSAGE(nn.Module):
    """``layers`` SAGE layers with the mean aggregator: ``h' = W_self h + W_neigh mean(h_neighbours)``, ReLU between."""

    def __init__(self, features: int, hidden: int, classes: int, layers: int, edges: torch.Tensor, nodes: int):
        super().__init__()
        widths = [features] + [hidden] * (layers - 1) + [classes]
        self.own = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.neighbours = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip(widths, widths[1:]))
        self.register_buffer("edges", edges)
        degree = torch.zeros(nodes).index_add(0, edges[1], torch.ones(edges.shape[1]))
        self.register_buffer("inverse_degree", (1 / degree.clamp(min=1)).unsqueeze(-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        src, dst = self.edges
        for k, (own, neighbours) in enumerate(zip(self.own, self.neighbours)):
            x = own(x) + neighbours(_mean_of_neighbours(x, src, dst, self.inverse_degree))
            if k < len(self.own) - 1:
                x = F.relu(x)
        return x


class GCN(nn.Module):
    """``layers`` GCN layers: ``h' = D^-1/2 (A + I) D^-1/2 h W`` (Kipf and Welling), ReLU between."""

    def __init__(self, features: int, hidden: int, classes: int, layers: int, edges: torch.Tensor, nodes: int):
        super().__init__()
        widths = [features] + [hidden] * (layers - 1) + [classes]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        loops = torch.arange(nodes).expand(2, nodes)
        edges = torch.cat([edges, loops], dim=1)
        degree = torch.zeros(nodes).index_add(0, edges[1], torch.ones(edges.shape[1]))
        norm = degree.clamp(min=1).rsqrt()
        self.register_buffer("edges", edges)
        self.register_buffer("weight", (norm[edges[0]] * norm[edges[1]]).unsqueeze(-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        src, dst = self.edges
        for k, linear in enumerate(self.linears):
            h = linear(x)
            x = _sum_into(h.shape[0], dst, h.index_select(0, src) * self.weight)
            if k < len(self.linears) - 1:
                x = F.relu(x)
        return x


class GAT(nn.Module):
    """``layers`` GAT layers (Velickovic et al.): ``heads`` attention heads of ``hidden / heads`` channels,
    concatenated between layers and averaged (one head) at the output; ELU between."""

    def __init__(self, features: int, hidden: int, classes: int, layers: int, edges: torch.Tensor, heads: int):
        super().__init__()
        self.heads = heads
        shapes = [(features, heads, hidden // heads)] + [(hidden // heads * heads, heads, hidden // heads)] * (
            layers - 2) + [(hidden // heads * heads if layers > 1 else features, 1, classes)]
        self.linears = nn.ModuleList(nn.Linear(a, h * c, bias=False) for a, h, c in shapes)
        self.attend_src = nn.ParameterList(nn.Parameter(torch.randn(h, c) * 0.1) for _, h, c in shapes)
        self.attend_dst = nn.ParameterList(nn.Parameter(torch.randn(h, c) * 0.1) for _, h, c in shapes)
        self.shapes = [(h, c) for _, h, c in shapes]
        self.register_buffer("edges", edges)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        src, dst = self.edges
        nodes = x.shape[0]
        for k, (linear, (heads, channels)) in enumerate(zip(self.linears, self.shapes)):
            z = linear(x).view(nodes, heads, channels)
            logits = F.leaky_relu((z * self.attend_src[k]).sum(-1).index_select(0, src)
                                  + (z * self.attend_dst[k]).sum(-1).index_select(0, dst), 0.2)
            largest = torch.full((nodes, heads), -torch.inf, dtype=logits.dtype).scatter_reduce(
                0, dst.unsqueeze(-1).expand(-1, heads), logits.detach(), "amax")
            weights = torch.exp(logits - largest.index_select(0, dst))
            total = _sum_into(nodes, dst, weights)
            alpha = weights / total.index_select(0, dst)
            x = _sum_into(nodes, dst, z.index_select(0, src) * alpha.unsqueeze(-1))
            x = x.reshape(nodes, heads * channels) if k < len(self.linears) - 1 else x.mean(1)
            if k < len(self.linears) - 1:
                x = F.elu(x)
        return x


def _graph(generator: torch.Generator, nodes: int, features: int):
    seed = int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator, device="cpu"))  # a CPU draw, even for meta
    graph = rmat_graph(nodes, nodes * EDGES_PER_NODE, features=features, classes=CLASSES, seed=seed,
                       drop_isolated=False)
    return (torch.as_tensor(graph.edges), torch.as_tensor(graph.features), torch.as_tensor(graph.labels))


def build_graphsage(generator: torch.Generator, batch_size: int, features: int, depth: int, width: int):
    edges, x, y = _graph(generator, batch_size, features)
    return GraphSAGE(features, width, CLASSES, depth, edges, batch_size), (x,), cross_entropy(y)


def build_gcn(generator: torch.Generator, batch_size: int, features: int, depth: int, width: int):
    edges, x, y = _graph(generator, batch_size, features)
    return GCN(features, width, CLASSES, depth, edges, batch_size), (x,), cross_entropy(y)


def build_gat(generator: torch.Generator, batch_size: int, features: int, depth: int, width: int, heads: int):
    edges, x, y = _graph(generator, batch_size, features)
    return GAT(features, width, CLASSES, depth, edges, heads), (x,), cross_entropy(y)


def _options(width: int) -> tuple[ModelOption, ...]:
    return (ModelOption("batch_size", 10_000, 16, 10_000_000, "batch", "graph nodes (full batch: every node, "
                                                                      "every step)"),
            ModelOption("features", 64, 1, 4096, "input_size", "input features per node"),
            ModelOption("depth", 2, 1, 16, "depth", "message-passing layers"),
            ModelOption("width", width, 1, 4096, "width", "hidden units per layer"))


def sage_params(features: int = 64, width: int = 256, depth: int = 2) -> int:
    widths = [features] + [width] * (depth - 1) + [CLASSES]
    return sum(2 * a * b + b for a, b in zip(widths, widths[1:]))


def gcn_params(features: int = 64, width: int = 256, depth: int = 2) -> int:
    widths = [features] + [width] * (depth - 1) + [CLASSES]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def gat_params(features: int = 64, width: int = 128, depth: int = 2, heads: int = 4) -> int:
    channels = width // heads
    shapes = [(features, heads, channels)] + [(channels * heads, heads, channels)] * (depth - 2) + [
        (channels * heads if depth > 1 else features, 1, CLASSES)]
    return sum(a * h * c + 2 * h * c for a, h, c in shapes)


MODELS = (
    ModelSpec("graphsage", "GraphSAGE (mean aggregator), full batch on an R-MAT graph of batch_size nodes",
              build_graphsage, _options(256), reference_params=sage_params(),
              reference="closed form: per layer 2 * in * out + out (self and neighbour weights, one bias)"),
    ModelSpec("gcn", "GCN (Kipf and Welling), full batch on an R-MAT graph of batch_size nodes", build_gcn,
              _options(256), reference_params=gcn_params(),
              reference="closed form: per layer in * out + out"),
    ModelSpec("gat", "GAT (multi-head attention), full batch on an R-MAT graph of batch_size nodes", build_gat,
              (*_options(128), ModelOption("heads", 4, 1, 64, "width", "attention heads of the hidden layers")),
              reference_params=gat_params(),
              reference="closed form: per layer in * heads * channels + 2 * heads * channels (attention vectors)"),
)
