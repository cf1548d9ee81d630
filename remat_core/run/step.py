"""One real training step with a plan, through a route of the table, measured against the same step in eager PyTorch.

The route (:mod:`remat_core.run.routes`: ``plan``, ``sac``, ``compile``, ``offload``) says how the plan runs;
this module runs the step and the eager step beside it and reads the one meter (:mod:`remat_core.run.measure`).

The eager step is the real model's own step, as a training loop runs it (``out = model(x)``, the loss,
``loss.backward()``): its peak is the reference every simulated peak is held to. Every route's
gradients are compared with it; with random ops (dropout) they are compared with the traced step run
eagerly instead, whose random ops draw from the same per-op seeded streams as ``plan`` and ``sac``, so
the masks agree (a compiled step draws its own: with random ops its gradients are not compared).
Peaks are bytes above the weights and inputs: the tensors, the kernels' temporaries, the held outputs and
gradients; the simulated peak is the schedule's (the route's own, for ``sac``), minus the pinned bytes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import torch

from ..errors import ExecutionError
from ..graph import ComputeGraph
from ..schedule import Schedule, SimulationResult, checkpoint_all_cost, simulate
from ..schedule.links import schedule_link
from .executor import draws_random, gradient_difference
from ..schedule.sac_program import forward_returns
from .installed import InstalledPlan, device_of
from .measure import forward_seconds, measure_step
from .report import StepReport
from .routes import Forward, Route, get_route
from .tensor_check import GRADIENT_TOLERANCE

if TYPE_CHECKING:
    from .module_policy import ModulePolicy


def train_step(graph: ComputeGraph, schedule: Schedule, via: str = "plan", *, seed: int = 0,
               tolerance: float = GRADIENT_TOLERANCE, timing_runs: int = 1) -> StepReport:
    """Train the model behind ``graph`` one step with ``schedule``, through the route ``via`` names, and measure it.

    Parameters
    ----------
    graph : ComputeGraph
        A traced graph (op or module level) with its model (``graph.attachments.executable``).
    schedule : Schedule
        A valid schedule of ``graph``.
    via : str
        A route of the table (:data:`remat_core.run.routes.ROUTES`): ``plan``, ``sac``, ``compile``, ``offload``.
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
        For a graph with no model, an unknown ``via``, or a route that cannot run here (``compile`` without
        a working compiler).
    """
    route = get_route(via)
    if not graph.attachments.executable:
        raise ExecutionError(f"graph {graph.name!r} was not traced from a PyTorch model here, so there is no model "
                             f"to train; trace it with remat_core.frontends.trace")
    route.ready()  # before anything is measured
    link = schedule_link(schedule)
    simulated = schedule.simulation if schedule.simulation is not None else simulate(graph, schedule, link=link)
    step = TracedStep(InstalledPlan(graph, schedule, forward_returns(graph, loss=True)), simulated, seed)
    weights = step.weights_version()
    memo = step.installed.decisions.graph.memo
    eager = memo(f"eager step, seed {seed}, weights {weights}, {timing_runs} timing runs",
                 lambda: measure_step(step.eager, step.model, step.device, timing_runs, warm_up=True))
    reference = eager.gradients
    if step.has_random_ops:
        reference = memo(f"traced step's gradients, seed {seed}, weights {weights}",
                         lambda: measure_step(step.runner(None), step.model, step.device).gradients)
    run = route.measure(step, timing_runs)
    measured = run.measured
    if run.own_forward:  # the model's own forward draws its random ops as the eager step does
        reference = eager.gradients
    comparable = route.comparable(step.has_random_ops)
    difference = gradient_difference(measured.gradients, reference) if comparable else None
    scale = max((float(g.abs().max()) for g in reference.values() if g.numel()), default=0.0)
    simulated_peak = (run.simulated or simulated).peak - graph.pinned_bytes
    priced = step.installed.decisions.graph if run.simulated is not None else graph
    forward = memo(f"eager forward seconds, weights {weights}", lambda: forward_seconds(step.eager_forward,
                                                                                        step.model, step.device))
    overhead = predicted_overhead(priced, (run.simulated or simulated).cost, run.policy_cost, forward, eager.seconds)
    if run.mechanism is not None and eager.seconds > 0:
        overhead += run.mechanism.seconds(eager.seconds) / eager.seconds
    return StepReport(
        via=via, gradients_equal=None if difference is None else difference <= tolerance * max(scale, 1e-12),
        max_grad_diff=difference, max_gradient=scale, tolerance=tolerance,
        reference=("none: the compiled step draws its own dropout masks" if not comparable else
                   "the traced step run eagerly (the same dropout masks)" if step.has_random_ops and not run.own_forward
                   else "the eager step"),
        measured_peak=measured.peak, simulated_peak=simulated_peak, eager_peak=eager.peak,
        step_seconds=measured.seconds, eager_step_seconds=eager.seconds, predicted_overhead=overhead,
        predicted_step_seconds=eager.seconds * (1 + overhead), peak_measure=measured.how,
        device=str(step.device), uncontrolled=run.uncontrolled,
        notes=tuple(route.notes(measured.peak, simulated_peak, comparable)), details=run.details)


def predicted_overhead(graph: ComputeGraph, cost: float, policy_cost: float, forward_seconds: float,
                       eager_seconds: float) -> float:
    """The share of the eager step a plan of simulated ``cost`` adds: what it computes beyond checkpoint-all
    (recomputed forward ops), each op's cost turned into seconds at the rate the model's own forward runs at
    (``forward_seconds`` over its forward ops' costs: a re-run forward pays its Python too), plus ``policy_cost``
    (SAC's per-op policy, in seconds under measured costs). Without a forward time, the costs' own ratio."""
    baseline = checkpoint_all_cost(graph)
    if baseline <= 0:
        return 0.0
    forward_cost = sum(n.cost for n in graph.nodes if n.kind in ("forward", "loss"))
    if forward_seconds <= 0 or forward_cost <= 0 or eager_seconds <= 0:
        return (cost + policy_cost) / baseline - 1
    return ((cost - baseline) * forward_seconds / forward_cost + policy_cost) / eager_seconds


class TracedStep:
    """The traced step on the model's real tensors: the installed plan, its placeholder values and the eager step."""

    def __init__(self, installed: InstalledPlan, simulated: SimulationResult, seed: int):
        self.installed = installed
        self.graph = installed.graph
        self.simulated = simulated
        self.seed = seed
        self.joint = installed.joint
        self.model = self.joint.model
        binding = self.graph.attachments.binding
        self.loss = binding.producer[binding.loss]
        self.values = installed.values(self.joint, "train the model", "trace the model with real weights")
        self.device = device_of(self.values)
        self.has_random_ops = any(draws_random(n) for n in installed.program.nodes)

    def weights_version(self) -> tuple[int, ...]:
        """The model's weights' versions: what a measurement kept for the model is keyed on (an optimizer step
        changes them in place)."""
        return tuple(p._version for p in self.model.parameters())

    def eager(self) -> None:
        """The real model's step (its outputs and loss held through the backward, as a training loop holds them),
        its random ops seeded with the step's seed."""
        with _forked_rng(self.device):
            torch.manual_seed(self.seed)
            self.joint.eager_step()

    def eager_forward(self) -> Any:
        """The real model's forward and loss (no backward): what a recomputation re-runs, at its own speed."""
        with _forked_rng(self.device):
            output = self.joint.call_model(self.model, self.joint.inputs[:self.joint.num_model_inputs])
            return self.joint.loss_of(output, self.joint.inputs[self.joint.num_model_inputs:])

    def own_step(self, policy: "ModulePolicy"):
        """The real model's step (as :meth:`eager`) with ``policy`` installed on its modules."""
        from .module_policy import installed_on

        def run() -> None:
            with installed_on(self.model, policy):
                self.eager()
        return run

    def runner(self, route: Route | None, forwards: list[Forward] | None = None):
        """One step through ``route`` (None: the traced forward run plainly, nothing recomputed); each run's
        :class:`~remat_core.run.routes.Forward` appended to ``forwards`` when given."""
        from .forward import run_forward

        def run() -> None:
            with _forked_rng(self.device):
                if route is None:
                    forward = Forward(run_forward(self.installed.program, self.values, seed=self.seed, plan=False))
                else:
                    forward = route.forward(self.installed, self.values, seed=self.seed)
            if forwards is not None:
                forwards.append(forward)
            self.finish(forward.returned, forward)
        return run

    def finish(self, returned: Mapping[str, Any], forward: Forward | None = None) -> None:
        """Write the buffer updates back (as eager BatchNorm does in place), then run the backward; the outputs
        and the loss stay held until it ends, as the caller of a training step holds them."""
        self.installed.write_buffers(self.model, returned)
        if forward is not None:
            forward.before_backward()
        returned[self.loss].backward()


@contextlib.contextmanager
def _forked_rng(device: torch.device) -> Iterator[None]:
    """The caller's RNG state restored afterwards (the step seeds its random ops itself)."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        yield
