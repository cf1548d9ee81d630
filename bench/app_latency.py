"""How fast does the explorer answer in a real browser? Slider latency, the Graph page's first draw, memory.

Serves ``app.py`` with ``streamlit run`` on 127.0.0.1 and drives Debian's chromium with playwright, as
a user would:

- three models: the default (ResNet-18, module level), ResNet-50 traced at op level and a generated
  ResNet-like training graph of 10,000 nodes, both uploaded as ``remat-graph`` JSON on the Model page;
- for each, the Schedule page is opened and left until its background work is done (the Pareto
  sweep drawn: "warm"); then the budget slider is moved 7 times with the keyboard (PageDown, one
  tenth of its range, each to a budget not solved before), timing in the page from the key press to
  the page's answer changing (``metrics``: the sweep's estimate, marked ≈, or the exact result; or,
  at a budget the solver cannot meet, its warning) and to the exact, simulated answer (``exact``);
- the Graph page's first draw of the 10,000-node graph (from the click to the page drawn);
- the server's resident memory with all of them loaded (the server alone, and with its workers).

Prints a table and writes it to ``docs/app-latency.md`` with the machine and the date. A few minutes.
Goals (issues 12 and 13): metrics under 300 ms on ResNet-50 at op level, under 1 s on 10,000 nodes;
the Graph page under 5 s; the server under 2 GB.

Run: PYTHONPATH=$PWD .venv/bin/python bench/app_latency.py [--port 8741] [--moves 7] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import app_server  # noqa: E402 - sibling benchmark modules
from training_graphs import residual_forward, training_graph  # noqa: E402

from remat_core.frontends import trace_zoo_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "app-latency.md"
FAILED_SHOT = ROOT / "test-output" / "app-latency-failed.png"
CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 300_000
"""The longest the bench waits for a page or a sweep (a 10,000-node sweep on a busy machine)."""
ANSWER = ("[...document.querySelectorAll('[data-testid=\"stMainBlockContainer\"] [data-testid=\"stMetric\"], "
          "[data-testid=\"stMainBlockContainer\"] [data-testid=\"stAlertContentWarning\"]')]"
          ".map(e => e.innerText).join('|')")
"""The page's answer at the budget: the four metrics (marked ≈ while they are the sweep's estimate), or the
warning that the budget is infeasible for the solver."""
GOALS_MS = {"ResNet-50": 300.0, "generated": 1000.0}
NOTES = "## Reading the numbers"
"""The heading of the notes written by hand below the table: a new run keeps them."""


@dataclass
class Row:
    case: str
    what: str
    median: float
    p90: float
    unit: str
    goal: str = ""


def say(text: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def rendered(page: Page) -> None:
    """Until a script run is over: a title there and the app's script not running (Streamlit marks ``stApp``
    with ``data-test-script-state``; while work runs in the background, between two polls)."""
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState "
                           "=== 'notRunning'", timeout=TIMEOUT_MS)


def go_to(page: Page, title: str) -> float:
    """Open a page from the sidebar; seconds until it is drawn."""
    started = time.perf_counter()
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    page.locator('[data-testid="stMainBlockContainer"] h1', has_text=title).wait_for(timeout=TIMEOUT_MS)
    rendered(page)
    return time.perf_counter() - started


def upload(page: Page, path: Path) -> None:
    """Load a graph file as the model through the Model page's uploader."""
    go_to(page, "Model")
    page.get_by_role("tab", name="Upload a file").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    page.locator('[data-testid="stAlertContentSuccess"]', has_text="Loaded").wait_for(timeout=TIMEOUT_MS)
    rendered(page)


def warm_schedule_page(page: Page) -> None:
    """Open the Schedule page and wait until the sweep is drawn and no job is running."""
    go_to(page, "Schedule")
    page.wait_for_selector(".js-plotly-plot", timeout=TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stProgress\"]')", timeout=TIMEOUT_MS)
    rendered(page)


def slider_moves(page: Page, moves: int) -> tuple[list[float], list[float]]:
    """Milliseconds from each PageDown on the budget slider to a new answer, and to the exact one (no ≈)."""
    slider = page.locator('[data-testid="stSlider"] input[type="range"]').first
    slider.focus()
    page.keyboard.press("End")
    page.wait_for_function(f"() => {ANSWER} && !({ANSWER}).includes('≈')", timeout=TIMEOUT_MS)
    rendered(page)
    page.evaluate("() => window.addEventListener('keydown', e => { window.__pressed = performance.now(); }, true)")
    first, exact = [], []
    for _ in range(moves):
        page.wait_for_timeout(300)
        before = page.evaluate(f"() => {ANSWER}")
        slider.focus()
        page.keyboard.press("PageDown")
        changed = page.wait_for_function(
            f"before => {{ const now = {ANSWER}; return now && now !== before ? performance.now() - window.__pressed "
            f": null; }}", arg=before, timeout=TIMEOUT_MS, polling="raf")
        first.append(changed.json_value())
        settled = page.wait_for_function(
            f"before => {{ const now = {ANSWER}; return now && now !== before && !now.includes('≈') ? "
            f"performance.now() - window.__pressed : null; }}", arg=before, timeout=TIMEOUT_MS, polling="raf")
        exact.append(settled.json_value())
        rendered(page)
    return first, exact


