"""Figure builders: what the figures contain, checked on their plotly/HTML output without Streamlit."""

import json
import re

import numpy as np
import pytest
from recompute_fixture import chain3, recompute_schedule

from remat_core import ComputeGraph, Node, checkpoint_all_peak, memory_lower_bound, solve
from remat_core.analysis.comparison import sweep_budgets
from remat_core.analysis.pareto import CurvePoint, ParetoCurve, pareto_curve
from remat_core.analysis.summary import module_groups
from remat_core.analysis.neighbourhood import (CONSUMER, PRODUCER, RECOMPUTED_WITH, TENSOR, recomputed_with,
                                               tensor_neighbourhood)
from remat_core.graph.generators import random_dag, training_chain
from remat_core.viz import (ROLE_COLORS, bag_label, lifetime_candidates, lifetime_chart, memory_timeline_figure,
                            module_memory_figure, neighbourhood_html, pareto_figure, path_strip_figure,
                            separator_tree_figure, tree_of_bags_figure)
from remat_core.viz.palette import KIND_COLORS, RECOMPUTE_COLOR, unit_for
from remat_core.viz.timeline import (BUDGET_TRACE, CURSOR_TRACE, MEASURED_TRACE, STEP_TRACE, drawn_steps,
                                    frame_steps, row_labels)

EVIL = "<script>alert('x')</script> & <b>href</b>"


def test_timeline_has_frames_a_budget_line_and_colours_by_kind():
    graph = chain3()
    schedule = recompute_schedule(graph)
    fig = memory_timeline_figure(graph, schedule)
    names = [t.name for t in fig.data]
    assert names[:-3] == [k for k in KIND_COLORS if k in {"input", "forward", "loss", "backward"}]
    assert names[-3:] == [BUDGET_TRACE, STEP_TRACE, CURSOR_TRACE]
    for trace in fig.data[:-3]:
        assert trace.fillcolor == KIND_COLORS[trace.name] and trace.stackgroup == "memory"
    assert list(fig.data[-2].y) == list(schedule.simulation.memory) and "layer 1" in fig.data[-2].text[0]
    budget_line = fig.data[-3]
    assert set(budget_line.y) == {40 / unit_for(40).size}
    assert len(fig.frames) == len(schedule.ops) and fig.layout.updatemenus[0].buttons[0].label.endswith("Play")
    assert fig.layout.yaxis.range[1] >= max(schedule.stats["peak"], 40)
    stacked = np.sum([np.asarray(t.y) for t in fig.data[:-3]], axis=0)
    assert stacked.tolist() == list(schedule.simulation.memory)
    frame = fig.frames[9]
    assert frame.name == "9" and "compute layer 1 (fwd) (2nd computation)" in frame.layout.annotations[0].text
    assert frame.layout.shapes[0].x0 == 9


def test_timeline_overlays_the_measured_memory_as_a_line_at_the_drawn_steps():
    graph = chain3()
    schedule = recompute_schedule(graph)
    measured = list(schedule.simulation.memory)
    measured[5] += 25  # a step where the real bytes exceed the simulator's (and the budget of 40)
    fig = memory_timeline_figure(graph, schedule, measured=measured)
    names = [t.name for t in fig.data]
    assert names[-4:] == [BUDGET_TRACE, MEASURED_TRACE, STEP_TRACE, CURSOR_TRACE]
    line = fig.data[-3]
    assert line.mode == "lines" and line.stackgroup is None and line.fill is None
    assert list(line.x) == list(fig.data[-2].x) and list(line.y) == measured
    assert fig.layout.yaxis.range[1] >= max(measured)
    assert MEASURED_TRACE not in [t.name for t in memory_timeline_figure(graph, schedule).data]
    with pytest.raises(ValueError, match="one value|bytes held after each op"):
        memory_timeline_figure(graph, schedule, measured=measured[:-1])


def test_a_long_timeline_draws_the_measured_line_at_the_same_sampled_steps():
    graph = training_chain(900, mem=2**20)
    schedule = solve(graph, checkpoint_all_peak(graph), "checkpoint-all")
    assert len(schedule.ops) > 1500
    measured = [m + 2**20 for m in schedule.simulation.memory]
    fig = memory_timeline_figure(graph, schedule, measured=measured, animate=False)
    line = next(t for t in fig.data if t.name == MEASURED_TRACE)
    steps = np.asarray(line.x)
    assert len(steps) <= 1502 and np.allclose(line.y, (np.asarray(measured)[steps]) / 2**20)


