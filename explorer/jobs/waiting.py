"""Pages that need one solve before they can draw anything (Timeline, Why, Learn) wait for it here.

The page waits :data:`GLANCE_SECONDS` under a spinner (most solves are done by then). A solve still
queued or running then is shown as a job (progress, elapsed time, Cancel; Retry once stalled), and a
small fragment looks again every second and reruns the page when the schedule lands. The page never
blocks for long, and the sidebar and the other pages keep working meanwhile; a cancelled solve says
so and offers Retry.
"""

from __future__ import annotations

import streamlit as st

from remat_core import ComputeGraph, SolveOutcome
from remat_core.graph import format_bytes

from .. import safety
from ..widgets.jobs import job_panel
from ..widgets.text import plain
from .results import Options, solve_job

GLANCE_SECONDS = 1.0
POLL_SECONDS = 1.0


def awaited_outcome(graph: ComputeGraph, solver: str, budget: int, options: Options,
                    time_limit: float | None) -> SolveOutcome | None:
    """The solve's outcome; None (its progress shown, polled for) while it runs or when it ended without one."""
    job = solve_job(graph, budget, solver, options, time_limit)
    if not job.final:
        with st.spinner(f"Solving {plain(solver)} at {format_bytes(budget)}…", show_time=True):
            job.wait(GLANCE_SECONDS)
    if job.done:
        return job.result
    rerun_when_solved(graph, solver, budget, options, time_limit)
    return None


@safety.fragment(run_every=POLL_SECONDS)
def rerun_when_solved(graph: ComputeGraph, solver: str, budget: int, options: Options,
                      time_limit: float | None) -> None:
    """The solve's progress as a job, looked at every second; the page reruns once the schedule is there
    (pages that draw what they have meanwhile call this too)."""
    job = solve_job(graph, budget, solver, options, time_limit)  # a Retry replaces the job under its key
    if job.done:
        st.rerun()
    job_panel(job, key=f"await_{budget}")
    if not job.final:
        st.caption(f"This page shows the schedule as soon as it is there (time limit {time_limit or 0:g} s); the "
                   f"other pages work meanwhile.")
