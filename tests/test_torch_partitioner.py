"""``torch-partitioner``: PyTorch's own partitioner as a registered solver, on traced graphs and on graph files."""

import os

import pytest
from tiny_models import residual_mlp

from remat_core import (ComputeGraph, InfeasibleBudget, Node, SolverOptionError, checkpoint_all_peak,
                        memory_lower_bound, simulate, solve)
from remat_core.frontends.trace import trace_training_graph
from remat_core.graph import training_chain
from remat_core.run.tensor_check import check_on_tensors
from remat_core.solvers.peers.torch_partitioner import KNAPSACKS, torch_partition_curve

SOLVER = "torch-partitioner"


@pytest.fixture(scope="module")
def traced():
    return trace_training_graph(*residual_mlp(width=32, depth=4))


def branchy() -> ComputeGraph:
    """A forward with a skip connection and a reduction, its backward reading forward tensors."""
    nodes = [Node("x", 16, 0.0, "input", True), Node("a", 64, 4.0, "forward"), Node("b", 64, 1.0, "forward"),
             Node("c", 8, 2.0, "forward"), Node("d", 64, 1.0, "forward"), Node("loss", 4, 1.0, "loss"),
             Node("gd", 64, 2.0, "backward"), Node("gc", 8, 2.0, "backward"), Node("gb", 64, 2.0, "backward"),
             Node("ga", 64, 2.0, "backward")]
    edges = [("x", "a"), ("a", "b"), ("b", "c"), ("a", "d"), ("c", "d"), ("d", "loss"), ("loss", "gd"), ("d", "gd"),
             ("gd", "gc"), ("b", "gc"), ("gc", "gb"), ("a", "gb"), ("gb", "ga"), ("x", "ga")]
    return ComputeGraph(nodes, edges, name="branchy")


@pytest.mark.parametrize("knapsack", KNAPSACKS)
def test_on_a_graph_file_it_applies_torchs_rules_to_our_sizes(knapsack):
    graph = branchy()
    schedule = solve(graph, checkpoint_all_peak(graph), SOLVER, knapsack=knapsack)
    info = schedule.solver_info
    assert info["mode"] == "sizes" and info["knapsack"] == knapsack
    assert simulate(graph, schedule).peak <= checkpoint_all_peak(graph)
    fractions = [f for f, _, _ in info["curve"] if f is not None]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0


def test_it_returns_the_largest_fraction_whose_schedule_fits():
    graph = branchy()
    curve = torch_partition_curve(graph)
    for point in curve.points:
        schedule = solve(graph, max(point.peak, memory_lower_bound(graph)), SOLVER)
        chosen = schedule.solver_info["fraction"]
        fitting = [p.fraction for p in curve.points if p.fraction is not None and p.peak <= schedule.budget]
        assert chosen == (max(fitting) if fitting else None)
        assert schedule.stats["peak"] <= schedule.budget


def test_at_fraction_zero_torch_saves_only_the_inputs():
    graph = training_chain(6, mem=100)
    first = torch_partition_curve(graph).points[0]
    assert first.fraction == 0.0 and first.saved == frozenset()


def test_no_fitting_fraction_is_refused_with_the_smallest_peak_torch_reaches():
    graph = training_chain(8, mem=100)  # torch recomputes a dropped chain in one go: nothing beats checkpoint-all
    peaks = [p.peak for p in torch_partition_curve(graph).points]
    budget = memory_lower_bound(graph)
    assert budget < min(peaks)
    with pytest.raises(InfeasibleBudget, match="activation_memory_budget") as refused:
        solve(graph, budget, SOLVER)
    assert refused.value.smallest_feasible == min(peaks)
    assert solve(graph, min(peaks), SOLVER).stats["peak"] <= min(peaks)


def test_an_unknown_knapsack_is_refused():
    with pytest.raises(SolverOptionError, match="knapsack"):
        solve(branchy(), checkpoint_all_peak(branchy()), SOLVER, knapsack="annealing")


def least_peak_torch_reaches(graph: ComputeGraph) -> int:
    return min(p.peak for p in torch_partition_curve(graph).points)


def test_on_a_traced_model_it_runs_torchs_partitioner_on_the_joint_graph(traced):
    peak = checkpoint_all_peak(traced)
    schedule = solve(traced, (least_peak_torch_reaches(traced) + peak) // 2, SOLVER)
    info = schedule.solver_info
    assert info["mode"] == "traced" and info["partition"] == "min_cut_rematerialization_partition"
    assert 0 <= info["fraction"] < 1 and info["recomputed"] > 0
    assert simulate(traced, schedule, budget=schedule.budget).peak == schedule.stats["peak"]
    peaks = [p for f, p, _ in info["curve"] if f is not None]
    assert len(set(peaks)) > 2  # the fraction changes what torch saves


def test_a_traced_partition_computes_the_models_gradients(traced):
    schedule = solve(traced, least_peak_torch_reaches(traced), SOLVER)
    check = check_on_tensors(traced, schedule)
    assert check.gradients_match and check.memory_matches_simulator


def test_module_level_graphs_map_torchs_choice_onto_module_groups():
    graph = trace_training_graph(*residual_mlp(width=32, depth=3), level="module")
    schedule = solve(graph, checkpoint_all_peak(graph), SOLVER)
    assert schedule.solver_info["mode"] == "traced"
    assert check_on_tensors(graph, schedule).gradients_match


def test_torch_min_cut_failure_dumps_stay_out_of_the_working_directory(tmp_path, monkeypatch):
    """Torch writes min_cut_failed_graph*.txt into the current directory when a cut fails: every partitioner call
    of ours (the torch-partitioner solver, the compile route) runs with those dumps sent elsewhere."""
    from torch._functorch import partitioners

    from remat_core.solvers import failure_dumps_kept_out

    monkeypatch.chdir(tmp_path)
    with failure_dumps_kept_out():
        path = partitioners._get_unique_path("min_cut_failed_graph", ".txt")
        open(path, "w").close()
        assert os.path.dirname(os.path.abspath(path)) != str(tmp_path) and os.path.exists(path)
    assert not os.path.exists(path) and list(tmp_path.iterdir()) == []
    assert partitioners._get_unique_path("min_cut_failed_graph", ".txt") == "min_cut_failed_graph.txt"
