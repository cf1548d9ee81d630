"""The quick heuristic solvers as one portfolio, run at one budget.

Its members are the registered solvers tagged ``quick`` (:class:`~.registry.SolverTags`): each
answers one budget in about a second on a graph of a thousand nodes. Two families lean on it. The
separator solvers (``treewidth``, ``pathwidth``, ``pathwidth-linear``) return its cheapest schedule
when it costs less than their own or when none over their own decomposition fits, so they refuse a
budget only when every quick heuristic refuses it too (:func:`separator_fallback`). The stage-model
solvers (``checkmate-milp``, ``moccasin``) search one fixed topological order; they return a heuristic's
schedule (any order) instead of their own when it costs less or when their search finds none
(:func:`prefer_cheaper_heuristic`), and start their search from the heuristics' schedules that are
in stage form. Every cost here is the simulator's: each answer is a
:class:`~.outcome.SolveOutcome` of :func:`~.front_door.solve_outcome`, and the exact solver's own
schedule is simulated before the comparison.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import Schedule, simulate
from .deadline import Deadline
from .front_door import solve_outcome
from .outcome import FEASIBLE, STOPPED, SolveOutcome
from .registry import Option, find_solvers

ANY_ORDER = Option("any_order", bool, True,
                   "compare with the quick heuristics' schedules, in any order: return the cheapest of them when it "
                   "costs less than the fixed-order result or the fixed-order search finds none (solver_info "
                   "'source' names it, 'fixed_order' keeps the search's own result); false: the fixed-order search "
                   "alone")
"""The stage-model solvers' option for :func:`prefer_cheaper_heuristic`."""


def quick_solver_names() -> list[str]:
    """The members of the portfolio: every registered solver tagged ``quick``, in registry order."""
    return [spec.name for spec in find_solvers(quick=True)]


def run_quick_heuristics(graph: ComputeGraph, budget: int, exclude: Iterable[str] = (),
                         deadline: Deadline | None = None) -> list[SolveOutcome]:
    """The outcome of every quick solver but ``exclude`` at ``budget``, each with its portfolio options.

    A separator solver runs with ``fallback=False`` (its tags' ``portfolio_options``): its fallback
    is this portfolio. Once ``deadline`` has passed the rest are skipped (each answers one budget in
    about a second at a thousand nodes, and gets the time left as its limit).
    """
    skipped = set(exclude)
    outcomes = []
    for spec in find_solvers(quick=True):
        if spec.name in skipped:
            continue
        limit = deadline.left() if deadline is not None and deadline.limited else None
        if deadline is not None and deadline.expired():
            outcomes.append(SolveOutcome(spec.name, budget, STOPPED, detail="skipped: the time limit had passed"))
            continue
        outcomes.append(solve_outcome(graph, budget, spec.name, limit or None, **spec.tags.portfolio_options))
    return outcomes


def outcome_cost(outcome: SolveOutcome) -> float:
    """The simulated cost of an outcome's schedule (inf without one)."""
    return outcome.stats["cost"] if outcome.feasible else math.inf


def cheapest(outcomes: Iterable[SolveOutcome]) -> SolveOutcome | None:
    """The feasible outcome with the cheapest schedule (the first on ties), or None when none is feasible."""
    found = [o for o in outcomes if o.status == FEASIBLE]
    return min(found, key=outcome_cost) if found else None


def smallest_known_feasible(outcomes: Iterable[SolveOutcome], *known: int | None) -> int | None:
    """The smallest budget some schedule is known to fit: a schedule's peak, a refusal's named budget, or ``known``."""
    values = [k for k in known if k is not None]
    for o in outcomes:
        values.append(o.stats["peak"] if o.feasible else o.smallest_feasible)
    values = [v for v in values if v is not None]
    return min(values) if values else None


def separator_fallback(graph: ComputeGraph, budget: int, solver: str, own: Callable[[], Schedule], *,
                       enabled: bool, info: Mapping[str, Any], deadline: Deadline | None = None) -> Schedule:
    """The cheapest schedule that fits among ``own()`` and, when ``enabled``, the quick heuristics'.

    The other separator solvers (each over its own decomposition) and the eviction and chain
    solvers are run at the same budget whether or not ``own()`` fits: a separator recursion that
    only just fits can cost several times what a heuristic's plan does, and returning it where a
    smaller budget got the heuristic's plan would make more memory cost more. When a heuristic wins,
    ``solver_info`` is ``info`` with ``strategy`` naming it ("fallback: rotor"), ``fallback`` its
    name, ``fallback_info`` its own ``solver_info`` and ``own_refusal`` why ``own()`` refused, or
    ``own_cost`` what its own schedule costs.

    Raises
    ------
    InfeasibleBudget
        When every one refuses too, with the smallest budget any of them (``own()`` included)
        knows a schedule to fit.
    """
    try:
        schedule, refusal = own(), None
    except InfeasibleBudget as error:
        if not enabled:
            raise
        schedule, refusal = None, error
    if not enabled:
        return schedule
    outcomes = run_quick_heuristics(graph, budget, exclude=(solver,), deadline=deadline)
    best = cheapest(outcomes)
    if refusal is not None:
        if best is None:
            raise type(refusal)(budget, smallest_known_feasible(outcomes, refusal.smallest_feasible), solver,
                                f"{refusal.detail}; no other quick heuristic fits either "
                                f"({', '.join(o.solver for o in outcomes)})") from None
        return _fallback_schedule(best, info, {"own_refusal": refusal.detail})
    own_cost = simulate(graph, schedule).cost
    if best is None or outcome_cost(best) >= own_cost:
        return schedule
    return _fallback_schedule(best, info, {"own_cost": own_cost, "own_strategy": schedule.solver_info.get("strategy")})


def _fallback_schedule(best: SolveOutcome, info: Mapping[str, Any], why: Mapping[str, Any]) -> Schedule:
    """A quick heuristic's winning schedule relabelled as the separator solver's fallback."""
    inner = best.schedule.solver_info.get("strategy")
    return _relabelled(best, {**info, "strategy": f"fallback: {best.solver}" + (f" ({inner})" if inner else ""),
                              "fallback": best.solver, **why}, "fallback_info")


def prefer_cheaper_heuristic(graph: ComputeGraph, budget: int, solver: str, search: Callable[[], Schedule],
                             attempts: Sequence[SolveOutcome], info: Mapping[str, Any]) -> Schedule:
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
            raise type(refusal)(budget, smallest_known_feasible(attempts, refusal.smallest_feasible), solver,
                                refusal.detail) from None
        fixed = {"refusal": refusal.detail}
        why = f"the fixed-order search found no schedule within the budget; {best.solver}'s fits"
    else:
        own_cost = simulate(graph, own).cost
        if best is None or outcome_cost(best) >= own_cost:
            return own
        fixed = {**own.solver_info, "cost": own_cost}
        why = (f"{best.solver}'s schedule (any order) costs {outcome_cost(best):g}, less than the best schedule in the fixed "
               f"topological order ({own_cost:g})")
    stopped = {"stopped_at_time_limit": True} if fixed.get("stopped_at_time_limit") else {}
    return _relabelled(best, {**info, "source": best.solver, "exact": False, "why": why, "fixed_order": fixed,
                              **stopped}, "source_info")


def _relabelled(outcome: SolveOutcome, solver_info: dict[str, Any], key: str) -> Schedule:
    """The outcome's ops and reasons under new ``solver_info``, its own kept under ``key``."""
    schedule = outcome.schedule
    return Schedule.from_ops(schedule.ops, schedule.reasons,
                             solver_info={**solver_info, key: dict(schedule.solver_info)})
