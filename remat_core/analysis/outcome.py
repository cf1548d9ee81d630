"""A solve's outcome as data: the simulated schedule, or why there is none.

:func:`remat_core.solve` answers with a schedule or an exception; a table of many solves (a
comparison, a study, a results store, a worker process sending its answer back) needs both as one
value. :class:`SolveOutcome` is that value; :func:`attempt_solve` makes one in this process, and
:meth:`SolveOutcome.schedule_or_raise` turns it back into what :func:`remat_core.solve` would have
answered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from ..errors import InfeasibleBudget, RematError, SolverOptionError
from ..graph import ComputeGraph
from ..schedule import Schedule
from ..solvers import get_solver, solve

FEASIBLE, INFEASIBLE, REFUSED, FAILED = "feasible", "infeasible", "refused", "error"
"""``SolveOutcome.status`` values: a schedule within the budget; none the solver can build; the solver
did not try (the graph is larger than its formulation is built for); the solve raised an error (a
solver bug the simulator caught, or a bug of this package)."""


class SolveFailed(RematError):
    """A solve that failed in another process, raised again where its outcome is read."""


@dataclass(frozen=True)
class SolveOutcome:
    """One solver at one budget.

    Attributes
    ----------
    solver : str
    budget : int
        Bytes, pinned memory included.
    status : str
        :data:`FEASIBLE`, :data:`INFEASIBLE`, :data:`REFUSED` or :data:`FAILED`.
    schedule : Schedule or None
        The feasible schedule, with ``stats`` measured by the simulator.
    smallest_feasible : int or None
        For an infeasible outcome, the smallest budget the solver knows to be feasible.
    detail : str
        Why there is no schedule (the solver's reason, or the error).
    seconds : float
        Wall time of the solve (for a stored result: of the solve that stored it).
    from_store : bool
        Read from a results store instead of solved now.
    internal : bool
        For a failed outcome: the error was a bug of this package, not a :class:`~remat_core.RematError`.
    """

    solver: str
    budget: int
    status: str
    schedule: Schedule | None = None
    smallest_feasible: int | None = None
    detail: str = ""
    seconds: float = 0.0
    from_store: bool = False
    internal: bool = False

    @property
    def feasible(self) -> bool:
        return self.status == FEASIBLE

    @property
    def stats(self) -> Mapping[str, Any]:
        """The schedule's measured stats (empty when there is no schedule)."""
        return self.schedule.stats if self.schedule is not None else {}

    def schedule_or_raise(self) -> Schedule:
        """The schedule, or the exception :func:`remat_core.solve` raised (or would have) for this outcome.

        Raises
        ------
        InfeasibleBudget, SolverOptionError
            For an infeasible or refused outcome.
        SolveFailed, RuntimeError
            For a failed one: a package error, or a bug (exit 4 on the command line).
        """
        if self.status == FEASIBLE:
            return self.schedule
        if self.status == INFEASIBLE:
            raise InfeasibleBudget(self.budget, self.smallest_feasible, self.solver, self.detail)
        if self.status == REFUSED:
            raise SolverOptionError(self.detail)
        message = f"solver '{self.solver}' at {self.budget:,} bytes failed: {self.detail}"
        raise RuntimeError(message) if self.internal else SolveFailed(message)

    def portable(self) -> "SolveOutcome":
        """The outcome without the simulation attached to its schedule (a worker sends this back: the
        simulation is large, and the receiving side simulates the schedule again)."""
        if self.schedule is None or self.schedule.simulation is None:
            return self
        return replace(self, schedule=self.schedule.with_updates(simulation=None))


Attempt = Callable[[ComputeGraph, str, int, "float | None"], SolveOutcome]
"""``attempt(graph, solver, budget, time_limit) -> SolveOutcome``: how a table of solves gets each one."""


def attempt_solve(graph: ComputeGraph, solver: str, budget: int, time_limit: float | None = None,
                  **options: Any) -> SolveOutcome:
    """:func:`remat_core.solve` as an outcome: infeasible budgets and refused graphs become outcomes.

    Any other error propagates: an unknown solver or option (checked before the solve, so that a
    refusal is never a typo), a solver bug the simulator caught.
    """
    get_solver(solver).bind(options)
    started = time.perf_counter()
    try:
        schedule = solve(graph, budget, solver, time_limit=time_limit, **options)
    except InfeasibleBudget as e:
        return SolveOutcome(solver, int(budget), INFEASIBLE, smallest_feasible=e.smallest_feasible,
                            detail=e.detail, seconds=time.perf_counter() - started)
    except SolverOptionError as e:  # a solver that refuses this graph (too large for its formulation)
        return SolveOutcome(solver, int(budget), REFUSED, detail=str(e), seconds=time.perf_counter() - started)
    return SolveOutcome(solver, schedule.budget, FEASIBLE, schedule=schedule, seconds=schedule.stats["solve_seconds"])
