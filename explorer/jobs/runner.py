"""Worker processes that run jobs kept by key, shared by every session of this server.

One :class:`BackgroundRunner` per kind of work, held by ``st.cache_resource``: a worker process, not a
thread, so that a solver computing for seconds neither freezes the app nor slows its thread (a
worker thread would share the interpreter lock with it)."""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from collections import OrderedDict
from multiprocessing.pool import AsyncResult
from typing import Any, Callable

import streamlit as st

from .worker import share_cores

KEPT_JOBS = 512
"""Finished jobs a runner keeps (the least recently asked for dropped first)."""
LONGEST_WAIT_SECONDS = 900.0
"""``job_result(wait=None)`` gives up after this long (a worker that died leaves its job unanswered)."""


class BackgroundRunner:
    """Jobs run in one worker process and kept by key, shared by every session of this server.

    Submitting a key already known returns the job that is running or done, so a second visitor,
    a page switch or a slider coming back finds it ready. At most :data:`KEPT_JOBS` finished jobs
    are kept, the least recently asked for dropped first. The worker is started with ``spawn``
    (the server has threads, which ``fork`` must not copy) and stopped when the server exits.
    """

    def __init__(self, name: str, initializer: Callable[[], None] | None = None) -> None:
        self.name = name
        self._pool = multiprocessing.get_context("spawn").Pool(processes=1, initializer=initializer)
        self._jobs: OrderedDict[tuple, AsyncResult] = OrderedDict()
        self._lock = threading.Lock()
        atexit.register(self._pool.terminate)

    def stop(self) -> None:
        """Stop the worker now, dropping every job (running or kept)."""
        with self._lock:
            self._pool.terminate()
            self._jobs.clear()

    def find(self, key: tuple) -> AsyncResult | None:
        """The job kept under ``key`` (running or done), or None if none was submitted (or it was dropped)."""
        with self._lock:
            return self._jobs.get(key)

    def forget(self, key: tuple) -> None:
        """Drop the job kept under ``key`` (a later submit runs it again)."""
        with self._lock:
            self._jobs.pop(key, None)

    def submit(self, key: tuple, job: Callable[..., Any], *args: Any) -> AsyncResult:
        """The job's handle, starting ``job(*args)`` in the worker unless that key is running or done."""
        with self._lock:
            if key in self._jobs:
                self._jobs.move_to_end(key)
                return self._jobs[key]
            self._jobs[key] = self._pool.apply_async(job, args)
            finished = [k for k, j in self._jobs.items() if j.ready()]
            while len(self._jobs) > KEPT_JOBS and finished:
                del self._jobs[finished.pop(0)]
            return self._jobs[key]


def stop_background_work() -> None:
    """Stop every worker and forget their results; the next request starts fresh workers."""
    for runner in (solve_runner, sweep_runner, exact_sweep_runner, execute_runner):
        runner().stop()
        runner.clear()


def job_result(job: AsyncResult, wait: float | None) -> Any:
    """The job's result, waiting up to ``wait`` seconds (None: up to :data:`LONGEST_WAIT_SECONDS`);
    None if it is not done by then.

    A job's exception is raised here, in the app's process.
    """
    job.wait(LONGEST_WAIT_SECONDS if wait is None else max(wait, 0))
    return job.get() if job.ready() else None


@st.cache_resource
def solve_runner() -> BackgroundRunner:
    """The exact solves of this server process."""
    return BackgroundRunner("solve")


@st.cache_resource
def sweep_runner() -> BackgroundRunner:
    """The Pareto sweeps of the heuristic solvers (their own worker, beside the solves)."""
    return BackgroundRunner("sweep")


@st.cache_resource
def exact_sweep_runner() -> BackgroundRunner:
    """The Pareto sweeps of the exact solvers and the LP bounds (seconds to minutes per point: a worker
    of their own, so that a MILP sweep or an LP never holds up the heuristics' curves)."""
    return BackgroundRunner("exact-sweep")


@st.cache_resource
def execute_runner() -> BackgroundRunner:
    """Schedules run on real tensors (PyTorch in a worker of its own, on half the cores)."""
    return BackgroundRunner("execute", initializer=share_cores)
