"""A study: graphs x solvers x budgets, resumable through the results store, written as tables and figures.

:func:`load_study_graph` reads a graph file or traces a zoo model (as ``trace`` does);
:func:`run_study` runs the grid with :func:`~remat_core.batch.grid.run_grid` (what the store
holds is not solved again, so a study interrupted and started again finishes the rest);
:func:`write_study` writes ``results.csv`` and ``results.json`` (one row per graph x solver x
budget, :data:`STUDY_COLUMNS`) and one Pareto figure per graph (``pareto-<graph>.html``, plotly; the
figures share the ``plotly.min.js`` written beside them, so they open offline).
"""

from __future__ import annotations

import csv
import html
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..analysis import ParetoCurve, curve_point
from ..errors import BudgetError
from ..graph import ComputeGraph, format_bytes, load_graph, parse_budget
from ..schedule import Link, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound
from ..solvers import FAILED, SolveOutcome
from ..store import ResultStore
from ..viz import pareto_figure
from ..viz.palette import plotly_text
from .backends import Backend
from .cells import Cell
from .grid import OnResult, run_grid

STUDY_COLUMNS = ("graph", "graph_hash", "solver", "budget", "budget_bytes", "feasible", "peak", "cost", "overhead",
                 "makespan", "seconds", "status", "from_store", "smallest_feasible", "detail")
"""The columns of ``results.csv``: ``budget`` as given (``60%``), ``budget_bytes`` what it is for that graph;
``makespan`` over the transfer lane of a study run with one (``--bandwidth``), else empty."""


@dataclass(frozen=True)
class StudyRow:
    """One graph x solver x budget of a study (:data:`STUDY_COLUMNS`)."""

    graph: str
    graph_hash: str
    solver: str
    budget: str
    budget_bytes: int
    feasible: bool
    peak: int | None
    cost: float | None
    overhead: float | None
    makespan: float | None
    seconds: float
    status: str
    from_store: bool
    smallest_feasible: int | None
    detail: str


@dataclass(frozen=True)
class Study:
    """A study's graphs (in the order given), its rows (graph, solver, budget order) and each cell's outcome."""

    graphs: tuple[ComputeGraph, ...]
    solvers: tuple[str, ...]
    rows: tuple[StudyRow, ...]
    outcomes: dict[Cell, SolveOutcome]

    @property
    def failures(self) -> list[SolveOutcome]:
        """The solves that raised an error (their rows say ``error``)."""
        return [o for o in self.outcomes.values() if o.status == FAILED]


def load_study_graph(source: str, level: str = "op", batch_size: int | None = None, cost: str = "flops",
                     options: Mapping[str, Any] | None = None) -> ComputeGraph:
    """``source`` as a graph: a graph file (any format ``load_graph`` reads), else a zoo model or an
    ``.onnx``/``.pt2`` file traced as ``python -m remat_core trace`` does (at ``batch_size``, ``level``,
    ``cost`` and with the model's ``options``, such as ``image_size``)."""
    path = Path(source)
    if path.is_file() and path.suffix.lower() not in (".onnx", ".pt2"):
        return load_graph(path)
    from ..frontends import trace_source

    return trace_source(source, batch_size=batch_size, level=level, cost=cost, options=dict(options or {}))


def study_cells(graphs: Sequence[ComputeGraph], solvers: Sequence[str], budgets: Sequence[str],
                time_limit: float | None = None, link: Link | None = None) -> list[tuple[ComputeGraph, str, Cell]]:
    """``(graph, budget text, cell)`` for every graph x solver x budget, budgets read against each graph.

    Raises
    ------
    BudgetError
        For no budget or a budget text that does not read (before anything is solved).
    """
    if not budgets:
        raise BudgetError("a study needs at least one budget; give e.g. --budgets 60%,80%")
    grid = []
    for graph in graphs:
        peak = checkpoint_all_peak(graph)
        for solver in solvers:
            for text in budgets:
                grid.append((graph, text, Cell(graph.content_hash, parse_budget(text, peak), solver, time_limit,
                                               link=link)))
    return grid


