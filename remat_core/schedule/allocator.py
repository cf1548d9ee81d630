"""A model of PyTorch's CUDA caching allocator, and a schedule's allocations replayed through it.

The simulator counts bytes. A GPU holds more: PyTorch's caching allocator rounds every request,
serves it from a pool of cached blocks, cuts new segments from the device in large pieces, and
never gives a segment back on its own, so what is *reserved* can be well above what is allocated,
and free memory can be scattered in pieces too small for the next request (fragmentation). This
module follows the rules of ``c10/cuda/CUDACachingAllocator.cpp`` (2024-2026 versions; one stream):

- ``round_size``: under 512 bytes -> 512; else up to a multiple of 512 (or to a power-of-two
  division, with ``roundup_power2_divisions``);
- two pools: requests up to 1 MiB (rounded) from the small pool, larger from the large pool;
- best fit: the smallest free block of the pool that holds the request (the lowest address on a tie),
  refused when it is an oversize block (``max_split_size``) for a small request, or more than
  ``max_non_split_rounding`` too large for an oversize one;
- no block: a new segment, 2 MiB for a small request, 20 MiB for one under 10 MiB, else the
  request rounded up to 2 MiB;
- the request takes the block's low addresses; the rest stays free when it is at least 512 bytes
  (small pool) or more than 1 MiB and the request is under ``max_split_size`` (large pool);
- a free merges with its free neighbours in the segment; segments are never released, unless a
  device ``capacity`` is given and a request would pass it: then the allocator first releases every
  segment with nothing allocated in it (``release_cached_blocks``), and fails (out of memory) if
  that is not enough;
- ``expandable_segments``: one segment per pool grows in pages (2 MiB small, 20 MiB large) as
  needed, every block splits at 512 bytes.

:func:`allocation_events` turns a schedule into the requests a step makes (each op's outputs, the
other outputs and workspace its kernel holds while it runs, then their frees), and
:func:`replay` runs them through :class:`CachingAllocator`: reserved and allocated bytes, the
largest free block and fragmentation after every op of the schedule, every block's address and
lifetime (the explorer's memory map), and the allocator's trace in the shape PyTorch's memory
snapshots have (:func:`memory_viz_snapshot`).
"""

from __future__ import annotations

import bisect
import pickle
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import RematError
from ..graph import ComputeGraph
from .schedule import COMPUTE, FREE, PREFETCH, Op, Schedule

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20
DEFAULT_MAX_NON_SPLIT_ROUNDING = 20 << 20
BASE_ADDRESS = 0x7F0000000000
"""Where the first segment starts (addresses are synthetic: they only decide ties between equal blocks)."""


class OutOfMemory(RematError):
    """A request the device's capacity cannot hold, even after every cached segment was released."""


class AllocatorSettingError(RematError, ValueError):
    """Allocator settings that PyTorch would not take (an unknown key, a value out of range)."""


