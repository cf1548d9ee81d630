"""checkmate-milp, checkmate-lp and moccasin against the brute-force optimum, and the models they share.

What the formulations allow: all three search frontier-advancing schedules of the graph's
topological order (first computations in that order, recomputations inside a stage in that
order, at most once per stage; moccasin also at most ``intervals`` times per node). So on random
DAGs they are never below the true optimum, and checkmate-milp (and moccasin with enough
intervals) equal it on training chains, whose topological order is unique and whose optimal
schedules recompute each forward node at most once between two backward steps.
`test_fixed_order_can_cost_more` shows a graph where the order alone forces a recomputation. By
default checkmate-milp and moccasin also return a quick heuristic's schedule (any order) when it
is cheaper than theirs, so they are never above a heuristic; ``any_order=False`` tests the
fixed-order search alone.
"""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs, structured_graphs

from bruteforce import optimal_cost
from remat_core import (ComputeGraph, InfeasibleBudget, Node, SolverOptionError, checkpoint_all_cost,
                        checkpoint_all_peak, list_solvers, memory_lower_bound, simulate, solve, with_backward)
from remat_core.graph.generators import k_tree, random_dag, training_chain
from remat_core.solvers.stage_models.checkmate_model import CheckmateModel
from remat_core.solvers.quick import outcome_cost, quick_solver_names, run_quick_heuristics
from remat_core.solvers.stage_models.warm_start import best_stage_start, greedy_stage_schedule
from remat_core.solvers.stage_models.grid import (_checked_computes, computes_from_matrix, computes_from_ops, measure, stage_grid,
                                        stage_matrices, stage_ops)
from remat_core.solvers.stage_models.checkmate_lp import lp_relaxation_value, repair_r

EXACT = ("checkmate-milp", "checkmate-lp", "moccasin")
TOL = 1e-6


def budget_between(graph, fraction):
    """A budget between the memory lower bound and the checkpoint-all peak."""
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    return int(low + (high - low) * fraction)


def cost_or_inf(graph, budget, solver, **options):
    try:
        return solve(graph, budget, solver, time_limit=20, **options)
    except InfeasibleBudget as e:
        assert e.smallest_feasible is None or e.smallest_feasible > budget
        return None


def random_stage_computes(graph, rng):
    """A random frontier-advancing schedule: random 0/1 S, then Checkmate's R repair."""
    grid = stage_grid(graph)
    n = grid.n
    s = np.tril(rng.random((n, n)) < 0.4, k=-1).astype(np.int8)
    for t in range(n):
        s[t, grid.last_useful_stage < t] = 0
    return grid, computes_from_matrix(repair_r(grid, s))


# -- the shared stage model agrees with the simulator ---------------------------------------------

@given(compute_graphs(max_nodes=10), st.integers(0, 2 ** 32 - 1))
def test_stage_ops_are_valid_and_compute_what_was_asked(graph, seed):
    grid, computes = random_stage_computes(graph, np.random.default_rng(seed))
    ops, reasons = stage_ops(grid, computes, rule="milp", because="the test says so")
    result = simulate(graph, ops)
    assert len(reasons) == len(ops)
    assert {r["rule"] for r in reasons} <= {"milp", "milp-free"}
    assert all("stage" in r for r in reasons)
    assert result.memory[-1] == graph.pinned_bytes  # every tensor freed after its last reader
    r, _ = stage_matrices(grid, computes)
    assert result.computes == int(r.sum())  # unread recomputations were dropped, nothing else


