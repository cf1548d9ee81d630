"""A job on a page: its progress bar (steps done of the total, elapsed time, what it works on) and Cancel;
Retry and Cancel once it stalls; why it ended and Retry when it ended without a result."""

from __future__ import annotations

import streamlit as st

from .. import safety
from ..jobs.job import Job, JobState
from .text import plain


def job_panel(job: Job, key: str, rerun: str | None = None) -> None:
    """Draw where ``job`` stands (nothing once it is done). ``key`` makes its buttons' keys unique on the page;
    ``rerun`` names the fragment that Retry reruns (the one that decides whether to keep polling; Cancel reruns
    only the fragment around the button, the least work between the click and the page saying so)."""
    if job.state is JobState.DONE:
        return
    label = plain(job.label[:1].upper() + job.label[1:])
    if job.state is JobState.QUEUED:
        st.caption(f":material/hourglass_top: {label}: queued behind other work in the {job.lane.name} lane.")
        _buttons(job, key, rerun, retry=False)
        return
    if job.state is JobState.RUNNING:
        done, total, current = job.progress.done, job.progress.total, job.progress.current
        elapsed = job.elapsed()
        steps = f"{done} of {total} · " if total > 1 else ""
        now = f" · now at {plain(current)}" if current and total > 1 else ""
        fraction = done / total if total > 1 else min(elapsed / max(job.step_allowance or 1.0, 1.0), 0.99)
        st.progress(fraction, text=f"{label}: {steps}{elapsed:.0f} s{now}")
        stalled = job.stalled()
        if stalled:
            st.warning(f"No word from its worker for {job.silent_for():.0f} s: it may be stuck (a step far past its "
                       f"time limit, or a worker that froze). Retry starts it afresh; Cancel stops it.",
                       icon=":material/sync_problem:")
        _buttons(job, key, rerun, retry=stalled)
        return
    st.warning(f"{label} {plain(job.describe_end())}.", icon=":material/cancel:")
    _buttons(job, key, rerun, cancel=False)


def _buttons(job: Job, key: str, rerun: str | None, retry: bool = True, cancel: bool = True) -> None:
    row = st.container(horizontal=True)
    if cancel:
        row.button("Cancel", key=f"{key}_cancel_{job.id}", icon=":material/stop_circle:", on_click=_cancel,
                   args=(job,), help="Stop it now; what it finished is kept.")
    if retry:
        row.button("Retry", key=f"{key}_retry_{job.id}", icon=":material/refresh:", on_click=_retry,
                   args=(job, rerun), help="Start it again from the beginning.")


@safety.callback
def _cancel(job: Job) -> None:
    job.lane.cancel(job)


@safety.callback
def _retry(job: Job, fragment: str | None) -> None:
    job.lane.retry(job)
    if fragment is not None:
        st.rerun(fragment)
