"""Budget sweeps kept whole: the Pareto curve (budget vs cost overhead) of one solver.

:func:`remat_core.sweep` returns one outcome per budget; the explorer needs less and more from each point: which tensors
were recomputed (so "from which budget is this tensor computed once?" needs no new solve), the
lower bound a solver reports on the cost (``checkmate-lp``'s LP value, plotted as "best possible":
a bound over the schedules of the graph's fixed topological order, not over all schedules),
and what an infeasible budget said about the smallest feasible one. A :class:`ParetoCurve` holds
those points and answers quick estimates between them while an exact solve runs. The budget
grid is :func:`remat_core.analysis.comparison.sweep_budgets`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import SolverOptionError
from ..graph import ComputeGraph
from ..schedule import Schedule, checkpoint_all_cost
from ..solvers import SolveOutcome, get_solver, solve_outcome

LP_LOWER_BOUND = "lp_lower_bound"
"""The ``solver_info`` key under which a solver reports a lower bound on the cost at a budget."""
GAP_KEYS = ("mip_gap", "gap")
"""The ``solver_info`` keys under which exact solvers report their relative optimality gap,
``(cost - proven bound) / cost``: ``checkmate-milp``'s HiGHS MIP gap, ``moccasin``'s CP-SAT gap."""


def reported_gap(solver_info: Mapping[str, Any]) -> float | None:
    """The relative optimality gap a solver reported (0: proved optimal), or None when it reports none.

    A gap the solver could not compute (no bound in time: None, or not finite) counts as none.
    """
    for key in GAP_KEYS:
        value = solver_info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


@dataclass(frozen=True)
class CurvePoint:
    """One solve of a sweep.

    Attributes
    ----------
    budget : int
        The budget asked for, in bytes.
    feasible : bool
    peak : int or None
        Measured peak (None when infeasible).
    cost, overhead : float or None
        Measured cost, and cost over checkpoint-all minus 1 (0.25 = 25 % more compute); for a schedule
        timed over a host link, the overhead is its makespan's (copies that do not hide count).
    recomputed : mapping of str to int
        Tensors computed more than once, and how many times.
    seconds : float
        Wall time of the solve.
    cost_lower_bound : float or None
        A finite lower bound on the cost at this budget that the solver reported
        (``solver_info["lp_lower_bound"]``: Checkmate's LP, a bound for frontier-advancing schedules
        in the graph's fixed topological order only; an infinite one, from an infeasible relaxation,
        is left out).
    smallest_feasible : int or None
        For an infeasible point, the smallest feasible budget the solver named.
    gap : float or None
        The relative optimality gap the solver reported (:func:`reported_gap`).
    setting : str
        For a fixed policy's point, the setting it was met at (``"every=2"``); empty for a budget's solve.
    """

    budget: int
    feasible: bool
    peak: int | None = None
    cost: float | None = None
    overhead: float | None = None
    recomputed: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    cost_lower_bound: float | None = None
    smallest_feasible: int | None = None
    gap: float | None = None
    setting: str = ""

    def computes_of(self, tensor: str) -> int | None:
        """How many times this point's schedule computes ``tensor`` (None when infeasible).

        A tensor not listed in ``recomputed`` is computed at most once; this answers 1 for it, as
        every tensor a curve is asked about is one the schedule computes.
        """
        if not self.feasible:
            return None
        return self.recomputed.get(tensor, 1)


@dataclass(frozen=True)
class ParetoCurve:
    """A solver's sweep over budgets, sorted by budget.

    Attributes
    ----------
    solver : str
    options : mapping
        The solver options every point was solved with.
    points : tuple of CurvePoint
        Sorted by budget.
    base_cost : float
        The checkpoint-all cost that overheads are relative to.
    """

    solver: str
    options: Mapping[str, Any]
    points: tuple[CurvePoint, ...]
    base_cost: float

    @property
    def fixed_policy(self) -> bool:
        """Whether the points are a fixed policy's settings, each at the peak it holds (no budget was asked)."""
        return bool(self.points) and all(p.setting for p in self.points)

    @property
    def feasible_points(self) -> tuple[CurvePoint, ...]:
        """The points with a schedule."""
        return tuple(p for p in self.points if p.feasible)

    def smallest_feasible(self) -> int | None:
        """The smallest budget known feasible: a feasible point's, or one an infeasible point named."""
        known = [p.budget for p in self.points if p.feasible]
        known += [p.smallest_feasible for p in self.points if not p.feasible and p.smallest_feasible is not None]
        return min(known) if known else None

    def envelope(self) -> tuple[CurvePoint, ...]:
        """The lower envelope: for each feasible point in budget order, the cheapest point at or below its budget.

        A schedule that fits a budget fits every larger one, so the best cost this solver is known
        to reach at a budget never rises with the budget: the envelope is that staircase (one entry
        per feasible point, repeating the better point where a larger budget's own solve cost
        more). The chart draws it as the solver's line and the raw points as markers.
        """
        best: CurvePoint | None = None
        steps = []
        for point in self.feasible_points:
            if best is None or point.cost < best.cost:
                best = point
            steps.append(best)
        return tuple(steps)

    def fitting_point(self, budget: int) -> CurvePoint | None:
        """The cheapest feasible point whose budget is at most ``budget``.

        Its schedule fits ``budget`` too, so its overhead is one this solver can reach there: the
        explorer shows it as the estimate while the exact solve at ``budget`` runs.
        """
        fitting = [p for p in self.points if p.feasible and p.budget <= budget]
        return min(fitting, key=lambda p: (p.cost, -p.budget)) if fitting else None

    def overhead_lower_bound(self, point: CurvePoint) -> float | None:
        """A point's reported cost lower bound as an overhead (None when the solver reports none)."""
        if point.cost_lower_bound is None or self.base_cost <= 0:
            return None
        return point.cost_lower_bound / self.base_cost - 1.0


