"""The memory timeline of a schedule (animated) and its lifetime chart, as plotly figures.

``memory_timeline_figure``: resident bytes after every op, stacked by node kind, with the budget
line (and, for a schedule run on real tensors, the bytes really held after each op). Play walks a cursor along the steps; each frame names the op at the cursor and greys out the
steps still to come, so the timeline grows as it plays. Frames carry only the cursor and the
layout changes, never the whole timeline, so a schedule of 10,000 ops still animates.

``lifetime_chart``: one row per tensor, a bar for each stay in memory (first computation coloured
by kind, recomputations in the recompute colour), in the spirit of PyTorch's memory visualiser.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis import in_module
from ..graph import ComputeGraph, format_bytes, node_labels
from ..schedule import Schedule, describe_op, memory_by_kind, occurrences, ordinal, simulation_of
from .palette import (BUDGET_COLOR, CURSOR_COLOR, GRID, HOST_COLOR, RECOMPUTE_COLOR, ByteUnit, base_layout,
                      kind_color, plotly_text, unit_for)
from .transfers import HOST_TRACE, host_bytes

MAX_POINTS = 1500
"""Timelines with more ops are drawn at this many steps (each kept step is a real one, peaks kept)."""
MAX_FRAMES = 120
CURSOR_TRACE = "current op"
STEP_TRACE = "steps"
"""Invisible markers on the total: they name each step's op on hover and make steps clickable
(plotly selects points, not lines)."""
BUDGET_TRACE = "budget"
MEASURED_TRACE = "measured"
MEASURED_COLOR = "#111111"


def drawn_steps(total: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Which steps to draw: all of them, or per bucket of consecutive steps the one with most memory.

    Every drawn point is a real step (its stack by kind is exact), and the peak is always drawn.
    """
    n = len(total)
    if n <= max_points:
        return np.arange(n)
    edges = np.linspace(0, n, max_points + 1).astype(int)
    picks = [start + int(np.argmax(total[start:end])) for start, end in zip(edges[:-1], edges[1:]) if end > start]
    return np.unique(np.asarray(picks + [0, n - 1]))


def frame_steps(n_ops: int, max_frames: int = MAX_FRAMES) -> list[int]:
    """Evenly spaced steps for the animation (the last step always included)."""
    if n_ops == 0:
        return []
    count = min(n_ops, max_frames)
    return sorted(set(np.linspace(0, n_ops - 1, count).round().astype(int).tolist()))


