"""The Distributed page's real run, as a :class:`~.job.Job`: workers started on this machine from a thread of the
server (a lane's worker process is a daemon, which cannot start processes of its own), with its progress and a
Cancel that stops the workers by their process ids. Runs are kept by what they ran (the last few), shared by every
session of the server."""

from __future__ import annotations

import threading
from typing import Any

from remat_core.frontends.gnn import GnnGraph, GnnModel, Partition

from .job import Job, JobState

KEPT_RUNS = 6
RUN_TIMEOUT = 900.0
"""Seconds the workers of one mode may take on the page (the command line takes ``--timeout``)."""

_runs: dict[tuple, Job] = {}
_lock = threading.Lock()


def find_run(key: tuple) -> Job | None:
    """The run kept under ``key``, if any."""
    return _runs.get(key)


def start_run(key: tuple, graph: GnnGraph, partition: Partition, model: GnnModel,
              modes: dict[str, tuple[str, int | None]]) -> Job:
    """Run the real workers for each ``label -> (mode, chunk)`` in a thread; a run under ``key`` that is going or
    finished is not started again (one that failed or was cancelled is). Its result: label -> the run."""
    with _lock:
        kept = _runs.get(key)
        if kept is not None and (not kept.final or kept.done):
            return kept
        job = Job(key, _run, (graph, partition, model, modes), label="the real workers", total=len(modes))
        _runs[key] = job
        while len(_runs) > KEPT_RUNS:
            oldest = next((k for k, j in _runs.items() if j.final), None)
            if oldest is None:
                break
            _runs.pop(oldest)
    threading.Thread(target=_run, args=(job, graph, partition, model, modes), daemon=True,
                     name="distributed-run").start()
    return job


def cancel_run(job: Job) -> None:
    """Ask the run to stop: its workers are stopped by their process ids within a poll."""
    job.cancel_requested = True


def _run(job: Job, graph: GnnGraph, partition: Partition, model: GnnModel, modes: dict) -> None:
    from remat_core.run.distributed import run_distributed

    job.mark_running()
    runs: dict[str, Any] = {}
    try:
        for done, (label, (mode, chunk)) in enumerate(modes.items()):
            def progress(text: str, label: str = label, done: int = done) -> None:
                job.report_step(done, len(modes), f"{label}: {text}")

            progress("starting")
            runs[label] = run_distributed(graph, partition, model, mode, chunk=chunk, timeout=RUN_TIMEOUT,
                                          progress=progress, should_stop=lambda: job.cancel_requested,
                                          measure_reference=False)
        job.end(JobState.DONE, runs)
    except Exception as e:  # noqa: BLE001 - shown on the page with its message; nothing else to do in a thread
        job.end(JobState.CANCELLED if job.cancel_requested else JobState.FAILED, error=e)


def run_summary(job: Job) -> dict[str, Any]:
    """Per label: measured peaks per worker, the gradient check, the step time."""
    return {label: {"peaks": [w["peak"] for w in run.workers], "gradients_match": run.gradients_match,
                    "gradient_error": run.gradient_error, "seconds": max(w["seconds"] for w in run.workers),
                    "received": [w["traffic"]["received"] for w in run.workers]}
            for label, run in job.outcome().items()}
