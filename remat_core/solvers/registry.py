"""The one solver interface: a registry of :class:`SolverSpec`, filled by the ``@register`` decorator.

A solver is a function ``f(graph, budget, *, time_limit, **options) -> Schedule`` that returns a
schedule whose peak is at most ``budget`` or raises :class:`~remat_core.errors.InfeasibleBudget`.
It never reports its own cost: :func:`remat_core.solve` simulates what it returns. Options are
declared (name, type, default, range) so that the CLI and the app can build their widgets from them.

What kind of solver it is lives in its :class:`SolverTags`, never in a list of names kept elsewhere:
the quick portfolio, the explorer's lanes, the Learn page and the conformance suite all ask the
registry (:func:`find_solvers`). A solver's family is the subpackage of :mod:`remat_core.solvers`
its module lives in (``chains``, ``eviction``, ...); the registry reads it from the module.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from ..errors import SolverOptionError, UnknownSolver
from ..graph import ComputeGraph
from ..schedule import Schedule

SolverFunction = Callable[..., Schedule]
MAX_POLICY_SETTINGS = 8
"""A fixed policy is met at most at this many settings (Hugging Face's every n = 1 .. 8): each is a solve."""
BASELINE_FAMILY = "baseline"
"""The family of a solver whose module sits directly in :mod:`remat_core.solvers` (``checkpoint-all``)."""


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


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class SolverTags:
    """What kind of solver it is: what callers filter the registry by, and what the conformance suite expects.

    Attributes
    ----------
    family : str
        The subpackage of :mod:`remat_core.solvers` its module lives in (filled by :func:`register`).
    exact : bool
        It proves its schedule optimal (within its search space) when it finishes in time.
    searching : bool
        It searches up to its time limit (a MILP, an LP, CP-SAT, a portfolio) rather than answering
        in one pass; every exact solver does. The explorer runs these apart from the quick ones.
    quick : bool
        It answers one budget in about a second on a graph of a thousand nodes and is a member of
        the quick portfolio (:mod:`remat_core.solvers.quick`) that ``auto``, the separator solvers'
        fallback and the exact solvers' comparisons draw on.
    budget_monotone : bool
        Its cost never rises when the budget grows: by construction (a budget-independent family of
        candidates read at the budget, or a proof of optimality), or, measured rather than proven,
        because at each budget it returns the cheapest fitting schedule of several sources (the
        separator solvers with the quick portfolio). The conformance suite sweeps it.
    deterministic : bool
        The same graph, budget and options (its seed among them) give the same schedule.
    meets_named_budget : bool
        A refusal names a budget at which the same solver, asked again, returns a schedule. Searches
        whose answer depends on their time limit or an LP's rounding do not promise it.
    addressed : bool
        It places every tensor at an address in a slab of the budget's size, so rounding and fragmentation
        count against the budget: it may refuse even the checkpoint-all peak, and a refusal names a slab
        that surely fits (every tensor at once), which can be above that peak.
    uses_traced_graph : bool
        It works on a traced model's FX graph when the graph carries one (and on our sizes otherwise), so its
        answer depends on more than the graph's content hash: the results store keys it by the graph's mode too.
    needs_traced_model : bool
        It applies only to a graph traced here at op level, with its model (a policy over the model's blocks and
        ops): on any other graph it refuses, saying why (an outcome ``refused``, never a crash).
    follows_budget : bool
        Its schedule depends on the budget. False: a fixed policy (Hugging Face's checkpointing, torchtitan's),
        returned wherever it fits and refused, with its own peak named, below that.
    sees_transients : bool
        It simulates its own schedules, the kernels' transient bytes included: the front door hands it the graph
        as it is rather than with workspace nodes.
    traceable_recursion : bool
        Its recursion can be traced call by call (:func:`~remat_core.solvers.trace_recursion`): the Learn page.
    offloads : bool
        It may copy tensors to the host and back over a transfer lane: the front door passes it the
        :class:`~remat_core.schedule.Link` a solve is given (``link=``, None without one, when it must
        recompute only), and it minimises the makespan the simulator measures over that link.
    without_link : str
        For an offloading solver: the recompute-only solver whose schedules it returns when no link is
        given ("": its own recompute-only search). The conformance suite compares the two.
    portfolio_options : mapping
        Options it runs with inside the quick portfolio (a separator solver without its own fallback,
        which is the portfolio).
    test_options : mapping
        Options that keep it fast on the conformance suite's small graphs (a search's time limit).
    """

    family: str = ""
    exact: bool = False
    searching: bool = False
    quick: bool = False
    budget_monotone: bool = False
    deterministic: bool = True
    meets_named_budget: bool = True
    addressed: bool = False
    uses_traced_graph: bool = False
    needs_traced_model: bool = False
    follows_budget: bool = True
    sees_transients: bool = False
    traceable_recursion: bool = False
    offloads: bool = False
    without_link: str = ""
    portfolio_options: Mapping[str, Any] = field(default_factory=dict)
    test_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "portfolio_options", _frozen(self.portfolio_options))
        object.__setattr__(self, "test_options", _frozen(self.test_options))
        if self.exact and not self.searching:
            object.__setattr__(self, "searching", True)

    def describe(self) -> dict[str, Any]:
        """The tags as plain data."""
        return {f.name: (dict(getattr(self, f.name)) if isinstance(getattr(self, f.name), Mapping)
                         else getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: its name, what it does, its tags and its options."""

    name: str
    description: str
    function: SolverFunction = field(repr=False)
    tags: SolverTags = SolverTags()
    options: tuple[Option, ...] = ()
    reference: str = ""
    settings: Callable[[ComputeGraph], Sequence[Mapping[str, Any]]] | None = field(default=None, repr=False)
    """For a fixed policy (``follows_budget=False``): the option values a user meets it at on a graph (Hugging
    Face's ``every_n_layers`` = 1, 2, ...), each one point on a chart; None: its options as set, one point."""

    def policy_settings(self, graph: ComputeGraph) -> list[dict[str, Any]]:
        """The settings :attr:`settings` names on ``graph``, the first :data:`MAX_POLICY_SETTINGS` of them (``[{}]``
        for a policy with none)."""
        if self.settings is None:
            return [{}]
        return [dict(s) for s in self.settings(graph)][:MAX_POLICY_SETTINGS]

    @property
    def family(self) -> str:
        return self.tags.family

    @property
    def exact(self) -> bool:
        return self.tags.exact

    @property
    def searching(self) -> bool:
        return self.tags.searching

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
        return {"name": self.name, "description": self.description, "family": self.family, "exact": self.exact,
                "searching": self.searching, "reference": self.reference, "tags": self.tags.describe(),
                "options": [{"name": o.name, "type": o.type.__name__, "default": o.default, "help": o.help,
                             "low": o.low, "high": o.high, "choices": list(o.choices) if o.choices else None}
                            for o in self.options]}


REGISTRY: dict[str, SolverSpec] = {}


def family_of_module(module: str) -> str:
    """The family a solver defined in ``module`` belongs to: its subpackage of ``remat_core.solvers``."""
    parts = module.split(".")
    if len(parts) >= 4 and parts[:2] == ["remat_core", "solvers"]:
        return parts[2]
    return BASELINE_FAMILY


def family_description(family: str) -> str:
    """The first line of the family package's docstring (what its solvers share)."""
    if family == BASELINE_FAMILY:
        return "The baseline: keep everything, recompute nothing."
    doc = importlib.import_module(f"remat_core.solvers.{family}").__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else family


def register(name: str, description: str, *, tags: SolverTags = SolverTags(), options: tuple[Option, ...] = (),
             reference: str = "", settings: Callable[[ComputeGraph], Sequence[Mapping[str, Any]]] | None = None
             ) -> Callable[[SolverFunction], SolverFunction]:
    """Class the decorated function as solver ``name`` in the registry, its family read off its module."""
    def decorate(function: SolverFunction) -> SolverFunction:
        if name in REGISTRY:
            raise ValueError(f"solver name {name!r} registered twice")
        declared = {o.name for o in options} | {"time_limit"}
        unknown = sorted((set(tags.portfolio_options) | set(tags.test_options)) - declared)
        if unknown:
            raise ValueError(f"solver {name!r}: tags name options it does not declare: {', '.join(unknown)}")
        family = tags.family or family_of_module(function.__module__)
        if settings is not None and tags.follows_budget:
            raise ValueError(f"solver {name!r}: settings are for fixed policies (follows_budget=False)")
        REGISTRY[name] = SolverSpec(name, description, function, replace(tags, family=family), tuple(options),
                                    reference, settings)
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


def find_solvers(**tags: Any) -> list[SolverSpec]:
    """The registered solvers whose tags have the values given (``find_solvers(quick=True)``), in order.

    Raises
    ------
    ValueError
        For a name that is not a tag.
    """
    names = {f.name for f in fields(SolverTags)}
    unknown = sorted(set(tags) - names)
    if unknown:
        raise ValueError(f"no tag {', '.join(map(repr, unknown))}; the tags: {', '.join(sorted(names))}")
    return [spec for spec in REGISTRY.values() if all(getattr(spec.tags, k) == v for k, v in tags.items())]
