"""Every loss form a training loop writes, in ``rematerialize`` as on the command line; a saved plan; keyword inputs.

Each form is checked on a zoo model and on a Hugging Face model built from its config: the drop-in module's
gradients are the eager step's with the same loss.
"""

import json

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from remat_core import rematerialize
from remat_core.errors import ExecutionError, TraceError
from remat_core.frontends import LossSetup, build_model
from tiny_models import residual_mlp


def mlp():
    """Four residual blocks over tokens with a ten-way head; its output is the logits."""
    return residual_mlp(width=64, depth=4, outputs=10, batch=16, tokens=8)


def llama():
    """A Hugging Face Llama built from its config (two layers); its output is a ``ModelOutput``."""
    pytest.importorskip("transformers")
    built = build_model("hf-llama", batch_size=2, seq_len=64, layers=2, hidden=64, heads=2, kv_heads=1)
    return built.module, built.example_inputs[0]


def logits_of(out):
    return out.logits if hasattr(out, "logits") else out


def eager_gradients(model, ids, loss_of):
    model.zero_grad()
    loss_of(model(ids)).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return grads


def planned_gradients(remat, model, ids, loss_of):
    model.zero_grad()
    loss_of(remat(ids)).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return grads


def assert_same(expected, got):
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], atol=1e-4, rtol=1e-4, msg=name)


def loss_forms(labels):
    """``(name, rematerialize's keyword arguments, the loss of an output as the training loop computes it)``."""
    def flat(out):
        return logits_of(out).reshape(-1, logits_of(out).shape[-1])

    def with_targets(out, y):
        return F.cross_entropy(flat(out), y.reshape(-1))

    class OnLogits(nn.Module):
        def forward(self, out, y):
            return F.cross_entropy(flat(out), y.reshape(-1))

    closure = lambda out: F.cross_entropy(flat(out), labels.reshape(-1))  # noqa: E731 - the form users write
    return [("closure over the labels", {"loss": closure}, closure),
            ("loss(out, *targets)", {"loss": with_targets, "targets": labels}, lambda out: with_targets(out, labels)),
            ("nn loss module", {"loss": OnLogits(), "targets": (labels,)}, lambda out: with_targets(out, labels)),
            ("LossSetup", {"loss": LossSetup("ce", with_targets, (labels,))}, lambda out: with_targets(out, labels))]


@pytest.mark.parametrize("build", [mlp, llama], ids=["zoo mlp", "hf llama"])
@pytest.mark.parametrize("form", range(4), ids=["closure", "targets", "module", "LossSetup"])
def test_every_loss_form_plans_and_gives_eagers_gradients(build, form, tmp_path):
    model, ids = build()
    logits = logits_of(model(ids)).detach()
    labels = torch.randint(0, logits.shape[-1], logits.shape[:-1], generator=torch.Generator().manual_seed(1))
    name, arguments, loss_of = loss_forms(labels)[form]
    expected = eager_gradients(model, ids, loss_of)
    remat = rematerialize(model, ids, budget="90%", store=None, **arguments)
    assert remat.program.checkpointed_regions > 0
    assert_same(expected, planned_gradients(remat, model, ids, loss_of))


def test_a_model_output_whose_loss_reads_out_loss():
    model, ids = llama()
    labels = ids.clone()
    model.zero_grad()
    model(input_ids=ids, labels=labels).loss.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    remat = rematerialize(model, {"input_ids": ids, "labels": labels}, budget="90%", loss=lambda out: out.loss,
                          store=None)
    remat(input_ids=ids, labels=labels).loss.backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert_same(expected, got)
    with pytest.raises(ValueError, match="by keyword"):
        remat(ids, labels)


def test_a_loss_in_no_known_form_is_refused_with_the_forms_that_work():
    model, ids = mlp()
    with pytest.raises(TraceError, match="LossSetup"):
        rematerialize(model, ids, loss=3, store=None)


def test_a_saved_plan_is_read_back_and_refused_for_another_graph(tmp_path):
    model, ids = mlp()
    path = tmp_path / "plan.json"
    first = rematerialize(model, ids, budget="90%", plan=path, store=None)
    saved = json.loads(path.read_text())
    assert saved["format"] == "remat-plan" and saved["route"] == "sac"
    again = rematerialize(model, ids, budget="90%", plan=path, store=None)
    assert again.schedule.ops == first.schedule.ops and again.promised_peak == first.promised_peak
    with pytest.raises(ExecutionError, match="budget"):
        rematerialize(model, ids, budget="95%", plan=path, store=None)
    with pytest.raises(ExecutionError, match="sizes"):  # another batch: the same ops on other shapes
        rematerialize(model, torch.randn(32, *ids.shape[1:]), budget="90%", plan=path, store=None)


def test_a_second_start_finds_the_plan_in_the_results_store(tmp_path):
    from remat_core.store import ResultStore

    model, ids = mlp()
    store = ResultStore(tmp_path / "results.sqlite")
    first = rematerialize(model, ids, budget="90%", store=store)
    again = rematerialize(model, ids, budget="90%", store=store)
    assert again.schedule.solver_info.get("from_store") and again.schedule.ops == first.schedule.ops
