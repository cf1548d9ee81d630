"""A solve's outcome as one value: the simulated schedule, or why there is none.

Every path that solves for someone else answers with a :class:`SolveOutcome`: the command line,
the results store, a batch of solves on workers or on Ray, the explorer's jobs and pages. It is made
once, where the solve runs (:func:`~remat_core.solvers.solve_outcome`), and never turned into an
exception and back. :func:`remat_core.solve` is the same solve for a Python caller who wants the
schedule or an exception.

Outcomes cross processes small: pickled, the schedule travels as packed bytes (a 10,000-node
graph's schedule is 2.4 MB packed, 12 MB as Python objects) and is unpacked only when asked for, so
a table of outcomes (the explorer keeps hundreds) holds each schedule's ``stats`` and ``solver_info``
without its ops. :meth:`SolveOutcome.portable` also leaves the simulation behind, for a receiver
that simulates again anyway (a batch driver, which takes no worker's word for a peak).
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping

from ..errors import InfeasibleBudget, RematError, SearchStopped, SolverOptionError
from ..graph import format_bytes
from ..schedule import Schedule

FEASIBLE, INFEASIBLE, STOPPED, REFUSED, FAILED = "feasible", "infeasible", "stopped", "refused", "error"
STATUSES = (FEASIBLE, INFEASIBLE, STOPPED, REFUSED, FAILED)
"""``SolveOutcome.status`` values: a schedule within the budget; none the solver can build (proved, or
the solver's whole family tried); a search stopped at its time limit before it found one (more time
may find one); the solver did not try (the graph is larger than its formulation is built for); the
solve raised an error (a solver bug the simulator caught, or a bug of this package)."""


class SolveOutcome:
    """One solver at one budget on one graph.

    Attributes
    ----------
    solver : str
    budget : int
        Bytes, pinned memory included.
    status : str
        One of :data:`STATUSES`.
    schedule : Schedule or None
        The feasible schedule, with ``stats`` measured by the simulator (unpacked on first use
        after crossing a process; without its simulation then).
    smallest_feasible : int or None
        When there is no schedule: the smallest budget the solver knows to be feasible.
    detail : str
        Why there is no schedule (the solver's reason, or the error).
    seconds : float
        Wall time of the solve (for a stored result: of the solve that stored it).
    from_store : bool
        Read from a results store instead of solved now.
    internal : bool
        For a failed outcome: the error was a bug of this package, not a :class:`~remat_core.RematError`.
    stats, solver_info : mapping
        The schedule's measured stats and what its solver reported (empty without one), read
        without unpacking the schedule.
    ops : int
        How many ops the schedule has (0 without one).
    """

    _FIELDS = ("solver", "budget", "status", "smallest_feasible", "detail", "seconds", "from_store", "internal")

    def __init__(self, solver: str, budget: int, status: str, schedule: Schedule | None = None, *,
                 smallest_feasible: int | None = None, detail: str = "", seconds: float = 0.0,
                 from_store: bool = False, internal: bool = False) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown outcome status {status!r}; one of {', '.join(STATUSES)}")
        if (schedule is not None) != (status == FEASIBLE):
            raise ValueError(f"a {status} outcome {'needs' if status == FEASIBLE else 'has no'} schedule")
        self.solver, self.budget, self.status = solver, int(budget), status
        self.smallest_feasible = None if smallest_feasible is None else int(smallest_feasible)
        self.detail, self.seconds, self.from_store, self.internal = detail, float(seconds), from_store, internal
        self._schedule = schedule
        self._packed: bytes | None = None
        self.stats: Mapping[str, Any] = dict(schedule.stats) if schedule is not None else {}
        self.solver_info: Mapping[str, Any] = dict(schedule.solver_info) if schedule is not None else {}
        self.ops = len(schedule) if schedule is not None else 0

    @property
    def feasible(self) -> bool:
        return self.status == FEASIBLE

    @property
    def schedule(self) -> Schedule | None:
        """The schedule (unpacked on first use after the outcome crossed a process)."""
        if self._schedule is None and self._packed is not None:
            self._schedule = pickle.loads(self._packed)
        return self._schedule

    def schedule_or_raise(self) -> Schedule:
        """The schedule, or the error :func:`~remat_core.solve` would have raised for this outcome (an outcome read
        back from a results store answers as the solve that stored it did)."""
        if self.status == FEASIBLE:
            return self.schedule
        if self.status == STOPPED:
            raise SearchStopped(self.budget, self.smallest_feasible, self.solver, self.detail)
        if self.status == INFEASIBLE:
            raise InfeasibleBudget(self.budget, self.smallest_feasible, self.solver, self.detail)
        if self.status == REFUSED:
            raise SolverOptionError(self.detail)
        raise RematError(self.message)

    def replace(self, **changes: Any) -> "SolveOutcome":
        """A copy with some attributes changed (``schedule`` among them)."""
        values = {name: getattr(self, name) for name in self._FIELDS}
        values["schedule"] = changes.pop("schedule", self.schedule)
        values.update(changes)
        return SolveOutcome(**values)

    def portable(self) -> "SolveOutcome":
        """The outcome without the simulation attached to its schedule (a worker sends this back: the
        simulation is large, and the receiving side simulates the schedule again)."""
        if self.schedule is None or self.schedule.simulation is None:
            return self
        return self.replace(schedule=self.schedule.with_updates(simulation=None))

    @property
    def message(self) -> str:
        """What a person reads about it: the schedule's figures, or why there is none and what would fit."""
        if self.status == FEASIBLE:
            return (f"{self.solver} at {format_bytes(self.budget)}: peak {format_bytes(self.stats['peak'])}, "
                    f"overhead {self.stats['overhead']:+.1%}")
        if self.status == INFEASIBLE:
            return str(InfeasibleBudget(self.budget, self.smallest_feasible, self.solver, self.detail))
        if self.status == STOPPED:
            known = (f"; the smallest budget known to fit is {self.smallest_feasible:,} bytes"
                     if self.smallest_feasible is not None else "; no budget is known to fit yet")
            return (f"solver '{self.solver}' stopped at its time limit without a schedule within "
                    f"{self.budget:,} bytes ({self.detail}){known}; infeasibility is not proved: a longer "
                    f"--time-limit may find one")
        if self.status == REFUSED:
            return self.detail
        return f"solver '{self.solver}' at {self.budget:,} bytes failed: {self.detail}"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the schedule packed (once: the bytes are kept for the next time)."""
        state = {name: getattr(self, name) for name in (*self._FIELDS, "stats", "solver_info", "ops")}
        if self._packed is None and self._schedule is not None:
            self._packed = pickle.dumps(self._schedule, protocol=pickle.HIGHEST_PROTOCOL)
        state["_packed"] = self._packed
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._schedule = None

    def _key(self) -> tuple:
        return (*(getattr(self, name) for name in self._FIELDS), self.schedule)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SolveOutcome) and self._key() == other._key()

    __hash__ = None  # mutable cache inside: compared by value, never hashed

    def __repr__(self) -> str:
        extra = f", peak={self.stats.get('peak')}" if self.feasible else f", detail={self.detail!r}"
        return f"SolveOutcome({self.solver!r}, {self.budget}, {self.status!r}{extra})"
