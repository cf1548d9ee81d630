"""Import a saved ``torch.export`` program (``.pt2``) and trace its training step.

:func:`torch.export.load` gives an :class:`~torch.export.ExportedProgram`: a flat ATen graph with
the model's parameters, buffers and the example inputs it was exported with. Its
``module()`` is an ``nn.Module`` again, so the tracer captures its joint forward+backward graph
like any model's. The exported graph has no submodule calls to hook, but every node recorded its
``nn_module_stack``. Running the program node by node (:class:`torch.fx.Interpreter`) hands that
metadata to the ops traced from each node, and the graph builder reads the innermost module of the
stack (and which call of it: ``@1`` in the stack's key), so the traced nodes keep the original
model's module paths.

The input shapes are the ones the program was exported with.

Loading is safe for untrusted files: :func:`~remat_core.frontends.pt2_safety.check_pt2_archive` refuses, before
``torch.export.load`` sees the file, every archive from which that loader would run code (pickles,
compiled packages, shape expressions that are not arithmetic).

A program whose output is a container type only its package registers with torch's pytree (a Hugging Face
``ModelOutput``: ``SequenceClassifierOutput``, ``BaseModelOutputWithPooling``) loads once that package's module is
imported; a load imports it for the packages of :data:`REGISTERING_PACKAGES` only, and otherwise names the type and
the fix. (A Hugging Face Llama does not export at all with this torch: its output holds a ``DynamicCache``, which
``torch.export`` cannot flatten; that is torch's limit, met before any file is written.)
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import logging
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import fx, nn

from ..errors import TraceError
from ..graph import ComputeGraph, DEFAULT_REPEATS
from .losses import LossSetup
from .pt2_safety import check_pt2_archive
from .trace import _trace_impl


def load_pt2(path: str | Path, *, loss: LossSetup | Callable[..., torch.Tensor] | None = None, level: str = "op",
             cost: str = "flops", measure_repeats: int = DEFAULT_REPEATS, name: str | None = None) -> ComputeGraph:
    """Load a ``.pt2`` file saved by :func:`torch.export.save` and trace its training step.

    Parameters
    ----------
    path : path
        The ``.pt2`` file.
    loss : LossSetup, callable or None
        As for :func:`~remat_core.frontends.trace.trace_training_graph`; None: a scalar output is the loss
        (export a module that returns its loss), other outputs are summed.
    level, cost, measure_repeats
        As for :func:`~remat_core.frontends.trace.trace_training_graph`.
    name : str, optional
        Graph name (default: the file name).

    Raises
    ------
    TraceError
        For a missing or unreadable file, a program saved without example inputs or taking keyword
        inputs, or a tracing failure.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(str(path), "file not found", hint="give the path of a .pt2 file saved by torch.export.save")
    return trace_exported_program(_read_program(path.read_bytes(), str(path)), loss=loss, level=level, cost=cost,
                                  measure_repeats=measure_repeats, name=name or path.name)


def parse_pt2(data: bytes, *, loss: LossSetup | Callable[..., torch.Tensor] | None = None, level: str = "op",
              cost: str = "flops", measure_repeats: int = DEFAULT_REPEATS, name: str = "exported program"
              ) -> ComputeGraph:
    """:func:`load_pt2` for the bytes of a ``.pt2`` file (an upload), read from memory.

    Raises
    ------
    TraceError
        As :func:`load_pt2`; ``name`` names the program in messages.
    """
    return trace_exported_program(_read_program(data, name), loss=loss, level=level, cost=cost,
                                  measure_repeats=measure_repeats, name=name)


def _read_program(data: bytes, what: str) -> torch.export.ExportedProgram:
    """``torch.export.load`` of an archive :func:`check_pt2_archive` passed (read once, so what is checked is
    what loads); every failure as :class:`TraceError`."""
    check_pt2_archive(data, what)
    tried: set[str] = set()
    while True:
        logged = _LoggedErrors()  # the loader logs the real cause as a warning and raises "check the warnings above"
        logger = logging.getLogger("torch.export")
        logger.addHandler(logged)
        try:
            return torch.export.load(io.BytesIO(data))
        except Exception as error:  # noqa: BLE001 - PyTorch's loader raises many types for a damaged file
            container = _unregistered_container(error) or next(filter(None, map(_unregistered_container,
                                                                                 logged.errors)), None)
            if container is not None and container not in tried and _register_container(container):
                tried.add(container)  # its package registers it with pytree when imported: load again
                continue
            if container is not None:
                raise TraceError(what, f"the program's output is a {container}, a container type this process "
                                       f"has not registered with torch's pytree, so its output cannot be rebuilt",
                                 hint=f"import the package that defines {container.rsplit('.', 1)[0]} before "
                                      f"loading it (Hugging Face's ModelOutput types are registered when "
                                      f"transformers is installed), or export a model that returns a tuple of "
                                      f"tensors") from error
            raise TraceError(what, f"not a loadable torch.export program ({type(error).__name__}: {error})",
                             hint="save it with torch.export.save(torch.export.export(model, example_inputs), path) "
                                  "using the same torch version") from error
        finally:
            logger.removeHandler(logged)


class _LoggedErrors(logging.Handler):
    """The exceptions a logger logged (with ``exc_info``) while it was attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


REGISTERING_PACKAGES = ("transformers.",)
"""Packages whose container types register themselves with pytree when their module is imported, and which a load
may import for that (an archive names the type; no other module named in a file is imported)."""


def _unregistered_container(error: BaseException) -> str | None:
    """The type name in torch's "Deserializing NAME in pytree is not registered" (from the error or its causes)."""
    while error is not None:
        match = re.search(r"Deserializing ([\w.]+) in pytree is not registered", str(error))
        if match:
            return match.group(1)
        error = error.__cause__ or error.__context__
    return None


def _register_container(name: str) -> bool:
    """Import the module defining ``name`` when it belongs to :data:`REGISTERING_PACKAGES` and is installed; whether
    it was imported."""
    module = name.rsplit(".", 1)[0]
    if not name.startswith(REGISTERING_PACKAGES) or importlib.util.find_spec(module.split(".")[0]) is None:
        return False
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def trace_exported_program(program: torch.export.ExportedProgram, *,
                           loss: LossSetup | Callable[..., torch.Tensor] | None = None, level: str = "op",
                           cost: str = "flops", measure_repeats: int = DEFAULT_REPEATS,
                           name: str = "exported program") -> ComputeGraph:
    """Trace the training step of an in-memory :class:`~torch.export.ExportedProgram` (see :func:`load_pt2`)."""
    examples = program.example_inputs
    if examples is None:
        raise TraceError(name, "the program carries no example inputs, so its input shapes are unknown",
                         hint="export it with torch.export.export(model, example_inputs) and save that program")
    args, kwargs = examples
    if kwargs:
        raise TraceError(name, f"the program takes keyword inputs ({', '.join(kwargs)}), which the tracer does not "
                               f"feed", hint="export a module whose forward takes positional tensors only")
    module = program.module()
    return _trace_impl(module, tuple(args), loss, level, cost, name, measure_repeats, run=_run_node_by_node)


def _run_node_by_node(module: nn.Module, inputs: Sequence[torch.Tensor]) -> Any:
    """Run the exported graph with :class:`torch.fx.Interpreter`, which hands each node's metadata
    (``nn_module_stack`` among it) to the ops it traces."""
    return fx.Interpreter(module).run(*inputs)
