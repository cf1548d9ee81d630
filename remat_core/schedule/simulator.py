"""The one simulator: the only judge of every schedule, whoever made it.

Memory model
------------
- Start: the resident set is the pinned nodes; memory is their total ``mem``; peak is that.
- ``compute v``: v is not pinned, not resident, and every predecessor of v is resident. Memory
  grows by ``mem(v)``; while v's op runs its kernel also holds ``transient(v)`` bytes (workspace,
  temporaries) and, for an output of a multi-output op, the op's other outputs that are not resident
  (one call allocates them all; those the schedule does not keep are dropped when it returns), so
  the peak is updated with all of that; ``cost(v)`` is added to the total cost. An output computed
  right after a sibling of the same call (the op before it computed one) comes from that call:
  nothing runs again, and nothing more is held.
- ``free v``: v is resident and not pinned. Memory shrinks by ``mem(v)``.
- At the end every output has been computed at least once (it may have been freed since).

Time and the transfer lane
--------------------------
Ops run in order on the compute lane, each ``compute`` for ``cost(v)`` time units, so that without
transfers the makespan is the cost. ``offload v`` (v resident on the device, no host copy yet) and
``prefetch v`` (v not resident, a host copy made) are issued to the transfer lane when the compute
lane reaches them, and run there concurrently with it, in issue order per direction (one lane for
both directions when the :class:`Link` is half duplex), each for ``latency + mem(v) / bandwidth``:

- an offload starts once it is issued, its lane is free and v has been computed; the host holds v
  from then on (host bytes, reported, never budgeted);
- a prefetch holds v's device bytes from the op on (the budget counts them then) and starts once its
  lane is free and v's offload has finished; v is resident again, its data there when it ends;
- a ``compute`` waits until the data of every input is there (a prefetch in flight), and a
  ``free v`` waits until no copy of v is in flight (its offload): the compute lane stalls.

The makespan is when the last op of either lane ends. A tensor may be computed again instead of
prefetched (its host copy stays).

Any violation raises :class:`~remat_core.errors.InvalidSchedule` naming the step, the op and the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from ..errors import InvalidSchedule
from ..graph import ComputeGraph
from .schedule import ACTIONS, COMPUTE, FREE, OFFLOAD, PREFETCH, TRANSFERS, Op, Schedule


@dataclass(frozen=True)
class Link:
    """The transfer lane between device and host memory.

    Attributes
    ----------
    to_host, to_device : float
        Bandwidth of each direction in bytes per unit of the graph's cost (time); ``math.inf``: copies
        take only the latency.
    latency : float
        Time units every copy takes besides its bytes.
    full_duplex : bool
        Copies to the host and to the device run at once (two lanes); False: one lane for both.
    """

    to_host: float
    to_device: float
    latency: float = 0.0
    full_duplex: bool = True

    def __post_init__(self) -> None:
        for name in ("to_host", "to_device"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Link.{name} must be a positive bandwidth (bytes per time unit), got "
                                 f"{getattr(self, name)!r}; a link without bandwidth offloads nothing: leave it out")
        if not self.latency >= 0:
            raise ValueError(f"Link.latency must be a non-negative time, got {self.latency!r}")

    def duration(self, action: str, nbytes: int) -> float:
        """Time a copy of ``nbytes`` takes in the direction of ``action`` (offload or prefetch)."""
        return self.latency + nbytes / (self.to_host if action == OFFLOAD else self.to_device)

    def describe(self) -> dict[str, Any]:
        """The link as plain data (store keys, a schedule's ``solver_info``); :meth:`from_description` reads it."""
        return {"to_host": self.to_host, "to_device": self.to_device, "latency": self.latency,
                "full_duplex": self.full_duplex}

    @classmethod
    def from_description(cls, data: Mapping[str, Any]) -> "Link":
        """The link :meth:`describe` wrote (ValueError for anything else)."""
        try:
            return cls(float(data["to_host"]), float(data["to_device"]), float(data.get("latency", 0.0)),
                       bool(data.get("full_duplex", True)))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a transfer lane: {data!r} ({e}); expected to_host, to_device, latency, "
                             f"full_duplex") from None


