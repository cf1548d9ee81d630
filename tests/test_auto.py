"""``auto``, the default solver: its proofs, its portfolio, and its refusals."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs

from bruteforce import optimal_cost
from remat_core import InfeasibleBudget, checkpoint_all_cost, checkpoint_all_peak, memory_lower_bound, simulate, solve
from remat_core.graph.generators import random_layered, training_chain
from remat_core.solvers.bounds import peak_lower_bound
from remat_core.solvers.portfolio.exhaustive import smallest_peak
from remat_core.solvers.quick import outcome_cost, run_quick_heuristics
from remat_core.solvers.deadline import Deadline

TOL = 1e-9


@st.composite
def wide_graphs(draw):
    """Moccasin's random layered DAGs, small enough for a property test."""
    return random_layered(draw(st.integers(15, 70)), width=draw(st.sampled_from([None, 0.25, 0.5])),
                          seed=draw(st.integers(0, 10_000)), order=draw(st.sampled_from(["depth-first", "layers"])))


@settings(max_examples=25)
@given(wide_graphs(), st.floats(0.0, 1.0))
def test_on_random_wide_graphs_auto_fits_is_never_worse_than_a_heuristic_and_refuses_honestly(graph, fraction):
    low, peak = peak_lower_bound(graph), checkpoint_all_peak(graph)
    budget = int(low + fraction * (peak - low))
    attempts = run_quick_heuristics(graph, budget)
    try:
        schedule = solve(graph, budget, "auto", time_limit=5, exact_max_nodes=0, stall=5)
    except InfeasibleBudget as refusal:
        assert all(a.schedule is None for a in attempts)  # it refuses only what every heuristic it ran refuses
        assert "not proved infeasible" in refusal.detail and f"{low:,} bytes" in refusal.detail
        assert refusal.smallest_feasible is not None and refusal.smallest_feasible > budget
        assert solve(graph, refusal.smallest_feasible, "auto", time_limit=5, exact_max_nodes=0, stall=5)
        return
    result = simulate(graph, schedule, budget=budget)
    assert result.cost == schedule.stats["cost"]
    assert schedule.stats["cost"] <= min(outcome_cost(a) for a in attempts) + TOL
    info = schedule.solver_info
    assert info["winner"] and info["lower_bound"] <= schedule.stats["cost"] + TOL and info["gap"] >= 0


@given(compute_graphs(max_nodes=9), st.floats(0.0, 1.2))
def test_on_tiny_graphs_auto_is_the_optimum_over_every_schedule_or_proves_none_fits(graph, fraction):
    budget = int(checkpoint_all_peak(graph) * fraction)
    best = optimal_cost(graph, budget)
    try:
        schedule = solve(graph, budget, "auto", time_limit=10)
    except InfeasibleBudget as refusal:
        assert best == math.inf
        if budget >= memory_lower_bound(graph):
            assert "proved" in refusal.detail
            smallest = refusal.smallest_feasible
            assert smallest is not None and optimal_cost(graph, smallest) < math.inf
            assert smallest == memory_lower_bound(graph) or optimal_cost(graph, smallest - 1) == math.inf
        return
    assert schedule.stats["cost"] == pytest.approx(best) and schedule.solver_info["gap"] == 0.0


@given(compute_graphs(max_nodes=9))
def test_the_peak_lower_bound_holds_and_the_exhaustive_search_reaches_the_smallest_peak(graph):
    lowest = smallest_peak(graph, Deadline(30))
    assert memory_lower_bound(graph) <= peak_lower_bound(graph) <= lowest.value <= checkpoint_all_peak(graph)
    assert simulate(graph, lowest.ops).peak == lowest.value
    assert optimal_cost(graph, int(lowest.value)) < math.inf and optimal_cost(graph, int(lowest.value) - 1) == math.inf