@given(compute_graphs(max_nodes=10), st.integers(0, 2 ** 32 - 1))
def test_checkmate_memory_accounting_equals_the_simulator(graph, seed):
    """U of the MIP start, after every compute, is the simulated memory minus the pinned bytes."""
    grid, computes = random_stage_computes(graph, np.random.default_rng(seed))
    r, _ = stage_matrices(grid, computes)
    ordered = sorted(zip(*np.nonzero(r)))
    ops, _ = stage_ops(grid, computes, rule="milp", because="")
    result = simulate(graph, ops)
    after_compute = [m for (action, _), m in zip(ops, result.memory) if action == "compute"]
    model = CheckmateModel(grid, result.peak - graph.pinned_bytes, integral=True)
    x = model.start_vector(computes)
    u = [x[model.u_col[t, k]] * model.units.unit for t, k in ordered]
    assert np.allclose(u, np.array(after_compute) - graph.pinned_bytes)
    rows = model._matrix @ x  # the start satisfies every row, and the budget exactly at its peak
    assert np.all(rows <= model._row_upper + 1e-7) and np.all(rows >= model._row_lower - 1e-7)
    assert max(x[model.u_col[model.u_col >= 0]], default=0.0) <= model.budget_units


@given(compute_graphs(max_nodes=10), st.floats(0.0, 1.0))
def test_greedy_warm_start_fits_when_it_returns(graph, fraction):
    budget = budget_between(graph, fraction)
    computes = greedy_stage_schedule(stage_grid(graph), budget)
    if computes is not None:
        assert measure(stage_grid(graph), computes)[0] <= budget


# -- against the brute-force optimum ----------------------------------------------------------------

def cost_of(schedule):
    return schedule.stats["cost"] if schedule is not None else math.inf


@settings(max_examples=40)
@given(compute_graphs(max_nodes=9), st.floats(0.0, 1.0))
def test_exact_solvers_never_beat_the_optimum_and_the_lp_bounds_the_fixed_order_milp(graph, fraction):
    budget = budget_between(graph, fraction)
    best = optimal_cost(graph, budget)
    milp = cost_or_inf(graph, budget, "checkmate-milp", any_order=False)
    costs = {"checkmate-milp": cost_of(milp), "checkmate-lp": cost_of(cost_or_inf(graph, budget, "checkmate-lp")),
             "moccasin": cost_of(cost_or_inf(graph, budget, "moccasin", any_order=False))}
    for name, cost in costs.items():
        assert cost >= best - TOL, name
    assert costs["moccasin"] >= costs["checkmate-milp"] - TOL  # moccasin is milp with <= 2 computes per node
    assert costs["checkmate-lp"] >= costs["checkmate-milp"] - TOL
    bound = lp_relaxation_value(graph, budget)
    assert bound is not None
    assert checkpoint_all_cost(graph) - TOL <= bound <= costs["checkmate-milp"] + TOL
    if milp is not None:
        assert milp.solver_info["exact"] and milp.solver_info["mip_gap"] == 0.0
    for name in ("checkmate-milp", "moccasin"):  # with the heuristics' schedules in any order
        assert best - TOL <= cost_of(cost_or_inf(graph, budget, name)) <= costs[name] + TOL


def test_a_misreported_mip_start_is_solved_again():
    """HiGHS's presolve once took this graph's greedy start (cost 47) for cost 40 and stopped as
    'optimal'. In the graph's order (n1 before the big n3, n4) one recomputation of n1 is needed,
    so 47 is optimal there and the MILP must prove it; computing n1 last costs only 40."""
    nodes = [Node("p0", 49, 0.0, "param", True), Node("p1", 0, 0.0, "param", True)]
    nodes += [Node(i, m, c, "forward") for i, m, c in (("n0", 0, 9.0), ("n1", 5, 7.0), ("n2", 10, 4.0),
                                                      ("n3", 50, 6.0), ("n4", 20, 1.0), ("n5", 12, 9.0),
                                                      ("n6", 0, 4.0))]
    edges = [("p0", "n0"), ("p1", "n0"), ("p1", "n3"), ("n3", "n4"), ("n0", "n4"), ("n1", "n6")]
    graph = ComputeGraph(nodes, edges, name="misreported-start")
    milp = solve(graph, 119, "checkmate-milp", time_limit=20, any_order=False)
    assert optimal_cost(graph, 119) == pytest.approx(40.0)
    assert milp.stats["cost"] == pytest.approx(47.0)
    assert milp.solver_info["exact"] and milp.solver_info["lower_bound"] == pytest.approx(47.0)
    anywhere = solve(graph, 119, "checkmate-milp", time_limit=20)  # a heuristic computes n1 last
    assert anywhere.stats["cost"] == pytest.approx(40.0) and not anywhere.solver_info["exact"]
    assert anywhere.solver_info["fixed_order"]["cost"] == pytest.approx(47.0)