@dataclass(frozen=True)
class Timing:
    """When the ops ran, for a schedule simulated with a :class:`Link`.

    Attributes
    ----------
    makespan : float
        When the last op of either lane ended.
    start, end : tuple of float
        Per op: when it started and ended on its lane (a free takes no time; a transfer's on the
        transfer lane, the others' on the compute lane).
    compute_stall : float
        Time the compute lane waited: inputs still being prefetched, frees waiting for their offload.
    transfer_stall : float
        Time copies waited beyond their issue and their lane: an offload for its tensor to be
        computed, a prefetch for its offload.
    host_peak : int
        The most bytes held in host memory at once.
    to_host, to_device : int
        Bytes copied each way.
    """

    makespan: float
    start: tuple[float, ...]
    end: tuple[float, ...]
    compute_stall: float
    transfer_stall: float
    host_peak: int
    to_host: int
    to_device: int

    def summary(self) -> dict[str, Any]:
        return {"makespan": self.makespan, "compute_stall": self.compute_stall,
                "transfer_stall": self.transfer_stall, "host_peak": self.host_peak,
                "bytes_to_host": self.to_host, "bytes_to_device": self.to_device}


class Lifetime(NamedTuple):
    """One stay of a tensor in memory: computed at step ``start``, freed at ``end`` (None: never)."""

    node: str
    start: int
    end: int | None
    occurrence: int  # 1 for the first computation, 2 for the first recomputation, ...


@dataclass(frozen=True)
class SimulationResult:
    """What the simulator measured.

    Attributes
    ----------
    peak : int
        The largest memory reached, in bytes (at least the pinned bytes), an op's transient bytes
        included while it runs.
    peak_step : int
        The op at which the peak was first reached (-1: before any op, only pinned memory).
    cost : float
        Sum of ``cost`` over every compute op (recomputations included).
    start_memory : int
        Pinned bytes: memory before the first op.
    memory : tuple of int
        Memory after each op: the timeline the app animates.
    transient : tuple of int
        Bytes each op's kernel held beyond its memory after it while it ran (its workspace and the
        op's other outputs the schedule does not hold; 0 for frees and ops without any): the memory
        *during* op ``i`` is ``memory[i] + transient[i]``. Empty when no op held any.
    compute_counts : mapping of str to int
        How many times each computed node was computed.
    ops : tuple of (str, str)
        The ops simulated.
    timing : Timing or None
        When each op ran on the compute and transfer lanes, the makespan, stalls, host memory and
        bytes moved, for a schedule simulated with a :class:`Link` (None without one: the makespan
        is then the cost).
    """

    peak: int
    peak_step: int
    cost: float
    start_memory: int
    memory: tuple[int, ...]
    compute_counts: Mapping[str, int]
    ops: tuple[Op, ...]
    transient: tuple[int, ...] = ()
    timing: Timing | None = None

    @property
    def makespan(self) -> float:
        """When the step ends: the cost without transfers, else the later of the two lanes."""
        return self.timing.makespan if self.timing is not None else self.cost

    @property
    def computes(self) -> int:
        """Number of compute ops."""
        return sum(self.compute_counts.values())

    @property
    def recomputes(self) -> int:
        """Compute ops beyond the first computation of each node."""
        return self.computes - len(self.compute_counts)

    @property
    def recomputed_nodes(self) -> tuple[str, ...]:
        """Nodes computed more than once."""
        return tuple(n for n, c in self.compute_counts.items() if c > 1)

    def summary(self) -> dict[str, Any]:
        """The figures the CLI and the app report."""
        return {"valid": True, "peak": self.peak, "cost": self.cost, "computes": self.computes,
                "recomputes": self.recomputes}

    @cached_property
    def lifetimes(self) -> tuple[Lifetime, ...]:
        """Every stay of every tensor in memory, in order of computation."""
        open_at: dict[str, int] = {}
        seen: dict[str, int] = {}
        done: list[Lifetime] = []
        for step, (action, node) in enumerate(self.ops):
            if action == COMPUTE:
                open_at[node] = step
                seen[node] = seen.get(node, 0) + 1
            elif action == PREFETCH:  # back on the device: a stay of the same computation
                open_at[node] = step
            elif action == FREE:
                done.append(Lifetime(node, open_at.pop(node), step, seen[node]))
        done.extend(Lifetime(n, s, None, seen[n]) for n, s in open_at.items())
        done.sort(key=lambda life: life.start)
        return tuple(done)

    def resident_after(self, graph: ComputeGraph, step: int) -> list[str]:
        """Ids resident right after op ``step`` (pinned nodes included); step -1 is the start."""
        resident = {n.id for n in graph.nodes if n.pinned}
        for action, node in self.ops[: step + 1]:
            if action in (COMPUTE, PREFETCH):
                resident.add(node)
            elif action == FREE:
                resident.discard(node)
        return [i for i in graph.ids if i in resident]


