"""Colours, units and number formats shared by every figure, kept out of the core data types.

One colour per node kind, so a tensor looks the same in the DAG, the memory timeline, the lifetime
chart and the module bar chart; recomputation has its own colour, never used for a kind.
"""

from __future__ import annotations

from typing import NamedTuple

KIND_COLORS = {
    "input": "#8c8c8c",
    "param": "#7b5ea7",
    "buffer": "#b07aa1",
    "forward": "#4e79a7",
    "loss": "#e15759",
    "backward": "#59a14f",
    "other": "#bab0ac",
}
"""Node kind -> colour (every kind in :data:`remat_core.graph.compute_graph.NODE_KINDS` has one)."""

RECOMPUTE_COLOR = "#f28e2b"
HOST_COLOR = "#9d755d"
"""Bytes in host memory (offloaded tensors)."""
"""Recomputations (a second or later computation of a tensor), in every figure."""

BUDGET_COLOR = "#d62728"
LOWER_BOUND_COLOR = "#555555"
CURSOR_COLOR = "#222222"
HIGHLIGHT_COLOR = "#ffbf00"
DIMMED_COLOR = "#e4e4e4"
FONT_FAMILY = "Inter, 'Source Sans Pro', 'Helvetica Neue', Arial, sans-serif"


class ByteUnit(NamedTuple):
    """A binary unit to show bytes in: its name and its size in bytes."""

    name: str
    size: int


BYTE_UNITS = (ByteUnit("B", 1), ByteUnit("KiB", 2**10), ByteUnit("MiB", 2**20), ByteUnit("GiB", 2**30),
              ByteUnit("TiB", 2**40))


def unit_for(nbytes: float) -> ByteUnit:
    """The largest binary unit in which ``nbytes`` is at least 1 (bytes for anything smaller).

    Axes and sliders use one unit for their whole range, picked from the range's top.
    """
    chosen = BYTE_UNITS[0]
    for unit in BYTE_UNITS:
        if abs(nbytes) >= unit.size:
            chosen = unit
    return chosen


def kind_color(kind: str) -> str:
    """The colour of a node kind (``other``'s colour for a kind without one)."""
    return KIND_COLORS.get(kind, KIND_COLORS["other"])


def base_layout(**overrides) -> dict:
    """Layout settings every figure shares: font, margins, white background, legend on top."""
    layout = {"font": {"family": FONT_FAMILY, "size": 13}, "plot_bgcolor": "white", "paper_bgcolor": "white",
              "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
              "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "xanchor": "left"},
              "hoverlabel": {"font": {"family": FONT_FAMILY}}}
    layout.update(overrides)
    return layout


GRID = {"showgrid": True, "gridcolor": "#eeeeee", "zeroline": False, "linecolor": "#bbbbbb", "showline": True}
"""Axis settings every figure shares."""


def plotly_text(text: str) -> str:
    """Text shown as typed in plotly: plotly reads a few HTML tags, and names from files must not be."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
