"""The unit of batch work: one solver at one budget on one graph (a :class:`Cell`), and how a worker solves it.

:func:`solve_cell` is the same in every backend (and :func:`solve_cell_job` is it as a job of the
worker layer, :mod:`.worker`). Whatever the solve raises comes back as an outcome (status
``error``), so that one bad cell neither kills a worker nor loses the rest of a grid, and nothing
unpicklable crosses processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import RematError, first_line
from ..graph import ComputeGraph
from ..schedule import Link
from ..solvers import FAILED, SolveOutcome, solve_outcome
from .worker import Reporter


@dataclass(frozen=True)
class Cell:
    """One solve of a grid.

    Attributes
    ----------
    graph : str
        The graph's content hash.
    budget : int
        Bytes.
    solver : str
    time_limit : float or None
    options : tuple of (str, value)
        The solver's options, sorted by name.
    link : Link or None
        The transfer lane to the host (offloading solvers use it; every schedule is timed over it).
    """

    graph: str
    budget: int
    solver: str
    time_limit: float | None = None
    options: tuple[tuple[str, Any], ...] = ()
    link: Link | None = None


def solve_cell(graph: ComputeGraph, cell: Cell) -> SolveOutcome:
    """The outcome of ``cell`` solved here, ready to send back (no simulation attached; any error an outcome,
    a bug of this package marked ``internal``)."""
    try:
        return solve_outcome(graph, cell.budget, cell.solver, cell.time_limit, link=cell.link,
                             **dict(cell.options)).portable()
    except Exception as e:  # noqa: BLE001 - sent back as data: the grid goes on, the driver decides what it means
        return SolveOutcome(cell.solver, cell.budget, FAILED, detail=f"{type(e).__name__}: {first_line(e)}",
                            internal=not isinstance(e, RematError))


def solve_cell_job(report: Reporter, graph: ComputeGraph, cell: Cell) -> SolveOutcome:
    """:func:`solve_cell` as a job of the worker layer."""
    report.step(0, 1, f"{cell.solver} at {cell.budget:,} bytes")
    return solve_cell(graph, cell)
