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
import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import torch
from torch import nn

STEP_WINDOW = "remat_core.step"
"""The profiler's ``record_function`` name around the measured step."""

HANDOVER = "remat_core.gradient_handover"
"""The profiler's ``record_function`` name around each gradient's hand-over (where its buffer is freed)."""


@dataclass(frozen=True)
class MeasuredStep:
    """One training step, measured.

    Attributes
    ----------
    peak : int
        Bytes allocated above the start of the step, at its highest.
    peak_without_gradients : int or None
        The same, leaving out the buffers of the parameter gradients (from their allocation to their
        hand-over): what the activations alone took. None where the allocator cannot tell (CUDA).
    seconds : float
        Wall time of the fastest unprofiled run of the step.
    gradients : mapping of str to torch.Tensor
        Parameter name -> gradient (from the profiled run).
    how : str
        What measured the peak.
    """

    peak: int
    peak_without_gradients: int | None
    seconds: float
    gradients: Mapping[str, torch.Tensor]
    how: str


def measure_step(step: Callable[[Mapping[str, torch.Tensor]], None], model: nn.Module,
                 device: torch.device, timing_runs: int = 1, warm_up: bool = False) -> MeasuredStep:
    """Run ``step`` (one forward and backward of ``model``): once for its peak and gradients, then timed.

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
    timing_runs : int
        Unprofiled runs; the fastest is the step's time.
    warm_up : bool
        Run the step once first, unmeasured (a compiled step compiles on its first call).
    """
    parameters = {name: p for name, p in model.named_parameters() if p.requires_grad}
    gradients = {name: torch.zeros_like(p) for name, p in parameters.items()}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    with _gradients_handed_to(parameters, gradients):
        if warm_up:
            step(gradients)
            _restore(model, buffers)
        peak, without_gradients, how = _peak_of(lambda: step(gradients), device, buffers, model)
        seconds = math.inf
        for _ in range(max(timing_runs, 1)):
            started = time.perf_counter()
            step(gradients)
            _synchronize(device)
            seconds = min(seconds, time.perf_counter() - started)
            _restore(model, buffers)
    return MeasuredStep(peak=peak, peak_without_gradients=without_gradients, seconds=seconds, gradients=gradients,
                        how=how)


def _peak_of(step: Callable[[], None], device: torch.device, buffers: Mapping[str, torch.Tensor],
             model: nn.Module) -> tuple[int, int | None, str]:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        _restore(model, buffers)
        return peak, None, "torch.cuda.max_memory_allocated"
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
    return (*_allocation_peaks(profiler), "torch.profiler memory events")


def _allocation_peaks(profiler) -> tuple[int, int]:
    """Highest running sum of the CPU allocations recorded inside the step's window, with and without the
    gradient buffers (an allocation whose buffer is freed when its gradient is handed over, and that free)."""
    window = next((node for node in _walk(profiler.profiler.kineto_results.experimental_event_tree())
                   if node.name == STEP_WINDOW), None)
    if window is None:
        return 0, 0
    events = sorted((node.start_time_ns, node.extra_fields.alloc_size, node.extra_fields.ptr, node.id)
                    for node in _walk(window.children)
                    if node.name == "[memory]" and str(node.extra_fields.device) == "cpu")
    handed_over = {node.id for handover in _walk(window.children) if handover.name == HANDOVER
                   for node in _walk(handover.children) if node.name == "[memory]"}
    gradients: set[int] = set()
    last_allocation: dict[int, int] = {}
    for _, size, ptr, event in events:
        if size > 0:
            last_allocation[ptr] = event
        elif event in handed_over and ptr in last_allocation:
            gradients |= {event, last_allocation.pop(ptr)}
    running = peak = activations = activation_peak = 0
    for _, size, _, event in events:
        running += size
        peak = max(peak, running)
        if event not in gradients:
            activations += size
            activation_peak = max(activation_peak, activations)
    return peak, activation_peak


def _walk(nodes) -> Iterator:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


@contextlib.contextmanager
def _gradients_handed_to(parameters: Mapping[str, nn.Parameter], store: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """While open, each parameter's gradient is copied into ``store`` as soon as autograd writes it, then dropped."""
    from torch.profiler import record_function

    def hand_over(name: str):
        def hook(parameter: torch.Tensor) -> None:
            with record_function(HANDOVER):
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
