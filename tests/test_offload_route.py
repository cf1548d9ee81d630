"""A plan that offloads, run for real: replayed op by op, installed as saved-tensor hooks (``--via offload``), and as a
drop-in module; on this CPU nothing moves, and the report says so."""

from __future__ import annotations

import pytest
import torch
from tiny_models import residual_mlp
from torch import nn

from remat_core import checkpoint_all_peak, memory_lower_bound, solve
from remat_core.frontends.trace import trace_training_graph
from remat_core.run import rematerialize, train_step
from remat_core.schedule.decisions import KEEP, RECOMPUTE, plan_decisions
from remat_core.errors import ExecutionError
from remat_core.run.executor import execute, gradient_difference, reference_gradients
from remat_core.schedule import Link


@pytest.fixture(scope="module")
def offloaded():
    """A residual MLP's plan that offloads and defers forward values to the backward (checkpoint regions), over a
    link fast enough for copies to hide behind its matmuls."""
    graph = trace_training_graph(*residual_mlp(width=128, depth=4, batch=32, tokens=16))
    low, high = memory_lower_bound(graph), checkpoint_all_peak(graph)
    schedule = solve(graph, (low + high) // 2, "pofo", link=Link(1.0, 1.0))
    assert schedule.has_transfers and plan_decisions(graph, schedule.ops).count(RECOMPUTE)
    return graph, schedule


def test_the_replay_moves_offloaded_tensors_as_the_simulator_does(offloaded):
    graph, schedule = offloaded
    result = execute(graph, schedule)
    assert result.memory == result.simulated_memory
    assert gradient_difference(result.gradients, reference_gradients(graph)) == 0.0


def test_offloaded_tensors_are_kept_for_the_backward(offloaded):
    graph, schedule = offloaded
    decisions = plan_decisions(graph, schedule.ops)
    moved = {node for action, node in schedule.ops if action == "offload"}
    assert moved and decisions.offloaded == moved
    assert all(decisions.of(node) == KEEP for node in moved)


def test_via_offload_gives_the_eager_gradients_and_says_nothing_moved_on_a_cpu(offloaded):
    """Every tensor the plan offloads goes through the hooks (its bytes are the simulator's), gradients are eager's."""
    graph, schedule = offloaded
    report = train_step(graph, schedule, "offload")
    assert report.gradients_equal and not report.uncontrolled
    details = report.details
    assert details["offloaded_values"] == details["plan_offloaded_nodes"] > 0
    assert details["bytes_to_host"] == details["bytes_to_device"] == details["simulated_host_peak"]
    assert details["transfers"].startswith("none: on a CPU")
    # on a CPU the tensors stay: the step holds at most the simulated device peak plus what the plan moves out
    assert report.measured_peak <= (report.simulated_peak + details["simulated_host_peak"]) * 1.10


def test_a_drop_in_module_offloads_through_hooks():
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(8)])
    x = torch.randn(512, 64)
    module = rematerialize(net, x, budget="80%", solver="pofo", via="offload", bandwidth=Link(1.0, 1.0))
    assert module.schedule.has_transfers
    module(x).sum().backward()
    planned = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net(x).sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(planned, net.parameters()))
    with pytest.raises(ExecutionError, match="give bandwidth="):
        rematerialize(net, x, budget="80%", solver="pofo", via="offload")


def test_on_a_cpu_the_over_budget_warning_says_the_offloaded_bytes_stayed():
    from remat_core.run import get_route

    cpu = {"transfers": "none: on a CPU the host is the device", "simulated_host_peak": 180}
    warning = get_route("offload").over_budget(1180, 1000, cpu)
    assert "stayed" in warning and "1.18x the budget" in warning and "1.00x" in warning
    assert "kernel" not in warning  # the budget plus what stayed explains it
    assert get_route("offload").over_budget(1000, 1000, cpu) is None
