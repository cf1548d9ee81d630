"""Solvers side by side on one graph: rows the CLI prints and the app renders.

:func:`compare` solves a graph with several solvers at several budgets and returns one
:class:`ComparisonRow` per (solver, budget): feasible or not, measured peak and cost, the cost
overhead over checkpoint-all, how many nodes were recomputed, the solve time, and Checkmate's LP
lower bound on the cost at that budget (:func:`remat_core.solvers.lp_relaxation_value`): a
bound over the frontier-advancing schedules of the graph's fixed topological order, not over all
schedules (a schedule in another order, a heuristic's, can cost less).
:func:`sweep_budgets` and :func:`pareto_optimal` give the budget grid and the Pareto front of a
sweep.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from ..errors import BudgetError, SolverOptionError
from ..graph import ComputeGraph
from ..schedule import checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound
from ..solvers import FEASIBLE, REFUSED, SolveOutcome, get_solver, lp_relaxation_value, solve_outcome, solver_names

Attempt = Callable[[ComputeGraph, int, str, "float | None"], SolveOutcome]
"""``attempt(graph, budget, solver, time_limit) -> SolveOutcome``: how a table of solves gets each one
(:func:`~remat_core.solvers.solve_outcome`'s first arguments)."""
Bound = Callable[[ComputeGraph, int, "float | None"], "LowerBound"]
"""``bound(graph, budget, time_limit) -> LowerBound``: how a table of solves gets its LP bound at a budget."""

LP_AVAILABLE, LP_SKIPPED, LP_INFEASIBLE, LP_UNPROVEN, LP_REFUSED = (
    "ok", "skipped", "infeasible", "unproven", "refused")
"""``LowerBound.status`` values: a bound; not asked for (``compare(..., lower_bound=False)``); the
relaxation is infeasible; not solved to optimality in time; the LP refused the graph (too large)."""


@dataclass(frozen=True)
class LowerBound:
    """Checkmate's LP bound on the cost at one budget (``value`` None unless ``status`` is "ok").

    It bounds the frontier-advancing schedules of the graph's fixed topological order only.

    ``overhead`` is the same bound as an overhead over checkpoint-all (``cost / base - 1``).
    """

    status: str
    value: float | None = None
    overhead: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class ComparisonRow:
    """One solver at one budget.

    Attributes
    ----------
    solver : str
    budget : int
        Bytes, pinned memory included.
    fraction : float
        ``budget / checkpoint-all peak``.
    status : str
        The outcome's status (:data:`remat_core.solvers.STATUSES`); ``feasible`` and ``refused`` read it.
    peak, cost, overhead, recomputes, recomputed_nodes
        Measured by the simulator (None when infeasible). ``overhead`` is ``cost / checkpoint-all
        cost - 1``; ``recomputes`` counts extra computations, ``recomputed_nodes`` distinct nodes.
    seconds : float
        Wall time of the solve.
    lower_bound : LowerBound
        Checkmate's LP bound at this budget (shared by every solver's row at that budget), for
        schedules in the graph's fixed topological order: a row's cost may be below it.
    smallest_feasible : int or None
        For a row without a schedule, the smallest budget the solver knows to be feasible.
    detail : str
        Why there is no schedule: infeasible, stopped at the time limit, refused (the graph is larger
        than the solver's formulation is built for) or failed.
    solver_info : dict
        What the solver reported beyond the measurements (a MIP gap, a slot count...).
    from_store : bool
        Read from a results store (``seconds`` is then the time of the solve that stored it).
    makespan : float or None
        For a comparison over a transfer lane: when the step ends, copies and stalls included.
    """

    solver: str
    budget: int
    fraction: float
    status: str
    peak: int | None
    cost: float | None
    overhead: float | None
    recomputes: int | None
    recomputed_nodes: int | None
    seconds: float
    lower_bound: LowerBound
    smallest_feasible: int | None = None
    detail: str = ""
    solver_info: dict[str, Any] = field(default_factory=dict)
    from_store: bool = False
    makespan: float | None = None

    @classmethod
    def of(cls, outcome: SolveOutcome, peak: int, bound: LowerBound) -> "ComparisonRow":
        """The row of one solve's outcome; ``peak`` is the graph's checkpoint-all peak."""
        common = {"solver": outcome.solver, "budget": outcome.budget, "lower_bound": bound, "status": outcome.status,
                  "fraction": outcome.budget / peak if peak else math.inf, "seconds": outcome.seconds,
                  "from_store": outcome.from_store}
        if not outcome.feasible:
            return cls(**common, peak=None, cost=None, overhead=None, recomputes=None, recomputed_nodes=None,
                       smallest_feasible=outcome.smallest_feasible, detail=outcome.detail)
        stats = outcome.stats
        return cls(**common, peak=stats["peak"], cost=stats["cost"], overhead=stats["overhead"],
                   recomputes=stats["recomputes"], recomputed_nodes=stats["recomputed_nodes"],
                   solver_info=dict(outcome.solver_info), makespan=stats.get("makespan"))

    @property
    def feasible(self) -> bool:
        """A schedule within the budget was found."""
        return self.status == FEASIBLE

    @property
    def refused(self) -> bool:
        """The solver did not try: the graph is larger than its formulation is built for."""
        return self.status == REFUSED

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--json`` and the app (infinite values become None)."""
        doc = asdict(self)
        doc.update(feasible=self.feasible, refused=self.refused)
        doc["lower_bound"] = asdict(self.lower_bound)
        doc["solver_info"] = {k: v for k, v in self.solver_info.items() if _plain(v)}
        return doc


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def compare(graph: ComputeGraph, budgets: Sequence[int], solvers: Sequence[str] | None = None,
            time_limit: float | None = None, lower_bound: bool = True,
            attempt: Attempt = solve_outcome, bound: Bound | None = None) -> list[ComparisonRow]:
    """Solve ``graph`` with each solver at each budget.

    Parameters
    ----------
    graph : ComputeGraph
    budgets : sequence of int
        Bytes, pinned memory included.
    solvers : sequence of str, optional
        Registry names (default: every registered solver).
    time_limit : float, optional
        Seconds per solve (and per LP bound) for the solvers that search.
    lower_bound : bool
        Compute Checkmate's LP bound at each budget (one LP per budget, in this process; status
        "skipped" when false).
    attempt : callable
        ``attempt(graph, budget, solver, time_limit) -> SolveOutcome``: how each solve is had
        (default: solved here; :mod:`remat_core.batch` passes outcomes it got from a results store
        or from worker processes).
    bound : callable, optional
        ``bound(graph, budget, time_limit) -> LowerBound``: how each LP bound is had (default:
        :func:`lp_lower_bound` here; :mod:`remat_core.batch` reads it from a results store).

    Returns
    -------
    list of ComparisonRow
        Budget-major: every solver at the first budget, then at the next.

    Raises
    ------
    UnknownSolver
        For a name that is not registered (before anything is solved).
    BudgetError
        For an empty budget list.
    """
    names = list(solvers) if solvers is not None else solver_names()
    for name in names:
        get_solver(name)
    if not budgets:
        raise BudgetError("compare needs at least one budget")
    peak = checkpoint_all_peak(graph)
    rows = []
    for budget in budgets:
        at = (bound or lp_lower_bound)(graph, budget, time_limit) if lower_bound else LowerBound(LP_SKIPPED)
        rows += [ComparisonRow.of(attempt(graph, budget, name, time_limit), peak, at) for name in names]
    return rows


def lp_lower_bound(graph: ComputeGraph, budget: int, time_limit: float | None = None) -> LowerBound:
    """Checkmate's LP bound on the cost at ``budget``, with its status.

    The bound covers only the schedules Checkmate's formulation can express (frontier-advancing, in
    the graph's fixed topological order), not all schedules; see
    :func:`remat_core.solvers.lp_relaxation_value`. Graphs
    larger than that LP takes get status "refused", with the reason in ``detail``.
    """
    if budget < memory_lower_bound(graph):
        return LowerBound(LP_INFEASIBLE, detail="below the graph's memory lower bound")
    try:
        value = lp_relaxation_value(graph, budget, time_limit=time_limit)
    except SolverOptionError as e:
        return LowerBound(LP_REFUSED, detail=str(e))
    if value is None:
        return LowerBound(LP_UNPROVEN, detail="the LP was not solved to optimality within the time limit")
    if math.isinf(value):
        return LowerBound(LP_INFEASIBLE, detail="even the LP relaxation is infeasible at this budget")
    base = checkpoint_all_cost(graph)
    return LowerBound(LP_AVAILABLE, float(value), float(value) / base - 1.0 if base > 0 else 0.0)


def sweep_budgets(graph: ComputeGraph, points: int = 40) -> list[int]:
    """``points`` budgets evenly spaced from the memory lower bound to the checkpoint-all peak (both included).

    Raises
    ------
    BudgetError
        For fewer than two points.
    """
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise BudgetError(f"a sweep needs at least 2 points, got {points!r}")
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    return sorted({low + (high - low) * i // (points - 1) for i in range(points)})


def pareto_optimal(rows: Sequence[ComparisonRow]) -> list[bool]:
    """For each row: feasible, and no other feasible row has both a lower-or-equal peak and cost, one lower."""
    feasible = [(r.peak, r.cost) for r in rows if r.feasible]
    out = []
    for r in rows:
        if not r.feasible:
            out.append(False)
            continue
        dominated = any(p <= r.peak and c <= r.cost and (p < r.peak or c < r.cost) for p, c in feasible)
        out.append(not dominated)
    return out