def resident_mb(pid: int) -> tuple[float, float]:
    """Resident memory of ``pid`` alone and with every process under it, in MB (from /proc)."""
    def rss(p: int) -> int:
        with open(f"/proc/{p}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    family, frontier = {pid}, [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier and p not in family]
        family.update(children)
        frontier = children
    alone = rss(pid)
    total = alone + sum(rss(p) for p in family - {pid} if os.path.exists(f"/proc/{p}"))
    return alone / 1e6, total / 1e6


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (p90 of 7 values is the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor() or "unknown CPU")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} " \
           f"GiB; load average {load} (shared with other work)"


def bench_files(folder: Path) -> list[tuple[str, Path]]:
    """ResNet-50 at op level and the 10,000-node training graph, written as remat-graph JSON to upload."""
    resnet = trace_zoo_model("resnet50", level="op")
    big = training_graph(residual_forward(1666, seed=7), name="resnet-like-10k-train")
    files = []
    for name, graph in ((f"ResNet-50, op level ({len(resnet):,} nodes)", resnet),
                        (f"generated, {len(big):,} nodes", big)):
        path = folder / f"{graph.name}.json"
        path.write_text(json.dumps(graph.to_json()))
        files.append((name, path))
    return files


def run(port: int, moves: int) -> tuple[list[Row], str]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        say("tracing ResNet-50 and generating the 10,000-node graph")
        uploads = bench_files(Path(folder))
        with app_server(port) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/")
            rendered(page)
            cases = [("ResNet-18, module level (default model)", None), *uploads]
            try:
                rows += measure(page, cases, moves)
            except Exception:
                FAILED_SHOT.parent.mkdir(exist_ok=True)
                page.screenshot(path=str(FAILED_SHOT))
                say(f"failed; the page then is in {FAILED_SHOT.relative_to(ROOT)}")
                raise
            alone, total = resident_mb(server.pid)
            rows.append(Row("server with the three models loaded", "resident memory", alone, total, "MB",
                            "< 2000 MB"))
            browser.close()
    return rows, machine()


def measure(page: Page, cases: list[tuple[str, Path | None]], moves: int) -> list[Row]:
    """Slider moves on each model in turn (loaded through the Model page), then the Graph page of the last."""
    rows = []
    for name, path in cases:
        say(f"{name}: loading")
        if path is not None:
            upload(page, path)
        say(f"{name}: waiting for the sweep")
        warm_schedule_page(page)
        say(f"{name}: moving the slider")
        first, exact = slider_moves(page, moves)
        goal = next((f"< {g:.0f} ms" for key, g in GOALS_MS.items() if key in name), "")
        rows.append(Row(name, "slider → metrics", statistics.median(first), percentile(first, 0.9), "ms", goal))
        rows.append(Row(name, "slider → exact metrics", statistics.median(exact), percentile(exact, 0.9), "ms"))
    say("the Graph page")
    drawn = go_to(page, "Graph")
    rows.append(Row(cases[-1][0], "Graph page, first draw", drawn, drawn, "s", "< 5 s"))
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| model | measure | median | p90 | goal |", "|---|---|---:|---:|---|"]
    for r in rows:
        if r.what == "resident memory":
            lines.append(f"| {r.case} | {r.what} (server · with its workers) | {r.median:,.0f} MB | "
                         f"{r.p90:,.0f} MB | {r.goal} |")
        else:
            value = (lambda v: f"{v:,.0f} ms") if r.unit == "ms" else (lambda v: f"{v:.2f} s")
            lines.append(f"| {r.case} | {r.what} | {value(r.median)} | {value(r.p90)} | {r.goal} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8741)
    parser.add_argument("--moves", type=int, default=7, help="slider moves per model")
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {TABLE.name}")
    args = parser.parse_args()
    rows, where = run(args.port, args.moves)
    text = table(rows)
    print(text)
    print(where)
    if not args.no_write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        notes = TABLE.read_text().partition(NOTES)[2] if TABLE.exists() else ""
        TABLE.write_text(
            f"# Explorer latency in the browser\n\n"
            f"Measured by `bench/app_latency.py` on {datetime.date.today().isoformat()} (commit {commit}): "
            f"chromium driven by playwright against `streamlit run app.py`, {args.moves} slider moves per model "
            f"(PageDown, each to a budget not solved before) after the model's sweep was done. *metrics*: from the "
            f"key press until the page shows new metrics (the sweep's estimate, marked ≈, or the exact result); "
            f"*exact metrics*: until the simulated schedule at that budget is shown. The default solver, default "
            f"time limit.\n\nMachine: {where}.\n\n{text}\n" + (f"\n{NOTES}{notes}" if notes else ""))
        print(f"written to {TABLE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
