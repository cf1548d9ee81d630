"""The route table: every way a plan runs in PyTorch, one module each, found by name.

A route says how it plans (:meth:`Route.plan`: what the solver is asked for so that what the route holds
keeps the budget), how it installs a plan (:meth:`Route.forward`: the traced forward run through autograd
with the plan in it; :meth:`Route.measure`: one measured training step) and how it explains a gap
(:meth:`Route.notes`, :meth:`Route.over_budget`). :func:`~remat_core.run.step.train_step` (``execute
--via``), :func:`~remat_core.run.rematerialized.rematerialize` and the command line read this table and
nothing else. Adding a route means writing one module here that defines a :class:`Route` subclass decorated
with :func:`register_route`, and importing the module below.

Importing the table imports no PyTorch: a route's torch-bound work is imported where it runs.
"""

from .base import ROUTES, Forward, Plan, Route, RouteRun, get_route, register_route, route_names
from . import plan, sac, compile, offload  # noqa: E402,F401  each registers its route, in table order

__all__ = ["Forward", "Plan", "ROUTES", "Route", "RouteRun", "get_route", "register_route", "route_names"]