def test_timeline_grows_with_upto_and_has_no_frames_then():
    graph = chain3()
    fig = memory_timeline_figure(graph, recompute_schedule(graph), upto=4, animate=False)
    assert not fig.frames and max(fig.data[0].x) == 4 and fig.layout.shapes[0].x0 == 4
    assert fig.layout.xaxis.range[1] == len(recompute_schedule(graph).ops) - 1


def test_timeline_escapes_names_from_files():
    graph = ComputeGraph([Node("x", 1, 0, "input", True), Node("evil", 5, 1, "forward", label=EVIL)],
                         [("x", "evil")])
    fig = memory_timeline_figure(graph, solve(graph, 100))
    text = " ".join(a.text for a in fig.layout.annotations) + " ".join(f.layout.annotations[0].text for f in fig.frames)
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_lifetime_chart_escapes_names_from_files_once():
    graph = ComputeGraph([Node("x", 1, 0, "input", True), Node("evil", 5, 1, "forward", label="a<b> & c")],
                         [("x", "evil")])
    fig = lifetime_chart(graph, solve(graph, 100))
    row, = (t for t in fig.data if "evil" in str(t.y[0]) or "a&lt;b&gt;" in str(t.y[0]))
    assert row.y[0] == "a&lt;b&gt; &amp; c (fwd)"
    assert row.hovertext[0].startswith("a&lt;b&gt; &amp; c (fwd) · 1st computation")
    assert list(fig.layout.yaxis.categoryarray) == ["a&lt;b&gt; &amp; c (fwd)"]


def test_drawn_steps_are_bounded_real_steps_and_keep_the_peak():
    total = np.random.default_rng(0).integers(0, 1000, size=10_000)
    total[4321] = 5000
    steps = drawn_steps(total, max_points=500)
    assert len(steps) <= 502 and 4321 in steps and steps[0] == 0 and steps[-1] == 9999
    assert frame_steps(10_000, 50)[-1] == 9999 and len(frame_steps(10_000, 50)) == 50


def test_lifetime_chart_colours_recomputations():
    graph = chain3()
    fig = lifetime_chart(graph, recompute_schedule(graph))
    by_name = {t.name: t for t in fig.data}
    assert by_name["recomputed"].marker.color == RECOMPUTE_COLOR
    assert list(by_name["recomputed"].base) == [9]
    assert by_name["forward"].marker.color == KIND_COLORS["forward"]
    rows = fig.layout.yaxis.categoryarray
    assert rows[-1] == "layer 1 (fwd)"  # f1 is computed first: top row


def test_lifetime_rows_can_be_only_the_recomputed_or_one_module():
    graph = chain3()
    schedule = recompute_schedule(graph)
    assert lifetime_candidates(graph, schedule)[0] == "f1" and len(lifetime_candidates(graph, schedule)) == 7
    assert lifetime_candidates(graph, schedule, recomputed_only=True) == ["f1"]
    fig = lifetime_chart(graph, schedule, recomputed_only=True)
    assert list(fig.layout.yaxis.categoryarray) == ["layer 1 (fwd)"]
    assert len(lifetime_chart(graph, schedule, max_rows=3).layout.yaxis.categoryarray) == 3


def modular_graph() -> ComputeGraph:
    """Module-level names repeating in two blocks, and two ops of one module with the same label."""
    nodes = [Node("x", 4, 0, kind="input", pinned=True),
             Node("block1.conv:fwd", 4, 1, kind="forward", module="block1.conv", label="conv fwd"),
             Node("block2.conv:fwd", 4, 1, kind="forward", module="block2.conv", label="conv fwd"),
             Node("head.mm", 4, 1, kind="forward", module="head", label="mm"),
             Node("head.mm_1", 4, 1, kind="forward", module="head", label="mm"),
             Node("top", 4, 1, kind="forward", module="top", label="top fwd")]
    edges = [("x", "block1.conv:fwd"), ("block1.conv:fwd", "block2.conv:fwd"), ("block2.conv:fwd", "head.mm"),
             ("head.mm", "head.mm_1"), ("head.mm_1", "top")]
    return ComputeGraph(nodes, edges, name="modular")


