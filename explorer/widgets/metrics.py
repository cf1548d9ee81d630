"""Results at the budget: the four metrics of a schedule (or of the sweep's estimate), why there is
none, and the table of the compared solvers."""

from __future__ import annotations

from typing import Any

import streamlit as st

from remat_core import SolveOutcome, get_solver
from remat_core.analysis import CurvePoint, reported_gap, time_overhead
from remat_core.graph import format_bytes
from remat_core.solvers import FAILED, INFEASIBLE, REFUSED, STOPPED

from .. import safety, state
from ..jobs.results import FitsAt, fits_at, options_key
from .table import Missing, table
from .rows import figure_metric, wrapping_row
from .text import percent, plain


def schedule_metrics(container, outcome: SolveOutcome, budget: int) -> None:
    """Peak, cost overhead, recomputed tensors and solve time of an exact solve, in four metrics (from its
    stats: the schedule itself stays packed)."""
    stats = outcome.stats
    _metrics(container, stats["peak"], time_overhead(stats), stats["recomputed_nodes"], stats["recomputes"],
             f"{stats.get('solve_seconds', 0.0) * 1e3:,.0f} ms", f"{outcome.ops:,} ops", budget, estimate=False,
             offloaded=stats.get("bytes_to_host"))


def estimate_metrics(container, point: CurvePoint, budget: int) -> None:
    """The same four metrics from the sweep point whose schedule fits ``budget`` (shown while solving)."""
    extra = sum(c - 1 for c in point.recomputed.values())
    _metrics(container, point.peak, point.overhead, len(point.recomputed), extra, "solving…",
             f"sweep point at {format_bytes(point.budget)}", budget, estimate=True)


def _metrics(container, peak: int, overhead: float, recomputed: int, extra: int, time_text: str, time_note: str,
             budget: int, estimate: bool, offloaded: int | None = None) -> None:
    mark = "≈ " if estimate else ""
    row = wrapping_row(container)
    figure_metric(row, f"{mark}Peak memory", format_bytes(peak), f"{peak / budget:.0%} of budget" if budget else None)
    if state.link() is not None:
        figure_metric(row, f"{mark}Step time overhead", percent(overhead),
                      f"{format_bytes(offloaded)} offloaded" if offloaded else "nothing offloaded")
    else:
        figure_metric(row, f"{mark}Cost overhead", percent(overhead), "over checkpoint-all")
    figure_metric(row, f"{mark}Recomputed tensors", f"{recomputed:,}", f"{extra:,} extra computations")
    figure_metric(row, "Solve time", time_text, time_note)


def known_fit(solver: str) -> FitsAt | None:
    """Where ``solver`` fits on the session's model at its options and time limit (:func:`explorer.jobs.results.fits_at`)."""
    return fits_at(state.graph(), solver, options_key(state.solve_options(solver)), state.time_limit())


def outcome_message(outcome: SolveOutcome, solver: str, budget: int, button_key: str | None = None) -> None:
    """Say why there is no schedule: an error or a refusal; a search stopped at its time limit (not a proof: more
    time may find one); or infeasible. With where the solver fits (the smallest budget at which one of its
    schedules was confirmed, :func:`known_fit`) and a button to go there."""
    if outcome.status in (FAILED, REFUSED):
        st.error(f"{plain(solver)} {'refused the graph' if outcome.status == REFUSED else 'failed'}: "
                 f"{plain(outcome.detail)}")
        return
    if outcome.status == STOPPED:
        text = (f"**{plain(solver)} stopped at its time limit without a schedule within {format_bytes(budget)}** "
                f"({plain(outcome.detail)}). This is not a proof that none exists: a longer time limit (sidebar) "
                f"may find one.")
    else:
        text = f"**{format_bytes(budget)} is infeasible for {plain(solver)}**: {plain(outcome.detail)}."
    fit = known_fit(solver)
    if fit is not None:
        st.warning(text + f" It fits at **{fit}** (its smallest budget whose schedule the simulator confirmed; "
                          f"peak {format_bytes(fit.peak)}).", icon=":material/block:")
        target = fit.budget
    elif outcome.smallest_feasible is not None:
        st.warning(text + f" No schedule of it is confirmed yet; it names **{format_bytes(outcome.smallest_feasible)}** "
                          f"as feasible.", icon=":material/block:")
        target = outcome.smallest_feasible
    else:
        st.warning(text + " No schedule of it is confirmed yet at any budget.", icon=":material/block:")
        return
    if button_key and st.button(f"Use {format_bytes(target)}", key=button_key, icon=":material/arrow_forward:"):
        state.set_budget(target)
        st.rerun()


def log_scale_toggle(key: str = "w_pareto_log") -> bool:
    """The Pareto chart's log-scale switch for the overhead axis (kept in the session across pages)."""
    st.session_state[key] = state.pareto_log()
    st.toggle("Log-scale overhead", key=key, on_change=_log_scale_changed, args=(key,),
              help="Near the lower bound overheads span orders of magnitude: a log axis tells the solvers apart "
                   "there. Budgets that need no recomputation (0 %) have no place on it.")
    return state.pareto_log()


@safety.callback
def _log_scale_changed(key: str) -> None:
    state.set_pareto_log(st.session_state[key])


LP_BOUND = "pareto_lp_bound"
"""Session key: whether the Pareto chart asks for Checkmate's LP bound (kept across pages)."""


