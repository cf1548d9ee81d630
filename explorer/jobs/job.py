"""One piece of long work and where it stands: queued, running (with its progress and heartbeat), or ended.

A :class:`Job` is what a page holds while work runs in a lane's worker process (see :mod:`.lane`): its
progress (steps done of the total, what it is working on), when it last reported (a progress step or
a heartbeat), and how it ended. It imports no Streamlit; the lane's dispatcher thread writes it, page
threads read it.

A job *stalls* when it reports nothing for :data:`STALL_SECONDS`: its worker died or froze, or a step
runs past the time it was allowed (the worker's heartbeat stops then, see :mod:`.process`). A stalled
job keeps running; the page offers Retry and Cancel.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

LOG = logging.getLogger(__name__)

STALL_SECONDS = 30.0
"""A running job that reports nothing (no step, no heartbeat) for this long is shown as stalled."""

PortableGraph = tuple[str, Mapping[str, Any]]
"""A graph as a job takes it: ``(content hash, remat-graph document)``; the worker rebuilds it once."""


class JobState(enum.Enum):
    """Where a job stands. The last five are final."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"
    SUPERSEDED = "superseded"

    @property
    def final(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)


@dataclass(frozen=True)
class Progress:
    """Steps done of ``total``, and what the job is working on now (``"budget 1.5 MiB"``)."""

    done: int
    total: int
    current: str = ""


_ids = itertools.count(1)


