"""The Graph page in AppTest: the graph view (levels of detail, search, a schedule's colours, a step,
a node's details and its Why link) and the decompositions below it."""

import base64
import json
from urllib.parse import parse_qs

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.figures.decompositions import decomposition
from explorer.jobs.results import awaited_solve
from explorer.jobs.lanes import stop_background_work
from explorer.widgets.decompositions import DECOMPOSE_AT_ONCE_UP_TO, SELECTED_BAG
from explorer.widgets.graph_view import OPEN, SELECTED
from remat_core.analysis import DEFAULT_VIEW_NODES, graph_view
from remat_core.graph import node_labels, training_chain

TIMEOUT = 120


@pytest.fixture(scope="module", autouse=True)
def background_workers():
    """The explorer's worker processes, stopped after this module."""
    yield
    stop_background_work()


def graph_page(graph=None) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT).run()
    if graph is not None:
        at.session_state[state.MODEL] = state.Model(graph, "test")
        at.session_state[state.BUDGET] = state.default_budget(graph)
        at.session_state[state.TIME_LIMIT] = 2.0  # auto, the default, searches to its limit: the view waits on it
    at.switch_page("app_pages/graph.py").run()
    assert not at.exception, at.exception
    return at


def view_spec(at: AppTest) -> dict:
    """The graph view's plotly figure (the first chart of the page)."""
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def drawn_names(spec: dict) -> set[str]:
    """The first line of every node's hover: the name the view gives it."""
    return {h.split("<br>")[0].removeprefix("<b>").removesuffix("</b>")
            for trace in spec["data"] if "customdata" in trace for h in trace["hovertext"]}


def test_the_default_model_is_drawn_by_modules_named_and_coloured_by_its_schedule():
    at = graph_page()
    assert not at.error, [e.value for e in at.error]
    graph = at.session_state[state.MODEL].graph
    spec = view_spec(at)
    assert all(trace["type"] == "scattergl" for trace in spec["data"])
    names = drawn_names(spec)
    assert 1 < len(names) <= DEFAULT_VIEW_NODES and any(" · forward" in n for n in names)
    assert not names & (set(graph.ids) - set(node_labels(graph).values()))  # names, never bare ids
    awaited_solve(graph, at.session_state[state.BUDGET], at.session_state[state.SOLVER], (),
                  at.session_state[state.TIME_LIMIT])  # wait for the schedule the view is coloured by
    at.run()
    legend = {t["name"] for t in view_spec(at)["data"] if t.get("showlegend")}
    assert legend and legend <= {"recomputed", "computed once", "always resident", "never computed"}


def test_a_ten_thousand_node_graph_opens_by_modules_and_decomposes_when_asked():
    graph = training_chain(5000, mem=2**20)
    at = graph_page(graph)
    assert not at.error, [e.value for e in at.error]
    opened = at.session_state[OPEN][1]
    assert len(graph_view(graph, opened).nodes) <= DEFAULT_VIEW_NODES
    assert len(drawn_names(view_spec(at))) == len(graph_view(graph, opened).nodes)
    assert any(b.proto.label == "Decompose this graph" for b in at.button)
    assert not any(m.label == "Tree width" for m in at.metric)