def test_lifetime_rows_read_as_module_and_name_and_filter_by_module():
    graph = modular_graph()
    schedule = solve(graph, checkpoint_all_peak(graph), "checkpoint-all")
    assert row_labels(graph, ["block1.conv:fwd", "block2.conv:fwd", "head.mm", "head.mm_1", "top"]) == {
        "block1.conv:fwd": "block1.conv · fwd", "block2.conv:fwd": "block2.conv · fwd",
        "head.mm": "head · mm (fwd)", "head.mm_1": "head · mm (fwd) #2", "top": "top · fwd"}
    assert set(lifetime_candidates(graph, schedule, module="block2")) == {"block2.conv:fwd"}
    assert set(lifetime_candidates(graph, schedule, module="head")) == {"head.mm", "head.mm_1"}
    assert module_groups(graph) == ["block1", "block1.conv", "block2", "block2.conv", "head", "top"]


def test_pareto_figure_marks_bounds_budget_and_current_results():
    graph = training_chain(6, mem=2**20)
    curve = pareto_curve(graph, "checkpoint-all", sweep_budgets(graph, 5))
    peak = checkpoint_all_peak(graph)
    fig = pareto_figure([curve], lower_bound=memory_lower_bound(graph), checkpoint_all_peak=peak, budget=peak,
                        current={"checkpoint-all": 0.0})
    shapes = {s.name: s for s in fig.layout.shapes}
    assert shapes["budget"].x0 == shapes["checkpoint-all peak"].x0 == peak / 2**20
    assert shapes["lower bound"].x0 == memory_lower_bound(graph) / 2**20
    names = [t.name for t in fig.data]
    assert names == ["checkpoint-all", "checkpoint-all (each solve)", "checkpoint-all at budget"]
    assert list(fig.data[0].x) == list(fig.data[1].x) == [peak / 2**20]  # the only feasible point


def test_pareto_line_is_the_lower_envelope_and_the_markers_are_the_raw_points():
    overheads = [0.5, 0.2, 0.3, 0.25, 0.0]  # the third and fourth budgets' own solves cost more than the second's
    points = tuple(CurvePoint(100 * (k + 1), True, 90 * (k + 1), 10.0 * (1 + o), o, {}, 0.1)
                   for k, o in enumerate(overheads))
    curve = ParetoCurve("jumpy", {}, points, base_cost=10.0)
    assert [p.overhead for p in curve.envelope()] == [0.5, 0.2, 0.2, 0.2, 0.0]
    fig = pareto_figure([curve], lower_bound=50, checkpoint_all_peak=500)
    line, markers = fig.data[0], fig.data[1]
    assert line.name == "jumpy" and line.mode == "lines" and markers.mode == "markers"
    assert list(line.y) == pytest.approx([50.0, 20.0, 20.0, 20.0, 0.0])
    assert list(markers.y) == pytest.approx([100 * o for o in overheads])
    assert all(a >= b for a, b in zip(line.y, line.y[1:]))  # more memory never costs more on the line
    assert all(m >= l - 1e-9 for m, l in zip(markers.y, line.y))  # every point on or above its line


def test_the_envelope_leaves_out_infeasible_points_and_keeps_ties_at_the_smaller_budget():
    points = (CurvePoint(100, False), CurvePoint(200, True, 150, 12.0, 0.2, {}, 0.1),
              CurvePoint(300, True, 160, 12.0, 0.2, {}, 0.1))
    curve = ParetoCurve("ties", {}, points, base_cost=10.0)
    assert [p.budget for p in curve.envelope()] == [200, 200]
    assert ParetoCurve("none", {}, (CurvePoint(100, False),), base_cost=1.0).envelope() == ()


def test_pareto_figure_draws_a_reported_cost_lower_bound_as_best_possible():
    points = (CurvePoint(100, True, 100, 12.0, 0.2, {}, 0.1, cost_lower_bound=11.0),
              CurvePoint(200, True, 150, 10.0, 0.0, {}, 0.1, cost_lower_bound=10.0))
    curve = ParetoCurve("lp", {}, points, base_cost=10.0)
    fig = pareto_figure([curve], lower_bound=90, checkpoint_all_peak=200)
    bound = next(t for t in fig.data if t.name.startswith("best possible"))
    assert list(bound.y) == pytest.approx([10.0, 0.0])


