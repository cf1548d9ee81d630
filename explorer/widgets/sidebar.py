"""The sidebar's blocks: the current model, and the current budget and solver."""

from __future__ import annotations

import streamlit as st

from remat_core.analysis import graph_summary
from remat_core.graph import format_bytes

from .. import state
from ..state.budgets import scale_of
from .link import link_label
from .text import plain


def sidebar_model() -> None:
    """The sidebar's model block: name, where it came from, nodes, parameters, checkpoint-all peak."""
    model = state.model()
    summary = graph_summary(model.graph)
    with st.sidebar:
        st.markdown("#### Current model")
        st.markdown(f"**{plain(summary.name)}**")
        st.caption(plain(model.origin))
        parameters = (f"{model.parameters / 1e6:.2f} M · " if model.parameters else "") + \
            format_bytes(summary.param_bytes)
        st.markdown(f"Nodes **{summary.nodes:,}** · edges {summary.edges:,}  \n"
                    f"Parameters **{parameters}**  \n"
                    f"Checkpoint-all peak **{format_bytes(summary.checkpoint_all_peak)}**  \n"
                    f"Lower bound {format_bytes(summary.lower_bound)}")


def sidebar_schedule() -> None:
    """The sidebar's schedule block: the current budget and solver.

    The Schedule page draws it from inside its budget fragment, so that it follows the slider
    without a full rerun; every other page gets it from the frame.
    """
    peak = graph_summary(state.graph()).checkpoint_all_peak
    budget = state.budget()
    compare = state.compared()
    with st.sidebar:
        st.divider()
        st.markdown("#### Schedule")
        st.markdown(f"Budget **{scale_of(state.graph()).label(budget)}** ({budget / max(peak, 1):.0%} of peak)  \n"
                    f"Solver **{plain(state.solver())}**" +
                    (f"  \nHost link **{plain(link_label(state.link_text()))}**" if state.link_text() else "") +
                    (f"  \nCompared with {', '.join(plain(c) for c in compare)}" if compare else ""))
