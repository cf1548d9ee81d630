"""Import an ONNX model as a forward graph; :func:`~remat_core.graph.backward.with_backward` makes it a training graph.

An ONNX file describes inference: no backward pass, often a symbolic batch dimension. The import

1. fixes every symbolic input dimension (the first one from ``batch_size``, others from ``dims``)
   and runs ONNX shape inference (strict) so that every tensor has a concrete shape;
2. makes initializers pinned nodes (``param`` when floating point, ``buffer`` otherwise), graph
   inputs pinned ``input`` nodes, and ``Constant`` outputs pinned ``buffer`` nodes;
3. makes one ``forward`` node per tensor an op produces. Ops that only reinterpret their input
   (:data:`ALIAS_OPS`: Reshape, Flatten, Squeeze, Unsqueeze, Identity) produce no node: like views in
   the tracer, their readers read the input's owner. A multi-output op gives one node per output,
   each reading the op's inputs, the op's cost shared in proportion to bytes;
4. costs nodes as the tracer does: FLOPs (multiply-add = 2) for Conv, ConvTranspose, Gemm and
   MatMul, memory traffic times :data:`~remat_core.graph.cost_models.FLOPS_PER_BYTE` for the rest;
   ``unit`` and ``bytes`` as in the tracer (``measured`` needs a runtime: not offered);
5. sets ``module`` to the node name's scope (``/layer1/layer1.0/conv1/Conv`` ->
   ``/layer1/layer1.0/conv1``, as torch.onnx names nodes) and ``label`` to the op type.

The graph's outputs are the model's outputs.

Importing the module registers a ``.onnx`` loader with :func:`remat_core.graph.io.load_graph`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

from ..errors import OnnxImportError, first_line
from ..graph import ComputeGraph, FLOPS_PER_BYTE, Node, register_graph_loader

ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
"""ONNX ops whose output is their first input reinterpreted (runtimes alias it)."""

ONNX_COST_MODELS = ("flops", "unit", "bytes")


def load_onnx(source: str | Path | bytes, *, batch_size: int | None = None, dims: Mapping[str, int] | None = None,
              cost: str = "flops", name: str | None = None) -> ComputeGraph:
    """Read an ONNX model into a forward-only :class:`ComputeGraph`.

    Parameters
    ----------
    source : path or bytes
        An ``.onnx`` file, or its contents.
    batch_size : int, optional
        Value for each graph input's first dimension when it is symbolic (``N``, ``batch``).
    dims : mapping of str to int, optional
        Values for other symbolic dimensions, by name (``{"seq": 128}``).
    cost : {"flops", "unit", "bytes"}
    name : str, optional
        Graph name (default: the file's stem, or the ONNX graph's name).

    Returns
    -------
    ComputeGraph
        Forward nodes only; outputs are the model's outputs.

    Raises
    ------
    OnnxImportError
        (a ``TraceError`` and a ``GraphError``) naming the model, the failing op when known, and a
        hint: for a missing file or one that is not ONNX, a symbolic dimension without a value, a
        failed or incomplete shape inference, control flow (If, Loop, Scan), or a bad option.
    """
    import onnx
    from google.protobuf.message import DecodeError

    data, label = _read(source, name)
    if cost not in ONNX_COST_MODELS:
        raise OnnxImportError(label, f"unknown or unsupported cost model {cost!r}",
                              hint=f"use one of {', '.join(ONNX_COST_MODELS)} (measured costs need a runtime)")
    try:
        model = onnx.load_model_from_string(data)
    except DecodeError as error:
        raise OnnxImportError(label, f"not an ONNX model ({error})",
                              hint="give a model saved by torch.onnx.export or onnx.save_model") from error
    graph_name = name or (Path(label).stem if label != "<bytes>" else model.graph.name or "onnx")
    _fix_input_dims(model, label, batch_size, dict(dims or {}))
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as error:
        raise _inference_error(label, error) from error
    return _OnnxGraphBuilder(model, label, cost).build(graph_name)


def _read(source: str | Path | bytes, name: str | None) -> tuple[bytes, str]:
    """The model's bytes and how messages name it (the path; for bytes, ``name`` or ``<bytes>``)."""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), name or "<bytes>"
    path = Path(source)
    if not path.is_file():
        raise OnnxImportError(str(path), "file not found", hint="give the path of an .onnx model file")
    return path.read_bytes(), str(path)


_INFERENCE_OP = re.compile(r"\(op_type:(?P<type>[^,]+), node name: (?P<name>[^)]*)\):\s*(?P<rest>.*)")


