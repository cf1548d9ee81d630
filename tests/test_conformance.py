"""The conformance suite: the same checks over every registered solver, one test per (solver, check).

In the spirit of scikit-learn's ``parametrize_with_checks``: each check is a function ``check(spec)``
that raises on a breach; the suite crosses every solver of the registry with every check, so a
failure reads ``rotor-check_time_limit_is_honoured``. What a check expects of a solver comes from
its tags (a check a solver's tags say does not apply is skipped, with the tag as the reason), and
the options that keep a search quick on these small graphs come from ``tags.test_options``. A new
solver joins by registering: nothing here names one.
"""

from __future__ import annotations

import functools
import math
import pickle
import time
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import compute_graphs

from remat_core import (ComputeGraph, InfeasibleBudget, Schedule, SolverOptionError, checkpoint_all_cost,
                        checkpoint_all_peak, memory_lower_bound, simulate, solve, solve_outcome)
from remat_core.graph.generators import (layered_training_chain, random_dag, random_layered, residual_training_net,
                                         training_chain)
from remat_core.schedule import Link
from remat_core.solvers import FEASIBLE, INFEASIBLE, REFUSED, STOPPED, SolverSpec, get_solver, list_solvers
from remat_core.solvers.eviction.slab import aligned

TIME_LIMIT = 10.0
"""Seconds a searching solver gets per solve here (on these graphs they prove optimality well before)."""
SLACK = 5.0
"""Seconds a solve may take beyond its time limit plus 10 % (building models, simulating)."""


def synthetic_graphs() -> list[ComputeGraph]:
    """Small graphs of the shapes solvers meet: a chain, a residual net, uneven layers, a random DAG."""
    return [training_chain(8, mem=3), residual_training_net(2, mem=2),
            layered_training_chain([4, 1, 6, 2, 5], [1, 3, 1, 2, 1]), random_dag(14, 0.25, seed=5)]


@functools.lru_cache(maxsize=1)
def traced_graphs() -> tuple[ComputeGraph, ...]:
    """Small models traced here, with their blocks: what a policy over a model's blocks and ops applies to."""
    from remat_core.frontends.trace import trace_training_graph
    from tiny_models import residual_mlp

    return (trace_training_graph(*residual_mlp(width=8, depth=3, batch=2, tokens=2)),
            trace_training_graph(*residual_mlp(width=16, depth=4, batch=4, tokens=2)))


def graphs(spec: SolverSpec) -> list[ComputeGraph]:
    """The graphs a solver is checked on: traced models for one that needs them, the synthetic ones otherwise."""
    return list(traced_graphs()) if spec.tags.needs_traced_model else synthetic_graphs()