def pareto_curve(graph: ComputeGraph, solver: str, budgets: Iterable[int], time_limit: float | None = None,
                 progress: Callable[[int, int], None] | None = None, **options: Any) -> ParetoCurve:
    """Solve at every budget and keep what each solve measured.

    Parameters
    ----------
    graph : ComputeGraph
    solver : str
        A registered solver.
    budgets : iterable of int
        Bytes; solved in increasing order.
    time_limit : float, optional
        Seconds per solve.
    progress : callable, optional
        ``progress(done, total)`` after each solve (the explorer's progress bar).
    **options
        The solver's options, the same at every budget.

    Returns
    -------
    ParetoCurve

    Raises
    ------
    UnknownSolver, SolverOptionError, BudgetError
        As :func:`remat_core.solve` does; an infeasible budget is a point, not an error.
    """
    ordered = sorted(set(int(b) for b in budgets))
    base = checkpoint_all_cost(graph)
    points = []
    for done, budget in enumerate(ordered, start=1):
        points.append(solve_point(graph, solver, budget, time_limit, **options))
        if progress is not None:
            progress(done, len(ordered))
    return ParetoCurve(solver=solver, options=dict(options), points=tuple(points), base_cost=base)


UNLIMITED_BUDGET = 1 << 62
"""The budget a fixed policy is solved at to meet it where it is: it holds what it holds, refused only below."""


def policy_points(graph: ComputeGraph, solver: str, time_limit: float | None = None,
                  progress: Callable[[CurvePoint], None] | None = None, **options: Any) -> tuple[CurvePoint, ...]:
    """A fixed policy (a solver with ``follows_budget=False``) met as users set it: one point per setting its
    registration names (``every_n_layers`` = 1, 2, ...), each at the peak it holds, ``progress(point)`` after
    each. ``options`` are the other options, the same at every setting."""
    spec = get_solver(solver)
    if spec.tags.follows_budget:
        raise SolverOptionError(f"solver {solver!r} follows a budget: sweep it over budgets (pareto_curve)")
    points = []
    for setting in spec.policy_settings(graph):
        points.append(policy_point(solve_outcome(graph, UNLIMITED_BUDGET, solver, time_limit,
                                                 **{**options, **setting}), setting))
        if progress is not None:
            progress(points[-1])
    return tuple(points)


