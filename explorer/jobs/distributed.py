"""The Distributed page's real run: workers started on this machine from a thread of the server (the lanes'
worker processes are daemons, which cannot start processes of their own), with its progress and a Cancel that stops
the workers by their process ids. Runs are kept by what they ran (the last few), shared by every session."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from remat_core.frontends.gnn import GnnGraph, GnnModel, Partition

KEPT_RUNS = 6
RUN_TIMEOUT = 900.0
"""Seconds the workers of one mode may take on the page (the command line takes ``--timeout``)."""


@dataclass
class DistributedJob:
    """One run of the real workers: vanilla, then SAR (and SAR with the chunk the page shows, for GAT)."""

    key: tuple
    started: float = field(default_factory=time.monotonic)
    state: str = "running"
    current: str = "starting"
    done_modes: int = 0
    total_modes: int = 1
    runs: dict = field(default_factory=dict)
    error: str | None = None
    cancel_requested: bool = False
    ended: float | None = None

    @property
    def final(self) -> bool:
        return self.state != "running"

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def cancel(self) -> None:
        self.cancel_requested = True


@st.cache_resource(show_spinner=False)
def _runs() -> dict[tuple, DistributedJob]:
    return {}


def find_run(key: tuple) -> DistributedJob | None:
    return _runs().get(key)


def start_run(key: tuple, graph: GnnGraph, partition: Partition, model: GnnModel,
              modes: dict[str, tuple[str, int | None]]) -> DistributedJob:
    """Run the real workers for each ``label -> (mode, chunk)`` in a thread; a run under ``key`` that is going or
    finished is not started again (one that failed or was cancelled is)."""
    runs = _runs()
    kept = runs.get(key)
    if kept is not None and (not kept.final or kept.state == "done"):
        return kept
    job = DistributedJob(key, total_modes=len(modes))
    runs[key] = job
    while len(runs) > KEPT_RUNS:
        oldest = next(k for k, j in runs.items() if j.final)
        runs.pop(oldest)
    threading.Thread(target=_run, args=(job, graph, partition, model, modes), daemon=True,
                     name="distributed-run").start()
    return job


def _run(job: DistributedJob, graph: GnnGraph, partition: Partition, model: GnnModel, modes: dict) -> None:
    from remat_core.run.distributed import run_distributed

    try:
        for label, (mode, chunk) in modes.items():
            def progress(text: str, label: str = label) -> None:
                job.current = f"{label}: {text}"

            run = run_distributed(graph, partition, model, mode, chunk=chunk, timeout=RUN_TIMEOUT,
                                  progress=progress, should_stop=lambda: job.cancel_requested,
                                  measure_reference=False)
            job.runs[label] = run
            job.done_modes += 1
        job.state = "done"
    except Exception as e:  # noqa: BLE001 - shown on the page with its message; nothing else to do in a thread
        job.error = str(e)
        job.state = "cancelled" if job.cancel_requested else "failed"
    finally:
        job.ended = time.monotonic()


def run_summary(job: DistributedJob) -> dict[str, Any]:
    """Per label: measured peaks per worker, the gradient check, the step time."""
    return {label: {"peaks": [w["peak"] for w in run.workers], "gradients_match": run.gradients_match,
                    "gradient_error": run.gradient_error, "seconds": max(w["seconds"] for w in run.workers),
                    "received": [w["traffic"]["received"] for w in run.workers]}
            for label, run in job.runs.items()}
