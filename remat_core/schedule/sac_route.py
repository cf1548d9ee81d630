"""What selective activation checkpointing really does with a plan, as a schedule the one simulator can judge.

A plan frees and recomputes tensor by tensor; SAC (:mod:`.forward`) cannot. A checkpoint region
recomputes in one run, when the backward first unpacks one of its saved tensors, up to the last op
that saved one (PyTorch's early stop), and everything it recomputes for the backward stays until
its last backward reader; the region's inputs stay alive from the forward until its backward is
over. :func:`sac_route_ops` writes that down as compute and free ops of the op-level graph:

- forward: the forward nodes in the program's order; a node is freed after its last forward reader
  unless something still holds it: SAC's cache (every output of a ``MUST_SAVE`` op, the ones the
  plan frees included, and a kept value no backward op reads, until its region recomputes), autograd
  (what the backward reads from a region that does not recompute, and a region's output an op after it saved
  for its backward), the caller (a value the forward
  hands back, the outputs and the loss, whatever the plan says), or a checkpointed region that will
  recompute from it (its input, until then);
- backward: the backward nodes in order; the first time one unpacks what a checkpointed region
  saved (it differentiates an op of that region: autograd's sequence number ties the two), or when
  one reads a tensor no longer resident, that region is recomputed in one run (its recomputed nodes
  in order, up to the last one the backward needs, intermediates freed after their last reader
  inside the run), and its cache and inputs are let go where nothing else needs them; every tensor
  is freed after its last backward reader.

Its simulated peak is what a step with the plan installed through SAC holds (the step's kernels
included): :func:`sac_route_peak`. ``rematerialize`` and ``execute --via sac`` plan for it
(:mod:`remat_core.run.routes.sac`). Torch-free: the FX graph is read from the graph's attachments.
"""

from __future__ import annotations

from typing import Sequence

from typing import Any

from ..graph import ComputeGraph
from .decisions import FORWARD_KINDS, plan_decisions
from .sac_program import ForwardProgram, forward_returns, schedule_program
from .schedule import COMPUTE, FREE, Op, Schedule
from .simulator import simulate


def sac_route_ops(graph: ComputeGraph, program: ForwardProgram) -> list[Op]:
    """The ops a step with ``program`` installed through SAC performs, on the op-level traced graph behind ``graph``
    (see the module notes)."""
    route = _SacRoute(graph.attachments.op_graph or graph, program)
    route.forward()
    route.backward()
    return route.ops


