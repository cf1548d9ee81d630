"""The transfer lane of a schedule timed over a host link, under its memory timeline: a plotly figure.

The x axis is the memory timeline's (op index). Each copy is a bar on its direction's row, from the step at
which it starts to the step the compute lane has reached when it ends (a copy spans the computations it
hides behind); a compute or free that waited is marked on the compute row with how long, and the host's
bytes are a line on their own axis. Time becomes steps through the compute lane's clock: within a
computation, in proportion to its time.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analysis import lane_clock
from ..graph import ComputeGraph, format_bytes, node_label
from ..schedule import COMPUTE, OFFLOAD, PREFETCH, TRANSFERS, Schedule, simulation_of
from .palette import GRID, HOST_COLOR, RECOMPUTE_COLOR, base_layout, plotly_text, unit_for

ROWS = {OFFLOAD: "to the host", PREFETCH: "to the device", COMPUTE: "compute waits"}
COLORS = {OFFLOAD: "#4c78a8", PREFETCH: "#54a24b"}
HOST_TRACE = "host memory"


def host_bytes(graph: ComputeGraph, schedule: Schedule) -> np.ndarray:
    """Bytes in host memory after each op: every offload adds its tensor (a host copy stays to the end)."""
    ops = simulation_of(schedule).ops
    return np.cumsum([graph.node(n).mem if a == OFFLOAD else 0 for a, n in ops]) if ops else np.zeros(0)


def _step_at(moment: float, lane_start: np.ndarray, lane_end: np.ndarray, computes: np.ndarray) -> float:
    """The (fractional) step the compute lane is at when the clock reads ``moment``."""
    k = int(np.searchsorted(lane_start, moment, side="right")) - 1
    if k < 0:
        return float(computes[0]) if len(computes) else 0.0
    span = lane_end[k] - lane_start[k]
    inside = min(max((moment - lane_start[k]) / span, 0.0), 1.0) if span > 0 else 1.0
    return float(computes[k]) + inside


def transfer_lane_figure(graph: ComputeGraph, schedule: Schedule, height: int = 240) -> go.Figure:
    """The copies, the waits and the host's bytes of a schedule timed over a host link (see the module notes).

    Raises
    ------
    ValueError
        When the schedule carries no timing (it was simulated without a link).
    """
    result = simulation_of(schedule)
    if result.timing is None:
        raise ValueError("the schedule was not timed over a host link: simulate it with a Link")
    start, end, clock = np.asarray(result.timing.start), np.asarray(result.timing.end), lane_clock(result)
    ops = result.ops
    computes = np.array([s for s, (a, _) in enumerate(ops) if a == COMPUTE], dtype=np.int64)
    lane_start, lane_end = start[computes], end[computes]
    fig = go.Figure()
    for action in (OFFLOAD, PREFETCH):
        steps = [s for s, (a, _) in enumerate(ops) if a == action]
        if not steps:
            continue
        x0 = [_step_at(start[s], lane_start, lane_end, computes) for s in steps]
        least = max(0.5, len(ops) / 200)  # a copy hidden within one op still shows
        x1 = [max(_step_at(end[s], lane_start, lane_end, computes), x + least) for s, x in zip(steps, x0)]
        text = [plotly_text(f"{action} {node_label(graph, ops[s][1])} ({format_bytes(graph.node(ops[s][1]).mem)}): "
                            f"issued at step {s}, copying from {start[s]:.4g} to {end[s]:.4g}"
                            + (f", {start[s] - clock[s]:.4g} after it was issued" if start[s] > clock[s] + 1e-12
                               else "")) for s in steps]
        fig.add_trace(go.Bar(y=[ROWS[action]] * len(steps), x=[b - a for a, b in zip(x0, x1)], base=x0,
                             orientation="h", name=ROWS[action], marker={"color": COLORS[action]}, text=text,
                             textposition="none", hovertemplate="%{text}<extra></extra>"))
    waits = [(s, start[s] - clock[s]) for s, (a, _) in enumerate(ops)
             if a not in TRANSFERS and start[s] > clock[s] + 1e-12]
    if waits:
        fig.add_trace(go.Scatter(
            x=[s for s, _ in waits], y=[ROWS[COMPUTE]] * len(waits), mode="markers", name="compute waits",
            marker={"symbol": "x", "size": 10, "color": RECOMPUTE_COLOR},
            text=[plotly_text(f"{ops[s][0]} {node_label(graph, ops[s][1])} waited {w:.4g} for "
                              + ("its input's prefetch" if ops[s][0] == COMPUTE else "its offload to end"))
                  for s, w in waits], hovertemplate="%{text}<extra>step %{x}</extra>"))
    host = host_bytes(graph, schedule)
    unit = unit_for(max(int(host.max(initial=0)), 1))
    fig.add_trace(go.Scatter(x=np.arange(len(ops)), y=host / unit.size, name=HOST_TRACE, mode="lines", yaxis="y2",
                             line={"color": HOST_COLOR, "width": 1.5, "shape": "hv"},
                             hovertemplate=f"host: %{{y:.4g}} {unit.name}<extra>step %{{x}}</extra>"))
    timing = result.timing
    fig.update_layout(**base_layout(
        height=height, barmode="overlay", margin={"l": 110, "r": 60, "t": 36, "b": 80},
        legend={"orientation": "h", "yanchor": "top", "y": -0.42, "x": 1, "xanchor": "right"},
        xaxis={**GRID, "title": "step (op index)", "range": [0, max(len(ops) - 1, 1)]},
        yaxis={"categoryorder": "array", "categoryarray": [ROWS[COMPUTE], ROWS[PREFETCH], ROWS[OFFLOAD]]},
        yaxis2={"overlaying": "y", "side": "right", "title": f"host ({unit.name})", "showgrid": False,
                "range": [0, max(float(host.max(initial=0)) / unit.size, 1e-9) * 1.15], "nticks": 3},
        title={"text": plotly_text(f"{format_bytes(timing.to_host)} out, {format_bytes(timing.to_device)} back; "
                                   f"waits {timing.compute_stall / max(timing.makespan, 1e-300):.1%} of the step"),
               "font": {"size": 13}, "x": 0, "xanchor": "left"}))
    return fig
