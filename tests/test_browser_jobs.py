"""Long work as jobs, in a real browser (Debian's chromium, playwright, ``streamlit run``; see test_browser.py).

- Lanes: with checkmate-milp compared (it searches for its whole time limit on ResNet-18), a slider move
  still gets dtr's exact metrics while the MILP's row says it is solving.
- Fragments: that slider move reruns only the budget fragment (read from the app's websocket messages: its run
  is a fragment run, and so is every run until the answer, but for the one the design allows: once the work a
  polling fragment follows has ended, that fragment reruns the page so that it stops polling).
- Cancel: a checkmate-milp sweep (six budgets, each up to the time limit) cancelled from its progress
  bar: within 2 s the page says so and offers Retry, and the slider still answers (2 s on an idle machine;
  on one whose load average is n times its cores, 2n s).
"""

from __future__ import annotations

import os
import time

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from test_browser import RENDER_TIMEOUT_MS, assert_no_error, page, shot, wait_rendered  # noqa: F401

pytestmark = pytest.mark.browser

SEARCH_SECONDS = 40
"""The time limit set: checkmate-milp on ResNet-18 at module level searches that long at a budget."""
METRICS = "[...document.querySelectorAll('[data-testid=\"stMetric\"]')].map(e => e.innerText).join('|')"
MILP_ROW = ("[...document.querySelectorAll('table.remat-table tr')].map(r => r.innerText)"
            ".find(t => t.startsWith('checkmate-milp')) || ''")
QUEUED_TIMEOUT_MS = 4 * RENDER_TIMEOUT_MS
"""How long a sweep may wait behind the one ahead of it in its lane (auto's: six budgets of its time limit)."""
CANCEL_SECONDS = 2.0
"""On an idle machine; on one that runs more than a process per core, in proportion (see :func:`loaded`)."""


def loaded() -> float:
    """How many times over the machine's cores are taken (1 at most one runnable process per core): a shared
    machine running other work serves every step of a click (the callback, the script run, the browser's
    redraw) that much slower."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@pytest.fixture(scope="module")
def messages(page):  # noqa: F811 - the fixture imported above
    """Every ForwardMsg the app sends to the page, with the time it arrived."""
    received: list[tuple[float, ForwardMsg]] = []

    def follow(socket) -> None:
        def frame(payload) -> None:
            if isinstance(payload, (bytes, bytearray)):
                message = ForwardMsg()
                message.ParseFromString(bytes(payload))
                received.append((time.monotonic(), message))
        socket.on("framereceived", frame)

    page.on("websocket", follow)
    return received


def slider(tab):
    return tab.locator('[data-testid="stSlider"] input[type="range"]').first


def runs(received, since: float) -> str:
    """The script runs started and finished around ``since`` (seconds from it; full or fragment), for a failure."""
    told = []
    for at, m in received:
        kind = m.WhichOneof("type")
        if kind == "new_session":
            told.append(f"{at - since:+.2f} start {'fragment' if m.metadata.run.fragment_ids else 'FULL'}")
        elif kind == "script_finished":
            told.append(f"{at - since:+.2f} end {ForwardMsg.ScriptFinishedStatus.Name(m.script_finished)}")
    return "; ".join(told[-30:])


def unasked_full_runs(received, until: float) -> list[float]:
    """When the full-page runs up to ``until`` that no polling fragment asked for started: the first run in
    ``received`` is the slider's own budget fragment; after it, the one full run the design allows is the page's
    rerun once the work a polling fragment follows has ended (that fragment ends early for it)."""
    unasked, runs_seen, last_end = [], 0, None
    for at, m in received:
        kind = m.WhichOneof("type")
        if kind == "script_finished":
            last_end = m.script_finished
        elif kind == "new_session" and at <= until:
            if not m.metadata.run.fragment_ids and (runs_seen < 2 or last_end != ForwardMsg.FINISHED_EARLY_FOR_RERUN):
                unasked.append(at)
            runs_seen += 1
    return unasked


def wait_full_runs_over(tab, received, quiet: float = 1.5) -> None:
    """Until the last full-page run has ended and none has started for ``quiet`` seconds: the page's own reruns
    after an interaction (one per job that ends) come a moment apart, and a run counted after a key press must
    be that key's."""
    deadline = time.monotonic() + RENDER_TIMEOUT_MS / 1e3
    while time.monotonic() < deadline:
        full = [i for i, (_, m) in enumerate(received)
                if m.WhichOneof("type") == "new_session" and not m.metadata.run.fragment_ids]
        ended = full and any(m.WhichOneof("type") == "script_finished"
                             and m.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY for _, m in received[full[-1]:])
        if ended and time.monotonic() - received[full[-1]][0] > quiet:
            return
        tab.wait_for_timeout(100)
    raise AssertionError(f"the page kept starting full runs for {RENDER_TIMEOUT_MS / 1e3:.0f} s: "
                         + runs(received, time.monotonic()))


