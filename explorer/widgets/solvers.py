"""Choosing solvers: the session's solver, those compared with it, their options (widgets built from
each solver's declared options) and the time limit."""

from __future__ import annotations

from typing import Any

import streamlit as st

from remat_core import get_solver, list_solvers

from .. import state
from .text import plain


def solver_label(name: str) -> str:
    spec = get_solver(name)
    return f"{name} · {'exact' if spec.exact else 'heuristic'}"


def _solver_changed(key: str) -> None:
    st.session_state[state.SOLVER] = st.session_state[key]
    st.session_state[state.COMPARE] = [s for s in state.compared() if s != st.session_state[key]]


def _compare_changed(key: str) -> None:
    st.session_state[state.COMPARE] = list(st.session_state[key])


def solver_picker(key: str = "w_solver") -> str:
    """Choose the session's solver from the registry; returns its name."""
    names = [s.name for s in list_solvers()]
    st.session_state[key] = state.solver()
    st.selectbox("Solver", names, key=key, format_func=solver_label, on_change=_solver_changed, args=(key,),
                 help="Every solver in the registry; each schedule is checked by the one simulator.")
    st.caption(plain(get_solver(state.solver()).description))
    return state.solver()


def compare_picker(key: str = "w_compare") -> list[str]:
    """Choose solvers to compare with the session's solver."""
    others = [s.name for s in list_solvers() if s.name != state.solver()]
    st.session_state[key] = state.compared()
    st.multiselect("Compare with", others, key=key, on_change=_compare_changed, args=(key,),
                   placeholder="other solvers" if others else "no other solver is registered",
                   disabled=not others, help="Their Pareto curves and exact results at the budget appear beside.")
    return state.compared()


def _option_changed(key: str, solver: str, option: str, default: Any) -> None:
    state.set_option(solver, option, st.session_state[key], default)


def option_widgets(solver: str) -> dict[str, Any]:
    """One widget per option the solver declares (type, range, choices); returns the chosen values."""
    spec = get_solver(solver)
    chosen = state.options_of(solver)
    if not spec.options:
        st.caption(f"{plain(solver)} has no options.")
    for option in spec.options:
        key = f"w_option_{solver}_{option.name}"
        st.session_state[key] = chosen.get(option.name, option.default)
        common = {"key": key, "help": option.help, "on_change": _option_changed,
                  "args": (key, solver, option.name, option.default)}
        if option.type is bool:
            st.toggle(option.name, **common)
        elif option.choices:
            st.selectbox(option.name, list(option.choices), **common)
        elif option.type in (int, float):
            cast = option.type
            st.number_input(option.name, min_value=cast(option.low) if option.low is not None else None,
                            max_value=cast(option.high) if option.high is not None else None,
                            step=1 if cast is int else None, **common)
        elif option.type is str:
            st.text_input(option.name, **common)
        else:
            st.caption(f"{plain(option.name)}: a {option.type.__name__} option, left at its default "
                       f"({plain(repr(option.default))}).")
    return state.options_of(solver)


def time_limit_input(key: str = "w_time_limit") -> float:
    st.session_state[key] = state.time_limit()
    st.number_input("Time limit per solve (s)", min_value=0.5, max_value=600.0, step=0.5, key=key,
                    on_change=lambda: st.session_state.__setitem__(state.TIME_LIMIT, st.session_state[key]),
                    help="For solvers that search (MILP, CP): they return the best schedule found in time.")
    return state.time_limit()
