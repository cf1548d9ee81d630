"""Start the workers of a distributed GNN step, watch them, and put their figures beside a single-process step.

``processes``: N ``spawn``ed processes on this machine, joined by ``torch.distributed`` on gloo over
127.0.0.1. ``ray``: the same workers as Ray actors, on a local Ray started for the run or on a cluster
(``ray_address``); the first worker's node hosts the group's rendezvous. Either way a worker that raises,
dies or outlives the timeout stops the run: the others are stopped (by process id, or ``ray.kill``) and the
error names the worker.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import queue
import socket
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from ...errors import DistributedError, GraphError
from ...frontends.gnn import WORKER_MODES, GnnGraph, GnnModel, Partition
from .worker import LEARNING_RATE, WorkerJob, build_module, run_worker

BACKENDS = ("processes", "ray")
GRADIENT_TOLERANCE = 1e-5
"""Largest relative difference from the single-process gradients that counts as equal: every parameter's gradient
as one vector, in the 2-norm, both steps in float64. (In float32 the workers' sums run in another order than one
process's: a ReLU input within rounding of zero can take the other side, and a gradient that nearly cancels, such
as GAT's output destination attention vector, keeps few digits; the float32 difference is reported beside.)"""


@dataclass
class DistributedRun:
    """A finished run: each worker's figures and the check against one process on the whole graph.

    Attributes
    ----------
    workers : list of dict
        Per rank: ``peak`` (bytes the measured step allocated), ``resident`` (features and shards held across
        steps), ``weights``, ``seconds`` (an unprofiled step), ``nodes``, ``edges_in``, ``halo`` (remote rows
        needed), ``traffic`` (bytes sent and received, by layer and what they carried).
    gradient_error : float
        The relative difference of the summed gradients from the single-process step's (all parameters as one
        vector, 2-norm), both steps run again in float64.
    float32_gradient_error : float
        The same for the measured float32 step.
    parameter_errors : dict
        Per parameter, in float64: the norm of its gradient's difference over the norm of all the reference
        gradients.
    losses, reference_losses : list of float
        The loss before each step, across workers and in one process.
    """

    mode: str
    model: GnnModel
    partition: dict
    backend: str
    workers: list[dict]
    gradient_error: float
    losses: list[float]
    reference_losses: list[float]
    reference_peak: int | None = None
    parameter_errors: dict = field(default_factory=dict)
    float32_gradient_error: float = 0.0

    @property
    def gradients_match(self) -> bool:
        return self.gradient_error <= GRADIENT_TOLERANCE

    def summary(self) -> dict:
        peaks = [w["peak"] for w in self.workers]
        return {"mode": self.mode, "model": self.model.name, "backend": self.backend,
                "workers": len(self.workers), "max_peak": max(peaks), "mean_peak": sum(peaks) / len(peaks),
                "gradient_error": self.gradient_error, "gradients_match": self.gradients_match,
                "float32_gradient_error": self.float32_gradient_error,
                "step_seconds": max(w["seconds"] for w in self.workers),
                "sent": sum(w["traffic"]["sent"] for w in self.workers), "losses": self.losses,
                "reference_losses": self.reference_losses, "reference_peak": self.reference_peak,
                "partition": self.partition, "parameter_errors": self.parameter_errors,
                "per_worker": [{k: v for k, v in w.items() if not k.endswith("gradients")} for w in self.workers]}


def run_distributed(graph: GnnGraph, partition: Partition, model: GnnModel, mode: str, *, steps: int = 1,
                    chunk: int | None = None, backend: str = "processes", ray_address: str | None = None,
                    port: int | None = None, timeout: float = 300.0, seed: int = 0,
                    progress: Callable[[str], None] = lambda text: None,
                    should_stop: Callable[[], bool] = lambda: False, measure_reference: bool = True) -> DistributedRun:
    """Train ``steps`` full-batch steps of ``model`` on ``graph`` across ``partition.workers`` workers.

    Raises
    ------
    DistributedError
        A port in use, a worker that failed, died or timed out, a run cancelled by ``should_stop``.
    GraphError
        A mode, backend or setting that does not exist.
    """
    if mode not in WORKER_MODES:
        raise GraphError(f"unknown mode {mode!r}; use one of {', '.join(WORKER_MODES)}")
    if backend not in BACKENDS:
        raise GraphError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    if steps < 1:
        raise GraphError(f"steps must be at least 1, got {steps}")
    if chunk is not None and chunk < 1:
        raise GraphError(f"chunk must be at least 1 edge, got {chunk}")
    reference = build_module(model, torch.as_tensor(graph.edges), graph.nodes, seed)
    weights = {name: p.detach().numpy().copy() for name, p in reference.named_parameters()}
    job = WorkerJob(graph, partition.owner, partition.method, model, weights, mode, steps, chunk, timeout)
    progress(f"starting {partition.workers} workers ({backend})")
    if backend == "ray":
        results = _on_ray(job, partition.workers, ray_address, timeout, progress, should_stop)
    else:
        results = _on_processes(job, partition.workers, port, timeout, progress, should_stop)
    progress("single-process step on the whole graph")
    exact = _exact_reference(reference, graph)
    reference_gradients, reference_losses, reference_peak = _reference(reference, graph, steps, measure_reference)
    differences = _differences(results[0]["float64_gradients"], exact)
    return DistributedRun(mode, model, partition.summary(), backend, results,
                          float(np.sqrt(sum(d ** 2 for d in differences.values()))), results[0]["losses"],
                          reference_losses, reference_peak, differences,
                          float(np.sqrt(sum(d ** 2 for d in _differences(results[0]["gradients"],
                                                                         reference_gradients).values()))))


def _differences(gradients: dict, reference: dict) -> dict[str, float]:
    """Per parameter: the norm of the gradient's difference over the norm of all the reference gradients."""
    scale = max(float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in reference.values()))), 1e-30)
    return {name: float(np.linalg.norm(gradients[name].astype(np.float64) - g)) / scale
            for name, g in reference.items()}


