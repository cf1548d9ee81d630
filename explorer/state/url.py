"""The session's state in the page's URL: ``model``, ``level``, ``solver``, ``budget``, ``link`` and ``tensor``
(:data:`explorer.state.links.URL_PARAMS`), so that a link reproduces what you see and a reload keeps it.

- ``model``: what ``Model.source`` says (a zoo model, a generated graph's recipe, an upload's content hash;
  see :func:`explorer.state.models.model_from_source`); ``level``: a zoo model's level, ``op`` or ``module``.
- ``solver``: a registered solver's name.
- ``budget``: bytes with a unit at the budget slider's precision (``0.545GiB``, the digits its thumb shows) or a
  percent of the checkpoint-all peak (``50%``), within the slider's range, taken at the slider's first step at or
  above it (:mod:`.budgets`).
- ``link``: the host link solves may offload over (a preset, a rate, bytes per cost unit); left out when there
  is none.
- ``tensor``: a node's label (:func:`remat_core.graph.node_labels`) or id; it becomes the Why page's tensor
  (``session.WHY_TENSOR``, an id).

The frame calls :func:`open_link` at the start of every full run: parameters this session did not write
itself (a new tab, a reload, a link) are applied, each on its own; one that cannot be (an unknown model or
solver, a budget that does not parse or is out of range, a tensor the model does not have) is reported by
:func:`show_problems` and the session keeps what it had. :func:`publish` then writes the session's state
back; the budget slider calls it too, as it reruns in a fragment without the frame.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import streamlit as st

from remat_core import BudgetError, list_solvers
from remat_core.frontends import LEVELS
from remat_core.graph import node_by_label, node_label

from . import session
from .budgets import checked_budget, scale_of
from .links import URL_PARAMS
from .models import failure_message, model_from_source
from .session import Model
from ..safety import STATE_MOVED
from ..widgets.text import plain

WRITTEN = "url_written"
"""Session key: the last parameter sets this session wrote (a request still carrying one of them is no link)."""
WRITTEN_AT = "url_written_at"
"""Session key: when this session last wrote the URL (``time.monotonic``)."""
LAG_SECONDS = 1.5
"""A request this soon after a write may still carry the URL from before it (the browser had not applied it)."""
MAY_LAG = "url_may_lag"
"""Session key, for the run: the URL the request carries may be from before the session's last move (pages with
parameters of their own, the Learn page's, read it rather than following a stale URL)."""
LAST_PAGE = "url_last_page"
"""Session key: the page the last full run showed."""
HOLD = "url_hold"
"""Session key: True for a run that came Back to an entry without parameters, which is left as it is."""
PROBLEMS = "url_problems"
"""Session key: what the last link asked that could not be done, and the state it opened on (for
:func:`show_problems`)."""
REMEMBERED_WRITES = 8


def current_params() -> dict[str, str]:
    """The explorer's parameters in the URL now (the last value of a repeated one)."""
    return {name: st.query_params[name] for name in URL_PARAMS if name in st.query_params}


def state_params() -> dict[str, str]:
    """The session's model, level, solver, budget and tensor as URL parameters."""
    model = session.model()
    graph = model.graph
    params = {"model": model.source, "level": model.level, "solver": session.solver(),
              "budget": scale_of(graph).text(session.budget()), "link": session.link_text() or None}
    tensor = st.session_state.get(session.WHY_TENSOR)
    if tensor is not None and tensor in graph:
        params["tensor"] = node_label(graph, tensor)
    return {name: params[name] for name in URL_PARAMS if params.get(name) is not None}


def open_link(default_model: Callable[[], Model], page: str = "") -> None:
    """Apply the URL's parameters unless they are what this session last wrote, fill in the session's defaults
    (``default_model()`` only when no model is set), and write the state back (:func:`publish`).

    The browser's Back and Forward bring back URLs this session wrote before: they are followed (writing
    the current state over them pushed a new history entry, and Back could never leave the page). A URL
    this session wrote before is not followed when a control or the app itself (``st.rerun``) moved the
    state just before this run, or the session wrote the URL less than :data:`LAG_SECONDS` ago: the request
    may carry the URL from before the move (an upload's second rerun does). Back onto an entry without
    parameters on the same ``page`` (Streamlit's menu leaves one before the page writes its state) keeps the
    URL as it is.
    """
    params = current_params()
    moved = st.session_state.pop(STATE_MOVED, False)
    moved = moved or time.monotonic() - st.session_state.get(WRITTEN_AT, -math.inf) < LAG_SECONDS
    written = st.session_state.get(WRITTEN, [])
    last_page, st.session_state[LAST_PAGE] = st.session_state.get(LAST_PAGE), page
    st.session_state[MAY_LAG] = moved
    follow = followed(params, WRITTEN)
    st.session_state[HOLD] = not params and bool(written) and not moved and page == last_page
    problems = _open_model(params) if follow else []
    session.ensure(default_model)
    if follow:
        problems += _apply_settings(params)
    publish()
    if follow:
        st.session_state[PROBLEMS] = (problems, _key(state_params()))


