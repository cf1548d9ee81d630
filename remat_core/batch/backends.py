"""Where the cells of a grid are solved: in this process, in a local process pool, or on Ray.

Every backend takes the graphs (by content hash) and the cells, and yields ``(cell, outcome)`` as
each solve finishes, in any order, so that the caller can store each result as it arrives (an
interrupted grid loses only the solves in flight). Outcomes are :func:`~remat_core.batch.cells.solve_cell`'s
in every backend, so the same cells give the same results on each.

- ``local`` with one worker solves in this process; with more, in worker processes of the worker
  layer (:class:`~.worker.WorkerProcess`, the explorer's lanes run on the same), each asking for a
  graph's document once and keeping it. A worker that dies (killed, out of memory) stops the run:
  the error says how many results arrived (they are stored) and that running the command again
  resumes.
- ``ray`` starts a local Ray with ``num_cpus=workers`` (stopped again afterwards) or joins the
  cluster at ``address`` (shipping this package to it as a ``py_modules`` runtime environment).
  Each graph's document is put in the object store once and rebuilt once per Ray worker process
  (:class:`~.worker.GraphCache`); a task whose worker dies is retried by Ray (:data:`RAY_RETRIES`
  times), and a task that still fails comes back as a failed outcome.
  Ray is imported only here, only when this backend runs.
"""

from __future__ import annotations

import itertools
import logging
from abc import ABC, abstractmethod
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..errors import RematError, first_line
from ..graph import ComputeGraph
from ..solvers import FAILED, SolveOutcome
from .cells import Cell, solve_cell, solve_cell_job
from .worker import GraphCache, WorkerProcess, WorkerStopped

BACKENDS = ("local", "ray")
RAY_RETRIES = 3
"""Times Ray runs a task again whose worker process died."""
RAY_OBJECT_STORE_BYTES = 512 * 2**20
"""A local Ray's object store: graphs and schedules are small, and the machine is shared."""

Results = Iterator[tuple[Cell, SolveOutcome]]


class BackendError(RematError):
    """A backend that cannot run: a worker pool that broke, a Ray cluster that cannot be reached."""


class Backend(ABC):
    """Solves cells somewhere; ``run`` yields each result as it arrives."""

    name: str

    def __init__(self, workers: int = 1) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise BackendError(f"--workers must be a whole number >= 1, got {workers!r}")
        self.workers = workers

    def describe(self) -> str:
        return f"{self.name}, {self.workers} worker{'s' if self.workers != 1 else ''}"

    @abstractmethod
    def run(self, graphs: Mapping[str, ComputeGraph], cells: Sequence[Cell]) -> Results:
        """``(cell, outcome)`` for every cell, in the order they finish."""


class InProcess(Backend):
    """One cell after another, in this process."""

    name = "local"

    def run(self, graphs: Mapping[str, ComputeGraph], cells: Sequence[Cell]) -> Results:
        for cell in cells:
            yield cell, solve_cell(graphs[cell.graph], cell)


class ProcessPool(Backend):
    """``workers`` local worker processes, one cell at a time each."""

    name = "local"

    def run(self, graphs: Mapping[str, ComputeGraph], cells: Sequence[Cell]) -> Results:
        if not cells:
            return
        documents = {key: graphs[key].to_json() for key in {cell.graph for cell in cells}}
        queue = list(reversed(cells))
        pool = [WorkerProcess(f"pool-{k}", ignore_interrupts=True) for k in range(min(self.workers, len(cells)))]
        running: dict[WorkerProcess, Cell] = {}
        job_ids = itertools.count(1)
        arrived = 0

        def send_next(worker: WorkerProcess) -> None:
            if queue:
                running[worker] = queue.pop()
                worker.run(next(job_ids), running[worker].graph, solve_cell_job, (running[worker],))

        try:
            for worker in pool:
                send_next(worker)
            while running:
                ready = wait([w.conn for w in running] + [w.process.sentinel for w in running])
                for worker in [w for w in list(running) if w.conn in ready or w.process.sentinel in ready]:
                    message = worker.receive(0.0, documents.__getitem__)
                    if message is None or message[0] not in ("done", "error"):
                        continue
                    cell = running.pop(worker)
                    if message[0] == "done":
                        outcome = message[2]
                    else:  # the job function turns every error into an outcome: this is the worker layer's own
                        outcome = SolveOutcome(cell.solver, cell.budget, FAILED, internal=True,
                                               detail=f"{type(message[2]).__name__}: {first_line(message[2])}")
                    arrived += 1
                    yield cell, outcome
                    send_next(worker)
        except WorkerStopped as e:
            raise BackendError(f"a worker process died (killed, or out of memory) after {arrived} of {len(cells)} "
                               f"solves ({e}); the results that arrived are stored: run the command again to resume "
                               f"(with fewer --workers if memory ran out)") from None
        finally:
            for worker in pool:  # the workers ignore Ctrl-C; one still solving when the run ends early stops here
                worker.kill()