def _exact_reference(module, graph: GnnGraph) -> dict[str, np.ndarray]:
    """The single-process step's gradients in float64 (a copy of the module; the original is left as it was)."""
    exact = copy.deepcopy(module).double()
    F.cross_entropy(exact(torch.as_tensor(graph.features, dtype=torch.float64)),
                    torch.as_tensor(graph.labels)).backward()
    return {name: p.grad.numpy().copy() for name, p in exact.named_parameters()}


def _reference(module, graph: GnnGraph, steps: int, measure: bool):
    """One process on the whole graph: the first step's gradients and peak, and the loss before each step."""
    from ..measure import peak_of

    x, y = torch.as_tensor(graph.features), torch.as_tensor(graph.labels)

    def step() -> torch.Tensor:
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        return loss.detach()

    module.zero_grad(set_to_none=True)
    peak = None
    if measure:
        holder: dict = {}
        peak, _ = peak_of(lambda: holder.setdefault("loss", step()), torch.device("cpu"))
        losses = [float(holder["loss"])]
    else:
        losses = [float(step())]
    gradients = {name: p.grad.numpy().copy() for name, p in module.named_parameters()}
    for _ in range(1, steps):
        with torch.no_grad():
            for p in module.parameters():
                p -= LEARNING_RATE * p.grad
        module.zero_grad(set_to_none=True)
        losses.append(float(step()))
    return gradients, losses, peak


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_port(port: int) -> None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise DistributedError(f"port {port} on 127.0.0.1 is in use ({e.strerror}); pick another with --port, "
                                   f"or leave --port out for a free one") from None