def wait_for_metrics(tab) -> str:
    """The page's metrics once there are exact ones (no ≈ estimate)."""
    return tab.wait_for_function(f"() => {{ const m = {METRICS}; return m && !m.includes('≈') ? m : null; }}",
                                 timeout=RENDER_TIMEOUT_MS).json_value()


def test_a_slider_move_gets_the_quick_answer_while_a_search_runs_and_reruns_only_its_fragment(app_url, page,
                                                                                             messages):
    page.goto(f"{app_url}/schedule?solver=dtr")  # a quick solver (the default, auto, is a searching one)
    wait_for_metrics(page)
    page.get_by_text("Solver options and time limit").click()
    limit = page.get_by_role("spinbutton", name="Time limit per solve (s)")
    limit.fill(str(SEARCH_SECONDS))
    limit.press("Enter")
    wait_rendered(page)
    page.locator('[data-testid="stMultiSelect"]').first.click()
    page.keyboard.type("checkmate-milp")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => ({MILP_ROW}).length > 0", timeout=RENDER_TIMEOUT_MS)
    wait_full_runs_over(page, messages)  # the compare's own reruns (a lane that ended) are not the slider's
    before = wait_for_metrics(page)
    runs_before = len(messages)

    slider(page).focus()
    page.keyboard.press("PageDown")
    pressed = time.monotonic()
    answer = page.wait_for_function(
        f"before => {{ const m = {METRICS}; return m && m !== before && !m.includes('≈') ? "
        f"[m, {MILP_ROW}] : null; }}", arg=before, timeout=RENDER_TIMEOUT_MS, polling="raf").json_value()
    answered_at = time.monotonic()
    answered = answered_at - pressed
    metrics, milp_row = answer
    assert "solving" in milp_row, f"dtr answered after checkmate-milp finished: {milp_row!r}"
    assert answered < SEARCH_SECONDS / 4, f"dtr's answer took {answered:.1f} s: queued behind the search?"
    print(f"dtr's exact metrics {answered * 1e3:.0f} ms after the key press, checkmate-milp still solving")

    told = runs(messages, pressed)
    started = [m for at, m in messages[runs_before:] if m.WhichOneof("type") == "new_session" and at <= answered_at]
    assert started and started[0].metadata.run.fragment_ids, f"the slider move started a full-page run: {told}"
    assert not unasked_full_runs(messages[runs_before:], answered_at), \
        f"a full-page run before the answer that no polling fragment asked for: {told}"
    assert_no_error(page, "Schedule after a slider move with a search running")
    shot(page, "schedule-lanes")


def test_a_long_sweep_cancelled_stops_within_2_s_and_the_page_stays_usable(app_url, page):
    # The session of the test above: its checkmate-milp sweep (compared there) is already running.
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Solver").first.click()
    page.keyboard.type("checkmate-milp")
    page.keyboard.press("Enter")
    # It may wait its turn first: the lane of searching sweeps still runs auto's (the page's first solver) on a busy
    # machine. What is tested is cancelling it while it runs.
    page.locator('[data-testid="stProgress"]', has_text="Pareto sweep of checkmate-milp").wait_for(
        timeout=QUEUED_TIMEOUT_MS)
    cancel = '[class*="st-key-schedule_sweep_checkmate-milp_cancel"]'
    page.wait_for_function(f"() => document.querySelectorAll('{cancel}').length === 1",  # the previous run's gone
                           timeout=RENDER_TIMEOUT_MS)
    page.locator(cancel).get_by_role("button", name="Cancel").first.click()
    clicked = time.monotonic()
    page.locator('[data-testid="stAlertContentWarning"]',
                 has_text="Pareto sweep of checkmate-milp cancelled").wait_for(timeout=RENDER_TIMEOUT_MS)
    stopped = time.monotonic() - clicked
    print(f"the cancelled sweep said so {stopped * 1e3:.0f} ms after the click")
    allowed = CANCEL_SECONDS * loaded()
    assert stopped < allowed, f"the cancelled sweep took {stopped:.1f} s to say so (allowed {allowed:.1f} s)"
    wait_rendered(page)
    assert page.locator('[class*="st-key-schedule_sweep_checkmate-milp_retry"]').count() == 1
    assert_no_error(page, "Schedule after cancelling a sweep")
    shot(page, "schedule-cancelled")

    sidebar = page.locator('[data-testid="stSidebarUserContent"]')
    budget_before = sidebar.inner_text()
    slider(page).focus()
    page.keyboard.press("PageUp")
    page.wait_for_function("before => document.querySelector('[data-testid=\"stSidebarUserContent\"]').innerText "
                           "!== before", arg=budget_before, timeout=RENDER_TIMEOUT_MS)
    assert_no_error(page, "Schedule after a slider move following a cancel")
