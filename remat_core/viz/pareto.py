"""The Pareto figure: cost overhead against memory budget, one curve per solver.

Each solver's line is its lower envelope (the best overhead it reached at or below each budget,
which never rises with the budget), its raw points are markers: a budget whose own solve cost more
than a smaller budget's shows a marker above the line.

A fixed policy (Hugging Face's checkpointing at every n, torchtitan's op policy) follows no budget: it is
drawn as diamonds where each of its settings lands, labelled with the setting.

Marks the lower bound (no schedule fits below it: shaded), the checkpoint-all peak (no
recomputation needed above it), the current budget, each solver's exact result there, and a
solver's own lower bound on the cost where it reports one (``checkmate-lp``'s LP value, drawn as
"best possible in topological order": Checkmate's relaxation bounds the schedules that follow the
graph's topological order, so a heuristic free to reorder can fall below it). The overhead axis can
be logarithmic: near the lower bound overheads span orders of magnitude, and a log axis separates
the solvers there; an overhead of zero has no place on it.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import plotly.graph_objects as go

from ..analysis import ParetoCurve
from ..graph import format_bytes
from .palette import BUDGET_COLOR, GRID, LOWER_BOUND_COLOR, base_layout, unit_for

SOLVER_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#bab0ac")
BEST_POSSIBLE = "best possible in topological order"
LOWER_BOUND, PEAK, BUDGET = "lower bound", "checkpoint-all peak", "budget"
MARK_LINES = {LOWER_BOUND: (LOWER_BOUND_COLOR, "dot"), PEAK: (LOWER_BOUND_COLOR, "dash"),
              BUDGET: (BUDGET_COLOR, "solid")}
"""The vertical lines' colour and dash by name: the bounds grey, the budget red. The budget slider's marks
use the same colours."""
ZERO_NOTE = "0% overheads (no recomputation) lie off a log axis"
EACH_SOLVE = "(each solve)"
"""The name suffix of a solver's raw points; its line is the lower envelope of them."""


def solver_color(position: int) -> str:
    """The colour of the n-th solver on the figure (cycling through ten)."""
    return SOLVER_COLORS[position % len(SOLVER_COLORS)]


