"""The heuristic solvers (the separator solvers included): valid, never better than the true optimum, optimal
where theory says so, explained."""

import math
from functools import lru_cache

import pytest
from bruteforce import optimal_cost
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs

from remat_core import (ComputeGraph, InfeasibleBudget, Node, checkpoint_all_peak, memory_lower_bound, simulate,
                        solve)
from remat_core.graph.generators import layered_training_chain, random_dag, training_chain
from remat_core.solvers.eviction import dtr as dtr_module
from remat_core.solvers.chains.chain import linear_chain
from remat_core.solvers.chains.plans import plan_computes
from remat_core.solvers.chains.griewank import binomial_splits, forward_steps, optimal_splits, revolve_plan

HEURISTICS = ("chen-sqrt", "chen-greedy", "griewank", "rotor", "dtr", "dtr-eq", "lru", "largest-first", "greedy-size",
              "treewidth", "pathwidth", "pathwidth-linear")


def solved_cost(graph, budget, solver):
    try:
        return solve(graph, budget, solver).stats["cost"]
    except InfeasibleBudget:
        return math.inf


@pytest.mark.parametrize("solver", HEURISTICS)
@given(graph=compute_graphs(max_nodes=8), fraction=st.floats(0.3, 1.1))
@settings(max_examples=25)
def test_valid_explained_and_never_below_the_optimum(solver, graph, fraction):
    budget = max(memory_lower_bound(graph), int(checkpoint_all_peak(graph) * fraction))
    best = optimal_cost(graph, budget)
    try:
        schedule = solve(graph, budget, solver)
    except InfeasibleBudget as e:
        assert e.smallest_feasible is None or e.smallest_feasible > budget
        return
    result = simulate(graph, schedule, budget=budget)
    assert result.cost >= best - 1e-9
    assert len(schedule.reasons) == len(schedule.ops)
    assert all(r is not None and r["text"] and r["rule"] for r in schedule.reasons)


@pytest.mark.parametrize("solver", HEURISTICS)
@given(graph=compute_graphs(max_nodes=10), extra=st.integers(0, 20))
@settings(max_examples=25)
def test_no_recomputation_when_checkpoint_all_fits(solver, graph, extra):
    schedule = solve(graph, checkpoint_all_peak(graph) + extra, solver)
    assert schedule.stats["recomputes"] == 0


# -- griewank -----------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def revolve_recursion(steps, slots):
    """The optimal number of forward steps by brute recursion over every split."""
    if steps == 1:
        return 0
    if slots == 0:
        return math.inf
    return min(m + revolve_recursion(steps - m, slots - 1) + revolve_recursion(m, slots) for m in range(1, steps))


@pytest.mark.parametrize("slots", range(1, 6))
def test_binomial_formula_and_splits_match_the_recursion(slots):
    for steps in range(1, 40):
        assert forward_steps(steps, slots) == revolve_recursion(steps, slots)
        if steps >= 2:
            for m in optimal_splits(steps, slots):
                assert m + revolve_recursion(steps - m, slots - 1) + revolve_recursion(m, slots) == \
                    revolve_recursion(steps, slots)
            assert set(optimal_splits(steps, slots)) <= set(binomial_splits(steps))


@pytest.mark.parametrize("n, slots", [(4, 1), (6, 2), (9, 2), (12, 3), (20, 4)])
def test_revolve_plan_takes_the_binomial_number_of_forward_steps(n, slots):
    g = training_chain(n)
    chain = linear_chain(g, merge_tail=True)
    _, reasons = plan_computes(chain, revolve_plan(1, chain.length, slots), "griewank")
    advances = sum(r["rule"] == "griewank-advance" for r in reasons)
    assert advances == forward_steps(chain.length, slots)


@pytest.mark.parametrize("n", range(1, 6))
def test_griewank_and_rotor_are_optimal_on_unit_chains(n):
    g = training_chain(n)
    for budget in range(memory_lower_bound(g), checkpoint_all_peak(g) + 1):
        best = optimal_cost(g, budget)
        assert solved_cost(g, budget, "griewank") == best
        assert solved_cost(g, budget, "rotor") == best


