"""A SAC plan shipped as plain PyTorch: ``export_policy`` and ``python -m remat_core policy``.

The exported file is run on the user's own module (its own forward, not our traced program), in a subprocess
where ``remat_core`` cannot be imported: it gives eager's gradients; in this process the one meter holds its peak
to the plan's prediction.
"""

import importlib.util
import subprocess
import sys
import sysconfig
import textwrap

import pytest
import torch

from remat_core import checkpoint_all_peak, rematerialize, solve
from remat_core.errors import ExecutionError, NotModuleBounded
from remat_core.frontends import build_model, trace_training_graph
from remat_core.run.measure import measure_step
from remat_core.run.policy_export import export_policy

MODELS = {
    "blocks": '''
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.norm = nn.LayerNorm(width)
                self.up = nn.Linear(width, 4 * width)
                self.act = nn.ReLU(inplace=True)
                self.down = nn.Linear(4 * width, width)

            def forward(self, x):
                return x + self.down(self.act(self.up(self.norm(x))))

        class Net(nn.Module):
            def __init__(self, width=64, depth=6):
                super().__init__()
                self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
                self.head = nn.Linear(width, 10)

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return self.head(x)

        def build():
            torch.manual_seed(0)
            return Net(), (torch.randn(16, 32, 64),)

        def loss(out):
            return out.square().mean()
    ''',
    "hf-llama": '''
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        def build():
            torch.manual_seed(0)
            config = LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                 attn_implementation="sdpa")
            model = LlamaForCausalLM(config)
            model.train()
            return model, (torch.randint(0, 500, (2, 128)),)

        def loss(out):
            return out.logits.float().square().mean()
    ''',
}

CHILD = '''
import importlib.util, sys
sys.path.append(sys.argv[3])  # site-packages, without its .pth files (this project's editable install is one)
assert importlib.util.find_spec("remat_core") is None, "remat_core is importable"
sys.path.insert(0, sys.argv[1])
import torch
import model_def

spec = importlib.util.spec_from_file_location("policy", sys.argv[2])
policy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy)
model, inputs = model_def.build()

def gradients():
    model.zero_grad()
    torch.manual_seed(1)
    model_def.loss(model(*inputs)).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

eager = gradients()
assert policy.apply(model) is model
planned = gradients()
policy.remove(model)
for name, grad in eager.items():
    torch.testing.assert_close(planned[name], grad, atol=1e-5, rtol=1e-4, msg=name)
print("ok", len(policy.REGIONS), policy.PREDICTED_PEAK_BYTES)
'''