def test_deciding_to_decompose_a_big_graph_shows_both_decompositions():
    graph = training_chain(DECOMPOSE_AT_ONCE_UP_TO // 2, mem=1)
    at = graph_page(graph)
    next(b for b in at.button if b.proto.label == "Decompose this graph").click().run()
    assert not at.exception
    assert {m.label for m in at.metric} >= {"Tree width", "Path width"}


def test_finding_a_node_opens_its_modules_selects_it_and_links_to_its_why_page():
    graph = training_chain(5000, mem=2**20)
    at = graph_page(graph)
    at.text_input(key="w_graph_find").input("layer 4321").run()
    assert not at.exception
    assert at.session_state[SELECTED][1] == ("node", "f4321") and at.session_state[state.WHY_TENSOR] == "f4321"
    spec = view_spec(at)
    assert "layer 4321 (fwd)" in drawn_names(spec)  # drawn on its own now
    assert any(t["name"] == "selected" for t in spec["data"]) and "range" in spec["layout"]["xaxis"]
    awaited_solve(graph, at.session_state[state.BUDGET], at.session_state[state.SOLVER], (),
                  at.session_state[state.TIME_LIMIT])
    at.run()
    link = next(e for e in at.get("page_link") if "why" in e.proto.page).proto
    assert link.label.startswith("Why is it computed") or link.label == "Open it on the Why page"
    query = parse_qs(link.query_string)
    assert query["tensor"] == ["layer 4321 (fwd)"] and query["budget"] == [f"{at.session_state[state.BUDGET]}B"]
    assert query["solver"] == [at.session_state[state.SOLVER]]


def test_a_step_colours_what_is_resident_then():
    graph = training_chain(40, mem=2**20)
    at = graph_page(graph)
    awaited_solve(graph, at.session_state[state.BUDGET], at.session_state[state.SOLVER], (),
                  at.session_state[state.TIME_LIMIT])
    at.segmented_control(key="w_graph_colour").set_value("step").run()
    assert not at.exception
    step = at.slider(key="w_graph_step")
    assert step.value >= 0
    assert view_spec(at)["layout"]["legend"]["title"]["text"] == f"After step {step.value}:"
    step.set_value(0).run()
    legend = {t["name"] for t in view_spec(at)["data"] if t.get("showlegend")}
    assert "computed at this step" in legend and "resident" not in legend  # nothing computed before step 0


def test_more_detail_opens_whole_levels():
    graph = training_chain(2000, mem=1)
    at = graph_page(graph)
    before = len(drawn_names(view_spec(at)))
    at.select_slider(key="w_graph_depth").set_value(0).run()
    assert not at.exception and len(drawn_names(view_spec(at))) < before


def test_a_picked_bag_is_ringed_in_the_graph_view():
    at = graph_page(training_chain(6, mem=1))
    at.selectbox(key="w_graph_bag").set_value(("tree", 1)).run()
    assert not at.exception and at.session_state[SELECTED_BAG] == ("tree", 1)
    graph = at.session_state[state.MODEL].graph
    bag = set(decomposition(graph.content_hash, graph, "tree", "min_degree")[0].bags[1])
    spec = view_spec(at)
    ringed = next(t for t in spec["data"] if t["name"] == "highlighted")
    view_nodes = [t for t in spec["data"] if "customdata" in t]
    positions = {}
    for trace in view_nodes:
        for x, y, hover in zip(decoded(trace["x"]), decoded(trace["y"]), trace["hovertext"]):
            positions[(round(x, 3), round(y, 3))] = hover.split("<br>")[0].removeprefix("<b>").removesuffix("</b>")
    ringed_names = {positions[(round(x, 3), round(y, 3))] for x, y in zip(decoded(ringed["x"]), decoded(ringed["y"]))}
    assert ringed_names == {node_labels(graph)[b] for b in bag}


def decoded(values) -> list[float]:
    """A plotly array as numbers (plotly writes numpy arrays as base64 ``bdata``)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).tolist()
    return list(values)


def test_the_search_says_how_many_match_and_how_many_it_lists():
    """"layer 4" matches hundreds of nodes: the list says it shows the closest 50 of them (it said "50+ matches")."""
    graph = training_chain(5000, mem=2**20)
    at = graph_page(graph)
    at.text_input(key="w_graph_find").input("layer 4").run()
    assert not at.exception
    every = len([label for label in node_labels(graph).values() if "layer 4" in label])
    listed = at.selectbox(key="w_graph_match")
    assert len(listed.options) == 50
    assert listed.label == f"{every:,} matches, the closest 50 listed (scroll; type more to narrow)"


def test_a_graph_without_modules_offers_runs_of_nodes_not_modules():
    at = graph_page(training_chain(400, mem=2**20))
    titles = [e.proto.label for e in at.expander]
    assert not any(t.startswith("Open modules") for t in titles), titles
    assert any(t.startswith("Open runs of nodes (") and "names no modules" in t for t in titles), titles
