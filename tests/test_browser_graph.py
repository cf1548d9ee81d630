"""The Graph page of a 10,000-node graph in a real browser: uploaded, drawn, a module opened by a click.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); without it the test is skipped, unless
``REMAT_REQUIRE_BROWSER=1`` (set by CI) makes the missing browser a failure. ``REMAT_BROWSER_PORT``
picks the server's port (default: a free one).
"""

from __future__ import annotations

import os
import re

import pytest

from bench.browser import (CHROMIUM, GRAPH_VIEW_SELECTOR, RENDER_TIMEOUT_MS, chromium_page, click_view_node, go_to,
                           page_errors, served_app, upload_graph, wait_rendered)
from remat_core.analysis import default_expansion, graph_view
from remat_core.graph import save_graph, training_chain

pytestmark = pytest.mark.browser

DRAWN = re.compile(r"([\d,]+) of ([\d,]+) nodes drawn")


def drawn_count(tab) -> int:
    """How many nodes the view says it draws."""
    return int(DRAWN.search(tab.inner_text("body")).group(1).replace(",", ""))


def test_a_ten_thousand_node_graph_is_drawn_and_a_module_opens(tmp_path):
    if not CHROMIUM.exists():
        message = "Debian chromium is missing: apt-get install -y chromium"
        if os.environ.get("REMAT_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("playwright.sync_api")
    graph = training_chain(5000, mem=2**20)
    graph_file = tmp_path / "chain-10k.json"
    save_graph(graph, graph_file)
    module = next(n.label for n in graph_view(graph, default_expansion(graph)).nodes
                  if n.group is not None and n.kind == "forward")
    port = int(os.environ.get("REMAT_BROWSER_PORT", 0)) or None
    with served_app(port, env={"REMAT_UPLOAD_DIR": str(tmp_path / "uploads")}) as url, chromium_page() as tab:
        upload_graph(tab, url, graph_file)
        go_to(tab, "Graph")
        tab.wait_for_selector(GRAPH_VIEW_SELECTOR, timeout=RENDER_TIMEOUT_MS)
        assert not page_errors(tab), page_errors(tab)
        before = drawn_count(tab)
        assert 1 < before < 10_002 and "of 10,002 nodes drawn" in tab.inner_text("body")
        click_view_node(tab, module)
        tab.wait_for_function("before => { const m = document.body.innerText.match(/([\\d,]+) of [\\d,]+ nodes "
                              "drawn/); return m && Number(m[1].replace(/,/g, '')) > before; }", arg=before,
                              timeout=RENDER_TIMEOUT_MS)
        wait_rendered(tab)
        assert not page_errors(tab), page_errors(tab)