def policy_point(outcome: SolveOutcome, setting: Mapping[str, Any]) -> CurvePoint:
    """The point of a fixed policy's solve at :data:`UNLIMITED_BUDGET` with ``setting``: placed at the peak it
    holds, labelled with the setting."""
    point = curve_point(outcome)
    return replace(point, budget=point.peak if point.feasible else outcome.budget, setting=setting_label(setting))


def setting_label(setting: Mapping[str, Any]) -> str:
    """A fixed policy's setting as its point is labelled (``"every=2"``; ``"as set"`` for its options as they are)."""
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "as set"


def solve_point(graph: ComputeGraph, solver: str, budget: int, time_limit: float | None = None,
                **options: Any) -> CurvePoint:
    """One :class:`CurvePoint`: solve at ``budget`` and keep the measured figures (or why there is no schedule)."""
    return curve_point(solve_outcome(graph, budget, solver, time_limit, **options))


def curve_point(outcome: SolveOutcome) -> CurvePoint:
    """The :class:`CurvePoint` of a solve's outcome (a refused or failed solve is a point without a schedule).

    The outcome's schedule must still carry its simulation (the recomputed tensors are read off it):
    make points where the solve ran.
    """
    if not outcome.feasible:
        return infeasible_point(outcome.budget, outcome.seconds, outcome.smallest_feasible)
    return feasible_point(outcome.schedule, outcome.budget, outcome.seconds)


def time_overhead(stats: Mapping[str, Any]) -> float:
    """The overhead a user pays for a schedule's ``stats``: its makespan over checkpoint-all's compute time when it
    was timed over a host link (copies that do not hide count), else its cost overhead."""
    if "makespan" in stats and stats.get("checkpoint_all_cost"):
        return stats["makespan"] / stats["checkpoint_all_cost"] - 1
    return stats["overhead"]


def feasible_point(schedule: Schedule, budget: int, seconds: float) -> CurvePoint:
    """The point of a simulated schedule solved at ``budget`` in ``seconds``."""
    stats = schedule.stats
    counts = schedule.simulation.compute_counts if schedule.simulation is not None else {}
    bound = schedule.solver_info.get(LP_LOWER_BOUND)
    finite_bound = float(bound) if isinstance(bound, (int, float)) and math.isfinite(bound) else None
    return CurvePoint(budget=budget, feasible=True, peak=stats["peak"], cost=stats["cost"],
                      overhead=time_overhead(stats), recomputed={n: c for n, c in counts.items() if c > 1},
                      seconds=seconds, cost_lower_bound=finite_bound, gap=reported_gap(schedule.solver_info))


def infeasible_point(budget: int, seconds: float, smallest_feasible: int | None = None) -> CurvePoint:
    """The point of a budget the solver refused as infeasible (naming ``smallest_feasible`` if it knew one)."""
    return CurvePoint(budget=budget, feasible=False, seconds=seconds, smallest_feasible=smallest_feasible)


def curve_table(curves: Sequence[ParetoCurve]) -> list[dict[str, Any]]:
    """One row per solver and budget: the comparison table the explorer exports as CSV."""
    rows = []
    for curve in curves:
        for p in curve.points:
            rows.append({"solver": curve.solver, "budget_bytes": p.budget, "feasible": p.feasible,
                         "peak_bytes": p.peak, "cost": p.cost, "overhead": p.overhead,
                         "recomputed_tensors": len(p.recomputed) if p.feasible else None,
                         "solve_seconds": round(p.seconds, 6), "cost_lower_bound": p.cost_lower_bound,
                         "mip_gap": p.gap, "smallest_feasible_bytes": p.smallest_feasible})
    return rows