def budgets(graph: ComputeGraph, points: int = 4) -> list[int]:
    """From the lower bound to the checkpoint-all peak, evenly."""
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    return sorted({low + (high - low) * k // (points - 1) for k in range(points)})


def run(spec: SolverSpec, graph: ComputeGraph, budget: int, **options) -> Schedule | InfeasibleBudget:
    """The solve with the solver's test options: its schedule, or the refusal it raised."""
    try:
        return solve(graph, budget, spec.name, time_limit=TIME_LIMIT, **{**spec.tags.test_options, **options})
    except InfeasibleBudget as refusal:
        return refusal


# -- the checks ----------------------------------------------------------------------------------------

def check_schedules_fit_their_budget(spec: SolverSpec) -> None:
    """Every schedule is valid and within its budget, and its stats are the simulator's."""
    for graph in graphs(spec):
        for budget in budgets(graph):
            answer = run(spec, graph, budget)
            if isinstance(answer, Schedule):
                result = simulate(graph, answer, budget=budget)
                assert answer.stats["peak"] == result.peak <= budget
                assert answer.stats["cost"] == result.cost


def check_checkpoint_all_peak_is_met(spec: SolverSpec) -> None:
    """At the checkpoint-all peak a schedule always exists: every solver that counts bytes finds one (one that
    places tensors at addresses, ``addressed``, at the slab that holds every tensor at once); a fixed policy
    (not ``follows_budget``) at the peak it names."""
    for graph in graphs(spec):
        answer = run(spec, graph, most_named(spec, graph))
        if not spec.tags.follows_budget and isinstance(answer, InfeasibleBudget):
            answer = run(spec, graph, answer.smallest_feasible)
        assert isinstance(answer, Schedule), f"refused the checkpoint-all peak of {graph.name}: {answer}"


def most_named(spec: SolverSpec, graph: ComputeGraph) -> int:
    """The largest budget a refusal may name: the checkpoint-all peak, or for an ``addressed`` solver every tensor
    the graph computes (and the pinned ones) rounded to the slab's alignment and laid side by side."""
    if not spec.tags.addressed:
        return checkpoint_all_peak(graph)
    needed = graph.needed_idx
    return sum(aligned(graph.mem[v]) for v in range(len(graph)) if graph.pinned[v] or v in needed)


def check_refusal_names_a_feasible_budget(spec: SolverSpec) -> None:
    """A refusal names a budget above the one asked for and at most the checkpoint-all peak; a solver whose
    tags promise it (``meets_named_budget``) then meets that budget."""
    for graph in graphs(spec):
        peak = most_named(spec, graph)
        for budget in budgets(graph)[:-1]:
            answer = run(spec, graph, budget)
            if isinstance(answer, Schedule):
                continue
            assert answer.smallest_feasible is not None and budget < answer.smallest_feasible, answer
            assert answer.smallest_feasible <= peak or not spec.tags.follows_budget, answer
            if spec.tags.meets_named_budget:
                again = run(spec, graph, answer.smallest_feasible)
                assert isinstance(again, Schedule), f"named {answer.smallest_feasible:,} but then refused it: {again}"


def check_time_limit_is_honoured(spec: SolverSpec) -> None:
    """With a small time limit on a wide 150-node graph, the solve returns within it (plus 10 % and 5 s)."""
    graph = traced_graphs()[-1] if spec.tags.needs_traced_model else random_layered(150, seed=7)
    budget = int(checkpoint_all_peak(graph) * 0.8)
    started = time.perf_counter()
    outcome = solve_outcome(graph, budget, spec.name, 0.5)
    elapsed = time.perf_counter() - started
    assert elapsed <= 0.5 * 1.1 + SLACK, f"took {elapsed:.1f} s with a time limit of 0.5 s"
    assert outcome.status in (FEASIBLE, INFEASIBLE, STOPPED), outcome.message
    if outcome.feasible:
        assert outcome.stats["peak"] <= budget


def check_reasons_are_parallel_to_ops(spec: SolverSpec) -> None:
    """Each op has a reason (None, or an object with a sentence for people), in a list as long as the ops."""
    for graph in graphs(spec):
        answer = run(spec, graph, budgets(graph)[-2])
        if isinstance(answer, Schedule) and answer.reasons is not None:
            assert len(answer.reasons) == len(answer.ops)
            assert all(r is None or (isinstance(r, dict) and r.get("text")) for r in answer.reasons)


def check_json_round_trip(spec: SolverSpec) -> None:
    """A schedule read back from its JSON has the same ops and reasons and simulates the same."""
    for graph in graphs(spec):
        answer = run(spec, graph, budgets(graph)[-2])
        if isinstance(answer, Schedule):
            back = Schedule.from_json(answer.to_json())
            assert back.ops == answer.ops and back.reasons == answer.reasons and back.solver == spec.name
            assert simulate(graph, back).peak == answer.stats["peak"]


def check_deterministic(spec: SolverSpec) -> None:
    """The same graph, budget and options give the same schedule."""
    for graph in graphs(spec)[:2]:
        budget = budgets(graph)[1]
        first, second = run(spec, graph, budget), run(spec, graph, budget)
        assert type(first) is type(second)
        if isinstance(first, Schedule):
            assert first.ops == second.ops


def check_cost_never_rises_with_the_budget(spec: SolverSpec) -> None:
    """More memory never costs more (``budget_monotone``): over a sweep, each fitting budget's cost is at most the
    cost at every smaller one that fitted."""
    for graph in graphs(spec):
        costs = [a.stats["cost"] for a in (run(spec, graph, b) for b in budgets(graph, 8)) if isinstance(a, Schedule)]
        assert all(later <= earlier + 1e-9 for earlier, later in zip(costs, costs[1:])), costs


def check_options_are_declared_and_checked(spec: SolverSpec) -> None:
    """Every declared option's default passes its own check; an undeclared option is refused before any solve."""
    for option in spec.options:
        assert option.check(spec.name, option.default) == option.default
    graph = graphs(spec)[0]
    with pytest.raises(SolverOptionError, match="has no option"):
        solve(graph, checkpoint_all_peak(graph), spec.name, no_such_option=1)


def check_outcome_crosses_processes(spec: SolverSpec) -> None:
    """The solve's outcome pickles (a worker sends it back) with its status, figures and schedule intact."""
    graph = graphs(spec)[0]
    for budget in budgets(graph)[::3]:
        outcome = solve_outcome(graph, budget, spec.name, TIME_LIMIT, **spec.tags.test_options)
        back = pickle.loads(pickle.dumps(outcome.portable()))
        assert back.status == outcome.status and back.stats == outcome.stats
        assert (back.schedule.ops if back.feasible else None) == (outcome.schedule.ops if outcome.feasible else None)


@settings(max_examples=25)
@given(graph=compute_graphs(), fraction=st.floats(0.0, 1.5))
def _random_graphs_within_budget(spec: SolverSpec, graph: ComputeGraph, fraction: float) -> None:
    budget = int(checkpoint_all_peak(graph) * fraction)
    peak = most_named(spec, graph)
    outcome = solve_outcome(graph, budget, spec.name, 5.0, **spec.tags.test_options)
    if spec.tags.needs_traced_model:  # a graph with no model behind it: not applicable, and it says so
        assert outcome.status == REFUSED and "not applicable" in outcome.message, outcome.message
        return
    if outcome.feasible:
        assert simulate(graph, outcome.schedule, budget=budget).peak <= budget
    else:
        assert outcome.status in (INFEASIBLE, STOPPED), outcome.message
        assert budget < peak and outcome.smallest_feasible is not None and budget < outcome.smallest_feasible <= peak


def check_random_graphs(spec: SolverSpec) -> None:
    """On random DAGs (Hypothesis) at any budget: a valid schedule within it, or a refusal below the checkpoint-all
    peak naming a budget above the one asked for and at most that peak."""
    _random_graphs_within_budget(spec)


# -- offloading solvers ----------------------------------------------------------------------------------

LINK = Link(1.0, 1.0)
"""A transfer lane as fast as these graphs' unit tensors take to compute: copies hide, but not for free."""


def chain_graphs() -> list[ComputeGraph]:
    """Chains, where the offloading solvers' claims are exact (elsewhere the simulator re-times their plans)."""
    return [training_chain(8), layered_training_chain([4, 1, 6, 2, 5], [1, 3, 1, 2, 1])]


def makespan(outcome: Schedule | InfeasibleBudget, graph: ComputeGraph, link: Link) -> float:
    """The schedule's makespan over ``link`` (inf for a refusal)."""
    return simulate(graph, outcome, link=link).makespan if isinstance(outcome, Schedule) else float("inf")


def check_without_a_link_it_recomputes_only(spec: SolverSpec) -> None:
    """With no bandwidth nothing is offloaded, and the schedule is its recompute-only counterpart's at every budget."""
    counterpart = spec.tags.without_link
    for graph in graphs(spec)[::2]:  # a chain and a random DAG: the fit checks cover the others
        for budget in budgets(graph):
            alone = run(spec, graph, budget)
            if isinstance(alone, Schedule):
                assert not {"offload", "prefetch"} & {action for action, _ in alone.ops}
            if counterpart:
                other = run(get_solver(counterpart), graph, budget)
                assert type(alone) is type(other)
                if isinstance(alone, Schedule):
                    assert alone.ops == other.ops and alone.stats["cost"] == other.stats["cost"]


def check_offloading_is_never_slower(spec: SolverSpec) -> None:
    """Over a link, the makespan is at most the recompute-only schedule's over the same link, wherever that fits."""
    counterpart = get_solver(spec.tags.without_link) if spec.tags.without_link else spec
    for graph in chain_graphs():
        for budget in budgets(graph):
            offloaded = run(spec, graph, budget, link=LINK)
            recomputed = run(counterpart, graph, budget)
            assert makespan(offloaded, graph, LINK) <= makespan(recomputed, graph, LINK) + 1e-9, budget
            if isinstance(offloaded, Schedule):
                assert offloaded.stats["makespan"] == makespan(offloaded, graph, LINK)


def check_makespan_never_rises(spec: SolverSpec) -> None:
    """On chains, the makespan never rises as the budget grows, nor as the bandwidth does."""
    for graph in chain_graphs():
        spans = [makespan(run(spec, graph, b, link=LINK), graph, LINK) for b in budgets(graph, 5)]
        assert all(later <= earlier + 1e-9 for earlier, later in zip(spans, spans[1:])), spans
        budget = budgets(graph)[1]
        links = [Link(rate, rate) for rate in (0.25, 1.0, 4.0)]
        spans = [makespan(run(spec, graph, budget, link=link), graph, link) for link in links]
        assert all(later <= earlier + 1e-9 for earlier, later in zip(spans, spans[1:])), spans


def check_unlimited_bandwidth_hides_every_copy(spec: SolverSpec) -> None:
    """On chains, with copies that take no time, the makespan is the sum of compute times once the budget holds the
    largest single op (:func:`memory_lower_bound`)."""
    free = Link(math.inf, math.inf)
    for graph in chain_graphs():
        schedule = run(spec, graph, memory_lower_bound(graph), link=free)
        assert isinstance(schedule, Schedule), schedule
        assert schedule.stats["makespan"] == checkpoint_all_cost(graph)


CHECKS: tuple[Callable[[SolverSpec], None], ...] = (
    check_schedules_fit_their_budget, check_checkpoint_all_peak_is_met, check_refusal_names_a_feasible_budget,
    check_time_limit_is_honoured, check_reasons_are_parallel_to_ops, check_json_round_trip, check_deterministic,
    check_cost_never_rises_with_the_budget, check_options_are_declared_and_checked, check_outcome_crosses_processes,
    check_random_graphs, check_without_a_link_it_recomputes_only, check_offloading_is_never_slower,
    check_makespan_never_rises, check_unlimited_bandwidth_hides_every_copy)
"""Every check, in the order a failure is most telling."""

OFFLOAD_CHECKS = (check_without_a_link_it_recomputes_only, check_offloading_is_never_slower, check_makespan_never_rises,
                  check_unlimited_bandwidth_hides_every_copy)
SKIPPED_UNLESS = {check_deterministic: "deterministic", check_cost_never_rises_with_the_budget: "budget_monotone",
                  **{check: "offloads" for check in OFFLOAD_CHECKS}}
"""Checks that apply only to solvers whose tag says so."""


def conformance_cases() -> list:
    """(solver, check) for every registered solver and every check, ids ``solver-check``; skips from the tags."""
    cases = []
    for spec in list_solvers():
        for check in CHECKS:
            tag = SKIPPED_UNLESS.get(check)
            marks = [pytest.mark.skip(reason=f"{spec.name} is not tagged {tag}")] if tag and not getattr(
                spec.tags, tag) else []
            if check in OFFLOAD_CHECKS[1:] and spec.tags.searching:  # a search per budget and link: minutes
                marks.append(pytest.mark.slow)
            cases.append(pytest.param(spec, check, id=f"{spec.name}-{check.__name__}", marks=marks))
    return cases


@pytest.mark.parametrize("spec, check", conformance_cases())
def test_conformance(spec: SolverSpec, check: Callable[[SolverSpec], None]) -> None:
    check(spec)
