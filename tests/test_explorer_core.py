"""The explorer's data helpers in remat_core: summary, step timelines, sweeps, walk-throughs (the graph view's
levels of detail: tests/test_graph_view.py)."""

import pytest
from hypothesis import given
from recompute_fixture import chain3, recompute_schedule, simulated
from strategies import compute_graphs

from remat_core import ComputeGraph, Node, checkpoint_all_peak, memory_lower_bound
from remat_core.analysis.pareto import LP_LOWER_BOUND, CurvePoint, ParetoCurve, curve_table, pareto_curve, reported_gap
from remat_core.analysis.summary import NO_MODULE, graph_summary, memory_by_module, module_prefix
from remat_core.analysis.walkthrough import call_key, step_title, walkthrough_steps
from remat_core.graph.generators import training_chain
from remat_core.schedule.schedule import reason
from remat_core.schedule import checkpoint_all_cost, checkpoint_all_ops
from remat_core.schedule.timeline import describe_op, memory_by_kind, occurrences, ordinal
from remat_core.solvers import REGISTRY, register


def small_model() -> ComputeGraph:
    nodes = [Node("x", 8, 0, "input", True), Node("w1", 100, 0, "param", True, module="layer1.conv"),
             Node("rm", 4, 0, "buffer", True, module="layer1.bn"),
             Node("a", 10, 5, "forward", module="layer1.conv"), Node("b", 20, 5, "forward", module="layer2"),
             Node("loss", 1, 1, "loss"), Node("gb", 20, 10, "backward", module="layer2"),
             Node("ga", 10, 10, "backward", module="layer1.conv"), Node("gw", 100, 10, "backward",
                                                                         module="layer1.conv")]
    edges = [("x", "a"), ("w1", "a"), ("rm", "a"), ("a", "b"), ("b", "loss"), ("loss", "gb"), ("gb", "ga"),
             ("a", "gw"), ("ga", "gw"), ("x", "gw")]
    return ComputeGraph(nodes, edges, outputs=["gw"], name="small")


def test_summary_splits_pinned_memory_by_role_and_counts_kinds():
    s = graph_summary(small_model())
    assert (s.param_bytes, s.buffer_bytes, s.input_bytes, s.pinned_bytes) == (100, 4, 8, 112)
    assert s.activation_bytes == 10 + 20 + 1 + 20 + 10 + 100
    assert s.nodes_by_kind == {"input": 1, "param": 1, "buffer": 1, "forward": 2, "loss": 1, "backward": 3}
    assert s.has_modules and s.checkpoint_all_peak == checkpoint_all_peak(small_model())
    assert s.lower_bound == memory_lower_bound(small_model())


def test_memory_by_module_groups_by_path_prefix():
    groups = memory_by_module(small_model(), depth=1)
    assert groups["layer1"] == {"param": 100, "buffer": 4, "forward": 10, "backward": 110}
    assert groups[NO_MODULE] == {"input": 8, "loss": 1}
    assert module_prefix("layer3.1.conv2", 2) == "layer3.1" and module_prefix("a.b", 0) == "a.b"
    assert module_prefix(None, 1) == NO_MODULE


@given(compute_graphs())
def test_memory_by_kind_adds_up_to_the_simulated_memory(graph):
    ops, _ = checkpoint_all_ops(graph)
    schedule = simulated(graph, ops)
    timeline = memory_by_kind(graph, schedule.simulation)
    assert timeline.total.tolist() == list(schedule.simulation.memory)
    assert sum(timeline.start.values()) == graph.pinned_bytes
    assert (timeline.by_kind >= 0).all()


def test_occurrences_and_op_descriptions():
    graph = chain3()
    result = recompute_schedule(graph).simulation
    numbers = occurrences(result)
    assert numbers[9] == 2 and numbers[0] == 1 and numbers[2] == 1
    assert describe_op(graph, result, 9, numbers[9]) == "compute layer 1 (fwd) (2nd computation)"
    assert describe_op(graph, result, 2, numbers[2]) == "free layer 1 (fwd)"
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]


def test_pareto_curve_keeps_infeasible_points_with_what_they_said():
    graph = training_chain(8, mem=10)
    peak = checkpoint_all_peak(graph)
    seen = []
    curve = pareto_curve(graph, "checkpoint-all", [peak, peak - 5, peak + 5], progress=lambda d, t: seen.append(d))
    assert [p.budget for p in curve.points] == [peak - 5, peak, peak + 5] and seen == [1, 2, 3]
    low, exact, high = curve.points
    assert not low.feasible and low.smallest_feasible == peak and low.computes_of("f1") is None
    assert exact.feasible and exact.overhead == 0.0 and exact.peak == peak and exact.computes_of("f1") == 1
    assert curve.smallest_feasible() == peak
    assert curve.fitting_point(peak + 2) is exact and curve.fitting_point(peak - 1) is None
    rows = curve_table([curve])
    assert [r["feasible"] for r in rows] == [False, True, True] and rows[0]["smallest_feasible_bytes"] == peak
    assert [r["mip_gap"] for r in rows] == [None, None, None]  # checkpoint-all reports no gap


