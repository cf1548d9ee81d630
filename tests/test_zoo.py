"""The model zoo: published parameter counts, declared options, deterministic builds."""

from __future__ import annotations

import pytest
import torch

from remat_core.errors import ZooError
from remat_core.frontends.zoo import REGISTRY, build_model, get_spec, list_models, param_count
from remat_core.frontends.zoo._spec import OPTION_ROLES

PUBLISHED_PARAMS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "mobilenet_v2": 3_504_872,
    "densenet121": 7_978_856,
    "gpt2": 124_439_808,
    "inception": 6_624_904,          # torchvision googlenet, aux_logits=False
    "transformer": 109_483_778,      # HF BertForSequenceClassification(bert-base, num_labels=2)
}
GPT2_BLOCK = BERT_LAYER = 7_087_872   # both: 4 LayerNorm vectors, QKV, attention out, 768x3072 MLP


def unet_param_count() -> int:
    """Ronneberger et al. 2015, Fig. 1, layer by layer: 3x3 convs, 2x2 up-convs, a 1x1 classifier."""
    def conv(k, cin, cout):
        return k * k * cin * cout + cout
    widths = [64, 128, 256, 512, 1024]
    total = conv(3, 1, 64) + conv(3, 64, 64)
    for a, b in zip(widths, widths[1:]):
        total += conv(3, a, b) + conv(3, b, b)
    for a, b in zip(reversed(widths[1:]), reversed(widths[:-1])):
        total += conv(2, a, b) + conv(3, a, b) + conv(3, b, b)
    return total + conv(1, 64, 2)


def test_the_zoo_has_every_model_the_issue_names():
    assert set(list_models()) == {"mlp", "vgg16", "resnet18", "resnet50", "mobilenet_v2", "densenet121", "unet",
                                  "inception", "transformer", "gpt2", "graphsage", "gcn", "gat", "hf-llama", "hf-gpt2",
                                  "hf-bert", "hf-vit", "hf-t5"}


@pytest.mark.parametrize("name", ["hf-llama", "hf-gpt2", "hf-bert", "hf-vit", "hf-t5"])
def test_hugging_face_models_are_built_from_their_configs_at_the_declared_size(name):
    import transformers

    model = build_model(name, device="meta")
    assert isinstance(model.module, transformers.PreTrainedModel)
    assert param_count(model.module) == get_spec(name).reference_params
    wider = build_model(name, device="meta", layers=1, hidden=64, heads=2)
    assert param_count(wider.module) < param_count(model.module)


def test_hugging_face_sizes_that_do_not_fit_say_what_would():
    with pytest.raises(ZooError, match="hidden=100 is not a multiple of heads=6"):
        build_model("hf-llama", hidden=100, device="meta")
    with pytest.raises(ZooError, match="heads=6 is not a multiple of kv_heads=4"):
        build_model("hf-llama", kv_heads=4, device="meta")


def test_gnn_counts_follow_their_layers():
    """Against torch_geometric's layers' counts: SAGEConv(lin_l with bias, lin_r without), GCNConv (one linear with
    bias), GATConv (linear without bias, att_src and att_dst of heads x channels; the bias left out here)."""
    assert param_count(build_model("graphsage", features=10, width=7, depth=3, device="meta").module) == \
        (2 * 10 * 7 + 7) + (2 * 7 * 7 + 7) + (2 * 7 * 16 + 16)
    assert param_count(build_model("gcn", features=10, width=7, depth=2, device="meta").module) == \
        (10 * 7 + 7) + (7 * 16 + 16)
    assert param_count(build_model("gat", features=10, width=8, heads=2, depth=2, device="meta").module) == \
        (10 * 2 * 4 + 2 * 2 * 4) + (8 * 1 * 16 + 2 * 16)