def simulate(graph: ComputeGraph, schedule: Schedule | Iterable[Op], budget: int | None = None,
             link: Link | None = None) -> SimulationResult:
    """Run a schedule against the memory model and measure it.

    Parameters
    ----------
    graph : ComputeGraph
    schedule : Schedule or iterable of (action, node id)
    budget : int, optional
        When given, device memory above it is also a violation (reported at the step it happens).
    link : Link, optional
        The transfer lane: needed by offload and prefetch ops; with it the result carries their
        :class:`Timing` (a schedule without transfers then has the cost as its makespan).

    Returns
    -------
    SimulationResult

    Raises
    ------
    InvalidSchedule
        At the first op that breaks a rule, or at the end if an output was never computed.
    """
    ops = schedule.ops if isinstance(schedule, Schedule) else tuple((str(a), str(n)) for a, n in schedule)
    index = graph.index
    indexed = []
    for step, (action, node) in enumerate(ops):
        i = index.get(node)
        if i is None:
            raise InvalidSchedule(step, (action, node), f"unknown node {node!r}: the graph has no node with that id")
        indexed.append((action, i))
    core = _simulate_core(graph, indexed, budget, link)
    ids = graph.ids
    compute_counts = {ids[i]: c for i, c in enumerate(core.counts) if c}
    return SimulationResult(peak=core.peak, peak_step=core.peak_step, cost=core.cost, start_memory=graph.pinned_bytes,
                            memory=tuple(core.memory), compute_counts=compute_counts, ops=ops,
                            transient=tuple(core.held) if any(core.held) else (), timing=core.timing)


def measure_indexed(graph: ComputeGraph, ops: Sequence[tuple[str, int]], budget: int | None = None,
                    link: Link | None = None) -> tuple[int, float]:
    """``(peak, cost)`` of ops on node indices (a solver's working form), by the same rules as :func:`simulate`
    (over ``link`` for a schedule with transfers).

    Raises
    ------
    InvalidSchedule
        As :func:`simulate` does (the op is reported with the node's id).
    """
    core = _simulate_core(graph, ops, budget, link)
    return core.peak, core.cost


class _Core(NamedTuple):
    """What the simulator's loop measured, on node indices."""

    peak: int
    peak_step: int
    cost: float
    memory: list[int]
    """Memory after each op."""
    counts: list[int]
    """Computes per node index."""
    held: list[int]
    """What each op's kernel held beyond the memory after it."""
    timing: Timing | None
    """The lanes' timing (with a link)."""


