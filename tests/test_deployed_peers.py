"""The deployed policies as peers: each one's schedule is what its own mechanism holds, measured for real."""

from __future__ import annotations

import pytest

from remat_core import ComputeGraph, checkpoint_all_peak, memory_lower_bound, solve, solve_outcome
from remat_core.analysis import policy_points
from remat_core.errors import SolverOptionError
from remat_core.frontends.trace import trace_training_graph, trace_zoo_model
from remat_core.run.peers import measure_peer
from remat_core.solvers import REFUSED
from tiny_models import residual_mlp

PEERS = [("hf-checkpointing", {}), ("hf-checkpointing", {"every": 2}), ("torchtitan-sac", {}),
         ("torch-auto-sac", {})]


@pytest.fixture(scope="module")
def bert() -> ComputeGraph:
    return trace_zoo_model("hf-bert", layers=2, hidden=64, heads=2, seq_len=32)


@pytest.fixture(scope="module")
def blocks_mlp() -> ComputeGraph:
    return trace_training_graph(*residual_mlp(width=32, depth=4, batch=4, tokens=8))


def midway(graph: ComputeGraph) -> int:
    return (memory_lower_bound(graph) + checkpoint_all_peak(graph)) // 2


@pytest.mark.parametrize("solver, options", PEERS, ids=[f"{s}{o or ''}" for s, o in PEERS])
@pytest.mark.parametrize("model", ["bert", "blocks_mlp"])
def test_each_peers_own_mechanism_holds_what_its_schedule_says(solver, options, model, request):
    graph = request.getfixturevalue(model)
    outcome = solve_outcome(graph, checkpoint_all_peak(graph) if solver != "torch-auto-sac" else midway(graph),
                            solver, **options)
    if not outcome.feasible:  # a fixed policy is refused below its own peak, which it names
        outcome = solve_outcome(graph, outcome.smallest_feasible or checkpoint_all_peak(graph), solver, **options)
    if not outcome.feasible:  # auto-SAC plans from wall-clock op times: the budget it named may not come again
        outcome = solve_outcome(graph, checkpoint_all_peak(graph), solver, **options)
    assert outcome.feasible, outcome.message
    run = measure_peer(graph, outcome.schedule)
    assert run.gradients_equal, run
    # within 10%, or 32 KiB on the MLP of 175 KiB, where auto-SAC's plan (from wall-clock op times, so another on a
    # busy machine) can leave one tensor of a few KiB alive that its schedule frees
    assert abs(run.measured_peak - run.simulated_peak) <= max(0.10 * run.simulated_peak, 32 * 1024), run
    assert run.measured_peak < run.eager_peak or solver == "torch-auto-sac"


def test_hugging_face_checkpointing_is_hugging_faces_own_method(bert):
    run = measure_peer(bert, solve(bert, checkpoint_all_peak(bert), "hf-checkpointing"))
    assert "activation_checkpointing_enable(every_n_layers=1" in run.mechanism
    model = bert.attachments.joint.model
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())  # taken off afterwards


def test_a_fixed_policy_names_its_own_peak_below_it(bert):
    peak = solve(bert, checkpoint_all_peak(bert), "hf-checkpointing").stats["peak"]
    refused = solve_outcome(bert, peak - 1, "hf-checkpointing")
    assert not refused.feasible and refused.smallest_feasible == peak and "does not follow a budget" in refused.detail


def test_the_peers_are_not_applicable_to_graphs_without_a_model_or_at_module_level(bert):
    """Nor does the explorer offer them there (a module-level model's Why page once picked HF's policy as its other
    solver and showed the refusal as an error)."""
    from explorer.widgets.solvers import deployed_peers, offered_solvers

    from_file = ComputeGraph.from_json(bert.to_json())
    module = trace_zoo_model("hf-bert", layers=2, hidden=64, heads=2, seq_len=32, level="module")
    peers = {solver for solver, _ in PEERS}
    assert peers <= set(deployed_peers(bert)) & set(offered_solvers(bert))
    for graph in (from_file, module):
        assert not peers & set(deployed_peers(graph) + offered_solvers(graph))
    for solver, _ in PEERS:
        for graph in (from_file, module):
            outcome = solve_outcome(graph, checkpoint_all_peak(graph), solver)
            assert outcome.status == REFUSED and "not applicable" in outcome.detail, (solver, outcome.detail)


def test_a_fixed_policy_is_met_at_each_setting_users_pick_each_at_the_peak_it_holds(blocks_mlp):
    points = policy_points(blocks_mlp, "hf-checkpointing")
    assert [p.setting for p in points] == [f"every={n}" for n in range(1, len(points) + 1)] and len(points) >= 2
    for n, point in enumerate(points, start=1):
        alone = solve(blocks_mlp, point.budget, "hf-checkpointing", every=n)  # it fits exactly where it is placed
        assert point.feasible and point.peak == point.budget == alone.stats["peak"]
        assert point.overhead == pytest.approx(alone.stats["overhead"])
    assert points[0].overhead >= points[-1].overhead  # every layer recomputes the most
    single = policy_points(blocks_mlp, "torchtitan-sac")
    assert len(single) == 1 and single[0].setting == "as set" and single[0].feasible


def test_a_solver_that_follows_a_budget_is_swept_over_budgets_not_settings(blocks_mlp):
    with pytest.raises(SolverOptionError, match="follows a budget"):
        policy_points(blocks_mlp, "torch-auto-sac")