class _SacRoute:
    """The state of one step through SAC, op by op: what is resident, what holds each tensor (see the module notes).

    :meth:`forward` runs the program's forward ops; :meth:`backward` the backward nodes, recomputing a
    checkpointed region in one run when the backward first unpacks it. Both append to :attr:`ops`.
    """

    def __init__(self, graph: ComputeGraph, program: ForwardProgram):
        binding = graph.attachments.binding
        self.graph, self.program = graph, program
        self.pinned = {n.id for n in graph.nodes if n.pinned}
        self.region_of: dict[str, int] = {}  # forward graph node -> the region whose op makes it
        self.position: dict[str, int] = {}  # forward graph node -> the position of the forward op that makes it
        self.order: list[str] = []  # forward graph nodes in the order the program makes them
        for k, region in enumerate(program.regions):
            for at in range(region.start, region.end):
                for owner in binding.storage.get(program.nodes[at].name, ()):
                    if owner in graph.index and owner not in self.region_of and owner not in self.pinned:
                        self.region_of[owner], self.position[owner] = k, at
                        self.order.append(owner)
        self.checkpointed = {k for k, r in enumerate(program.regions) if r.checkpointed}
        kinds = {n.id: n.kind for n in graph.nodes}
        self.needed_later = {v for v in self.order if any(kinds[s] not in FORWARD_KINDS for s in graph.succs(v))}
        self.returned = {o for name in program.returns for o in binding.storage.get(name, ())}
        self.cached = {v for name in program.saved for v in binding.storage.get(name, ())  # a kept tensor's op is saved
                       if self.region_of.get(v) in self.checkpointed}
        self.members = {k: [v for v in self.order if self.region_of[v] == k] for k in self.checkpointed}
        self.pending_inputs = {k: {o for name in program.regions[k].inputs for o in binding.storage.get(name, ())
                                   if o in self.region_of and o not in self.pinned} for k in self.checkpointed}
        self.saved_outside = self._saved_outside()
        self.recomputed: set[int] = set()
        self.backward_left = {v: sum(1 for s in graph.succs(v) if s not in self.region_of) for v in graph.ids}
        self.resident: set[str] = set()
        self.ops: list[Op] = []

    def _saved_outside(self) -> set[str]:
        """Tensors of a checkpointed region that autograd saves for an op outside it (a region's output read by the
        backward of an op after it: that op saved its input, which the region cannot recompute)."""
        graph, binding = self.graph, self.graph.attachments.binding
        differentiated = _differentiated(self.program, binding.graph_module)
        held = set()
        for b in graph.ids:
            if b in self.region_of:
                continue
            saver = differentiated.get(binding.producer.get(b, b))
            if saver is None:
                continue
            for f in graph.preds(b):
                k = self.region_of.get(f)
                if k in self.checkpointed and not self.program.regions[k].start <= saver < self.program.regions[k].end:
                    held.add(f)
        return held

    def compute(self, v: str) -> None:
        self.ops.append((COMPUTE, v))
        self.resident.add(v)

    def free(self, v: str) -> None:
        if v in self.resident:
            self.ops.append((FREE, v))
            self.resident.discard(v)

    def awaited(self, v: str) -> bool:
        """An input of a checkpointed region whose backward is not over."""
        return any(v in inputs for inputs in self.pending_inputs.values())

    def kept_after_forward(self, v: str) -> bool:
        """Whether a forward tensor whose forward readers have all run stays: SAC's cache holds it (every output of a
        ``MUST_SAVE`` op, a max pool kept for its values keeps its indices too) until its region recomputes; autograd
        holds what the backward reads from a region that does not recompute, and what an op outside a region saved of
        its output; the caller holds a value the forward
        hands back; a checkpointed region that will recompute from it holds it."""
        return (v in self.cached or (v in self.needed_later and (self.region_of[v] not in self.checkpointed
                                                                 or v in self.returned or v in self.saved_outside))
                or self.awaited(v))

    def unused(self, v: str) -> bool:
        """No backward op reads it, no region will recompute from it, no cache holds it."""
        return (self.backward_left.get(v, 0) == 0 and not self.awaited(v)
                and (v not in self.cached or self.region_of[v] in self.recomputed))

    def forward(self) -> None:
        """The forward ops in the program's order, each tensor freed after its last forward reader unless held."""
        graph = self.graph
        forward_left = {v: sum(1 for s in graph.succs(v) if s in self.region_of) for v in self.order}
        for v in self.order:
            self.compute(v)
            for p in graph.preds(v):
                if p in forward_left:
                    forward_left[p] -= 1
            for p in [*graph.preds(v), v]:
                if p in forward_left and forward_left[p] == 0 and not self.kept_after_forward(p):
                    self.free(p)

    def backward(self) -> None:
        """The backward nodes in order, each checkpointed region recomputed in one run where the backward first
        unpacks it (or reads a tensor of it no longer resident); its cache and inputs let go when done."""
        graph, region_of = self.graph, self.region_of
        backward = [graph.ids[i] for i in graph.topo_idx
                    if graph.ids[i] not in region_of and not graph.pinned[i] and i in graph.needed_idx]
        binding = graph.attachments.binding
        differentiated = _differentiated(self.program, binding.graph_module)
        saver = {b: differentiated.get(binding.producer.get(b, b)) for b in backward}  # its forward op's position
        frame_of = {b: self.program.region_at(saver[b]) for b in backward  # what b reads was saved by that region
                    if saver[b] is not None and any(p in region_of or p in self.pinned for p in graph.preds(b))}
        frame_ends: dict[int, int] = {}  # region -> the step of its last backward op
        early_stop: dict[int, int] = {}  # region -> the position of its last op that saved a tensor
        for step, b in enumerate(backward):
            k = frame_of.get(b)
            if k in self.checkpointed:
                frame_ends[k], early_stop[k] = step, max(early_stop.get(k, -1), saver[b])
        for step, b in enumerate(backward):
            reads = [f for f in graph.preds(b) if f in region_of]
            for k in [frame_of.get(b), *(region_of[f] for f in reads if f not in self.resident)]:
                if k in self.checkpointed and (k not in self.recomputed or any(
                        region_of[f] == k and f not in self.resident for f in reads)):
                    stop = early_stop.get(k, -1) if self.program.early_stop else self.program.regions[k].end - 1
                    self.recompute_region(k, stop)
            self.compute(b)
            for p in graph.preds(b):
                self.backward_left[p] -= 1
                if p not in self.pinned and self.unused(p):
                    self.free(p)
            if not graph.succs(b):
                self.free(b)
            for k in [k for k, end in frame_ends.items() if end == step]:  # the region's backward is over
                for v in self.pending_inputs.pop(k, ()):
                    if self.unused(v):
                        self.free(v)

    def recompute_region(self, k: int, early_stop: int) -> None:
        """Region ``k`` recomputed in one run, as checkpoint re-runs it: every op from its start to the last one that
        saved a tensor for the backward (position ``early_stop``: PyTorch's early stop), what SAC cached returned
        from its cache (resident), and anything the backward still needs that is gone with what it is computed
        from; each intermediate freed after its last reader in the run. SAC's cache is spent afterwards."""
        graph, members = self.graph, self.members[k]
        wanted = {v for v in members if v in self.needed_later and v not in self.resident
                  and self.backward_left.get(v, 0) > 0}
        inside = set(members)
        run_set = {v for v in members if self.position[v] <= early_stop and v not in self.resident}
        stack = list(wanted)
        while stack:
            v = stack.pop()
            if v in run_set or v in self.resident:
                continue
            run_set.add(v)
            stack.extend(p for p in graph.preds(v) if p in inside)
        run = [v for v in members if v in run_set]
        left = {v: sum(1 for s in graph.succs(v) if s in run_set) for v in run}
        for v in run:
            self.compute(v)
            for p in graph.preds(v):
                if p in left:
                    left[p] -= 1
                    if left[p] == 0 and p not in wanted:
                        self.free(p)
            if left[v] == 0 and v not in wanted:
                self.free(v)
        self.recomputed.add(k)
        for v in members:
            if v in self.cached and self.unused(v):
                self.free(v)