@dataclass(frozen=True)
class AllocatorConfig:
    """The caching allocator's settings (``PYTORCH_CUDA_ALLOC_CONF``).

    Attributes
    ----------
    max_split_size : int or None
        Bytes: blocks this large or larger are never split (``max_split_size_mb``; None: unlimited).
    expandable_segments : bool
        One growing segment per pool instead of many fixed ones.
    roundup_power2_divisions : int
        Round requests above 1 MiB up to this many divisions between powers of two (0 or 1: off).
    max_non_split_rounding : int
        How much larger than an oversize request a cached oversize block may be and still serve it.
    capacity : int or None
        The device's memory: a request past it first releases the cached segments, then fails.
    """

    max_split_size: int | None = None
    expandable_segments: bool = False
    roundup_power2_divisions: int = 0
    max_non_split_rounding: int = DEFAULT_MAX_NON_SPLIT_ROUNDING
    capacity: int | None = None

    @classmethod
    def parse(cls, text: str) -> "AllocatorConfig":
        """Read ``PYTORCH_CUDA_ALLOC_CONF``-style text: ``max_split_size_mb:128,expandable_segments:True``.

        Raises
        ------
        AllocatorSettingError
            For an unknown key or a value that does not fit it (the message lists what works).
        """
        values: dict[str, object] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition(":")
            key, value = key.strip(), value.strip()
            if not sep or not value:
                raise AllocatorSettingError(f"allocator setting {item!r} is not key:value; e.g. max_split_size_mb:128")
            try:
                if key == "max_split_size_mb":
                    mb = int(value)
                    if mb < 20:
                        raise ValueError
                    values["max_split_size"] = mb << 20
                elif key == "expandable_segments":
                    if value.lower() not in ("true", "false"):
                        raise ValueError
                    values["expandable_segments"] = value.lower() == "true"
                elif key == "roundup_power2_divisions":
                    divisions = int(value)
                    if divisions < 0 or divisions & (divisions - 1):
                        raise ValueError
                    values["roundup_power2_divisions"] = divisions
                elif key == "max_non_split_rounding_mb":
                    values["max_non_split_rounding"] = int(value) << 20
                else:
                    raise KeyError(key)
            except KeyError:
                raise AllocatorSettingError(f"unknown allocator setting {key!r}; known: max_split_size_mb (>= 20), "
                                            f"expandable_segments (True/False), roundup_power2_divisions (a power "
                                            f"of 2), max_non_split_rounding_mb") from None
            except ValueError:
                raise AllocatorSettingError(f"allocator setting {key}:{value} does not fit: max_split_size_mb takes "
                                            f"an integer >= 20, expandable_segments True or False, "
                                            f"roundup_power2_divisions a power of 2, max_non_split_rounding_mb an "
                                            f"integer") from None
        return cls(**values)

    def text(self) -> str:
        """The settings that differ from PyTorch's defaults, as ``PYTORCH_CUDA_ALLOC_CONF`` text ('' for none)."""
        parts = []
        if self.max_split_size is not None:
            parts.append(f"max_split_size_mb:{self.max_split_size >> 20}")
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        if self.roundup_power2_divisions:
            parts.append(f"roundup_power2_divisions:{self.roundup_power2_divisions}")
        if self.max_non_split_rounding != DEFAULT_MAX_NON_SPLIT_ROUNDING:
            parts.append(f"max_non_split_rounding_mb:{self.max_non_split_rounding >> 20}")
        return ",".join(parts)


