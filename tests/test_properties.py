"""Property-based checks on random DAGs: every schedule solve() returns is valid and within budget."""

from hypothesis import given
from hypothesis import strategies as st
from strategies import compute_graphs

from remat_core import InfeasibleBudget, checkpoint_all_peak, list_solvers, memory_lower_bound, simulate, solve
from remat_core.schedule.simulator import checkpoint_all_ops


@given(compute_graphs())
def test_checkpoint_all_is_valid_and_its_peak_is_checkpoint_all_peak(graph):
    ops, reasons = checkpoint_all_ops(graph)
    result = simulate(graph, ops)
    assert result.peak == checkpoint_all_peak(graph)
    assert result.recomputes == 0
    assert set(result.compute_counts) == {graph.ids[i] for i in graph.needed_idx}
    assert len(reasons) == len(ops)
    assert result.memory[-1] == graph.pinned_bytes  # everything freed after its last use


@given(compute_graphs())
def test_lower_bound_never_exceeds_checkpoint_all_peak(graph):
    assert graph.pinned_bytes <= memory_lower_bound(graph) <= checkpoint_all_peak(graph)


SEARCHES = ("checkmate-milp", "checkmate-lp", "moccasin")
"""Solvers whose answer depends on a time limit or an LP: a refusal's named budget is not re-solved for them
(checkmate-lp's roundings at the named budget differ from those that reached it)."""


@given(compute_graphs(), st.floats(0.0, 1.5))
def test_no_solver_returns_an_over_budget_or_invalid_schedule(graph, fraction):
    """Every solver meets the checkpoint-all peak; a refusal names a budget above the one asked for and
    at most that peak, which the heuristics then meet; every schedule is valid within the budget."""
    peak = checkpoint_all_peak(graph)
    budget = int(peak * fraction)
    for spec in list_solvers():
        try:
            schedule = solve(graph, budget, spec.name, time_limit=5)
        except InfeasibleBudget as e:
            assert budget < peak, spec.name
            assert e.smallest_feasible is not None and budget < e.smallest_feasible <= peak, spec.name
            if spec.name not in SEARCHES:
                schedule = solve(graph, e.smallest_feasible, spec.name)
                assert simulate(graph, schedule, budget=e.smallest_feasible).peak <= e.smallest_feasible
            continue
        result = simulate(graph, schedule, budget=budget)
        assert result.peak <= budget
        assert schedule.stats["peak"] == result.peak and schedule.stats["cost"] == result.cost