class Job:
    """A unit of work for a lane: ``function(report, graph, *args)`` in a worker process.

    Parameters
    ----------
    key : tuple
        What its result is kept under (a second submit of the key finds this job).
    function : callable
        A module-level function (it travels to the worker by name). It gets a reporter (see
        :class:`remat_core.batch.Reporter`), the graph rebuilt from ``graph`` (None without one),
        then ``args``.
    args : tuple
    graph : PortableGraph, optional
    label : str
        What the job does, for people (``"Pareto sweep of dtr"``).
    total : int
        Its steps (budgets of a sweep; 1 for a solve).
    time_limit : float, optional
        Seconds it may run in all; past them the worker is stopped and the job ends TIMED_OUT.
    step_allowance : float, optional
        Seconds one step may take while the worker's heartbeat vouches for it (None: no limit).
    group : tuple, optional
        Jobs of one group supersede each other while queued: only the latest is run.
    on_done : callable, optional
        Called with the result once the job is DONE (in the lane's thread).
    """

    def __init__(self, key: tuple, function: Callable[..., Any], args: tuple = (), *,
                 graph: PortableGraph | None = None, label: str = "", total: int = 1,
                 time_limit: float | None = None, step_allowance: float | None = None, group: tuple | None = None,
                 on_done: Callable[[Any], None] | None = None) -> None:
        self.id = next(_ids)
        self.key = key
        self.function = function
        self.args = args
        self.graph = graph
        self.label = label
        self.time_limit = time_limit
        self.step_allowance = step_allowance
        self.group = group
        self.on_done = on_done
        self.state = JobState.QUEUED
        self.progress = Progress(0, total)
        self.partial: list[Any] = []
        self.submitted_at = time.monotonic()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.last_report_at: float | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancel_requested = False
        self.lane: Any = None
        """The :class:`explorer.jobs.lane.Lane` it was submitted to (pages cancel and retry through it)."""
        self.weight = 0
        """What keeping its result costs the lane (see :class:`explorer.jobs.lane.Lane`); set when it ends."""
        self._changed = threading.Condition()
        self._ended = threading.Event()

    def again(self) -> "Job":
        """A fresh job doing the same work (Retry)."""
        return Job(self.key, self.function, self.args, graph=self.graph, label=self.label, total=self.progress.total,
                   time_limit=self.time_limit, step_allowance=self.step_allowance, group=self.group,
                   on_done=self.on_done)

    def __repr__(self) -> str:
        return f"Job({self.id}, {self.label or self.key!r}, {self.state.value}, {self.progress})"

    # -- read by pages --------------------------------------------------------------------------

    @property
    def final(self) -> bool:
        return self.state.final

    @property
    def done(self) -> bool:
        """Whether it finished with a result."""
        return self.state is JobState.DONE

    def wait(self, timeout: float | None) -> bool:
        """Wait until the job has ended (at most ``timeout`` seconds); whether it has."""
        return self._ended.wait(timeout)

    def wait_for_report(self, after: float | None, timeout: float) -> bool:
        """Wait until the job reports after monotonic time ``after``, or ends; whether it did (tests use it)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.final or (self.last_report_at or 0) > (after or 0), timeout)

    def elapsed(self, now: float | None = None) -> float:
        """Seconds it has run (0 while queued; up to its end once ended)."""
        if self.started_at is None:
            return 0.0
        return (self.ended_at or (now if now is not None else time.monotonic())) - self.started_at

    def age(self, now: float | None = None) -> float:
        """Seconds since it was submitted (queued time included)."""
        return (self.ended_at or (now if now is not None else time.monotonic())) - self.submitted_at

    def silent_for(self, now: float | None = None) -> float:
        """Seconds since it last reported (0 unless running)."""
        if self.state is not JobState.RUNNING or self.last_report_at is None:
            return 0.0
        return (now if now is not None else time.monotonic()) - self.last_report_at

    def stalled(self, now: float | None = None) -> bool:
        """Running, and silent for :data:`STALL_SECONDS` or more."""
        return self.state is JobState.RUNNING and self.silent_for(now) >= STALL_SECONDS

    def outcome(self) -> Any:
        """The result of a DONE job; a FAILED job's exception is raised here, in the app's process."""
        if self.state is JobState.FAILED and self.error is not None:
            raise self.error
        if self.state is not JobState.DONE:
            raise RuntimeError(f"{self!r} has no result: it is {self.state.value}")
        return self.result

    def describe_end(self) -> str:
        """Why a job that ended without a result has none, for people."""
        ran = f"after {self.elapsed():.1f} s"
        done = f" ({self.progress.done} of {self.progress.total} steps done)" if self.progress.total > 1 else ""
        if self.state is JobState.CANCELLED:
            return f"cancelled {ran}{done}"
        if self.state is JobState.TIMED_OUT:
            return f"stopped at its time limit of {self.time_limit:g} s{done}"
        if self.state is JobState.SUPERSEDED:
            return "replaced by a newer request before it started"
        if self.state is JobState.FAILED:
            return f"failed {ran}: {self.error}"
        return self.state.value

    # -- written by the lane's dispatcher thread ------------------------------------------------

    def _update(self, **fields: Any) -> None:
        with self._changed:
            for name, value in fields.items():
                setattr(self, name, value)
            self._changed.notify_all()

    def mark_running(self) -> None:
        now = time.monotonic()
        self._update(state=JobState.RUNNING, started_at=now, last_report_at=now)

    def report_step(self, done: int, total: int, current: str) -> None:
        self._update(progress=Progress(done, total, current), last_report_at=time.monotonic())

    def report_partial(self, item: Any) -> None:
        with self._changed:
            self.partial.append(item)
            self.last_report_at = time.monotonic()
            self._changed.notify_all()

    def report_beat(self) -> None:
        self._update(last_report_at=time.monotonic())

    def end(self, state: JobState, result: Any = None, error: BaseException | None = None) -> None:
        """Record how the job ended (once; later calls are ignored) and wake whoever waits on it."""
        with self._changed:
            if self.state.final:
                return
            self.state, self.result, self.error = state, result, error
            self.ended_at = time.monotonic()
            if state is JobState.DONE:
                self.progress = Progress(self.progress.total, self.progress.total, self.progress.current)
            self._changed.notify_all()
        self._ended.set()
        if state is JobState.DONE and self.on_done is not None:
            try:
                self.on_done(result)
            except Exception:  # noqa: BLE001 - a bookkeeping hook must not stop the lane's thread
                LOG.exception("the on_done hook of %r failed", self)