@settings(max_examples=30)
@given(compute_graphs(max_nodes=8), st.floats(0.0, 1.0))
def test_moccasin_with_enough_intervals_is_checkmate(graph, fraction):
    budget = budget_between(graph, fraction)
    milp = cost_or_inf(graph, budget, "checkmate-milp", any_order=False)
    mocc = cost_or_inf(graph, budget, "moccasin", intervals=len(graph), any_order=False)
    assert (milp is None) == (mocc is None)
    if milp is not None:
        assert mocc.stats["cost"] == pytest.approx(milp.stats["cost"])
        assert mocc.solver_info["exact"]


@pytest.mark.parametrize("layers", [2, 3, 4, 5])
@pytest.mark.parametrize("solver", ["checkmate-milp", "moccasin"])
def test_exact_on_training_chains(layers, solver):
    """Training chains have one topological order: the fixed order restricts nothing there.

    Moccasin gets as many intervals as nodes: at the smallest budgets the first layer is computed
    more than twice.
    """
    graph = training_chain(layers)
    options = {"intervals": len(graph)} if solver == "moccasin" else {}
    for budget in range(memory_lower_bound(graph), checkpoint_all_peak(graph) + 1):
        schedule = cost_or_inf(graph, budget, solver, **options)
        assert schedule is not None
        assert schedule.stats["cost"] == pytest.approx(optimal_cost(graph, budget)), budget


def test_exact_on_a_chain_with_uneven_sizes_and_costs():
    chain = training_chain(5)
    nodes = [n if n.pinned else Node(n.id, 1 + (7 * i) % 5, float(1 + (3 * i) % 4), n.kind)
             for i, n in enumerate(chain.nodes)]
    graph = ComputeGraph(nodes, chain.edges, chain.outputs)
    for budget in range(memory_lower_bound(graph), checkpoint_all_peak(graph) + 1):
        best = optimal_cost(graph, budget)
        milp = cost_or_inf(graph, budget, "checkmate-milp")
        assert (milp.stats["cost"] if milp is not None else math.inf) == pytest.approx(best)


def fixed_order_graph():
    """``A`` (10 bytes) comes first in the order, but the cheap way is to build the ``B`` branch first."""
    nodes = [Node("x", 0, 0.0, "input", True), Node("A", 10, 5.0), Node("B1", 5, 1.0), Node("B2", 1, 1.0),
             Node("out", 1, 1.0)]
    return ComputeGraph(nodes, [("x", "A"), ("x", "B1"), ("B1", "B2"), ("A", "out"), ("B2", "out")])


def test_fixed_order_can_cost_more():
    graph = fixed_order_graph()
    assert graph.topological_order()[1:3] == ("A", "B1")
    # order B1, B2, (free B1), A, out peaks at 12 with no recomputation; A first needs 16
    assert checkpoint_all_peak(graph) == 16
    assert optimal_cost(graph, 12) == checkpoint_all_cost(graph) == 8.0
    milp = solve(graph, 12, "checkmate-milp", time_limit=10, any_order=False)
    assert milp.stats["cost"] == 13.0  # A is computed, dropped for B1, and recomputed for out
    assert milp.solver_info["exact"]
    assert [r["rule"] for r in milp.reasons if r["text"].startswith("recomputed")] == ["milp"]
    recompute = next(r for r in milp.reasons if r["text"].startswith("recomputed"))
    assert recompute["consumer"] == "out" and recompute["stage"] == 3
    assert lp_relaxation_value(graph, 12) > optimal_cost(graph, 12)  # the bound holds for this order only
    for solver in ("checkmate-milp", "moccasin"):  # a heuristic builds the B branch first
        anywhere = solve(graph, 12, solver, time_limit=10)
        info = anywhere.solver_info
        assert anywhere.stats["cost"] == 8.0 and info["source"] in quick_solver_names() and not info["exact"]
        assert info["fixed_order"]["cost"] == 13.0 and "mip_gap" not in info and "gap" not in info