def run_study(graphs: Sequence[ComputeGraph], solvers: Sequence[str], budgets: Sequence[str],
              time_limit: float | None, backend: Backend, store: ResultStore | None,
              on_result: OnResult | None = None, link: Link | None = None) -> Study:
    """Every graph x solver x budget through ``store`` and ``backend`` (over ``link``, a transfer lane, when given);
    failed solves are rows, not errors.

    A graph given twice (the same content hash) is studied once.
    """
    graphs = list({g.content_hash: g for g in graphs}.values())
    grid = study_cells(graphs, solvers, budgets, time_limit, link)
    unique = list(dict.fromkeys(cell for _, _, cell in grid))
    outcomes = run_grid({g.content_hash: g for g in graphs}, unique, backend, store, on_result)
    rows = tuple(_row(graph, text, outcomes[cell]) for graph, text, cell in grid)
    return Study(tuple(graphs), tuple(solvers), rows, outcomes)


def _row(graph: ComputeGraph, budget: str, outcome: SolveOutcome) -> StudyRow:
    stats = outcome.stats
    return StudyRow(graph.name, graph.content_hash, outcome.solver, budget, outcome.budget, outcome.feasible,
                    stats.get("peak"), stats.get("cost"), stats.get("overhead"), stats.get("makespan"),
                    round(outcome.seconds, 6),
                    outcome.status, outcome.from_store, outcome.smallest_feasible, outcome.detail)


def write_study(study: Study, out_dir: str | Path) -> list[Path]:
    """``results.csv``, ``results.json`` and ``pareto-<graph>.html`` per graph in ``out_dir`` (created); the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = [asdict(row) for row in study.rows]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=STUDY_COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    summary = [{"name": g.name, "graph_hash": g.content_hash, "nodes": len(g),
                "checkpoint_all_peak": checkpoint_all_peak(g), "lower_bound": memory_lower_bound(g),
                "checkpoint_all_cost": checkpoint_all_cost(g)} for g in study.graphs]
    (out / "results.json").write_text(json.dumps({"graphs": summary, "solvers": list(study.solvers),
                                                  "rows": table}, indent=1) + "\n")
    written = [out / "results.csv", out / "results.json"]
    for graph, name in zip(study.graphs, _file_names(study.graphs)):
        path = out / f"pareto-{name}.html"
        _pareto(study, graph).write_html(path, include_plotlyjs="directory")
        page = path.read_text()  # plotly writes no <title>: the tab and a bookmark name the graph, as the heading
        path.write_text(page.replace("<head>", f"<head><title>{html.escape(graph.name)} · Pareto curves</title>", 1))
        written.append(path)
    return written


def _pareto(study: Study, graph: ComputeGraph) -> Any:
    """The Pareto figure of one graph: a curve per solver through its budgets."""
    curves = []
    for solver in study.solvers:
        points = {cell.budget: curve_point(o) for cell, o in study.outcomes.items()
                  if cell.graph == graph.content_hash and cell.solver == solver}
        curves.append(ParetoCurve(solver, {}, tuple(points[b] for b in sorted(points)), checkpoint_all_cost(graph)))
    figure = pareto_figure(curves, lower_bound=memory_lower_bound(graph),
                           checkpoint_all_peak=checkpoint_all_peak(graph))
    feasible = sum(len(c.feasible_points) for c in curves)
    solves = sum(len(c.points) for c in curves)
    title = f"{plotly_text(graph.name)}: cost overhead by budget ({feasible} of {solves} solves found a schedule)"
    figure.update_layout(title={"text": title, "x": 0, "xanchor": "left"}, margin={"t": 90})
    if not feasible:
        named = [b for b in (c.smallest_feasible() for c in curves) if b is not None]
        hint = (f"the smallest budget any solver named as feasible is {format_bytes(min(named))}" if named else
                "no solver named a budget that fits")
        figure.add_annotation(text=f"No solver found a schedule within any budget of this study: {hint}.",
                              xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 15})
    return figure


def _file_names(graphs: Sequence[ComputeGraph]) -> list[str]:
    """A file-name-safe name per graph (a zoo model's name without its settings), its hash's first 8 digits
    added where two names would collide."""
    names = [re.sub(r"[^A-Za-z0-9._-]+", "_", g.name.split(" (")[0]).strip("._") or "graph" for g in graphs]
    return [f"{n}-{g.content_hash[:8]}" if names.count(n) > 1 else n for n, g in zip(names, graphs)]
