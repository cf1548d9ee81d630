"""The budget slider (in a unit chosen for the model, marked with the lower bound and the checkpoint-all
peak) and a box to type a budget in."""

from __future__ import annotations

import streamlit as st

from remat_core import BudgetError
from remat_core.graph import format_bytes
from remat_core.viz import LOWER_BOUND, MARK_LINES, PEAK

from .. import state
from ..safety import callback
from ..state import url
from ..state.budgets import BudgetScale, budget_scale, checked_budget
from .text import plain

__all__ = ["BudgetScale", "budget_marks", "budget_scale", "budget_slider", "other_budget_slider", "typed_budget"]

TYPED_KEY = "w_budget_text"
MAX_TYPED_CHARS = 64
"""Longer text is no budget."""


@callback
def _budget_changed(key: str, scale: BudgetScale) -> None:
    state.set_budget(scale.to_bytes(st.session_state[key]))


def budget_slider(scale: BudgetScale, key: str = "w_budget", label: str = "Memory budget",
                  typed_key: str = TYPED_KEY) -> int:
    """The session's budget as a slider (in the scale's unit) with its marks; returns it in bytes.

    Under it, why the budget last typed (in :func:`typed_budget`'s box ``typed_key``) was not applied:
    the box sits in a narrow column. Writes the budget into the page's URL too: the slider lives in a
    fragment, which reruns without the frame.
    """
    st.session_state[key] = scale.to_units(state.budget())
    _slider(scale, key, label, on_change=_budget_changed, args=(key, scale))
    if error := st.session_state.get(_typed_error_key(typed_key)):
        st.warning(f"Typed budget not applied: {plain(error)}", icon=":material/warning:")
    url.publish()
    return state.budget()


def other_budget_slider(scale: BudgetScale, key: str, label: str, default: int) -> int:
    """A second budget, independent of the session's (the Why page's comparison); returns bytes."""
    st.session_state.setdefault(key, scale.to_units(default))
    _slider(scale, key, label)
    return scale.to_bytes(st.session_state[key])


def _slider(scale: BudgetScale, key: str, label: str, **callback) -> None:
    st.slider(label, min_value=scale.low, max_value=scale.high, step=scale.step, format=scale.format, key=key,
              help=f"Peak memory allowed, parameters and inputs included. No schedule fits under the lower bound "
                   f"({format_bytes(scale.lower_bound)}); the checkpoint-all peak ({format_bytes(scale.peak)}) "
                   f"needs no recomputation.", **callback)
    budget_marks(scale)


def budget_marks(scale: BudgetScale) -> None:
    """The lower bound and the checkpoint-all peak marked under the slider's track, in the colours of their
    lines on the Pareto chart (red is the budget's there); the peak's a line below, so that the two never run
    into each other on a narrow track (the Schedule page shares the budget's row with the host link)."""
    st.markdown(marks_html(scale), unsafe_allow_html=True)


def marks_html(scale: BudgetScale) -> str:
    """The marks of :func:`budget_marks` as HTML."""
    def where(nbytes: int) -> float:
        return 100 * (nbytes / scale.unit.size - scale.low) / max(scale.high - scale.low, 1e-12)
    marks = [(where(scale.lower_bound), MARK_LINES[LOWER_BOUND][0], f"{LOWER_BOUND} {format_bytes(scale.lower_bound)}"),
             (where(scale.peak), MARK_LINES[PEAK][0], f"{PEAK} {format_bytes(scale.peak)}")]
    items = "".join(
        f'<div style="position:absolute;left:{x:.2f}%;top:{1.1 * line}rem;'
        f'transform:translateX(-{min(max(x, 0), 100):.0f}%);white-space:nowrap;color:{color};font-size:0.78rem;">'
        f'▲ {text}</div>' for line, (x, color, text) in enumerate(marks))
    return f'<div style="position:relative;height:2.4rem;margin:-0.9rem 0.6rem 0.6rem 0.6rem;">{items}</div>'


def typed_budget(scale: BudgetScale, key: str = TYPED_KEY) -> None:
    """A text box for a budget (``512MiB``, ``1.5GB``, ``70%``) within the slider's range, applied once
    when it is entered; a bad entry stays in the box, marked "not applied" (the reason in its tooltip and,
    at full width, under the budget slider), and the budget stays as it was."""
    st.text_input("Type a budget", key=key, placeholder="512MiB, 1.5GB, 70%", on_change=_budget_typed, args=(key,),
                  max_chars=MAX_TYPED_CHARS,
                  help=f"Bytes, a number with a unit (KiB, MiB, GiB, KB, MB, GB) or a percent of the checkpoint-all "
                       f"peak, from {format_bytes(scale.smallest)} to {format_bytes(scale.largest)}. Applied when "
                       f"you press Enter, at the slider's first step at or above it (steps of "
                       f"{scale.step:g} {scale.unit.name}): the slider, the URL and the page show that one value.")
    if error := st.session_state.get(_typed_error_key(key)):
        st.caption(":orange[:material/warning: not applied]", help=plain(error))


def _typed_error_key(key: str) -> str:
    return f"{key}_error"


@callback
def _budget_typed(key: str) -> None:
    """Apply the typed budget and empty the box, so that later slider moves are not overridden by it."""
    text = st.session_state[key].strip()
    st.session_state[_typed_error_key(key)] = None
    if not text:
        return
    try:
        state.set_budget(checked_budget(text, state.graph()))
    except BudgetError as e:
        st.session_state[_typed_error_key(key)] = str(e)
        return
    st.session_state[key] = ""
