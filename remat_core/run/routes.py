"""One real training step with a plan, three ways, measured against the same step in eager PyTorch.

- ``plan``: the schedule replayed op by op (:func:`remat_core.run.executor.execute`), every compute
  and free as the simulator ran them;
- ``sac``: the traced step's forward run by autograd with the plan installed as selective
  activation checkpointing (:mod:`remat_core.run.forward`); its simulated peak is the one of what
  SAC really does with the plan (:mod:`remat_core.run.sac_route`: regions recompute in one run);
- ``compile``: that forward through ``torch.compile``, the plan answering Inductor's partitioner
  (:mod:`remat_core.run.compiled`);
- ``offload``: the ``sac`` forward with the plan's offloads installed as ``saved_tensors_hooks``
  (:mod:`remat_core.run.offload_hooks`): the tensors it offloads go to the host when saved and come
  back, prefetched on a side stream, before the backward reads them (on a CPU nothing moves).

The eager step is the real model's own step, as a training loop runs it (``out = model(x)``, the loss,
``loss.backward()``): its peak is the reference every simulated peak is held to. Every route's
gradients are compared with it; with random ops (dropout) they are compared with the traced step run
eagerly instead, whose random ops draw from the same per-op seeded streams as ``plan`` and ``sac``, so
the masks agree (a compiled step draws its own: with random ops its gradients are not compared).
Peaks are bytes above the weights and inputs, by the one meter (:mod:`remat_core.run.measure`: the
tensors, the kernels' temporaries, the held outputs and gradients); the simulated peak is the
schedule's, minus the pinned bytes.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Mapping

import torch

from ..frontends import real_placeholder_values
from ..graph import ComputeGraph, node_label
from ..schedule import Schedule, simulate
from ..schedule.links import schedule_link
from .decisions import PlanDecisions, plan_decisions
from .executor import ExecutionError, draws_random, execute, is_executable
from .forward import ForwardProgram, forward_program, run_forward, write_buffer_updates
from .measure import MeasuredStep, measure_step
from .offload_hooks import OffloadHooks, offloaded_values
from .sac_route import sac_route_ops, step_returns
from .report import PEAK_TOLERANCE, VIAS, StepReport, Uncontrolled
from .tensor_check import GRADIENT_TOLERANCE


def train_step(graph: ComputeGraph, schedule: Schedule, via: str = "plan", *, seed: int = 0,
               tolerance: float = GRADIENT_TOLERANCE, timing_runs: int = 1) -> StepReport:
    """Train the model behind ``graph`` one step with ``schedule``, the way ``via`` names, and measure it.

    Parameters
    ----------
    graph : ComputeGraph
        A traced graph (op or module level) with its model (:func:`~remat_core.run.executor.is_executable`).
    schedule : Schedule
        A valid schedule of ``graph``.
    via : {"plan", "sac", "compile", "offload"}
    seed : int
        Seed of the random ops' streams.
    tolerance : float
        Relative gradient tolerance.
    timing_runs : int
        Timed runs of each step (the fastest counts).

    Notes
    -----
    The eager step is measured once per graph, seed and state of the weights (kept on the graph).

    Raises
    ------
    ExecutionError
        For a graph with no model, an unknown ``via``, or ``compile`` without a working compiler.
    """
    if via not in VIAS:
        raise ExecutionError(f"unknown way to run a plan {via!r}; use one of {', '.join(VIAS)}")
    if not is_executable(graph):
        raise ExecutionError(f"graph {graph.name!r} was not traced from a PyTorch model here, so there is no model "
                             f"to train; trace it with remat_core.frontends.trace")
    if via == "compile":
        from .compiled import check_compiler

        check_compiler()  # before anything is measured
    link = schedule_link(schedule)
    simulated = schedule.simulation if schedule.simulation is not None else simulate(graph, schedule, link=link)
    decisions = plan_decisions(graph, schedule.ops)
    step = _TracedStep(decisions, seed)
    weights = tuple(p._version for p in step.model.parameters())  # an optimizer step changes them in place
    eager = decisions.graph.memo(f"eager step, weights {weights}, {timing_runs} timing runs",
                                 lambda: measure_step(step.eager, step.model, step.device, timing_runs, warm_up=True))
    reference = eager.gradients
    if step.has_random_ops:
        reference = decisions.graph.memo(f"traced step's gradients, seed {seed}, weights {weights}",
                                         lambda: measure_step(step.runner(plan=False), step.model, step.device
                                                              ).gradients)
    details: dict[str, Any] = {}
    uncontrolled: tuple[Uncontrolled, ...] = ()
    if via == "plan":
        replays = []

        def replay() -> Mapping[str, torch.Tensor]:
            replays.append(execute(graph, schedule, seed=seed))
            return replays[-1].gradients
        measured = measure_step(replay, step.model, step.device, timing_runs)
        held = replays[0]
        details = {"held_peak": held.peak - graph.pinned_bytes,
                   "memory_matches_simulator": held.memory == held.simulated_memory}
    elif via == "offload":
        runs: list[OffloadHooks] = []
        measured = measure_step(step.runner(plan=True, offloads=runs), step.model, step.device, timing_runs)
        hooks = runs[-1]
        uncontrolled = step.program.uncontrolled + tuple(
            Uncontrolled(node_label(decisions.graph, node), decisions.graph.node(node).mem,
                         _why_not_offloaded(step.program, [n for n, (owner, _) in step.offloaded.items()
                                                           if owner == node]))
            for node in hooks.missed())
        timing = simulated.timing
        details = {**hooks.summary(), "simulated_host_peak": timing.host_peak if timing else 0,
                   "simulated_makespan": simulated.makespan, "plan_offloaded_nodes": len(decisions.offloaded)}
    elif via == "sac":
        measured = measure_step(step.runner(plan=True), step.model, step.device, timing_runs)
        uncontrolled = step.program.uncontrolled
        route = simulate(decisions.graph, sac_route_ops(decisions, step.program))
        details = {"regions": len(step.program.regions), "checkpointed_regions": step.program.checkpointed_regions,
                   "plan_recompute_bursts": decisions.bursts, "plan_simulated_peak": simulated.peak - graph.pinned_bytes}
        simulated = route
    else:
        measured, knapsack = _compiled(step, timing_runs)
        uncontrolled = tuple(knapsack.uncontrolled)
        details = {"knapsack_calls": knapsack.calls, "knapsack_saved": knapsack.saved,
                   "knapsack_recomputed": knapsack.recomputed}
    comparable = not (via == "compile" and step.has_random_ops)
    difference = _max_difference(measured.gradients, reference) if comparable else None
    scale = max((float(g.abs().max()) for g in reference.values() if g.numel()), default=0.0)
    simulated_peak = simulated.peak - graph.pinned_bytes
    notes = _notes(via, measured, simulated_peak, step, decisions, comparable)
    return StepReport(
        via=via, gradients_equal=None if difference is None else difference <= tolerance * max(scale, 1e-12),
        max_grad_diff=difference, max_gradient=scale, tolerance=tolerance,
        reference=("none: the compiled step draws its own dropout masks" if not comparable else
                   "the traced step run eagerly (the same dropout masks)" if step.has_random_ops else "the eager step"),
        measured_peak=measured.peak, simulated_peak=simulated_peak, eager_peak=eager.peak,
        step_seconds=measured.seconds, eager_step_seconds=eager.seconds, peak_measure=measured.how,
        device=str(step.device), uncontrolled=uncontrolled, notes=notes, details=details)


class _TracedStep:
    """The traced step's forward on the model's real tensors, as :func:`run_forward` runs it."""

    def __init__(self, decisions: PlanDecisions, seed: int):
        graph = decisions.graph
        binding, joint = graph.attachments["fx_binding"], graph.attachments["joint"]
        self.decisions = decisions
        self.model = joint.model
        self.seed = seed
        self.joint = joint
        self.buffer_updates = dict(binding.buffer_updates)
        self.loss = binding.producer[binding.loss]
        self.program: ForwardProgram = forward_program(decisions, step_returns(graph))
        placeholders = [n.name for n in binding.graph_module.graph.find_nodes(op="placeholder")]
        self.values = dict(zip(placeholders, real_placeholder_values(joint, "train the model",
                                                                     "trace the model with real weights")))
        self.device = next((v.device for v in self.values.values() if isinstance(v, torch.Tensor)),
                           torch.device("cpu"))
        self.has_random_ops = any(draws_random(n) for n in self.program.nodes)
        self.offloaded = offloaded_values(decisions, binding, self.program.nodes)

    def eager(self) -> None:
        """The real model's step (its outputs and loss held through the backward, as a training loop holds them)."""
        self.joint.eager_step()

    def runner(self, plan: bool, offloads: list[OffloadHooks] | None = None) -> Callable[[], None]:
        """One step; with ``offloads``, the plan's offloads installed as saved-tensor hooks (each run's appended)."""
        def run() -> None:
            hooks = None
            with contextlib.ExitStack() as stack:
                stack.enter_context(_forked_rng(self.device))
                if offloads is not None:
                    hooks = OffloadHooks(self.offloaded, self.device)
                    offloads.append(hooks)
                    stack.enter_context(torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack))
                returned = run_forward(self.program, self.values, seed=self.seed, plan=plan,
                                       on_value=hooks.produced if hooks is not None else None)
            self.finish(returned, hooks)
        return run

    def finish(self, returned: Mapping[str, Any], hooks: OffloadHooks | None = None) -> None:
        """Write the buffer updates back (as eager BatchNorm does in place), then run the backward; the outputs
        and the loss stay held until it ends, as the caller of a training step holds them."""
        write_buffer_updates(self.model, self.buffer_updates, returned)
        if hooks is not None:
            hooks.start_backward()
        returned[self.loss].backward()