def _simulate_core(graph: ComputeGraph, ops: Sequence[tuple[str, int]], budget: int | None,
                   link: Link | None = None) -> _Core:
    """The one simulator's loop over index ops (see :class:`_Core`)."""
    mem = graph.mem
    transient = graph.transient
    siblings = graph.siblings
    cost = graph.cost
    pinned = graph.pinned
    preds = graph.pred_idx
    ids = graph.ids
    resident = bytearray(1 if p else 0 for p in pinned)
    counts = [0] * len(graph)
    memory = graph.pinned_bytes
    peak, peak_step = memory, -1
    total_cost = 0.0
    timeline = [0] * len(ops)
    held = [0] * len(ops)
    previous = -1  # the node the op before computed (-1 after a free)
    lanes = _Lanes(graph, link, len(ops)) if link is not None else None
    for step, (action, i) in enumerate(ops):
        if lanes is not None:
            lanes.run(step, action, i)
        elif action in TRANSFERS:
            raise InvalidSchedule(step, (action, ids[i]), f"{'an' if action == OFFLOAD else 'a'} {action} needs the "
                                                          f"transfer lane's bandwidth: simulate with a Link (on the "
                                                          f"command line, --bandwidth)")
        if action == COMPUTE:
            if pinned[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is pinned: pinned nodes are always resident "
                                                              f"and never computed")
            if resident[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is already resident; free it before "
                                                              f"computing it again")
            missing = [j for j in preds[i] if not resident[j]]
            if missing:
                names = ", ".join(f"'{ids[j]}'" for j in missing[:5]) + (" ..." if len(missing) > 5 else "")
                raise InvalidSchedule(step, (action, ids[i]), f"predecessor(s) of '{ids[i]}' not resident: {names}; "
                                                              f"compute them first")
            resident[i] = 1
            memory += mem[i]
            total_cost += cost[i]
            counts[i] += 1
            if previous >= 0 and previous in siblings[i]:  # taken from the call that computed its sibling
                extra = 0
            else:
                extra = transient[i] + sum(mem[j] for j in siblings[i] if not resident[j])
            held[step] = extra
            during = memory + extra
            previous = i
            if during > peak:
                peak, peak_step = during, step
            if budget is not None and during > budget:
                inside = f" ({extra:,} of them held by the kernel while it runs)" if extra else ""
                raise InvalidSchedule(step, (action, ids[i]), f"memory {during:,} bytes{inside} exceeds the budget "
                                                              f"of {budget:,} bytes")
        elif action == FREE:
            if pinned[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is pinned: pinned nodes are never freed")
            if not resident[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is not resident, so it cannot be freed")
            resident[i] = 0
            memory -= mem[i]
            previous = -1
        elif action == PREFETCH:
            if resident[i]:
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is already resident on the device; "
                                                              f"only a tensor freed after its offload is prefetched")
            resident[i] = 1
            memory += mem[i]
            previous = -1
            if memory > peak:
                peak, peak_step = memory, step
            if budget is not None and memory > budget:
                raise InvalidSchedule(step, (action, ids[i]), f"memory {memory:,} bytes (the prefetched tensor's "
                                                              f"included from the op on) exceeds the budget of "
                                                              f"{budget:,} bytes")
        elif action == OFFLOAD:
            if not resident[i] or pinned[i]:
                state = "pinned" if pinned[i] else "not resident"
                raise InvalidSchedule(step, (action, ids[i]), f"'{ids[i]}' is {state}: only a computed tensor on the "
                                                              f"device is offloaded")
            previous = -1
        else:
            raise InvalidSchedule(step, (action, ids[i]), f"unknown action {action!r}; expected one of "
                                                          f"{', '.join(ACTIONS)}")
        timeline[step] = memory
    never = [ids[o] for o in graph.output_idx if counts[o] == 0]
    if never:
        names = ", ".join(f"'{n}'" for n in never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
        raise InvalidSchedule(len(ops), None, f"output(s) never computed: {names}")
    return _Core(peak, peak_step, total_cost, timeline, counts, held, lanes.timing() if lanes is not None else None)


class _Lanes:
    """The compute lane's clock and the transfer lane(s) of :func:`_simulate_core` (see the module notes)."""

    def __init__(self, graph: ComputeGraph, link: Link, steps: int):
        self.graph, self.link = graph, link
        self.now = 0.0  # the compute lane's clock: when its next op may start
        self.free_at = {OFFLOAD: 0.0, PREFETCH: 0.0}  # when each direction's lane is free
        self.ready: dict[int, float] = {}  # tensor -> when its data is on the device (computed, or prefetched)
        self.offloaded: dict[int, float] = {}  # tensor -> when its host copy is complete
        self.start, self.end = [0.0] * steps, [0.0] * steps
        self.compute_stall = self.transfer_stall = 0.0
        self.host = self.host_peak = 0
        self.moved = {OFFLOAD: 0, PREFETCH: 0}
        self.last = 0.0

    def run(self, step: int, action: str, i: int) -> None:
        """Time op ``step`` (checked for what only the lanes know; the memory rules are checked by the caller)."""
        graph = self.graph
        if action == COMPUTE:
            waits = max((self.ready.get(j, 0.0) for j in graph.pred_idx[i]), default=0.0)
            self._stall_until(waits)
            self.start[step] = self.now
            self.now += graph.cost[i]
            self.end[step] = self.ready[i] = self.now
        elif action == FREE:
            self._stall_until(max(self.offloaded.get(i, 0.0), self.ready.get(i, 0.0)))
            self.start[step] = self.end[step] = self.now
        elif action in TRANSFERS:
            op = (action, graph.ids[i])
            if action == OFFLOAD:
                if i in self.offloaded:
                    raise InvalidSchedule(step, op, f"'{graph.ids[i]}' already has a host copy")
                data_from = self.ready.get(i, 0.0)  # computed (a host copy is made once: never a prefetch's)
            else:
                if i not in self.offloaded:
                    raise InvalidSchedule(step, op, f"'{graph.ids[i]}' has no host copy to prefetch: offload it first")
                data_from = self.offloaded[i]
            lane = action if self.link.full_duplex else OFFLOAD
            issued = max(self.now, self.free_at[lane])
            begin = max(issued, data_from)
            self.transfer_stall += begin - issued
            finish = begin + self.link.duration(action, graph.mem[i])
            self.free_at[lane] = finish
            self.start[step], self.end[step] = begin, finish
            self.moved[action] += graph.mem[i]
            if action == OFFLOAD:
                self.offloaded[i] = finish
                self.host += graph.mem[i]
                self.host_peak = max(self.host_peak, self.host)
            else:
                self.ready[i] = finish
        self.last = max(self.last, self.end[step])

    def _stall_until(self, moment: float) -> None:
        if moment > self.now:
            self.compute_stall += moment - self.now
            self.now = moment

    def timing(self) -> Timing:
        return Timing(max(self.last, self.now), tuple(self.start), tuple(self.end), self.compute_stall,
                      self.transfer_stall, self.host_peak, self.moved[OFFLOAD], self.moved[PREFETCH])