def test_infeasible_in_the_fixed_order():
    """A graph (found by search) where every schedule in the topological order needs more memory."""
    sizes = {"n0": (27, 7), "n1": (2, 5), "n2": (43, 7), "n3": (11, 5), "n4": (40, 5), "n5": (31, 3), "n6": (18, 3),
             "n7": (41, 6), "n8": (8, 7)}
    edges = [("n1", "n2"), ("n0", "n2"), ("n2", "n3"), ("n0", "n5"), ("n2", "n5"), ("n4", "n5"), ("n0", "n6"),
             ("n5", "n6"), ("n4", "n6"), ("n4", "n7"), ("n2", "n7"), ("n6", "n8"), ("n1", "n8"), ("n0", "n8")]
    graph = ComputeGraph([Node(k, m, float(c)) for k, (m, c) in sizes.items()], edges, ["n3", "n7", "n8"])
    budget = 141
    assert memory_lower_bound(graph) == budget and optimal_cost(graph, budget) < math.inf
    for solver, options in (("checkmate-milp", {"any_order": False}), ("checkmate-lp", {}),
                            ("moccasin", {"any_order": False})):
        with pytest.raises(InfeasibleBudget) as info:
            solve(graph, budget, solver, time_limit=10, **options)
        assert info.value.smallest_feasible > budget
    for solver in ("checkmate-milp", "moccasin"):  # heuristics' schedules outside the fixed-order family fit
        anywhere = solve(graph, budget, solver, time_limit=10)
        assert anywhere.stats["peak"] <= budget and anywhere.stats["cost"] >= optimal_cost(graph, budget)
        assert "refusal" in anywhere.solver_info["fixed_order"] and not anywhere.solver_info["exact"]


# -- results, options, output ----------------------------------------------------------------------

HEURISTICS = [spec.name for spec in list_solvers() if spec.tags.quick or spec.family == "baseline"] + ["checkmate-lp"]
"""What the exact solvers promise never to be above: the quick portfolio they compare with (found by tag), the
baseline, and (for the MILP, in the same order) the LP's roundings. Not ``auto``, whose exhaustive search and
large-neighbourhood search can beat every fixed-order schedule and every quick heuristic, nor PyTorch's own
partitioner, a peer."""


@settings(max_examples=30)
@given(st.one_of(compute_graphs(max_nodes=9), structured_graphs(max_nodes=12)), st.floats(0.0, 1.0))
def test_exact_solvers_are_never_above_a_heuristic(graph, fraction):
    """Where the fixed order costs more (or fits nowhere), a heuristic's cheaper schedule is returned.

    checkmate-lp's roundings count against checkmate-milp only: they are in the same order, so the
    MILP's proved optimum is at most theirs; moccasin's two intervals per node can miss them.
    """
    budget = budget_between(graph, fraction)
    rivals = {name: cost_of(cost_or_inf(graph, budget, name)) for name in HEURISTICS}
    for solver in ("checkmate-milp", "moccasin"):
        schedule = cost_or_inf(graph, budget, solver)
        best = min(cost for name, cost in rivals.items() if solver == "checkmate-milp" or name != "checkmate-lp")
        assert cost_of(schedule) <= best + TOL, solver
        if schedule is not None and "source" in schedule.solver_info:
            info = schedule.solver_info
            assert rivals[info["source"]] == schedule.stats["cost"] and not info["exact"]
            fixed = info["fixed_order"]
            assert "refusal" in fixed or fixed["cost"] > schedule.stats["cost"]


