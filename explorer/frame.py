"""The frame every page shares: page config, the link's state, session defaults, sidebar, the safety net.

``app.py`` routes with ``st.navigation`` and draws this frame on every run, before the page; the page
files live in ``app_pages/`` (not ``pages/``, which Streamlit would read as an old-style multipage app),
so every URL, a page's own (``/schedule``) included, runs through ``app.py``.
"""

from __future__ import annotations

import streamlit as st

from . import state
from .jobs.lanes import start_lanes
from .jobs.results import know_model
from .safety import contained, show_callback_failure
from .state import url
from .state.models import default_model
from .widgets.sidebar import sidebar_model, sidebar_schedule


def frame(page: str = "", schedule_summary: bool = True) -> None:
    """Page config, the URL's state and the session's defaults (a built-in model, a solver, a budget), what a
    link or a control could not do, and the sidebar, each failure contained (see :mod:`explorer.safety`).

    ``page`` is the page's URL path (the URL's state follows Back within it); ``schedule_summary=False`` leaves
    the sidebar's budget and solver block to the page.
    """
    st.set_page_config(page_title="Remat Explorer", page_icon=":material/memory:", layout="wide")
    start_lanes()  # start the workers early: they take a while to start
    with contained("opening the link"):
        url.open_link(default_model, page)
        url.show_problems()
    show_callback_failure()
    if (model := st.session_state.get(state.MODEL)) is not None:
        know_model(model)  # a policy over the model's blocks traces it again in its worker
    with contained("the sidebar"):
        sidebar_model()
        if schedule_summary:
            sidebar_schedule()


def run_page(page, title: str) -> None:
    """Run the page inside the safety net, then write the state it leaves into the URL (also when the page
    stops or reruns: Streamlit's control flow passes through the net)."""
    try:
        with contained(f"the {title} page"):
            page.run()
    finally:
        with contained("writing the page's state into its URL"):
            url.publish()
            url.end_of_run()
