"""Pages that need one solve before they can draw anything (Timeline, Why, Learn) wait for it here.

The wait shows a spinner naming the solve and lasts at most the solver's time limit plus a margin
(:func:`explorer.jobs.results.solve_wait_seconds`). A solve still running then (queued behind other solves,
or slower than its limit) is said to be, and a small fragment polls for it and reruns the page once
it lands: the page never blocks for long, and the other pages keep working meanwhile.
"""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph
from remat_core.graph import format_bytes

from .. import safety
from ..widgets.text import plain
from .results import solve_outcome, solve_wait_seconds
from .worker import Outcome

POLL_SECONDS = 1.0


def awaited_outcome(graph: ComputeGraph, solver: str, budget: int, options: tuple,
                    time_limit: float | None) -> Outcome | None:
    """The solve's outcome, waited for under a spinner; None (said on the page, polled for) if still running."""
    outcome = solve_outcome(graph, solver, budget, options, time_limit, wait=0)
    if outcome is not None:
        return outcome
    what = f"{plain(solver)} at {format_bytes(budget)}"
    wait = solve_wait_seconds(time_limit)
    with st.spinner(f"Solving {what} (time limit {time_limit or 0:g} s)…", show_time=True):
        outcome = solve_outcome(graph, solver, budget, options, time_limit, wait=wait)
    if outcome is None:
        st.info(f"{what} is still solving after {wait:.0f} s (its time limit is {time_limit or 0:g} s; it may be "
                f"queued behind other solves). This page shows it as soon as it is done; the other pages work "
                f"meanwhile.", icon=":material/hourglass_top:")
        rerun_when_solved(graph, solver, budget, options, time_limit)
    return outcome


@safety.fragment(run_every=POLL_SECONDS)
def rerun_when_solved(graph: ComputeGraph, solver: str, budget: int, options: tuple,
                       time_limit: float | None) -> None:
    """Look again every second; rerun the page once the solve has finished (for pages that draw what they
    have meanwhile)."""
    if solve_outcome(graph, solver, budget, options, time_limit, wait=0) is not None:
        st.rerun()
