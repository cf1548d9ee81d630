"""What selective activation checkpointing really does with a plan, as a schedule the one simulator can judge.

A plan frees and recomputes tensor by tensor; SAC (:mod:`.forward`) cannot. A checkpoint region
recomputes in one run, when the backward first unpacks one of its saved tensors, up to the last op
that saved one (PyTorch's early stop), and everything it recomputes for the backward stays until
its last backward reader; the region's inputs stay alive from the forward until its backward is
over. :func:`sac_route_ops` writes that down as compute and free ops of the op-level graph:

- forward: the forward nodes in the program's order; a node is freed after its last forward reader
  unless something still holds it: SAC's cache (every output of a ``MUST_SAVE`` op, the ones the
  plan frees included, and a kept value no backward op reads, until its region recomputes), autograd
  (what the backward reads from a region that does not recompute), the caller (a value the forward
  hands back, the outputs and the loss, whatever the plan says), or a checkpointed region that will
  recompute from it (its input, until then);
- backward: the backward nodes in order; the first time one unpacks what a checkpointed region
  saved (it differentiates an op of that region: autograd's sequence number ties the two), or when
  one reads a tensor no longer resident, that region is recomputed in one run (its recomputed nodes
  in order, up to the last one the backward needs, intermediates freed after their last reader
  inside the run), and its cache and inputs are let go where nothing else needs them; every tensor
  is freed after its last backward reader.

Its simulated peak is what a step with the plan installed through SAC holds (the step's kernels
included): :func:`sac_route_peak`. ``rematerialize`` and ``execute --via sac`` plan for it: a plan
whose route goes over the budget is solved again for less (:func:`sac_aware_schedule`).
"""

from __future__ import annotations

from typing import Callable

from torch import fx

from ..errors import InfeasibleBudget
from ..graph import ComputeGraph
from ..schedule import COMPUTE, FREE, Op, Schedule, memory_lower_bound, simulate
from .decisions import FORWARD_KINDS, PlanDecisions, plan_decisions
from .forward import ForwardProgram, forward_program

RETRIES = 6
"""Solves of a bisection for a plan the route keeps before the route is said to be unable to keep the budget."""


