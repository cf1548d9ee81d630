"""The memory map: where in the device's address space every tensor of a schedule lives, step by step.

A schedule replayed through the caching-allocator model (:func:`remat_core.schedule.replay`) places each
tensor instance at an address. The map draws the reserved segments one above the other (their synthetic
addresses leave gaps; the map closes them), each block a rectangle from the op that allocated it to the op
that freed it, coloured by its tensor (the same name, the same colour); what no block covers inside a segment
is free. Below it, per step: reserved and allocated bytes, and the fragmentation (the share of the free
reserved bytes outside the largest free block).

Each block is a bar (one trace): clicking it selects a point whose ``customdata`` is ``[node id, owner]``: the explorer opens that
tensor's Why page.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..graph import ComputeGraph, node_labels
from ..schedule import AllocatorReplay
from .palette import GRID, base_layout, plotly_text, unit_for

MAX_BLOCKS = 4000
"""Blocks drawn at most (the largest, the pinned ones counted): a browser stays quick with this many shapes."""
TENSOR_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf", "#bcbd22")
"""A tensor's colour is picked from these by a hash of its id: stable across schedules, budgets and sessions."""
SEGMENT_COLOR = "#f1f1f1"
PINNED_COLOR = "#7b5ea7"


def tensor_color(node_id: str) -> str:
    digest = hashlib.blake2b(node_id.encode(), digest_size=2).digest()
    return TENSOR_COLORS[int.from_bytes(digest, "big") % len(TENSOR_COLORS)]


@dataclass(frozen=True)
class MapLayout:
    """Where each segment starts on the map's byte axis (segments stacked in the order they were reserved)."""

    offsets: dict[int, int]
    sizes: dict[int, int]
    total: int

    def offset_of(self, address: int) -> int:
        base = max((a for a in self.offsets if a <= address), default=min(self.offsets))
        return self.offsets[base] + address - base


def map_layout(replayed: AllocatorReplay) -> MapLayout:
    """The segments of ``replayed`` (every one ever reserved, or mapped) stacked from 0 in the order reserved."""
    offsets: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for entry in replayed.trace:
        if entry["action"] == "segment_alloc":
            sizes[entry["addr"]] = entry["size"]
        elif entry["action"] == "segment_map":  # pages mapped at the end of a growing segment
            base = next((a for a in sizes if a <= entry["addr"] <= a + sizes[a]), None)
            if base is None:
                sizes[entry["addr"]] = entry["size"]
            else:
                sizes[base] += entry["size"]
    for segment in replayed.segments:  # an expandable segment maps pages at its end: one base
        sizes[segment.address] = max(sizes.get(segment.address, 0), segment.size)
    total = 0
    for address in sorted(sizes):
        offsets[address] = total
        total += sizes[address]
    return MapLayout(offsets, sizes, total)


def memory_map_figure(graph: ComputeGraph, replayed: AllocatorReplay, *, max_blocks: int = MAX_BLOCKS,
                      height: int = 620) -> go.Figure:
    """The map of ``replayed`` (address by step, one rectangle per block) over its reserved, allocated and
    fragmentation curves."""
    labels = node_labels(graph)
    layout = map_layout(replayed)
    unit = unit_for(max(layout.total, 1))
    steps = len(replayed.reserved)
    blocks = sorted(replayed.blocks, key=lambda b: -b.size)[:max_blocks]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06)
    for address, offset in layout.offsets.items():
        top = offset + layout.sizes[address]
        fig.add_shape(type="rect", x0=-0.5, x1=steps - 0.5, y0=offset / unit.size, y1=top / unit.size,
                      fillcolor=SEGMENT_COLOR, line={"color": "#d0d0d0", "width": 1}, layer="below", row=1, col=1)
    centres, widths, bases, heights, colors, data, text = [], [], [], [], [], [], []
    for block in blocks:
        pinned = block.start < 0
        x0 = max(block.start, 0) - 0.5
        x1 = (steps if block.end is None else block.end + 1) - 0.5
        offset = layout.offset_of(block.address)
        centres.append((x0 + x1) / 2)
        widths.append(x1 - x0)
        bases.append(offset / unit.size)
        heights.append(block.size / unit.size)
        colors.append(PINNED_COLOR if pinned else tensor_color(block.tensor))
        data.append([block.tensor, block.owner])
        until = "the end" if block.end is None else f"step {block.end}"
        text.append(f"{plotly_text(labels.get(block.tensor, block.tensor))}<br>{block.size:,} bytes "
                    f"({block.requested:,} asked) at +{offset:,}<br>"
                    + ("pinned" if pinned else f"from step {block.start} to {until}"))
    fig.add_trace(go.Bar(x=centres, y=heights, base=bases, width=widths, name="block", customdata=data,
                         hovertext=text, hoverinfo="text", showlegend=False,
                         marker={"color": colors, "line": {"color": "white", "width": 0.4}}), row=1, col=1)
    x = list(range(steps))
    fig.add_trace(go.Scatter(x=x, y=[r / unit.size for r in replayed.reserved], name="reserved",
                             line={"color": "#555555", "width": 1.5}, hovertemplate="reserved %{y:.3g} "
                             + unit.name + "<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=[a / unit.size for a in replayed.allocated], name="allocated",
                             line={"color": "#4e79a7", "width": 1.5}, hovertemplate="allocated %{y:.3g} "
                             + unit.name + "<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=[100 * f for f in replayed.fragmentation], name="fragmentation (%)",
                             line={"color": "#e15759", "width": 1.2, "dash": "dot"}, yaxis="y3",
                             hovertemplate="fragmentation %{y:.1f}%<extra></extra>"), row=2, col=1)
    fig.update_layout(**base_layout(height=height, hovermode="closest", clickmode="event+select", barmode="overlay",
                                    bargap=0,
                                    margin={"l": 70, "r": 60, "t": 40, "b": 45}))
    fig.update_layout(yaxis3={"overlaying": "y2", "side": "right", "range": [0, 100], "title": "fragmented %",
                              "showgrid": False, "anchor": "x2"})
    fig.update_xaxes(title_text="step (op index)", row=2, col=1, **GRID)
    fig.update_xaxes(row=1, col=1, **GRID)
    fig.update_yaxes(title_text=f"address ({unit.name})", row=1, col=1, range=[0, layout.total / unit.size], **GRID)
    fig.update_yaxes(title_text=unit.name, row=2, col=1, rangemode="tozero", **GRID)
    return fig

