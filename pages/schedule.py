"""Schedule: the budget slider, solver choice, the metrics at the budget, and the Pareto curves."""


import streamlit as st

from explorer import safety, state
from explorer.frame import require_entry
from explorer.jobs.results import SOLVE_WAIT_SECONDS, best_possible, options_key, solve_outcome, sweep_status
from explorer.widgets.budget import budget_scale, budget_slider, typed_budget
from explorer.widgets.exports import comparison_records, csv_download, schedule_download
from explorer.widgets.metrics import (GAP_COLUMN, GAP_HELP, comparison_rows, estimate_metrics, log_scale_toggle,
                                      outcome_message, schedule_metrics)
from explorer.widgets.sidebar import sidebar_schedule
from explorer.widgets.solvers import compare_picker, option_widgets, solver_picker, time_limit_input
from explorer.widgets.text import plain
from remat_core.analysis import curve_table, graph_summary
from remat_core.graph import format_bytes
from remat_core.viz import pareto_figure

require_entry(draws_schedule_summary=True)

st.title("Schedule")
st.caption("Drag the memory budget: each solver finds a schedule that fits it, and the simulator measures what "
           "it costs in recomputation.")

graph = state.graph()
summary = graph_summary(graph)
scale = budget_scale(summary.lower_bound, summary.checkpoint_all_peak)

pick, compare = st.columns([1, 2])
with pick:
    solver_picker()
with compare:
    compare_picker()
with st.expander("Solver options and time limit", icon=":material/settings:"):
    for name in [state.solver(), *state.compared()]:
        st.markdown(f"**{plain(name)}**")
        option_widgets(name)
    time_limit_input()


POLL_SECONDS = 0.5
PROGRESS_KEY = "schedule_background_progress"
SWEEP_GLANCE_SECONDS = 0.3  # how long a slider move waits for a running sweep before showing its progress


def solver_settings(name: str) -> tuple[tuple, float | None]:
    return options_key(state.options_of(name)), state.time_limit()


@safety.fragment
def budget_and_results() -> None:
    """The slider and everything that depends on the budget: reruns alone when the slider moves."""
    slider_column, typed_column = st.columns([4, 1])
    with slider_column:
        budget = budget_slider(scale)
    with typed_column:
        typed_budget(scale)
    sidebar_schedule()
    solvers = [state.solver(), *state.compared()]
    primary = solvers[0]
    options, limit = solver_settings(primary)
    ready = sweep_status(graph, primary, options, limit, wait=0)
    for name in solvers[1:]:
        solve_outcome(graph, name, budget, *solver_settings(name), wait=0)  # queued behind the primary
    outcome = solve_outcome(graph, primary, budget, options, limit, wait=SOLVE_WAIT_SECONDS)
    # Drawn after the wait: the last run's metrics stay on screen (faded) until these replace them.
    with st.container():
        if outcome is None:
            point = ready.curve.fitting_point(budget) if ready.curve is not None else None
            if point is not None:
                estimate_metrics(st, point, budget)
            st.caption(f"Solving {plain(primary)} exactly at {format_bytes(budget)}…"
                       + (" (≈: the sweep's schedule at the largest budget below, which fits)" if point else ""))
        elif outcome.schedule is not None:
            schedule_metrics(st, outcome.schedule, budget)
        else:
            outcome_message(outcome, primary, budget, ready.curve.smallest_feasible() if ready.curve else None,
                            button_key="schedule_use_smallest")

    outcomes = {primary: outcome, **{name: solve_outcome(graph, name, budget, *solver_settings(name), wait=0)
                                     for name in solvers[1:]}}
    if len(solvers) > 1:
        rows = comparison_rows(outcomes)
        st.dataframe(rows, hide_index=True, width="stretch",
                     column_config={GAP_COLUMN: st.column_config.TextColumn(GAP_COLUMN, help=GAP_HELP)})

    statuses = {name: sweep_status(graph, name, *solver_settings(name), wait=SWEEP_GLANCE_SECONDS)
                for name in solvers}
    curves = [s.curve for s in statuses.values() if s.curve is not None]
    for name, status in statuses.items():
        if status.error:
            st.error(f"The sweep of {plain(name)} failed: {plain(status.error)}")
        elif status.curve is None:
            st.progress(status.done / max(status.total, 1),
                        text=f"Sweeping {plain(name)}: {status.done} of {status.total} budgets solved…")
    if curves:
        current = {name: o.schedule.stats["overhead"] if o is not None and o.schedule is not None else None
                   for name, o in outcomes.items()}
        log_y = log_scale_toggle()
        st.plotly_chart(pareto_figure(curves, lower_bound=summary.lower_bound,
                                      checkpoint_all_peak=summary.checkpoint_all_peak, budget=budget,
                                      current=current, best_possible=best_possible(graph, limit), log_y=log_y),
                        key="schedule_pareto")
        st.caption("Each point is a solve at that budget, measured by the simulator; stars are the exact results at "
                   "the current budget. Below the lower bound (shaded) no schedule fits.")
    if any(o is None for o in outcomes.values()) or len(curves) < len(solvers):
        st.session_state[PROGRESS_KEY] = progress(solvers, budget)
        wait_for_results(solvers, budget)
    exports = st.columns(3)
    with exports[0]:
        if outcome is not None and outcome.schedule is not None:
            schedule_download(outcome.schedule, key="schedule_download")
    with exports[1]:
        if curves:
            csv_download("Pareto sweep CSV", curve_table(curves), f"{graph.name}-pareto-sweep.csv", "schedule_csv",
                         "Every budget each solver's sweep solved: the points of the Pareto chart.")
    with exports[2]:
        if len(solvers) > 1:
            csv_download("Comparison at this budget CSV", comparison_records(outcomes, budget),
                         f"{graph.name}-comparison-{budget}.csv", "schedule_comparison_csv",
                         "The table above: each solver's exact result at the current budget.")


def progress(solvers: list[str], budget: int) -> tuple:
    """What the background work has finished: each solver's exact solve (done or not) and sweep points."""
    return tuple((solve_outcome(graph, name, budget, *solver_settings(name), wait=0) is not None,
                  sweep_status(graph, name, *solver_settings(name), wait=0).done) for name in solvers)


@safety.fragment(run_every=POLL_SECONDS)
def wait_for_results(solvers: list[str], budget: int) -> None:
    """While exact solves or sweeps run in the background, look again every half second and rerun
    the page whenever one of them has moved on (a solve finished, a sweep solved another budget)."""
    if progress(solvers, budget) != st.session_state.get(PROGRESS_KEY):
        st.rerun()


budget_and_results()