def test_a_reported_gap_is_read_under_either_key_and_only_when_finite():
    assert reported_gap({"mip_gap": 0.02}) == 0.02 and reported_gap({"gap": 0.0}) == 0.0
    assert reported_gap({}) is None and reported_gap({"mip_gap": None}) is None
    assert reported_gap({"gap": float("inf")}) is None and reported_gap({"mip_gap": True}) is None


def test_fitting_point_is_the_cheapest_that_fits():
    points = (CurvePoint(10, True, 10, 5.0, 0.5), CurvePoint(20, True, 18, 3.0, 0.3), CurvePoint(30, True, 19, 4.0,
                                                                                                  0.4))
    curve = ParetoCurve("s", {}, points, base_cost=10.0)
    assert curve.fitting_point(35).budget == 20 and curve.fitting_point(15).budget == 10
    assert curve.overhead_lower_bound(points[0]) is None


def test_walkthrough_has_one_step_per_computation_without_recorded_calls():
    graph = chain3()
    schedule = recompute_schedule(graph)
    steps = walkthrough_steps(graph, schedule)
    assert len(steps) == schedule.simulation.computes
    assert [s.first_op for s in steps] == [i for i, (a, _) in enumerate(schedule.ops) if a == "compute"]
    recompute = next(s for s in steps if s.recomputes)
    assert recompute.computed == (("f1", 2),) and step_title(graph, recompute) == "recompute layer 1 (fwd) (2nd time)"
    assert steps[1].freed == ("f1",) and steps[-1].memory == schedule.simulation.memory[-1]


def test_walkthrough_groups_ops_by_recorded_recursion_call():
    graph = training_chain(2, mem=1)
    ops, _ = checkpoint_all_ops(graph)
    reasons = [reason("top", call=0, depth=0, bag=["f1"]) if i < 3 else reason("child", call=1, depth=1)
               for i in range(len(ops))]
    steps = walkthrough_steps(graph, simulated(graph, ops, reasons))
    assert [(s.call, s.depth) for s in steps] == [(0, 0), (1, 1)]
    first_child_compute = next(i for i, (a, _) in enumerate(ops) if a == "compute" and i >= 3)
    assert steps[0].bag == ["f1"] and steps[1].first_op == first_child_compute


def test_walkthrough_groups_computes_of_one_separator_frame_and_keeps_frees_with_them():
    graph = training_chain(2, mem=1)
    ops, _ = checkpoint_all_ops(graph)
    computes = [i for i, (a, _) in enumerate(ops) if a == "compute"]
    reasons = [None] * len(ops)
    for k, i in enumerate(computes):
        reasons[i] = reason("in frame", frame=0 if k < 2 else 3, depth=0 if k < 2 else 1)
    steps = walkthrough_steps(graph, simulated(graph, ops, reasons))
    assert [s.frame for s in steps] == [0, 3] and steps[0].call == (0, 0)
    assert steps[1].first_op == computes[2] and steps[-1].last_op == len(ops) - 1
    assert call_key({"text": "x"}) is None and call_key({"call": 7, "frame": 1}) == 7


@pytest.fixture
def bounded_solver():
    """A solver that reports a cost lower bound, as checkmate-lp does: checkpoint-all plus a bound
    (finite at the checkpoint-all peak, infinite above it), registered for one test only."""
    name = "test-reports-a-bound"

    @register(name, "checkpoint-all that also reports a cost lower bound (tests only)")
    def reports_a_bound(graph, budget, *, time_limit=None):
        schedule = REGISTRY["checkpoint-all"].function(graph, budget, time_limit=time_limit)
        bound = 0.5 * checkpoint_all_cost(graph) if budget == checkpoint_all_peak(graph) else float("inf")
        return schedule.with_updates(solver_info={LP_LOWER_BOUND: bound})
    yield name
    del REGISTRY[name]


def test_a_reported_cost_bound_travels_with_its_point_and_infinite_ones_are_dropped(bounded_solver):
    graph = training_chain(6, mem=10)
    peak = checkpoint_all_peak(graph)
    at_peak, above = pareto_curve(graph, bounded_solver, [peak, peak + 10]).points
    assert at_peak.cost_lower_bound == 0.5 * checkpoint_all_cost(graph) and above.cost_lower_bound is None
    curve = ParetoCurve(bounded_solver, {}, (at_peak,), base_cost=checkpoint_all_cost(graph))
    assert curve.overhead_lower_bound(at_peak) == pytest.approx(-0.5)


def test_a_page_link_names_its_state_in_the_url_and_refuses_unknown_parameters():
    from urllib.parse import parse_qs, urlsplit

    from explorer.state.links import page_link

    link = page_link("why", tensor="layer1 · conv (fwd)", budget="50%", model="resnet18", solver=None)
    parts = urlsplit(link)
    assert parts.path == "/why" and parts.query.startswith("model=resnet18&budget=50%25&tensor=")
    assert parse_qs(parts.query) == {"model": ["resnet18"], "budget": ["50%"], "tensor": ["layer1 · conv (fwd)"]}
    assert page_link("/graph/") == "/graph"
    with pytest.raises(ValueError, match="the explorer reads model"):
        page_link("why", node="x")
