"""The solver front door: registry, options, budgets, infeasibility, measured stats, sweeps."""

import pytest

from remat_core import (BudgetError, InfeasibleBudget, InvalidSchedule, Schedule, SolverOptionError, UnknownSolver,
                        checkpoint_all_peak, get_solver, list_solvers, memory_lower_bound, solve, sweep)
from remat_core.graph.generators import training_chain
from remat_core.solvers import DEFAULT_SOLVER, REGISTRY, Option, register


@pytest.fixture
def chain():
    return training_chain(5, mem=10)


def test_registry_lists_auto_first_then_checkpoint_all():
    specs = list_solvers()
    assert [s.name for s in specs[:2]] == ["auto", "checkpoint-all"] and DEFAULT_SOLVER == "auto"
    entry = specs[1].describe()
    assert entry["description"] and entry["exact"] is False and entry["options"] == []


def test_solve_attaches_measured_stats(chain):
    peak = checkpoint_all_peak(chain)
    s = solve(chain, peak)
    assert s.solver == "auto" and s.budget == peak and s.graph == chain.name
    assert s.stats["peak"] == peak and s.stats["recomputes"] == 0 and s.stats["overhead"] == 0.0
    assert s.stats["solve_seconds"] >= 0
    assert s.simulation is not None and s.simulation.peak == peak
    assert len(s.reasons) == len(s.ops) and all(r["text"] for r in s.reasons)


def test_checkpoint_all_infeasible_below_its_peak_where_the_default_solver_recomputes(chain):
    peak = checkpoint_all_peak(chain)
    with pytest.raises(InfeasibleBudget) as info:
        solve(chain, peak - 1, "checkpoint-all")
    assert info.value.smallest_feasible == peak and info.value.budget == peak - 1
    assert f"{peak:,}" in str(info.value)
    recomputing = solve(chain, peak - 1, time_limit=5)
    assert recomputing.stats["peak"] < peak and recomputing.stats["recomputes"] > 0


def test_below_lower_bound_is_infeasible_for_any_solver(chain):
    with pytest.raises(InfeasibleBudget, match="lower bound"):
        solve(chain, memory_lower_bound(chain) - 1)


@pytest.mark.parametrize("budget", [-1, 1.5, "100", None, True, float("inf")])
def test_bad_budgets(chain, budget):
    with pytest.raises(BudgetError):
        solve(chain, budget)


def test_integral_float_budget_is_accepted(chain):
    assert solve(chain, float(checkpoint_all_peak(chain))).budget == checkpoint_all_peak(chain)


def test_unknown_solver_lists_the_names(chain):
    with pytest.raises(UnknownSolver, match="unknown solver 'nope'; available: auto, checkpoint-all"):
        solve(chain, 10**6, solver="nope")


def test_unknown_option_is_refused(chain):
    with pytest.raises(SolverOptionError, match="has no option 'depth'"):
        solve(chain, 10**6, depth=3)


def test_bad_time_limit(chain):
    with pytest.raises(BudgetError, match="time_limit"):
        solve(chain, 10**6, time_limit=-1)


def test_option_checks():
    opt = Option("steps", int, 3, "number of steps", low=1, high=10)
    assert opt.check("s", 4) == 4 and opt.check("s", 4.0) == 4
    for bad in (0, 11, 2.5, "3", True):
        with pytest.raises(SolverOptionError, match="option 'steps'"):
            opt.check("s", bad)
    choice = Option("mode", str, "a", "mode", choices=("a", "b"))
    with pytest.raises(SolverOptionError, match="one of"):
        choice.check("s", "c")
    flag = Option("fast", bool, False, "go fast")
    with pytest.raises(SolverOptionError, match="true or false"):
        flag.check("s", 1)


@pytest.fixture
def rogue_solver():
    """A deliberately broken solver, to prove that solve() judges what solvers return."""
    @register("test-rogue", "returns whatever the test asks for", options=(Option("ops", tuple, (), "ops to return"),))
    def rogue(graph, budget, *, time_limit=None, ops=()):
        return Schedule.from_ops(ops)
    yield "test-rogue"
    del REGISTRY["test-rogue"]


def test_solve_rejects_an_invalid_schedule_from_a_solver(chain, rogue_solver):
    with pytest.raises(InvalidSchedule, match="solver 'test-rogue' returned a bad schedule"):
        solve(chain, 10**6, solver=rogue_solver, ops=(("compute", "b1"),))


def test_solve_rejects_an_over_budget_schedule_from_a_solver(chain, rogue_solver):
    good = solve(chain, 10**6).ops
    with pytest.raises(InvalidSchedule, match="exceeds the budget"):
        solve(chain, memory_lower_bound(chain), solver=rogue_solver, ops=good)


def test_get_solver():
    assert get_solver("checkpoint-all").name == "checkpoint-all"


def test_a_sweep_is_one_outcome_per_budget_in_the_order_given(chain):
    peak = checkpoint_all_peak(chain)
    outcomes = sweep(chain, [peak, peak - 1, 2 * peak], "checkpoint-all")
    assert [o.budget for o in outcomes] == [peak, peak - 1, 2 * peak]
    assert [o.status for o in outcomes] == ["feasible", "infeasible", "feasible"]
    assert outcomes[0].stats["peak"] == peak and outcomes[0].stats["cost"] == outcomes[2].stats["cost"]
    assert outcomes[1].schedule is None and outcomes[1].smallest_feasible == peak
    assert all(o.seconds >= 0 for o in outcomes)
