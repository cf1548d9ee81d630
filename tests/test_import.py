"""ONNX and torch.export (.pt2) import, on tiny models the tests build themselves."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from remat_core import checkpoint_all_peak, load_graph, simulate, solve
from remat_core.errors import GraphError, TraceError
from remat_core.frontends.onnx_import import load_onnx
from remat_core.frontends.pt2_import import load_pt2, parse_pt2
from remat_core.frontends.trace import trace_training_graph
from remat_core.graph.backward import with_backward
from remat_core.graph.cost_models import FLOPS_PER_BYTE
from remat_core.schedule import checkpoint_all_ops

from tiny_models import small_cnn


def _initializer(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_mlp(batch="N") -> bytes:
    """X[N,4] -Gemm-> H -Relu-> A -Reshape-> R -Gemm-> Y[N,3], weights as initializers."""
    rng = np.random.default_rng(0)
    inits = [_initializer("fc1.weight", rng.standard_normal((4, 8), dtype=np.float32)),
             _initializer("fc1.bias", np.zeros(8, np.float32)),
             _initializer("fc2.weight", rng.standard_normal((8, 3), dtype=np.float32)),
             _initializer("fc2.bias", np.zeros(3, np.float32)),
             _initializer("shape", np.array([-1, 8], np.int64))]
    nodes = [helper.make_node("Gemm", ["X", "fc1.weight", "fc1.bias"], ["H"], name="/fc1/Gemm"),
             helper.make_node("Relu", ["H"], ["A"], name="/act/Relu"),
             helper.make_node("Reshape", ["A", "shape"], ["R"], name="/Reshape"),
             helper.make_node("Gemm", ["R", "fc2.weight", "fc2.bias"], ["Y"], name="/fc2/Gemm")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def onnx_convnet() -> bytes:
    """Conv (3->4, 3x3, pad 1) on 1x3x8x8, Split into two halves, Add, Flatten, static shapes."""
    rng = np.random.default_rng(1)
    inits = [_initializer("conv.weight", rng.standard_normal((4, 3, 3, 3), dtype=np.float32)),
             _initializer("split", np.array([2, 2], np.int64))]
    nodes = [helper.make_node("Conv", ["X", "conv.weight"], ["C"], name="/conv/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Split", ["C", "split"], ["S0", "S1"], name="/Split", axis=1),
             helper.make_node("Add", ["S0", "S1"], ["Z"], name="/Add"),
             helper.make_node("Flatten", ["Z"], ["Y"], name="/Flatten")]
    graph = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 128])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_onnx_forward_graph_has_shapes_bytes_flops_and_no_alias_nodes():
    g = load_onnx(onnx_mlp(), batch_size=5, name="mlp")
    assert [n.id for n in g.nodes] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "shape", "X", "H", "A",
                                       "Y"]
    kinds = {n.id: n.kind for n in g.nodes}
    assert kinds["fc1.weight"] == "param" and kinds["shape"] == "buffer" and kinds["X"] == "input"
    assert g.node("H").mem == 5 * 8 * 4 and g.node("H").shape == (5, 8) and g.node("H").dtype == "float32"
    assert g.node("H").cost == 2 * 5 * 8 * 4 and g.node("Y").cost == 2 * 5 * 3 * 8
    assert g.node("A").cost == FLOPS_PER_BYTE * 2 * 160  # memory-bound: reads and writes 160 bytes
    assert set(g.preds("Y")) == {"A", "fc2.weight", "fc2.bias"}  # the Reshape reads through to A
    assert g.outputs == ("Y",) and g.node("H").module == "/fc1" and g.node("fc1.weight").module == "fc1"


def test_onnx_then_with_backward_is_a_valid_training_graph():
    g = with_backward(load_onnx(onnx_mlp(), batch_size=5))
    assert set(g.outputs) == {"fc1.weight:grad", "fc1.bias:grad", "fc2.weight:grad", "fc2.bias:grad"}
    assert "shape:grad" not in g  # integer constants are not trained
    simulate(g, checkpoint_all_ops(g, explain=False)[0])
    solve(g, checkpoint_all_peak(g), "checkpoint-all")


def test_onnx_multi_output_ops_and_conv_flops():
    g = load_onnx(onnx_convnet(), cost="flops")
    assert g.node("C").cost == 2 * (4 * 8 * 8) * (3 * 3 * 3)
    assert g.node("S0").mem == g.node("S1").mem == 2 * 8 * 8 * 4 and g.node("S0").label == "Split[0]"
    assert g.preds("S0") == g.preds("S1") == ("C", "split")
    assert g.outputs == ("Z",)  # Flatten aliases Z
    unit = load_onnx(onnx_convnet(), cost="unit")
    assert {n.cost for n in unit.nodes if not n.pinned} == {1.0}


def test_load_graph_reads_onnx_files(tmp_path):
    path = tmp_path / "convnet.onnx"
    path.write_bytes(onnx_convnet())
    g = load_graph(path)
    assert g.name == "convnet" and "C" in g


def test_symbolic_dims_take_values_by_name():
    g = load_onnx(onnx_mlp(batch="batch"), dims={"batch": 3})
    assert g.node("Y").shape == (3, 3)


@pytest.mark.parametrize("data,kwargs,message", [
    (onnx_mlp(), {}, "symbolic batch dimension 'N'\nhint: pass batch_size (CLI: --batch N)"),
    (b"not a protobuf at all", {}, "not an ONNX model"),
    (onnx_mlp(), {"batch_size": 0}, "must be a positive integer"),
    (onnx_mlp(), {"batch_size": 2, "cost": "measured"}, "unsupported cost model 'measured'\nhint: use one of"),
])
def test_onnx_bad_input(data, kwargs, message):
    with pytest.raises(GraphError, match=re.escape(message)) as info:
        load_onnx(data, **kwargs)
    assert isinstance(info.value, TraceError) and info.value.hint


def onnx_mismatched_matmul() -> bytes:
    """X[2,4] @ w[5,8]: shapes that cannot multiply."""
    node = helper.make_node("MatMul", ["X", "w"], ["Y"], name="/fc/MatMul")
    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 8])],
                              [_initializer("w", np.zeros((5, 8), np.float32))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_onnx_shape_inference_failure_names_the_op_and_gives_a_hint():
    with pytest.raises(TraceError) as info:
        load_onnx(onnx_mismatched_matmul(), name="bad.onnx")
    error = info.value
    assert error.model == "bad.onnx" and error.op == "/fc/MatMul (MatMul)"
    assert "ONNX shape inference failed: Incompatible dimensions" in error.reason
    assert "onnx.checker.check_model" in error.hint


def test_onnx_control_flow_is_refused():
    branch = helper.make_graph([helper.make_node("Identity", ["X"], ["Y1"])], "b", [],
                               [helper.make_tensor_value_info("Y1", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["cond"], ["Y"], name="/If", then_branch=branch, else_branch=branch)
    graph = helper.make_graph([node], "if", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                                             helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match="subgraph") as info:
        load_onnx(model.SerializeToString())
    assert info.value.op == "/If (If)" and "unrolled" in info.value.hint


def test_onnx_model_file_checks_with_onnx_itself():
    onnx.checker.check_model(onnx.load_model_from_string(onnx_mlp()))
    onnx.checker.check_model(onnx.load_model_from_string(onnx_convnet()))


# -- .pt2 ---------------------------------------------------------------------------------------

class WithLoss(nn.Module):
    """A model that returns its own loss, as an exported training program would."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x, labels):
        return nn.functional.cross_entropy(self.net(x), labels)