def _why_not_offloaded(program: ForwardProgram, names: list[str]) -> str:
    """Why the hooks never saw a value the plan offloads (FX ``names``: it and its views) saved for the backward."""
    positions = [k for k, node in enumerate(program.nodes) if node.name in names]
    if any(region.checkpointed and region.start <= p < region.end for region in program.regions for p in positions):
        return ("made inside a checkpoint region that recomputes: SAC keeps what the region saves in its own cache, "
                "beyond saved-tensor hooks, so it stays on the device")
    return "no op saves it for the backward (only views of it, or nothing): there was nothing to offload"


def _compiled(step: _TracedStep, timing_runs: int) -> tuple[MeasuredStep, Any]:
    """The step through ``torch.compile`` with the plan as Inductor's knapsack: compiled on a first
    call, then measured."""
    from .compiled import compile_failure, compiled_step, partitioner_settings

    torch._dynamo.reset()  # or a step compiled for another plan is reused
    function, knapsack = compiled_step(step.program, step.decisions)
    arguments = [step.values[name] for name in step.program.placeholders]

    def run() -> None:
        step.finish(dict(zip(step.program.returns, function(*arguments))))

    try:
        with partitioner_settings(knapsack):
            return measure_step(run, step.model, step.device, timing_runs, warm_up=True), knapsack
    except Exception as error:  # a failed compile raises torch's own wrappers of the cause
        failure = compile_failure(error)
        if failure is not None:
            raise failure from error
        raise