def model_def(tmp_path, name):
    if name.startswith("hf-"):
        pytest.importorskip("transformers")
    (tmp_path / "model_def.py").write_text(textwrap.dedent(MODELS[name]))
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location(f"model_def_{name.replace('-', '_')}", tmp_path / "model_def.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tmp_path))
    return module


def load(path):
    spec = importlib.util.spec_from_file_location("exported_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_exported_policy_runs_without_remat_core_and_holds_its_predicted_peak(tmp_path, name):
    definition = model_def(tmp_path, name)
    model, inputs = definition.build()
    remat = rematerialize(model, inputs, budget="93%", loss=definition.loss, store=None)
    assert remat.on_modules is not None, "the SAC planner's plan runs on the model's own modules"
    path = remat.export_policy(tmp_path / "policy.py")
    text = path.read_text()
    assert "import remat_core" not in text and "from remat_core" not in text
    assert "Predicted peak" in text and "Made for" in text

    policy = load(path)
    assert policy.REGIONS, "the plan checkpoints something at this budget"
    assert policy.PREDICTED_PEAK_BYTES == remat.promised_peak <= remat.budget

    def step():
        torch.manual_seed(1)
        definition.loss(model(*inputs)).backward()

    eager = measure_step(step, model, torch.device("cpu"), warm_up=True)
    policy.apply(model)
    try:
        measured = measure_step(step, model, torch.device("cpu"), warm_up=True)
    finally:
        policy.remove(model)
    # the model's own step holds what the traced one does give or take eager's own difference from the trace (a
    # kernel's temporaries), which the plan's prediction cannot see: that difference, then 5%
    traced_eager = checkpoint_all_peak(remat.graph) - remat.graph.pinned_bytes
    assert measured.peak == pytest.approx(policy.PREDICTED_ACTIVATION_BYTES + eager.peak - traced_eager, rel=0.05)
    assert measured.peak < eager.peak

    child = tmp_path / "child.py"
    child.write_text(CHILD)
    done = subprocess.run([sys.executable, "-I", "-S", str(child), str(tmp_path), str(path),
                           sysconfig.get_paths()["purelib"]], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")


def test_a_policy_is_refused_for_a_model_it_was_not_made_for(tmp_path):
    definition = model_def(tmp_path, "blocks")
    model, inputs = definition.build()
    remat = rematerialize(model, inputs, budget="93%", loss=definition.loss, store=None)
    policy = load(remat.export_policy(tmp_path / "policy.py"))
    with pytest.raises(ValueError, match="does not have: the plan was made for another model"):
        policy.apply(torch.nn.Sequential(torch.nn.Linear(3, 3)))
    policy.apply(model)
    try:
        with pytest.raises(ValueError, match="already installed"):
            policy.apply(model)
    finally:
        policy.remove(model)
    assert not any("forward" in vars(m) for m in model.modules()), "remove puts the class's forwards back"


def traced_blocks(tmp_path):
    definition = model_def(tmp_path, "blocks")
    model, inputs = definition.build()
    return trace_training_graph(model, inputs, definition.loss, cost="unit")


def everything(graph):
    return sum(node.mem for node in graph.nodes)


def test_a_plan_not_at_module_calls_is_refused_offering_the_nearest_that_is(tmp_path):
    graph = traced_blocks(tmp_path)
    budget = int(everything(graph) * 0.6)
    schedule = solve(graph, budget, "chen-greedy")
    nearest = solve(graph, budget, "sac-planner")
    with pytest.raises(NotModuleBounded, match="single tensors, not checkpoint regions.*nearest plan at module "
                                               "boundaries .sac-planner at the same budget. peaks at"):
        export_policy(graph, schedule, tmp_path / "policy.py", budget=budget, promised_peak=budget,
                      nearest=lambda: nearest)
    assert not (tmp_path / "policy.py").exists()


def test_a_per_layer_plan_exports_as_hugging_faces_and_torchtitans_settings():
    pytest.importorskip("transformers")
    built = build_model("hf-llama", batch_size=2, seq_len=32, layers=4, hidden=64, heads=2, kv_heads=1)
    graph = trace_training_graph(built.module, built.example_inputs, lambda out: out.logits.float().mean(), cost="unit")
    every = solve(graph, everything(graph), "hf-checkpointing", every=2)
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as folder:
        hf = export_policy(graph, every, Path(folder) / "hf.py", budget=everything(graph),
                           promised_peak=every.stats["peak"], format="hf").read_text()
        titan = export_policy(graph, every, Path(folder) / "titan.toml", budget=everything(graph),
                              promised_peak=every.stats["peak"], format="torchtitan").read_text()
        assert "every_n_layers=2" in hf and "use_reentrant': False" in hf
        assert '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "2"' in titan
        op_policy = solve(graph, everything(graph), "torchtitan-sac")
        titan_op = export_policy(graph, op_policy, Path(folder) / "op.toml", budget=everything(graph),
                                 promised_peak=op_policy.stats["peak"], format="torchtitan").read_text()
        assert 'selective_ac_option = "op"' in titan_op
        with pytest.raises(ExecutionError, match="not Hugging Face's: it saves ops inside its regions"):
            export_policy(graph, op_policy, Path(folder) / "no.py", budget=everything(graph),
                          promised_peak=op_policy.stats["peak"], format="hf")


def test_the_policy_command_writes_a_torch_only_file(tmp_path):
    out = tmp_path / "policy.py"
    done = subprocess.run([sys.executable, "-m", "remat_core", "policy", "hf-gpt2", "--option", "layers=2", "--option", "hidden=64",
                           "--option", "seq_len=32", "--budget", "95%", "-o", str(out), "--no-store"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"wrote {out} (torch)" in done.stdout and "predicted peak" in done.stdout
    assert "def apply(model" in out.read_text()
    refused = subprocess.run([sys.executable, "-m", "remat_core", "policy", "resnet18", "--batch", "2",
                              "--option", "image_size=32", "--budget", "100%", "-o", str(tmp_path / "hf.py"),
                              "--format", "hf", "--no-store"], capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "export it as format='torch'" in refused.stderr
