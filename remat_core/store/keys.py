"""What a stored result is keyed by: the graph's content hash, the solver, its options, the budget, the
time limit and the package version; for a solver tagged ``uses_traced_graph``, also whether the graph
carries its traced model (:attr:`~remat_core.graph.Attachments.mode`), which the content hash does not cover
and such a solver's answer depends on.

Options are keyed with every declared option filled in (a default given explicitly and one left
out are the same solve) and written as canonical JSON, so equal choices give equal keys in any
process. The package version is part of the key: a new version may solve differently, and a
result from another version is never returned for it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Any, Mapping

from ..graph import ComputeGraph
from ..schedule import AllocatorConfig, Link
from ..solvers import check_budget, get_solver

PACKAGE = "remat-explorer"
UNINSTALLED_VERSION = "0+source"
"""The version keyed when the package runs from a source tree without being installed."""


@lru_cache(maxsize=1)
def package_version() -> str:
    """The installed version of Remat Explorer (:data:`UNINSTALLED_VERSION` when it is not installed)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return UNINSTALLED_VERSION


@dataclass(frozen=True)
class ResultKey:
    """The identity of one solve.

    Attributes
    ----------
    graph_hash : str
        :attr:`ComputeGraph.content_hash`.
    solver : str
    options : str
        Canonical JSON of every option the solver declares (defaults filled in), and ``memory`` when the
        budget is on the caching allocator's reserved bytes.
    budget : int
        Bytes.
    time_limit : float or None
    version : str
        The package version that solved it.
    """

    graph_hash: str
    solver: str
    options: str
    budget: int
    time_limit: float | None
    version: str

    @property
    def digest(self) -> str:
        """SHA-256 of the key's canonical JSON: the store's primary key."""
        text = json.dumps([self.graph_hash, self.solver, self.options, self.budget, self.time_limit, self.version],
                          separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def result_key(graph: ComputeGraph, budget: int, solver: str, time_limit: float | None = None,
               options: Mapping[str, Any] | None = None, allocator: AllocatorConfig | None = None,
               link: Link | None = None) -> ResultKey:
    """The key of ``solver`` on ``graph`` at ``budget`` (a budget on reserved bytes under ``allocator``'s settings
    keys them beside the options, as ``memory``; a transfer lane as ``link``; the graph's mode, ``traced`` or
    ``sizes``, as ``graph_mode`` for a solver that reads a traced model when there is one).

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        For a solver or option that does not exist, or a budget that is not a whole number of bytes.
    """
    spec = get_solver(solver)
    bound = spec.bind(options or {})
    if spec.tags.uses_traced_graph:
        bound = {**bound, "graph_mode": graph.attachments.mode}
    if allocator is not None:
        bound = {**bound, "memory": f"reserved:{allocator.text()}"}
    if link is not None:
        bound = {**bound, "link": link.describe()}
    return ResultKey(graph.content_hash, solver, json.dumps(bound, sort_keys=True, separators=(",", ":")),
                     check_budget(budget), None if time_limit is None else float(time_limit), package_version())