_ray_graphs = GraphCache()


def _solve_document(cell: Cell, document: Mapping[str, Any]) -> SolveOutcome:
    """A Ray task: Ray resolves ``document`` from the object store; the Ray worker keeps the graph it rebuilds."""
    return solve_cell(_ray_graphs.from_document(cell.graph, lambda: document), cell)


class RayCluster(Backend):
    """Ray tasks: on a local Ray started for the run (``num_cpus=workers``), or on the cluster at ``address``."""

    name = "ray"

    def __init__(self, workers: int = 1, address: str | None = None) -> None:
        super().__init__(workers)
        self.address = address

    def describe(self) -> str:
        return f"ray at {self.address}" if self.address else f"ray, a local Ray with {self.workers} CPUs"

    def run(self, graphs: Mapping[str, ComputeGraph], cells: Sequence[Cell]) -> Results:
        if not cells:
            return
        try:
            import ray
        except ImportError as e:
            raise BackendError(f"--backend ray needs Ray ({e}); install the requirements (pip install -r "
                               f"requirements.txt), or use --backend local") from e
        started_here = self._connect(ray)
        pending: dict[Any, Cell] = {}
        try:
            task = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(_solve_document)
            documents = {key: ray.put(graphs[key].to_json()) for key in {cell.graph for cell in cells}}
            pending = {task.remote(cell, documents[cell.graph]): cell for cell in cells}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    cell = pending.pop(ref)
                    yield cell, self._result(ray, ref, cell)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()

    @staticmethod
    def _result(ray: Any, ref: Any, cell: Cell) -> SolveOutcome:
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as e:  # the worker died on every try, or the task could not run
            return SolveOutcome(cell.solver, cell.budget, FAILED, detail=f"the Ray task failed after "
                                f"{RAY_RETRIES} retries: {type(e).__name__}: {first_line(e)}")

    def _connect(self, ray: Any) -> bool:
        """Join ``address`` or start a local Ray, unless this process is connected already; True if started here."""
        if ray.is_initialized():
            return False
        quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
        try:
            if self.address:
                import remat_core

                ray.init(address=self.address, runtime_env={"py_modules": [str(Path(remat_core.__file__).parent)],
                                                            "excludes": ["__pycache__"]}, **quiet)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, object_store_memory=RAY_OBJECT_STORE_BYTES,
                         **quiet)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise BackendError(f"could not start or join {where}: {e}; check the address (ray start --head prints "
                               f"it) and, for a cluster with token authentication, set RAY_AUTH_MODE=token and its "
                               f"token (docs/cluster.md); or leave out --ray-address for a local Ray") from e
        return True


def open_backend(name: str = "local", workers: int = 1, address: str | None = None) -> Backend:
    """The backend called ``name`` (:data:`BACKENDS`).

    Raises
    ------
    BackendError
        For an unknown name, a worker count below 1, or an address without ``ray``.
    """
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "ray":
        return RayCluster(workers, address)
    if address:
        raise BackendError("--ray-address needs --backend ray")
    return InProcess(workers) if workers == 1 else ProcessPool(workers)
