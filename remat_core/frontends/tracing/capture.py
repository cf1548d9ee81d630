"""Capture one training step as an ATen-level joint forward+backward FX graph.

The step is ``loss(model(*inputs), *targets)`` followed by reverse mode from the loss. It is traced
by AOTAutograd's :func:`torch._functorch.aot_autograd.aot_export_joint_with_descriptors`, which runs
the model on FakeTensors (shapes and dtypes, no data, no compute: a ResNet-50 at batch 64 traces in
a second or two on a laptop CPU), functionalizes it (no in-place ops, BatchNorm's running-statistic
updates become graph outputs) and returns the joint graph with a descriptor on every placeholder
and output (``ParamAOTInput('layer1.0.conv1.weight')``, ``GradAOTOutput(...)``, ...). Every FX node
carries ``meta["val"]`` (a FakeTensor or a tuple of them) and ``meta["partitioner_tag"]``
(``is_forward`` / ``is_backward``).

The joint graph does not say which ``nn.Module`` an op came from, so forward hooks on every
submodule wrap each module call in :func:`torch.fx.traceback.annotate`; the annotation lands in
``meta["custom"]`` of the forward ops, and AOTAutograd copies it onto the backward ops it derives
from them (matched by autograd sequence number). Ops with no annotation (gradient accumulation) are
placed by :mod:`.to_graph`.

References
----------
.. [1] PyTorch, "AOTAutograd", torch/_functorch/aot_autograd.py (``aot_export_joint_with_descriptors``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
import torch.fx.traceback as fx_traceback
from torch import fx, nn
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           UnsupportedOperatorException)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ...errors import RematError, TraceError, first_line
from ..losses import LOSS_FORMS, SUM_OF_OUTPUTS, LossSetup, check_loss_arity

LOSS_MODULE = "<loss>"
"""Module path given to the ops of the loss function (outside the model's own modules)."""

MODULE_KEY = "remat_module"
CALL_KEY = "remat_call"
PHASE_KEY = "remat_phase"
"""Keys of ``node.meta["custom"]``: the module path, the module call's number, ``"loss"`` in the loss."""

ModelRunner = Callable[[nn.Module, Sequence[torch.Tensor]], Any]

MODEL_PREFIX = "model."
"""The traced step holds the user's model as its ``model`` submodule; descriptor names carry this prefix."""

@dataclass(frozen=True)
class JointGraph:
    """A captured training step.

    Attributes
    ----------
    graph_module : torch.fx.GraphModule
        The joint graph. Placeholders: parameters, buffers, user inputs then loss targets, then the
        loss's tangent (the gradient seed); ``meta["desc"]`` says which is which. Outputs: buffer
        updates, the loss, one gradient per parameter (None for untrained ones).
    model : torch.nn.Module
        The traced model (its parameters and buffers are the real values of the placeholders).
    inputs : tuple of torch.Tensor
        User inputs followed by loss targets, in placeholder order.
    num_model_inputs : int
        How many of ``inputs`` the model takes (the rest are loss targets).
    input_names : tuple of str
        The keywords of the model's last ``len(input_names)`` inputs, passed by name (``decoder_input_ids=``);
        the others are passed by position.
    blocks : tuple of str
        Module paths of the model's declared blocks (Hugging Face's ``GradientCheckpointingLayer`` s: the layers
        its ``gradient_checkpointing_enable`` checkpoints), in order; empty for other models.
    module_types : mapping of str to str
        Module path -> class name, for every module of the model.
    source : str
        What was traced, for messages and graph names.
    step : callable
        ``step(output, targets) -> loss``: how the traced step turns the model's output into its loss.
    """

    graph_module: fx.GraphModule
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    num_model_inputs: int
    module_types: Mapping[str, str]
    source: str
    loss_of: Callable[[Any, Sequence[torch.Tensor]], torch.Tensor]
    input_names: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()

    def call_model(self, model: nn.Module, inputs: Sequence[torch.Tensor]) -> Any:
        """``model`` on the model inputs ``inputs`` (in placeholder order), the named ones by keyword."""
        return call_with_names(model, inputs, self.input_names)

    def eager_calls(self, paths: Sequence[str]) -> dict[str, list[Any]]:
        """The ops a selective-checkpoint policy is shown in one call of each module ``paths`` names, in the model's
        own forward (:func:`.eager_ops.record_module_calls`)."""
        from .eager_ops import record_module_calls

        return record_module_calls(self, paths)

    def eager_step(self) -> tuple[Any, torch.Tensor]:
        """One training step of the real model, as a training loop runs it: ``out = model(*inputs)``, the loss,
        ``loss.backward()`` (gradients into ``.grad``); returns ``(out, loss)``, which the caller holds."""
        output = self.call_model(self.model, self.inputs[: self.num_model_inputs])
        loss = self.loss_of(output, self.inputs[self.num_model_inputs:])
        loss.backward()
        return output, loss


class _TrainingStep(nn.Module):
    """``loss(model(*inputs), *targets)`` as one module, the shape AOTAutograd's export wants."""

    def __init__(self, model: nn.Module, loss: LossSetup | None, num_model_inputs: int, source: str,
                 run: ModelRunner | None, input_names: tuple[str, ...] = ()):
        super().__init__()
        self.model = model
        self.input_names = input_names
        self.loss = loss
        self.num_model_inputs = num_model_inputs
        self.source = source
        self.run = run

    def forward(self, *flat: torch.Tensor) -> torch.Tensor:
        inputs = flat[: self.num_model_inputs]
        output = (call_with_names(self.model, inputs, self.input_names) if self.run is None
                  else self.run(self.model, inputs))
        with fx_traceback.annotate({MODULE_KEY: LOSS_MODULE, CALL_KEY: 0, PHASE_KEY: "loss"}):
            value = self.loss_of(output, flat[self.num_model_inputs:])
        return value

    def loss_of(self, output: Any, targets: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.loss is not None:
            value = self.loss.fn(output, *targets)
        elif isinstance(output, torch.Tensor) and output.numel() == 1:
            value = output.reshape(())
        elif any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(output)):
            value = SUM_OF_OUTPUTS.fn(output)
        else:
            raise TraceError(self.source, f"the model returned {_describe(output)}, which holds no tensor to sum "
                                          f"into a loss", module=LOSS_MODULE,
                             hint="return a tensor or a container of tensors, or give a loss (a LossSetup or "
                                  "a callable output -> scalar)")
        if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.is_floating_point():
            raise TraceError(self.source, f"the loss must be a floating-point scalar tensor, got "
                                          f"{_describe(value)}",
                             module=LOSS_MODULE, hint="pass loss=LossSetup(...) whose fn returns a scalar, "
                                                      "e.g. F.cross_entropy(output, labels)")
        if not value.requires_grad:
            raise TraceError(self.source, "the loss does not depend on any trainable parameter",
                             module=LOSS_MODULE, hint="check that the model has parameters with requires_grad=True "
                                                      "and that the loss uses the model's output")
        return value


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__


class _ModuleAnnotator:
    """Forward hooks that annotate every op with the module call it runs in.

    Calls are numbered per module path, so a module used twice (a shared ReLU) gives two calls.
    The stack of open calls names the module a failing trace stopped in.
    """

    def __init__(self, model: nn.Module):
        self._paths = {module: path for path, module in model.named_modules(remove_duplicate=False)}
        self._model = model
        self._calls: dict[str, int] = {}
        self._open: list[tuple[str, contextlib.AbstractContextManager]] = []
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def __enter__(self) -> "_ModuleAnnotator":
        for module in self._paths:
            self._handles.append(module.register_forward_pre_hook(self._enter_call))
            self._handles.append(module.register_forward_hook(self._exit_call))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for handle in self._handles:
            handle.remove()
        # A failed trace leaves calls open. Their annotations edited node metadata that AOTAutograd's
        # preserve_node_meta() has already restored on the way out, so they are dropped, not exited.
        self._open.clear()

    @property
    def innermost(self) -> str | None:
        """The module call still open (where tracing stopped), None if none is."""
        return self._open[-1][0] if self._open else None

    def _enter_call(self, module: nn.Module, args: Any) -> None:
        path = self._paths[module]
        call = self._calls.get(path, 0)
        self._calls[path] = call + 1
        annotation = fx_traceback.annotate({MODULE_KEY: path, CALL_KEY: call})
        annotation.__enter__()
        self._open.append((path, annotation))

    def _exit_call(self, module: nn.Module, args: Any, output: Any) -> None:
        self._open.pop()[1].__exit__(None, None, None)

    def module_types(self) -> Mapping[str, str]:
        return MappingProxyType({path: type(module).__name__ for module, path in self._paths.items()})


def call_with_names(model: Any, inputs: Sequence[Any], names: Sequence[str]) -> Any:
    """``model(*positional, **named)``: the last ``len(names)`` of ``inputs`` passed by those keywords."""
    split = len(inputs) - len(names)
    return model(*inputs[:split], **dict(zip(names, inputs[split:])))


def model_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """A model's example inputs as ``(values, keyword names)``: a tensor, a sequence of them (by position), or a
    mapping of keywords to tensors (``{"input_ids": ..., "decoder_input_ids": ...}``, by name)."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), ()
    if isinstance(example_inputs, Mapping):
        return tuple(example_inputs.values()), tuple(str(k) for k in example_inputs)
    return tuple(example_inputs), ()


def declared_blocks(model: nn.Module) -> tuple[str, ...]:
    """The module paths of a Hugging Face model's layers, the units its own gradient checkpointing wraps (every
    ``GradientCheckpointingLayer``); empty for a model without any (``transformers`` is never imported here)."""
    layers = sys.modules.get("transformers.modeling_layers")
    kind = getattr(layers, "GradientCheckpointingLayer", None)
    if kind is None:
        return ()
    return tuple(path for path, module in model.named_modules() if isinstance(module, kind))


def capture_joint_graph(model: nn.Module, example_inputs: Sequence[torch.Tensor], loss: LossSetup | None,
                        source: str, run: ModelRunner | None = None) -> JointGraph:
    """Trace one training step of ``model`` into a joint forward+backward FX graph.

    Parameters
    ----------
    model : torch.nn.Module
        The model, in the mode it trains in (``model.train()`` for dropout and batch statistics).
    example_inputs : sequence of torch.Tensor, or mapping of str to torch.Tensor
        Inputs of ``model`` by position, or by keyword (real or meta tensors; only shapes and dtypes are used).
    loss : LossSetup or None
        The loss and its targets. None: a scalar output is the loss, anything else is summed.
    source : str
        Names the model in errors.
    run : callable, optional
        ``run(model, inputs) -> output`` instead of ``model(*inputs)`` (the ``.pt2`` importer runs
        an exported graph node by node to annotate each op with its recorded module).

    Returns
    -------
    JointGraph

    Raises
    ------
    TraceError
        When the step cannot be traced: data-dependent control flow or output shapes, an op with no
        FakeTensor kernel, a model that fails on the example inputs (whatever it raises: a user's
        model can raise anything), a non-scalar loss. The error names the op and the module call
        when they are known, and gives a hint; the original exception is its ``__cause__``.
        Exceptions raised by the tracer's own code (this folder) are bugs and propagate unchanged.
    """
    given, names = model_inputs(example_inputs)
    inputs = given + (tuple(loss.targets) if loss is not None else ())
    bad = [i for i, t in enumerate(inputs) if not isinstance(t, torch.Tensor)]
    if bad:
        raise TraceError(source, f"input #{bad[0]} is a {type(inputs[bad[0]]).__name__}, not a tensor",
                         hint="pass example inputs (and loss targets) as a tuple of tensors")
    if loss is not None:
        _check_loss_signature(loss, source)
    step = _TrainingStep(model, loss, len(given), source, run, names)
    device = next((t.device for t in inputs), torch.device("cpu"))
    with _ModuleAnnotator(model) as annotator, _meta_kernel_failures() as failures, \
            _dropout_as_run_on(device), _graph_tracing(), contextlib.ExitStack() as stack:
        try:
            joint = aot_export_joint_with_descriptors(stack, step, inputs)
        except RematError:
            raise
        except Exception as error:
            if _raised_by_the_tracer(error):
                raise  # a bug of the tracer, not the model's: the CLI reports it as an internal error
            raise _trace_error(source, error, annotator.innermost, failures.op) from error
        module_types = annotator.module_types()
    return JointGraph(graph_module=joint.graph_module, model=model, inputs=inputs, loss_of=step.loss_of,
                      num_model_inputs=len(given), module_types=module_types, source=source, input_names=names,
                      blocks=declared_blocks(model))


@contextlib.contextmanager
def _graph_tracing() -> Iterator[None]:
    """``torch.compiler.is_compiling()`` true while the step is traced, as it is while torch.export traces one.

    Models ask it to skip checks that read tensor values, which a shape-only trace cannot answer (Hugging
    Face's packed-sequence check on the position ids, say); torch's export sets the same flag. A torch without
    the context manager is left as it is."""
    session = getattr(torch.compiler, "_compile_session_context", None)
    with session() if session is not None else contextlib.nullcontext():
        yield


@contextlib.contextmanager
def _dropout_as_run_on(device: torch.device) -> Iterator[None]:
    """Dropout traced as eager PyTorch runs it on ``device``.

    Tracing decomposes ``aten.dropout`` into the fused ``native_dropout`` on every device (a bool mask
    saved for the backward), which is what eager CUDA and compiled steps run. Eager PyTorch on the CPU
    runs the unfused kernel instead (``at::_dropout_impl``): a mask of the input's dtype, drawn with
    ``bernoulli`` and scaled, saved for the backward: 4 bytes an element for float32, not 1. Traced on
    the CPU, dropout is that kernel, so the graph holds what a CPU step holds.
    """
    op = torch.ops.aten.dropout.default
    if device.type != "cpu":
        yield
        return
    keys = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)
    saved = {key: op.py_kernels.get(key) for key in keys}
    for key in keys:
        op.py_kernels[key] = _unfused_dropout
    op._dispatch_cache.clear()
    try:
        yield
    finally:
        for key, kernel in saved.items():
            if kernel is None:
                op.py_kernels.pop(key, None)
            else:
                op.py_kernels[key] = kernel
        op._dispatch_cache.clear()


def _unfused_dropout(input: torch.Tensor, p: float, train: bool | None) -> torch.Tensor:
    """``at::_dropout_impl``, the CPU's eager dropout: ``input * (bernoulli(1 - p) / (1 - p))``."""
    if not train or p == 0 or input.numel() == 0:
        return input.clone()
    if p == 1:
        return input * torch.zeros_like(input)
    noise = torch.empty_like(input).bernoulli_(1 - p)
    noise.div_(1 - p)
    return input * noise


def _check_loss_signature(loss: LossSetup, source: str) -> None:
    """Refuse a loss function that cannot take ``(output, *targets)``: the tracer calls it, so a
    TypeError from that call would otherwise look like a bug of the tracer's own."""
    try:
        check_loss_arity(loss.fn, loss.name, len(loss.targets))
    except TypeError as error:
        raise TraceError(source, str(error), module=LOSS_MODULE,
                         hint=f"the tracer calls loss(output, *targets); {LOSS_FORMS}") from None


_HINTS: tuple[tuple[tuple[type, ...], str], ...] = (
    ((DataDependentOutputException, GuardOnDataDependentSymNode),
     "the model's control flow or shapes depend on tensor values (`if x.sum() > 0`, `.item()`, "
     "`.tolist()`), which a shape-only trace cannot follow; compute both branches with torch.where, or "
     "fix the branch for the input you trace"),
    ((DynamicOutputShapeException,),
     "this op's output shape depends on the data (nonzero, unique, masked_select, boolean indexing); use a "
     "fixed-shape form (torch.where, a mask multiply) so the graph has static shapes"),
    ((UnsupportedOperatorException,),
     "this op has no FakeTensor (meta) implementation; replace it with standard torch ops, or register a "
     "meta kernel for it"),
)
_NON_FAKE_INPUT = "Please convert all Tensors to FakeTensors"
"""FakeTensor mode's message when a real tensor the step did not receive as an input meets a traced one."""
_CAPTURED_TENSOR_HINT = ("the step reads a tensor it did not receive as an input (a global, or a module attribute "
                         "that is neither a parameter nor a buffer): pass it in with the example inputs, register "
                         "it as a buffer, or, for a loss's labels, return (module, inputs, loss, targets) with "
                         "loss(output, *targets)")
_GENERIC_HINT = ("the model must run forward on the example inputs, with static shapes, and return a tensor "
                 "(or a scalar loss); try model(*example_inputs) eagerly first, or rerun with --debug for the "
                 "full traceback")


def _trace_error(source: str, error: BaseException, module: str | None, logged_op: str | None) -> TraceError:
    """A :class:`TraceError` naming the failing op (a FakeTensor error in the exception chain carries
    it, else the meta-kernel failure torch logged), the module call, and where in the user's code it
    was raised."""
    op = next((str(e.func) for e in _chain(error) if getattr(e, "func", None) is not None), logged_op)
    hint = next((text for kinds, text in _HINTS if isinstance(error, kinds)), _GENERIC_HINT)
    if any(_NON_FAKE_INPUT in str(e) for e in _chain(error)):
        hint = _CAPTURED_TENSOR_HINT
    reason = f"{type(error).__name__}: {first_line(error, limit=300)}"
    location = user_frame(error.__traceback__)
    if location:
        reason += f" (raised at {location})"
    if module is not None:
        module = module or "(the model's own forward)"
    return TraceError(source, reason, op=op, module=module, hint=hint)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and its causes and contexts, each once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


_TORCH_DIR = Path(torch.__file__).resolve().parent
_TRACER_DIR = Path(__file__).resolve().parent
_STDLIB_DIR = Path(sysconfig.get_paths()["stdlib"]).resolve()


def _raised_by_the_tracer(error: BaseException) -> bool:
    """Whether ``error`` comes from the tracer's own code (its innermost frame is in this folder),
    not from the model, its loss or torch: then it is a bug of ours."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and _is_under(tb.tb_frame.f_code.co_filename, _TRACER_DIR)


def user_frame(tb: TracebackType | None) -> str | None:
    """``file:line`` of the innermost frame outside torch, the tracer and Python's standard library:
    the model's code, if any."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if Path(filename).is_absolute() and not _is_library(filename):
            found = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _is_library(filename: str) -> bool:
    """Torch, the tracer, or the standard library (not the packages installed beside it)."""
    return _is_under(filename, _TORCH_DIR) or _is_under(filename, _TRACER_DIR) or \
        (_is_under(filename, _STDLIB_DIR) and "site-packages" not in Path(filename).parts)


def _is_under(filename: str, folder: Path) -> bool:
    return Path(filename).resolve().is_relative_to(folder)


_META_FAILURE = "failed while attempting to run meta for %s"
"""What FakeTensor logs (at ERROR, with a traceback) before re-raising a meta kernel's error."""


class _MetaKernelFailures(logging.Filter):
    """On torch's FakeTensor logger: remembers the op of a failed meta kernel, and keeps torch's
    record of it (some 20 lines of traceback that the TraceError's ``__cause__`` repeats) off
    stderr unless this package logs at DEBUG (the CLI's ``--debug``)."""

    def __init__(self) -> None:
        super().__init__()
        self.op: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _META_FAILURE or not record.args:
            return True
        self.op = str(record.args[0])
        return logging.getLogger("remat_core").isEnabledFor(logging.DEBUG)


@contextlib.contextmanager
def _meta_kernel_failures() -> Iterator[_MetaKernelFailures]:
    """:class:`_MetaKernelFailures` on FakeTensor's logger for the duration of a capture."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    failures = _MetaKernelFailures()
    logger.addFilter(failures)
    try:
        yield failures
    finally:
        logger.removeFilter(failures)


def real_placeholder_values(joint: JointGraph, purpose: str, hint: str) -> list[torch.Tensor]:
    """Real values for the joint graph's placeholders, in order: the model's own parameters and
    buffers, the example inputs and targets, and ones for the gradient seed.

    Raises
    ------
    TraceError
        When a placeholder has no real value (meta tensors); ``purpose`` and ``hint`` word the message.
    """
    values: list[torch.Tensor] = []
    for node in joint.graph_module.graph.find_nodes(op="placeholder"):
        desc = node.meta["desc"]
        kind = type(desc).__name__
        if kind == "ParamAOTInput":
            value = joint.model.get_parameter(desc.target.removeprefix(MODEL_PREFIX))
        elif kind == "BufferAOTInput":
            value = joint.model.get_buffer(desc.target.removeprefix(MODEL_PREFIX))
        elif kind == "PlainAOTInput":
            value = joint.inputs[desc.idx]
        elif kind == "TangentAOTInput":
            fake = node.meta["val"]
            value = torch.ones(fake.shape, dtype=fake.dtype)
        else:
            raise TraceError(joint.source, f"cannot {purpose}: no real value for graph input {node.name} ({desc})",
                             hint=hint)
        if value.device.type == "meta":
            raise TraceError(joint.source, f"cannot {purpose}: graph input {node.name} ({desc}) is a meta tensor",
                             hint=hint)
        values.append(value)
    return values
