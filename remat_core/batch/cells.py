"""The unit of batch work: one solver at one budget on one graph (a :class:`Cell`), and how a worker solves it.

:func:`solve_cell` is the same in every backend; a worker in another process gets the graph as its
``remat-graph`` document once and keeps the rebuilt graph by content hash (:func:`graph_of`).
Whatever the solve raises comes back as an outcome (status ``error``), so that one bad cell
neither kills a worker nor loses the rest of a grid, and nothing unpicklable crosses processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..analysis import FAILED, SolveOutcome, attempt_solve
from ..errors import RematError, first_line
from ..graph import ComputeGraph

KEPT_GRAPHS = 8
"""Graphs a worker process keeps rebuilt (a study of more graphs rebuilds the least recently used)."""
_graphs: dict[str, ComputeGraph] = {}


@dataclass(frozen=True)
class Cell:
    """One solve of a grid.

    Attributes
    ----------
    graph : str
        The graph's content hash.
    solver : str
    budget : int
        Bytes.
    time_limit : float or None
    options : tuple of (str, value)
        The solver's options, sorted by name.
    """

    graph: str
    solver: str
    budget: int
    time_limit: float | None = None
    options: tuple[tuple[str, Any], ...] = ()


def solve_cell(graph: ComputeGraph, cell: Cell) -> SolveOutcome:
    """The outcome of ``cell`` solved here, ready to send back (no simulation attached; any error an outcome)."""
    try:
        return attempt_solve(graph, cell.solver, cell.budget, cell.time_limit, **dict(cell.options)).portable()
    except Exception as e:  # sent back as data: the grid goes on, and the driver decides what a failure means
        return SolveOutcome(cell.solver, cell.budget, FAILED, detail=f"{type(e).__name__}: {first_line(e)}",
                            internal=not isinstance(e, RematError))


def graph_of(content_hash: str, document: Mapping[str, Any]) -> ComputeGraph:
    """The graph of ``document``, rebuilt once per worker process and kept by ``content_hash``."""
    if content_hash not in _graphs:
        while len(_graphs) >= KEPT_GRAPHS:
            _graphs.pop(next(iter(_graphs)))
        _graphs[content_hash] = ComputeGraph.from_json(document)
    return _graphs[content_hash]
