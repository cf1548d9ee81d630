"""``python -m remat_core trace`` through a subprocess: zoo models, files, user factories, failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from remat_core import checkpoint_all_peak, load_graph

from test_import import onnx_mismatched_matmul, onnx_mlp

REPO = Path(__file__).resolve().parents[1]


def run(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "remat_core", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


USER_MODELS = '''
    import torch
    from torch import nn


    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            h = self.proj(x)
            return h if h.mean() > 0 else -h


    def good(batch_size=3, width=8):
        return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2)), (torch.randn(batch_size, 4),)


    def gated():
        return nn.Sequential(Gated()), torch.randn(2, 4)


    def not_a_pair():
        return 42


    class Typo(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x).transpose_all()


    def typo():
        return nn.Sequential(Typo()), torch.randn(2, 4)


    def broken():
        return 1 / 0


    def bad_layer():
        return torch.nn.Linear(-4, 2), (torch.randn(3, 4),)


    def mismatched():
        return nn.Sequential(nn.Linear(4, 4), nn.Linear(3, 2)), torch.randn(2, 4)
'''


@pytest.fixture
def user_package(tmp_path):
    (tmp_path / "my_models.py").write_text(textwrap.dedent(USER_MODELS))
    (tmp_path / "fails_on_import.py").write_text("import torch\n\nSCALE = undefined_name\n")
    return tmp_path


def test_trace_a_zoo_model_at_both_levels(tmp_path):
    target = tmp_path / "mlp.json"
    out = run("trace", "mlp", "--batch", "4", "--option", "depth=2", "--option", "width=16", "-o", target)
    assert out.returncode == 0, out.stderr
    graph = load_graph(target)
    assert graph.name == "mlp (batch_size=4, depth=2, width=16)"
    assert {n.kind for n in graph.nodes} >= {"param", "input", "forward", "loss", "backward"}
    assert "wrote" in out.stderr and "checkpoint-all peak" in out.stderr
    info = json.loads(run("info", target).stdout)
    assert info["checkpoint_all_peak"] == checkpoint_all_peak(graph)
    coarse = tmp_path / "mlp-module.json"
    out = run("trace", "mlp", "--batch", "4", "--option", "depth=2", "--level", "module", "--cost", "unit",
              "-o", coarse)
    assert out.returncode == 0, out.stderr
    assert "layers.0:fwd" in load_graph(coarse)


def test_trace_an_onnx_file_with_and_without_backward(tmp_path):
    model = tmp_path / "mlp.onnx"
    model.write_bytes(onnx_mlp())
    out = run("trace", model, "--batch", "4", "-o", tmp_path / "train.json")
    assert out.returncode == 0, out.stderr
    assert len(load_graph(tmp_path / "train.json").outputs) == 4
    out = run("trace", model, "--batch", "4", "--forward-only", "-o", tmp_path / "fwd.json")
    assert out.returncode == 0, out.stderr
    assert {n.kind for n in load_graph(tmp_path / "fwd.json").nodes} == {"param", "buffer", "input", "forward"}


def test_trace_a_user_factory(user_package):
    out = run("trace", "--model", "my_models:good", "--batch", "5", "--option", "width=6", "-o", "g.json",
              cwd=user_package)
    assert out.returncode == 0, out.stderr
    graph = load_graph(user_package / "g.json")
    assert graph.name == "my_models:good" and graph.node("primals_5").shape == (5, 4)


def test_a_tracing_failure_exits_2_naming_model_module_and_hint(user_package):
    out = run("trace", "--model", "my_models:gated", "-o", "g.json", cwd=user_package)
    assert out.returncode == 2
    assert "cannot trace my_models:gated in module '0'" in out.stderr
    assert "hint:" in out.stderr and "torch.where" in out.stderr and "Traceback" not in out.stderr
    assert not (user_package / "g.json").exists()
    debug = run("trace", "--model", "my_models:gated", "-o", "g.json", "--debug", cwd=user_package)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


@pytest.mark.parametrize("args,message", [
    (["trace", "resnet51", "-o", "g.json"], "cannot trace resnet51: not a zoo model, an .onnx file or a .pt2 file"),
    (["trace", "mlp"], "no output file"),
    (["trace", "mlp", "--option", "depth=0", "-o", "g.json"], "depth=0 is out of range"),
    (["trace", "--model", "my_models:not_a_pair", "-o", "g.json"], "not (module, example_inputs[, loss[, targets]])"),
    (["trace", "--model", "no_such_module:f", "-o", "g.json"], "cannot import no_such_module"),
    (["trace", "missing.pt2", "-o", "g.json"], "file not found"),
    (["trace", "--model", "fails_on_import:f", "-o", "g.json"],
     "importing fails_on_import failed (NameError: name 'undefined_name' is not defined, at "),
    (["trace", "--model", "my_models:broken", "-o", "g.json"],
     "the factory failed (ZeroDivisionError: division by zero"),
    (["trace", "--model", "my_models:typo", "-o", "g.json"],
     "cannot trace my_models:typo in module '0': AttributeError: 'FunctionalTensor' object has no attribute "
     "'transpose_all' (raised at "),
    # torch's own log of the failed meta kernel (a traceback) stays off stderr; its op is named
    (["trace", "--model", "my_models:mismatched", "-o", "g.json"],
     "cannot trace my_models:mismatched in module '1' at op aten.mm.default: RuntimeError: "),
])
def test_bad_input_exits_2_with_a_message(user_package, args, message):
    out = run(*args, cwd=user_package)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr


def test_a_factory_failing_inside_torch_names_the_users_line(user_package):
    out = run("trace", "--model", "my_models:bad_layer", "-o", "g.json", cwd=user_package)
    assert out.returncode == 2 and "negative dimension -4" in out.stderr
    assert re.search(r", at \S*my_models\.py:\d+\)", out.stderr) and "site-packages" not in out.stderr


def test_an_onnx_failure_names_the_file_the_op_and_a_hint(tmp_path):
    model = tmp_path / "bad.onnx"
    model.write_bytes(onnx_mismatched_matmul())
    out = run("trace", model, "-o", tmp_path / "g.json")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"cannot trace {model} at op /fc/MatMul (MatMul): ONNX shape inference failed" in out.stderr
    assert "\nhint: check the model with onnx.checker" in out.stderr


def test_list_shows_every_zoo_model_and_its_options():
    out = run("trace", "--list")
    assert out.returncode == 0
    assert "gpt2" in out.stdout and "124,439,808" in out.stdout and "seq_len=128 [1..1024]" in out.stdout