@pytest.mark.parametrize("name", ["graphsage", "gcn", "gat"])
def test_a_gnn_is_a_full_batch_step_on_a_seeded_graph(name):
    built = build_model(name, batch_size=400)
    again = build_model(name, batch_size=400)
    assert torch.equal(built.module.edges, again.module.edges)
    x, = built.example_inputs
    labels, = built.loss.targets
    assert x.shape[0] == labels.shape[0] == 400 and built.module.edges.max() < x.shape[0]
    out = built.module(x)
    assert out.shape == (x.shape[0], 16)
    built.loss.fn(out, labels).backward()
    assert all(p.grad is not None for p in built.module.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_count_equals_the_published_architecture(name):
    module = build_model(name, device="meta").module
    assert param_count(module) == PUBLISHED_PARAMS[name] == get_spec(name).reference_params


def test_unet_matches_the_papers_layer_list():
    assert param_count(build_model("unet", device="meta").module) == unet_param_count() == 31_030_658


def test_mlp_count_follows_its_closed_form():
    for depth, width in [(1, 8), (3, 1024), (5, 33)]:
        module = build_model("mlp", depth=depth, width=width, device="meta").module
        assert param_count(module) == 784 * width + width + (depth - 1) * (width * width + width) + 10 * width + 10
    assert get_spec("mlp").reference_params == 2_913_290


@pytest.mark.parametrize("name,full,per_layer", [("gpt2", 124_439_808, GPT2_BLOCK),
                                                  ("transformer", 109_483_778, BERT_LAYER)])
def test_depth_changes_the_count_by_whole_layers(name, full, per_layer):
    for depth in (1, 3):
        module = build_model(name, depth=depth, device="meta").module
        assert param_count(module) == full - (12 - depth) * per_layer


def test_gpt2_ties_its_embedding_and_head():
    module = build_model("gpt2", depth=1, device="meta").module
    assert module.lm_head.weight is module.wte.weight


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_option_is_declared_with_a_role_and_a_sane_range(name):
    spec = get_spec(name)
    assert spec.options[0].name == "batch_size"
    for opt in spec.options:
        assert opt.role in OPTION_ROLES
        assert opt.minimum <= opt.default <= opt.maximum and opt.default % opt.multiple_of == 0
    model = build_model(name, device="meta")
    assert dict(model.options) == dict(spec.defaults)
    first = next(iter(model.example_inputs.values())) if isinstance(model.example_inputs, dict) else \
        model.example_inputs[0]
    assert first.shape[0] == spec.defaults["batch_size"]
    assert model.module.training


def test_builds_are_deterministic_and_leave_the_global_rng_alone():
    before = torch.random.get_rng_state()
    a = build_model("resnet18", batch_size=2, image_size=32)
    b = build_model("resnet18", batch_size=2, image_size=32)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.equal(a.example_inputs[0], b.example_inputs[0])
    assert torch.equal(a.loss.targets[0], b.loss.targets[0])
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))
    c = build_model("resnet18", batch_size=2, image_size=32, seed=1)
    assert not torch.equal(a.module.conv1.weight, c.module.conv1.weight)


def test_batch_and_input_size_shape_the_inputs():
    model = build_model("gpt2", batch_size=3, seq_len=17, depth=1, device="meta")
    assert tuple(model.example_inputs[0].shape) == (3, 17)
    assert tuple(model.loss.targets[0].shape) == (3, 17)
    model = build_model("unet", batch_size=2, image_size=32, device="meta")
    assert tuple(model.example_inputs[0].shape) == (2, 1, 32, 32)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "densenet121", "inception", "vgg16", "unet"])
def test_small_inputs_run_forward(name):
    spec = get_spec(name)
    model = build_model(name, batch_size=2, image_size=spec.option("image_size").minimum, device="meta")
    out = model.forward()
    assert out.shape[0] == 2


@pytest.mark.parametrize("call,message", [
    (lambda: build_model("resnet51"), "unknown zoo model 'resnet51'; available: densenet121"),
    (lambda: build_model("resnet18", depth=3), "has no option 'depth'; its options are batch_size, image_size"),
    (lambda: build_model("resnet18", batch_size=0), "batch_size=0 is out of range; use 1..4096"),
    (lambda: build_model("unet", image_size=100), "a multiple of 16"),
    (lambda: build_model("gpt2", seq_len=2.5), "seq_len must be an integer"),
])
def test_bad_names_and_options_say_what_would_work(call, message):
    with pytest.raises(ZooError) as info:
        call()
    assert message in str(info.value)
