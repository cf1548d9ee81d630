"""Worker processes that get each graph once and run work on it: the one worker layer.

Both ways of solving outside the caller's process use it: ``batch``'s local process pool
(:class:`~.backends.ProcessPool`) and the explorer's lanes (``explorer/jobs/lane.py``, which add a
queue, Cancel, supersede and stall detection on top). Ray ships graphs through its object store and
keeps them with the same :class:`GraphCache`.

The parent (:class:`WorkerProcess`) sends ``("run", job id, graph hash, function, args, step
allowance)`` over a pipe; the worker (:func:`serve`) answers with messages of the same shape,
``(kind, job id, ...)``:

- ``("need", id, hash)``: the worker does not hold that graph; the parent answers ``("graph", hash,
  document)`` and the worker rebuilds it once (the last :data:`KEPT_GRAPHS` are kept), so a graph
  crosses the pipe once per worker, not once per job;
- ``("step", id, done, total, current)`` and ``("partial", id, item)``: what the job reports through
  its :class:`Reporter` (a sweep: each budget it starts, each point it finishes);
- ``("beat", id)`` every :data:`BEAT_SECONDS` from a thread, while the current step has run for less
  than its allowance: a worker that died, froze, or runs a step far past its time limit falls silent;
- ``("done", id, result)`` or ``("error", id, exception)``.

A job is ``function(report, graph, *args)``: a module-level function (it travels by name), the
reporter, the graph rebuilt from its document (None for a job without one), then its arguments.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping

from ..graph import ComputeGraph

BEAT_SECONDS = 2.0
KEPT_GRAPHS = 8
"""Graphs a worker keeps rebuilt (a 10,000-node graph takes a few tenths of a second to rebuild; a study
of more graphs rebuilds the least recently used)."""
STOP_SECONDS = 5.0

Document = Mapping[str, Any]


class GraphCache:
    """Graphs kept by key (a content hash), least recently used out first: rebuilt from their ``remat-graph``
    documents in a worker, or traced again with their model where runs need one."""

    def __init__(self, size: int = KEPT_GRAPHS) -> None:
        self.size = size
        self._graphs: OrderedDict[str, ComputeGraph] = OrderedDict()
        self.rebuilt = 0

    def get(self, key: str, build: Callable[[], ComputeGraph]) -> ComputeGraph:
        """The graph of ``key``, made by ``build()`` (called only when it is not kept)."""
        if key not in self._graphs:
            self._graphs[key] = build()
            self.rebuilt += 1
            while len(self._graphs) > self.size:
                self._graphs.popitem(last=False)
        self._graphs.move_to_end(key)
        return self._graphs[key]

    def from_document(self, key: str, document: Callable[[], Document]) -> ComputeGraph:
        """The graph of ``key``, rebuilt from ``document()`` (called only when it is not kept)."""
        return self.get(key, lambda: ComputeGraph.from_json(document()))


def should_beat(step_elapsed: float, allowance: float | None) -> bool:
    """Whether the heartbeat vouches for a step that has run ``step_elapsed`` seconds."""
    return allowance is None or step_elapsed < allowance


class Reporter:
    """What a job uses to say how far it got; each call is also a sign of life."""

    def __init__(self, channel: "_Channel | None" = None, job_id: int = 0) -> None:
        self._channel = channel
        self._job_id = job_id

    def step(self, done: int, total: int, current: str = "") -> None:
        """``done`` of ``total`` steps finished; now working on ``current`` (restarts the step's allowance)."""
        if self._channel is not None:
            self._channel.step_started = time.monotonic()
            self._channel.send(("step", self._job_id, done, total, current))

    def partial(self, item: Any) -> None:
        """A piece of the result, available before the job ends (a sweep's point)."""
        if self._channel is not None:
            self._channel.send(("partial", self._job_id, item))


SILENT = Reporter()
"""A reporter that tells no one: a job function called in the caller's own process."""


class _Channel:
    """The worker's end of the pipe: sends from the job and the heartbeat thread, one at a time."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.job_id: int | None = None
        self.allowance: float | None = None
        self.step_started = 0.0

    def send(self, message: tuple) -> None:
        with self.lock:
            self.conn.send(message)


def _beat(channel: _Channel, every: float) -> None:
    while True:
        time.sleep(every)
        job = channel.job_id
        if job is not None and should_beat(time.monotonic() - channel.step_started, channel.allowance):
            try:
                channel.send(("beat", job))
            except OSError:  # the parent closed the pipe: the process is being stopped
                return


def portable_error(error: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError carrying its type, text and traceback."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any pickling failure gets the same stand-in
        text = "".join(traceback.format_exception(error))
        return RuntimeError(f"{type(error).__name__}: {error}\n{text}")


def serve(conn: Connection, nice: int = 0, initializer: Callable[[], None] | None = None,
          beat_seconds: float = BEAT_SECONDS, ignore_interrupts: bool = False) -> None:
    """Run jobs from ``conn`` until it closes (the worker process's target).

    ``ignore_interrupts``: Ctrl-C is for the parent, which stops its workers itself (a pool).
    """
    if ignore_interrupts:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)
    if initializer is not None:
        initializer()
    channel = _Channel(conn)
    threading.Thread(target=_beat, args=(channel, beat_seconds), daemon=True, name="heartbeat").start()
    graphs = GraphCache()

    def graph_for(job_id: int, key: str | None) -> ComputeGraph | None:
        def document() -> Document:
            channel.send(("need", job_id, key))
            kind, sent_key, sent = conn.recv()
            if kind != "graph" or sent_key != key:
                raise RuntimeError(f"the parent sent {kind} {sent_key} for the graph {key}")
            return sent
        return None if key is None else graphs.from_document(key, document)

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        _, job_id, graph_key, function, args, allowance = message
        try:
            graph = graph_for(job_id, graph_key)
            channel.allowance, channel.step_started, channel.job_id = allowance, time.monotonic(), job_id
            result = function(Reporter(channel, job_id), graph, *args)
        except BaseException as e:  # noqa: BLE001 - whatever a job raises goes back to the parent
            channel.job_id = None
            channel.send(("error", job_id, portable_error(e)))
            continue
        channel.job_id = None
        try:
            channel.send(("done", job_id, result))
        except Exception as e:  # noqa: BLE001 - a result that cannot be pickled
            channel.send(("error", job_id, portable_error(e)))


class WorkerStopped(RuntimeError):
    """The worker process ended (killed by the system, out of memory, crashed) while it ran a job."""


class WorkerProcess:
    """The parent's handle on one worker process (started with ``spawn``: a server's threads must not be
    copied by ``fork``), which sends it jobs and answers its requests for graphs.

    Parameters
    ----------
    name : str
        The process's name (``remat-<name>``).
    nice : int
        Niceness added to the worker.
    initializer : callable, optional
        Run once in the worker before its first job (a picklable, module-level function).
    beat_seconds : float
        The worker's heartbeat interval.
    ignore_interrupts : bool
        The worker ignores Ctrl-C (the parent stops it).
    """

    def __init__(self, name: str, *, nice: int = 0, initializer: Callable[[], None] | None = None,
                 beat_seconds: float = BEAT_SECONDS, ignore_interrupts: bool = False) -> None:
        self.name = name
        self._settings = (nice, initializer, beat_seconds, ignore_interrupts)
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self.process = context.Process(target=serve, args=(theirs, *self._settings), name=f"remat-{name}",
                                       daemon=True)
        self.process.start()
        theirs.close()
        self.conn: Connection = ours
        self.graphs_sent = 0

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.alive else None

    def run(self, job_id: int, graph_key: str | None, function: Callable[..., Any], args: tuple,
            step_allowance: float | None = None) -> None:
        """Start a job (the worker runs one at a time: send the next once this one has answered)."""
        self.conn.send(("run", job_id, graph_key, function, args, step_allowance))

    def receive(self, timeout: float, graphs: Callable[[str], Document]) -> tuple | None:
        """The worker's next message other than a request for a graph (answered with ``graphs(hash)``), or None
        when none comes within ``timeout`` seconds.

        Raises
        ------
        WorkerStopped
            When the worker has died.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if not self.conn.poll(max(left, 0.0)):
                if not self.alive:
                    raise WorkerStopped(f"the {self.name} worker exited with code {self.process.exitcode}")
                return None
            try:
                message = self.conn.recv()
            except (EOFError, OSError) as e:
                raise WorkerStopped(f"the {self.name} worker's pipe closed ({e})") from None
            if message[0] == "need":
                self.conn.send(("graph", message[2], graphs(message[2])))
                self.graphs_sent += 1
                continue
            return message

    def kill(self) -> None:
        """Stop the worker now (SIGKILL: whatever it is doing, a C solver included)."""
        self.process.kill()
        self.process.join(STOP_SECONDS)
        self.conn.close()
