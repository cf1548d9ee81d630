"""The frame every page shares (page config, the link's state, session defaults, sidebar, the safety net)
and the guard that ensures it.

Streamlit still treats a folder called ``pages/`` next to the entry script as an old-style
multipage app until ``st.navigation`` has run in the process (and AppTest resets that before every
run). Then a page URL (``/schedule``) runs the page file alone, without ``app.py``. ``app.py`` calls
:func:`mark_entry` before it routes; a page whose run was not marked turns that legacy mode off
(so later runs start at ``app.py``), then either reruns through ``app.py`` (a session's first run:
nothing to lose) or draws the frame itself, keeping the button clicks and uploads of this run.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from . import state
from .jobs.runner import start_lanes
from .safety import contained, show_callback_failure
from .state import url
from .state.models import default_model
from .widgets.sidebar import sidebar_model, sidebar_schedule

ENTRY_MARK = "_framed_by_entry"


def frame(schedule_summary: bool = True) -> None:
    """Page config, the URL's state and the session's defaults (a built-in model, a solver, a budget), what a
    link or a control could not do, and the sidebar, each failure contained (see :mod:`explorer.safety`).

    ``schedule_summary=False`` leaves the sidebar's budget and solver block to the page.
    """
    st.set_page_config(page_title="Remat Explorer", page_icon=":material/memory:", layout="wide")
    start_lanes()  # start the workers early: they take a while to start
    with contained("opening the link"):
        url.open_link(default_model)
        url.show_problems()
    show_callback_failure()
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


def mark_entry() -> None:
    """Called by ``app.py`` on every run, just before the page runs."""
    st.session_state[ENTRY_MARK] = True


def require_entry(draws_schedule_summary: bool = False) -> None:
    """Make sure this run is framed (see the module notes); pass what the page's entry says."""
    if st.session_state.pop(ENTRY_MARK, False):
        return
    # The flag st.navigation itself clears; it decides whether a run starts at app.py.
    PagesManager.uses_pages_directory = False
    if state.MODEL not in st.session_state:
        st.rerun()
    frame(schedule_summary=not draws_schedule_summary)