def sac_route_ops(decisions: PlanDecisions, program: ForwardProgram) -> list[Op]:
    """The ops a step with ``program`` installed through SAC performs, on ``decisions.graph`` (see the module notes)."""
    graph = decisions.graph
    binding = graph.attachments["fx_binding"]
    kinds = {n.id: n.kind for n in graph.nodes}
    pinned = {n.id for n in graph.nodes if n.pinned}
    region_of: dict[str, int] = {}
    position: dict[str, int] = {}  # graph node -> the position of the forward op that makes it
    order: list[str] = []
    for k, region in enumerate(program.regions):
        for at in range(region.start, region.end):
            for owner in binding.storage.get(program.nodes[at].name, ()):
                if owner in graph.index and owner not in region_of and owner not in pinned:
                    region_of[owner], position[owner] = k, at
                    order.append(owner)
    checkpointed = {k for k, r in enumerate(program.regions) if r.checkpointed}
    backward = [graph.ids[i] for i in graph.topo_idx
                if graph.ids[i] not in region_of and not graph.pinned[i] and i in graph.needed_idx]
    readers = {v: [s for s in graph.succs(v)] for v in graph.ids}
    needed_later = {v for v in order if any(kinds[s] not in FORWARD_KINDS for s in readers[v])}

    returned = {o for name in program.returns for o in binding.storage.get(name, ())}
    cached = {v for name in program.saved for v in binding.storage.get(name, ())  # a kept tensor's op is saved
              if region_of.get(v) in checkpointed}
    members = {k: [v for v in order if region_of[v] == k] for k in checkpointed}

    def kept_after_forward(v: str) -> bool:
        """Whether a forward tensor whose forward readers have all run stays: SAC's cache holds it (every output of a
        ``MUST_SAVE`` op, a max pool kept for its values keeps its indices too) until its region recomputes; autograd
        holds what the backward reads from a region that does not recompute; the caller holds a value the forward
        hands back; a checkpointed region that will recompute from it holds it."""
        return (v in cached or (v in needed_later and (region_of[v] not in checkpointed or v in returned))
                or awaited(v))

    def awaited(v: str) -> bool:  # an input of a checkpointed region whose backward is not over
        return any(v in inputs for inputs in pending_inputs.values())

    ops: list[Op] = []
    resident: set[str] = set()

    def compute(v: str) -> None:
        ops.append((COMPUTE, v))
        resident.add(v)

    def free(v: str) -> None:
        if v in resident:
            ops.append((FREE, v))
            resident.discard(v)

    def unused(v: str) -> bool:  # no backward op reads it, no region will recompute from it, no cache holds it
        return backward_left.get(v, 0) == 0 and not awaited(v) and (v not in cached or region_of[v] in recomputed)

    pending_inputs = {k: {o for name in program.regions[k].inputs for o in binding.storage.get(name, ())
                          if o in region_of and o not in pinned} for k in checkpointed}
    forward_left = {v: sum(1 for s in readers[v] if s in region_of) for v in order}
    for v in order:
        compute(v)
        for p in graph.preds(v):
            if p in forward_left:
                forward_left[p] -= 1
        for p in [*graph.preds(v), v]:
            if p in forward_left and forward_left[p] == 0 and not kept_after_forward(p):
                free(p)
    recomputed: set[int] = set()
    backward_left = {v: sum(1 for s in readers[v] if s not in region_of) for v in graph.ids}
    differentiated = _differentiated(program, binding.graph_module)
    saver = {b: differentiated.get(binding.producer.get(b, b)) for b in backward}  # its forward op's position
    frame_of = {b: program.region_at(saver[b]) for b in backward  # what b reads was saved by that op's region
                if saver[b] is not None and any(p in region_of or p in pinned for p in graph.preds(b))}
    frame_ends: dict[int, int] = {}  # region -> the step of its last backward op
    early_stop: dict[int, int] = {}  # region -> the position of its last op that saved a tensor
    for step, b in enumerate(backward):
        k = frame_of.get(b)
        if k in checkpointed:
            frame_ends[k], early_stop[k] = step, max(early_stop.get(k, -1), saver[b])
    for step, b in enumerate(backward):
        reads = [f for f in graph.preds(b) if f in region_of]
        for k in [frame_of.get(b), *(region_of[f] for f in reads if f not in resident)]:
            if k in checkpointed and (k not in recomputed or any(region_of[f] == k and f not in resident
                                                                 for f in reads)):
                _recompute_region(members[k], early_stop.get(k, -1), position, graph, needed_later, resident,
                                  compute, free, backward_left)
                recomputed.add(k)
                for v in members[k]:  # SAC's cache is spent once its region has recomputed
                    if v in cached and unused(v):
                        free(v)
        compute(b)
        for p in graph.preds(b):
            backward_left[p] -= 1
            if p not in pinned and unused(p):
                free(p)
        if not graph.succs(b):
            free(b)
        for k in [k for k, end in frame_ends.items() if end == step]:  # the region's backward is over: its inputs go
            for v in pending_inputs.pop(k, ()):
                if unused(v):
                    free(v)
    return ops


def _differentiated(program: ForwardProgram, graph_module: fx.GraphModule) -> dict[str, int]:
    """Backward FX name -> the position among the program's ops of the forward op it differentiates (autograd's
    ``seq_nr`` ties them; the last of the ops sharing one): the op whose saved tensors it unpacks."""
    position_of_seq = {node.meta["seq_nr"]: at for at, node in enumerate(program.nodes) if "seq_nr" in node.meta}
    return {node.name: position_of_seq[node.meta["seq_nr"]] for node in graph_module.graph.nodes
            if node.meta.get("partitioner_tag") == "is_backward" and node.meta.get("seq_nr") in position_of_seq}


