"""Schedule: the budget slider, solver choice, the metrics at the budget, and the Pareto curves.

A slider move reruns only the budget fragment (the slider, the sidebar's summary, the results). The
results depend on background work: the metrics on each solver's solve at the budget, the chart on the
sweeps. While that work runs each part is drawn by a nested fragment that looks again every few
tenths of a second (the metrics) or every second (the chart), showing the sweep's estimate (≈) until
the exact schedule lands, and each job's progress with Cancel. Once that work has ended the page reruns
once, and nothing polls.
"""


from dataclasses import replace

import streamlit as st

from explorer import safety, state
from explorer.figures.schedule import pareto_chart
from explorer.jobs.job import Job
from explorer.jobs.results import (SweepStatus, best_possible, lp_bounds_job, options_key, solve_job, sweep_job,
                                   sweep_status)
from explorer.widgets.budget import budget_scale, budget_slider, typed_budget
from explorer.widgets.exports import comparison_records, csv_download, schedule_download
from explorer.widgets.jobs import job_panel
from explorer.widgets.link import link_picker
from explorer.widgets.metrics import (comparison_table, deployed_toggle, deployed_wanted, estimate_metrics,
                                      log_scale_toggle, lp_bound_toggle, lp_bound_wanted, outcome_message,
                                      schedule_metrics)
from explorer.widgets.sidebar import sidebar_schedule
from explorer.widgets.solvers import (compare_picker, deployed_peers, option_widgets, solver_picker,
                                      time_limit_input)
from explorer.widgets.text import plain
from remat_core import get_solver
from remat_core.analysis import curve_table, graph_summary, time_overhead
from remat_core.graph import format_bytes


st.title("Schedule")
st.caption("Drag the memory budget: each solver finds a schedule that fits it, and the simulator measures what "
           "it costs in recomputation.")

graph = state.graph()
summary = graph_summary(graph)
scale = budget_scale(summary.lower_bound, summary.checkpoint_all_peak)

pick, compare = st.columns([1, 2])
with pick:
    solver_picker(graph)
with compare:
    compare_picker(graph)
with st.expander("Solver options and time limit", icon=":material/settings:"):
    for name in [state.solver(), *state.compared()]:
        st.markdown(f"**{plain(name)}**")
        option_widgets(name)
    time_limit_input()


QUICK_POLL_SECONDS = 0.3  # while a quick solver's solve at the budget runs: it lands within a second or two
SLOW_POLL_SECONDS = 1.0  # while only searches run (they take their time limit), and for the chart while sweeps run
# A slider move waits this long for the exact solve, so that a quick one shows exact metrics at once instead of
# the estimate first (a longer wait would hold up the next move: it is not served until this run ends).
SOLVE_GLANCE_SECONDS = 0.15
SOLVE_PANEL_SECONDS = 1.0  # a solve queued or running longer than this shows its progress and a Cancel button


def settings(name: str) -> tuple[tuple, float | None]:
    return options_key(state.solve_options(name)), state.time_limit()


RECOMPUTE_ONLY = " · recompute only"


def swept(solvers: list[str]) -> dict[str, tuple[str, tuple, float | None]]:
    """The Pareto chart's curves: each solver's sweep, the deployed policies' when asked for, and with a host link,
    beside each solver that offloads, its sweep without the link (recompute only): label -> (solver, options, time
    limit)."""
    curves = {name: (name, *settings(name)) for name in solvers}
    if deployed_wanted():
        curves.update({name: (name, *settings(name)) for name in deployed_peers(graph) if name not in curves})
    if state.link() is not None:
        for name in solvers:
            if get_solver(name).tags.offloads:
                curves[name + RECOMPUTE_ONLY] = (name, options_key(state.options_of(name)), state.time_limit())
    return curves


def solves_at(budget: int, solvers: list[str]) -> dict[str, Job]:
    """Each solver's solve at ``budget``; a new budget supersedes the queued solves of the old ones."""
    return {name: solve_job(graph, budget, name, *settings(name), latest=True) for name in solvers}


