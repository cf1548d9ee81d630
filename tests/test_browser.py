"""The explorer in a real browser: Debian's chromium driven by playwright against ``streamlit run``.

Starts the app on 127.0.0.1 on a free port, opens every page, waits until it has rendered, drags
the budget slider, runs the schedule on real tensors, picks a step on the timeline by dragging
across it, presses Play, switches the Pareto chart to a log axis, checks that no page shows an
error or an exception, and saves a screenshot of each page under ``test-output/browser/``.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``; ``.ci/run`` installs it). Without it the
test is skipped with that instruction, unless ``REMAT_REQUIRE_BROWSER=1`` (set by CI) makes the
missing browser a failure.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from explorer.pages import PAGES

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-output" / "browser"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START_SECONDS = 60
RENDER_TIMEOUT_MS = 60_000
REAL_RUN_TIMEOUT_MS = 180_000
"""A run on real tensors starts a worker, imports PyTorch and traces the model there first."""
ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"streamlit did not answer {url} within {SERVER_START_SECONDS} s")


def require_chromium() -> None:
    """Skip (or, with ``REMAT_REQUIRE_BROWSER=1``, fail) when Debian's chromium is missing."""
    if not CHROMIUM.exists():
        message = "Debian chromium is missing: apt-get install -y chromium"
        if os.environ.get("REMAT_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def serving(log_name: str = "streamlit-server.log", options: tuple[str, ...] = (),
            env: dict[str, str] | None = None) -> Iterator[str]:
    """``streamlit run app.py`` on a free port of 127.0.0.1 (its output in ``test-output/<log_name>``, more
    ``streamlit run`` options and environment variables as given); yields its URL, stops it after."""
    port = _free_port()
    log = (ROOT / "test-output")
    log.mkdir(exist_ok=True)
    with open(log / log_name, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address",
             "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false", *options],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        # SIGTERM to the server's PID: it stops its worker processes itself. (Signalling the whole
        # group would kill the workers under it first and leave it waiting for their results.)
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            raise AssertionError("the streamlit server did not stop within 20 s of SIGTERM") from None


@contextmanager
def chromium_tab(width: int = 1440, height: int = 1000):
    """A tab of headless chromium (driven by playwright) in a window of this size."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


@pytest.fixture(scope="module")
def page(app_url):
    with chromium_tab() as tab:
        yield tab


SETTLED = ("() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState === 'notRunning' "
           "&& !document.querySelector('[data-testid=\"stSkeleton\"]')")
"""The app's script is not running (Streamlit marks ``stApp`` with ``data-test-script-state``) and no element
is still a placeholder."""


def wait_rendered(tab) -> None:
    """Until the app's script has finished: the app view is there, the script not running, nothing a placeholder."""
    tab.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=RENDER_TIMEOUT_MS)
    tab.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=RENDER_TIMEOUT_MS)
    tab.wait_for_function(SETTLED, timeout=RENDER_TIMEOUT_MS)
    tab.wait_for_timeout(400)


def assert_no_error(tab, where: str) -> None:
    errors = tab.locator(ERROR_SELECTOR)
    if errors.count():
        raise AssertionError(f"{where} shows an error: {errors.first.inner_text()[:500]}")