def _kept_toggle(label: str, session_key: str, key: str, help: str, rerun: str | None) -> bool:
    """A toggle whose value the session keeps under ``session_key`` (across pages; off until asked), rerunning the
    fragment ``rerun`` when it changes (the one that starts the work it asks for)."""
    @safety.callback
    def changed() -> None:
        st.session_state[session_key] = st.session_state[key]
        if rerun is not None:
            st.rerun(rerun)
    st.session_state[key] = st.session_state.setdefault(session_key, False)
    st.toggle(label, key=key, on_change=changed, help=help)
    return bool(st.session_state[session_key])


def lp_bound_toggle(key: str = "w_pareto_lp_bound", rerun: str | None = None) -> bool:
    """Whether to compute and draw Checkmate's LP bound, the "best possible" line (off until asked: an LP per
    budget takes seconds to minutes and often proves nothing within the time limit on graphs of hundreds of
    nodes)."""
    return _kept_toggle("LP bound", LP_BOUND, key, "Checkmate's LP relaxation at six budgets: no schedule in the "
                        "graph's topological order costs less. Solved in the background, one LP per budget (each up "
                        "to the time limit).", rerun)


DEPLOYED = "pareto_deployed"
"""Session key: whether the Pareto chart draws what users deploy instead (the peers), kept across pages."""


def deployed_toggle(key: str = "w_pareto_deployed", rerun: str | None = None) -> bool:
    """Whether to draw the deployed policies (the ``peers`` family) beside the chosen solvers, each as a user meets
    it: Hugging Face's checkpointing at every n and torchtitan's policy as points, auto-SAC and the partitioner as
    curves (off until asked: the partitioner compiles once per budget)."""
    return _kept_toggle("What users deploy", DEPLOYED, key, "Hugging Face's gradient_checkpointing_enable at every "
                        "n layers and torchtitan's op policy (points: they follow no budget), PyTorch's auto-SAC and "
                        "torch.compile's partitioner (curves), on the same simulator as ours. Solved in the "
                        "background.", rerun)


def deployed_wanted() -> bool:
    """Whether the session asked for the deployed policies on the chart (see :func:`deployed_toggle`)."""
    return bool(st.session_state.get(DEPLOYED, False))


def lp_bound_wanted() -> bool:
    """Whether the session asked for the LP bound (see :func:`lp_bound_toggle`)."""
    return bool(st.session_state.get(LP_BOUND, False))


GAP_COLUMN = "MIP gap"
FITS_COLUMN = "fits at"
COLUMN_HELP = {
    GAP_COLUMN: "The exact solver's relative optimality gap, (cost − proven lower bound) / cost: 0 means proved "
                "optimal (for the solver's formulation); a positive gap means the time limit ran out first.",
    FITS_COLUMN: "The smallest budget at which a schedule of this solver was confirmed by the simulator (its sweep "
                 "and its solves so far).",
}


def comparison_rows(outcomes: dict[str, SolveOutcome | None]) -> list[dict[str, Any]]:
    """The table of the solvers at the current budget, one row per solver (in the mapping's order).

    Missing values are :class:`~explorer.widgets.table.Missing` with the reason. A ``MIP gap`` column
    appears when any schedule's solver reports a gap (:func:`remat_core.analysis.pareto.reported_gap`).
    """
    gaps = {name: reported_gap(o.solver_info) if o is not None and o.feasible else None
            for name, o in outcomes.items()}
    rows = []
    for name, outcome in outcomes.items():
        fit = known_fit(name)
        if outcome is None or not outcome.feasible:
            status, why = _no_schedule(outcome)
            row = {"solver": name, "status": status, "peak": Missing(why), "overhead": Missing(why),
                   "recomputed": Missing(why), "solve ms": Missing(why)}
        else:
            stats = outcome.stats
            row = {"solver": name, "status": "exact solver" if get_solver(name).exact else "heuristic",
                   "peak": format_bytes(stats["peak"]), "overhead": percent(time_overhead(stats)),
                   "recomputed": f"{stats['recomputed_nodes']:,}", "solve ms": f"{stats['solve_seconds'] * 1e3:,.1f}"}
        if any(g is not None for g in gaps.values()):
            row[GAP_COLUMN] = gap_text(gaps[name], name, outcome)
        row[FITS_COLUMN] = str(fit) if fit is not None else Missing(
            "no schedule of it is confirmed yet: its sweep or a solve at a feasible budget will tell")
        rows.append(row)
    return rows


def _no_schedule(outcome: SolveOutcome | None) -> tuple[str, str]:
    """The status of a solver without a schedule at the budget, and the reason its cells are empty."""
    if outcome is None:
        return "solving…", "still solving at this budget: shown as soon as it lands"
    if outcome.status == INFEASIBLE:
        return "infeasible", f"no schedule fits this budget: {outcome.detail}"
    if outcome.status == STOPPED:
        return "stopped", f"stopped at its time limit without a schedule (not proved infeasible): {outcome.detail}"
    return outcome.status, f"no schedule: {outcome.detail}"


def gap_text(gap: float | None, solver: str = "", outcome: SolveOutcome | None = None) -> str | Missing:
    """A reported optimality gap in the table: ``0 % (optimal)``, three digits, or a dash saying why there is none."""
    if gap is not None:
        return "0% (optimal)" if gap == 0 else f"{100 * gap:.3g}%"
    if outcome is None or not outcome.feasible:
        return Missing("no schedule at this budget, so no gap")
    if not get_solver(solver).exact:
        return Missing(f"{solver} is a heuristic: it proves no bound, so it reports no gap")
    return Missing(f"{solver} proved no bound within its time limit")


def comparison_table(outcomes: dict[str, SolveOutcome | None]) -> None:
    """:func:`comparison_rows` drawn, with the columns' help as header tooltips."""
    table(comparison_rows(outcomes), COLUMN_HELP)