PANEL = "schedule_budget"  # the budget fragment's key: Cancel, Retry and the LP toggle rerun it


@safety.fragment(key=PANEL)
def budget_panel() -> None:
    """The slider and everything that depends on the budget: reruns alone when the slider moves."""
    slider_column, typed_column, link_column = st.columns([3.2, 1, 1.4])
    with slider_column:
        budget = budget_slider(scale)
    with typed_column:
        typed_budget(scale)
    with link_column:
        link_picker()
    sidebar_schedule()
    solvers = [state.solver(), *state.compared()]
    solves = solves_at(budget, solvers)
    if not get_solver(solvers[0]).searching:  # a search takes its time limit: no use waiting for it
        solves[solvers[0]].wait(SOLVE_GLANCE_SECONDS)
    if quick_solves_running(budget, solvers):
        live_metrics(budget, solvers)
    elif solves_running(budget, solvers):
        searching_metrics(budget, solvers)
    else:
        settled_metrics(budget, solvers)
    (live_chart if work_running(budget, solvers) else settled_chart)(budget, solvers)


def quick_solves_running(budget: int, solvers: list[str]) -> bool:
    return any(not job.final and not get_solver(name).searching for name, job in solves_at(budget, solvers).items())


def solves_running(budget: int, solvers: list[str]) -> bool:
    return any(not job.final for job in solves_at(budget, solvers).values())


def work_running(budget: int, solvers: list[str]) -> bool:
    """Whether the chart's work runs: a solve at the budget (its star), a sweep or the LP bounds."""
    background = [*(sweep_job(graph, *setting) for setting in swept(solvers).values()),
                  *([lp_bounds_job(graph, state.time_limit())] if lp_bound_wanted() else [])]
    return solves_running(budget, solvers) or not all(job.final for job in background)


# Each part of the results is drawn by a fragment that looks again every so often while work behind it runs,
# or by one that does not: the budget fragment picks, and a polling fragment it does not pick stops. A
# fragment cannot stop its own polling: once the work it follows has ended it reruns the page, once, and the
# budget fragment then picks the next one (polling more slowly, or not at all).

def stop_polling_when(ended: bool) -> None:
    if ended:
        st.rerun()


@safety.fragment(run_every=QUICK_POLL_SECONDS)
def live_metrics(budget: int, solvers: list[str]) -> None:
    metrics_part(budget, solvers)
    stop_polling_when(not quick_solves_running(budget, solvers))


@safety.fragment(run_every=SLOW_POLL_SECONDS)
def searching_metrics(budget: int, solvers: list[str]) -> None:
    metrics_part(budget, solvers)
    stop_polling_when(not solves_running(budget, solvers))


@safety.fragment
def settled_metrics(budget: int, solvers: list[str]) -> None:
    metrics_part(budget, solvers)


@safety.fragment(run_every=SLOW_POLL_SECONDS)
def live_chart(budget: int, solvers: list[str]) -> None:
    chart_part(budget, solvers)
    stop_polling_when(not work_running(budget, solvers))


@safety.fragment
def settled_chart(budget: int, solvers: list[str]) -> None:
    chart_part(budget, solvers)


def metrics_part(budget: int, solvers: list[str]) -> None:
    """The session solver's metrics (or the sweep's estimate), the compared solvers' table, the solves still
    running, and their downloads."""
    solves = solves_at(budget, solvers)
    outcomes = {name: job.result if job.done else None for name, job in solves.items()}
    primary = solvers[0]
    primary_results(primary, budget, solves[primary], sweep_status(graph, primary, *settings(primary), wait=0))
    if len(solvers) > 1:
        comparison_table(outcomes)
    for name, job in solves.items():
        if name != primary and (job.final or job.age() > SOLVE_PANEL_SECONDS):
            job_panel(job, key=f"schedule_solve_{name}", rerun=PANEL)
    schedule_column, comparison_column = st.columns(2)
    with schedule_column:
        if outcomes[primary] is not None and outcomes[primary].feasible:
            schedule_download(outcomes[primary], graph.name, primary, budget, key="schedule_download")
    with comparison_column:
        if len(solvers) > 1:
            csv_download("Comparison at this budget CSV", comparison_records(outcomes, budget),
                         f"{graph.name}-comparison-{budget}.csv", "schedule_comparison_csv",
                         "The table above: each solver's exact result at the current budget.")


