"""The graph view's numbers and figure: levels of detail, the layered layout, a schedule's statuses,
and the WebGL figure that draws them (names, colours, legend, clicks)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from recompute_fixture import chain3, recompute_schedule
from strategies import compute_graphs, training_graphs

from remat_core import ComputeGraph, GraphError, Node, checkpoint_all_peak, memory_lower_bound, solve
from remat_core.analysis import (collapse, default_expansion, expand, expanded_to_depth, find, full_view, graph_view,
                                 hierarchy, layered_layout, reveal, schedule_status, selection_focus)
from remat_core.analysis.layout import BACKWARD_BAND, FORWARD_BAND, PINNED_BAND
from remat_core.analysis.overlay import SCHEDULE_STATUSES, STEP_STATUSES
from remat_core.analysis.views import RUNS_PER_GROUP, run_label
from remat_core.graph import node_labels, training_chain
from remat_core.viz import STATUS_COLORS, clicked_index, graph_view_figure
from remat_core.viz.graph_view import EDGE_TRACE, NAMES_TRACE, drawn_name
from remat_core.viz.palette import KIND_COLORS, RECOMPUTE_COLOR

EVIL = "<script>alert('x')</script> & <b>href</b>"


def small_model() -> ComputeGraph:
    """Two modules (one nested), parameters, a buffer, a loss without a module, and the backward pass."""
    nodes = [Node("x", 8, 0, "input", True), Node("w1", 100, 0, "param", True, module="layer1.conv"),
             Node("rm", 4, 0, "buffer", True, module="layer1.bn"),
             Node("a", 10, 5, "forward", op="aten.convolution", module="layer1.conv"),
             Node("a2", 10, 5, "forward", op="aten.batch_norm", module="layer1.bn"),
             Node("b", 20, 5, "forward", op="aten.mm", module="layer2"), Node("loss", 1, 1, "loss", op="aten.sum"),
             Node("gb", 20, 10, "backward", op="aten.mm", module="layer2"),
             Node("ga", 10, 10, "backward", op="aten.batch_norm_backward", module="layer1.bn"),
             Node("gw", 100, 10, "backward", op="aten.convolution_backward", module="layer1.conv")]
    edges = [("x", "a"), ("w1", "a"), ("a", "a2"), ("rm", "a2"), ("a2", "b"), ("b", "loss"), ("loss", "gb"),
             ("gb", "ga"), ("a", "gw"), ("ga", "gw"), ("x", "gw")]
    return ComputeGraph(nodes, edges, outputs=["gw"], name="small")


def members_by_view_node(view):
    return {node.id: set(view.members(k).tolist()) for k, node in enumerate(view.nodes)}


# -- levels of detail -----------------------------------------------------------------------------------------------

def test_a_closed_module_is_one_node_per_pass_holding_exactly_its_members():
    graph = small_model()
    view = graph_view(graph)  # nothing open: the top level
    ids = {n.id: n for n in view.nodes}
    index = graph.index
    assert members_by_view_node(view)["layer1 [forward]"] == {index["a"], index["a2"]}
    assert ids["layer1 [backward]"].mem == 110 and ids["layer1 [backward]"].size == 2
    assert ids["layer1 [forward]"].label == "layer1 · forward" and ids["layer1 [forward]"].group == "layer1"
    assert ids["w1"].group is None and ids["w1"].label == node_labels(graph)["w1"]  # a group of one: the node
    # every graph node is in exactly one view node, and the view's edges join different view nodes
    assert sorted(i for m in members_by_view_node(view).values() for i in m) == list(range(len(graph)))
    assert all(u != v for u, v in view.edges.tolist())
    assert len({tuple(e) for e in view.edges.tolist()}) == len(view.edges)


def test_opening_and_closing_modules_and_revealing_a_node():
    graph = small_model()
    opened = expand(graph, frozenset(), "layer1.conv")  # its parent opens with it
    assert opened == {"layer1", "layer1.conv"}
    view = graph_view(graph, opened)
    ids = {n.id for n in view.nodes}
    assert {"a", "gw"} <= ids and "layer1.bn [forward]" not in ids  # one-node groups are drawn as the node
    assert {"a2", "ga"} <= ids  # layer1.bn holds one node per pass: drawn as those nodes
    assert collapse(graph, opened, "layer1") == frozenset()  # closing a module closes what is inside it
    assert reveal(graph, frozenset(), "gw") == {"layer1", "layer1.conv"}
    assert len(full_view(graph).nodes) == len(graph)
    with pytest.raises(GraphError):
        reveal(graph, frozenset(), "missing")


def test_a_click_on_a_module_that_only_wraps_another_opens_both():
    nodes = [Node("i", 1, 0, "input", True)] + [Node(f"f{k}", 1, 1, "forward", module=f"outer.inner.m{k}")
                                               for k in range(3)]
    graph = ComputeGraph(nodes, [("i", "f0"), ("f0", "f1"), ("f1", "f2")])
    assert expand(graph, frozenset(), "outer") == {"outer", "outer.inner"}


def test_nodes_without_a_module_are_grouped_into_nested_runs_in_topological_order():
    graph = training_chain(400, mem=1)
    tree = hierarchy(graph)
    forward_top = [p for p in tree.children[None] if p.startswith("runs:forward")]
    assert 2 <= len(forward_top) <= RUNS_PER_GROUP + 1
    position = {i: p for p, i in enumerate(graph.topo_idx)}
    in_pass = sorted((position[i] for i, stage in enumerate(tree.passes) if stage == "forward"))
    labels = node_labels(graph)
    covered = []
    for path in forward_top:
        group = tree.groups[path]
        positions = sorted(position[i] for i in tree.members(path).tolist())
        start = in_pass.index(positions[0])
        assert positions == in_pass[start:start + len(positions)] and group.size == len(positions)  # consecutive
        ends = [labels[graph.ids[graph.topo_idx[p]]] for p in (positions[0], positions[-1])]
        assert group.label == run_label(*ends)
        covered += positions
        for child in tree.children.get(path, ()):
            assert set(tree.members(child).tolist()) <= set(tree.members(path).tolist())
    assert covered == in_pass  # the runs split the pass
    assert run_label("layer 1 (fwd)", "layer 81 (fwd)") == "layer 1 … 81 (fwd)"
    assert run_label("v0 (fwd)", "v99 (fwd)") == "v0 … v99 (fwd)"


def test_the_default_view_opens_whole_levels_while_it_stays_readable():
    graph = training_chain(3000, mem=1)
    sizes = hierarchy(graph).view_sizes
    assert sizes[-1] == len(graph) and sizes == tuple(sorted(sizes))
    for limit in (20, 150, 10_000):
        opened = default_expansion(graph, limit)
        drawn = len(graph_view(graph, opened).nodes)
        assert drawn <= limit or opened == expanded_to_depth(graph, 0)
        deeper = [d for d, size in enumerate(sizes) if size <= limit]
        assert drawn == sizes[max(deeper, default=0)]


def test_find_names_modules_and_nodes_exact_first():
    graph = small_model()
    assert find(graph, "layer1.conv")[0] == ("group", "layer1.conv")
    assert ("node", "gw") in find(graph, "layer1.conv")
    assert find(graph, "GW") == [("node", "gw")]  # any case, by id too
    assert find(graph, "nothing like it") == [] and find(graph, "  ") == []


def test_a_selection_rings_the_node_where_it_is_drawn_and_zooms_to_its_neighbours():
    graph = small_model()
    view = graph_view(graph)
    selected, focus = selection_focus(graph, view, ("node", "gw"))
    assert view.nodes[selected].id == "layer1 [backward]"  # inside a closed module: its group
    assert selected in focus and len(focus) > 1
    opened = graph_view(graph, {"layer1"})
    none, parts = selection_focus(graph, opened, ("group", "layer1"))
    assert none is None and {opened.nodes[k].id for k in parts} >= {"a", "gw"}
    assert selection_focus(graph, view, None) == (None, frozenset())


# -- layout ---------------------------------------------------------------------------------------------------------

def assert_layered(graph, view, layout):
    n = len(view.nodes)
    assert layout.x.shape == layout.y.shape == (n,) and np.isfinite(layout.x).all() and np.isfinite(layout.y).all()
    assert len({(round(float(x), 6), round(float(y), 6)) for x, y in zip(layout.x, layout.y)}) == n  # placed once
    order = np.array([v.order for v in view.nodes])
    pinned = np.array([v.pinned for v in view.nodes])
    for u, v in view.edges.tolist():
        a, b = (u, v) if order[u] <= order[v] else (v, u)
        if not pinned[a] and not pinned[b]:
            assert layout.layer[a] < layout.layer[b]
        if pinned[a] and not pinned[b]:
            assert layout.layer[a] < layout.layer[b]


@settings(max_examples=40, deadline=None)
@given(compute_graphs(max_nodes=20))
def test_every_node_is_placed_once_and_layers_respect_edges(graph):
    view = full_view(graph)
    assert_layered(graph, view, layered_layout(view))


def test_parameters_over_a_forward_and_a_backward_reader_at_the_same_x_are_not_drawn_on_one_spot():
    """Found by Hypothesis: a mirrored backward node can share its x with a forward one."""
    nodes = [Node("p0", 0, 0.0, "param", True), Node("p1", 0, 0.0, "param", True), Node("n0", 0, 0.0, "backward"),
             Node("n1", 0, 0.0, "forward"), Node("n2", 0, 0.0, "forward"), Node("n3", 0, 0.0, "forward")]
    graph = ComputeGraph(nodes, [("p0", "n0"), ("p0", "n1"), ("n0", "n1"), ("p1", "n3")], outputs=["n1", "n2", "n3"])
    view = full_view(graph)
    assert_layered(graph, view, layered_layout(view))


@settings(max_examples=25, deadline=None)
@given(training_graphs())
def test_training_graphs_lay_out_forward_left_to_right_and_backward_mirrored_below(graph):
    view = full_view(graph)
    layout = layered_layout(view)
    assert_layered(graph, view, layout)
    band = {view.nodes[k].id: b for k, b in enumerate(layout.band)}
    x = {view.nodes[k].id: float(v) for k, v in enumerate(layout.x)}
    y = {view.nodes[k].id: float(v) for k, v in enumerate(layout.y)}
    for u, v in graph.edges:
        if band[u] == band[v] == FORWARD_BAND:
            assert x[u] < x[v]
        if band[u] == band[v] == BACKWARD_BAND:
            assert x[u] >= x[v]
    forward = [i for i, b in band.items() if b == FORWARD_BAND]
    backward = [i for i, b in band.items() if b == BACKWARD_BAND]
    pinned = [i for i, b in band.items() if b == PINNED_BAND]
    if forward and backward:
        assert max(y[i] for i in backward) < min(y[i] for i in forward)
    if forward and pinned:
        assert min(y[i] for i in pinned) > max(y[i] for i in forward)


def test_the_layout_of_a_collapsed_view_places_groups_in_order():
    graph = training_chain(2000, mem=1)
    view = graph_view(graph, default_expansion(graph))
    layout = layered_layout(view)
    assert_layered(graph, view, layout)
    forward = [k for k, b in enumerate(layout.band) if b == FORWARD_BAND and view.nodes[k].kind == "forward"]
    assert list(np.argsort(layout.x[forward], kind="stable")) == list(range(len(forward)))


def test_the_layout_of_ten_thousand_nodes_is_complete():
    graph = training_chain(5000, mem=1)
    view = full_view(graph)
    layout = layered_layout(view)
    assert_layered(graph, view, layout)


# -- a schedule's statuses -------------------------------------------------------------------------------------------

def test_schedule_statuses_over_the_whole_run_and_after_a_step():
    graph = chain3()
    simulation = recompute_schedule(graph).simulation
    whole = schedule_status(graph, simulation)
    status = {graph.ids[i]: whole.statuses[s] for i, s in enumerate(whole.status)}
    assert status["f1"] == "recomputed" and status["f2"] == "computed once" and status["x"] == "always resident"
    for step in range(len(simulation.ops)):
        at = schedule_status(graph, simulation, step)
        names = {graph.ids[i]: at.statuses[s] for i, s in enumerate(at.status)}
        resident = set(simulation.resident_after(graph, step))
        for node_id, name in names.items():
            if graph.node(node_id).pinned:
                assert name == "always resident"
            elif node_id == simulation.ops[step][1] and simulation.ops[step][0] == "compute":
                assert name == "computed at this step"
            else:
                assert (name in ("resident", "resident, recomputed")) == (node_id in resident)
        assert at.resident_bytes == simulation.memory[step]
    assert {graph.ids[i]: STEP_STATUSES[s] for i, s in
            enumerate(schedule_status(graph, simulation, 9).status)}["f1"] == "computed at this step"
    with pytest.raises(ValueError):
        schedule_status(graph, simulation, len(simulation.ops))


def test_a_group_reads_as_the_first_status_any_of_its_members_has():
    graph = training_chain(200, mem=1)
    simulation = recompute_like(graph)
    view = graph_view(graph)
    status = schedule_status(graph, simulation).in_view(view)
    assert status.counts.sum() == len(graph)
    for k, node in enumerate(view.nodes):
        counts = status.counts[k]
        assert counts.sum() == node.size and status.status[k] == int(np.flatnonzero(counts)[0])
    assert "recomputed" in {SCHEDULE_STATUSES[s] for s in status.status}


def recompute_like(graph):
    """A schedule of ``graph`` that recomputes (a budget below checkpoint-all's peak)."""
    peak = checkpoint_all_peak(graph)
    return solve(graph, memory_lower_bound(graph) + (peak - memory_lower_bound(graph)) // 3,
                 solver="chen-greedy").simulation


# -- the figure -----------------------------------------------------------------------------------------------------

def node_traces(fig):
    return [t for t in fig.data if t.customdata is not None]


def test_the_figure_names_nodes_by_label_with_ids_only_in_the_details():
    graph = training_chain(4, mem=1)
    view = full_view(graph)
    fig = graph_view_figure(view, layered_layout(view))
    labels = node_labels(graph)
    hovers = {view.nodes[int(k)].id: h for t in node_traces(fig) for k, h in zip(t.customdata, t.hovertext)}
    for node_id, hover in hovers.items():
        first_line = hover.split("<br>")[0]
        assert first_line == f"<b>{labels[node_id]}</b>" and node_id not in first_line.replace(labels[node_id], "")
        assert (f"id: {node_id}" in hover) == (labels[node_id] != node_id)  # the id only where the label differs
    names = next(t for t in fig.data if t.name == NAMES_TRACE)
    assert set(names.text) <= {drawn_name(v) for v in view.nodes} and "f1" not in names.text


def test_the_figure_escapes_names_from_files_in_its_hover():
    graph = ComputeGraph([Node("x", 1, 0, "input", True), Node("y", 5, 1, "forward", label=EVIL)], [("x", "y")])
    view = full_view(graph)
    hover = " ".join(h for t in node_traces(graph_view_figure(view, layered_layout(view))) for h in t.hovertext)
    assert "<script>" not in hover and "&lt;script&gt;" in hover


def test_kinds_and_schedule_statuses_have_their_colours_and_legend_entries():
    graph = chain3()
    view = full_view(graph)
    layout = layered_layout(view)
    by_kind = graph_view_figure(view, layout)
    legend = {t.name: t.marker.color for t in node_traces(by_kind) if t.showlegend}
    assert legend == {k: KIND_COLORS[k] for k in ("input", "forward", "loss", "backward")}
    status = schedule_status(graph, recompute_schedule(graph).simulation).in_view(view)
    by_status = graph_view_figure(view, layout, status=status)
    legend = {t.name: t.marker.color for t in node_traces(by_status) if t.showlegend}
    assert legend == {"recomputed": RECOMPUTE_COLOR, "computed once": STATUS_COLORS["computed once"],
                      "always resident": STATUS_COLORS["always resident"]}
    recomputed = next(t for t in node_traces(by_status) if t.name == "recomputed")
    assert [view.nodes[int(k)].id for k in recomputed.customdata] == ["f1"]
    assert "computed 2×" in recomputed.hovertext[0]
    assert set(STATUS_COLORS) == set(SCHEDULE_STATUSES) | set(STEP_STATUSES)
    step = graph_view_figure(view, layout, status=schedule_status(graph, recompute_schedule(graph).simulation,
                                                                  9).in_view(view))
    assert step.layout.legend.title.text == "After step 9:"
    assert {t.name for t in node_traces(step)} <= set(STEP_STATUSES)


def test_a_clicked_point_maps_back_to_its_node_or_module():
    graph = small_model()
    view = graph_view(graph)
    fig = graph_view_figure(view, layered_layout(view))
    spec = json.loads(fig.to_json())
    for trace in node_traces(fig):
        for k in trace.customdata:
            point = {"curve_number": 1, "point_index": 0, "customdata": int(k)}  # as Streamlit hands it over
            node = view.nodes[clicked_index(point)]
            assert node is view.nodes[int(k)]
    module = next(k for k, n in enumerate(view.nodes) if n.group == "layer1")
    assert view.nodes[clicked_index({"customdata": [module]})].group == "layer1"
    assert clicked_index({"x": 1.0, "y": 2.0}) is None  # an edge or a name: nothing
    assert spec["data"][0]["name"] == EDGE_TRACE and "customdata" not in spec["data"][0]


def test_the_figure_zooms_to_the_focus_and_rings_the_selection_and_the_marked():
    graph = training_chain(60, mem=1)
    view = full_view(graph)
    layout = layered_layout(view)
    index = {node.id: k for k, node in enumerate(view.nodes)}
    target = index["f30"]
    fig = graph_view_figure(view, layout, selected=target, focus={target}, marked={index["f2"]})
    low, high = fig.layout.xaxis.range
    assert low < layout.x[target] < high and high - low < float(layout.x.max() - layout.x.min())
    assert {t.name for t in fig.data} >= {"edges of the selected node", "selected", "highlighted"}
    assert "layer 30" in next(t for t in fig.data if t.name == NAMES_TRACE).text


def _name_boxes(fig, view_x_span: float, view_y_span: float):
    """The written names as pixel boxes (left, right, bottom, top), sized as the chart's own estimate sizes them."""
    from remat_core.viz.graph_view import _MARGINS_PX, _TEXT_HEIGHT_PX, _TEXT_OFFSET_PX, ASSUMED_WIDTH_PX, CHAR_PX

    names = next(t for t in fig.data if t.name == NAMES_TRACE)
    px_x = ASSUMED_WIDTH_PX / view_x_span
    px_y = (fig.layout.height - _MARGINS_PX) / view_y_span
    boxes = []
    for x, y, text, where in zip(names.x, names.y, names.text, names.textposition):
        half = (CHAR_PX * len(text) + 6) / 2
        centre = y * px_y + (_TEXT_OFFSET_PX if where == "top center" else -_TEXT_OFFSET_PX)
        boxes.append((x * px_x - half, x * px_x + half, centre - _TEXT_HEIGHT_PX / 2, centre + _TEXT_HEIGHT_PX / 2))
    return boxes


def test_names_written_beside_opened_modules_do_not_overlap_across_rows():
    """Opening modules makes the graph taller than the chart grows: names above one row ran into names below the
    next (the rows were checked one at a time)."""
    from remat_core.frontends import trace_zoo_model

    graph = trace_zoo_model("resnet18", level="module", batch_size=2, image_size=64)
    tree_view = graph_view(graph, default_expansion(graph))
    opened = default_expansion(graph) | {"layer1.0", "layer1.1", "layer2.0", "layer2.1"}
    view = graph_view(graph, opened)
    layout = layered_layout(view)
    focus = frozenset(k for k, v in enumerate(view.nodes) if (v.module or "").startswith("layer1.0"))
    fig = graph_view_figure(view, layout, focus=focus)
    x_span = fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
    y_span = fig.layout.yaxis.range[1] - fig.layout.yaxis.range[0]
    boxes = _name_boxes(fig, x_span, y_span)
    assert len(boxes) >= 5 and len(view.nodes) > len(tree_view.nodes)
    overlapping = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                   if a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]]
    assert not overlapping