def round_size(size: int, config: AllocatorConfig = AllocatorConfig()) -> int:
    """The bytes the allocator hands out for a request of ``size`` bytes."""
    if size < MIN_BLOCK:
        return MIN_BLOCK
    divisions = config.roundup_power2_divisions
    if divisions > 1 and size > MIN_BLOCK * divisions and size > SMALL_SIZE:
        low = 1 << (size.bit_length() - 1)
        if low == size:
            return size
        step = low // divisions
        return -(-size // step) * step
    return -(-size // MIN_BLOCK) * MIN_BLOCK


def segment_size(rounded: int) -> int:
    """The bytes a new segment takes from the device for a rounded request (``get_allocation_size``)."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


@dataclass
class Block:
    """A piece of a segment: free, or one request's."""

    address: int
    size: int
    segment: "Segment"
    owner: str | None = None
    requested: int = 0
    prev: "Block | None" = None
    next: "Block | None" = None

    @property
    def free(self) -> bool:
        return self.owner is None


@dataclass
class Segment:
    """Device memory the allocator took in one piece (or one pool's growing mapping, with expandable segments)."""

    address: int
    size: int
    pool: str
    first: Block | None = None

    def blocks(self) -> list[Block]:
        out, block = [], self.first
        while block is not None:
            out.append(block)
            block = block.next
        return out


class CachingAllocator:
    """The caching allocator's state and rules (see the module notes); one stream."""

    def __init__(self, config: AllocatorConfig = AllocatorConfig()) -> None:
        self.config = config
        self.segments: list[Segment] = []
        self.free: dict[str, list[tuple[int, int, Block]]] = {"small": [], "large": []}
        self.live: dict[str, Block] = {}
        self.reserved = 0
        self.allocated = 0
        self.trace: list[dict] = []
        self._next_address = BASE_ADDRESS

    # -- requests -------------------------------------------------------------------------------

    def malloc(self, owner: str, size: int) -> Block:
        """Serve ``size`` bytes for ``owner`` (a name unique among live blocks); the block it got."""
        if owner in self.live:
            raise ValueError(f"{owner!r} already holds a block")
        rounded = round_size(size, self.config)
        pool = "small" if rounded <= SMALL_SIZE else "large"
        block = self._best_fit(pool, rounded)
        if block is None:
            block = self._new_segment(pool, rounded)
        self._take(block, rounded, owner, size)
        return self.live[owner]

    def free_block(self, owner: str) -> None:
        """Return ``owner``'s block to its pool, merged with its free neighbours."""
        block = self.live.pop(owner)
        self.allocated -= block.size
        self.trace.append({"action": "free_requested", "addr": block.address, "size": block.requested, "stream": 0})
        self.trace.append({"action": "free_completed", "addr": block.address, "size": block.requested, "stream": 0})
        block.owner, block.requested = None, 0
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._unlist(neighbour)
                block = self._merge(block, neighbour)
        self._list(block)

    # -- figures --------------------------------------------------------------------------------

    def largest_free(self) -> int:
        """The largest free block in any segment."""
        return max((size for pool in self.free.values() for size, _, _ in pool), default=0)

    # -- inside ---------------------------------------------------------------------------------

    def _best_fit(self, pool: str, rounded: int) -> Block | None:
        blocks = self.free[pool]
        k = bisect.bisect_left(blocks, (rounded, -1))
        if k == len(blocks):
            return None
        size, _, block = blocks[k]
        limit = self.config.max_split_size
        if limit is not None and not self.config.expandable_segments:
            if rounded < limit <= size:
                return None
            if rounded >= limit and size >= rounded + self.config.max_non_split_rounding:
                return None
        self._unlist(block)
        return block

    def _new_segment(self, pool: str, rounded: int) -> Block:
        if self.config.expandable_segments:
            return self._grow(pool, rounded)
        size = segment_size(rounded)
        self._make_room(size)
        segment = Segment(self._next_address, size, pool)
        self._next_address += size + (2 << 20)  # a gap: segments are never adjacent
        segment.first = Block(segment.address, size, segment)
        self.segments.append(segment)
        self.reserved += size
        self.trace.append({"action": "segment_alloc", "addr": segment.address, "size": size, "stream": 0})
        return segment.first

    def _grow(self, pool: str, rounded: int) -> Block:
        """Expandable segments: map pages at the end of the pool's one segment (its free tail included)."""
        page = SMALL_BUFFER if pool == "small" else LARGE_BUFFER
        segment = next((s for s in self.segments if s.pool == pool), None)
        if segment is None:
            segment = Segment(self._next_address, 0, pool)
            self._next_address += 1 << 40  # the address space one pool may grow into
            self.segments.append(segment)
        tail = segment.blocks()[-1] if segment.first is not None else None
        have = tail.size if tail is not None and tail.free else 0
        pages = -(-(rounded - have) // page)
        self._make_room(pages * page)
        mapped = pages * page
        self.trace.append({"action": "segment_map", "addr": segment.address + segment.size, "size": mapped,
                           "stream": 0})
        fresh = Block(segment.address + segment.size, mapped, segment)
        segment.size += mapped
        self.reserved += mapped
        if tail is None:
            segment.first = fresh
            return fresh
        tail.next, fresh.prev = fresh, tail
        if tail.free:
            self._unlist(tail)
            return self._merge(tail, fresh)
        return fresh

    def _make_room(self, size: int) -> None:
        """With a capacity: release the cached segments that hold nothing when ``size`` more would pass it."""
        capacity = self.config.capacity
        if capacity is None or self.reserved + size <= capacity:
            return
        for segment in [s for s in self.segments if s.first is not None and s.first.next is None and s.first.free]:
            self._unlist(segment.first)
            self.segments.remove(segment)
            self.reserved -= segment.size
            self.trace.append({"action": "segment_free", "addr": segment.address, "size": segment.size, "stream": 0})
        if self.reserved + size > capacity:
            self.trace.append({"action": "oom", "device_free": capacity - self.reserved, "size": size, "stream": 0})
            raise OutOfMemory(f"the allocator needs {size:,} more bytes with {self.reserved:,} reserved "
                              f"({self.allocated:,} allocated), past the device's {capacity:,}")

    def _take(self, block: Block, rounded: int, owner: str, requested: int) -> None:
        rest = block.size - rounded
        small = block.segment.pool == "small"
        limit = self.config.max_split_size
        split = rest >= MIN_BLOCK if small or self.config.expandable_segments else (
            rest > SMALL_SIZE and (limit is None or rounded < limit))
        if split:
            remainder = Block(block.address + rounded, rest, block.segment, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = remainder
            block.next, block.size = remainder, rounded
            self._list(remainder)
        block.owner, block.requested = owner, requested
        self.live[owner] = block
        self.allocated += block.size
        self.trace.append({"action": "alloc", "addr": block.address, "size": requested, "stream": 0})

    def _merge(self, a: Block, b: Block) -> Block:
        first, second = (a, b) if a.address < b.address else (b, a)
        first.size += second.size
        first.next = second.next
        if second.next is not None:
            second.next.prev = first
        return first

    def _list(self, block: Block) -> None:
        bisect.insort(self.free[block.segment.pool], (block.size, block.address, block))

    def _unlist(self, block: Block) -> None:
        pool = self.free[block.segment.pool]
        k = bisect.bisect_left(pool, (block.size, block.address))
        if k < len(pool) and pool[k][2] is block:
            pool.pop(k)
        else:
            pool.remove(next(item for item in pool if item[2] is block))


# -- a schedule's allocations -----------------------------------------------------------------------------

MALLOC, FREE_EVENT = "malloc", "free"


@dataclass(frozen=True)
class AllocationEvent:
    """One request or free of a step: at op ``step``, ``owner`` (a tensor instance) gets or gives back ``size``."""

    kind: str
    owner: str
    tensor: str
    size: int
    step: int


def allocation_events(graph: ComputeGraph, schedule: Schedule | Sequence[Op]) -> list[AllocationEvent]:
    """The requests and frees a step makes when it runs ``schedule``: per compute, its output, the call's other
    outputs it does not keep and its workspace (freed again at the op's end); per prefetch, the tensor's block
    (requested when the copy is issued); per free, the tensor's block.

    Owners are tensor instances: ``layer1.conv`` computed the second time is ``layer1.conv#2``.
    """
    ops = schedule.ops if isinstance(schedule, Schedule) else tuple(schedule)
    index, mem, transient, siblings, ids = graph.index, graph.mem, graph.transient, graph.siblings, graph.ids
    events: list[AllocationEvent] = []
    times: dict[str, int] = {}
    resident: set[int] = set()
    previous = -1
    for step, (action, node) in enumerate(ops):
        i = index[node]
        if action in (COMPUTE, PREFETCH):  # a prefetch's block is requested when it is issued
            times[node] = times.get(node, 0) + 1
            owner = node if times[node] == 1 else f"{node}#{times[node]}"
            events.append(AllocationEvent(MALLOC, owner, node, mem[i], step))
            if action == PREFETCH:
                resident.add(i)
                previous = -1
                continue
            fresh_call = not (previous >= 0 and previous in siblings[i])
            extras = []
            if fresh_call:
                extras = [(f"{owner}@{ids[j]}", ids[j], mem[j]) for j in siblings[i] if j not in resident]
                if transient[i]:
                    extras.append((f"{owner}@workspace", node, transient[i]))
            events += [AllocationEvent(MALLOC, o, t, s, step) for o, t, s in extras]
            events += [AllocationEvent(FREE_EVENT, o, t, s, step) for o, t, s in reversed(extras)]
            resident.add(i)
            previous = i
        elif action == FREE:
            owner = node if times[node] == 1 else f"{node}#{times[node]}"
            events.append(AllocationEvent(FREE_EVENT, owner, node, mem[i], step))
            resident.discard(i)
            previous = -1
        else:  # an offload reads the block; its free comes later
            previous = -1
    return events


@dataclass(frozen=True)
class PlacedBlock:
    """Where one tensor instance lived: its address and bytes (rounded), from the op that allocated it to the op that
    freed it (None: held to the end)."""

    owner: str
    tensor: str
    address: int
    size: int
    requested: int
    start: int
    end: int | None


@dataclass(frozen=True)
class AllocatorReplay:
    """A schedule's allocations through the caching allocator model.

    Attributes
    ----------
    config : AllocatorConfig
    reserved, allocated, largest_free : tuple of int
        After each op of the schedule, bytes (pinned tensors included: they are allocated before the step, in
        graph order, as a model's weights and inputs are).
    peak_reserved, peak_allocated : int
        The highest, within ops too (a kernel's workspace is allocated and freed inside its op).
    blocks : tuple of PlacedBlock
        Every block that was handed out, in order of allocation.
    trace : tuple of dict
        The allocator's actions (``segment_alloc``, ``alloc``, ``free_requested``, ``free_completed``...), as
        PyTorch's snapshots record them; each carries ``step`` and ``tensor``.
    segments : tuple of Segment
        The segments held at the end.
    """

    config: AllocatorConfig
    reserved: tuple[int, ...]
    allocated: tuple[int, ...]
    largest_free: tuple[int, ...]
    peak_reserved: int
    peak_allocated: int
    blocks: tuple[PlacedBlock, ...]
    trace: tuple[dict, ...]
    segments: tuple[Segment, ...] = field(repr=False, default=())

    @property
    def peaks(self) -> dict[str, int]:
        """``peak_reserved`` and ``peak_allocated``: the figures a schedule solved on reserved bytes carries in its
        stats."""
        return {"peak_reserved": self.peak_reserved, "peak_allocated": self.peak_allocated}

    @property
    def fragmentation(self) -> tuple[float, ...]:
        """After each op: the share of the free reserved bytes that is not in the largest free block (0: all in one)."""
        return tuple(0.0 if r == a else 1.0 - f / (r - a)
                     for r, a, f in zip(self.reserved, self.allocated, self.largest_free))


def replay(graph: ComputeGraph, schedule: Schedule | Sequence[Op],
           config: AllocatorConfig = AllocatorConfig()) -> AllocatorReplay:
    """Run ``schedule``'s allocations (:func:`allocation_events`) through :class:`CachingAllocator`.

    Raises
    ------
    OutOfMemory
        When ``config.capacity`` is set and a request cannot be met.
    """
    ops = schedule.ops if isinstance(schedule, Schedule) else tuple(schedule)
    allocator = CachingAllocator(config)
    reserved = [0] * len(ops)
    allocated = [0] * len(ops)
    largest = [0] * len(ops)
    peak_reserved = peak_allocated = 0
    placed: dict[str, tuple[Block, int, str]] = {}
    blocks: list[PlacedBlock] = []
    events = allocation_events(graph, ops)
    for i in range(len(graph.ids)):
        if graph.pinned[i] and graph.mem[i] > 0:
            node = graph.ids[i]
            placed[node] = (allocator.malloc(node, graph.mem[i]), -1, node)
            allocator.trace[-1].update(step=-1, tensor=node)
    peak_reserved, peak_allocated = allocator.reserved, allocator.allocated
    k = 0
    for step in range(len(ops)):
        while k < len(events) and events[k].step == step:
            event = events[k]
            if event.kind == MALLOC:
                if event.size > 0:
                    block = allocator.malloc(event.owner, event.size)
                    allocator.trace[-1].update(step=step, tensor=event.tensor)
                    placed[event.owner] = (block, step, event.tensor)
            elif event.owner in placed:
                block, start, tensor = placed.pop(event.owner)
                blocks.append(PlacedBlock(event.owner, tensor, block.address, block.size, block.requested, start,
                                          step))
                allocator.free_block(event.owner)
                allocator.trace[-1].update(step=step, tensor=tensor)
                allocator.trace[-2].update(step=step, tensor=tensor)
            peak_reserved = max(peak_reserved, allocator.reserved)
            peak_allocated = max(peak_allocated, allocator.allocated)
            k += 1
        reserved[step], allocated[step], largest[step] = \
            allocator.reserved, allocator.allocated, allocator.largest_free()
    for owner, (block, start, tensor) in placed.items():
        blocks.append(PlacedBlock(owner, tensor, block.address, block.size, block.requested, start, None))
    blocks.sort(key=lambda b: (b.start, b.address))
    return AllocatorReplay(config, tuple(reserved), tuple(allocated), tuple(largest), peak_reserved, peak_allocated,
                           tuple(blocks), tuple(allocator.trace), tuple(allocator.segments))


def memory_viz_snapshot(replay_result: AllocatorReplay, labels: Mapping[str, str] | None = None) -> dict:
    """The replay as the snapshot dict PyTorch's ``torch.cuda.memory._snapshot()`` returns, which memory_viz
    (``pytorch.org/memory_viz``, ``torch.cuda._memory_viz``) reads: the segments held at the end (their blocks
    tiling them) and one device's trace. Each allocation carries a frame naming its tensor (``labels``: node id ->
    name) and the op it happened at. Pickle it with protocol 4 or lower (the viewer reads no other)."""
    names = labels or {}

    def frames(entry: dict) -> list[dict]:
        tensor = entry.get("tensor")
        if tensor is None:
            return []
        return [{"filename": names.get(tensor, tensor), "line": int(entry.get("step", 0)), "name": tensor}]

    segments = []
    for segment in replay_result.segments:
        blocks = []
        for block in segment.blocks():
            item = {"address": block.address, "size": block.size,
                    "state": "inactive" if block.free else "active_allocated"}
            if not block.free:
                item.update(requested_size=block.requested,
                            frames=[{"filename": names.get(block.owner.split("#")[0].split("@")[0], block.owner),
                                     "line": 0, "name": block.owner}])
            blocks.append(item)
        allocated = sum(b["size"] for b in blocks if b["state"] != "inactive")
        segments.append({"device": 0, "address": segment.address, "total_size": segment.size, "stream": 0,
                         "segment_type": segment.pool, "segment_pool_id": (0, 0), "allocated_size": allocated,
                         "active_size": allocated,
                         "requested_size": sum(b.get("requested_size", 0) for b in blocks),
                         "is_expandable": replay_result.config.expandable_segments, "blocks": blocks})
    trace = [{"action": e["action"], "addr": e.get("addr", 0), "size": e.get("size", 0), "stream": 0,
              "frames": frames(e), "time_us": k}
             if e["action"] != "oom" else {"action": "oom", "device_free": e["device_free"], "size": e["size"],
                                          "stream": 0, "frames": [], "time_us": k}
             for k, e in enumerate(replay_result.trace)]
    return {"segments": segments, "device_traces": [trace]}


def snapshot_pickle(replay_result: AllocatorReplay, labels: Mapping[str, str] | None = None) -> bytes:
    """:func:`memory_viz_snapshot` pickled as memory_viz reads it (protocol 4): the bytes of a ``.pickle`` file to
    drop on pytorch.org/memory_viz."""
    return pickle.dumps(memory_viz_snapshot(replay_result, labels), protocol=4)