def test_below_the_peak_lower_bound_auto_proves_the_budget_infeasible():
    graph = random_layered(40, seed=4)
    bound = peak_lower_bound(graph)
    assert bound > memory_lower_bound(graph)  # the last-input argument proves more than node + inputs here
    with pytest.raises(InfeasibleBudget, match=f"proved: every schedule needs at least {bound:,} bytes"):
        solve(graph, bound - 1, "auto")


def test_checkpoint_all_is_returned_proved_optimal_when_it_fits():
    graph = random_layered(60, seed=2)
    schedule = solve(graph, checkpoint_all_peak(graph))
    info = schedule.solver_info
    assert schedule.solver == "auto" and info["winner"] == "checkpoint-all" and info["gap"] == 0.0
    assert schedule.stats["recomputes"] == 0


def test_a_wide_graph_gets_phases_a_winner_and_a_gap():
    graph = random_layered(120, seed=3)
    budget = int(checkpoint_all_peak(graph) * 0.8)
    schedule = solve(graph, budget, time_limit=20, exact_max_nodes=0)
    info = schedule.solver_info
    phases = {s["phase"]: s for s in info["phases"]}
    assert {"lifetime-split (memory order)", "lifetime-split (graph order)", "dtr", "rotor"} <= set(phases)
    assert all("seconds" in s and "status" in s for s in info["phases"])
    assert info["winner"] in phases and phases[info["winner"]]["cost"] == schedule.stats["cost"]
    assert info["gap_scope"] == "all schedules"
    assert info["gap"] == pytest.approx(1 - checkpoint_all_cost(graph) / schedule.stats["cost"])
    assert schedule.stats["overhead"] <= 0.25


@pytest.mark.slow  # a 30 s MILP
def test_the_milp_starts_from_the_best_schedule_and_reports_its_bound_for_that_order():
    graph = training_chain(12, mem=10)
    budget = memory_lower_bound(graph) + 20
    schedule = solve(graph, budget, time_limit=30, exact_max_nodes=400)
    info = schedule.solver_info
    milp = next(s for s in info["phases"] if s["phase"] == "checkmate-milp")
    fixed = info["fixed_order"]
    assert milp["lower_bound"] == fixed["lower_bound"] <= fixed["cost"] + TOL
    assert schedule.stats["cost"] <= fixed["cost"] + TOL
    if fixed["optimal"]:
        assert fixed["gap"] == 0.0


def test_a_time_limit_bounds_auto_and_it_says_it_stopped():
    graph = random_layered(300, seed=5)
    budget = int(checkpoint_all_peak(graph) * 0.8)
    deadline = Deadline(None)
    schedule = solve(graph, budget, time_limit=3)
    assert deadline.elapsed() <= 3 * 1.1 + 2
    assert schedule.solver_info.get("stopped_at_time_limit") and schedule.stats["peak"] <= budget


@pytest.mark.parametrize("graph", [training_chain(12, mem=1000), random_layered(60, seed=3)], ids=["chain", "layered"])
def test_a_budget_below_the_proved_bound_names_a_budget_auto_then_meets(graph):
    budget = peak_lower_bound(graph) - 1
    with pytest.raises(InfeasibleBudget) as refused:
        solve(graph, budget, "auto", time_limit=10)
    named = refused.value.smallest_feasible
    assert named is not None and budget < named <= checkpoint_all_peak(graph)
    assert simulate(graph, solve(graph, named, "auto", time_limit=10), budget=named).peak <= named


def test_auto_offloads_only_when_given_a_link():
    """Without a bandwidth auto never offloads; with one its offload phase runs pofo and the faster schedule wins."""
    from remat_core.schedule import Link

    graph = training_chain(8)
    alone = solve(graph, 5, "auto", time_limit=10, stall=3)
    assert not alone.has_transfers and "pofo" not in [p["phase"] for p in alone.solver_info["phases"]]
    linked = solve(graph, 5, "auto", time_limit=10, stall=3, link=Link(1.0, 1.0))
    assert linked.has_transfers and linked.solver_info["winner"] == "pofo"
    assert linked.stats["makespan"] == 25 < alone.stats["cost"]
