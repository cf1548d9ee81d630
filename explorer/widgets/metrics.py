"""Results at the budget: the four metrics of a schedule (or of the sweep's estimate), why there is
none, and the table of the compared solvers."""

from __future__ import annotations

from typing import Any

import streamlit as st

from remat_core import Schedule, get_solver
from remat_core.analysis import CurvePoint, reported_gap
from remat_core.graph import format_bytes

from .. import state
from ..jobs.worker import Outcome
from .text import percent, plain


def schedule_metrics(container, schedule: Schedule, budget: int) -> None:
    """Peak, cost overhead, recomputed tensors and solve time of an exact solve, in four metrics."""
    stats = schedule.stats
    _metrics(container, stats["peak"], stats["overhead"], stats["recomputed_nodes"], stats["recomputes"],
             f"{stats.get('solve_seconds', 0.0) * 1e3:,.0f} ms", f"{len(schedule):,} ops", budget, estimate=False)


def estimate_metrics(container, point: CurvePoint, budget: int) -> None:
    """The same four metrics from the sweep point whose schedule fits ``budget`` (shown while solving)."""
    extra = sum(c - 1 for c in point.recomputed.values())
    _metrics(container, point.peak, point.overhead, len(point.recomputed), extra, "solving…",
             f"sweep point at {format_bytes(point.budget)}", budget, estimate=True)


def _metrics(container, peak: int, overhead: float, recomputed: int, extra: int, time_text: str, time_note: str,
             budget: int, estimate: bool) -> None:
    mark = "≈ " if estimate else ""
    a, b, c, d = container.columns(4)
    a.metric(f"{mark}Peak memory", format_bytes(peak), delta=f"{peak / budget:.0%} of budget" if budget else None,
             delta_color="off", delta_arrow="off")
    b.metric(f"{mark}Cost overhead", percent(overhead), delta="over checkpoint-all", delta_color="off",
             delta_arrow="off")
    c.metric(f"{mark}Recomputed tensors", f"{recomputed:,}", delta=f"{extra:,} extra computations",
             delta_color="off", delta_arrow="off")
    d.metric("Solve time", time_text, delta=time_note, delta_color="off", delta_arrow="off")


def outcome_message(outcome: Outcome, solver: str, budget: int, smallest_known: int | None = None,
                    button_key: str | None = None) -> None:
    """Say why there is no schedule: infeasible (naming the smallest feasible budget known: the solver's own or,
    when smaller, ``smallest_known`` from its sweep) or an error."""
    if outcome.error:
        st.error(f"{plain(solver)} failed: {plain(outcome.error)}")
        return
    known = [b for b in (outcome.smallest_feasible, smallest_known) if b is not None]
    smallest = min(known) if known else None
    text = f"**{format_bytes(budget)} is infeasible for {plain(solver)}**: {plain(outcome.infeasible)}."
    if smallest is None:
        st.warning(text + " No feasible budget is known for it yet.", icon=":material/block:")
        return
    st.warning(text + f" The smallest feasible budget it knows is **{format_bytes(smallest)}**.",
               icon=":material/block:")
    if button_key and st.button(f"Use {format_bytes(smallest)}", key=button_key, icon=":material/arrow_forward:"):
        state.set_budget(smallest)
        st.rerun()


def log_scale_toggle(key: str = "w_pareto_log") -> bool:
    """The Pareto chart's log-scale switch for the overhead axis (kept in the session across pages)."""
    st.session_state[key] = state.pareto_log()
    st.toggle("Log-scale overhead", key=key, on_change=lambda: state.set_pareto_log(st.session_state[key]),
              help="Near the lower bound overheads span orders of magnitude: a log axis tells the solvers apart "
                   "there. Budgets that need no recomputation (0 %) have no place on it.")
    return state.pareto_log()


GAP_COLUMN = "MIP gap"
GAP_HELP = ("The exact solver's relative optimality gap, (cost − proven lower bound) / cost: 0 means proved optimal "
            "(for the solver's formulation); a positive gap means the time limit ran out first.")


def comparison_rows(outcomes: dict[str, Outcome | None]) -> list[dict[str, Any]]:
    """The table of the solvers at the current budget, one row per solver (in the mapping's order).

    A ``MIP gap`` column appears when any schedule's solver reports a gap
    (:func:`remat_core.analysis.pareto.reported_gap`); solvers that report none show a dash there.
    """
    gaps = {name: reported_gap(o.schedule.solver_info) if o is not None and o.schedule is not None else None
            for name, o in outcomes.items()}
    rows = []
    for name, outcome in outcomes.items():
        if outcome is None or outcome.schedule is None:
            status = "solving…" if outcome is None else ("error" if outcome.error else "infeasible")
            row = {"solver": name, "status": status, "peak": None, "overhead": None, "recomputed": None,
                   "solve ms": None}
        else:
            stats = outcome.schedule.stats
            row = {"solver": name, "status": "exact solver" if get_solver(name).exact else "heuristic",
                   "peak": format_bytes(stats["peak"]), "overhead": percent(stats["overhead"]),
                   "recomputed": stats["recomputed_nodes"], "solve ms": round(stats["solve_seconds"] * 1e3, 1)}
        if any(g is not None for g in gaps.values()):
            row[GAP_COLUMN] = gap_text(gaps[name])
        rows.append(row)
    return rows


def gap_text(gap: float | None) -> str:
    """A reported optimality gap in the table: a dash for none, ``0 % (optimal)``, else three digits."""
    if gap is None:
        return "—"
    return "0% (optimal)" if gap == 0 else f"{100 * gap:.3g}%"