def test_a_heuristic_beats_the_fixed_order_searched_under_a_time_limit():
    """The audit's case: at 5 bytes the MILP found a 133-cost schedule in 5 s, treewidth one of 61.

    HiGHS's bound for the fixed order was 80 there, so no fixed-order schedule reaches 61 (and
    lifetime-split, added later, reaches 55).
    """
    graph = k_tree(40, 3, seed=1)
    cheapest = min(outcome_cost(a) for a in run_quick_heuristics(graph, 5))
    assert cheapest <= solve(graph, 5, "treewidth").stats["cost"]
    for solver in ("checkmate-milp", "moccasin"):
        schedule = solve(graph, 5, solver, time_limit=2)
        info = schedule.solver_info
        assert schedule.stats["cost"] == cheapest and info["source"] in quick_solver_names()
        assert "refusal" in info["fixed_order"] or info["fixed_order"]["cost"] > cheapest


def test_checkpoint_all_fits_is_proved_optimal_at_once():
    graph = training_chain(6)
    for solver in EXACT:
        schedule = solve(graph, checkpoint_all_peak(graph), solver)
        assert schedule.solver_info["exact"] and schedule.stats["recomputes"] == 0
        if solver == "checkmate-lp":
            assert schedule.solver_info["lp_lower_bound"] == checkpoint_all_cost(graph)


def test_the_lp_rounding_meets_a_budget_checkpoint_all_meets():
    """Rounding this graph's LP at the checkpoint-all peak gave no schedule within it (and named 164
    bytes as the smallest feasible budget) before checkpoint-all was tried first."""
    graph = with_backward(random_dag(3, 0.346, max_mem=40, max_cost=9, seed=14), trainable=["in0"])
    peak = checkpoint_all_peak(graph)
    schedule = solve(graph, peak, "checkmate-lp", time_limit=10)
    assert schedule.stats["peak"] <= peak and schedule.stats["recomputes"] == 0


def test_lp_solver_reports_its_bound_and_the_rounding():
    graph = training_chain(6)
    budget = budget_between(graph, 0.5)
    schedule = solve(graph, budget, "checkmate-lp", time_limit=10)
    info = schedule.solver_info
    assert info["lp_lower_bound"] == pytest.approx(lp_relaxation_value(graph, budget))
    assert info["lp_lower_bound"] <= schedule.stats["cost"] + TOL
    assert info["rounding"]["threshold"] in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    randomized = solve(graph, budget, "checkmate-lp", time_limit=10, rounding="randomized", samples=5, seed=3)
    assert randomized.solver_info["rounding"]["sample"] in range(5)


def test_milp_reports_gap_bound_and_incumbents():
    graph = training_chain(6)
    schedule = solve(graph, budget_between(graph, 0.3), "checkmate-milp", time_limit=20)
    info = schedule.solver_info
    assert info["status"] == "optimal" and info["mip_gap"] == 0.0
    assert info["lower_bound"] == pytest.approx(schedule.stats["cost"])
    assert info["incumbents"] and info["incumbents"][-1][1] == pytest.approx(schedule.stats["cost"])
    assert info["warm_start"] in ("greedy", "lp-rounding", None, *quick_solver_names())
    assert info["integer_variables"] < info["variables"]  # only R is integral


def test_moccasin_reports_incumbents_and_gap():
    graph = training_chain(6)
    schedule = solve(graph, budget_between(graph, 0.3), "moccasin", time_limit=20, intervals=len(graph))
    info = schedule.solver_info
    assert info["status"] == "optimal" and info["gap"] == 0.0 and info["exact"]
    assert info["lower_bound"] == pytest.approx(schedule.stats["cost"])
    seconds = [when for when, _ in info["incumbents"]]
    assert seconds == sorted(seconds) and info["incumbents"][-1][1] == pytest.approx(schedule.stats["cost"])