def test_griewank_counts_steps_not_costs():
    # an expensive first layer: revolve places checkpoints by step count, rotor by cost
    g = layered_training_chain([1] * 8, [50.0] + [1.0] * 7)
    budget = memory_lower_bound(g) + 1
    assert solved_cost(g, budget, "rotor") < solved_cost(g, budget, "griewank")


# -- rotor ---------------------------------------------------------------------------------------------

@st.composite
def layered_chains(draw, equal_sizes):
    n = draw(st.integers(1, 4))
    size = draw(st.integers(1, 4))
    mems = [size] * n if equal_sizes else draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    costs = draw(st.lists(st.integers(1, 6).map(float), min_size=n, max_size=n))
    backward = draw(st.lists(st.integers(1, 9).map(float), min_size=n, max_size=n))
    return layered_training_chain(mems, costs, backward, input_mem=size if equal_sizes else draw(st.integers(1, 4)),
                                  loss_mem=size if equal_sizes else draw(st.integers(1, 3)),
                                  loss_cost=float(draw(st.integers(0, 3))))


@given(layered_chains(equal_sizes=True), st.floats(0, 1))
@settings(max_examples=40)
def test_rotor_is_optimal_on_chains_of_equal_sizes_and_any_costs(graph, fraction):
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    budget = low + int((high - low) * fraction)
    assert solved_cost(graph, budget, "rotor") == optimal_cost(graph, budget)


@given(layered_chains(equal_sizes=False), st.floats(0, 1))
@settings(max_examples=40)
def test_rotor_on_chains_of_unequal_sizes_is_never_below_the_optimum(graph, fraction):
    # Rotor's model keeps a stored checkpoint until its last use; with unequal sizes a schedule that
    # drops one and recomputes it later can be cheaper (docs/algorithms.md has an example).
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    budget = low + int((high - low) * fraction)
    assert solved_cost(graph, budget, "rotor") >= optimal_cost(graph, budget)


def test_rotor_model_example_of_a_cheaper_non_persistent_schedule():
    # the optimum keeps f1 to recompute f2, drops it before b3 needs the room, and recomputes it for b2
    g = layered_training_chain([2, 3, 4], [1.0, 4.0, 5.0], [1.0, 1.0, 6.0], input_mem=2, loss_mem=3, loss_cost=1.0)
    assert optimal_cost(g, 11) == 24.0
    assert solved_cost(g, 11, "rotor") == 25.0