def shot(tab, name: str, whole: bool = True) -> None:
    """A screenshot of the page. ``whole``: Streamlit scrolls inside its main block, so the viewport
    is stretched to the content's height for the picture and put back after (charts redraw on the
    resize: take an animation mid-play with ``whole=False``)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if not whole:
        tab.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        return
    size = tab.viewport_size
    height = tab.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    tab.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height), 6000))})
    tab.wait_for_timeout(300)
    tab.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    tab.set_viewport_size(size)


def go_to(tab, entry) -> None:
    """Navigate inside the app (the sidebar link), keeping the session and its state."""
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=entry.title, exact=True).click()
    tab.locator('[data-testid="stMainBlockContainer"] h1', has_text=entry.title).wait_for(timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)


def metrics_differing_from(tab, before: str, after_what: str) -> str:
    """The page's metrics (joined by ``|``) once there are some and they differ from ``before``.

    Read inside the browser in one step: a rerun may replace them between two reads from here."""
    try:
        handle = tab.wait_for_function(
            "before => { const now = [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
            ".map(e => e.innerText).join('|'); return now && now !== before ? now : null; }",
            arg=before, timeout=RENDER_TIMEOUT_MS)
    except Exception as e:  # playwright's TimeoutError: say what did not happen
        raise AssertionError(f"{after_what}, the metrics did not change from {before!r} within "
                             f"{RENDER_TIMEOUT_MS / 1000:.0f} s") from e
    return handle.json_value()


def test_every_page_renders_the_slider_moves_and_the_timeline_plays(app_url, page):
    # A page URL as the first request of a fresh server: the page must still come up framed by app.py.
    page.goto(f"{app_url}/schedule")
    wait_rendered(page)
    assert page.locator('[data-testid="stSidebarNav"] a[href$="/why"]').count() == 1
    assert_no_error(page, "Schedule")
    # A cold server may first show only "Solving…" (no sweep point yet): wait for the metrics.
    before = metrics_differing_from(page, "", "on opening the Schedule page")
    slider = page.locator('[data-testid="stSlider"] input[type="range"]').first
    slider.focus()
    page.keyboard.press("End")
    metrics_differing_from(page, before, "after moving the budget to the top")
    wait_rendered(page)
    page.wait_for_selector(".js-plotly-plot", timeout=RENDER_TIMEOUT_MS)
    assert_no_error(page, "Schedule after moving the slider")
    # Back down to the middle of the range, where solvers recompute: what the other pages then show.
    top_metrics = metrics_differing_from(page, "", "at the top of the range")
    slider.focus()
    for _ in range(4):
        page.keyboard.press("PageDown")
    metrics_differing_from(page, top_metrics, "after moving the budget down to the middle")
    wait_rendered(page)
    page.wait_for_timeout(1500)
    wait_rendered(page)
    assert_no_error(page, "Schedule in the middle of the range")
    shot(page, "schedule")

    for entry in PAGES:
        if entry.url_path == "schedule":
            continue
        go_to(page, entry)
        if entry.url_path in ("model", "timeline", "learn"):
            page.wait_for_selector(".js-plotly-plot", timeout=RENDER_TIMEOUT_MS)
        if entry.url_path == "graph":
            page.wait_for_selector(".st-key-graph-view .js-plotly-plot", timeout=RENDER_TIMEOUT_MS)
        assert_no_error(page, entry.title)
        shot(page, entry.url_path)

    go_to(page, next(e for e in PAGES if e.url_path == "timeline"))
    page.get_by_role("button", name="Run on real tensors").click()
    page.locator('[data-testid="stMetric"]', has_text="Measured peak").wait_for(timeout=REAL_RUN_TIMEOUT_MS)
    wait_rendered(page)
    page.mouse.move(0, 0)  # off the button: its tooltip would cover the results in the picture
    assert_no_error(page, "Timeline after running on real tensors")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # the page fixture has it

    try:  # the metrics can land a moment before the redrawn timeline does
        page.wait_for_function("() => (document.querySelector('.js-plotly-plot').data || [])"
                               ".some(t => t.name === 'measured')", timeout=RENDER_TIMEOUT_MS)
    except PlaywrightTimeout:
        traces = page.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => t.name)")
        raise AssertionError(f"the timeline has no measured-memory line after the run ({traces})") from None
    shot(page, "timeline-real-tensors")
    step_box = page.locator('[data-testid="stNumberInput"] input').first
    first_step = step_box.input_value()
    drag = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    page.mouse.move(drag["x"] + drag["width"] * 0.05, drag["y"] + drag["height"] * 0.6)
    page.mouse.down()
    page.mouse.move(drag["x"] + drag["width"] * 0.07, drag["y"] + drag["height"] * 0.6, steps=5)
    page.mouse.up()
    page.wait_for_function("before => document.querySelector('[data-testid=\"stNumberInput\"] input').value"
                           " !== before", arg=first_step, timeout=RENDER_TIMEOUT_MS)
    wait_rendered(page)
    last_step = int(step_box.get_attribute("max") or 0)
    picked = int(step_box.input_value())
    assert picked != int(first_step) and picked <= 0.12 * last_step, \
        f"dragging across the first 5-7% of the chart picked step {picked} of {last_step}"
    play = page.locator(".js-plotly-plot .updatemenu-button").first
    play.wait_for(timeout=RENDER_TIMEOUT_MS)
    play.click()
    page.wait_for_timeout(1500)
    assert_no_error(page, "Timeline after Play")
    note = page.evaluate("() => document.querySelector('.js-plotly-plot').layout.annotations[0].text")
    assert note.startswith("step "), f"Play did not move the timeline's current op (the note reads {note!r})"
    shot(page, "timeline-playing", whole=False)

    go_to(page, next(e for e in PAGES if e.url_path == "schedule"))
    page.get_by_text("Log-scale overhead").click()
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                           "p.layout.yaxis.type === 'log')", timeout=RENDER_TIMEOUT_MS)
    wait_rendered(page)
    assert_no_error(page, "Schedule with a log-scale Pareto chart")
    shot(page, "schedule-log")
