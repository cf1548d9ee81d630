"""The activation memory and the time of one real training step.

The peak is in bytes above what was allocated when the step began (the weights, the inputs): on
the CPU the running sum of the allocations torch's profiler records (``profile_memory=True``)
inside the step, on a GPU ``torch.cuda.max_memory_allocated`` minus what was allocated before.

Parameter gradients are handed over as they are produced, as the simulator's schedules do (a
gradient is an output, freed once computed): a hook copies each into a buffer allocated before the
step and drops it (``register_post_accumulate_grad_hook``, the optimizer-in-backward pattern), so
they are read afterwards without counting in the peak. Buffers (BatchNorm's running statistics)
are restored after each step, so that measuring a step twice does not train the model twice.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import torch
from torch import nn

STEP_WINDOW = "remat_core.step"
"""The profiler's ``record_function`` name around the measured step."""


@dataclass(frozen=True)
class MeasuredStep:
    """One training step, measured.

    Attributes
    ----------
    peak : int
        Bytes allocated above the start of the step, at its highest.
    seconds : float
        Wall time of a second, unprofiled run of the step.
    gradients : mapping of str to torch.Tensor
        Parameter name -> gradient (from the profiled run).
    how : str
        What measured the peak.
    """

    peak: int
    seconds: float
    gradients: Mapping[str, torch.Tensor]
    how: str


def measure_step(step: Callable[[Mapping[str, torch.Tensor]], None], model: nn.Module,
                 device: torch.device) -> MeasuredStep:
    """Run ``step`` (one forward and backward of ``model``) twice: once for its peak and gradients, once timed.

    Parameters
    ----------
    step : callable
        ``step(gradients)`` runs the step. Gradients that reach ``model``'s parameters through
        autograd (``.grad``) land in ``gradients`` by themselves; a step that computes them
        otherwise copies them there (a tensor per parameter name, allocated before the step).
    model : nn.Module
        Whose parameters receive the gradients and whose buffers are restored after each run.
    device : torch.device
        Where the step runs (CPU: profiler events; CUDA: the caching allocator's peak).
    """
    parameters = {name: p for name, p in model.named_parameters() if p.requires_grad}
    gradients = {name: torch.zeros_like(p) for name, p in parameters.items()}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    with _gradients_handed_to(parameters, gradients):
        peak, how = _peak_of(lambda: step(gradients), device, buffers, model)
        started = time.perf_counter()
        step(gradients)
        _synchronize(device)
        seconds = time.perf_counter() - started
        _restore(model, buffers)
    return MeasuredStep(peak=peak, seconds=seconds, gradients=gradients, how=how)


def _peak_of(step: Callable[[], None], device: torch.device, buffers: Mapping[str, torch.Tensor],
             model: nn.Module) -> tuple[int, str]:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        _restore(model, buffers)
        return peak, "torch.cuda.max_memory_allocated"
    from torch.profiler import ProfilerActivity, profile, record_function

    with _quiet_stderr():  # kineto prints its start and stop on the C stderr
        profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False)
        profiler.__enter__()
    try:
        with record_function(STEP_WINDOW):
            step()
    finally:
        with _quiet_stderr():
            profiler.__exit__(None, None, None)
    _restore(model, buffers)
    return _allocation_peak(profiler), "torch.profiler memory events"


def _allocation_peak(profiler) -> int:
    """Highest running sum of the CPU allocations recorded inside the step's window."""
    window = next((node for node in _walk(profiler.profiler.kineto_results.experimental_event_tree())
                   if node.name == STEP_WINDOW), None)
    if window is None:
        return 0
    events = sorted((node.start_time_ns, node.extra_fields.alloc_size) for node in _walk(window.children)
                    if node.name == "[memory]" and str(node.extra_fields.device) == "cpu")
    running = peak = 0
    for _, size in events:
        running += size
        peak = max(peak, running)
    return peak


def _walk(nodes) -> Iterator:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


@contextlib.contextmanager
def _gradients_handed_to(parameters: Mapping[str, nn.Parameter], store: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """While open, each parameter's gradient is copied into ``store`` as soon as autograd writes it, then dropped."""
    def hand_over(name: str):
        def hook(parameter: torch.Tensor) -> None:
            store[name].copy_(parameter.grad)
            parameter.grad = None
        return hook

    handles = [p.register_post_accumulate_grad_hook(hand_over(name)) for name, p in parameters.items()]
    for p in parameters.values():
        p.grad = None
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _restore(model: nn.Module, buffers: Mapping[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null (C libraries write there directly)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