def publish() -> None:
    """Write the session's state into the URL when it differs (in :data:`URL_PARAMS` order, other parameters kept);
    not in a run that came Back to an entry without parameters (see :func:`open_link`)."""
    if st.session_state.get(HOLD):
        return
    wanted = state_params()
    if wanted != current_params():
        others = {name: st.query_params.get_all(name) for name in st.query_params if name not in URL_PARAMS}
        st.query_params.from_dict({**others, **wanted})
        st.session_state[WRITTEN_AT] = time.monotonic()
    remember(wanted, WRITTEN)


def followed(params: dict[str, str], memory: str) -> bool:
    """Whether the URL's ``params`` are followed: they are not the last ones the session noted under ``memory``
    (:func:`remember`), nor, when the request may predate the last write (:data:`MAY_LAG`), any noted before."""
    written = st.session_state.get(memory, [])
    key = _key(params)
    stale = st.session_state.get(MAY_LAG, False) and key in written
    return bool(params) and (not written or key != written[-1]) and not stale


def remember(params: dict[str, str], memory: str) -> None:
    """Note ``params`` under ``memory`` as what the URL shows now (the last few are kept, the newest last)."""
    key = _key(params)
    written = [w for w in st.session_state.get(memory, []) if w != key]
    st.session_state[memory] = (written + [key])[-REMEMBERED_WRITES:]


def end_of_run() -> None:
    """The full run is over: later runs of a fragment (a slider moved) write the URL again."""
    st.session_state.pop(HOLD, None)
    st.session_state.pop(STATE_MOVED, None)
    st.session_state.pop(MAY_LAG, None)


def show_problems() -> None:
    """Say what the last link asked that could not be done, and what the page shows instead, for as long as the
    session shows what the link opened on (reruns a page makes by itself keep the message; a change ends it)."""
    problems, opened_on = st.session_state.get(PROBLEMS) or ([], None)
    if opened_on != _key(state_params()):
        st.session_state.pop(PROBLEMS, None)
    elif problems:
        shown = session.model()
        st.warning("This link could not be followed in full:  \n"
                   + "  \n".join(f"· {plain(p)}" for p in problems)
                   + f"  \nShowing **{plain(shown.graph.name)}** with {plain(session.solver())} at "
                     f"{scale_of(shown.graph).label(session.budget())} instead.", icon=":material/link_off:")


def _key(params: dict[str, str]) -> tuple:
    return tuple(sorted(params.items()))


def _open_model(params: dict[str, str]) -> list[str]:
    """Open the link's model (at its level) unless it is the current one; the problems, if any."""
    level = params.get("level")
    if level is not None and level not in LEVELS:
        return [f"level={level!r} is no level: use {' or '.join(LEVELS)}"]
    current: Model | None = st.session_state.get(session.MODEL)
    source = params.get("model", current.source if current is not None and level is not None else None)
    if source is None:
        return []
    if current is not None and current.source == source and (current.level is None or level in (None, current.level)):
        return []
    try:
        model = model_from_source(source, level)
    except Exception as e:  # noqa: BLE001 - whatever broke, say so and keep the model
        return [f"model={source!r} could not be opened: {failure_message(e)}"]
    session.set_model(model)
    return []


def _apply_settings(params: dict[str, str]) -> list[str]:
    """Apply the link's solver, budget and tensor to the current model; the problems, if any."""
    problems = []
    graph = session.graph()
    if (name := params.get("solver")) is not None and name != session.solver():
        names = [s.name for s in list_solvers()]
        if name in names:
            st.session_state[session.SOLVER] = name
            st.session_state[session.COMPARE] = [s for s in session.compared() if s != name]
        else:
            problems.append(f"solver={name!r} is not a solver here; the solvers are {', '.join(names)}")
    if (text := params.get("budget")) is not None:
        try:
            session.set_budget(checked_budget(text, graph))
        except BudgetError as e:
            problems.append(f"budget={text!r}: {e}")
    if (text := params.get("link")) is not None:
        try:
            session.set_link(text)
        except ValueError as e:
            problems.append(f"link={text!r}: {e}")
    if (text := params.get("tensor")) is not None:
        found = node_by_label(graph, text)
        if found is None:
            problems.append(f"tensor={text!r}: {graph.name} has no node with that label or id")
        else:
            st.session_state[session.WHY_TENSOR] = found
    return problems
