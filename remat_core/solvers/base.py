"""The one solver interface: a registry of :class:`SolverSpec`, filled by the ``@register`` decorator.

A solver is a function ``f(graph, budget, *, time_limit, **options) -> Schedule`` that returns a
schedule whose peak is at most ``budget`` or raises :class:`~remat_core.errors.InfeasibleBudget`.
It never reports its own cost: :func:`remat_core.solve` simulates what it returns. Options are
declared (name, type, default, range) so that the CLI and the app can build their widgets from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import SolverOptionError, UnknownSolver
from ..schedule import Schedule

SolverFunction = Callable[..., Schedule]


@dataclass(frozen=True)
class Option:
    """A declared solver option: keyword-only, typed, with a default and an allowed range."""

    name: str
    type: type
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None

    def check(self, solver: str, value: Any) -> Any:
        """``value`` converted to the option's type; :class:`SolverOptionError` if it does not fit."""
        def fail(expected: str) -> SolverOptionError:
            return SolverOptionError(f"solver '{solver}': option '{self.name}' must be {expected}, got {value!r}")
        if self.type is bool:
            if not isinstance(value, bool):
                raise fail("true or false")
            return value
        if self.type in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise fail(f"a finite {'integer' if self.type is int else 'number'}")
            if self.type is int and value != int(value):
                raise fail("an integer")
            value = self.type(value)
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise fail(f"between {self.low} and {self.high}")
            return value
        if not isinstance(value, self.type):
            raise fail(f"of type {self.type.__name__}")
        if self.choices is not None and value not in self.choices:
            raise fail("one of " + ", ".join(map(repr, self.choices)))
        return value


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: its name, what it does, whether it is exact, whether it searches, and its options.

    ``searching``: it searches until its time limit (a MILP, an LP, a CP-SAT model) rather than
    answering in one pass; every exact solver does. The app runs searching solvers apart from the
    quick ones, so that a quick answer never waits behind a search.
    """

    name: str
    description: str
    exact: bool
    function: SolverFunction = field(repr=False)
    options: tuple[Option, ...] = ()
    reference: str = ""
    searching: bool = False

    def bind(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``values``, each checked; unknown names are refused."""
        known = {o.name: o for o in self.options}
        unknown = sorted(set(values) - set(known))
        if unknown:
            allowed = ", ".join(known) if known else "none"
            raise SolverOptionError(f"solver '{self.name}' has no option {', '.join(map(repr, unknown))}; "
                                    f"its options: {allowed}")
        return {name: (opt.check(self.name, values[name]) if name in values else opt.default)
                for name, opt in known.items()}

    def describe(self) -> dict[str, Any]:
        """The registry entry as plain data (for the CLI and the app)."""
        return {"name": self.name, "description": self.description, "exact": self.exact,
                "searching": self.searching, "reference": self.reference,
                "options": [{"name": o.name, "type": o.type.__name__, "default": o.default, "help": o.help,
                             "low": o.low, "high": o.high, "choices": list(o.choices) if o.choices else None}
                            for o in self.options]}


REGISTRY: dict[str, SolverSpec] = {}


def register(name: str, description: str, *, exact: bool = False, searching: bool = False,
             options: tuple[Option, ...] = (), reference: str = "") -> Callable[[SolverFunction], SolverFunction]:
    """Class the decorated function as solver ``name`` in the registry (an exact solver is a searching one)."""
    def decorate(function: SolverFunction) -> SolverFunction:
        if name in REGISTRY:
            raise ValueError(f"solver name {name!r} registered twice")
        REGISTRY[name] = SolverSpec(name, description, exact, function, tuple(options), reference,
                                    searching=searching or exact)
        return function
    return decorate


def get_solver(name: str) -> SolverSpec:
    """The registered solver called ``name``; :class:`UnknownSolver` listing the names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownSolver(f"unknown solver {name!r}; available: {', '.join(REGISTRY)}") from None


def solver_names() -> list[str]:
    """Registered solver names, in registration order."""
    return list(REGISTRY)

