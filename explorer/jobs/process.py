"""The loop a lane's worker process runs: one job at a time, with progress and a heartbeat.

The lane (:mod:`.lane`) sends ``("run", job id, graph hash, function, args, step allowance)`` over a
pipe; the worker answers with messages of the same shape, ``(kind, job id, ...)``:

- ``("need", id, hash)``: the worker does not hold that graph; the lane sends ``("graph", hash,
  document)`` and the worker rebuilds it once (the last :data:`KEPT_GRAPHS` are kept), so a graph
  crosses the pipe once per worker, not once per job;
- ``("step", id, done, total, current)`` and ``("partial", id, item)``: what the job reports through
  its :class:`Reporter` (a sweep: each budget it starts, each point it finishes);
- ``("beat", id)`` every :data:`BEAT_SECONDS` from a thread, while the current step has run for less
  than its allowance: a worker that died, froze, or runs a step far past its time limit falls silent,
  and the page shows the job as stalled;
- ``("done", id, result)`` or ``("error", id, exception)``.

No Streamlit here: the worker imports only ``remat_core`` and the job functions.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import traceback
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any, Callable

from remat_core import ComputeGraph

BEAT_SECONDS = 2.0
KEPT_GRAPHS = 4
"""Graphs a worker keeps rebuilt (a 10,000-node graph takes a few tenths of a second to rebuild)."""


def kept(cache: OrderedDict, key: Any, build: Callable[[], Any], size: int) -> Any:
    """``cache[key]``, built on first use; the least recently used entries beyond ``size`` dropped."""
    if key not in cache:
        cache[key] = build()
        while len(cache) > size:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return cache[key]


def should_beat(step_elapsed: float, allowance: float | None) -> bool:
    """Whether the heartbeat vouches for a step that has run ``step_elapsed`` seconds."""
    return allowance is None or step_elapsed < allowance


class Reporter:
    """What a job function uses to say how far it got; each call is also a sign of life."""

    def __init__(self, channel: "_Channel", job_id: int) -> None:
        self._channel = channel
        self._job_id = job_id

    def step(self, done: int, total: int, current: str = "") -> None:
        """``done`` of ``total`` steps finished; now working on ``current`` (restarts the step's allowance)."""
        self._channel.step_started = time.monotonic()
        self._channel.send(("step", self._job_id, done, total, current))

    def partial(self, item: Any) -> None:
        """A piece of the result, available before the job ends (a sweep's point)."""
        self._channel.send(("partial", self._job_id, item))


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
            except OSError:  # the lane closed the pipe: the process is being stopped
                return


def _portable_error(error: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError carrying its type, text and traceback."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any pickling failure gets the same stand-in
        text = "".join(traceback.format_exception(error))
        return RuntimeError(f"{type(error).__name__}: {error}\n{text}")


def serve(conn: Connection, nice: int = 0, initializer: Callable[[], None] | None = None,
          beat_seconds: float = BEAT_SECONDS) -> None:
    """Run jobs from ``conn`` until it closes (the worker process's target)."""
    if nice:
        os.nice(nice)
    if initializer is not None:
        initializer()
    channel = _Channel(conn)
    threading.Thread(target=_beat, args=(channel, beat_seconds), daemon=True, name="heartbeat").start()
    graphs: OrderedDict[str, ComputeGraph] = OrderedDict()

    def graph_for(job_id: int, key: str | None) -> ComputeGraph | None:
        def rebuild() -> ComputeGraph:
            channel.send(("need", job_id, key))
            kind, sent_key, document = conn.recv()
            if kind != "graph" or sent_key != key:
                raise RuntimeError(f"the lane sent {kind} {sent_key} for the graph {key}")
            return ComputeGraph.from_json(document)
        return None if key is None else kept(graphs, key, rebuild, KEPT_GRAPHS)

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
        except BaseException as e:  # noqa: BLE001 - whatever a job raises goes back to the app
            channel.job_id = None
            channel.send(("error", job_id, _portable_error(e)))
            continue
        channel.job_id = None
        try:
            channel.send(("done", job_id, result))
        except Exception as e:  # noqa: BLE001 - a result that cannot be pickled
            channel.send(("error", job_id, _portable_error(e)))
