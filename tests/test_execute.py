"""The executor: schedules run on real tensors give the real gradients, and the real memory is the simulator's."""

import json
import subprocess
import sys

import pytest
from recompute_fixture import recompute_on_demand
import torch
from tiny_models import small_cnn, tiny_attention
from torch import nn

from remat_core import ComputeGraph, InvalidSchedule, checkpoint_all_peak, load_graph, save_graph, simulate, solve
from remat_core.frontends.trace import trace_training_graph
from remat_core.errors import ExecutionError
from remat_core.frontends import with_model_of
from remat_core.run.executor import execute, gradient_difference, reference_gradients
from remat_core.run.tensor_check import check_on_tensors
from remat_core.schedule import checkpoint_all_ops, memory_lower_bound


def test_checkpoint_all_gives_eager_autograds_gradients():
    module, inputs, loss = small_cnn()
    graph = trace_training_graph(module, inputs, loss)
    result = execute(graph, checkpoint_all_ops(graph)[0])
    module.zero_grad()
    value = loss.fn(module(*inputs), *loss.targets)
    value.backward()
    assert result.loss == pytest.approx(value.item(), rel=1e-5)
    for name, parameter in module.named_parameters():
        torch.testing.assert_close(result.gradients[name], parameter.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("level", ["op", "module"])
def test_real_memory_equals_simulated_memory_at_every_step(level):
    module, inputs, loss = small_cnn()
    graph = trace_training_graph(module, inputs, loss, level=level)
    result = execute(graph, checkpoint_all_ops(graph)[0])
    assert result.memory == result.simulated_memory
    assert result.peak == result.simulated_peak
    if level == "op":  # the bytes held between ops; the peak adds what each op's kernel holds while it runs
        during = simulate(graph, checkpoint_all_ops(graph)[0])
        assert checkpoint_all_peak(graph) == max(m + t for m, t in zip(during.memory, during.transient)) > result.peak


@pytest.mark.parametrize("model", [small_cnn, tiny_attention])
def test_recomputation_reproduces_the_gradients(model):
    module, inputs, loss = model()
    graph = trace_training_graph(module, inputs, loss)
    ops = recompute_on_demand(graph)
    sim = simulate(graph, ops)
    assert sim.recomputes > len(graph) // 2
    result = execute(graph, ops)
    assert result.memory == result.simulated_memory == sim.memory
    assert gradient_difference(result.gradients, reference_gradients(graph)) < 1e-5


class DropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 16), nn.Dropout(0.3),
                                  nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def test_recomputed_dropout_draws_the_same_mask():
    torch.manual_seed(1)
    module = DropoutNet().train()
    graph = trace_training_graph(module, torch.randn(8, 6))
    state = torch.get_rng_state()
    reference = reference_gradients(graph, seed=3)
    again = execute(graph, recompute_on_demand(graph), seed=3).gradients
    assert torch.equal(state, torch.get_rng_state())  # the caller's RNG is left alone
    assert gradient_difference(again, reference) < 1e-6
    other_seed = reference_gradients(graph, seed=4)
    assert gradient_difference(other_seed, reference) > 0  # the masks really are random


def test_a_graph_from_a_file_cannot_be_executed(tmp_path):
    module, inputs, loss = small_cnn()
    graph = trace_training_graph(module, inputs, loss)
    save_graph(graph, tmp_path / "g.json")
    loaded = load_graph(tmp_path / "g.json")
    assert graph.attachments.executable and not loaded.attachments.executable
    with pytest.raises(ExecutionError, match="not traced from a PyTorch model"):
        execute(loaded, checkpoint_all_ops(loaded)[0])


@pytest.mark.parametrize("level", ["op", "module"])
def test_schedule_memory_is_the_simulators_after_every_op_of_the_schedule(level):
    module, inputs, loss = small_cnn()
    graph = trace_training_graph(module, inputs, loss, level=level)
    ops = recompute_on_demand(graph)
    result = execute(graph, ops)
    assert len(result.schedule_memory) == len(ops)
    assert result.schedule_memory == simulate(graph, ops).memory
    if level == "op":
        assert result.schedule_memory == result.memory
    else:
        assert len(result.memory) > len(ops)  # every group op ran its members one by one


def test_the_model_traced_again_runs_the_graph_read_back_from_json():
    module, inputs, loss = small_cnn()
    traced = trace_training_graph(module, inputs, loss, level="module")
    from_json = ComputeGraph.from_json(traced.to_json())
    assert with_model_of(from_json, traced) is traced  # the same graph: nothing to rebuild
    costed = ComputeGraph.from_json({**traced.to_json(), "nodes": [{**n.to_json(), "cost": 1.0}
                                                                   for n in traced.nodes]})
    attached = with_model_of(costed, traced)
    assert attached.content_hash == costed.content_hash and attached.attachments.executable
    assert check_on_tensors(attached, solve(attached, checkpoint_all_peak(attached), "dtr")).gradients_match


def test_a_different_graph_does_not_get_the_model():
    module, inputs, loss = small_cnn()
    traced = trace_training_graph(module, inputs, loss)
    resized = ComputeGraph.from_json({**traced.to_json(), "nodes": [{**n.to_json(), "mem": n.mem + 1}
                                                                    for n in traced.nodes]})
    with pytest.raises(ExecutionError, match="differs .* in its sizes"):
        with_model_of(resized, traced)
    with pytest.raises(ExecutionError, match="no traced model"):
        with_model_of(traced, resized)


@pytest.mark.parametrize("model", [small_cnn, tiny_attention])
def test_a_recomputing_schedule_checks_out_on_real_tensors(model):
    module, inputs, loss = model()
    graph = trace_training_graph(module, inputs, loss)
    budget = memory_lower_bound(graph) + (checkpoint_all_peak(graph) - memory_lower_bound(graph)) // 3
    schedule = solve(graph, budget, "lifetime-split")
    assert schedule.stats["recomputes"] > 0
    check = check_on_tensors(graph, schedule)
    assert check.gradients_match and check.max_gradient > 0
    assert check.measured_memory == check.simulated_memory == schedule.simulation.memory and check.memory_gap == 0
    assert check.measured_peak == check.simulated_peak <= schedule.stats["peak"] <= budget  # the peak adds kernels' bytes
    assert check.memory_matches_simulator and set(check.summary()) >= {"gradients_match", "measured_peak"}



def test_invalid_schedule_is_refused_before_running():
    module, inputs, loss = small_cnn()
    graph = trace_training_graph(module, inputs, loss)
    ops = checkpoint_all_ops(graph)[0]
    with pytest.raises(InvalidSchedule):
        execute(graph, ops[1:])


def test_execute_cli():
    out = subprocess.run([sys.executable, "-m", "remat_core", "execute", "mlp", "--batch", "4", "--budget", "100%",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["via"] == "plan" and report["gradients_equal"] is True
    assert report["details"]["memory_matches_simulator"] is True
    assert report["details"]["held_peak"] == report["simulated_peak"]
    assert 0.5 < report["held_of_budget"] <= 1.05  # the weights and inputs included, within the promised 5%


def test_execute_warns_when_a_step_holds_more_than_its_budget_and_says_why():
    from remat_core.run import get_route
    assert get_route("plan").over_budget(1_040_000, 1_000_000, {}) is None  # within the 5% a budget allows
    warning = get_route("compile").over_budget(1_392_000, 1_000_000, {})
    assert "1.39x the budget" in warning and "Inductor" in warning and "--via plan or sac" in warning
    assert "kernel" in get_route("plan").over_budget(1_200_000, 1_000_000, {})