def memory_timeline_figure(graph: ComputeGraph, schedule: Schedule, budget: int | None = None, *,
                           upto: int | None = None, animate: bool = True, max_frames: int = MAX_FRAMES,
                           height: int = 440, measured: Sequence[int] | None = None) -> go.Figure:
    """The schedule's memory over steps, stacked by kind, with the budget line and the current op.

    Parameters
    ----------
    graph : ComputeGraph
    schedule : Schedule
        A simulated schedule (from :func:`remat_core.solve`).
    budget : int, optional
        Bytes; default the schedule's own budget. Drawn as a dashed line.
    upto : int, optional
        Draw only steps ``0..upto`` (the x range still spans the whole schedule): the Learn page's
        timeline that grows as it steps. The cursor sits at ``upto``.
    animate : bool
        Add frames with Play/Pause buttons and a step slider.
    max_frames : int
        At most this many animation frames.
    height : int
        Figure height in pixels.
    measured : sequence of int, optional
        Real bytes held after each op (``TensorCheck.measured_memory`` of a run on real tensors):
        a line over the stacked simulated memory, at the same steps. Where it lies on the stack's
        top edge, the simulator's memory model was exact.

    Returns
    -------
    plotly.graph_objects.Figure
        Traces: one filled area per kind present (named after the kind, the device's bytes), ``"budget"``
        when there is a budget, ``"host memory"`` (a line) for a schedule that offloads, ``"measured"`` when
        ``measured`` is given, ``"steps"`` (invisible markers on the
        total, for hover and click) and ``"current op"`` (the cursor).

    Raises
    ------
    ValueError
        When ``measured`` does not have one value per op of the schedule.
    """
    result = simulation_of(schedule)
    budget = schedule.budget if budget is None else budget
    kinds = memory_by_kind(graph, result)
    n_ops = len(result.ops)
    occurrence = occurrences(result)
    last = n_ops - 1 if upto is None else max(0, min(int(upto), n_ops - 1))
    if measured is not None and len(measured) != n_ops:
        raise ValueError(f"measured memory has {len(measured):,} values for a schedule of {n_ops:,} ops; pass the "
                         f"bytes held after each op of this schedule")
    top = max(result.peak, budget or 0, max(measured, default=0) if measured is not None else 0, 1)
    unit = unit_for(top)
    steps = drawn_steps(kinds.total[: last + 1])
    fig = go.Figure()
    for c, kind in enumerate(kinds.kinds):
        values = kinds.by_kind[steps, c] / unit.size
        fig.add_trace(go.Scatter(
            x=steps, y=values, name=kind, mode="lines" if len(steps) > 1 else "lines+markers", stackgroup="memory",
            line={"width": 0.6, "color": kind_color(kind)},
            fillcolor=kind_color(kind), hovertemplate=f"{kind}: %{{y:.4g}} {unit.name}<extra>step %{{x}}</extra>"))
    if budget:
        fig.add_trace(go.Scatter(x=[0, max(n_ops - 1, 1)], y=[budget / unit.size] * 2, name=BUDGET_TRACE,
                                 mode="lines", line={"color": BUDGET_COLOR, "dash": "dash", "width": 2},
                                 hovertemplate=f"budget {format_bytes(budget)}<extra></extra>"))
    if schedule.has_transfers:
        host = host_bytes(graph, schedule)
        fig.add_trace(go.Scatter(x=steps, y=host[steps] / unit.size, name=HOST_TRACE, mode="lines",
                                 line={"color": HOST_COLOR, "width": 1.6, "dash": "dash", "shape": "hv"},
                                 hovertemplate=f"host (offloaded): %{{y:.4g}} {unit.name}<extra></extra>"))
    if measured is not None:
        real = np.asarray(measured, dtype=float)
        fig.add_trace(go.Scatter(
            x=steps, y=real[steps] / unit.size, name=MEASURED_TRACE, mode="lines" if len(steps) > 1 else "markers",
            line={"color": MEASURED_COLOR, "width": 1.6, "dash": "dot"},
            hovertemplate=f"measured on real tensors: %{{y:.4g}} {unit.name}<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=steps, y=kinds.total[steps] / unit.size, name=STEP_TRACE, mode="markers", showlegend=False,
        marker={"size": 9, "color": "rgba(0,0,0,0)"},
        text=[plotly_text(describe_op(graph, result, int(s), occurrence[int(s)])) for s in steps],
        hovertemplate=f"<b>%{{text}}</b><br>total %{{y:.4g}} {unit.name}<extra>step %{{x}}</extra>"))
    cursor_step = result.peak_step if upto is None and result.peak_step >= 0 else last
    y_top = top / unit.size * 1.08
    fig.add_trace(_cursor(cursor_step, y_top))
    cursor_index = len(fig.data) - 1
    fig.update_layout(**base_layout(
        height=height, hovermode="x unified", clickmode="event+select", dragmode="select",
        selectdirection="h", margin={"l": 60, "r": 20, "t": 76, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.09, "x": 1, "xanchor": "right",
                "traceorder": "normal"},
        xaxis={**GRID, "title": None if animate and upto is None else "step (op index)",
               "range": [0, max(n_ops - 1, 1)]},
        yaxis={**GRID, "title": f"resident memory ({unit.name})", "range": [0, y_top]},
        annotations=[_op_note(graph, result, cursor_step, occurrence, kinds.total, unit,
                              prefix="peak · " if upto is None and cursor_step == result.peak_step else "")],
        shapes=_future_mask(last, n_ops) if upto is not None else []))
    if animate and n_ops and upto is None:
        _add_animation(fig, graph, result, occurrence, kinds.total, unit, y_top, cursor_index, max_frames, cursor_step)
    return fig


