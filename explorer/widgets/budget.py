"""The budget slider (in a unit chosen for the model, marked with the lower bound and the checkpoint-all
peak) and the box for an exact budget."""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st

from remat_core import BudgetError, parse_budget
from remat_core.graph import format_bytes
from remat_core.viz import ByteUnit, LOWER_BOUND, MARK_LINES, PEAK, unit_for

from .. import state
from .text import plain

SLIDER_STEPS = 200


@dataclass(frozen=True)
class BudgetScale:
    """How the budget slider maps to bytes: one unit, a range around the two marks, a round step."""

    unit: ByteUnit
    low: float
    high: float
    step: float
    lower_bound: int
    peak: int

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step)))

    @property
    def format(self) -> str:
        return f"%.{self.decimals}f {self.unit.name}"

    def to_bytes(self, value: float) -> int:
        return int(round(value * self.unit.size))

    def to_units(self, nbytes: int) -> float:
        """The slider position showing ``nbytes``: the first step at or above it, within the range."""
        steps = round((nbytes / self.unit.size - self.low) / self.step)
        if self.to_bytes(self.low + steps * self.step) < nbytes:  # compared in bytes: floats blur a few
            steps += 1
        return round(min(max(self.low + steps * self.step, self.low), self.high), self.decimals)


def _nice_step(raw: float) -> float:
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def budget_scale(lower_bound: int, peak: int) -> BudgetScale:
    """A slider from a little under the lower bound to a little over the checkpoint-all peak."""
    span = max(peak - lower_bound, peak * 0.1, 1)
    unit = unit_for(peak)
    step = float(_nice_step(span / unit.size / SLIDER_STEPS))
    low = max(0.0, math.floor((lower_bound - 0.04 * span) / unit.size / step) * step)
    high = math.ceil((peak + 0.06 * span) / unit.size / step) * step
    return BudgetScale(unit, float(round(low, 12)), float(round(high, 12)), step, lower_bound, peak)


def _budget_changed(key: str, scale: BudgetScale) -> None:
    state.set_budget(scale.to_bytes(st.session_state[key]))


def budget_slider(scale: BudgetScale, key: str = "w_budget", label: str = "Memory budget") -> int:
    """The session's budget as a slider (in the scale's unit) with its marks; returns it in bytes."""
    st.session_state[key] = scale.to_units(state.budget())
    _slider(scale, key, label, on_change=_budget_changed, args=(key, scale))
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
    lines on the Pareto chart (red is the budget's there)."""
    def where(nbytes: int) -> float:
        return 100 * (nbytes / scale.unit.size - scale.low) / max(scale.high - scale.low, 1e-12)
    marks = [(where(scale.lower_bound), MARK_LINES[LOWER_BOUND][0], f"{LOWER_BOUND} {format_bytes(scale.lower_bound)}"),
             (where(scale.peak), MARK_LINES[PEAK][0], f"{PEAK} {format_bytes(scale.peak)}")]
    items = "".join(
        f'<div style="position:absolute;left:{x:.2f}%;transform:translateX(-{min(max(x, 0), 100):.0f}%);'
        f'white-space:nowrap;color:{color};font-size:0.78rem;">▲ {text}</div>'
        for x, color, text in marks)
    st.markdown(f'<div style="position:relative;height:1.3rem;margin:-0.9rem 0.6rem 0.6rem 0.6rem;">{items}</div>',
                unsafe_allow_html=True)


def typed_budget(peak: int, key: str = "w_budget_text") -> None:
    """A text box for an exact budget (``512MiB``, ``1.5GB``, ``70%``), applied once when it is entered;
    a bad entry stays in the box with a message."""
    st.text_input("Exact budget", key=key, placeholder="512MiB, 1.5GB, 70%", on_change=_budget_typed,
                  args=(key, peak), help="Bytes, a number with a unit (KiB, MiB, GiB, KB, MB, GB) or a percent of "
                                         "the checkpoint-all peak. Applied when you press Enter; the slider "
                                         "moves there.")
    if error := st.session_state.get(_typed_error_key(key)):
        st.warning(plain(error))


def _typed_error_key(key: str) -> str:
    return f"{key}_error"


def _budget_typed(key: str, peak: int) -> None:
    """Apply the typed budget and empty the box, so that later slider moves are not overridden by it."""
    text = st.session_state[key].strip()
    st.session_state[_typed_error_key(key)] = None
    if not text:
        return
    try:
        state.set_budget(parse_budget(text, peak))
    except BudgetError as e:
        st.session_state[_typed_error_key(key)] = str(e)
        return
    st.session_state[key] = ""
