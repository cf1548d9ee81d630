"""Choosing solvers: the session's solver, those compared with it, their options (widgets built from
each solver's declared options) and the time limit.

Every number input declares its range (an option's declared one, else the largest integer a browser holds
exactly), so that Streamlit refuses what is out of it or not a number beside the input and keeps the last
good value; an option is checked against its declaration once more before it is used.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from remat_core import ComputeGraph, SolverOptionError, get_solver, list_solvers

from .. import state
from ..safety import callback
from .text import plain

PEERS_FAMILY = "peers"
"""The family of the deployed policies (``remat_core/solvers/peers/``): what users run instead of this tool."""

TIME_LIMIT_RANGE = (0.5, 600.0)
"""Seconds a solve may take, from the time-limit input."""
JS_SAFE_INTEGER = 2**53 - 1
"""The largest integer a browser's number input holds exactly: the bound of options declared without one."""


def solver_label(name: str) -> str:
    spec = get_solver(name)
    return f"{name} · {'exact' if spec.exact else 'heuristic'}"


@callback
def _solver_changed(key: str) -> None:
    st.session_state[state.SOLVER] = st.session_state[key]
    st.session_state[state.COMPARE] = [s for s in state.compared() if s != st.session_state[key]]


@callback
def _compare_changed(key: str) -> None:
    st.session_state[state.COMPARE] = list(st.session_state[key])


def applies_to(name: str, graph: ComputeGraph) -> bool:
    """Whether the solver can plan this graph: a policy over a model's blocks and ops needs the model traced here, at
    op level."""
    return not get_solver(name).tags.needs_traced_model or graph.attachments.executable_ops


def deployed_peers(graph: ComputeGraph) -> list[str]:
    """The deployed policies (the ``peers`` family: what users run instead of this tool) that apply to the graph, the
    fixed policies first (a handful of quick solves: their points land before the curves' sweeps queue up)."""
    peers = [s for s in list_solvers() if s.family == PEERS_FAMILY and applies_to(s.name, graph)]
    return [s.name for s in sorted(peers, key=lambda s: s.tags.follows_budget)]


def offered_solvers(graph: ComputeGraph) -> list[str]:
    """The registry's solvers that apply to the graph, in registration order."""
    return _offered(graph)[0]


def _offered(graph: ComputeGraph) -> tuple[list[str], list[str]]:
    """The registry's solvers that apply to the graph, and those that do not."""
    names = [s.name for s in list_solvers()]
    return [n for n in names if applies_to(n, graph)], [n for n in names if not applies_to(n, graph)]


def solver_picker(graph: ComputeGraph, key: str = "w_solver") -> str:
    """Choose the session's solver among those that apply to the graph; returns its name.

    The session's solver stays offered even where it does not apply (chosen for another model, or by a link),
    so that its refusal, which says what would work, is what the page shows.
    """
    names, unfit = _offered(graph)
    if state.solver() not in names:
        names.append(state.solver())
    st.session_state[key] = state.solver()
    st.selectbox("Solver", names, key=key, format_func=solver_label, on_change=_solver_changed, args=(key,),
                 help="The registry's solvers that apply to this model; each schedule is checked by the one "
                      "simulator.")
    st.caption(plain(get_solver(state.solver()).description))
    if unfit := [n for n in unfit if n != state.solver()]:
        st.caption(f"{plain(', '.join(unfit))}: policies over a model's blocks and ops, offered for models "
                   "traced here at op level (the zoo, an uploaded .pt2 program).")
    return state.solver()


def compare_picker(graph: ComputeGraph, key: str = "w_compare") -> list[str]:
    """Choose solvers, among those that apply to the graph, to compare with the session's solver."""
    others = [n for n in _offered(graph)[0] if n != state.solver()]
    others += [n for n in state.compared() if n not in others]
    st.session_state[key] = state.compared()
    st.multiselect("Compare with", others, key=key, on_change=_compare_changed, args=(key,),
                   placeholder="other solvers" if others else "no other solver is registered",
                   disabled=not others, help="Their Pareto curves and exact results at the budget appear beside.")
    return state.compared()


def _refused_key(key: str) -> str:
    return f"{key}_refused"


def _show_refusal(key: str) -> None:
    """The message beside an input whose last value was refused (shown until a good value is entered)."""
    if message := st.session_state.get(_refused_key(key)):
        st.warning(plain(message), icon=":material/warning:")


@callback
def _option_changed(key: str, solver: str, option: str) -> None:
    declared = next(o for o in get_solver(solver).options if o.name == option)
    try:
        value = declared.check(solver, st.session_state[key])
    except SolverOptionError as e:
        st.session_state[_refused_key(key)] = f"{e}; kept {state.options_of(solver).get(option, declared.default)!r}"
        return
    st.session_state[_refused_key(key)] = None
    state.set_option(solver, option, value, declared.default)


def option_widgets(solver: str) -> dict[str, Any]:
    """One widget per option the solver declares (type, range, choices); returns the chosen values."""
    spec = get_solver(solver)
    chosen = state.options_of(solver)
    if not spec.options:
        st.caption(f"{plain(solver)} has no options.")
    for option in spec.options:
        key = f"w_option_{solver}_{option.name}"
        st.session_state[key] = chosen.get(option.name, option.default)
        common = {"key": key, "help": option.help, "on_change": _option_changed, "args": (key, solver, option.name)}
        if option.type is bool:
            st.toggle(option.name, **common)
        elif option.choices:
            st.selectbox(option.name, list(option.choices), **common)
        elif option.type in (int, float):
            cast = option.type
            bound = JS_SAFE_INTEGER if cast is int else float(JS_SAFE_INTEGER)
            st.number_input(option.name, min_value=cast(option.low) if option.low is not None else -bound,
                            max_value=cast(option.high) if option.high is not None else bound,
                            step=1 if cast is int else None, **common)
        elif option.type is str:
            st.text_input(option.name, **common)
        else:
            st.caption(f"{plain(option.name)}: a {option.type.__name__} option, left at its default "
                       f"({plain(repr(option.default))}).")
        _show_refusal(key)
    return state.options_of(solver)


@callback
def _time_limit_changed(key: str) -> None:
    st.session_state[state.TIME_LIMIT] = float(st.session_state[key])


def time_limit_input(key: str = "w_time_limit") -> float:
    st.session_state[key] = state.time_limit()
    st.number_input("Time limit per solve (s)", min_value=TIME_LIMIT_RANGE[0], max_value=TIME_LIMIT_RANGE[1],
                    step=0.5, key=key, on_change=_time_limit_changed, args=(key,),
                    help="For solvers that search (MILP, CP): they return the best schedule found in time.")
    return state.time_limit()
