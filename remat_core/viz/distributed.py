"""Workers of a distributed GNN step, side by side: plotly figures from plain numbers (no PyTorch, no partition).

- :func:`worker_timelines_figure`: one worker's memory over its step under each mode (vanilla beside SAR), with
  the ops that receive rows from a peer marked (forward fetches, the backward's refetches) and the budget the mode
  needs (the peak) drawn across.
- :func:`worker_peaks_figure`: every worker's peak under each mode, simulated as bars, measured as marks.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .palette import BUDGET_COLOR, GRID, base_layout, unit_for

MODE_COLORS = {"vanilla": "#c0392b", "sar": "#2471a3", "sar + chunks": "#229954"}
FETCH_COLORS = {"forward": "#f28e2b", "refetch": "#8e44ad", "backward": "#7f8c8d"}
FETCH_WORDS = {"forward": "rows fetched", "refetch": "rows fetched again (backward)",
               "backward": "gradients received"}


def worker_timelines_figure(timelines: Mapping[str, Sequence[int]], fetches: Mapping[str, Mapping[str, Sequence[int]]],
                            worker: int, height: int = 360) -> go.Figure:
    """``timelines[mode]``: bytes held after each op; ``fetches[mode][what]``: op indices that receive from a peer."""
    modes = list(timelines)
    top = max((max(t) for t in timelines.values() if len(t)), default=1)
    unit = unit_for(top)
    figure = make_subplots(rows=1, cols=len(modes), shared_yaxes=True, horizontal_spacing=0.04,
                           subplot_titles=[f"{mode}: peak {max(timelines[mode], default=0) / unit.size:.3g} "
                                           f"{unit.name}" for mode in modes])
    shown: set[str] = set()
    for col, mode in enumerate(modes, start=1):
        memory = [m / unit.size for m in timelines[mode]]
        figure.add_trace(go.Scatter(y=memory, mode="lines", line={"color": MODE_COLORS.get(mode, "#555"), "width": 1.5},
                                    name=f"{mode}: memory", hovertemplate=f"op %{{x}}<br>%{{y:.3g}} {unit.name}"
                                                                          f"<extra>{mode}</extra>"),
                         row=1, col=col)
        for what, steps in fetches.get(mode, {}).items():
            if not steps:
                continue
            figure.add_trace(go.Scatter(x=list(steps), y=[memory[s] for s in steps], mode="markers",
                                        marker={"color": FETCH_COLORS[what], "size": 6, "symbol": "triangle-down"},
                                        name=FETCH_WORDS[what], legendgroup=what, showlegend=what not in shown,
                                        hovertemplate=f"op %{{x}}: {FETCH_WORDS[what]}<extra></extra>"),
                             row=1, col=col)
            shown.add(what)
        if memory:
            figure.add_hline(y=max(memory), line={"color": BUDGET_COLOR, "dash": "dot", "width": 1}, row=1, col=col)
        figure.update_xaxes(title_text="op of the step", row=1, col=col, **GRID)
    figure.update_yaxes(title_text=f"worker {worker}'s step memory ({unit.name})", row=1, col=1)
    figure.update_yaxes(rangemode="tozero", **GRID)
    figure.update_layout(**base_layout(height=height, margin={"l": 60, "r": 20, "t": 60, "b": 50}))
    return figure


def worker_peaks_figure(simulated: Mapping[str, Sequence[int]], measured: Mapping[str, Sequence[int]] | None = None,
                        height: int = 300) -> go.Figure:
    """Each worker's step peak under each mode: simulated bars, measured crosses where a run measured them."""
    top = max((max(p) for p in simulated.values() if len(p)), default=1)
    unit = unit_for(top)
    figure = go.Figure()
    for mode, peaks in simulated.items():
        workers = [f"worker {w}" for w in range(len(peaks))]
        figure.add_trace(go.Bar(x=workers, y=[p / unit.size for p in peaks], name=f"{mode} (simulated)",
                                marker={"color": MODE_COLORS.get(mode, "#555")}, offsetgroup=mode,
                                hovertemplate=f"%{{x}}: %{{y:.3g}} {unit.name}<extra>{mode}, simulated</extra>"))
        if measured and measured.get(mode):
            figure.add_trace(go.Scatter(x=workers, y=[p / unit.size for p in measured[mode]], mode="markers",
                                        name=f"{mode} (measured)", offsetgroup=mode,
                                        marker={"color": "black", "symbol": "x", "size": 9},
                                        hovertemplate=f"%{{x}}: %{{y:.3g}} {unit.name}<extra>{mode}, measured</extra>"))
    figure.update_layout(**base_layout(height=height, barmode="group", scattermode="group",
                                       yaxis={"title": f"step peak ({unit.name})", "rangemode": "tozero", **GRID},
                                       xaxis=GRID))
    return figure
