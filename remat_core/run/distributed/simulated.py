"""Each worker's step under vanilla and SAR, simulated from the partition's sizes: what a user sees before renting
a cluster. The one simulator measures every recorded step (:func:`remat_core.frontends.gnn.worker_step`); nothing
here runs PyTorch."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ...frontends.gnn import (SENT_OPS, TRAFFIC_OPS, GnnModel, Partition, WorkerSizes, WorkerStep, worker_sizes,
                              worker_step)
from ...schedule import simulate

CHUNK_CANDIDATES = (1 << 20, 1 << 18, 1 << 16, 1 << 15, 1 << 14, 1 << 13, 1 << 12)
"""Edge chunks tried when SAR's attention may process a shard's edges in pieces."""


@dataclass(frozen=True)
class SimulatedWorker:
    """One worker's simulated step.

    Attributes
    ----------
    peak : int
        The most bytes the step holds above what the worker holds before it (its features), as the meter counts.
    cost : float
        FLOPs of the step, recomputation included.
    received, sent : dict
        Bytes, by (layer, what): ``forward`` fetches, ``refetch`` in the backward, ``backward`` gradients.
    memory : tuple of int
        Bytes held after each op (the timeline), features excluded.
    """

    rank: int
    mode: str
    chunk: int | None
    peak: int
    cost: float
    received: dict
    sent: dict
    memory: tuple[int, ...]
    step: WorkerStep

    def traffic(self) -> dict:
        return {"sent": sum(self.sent.values()), "received": sum(self.received.values())}


def simulate_workers(partition: Partition, model: GnnModel, mode: str, chunk: int | None = None
                     ) -> list[SimulatedWorker]:
    """Every worker's step under ``mode`` (``chunk``: SAR's attention processes at most this many edges at once)."""
    return _simulated(worker_sizes(partition, model.aggregation), model, mode, chunk)


def _simulated(every_worker: list[WorkerSizes], model: GnnModel, mode: str, chunk: int | None
               ) -> list[SimulatedWorker]:
    workers = []
    for sizes in every_worker:
        step = worker_step(sizes, model, mode, chunk)
        result = simulate(step.graph, step.ops)
        resident = result.start_memory
        received: dict = defaultdict(int)
        sent: dict = defaultdict(int)
        for node in step.graph.nodes:
            layer = int(node.module.removeprefix("layer")) if node.module else -1
            if node.op in TRAFFIC_OPS:
                received[(layer, TRAFFIC_OPS[node.op])] += node.mem
            elif node.op in SENT_OPS:
                what = SENT_OPS[node.op] if node.op != "gnn.send" else (
                    "forward" if node.kind == "forward" else "refetch")
                sent[(layer, what)] += node.mem
        workers.append(SimulatedWorker(sizes.rank, mode, chunk, result.peak - resident, result.cost, dict(received),
                                       dict(sent), tuple(m - resident for m in result.memory), step))
    return workers


def best_chunk(partition: Partition, model: GnnModel) -> tuple[int | None, list[SimulatedWorker]]:
    """SAR with the attention's edges in chunks: the chunk (from :data:`CHUNK_CANDIDATES`, smaller than the largest
    shard) whose largest worker peak is least, the largest such chunk on a tie (fewer pieces); None for models
    without per-edge tensors (their SAR has none to chunk)."""
    every_worker = worker_sizes(partition, model.aggregation)  # the sizes once, for every candidate
    best = (None, _simulated(every_worker, model, "sar", None))
    if model.aggregation != "attention":
        return best
    largest_shard = max(max(s.edges.values()) for s in every_worker)
    for chunk in CHUNK_CANDIDATES:
        if chunk >= largest_shard:
            continue
        workers = _simulated(every_worker, model, "sar", chunk)
        if max(w.peak for w in workers) < max(w.peak for w in best[1]):
            best = (chunk, workers)
    return best