def test_pt2_program_traces_like_the_module_it_came_from(tmp_path):
    module, inputs, loss = small_cnn()
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(module, inputs), path)
    imported = load_pt2(path)
    direct = trace_training_graph(module, inputs)  # no loss given: outputs summed, as for the program
    signature = Counter((n.kind, n.op, n.module) for n in direct.nodes)
    assert Counter((n.kind, n.op, n.module) for n in imported.nodes) == signature
    assert checkpoint_all_peak(imported) == checkpoint_all_peak(direct)
    assert imported.name == "cnn.pt2" and imported.outputs[-1] == "step_end"  # a gradient per parameter, the step's end
    assert len(imported.outputs) == len(list(module.parameters())) + 1
    module_level = load_pt2(path, level="module")
    assert "block.0:fwd" in module_level and "conv:grads" in module_level


def test_pt2_program_returning_its_loss(tmp_path):
    torch.manual_seed(0)
    model = WithLoss()
    path = tmp_path / "loss.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(6, 4), torch.randint(0, 3, (6,)))), path)
    g = load_pt2(path)
    assert {n.op for n in g.nodes if n.kind == "forward"} >= {"aten.addmm", "aten.tanh", "aten.nll_loss_forward"}
    assert len(g.outputs) == 4 + 1 and {n.module for n in g.nodes if n.op == "aten.tanh"} == {"net.1"}


def test_pt2_bytes_give_the_graph_the_file_gives(tmp_path):
    module, inputs, _ = small_cnn()
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(module, inputs), path)
    from_bytes = parse_pt2(path.read_bytes(), name="cnn.pt2")
    assert from_bytes.content_hash == load_pt2(path).content_hash
    with pytest.raises(TraceError, match="upload: not a loadable torch.export program"):
        parse_pt2(b"not a zip archive", name="upload")


def test_pt2_bad_files(tmp_path):
    with pytest.raises(TraceError, match="file not found"):
        load_pt2(tmp_path / "missing.pt2")
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"definitely not a zip archive")
    with pytest.raises(TraceError, match="not a loadable torch.export program"):
        load_pt2(junk)
