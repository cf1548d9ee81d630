"""Names, not ids: no page shows a node's id where a person reads (ids only in tooltips and details).

The model's ids are opaque tokens (``id0007zq``) that no label contains, and most of its nodes have no
label of their own (module path and op only, as a traced model's): a page that writes ``display_name``
or an id anywhere in its text, tables, pickers, figures or DAG shows such a token.
"""

import json
import re
from dataclasses import replace

import pytest
from app_solves import solved
from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.jobs.lanes import stop_background_work
from explorer.pages import PAGES
from remat_core.graph import ComputeGraph, node_labels
from remat_core.graph.generators import residual_training_net

TIMEOUT = 120
TOKEN = re.compile(r"id\d{4}zq")
TEXT_ELEMENTS = {"markdown", "caption", "text", "title", "header", "subheader", "error", "warning", "info", "success",
                 "toast", "exception", "json", "code", "latex"}


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    yield
    stop_background_work()


def opaque_ids_model() -> state.Model:
    """A small residual net whose node ids say nothing (``id0000zq``...) and differ from every label."""
    graph = residual_training_net(2, mem=2**20)
    new = {node_id: f"id{k:04d}zq" for k, node_id in enumerate(graph.ids)}
    nodes = [replace(n, id=new[n.id]) for n in graph.nodes]
    renamed = ComputeGraph(nodes, [(new[u], new[v]) for u, v in graph.edges], [new[o] for o in graph.outputs],
                           name="opaque-ids")
    assert not any(TOKEN.search(label) for label in node_labels(renamed).values())
    return state.Model(renamed, "generated: a residual net with opaque ids")


def shown_text(at: AppTest) -> list[str]:
    """Everything a person reads on the page: texts, metrics, alerts, pickers' options, table cells, button
    labels, figures' texts, names, axis labels and annotations (hover lines ``id: ...`` are details), and
    the labels of a DAG's nodes."""
    found: list[str] = []

    def walk(node) -> None:
        children = getattr(node, "children", None)
        if children is not None:
            for child in children.values():
                walk(child)
            return
        kind = getattr(node, "type", "")
        proto = getattr(node, "proto", None)
        if kind == "plotly_chart":
            found.extend(figure_text(json.loads(proto.spec)))
        elif kind == "echarts_chart":
            found.extend(echarts_text(json.loads(proto.spec)))
        elif kind == "iframe" or (kind == "unknown" and proto is not None and getattr(proto, "srcdoc", "")):
            found.extend(re.findall(r'"label": "([^"]*)"', getattr(proto, "srcdoc", "")))
        elif kind == "dataframe":
            found.extend(str(v) for v in node.value.astype(str).to_numpy().ravel())
            found.extend(str(c) for c in node.value.columns)
        elif kind == "metric":
            found.extend([node.label, str(node.value), str(proto.delta)])
        elif hasattr(node, "options") and kind not in ("markdown",):
            found.extend([str(o) for o in node.options] + [str(getattr(node, "label", ""))])
        elif kind in ("button", "download_button", "link_button"):
            found.append(str(getattr(node, "label", proto.label if proto is not None else "")))
        elif kind in TEXT_ELEMENTS:
            found.append(str(node.value))
    walk(at._tree)
    return found


def figure_text(spec: dict) -> list[str]:
    texts = []
    for trace in spec.get("data", []):
        for key in ("text", "name", "x", "y"):
            value = trace.get(key)
            values = value if isinstance(value, list) else [value]
            texts += [str(v) for v in values if isinstance(v, str)]
        hover = trace.get("hovertext")
        for line in (hover if isinstance(hover, list) else [hover]):
            if isinstance(line, str):
                texts += [part for part in re.split(r"<br>|\n", line) if not part.startswith("id: ")]
    layout = spec.get("layout", {})
    texts += [str(a.get("text", "")) for a in layout.get("annotations", [])]
    for axis in ("xaxis", "yaxis"):
        texts += [str(v) for v in layout.get(axis, {}).get("categoryarray", []) or []]
    return texts


def echarts_text(option: dict) -> list[str]:
    """An ECharts option's texts: titles, legends, axis names, series and item names, labels, tooltips (but
    their ``id: ...`` lines, which are details)."""
    texts = []

    def visit(value, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                visit(v, k)
        elif isinstance(value, list):
            for v in value:
                visit(v, key)
        elif isinstance(value, str) and key in ("text", "name", "formatter", "data"):
            texts.extend(part for part in value.split("<br/>") if not part.startswith("id: "))
    visit(option)
    return texts


def page_params():
    params = [pytest.param(entry.path, None, id=entry.url_path) for entry in PAGES]
    params.append(pytest.param("app_pages/learn.py", "module", id="learn-module-of-the-model"))
    return params


@pytest.mark.parametrize("page, lesson", page_params())
def test_no_page_shows_a_node_id(page, lesson):
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT).run()
    model = opaque_ids_model()
    at.session_state[state.MODEL] = model
    at.session_state[state.BUDGET] = state.default_budget(model.graph)
    at.session_state[state.WHY_TENSOR] = None
    solved(at.switch_page(page).run())  # the page draws its schedule once the solve has ended: wait for it
    if lesson is not None:
        at.segmented_control(key="w_learn_example").set_value(lesson).run()
    assert not at.exception, at.exception
    text = shown_text(at)
    assert len(" ".join(text)) > 500, "the page showed almost nothing: the test would prove nothing"
    shown = sorted({m for t in text for m in TOKEN.findall(t)})
    assert not shown, f"{page} shows node ids {shown[:5]} in: " + " | ".join(t for t in text if TOKEN.search(t))[:600]