def _cursor(step: int, y_top: float) -> go.Scatter:
    return go.Scatter(x=[step, step], y=[0, y_top], name=CURSOR_TRACE, mode="lines",
                      line={"color": CURSOR_COLOR, "width": 1.5}, hoverinfo="skip", showlegend=False)


def _op_note(graph, result, step: int, occurrence, total, unit: ByteUnit, prefix: str = "") -> dict:
    text = (f"{prefix}step {step}: {describe_op(graph, result, step, occurrence[step])} · "
            f"{total[step] / unit.size:.4g} {unit.name}") if len(result.ops) else "empty schedule"
    return {"text": plotly_text(text), "xref": "paper", "yref": "paper", "x": 0, "y": 1.0, "xanchor": "left",
            "yanchor": "bottom", "showarrow": False, "font": {"size": 13, "color": CURSOR_COLOR}}


def _future_mask(step: int, n_ops: int) -> list[dict]:
    if step >= n_ops - 1:
        return []
    return [{"type": "rect", "xref": "x", "yref": "paper", "x0": step, "x1": n_ops - 1, "y0": 0, "y1": 1,
             "fillcolor": "rgba(255,255,255,0.82)", "line": {"width": 0}, "layer": "above"}]


def _add_animation(fig: go.Figure, graph, result, occurrence, total, unit, y_top, cursor_index, max_frames,
                   shown: int) -> None:
    """Frames with Play/Pause and a step slider; the slider starts at ``shown``, the step the cursor (and the page's
    step panel) shows, so that both name the same step."""
    steps = sorted(set(frame_steps(len(result.ops), max_frames)) | {shown})
    fig.frames = [go.Frame(name=str(s), data=[_cursor(s, y_top)], traces=[cursor_index],
                           layout={"annotations": [_op_note(graph, result, s, occurrence, total, unit)],
                                   "shapes": _future_mask(s, len(result.ops))})
                  for s in steps]
    play = {"frame": {"duration": 60, "redraw": True}, "transition": {"duration": 0}, "fromcurrent": True,
            "mode": "immediate"}
    pause = {"frame": {"duration": 0, "redraw": False}, "transition": {"duration": 0}, "mode": "immediate"}
    fig.update_layout(
        updatemenus=[{"type": "buttons", "direction": "left", "x": 0, "y": -0.2, "xanchor": "left",
                      "yanchor": "top", "showactive": False, "pad": {"t": 0, "r": 8},
                      "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, play]},
                                  {"label": "❚❚ Pause", "method": "animate", "args": [[None], pause]}]}],
        sliders=[{"active": steps.index(shown), "x": 0.2, "len": 0.8, "y": -0.17, "yanchor": "top", "pad": {"t": 0},
                  "currentvalue": {"prefix": "step ", "xanchor": "right", "font": {"size": 11}}, "ticklen": 3,
                  "font": {"size": 10},
                  "steps": [{"label": str(s), "method": "animate",
                             "args": [[str(s)], {**pause, "frame": {"duration": 0, "redraw": True}}]}
                            for s in steps]}],
        margin={"l": 60, "r": 20, "t": 76, "b": 120})


def lifetime_candidates(graph: ComputeGraph, schedule: Schedule, recomputed_only: bool = False,
                        module: str | None = None) -> list[str]:
    """Every tensor the lifetime chart could show, best first: recomputed (most often) first, then the largest.

    ``recomputed_only`` keeps the recomputed ones; ``module`` those of that module path or inside it.
    """
    counts = simulation_of(schedule).compute_counts
    pool = [n for n in counts if (counts[n] > 1 or not recomputed_only)
            and (module is None or in_module(graph.node(n).module, module))]
    return sorted(pool, key=lambda n: (-(counts[n] > 1), -counts[n], -graph.node(n).mem, n))