def _differentiated(program: ForwardProgram, graph_module: Any) -> dict[str, int]:
    """Backward FX name -> the position among the program's ops of the forward op it differentiates (autograd's
    ``seq_nr`` ties them; the last of the ops sharing one): the op whose saved tensors it unpacks."""
    position_of_seq = {node.meta["seq_nr"]: at for at, node in enumerate(program.nodes) if "seq_nr" in node.meta}
    return {node.name: position_of_seq[node.meta["seq_nr"]] for node in graph_module.graph.nodes
            if node.meta.get("partitioner_tag") == "is_backward" and node.meta.get("seq_nr") in position_of_seq}


def sac_route_peak(graph: ComputeGraph, schedule: Schedule, returns: Sequence[str] | None = None
                   ) -> tuple[int, ForwardProgram]:
    """The simulated peak (bytes, pinned included) of ``schedule`` run through SAC, and the program it is installed as.

    ``returns``: the FX values the forward hands back (the loss, the outputs, the buffer updates; default: a
    measured training step's, :func:`~remat_core.run.installed.forward_returns`).
    """
    decisions = plan_decisions(graph, schedule.ops)
    program = schedule_program(decisions, schedule.solver_info,
                               forward_returns(decisions.graph, loss=True) if returns is None else list(returns))
    ops = sac_route_ops(decisions.graph, program)
    return simulate(decisions.graph, ops).peak, program


def sac_policy_cost(graph: ComputeGraph, program: ForwardProgram) -> float:
    """What SAC's per-op policy adds to a step with ``program``, which the ops' costs do not hold: the graph's
    :attr:`~remat_core.graph.Attachments.sac_op_seconds` for every op of a checkpointed region that saves something
    (a region saving nothing runs as a plain checkpoint, with no policy), twice: as the forward caches and as the
    recomputation replays."""
    seconds = (graph.attachments.op_graph or graph).attachments.sac_op_seconds
    if not seconds:
        return 0.0
    ops = 0
    for region in program.regions:
        inside = program.nodes[region.start:region.end]
        if region.checkpointed and any(node.name in program.saved for node in inside):
            ops += sum(1 for node in inside if hasattr(node.target, "_schema"))
    return 2 * seconds * ops
