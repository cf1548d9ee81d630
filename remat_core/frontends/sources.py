"""Where a training graph comes from: a zoo name, an ONNX file, a ``.pt2`` file, or a user's factory.

:func:`trace_source` is what ``python -m remat_core trace`` calls; it picks the importer by the
form of its argument. A user factory (``package.module:factory``) imports and runs the user's code,
so it is for the command line only: the web app never executes uploaded code.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Mapping

from ..errors import TraceError, first_line
from ..graph import ComputeGraph


def trace_source(model: str | None = None, *, factory: str | None = None, batch_size: int | None = None,
                 level: str = "op", cost: str = "flops", options: Mapping[str, Any] | None = None,
                 forward_only: bool = False) -> ComputeGraph:
    """Trace whatever ``model`` names into a training graph.

    Parameters
    ----------
    model : str, optional
        A zoo model name, or the path of an ``.onnx`` or ``.pt2`` file.
    factory : str, optional
        ``package.module:factory`` instead of ``model``: ``factory(**options)`` (with
        ``batch_size=`` when given) returns ``(module, example_inputs)`` or ``(module,
        example_inputs, loss)``.
    batch_size : int, optional
        Zoo models and factories: the batch size; ONNX: the value of symbolic batch dimensions.
        ``.pt2`` programs keep the shapes they were exported with.
    level, cost
        As for :func:`~remat_core.frontends.trace.trace_training_graph`.
    options : mapping, optional
        Zoo model options (``image_size``...), symbolic ONNX dimensions by name, or factory keywords.
    forward_only : bool
        ONNX only: keep the forward graph (no :func:`~remat_core.graph.backward.with_backward`).

    Raises
    ------
    TraceError, ZooError, GraphError
        For a name that is none of these, a bad option, or a failed trace or import.
    """
    options = dict(options or {})
    if (model is None) == (factory is None):
        raise TraceError(model or factory or "nothing",
                         "give exactly one of a MODEL and --model PACKAGE.MODULE:FACTORY", hint=_what_works())
    if factory is not None:
        return _trace_factory(factory, batch_size, level, cost, options)
    suffix = Path(model).suffix.lower()
    if suffix == ".onnx":
        return _trace_onnx(model, batch_size, level, cost, options, forward_only)
    if suffix == ".pt2":
        if batch_size is not None or options:
            raise TraceError(model, "a .pt2 program keeps the input shapes it was exported with",
                             hint="drop --batch/--option, or export the program again at the batch you want")
        from .pt2_import import load_pt2

        return load_pt2(model, level=level, cost=cost)
    from .trace import trace_zoo_model
    from .zoo import REGISTRY

    if model not in REGISTRY:
        raise TraceError(model, "not a zoo model, an .onnx file or a .pt2 file", hint=_what_works())
    return trace_zoo_model(model, batch_size, level=level, cost=cost, **options)


def _what_works() -> str:
    from .zoo import list_models

    return (f"MODEL is a zoo model ({', '.join(list_models())}), a .onnx or .pt2 file; or pass "
            f"--model package.module:factory")


def _trace_onnx(path: str, batch_size: int | None, level: str, cost: str, options: dict[str, Any],
                forward_only: bool) -> ComputeGraph:
    from ..graph import with_backward
    from .onnx_import import load_onnx
    from .tracing.coarsen import coarsen_by_module

    graph = load_onnx(path, batch_size=batch_size, dims=options, cost=cost)
    if not forward_only:
        graph = with_backward(graph)
    return coarsen_by_module(graph) if level == "module" else graph


def _trace_factory(spec: str, batch_size: int | None, level: str, cost: str,
                   options: dict[str, Any]) -> ComputeGraph:
    from .trace import trace_training_graph

    module, inputs, loss = load_factory(spec, batch_size, options)
    return trace_training_graph(module, inputs, loss, level, cost=cost, name=spec)


def load_factory(spec: str, batch_size: int | None = None, options: Mapping[str, Any] | None = None):
    """Import ``package.module:factory`` and call it.

    Returns
    -------
    module, example_inputs, loss
        ``loss`` is a :class:`~remat_core.frontends.losses.LossSetup` built from the loss (and targets) the
        factory returned, in any form :func:`~remat_core.frontends.losses.as_loss_setup` takes; None when
        the factory returns a pair.

    Raises
    ------
    TraceError
        For a malformed spec, a module that does not import, a missing or non-callable factory, a
        factory that fails, or a result of the wrong shape.
    """
    from torch import nn

    from .losses import LOSS_FORMS, as_loss_setup

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise TraceError(spec, "expected package.module:factory", hint="e.g. --model mypkg.models:make_model")
    try:
        user_module = importlib.import_module(module_name)
    except ImportError as error:
        raise TraceError(spec, f"cannot import {module_name} ({type(error).__name__}: {error})",
                         hint="run from the directory that holds the package, or add it to PYTHONPATH") from error
    except Exception as error:  # the module's own code failed as it ran: it may raise anything
        raise TraceError(spec, f"importing {module_name} failed ({_described(error)})",
                         hint="import it in Python to see the error, or rerun with --debug for the full "
                              "traceback") from error
    factory = getattr(user_module, attribute, None)
    if not callable(factory):
        raise TraceError(spec, f"{module_name} has no callable {attribute!r}",
                         hint="the factory must be a function returning (module, example_inputs)")
    kwargs = dict(options or {})
    if batch_size is not None:
        kwargs["batch_size"] = batch_size
    try:
        result = factory(**kwargs)
    except Exception as error:  # user code: it may raise anything
        raise TraceError(spec, f"the factory failed ({_described(error)})",
                         hint="it is called as factory(**options) with batch_size= when --batch is given; rerun "
                              "with --debug for the full traceback") from error
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3, 4) or not isinstance(result[0], nn.Module):
        raise TraceError(spec, f"the factory returned {_shape_of(result)}, not (module, example_inputs[, loss[, "
                               f"targets]])",
                         hint="return (an nn.Module, a tensor or tuple of tensors[, a loss[, its targets]]); "
                              + LOSS_FORMS)
    module, inputs, loss, targets = (*result, None, ())[:4] if len(result) == 2 else (*result, ())[:4]
    try:
        return module, inputs, as_loss_setup(loss, targets)
    except TypeError as error:
        raise TraceError(spec, f"the factory's loss: {error}", hint=LOSS_FORMS) from None


def _shape_of(result: Any) -> str:
    """What a factory returned, for the message: ``a tuple of 5``, ``a Linear``."""
    if isinstance(result, (tuple, list)):
        return f"a {type(result).__name__} of {len(result)} ({', '.join(type(r).__name__ for r in result)})"
    return f"a {type(result).__name__}"


def _described(error: BaseException) -> str:
    """``Type: first line of the message``, and where in the user's files it was raised (the innermost
    frame outside torch and the standard library)."""
    from .tracing.capture import user_frame  # imports torch: only once a user's code has failed

    text = f"{type(error).__name__}: {first_line(error)}"
    location = user_frame(error.__traceback__)
    return text + (f", at {location}" if location else "")
