"""A plan's offloads installed in autograd: ``saved_tensors_hooks`` that copy the tensors the plan offloads to the
host when the forward saves them and bring them back before the backward reads them.

Autograd saves tensors for the backward (a convolution its input, a ReLU its output); the hooks see
each one as it is saved (``pack``) and as the backward asks for it (``unpack``). A saved tensor
whose storage belongs to a value the plan offloads (:attr:`~.decisions.PlanDecisions.offloaded`) is
moved; every other one is kept as autograd would. On CUDA the copies overlap the compute, as the
simulator's transfer lane assumes:

- one copy stream, which waits for the compute stream's event before each copy to the host;
- pinned host buffers allocated before the step, one per offloaded value (its whole storage, so
  views saved of it come back as the same views);
- the device block of a copied tensor is guarded by ``record_stream`` until the copy is done (the
  caching allocator reuses it only after the copy stream passes that point);
- prefetches in reverse order of saving, the first when the backward starts and each next one when
  the backward reads the one before, so each is under way before the op that needs it; the
  compute stream waits for a prefetch's event only when it reads the tensor.

On a CPU the host is the device: nothing is copied (the tensor is its own host copy), and the
report says so. What the hooks cannot reach is reported: a tensor saved inside a checkpoint region
goes through the region's own hooks (and SAC's cache), not these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import torch


@dataclass
class _Stored:
    """An offloaded storage: its host bytes, and on the device again once prefetched."""

    name: str
    nbytes: int
    host: torch.Tensor
    device_bytes: torch.Tensor | None = None
    arrived: Any = None  # a CUDA event recorded on the copy stream after the prefetch
    timings: list = field(default_factory=list)
    waiting: int = 0  # saved tensors of it the backward has not read yet


class OffloadHooks:
    """``pack``/``unpack`` for ``torch.autograd.graph.saved_tensors_hooks`` (see the module notes).

    Parameters
    ----------
    offloaded : mapping of str to (str, torch.Tensor or None)
        The FX values whose storage the plan offloads (:func:`offloaded_values`): FX name -> the graph
        node that owns the storage, and a tensor of the value's shape (FX ``meta["val"]``, a fake
        tensor) to size its pinned buffer ahead.
    device : torch.device
        Where the step runs.
    """

    def __init__(self, offloaded: Mapping[str, tuple[str, Any]], device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.node_of = {name: node for name, (node, _) in offloaded.items()}
        self.owner: dict[int, str] = {}  # storage data_ptr -> the graph node whose storage it is
        self.stored: dict[str, _Stored] = {}  # by graph node
        self.order: list[str] = []  # graph nodes in the order their storage was first saved
        self.to_host = self.to_device = 0
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        sizes: dict[str, int] = {}
        for node, value in offloaded.values():
            sizes[node] = max(sizes.get(node, 0), storage_bytes(value))
        self.buffers = {node: torch.empty(size, dtype=torch.uint8, pin_memory=True)
                        for node, size in sizes.items() if self.cuda and size}

    # -- the forward ----------------------------------------------------------------------------

    def produced(self, name: str, value: Any) -> None:
        """Note which storage a forward value lives in (called by the forward for each op's output)."""
        if name in self.node_of and isinstance(value, torch.Tensor):
            self.owner.setdefault(value.untyped_storage().data_ptr(), self.node_of[name])

    def pack(self, tensor: torch.Tensor) -> Any:
        name = self.owner.get(tensor.untyped_storage().data_ptr()) if tensor.device == self.device else None
        if name is None:
            return tensor
        if name not in self.stored:
            self._offload(name, tensor)
        self.stored[name].waiting += 1
        return name, tensor.dtype, tensor.size(), tensor.stride(), tensor.storage_offset()

    def _offload(self, name: str, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        self.to_host += nbytes
        self.order.append(name)
        if not self.cuda:  # the host is the device: the storage is its own host copy
            self.stored[name] = _Stored(name, nbytes, torch.empty(0, dtype=torch.uint8).set_(storage))
            return
        source = torch.empty(0, dtype=torch.uint8, device=self.device).set_(storage)
        host = self.buffers.get(name)
        if host is None or host.numel() != nbytes:
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        stored = self.stored[name] = _Stored(name, nbytes, host)
        saved = torch.cuda.current_stream(self.device).record_event()
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(saved)
            start, end = _timing_events()
            start.record(self.stream)
            host.copy_(source, non_blocking=True)
            end.record(self.stream)
        source.record_stream(self.stream)  # the block is not reused before the copy is done
        stored.timings.append(("to_host", nbytes, start, end))

    # -- the backward ---------------------------------------------------------------------------

    def start_backward(self) -> None:
        """Issue the first prefetch (the value saved last, read first); call it right before ``backward()``."""
        self._prefetch_next()

    def unpack(self, packed: Any) -> torch.Tensor:
        if isinstance(packed, torch.Tensor):
            return packed
        name, dtype, size, stride, offset = packed
        stored = self.stored[name]
        if stored.device_bytes is None:  # not prefetched yet: bring it now
            self._prefetch(stored)
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_event(stored.arrived)
        self._prefetch_next()
        value = torch.empty(0, dtype=dtype, device=stored.device_bytes.device).set_(
            stored.device_bytes.untyped_storage(), offset, size, stride)
        stored.waiting -= 1
        if stored.waiting == 0:  # read for the last time: the backward's reference is the only one left
            stored.device_bytes = stored.host = torch.empty(0, dtype=torch.uint8)
        return value

    def _prefetch_next(self) -> None:
        """Start the next prefetch in reverse order of saving, if any is left."""
        for name in reversed(self.order):
            stored = self.stored[name]
            if stored.device_bytes is None:
                self._prefetch(stored)
                return

    def _prefetch(self, stored: _Stored) -> None:
        self.to_device += stored.nbytes
        if not self.cuda:
            stored.device_bytes = stored.host
            return
        with torch.cuda.stream(self.stream):
            start, end = _timing_events()
            start.record(self.stream)
            device_bytes = stored.host.to(self.device, non_blocking=True)
            end.record(self.stream)
            stored.arrived = self.stream.record_event()
        device_bytes.record_stream(torch.cuda.current_stream(self.device))
        stored.device_bytes = device_bytes
        stored.timings.append(("to_device", stored.nbytes, start, end))

    # -- the report -----------------------------------------------------------------------------

    def missed(self) -> list[str]:
        """Graph nodes the plan offloads whose storage the hooks never saw saved (saved inside a checkpoint region,
        or not at all: a value only the forward reads)."""
        return sorted(set(self.node_of.values()) - set(self.stored))

    def summary(self) -> dict[str, Any]:
        """What moved: the bytes each way, and on CUDA the bandwidth the copies reached (bytes per second)."""
        doc: dict[str, Any] = {"offloaded_values": len(self.stored), "bytes_to_host": self.to_host,
                               "bytes_to_device": self.to_device,
                               "transfers": "copies on a side CUDA stream" if self.cuda else
                               "none: on a CPU the host is the device, so the offloaded tensors stayed where they were"}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            for direction in ("to_host", "to_device"):
                spans = [(n, s.elapsed_time(e) / 1e3) for stored in self.stored.values()
                         for d, n, s, e in stored.timings if d == direction]
                seconds = sum(t for _, t in spans)
                doc[f"bandwidth_{direction}"] = sum(n for n, _ in spans) / seconds if seconds > 0 else None
        return doc


def storage_bytes(value: Any) -> int:
    """Bytes of the storage a tensor of ``value``'s shape and dtype fills (contiguous)."""
    return int(value.numel() * value.element_size()) if isinstance(value, torch.Tensor) else 0


def _timing_events() -> tuple[Any, Any]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def offloaded_values(decisions: Any, binding: Any, nodes: Iterable[Any]) -> dict[str, tuple[str, Any]]:
    """FX name -> (the offloaded graph node owning its storage, its FX ``meta["val"]``) for every forward value
    whose storage a node the plan offloads owns (a value and its views)."""
    found = {}
    for node in nodes:
        owners = [owner for owner in binding.storage.get(node.name, ()) if owner in decisions.offloaded]
        if owners:
            found[node.name] = (owners[0], node.meta.get("val"))
    return found