def pareto_figure(curves: Sequence[ParetoCurve], *, lower_bound: int, checkpoint_all_peak: int,
                  budget: int | None = None, current: Mapping[str, float | None] | None = None,
                  best_possible: Sequence[tuple[int, float]] | None = None, height: int = 380,
                  log_y: bool = False) -> go.Figure:
    """Budget (x) against cost overhead in percent (y) for each solver's sweep.

    Parameters
    ----------
    curves : sequence of ParetoCurve
        One per solver, in legend order.
    lower_bound, checkpoint_all_peak : int
        Bytes; drawn as vertical lines, the region below the lower bound shaded.
    budget : int, optional
        The current budget: a vertical red line.
    current : mapping of str to float or None, optional
        Solver -> exact overhead at ``budget`` (None: infeasible there): a star on each curve.
    best_possible : sequence of (int, float), optional
        ``(budget, overhead)`` lower bounds that hold for every solver's formulation (Checkmate's
        LP): drawn as the "best possible" line. Without it, each curve's own reported cost bounds
        (``solver_info["lp_lower_bound"]``) are drawn instead.
    height : int
    log_y : bool
        A logarithmic overhead axis. Points, stars and bounds at 0 % (or below) are left out, and
        a note under the axis says so when there were any.

    Returns
    -------
    plotly.graph_objects.Figure
        Per solver, its lower envelope as a line named after it (the best overhead at or below each
        budget: a schedule that fits a budget fits every larger one) and its raw points as markers
        (``"<solver> (each solve)"``); ``"best possible (<solver>)"`` traces for reported cost
        bounds, and ``"<solver> at budget"`` markers. The three vertical
        lines are layout shapes, each with a ``name``: ``lower bound``, ``checkpoint-all peak``,
        ``budget``.
    """
    top = max([checkpoint_all_peak, budget or 0] + [p.budget for c in curves for p in c.points])
    unit = unit_for(top)
    scale = unit.size
    dropped = []

    def shown(overhead: float | None) -> bool:
        """Whether an overhead has a place on the axis (on a log axis only positive ones do)."""
        if overhead is None:
            return False
        if log_y and overhead <= 0:
            dropped.append(overhead)
            return False
        return True

    fig = go.Figure()
    for position, curve in enumerate(curves):
        color = solver_color(position)
        if curve.fixed_policy:
            fig.add_trace(_policy_points(curve, color, scale, shown))
            continue
        steps = [(p, best) for p, best in zip(curve.feasible_points, curve.envelope()) if shown(best.overhead)]
        fig.add_trace(go.Scatter(
            x=[p.budget / scale for p, _ in steps], y=[100 * best.overhead for _, best in steps], name=curve.solver,
            legendgroup=curve.solver, mode="lines", line={"color": color, "width": 2, "shape": "hv"},
            customdata=[[format_bytes(best.budget)] for _, best in steps],
            hovertemplate=(f"<b>{curve.solver}</b>: best at or below %{{x:.4g}} {unit.name}: %{{y:.2f}}%<br>"
                           f"(its schedule solved at %{{customdata[0]}})<extra></extra>")))
        feasible = [p for p in curve.feasible_points if shown(p.overhead)]
        fig.add_trace(go.Scatter(
            x=[p.budget / scale for p in feasible], y=[100 * p.overhead for p in feasible],
            name=f"{curve.solver} {EACH_SOLVE}", legendgroup=curve.solver, showlegend=False, mode="markers",
            marker={"color": color, "size": 7},
            customdata=[[format_bytes(p.peak), len(p.recomputed), p.seconds * 1e3] for p in feasible],
            hovertemplate=(f"<b>{curve.solver}</b> solved at %{{x:.4g}} {unit.name}<br>overhead %{{y:.2f}}%<br>"
                           f"peak %{{customdata[0]}}<br>recomputed %{{customdata[1]}} tensors<br>"
                           f"solved in %{{customdata[2]:.0f}} ms<extra></extra>")))
        bounds = [] if best_possible else [(p.budget / scale, 100 * curve.overhead_lower_bound(p))
                                           for p in curve.points if shown(curve.overhead_lower_bound(p))]
        if bounds:
            fig.add_trace(go.Scatter(x=[b[0] for b in bounds], y=[b[1] for b in bounds],
                                     name=f"{BEST_POSSIBLE} ({curve.solver})", mode="lines",
                                     line={"color": color, "dash": "dot", "width": 1.5},
                                     hovertemplate="lower bound in topological order %{y:.2f}%<extra></extra>"))
        if current is not None and budget is not None and shown(current.get(curve.solver)):
            fig.add_trace(go.Scatter(x=[budget / scale], y=[100 * current[curve.solver]],
                                     name=f"{curve.solver} at budget", mode="markers", showlegend=False,
                                     marker={"symbol": "star", "size": 15, "color": color,
                                             "line": {"color": "#222222", "width": 1}},
                                     hovertemplate=f"{curve.solver} at the budget: %{{y:.2f}}%<extra></extra>"))
    if best_possible:
        ordered = sorted((b, o) for b, o in best_possible if shown(o))
        fig.add_trace(go.Scatter(x=[b / scale for b, _ in ordered], y=[100 * o for _, o in ordered],
                                 name=f"{BEST_POSSIBLE} (LP bound)", mode="lines+markers",
                                 line={"color": "#333333", "dash": "dot", "width": 1.5, "shape": "hv"},
                                 marker={"size": 4},
                                 hovertemplate="Checkmate's LP bound %{y:.2f}%: no schedule in the graph's "
                                               "topological order costs less<extra></extra>"))
    shapes = [_vline(lower_bound / scale, LOWER_BOUND), _vline(checkpoint_all_peak / scale, PEAK),
              {"type": "rect", "name": "infeasible region", "xref": "x", "yref": "paper", "x0": 0,
               "x1": lower_bound / scale, "y0": 0, "y1": 1, "fillcolor": "rgba(0,0,0,0.06)", "line": {"width": 0},
               "layer": "below"}]
    annotations = [_vlabel(lower_bound / scale, f" {LOWER_BOUND}", "left"),
                   _vlabel(checkpoint_all_peak / scale, f"{PEAK} ", "right")]
    if budget is not None:
        shapes.append(_vline(budget / scale, BUDGET))
    if dropped:
        annotations.append({"text": ZERO_NOTE, "x": 1.0, "y": 1.02, "xref": "paper", "yref": "paper",
                            "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                            "font": {"size": 11, "color": LOWER_BOUND_COLOR}})
    low = min(lower_bound, min((p.budget for c in curves for p in c.points), default=lower_bound))
    span = max(top - low, 1)
    yaxis = {**GRID, "title": "cost overhead over checkpoint-all (%, log scale)", "type": "log",
             **_decade_ticks([y for trace in fig.data for y in (trace.y or ())])} if log_y else \
        {**GRID, "title": "cost overhead over checkpoint-all (%)", "rangemode": "tozero"}
    fig.update_layout(**base_layout(
        height=height, shapes=shapes, annotations=annotations, hovermode="closest", uirevision="pareto",
        xaxis={**GRID, "title": f"memory budget ({unit.name})",
               "range": [(low - 0.04 * span) / scale, (top + 0.04 * span) / scale]},
        yaxis=yaxis))
    return fig


POLICY_SUFFIX = "(fixed policy)"
"""The name suffix of a fixed policy's points: it follows no budget, so it is drawn where each setting lands."""


def _policy_points(curve: ParetoCurve, color: str, scale: float, shown: Callable[[float | None], bool]
                   ) -> go.Scatter:
    """A fixed policy's points (Hugging Face's every n, torchtitan's one policy): diamonds at the peak each holds,
    labelled with the setting, no line (there is nothing between the settings a user can pick)."""
    points = [p for p in curve.feasible_points if shown(p.overhead)]
    return go.Scatter(
        x=[p.budget / scale for p in points], y=[100 * p.overhead for p in points],
        name=f"{curve.solver} {POLICY_SUFFIX}", legendgroup=curve.solver, mode="markers+text",
        text=[p.setting if len(points) > 1 else "" for p in points], textposition="top center",
        textfont={"size": 10, "color": color},
        marker={"color": color, "size": 11, "symbol": "diamond", "line": {"color": "#222222", "width": 1}},
        customdata=[[p.setting, format_bytes(p.peak), len(p.recomputed)] for p in points],
        hovertemplate=(f"<b>{curve.solver}</b> %{{customdata[0]}}<br>holds %{{customdata[1]}}<br>overhead "
                       f"%{{y:.2f}}%<br>recomputed %{{customdata[2]}} tensors<extra></extra>"))


def _decade_ticks(values: Sequence[float]) -> dict:
    """Ticks at powers of ten only, when the values span a decade or more (plotly's own log ticks then
    label 2 and 5 of every decade too, which reads as a jumble of small numbers)."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive or max(positive) / min(positive) < 10:
        return {}
    return {"dtick": 1}


def _vline(x: float, name: str) -> dict:
    color, dash = MARK_LINES[name]
    return {"type": "line", "name": name, "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
            "line": {"color": color, "dash": dash, "width": 2 if name == BUDGET else 1.2}}


def _vlabel(x: float, text: str, side: str) -> dict:
    return {"x": x, "y": 1.0, "xref": "x", "yref": "paper", "text": text, "showarrow": False,
            "xanchor": side, "yanchor": "top", "font": {"size": 11, "color": LOWER_BOUND_COLOR}}
