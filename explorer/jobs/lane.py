"""A lane: one worker process, the queue of jobs it runs one at a time, and the results kept by key.

Why a process of its own and not a ``multiprocessing.Pool``: a job must stop within 2 s of Cancel,
whatever it is doing, and a MILP inside HiGHS or a CP-SAT search checks no flag of ours. A lane
owns exactly one worker process and runs one job in it at a time, so cancelling the running job is
killing that process (SIGKILL: nothing to wait for) and starting a fresh one, with no other job lost.
A queued job is simply taken out of the queue. A pool cannot kill one task without the others.

The worker is the one worker layer's (:class:`remat_core.batch.WorkerProcess`: it gets each graph
once, runs one job at a time, reports progress and beats; ``batch``'s process pool runs on the
same). A dispatcher thread per lane feeds it, follows the running job's progress and heartbeat, and enforces Cancel and the job's time limit every
:data:`POLL_SECONDS`. Jobs are kept by key: submitting a key already known returns its job, running
or ended, so every page and session shares results. Within a *group* (one model and solver at one
setting) a newer submit supersedes the queued ones: only the latest slider position is computed.
Finished jobs are kept up to a count and a total weight (a weight is what the result costs to
keep, e.g. a schedule's ops), the least recently asked for dropped first.

No Streamlit here: :mod:`explorer.jobs.lanes` holds the server's lanes.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict, deque
from typing import Any, Callable

from remat_core.batch import WorkerProcess, WorkerStopped
from remat_core.batch.worker import BEAT_SECONDS, STOP_SECONDS

from .job import Job, JobState, PortableGraph

LOG = logging.getLogger(__name__)

KEPT_JOBS = 256
"""Finished jobs a lane keeps at most."""
POLL_SECONDS = 0.05
"""How often the dispatcher looks at Cancel and the time limit while the worker is silent."""


class Lane:
    """One worker process and its queue (see the module notes).

    Parameters
    ----------
    name : str
    nice : int
        Niceness added to the worker (background lanes yield the CPU to interactive ones).
    initializer : callable, optional
        Run once in each worker process before its first job (a picklable, module-level function).
    kept_jobs : int
    kept_weight : int, optional
        The most total weight of finished jobs kept (None: no bound but ``kept_jobs``).
    weigh : callable, optional
        ``weigh(result) -> int``: the weight of a finished job's result (default 1).
    beat_seconds : float
        The worker's heartbeat interval.
    warm : bool
        Start the worker now, so that the first job does not wait for it.
    """

    def __init__(self, name: str, *, nice: int = 0, initializer: Callable[[], None] | None = None,
                 kept_jobs: int = KEPT_JOBS, kept_weight: int | None = None,
                 weigh: Callable[[Any], int] | None = None, beat_seconds: float = BEAT_SECONDS,
                 warm: bool = False) -> None:
        self.name = name
        self._nice = nice
        self._initializer = initializer
        self._kept_jobs = kept_jobs
        self._kept_weight = kept_weight
        self._weigh = weigh or (lambda result: 1)
        self._beat_seconds = beat_seconds
        self._jobs: OrderedDict[tuple, Job] = OrderedDict()
        self._pending: deque[Job] = deque()
        self._lock = threading.Condition()
        self._stopping = False
        self._worker: WorkerProcess | None = None
        self.workers_started = 0
        self._graphs_sent_by_gone_workers = 0
        self._thread = threading.Thread(target=self._dispatch, args=(warm,), daemon=True, name=f"lane-{name}")
        self._thread.start()
        atexit.register(self.stop)

    def __repr__(self) -> str:
        return f"Lane({self.name!r}, {len(self._pending)} queued, {len(self._jobs)} kept)"

    # -- used by pages ----------------------------------------------------------------------------

    def submit(self, key: tuple, function: Callable[..., Any], *args: Any, graph: PortableGraph | None = None,
               label: str = "", total: int = 1, time_limit: float | None = None,
               step_allowance: float | None = None, group: tuple | None = None,
               on_done: Callable[[Any], None] | None = None) -> Job:
        """The job kept under ``key``; a new one (queued after the others) if there is none.

        A new job of a ``group`` takes the place of the group's queued jobs (they end SUPERSEDED
        and are forgotten, so asking for them again queues them anew); a running one is left alone.
        """
        with self._lock:
            known = self._jobs.get(key)
            if known is not None:
                self._jobs.move_to_end(key)
                return known
            if group is not None:
                self._supersede(group)
            job = Job(key, function, args, graph=graph, label=label, total=total, time_limit=time_limit,
                      step_allowance=step_allowance, group=group, on_done=on_done)
            self._enqueue(job)
            return job

    def find(self, key: tuple) -> Job | None:
        """The job kept under ``key`` (queued, running or ended), or None."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                self._jobs.move_to_end(key)
            return job

    def cancel(self, job: Job) -> None:
        """Stop ``job``: out of the queue if queued; if running, ended now and its worker killed by the
        dispatcher within :data:`POLL_SECONDS` (a fresh one started), whatever it is doing.

        It stays kept under its key as CANCELLED, so that a page polling for it does not start it
        again: :meth:`retry` does that.
        """
        with self._lock:
            if job.state is JobState.QUEUED:
                self._pending.remove(job)
            elif job.state is JobState.RUNNING:
                job.cancel_requested = True
            job.end(JobState.CANCELLED)

    def retry(self, job: Job) -> Job:
        """Start ``job``'s work again at the head of the queue (cancelling it first if it still runs)."""
        self.cancel(job)
        with self._lock:
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]
            fresh = job.again()
            self._enqueue(fresh, first=True)
            return fresh

    def forget(self, key: tuple) -> None:
        """Drop what is kept under ``key`` (cancelling it if it has not ended)."""
        job = self.find(key)
        if job is not None:
            self.cancel(job)
        with self._lock:
            if self._jobs.get(key) is job:
                self._jobs.pop(key, None)

    def jobs(self) -> list[Job]:
        """Every job kept, oldest first."""
        with self._lock:
            return list(self._jobs.values())

    def stop(self) -> None:
        """Cancel every job, stop the worker and the dispatcher (the lane takes no more work)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            for job in list(self._pending):
                job.end(JobState.CANCELLED)
            self._pending.clear()
            for job in self._jobs.values():
                if job.state is JobState.RUNNING:
                    job.cancel_requested = True
            self._jobs.clear()
            self._lock.notify_all()
        self._thread.join(STOP_SECONDS)
        self._kill_worker()

    @property
    def worker_pid(self) -> int | None:
        """The worker process's id (None while none runs)."""
        worker = self._worker
        return worker.pid if worker is not None else None

    @property
    def graphs_sent(self) -> int:
        """Graph documents sent to this lane's workers so far."""
        worker = self._worker
        return self._graphs_sent_by_gone_workers + (worker.graphs_sent if worker is not None else 0)

    # -- inside (lock held) -------------------------------------------------------------------------

    def _enqueue(self, job: Job, first: bool = False) -> None:
        job.lane = self
        if self._stopping:
            job.end(JobState.CANCELLED)
            return
        self._jobs[job.key] = job
        if first:
            self._pending.appendleft(job)
        else:
            self._pending.append(job)
        self._evict()
        self._lock.notify_all()

    def _supersede(self, group: tuple) -> None:
        for queued in [j for j in self._pending if j.group == group]:
            self._pending.remove(queued)
            queued.end(JobState.SUPERSEDED)
            if self._jobs.get(queued.key) is queued:
                del self._jobs[queued.key]

    def _evict(self) -> None:
        """Drop the least recently asked for finished jobs while over the count or the weight."""
        finished = [key for key, job in self._jobs.items() if job.final]
        weight = sum(self._jobs[key].weight for key in finished)
        while finished and (len(self._jobs) > self._kept_jobs
                            or (self._kept_weight is not None and weight > self._kept_weight)):
            key = finished.pop(0)
            weight -= self._jobs.pop(key).weight

    # -- the dispatcher thread ----------------------------------------------------------------------

    def _dispatch(self, warm: bool) -> None:
        if warm:
            try:
                self._start_worker()
            except Exception:  # noqa: BLE001 - the first job tries again, and fails with the reason
                LOG.exception("the %s lane could not start its worker", self.name)
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                job = self._pending.popleft()
                job.mark_running()
            try:
                self._run(job)
            except (WorkerStopped, EOFError, OSError) as e:
                job.end(JobState.FAILED, error=WorkerStopped(f"the {self.name} worker stopped while running "
                                                             f"{job.label or 'a job'} ({e}); Retry starts it again"))
                self._replace_worker()
            except Exception as e:  # noqa: BLE001 - the lane goes on with its next job whatever broke here
                job.end(JobState.FAILED, error=e)
                self._kill_worker()
            if job.state is JobState.FAILED:
                LOG.warning("%s failed in the %s lane", job.label or job.key, self.name, exc_info=job.error)
            with self._lock:
                if job.state is JobState.DONE:
                    job.weight = self._weigh(job.result)
                self._evict()

    def _run(self, job: Job) -> None:
        worker = self._worker if self._worker is not None and self._worker.alive else self._start_worker()
        worker.run(job.id, job.graph[0] if job.graph else None, job.function, job.args, job.step_allowance)
        document = (lambda key: job.graph[1])
        while True:
            if job.cancel_requested or self._stopping:
                self._stop(job, JobState.CANCELLED)
                return
            if job.time_limit is not None and job.elapsed() > job.time_limit:
                self._stop(job, JobState.TIMED_OUT)
                return
            message = worker.receive(POLL_SECONDS, document)
            if message is None:
                continue
            kind, job_id, *rest = message
            if job_id != job.id:
                continue
            if kind == "step":
                job.report_step(*rest)
            elif kind == "partial":
                job.report_partial(rest[0])
            elif kind == "beat":
                job.report_beat()
            elif kind == "done":
                job.end(JobState.DONE, result=rest[0])
                return
            elif kind == "error":
                job.end(JobState.FAILED, error=rest[0])
                return

    def _start_worker(self) -> WorkerProcess:
        self._worker = WorkerProcess(self.name, nice=self._nice, initializer=self._initializer,
                                     beat_seconds=self._beat_seconds)
        self.workers_started += 1
        return self._worker

    def _stop(self, job: Job, state: JobState) -> None:
        """End the running ``job`` by killing its worker (said at once), then start a fresh worker."""
        self._kill_worker()
        job.end(state)
        self._replace_worker()

    def _replace_worker(self) -> None:
        """Kill the worker and start a fresh one at once (it imports while nothing waits for it)."""
        self._kill_worker()
        if not self._stopping:
            self._start_worker()

    def _kill_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            self._graphs_sent_by_gone_workers += worker.graphs_sent
            worker.kill()
