"""The one meter: the memory and the time of one real training step.

What it counts
--------------
The bytes a step allocates above what was allocated when it began, at their highest. Before the
step: the weights, buffers, inputs and targets (and an optimizer's state, if there is one); the
parameters' gradients are cleared to None (``zero_grad(set_to_none=True)``, PyTorch's default).
During it, everything a step ``out = model(x); loss = loss_fn(out, y); loss.backward()`` holds:

- every tensor autograd saves for the backward, and the forward's temporaries;
- what kernels allocate inside one op (a convolution's workspace, a backward's temporaries);
- the outputs and the loss, which the caller holds until the step is over;
- each parameter's gradient, from the moment autograd writes it into ``.grad`` to the end of the step
  (a tied parameter's gradients are added into the first in place, as ``AccumulateGrad`` does).

No optimizer runs: it is an optimizer-free step (an optimizer's state and its update's temporaries
come on top, and are the same whatever the plan). Buffers (BatchNorm's running statistics) are
restored after every run, so that measuring a step twice does not train the model twice.

How
---
On the CPU, the running sum of the allocations and frees PyTorch's profiler records
(``profile_memory=True``) between the step's start and its end, from every thread, by time (an
allocation an intra-op worker thread makes counts too). On CUDA, the caching allocator's own
counters: ``max_memory_allocated`` above ``memory_allocated`` at the start (allocated blocks, as the
allocator rounds them). ``tests/test_meter.py`` checks the CPU meter against an independent count
(:mod:`.counting_allocator`, which wraps PyTorch's CPU allocator itself) on every zoo model.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
from torch import nn

from ..frontends import quiet_stderr

STEP_WINDOW = "remat_core.step"
"""The profiler's ``record_function`` name around the measured step."""

Step = Callable[[], "Mapping[str, torch.Tensor] | None"]
"""A step: runs one forward and backward; returns the parameter gradients by name when it computes them
itself (a plan replayed op by op), None when autograd wrote them into ``.grad``."""


@dataclass(frozen=True)
class MeasuredStep:
    """One training step, measured.

    Attributes
    ----------
    peak : int
        Bytes allocated above the start of the step, at its highest (see the module notes).
    seconds : float
        Wall time of the fastest unprofiled run of the step.
    gradients : mapping of str to torch.Tensor
        Parameter name -> gradient (from the measured run, copied out).
    how : str
        What measured the peak.
    """

    peak: int
    seconds: float
    gradients: Mapping[str, torch.Tensor]
    how: str


def measure_step(step: Step, model: nn.Module, device: torch.device, timing_runs: int = 1,
                 warm_up: bool = False) -> MeasuredStep:
    """Run ``step`` once for its peak and gradients, then ``timing_runs`` more times for its time.

    Parameters
    ----------
    step : callable
        One forward and backward of ``model`` (see :data:`Step`).
    model : nn.Module
        Whose gradients are cleared before each run (and read after the measured one) and whose
        buffers are restored after each run.
    device : torch.device
        Where the step runs.
    timing_runs : int
        Unprofiled runs; the fastest is the step's time.
    warm_up : bool
        Run the step once first, unmeasured (a compiled step compiles on its first call; eager
        kernels fill their caches).
    """
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}

    def once() -> Mapping[str, torch.Tensor]:
        _clear_gradients(model)
        returned = step()
        gradients = returned if returned is not None else {
            name: p.grad for name, p in model.named_parameters() if p.grad is not None}
        return gradients

    if warm_up:
        once()
        _restore(model, buffers)
    _clear_gradients(model)
    holder: dict[str, Mapping[str, torch.Tensor]] = {}
    peak, how = peak_of(lambda: holder.setdefault("gradients", once()), device)
    gradients = {name: g.detach().clone() for name, g in holder.pop("gradients").items()}
    _clear_gradients(model)
    _restore(model, buffers)
    seconds = math.inf
    for _ in range(max(timing_runs, 1)):
        started = time.perf_counter()
        once()
        _synchronize(device)
        seconds = min(seconds, time.perf_counter() - started)
        _clear_gradients(model)
        _restore(model, buffers)
    return MeasuredStep(peak=peak, seconds=seconds, gradients=gradients, how=how)


def forward_seconds(forward: Callable[[], object], model: nn.Module, device: torch.device, runs: int = 3) -> float:
    """The fastest of ``runs`` runs of ``forward`` (``model``'s forward and loss, gradients recorded, then dropped;
    its buffers restored after each): what re-running a forward costs in this process, its Python included, which
    per-op times leave out."""
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    best = math.inf
    with torch.enable_grad():
        for _ in range(runs + 1):
            started = time.perf_counter()
            result = forward()
            _synchronize(device)
            best = min(best, time.perf_counter() - started)
            del result
            _restore(model, buffers)
    return best


def peak_of(run: Callable[[], object], device: torch.device) -> tuple[int, str]:
    """The most bytes ``run()`` held at once above what was allocated when it began, and what measured it.

    What ``run`` returns is kept until the measurement ends (it counts while alive)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        kept = run()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del kept
        return peak, "torch.cuda.max_memory_allocated"
    from torch.profiler import ProfilerActivity, profile, record_function

    with quiet_stderr():  # kineto prints its start and stop on the C stderr
        profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False)
        profiler.__enter__()
    try:
        with record_function(STEP_WINDOW):
            kept = run()
    finally:
        with quiet_stderr():
            profiler.__exit__(None, None, None)
    del kept
    return allocation_peak(profiler, STEP_WINDOW), "torch.profiler memory events"


def allocation_peak(profiler, window: str) -> int:
    """Highest running sum of the CPU allocation events (every thread) inside the time span of the profiler range
    named ``window``."""
    start = end = None
    events: list[tuple[int, int]] = []
    for event in profiler.profiler.kineto_results.events():
        name = event.name()
        if name == window:
            start, end = event.start_ns(), event.start_ns() + event.duration_ns()
        elif name == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU:
            events.append((event.start_ns(), event.nbytes()))
    if start is None:
        return 0
    running = peak = 0
    for when, size in sorted(events):
        if start <= when <= end:
            running += size
            peak = max(peak, running)
    return peak


def _clear_gradients(model: nn.Module) -> None:
    for p in model.parameters():
        p.grad = None


def _restore(model: nn.Module, buffers: Mapping[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
