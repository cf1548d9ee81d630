"""How fast does the Learn page show the next step? Chromium against ``streamlit run``, Next clicked.

Serves the app on 127.0.0.1 (``--port``), opens the Learn page in Debian's chromium (playwright), lets
the page settle, clicks Next a few times to warm it, then times each of ``--clicks`` Next clicks in the
page, from the click event (its ``timeStamp``) to the first animation frame in which the page shows the
new step (the time a person waits; playwright's own round trips are not counted): the "Step k of n" text says k and the graph, the separator
tree and the memory timeline on screen all name step k in their accessible names (the ``alt`` the page
gives each chart, which ECharts sets with the option it draws). Prints the median, the quartiles and the
slowest, the server's CPU time per click (which the machine's load does not inflate, where the wall time
grows with it), and the machine's load average (it may be shared). Goal: a median under 300 ms.

Run: PYTHONPATH=$PWD .venv/bin/python bench/learn_latency.py [--port 8769] [--clicks 30] [--example chain]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import app_server  # noqa: E402 - a sibling benchmark module

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
GOAL_MS = 300.0
SHOWN = """k => {
  const text = [...document.querySelectorAll('p')].map(p => p.innerText).find(t => /^Step \\d+ of \\d+/.test(t));
  if (!text || Number(text.match(/^Step (\\d+)/)[1]) !== k) return false;
  const charts = [...document.querySelectorAll('div[aria-label]')].filter(d => d.checkVisibility())
    .map(d => d.getAttribute('aria-label')).filter(a => / at step \\d+ of \\d+$/.test(a));
  const shown = charts.length === 3 && charts.every(a => a.includes(` at step ${k} of `));
  if (shown) window.shownAt = performance.now();
  return shown;
}"""
CLICKS = """() => document.addEventListener('click', e => { window.clickAt = e.timeStamp; }, true)"""
WAITED = "() => window.shownAt - window.clickAt"


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process (all its threads) has used so far, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port: int, clicks: int, warm: int, example: str | None, server: int) -> tuple[list[float], float]:
    """Milliseconds from each Next click until the page shows the new step, and the server's CPU
    milliseconds per click (what a step costs it, whatever the machine's load)."""
    timings = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
        tab.goto(f"http://127.0.0.1:{port}/learn")
        tab.wait_for_function(SHOWN, arg=1, timeout=120_000)
        if example:
            tab.get_by_role("radio", name=example).click()
            tab.wait_for_timeout(3000)
            tab.wait_for_function(SHOWN, arg=1, timeout=120_000)
        tab.locator('[class*="st-key-learn_graph_"]').scroll_into_view_if_needed()  # charts in view
        tab.wait_for_function(SHOWN, arg=1, timeout=120_000)
        tab.wait_for_timeout(3000)  # the comparison's solves land and the page settles
        tab.evaluate(CLICKS)
        for k in range(2, 2 + warm + clicks):
            if k == 2 + warm:
                cpu_before = cpu_seconds(server)
            tab.get_by_role("button", name="Next").click()
            tab.wait_for_function(SHOWN, arg=k, timeout=60_000, polling="raf")
            if k >= 2 + warm:
                timings.append(tab.evaluate(WAITED))
            tab.wait_for_timeout(200)
        cpu_ms = (cpu_seconds(server) - cpu_before) * 1e3 / clicks
        browser.close()
    return timings, cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8769)
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--example", default=None, help="an example's title (default: the chain)")
    args = parser.parse_args()
    with app_server(args.port) as server:
        timings, cpu_ms = measure(args.port, args.clicks, args.warm, args.example, server.pid)
    q1, median, q3 = statistics.quantiles(timings, n=4)
    load = os.getloadavg()
    print(f"Next -> new step shown, {len(timings)} clicks after {args.warm} to warm: median {median:.0f} ms "
          f"(quartiles {q1:.0f}-{q3:.0f} ms, slowest {max(timings):.0f} ms); goal {GOAL_MS:.0f} ms: "
          f"{'met' if median < GOAL_MS else 'missed'}. The server's CPU per click: {cpu_ms:.0f} ms. "
          f"Load average {load[0]:.1f} on {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