def test_moccasin_incumbents_are_true_costs_when_costs_are_rounded():
    """Costs with many decimals are rounded for CP-SAT; the incumbents still report the real costs."""
    from remat_core.graph.generators import layered_training_chain
    graph = layered_training_chain([3, 5, 2, 7, 4, 6], [math.pi * k for k in range(1, 7)],
                                   [math.e * k for k in range(1, 7)], input_mem=1, loss_mem=1,
                                   loss_cost=math.sqrt(2))
    schedule = solve(graph, budget_between(graph, 0.3), "moccasin", time_limit=20, intervals=len(graph))
    info = schedule.solver_info
    assert info["objective_rounded"]
    assert info["incumbents"][-1][1] == pytest.approx(schedule.stats["cost"], rel=1e-12)


def test_moccasin_phase1_proves_the_smallest_peak_with_one_interval():
    """With one interval per node nothing can be recomputed: phase 1 proves checkpoint-all's peak is the least."""
    graph = training_chain(5)
    with pytest.raises(InfeasibleBudget) as info:
        solve(graph, checkpoint_all_peak(graph) - 1, "moccasin", time_limit=10, intervals=1, any_order=False)
    assert info.value.smallest_feasible == checkpoint_all_peak(graph)
    assert "proved" in info.value.detail and "intervals" in info.value.detail


@pytest.mark.parametrize("solver, options", [
    ("checkmate-milp", {"warm_start": "heuristic"}), ("checkmate-milp", {"mip_gap": -1.0}),
    ("checkmate-lp", {"rounding": "nearest"}), ("checkmate-lp", {"epsilon": 0.0}),
    ("moccasin", {"intervals": 0}), ("moccasin", {"workers": 2.5}), ("moccasin", {"threads": 2})])
def test_bad_options_are_refused(solver, options):
    graph = training_chain(3)
    with pytest.raises(SolverOptionError):
        solve(graph, checkpoint_all_peak(graph), solver, **options)


@pytest.mark.parametrize("solver", ["checkmate-milp", "checkmate-lp"])
def test_graphs_over_max_nodes_are_refused_with_a_hint(solver):
    graph = training_chain(10)
    with pytest.raises(SolverOptionError, match="moccasin"):
        solve(graph, budget_between(graph, 0.5), solver, max_nodes=10)


@pytest.mark.parametrize("warm_start", ["greedy", "lp-rounding", "none"])
def test_every_warm_start_gives_the_optimum(warm_start):
    graph = training_chain(5)
    budget = budget_between(graph, 0.4)
    schedule = solve(graph, budget, "checkmate-milp", time_limit=20, warm_start=warm_start)
    assert schedule.stats["cost"] == pytest.approx(optimal_cost(graph, budget))


def test_a_short_time_limit_still_returns_a_valid_schedule_or_says_why():
    graph = training_chain(25)
    budget = budget_between(graph, 0.2)
    for solver in EXACT:
        try:
            schedule = solve(graph, budget, solver, time_limit=1.0)
        except InfeasibleBudget as e:
            assert "time" in e.detail or "rounding" in e.detail
            continue
        assert simulate(graph, schedule).peak <= budget


