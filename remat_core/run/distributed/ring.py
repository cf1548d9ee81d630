"""Point-to-point rounds between workers, as SAR does them: in round ``r`` worker ``p`` sends to ``(p + r) % N``
and receives from ``(p - r) % N``; gradients travel the other way. Every byte is counted by layer and by what
it carried (``forward`` fetches, ``backward`` gradients sent back, ``refetch`` of rows the backward needs)."""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.distributed as dist


class Ring:
    """This worker's end of the rounds, with the bytes it sent and received."""

    def __init__(self, rank: int, workers: int) -> None:
        self.rank, self.workers = rank, workers
        self.sent: dict[tuple[int, str], int] = defaultdict(int)
        self.received: dict[tuple[int, str], int] = defaultdict(int)

    def peers(self, round_: int) -> tuple[int, int]:
        """(to, from) in round ``round_`` of the forward direction."""
        return (self.rank + round_) % self.workers, (self.rank - round_) % self.workers

    def swap(self, to: int, send: torch.Tensor, source: int, into: torch.Tensor, layer: int, what: str) -> None:
        """Send ``send`` to ``to`` while receiving ``into`` from ``source`` (either may be empty: then nothing
        travels that way; the peer knows the same sizes)."""
        requests = []
        if send.numel():
            requests.append(dist.isend(send.contiguous(), to))
            self.sent[(layer, what)] += send.numel() * send.element_size()
        if into.numel():
            requests.append(dist.irecv(into, source))
            self.received[(layer, what)] += into.numel() * into.element_size()
        for request in requests:
            request.wait()

    def totals(self) -> dict:
        """Bytes sent and received, by layer and what they carried."""
        keys = sorted(set(self.sent) | set(self.received))
        return {"sent": sum(self.sent.values()), "received": sum(self.received.values()),
                "by_layer": [{"layer": layer, "what": what, "sent": self.sent[(layer, what)],
                              "received": self.received[(layer, what)]} for layer, what in keys]}

    def reset(self) -> None:
        self.sent.clear()
        self.received.clear()
