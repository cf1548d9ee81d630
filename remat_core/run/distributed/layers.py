"""The message passing of one layer across workers, vanilla or SAR, as autograd Functions.

- **vanilla** (domain-parallel full batch, SAR's modes 2 and 3): every remote row the layer needs is fetched
  before it aggregates, and kept with the layer's per-edge tensors until the backward pass (as the message
  passing kernels of DGL and PyG keep their inputs); the backward sends each fetched row's gradient home.
- **sar** (sequential aggregation and rematerialization, Mostafa 2022): one source worker at a time, its
  rows freed once aggregated. Weighted sums (mean, GCN) need no rows in the backward (``matrix_t @ grad`` is
  sent home, in :data:`GRADIENT_PIECES` pieces of rows so that two whole blocks are never in flight); attention
  fetches the rows again, recomputes the shard's edge weights and frees them again. Its messages are formed one
  head at a time (E x C, never E x H x C: the nearest plain torch comes to the paper's fused attention kernels).
  ``chunk`` edges at a time bound the per-edge tensors further (attention only).

Both give the gradients of the single-process layer; the forward and backward allocate in the order
:mod:`remat_core.frontends.gnn.worker_step` records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from torch.nn import functional as F

from ...frontends.gnn import GRADIENT_PIECES, piece_bounds
from .ring import Ring
from .shards import Shard, WorkerShards

NEGATIVE_SLOPE = 0.2
"""GAT's LeakyReLU slope on the attention logits (as the zoo's GAT)."""


@dataclass
class LayerPlan:
    """What a layer's Function needs besides its tensors."""

    shards: WorkerShards
    ring: Ring
    layer: int
    mode: str
    chunk: int | None = None

    def remote(self) -> Iterator[tuple[int, int, Shard]]:
        """(to, source, source's shard) for rounds 1..N-1."""
        for r in range(1, self.shards.workers):
            to, source = self.ring.peers(r)
            yield to, source, self.shards.shards[source]

    def fetch(self, to: int, source: int, rows: torch.Tensor, what: str, into: torch.Tensor | None = None):
        """Send ``to`` the rows of ``rows`` it needs while receiving the source's rows (into ``into`` if given)."""
        send = rows.index_select(0, self.shards.send_rows[to])
        if into is None:
            into = rows.new_empty((self.shards.shards[source].size, *rows.shape[1:]))
        self.ring.swap(to, send, source, into, self.layer, what)
        return into

    def send_home(self, to: int, source: int, gradient: torch.Tensor, grad_rows: torch.Tensor,
                  start: int = 0, end: int | None = None) -> None:
        """Send a fetched block's gradient (or a piece of it) back to its source; add what ``to`` sends back for
        the rows it fetched from us (those from ``start`` to ``end``) into ``grad_rows``."""
        rows = self.shards.send_rows[to][start:end]
        got = grad_rows.new_empty((rows.numel(), *grad_rows.shape[1:]))
        self.ring.swap(source, gradient, to, got, self.layer, "backward")
        grad_rows.index_add_(0, rows, got)

    def edge_chunks(self, shard: Shard) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        step = shard.edges if self.mode == "vanilla" or not self.chunk else self.chunk
        for start in range(0, shard.edges, max(step, 1)):
            yield shard.src[start:start + step], shard.dst[start:start + step]


class WeightedSum(torch.autograd.Function):
    """``out[v] = sum over edges u -> v of weight(u, v) * x[u]`` across workers (mean and GCN layers)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: LayerPlan) -> torch.Tensor:
        ctx.plan = plan
        out = x.new_zeros(x.shape).addmm_(plan.shards.local.matrix, x)
        if plan.mode == "vanilla":
            halo = {source: plan.fetch(to, source, x, "forward") for to, source, _ in plan.remote()}
            for source, rows in halo.items():
                out.addmm_(plan.shards.shards[source].matrix, rows)
            ctx.halo = halo  # kept for the backward, as the message passing kernels keep their inputs
            return out
        for to, source, shard in plan.remote():
            fetched = plan.fetch(to, source, x, "forward")
            out.addmm_(shard.matrix, fetched)
            del fetched
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        plan = ctx.plan
        grad_x = grad.new_zeros(grad.shape).addmm_(plan.shards.local.matrix_t, grad)
        pieces = 1 if plan.mode == "vanilla" else GRADIENT_PIECES
        for to, source, shard in plan.remote():
            coming = plan.shards.send_rows[to].numel()
            for (start, end), (got_start, got_end) in zip(piece_bounds(shard.size, pieces),
                                                          piece_bounds(coming, pieces)):
                rows = _csr_rows(shard.matrix_t, start, end)
                back = grad.new_zeros((end - start, grad.shape[1])).addmm_(rows, grad)
                plan.send_home(to, source, back, grad_x, got_start, got_end)
                del back
        ctx.halo = None
        return grad_x, None


def _csr_rows(matrix: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Rows ``start:end`` of a CSR matrix, sharing its column indices and values."""
    crow = matrix.crow_indices()
    first, last = int(crow[start]), int(crow[end])
    return torch.sparse_csr_tensor(crow[start:end + 1] - first, matrix.col_indices()[first:last],
                                   matrix.values()[first:last], (end - start, matrix.shape[1]),
                                   check_invariants=False)