def test_solving_prints_nothing_on_stdout():
    """HiGHS prints a banner on its first construction; the solvers keep stdout clean."""
    code = ("from remat_core import solve; from remat_core.graph.generators import training_chain; "
            "g = training_chain(4); s = solve(g, 4, 'checkmate-milp', time_limit=10); "
            "s = solve(g, 4, 'checkmate-lp', time_limit=10); s = solve(g, 5, 'moccasin', time_limit=10)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""


# -- warm starts from the heuristic solvers -----------------------------------------------------------

@given(compute_graphs(max_nodes=10), st.integers(0, 2 ** 32 - 1))
def test_stage_ops_convert_back_to_their_computes(graph, seed):
    grid, computes = random_stage_computes(graph, np.random.default_rng(seed))
    ops, _ = stage_ops(grid, computes, rule="test", because="")
    assert computes_from_ops(grid, ops) == _checked_computes(grid, computes)


@settings(max_examples=40)
@given(compute_graphs(max_nodes=10), st.floats(0.0, 1.0))
def test_eviction_schedules_are_in_stage_form_and_no_dearer_there(graph, fraction):
    """DTR runs in the grid's topological order, so its schedule converts, at no more cost."""
    budget = budget_between(graph, fraction)
    grid = stage_grid(graph)
    try:
        schedule = solve(graph, budget, "dtr")
    except InfeasibleBudget:
        return
    computes = computes_from_ops(grid, schedule.ops)
    assert computes is not None
    assert measure(grid, computes)[1] <= schedule.stats["cost"] + TOL


@settings(max_examples=40)
@given(compute_graphs(max_nodes=10), st.floats(0.0, 1.0), st.sampled_from([None, 1, 2]))
def test_the_best_start_fits_and_respects_the_cap(graph, fraction, cap):
    budget = budget_between(graph, fraction)
    grid = stage_grid(graph)
    start = best_stage_start(grid, budget, run_quick_heuristics(graph, budget), max_computes=cap)
    if start is None:
        return
    computes, source, cost = start
    assert source in ("greedy", *quick_solver_names())
    peak, measured = measure(grid, computes)
    assert measured == pytest.approx(cost) and peak <= budget
    if cap is not None:
        positions = [p for _, p in computes]
        assert max(positions.count(p) for p in positions) <= cap


def test_moccasin_is_never_dearer_than_its_hint():
    """With little time CP-SAT may return nothing better: the hint is returned, never anything worse.

    (The limit bounds the whole call, so it leaves time for the heuristics that give the hint.)"""
    graph = training_chain(40)
    budget = budget_between(graph, 0.3)
    schedule = solve(graph, budget, "moccasin", time_limit=1, any_order=False)
    info = schedule.solver_info
    assert info["hint"] in ("greedy", *quick_solver_names())
    assert schedule.stats["cost"] <= info["hint_cost"] + TOL and schedule.stats["peak"] <= budget


def test_checkmate_milp_offloads_over_a_link_as_well_as_pofo_on_a_chain():
    """With a transfer lane the MILP gains offload and prefetch decisions: on a chain it reaches pofo's (optimal)
    makespan, with copies that take no time the compute time, and without a link it offloads nothing."""
    import math

    from remat_core.schedule import Link

    graph = training_chain(8)
    for budget in (5, 7):
        milp = solve(graph, budget, "checkmate-milp", time_limit=20, link=Link(1.0, 1.0))
        assert milp.has_transfers and milp.solver_info["offload"]["status"] == "optimal"
        assert milp.stats["makespan"] == solve(graph, budget, "pofo", link=Link(1.0, 1.0)).stats["makespan"] == 25
    free = solve(graph, 4, "checkmate-milp", time_limit=20, link=Link(math.inf, math.inf))
    assert free.stats["makespan"] == checkpoint_all_cost(graph)
    assert not solve(graph, 5, "checkmate-milp", time_limit=20).has_transfers


def test_moccasin_offloads_over_a_link_with_cp_sat():
    """The same stage model with copies, in CP-SAT: on a chain it reaches the compute time where pofo does, and with
    copies that take no time, at the largest single op."""
    import math

    from remat_core.schedule import Link

    graph = training_chain(8)
    for budget in (5, 8):
        cp = solve(graph, budget, "moccasin", time_limit=20, link=Link(1.0, 1.0), workers=1)
        assert cp.has_transfers and cp.solver_info["offload"]["status"] == "optimal"
        assert cp.stats["makespan"] == 25 < solve(graph, budget, "moccasin", time_limit=20, workers=1).stats["cost"]
    free = solve(graph, memory_lower_bound(graph), "moccasin", time_limit=20, link=Link(math.inf, math.inf),
                 workers=1)
    assert free.stats["makespan"] == checkpoint_all_cost(graph)
