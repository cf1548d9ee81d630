"""Long work as jobs on the explorer's pages (AppTest): Cancel and Retry, lanes, "fits at", honest cells.

Jobs run in the real lanes' worker processes. To hold a lane busy for as long as a test needs, a job
that never returns (``job_functions.forever``) is put in front; cancelling it frees the lane. No timed
assertions: each wait is for an event, with a generous bound.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import job_functions
from explorer import state
from explorer.jobs.job import JobState
from explorer.jobs.results import fits_at, solve_job, awaited_solve, sweep_job, sweep_status
from explorer.jobs.lanes import quick_lane, search_lane, stop_background_work, sweep_lane
from explorer.widgets.table import DASH, Missing, html_table
from remat_core import checkpoint_all_peak, memory_lower_bound
from remat_core.graph import format_bytes, training_chain

BOUND = 120.0


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    yield
    stop_background_work()


def schedule_page(graph) -> AppTest:
    """The Schedule page on ``graph`` with DTR, a quick solver (its solves and sweep go to the quick lanes)."""
    at = AppTest.from_file("../app.py", default_timeout=60).run()
    at.session_state[state.MODEL] = state.Model(graph, "test")
    at.session_state[state.BUDGET] = state.default_budget(graph)
    at.switch_page("app_pages/schedule.py").run()
    at.selectbox(key="w_solver").set_value("dtr").run()
    assert not at.exception, at.exception
    return at


def button(at: AppTest, label: str, key_part: str):
    return next(b for b in at.button if b.proto.label == label and key_part in (b.key or ""))


def test_a_sweep_cancelled_on_the_page_says_so_and_retry_starts_it_again():
    graph = training_chain(11, mem=2**20)
    blocker = sweep_lane().submit(("busy", "cancel test"), job_functions.forever)  # the sweep waits behind it
    try:
        at = schedule_page(graph)
        solver, limit = at.session_state[state.SOLVER], at.session_state[state.TIME_LIMIT]
        assert any("Pareto sweep of" in c.value and "queued" in c.value for c in at.caption)
        button(at, "Cancel", "schedule_sweep").click().run()
        assert not at.exception and not at.error
        assert sweep_job(graph, solver, (), limit).state is JobState.CANCELLED
        assert any("cancelled" in w.value for w in at.warning)
        at.run()  # a cancelled sweep stays cancelled: the page does not start it again by itself
        assert sweep_job(graph, solver, (), limit).state is JobState.CANCELLED
        button(at, "Retry", "schedule_sweep").click().run()
        assert not at.exception and sweep_job(graph, solver, (), limit).state is JobState.QUEUED
    finally:
        sweep_lane().cancel(blocker)
    assert sweep_status(graph, solver, (), limit, wait=BOUND).curve is not None
    at.run()
    assert not at.exception and at.get("plotly_chart") and not any("cancelled" in w.value for w in at.warning)


def test_a_quick_solve_is_answered_while_a_searching_solve_holds_its_lane():
    graph = training_chain(12, mem=2**20)
    blocker = search_lane().submit(("busy", "lane test"), job_functions.forever)  # a search that never ends
    try:
        budget = state.default_budget(graph)
        searching = solve_job(graph, budget, "checkmate-milp", (), 10.0)
        quick = awaited_solve(graph, budget, "dtr", (), 10.0, wait=BOUND)
        assert quick is not None and quick.schedule is not None
        assert searching.state is JobState.QUEUED  # still behind the search, which never ended
    finally:
        search_lane().cancel(blocker)


def test_a_newer_budget_supersedes_the_queued_solves_of_the_slider():
    graph = training_chain(13, mem=2**20)
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    blocker = quick_lane().submit(("busy", "supersede test"), job_functions.forever)
    try:
        budgets = [low + (high - low) * k // 4 for k in (1, 2, 3)]
        jobs = [solve_job(graph, b, "dtr", (), 10.0, latest=True) for b in budgets]
        aside = solve_job(graph, budgets[0] + 1, "dtr", (), 10.0)  # not from the slider: not superseded
        assert [j.state for j in jobs] == [JobState.SUPERSEDED, JobState.SUPERSEDED, JobState.QUEUED]
        assert aside.state is JobState.QUEUED
    finally:
        quick_lane().cancel(blocker)
    assert jobs[-1].wait(BOUND) and jobs[-1].result.schedule is not None


def test_fits_at_is_the_smallest_budget_whose_schedule_the_simulator_confirmed():
    graph = training_chain(14, mem=2**20)
    peak = checkpoint_all_peak(graph)
    assert fits_at(graph, "checkpoint-all", (), 10.0) is None
    below = awaited_solve(graph, peak - 1, "checkpoint-all", (), 10.0)
    assert below.schedule is None and below.smallest_feasible == peak
    assert fits_at(graph, "checkpoint-all", (), 10.0) is None  # named by the solver, not yet confirmed
    above = awaited_solve(graph, peak + 2**20, "checkpoint-all", (), 10.0)
    assert fits_at(graph, "checkpoint-all", (), 10.0).budget == peak + 2**20
    at_peak = awaited_solve(graph, peak, "checkpoint-all", (), 10.0)
    fit = fits_at(graph, "checkpoint-all", (), 10.0)
    assert (fit.budget, fit.peak) == (peak, at_peak.schedule.stats["peak"]) and str(fit) == format_bytes(peak)
    assert above.schedule is not None
    curve = sweep_status(graph, "dtr", (), 10.0, wait=BOUND).curve
    assert fits_at(graph, "dtr", (), 10.0).budget == min(p.budget for p in curve.feasible_points)


def test_the_infeasible_warning_and_the_comparison_table_say_the_same_fits_at():
    graph = training_chain(15, mem=2**20)
    at = schedule_page(graph)
    at.multiselect(key="w_compare").set_value(["checkpoint-all"]).run()
    budget = at.session_state[state.BUDGET]
    for name in ("dtr", "checkpoint-all"):
        awaited_solve(graph, budget, name, (), at.session_state[state.TIME_LIMIT])
    sweep_status(graph, "checkpoint-all", (), at.session_state[state.TIME_LIMIT], wait=BOUND)
    at.selectbox(key="w_solver").set_value("checkpoint-all").run()
    fit = fits_at(graph, "checkpoint-all", (), at.session_state[state.TIME_LIMIT])
    assert f"It fits at **{fit}**" in at.warning[0].value
    at.multiselect(key="w_compare").set_value(["dtr"]).run()
    table = next(m.value for m in at.markdown if 'class="remat-table"' in m.value)
    assert f"<td>{fit}</td>" in table and "None" not in table


def test_a_missing_cell_is_a_dash_with_its_reason_and_text_is_escaped():
    html = html_table([{"solver": "<b>x</b>", "peak": Missing('still "solving"'), "gap": "0%"}],
                      {"gap": "the optimality gap"})
    assert '<td title="still &quot;solving&quot;" class="missing">' + DASH + "</td>" in html
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in html and '<th title="the optimality gap" style="text-decoration: underline dotted">gap</th>' in html
    with pytest.raises(ValueError, match="Missing"):
        html_table([{"solver": "x", "peak": None}])


def test_a_stalled_solve_is_said_to_be_and_retry_and_cancel_act_on_it(monkeypatch):
    from explorer.jobs import job as job_module

    at = AppTest.from_file("../app.py", default_timeout=60).run()
    graph = at.session_state[state.MODEL].graph  # ResNet-18: checkmate-milp searches it for its whole time limit
    budget = at.session_state[state.BUDGET]
    at.session_state[state.SOLVER] = "checkmate-milp"
    at.session_state[state.TIME_LIMIT] = 300.0
    running = solve_job(graph, budget, "checkmate-milp", (), 300.0)
    assert running.wait_for_report(running.submitted_at, BOUND) and running.state is JobState.RUNNING
    monkeypatch.setattr(job_module, "STALL_SECONDS", 0.0)  # every running job now counts as silent too long
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception and any("No word from its worker" in w.value for w in at.warning)
    button(at, "Retry", "await").click().run()
    fresh = solve_job(graph, budget, "checkmate-milp", (), 300.0)
    assert running.state is JobState.CANCELLED and fresh is not running and not fresh.final
    monkeypatch.setattr(job_module, "STALL_SECONDS", 30.0)
    assert fresh.wait_for_report(fresh.submitted_at, BOUND)
    at.run()
    button(at, "Cancel", "await").click().run()
    assert fresh.state is JobState.CANCELLED and not at.exception
    assert any("cancelled" in w.value for w in at.warning)
    assert any(b.proto.label == "Retry" for b in at.button)