def chart_part(budget: int, solvers: list[str]) -> None:
    """The sweeps' progress, the Pareto chart (with each solver's result at the budget) and its download."""
    sweeps = {label: sweep_status(graph, *setting, wait=0) for label, setting in swept(solvers).items()}
    for label, status in sweeps.items():
        job_panel(status.job, key=f"schedule_sweep_{label}", rerun=PANEL)
    curves = [replace(s.partial, solver=label) for label, s in sweeps.items() if s.partial is not None]
    if not curves:
        return
    current = {}
    for name, job in solves_at(budget, solvers).items():
        current[name] = time_overhead(job.result.stats) if job.done and job.result.feasible else None
    with st.container(horizontal=True, gap="medium"):  # the toggles flow onto a second line in a narrow window
        log_y = log_scale_toggle()
        bounds = best_possible(graph, state.time_limit()) if lp_bound_toggle(rerun=PANEL) else []
        deployed_toggle(rerun=PANEL)
    if lp_bound_wanted():
        job_panel(lp_bounds_job(graph, state.time_limit()), key="schedule_lp_bounds", rerun=PANEL)
    st.plotly_chart(pareto_chart(graph.content_hash, curves, lower_bound=summary.lower_bound,
                                 checkpoint_all_peak=summary.checkpoint_all_peak, budget=budget, current=current,
                                 best_possible=bounds, log_y=log_y),
                    key="schedule_pareto")
    st.caption("Simulated, every mark: each line is the best overhead a solver reached at or below each budget (a "
               "schedule that fits a budget fits every larger one); markers are its solves, as the simulator "
               "measures them; stars are the exact results at the current budget; diamonds are fixed policies "
               "(Hugging Face's every n, torchtitan's), each where the peak it holds lands. Below the lower bound "
               "(shaded) no schedule fits. Measured on real tensors: the Timeline's \"Run on real tensors\", and "
               "docs/deployed.md for the deployed policies' own mechanisms beside ours."
               + (" Over the host link the overhead is the step's time over the compute time (copies that do not "
                  "hide behind compute count); a line marked \"recompute only\" is the same solver without the "
                  "link." if state.link() is not None else ""))
    csv_download("Pareto sweep CSV", curve_table(curves), f"{graph.name}-pareto-sweep.csv", "schedule_csv",
                 "Every budget each solver's sweep solved: the points of the Pareto chart.")


def primary_results(solver: str, budget: int, job: Job, sweep: SweepStatus) -> None:
    """The session solver's four metrics: exact once its solve is done, else the sweep's estimate (≈)."""
    if job.done:
        outcome = job.result
        if outcome.feasible:
            schedule_metrics(st, outcome, budget)
        else:
            outcome_message(outcome, solver, budget, button_key="schedule_use_smallest")
        return
    point = sweep.partial.fitting_point(budget) if sweep.partial is not None else None
    if point is not None:
        estimate_metrics(st, point, budget)
    if not job.final:
        st.caption(f"Solving {plain(solver)} exactly at {format_bytes(budget)}…"
                   + (" (≈: the sweep's cheapest schedule at a budget below, which fits this one)" if point else ""))
    if job.final or job.age() > SOLVE_PANEL_SECONDS:
        job_panel(job, key=f"schedule_solve_{solver}", rerun=PANEL)


budget_panel()
