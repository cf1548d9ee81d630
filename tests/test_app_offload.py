"""The explorer over a host link: the link picker next to the budget, step-time metrics, the transfer lane on the
Timeline, an offloaded tensor's story on the Why page, and the link in the URL."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.jobs.lanes import stop_background_work
from explorer.jobs.results import awaited_solve, options_key
from remat_core import checkpoint_all_peak, memory_lower_bound

TIMEOUT = 60
FAST = "1"
"""A link that copies a byte per FLOP: fast enough that pofo offloads on the default model."""


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    yield
    stop_background_work()


def over_a_link(page: str) -> tuple[AppTest, object]:
    """The default model with pofo over a fast link at a budget where it offloads, on ``page`` once solved; and the
    solve's outcome."""
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT).run()
    graph = at.session_state[state.MODEL].graph
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    at.session_state[state.SOLVER] = "pofo"
    at.session_state[state.LINK] = FAST
    at.session_state[state.BUDGET] = int(low + 0.75 * (high - low))
    at.switch_page(page).run()
    session = at.session_state
    options = options_key({**session[state.OPTIONS].get("pofo", {}), "link": state.session.parse_link(FAST)})
    outcome = awaited_solve(graph, session[state.BUDGET], "pofo", options, session[state.TIME_LIMIT])
    assert outcome.feasible and outcome.schedule.has_transfers
    return at.run(), outcome


def test_the_schedule_page_picks_a_link_and_reports_step_time():
    at, _ = over_a_link("app_pages/schedule.py")
    assert not at.exception and not at.error
    assert at.selectbox(key="w_link").value == "custom" and at.text_input(key="w_link_text").value == FAST
    labels = [m.label for m in at.metric]
    assert "Step time overhead" in labels and "Cost overhead" not in labels
    assert any("offloaded" in str(m.proto.delta) for m in at.metric)
    at.selectbox(key="w_link").set_value("pcie4").run()
    assert at.session_state[state.LINK] == "pcie4" and not at.exception
    at.selectbox(key="w_link").set_value("").run()
    session = at.session_state
    awaited_solve(session[state.MODEL].graph, session[state.BUDGET], "pofo",
                  options_key(session[state.OPTIONS].get("pofo", {})), session[state.TIME_LIMIT])
    at.run()  # as the page's poll would, once the solve without the link has ended
    assert at.session_state[state.LINK] == "" and "Cost overhead" in [m.label for m in at.metric]


def test_a_bad_rate_is_not_applied_and_says_why():
    at, _ = over_a_link("app_pages/schedule.py")
    at.text_input(key="w_link_text").set_value("fast").run()
    assert not at.exception
    assert at.session_state[state.LINK] == FAST
    assert any("not applied" in c.value for c in at.caption)


def test_the_timeline_draws_the_transfer_lane_and_the_host_bytes():
    at, _ = over_a_link("app_pages/timeline.py")
    assert not at.exception and not at.error
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    names = [{t.get("name") for t in chart["data"]} for chart in charts]
    assert any("host memory" in n and "backward" in n for n in names)  # the memory chart: device stack, host line
    assert any({"to the host", "to the device"} <= n for n in names)  # the transfer lane


def test_the_why_page_tells_an_offloaded_tensors_story():
    at, outcome = over_a_link("app_pages/why.py")
    assert not at.exception and not at.error
    tensor = next(node for action, node in outcome.schedule.ops if action == "offload")
    at.selectbox(key="w_why_tensor").set_value(tensor).run()
    assert not at.exception
    assert any("offloaded at step" in i.value and "recomputing it there would cost" in i.value for i in at.info)


def test_the_link_is_in_the_url():
    at, _ = over_a_link("app_pages/schedule.py")
    assert at.query_params.get("link") in ([FAST], FAST)