def _recompute_region(members: list[str], early_stop: int, position: dict[str, int], graph: ComputeGraph,
                      needed_later: set[str], resident: set[str], compute, free, backward_left: dict[str, int]) -> None:
    """A region recomputed in one run, as checkpoint re-runs it: every op from its start to the last one that saved a
    tensor for the backward (position ``early_stop``: PyTorch's early stop), what SAC cached returned from its
    cache (resident), and anything the backward still needs that is gone with what it is computed from; each
    intermediate freed after its last reader in the run."""
    wanted = {v for v in members if v in needed_later and v not in resident and backward_left.get(v, 0) > 0}
    inside = set(members)
    run_set = {v for v in members if position[v] <= early_stop and v not in resident}
    stack = list(wanted)
    while stack:
        v = stack.pop()
        if v in run_set or v in resident:
            continue
        run_set.add(v)
        stack.extend(p for p in graph.preds(v) if p in inside)
    run = [v for v in members if v in run_set]
    left = {v: sum(1 for s in graph.succs(v) if s in run_set) for v in run}
    for v in run:
        compute(v)
        for p in graph.preds(v):
            if p in left:
                left[p] -= 1
                if left[p] == 0 and p not in wanted:
                    free(p)
        if left[v] == 0 and v not in wanted:
            free(v)


def step_returns(graph: ComputeGraph) -> list[str]:
    """The FX values a traced step's forward hands back: the loss, the model's outputs (held to the step's end, as
    a training loop holds them) and the buffer updates."""
    binding = graph.attachments["fx_binding"]
    end = next(o for o in graph.outputs if graph.node(o).kind == "other")  # the end of the step holds these
    outputs = [binding.producer[n] for n in graph.preds(end) if graph.node(n).kind == "forward"]
    return [binding.producer[binding.loss], *outputs, *binding.buffer_updates.values()]


def sac_route_peak(graph: ComputeGraph, schedule: Schedule, returns: list[str] | None = None
                   ) -> tuple[int, ForwardProgram]:
    """The simulated peak (bytes, pinned included) of ``schedule`` run through SAC, and the program it is installed as.

    ``returns``: the FX values the forward hands back (the loss, the outputs, the buffer updates; default: the
    traced training step's, :func:`step_returns`).
    """
    decisions = plan_decisions(graph, schedule.ops)
    program = forward_program(decisions, step_returns(decisions.graph) if returns is None else returns)
    ops = sac_route_ops(decisions, program)
    return simulate(decisions.graph, ops).peak, program


def sac_aware_schedule(graph: ComputeGraph, budget: int, solve: Callable[[int], Schedule],
                       returns: list[str] | None = None) -> tuple[Schedule, int]:
    """A schedule whose SAC route keeps ``budget``: ``solve(budget)`` first; when its route peaks over the budget,
    a bisection of the budget asked of the solver, between the graph's lower bound and ``budget``, for the largest
    (least recomputing) one whose route fits, in at most :data:`RETRIES` more solves. Returns the schedule and its
    route's peak.

    Raises
    ------
    InfeasibleBudget
        When no schedule the solver finds keeps the budget once SAC runs it (the message says what its route peaked
        at and why).
    """
    schedule = solve(budget)
    peak, _ = sac_route_peak(graph, schedule, returns)
    if peak <= budget:
        return schedule, peak
    best_over = (schedule, peak)
    fitting = None
    low, high = memory_lower_bound(graph), budget
    for _ in range(RETRIES):
        if high - low <= max(1, budget // 1000):
            break
        asked = (low + high) // 2
        try:
            schedule = solve(asked)
        except InfeasibleBudget:
            low = asked
            continue
        peak, _ = sac_route_peak(graph, schedule, returns)
        if peak <= budget:
            fitting, low = (schedule, peak), asked
        else:
            best_over = min(best_over, (schedule, peak), key=lambda item: item[1])
            high = asked
    if fitting is not None:
        return fitting
    raise InfeasibleBudget(budget, None, best_over[0].solver,
                           f"run through selective activation checkpointing its plans peak at {best_over[1]:,} bytes "
                           f"at best: a checkpoint region recomputes in one run and keeps its inputs until its "
                           f"backward is over, so SAC holds more than the plan; a larger budget, or the op-by-op "
                           f"replay (--via plan), keeps it")
