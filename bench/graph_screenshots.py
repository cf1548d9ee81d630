"""Screenshots of the Graph page for the README, taken in chromium: retake them after changing the view.

Traces ResNet-50 at op level (943 nodes: the graph that used to be a hairball), uploads it on the
Model page of a freshly served app, and saves under ``docs/figures/``:

- ``graph-view-modules.png``: the view as it opens, by modules, coloured by the schedule;
- ``graph-view-opened.png``: one residual block opened by a click, its ops named;
- ``graph-view-step.png``: the same, coloured by what is resident at the schedule's peak step;
- ``decomposition-path-strip.png`` and ``decomposition-separator-tree.png``: the decompositions.

It prints how long each step took in the browser (on whatever else the machine is doing).

Run: ``.venv/bin/python -m bench.graph_screenshots [--port PORT] [--out DIR]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.browser import (GRAPH_VIEW_SELECTOR, RENDER_TIMEOUT_MS, ROOT, chromium_page, click_view_node, go_to,
                           page_errors, served_app, upload_graph, wait_rendered)
from remat_core.frontends import trace_zoo_model
from remat_core.graph import save_graph

OPENED_BLOCK = "layer3.1 · forward"
SETTLE_MS = 2500
"""After a click the fragment reruns and plotly redraws: pictures wait this long after the page is idle."""


def view_picture(tab, path: Path) -> None:
    """The Graph page from its title to the end of the view's details."""
    top = tab.locator('[data-testid="stMainBlockContainer"] h1').bounding_box()
    chart = tab.locator(".st-key-graph-view").bounding_box()
    below = tab.locator('[data-testid="stDownloadButton"]').first.bounding_box()
    bottom = below["y"] if below else chart["y"] + chart["height"] + 80
    tab.screenshot(path=str(path), clip={"x": top["x"] - 20, "y": top["y"] - 10, "width": chart["width"] + 40,
                                         "height": bottom - top["y"] + 10})


def settle(tab) -> None:
    tab.wait_for_timeout(SETTLE_MS)
    wait_rendered(tab)
    errors = page_errors(tab)
    if errors:
        raise RuntimeError(f"the Graph page shows an error: {errors}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=None, help="port to serve the app on (default: a free one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures", help="where the pictures go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        graph_file = Path(scratch) / "resnet50-op.json"
        started = time.perf_counter()
        save_graph(trace_zoo_model("resnet50", level="op", batch_size=4), graph_file)
        print(f"traced resnet50 at op level in {time.perf_counter() - started:.1f} s")
        with served_app(args.port, env={"REMAT_UPLOAD_DIR": str(Path(scratch) / "uploads")}) as url, \
                chromium_page(1280, 900) as tab:
            upload_graph(tab, url, graph_file)
            started = time.perf_counter()
            go_to(tab, "Graph")
            tab.wait_for_selector(GRAPH_VIEW_SELECTOR, timeout=RENDER_TIMEOUT_MS)
            print(f"Graph page drawn in {time.perf_counter() - started:.1f} s")
            tab.wait_for_function("() => !document.body.innerText.includes('Solving ')", timeout=RENDER_TIMEOUT_MS)
            settle(tab)
            view_picture(tab, args.out / "graph-view-modules.png")

            started = time.perf_counter()
            click_view_node(tab, OPENED_BLOCK)
            tab.wait_for_function("() => document.body.innerText.includes('module of')", timeout=RENDER_TIMEOUT_MS)
            print(f"{OPENED_BLOCK} opened in {time.perf_counter() - started:.1f} s")
            settle(tab)
            view_picture(tab, args.out / "graph-view-opened.png")

            tab.get_by_text("Step", exact=True).click()
            tab.get_by_role("slider", name="Step").wait_for(timeout=RENDER_TIMEOUT_MS)
            settle(tab)
            view_picture(tab, args.out / "graph-view-step.png")

            for name, title in (("path-strip", "Path strip"), ("separator-tree", "Separator tree")):
                tab.get_by_text(title, exact=True).click()
                settle(tab)
                chart = tab.locator('[data-testid="stPlotlyChart"]').last
                chart.scroll_into_view_if_needed()
                chart.screenshot(path=str(args.out / f"decomposition-{name}.png"))
    print(f"pictures in {args.out}")


if __name__ == "__main__":
    main()
