"""What every route is: the :class:`Route` base, what it plans and runs (:class:`Plan`, :class:`Forward`,
:class:`RouteRun`), and the table the route modules register in (:data:`ROUTES`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...errors import ExecutionError
from ...graph import format_bytes
from ..report import BUDGET_SLACK, PEAK_TOLERANCE, Uncontrolled

if TYPE_CHECKING:
    from ...graph import ComputeGraph
    from ...schedule import Link, Schedule, SimulationResult
    from ..installed import InstalledPlan
    from ..measure import MeasuredStep
    from ..module_policy import ModulePolicy
    from ..step import TracedStep


@dataclass(frozen=True)
class Plan:
    """A schedule a route will run, and the peak (bytes, weights included) a step through the route holds with it."""

    schedule: "Schedule"
    promised_peak: int


@dataclass
class Forward:
    """One forward run through a route: the values it hands back, what to do right before the backward, and what
    the route found it could not follow on this run (a compile's knapsack, the first time)."""

    returned: dict[str, Any]
    before_backward: Callable[[], None] = lambda: None
    uncontrolled: Sequence[Uncontrolled] = ()
    hooks: Any = None


@dataclass
class RouteRun:
    """One measured training step through a route (see :meth:`Route.measure`)."""

    measured: "MeasuredStep"
    uncontrolled: tuple[Uncontrolled, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    simulated: "SimulationResult | None" = None
    """What the route's own schedule simulates to, when it is not the plan's (SAC's regions)."""
    own_forward: bool = False
    """It ran the model's own forward (the plan on its modules), which draws random ops as eager PyTorch does."""
    policy_cost: float = 0.0
    """What the route adds that the ops' costs do not hold (SAC's per-op policy), in their units."""
    mechanism: "Mechanism | None" = None
    """What running the route itself costs beyond the eager step, op by op (the replay's interpretation)."""


@dataclass(frozen=True)
class Mechanism:
    """A route's own cost per op it performs, calibrated on the model: its step with nothing recomputed
    (``baseline_seconds``, performing ``baseline_ops``) against the eager step. A schedule of ``ops`` ops then costs
    ``(baseline_seconds - eager_seconds) * ops / baseline_ops`` beyond its ops' own time."""

    baseline_seconds: float
    baseline_ops: int
    ops: int

    def seconds(self, eager_seconds: float) -> float:
        """The route's own seconds on this schedule beyond what eager PyTorch spends (never below zero)."""
        if self.baseline_ops <= 0:
            return 0.0
        return max(0.0, self.baseline_seconds - eager_seconds) * self.ops / self.baseline_ops


class Route:
    """One way of running a plan in PyTorch. Subclasses set the class attributes and override what differs."""

    name: str = ""
    summary: str = ""
    """One line for ``--via``'s help."""
    installs_module: bool = True
    """Whether :func:`~remat_core.run.rematerialized.rematerialize` can install it in a module."""
    needs_link: bool = False
    """It runs a plan's offloads: the solve needs a transfer lane."""
    keeps_budget: bool = True
    """It is planned for what it holds (False: what it holds is decided elsewhere, and measured only)."""
    peak_gap: str = "a kernel allocated otherwise than when it was measured at trace time"
    """Why a measured peak may differ from the simulated one, for the report's note."""
    over_budget_reason: str = "a kernel allocated otherwise than when it was measured at trace time"
    """Why a step may hold more than its budget, for ``execute``'s warning."""
    planner: str = "auto"
    """The solver it plans with when none is named (``execute --via``, ``rematerialize(via=...)``)."""

    def default_solver(self, graph: "ComputeGraph") -> str:
        """The solver to plan ``graph`` with when the caller names none: :attr:`planner` where it applies."""
        from ...solvers import get_solver

        tags = get_solver(self.planner).tags
        if tags.needs_traced_model and not graph.attachments.executable_ops:
            return "auto"
        return self.planner

    def ready(self) -> None:
        """Refuse to run where this route cannot (:class:`ExecutionError`), before anything is measured."""

    def check(self, link: "Link | None") -> None:
        """Refuse, before anything is traced or solved, a plan this route cannot run (:class:`ExecutionError`):
        one without the transfer lane it needs, or a route that cannot run here."""
        self.ready()
        if self.needs_link and link is None:
            raise ExecutionError(f"via {self.name!r} runs a plan's offloads: give bandwidth= (on the command line "
                                 f"--bandwidth), a preset such as 'pcie4', a rate such as '12GB/s' or a Link, so "
                                 f"that the solver plans copies (pofo, or auto)")

    def plan(self, graph: "ComputeGraph", budget: int, solve: Callable[[int], "Schedule"],
             returns: Sequence[str] | None = None) -> Plan:
        """The schedule to run at ``budget``: ``solve(budget)``, whose simulated peak the step holds.

        ``returns``: the FX values the forward hands back (a route that simulates its own regions reads them)."""
        schedule = solve(budget)
        return Plan(schedule, schedule.stats["peak"])

    def on_modules(self, installed: "InstalledPlan") -> "ModulePolicy | None":
        """The plan as the route installs it on the model's own modules, whose own forward then runs it (the user's
        code, at its own speed), or None: the route runs the traced program (:meth:`forward`)."""
        return None

    def forward(self, installed: "InstalledPlan", values: Mapping[str, Any], *, seed: int | None = None,
                plan: bool = True) -> Forward:
        """The traced forward on real ``values`` with the plan installed (autograd records the backward)."""
        raise ExecutionError(f"--via {self.name} runs the schedule op by op: it installs nothing in a module")

    def measure(self, step: "TracedStep", timing_runs: int) -> RouteRun:
        """One training step through the route on the traced model, measured by the one meter."""
        from ..measure import measure_step

        measured = measure_step(step.runner(self), step.model, step.device, timing_runs)
        return RouteRun(measured, uncontrolled=step.installed.program.uncontrolled)

    def comparable(self, has_random_ops: bool) -> bool:
        """Whether its gradients can be compared with the reference (its random ops draw the same masks)."""
        return True

    def notes(self, measured_peak: int, simulated_peak: int, comparable: bool) -> list[str]:
        """What a reader of the step's figures should know: a measured peak more than :data:`PEAK_TOLERANCE` off
        the simulated one, and why."""
        if simulated_peak > 0 and abs(measured_peak / simulated_peak - 1) > PEAK_TOLERANCE:
            return [f"measured peak {measured_peak:,} B is {measured_peak / simulated_peak - 1:+.0%} from the "
                    f"simulated {simulated_peak:,} B: {self.peak_gap}"]
        return []

    def over_budget(self, held: int, budget: int, details: Mapping[str, Any]) -> str | None:
        """What to tell a user whose step held ``held`` bytes (weights and inputs included) over ``budget``, or
        None when it kept the budget to within :data:`BUDGET_SLACK`."""
        if held <= budget * (1 + BUDGET_SLACK):
            return None
        return (f"the step held {format_bytes(held)} with the weights and inputs, {held / budget:.2f}x the budget of "
                f"{format_bytes(budget)}: {self.over_budget_reason}")


ROUTES: dict[str, Route] = {}
"""Route name -> the route, in the order ``--via`` lists them (the first is the command line's default)."""


def register_route(cls: type[Route]) -> type[Route]:
    """Enter one instance of ``cls`` in :data:`ROUTES` under its name."""
    if not cls.name or cls.name in ROUTES:
        raise ValueError(f"route {cls.name!r}: a route needs a name no other route has")
    ROUTES[cls.name] = cls()
    return cls


def get_route(name: str) -> Route:
    """The route called ``name``; :class:`ExecutionError` naming the routes otherwise."""
    try:
        return ROUTES[name]
    except KeyError:
        raise ExecutionError(f"unknown way to run a plan {name!r}; use one of {', '.join(ROUTES)}") from None


def route_names(*, installs_module: bool | None = None) -> tuple[str, ...]:
    """The routes' names, in table order (only those that can be installed in a module, or only those that
    cannot, when asked)."""
    return tuple(name for name, route in ROUTES.items()
                 if installs_module is None or route.installs_module == installs_module)
