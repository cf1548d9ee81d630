"""The Timeline page's "Run on real tensors" action and its results.

The current schedule runs op by op on the model's CPU tensors in the execution worker
(:func:`explorer.jobs.results.start_tensor_check`), so a run of several seconds neither freezes the app
nor slows its thread; the page waits a moment with a spinner, then polls. Results are kept with the
solve they belong to, so they are still there after a page switch.
"""

from __future__ import annotations

import streamlit as st

from remat_core import Schedule
from remat_core.graph import format_bytes
from remat_core.run import TensorCheck

from .. import safety
from ..jobs.results import start_tensor_check, tensor_check_job, tensor_check_status
from ..state.session import Model
from .jobs import job_panel
from .text import plain

RUN_WAIT_SECONDS = 3.0
"""The page waits this long (showing a spinner) for a run before polling for it instead."""
POLL_SECONDS = 0.5
BUTTON_KEY = "timeline_run_tensors"

NO_MODEL = ("No model behind this graph: it was read from a file (JSON, ONNX) or generated, so it holds sizes and "
            "costs but no weights or ops to run. Trace a zoo model or upload a .pt2 export to run schedules on real "
            "tensors.")
ABOUT = ("Executes this schedule op by op on CPU tensors, in a background worker, and compares its gradients with "
         "checkpoint-all's and its real memory with the simulator's.")


def why_not_runnable(model: Model) -> str | None:
    """Why the model's schedules cannot run on real tensors (None: they can)."""
    if model.rebuild is None or not model.graph.attachments.executable:
        return NO_MODEL
    return None


def tensor_run_panel(model: Model, schedule: Schedule, key: tuple) -> TensorCheck | None:
    """The action and, once the run is done, its results; returns the check (for the timeline's overlay).

    ``key`` is the solve's key (:func:`explorer.jobs.results.solve_key`): a run belongs to one schedule.
    """
    blocked = why_not_runnable(model)
    with st.container(border=True):
        st.button("Run on real tensors", key=BUTTON_KEY, icon=":material/play_circle:", type="primary",
                  disabled=blocked is not None, help=blocked or ABOUT, on_click=start_tensor_check,
                  args=(model, schedule, key), width="content")
        return _results(blocked, key, schedule.budget)


def _results(blocked: str | None, key: tuple, budget: int | None) -> TensorCheck | None:
    if blocked is not None:
        st.caption(plain(blocked))
        return None
    started, check, error = tensor_check_status(key)
    if not started:
        st.caption(ABOUT)
        return None
    if check is None and error is None:
        with st.spinner("Running the schedule on real tensors…", show_time=True):
            _, check, error = tensor_check_status(key, wait=RUN_WAIT_SECONDS)
    if error is not None:
        st.error(f"The run on real tensors failed: {plain(error)}", icon=":material/error:")
        return None
    if check is None:
        st.caption("Still running in the background worker (the first run also traces the model there); the "
                   "results appear here when it is done.")
        _poll(key)
        return None
    _check_metrics(check, budget)
    return check


def _check_metrics(check: TensorCheck, budget: int | None) -> None:
    grads, measured, simulated, timing = st.columns(4)
    difference = check.max_gradient_difference
    grads.metric("Gradients", "match" if check.gradients_match else "differ",
                 delta="identical" if difference == 0 else f"max diff {difference:.2g}",
                 delta_color="normal" if check.gradients_match else "inverse", delta_arrow="off",
                 help=f"The parameter gradients against the checkpoint-all schedule's (no recomputation): the largest "
                      f"absolute difference, and whether it is within {check.tolerance:g} of the largest gradient "
                      f"({check.max_gradient:.3g}).")
    gap = check.measured_peak - check.simulated_peak
    measured.metric("Measured peak", format_bytes(check.measured_peak),
                    delta="= simulated" if gap == 0 else
                    f"{format_bytes(abs(gap))} {'over' if gap > 0 else 'under'} simulated",
                    delta_color="off", delta_arrow="off",
                    help="The most bytes of tensor storage really held after any op (module-level schedules: "
                         "after any op inside a module too).")
    simulated.metric("Simulated peak", format_bytes(check.simulated_peak),
                     delta=f"{check.simulated_peak / budget:.0%} of budget" if budget else None, delta_color="off",
                     delta_arrow="off", help="The simulator's peak for this schedule, as on the Schedule page.")
    timing.metric("Run time", f"{check.seconds:.2f} s", delta=f"{check.computes:,} computations", delta_color="off",
                  delta_arrow="off", help="Wall time of the run on CPU tensors (op-level computations, "
                                          "recomputations included).")
    if check.memory_gap == 0:
        st.caption("The dotted black line on the timeline is the real memory after each op: it lies on the simulated "
                   "total at every step.")
    else:
        st.caption(f"The dotted black line on the timeline is the real memory after each op; it departs from the "
                   f"simulated total by up to {format_bytes(check.memory_gap)}.")


@safety.fragment(run_every=POLL_SECONDS)
def _poll(key: tuple) -> None:
    """While the run is going, show its progress (with Cancel) and rerun the page once it has ended."""
    _, check, error = tensor_check_status(key)
    if check is not None or error is not None:
        st.rerun()
    job_panel(tensor_check_job(key), key="tensor_run")