def lifetime_rows(graph: ComputeGraph, schedule: Schedule, tensors: Sequence[str] | None = None,
                  max_rows: int = 60, recomputed_only: bool = False, module: str | None = None) -> list[str]:
    """Which tensors the lifetime chart shows: the ones asked for, else the first ``max_rows``
    :func:`lifetime_candidates`. Rows are ordered by first computation."""
    result = simulation_of(schedule)
    if tensors is None:
        chosen = set(lifetime_candidates(graph, schedule, recomputed_only, module)[:max_rows])
    else:
        chosen = {t for t in tensors if t in result.compute_counts}
    first = {}
    for life in result.lifetimes:
        first.setdefault(life.node, life.start)
    return sorted(chosen, key=lambda n: first[n])


def lifetime_chart(graph: ComputeGraph, schedule: Schedule, tensors: Sequence[str] | None = None,
                   max_rows: int = 60, recomputed_only: bool = False, module: str | None = None) -> go.Figure:
    """One row per tensor, one bar per stay in memory; recomputations in their own colour.

    Parameters
    ----------
    graph : ComputeGraph
    schedule : Schedule
        A simulated schedule.
    tensors : sequence of str, optional
        Rows to show; default :func:`lifetime_rows` (recomputed tensors first, then the largest).
    max_rows, recomputed_only, module
        Which rows when ``tensors`` is not given (see :func:`lifetime_candidates`).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per kind for first computations (named after the kind) and one named
        ``"recomputed"`` for every later computation. Rows read as :func:`row_labels`.
    """
    result = simulation_of(schedule)
    rows = lifetime_rows(graph, schedule, tensors, max_rows, recomputed_only, module)
    shown = set(rows)
    names = row_labels(graph, rows)
    labels = {r: plotly_text(name) for r, name in names.items()}  # plotly reads HTML tags in axis labels
    end_of_schedule = len(result.ops)
    groups: dict[str, dict[str, list]] = {}
    for life in result.lifetimes:
        if life.node not in shown:
            continue
        node = graph.node(life.node)
        group = "recomputed" if life.occurrence > 1 else node.kind
        bucket = groups.setdefault(group, {"y": [], "base": [], "x": [], "text": []})
        end = end_of_schedule if life.end is None else life.end
        bucket["y"].append(labels[life.node])
        bucket["base"].append(life.start)
        bucket["x"].append(max(end - life.start, 0.6))
        bucket["text"].append(plotly_text(
            f"{names[life.node]} · {ordinal(life.occurrence)} computation · {format_bytes(node.mem)} · "
            f"steps {life.start}–{'end' if life.end is None else life.end}"))
    fig = go.Figure()
    for group, bucket in sorted(groups.items(), key=lambda item: item[0] == "recomputed"):
        color = RECOMPUTE_COLOR if group == "recomputed" else kind_color(group)
        fig.add_trace(go.Bar(orientation="h", name=group, y=bucket["y"], base=bucket["base"], x=bucket["x"],
                             marker={"color": color, "line": {"width": 0}}, hovertext=bucket["text"],
                             hoverinfo="text"))
    fig.update_layout(**base_layout(
        height=max(260, 22 * len(rows) + 120), barmode="overlay", bargap=0.25,
        xaxis={**GRID, "title": "step (op index)", "range": [0, max(end_of_schedule, 1)]},
        yaxis={"categoryorder": "array", "categoryarray": [labels[r] for r in reversed(rows)], "automargin": True,
               "tickfont": {"size": 11}}))
    return fig


def row_labels(graph: ComputeGraph, rows: Sequence[str]) -> dict[str, str]:
    """A readable, distinct label per row: the node's label (:func:`remat_core.graph.node_labels`: module
    path and op, pass marked, unique), never its id."""
    labels = node_labels(graph)
    return {r: labels[r] for r in rows}
