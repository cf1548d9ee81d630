"""Why is this tensor recomputed: computations, the once-threshold, and schedule diffs."""

import pytest
from recompute_fixture import chain3, recompute_schedule, simulated

from remat_core import GraphError, ScheduleFormatError, Schedule, checkpoint_all_peak, solve
from remat_core.analysis.explain import (KEPT_TO_RECOMPUTED, RECOMPUTED_TO_KEPT, computes_by_solving, describe_computation,
                                describe_reason, explain_tensor, recomputed_tensors, schedule_diff,
                                smallest_budget_computed_once)
from remat_core.graph.generators import chain
from remat_core.schedule import checkpoint_all_ops


def test_each_computation_names_its_reader_the_free_before_and_the_memory():
    graph = chain3()
    schedule = recompute_schedule(graph)
    explanation = explain_tensor(graph, schedule, "f1")
    assert explanation.times_computed == 2 and explanation.node.id == "f1"
    first, second = explanation.computations
    assert (first.step, first.occurrence, first.needed_by, first.needed_by_step) == (0, 1, "f2", 1)
    assert first.freed_step is None and first.end_step == 2
    assert (second.step, second.occurrence, second.needed_by, second.needed_by_step) == (9, 2, "b2", 10)
    assert second.is_recomputation and second.recorded_consumer == "b2"
    assert second.freed_step == 2 and second.freed_reason["rule"] == "evict"
    memory = schedule.simulation.memory
    assert second.memory_before == memory[8] and second.memory_after == memory[9] == memory[8] + 10
    assert second.freed_at_memory == memory[1]
    assert second.end_step == 12


def test_an_output_never_read_has_no_reader_and_is_described_as_an_output():
    graph = chain3()
    explanation = explain_tensor(graph, recompute_schedule(graph), "b1")
    (only,) = explanation.computations
    assert only.needed_by is None and explanation.is_output
    assert "output of the graph" in describe_computation(graph, only, 40)


def test_description_has_the_reason_the_free_and_the_budget_share():
    graph = chain3()
    second = explain_tensor(graph, recompute_schedule(graph), "f1").computations[1]
    text = describe_computation(graph, second, 40)
    assert "2nd computation" in text and "freed at step 2" in text and "evicted to make room" in text
    assert "grad 2" in text and "budget" in text and "%" in text


def test_describe_reason_lists_structured_fields_and_says_when_there_is_none():
    assert describe_reason(None) == "the solver recorded no reason"
    text = describe_reason({"text": "kept", "rule": "r", "bag": list(range(20)), "score": 0.123456789})
    assert text == "kept (r; bag {0, 1, 2, 3, 4, 5, 6, 7, ... 12 more}, score 0.1235)"


def test_describe_reason_formats_bytes_and_says_each_field_once():
    evicted = {"text": "evicted: h_DTR=0.7577 smallest among 4 candidates, to make room for f6", "rule": "dtr-evict",
               "score": 0.75771234, "memory": 121480032, "candidates": 4, "consumer": "f6"}
    assert describe_reason(evicted) == ("evicted: h_DTR=0.7577 smallest among 4 candidates, to make room for f6 "
                                        "(dtr-evict; memory 115.9 MiB)")
    assert describe_reason(evicted, context="freed with 115.9 MiB in use") == \
        "evicted: h_DTR=0.7577 smallest among 4 candidates, to make room for f6 (dtr-evict)"
    fits = {"text": "recomputed for consumer f2, requested by separator bag 7: the subproblem fits the budget "
                    "(1,048,576 bytes), so no further recursion", "rule": "fits-budget", "bag": 7, "consumer": "f2",
            "depth": 2, "footprint": 1048576, "frame": 10, "segment": None}
    assert describe_reason(fits) == ("recomputed for consumer f2, requested by separator bag 7: the subproblem fits "
                                     "the budget (1 MiB), so no further recursion (fits-budget; depth 2, frame 10)")


def test_recomputed_tensors_lists_only_repeats():
    assert recomputed_tensors(chain3(), recompute_schedule()) == [("f1", 2)]


def test_explain_refuses_unknown_tensors_and_unsimulated_schedules():
    graph = chain3()
    with pytest.raises(GraphError, match="nope"):
        explain_tensor(graph, recompute_schedule(graph), "nope")
    bare = Schedule.from_ops(checkpoint_all_ops(graph)[0])
    with pytest.raises(ScheduleFormatError, match="simulation"):
        explain_tensor(graph, bare, "f1")


def threshold_counts(threshold: int, infeasible_below: int = 0):
    """A solver that recomputes below ``threshold`` and is infeasible below ``infeasible_below``."""
    asked = []

    def computes_at(budget):
        asked.append(budget)
        if budget < infeasible_below:
            return None
        return 1 if budget >= threshold else 3
    return computes_at, asked


def test_once_threshold_is_refined_by_bisection_between_grid_points():
    computes_at, asked = threshold_counts(537)
    found = smallest_budget_computed_once("t", "s", [0, 250, 500, 750, 1000], computes_at, refine_steps=20)
    assert found.budget == 537 and found.below == 536 and found.recomputed_below
    assert found.checked == len(asked)


def test_once_threshold_stops_after_its_refinement_budget():
    computes_at, _ = threshold_counts(537)
    found = smallest_budget_computed_once("t", "s", [0, 1000], computes_at, refine_steps=2)
    assert found.below < 537 <= found.budget and found.budget - found.below == 250


def test_once_threshold_when_every_feasible_budget_computes_once():
    computes_at, _ = threshold_counts(0, infeasible_below=300)
    found = smallest_budget_computed_once("t", "s", [0, 500, 1000], computes_at, refine_steps=20)
    assert found.budget == 300 and not found.recomputed_below


def test_once_threshold_when_even_the_top_recomputes():
    computes_at, _ = threshold_counts(10**9)
    found = smallest_budget_computed_once("t", "s", [0, 500, 1000], computes_at)
    assert found.budget is None and found.below == 1000 and found.recomputed_below


def test_once_threshold_takes_the_run_of_once_budgets_at_the_top_of_a_non_monotone_solver():
    answers = {0: None, 100: 1, 200: 2, 300: 1, 400: 1}
    found = smallest_budget_computed_once("t", "s", list(answers), lambda b: answers.get(b, 2), refine_steps=0)
    assert found.budget == 300 and found.below == 200


def test_computes_by_solving_counts_through_the_real_solver():
    graph = chain3()
    count = computes_by_solving(graph, "checkpoint-all", "f1")
    assert count(checkpoint_all_peak(graph)) == 1
    assert count(checkpoint_all_peak(graph) - 1) is None
    with pytest.raises(GraphError):
        computes_by_solving(graph, "checkpoint-all", "missing")


def test_schedule_diff_names_tensors_that_change_between_kept_and_recomputed():
    graph = chain3()
    kept = solve(graph, checkpoint_all_peak(graph), "checkpoint-all")
    redone = recompute_schedule(graph)
    (change,) = schedule_diff(graph, kept, redone)
    assert (change.tensor, change.computes_a, change.computes_b, change.change) == ("f1", 1, 2, KEPT_TO_RECOMPUTED)
    (back,) = schedule_diff(graph, redone, kept)
    assert back.change == RECOMPUTED_TO_KEPT
    assert schedule_diff(graph, kept, kept) == []


def test_schedule_diff_refuses_schedules_of_another_graph():
    graph = chain3()
    other = simulated(graph, recompute_schedule(graph).ops)
    with pytest.raises(GraphError, match="same graph"):
        schedule_diff(chain(2), other, other)