def _max_difference(result: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]) -> float:
    missing = sorted(set(reference) - set(result))
    if missing:
        raise ExecutionError(f"no gradient for {', '.join(missing[:5])}")
    return max((float((result[k] - reference[k]).abs().max()) for k in reference if reference[k].numel()),
               default=0.0)


def _notes(via: str, measured: MeasuredStep, simulated_peak: int, step: _TracedStep, decisions: PlanDecisions,
           comparable: bool) -> tuple[str, ...]:
    notes = []
    if via in ("plan", "sac", "offload") and simulated_peak > 0:
        gap = measured.peak / simulated_peak - 1
        if abs(gap) > PEAK_TOLERANCE:
            why = {"plan": "the replay holds exactly the simulated tensors and each op's measured kernel memory, "
                           "so the difference is a kernel that allocated otherwise than when it was measured",
                   "sac": "the simulated peak is of what SAC does with the plan (its regions recompute in one run), "
                          "so the difference is autograd's own bookkeeping or a kernel that allocated otherwise "
                          "than when it was measured",
                   "offload": "on a CPU the offloaded tensors never leave (the host is the device), so the measured "
                              "peak holds them; on CUDA, autograd's own bookkeeping, a kernel that allocated "
                              "otherwise than when it was measured, or a prefetch issued earlier than planned"
                   }[via]
            notes.append(f"measured peak {measured.peak:,} B is {gap:+.0%} from the simulated {simulated_peak:,} B: "
                         f"{why}")
    if via == "compile" and measured.peak > simulated_peak:
        notes.append("the compiled backward is one function: torch recomputes each dropped tensor once, where the "
                     "plan may recompute in stages, and Inductor's kernels allocate as they are generated")
    if not comparable:
        notes.append("gradients not compared: the compiled step draws its own dropout masks")
    return tuple(notes)


@contextlib.contextmanager
def _forked_rng(device: torch.device) -> Iterator[None]:
    """The caller's RNG state restored afterwards (the step seeds its random ops itself)."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        yield