def _inference_error(label: str, error: Exception) -> OnnxImportError:
    """ONNX's shape inference message, with the op it names (``op_type:MatMul, node name: /fc/MatMul``)."""
    first = first_line(error)
    found = _INFERENCE_OP.search(first)
    op = f"{found['name'] or '(unnamed)'} ({found['type']})" if found else None
    reason = re.sub(r"\[ShapeInferenceError\]\s*", "", found["rest"] if found else first).strip()
    return OnnxImportError(label, f"ONNX shape inference failed: {reason}", op=op,
                           hint="check the model with onnx.checker.check_model(model, full_check=True); when it "
                                "runs elsewhere, the input sizes given here may not fit it (--batch, --option NAME=N)")


def _fix_input_dims(model: Any, label: str, batch_size: int | None, dims: dict[str, int]) -> None:
    """Give every symbolic dimension of the graph inputs a value, in place."""
    for name, value in list(dims.items()) + ([("batch_size", batch_size)] if batch_size is not None else []):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise OnnxImportError(label, f"dimension {name} must be a positive integer, got {value!r}",
                                  hint="give it a size: --batch N, or --option NAME=N (dims={'NAME': N})")
    initializers = {t.name for t in model.graph.initializer}
    for value_info in model.graph.input:
        if value_info.name in initializers:
            continue
        for position, dim in enumerate(value_info.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            symbol = dim.dim_param or "?"
            if symbol in dims:
                dim.dim_value = dims[symbol]
            elif position == 0 and batch_size is not None:
                dim.dim_value = batch_size
            else:
                what = "batch dimension" if position == 0 else f"dimension {position}"
                hint = "pass batch_size (CLI: --batch N)" if position == 0 else \
                    f"pass dims={{'{symbol}': N}} (CLI: --option {symbol}=N)"
                raise OnnxImportError(label, f"input '{value_info.name}' has a symbolic {what} '{symbol}'", hint=hint)


class _OnnxGraphBuilder:
    def __init__(self, model: Any, label: str, cost: str):
        self.model = model
        self.label = label
        self.cost = cost
        self.infos: dict[str, tuple[tuple[int, ...], int, str]] = {}
        self.owner: dict[str, tuple[str, ...]] = {}
        self.nodes: list[Node] = []
        self.edges: list[tuple[str, str]] = []
        self.by_id: dict[str, Node] = {}

    def build(self, name: str) -> ComputeGraph:
        graph = self.model.graph
        for value_info in list(graph.input) + list(graph.value_info) + list(graph.output):
            self._record(value_info.name, value_info.type.tensor_type)
        for tensor in graph.initializer:
            shape = tuple(int(d) for d in tensor.dims)
            self._pinned(tensor.name, shape, tensor.data_type, "initializer")
        for value_info in graph.input:
            if value_info.name not in self.owner:
                self._pinned(value_info.name, self._info(value_info.name)[0], None, "input")
        for index, op in enumerate(graph.node):
            self._op(index, op)
        outputs = list(dict.fromkeys(o for out in graph.output for o in self.owner.get(out.name, ())
                                     if not self.by_id[o].pinned))
        if not outputs:
            raise OnnxImportError(self.label, "the model computes none of its outputs (they are all inputs or "
                                              "constants)", hint="export a model whose outputs its ops compute")
        return ComputeGraph(self.nodes, self.edges, outputs, name=name)

    # -- tensors --------------------------------------------------------------------------------

    def _record(self, name: str, tensor_type: Any) -> None:
        from onnx import helper

        if not tensor_type.HasField("shape") or not tensor_type.elem_type:
            return
        shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        self.infos[name] = (shape, dtype.itemsize, str(dtype))

    def _info(self, tensor: str, producer: str = "") -> tuple[tuple[int, ...], int, str]:
        info = self.infos.get(tensor)
        if info is None or any(d < 0 for d in info[0]):
            raise OnnxImportError(self.label, f"shape inference left tensor '{tensor}' without a concrete shape",
                                  op=producer or None,
                                  hint="give the symbolic input dimensions values (--batch, --option NAME=N)")
        return info

    def _bytes(self, tensor: str, producer: str = "") -> int:
        shape, itemsize, _ = self._info(tensor, producer)
        return math.prod(shape) * itemsize

    def _pinned(self, tensor: str, shape: tuple[int, ...], data_type: int | None, role: str) -> None:
        from onnx import helper

        if data_type is not None:
            dtype = helper.tensor_dtype_to_np_dtype(data_type)
            self.infos[tensor] = (shape, dtype.itemsize, str(dtype))
        _, _, dtype_name = self._info(tensor)
        kind = "input" if role == "input" else ("param" if dtype_name.startswith(("float", "bfloat")) else "buffer")
        node_id = self._fresh(tensor)
        self.owner[tensor] = (node_id,)
        module = "" if role == "input" else tensor.rpartition(".")[0]  # initializers are named by FQN
        self._add(Node(node_id, self._bytes(tensor), 0.0, kind, True, shape=shape, dtype=dtype_name,
                       module=module, label=tensor), [])

    # -- ops ------------------------------------------------------------------------------------

    def _op(self, index: int, op: Any) -> None:
        op_name = op.name or f"{op.op_type}_{index}"
        if any(a.g.node or a.graphs for a in op.attribute):
            raise OnnxImportError(self.label, "the op holds a subgraph (control flow)", op=f"{op_name} ({op.op_type})",
                                  hint="export the model with its loops unrolled and branches fixed")
        inputs = [i for i in op.input if i]
        reads = list(dict.fromkeys(o for i in inputs for o in self._owners(i, op_name)))
        outputs = [o for o in op.output if o]
        if op.op_type in ALIAS_OPS and inputs:
            for out in outputs:
                self.owner[out] = self._owners(inputs[0], op_name)
            return
        if op.op_type == "Constant":
            for out in outputs:
                self._pinned(out, self._info(out, op_name)[0], None, "constant")
            return
        sizes = [self._bytes(out, op_name) for out in outputs]
        total = self._op_cost(op, inputs, outputs, sum(sizes))
        for position, (out, size) in enumerate(zip(outputs, sizes)):
            share = 1.0 if self.cost == "unit" else (total * size / sum(sizes) if sum(sizes) else
                                                     total / len(outputs))
            shape, _, dtype = self._info(out, op_name)
            node_id = self._fresh(out)
            self.owner[out] = (node_id,)
            label = op.op_type if len(outputs) == 1 else f"{op.op_type}[{position}]"
            self._add(Node(node_id, size, share, "forward", op=f"onnx.{op.op_type}", shape=shape, dtype=dtype,
                           module=_scope(op.name), label=label), reads)

    def _owners(self, tensor: str, op_name: str) -> tuple[str, ...]:
        owners = self.owner.get(tensor)
        if owners is None:
            raise OnnxImportError(self.label, f"the op reads tensor '{tensor}', which no earlier node, input or "
                                              f"initializer produces", op=op_name,
                                  hint="the model's nodes must be topologically sorted, as torch.onnx.export "
                                       "writes them; check it with onnx.checker.check_model")
        return owners

    def _op_cost(self, op: Any, inputs: list[str], outputs: list[str], written: int) -> float:
        if self.cost == "unit":
            return 1.0
        traffic = written + sum(self._bytes(i) for i in inputs)
        if self.cost == "bytes":
            return float(traffic)
        flops = _onnx_flops(op, [self._info(i)[0] for i in inputs], [self._info(o)[0] for o in outputs])
        return float(flops) if flops is not None else FLOPS_PER_BYTE * traffic

    # -- bookkeeping ----------------------------------------------------------------------------

    def _fresh(self, base: str) -> str:
        candidate = base or "tensor"
        while candidate in self.by_id:
            candidate += "'"
        return candidate

    def _add(self, node: Node, reads: list[str]) -> None:
        self.nodes.append(node)
        self.by_id[node.id] = node
        self.edges.extend((r, node.id) for r in reads)


def _onnx_flops(op: Any, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]]) -> int | None:
    """FLOPs (multiply-add = 2, as torch.utils.flop_counter counts) of the ops that dominate a model."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in op.attribute}
    out = out_shapes[0] if out_shapes else ()
    if op.op_type == "MatMul":
        return 2 * math.prod(out) * in_shapes[0][-1]
    if op.op_type == "Gemm":
        a = in_shapes[0]
        return 2 * math.prod(out) * (a[0] if attrs.get("transA", 0) else a[1])
    if op.op_type == "Conv":
        weight = in_shapes[1]
        return 2 * math.prod(out) * math.prod(weight[1:])
    if op.op_type == "ConvTranspose":
        weight = in_shapes[1]
        return 2 * math.prod(in_shapes[0]) * math.prod(weight[1:])
    return None


def _scope(name: str) -> str:
    """``/layer1/layer1.0/conv1/Conv`` -> ``/layer1/layer1.0/conv1``; a name without scope -> ``""``."""
    return name.rpartition("/")[0] if "/" in name else ""


def _parse_onnx_file(data: bytes, source: str) -> ComputeGraph:
    return load_onnx(data, name=Path(source).stem)


register_graph_loader(".onnx", _parse_onnx_file)