def _process_main(rank: int, workers: int, init_method: str, job: WorkerJob, results) -> None:
    """A worker process: run the job, put ("done", rank, figures) or ("error", rank, message) on ``results``."""
    try:
        figures = run_worker(rank, workers, init_method, job, lambda text: results.put(("progress", rank, text)))
        results.put(("done", rank, figures))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which stops the rest
        results.put(("error", rank, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"))
        raise SystemExit(1) from None


def _on_processes(job: WorkerJob, workers: int, port: int | None, timeout: float, progress, should_stop) -> list[dict]:
    if port is None:
        port = free_port()
    else:
        _check_port(port)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_process_main, args=(rank, workers, f"tcp://127.0.0.1:{port}", job, results),
                                 name=f"remat-gnn-worker-{rank}", daemon=True) for rank in range(workers)]
    for process in processes:
        process.start()
    done: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(done) < workers:
            try:
                kind, rank, payload = results.get(timeout=0.25)
            except queue.Empty:
                _check_alive(processes, done, deadline, should_stop)
                continue
            if kind == "progress":
                progress(payload)
            elif kind == "error":
                raise DistributedError(f"worker {rank} (pid {processes[rank].pid}) failed: {payload.strip()}\n"
                                       f"the other workers were stopped")
            else:
                done[rank] = payload
    finally:
        _stop(processes)
    return [done[rank] for rank in range(workers)]


def _check_alive(processes, done: dict, deadline: float, should_stop) -> None:
    for rank, process in enumerate(processes):
        if rank not in done and process.exitcode is not None:
            raise DistributedError(f"worker {rank} (pid {process.pid}) died with exit code {process.exitcode} "
                                   f"before it reported; the other workers were stopped")
    if should_stop():
        raise DistributedError("the run was cancelled; its workers were stopped")
    if time.monotonic() > deadline:
        raise DistributedError("the workers did not finish within the time limit; they were stopped (raise "
                               "--timeout for a bigger graph)")


def _stop(processes) -> None:
    """Stop every worker still running: terminate by pid, then kill what is left."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            os.kill(process.pid, 9)
            process.join(timeout=5)


def _on_ray(job: WorkerJob, workers: int, address: str | None, timeout: float, progress, should_stop) -> list[dict]:
    import ray  # only for --backend ray

    started = not ray.is_initialized()
    if started:
        import remat_core

        if address:
            ray.init(address=address, runtime_env={"py_modules": [str(Path(remat_core.__file__).parent)]},
                     logging_level="ERROR", log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    actors = []
    try:
        actor_class = ray.remote(num_cpus=1)(RayWorker)
        actors = [actor_class.remote() for _ in range(workers)]
        host, port = ray.get(actors[0].rendezvous.remote(), timeout=timeout)
        shipped = ray.put(job)
        init_method = f"tcp://{host}:{port}"
        calls = {actors[rank].run.remote(rank, workers, init_method, shipped): rank for rank in range(workers)}
        done: dict[int, dict] = {}
        deadline = time.monotonic() + timeout
        while len(done) < workers:
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=0.25)
            for ref in ready:
                rank = calls.pop(ref)
                try:
                    done[rank] = ray.get(ref)
                except ray.exceptions.RayError as e:
                    raise DistributedError(f"worker {rank} (Ray actor) failed: {str(e).strip()[:2000]}\nthe other "
                                           f"workers were stopped") from None
                progress(f"worker {rank} finished")
            if should_stop():
                raise DistributedError("the run was cancelled; its workers were stopped")
            if time.monotonic() > deadline:
                raise DistributedError("the workers did not finish within the time limit; they were stopped")
        return [done[rank] for rank in range(workers)]
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()


class RayWorker:
    """A worker as a Ray actor: the rendezvous (this node's address and a free port) and the run."""

    def rendezvous(self) -> tuple[str, int]:
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def run(self, rank: int, workers: int, init_method: str, job: WorkerJob) -> dict:
        return run_worker(rank, workers, init_method, job)

