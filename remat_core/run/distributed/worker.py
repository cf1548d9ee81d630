"""One worker of a distributed full-batch GNN step: its share of the graph, the model's layers across workers, the
measured step.

Every worker builds the same model from the same weights (the single-process zoo model's), runs the layers on its
own rows with the message passing of :mod:`.layers`, and adds its nodes' share of the mean loss; the parameters'
gradients, summed across workers (``all_reduce``), are the single-process step's. The step's peak is the one
meter's (:func:`remat_core.run.measure.peak_of`): the bytes the step allocates above what the worker held before
it (its features, shards and weights are resident, reported apart).
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from ...frontends.gnn import GnnGraph, GnnModel, Partition
from ...frontends.zoo.gnn import GAT, GCN, GraphSAGE
from ..measure import peak_of
from .layers import Attention, LayerPlan, WeightedSum
from .ring import Ring
from .shards import WorkerShards, worker_shards

LEARNING_RATE = 0.05
"""Plain SGD's step between training steps (the first step is the one compared and measured)."""


def build_module(spec: GnnModel, edges: torch.Tensor, nodes: int, seed: int = 0) -> nn.Module:
    """The zoo's module for ``spec`` on ``edges`` (the whole graph for a single-process step), with the weights
    ``seed`` draws."""
    torch.manual_seed(seed)
    if spec.name == "graphsage":
        return GraphSAGE(spec.features, spec.width, spec.classes, spec.layers, edges, nodes)
    if spec.name == "gcn":
        return GCN(spec.features, spec.width, spec.classes, spec.layers, edges, nodes)
    return GAT(spec.features, spec.width, spec.classes, spec.layers, edges, spec.heads)


@dataclass
class WorkerJob:
    """What every worker is sent: the graph's arrays, the partition, the model and its weights, the run's settings."""

    graph: GnnGraph
    owner: np.ndarray
    method: str
    model: GnnModel
    weights: dict[str, np.ndarray]
    mode: str
    steps: int = 1
    chunk: int | None = None
    timeout: float = 120.0


def worker_forward(model: nn.Module, spec: GnnModel, shards: WorkerShards, ring: Ring, mode: str,
                   chunk: int | None = None) -> torch.Tensor:
    """This worker's share of the loss: the sum of its nodes' cross-entropies over all the graph's nodes."""
    x = shards.features
    last = spec.layers - 1
    for k in range(spec.layers):
        plan = LayerPlan(shards, ring, k, mode, chunk)
        if spec.name == "graphsage":
            x = model.own[k](x) + model.neighbours[k](WeightedSum.apply(x, plan))
            x = F.relu(x) if k < last else x
        elif spec.name == "gcn":
            x = WeightedSum.apply(model.linears[k](x), plan)
            x = F.relu(x) if k < last else x
        else:
            heads, channels = model.shapes[k]
            z = model.linears[k](x).view(-1, heads, channels)
            el = (z * model.attend_src[k]).sum(-1)
            er = (z * model.attend_dst[k]).sum(-1)
            x = Attention.apply(z, el, er, plan)
            x = F.elu(x.reshape(x.shape[0], heads * channels)) if k < last else x.mean(1)
    return F.cross_entropy(x, shards.labels, reduction="sum") / shards.total_nodes


def run_worker(rank: int, workers: int, init_method: str, job: WorkerJob, report=lambda text: None) -> dict:
    """Join the group, run the job's steps and return this worker's figures (plain Python and numpy: the result
    crosses a process)."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=workers,
                            timeout=timedelta(seconds=job.timeout))
    try:
        return _steps(rank, workers, job, report)
    finally:
        dist.destroy_process_group()


def _steps(rank: int, workers: int, job: WorkerJob, report) -> dict:
    spec = job.model
    shards = worker_shards(Partition(job.graph, job.owner, job.method), rank, spec.aggregation)
    model = build_module(spec, torch.zeros((2, 0), dtype=torch.int64), len(shards.nodes))
    model.load_state_dict({name: torch.as_tensor(value) for name, value in job.weights.items()}, strict=False)
    ring = Ring(rank, workers)

    def step() -> torch.Tensor:
        loss = worker_forward(model, spec, shards, ring, job.mode, job.chunk)
        loss.backward()
        return loss.detach()

    report(f"worker {rank}: warm-up step")
    step()
    model.zero_grad(set_to_none=True)
    ring.reset()
    dist.barrier()
    report(f"worker {rank}: measured step")
    holder: dict[str, torch.Tensor] = {}
    peak, how = peak_of(lambda: holder.setdefault("loss", step()), torch.device("cpu"))
    traffic = ring.totals()
    losses = [_global_loss(holder.pop("loss"))]
    gradients = _summed_gradients(model)
    model.zero_grad(set_to_none=True)
    report(f"worker {rank}: the step again in float64, for the gradient check")
    exact = copy.deepcopy(model).double()
    with warnings.catch_warnings():  # CSR "beta state" warnings
        warnings.simplefilter("ignore", UserWarning)
        worker_forward(exact, spec, shards.to_dtype(torch.float64), ring, job.mode, job.chunk).backward()
    exact_gradients = _summed_gradients(exact)
    del exact
    dist.barrier()
    started = time.perf_counter()
    step()
    seconds = time.perf_counter() - started
    model.zero_grad(set_to_none=True)
    with torch.no_grad():  # train: the measured step's update, then the further steps
        for name, p in model.named_parameters():
            p -= LEARNING_RATE * torch.as_tensor(gradients[name])
    for number in range(2, job.steps + 1):
        report(f"worker {rank}: step {number} of {job.steps}")
        loss = worker_forward(model, spec, shards, ring, job.mode, job.chunk)
        loss.backward()
        losses.append(_global_loss(loss.detach()))
        for p in model.parameters():
            dist.all_reduce(p.grad)
        with torch.no_grad():
            for p in model.parameters():
                p -= LEARNING_RATE * p.grad
        model.zero_grad(set_to_none=True)
    return {"rank": rank, "peak": int(peak), "meter": how, "resident": shards.resident_bytes(),
            "weights": sum(p.numel() * p.element_size() for p in model.parameters()), "seconds": seconds,
            "nodes": int(len(shards.nodes)), "edges_in": sum(s.edges for s in shards.shards.values()),
            "halo": sum(s.size for q, s in shards.shards.items() if q != rank), "traffic": traffic,
            "losses": losses, "gradients": gradients if rank == 0 else None,
            "float64_gradients": exact_gradients if rank == 0 else None}


def _global_loss(loss: torch.Tensor) -> float:
    total = loss.clone()
    dist.all_reduce(total)
    return float(total)


def _summed_gradients(model: nn.Module) -> dict[str, np.ndarray]:
    summed = {}
    for name, p in model.named_parameters():
        grad = p.grad if p.grad is not None else torch.zeros_like(p)
        dist.all_reduce(grad)
        summed[name] = grad.numpy().copy()
    return summed