def _logits(el_rows: torch.Tensor, er: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """The attention logits before the LeakyReLU, one row per edge."""
    logits = el_rows.index_select(0, src)
    logits += er.index_select(0, dst)
    return logits


def _weights(pre: torch.Tensor, largest: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``exp(leaky_relu(pre) - largest[dst])``: the softmax's numerators, shifted by each destination's largest."""
    weights = F.leaky_relu(pre, NEGATIVE_SLOPE)
    weights -= largest.index_select(0, dst)
    return weights.exp_()


class Attention(torch.autograd.Function):
    """GAT's aggregation ``out[v] = sum_u softmax_u(leaky_relu(el[u] + er[v])) * z[u]`` across workers.

    Softmax across shards as SAR does it: a first pass finds each destination's largest logit (constant for
    the gradient, as in the single-process model), a second accumulates numerators and denominators."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, el: torch.Tensor, er: torch.Tensor, plan: LayerPlan) -> torch.Tensor:
        ctx.plan = plan
        n, heads = el.shape
        largest = el.new_full((n, heads), -torch.inf)
        num = torch.zeros_like(z)
        den = el.new_zeros((n, heads))
        if plan.mode == "vanilla":
            halo = {source: (plan.fetch(to, source, z, "forward"), plan.fetch(to, source, el, "forward"))
                    for to, source, _ in plan.remote()}
            blocks = [(plan.shards.local, z, el)] + [(plan.shards.shards[s], *halo[s]) for s in halo]
            kept = []
            for shard, _, el_rows in blocks:
                pre = _logits(el_rows, er, shard.src, shard.dst)
                largest.scatter_reduce_(0, shard.dst.unsqueeze(-1).expand(-1, heads),
                                        F.leaky_relu(pre, NEGATIVE_SLOPE), "amax")
                kept.append(pre)
            saved = []
            for (shard, z_rows, _), pre in zip(blocks, kept):
                weights = _weights(pre, largest, shard.dst)
                den.index_add_(0, shard.dst, weights)
                messages = z_rows.index_select(0, shard.src)
                weighted = messages * weights.unsqueeze(-1)
                num.index_add_(0, shard.dst, weighted)
                del weighted
                saved.append((pre, weights, messages))
            ctx.halo, ctx.kept = halo, saved  # the per-edge tensors autograd would keep, and the fetched rows
        else:
            for fetched, shard in Attention._shards(plan, (el,), "forward"):
                for src, dst in plan.edge_chunks(shard):
                    pre = _logits(fetched[0], er, src, dst)
                    largest.scatter_reduce_(0, dst.unsqueeze(-1).expand(-1, heads),
                                            F.leaky_relu(pre, NEGATIVE_SLOPE), "amax")
                    del pre
                del fetched
            for fetched, shard in Attention._shards(plan, (z, el), "forward"):
                z_rows, el_rows = fetched
                for src, dst in plan.edge_chunks(shard):
                    weights = _weights(_logits(el_rows, er, src, dst), largest, dst)
                    den.index_add_(0, dst, weights)
                    for head in range(heads):  # E x C at a time, never E x H x C: the paper's fused kernels hold none
                        messages = z_rows[:, head].index_select(0, src)
                        messages *= weights[:, head:head + 1]
                        num[:, head].index_add_(0, dst, messages)
                        del messages
                    del weights
                del fetched, z_rows, el_rows
        den.masked_fill_(den == 0, 1)  # a node without in-edges: num is 0, so out is 0
        out = num / den.unsqueeze(-1)
        del num
        ctx.save_for_backward(z, el, er, largest, den, out)
        return out

    @staticmethod
    def _shards(plan: LayerPlan, tensors: tuple[torch.Tensor, ...], what: str):
        """(rows of each tensor, shard): the local rows first, then one source at a time, fetched."""
        yield tensors, plan.shards.local
        for to, source, shard in plan.remote():
            yield tuple(plan.fetch(to, source, t, what) for t in tensors), shard

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        plan = ctx.plan
        z, el, er, largest, den, out = ctx.saved_tensors
        grad_num = grad / den.unsqueeze(-1)
        grad_den = (grad * out).sum(-1).neg_().div_(den)
        grad_z, grad_el, grad_er = torch.zeros_like(z), torch.zeros_like(el), torch.zeros_like(er)
        common = (er, largest, grad_num, grad_den, grad_er)
        if plan.mode == "vanilla":
            halo, kept = ctx.halo, ctx.kept
            ctx.halo = ctx.kept = None
            local = plan.shards.local
            _edge_gradients(z, el, local.src, local.dst, *common, grad_z, grad_el, kept)
            for to, source, shard in plan.remote():
                z_rows, el_rows = halo.pop(source)
                grad_z_rows, grad_el_rows = torch.zeros_like(z_rows), torch.zeros_like(el_rows)
                _edge_gradients(z_rows, el_rows, shard.src, shard.dst, *common, grad_z_rows, grad_el_rows, kept)
                del z_rows, el_rows
                plan.send_home(to, source, grad_z_rows, grad_z)
                plan.send_home(to, source, grad_el_rows, grad_el)
                del grad_z_rows, grad_el_rows
            return grad_z, grad_el, grad_er, None
        for src, dst in plan.edge_chunks(plan.shards.local):
            _edge_gradients(z, el, src, dst, *common, grad_z, grad_el)
        for to, source, shard in plan.remote():
            z_rows, el_rows = plan.fetch(to, source, z, "refetch"), plan.fetch(to, source, el, "refetch")
            grad_z_rows, grad_el_rows = torch.zeros_like(z_rows), torch.zeros_like(el_rows)
            for src, dst in plan.edge_chunks(shard):
                _edge_gradients(z_rows, el_rows, src, dst, *common, grad_z_rows, grad_el_rows)
            del z_rows, el_rows
            plan.send_home(to, source, grad_z_rows, grad_z)
            plan.send_home(to, source, grad_el_rows, grad_el)
            del grad_z_rows, grad_el_rows
        return grad_z, grad_el, grad_er, None


def _edge_gradients(z_rows, el_rows, src, dst, er, largest, grad_num, grad_den, grad_er, grad_z_rows, grad_el_rows,
                    kept=None) -> None:
    """Add one block of edges' share of the gradients into ``grad_z_rows``, ``grad_el_rows`` and ``grad_er``.

    ``kept``: a list whose first entry is the block's (logits, weights, messages) from the forward (vanilla),
    taken off it here; else they are recomputed (SAR)."""
    if kept is None:
        pre = _logits(el_rows, er, src, dst)
        weights = _weights(pre, largest, dst)
        messages = None
    else:
        pre, weights, messages = kept.pop(0)
    grad_weights = grad_den.index_select(0, dst)
    for head in range(weights.shape[1]):  # one head at a time: E x C blocks, as in the forward
        grad_messages = grad_num[:, head].index_select(0, dst)
        head_messages = z_rows[:, head].index_select(0, src) if messages is None else messages[:, head]
        grad_weights[:, head] += (grad_messages.unsqueeze(-2) @ head_messages.unsqueeze(-1)).view(-1)
        del head_messages
        grad_messages *= weights[:, head:head + 1]
        grad_z_rows[:, head].index_add_(0, src, grad_messages)
        del grad_messages
    del messages
    grad_weights *= weights
    del weights
    grad_pre = torch.ops.aten.leaky_relu_backward(grad_weights, pre, NEGATIVE_SLOPE, False)
    del grad_weights, pre
    grad_el_rows.index_add_(0, src, grad_pre)
    grad_er.index_add_(0, dst, grad_pre)