def test_a_fixed_policy_is_drawn_as_labelled_diamonds_at_its_peaks_without_a_line():
    points = (CurvePoint(120, True, 120, 13.0, 0.3, {"a": 2}, 0.1, setting="every=1"),
              CurvePoint(180, True, 180, 11.0, 0.1, {"a": 2}, 0.1, setting="every=2"))
    policy = ParetoCurve("hf-checkpointing", {}, points, base_cost=10.0)
    swept = ParetoCurve("ours", {}, (CurvePoint(100, True, 100, 12.0, 0.2, {}, 0.1),), base_cost=10.0)
    assert policy.fixed_policy and not swept.fixed_policy
    fig = pareto_figure([swept, policy], lower_bound=90, checkpoint_all_peak=200)
    drawn = [t for t in fig.data if t.legendgroup == "hf-checkpointing"]
    assert len(drawn) == 1 and drawn[0].name == "hf-checkpointing (fixed policy)"
    assert drawn[0].mode == "markers+text" and drawn[0].marker.symbol == "diamond"
    assert list(drawn[0].text) == ["every=1", "every=2"] and list(drawn[0].y) == pytest.approx([30.0, 10.0])


def recomputing_chain():
    """A training chain and a schedule that recomputes part of its forward pass."""
    graph = training_chain(8, mem=10)
    peak, low = checkpoint_all_peak(graph), memory_lower_bound(graph)
    return graph, solve(graph, low + (peak - low) // 3, "chen-sqrt")


def test_a_neighbourhood_holds_producers_readers_and_what_is_recomputed_with_the_tensor():
    graph, schedule = recomputing_chain()
    counts = schedule.simulation.compute_counts
    tensor = next(n for n in graph.topological_order() if counts.get(n, 0) > 1 and graph.node(n).kind == "forward")
    hood = tensor_neighbourhood(graph, schedule.simulation, tensor, hops=1)
    assert hood.nodes[0] == tensor and hood.roles[tensor] == TENSOR and hood.hops[tensor] == 0
    assert {n for n, r in hood.roles.items() if r == PRODUCER} == {
        p for p in graph.nx.predecessors(tensor) if not graph.node(p).pinned}
    assert {n for n, r in hood.roles.items() if r == CONSUMER} == set(graph.nx.successors(tensor))
    together = recomputed_with(graph, schedule.simulation, tensor)
    assert together and all(counts[n] > 1 for n in together) and tensor not in together
    assert {n for n, r in hood.roles.items() if r == RECOMPUTED_WITH} <= set(together)
    assert all(counts[n] == hood.computes[n] for n in hood.nodes)
    assert set(hood.edges) <= set(graph.nx.edges) and all(u in hood.roles and v in hood.roles for u, v in hood.edges)
    small = tensor_neighbourhood(graph, schedule.simulation, tensor, hops=3, limit=4)
    assert len(small.nodes) == 4 and small.left_out > 0 and small.nodes[0] == tensor


def drawn_nodes(html: str) -> dict:
    """The node objects pyvis wrote into the page, by id."""
    data = re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", html, re.DOTALL).group(1)
    return {n["id"]: n for n in json.loads(data)}


def test_the_neighbourhood_page_is_offline_escapes_names_colours_by_role_and_can_be_dragged():
    graph = ComputeGraph([Node("x", 1, 0, "input", True), Node("a", 5, 1, "forward", label=EVIL),
                          Node("b", 50, 1, "forward", label="href"), Node("c", 5, 1, "forward")],
                         [("x", "a"), ("a", "b"), ("b", "c")])
    schedule = solve(graph, checkpoint_all_peak(graph), "checkpoint-all")
    html = neighbourhood_html(graph, tensor_neighbourhood(graph, schedule.simulation, "b"))
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?https?://", html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']?https?://", html, re.IGNORECASE)
    assert "<script>alert" not in html and "popup.innerHTML" not in html and "vis.Network" in html
    drawn = drawn_nodes(html)
    assert set(drawn) == {"a", "b", "c"}  # the pinned input left out
    assert drawn["b"]["shape"] == "star" and drawn["b"]["color"]["background"] == ROLE_COLORS[TENSOR]
    assert drawn["a"]["color"]["background"] == ROLE_COLORS[PRODUCER]
    assert drawn["c"]["color"]["background"] == ROLE_COLORS[CONSUMER]
    assert drawn["b"]["size"] > drawn["a"]["size"]
    options = json.loads(re.search(r"var options = (\{.*?\});\n", html, re.DOTALL).group(1))
    assert options["physics"]["enabled"] and options["interaction"]["dragNodes"]


def test_module_memory_figure_stacks_kinds_per_module():
    nodes = [Node("w", 100, 0, "param", True, module="layer1"), Node("a", 10, 1, "forward", module="layer1.conv"),
             Node("b", 20, 1, "forward", module="layer2"), Node("g", 30, 1, "backward", module="layer2")]
    graph = ComputeGraph(nodes, [("w", "a"), ("a", "b"), ("b", "g")])
    fig = module_memory_figure(graph)
    bars = {t.name: dict(zip(t.y, t.x)) for t in fig.data}
    assert bars["param"] == {"layer1": 100.0, "layer2": 0.0}
    assert bars["forward"] == {"layer1": 10.0, "layer2": 20.0} and fig.layout.barmode == "stack"
    assert [t.marker.color for t in fig.data] == [KIND_COLORS[t.name] for t in fig.data]


def test_module_memory_figure_folds_small_groups_into_one_bar():
    graph = random_dag(30, seed=3)
    nodes = [Node(n.id, n.mem, n.cost, n.kind, n.pinned, module=f"m{i}") for i, n in enumerate(graph.nodes)]
    fig = module_memory_figure(ComputeGraph(nodes, graph.edges), top=5)
    assert len(fig.layout.yaxis.categoryarray) == 6 and "(other modules: 26)" in fig.layout.yaxis.categoryarray


def test_pareto_figure_on_a_log_axis_leaves_out_zero_overheads_and_says_so():
    graph = training_chain(12, mem=2**20)
    curve = pareto_curve(graph, "chen-greedy", sweep_budgets(graph, 8))
    assert {p.overhead > 0 for p in curve.feasible_points} == {True, False}  # some recompute, some do not
    peak = checkpoint_all_peak(graph)
    linear = pareto_figure([curve], lower_bound=memory_lower_bound(graph), checkpoint_all_peak=peak, budget=peak,
                           current={"chen-greedy": 0.0})
    log = pareto_figure([curve], lower_bound=memory_lower_bound(graph), checkpoint_all_peak=peak, budget=peak,
                        current={"chen-greedy": 0.0}, log_y=True)
    assert linear.layout.yaxis.type != "log" and log.layout.yaxis.type == "log"
    positive = [100 * p.overhead for p in curve.feasible_points if p.overhead > 0]
    assert list(log.data[1].y) == positive and len(linear.data[1].y) == len(curve.feasible_points)
    assert "chen-greedy at budget" not in {t.name for t in log.data}  # its star is at 0 %
    notes = [a.text for a in log.layout.annotations]
    assert "0% overheads (no recomputation) lie off a log axis" in notes
    assert not any("log axis" in a.text for a in linear.layout.annotations)


def test_tree_of_bags_figure_names_bags_and_marks_the_widest_and_the_selected_bag():
    bags = [{"a", "b"}, {"b", "c", "d"}, {"c"}]
    labels = {"a": "layer1.conv · mm (fwd)", "b": "layer1.bn · add (fwd)", "c": "c · relu", "d": EVIL}
    fig = tree_of_bags_figure(bags, [(0, 1), (1, 2)], selected=1, labels=labels)
    markers = next(t for t in fig.data if t.name == "bags")
    assert list(markers.customdata) == [0, 1, 2] and markers.marker.color[1] != markers.marker.color[0]
    assert any(t.name == "selected bag" for t in fig.data)
    assert list(markers.y) == [0, -1, -2]
    assert markers.text[0] == bag_label(bags[0], labels, 28) and "layer1" in markers.text[0]
    assert "layer1.bn · add (fwd)" in markers.hovertext[0] and "&lt;script&gt;" in markers.hovertext[1]
    assert "<script>" not in fig.layout.annotations[0].text and "width 2" in fig.layout.annotations[0].text
    sideways = next(t for t in tree_of_bags_figure(bags, [(0, 1), (1, 2)], horizontal=True).data if t.name == "bags")
    assert list(sideways.x) == [0, 1, 2]


def test_a_bag_is_named_by_its_members_with_their_shared_module_said_once():
    labels = {"a": "layer1.0.conv1 · convolution (fwd)", "b": "layer1.0.bn1 · getitem (fwd)"}
    assert bag_label(["a", "b"], labels, 100) == "layer1.0: conv1 · convolution (fwd), bn1 · getitem (fwd)"
    assert bag_label(["a", "b"], labels, 20).endswith("…") and len(bag_label(["a", "b"], labels, 20)) == 20
    assert bag_label(["x"], None) == "x" and bag_label([], labels) == "(empty)"


def test_path_strip_draws_the_bags_over_the_graph_order_and_marks_the_widest():
    bags = [{"a"}, {"a", "b"}, {"b", "c"}, {"c"}]
    fig = path_strip_figure(bags, selected=2, order={"a": 0, "b": 1, "c": 2})
    strip, vertices = fig.data
    assert strip.name == "bag sizes" and list(strip.y) == [1, 2, 2, 1] and list(strip.customdata) == [0, 1, 2, 3]
    assert vertices.name == "vertices"
    assert [x for x in vertices.x if x == x] == [-0.4, 1.4, 0.6, 2.4, 1.6, 3.4]  # one line per vertex over its bags
    assert [y for y in vertices.y if y == y] == [0, 0, 1, 1, 2, 2]  # at its place in the graph's order
    widest, selected = fig.layout.shapes
    assert (widest.x0, selected.x0) == (0.5, 1.5) and "width 1: widest bag 1" in fig.layout.title.text


def test_separator_tree_is_an_icicle_of_named_bags_that_opens_a_few_levels_at_a_time():
    bags = [("a", "b"), ("b",), ("a", "c")]
    fig = separator_tree_figure(bags, [-1, 0, 0], labels={"a": "A", "b": "B", "c": "C"}, selected=2, levels=2)
    icicle = fig.data[0]
    assert icicle.type == "icicle" and list(icicle.parents) == ["", "0", "0"] and icicle.maxdepth == 2
    assert list(icicle.labels) == ["A, B", "B", "A, C"] and list(icicle.values) == [5, 1, 2]  # vertices below
    assert icicle.marker.colors[2] != icicle.marker.colors[1] and "widest bag 0" in fig.layout.title.text


def test_a_big_separator_tree_draws_its_top_levels_or_the_tree_below_a_picked_bag():
    parent = [-1] + [(k - 1) // 2 for k in range(1, 1023)]  # a complete binary tree of 1,023 bags
    bags = [(f"v{k}",) for k in range(1023)]
    top = separator_tree_figure(bags, parent, max_bags=100).data[0]
    assert len(top.ids) == 63 and top.values[0] == 1023  # whole levels while at most 100 bags; widths stay whole
    assert "960 more bags below" not in top.hovertext[0] and "more bags below" in top.hovertext[-1]
    below = separator_tree_figure(bags, parent, top=5, max_bags=100).data[0]
    assert below.ids[0] == "5" and below.parents[0] == "" and below.values[0] == 255


def test_pareto_figure_draws_a_shared_lp_bound_instead_of_per_solver_bounds():
    points = (CurvePoint(100, True, 100, 12.0, 0.2, {}, 0.1, cost_lower_bound=11.0),)
    curve = ParetoCurve("lp", {}, points, base_cost=10.0)
    fig = pareto_figure([curve], lower_bound=90, checkpoint_all_peak=200, best_possible=[(200, 0.0), (100, 0.05)])
    bounds = [t for t in fig.data if t.name.startswith("best possible")]
    assert [t.name for t in bounds] == ["best possible in topological order (LP bound)"] and list(bounds[0].y) == pytest.approx([5.0, 0.0])


@pytest.mark.parametrize("max_frames", [5, 1000])
def test_the_timelines_slider_starts_at_the_step_its_cursor_shows(max_frames):
    graph = training_chain(30, mem=10)
    schedule = solve(graph, int(checkpoint_all_peak(graph) * 0.6), "rotor")
    fig = memory_timeline_figure(graph, schedule, max_frames=max_frames)
    slider = fig.layout.sliders[0]
    peak_step = schedule.simulation.peak_step
    assert slider.steps[slider.active].label == str(peak_step) != str(len(schedule.ops) - 1)
    assert list(fig.data[-1].x)[0] == peak_step  # the cursor, where the Timeline page's step panel starts too
