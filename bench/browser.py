"""The explorer served and driven in Debian's chromium, for benchmarks, screenshots and browser tests.

``served_app(port)`` runs ``streamlit run app.py`` on 127.0.0.1 and stops it (by its PID) on exit;
``chromium_page(...)`` opens a playwright page in ``/usr/bin/chromium`` (never ``playwright
install``); the other helpers wait for a page to render, upload a graph file on the Model page,
move to a page through the sidebar, and take a picture of the whole page.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START_SECONDS = 60
RENDER_TIMEOUT_MS = 120_000
ERROR_SELECTOR = '[data-testid="stException"], [data-testid="stAlertContentError"]'
GRAPH_VIEW_SELECTOR = ".st-key-graph-view .js-plotly-plot"
"""The Graph page's view, once plotly has drawn it: what a benchmark waits for to time the first draw."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_server(port: int, log: Path | None = None, env: dict[str, str] | None = None
               ) -> Iterator[subprocess.Popen]:
    """``streamlit run app.py`` on ``127.0.0.1:port`` once it answers its health check; stopped on exit."""
    url = f"http://127.0.0.1:{port}"
    out = open(log, "w") if log else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address",
         "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {process.returncode} before answering on {url}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.read().decode().strip() == "ok":
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not answer on {url} within {SERVER_START_SECONDS} s") from None
                time.sleep(0.3)
        yield process
    finally:
        process.terminate()  # its PID only: it stops its own worker processes
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if log:
            out.close()


@contextmanager
def served_app(port: int | None = None, log: Path | None = None, env: dict[str, str] | None = None) -> Iterator[str]:
    """The app served on ``127.0.0.1:port`` (a free port by default); yields its URL, stops it on exit."""
    port = port or free_port()
    with app_server(port, log, env):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def chromium_page(width: int = 1280, height: int = 900):
    """A playwright page in Debian's chromium."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": width, "height": height}).new_page()
        finally:
            browser.close()


def wait_rendered(tab, settle_ms: int = 400) -> None:
    """Until the app's script has finished: a title is there and the running indicator gone."""
    tab.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=RENDER_TIMEOUT_MS)
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                          timeout=RENDER_TIMEOUT_MS)
    tab.wait_for_timeout(settle_ms)


def page_errors(tab) -> list[str]:
    """The texts of any exception or error box on the page, and of any traceback."""
    boxes = tab.locator(ERROR_SELECTOR)
    found = [boxes.nth(i).inner_text()[:500] for i in range(boxes.count())]
    if "Traceback (most recent call last)" in tab.inner_text("body"):
        found.append("a traceback")
    return found


def upload_graph(tab, url: str, path: Path) -> None:
    """Open the app, upload ``path`` on the Model page, and wait until it is the model explored."""
    tab.goto(url + "/")
    wait_rendered(tab)
    tab.get_by_role("tab", name="Upload a file").click()
    tab.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    tab.wait_for_function("() => document.body.innerText.includes('Loaded ')", timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)


def go_to(tab, title: str) -> None:
    """Move to the page titled ``title`` through the sidebar (the session and its state stay)."""
    tab.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    tab.locator('[data-testid="stMainBlockContainer"] h1', has_text=title).wait_for(timeout=RENDER_TIMEOUT_MS)
    wait_rendered(tab)


VIEW_POINT_JS = """name => { const plot = document.querySelector('.st-key-graph-view .js-plotly-plot');
  const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis, box = plot.getBoundingClientRect();
  for (const trace of plot._fullData) { if (!trace.customdata || !trace.hovertext) continue;
    for (let i = 0; i < trace.x.length; i++) {
      if (String(trace.hovertext[i]).startsWith('<b>' + name + '</b>'))
        return [box.left + xa._offset + xa.l2p(trace.x[i]), box.top + ya._offset + ya.l2p(trace.y[i])]; } }
  return null; }"""


def click_view_node(tab, name: str) -> None:
    """Click the node (or module) named ``name`` in the Graph page's view (its hover's first line)."""
    point = tab.evaluate(VIEW_POINT_JS, name)
    if point is None:
        raise AssertionError(f"the graph view draws no node named {name!r}")
    tab.mouse.click(*point)


def shot(tab, path: Path, whole: bool = True) -> None:
    """A picture of the page; ``whole``: the viewport stretched to the content's height first (Streamlit
    scrolls inside its main block) and put back after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not whole:
        tab.screenshot(path=str(path))
        return
    size = tab.viewport_size
    height = tab.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    tab.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height), 6000))})
    tab.wait_for_timeout(600)
    tab.screenshot(path=str(path))
    tab.set_viewport_size(size)
