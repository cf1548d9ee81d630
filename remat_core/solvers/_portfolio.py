"""The quick heuristic solvers as one portfolio, run at one budget.

Two families lean on it. The separator solvers (``treewidth``, ``pathwidth``,
``pathwidth-linear``) fall back on it when no schedule over their own decomposition fits, so they
refuse a budget only when every quick heuristic refuses it too (:func:`separator_fallback`). The
exact solvers (``checkmate-milp``, ``moccasin``) search one fixed topological order; they return
a heuristic's schedule (any order) instead of their own when it costs less or when their search
finds none (:func:`prefer_cheaper_heuristic`), and start their search from the heuristics'
schedules that are in stage form. Every cost here is the simulator's: each schedule comes from
:func:`remat_core.solve`, and the exact solver's own schedule is simulated before the comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import DecompositionError, InfeasibleBudget, SolverLimitExceeded
from ..graph import ComputeGraph
from ..schedule import Schedule, simulate
from ._time import Deadline
from .base import Option

SEPARATOR_SOLVERS = ("treewidth", "pathwidth", "pathwidth-linear")
"""The solvers over a decomposition; in the portfolio they run without their own fallback."""

EVICTION_AND_CHAIN_SOLVERS = ("lifetime-split", "dtr", "dtr-eq", "greedy-size", "largest-first", "lru", "chen-greedy",
                              "chen-sqrt", "rotor", "griewank")
"""The eviction solvers (lifetime splitting, DTR's engine, XLA's greedy) and the chain solvers."""

QUICK_HEURISTICS = EVICTION_AND_CHAIN_SOLVERS + SEPARATOR_SOLVERS
"""Every heuristic solver that answers one budget in about a second or less on graphs of a thousand
nodes. ``checkmate-lp`` is left out: its LP takes minutes at a few hundred nodes."""

ANY_ORDER = Option("any_order", bool, True,
                   "compare with the quick heuristics' schedules, in any order: return the cheapest of them when it "
                   "costs less than the fixed-order result or the fixed-order search finds none (solver_info "
                   "'source' names it, 'fixed_order' keeps the search's own result); false: the fixed-order search "
                   "alone")
"""The exact solvers' option for :func:`prefer_cheaper_heuristic`."""


@dataclass(frozen=True)
class Attempt:
    """One heuristic's answer at a budget: its schedule (measured by :func:`remat_core.solve`), or why none.

    Attributes
    ----------
    solver : str
    schedule : Schedule or None
    smallest_feasible : int or None
        When refused: the smallest budget the solver knows a schedule to fit.
    detail : str
        When refused: the solver's reason.
    """

    solver: str
    schedule: Schedule | None = None
    smallest_feasible: int | None = None
    detail: str = ""

    @property
    def cost(self) -> float:
        """The simulated cost of the schedule (inf when refused)."""
        return self.schedule.stats["cost"] if self.schedule is not None else math.inf


def run_quick_heuristics(graph: ComputeGraph, budget: int, exclude: Iterable[str] = (),
                         deadline: Deadline | None = None) -> list[Attempt]:
    """Every solver of :data:`QUICK_HEURISTICS` but ``exclude`` at ``budget``, with its default options.

    The separator solvers run with ``fallback=False``: their fallback is this portfolio. Once
    ``deadline`` has passed the rest are skipped (each answers one budget in about a second at a
    thousand nodes, and gets the time left as its limit).
    """
    from .api import solve  # the registry's front door: imported here, the solvers import this module

    skipped = set(exclude)
    attempts = []
    for name in QUICK_HEURISTICS:
        if name in skipped:
            continue
        if deadline is not None and deadline.expired():
            attempts.append(Attempt(name, detail="skipped: the time limit had passed"))
            continue
        options = {"fallback": False} if name in SEPARATOR_SOLVERS else {}
        limit = deadline.left() if deadline is not None and deadline.limited else None
        try:
            attempts.append(Attempt(name, schedule=solve(graph, budget, name, time_limit=limit or None, **options)))
        except InfeasibleBudget as e:
            attempts.append(Attempt(name, smallest_feasible=e.smallest_feasible, detail=e.detail))
        except (DecompositionError, SolverLimitExceeded) as e:  # a limit of this solver: no answer from it
            attempts.append(Attempt(name, detail=str(e)))
    return attempts


