"""The transfer lane to host memory, next to the budget: off, a device preset, or a rate typed in."""

from __future__ import annotations

import streamlit as st

from remat_core.schedule.links import DEFAULT_COMPUTE_RATE, LINK_PRESETS

from .. import state
from ..safety import callback
from ..state import url
from .text import plain

CUSTOM = "custom"
CHOICES = {"": "Off: recompute only", **{name: f"{name} · {_to_host / 1e9:g}"
                                          + (f"/{_to_device / 1e9:g}" if _to_device != _to_host else "") + " GB/s"
                                          for name, (_to_host, _to_device) in LINK_PRESETS.items()},
           CUSTOM: "Another rate…"}
"""The picker's entries: no link, each preset with its bandwidth (to the host / to the device), a typed rate."""


def link_label(text: str) -> str:
    """How the sidebar and captions name a link: the preset's entry, or the rate as typed."""
    return CHOICES.get(text, text) if text else "off"


@callback
def _picked(key: str) -> None:
    choice = st.session_state[key]
    if choice != CUSTOM:
        state.set_link(choice)
        st.session_state.pop(f"{key}_error", None)


@callback
def _typed(key: str) -> None:
    text = st.session_state[f"{key}_text"]
    try:
        state.set_link(text)
        st.session_state.pop(f"{key}_error", None)
    except ValueError as e:
        st.session_state[f"{key}_error"] = str(e)


def link_picker(key: str = "w_link") -> None:
    """The host link's picker (and, for another rate, a box to type it in); a bad rate keeps the link as it was and
    says why."""
    current = state.link_text()
    if key not in st.session_state or (st.session_state[key] != CUSTOM and st.session_state[key] != current):
        st.session_state[key] = current if current in CHOICES else CUSTOM
    st.selectbox("Host link", list(CHOICES), format_func=CHOICES.get, key=key, on_change=_picked, args=(key,),
                 help=f"Offload over a link to host memory beside recomputing: solvers that offload (pofo, auto) "
                      f"copy tensors out and back on a transfer lane that runs beside the compute, and every "
                      f"schedule is timed over it (overheads become step-time overheads). Rates per second are "
                      f"read with FLOP costs at {DEFAULT_COMPUTE_RATE / 1e12:g} TFLOP/s, a V100's.")
    if st.session_state[key] == CUSTOM:
        st.session_state.setdefault(f"{key}_text", current if current not in CHOICES else "")
        st.text_input("Rate", key=f"{key}_text", on_change=_typed, args=(key,), placeholder="12GB/s, 25GB/s,20GB/s",
                      max_chars=64, help="Bytes per second (12GB/s) or per unit of the graph's cost (4096); two "
                                         "values separated by a comma for the two ways (to the host, to the device). "
                                         "Applied when you press Enter.")
    if error := st.session_state.get(f"{key}_error"):
        st.caption(":orange[:material/warning: not applied]", help=plain(error))
    url.publish()
