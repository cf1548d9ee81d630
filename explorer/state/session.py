"""Session state: the current model, budget, solvers and their options, set once with defaults.

Canonical values live under the keys below and survive page switches; widgets use their own
``w_``-prefixed keys (Streamlit drops a widget's state when its page is not shown) and copy into
the canonical keys in their ``on_change`` callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import streamlit as st

from remat_core import ComputeGraph, checkpoint_all_peak, list_solvers, memory_lower_bound
from remat_core.schedule import Link
from remat_core.schedule.links import parse_link
from remat_core.solvers import DEFAULT_SOLVER

from .budgets import scale_of

MODEL = "model"
BUDGET = "budget"
SOLVER = "solver"
COMPARE = "compare"
OPTIONS = "options"
TIME_LIMIT = "time_limit"
WHY_TENSOR = "why_tensor"
NOTICE = "notice"
PARETO_LOG = "pareto_log_y"
LINK = "link"

PREFERRED_SOLVERS = ("auto", "dtr", "rotor", "chen-greedy", "checkmate-lp", "treewidth", "lru", DEFAULT_SOLVER)
"""The first of these that is registered is the solver a new session starts with."""
DEFAULT_TIME_LIMIT = 10.0
DEFAULT_BUDGET_FRACTION = 0.5
"""A new model starts at this fraction of the way from the lower bound to the checkpoint-all peak."""


@dataclass(frozen=True)
class Model:
    """The model being explored: its graph, where it came from, and its parameter count if known.

    ``rebuild`` traces the model again, giving the graph with the model behind it: a picklable
    callable (a ``functools.partial`` of a tracer), because the model itself does not travel to the
    worker process that runs schedules on real tensors. None when no model stands behind the graph
    (a graph read from JSON or ONNX, or generated).

    ``source`` is the name a link gives the model (the URL's ``model=``; see
    :func:`explorer.state.models.model_from_source`) and ``level`` a zoo model's level (``level=``); None
    when a link cannot name it.
    """

    graph: ComputeGraph
    origin: str
    parameters: int | None = None
    rebuild: Callable[[], ComputeGraph] | None = None
    source: str | None = None
    level: str | None = None

    @property
    def key(self) -> str:
        """The cache key of everything derived from this model: the graph's content hash."""
        return self.graph.content_hash


def ensure(default_model) -> None:
    """Fill in every missing key; ``default_model()`` builds the model a new session opens on."""
    state = st.session_state
    if MODEL not in state:
        set_model(default_model())
    state.setdefault(SOLVER, default_solver())
    state.setdefault(COMPARE, [])
    state.setdefault(OPTIONS, {})
    state.setdefault(TIME_LIMIT, DEFAULT_TIME_LIMIT)
    state.setdefault(PARETO_LOG, False)
    state.setdefault(LINK, "")
    registered = {s.name for s in list_solvers()}
    if state[SOLVER] not in registered:
        state[SOLVER] = default_solver()
    state[COMPARE] = [s for s in state[COMPARE] if s in registered and s != state[SOLVER]]


def default_solver() -> str:
    """The first registered solver of :data:`PREFERRED_SOLVERS` (else the first registered)."""
    names = [s.name for s in list_solvers()]
    return next((s for s in PREFERRED_SOLVERS if s in names), names[0])


def default_budget(graph: ComputeGraph) -> int:
    """Half way from the lower bound to the checkpoint-all peak (where solvers differ most), at the budget
    slider's nearest step above (a short text in the URL)."""
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    return scale_of(graph).snap(int(low + DEFAULT_BUDGET_FRACTION * (high - low)))


def set_model(model: Model) -> None:
    """Make ``model`` current; the budget moves to its default and per-model picks are cleared."""
    st.session_state[MODEL] = model
    st.session_state[BUDGET] = default_budget(model.graph)
    st.session_state[WHY_TENSOR] = None


def model() -> Model:
    return st.session_state[MODEL]


def graph() -> ComputeGraph:
    return st.session_state[MODEL].graph


def budget() -> int:
    return st.session_state[BUDGET]


def set_budget(value: int) -> None:
    """Make ``value`` bytes the budget, at the budget slider's first step at or above it (one value for the thumb,
    the URL and the page: :meth:`~.budgets.BudgetScale.snap`)."""
    st.session_state[BUDGET] = scale_of(graph()).snap(int(value))


def solver() -> str:
    return st.session_state[SOLVER]


def compared() -> list[str]:
    return list(st.session_state[COMPARE])


def time_limit() -> float:
    return float(st.session_state[TIME_LIMIT])


def options_of(name: str) -> dict[str, Any]:
    """The options chosen for solver ``name`` (only those changed from their defaults)."""
    return dict(st.session_state[OPTIONS].get(name, {}))


def set_option(name: str, option: str, value: Any, default: Any) -> None:
    chosen = dict(st.session_state[OPTIONS].get(name, {}))
    if value == default:
        chosen.pop(option, None)
    else:
        chosen[option] = value
    st.session_state[OPTIONS] = {**st.session_state[OPTIONS], name: chosen}


def link_text() -> str:
    """The transfer lane to the host as the user named it (a preset, a rate): "" when there is none."""
    return st.session_state[LINK]


def link() -> Link | None:
    """The transfer lane solves plan copies over (None: recompute only)."""
    return parse_link(st.session_state[LINK]) if st.session_state[LINK] else None


def set_link(text: str) -> None:
    """Make ``text`` (a preset, a rate such as ``12GB/s``, bytes per cost unit; "" for none) the transfer lane.

    Raises
    ------
    ValueError
        For text that names no link (the message says what does); the lane stays as it was.
    """
    text = text.strip()
    if text:
        parse_link(text)
    st.session_state[LINK] = text


def solve_options(name: str) -> dict[str, Any]:
    """What a solve of ``name`` is given: its chosen options, and the transfer lane when there is one."""
    chosen = options_of(name)
    lane = link()
    return {**chosen, "link": lane} if lane is not None else chosen


def pareto_log() -> bool:
    """Whether the Pareto chart's overhead axis is logarithmic."""
    return bool(st.session_state[PARETO_LOG])


def set_pareto_log(value: bool) -> None:
    st.session_state[PARETO_LOG] = bool(value)


def notice(text: str) -> None:
    """A message for the next run to show once (after a button changed the page's state)."""
    st.session_state[NOTICE] = text


def pop_notice() -> str | None:
    return st.session_state.pop(NOTICE, None)