def test_rotor_reuses_one_table_across_budgets():
    g = layered_training_chain([3, 1, 4, 1, 5, 9, 2, 6], [2.0, 7, 1, 8, 2, 8, 1, 8])
    low, peak = memory_lower_bound(g), checkpoint_all_peak(g)
    solve(g, (low + peak) // 2, "rotor")
    tables = [k for k in g._memo if k.startswith("plan-table")]
    solve(g, low, "rotor")
    assert [k for k in g._memo if k.startswith("plan-table")] == tables


# -- chen ----------------------------------------------------------------------------------------------

def test_chen_sqrt_is_one_point_and_names_its_segments():
    g = training_chain(16)
    peak = checkpoint_all_peak(g)
    schedule = solve(g, peak - 1, "chen-sqrt")
    assert schedule.solver_info["checkpoints"] == 3  # 17 links, ceil(sqrt(17)) = 5 per segment
    advance = [r for r in schedule.reasons if r["rule"] == "chen-sqrt-advance"]
    assert advance and all("segment" in r and "checkpoint" in r for r in advance)
    with pytest.raises(InfeasibleBudget) as info:
        solve(g, schedule.stats["peak"] - 1, "chen-sqrt")
    assert info.value.smallest_feasible == schedule.stats["peak"]


def test_chen_greedy_trades_memory_for_compute():
    g = training_chain(30)
    peak = checkpoint_all_peak(g)
    costs = [solve(g, int(peak * f), "chen-greedy").stats["cost"] for f in (0.9, 0.6, 0.4)]
    assert costs[0] <= costs[1] <= costs[2] and costs[0] < costs[2]


# -- the DTR family ------------------------------------------------------------------------------------

def exact_neighbourhood(engine, t, dead_grandparents=True):
    """e*(t) by definition, from scratch: evicted ancestors through evicted tensors, dead parents of t and of those,
    evicted descendants through evicted tensors (without the dead parents of the ancestors if asked)."""
    state = engine.state
    found = set()
    frontier = [t]
    while frontier:
        v = frontier.pop()
        for u in engine.preds[v]:
            dead_ok = dead_grandparents or v == t
            if u not in found and (state[u] == dtr_module.EVICTED or (state[u] == dtr_module.DEAD and dead_ok)):
                found.add(u)
                if state[u] == dtr_module.EVICTED:
                    frontier.append(u)
    frontier = [t]
    while frontier:
        for w in engine.succs[frontier.pop()]:
            if w not in found and state[w] == dtr_module.EVICTED:
                found.add(w)
                frontier.append(w)
    return sum(engine.cost[u] for u in found)


class CheckedDTR(dtr_module.DTR):
    """DTR that checks each choice against a scan of every candidate with e* computed from scratch."""

    def choose(self, engine, candidates):
        victim, score = super().choose(engine, candidates)
        scores = [(engine.cost[t] + exact_neighbourhood(engine, t)) / (engine.mem[t] * (engine.clock - engine.last_use[t] + 1))
                  for t in candidates]
        assert score == pytest.approx(min(scores))
        self.checked += 1
        return victim, score


@given(compute_graphs(max_nodes=14, zero_mem=False), st.floats(0.3, 0.95))
def test_dtr_evicts_the_smallest_h_dtr(graph, fraction):
    budget = max(memory_lower_bound(graph), int(checkpoint_all_peak(graph) * fraction))
    policy = CheckedDTR()
    policy.checked = 0
    try:
        schedule = dtr_module.EvictionEngine(graph, budget, policy, 50 * len(graph)).run()
    except InfeasibleBudget:
        return  # near the bound DTR may give up: nothing to check then, but every choice before was checked
    simulate(graph, schedule, budget=budget)
    # DTR walks checkpoint-all's order and frees as it does: below its peak it must have evicted, and each
    # eviction was checked
    assert policy.checked > 0 or budget >= checkpoint_all_peak(graph)


def test_dtr_choices_on_a_long_chain():
    g = training_chain(40)
    policy = CheckedDTR()
    policy.checked = 0
    schedule = dtr_module.EvictionEngine(g, int(checkpoint_all_peak(g) * 0.3), policy, 10**6).run()
    assert policy.checked > 20
    simulate(g, schedule)


class CheckedEq(dtr_module.DTREquivalence):
    """dtr-eq that checks each estimate: never below the evicted part of e* plus t's own dead parents."""

    def neighbourhood_costs(self, engine, candidates):
        values = super().neighbourhood_costs(engine, candidates)
        for t, value in zip(candidates, values):
            self.checked.append(value >= exact_neighbourhood(engine, int(t), dead_grandparents=False) - 1e-9)
        return values


@pytest.mark.parametrize("graph, fraction", [(training_chain(30), 0.4),
                                             (random_dag(60, edge_probability=0.08, seed=4), 0.6)])
def test_dtr_eq_never_underestimates_the_neighbourhood(graph, fraction):
    policy = CheckedEq()
    policy.checked = []
    dtr_module.EvictionEngine(graph, int(checkpoint_all_peak(graph) * fraction), policy, 10**6).run()
    assert len(policy.checked) > 20 and all(policy.checked)


@pytest.mark.parametrize("solver", ["dtr", "dtr-eq", "lru", "largest-first"])
def test_evictions_and_recomputations_are_explained(solver):
    g = training_chain(12, mem=100)
    budget = int(checkpoint_all_peak(g) * 0.5)
    schedule = solve(g, budget, solver)
    evictions = [r for r in schedule.reasons if r["rule"] == f"{solver}-evict"]
    recomputes = [r for r in schedule.reasons if r["rule"] == f"{solver}-recompute"]
    assert evictions and recomputes
    for r in evictions:
        assert "evicted" in r["text"] and isinstance(r["score"], float)
        assert r["memory"] <= budget and r["candidates"] >= 1 and r["consumer"] in g
    assert all(r["consumer"] in g and "recomputed on demand" in r["text"] for r in recomputes)
    assert schedule.solver_info["evictions"] == len(evictions)


def test_lru_and_largest_first_pick_what_they_say():
    g = layered_training_chain([1, 5, 2, 8, 3, 1, 4], [1.0] * 7)
    budget = (memory_lower_bound(g) + checkpoint_all_peak(g)) // 2
    for solver in ("lru", "largest-first"):
        schedule = solve(g, budget, solver)
        result = schedule.simulation
        for step, r in enumerate(schedule.reasons):
            if r["rule"] != f"{solver}-evict":
                continue
            victim = schedule.ops[step][1]
            if solver == "largest-first":
                assert r["score"] == g.node(victim).mem
            assert r["memory"] == result.memory[step] + g.node(victim).mem  # memory before the eviction


def test_eviction_engine_raises_when_the_inputs_alone_fill_the_budget():
    g = ComputeGraph([Node("a", 5, 1.0), Node("b", 5, 1.0), Node("c", 5, 1.0)], [("a", "c"), ("b", "c")])
    with pytest.raises(InfeasibleBudget, match="every resident tensor is an input") as info:
        dtr_module.EvictionEngine(g, 14, dtr_module.LRU(), 100).run()
    assert info.value.smallest_feasible == checkpoint_all_peak(g) == 15


# -- greedy-size ---------------------------------------------------------------------------------------

def test_greedy_size_moves_a_tensor_computed_too_early_instead_of_recomputing_it():
    nodes = [Node("x", 1, 0.0, "input", True), Node("a", 10, 1.0), Node("b1", 4, 1.0), Node("b2", 4, 1.0),
             Node("b3", 4, 1.0), Node("c", 0, 1.0)]
    edges = [("x", "a"), ("x", "b1"), ("b1", "b2"), ("b2", "b3"), ("a", "c"), ("b3", "c")]
    g = ComputeGraph(nodes, edges)
    assert checkpoint_all_peak(g) == 19
    schedule = solve(g, 15, "greedy-size")
    assert schedule.stats["recomputes"] == 0 and schedule.stats["peak"] == 15
    moved = [r for r in schedule.reasons if r["rule"] == "greedy-size-move"]
    assert len(moved) == 1 and moved[0]["consumer"] == "c" and schedule.solver_info["moves"] == 1


def test_greedy_size_rematerializes_the_largest_live_tensor_not_the_one_that_suffices():
    # a and b live across a big temporary t; freeing b (2 bytes) would be enough at t, XLA frees a (9)
    nodes = [Node("x", 1, 0.0, "input", True), Node("a", 9, 1.0), Node("b", 2, 1.0), Node("c", 1, 1.0),
             Node("t", 8, 1.0), Node("u", 1, 1.0), Node("g", 1, 1.0)]
    edges = [("x", "a"), ("x", "b"), ("a", "c"), ("b", "c"), ("x", "t"), ("t", "u"), ("a", "g"), ("b", "g"),
             ("u", "g")]
    g = ComputeGraph(nodes, edges, outputs=["c", "g"])
    assert checkpoint_all_peak(g) == 21  # x, a, b, t and u
    schedule = solve(g, 18, "greedy-size")
    evicted = [(step, r) for step, r in enumerate(schedule.reasons) if r["rule"] == "greedy-size-evict"]
    assert len(evicted) == 1
    step, r = evicted[0]
    assert schedule.ops[step] == ("free", "a") and r["score"] == 9 and r["memory"] == 12 and r["consumer"] == "t"
    assert any(x["rule"] == "greedy-size-remat" and x["consumer"] == "g" for x in schedule.reasons)