def cheapest(attempts: Iterable[Attempt]) -> Attempt | None:
    """The attempt with the cheapest schedule (the first on ties), or None when every one was refused."""
    found = [a for a in attempts if a.schedule is not None]
    return min(found, key=lambda a: a.cost) if found else None


def smallest_known_feasible(attempts: Iterable[Attempt], *known: int | None) -> int | None:
    """The smallest budget some schedule is known to fit: a schedule's peak, a refusal's named budget, or ``known``."""
    values = [k for k in known if k is not None]
    for a in attempts:
        values.append(a.schedule.stats["peak"] if a.schedule is not None else a.smallest_feasible)
    values = [v for v in values if v is not None]
    return min(values) if values else None


def separator_fallback(graph: ComputeGraph, budget: int, solver: str, own: Callable[[], Schedule], *,
                       enabled: bool, info: Mapping[str, Any], deadline: Deadline | None = None) -> Schedule:
    """``own()``; when it refuses the budget and ``enabled``, the cheapest quick heuristic's schedule that fits.

    The other separator solvers (each over its own decomposition) and the eviction and chain
    solvers are tried; ``solver_info`` is ``info`` with ``strategy`` naming the winner ("fallback:
    rotor"), ``fallback`` its name, ``fallback_info`` its own ``solver_info`` and ``own_refusal``
    why ``own()`` refused.

    Raises
    ------
    InfeasibleBudget
        When every one refuses too, with the smallest budget any of them (``own()`` included)
        knows a schedule to fit.
    """
    try:
        return own()
    except InfeasibleBudget as refusal:
        if not enabled:
            raise
        attempts = run_quick_heuristics(graph, budget, exclude=(solver,), deadline=deadline)
        best = cheapest(attempts)
        if best is None:
            raise InfeasibleBudget(budget, smallest_known_feasible(attempts, refusal.smallest_feasible), solver,
                                   f"{refusal.detail}; no other quick heuristic fits either "
                                   f"({', '.join(a.solver for a in attempts)})") from None
        inner = best.schedule.solver_info.get("strategy")
        return _relabelled(best, {**info, "strategy": f"fallback: {best.solver}" + (f" ({inner})" if inner else ""),
                                  "fallback": best.solver, "own_refusal": refusal.detail}, "fallback_info")


def prefer_cheaper_heuristic(graph: ComputeGraph, budget: int, solver: str, search: Callable[[], Schedule],
                             attempts: Sequence[Attempt], info: Mapping[str, Any]) -> Schedule:
    """The fixed-order ``search()``'s schedule, unless a heuristic's schedule in ``attempts`` fits and costs less.

    A heuristic's schedule is also returned when ``search()`` refuses the budget. Then
    ``solver_info`` is ``info`` plus ``source`` (the heuristic's name), ``exact`` False,
    ``source_info`` (its ``solver_info``) and ``fixed_order``: the search's own ``solver_info``
    with its simulated ``cost`` (objective, bound and gap hold for the fixed order), or its
    ``refusal``. No gap is reported for the returned schedule: the search's bound holds only for
    schedules in the fixed order.

    Raises
    ------
    InfeasibleBudget
        When ``search()`` and every heuristic refuse, with the smallest budget any of them knows.
    """
    best = cheapest(attempts)
    try:
        own = search()
    except InfeasibleBudget as refusal:
        if best is None:
            raise InfeasibleBudget(budget, smallest_known_feasible(attempts, refusal.smallest_feasible), solver,
                                   refusal.detail) from None
        fixed = {"refusal": refusal.detail}
        why = f"the fixed-order search found no schedule within the budget; {best.solver}'s fits"
    else:
        own_cost = simulate(graph, own).cost
        if best is None or best.cost >= own_cost:
            return own
        fixed = {**own.solver_info, "cost": own_cost}
        why = (f"{best.solver}'s schedule (any order) costs {best.cost:g}, less than the best schedule in the fixed "
               f"topological order ({own_cost:g})")
    stopped = {"stopped_at_time_limit": True} if fixed.get("stopped_at_time_limit") else {}
    return _relabelled(best, {**info, "source": best.solver, "exact": False, "why": why, "fixed_order": fixed,
                              **stopped}, "source_info")


def _relabelled(attempt: Attempt, solver_info: dict[str, Any], key: str) -> Schedule:
    """The attempt's ops and reasons under new ``solver_info``, its own kept under ``key``."""
    schedule = attempt.schedule
    return Schedule.from_ops(schedule.ops, schedule.reasons,
                             solver_info={**solver_info, key: dict(schedule.solver_info)})
