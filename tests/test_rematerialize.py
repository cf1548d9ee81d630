"""``from remat_core import rematerialize``: a drop-in module that trains with the plan."""

import pytest
import torch
from tiny_models import residual_mlp
from torch import nn
from torch.nn import functional as F

from remat_core import InfeasibleBudget, TraceError, rematerialize
from remat_core.frontends.losses import cross_entropy
from remat_core.errors import ExecutionError
from remat_core.run.measure import measure_step


def model_and_inputs(batch=32, tokens=16):
    """Twelve residual blocks (LayerNorm, Linear, GELU, Linear) with a ten-way head."""
    return residual_mlp(width=64, depth=12, outputs=10, batch=batch, tokens=tokens)


@pytest.fixture(scope="module")
def twelve_blocks():
    model, x = model_and_inputs()
    return model, x, rematerialize(model, x, budget="50%", solver="rotor")


def test_outputs_and_gradients_are_the_originals(twelve_blocks):
    model, x, remat = twelve_blocks
    model.zero_grad()
    expected = model(x)
    expected.square().mean().backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    got = remat(x)
    got.square().mean().backward()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, reference[name], atol=1e-5, rtol=1e-4)
    assert list(remat.parameters()) == list(model.parameters())


def test_the_training_peak_is_the_promised_one_within_the_budget_and_under_three_quarters_of_eagers(twelve_blocks):
    """The promise is SAC's own peak with the plan (regions recomputing in one run), planned to fit the budget."""
    model, x, remat = twelve_blocks
    eager = measure_step(lambda: model(x).sum().backward(), model, torch.device("cpu"))
    planned = measure_step(lambda: remat(x).sum().backward(), model, torch.device("cpu"))
    promised = remat.promised_peak - remat.graph.pinned_bytes
    assert planned.peak <= 0.75 * eager.peak
    assert abs(planned.peak / promised - 1) <= 0.10
    assert remat.promised_peak <= remat.budget and remat.schedule.budget <= remat.budget
    assert remat.program.checkpointed_regions > 0


def test_an_optimizer_step_trains_the_original(twelve_blocks):
    model, x, remat = twelve_blocks
    optimizer = torch.optim.SGD(remat.parameters(), lr=0.1)
    before = model.head.weight.detach().clone()
    remat(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
    assert not torch.equal(model.head.weight, before)


def test_batch_norm_and_a_loss_with_targets():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                          nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 5))
    x, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    remat = rematerialize(model, x, budget="93%", solver="dtr", loss=cross_entropy(labels))
    assert remat.schedule.stats["recomputes"] > 0
    F.cross_entropy(remat(x), labels).backward()
    planned = {n: p.grad.clone() for n, p in model.named_parameters()}
    stats = model[1].running_mean.clone()
    model.load_state_dict(state)
    model.zero_grad()
    F.cross_entropy(model(x), labels).backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(planned[name], parameter.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(stats, model[1].running_mean)  # running statistics updated as eager does


def test_a_recomputed_dropout_draws_the_forwards_mask_and_leaves_the_rng_as_eager_does():
    """Each region restores the RNG state its random ops drew from when it recomputes them, and puts the RNG back
    after: the masks and gradients are eager's, and so is what the program draws next."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 256), nn.Dropout(0.3),
                          nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 2))
    x = torch.randn(1024, 32)
    remat = rematerialize(model, x, budget="75%", solver="rotor", via="sac")
    results = []
    for run in (model, remat):
        model.zero_grad()
        torch.manual_seed(1)
        run(x).square().mean().backward()
        results.append(({n: p.grad.clone() for n, p in model.named_parameters()}, torch.rand(4)))
    (eager, eager_next), (planned, planned_next) = results
    assert remat.schedule.stats["recomputes"] > 0
    for name in eager:
        torch.testing.assert_close(planned[name], eager[name], atol=1e-5, rtol=1e-4)
    assert torch.equal(planned_next, eager_next)


def test_evaluation_runs_the_original_module(twelve_blocks):
    model, x, remat = twelve_blocks
    with torch.no_grad():
        torch.testing.assert_close(remat(x), model(x))
    remat.eval()
    try:
        assert torch.equal(remat(x), model(x))
    finally:
        remat.train()


def test_other_input_shapes_are_refused_with_the_planned_ones(twelve_blocks):
    _, x, remat = twelve_blocks
    with pytest.raises(ValueError, match=r"made for inputs \(\[32, 16, 64\] float32 on cpu\).*\[8, 16, 64\]"):
        remat(x[:8])


def test_a_budget_below_the_lower_bound_names_the_bound():
    model, x = model_and_inputs(batch=8, tokens=8)
    with pytest.raises(InfeasibleBudget, match="below the lower bound of"):
        rematerialize(model, x, budget="1%")


def test_a_model_that_cannot_be_traced_names_the_op_and_module():
    class DataDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(4, 4)

        def forward(self, x):
            y = self.gate(x)
            return y[y > 0].sum()

    with pytest.raises(TraceError) as error:
        rematerialize(DataDependent(), torch.randn(2, 4))
    message = str(error.value)
    assert "DataDependent" in message and "nonzero" in message


def test_the_output_the_caller_holds_is_held_by_every_plan():
    """The caller holds the model's output through the backward (``out = remat(x); loss(out).backward()``): the
    traced step's end reads it, so no plan frees it and nothing the plan frees stays alive."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4096))
    x, labels = torch.randn(64, 16), torch.randint(0, 4096, (64,))
    remat = rematerialize(model, x, budget="100%", solver="checkpoint-all", loss=cross_entropy(labels))
    logits = next(n for n in remat.graph.nodes if n.kind == "forward" and n.mem == 64 * 4096 * 4)
    assert logits.id in remat.graph.preds("step_end")
    assert not remat.program.uncontrolled


def test_an_unknown_way_to_install_the_plan_is_refused():
    model, x = model_and_inputs(batch=4, tokens=4)
    with pytest.raises(ExecutionError, match="'sac' or 'compile'"):
        rematerialize(model, x, via="plan")


@pytest.mark.slow
def test_the_compiled_drop_in_module_trains_like_the_original():
    model, x = residual_mlp(width=32, depth=3, batch=16, tokens=8)
    remat = rematerialize(model, x, budget="70%", via="compile")
    for _ in range(2):  # the first call compiles, the second runs the compiled step
        model.zero_grad()
        got = remat(x)
        got.sum().backward()
        planned = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    scale = max(p.grad.abs().max() for p in model.parameters())
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(planned[name], parameter.grad, atol=1e-4 * float(scale), rtol=1e-4)
